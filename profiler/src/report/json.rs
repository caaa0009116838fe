//! The JSON report. Its shape is a contract with users' scripts (schema 1): sections are only
//! ever added, and a section whose capability has not landed is present and empty.

use serde_json::{Value, json};

use super::Options;
use crate::analysis::Analysis;
use crate::analysis::stacks::StackLabels;
use crate::analysis::threads::blocked_total_ns;
use crate::model::{Model, total};

pub fn to_json(analysis: &Analysis, options: &Options) -> Value {
    let model = analysis.model();
    let runtime = model.target.runtime.as_ref().map(|r| {
        json!({
            "kind": r.kind,
            "version": r.version,
            "parallelism": r.parallelism,
            "max_pool_size": r.max_pool_size,
        })
    });
    let rows = analysis.threads();
    let own = analysis.jdk_own_threads();
    let threads: Vec<Value> = rows
        .iter()
        .map(|t| {
            json!({
                "tid": t.tid,
                "name": t.name,
                "role": t.role.as_str(),
                // One of the JVM's or the JDK's own threads (see `jdk_own_threads`).
                "jvm_internal": own.contains(&t.tid),
                "running_ns": t.running_ns,
                "idle_ns": t.idle_ns,
                "blocked_ns": t.blocked_ns,
                "pinned_ns": t.pinned_ns,
                "preempted_ns": t.preempted_ns,
                "intervals": t.intervals,
                "blocked_intervals": t.blocked_intervals,
                "kernel_lock_ns": t.kernel_lock_ns,
            })
        })
        .collect();
    let stacks: Vec<Value> = analysis
        .blocked_stacks()
        .iter()
        .take(options.top)
        .map(|s| {
            with_stack(
                &s.stack,
                json!({
                    "events": s.events,
                    "total_ns": s.total_ns,
                    "max_ns": s.max_ns,
                    "threads": s.threads,
                    "monitor_classes": s.monitor_classes,
                    "class_monitors": s.class_monitors,
                    "jvm_internal": s.jvm_internal,
                }),
            )
        })
        .collect();
    let pinned = analysis.pinned_events();
    let sites: Vec<Value> = analysis
        .pinned_sites()
        .iter()
        .map(|s| {
            with_stack(
                &s.stack,
                json!({
                    "reason": s.reason.as_str(),
                    "operation": s.operation.as_str(),
                    "events": s.events,
                    "total_ns": s.total_ns,
                    "max_ns": s.max_ns,
                    // Which virtual threads pinned here, and on which carriers.
                    "virtual_threads": s.virtual_threads.iter().take(50).collect::<Vec<_>>(),
                    "virtual_thread_count": s.virtual_threads.len(),
                    "carriers": s.carriers,
                    // For monitor entries and waits: the classes of the objects locked and,
                    // of `java.lang.Class` objects (`static synchronized`), their classes.
                    "monitor_classes": s.monitor_classes,
                    "class_monitors": s.class_monitors,
                    // For waits for another thread's class initialization: the class and
                    // the thread running its static initializer.
                    "class_init": class_inits(&s.class_inits),
                    // For monitor entries: the threads whose release let them in.
                    "released_by": released_by(model, &s.released_by),
                }),
            )
        })
        .collect();
    let episodes = analysis.starvation();
    let waiting_on = analysis.waiting_on();
    let starvation: Vec<Value> = episodes
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let on = waiting_on.get(i).and_then(Option::as_ref);
            json!({
                "start_ns": e.start_ns.saturating_sub(model.start_mono_ns),
                "duration_ns": e.end_ns.saturating_sub(e.start_ns),
                "blocked_carriers": e.blocked_carriers,
                "carriers": e.carriers,
                // The most tasks (virtual threads to run) seen waiting for a carrier in it.
                "queued_max": e.queued_max,
                "cause": e.cause.as_str(),
                // What most of its pinned carrier time waited on, and the lock's owner.
                "waiting_on": on.map(|w| json!({
                    "kind": w.kind.as_str(),
                    "class": w.class,
                    "carrier_ns": w.carrier_ns,
                    "owner": w.owner.as_ref().map(owner_json),
                })),
            })
        })
        .collect();
    let locks: Vec<Value> = analysis
        .locks()
        .iter()
        .take(options.top)
        .map(|l| {
            json!({
                "address": format!("{:#x}", l.address),
                "kind": l.kind.as_str(),
                "waits": l.waits,
                "wait_ns": l.wait_ns,
                "max_wait_ns": l.max_wait_ns,
                "waiting_at_end": l.waiting_at_end,
                "holder_frames": l.holder_frames,
                "waiter_frames": l.waiter_frames,
                "long_held": l.long_held(options.long_held_ns),
                "jvm_internal": l.jvm_internal,
                "symbol": l.symbol,
                "waiters": l.waiters,
                "holders": l.holders.iter().map(|(tid, name, waits, ns)| {
                    json!({ "tid": tid, "name": name, "waits": waits, "wait_ns": ns })
                }).collect::<Vec<_>>(),
                "java": l.java.as_ref().map(|j| json!({
                    "class": j.class,
                    "kind": j.kind.as_str(),
                    "owner": j.owner.as_ref().map(owner_json),
                })),
                // What virtual threads waiting on it unmounted did (lock, condition...).
                "operation": (l.kind == crate::analysis::kinds::LockKind::Unmounted)
                    .then(|| crate::analysis::unmounted::row_operation(model, l.address))
                    .flatten()
                    .map(|op| op.as_str()),
            })
        })
        .collect();
    let futex = analysis.futex();
    let syscalls: Vec<Value> = analysis
        .syscalls()
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "events": s.events,
                "total_ns": s.total_ns,
                "max_ns": s.max_ns,
                "long_events": s.long_events,
                "jvm_internal": s.jvm_internal,
                "files": s.files.iter().take(options.top).map(|(name, n, ns)| {
                    json!({ "name": name, "events": n, "total_ns": ns })
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    let on_cpu_sites: Vec<Value> = analysis
        .on_cpu_sites()
        .iter()
        .take(options.top)
        .map(|s| with_stack(&s.stack, json!({ "samples": s.samples })))
        .collect();
    let monopolized: Vec<Value> = analysis
        .monopolized()
        .iter()
        .map(|m| {
            with_stack(
                &m.stack(model),
                json!({
                    "carrier_tid": m.carrier,
                    "vthread_id": m.vthread,
                    "start_ns": m.start_ns.saturating_sub(model.start_mono_ns),
                    "duration_ns": m.duration_ns(),
                    "samples": m.samples,
                }),
            )
        })
        .collect();
    let scheduling = analysis.scheduling();
    let sched_row = |t: &crate::analysis::scheduler::ThreadScheduling| {
        json!({
            "tid": t.tid,
            "name": model.thread_name(t.tid),
            "wakeup_latency_ns": {"p50": t.wakeup.p50, "p99": t.wakeup.p99, "max": t.wakeup.max, "count": t.wakeup.count},
            "runqueue_ns": {"p50": t.runqueue.p50, "p99": t.runqueue.p99, "max": t.runqueue.max, "count": t.runqueue.count},
            "migrations": t.migrations,
            "involuntary_switches": t.involuntary_switches,
        })
    };
    let late_wakeups: Vec<Value> = model
        .late_wakeups
        .iter()
        .map(|w| {
            json!({
                "tid": w.tid,
                "start_ns": w.wake_ns.saturating_sub(model.start_mono_ns),
                "delay_ns": w.run_ns.saturating_sub(w.wake_ns),
                "waker_tid": w.waker_tid,
                "cpu": w.cpu,
            })
        })
        .collect();
    json!({
        "schema": 1,
        "target": {
            "pid": model.target.pid,
            "command": model.target.command,
            "runtime": runtime,
        },
        "container": model.container.as_ref().map(|c| json!({
            "pid_namespace": c.pid_ns_inode,
            "pid": c.ns_pid,
            "cgroup": c.cgroup,
            "cpu_max": c.cpu_max,
        })),
        "window": {
            "start_unix_ns": model.start_unix_ns,
            "duration_ns": analysis.duration_ns(),
            // CLOCK_MONOTONIC at the start (the clock of Java's System.nanoTime on Linux),
            // to line the window up with the target's own timestamps.
            "start_mono_ns": model.start_mono_ns,
        },
        "lost_events": model.counters.lost(),
        // What the user must know, most severe first: each with its evidence and advice.
        "findings": analysis.findings(),
        "threads": threads,
        "pinned": {
            "events": pinned.len(),
            "total_ns": total(pinned.iter().map(|e| e.duration_ns())),
            "sites": sites,
            // False when the JVM's threads could not be read: then nothing could be seen.
            "known": analysis.knows_java_threads(),
        },
        "starvation": {
            "total_ns": total(episodes.iter().map(|e| e.end_ns.saturating_sub(e.start_ns))),
            "episodes": starvation,
            // Tasks waiting in the scheduler for a carrier, as sampled: at every checkpoint
            // and while every carrier waited.
            "queued": model
                .queued
                .iter()
                .map(|(t, n)| json!({"time_ns": t.saturating_sub(model.start_mono_ns), "tasks": n}))
                .collect::<Vec<_>>(),
        },
        "locks": locks,
        "vthread_waits": vthread_waits_json(model),
        "syscalls": syscalls,
        // Where the target's threads ran, from samples of every CPU `hz` times a second.
        "oncpu": {
            "hz": model.on_cpu_hz.unwrap_or(0),
            "samples": model.samples.len(),
            "samples_taken": model.samples_taken,
            // Sent without their Java stack: the ring buffer was filling (user space behind).
            "java_stacks_skipped": model.sample_stacks_skipped,
            "sites": on_cpu_sites,
        },
        // Virtual threads that held their carrier, running, for long.
        "monopolized": monopolized,
        // The scheduler's view of the threads, and the CPU quota of the target's cgroup
        // with its throttling over the window (null: no cgroup of the CPU controller).
        "scheduler": {
            "carriers": scheduling.iter().filter(|t| t.carrier).map(sched_row).collect::<Vec<_>>(),
            "threads": scheduling.iter().filter(|t| !t.carrier).map(sched_row).collect::<Vec<_>>(),
            "late_wakeups": late_wakeups,
            "threads_not_kept": model.sched_threads_not_kept,
            "cgroup": analysis.throttling().map(|t| json!({
                "path": t.path,
                "version": t.version,
                "cpu_max": t.cpu_max,
                "nr_periods": t.nr_periods,
                "nr_throttled": t.nr_throttled,
                "throttled_ns": t.throttled_ns,
                // Throttled time between consecutive readings (about a second apart), from
                // the window's start.
                "series": t.series.iter().map(|s| json!({
                    "time_ns": s.time_ns,
                    "duration_ns": s.duration_ns,
                    "throttled_ns": s.throttled_ns,
                })).collect::<Vec<_>>(),
            })),
        },
        // Every long futex wait, locks or not: how they ended, by operation.
        "futex_waits": {
            "events": futex.waits,
            "total_ns": futex.total_ns,
            "released_by_another_thread": futex.released,
            "timed_out": futex.timed_out,
            "interrupted": futex.interrupted,
            "unfinished": futex.unfinished,
            "by_operation": futex.by_op.iter().map(|(op, n)| json!({ "operation": op, "events": n })).collect::<Vec<_>>(),
        },
        "off_cpu": {
            "events": model.off_cpu.len(),
            "blocked_ns": blocked_total_ns(rows),
            "stacks": stacks,
        },
        "capture": {
            "stack_misses": model.counters.stack_misses,
            "short_intervals": model.counters.short_intervals,
            "java_stacks": model.java_stacks.len(),
            "java_stack_misses": model.counters.java_stack_misses,
            "java_stacks_cut": analysis.java_stacks_cut(),
            "waker_stacks_skipped": model.counters.waker_stacks_skipped,
            "fp_cross_check": model.fp_check,
            "min_off_cpu_ns": model.min_off_cpu_ns,
            "target_exited": model.target_exit_ns.is_some(),
            // The memory budget pinprof recorded under, and what it cut to stay in it (null:
            // a recording made before budgets).
            "memory_budget": model.memory_budget.map(|(bytes, cuts)| json!({
                "bytes": bytes,
                "names_cut": cuts.names_cut,
                "threads_not_listed": cuts.threads_not_listed,
                "stacks_forgotten": cuts.stacks_forgotten,
                "births_unsignaled": cuts.births_unsignaled,
                "records_not_teed": cuts.records_not_teed,
                "events_not_written": cuts.events_not_written,
            })),
            "warnings": model.warnings,
        },
    })
}

/// `object` with a stack's `frames` (innermost first), `frame_kinds`, `monitor_frames` and
/// `lines` (each frame's source line, or null).
fn with_stack(stack: &StackLabels, mut object: Value) -> Value {
    object["frames"] = json!(stack.frames);
    object["lines"] = json!(stack.lines);
    object["frame_kinds"] = json!(stack.frame_kinds);
    object["monitor_frames"] = json!(stack.monitor_frames);
    object
}

/// `[{class, initializer: {tid, name, vthread_id} or null}]`.
fn class_inits(
    inits: &std::collections::BTreeSet<crate::analysis::monitors::InitWaitedFor>,
) -> Vec<Value> {
    inits
        .iter()
        .map(|i| {
            json!({
                "class": i.class,
                "initializer": i.initializer.as_ref().map(|t| json!({
                    "tid": t.tid,
                    "name": t.name,
                    "vthread_id": t.vthread,
                })),
            })
        })
        .collect()
}

/// Releasing threads with how many waits each ended, most first.
fn released_by(model: &Model, by: &std::collections::BTreeMap<u32, u64>) -> Vec<Value> {
    let mut by: Vec<(&u32, &u64)> = by.iter().collect();
    by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    by.into_iter()
        .map(|(tid, n)| json!({ "tid": tid, "name": model.thread_name(*tid), "events": n }))
        .collect()
}

/// A lock's owner: `{tid, name, vthread_id, java_id, state}`.
fn owner_json(o: &crate::events::BlockerOwner) -> Value {
    json!({
        "tid": o.tid,
        "name": o.name,
        "vthread_id": o.virtual_thread.then_some(o.java_id),
        "java_id": o.java_id,
        "state": crate::analysis::locks::owner_state(o),
    })
}

/// Virtual threads' waits off their carriers (`record --vthread-waits`): null when they were
/// not traced. Waits of at least `min_wait_ns` are exact, one by one; shorter ones only
/// counted. The lock rows (`locks[]`, kind `vthread`) and `sites` are made of the exact ones.
fn vthread_waits_json(model: &crate::model::Model) -> Value {
    let Some(sums) = &model.vthread_wait_sums else {
        return Value::Null;
    };
    let (open, waits): (Vec<_>, Vec<_>) = model.vthread_waits.iter().partition(|w| w.unfinished);
    let sites: Vec<Value> = crate::analysis::unmounted::other_waits(model)
        .into_iter()
        .take(20)
        .map(|site| {
            json!({
                "operation": site.operation.as_str(),
                "frames": site.frames,
                "waits": site.waits,
                "wait_ns": site.wait_ns,
                "max_wait_ns": site.max_wait_ns,
            })
        })
        .collect();
    json!({
        "min_wait_ns": sums.min_wait_ns,
        "waits": waits.len(),
        "wait_ns": waits.iter().map(|w| w.duration_ns()).fold(0u64, u64::saturating_add),
        "waiting_at_end": open.len(),
        "unmounts": sums.unmounts,
        "short_waits": sums.short_waits,
        "short_wait_ns": sums.short_wait_ns,
        "unmatched": sums.unmatched,
        "stacks_skipped": sums.stacks_skipped,
        "sites": sites,
    })
}
