//! The model: what the event stream means. Per-thread time accounts and aggregated stacks,
//! built the same way from a live capture or a recording. Views (reports, flamegraphs) read it
//! and never look at raw events.

pub mod carriers;
pub mod intake;
pub mod jdk;
pub mod kinds;
mod load;
pub mod waits;

use std::collections::{BTreeMap, HashMap, HashSet};

/// Said where a wait has no Java frames: its Java stack is walked only if it lasted long
/// enough, and could be read.
pub const NO_JAVA_STACK: &str = "[no Java stack: short wait, or unreadable]";

use carriers::{Episode, Operation, PinnedEvent, Reason, StackHints, Use};
pub use kinds::{FrameClass, LockKind, ThreadRole};

use crate::{
    events::{
        Counters, Event, Frame, FrameKind, JavaThreadInfo, OffCpu, ShortOffCpu, StackId,
        TargetInfo, ThreadCpu, UNKNOWN_JAVA_FRAME,
    },
    recording::{End, Header},
};

/// A hash map for what is looked up once per interval (millions of times a report): a fast
/// hash, still seeded per process (a hostile recording cannot choose its collisions).
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

#[derive(Debug, Default)]
pub struct Model {
    pub target: TargetInfo,
    /// The container the target ran in, when it ran in one.
    pub container: Option<crate::events::ContainerInfo>,
    pub start_mono_ns: u64,
    pub start_unix_ns: u64,
    pub end_mono_ns: u64,
    pub min_off_cpu_ns: u64,
    /// Long system calls start here (0 when system calls were not traced).
    pub min_syscall_ns: u64,
    pub names: HashMap<u32, String>,
    pub stacks: FastMap<StackId, Vec<Frame>>,
    pub off_cpu: Vec<OffCpu>,
    pub counters: Counters,
    pub short: HashMap<u32, ShortOffCpu>,
    pub target_exit_ns: Option<u64>,
    /// Each thread's first and latest scheduler account: (time, account).
    pub cpu_first: HashMap<u32, (u64, ThreadCpu)>,
    pub cpu_last: HashMap<u32, (u64, ThreadCpu)>,
    /// Time of the first snapshot: threads in it were there when the window opened.
    pub cpu_start_ns: Option<u64>,
    /// Threads born during the window: when.
    pub births: HashMap<u32, u64>,
    /// Threads that ended during the window: when, and their whole life's account then.
    pub exits: HashMap<u32, (u64, Option<ThreadCpu>)>,
    /// What went wrong reading the source, said to the user with the results.
    pub warnings: Vec<String>,
    /// Every Java thread seen; a thread once seen as a carrier stays one.
    pub java_threads: FastMap<u32, JavaThreadInfo>,
    /// The class of each Java thread's `java.lang.Thread` object, by thread.
    pub java_thread_classes: HashMap<u32, String>,
    /// Carriers alive, from each Java thread snapshot: (time, count).
    pub carrier_counts: Vec<(u64, u32)>,
    /// Java stacks of off-CPU intervals, by (thread, interval start).
    pub java_stacks: FastMap<(u32, u64), StackId>,
    pub fp_check: Option<crate::events::FramePointerCheck>,
    /// Java stacks by thread, by interval start, in time order (to find a wait's).
    pub java_stack_starts: HashMap<u32, BTreeMap<u64, StackId>>,
    /// Long system calls and futex waits.
    pub syscalls: Vec<crate::events::Syscall>,
    /// Short system calls, by (thread, call): the last snapshot.
    pub syscall_sums: HashMap<(u32, u32), crate::events::SyscallSum>,
    pub kernel_locks: Vec<crate::events::KernelLock>,
    /// Kernel lock contention per thread: (waits, total ns).
    pub kernel_lock_threads: HashMap<u32, (u64, u64)>,
    /// The class of each monitor's object, as read over time: time to class.
    pub monitor_classes: HashMap<u64, BTreeMap<u64, String>>,
    /// Monitors whose object is a `java.lang.Class`: the class it stands for, over time.
    pub monitor_class_objects: HashMap<u64, BTreeMap<u64, String>>,
    /// Monitors seen as the lock of a class initialization under way: read time to what.
    pub class_init_locks: HashMap<u64, BTreeMap<u64, ClassInitWait>>,
    /// Intervals a live view folded into per-thread sums (see `fold_settled`).
    pub folded: HashMap<u32, FoldedIntervals>,
    /// The carriers' waits still under way at the latest checkpoint: (time, waits).
    pub open_waits: Option<(u64, Vec<crate::events::OpenWait>)>,
    /// A live view forgot the pinning, waits and calls that ended before this (see
    /// `forget_before`).
    pub forgotten_before: Option<u64>,
    /// What the checks of the events taken in found (see `intake`).
    pub intake: intake::Intake,
}

/// A thread's intervals that were folded away, summed as `threads` would count them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FoldedIntervals {
    pub intervals: u64,
    pub blocked_intervals: u64,
    pub idle_ns: u64,
    pub blocked_ns: u64,
    pub pinned_ns: u64,
    pub preempted_ns: u64,
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
struct StackMarks(FastMap<StackId, StackMark>);

impl StackMarks {
    fn of(model: &Model) -> Self {
        Self(
            model
                .stacks
                .keys()
                .map(|&id| (id, model.stack_mark(id)))
                .collect(),
        )
    }
}

/// A wait for another thread's initialization of a class.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClassInitWait {
    pub class: String,
    /// The thread running the class's static initializer, if it could be told.
    pub initializer: Option<crate::events::Initializer>,
}

/// A class initialization a site waited for, with its initializer's name, as views show it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct InitWaitedFor {
    pub class: String,
    pub initializer: Option<InitializerThread>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct InitializerThread {
    pub tid: u32,
    pub name: String,
    /// The virtual thread it ran, if one was mounted.
    pub vthread: Option<u64>,
}

impl std::fmt::Display for InitWaitedFor {
    /// `Shop$Fmt by worker-3 (virtual thread #25)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.class)?;
        if let Some(t) = &self.initializer {
            write!(f, " by {}", t.name)?;
            if let Some(v) = t.vthread {
                write!(f, " (virtual thread #{v})")?;
            }
        }
        Ok(())
    }
}

/// What waits on monitors were on, in words: `on a Shop$Till or class Shop$Registry`, or
/// `waiting for the initialization of Shop$Fmt by worker-3`; None when nothing is known.
pub fn monitors_said(
    classes: &std::collections::BTreeSet<String>,
    class_objects: &std::collections::BTreeSet<String>,
    inits: &std::collections::BTreeSet<InitWaitedFor>,
) -> Option<String> {
    const SHOWN: usize = 3;
    if !inits.is_empty() {
        let mut said: Vec<String> = inits.iter().take(SHOWN).map(|i| i.to_string()).collect();
        if inits.len() > SHOWN {
            said.push(format!("{} more", inits.len() - SHOWN));
        }
        return Some(format!(
            "waiting for the initialization of {}",
            said.join(", ")
        ));
    }
    // A `java.lang.Class` object is said by the class it stands for.
    let objects = classes
        .iter()
        .filter(|c| class_objects.is_empty() || c.as_str() != "java.lang.Class")
        .map(|c| format!("a {c}"));
    let said: Vec<String> = objects
        .chain(class_objects.iter().map(|c| format!("class {c}")))
        .collect();
    (!said.is_empty()).then(|| format!("on {}", said.join(" or ")))
}

/// Pinned time at one site: same reason, operation and stack.
#[derive(Clone, Debug, PartialEq)]
pub struct PinnedSite {
    pub reason: Reason,
    pub operation: Operation,
    pub stack: StackLabels,
    pub events: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// `Thread.threadId()` of the virtual threads pinned here.
    pub virtual_threads: std::collections::BTreeSet<u64>,
    /// Thread ids of the carriers they pinned.
    pub carriers: std::collections::BTreeSet<u32>,
    /// Classes of the objects whose monitors they entered or waited on.
    pub monitor_classes: std::collections::BTreeSet<String>,
    /// Of those that were `java.lang.Class` objects (`static synchronized`): their classes.
    pub class_monitors: std::collections::BTreeSet<String>,
    /// For waits for another thread's class initialization: which class, run by whom.
    pub class_inits: std::collections::BTreeSet<InitWaitedFor>,
    /// For monitor entries: the threads whose release of the monitor let them in (the
    /// holders), with how many entries each released.
    pub released_by: BTreeMap<u32, u64>,
}

/// The futex waits of some threads that another thread ended, by thread, in time order: a
/// blocked monitor entry parks in one, and the thread that woke it is the one that released
/// the monitor (its waker is paired in the kernel, inside its own futex call).
struct Releasers(HashMap<u32, Vec<(u64, u64, u32)>>);

