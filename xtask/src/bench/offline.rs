//! The bench's offline part: how fast and in how much memory the views are made from a large
//! recording. A JDK 25 JVM handing tokens between threads (tens of thousands of switches a
//! second) is recorded until the recording holds at least a million events; then `report`
//! (JSON and text) and `flamegraph` are run on it a few times each, and each run's wall time
//! and peak resident memory (the kernel's own `ru_maxrss` of the child) are taken.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::json;

use super::{stats::median, tracer};
use crate::workload::Jvm;

/// The recording must hold at least this many events.
pub(super) const MIN_EVENTS: u64 = 1_000_000;
/// Each view must take less than this (wall clock, median of its runs)...
pub(super) const MAX_SECONDS: f64 = 1.0;
/// ...and less than this much resident memory at its peak.
pub(super) const MAX_RSS_BYTES: u64 = 200 << 20;
/// Runs of each view.
const RUNS: usize = 3;

/// The views measured: a name and pinprof's arguments after the recording's path.
const VIEWS: [(&str, &[&str]); 4] = [
    (
        "report --format json",
        &["report", "{}", "--format", "json"],
    ),
    ("report (text)", &["report", "{}"]),
    ("flamegraph (off-CPU)", &["flamegraph", "{}", "-o", "-"]),
    (
        "flamegraph --kind pinned",
        &["flamegraph", "{}", "--kind", "pinned", "-o", "-"],
    ),
];

pub(super) struct View {
    name: &'static str,
    seconds: Vec<f64>,
    rss_bytes: Vec<u64>,
}

impl View {
    fn seconds(&self) -> f64 {
        median(&self.seconds)
    }

    fn rss(&self) -> u64 {
        self.rss_bytes.iter().copied().max().unwrap_or(0)
    }
}

pub(super) struct Offline {
    file: PathBuf,
    file_bytes: u64,
    recorded: tracer::Summary,
    views: Vec<View>,
}

/// Records the high-switch workload into `out` and measures every view of the recording.
pub(super) fn run(pinprof: &Path, java: &Path, classes: &Path, out: &Path) -> Result<Offline> {
    let jvm = Jvm::start(java, classes, "Handoff", &["2"])?;
    let file = out.join("offline.pinrec");
    // A first guess at the length, then once more as long as the rate says is needed.
    let mut seconds = 10.0_f64;
    let mut recorded = record(pinprof, jvm.pid, &file, seconds)?;
    if recorded.events < MIN_EVENTS {
        let rate = recorded.events as f64 / recorded.seconds.max(1e-3);
        seconds = (MIN_EVENTS as f64 * 1.15 / rate.max(1.0)).clamp(seconds, 120.0);
        println!(
            "bench: offline: {} events in {:.1} s, recording again for {seconds:.0} s",
            recorded.events, recorded.seconds
        );
        recorded = record(pinprof, jvm.pid, &file, seconds)?;
    }
    drop(jvm);
    if recorded.events < MIN_EVENTS {
        bail!(
            "offline: the recording holds only {} events (at least {MIN_EVENTS} are needed)",
            recorded.events
        );
    }
    let file_bytes = std::fs::metadata(&file)?.len();
    println!(
        "bench: offline: {} events, {:.1} MB, in {}",
        recorded.events,
        file_bytes as f64 / 1e6,
        file.display()
    );
    let mut views = Vec::new();
    for (name, args) in VIEWS {
        let mut view = View {
            name,
            seconds: Vec::new(),
            rss_bytes: Vec::new(),
        };
        for _ in 0..RUNS {
            let (wall, rss) = measure_view(pinprof, args, &file)?;
            view.seconds.push(wall.as_secs_f64());
            view.rss_bytes.push(rss);
        }
        println!(
            "bench: offline: {name}: {:.2} s, {:.0} MB peak, {:.0} events/s",
            view.seconds(),
            view.rss() as f64 / (1 << 20) as f64,
            recorded.events as f64 / view.seconds()
        );
        views.push(view);
    }
    Ok(Offline {
        file,
        file_bytes,
        recorded,
        views,
    })
}

