//! Types shared by pinprof's kernel programs and its user space.
//!
//! Everything here is `#[repr(C)]` and plain data: the kernel writes these records into the ring
//! buffer and maps, user space reads them back byte for byte. Changing a layout changes both sides.
#![no_std]

/// Kinds of record in the `EVENTS` ring buffer; every record starts with a `u32` kind.
pub mod kind {
    /// [`crate::OffCpuEvent`]
    pub const OFF_CPU: u32 = 1;
    /// [`crate::ExitEvent`]
    pub const EXIT: u32 = 2;
    /// [`crate::StackCopy`]
    pub const STACK_COPY: u32 = 3;
    /// [`crate::SyscallEvent`]: a system call that lasted at least the threshold.
    pub const SYSCALL: u32 = 4;
    /// [`crate::SyscallEvent`]: a futex wait that lasted at least the threshold, with its waker.
    pub const FUTEX_WAIT: u32 = 5;
    /// [`crate::NativeStackCopy`]
    pub const NATIVE_STACK: u32 = 6;
    /// [`crate::ThreadRename`]
    pub const RENAME: u32 = 7;
    /// [`crate::StackChunkCopy`]
    pub const STACK_CHUNK_COPY: u32 = 8;
    /// [`crate::ThreadLife`]: a thread of the target was created.
    pub const THREAD_START: u32 = 9;
    /// [`crate::ThreadLife`]: a thread of the target left the CPU for the last time.
    pub const THREAD_EXIT: u32 = 10;
    /// [`crate::OnCpuSample`]
    pub const ON_CPU: u32 = 11;
    /// [`crate::LateWakeup`]
    pub const LATE_WAKEUP: u32 = 12;
    /// [`crate::StackCopy`] of an on-CPU sample (keyed by its time), not of a wait.
    pub const SAMPLE_STACK_COPY: u32 = 13;
    /// [`crate::StackChunkCopy`] of an on-CPU sample.
    pub const SAMPLE_STACK_CHUNK_COPY: u32 = 14;
    /// [`crate::VthreadWaitCopy`]: a virtual thread's wait off its carrier, with its frames.
    pub const VTHREAD_WAIT: u32 = 15;
}

/// `clone(2)` flag of a new thread (as opposed to a new process).
pub const CLONE_THREAD: u64 = 0x0001_0000;

/// x86_64 system call numbers pinprof's kernel programs look at.
pub mod sysno {
    pub const FUTEX: u32 = 202;
    pub const FUTEX_WAITV: u32 = 449;
    pub const FUTEX_WAKE: u32 = 454;
    pub const FUTEX_WAIT: u32 = 455;
    pub const FUTEX_REQUEUE: u32 = 456;
}

/// `futex(2)` operations that wait (after masking `FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME`).
pub mod futex_op {
    pub const CMD_MASK: u64 = !(128 | 256);
    pub const WAIT: u64 = 0;
    pub const LOCK_PI: u64 = 6;
    pub const WAIT_BITSET: u64 = 9;
    pub const WAIT_REQUEUE_PI: u64 = 11;
    pub const LOCK_PI2: u64 = 13;

    /// Whether a `futex(2)` call with this `op` argument waits.
    pub fn waits(op: u64) -> bool {
        matches!(
            op & CMD_MASK,
            WAIT | LOCK_PI | WAIT_BITSET | WAIT_REQUEUE_PI | LOCK_PI2
        )
    }

    /// Whether system call `nr`, with `arg1` its second argument, is a futex wait: `futex(2)`
    /// with an `op` that waits, `futex_waitv(2)` or `futex_wait(2)`.
    pub fn call_waits(nr: u32, arg1: u64) -> bool {
        use super::sysno::{FUTEX, FUTEX_WAIT, FUTEX_WAITV};
        match nr {
            FUTEX => waits(arg1),
            FUTEX_WAITV | FUTEX_WAIT => true,
            _ => false,
        }
    }
}

