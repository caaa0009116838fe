use aya_ebpf::{
    bindings::pt_regs,
    bindings::{BPF_F_USER_STACK, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_smp_processor_id, bpf_ktime_get_ns,
        bpf_probe_read_kernel, bpf_probe_read_user,
    },
    macros::{map, raw_tracepoint, tracepoint},
    maps::{HashMap, PerCpuArray, PerCpuHashMap, RingBuf, StackTrace},
    programs::{RawTracePointContext, TracePointContext, tracing::StackIdContext},
};
use profiler_ebpf::{
    CARRIER_BIT, CHUNK_COPY_BYTES, CLONE_THREAD, ChunkHead, CopiedChunk, ExitEvent, FdLayout,
    JAVA_WINDOW_BYTES, JavaState, JvmLayout, KernelStackReuse, MAX_COPIED_CHUNKS,
    NATIVE_COPY_BYTES, NativeStackCopy, OffCpuEvent, OffCpuStart, SERVICE_BIT, STACK_COPY_BYTES,
    ShortOffCpu, StackChunkCopy, StackCopy, StackHead, StackRequest, SyscallEvent, SyscallKey,
    SyscallStart, THREAD_BITS, TaskLayout, ThreadLife, ThreadRename, WAIT_ENDED, WaitAmendment,
    WaitSum, Waker, counter, futex_op, java_flags, kind, syscall_flags, sysno, task_state,
};

