//! The model: the store of what the event stream said. Events are taken in (checked, see
//! `intake`) and kept, the same way from a live capture or a recording, with plain lookups of
//! what was kept (names, stacks, monitors' classes, threads' lives). What the views show is
//! computed from it in `analysis`; views never look at raw events.

mod filter;
pub mod intake;
mod load;
pub mod wait;

pub use filter::Filter;
pub use wait::{JavaAt, Wait};

use std::collections::{BTreeMap, HashMap};

use crate::{
    analysis::classify::{StackMarks, Use, classify_with},
    events::{
        BlockerOwner, CgroupCpu, Counters, Event, Frame, JavaThreadInfo, ParkBlocker, ShortOffCpu,
        StackId, Syscall, TargetInfo, ThreadCpu,
    },
    recording::{End, Header},
};

/// A hash map for what is looked up once per interval (millions of times a report): a fast
/// hash, still seeded per process (a hostile recording cannot choose its collisions).
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
/// The set kept as `FastMap` is.
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

#[derive(Clone, Debug, Default)]
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
    pub off_cpu: Vec<Wait>,
    pub counters: Counters,
    pub short: HashMap<u32, ShortOffCpu>,
    pub target_exit_ns: Option<u64>,
    /// Each thread's first and latest scheduler account: (time, account).
    pub cpu_first: HashMap<u32, (u64, ThreadCpu)>,
    pub cpu_last: HashMap<u32, (u64, ThreadCpu)>,
    /// Time of the first snapshot: threads in it were there when the window opened.
    pub cpu_start_ns: Option<u64>,
    /// Threads born during the window: when.
    pub births: FastMap<u32, u64>,
    /// Each thread's first wait recorded one by one: when it began (before it, a wait of
    /// the thread's may have gone unseen; after it, none did unless events were lost).
    pub first_wait_ns: FastMap<u32, u64>,
    /// Threads that ended during the window: when, and their whole life's account then.
    pub exits: FastMap<u32, (u64, Option<ThreadCpu>)>,
    /// What went wrong reading the source, said to the user with the results.
    pub warnings: Vec<String>,
    /// What the file itself lost (damage met, no end marker), also among `warnings`; empty
    /// for a whole recording. A gate does not judge a damaged file unless told to.
    pub damage: Vec<String>,
    /// Every Java thread seen; a thread once seen as a carrier stays one.
    pub java_threads: FastMap<u32, JavaThreadInfo>,
    /// The class of each Java thread's `java.lang.Thread` object, by thread.
    pub java_thread_classes: HashMap<u32, String>,
    /// Carriers alive, from each Java thread snapshot: (time, count).
    pub carrier_counts: Vec<(u64, u32)>,
    /// The memory budget the recording was made under, and what it cut (the last said).
    pub memory_budget: Option<(u64, crate::events::Cuts)>,
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
    /// Virtual threads' waits off their carriers, in the order they ended.
    pub vthread_waits: Vec<crate::events::VthreadWait>,
    /// What the kernel counted of them without sending them (the last snapshot).
    pub vthread_wait_sums: Option<crate::events::VthreadWaitSums>,
    /// What each thread was seen parked on (`Thread.parkBlocker`), by thread and read time.
    pub park_blockers: HashMap<u32, BTreeMap<u64, ParkBlocker>>,
    /// Monitors' owners as read while threads waited to enter them: by the waiting thread
    /// and read time, the monitor and its owner.
    pub monitor_owners: HashMap<u32, BTreeMap<u64, (u64, BlockerOwner)>>,
    /// The threads a filter kept (None: all): the thread table lists only those.
    pub only_threads: Option<std::collections::HashSet<u32>>,
    /// Tasks waiting in the virtual-thread scheduler for a carrier: by read time.
    pub queued: BTreeMap<u64, u64>,
    /// Snapshots of the CPU limit and throttling of the target's cgroup: by read time.
    pub cgroup_cpu: BTreeMap<u64, CgroupCpu>,
    /// Intervals a live view folded into per-thread sums (see `fold_settled`).
    pub folded: HashMap<u32, FoldedIntervals>,
    /// The carriers' waits still under way at the latest checkpoint: (time, waits).
    pub open_waits: Option<(u64, Vec<crate::events::OpenWait>)>,
    /// A live view forgot the pinning, waits and calls that ended before this (see
    /// `forget_before`).
    pub forgotten_before: Option<u64>,
    /// What the checks of the events taken in found (see `intake`).
    pub intake: intake::Intake,
    /// On-CPU samples a second of each CPU, when the recording sampled.
    pub on_cpu_hz: Option<u32>,
    /// On-CPU samples, in the order recorded (time order per CPU).
    pub samples: Vec<Sample>,
    /// Samples taken in the kernel (some may have been lost), and threads whose scheduler
    /// histograms had no room there: the latest snapshot.
    pub samples_taken: u64,
    pub sched_threads_not_kept: u64,
    /// Samples the kernel sent without their Java stack, the ring buffer filling.
    pub sample_stacks_skipped: u64,
    /// Each thread's first and latest scheduler histograms: (time, snapshot).
    pub sched_first: HashMap<u32, (u64, crate::events::ThreadSched)>,
    pub sched_last: HashMap<u32, (u64, crate::events::ThreadSched)>,
    /// Wake-ups that waited long for a CPU.
    pub late_wakeups: Vec<crate::events::LateWakeup>,
    /// Java stacks of on-CPU samples, by (thread, sample time).
    pub sample_stacks: FastMap<(u32, u64), StackId>,
}

