//! JVMs in containers: a JVM alone in its own PID and mount namespace with a private /tmp
//! (what a container runtime gives it), recorded from the host by its host pid; and pinprof
//! itself inside a PID namespace, given the pid as that namespace numbers it. Checked against
//! JFR, the workloads' own counts, /proc and the same workloads on the host.

mod common;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use common::{jfr::Jfr, *};
use serde_json::Value;

/// `unshare` of util-linux: the tests cannot make a container without it.
fn unshare() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("unshare"))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("`unshare` is missing: install util-linux (`cargo xtask setup` does)")
        })
}

/// The ids of a task from the host's namespace down to its own (`NSpid:`).
fn nspids(pid: u32, tid: u32) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .expect("NSpid")
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

/// Where a contained JVM finds the workloads: bound there in its mount namespace before its
/// `/tmp` is replaced (a checkout under /tmp would be hidden by the new tmpfs).
const INSIDE_WORKLOADS: &str = "/mnt";

/// A command run as pid 1 of new PID and mount namespaces, with a /proc and a tmpfs /tmp of
/// their own (what a container gets), the workloads at `INSIDE_WORKLOADS`; killed with
/// `unshare` when the test drops it.
fn contained(program: &Path) -> Command {
    assert!(
        Path::new(INSIDE_WORKLOADS).is_dir(),
        "{INSIDE_WORKLOADS} is missing: the contained JVMs see the workloads there"
    );
    let mut command = Command::new(unshare());
    command
        .args(["--pid", "--fork", "--mount-proc", "--mount", "--kill-child"])
        .args(["--", "sh", "-c"])
        .arg(format!(
            "mount --bind \"$1\" {INSIDE_WORKLOADS} && \
             mount -t tmpfs -o mode=1777 tmpfs /tmp && shift && exec \"$@\""
        ))
        .arg("sh")
        .arg(workloads())
        .arg(program);
    command
}

/// The host pid of what `unshare --fork` (pid `unshare`) started.
fn forked_child(unshare: u32) -> u32 {
    let children =
        std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children")).unwrap();
    let mut pids = children.split_whitespace().map(|p| p.parse().unwrap());
    let child = pids.next().expect("unshare forked its child");
    assert!(pids.next().is_none(), "one child: {children}");
    child
}

/// A workload JVM as pid 1 of a PID and mount namespace of its own with a private /tmp.
/// `jvm.pid` is its host pid.
fn start_contained(major: u32, options: &[&str], main: &str, args: &[&str]) -> Jvm {
    require_root();
    let mut command = contained(&java(major));
    command
        .args(options)
        .arg("-cp")
        .arg(INSIDE_WORKLOADS)
        .arg(main)
        .args(args);
    let mut jvm = Jvm::spawn(command).expect("start the workload JVM in its own namespaces");
    assert_eq!(jvm.pid, 1, "the JVM is pid 1 of its namespace");
    let host = forked_child(jvm.child.id());
    assert_eq!(
        nspids(host, host),
        [host, 1],
        "host pid {host}, pid 1 inside"
    );
    // Its /tmp is its own: the host's is another directory.
    let own_tmp = std::fs::metadata(format!("/proc/{host}/root/tmp")).unwrap();
    let host_tmp = std::fs::metadata("/tmp").unwrap();
    use std::os::unix::fs::MetadataExt as _;
    assert_ne!(
        (own_tmp.dev(), own_tmp.ino()),
        (host_tmp.dev(), host_tmp.ino()),
        "a private /tmp"
    );
    jvm.pid = host;
    jvm
}

fn pid_ns_inode(pid: u32) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(format!("/proc/{pid}/ns/pid"))
        .unwrap()
        .ino()
}

/// JFR's pinned events that started inside the report's window.
fn in_window(report: &Value, events: Vec<jfr::Pinned>) -> Vec<jfr::Pinned> {
    let from = report["window"]["start_unix_ns"].as_u64().unwrap();
    let to = from + report["window"]["duration_ns"].as_u64().unwrap();
    events
        .into_iter()
        .filter(|e| (from..to).contains(&e.start_unix_ns))
        .collect()
}

