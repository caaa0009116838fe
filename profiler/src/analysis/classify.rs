//! What a wait counts as: a carrier idle, pinned by a virtual thread, or blocked with one
//! mounted; any other thread blocked. From the JVM's state of the thread as it went off CPU,
//! and what its stacks add.
//!
//! The kernel read each blocking Java thread's state at the moment it went off CPU (see
//! `events::JavaBlock`); this module only interprets it, so a recording replays the same.

use crate::events::{JavaThreadState, StackId, UNKNOWN_JAVA_FRAME};
use crate::model::{FastMap, JavaAt, Model, Wait};

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
    fn of(java: &JavaAt, in_vm_call: bool) -> Self {
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
    /// It waited for another thread's initialization of a class (see `classify`).
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
pub fn interpret(o: &Wait, carrier: bool, major: Option<u32>, hints: StackHints) -> Option<Use> {
    if !o.state.is_blocked() {
        return None;
    }
    let Some(java) = o.java() else {
        return Some(Use::Blocked);
    };
    // Stopped by a signal or a debugger: what the thread was doing before is not what held
    // it (a 10 s SIGSTOP is no 10 s pin), as when the JVM suspends it.
    if hints.suspended_by_jvm || o.state == crate::events::OffCpuState::Stopped {
        return Some(if java.vthread.is_some() {
            Use::BlockedMounted
        } else {
            Use::Blocked
        });
    }
    let operation = Operation::of(&java, hints.in_vm_call);
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

/// What a stack says of a wait it is the stack of, read once per stack (a recording has
/// thousands of stacks and millions of waits).
#[derive(Clone, Copy, Debug, Default)]
struct StackMark {
    /// A Java stack running a static initializer.
    in_clinit: bool,
    /// A Java stack blocked in a call into the VM, not in a park or a sleep.
    in_vm_call: bool,
    /// A kernel stack in `rt_sigsuspend`.
    sigsuspend: bool,
    /// A native stack in HotSpot's suspend signal handler.
    suspend_handler: bool,
}

/// Every stack's `StackMark`.
#[derive(Default)]
pub(crate) struct StackMarks(FastMap<StackId, StackMark>);

impl StackMarks {
    pub(crate) fn of(model: &Model) -> Self {
        Self(
            model
                .stacks
                .keys()
                .map(|&id| (id, stack_mark(model, id)))
                .collect(),
        )
    }
}

/// What an interval counts as (None: preempted).
pub fn classify(model: &Model, o: &Wait) -> Option<Use> {
    classify_with(model, o, &StackMarks::default())
}

/// `classify`, with what the stacks say read once for many intervals (`StackMarks::of`);
/// a stack `marks` does not hold is read as it comes.
pub(crate) fn classify_with(model: &Model, o: &Wait, marks: &StackMarks) -> Option<Use> {
    let (carrier, major) = (model.is_carrier(o.tid), model.jdk_major());
    // The hints read stacks; only a wait with the JVM's state of the thread uses them.
    if !o.state.is_blocked() || !o.has_java() {
        return interpret(o, carrier, major, StackHints::default());
    }
    let java_stack = model.java_stack(o);
    let mark = |id: Option<StackId>| {
        id.map_or_else(StackMark::default, |id| {
            marks
                .0
                .get(&id)
                .copied()
                .unwrap_or_else(|| stack_mark(model, id))
        })
    };
    let java = mark(java_stack);
    // (What pinned a virtual thread matters only with one mounted.)
    let mounted = o.mounted();
    let hints = StackHints {
        in_clinit: mounted && java.in_clinit,
        in_vm_call: java.in_vm_call,
        class_init_wait: mounted && waits_for_class_init(model, o, java_stack),
        suspended_by_jvm: mark(o.kernel_stack()).sigsuspend || mark(o.user_stack()).suspend_handler,
    };
    interpret(o, carrier, major, hints)
}

/// What one stack says of the wait it is the stack of (see `StackMark`).
fn stack_mark(model: &Model, id: StackId) -> StackMark {
    const PARKS: [&str; 3] = [
        "jdk.internal.misc.Unsafe.park",
        "java.lang.Thread.sleep0",
        "java.lang.Thread.sleepNanos0",
    ];
    let Some(frames) = model.stacks.get(&id) else {
        return StackMark::default();
    };
    let names = || frames.iter().filter_map(|f| f.name.as_deref());
    // The JVM's suspend: its handler waits in `rt_sigsuspend` (kernel stack) or shows as
    // `SR_handler` (native stack), near the top.
    let near_top = |hit: fn(&str) -> bool| {
        frames
            .iter()
            .take(16)
            .any(|f| f.name.as_deref().is_some_and(hit))
    };
    StackMark {
        in_clinit: names().any(|n| n.ends_with(".<clinit>")),
        // Blocked in a call into the VM rather than in a park: the innermost frame is
        // named and is not one of the methods that park or sleep.
        in_vm_call: frames
            .first()
            .and_then(|f| f.name.as_deref())
            .is_some_and(|name| !PARKS.contains(&name) && name != UNKNOWN_JAVA_FRAME),
        sigsuspend: near_top(|n| n.contains("sys_rt_sigsuspend")),
        suspend_handler: near_top(|n| n.contains("SR_handler")),
    }
}

/// Whether an interval waited for another thread's class initialization: its monitor was
/// read as a class's init lock during the wait or, when the wait was too short to be seen
/// so, it waited on an `int[]` (HotSpot's init locks, JDK 21 and 25) in a call into the
/// VM rather than in `Object.wait`.
pub fn waits_for_class_init(model: &Model, o: &Wait, java_stack: Option<StackId>) -> bool {
    let Some(java) = o.java() else {
        return false;
    };
    if let Some(m) = java.pending_monitor.or(java.waiting_monitor)
        && model.class_init_wait(m, o.start_ns, o.end_ns).is_some()
    {
        return true;
    }
    let Some(m) = java.waiting_monitor else {
        return false;
    };
    model.monitor_class(m, o.start_ns) == Some("int[]")
        && java_stack
            .and_then(|id| model.stacks.get(&id))
            .and_then(|frames| frames.first())
            .and_then(|f| f.name.as_deref())
            .is_some_and(|name| {
                !name.starts_with("java.lang.Object.wait") && name != UNKNOWN_JAVA_FRAME
            })
}

/// What each of the model's intervals counts as, in the model's order (None: preempted).
pub fn classify_all(model: &Model) -> Vec<Option<Use>> {
    let marks = StackMarks::of(model);
    model
        .off_cpu
        .iter()
        .map(|o| classify_with(model, o, &marks))
        .collect()
}

/// Every blocked interval with what it counts as, by thread and time.
pub fn uses(model: &Model) -> Vec<(&Wait, Use)> {
    uses_of(model, &classify_all(model))
}

/// `uses`, from `classify_all`'s answers.
pub fn uses_of<'m>(model: &'m Model, classes: &[Option<Use>]) -> Vec<(&'m Wait, Use)> {
    // Sorted by keys copied out (the intervals themselves are scattered in memory), the
    // index last so that the order is the one a stable sort would give.
    let mut keys: Vec<(u32, u64, u32, Use)> = model
        .off_cpu
        .iter()
        .zip(classes)
        .zip(0u32..)
        .filter_map(|((o, used), i)| Some((o.tid, o.start_ns, i, (*used)?)))
        .collect();
    keys.sort_unstable_by_key(|&(tid, start, i, _)| (tid, start, i));
    keys.into_iter()
        .map(|(_, _, i, u)| (&model.off_cpu[i as usize], u))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::Analysis;
    use crate::events::{Event, Frame, FrameKind, JavaBlock, OffCpu, OffCpuState};
    use crate::model::tests::{init_lock_wait, java_frame, make_carrier, parked};

    pub(crate) fn interval(tid: u32, start: u64, end: u64, java: Option<JavaBlock>) -> OffCpu {
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

    pub(crate) fn block(state: JavaThreadState, vthread: Option<u64>) -> JavaBlock {
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
            interpret(&Wait::from(&idle), true, Some(21), StackHints::default()),
            Some(Use::Idle)
        );
        assert_eq!(
            interpret(&Wait::from(&idle), false, Some(21), StackHints::default()),
            Some(Use::Blocked)
        );

        let mut held = block(JavaThreadState::Blocked, Some(42));
        held.held_monitors = 1;
        let pinned = interval(1, 0, 10, Some(held.clone()));
        assert_eq!(
            interpret(&Wait::from(&pinned), true, Some(21), StackHints::default()),
            Some(Use::Pinned(Reason::Monitor, Operation::Park))
        );
        // JEP 491: on 24+ a held monitor is not why it pinned.
        assert_eq!(
            interpret(&Wait::from(&pinned), true, Some(25), StackHints::default()),
            Some(Use::Pinned(Reason::Native, Operation::Park))
        );
        let mut init_wait = block(JavaThreadState::Blocked, Some(42));
        init_wait.waiting_monitor = Some(0x2000);
        init_wait.pin_count = 1;
        assert_eq!(
            interpret(
                &Wait::from(&interval(1, 0, 10, Some(init_wait))),
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
            interpret(
                &Wait::from(&interval(1, 0, 10, Some(vm_wait))),
                true,
                Some(21),
                class_init
            ),
            Some(Use::Pinned(Reason::ClassInit, Operation::ObjectWait))
        );
        held.pin_count = 1;
        assert_eq!(
            interpret(
                &Wait::from(&interval(1, 0, 10, Some(held))),
                true,
                Some(25),
                StackHints::default()
            ),
            Some(Use::Pinned(Reason::CriticalSection, Operation::Park))
        );

        let mut entering = block(JavaThreadState::Blocked, Some(7));
        entering.pending_monitor = Some(0x1000);
        assert_eq!(
            interpret(
                &Wait::from(&interval(1, 0, 10, Some(entering))),
                true,
                Some(21),
                StackHints::default()
            ),
            Some(Use::Pinned(Reason::Monitor, Operation::MonitorEnter))
        );
        let native = interval(1, 0, 10, Some(block(JavaThreadState::InNative, Some(7))));
        assert_eq!(
            interpret(&Wait::from(&native), true, Some(21), StackHints::default()),
            Some(Use::Pinned(Reason::Native, Operation::Syscall))
        );
        let fault = interval(1, 0, 10, Some(block(JavaThreadState::InJava, Some(7))));
        assert_eq!(
            interpret(&Wait::from(&fault), true, Some(21), StackHints::default()),
            Some(Use::BlockedMounted)
        );
        let mut stopped = block(JavaThreadState::Blocked, Some(7));
        stopped.at_safepoint = true;
        let safepoint = interval(1, 0, 10, Some(stopped));
        assert_eq!(
            interpret(
                &Wait::from(&safepoint),
                true,
                Some(21),
                StackHints::default()
            ),
            Some(Use::BlockedMounted)
        );
    }

    #[test]
    fn a_vm_lock_wait_while_mounted_is_not_a_pinned_park() {
        let mut model = Model::default();
        make_carrier(&mut model, 1);
        // Three parks of a carrier holding a monitor: in Unsafe.park, in one of the VM's own
        // locks (reached from a compiled method's call into the VM), and at a frame the walk
        // could not name.
        for (id, start_ms, innermost) in [
            (1, 0, "jdk.internal.misc.Unsafe.park"),
            (2, 10, "[counter_overflow Runtime1 stub]"),
            (3, 20, UNKNOWN_JAVA_FRAME),
        ] {
            let frame = Frame {
                kind: FrameKind::Java,
                addr: 0,
                name: Some(innermost.to_string()),
                module: None,
                holds_monitor: false,
                line: None,
            };
            model.stacks.insert(id, vec![frame]);
            model.java_stacks.insert((1, start_ms * 1_000_000), id);
            model
                .off_cpu
                .push(Wait::from(parked(1, start_ms, 5, Some(7))));
        }
        let uses: Vec<_> = model.off_cpu.iter().map(|o| classify(&model, o)).collect();
        let park = Some(Use::Pinned(Reason::Monitor, Operation::Park));
        // An unnamed frame says nothing either way: the park stands.
        assert_eq!(uses, [park, Some(Use::BlockedMounted), park]);
    }

    #[test]
    fn unseen_class_init_waits_are_told_by_their_stack() {
        // Too short to be read while they lasted: an `int[]` monitor waited on from a call
        // into the VM is an init lock; from Object.wait, the program's own.
        let mut model = Model::default();
        make_carrier(&mut model, 1);
        model.apply(&Event::MonitorClass {
            time_ns: 0,
            monitor: 0x20,
            class: "int[]".into(),
        });
        for (start_ms, top) in [(10, "Shop.price"), (50, "java.lang.Object.wait0")] {
            let id = 100 + start_ms as u32;
            model
                .stacks
                .insert(id, vec![java_frame(top), java_frame("Shop.run")]);
            model.java_stacks.insert((1, start_ms * 1_000_000), id);
            model.apply(&Event::OffCpu(init_lock_wait(start_ms, 5)));
        }
        let reasons: Vec<Reason> = Analysis::new(&model)
            .pinned_events()
            .to_vec()
            .iter()
            .map(|e| e.reason)
            .collect();
        assert_eq!(reasons, [Reason::ClassInit, Reason::Monitor]);
    }

    #[test]
    fn the_jvm_suspending_a_carrier_is_no_pinning() {
        // JDK 25: a virtual thread in native code, its carrier suspended by the JVM (a
        // sampler's or a handshake's signal) in rt_sigsuspend.
        let mut model = Model::default();
        make_carrier(&mut model, 1);
        let frame = |kind, name: &str| Frame {
            kind,
            addr: 0,
            name: Some(name.into()),
            module: None,
            holds_monitor: false,
            line: None,
        };
        model.stacks.insert(
            1,
            ["__schedule", "sigsuspend", "__x64_sys_rt_sigsuspend"]
                .map(|n| frame(FrameKind::Kernel, n))
                .to_vec(),
        );
        model.stacks.insert(
            2,
            vec![frame(
                FrameKind::Native,
                "SR_handler(int, siginfo_t*, void*)",
            )],
        );
        let mut native = parked(1, 0, 5, Some(7));
        if let Some(java) = &mut native.java {
            java.state = JavaThreadState::InNative;
            java.held_monitors = 0;
        }
        let in_native = Some(Use::Pinned(Reason::Native, Operation::Syscall));
        assert_eq!(classify(&model, &Wait::from(&native)), in_native);
        for (kernel, user) in [(Some(1), None), (None, Some(2))] {
            let suspended = OffCpu {
                kernel_stack: kernel,
                user_stack: user,
                ..native.clone()
            };
            assert_eq!(
                classify(&model, &Wait::from(&suspended)),
                Some(Use::BlockedMounted)
            );
        }
    }
}
