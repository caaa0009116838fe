//! Off-CPU time, the profile itself: `sched_switch` times each wait, `sched_waking` its waker;
//! and how long the scheduler kept each thread waiting for a CPU once it could run.

use aya_ebpf::{
    bindings::{BPF_F_USER_STACK, BPF_RB_NO_WAKEUP},
    helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns, bpf_probe_read_kernel},
    macros::raw_tracepoint,
    maps::PerCpuArray,
    programs::RawTracePointContext,
};
use profiler_ebpf::{
    HISTOGRAM_BUCKETS, Histogram, LateWakeup, OffCpuEvent, OffCpuStart, SchedStats, ShortOffCpu,
    WAIT_ENDED, Waker, counter, histogram_bucket, java_flags, kind, syscall_flags, sysno,
    task_state, wait_flags,
};

use super::{
    ids::{
        current_ids, current_surely_foreign, forget_ns_tid, own_id, seen_running, surely_foreign,
    },
    java_stacks::{Scratch, copy_blocked_java_stack, copy_waker_java_stack, request_java_stack},
    java_state::java_state,
    maps::{
        AMENDMENTS, EVENTS, IN_SYSCALL, JAVA_THREADS, KSTACKS, LAST_SPARE_COPY, LAST_WAKER_CAPTURE,
        MISSED_WAIT, SCHED_STACK_CHUNK_SCRATCH, SCHED_STACK_SCRATCH, SCHED_STATS, SCHED_STATS_ZERO,
        SHORT_OFF_CPU, STARTS, SWITCH_TAIL, count,
    },
    memory::{current_user_regs, user_reg},
    settings::{
        LATE_WAKEUP_NS, MIN_JAVA_STACK_NS, MIN_OFF_CPU_NS, MIN_PREEMPTED_NS, MIN_SYSCALL_NS,
        SYSCALLS_AT_SWITCHES, TARGET_TGID, TASK_LAYOUT, TASK_PID_OFFSET, TASK_STATE_OFFSET,
        setting,
    },
    stacks::{NOT_CAPTURED, copy_native_stack, native_stacks, stack_id},
    syscalls::{syscall_at_switch_in, syscall_at_switch_out},
    threads::thread_life,
};