/// (events, total ns) of the pinned sites that `keep` accepts.
fn pinned(report: &Value, keep: impl Fn(&Value) -> bool) -> (u64, u64) {
    report["pinned"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| keep(s))
        .fold((0, 0), |(n, t), s| {
            (
                n + s["events"].as_u64().unwrap(),
                t + s["total_ns"].as_u64().unwrap(),
            )
        })
}

#[test]
fn a_contained_jvm_recorded_from_the_host_pins_as_jfr_says() {
    let jvm = start_contained(
        21,
        &["-Djdk.virtualThreadScheduler.parallelism=4"],
        "Pinning",
        &["sleep", "socket"],
    );
    std::thread::sleep(Duration::from_millis(500));
    // JFR and pinprof both reach it by its host pid, JFR through the JVM's attach socket in
    // its own /tmp.
    let jfr = Jfr::start_contained(21, jvm.pid, "contained-pinned");
    let recording = record(jvm.pid, 4.0, "contained-pinned.pinrec");
    let truth = jfr.stop();
    let report = report_json(&recording);
    let truth = in_window(&report, truth);

    // Carriers: the JVM's full names (from the JVM, not the kernel's 15 bytes), under the
    // host's thread ids, each a thread of the JVM whose own id differs.
    let carriers = carrier_threads(&report);
    assert!(
        !carriers.is_empty(),
        "no carriers in {:?}",
        report["threads"]
    );
    for c in &carriers {
        let name = c["name"].as_str().unwrap();
        assert!(name.starts_with("ForkJoinPool-1-worker-"), "{name}");
        let tid = c["tid"].as_u64().unwrap() as u32;
        let ids = nspids(jvm.pid, tid);
        assert_eq!(ids[0], tid, "a host thread id");
        assert_ne!(ids[1], tid, "not the JVM's own id for it");
    }
    eprintln!("{} carriers, under host thread ids", carriers.len());

    // Pinned parks against JFR, with the tolerances of the host's own test (10% in count,
    // 15% in time).
    let (parks, park_ns) = pinned(&report, |s| s["operation"] == "park");
    assert_within(
        "contained JDK 21 pinned parks",
        parks as f64,
        truth.len() as f64,
        0.10,
    );
    let truth_ns: u64 = truth.iter().map(|e| e.duration_ns).sum();
    assert_within(
        "contained JDK 21 pinned park time",
        park_ns as f64,
        truth_ns as f64,
        0.15,
    );
    // Their Java frames are named: nearly every pinned park sits in one of the workload's
    // two synchronized methods, with no frame left unknown.
    let named = |s: &Value| {
        let frames = strings(&s["frames"]);
        frames
            .iter()
            .any(|f| *f == "Pinning$Ledger.append" || *f == "Pinning$Channel.call")
            && !frames.iter().any(|f| f.starts_with("[unknown"))
    };
    let (named_parks, _) = pinned(&report, |s| s["operation"] == "park" && named(s));
    eprintln!("{named_parks} of {parks} pinned parks in the workload's named methods");
    assert!(
        named_parks as f64 >= 0.95 * parks as f64,
        "{named_parks} of {parks} pinned parks have their Java frames named"
    );
    assert_eq!(report["lost_events"], 0);

    // pinprof's own attach reaches it too (its socket is in the JVM's /tmp, named by its
    // pid there): the JVM says its parallelism.
    let out = pinprof()
        .args(["jvm", "--pid", &jvm.pid.to_string()])
        .output()
        .unwrap();
    assert_ok(&out, "pinprof jvm");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("parallelism: 4 (set in the JVM)"),
        "attached to the contained JVM:\n{text}"
    );
    assert!(text.contains("carriers: "), "{text}");
}

