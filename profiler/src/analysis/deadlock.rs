//! Deadlocks: threads stuck to the end of the window each waiting for a lock (a monitor, or a
//! `java.util.concurrent` ownable lock) whose owner, as read during the wait, is the next
//! thread of a cycle. Such waits never end on their own.

use std::collections::{BTreeMap, BTreeSet};

use crate::events::{BlockerOwner, StackId};
use crate::model::Model;

/// A thread off CPU for 95% of the window's last second, and still at its end, can be stuck.
const STUCK_NS: u64 = 1_000_000_000;
/// A thread that ran no longer than this between two waits only looked again.
const LOOK_NS: u64 = 10_000_000;
/// A wait that ended this close to the window's end was still under way.
const END_SLACK_NS: u64 = 5_000_000;

/// One thread of a deadlock: what it waits for, and who holds that.
#[derive(Clone, Debug, PartialEq)]
pub struct Stuck {
    /// The OS thread; for a virtual thread waiting unmounted, the carrier it left.
    pub tid: u32,
    /// A virtual thread waiting unmounted (`record --vthread-waits`), by its id.
    pub vthread: Option<u64>,
    /// What it waits for: "a pkg.Class monitor", "a pkg.Sync".
    pub waits_for: String,
    pub owner: BlockerOwner,
    /// Its wait's start (monotonic ns) and Java stack.
    pub since_ns: u64,
    pub java_stack: Option<StackId>,
}

/// A cycle of threads, each waiting for what the next one holds, starting with the lowest tid.
#[derive(Clone, Debug, PartialEq)]
pub struct Deadlock {
    pub threads: Vec<Stuck>,
}

/// The deadlocks among the waits still under way at the end of the window.
pub fn deadlocks(model: &Model) -> Vec<Deadlock> {
    let end = model.end_mono_ns;
    let from = end.saturating_sub(STUCK_NS);
    if end.saturating_sub(model.start_mono_ns) < STUCK_NS {
        return Vec::new();
    }
    // Per thread: its off-CPU time in the last STUCK_NS, the end of its last wait, and where
    // the first wait that reaches into that span began. (A thread waiting to enter a monitor
    // on JDK 21 wakes now and then to look again: many waits, nearly no running.)
    let mut spans: BTreeMap<u32, (u64, u64, u64)> = BTreeMap::new();
    for w in &model.off_cpu {
        if w.end_ns <= from {
            continue;
        }
        let e = spans.entry(w.tid).or_insert((0, 0, u64::MAX));
        e.0 =
            e.0.saturating_add(w.end_ns.min(end).saturating_sub(w.start_ns.max(from)));
        e.1 = e.1.max(w.end_ns);
        e.2 = e.2.min(w.start_ns);
    }
    spans.retain(|_, &mut (off, last_end, _)| {
        last_end.saturating_add(END_SLACK_NS) >= end && off.saturating_mul(100) >= STUCK_NS * 95
    });
    // Since when each has been stuck: back from the end, its waits with no more than a
    // look between them.
    let mut waits: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    for w in &model.off_cpu {
        if spans.contains_key(&w.tid) {
            waits.entry(w.tid).or_default().push((w.start_ns, w.end_ns));
        }
    }
    for (tid, list) in &mut waits {
        list.sort_unstable();
        let mut since = list.last().map_or(end, |w| w.0);
        for pair in list.windows(2).rev() {
            if pair[1].0.saturating_sub(pair[0].1) > LOOK_NS {
                break;
            }
            since = pair[0].0;
        }
        if let Some(span) = spans.get_mut(tid) {
            span.2 = since;
        }
    }
    let mut stuck: BTreeMap<u32, Stuck> = BTreeMap::new();
    for (&tid, &(_, _, since)) in &spans {
        // The monitor it waited to enter, or what it parked on, as last read meanwhile.
        let monitor = model
            .monitor_owners
            .get(&tid)
            .and_then(|seen| seen.range(since..=end).next_back())
            .map(|(_, (m, owner))| {
                let class = model
                    .monitor_classes
                    .get(m)
                    .and_then(|seen| seen.range(..=end).next_back())
                    .map_or("an object's".to_string(), |(_, c)| format!("a {c}"));
                (format!("{class} monitor"), owner.clone())
            });
        let found = monitor.or_else(|| {
            model
                .park_blocker_reading(tid, since, end)
                .and_then(|(_, b)| Some((format!("a {}", b.class), b.owner.clone()?)))
        });
        let Some((waits_for, owner)) = found else {
            continue;
        };
        stuck.insert(
            tid,
            Stuck {
                tid,
                vthread: None,
                waits_for,
                owner,
                since_ns: since,
                java_stack: model.java_stack_within(tid, since, end),
            },
        );
    }
    // Each stuck thread waits for one owner: follow the owners from each, and a walk that
    // comes back to where it began is a cycle (found once, from its lowest tid).
    let mut out = Vec::new();
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    for &start in stuck.keys() {
        if seen.contains(&start) {
            continue;
        }
        let mut path = vec![start];
        let mut at = start;
        while let Some(next) = stuck.get(&at).and_then(|s| s.owner.tid) {
            if next == start {
                if path.iter().all(|t| *t >= start) {
                    seen.extend(path.iter().copied());
                    out.push(Deadlock {
                        threads: path.iter().map(|t| stuck[t].clone()).collect(),
                    });
                }
                break;
            }
            if path.contains(&next) || path.len() > stuck.len() {
                break; // a cycle that does not include `start`: found from its own
            }
            path.push(next);
            at = next;
        }
    }
    out.extend(unmounted_deadlocks(model));
    out
}

