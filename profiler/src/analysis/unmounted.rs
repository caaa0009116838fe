//! Virtual threads' waits off their carriers (`record --vthread-waits`): what they waited on,
//! grouped as lock rows (a `java.util.concurrent` object, a JDK 24+ monitor) and by where the
//! rest waited (sleeps, I/O), with the owner of a lock and the place it held it at.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::kinds::LockKind;
use super::locks::{JavaLock, JavaLockKind, LockRow};
use crate::events::{BlockerOwner, Frame, Unmounted, VthreadWait};
use crate::model::{Model, add};

/// What a group of unmounted waits waited on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Key {
    /// A park blocker, by the object's address as read.
    Blocker(u64),
    /// A JDK 24+ monitor (`ObjectMonitor*`).
    Monitor(u64),
}

/// What a virtual thread waited for, as a Java engineer names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// A `ReentrantLock`, a read-write lock: an ownable synchronizer.
    Lock,
    /// `Condition.await` (a blocking queue's `take`, too).
    Condition,
    Semaphore,
    /// A `CountDownLatch`, a `CyclicBarrier`, a `Phaser`.
    Latch,
    /// A `Future`'s `get`, a `CompletableFuture`'s `join`.
    Future,
    Sleep,
    SocketRead,
    SocketWrite,
    SocketAccept,
    /// A contended `synchronized` (JDK 24+).
    MonitorEnter,
    /// `Object.wait` (JDK 24+).
    ObjectWait,
    /// A park on anything else, or on nothing named.
    Park,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Condition => "condition",
            Self::Semaphore => "semaphore",
            Self::Latch => "latch",
            Self::Future => "future",
            Self::Sleep => "sleep",
            Self::SocketRead => "socket_read",
            Self::SocketWrite => "socket_write",
            Self::SocketAccept => "socket_accept",
            Self::MonitorEnter => "monitor_enter",
            Self::ObjectWait => "object_wait",
            Self::Park => "park",
        }
    }

    /// From a wait: how it left its carrier, its blocker's class, then its frames (the
    /// innermost JDK method that says what it does).
    pub fn of(model: &Model, w: &VthreadWait) -> Self {
        match w.how {
            Unmounted::Monitor => return Self::MonitorEnter,
            Unmounted::ObjectWait => return Self::ObjectWait,
            Unmounted::Park => {}
        }
        if let Some(b) = &w.blocker {
            let class = b.class.as_str();
            let by_class = [
                ("ConditionObject", Self::Condition),
                ("Semaphore", Self::Semaphore),
                ("CountDownLatch", Self::Latch),
                ("CyclicBarrier", Self::Latch),
                ("Phaser", Self::Latch),
                ("Future", Self::Future),
                ("Signaller", Self::Future),
            ];
            if let Some((_, op)) = by_class.iter().find(|(c, _)| class.contains(c)) {
                return *op;
            }
            if b.ownable {
                return Self::Lock;
            }
        }
        let by_frame = [
            ("java.lang.Thread.sleep", Self::Sleep),
            ("java.lang.VirtualThread.sleepNanos", Self::Sleep),
            ("NioSocketImpl.accept", Self::SocketAccept),
            ("ServerSocketChannelImpl.accept", Self::SocketAccept),
            ("NioSocketImpl.read", Self::SocketRead),
            ("SocketChannelImpl.read", Self::SocketRead),
            ("NioSocketImpl.write", Self::SocketWrite),
            ("SocketChannelImpl.write", Self::SocketWrite),
        ];
        wait_frames(model, w)
            .iter()
            .find_map(|f| {
                let label = f.label();
                by_frame
                    .iter()
                    .find(|(m, _)| label.contains(m))
                    .map(|(_, op)| *op)
            })
            .unwrap_or(Self::Park)
    }
}

/// The site of waits whose frames were not copied (the kernel's copy budget was spent).
pub const NO_STACK: &str = "[stack not copied: the copy budget was spent]";

/// `virtual thread #25`.
pub fn vthread_label(id: u64) -> String {
    format!("virtual thread #{id}")
}

