//! Findings on real JVMs: what the report says to know and to change, checked against what the
//! workload did (its own ids and counts).

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

fn findings_of<'r>(report: &'r Value, kind: &str) -> Vec<&'r Value> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

/// `Gridlock`: a virtual thread owns a ReentrantLock and sleeps (unmounted) while every
/// carrier's virtual thread waits for it inside synchronized. On JDK 21 that pins them all,
/// and the owner cannot get a carrier to let go until their tryLock times out: a gridlock
/// finding names the lock's class, the owner's id (as the workload printed it) and the
/// pinned site, and leads the findings. On JDK 25 the same code does not gridlock.
fn gridlock(major: u32) -> Vec<Value> {
    let mut jvm = start_vt(major, 4, "Gridlock", &["4"]);
    let owner: u64 = jvm
        .wait_for("owner ", Duration::from_secs(20))
        .expect("the workload names the lock's owner")
        .trim_start_matches("owner ")
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let report = report_json(&record(jvm.pid, 3.0, &format!("gridlock{major}.pinrec")));
    let found: Vec<Value> = findings_of(&report, "gridlock")
        .into_iter()
        .cloned()
        .collect();
    if major >= 24 {
        return found;
    }
    assert_eq!(found.len(), 1, "one gridlock: {:#}", report["findings"]);
    let g = &found[0];
    assert_eq!(report["findings"][0]["kind"], "gridlock", "it leads");
    assert_eq!(g["severity"], "critical");
    let summary = g["summary"].as_str().unwrap();
    assert!(
        summary.contains("java.util.concurrent.locks.ReentrantLock$NonfairSync"),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("virtual thread #{owner},")),
        "{summary}"
    );
    assert!(summary.contains("`Gridlock$Ledger.post"), "{summary}");
    assert!(g["advice"].as_str().unwrap().contains("JEP 491"), "{g}");
    // Every carrier was in it, and it stalled the pool for most of the window: the waiters'
    // 200 ms timeouts against the owner's 50 ms hold.
    assert_eq!(g["threads"].as_array().unwrap().len(), 4, "{g}");
    let window = report["window"]["duration_ns"].as_u64().unwrap();
    let stalled = g["duration_ns"].as_u64().unwrap();
    eprintln!("JDK {major}: gridlocked {stalled} ns of {window}: {summary}");
    assert!(
        stalled as f64 >= 0.3 * window as f64,
        "{stalled} of {window}"
    );
    found
}

#[test]
fn jdk21_a_gridlock_names_the_lock_its_unmounted_owner_and_the_pinned_site() {
    gridlock(21);
}

#[test]
fn jdk25_the_same_code_does_not_gridlock() {
    let found = gridlock(25);
    assert!(found.is_empty(), "JEP 491: no gridlock on 25: {found:#?}");
}

/// (waiter, holder) pairs of the deadlocks the JVM's own thread dump finds (`jcmd
/// Thread.print`: `"alpha":` then `which is held by "beta"`).
fn deadlocked_in_thread_dump(major: u32, pid: u32) -> std::collections::BTreeSet<(String, String)> {
    let out = std::process::Command::new(jdk_tool(major, "jcmd"))
        .args([&pid.to_string(), "Thread.print"])
        .output()
        .expect("run jcmd");
    assert_ok(&out, "jcmd Thread.print");
    let dump = String::from_utf8_lossy(&out.stdout).to_string();
    let mut pairs = std::collections::BTreeSet::new();
    let mut waiter: Option<String> = None;
    for line in dump.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('"').and_then(|l| l.strip_suffix("\":")) {
            waiter = Some(name.to_string());
        } else if let Some(rest) = line.strip_prefix("which is held by \"") {
            let holder = rest.split('"').next().unwrap_or("").to_string();
            if let Some(w) = waiter.take() {
                pairs.insert((w, holder));
            }
        }
    }
    assert!(
        dump.contains("Found 2 deadlocks."),
        "the JVM finds both:\n{dump}"
    );
    pairs
}

/// `Deadlock`: two platform threads on two monitors, two on two ReentrantLocks. Each pair is
/// a deadlock finding whose waiter -> holder links are the ones the JVM's own thread dump
/// finds.
fn deadlocks(major: u32) {
    let jvm = start(major, "Deadlock", &[]);
    let truth = deadlocked_in_thread_dump(major, jvm.pid);
    assert_eq!(truth.len(), 4, "{truth:?}");
    let report = report_json(&record(jvm.pid, 2.0, &format!("deadlock{major}.pinrec")));
    let name = |tid: &Value| -> String {
        report["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| &t["tid"] == tid)
            .and_then(|t| t["name"].as_str())
            .unwrap_or("?")
            .to_string()
    };
    let found = findings_of(&report, "deadlock");
    assert_eq!(found.len(), 2, "{:#}", report["findings"]);
    let mut ours = std::collections::BTreeSet::new();
    for f in &found {
        assert_eq!(f["severity"], "critical");
        let cycle = f["threads"].as_array().unwrap();
        for (i, t) in cycle.iter().enumerate() {
            ours.insert((name(t), name(&cycle[(i + 1) % cycle.len()])));
        }
    }
    assert_eq!(ours, truth, "{:#}", report["findings"]);
    let text: Vec<&str> = found
        .iter()
        .map(|f| f["summary"].as_str().unwrap())
        .collect();
    eprintln!("JDK {major}: {text:#?}");
    assert!(
        text.iter().any(
            |s| s.contains("a Deadlock$Left monitor") && s.contains("a Deadlock$Right monitor")
        ),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|s| s.contains("a java.util.concurrent.locks.ReentrantLock$NonfairSync")),
        "{text:?}"
    );
}

