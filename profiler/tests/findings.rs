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
