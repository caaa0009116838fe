//! System calls: what a thread blocked in, with its arguments, file and waker. Traced from
//! `sys_enter` to `sys_exit` when asked (every call, with its result; other threads' Java
//! stacks are then copied as they leave their call), else read from a thread's saved user
//! registers as it blocks and ended as it runs again: no program on the system-call
//! tracepoints, which would put every task of the host on the system calls' slow path.

use aya_ebpf::{
    bindings::{BPF_F_USER_STACK, BPF_RB_NO_WAKEUP, pt_regs},
    helpers::{bpf_ktime_get_ns, bpf_probe_read_kernel},
    macros::raw_tracepoint,
    programs::RawTracePointContext,
};
use profiler_ebpf::{
    FdLayout, RET_UNSEEN, SyscallEvent, SyscallKey, SyscallStart, Waker, counter, futex_op, kind,
    syscall_flags, sysno,
};

use super::{
    ids::target_tid,
    java_stacks::copy_java_stack,
    maps::{EVENTS, IN_SYSCALL, JAVA_THREADS, SYSCALL_SUMS, add_wait, count},
    memory::{current_user_regs, read_user, user_reg},
    scheduler::end_missed_wait,
    settings::{FD_LAYOUT, MIN_SYSCALL_NS, setting},
    stacks::{NOT_CAPTURED, copy_native_stack, stack_id},
};

/// Runs as a thread of the target leaves any system call. If its Java stack is wanted, copies
/// it now: the thread has not been back in user space since it blocked, so the stack is as it
/// was then, and this is its own context, where its memory can be read.
///
/// A raw tracepoint, as `sys_enter`: these run on every system call of the machine, and a raw
/// one costs a process pinprof does not profile a few nanoseconds, where a tracepoint copies
/// the call's arguments into a record first.
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit(ctx: RawTracePointContext) -> i32 {
    let Some(tid) = target_tid() else {
        return 0;
    };
    end_missed_wait(tid);
    end_syscall(&ctx, tid);
    copy_java_stack(tid);
    0
}

/// A register of the system call's saved user state (`struct pt_regs`, the raw tracepoints'
/// first argument).
#[inline(always)]
fn syscall_reg(ctx: &RawTracePointContext, field: fn(*const pt_regs) -> *const u64) -> u64 {
    let regs: *const pt_regs = ctx.arg(0);
    if regs.is_null() {
        return 0;
    }
    unsafe { bpf_probe_read_kernel(field(regs)) }.unwrap_or(0)
}

/// Times the system call `tid` leaves (see `finish_syscall`).
#[inline(always)]
fn end_syscall(ctx: &RawTracePointContext, tid: u32) {
    let Some(call) = IN_SYSCALL.get_ptr(tid) else {
        return;
    };
    let call = unsafe { &*call };
    // A call seeded from /proc as the capture started (start 0, see `Capture::start`) that
    // ended before the programs were attached is not the one ending now. Only seeds are
    // checked: `rt_sigreturn` leaves with number -1.
    if call.start_ns == 0 {
        let nr = syscall_reg(ctx, |r| unsafe { core::ptr::addr_of!((*r).orig_rax) });
        if nr as u32 != call.nr {
            let _ = IN_SYSCALL.remove(tid);
            return;
        }
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let ret: i64 = ctx.arg(1);
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() };
    finish_syscall(tid, call, now, ret, task, || {
        // Java threads get their Java stacks; the native part of a JVM wait is the same few
        // VM frames every time, so only other threads need their native stacks unwound.
        if unsafe { JAVA_THREADS.get(&tid) }.is_none() {
            copy_native_stack(tid, call.start_ns);
        }
        stack_id(ctx, BPF_F_USER_STACK as u64)
    });
    let _ = IN_SYSCALL.remove(tid);
}

/// The thread `tid` (its `task_struct` at `task`) blocked in a system call read at its
/// switch-out runs again: the call ends for pinprof now, its result not seen. Its user
/// stack is the one taken as it blocked.
#[inline(always)]
pub(crate) fn syscall_at_switch_in(tid: u32, task: u64, now: u64, user_stack_id: i32) {
    let Some(call) = IN_SYSCALL.get_ptr(tid) else {
        return;
    };
    finish_syscall(tid, unsafe { &*call }, now, RET_UNSEEN, task, || {
        user_stack_id
    });
    let _ = IN_SYSCALL.remove(tid);
}

/// Times the system call `call` of `tid` (`task`) that ends now: long ones (and long futex
/// waits, with their waker) become events with the caller's stack (`user_stack`, asked only
/// then); short ones only add to a per-(thread, call) sum.
#[inline(always)]
fn finish_syscall(
    tid: u32,
    call: &SyscallStart,
    now: u64,
    ret: i64,
    task: u64,
    user_stack: impl FnOnce() -> i32,
) {
    if call.flags & syscall_flags::IDLE != 0 {
        // An idle carrier's park is the scheduler waiting for work, not a blocking call.
        return;
    }
    let duration = now.saturating_sub(call.start_ns);
    if duration < setting(&MIN_SYSCALL_NS) {
        let key = SyscallKey { tid, nr: call.nr };
        add_wait!(SYSCALL_SUMS, &key, duration);
        return;
    }
    let user_stack_id = user_stack();
    let (fd_inode, fd_mode) = fd_inode(task, call.nr, call.args[0]);
    match EVENTS.reserve::<SyscallEvent>(0) {
        Some(mut slot) => {
            // Filled in place: a record built on the stack first would not fit beside the
            // scheduler's (this runs inside `sched_switch` too).
            let event = slot.as_mut_ptr();
            unsafe {
                (*event).kind = if call.flags & syscall_flags::FUTEX_WAIT != 0 {
                    kind::FUTEX_WAIT
                } else {
                    kind::SYSCALL
                };
                (*event).tid = tid;
                (*event).nr = call.nr;
                (*event).user_stack_id = user_stack_id;
                (*event).start_ns = call.start_ns;
                (*event).end_ns = now;
                (*event).ret = ret;
                (*event).args = call.args;
                (*event).timeout_ns = call.timeout_ns;
                (*event).waker = call.waker;
                (*event).fd_inode = fd_inode;
                (*event).fd_mode = fd_mode;
                (*event)._pad = 0;
            }
            slot.submit(BPF_RB_NO_WAKEUP as u64);
        }
        None => count(counter::LOST_EVENTS),
    }
}