/// The deadlocks among virtual threads waiting unmounted to the end (for a lock or, on JDK
/// 24+, a monitor whose owner, read as the wait began, is the next virtual thread of a
/// cycle). They block no OS thread: only `record --vthread-waits` sees them.
fn unmounted_deadlocks(model: &Model) -> Vec<Deadlock> {
    let end = model.end_mono_ns;
    let mut stuck: BTreeMap<u64, Stuck> = BTreeMap::new();
    for w in model.vthread_waits.iter().filter(|w| w.unfinished) {
        let Some(owner) = w.owner_id.filter(|&o| o != w.vthread_id) else {
            continue;
        };
        if end.saturating_sub(w.start_ns) < STUCK_NS {
            continue;
        }
        let waits_for = match (&w.blocker, w.monitor) {
            (Some(b), _) => format!("a {}", b.class),
            (None, Some(m)) => format!(
                "a {} monitor",
                model.monitor_class(m, w.start_ns).unwrap_or("an object's")
            ),
            (None, None) => continue,
        };
        stuck.insert(
            w.vthread_id,
            Stuck {
                tid: w.unmount_tid,
                vthread: Some(w.vthread_id),
                waits_for,
                owner: BlockerOwner {
                    java_id: owner,
                    name: None,
                    virtual_thread: true,
                    tid: None,
                },
                since_ns: w.start_ns,
                java_stack: w.stack,
            },
        );
    }
    let mut out = Vec::new();
    let mut seen: BTreeSet<u64> = BTreeSet::new();
    for &start in stuck.keys() {
        if seen.contains(&start) {
            continue;
        }
        let mut path = vec![start];
        let mut at = start;
        while let Some(next) = stuck.get(&at).map(|s| s.owner.java_id) {
            if next == start {
                if path.iter().all(|v| *v >= start) {
                    seen.extend(path.iter().copied());
                    out.push(Deadlock {
                        threads: path.iter().map(|v| stuck[v].clone()).collect(),
                    });
                }
                break;
            }
            if path.contains(&next) || path.len() > stuck.len() {
                break;
            }
            path.push(next);
            at = next;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Wait;
    use crate::model::intake::hostile;
    use crate::model::tests::parked;

    const MS: u64 = 1_000_000;

    fn owner(tid: u32) -> BlockerOwner {
        BlockerOwner {
            java_id: 100 + tid as u64,
            name: Some(format!("t{tid}")),
            virtual_thread: false,
            tid: Some(tid),
        }
    }

    /// Threads 1 and 2 wait for monitors the other holds to the end; 3 waits for one 1 holds
    /// (stuck behind the deadlock, not in it); 4 waited for 1's monitor and got it.
    #[test]
    fn a_cycle_of_owners_to_the_end_is_a_deadlock_and_its_bystanders_are_not() {
        let mut model = Model::new(&hostile::header(0));
        model.start_mono_ns = 0;
        model.end_mono_ns = 3_000 * MS;
        let entering = |tid: u32, start: u64, ms: u64, monitor: u64| {
            let mut o = parked(tid, start, ms, None);
            if let Some(java) = &mut o.java {
                java.pending_monitor = Some(monitor);
            }
            Wait::from(o)
        };
        model.off_cpu = vec![
            entering(1, 0, 3_000, 0xb),
            entering(2, 10, 2_990, 0xa),
            entering(3, 20, 2_980, 0xa),
            entering(4, 0, 1_500, 0xa),
        ];
        for (waiter, monitor, holder) in [(1, 0xb, 2), (2, 0xa, 1), (3, 0xa, 1), (4, 0xa, 1)] {
            let read = (monitor, owner(holder));
            model
                .monitor_owners
                .entry(waiter)
                .or_default()
                .insert(100 * MS, read);
        }
        model
            .monitor_classes
            .entry(0xa)
            .or_default()
            .insert(0, "Left".into());
        let found = deadlocks(&model);
        assert_eq!(found.len(), 1, "{found:#?}");
        let tids: Vec<u32> = found[0].threads.iter().map(|s| s.tid).collect();
        assert_eq!(tids, [1, 2]);
        assert_eq!(found[0].threads[1].waits_for, "a Left monitor");
    }
}