impl Releasers {
    fn of(model: &Model, tids: &HashSet<u32>) -> Self {
        let mut waits: HashMap<u32, Vec<(u64, u64, u32)>> = HashMap::new();
        if !tids.is_empty() {
            for s in model.lock_waits().filter(|s| tids.contains(&s.tid)) {
                if let Some(w) = s.futex.as_ref().and_then(|f| f.waker.as_ref()) {
                    waits
                        .entry(s.tid)
                        .or_default()
                        .push((s.start_ns, s.end_ns, w.tid));
                }
            }
        }
        for list in waits.values_mut() {
            list.sort_unstable();
        }
        Self(waits)
    }

    /// Who ended the wait of `tid` that was under way at `end_ns`, the end of its entry's
    /// time off CPU (the call returns just after).
    fn released(&self, tid: u32, end_ns: u64) -> Option<u32> {
        let waits = self.0.get(&tid)?;
        let i = waits.partition_point(|(start, _, _)| *start <= end_ns);
        let (_, end, waker) = waits.get(i.checked_sub(1)?)?;
        (*end >= end_ns).then_some(*waker)
    }
}

/// A stack as views show it, innermost frame first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StackLabels {
    pub frames: Vec<String>,
    /// What each frame is: kernel, native, jit, or how a Java frame ran.
    pub frame_kinds: Vec<FrameClass>,
    /// Indexes of the frames known to hold a monitor.
    pub monitor_frames: Vec<usize>,
    /// Each frame's source line, where known (Java frames).
    pub lines: Vec<Option<u32>>,
}

impl StackLabels {
    pub fn new(stack: &[&Frame], monitor_frames: Vec<usize>) -> Self {
        Self {
            frames: stack.iter().map(|f| f.label()).collect(),
            frame_kinds: stack.iter().map(|f| FrameClass::of(f)).collect(),
            monitor_frames,
            lines: stack.iter().map(|f| f.line).collect(),
        }
    }

    /// Frame `i` as people read it: `pkg.Class.method:159` where its line is known.
    pub fn display(&self, i: usize) -> String {
        match (self.frames.get(i), self.lines.get(i).copied().flatten()) {
            (Some(name), Some(line)) => format!("{name}:{line}"),
            (Some(name), None) => name.clone(),
            (None, _) => String::new(),
        }
    }
}

/// Indexes of the frames that hold a monitor during a pinning. A thread entering a contended
/// `synchronized` method does not hold that monitor yet: its innermost Java frame is the one
/// waiting to enter, so its mark is dropped.
fn holders(frames: &[&Frame], operation: Operation) -> Vec<usize> {
    let mut marked = monitor_frames(frames);
    if operation == Operation::MonitorEnter
        && let Some(first) = frames.iter().position(|f| {
            f.kind == FrameKind::Java
                && matches!(
                    f.module.as_deref(),
                    Some("interpreted" | "compiled" | "inlined" | "native")
                )
        })
    {
        marked.retain(|&i| i != first);
    }
    marked
}

/// Where a pinning is, as a user acts on it: the Java methods from the blocking operation out
/// to the culprit (the frame that holds the monitor, else the innermost application frame).
/// So the same place is one site whether or not its stack says how it ran (a Runtime1 stub on
/// the way into a monitor) or how far the walk got below the culprit (callers frozen in the
/// stack chunk, frames beyond the copy), and with or without kernel and libc frames (a wait
/// from before attach has none). A stack without Java methods is its own place.
fn site_place(stack: &[&Frame], labels: &StackLabels) -> Vec<String> {
    let methods: Vec<(usize, &str)> = stack
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind == FrameKind::Java)
        .filter_map(|(i, f)| Some((i, f.name.as_deref()?)))
        .filter(|(_, name)| !jdk::is_marker(name))
        .collect();
    if methods.is_empty() {
        return labels.frames.clone();
    }
    let culprit = methods
        .iter()
        .map(|&(i, _)| i)
        .find(|i| labels.monitor_frames.contains(i))
        .or_else(|| {
            methods
                .iter()
                .map(|&(i, _)| i)
                .find(|&i| jdk::is_application_frame(stack[i]))
        });
    methods
        .iter()
        .take_while(|(i, _)| culprit.is_none_or(|c| *i <= c))
        .map(|(_, name)| name.to_string())
        .collect()
}

/// Indexes of the frames that hold a monitor.
pub fn monitor_frames(frames: &[&Frame]) -> Vec<usize> {
    frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f.holds_monitor)
        .map(|(i, _)| i)
        .collect()
}

/// One thread's time over the window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadRow {
    pub tid: u32,
    pub name: String,
    pub role: ThreadRole,
    pub running_ns: u64,
    /// Parked with nothing to do (carriers only).
    pub idle_ns: u64,
    /// Off CPU waiting for something (sleep, lock, I/O).
    pub blocked_ns: u64,
    pub pinned_ns: u64,
    /// Runnable but waiting for a CPU.
    pub preempted_ns: u64,
    /// Off-CPU intervals, recorded one by one or summed in the kernel.
    pub intervals: u64,
    /// Time spent contending on kernel locks (a kind of wait; part of blocked or running).
    pub kernel_lock_ns: u64,
    /// Of those recorded one by one, the ones spent waiting (not preempted).
    pub blocked_intervals: u64,
}

/// Blocked time summed over threads (thread-seconds, not wall time).
pub fn blocked_total_ns(threads: &[ThreadRow]) -> u64 {
    total(threads.iter().map(|t| t.blocked_ns))
}

/// Adds to a sum of times or counts from events: many of them can exceed what a `u64`
/// holds (a hostile recording), where the sum stays at its largest.
pub fn add(sum: &mut u64, value: u64) {
    *sum = sum.saturating_add(value);
}

/// The sum of times or counts from events (see `add`).
pub fn total(values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().fold(0, u64::saturating_add)
}

/// Blocked time charged to one (kernel, user) stack pair.
#[derive(Clone, Debug, PartialEq)]
pub struct StackRow {
    /// Kernel frames, then native, then Java.
    pub stack: StackLabels,
    pub events: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Threads that blocked here, by name, most time first.
    pub threads: Vec<String>,
    /// Classes of the objects whose monitors they entered or waited on.
    pub monitor_classes: std::collections::BTreeSet<String>,
    /// Of those that were `java.lang.Class` objects (`static synchronized`): their classes.
    pub class_monitors: std::collections::BTreeSet<String>,
    /// Every thread here is one of the JVM's or the JDK's own (see `jdk_own_threads`): they
    /// wait for work, and are listed after the application's.
    pub jvm_internal: bool,
}

impl Model {
    pub fn new(header: &Header) -> Self {
        let (target, cut) = intake::cut_header(header);
        let mut model = Self {
            target,
            start_mono_ns: header.start_mono_ns,
            start_unix_ns: header.start_unix_ns,
            end_mono_ns: header.start_mono_ns,
            min_off_cpu_ns: header.min_off_cpu_ns,
            min_syscall_ns: header.min_syscall_ns.unwrap_or(0),
            ..Default::default()
        };
        model.count_cut(cut);
        model
    }

    /// The end of the stream: the window closes there, and a capture that failed says why.
    /// An end outside the window (before its start, or more than `MAX_SPAN_NS` after) is
    /// said and not believed: the window then ends with its latest event.
    pub fn finish(&mut self, end: &End) {
        if self.valid_end(end.end_mono_ns) {
            self.end_mono_ns = end.end_mono_ns;
        } else {
            self.warnings.push(format!(
                "the recording's end marker ({} ns) is outside its window (it starts at {} ns): \
                 the window is taken to end with its latest event",
                end.end_mono_ns, self.start_mono_ns
            ));
            self.end_mono_ns = self.end_from_events();
        }
        if let crate::recording::StopReason::Error(e) = &end.reason {
            let mut e = e.clone();
            intake::text(&mut e, intake::MAX_TEXT);
            self.warnings
                .push(format!("capture stopped on an error: {e}"));
        }
    }

    /// Takes in one event, once checked (see `intake`).
    pub fn apply(&mut self, event: &Event) {
        self.apply_owned(event.clone());
    }

    /// As `apply`, for an event the caller no longer needs.
    pub fn apply_owned(&mut self, event: Event) {
        if let Some(event) = self.admit(event) {
            self.take(event);
        }
    }

