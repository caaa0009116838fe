//! A target with more distinct stacks than the kernel's stack map holds (32,768): the map is
//! emptied as it fills (`record/stack_ids.rs`), so waits late in the recording still have
//! their stacks, and what is lost is counted. Before, the map filled within seconds and every
//! later wait went without a stack (99% of them, on this workload).

mod common;

use std::{
    collections::HashSet,
    io::{BufRead as _, BufReader, Write as _},
    process::{Command, Stdio},
    time::Duration,
};

use common::*;

/// pinprof-testprog's `stacks` scenario: a thread sleeps 20 us 50,000 times, each time with a
/// user stack of another path down a tree of calls, recorded from before it starts to after
/// it ends. Its own count of sleeps is the ground truth.
#[test]
fn more_distinct_stacks_than_the_kernel_map_holds_keep_their_stacks() {
    require_root();
    let mut prog = Command::new(env!("CARGO_BIN_EXE_pinprof-testprog"))
        .args(["stacks", "50000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start pinprof-testprog");
    let mut lines = BufReader::new(prog.stdout.take().unwrap()).lines();
    let ready = lines.next().unwrap().unwrap();
    let pid: u32 = ready.trim_start_matches("ready ").parse().unwrap();
    let (recorder, recording) = spawn_record_with(pid, "stack-map.pinrec", &[]);
    std::thread::sleep(Duration::from_millis(500));
    let mut stdin = prog.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    let mut walked = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line == "done" {
            break;
        }
        if let Some(rest) = line.strip_prefix("walked ") {
            let counts: Vec<u64> = rest.split(' ').map(|n| n.parse().unwrap()).collect();
            walked = Some((counts[0], counts[1]));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let stopped = interrupt(recorder);
    drop(stdin);
    let _ = prog.wait();
    let said = String::from_utf8_lossy(&stopped.stderr);
    let (sleeps, paths) = walked.expect("the walker's count");
    // The point of the test: more distinct stacks than the kernel's map has room for.
    assert!(
        paths > 40_000,
        "the walker went down {paths} paths only ({sleeps} sleeps)"
    );

    let report = report_json(&recording);
    let misses = report["capture"]["stack_misses"].as_u64().unwrap();
    // What is lost is counted, and is a small part of the sleeps (a stack refused by a
    // collision before the map is emptied, or taken as its id was deleted): 99% before.
    assert!(
        misses as f64 <= 0.15 * sleeps as f64,
        "{misses} stacks missed of {sleeps} sleeps\n{said}"
    );
    // The stacks the recording holds: each distinct path, named through left and right.
    let folded = scratch("stack-map.folded");
    let out = pinprof()
        .arg("export")
        .arg(&recording)
        .arg("--output")
        .arg(&folded)
        .output()
        .unwrap();
    assert_ok(&out, "pinprof export");
    let text = std::fs::read_to_string(&folded).unwrap();
    let distinct: HashSet<&str> = text
        .lines()
        .filter_map(|l| l.rsplit_once(' ').map(|(stack, _)| stack))
        .filter(|stack| stack.contains("pinprof_testprog::left;"))
        .collect();
    let distinct = distinct.len() as u64;
    eprintln!("{sleeps} sleeps down {paths} paths: {misses} stacks missed, {distinct} distinct");
    // Every path's stack is there but for those missed (each missed sleep costs at most one
    // path), within 10% for a path whose every sleep missed its stack.
    assert!(
        distinct as f64 >= 0.9 * (paths.saturating_sub(misses)) as f64,
        "{distinct} distinct stacks of {paths} paths ({misses} missed)"
    );
    assert!(distinct > 32_768, "{distinct} distinct stacks");
}
