//! The maps (per-thread state, sums, the ring buffer user space reads) and helpers adding to them.

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, PerCpuArray, PerCpuHashMap, ProgramArray, RingBuf, StackTrace},
};
use profiler_ebpf::{
    JAVA_WINDOW_BYTES, MissedWait, OffCpuStart, SchedStats, ShortOffCpu, StackChunkCopy, StackCopy,
    StackRequest, StackReuse, SyscallKey, SyscallStart, WaitAmendment, WaitSum, counter,
};

/// `sched_switch`'s second half (`sched_switch_blocked`), reached by a tail call: a program of
/// its own, with its own stack and verification, or the two would not fit in one.
#[map]
pub(crate) static SWITCH_TAIL: ProgramArray = ProgramArray::with_max_entries(1, 0);
/// Per CPU: a wait `sched_switch` found still open as its thread blocked again (its switch
/// back in was not reported), with the thread's CPU time now, for `sched_switch_blocked` to
/// end (`tid` 0: none).
#[map]
pub(crate) static MISSED_WAIT: PerCpuArray<MissedWait> = PerCpuArray::with_max_entries(1, 0);
/// In a PID namespace, the target's process id as the host numbers it, from the first of its
/// threads seen running (0 until then); outside one it is `TARGET_TGID`.
#[map]
pub(crate) static HOST_TGID: Array<u32> = Array::with_max_entries(1, 0);
#[map]
pub(crate) static EVENTS: RingBuf = RingBuf::with_byte_size(8 << 20, 0);
#[map]
pub(crate) static STACKS: StackTrace = StackTrace::with_max_entries(32 * 1024, 0);
#[map]
pub(crate) static STARTS: HashMap<u32, OffCpuStart> = HashMap::with_max_entries(64 * 1024, 0);
#[map]
pub(crate) static SHORT_OFF_CPU: HashMap<u32, ShortOffCpu> =
    HashMap::with_max_entries(64 * 1024, 0);
/// The target's Java threads: thread id -> address of its `JavaThread` (| `THREAD_BITS`),
/// kept by user space.
#[map]
pub(crate) static JAVA_THREADS: HashMap<u32, u64> = HashMap::with_max_entries(64 * 1024, 0);
/// In a PID namespace: the namespace's id of each of the target's threads seen running, by
/// host id (the scheduler's tracepoints name the task switched in or woken by its host id).
#[map]
pub(crate) static NS_TIDS: HashMap<u32, u32> = HashMap::with_max_entries(64 * 1024, 0);
/// In a PID namespace: threads the target started and that have not run yet, by host id,
/// with their birth (sent once they run, when their namespace id is known).
#[map]
pub(crate) static NS_BIRTHS: HashMap<u32, u64> = HashMap::with_max_entries(8 * 1024, 0);
/// Per thread: the native stacks of its last wait in a system call, the call, and how many
/// waits since reused them (see `native_stacks`).
#[map]
pub(crate) static KSTACKS: HashMap<u32, StackReuse> = HashMap::with_max_entries(64 * 1024, 0);
/// The Java state of waits that began before their thread was known as a Java thread, per
/// thread, written by user space and applied here when the wait ends (see `amend`).
#[map]
pub(crate) static AMENDMENTS: HashMap<u32, WaitAmendment> = HashMap::with_max_entries(8 * 1024, 0);
/// Per carrier: where copies of a mounted virtual thread's stack end (the address past its
/// continuation's entry frame, learned by user space from its walks; the carrier's own frames
/// below it are never walked). A carrier not in it has its stack copied to the base.
#[map]
pub(crate) static COPY_ENDS: HashMap<u32, u64> = HashMap::with_max_entries(4 * 1024, 0);
/// Java threads whose stack is wanted when they leave the system call they blocked in.
#[map]
pub(crate) static STACK_REQUESTS: HashMap<u32, StackRequest> =
    HashMap::with_max_entries(8 * 1024, 0);
/// System calls in progress, per thread.
#[map]
pub(crate) static IN_SYSCALL: HashMap<u32, SyscallStart> = HashMap::with_max_entries(64 * 1024, 0);
/// Sums of the system calls shorter than `MIN_SYSCALL_NS`, per (thread, call).
#[map]
pub(crate) static SYSCALL_SUMS: HashMap<SyscallKey, WaitSum> =
    HashMap::with_max_entries(64 * 1024, 0);
/// Kernel lock contention in progress, per thread: its start.
#[map]
pub(crate) static CONTENTION_STARTS: HashMap<u32, u64> = HashMap::with_max_entries(64 * 1024, 0);
/// Kernel lock contention of the target's threads, per lock address.
#[map]
pub(crate) static KERNEL_LOCKS: PerCpuHashMap<u64, WaitSum> =
    PerCpuHashMap::with_max_entries(16 * 1024, 0);