    /// Takes in a checked event.
    fn take(&mut self, event: Event) {
        match event {
            Event::Thread(t) => {
                // The kernel's name is cut to 15 bytes: it does not replace the JVM's full
                // name it is the start of (a new thread's name can come either way round).
                let cut = self
                    .names
                    .get(&t.tid)
                    .is_some_and(|full| full.len() > t.name.len() && full.starts_with(&t.name));
                if !cut {
                    self.names.insert(t.tid, t.name);
                }
            }
            Event::Stack(s) => {
                self.stacks.insert(s.id, s.frames);
            }
            Event::OffCpu(o) => {
                self.end_mono_ns = self.end_mono_ns.max(o.end_ns);
                if self.is_death(&o) {
                    // A recording made before threads' ends were sent: the wait the thread
                    // died in (until the window's end) is its end, not a wait.
                    self.exits.entry(o.tid).or_insert((o.start_ns, None));
                } else {
                    self.off_cpu.push(o);
                }
            }
            Event::ThreadStart { tid, time_ns } => {
                self.births.insert(tid, time_ns);
            }
            Event::ThreadExit {
                tid,
                time_ns,
                account,
            } => {
                self.exits.insert(tid, (time_ns, account));
            }
            Event::Counters { time_ns, counters } => {
                self.end_mono_ns = self.end_mono_ns.max(time_ns);
                self.counters = counters;
            }
            Event::ShortOffCpu { threads, .. } => {
                self.short = threads.into_iter().map(|s| (s.tid, s)).collect();
            }
            Event::ThreadCpu { time_ns, threads } => {
                self.cpu_start_ns.get_or_insert(time_ns);
                for t in threads {
                    self.cpu_first.entry(t.tid).or_insert((time_ns, t));
                    self.cpu_last.insert(t.tid, (time_ns, t));
                }
            }
            Event::TargetExit { time_ns } => self.target_exit_ns = Some(time_ns),
            Event::JavaThreads { time_ns, threads } => {
                let carriers = threads.iter().filter(|t| t.carrier).count();
                for t in threads {
                    if let Some(name) = &t.name {
                        self.names.insert(t.tid, name.clone());
                    }
                    let carrier = t.carrier;
                    let seen = self.java_threads.entry(t.tid).or_insert(t);
                    seen.carrier |= carrier;
                }
                let carriers = u32::try_from(carriers).unwrap_or(u32::MAX);
                self.carrier_counts.push((time_ns, carriers));
            }
            Event::JavaThreadClasses { threads, .. } => {
                // (A thread's class never changes; the first read stands.)
                for (tid, class) in threads {
                    self.java_thread_classes.entry(tid).or_insert(class);
                }
            }
            Event::Warning(w) => self.warnings.push(w),
            Event::Container(c) => self.container = Some(c),
            Event::FramePointerCheck(check) => self.fp_check = Some(check),
            Event::Syscall(call) => {
                self.end_mono_ns = self.end_mono_ns.max(call.end_ns);
                self.syscalls.push(call);
            }
            Event::SyscallSums { sums, .. } => {
                self.syscall_sums = sums.into_iter().map(|s| ((s.tid, s.nr), s)).collect();
            }
            Event::KernelLocks { locks, threads, .. } => {
                self.kernel_locks = locks;
                self.kernel_lock_threads =
                    threads.into_iter().map(|(t, n, ns)| (t, (n, ns))).collect();
            }
            Event::OpenWaits { time_ns, waits } => {
                self.open_waits = Some((time_ns, waits));
            }
            Event::MonitorClass {
                time_ns,
                monitor,
                class,
            } => {
                // Of two reads at the same time, the later one stands.
                let seen = self.monitor_classes.entry(monitor).or_default();
                seen.insert(time_ns, class);
            }
            Event::MonitorClassObject {
                time_ns,
                monitor,
                class,
            } => {
                let seen = self.monitor_class_objects.entry(monitor).or_default();
                seen.insert(time_ns, class);
            }
            Event::ClassInitLock {
                time_ns,
                monitor,
                class,
                initializer,
            } => {
                let seen = self.class_init_locks.entry(monitor).or_default();
                seen.insert(time_ns, ClassInitWait { class, initializer });
            }
            Event::JavaStack {
                tid,
                start_ns,
                stack,
            } => {
                self.java_stacks.insert((tid, start_ns), stack);
                // Of two stacks of one start, the first one stands.
                let starts = self.java_stack_starts.entry(tid).or_default();
                starts.entry(start_ns).or_insert(stack);
            }
        }
    }

    /// Folds the intervals that ended before `before_ns` into per-thread sums, except those
    /// views need one by one: carriers' pinned and blocked-while-mounted time (pinning events,
    /// starvation). Thread times stay exact; blocked stacks and flamegraphs lose what was
    /// folded, so only the terminal view (live or replayed) does this, to keep its memory and
    /// refresh bounded. A carrier's idle or blocked interval stays: it ends the merging of
    /// monitor-entry retries into one pinned event.
    pub fn fold_settled(&mut self, before_ns: u64) {
        self.fold(before_ns, |model, o, used| match used {
            None => false,
            Some(Use::Pinned(..) | Use::BlockedMounted) => true,
            Some(_) => model.is_carrier(o.tid),
        });
    }

    /// Forgets what ended before `before_ns` and is kept one by one (pinned and carriers'
    /// intervals, long system calls, their Java stacks), once its time is in the per-thread
    /// sums: thread times still cover the whole window, while pinning, starvation, locks and
    /// system calls cover the time since `before_ns`. Bounds a long live view.
    pub fn forget_before(&mut self, before_ns: u64) {
        if before_ns <= self.start_mono_ns {
            return;
        }
        self.fold(before_ns, |_, _, _| false);
        self.syscalls
            .retain(|s| s.end_ns >= before_ns || s.unfinished);
        // Java stacks are keyed by when their wait began (or their release, for a holder):
        // keep those of the waits still kept, thread by thread (one thread's wait as long as
        // the recording would otherwise keep every thread's stacks).
        let mut oldest: HashMap<u32, u64> = HashMap::new();
        let kept = self
            .off_cpu
            .iter()
            .map(|o| (o.tid, o.start_ns))
            .chain(self.syscalls.iter().map(|s| (s.tid, s.start_ns)))
            .chain(self.syscalls.iter().filter_map(|s| {
                let w = s.futex.as_ref()?.waker.as_ref()?;
                Some((w.tid, w.wake_ns))
            }));
        for (tid, start) in kept {
            let from = oldest.entry(tid).or_insert(before_ns);
            *from = (*from).min(start);
        }
        let from = |tid: u32| oldest.get(&tid).copied().unwrap_or(before_ns);
        self.java_stacks
            .retain(|(tid, start), _| *start >= from(*tid));
        self.java_stack_starts.retain(|tid, starts| {
            let from = from(*tid);
            starts.retain(|start, _| *start >= from);
            !starts.is_empty()
        });
        self.forgotten_before = Some(self.forgotten_before.unwrap_or(0).max(before_ns));
    }

    /// Moves the intervals that ended before `before_ns` and that `keep` does not want into
    /// the per-thread sums.
    fn fold(&mut self, before_ns: u64, keep: impl Fn(&Model, &OffCpu, Option<Use>) -> bool) {
        let all = std::mem::take(&mut self.off_cpu);
        let mut kept = Vec::with_capacity(all.len());
        let marks = StackMarks::of(self);
        for o in all {
            let used = self.classify_with(&o, &marks);
            if o.end_ns >= before_ns || keep(self, &o, used) {
                kept.push(o);
                continue;
            }
            let d = self.lived_ns(&o);
            let f = self.folded.entry(o.tid).or_default();
            f.intervals += 1;
            f.blocked_intervals += u64::from(used.is_some());
            match used {
                None => add(&mut f.preempted_ns, d),
                Some(Use::Idle) => add(&mut f.idle_ns, d),
                Some(Use::Pinned(..)) => add(&mut f.pinned_ns, d),
                Some(Use::Blocked | Use::BlockedMounted) => add(&mut f.blocked_ns, d),
            }
        }
        self.off_cpu = kept;
    }

    /// The class of the object whose monitor this was at `time_ns`: the latest read at or
    /// before then, else the first read after.
    pub fn monitor_class(&self, monitor: u64, time_ns: u64) -> Option<&str> {
        let seen = self.monitor_classes.get(&monitor)?;
        seen.range(..=time_ns)
            .next_back()
            .or_else(|| seen.iter().next())
            .map(|(_, class)| class.as_str())
    }

    /// For a monitor whose object was a `java.lang.Class` at `time_ns`: the class it stands
    /// for (read as `monitor_class` is).
    pub fn monitor_class_object(&self, monitor: u64, time_ns: u64) -> Option<&str> {
        if self.monitor_class(monitor, time_ns)? != "java.lang.Class" {
            return None;
        }
        let seen = self.monitor_class_objects.get(&monitor)?;
        seen.range(..=time_ns)
            .next_back()
            .or_else(|| seen.iter().next())
            .map(|(_, class)| class.as_str())
    }

    /// The class initialization a wait on `monitor` from `start_ns` to `end_ns` waited for:
    /// the monitor was read as that class's init lock during the wait (its object may be
    /// another one before or after).
    pub fn class_init_wait(
        &self,
        monitor: u64,
        start_ns: u64,
        end_ns: u64,
    ) -> Option<&ClassInitWait> {
        let seen = self.class_init_locks.get(&monitor)?;
        (start_ns <= end_ns)
            .then(|| seen.range(start_ns..=end_ns).next_back())
            .flatten()
            .map(|(_, wait)| wait)
    }

