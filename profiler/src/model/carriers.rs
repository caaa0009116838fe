//! What carrier threads did with their time: idle, pinned by a virtual thread, or blocked with
//! one mounted; and when every carrier was unavailable at once (starvation).
//!
//! The kernel read each blocking Java thread's state at the moment it went off CPU (see
//! `events::JavaBlock`); this module only interprets it, so a recording replays the same.

use super::add;
use crate::events::{JavaBlock, JavaThreadState, OffCpu, StackId};

/// Why a mounted virtual thread could not unmount (the JVM's `freeze` failure, seen from outside).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Holding a monitor (`synchronized`), JDK 21-23.
    Monitor,
    /// A native or VM frame on the stack, or blocking inside native code.
    Native,
    /// Running or waiting for a static initializer.
    ClassInit,
    /// Inside a critical section of the JDK (`Continuation.pin`).
    CriticalSection,
    Other,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Monitor => "monitor",
            Self::Native => "native",
            Self::ClassInit => "class_init",
            Self::CriticalSection => "critical_section",
            Self::Other => "other",
        }
    }
}

/// What the blocked thread was doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// `LockSupport.park` and what uses it: sleep, socket I/O, j.u.c. locks.
    Park,
    /// Entering a contended `synchronized`.
    MonitorEnter,
    ObjectWait,
    /// A system call from native code.
    Syscall,
    Other,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Park => "park",
            Self::MonitorEnter => "monitor_enter",
            Self::ObjectWait => "object_wait",
            Self::Syscall => "syscall",
            Self::Other => "other",
        }
    }

    /// `in_vm_call`: the Java stack ends in a call into the VM rather than in a park.
    fn of(java: &JavaBlock, in_vm_call: bool) -> Self {
        if java.pending_monitor.is_some() {
            Self::MonitorEnter
        } else if java.waiting_monitor.is_some() {
            Self::ObjectWait
        } else {
            match java.state {
                // Stopped for a safepoint (GC...), or waiting on one of the VM's own locks
                // (`_thread_blocked` too): not parked by the program.
                JavaThreadState::Blocked if java.at_safepoint || in_vm_call => Self::Other,
                JavaThreadState::Blocked => Self::Park,
                JavaThreadState::InNative => Self::Syscall,
                _ => Self::Other,
            }
        }
    }
}

/// What an interval's Java stack says that the thread's JVM state does not.
#[derive(Clone, Copy, Debug, Default)]
pub struct StackHints {
    /// It runs a static initializer (`<clinit>`).
    pub in_clinit: bool,
    /// It blocked in a call into the VM (its compile queue, a class loader's lock), not in a
    /// park or a sleep.
    pub in_vm_call: bool,
    /// It waited for another thread's initialization of a class (see `Model::classify`).
    pub class_init_wait: bool,
    /// The JVM itself suspended the thread (its suspend signal's handler waits in
    /// `rt_sigsuspend`: a handshake, a sampler): the program is not waiting for anything.
    pub suspended_by_jvm: bool,
}

/// How one off-CPU interval of a Java thread counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// A carrier parked with no virtual thread mounted: waiting for work.
    Idle,
    /// A mounted virtual thread blocked its carrier.
    Pinned(Reason, Operation),
    /// Off CPU with a virtual thread mounted, but not in a blocking call of its own (a page
    /// fault, a VM-internal lock, the JVM suspending the thread...).
    BlockedMounted,
    /// Any other wait.
    Blocked,
}