/// A raw tracepoint (`sched_switch(preempt, prev, next, ...)`), not a tracepoint: cheaper
/// (no record is made first), and a tracepoint program's verdict would decide for every
/// other tool on the host (`perf sched`, other tracers) whether it sees the event at all.
#[raw_tracepoint(tracepoint = "sched_switch")]
pub fn sched_switch(ctx: RawTracePointContext) -> i32 {
    // Most switches of a host are none of the target's: told so before anything else.
    if current_surely_foreign() && surely_foreign(ctx.arg(2)) {
        return 0;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let target = setting(&TARGET_TGID);
    let (tgid, tid) = current_ids();

    // `next` first: `prev`'s switch-out may end in a tail call, which does not come back.
    switch_in(&ctx, now);
    // The current task is still `prev`: its stacks are the ones that go off CPU.
    if tgid == target && tid != 0 {
        seen_running(tid, now);
        let prev_state = switch_state(&ctx);
        if prev_state & task_state::DEAD != 0 {
            // Its last switch (do_task_dead): its life ends here, and no wait begins.
            let _ = STARTS.remove(tid);
            let _ = AMENDMENTS.remove(tid);
            let _ = KSTACKS.remove(tid);
            let _ = SCHED_STATS.remove(tid);
            forget_ns_tid();
            thread_life(kind::THREAD_EXIT, tid, now, true);
        } else if switch_out(&ctx, tid, now, prev_state) {
            // What is left to do as it blocks: a pinned carrier's Java stack, the system
            // call it blocks in.
            unsafe { SWITCH_TAIL.tail_call(&ctx, 0) };
        }
    }
    0
}

/// The rest of a switch-out of the target's thread, run by `sched_switch` as a tail call
/// (never attached itself): the end of a wait whose switch back in was not reported, and for
/// the wait that begins, its Java stack (see `switch_out`) and the system call it blocks in,
/// when system calls are read as threads block. Reads the wait `sched_switch` just began.
#[raw_tracepoint(tracepoint = "sched_switch")]
pub fn sched_switch_blocked(_ctx: RawTracePointContext) -> i32 {
    let (_, tid) = current_ids();
    if let Some(missed) = MISSED_WAIT.get_ptr_mut(0) {
        let missed = unsafe { &mut *missed };
        if missed.tid == tid && tid != 0 {
            missed.tid = 0;
            end_missed_switch_in(tid, &mut missed.wait, missed.now_ns, missed.run_ns);
        }
    }
    let Some(start) = STARTS.get_ptr(tid) else {
        return 0;
    };
    let start = unsafe { &*start };
    let (start_ns, flags) = (start.start_ns, start.java.flags);
    if start_ns == WAIT_ENDED || start_ns == 0 {
        return 0;
    }
    if start.flags & wait_flags::STACK_COPIED != 0 {
        copy_blocked_java_stack(tid, start_ns, &start.java, &sched_scratch());
    }
    if setting(&SYSCALLS_AT_SWITCHES) != 0 {
        let idle = flags & (java_flags::CARRIER | java_flags::MOUNTED) == java_flags::CARRIER;
        syscall_at_switch_out(tid, start_ns, idle);
    }
    0
}

/// Why `prev` leaves the CPU, as the `sched_switch` tracepoint reports it in `prev_state`:
/// 0 (still runnable) when preempted, `task_state::DEAD` for its last switch, else its state's
/// report bits (interruptible, uninterruptible...).
#[inline(always)]
fn switch_state(ctx: &RawTracePointContext) -> u64 {
    const TASK_REPORT: u64 = 0x7f;
    const TASK_DEAD: u64 = 0x80;
    let preempt: u64 = ctx.arg(0);
    if preempt & 0xff != 0 {
        return task_state::RUNNING;
    }
    let prev: u64 = ctx.arg(1);
    let raw =
        unsafe { bpf_probe_read_kernel((prev + setting(&TASK_STATE_OFFSET) as u64) as *const u32) }
            .unwrap_or(0) as u64;
    if raw & TASK_DEAD != 0 {
        task_state::DEAD
    } else {
        raw & TASK_REPORT
    }
}

/// The (host) id of a task the tracepoint hands over.
#[inline(always)]
fn task_pid(task: u64) -> Option<u32> {
    unsafe { bpf_probe_read_kernel((task + setting(&TASK_PID_OFFSET) as u64) as *const i32) }
        .ok()
        .map(|pid| pid as u32)
}

/// A thread of the target goes off CPU: where, and what its Java thread was doing, kept until
/// it runs again. True when it blocks (not preempted) and `sched_switch_blocked` has more to
/// do for it.
#[inline(always)]
fn switch_out(ctx: &RawTracePointContext, tid: u32, now: u64, prev_state: u64) -> bool {
    let java = java_state(tid);
    // A carrier with nothing mounted is going idle: its stack is always the scheduler's
    // own wait, and on JDK 24+ these are most switches, so skip the two stack walks.
    let idle_carrier = java.flags & java_flags::CARRIER != 0
        && java.flags & java_flags::MOUNTED == 0
        && prev_state != task_state::RUNNING;
    // A preempted thread waits for a CPU, not on anything: its stacks would say where it
    // happened to be, and nothing reads them (about half of all switches of a busy target).
    let preempted = prev_state == task_state::RUNNING;
    if setting(&SYSCALLS_AT_SWITCHES) == 0
        && idle_carrier
        && let Some(call) = IN_SYSCALL.get_ptr_mut(tid)
    {
        // Its futex wait is the scheduler's idling, not a lock.
        unsafe { (*call).flags |= syscall_flags::IDLE };
    }
    if preempted && let Some(stats) = sched_stats(tid) {
        unsafe { (*stats).involuntary_switches += 1 };
    }
    // A JDK service thread waits for work (JDK 25's timer for virtual threads' sleeps parks
    // thousands of times a second): no native stacks; its long waits get Java stacks.
    let service = java.flags & java_flags::SERVICE != 0;
    let (kernel_stack_id, user_stack_id) = if idle_carrier || preempted || service {
        (NOT_CAPTURED, NOT_CAPTURED)
    } else {
        native_stacks(ctx, tid, [java.anchor_sp, java.anchor_pc])
    };
    // Unless system calls are traced (then `sys_exit` copies them), Java stacks are copied as
    // threads block (each is the current task then, so its memory can be read, and it has
    // not run on since), in the tail call: a pinned carrier's every time; another Java
    // thread's when its last wait was long (the next one likely is too; each long wait then
    // costs one copy, as copying at the call's exit did), or else at most once a millisecond
    // on each CPU (so threads whose waits are mostly short still have their long ones named
    // now and then, at a bounded cost), while user space reads those of long waits not
    // copied.
    // (A thread not seen blocking yet counts as after a long wait: its waits before attach
    // are not known, and its first one then has its stack.)
    let run = STARTS
        .get_ptr(tid)
        .map_or(wait_flags::LAST_LONG, |s| unsafe {
            (*s).flags & (wait_flags::LAST_LONG | wait_flags::BLIP_KEPT)
        });
    let last_long = run & wait_flags::LAST_LONG != 0;
    let stack_wanted = !preempted
        && java.flags & java_flags::KNOWN != 0
        && java.anchor_sp != 0
        && setting(&MIN_JAVA_STACK_NS) != 0
        && !syscalls_traced()
        && if java.flags & java_flags::CARRIER != 0 {
            java.flags & java_flags::MOUNTED != 0
        } else {
            !service && (last_long || take_turn(&LAST_SPARE_COPY, now, SPARE_COPY_GAP_NS))
        };
    let mut more = stack_wanted || (!preempted && setting(&SYSCALLS_AT_SWITCHES) != 0);
    let start = OffCpuStart {
        run_ns: current_run_ns(),
        start_ns: now,
        prev_state,
        kernel_stack_id,
        user_stack_id,
        waker_tid: 0,
        flags: if stack_wanted {
            wait_flags::STACK_COPIED
        } else {
            0
        } | run,
        wake_ns: 0,
        java,
    };
    // An entry still there is a wait whose end the program never saw (its switch back in
    // was skipped, as the kernel does while another BPF program runs on that CPU): lost,
    // and said so. (A seed, which starts at 0, may be one its thread ended before attach.)
    match STARTS.get_ptr_mut(tid) {
        Some(open) => unsafe {
            let open = &mut *open;
            if open.start_ns == WAIT_ENDED {
                // Its last wait ended: the entry is reused.
            } else if open.prev_state == task_state::RUNNING {
                // A wait for a CPU: its time is in the thread's scheduler account all the same.
                count(counter::MISSED_PREEMPTIONS);
            } else if open.start_ns != 0 {
                // Ended in the tail call (here it would not fit).
                if let Some(missed) = MISSED_WAIT.get_ptr_mut(0) {
                    (*missed).tid = tid;
                    (*missed).now_ns = now;
                    (*missed).run_ns = start.run_ns;
                    (*missed).wait = *open;
                    more = true;
                } else {
                    count(counter::MISSED_SWITCH_INS);
                }
            }
            *open = start;
        },
        None => {
            if STARTS.insert(tid, start, 0).is_err() {
                count(counter::START_MAP_FULL);
                return false;
            }
        }
    }
    more
}

/// The current thread `tid`, switching out at `now` with `run_ns` of CPU time, still has a
/// wait open (`open`): the kernel skipped reporting its switch back in (it does, now and then,
/// without saying so). It ran `run_ns` less its CPU time then since, so its wait ended that
/// long before now (or later, if the wake-up seen says so: it waited for a CPU in between).
#[inline(always)]
fn end_missed_switch_in(tid: u32, open: &mut OffCpuStart, now: u64, run_ns: u64) {
    if run_ns == u64::MAX || open.run_ns == u64::MAX || run_ns < open.run_ns {
        count(counter::MISSED_SWITCH_INS);
        return;
    }
    let ran = run_ns - open.run_ns;
    let mut end = now.saturating_sub(ran).max(open.start_ns);
    if open.wake_ns >= open.start_ns && open.wake_ns > end && open.wake_ns <= now {
        end = open.wake_ns;
    }
    count(counter::RECOVERED_SWITCH_INS);
    end_wait_of(tid, open, end);
}

/// Whether `sys_enter`/`sys_exit` trace system calls (and copy other threads' Java stacks as
/// they leave the call they blocked in).
#[inline(always)]
fn syscalls_traced() -> bool {
    setting(&MIN_SYSCALL_NS) != u64::MAX && setting(&SYSCALLS_AT_SWITCHES) == 0
}

/// The current task's CPU time (`sum_exec_runtime`, brought up to date as it switches out);
/// `u64::MAX` when not known.
#[inline(always)]
fn current_run_ns() -> u64 {
    let offset = setting(&TASK_LAYOUT).run_ns;
    if offset == 0 {
        return u64::MAX;
    }
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() };
    unsafe { bpf_probe_read_kernel((task + offset as u64) as *const u64) }.unwrap_or(u64::MAX)
}

