//! Each thread's time over the window: running, waiting for a CPU, idle, blocked, pinned;
//! from the scheduler's accounts and the waits seen, within the thread's life.

use std::collections::{BTreeMap, HashSet};

use super::classify::{StackMarks, Use, classify_with};
use super::kinds::ThreadRole;
use crate::model::{Model, Wait, add, total};

/// One thread's time over the window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadRow {
    pub tid: u32,
    pub name: String,
    pub role: ThreadRole,
    pub running_ns: u64,
    /// Parked with nothing to do (carriers only).
    pub idle_ns: u64,
    /// Off CPU waiting for something (sleep, lock, I/O).
    pub blocked_ns: u64,
    pub pinned_ns: u64,
    /// Runnable but waiting for a CPU: in the run queue, or (on a virtual machine) on a
    /// virtual CPU the host did not run meanwhile (steal).
    pub preempted_ns: u64,
    /// Off-CPU intervals, recorded one by one or summed in the kernel.
    pub intervals: u64,
    /// Time spent contending on kernel locks (a kind of wait; part of blocked or running).
    pub kernel_lock_ns: u64,
    /// Of those recorded one by one, the ones spent waiting (not preempted).
    pub blocked_intervals: u64,
}

impl ThreadRow {
    /// A row of `tid`'s, its times all zero.
    pub fn of(model: &Model, tid: u32) -> Self {
        Self {
            tid,
            name: model.thread_name(tid),
            role: if model.is_carrier(tid) {
                ThreadRole::Carrier
            } else {
                ThreadRole::Other
            },
            ..Default::default()
        }
    }
}

/// Blocked time summed over threads (thread-seconds, not wall time).
pub fn blocked_total_ns(threads: &[ThreadRow]) -> u64 {
    total(threads.iter().map(|t| t.blocked_ns))
}

/// Every thread seen, most blocked or pinned first. A carrier's wait still under way counts for
/// what it is (pinned, idle, blocked) as far as it has gone: a live view would otherwise
/// know it only as unexplained time off CPU until it ends.
pub fn threads(model: &Model) -> Vec<ThreadRow> {
    threads_of(model, &super::classify::classify_all(model))
}

/// `threads`, from `classify_all`'s answers for the model's intervals.
pub fn threads_of(model: &Model, classes: &[Option<Use>]) -> Vec<ThreadRow> {
    let mut rows: BTreeMap<u32, ThreadRow> = BTreeMap::new();
    let open = open_intervals(model);
    // A few waits under way read their own stacks (all of them, every refresh of a live
    // view, would cost more than the rest).
    let marks = StackMarks::default();
    let closed = model.off_cpu.iter().zip(classes.iter().copied());
    let still_open = open.iter().map(|o| (o, classify_with(model, o, &marks)));
    for (o, used) in closed.chain(still_open) {
        let d = model.lived_ns(o);
        let r = row(model, &mut rows, o.tid);
        r.intervals += 1;
        r.blocked_intervals += u64::from(used.is_some());
        match used {
            None => add(&mut r.preempted_ns, d),
            Some(Use::Idle) => add(&mut r.idle_ns, d),
            Some(Use::Pinned(..)) => add(&mut r.pinned_ns, d),
            Some(Use::Blocked | Use::BlockedMounted) => add(&mut r.blocked_ns, d),
        }
    }
    for (&tid, f) in &model.folded {
        let r = row(model, &mut rows, tid);
        add(&mut r.intervals, f.intervals);
        add(&mut r.blocked_intervals, f.blocked_intervals);
        add(&mut r.idle_ns, f.idle_ns);
        add(&mut r.blocked_ns, f.blocked_ns);
        add(&mut r.pinned_ns, f.pinned_ns);
        add(&mut r.preempted_ns, f.preempted_ns);
    }
    for s in model.short.values() {
        let r = row(model, &mut rows, s.tid);
        add(&mut r.intervals, s.count);
        add(&mut r.preempted_ns, s.preempted_ns);
        add(&mut r.blocked_ns, s.total_ns.saturating_sub(s.preempted_ns));
    }
    // The target's threads have waits, a scheduler account or an exit; a name alone is no
    // thread of the target's (a waker of another process, a forked child, is named too).
    for &tid in model.cpu_first.keys().chain(model.exits.keys()) {
        row(model, &mut rows, tid);
    }
    if let Some(only) = &model.only_threads {
        rows.retain(|tid, _| only.contains(tid));
    }
    let mut rows: Vec<ThreadRow> = rows
        .into_values()
        .map(|mut r| {
            account(model, &mut r);
            r.kernel_lock_ns = model.kernel_lock_threads.get(&r.tid).map_or(0, |k| k.1);
            r
        })
        .collect();
    // A pinned carrier is blocked with a virtual thread on it: as much in the way.
    rows.sort_by(|a, b| {
        (b.blocked_ns + b.pinned_ns)
            .cmp(&(a.blocked_ns + a.pinned_ns))
            .then(a.tid.cmp(&b.tid))
    });
    rows
}

