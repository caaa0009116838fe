//! A timeline in the Chrome trace event format (JSON), which Perfetto's UI and
//! `chrome://tracing` open: one track per carrier, its recorded waits as slices named for what
//! they were (`pinned`, `blocked`, `idle`, `runnable`), the virtual thread mounted as an
//! argument, and the time between them as `running`; starvation episodes on a track of their
//! own; findings as instant events. Times are microseconds from the window's start.

use std::io::Write;

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use crate::analysis::{Analysis, classify::Use};

/// The track starvation episodes and findings are drawn on (no thread has id 0).
const PROCESS_TRACK: u32 = 0;

/// A carrier's interval: start, end, what it was, the virtual thread mounted.
type Slice = (u64, u64, Option<Use>, Option<u64>);

/// What a carrier's recorded interval was, as the timeline names it.
pub fn slice_name(used: Option<Use>) -> &'static str {
    match used {
        None => "runnable",
        Some(Use::Idle) => "idle",
        Some(Use::Pinned(..)) => "pinned",
        Some(Use::Blocked | Use::BlockedMounted) => "blocked",
    }
}

pub fn write(analysis: &Analysis, mut out: impl Write) -> Result<()> {
    serde_json::to_writer(&mut out, &trace(analysis)).context("cannot write the timeline")?;
    out.flush().context("cannot write the timeline")
}

pub fn trace(analysis: &Analysis) -> Value {
    let model = analysis.model();
    let pid = model.target.pid;
    let start = model.start_mono_ns;
    let us = |t: u64| t.saturating_sub(start) as f64 / 1e3;
    let mut events = vec![json!({
        "ph": "M", "name": "process_name", "pid": pid,
        "args": {"name": format!("{} (pid {pid})", model.target.command)},
    })];
    events.push(json!({
        "ph": "M", "name": "thread_name", "pid": pid, "tid": PROCESS_TRACK,
        "args": {"name": "starvation and findings"},
    }));
    let mut carriers: Vec<u32> = model
        .java_threads
        .values()
        .filter(|t| t.carrier)
        .map(|t| t.tid)
        .collect();
    carriers.sort_unstable();
    for (i, &tid) in carriers.iter().enumerate() {
        events.push(json!({
            "ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
            "args": {"name": model.thread_name(tid)},
        }));
        events.push(json!({
            "ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
            "args": {"sort_index": i + 1},
        }));
    }
    // Each carrier's intervals in time order, with the running between them.
    let mut by_carrier: std::collections::BTreeMap<u32, Vec<Slice>> = Default::default();
    for (o, used) in model.off_cpu.iter().zip(analysis.classes().iter().copied()) {
        if model.is_carrier(o.tid) {
            let vthread = o.java().and_then(|j| j.vthread);
            by_carrier
                .entry(o.tid)
                .or_default()
                .push((o.start_ns, o.end_ns, used, vthread));
        }
    }
    for (tid, mut intervals) in by_carrier {
        intervals.sort_by_key(|i| i.0);
        let (born, _) = model.life(tid);
        let mut ran_from = born;
        for (from, to, used, vthread) in intervals {
            if from > ran_from {
                events.push(json!({
                    "ph": "X", "name": "running", "cat": "running", "pid": pid, "tid": tid,
                    "ts": us(ran_from), "dur": (from - ran_from) as f64 / 1e3,
                }));
            }
            let mut args = json!({});
            if let Some(v) = vthread {
                args["vthread_id"] = json!(v);
            }
            if let Some(Use::Pinned(reason, operation)) = used {
                args["reason"] = json!(reason.as_str());
                args["operation"] = json!(operation.as_str());
            }
            let name = slice_name(used);
            events.push(json!({
                "ph": "X", "name": name, "cat": name, "pid": pid, "tid": tid,
                "ts": us(from), "dur": to.saturating_sub(from) as f64 / 1e3, "args": args,
            }));
            ran_from = ran_from.max(to);
        }
    }
    for e in analysis.starvation() {
        events.push(json!({
            "ph": "X", "name": "starvation", "cat": "starvation", "pid": pid,
            "tid": PROCESS_TRACK, "ts": us(e.start_ns),
            "dur": e.end_ns.saturating_sub(e.start_ns) as f64 / 1e3,
            "args": {
                "blocked_carriers": e.blocked_carriers,
                "carriers": e.carriers,
                "queued_max": e.queued_max,
            },
        }));
    }
    for f in analysis.findings() {
        events.push(json!({
            "ph": "i", "s": "p", "name": f.summary, "cat": "finding", "pid": pid,
            "tid": PROCESS_TRACK,
            // (A finding's start is from the window's start already.)
            "ts": f.start_ns.unwrap_or(0) as f64 / 1e3,
            "args": {
                "kind": f.kind,
                "severity": f.severity.as_str(),
                "advice": f.advice,
            },
        }));
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "pinprof_version": env!("CARGO_PKG_VERSION"),
            "start_unix_ns": model.start_unix_ns,
        },
    })
}