fn record(pinprof: &Path, pid: u32, file: &Path, seconds: f64) -> Result<tracer::Summary> {
    let output = Command::new(pinprof)
        .args(["record", "--quiet", "--force", "--pid", &pid.to_string()])
        .args(["--duration", &format!("{seconds:.0}"), "--output"])
        .arg(file)
        .stdout(Stdio::null())
        .output()
        .context("cannot run pinprof record")?;
    let said = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!("pinprof record failed ({}): {said}", output.status);
    }
    let summary = tracer::pinprof_summary(&said)?;
    if summary.lost > 0 {
        bail!(
            "offline: pinprof record lost {} events: {said}",
            summary.lost
        );
    }
    Ok(summary)
}

/// One run of a view: its wall time and its peak resident memory, in bytes.
fn measure_view(pinprof: &Path, args: &[&str], file: &Path) -> Result<(Duration, u64)> {
    let file = file.to_str().context("the recording's path is not UTF-8")?;
    let args: Vec<&str> = args
        .iter()
        .map(|&a| if a == "{}" { file } else { a })
        .collect();
    let started = Instant::now();
    let child = Command::new(pinprof)
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run pinprof")?;
    let pid = child.id() as libc::pid_t;
    // What it says is read as it comes: a full pipe would keep it from exiting.
    let mut child = child;
    let said = child.stderr.take().map(|mut stderr| {
        std::thread::spawn(move || {
            use std::io::Read as _;
            let mut said = String::new();
            let _ = stderr.read_to_string(&mut said);
            said
        })
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for the kernel to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, with pointers to locals; std never waits on this Child
    // (dropping one does not), so the pid is reaped once, here.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    drop(child);
    let said = said.and_then(|t| t.join().ok()).unwrap_or_default();
    if waited != pid {
        bail!(
            "wait4 on pinprof failed: {}",
            std::io::Error::last_os_error()
        );
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!(
            "pinprof {} failed (status {status}): {said}",
            args.join(" ")
        );
    }
    // ru_maxrss is in KiB on Linux.
    Ok((wall, usage.ru_maxrss as u64 * 1024))
}

impl Offline {
    pub(super) fn judge(&self, failures: &mut Vec<String>) {
        for v in &self.views {
            if v.seconds() >= MAX_SECONDS {
                failures.push(format!(
                    "offline: {} of {} events took {:.2} s (goal: under {MAX_SECONDS} s)",
                    v.name,
                    self.recorded.events,
                    v.seconds()
                ));
            }
            if v.rss() >= MAX_RSS_BYTES {
                failures.push(format!(
                    "offline: {} of {} events took {:.0} MB at its peak (goal: under {} MB)",
                    v.name,
                    self.recorded.events,
                    v.rss() as f64 / (1 << 20) as f64,
                    MAX_RSS_BYTES >> 20
                ));
            }
        }
    }

    pub(super) fn print(&self, table: &mut String) {
        let _ = writeln!(
            table,
            "Offline (a recording of {} events, {:.1} MB, of JDK 25 Handoff; median of {RUNS} runs, peak resident memory the largest):",
            self.recorded.events,
            self.file_bytes as f64 / 1e6
        );
        let _ = writeln!(
            table,
            "  {:<26} {:>8} {:>10} {:>14}",
            "view", "seconds", "peak MB", "events/s"
        );
        for v in &self.views {
            let _ = writeln!(
                table,
                "  {:<26} {:>8.2} {:>10.0} {:>14.0}",
                v.name,
                v.seconds(),
                v.rss() as f64 / (1 << 20) as f64,
                self.recorded.events as f64 / v.seconds()
            );
        }
    }

    pub(super) fn to_json(&self) -> serde_json::Value {
        json!({
            "recording": self.file.display().to_string(),
            "events": self.recorded.events,
            "bytes": self.file_bytes,
            "goal": { "max_seconds": MAX_SECONDS, "max_rss_bytes": MAX_RSS_BYTES },
            "views": self.views.iter().map(|v| json!({
                "view": v.name,
                "seconds": v.seconds,
                "median_seconds": v.seconds(),
                "rss_bytes": v.rss_bytes,
                "events_per_second": self.recorded.events as f64 / v.seconds(),
            })).collect::<Vec<_>>(),
        })
    }
}
