//! Off-CPU capture of a live JVM, end to end: real BPF programs, a real JDK 21, the real binary.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// Sums what the sleeper says it slept ("slept <start> <end>" in CLOCK_MONOTONIC ns) inside
/// the window [from, to).
fn slept_in_window(jvm: &mut Jvm, from: u64, to: u64) -> u64 {
    let mut total = 0;
    while let Ok(line) = jvm.lines.recv_timeout(Duration::from_millis(300)) {
        let mut parts = line.split_whitespace();
        if parts.next() != Some("slept") {
            continue;
        }
        let start: u64 = parts.next().unwrap().parse().unwrap();
        let end: u64 = parts.next().unwrap().parse().unwrap();
        total += end.min(to).saturating_sub(start.max(from));
        if start > to {
            break;
        }
    }
    total
}

/// The sleeper thread's blocked time in the report is within 10% of what the JVM says it slept
/// in the report's window (and it slept at least `min_slept` ns there). What the JVM times
/// around a sleep also holds the wait for a CPU after its wake-up: on a busy host the thread
/// sleeps less than that, by at most its time runnable but not run (the kernel's account,
/// `preempted_ns`), which the lower bound allows for.
fn assert_blocked_as_slept(jvm: &mut Jvm, report: &serde_json::Value, min_slept: f64, what: &str) {
    let from = report["window"]["start_mono_ns"].as_u64().unwrap();
    let to = from + report["window"]["duration_ns"].as_u64().unwrap();
    let slept = slept_in_window(jvm, from, to) as f64;
    let row = thread(report, "sleeper");
    let blocked = ns(&row["blocked_ns"]);
    let waited_for_cpu = ns(&row["preempted_ns"]);
    assert!(
        slept > min_slept,
        "{what}: slept only {slept} ns in the window"
    );
    let error = (blocked - slept).abs() / slept;
    eprintln!(
        "{what}: blocked {blocked:.0} ns, slept {slept:.0} ns, {:.2}% off; runnable but not \
         run {waited_for_cpu:.0} ns",
        error * 100.0
    );
    assert!(
        blocked <= slept * 1.10,
        "{what}: blocked {blocked} ns, slept only {slept} ns"
    );
    assert!(
        blocked >= (slept - waited_for_cpu) * 0.90,
        "{what}: blocked {blocked} ns, slept {slept} ns, of which at most {waited_for_cpu} ns \
         waiting for a CPU"
    );
}

#[test]
fn sleeper_off_cpu_time_matches_what_it_slept() {
    let mut jvm = start(21, "Sleeper", &["0.5", "100"]);
    std::thread::sleep(Duration::from_millis(500));
    let recording = record(jvm.pid, 4.0, "sleeper.pinrec");
    let report = report_json(&recording);

    assert_blocked_as_slept(&mut jvm, &report, 1.5e9, "sleeper");
    assert_eq!(
        report["lost_events"], 0,
        "no event may be lost at this rate"
    );

    // Its sleeps are futex waits: the top stack it blocked in names that kernel path.
    let stacks = report["off_cpu"]["stacks"].as_array().unwrap();
    let top = stacks
        .iter()
        .find(|s| {
            s["threads"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == "sleeper")
        })
        .expect("a stack of the sleeper");
    let frames: Vec<&str> = top["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        frames.iter().any(|f| f.contains("futex_wait")),
        "no futex_wait in {frames:?}"
    );
    assert!(
        frames
            .iter()
            .any(|f| *f == "schedule" || *f == "__schedule"),
        "no schedule in {frames:?}"
    );
    assert!(
        frames.iter().any(|f| f.contains("sys_futex")),
        "no futex syscall in {frames:?}"
    );
}

#[test]
fn threads_born_after_attach_are_captured() {
    // The sleeper thread starts 1.5 s after the JVM says it is ready, inside the recording.
    let mut jvm = start(21, "Sleeper", &["0.5", "50", "1500"]);
    let recording = record(jvm.pid, 4.0, "late-thread.pinrec");
    let report = report_json(&recording);
    assert_blocked_as_slept(&mut jvm, &report, 0.5e9, "late sleeper");
}

#[test]
fn recording_stops_when_the_target_exits() {
    let jvm = start(21, "Sleeper", &["0.5", "50"]);
    let (child, out) = spawn_record(jvm.pid, "exit.pinrec");
    std::thread::sleep(Duration::from_millis(1500));
    let killed = Instant::now();
    drop(jvm); // kills the JVM
    let output = child.wait_with_output().unwrap();
    assert_ok(&output, "pinprof record");
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "took {:?} to notice the exit",
        killed.elapsed()
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("target exited"), "{stderr}");

    let report = report_json(&out);
    assert_eq!(report["capture"]["target_exited"], true);
    assert_eq!(
        report["capture"]["warnings"].as_array().unwrap().len(),
        0,
        "the file is complete"
    );
    assert!(ns(&thread(&report, "sleeper")["blocked_ns"]) > 0.4e9);
    // The text report says so too, about 1.5 s in.
    let text = pinprof().arg("report").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    let said = text
        .lines()
        .find_map(|l| l.strip_prefix("note: the target exited "))
        .and_then(|rest| rest.split_once("s into"))
        .and_then(|(secs, _)| secs.parse::<f64>().ok());
    assert!(
        said.is_some_and(|s| (1.0..4.0).contains(&s)),
        "the exit is said with its time: {text}"
    );
}