/// Running and run-queue time come from the scheduler's own account: its last one (at
/// the thread's exit, else the latest snapshot) less its first in the window. Blocked time
/// is the rest of the thread's time between the two, less its idle and pinned time (its
/// waits that began before attach count too; a wake-up's wait for a CPU is counted once,
/// as run-queue time), less what the host took from it (see `count_steal_as_waiting`), which is a wait
/// for a CPU like the run queue's. A thread born in the window has its whole life in its
/// account; one whose account is not known runs for what is left of its life. Whatever the
/// figures, their sum is at most the thread's life in the window.
fn account(model: &Model, r: &mut ThreadRow) {
    let (from, to) = model.life(r.tid);
    // Every wait seen, of whatever kind, before the account's figures replace the sums.
    let seen_off_cpu = total([r.preempted_ns, r.idle_ns, r.pinned_ns, r.blocked_ns]);
    let first = model.cpu_first.get(&r.tid);
    let born = model.births.get(&r.tid).copied();
    // (A thread seen born is not, even if the first snapshot was read after its birth.)
    let there_at_start =
        born.is_none() && first.is_some_and(|(t, _)| Some(*t) == model.cpu_start_ns);
    let last = model
        .exits
        .get(&r.tid)
        .and_then(|(t, account)| Some((*t, (*account)?)))
        .or_else(|| model.cpu_last.get(&r.tid).copied());
    match (first, last) {
        (Some((t0, first)), Some((t1, last))) if there_at_start && t1 > *t0 => {
            r.running_ns = last.run_ns.saturating_sub(first.run_ns);
            r.preempted_ns = last.wait_ns.saturating_sub(first.wait_ns);
            r.blocked_ns = (t1 - t0).saturating_sub(total([
                r.running_ns,
                r.preempted_ns,
                r.idle_ns,
                r.pinned_ns,
            ]));
            count_steal_as_waiting(model, r, (*t0, t1), seen_off_cpu);
        }
        (_, Some((t1, last))) if !there_at_start => {
            r.running_ns = last.run_ns;
            r.preempted_ns = last.wait_ns;
            // Born in the window: every wait was seen, and its life is known.
            if let Some(born) = born {
                r.blocked_ns = t1.saturating_sub(born).saturating_sub(total([
                    r.running_ns,
                    r.preempted_ns,
                    r.idle_ns,
                    r.pinned_ns,
                ]));
                count_steal_as_waiting(model, r, (born, t1), seen_off_cpu);
            }
        }
        // Without an account, it ran for what is left of its life, if its life is known:
        // born in the window, or there when it opened (a thread only named, say by the
        // JVM's list read before attach, may have ended before), and it was seen in it
        // (a birth alone, with its end before the window opened, says nothing of it).
        _ if (born.is_some() || there_at_start || model.cpu_start_ns.is_none())
            && r.intervals > 0 =>
        {
            r.running_ns = (to - from).saturating_sub(total([
                r.blocked_ns,
                r.preempted_ns,
                r.idle_ns,
                r.pinned_ns,
            ]));
        }
        _ => {}
    }
    // Beyond its life only by what was counted twice (a wait for a CPU after a wake-up
    // is also the end of an idle or pinned interval): taken from blocked, then run-queue.
    let mut excess = total([
        r.running_ns,
        r.preempted_ns,
        r.blocked_ns,
        r.idle_ns,
        r.pinned_ns,
    ])
    .saturating_sub(to - from);
    for part in [&mut r.blocked_ns, &mut r.preempted_ns, &mut r.running_ns] {
        let cut = excess.min(*part);
        *part -= cut;
        excess -= cut;
    }
}