/// Indexes into the per-CPU `COUNTERS` array.
pub mod counter {
    /// A record could not be reserved in the ring buffer (full): the event is lost.
    pub const LOST_EVENTS: u32 = 0;
    /// `bpf_get_stackid` failed (map full or hash collision): the event carries no stack.
    pub const STACK_MISSES: u32 = 1;
    /// The per-thread start map was full: the off-CPU interval could not be timed.
    pub const START_MAP_FULL: u32 = 2;
    /// Off-CPU intervals shorter than the threshold, summed in `SHORT_OFF_CPU` instead of sent.
    pub const SHORT_INTERVALS: u32 = 3;
    /// A Java thread's stack was wanted but could not be copied (it had moved on, or the ring
    /// buffer was full).
    pub const STACK_COPY_MISSES: u32 = 4;
    /// A system call, a kernel lock wait or a sum could not be kept: its map was full.
    pub const SYSCALL_MAP_FULL: u32 = 5;
    /// Lock releases recorded without the releasing thread's stacks (capture budget spent).
    pub const WAKER_STACKS_SKIPPED: u32 = 6;
    /// A virtual thread's frozen frames were copied only in part (`CHUNK_COPY_BYTES`,
    /// `MAX_COPIED_CHUNKS`).
    pub const CHUNK_COPIES_CUT: u32 = 7;
    /// A preempted thread's return to a CPU the kernel did not report (it skips a switch now
    /// and then): the wait is dropped; its time is in the thread's scheduler account.
    pub const MISSED_PREEMPTIONS: u32 = 8;
    /// A wait whose end the kernel did not report (it skipped the switch back in) and whose
    /// end could not be told from the thread's CPU time either: lost, and counted apart from
    /// the ring buffer's losses, since a larger buffer would not have kept it.
    pub const MISSED_SWITCH_INS: u32 = 9;
    /// A thread's scheduler histograms could not be kept (their map was full).
    pub const SCHED_MAP_FULL: u32 = 10;
    /// On-CPU samples of the target's threads taken (sent or lost).
    pub const ON_CPU_SAMPLES: u32 = 11;
    /// On-CPU samples sent without their Java stack: the ring buffer was filling.
    pub const SAMPLE_STACKS_SKIPPED: u32 = 12;
    /// A wait whose switch back in the kernel did not report, ended at its next switch-out
    /// at the time its CPU time since says it ran again (the wake-up, when seen, bounds it).
    pub const RECOVERED_SWITCH_INS: u32 = 13;
    /// Virtual threads unmounted (`freeze` entered, and `freeze_preempt` on JDK 24+).
    pub const VTHREAD_UNMOUNTS: u32 = 14;
    /// Virtual-thread waits shorter than `MIN_VTHREAD_WAIT_NS`: counted, and their time
    /// summed in `VTHREAD_SHORT_WAIT_NS`, not sent.
    pub const VTHREAD_SHORT_WAITS: u32 = 15;
    pub const VTHREAD_SHORT_WAIT_NS: u32 = 16;
    /// Mounts whose unmount was not seen (it came before capture, or its entry was evicted
    /// from the map of unmounted threads): the wait's start is not known.
    pub const VTHREAD_UNMATCHED: u32 = 17;
    /// Virtual-thread waits sent without their frames (the copy budget was spent, or the
    /// CPU's scratch space was in use by a preempted copy).
    pub const VTHREAD_STACKS_SKIPPED: u32 = 18;
    pub const COUNT: u32 = 19;
}

/// Bytes of a Java thread's stack copied from its last Java frame up: enough for the frames
/// of a deep virtual thread (interpreted frames are ~100-200 bytes).
pub const STACK_COPY_BYTES: usize = 16 * 1024;

/// Low bit of a `JAVA_THREADS` value: the thread is a carrier. (`JavaThread*` is aligned.)
pub const CARRIER_BIT: u64 = 1;
/// Next bit: the thread is one of the JDK's own service threads (a timer, a poller, a
/// cleaner), whose waits are mostly its waiting for work.
pub const SERVICE_BIT: u64 = 2;
/// The bits of a `JAVA_THREADS` value that are not the address.
pub const THREAD_BITS: u64 = CARRIER_BIT | SERVICE_BIT;

/// `prev_state` values of `sched_switch` (see `TASK_REPORT` in the kernel).
pub mod task_state {
    pub const RUNNING: u64 = 0;
    pub const INTERRUPTIBLE: u64 = 0x1;
    pub const UNINTERRUPTIBLE: u64 = 0x2;
    /// `__TASK_STOPPED` (a SIGSTOP, SIGTSTP...) and `__TASK_TRACED` (a debugger's stop).
    pub const STOPPED: u64 = 0x4;
    pub const TRACED: u64 = 0x8;
    /// `EXIT_DEAD` and `EXIT_ZOMBIE`: a task switched out for the last time (`do_task_dead`).
    pub const DEAD: u64 = 0x10 | 0x20;
}

/// Largest stack kept by the `STACKS` map (the kernel's `PERF_MAX_STACK_DEPTH`).
pub const MAX_STACK_DEPTH: usize = 127;

/// Where HotSpot keeps what pinprof reads at a block, as byte offsets. User space finds them by
/// name in the target's VMStructs and sets them before load; 0 means "not in this JDK".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JvmLayout {
    /// In `JavaThread`: the `OopHandle`s of the carrier's own `Thread` and of the thread it
    /// runs now (the same object unless a virtual thread is mounted).
    pub thread_obj: u32,
    pub vthread: u32,
    pub thread_state: u32,
    /// `ObjectMonitor*` a thread is blocked entering, or waiting on (`Object.wait`).
    pub pending_monitor: u32,
    pub waiting_monitor: u32,
    pub held_monitor_count: u32,
    /// `ContinuationEntry*` (JDK 24+) and its `_pin_count` (critical sections).
    pub cont_entry: u32,
    pub cont_pin_count: u32,
    /// `JavaFrameAnchor` fields, from the start of `JavaThread`.
    pub anchor_sp: u32,
    pub anchor_pc: u32,
    pub anchor_fp: u32,
    /// In a `java.lang.Thread` object: its `tid` (`Thread.threadId()`).
    pub java_tid: u32,
    /// `JavaThread::_stack_base`: the top (highest address) of the thread's stack.
    pub stack_base: u32,
    /// The `JavaThread` fields above lie in [window_start, window_start + JAVA_WINDOW_BYTES):
    /// read in one go (0 length: read one by one).
    pub window_start: u32,
    pub window_len: u32,
    /// Full-width oops (in `OopHandle` slots and object fields) are colored, as generational
    /// ZGC stores them: [`ZGC_REMAP_SHIFT`]; 0: they are plain addresses.
    pub colored_oops: u32,
    /// Address of `SafepointSynchronize::_state` (non-zero while a safepoint is under way).
    pub safepoint_state: u64,
    /// Where a mounted virtual thread's frozen frames are (0: not read): in a `VirtualThread`
    /// its `Continuation`, in that its `tail` `StackChunk`, in that the `sp` (an int, in
    /// words) where the chunk's frames begin.
    pub vthread_cont: u32,
    pub cont_tail: u32,
    pub chunk_sp: u32,
    /// Compressed oops: `base + (narrow << shift)`; `u32::MAX`: oop fields are full pointers.
    pub oop_shift: u32,
    pub oop_base: u64,
    /// In a `StackChunk`: its `parent` chunk (an oop) and `bottom` (an int, in words: where
    /// its frames end); where its stack words begin, from the chunk's start (0: the chunk's
    /// frames are not copied).
    pub chunk_parent: u32,
    pub chunk_bottom: u32,
    pub chunk_stack: u32,
    /// `Thread.parkBlocker` in a `java.lang.Thread` (an oop field); 0: not read.
    pub park_blocker: u32,
    /// `AbstractOwnableSynchronizer.exclusiveOwnerThread` (an oop field); 0: not read (the
    /// JVM had not loaded the class).
    pub ownable_owner: u32,
    /// `ObjectMonitor::_owner` when it holds the owner's thread id (JDK 24+); 0: it does not.
    pub monitor_owner: u32,
}

