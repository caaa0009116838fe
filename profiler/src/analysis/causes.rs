//! What the carriers waited on in each starvation episode: the lock, monitor, class
//! initialization or operation that most of their pinned time in it went to, with the lock's
//! owner where one was read.

use std::collections::HashMap;

use super::classify::{Operation, Reason};
use super::pinning::PinnedEvent;
use super::starvation::Episode;
use crate::events::BlockerOwner;
use crate::model::Model;

/// What a pinned wait waited on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitKind {
    /// A `java.util.concurrent` object (`Thread.parkBlocker`).
    Lock,
    /// Entering a contended `synchronized`.
    Monitor,
    /// Another thread's class initialization.
    ClassInit,
    /// A park with nothing to park on (a sleep, socket I/O).
    Park,
    ObjectWait,
    /// A system call from native code.
    Syscall,
    Other,
}

impl WaitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Monitor => "monitor",
            Self::ClassInit => "class_init",
            Self::Park => "park",
            Self::ObjectWait => "object_wait",
            Self::Syscall => "syscall",
            Self::Other => "other",
        }
    }
}

/// What most of an episode's pinned carrier time waited on.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitingOn {
    pub kind: WaitKind,
    /// The lock's, monitor's or initialized class, where known.
    pub class: Option<String>,
    /// A lock's owner as read during the waits.
    pub owner: Option<BlockerOwner>,
    /// Carrier time in the episode that went to it (ns).
    pub carrier_ns: u64,
}

/// For each of `episodes` (disjoint, in time order), what its pinned waits mostly waited on
/// (None: no pinned wait in it, only blocked carriers).
pub fn waiting_on(
    model: &Model,
    episodes: &[Episode],
    pinned: &[PinnedEvent],
) -> Vec<Option<WaitingOn>> {
    type Key = (WaitKind, Option<String>);
    let mut per: Vec<HashMap<Key, (u64, Option<BlockerOwner>)>> =
        vec![HashMap::new(); episodes.len()];
    for p in pinned {
        let first = episodes.partition_point(|e| e.end_ns <= p.start_ns);
        let mut overlapping = episodes[first..]
            .iter()
            .enumerate()
            .take_while(|(_, e)| e.start_ns < p.end_ns)
            .peekable();
        if overlapping.peek().is_none() {
            continue;
        }
        let (key, owner) = what(model, p);
        for (i, e) in overlapping {
            let ns = p
                .end_ns
                .min(e.end_ns)
                .saturating_sub(p.start_ns.max(e.start_ns));
            let slot = per[first + i].entry(key.clone()).or_insert((0, None));
            slot.0 = slot.0.saturating_add(ns);
            if owner.is_some() {
                slot.1.clone_from(&owner);
            }
        }
    }
    per.into_iter()
        .map(|m| {
            m.into_iter()
                .max_by(|a, b| a.1.0.cmp(&b.1.0).then_with(|| b.0.cmp(&a.0)))
                .map(|((kind, class), (carrier_ns, owner))| WaitingOn {
                    kind,
                    class,
                    owner,
                    carrier_ns,
                })
        })
        .collect()
}

fn what(model: &Model, p: &PinnedEvent) -> ((WaitKind, Option<String>), Option<BlockerOwner>) {
    if let Some((_, b)) = model.park_blocker_reading(p.carrier, p.start_ns, p.end_ns) {
        // An owner from any reading of the same object during the wait.
        let owner = model.park_blockers.get(&p.carrier).and_then(|seen| {
            seen.range(p.start_ns..=p.end_ns)
                .rev()
                .filter(|(_, r)| r.object == b.object)
                .find_map(|(_, r)| r.owner.clone())
        });
        return ((WaitKind::Lock, Some(b.class.clone())), owner);
    }
    let monitor = p.monitor;
    let kind = match (p.reason, p.operation) {
        (Reason::ClassInit, operation) => {
            // A waiter's class is its init lock's; the initializer's own waits (a sleep or
            // a query inside the static initializer, neither on the init lock) are under its
            // `<clinit>` frame. (A waiter inside another class's initializer waits for the
            // class of its lock, not for that one.)
            let on_the_lock = matches!(operation, Operation::ObjectWait | Operation::MonitorEnter);
            let class = monitor
                .and_then(|m| model.class_init_wait(m, p.start_ns, p.end_ns))
                .map(|w| w.class.clone())
                .or_else(|| (!on_the_lock).then(|| initializing(model, p)).flatten());
            return ((WaitKind::ClassInit, class), None);
        }
        (_, Operation::MonitorEnter) => {
            let class = monitor.and_then(|m| {
                model
                    .monitor_class_object(m, p.start_ns)
                    .map(|c| format!("class {c}"))
                    .or_else(|| model.monitor_class(m, p.start_ns).map(str::to_string))
            });
            return ((WaitKind::Monitor, class), None);
        }
        (_, Operation::Park) => WaitKind::Park,
        (_, Operation::ObjectWait) => WaitKind::ObjectWait,
        (_, Operation::Syscall) => WaitKind::Syscall,
        (_, Operation::Other) => WaitKind::Other,
    };
    ((kind, None), None)
}

