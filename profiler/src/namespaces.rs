//! Containers: PID namespaces and cgroups, as seen from where pinprof runs.
//!
//! A process in a container numbers its threads as its own PID namespace does: HotSpot's
//! `OSThread::_thread_id` (its `gettid()`) is such a number, while /proc, as pinprof reads
//! it, names the same thread by pinprof's numbering. `/proc/PID/task/TID/status` says both
//! (`NSpid:`, from /proc's namespace down to the thread's own), which is how they are
//! matched here. The container a target runs in (its PID namespace, cgroup and CPU limit, read
//! by `cgroup`) is described for the header of every view.

use std::{collections::HashMap, io, os::unix::fs::MetadataExt as _};

use crate::{events::ContainerInfo, process::Process};

/// Inode of the initial PID namespace (`PROC_PID_INIT_INO`): the host's.
pub const INITIAL_PID_NS_INO: u64 = 0xEFFF_FFFC;

/// Threads of one process: more are not mapped (HotSpot's own cap is lower).
const MAX_THREADS: usize = 1 << 16;

/// A PID namespace, as `stat` names it: the device of nsfs and the inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidNs {
    pub dev: u64,
    pub ino: u64,
}

impl PidNs {
    /// pinprof's own PID namespace.
    pub fn own() -> io::Result<Self> {
        // A magic link the kernel sets: following it is how a namespace is named.
        Self::from(&std::fs::metadata("/proc/self/ns/pid")?)
    }

    /// The PID namespace of `process`.
    pub fn of(process: &Process) -> io::Result<Self> {
        Self::from(&process.metadata("ns/pid")?)
    }

