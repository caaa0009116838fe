//! The kernel's stack map, kept from filling up.
//!
//! `bpf_get_stackid` keeps each stack in a fixed-size map until user space deletes it; a
//! target with many distinct stacks (or an unlucky hash collision: the map refuses a second
//! stack in a bucket) would leave later waits without stacks for the rest of the recording.
//! So the recorder empties the map now and then (`Session::empty_stack_map`), and the
//! recording never uses the kernel's ids: each stack gets an id of the recording's own.
//!
//! Emptying races with the programs, which keep taking stacks, and events reach user space
//! late (a wait's stack is taken when it begins and sent when it ends). Without
//! `BPF_F_REUSE_STACKID` a bucket never changes while it holds a stack, so an event names
//! what its id held when it was taken:
//! - taken before an emptying deleted its id: what that emptying read there;
//! - taken as its id was being deleted (within `MARGIN_NS`): unknown (the id may have been
//!   deleted and taken by another stack in between), so the event goes without a stack, and
//!   that is counted;
//! - otherwise: what the map holds now.

use std::collections::{HashMap, VecDeque};

/// How long before and after an id's deletion a stack taken under that id counts as taken
/// during it: a program reads the time and takes its stacks in one run, microseconds apart.
pub(super) const MARGIN_NS: u64 = 2_000_000;

/// Ids of past emptyings remembered (about 250 bytes each); past this, the oldest emptying
/// is forgotten, and an event taken before it loses its stack (a wait, or a drain, behind by
/// that many distinct stacks).
const KEPT_IDS: usize = 1 << 16;

/// What a kernel stack id of an event stands for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Resolved {
    /// A stack already in the recording, by its id there.
    Known(u32),
    /// Not read yet: read the kernel's map now (then `named`).
    ReadMap,
    /// Read from the map before an emptying, not named yet (then `named_at`).
    Read { emptying: u64, addrs: Vec<u64> },
    /// Cannot be known: the event goes without a stack.
    Lost,
}

/// What an emptying found under one id, and when it deleted it.
#[derive(Clone, Debug)]
pub(super) struct Slot {
    pub(super) deleted_ns: u64,
    pub(super) held: Held,
}

#[derive(Clone, Debug)]
pub(super) enum Held {
    /// A stack the recording already has.
    Named(u32),
    /// Addresses read just before deletion, to name if an event asks for them.
    Read(Vec<u64>),
}

struct Emptying {
    /// Its sequence number.
    seq: u64,
    end_ns: u64,
    ids: HashMap<u32, Slot>,
}

#[derive(Default)]
pub(super) struct StackIds {
    /// Kernel ids read since the last emptying, with their ids in the recording.
    current: HashMap<u32, u32>,
    emptyings: VecDeque<Emptying>,
    /// Stacks taken before this are lost: an emptying after them was forgotten.
    horizon_ns: u64,
    next_seq: u64,
}

impl StackIds {
    /// The stack kernel id `id`, taken at `taken_ns`, stands for.
    pub(super) fn resolve(&mut self, id: u32, taken_ns: u64) -> Resolved {
        if taken_ns < self.horizon_ns {
            return Resolved::Lost;
        }
        for emptying in &self.emptyings {
            let Some(slot) = emptying.ids.get(&id) else {
                // Not deleted then: the bucket held the same stack on.
                continue;
            };
            if taken_ns.saturating_add(MARGIN_NS) < slot.deleted_ns {
                return match &slot.held {
                    Held::Named(rec) => Resolved::Known(*rec),
                    Held::Read(addrs) => Resolved::Read {
                        emptying: emptying.seq,
                        addrs: addrs.clone(),
                    },
                };
            }
            if taken_ns <= slot.deleted_ns.saturating_add(MARGIN_NS) {
                return Resolved::Lost;
            }
        }
        match self.current.get(&id) {
            Some(&rec) => Resolved::Known(rec),
            None => Resolved::ReadMap,
        }
    }

    /// Kernel id `id`, read from the map now, is stack `rec` of the recording.
    pub(super) fn named(&mut self, id: u32, rec: u32) {
        self.current.insert(id, rec);
    }

    /// What emptying `seq` read under `id` is stack `rec` of the recording.
    pub(super) fn named_at(&mut self, seq: u64, id: u32, rec: u32) {
        if let Some(slot) = self
            .emptyings
            .iter_mut()
            .find(|e| e.seq == seq)
            .and_then(|e| e.ids.get_mut(&id))
        {
            slot.held = Held::Named(rec);
        }
    }