/// Interprets an interval. `major` is the JDK's feature release: from 24 on, `synchronized`
/// no longer pins (JEP 491). `hints`: what its Java stack adds, where it has one.
pub fn classify(o: &OffCpu, carrier: bool, major: Option<u32>, hints: StackHints) -> Option<Use> {
    if !o.state.is_blocked() {
        return None;
    }
    let Some(java) = &o.java else {
        return Some(Use::Blocked);
    };
    if hints.suspended_by_jvm {
        return Some(if java.vthread.is_some() {
            Use::BlockedMounted
        } else {
            Use::Blocked
        });
    }
    let operation = Operation::of(java, hints.in_vm_call);
    if java.vthread.is_none() {
        return Some(if carrier && operation == Operation::Park {
            Use::Idle
        } else {
            Use::Blocked
        });
    }
    if operation == Operation::Other {
        return Some(Use::BlockedMounted);
    }
    let monitors_pin = major.is_none_or(|m| m < 24);
    let reason = if hints.class_init_wait
        && matches!(operation, Operation::ObjectWait | Operation::MonitorEnter)
    {
        // HotSpot waits on the class's init lock through a monitor (JDK 21 and 25): neither
        // the program's monitor nor its Object.wait.
        Reason::ClassInit
    } else if !monitors_pin && operation == Operation::ObjectWait && java.pin_count > 0 {
        // JDK 24+ waits for another thread's class initialization in an Object.wait on the
        // class's init lock with the continuation pinned (JFR: "Waited for initialization").
        // Since JEP 491 a program's own Object.wait unmounts, so this wait is the VM's.
        Reason::ClassInit
    } else if java.pin_count > 0 {
        Reason::CriticalSection
    } else if monitors_pin
        && (java.held_monitors > 0
            || matches!(operation, Operation::MonitorEnter | Operation::ObjectWait))
    {
        Reason::Monitor
    } else if hints.in_clinit {
        // `<clinit>` is called from the VM: a VM frame under the virtual thread's frames.
        Reason::ClassInit
    } else if operation == Operation::Syscall {
        Reason::Native
    } else if !monitors_pin {
        // JDK 24+: a park, monitor entry or wait that could not unmount without monitors or
        // critical sections means a native or VM frame on the stack.
        Reason::Native
    } else {
        Reason::Other
    };
    Some(Use::Pinned(reason, operation))
}

/// One pinning: a mounted virtual thread blocked its carrier. A contended monitor entry that
/// blocked several times before it got the monitor is one event.
#[derive(Clone, Debug, PartialEq)]
pub struct PinnedEvent {
    pub carrier: u32,
    pub vthread: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Time actually off CPU (less than the span for a merged monitor entry).
    pub blocked_ns: u64,
    pub reason: Reason,
    pub operation: Operation,
    pub kernel_stack: Option<StackId>,
    pub user_stack: Option<StackId>,
    pub java_stack: Option<StackId>,
    pub monitor: Option<u64>,
}

