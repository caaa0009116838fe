//! Native stacks: the kernel's walks, by stack id, and user stack copies for DWARF unwinding.

use aya_ebpf::{
    bindings::{BPF_RB_NO_WAKEUP, pt_regs},
    helpers::bpf_probe_read_kernel,
    programs::tracing::StackIdContext,
};
use profiler_ebpf::{
    KernelStackReuse, NATIVE_COPY_BYTES, NativeStackCopy, counter, kind, syscall_flags,
};

use super::maps::{EVENTS, IN_SYSCALL, KSTACKS, STACKS, count};

/// A stack id that says "not captured on purpose" (the kernel's own failures are -errno).
pub(crate) const NOT_CAPTURED: i32 = i32::MIN;

#[inline(always)]
pub(crate) fn stack_id(ctx: &impl StackIdContext, flags: u64) -> i32 {
    match ctx.get_stackid(&STACKS, flags) {
        Ok(id) => id as i32,
        Err(err) => {
            count(counter::STACK_MISSES);
            err
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
pub(crate) fn kernel_stack(ctx: &impl StackIdContext, tid: u32) -> i32 {
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

/// Copies the current thread's user registers and the top of its user stack, so that user
/// space can unwind C code that keeps no frame pointers (with its DWARF unwind tables).
/// The thread is in the kernel on behalf of a system call: its user state is saved.
#[inline(always)]
pub(crate) fn copy_native_stack(tid: u32, key_ns: u64) {
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