/// A thread goes on CPU: if it is the target's, its off-CPU interval ends.
#[inline(always)]
fn switch_in(ctx: &RawTracePointContext, now: u64) {
    let Some(next) = task_pid(ctx.arg(2)) else {
        return;
    };
    let Some(next) = own_id(next) else {
        return;
    };
    if next == 0 {
        return;
    }
    // Only the target's threads are ever stamped, so a hit means `next` is ours; looked up
    // once for both uses (this runs at every switch of the machine).
    let Some(start) = STARTS.get_ptr_mut(next) else {
        return;
    };
    let start = unsafe { &mut *start };
    account_run(next, start, now);
    let user_stack_id = start.user_stack_id;
    end_wait_of(next, start, now);
    if setting(&SYSCALLS_AT_SWITCHES) != 0 {
        syscall_at_switch_in(next, ctx.arg(2), now, user_stack_id);
    }
}

/// The thread's scheduler histograms, created the first time.
#[inline(always)]
fn sched_stats(tid: u32) -> Option<*mut SchedStats> {
    if let Some(stats) = SCHED_STATS.get_ptr_mut(tid) {
        return Some(stats);
    }
    let zero = SCHED_STATS_ZERO.get_ptr(0)?;
    if SCHED_STATS.insert(tid, unsafe { &*zero }, 0).is_err() {
        count(counter::SCHED_MAP_FULL);
        return None;
    }
    SCHED_STATS.get_ptr_mut(tid)
}

