//! Follows the JVM's thread list from a thread of its own, and tells the kernel programs of
//! every Java thread as soon as the JVM lists it.
//!
//! A carrier born during the recording blocks within milliseconds; until the kernel knows
//! it as a Java thread (a carrier), its waits carry no Java state and count as blocked. The
//! recorder's own loop can be busy for tens of milliseconds naming a new stack, so the list
//! is not read there: here it is looked at every few milliseconds (three words of the
//! target's memory when nothing changed), every millisecond while a thread just born is
//! awaited, and what changed goes to the recorder, which writes it.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use crate::{
    budget::{self, Cut},
    capture::{self, JavaThreadRegistry},
    jvm::hotspot::{Hotspot, JavaThread},
};

/// How often the list is looked at.
const PERIOD: Duration = Duration::from_millis(5);
/// How often while a thread just born is not listed yet.
const BIRTH_PERIOD: Duration = Duration::from_millis(1);
/// How long a new thread is looked for in the list (the JVM lists a Java thread before it
/// starts it; a thread not listed by then is not a Java thread).
const BIRTH_WATCH: Duration = Duration::from_secs(1);
/// Births told and not yet taken by the watcher, at most; and births awaited at once. More
/// are found at the next look all the same, a few ms later.
const MAX_BIRTHS: usize = 4096;

/// What changed in the JVM's thread list, read by `time_ns` (monotonic): the list as the
/// recorder had it, changed by this, is the list as the watcher read it last.
#[derive(Debug, Default)]
pub struct ListChange {
    pub time_ns: u64,
    /// Threads new to the list, or whose name, class or role changed.
    pub listed: Vec<JavaThread>,
    /// Threads gone from it.
    pub gone: Vec<u32>,
    /// Why the kernel could not be told of them all, if it could not.
    pub failed: Option<String>,
    /// Threads of the JVM's list the last read left out (see `Hotspot::threads_not_listed`).
    pub not_listed: u64,
}

/// The changes the watcher read and the recorder has not taken yet, folded into one: however
/// far behind the recorder falls, this holds at most the list itself and the threads the
/// recorder knows that have gone (not a change per look, as a queue would).
#[derive(Default)]
struct Mailbox {
    pending: Option<Pending>,
    /// The threads the recorder has been told of and not told gone.
    delivered: HashSet<u32>,
}

struct Pending {
    time_ns: u64,
    listed: HashMap<u32, JavaThread>,
    gone: HashSet<u32>,
    failed: Option<String>,
    not_listed: u64,
}

impl Mailbox {
    fn put(&mut self, change: ListChange) {
        let pending = self.pending.get_or_insert_with(|| Pending {
            time_ns: change.time_ns,
            listed: HashMap::new(),
            gone: HashSet::new(),
            failed: None,
            not_listed: 0,
        });
        pending.time_ns = change.time_ns;
        pending.not_listed = change.not_listed;
        if pending.failed.is_none() {
            pending.failed = change.failed;
        }
        for tid in change.gone {
            pending.listed.remove(&tid);
            // A thread born and gone between two takes never reaches the recorder.
            if self.delivered.contains(&tid) {
                pending.gone.insert(tid);
            }
        }
        for t in change.listed {
            // (A thread id the system gave again: the recorder replaces the old thread.)
            pending.gone.remove(&t.tid);
            pending.listed.insert(t.tid, t);
        }
    }

    fn take(&mut self) -> Option<ListChange> {
        let pending = self.pending.take()?;
        for tid in &pending.gone {
            self.delivered.remove(tid);
        }
        self.delivered.extend(pending.listed.keys());
        Some(ListChange {
            time_ns: pending.time_ns,
            listed: pending.listed.into_values().collect(),
            gone: pending.gone.into_iter().collect(),
            failed: pending.failed,
            not_listed: pending.not_listed,
        })
    }
}

/// The running watcher; stopped and joined by `stop` (or when dropped).
pub struct ThreadWatch {
    stop: Arc<AtomicBool>,
    births: Option<SyncSender<u32>>,
    changes: Arc<Mutex<Mailbox>>,
    thread: Option<JoinHandle<()>>,
}

