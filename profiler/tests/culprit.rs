//! The culprit in sight: the JDK's own threads waiting for work do not pass for the
//! application's locks, and the text report shows, for every pinned site of a deep stack,
//! the frame holding the monitor, one site per planted cause. Real JVMs 21 and 25.

mod common;

use std::{process::Command, time::Duration};

use common::*;
use serde_json::Value;

/// Names the JDK gives its own threads (the test's knowledge, not pinprof's: pinprof knows
/// them by their class and what they run).
const JDK_THREADS: [&str; 13] = [
    "Read-Poller",
    "Read-Updater",
    "Write-Poller",
    "Write-Updater",
    "MasterPoller",
    "Common-Cleaner",
    "Cleaner-",
    "Reference Handler",
    "Finalizer",
    "Signal Dispatcher",
    "VirtualThread-unparker",
    "VirtualThread-unblocker",
    "-delayScheduler",
];

fn jdk_thread(name: &str) -> bool {
    JDK_THREADS.iter().any(|n| name.contains(n))
}

fn holder_names(lock: &Value) -> Vec<&str> {
    lock["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect()
}

fn service_threads_next_to_an_application_lock(major: u32) {
    let mut jvm = start_vt(major, 4, "ServiceThreads", &[]);
    // The pollers, cleaners and timers are at work before the recording starts.
    std::thread::sleep(Duration::from_millis(1500));
    let name = format!("service-threads-{major}.pinrec");
    // (A ring buffer large enough for a busy machine: a lost wait would fail the figures.)
    let (recorder, recording) = spawn_record_with(jvm.pid, &name, &["--ring-buffer-mib", "64"]);
    std::thread::sleep(Duration::from_millis(1000));
    say(&mut jvm, "go");
    let line = jvm
        .wait_for("contended ", Duration::from_secs(30))
        .expect("the tellers' figures");
    std::thread::sleep(Duration::from_millis(300));
    interrupt(recorder);
    // "contended <n> waited_ns <t> long <n>"
    let words: Vec<&str> = line.split_whitespace().collect();
    let contended: f64 = words[1].parse().unwrap();
    let waited_ns: f64 = words[3].parse().unwrap();
    let long: u64 = words[5].parse().unwrap();
    // Every lock row, however many the JVM's own threads make.
    let report: Value = serde_json::from_str(&report_text(
        &recording,
        &["--format", "json", "--top", "100000"],
    ))
    .expect("report is JSON");
    assert_eq!(report["lost_events"], 0);
    let locks: Vec<&Value> = report["locks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "futex")
        .collect();

    // The JDK's own threads: their waits for work, and the waits they end (a poller waking
    // a reader), are theirs: not long-held, listed after every lock of the application's.
    let mut theirs = 0;
    for lock in &locks {
        let waiters = strings(&lock["waiters"]);
        let holders = holder_names(lock);
        let by_pollers = !holders.is_empty() && holders.iter().all(|h| h.contains("Poller"));
        if waiters.iter().any(|w| jdk_thread(w)) || by_pollers {
            theirs += 1;
            assert_eq!(lock["jvm_internal"], true, "{lock}");
            assert_eq!(lock["long_held"], false, "{lock}");
        }
    }
    let first_internal = locks
        .iter()
        .position(|l| l["jvm_internal"] == true)
        .unwrap_or(locks.len());
    assert!(
        locks[first_internal..]
            .iter()
            .all(|l| l["jvm_internal"] == true),
        "the JVM's own waits come last"
    );
    let waited_on = |who: &str| {
        locks.iter().any(|l| {
            strings(&l["waiters"]).iter().any(|w| w.contains(who)) && l["jvm_internal"] == true
        })
    };
    // Not a test that cannot fail: the JDK's threads did wait, and were woken, here.
    assert!(waited_on("Cleaner"), "a cleaner's wait for work");
    let timer = if major >= 25 {
        "-delayScheduler"
    } else {
        "Read-Updater"
    };
    assert!(waited_on(timer), "{timer}'s wait for work");
    eprintln!("JDK {major}: {theirs} lock rows of the JDK's own threads");

    // The application's lock: every teller's wait on it, first in the list, long-held, with
    // the time the tellers measured themselves.
    // (Identified by the tellers parked in the lock, released by tellers: their other
    // waits, for their own start, the heap's lock as they allocate, or a compiler's lock as
    // their code is compiled, are the JVM's business.)
    let tellers: Vec<&&Value> = locks
        .iter()
        .filter(|l| {
            strings(&l["waiters"])
                .iter()
                .all(|w| w.starts_with("teller-"))
                && strings(&l["waiter_frames"])
                    .iter()
                    .any(|f| f.starts_with("java.util.concurrent.locks.ReentrantLock"))
                // Parked in the lock, not in a JVM mutex it met on the way (the heap's lock
                // as `lock()` allocates its queue node).
                && strings(&l["waiter_frames"])
                    .iter()
                    .any(|f| f.starts_with("jdk.internal.misc.Unsafe.park"))
                && holder_names(l).iter().all(|h| h.starts_with("teller-"))
        })
        .collect();
    assert!(!tellers.is_empty(), "the tellers' lock");
    let all: u64 = tellers.iter().map(|l| l["waits"].as_u64().unwrap()).sum();
    for lock in &tellers {
        assert_eq!(lock["jvm_internal"], false, "{lock}");
        // The lock's own row (its parks grouped by the ReentrantLock) is long-held; a wait
        // whose blocker went unread keeps its futex word's row, a stray few.
        if lock["java"].is_null() && lock["waits"].as_u64().unwrap() * 20 < all {
            continue;
        }
        assert_eq!(lock["long_held"], true, "{lock}");
        assert!(
            holder_names(lock).iter().all(|h| h.starts_with("teller-")),
            "{lock}"
        );
    }
    // pinprof's own attach (it asks the JVM for its scheduler's settings) starts the Attach
    // Listener, whose `accept` on the attach socket then lasts the whole recording: the
    // JVM's own wait for work, a row after the application's calls, never the headline.
    let syscalls = report["syscalls"].as_array().unwrap();
    let on_attach_socket = |s: &&Value| {
        s["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"].as_str().unwrap().contains(".java_pid"))
    };
    let attach: Vec<&Value> = syscalls.iter().filter(on_attach_socket).collect();
    assert!(
        !attach.is_empty(),
        "the Attach Listener's accept: {syscalls:?}"
    );
    for s in &attach {
        assert_eq!(s["jvm_internal"], true, "{s}");
    }
    let first_own = syscalls
        .iter()
        .position(|s| s["jvm_internal"] == true)
        .unwrap();
    assert!(
        first_own > 0
            && syscalls[first_own..]
                .iter()
                .all(|s| s["jvm_internal"] == true),
        "the application's calls first, the JVM's own after them: {syscalls:?}"
    );
    let position = |l: &Value| locks.iter().position(|m| *m == l).unwrap();
    assert!(tellers.iter().all(|l| position(l) < first_internal));
    let waits: u64 = tellers.iter().map(|l| l["waits"].as_u64().unwrap()).sum();
    let wait_ns: f64 = tellers.iter().map(|l| ns(&l["wait_ns"])).sum();
    assert_within(
        "tellers' lock wait (ms)",
        wait_ns / 1e6,
        waited_ns / 1e6,
        0.05,
    );
    // Every acquisition that waited 2 ms or more parked at least once: a floor. A queued
    // teller may park more than once per acquisition (a `tryLock` barges past the queue of
    // even a fair lock), so the time is the figure to match; 3 per acquisition (120 in all)
    // is a bound no real count comes near.
    eprintln!("tellers' waits: pinprof {waits}, contended acquisitions {contended}");
    assert!(
        waits >= long && waits <= 3 * 120,
        "{waits} waits for {contended} contended acquisitions ({long} of 2 ms or more)"
    );
}

#[test]
fn jdk_service_threads_do_not_lead_the_locks_on_21() {
    service_threads_next_to_an_application_lock(21);
}

#[test]
fn jdk_service_threads_do_not_lead_the_locks_on_25() {
    service_threads_next_to_an_application_lock(25);
}

fn report_text(recording: &std::path::Path, options: &[&str]) -> String {
    let out = Command::new(common::pinprof_bin())
        .arg("report")
        .arg(recording)
        .args(options)
        .output()
        .unwrap();
    assert_ok(&out, "pinprof report");
    String::from_utf8(out.stdout).unwrap()
}

/// The pinned sites of a text report: each site's lines, its header first.
fn pinned_sites(text: &str) -> Vec<Vec<&str>> {
    let mut sites: Vec<Vec<&str>> = Vec::new();
    let section = text
        .lines()
        .skip_while(|l| !l.starts_with("Pinned:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "));
    for line in section {
        if line.starts_with("  #") {
            sites.push(vec![line]);
        } else if let Some(site) = sites.last_mut() {
            site.push(line.trim());
        }
    }
    sites
}

const HOLDS: &str = "  [holds monitor]";

fn deep_pinned_stacks_show_the_holder(major: u32) {
    let mut jvm = start_vt(major, 4, "DeepPinning", &[]);
    let mut causes = Vec::new();
    // The causes that pin on this JDK, the last one once its initializer has started.
    while !causes.contains(&"DeepPinning$Registry.register".to_string()) {
        let line = jvm
            .wait_for("cause ", Duration::from_secs(20))
            .expect("the workload's causes");
        causes.push(line.trim_start_matches("cause ").to_string());
    }
    let name = format!("deep-pinning-{major}.pinrec");
    let recording = record(jvm.pid, 3.0, &name);
    drop(jvm);

    let report = report_json(&recording);
    let sites = report["pinned"]["sites"].as_array().unwrap();
    let total: f64 = sites.iter().map(|s| ns(&s["total_ns"])).sum();
    // Sites with Java frames: every one of them a planted cause, and deep.
    let java_sites: Vec<&Value> = sites
        .iter()
        .filter(|s| {
            strings(&s["frames"])
                .iter()
                .any(|f| f.starts_with("DeepPinning"))
        })
        .collect();
    let java_ns: f64 = java_sites.iter().map(|s| ns(&s["total_ns"])).sum();
    eprintln!(
        "JDK {major}: {} pinned sites, {} with Java frames ({:.2}% of pinned time)",
        sites.len(),
        java_sites.len(),
        100.0 * java_ns / total
    );
    assert!(java_ns >= 0.98 * total, "pinned time without Java frames");
    for site in &java_sites {
        let frames = strings(&site["frames"]);
        let java: Vec<&&str> = frames.iter().filter(|f| f.contains('.')).collect();
        assert!(java.len() >= 40, "a deep stack: {frames:?}");
    }

    let text = report_text(&recording, &["--top", "50"]);
    let shown = pinned_sites(&text);
    let mut culprits: Vec<String> = Vec::new();
    for site in &shown {
        // The sites of the planted causes; the others (no Java stack, or a rare walk cut short
        // at `[unknown java frame]`) are held to 2% of pinned time above.
        if !site.iter().any(|l| l.starts_with("DeepPinning")) {
            continue;
        }
        let holders: Vec<&&str> = site.iter().filter(|l| l.ends_with(HOLDS)).collect();
        assert_eq!(holders.len(), 1, "the frame holding the monitor: {site:#?}");
        // The frame's name, without its source line (`Class.method:54`).
        let holder = holders[0].trim_end_matches(HOLDS);
        let name = match holder.rsplit_once(':') {
            Some((name, line)) if line.chars().all(|c| c.is_ascii_digit()) => name,
            _ => holder,
        };
        culprits.push(name.to_string());
        assert!(
            site.iter()
                .any(|l| l.starts_with("... ") && l.ends_with(" JDK frames")),
            "JDK frames folded: {site:#?}"
        );
        assert!(
            site.len() <= 17 + 1,
            "at most 16 lines and the header: {site:#?}"
        );
    }
    culprits.sort();
    causes.sort();
    assert_eq!(culprits, causes, "one site per planted cause:\n{text}");

    // Cut to 3 lines, the holder still shows; with --full, every frame does, unfolded.
    let short = report_text(&recording, &["--top", "50", "--depth", "3"]);
    let holders = pinned_sites(&short)
        .iter()
        .flatten()
        .filter(|l| l.ends_with(HOLDS))
        .count();
    assert_eq!(holders, causes.len(), "{short}");
    let full = report_text(&recording, &["--top", "50", "--full"]);
    for site in pinned_sites(&full) {
        if site.iter().any(|l| l.ends_with(HOLDS)) {
            assert!(site.len() > 40, "every frame: {site:#?}");
            assert!(!site.iter().any(|l| l.ends_with(" JDK frames")));
        }
    }
}

#[test]
fn deep_pinned_stacks_show_the_frame_holding_the_monitor_on_21() {
    deep_pinned_stacks_show_the_holder(21);
}

#[test]
fn deep_pinned_stacks_show_the_frame_holding_the_monitor_on_25() {
    deep_pinned_stacks_show_the_holder(25);
}