#[test]
fn jit_names_of_a_contained_jvm_come_from_its_own_perf_map() {
    // With -XX:+PreserveFramePointer, the frame-pointer walk named from the JVM's perf map
    // is compared with pinprof's walk of the compiled frames: a stack is compared only where
    // the perf map names a frame, so comparisons at all mean the map was found where the
    // JVM wrote it (its own /tmp, named by its pid there).
    let jvm = start_contained(
        21,
        &["-XX:+PreserveFramePointer"],
        "SyncSleep",
        &["2", "1", "5"],
    );
    std::thread::sleep(Duration::from_secs(4));
    let out = Command::new(jdk_tool(21, "jcmd"))
        .args([&jvm.pid.to_string(), "Compiler.perfmap"])
        .output()
        .unwrap();
    assert_ok(&out, "jcmd Compiler.perfmap");
    let inside = format!("/proc/{}/root/tmp/perf-1.map", jvm.pid);
    assert!(Path::new(&inside).exists(), "the JVM wrote {inside}");
    assert!(
        !Path::new(&format!("/tmp/perf-{}.map", jvm.pid)).exists(),
        "no perf map under the host pid in the host's /tmp"
    );
    let report = report_json(&record_with(
        jvm.pid,
        2.0,
        "contained-fp.pinrec",
        &["--fp-cross-check"],
    ));
    let check = &report["capture"]["fp_cross_check"];
    let (compared, agreed) = (
        check["compared"].as_u64().unwrap(),
        check["agreed"].as_u64().unwrap(),
    );
    eprintln!(
        "contained JVM: frame-pointer walk named from its perf map agreed on {agreed} of {compared} stacks"
    );
    assert!(compared >= 50, "only {compared} stacks compared: {check}");
    assert!(
        agreed as f64 >= 0.95 * compared as f64,
        "agreed on {agreed} of {compared}: {check}"
    );
    // Interpreted and compiled frames of the workload's method, named.
    let kinds: Vec<(String, String)> = report["off_cpu"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            let frames = strings(&s["frames"]);
            let kinds = s["frame_kinds"].as_array().unwrap().clone();
            frames
                .into_iter()
                .zip(kinds)
                .map(|(f, k)| (f.to_string(), k.as_str().unwrap_or("").to_string()))
                .collect::<Vec<_>>()
        })
        .filter(|(f, _)| f == "SyncSleep$Inventory.reserve")
        .collect();
    assert!(
        kinds.iter().any(|(_, k)| k == "compiled" || k == "inlined"),
        "SyncSleep$Inventory.reserve compiled: {kinds:?}"
    );
}

/// The tellers' futex locks in a LockContention report: (waits, waits whose holder's
/// release stack names `LockContention$Account.transfer`).
fn teller_locks(report: &Value) -> (u64, u64) {
    let (mut waits, mut with_stack) = (0, 0);
    for lock in report["locks"].as_array().unwrap() {
        let waiters = strings(&lock["waiters"]);
        if lock["kind"] != "futex"
            || waiters.is_empty()
            || !waiters.iter().all(|w| w.starts_with("teller-"))
        {
            continue;
        }
        for h in lock["holders"].as_array().unwrap() {
            let holder = h["name"].as_str().unwrap();
            assert!(holder.starts_with("teller-"), "{lock}");
            // A futex word is one waiter's parker; the ReentrantLock's own row (its parks,
            // grouped) has every teller on both sides.
            if lock["java"].is_null() {
                assert!(!waiters.contains(&holder), "{lock}");
            } else {
                assert_eq!(
                    lock["java"]["class"],
                    "java.util.concurrent.locks.ReentrantLock$NonfairSync"
                );
            }
        }
        let n = lock["waits"].as_u64().unwrap();
        waits += n;
        if strings(&lock["holder_frames"]).contains(&"LockContention$Account.transfer") {
            with_stack += n;
        }
    }
    (waits, with_stack)
}