    /// A class initialization with its initializer named.
    fn init_waited_for(&self, wait: &ClassInitWait) -> InitWaitedFor {
        InitWaitedFor {
            class: wait.class.clone(),
            initializer: wait.initializer.map(|t| InitializerThread {
                tid: t.tid,
                name: self.thread_name(t.tid),
                vthread: t.vthread,
            }),
        }
    }

    /// Adds what a wait on `monitor` at `time_ns` was on: the class of the monitor's object
    /// and, for a `java.lang.Class` object, the class it stands for.
    pub(crate) fn note_monitor(
        &self,
        monitor: u64,
        time_ns: u64,
        classes: &mut std::collections::BTreeSet<String>,
        class_objects: &mut std::collections::BTreeSet<String>,
    ) {
        if let Some(class) = self.monitor_class(monitor, time_ns) {
            classes.insert(class.to_string());
        }
        if let Some(class) = self.monitor_class_object(monitor, time_ns) {
            class_objects.insert(class.to_string());
        }
    }

    pub fn is_carrier(&self, tid: u32) -> bool {
        self.java_threads.get(&tid).is_some_and(|t| t.carrier)
    }

    /// The JDK's feature release, if the target is a JVM of known version.
    pub fn jdk_major(&self) -> Option<u32> {
        self.target.runtime.as_ref().and_then(|r| r.major())
    }

    /// Blocked intervals whose Java stack ends where a virtual thread's frozen frames could
    /// not be read (copied in part and gone from the heap): their older callers are missing.
    /// (A thread preempted, not blocked, has its stack copied without them: it shows in no
    /// stack, so it is not counted.)
    pub fn java_stacks_cut(&self) -> usize {
        self.off_cpu
            .iter()
            .filter(|o| o.state.is_blocked())
            .filter_map(|o| self.java_stack(o))
            .filter(|id| {
                self.stacks
                    .get(id)
                    .and_then(|frames| frames.last())
                    .is_some_and(|f| f.name.as_deref() == Some(crate::jvm::walk::FROZEN_CALLERS))
            })
            .count()
    }

    /// Whether the recording knows the JVM's threads (carriers, mounted state).
    pub fn knows_java_threads(&self) -> bool {
        !self.java_threads.is_empty()
    }

    /// The Java stack walked for an interval, if one was.
    pub fn java_stack(&self, o: &OffCpu) -> Option<StackId> {
        self.java_stacks.get(&(o.tid, o.start_ns)).copied()
    }

    /// What an interval counts as (None: preempted).
    pub fn classify(&self, o: &OffCpu) -> Option<Use> {
        self.classify_with(o, &StackMarks::default())
    }

    /// `classify`, with what the stacks say read once for many intervals (`StackMarks::of`);
    /// a stack `marks` does not hold is read as it comes.
    fn classify_with(&self, o: &OffCpu, marks: &StackMarks) -> Option<Use> {
        let (carrier, major) = (self.is_carrier(o.tid), self.jdk_major());
        // The hints read stacks; only a wait with the JVM's state of the thread uses them.
        if !o.state.is_blocked() || o.java.is_none() {
            return carriers::classify(o, carrier, major, StackHints::default());
        }
        let java_stack = self.java_stack(o);
        let mark = |id: Option<StackId>| {
            id.map_or_else(StackMark::default, |id| {
                marks
                    .0
                    .get(&id)
                    .copied()
                    .unwrap_or_else(|| self.stack_mark(id))
            })
        };
        let java = mark(java_stack);
        // (What pinned a virtual thread matters only with one mounted.)
        let mounted = o.java.as_ref().is_some_and(|j| j.vthread.is_some());
        let hints = StackHints {
            in_clinit: mounted && java.in_clinit,
            in_vm_call: java.in_vm_call,
            class_init_wait: mounted && self.waits_for_class_init(o, java_stack),
            suspended_by_jvm: mark(o.kernel_stack).sigsuspend || mark(o.user_stack).suspend_handler,
        };
        carriers::classify(o, carrier, major, hints)
    }

    /// What one stack says of the wait it is the stack of (see `StackMark`).
    fn stack_mark(&self, id: StackId) -> StackMark {
        const PARKS: [&str; 3] = [
            "jdk.internal.misc.Unsafe.park",
            "java.lang.Thread.sleep0",
            "java.lang.Thread.sleepNanos0",
        ];
        let Some(frames) = self.stacks.get(&id) else {
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
    fn waits_for_class_init(&self, o: &OffCpu, java_stack: Option<StackId>) -> bool {
        let Some(java) = &o.java else {
            return false;
        };
        if let Some(m) = java.pending_monitor.or(java.waiting_monitor)
            && self.class_init_wait(m, o.start_ns, o.end_ns).is_some()
        {
            return true;
        }
        let Some(m) = java.waiting_monitor else {
            return false;
        };
        self.monitor_class(m, o.start_ns) == Some("int[]")
            && java_stack
                .and_then(|id| self.stacks.get(&id))
                .and_then(|frames| frames.first())
                .and_then(|f| f.name.as_deref())
                .is_some_and(|name| {
                    !name.starts_with("java.lang.Object.wait") && name != UNKNOWN_JAVA_FRAME
                })
    }

    /// Every blocked interval with what it counts as, by thread and time.
    pub fn uses(&self) -> Vec<(&OffCpu, Use)> {
        let marks = StackMarks::of(self);
        // Sorted by keys copied out (the intervals themselves are scattered in memory), the
        // index last so that the order is the one a stable sort would give.
        let mut keys: Vec<(u32, u64, u32, Use)> = self
            .off_cpu
            .iter()
            .zip(0u32..)
            .filter_map(|(o, i)| Some((o.tid, o.start_ns, i, self.classify_with(o, &marks)?)))
            .collect();
        keys.sort_unstable_by_key(|&(tid, start, i, _)| (tid, start, i));
        keys.into_iter()
            .map(|(_, _, i, u)| (&self.off_cpu[i as usize], u))
            .collect()
    }

    /// Every pinning, in time order.
    pub fn pinned_events(&self) -> Vec<PinnedEvent> {
        self.pinned_events_in(&self.uses())
    }

    /// The pinnings among `uses` (from `uses`, which a caller needing both this and
    /// `starvation_in` computes once).
    pub fn pinned_events_in(&self, uses: &[(&OffCpu, Use)]) -> Vec<PinnedEvent> {
        // (Only a pinning needs its Java stack.)
        let with_stacks = uses.iter().map(|&(o, u)| {
            let pinned = matches!(u, Use::Pinned(..));
            (o, u, pinned.then(|| self.java_stack(o)).flatten())
        });
        let mut events = carriers::pinned_events(with_stacks);
        events.sort_by_key(|e| (e.start_ns, e.carrier));
        events
    }

    /// Pinned sites, most time first.
    pub fn pinned_sites(&self, events: &[PinnedEvent]) -> Vec<PinnedSite> {
        // Events are grouped by their stack ids first, so each distinct stack is labelled
        // once (a live view does this every refresh); groups whose labels read the same
        // (other ids, same frames) are one site.
        type Ids = (
            Reason,
            Operation,
            Option<StackId>,
            Option<StackId>,
            Option<StackId>,
        );
        let mut by_ids: HashMap<Ids, Vec<&PinnedEvent>> = HashMap::new();
        for e in events {
            let ids = (
                e.reason,
                e.operation,
                e.kernel_stack,
                e.user_stack,
                e.java_stack,
            );
            by_ids.entry(ids).or_default().push(e);
        }
        let entering: HashSet<u32> = events
            .iter()
            .filter(|e| e.operation == Operation::MonitorEnter)
            .map(|e| e.carrier)
            .collect();
        let releasers = Releasers::of(self, &entering);
        let mut sites: HashMap<(Reason, Operation, Vec<String>), PinnedSite> = HashMap::new();
        for ((reason, operation, kernel, user, java), group) in by_ids {
            let stack = self.frames_of(kernel, user, java);
            let labels = StackLabels::new(&stack, holders(&stack, operation));
            let place = site_place(&stack, &labels);
            let site = sites
                .entry((reason, operation, place))
                .or_insert_with(|| PinnedSite {
                    reason,
                    operation,
                    stack: labels.clone(),
                    events: 0,
                    total_ns: 0,
                    max_ns: 0,
                    virtual_threads: Default::default(),
                    carriers: Default::default(),
                    monitor_classes: Default::default(),
                    class_monitors: Default::default(),
                    class_inits: Default::default(),
                    released_by: Default::default(),
                });
            // (The same one whatever order the groups come in.)
            if (labels.frames.len(), &labels) > (site.stack.frames.len(), &site.stack) {
                site.stack = labels;
            }
            for e in group {
                if e.operation == Operation::MonitorEnter
                    && let Some(holder) = releasers.released(e.carrier, e.end_ns)
                {
                    *site.released_by.entry(holder).or_default() += 1;
                }
                if let Some(m) = e.monitor {
                    self.note_monitor(
                        m,
                        e.start_ns,
                        &mut site.monitor_classes,
                        &mut site.class_monitors,
                    );
                    if e.reason == Reason::ClassInit
                        && let Some(wait) = self.class_init_wait(m, e.start_ns, e.end_ns)
                    {
                        site.class_inits.insert(self.init_waited_for(wait));
                    }
                }
                site.virtual_threads.insert(e.vthread);
                site.carriers.insert(e.carrier);
                site.events += 1;
                add(&mut site.total_ns, e.duration_ns());
                site.max_ns = site.max_ns.max(e.duration_ns());
            }
        }
        let mut sites: Vec<PinnedSite> = sites.into_values().collect();
        sites.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.stack.cmp(&b.stack)));
        sites
    }