/// An on-CPU sample as the model keeps it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub tid: u32,
    pub cpu: u32,
    pub time_ns: u64,
    pub kernel_stack: Option<StackId>,
    pub user_stack: Option<StackId>,
    /// The virtual thread mounted on the sampled carrier (`Some(0)`: one whose id could not
    /// be read), None when nothing was.
    pub vthread: Option<u64>,
}

/// A thread's intervals that were folded away, summed as `analysis::threads` would count them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FoldedIntervals {
    pub intervals: u64,
    pub blocked_intervals: u64,
    pub idle_ns: u64,
    pub blocked_ns: u64,
    pub pinned_ns: u64,
    pub preempted_ns: u64,
}

/// A wait for another thread's initialization of a class.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClassInitWait {
    pub class: String,
    /// The thread running the class's static initializer, if it could be told.
    pub initializer: Option<crate::events::Initializer>,
}

/// Keeps each key's reads from `from` on, and the last one before it (what a lookup as of
/// `from` finds).
fn keep_reads_from<K, T>(reads: &mut HashMap<K, BTreeMap<u64, T>>, from: u64) {
    for seen in reads.values_mut() {
        let mut kept = seen.split_off(&from);
        if let Some((at, last)) = seen.pop_last() {
            kept.insert(at, last);
        }
        *seen = kept;
    }
}