#[inline(always)]
unsafe fn add_to_histogram(histogram: *mut Histogram, ns: u64) {
    unsafe {
        (*histogram).count += 1;
        (*histogram).total_ns += ns;
        if ns > (*histogram).max_ns {
            (*histogram).max_ns = ns;
        }
        let i = histogram_bucket(ns);
        if i < HISTOGRAM_BUCKETS {
            (*histogram).buckets[i] += 1;
        }
    }
}

/// The target's thread `tid` runs now, on this CPU: how long it waited for the CPU since it
/// was woken (or preempted), and whether it changed CPU. Only a thread's own switches touch
/// its entry, one CPU at a time.
#[inline(always)]
fn account_run(tid: u32, start: &OffCpuStart, now: u64) {
    let (start_ns, prev_state, wake_ns, waker_tid) = (
        start.start_ns,
        start.prev_state,
        start.wake_ns,
        start.waker_tid,
    );
    // A wait whose start was not seen (a seed, or one already ended) times nothing.
    if start_ns == WAIT_ENDED || start_ns == 0 {
        return;
    }
    let Some(stats) = sched_stats(tid) else {
        return;
    };
    let cpu = unsafe { bpf_get_smp_processor_id() };
    unsafe {
        let last = (*stats).last_cpu;
        if last != 0 && last != cpu + 1 {
            (*stats).migrations += 1;
        }
        (*stats).last_cpu = cpu + 1;
        if prev_state == task_state::RUNNING {
            add_to_histogram(
                core::ptr::addr_of_mut!((*stats).runqueue),
                now.saturating_sub(start_ns),
            );
            return;
        }
        if wake_ns < start_ns {
            return; // woken by nothing the programs saw
        }
        let latency = now.saturating_sub(wake_ns);
        add_to_histogram(core::ptr::addr_of_mut!((*stats).wakeup), latency);
        if latency < setting(&LATE_WAKEUP_NS) {
            return;
        }
    }
    match EVENTS.reserve::<LateWakeup>(0) {
        Some(mut slot) => {
            let event = slot.as_mut_ptr();
            unsafe {
                (*event).kind = kind::LATE_WAKEUP;
                (*event).tid = tid;
                (*event).wake_ns = wake_ns;
                (*event).run_ns = now;
                (*event).waker_tid = waker_tid;
                (*event).cpu = cpu;
            }
            slot.submit(BPF_RB_NO_WAKEUP as u64);
        }
        None => count(counter::LOST_EVENTS),
    }
}