    /// Starvation under way at the latest checkpoint: every carrier alive in a wait that has
    /// not ended, pinned or blocked with a virtual thread mounted. Returns since when (the
    /// latest of their starts) and how many carriers.
    pub fn starving_now(&self) -> Option<(u64, u32)> {
        let (time_ns, _) = self.open_waits.as_ref()?;
        let unavailable: Vec<u64> = self
            .open_intervals()
            .iter()
            .filter(|o| {
                matches!(
                    self.classify(o),
                    Some(Use::Pinned(..) | Use::BlockedMounted)
                )
            })
            .map(|o| o.start_ns)
            .collect();
        let counts = &self.carrier_counts;
        let i = counts.partition_point(|(t, _)| t <= time_ns);
        let alive = counts.get(i.checked_sub(1)?).map(|(_, n)| *n)?;
        (alive > 0 && u32::try_from(unavailable.len()).unwrap_or(u32::MAX) >= alive)
            .then(|| (unavailable.iter().copied().max().unwrap_or(*time_ns), alive))
    }

    /// Spans when no carrier was free: every one pinned or blocked with a virtual thread.
    /// Computed from `uses` (see `pinned_events_in`).
    pub fn starvation_in(&self, uses: &[(&OffCpu, Use)]) -> Vec<Episode> {
        let spans = uses
            .iter()
            .filter(|(o, u)| {
                self.is_carrier(o.tid) && matches!(u, Use::Pinned(..) | Use::BlockedMounted)
            })
            .map(|(o, _)| (o.tid, o.start_ns, o.end_ns))
            .collect();
        let counts = &self.carrier_counts;
        carriers::starvation(spans, |t| {
            // The latest snapshot at or before t (the first one for earlier times).
            let i = counts.partition_point(|(time, _)| *time <= t);
            counts.get(i.saturating_sub(1)).map_or(0, |(_, n)| *n)
        })
    }

    pub fn duration_ns(&self) -> u64 {
        self.end_mono_ns.saturating_sub(self.start_mono_ns)
    }

    pub fn thread_name(&self, tid: u32) -> String {
        self.names
            .get(&tid)
            .cloned()
            .unwrap_or_else(|| format!("tid-{tid}"))
    }

    /// The carriers' waits still under way at the latest checkpoint, as intervals up to it;
    /// those whose interval has come in since (they ended) are left out.
    fn open_intervals(&self) -> Vec<OffCpu> {
        let Some((time_ns, waits)) = &self.open_waits else {
            return Vec::new();
        };
        let keys: HashSet<(u32, u64)> = waits.iter().map(|w| (w.tid, w.start_ns)).collect();
        // Only an interval that ended after the checkpoint can close one of its waits, and
        // intervals come in about the order they end (a second of slack for the drain).
        let since = time_ns.saturating_sub(1_000_000_000);
        let ended: HashSet<(u32, u64)> = if keys.is_empty() {
            HashSet::new()
        } else {
            self.off_cpu
                .iter()
                .rev()
                .take_while(|o| o.end_ns >= since)
                .map(|o| (o.tid, o.start_ns))
                .filter(|k| keys.contains(k))
                .collect()
        };
        waits
            .iter()
            .filter(|w| !ended.contains(&(w.tid, w.start_ns)))
            .map(|w| OffCpu {
                tid: w.tid,
                start_ns: w.start_ns,
                end_ns: *time_ns,
                state: w.state,
                kernel_stack: None,
                user_stack: None,
                waker_tid: None,
                cpu: 0,
                java: w.java.clone(),
            })
            .collect()
    }

    /// Every thread seen, most blocked or pinned first. A carrier's wait still under way counts for
    /// what it is (pinned, idle, blocked) as far as it has gone: a live view would otherwise
    /// know it only as unexplained time off CPU until it ends.
    pub fn threads(&self) -> Vec<ThreadRow> {
        let mut rows: BTreeMap<u32, ThreadRow> = BTreeMap::new();
        let open = self.open_intervals();
        let marks = StackMarks::of(self);
        for o in self.off_cpu.iter().chain(&open) {
            let used = self.classify_with(o, &marks);
            let d = self.lived_ns(o);
            let r = self.row(&mut rows, o.tid);
            r.intervals += 1;
            r.blocked_intervals += u64::from(used.is_some());
            match used {
                None => add(&mut r.preempted_ns, d),
                Some(Use::Idle) => add(&mut r.idle_ns, d),
                Some(Use::Pinned(..)) => add(&mut r.pinned_ns, d),
                Some(Use::Blocked | Use::BlockedMounted) => add(&mut r.blocked_ns, d),
            }
        }
        for (&tid, f) in &self.folded {
            let r = self.row(&mut rows, tid);
            add(&mut r.intervals, f.intervals);
            add(&mut r.blocked_intervals, f.blocked_intervals);
            add(&mut r.idle_ns, f.idle_ns);
            add(&mut r.blocked_ns, f.blocked_ns);
            add(&mut r.pinned_ns, f.pinned_ns);
            add(&mut r.preempted_ns, f.preempted_ns);
        }
        for s in self.short.values() {
            let r = self.row(&mut rows, s.tid);
            add(&mut r.intervals, s.count);
            add(&mut r.preempted_ns, s.preempted_ns);
            add(&mut r.blocked_ns, s.total_ns.saturating_sub(s.preempted_ns));
        }
        for &tid in self.names.keys() {
            self.row(&mut rows, tid);
        }
        for &tid in self.cpu_first.keys().chain(self.exits.keys()) {
            self.row(&mut rows, tid);
        }
        let mut rows: Vec<ThreadRow> = rows
            .into_values()
            .map(|mut r| {
                self.account(&mut r);
                r.kernel_lock_ns = self.kernel_lock_threads.get(&r.tid).map_or(0, |k| k.1);
                r
            })
            .collect();
        // A pinned carrier is blocked with a virtual thread on it: as much in the way.
        rows.sort_by(|a, b| {
            (b.blocked_ns + b.pinned_ns)
                .cmp(&(a.blocked_ns + a.pinned_ns))
                .then(a.tid.cmp(&b.tid))
        });
        rows
    }

    /// Running and run-queue time come from the scheduler's own account: its last one (at
    /// the thread's exit, else the latest snapshot) less its first in the window. Blocked time
    /// is the rest of the thread's time between the two, less its idle and pinned time (its
    /// waits that began before attach count too; a wake-up's wait for a CPU is counted once,
    /// as run-queue time). A thread born in the window has its whole life in its account; one
    /// whose account is not known runs for what is left of its life. Whatever the figures,
    /// their sum is at most the thread's life in the window.
    fn account(&self, r: &mut ThreadRow) {
        let (from, to) = self.life(r.tid);
        let first = self.cpu_first.get(&r.tid);
        let born = self.births.get(&r.tid).copied();
        // (A thread seen born is not, even if the first snapshot was read after its birth.)
        let there_at_start =
            born.is_none() && first.is_some_and(|(t, _)| Some(*t) == self.cpu_start_ns);
        let last = self
            .exits
            .get(&r.tid)
            .and_then(|(t, account)| Some((*t, (*account)?)))
            .or_else(|| self.cpu_last.get(&r.tid).copied());
        match (first, last) {
            (Some((t0, first)), Some((t1, last))) if there_at_start && t1 > *t0 => {
                r.running_ns = last.run_ns.saturating_sub(first.run_ns);
                r.preempted_ns = last.wait_ns.saturating_sub(first.wait_ns);
                r.blocked_ns = (t1 - t0).saturating_sub(total([
                    r.running_ns,
                    r.preempted_ns,
                    r.idle_ns,
                    r.pinned_ns,
                ]));
            }
            (_, Some((t1, last))) if !there_at_start => {
                r.running_ns = last.run_ns;
                r.preempted_ns = last.wait_ns;
                // Born in the window: every wait was seen, and its life is known.
                if let Some(born) = born {
                    r.blocked_ns = t1.saturating_sub(born).saturating_sub(total([
                        r.running_ns,
                        r.preempted_ns,
                        r.idle_ns,
                        r.pinned_ns,
                    ]));
                }
            }
            // Without an account, it ran for what is left of its life, if its life is known:
            // born in the window, or there when it opened (a thread only named, say by the
            // JVM's list read before attach, may have ended before), and it was seen in it
            // (a birth alone, with its end before the window opened, says nothing of it).
            _ if (born.is_some() || there_at_start || self.cpu_start_ns.is_none())
                && r.intervals > 0 =>
            {
                r.running_ns = (to - from).saturating_sub(total([
                    r.blocked_ns,
                    r.preempted_ns,
                    r.idle_ns,
                    r.pinned_ns,
                ]));
            }
            _ => {}
        }
        // Beyond its life only by what was counted twice (a wait for a CPU after a wake-up
        // is also the end of an idle or pinned interval): taken from blocked, then run-queue.
        let mut excess = total([
            r.running_ns,
            r.preempted_ns,
            r.blocked_ns,
            r.idle_ns,
            r.pinned_ns,
        ])
        .saturating_sub(to - from);
        for part in [&mut r.blocked_ns, &mut r.preempted_ns, &mut r.running_ns] {
            let cut = excess.min(*part);
            *part -= cut;
            excess -= cut;
        }
    }

