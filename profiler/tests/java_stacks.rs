//! Java frames named from outside, on JVMs started with no flags: a synchronized method that
//! sleeps must appear, by name and below `java.lang.Thread.sleep`, in the stacks of the
//! events it causes, first while it is interpreted and later once it is compiled.

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

const METHOD: &str = "SyncSleep$Inventory.reserve";

/// Of `stacks` (pinned sites or blocked stacks), the events whose frames hold `METHOD` below
/// `java.lang.Thread.sleep` (innermost first), how `METHOD` ran in them, and in how many it is
/// marked as holding the monitor, by event count.
fn with_method(stacks: &[&Value]) -> (u64, u64, u64, u64) {
    let (mut events, mut interpreted, mut compiled, mut holding) = (0, 0, 0, 0);
    for s in stacks {
        let frames = strings(&s["frames"]);
        let sleep = frames.iter().position(|f| *f == "java.lang.Thread.sleep");
        let method = frames.iter().position(|f| *f == METHOD);
        let (Some(sleep), Some(method)) = (sleep, method) else {
            continue;
        };
        if sleep > method {
            continue;
        }
        let n = s["events"].as_u64().unwrap();
        events += n;
        let marked = s["monitor_frames"].as_array().unwrap();
        if marked.contains(&Value::from(method)) {
            holding += n;
        }
        match s["frame_kinds"][method].as_str().unwrap() {
            "interpreted" => interpreted += n,
            // Compiled on its own, or inlined into its compiled caller.
            "compiled" | "inlined" => compiled += n,
            other => panic!("{METHOD} ran as {other}"),
        }
    }
    (events, interpreted, compiled, holding)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Interpreted,
    Compiled,
}

/// At least 95% of the events carry the method, marked as holding its monitor, and most ran
/// it as `phase` says.
fn check(what: &str, all: u64, found: (u64, u64, u64, u64), phase: Phase) {
    let (named, interpreted, compiled, holding) = found;
    let share = named as f64 / all as f64;
    eprintln!(
        "{what}: {named} of {all} events name {METHOD} ({:.1}%): {interpreted} interpreted, \
         {compiled} compiled",
        share * 100.0
    );
    assert!(all >= 20, "{what}: only {all} events");
    assert!(
        share >= 0.95,
        "{what}: only {named} of {all} events name {METHOD}"
    );
    assert_eq!(
        holding, named,
        "{what}: {METHOD} holds its monitor in every one"
    );
    let in_phase = match phase {
        Phase::Interpreted => interpreted,
        Phase::Compiled => compiled,
    };
    assert!(
        in_phase as f64 >= 0.9 * named as f64,
        "{what}: expected {phase:?}, got {interpreted} interpreted, {compiled} compiled"
    );
}

/// A recording taken once the method is compiled: when that happens depends on the JIT and on
/// how busy the machine is, so record 3 s windows until one shows it compiled (at most 28 s).
fn warmed_up(pid: u32, name: &str, found: impl Fn(&Value) -> (u64, u64, u64, u64)) -> Value {
    let mut report = Value::Null;
    for _ in 0..8 {
        std::thread::sleep(Duration::from_millis(500));
        report = report_json(&record(pid, 3.0, name));
        let (named, _, compiled, _) = found(&report);
        if named > 0 && compiled as f64 >= 0.9 * named as f64 {
            break;
        }
    }
    report
}

