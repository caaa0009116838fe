//! Faults and unusual targets: pinprof killed, the target exiting, two recorders at once, a
//! program that is no JVM, JVMs with flags that change what pinprof relies on, a JVM still
//! starting up and one collecting every few milliseconds. Each checked against the
//! workload's own counts (and JFR where the JVM lets it attach), never only for "it ran".

mod common;

use std::{
    collections::BTreeSet,
    io::{BufRead as _, BufReader, Write as _},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{jfr::Jfr, *};
use serde_json::Value;

/// Pinned waits of `Pinning sleep` on JDK 21 within this fraction of the sleeps the workload
/// counted in the same window (each sleep inside `synchronized` pins its carrier once).
const COUNT_TOLERANCE: f64 = 0.10;

/// The pinned parks in a report, and how many of them are at `Pinning$Ledger.append` with
/// `Thread.sleep` above it: the workload's sleep, its Java frames named.
fn pinned_sleeps(report: &Value) -> (u64, u64) {
    let (mut parks, mut named) = (0, 0);
    for site in report["pinned"]["sites"].as_array().unwrap() {
        if site["operation"] != "park" {
            continue;
        }
        let events = site["events"].as_u64().unwrap();
        parks += events;
        let frames = strings(&site["frames"]);
        let sleep = frames.iter().position(|f| *f == "java.lang.Thread.sleep");
        let append = frames.iter().position(|f| *f == "Pinning$Ledger.append");
        if sleep.is_some() && append > sleep && site["reason"] == "monitor" {
            named += events;
        }
    }
    (parks, named)
}

/// `Pinning sleep` recorded for `seconds` by pinprof: its pinned parks within
/// `COUNT_TOLERANCE` of the workload's own count in the window, nearly all named at
/// `Pinning$Ledger.append`, none lost; with `jfr`, within the same tolerance of JFR's count.
/// Returns the report and pinprof's standard error.
fn pins_as_counted(mut jvm: Jvm, name: &str, seconds: f64, jfr: bool) -> (Value, String) {
    std::thread::sleep(Duration::from_millis(500));
    let truth = jfr.then(|| Jfr::start(21, jvm.pid, name));
    let recording = scratch(&format!("{name}.pinrec"));
    let output = pinprof()
        .args(["record", "--pid", &jvm.pid.to_string()])
        .args(["--duration", &seconds.to_string(), "--output"])
        .arg(&recording)
        .output()
        .unwrap();
    assert_ok(&output, "pinprof record");
    let truth = truth.map(Jfr::stop);
    let report = report_json(&recording);
    let (from, to) = counts::window(&report);
    let slept = counts::in_window(&mut jvm, "sleeps", from, to);
    let (parks, named) = pinned_sleeps(&report);
    assert!(
        slept > 50.0 * seconds,
        "{name}: only {slept} sleeps counted"
    );
    assert_within(
        &format!("{name}: pinned parks vs the workload's sleeps"),
        parks as f64,
        slept,
        COUNT_TOLERANCE,
    );
    assert!(
        named * 10 >= parks * 9,
        "{name}: {named} of {parks} pinned parks named at Pinning$Ledger.append: {}",
        report["pinned"]["sites"]
    );
    if let Some(truth) = truth {
        let (from, to) = report_unix(&report);
        let in_window = truth
            .iter()
            .filter(|e| (from..to).contains(&e.start_unix_ns))
            .count();
        assert_within(
            &format!("{name}: pinned parks vs JFR"),
            parks as f64,
            in_window as f64,
            COUNT_TOLERANCE,
        );
    }
    // None lost but, now and then, a wait whose switch back in the kernel did not show
    // (named as such in the closing line; see `missed_switch_ins`).
    let closing = String::from_utf8_lossy(&output.stderr).into_owned();
    let lost = report["lost_events"].as_u64().unwrap();
    let switch_ins_missed = missed_switch_ins(&closing);
    assert!(
        lost == switch_ins_missed && lost <= 2,
        "{name}: {lost} events lost, {switch_ins_missed} of them switches back in the kernel \
         did not show: {closing}"
    );
    assert!(
        jvm.child.try_wait().unwrap().is_none(),
        "{name}: the JVM died under pinprof"
    );
    (report, closing)
}

/// The report's window on the wall clock (JFR's times).
fn report_unix(report: &Value) -> (u64, u64) {
    let from = report["window"]["start_unix_ns"].as_u64().unwrap();
    (
        from,
        from + report["window"]["duration_ns"].as_u64().unwrap(),
    )
}

/// `Pinning sleep` on JDK 21, two carriers, with JVM `options`.
fn pinning_jvm(options: &[&str], modes: &[&str]) -> Jvm {
    require_root();
    let mut all = vec!["-Djdk.virtualThreadScheduler.parallelism=2"];
    all.extend_from_slice(options);
    Jvm::start_with(&java(21), &all, &workloads(), "Pinning", modes).expect("start the JVM")
}

/// BPF objects in the kernel, by kind, as the bpf(2) system call names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum BpfKind {
    Program,
    Map,
    Link,
}