impl JvmLayout {
    /// No JVM: nothing to read (and compressed oops not known to be in use).
    pub const NONE: Self = Self {
        thread_obj: 0,
        vthread: 0,
        thread_state: 0,
        pending_monitor: 0,
        waiting_monitor: 0,
        held_monitor_count: 0,
        cont_entry: 0,
        cont_pin_count: 0,
        anchor_sp: 0,
        anchor_pc: 0,
        anchor_fp: 0,
        java_tid: 0,
        stack_base: 0,
        window_start: 0,
        window_len: 0,
        colored_oops: 0,
        safepoint_state: 0,
        vthread_cont: 0,
        cont_tail: 0,
        chunk_sp: 0,
        oop_shift: u32::MAX,
        oop_base: 0,
        chunk_parent: 0,
        chunk_bottom: 0,
        chunk_stack: 0,
        park_blocker: 0,
        ownable_owner: 0,
        monitor_owner: 0,
    };
}

/// Where generational ZGC's colored pointers (`zpointer`, x86_64) keep their four remap bits,
/// one of which is set: the address is the pointer shifted right past the set bit. (The
/// bits below are mark and remembered-set metadata.)
pub const ZGC_REMAP_SHIFT: u32 = 12;

/// The address a full-width oop `raw` read from the target holds: itself, or with colored
/// oops (`colored` = [`ZGC_REMAP_SHIFT`]) the address its color bits say; 0 for null or for
/// bits that are no colored pointer. The remap bit set tells the shift whatever the GC's
/// phase, so a pointer the GC has not yet recolored still gives its object's address.
#[inline(always)]
pub fn uncolor_oop(raw: u64, colored: u32) -> u64 {
    if colored == 0 {
        return raw;
    }
    let shift = match (raw >> (colored & 31)) & 0xf {
        1 => 1,
        2 => 2,
        4 => 3,
        8 => 4,
        _ => return 0,
    };
    raw >> ((colored & 31) + shift)
}

/// Bytes of user stack copied for unwinding native code with its DWARF call frame information
/// (C libraries without frame pointers).
pub const NATIVE_COPY_BYTES: usize = 8 * 1024;

/// A thread's user registers and the top of its user stack, for unwinding in user space.
/// `key_ns` ties it to its event: a system call's start, or a wake-up's time.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NativeStackCopy {
    pub kind: u32,
    pub tid: u32,
    pub key_ns: u64,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    pub len: u32,
    pub _pad: u32,
    pub data: [u8; NATIVE_COPY_BYTES],
}

/// A thread of the target renamed itself (`task:task_rename`): names of short-lived threads.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadRename {
    pub kind: u32,
    pub tid: u32,
    pub comm: [u8; 16],
}

/// Bits of [`SyscallStart::flags`].
pub mod syscall_flags {
    /// A futex call that waits.
    pub const FUTEX_WAIT: u32 = 1;
    /// The calling thread is a carrier with nothing mounted: its waits are idleness.
    pub const IDLE: u32 = 2;
    /// `waker` is filled in.
    pub const WOKEN: u32 = 4;
}

/// Who woke a waiting thread (`sched_waking`, in the waker's context).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Waker {
    pub tid: u32,
    /// The waker's stacks at the wake-up (the releasing code); negative: none.
    pub user_stack_id: i32,
    pub kernel_stack_id: i32,
    pub _pad: u32,
    pub wake_ns: u64,
}

/// `SyscallEvent::ret` of a call timed from the scheduler's switches: it was not seen.
pub const RET_UNSEEN: i64 = i64::MIN;

/// A system call in progress, per thread: from `sys_enter` to `sys_exit` when system calls
/// are traced, else the one a thread blocked in, from its switch-out to its switch-in.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SyscallStart {
    pub start_ns: u64,
    pub nr: u32,
    pub flags: u32,
    pub args: [u64; 4],
    /// For a futex wait with a timeout: the timeout in ns; else `u64::MAX`.
    pub timeout_ns: u64,
    pub waker: Waker,
}

