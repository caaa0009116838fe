//! Reads of the current task's user memory, where the programs find the target's own (JVM)
//! data, and of its user registers, saved as it entered the kernel.

use aya_ebpf::{
    bindings::pt_regs,
    helpers::{bpf_probe_read_kernel, bpf_probe_read_user},
};

#[inline(always)]
pub(crate) fn read_user<T>(addr: u64) -> Option<T> {
    if addr == 0 {
        return None;
    }
    unsafe { bpf_probe_read_user(addr as *const T) }.ok()
}

/// The current task's user registers, saved as it entered the kernel (a system call it is in,
/// or the interrupt that stopped it in user space); None when unreadable.
#[inline(always)]
pub(crate) fn current_user_regs() -> Option<*const pt_regs> {
    use aya_ebpf::helpers::generated::{bpf_get_current_task_btf, bpf_task_pt_regs};
    let regs = unsafe { bpf_task_pt_regs(bpf_get_current_task_btf()) } as *const pt_regs;
    (!regs.is_null()).then_some(regs)
}

/// One of those registers (0: unreadable).
#[inline(always)]
pub(crate) fn user_reg(field: *const u64) -> u64 {
    unsafe { bpf_probe_read_kernel(field) }.unwrap_or(0)
}
