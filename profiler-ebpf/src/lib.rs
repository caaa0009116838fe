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
}

/// Indexes into the per-CPU `COUNTERS` array.
pub mod counter {
    /// A record could not be reserved in the ring buffer: the event is lost.
    pub const LOST_EVENTS: u32 = 0;
    /// `bpf_get_stackid` failed (map full or hash collision): the event carries no stack.
    pub const STACK_MISSES: u32 = 1;
    /// The per-thread start map was full: the off-CPU interval could not be timed.
    pub const START_MAP_FULL: u32 = 2;
    /// Off-CPU intervals shorter than the threshold, summed in `SHORT_OFF_CPU` instead of sent.
    pub const SHORT_INTERVALS: u32 = 3;
    pub const COUNT: u32 = 4;
}

/// `prev_state` values of `sched_switch` (see `TASK_REPORT` in the kernel).
pub mod task_state {
    pub const RUNNING: u64 = 0;
    pub const INTERRUPTIBLE: u64 = 0x1;
    pub const UNINTERRUPTIBLE: u64 = 0x2;
}

/// Largest stack kept by the `STACKS` map (the kernel's `PERF_MAX_STACK_DEPTH`).
pub const MAX_STACK_DEPTH: usize = 127;

/// Where a thread went off CPU, kept per thread id until it runs again.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OffCpuStart {
    pub start_ns: u64,
    pub prev_state: u64,
    pub kernel_stack_id: i32,
    pub user_stack_id: i32,
    /// Thread that woke it (`sched_wakeup` in the waker's context); 0 until then.
    pub waker_tid: u32,
    pub _pad: u32,
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
}

/// The target's last thread exited (`sched_process_exit` with `group_dead`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ExitEvent {
    pub kind: u32,
    pub tid: u32,
    pub time_ns: u64,
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
    unsafe impl aya::Pod for super::ShortOffCpu {}
}

#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;

    // User space reads these records as raw bytes (`aya::Pod`): padding would leave bytes
    // uninitialised in the kernel and break that. Each size is the sum of its fields.
    #[test]
    fn records_have_no_padding() {
        assert_eq!(size_of::<OffCpuStart>(), 8 + 8 + 4 + 4 + 4 + 4);
        assert_eq!(size_of::<OffCpuEvent>(), 4 + 4 + 8 + 8 + 8 + 4 + 4 + 4 + 4);
        assert_eq!(size_of::<ExitEvent>(), 4 + 4 + 8);
        assert_eq!(size_of::<ShortOffCpu>(), 8 + 8 + 8);
    }
}
