//! Virtual threads' waits off their carriers: uprobes on HotSpot's continuation `freeze` (the
//! unmount; `freeze_preempt` too on JDK 24+) and `thaw` (the mount), found by user space
//! through libjvm's own pointers to the instances in use (`freeze_entry`, `thaw_entry`).
//!
//! A virtual thread that parks unmounted blocks no OS thread: the scheduler's tracepoints
//! never see it. At the unmount the thread's id, what it parks on and that object's owner are
//! kept by its id; at its next mount the wait's length is known, and a wait long enough is
//! sent with the frames it waited in, still frozen in its stack chunks as `thaw` begins. Only
//! the target's threads hit these probes (they are attached to its process alone).

use aya_ebpf::{
    bindings::BPF_RB_NO_WAKEUP,
    helpers::bpf_ktime_get_ns,
    macros::{map, uprobe},
    maps::{LruHashMap, PerCpuArray},
    programs::ProbeContext,
};
use profiler_ebpf::{
    CHUNK_COPY_BYTES, ChunkHead, JvmLayout, Unmount, VthreadWaitCopy, VthreadWaitHead, counter,
    kind, uncolor_oop, unmount,
};

use super::{
    ids::current_ids,
    java_stacks::{copy_chunks, frozen_of, oop_field},
    maps::{COUNTERS, EVENTS, count},
    memory::read_user,
    settings::{JVM_LAYOUT, MIN_VTHREAD_WAIT_NS, setting},
};

/// Unmounted virtual threads by id: the least recently unmounted go first when it is full (a
/// wait whose entry went is counted as unmatched at its mount). User space reads what is
/// left as the recording ends: the waits still under way.
#[map]
static UNMOUNTED: LruHashMap<u64, Unmount> = LruHashMap::with_max_entries(64 * 1024, 0);
/// Per CPU: where a wait's copy is made before its used part is sent.
#[map]
static VTHREAD_SCRATCH: PerCpuArray<VthreadWaitCopy> = PerCpuArray::with_max_entries(1, 0);
/// Per CPU: 1 while a program fills `VTHREAD_SCRATCH` (uprobe programs can be preempted, and
/// another thread's on the same CPU must not write over a copy under way).
#[map]
static VTHREAD_SCRATCH_BUSY: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
/// Per CPU: the copy budget's tokens (entry 0) and when they were last counted (entry 1).
#[map]
static VTHREAD_COPY_TOKENS: PerCpuArray<u64> = PerCpuArray::with_max_entries(2, 0);

/// Frames are copied for one wait per CPU per this much time on average (2,000 a second a
/// CPU), in bursts of up to `COPY_BURST` (a lock released wakes its waiters together); the
/// waits past it are sent with their times and blockers alone.
const COPY_EVERY_NS: u64 = 500_000;
const COPY_BURST: u64 = 64;

/// Whether this CPU's copy budget has a token left, taking it if so.
#[inline(always)]
fn copy_allowed(now: u64) -> bool {
    let (Some(tokens), Some(last)) = (
        VTHREAD_COPY_TOKENS.get_ptr_mut(0),
        VTHREAD_COPY_TOKENS.get_ptr_mut(1),
    ) else {
        return false;
    };
    unsafe {
        // The first call finds `last` 0: a full bucket.
        let earned = now.saturating_sub(*last) / COPY_EVERY_NS;
        if earned > 0 {
            *tokens = (*tokens + earned).min(COPY_BURST);
            *last = now;
        }
        if *tokens == 0 {
            return false;
        }
        *tokens -= 1;
        true
    }
}

/// `freeze(JavaThread* current, intptr_t* sp)`: the virtual thread mounted on `current`
/// unmounts (or tries to: a pinned one fails, and its entry is overwritten by its next try).
#[uprobe]
pub fn vthread_freeze(ctx: ProbeContext) -> u32 {
    unmounting(&ctx, unmount::PARK);
    0
}