#[test]
fn ctrl_c_leaves_a_complete_recording() {
    let jvm = start(21, "Sleeper", &["0.5", "50"]);
    let (child, out) = spawn_record(jvm.pid, "sigint.pinrec");
    std::thread::sleep(Duration::from_secs(2));
    let output = interrupt(child);
    assert!(String::from_utf8_lossy(&output.stderr).contains("interrupted"));
    let report = report_json(&out);
    let window = ns(&report["window"]["duration_ns"]);
    assert!(
        (1.5e9..3.0e9).contains(&window),
        "window {window} ns for a 2 s recording"
    );
    assert_eq!(report["capture"]["warnings"].as_array().unwrap().len(), 0);
    drop(jvm);
}

#[test]
fn a_cut_recording_reports_the_events_before_the_cut() {
    let jvm = start(21, "Sleeper", &["0.5", "20"]);
    let recording = record(jvm.pid, 2.0, "cut.pinrec");
    drop(jvm);
    let bytes = std::fs::read(&recording).unwrap();
    let cut_path = scratch("cut-part.pinrec");
    let mut last_events = 0;
    let cuts = 40;
    for i in 1..=cuts {
        let cut = bytes.len() * i / cuts;
        std::fs::write(&cut_path, &bytes[..cut]).unwrap();
        let output = pinprof()
            .arg("report")
            .arg(&cut_path)
            .args(["--format", "json"])
            .output()
            .unwrap();
        // Never a panic (exit 101); a cut inside the header is a clear error.
        assert_ne!(output.status.code(), Some(101), "panic on a cut at {cut}");
        if !output.status.success() {
            assert!(String::from_utf8_lossy(&output.stderr).contains("error:"));
            continue;
        }
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let events = report["off_cpu"]["events"].as_u64().unwrap();
        assert!(events >= last_events, "a longer prefix lost events");
        last_events = events;
        if i < cuts {
            let warnings = report["capture"]["warnings"].to_string();
            assert!(
                warnings.contains("cut") || warnings.contains("end marker"),
                "{warnings}"
            );
        }
    }
    assert!(last_events > 0);
}

#[test]
fn flamegraph_is_a_time_weighted_svg() {
    let jvm = start(21, "Sleeper", &["0.5", "50"]);
    let recording = record(jvm.pid, 2.0, "flame.pinrec");
    drop(jvm);
    let svg = scratch("flame.svg");
    let output = pinprof()
        .arg("flamegraph")
        .arg(&recording)
        .arg("--output")
        .arg(&svg)
        .output()
        .unwrap();
    assert_ok(&output, "pinprof flamegraph");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml"), "not an SVG");
    assert!(
        text.contains("Blocked time of every thread"),
        "title missing"
    );
    // The scheduler's own frames are drawn as one (inferno shows names without the palette's
    // annotations).
    assert!(text.contains(">schedule ("), "no folded scheduler frame");
    assert!(!text.contains("_[k]"), "an annotation is shown");
    assert!(
        !text.contains("__schedule"),
        "the scheduler's own frames are drawn"
    );
    assert!(
        text.contains("futex_wait"),
        "the sleeper's kernel path is missing"
    );
    // inferno writes each frame's weight in its tooltip: "(N us, P%)".
    assert!(text.contains(" us, "), "weights are not in microseconds");
}

#[test]
fn wrong_pid_is_a_clear_error() {
    let output = pinprof()
        .args(["record", "--pid", "999999999", "--duration", "1"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no process with PID 999999999"), "{stderr}");

    let output = pinprof()
        .args(["report", "/nonexistent.pinrec"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot read"));
}

#[test]
fn missing_privileges_are_a_clear_error() {
    require_root();
    // Drop to nobody with no capabilities, as an unprivileged user would run it.
    let output = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(common::pinprof_bin())
        .args([
            "record",
            "--pid",
            &std::process::id().to_string(),
            "--duration",
            "1",
            "--output",
            "/dev/null",
        ])
        .output()
        .expect("setpriv (util-linux)");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("needs root, or the capabilities CAP_BPF and CAP_PERFMON"),
        "{stderr}"
    );
}

/// Events the kernel could not hand over are counted, and the recording says as many as
/// pinprof's closing line. pinprof is stopped for half a second while a JVM switches some
/// 100,000 times a second, so its 1 MiB ring buffer surely overflows; the count the closing
/// line gives is the kernel's own (the programs count each record they could not reserve).
#[test]
fn lost_events_are_counted_alike_in_the_closing_line_and_the_recording() {
    let jvm = start(25, "Handoff", &["2"]);
    let out = scratch("handoff-lost.pinrec");
    let child = pinprof()
        .args(["record", "--quiet", "--pid", &jvm.pid.to_string()])
        .args(["--duration", "3", "--ring-buffer-mib", "1", "--output"])
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start pinprof record");
    std::thread::sleep(Duration::from_millis(1500));
    let pinprof = child.id().to_string();
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .args([sig, &pinprof])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {sig} pinprof");
    };
    signal("-STOP");
    std::thread::sleep(Duration::from_millis(500));
    signal("-CONT");
    let result = child.wait_with_output().expect("wait for pinprof record");
    assert_ok(&result, "pinprof record");
    let said = String::from_utf8_lossy(&result.stderr);
    let lost: u64 = said
        .split_once(" lost")
        .and_then(|(before, _)| before.rsplit_once('(').map(|(_, n)| n.trim()))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no lost count in the closing line: {said}"));
    let report = report_json(&out);
    eprintln!("closing line: {}", said.trim());
    assert!(lost > 0, "nothing lost while pinprof was stopped: {said}");
    assert!(
        said.contains("with the ring buffer full"),
        "the cause is not said: {said}"
    );
    assert_eq!(report["lost_events"], lost, "the recording says otherwise");
}