impl PinnedEvent {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Pinned events from intervals in time order, one thread's after another's.
pub fn pinned_events<'a>(
    intervals: impl Iterator<Item = (&'a OffCpu, Use, Option<StackId>)>,
) -> Vec<PinnedEvent> {
    let mut out: Vec<PinnedEvent> = Vec::new();
    // Index of each carrier's last event, to merge the retries of one monitor entry.
    let mut last: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for (o, u, java_stack) in intervals {
        let Use::Pinned(reason, operation) = u else {
            // Anything else in between ends a monitor entry.
            last.remove(&o.tid);
            continue;
        };
        let java = o.java.as_ref();
        let vthread = java.and_then(|j| j.vthread).unwrap_or(0);
        let monitor = java.and_then(|j| j.pending_monitor.or(j.waiting_monitor));
        if operation == Operation::MonitorEnter
            && let Some(&i) = last.get(&o.tid)
            && out[i].operation == Operation::MonitorEnter
            && out[i].vthread == vthread
            && out[i].monitor == monitor
        {
            out[i].end_ns = o.end_ns;
            add(&mut out[i].blocked_ns, o.duration_ns());
            continue;
        }
        last.insert(o.tid, out.len());
        out.push(PinnedEvent {
            carrier: o.tid,
            vthread,
            start_ns: o.start_ns,
            end_ns: o.end_ns,
            blocked_ns: o.duration_ns(),
            reason,
            operation,
            kernel_stack: o.kernel_stack,
            user_stack: o.user_stack,
            java_stack,
            monitor,
        });
    }
    out
}

/// A span during which every carrier was pinned or blocked with a virtual thread mounted:
/// no carrier was left to run the other virtual threads.
#[derive(Clone, Debug, PartialEq)]
pub struct Episode {
    pub start_ns: u64,
    pub end_ns: u64,
    pub blocked_carriers: u32,
    pub carriers: u32,
}

/// Finds starvation episodes from the carriers' unavailable spans `(tid, start, end)` and the
/// number of carriers alive (`carriers_at`, a function of time).
pub fn starvation(
    mut spans: Vec<(u32, u64, u64)>,
    carriers_at: impl Fn(u64) -> u32,
) -> Vec<Episode> {
    // Sweep: +1 at each start, -1 at each end; ends first at equal times.
    let mut edges: Vec<(u64, i64)> = Vec::with_capacity(spans.len().saturating_mul(2));
    spans.retain(|s| s.2 > s.1);
    for &(_, start, end) in &spans {
        edges.push((start, 1));
        edges.push((end, -1));
    }
    edges.sort();
    let mut out: Vec<Episode> = Vec::new();
    let mut blocked: i64 = 0;
    let mut open: Option<(u64, u32, u32)> = None;
    for (time, delta) in edges {
        blocked += delta;
        let carriers = carriers_at(time);
        let starving = carriers > 0 && blocked >= i64::from(carriers);
        let now = u32::try_from(blocked).unwrap_or(u32::MAX);
        match (&mut open, starving) {
            (None, true) => open = Some((time, now, carriers)),
            (Some((_, peak, _)), true) => *peak = (*peak).max(now),
            (Some((start, peak, n)), false) => {
                out.push(Episode {
                    start_ns: *start,
                    end_ns: time,
                    blocked_carriers: *peak,
                    carriers: *n,
                });
                open = None;
            }
            (None, false) => {}
        }
    }
    out.retain(|e| e.end_ns > e.start_ns);
    // A carrier free for a moment between two pinnings (a loop that pins again at once) does
    // not end an episode: nothing else could run in that time.
    let mut merged: Vec<Episode> = Vec::with_capacity(out.len());
    for e in out {
        match merged.last_mut() {
            Some(last) if e.start_ns.saturating_sub(last.end_ns) < EPISODE_GAP_NS => {
                last.end_ns = e.end_ns;
                last.blocked_carriers = last.blocked_carriers.max(e.blocked_carriers);
                last.carriers = last.carriers.max(e.carriers);
            }
            _ => merged.push(e),
        }
    }
    merged
}

/// Episodes closer than this are one.
pub const EPISODE_GAP_NS: u64 = 1_000_000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::OffCpuState;

    fn interval(tid: u32, start: u64, end: u64, java: Option<JavaBlock>) -> OffCpu {
        OffCpu {
            tid,
            start_ns: start,
            end_ns: end,
            state: OffCpuState::Sleeping,
            kernel_stack: None,
            user_stack: None,
            waker_tid: None,
            cpu: 0,
            java,
        }
    }

    fn block(state: JavaThreadState, vthread: Option<u64>) -> JavaBlock {
        JavaBlock {
            state,
            vthread,
            pending_monitor: None,
            waiting_monitor: None,
            held_monitors: 0,
            pin_count: 0,
            at_safepoint: false,
            anchor: [0; 3],
        }
    }