/// Moves from blocked to waiting for a CPU what the account of a thread's span leaves
/// unexplained and is no wait: time the thread was on a CPU that the scheduler counts
/// neither as run time nor as run-queue time. On a virtual machine that is the time the
/// host took the virtual CPU from the running thread (steal: on a busy host, a tenth of a
/// running thread's time or more). It is a wait for a CPU, one level down.
///
/// Unexplained is what neither the run time nor a wait seen (run-queue waits lie inside
/// those) covers. Before the thread's first wait recorded one by one it may also hold a
/// wait under way at attach that was never seen, or a wait for a CPU that began before its
/// first switch (after its birth, or before attach): that much stays as it was. All of it
/// stays when events were lost, since a lost wait can lie anywhere.
fn count_steal_as_waiting(
    model: &Model,
    r: &mut ThreadRow,
    (from, to): (u64, u64),
    seen_off_cpu: u64,
) {
    if model.counters.lost() > 0 {
        return;
    }
    let span = to.saturating_sub(from);
    let unexplained = span.saturating_sub(total([r.running_ns, seen_off_cpu]));
    let before_first_wait = model
        .first_wait_ns
        .get(&r.tid)
        .map_or(span, |first| first.saturating_sub(from));
    let stolen = unexplained
        .saturating_sub(before_first_wait)
        .min(r.blocked_ns);
    r.blocked_ns -= stolen;
    r.preempted_ns += stolen;
}

fn row<'a>(model: &Model, rows: &'a mut BTreeMap<u32, ThreadRow>, tid: u32) -> &'a mut ThreadRow {
    rows.entry(tid).or_insert_with(|| ThreadRow::of(model, tid))
}

