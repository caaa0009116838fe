//! Names the class initialization a thread waits for while it waits: the waited monitor's
//! object is then the class's init lock, which HotSpot drops once the class is initialized,
//! so this is read during the wait, never after it.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use super::hotspot::{ClassInit, Hotspot, JavaThread};
use crate::events::{Event, Initializer};

/// How long the classes found being initialized are trusted for a wait on one of their locks
/// before the loaded classes are walked again (a lock object may be freed and its address
/// reused once its class is initialized).
const TRUSTED: Duration = Duration::from_secs(1);

/// The classes seen being initialized, and when they were looked for.
#[derive(Default)]
pub struct InitWaits {
    /// Each with the thread running its initializer, read as the walk found it.
    known: Vec<(ClassInit, Option<Initializer>)>,
    walked: Option<Instant>,
    /// The waits (monitor, start) the last walk was made for.
    walked_for: HashSet<(u64, u64)>,
    /// `int[]` objects waited on that no class being initialized had as its lock when the
    /// classes were last walked, and when: an application's own `int[]` monitors, which would
    /// otherwise have the classes walked again at each new wait on them.
    not_locks: HashMap<u64, Instant>,
}

/// Objects remembered as no init lock, at most (the memory is forgotten past it).
const MAX_NOT_LOCKS: usize = 4096;

impl InitWaits {
    /// Events naming, for each of `waits` (monitor, start of the wait) on a class's init lock
    /// now, the class and the thread running its initializer; `threads` are the JVM's threads
    /// last read. Walks the loaded classes at most once per call, and not again for the same
    /// waits within a second.
    pub fn name(
        &mut self,
        hotspot: &mut Hotspot,
        threads: &[JavaThread],
        waits: &[(u64, u64)],
        now_ns: u64,
    ) -> Vec<Event> {
        // HotSpot's init locks are `int[]`s (JDK 21 and 25).
        let mut locks: Vec<(u64, u64, u64)> = Vec::new();
        for &(m, start) in waits {
            if hotspot.monitor_class(m).as_deref() == Some("int[]")
                && let Some(oop) = hotspot.monitor_oop(m)
            {
                locks.push((m, start, oop));
            }
        }
        if locks.is_empty() {
            return Vec::new();
        }
        let fresh = self.walked.is_some_and(|t| t.elapsed() < TRUSTED);
        self.not_locks.retain(|_, seen| seen.elapsed() < TRUSTED);
        let unknown = locks.iter().any(|(_, _, oop)| {
            !self.known.iter().any(|(c, _)| c.lock == *oop) && !self.not_locks.contains_key(oop)
        });
        let new_waits = locks
            .iter()
            .any(|&(m, start, _)| !self.walked_for.contains(&(m, start)));
        if unknown && (!fresh || new_waits) {
            // The initializer's virtual thread is read now, as its class is being initialized:
            // it stays mounted (pinned) until the initializer ends. The waits are named again
            // until their wake-ups are seen, when its carrier may hold nothing or another.
            self.known = hotspot
                .classes_being_initialized()
                .into_iter()
                .map(|c| {
                    let thread = threads.iter().find(|t| t.addr == c.init_thread);
                    let initializer = thread.map(|t| Initializer {
                        tid: t.tid,
                        vthread: hotspot.mounted_vthread(t),
                    });
                    (c, initializer)
                })
                .collect();
            self.walked = Some(Instant::now());
            self.walked_for = locks.iter().map(|&(m, start, _)| (m, start)).collect();
            if self.not_locks.len() >= MAX_NOT_LOCKS {
                self.not_locks.clear();
            }
            let now = Instant::now();
            for &(_, _, oop) in &locks {
                if !self.known.iter().any(|(c, _)| c.lock == oop) {
                    self.not_locks.insert(oop, now);
                }
            }
        }
        // One event per monitor, however many wait on it.
        locks.sort_unstable();
        locks.dedup_by_key(|(m, _, _)| *m);
        locks
            .into_iter()
            .filter_map(|(monitor, _, oop)| {
                let (init, initializer) = self.known.iter().find(|(c, _)| c.lock == oop)?;
                Some(Event::ClassInitLock {
                    time_ns: now_ns,
                    monitor,
                    class: init.class.clone(),
                    initializer: *initializer,
                })
            })
            .collect()
    }
}
