//! The event stream: what capture produces, what a recording stores and what the model reads.
//!
//! Live capture and replay meet here: after this point nothing knows whether events come from
//! the kernel or from a file. Stacks arrive already named (see `symbolize`), so a recording can
//! be read on any machine after the target is gone.

use serde::{Deserialize, Serialize};

/// Identifies a stack within one recording (the kernel's stack-map id).
pub type StackId = u32;

/// Static facts about the profiled process, taken when recording starts.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TargetInfo {
    pub pid: u32,
    /// `comm` of the main thread.
    pub command: String,
    pub cmdline: Vec<String>,
    pub runtime: Option<RuntimeInfo>,
}

/// A managed runtime found in the target.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RuntimeInfo {
    /// "hotspot" for now.
    pub kind: String,
    pub version: Option<String>,
    /// The virtual-thread scheduler's parallelism (carriers it aims to keep busy).
    pub parallelism: Option<u32>,
    /// `jdk.virtualThreadScheduler.maxPoolSize`, when the JVM says it was set.
    pub max_pool_size: Option<u32>,
    pub libjvm: Option<String>,
}

impl RuntimeInfo {
    /// The feature release (21 of "21.0.8"), which decides what pins.
    pub fn major(&self) -> Option<u32> {
        let version = self.version.as_deref()?;
        let first = version.split(['.', '+', '-']).next()?;
        // Old style "1.8.0".
        match first.parse().ok()? {
            1 => version.split('.').nth(1)?.parse().ok(),
            n => Some(n),
        }
    }
}

/// The name of a Java frame the walk could not name (debug output says why).
pub const UNKNOWN_JAVA_FRAME: &str = "[unknown java frame]";

/// Where a stack frame lives.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub enum FrameKind {
    Kernel,
    Native,
    /// Code generated at run time (a JIT), named from the runtime's perf map.
    Jit,
    /// A Java method, named by walking the JVM's own frames; `module` says how it ran
    /// (interpreted, compiled, native, stub, vm).
    Java,
}

/// One named (or not) frame. `name` is `None` when no symbol covers the address.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct Frame {
    pub kind: FrameKind,
    pub addr: u64,
    pub name: Option<String>,
    /// File the address belongs to (library or executable), if any; for Java frames, how the
    /// method ran (interpreted, compiled, native, stub, vm).
    pub module: Option<String>,
    /// A Java frame that holds a monitor (a `synchronized` method, or an interpreted frame
    /// with a locked monitor in its frame).
    pub holds_monitor: bool,
    /// A Java frame's source line, from its method's line number table (format 5 on).
    pub line: Option<u32>,
}

impl Frame {
    /// The name to show: the symbol, else `[module]`, else the address.
    pub fn label(&self) -> String {
        match (&self.name, &self.module) {
            (Some(name), _) => name.clone(),
            (None, Some(module)) => {
                let base = module.rsplit('/').next().unwrap_or(module);
                format!("[{base}]")
            }
            (None, None) => format!("[unknown {:#x}]", self.addr),
        }
    }
}

/// Frames of one stack, innermost first.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Stack {
    pub id: StackId,
    pub frames: Vec<Frame>,
}

/// Why a thread left the CPU, from `sched_switch`'s `prev_state`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub enum OffCpuState {
    /// Still runnable: preempted, waiting for a CPU.
    Preempted,
    /// Sleeping interruptibly (futex, sleep, poll, socket read...).
    Sleeping,
    /// Uninterruptible (disk I/O, some kernel locks).
    Uninterruptible,
    Other,
    /// Stopped by a signal (SIGSTOP, SIGTSTP) or a debugger: the process was not let run,
    /// whatever it was doing. (Recordings of format 9 and before say `Other`.)
    Stopped,
}

