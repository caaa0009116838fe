//! Watching the JVM while recording: its Java threads made known to the kernel programs and
//! written, the classes of the monitors threads wait for, and the carriers' open waits.

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use anyhow::Result;

use super::Session;
use crate::{
    budget, capture,
    events::{Event, JavaThreadInfo, OffCpuState, OpenWait, ParkBlocker},
    jvm::hotspot::{Hotspot, JavaThread},
};

/// A wait is looked at for its park blocker once it has lasted this long (the shortest a
/// lock row counts, by default).
const BLOCKER_AFTER: Duration = Duration::from_millis(1);
/// Threads looked at per pass, at most (a map look-up each).
const MAX_BLOCKER_READS: usize = 256;
/// Park blockers whose class is remembered, at most (their addresses come from the target).
const MAX_BLOCKER_CLASSES: usize = 4096;

/// Follows the JVM's thread list, so the kernel knows every Java thread's `JavaThread`.
pub(super) struct JvmWatch {
    pub(super) hotspot: Hotspot,
    /// As the thread watch read them last.
    pub(super) threads: Vec<JavaThread>,
}

impl JvmWatch {
    /// The carriers' OS thread ids, as last listed.
    pub(super) fn carrier_tids(&self) -> Vec<u32> {
        self.threads
            .iter()
            .filter(|t| t.carrier)
            .map(|t| t.tid)
            .collect()
    }
}

/// A Java thread as the kernel programs are told of it: a carrier, one of the JDK's own
/// service threads (by its class), or another.
pub(super) fn known_thread(t: &JavaThread) -> capture::KnownThread {
    let role = if t.carrier {
        capture::ThreadRole::Carrier
    } else if t
        .class
        .as_deref()
        .is_some_and(crate::analysis::jdk::is_jdk_service_class)
    {
        capture::ThreadRole::Service
    } else {
        capture::ThreadRole::Other
    };
    capture::KnownThread {
        tid: t.tid,
        addr: t.addr,
        role,
    }
}

/// Counts the cut names of threads about to be written (the reader cuts each time it reads,
/// each second; what the recording holds is counted once).
fn count_cut_names(threads: &[JavaThread]) {
    let cut = threads
        .iter()
        .filter(|t| t.name.as_deref().is_some_and(budget::is_cut))
        .count();
    budget::TALLY.add(budget::Cut::Name, cut as u64);
}

impl Session {
    /// Takes what the thread watch read of the JVM's thread list since last time (it has
    /// told the kernel already), and writes what changed.
    pub(super) fn refresh_java_threads(&mut self) -> Result<()> {
        let Some(change) = self.watch.as_ref().and_then(|w| w.changes()) else {
            return Ok(());
        };
        if let Some(why) = change.failed
            && !self.registration_failed
        {
            self.registration_failed = true;
            self.writer.write_event(&Event::Warning(format!(
                "some Java threads could not be made known to the kernel programs ({why}): \
                 their waits count as blocked"
            )))?;
        }
        // The watcher reads within the shares measured once pinprof had started; the first
        // read, before, was held to a smaller one: from its first change on, it says.
        self.threads_not_listed = match self.list_watched {
            true => self.threads_not_listed.max(change.not_listed),
            false => change.not_listed,
        };
        self.list_watched = true;
        let Some(jvm) = &mut self.jvm else {
            return Ok(());
        };
        let replaced: HashSet<u32> = change
            .gone
            .iter()
            .copied()
            .chain(change.listed.iter().map(|t| t.tid))
            .collect();
        jvm.threads.retain(|t| !replaced.contains(&t.tid));
        jvm.threads.extend(change.listed.iter().cloned());
        let carriers = jvm.threads.iter().filter(|t| t.carrier).count();
        count_cut_names(&change.listed);
        let listed = change
            .listed
            .iter()
            .map(|t| JavaThreadInfo {
                tid: t.tid,
                name: t.name.clone(),
                carrier: t.carrier,
            })
            .collect();
        let classes = change
            .listed
            .iter()
            .filter_map(|t| Some((t.tid, t.class.clone()?)))
            .collect();
        self.writer.write_event(&Event::JavaThreadsChanged {
            time_ns: change.time_ns,
            listed,
            classes,
            gone: change.gone,
            carriers: u32::try_from(carriers).unwrap_or(u32::MAX),
        })
    }

