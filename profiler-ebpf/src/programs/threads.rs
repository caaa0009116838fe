//! Thread births, ends and names, from the kernel: short-lived threads end before user space looks.

use aya_ebpf::{
    bindings::{BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel},
    macros::tracepoint,
    programs::TracePointContext,
};
use profiler_ebpf::{CLONE_THREAD, ExitEvent, TaskLayout, ThreadLife, ThreadRename, counter, kind};

use super::{
    ids::{current_ids, own_id, target_tid},
    maps::{
        AMENDMENTS, CONTENTION_STARTS, EVENTS, IN_SYSCALL, NS_BIRTHS, STACK_REQUESTS, STARTS, count,
    },
    settings::{
        EXIT_GROUP_DEAD_OFFSET, NEWTASK_FLAGS_OFFSET, NEWTASK_PID_OFFSET, PID_NS_DEV,
        RENAME_NEWCOMM_OFFSET, RENAME_PID_OFFSET, TARGET_TGID, TASK_LAYOUT, setting,
    },
};

/// A thread of the target renamed itself: short-lived threads are gone before user space
/// could read their name, so the kernel sends it.
#[tracepoint]
pub fn task_rename(ctx: TracePointContext) -> u32 {
    renamed(&ctx);
    SEEN_BY_OTHERS
}

/// What a tracepoint program returns: 1, the event still goes to every other tool on the host
/// that traces it (0 would hide it from them: `perf`, other tracers). These fire seldom.
const SEEN_BY_OTHERS: u32 = 1;

#[inline(always)]
fn renamed(ctx: &TracePointContext) {
    let Some(current) = target_tid() else {
        return;
    };
    let Ok(pid) = (unsafe { ctx.read_at::<i32>(setting(&RENAME_PID_OFFSET) as usize) }) else {
        return;
    };
    // Mostly a thread naming itself; in a PID namespace, another by the id it ran with.
    let pid = if pid as u32 == bpf_get_current_pid_tgid() as u32 {
        current
    } else {
        match own_id(pid as u32) {
            Some(pid) => pid,
            None => return,
        }
    };
    let Ok(comm) = (unsafe { ctx.read_at::<[u8; 16]>(setting(&RENAME_NEWCOMM_OFFSET) as usize) })
    else {
        return;
    };
    match EVENTS.reserve::<ThreadRename>(0) {
        Some(mut slot) => {
            slot.write(ThreadRename {
                kind: kind::RENAME,
                tid: pid,
                comm,
            });
            slot.submit(BPF_RB_NO_WAKEUP as u64);
        }
        None => count(counter::LOST_EVENTS),
    }
}

/// Sends a thread's start or end; at its end, with its scheduler account (it is the current
/// task, and the scheduler has just brought the account up to date as it switched it out).
#[inline(always)]
pub(crate) fn thread_life(kind: u32, tid: u32, now: u64, account: bool) {
    let layout: TaskLayout = setting(&TASK_LAYOUT);
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() };
    let read = |offset: u32| -> u64 {
        if !account || offset == 0 {
            return u64::MAX;
        }
        unsafe { bpf_probe_read_kernel((task + offset as u64) as *const u64) }.unwrap_or(u64::MAX)
    };
    match EVENTS.reserve::<ThreadLife>(0) {
        Some(mut slot) => {
            slot.write(ThreadLife {
                kind,
                tid,
                time_ns: now,
                run_ns: read(layout.run_ns),
                wait_ns: read(layout.run_delay),
            });
            // A new thread wakes user space: the sooner it reads the JVM's thread list, the
            // sooner the new thread's blocks are seen as a Java thread's. (Forced: the
            // adaptive wake-up is skipped while earlier records, sent without one, wait.)
            let flags = if kind == kind::THREAD_START {
                BPF_RB_FORCE_WAKEUP as u64
            } else {
                BPF_RB_NO_WAKEUP as u64
            };
            slot.submit(flags);
        }
        None => count(counter::LOST_EVENTS),
    }
}

/// A thread (not a process) created by the target.
#[tracepoint]
pub fn task_newtask(ctx: TracePointContext) -> u32 {
    born(&ctx);
    SEEN_BY_OTHERS
}

#[inline(always)]
fn born(ctx: &TracePointContext) {
    if target_tid().is_none() {
        return;
    }
    let flags = unsafe { ctx.read_at::<u64>(setting(&NEWTASK_FLAGS_OFFSET) as usize) }.unwrap_or(0);
    if flags & CLONE_THREAD == 0 {
        return;
    }
    let Ok(pid) = (unsafe { ctx.read_at::<i32>(setting(&NEWTASK_PID_OFFSET) as usize) }) else {
        return;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    if setting(&PID_NS_DEV) != 0 {
        // Its id in the namespace is known once it runs (`seen_running`).
        if NS_BIRTHS.insert(pid as u32, now, 0).is_err() {
            count(counter::START_MAP_FULL);
        }
        return;
    }
    thread_life(kind::THREAD_START, pid as u32, now, false);
}

#[tracepoint]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    exited(&ctx);
    SEEN_BY_OTHERS
}

#[inline(always)]
fn exited(ctx: &TracePointContext) {
    let (tgid, tid) = current_ids();
    if tgid != setting(&TARGET_TGID) || tgid == 0 {
        return;
    }
    // A thread ends inside exit(2), whose sys_exit never comes: drop what it left open.
    let _ = STARTS.remove(tid);
    let _ = AMENDMENTS.remove(tid);
    let _ = IN_SYSCALL.remove(tid);
    let _ = STACK_REQUESTS.remove(tid);
    let _ = CONTENTION_STARTS.remove(tid);
    // Its end and account, here as well as at its last switch (`sched_switch`), which the
    // kernel may not show the programs (it skips one while another runs on the CPU): a
    // thread whose end went unseen kept a stale account and lost the end of its life. The
    // later of the two stands.
    thread_life(kind::THREAD_EXIT, tid, unsafe { bpf_ktime_get_ns() }, true);
    let group_dead =
        unsafe { ctx.read_at::<u8>(setting(&EXIT_GROUP_DEAD_OFFSET) as usize) }.unwrap_or(0);
    if group_dead != 0 {
        match EVENTS.reserve::<ExitEvent>(0) {
            Some(mut slot) => {
                slot.write(ExitEvent {
                    kind: kind::EXIT,
                    tid,
                    time_ns: unsafe { bpf_ktime_get_ns() },
                });
                slot.submit(0);
            }
            None => count(counter::LOST_EVENTS),
        }
    }
}