/// The class whose static initializer a wait is inside: its innermost `<clinit>` frame's.
fn initializing(model: &Model, p: &PinnedEvent) -> Option<String> {
    model
        .stacks
        .get(&p.java_stack?)?
        .iter()
        .find_map(|f| f.name.as_deref()?.strip_suffix(".<clinit>"))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::ParkBlocker;
    use crate::model::intake::hostile;

    const MS: u64 = 1_000_000;

    fn pinned(carrier: u32, start: u64, end: u64, operation: Operation) -> PinnedEvent {
        PinnedEvent {
            carrier,
            vthread: 7,
            start_ns: start * MS,
            end_ns: end * MS,
            blocked_ns: (end - start) * MS,
            reason: Reason::Monitor,
            operation,
            kernel_stack: None,
            user_stack: None,
            java_stack: None,
            monitor: None,
        }
    }

    /// One episode where both carriers parked on a lock most of the time, one sleep beside;
    /// a second episode with a monitor entry alone; a wait outside every episode counts
    /// nowhere.
    #[test]
    fn each_episode_says_what_most_of_its_carrier_time_waited_on() {
        let mut model = Model::new(&hostile::header(0));
        let lock = ParkBlocker {
            object: 0x10,
            class: "Sync".into(),
            ownable: true,
            owner: None,
        };
        for carrier in [1, 2] {
            model
                .park_blockers
                .entry(carrier)
                .or_default()
                .insert(15 * MS, lock.clone());
        }
        let episodes = [
            Episode {
                start_ns: 10 * MS,
                end_ns: 100 * MS,
                blocked_carriers: 2,
                carriers: 2,
                queued_max: None,
                cause: crate::analysis::starvation::Cause::Pinned,
            },
            Episode {
                start_ns: 200 * MS,
                end_ns: 220 * MS,
                blocked_carriers: 2,
                carriers: 2,
                queued_max: None,
                cause: crate::analysis::starvation::Cause::Pinned,
            },
        ];
        let events = [
            pinned(1, 10, 100, Operation::Park),
            pinned(2, 12, 100, Operation::Park),
            pinned(3, 0, 30, Operation::Park),
            pinned(1, 200, 220, Operation::MonitorEnter),
            pinned(2, 500, 600, Operation::Park),
        ];
        let on = waiting_on(&model, &episodes, &events);
        assert_eq!(on.len(), 2);
        let first = on[0].as_ref().unwrap();
        assert_eq!(
            (first.kind, first.class.as_deref()),
            (WaitKind::Lock, Some("Sync"))
        );
        assert_eq!(first.carrier_ns, 178 * MS);
        let second = on[1].as_ref().unwrap();
        assert_eq!(
            (second.kind, second.carrier_ns),
            (WaitKind::Monitor, 20 * MS)
        );
    }

    /// The initializer's own wait inside its static initializer names the class it
    /// initializes, as its waiters' waits do (they read it from the init lock).
    #[test]
    fn an_initializers_own_wait_names_its_class() {
        use crate::model::tests::java_frame;
        let mut model = Model::new(&hostile::header(0));
        model.stacks.insert(
            5,
            vec![
                java_frame("java.lang.Thread.sleep"),
                java_frame("shop.TaxRules.<clinit>"),
                java_frame("shop.Shop.lambda$main$3"),
            ],
        );
        let mut init = pinned(1, 0, 100, Operation::Park);
        init.reason = Reason::ClassInit;
        init.java_stack = Some(5);
        let ((kind, class), _) = what(&model, &init);
        assert_eq!(
            (kind, class.as_deref()),
            (WaitKind::ClassInit, Some("shop.TaxRules"))
        );
        // A waiter on an init lock inside that initializer waits for another class: not
        // named from the frame, and its lock went unread here.
        let mut waiter = pinned(2, 0, 100, Operation::ObjectWait);
        waiter.reason = Reason::ClassInit;
        waiter.java_stack = Some(5);
        let ((_, class), _) = what(&model, &waiter);
        assert_eq!(class, None);
    }
}