#[test]
fn lock_holders_of_a_contained_jvm_are_named_as_on_the_host() {
    let mut rates = Vec::new();
    for contained_jvm in [true, false] {
        let jvm = if contained_jvm {
            start_contained(21, &[], "LockContention", &["3"])
        } else {
            start(21, "LockContention", &["3"])
        };
        std::thread::sleep(Duration::from_millis(1500));
        let name = format!("contained-locks-{contained_jvm}.pinrec");
        let report = report_json(&record(jvm.pid, 2.0, &name));
        let (waits, with_stack) = teller_locks(&report);
        let seconds = report["window"]["duration_ns"].as_f64().unwrap() / 1e9;
        let place = if contained_jvm { "contained" } else { "host" };
        eprintln!(
            "{place}: {waits} waits on the tellers' locks ({:.0}/s), {with_stack} with the \
             holder's Java release stack",
            waits as f64 / seconds
        );
        assert!(
            waits >= 20,
            "{place}: only {waits} waits on the tellers' locks"
        );
        // Release stacks are captured within a budget (see the locks tests): most have one.
        assert!(
            with_stack as f64 >= 0.5 * waits as f64,
            "{place}: {with_stack} of {waits} waits name the holder's transfer"
        );
        rates.push(waits as f64 / seconds);
    }
    // The same workload, the same contention, within what a shared 2-CPU machine allows.
    let ratio = rates[0] / rates[1];
    assert!(
        (0.5..=2.0).contains(&ratio),
        "contained {:.0}/s against host {:.0}/s",
        rates[0],
        rates[1]
    );
}

/// Lets a FileSync JVM run its fsyncs, recorded throughout, and returns the report's fsync
/// files.
fn record_file_syncs(jvm: &mut Jvm, name: &str) -> Vec<Value> {
    // Every call one by one, traced from entry to exit: an fsync on tmpfs takes about a
    // microsecond and never blocks (`--syscalls blocking` sees only calls that block).
    let (recorder, recording) = spawn_record_with(
        jvm.pid,
        name,
        &["--syscalls", "traced", "--min-syscall", "0s"],
    );
    std::thread::sleep(Duration::from_millis(300));
    say(jvm, "go");
    jvm.wait_for("synced ", Duration::from_secs(30)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    interrupt(recorder);
    let report = report_json(&recording);
    let fsync = report["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fsync")
        .unwrap_or_else(|| panic!("no fsync in {:?}", report["syscalls"]))
        .clone();
    fsync["files"].as_array().unwrap().clone()
}

#[test]
fn system_calls_of_a_contained_jvm_name_its_files_as_it_sees_them() {
    const SYNCS: u32 = 10;
    let host_file = scratch("host-sync.dat");
    let host_file = host_file.to_str().unwrap();
    let mut jvm = start(21, "FileSync", &[host_file, &SYNCS.to_string()]);
    let files = record_file_syncs(&mut jvm, "host-fsync.pinrec");
    eprintln!("host fsync files: {files:?}");
    assert!(
        files
            .iter()
            .any(|f| f["name"] == host_file && f["events"] == SYNCS),
        "{SYNCS} fsyncs of {host_file}: {files:?}"
    );
    drop(jvm);

    // In its private /tmp, which the host cannot see at that path.
    let inside = "/tmp/pinprof-contained-sync.dat";
    let mut jvm = start_contained(21, &[], "FileSync", &[inside, &SYNCS.to_string()]);
    let files = record_file_syncs(&mut jvm, "contained-fsync.pinrec");
    eprintln!("contained fsync files: {files:?}");
    assert!(
        files
            .iter()
            .any(|f| f["name"] == inside && f["events"] == SYNCS),
        "{SYNCS} fsyncs of {inside}: {files:?}"
    );
}

/// The cgroup v2 hierarchy's mount point, from /proc/self/mountinfo.
fn cgroup2_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if !right.starts_with("cgroup2 ") {
            return None;
        }
        let fields: Vec<&str> = left.split_whitespace().collect();
        (fields[3] == "/").then(|| PathBuf::from(fields[4]))
    })
}

