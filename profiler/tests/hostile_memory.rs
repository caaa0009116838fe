//! A JVM whose owner makes root's pinprof hold what it likes: names as long as a class file
//! allows, thousands of threads with long names, a thread list that never stands still. The
//! JVM runs as an unprivileged user (nobody), pinprof as root, outside the JVM's memory cgroup:
//! whatever it is made to keep costs the host. Each attack runs against a real JVM under a
//! small `--memory-budget`; pinprof's peak resident memory must stay under that budget, the
//! recording
//! under its cap, the run must end when asked (a duration, SIGINT) with its end marker, and what
//! was cut or dropped must be counted in the closing line and the report.
//!
//! The peak is the kernel's own account, `VmHWM` in /proc/PID/status, read every 20 ms while
//! pinprof runs (it only grows; a peak in pinprof's last 20 ms, as it frees everything, would
//! be missed). Not `ru_maxrss` from `wait4`: the kernel keeps there the largest of the process
//! before its exec too, which is the test's own size (the child shares it until the exec).
//!
//! How long the attacks run: before the budget (pinprof at bdb2ae2), 65,000-character method
//! names grew pinprof by 60-100 MB a second here (from 80 MB to 1.6 GB resident and an 780 MB
//! recording in 15 s), and the thread flood by hundreds of MB a second (the issue measured
//! 9.7 GB and a 39 GB recording in 105 s): each crossed the 128 MiB budget given here within
//! the first seconds. 20 s of each is ten times that, and short enough for CI.

mod common;

