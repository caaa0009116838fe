//! Native stacks: the kernel's walks, by stack id, and user stack copies for DWARF unwinding.

use aya_ebpf::{
    bindings::{BPF_F_USER_STACK, BPF_RB_NO_WAKEUP, pt_regs},
    helpers::bpf_probe_read_kernel,
    programs::tracing::StackIdContext,
};
use profiler_ebpf::{
    NATIVE_COPY_BYTES, NativeStackCopy, StackReuse, counter, futex_op, kind, syscall_flags,
};

use super::{
    maps::{EVENTS, IN_SYSCALL, KSTACKS, STACKS, count},
    memory::{current_user_regs, user_reg},
};

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

/// How many waits of a thread reuse its last walked stacks before they are walked again (so a
/// stack that did change is seen soon).
const STACK_REUSES: u32 = 64;

/// The kernel and user stacks of `tid`, going off CPU now, blocked in a call from the Java
/// frame `anchor` (sp, pc; 0: none). Walking them is most of a switch's cost, and a thread
/// that blocks again in the same system call on the same object (a futex wait: any futex; a
/// read: the same descriptor) blocks down the same kernel path, and from the same Java frame
/// through the same native frames: there they are walked once in a while and reused in
/// between.
#[inline(always)]
pub(crate) fn native_stacks(ctx: &impl StackIdContext, tid: u32, anchor: [u64; 2]) -> (i32, i32) {
    let user_flags = BPF_F_USER_STACK as u64;
    let Some((nr, object)) = blocking_call(tid) else {
        return (stack_id(ctx, 0), stack_id(ctx, user_flags));
    };
    if let Some(last) = KSTACKS.get_ptr_mut(tid) {
        let last = unsafe { &mut *last };
        if last.nr == nr && last.object == object && last.kernel_uses < STACK_REUSES {
            last.kernel_uses += 1;
            let user_reused = anchor[0] != 0
                && last.anchor_sp == anchor[0]
                && last.anchor_pc == anchor[1]
                && last.user_uses < STACK_REUSES;
            if user_reused {
                last.user_uses += 1;
                return (last.kernel_id, last.user_id);
            }
            let user_id = stack_id(ctx, user_flags);
            if user_id >= 0 {
                last.user_id = user_id;
                last.user_uses = 0;
                last.anchor_sp = anchor[0];
                last.anchor_pc = anchor[1];
            }
            return (last.kernel_id, user_id);
        }
    }
    let kernel_id = stack_id(ctx, 0);
    let user_id = stack_id(ctx, user_flags);
    if kernel_id >= 0 {
        let reuse = StackReuse {
            kernel_id,
            kernel_uses: 0,
            nr,
            user_id,
            object,
            // A user stack not walked is never reused.
            anchor_sp: if user_id >= 0 { anchor[0] } else { 0 },
            anchor_pc: anchor[1],
            user_uses: 0,
            _pad: 0,
        };
        let _ = KSTACKS.insert(tid, reuse, 0);
    }
    (kernel_id, user_id)
}

/// The system call the current thread `tid` blocks in, and the object it waits on (0 for any
/// futex wait): the call traced at its entry, or else the one its saved registers say (when
/// calls are read only as threads block, the entry is made after the stack is taken).
#[inline(always)]
fn blocking_call(tid: u32) -> Option<(u32, u64)> {
    let (nr, arg0, arg1) = match IN_SYSCALL.get_ptr(tid) {
        Some(call) => unsafe {
            let call = &*call;
            if call.flags & syscall_flags::FUTEX_WAIT != 0 {
                return Some((call.nr, 0));
            }
            (call.nr as i64, call.args[0], call.args[1])
        },
        None => {
            let regs = current_user_regs()?;
            unsafe {
                (
                    user_reg(core::ptr::addr_of!((*regs).orig_rax)) as i64,
                    user_reg(core::ptr::addr_of!((*regs).rdi)),
                    user_reg(core::ptr::addr_of!((*regs).rsi)),
                )
            }
        }
    };
    // Blocked outside a system call (a page fault): walked every time.
    let nr = u32::try_from(nr).ok()?;
    Some((
        nr,
        if futex_op::call_waits(nr, arg1) {
            0
        } else {
            arg0
        },
    ))
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
