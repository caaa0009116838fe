//! Work on the target's inputs (its memory map, its perf map) away from the thread that
//! empties the ring buffer: the target can make them as large as it likes, and a drain that
//! waits on them loses events. A worker thread owns the reading and parsing and publishes
//! each result as an immutable snapshot; the drain takes the latest without ever waiting (a
//! pointer swapped under a lock held for nothing else) and asks for a fresh one with an
//! atomic flag.
//!
//! Asks are paced by what the work costs: after a run that took `c` of the worker's CPU, the
//! next waits `max(min, factor * c)`, so the worker spends at most `1 / factor` of a core
//! however often it is asked and however large the target makes its inputs.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::Thread,
    time::{Duration, Instant},
};

/// How often a worker may run.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// Never sooner than this after the last run.
    pub min: Duration,
    /// Nor sooner than this many times the CPU the last run took.
    pub factor: u32,
}

impl Pace {
    /// The wait before the next run, after one that took `cost` of CPU.
    pub fn after(&self, cost: Duration) -> Duration {
        self.min.max(cost.saturating_mul(self.factor))
    }
}

struct Shared<T> {
    latest: Mutex<Arc<T>>,
    /// Bumped after each publication: readers lock only when it moved.
    version: AtomicU64,
    /// The drain wants a fresh snapshot.
    wanted: AtomicBool,
    stop: AtomicBool,
    /// Runs made (for tests and figures).
    runs: AtomicU64,
}

/// The drain's side of a worker: the latest snapshot, and a way to ask for another. Dropping
/// it stops the worker (not waited for: its work is bounded, and the thread ends on its own).
pub struct Worker<T> {
    shared: Arc<Shared<T>>,
    thread: Thread,
    seen: u64,
    current: Arc<T>,
}

impl<T: Send + Sync + 'static> Worker<T> {
    /// Starts a worker that publishes `first` now, then runs `work` when asked, at `pace`;
    /// `work` gives a new snapshot, or None when nothing changed.
    pub fn spawn(
        name: &str,
        first: Arc<T>,
        pace: Pace,
        mut work: impl FnMut() -> Option<Arc<T>> + Send + 'static,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            latest: Mutex::new(Arc::clone(&first)),
            version: AtomicU64::new(0),
            wanted: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            runs: AtomicU64::new(0),
        });
        let theirs = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut next = Instant::now();
                loop {
                    if theirs.stop.load(Ordering::Acquire) {
                        return;
                    }
                    let now = Instant::now();
                    if now < next {
                        std::thread::park_timeout(next - now);
                        continue;
                    }
                    if !theirs.wanted.swap(false, Ordering::AcqRel) {
                        // Woken by an ask (or a stop); the timeout only re-checks.
                        std::thread::park_timeout(Duration::from_secs(1));
                        continue;
                    }
                    let started = thread_cpu();
                    let made = work();
                    theirs.runs.fetch_add(1, Ordering::Relaxed);
                    if let Some(made) = made {
                        *theirs.latest.lock().unwrap_or_else(|e| e.into_inner()) = made;
                        theirs.version.fetch_add(1, Ordering::Release);
                    }
                    next = Instant::now() + pace.after(thread_cpu().saturating_sub(started));
                }
            })?;
        Ok(Self {
            thread: handle.thread().clone(),
            shared,
            seen: 0,
            current: first,
        })
    }

    /// Asks for a fresh snapshot; never waits. Asks before the worker gets to them are one.
    pub fn ask(&self) {
        if !self.shared.wanted.load(Ordering::Relaxed)
            && !self.shared.wanted.swap(true, Ordering::AcqRel)
        {
            self.thread.unpark();
        }
    }

    /// The latest snapshot published.
    pub fn latest(&mut self) -> &Arc<T> {
        let version = self.shared.version.load(Ordering::Acquire);
        if version != self.seen {
            self.seen = version;
            self.current =
                Arc::clone(&self.shared.latest.lock().unwrap_or_else(|e| e.into_inner()));
        }
        &self.current
    }

    /// How many times the worker has run its work.
    pub fn runs(&self) -> u64 {
        self.shared.runs.load(Ordering::Relaxed)
    }
}

impl<T> Drop for Worker<T> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// The CPU this thread has used.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a timespec to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thousands of asks make a handful of runs: the work is paced by its own cost.
    #[test]
    fn asks_are_paced_by_what_the_work_costs() {
        let pace = Pace {
            min: Duration::from_millis(50),
            factor: 10,
        };
        let mut worker = Worker::spawn("test-worker", Arc::new(0u64), pace, {
            let mut n = 0u64;
            move || {
                // 20 ms of CPU a run: the next waits 200 ms.
                let until = thread_cpu() + Duration::from_millis(20);
                while thread_cpu() < until {
                    std::hint::spin_loop();
                }
                n += 1;
                Some(Arc::new(n))
            }
        })
        .unwrap();
        assert_eq!(**worker.latest(), 0);
        let started = Instant::now();
        let mut asked = 0;
        while started.elapsed() < Duration::from_secs(1) {
            worker.ask();
            asked += 1;
            // The drain's side never waits: taking the latest is a load and, rarely, a lock.
            let _ = worker.latest();
            std::thread::sleep(Duration::from_micros(100));
        }
        let runs = worker.runs();
        // 1 s / (20 ms + 200 ms): at most 5 runs, whatever the asks.
        assert!(asked > 1000, "{asked}");
        assert!((2..=6).contains(&runs), "{runs} runs for {asked} asks");
        std::thread::sleep(Duration::from_millis(300));
        assert!(**worker.latest() >= runs);
    }

    /// Unasked, a worker does nothing; one ask is one run.
    #[test]
    fn a_worker_runs_only_when_asked() {
        let pace = Pace {
            min: Duration::from_millis(1),
            factor: 1,
        };
        let worker = Worker::spawn("test-worker", Arc::new(()), pace, || None).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(worker.runs(), 0);
        worker.ask();
        let deadline = Instant::now() + Duration::from_secs(5);
        while worker.runs() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(worker.runs(), 1);
    }
}
