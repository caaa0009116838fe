//! Locks and system calls, end to end: a native program with known blocking patterns (a held
//! pthread mutex, a slow pipe, an fsync) and a JVM whose platform threads contend on a
//! ReentrantLock, checked against what the programs measured themselves.

mod common;

use std::{
    collections::BTreeSet,
    io::{BufRead as _, BufReader, Write as _},
    process::{Child, Command, Stdio},
    time::Duration,
};

use common::*;
use serde_json::Value;

/// pinprof-testprog running one scenario, recorded from before it starts to after it ends.
/// Returns the report and the (start, end) pairs the program measured, by their label.
fn run_native(args: &[&str], label: &str, record_options: &[&str]) -> (Value, Vec<(u64, u64)>) {
    let run = run_native_with_stdin(args, label, record_options);
    (run.report, run.measured)
}

struct NativeRun {
    report: Value,
    measured: Vec<(u64, u64)>,
    /// What the program's standard input is (a pipe it reads).
    stdin: String,
    /// When its read of "go" on standard input, under way since before attach, returned.
    go_ns: u64,
    /// When it began its last read of standard input, still under way as recording stops.
    idle_ns: u64,
    pid: u32,
    recording: std::path::PathBuf,
}

/// `run_native`, with more of what the program said.
fn run_native_with_stdin(args: &[&str], label: &str, record_options: &[&str]) -> NativeRun {
    require_root();
    let mut prog: Child = Command::new(env!("CARGO_BIN_EXE_pinprof-testprog"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start pinprof-testprog");
    let mut lines = BufReader::new(prog.stdout.take().unwrap()).lines();
    let ready = lines.next().unwrap().unwrap();
    let pid: u32 = ready.trim_start_matches("ready ").parse().unwrap();
    let stdin_name = std::fs::read_link(format!("/proc/{pid}/fd/0"))
        .map(|l| l.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = format!("native-{}.pinrec", args[0]);
    let (recorder, recording) = spawn_record_with(pid, &name, record_options);
    // Its read of standard input, which began before attach, lasts this long into the window.
    std::thread::sleep(Duration::from_millis(300));
    let mut stdin = prog.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    let mut measured = Vec::new();
    let (mut go_ns, mut idle_ns) = (0, 0);
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line == "done" {
            break;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        if parts[0] == "go" {
            go_ns = parts[1].parse().unwrap();
        } else if parts[0] == "idle" {
            idle_ns = parts[1].parse().unwrap();
        } else if parts[0] == label {
            measured.push((parts[1].parse().unwrap(), parts[2].parse().unwrap()));
        }
    }
    // Let the last events drain, then stop the recording as a user would.
    std::thread::sleep(Duration::from_millis(300));
    interrupt(recorder);
    drop(stdin);
    let _ = prog.wait();
    NativeRun {
        report: report_json(&recording),
        measured,
        stdin: stdin_name,
        go_ns,
        idle_ns,
        pid,
        recording,
    }
}

fn mean_ms(pairs: &[(u64, u64)]) -> f64 {
    pairs.iter().map(|(a, b)| (b - a) as f64).sum::<f64>() / pairs.len() as f64 / 1e6
}

#[test]
fn a_held_pthread_mutex_names_its_holder_and_where_it_released() {
    let (report, waited) = run_native(&["mutex", "5"], "waited", &[]);
    assert_eq!(waited.len(), 5);
    let lock = report["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| strings(&l["waiters"]).contains(&"waiter"))
        .expect("a lock the waiter thread waited on");
    let waits = lock["waits"].as_u64().unwrap();
    assert_eq!(waits, 5, "{lock}");
    let ours = lock["wait_ns"].as_f64().unwrap() / waits as f64 / 1e6;
    // Against what the waiter measured, in ms.
    assert_within("mutex wait (ms)", ours, mean_ms(&waited), 0.10);
    // The hold is 50 ms; a busy machine can only make the sleep inside it run late.
    assert!(ours >= 45.0, "a 50 ms hold: {ours} ms");
    assert_eq!(lock["long_held"], true);
    let holders = lock["holders"].as_array().unwrap();
    assert!(holders.iter().all(|h| h["name"] == "holder"), "{holders:?}");
    let release = strings(&lock["holder_frames"]);
    assert!(
        release.contains(&"pinprof_testprog::hold_ledger"),
        "the release stack names the holder's function: {release:?}"
    );
    assert_eq!(report["lost_events"], 0);
}

#[test]
fn a_slow_pipe_read_is_a_long_read_on_a_pipe() {
    let NativeRun {
        report,
        measured: reads,
        stdin,
        go_ns,
        idle_ns,
        pid,
        recording,
    } = run_native_with_stdin(&["pipe", "5"], "read", &[]);
    // Not a JVM: said so, and its threads are shown all the same.
    assert!(
        report["target"]["runtime"].is_null(),
        "{}",
        report["target"]
    );
    let threads = report["threads"].as_array().unwrap();
    assert!(
        threads.iter().any(|t| t["tid"] == pid),
        "its main thread {pid} is not in {threads:?}"
    );
    let output = pinprof().arg("report").arg(&recording).output().unwrap();
    assert_ok(&output, "pinprof report");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("note: no JVM found in the target"), "{text}");
    let table = text
        .split("\nThreads")
        .nth(1)
        .unwrap_or_else(|| panic!("no threads table:\n{text}"));
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().next() == Some(&pid.to_string())),
        "its main thread {pid} is not in the threads table:\n{text}"
    );
    assert_eq!(reads.len(), 5);
    let read = report["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "read")
        .expect("read in the system calls");
    let files = read["files"].as_array().unwrap();
    let pipe: Vec<&Value> = files
        .iter()
        // (Its wait for "go" on standard input, a pipe too, is not one of them.)
        .filter(|f| f["name"].as_str().unwrap().starts_with("pipe:[") && f["name"] != stdin)
        .collect();
    let (n, ns) = pipe.iter().fold((0, 0), |(n, ns), f| {
        (
            n + f["events"].as_u64().unwrap(),
            ns + f["total_ns"].as_u64().unwrap(),
        )
    });
    assert_eq!(n, 5, "five long reads on pipes: {files:?}");
    let ours = ns as f64 / n as f64 / 1e6;
    // Against what the reader measured, in ms.
    assert_within("pipe read (ms)", ours, mean_ms(&reads), 0.10);
    assert!(ours >= 27.0, "a 30 ms wait: {ours} ms");
    // Standard input is read twice: for "go", from before attach (so from the window's
    // start) to when the program saw it; and at the end, from when it went idle to the
    // window's end (unfinished).
    let reads = files
        .iter()
        .find(|f| f["name"] == stdin)
        .unwrap_or_else(|| panic!("the reads of standard input ({stdin}): {files:?}"));
    assert_eq!(reads["events"], 2, "{reads}");
    let start = report["window"]["start_mono_ns"].as_u64().unwrap();
    let end = start + report["window"]["duration_ns"].as_u64().unwrap();
    assert_within(
        "reads of standard input (ms)",
        reads["total_ns"].as_f64().unwrap() / 1e6,
        ((go_ns - start) + (end - idle_ns)) as f64 / 1e6,
        0.05,
    );
}

#[test]
fn an_fsync_names_its_file() {
    let path = scratch("fsync-target.dat");
    let path = path.to_str().unwrap();
    // Every call is an event here, however fast the disk: traced from entry to exit
    // (`--syscalls blocking` sees a call only as it blocks, once each time).
    let (report, syncs) = run_native(
        &["fsync", path, "3"],
        "fsync",
        &["--syscalls", "traced", "--min-syscall", "1us"],
    );
    assert_eq!(syncs.len(), 3);
    let fsync = report["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fsync")
        .expect("fsync in the system calls");
    let files = fsync["files"].as_array().unwrap();
    assert!(
        files.iter().any(|f| f["name"] == path && f["events"] == 3),
        "fsync of {path}: {files:?}"
    );
    let _ = std::fs::remove_file(path);
}

#[test]
fn kernel_lock_contention_is_a_wait_kind_per_thread() {
    // Four threads mapping and unmapping at once contend on their address space's lock.
    let (report, _) = run_native(&["mmap", "5"], "-", &[]);
    let mappers: Vec<&Value> = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().unwrap().starts_with("mapper-"))
        .collect();
    assert_eq!(mappers.len(), 4, "{:?}", report["threads"]);
    let contended: u64 = mappers
        .iter()
        .map(|t| t["kernel_lock_ns"].as_u64().unwrap())
        .sum();
    eprintln!("kernel lock contention of the mappers: {contended} ns");
    assert!(contended > 0, "the mappers contended in the kernel");
    let kernel_waits: u64 = report["locks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "kernel")
        .map(|l| l["waits"].as_u64().unwrap())
        .sum();
    assert!(
        kernel_waits > 0,
        "kernel locks listed: {:?}",
        report["locks"]
    );
}

#[test]
fn jvm_lock_waits_name_the_releasing_thread_and_its_java_stack() {
    let jvm = start(21, "LockContention", &["3"]);
    std::thread::sleep(Duration::from_millis(1500));
    let report = report_json(&record(jvm.pid, 2.0, "lockcontention.pinrec"));
    let tellers: Vec<&Value> = report["locks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            let waiters = strings(&l["waiters"]);
            l["kind"] == "futex"
                && !waiters.is_empty()
                && waiters.iter().all(|w| w.starts_with("teller-"))
        })
        .collect();
    assert!(!tellers.is_empty(), "locks the tellers waited on");
    // The JIT compilers' waits for work are the JVM's own, listed after every lock of the
    // application; the tellers' locks are not (a teller's wait the VM thread ended, at a
    // safepoint, is the JVM's).
    let locks = report["locks"].as_array().unwrap();
    for (i, lock) in locks.iter().enumerate() {
        let waiters = strings(&lock["waiters"]);
        let holders: Vec<&str> = lock["holders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["name"].as_str().unwrap())
            .collect();
        if waiters.iter().any(|w| w.starts_with("teller-"))
            && holders.iter().all(|h| h.starts_with("teller-"))
        {
            assert_eq!(lock["jvm_internal"], false, "{lock}");
        } else if !waiters.is_empty() && waiters.iter().all(|w| w.contains("CompilerThre")) {
            assert_eq!(lock["jvm_internal"], true, "{lock}");
            assert_eq!(lock["long_held"], false, "{lock}");
        }
        if lock["jvm_internal"] == true {
            assert!(
                locks[i..].iter().all(|l| l["jvm_internal"] == true),
                "the JVM's own waits come last: {locks:?}"
            );
        }
    }
    let (mut released, mut with_stack) = (0, 0);
    let mut with_wait_stack = 0;
    for lock in &tellers {
        // The waiter's side, from its longest wait with a Java stack (one is walked only for
        // a wait that slept 1 ms or more): parked in the teller's method.
        let waited = strings(&lock["waiter_frames"]);
        if waited.contains(&"jdk.internal.misc.Unsafe.park") {
            with_wait_stack += 1;
            assert!(
                waited.contains(&"LockContention$Account.transfer"),
                "the waiter's Java stack: {waited:?}"
            );
        }
        let waiters = strings(&lock["waiters"]);
        for h in lock["holders"].as_array().unwrap() {
            let holder = h["name"].as_str().unwrap();
            // The waker is the teller that released the lock: another teller. (A futex word
            // is one waiter's parker; the ReentrantLock's row has every teller on both sides.)
            assert!(holder.starts_with("teller-"), "{lock}");
            if lock["java"].is_null() {
                assert!(!waiters.contains(&holder), "{lock}");
            }
            released += h["waits"].as_u64().unwrap();
        }
        // Release stacks are captured within a budget: most locks have one, and every one
        // there is names the teller's method and the unpark that released the waiter. (A
        // release whose Java stack was not captured, the thread gone on before its copy, has
        // its native frames alone: counted as without a stack.)
        let release = strings(&lock["holder_frames"]);
        if !release
            .iter()
            .any(|f| f.starts_with("java.") || f.starts_with("jdk."))
        {
            continue;
        }
        with_stack += lock["waits"].as_u64().unwrap();
        assert!(
            release.contains(&"LockContention$Account.transfer")
                && release.contains(&"jdk.internal.misc.Unsafe.unpark"),
            "the holder's Java stack as it released: {release:?}"
        );
    }
    eprintln!(
        "{with_stack} of {released} released waits on locks with a release stack; {} \
         waker stacks skipped by the budget",
        report["capture"]["waker_stacks_skipped"]
    );
    assert!(
        with_stack * 5 >= released * 4,
        "only {with_stack} of {released} released waits are on locks with a release stack"
    );
    assert!(released >= 50, "only {released} released waits");
    assert!(
        with_wait_stack * 5 >= tellers.len() * 4,
        "only {with_wait_stack} of {} locks have a wait stack",
        tellers.len()
    );
    assert_eq!(report["lost_events"], 0);
}

/// The addresses of the `class` objects threads park on in a thread dump of the JVM (`jcmd
/// Thread.print`): "- parking to wait for  <0x...> (a class)".
fn parked_on_in_thread_dump(major: u32, pid: u32, class: &str) -> BTreeSet<u64> {
    let out = Command::new(jdk_tool(major, "jcmd"))
        .args([&pid.to_string(), "Thread.print"])
        .output()
        .expect("run jcmd");
    assert_ok(&out, "jcmd Thread.print");
    let dump = String::from_utf8_lossy(&out.stdout);
    dump.lines()
        .filter(|l| l.contains("parking to wait for") && l.contains(&format!("(a {class})")))
        .filter_map(|l| {
            let hex = l.split('<').nth(1)?.split('>').next()?;
            u64::from_str_radix(hex.trim_start_matches("0x"), 16).ok()
        })
        .collect()
}

/// Eight platform threads take turns on one ReentrantLock: their parks (each on its own
/// futex) are one lock row, named by its class, with 8 waiters and its owner, and the
/// object is the one the JVM's own thread dump says they park on.
fn a_reentrant_lock_is_one_row(major: u32) {
    const SYNC: &str = "java.util.concurrent.locks.ReentrantLock$NonfairSync";
    let jvm = start(major, "LockContention", &["8"]);
    std::thread::sleep(Duration::from_millis(1500));
    let dumped = parked_on_in_thread_dump(major, jvm.pid, SYNC);
    let name = format!("reentrant{major}.pinrec");
    let report = report_json(&record(jvm.pid, 2.0, &name));
    let after = parked_on_in_thread_dump(major, jvm.pid, SYNC);
    assert_eq!(
        dumped.len(),
        1,
        "one lock parked on in the thread dump: {dumped:x?}"
    );
    assert_eq!(
        dumped, after,
        "the lock did not move (no collection moved it)"
    );
    let locks = report["locks"].as_array().unwrap();
    let rows: Vec<&Value> = locks
        .iter()
        .filter(|l| l["java"]["class"] == SYNC)
        .collect();
    assert_eq!(rows.len(), 1, "one row for the lock: {rows:#?}");
    let row = rows[0];
    let address = u64::from_str_radix(
        row["address"].as_str().unwrap().trim_start_matches("0x"),
        16,
    )
    .unwrap();
    assert_eq!(
        Some(&address),
        dumped.iter().next(),
        "the object the thread dump names"
    );
    assert_eq!(row["java"]["kind"], "ownable");
    // Every teller waits (a non-fair lock's barging can leave one parked through the
    // window: it is still waiting at the end, and a waiter all the same).
    let waiters = strings(&row["waiters"]);
    let teller_rows: Vec<&Value> = locks
        .iter()
        .filter(|l| {
            strings(&l["waiters"])
                .iter()
                .any(|w| w.starts_with("teller-"))
        })
        .collect();
    assert_eq!(waiters.len(), 8, "{waiters:?} in {teller_rows:#?}");
    assert!(
        waiters.iter().all(|w| w.starts_with("teller-")),
        "{waiters:?}"
    );
    // Its owner as last read: a teller, by its name and its OS thread id.
    let owner = &row["java"]["owner"];
    let owner_name = owner["name"].as_str().expect("owner named");
    assert!(owner_name.starts_with("teller-"), "{owner}");
    assert_eq!(owner["state"], "platform");
    let tid = owner["tid"].as_u64().expect("owner's tid");
    let thread = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == tid)
        .expect("the owner among the threads");
    assert_eq!(thread["name"], owner_name);
    // Nearly every teller's lock wait is in that row (a wait read too late for its blocker
    // keeps its futex word's row).
    let teller_waits: u64 = locks
        .iter()
        .filter(|l| {
            strings(&l["waiters"])
                .iter()
                .all(|w| w.starts_with("teller-"))
        })
        .map(|l| l["waits"].as_u64().unwrap())
        .sum();
    let in_row = row["waits"].as_u64().unwrap();
    eprintln!("JDK {major}: {in_row} of the tellers' {teller_waits} lock waits in the lock's row");
    assert!(
        in_row as f64 >= 0.95 * teller_waits as f64,
        "{in_row} of {teller_waits}"
    );
}

#[test]
fn jdk21_a_reentrant_lock_with_8_waiters_is_one_row_with_its_owner() {
    a_reentrant_lock_is_one_row(21);
}

#[test]
fn jdk25_a_reentrant_lock_with_8_waiters_is_one_row_with_its_owner() {
    a_reentrant_lock_is_one_row(25);
}

/// The virtual threads the JVM's own thread dump (`jcmd Thread.dump_to_file -format=json`)
/// shows parked in `UnmountedLock$Inventory.take`, by id, with the dump's time (Unix ns, as
/// the JVM stamped it).
fn parked_in_thread_dump(major: u32, pid: u32, name: &str) -> (u64, BTreeSet<u64>) {
    let file = scratch(&format!("{name}.threads.json"));
    let _ = std::fs::remove_file(&file);
    let out = Command::new(jdk_tool(major, "jcmd"))
        .arg(pid.to_string())
        .args(["Thread.dump_to_file", "-format=json"])
        .arg(&file)
        .output()
        .expect("run jcmd");
    assert_ok(&out, "jcmd Thread.dump_to_file");
    let dump: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let at = common::jfr::iso_ns(dump["threadDump"]["time"].as_str().unwrap());
    let parked = dump["threadDump"]["threadContainers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["threads"].as_array().unwrap())
        .filter(|t| {
            let stack: Vec<&str> = t["stack"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|f| f.as_str())
                .collect();
            stack
                .first()
                .is_some_and(|f| f.starts_with("java.base/java.lang.VirtualThread.park"))
                && stack
                    .iter()
                    .any(|f| f.starts_with("UnmountedLock$Inventory.take("))
        })
        .map(|t| t["tid"].as_str().unwrap().parse().unwrap())
        .collect();
    (at, parked)
}

/// Virtual threads waiting unmounted on a ReentrantLock (`record --vthread-waits`): a
/// restocker holds it 600 ms once a second while 20 virtual threads take it in turn; no OS
/// thread blocks. The lock's row names its class, its owner (the restocker) and where the
/// owner held it; its waits agree with the workload's own clock.
fn unmounted_lock_waits_match_the_workload(major: u32) {
    const SYNC: &str = "java.util.concurrent.locks.ReentrantLock$NonfairSync";
    let mut jvm = start_vt(major, 2, "UnmountedLock", &["20", "600"]);
    let name = format!("unmounted-lock{major}.pinrec");
    let (recorder, recording) = spawn_record_with(jvm.pid, &name, &["--vthread-waits"]);
    // The JVM's own thread dumps, meanwhile, taken as the restocker holds the lock: which
    // virtual threads each shows parked in Inventory.take, and when it was taken. Two that
    // catch the waiters parked are enough (jcmd starts a JVM of its own: one may come late).
    let started = std::time::Instant::now();
    // Holds that began before the probes were in hold waits the probes never saw begin: the
    // restocker's lines from before then (queued since the JVM started) are passed over, with
    // room for a slow attach on a busy host (it takes about 1 s here).
    let probes_in = profiler::capture::monotonic_ns() + 5_000_000_000;
    let mut dumps = Vec::new();
    for i in 0..12 {
        if dumps.len() == 2 {
            break;
        }
        loop {
            let line = jvm
                .wait_for("holding ", Duration::from_secs(10))
                .expect("the restocker holds the lock");
            let at: u64 = line["holding ".len()..].trim().parse().unwrap();
            if at > probes_in {
                break;
            }
        }
        let dump = parked_in_thread_dump(major, jvm.pid, &format!("{name}-{i}"));
        if dump.1.len() >= 5 {
            dumps.push(dump);
        }
    }
    std::thread::sleep(Duration::from_secs(6).saturating_sub(started.elapsed()));
    interrupt(recorder);
    say(&mut jvm, "report");
    let lines = jvm
        .lines_until("done", Duration::from_secs(30))
        .expect("the workload's report");
    let report = report_json(&recording);
    schema_errors(&report).unwrap();
    let start = report["window"]["start_mono_ns"].as_u64().unwrap();
    let end = start + report["window"]["duration_ns"].as_u64().unwrap();
    let pair = |l: &str| -> (u64, u64) {
        let v: Vec<u64> = l
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap())
            .collect();
        (v[0], v[1])
    };
    // The workload's lock() calls of at least the threshold (1 ms) that began and ended in
    // the window: pinprof sees a wait from the unmount it saw to the mount it saw.
    let min = 1_000_000;
    let truth: Vec<u64> = lines
        .iter()
        .filter(|l| l.starts_with("wait "))
        .map(|l| pair(l))
        .filter(|&(s, e)| s >= start && e <= end && e - s >= min)
        .map(|(s, e)| e - s)
        .collect();
    let restocker: u64 = lines
        .iter()
        .find_map(|l| l.strip_prefix("restocker "))
        .expect("the restocker's id")
        .parse()
        .unwrap();
    let rows: Vec<&Value> = report["locks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "vthread" && l["java"]["class"] == SYNC)
        .collect();
    assert_eq!(rows.len(), 1, "one row for the lock: {rows:#?}");
    let row = rows[0];
    assert_eq!(row["java"]["kind"], "ownable");
    let owner = &row["java"]["owner"];
    assert_eq!(
        owner["java_id"], restocker,
        "the owner is the restocker: {owner}"
    );
    assert_eq!(owner["state"], "unmounted", "{owner}");
    let holder = strings(&row["holder_frames"]);
    assert!(
        holder.contains(&"UnmountedLock$Inventory.restock"),
        "where the owner held it: {holder:?}"
    );
    let waiter = strings(&row["waiter_frames"]);
    assert!(
        waiter.contains(&"UnmountedLock$Inventory.take"),
        "where they waited: {waiter:?}"
    );
    assert_eq!(strings(&row["waiters"]).len(), 20, "{row}");
    // The finding names the lock's holder and where it held it.
    let findings = report["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["kind"] == "lock_contention"
            && f["summary"]
                .as_str()
                .unwrap()
                .contains(&format!("unmounted, for a {SYNC}"))
            && f["summary"].as_str().unwrap().contains(&format!(
                "held by virtual thread #{restocker} at `UnmountedLock$Inventory.restock`"
            ))),
        "{findings:#?}"
    );
    let total: u64 = truth.iter().sum();
    let longest = truth.iter().copied().max().unwrap_or(0);
    eprintln!(
        "JDK {major}: workload {} waits, {:.3} s, longest {:.1} ms; pinprof {} waits",
        truth.len(),
        total as f64 / 1e9,
        longest as f64 / 1e6,
        row["waits"]
    );
    // A waiter that parks twice in one lock() (woken, beaten to the lock by another) is two
    // waits to pinprof and one to the workload: time is compared, not counts.
    assert_within(
        "unmounted lock wait time",
        ns(&row["wait_ns"]),
        total as f64,
        0.10,
    );
    assert_within(
        "longest unmounted lock wait",
        ns(&row["max_wait_ns"]),
        longest as f64,
        0.05,
    );
    assert_eq!(report["lost_events"], 0);
    // Against the JVM's thread dumps: each virtual thread a dump shows parked at
    // Inventory.take is in a recorded wait on the lock across the dump, and each recorded
    // wait that spans a whole dump is a thread the dump shows parked there.
    let opened = profiler::recording::Recording::open(&recording).unwrap();
    let model = profiler::model::Model::from_recording(&opened);
    let on_lock: Vec<&profiler::events::VthreadWait> = model
        .vthread_waits
        .iter()
        .filter(|w| w.blocker.as_ref().is_some_and(|b| b.class == SYNC))
        .collect();
    // A dump's time (the wall clock as it began) on the recording's monotonic clock; its
    // walk of a few dozen threads takes a few milliseconds.
    let unix0 = report["window"]["start_unix_ns"].as_u64().unwrap();
    let (mut shown, mut missed, mut spanning, mut unshown) = (0, 0, 0, 0);
    for (at_unix, parked) in &dumps {
        let before = start + at_unix.saturating_sub(unix0);
        let after = before + 25_000_000;
        let (before, after) = (&before, &after);
        for id in parked {
            shown += 1;
            // (A park shorter than the threshold, caught by the dump, is not recorded.)
            let found = on_lock
                .iter()
                .any(|w| w.vthread_id == *id && w.start_ns < *after && w.end_ns > *before);
            missed += usize::from(!found);
        }
        for w in on_lock
            .iter()
            .filter(|w| w.start_ns < *before && w.end_ns > *after)
        {
            spanning += 1;
            unshown += usize::from(!parked.contains(&w.vthread_id));
        }
    }
    eprintln!(
        "JDK {major} thread dumps: {shown} parked at Inventory.take, {missed} without a recorded \
         wait; {spanning} recorded waits spanning a dump, {unshown} not shown parked"
    );
    assert_eq!(dumps.len(), 2, "two dumps caught the waiters parked");
    assert!(missed * 10 <= shown, "{missed} of {shown}");
    assert_eq!(unshown, 0, "recorded waits the JVM did not show parked");
    // No OS thread blocked on it: no pinning, and no futex row for it.
    assert_eq!(report["pinned"]["events"], 0, "{}", report["pinned"]);
    // The flamegraph of waits off the carriers weighs every recorded wait by its stack.
    let folded = scratch(&format!("unmounted-lock{major}.folded"));
    let out = pinprof()
        .args(["export", "--kind", "vthread", "--force", "-o"])
        .arg(&folded)
        .arg(&recording)
        .output()
        .unwrap();
    assert_ok(&out, "export --kind vthread");
    let folded = std::fs::read_to_string(&folded).unwrap();
    let weight = |l: &str| -> f64 { l.rsplit(' ').next().unwrap().parse().unwrap() };
    let drawn_us: f64 = folded.lines().map(weight).sum();
    let take_us: f64 = folded
        .lines()
        .filter(|l| l.contains("UnmountedLock$Inventory.take"))
        .map(weight)
        .sum();
    let recorded_us = ns(&report["vthread_waits"]["wait_ns"]) / 1e3;
    // Each wait adds its whole microseconds: at most 1 us short per wait.
    let waits = report["vthread_waits"]["waits"].as_f64().unwrap();
    assert!(
        drawn_us <= recorded_us && drawn_us >= recorded_us - waits,
        "drawn {drawn_us} us of {recorded_us} us"
    );
    assert_within(
        "lock waits drawn at Inventory.take",
        take_us * 1e3,
        total as f64,
        0.10,
    );
}

#[test]
fn jdk21_unmounted_reentrant_lock_waits_match_the_workload() {
    unmounted_lock_waits_match_the_workload(21);
}

#[test]
fn jdk25_unmounted_reentrant_lock_waits_match_the_workload() {
    unmounted_lock_waits_match_the_workload(25);
}

/// JDK 25 (JEP 491): virtual threads contend on a `synchronized` method that sleeps 15 ms
/// inside. Nothing pins: the waits to enter are unmounted (the VM preempts the waiter), and
/// the monitor's row names its class and its owner, with the waits the workload timed.
#[test]
fn jdk25_unmounted_monitor_waits_match_the_workload() {
    let mut jvm = start_vt(25, 2, "UnmountedMonitor", &["8", "15"]);
    let (recorder, recording) =
        spawn_record_with(jvm.pid, "unmounted-monitor.pinrec", &["--vthread-waits"]);
    std::thread::sleep(Duration::from_secs(5));
    interrupt(recorder);
    say(&mut jvm, "report");
    let lines = jvm
        .lines_until("done", Duration::from_secs(30))
        .expect("the workload's report");
    let report = report_json(&recording);
    schema_errors(&report).unwrap();
    let start = report["window"]["start_mono_ns"].as_u64().unwrap();
    let end = start + report["window"]["duration_ns"].as_u64().unwrap();
    let truth: Vec<u64> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("wait "))
        .map(|l| {
            let v: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            (v[0], v[1])
        })
        .filter(|&(s, e)| s >= start && e <= end && e - s >= 1_000_000)
        .map(|(s, e)| e - s)
        .collect();
    let rows: Vec<&Value> = report["locks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "vthread" && l["java"]["class"] == "UnmountedMonitor$Ledger")
        .collect();
    assert_eq!(rows.len(), 1, "one row for the monitor: {rows:#?}");
    let row = rows[0];
    assert_eq!(row["java"]["kind"], "monitor");
    assert_eq!(row["operation"], "monitor_enter");
    let owner = &row["java"]["owner"];
    assert_eq!(
        owner["state"], "unmounted",
        "an owner, sleeping unmounted: {owner}"
    );
    let holder = strings(&row["holder_frames"]);
    assert!(
        holder.contains(&"UnmountedMonitor$Ledger.append"),
        "where the owner held it: {holder:?}"
    );
    assert!(
        strings(&row["waiter_frames"]).contains(&"UnmountedMonitor$Ledger.append"),
        "{row}"
    );
    let findings = report["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["kind"] == "lock_contention"
            && f["summary"]
                .as_str()
                .unwrap()
                .contains("unmounted, for a UnmountedMonitor$Ledger")
            && f["advice"].as_str().unwrap().contains("no longer pin")),
        "{findings:#?}"
    );
    let total: u64 = truth.iter().sum();
    eprintln!(
        "JDK 25 monitor: workload {} entries waited {:.3} s; pinprof {} waits",
        truth.len(),
        total as f64 / 1e9,
        row["waits"]
    );
    assert_within(
        "unmounted monitor wait time",
        ns(&row["wait_ns"]),
        total as f64,
        0.10,
    );
    assert_eq!(report["pinned"]["events"], 0, "{}", report["pinned"]);
    assert_eq!(report["lost_events"], 0);
}