/// The snapshots of `snapshots` that bracket `[from, to]`: the last one at or before `from`,
/// every one between, the first one at or after `to` (what a difference over the span needs).
pub fn bracketing<T: Clone>(snapshots: &BTreeMap<u64, T>, from: u64, to: u64) -> BTreeMap<u64, T> {
    let before = snapshots.range(..=from).next_back();
    let after = snapshots.range(to..).next();
    before
        .into_iter()
        .chain(snapshots.range(from..=to))
        .chain(after)
        .map(|(t, s)| (*t, s.clone()))
        .collect()
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
        match &end.reason {
            crate::recording::StopReason::Error(e) => {
                let mut e = e.clone();
                intake::text(&mut e, intake::MAX_TEXT);
                self.warnings
                    .push(format!("capture stopped on an error: {e}"));
            }
            reason @ crate::recording::StopReason::SizeCap { .. } => {
                self.warnings
                    .push(format!("capture stopped early: {reason}"));
            }
            _ => {}
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
                let o = Wait::from(o);
                self.end_mono_ns = self.end_mono_ns.max(o.end_ns);
                if self.is_death(&o) {
                    // A recording made before threads' ends were sent: the wait the thread
                    // died in (until the window's end) is its end, not a wait.
                    self.exits.entry(o.tid).or_insert((o.start_ns, None));
                } else {
                    let first = self.first_wait_ns.entry(o.tid).or_insert(o.start_ns);
                    *first = (*first).min(o.start_ns);
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
                // A thread's end is sent as it exits and again at its last switch (if the
                // kernel shows that): the later stands.
                let exit = self.exits.entry(tid).or_insert((time_ns, account));
                if time_ns >= exit.0 {
                    *exit = (time_ns, account);
                }
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
            Event::JavaThreadsChanged {
                time_ns,
                listed,
                classes,
                gone: _,
                carriers,
            } => {
                // Threads gone from the list stay known, as in whole lists: their waits
                // before they ended are theirs.
                for t in listed {
                    if let Some(name) = &t.name {
                        self.names.insert(t.tid, name.clone());
                    }
                    let carrier = t.carrier;
                    let seen = self.java_threads.entry(t.tid).or_insert(t);
                    seen.carrier |= carrier;
                }
                for (tid, class) in classes {
                    self.java_thread_classes.entry(tid).or_insert(class);
                }
                self.carrier_counts.push((time_ns, carriers));
            }
            Event::MemoryBudget { bytes, cuts, .. } => self.memory_budget = Some((bytes, cuts)),
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
            Event::MonitorOwner {
                time_ns,
                tid,
                monitor,
                owner,
            } => {
                self.monitor_owners
                    .entry(tid)
                    .or_default()
                    .insert(time_ns, (monitor, owner));
            }
            Event::Queued { time_ns, tasks, .. } => {
                self.queued.insert(time_ns, tasks);
            }
            Event::Sampling { hz } => self.on_cpu_hz = Some(hz),
            Event::OnCpu(s) => {
                self.end_mono_ns = self.end_mono_ns.max(s.time_ns);
                self.samples.push(Sample {
                    tid: s.tid,
                    cpu: s.cpu,
                    time_ns: s.time_ns,
                    kernel_stack: s.kernel_stack,
                    user_stack: s.user_stack,
                    vthread: s.java.and_then(|j| j.vthread),
                });
            }
            Event::SchedStats {
                time_ns,
                threads,
                samples,
                sample_stacks_skipped,
                threads_not_kept,
            } => {
                self.samples_taken = samples;
                self.sample_stacks_skipped = sample_stacks_skipped;
                self.sched_threads_not_kept = threads_not_kept;
                for t in threads {
                    self.sched_first
                        .entry(t.tid)
                        .or_insert_with(|| (time_ns, t.clone()));
                    self.sched_last.insert(t.tid, (time_ns, t));
                }
            }
            Event::SampleStack {
                tid,
                time_ns,
                stack,
            } => {
                self.sample_stacks.insert((tid, time_ns), stack);
            }
            Event::LateWakeup(w) => {
                self.end_mono_ns = self.end_mono_ns.max(w.run_ns);
                self.late_wakeups.push(w);
            }
            Event::CgroupCpu(c) => {
                self.cgroup_cpu.insert(c.time_ns, c);
            }
            Event::VthreadWait(w) => {
                self.end_mono_ns = self.end_mono_ns.max(w.end_ns);
                self.vthread_waits.push(w);
            }
            Event::VthreadWaitSums(s) => self.vthread_wait_sums = Some(s),
            Event::ParkBlocker {
                time_ns,
                tid,
                blocker,
            } => {
                self.park_blockers
                    .entry(tid)
                    .or_default()
                    .insert(time_ns, blocker);
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
    /// monitor-entry retries into one pinned event; so does its wait for a CPU, which
    /// starvation counts.
    ///
    /// Returns what it folded, with what each counted as (the swimlanes keep them).
    pub fn fold_settled(&mut self, before_ns: u64) -> Vec<(Wait, Option<Use>)> {
        // A carrier's every interval stays (starvation counts its waits for a CPU too), so it
        // need not be classified: a refresh then classifies only what it folds.
        let folded = self.fold(
            before_ns,
            |model, o| model.is_carrier(o.tid),
            |_, _, used| matches!(used, Some(Use::Pinned(..) | Use::BlockedMounted)),
        );
        self.forget_samples_before(before_ns);
        self.late_wakeups.retain(|w| w.run_ns >= before_ns);
        folded
    }

    /// On-CPU samples (and their Java stacks) and late wake-ups before `before_ns` go: a live
    /// view's monopolization, on-CPU and wake-up figures then cover the recent past, in
    /// bounded memory (99 samples a second per busy CPU would otherwise grow without end).
    fn forget_samples_before(&mut self, before_ns: u64) {
        let old = self.samples.partition_point(|s| s.time_ns < before_ns);
        if old == 0 || !self.samples[..old].is_sorted_by_key(|s| s.time_ns) {
            // (Samples of several CPUs come almost in time order: a partition point that is
            // not one falls back to a full pass.)
            let stacks = &mut self.sample_stacks;
            self.samples.retain(|s| {
                let keep = s.time_ns >= before_ns;
                if !keep {
                    stacks.remove(&(s.tid, s.time_ns));
                }
                keep
            });
            return;
        }
        for s in self.samples.drain(..old) {
            self.sample_stacks.remove(&(s.tid, s.time_ns));
        }
    }

    /// Forgets what ended before `before_ns` and is kept one by one (pinned and carriers'
    /// intervals, long system calls, their Java stacks), once its time is in the per-thread
    /// sums: thread times still cover the whole window, while pinning, starvation, locks and
    /// system calls cover the time since `before_ns`. Bounds a long live view.
    pub fn forget_before(&mut self, before_ns: u64) {
        if before_ns <= self.start_mono_ns {
            return;
        }
        self.fold(before_ns, |_, _| false, |_, _, _| false);
        self.forget_samples_before(before_ns);
        self.syscalls
            .retain(|s| s.end_ns >= before_ns || s.unfinished);
        self.queued = self.queued.split_off(&before_ns);
        self.cgroup_cpu = bracketing(&self.cgroup_cpu, before_ns, u64::MAX);
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
        // What was read of a thread's waits (its park blocker, the monitor's owner) goes with
        // them, as its Java stacks do: a live view read them once a second for as long as it
        // ran.
        self.park_blockers.retain(|tid, reads| {
            *reads = reads.split_off(&from(*tid));
            !reads.is_empty()
        });
        self.monitor_owners.retain(|tid, reads| {
            *reads = reads.split_off(&from(*tid));
            !reads.is_empty()
        });
        // Virtual threads' waits off their carriers are events of their own: the old ones go
        // (a live view would hold every one it saw).
        self.vthread_waits.retain(|w| w.end_ns >= before_ns);
        // A monitor's class (or class init) is looked up as of a time: the last read before
        // the waits kept stays.
        keep_reads_from(&mut self.monitor_classes, before_ns);
        keep_reads_from(&mut self.monitor_class_objects, before_ns);
        keep_reads_from(&mut self.class_init_locks, before_ns);
        self.forgotten_before = Some(self.forgotten_before.unwrap_or(0).max(before_ns));
    }

    /// Moves the intervals that ended before `before_ns` and that `keep` does not want into
    /// the per-thread sums. (What an interval counts as is the analysis's to say: the sums are
    /// what `analysis::threads` would count of the intervals.)
    /// `stays`: kept whatever it counts as (not classified); `keep`: kept for what it counts as.
    fn fold(
        &mut self,
        before_ns: u64,
        stays: impl Fn(&Model, &Wait) -> bool,
        keep: impl Fn(&Model, &Wait, Option<Use>) -> bool,
    ) -> Vec<(Wait, Option<Use>)> {
        let all = std::mem::take(&mut self.off_cpu);
        let mut kept = Vec::with_capacity(all.len());
        let mut folded = Vec::new();
        // Every stack read once pays when many intervals are classified; a few read theirs.
        let settled = all
            .iter()
            .filter(|o| o.end_ns < before_ns && !stays(self, o))
            .count();
        let marks = if settled > self.stacks.len() {
            StackMarks::of(self)
        } else {
            StackMarks::default()
        };
        for o in all {
            if o.end_ns >= before_ns || stays(self, &o) {
                kept.push(o);
                continue;
            }
            let used = classify_with(self, &o, &marks);
            if keep(self, &o, used) {
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
            folded.push((o, used));
        }
        self.off_cpu = kept;
        folded
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

    /// What thread `tid` was parked on in a wait from `start_ns` to `end_ns`: the last read
    /// during it, and when it was read.
    pub fn park_blocker_reading(
        &self,
        tid: u32,
        start_ns: u64,
        end_ns: u64,
    ) -> Option<(u64, &ParkBlocker)> {
        let seen = self.park_blockers.get(&tid)?;
        (start_ns <= end_ns)
            .then(|| seen.range(start_ns..=end_ns).next_back())
            .flatten()
            .map(|(at, b)| (*at, b))
    }

    pub fn is_carrier(&self, tid: u32) -> bool {
        self.java_threads.get(&tid).is_some_and(|t| t.carrier)
    }

    /// The JDK's feature release, if the target is a JVM of known version.
    pub fn jdk_major(&self) -> Option<u32> {
        self.target.runtime.as_ref().and_then(|r| r.major())
    }

    /// Whether the recording knows the JVM's threads (carriers, mounted state).
    pub fn knows_java_threads(&self) -> bool {
        !self.java_threads.is_empty()
    }

    /// The Java stack walked for an interval, if one was.
    pub fn java_stack(&self, o: &Wait) -> Option<StackId> {
        self.java_stacks.get(&(o.tid, o.start_ns)).copied()
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
    pub fn lived_ns(&self, o: &Wait) -> u64 {
        let (from, to) = self.life(o.tid);
        o.end_ns.min(to).saturating_sub(o.start_ns.max(from))
    }

    /// Whether an interval is the one a thread died in (a recording from before threads'
    /// ends were sent): the kernel switched it out in `do_task_dead`.
    fn is_death(&self, o: &Wait) -> bool {
        o.kernel_stack()
            .and_then(|id| self.stacks.get(&id))
            .is_some_and(|frames| {
                frames
                    .iter()
                    .take(8)
                    .any(|f| f.name.as_deref() == Some("do_task_dead"))
            })
    }

    /// The frames of an interval, innermost first: kernel, native, then Java.
    pub fn frames(&self, o: &Wait) -> Vec<&Frame> {
        self.frames_of(o.kernel_stack(), o.user_stack(), self.java_stack(o))
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

    /// The Java stack of the off-CPU interval of `tid` that began inside [start, end].
    pub fn java_stack_within(&self, tid: u32, start: u64, end: u64) -> Option<u32> {
        if start > end {
            return None;
        }
        let starts = self.java_stack_starts.get(&tid)?;
        starts.range(start..=end).next().map(|(_, id)| *id)
    }

    /// The frames of a futex waiter: its native stack, then the Java stack it blocked with.
    pub fn waiter_frames(&self, s: &Syscall) -> Vec<&Frame> {
        let java = self.java_stack_within(s.tid, s.start_ns, s.end_ns);
        self.frames_of(None, s.user_stack, java)
    }

    /// The frames of the thread that released a futex waiter, as it released it.
    pub fn holder_frames(&self, s: &Syscall) -> Vec<&Frame> {
        let Some(w) = s.futex.as_ref().and_then(|f| f.waker.as_ref()) else {
            return Vec::new();
        };
        let java = self.java_stacks.get(&(w.tid, w.wake_ns)).copied();
        self.frames_of(None, w.user_stack, java)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::{Analysis, classify, starvation, threads};
    use crate::events::{FrameKind, JavaBlock, JavaThreadState, OffCpu, OffCpuState};

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

    pub(crate) fn make_carrier(model: &mut Model, tid: u32) {
        let info = JavaThreadInfo {
            tid,
            name: Some(format!("carrier-{tid}")),
            carrier: true,
        };
        model.java_threads.insert(tid, info);
    }

    /// A contended monitor entry of virtual thread 7 on the carrier.
    pub(crate) fn entering(start_ms: u64, ms: u64) -> OffCpu {
        let mut o = parked(1, start_ms, ms, Some(7));
        if let Some(java) = &mut o.java {
            java.pending_monitor = Some(0x10);
        }
        o
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
    fn folding_settled_intervals_keeps_thread_times_and_pinning() {
        let mut model = Model {
            end_mono_ns: 100_000_000,
            ..Default::default()
        };
        make_carrier(&mut model, 1);
        model.off_cpu = vec![
            Wait::from(parked(1, 0, 5, None)),      // idle
            Wait::from(parked(1, 10, 20, Some(7))), // pinned (a monitor held on JDK 21)
            Wait::from(interval(1, 40, 1, OffCpuState::Preempted)),
            // Two entries of the same monitor, apart: an idle park between them ends the first.
            Wait::from(entering(42, 1)),
            Wait::from(parked(1, 43, 1, None)),
            Wait::from(entering(44, 1)),
            Wait::from(interval(2, 0, 30, OffCpuState::Sleeping)), // another thread, blocked
            Wait::from(interval(2, 50, 2, OffCpuState::Preempted)),
            Wait::from(interval(2, 90, 5, OffCpuState::Sleeping)), // not settled yet
        ];
        let (threads, pinned, starvation) = (
            threads::threads(&model),
            Analysis::new(&model).pinned_events().to_vec(),
            starvation::starvation_in(&model, &classify::uses(&model), &[]),
        );
        model.fold_settled(60_000_000);
        assert_eq!(
            model.off_cpu.len(),
            7,
            "the carrier's (pinned, idle, preempted) and the unsettled remain"
        );
        assert_eq!(threads::threads(&model), threads);
        assert_eq!(Analysis::new(&model).pinned_events().to_vec(), pinned);
        assert_eq!(
            starvation::starvation_in(&model, &classify::uses(&model), &[]),
            starvation
        );
        assert_eq!(pinned.len(), 3);
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
        let stacks = Analysis::new(&model).blocked_stacks().to_vec();
        assert_eq!(
            stacks[0].monitor_classes.iter().collect::<Vec<_>>(),
            ["Shop$Till"]
        );
    }

    /// Virtual thread 7 on carrier 1 waits on monitor 0x20 (an `int[]`), no monitor held.
    pub(crate) fn init_lock_wait(start_ms: u64, ms: u64) -> OffCpu {
        let mut o = parked(1, start_ms, ms, Some(7));
        if let Some(java) = &mut o.java {
            java.waiting_monitor = Some(0x20);
            java.held_monitors = 0;
        }
        o
    }

    pub(crate) fn java_frame(name: &str) -> Frame {
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
    fn forgetting_keeps_thread_times_and_drops_old_pinning() {
        let mut model = Model {
            end_mono_ns: 100_000_000,
            ..Default::default()
        };
        make_carrier(&mut model, 1);
        model.off_cpu = vec![
            Wait::from(parked(1, 0, 20, Some(7))),  // pinned, old
            Wait::from(parked(1, 25, 5, None)),     // idle, old
            Wait::from(parked(1, 70, 20, Some(7))), // pinned, recent
        ];
        let threads = threads::threads(&model);
        model.forget_before(50_000_000);
        assert_eq!(
            threads::threads(&model),
            threads,
            "thread times cover the whole window"
        );
        let pinned = Analysis::new(&model).pinned_events().to_vec();
        assert_eq!(pinned.len(), 1);
        assert_eq!(pinned[0].start_ns, 70_000_000);
        assert_eq!(model.forgotten_before, Some(50_000_000));
    }

    /// A carrier's old and recent waits (10 and 70 ms, 20 ms each), and another thread's
    /// long wait from 5 ms into the window (to 95 ms), in a 100 ms window.
    fn old_and_recent_waits() -> Model {
        let mut model = Model {
            end_mono_ns: 100_000_000,
            ..Default::default()
        };
        make_carrier(&mut model, 1);
        model.off_cpu = vec![
            Wait::from(parked(1, 10, 20, Some(7))),                // old
            Wait::from(parked(1, 70, 20, Some(7))),                // recent
            Wait::from(interval(2, 5, 90, OffCpuState::Sleeping)), // one long wait into the window
        ];
        model
    }

    #[test]
    fn forgetting_drops_java_stacks_thread_by_thread() {
        let mut model = old_and_recent_waits();
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

    #[test]
    fn forgetting_drops_what_was_read_of_old_waits() {
        let ms = 1_000_000;
        let mut model = old_and_recent_waits();
        let blocker = ParkBlocker {
            object: 1,
            class: "java.util.concurrent.locks.ReentrantLock$NonfairSync".into(),
            ownable: true,
            owner: None,
        };
        for (tid, at) in [(1, 15), (1, 75), (2, 40)] {
            model
                .park_blockers
                .entry(tid)
                .or_default()
                .insert(at * ms, blocker.clone());
        }
        for at in [10, 20, 60] {
            model
                .monitor_classes
                .entry(9)
                .or_default()
                .insert(at * ms, format!("C{at}"));
        }
        model.forget_before(50 * ms);
        // Thread 1's read of its old wait goes; thread 2's long wait keeps its read.
        assert_eq!(model.park_blockers[&1].len(), 1);
        assert_eq!(
            model.park_blocker_reading(2, 5 * ms, 95 * ms).unwrap().0,
            40 * ms
        );
        // A monitor's class as of the window's new start is still known.
        assert_eq!(model.monitor_class(9, 50 * ms), Some("C20"));
        assert_eq!(model.monitor_classes[&9].len(), 2);
    }
}