impl OffCpuState {
    pub fn from_prev_state(state: u64) -> Self {
        use profiler_ebpf::task_state::*;
        match state & 0xff {
            RUNNING => Self::Preempted,
            INTERRUPTIBLE => Self::Sleeping,
            UNINTERRUPTIBLE => Self::Uninterruptible,
            s if s & (STOPPED | TRACED) != 0 => Self::Stopped,
            _ => Self::Other,
        }
    }

    /// Waiting on something (as opposed to waiting for a CPU).
    pub fn is_blocked(self) -> bool {
        self != Self::Preempted
    }
}

/// One interval a target thread spent off CPU. Times are `CLOCK_MONOTONIC` ns.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OffCpu {
    pub tid: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub state: OffCpuState,
    pub kernel_stack: Option<StackId>,
    pub user_stack: Option<StackId>,
    /// The thread whose `sched_wakeup` made this one runnable, if one did.
    pub waker_tid: Option<u32>,
    pub cpu: u32,
    /// What the thread was doing in the JVM as it blocked (Java threads of a HotSpot target).
    pub java: Option<JavaBlock>,
}

/// HotSpot's `JavaThreadState` as a thread blocked, reduced to what pinprof tells apart.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub enum JavaThreadState {
    /// In native code (JNI or the JDK's own native methods): a syscall from there.
    InNative,
    /// Inside the VM itself.
    InVm,
    InJava,
    /// Parked, waiting on a monitor or sleeping, through the VM (`Unsafe.park`...).
    Blocked,
    Other(u32),
}

/// A Java thread's state read in the kernel at the moment it went off CPU.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct JavaBlock {
    pub state: JavaThreadState,
    /// `Thread.threadId()` of the virtual thread mounted on this carrier, if one was.
    pub vthread: Option<u64>,
    /// `ObjectMonitor*` the thread was blocked entering (contended `synchronized`).
    pub pending_monitor: Option<u64>,
    /// `ObjectMonitor*` the thread was waiting on (`Object.wait`).
    pub waiting_monitor: Option<u64>,
    /// Monitors the thread held.
    pub held_monitors: u32,
    /// Critical-section pins of the mounted continuation (JDK 24+).
    pub pin_count: u32,
    /// A safepoint was under way as it blocked.
    pub at_safepoint: bool,
    /// `JavaFrameAnchor` (last Java sp, pc, fp): where the Java stack ends.
    pub anchor: [u64; 3],
}

/// A system call of the target that lasted at least the threshold; for a futex wait, with
/// the thread that ended it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Syscall {
    pub tid: u32,
    pub nr: u32,
    /// Its name (`read`, `futex`...), or `syscall_<nr>`.
    pub name: String,
    pub args: [u64; 4],
    pub start_ns: u64,
    pub end_ns: u64,
    /// The return value (negative: -errno).
    pub ret: i64,
    /// The caller's native stack.
    pub user_stack: Option<StackId>,
    /// What the file descriptor argument named when the call ended: a path, `pipe:[...]`,
    /// `socket:[...]` with its addresses where readable.
    pub fd: Option<String>,
    pub futex: Option<FutexWait>,
    /// Still in progress when the recording stopped (a deadlock's waits look like this);
    /// `end_ns` is then the end of the window.
    pub unfinished: bool,
}

/// The futex side of a long futex wait.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FutexWait {
    pub uaddr: u64,
    pub op: u64,
    /// The timeout it gave, if any (relative, or absolute for bitset waits).
    pub timeout_ns: Option<u64>,
    /// The thread that woke it (a `sched_waking` in that thread), if one did.
    pub waker: Option<FutexWaker>,
}

/// The thread of the target that released a futex waiter from inside its own futex call, and
/// where. (Wake-ups by timers, signals or other processes release nobody: none is recorded.)
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FutexWaker {
    pub tid: u32,
    pub wake_ns: u64,
    /// Its stacks at the wake: the releasing code. Its Java stack, if walked, is the
    /// `JavaStack` of (`tid`, `wake_ns`).
    pub user_stack: Option<StackId>,
    pub kernel_stack: Option<StackId>,
}

