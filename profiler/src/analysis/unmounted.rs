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
        /// Wait time by owner id while it held the object.
        owners: HashMap<u64, u64>,
    }
    let mut by_key: BTreeMap<Key, Acc> = BTreeMap::new();
    for w in &model.vthread_waits {
        let key = match (w.how, &w.blocker, w.monitor) {
            (Unmounted::Monitor, _, Some(m)) => Key::Monitor(m),
            (Unmounted::Park, Some(b), _) => Key::Blocker(b.object),
            _ => continue,
        };
        let acc = by_key.entry(key).or_default();
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
            let owner = acc
                .owners
                .iter()
                .max_by_key(|(id, ns)| (**ns, std::cmp::Reverse(**id)))
                .map(|(&id, _)| id);
            // Where the owner was while the longest wait it caused went on: its own wait
            // off its carrier then, if it had one (it held the lock across it).
            let holder_frames = owner
                .and_then(|id| {
                    let during = acc
                        .waits
                        .iter()
                        .filter(|w| w.owner_id == Some(id))
                        .max_by_key(|w| w.duration_ns())?;
                    model
                        .vthread_waits
                        .iter()
                        .filter(|o| {
                            o.vthread_id == id
                                && o.start_ns <= during.start_ns
                                && o.end_ns > during.start_ns
                        })
                        .find(|o| o.stack.is_some())
                        .map(|o| labels(wait_frames(model, o)))
                })
                .unwrap_or_default();
            let waiter_frames = acc
                .waits
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
                    let b = longest.and_then(|w| w.blocker.as_ref());
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
                            .monitor_class(monitor, longest.map_or(0, |w| w.start_ns))
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
                .map(|w| vthread_label(w.vthread_id))
                .collect();
            LockRow {
                address,
                kind: LockKind::Unmounted,
                symbol: None,
                waits: acc.waits.len() as u64,
                wait_ns,
                max_wait_ns: longest.map_or(0, |w| w.duration_ns()),
                waiting_at_end: 0,
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

/// Unmounted waits on nothing a lock row stands for (sleeps, socket I/O, parks without a
/// blocker), by where they waited: (innermost application frames, waits, total ns, longest
/// ns), most time first.
pub fn other_waits(model: &Model) -> Vec<(Vec<String>, u64, u64, u64)> {
    let mut by_site: HashMap<Vec<String>, (u64, u64, u64)> = HashMap::new();
    for w in &model.vthread_waits {
        if w.blocker.is_some() || w.monitor.is_some() {
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
        let e = by_site.entry(frames).or_default();
        e.0 += 1;
        add(&mut e.1, w.duration_ns());
        e.2 = e.2.max(w.duration_ns());
    }
    let mut rows: Vec<_> = by_site
        .into_iter()
        .map(|(frames, (n, ns, max))| (frames, n, ns, max))
        .collect();
    rows.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    rows
}