impl ThreadWatch {
    /// Starts following the JVM's thread list with `reader` (a reader of the JVM of its own),
    /// from `threads`, the Java threads the kernel programs were given at start (and the
    /// recorder wrote).
    pub fn start(
        reader: Hotspot,
        registry: JavaThreadRegistry,
        threads: Vec<JavaThread>,
    ) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (births, birth_rx) = mpsc::sync_channel(MAX_BIRTHS);
        let mailbox = Mailbox {
            pending: None,
            delivered: threads.iter().map(|t| t.tid).collect(),
        };
        let changes = Arc::new(Mutex::new(mailbox));
        let watcher = Watcher {
            hotspot: reader,
            registry,
            version: None,
            threads,
            births: HashMap::new(),
        };
        let flag = Arc::clone(&stop);
        let mailbox = Arc::clone(&changes);
        let thread = std::thread::Builder::new()
            .name("pinprof-threads".into())
            .spawn(move || watcher.run(&flag, &birth_rx, &mailbox))
            .context("starting the thread that follows the JVM's threads")?;
        Ok(Self {
            stop,
            births: Some(births),
            changes,
            thread: Some(thread),
        })
    }

    /// A thread of the target was born: it is looked for in the list at once, and often.
    pub fn born(&self, tid: u32) {
        if let Some(births) = &self.births
            && let Err(TrySendError::Full(_)) = births.try_send(tid)
        {
            budget::count(Cut::BirthUnsignaled);
        }
    }

    /// What changed since the last call (None: nothing).
    pub fn changes(&self) -> Option<ListChange> {
        // (A watcher that panicked holding the lock left a mailbox still whole.)
        let mut mailbox = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        mailbox.take()
    }

    /// Stops the watcher; the changes it read last are still to be taken (`changes`).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Closing the channel wakes the watcher at once.
        self.births = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ThreadWatch {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Watcher {
    hotspot: Hotspot,
    registry: JavaThreadRegistry,
    /// The list's version last read (None: not read yet).
    version: Option<u64>,
    threads: Vec<JavaThread>,
    /// Threads born lately and not listed yet, and since when they are looked for.
    births: HashMap<u32, Instant>,
}

impl Watcher {
    fn run(mut self, stop: &AtomicBool, births: &Receiver<u32>, changes: &Mutex<Mailbox>) {
        while !stop.load(Ordering::Relaxed) {
            self.births.retain(|_, since| since.elapsed() < BIRTH_WATCH);
            let period = if self.births.is_empty() {
                PERIOD
            } else {
                BIRTH_PERIOD
            };
            match births.recv_timeout(period) {
                Ok(tid) => {
                    let now = Instant::now();
                    for tid in std::iter::once(tid).chain(births.try_iter()) {
                        if self.births.len() < MAX_BIRTHS {
                            self.births.insert(tid, now);
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if let Some(change) = self.look() {
                changes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .put(change);
            }
        }
    }

    /// Reads the list if it changed (or a thread just born is awaited: the list may hold
    /// it before its thread id), tells the kernel of the change, and says what changed.
    fn look(&mut self) -> Option<ListChange> {
        // A failed read is most likely the JVM exiting; the recorder sees the exit.
        let version = self.hotspot.thread_list_version().ok()?;
        if self.version == Some(version) && self.births.is_empty() {
            return None;
        }
        let threads = self.hotspot.java_threads().ok()?;
        let time_ns = capture::monotonic_ns();
        self.version = Some(version);
        // Births the JVM lists are no longer awaited (new or not to this list).
        if !self.births.is_empty() {
            for t in &threads {
                self.births.remove(&t.tid);
            }
        }
        if threads == self.threads {
            return None;
        }
        // What changed, not the whole list: a list of thousands of long names changing a
        // thousand times a second is tens of MB a second copied and written.
        let before: HashMap<u32, &JavaThread> = self.threads.iter().map(|t| (t.tid, t)).collect();
        let listed: Vec<JavaThread> = threads
            .iter()
            .filter(|t| before.get(&t.tid) != Some(t))
            .cloned()
            .collect();
        let now: HashSet<u32> = threads.iter().map(|t| t.tid).collect();
        let gone: Vec<u32> = before
            .keys()
            .filter(|tid| !now.contains(tid))
            .copied()
            .collect();
        let new: HashSet<(u32, u64)> = threads
            .iter()
            .filter(|t| before.get(&t.tid).is_none_or(|b| b.addr != t.addr))
            .map(|t| (t.tid, t.addr))
            .collect();
        drop(before);
        if listed.is_empty() && gone.is_empty() {
            // The same threads, in another order.
            self.threads = threads;
            return None;
        }
        let addrs: Vec<_> = threads.iter().map(super::known_thread).collect();
        let failed = self.registry.set(&addrs).err().map(|e| format!("{e:#}"));
        if failed.is_some() {
            self.version = None; // read again next time
        }
        // Threads new to the list may be in a wait they began before the kernel knew them:
        // it gets the state they are in (see `JavaThreadRegistry::amend_open_wait`). Read
        // after the kernel was told, so that no wait begins unknown and unamended: how many
        // times each had run, then what it is doing.
        for t in threads.iter().filter(|t| new.contains(&(t.tid, t.addr))) {
            let Some(runs) = crate::target::thread_runs(self.registry.process(), t.tid) else {
                continue;
            };
            if let Some(java) = self.hotspot.java_state(t) {
                self.registry.amend_open_wait(t.tid, runs, java);
            }
        }
        self.threads = threads;
        Some(ListChange {
            time_ns,
            listed,
            gone,
            failed,
            not_listed: self.hotspot.threads_not_listed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tid: u32, name: &str) -> JavaThread {
        JavaThread {
            tid,
            addr: u64::from(tid) << 12,
            name: Some(name.into()),
            carrier: false,
            class: None,
        }
    }

    fn change(listed: Vec<JavaThread>, gone: Vec<u32>) -> ListChange {
        ListChange {
            listed,
            gone,
            ..Default::default()
        }
    }

    #[test]
    fn changes_the_recorder_is_behind_on_fold_into_one() {
        let mut mailbox = Mailbox {
            pending: None,
            delivered: [1, 2].into(),
        };
        // A thread born and gone unseen, one renamed twice, one of the recorder's gone.
        for i in 0..10_000 {
            mailbox.put(change(vec![thread(100 + i, "churn")], vec![]));
            mailbox.put(change(vec![], vec![100 + i]));
        }
        mailbox.put(change(vec![thread(1, "first")], vec![]));
        mailbox.put(change(vec![thread(1, "second")], vec![2]));
        let pending = mailbox.pending.as_ref().unwrap();
        assert!(pending.listed.len() == 1 && pending.gone.len() == 1);
        let taken = mailbox.take().unwrap();
        assert_eq!(taken.listed, [thread(1, "second")]);
        assert_eq!(taken.gone, [2]);
        assert!(mailbox.take().is_none());
        // Gone and born again under the same id: the recorder gets the new thread.
        mailbox.put(change(vec![], vec![1]));
        mailbox.put(change(vec![thread(1, "again")], vec![]));
        let taken = mailbox.take().unwrap();
        assert_eq!(taken.listed, [thread(1, "again")]);
        assert!(taken.gone.is_empty());
    }
}