impl Syscall {
    /// `ret` of a call timed from the scheduler's switches (the default; `record --syscalls`
    /// traces calls to their end): its result was not seen.
    pub const RET_UNSEEN: i64 = profiler_ebpf::RET_UNSEEN;

    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// Its result (negative: -errno), when it was seen.
    pub fn result(&self) -> Option<i64> {
        (self.ret != Self::RET_UNSEEN).then_some(self.ret)
    }

    /// Whether this futex wait ran out its timeout: from its result when seen, else from its
    /// times (then a release within `TIMEOUT_SLACK_NS` of the timeout counts as a timeout).
    /// `unix_minus_mono_ns`: the recording's wall clock less its monotonic one, for a wait
    /// given a wall-clock deadline.
    pub fn timed_out(&self, unix_minus_mono_ns: i64) -> bool {
        const ETIMEDOUT: i64 = 110;
        /// What the timer's slack and the switch-out after the call's entry take off.
        const TIMEOUT_SLACK_NS: u64 = 100_000;
        if let Some(ret) = self.result() {
            return ret == -ETIMEDOUT;
        }
        let Some(timeout) = self
            .futex
            .as_ref()
            .and_then(|f| f.timeout_ns.map(|t| (f.op, t)))
        else {
            return false;
        };
        use profiler_ebpf::futex_op;
        let (op, timeout_ns) = timeout;
        const CLOCK_REALTIME: u64 = 256;
        let absolute = matches!(
            op & futex_op::CMD_MASK,
            futex_op::WAIT_BITSET | futex_op::LOCK_PI | futex_op::LOCK_PI2
        );
        if !absolute {
            return self.duration_ns() + TIMEOUT_SLACK_NS >= timeout_ns;
        }
        // LOCK_PI's deadline is on the wall clock whatever the flag says.
        let end = if op & CLOCK_REALTIME != 0 || op & futex_op::CMD_MASK == futex_op::LOCK_PI {
            (i128::from(self.end_ns) + i128::from(unix_minus_mono_ns)).max(0) as u64
        } else {
            self.end_ns
        };
        end + TIMEOUT_SLACK_NS >= timeout_ns
    }

    /// The thread whose release ended this futex wait, else the waiter itself: whom a lock
    /// wait is charged to.
    pub fn releaser(&self) -> u32 {
        self.futex
            .as_ref()
            .and_then(|f| f.waker.as_ref())
            .map_or(self.tid, |w| w.tid)
    }
}

/// Sums of system calls below the threshold, per (thread, call), cumulative.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SyscallSum {
    pub tid: u32,
    pub nr: u32,
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// Kernel lock contention (`lock:contention_begin/end`) of the target's threads, per lock.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KernelLock {
    pub addr: u64,
    /// The kernel symbol the lock lives in, when it is a static one.
    pub symbol: Option<String>,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// Agreement between two ways of naming compiled Java frames.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FramePointerCheck {
    /// Stacks compared (those where the perf map named at least one frame).
    pub compared: u64,
    pub agreed: u64,
    /// The first disagreement: (pinprof's compiled frames, the frame-pointer walk's).
    pub first_difference: Option<(Vec<String>, Vec<String>)>,
}

/// A Java (platform) thread of the target, as HotSpot's thread list describes it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct JavaThreadInfo {
    pub tid: u32,
    /// `Thread.getName()`, in full.
    pub name: Option<String>,
    /// A carrier of the virtual-thread scheduler (`jdk.internal.misc.CarrierThread`).
    pub carrier: bool,
}

