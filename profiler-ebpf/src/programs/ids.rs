//! Which task is the target's, and its id: the host's, or in a PID namespace that namespace's.

use aya_ebpf::helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns};
use profiler_ebpf::{counter, kind};

use super::{
    maps::{HOST_TGID, NS_BIRTHS, NS_TIDS, STARTS, count},
    scheduler::end_wait,
    settings::{PID_NS_DEV, PID_NS_INO, TARGET_TGID, TASK_TGID_OFFSET, setting},
    threads::thread_life,
};

/// The target's process id as the host numbers it (`task_struct.tgid`), once known; 0 before.
#[inline(always)]
fn host_tgid() -> u32 {
    if setting(&PID_NS_DEV) == 0 {
        return setting(&TARGET_TGID);
    }
    HOST_TGID.get(0).copied().unwrap_or(0)
}

/// Whether the current task is surely not one of the target's: the test every program makes
/// first, for every task of the host, with one helper call and no map.
#[inline(always)]
pub(crate) fn current_surely_foreign() -> bool {
    let host = host_tgid();
    host != 0 && (bpf_get_current_pid_tgid() >> 32) as u32 != host
}

/// Whether `task` (a `task_struct` a tracepoint hands over) is surely not one of the
/// target's, from its host process id; false when that cannot be told this way.
#[inline(always)]
pub(crate) fn surely_foreign(task: u64) -> bool {
    let offset = setting(&TASK_TGID_OFFSET);
    let host = host_tgid();
    if offset == 0 || host == 0 || task == 0 {
        return false;
    }
    match unsafe { aya_ebpf::helpers::bpf_probe_read_kernel((task + offset as u64) as *const i32) }
    {
        Ok(tgid) => tgid as u32 != host,
        Err(_) => false,
    }
}

/// The current task's (process id, thread id), as pinprof numbers them: the host's, or in a
/// PID namespace that namespace's ((0, 0) for a task outside it).
#[inline(always)]
pub(crate) fn current_ids() -> (u32, u32) {
    let dev = setting(&PID_NS_DEV);
    if dev == 0 {
        let pid_tgid = bpf_get_current_pid_tgid();
        return ((pid_tgid >> 32) as u32, pid_tgid as u32);
    }
    let mut ids = aya_ebpf::bindings::bpf_pidns_info { pid: 0, tgid: 0 };
    let size = core::mem::size_of::<aya_ebpf::bindings::bpf_pidns_info>() as u32;
    let found = unsafe {
        aya_ebpf::helpers::generated::bpf_get_ns_current_pid_tgid(
            dev,
            setting(&PID_NS_INO),
            &mut ids,
            size,
        )
    };
    if found != 0 {
        return (0, 0);
    }
    (ids.tgid, ids.pid)
}

/// The id pinprof knows a task by, from the host id a tracepoint gives for a task that is not
/// the current one: the same, or in a PID namespace the one it was seen running with (None:
/// not seen running yet, so not one of the target's threads as far as the programs know).
#[inline(always)]
pub(crate) fn own_id(host: u32) -> Option<u32> {
    if setting(&PID_NS_DEV) == 0 {
        return Some(host);
    }
    unsafe { NS_TIDS.get(&host) }.copied()
}

/// In a PID namespace, the target's current thread `tid` is running: its host id is noted
/// (the scheduler's tracepoints name other tasks by it). The first time, what could not be
/// said before is said: its birth, and the end of the wait it was in as capture began (its
/// switch back in came under a host id not known then).
#[inline(always)]
pub(crate) fn seen_running(tid: u32, now: u64) {
    if setting(&PID_NS_DEV) == 0 {
        return;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let host = pid_tgid as u32;
    if unsafe { NS_TIDS.get(&host) }.is_some_and(|&known| known == tid) {
        return;
    }
    if let Some(tgid) = HOST_TGID.get_ptr_mut(0) {
        unsafe { *tgid = (pid_tgid >> 32) as u32 };
    }
    if NS_TIDS.insert(host, tid, 0).is_err() {
        count(counter::START_MAP_FULL);
    }
    if let Some(&born) = unsafe { NS_BIRTHS.get(&host) } {
        let _ = NS_BIRTHS.remove(host);
        thread_life(kind::THREAD_START, tid, born, false);
    }
    if STARTS
        .get_ptr(tid)
        .is_some_and(|s| unsafe { (*s).start_ns } == 0)
    {
        end_wait(tid, now);
    }
}

/// In a PID namespace, the current task's host id is forgotten as it ends (ids are reused).
#[inline(always)]
pub(crate) fn forget_ns_tid() {
    if setting(&PID_NS_DEV) != 0 {
        let _ = NS_TIDS.remove(bpf_get_current_pid_tgid() as u32);
    }
}

/// The current thread's id if it belongs to the target.
#[inline(always)]
pub(crate) fn target_tid() -> Option<u32> {
    if current_surely_foreign() {
        return None;
    }
    let (tgid, tid) = current_ids();
    if tgid != setting(&TARGET_TGID) || tgid == 0 {
        return None;
    }
    seen_running(tid, unsafe { bpf_ktime_get_ns() });
    Some(tid)
}
