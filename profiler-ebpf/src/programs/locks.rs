//! Kernel lock contention of the target's threads, summed per lock address and per thread.

use aya_ebpf::{helpers::bpf_ktime_get_ns, macros::tracepoint, programs::TracePointContext};
use profiler_ebpf::counter;

use super::{
    ids::target_tid,
    maps::{CONTENTION_STARTS, KERNEL_LOCK_THREADS, KERNEL_LOCKS, add_wait, count},
    settings::{LOCK_ADDR_OFFSET, setting},
};

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