/// A cgroup v2 child made for the test, removed when dropped with what is left in it (the
/// test's JVM).
struct Cgroup(PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn the_container_is_named_in_every_header() {
    let jvm = start_contained(
        21,
        &["-Djdk.virtualThreadScheduler.parallelism=2"],
        "Pinning",
        &["sleep"],
    );
    // Into a cgroup of its own, with a CPU limit where the cpu controller is on cgroup v2.
    let mount = cgroup2_mount();
    let mut limit = None;
    let _cgroup = mount.as_ref().map(|root| {
        let dir = root.join(format!("pinprof-test-{}", std::process::id()));
        let _ = std::fs::create_dir(&dir);
        let cgroup = Cgroup(dir.clone());
        std::fs::write(dir.join("cgroup.procs"), jvm.pid.to_string())
            .expect("move the JVM into its cgroup");
        let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap();
        if controllers.split_whitespace().any(|c| c == "cpu") {
            // Enabled for the children of the root, then limited to half a CPU.
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
            std::fs::write(dir.join("cpu.max"), "50000 100000").expect("set cpu.max");
            limit = Some("50000 100000");
        }
        cgroup
    });
    let cgroup_line = std::fs::read_to_string(format!("/proc/{}/cgroup", jvm.pid)).unwrap();
    let cgroup_path = cgroup_line
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::trim);
    eprintln!(
        "cgroup2 at {mount:?}, the JVM's cgroup {cgroup_path:?}, cpu.max {}",
        limit.unwrap_or("(no cpu controller on cgroup v2 here)")
    );
    if mount.is_some() {
        assert!(
            cgroup_path.is_some_and(|p| p.starts_with("/pinprof-test-")),
            "{cgroup_line}"
        );
    }
    let inode = pid_ns_inode(jvm.pid);
    std::thread::sleep(Duration::from_millis(300));
    let recording = record(jvm.pid, 1.0, "contained-header.pinrec");

    let report = report_json(&recording);
    let container = &report["container"];
    eprintln!("JSON container: {container}");
    assert_eq!(container["pid_namespace"], inode, "{container}");
    assert_eq!(container["pid"], 1, "{container}");
    assert_eq!(container["cgroup"].as_str(), cgroup_path, "{container}");
    assert_eq!(container["cpu_max"].as_str(), limit, "{container}");

    let out = pinprof().arg("report").arg(&recording).output().unwrap();
    assert_ok(&out, "pinprof report");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = format!("container: pid namespace {inode} (pid 1 inside)");
    let header: Vec<&str> = text.lines().take(3).collect();
    assert!(
        header.iter().any(|l| l.starts_with(&line)),
        "{line} in the header:\n{text}"
    );
    if let Some(path) = cgroup_path {
        assert!(
            header.iter().any(|l| l.contains(&format!("cgroup {path}"))),
            "{header:?}"
        );
    }

    let out = pinprof()
        .args(["jvm", "--pid", &jvm.pid.to_string(), "--no-attach"])
        .output()
        .unwrap();
    assert_ok(&out, "pinprof jvm");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&line), "{line} in:\n{text}");

    // A host process has no container: the object is null, the line absent.
    let host = start_vt(21, 2, "Pinning", &["sleep"]);
    let report = report_json(&record(host.pid, 0.5, "host-header.pinrec"));
    assert!(report["container"].is_null(), "{}", report["container"]);
}