impl OffCpu {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Off-CPU intervals below the per-event threshold, summed per thread in the kernel.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ShortOffCpu {
    pub tid: u32,
    pub count: u64,
    pub total_ns: u64,
    pub preempted_ns: u64,
}

/// Kernel-side counters, cumulative since attach.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Counters {
    /// Records the ring buffer had no room for.
    pub lost_events: u64,
    /// Events whose stack could not be captured.
    pub stack_misses: u64,
    /// Intervals not timed because the per-thread map was full.
    pub start_map_full: u64,
    /// Intervals below the threshold (summed, not sent).
    pub short_intervals: u64,
    /// Java stacks wanted but not copied (the thread moved on first, or no room).
    pub java_stack_misses: u64,
    /// System calls or lock waits not timed because a per-thread map was full.
    pub syscall_map_full: u64,
    /// Lock releases recorded without the releasing thread's stacks, to bound the cost.
    pub waker_stacks_skipped: u64,
}

impl Counters {
    /// Everything that was dropped rather than recorded.
    pub fn lost(&self) -> u64 {
        self.lost_events + self.start_map_full + self.syscall_map_full
    }
}

/// A thread of the target and its name (`comm`), as first seen or renamed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ThreadName {
    pub tid: u32,
    pub name: String,
}

/// A thread's CPU account from the scheduler (`/proc/<pid>/task/<tid>/schedstat`), cumulative
/// since the thread started: exact running and run-queue time, whatever happened before attach.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ThreadCpu {
    pub tid: u32,
    pub run_ns: u64,
    /// Runnable, waiting for a CPU.
    pub wait_ns: u64,
}

