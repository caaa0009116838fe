//! Reads of the current task's user memory, where the programs find the target's own (JVM) data.

use aya_ebpf::helpers::bpf_probe_read_user;

#[inline(always)]
pub(crate) fn read_user<T>(addr: u64) -> Option<T> {
    if addr == 0 {
        return None;
    }
    unsafe { bpf_probe_read_user(addr as *const T) }.ok()
}