/// A system call of the target that lasted at least the threshold (or a futex wait, then with
/// its waker). Times are `CLOCK_MONOTONIC` ns.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SyscallEvent {
    pub kind: u32,
    pub tid: u32,
    pub nr: u32,
    /// The caller's user stack at the call (taken as it returns, or as it blocked: the same
    /// stack).
    pub user_stack_id: i32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub ret: i64,
    pub args: [u64; 4],
    pub timeout_ns: u64,
    pub waker: Waker,
    /// For a call on a file descriptor: its inode number and mode (`S_IFIFO`, `S_IFSOCK`...),
    /// read as the call ends, so a descriptor closed right after can still be named.
    pub fd_inode: u64,
    pub fd_mode: u32,
    pub _pad: u32,
}

/// Where the kernel keeps a file descriptor's inode, from the kernel's BTF; all zero when
/// unknown (then descriptors are named from /proc only).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdLayout {
    pub task_files: u32,
    pub files_fdt: u32,
    pub fdt_max_fds: u32,
    pub fdt_fd: u32,
    pub file_inode: u32,
    pub inode_ino: u32,
    pub inode_mode: u32,
    pub _pad: u32,
    /// Bit n: system call n takes a file descriptor as its first argument.
    pub fd_syscalls: [u64; 8],
}

/// Key of the per-(thread, system call) sums of calls shorter than the threshold.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SyscallKey {
    pub tid: u32,
    pub nr: u32,
}

/// Count, total and longest of a kind of wait, summed in the kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitSum {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// A Java thread that blocked long enough for its Java stack to be wanted, kept until it
/// leaves the system call it blocked in (its user stack is untouched until then).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StackRequest {
    /// Start of the off-CPU interval the copy belongs to.
    pub start_ns: u64,
    pub anchor_sp: u64,
}

/// What the kernel says of a Java thread's stack copy (see [`StackCopy`]), before its bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StackHead {
    pub kind: u32,
    pub tid: u32,
    /// Start of the off-CPU interval this stack blocked in.
    pub start_ns: u64,
    pub anchor_sp: u64,
    pub anchor_pc: u64,
    pub anchor_fp: u64,
    /// The mounted virtual thread (its oop and `Thread.threadId()`), and the `StackChunk`
    /// holding its older frames with the `sp` they began at, as the thread left its system
    /// call (0: none).
    pub vthread: u64,
    pub vthread_id: u64,
    pub chunk: u64,
    pub chunk_sp: u32,
    /// Bytes of the stack copied from `anchor_sp` (1..=`STACK_COPY_BYTES`).
    pub len: u32,
}

/// The raw bytes of a Java thread's stack from its last Java frame (`JavaFrameAnchor`) up,
/// for user space to walk with HotSpot's frame layout. The kernel fills one in a per-CPU
/// scratch map and sends only `head` and the `head.len` bytes of `data` it used.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct StackCopy {
    pub head: StackHead,
    pub data: [u8; STACK_COPY_BYTES],
}

/// Bytes of a virtual thread's frozen frames copied at most, over all its chunks: the frames
/// a pinned thread left frozen are a few hundred bytes to a few KiB.
pub const CHUNK_COPY_BYTES: usize = 8 * 1024;
/// Stack chunks copied at most: the tail and its parents (a thread adds a chunk only when its
/// tail has no room for the frames it freezes).
pub const MAX_COPIED_CHUNKS: usize = 4;

/// Where one chunk's frames are in [`ChunkCopy::data`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopiedChunk {
    /// The chunk's address, its `sp` (for the tail: as noted, [`StackHead::chunk_sp`]) and
    /// `bottom`, in words from its stack's start: its frames lie between the two.
    pub addr: u64,
    pub sp: u32,
    pub bottom: u32,
    /// Its bytes in `data`, from two words below `sp` (the first frame's return address and
    /// saved frame pointer); fewer than up to `bottom` when the copy was cut there.
    pub offset: u32,
    pub len: u32,
}

/// Where the frames of the stack chunks of the virtual thread mounted on a carrier (the tail,
/// then its parents) are in their copy, made as the carrier leaves its system call: read
/// later from the heap, a chunk may have moved (a young GC) or been thawed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ChunkHead {
    pub chunks: [CopiedChunk; MAX_COPIED_CHUNKS],
    /// Entries of `chunks` filled in.
    pub count: u32,
    /// Bytes of the last chunk's frames past the end of the copy; 0: none.
    pub cut: u32,
    /// The oldest chunk not copied (no room left); 0: none, the chain was copied to its end.
    pub rest: u64,
}

/// The copied frames of a virtual thread's stack chunks, as user space holds them.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ChunkCopy {
    pub head: ChunkHead,
    /// The chunks' bytes, each where `head.chunks` says.
    pub data: [u8; CHUNK_COPY_BYTES],
}

/// Bytes after the heads of a [`StackChunkCopy`]: the chunks' bytes (`CHUNK_COPY_BYTES` at
/// most, but each chunk's read is an offset below `CHUNK_COPY_BYTES` as long as that for the
/// kernel's verifier), then the stack's (from an offset of `CHUNK_COPY_BYTES` at most).
pub const STACK_CHUNK_DATA_BYTES: usize = CHUNK_COPY_BYTES + STACK_COPY_BYTES;
const _: () = assert!(STACK_CHUNK_DATA_BYTES >= 2 * CHUNK_COPY_BYTES);

