//! Which of the target's threads are Java threads, as the kernel programs see it: their
//! `JavaThread` addresses, and the Java state of waits they began before the kernel knew them.
//! Kept apart from `Capture` so that the JVM's thread list can be followed from a thread of
//! its own (a new carrier's first waits must not wait for the events before them to be named).

use std::{
    os::fd::AsFd as _,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::{Context as _, Result, anyhow};
use aya::maps::{HashMap, Map, MapData};
use profiler_ebpf::{JavaState, OffCpuStart, WaitAmendment, java_flags};

/// What a Java thread is to the kernel programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadRole {
    /// A carrier of the virtual-thread scheduler.
    Carrier,
    /// One of the JDK's own service threads (a timer, a poller, a cleaner): its waits are
    /// mostly its waiting for work, so the programs take no native stacks of them.
    Service,
    Other,
}

/// A Java thread as the kernel programs are told of it.
#[derive(Clone, Copy, Debug)]
pub struct KnownThread {
    pub tid: u32,
    /// Its `JavaThread`.
    pub addr: u64,
    pub role: ThreadRole,
}

impl KnownThread {
    /// Its value in the programs' `JAVA_THREADS` map.
    fn entry(&self) -> u64 {
        self.addr
            | match self.role {
                ThreadRole::Carrier => profiler_ebpf::CARRIER_BIT,
                ThreadRole::Service => profiler_ebpf::SERVICE_BIT,
                ThreadRole::Other => 0,
            }
    }
}

/// Handles on the programs' maps that say which threads are Java threads.
pub struct JavaThreadRegistry {
    java_threads: HashMap<MapData, u32, u64>,
    starts: HashMap<MapData, u32, OffCpuStart>,
    amendments: HashMap<MapData, u32, WaitAmendment>,
    process: crate::process::Process,
    /// What this handle last knew `JAVA_THREADS` to hold (None: read it from the kernel).
    written: Option<std::collections::HashMap<u32, u64>>,
    /// Amendments the kernel's map had no room for, shared by every handle.
    lost: Arc<AtomicU64>,
}

impl JavaThreadRegistry {
    /// Two handles on the programs' maps `JAVA_THREADS`, `STARTS` and `AMENDMENTS`: one for
    /// the capture, one for whichever thread follows the JVM's thread list.
    pub(super) fn pair(maps: [Map; 3], process: crate::process::Process) -> Result<(Self, Self)> {
        let lost = Arc::<AtomicU64>::default();
        let open = |[java_threads, starts, amendments]: [Map; 3]| -> Result<Self> {
            Ok(Self {
                java_threads: HashMap::try_from(java_threads)?,
                starts: HashMap::try_from(starts)?,
                amendments: HashMap::try_from(amendments)?,
                process: process.clone(),
                written: None,
                lost: Arc::clone(&lost),
            })
        };
        let [a, b, c] = &maps;
        let second = [second_handle(a)?, second_handle(b)?, second_handle(c)?];
        Ok((open(maps)?, open(second)?))
    }

    /// Tells the kernel programs which threads are Java threads, where their `JavaThread` is
    /// and what they are: `threads` is the whole current set; others are removed.
    pub fn set(&mut self, threads: &[KnownThread]) -> Result<()> {
        let keep: std::collections::HashMap<u32, u64> =
            threads.iter().map(|t| (t.tid, t.entry())).collect();
        // What the map holds: read from the kernel once per handle (the other handle may have
        // written it), then kept here, since walking a BPF hash map costs a system call a key.
        let mut now = match self.written.take() {
            Some(written) => written,
            None => self.java_threads.iter().flatten().collect(),
        };
        // Only what changed is written: the list changes at every thread's start and end.
        let gone: Vec<u32> = now
            .keys()
            .filter(|tid| !keep.contains_key(tid))
            .copied()
            .collect();
        for tid in gone {
            let _ = self.java_threads.remove(&tid);
            now.remove(&tid);
        }
        let mut result = Ok(());
        for (&tid, &entry) in &keep {
            if now.get(&tid) == Some(&entry) {
                continue;
            }
            match self.java_threads.insert(tid, entry, 0) {
                Ok(()) => {
                    now.insert(tid, entry);
                }
                Err(e) => {
                    result = Err(e).with_context(|| format!("cannot register Java thread {tid}"));
                    break;
                }
            }
        }
        self.written = Some(now);
        result
    }

    /// A thread that became known as a Java thread while off CPU blocked before the kernel
    /// knew it (a thread born during the recording is registered as soon as the JVM lists
    /// it, which can be after its first wait began): its wait gets the Java state read now
    /// (`java`; it cannot change while the thread sleeps), and an idle carrier's system call
    /// its idle mark, as if the kernel had read them as it blocked. `runs` is how many times
    /// the thread had been on a CPU when `java` was read: if it ran since, the wait open now
    /// is another one, and nothing is amended.
    ///
    /// The kernel applies the amendment when the wait ends, and only if the wait that ends
    /// began when this one did: the thread may run and block again at any moment, and a
    /// change written from here into its open wait could land on the next one.
    pub fn amend_open_wait(&mut self, tid: u32, runs: u64, java: JavaState) {
        let Ok(start) = self.starts.get(&tid, 0) else {
            return;
        };
        if start.start_ns == profiler_ebpf::WAIT_ENDED {
            return; // not in a wait
        }
        // Read after the wait: if the thread has not run since `java` was read, the wait
        // read is the one `java` was read in.
        if start.java.flags & java_flags::KNOWN != 0
            || crate::target::thread_runs(&self.process, tid) != Some(runs)
        {
            return;
        }
        let amendment = WaitAmendment {
            start_ns: start.start_ns,
            java,
        };
        if self.amendments.insert(tid, amendment, 0).is_err() {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `start`, the wait `tid` is in now, with the Java state `amend_open_wait` gave it, if
    /// it did: as the kernel will give it when the wait ends.
    pub fn amended(&self, tid: u32, mut start: OffCpuStart) -> OffCpuStart {
        if start.java.flags & java_flags::KNOWN == 0
            && let Ok(amendment) = self.amendments.get(&tid, 0)
            && amendment.start_ns == start.start_ns
        {
            start.java = amendment.java;
        }
        start
    }

    /// The target.
    pub fn process(&self) -> &crate::process::Process {
        &self.process
    }

    /// Amendments lost to a full map, from every handle.
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }
}

/// A second file descriptor for a hash map of the programs (both see the same map).
pub(super) fn second_handle(map: &Map) -> Result<Map> {
    let Map::HashMap(data) = map else {
        return Err(anyhow!("not a hash map"));
    };
    let fd = data.fd().as_fd().try_clone_to_owned()?;
    Ok(Map::HashMap(MapData::from_fd(fd)?))
}
