//! Carriers, mounted virtual threads and pinning on real JVMs, checked against the JVM's own
//! ground truth: JFR `jdk.VirtualThreadPinned` (threshold 0) over the same window, the
//! workload's own counters, and the JVM's own list of carrier threads.

mod common;

use std::{collections::BTreeSet, process::Command, time::Duration};

use common::{jfr::Jfr, *};
use serde_json::Value;

/// Pinned events and time in the report, summed over sites that match.
fn pinned(report: &Value, keep: impl Fn(&str, &str) -> bool) -> (u64, u64) {
    let sites = report["pinned"]["sites"].as_array().unwrap();
    sites
        .iter()
        .filter(|s| {
            keep(
                s["reason"].as_str().unwrap(),
                s["operation"].as_str().unwrap(),
            )
        })
        .fold((0, 0), |(n, t), s| {
            (
                n + s["events"].as_u64().unwrap(),
                t + s["total_ns"].as_u64().unwrap(),
            )
        })
}

/// Records `pid` for `seconds` into `out` with JFR recording pinning over the same time:
/// the report, and JFR's pinned events that started inside its window.
fn record_with_jfr(
    major: u32,
    pid: u32,
    jfr_name: &str,
    seconds: f64,
    out: &str,
) -> (Value, Vec<jfr::Pinned>) {
    let jfr = Jfr::start(major, pid, jfr_name);
    let recording = record(pid, seconds, out);
    let truth = jfr.stop();
    let report = report_json(&recording);
    let truth = in_window(&report, truth);
    (report, truth)
}

/// JFR's events that started inside the report's window.
fn in_window(report: &Value, events: Vec<jfr::Pinned>) -> Vec<jfr::Pinned> {
    let from = report["window"]["start_unix_ns"].as_u64().unwrap();
    let to = from + report["window"]["duration_ns"].as_u64().unwrap();
    events
        .into_iter()
        .filter(|e| (from..to).contains(&e.start_unix_ns))
        .collect()
}

/// The report's findings of `kind` whose evidence has the frame `method`.
fn findings_at<'r>(report: &'r Value, kind: &str, method: &str) -> Vec<&'r Value> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == kind)
        .filter(|f| {
            f["frames"]
                .as_array()
                .unwrap()
                .contains(&Value::from(method))
        })
        .collect()
}

/// The voluntary context switches of the target's carrier threads (by name), from /proc.
fn carriers_switches(pid: u32) -> std::collections::BTreeMap<u32, u64> {
    let mut out = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let dir = task.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.starts_with("ForkJoinPool-1-") {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let switches = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|n| n.trim().parse().ok());
        let tid = task.file_name().to_string_lossy().parse().unwrap();
        if let Some(n) = switches {
            out.insert(tid, n);
        }
    }
    assert!(!out.is_empty(), "no carrier threads in /proc/{pid}/task");
    out
}

/// The thread ids the report says are carriers.
fn carrier_tids(report: &Value) -> BTreeSet<u64> {
    carrier_threads(report)
        .iter()
        .map(|t| t["tid"].as_u64().unwrap())
        .collect()
}

/// pinprof's (events, total ns) against JFR's events: the count within `count_tolerance`, the
/// summed duration within `time_tolerance`.
fn assert_matches_jfr(
    what: &str,
    (events, total_ns): (u64, u64),
    truth: &[jfr::Pinned],
    count_tolerance: f64,
    time_tolerance: f64,
) {
    assert_within(what, events as f64, truth.len() as f64, count_tolerance);
    let truth_ns: u64 = truth.iter().map(|e| e.duration_ns).sum();
    let what = format!("{what}, time");
    assert_within(&what, total_ns as f64, truth_ns as f64, time_tolerance);
}