/// The BPF programs, maps and links a process holds a descriptor of, from its fdinfo.
fn bpf_objects_held(pid: u32) -> BTreeSet<(BpfKind, u32)> {
    let mut held = BTreeSet::new();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return held;
    };
    for fd in fds.flatten() {
        let Ok(info) = std::fs::read_to_string(fd.path()) else {
            continue;
        };
        for line in info.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let kind = match key {
                "prog_id" => BpfKind::Program,
                "map_id" => BpfKind::Map,
                "link_id" => BpfKind::Link,
                _ => continue,
            };
            if let Ok(id) = value.trim().parse() {
                held.insert((kind, id));
            }
        }
    }
    held
}

/// Whether the kernel still has this object: the bpf(2) `*_GET_FD_BY_ID` commands answer
/// ENOENT once its last reference is gone.
fn in_kernel((kind, id): (BpfKind, u32)) -> bool {
    const PROG_GET_FD_BY_ID: libc::c_long = 13;
    const MAP_GET_FD_BY_ID: libc::c_long = 14;
    const LINK_GET_FD_BY_ID: libc::c_long = 30;
    let command = match kind {
        BpfKind::Program => PROG_GET_FD_BY_ID,
        BpfKind::Map => MAP_GET_FD_BY_ID,
        BpfKind::Link => LINK_GET_FD_BY_ID,
    };
    // union bpf_attr for these commands: the id, next_id, open_flags.
    let attr: [u32; 4] = [id, 0, 0, 0];
    // SAFETY: bpf(2) reads `size` bytes of a valid attr; a descriptor it returns is ours.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            command,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if fd >= 0 {
        // SAFETY: the descriptor was just opened for us.
        unsafe { libc::close(fd as i32) };
        return true;
    }
    let errno = std::io::Error::last_os_error();
    assert_eq!(
        errno.raw_os_error(),
        Some(libc::ENOENT),
        "bpf(2) on {kind:?} {id}: {errno}"
    );
    false
}

/// Each BPF program of process `pid`: its name, and how many times the kernel skipped it
/// because another BPF program was running on that CPU (`recursion_misses` of
/// `bpf_prog_info`): events that never happened for pinprof.
fn skipped_runs(pid: u32) -> Vec<(String, u64)> {
    const PROG_GET_FD_BY_ID: libc::c_long = 13;
    const OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    let mut skipped = Vec::new();
    for (kind, id) in bpf_objects_held(pid) {
        if kind != BpfKind::Program {
            continue;
        }
        let attr: [u32; 4] = [id, 0, 0, 0];
        // SAFETY: as in `in_kernel`.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                PROG_GET_FD_BY_ID,
                attr.as_ptr(),
                std::mem::size_of_val(&attr),
            )
        };
        if fd < 0 {
            continue;
        }
        // struct bpf_prog_info: name at 64 (16 bytes), recursion_misses at 208.
        let mut info = [0u8; 232];
        let attr: [u64; 2] = [
            (fd as u64) | ((info.len() as u64) << 32),
            info.as_mut_ptr() as u64,
        ];
        // SAFETY: the kernel writes at most `info.len()` bytes into `info`.
        let done = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                OBJ_GET_INFO_BY_FD,
                attr.as_ptr(),
                std::mem::size_of_val(&attr),
            )
        };
        // SAFETY: ours.
        unsafe { libc::close(fd as i32) };
        if done == 0 {
            let name = &info[64..80];
            let end = name.iter().position(|&b| b == 0).unwrap_or(16);
            let misses = u64::from_ne_bytes(info[208..216].try_into().unwrap());
            skipped.push((String::from_utf8_lossy(&name[..end]).into_owned(), misses));
        }
    }
    skipped
}