/// The stack of a carrier whose mounted virtual thread has frames frozen in stack chunks,
/// with a copy of those frames; sent instead of a plain [`StackCopy`] only then. Filled in a
/// per-CPU scratch map (its size must stay within a per-CPU map value's 32 KiB) and sent up
/// to the end of what it used: the two heads, the chunks' bytes (as far as the last chunk's
/// `offset + len`), then `stack.len` bytes of the stack.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct StackChunkCopy {
    pub stack: StackHead,
    pub chunk: ChunkHead,
    pub data: [u8; STACK_CHUNK_DATA_BYTES],
}

/// How a virtual thread left its carrier.
pub mod unmount {
    /// `freeze`: it parked, slept or waited on I/O (`LockSupport.park` under it all).
    pub const PARK: u32 = 0;
    /// `freeze_preempt` (JDK 24+): the VM unmounted it in a contended monitor enter.
    pub const MONITOR: u32 = 1;
    /// `freeze_preempt` (JDK 24+) in an `Object.wait`.
    pub const OBJECT_WAIT: u32 = 2;
}

/// A virtual thread unmounted, kept by its id (`Thread.threadId()`) until it mounts again
/// (kernel side only). A failed freeze (the thread was pinned) leaves an entry that the next
/// freeze of the same thread overwrites before any mount: the thread never left its carrier.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Unmount {
    pub start_ns: u64,
    /// What it parked on (`Thread.parkBlocker`, an oop), or 0.
    pub blocker: u64,
    /// The `threadId()` of the blocker's owner, read as an ownable synchronizer's
    /// (`exclusiveOwnerThread`) at the unmount; user space keeps it only for a blocker whose
    /// class is one. For a monitor, its owner's (JDK 24+). 0: none.
    pub owner_id: u64,
    /// The `ObjectMonitor*` a preempted thread waits to enter or waits on, or 0.
    pub monitor: u64,
    /// The virtual thread's oop as it unmounted (its frames can be read from the heap while
    /// it stays unmounted, unless a collection moved it).
    pub oop: u64,
    /// The carrier it left.
    pub tid: u32,
    /// [`unmount`].
    pub how: u32,
}

/// A virtual thread's wait off its carrier, sent as it mounts again (when the wait lasted at
/// least `MIN_VTHREAD_WAIT_NS`): what [`Unmount`] kept, and the frames it waited in, still
/// frozen in its stack chunks then.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct VthreadWaitHead {
    pub kind: u32,
    /// The carrier it mounted on.
    pub tid: u32,
    pub vthread_id: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub blocker: u64,
    pub owner_id: u64,
    pub monitor: u64,
    /// The carrier it left, and [`unmount`].
    pub unmount_tid: u32,
    pub how: u32,
}

/// [`VthreadWaitHead`] with the copy of the frozen frames, filled in a per-CPU scratch map and
/// sent up to the end of the chunks' bytes (`chunk.count` 0: no frames, the heads alone).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct VthreadWaitCopy {
    pub head: VthreadWaitHead,
    pub chunk: ChunkHead,
    /// Twice `CHUNK_COPY_BYTES`, as for [`StackChunkCopy`], for the verifier's bounds.
    pub data: [u8; 2 * CHUNK_COPY_BYTES],
}

/// Bytes of a `JavaThread` read at once at a block (its fields pinprof needs span ~470 bytes
/// in JDK 21 and 25).
pub const JAVA_WINDOW_BYTES: usize = 512;

/// Bits of [`JavaState::flags`].
pub mod java_flags {
    /// The thread is a Java thread and its `JavaThread` was read.
    pub const KNOWN: u32 = 1;
    /// A virtual thread was mounted on it.
    pub const MOUNTED: u32 = 2;
    /// A safepoint was under way: the thread may be stopping for it, not waiting on its own.
    pub const SAFEPOINT: u32 = 4;
    /// The thread is a carrier of the virtual-thread scheduler.
    pub const CARRIER: u32 = 8;
    /// The thread is one of the JDK's own service threads (`SERVICE_BIT`).
    pub const SERVICE: u32 = 16;
}

/// What a Java thread was doing when it went off CPU, read from its `JavaThread` in the kernel
/// at that moment (later reads from user space would race with the thread).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JavaState {
    pub flags: u32,
    /// HotSpot's `JavaThreadState` (in_native, in_vm, blocked...).
    pub thread_state: u32,
    /// `Thread.threadId()` of the mounted virtual thread; 0 if none.
    pub vthread_id: u64,
    /// `ObjectMonitor*` being entered (contended `synchronized`), else 0.
    pub pending_monitor: u64,
    /// `ObjectMonitor*` waited on (`Object.wait`), else 0.
    pub waiting_monitor: u64,
    pub held_monitors: u32,
    /// Critical-section pins of the mounted continuation (JDK 24+).
    pub pin_count: u32,
    pub anchor_sp: u64,
    pub anchor_pc: u64,
    pub anchor_fp: u64,
    /// The object the thread (or its mounted virtual thread) parks on (`Thread.parkBlocker`,
    /// an oop), else 0.
    pub park_blocker: u64,
}

/// `OffCpuStart::start_ns` of a thread's entry once its wait has ended: entries are kept and
/// overwritten rather than removed and inserted at every switch (each of those takes the
/// map's bucket lock), and go when the thread ends.
pub const WAIT_ENDED: u64 = u64::MAX;

