//! The workloads' own counters: `counts <nanoTime> <name> N ...` lines (CLOCK_MONOTONIC, the
//! clock of the kernel's events), a ground truth for what happened inside a report's window.

use std::time::Duration;

use super::Jvm;

/// (time, value) of counter `name`, read from the workload's lines until one is later than
/// `until` (None: until its output ends, as it exits).
pub fn points(jvm: &mut Jvm, name: &str, until: Option<u64>) -> Vec<(u64, f64)> {
    let mut points = Vec::new();
    let wait = Duration::from_millis(if until.is_some() { 500 } else { 10_000 });
    while let Ok(line) = jvm.lines.recv_timeout(wait) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if parts.first() != Some(&"counts") {
            continue;
        }
        let time: u64 = parts[1].parse().unwrap();
        let i = parts
            .iter()
            .position(|p| *p == name)
            .unwrap_or_else(|| panic!("no counter {name} in {line}"));
        points.push((time, parts[i + 1].parse().unwrap()));
        if until.is_some_and(|to| time > to) {
            break;
        }
    }
    points
}

/// The counter at `t`, interpolated between the points around it.
pub fn at(points: &[(u64, f64)], t: u64) -> f64 {
    let i = points.partition_point(|p| p.0 <= t);
    assert!(i > 0 && i < points.len(), "no counts around {t}");
    let ((t0, v0), (t1, v1)) = (points[i - 1], points[i]);
    v0 + (v1 - v0) * (t - t0) as f64 / (t1 - t0) as f64
}

/// How much counter `name` grew inside the window [from, to).
pub fn in_window(jvm: &mut Jvm, name: &str, from: u64, to: u64) -> f64 {
    let points = points(jvm, name, Some(to));
    at(&points, to) - at(&points, from)
}

/// The window [from, to) of a JSON report, in CLOCK_MONOTONIC ns.
pub fn window(report: &serde_json::Value) -> (u64, u64) {
    let from = report["window"]["start_mono_ns"].as_u64().unwrap();
    (
        from,
        from + report["window"]["duration_ns"].as_u64().unwrap(),
    )
}