/// `freeze_preempt(JavaThread* current, intptr_t* sp)` (JDK 24+): the VM unmounts the virtual
/// thread in a contended monitor enter or an `Object.wait`.
#[uprobe]
pub fn vthread_freeze_preempt(ctx: ProbeContext) -> u32 {
    unmounting(&ctx, unmount::MONITOR);
    0
}

/// `thaw(JavaThread* thread, int kind)`: kind 0 (`thaw_top`) mounts a virtual thread again;
/// the others return into frames still frozen, in a thread that never left.
#[uprobe]
pub fn vthread_thaw(ctx: ProbeContext) -> u32 {
    let thaw_kind: u64 = ctx.arg(1).unwrap_or(u64::MAX);
    if thaw_kind as u32 == 0 {
        mounting(&ctx);
    }
    0
}

/// The virtual thread current on carrier `thread` (a `JavaThread*`): its oop and id.
#[inline(always)]
fn current_vthread(layout: &JvmLayout, thread: u64) -> Option<(u64, u64)> {
    let oop = read_user::<u64>(thread + layout.vthread as u64)
        .and_then(read_user::<u64>)
        .map(|raw| uncolor_oop(raw, layout.colored_oops))
        .filter(|&o| o != 0)?;
    let id = read_user::<u64>(oop + layout.java_tid as u64).filter(|&id| id != 0)?;
    Some((oop, id))
}

/// The layout, and of a probe's `JavaThread*` (its first argument) the carrier's address and
/// the virtual thread current on it (oop, id).
#[inline(always)]
fn probed_vthread(ctx: &ProbeContext) -> Option<(JvmLayout, u64, u64, u64)> {
    let layout: JvmLayout = setting(&JVM_LAYOUT);
    let thread: u64 = ctx.arg(0).unwrap_or(0);
    if layout.vthread == 0 || thread == 0 {
        return None;
    }
    let (oop, id) = current_vthread(&layout, thread)?;
    Some((layout, thread, oop, id))
}

#[inline(always)]
fn unmounting(ctx: &ProbeContext, how: u32) {
    let Some((layout, thread, oop, id)) = probed_vthread(ctx) else {
        return;
    };
    count(counter::VTHREAD_UNMOUNTS);
    let blocker = if layout.park_blocker != 0 && how == unmount::PARK {
        oop_field(&layout, oop, layout.park_blocker)
    } else {
        0
    };
    // Read as an ownable synchronizer's owner whatever the blocker is: user space keeps it
    // only when the blocker's class is one.
    let owner = if blocker != 0 && layout.ownable_owner != 0 {
        oop_field(&layout, blocker, layout.ownable_owner)
    } else {
        0
    };
    let owner_id = if owner != 0 {
        read_user::<u64>(owner + layout.java_tid as u64).unwrap_or(0)
    } else {
        0
    };
    // A preempted thread enters a monitor (pending) or waits on one (`Object.wait`).
    let (monitor, how) = if how == unmount::MONITOR {
        match read_user::<u64>(thread + layout.pending_monitor as u64) {
            Some(0) | None => (
                read_user::<u64>(thread + layout.waiting_monitor as u64).unwrap_or(0),
                unmount::OBJECT_WAIT,
            ),
            Some(m) => (m, unmount::MONITOR),
        }
    } else {
        (0, how)
    };
    // A monitor's owner by its thread id (JDK 24+): none while unowned (0), inflated while
    // lightweight-locked by a thread that has not claimed it (1), or being deflated (2).
    let owner_id = if monitor != 0 && layout.monitor_owner != 0 {
        read_user::<u64>(monitor + layout.monitor_owner as u64)
            .filter(|&id| id > 2)
            .unwrap_or(0)
    } else {
        owner_id
    };
    let entry = Unmount {
        start_ns: unsafe { bpf_ktime_get_ns() },
        blocker,
        owner_id,
        monitor,
        oop,
        tid: current_ids().1,
        how,
    };
    // An LRU map makes room by itself: the insert fails only on a bad argument.
    let _ = UNMOUNTED.insert(&id, &entry, 0);
}