// Settings written by user space before load (`EbpfLoader::set_global`). Tracepoint field
// offsets come from the tracepoints' `format` files, so no kernel layout is hard-coded here.
#[unsafe(no_mangle)]
static TARGET_TGID: u32 = 0;
/// pinprof's PID namespace (`stat /proc/self/ns/pid`: device and inode) when it is not the
/// host's: the target and every thread id are then as that namespace numbers them (the
/// target is in it too). 0: the host's, and host ids.
#[unsafe(no_mangle)]
static PID_NS_DEV: u64 = 0;
#[unsafe(no_mangle)]
static PID_NS_INO: u64 = 0;
#[unsafe(no_mangle)]
static MIN_OFF_CPU_NS: u64 = 0;
/// Waits for a CPU (preemptions) shorter than this are summed per thread, not sent: most of a
/// busy target's switches, and its run-queue time is in the scheduler's own account.
#[unsafe(no_mangle)]
static MIN_PREEMPTED_NS: u64 = 0;
#[unsafe(no_mangle)]
static SWITCH_PREV_STATE_OFFSET: u32 = 32;
#[unsafe(no_mangle)]
static SWITCH_NEXT_PID_OFFSET: u32 = 56;
#[unsafe(no_mangle)]
static WAKEUP_PID_OFFSET: u32 = 24;
#[unsafe(no_mangle)]
static EXIT_GROUP_DEAD_OFFSET: u32 = 32;
/// HotSpot's layout, from the target's VMStructs; all zero for other processes.
#[unsafe(no_mangle)]
static JVM_LAYOUT: JvmLayout = JvmLayout::NONE;
/// Java stacks are copied for blocks at least this long (0: never).
#[unsafe(no_mangle)]
static MIN_JAVA_STACK_NS: u64 = 0;
/// System calls (futex waits included) at least this long are sent one by one with their
/// stacks; shorter ones are summed per (thread, call). `u64::MAX`: system calls not tracked.
#[unsafe(no_mangle)]
static MIN_SYSCALL_NS: u64 = u64::MAX;
#[unsafe(no_mangle)]
static LOCK_ADDR_OFFSET: u32 = 8;
/// Where a file descriptor's inode is, for this kernel (see `FdLayout`).
#[unsafe(no_mangle)]
static FD_LAYOUT: FdLayout = FdLayout {
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
static RENAME_PID_OFFSET: u32 = 8;
#[unsafe(no_mangle)]
static RENAME_NEWCOMM_OFFSET: u32 = 28;
#[unsafe(no_mangle)]
static NEWTASK_PID_OFFSET: u32 = 8;
#[unsafe(no_mangle)]
static NEWTASK_FLAGS_OFFSET: u32 = 32;
/// Where a task's scheduler account is, for this kernel (see `TaskLayout`).
#[unsafe(no_mangle)]
static TASK_LAYOUT: TaskLayout = TaskLayout {
    run_ns: 0,
    run_delay: 0,
};

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(8 << 20, 0);
#[map]
static STACKS: StackTrace = StackTrace::with_max_entries(32 * 1024, 0);
#[map]
static STARTS: HashMap<u32, OffCpuStart> = HashMap::with_max_entries(64 * 1024, 0);
#[map]
static SHORT_OFF_CPU: HashMap<u32, ShortOffCpu> = HashMap::with_max_entries(64 * 1024, 0);
/// The target's Java threads: thread id -> address of its `JavaThread` (| `THREAD_BITS`),
/// kept by user space.
#[map]
static JAVA_THREADS: HashMap<u32, u64> = HashMap::with_max_entries(64 * 1024, 0);
/// In a PID namespace: the namespace's id of each of the target's threads seen running, by
/// host id (the scheduler's tracepoints name the task switched in or woken by its host id).
#[map]
static NS_TIDS: HashMap<u32, u32> = HashMap::with_max_entries(64 * 1024, 0);
/// In a PID namespace: threads the target started and that have not run yet, by host id,
/// with their birth (sent once they run, when their namespace id is known).
#[map]
static NS_BIRTHS: HashMap<u32, u64> = HashMap::with_max_entries(8 * 1024, 0);
/// Per thread: the kernel stack of its last wait in a system call, the call, and how many
/// waits since reused it (see `kernel_stack`).
#[map]
static KSTACKS: HashMap<u32, KernelStackReuse> = HashMap::with_max_entries(64 * 1024, 0);
/// The Java state of waits that began before their thread was known as a Java thread, per
/// thread, written by user space and applied here when the wait ends (see `amend`).
#[map]
static AMENDMENTS: HashMap<u32, WaitAmendment> = HashMap::with_max_entries(8 * 1024, 0);
/// Java threads whose stack is wanted when they leave the system call they blocked in.
#[map]
static STACK_REQUESTS: HashMap<u32, StackRequest> = HashMap::with_max_entries(8 * 1024, 0);
/// System calls in progress, per thread.
#[map]
static IN_SYSCALL: HashMap<u32, SyscallStart> = HashMap::with_max_entries(64 * 1024, 0);
/// Sums of the system calls shorter than `MIN_SYSCALL_NS`, per (thread, call).
#[map]
static SYSCALL_SUMS: HashMap<SyscallKey, WaitSum> = HashMap::with_max_entries(64 * 1024, 0);
/// Kernel lock contention in progress, per thread: its start.
#[map]
static CONTENTION_STARTS: HashMap<u32, u64> = HashMap::with_max_entries(64 * 1024, 0);
/// Kernel lock contention of the target's threads, per lock address.
#[map]
static KERNEL_LOCKS: PerCpuHashMap<u64, WaitSum> = PerCpuHashMap::with_max_entries(16 * 1024, 0);
/// The same contention, per thread.
#[map]
static KERNEL_LOCK_THREADS: HashMap<u32, WaitSum> = HashMap::with_max_entries(64 * 1024, 0);
/// Per CPU: the `JavaThread` bytes read at a block (see `JvmLayout::window_start`).
#[map]
static JAVA_WINDOW: PerCpuArray<[u8; JAVA_WINDOW_BYTES]> = PerCpuArray::with_max_entries(1, 0);
/// Per CPU: where a Java stack copy is made before its used part is sent (a fixed-size
/// record would take its whole size from the ring buffer).
#[map]
static STACK_SCRATCH: PerCpuArray<StackCopy> = PerCpuArray::with_max_entries(1, 0);
#[map]
static STACK_CHUNK_SCRATCH: PerCpuArray<StackChunkCopy> = PerCpuArray::with_max_entries(1, 0);
/// Per CPU: when a waker's stacks were last captured (see `capture_budget`).
#[map]
static LAST_WAKER_CAPTURE: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Adds one wait to a sum in `map` (a hash map, or a per-CPU one: a kernel lock's entry is
/// updated from every CPU at once, and plain adds to one shared entry would lose counts under
/// the very contention being measured). The two map types share no trait, hence a macro.
macro_rules! add_wait {
    ($map:expr, $key:expr, $duration:expr) => {{
        let duration: u64 = $duration;
        match $map.get_ptr_mut($key) {
            Some(sum) => unsafe { add_to(sum, duration) },
            None => {
                let first = WaitSum {
                    count: 1,
                    total_ns: duration,
                    max_ns: duration,
                };
                if $map.insert($key, &first, 0).is_err() {
                    count(counter::SYSCALL_MAP_FULL);
                }
            }
        }
    }};
}

#[inline(always)]
fn setting<T: Copy>(value: &T) -> T {
    // Volatile, or the compiler folds the defaults in before user space can set them.
    unsafe { core::ptr::read_volatile(value) }
}

#[inline(always)]
fn count(index: u32) {
    if let Some(slot) = COUNTERS.get_ptr_mut(index) {
        unsafe { *slot += 1 };
    }
}

/// A stack id that says "not captured on purpose" (the kernel's own failures are -errno).
const NOT_CAPTURED: i32 = i32::MIN;

#[inline(always)]
fn stack_id(ctx: &impl StackIdContext, flags: u64) -> i32 {
    match ctx.get_stackid(&STACKS, flags) {
        Ok(id) => id as i32,
        Err(err) => {
            count(counter::STACK_MISSES);
            err
        }
    }
}

#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let now = unsafe { bpf_ktime_get_ns() };
    let target = setting(&TARGET_TGID);
    let (tgid, tid) = current_ids();

    // The current task is still `prev`: its stacks are the ones that go off CPU.
    if tgid == target && tid != 0 {
        seen_running(tid, now);
        // The low byte is the state; TASK_REPORT_MAX (0x100) marks a preemption in the kernel.
        let prev_state = unsafe { ctx.read_at::<i64>(setting(&SWITCH_PREV_STATE_OFFSET) as usize) }
            .unwrap_or(0) as u64
            & 0xff;
        if prev_state & task_state::DEAD != 0 {
            // Its last switch (do_task_dead): its life ends here, and no wait begins.
            let _ = STARTS.remove(tid);
            let _ = AMENDMENTS.remove(tid);
            let _ = KSTACKS.remove(tid);
            forget_ns_tid();
            thread_life(kind::THREAD_EXIT, tid, now, true);
        } else {
            switch_out(&ctx, tid, now, prev_state);
        }
    }
    switch_in(&ctx, now)
}

/// A thread of the target goes off CPU: where, and what its Java thread was doing, kept until
/// it runs again.
#[inline(always)]
fn switch_out(ctx: &TracePointContext, tid: u32, now: u64, prev_state: u64) {
    let java = java_state(tid);
    // A carrier with nothing mounted is going idle: its stack is always the scheduler's
    // own wait, and on JDK 24+ these are most switches, so skip the two stack walks.
    let idle_carrier = java.flags & java_flags::CARRIER != 0
        && java.flags & java_flags::MOUNTED == 0
        && prev_state != task_state::RUNNING;
    if idle_carrier && let Some(call) = IN_SYSCALL.get_ptr_mut(tid) {
        // Its futex wait is the scheduler's idling, not a lock.
        unsafe { (*call).flags |= syscall_flags::IDLE };
    }
    // A preempted thread waits for a CPU, not on anything: its stacks would say where it
    // happened to be, and nothing reads them (about half of all switches of a busy target).
    let preempted = prev_state == task_state::RUNNING;
    // A JDK service thread waits for work (JDK 25's timer for virtual threads' sleeps parks
    // thousands of times a second): no native stacks; its long waits get Java stacks.
    let service = java.flags & java_flags::SERVICE != 0;
    let (kernel_stack_id, user_stack_id) = if idle_carrier || preempted || service {
        (NOT_CAPTURED, NOT_CAPTURED)
    } else {
        (
            kernel_stack(ctx, tid),
            stack_id(ctx, BPF_F_USER_STACK as u64),
        )
    };
    let start = OffCpuStart {
        start_ns: now,
        prev_state,
        kernel_stack_id,
        user_stack_id,
        waker_tid: 0,
        _pad: 0,
        java,
    };
    // An entry still there is a wait whose end the program never saw (its switch back in
    // was skipped, as the kernel does while another BPF program runs on that CPU): lost,
    // and said so. (A seed, which starts at 0, may be one its thread ended before attach.)
    match STARTS.get_ptr_mut(tid) {
        Some(open) => unsafe {
            if (*open).start_ns == WAIT_ENDED {
                // Its last wait ended: the entry is reused.
            } else if (*open).prev_state == task_state::RUNNING {
                // A wait for a CPU: its time is in the thread's scheduler account all the same.
                count(counter::MISSED_PREEMPTIONS);
            } else if (*open).start_ns != 0 {
                count(counter::MISSED_SWITCH_INS);
            }
            *open = start;
        },
        None => {
            if STARTS.insert(tid, start, 0).is_err() {
                count(counter::START_MAP_FULL);
            }
        }
    }
}

/// How many futex waits of a thread reuse its last walked kernel stack before it is walked
/// again (so a stack that did change is seen soon).
const KSTACK_REUSES: u32 = 64;

/// The kernel stack of `tid`, going off CPU now. Walking it is most of a switch's cost, and a
/// thread that blocks again in the same system call on the same object (a futex wait: any
/// futex; a read: the same descriptor) blocks down the same kernel path: there it is walked
/// once in a while and reused in between.
#[inline(always)]
fn kernel_stack(ctx: &TracePointContext, tid: u32) -> i32 {
    let Some(call) = IN_SYSCALL.get_ptr(tid) else {
        return stack_id(ctx, 0);
    };
    let (nr, object) = unsafe {
        let call = &*call;
        let object = if call.flags & syscall_flags::FUTEX_WAIT != 0 {
            0 // every futex wait blocks down the same path, whichever the futex
        } else {
            call.args[0]
        };
        (call.nr, object)
    };
    if let Some(last) = KSTACKS.get_ptr_mut(tid) {
        let last = unsafe { &mut *last };
        if last.nr == nr && last.object == object && last.uses < KSTACK_REUSES {
            last.uses += 1;
            return last.id;
        }
    }
    let id = stack_id(ctx, 0);
    if id >= 0 {
        let reuse = KernelStackReuse {
            id,
            uses: 0,
            nr,
            _pad: 0,
            object,
        };
        let _ = KSTACKS.insert(tid, reuse, 0);
    }
    id
}

/// A thread goes on CPU: if it is the target's, its off-CPU interval ends.
#[inline(always)]
fn switch_in(ctx: &TracePointContext, now: u64) -> u32 {
    let Ok(next) = (unsafe { ctx.read_at::<i32>(setting(&SWITCH_NEXT_PID_OFFSET) as usize) })
    else {
        return 0;
    };
    let Some(next) = own_id(next as u32) else {
        return 0;
    };
    if next == 0 {
        return 0;
    }
    end_wait(next, now);
    0
}

/// The off-CPU interval of the target's thread `tid` ends now, if it is in one.
#[inline(always)]
fn end_wait(next: u32, now: u64) {
    // Only the target's threads are ever stamped, so a hit means `next` is ours. Worked on in
    // the map, not copied: this also runs inside `sys_exit`, whose stack is nearly full.
    let Some(start) = STARTS.get_ptr_mut(next) else {
        return;
    };
    let start = unsafe { &mut *start };
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
    start.start_ns = WAIT_ENDED;
}

/// The current task's (process id, thread id), as pinprof numbers them: the host's, or in a
/// PID namespace that namespace's ((0, 0) for a task outside it).
#[inline(always)]
fn current_ids() -> (u32, u32) {
    let dev = setting(&PID_NS_DEV);
    if dev == 0 {
        let pid_tgid = bpf_get_current_pid_tgid();
        return ((pid_tgid >> 32) as u32, pid_tgid as u32);
    }
    let mut ids = aya_ebpf::bindings::bpf_pidns_info { pid: 0, tgid: 0 };
    let size = core::mem::size_of::<aya_ebpf::bindings::bpf_pidns_info>() as u32;
    let found = unsafe {
        aya_ebpf::helpers::generated::bpf_get_ns_current_pid_tgid(
            dev,
            setting(&PID_NS_INO),
            &mut ids,
            size,
        )
    };
    if found != 0 {
        return (0, 0);
    }
    (ids.tgid, ids.pid)
}

/// The id pinprof knows a task by, from the host id a tracepoint gives for a task that is not
/// the current one: the same, or in a PID namespace the one it was seen running with (None:
/// not seen running yet, so not one of the target's threads as far as the programs know).
#[inline(always)]
fn own_id(host: u32) -> Option<u32> {
    if setting(&PID_NS_DEV) == 0 {
        return Some(host);
    }
    unsafe { NS_TIDS.get(&host) }.copied()
}

/// In a PID namespace, the target's current thread `tid` is running: its host id is noted
/// (the scheduler's tracepoints name other tasks by it). The first time, what could not be
/// said before is said: its birth, and the end of the wait it was in as capture began (its
/// switch back in came under a host id not known then).
#[inline(always)]
fn seen_running(tid: u32, now: u64) {
    if setting(&PID_NS_DEV) == 0 {
        return;
    }
    let host = bpf_get_current_pid_tgid() as u32;
    if unsafe { NS_TIDS.get(&host) }.is_some_and(|&known| known == tid) {
        return;
    }
    if NS_TIDS.insert(host, tid, 0).is_err() {
        count(counter::START_MAP_FULL);
    }
    if let Some(&born) = unsafe { NS_BIRTHS.get(&host) } {
        let _ = NS_BIRTHS.remove(host);
        thread_life(kind::THREAD_START, tid, born, false);
    }
    if STARTS
        .get_ptr(tid)
        .is_some_and(|s| unsafe { (*s).start_ns } == 0)
    {
        end_wait(tid, now);
    }
}

/// In a PID namespace, the current task's host id is forgotten as it ends (ids are reused).
#[inline(always)]
fn forget_ns_tid() {
    if setting(&PID_NS_DEV) != 0 {
        let _ = NS_TIDS.remove(bpf_get_current_pid_tgid() as u32);
    }
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

#[inline(always)]
fn read_user<T>(addr: u64) -> Option<T> {
    if addr == 0 {
        return None;
    }
    unsafe { bpf_probe_read_user(addr as *const T) }.ok()
}

/// Reads what the Java thread `tid` (the current task) is doing as it blocks: its state, the
/// monitors it enters or waits on, and whether a virtual thread is mounted on it. Runs in the
/// thread's own context, so its memory is the current address space.
#[inline(always)]
fn java_state(tid: u32) -> JavaState {
    let mut state = JavaState::default();
    let Some(&entry) = (unsafe { JAVA_THREADS.get(&tid) }) else {
        return state;
    };
    let thread = entry & !THREAD_BITS;
    let layout: JvmLayout = setting(&JVM_LAYOUT);
    // One read of the span of `JavaThread` that holds every field below, instead of one read
    // per field: this runs at every switch-out of a Java thread.
    let window = JAVA_WINDOW.get_ptr_mut(0).filter(|buf| {
        layout.window_len != 0
            && unsafe {
                aya_ebpf::helpers::generated::bpf_probe_read_user(
                    buf.cast(),
                    JAVA_WINDOW_BYTES as u32,
                    (thread + layout.window_start as u64) as *const core::ffi::c_void,
                )
            } == 0
    });
    let word = |offset: u32| -> Option<u64> {
        let i = offset.wrapping_sub(layout.window_start) as usize;
        match window {
            Some(buf) if i <= JAVA_WINDOW_BYTES - 8 => {
                Some(unsafe { core::ptr::read_unaligned(buf.cast::<u8>().add(i).cast::<u64>()) })
            }
            _ => read_user::<u64>(thread + offset as u64),
        }
    };
    let Some(thread_state) = word(layout.thread_state) else {
        return state;
    };
    state.flags = java_flags::KNOWN;
    if entry & CARRIER_BIT != 0 {
        state.flags |= java_flags::CARRIER;
    }
    if entry & SERVICE_BIT != 0 {
        state.flags |= java_flags::SERVICE;
    }
    state.thread_state = thread_state as u32;
    if read_user::<u32>(layout.safepoint_state).is_some_and(|s| s != 0) {
        state.flags |= java_flags::SAFEPOINT;
    }
    state.pending_monitor = word(layout.pending_monitor).unwrap_or(0);
    state.waiting_monitor = word(layout.waiting_monitor).unwrap_or(0);
    if layout.held_monitor_count != 0 {
        state.held_monitors = word(layout.held_monitor_count).unwrap_or(0) as u32;
    }
    state.anchor_sp = word(layout.anchor_sp).unwrap_or(0);
    state.anchor_pc = word(layout.anchor_pc).unwrap_or(0);
    state.anchor_fp = word(layout.anchor_fp).unwrap_or(0);
    if entry & SERVICE_BIT != 0 {
        return state; // a JDK service thread runs no virtual thread
    }

    // Mounted: the thread it runs (`_vthread`) is not its own `Thread` object. Both are
    // OopHandles, pointers to slots that hold the object's address.
    let own = word(layout.thread_obj).and_then(read_user::<u64>);
    let current = word(layout.vthread).and_then(read_user::<u64>);
    if let (Some(own), Some(current)) = (own, current)
        && current != 0
        && current != own
    {
        state.flags |= java_flags::MOUNTED;
        state.vthread_id = read_user::<u64>(current + layout.java_tid as u64).unwrap_or(0);
        if layout.cont_entry != 0 && layout.cont_pin_count != 0 {
            state.pin_count = word(layout.cont_entry)
                .and_then(|entry| read_user::<u32>(entry + layout.cont_pin_count as u64))
                .unwrap_or(0);
        }
    }
    state
}

/// A Java thread that blocked for long in a call out of Java (its frame anchor is set) gets its
/// stack copied when it leaves that system call; idle carriers (nothing mounted) do not.
#[inline(always)]
fn request_java_stack(tid: u32, start: &OffCpuStart, duration: u64) {
    let min = setting(&MIN_JAVA_STACK_NS);
    let java = &start.java;
    if min == 0
        || duration < min
        || start.prev_state == task_state::RUNNING
        || java.flags & java_flags::KNOWN == 0
        || java.anchor_sp == 0
        || (java.flags & java_flags::CARRIER != 0 && java.flags & java_flags::MOUNTED == 0)
    {
        return;
    }
    let request = StackRequest {
        start_ns: start.start_ns,
        anchor_sp: java.anchor_sp,
    };
    if STACK_REQUESTS.insert(tid, request, 0).is_err() {
        count(counter::STACK_COPY_MISSES);
    }
}

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

/// The current thread is running, so any wait of its still open is one whose switch back in
/// the kernel skipped (it does, now and then, without saying so): it ends now, microseconds
/// after it really did, as the thread leaves the system call it waited in, instead of being
/// lost with the next switch-out.
#[inline(always)]
fn end_missed_wait(tid: u32) {
    if STARTS.get_ptr(tid).is_some_and(|s| {
        let start = unsafe { (*s).start_ns };
        start != 0 && start != WAIT_ENDED
    }) {
        end_wait(tid, unsafe { bpf_ktime_get_ns() });
    }
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

/// Times the system call `tid` leaves: long ones (and long futex waits, with their waker)
/// become events with the caller's stack; short ones only add to a per-(thread, call) sum.
#[inline(always)]
fn end_syscall(ctx: &RawTracePointContext, tid: u32) {
    let Some(call) = IN_SYSCALL.get_ptr(tid) else {
        return;
    };
    let call = unsafe { *call };
    let _ = IN_SYSCALL.remove(tid);
    // A call seeded from /proc as the capture started (start 0, see `Capture::start`) that
    // ended before the programs were attached is not the one ending now. Only seeds are
    // checked: `rt_sigreturn` leaves with number -1.
    if call.start_ns == 0 {
        let nr = syscall_reg(ctx, |r| unsafe { core::ptr::addr_of!((*r).orig_rax) });
        if nr as u32 != call.nr {
            return;
        }
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let duration = now.saturating_sub(call.start_ns);
    let futex_wait = call.flags & syscall_flags::FUTEX_WAIT != 0;
    if call.flags & syscall_flags::IDLE != 0 {
        // An idle carrier's park is the scheduler waiting for work, not a blocking call.
        return;
    }
    if duration >= setting(&MIN_SYSCALL_NS) {
        // Java threads get their Java stacks; the native part of a JVM wait is the same few
        // VM frames every time, so only other threads need their native stacks unwound.
        if unsafe { JAVA_THREADS.get(&tid) }.is_none() {
            copy_native_stack(tid, call.start_ns);
        }
        let (fd_inode, fd_mode) = fd_inode(call.nr, call.args[0]);
        let ret: i64 = ctx.arg(1);
        match EVENTS.reserve::<SyscallEvent>(0) {
            Some(mut slot) => {
                slot.write(SyscallEvent {
                    kind: if futex_wait {
                        kind::FUTEX_WAIT
                    } else {
                        kind::SYSCALL
                    },
                    tid,
                    nr: call.nr,
                    user_stack_id: stack_id(ctx, BPF_F_USER_STACK as u64),
                    start_ns: call.start_ns,
                    end_ns: now,
                    ret,
                    args: call.args,
                    timeout_ns: call.timeout_ns,
                    waker: call.waker,
                    fd_inode,
                    fd_mode,
                    _pad: 0,
                });
                slot.submit(BPF_RB_NO_WAKEUP as u64);
            }
            None => count(counter::LOST_EVENTS),
        }
        return;
    }
    let key = SyscallKey { tid, nr: call.nr };
    add_wait!(SYSCALL_SUMS, &key, duration);
}

/// The inode number and mode of the current thread's file descriptor `fd`, if system call
/// `nr` takes one first: task->files->fdt->fd[fd]->f_inode.
#[inline(always)]
fn fd_inode(nr: u32, fd: u64) -> (u64, u32) {
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
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() };
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

#[inline(always)]
unsafe fn add_to(sum: *mut WaitSum, duration: u64) {
    unsafe {
        (*sum).count += 1;
        (*sum).total_ns += duration;
        if duration > (*sum).max_ns {
            (*sum).max_ns = duration;
        }
    }
}

/// The current thread's id if it belongs to the target.
#[inline(always)]
fn target_tid() -> Option<u32> {
    let (tgid, tid) = current_ids();
    if tgid != setting(&TARGET_TGID) || tgid == 0 {
        return None;
    }
    seen_running(tid, unsafe { bpf_ktime_get_ns() });
    Some(tid)
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
    let nr = nr as u32;
    let futex_wait = match nr {
        sysno::FUTEX => futex_op::waits(args[1]),
        sysno::FUTEX_WAITV | sysno::FUTEX_WAIT => true,
        _ => false,
    };
    let mut timeout_ns = u64::MAX;
    if nr == sysno::FUTEX && futex_wait && args[3] != 0 {
        // struct timespec { tv_sec, tv_nsec }
        if let (Some(sec), Some(nsec)) = (read_user::<u64>(args[3]), read_user::<u64>(args[3] + 8))
        {
            timeout_ns = sec.wrapping_mul(1_000_000_000).wrapping_add(nsec);
        }
    }
    let start = SyscallStart {
        start_ns: unsafe { bpf_ktime_get_ns() },
        nr,
        flags: if futex_wait {
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
    0
}

/// Kernel lock contention of the target's threads: begins.
#[tracepoint]
pub fn contention_begin(_ctx: TracePointContext) -> u32 {
    let Some(tid) = target_tid() else {
        return 0;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    if CONTENTION_STARTS.insert(tid, now, 0).is_err() {
        count(counter::SYSCALL_MAP_FULL);
    }
    0
}

/// Kernel lock contention of the target's threads: ends; summed per lock address.
#[tracepoint]
pub fn contention_end(ctx: TracePointContext) -> u32 {
    let Some(tid) = target_tid() else {
        return 0;
    };
    let Some(start) = CONTENTION_STARTS.get_ptr(tid) else {
        return 0;
    };
    let start = unsafe { *start };
    let _ = CONTENTION_STARTS.remove(tid);
    let lock = unsafe { ctx.read_at::<u64>(setting(&LOCK_ADDR_OFFSET) as usize) }.unwrap_or(0);
    let now = unsafe { bpf_ktime_get_ns() };
    add_wait!(KERNEL_LOCKS, &lock, now.saturating_sub(start));
    add_wait!(KERNEL_LOCK_THREADS, &tid, now.saturating_sub(start));
    0
}

/// Copies the Java stack of `tid` if one was requested for it (see `request_java_stack`).
#[inline(always)]
fn copy_java_stack(tid: u32) {
    let Some(request) = STACK_REQUESTS.get_ptr(tid) else {
        return;
    };
    let request = unsafe { *request };
    let _ = STACK_REQUESTS.remove(tid);
    let Some(&entry) = (unsafe { JAVA_THREADS.get(&tid) }) else {
        return;
    };
    let thread = entry & !THREAD_BITS;
    let layout: JvmLayout = setting(&JVM_LAYOUT);
    // The same anchor as at the block, or the thread went on in between (not a syscall wait).
    let sp = read_user::<u64>(thread + layout.anchor_sp as u64).unwrap_or(0);
    if sp == 0 || sp != request.anchor_sp {
        count(counter::STACK_COPY_MISSES);
        return;
    }
    let base = read_user::<u64>(thread + layout.stack_base as u64).unwrap_or(0);
    let len = if base > sp {
        (base - sp).min(STACK_COPY_BYTES as u64)
    } else {
        STACK_COPY_BYTES as u64
    };
    let frozen = frozen_frames(&layout, thread, entry);
    // A virtual thread with frames frozen in a chunk: those frames are copied too, now, while
    // they are where the chunk says (later, the GC may move the chunk, or the thread thaw them).
    // Either copy is made in its scratch map and only its used part sent.
    if frozen.chunk != 0
        && layout.chunk_stack != 0
        && let Some(copy) = STACK_CHUNK_SCRATCH.get_ptr_mut(0)
    {
        unsafe {
            let data = (*copy).data.as_mut_ptr();
            let used = copy_chunks(
                core::ptr::addr_of_mut!((*copy).chunk),
                data,
                &layout,
                &frozen,
            );
            // A bound the verifier can see for where the stack goes (never false).
            if used > CHUNK_COPY_BYTES {
                return;
            }
            let head = core::ptr::addr_of_mut!((*copy).stack);
            let len = fill_stack_copy(
                head,
                data.add(used),
                tid,
                &request,
                &layout,
                thread,
                sp,
                len,
                &frozen,
            );
            (*head).kind = kind::STACK_CHUNK_COPY;
            let heads = size_of::<StackHead>() + size_of::<ChunkHead>();
            send_stack(copy.cast(), heads + used, len);
        }
        return;
    }
    let Some(copy) = STACK_SCRATCH.get_ptr_mut(0) else {
        count(counter::STACK_COPY_MISSES);
        return;
    };
    unsafe {
        let head = core::ptr::addr_of_mut!((*copy).head);
        let data = (*copy).data.as_mut_ptr();
        let len = fill_stack_copy(head, data, tid, &request, &layout, thread, sp, len, &frozen);
        send_stack(copy.cast(), size_of::<StackHead>(), len);
    }
}

/// Sends the used part of a stack copy filled in its scratch map: `before` bytes, then `len`
/// bytes of stack (none: nothing to send, the miss was counted). A full ring buffer loses it.
#[inline(always)]
unsafe fn send_stack(copy: *const u8, before: usize, len: usize) {
    let size = before + len;
    // Never false; bounds the verifier can see: the larger scratch map's size.
    if len == 0 || size > size_of::<StackChunkCopy>() {
        return;
    }
    let bytes = unsafe { core::slice::from_raw_parts(copy, size) };
    if EVENTS
        .output::<[u8]>(bytes, BPF_RB_NO_WAKEUP as u64)
        .is_err()
    {
        count(counter::STACK_COPY_MISSES);
        count(counter::LOST_EVENTS);
    }
}

/// Fills a stack copy's head (the frame anchor, the frozen frames' whereabouts) and copies
/// `len` bytes of the stack from `sp` to `data`; returns the bytes copied (0: none, counted
/// as a miss), `STACK_COPY_BYTES` at most.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fill_stack_copy(
    copy: *mut StackHead,
    data: *mut u8,
    tid: u32,
    request: &StackRequest,
    layout: &JvmLayout,
    thread: u64,
    sp: u64,
    len: u64,
    frozen: &Frozen,
) -> usize {
    let field = |offset: u32| thread + offset as u64;
    unsafe {
        (*copy).kind = kind::STACK_COPY;
        (*copy).tid = tid;
        (*copy).start_ns = request.start_ns;
        (*copy).anchor_sp = sp;
        (*copy).anchor_pc = read_user::<u64>(field(layout.anchor_pc)).unwrap_or(0);
        (*copy).anchor_fp = read_user::<u64>(field(layout.anchor_fp)).unwrap_or(0);
        (*copy).vthread = frozen.vthread;
        (*copy).vthread_id = frozen.vthread_id;
        (*copy).chunk = frozen.chunk;
        (*copy).chunk_sp = frozen.sp;
        // A length the verifier can bound: 1..=STACK_COPY_BYTES.
        let len = ((len as usize).wrapping_sub(1) & (STACK_COPY_BYTES - 1)) + 1;
        let read = aya_ebpf::helpers::generated::bpf_probe_read_user(
            data.cast(),
            len as u32,
            sp as *const core::ffi::c_void,
        );
        if read != 0 {
            count(counter::STACK_COPY_MISSES);
            (*copy).len = 0;
            return 0;
        }
        (*copy).len = len as u32;
        len
    }
}

/// Two words below a chunk frame's sp belong to it: its return address and saved fp.
const CHUNK_METADATA_WORDS: u32 = 2;
/// A chunk larger than this many words is garbage.
const MAX_CHUNK_WORDS: u32 = 1 << 24;

/// Copies the frames of the chunks `frozen` begins with: the tail from its noted `sp`, then
/// its parents from theirs, each down to its `bottom` and with the two words below its `sp`,
/// one read per chunk, `CHUNK_COPY_BYTES` and `MAX_COPIED_CHUNKS` at most (what is left is
/// said in `cut` and `rest`). The bytes go to `data`, one chunk after the other; returns how
/// many.
#[inline(always)]
unsafe fn copy_chunks(
    copy: *mut ChunkHead,
    data: *mut u8,
    layout: &JvmLayout,
    frozen: &Frozen,
) -> usize {
    unsafe {
        (*copy).count = 0;
        (*copy).cut = 0;
        (*copy).rest = 0;
    }
    let mut chunk = frozen.chunk;
    let mut off = 0u64;
    let mut cut = 0u64;
    for i in 0..MAX_COPIED_CHUNKS + 1 {
        if chunk == 0 || off >= CHUNK_COPY_BYTES as u64 {
            break;
        }
        let int = |offset: u32| read_user::<u32>(chunk + offset as u64).unwrap_or(0);
        let sp = if i == 0 {
            frozen.sp
        } else {
            int(layout.chunk_sp)
        };
        let bottom = int(layout.chunk_bottom);
        let parent = oop_field(layout, chunk, layout.chunk_parent);
        if bottom > MAX_CHUNK_WORDS {
            break;
        }
        // An empty chunk has no frames: on to its parent.
        if sp < bottom {
            let n = unsafe { (*copy).count } as usize;
            if n >= MAX_COPIED_CHUNKS {
                break;
            }
            let from = sp.saturating_sub(CHUNK_METADATA_WORDS);
            let whole = (bottom - from) as u64 * 8;
            let len = whole.min(CHUNK_COPY_BYTES as u64 - off);
            // Bounds the verifier can see: an offset below CHUNK_COPY_BYTES, a length of
            // 1..=CHUNK_COPY_BYTES, in a buffer of at least twice that.
            let at = off as usize & (CHUNK_COPY_BYTES - 1);
            let len = ((len as usize).wrapping_sub(1) & (CHUNK_COPY_BYTES - 1)) + 1;
            let src = chunk + layout.chunk_stack as u64 + from as u64 * 8;
            let read = unsafe {
                aya_ebpf::helpers::generated::bpf_probe_read_user(
                    data.add(at).cast(),
                    len as u32,
                    src as *const core::ffi::c_void,
                )
            };
            if read != 0 {
                count(counter::STACK_COPY_MISSES);
                break;
            }
            unsafe {
                (*copy).chunks[n & (MAX_COPIED_CHUNKS - 1)] = CopiedChunk {
                    addr: chunk,
                    sp,
                    bottom,
                    offset: off as u32,
                    len: len as u32,
                };
                (*copy).count = n as u32 + 1;
            }
            off += len as u64;
            cut = whole - len as u64;
            if cut != 0 {
                break;
            }
        }
        chunk = parent;
    }
    if cut != 0 || chunk != 0 {
        unsafe {
            (*copy).cut = cut as u32;
            (*copy).rest = if cut != 0 { 0 } else { chunk };
        }
        count(counter::CHUNK_COPIES_CUT);
    }
    off as usize
}

/// A mounted virtual thread and where its frozen frames begin (all zero: none).
struct Frozen {
    vthread: u64,
    vthread_id: u64,
    chunk: u64,
    sp: u32,
}

/// An object field of `obj` holding an oop, compressed or not (0: null or unreadable).
#[inline(always)]
fn oop_field(layout: &JvmLayout, obj: u64, offset: u32) -> u64 {
    let at = obj + offset as u64;
    if layout.oop_shift == u32::MAX {
        read_user::<u64>(at).unwrap_or(0)
    } else {
        match read_user::<u32>(at) {
            Some(0) | None => 0,
            Some(narrow) => layout.oop_base + ((narrow as u64) << (layout.oop_shift & 63)),
        }
    }
}

/// The mounted virtual thread of carrier `thread` (its oop and id) and where its frozen
/// frames begin: its continuation's tail `StackChunk` and that chunk's `sp`. Read as the thread
/// leaves its system call, before it runs again: only the thread itself changes its chunk
/// while mounted. All zero when nothing is mounted or the layout lacks the offsets.
#[inline(always)]
fn frozen_frames(layout: &JvmLayout, thread: u64, entry: u64) -> Frozen {
    let none = Frozen {
        vthread: 0,
        vthread_id: 0,
        chunk: 0,
        sp: 0,
    };
    if entry & CARRIER_BIT == 0 || layout.vthread_cont == 0 {
        return none;
    }
    let handle = |offset: u32| read_user::<u64>(thread + offset as u64).and_then(read_user::<u64>);
    let (Some(own), Some(vthread)) = (handle(layout.thread_obj), handle(layout.vthread)) else {
        return none;
    };
    if own == vthread || vthread == 0 {
        return none;
    }
    let id = read_user::<u64>(vthread + layout.java_tid as u64).unwrap_or(0);
    let cont = oop_field(layout, vthread, layout.vthread_cont);
    let chunk = if cont == 0 {
        0
    } else {
        oop_field(layout, cont, layout.cont_tail)
    };
    let sp = if chunk == 0 {
        0
    } else {
        read_user::<u32>(chunk + layout.chunk_sp as u64).unwrap_or(0)
    };
    Frozen {
        vthread,
        vthread_id: id,
        chunk,
        sp,
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

#[tracepoint]
pub fn sched_waking(ctx: TracePointContext) -> u32 {
    // Runs in the waker's context: the current thread is the one that made `pid` runnable.
    let Ok(pid) = (unsafe { ctx.read_at::<i32>(setting(&WAKEUP_PID_OFFSET) as usize) }) else {
        return 0;
    };
    let Some(pid) = own_id(pid as u32) else {
        return 0;
    };
    let (waker_tgid, waker_tid) = current_ids();
    if let Some(start) = STARTS.get_ptr_mut(pid) {
        unsafe { (*start).waker_tid = waker_tid };
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
    let now = unsafe { bpf_ktime_get_ns() };
    if now.saturating_sub(unsafe { (*call).start_ns }) < setting(&MIN_SYSCALL_NS) {
        return 0;
    }
    // Only a thread inside a futex call releases a futex waiter. Anything else is a timer
    // interrupt (the wait timed out: the current task is whatever it interrupted) or a signal.
    let ours = waker_tgid == setting(&TARGET_TGID)
        && waker_tgid != 0
        && IN_SYSCALL.get_ptr(waker_tid).is_some_and(|c| {
            matches!(
                unsafe { (*c).nr },
                sysno::FUTEX | sysno::FUTEX_WAKE | sysno::FUTEX_REQUEUE
            )
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
            request_waker_java_stack(waker_tid, now);
        }
    } else {
        copy_native_stack(waker_tid, now);
    }
    0
}

/// Waker stacks are captured at most once per this many ns on each CPU.
const CAPTURE_GAP_NS: u64 = 1_000_000;

/// Whether this CPU may capture a waker's stacks now (and if so, takes the turn).
#[inline(always)]
fn capture_budget(now: u64) -> bool {
    let Some(last) = LAST_WAKER_CAPTURE.get_ptr_mut(0) else {
        return false;
    };
    unsafe {
        if now.saturating_sub(*last) < CAPTURE_GAP_NS {
            return false;
        }
        *last = now;
    }
    true
}

/// Copies the current thread's user registers and the top of its user stack, so that user
/// space can unwind C code that keeps no frame pointers (with its DWARF unwind tables).
/// The thread is in the kernel on behalf of a system call: its user state is saved.
#[inline(always)]
fn copy_native_stack(tid: u32, key_ns: u64) {
    use aya_ebpf::helpers::generated::{bpf_get_current_task_btf, bpf_task_pt_regs};
    let regs = unsafe { bpf_task_pt_regs(bpf_get_current_task_btf()) } as *const pt_regs;
    if regs.is_null() {
        return;
    }
    let reg = |field: *const u64| unsafe { bpf_probe_read_kernel(field) }.unwrap_or(0);
    let (ip, sp, bp) = unsafe {
        (
            reg(core::ptr::addr_of!((*regs).rip)),
            reg(core::ptr::addr_of!((*regs).rsp)),
            reg(core::ptr::addr_of!((*regs).rbp)),
        )
    };
    if sp == 0 {
        return;
    }
    let Some(mut slot) = EVENTS.reserve::<NativeStackCopy>(0) else {
        count(counter::LOST_EVENTS);
        return;
    };
    let copy = slot.as_mut_ptr();
    unsafe {
        (*copy).kind = kind::NATIVE_STACK;
        (*copy).tid = tid;
        (*copy).key_ns = key_ns;
        (*copy).ip = ip;
        (*copy).sp = sp;
        (*copy).bp = bp;
        (*copy)._pad = 0;
        // The stack may end (unmapped) before the copy does: try shorter copies then.
        let dst = (*copy).data.as_mut_ptr().cast();
        let src = sp as *const core::ffi::c_void;
        let mut len = 0u32;
        for size in [
            NATIVE_COPY_BYTES,
            NATIVE_COPY_BYTES / 4,
            NATIVE_COPY_BYTES / 16,
        ] {
            if aya_ebpf::helpers::generated::bpf_probe_read_user(dst, size as u32, src) == 0 {
                len = size as u32;
                break;
            }
        }
        (*copy).len = len;
    }
    slot.submit(BPF_RB_NO_WAKEUP as u64);
}

/// A thread of the target renamed itself: short-lived threads are gone before user space
/// could read their name, so the kernel sends it.
#[tracepoint]
pub fn task_rename(ctx: TracePointContext) -> u32 {
    let Some(current) = target_tid() else {
        return 0;
    };
    let Ok(pid) = (unsafe { ctx.read_at::<i32>(setting(&RENAME_PID_OFFSET) as usize) }) else {
        return 0;
    };
    // Mostly a thread naming itself; in a PID namespace, another by the id it ran with.
    let pid = if pid as u32 == bpf_get_current_pid_tgid() as u32 {
        current
    } else {
        match own_id(pid as u32) {
            Some(pid) => pid,
            None => return 0,
        }
    };
    let Ok(comm) = (unsafe { ctx.read_at::<[u8; 16]>(setting(&RENAME_NEWCOMM_OFFSET) as usize) })
    else {
        return 0;
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
    0
}

/// A Java thread that releases a waiter from inside a system call (an unpark, a mutex
/// unlock) gets its stack copied as it leaves that call, like a blocked one.
#[inline(always)]
fn request_waker_java_stack(tid: u32, wake_ns: u64) {
    let Some(&entry) = (unsafe { JAVA_THREADS.get(&tid) }) else {
        return;
    };
    let layout: JvmLayout = setting(&JVM_LAYOUT);
    let sp = read_user::<u64>((entry & !THREAD_BITS) + layout.anchor_sp as u64).unwrap_or(0);
    if sp == 0 {
        return;
    }
    let request = StackRequest {
        start_ns: wake_ns,
        anchor_sp: sp,
    };
    if STACK_REQUESTS.insert(tid, request, 0).is_err() {
        count(counter::STACK_COPY_MISSES);
    }
}

/// Sends a thread's start or end; at its end, with its scheduler account (it is the current
/// task, and the scheduler has just brought the account up to date as it switched it out).
#[inline(always)]
fn thread_life(kind: u32, tid: u32, now: u64, account: bool) {
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
    if target_tid().is_none() {
        return 0;
    }
    let flags = unsafe { ctx.read_at::<u64>(setting(&NEWTASK_FLAGS_OFFSET) as usize) }.unwrap_or(0);
    if flags & CLONE_THREAD == 0 {
        return 0;
    }
    let Ok(pid) = (unsafe { ctx.read_at::<i32>(setting(&NEWTASK_PID_OFFSET) as usize) }) else {
        return 0;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    if setting(&PID_NS_DEV) != 0 {
        // Its id in the namespace is known once it runs (`seen_running`).
        if NS_BIRTHS.insert(pid as u32, now, 0).is_err() {
            count(counter::START_MAP_FULL);
        }
        return 0;
    }
    thread_life(kind::THREAD_START, pid as u32, now, false);
    0
}

#[tracepoint]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let (tgid, tid) = current_ids();
    if tgid != setting(&TARGET_TGID) || tgid == 0 {
        return 0;
    }
    // A thread ends inside exit(2), whose sys_exit never comes: drop what it left open.
    let _ = STARTS.remove(tid);
    let _ = AMENDMENTS.remove(tid);
    let _ = IN_SYSCALL.remove(tid);
    let _ = STACK_REQUESTS.remove(tid);
    let _ = CONTENTION_STARTS.remove(tid);
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
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