    /// Writes the Java threads last read (their full names, which are carriers).
    pub(super) fn write_java_threads(&mut self, time_ns: u64) -> Result<()> {
        let Some(jvm) = self.jvm.as_ref().filter(|j| !j.threads.is_empty()) else {
            return Ok(());
        };
        count_cut_names(&jvm.threads);
        let threads = jvm
            .threads
            .iter()
            .map(|t| JavaThreadInfo {
                tid: t.tid,
                name: t.name.clone(),
                carrier: t.carrier,
            })
            .collect();
        self.writer
            .write_event(&Event::JavaThreads { time_ns, threads })?;
        let classes: Vec<(u32, String)> = jvm
            .threads
            .iter()
            .filter_map(|t| Some((t.tid, t.class.clone()?)))
            .collect();
        if classes.is_empty() {
            return Ok(());
        }
        self.writer.write_event(&Event::JavaThreadClasses {
            time_ns,
            threads: classes,
        })
    }

    /// Says which class of object `monitor` belongs to, when not said recently.
    pub(super) fn name_monitor(&mut self, monitor: u64, time_ns: u64) -> Result<()> {
        const FRESH: Duration = Duration::from_secs(1);
        if self
            .monitor_classes
            .get(&monitor)
            .is_some_and(|(read, _, _)| read.elapsed() < FRESH)
        {
            return Ok(());
        }
        let Some(jvm) = &mut self.jvm else {
            return Ok(());
        };
        let Some(class) = jvm.hotspot.monitor_class(monitor) else {
            return Ok(());
        };
        let class_object = (class == "java.lang.Class")
            .then(|| jvm.hotspot.monitor_class_object(monitor))
            .flatten();
        // One entry per monitor seen; a program that inflates monitors without end would
        // grow it for ever: the budget's map forgets the ones not seen lately (and re-reads).
        let changed = self
            .monitor_classes
            .get(&monitor)
            .is_none_or(|(_, before, object)| *before != class || *object != class_object);
        self.monitor_classes.insert(
            monitor,
            (Instant::now(), class.clone(), class_object.clone()),
        );
        if changed {
            self.writer.write_event(&Event::MonitorClass {
                time_ns,
                monitor,
                class,
            })?;
            if let Some(class) = class_object {
                self.writer.write_event(&Event::MonitorClassObject {
                    time_ns,
                    monitor,
                    class,
                })?;
            }
        }
        Ok(())
    }

    /// Names the class initializations that mounted virtual threads wait for now, while the
    /// waits last (the class's init lock is gone once it is initialized): a look-up per
    /// carrier, and a walk of the loaded classes only when one waits on an init lock.
    pub(super) fn name_class_init_waits(&mut self) -> Result<()> {
        use profiler_ebpf::java_flags::{KNOWN, MOUNTED};
        let Some(jvm) = &self.jvm else {
            return Ok(());
        };
        let mut waits: Vec<(u64, u64)> = Vec::new();
        for t in jvm.threads.iter().filter(|t| t.carrier) {
            let Some(start) = self.capture.open_interval(t.tid) else {
                continue;
            };
            // A carrier that blocked before the kernel knew it for a Java thread (one just
            // started) has its JVM state read now: it has not moved since.
            let java = match start.java.flags & KNOWN {
                0 => match jvm.hotspot.java_state(t) {
                    Some(state) => state,
                    None => continue,
                },
                _ => start.java,
            };
            if java.flags & MOUNTED == 0 {
                continue;
            }
            for monitor in [java.waiting_monitor, java.pending_monitor] {
                if monitor != 0 {
                    waits.push((monitor, start.start_ns));
                }
            }
        }
        if waits.is_empty() {
            return Ok(());
        }
        for &(monitor, start_ns) in &waits {
            self.name_monitor(monitor, start_ns)?;
        }
        let Some(jvm) = &mut self.jvm else {
            return Ok(());
        };
        let now_ns = capture::monotonic_ns();
        let events = self
            .init_waits
            .name(&mut jvm.hotspot, &jvm.threads, &waits, now_ns);
        for event in events {
            self.writer.write_event(&event)?;
        }
        Ok(())
    }

