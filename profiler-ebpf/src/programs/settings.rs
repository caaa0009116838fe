//! Settings user space writes before load (target, thresholds, layouts), read with `setting`.

use profiler_ebpf::{FdLayout, JvmLayout, TaskLayout};

// Settings written by user space before load (`EbpfLoader::set_global`). Tracepoint field
// offsets come from the tracepoints' `format` files, so no kernel layout is hard-coded here.
#[unsafe(no_mangle)]
pub(crate) static TARGET_TGID: u32 = 0;
/// pinprof's PID namespace (`stat /proc/self/ns/pid`: device and inode) when it is not the
/// host's: the target and every thread id are then as that namespace numbers them (the
/// target is in it too). 0: the host's, and host ids.
#[unsafe(no_mangle)]
pub(crate) static PID_NS_DEV: u64 = 0;
#[unsafe(no_mangle)]
pub(crate) static PID_NS_INO: u64 = 0;
#[unsafe(no_mangle)]
pub(crate) static MIN_OFF_CPU_NS: u64 = 0;
/// Waits for a CPU (preemptions) shorter than this are summed per thread, not sent: most of a
/// busy target's switches, and its run-queue time is in the scheduler's own account.
#[unsafe(no_mangle)]
pub(crate) static MIN_PREEMPTED_NS: u64 = 0;
/// A thread that waits at least this long from its wake-up to running is sent as a
/// `LateWakeup`, with its waker (`u64::MAX`: never).
#[unsafe(no_mangle)]
pub(crate) static LATE_WAKEUP_NS: u64 = u64::MAX;
/// In `task_struct`, from the kernel's BTF: `pid` (the thread id) and `__state`.
#[unsafe(no_mangle)]
pub(crate) static TASK_PID_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
pub(crate) static TASK_STATE_OFFSET: u32 = 0;
/// In `task_struct`, `tgid` (the host's process id), for telling the host's other tasks apart
/// cheaply; 0 when not known (they are then told apart by their maps' entries).
#[unsafe(no_mangle)]
pub(crate) static TASK_TGID_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
pub(crate) static EXIT_GROUP_DEAD_OFFSET: u32 = 32;
/// HotSpot's layout, from the target's VMStructs; all zero for other processes.
#[unsafe(no_mangle)]
pub(crate) static JVM_LAYOUT: JvmLayout = JvmLayout::NONE;
/// HotSpot's `_thread_in_Java`: a sampled thread in that state runs Java code, and its Java
/// stack starts at its registers (`u32::MAX`: not known, then only from a frame anchor).
#[unsafe(no_mangle)]
pub(crate) static JAVA_STATE_IN_JAVA: u32 = u32::MAX;
/// Java stacks are copied for blocks at least this long (0: never).
#[unsafe(no_mangle)]
pub(crate) static MIN_JAVA_STACK_NS: u64 = 0;
/// Virtual threads' waits off their carriers at least this long are sent one by one; shorter
/// ones are counted and summed (`u64::MAX`: the probes are not attached, nothing is sent).
#[unsafe(no_mangle)]
pub(crate) static MIN_VTHREAD_WAIT_NS: u64 = u64::MAX;
/// System calls (futex waits included) at least this long are sent one by one with their
/// stacks; shorter ones are summed per (thread, call). `u64::MAX`: system calls not tracked.
#[unsafe(no_mangle)]
pub(crate) static MIN_SYSCALL_NS: u64 = u64::MAX;
/// 1: system calls are read as threads block and timed to their switch-in (no program on the
/// system-call tracepoints); 0: traced from `sys_enter` to `sys_exit`, or not at all.
#[unsafe(no_mangle)]
pub(crate) static SYSCALLS_AT_SWITCHES: u32 = 0;
/// Where a file descriptor's inode is, for this kernel (see `FdLayout`).
#[unsafe(no_mangle)]
pub(crate) static FD_LAYOUT: FdLayout = FdLayout {
    task_files: 0,
    files_fdt: 0,
    fdt_max_fds: 0,
    fdt_fd: 0,
    file_inode: 0,
    inode_ino: 0,
    inode_mode: 0,
    _pad: 0,
    fd_syscalls: [0; 8],
};
#[unsafe(no_mangle)]
pub(crate) static RENAME_PID_OFFSET: u32 = 8;
#[unsafe(no_mangle)]
pub(crate) static RENAME_NEWCOMM_OFFSET: u32 = 28;
#[unsafe(no_mangle)]
pub(crate) static NEWTASK_PID_OFFSET: u32 = 8;
#[unsafe(no_mangle)]
pub(crate) static NEWTASK_FLAGS_OFFSET: u32 = 32;
/// Where a task's scheduler account is, for this kernel (see `TaskLayout`).
#[unsafe(no_mangle)]
pub(crate) static TASK_LAYOUT: TaskLayout = TaskLayout {
    run_ns: 0,
    run_delay: 0,
};

#[inline(always)]
pub(crate) fn setting<T: Copy>(value: &T) -> T {
    // Volatile, or the compiler folds the defaults in before user space can set them.
    unsafe { core::ptr::read_volatile(value) }
}