#[test]
fn jdk21_pinned_parks_match_jfr() {
    let jvm = start_vt(21, 4, "Pinning", &["sleep", "socket"]);
    std::thread::sleep(Duration::from_millis(500));
    let (report, truth) = record_with_jfr(21, jvm.pid, "pinned21", 4.0, "pinned21.pinrec");

    let (parks, park_ns) = pinned(&report, |_, op| op == "park");
    let (monitor_parks, _) = pinned(&report, |r, op| r == "monitor" && op == "park");
    assert_matches_jfr("JDK 21 pinned parks", (parks, park_ns), &truth, 0.10, 0.15);
    // Sleeps and socket reads inside synchronized: pinned because of the monitor.
    assert!(
        monitor_parks as f64 >= 0.95 * parks as f64,
        "{monitor_parks} of {parks} pinned parks have reason monitor"
    );
    assert_eq!(report["lost_events"], 0);

    // Which virtual threads pinned, and where: the two sleepers' own Java ids, on carriers.
    let carriers = carrier_tids(&report);
    let mut sleepers = BTreeSet::new();
    for site in report["pinned"]["sites"].as_array().unwrap() {
        if !site["frames"]
            .as_array()
            .unwrap()
            .contains(&Value::from("Pinning$Ledger.append"))
        {
            continue;
        }
        assert_eq!(site["reason"], "monitor");
        for c in site["carriers"].as_array().unwrap() {
            assert!(carriers.contains(&c.as_u64().unwrap()), "{c} is a carrier");
        }
        for v in site["virtual_threads"].as_array().unwrap() {
            sleepers.insert(v.as_u64().unwrap());
        }
    }
    assert_eq!(
        sleepers.len(),
        2,
        "two sleeping virtual threads: {sleepers:?}"
    );
    assert!(!sleepers.contains(&0), "{sleepers:?}");

    // The findings say it: pinning at the method holding the monitor, with JDK 21's advice,
    // its carrier time the site's; and every carrier starved, first.
    for method in ["Pinning$Ledger.append", "Pinning$Channel.call"] {
        let found = findings_at(&report, "pinning", method);
        assert_eq!(
            found.len(),
            1,
            "one pinning finding at {method}: {found:#?}"
        );
        let f = found[0];
        let summary = f["summary"].as_str().unwrap();
        assert!(summary.starts_with(&format!("`{method}:")), "{summary}");
        assert!(summary.contains("while holding a monitor"), "{summary}");
        let advice = f["advice"].as_str().unwrap();
        assert!(
            advice.contains("ReentrantLock") && advice.contains("JEP 491"),
            "{advice}"
        );
        let site_ns: u64 = report["pinned"]["sites"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| {
                s["frames"]
                    .as_array()
                    .unwrap()
                    .contains(&Value::from(method))
            })
            .map(|s| s["total_ns"].as_u64().unwrap())
            .max()
            .unwrap();
        assert_eq!(f["duration_ns"].as_u64().unwrap(), site_ns);
    }
    assert_eq!(
        report["findings"][0]["kind"], "starvation",
        "{:#}",
        report["findings"]
    );

    // The pinned flamegraph says what it adds up: the report's pinned events and time.
    let svg = scratch("pinned21.svg");
    let output = pinprof()
        .args(["flamegraph", "--kind", "pinned", "--output"])
        .arg(&svg)
        .arg(scratch("pinned21.svg").with_file_name("pinned21.pinrec"))
        .output()
        .unwrap();
    assert_ok(&output, "pinprof flamegraph --kind pinned");
    let text = std::fs::read_to_string(&svg).unwrap();
    let events = report["pinned"]["events"].as_u64().unwrap();
    let total = profiler::report::secs(report["pinned"]["total_ns"].as_u64().unwrap());
    let said = format!("{events} pinned waits, {total} on ");
    assert!(text.contains(&said), "the subtitle does not say {said:?}");
    assert!(text.contains("Pinned carrier time"), "title missing");
    assert!(!text.contains("threads blocked"), "an off-CPU subtitle");
}