use std::{
    io::Read as _,
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use common::{nobody::Stage, *};

/// The budget the attacks run under: above what pinprof itself takes before the target grows
/// anything (its code, the 16 MiB ring buffer, the JVM's symbols: 75-90 MiB for the debug
/// build), and a small fraction of what they made it hold before.
const BUDGET_MIB: u64 = 128;

/// How long each attack runs.
const ATTACK: Duration = Duration::from_secs(20);

/// What a run may take past what it was asked to: starting (the JVM's symbols, the attach
/// protocol, loading the programs: about 1 s here), the last checkpoint, and ending (the
/// records the loop had no time for and the stacks of the waits still open: at most 2 s by
/// design), on a busy 2-core host.
const SLACK: Duration = Duration::from_secs(6);

/// How a pinprof run went.
struct Ran {
    /// Its standard error (the closing line).
    stderr: String,
    /// Its exit code (None: killed by a signal).
    code: Option<i32>,
    /// From its start to its exit.
    took: Duration,
    /// Its peak resident memory (`VmHWM`), as last read before it exited.
    peak_bytes: u64,
    /// Whether it had to be killed, past twice its budget (its figures are then the kill's).
    killed: bool,
}

/// Runs pinprof with `args`, sends SIGINT after `interrupt` if given, and watches its
/// resident memory: past `2 x budget` it is killed (a pinprof that holds what the target makes
/// would take the machine down, not just fail), and so it is past `deadline`.
fn run_watched(args: &[String], interrupt: Option<Duration>, deadline: Duration) -> Ran {
    let kill_above = 2 * (BUDGET_MIB << 20);
    let started = Instant::now();
    let mut child = pinprof()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pinprof");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let pid = child.id() as i32;
    let mut interrupted = false;
    let mut killed = false;
    let mut peak = 0;
    let status = loop {
        // Read before looking for its exit: once reaped, its figures are gone.
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kib = |field: &str| -> Option<u64> {
            let line = status.lines().find(|l| l.starts_with(field))?;
            line.split_whitespace().nth(1)?.parse().ok()
        };
        let resident = kib("VmRSS:").unwrap_or(0) * 1024;
        peak = peak.max(kib("VmHWM:").unwrap_or(0) * 1024);
        let mut code = 0;
        // SAFETY: waitpid on our own child, with a valid out-pointer.
        let reaped = unsafe { libc::waitpid(pid, &mut code, libc::WNOHANG) };
        if reaped == pid {
            break code;
        }
        assert_eq!(reaped, 0, "waitpid: {}", std::io::Error::last_os_error());
        let signal = if resident > kill_above || started.elapsed() > deadline {
            killed = true;
            Some(libc::SIGKILL)
        } else if interrupt.is_some_and(|at| started.elapsed() >= at) && !interrupted {
            interrupted = true;
            Some(libc::SIGINT)
        } else {
            None
        };
        if let Some(signal) = signal {
            // SAFETY: kill(2) on our own child, not reaped yet.
            unsafe { libc::kill(pid, signal) };
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // (Reaped here: the child is not waited for again.)
    std::mem::forget(child);
    let ran = Ran {
        stderr: reader.join().unwrap(),
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        took: started.elapsed(),
        peak_bytes: peak,
        killed,
    };
    eprintln!(
        "pinprof {}: {:?}, peak {:.1} MiB, exit {:?}{}\n{}",
        args[0],
        ran.took,
        ran.peak_bytes as f64 / f64::from(1 << 20),
        ran.code,
        if ran.killed { " (killed)" } else { "" },
        ran.stderr
    );
    ran
}

/// `record` of `pid` into `out` under the budget, with more `options`.
fn record_args(pid: u32, out: &Path, options: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "record",
        "--quiet",
        "--pid",
        &pid.to_string(),
        "--memory-budget",
        &format!("{BUDGET_MIB}MiB"),
        "--output",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(out.display().to_string());
    args.extend(options.iter().map(|s| s.to_string()));
    args
}

/// What a run must show whatever the attack: it was not killed, stayed in its budget, exited
/// well, and its recording reads to its end marker, what it cut counted in the report as in
/// the closing line. The report, and its `capture.memory_budget`.
fn assert_within_budget(
    ran: &Ran,
    recording: &Path,
    cap: u64,
) -> (serde_json::Value, serde_json::Value) {
    assert!(!ran.killed, "pinprof had to be killed:\n{}", ran.stderr);
    let budget = BUDGET_MIB << 20;
    assert!(
        ran.peak_bytes < budget,
        "pinprof's peak resident memory {:.1} MiB is over its budget of {BUDGET_MIB} MiB",
        ran.peak_bytes as f64 / f64::from(1 << 20)
    );
    assert_eq!(ran.code, Some(0), "pinprof record failed:\n{}", ran.stderr);
    let size = std::fs::metadata(recording).unwrap().len();
    eprintln!(
        "recording: {:.1} MiB (cap {} MiB)",
        size as f64 / f64::from(1 << 20),
        cap >> 20
    );
    assert!(
        size <= cap,
        "the recording is {size} bytes, over its cap of {cap}"
    );
    let report = report_json(recording);
    let warnings = strings(&report["capture"]["warnings"]);
    assert!(
        !warnings.iter().any(|w| w.contains("end marker")),
        "the recording has no end marker: {warnings:?}"
    );
    let cuts = report["capture"]["memory_budget"].clone();
    assert_eq!(ns(&cuts["bytes"]), budget as f64, "{cuts}");
    // The closing line says what the report says.
    let closing = ran
        .stderr
        .lines()
        .find(|l| l.starts_with("pinprof: recorded"))
        .unwrap_or_else(|| panic!("no closing line:\n{}", ran.stderr));
    for (field, words) in [
        ("names_cut", "names cut to 1 KiB"),
        ("threads_not_listed", "Java threads not listed"),
        ("stacks_forgotten", "stacks forgotten"),
    ] {
        let n = cuts[field].as_u64().unwrap();
        if n > 0 {
            assert!(
                closing.contains(&format!("{n} {words}")),
                "the closing line does not say {n} {words}: {closing}"
            );
        }
    }
    (report, cuts)
}

/// The count the workload printed last as `prefix <n>` (once a second): the lines read
/// meanwhile are passed over.
fn latest(jvm: &mut Jvm, prefix: &str) -> u64 {
    let mut last = None;
    while let Ok(line) = jvm.lines.try_recv() {
        if let Some(n) = line.strip_prefix(prefix) {
            last = Some(n.trim().parse().unwrap());
        }
    }
    let fresh = jvm.wait_for(prefix, Duration::from_secs(5)).unwrap();
    let fresh: u64 = fresh.trim_start_matches(prefix).trim().parse().unwrap();
    fresh.max(last.unwrap_or(0))
}

/// The Java frames of the report's stacks (blocked and on-CPU), as named.
fn frame_names(report: &serde_json::Value) -> Vec<String> {
    let mut names = Vec::new();
    for stack in report["off_cpu"]["stacks"].as_array().unwrap() {
        names.extend(strings(&stack["frames"]).into_iter().map(String::from));
    }
    names
}

/// Plain Java that makes a new stack every few milliseconds through methods named with
/// 65,000 characters: every name pinprof keeps is cut to 1 KiB, the stacks it keeps to write
/// once are forgotten when their share is full, and SIGINT ends the recording at once.
#[test]
fn long_method_names_cost_at_most_the_budget() {
    let stage = Stage::new("memory-names", 21);
    let mut jvm = stage.start_jvm(&[], "LongNames", &["65000", "2", "2"]);
    jvm.wait_for("classes ", Duration::from_secs(20)).unwrap();
    let classes = |jvm: &mut Jvm| latest(jvm, "classes ");
    let out = scratch("hostile-memory-names.pinrec");
    let cap: u64 = 256 << 20;
    let args = record_args(jvm.pid, &out, &["--max-size", "256MiB"]);
    let before = classes(&mut jvm);
    let ran = run_watched(&args, Some(ATTACK), ATTACK + 30 * SLACK);
    let after = classes(&mut jvm);
    assert!(
        ran.took <= ATTACK + SLACK,
        "SIGINT at {ATTACK:?}: pinprof ended only after {:?}",
        ran.took
    );
    assert!(
        ran.stderr.contains("stopped: interrupted"),
        "{}",
        ran.stderr
    );
    let (report, cuts) = assert_within_budget(&ran, &out, cap);
    // The attack ran: thousands of distinct stacks, each through a name cut to 1 KiB.
    let made = after - before;
    eprintln!("the JVM made {made} stacks during the recording; pinprof says {cuts}");
    assert!(made > 2_000, "the JVM made only {made} classes");
    let names = frame_names(&report);
    let long: Vec<&String> = names.iter().filter(|n| n.contains("mmmm")).collect();
    assert!(
        !long.is_empty(),
        "no frame of the long-named methods in the report"
    );
    for name in &names {
        assert!(
            name.len() <= 1024,
            "a frame of {} bytes: {}...",
            name.len(),
            &name[..64]
        );
    }
    assert!(
        long.iter().all(|n| n.starts_with("LN") && n.ends_with('…')),
        "{:?}",
        &long[0][..64]
    );
    // Each stack walked named its method once; the stacks kept outlived their share.
    assert!(ns(&cuts["names_cut"]) >= made as f64 / 4.0, "{cuts}");
    assert!(ns(&cuts["stacks_forgotten"]) > 0.0, "{cuts}");
    // Most of the JVM's calls (each sleeps 2 ms, past the 1 ms Java stacks are walked for)
    // have their Java stack: the budget kept pinprof from holding them, not from seeing them.
    let walked = ns(&report["capture"]["java_stacks"]);
    assert!(
        walked >= made as f64 / 2.0,
        "{walked} Java stacks of {made} calls"
    );
}

/// 1,900 threads with 4 KiB names and one more born and ended in a loop: the thread list
/// goes to the recording as its changes, within its share (threads past it left out, and
/// counted), and `-d` ends the recording on time however slow each record is made to handle.
#[test]
fn a_flood_of_long_named_threads_costs_at_most_the_budget() {
    let stage = Stage::new("memory-threads", 21);
    let mut jvm = stage.start_jvm(&[], "ThreadFlood", &["1900", "4096"]);
    jvm.wait_for("churned ", Duration::from_secs(30)).unwrap();
    let out = scratch("hostile-memory-threads.pinrec");
    let cap: u64 = 512 << 20;
    let seconds = ATTACK.as_secs().to_string();
    let args = record_args(
        jvm.pid,
        &out,
        &["--duration", &seconds, "--max-size", "512MiB"],
    );
    let ran = run_watched(&args, None, ATTACK + 30 * SLACK);
    let churned = latest(&mut jvm, "churned ");
    assert!(
        ran.took <= ATTACK + SLACK,
        "-d {seconds}: pinprof ended only after {:?}",
        ran.took
    );
    assert!(
        ran.stderr.contains("stopped: duration reached"),
        "{}",
        ran.stderr
    );
    let (report, cuts) = assert_within_budget(&ran, &out, cap);
    // The window closes as the programs detach, once the last checkpoint is taken (reading
    // maps the churn fills: hundreds of ms here).
    let window = ns(&report["window"]["duration_ns"]) / 1e9;
    assert!(
        window <= ATTACK.as_secs_f64() + 3.0,
        "a window of {window:.1}s for -d {seconds}"
    );
    eprintln!("the JVM churned {churned} threads in all; pinprof says {cuts}");
    // Every Java name written is cut to 1 KiB; the threads listed and those left out are the
    // JVM's 1,900 sleepers and its own few dozen (the churned threads come and go).
    let threads = report["threads"].as_array().unwrap();
    let flood_names: Vec<&str> = threads
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("flood-"))
        .collect();
    let listed = flood_names.iter().filter(|n| n.len() > 15).count();
    for name in &flood_names {
        assert!(name.len() <= 1024, "a thread name of {} bytes", name.len());
    }
    assert!(
        flood_names
            .iter()
            .filter(|n| n.len() > 15)
            .all(|n| n.ends_with('…')),
        "a long name not marked cut"
    );
    let not_listed = cuts["threads_not_listed"].as_u64().unwrap() as usize;
    eprintln!("{listed} sleepers listed by their Java name, {not_listed} threads not listed");
    assert!(listed > 100, "only {listed} of the sleepers were listed");
    assert!(
        (1900..=1900 + 100).contains(&(listed + not_listed)),
        "{listed} listed + {not_listed} not listed, for 1,900 sleepers and the JVM's own"
    );
    assert!(ns(&cuts["names_cut"]) >= listed as f64, "{cuts}");
}

/// A recording that reaches its size cap ends there, said, readable to its end marker.
#[test]
fn a_recording_ends_at_its_size_cap() {
    let stage = Stage::new("memory-cap", 21);
    let mut jvm = stage.start_jvm(&[], "LongNames", &["65000", "2", "2"]);
    jvm.wait_for("classes ", Duration::from_secs(20)).unwrap();
    let out = scratch("hostile-memory-cap.pinrec");
    let cap: u64 = 2 << 20;
    let args = record_args(jvm.pid, &out, &["--duration", "60", "--max-size", "2MiB"]);
    let ran = run_watched(&args, None, Duration::from_secs(60) + 30 * SLACK);
    assert!(
        ran.stderr
            .contains("stopped: the recording reached its size cap (2 MiB"),
        "{}",
        ran.stderr
    );
    // Well before its duration: the cap ended it.
    assert!(ran.took < Duration::from_secs(40), "{:?}", ran.took);
    let (report, _) = assert_within_budget(&ran, &out, cap);
    let size = std::fs::metadata(&out).unwrap().len();
    assert!(
        size >= cap - cap / 4,
        "ended at {size} bytes, well before its cap"
    );
    let warnings = strings(&report["capture"]["warnings"]);
    assert!(
        warnings.iter().any(|w| w.contains("size cap")),
        "the report does not say the cap ended it: {warnings:?}"
    );
}