/// The frames of a wait, innermost first (empty: none copied).
pub fn wait_frames<'a>(model: &'a Model, w: &VthreadWait) -> Vec<&'a Frame> {
    model.frames_of(None, None, w.stack)
}

/// One row per object virtual threads waited on unmounted, most wait time first: the
/// object's class, the owner that held it longest while they waited (an ownable
/// synchronizer's), and where that owner was meanwhile when it too waited unmounted (a lock
/// held across a sleep or a call).
pub fn lock_rows(model: &Model) -> Vec<LockRow> {
    #[derive(Default)]
    struct Acc<'a> {
        waits: Vec<&'a VthreadWait>,
        /// Waits still under way at the end (not in `waits`: nothing let them go).
        open: Vec<&'a VthreadWait>,
        /// Wait time by owner id while it held the object.
        owners: HashMap<u64, u64>,
    }
    let mut by_key: BTreeMap<Key, Acc> = BTreeMap::new();
    for w in &model.vthread_waits {
        let key = match (w.how, &w.blocker, w.monitor) {
            (Unmounted::Monitor | Unmounted::ObjectWait, _, Some(m)) => Key::Monitor(m),
            (Unmounted::Park, Some(b), _) => Key::Blocker(b.object),
            _ => continue,
        };
        let acc = by_key.entry(key).or_default();
        if w.unfinished {
            acc.open.push(w);
            continue;
        }
        acc.waits.push(w);
        if let Some(owner) = w.owner_id.filter(|&o| o != w.vthread_id) {
            add(acc.owners.entry(owner).or_default(), w.duration_ns());
        }
    }
    let vthreads: HashSet<u64> = model.vthread_waits.iter().map(|w| w.vthread_id).collect();
    let labels = |frames: Vec<&Frame>| frames.iter().map(|f| f.label()).collect::<Vec<_>>();
    let mut rows: Vec<LockRow> = by_key
        .into_iter()
        .map(|(key, acc)| {
            let longest = acc.waits.iter().max_by_key(|w| w.duration_ns()).copied();
            let any = longest.or_else(|| acc.open.first().copied());
            let owner = acc
                .owners
                .iter()
                .max_by_key(|(id, ns)| (**ns, std::cmp::Reverse(**id)))
                .map(|(&id, _)| id)
                // A row of waits all still under way names the owner they found.
                .or_else(|| acc.open.iter().find_map(|w| w.owner_id));
            // Where the owner was while the waits it caused went on: its own wait off its
            // carrier then (it held the lock across it), from the longest wait down.
            let all: Vec<&VthreadWait> = acc.waits.iter().chain(&acc.open).copied().collect();
            let holder_frames = owner
                .and_then(|id| owner_stack(model, id, &all))
                .map(|o| labels(wait_frames(model, o)))
                .unwrap_or_default();
            let waiter_frames = all
                .iter()
                .filter(|w| w.stack.is_some())
                .max_by_key(|w| w.duration_ns())
                .map(|w| labels(wait_frames(model, w)))
                .unwrap_or_default();
            let owner_of = |id: u64| BlockerOwner {
                java_id: id,
                name: None,
                virtual_thread: vthreads.contains(&id),
                tid: None,
            };
            let (address, java) = match key {
                Key::Blocker(object) => {
                    let b = any.and_then(|w| w.blocker.as_ref());
                    (
                        object,
                        b.map(|b| JavaLock {
                            class: b.class.clone(),
                            kind: if b.ownable {
                                JavaLockKind::Ownable
                            } else {
                                JavaLockKind::Other
                            },
                            owner: owner.map(owner_of),
                        }),
                    )
                }
                Key::Monitor(monitor) => (
                    monitor,
                    Some(JavaLock {
                        class: model
                            .monitor_class(monitor, any.map_or(0, |w| w.start_ns))
                            .unwrap_or("an object")
                            .to_string(),
                        kind: JavaLockKind::Monitor,
                        owner: owner.map(owner_of),
                    }),
                ),
            };
            let mut wait_ns = 0;
            for w in &acc.waits {
                add(&mut wait_ns, w.duration_ns());
            }
            let waiters: BTreeSet<String> = acc
                .waits
                .iter()
                .chain(&acc.open)
                .map(|w| vthread_label(w.vthread_id))
                .collect();
            LockRow {
                address,
                kind: LockKind::Unmounted,
                symbol: None,
                waits: acc.waits.len() as u64,
                wait_ns,
                max_wait_ns: longest.map_or(0, |w| w.duration_ns()),
                waiting_at_end: acc.open.len() as u64,
                waiters,
                holders: Vec::new(),
                holder_frames,
                waiter_frames,
                jvm_internal: false,
                java,
            }
        })
        .collect();
    rows.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.address.cmp(&b.address)));
    rows
}