fn pinned_sites(report: &Value) -> Vec<&Value> {
    report["pinned"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .collect()
}

/// Blocked stacks of the platform caller thread alone.
fn caller_stacks(report: &Value) -> Vec<&Value> {
    report["off_cpu"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["threads"].as_array().unwrap() == &[Value::from("reserver-0")])
        .collect()
}

#[test]
fn jdk21_pinned_sleeps_name_the_synchronized_method() {
    let jvm = start(21, "SyncSleep", &["2", "1", "40"]);
    let early = report_json(&record(jvm.pid, 1.5, "sync21-early.pinrec"));
    let late = warmed_up(jvm.pid, "sync21-late.pinrec", |r| {
        with_method(&pinned_sites(r))
    });
    for (report, phase, what) in [
        (&early, Phase::Interpreted, "JDK 21 pinned, first seconds"),
        (&late, Phase::Compiled, "JDK 21 pinned, warmed up"),
    ] {
        let all = report["pinned"]["events"].as_u64().unwrap();
        check(what, all, with_method(&pinned_sites(report)), phase);
    }
}

#[test]
fn jdk25_blocked_sleeps_name_the_synchronized_method() {
    // JDK 25 does not pin here (JEP 491): the platform caller's blocked events carry the site.
    let jvm = start(25, "SyncSleep", &["2", "1", "40"]);
    let early = report_json(&record(jvm.pid, 1.5, "sync25-early.pinrec"));
    let late = warmed_up(jvm.pid, "sync25-late.pinrec", |r| {
        with_method(&caller_stacks(r))
    });
    for (report, phase, what) in [
        (&early, Phase::Interpreted, "JDK 25 blocked, first seconds"),
        (&late, Phase::Compiled, "JDK 25 blocked, warmed up"),
    ] {
        // JEP 491: its sleeps unmount. (A rare freeze failure may still pin one; JFR sees
        // those too, see the pinning tests.)
        let pinned_here = with_method(&pinned_sites(report)).0;
        let caller = with_method(&caller_stacks(report)).0;
        assert!(
            pinned_here * 20 <= caller,
            "{what}: {pinned_here} pinned in {METHOD}"
        );
        let all = thread(report, "reserver-0")["blocked_intervals"]
            .as_u64()
            .unwrap();
        check(what, all, with_method(&caller_stacks(report)), phase);
    }
}

#[test]
fn frame_pointer_walk_agrees_where_frame_pointers_are_kept() {
    // With -XX:+PreserveFramePointer a plain frame-pointer walk, named from the JVM's perf
    // map, is a second opinion on the compiled frames: the same return addresses, the same
    // methods.
    for major in [21, 25] {
        let jvm = Jvm::start_with(
            &java(major),
            &["-XX:+PreserveFramePointer"],
            &workloads(),
            "SyncSleep",
            &["2", "1", "5"],
        )
        .expect("start the workload JVM");
        std::thread::sleep(Duration::from_secs(4));
        let out = std::process::Command::new(jdk_tool(major, "jcmd"))
            .args([&jvm.pid.to_string(), "Compiler.perfmap"])
            .output()
            .unwrap();
        assert_ok(&out, "jcmd Compiler.perfmap");
        let report = report_json(&record_with(
            jvm.pid,
            2.0,
            &format!("fp{major}.pinrec"),
            &["--fp-cross-check"],
        ));
        let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", jvm.pid));
        let check = &report["capture"]["fp_cross_check"];
        let (compared, agreed) = (
            check["compared"].as_u64().unwrap(),
            check["agreed"].as_u64().unwrap(),
        );
        eprintln!("JDK {major}: frame-pointer walk agreed on {agreed} of {compared} stacks");
        assert!(
            compared >= 50,
            "JDK {major}: only {compared} stacks compared"
        );
        assert!(
            agreed as f64 >= 0.95 * compared as f64,
            "JDK {major}: agreed on {agreed} of {compared}: {check}"
        );
    }
}

/// Of `bumper-0`'s blocked stacks: the events, and those whose frames read `Thread.sleep`,
/// `pause`, then `Counter.bump` inlined and marked as holding its monitor, then `run`.
fn inlined_bumps(report: &Value) -> (u64, u64) {
    let (mut all, mut inlined) = (0, 0);
    for s in report["off_cpu"]["stacks"].as_array().unwrap() {
        if s["threads"].as_array().unwrap() != &[Value::from("bumper-0")] {
            continue;
        }
        let n = s["events"].as_u64().unwrap();
        all += n;
        let frames = strings(&s["frames"]);
        let at = |name: &str| frames.iter().position(|f| *f == name);
        let (Some(sleep), Some(pause), Some(bump), Some(run)) = (
            at("java.lang.Thread.sleep"),
            at("InlinedSync.pause"),
            at("InlinedSync$Counter.bump"),
            at("InlinedSync.run"),
        ) else {
            continue;
        };
        let marked = s["monitor_frames"].as_array().unwrap();
        if sleep < pause
            && pause < bump
            && bump < run
            && s["frame_kinds"][bump] == "inlined"
            && marked.contains(&Value::from(bump))
        {
            inlined += n;
        }
    }
    (all, inlined)
}

#[test]
fn methods_the_jit_inlined_are_named_where_it_inlined_them() {
    for major in [21, 25] {
        let jvm = start(major, "InlinedSync", &["1"]);
        // Inlining comes with C2, after enough calls: record 2 s windows until it shows.
        let mut found = (0, 0);
        for attempt in 0..10 {
            std::thread::sleep(Duration::from_millis(500));
            let report = report_json(&record(jvm.pid, 2.0, &format!("inlined{major}.pinrec")));
            found = inlined_bumps(&report);
            eprintln!(
                "JDK {major}, window {attempt}: {} of {} blocked events show \
                 InlinedSync$Counter.bump inlined",
                found.1, found.0
            );
            if found.0 >= 50 && found.1 as f64 >= 0.95 * found.0 as f64 {
                break;
            }
        }
        let (all, inlined) = found;
        assert!(all >= 50, "JDK {major}: only {all} blocked events");
        assert!(
            inlined as f64 >= 0.95 * all as f64,
            "JDK {major}: {inlined} of {all} events name the inlined synchronized method"
        );
    }
}