#[test]
fn jdk21_deadlocks_on_monitors_and_reentrant_locks_are_found_as_the_jvm_finds_them() {
    deadlocks(21);
}

#[test]
fn jdk25_deadlocks_on_monitors_and_reentrant_locks_are_found_as_the_jvm_finds_them() {
    deadlocks(25);
}

/// `Backlog`: every carrier pinned in a class initializer that sleeps 2 s, while the main
/// thread starts 1,000 virtual threads. They wait in the scheduler's queues until the
/// initializers end: the starvation episode around the submission says 1,000 waited to run
/// (the workload's own count, within 10%), the samples before it say almost none, and the
/// report and the starvation finding say it.
fn backlog(major: u32) {
    const TASKS: u64 = 1000;
    let mut jvm = start_vt(major, 4, "Backlog", &["4", &TASKS.to_string(), "2000"]);
    let (recorder, out) = spawn_record(jvm.pid, &format!("backlog{major}.pinrec"));
    std::thread::sleep(Duration::from_millis(300));
    say(&mut jvm, "go");
    let time = |line: String| -> u64 { line.split_whitespace().nth(2).unwrap().parse().unwrap() };
    let submitted = time(
        jvm.wait_for("submitted ", Duration::from_secs(20))
            .expect("the workload submits its tasks"),
    );
    // The same, asked of the live JVM while the tasks wait (the stall lasts 2 s).
    let now = pinprof()
        .args(["jvm", "--no-attach", "--pid", &jvm.pid.to_string()])
        .output()
        .unwrap();
    assert_ok(&now, "pinprof jvm");
    let now = String::from_utf8_lossy(&now.stdout);
    let waiting: f64 = now
        .lines()
        .find_map(|l| l.strip_prefix("tasks waiting for a carrier: "))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("the tasks waiting in\n{now}"));
    assert_within(
        "tasks waiting, as pinprof jvm says",
        waiting,
        TASKS as f64,
        0.10,
    );
    let ran = time(
        jvm.wait_for("ran ", Duration::from_secs(20))
            .expect("the workload's tasks run"),
    );
    std::thread::sleep(Duration::from_millis(300));
    interrupt(recorder);
    let report = report_json(&out);
    let start = report["window"]["start_mono_ns"].as_u64().unwrap();
    let (submitted, ran) = (submitted - start, ran - start);
    let episodes = report["starvation"]["episodes"].as_array().unwrap();
    let episode = episodes
        .iter()
        .find(|e| {
            let from = e["start_ns"].as_u64().unwrap();
            from < submitted && submitted < from + e["duration_ns"].as_u64().unwrap()
        })
        .unwrap_or_else(|| panic!("no episode around the submission at {submitted}: {episodes:?}"));
    eprintln!("episode {episode}; submitted at {submitted}, all ran by {ran}");
    // All 4 carriers (the parallelism asked; a JDK 25 pool may start its 4th as the episode
    // begins, with the 3 others pinned already), from the last initializer's start to the
    // first one's end: the 2 s each sleeps, less how far apart they began (a few ms).
    assert_eq!(episode["carriers"], 4, "{episode}");
    assert_eq!(episode["blocked_carriers"], 4, "{episode}");
    assert_within(
        "the episode (s) vs the initializers' sleep",
        episode["duration_ns"].as_f64().unwrap() / 1e9,
        2.0,
        0.05,
    );
    let queued = episode["queued_max"]
        .as_u64()
        .unwrap_or_else(|| panic!("the episode's backlog: {episode}"));
    assert_within(
        "tasks waiting for a carrier in the episode",
        queued as f64,
        TASKS as f64,
        0.10,
    );
    // Before the episode (if a carrier was there to read the pool through: a JDK 25 starts
    // its carriers as the first virtual threads start) and after all the tasks ran, (almost)
    // nothing waited. (While they are being submitted, a sample sees some of them.)
    let samples = report["starvation"]["queued"].as_array().unwrap();
    let began = episode["start_ns"].as_u64().unwrap();
    let outside = |s: &&Value| {
        let t = s["time_ns"].as_u64().unwrap();
        t < began || t > ran
    };
    let after = samples
        .iter()
        .filter(|s| s["time_ns"].as_u64().unwrap() > ran)
        .count();
    assert!(
        after > 0
            && samples
                .iter()
                .filter(outside)
                .all(|s| s["tasks"].as_u64().unwrap() < 10),
        "{samples:?}"
    );
    let text = pinprof().arg("report").arg(&out).output().unwrap();
    assert_ok(&text, "pinprof report");
    let text = String::from_utf8_lossy(&text.stdout);
    let said = format!("up to {queued} virtual threads waited to run");
    assert!(text.contains(&said), "{said} in\n{text}");
    let starvation = findings_of(&report, "starvation");
    assert!(
        starvation
            .iter()
            .any(|f| f["summary"].as_str().unwrap().contains(&said)),
        "{starvation:?}"
    );
}

#[test]
fn jdk21_work_queued_while_every_carrier_is_pinned_is_counted() {
    backlog(21);
}

#[test]
fn jdk25_work_queued_while_every_carrier_is_pinned_is_counted() {
    backlog(25);
}
