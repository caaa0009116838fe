//! Kernel lock contention of the target's threads, summed per lock address and per thread.

//!
//! Raw tracepoints (`contention_begin(lock, flags)`, `contention_end(lock, ret)`): a
//! tracepoint program's verdict would decide for every other tool on the host whether it sees
//! the event, and these fire at every contended kernel lock of the machine.

use aya_ebpf::{helpers::bpf_ktime_get_ns, macros::raw_tracepoint, programs::RawTracePointContext};
use profiler_ebpf::counter;

use super::{
    ids::target_tid,
    maps::{CONTENTION_STARTS, KERNEL_LOCK_THREADS, KERNEL_LOCKS, add_wait, count},
};

/// Kernel lock contention of the target's threads: begins.
#[raw_tracepoint(tracepoint = "contention_begin")]
pub fn contention_begin(_ctx: RawTracePointContext) -> i32 {
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
#[raw_tracepoint(tracepoint = "contention_end")]
pub fn contention_end(ctx: RawTracePointContext) -> i32 {
    let Some(tid) = target_tid() else {
        return 0;
    };
    let Some(start) = CONTENTION_STARTS.get_ptr(tid) else {
        return 0;
    };
    let start = unsafe { *start };
    let _ = CONTENTION_STARTS.remove(tid);
    let lock: u64 = ctx.arg(0);
    let now = unsafe { bpf_ktime_get_ns() };
    add_wait!(KERNEL_LOCKS, &lock, now.saturating_sub(start));
    add_wait!(KERNEL_LOCK_THREADS, &tid, now.saturating_sub(start));
    0
}