/// The inode number and mode of file descriptor `fd` of the thread whose `task_struct` is at
/// `task`, if system call `nr` takes one first: task->files->fdt->fd[fd]->f_inode.
#[inline(always)]
fn fd_inode(task: u64, nr: u32, fd: u64) -> (u64, u32) {
    let layout: FdLayout = setting(&FD_LAYOUT);
    let word = (nr / 64) as usize;
    if layout.task_files == 0 || word >= 8 || layout.fd_syscalls[word] & (1 << (nr % 64)) == 0 {
        return (0, 0);
    }
    let kernel = |addr: u64| -> Option<u64> {
        if addr == 0 {
            return None;
        }
        unsafe { bpf_probe_read_kernel(addr as *const u64) }.ok()
    };
    let inode = (|| {
        let files = kernel(task + layout.task_files as u64)?;
        let fdt = kernel(files + layout.files_fdt as u64)?;
        let max = unsafe { bpf_probe_read_kernel((fdt + layout.fdt_max_fds as u64) as *const u32) }
            .ok()?;
        if fd >= max as u64 {
            return None;
        }
        let table = kernel(fdt + layout.fdt_fd as u64)?;
        let file = kernel(table + 8 * fd)?;
        kernel(file + layout.file_inode as u64)
    })();
    let Some(inode) = inode else {
        return (0, 0);
    };
    let ino = kernel(inode + layout.inode_ino as u64).unwrap_or(0);
    let mode = unsafe { bpf_probe_read_kernel((inode + layout.inode_mode as u64) as *const u16) }
        .unwrap_or(0);
    (ino, mode as u32)
}

/// Starts timing a system call of the target (a raw tracepoint: see `sys_exit`).
#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_enter(ctx: RawTracePointContext) -> i32 {
    let Some(tid) = target_tid() else {
        return 0;
    };
    let nr: i64 = ctx.arg(1);
    // The first four arguments, as x86_64 passes them.
    let args = [
        syscall_reg(&ctx, |r| unsafe { core::ptr::addr_of!((*r).rdi) }),
        syscall_reg(&ctx, |r| unsafe { core::ptr::addr_of!((*r).rsi) }),
        syscall_reg(&ctx, |r| unsafe { core::ptr::addr_of!((*r).rdx) }),
        syscall_reg(&ctx, |r| unsafe { core::ptr::addr_of!((*r).r10) }),
    ];
    begin_syscall(tid, nr as u32, args, unsafe { bpf_ktime_get_ns() }, 0);
    0
}

/// The current thread `tid` of the target blocks now (`now`, its switch-out): if in a system
/// call, that call and its arguments, from the user registers it saved on entering it (as
/// `/proc/TID/syscall` reads them), timed from here to its switch-in. `idle`: a carrier
/// with nothing mounted, whose waits are idleness.
#[inline(always)]
pub(crate) fn syscall_at_switch_out(tid: u32, now: u64, idle: bool) {
    let Some(regs) = current_user_regs() else {
        return;
    };
    let nr = user_reg(unsafe { core::ptr::addr_of!((*regs).orig_rax) }) as i64;
    // Blocked outside a system call (a page fault): nothing to time.
    if nr < 0 {
        return;
    }
    let args = unsafe {
        [
            user_reg(core::ptr::addr_of!((*regs).rdi)),
            user_reg(core::ptr::addr_of!((*regs).rsi)),
            user_reg(core::ptr::addr_of!((*regs).rdx)),
            user_reg(core::ptr::addr_of!((*regs).r10)),
        ]
    };
    // A call still open is one whose switch back in the kernel did not report: it ended
    // before this block, after its thread ran again (its stack went with the wait).
    if let Some(open) = IN_SYSCALL.get_ptr(tid) {
        let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() };
        finish_syscall(tid, unsafe { &*open }, now, RET_UNSEEN, task, || {
            NOT_CAPTURED
        });
    }
    let flags = if idle { syscall_flags::IDLE } else { 0 };
    begin_syscall(tid, nr as u32, args, now, flags);
}

/// The system call of `tid` whose timing begins at `start_ns` (its entry, or its switch-out).
#[inline(always)]
fn begin_syscall(tid: u32, nr: u32, args: [u64; 4], start_ns: u64, flags: u32) {
    let futex_wait = futex_op::call_waits(nr, args[1]);
    let mut timeout_ns = u64::MAX;
    if nr == sysno::FUTEX && futex_wait && args[3] != 0 {
        // struct timespec { tv_sec, tv_nsec }
        if let (Some(sec), Some(nsec)) = (read_user::<u64>(args[3]), read_user::<u64>(args[3] + 8))
        {
            timeout_ns = sec.wrapping_mul(1_000_000_000).wrapping_add(nsec);
        }
    }
    let start = SyscallStart {
        start_ns,
        nr,
        flags: flags
            | if futex_wait {
                syscall_flags::FUTEX_WAIT
            } else {
                0
            },
        args,
        timeout_ns,
        waker: Waker::default(),
    };
    if IN_SYSCALL.insert(tid, start, 0).is_err() {
        count(counter::SYSCALL_MAP_FULL);
    }
}