/// Pinned waits well under `--java-stack-min` (1 ms) are walked all the same: on a workload
/// whose pinned waits are mostly under 1 ms (by JFR's own durations), at least 95% of pinned
/// events, by count, name the `synchronized` method that holds the monitor, and the pinned
/// parks a second are the carriers' voluntary context switches a second (the kernel's own
/// count, /proc) within 15%.
#[test]
fn jdk21_short_pinned_waits_name_their_method() {
    let jvm = start_vt(21, 4, "Pinning", &["quick"]);
    std::thread::sleep(Duration::from_millis(500));
    // The kernel's own count of the carriers' blocks: their voluntary context switches.
    // JFR first, on its own: its start and stop make the JVM stop its threads (safepoints),
    // which the carriers' switches would count.
    let jfr = Jfr::start(21, jvm.pid, "quick21");
    std::thread::sleep(Duration::from_secs(2));
    let truth = jfr.stop();
    std::thread::sleep(Duration::from_millis(500));
    let before = carriers_switches(jvm.pid);
    let clock = std::time::Instant::now();
    let recording = record(jvm.pid, 3.0, "quick21.pinrec");
    let span = clock.elapsed().as_secs_f64();
    let after = carriers_switches(jvm.pid);
    let report = report_json(&recording);
    let short = truth.iter().filter(|e| e.duration_ns < 1_000_000).count();
    assert!(
        // (Most are 0.3-0.7 ms; a loaded machine stretches some past 1 ms: 86% seen.)
        short as f64 >= 0.66 * truth.len() as f64,
        "the workload's pinned waits are mostly short: {short} of JFR's {} under 1 ms",
        truth.len()
    );
    let (mut events, mut named) = (0, 0);
    for site in report["pinned"]["sites"].as_array().unwrap() {
        let n = site["events"].as_u64().unwrap();
        events += n;
        let frames = site["frames"].as_array().unwrap();
        if ["Pinning$Brief.append", "Pinning$Channel.call"]
            .iter()
            .any(|m| frames.contains(&Value::from(*m)))
        {
            named += n;
        }
    }
    eprintln!("JDK 21 quick: {named} of {events} pinned events name their synchronized method");
    for method in ["Pinning$Brief.append", "Pinning$Channel.call"] {
        let found = findings_at(&report, "pinning", method);
        assert_eq!(found.len(), 1, "short pins add up to a finding at {method}");
    }
    assert!(
        named as f64 >= 0.95 * events as f64,
        "{named} of {events} pinned events name their synchronized method"
    );
    // The carriers do nothing but run these two virtual threads, which never unmount: each
    // of their blocks is a pinned park. So the pinned parks a second are the carriers'
    // voluntary switches a second, by the kernel's count (over the span between the reads).
    // (Neither JFR nor the workload's calls measure this: a park that finds its permit, a
    // read whose answer came while its thread waited for a CPU, never blocks; on a loaded
    // machine 6-20% of them.)
    let (parks, _) = pinned(&report, |_, op| op == "park");
    let window = report["window"]["duration_ns"].as_f64().unwrap() / 1e9;
    let switched: u64 = after
        .iter()
        .map(|(tid, n)| n - before.get(tid).copied().unwrap_or(*n))
        .sum();
    eprintln!(
        "JFR: {} pinned events; the carriers switched out {switched} times",
        truth.len()
    );
    // 15%: the reads of /proc bracket pinprof's start and stop too, when the target runs
    // untraced and a little faster, and a carrier also stops now and then at a safepoint
    // (seen: 1.5-6.9% fewer parks a second than switches).
    assert_within(
        "JDK 21 short pinned parks a second, against the carriers' voluntary switches",
        parks as f64 / window,
        switched as f64 / span,
        0.15,
    );
    let lost = report["lost_events"].as_u64().unwrap();
    assert!(
        lost as f64 <= 0.01 * events as f64,
        "{lost} events lost of {events}"
    );
}