/// The same contention, per thread.
#[map]
pub(crate) static KERNEL_LOCK_THREADS: HashMap<u32, WaitSum> =
    HashMap::with_max_entries(64 * 1024, 0);
/// Per CPU: the `JavaThread` bytes read at a block (see `JvmLayout::window_start`).
#[map]
pub(crate) static JAVA_WINDOW: PerCpuArray<[u8; JAVA_WINDOW_BYTES]> =
    PerCpuArray::with_max_entries(1, 0);
/// Per CPU: where a Java stack copy is made before its used part is sent (a fixed-size
/// record would take its whole size from the ring buffer).
#[map]
pub(crate) static STACK_SCRATCH: PerCpuArray<StackCopy> = PerCpuArray::with_max_entries(1, 0);
#[map]
pub(crate) static STACK_CHUNK_SCRATCH: PerCpuArray<StackChunkCopy> =
    PerCpuArray::with_max_entries(1, 0);
/// The same two for `sched_switch` and `sched_waking` (a pinned carrier's stack as it blocks,
/// a waker's as it wakes): both run with interrupts off, so neither interrupts the other,
/// but either may find a system call program preempted halfway through its copy.
#[map]
pub(crate) static SCHED_STACK_SCRATCH: PerCpuArray<StackCopy> = PerCpuArray::with_max_entries(1, 0);
#[map]
pub(crate) static SCHED_STACK_CHUNK_SCRATCH: PerCpuArray<StackChunkCopy> =
    PerCpuArray::with_max_entries(1, 0);
/// The same three for the on-CPU sampler: it can interrupt the system call programs (raw
/// tracepoints, which do not keep other programs out) while they fill theirs.
#[map]
pub(crate) static SAMPLE_JAVA_WINDOW: PerCpuArray<[u8; JAVA_WINDOW_BYTES]> =
    PerCpuArray::with_max_entries(1, 0);
#[map]
pub(crate) static SAMPLE_STACK_SCRATCH: PerCpuArray<StackCopy> =
    PerCpuArray::with_max_entries(1, 0);
#[map]
pub(crate) static SAMPLE_STACK_CHUNK_SCRATCH: PerCpuArray<StackChunkCopy> =
    PerCpuArray::with_max_entries(1, 0);
/// Per CPU: when a waker's stacks were last captured (see `capture_budget`).
#[map]
pub(crate) static LAST_WAKER_CAPTURE: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
/// Per CPU: when a Java stack was last copied at a block not known to be long (see
/// `switch_out`).
#[map]
pub(crate) static LAST_SPARE_COPY: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
/// Per thread: its wakeup latency and run-queue delay histograms, migrations and involuntary
/// switches (see `SchedStats`). Allocated as threads run (`BPF_F_NO_PREALLOC`: 3.6 KiB
/// each), removed as they end.
#[map]
pub(crate) static SCHED_STATS: HashMap<u32, SchedStats> =
    HashMap::with_max_entries(16 * 1024, NO_PREALLOC);
/// Never written: the zeroed first value of a thread's `SCHED_STATS` entry (too large for the
/// program's stack).
#[map]
pub(crate) static SCHED_STATS_ZERO: PerCpuArray<SchedStats> = PerCpuArray::with_max_entries(1, 0);
const NO_PREALLOC: u32 = 1;
#[map]
pub(crate) static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Adds one wait to a sum in `map` (a hash map, or a per-CPU one: a kernel lock's entry is
/// updated from every CPU at once, and plain adds to one shared entry would lose counts under
/// the very contention being measured). The two map types share no trait, hence a macro.
macro_rules! add_wait {
    ($map:expr, $key:expr, $duration:expr) => {{
        let duration: u64 = $duration;
        match $map.get_ptr_mut($key) {
            Some(sum) => unsafe { $crate::programs::maps::add_to(sum, duration) },
            None => {
                let first = ::profiler_ebpf::WaitSum {
                    count: 1,
                    total_ns: duration,
                    max_ns: duration,
                };
                if $map.insert($key, &first, 0).is_err() {
                    $crate::programs::maps::count(::profiler_ebpf::counter::SYSCALL_MAP_FULL);
                }
            }
        }
    }};
}
pub(crate) use add_wait;

#[inline(always)]
pub(crate) fn count(index: u32) {
    if let Some(slot) = COUNTERS.get_ptr_mut(index) {
        unsafe { *slot += 1 };
    }
}

#[inline(always)]
pub(crate) unsafe fn add_to(sum: *mut WaitSum, duration: u64) {
    unsafe {
        (*sum).count += 1;
        (*sum).total_ns += duration;
        if duration > (*sum).max_ns {
            (*sum).max_ns = duration;
        }
    }
}