/// Two virtual threads deadlock on two ReentrantLocks, each waiting unmounted for the lock
/// the other holds, as the workload says: the report finds the deadlock, naming both by
/// their ids and what each waits for (no OS thread is blocked on it: only the waits off
/// the carriers show it). A deadlock older than the recording is not seen: its waits began
/// before the probes were there.
fn unmounted_deadlock_is_found(major: u32) {
    let mut jvm = start_vt(major, 2, "UnmountedDeadlock", &[]);
    let name = format!("unmounted-deadlock{major}.pinrec");
    // The probes see a wait begin: the recording starts before the threads do.
    let (recorder, recording) = spawn_record_with(jvm.pid, &name, &["--vthread-waits"]);
    std::thread::sleep(Duration::from_millis(500));
    say(&mut jvm, "go");
    let said = jvm
        .wait_for("deadlocked ", Duration::from_secs(30))
        .expect("the workload deadlocks");
    let ids: Vec<u64> = said
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    // Stuck for at least a second before the end: 2 s after both waits began.
    std::thread::sleep(Duration::from_millis(2000));
    interrupt(recorder);
    let report = report_json(&recording);
    let deadlocks: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "deadlock")
        .collect();
    assert_eq!(deadlocks.len(), 1, "{deadlocks:#?}");
    let summary = deadlocks[0]["summary"].as_str().unwrap();
    for id in &ids {
        assert!(
            summary.contains(&format!("virtual thread #{id} (unmounted) waits for a java.util.concurrent.locks.ReentrantLock$NonfairSync held by virtual thread #")),
            "{summary}"
        );
    }
    assert!(
        strings(&deadlocks[0]["frames"]).contains(&"UnmountedDeadlock.transfer"),
        "{}",
        deadlocks[0]
    );
    // Both waits are still under way on their locks' rows.
    let waiting: u64 = report["locks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "vthread")
        .map(|l| l["waiting_at_end"].as_u64().unwrap())
        .sum();
    assert_eq!(waiting, 2, "{}", report["locks"]);
    assert_eq!(report["vthread_waits"]["waiting_at_end"], 2);
}

#[test]
fn jdk21_unmounted_deadlock_is_found() {
    unmounted_deadlock_is_found(21);
}

#[test]
fn jdk25_unmounted_deadlock_is_found() {
    unmounted_deadlock_is_found(25);
}