    /// The recording id of kernel id `id` as read since the last emptying, if it was.
    pub(super) fn current(&self, id: u32) -> Option<u32> {
        self.current.get(&id).copied()
    }

    /// How many kernel ids were read since the last emptying.
    pub(super) fn read_since_emptied(&self) -> usize {
        self.current.len()
    }

    /// The map was emptied by `end_ns`, deleting `ids`.
    pub(super) fn emptied(&mut self, end_ns: u64, ids: HashMap<u32, Slot>) {
        self.current.clear();
        self.emptyings.push_back(Emptying {
            seq: self.next_seq,
            end_ns,
            ids,
        });
        self.next_seq += 1;
        while self.emptyings.len() > 1
            && self.emptyings.iter().map(|e| e.ids.len()).sum::<usize>() > KEPT_IDS
            && let Some(old) = self.emptyings.pop_front()
        {
            self.horizon_ns = old.end_ns.saturating_add(MARGIN_NS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn slot(deleted_ms: u64, held: Held) -> Slot {
        Slot {
            deleted_ns: deleted_ms * MS,
            held,
        }
    }

    #[test]
    fn an_id_names_what_it_held_when_the_stack_was_taken() {
        let mut ids = StackIds::default();
        assert_eq!(ids.resolve(7, 100 * MS), Resolved::ReadMap);
        ids.named(7, 1000);
        assert_eq!(ids.resolve(7, 150 * MS), Resolved::Known(1000));
        // Emptied at 200-210 ms: 7 (named) deleted at 201 ms, 9 (read then, never named)
        // at 209 ms.
        let deleted = HashMap::from([
            (7, slot(201, Held::Named(1000))),
            (9, slot(209, Held::Read(vec![1, 2]))),
        ]);
        ids.emptied(210 * MS, deleted);
        assert_eq!(ids.read_since_emptied(), 0);
        // Taken before: what it held then, however late the event.
        assert_eq!(ids.resolve(7, 150 * MS), Resolved::Known(1000));
        assert_eq!(
            ids.resolve(9, 205 * MS),
            Resolved::Read {
                emptying: 0,
                addrs: vec![1, 2]
            }
        );
        ids.named_at(0, 9, 1001);
        assert_eq!(ids.resolve(9, 150 * MS), Resolved::Known(1001));
        // Taken as its id was deleted: it may have been taken by another stack in between.
        assert_eq!(ids.resolve(7, 200 * MS), Resolved::Lost);
        assert_eq!(ids.resolve(7, 202 * MS), Resolved::Lost);
        // An id the emptying did not delete held the same stack all along.
        assert_eq!(ids.resolve(8, 201 * MS), Resolved::ReadMap);
        // Taken after its deletion: the map's own, read afresh.
        assert_eq!(ids.resolve(7, 205 * MS), Resolved::ReadMap);
        ids.named(7, 1002);
        assert_eq!(ids.resolve(7, 300 * MS), Resolved::Known(1002));
        // Still the first emptying's for a stack taken before it.
        assert_eq!(ids.resolve(7, 150 * MS), Resolved::Known(1000));
        // The next emptying deletes 7 again: what it held in between.
        ids.emptied(410 * MS, HashMap::from([(7, slot(400, Held::Named(1002)))]));
        assert_eq!(ids.resolve(7, 300 * MS), Resolved::Known(1002));
        assert_eq!(ids.resolve(7, 150 * MS), Resolved::Known(1000));
        assert_eq!(ids.resolve(7, 500 * MS), Resolved::ReadMap);
    }

    #[test]
    fn a_stack_taken_before_the_emptyings_remembered_is_lost() {
        let mut ids = StackIds::default();
        let many = |from: u32| {
            (from..from + KEPT_IDS as u32 / 2)
                .map(|id| (id, slot(1, Held::Named(id))))
                .collect()
        };
        for i in 1..=3 {
            ids.emptied(i * 1000 * MS + MS, many(i as u32 * 100_000));
        }
        assert_eq!(ids.resolve(1, 500 * MS), Resolved::Lost);
        assert_eq!(ids.resolve(1, 1500 * MS), Resolved::ReadMap);
    }
}