/// The workload's own count of pinned sleeps between two of its `counts` lines around
/// `[from, to]` (CLOCK_MONOTONIC ns): (within, around), the counts just inside and just outside.
fn sleeps_between(log: &str, from: u64, to: u64) -> (u64, u64) {
    let counts: Vec<(u64, u64)> = log
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&"counts") && f.get(2) == Some(&"sleeps"))
                .then(|| Some((f[1].parse().ok()?, f[3].parse().ok()?)))
                .flatten()
        })
        .collect();
    let at = |t: u64, inside: bool| -> u64 {
        let before = counts.iter().rev().find(|c| c.0 <= t);
        let after = counts.iter().find(|c| c.0 >= t);
        let pick = if inside == (t == from) { after } else { before };
        pick.unwrap_or_else(|| panic!("the workload counted around {t}: {counts:?}"))
            .1
    };
    (
        at(to, true) - at(from, true),
        at(to, false) - at(from, false),
    )
}

#[test]
fn pinprof_in_the_jvms_pid_namespace_records_it_and_nothing_else() {
    // pinprof and a JVM together in a PID namespace, --pid as the namespace numbers the JVM.
    // The kernel sees host pids; a busy JVM on the host has the very number the JVM has in
    // the namespace, and must stay out of the recording.
    require_root();
    let decoy = start(21, "LockContention", &["3"]);
    let out = scratch("in-namespace.pinrec");
    let log = scratch("in-namespace.log");
    let _ = std::fs::remove_file(&log);
    let script = format!(
        "echo $(({decoy} - 1)) > /proc/sys/kernel/ns_last_pid; \
         {java} -Djdk.virtualThreadScheduler.parallelism=2 -cp {classes} Pinning sleep \
         > {log} 2>&1 & \
         jvm=$!; echo \"jvm $jvm\"; sleep 2; \
         {pinprof} record --quiet --pid $jvm --duration 3 --output {out}; \
         echo \"rc $?\"; sleep 0.5; kill $jvm; wait",
        decoy = decoy.pid,
        java = java(21).display(),
        classes = workloads().display(),
        pinprof = pinprof_bin().display(),
        out = out.display(),
        log = log.display(),
    );
    let output = Command::new(unshare())
        .args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"])
        .args(["sh", "-c", &script])
        .output()
        .expect("run unshare");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("jvm {}\n", decoy.pid)),
        "the JVM has the host JVM's pid ({}) in its namespace: {stdout}",
        decoy.pid
    );
    assert!(
        stdout.contains("rc 0\n"),
        "pinprof recorded: {stdout}{stderr}"
    );

    let report = report_json(&out);
    let frames: Vec<String> = report["pinned"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .chain(report["locks"].as_array().into_iter().flatten())
        .chain(report["blocked_stacks"].as_array().into_iter().flatten())
        .flat_map(|s| {
            ["frames", "holder_frames"]
                .iter()
                .flat_map(|k| s[k].as_array().into_iter().flatten())
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .collect();
    // Nothing of the host's JVM: none of its classes in any stack, none of its threads.
    assert!(
        !frames.iter().any(|f| f.contains("LockContention")),
        "the host's JVM leaked in: {frames:?}"
    );
    let names: Vec<&str> = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with("teller")),
        "the host JVM's threads leaked in: {names:?}"
    );
    // The JVM of the namespace, as on the host: its two carriers by their JVM names, its
    // pinned sleeps with their Java frames, as many as the workload counted.
    let carriers = carrier_threads(&report);
    assert_eq!(carriers.len(), 2, "two carriers: {names:?}");
    let (sleeps, _) = pinned(&report, |s| {
        strings(&s["frames"]).contains(&"Pinning$Ledger.append")
    });
    let from = report["window"]["start_mono_ns"].as_u64().unwrap();
    let to = from + report["window"]["duration_ns"].as_u64().unwrap();
    let (within, around) = sleeps_between(&std::fs::read_to_string(&log).unwrap(), from, to);
    eprintln!("{sleeps} pinned sleeps recorded; the workload counted {within} to {around}");
    assert!(
        within as f64 * 0.95 <= sleeps as f64 && sleeps as f64 <= around as f64 * 1.05,
        "{sleeps} pinned sleeps in Pinning$Ledger.append, the workload counted {within} to \
         {around} in the window"
    );
    assert_eq!(report["lost_events"], 0);
}
