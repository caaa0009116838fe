//! What a Java thread is doing as it blocks: its state, monitors, and mounted virtual thread.

use aya_ebpf::maps::PerCpuArray;
use profiler_ebpf::{
    CARRIER_BIT, JAVA_WINDOW_BYTES, JavaState, JvmLayout, SERVICE_BIT, THREAD_BITS, java_flags,
    uncolor_oop,
};

use super::{
    java_stacks::oop_field,
    maps::{JAVA_THREADS, JAVA_WINDOW},
    memory::read_user,
    settings::{JVM_LAYOUT, setting},
};

/// Reads what the Java thread `tid` (the current task) is doing as it blocks: its state, the
/// monitors it enters or waits on, and whether a virtual thread is mounted on it. Runs in the
/// thread's own context, so its memory is the current address space.
#[inline(always)]
pub(crate) fn java_state(tid: u32) -> JavaState {
    java_state_with(tid, &JAVA_WINDOW)
}

/// `java_state`, reading the `JavaThread` into `scratch` (a program that can interrupt
/// others has one of its own).
#[inline(always)]
pub(crate) fn java_state_with(
    tid: u32,
    scratch: &PerCpuArray<[u8; JAVA_WINDOW_BYTES]>,
) -> JavaState {
    let mut state = JavaState::default();
    let Some(&entry) = (unsafe { JAVA_THREADS.get(&tid) }) else {
        return state;
    };
    let thread = entry & !THREAD_BITS;
    let layout: JvmLayout = setting(&JVM_LAYOUT);
    // One read of the span of `JavaThread` that holds every field below, instead of one read
    // per field: this runs at every switch-out of a Java thread.
    let window = scratch.get_ptr_mut(0).filter(|buf| {
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
    // OopHandles, pointers to slots that hold the object's address (colored, with ZGC:
    // compared once uncolored, as two slots may hold one object in two colors).
    let handle = |offset: u32| {
        word(offset)
            .and_then(read_user::<u64>)
            .map(|raw| uncolor_oop(raw, layout.colored_oops))
    };
    let own = handle(layout.thread_obj);
    let current = handle(layout.vthread);
    // What the current thread parks on: `LockSupport.park(blocker)` sets it on the virtual
    // thread when one is mounted, and clears it once the park returns.
    if layout.park_blocker != 0
        && let Some(current) = current.filter(|&c| c != 0)
    {
        state.park_blocker = oop_field(&layout, current, layout.park_blocker);
    }
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