#[inline(always)]
fn mounting(ctx: &ProbeContext) {
    let Some((layout, _, oop, id)) = probed_vthread(ctx) else {
        return;
    };
    let Some(entry) = (unsafe { UNMOUNTED.get(&id) }).copied() else {
        count(counter::VTHREAD_UNMATCHED);
        return;
    };
    let _ = UNMOUNTED.remove(&id);
    let now = unsafe { bpf_ktime_get_ns() };
    let waited = now.saturating_sub(entry.start_ns);
    if waited < setting(&MIN_VTHREAD_WAIT_NS) {
        count(counter::VTHREAD_SHORT_WAITS);
        add_count(counter::VTHREAD_SHORT_WAIT_NS, waited);
        return;
    }
    let head = VthreadWaitHead {
        kind: kind::VTHREAD_WAIT,
        tid: current_ids().1,
        vthread_id: id,
        start_ns: entry.start_ns,
        end_ns: now,
        blocker: entry.blocker,
        owner_id: entry.owner_id,
        monitor: entry.monitor,
        unmount_tid: entry.tid,
        how: entry.how,
    };
    send_wait(&layout, &head, oop, now);
}

/// Sends a wait with its frames frozen in the chunks of `vthread` (its oop), the copy budget
/// and the CPU's scratch space allowing, else without.
#[inline(always)]
fn send_wait(layout: &JvmLayout, head: &VthreadWaitHead, vthread: u64, now: u64) {
    let Some(busy) = VTHREAD_SCRATCH_BUSY.get_ptr_mut(0) else {
        return;
    };
    let Some(copy) = VTHREAD_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    let budget = copy_allowed(now);
    // A preempted copy under way on this CPU keeps the scratch space. (The BPF target has no
    // compare-and-swap: a preemption between this read and write could still slip through,
    // and the walk of a copy written over would find garbage, which it rejects.)
    if unsafe { core::ptr::read_volatile(busy) } != 0 {
        count(counter::VTHREAD_STACKS_SKIPPED);
        send_head_alone(head);
        return;
    }
    unsafe {
        core::ptr::write_volatile(busy, 1);
        (*copy).head = *head;
        let chunk_head = core::ptr::addr_of_mut!((*copy).chunk);
        let mut used = 0;
        if budget {
            let frozen = frozen_of(layout, vthread);
            if frozen.chunk != 0 && layout.chunk_stack != 0 {
                used = copy_chunks(chunk_head, (*copy).data.as_mut_ptr(), layout, &frozen);
            } else {
                (*chunk_head) = ChunkHead::default();
            }
        } else {
            count(counter::VTHREAD_STACKS_SKIPPED);
            (*chunk_head) = ChunkHead::default();
        }
        let size = size_of::<VthreadWaitHead>() + size_of::<ChunkHead>() + used;
        // Never false; a bound the verifier can see.
        if used <= CHUNK_COPY_BYTES && size <= size_of::<VthreadWaitCopy>() {
            let bytes = core::slice::from_raw_parts(copy.cast::<u8>(), size);
            if EVENTS
                .output::<[u8]>(bytes, BPF_RB_NO_WAKEUP as u64)
                .is_err()
            {
                count(counter::LOST_EVENTS);
            }
        }
    }
    unsafe { core::ptr::write_volatile(busy, 0) };
}

/// A wait without frames: its head and an empty chunk head, from the program's stack.
#[inline(always)]
fn send_head_alone(head: &VthreadWaitHead) {
    #[repr(C)]
    struct Alone {
        head: VthreadWaitHead,
        chunk: ChunkHead,
    }
    let alone = Alone {
        head: *head,
        chunk: ChunkHead::default(),
    };
    if EVENTS
        .output::<Alone>(&alone, BPF_RB_NO_WAKEUP as u64)
        .is_err()
    {
        count(counter::LOST_EVENTS);
    }
}

/// Adds `n` to a per-CPU counter.
#[inline(always)]
fn add_count(index: u32, n: u64) {
    if let Some(slot) = COUNTERS.get_ptr_mut(index) {
        unsafe { *slot += n };
    }
}