/// Where a thread went off CPU, kept per thread id until it runs again.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OffCpuStart {
    pub start_ns: u64,
    pub prev_state: u64,
    pub kernel_stack_id: i32,
    pub user_stack_id: i32,
    /// Thread that woke it (`sched_waking` in the waker's context); 0 until then.
    pub waker_tid: u32,
    /// `wait_flags`.
    pub flags: u32,
    /// When it was first made runnable again (`sched_waking`); 0 until then.
    pub wake_ns: u64,
    pub java: JavaState,
    /// The thread's CPU time (`sum_exec_runtime`) as it blocked; `u64::MAX`: not known.
    pub run_ns: u64,
}

/// A wait whose switch back in the kernel did not report, found as its thread blocks again:
/// ended by `sched_switch_blocked` (kernel side only).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MissedWait {
    pub tid: u32,
    pub _pad: u32,
    /// When the thread blocked again, and its CPU time then.
    pub now_ns: u64,
    pub run_ns: u64,
    pub wait: OffCpuStart,
}

/// `OffCpuStart::flags`.
pub mod wait_flags {
    /// The thread's last wait that was not a blip lasted at least the threshold for Java
    /// stacks: its next wait has its Java stack copied as it blocks. Kept through a wait while
    /// it lasts, through a wait for a CPU, and through one blip (a wait under a quarter of the
    /// threshold: a mutex handed over on the way into a long park) as it ends.
    pub const LAST_LONG: u32 = 1;
    /// This wait's Java stack was copied as it blocked (user space need not read it).
    pub const STACK_COPIED: u32 = 2;
    /// `LAST_LONG` was kept through a blip since the last long wait: the next blip ends it (a
    /// thread whose waits are all short, handing work back and forth, is not copied at every
    /// one of them).
    pub const BLIP_KEPT: u32 = 4;
}

/// A thread's last walked native stacks in a system call, reused for its next waits in the
/// same call on the same object: the kernel stack, and the user stack when the call came from
/// the same Java frame (the same anchor: the native frames between it and the call are those
/// of the same native method).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StackReuse {
    pub kernel_id: i32,
    pub kernel_uses: u32,
    pub nr: u32,
    pub user_id: i32,
    /// The call's first argument (a descriptor), 0 for a futex wait.
    pub object: u64,
    /// The Java anchor the user stack was walked under (0: none; never reused).
    pub anchor_sp: u64,
    pub anchor_pc: u64,
    pub user_uses: u32,
    pub _pad: u32,
}

/// What a thread's Java thread was doing in a wait that began before the kernel knew it as a
/// Java thread (user space read it from the JVM meanwhile): applied by the kernel when that
/// wait ends, and only if the wait that ends is the one that began at `start_ns`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitAmendment {
    pub start_ns: u64,
    pub java: JavaState,
}

/// One off-CPU interval of a target thread, sent when the thread is switched back in.
/// Times are `CLOCK_MONOTONIC` nanoseconds (`bpf_ktime_get_ns`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OffCpuEvent {
    pub kind: u32,
    pub tid: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub prev_state: u64,
    /// Negative: no stack (the errno of `bpf_get_stackid`).
    pub kernel_stack_id: i32,
    pub user_stack_id: i32,
    pub waker_tid: u32,
    pub cpu: u32,
    pub java: JavaState,
}

/// One on-CPU sample of a thread of the target (a perf clock event, `ON_CPU_HZ` a second
/// per CPU), with what its Java thread was running; its Java stack, when copied, follows as a
/// stack copy keyed by `time_ns`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OnCpuSample {
    pub kind: u32,
    pub tid: u32,
    pub time_ns: u64,
    pub cpu: u32,
    /// Negative: none (in user mode there is no kernel stack).
    pub kernel_stack_id: i32,
    pub user_stack_id: i32,
    pub _pad: u32,
    pub java: JavaState,
}

/// A thread of the target that waited at least `LATE_WAKEUP_NS` from being made runnable
/// (`sched_waking`) to running: the scheduler ran something else meanwhile.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LateWakeup {
    pub kind: u32,
    pub tid: u32,
    pub wake_ns: u64,
    pub run_ns: u64,
    pub waker_tid: u32,
    pub cpu: u32,
}

/// Buckets of a [`Histogram`]: values below 16 units are exact, then 16 buckets per power of
/// two (each at most 1/16 of its values wide) up to 2^31 units.
pub const HISTOGRAM_BUCKETS: usize = 448;
/// A histogram's unit: 1,024 ns (about a microsecond).
pub const HISTOGRAM_UNIT_SHIFT: u32 = 10;

/// The bucket of `ns` in a [`Histogram`].
#[inline(always)]
pub fn histogram_bucket(ns: u64) -> usize {
    let mut v = ns >> HISTOGRAM_UNIT_SHIFT;
    if v >= 1 << 31 {
        v = (1 << 31) - 1;
    }
    if v < 16 {
        return v as usize;
    }
    // The highest set bit, by halving (BPF has no count-leading-zeros instruction).
    let mut msb = 0u32;
    let mut x = v;
    if x >= 1 << 16 {
        x >>= 16;
        msb += 16;
    }
    if x >= 1 << 8 {
        x >>= 8;
        msb += 8;
    }
    if x >= 1 << 4 {
        x >>= 4;
        msb += 4;
    }
    if x >= 1 << 2 {
        x >>= 2;
        msb += 2;
    }
    if x >= 1 << 1 {
        msb += 1;
    }
    let sub = (v >> (msb - 4)) & 15;
    ((msb as u64 - 3) * 16 + sub) as usize
}