#[test]
fn kill_9_mid_recording_leaves_a_readable_file_and_no_bpf_objects() {
    let mut jvm = pinning_jvm(&[], &["sleep"]);
    std::thread::sleep(Duration::from_millis(300));
    let (mut recorder, out) = spawn_record(jvm.pid, "kill9.pinrec");
    // Past two checkpoints (each flushes the file) and into a third.
    std::thread::sleep(Duration::from_millis(2500));
    let held = bpf_objects_held(recorder.id());
    let programs = held.iter().filter(|o| o.0 == BpfKind::Program).count();
    eprintln!(
        "pinprof holds {programs} programs, {} maps, {} links",
        held.iter().filter(|o| o.0 == BpfKind::Map).count(),
        held.iter().filter(|o| o.0 == BpfKind::Link).count()
    );
    assert!(programs >= 3, "pinprof's programs: {held:?}");
    assert!(held.iter().all(|&o| in_kernel(o)), "{held:?}");
    recorder.kill().unwrap(); // SIGKILL: no handler runs, nothing is detached by pinprof
    let status = recorder.wait().unwrap();
    assert!(!status.success(), "{status}");

    // The kernel drops each program, map and link with the last descriptor: none is left.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left: Vec<_> = held.iter().copied().filter(|&o| in_kernel(o)).collect();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left.retain(|&o| in_kernel(o));
    }
    assert!(
        left.is_empty(),
        "left in the kernel after kill -9: {left:?}"
    );

    // The file reads up to the last flush: about two seconds of pinning, as counted.
    let report = report_json(&out);
    let warnings = report["capture"]["warnings"].to_string();
    assert!(
        warnings.contains("cut") || warnings.contains("end marker"),
        "a killed recording says it is cut: {warnings}"
    );
    let window = ns(&report["window"]["duration_ns"]);
    assert!((1.5e9..3.0e9).contains(&window), "window {window} ns");
    let (from, to) = counts::window(&report);
    let slept = counts::in_window(&mut jvm, "sleeps", from, to);
    let (parks, named) = pinned_sleeps(&report);
    assert_within(
        "kill -9: pinned parks in the file vs the workload's sleeps",
        parks as f64,
        slept,
        COUNT_TOLERANCE,
    );
    assert!(named * 10 >= parks * 9, "{named} of {parks} named");
    // The JVM goes on, its uprobes gone with pinprof: still sleeping, pinned, as before.
    let after = counts::points(
        &mut jvm,
        "sleeps",
        Some(counts::window(&report).1 + 2_500_000_000),
    );
    let (t0, v0) = after[after.len().saturating_sub(11)];
    let &(t1, v1) = after.last().unwrap();
    let rate = (v1 - v0) / ((t1 - t0) as f64 / 1e9);
    assert!(
        rate > 100.0,
        "the JVM sleeps {rate:.0} times a second after the kill"
    );
    assert!(jvm.child.try_wait().unwrap().is_none(), "the JVM died");
}

#[test]
fn a_jvm_that_exits_mid_recording_ends_it_with_a_complete_file() {
    let mut jvm = pinning_jvm(&[], &["sleep"]);
    std::thread::sleep(Duration::from_millis(300));
    let (recorder, out) = spawn_record(jvm.pid, "jvm-exit.pinrec");
    std::thread::sleep(Duration::from_millis(2500));
    // SIGTERM: the JVM runs its shutdown hooks (the workload's prints its last counts and
    // halts) and exits of its own accord.
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(jvm.pid as i32, libc::SIGTERM) };
    let stopped = Instant::now();
    let points = counts::points(&mut jvm, "sleeps", None);
    let exit = jvm.child.wait().unwrap();
    // Reaped: it had exited by then (the kernel's clock, as the recording's).
    let reaped = profiler::capture::monotonic_ns();
    eprintln!("the JVM exited: {exit}");
    let output = recorder.wait_with_output().unwrap();
    assert_ok(&output, "pinprof record");
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "took {:?} to stop after the exit",
        stopped.elapsed()
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("target exited"), "{stderr}");

    let report = report_json(&out);
    assert_eq!(report["capture"]["target_exited"], true);
    assert_eq!(
        report["capture"]["warnings"].as_array().unwrap().len(),
        0,
        "the file is complete: {}",
        report["capture"]["warnings"]
    );
    // Its window ends at the exit, after the JVM's last counts (printed as it shut down).
    let (from, to) = counts::window(&report);
    let &(last_time, last) = points.last().expect("the workload's counts");
    assert!(
        last_time <= to,
        "the window ends at {to}, the JVM still counted at {last_time}"
    );
    let slept = last - counts::at(&points, from);
    // (The JVM halts as it prints them: the window ends at its exit, not when pinprof saw it,
    // so before the test reaped it. How long the halt takes is the JVM's business.)
    let gap_ms = (to - last_time) as f64 / 1e6;
    eprintln!(
        "the window ends {gap_ms:.1} ms after the JVM's last counts, {:.1} ms before it was \
         reaped",
        reaped.saturating_sub(to) as f64 / 1e6
    );
    assert!(
        to <= reaped,
        "the window ends at {to}, after the JVM had exited (reaped at {reaped})"
    );
    let (parks, _) = pinned_sleeps(&report);
    assert_within(
        "target exited: pinned parks vs the workload's sleeps to its exit",
        parks as f64,
        slept,
        COUNT_TOLERANCE,
    );
}

