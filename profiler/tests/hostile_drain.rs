//! A target that makes pinprof's symbol inputs large must not stall the thread that empties the
//! ring buffer. The JVM (the bundled demo shop, run by nobody) maps one page of a file with a
//! 3,800-character path 60,000 times (its /proc/PID/maps grows to about 230 MB) and writes a
//! 256 MiB perf map that it touches every second; root's `pinprof record` must lose no event
//! and spend at most twice the CPU it spends on the same JVM before the flood.

mod common;

use std::{
    io::Read as _,
    os::unix::fs::MetadataExt as _,
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use common::{
    nobody::{NOBODY as JVM_ID, Stage},
    *,
};

/// Mappings the JVM adds (the kernel's default limit is 65,530 a process).
const MAPPINGS: usize = 60_000;
/// The perf map's size, MiB.
const PERF_MAP_MIB: u64 = 256;
/// Each recording's length.
const SECONDS: u64 = 10;

/// A file removed when dropped (the 256 MiB perf map, however the test ends).
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// One `pinprof record` as root, as the kernel accounts for it.
struct Run {
    /// utime + stime of pinprof's whole process, seconds.
    cpu: f64,
    /// From start to exit.
    wall: Duration,
    stderr: String,
    lost: u64,
    events: u64,
    report: serde_json::Value,
}

/// Records `pid` for `SECONDS` as root; pinprof's CPU read from /proc/PID/stat once it has
/// exited and before it is reaped (the zombie keeps its whole account).
fn record_as_root(pid: u32, name: &str) -> Run {
    let out = scratch(name);
    let started = Instant::now();
    let mut child = pinprof()
        .args(["record", "--quiet", "--pid", &pid.to_string()])
        .args(["--duration", &SECONDS.to_string(), "--output"])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pinprof record");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    // --duration must be honoured whatever the target does: a generous deadline, then a kill.
    let deadline = started + Duration::from_secs(SECONDS + 60);
    loop {
        // SAFETY: waitid on our own child with a zeroed siginfo; WNOWAIT leaves it a zombie.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOWAIT | libc::WNOHANG;
        let r = unsafe { libc::waitid(libc::P_PID, child.id(), &mut info, flags) };
        assert_eq!(r, 0, "waitid: {}", std::io::Error::last_os_error());
        // SAFETY: filled in by waitid (zero when the child has not exited yet).
        if unsafe { info.si_pid() } != 0 {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "pinprof record -d {SECONDS}s still ran after {:?}: {}",
                started.elapsed(),
                reader.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let wall = started.elapsed();
    let cpu = cpu_seconds(child.id());
    let status = child.wait().unwrap();
    let stderr = reader.join().unwrap();
    assert!(
        status.success(),
        "pinprof record failed ({status}): {stderr}"
    );
    let report = report_json(&out);
    let lost = report["lost_events"].as_u64().unwrap();
    let events = closing_events(&stderr);
    eprintln!(
        "{name}: {events} events, {lost} lost, pinprof CPU {cpu:.2} s in {:.1} s\n{stderr}",
        wall.as_secs_f64()
    );
    Run {
        cpu,
        wall,
        stderr,
        lost,
        events,
        report,
    }
}

/// utime + stime (fields 14 and 15 of /proc/PID/stat), seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The name (field 2) may hold spaces: count from the parenthesis that closes it.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks as f64 / hz
}

/// The event count of pinprof's closing line ("pinprof: recorded N events in ...").
fn closing_events(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("pinprof: recorded "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no closing line in {stderr}"))
}

#[test]
fn a_flood_of_mappings_and_a_huge_perf_map_cost_no_event() {
    let stage = Stage::new("drain-flood", 21);
    let mut jvm = stage.start_jvm(&[], "SymbolFlood", &[]);
    let pid = jvm.pid;
    let perf_map = PathBuf::from(format!("/tmp/perf-{pid}.map"));
    // A map another JVM of this pid left behind (pids wrap) would not be this one's.
    let _ = std::fs::remove_file(&perf_map);
    let _removed = Removed(perf_map.clone());
    // Past its start-up: the shop at its steady rate.
    std::thread::sleep(Duration::from_secs(3));
    let quiet = record_as_root(pid, "drain-quiet.pinrec");

    say(&mut jvm, &format!("flood {MAPPINGS} {PERF_MAP_MIB}"));
    let flooded = jvm.wait_for("flooded ", Duration::from_secs(180));
    let flooded = flooded.expect("the JVM flooded its maps and perf map");
    eprintln!("{flooded}");
    // The flood as the kernel shows it: the maps' lines and bytes, the perf map's size and
    // owner.
    let maps = std::fs::read(format!("/proc/{pid}/maps")).unwrap();
    let lines = maps.iter().filter(|&&b| b == b'\n').count();
    eprintln!("maps: {lines} mappings, {} bytes", maps.len());
    assert!(lines > MAPPINGS, "{lines} mappings");
    assert!(maps.len() > 200 << 20, "{} bytes of maps", maps.len());
    drop(maps);
    let meta = std::fs::metadata(&perf_map).unwrap();
    assert_eq!(meta.len(), PERF_MAP_MIB << 20);
    assert_eq!(meta.uid(), JVM_ID, "the perf map is the JVM user's");
    let mtime = meta.modified().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let touched = std::fs::metadata(&perf_map).unwrap().modified().unwrap();
    assert!(touched > mtime, "the perf map is touched every second");

    let flood = record_as_root(pid, "drain-flood.pinrec");

    assert_eq!(quiet.lost, 0, "events lost before the flood");
    assert_eq!(flood.lost, 0, "events lost to the flood");
    // The demo's rate held: the JVM did its work and pinprof saw it.
    assert!(
        flood.events * 2 >= quiet.events,
        "{} events under the flood, {} before",
        flood.events,
        quiet.events
    );
    assert!(
        flood.wall < quiet.wall + Duration::from_secs(5),
        "--duration {SECONDS}s took {:?} under the flood, {:?} before",
        flood.wall,
        quiet.wall
    );
    assert!(
        flood.cpu <= 2.0 * quiet.cpu,
        "pinprof's CPU: {:.2} s under the flood, {:.2} s before",
        flood.cpu,
        quiet.cpu
    );
    // What pinprof did not read is said once, with its figures: on the terminal and in the
    // recording. The perf map is over its cap; the maps are read whole where the kernel
    // answers PROCMAP_QUERY (6.11), else cut.
    let said = [
        (
            "the target's memory map is larger than pinprof reads".to_string(),
            0..=1,
        ),
        (
            format!(
                "the perf map /tmp/perf-{pid}.map is {} bytes",
                PERF_MAP_MIB << 20
            ),
            1..=1,
        ),
    ];
    for (what, times) in &said {
        let lines = flood
            .stderr
            .lines()
            .filter(|l| l.starts_with("pinprof: warning:") && l.contains(what.as_str()))
            .count();
        assert!(
            times.contains(&lines),
            "'{what}' said {lines} times: {}",
            flood.stderr
        );
        let recorded = strings(&flood.report["capture"]["warnings"])
            .into_iter()
            .filter(|w| w.contains(what.as_str()))
            .count();
        assert_eq!(recorded, lines, "'{what}' in the recording");
    }
}