/// The smallest value (ns) of bucket `i` of a [`Histogram`], and the one after its largest.
pub fn histogram_bucket_range(i: usize) -> (u64, u64) {
    let units = |i: usize| -> u64 {
        if i < 16 {
            i as u64
        } else {
            let msb = (i / 16) as u32 + 3;
            (1u64 << msb) + ((i % 16) as u64) * (1u64 << (msb - 4))
        }
    };
    (
        units(i) << HISTOGRAM_UNIT_SHIFT,
        units(i + 1) << HISTOGRAM_UNIT_SHIFT,
    )
}

/// Counts of durations by bucket (see [`histogram_bucket`]), with their largest.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Histogram {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub buckets: [u32; HISTOGRAM_BUCKETS],
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            count: 0,
            total_ns: 0,
            max_ns: 0,
            buckets: [0; HISTOGRAM_BUCKETS],
        }
    }
}

/// A thread's scheduling, summed in the kernel: how long it waited from being woken to
/// running (wakeup latency) and, once preempted, to running again (run-queue delay); how often
/// it moved to another CPU, and how often it was switched out while still runnable.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SchedStats {
    pub wakeup: Histogram,
    pub runqueue: Histogram,
    pub migrations: u64,
    pub involuntary_switches: u64,
    /// The CPU it last ran on, plus one (0: not seen yet).
    pub last_cpu: u32,
    pub _pad: u32,
}

/// The target's last thread exited (`sched_process_exit` with `group_dead`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ExitEvent {
    pub kind: u32,
    pub tid: u32,
    pub time_ns: u64,
}

/// A thread of the target was created (`task:task_newtask`), or left the CPU for the last
/// time (its `sched_switch` as a dead task). At its end, its scheduler account then: time on
/// a CPU (`se.sum_exec_runtime`) and runnable waiting for one (`sched_info.run_delay`), the
/// figures of `/proc/<pid>/task/<tid>/schedstat`; `u64::MAX` when not known.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadLife {
    pub kind: u32,
    pub tid: u32,
    pub time_ns: u64,
    pub run_ns: u64,
    pub wait_ns: u64,
}

/// Where the scheduler keeps a task's account, from the kernel's BTF (0: not known).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskLayout {
    /// `task_struct.se.sum_exec_runtime`
    pub run_ns: u32,
    /// `task_struct.sched_info.run_delay`
    pub run_delay: u32,
}

/// Off-CPU intervals below the reporting threshold, summed per thread in the kernel so that
/// short waits cost no trip to user space.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ShortOffCpu {
    pub count: u64,
    pub total_ns: u64,
    /// Of `total_ns`, the part spent runnable but preempted (`prev_state` 0).
    pub preempted_ns: u64,
}

// User space reads these from maps; aya needs to know they are plain bytes.
#[cfg(feature = "user")]
mod user {
    // SAFETY: all are `#[repr(C)]`, `Copy`, made of integers, with no implicit padding.
    unsafe impl aya::Pod for super::OffCpuStart {}
    unsafe impl aya::Pod for super::WaitAmendment {}
    unsafe impl aya::Pod for super::ShortOffCpu {}
    unsafe impl aya::Pod for super::JvmLayout {}
    unsafe impl aya::Pod for super::StackRequest {}
    unsafe impl aya::Pod for super::SyscallKey {}
    unsafe impl aya::Pod for super::WaitSum {}
    unsafe impl aya::Pod for super::FdLayout {}
    unsafe impl aya::Pod for super::SyscallStart {}
    unsafe impl aya::Pod for super::TaskLayout {}
    unsafe impl aya::Pod for super::SchedStats {}
    unsafe impl aya::Pod for super::Unmount {}
}