#[test]
fn jdk21_contended_monitor_entries_are_counted() {
    let mut jvm = start_vt(21, 4, "Pinning", &["contend"]);
    std::thread::sleep(Duration::from_millis(500));
    let recording = record(jvm.pid, 4.0, "contend21.pinrec");
    let report = report_json(&recording);
    let from = report["window"]["start_mono_ns"].as_u64().unwrap();
    let to = from + report["window"]["duration_ns"].as_u64().unwrap();
    let contended = counts::in_window(&mut jvm, "contended", from, to);

    let (entries, _) = pinned(&report, |r, op| r == "monitor" && op == "monitor_enter");
    assert_within("JDK 21 contended entries", entries as f64, contended, 0.10);
    // The lock is named by its object's class, as a thread dump would: never another class,
    // and named for nearly every entry (a monitor deflated before it was read stays unnamed).
    let mut named = 0;
    for site in report["pinned"]["sites"].as_array().unwrap() {
        if site["operation"] != "monitor_enter" {
            continue;
        }
        let classes = strings(&site["monitor_classes"]);
        assert!(classes.iter().all(|c| *c == "Pinning$Till"), "{site}");
        if !classes.is_empty() {
            named += site["events"].as_u64().unwrap();
        }
    }
    assert!(
        named as f64 >= 0.9 * entries as f64,
        "{named} of {entries} entries name their lock's class"
    );
    // Each entry was let in by the thread that released the monitor: the carrier of the
    // holding virtual thread, paired in the kernel with the entry's futex wait.
    let carriers = carrier_tids(&report);
    let mut released = 0;
    for site in report["pinned"]["sites"].as_array().unwrap() {
        for by in site["released_by"].as_array().unwrap() {
            assert_eq!(site["operation"], "monitor_enter", "{site}");
            assert!(carriers.contains(&by["tid"].as_u64().unwrap()), "{site}");
            released += by["events"].as_u64().unwrap();
        }
    }
    assert!(
        released as f64 >= 0.8 * entries as f64,
        "{released} of {entries} entries name who released the monitor"
    );
}

#[test]
fn jdk25_synchronized_does_not_pin() {
    let mut jvm = start_vt(25, 4, "Pinning", &["sleep", "socket", "contend"]);
    std::thread::sleep(Duration::from_millis(500));
    let (report, truth) = record_with_jfr(25, jvm.pid, "nopin25", 3.0, "nopin25.pinrec");
    let from = report["window"]["start_mono_ns"].as_u64().unwrap();
    let to = from + report["window"]["duration_ns"].as_u64().unwrap();
    let sleeps = counts::in_window(&mut jvm, "sleeps", from, to);

    // It did sleep inside synchronized, hundreds of times, and nothing was monitor pinning.
    assert!(sleeps > 100.0, "only {sleeps} sleeps in the window");
    let (monitor, _) = pinned(&report, |r, _| r == "monitor");
    assert_eq!(monitor, 0, "JEP 491: no monitor pinning on JDK 25");
    for method in ["Pinning$Ledger.append", "Pinning$Channel.call"] {
        let found = findings_at(&report, "pinning", method);
        assert!(
            found.is_empty(),
            "JDK 25 does not pin at {method}: {found:#?}"
        );
    }
    // What little pins on 25 here (JDK critical sections) is what JFR sees too.
    let (all, _) = pinned(&report, |_, _| true);
    eprintln!("JDK 25: {all} pinned events, JFR {}", truth.len());
    let (ours, jfr) = (all as i64, truth.len() as i64);
    assert!(
        (ours - jfr).abs() <= 5.max(jfr / 5),
        "pinprof {all} pinned events, JFR {jfr}"
    );
}

