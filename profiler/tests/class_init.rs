//! Waits for another thread's class initialization, and monitors of `Class` objects, named
//! on real JVMs 21 and 25 against the JVM's own account: its thread dump (`jcmd
//! Thread.print`), JFR's `jdk.VirtualThreadPinned`, and the workload's own clock.

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    process::Command,
    time::Duration,
};

use common::{
    Jvm, assert_ok, interrupt, jdk_tool, jfr::Jfr, pinprof, report_json, say, spawn_record,
    start_vt,
};
use serde_json::Value;

/// Rounds of `ClassInit init`: each a class whose initializer sleeps 2 s while 3 other
/// virtual threads wait for it.
const ROUNDS: u32 = 3;
const WAITERS: u64 = 3;

/// What the workload says its initializer did: (class, start ns, end ns, virtual thread id,
/// carrier name).
struct Initialized {
    class: String,
    ns: u64,
    vthread: u64,
    carrier: String,
}

fn parse_clinit(line: &str) -> Initialized {
    // clinit <class> <start> <end> vthread <id> carrier <name>
    let w: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(w.len(), 8, "{line}");
    let (start, end): (u64, u64) = (w[2].parse().unwrap(), w[3].parse().unwrap());
    Initialized {
        class: w[1].to_string(),
        ns: end - start,
        vthread: w[5].parse().unwrap(),
        carrier: w[7].to_string(),
    }
}

/// The JVM's thread dump: per thread (by name) the class whose initialization it waits
/// for (`- waiting on the Class initialization monitor for X`; a carrier's section holds its
/// mounted virtual thread's frames) and the class whose `Class` object's monitor it waits to
/// lock (`- waiting to lock <...> (a java.lang.Class for X)`).
fn thread_dump(major: u32, pid: u32) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let out = Command::new(jdk_tool(major, "jcmd"))
        .args([&pid.to_string(), "Thread.print"])
        .output()
        .expect("run jcmd");
    assert_ok(&out, "jcmd Thread.print");
    let text = String::from_utf8_lossy(&out.stdout);
    let (mut inits, mut locks) = (BTreeMap::new(), BTreeMap::new());
    let mut thread = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix('"') {
            thread = rest.split('"').next().unwrap_or_default().to_string();
        } else if let Some(class) = line
            .trim()
            .strip_prefix("- waiting on the Class initialization monitor for ")
        {
            inits.insert(thread.clone(), class.trim().to_string());
        } else if line.trim().starts_with("- waiting to lock")
            && let Some((_, class)) = line.split_once("(a java.lang.Class for ")
        {
            locks.insert(thread.clone(), class.trim_end_matches(')').to_string());
        }
    }
    (inits, locks)
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