/// The off-CPU interval of the target's thread `tid` ends now, if it is in one.
#[inline(always)]
pub(crate) fn end_wait(next: u32, now: u64) {
    // Only the target's threads are ever stamped, so a hit means `next` is ours. Worked on in
    // the map, not copied: this also runs inside `sys_exit`, whose stack is nearly full.
    let Some(start) = STARTS.get_ptr_mut(next) else {
        return;
    };
    end_wait_of(next, unsafe { &mut *start }, now);
}

/// `end_wait`, with the thread's entry in `STARTS` already found.
#[inline(always)]
fn end_wait_of(next: u32, start: &mut OffCpuStart, now: u64) {
    if start.start_ns == WAIT_ENDED {
        return;
    }
    amend(next, start);
    let duration = now.saturating_sub(start.start_ns);
    request_java_stack(next, start, duration);

    // A wait for a CPU, or a JDK service thread's short wait for work, is summed unless long.
    let min =
        if start.prev_state == task_state::RUNNING || start.java.flags & java_flags::SERVICE != 0 {
            setting(&MIN_PREEMPTED_NS)
        } else {
            setting(&MIN_OFF_CPU_NS)
        };
    if duration < min {
        add_short(next, duration, start.prev_state);
    } else {
        match EVENTS.reserve::<OffCpuEvent>(0) {
            Some(mut slot) => {
                let event = slot.as_mut_ptr();
                unsafe {
                    (*event).kind = kind::OFF_CPU;
                    (*event).tid = next;
                    (*event).start_ns = start.start_ns;
                    (*event).end_ns = now;
                    (*event).prev_state = start.prev_state;
                    (*event).kernel_stack_id = start.kernel_stack_id;
                    (*event).user_stack_id = start.user_stack_id;
                    (*event).waker_tid = start.waker_tid;
                    (*event).cpu = bpf_get_smp_processor_id();
                    (*event).java = start.java;
                }
                // No wake-up per record: user space drains on a timer, so a busy target
                // does not cost a context switch of pinprof's per event.
                slot.submit(BPF_RB_NO_WAKEUP as u64);
            }
            None => count(counter::LOST_EVENTS),
        }
    }
    // (A wait for a CPU says nothing of the thread's waits: it keeps the flags; so does the
    // first blip after a long wait.)
    let java_min = setting(&MIN_JAVA_STACK_NS);
    let run = wait_flags::LAST_LONG | wait_flags::BLIP_KEPT;
    start.flags = if start.prev_state == task_state::RUNNING {
        start.flags & run
    } else if duration >= java_min {
        wait_flags::LAST_LONG
    } else if start.flags & run == wait_flags::LAST_LONG && duration < java_min / 4 {
        run
    } else {
        0
    };
    start.start_ns = WAIT_ENDED;
}