/// Everything that flows from capture (or a recording) to the model.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum Event {
    Thread(ThreadName),
    Stack(Stack),
    OffCpu(OffCpu),
    /// Cumulative snapshot; the last one wins. `time_ns` is when it was read.
    Counters {
        time_ns: u64,
        counters: Counters,
    },
    /// Cumulative snapshot of the short intervals of every thread; the last one wins.
    ShortOffCpu {
        time_ns: u64,
        threads: Vec<ShortOffCpu>,
    },
    /// Snapshot of every thread's CPU account at `time_ns` (window start, checkpoints, end).
    ThreadCpu {
        time_ns: u64,
        threads: Vec<ThreadCpu>,
    },
    /// The target process exited.
    TargetExit {
        time_ns: u64,
    },
    /// The JVM's Java threads, whenever the set changes.
    JavaThreads {
        time_ns: u64,
        threads: Vec<JavaThreadInfo>,
    },
    /// Something capture could not do, said once to the user with the results.
    Warning(String),
    Syscall(Syscall),
    /// Cumulative snapshot of the short system calls; the last one wins.
    SyscallSums {
        time_ns: u64,
        sums: Vec<SyscallSum>,
    },
    /// Cumulative snapshot of kernel lock contention; the last one wins.
    KernelLocks {
        time_ns: u64,
        locks: Vec<KernelLock>,
        /// Per thread: (tid, waits, total ns).
        threads: Vec<(u32, u64, u64)>,
    },
    /// `--fp-cross-check`: how often pinprof's Java walk and a frame-pointer walk named through
    /// the JVM's perf map agreed on the compiled frames (cumulative; the last one wins).
    FramePointerCheck(FramePointerCheck),
    /// The Java frames (a `Stack` of Java frames) of the off-CPU interval of thread `tid`
    /// that started at `start_ns`; it follows that interval's `OffCpu`.
    JavaStack {
        tid: u32,
        start_ns: u64,
        stack: StackId,
    },
    /// The class of the object whose monitor (`ObjectMonitor*`) threads blocked entering or
    /// waited on, as read at `time_ns` (a monitor may later serve another object).
    MonitorClass {
        time_ns: u64,
        monitor: u64,
        class: String,
    },
    /// The carriers off CPU at `time_ns` in a wait that has not ended (intervals are sent
    /// when they end): what a live view needs to see starvation while it lasts. The last
    /// one wins.
    OpenWaits {
        time_ns: u64,
        waits: Vec<OpenWait>,
    },
    /// The class of each Java thread's `java.lang.Thread` object (`pkg.Class`), written
    /// with each `JavaThreads`: it tells the JDK's own threads from the application's. (A
    /// record of its own, so that recordings of format 4 stay as they were.)
    JavaThreadClasses {
        time_ns: u64,
        threads: Vec<(u32, String)>,
    },
    /// The object of monitor `monitor` (an `ObjectMonitor*`) is the `java.lang.Class` object
    /// of `class`, the monitor of its `static synchronized` methods; read as `MonitorClass`.
    MonitorClassObject {
        time_ns: u64,
        monitor: u64,
        class: String,
    },
    /// At `time_ns`, when it was read, the object of monitor `monitor` was the lock of the
    /// initialization of `class`, which `initializer` was running: a thread waiting on that
    /// monitor then waited for another thread's class initialization.
    ClassInitLock {
        time_ns: u64,
        monitor: u64,
        class: String,
        initializer: Option<Initializer>,
    },
    /// Thread `tid` of the target was created at `time_ns`: its life starts there.
    ThreadStart {
        tid: u32,
        time_ns: u64,
    },
    /// Thread `tid` of the target left the CPU for the last time at `time_ns` (it exited),
    /// with its scheduler account then (`account.tid` is `tid`), when the kernel's layout was
    /// known: its whole life's running and run-queue time.
    ThreadExit {
        tid: u32,
        time_ns: u64,
        account: Option<ThreadCpu>,
    },
    /// The container the target runs in, when it runs in a PID namespace of its own: written
    /// once, after the recording's header. (Recordings made before it existed still read.)
    Container(ContainerInfo),
    /// At `time_ns`, thread `tid` (or the virtual thread mounted on it) was parked on
    /// `blocker`, read while it parked. (Format 6: older recordings still read.)
    ParkBlocker {
        time_ns: u64,
        tid: u32,
        blocker: ParkBlocker,
    },
    /// At `time_ns`, while thread `tid` waited to enter it, monitor `monitor` (an
    /// `ObjectMonitor*`) was owned by `owner`.
    MonitorOwner {
        time_ns: u64,
        tid: u32,
        monitor: u64,
        owner: BlockerOwner,
    },
    /// At `time_ns`, `tasks` waited in the virtual-thread scheduler's `queues` for a carrier
    /// (read from its `ForkJoinPool`: format 7).
    Queued {
        time_ns: u64,
        tasks: u64,
        queues: u32,
    },
    /// The target's threads were sampled on CPU `hz` times a second (format 8; written once,
    /// after the header, when they were).
    Sampling {
        hz: u32,
    },
    /// An on-CPU sample; its Java stack, when walked, is the `JavaStack` of (`tid`,
    /// `time_ns`) that follows.
    OnCpu(OnCpu),
    /// Cumulative snapshot of every living thread's scheduler histograms (the last one of a
    /// thread wins), with the samples taken so far.
    SchedStats {
        time_ns: u64,
        threads: Vec<ThreadSched>,
        samples: u64,
        /// Samples sent without their Java stack (the ring buffer was filling).
        sample_stacks_skipped: u64,
        /// Threads whose histograms had no room in the kernel.
        threads_not_kept: u64,
    },
    /// Thread `tid`, made runnable at `wake_ns` by `waker_tid`, ran only at `run_ns`.
    LateWakeup(LateWakeup),
    /// The Java frames of the on-CPU sample of thread `tid` at `time_ns` (it follows it).
    SampleStack {
        tid: u32,
        time_ns: u64,
        stack: StackId,
    },
    /// The CPU limit and throttling counters of the target's cgroup, read at the window's
    /// start, at every checkpoint and at the end (format 8).
    CgroupCpu(CgroupCpu),
    /// The JVM's thread list changed (format 9; before, each change was a `JavaThreads` of
    /// the whole list): threads new to it or renamed, with their classes, and those gone from
    /// it; `carriers` are the carriers listed after the change.
    JavaThreadsChanged {
        time_ns: u64,
        listed: Vec<JavaThreadInfo>,
        classes: Vec<(u32, String)>,
        gone: Vec<u32>,
        carriers: u32,
    },
    /// The memory budget pinprof recorded under, and what it cut to stay in it (cumulative
    /// since the window opened; the last one wins; format 9).
    MemoryBudget {
        time_ns: u64,
        bytes: u64,
        cuts: Cuts,
    },
    /// A virtual thread's wait off its carrier (`record --vthread-waits`; format 10).
    VthreadWait(VthreadWait),
    /// Cumulative counts of the virtual-thread waits not sent one by one, and of unmounts;
    /// the last one wins (format 10).
    VthreadWaitSums(VthreadWaitSums),
}

