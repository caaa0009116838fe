//! Ground truth from the JVM itself: JFR's `jdk.VirtualThreadPinned` events, threshold 0,
//! recorded by the JDK's own `jcmd` and read back with its `jfr` tool.

use std::process::Command;

use serde_json::Value;

use super::{assert_ok, jdk_tool, scratch};

/// One `jdk.VirtualThreadPinned` event.
#[derive(Debug, Clone)]
pub struct Pinned {
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    /// JDK 24+ only.
    pub reason: Option<String>,
    pub operation: Option<String>,
    /// `Thread.threadId()` of the virtual thread that pinned.
    pub thread_id: Option<u64>,
    /// Its stack, innermost first: `pkg.Class.method` and the line, where JFR gives one.
    /// Frames of hidden methods (which Java's stack traces leave out, JFR's text view too)
    /// are left out.
    pub frames: Vec<(String, Option<u32>)>,
    pub truncated: bool,
}

/// Frames of each event's stack trace read back.
const STACK_DEPTH: u32 = 64;

pub struct Jfr {
    major: u32,
    pid: u32,
    file: std::path::PathBuf,
}

const SETTINGS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="pinned" description="every pinned virtual thread">
  <event name="jdk.VirtualThreadPinned">
    <setting name="enabled">true</setting>
    <setting name="stackTrace">true</setting>
    <setting name="threshold">0 ms</setting>
  </event>
</configuration>
"#;

impl Jfr {
    pub fn start(major: u32, pid: u32, name: &str) -> Self {
        let settings = scratch(&format!("{name}.jfc"));
        let file = scratch(&format!("{name}.jfr"));
        Self::start_at(major, pid, [&settings, &settings], [&file, &file])
    }

    /// For a JVM in its own mount namespace with a `/tmp` of its own: the files go there, and
    /// are read through its root.
    #[allow(dead_code)]
    pub fn start_contained(major: u32, pid: u32, name: &str) -> Self {
        let inside = |ext: &str| std::path::PathBuf::from(format!("/tmp/{name}.{ext}"));
        let outside =
            |ext: &str| std::path::PathBuf::from(format!("/proc/{pid}/root/tmp/{name}.{ext}"));
        Self::start_at(
            major,
            pid,
            [&outside("jfc"), &inside("jfc")],
            [&outside("jfr"), &inside("jfr")],
        )
    }

    /// Starts a recording with the settings and file at paths as pinprof's tests see them
    /// and as the JVM does.
    fn start_at(
        major: u32,
        pid: u32,
        [settings, settings_seen]: [&std::path::PathBuf; 2],
        [file, file_seen]: [&std::path::PathBuf; 2],
    ) -> Self {
        std::fs::write(settings, SETTINGS).unwrap();
        let _ = std::fs::remove_file(file);
        let out = Command::new(jdk_tool(major, "jcmd"))
            .arg(pid.to_string())
            .arg("JFR.start")
            .arg("name=pinprof-truth")
            .arg(format!("settings={}", settings_seen.display()))
            .arg(format!("filename={}", file_seen.display()))
            .output()
            .expect("run jcmd");
        assert_ok(&out, "jcmd JFR.start");
        Self {
            major,
            pid,
            file: file.clone(),
        }
    }

    /// Stops the recording and returns its pinned events.
    pub fn stop(self) -> Vec<Pinned> {
        let out = Command::new(jdk_tool(self.major, "jcmd"))
            .args([&self.pid.to_string(), "JFR.stop", "name=pinprof-truth"])
            .output()
            .expect("run jcmd");
        assert_ok(&out, "jcmd JFR.stop");
        let out = Command::new(jdk_tool(self.major, "jfr"))
            .args(["print", "--json", "--stack-depth", "128"])
            .args(["--events", "jdk.VirtualThreadPinned"])
            .arg(&self.file)
            .output()
            .expect("run jfr");
        assert_ok(&out, "jfr print");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("jfr prints JSON");
        doc["recording"]["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| {
                let v = &e["values"];
                Pinned {
                    start_unix_ns: iso_ns(v["startTime"].as_str().unwrap()),
                    duration_ns: iso_duration_ns(v["duration"].as_str().unwrap()),
                    reason: v["pinnedReason"].as_str().map(String::from),
                    operation: v["blockingOperation"].as_str().map(String::from),
                    thread_id: v["eventThread"]["javaThreadId"].as_u64(),
                    frames: v["stackTrace"]["frames"]
                        .as_array()
                        .map(|frames| {
                            frames
                                .iter()
                                .filter(|f| f["method"]["hidden"] != true)
                                .map(frame)
                                .collect()
                        })
                        .unwrap_or_default(),
                    truncated: v["stackTrace"]["truncated"].as_bool().unwrap_or(false),
                }
            })
            .collect()
    }
}

/// A JFR stack frame as `pkg.Class.method` and its line (JFR says -1 or 0 for none).
fn frame(f: &Value) -> (String, Option<u32>) {
    let class = f["method"]["type"]["name"].as_str().unwrap_or("?");
    let method = f["method"]["name"].as_str().unwrap_or("?");
    let line = f["lineNumber"]
        .as_i64()
        .and_then(|l| u32::try_from(l).ok())
        .filter(|&l| l > 0);
    (format!("{}.{method}", class.replace('/', ".")), line)
}

/// `2026-11-30T04:45:05.475477190Z` (UTC) as ns since the Unix epoch.
pub fn iso_ns(text: &str) -> u64 {
    let (date, time) = text.trim_end_matches('Z').split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<u64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    let frac_ns: u64 = format!("{frac:0<9}")[..9].parse().unwrap();
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe - 719_468) as u64;
    ((days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2]) * 1_000_000_000) + frac_ns
}

/// `PT0.0075S`, `PT1M2.5S`, `PT1H...` as ns.
pub fn iso_duration_ns(text: &str) -> u64 {
    let mut rest = text.trim_start_matches("PT");
    let mut total = 0.0;
    for (unit, scale) in [('H', 3600.0), ('M', 60.0), ('S', 1.0)] {
        if let Some((number, tail)) = rest.split_once(unit) {
            total += number.parse::<f64>().unwrap() * scale;
            rest = tail;
        }
    }
    (total * 1e9).round() as u64
}