#[test]
fn carrier_set_matches_the_jvm_after_compensation() {
    // Object.wait in virtual threads makes JDK 21's scheduler add carriers beyond its
    // parallelism; the workload also runs a second ForkJoinPool whose workers are not carriers.
    let mut jvm = start_vt(21, 2, "Pinning", &["compensate"]);
    let carriers = loop {
        let line = jvm
            .wait_for("carriers ", Duration::from_secs(20))
            .expect("the workload lists its carriers");
        let names: BTreeSet<String> = line[9..].split(',').map(String::from).collect();
        if names.len() > 2 {
            break names;
        }
    };
    let recording = record(jvm.pid, 1.5, "carriers21.pinrec");
    let report = report_json(&recording);

    // The JVM's own view: a thread dump maps the carriers' names to OS thread ids.
    let dump = Command::new(jdk_tool(21, "jcmd"))
        .args([&jvm.pid.to_string(), "Thread.print"])
        .output()
        .unwrap();
    assert_ok(&dump, "jcmd Thread.print");
    let dump = String::from_utf8_lossy(&dump.stdout);
    let truth: BTreeSet<u64> = dump
        .lines()
        .filter_map(|l| {
            let name = l.strip_prefix('"')?.split('"').next()?;
            if !carriers.contains(name) {
                return None;
            }
            // `"name" #19 [861] daemon ...`: the OS thread id in brackets.
            let tid = l.split('[').nth(1)?.split(']').next()?;
            tid.parse().ok()
        })
        .collect();
    assert_eq!(truth.len(), carriers.len(), "every carrier is in the dump");

    let ours = carrier_tids(&report);
    assert_eq!(ours, truth, "carriers: pinprof {ours:?}, the JVM {truth:?}");
    // Their full Java names, which the kernel truncates to 15 bytes.
    for t in report["threads"].as_array().unwrap() {
        if t["role"] == "carrier" {
            assert!(carriers.contains(t["name"].as_str().unwrap()), "{t}");
        }
    }
}

#[test]
fn a_carrier_pinned_since_before_attach_is_pinned_all_along() {
    // The virtual thread sleeps 10 minutes inside synchronized from before pinprof attaches:
    // no switch of its carrier is ever seen, yet that carrier is pinned for the whole
    // recording, at that sleep. Any other carrier (the pool may start one) idles throughout.
    let jvm = start_vt(21, 1, "Stuck", &[]);
    let report = report_json(&record(jvm.pid, 3.0, "stuck.pinrec"));
    let window = ns(&report["window"]["duration_ns"]);
    let (pinned, others): (Vec<_>, Vec<_>) = carrier_threads(&report)
        .into_iter()
        .partition(|c| ns(&c["pinned_ns"]) > 0.0);
    assert_eq!(pinned.len(), 1, "{pinned:?}");
    // The wait has been under way since before attach and is still under way at the end: it
    // spans the window, from attach (not from a later look at the threads) to the stop.
    assert_within(
        "pinned carrier time",
        ns(&pinned[0]["pinned_ns"]),
        window,
        0.01,
    );
    for idle in others {
        assert_within("idle carrier time", ns(&idle["idle_ns"]), window, 0.01);
    }
    let sites = report["pinned"]["sites"].as_array().unwrap();
    assert_eq!(report["pinned"]["events"], 1, "{sites:?}");
    assert_eq!(sites[0]["reason"], "monitor");
    assert_eq!(sites[0]["operation"], "park");
    let frames = strings(&sites[0]["frames"]);
    let sleep = frames.iter().position(|f| *f == "java.lang.Thread.sleep");
    let hold = frames.iter().position(|f| *f == "Stuck$Ledger.hold");
    assert!(
        sleep.is_some() && hold > sleep,
        "Stuck$Ledger.hold below Thread.sleep: {frames:?}"
    );
    // The main thread, asleep since before attach too, blocked at its Java stack all along.
    let main = report["off_cpu"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| strings(&s["threads"]) == ["main"])
        .expect("the main thread's blocked stack");
    assert_eq!(
        strings(&main["frames"])[..3],
        [
            "java.lang.Thread.sleep0",
            "java.lang.Thread.sleep",
            "Stuck.main"
        ]
    );
    assert_within("main blocked", ns(&main["total_ns"]), window, 0.01);
}