/// `name` names the test's files (tests run side by side).
fn class_init_waits(major: u32, name: &str, options: &[&str]) {
    common::require_root();
    let options: Vec<&str> = ["-Djdk.virtualThreadScheduler.parallelism=4"]
        .into_iter()
        .chain(options.iter().copied())
        .collect();
    let mut jvm = Jvm::start_with(
        &common::java(major),
        &options,
        &common::workloads(),
        "ClassInit",
        &["init"],
    )
    .expect("start the workload JVM");
    let jfr = Jfr::start(major, jvm.pid, name);
    let (recorder, recording) = spawn_record(jvm.pid, &format!("{name}.pinrec"));
    // The rounds' waits within the recording, not under way before it attached.
    std::thread::sleep(Duration::from_millis(1500));
    let mut initialized = Vec::new();
    let mut dumps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for round in 1..=ROUNDS {
        say(&mut jvm, &format!("init {round}"));
        // Early in the initializer's 2 s sleep (jcmd itself takes a while to start): the
        // waiters wait.
        std::thread::sleep(Duration::from_millis(300));
        let (inits, _) = thread_dump(major, jvm.pid);
        for (thread, class) in inits {
            dumps.entry(class).or_default().insert(thread);
        }
        let line = jvm
            .wait_for("clinit ", Duration::from_secs(20))
            .expect("the initializer reports");
        initialized.push(parse_clinit(&line));
        jvm.wait_for(&format!("done {round}"), Duration::from_secs(20))
            .expect("the round ends");
    }
    interrupt(recorder);
    let truth = jfr.stop();
    let report = report_json(&recording);
    drop(jvm);

    let classes: BTreeSet<String> = initialized.iter().map(|i| i.class.clone()).collect();
    // The thread dumps saw 3 carriers waiting for each class.
    let dumped: BTreeSet<String> = dumps.keys().cloned().collect();
    assert_eq!(dumped, classes, "classes the thread dumps show waited for");
    for (class, threads) in &dumps {
        assert_eq!(threads.len() as u64, WAITERS, "{class}: {threads:?}");
    }

    let sites: Vec<&Value> = report["pinned"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["reason"] == "class_init" && s["operation"] == "object_wait")
        .collect();
    assert!(!sites.is_empty(), "no class-init wait: {report:#}");
    // Every class named, with the initializer the workload says ran it.
    let mut named: BTreeMap<String, &Value> = BTreeMap::new();
    for s in &sites {
        for c in s["class_init"].as_array().unwrap() {
            named.insert(c["class"].as_str().unwrap().to_string(), &c["initializer"]);
        }
    }
    assert_eq!(
        named.keys().cloned().collect::<BTreeSet<_>>(),
        classes,
        "classes named"
    );
    // The virtual thread running an initializer is read live, with its carrier: where a read
    // found none mounted (seen once in CI on JDK 25, static binary: every read of one
    // class's initializer), the carrier is still named. Any id read is the right one, and
    // most classes have theirs.
    let mut with_vthread = 0;
    for i in &initialized {
        let by = named[&i.class];
        assert_eq!(by["name"], i.carrier.as_str(), "{}: {by}", i.class);
        if !by["vthread_id"].is_null() {
            assert_eq!(by["vthread_id"], i.vthread, "{}: {by}", i.class);
            with_vthread += 1;
        }
    }
    assert!(
        with_vthread * 2 > initialized.len(),
        "{with_vthread} of {} initializers named with their virtual thread",
        initialized.len()
    );
    // The waiting carriers are those of the thread dumps.
    let tids: BTreeSet<u64> = sites
        .iter()
        .flat_map(|s| s["carriers"].as_array().unwrap())
        .map(|t| t.as_u64().unwrap())
        .collect();
    let names: BTreeSet<String> = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| tids.contains(&t["tid"].as_u64().unwrap()))
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    let dumped_threads: BTreeSet<String> = dumps.values().flatten().cloned().collect();
    assert!(
        dumped_threads.is_subset(&names),
        "waiting carriers: the JVM's {dumped_threads:?}, pinprof's {names:?}"
    );
    // A class-init wait is counted once, as that: not again as an anonymous futex lock of
    // the carriers' (nothing else of theirs waits a second on one released by another).
    let anonymous: Vec<&Value> = report["locks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            l["kind"] == "futex"
                && l["java"].is_null()
                && l["max_wait_ns"].as_u64().unwrap() >= 1_000_000_000
                && !strings(&l["waiters"]).is_disjoint(&dumped_threads)
        })
        .collect();
    assert!(anonymous.is_empty(), "{anonymous:#?}");
    // Every starvation episode spent on class initialization names the class, the
    // initializer's own wait (its sleep inside `<clinit>`) included.
    let episodes = report["starvation"]["episodes"].as_array().unwrap();
    assert!(!episodes.is_empty(), "every carrier waits: {report:#}");
    for e in episodes {
        let on = &e["waiting_on"];
        if on["kind"] == "class_init" {
            let class = on["class"].as_str().unwrap_or("(none)");
            assert!(classes.contains(class), "{class} in {e}");
        }
    }
    // Each waiter waited about as long as the initializer ran (it arrived a few ms after
    // it began): 3 waits per class, their time within 10% of 3 times the initializer's.
    let events: u64 = sites.iter().map(|s| s["events"].as_u64().unwrap()).sum();
    let total: u64 = sites.iter().map(|s| s["total_ns"].as_u64().unwrap()).sum();
    let expected: u64 = initialized.iter().map(|i| WAITERS * i.ns).sum();
    println!(
        "JDK {major}: {events} class-init waits, {:.3} s; workload: {} waits, {:.3} s",
        total as f64 / 1e9,
        WAITERS * u64::from(ROUNDS),
        expected as f64 / 1e9
    );
    assert_eq!(
        events,
        WAITERS * u64::from(ROUNDS),
        "class-init waits; every pinned site: {:#}",
        report["pinned"]["sites"]
    );
    common::assert_within("class-init wait time", total as f64, expected as f64, 0.10);
    // No class-init wait is said to be the program's monitor.
    let monitor_waits = report["pinned"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["reason"] == "monitor" && s["operation"] == "object_wait")
        .count();
    assert_eq!(monitor_waits, 0, "{report:#}");

    // JFR: on 25 it reports each wait ("Waited for initialization of X by another thread");
    // on 21 only the initializer's own pinned sleep, under `X.<clinit>`.
    let jfr_classes: BTreeSet<String> = if major >= 24 {
        let waits: Vec<_> = truth
            .iter()
            .filter(|e| {
                e.reason
                    .as_deref()
                    .is_some_and(|r| r.contains("initialization"))
            })
            .collect();
        let jfr_ns: u64 = waits.iter().map(|e| e.duration_ns).sum();
        println!(
            "JFR: {} class-init waits, {:.3} s",
            waits.len(),
            jfr_ns as f64 / 1e9
        );
        assert_eq!(waits.len() as u64, events, "JFR's class-init waits");
        common::assert_within(
            "class-init wait time vs JFR",
            total as f64,
            jfr_ns as f64,
            0.05,
        );
        waits
            .iter()
            .filter_map(|e| {
                let r = e.reason.as_deref()?;
                let class = r.split("initialization of ").nth(1)?.split(' ').next()?;
                Some(class.to_string())
            })
            .collect()
    } else {
        truth
            .iter()
            .filter_map(|e| {
                let clinit = e
                    .frames
                    .iter()
                    .map(|(f, _)| f)
                    .find(|f| f.ends_with(".<clinit>"))?;
                let class = clinit.trim_end_matches(".<clinit>").to_string();
                // JFR's thread is the initializer the workload names.
                let by = initialized.iter().find(|i| i.class == class)?;
                assert_eq!(
                    e.thread_id,
                    Some(by.vthread),
                    "JFR's initializer of {class}"
                );
                Some(class)
            })
            .collect()
    };
    assert_eq!(jfr_classes, classes, "classes JFR names");

    let text = text_report(&recording);
    for i in &initialized {
        let said = format!(
            "{} by {} (virtual thread #{})",
            i.class, i.carrier, i.vthread
        );
        assert!(text.contains(&said), "{said} not in:\n{text}");
    }
    assert!(
        text.contains("waiting for the initialization of "),
        "{text}"
    );
}