/// The wait of owner `id` (with its stack) that shows where it held the object while one of
/// `waits` (those it caused) went on: the owner's wait under way as such a wait began, else
/// the owner's first wait that began during it (it still held the object then: the waiter
/// had found it held, and it went on waiting). The longest waits are looked at first.
fn owner_stack<'a>(model: &'a Model, id: u64, waits: &[&VthreadWait]) -> Option<&'a VthreadWait> {
    let mut caused: Vec<&VthreadWait> = waits
        .iter()
        .copied()
        .filter(|w| w.owner_id == Some(id))
        .collect();
    caused.sort_by_key(|w| std::cmp::Reverse(w.duration_ns()));
    let own: Vec<&VthreadWait> = model
        .vthread_waits
        .iter()
        .filter(|o| o.vthread_id == id && o.stack.is_some())
        .collect();
    caused.iter().find_map(|w| {
        let under_way = own
            .iter()
            .find(|o| o.start_ns <= w.start_ns && o.end_ns > w.start_ns);
        let next = || {
            own.iter()
                .filter(|o| o.start_ns > w.start_ns && o.start_ns < w.end_ns)
                .min_by_key(|o| o.start_ns)
        };
        under_way.or_else(next).copied()
    })
}

/// Unmounted waits on nothing a lock row stands for (sleeps, socket I/O, parks without a
/// blocker), by what they did and where: most time first.
pub fn other_waits(model: &Model) -> Vec<Site> {
    let mut by_site: HashMap<(Operation, Vec<String>), (u64, u64, u64)> = HashMap::new();
    for w in &model.vthread_waits {
        if w.blocker.is_some() || w.monitor.is_some() || w.unfinished {
            continue;
        }
        let mut frames: Vec<String> = wait_frames(model, w)
            .iter()
            .take(64)
            .map(|f| f.label())
            .collect();
        if frames.is_empty() {
            frames.push(NO_STACK.to_string());
        }
        let e = by_site
            .entry((Operation::of(model, w), frames))
            .or_default();
        e.0 += 1;
        add(&mut e.1, w.duration_ns());
        e.2 = e.2.max(w.duration_ns());
    }
    let mut rows: Vec<Site> = by_site
        .into_iter()
        .map(
            |((operation, frames), (waits, wait_ns, max_wait_ns))| Site {
                operation,
                frames,
                waits,
                wait_ns,
                max_wait_ns,
            },
        )
        .collect();
    rows.sort_by(|a, b| {
        (b.wait_ns.cmp(&a.wait_ns))
            .then(a.operation.cmp(&b.operation))
            .then(a.frames.cmp(&b.frames))
    });
    rows
}

/// Waits off the carriers at one place, for one operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    pub operation: Operation,
    /// Its frames, innermost first.
    pub frames: Vec<String>,
    pub waits: u64,
    pub wait_ns: u64,
    pub max_wait_ns: u64,
}

/// The operation of a lock row's waits: the most common among them.
pub fn row_operation(model: &Model, address: u64) -> Option<Operation> {
    let mut counts: HashMap<Operation, u64> = HashMap::new();
    for w in &model.vthread_waits {
        let on = w.monitor.or(w.blocker.as_ref().map(|b| b.object));
        if on == Some(address) {
            *counts.entry(Operation::of(model, w)).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by_key(|(op, n)| (*n, std::cmp::Reverse(*op)))
        .map(|(op, _)| op)
}