#[test]
fn two_recorders_on_one_jvm_agree() {
    let mut jvm = pinning_jvm(&[], &["sleep"]);
    std::thread::sleep(Duration::from_millis(500));
    let recorders: Vec<(Child, std::path::PathBuf)> = ["twice-a.pinrec", "twice-b.pinrec"]
        .iter()
        .map(|name| {
            let out = scratch(name);
            let child = pinprof()
                .args(["record", "--quiet", "--pid", &jvm.pid.to_string()])
                .args(["--duration", "3", "--output"])
                .arg(&out)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    let reports: Vec<Value> = recorders
        .into_iter()
        .map(|(child, out)| {
            assert_ok(&child.wait_with_output().unwrap(), "pinprof record");
            report_json(&out)
        })
        .collect();
    // The workload's counts cover both windows: read them once.
    let to = reports.iter().map(|r| counts::window(r).1).max().unwrap();
    let points = counts::points(&mut jvm, "sleeps", Some(to));
    let mut rates = Vec::new();
    for (i, report) in reports.iter().enumerate() {
        let (from, to) = counts::window(report);
        let slept = counts::at(&points, to) - counts::at(&points, from);
        let (parks, named) = pinned_sleeps(report);
        assert_within(
            &format!("recorder {i}: pinned parks vs the workload's sleeps"),
            parks as f64,
            slept,
            COUNT_TOLERANCE,
        );
        assert!(named * 10 >= parks * 9, "recorder {i}: {named} of {parks}");
        assert_eq!(report["lost_events"], 0);
        rates.push(parks as f64 / (to - from) as f64 * 1e9);
    }
    assert_within(
        "pinned parks a second, one recorder vs the other",
        rates[0],
        rates[1],
        0.05,
    );
}

#[test]
fn a_program_that_is_no_jvm_is_profiled_off_cpu_and_in_its_system_calls() {
    require_root();
    let mut prog = Command::new(env!("CARGO_BIN_EXE_pinprof-testprog"))
        .args(["sleep", "60"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start pinprof-testprog");
    let mut lines = BufReader::new(prog.stdout.take().unwrap()).lines();
    let ready = lines.next().unwrap().unwrap();
    let pid: u32 = ready.trim_start_matches("ready ").parse().unwrap();
    let (recorder, out) = spawn_record(pid, "not-a-jvm.pinrec");
    let mut stdin = prog.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    let naps = common::naps::Naps::read(lines.by_ref());
    std::thread::sleep(Duration::from_millis(200));
    let skipped = skipped_runs(recorder.id());
    eprintln!("skipped {skipped:?}");
    let said = interrupt(recorder);
    // Said as the recording starts, not first by the report.
    let said = String::from_utf8_lossy(&said.stderr);
    assert!(
        said.contains(&format!("note: process {pid} is no HotSpot JVM")),
        "{said}"
    );
    drop(stdin);
    let _ = prog.wait();
    assert_eq!(naps.slept.len(), 60);

    let report = report_json(&out);
    assert!(
        report["target"]["runtime"].is_null(),
        "{}",
        report["target"]
    );
    let text = pinprof().arg("report").arg(&out).output().unwrap();
    assert_ok(&text, "pinprof report");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("note: no JVM found in the target"), "{text}");
    assert_eq!(report["pinned"]["events"], 0);
    assert!(carrier_threads(&report).is_empty());

    // Off CPU: the napper's blocked time is its 60 sleeps of 20 ms (born after attach, it
    // sleeps only there), and whatever else it blocked on in its life: no less than it asked
    // for, no more than the kernel's own account of its life says it was neither running nor
    // waiting for a CPU.
    let (low, high) = naps.blocked_bounds_ns();
    let napper = thread(&report, "napper");
    let blocked = ns(&napper["blocked_ns"]);
    eprintln!(
        "napper blocked {:.1} ms in {} intervals; asked 1200 ms, measured {:.1} ms; bounds {:.1}-{:.1} ms",
        blocked / 1e6,
        napper["blocked_intervals"],
        naps.measured_ns() as f64 / 1e6,
        low as f64 / 1e6,
        high as f64 / 1e6
    );
    // Each sleep is one interval, every one seen: none lost without a count. (The thread may
    // also block once or twice on something of the kernel's, a lock or a page: seen once.)
    let intervals = napper["blocked_intervals"].as_u64().unwrap();
    assert!(
        (60..=62).contains(&intervals),
        "{napper}; capture {}; programs the kernel skipped: {skipped:?}",
        report["capture"]
    );
    assert!(
        (low as f64..=high as f64).contains(&blocked),
        "napper blocked {blocked} ns: asked {low} ns, the kernel's account at most {high} ns"
    );
    let stack = report["off_cpu"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| strings(&s["threads"]) == ["napper"])
        .expect("the napper's blocked stack");
    let frames = strings(&stack["frames"]);
    assert!(
        frames.iter().any(|f| f.contains("nanosleep")),
        "a sleep in the kernel: {frames:?}"
    );
    assert!(
        frames.iter().any(|f| f.contains("pinprof_testprog::nap")),
        "the program's own function: {frames:?}"
    );
    // System calls: each sleep is one long clock_nanosleep of the napper, timed as measured.
    let sleeps = report["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "clock_nanosleep")
        .unwrap_or_else(|| panic!("clock_nanosleep in {}", report["syscalls"]));
    assert_eq!(sleeps["events"], 60, "{sleeps}");
    assert_within(
        "clock_nanosleep total (ms) vs the napper's sleeps",
        ns(&sleeps["total_ns"]) / 1e6,
        naps.measured_ns() as f64 / 1e6,
        0.05,
    );
    assert_eq!(report["lost_events"], 0);
}

#[test]
fn jdk21_attach_disabled_pins_as_counted_without_attach() {
    let jvm = pinning_jvm(&["-XX:+DisableAttachMechanism"], &["sleep"]);
    let pid = jvm.pid;
    let (_, stderr) = pins_as_counted(jvm, "noattach21", 3.0, false);
    assert!(stderr.contains("DisableAttachMechanism"), "{stderr}");
    // Not attached: no trigger file was left and no socket opened.
    assert!(!std::path::Path::new(&format!("/tmp/.java_pid{pid}")).exists());
}

#[test]
fn jdk21_reduced_signals_pins_as_jfr_counts_and_survives() {
    // -Xrs: the JVM does not catch SIGQUIT, which would kill it; it opens its attach socket
    // at startup instead, where pinprof (and jcmd) find it without a signal.
    let jvm = pinning_jvm(&["-Xrs"], &["sleep"]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", jvm.pid)).unwrap();
    let caught = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    assert_eq!(
        caught & (1 << (libc::SIGQUIT - 1)),
        0,
        "-Xrs leaves SIGQUIT alone"
    );
    let (_, stderr) = pins_as_counted(jvm, "xrs21", 3.0, true);
    // No warning: the scheduler settings came through the attach protocol.
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn jdk21_zgc_pins_as_jfr_counts() {
    pins_as_counted(
        pinning_jvm(&["-XX:+UseZGC"], &["sleep"]),
        "zgc21",
        3.0,
        true,
    );
}

/// Generational ZGC colors the oops in `OopHandle`s and fields: read uncolored, the carriers
/// are known as the JVM's two (its parallelism), and the pinned virtual threads by their ids.
#[test]
fn jdk21_generational_zgc_pins_as_jfr_counts() {
    let jvm = pinning_jvm(&["-XX:+UseZGC", "-XX:+ZGenerational"], &["sleep"]);
    assert_eq!(carriers_seen(jvm.pid), 2, "genzgc21: carriers");
    let (report, _) = pins_as_counted(jvm, "genzgc21", 3.0, true);
    assert_eq!(
        carrier_threads(&report).len(),
        2,
        "genzgc21: carriers in the report"
    );
    for site in report["pinned"]["sites"].as_array().unwrap() {
        let ids = &site["virtual_threads"];
        assert!(
            ids.as_array()
                .unwrap()
                .iter()
                .all(|id| id.as_u64() > Some(0)),
            "genzgc21: virtual thread ids {ids}"
        );
    }
}

/// On JDK 25 ZGC is always generational (the flag is gone): the carriers and the virtual
/// threads mounted on them are read all the same.
#[test]
fn jdk25_zgc_carriers_and_their_virtual_threads_are_read() {
    require_root();
    let jvm = Jvm::start_with(
        &java(25),
        &["-Djdk.virtualThreadScheduler.parallelism=2", "-XX:+UseZGC"],
        &workloads(),
        "Pinning",
        &["sleep"],
    )
    .expect("start the JVM");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(carriers_seen(jvm.pid), 2, "zgc25: carriers");
}

/// How many carriers `pinprof jvm` finds in the JVM `pid`.
fn carriers_seen(pid: u32) -> usize {
    let output = pinprof()
        .args(["jvm", "--pid", &pid.to_string()])
        .output()
        .unwrap();
    assert_ok(&output, "pinprof jvm");
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("carriers: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no carrier count: {text}"))
}

/// `record --syscalls blocking`: no program at the host's system calls (so other processes
/// pay nothing), and still the pinned parks as the workload and JFR count them, named at
/// their method, none lost, their futex waits seen as they block and released by the
/// workload's own threads.
#[test]
fn blocking_syscalls_leave_the_hosts_calls_alone_and_pin_as_counted() {
    let mut jvm = pinning_jvm(&[], &["sleep"]);
    std::thread::sleep(Duration::from_millis(500));
    let jfr = Jfr::start(21, jvm.pid, "blocking21");
    let recording = scratch("blocking21.pinrec");
    let recorder = pinprof()
        .args(["record", "--pid", &jvm.pid.to_string(), "--duration", "4"])
        .args(["--syscalls", "blocking", "--output"])
        .arg(&recording)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let programs: Vec<String> = skipped_runs(recorder.id())
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let output = recorder.wait_with_output().unwrap();
    assert_ok(&output, "pinprof record --syscalls blocking");
    let truth = jfr.stop();
    assert!(
        programs.iter().any(|p| p == "sched_switch"),
        "pinprof's programs: {programs:?}"
    );
    assert!(
        !programs.iter().any(|p| p.starts_with("sys_")),
        "a program at the system calls: {programs:?}"
    );
    let report = report_json(&recording);
    let (from, to) = counts::window(&report);
    let slept = counts::in_window(&mut jvm, "sleeps", from, to);
    let (parks, named) = pinned_sleeps(&report);
    assert!(slept > 150.0, "only {slept} sleeps counted");
    assert_within(
        "blocking: pinned parks vs the workload's sleeps",
        parks as f64,
        slept,
        COUNT_TOLERANCE,
    );
    let (from, to) = report_unix(&report);
    let in_window = truth
        .iter()
        .filter(|e| (from..to).contains(&e.start_unix_ns))
        .count();
    assert_within(
        "blocking: pinned parks vs JFR",
        parks as f64,
        in_window as f64,
        COUNT_TOLERANCE,
    );
    assert!(
        named * 10 >= parks * 9,
        "blocking: {named} of {parks} pinned parks named at Pinning$Ledger.append"
    );
    assert_eq!(
        report["lost_events"],
        0,
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let futex = report["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "futex")
        .unwrap_or_else(|| panic!("no futex waits: {}", report["syscalls"]));
    assert!(
        futex["events"].as_u64().unwrap() as f64 >= 0.9 * parks as f64,
        "{futex}"
    );
}

#[test]
fn jdk21_serial_gc_pins_as_jfr_counts() {
    let jvm = pinning_jvm(&["-XX:+UseSerialGC"], &["sleep"]);
    pins_as_counted(jvm, "serial21", 3.0, true);
}

#[test]
fn jdk25_zgc_class_init_pins_as_jfr_counts() {
    // On 25 synchronized no longer pins, static initializers still do; ZGC is generational
    // only there, its oops colored.
    require_root();
    let jvm = Jvm::start_with(
        &java(25),
        &["-XX:+UseZGC", "-Djdk.virtualThreadScheduler.parallelism=4"],
        &workloads(),
        "Pinning",
        &["clinit"],
    )
    .expect("start the JVM");
    std::thread::sleep(Duration::from_millis(300));
    let jfr = Jfr::start(25, jvm.pid, "zgc25");
    let recording = record(jvm.pid, 4.0, "zgc25.pinrec");
    let truth = jfr.stop();
    let report = report_json(&recording);
    let (from, to) = report_unix(&report);
    let truth: Vec<_> = truth
        .into_iter()
        .filter(|e| (from..to).contains(&e.start_unix_ns))
        .filter(|e| {
            e.reason
                .as_deref()
                .is_some_and(|r| r.contains("<clinit>") || r.contains("initialization"))
        })
        .collect();
    let (mut ours, mut named) = (0, 0);
    for site in report["pinned"]["sites"].as_array().unwrap() {
        if site["reason"] != "class_init" {
            continue;
        }
        let events = site["events"].as_u64().unwrap();
        ours += events;
        if strings(&site["frames"])
            .iter()
            .any(|f| f.starts_with("Pinning$Slow") || f.starts_with("Pinning.lambda$initClasses"))
        {
            named += events;
        }
    }
    assert!(
        truth.len() >= 20,
        "JFR saw only {} class-init pins",
        truth.len()
    );
    // As pinning.rs asks of class-init pinning with the default collector.
    assert_within(
        "JDK 25 ZGC: class-init pinned events vs JFR",
        ours as f64,
        truth.len() as f64,
        0.15,
    );
    assert!(
        named * 10 >= ours * 9,
        "{named} of {ours} name the initializer"
    );
    assert_eq!(report["lost_events"], 0);
}

#[test]
fn jdk21_heavy_gc_pins_as_counted_and_the_jvm_survives() {
    // A collection every few ms on a 32 MB heap, and a safepoint at least every ms.
    let mut jvm = pinning_jvm(
        &[
            "-Xmx32m",
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:GuaranteedSafepointInterval=1",
            "-Xlog:gc:stdout:tn",
        ],
        &["sleep", "churn"],
    );
    let mut gcs = Vec::new();
    let (report, _) = {
        // The GC log lines come on stdout with the counts: keep the ones pins_as_counted
        // skips by reading through a channel of our own.
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = std::mem::replace(&mut jvm.lines, rx);
        let sorter = std::thread::spawn(move || {
            let mut gcs = Vec::new();
            for line in lines {
                if let Some(ns) = gc_time(&line) {
                    gcs.push(ns);
                } else if tx.send(line).is_err() {
                    break;
                }
            }
            gcs
        });
        let result = pins_as_counted(jvm, "heavygc21", 3.0, true);
        gcs.extend(sorter.join().unwrap());
        result
    };
    let (from, to) = counts::window(&report);
    let in_window = gcs.iter().filter(|&&t| (from..to).contains(&t)).count();
    let per_second = in_window as f64 / ((to - from) as f64 / 1e9);
    eprintln!("heavy GC: {in_window} collections in the window, {per_second:.0} a second");
    assert!(
        per_second >= 100.0,
        "a collection every few ms: {per_second:.0}/s"
    );
}

/// The time of a `-Xlog:gc:stdout:tn` pause line: `[123ns] GC(4) Pause Young ...`.
fn gc_time(line: &str) -> Option<u64> {
    let rest = line.strip_prefix('[')?;
    let (time, rest) = rest.split_once("ns]")?;
    rest.trim_start()
        .starts_with("GC(")
        .then(|| time.parse().ok())?
}

#[test]
fn a_jvm_still_starting_up_is_recorded_once_it_has_started() {
    require_root();
    // Stopped the moment the java launcher has been exec'd: its VM is not created yet.
    let mut child = Command::new(java(21))
        .arg("-Djdk.virtualThreadScheduler.parallelism=2")
        .arg("-cp")
        .arg(workloads())
        .args(["Pinning", "sleep"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count();
    // A created VM has its GC, compiler and service threads: a dozen or more.
    assert!(
        threads <= 3,
        "{threads} threads: the VM was already created"
    );
    let out = scratch("starting.pinrec");
    let mut recorder = pinprof()
        .args(["record", "--pid", &pid.to_string(), "--duration", "3"])
        .arg("--output")
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut jvm = Jvm { child, pid, lines };
    // pinprof waits for the VM rather than read it half made (or take it for no JVM).
    std::thread::sleep(Duration::from_millis(700));
    assert!(recorder.try_wait().unwrap().is_none(), "pinprof gave up");
    // SAFETY: as above.
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    let started = Instant::now();
    let output = recorder.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ok(&output, "pinprof record");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "pinprof took {:?} for 3 s",
        started.elapsed()
    );
    assert!(stderr.contains("is still starting"), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(jvm.child.try_wait().unwrap().is_none(), "the JVM died");
    let report = report_json(&out);
    assert_eq!(
        report["target"]["runtime"]["kind"], "hotspot",
        "{}",
        report["target"]
    );
    // Its pinned sleeps are seen as it counted them, Java frames named.
    let (from, to) = counts::window(&report);
    let points = counts::points(&mut jvm, "sleeps", Some(to));
    // The counter starts at 0 with the workload: a window opened before it began counts all.
    let before = if from < points.first().expect("the workload's counts").0 {
        0.0
    } else {
        counts::at(&points, from)
    };
    let slept = counts::at(&points, to) - before;
    let (parks, named) = pinned_sleeps(&report);
    assert_within(
        "starting JVM: pinned parks vs the workload's sleeps",
        parks as f64,
        slept,
        COUNT_TOLERANCE,
    );
    assert!(named * 10 >= parks * 9, "{named} of {parks} named");
}

/// The JVM stopped with SIGSTOP for 10 s mid-recording, then continued: the stop is no
/// pinning (the workload's sleeps pin 10 ms each; no pinned wait lasts through the stop, and
/// the pinned parks are the sleeps it counted), its carriers are accounted as blocked across
/// the stop by the test's own clock of it, nothing is lost, and the JVM goes on counting.
#[test]
fn a_jvm_stopped_10s_mid_recording_is_no_pinning() {
    let mut jvm = pinning_jvm(&[], &["sleep"]);
    std::thread::sleep(Duration::from_millis(300));
    let (recorder, out) = spawn_record(jvm.pid, "stopped.pinrec");
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(jvm.pid as i32, libc::SIGSTOP) };
    let stopped_at = profiler::capture::monotonic_ns();
    std::thread::sleep(Duration::from_secs(10));
    let continued_at = profiler::capture::monotonic_ns();
    // SAFETY: as above.
    unsafe { libc::kill(jvm.pid as i32, libc::SIGCONT) };
    std::thread::sleep(Duration::from_secs(2));
    interrupt(recorder);
    let report = report_json(&out);
    let (from, to) = counts::window(&report);
    let points = counts::points(&mut jvm, "sleeps", Some(to));
    assert!(
        points.last().is_some_and(|p| p.0 > continued_at),
        "the JVM counts on after the stop: {points:?}"
    );
    assert_eq!(report["lost_events"], 0);
    let stop_ns = (continued_at - stopped_at) as f64;
    let longest = report["pinned"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["max_ns"].as_u64().unwrap())
        .max()
        .unwrap_or(0);
    assert!(
        (longest as f64) < stop_ns / 10.0,
        "a pinned wait of {longest} ns: the {stop_ns} ns stop counted as pinning"
    );
    let (parks, _) = pinned_sleeps(&report);
    let slept = counts::at(&points, to) - counts::at(&points, from);
    assert_within(
        "stopped 10 s: pinned parks vs the workload's sleeps",
        parks as f64,
        slept,
        COUNT_TOLERANCE,
    );
    for carrier in carrier_threads(&report) {
        assert!(
            ns(&carrier["blocked_ns"]) >= stop_ns * 0.95,
            "the stop is the carrier's blocked time: {carrier}"
        );
    }
}

/// The file system of the output fills up mid-recording (a 1 MiB tmpfs): the recording ends
/// at once with an error that says why, and what the file holds reads back, its window and
/// events as far as the file got, with the cut said.
#[test]
fn a_full_file_system_ends_the_recording_and_what_it_holds_reads() {
    require_root();
    let jvm = start(25, "Handoff", &["2"]);
    let dir = scratch("full-fs");
    let _ = std::fs::create_dir_all(&dir);
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&dir)
        .status()
        .expect("run mount");
    assert!(status.success(), "mount a 1 MiB tmpfs");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(dir.clone());
    let out = dir.join("full.pinrec");
    let started = Instant::now();
    let result = pinprof()
        .args(["record", "--quiet", "--pid", &jvm.pid.to_string()])
        .args(["--duration", "60", "--output"])
        .arg(&out)
        .output()
        .expect("run pinprof record");
    let said = String::from_utf8_lossy(&result.stderr);
    eprintln!("pinprof: {}", said.trim());
    assert!(!result.status.success(), "a full disk is an error: {said}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?} to stop on a full disk",
        started.elapsed()
    );
    assert!(said.contains("No space left on device"), "{said}");
    assert!(said.contains("what it holds reads"), "{said}");
    let size = std::fs::metadata(&out).unwrap().len();
    assert!(size > 512 << 10, "the file holds what fit: {size} bytes");
    let report = pinprof()
        .arg("report")
        .arg(&out)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_ok(&report, "pinprof report of the cut file");
    let warned = String::from_utf8_lossy(&report.stderr);
    assert!(warned.contains("recording is cut"), "{warned}");
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    schema_errors(&report).unwrap();
    assert!(report["window"]["duration_ns"].as_u64().unwrap() > 0);
    // A 1 MiB file of a target switching ~100,000 times a second holds thousands of waits.
    assert!(
        report["off_cpu"]["events"].as_u64().unwrap() > 1000,
        "{}",
        report["off_cpu"]["events"]
    );
}

/// A target that forks and execs children all the time (a shell loop running `sleep`): the
/// children are other processes, and none of their threads is recorded as the target's.
#[test]
fn a_target_that_forks_and_execs_records_none_of_its_children() {
    require_root();
    let mut shell = Command::new("sh")
        .args(["-c", "while :; do sleep 0.01; done"])
        .spawn()
        .expect("start sh");
    let pid = shell.id();
    let report = report_json(&record(pid, 2.0, "forks.pinrec"));
    let _ = shell.kill();
    let _ = shell.wait();
    let tids: Vec<u64> = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tid"].as_u64().unwrap())
        .collect();
    // The shell is one thread: its children (each `sleep` a process of its own) are not it.
    assert_eq!(tids, [u64::from(pid)], "{}", report["threads"]);
    // It waited for its children about all the time: the window is its own, whole.
    let shell_row = &report["threads"][0];
    let window = ns(&report["window"]["duration_ns"]);
    let accounted = ns(&shell_row["running_ns"])
        + ns(&shell_row["blocked_ns"])
        + ns(&shell_row["preempted_ns"]);
    assert_within("the shell's time vs the window", accounted, window, 0.05);
    assert_eq!(report["lost_events"], 0);
}

/// A JVM with 5,000 platform threads (asleep, with one more born and ended in a loop): every
/// thread the kernel lists for the process through the recording has its row, the JVM's
/// thread list is read whole (nothing left out for the memory budget), nothing is lost.
#[test]
fn a_jvm_with_5000_threads_is_recorded_whole() {
    let jvm = start(21, "ThreadFlood", &["5000", "24"]);
    let tasks = || -> BTreeSet<u64> {
        std::fs::read_dir(format!("/proc/{}/task", jvm.pid))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect()
    };
    let before = tasks();
    assert!(before.len() > 5000, "{} threads", before.len());
    let report = report_json(&record(jvm.pid, 4.0, "5000-threads.pinrec"));
    let after = tasks();
    let rows: BTreeSet<u64> = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tid"].as_u64().unwrap())
        .collect();
    let throughout: Vec<&u64> = before.intersection(&after).collect();
    let missing: Vec<&&u64> = throughout.iter().filter(|t| !rows.contains(t)).collect();
    eprintln!(
        "{} threads throughout, {} rows, {} missing",
        throughout.len(),
        rows.len(),
        missing.len()
    );
    assert!(missing.is_empty(), "threads without a row: {missing:?}");
    assert_eq!(report["lost_events"], 0);
    let budget = &report["capture"]["memory_budget"];
    assert_eq!(budget["threads_not_listed"], 0, "{budget}");
}