fn text_report(recording: &std::path::Path) -> String {
    let out = pinprof().arg("report").arg(recording).output().unwrap();
    assert_ok(&out, "pinprof report");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn jdk21_class_init_waits_name_the_class_and_its_initializer() {
    class_init_waits(21, "classinit21", &[]);
}

#[test]
fn jdk25_class_init_waits_name_the_class_and_its_initializer() {
    class_init_waits(25, "classinit25", &[]);
}

#[test]
fn jdk25_class_init_waits_are_named_with_compact_object_headers() {
    // The class pointer moves into the mark word: the init lock is still told by its class.
    class_init_waits(25, "classinit25-compact", &["-XX:+UseCompactObjectHeaders"]);
}

/// A `static synchronized` method's monitor is said by its class, as the thread dump does.
fn class_monitors(major: u32) {
    let jvm: Jvm = start_vt(major, 4, "ClassInit", &["static"]);
    let (recorder, recording) = spawn_record(jvm.pid, &format!("classlock{major}.pinrec"));
    std::thread::sleep(Duration::from_millis(1500));
    // The platform waiter waits for the holder's 40 ms most of the time: a few tries.
    let mut dumped = BTreeMap::new();
    for _ in 0..20 {
        let (_, locks) = thread_dump(major, jvm.pid);
        if locks.contains_key("registry-waiter") {
            dumped = locks;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1000));
    interrupt(recorder);
    let report = report_json(&recording);
    drop(jvm);
    assert_eq!(
        dumped.get("registry-waiter").map(String::as_str),
        Some("ClassInit$Registry"),
        "the thread dump: {dumped:?}"
    );
    let theirs = BTreeSet::from(["ClassInit$Registry".to_string()]);

    // The platform thread's blocked stack, on both JDKs.
    let rows: Vec<&Value> = report["off_cpu"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["threads"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == "registry-waiter")
                && s["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f == "ClassInit$Registry.lookup")
        })
        .collect();
    // (A wait of the same place that was no monitor's, e.g. a safepoint taken on the way
    // in, names no monitor, rightly.)
    let rows: Vec<&Value> = rows
        .into_iter()
        .filter(|row| !strings(&row["monitor_classes"]).is_empty())
        .collect();
    assert!(
        !rows.is_empty(),
        "no blocked stack of registry-waiter on its monitor"
    );
    for row in &rows {
        assert_eq!(strings(&row["class_monitors"]), theirs, "{row:#}");
        assert!(strings(&row["monitor_classes"]).contains("java.lang.Class"));
    }
    // On 21 the virtual threads entering it pin their carriers: the site says the class.
    if major < 24 {
        let sites: Vec<&Value> = report["pinned"]["sites"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["operation"] == "monitor_enter")
            .collect();
        assert!(!sites.is_empty(), "no pinned monitor entry");
        for s in &sites {
            assert_eq!(strings(&s["class_monitors"]), theirs, "{s:#}");
        }
    }
    let pinned: u64 = report["pinned"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["operation"] == "monitor_enter")
        .map(|s| s["events"].as_u64().unwrap())
        .sum();
    let blocked: u64 = rows.iter().map(|r| r["events"].as_u64().unwrap()).sum();
    println!(
        "JDK {major}: registry-waiter blocked {blocked} times on class ClassInit$Registry; \
         {pinned} pinned monitor entries"
    );
    let text = text_report(&recording);
    assert!(text.contains("on class ClassInit$Registry"), "{text}");
    assert!(!text.contains("on a java.lang.Class"), "{text}");
}

#[test]
fn jdk21_static_synchronized_monitors_are_named_by_class() {
    class_monitors(21);
}

#[test]
fn jdk25_static_synchronized_monitors_are_named_by_class() {
    class_monitors(25);
}