/// The wait `start` of `tid` with the Java state user space read for it, if it read one for
/// this very wait. Done here, at the wait's end, because an update of `STARTS` from user space
/// could land on the thread's next wait instead (it may run and block again meanwhile).
#[inline(always)]
fn amend(tid: u32, start: &mut OffCpuStart) {
    // Only a wait begun unknown is amended (a stale amendment goes with its thread's exit).
    if start.java.flags & java_flags::KNOWN != 0 {
        return;
    }
    let Some(amendment) = AMENDMENTS.get_ptr(tid) else {
        return;
    };
    let amendment = unsafe { &*amendment };
    if amendment.start_ns == start.start_ns {
        start.java = amendment.java;
        let idle_carrier = start.java.flags & (java_flags::CARRIER | java_flags::MOUNTED)
            == java_flags::CARRIER
            && start.prev_state != task_state::RUNNING;
        if idle_carrier
            && let Some(call) = IN_SYSCALL.get_ptr_mut(tid)
            && unsafe { (*call).start_ns } <= start.start_ns
        {
            // As at a known carrier's switch-out: its futex wait is the scheduler's idling.
            unsafe { (*call).flags |= syscall_flags::IDLE };
        }
    }
    let _ = AMENDMENTS.remove(tid);
}

/// The current thread is running, so any wait of its still open is one whose switch back in
/// the kernel skipped (it does, now and then, without saying so): it ends now, microseconds
/// after it really did, as the thread leaves the system call it waited in, instead of being
/// lost with the next switch-out.
#[inline(always)]
pub(crate) fn end_missed_wait(tid: u32) {
    if STARTS.get_ptr(tid).is_some_and(|s| {
        let start = unsafe { (*s).start_ns };
        start != 0 && start != WAIT_ENDED
    }) {
        end_wait(tid, unsafe { bpf_ktime_get_ns() });
    }
}

#[inline(always)]
fn add_short(tid: u32, duration: u64, prev_state: u64) {
    count(counter::SHORT_INTERVALS);
    let preempted = if prev_state == task_state::RUNNING {
        duration
    } else {
        0
    };
    match SHORT_OFF_CPU.get_ptr_mut(tid) {
        Some(sum) => unsafe {
            (*sum).count += 1;
            (*sum).total_ns += duration;
            (*sum).preempted_ns += preempted;
        },
        None => {
            let first = ShortOffCpu {
                count: 1,
                total_ns: duration,
                preempted_ns: preempted,
            };
            if SHORT_OFF_CPU.insert(tid, first, 0).is_err() {
                count(counter::LOST_EVENTS);
            }
        }
    }
}