    fn from(meta: &std::fs::Metadata) -> io::Result<Self> {
        Ok(Self {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    pub fn is_initial(&self) -> bool {
        self.ino == INITIAL_PID_NS_INO
    }
}

/// Where capture counts ids: the host's PID namespace (None), or pinprof's own (its device
/// and inode), which must then be the target's too. The kernel programs see every task by its
/// host ids; in a namespace of its own pinprof knows the target and its threads only by that
/// namespace's ids, so the programs are told to work in those (`bpf_get_ns_current_pid_tgid`).
/// A target in another namespace (a nested one) is refused: its ids there are not /proc's.
pub fn capture_namespace(process: &Process) -> anyhow::Result<Option<(u64, u64)>> {
    let pid = process.pid();
    let own = PidNs::own().map_err(|e| {
        anyhow::anyhow!("cannot read pinprof's own PID namespace (/proc/self/ns/pid): {e}")
    })?;
    if own.is_initial() {
        return Ok(None);
    }
    let target = PidNs::of(process)
        .map_err(|e| anyhow::anyhow!("cannot read the PID namespace of process {pid}: {e}"))?;
    if target != own {
        anyhow::bail!(
            "pinprof runs in a PID namespace of its own (inode {}) and process {pid} is in \
             another one (inode {}): run pinprof in the target's PID namespace (an ephemeral \
             container with --target, see the README's Kubernetes section) or in the host's \
             (a node debug container, or hostPID: true) with the JVM's host pid",
            own.ino,
            target.ino
        );
    }
    Ok(Some((own.dev, own.ino)))
}

/// The ids in `NSpid:` of a `status` file: /proc's numbering first, the task's own last.
fn parse_nspid(status: &str) -> Option<Vec<u32>> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    let ids: Option<Vec<u32>> = line.split_whitespace().map(|v| v.parse().ok()).collect();
    ids.filter(|ids| !ids.is_empty() && ids.len() <= 64)
}

/// A task's ids from /proc's namespace down to its own (`NSpid:`).
pub fn nspids(process: &Process, tid: u32) -> Option<Vec<u32>> {
    let status = process.read_to_string(&format!("task/{tid}/status")).ok()?;
    parse_nspid(&status)
}

/// Translates the thread ids a target gives itself (HotSpot's) into the ones /proc and the
/// kernel programs use. The identity when the target numbers its threads as /proc does.
#[derive(Debug)]
pub struct ThreadIds {
    process: Process,
    /// Own id -> /proc's, None when they are the same.
    map: Option<HashMap<u32, u32>>,
    /// Whether the map was read again in this round (see `new_round`).
    refreshed: bool,
}

impl ThreadIds {
    pub fn new(process: &Process) -> Self {
        // Same namespace (or unknown: no translation is possible then anyway).
        let same = match (PidNs::own(), PidNs::of(process)) {
            (Ok(own), Ok(target)) => own == target,
            _ => true,
        };
        let mut ids = Self {
            process: process.clone(),
            map: (!same).then(HashMap::new),
            refreshed: false,
        };
        ids.refresh();
        ids
    }

    /// Whether the target numbers its threads differently from /proc.
    pub fn translates(&self) -> bool {
        self.map.is_some()
    }

    /// Starts a round of lookups (one read of the JVM's thread list): the threads are read
    /// again from /proc at most once per round, at the first id not known.
    pub fn new_round(&mut self) {
        self.refreshed = false;
    }

    /// /proc's id of the thread the target calls `own`; None when no thread of the target
    /// has that id now (it ended, or is not one of its threads).
    pub fn to_proc(&mut self, own: u32) -> Option<u32> {
        let Some(map) = &self.map else {
            return Some(own);
        };
        if let Some(&tid) = map.get(&own) {
            return Some(tid);
        }
        if self.refreshed {
            return None;
        }
        // A thread born since the last read.
        self.refresh();
        self.refreshed = true;
        self.map.as_ref()?.get(&own).copied()
    }

    fn refresh(&mut self) {
        let Some(map) = &mut self.map else {
            return;
        };
        map.clear();
        let Ok(tasks) = self.process.read_dir("task") else {
            return;
        };
        for name in tasks.into_iter().take(MAX_THREADS) {
            let Some(tid) = name.to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            // The first id is /proc's (the directory's name), the last the task's own.
            if let Some(ids) = nspids(&self.process, tid)
                && ids[0] == tid
            {
                map.insert(*ids.last().unwrap_or(&tid), tid);
            }
        }
    }
}

/// The container `pid` runs in, when it runs in a PID namespace other than the host's:
/// None for a process of the host's (its cgroup alone does not make a container).
pub fn container(process: &Process) -> Option<ContainerInfo> {
    let ns = PidNs::of(process).ok()?;
    if ns.is_initial() {
        return None;
    }
    let status = process.read_to_string("status").ok()?;
    let ns_pid = *parse_nspid(&status)?.last()?;
    let cgroup = crate::cgroup::v2_path_of(process);
    let cpu_max = cgroup
        .as_deref()
        .and_then(|path| crate::cgroup::v2_cpu_max(path).ok());
    Some(ContainerInfo {
        pid_ns_inode: ns.ino,
        ns_pid,
        cgroup,
        cpu_max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nspid_lines() {
        let status = "Name:\tjava\nTgid:\t4242\nNSpid:\t4242\t7\nUid:\t0\n";
        assert_eq!(parse_nspid(status), Some(vec![4242, 7]));
        assert_eq!(parse_nspid("NSpid:\t12\n"), Some(vec![12]));
        assert_eq!(parse_nspid("NSpid:\t12\tx\n"), None);
        assert_eq!(parse_nspid("NSpid:\n"), None);
        assert_eq!(parse_nspid("Name:\tx\n"), None);
    }

    #[test]
    fn own_threads_need_no_translation() {
        let me = Process::myself().unwrap();
        let mut ids = ThreadIds::new(&me);
        assert!(!ids.translates());
        assert_eq!(ids.to_proc(12345), Some(12345));
        assert!(!PidNs::own().unwrap().is_initial() || container(&me).is_none());
    }
}