/// The carriers' waits still under way at the latest checkpoint, as intervals up to it;
/// those whose interval has come in since (they ended) are left out.
pub(crate) fn open_intervals(model: &Model) -> Vec<Wait> {
    let Some((time_ns, waits)) = &model.open_waits else {
        return Vec::new();
    };
    let keys: HashSet<(u32, u64)> = waits.iter().map(|w| (w.tid, w.start_ns)).collect();
    // Only an interval that ended after the checkpoint can close one of its waits, and
    // intervals come in about the order they end (a second of slack for the drain).
    let since = time_ns.saturating_sub(1_000_000_000);
    let ended: HashSet<(u32, u64)> = if keys.is_empty() {
        HashSet::new()
    } else {
        model
            .off_cpu
            .iter()
            .rev()
            .take_while(|o| o.end_ns >= since)
            .map(|o| (o.tid, o.start_ns))
            .filter(|k| keys.contains(k))
            .collect()
    };
    waits
        .iter()
        .filter(|w| !ended.contains(&(w.tid, w.start_ns)))
        .map(|w| {
            Wait::from(crate::events::OffCpu {
                tid: w.tid,
                start_ns: w.start_ns,
                end_ns: *time_ns,
                state: w.state,
                kernel_stack: None,
                user_stack: None,
                waker_tid: None,
                cpu: 0,
                java: w.java.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analysis;
    use crate::events::{Event, Frame, FrameKind, OffCpu, OffCpuState, ThreadCpu};
    use crate::model::tests::{interval, make_carrier, parked};

    const MS: u64 = 1_000_000;

    fn account(tid: u32, run_ms: u64, wait_ms: u64) -> ThreadCpu {
        ThreadCpu {
            tid,
            run_ns: run_ms * MS,
            wait_ns: wait_ms * MS,
        }
    }

    #[test]
    fn a_thread_born_but_never_seen_in_the_window_runs_nothing() {
        // Born and gone as capture began: its end without an account, no wait, no name.
        let mut model = window_of_15s();
        model.apply(&Event::ThreadStart { tid: 9, time_ns: 0 });
        model.apply(&Event::ThreadExit {
            tid: 9,
            time_ns: 15_000 * MS,
            account: None,
        });
        let running = threads(&model)
            .into_iter()
            .find(|r| r.tid == 9)
            .map_or(0, |r| r.running_ns);
        assert_eq!(running, 0);
    }

    /// A 15 s window with thread 1 there all along (snapshots at its start and end).
    fn window_of_15s() -> Model {
        let mut model = Model::default();
        for (time_ms, run_ms) in [(0, 100), (15_000, 600)] {
            model.apply(&Event::ThreadCpu {
                time_ns: time_ms * MS,
                threads: vec![account(1, run_ms, 0)],
            });
        }
        model.end_mono_ns = 15_000 * MS;
        model
    }

    fn row(model: &Model, tid: u32) -> ThreadRow {
        let rows = threads(model);
        rows.into_iter().find(|r| r.tid == tid).unwrap()
    }

    fn life_total(r: &ThreadRow) -> u64 {
        r.running_ns + r.preempted_ns + r.blocked_ns + r.idle_ns + r.pinned_ns
    }

    #[test]
    fn a_short_lived_thread_counts_its_life_not_the_window() {
        let mut model = window_of_15s();
        // Born at 1 s, 25 ms of life: 10 ms on a CPU, 2 ms waiting for one, 8 ms asleep.
        model.apply(&Event::ThreadStart {
            tid: 9,
            time_ns: 1000 * MS,
        });
        model.apply(&Event::OffCpu(interval(9, 1012, 8, OffCpuState::Sleeping)));
        model.apply(&Event::ThreadExit {
            tid: 9,
            time_ns: 1025 * MS,
            account: Some(account(9, 10, 2)),
        });
        let r = row(&model, 9);
        assert_eq!((r.running_ns, r.preempted_ns), (10 * MS, 2 * MS));
        // The rest of its life, off CPU not waiting for one (its sleep and its start).
        assert_eq!(r.blocked_ns, 13 * MS);
        assert_eq!(life_total(&r), 25 * MS);
        assert_eq!(model.life(9), (1000 * MS, 1025 * MS));

        // Without its account (the kernel's layout unknown), it runs what is left of its life.
        model.exits.insert(9, (1025 * MS, None));
        let r = row(&model, 9);
        assert_eq!((r.running_ns, r.blocked_ns), (17 * MS, 8 * MS));
        assert_eq!(life_total(&r), 25 * MS);
    }

    /// A 4 s window in which thread 4 sleeps 50 ms of every 100 ms from `first_sleep_ms` on,
    /// and runs the rest: 2 s on a CPU, of which the scheduler's account says 1.8 s, as on
    /// a virtual machine whose host took a tenth of the CPU's time (steal). Before its first
    /// sleep seen it was asleep (a wait under way at attach, not seen).
    fn stolen_from(first_sleep_ms: u64) -> Model {
        let mut model = Model::default();
        let sleeps = (first_sleep_ms..4000).step_by(100);
        let asleep_ms = 50 * sleeps.clone().count() as u64 + first_sleep_ms;
        // Its wake-ups waited 10 ms in all for a CPU, inside its sleeps.
        let on_cpu_ms = 4000 - asleep_ms;
        for (time_ms, run_ms, wait_ms) in [(0, 100, 0), (4000, 100 + on_cpu_ms * 9 / 10, 10)] {
            model.apply(&Event::ThreadCpu {
                time_ns: time_ms * MS,
                threads: vec![account(4, run_ms, wait_ms)],
            });
        }
        for start in sleeps {
            model.apply(&Event::OffCpu(interval(
                4,
                start,
                50,
                OffCpuState::Sleeping,
            )));
        }
        model.end_mono_ns = 4000 * MS;
        model
    }

    #[test]
    fn time_the_host_took_from_a_running_thread_is_a_wait_for_a_cpu_not_blocked() {
        // Seen asleep from the start: every wait was seen, so the 200 ms the account leaves
        // unexplained were spent on a CPU the host did not run: waiting for a CPU.
        let r = row(&stolen_from(0), 4);
        assert_eq!((r.running_ns, r.preempted_ns), (1800 * MS, 210 * MS));
        assert_eq!(r.blocked_ns, (2000 - 10) * MS);
        assert_eq!(life_total(&r), 4000 * MS);

        // Asleep unseen for its first second: that second stays blocked, as before the first
        // wait seen the unexplained time may be a wait; after it, what the host took runs.
        let r = row(&stolen_from(1000), 4);
        assert_eq!((r.running_ns, r.preempted_ns), (1350 * MS, 160 * MS));
        assert_eq!(r.blocked_ns, (2500 - 10) * MS);
        assert_eq!(life_total(&r), 4000 * MS);

        // With events lost, a lost wait can lie anywhere: the unexplained time is blocked.
        let mut model = stolen_from(0);
        model.counters.lost_events = 1;
        let r = row(&model, 4);
        assert_eq!((r.running_ns, r.preempted_ns), (1800 * MS, 10 * MS));
        assert_eq!(r.blocked_ns, (2200 - 10) * MS);
    }

    #[test]
    fn a_thread_there_at_attach_ends_at_its_exit() {
        let mut model = window_of_15s();
        model.apply(&Event::ThreadCpu {
            time_ns: 0,
            threads: vec![account(2, 50, 1)],
        });
        // It sleeps from 3 s on, and exits at 4 s; its final account says 300 ms more on CPU.
        model.apply(&Event::OffCpu(interval(
            2,
            3000,
            1000,
            OffCpuState::Sleeping,
        )));
        model.apply(&Event::ThreadExit {
            tid: 2,
            time_ns: 4000 * MS,
            account: Some(account(2, 350, 11)),
        });
        let r = row(&model, 2);
        assert_eq!((r.running_ns, r.preempted_ns), (300 * MS, 10 * MS));
        assert_eq!(r.blocked_ns, (4000 - 310) * MS);
        assert_eq!(life_total(&r), 4000 * MS);
    }

    #[test]
    fn the_wait_a_thread_died_in_is_not_blocking() {
        // A recording from before threads' ends were sent: the dead thread's last switch
        // (in do_task_dead) stays open until the window's end.
        let mut model = window_of_15s();
        let kernel = |name: &str| Frame {
            kind: FrameKind::Kernel,
            addr: 0,
            name: Some(name.into()),
            module: None,
            holds_monitor: false,
            line: None,
        };
        model.apply(&Event::Stack(crate::events::Stack {
            id: 5,
            frames: vec![
                kernel("__schedule"),
                kernel("do_task_dead"),
                kernel("do_exit"),
            ],
        }));
        model.apply(&Event::ThreadStart {
            tid: 3,
            time_ns: 2000 * MS,
        });
        model.apply(&Event::OffCpu(OffCpu {
            kernel_stack: Some(5),
            ..interval(3, 2020, 12_980, OffCpuState::Other)
        }));
        model.apply(&Event::OffCpu(interval(3, 2005, 10, OffCpuState::Sleeping)));
        let r = row(&model, 3);
        assert_eq!(model.life(3), (2000 * MS, 2020 * MS));
        // No account: it ran for what is left of its 20 ms.
        assert_eq!((r.blocked_ns, r.running_ns), (10 * MS, 10 * MS));
        assert!(
            Analysis::new(&model)
                .blocked_stacks()
                .to_vec()
                .iter()
                .all(|s| !s.stack.frames.iter().any(|f| f == "do_task_dead")),
            "no blocked stack ends in the thread's death"
        );
    }

    #[test]
    fn intervals_are_clipped_to_the_threads_life_and_its_times_to_its_length() {
        let mut model = window_of_15s();
        make_carrier(&mut model, 4);
        model.apply(&Event::ThreadStart {
            tid: 4,
            time_ns: 5000 * MS,
        });
        // An idle park that (damaged, or from another thread of the same id) runs past its
        // exit, and a run-queue wait its account counts again at the end of the park.
        model.apply(&Event::OffCpu(parked(4, 5010, 100, None)));
        model.apply(&Event::ThreadExit {
            tid: 4,
            time_ns: 5100 * MS,
            account: Some(account(4, 5, 6)),
        });
        let r = row(&model, 4);
        assert_eq!(r.idle_ns, 90 * MS, "clipped at its exit");
        assert_eq!(r.running_ns, 5 * MS);
        assert_eq!(life_total(&r), 100 * MS, "at most its life");
        assert_eq!(
            r.preempted_ns,
            5 * MS,
            "the wait counted twice is taken out"
        );

        // The live view's folding counts the same.
        let before = threads(&model);
        model.fold_settled(10_000 * MS);
        assert_eq!(threads(&model), before);
    }
}