#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;

    // User space reads these records as raw bytes (`aya::Pod`): padding would leave bytes
    // uninitialised in the kernel and break that. Each size is the sum of its fields.
    #[test]
    fn records_have_no_padding() {
        let java = 4 + 4 + 8 + 8 + 8 + 4 + 4 + 8 + 8 + 8 + 8;
        assert_eq!(size_of::<JavaState>(), java);
        assert_eq!(size_of::<JvmLayout>(), 16 * 4 + 8 + 4 * 4 + 8 + 4 * 6);
        assert_eq!(size_of::<StackRequest>(), 16);
        let waker = 4 + 4 + 4 + 4 + 8;
        assert_eq!(size_of::<Waker>(), waker);
        assert_eq!(size_of::<SyscallStart>(), 8 + 4 + 4 + 32 + 8 + waker);
        assert_eq!(
            size_of::<SyscallEvent>(),
            4 * 4 + 8 * 3 + 32 + 8 + waker + 16
        );
        assert_eq!(size_of::<FdLayout>(), 8 * 4 + 64);
        assert_eq!(size_of::<SyscallKey>(), 8);
        assert_eq!(size_of::<WaitSum>(), 24);
        assert_eq!(
            size_of::<NativeStackCopy>(),
            4 + 4 + 8 * 4 + 4 + 4 + NATIVE_COPY_BYTES
        );
        assert_eq!(size_of::<ThreadRename>(), 4 + 4 + 16);
        let stack_head = 4 + 4 + 8 + 8 * 3 + 8 * 3 + 4 + 4;
        assert_eq!(size_of::<StackHead>(), stack_head);
        assert_eq!(size_of::<StackCopy>(), stack_head + STACK_COPY_BYTES);
        assert_eq!(size_of::<CopiedChunk>(), 8 + 4 * 4);
        let chunk_head = 24 * MAX_COPIED_CHUNKS + 4 + 4 + 8;
        assert_eq!(size_of::<ChunkHead>(), chunk_head);
        assert_eq!(size_of::<ChunkCopy>(), chunk_head + CHUNK_COPY_BYTES);
        assert_eq!(
            size_of::<StackChunkCopy>(),
            stack_head + chunk_head + STACK_CHUNK_DATA_BYTES
        );
        let off_cpu_start = 8 + 8 + 4 + 4 + 4 + 4 + 8 + java + 8;
        assert_eq!(size_of::<OffCpuStart>(), off_cpu_start);
        assert_eq!(size_of::<MissedWait>(), 4 + 4 + 8 + 8 + off_cpu_start);
        assert_eq!(size_of::<OnCpuSample>(), 4 + 4 + 8 + 4 * 4 + java);
        assert_eq!(size_of::<LateWakeup>(), 4 + 4 + 8 + 8 + 4 + 4);
        let histogram = 8 * 3 + 4 * HISTOGRAM_BUCKETS;
        assert_eq!(size_of::<Histogram>(), histogram);
        assert_eq!(size_of::<SchedStats>(), 2 * histogram + 8 + 8 + 4 + 4);
        assert_eq!(
            size_of::<OffCpuEvent>(),
            4 + 4 + 8 + 8 + 8 + 4 + 4 + 4 + 4 + java
        );
        assert_eq!(size_of::<ExitEvent>(), 4 + 4 + 8);
        assert_eq!(size_of::<ThreadLife>(), 4 + 4 + 8 * 3);
        assert_eq!(size_of::<TaskLayout>(), 8);
        assert_eq!(size_of::<ShortOffCpu>(), 8 + 8 + 8);
        assert_eq!(size_of::<Unmount>(), 8 * 5 + 4 + 4);
        let vthread_head = 4 + 4 + 8 * 6 + 4 + 4;
        assert_eq!(size_of::<VthreadWaitHead>(), vthread_head);
        assert_eq!(
            size_of::<VthreadWaitCopy>(),
            vthread_head + chunk_head + 2 * CHUNK_COPY_BYTES
        );
    }

    // Every value falls in the bucket whose range holds it, buckets are at most 1/16 of their
    // values wide, and the last one takes everything larger.
    #[test]
    fn histogram_buckets_hold_their_values() {
        let mut v = 0u64;
        while v < 1 << 41 {
            let i = histogram_bucket(v);
            assert!(i < HISTOGRAM_BUCKETS, "{v}");
            let (low, high) = histogram_bucket_range(i);
            assert!(low <= v && v < high, "{v} in {i}: {low}..{high}");
            if low >= 16 << HISTOGRAM_UNIT_SHIFT {
                assert!((high - low) * 16 <= low, "{i}: {low}..{high}");
            }
            v = v * 9 / 8 + 1;
        }
        assert_eq!(histogram_bucket(u64::MAX), HISTOGRAM_BUCKETS - 1);
        for i in 1..HISTOGRAM_BUCKETS {
            assert_eq!(histogram_bucket_range(i - 1).1, histogram_bucket_range(i).0);
        }
    }

    // The kernel sends the used prefix of these: the heads first, the bytes after, nothing
    // between. And it fills them in per-CPU maps, whose values the kernel caps at 32 KiB.
    #[test]
    fn stack_copies_send_a_prefix_and_fit_a_per_cpu_map() {
        use core::mem::offset_of;
        assert_eq!(offset_of!(StackCopy, data), size_of::<StackHead>());
        assert_eq!(offset_of!(StackChunkCopy, chunk), size_of::<StackHead>());
        assert_eq!(
            offset_of!(StackChunkCopy, data),
            size_of::<StackHead>() + size_of::<ChunkHead>()
        );
        const PER_CPU_VALUE_MAX: usize = 32 * 1024;
        assert!(size_of::<StackCopy>() <= PER_CPU_VALUE_MAX);
        assert!(size_of::<StackChunkCopy>() <= PER_CPU_VALUE_MAX);
        assert_eq!(
            offset_of!(VthreadWaitCopy, data),
            size_of::<VthreadWaitHead>() + size_of::<ChunkHead>()
        );
        assert!(size_of::<VthreadWaitCopy>() <= PER_CPU_VALUE_MAX);
    }

    #[test]
    fn colored_oops_give_their_address_whatever_remap_bit_is_set() {
        let addr = 0x0000_0401_2345_6780_u64;
        for bit in 0..4 {
            // The address right past the remap bit; mark and remembered bits below it.
            let colored =
                (addr << (ZGC_REMAP_SHIFT + bit + 1)) | (1 << (ZGC_REMAP_SHIFT + bit)) | 0x5f0;
            assert_eq!(
                uncolor_oop(colored, ZGC_REMAP_SHIFT),
                addr,
                "remap bit {bit}"
            );
        }
        assert_eq!(uncolor_oop(0, ZGC_REMAP_SHIFT), 0);
        // Two remap bits, or none: no colored pointer.
        assert_eq!(uncolor_oop(0x3 << ZGC_REMAP_SHIFT, ZGC_REMAP_SHIFT), 0);
        assert_eq!(uncolor_oop(0x7f00_0000_0000, ZGC_REMAP_SHIFT), 0);
        assert_eq!(uncolor_oop(addr, 0), addr);
    }
}