/// A virtual thread's wait while unmounted: parked (a `java.util.concurrent` lock, a
/// condition, a sleep, socket I/O through the poller) or, on JDK 24+, unmounted by the VM in a
/// contended monitor or `Object.wait`. It blocked no OS thread.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct VthreadWait {
    /// `Thread.threadId()`.
    pub vthread_id: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The carrier it left, and the one it mounted on again (the one it left, when it was
    /// `unfinished`).
    pub unmount_tid: u32,
    pub mount_tid: u32,
    pub how: Unmounted,
    /// What it parked on (`Thread.parkBlocker`), its class read as the wait was sent.
    pub blocker: Option<ParkBlocker>,
    /// `Thread.threadId()` of the blocker's owner as the wait began, for an ownable
    /// synchronizer held exclusively.
    pub owner_id: Option<u64>,
    /// The `ObjectMonitor*` a JDK 24+ thread waited on (its class is a `MonitorClass`).
    pub monitor: Option<u64>,
    /// Its frames as it waited (None: not copied, the kernel's budget spent).
    pub stack: Option<StackId>,
    /// Still under way as the recording ended (`end_ns` is the end): nothing had let it go.
    pub unfinished: bool,
}

impl VthreadWait {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// How a virtual thread left its carrier.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub enum Unmounted {
    /// It parked (`LockSupport.park`: locks, conditions, sleeps, I/O).
    Park,
    /// The VM unmounted it in a contended `synchronized` (JDK 24+).
    Monitor,
    /// The VM unmounted it in `Object.wait` (JDK 24+).
    ObjectWait,
}

/// What the kernel counted of virtual threads' waits without sending them.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct VthreadWaitSums {
    pub time_ns: u64,
    pub unmounts: u64,
    /// Waits shorter than the threshold, and their total time.
    pub short_waits: u64,
    pub short_wait_ns: u64,
    /// The threshold they were shorter than.
    pub min_wait_ns: u64,
    /// Mounts whose unmount was not seen (before capture, or forgotten).
    pub unmatched: u64,
    /// Waits sent without their frames.
    pub stacks_skipped: u64,
}

/// What pinprof cut, forgot or dropped to stay within its memory budget and the recording's
/// size cap (see `budget`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Cuts {
    /// Names the target gave longer than 1 KiB (methods, classes, threads, paths, symbols),
    /// cut to it.
    pub names_cut: u64,
    /// Threads of the JVM's list left out, its share of the budget full.
    pub threads_not_listed: u64,
    /// Stacks forgotten by the tables that keep them (written again when seen again).
    pub stacks_forgotten: u64,
    /// Thread births not passed on to the thread list's watcher, its queue full.
    pub births_unsignaled: u64,
    /// Records a live view or a pusher was too far behind to take.
    pub records_not_teed: u64,
    /// Events not written: the recording had reached its size cap.
    pub events_not_written: u64,
}

