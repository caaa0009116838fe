//! On-CPU samples: a perf clock event on every CPU, kept when it interrupts the target.

use aya_ebpf::{
    bindings::{BPF_F_USER_STACK, BPF_RB_AVAIL_DATA, BPF_RB_NO_WAKEUP, BPF_RB_RING_SIZE},
    helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns},
    macros::perf_event,
    programs::PerfEventContext,
};
use profiler_ebpf::{OnCpuSample, counter, java_flags, kind};

use super::{
    ids::target_tid,
    java_stacks::{Scratch, copy_sampled_java_stack},
    java_state::java_state_with,
    maps::{EVENTS, SAMPLE_JAVA_WINDOW, SAMPLE_STACK_CHUNK_SCRATCH, SAMPLE_STACK_SCRATCH, count},
    memory::{current_user_regs, user_reg},
    settings::{MIN_JAVA_STACK_NS, setting},
    stacks::{NOT_CAPTURED, stack_id},
};

#[perf_event]
pub fn on_cpu(ctx: PerfEventContext) -> u32 {
    let Some(tid) = target_tid() else {
        return 0;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    count(counter::ON_CPU_SAMPLES);
    let java = java_state_with(tid, &SAMPLE_JAVA_WINDOW);
    // The interrupted registers: in the kernel (a system call, a fault) the kernel's stack
    // is there to walk; in user space there is none.
    let in_kernel = unsafe { (*ctx.ctx).regs.cs } & 3 == 0;
    let kernel_stack_id = if in_kernel {
        stack_id(&ctx, 0)
    } else {
        NOT_CAPTURED
    };
    let user_stack_id = stack_id(&ctx, BPF_F_USER_STACK as u64);
    match EVENTS.reserve::<OnCpuSample>(0) {
        Some(mut slot) => {
            let sample = slot.as_mut_ptr();
            unsafe {
                (*sample).kind = kind::ON_CPU;
                (*sample).tid = tid;
                (*sample).time_ns = now;
                (*sample).cpu = bpf_get_smp_processor_id();
                (*sample).kernel_stack_id = kernel_stack_id;
                (*sample).user_stack_id = user_stack_id;
                (*sample)._pad = 0;
                (*sample).java = java;
            }
            slot.submit(BPF_RB_NO_WAKEUP as u64);
        }
        None => {
            count(counter::LOST_EVENTS);
            return 0;
        }
    }
    // A sample's Java stack is a copy of up to 16 KiB: with the ring buffer a quarter full
    // (user space behind), the samples keep their native stacks and the events their room.
    let pressed =
        EVENTS.query(BPF_RB_AVAIL_DATA as u64) > EVENTS.query(BPF_RB_RING_SIZE as u64) / 4;
    if pressed {
        count(counter::SAMPLE_STACKS_SKIPPED);
    } else if java.flags & java_flags::KNOWN != 0 && setting(&MIN_JAVA_STACK_NS) != 0 {
        let scratch = Scratch {
            stack: &SAMPLE_STACK_SCRATCH,
            chunked: &SAMPLE_STACK_CHUNK_SCRATCH,
            kinds: [kind::SAMPLE_STACK_COPY, kind::SAMPLE_STACK_CHUNK_COPY],
        };
        copy_sampled_java_stack(tid, now, &java, user_registers(), &scratch);
    }
    0
}

/// The current thread's user registers (sp, pc, fp), saved as it entered the kernel (the
/// sample's interrupt, or a system call it is in); zeros when unreadable.
#[inline(always)]
fn user_registers() -> [u64; 3] {
    let Some(regs) = current_user_regs() else {
        return [0; 3];
    };
    unsafe {
        [
            user_reg(core::ptr::addr_of!((*regs).rsp)),
            user_reg(core::ptr::addr_of!((*regs).rip)),
            user_reg(core::ptr::addr_of!((*regs).rbp)),
        ]
    }
}