#[test]
fn a_pinning_from_before_attach_that_ends_is_whole() {
    // The wait inside synchronized begins before pinprof attaches and ends, when the test
    // says so, during the recording: the carrier is pinned from attach to the moment the
    // wait ends (by the workload's own clock), in one event, whose Java stack the kernel
    // copies as the thread leaves its wait.
    let mut jvm = start_vt(21, 1, "Stuck", &["until-told"]);
    let (recorder, out) = spawn_record(jvm.pid, "stuck-released.pinrec");
    std::thread::sleep(Duration::from_secs(1));
    say(&mut jvm, "go");
    let released = jvm
        .wait_for("released ", Duration::from_secs(10))
        .expect("the wait ended");
    let released: f64 = released["released ".len()..].trim().parse().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    interrupt(recorder);
    let report = report_json(&out);
    let start = ns(&report["window"]["start_mono_ns"]);
    let sites = report["pinned"]["sites"].as_array().unwrap();
    // Once released, the virtual thread may pin again for microseconds in the JVM's own
    // locks (a JIT compile request, seen in CI at 20 us): those are other events, kept
    // under a millisecond in all; the planted wait is the monitor site, in one event.
    let (planted, others): (Vec<&Value>, Vec<&Value>) =
        sites.iter().partition(|s| s["reason"] == "monitor");
    assert_eq!(planted.len(), 1, "{sites:?}");
    let site = planted[0];
    assert_eq!(site["events"], 1, "{sites:?}");
    assert_eq!(site["operation"], "park");
    let other_ns: f64 = others.iter().map(|s| ns(&s["total_ns"])).sum();
    assert!(other_ns < 1e6, "other pinnings: {others:?}");
    // The end is the carrier's switch back in; the workload reads its clock just after.
    assert_within(
        "pinned from attach to release",
        ns(&site["total_ns"]),
        released - start,
        0.02,
    );
    let frames = strings(&site["frames"]);
    let wait = frames
        .iter()
        .position(|f| *f == "java.util.concurrent.CountDownLatch.await");
    let hold = frames
        .iter()
        .position(|f| *f == "Stuck$Ledger.holdUntilTold");
    assert!(
        wait.is_some() && hold > wait,
        "Stuck$Ledger.holdUntilTold below CountDownLatch.await: {frames:?}"
    );
}

#[test]
fn jfr_times_parse() {
    assert_eq!(jfr::iso_ns("1970-01-01T00:00:01.5Z"), 1_500_000_000);
    assert_eq!(
        jfr::iso_ns("2026-11-30T00:00:00Z"),
        1_795_996_800 * 1_000_000_000
    );
    assert_eq!(jfr::iso_duration_ns("PT0.007493994S"), 7_493_994);
    assert_eq!(jfr::iso_duration_ns("PT1M2.5S"), 62_500_000_000);
}

#[test]
fn jdk25_class_init_pinning_matches_jfr() {
    // Four virtual threads need a class whose static initializer sleeps: the one running it
    // pins (a VM call on its stack), the others pin waiting for it.
    let jvm = start_vt(25, 4, "Pinning", &["clinit"]);
    class_init_matches_jfr(jvm, "clinit25");
}

#[test]
fn jdk25_compact_object_headers_change_nothing() {
    // -XX:+UseCompactObjectHeaders moves an object's class into its mark word: carriers are
    // still told by their class, named in full, and class-init pinning still matches JFR.
    let mut jvm = Jvm::start_with(
        &java(25),
        &[
            "-XX:+UseCompactObjectHeaders",
            "-Djdk.virtualThreadScheduler.parallelism=4",
        ],
        &workloads(),
        "Pinning",
        &["clinit"],
    )
    .expect("start the workload JVM");
    let line = jvm
        .wait_for("carriers ", Duration::from_secs(20))
        .expect("the workload lists its carriers");
    let theirs: BTreeSet<String> = line[9..].split(',').map(String::from).collect();
    let report = class_init_matches_jfr(jvm, "compact25");
    let ours: BTreeSet<String> = carrier_threads(&report)
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        theirs.is_subset(&ours) && !ours.is_empty(),
        "carriers: the JVM's {theirs:?}, pinprof's {ours:?}"
    );
}