    /// Names what the Java threads parked now park on (`Thread.parkBlocker`, and the owner of
    /// an ownable synchronizer), or the owner of the monitor they wait to enter, once per
    /// wait, while it lasts: the thread clears it as it returns. Idle carriers (nothing
    /// mounted) park for work, on nothing of the application's, and are skipped; so are
    /// waits shorter than `BLOCKER_AFTER`, which no lock row counts. At most
    /// `MAX_BLOCKER_READS` threads a pass, the next ones at the next pass.
    pub(super) fn name_park_blockers(&mut self) -> Result<()> {
        use profiler_ebpf::java_flags::{CARRIER, KNOWN, MOUNTED};
        let Some(jvm) = &mut self.jvm else {
            return Ok(());
        };
        let now_ns = capture::monotonic_ns();
        let blocked = jvm.hotspot.states.blocked;
        let mut events = Vec::new();
        let mut monitors = Vec::new();
        let n = jvm.threads.len();
        let from = self.blocker_cursor % n.max(1);
        self.blocker_cursor = from + MAX_BLOCKER_READS;
        for t in jvm
            .threads
            .iter()
            .cycle()
            .skip(from)
            .take(n.min(MAX_BLOCKER_READS))
        {
            let Some(start) = self.capture.open_interval(t.tid) else {
                continue;
            };
            // Each wait is looked at once, once it has lasted.
            if now_ns.saturating_sub(start.start_ns) < BLOCKER_AFTER.as_nanos() as u64
                || self.blockers_read.get(&t.tid) == Some(&start.start_ns)
            {
                continue;
            }
            self.blockers_read.insert(t.tid, start.start_ns);
            // A thread blocked since before the kernel knew it has its state read now: it
            // has not moved since.
            let java = match start.java.flags & KNOWN {
                0 => match jvm.hotspot.java_state(t) {
                    Some(state) => state,
                    None => continue,
                },
                _ => start.java,
            };
            if java.flags & KNOWN == 0
                || java.thread_state != blocked
                || (java.flags & CARRIER != 0 && java.flags & MOUNTED == 0)
            {
                continue;
            }
            if java.pending_monitor != 0 {
                if let Some(owner) = jvm
                    .hotspot
                    .monitor_owner(java.pending_monitor, &jvm.threads)
                {
                    events.push(Event::MonitorOwner {
                        time_ns: now_ns,
                        tid: t.tid,
                        monitor: java.pending_monitor,
                        owner,
                    });
                }
                monitors.push((java.pending_monitor, start.start_ns));
                continue;
            }
            if let Some(blocker) = jvm.hotspot.park_blocker(t, &jvm.threads) {
                events.push(Event::ParkBlocker {
                    time_ns: now_ns,
                    tid: t.tid,
                    blocker,
                });
            }
        }
        let listed: std::collections::HashSet<u32> = jvm.threads.iter().map(|t| t.tid).collect();
        self.blockers_read.retain(|tid, _| listed.contains(tid));
        for event in events {
            self.writer.write_event(&event)?;
        }
        // Their classes too (a wait from before attach was never named as it began).
        for (monitor, start_ns) in monitors {
            self.name_monitor(monitor, start_ns)?;
        }
        Ok(())
    }

    /// Names the object a thread parked on through a wait of at least `BLOCKER_AFTER` (the
    /// kernel read its address as the thread blocked): its class, read now, once a second at
    /// most per object. Its owner during the wait is what `name_park_blockers` reads.
    pub(super) fn name_blocker(
        &mut self,
        tid: u32,
        start_ns: u64,
        end_ns: u64,
        object: u64,
    ) -> Result<()> {
        if end_ns.saturating_sub(start_ns) < BLOCKER_AFTER.as_nanos() as u64 {
            return Ok(());
        }
        let Some((class, ownable)) = self.blocker_class(object) else {
            return Ok(());
        };
        self.writer.write_event(&Event::ParkBlocker {
            time_ns: start_ns,
            tid,
            blocker: ParkBlocker {
                object,
                class,
                ownable,
                owner: None,
            },
        })
    }

    /// The class of the park blocker at `object` and whether it is an ownable synchronizer,
    /// read now (once a second at most per object).
    pub(super) fn blocker_class(&mut self, object: u64) -> Option<(String, bool)> {
        let jvm = self.jvm.as_mut()?;
        match self.blocker_classes.get(&object) {
            Some((at, named)) if at.elapsed() < Duration::from_secs(1) => named.clone(),
            _ => {
                let named = jvm.hotspot.blocker_class(object);
                if self.blocker_classes.len() >= MAX_BLOCKER_CLASSES {
                    self.blocker_classes.clear();
                }
                self.blocker_classes
                    .insert(object, (Instant::now(), named.clone()));
                named
            }
        }
    }

    /// Says which carriers are in a wait that has not ended yet, so that a live view sees
    /// starvation while it lasts (a long pinning is otherwise known only when it ends).
    pub(super) fn open_carrier_waits(&mut self) -> Result<()> {
        let Some(jvm) = &self.jvm else {
            return Ok(());
        };
        // A look-up per carrier, not a walk of every thread's entry.
        let carriers = jvm.carrier_tids();
        if carriers.is_empty() {
            return Ok(());
        }
        let waits = carriers
            .into_iter()
            .filter_map(|tid| Some((tid, self.capture.open_interval(tid)?)))
            .map(|(tid, start)| OpenWait {
                tid,
                start_ns: start.start_ns,
                state: OffCpuState::from_prev_state(start.prev_state),
                java: self.java_block(&start.java),
            })
            .collect();
        self.writer.write_event(&Event::OpenWaits {
            time_ns: capture::monotonic_ns(),
            waits,
        })
    }
}
