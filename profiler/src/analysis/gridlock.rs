//! Gridlocks: starvation whose carriers are pinned waiting for a `java.util.concurrent` lock
//! owned by a virtual thread that is not mounted. That owner needs a carrier to run and let go,
//! and every carrier waits for it: the pool stalls until a wait times out, or for ever. The
//! classic JDK 21-23 failure (a lock taken inside `synchronized` pins its waiter); JFR reports
//! the pinned parks and nothing of their cause, `jstack` sees no deadlock.

use std::collections::{BTreeMap, BTreeSet};

use super::pinning::PinnedEvent;
use super::stacks::{StackLabels, monitor_frames};
use super::starvation::Episode;
use crate::events::StackId;
use crate::model::{Model, add};

/// The gridlocks on one lock.
#[derive(Clone, Debug, PartialEq)]
pub struct Gridlock {
    /// The lock object (its address as the waiters blocked) and its class.
    pub object: u64,
    pub class: String,
    /// `Thread.threadId()` of the unmounted virtual threads that owned it.
    pub owners: BTreeSet<u64>,
    /// Starvation episodes it caused, their time in all, and the first one's start.
    pub episodes: u64,
    pub total_ns: u64,
    pub first_start_ns: u64,
    /// The carriers pinned waiting for it, and a waiter's Java stack.
    pub carriers: BTreeSet<u32>,
    pub java_stack: Option<StackId>,
    pub stack: StackLabels,
}

/// The gridlocks among `episodes` (in time order, disjoint), from the pinned waits that
/// overlap them, most time first.
pub fn gridlocks(model: &Model, episodes: &[Episode], pinned: &[PinnedEvent]) -> Vec<Gridlock> {
    // Pinned waits for a lock whose owner was read unmounted during the wait: few.
    let mut by_lock: BTreeMap<u64, Gridlock> = BTreeMap::new();
    let mut counted: BTreeSet<(u64, usize)> = BTreeSet::new();
    for p in pinned {
        let Some(readings) = model.park_blockers.get(&p.carrier) else {
            continue;
        };
        let Some((_, blocker, owner)) =
            readings.range(p.start_ns..=p.end_ns).find_map(|(at, b)| {
                let o = b.owner.as_ref()?;
                (o.virtual_thread && o.tid.is_none()).then_some((at, b, o))
            })
        else {
            continue;
        };
        // The episodes it overlaps: those that start before it ends and end after it starts.
        let first = episodes.partition_point(|e| e.end_ns <= p.start_ns);
        let overlapping = episodes[first..]
            .iter()
            .enumerate()
            .take_while(|(_, e)| e.start_ns < p.end_ns);
        let entry = by_lock.entry(blocker.object).or_insert_with(|| Gridlock {
            object: blocker.object,
            class: blocker.class.clone(),
            owners: BTreeSet::new(),
            episodes: 0,
            total_ns: 0,
            first_start_ns: u64::MAX,
            carriers: BTreeSet::new(),
            java_stack: None,
            stack: StackLabels::default(),
        });
        let mut any = false;
        for (i, e) in overlapping {
            any = true;
            if counted.insert((blocker.object, first + i)) {
                entry.episodes += 1;
                add(&mut entry.total_ns, e.end_ns.saturating_sub(e.start_ns));
                entry.first_start_ns = entry.first_start_ns.min(e.start_ns);
            }
        }
        if any {
            entry.owners.insert(owner.java_id);
            entry.carriers.insert(p.carrier);
            if entry.java_stack.is_none() {
                entry.java_stack = p.java_stack;
            }
        }
    }
    let mut out: Vec<Gridlock> = by_lock.into_values().filter(|g| g.episodes > 0).collect();
    for g in &mut out {
        if let Some(frames) = g.java_stack.and_then(|id| model.stacks.get(&id)) {
            let frames: Vec<&crate::events::Frame> = frames.iter().collect();
            g.stack = StackLabels::new(&frames, monitor_frames(&frames));
        }
    }
    out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.object.cmp(&b.object)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::classify::{Operation, Reason};
    use crate::events::{BlockerOwner, ParkBlocker};
    use crate::model::intake::hostile;

    const MS: u64 = 1_000_000;

    fn pinned(carrier: u32, start: u64, end: u64) -> PinnedEvent {
        PinnedEvent {
            carrier,
            vthread: 40 + carrier as u64,
            start_ns: start * MS,
            end_ns: end * MS,
            blocked_ns: (end - start) * MS,
            reason: Reason::Monitor,
            operation: Operation::Park,
            kernel_stack: None,
            user_stack: None,
            java_stack: None,
            monitor: None,
        }
    }

    fn read(model: &mut Model, tid: u32, at: u64, mounted_on: Option<u32>) {
        let blocker = ParkBlocker {
            object: 0x1000,
            class: "java.util.concurrent.locks.ReentrantLock$NonfairSync".into(),
            ownable: true,
            owner: Some(BlockerOwner {
                java_id: 31,
                name: None,
                virtual_thread: true,
                tid: mounted_on,
            }),
        };
        model
            .park_blockers
            .entry(tid)
            .or_default()
            .insert(at * MS, blocker);
    }

    #[test]
    fn carriers_waiting_for_an_unmounted_owner_are_a_gridlock_and_a_mounted_one_is_not() {
        let mut model = Model::new(&hostile::header(0));
        let episodes = [
            Episode {
                start_ns: 10 * MS,
                end_ns: 200 * MS,
                blocked_carriers: 2,
                carriers: 2,
                queued_max: None,
                cause: crate::analysis::starvation::Cause::Pinned,
            },
            Episode {
                start_ns: 300 * MS,
                end_ns: 350 * MS,
                blocked_carriers: 2,
                carriers: 2,
                queued_max: None,
                cause: crate::analysis::starvation::Cause::Pinned,
            },
        ];
        let events = [pinned(1, 5, 210), pinned(2, 10, 205), pinned(1, 295, 360)];
        read(&mut model, 1, 50, None);
        read(&mut model, 2, 60, None);
        // The second episode's owner was mounted (on another carrier): it could let go.
        read(&mut model, 1, 320, Some(9));
        let found = gridlocks(&model, &episodes, &events);
        assert_eq!(found.len(), 1, "{found:#?}");
        let g = &found[0];
        assert_eq!((g.object, g.episodes, g.total_ns), (0x1000, 1, 190 * MS));
        assert_eq!(g.owners, [31].into());
        assert_eq!(g.carriers, [1, 2].into());
        assert_eq!(g.first_start_ns, 10 * MS);
    }
}