/// A raw tracepoint (`sched_waking(p)`), as `sched_switch`.
#[raw_tracepoint(tracepoint = "sched_waking")]
pub fn sched_waking(ctx: RawTracePointContext) -> i32 {
    if surely_foreign(ctx.arg(0)) {
        return 0;
    }
    // Runs in the waker's context: the current thread is the one that made `pid` runnable.
    let Some(pid) = task_pid(ctx.arg(0)) else {
        return 0;
    };
    let Some(pid) = own_id(pid) else {
        return 0;
    };
    let (waker_tgid, waker_tid) = current_ids();
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(start) = STARTS.get_ptr_mut(pid) {
        unsafe {
            (*start).waker_tid = waker_tid;
            // The first wake-up of a wait starts its wakeup latency.
            if (*start).start_ns != WAIT_ENDED && (*start).wake_ns == 0 {
                (*start).wake_ns = now;
            }
        }
    }
    // A thread of the target waking from a long futex wait: remember who released it, and
    // where (the releasing code), and ask for the waker's Java stack too.
    let Some(call) = IN_SYSCALL.get_ptr_mut(pid) else {
        return 0;
    };
    let flags = unsafe { (*call).flags };
    // Not a futex wait, already woken, or an idle carrier's park (the scheduler handing it
    // work is not a lock release).
    if flags & syscall_flags::FUTEX_WAIT == 0
        || flags & (syscall_flags::WOKEN | syscall_flags::IDLE) != 0
    {
        return 0;
    }
    if now.saturating_sub(unsafe { (*call).start_ns }) < setting(&MIN_SYSCALL_NS) {
        return 0;
    }
    // Only a thread inside a futex call releases a futex waiter. Anything else is a timer
    // interrupt (the wait timed out: the current task is whatever it interrupted) or a signal.
    let ours = waker_tgid == setting(&TARGET_TGID)
        && waker_tgid != 0
        && current_syscall().is_some_and(|nr| {
            matches!(nr, sysno::FUTEX | sysno::FUTEX_WAKE | sysno::FUTEX_REQUEUE)
        });
    if !ours {
        return 0;
    }
    // The releasing code's stacks cost a few stack walks and copies in the waker's own time:
    // at most one such capture per CPU per CAPTURE_GAP_NS (a busy scheduler wakes threads
    // thousands of times a second); the wake itself is always recorded.
    let capture = capture_budget(now);
    let (user_stack_id, kernel_stack_id) = if capture {
        (stack_id(&ctx, BPF_F_USER_STACK as u64), stack_id(&ctx, 0))
    } else {
        (NOT_CAPTURED, NOT_CAPTURED)
    };
    unsafe {
        (*call).flags |= syscall_flags::WOKEN;
        (*call).waker = Waker {
            tid: waker_tid,
            user_stack_id,
            kernel_stack_id,
            _pad: 0,
            wake_ns: now,
        };
    }
    if !capture {
        count(counter::WAKER_STACKS_SKIPPED);
        return 0;
    }
    // A Java waker's Java stack says where it released; other threads need their native stack
    // unwound (the kernel's frame-pointer walk stops in libc).
    if unsafe { JAVA_THREADS.get(&waker_tid) }.is_some() {
        if setting(&MIN_JAVA_STACK_NS) != 0 {
            copy_waker_java_stack(waker_tid, now, &sched_scratch());
        }
    } else {
        copy_native_stack(waker_tid, now);
    }
    0
}

/// The system call the current thread is in, from its saved user registers (None: none).
#[inline(always)]
fn current_syscall() -> Option<u32> {
    let regs = current_user_regs()?;
    let nr = user_reg(unsafe { core::ptr::addr_of!((*regs).orig_rax) }) as i64;
    (nr >= 0).then_some(nr as u32)
}

/// Where `sched_switch` and `sched_waking` make their Java stack copies.
#[inline(always)]
fn sched_scratch() -> Scratch {
    Scratch {
        stack: &SCHED_STACK_SCRATCH,
        chunked: &SCHED_STACK_CHUNK_SCRATCH,
        kinds: [kind::STACK_COPY, kind::STACK_CHUNK_COPY],
    }
}

/// Waker stacks are captured at most once per this many ns on each CPU.
const CAPTURE_GAP_NS: u64 = 1_000_000;
/// Java stacks of blocks not known to be long are copied at most once per this many ns on
/// each CPU.
const SPARE_COPY_GAP_NS: u64 = 1_000_000;

/// Whether this CPU may capture a waker's stacks now (and if so, takes the turn).
#[inline(always)]
fn capture_budget(now: u64) -> bool {
    take_turn(&LAST_WAKER_CAPTURE, now, CAPTURE_GAP_NS)
}

/// Whether `gap` ns have passed on this CPU since `last` said a turn was taken (and if so,
/// takes this one).
#[inline(always)]
fn take_turn(last: &PerCpuArray<u64>, now: u64, gap: u64) -> bool {
    let Some(last) = last.get_ptr_mut(0) else {
        return false;
    };
    unsafe {
        if now.saturating_sub(*last) < gap {
            return false;
        }
        *last = now;
    }
    true
}