    /// The span of the window a thread lived in: from its birth (or the window's start) to
    /// its exit (or the window's end).
    pub fn life(&self, tid: u32) -> (u64, u64) {
        let start = self.start_mono_ns;
        let end = self.end_mono_ns.max(start);
        let to = self
            .exits
            .get(&tid)
            .map_or(end, |(t, _)| *t)
            .clamp(start, end);
        let from = self.births.get(&tid).map_or(start, |t| *t).clamp(start, to);
        (from, to)
    }

    /// The part of an interval that lies within its thread's life.
    pub fn lived_ns(&self, o: &OffCpu) -> u64 {
        let (from, to) = self.life(o.tid);
        o.end_ns.min(to).saturating_sub(o.start_ns.max(from))
    }

    /// Whether an interval is the one a thread died in (a recording from before threads'
    /// ends were sent): the kernel switched it out in `do_task_dead`.
    fn is_death(&self, o: &OffCpu) -> bool {
        o.kernel_stack
            .and_then(|id| self.stacks.get(&id))
            .is_some_and(|frames| {
                frames
                    .iter()
                    .take(8)
                    .any(|f| f.name.as_deref() == Some("do_task_dead"))
            })
    }

    fn row<'a>(&self, rows: &'a mut BTreeMap<u32, ThreadRow>, tid: u32) -> &'a mut ThreadRow {
        rows.entry(tid).or_insert_with(|| ThreadRow {
            tid,
            name: self.thread_name(tid),
            role: if self.is_carrier(tid) {
                ThreadRole::Carrier
            } else {
                ThreadRole::Other
            },
            ..Default::default()
        })
    }

    /// The frames of an interval, innermost first: kernel, native, then Java.
    pub fn frames(&self, o: &OffCpu) -> Vec<&Frame> {
        self.frames_of(o.kernel_stack, o.user_stack, self.java_stack(o))
    }

    pub fn frames_of(
        &self,
        kernel: Option<StackId>,
        user: Option<StackId>,
        java: Option<StackId>,
    ) -> Vec<&Frame> {
        let kernel = kernel
            .and_then(|id| self.stacks.get(&id))
            .into_iter()
            .flatten();
        let java = java.and_then(|id| self.stacks.get(&id));
        // With Java frames to follow, native frames end where JIT code begins (addresses in
        // no file): the Java walk names those frames properly.
        let user = user
            .and_then(|id| self.stacks.get(&id))
            .into_iter()
            .flatten()
            .take_while(|f| java.is_none() || f.name.is_some() || f.module.is_some());
        kernel
            .chain(user)
            .chain(java.into_iter().flatten())
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::events::{JavaBlock, JavaThreadState, OffCpuState};

    pub(crate) fn interval(tid: u32, start_ms: u64, ms: u64, state: OffCpuState) -> OffCpu {
        OffCpu {
            tid,
            start_ns: start_ms * 1_000_000,
            end_ns: (start_ms + ms) * 1_000_000,
            state,
            kernel_stack: None,
            user_stack: None,
            waker_tid: None,
            cpu: 0,
            java: None,
        }
    }

    /// A Java thread's park (holding a monitor when a virtual thread is mounted).
    pub(crate) fn parked(tid: u32, start_ms: u64, ms: u64, vthread: Option<u64>) -> OffCpu {
        OffCpu {
            java: Some(JavaBlock {
                state: JavaThreadState::Blocked,
                vthread,
                pending_monitor: None,
                waiting_monitor: None,
                held_monitors: u32::from(vthread.is_some()),
                pin_count: 0,
                at_safepoint: false,
                anchor: [0; 3],
            }),
            ..interval(tid, start_ms, ms, OffCpuState::Sleeping)
        }
    }

    fn make_carrier(model: &mut Model, tid: u32) {
        let info = JavaThreadInfo {
            tid,
            name: Some(format!("carrier-{tid}")),
            carrier: true,
        };
        model.java_threads.insert(tid, info);
    }

    /// A contended monitor entry of virtual thread 7 on the carrier.
    fn entering(start_ms: u64, ms: u64) -> OffCpu {
        let mut o = parked(1, start_ms, ms, Some(7));
        if let Some(java) = &mut o.java {
            java.pending_monitor = Some(0x10);
        }
        o
    }

    #[test]
    fn one_place_is_one_site_however_its_stack_ends_or_enters_the_monitor() {
        let java = |name: &str, module: &str, holds_monitor: bool| Frame {
            kind: FrameKind::Java,
            addr: 0,
            name: Some(name.into()),
            module: Some(module.into()),
            holds_monitor,
            line: None,
        };
        let top = [
            java("jdk.internal.misc.Unsafe.park", "native", false),
            java("java.lang.Thread.sleep", "interpreted", false),
            java("Shop$PriceCache.refresh", "interpreted", true),
            java("Shop.handle", "compiled", false),
        ];
        let place = |bottom: &[Frame]| {
            let frames: Vec<&Frame> = top.iter().chain(bottom).collect();
            site_place(&frames, &StackLabels::new(&frames, monitor_frames(&frames)))
        };
        let full = place(&[
            java("Shop.serve", "compiled", false),
            java("java.lang.VirtualThread.run", "interpreted", false),
        ]);
        assert_eq!(
            full,
            [
                "jdk.internal.misc.Unsafe.park",
                "java.lang.Thread.sleep",
                "Shop$PriceCache.refresh"
            ]
        );
        let frozen = [java(
            "[callers frozen in the virtual thread's stack chunk]",
            "stub",
            false,
        )];
        assert_eq!(place(&frozen), full);
        assert_eq!(
            place(&[java("[more frames beyond the copied stack]", "", false)]),
            full
        );
        // A Runtime1 stub on the way into the monitor is how, not where.
        let mut stubbed = vec![java("[monitorenter_nofpu Runtime1 stub]", "stub", false)];
        stubbed.extend(top.iter().cloned());
        let frames: Vec<&Frame> = stubbed.iter().collect();
        let labels = StackLabels::new(&frames, monitor_frames(&frames));
        assert_eq!(site_place(&frames, &labels), full);
        // Another monitor holder is another place.
        let other = [java("Shop$Pool.take", "interpreted", true)];
        let frames: Vec<&Frame> = top[..2].iter().chain(&other).collect();
        let labels = StackLabels::new(&frames, monitor_frames(&frames));
        assert_ne!(site_place(&frames, &labels), full);
    }

    #[test]
    fn stacks_without_java_frames_are_not_merged_across_threads() {
        let model = Model {
            end_mono_ns: 100_000_000,
            off_cpu: vec![
                interval(1, 0, 10, OffCpuState::Sleeping),
                interval(2, 0, 20, OffCpuState::Sleeping),
                interval(2, 30, 20, OffCpuState::Sleeping),
            ],
            ..Default::default()
        };
        let rows = crate::analysis::Analysis::new(&model)
            .blocked_stacks()
            .to_vec();
        let threads: Vec<(Vec<String>, u64)> =
            rows.iter().map(|r| (r.threads.clone(), r.events)).collect();
        assert_eq!(
            threads,
            [
                (vec!["tid-2".to_string()], 2),
                (vec!["tid-1".to_string()], 1)
            ]
        );
    }

    #[test]
    fn the_jvms_full_thread_name_outlives_the_kernels_cut_one() {
        use crate::events::ThreadName;
        let kernel = |name: &str| {
            Event::Thread(ThreadName {
                tid: 5,
                name: name.into(),
            })
        };
        let jvm = Event::JavaThreads {
            time_ns: 0,
            threads: vec![JavaThreadInfo {
                tid: 5,
                name: Some("ForkJoinPool-1-worker-3".into()),
                carrier: true,
            }],
        };
        // Either order: the kernel's name first (a new thread), or after (its rename).
        for events in [
            [kernel("ForkJoinPool-1-"), jvm.clone()],
            [jvm.clone(), kernel("ForkJoinPool-1-")],
        ] {
            let mut model = Model::default();
            for e in &events {
                model.apply(e);
            }
            assert_eq!(model.thread_name(5), "ForkJoinPool-1-worker-3");
        }
        // A real rename is taken.
        let mut model = Model::default();
        model.apply(&jvm);
        model.apply(&kernel("ledger-writer"));
        assert_eq!(model.thread_name(5), "ledger-writer");
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
            model.off_cpu.push(parked(1, start_ms, 5, Some(7)));
        }
        let uses: Vec<_> = model.off_cpu.iter().map(|o| model.classify(o)).collect();
        let park = Some(Use::Pinned(Reason::Monitor, Operation::Park));
        // An unnamed frame says nothing either way: the park stands.
        assert_eq!(uses, [park, Some(Use::BlockedMounted), park]);
    }

    #[test]
    fn folding_settled_intervals_keeps_thread_times_and_pinning() {
        let mut model = Model {
            end_mono_ns: 100_000_000,
            ..Default::default()
        };
        make_carrier(&mut model, 1);
        model.off_cpu = vec![
            parked(1, 0, 5, None),      // idle
            parked(1, 10, 20, Some(7)), // pinned (a monitor held on JDK 21)
            interval(1, 40, 1, OffCpuState::Preempted),
            // Two entries of the same monitor, apart: an idle park between them ends the first.
            entering(42, 1),
            parked(1, 43, 1, None),
            entering(44, 1),
            interval(2, 0, 30, OffCpuState::Sleeping), // another thread, blocked
            interval(2, 50, 2, OffCpuState::Preempted),
            interval(2, 90, 5, OffCpuState::Sleeping), // not settled yet
        ];
        let (threads, pinned, starvation) = (
            model.threads(),
            model.pinned_events(),
            model.starvation_in(&model.uses()),
        );
        model.fold_settled(60_000_000);
        assert_eq!(
            model.off_cpu.len(),
            6,
            "the carrier's (pinned, idle) and the unsettled remain"
        );
        assert_eq!(model.threads(), threads);
        assert_eq!(model.pinned_events(), pinned);
        assert_eq!(model.starvation_in(&model.uses()), starvation);
        assert_eq!(pinned.len(), 3);
    }

    #[test]
    fn a_timed_out_futex_wait_is_no_lock_wait_whoever_ran_its_wake_up() {
        let wait = |ret: i64| crate::events::Syscall {
            tid: 1,
            nr: 202,
            name: "futex".into(),
            args: [0x1000, 0, 0, 0],
            start_ns: 0,
            end_ns: 5_000_000,
            ret,
            user_stack: None,
            fd: None,
            futex: Some(crate::events::FutexWait {
                uaddr: 0x1000,
                op: 0,
                timeout_ns: Some(5_000_000),
                // The timer interrupted thread 2 inside a futex call of its own.
                waker: Some(crate::events::FutexWaker {
                    tid: 2,
                    wake_ns: 5_000_000,
                    user_stack: None,
                    kernel_stack: None,
                }),
            }),
            unfinished: false,
        };
        let model = Model {
            syscalls: vec![wait(-110), wait(0)],
            ..Default::default()
        };
        let released: Vec<i64> = model.lock_waits().map(|s| s.ret).collect();
        assert_eq!(released, vec![0]);
        assert_eq!(model.locks(&model.jdk_own_threads())[0].waits, 1);
    }

    #[test]
    fn monitors_are_named_by_the_class_read_closest_before() {
        let mut model = Model::default();
        let class = |time_ns: u64, class: &str| Event::MonitorClass {
            time_ns,
            monitor: 0x10,
            class: class.into(),
        };
        // Read at 40 ms for an object of one class, then (a reused monitor) at 100 ms.
        model.apply(&class(100_000_000, "Shop$Basket"));
        model.apply(&class(40_000_000, "Shop$Till"));
        model.apply(&Event::OffCpu(entering(42, 1)));
        assert_eq!(model.monitor_class(0x10, 10_000_000), Some("Shop$Till"));
        assert_eq!(model.monitor_class(0x10, 120_000_000), Some("Shop$Basket"));
        let stacks = crate::analysis::Analysis::new(&model)
            .blocked_stacks()
            .to_vec();
        assert_eq!(
            stacks[0].monitor_classes.iter().collect::<Vec<_>>(),
            ["Shop$Till"]
        );
    }

    /// Virtual thread 7 on carrier 1 waits on monitor 0x20 (an `int[]`), no monitor held.
    fn init_lock_wait(start_ms: u64, ms: u64) -> OffCpu {
        let mut o = parked(1, start_ms, ms, Some(7));
        if let Some(java) = &mut o.java {
            java.waiting_monitor = Some(0x20);
            java.held_monitors = 0;
        }
        o
    }

    fn java_frame(name: &str) -> Frame {
        Frame {
            kind: FrameKind::Java,
            addr: 0,
            name: Some(name.into()),
            module: Some("interpreted".into()),
            holds_monitor: false,
            line: None,
        }
    }

    #[test]
    fn class_init_waits_are_named_by_the_lock_read_during_them() {
        use crate::events::Initializer;
        let ms = 1_000_000;
        let mut model = Model::default();
        make_carrier(&mut model, 1);
        model.names.insert(2, "worker-2".into());
        model.apply(&Event::MonitorClass {
            time_ns: 100 * ms,
            monitor: 0x20,
            class: "int[]".into(),
        });
        // Read during the first wait; the second, later, on the same monitor is another.
        model.apply(&Event::ClassInitLock {
            time_ns: 500 * ms,
            monitor: 0x20,
            class: "Shop$Fmt".into(),
            initializer: Some(Initializer {
                tid: 2,
                vthread: Some(9),
            }),
        });
        model.apply(&Event::OffCpu(init_lock_wait(100, 1000)));
        model.apply(&Event::OffCpu(init_lock_wait(3000, 100)));
        let events = model.pinned_events();
        let reasons: Vec<Reason> = events.iter().map(|e| e.reason).collect();
        assert_eq!(reasons, [Reason::ClassInit, Reason::Monitor]);
        let sites = model.pinned_sites(&events);
        let init = sites
            .iter()
            .find(|s| s.reason == Reason::ClassInit)
            .unwrap();
        let said = monitors_said(
            &init.monitor_classes,
            &init.class_monitors,
            &init.class_inits,
        );
        assert_eq!(
            said.as_deref(),
            Some("waiting for the initialization of Shop$Fmt by worker-2 (virtual thread #9)")
        );
        let other = sites.iter().find(|s| s.reason == Reason::Monitor).unwrap();
        assert!(other.class_inits.is_empty());
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
        let reasons: Vec<Reason> = model.pinned_events().iter().map(|e| e.reason).collect();
        assert_eq!(reasons, [Reason::ClassInit, Reason::Monitor]);
    }

    #[test]
    fn class_objects_are_said_by_their_class() {
        let set = |items: &[&str]| items.iter().map(|s| s.to_string()).collect();
        let none = Default::default();
        assert_eq!(
            monitors_said(&set(&["java.lang.Class"]), &set(&["Shop$Registry"]), &none).as_deref(),
            Some("on class Shop$Registry")
        );
        assert_eq!(
            monitors_said(
                &set(&["Shop$Till", "java.lang.Class"]),
                &set(&["Shop$Registry"]),
                &none
            )
            .as_deref(),
            Some("on a Shop$Till or class Shop$Registry")
        );
        assert_eq!(monitors_said(&set(&[]), &set(&[]), &none), None);

        let mut model = Model::default();
        for event in [
            Event::MonitorClass {
                time_ns: 0,
                monitor: 0x10,
                class: "java.lang.Class".into(),
            },
            Event::MonitorClassObject {
                time_ns: 0,
                monitor: 0x10,
                class: "Shop$Registry".into(),
            },
            Event::OffCpu(entering(42, 1)),
        ] {
            model.apply(&event);
        }
        let stacks = crate::analysis::Analysis::new(&model)
            .blocked_stacks()
            .to_vec();
        assert_eq!(
            stacks[0].class_monitors.iter().collect::<Vec<_>>(),
            ["Shop$Registry"]
        );
    }

    #[test]
    fn forgetting_keeps_thread_times_and_drops_old_pinning() {
        let mut model = Model {
            end_mono_ns: 100_000_000,
            ..Default::default()
        };
        make_carrier(&mut model, 1);
        model.off_cpu = vec![
            parked(1, 0, 20, Some(7)),  // pinned, old
            parked(1, 25, 5, None),     // idle, old
            parked(1, 70, 20, Some(7)), // pinned, recent
        ];
        let threads = model.threads();
        model.forget_before(50_000_000);
        assert_eq!(
            model.threads(),
            threads,
            "thread times cover the whole window"
        );
        let pinned = model.pinned_events();
        assert_eq!(pinned.len(), 1);
        assert_eq!(pinned[0].start_ns, 70_000_000);
        assert_eq!(model.forgotten_before, Some(50_000_000));
    }

    #[test]
    fn forgetting_drops_java_stacks_thread_by_thread() {
        let mut model = Model {
            end_mono_ns: 100_000_000,
            ..Default::default()
        };
        make_carrier(&mut model, 1);
        model.off_cpu = vec![
            parked(1, 10, 20, Some(7)),                // old
            parked(1, 70, 20, Some(7)),                // recent
            interval(2, 5, 90, OffCpuState::Sleeping), // one long wait into the window
        ];
        for (key, id) in [((1, 10), 1), ((1, 70), 2), ((2, 5), 3)] {
            let key = (key.0, key.1 * 1_000_000);
            model.java_stacks.insert(key, id);
            model
                .java_stack_starts
                .entry(key.0)
                .or_default()
                .insert(key.1, id);
        }
        model.forget_before(50_000_000);
        // Thread 2's long wait keeps its own stack, not thread 1's old one.
        let mut kept: Vec<StackId> = model.java_stacks.values().copied().collect();
        kept.sort_unstable();
        assert_eq!(kept, vec![2, 3]);
        assert_eq!(model.java_stack_starts[&1].len(), 1);
        assert_eq!(model.java_stack_starts[&2].len(), 1);
    }

    const MS: u64 = 1_000_000;

    fn account(tid: u32, run_ms: u64, wait_ms: u64) -> ThreadCpu {
        ThreadCpu {
            tid,
            run_ns: run_ms * MS,
            wait_ns: wait_ms * MS,
        }
    }

    #[test]
    fn a_thread_born_but_never_seen_in_the_window_runs_nothing() {
        // Born and gone as capture began: its end without an account, no wait, no name.
        let mut model = window_of_15s();
        model.apply(&Event::ThreadStart { tid: 9, time_ns: 0 });
        model.apply(&Event::ThreadExit {
            tid: 9,
            time_ns: 15_000 * MS,
            account: None,
        });
        let running = model
            .threads()
            .into_iter()
            .find(|r| r.tid == 9)
            .map_or(0, |r| r.running_ns);
        assert_eq!(running, 0);
    }

    /// A 15 s window with thread 1 there all along (snapshots at its start and end).
    fn window_of_15s() -> Model {
        let mut model = Model::default();
        for (time_ms, run_ms) in [(0, 100), (15_000, 600)] {
            model.apply(&Event::ThreadCpu {
                time_ns: time_ms * MS,
                threads: vec![account(1, run_ms, 0)],
            });
        }
        model.end_mono_ns = 15_000 * MS;
        model
    }

    fn row(model: &Model, tid: u32) -> ThreadRow {
        let rows = model.threads();
        rows.into_iter().find(|r| r.tid == tid).unwrap()
    }

    fn life_total(r: &ThreadRow) -> u64 {
        r.running_ns + r.preempted_ns + r.blocked_ns + r.idle_ns + r.pinned_ns
    }

    #[test]
    fn a_short_lived_thread_counts_its_life_not_the_window() {
        let mut model = window_of_15s();
        // Born at 1 s, 25 ms of life: 10 ms on a CPU, 2 ms waiting for one, 8 ms asleep.
        model.apply(&Event::ThreadStart {
            tid: 9,
            time_ns: 1000 * MS,
        });
        model.apply(&Event::OffCpu(interval(9, 1012, 8, OffCpuState::Sleeping)));
        model.apply(&Event::ThreadExit {
            tid: 9,
            time_ns: 1025 * MS,
            account: Some(account(9, 10, 2)),
        });
        let r = row(&model, 9);
        assert_eq!((r.running_ns, r.preempted_ns), (10 * MS, 2 * MS));
        // The rest of its life, off CPU not waiting for one (its sleep and its start).
        assert_eq!(r.blocked_ns, 13 * MS);
        assert_eq!(life_total(&r), 25 * MS);
        assert_eq!(model.life(9), (1000 * MS, 1025 * MS));

        // Without its account (the kernel's layout unknown), it runs what is left of its life.
        model.exits.insert(9, (1025 * MS, None));
        let r = row(&model, 9);
        assert_eq!((r.running_ns, r.blocked_ns), (17 * MS, 8 * MS));
        assert_eq!(life_total(&r), 25 * MS);
    }

    #[test]
    fn a_thread_there_at_attach_ends_at_its_exit() {
        let mut model = window_of_15s();
        model.apply(&Event::ThreadCpu {
            time_ns: 0,
            threads: vec![account(2, 50, 1)],
        });
        // It sleeps from 3 s on, and exits at 4 s; its final account says 300 ms more on CPU.
        model.apply(&Event::OffCpu(interval(
            2,
            3000,
            1000,
            OffCpuState::Sleeping,
        )));
        model.apply(&Event::ThreadExit {
            tid: 2,
            time_ns: 4000 * MS,
            account: Some(account(2, 350, 11)),
        });
        let r = row(&model, 2);
        assert_eq!((r.running_ns, r.preempted_ns), (300 * MS, 10 * MS));
        assert_eq!(r.blocked_ns, (4000 - 310) * MS);
        assert_eq!(life_total(&r), 4000 * MS);
    }

    #[test]
    fn the_wait_a_thread_died_in_is_not_blocking() {
        // A recording from before threads' ends were sent: the dead thread's last switch
        // (in do_task_dead) stays open until the window's end.
        let mut model = window_of_15s();
        let kernel = |name: &str| Frame {
            kind: FrameKind::Kernel,
            addr: 0,
            name: Some(name.into()),
            module: None,
            holds_monitor: false,
            line: None,
        };
        model.apply(&Event::Stack(crate::events::Stack {
            id: 5,
            frames: vec![
                kernel("__schedule"),
                kernel("do_task_dead"),
                kernel("do_exit"),
            ],
        }));
        model.apply(&Event::ThreadStart {
            tid: 3,
            time_ns: 2000 * MS,
        });
        model.apply(&Event::OffCpu(OffCpu {
            kernel_stack: Some(5),
            ..interval(3, 2020, 12_980, OffCpuState::Other)
        }));
        model.apply(&Event::OffCpu(interval(3, 2005, 10, OffCpuState::Sleeping)));
        let r = row(&model, 3);
        assert_eq!(model.life(3), (2000 * MS, 2020 * MS));
        // No account: it ran for what is left of its 20 ms.
        assert_eq!((r.blocked_ns, r.running_ns), (10 * MS, 10 * MS));
        assert!(
            crate::analysis::Analysis::new(&model)
                .blocked_stacks()
                .to_vec()
                .iter()
                .all(|s| !s.stack.frames.iter().any(|f| f == "do_task_dead")),
            "no blocked stack ends in the thread's death"
        );
    }

    #[test]
    fn intervals_are_clipped_to_the_threads_life_and_its_times_to_its_length() {
        let mut model = window_of_15s();
        make_carrier(&mut model, 4);
        model.apply(&Event::ThreadStart {
            tid: 4,
            time_ns: 5000 * MS,
        });
        // An idle park that (damaged, or from another thread of the same id) runs past its
        // exit, and a run-queue wait its account counts again at the end of the park.
        model.apply(&Event::OffCpu(parked(4, 5010, 100, None)));
        model.apply(&Event::ThreadExit {
            tid: 4,
            time_ns: 5100 * MS,
            account: Some(account(4, 5, 6)),
        });
        let r = row(&model, 4);
        assert_eq!(r.idle_ns, 90 * MS, "clipped at its exit");
        assert_eq!(r.running_ns, 5 * MS);
        assert_eq!(life_total(&r), 100 * MS, "at most its life");
        assert_eq!(
            r.preempted_ns,
            5 * MS,
            "the wait counted twice is taken out"
        );

        // The live view's folding counts the same.
        let before = model.threads();
        model.fold_settled(10_000 * MS);
        assert_eq!(model.threads(), before);
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
        assert_eq!(model.classify(&native), in_native);
        for (kernel, user) in [(Some(1), None), (None, Some(2))] {
            let suspended = OffCpu {
                kernel_stack: kernel,
                user_stack: user,
                ..native.clone()
            };
            assert_eq!(model.classify(&suspended), Some(Use::BlockedMounted));
        }
    }

    #[test]
    fn starving_now_needs_every_carrier_in_an_open_pinned_wait() {
        let mut model = Model::default();
        model.carrier_counts.push((0, 2));
        for tid in [1, 2] {
            make_carrier(&mut model, tid);
        }
        let open = |tid: u32, start_ms: u64, vthread: Option<u64>| {
            let o = parked(tid, start_ms, 0, vthread);
            crate::events::OpenWait {
                tid,
                start_ns: o.start_ns,
                state: o.state,
                java: o.java,
            }
        };
        let at = 3_000_000_000;
        model.open_waits = Some((at, vec![open(1, 1000, Some(7)), open(2, 1500, None)]));
        assert_eq!(model.starving_now(), None, "carrier 2 is idle, free to run");
        model.open_waits = Some((at, vec![open(1, 1000, Some(7)), open(2, 1500, Some(8))]));
        assert_eq!(model.starving_now(), Some((1_500_000_000, 2)));
    }
}
