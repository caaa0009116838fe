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
        Arc,
        atomic::{AtomicBool, Ordering},
        mpsc::{self, Receiver, RecvTimeoutError, Sender},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use crate::{
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

/// The JVM's Java threads as read at `time_ns` (monotonic), after a change.
pub struct ListUpdate {
    pub time_ns: u64,
    pub threads: Vec<JavaThread>,
    /// Why the kernel could not be told of them all, if it could not.
    pub failed: Option<String>,
}

/// The running watcher; stopped and joined by `stop` (or when dropped).
pub struct ThreadWatch {
    stop: Arc<AtomicBool>,
    births: Option<Sender<u32>>,
    updates: Receiver<ListUpdate>,
    thread: Option<JoinHandle<()>>,
}

impl ThreadWatch {
    /// Starts following the JVM's thread list with `reader` (a reader of the JVM of its own),
    /// from `threads`, the Java threads the kernel programs were given at start.
    pub fn start(
        reader: Hotspot,
        registry: JavaThreadRegistry,
        threads: Vec<JavaThread>,
    ) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (births, birth_rx) = mpsc::channel();
        let (update_tx, updates) = mpsc::channel();
        let watcher = Watcher {
            hotspot: reader,
            registry,
            version: None,
            threads,
            births: HashMap::new(),
        };
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("pinprof-threads".into())
            .spawn(move || watcher.run(&flag, &birth_rx, &update_tx))
            .context("starting the thread that follows the JVM's threads")?;
        Ok(Self {
            stop,
            births: Some(births),
            updates,
            thread: Some(thread),
        })
    }

    /// A thread of the target was born: it is looked for in the list at once, and often.
    pub fn born(&self, tid: u32) {
        if let Some(births) = &self.births {
            let _ = births.send(tid);
        }
    }

    /// The changes read since the last call, oldest first.
    pub fn updates(&self) -> Vec<ListUpdate> {
        self.updates.try_iter().collect()
    }

    /// Stops the watcher; the changes it read last are still to be taken (`updates`).
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
    fn run(mut self, stop: &AtomicBool, births: &Receiver<u32>, updates: &Sender<ListUpdate>) {
        while !stop.load(Ordering::Relaxed) {
            self.births.retain(|_, since| since.elapsed() < BIRTH_WATCH);
            let period = if self.births.is_empty() {
                PERIOD
            } else {
                BIRTH_PERIOD
            };
            match births.recv_timeout(period) {
                Ok(tid) => {
                    self.births.insert(tid, Instant::now());
                    self.births
                        .extend(births.try_iter().map(|tid| (tid, Instant::now())));
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if let Some(update) = self.look()
                && updates.send(update).is_err()
            {
                break;
            }
        }
    }

    /// Reads the list if it changed (or a thread just born is awaited: the list may hold
    /// it before its thread id), tells the kernel of the change, and says what it read.
    fn look(&mut self) -> Option<ListUpdate> {
        // A failed read is most likely the JVM exiting; the recorder sees the exit.
        let version = self.hotspot.thread_list_version().ok()?;
        if self.version == Some(version) && self.births.is_empty() {
            return None;
        }
        let threads = self.hotspot.java_threads().ok()?;
        let time_ns = capture::monotonic_ns();
        self.version = Some(version);
        // Births the JVM lists are no longer awaited (new or not to this list).
        self.births
            .retain(|tid, _| !threads.iter().any(|t| t.tid == *tid));
        if threads == self.threads {
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
        let known: HashSet<(u32, u64)> = self.threads.iter().map(|t| (t.tid, t.addr)).collect();
        for t in threads.iter().filter(|t| !known.contains(&(t.tid, t.addr))) {
            let Some(runs) = crate::target::thread_runs(self.registry.process(), t.tid) else {
                continue;
            };
            if let Some(java) = self.hotspot.java_state(t) {
                self.registry.amend_open_wait(t.tid, runs, java);
            }
        }
        self.threads = threads.clone();
        Some(ListUpdate {
            time_ns,
            threads,
            failed,
        })
    }
}