/// Class-init pinning of `Pinning clinit` on JDK 25 within 15% of JFR's count (25% of its
/// time), and no monitor pinning; returns the report.
fn class_init_matches_jfr(jvm: Jvm, name: &str) -> Value {
    std::thread::sleep(Duration::from_millis(300));
    let (report, truth) = record_with_jfr(25, jvm.pid, name, 4.0, &format!("{name}.pinrec"));
    let truth: Vec<_> = truth
        .into_iter()
        .filter(|e| {
            e.reason
                .as_deref()
                .is_some_and(|r| r.contains("<clinit>") || r.contains("initialization"))
        })
        .collect();

    let (ours, ours_ns) = pinned(&report, |r, _| r == "class_init");
    // The issue asks for the count; the time is checked too, more loosely: on a loaded machine
    // one wait more or less at the window's edge moves it by a tenth (seen: 16% once).
    assert_matches_jfr(
        &format!("JDK 25 class-init pinning ({name})"),
        (ours, ours_ns),
        &truth,
        0.15,
        0.25,
    );
    let (monitor, _) = pinned(&report, |r, _| r == "monitor");
    assert_eq!(monitor, 0);
    // A class_init finding names the classes whose initializers the threads waited for.
    let named: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "class_init")
        .map(|f| f["summary"].as_str().unwrap())
        .collect();
    assert!(
        named
            .iter()
            .any(|s| s.contains("initialization of Pinning$Slow")),
        "{named:#?}"
    );
    report
}

/// JDK 21 `Pinning sleep` with `option` in an argument file (`java @file`), where a look at
/// the command line does not find it.
fn start_with_argument_file(name: &str, option: &str) -> Jvm {
    let args = scratch(&format!("{name}.args"));
    std::fs::write(&args, format!("{option}\n")).unwrap();
    let file = format!("@{}", args.display());
    Jvm::start_with(&java(21), &[&file], &workloads(), "Pinning", &["sleep"])
        .expect("start the workload JVM")
}

#[test]
fn scheduler_settings_come_from_the_jvm_itself() {
    // Set in an argument file, so not on the command line: only the JVM can tell.
    let jvm = start_with_argument_file("parallelism", "-Djdk.virtualThreadScheduler.parallelism=3");
    let out = pinprof()
        .args(["jvm", "--pid", &jvm.pid.to_string()])
        .output()
        .unwrap();
    assert_ok(&out, "pinprof jvm");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("parallelism: 3 (set in the JVM)"), "{text}");
    assert!(
        text.contains("virtual thread #"),
        "a carrier runs a virtual thread: {text}"
    );

    let report = report_json(&record(jvm.pid, 1.0, "parallelism.pinrec"));
    assert_eq!(report["target"]["runtime"]["parallelism"], 3);
}

#[test]
fn a_jvm_with_attach_disabled_is_left_alone() {
    // pinprof must not signal a JVM that cannot answer; it records without its settings.
    // The flag is in an argument file, not on the command line: pinprof reads it from the JVM.
    let jvm = start_with_argument_file("noattach", "-XX:+DisableAttachMechanism");
    let recording = scratch("noattach.pinrec");
    let out = pinprof()
        .args([
            "record",
            "--quiet",
            "--duration",
            "1",
            "--pid",
            &jvm.pid.to_string(),
        ])
        .arg("--output")
        .arg(&recording)
        .output()
        .unwrap();
    assert_ok(&out, "pinprof record");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("DisableAttachMechanism"), "{stderr}");
    let report = report_json(&recording);
    assert!(
        report["pinned"]["events"].as_u64().unwrap() > 10,
        "pinning still seen"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        std::path::Path::new(&format!("/proc/{}", jvm.pid)).exists(),
        "the JVM is still alive"
    );
    // Not signalled: a SIGQUIT would have printed a thread dump.
    let printed: Vec<String> = jvm.lines.try_iter().collect();
    assert!(
        !printed.iter().any(|l| l.contains("Full thread dump")),
        "the JVM was sent SIGQUIT"
    );
}