impl Cuts {
    /// What was counted between `start` and `self` (both cumulative).
    pub fn since(&self, start: &Cuts) -> Cuts {
        Cuts {
            names_cut: self.names_cut.saturating_sub(start.names_cut),
            threads_not_listed: self
                .threads_not_listed
                .saturating_sub(start.threads_not_listed),
            stacks_forgotten: self.stacks_forgotten.saturating_sub(start.stacks_forgotten),
            births_unsignaled: self
                .births_unsignaled
                .saturating_sub(start.births_unsignaled),
            records_not_teed: self.records_not_teed.saturating_sub(start.records_not_teed),
            events_not_written: self
                .events_not_written
                .saturating_sub(start.events_not_written),
        }
    }

    /// What was dropped rather than kept: events and records lost, threads left out. (Names
    /// cut and stacks forgotten lose no event.)
    pub fn dropped(&self) -> u64 {
        self.threads_not_listed
            .saturating_add(self.births_unsignaled)
            .saturating_add(self.records_not_teed)
            .saturating_add(self.events_not_written)
    }

    /// "12 names cut to 1 KiB, 40 stacks forgotten", the non-zero counts.
    pub fn describe(&self) -> String {
        [
            (self.names_cut, "names cut to 1 KiB"),
            (self.threads_not_listed, "Java threads not listed"),
            (
                self.stacks_forgotten,
                "stacks forgotten (written again when seen)",
            ),
            (self.births_unsignaled, "thread births found late"),
            (
                self.records_not_teed,
                "records the live view or pusher missed",
            ),
            (self.events_not_written, "events past the size cap"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// One on-CPU sample of a thread of the target (a CPU clock event).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OnCpu {
    pub tid: u32,
    pub time_ns: u64,
    pub cpu: u32,
    pub kernel_stack: Option<StackId>,
    pub user_stack: Option<StackId>,
    /// What its Java thread was running (the mounted virtual thread among it).
    pub java: Option<JavaBlock>,
}

/// Durations counted by bucket (see `profiler_ebpf::histogram_bucket`): the buckets that
/// are not empty, (index, count).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Histogram {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub buckets: Vec<(u16, u32)>,
}

impl From<&profiler_ebpf::Histogram> for Histogram {
    fn from(h: &profiler_ebpf::Histogram) -> Self {
        Self {
            count: h.count,
            total_ns: h.total_ns,
            max_ns: h.max_ns,
            buckets: h
                .buckets
                .iter()
                .enumerate()
                .filter(|(_, n)| **n != 0)
                .map(|(i, n)| (i as u16, *n))
                .collect(),
        }
    }
}

/// A thread's scheduling, cumulative: wakeup latency (woken to running), run-queue delay
/// (preempted to running again), CPU migrations and involuntary switches.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ThreadSched {
    pub tid: u32,
    pub wakeup: Histogram,
    pub runqueue: Histogram,
    pub migrations: u64,
    pub involuntary_switches: u64,
}

/// A wake-up that waited long for a CPU.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LateWakeup {
    pub tid: u32,
    pub wake_ns: u64,
    pub run_ns: u64,
    pub waker_tid: Option<u32>,
    pub cpu: u32,
}

/// A snapshot of the cgroup that limits the target's CPU (its own, or the nearest ancestor
/// with a quota): the counters are cumulative, as the kernel's `cpu.stat` gives them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CgroupCpu {
    /// When it was read (`CLOCK_MONOTONIC`).
    pub time_ns: u64,
    /// The cgroup, as /proc/PID/cgroup names it.
    pub path: String,
    /// The cgroup hierarchy: 1 or 2.
    pub version: u8,
    /// The quota as cgroup v2's `cpu.max` says it (`20000 100000`: 20 ms of CPU every
    /// 100 ms; `max 100000`: none), v1's rendered alike; None when it could not be read.
    pub cpu_max: Option<String>,
    /// Periods of the quota that went by with the cgroup's threads runnable.
    pub nr_periods: u64,
    /// Periods in which the quota ran out and the cgroup was throttled.
    pub nr_throttled: u64,
    /// Time spent throttled, ns.
    pub throttled_ns: u64,
}