    #[test]
    fn carrier_parks_are_idle_or_pinned_by_what_is_mounted() {
        let idle = interval(1, 0, 10, Some(block(JavaThreadState::Blocked, None)));
        assert_eq!(
            classify(&idle, true, Some(21), StackHints::default()),
            Some(Use::Idle)
        );
        assert_eq!(
            classify(&idle, false, Some(21), StackHints::default()),
            Some(Use::Blocked)
        );

        let mut held = block(JavaThreadState::Blocked, Some(42));
        held.held_monitors = 1;
        let pinned = interval(1, 0, 10, Some(held.clone()));
        assert_eq!(
            classify(&pinned, true, Some(21), StackHints::default()),
            Some(Use::Pinned(Reason::Monitor, Operation::Park))
        );
        // JEP 491: on 24+ a held monitor is not why it pinned.
        assert_eq!(
            classify(&pinned, true, Some(25), StackHints::default()),
            Some(Use::Pinned(Reason::Native, Operation::Park))
        );
        let mut init_wait = block(JavaThreadState::Blocked, Some(42));
        init_wait.waiting_monitor = Some(0x2000);
        init_wait.pin_count = 1;
        assert_eq!(
            classify(
                &interval(1, 0, 10, Some(init_wait)),
                true,
                Some(25),
                StackHints::default()
            ),
            Some(Use::Pinned(Reason::ClassInit, Operation::ObjectWait))
        );
        // A class-init wait on 21 (no pin count there): neither the program's monitor nor
        // its Object.wait.
        let mut vm_wait = block(JavaThreadState::Blocked, Some(42));
        vm_wait.waiting_monitor = Some(0x2000);
        let class_init = StackHints {
            class_init_wait: true,
            ..Default::default()
        };
        assert_eq!(
            classify(
                &interval(1, 0, 10, Some(vm_wait)),
                true,
                Some(21),
                class_init
            ),
            Some(Use::Pinned(Reason::ClassInit, Operation::ObjectWait))
        );
        held.pin_count = 1;
        assert_eq!(
            classify(
                &interval(1, 0, 10, Some(held)),
                true,
                Some(25),
                StackHints::default()
            ),
            Some(Use::Pinned(Reason::CriticalSection, Operation::Park))
        );

        let mut entering = block(JavaThreadState::Blocked, Some(7));
        entering.pending_monitor = Some(0x1000);
        assert_eq!(
            classify(
                &interval(1, 0, 10, Some(entering)),
                true,
                Some(21),
                StackHints::default()
            ),
            Some(Use::Pinned(Reason::Monitor, Operation::MonitorEnter))
        );
        let native = interval(1, 0, 10, Some(block(JavaThreadState::InNative, Some(7))));
        assert_eq!(
            classify(&native, true, Some(21), StackHints::default()),
            Some(Use::Pinned(Reason::Native, Operation::Syscall))
        );
        let fault = interval(1, 0, 10, Some(block(JavaThreadState::InJava, Some(7))));
        assert_eq!(
            classify(&fault, true, Some(21), StackHints::default()),
            Some(Use::BlockedMounted)
        );
        let mut stopped = block(JavaThreadState::Blocked, Some(7));
        stopped.at_safepoint = true;
        let safepoint = interval(1, 0, 10, Some(stopped));
        assert_eq!(
            classify(&safepoint, true, Some(21), StackHints::default()),
            Some(Use::BlockedMounted)
        );
    }

    #[test]
    fn retries_of_one_monitor_entry_are_one_event() {
        let mut entering = block(JavaThreadState::Blocked, Some(7));
        entering.pending_monitor = Some(0x1000);
        let a = interval(1, 0, 10, Some(entering.clone()));
        let b = interval(1, 12, 20, Some(entering.clone()));
        let idle = interval(1, 30, 40, Some(block(JavaThreadState::Blocked, None)));
        let c = interval(1, 50, 60, Some(entering));
        let u = |o: &OffCpu| classify(o, true, Some(21), StackHints::default()).unwrap();
        let events = pinned_events([&a, &b, &idle, &c].into_iter().map(|o| (o, u(o), None)));
        assert_eq!(events.len(), 2);
        assert_eq!((events[0].start_ns, events[0].end_ns), (0, 20));
        assert_eq!(events[0].blocked_ns, 18);
        assert_eq!(events[1].start_ns, 50);
    }

    #[test]
    fn starvation_needs_every_carrier() {
        // Two carriers: both blocked from 5 to 8 only.
        let spans = vec![(1, 0, 8), (2, 5, 12), (1, 20, 30)];
        let episodes = starvation(spans, |_| 2);
        assert_eq!(
            episodes,
            vec![Episode {
                start_ns: 5,
                end_ns: 8,
                blocked_carriers: 2,
                carriers: 2
            }]
        );
        assert!(starvation(vec![(1, 0, 8)], |_| 0).is_empty());
        // Freed for 100 us between pinnings: one episode.
        let ms = 1_000_000;
        let spans = vec![
            (1, 0, 10 * ms),
            (2, 0, 30 * ms),
            (1, 10 * ms + ms / 10, 30 * ms),
        ];
        let episodes = starvation(spans, |_| 2);
        assert_eq!(episodes.len(), 1);
        assert_eq!((episodes[0].start_ns, episodes[0].end_ns), (0, 30 * ms));
    }
}