/// The object a thread parks on (`Thread.parkBlocker`): a `java.util.concurrent` lock's sync,
/// a latch's, a condition; its address then (the collector may move it), its class.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ParkBlocker {
    pub object: u64,
    pub class: String,
    /// An `AbstractOwnableSynchronizer` (a `ReentrantLock`'s sync, a write lock).
    pub ownable: bool,
    /// For an ownable synchronizer held exclusively: who holds it.
    pub owner: Option<BlockerOwner>,
}

/// The thread that owns a synchronizer.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct BlockerOwner {
    /// `Thread.threadId()`.
    pub java_id: u64,
    pub name: Option<String>,
    pub virtual_thread: bool,
    /// The OS thread running it then: a platform thread's own; a virtual thread's carrier
    /// while it is mounted, None while it is not (it needs a carrier to let go).
    pub tid: Option<u32>,
}

/// A target's container, as pinprof saw it when recording began.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ContainerInfo {
    /// Its PID namespace's inode (`stat -L -c %i /proc/PID/ns/pid`).
    pub pid_ns_inode: u64,
    /// Its pid inside that namespace.
    pub ns_pid: u32,
    /// Its cgroup v2 path (`0::` of /proc/PID/cgroup), when it has one.
    pub cgroup: Option<String>,
    /// That cgroup's `cpu.max` (`max 100000`: no limit), when its CPU controller is there.
    pub cpu_max: Option<String>,
}

/// The thread running a class's static initializer.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Initializer {
    /// The platform thread (a carrier, for a virtual thread).
    pub tid: u32,
    /// `Thread.threadId()` of the virtual thread mounted on it as it ran the initializer, if
    /// one was.
    pub vthread: Option<u64>,
}

/// A carrier's wait still under way at a checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OpenWait {
    pub tid: u32,
    pub start_ns: u64,
    pub state: OffCpuState,
    pub java: Option<JavaBlock>,
}

impl Event {
    /// When the event happened or its snapshot was taken (kernel monotonic ns), for the events
    /// that say.
    pub fn time_ns(&self) -> Option<u64> {
        match self {
            Event::OffCpu(o) => Some(o.end_ns),
            Event::OnCpu(s) => Some(s.time_ns),
            Event::LateWakeup(w) => Some(w.run_ns),
            Event::VthreadWait(w) => Some(w.end_ns),
            Event::VthreadWaitSums(s) => Some(s.time_ns),
            Event::SchedStats { time_ns, .. } => Some(*time_ns),
            Event::SampleStack { time_ns, .. } => Some(*time_ns),
            Event::Syscall(s) => Some(s.end_ns),
            Event::Counters { time_ns, .. }
            | Event::ShortOffCpu { time_ns, .. }
            | Event::ThreadCpu { time_ns, .. }
            | Event::TargetExit { time_ns }
            | Event::JavaThreads { time_ns, .. }
            | Event::SyscallSums { time_ns, .. }
            | Event::KernelLocks { time_ns, .. }
            | Event::MonitorClass { time_ns, .. }
            | Event::OpenWaits { time_ns, .. }
            | Event::JavaThreadClasses { time_ns, .. }
            | Event::MonitorClassObject { time_ns, .. }
            | Event::ClassInitLock { time_ns, .. }
            | Event::ThreadStart { time_ns, .. }
            | Event::ThreadExit { time_ns, .. }
            | Event::ParkBlocker { time_ns, .. }
            | Event::MonitorOwner { time_ns, .. }
            | Event::Queued { time_ns, .. }
            | Event::JavaThreadsChanged { time_ns, .. }
            | Event::MemoryBudget { time_ns, .. } => Some(*time_ns),
            Event::CgroupCpu(c) => Some(c.time_ns),
            _ => None,
        }
    }
}
