//! Findings: the few things a user must know about a recording, ranked, each with its evidence
//! and one line of advice that is right for the target's JDK. They are read off the other
//! analyses (pinned sites, starvation episodes, lock rows), never computed apart from them.

use serde::Serialize;

use super::causes::{WaitKind, WaitingOn};
use super::classify::{Operation, Reason};
use super::deadlock::Deadlock;
use super::gridlock::Gridlock;
use super::jdk;
use super::kinds::{FrameClass, ThreadRole};
use super::locks::LockRow;
use super::monopoly::Monopolized;
use super::pinning::PinnedSite;
use super::scheduler::ThreadScheduling;
use super::stacks::StackLabels;
use super::starvation::Cause;
use super::starvation::Episode;
use super::threads::ThreadRow;
use super::throttling::Throttling;
use crate::model::total;
use crate::units::secs;

/// What a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum FindingKind {
    /// Threads each waiting for a lock the next one holds, to the end.
    Deadlock,
    /// Every carrier pinned waiting for a lock whose owner, a virtual thread, is not mounted
    /// and so cannot let go.
    Gridlock,
    /// Every carrier pinned or blocked at once: no virtual thread could run.
    Starvation,
    /// A place where virtual threads pin their carriers.
    Pinning,
    /// A static initializer that other threads waited for, pinned.
    ClassInit,
    /// A lock whose waits add up.
    LockContention,
    /// Virtual threads that computed for long without yielding, holding their carriers.
    Monopolized,
    /// Carriers runnable but not run: the scheduler or a CPU quota kept them waiting.
    CpuStarved,
}

/// How much it matters; findings are listed most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Critical => "critical",
            Self::Warning => "warning",
            Self::Info => "info",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub severity: Severity,
    /// What happened, with its figures.
    pub summary: String,
    /// What to change.
    pub advice: String,
    /// Since the start of the window (ns), where the finding is one moment or span.
    pub start_ns: Option<u64>,
    /// The time it cost: carrier time pinned, the threads' time waiting, or starving.
    pub duration_ns: u64,
    /// Thread ids involved (carriers for pinning).
    pub threads: Vec<u32>,
    /// The evidence's stack, innermost first.
    pub frames: Vec<String>,
}

/// Thresholds a finding must pass to be worth saying.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    /// A pinned site's carrier time, as a share of the carriers' time...
    pub pinned_share: f64,
    /// ...or at least this much (ns).
    pub pinned_ns: u64,
    /// Starvation in all, as a share of the window...
    pub starvation_share: f64,
    /// ...or one episode at least this long (ns).
    pub starvation_episode_ns: u64,
    /// A lock's waits, as a share of the window (thread-seconds over seconds).
    pub lock_share: f64,
    /// At most this many findings of each kind.
    pub per_kind: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            pinned_share: 0.01,
            pinned_ns: 50_000_000,
            starvation_share: 0.01,
            starvation_episode_ns: 100_000_000,
            lock_share: 0.10,
            per_kind: 3,
        }
    }
}

/// What the findings are read from.
pub struct Evidence<'a> {
    /// The window's start (monotonic ns, as episodes are) and length.
    pub start_ns: u64,
    pub window_ns: u64,
    pub jdk_major: Option<u32>,
    pub threads: &'a [ThreadRow],
    pub sites: &'a [PinnedSite],
    pub starvation: &'a [Episode],
    pub locks: &'a [LockRow],
    pub gridlocks: &'a [Gridlock],
    /// What each starvation episode's carriers waited on (see `causes`).
    pub waiting_on: &'a [Option<WaitingOn>],
    pub deadlocks: &'a [Deadlock],
    /// Each deadlock's first thread's stack.
    pub deadlock_stacks: Vec<StackLabels>,
    /// Virtual threads that held their carrier, and the longest one's stack.
    pub monopolized: &'a [Monopolized],
    pub longest_monopoly_stack: StackLabels,
    /// Each thread's waits for a CPU, and the cgroup's throttling over the window.
    pub scheduling: &'a [ThreadScheduling],
    pub throttling: Option<&'a Throttling>,
}

/// The findings, most severe first, then most costly.
pub fn findings(e: &Evidence, t: &Thresholds) -> Vec<Finding> {
    // Saturating: a hostile recording's figures may be anything.
    let carrier_ns = total(
        e.threads
            .iter()
            .filter(|r| r.role == ThreadRole::Carrier)
            .flat_map(|r| {
                [
                    r.running_ns,
                    r.idle_ns,
                    r.blocked_ns,
                    r.pinned_ns,
                    r.preempted_ns,
                ]
            }),
    );
    let mut out = Vec::new();
    out.extend(deadlocks(e));
    out.extend(gridlocks(e));
    out.extend(starvation(e, t));
    out.extend(pinning(e, t, carrier_ns));
    out.extend(locks(e, t));
    out.extend(monopolized(e, t));
    out.extend(cpu_starved(e, t));
    // The stalls (a deadlock, a gridlock, then starvation, their symptom) before the other
    // causes at the same severity, then most costly.
    let rank = |f: &Finding| {
        let stall = matches!(
            f.kind,
            FindingKind::Deadlock | FindingKind::Gridlock | FindingKind::Starvation
        );
        (
            f.severity,
            !stall,
            stall.then_some(f.kind),
            std::cmp::Reverse(f.duration_ns),
        )
    };
    out.sort_by_key(rank);
    out
}

/// The frame to act on: the one holding a monitor, else the innermost application frame.
pub fn culprit(stack: &StackLabels) -> Option<String> {
    let java = |i: usize| {
        !matches!(
            stack.frame_kinds.get(i),
            Some(FrameClass::Kernel | FrameClass::Native | FrameClass::Jit)
        )
    };
    stack
        .monitor_frames
        .first()
        .copied()
        .or_else(|| {
            (0..stack.frames.len()).find(|&i| {
                let f = &stack.frames[i];
                java(i) && !jdk::is_marker(f) && !jdk::is_jdk_method(f) && f.contains('.')
            })
        })
        .map(|i| stack.display(i))
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn deadlocks(e: &Evidence) -> Vec<Finding> {
    let name = |tid: u32| {
        e.threads
            .iter()
            .find(|t| t.tid == tid)
            .map_or(format!("thread {tid}"), |t| format!("{} ({tid})", t.name))
    };
    e.deadlocks
        .iter()
        .zip(
            e.deadlock_stacks
                .iter()
                .chain(std::iter::repeat(&StackLabels::default())),
        )
        .map(|(d, stack)| {
            let links: Vec<String> = d
                .threads
                .iter()
                .map(|s| {
                    let holder = match (s.vthread, s.owner.tid) {
                        // Unmounted, both: the cycle says the rest.
                        (Some(_), None) => format!("virtual thread #{}", s.owner.java_id),
                        (_, Some(tid)) => name(tid),
                        (None, None) => super::locks::owner_label(&s.owner),
                    };
                    let who = match s.vthread {
                        Some(id) => format!("virtual thread #{id} (unmounted)"),
                        None => name(s.tid),
                    };
                    format!("{who} waits for {} held by {holder}", s.waits_for)
                })
                .collect();
            let since = d
                .threads
                .iter()
                .map(|s| s.since_ns)
                .max()
                .unwrap_or(e.start_ns);
            let stuck = e
                .start_ns
                .saturating_add(e.window_ns)
                .saturating_sub(since.max(e.start_ns));
            Finding {
                kind: FindingKind::Deadlock,
                severity: Severity::Critical,
                summary: format!(
                    "deadlock: {}; stuck for {} to the end",
                    links.join("; "),
                    secs(stuck)
                ),
                advice: "this never ends on its own: take these locks in one order everywhere, \
                         or with a timeout (tryLock) and back off"
                    .into(),
                start_ns: Some(since.saturating_sub(e.start_ns)),
                duration_ns: stuck,
                threads: d.threads.iter().map(|s| s.tid).collect(),
                frames: stack.frames.clone(),
            }
        })
        .collect()
}

fn gridlocks(e: &Evidence) -> Vec<Finding> {
    e.gridlocks
        .iter()
        .map(|g| {
            let owners: Vec<String> = g.owners.iter().map(|v| format!("#{v}")).collect();
            let place = culprit(&g.stack)
                .map(|c| format!(" at `{c}`"))
                .unwrap_or_default();
            let before_491 = e.jdk_major.is_some_and(|m| m < 24);
            Finding {
                kind: FindingKind::Gridlock,
                severity: Severity::Critical,
                summary: format!(
                    "gridlock: every carrier was pinned waiting for a {} (@{:#x}){place}, owned by \
                     virtual thread {}, which was not mounted and needed a carrier to let go: \
                     {} times, {} in all, the first at {}",
                    g.class,
                    g.object,
                    owners.join(", "),
                    g.episodes,
                    secs(g.total_ns),
                    secs(g.first_start_ns.saturating_sub(e.start_ns)),
                ),
                advice: if before_491 {
                    "on JDK 21-23 a virtual thread that waits for a lock inside synchronized \
                     pins its carrier: take the lock outside the synchronized block (or use a \
                     ReentrantLock for both), or move to JDK 24+ (JEP 491)"
                        .into()
                } else {
                    "the waiters pinned their carriers for another reason (a native frame, a \
                     JDK critical section): wait for the lock outside that code"
                        .into()
                },
                start_ns: Some(g.first_start_ns.saturating_sub(e.start_ns)),
                duration_ns: g.total_ns,
                threads: g.carriers.iter().copied().collect(),
                frames: g.stack.frames.clone(),
            }
        })
        .collect()
}

fn starvation(e: &Evidence, t: &Thresholds) -> Option<Finding> {
    let span = |s: &Episode| s.end_ns.saturating_sub(s.start_ns);
    // Episodes of pinned or blocked carriers (the others have findings of their cause).
    let pinned = |s: &&Episode| matches!(s.cause, Cause::Pinned | Cause::Blocked);
    let episodes: Vec<&Episode> = e.starvation.iter().filter(pinned).collect();
    let waiting_on: Vec<Option<WaitingOn>> = e
        .starvation
        .iter()
        .zip(e.waiting_on.iter().chain(std::iter::repeat(&None)))
        .filter(|(s, _)| pinned(s))
        .map(|(_, w)| w.clone())
        .collect();
    let starved = total(episodes.iter().map(|s| span(s)));
    let longest = episodes.iter().max_by_key(|s| span(s))?;
    let longest_ns = span(longest);
    let at = longest.start_ns.saturating_sub(e.start_ns);
    let portion = share(starved, e.window_ns);
    if portion < t.starvation_share && longest_ns < t.starvation_episode_ns {
        return None;
    }
    let severity = if portion >= 0.10 || longest_ns >= 1_000_000_000 {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let first = e.sites.first();
    let place = first
        .and_then(|s| culprit(&s.stack))
        .map(|c| format!("; the most pinned place is `{c}`"))
        .unwrap_or_default();
    let cause = match mostly_waiting_on(&waiting_on) {
        Some(w) => format!("; the carriers waited mostly {}{place}", waiting_label(&w)),
        None => place,
    };
    let waited = episodes
        .iter()
        .filter_map(|s| s.queued_max)
        .max()
        .map(|n| format!(", while up to {n} virtual threads waited to run"))
        .unwrap_or_default();
    Some(Finding {
        kind: FindingKind::Starvation,
        severity,
        summary: format!(
            "every carrier was pinned or blocked for {} of {} ({:.0}%) in {} episodes, the \
             longest {} at {}: no other virtual thread could run then{waited}{cause}",
            secs(starved),
            secs(e.window_ns),
            portion * 100.0,
            episodes.len(),
            secs(longest_ns),
            secs(at),
        ),
        advice: "remove the pinning below, most costly first; a larger \
                 jdk.virtualThreadScheduler.parallelism only adds carriers to pin"
            .into(),
        start_ns: Some(at),
        duration_ns: starved,
        threads: Vec::new(),
        frames: first.map(|s| s.stack.frames.clone()).unwrap_or_default(),
    })
}

/// Starvation episodes of one cause: their total, how many, and the most tasks waiting.
fn episodes_of(e: &Evidence, cause: Cause) -> (u64, usize, Option<u64>) {
    let of: Vec<&Episode> = e.starvation.iter().filter(|s| s.cause == cause).collect();
    (
        total(of.iter().map(|s| s.end_ns.saturating_sub(s.start_ns))),
        of.len(),
        of.iter().filter_map(|s| s.queued_max).max(),
    )
}

/// Virtual threads that held their carriers, running: worth saying when they left no carrier
/// free, or add up to a share of the window.
fn monopolized(e: &Evidence, t: &Thresholds) -> Option<Finding> {
    let longest = e.monopolized.iter().max_by_key(|m| m.duration_ns())?;
    let held = total(e.monopolized.iter().map(|m| m.duration_ns()));
    let (starved, episodes, queued) = episodes_of(e, Cause::Monopolized);
    if starved == 0 && share(held, e.window_ns) < t.starvation_share {
        return None;
    }
    let severity = if share(starved, e.window_ns) >= 0.10 {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let place = culprit(&e.longest_monopoly_stack)
        .or_else(|| e.longest_monopoly_stack.frames.first().cloned())
        .map(|c| format!(" in `{c}`"))
        .unwrap_or_default();
    let starving = if starved > 0 {
        let waited = queued
            .map(|n| format!(", while up to {n} virtual threads waited to run"))
            .unwrap_or_default();
        format!(
            "; every carrier was held so for {} in {episodes} episodes{waited}",
            secs(starved)
        )
    } else {
        String::new()
    };
    let mut carriers: Vec<u32> = e.monopolized.iter().map(|m| m.carrier).collect();
    carriers.sort_unstable();
    carriers.dedup();
    Some(Finding {
        kind: FindingKind::Monopolized,
        severity,
        summary: format!(
            "virtual threads held their carriers, computing without a pause, {} times for {} \
             or more ({} in all); the longest {} by virtual thread #{}{place}{starving}",
            e.monopolized.len(),
            secs(super::monopoly::DEFAULT_THRESHOLD_NS),
            secs(held),
            secs(longest.duration_ns()),
            longest.vthread,
        ),
        advice: "virtual threads are not time-sliced: run long computations on a pool of \
                 platform threads (Executors.newFixedThreadPool) and wait for the result, or \
                 split them into shorter steps; more carriers only help while CPUs are free"
            .into(),
        start_ns: Some(longest.start_ns.saturating_sub(e.start_ns)),
        duration_ns: held,
        threads: carriers,
        frames: e.longest_monopoly_stack.frames.clone(),
    })
}

/// A carrier's wakeup latency p99 at least this long is CPU starvation worth saying (a
/// quiet machine's is tens of microseconds; a scheduler tick is 1-4 ms).
const LATE_P99_NS: u64 = 5_000_000;

/// Carriers runnable but not run: a long wakeup latency, starvation while they waited for a
/// CPU, or a CPU quota that throttled the target.
fn cpu_starved(e: &Evidence, t: &Thresholds) -> Option<Finding> {
    let worst = e
        .scheduling
        .iter()
        .filter(|s| s.carrier)
        .max_by_key(|s| s.wakeup.p99);
    let (starved, episodes, _) = episodes_of(e, Cause::Cpu);
    let throttled = e
        .throttling
        .filter(|th| th.nr_throttled > 0 && th.nr_throttled * 10 >= th.nr_periods.max(1));
    let late = worst.filter(|w| w.wakeup.p99 >= LATE_P99_NS);
    if late.is_none() && throttled.is_none() && share(starved, e.window_ns) < t.starvation_share {
        return None;
    }
    let mut said = Vec::new();
    if let Some(w) = worst {
        said.push(format!(
            "the carriers' wakeup latency reached p99 {} (max {}, run-queue p99 {}) on {}",
            secs(w.wakeup.p99),
            secs(w.wakeup.max),
            secs(w.runqueue.p99),
            e.threads.iter().find(|r| r.tid == w.tid).map_or(
                format!("thread {}", w.tid),
                |r| format!("{} ({})", r.name, r.tid)
            )
        ));
    }
    if starved > 0 {
        said.push(format!(
            "every carrier waited for a CPU at once for {} in {episodes} episodes",
            secs(starved)
        ));
    }
    if let Some(th) = throttled {
        said.push(format!(
            "the cgroup's CPU quota ({}) throttled the target in {} of {} periods, {} in all",
            th.cpu_max.as_deref().unwrap_or("unknown"),
            th.nr_throttled,
            th.nr_periods,
            secs(th.throttled_ns)
        ));
    }
    let severity = if share(starved, e.window_ns) >= 0.10 {
        Severity::Critical
    } else {
        Severity::Warning
    };
    Some(Finding {
        kind: FindingKind::CpuStarved,
        severity,
        summary: format!("carriers were runnable but not run: {}", said.join("; ")),
        advice: "the carriers wait for a CPU, not for work: give the container more CPU \
                 (cpu.max), set jdk.virtualThreadScheduler.parallelism to the CPUs it really \
                 gets, or move CPU-hungry neighbours off these CPUs"
            .into(),
        start_ns: None,
        duration_ns: starved.max(throttled.map_or(0, |th| th.throttled_ns)),
        threads: e
            .scheduling
            .iter()
            .filter(|s| s.carrier)
            .map(|s| s.tid)
            .collect(),
        frames: Vec::new(),
    })
}

/// What the carriers waited on across the episodes: the most carrier time.
fn mostly_waiting_on(episodes: &[Option<WaitingOn>]) -> Option<WaitingOn> {
    let mut by: std::collections::BTreeMap<(WaitKind, Option<String>), WaitingOn> =
        std::collections::BTreeMap::new();
    for w in episodes.iter().flatten() {
        let entry = by
            .entry((w.kind, w.class.clone()))
            .or_insert_with(|| WaitingOn {
                carrier_ns: 0,
                ..w.clone()
            });
        entry.carrier_ns = entry.carrier_ns.saturating_add(w.carrier_ns);
        if w.owner.is_some() {
            entry.owner.clone_from(&w.owner);
        }
    }
    by.into_values().max_by_key(|w| w.carrier_ns)
}

/// "for a pkg.Lock (owner ...)", "to enter a pkg.Class monitor", "in a park (a sleep, I/O)".
pub fn waiting_label(w: &WaitingOn) -> String {
    let class = w.class.as_deref().unwrap_or("an object");
    match w.kind {
        WaitKind::Lock => match &w.owner {
            Some(o) => format!("for a {class} owned by {}", super::locks::owner_label(o)),
            None => format!("for a {class}"),
        },
        WaitKind::Monitor => format!("to enter a monitor on {class}"),
        WaitKind::ClassInit => format!("for the initialization of {class}"),
        WaitKind::Park => "in parks (sleeps, socket I/O)".into(),
        WaitKind::ObjectWait => "in Object.wait".into(),
        WaitKind::Syscall => "in system calls from native code".into(),
        WaitKind::Other => "on something else".into(),
    }
}

fn pinning(e: &Evidence, t: &Thresholds, carrier_ns: u64) -> Vec<Finding> {
    let mut out = Vec::new();
    let (mut pins, mut inits) = (0, 0);
    for site in e.sites {
        let portion = share(site.total_ns, carrier_ns.max(e.window_ns));
        if portion < t.pinned_share && site.total_ns < t.pinned_ns {
            continue;
        }
        let is_init = site.reason == Reason::ClassInit;
        let severity = if portion >= 0.25 {
            Severity::Critical
        } else if portion >= 0.05 || site.total_ns >= t.pinned_ns {
            Severity::Warning
        } else {
            Severity::Info
        };
        // A stack without Java frames says nothing to act on, unless it costs a lot.
        let Some(place) = culprit(&site.stack).or_else(|| {
            (severity == Severity::Critical).then(|| "a stack without Java frames".into())
        }) else {
            continue;
        };
        let count = if is_init { &mut inits } else { &mut pins };
        if *count >= t.per_kind {
            continue;
        }
        *count += 1;
        let cost = format!(
            "{} of carrier time pinned in {} ({} wait{} on {} carrier{})",
            secs(site.total_ns),
            secs(e.window_ns),
            site.events,
            if site.events == 1 { "" } else { "s" },
            site.carriers.len(),
            if site.carriers.len() == 1 { "" } else { "s" }
        );
        let (kind, summary, advice) = if is_init {
            let classes: Vec<String> = site.class_inits.iter().map(|i| i.to_string()).collect();
            let class = if classes.is_empty() {
                "a class".to_string()
            } else {
                classes.join(", ")
            };
            (
                FindingKind::ClassInit,
                format!(
                    "virtual threads waited for the initialization of {class} at `{place}`: {cost}"
                ),
                "a static initializer that blocks pins every virtual thread that needs its \
                 class: keep `<clinit>` short (move slow work to a lazily initialized holder, or \
                 run it before the virtual threads start)"
                    .to_string(),
            )
        } else {
            (
                FindingKind::Pinning,
                format!("`{place}` {}: {cost}", what_pins(site)),
                advice(site, e.jdk_major, &place),
            )
        };
        out.push(Finding {
            kind,
            severity,
            summary,
            advice,
            start_ns: None,
            duration_ns: site.total_ns,
            threads: site.carriers.iter().copied().collect(),
            frames: site.stack.frames.clone(),
        });
    }
    out
}

/// What the virtual thread did that pinned, in a few words.
fn what_pins(site: &PinnedSite) -> String {
    let frames = &site.stack.frames;
    let has = |needle: &str| frames.iter().any(|f| f.contains(needle));
    let doing = match site.operation {
        Operation::MonitorEnter => "waits to enter a contended monitor",
        Operation::ObjectWait => "waits in Object.wait",
        Operation::Syscall => "blocks in a system call from native code",
        Operation::Park if has("Thread.sleep") => "sleeps",
        Operation::Park if has("Socket") || has("NioSocketImpl") || has("SocketChannel") => {
            "waits for a socket"
        }
        Operation::Park if has("FileInputStream") || has("FileChannel") => "waits for a file",
        Operation::Park => "parks",
        Operation::Other => "blocks",
    };
    // As the report says it: a `static synchronized` monitor by the class it stands for.
    let on = match (
        site.class_monitors.iter().next(),
        site.monitor_classes.iter().next(),
    ) {
        (Some(class), _) => format!(" on class {class}"),
        (None, Some(class)) => format!(" on a {class}"),
        (None, None) => String::new(),
    };
    match site.reason {
        // Entering is the pinning itself on 21-23: no monitor need be held.
        Reason::Monitor if site.operation == Operation::MonitorEnter => format!("{doing}{on}"),
        Reason::Monitor => format!("{doing} while holding a monitor"),
        Reason::Native => format!("{doing} with a native frame on its stack"),
        Reason::CriticalSection => format!("{doing} inside a JDK critical section"),
        Reason::ClassInit | Reason::Other => doing.to_string(),
    }
}

fn advice(site: &PinnedSite, major: Option<u32>, place: &str) -> String {
    let before_491 = major.is_some_and(|m| m < 24);
    match (site.reason, site.operation) {
        (Reason::Monitor, Operation::MonitorEnter) if before_491 => format!(
            "on JDK {} a virtual thread that waits for a monitor pins its carrier: guard this \
             state with a java.util.concurrent.locks.ReentrantLock instead of synchronized, or \
             move to JDK 24+ (JEP 491)",
            major.unwrap_or(21)
        ),
        (Reason::Monitor, _) if before_491 => format!(
            "on JDK {} blocking inside synchronized pins the carrier: use a \
             java.util.concurrent.locks.ReentrantLock in `{place}`, or move the blocking call \
             out of the synchronized block, or move to JDK 24+ (JEP 491)",
            major.unwrap_or(21)
        ),
        (Reason::Monitor, _) => format!(
            "move the blocking call in `{place}` out of the synchronized block, or use a \
             java.util.concurrent.locks.ReentrantLock"
        ),
        (Reason::Native, _) => "a native frame (JNI, a foreign call, or the VM calling back \
                                into Java) keeps the virtual thread mounted: block outside the \
                                native call, or run this work on a platform thread"
            .into(),
        (Reason::CriticalSection, _) => "the JDK pinned the thread on purpose here; keep what \
                                         blocks out of this path or run it on a platform thread"
            .into(),
        _ => "run this blocking work on a platform thread, or make it not block".into(),
    }
}

fn locks(e: &Evidence, t: &Thresholds) -> Vec<Finding> {
    e.locks
        .iter()
        .filter(|l| !l.jvm_internal && share(l.wait_ns, e.window_ns) >= t.lock_share)
        .take(t.per_kind)
        .map(|l| {
            let portion = share(l.wait_ns, e.window_ns);
            let owner = l.java.as_ref().and_then(|j| j.owner.as_ref());
            let holder = match owner {
                Some(o) => format!("; its owner: {}", super::locks::owner_label(o)),
                None => l
                    .holders
                    .first()
                    .map(|(tid, name, released, _)| {
                        format!("; {name} ({tid}) released {released} of them")
                    })
                    .unwrap_or_default(),
            };
            let what = match (&l.java, &l.symbol) {
                (Some(j), _) => format!("a {}", j.class),
                (None, Some(symbol)) => symbol.clone(),
                (None, None) => format!("{} {:#x}", l.kind.as_str(), l.address),
            };
            let place = culprit_of(&l.holder_frames).or_else(|| culprit_of(&l.waiter_frames));
            if l.kind == super::kinds::LockKind::Unmounted {
                return unmounted_lock(l, &what, owner, place.as_deref(), portion);
            }
            Finding {
                kind: FindingKind::LockContention,
                severity: if portion >= 1.0 {
                    Severity::Warning
                } else {
                    Severity::Info
                },
                summary: format!(
                    "{} thread{} waited {} in all for {what} ({} waits, the longest {}){holder}",
                    l.waiters.len(),
                    if l.waiters.len() == 1 { "" } else { "s" },
                    secs(l.wait_ns),
                    l.waits,
                    secs(l.max_wait_ns),
                ),
                advice: match place {
                    Some(p) => format!(
                        "shorten what `{p}` does while it holds this lock, or split the lock"
                    ),
                    None => "shorten what is done while this lock is held, or split it".into(),
                },
                start_ns: None,
                duration_ns: l.wait_ns,
                threads: l.holders.iter().map(|h| h.0).collect(),
                frames: if l.holder_frames.is_empty() {
                    l.waiter_frames.clone()
                } else {
                    l.holder_frames.clone()
                },
            }
        })
        .collect()
}

/// A lock virtual threads waited on unmounted (off their carriers): no carrier was held up,
/// but the work waited all the same, behind an owner named with where it held the lock (its
/// own wait off its carrier, when it held the lock across a sleep or a call).
fn unmounted_lock(
    l: &super::locks::LockRow,
    what: &str,
    owner: Option<&crate::events::BlockerOwner>,
    place: Option<&str>,
    portion: f64,
) -> Finding {
    let held = culprit_of(&l.holder_frames);
    let holder = match (owner, &held) {
        (Some(o), Some(at)) => format!("; held by virtual thread #{} at `{at}`", o.java_id),
        (Some(o), None) => format!("; its owner: {}", super::locks::owner_label(o)),
        (None, _) => String::new(),
    };
    let monitor = l
        .java
        .as_ref()
        .is_some_and(|j| j.kind == super::locks::JavaLockKind::Monitor);
    let advice = match (place, monitor) {
        (Some(p), true) => format!(
            "shorten what `{p}` does while it holds this monitor (its waiters no longer pin \
             their carriers on JDK 24+, but they still wait), or split it"
        ),
        (Some(p), false) => {
            format!("shorten what `{p}` does while it holds this lock, or split the lock")
        }
        (None, _) => "shorten what is done while this lock is held, or split it".into(),
    };
    Finding {
        kind: FindingKind::LockContention,
        severity: if portion >= 1.0 {
            Severity::Warning
        } else {
            Severity::Info
        },
        summary: format!(
            "{} virtual thread{} waited {} in all, unmounted, for {what} ({} waits, the \
             longest {}){holder}",
            l.waiters.len(),
            if l.waiters.len() == 1 { "" } else { "s" },
            secs(l.wait_ns),
            l.waits,
            secs(l.max_wait_ns),
        ),
        advice,
        start_ns: None,
        duration_ns: l.wait_ns,
        threads: Vec::new(),
        frames: if l.holder_frames.is_empty() {
            l.waiter_frames.clone()
        } else {
            l.holder_frames.clone()
        },
    }
}

/// The innermost application frame of a plain list of labels.
fn culprit_of(frames: &[String]) -> Option<String> {
    frames
        .iter()
        .find(|f| {
            !jdk::is_marker(f) && !jdk::is_jdk_method(f) && f.contains('.') && !f.contains(".so")
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    /// What a finding says is one line of single-spaced prose (text, JSON and the live view
    /// print it as it is).
    fn assert_plain(found: &[Finding]) {
        for f in found {
            for text in [&f.summary, &f.advice] {
                assert!(
                    !text.contains("  ") && !text.contains('\n'),
                    "runs of spaces or a line break in {text:?}"
                );
            }
        }
    }
    use super::super::monitors::InitWaitedFor;
    use super::*;

    const MS: u64 = 1_000_000;

    fn site(
        reason: Reason,
        operation: Operation,
        frames: &[&str],
        holder: Option<usize>,
        total_ns: u64,
    ) -> PinnedSite {
        let stack = StackLabels {
            frames: frames.iter().map(|f| f.to_string()).collect(),
            frame_kinds: vec![FrameClass::Compiled; frames.len()],
            monitor_frames: holder.into_iter().collect(),
            lines: vec![None; frames.len()],
        };
        PinnedSite {
            events: 10,
            total_ns,
            max_ns: total_ns / 10,
            virtual_threads: [7].into(),
            carriers: [100, 101].into(),
            ..PinnedSite::new(reason, operation, stack)
        }
    }

    fn carrier(tid: u32, busy_ns: u64) -> ThreadRow {
        ThreadRow {
            tid,
            name: format!("worker-{tid}"),
            role: ThreadRole::Carrier,
            running_ns: busy_ns,
            ..Default::default()
        }
    }

    fn evidence<'a>(
        major: u32,
        threads: &'a [ThreadRow],
        sites: &'a [PinnedSite],
        starvation: &'a [Episode],
    ) -> Evidence<'a> {
        Evidence {
            start_ns: 1_000 * MS,
            window_ns: 5_000 * MS,
            jdk_major: Some(major),
            threads,
            sites,
            starvation,
            locks: &[],
            gridlocks: &[],
            waiting_on: &[],
            deadlocks: &[],
            deadlock_stacks: Vec::new(),
            monopolized: &[],
            longest_monopoly_stack: StackLabels::default(),
            scheduling: &[],
            throttling: None,
        }
    }

    #[test]
    fn a_carrier_held_by_a_computing_virtual_thread_is_monopolization_not_pinning() {
        use crate::analysis::monopoly::Monopolized;
        let threads = [carrier(100, 5_000 * MS)];
        let episodes = [Episode {
            start_ns: 1_200 * MS,
            end_ns: 2_200 * MS,
            blocked_carriers: 1,
            carriers: 1,
            queued_max: Some(3),
            cause: Cause::Monopolized,
        }];
        let spell = Monopolized {
            carrier: 100,
            vthread: 42,
            start_ns: 1_200 * MS,
            end_ns: 2_200 * MS,
            samples: 99,
            stacks: (None, None, None),
        };
        let spells = [spell];
        let mut e = evidence(21, &threads, &[], &episodes);
        e.monopolized = &spells;
        e.longest_monopoly_stack = StackLabels {
            frames: vec!["Work.crunch".into()],
            frame_kinds: vec![FrameClass::Compiled],
            monitor_frames: vec![],
            lines: vec![None],
        };
        let found = findings(&e, &Thresholds::default());
        assert_plain(&found);
        let kinds: Vec<FindingKind> = found.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FindingKind::Monopolized], "{found:#?}");
        let f = &found[0];
        assert_eq!(
            f.severity,
            Severity::Critical,
            "a fifth of the window starved"
        );
        assert!(f.summary.contains("#42 in `Work.crunch`"), "{}", f.summary);
        assert!(
            f.summary.contains("up to 3 virtual threads waited"),
            "{}",
            f.summary
        );
        assert!(f.advice.contains("not time-sliced"));
    }

    #[test]
    fn a_late_carrier_or_a_throttled_cgroup_is_cpu_starvation() {
        use crate::analysis::scheduler::{Percentiles, ThreadScheduling};
        let threads = [carrier(100, 5_000 * MS)];
        let row = |p99| ThreadScheduling {
            tid: 100,
            carrier: true,
            wakeup: Percentiles {
                count: 1000,
                p50: MS / 10,
                p99,
                max: 2 * p99,
            },
            runqueue: Percentiles::default(),
            migrations: 0,
            involuntary_switches: 0,
        };
        let quiet = [row(MS / 2)];
        let mut e = evidence(21, &threads, &[], &[]);
        e.scheduling = &quiet;
        assert!(findings(&e, &Thresholds::default()).is_empty());
        let late = [row(8 * MS)];
        e.scheduling = &late;
        let found = findings(&e, &Thresholds::default());
        assert_plain(&found);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, FindingKind::CpuStarved);
        assert!(
            found[0].summary.contains("p99 8.0ms"),
            "{}",
            found[0].summary
        );
        let throttling = crate::analysis::throttling::Throttling {
            path: "/pod".into(),
            version: 2,
            cpu_max: Some("20000 100000".into()),
            nr_periods: 50,
            nr_throttled: 40,
            throttled_ns: 2_000 * MS,
            series: Vec::new(),
        };
        e.scheduling = &quiet;
        e.throttling = Some(&throttling);
        let found = findings(&e, &Thresholds::default());
        assert_plain(&found);
        assert!(
            found[0]
                .summary
                .contains("(20000 100000) throttled the target in 40 of 50 periods"),
            "{}",
            found[0].summary
        );
    }

    const SLEEP_IN_SYNC: [&str; 3] = ["java.lang.Thread.sleep", "Shop$Audit.record", "Shop.serve"];

    #[test]
    fn a_sleep_inside_synchronized_on_21_says_reentrant_lock_or_jep_491() {
        let threads = [carrier(100, 5_000 * MS), carrier(101, 5_000 * MS)];
        let sites = [site(
            Reason::Monitor,
            Operation::Park,
            &SLEEP_IN_SYNC,
            Some(1),
            4_900 * MS,
        )];
        let found = findings(&evidence(21, &threads, &sites, &[]), &Thresholds::default());
        assert_plain(&found);
        assert_eq!(found.len(), 1, "{found:#?}");
        let f = &found[0];
        assert_eq!(
            (f.kind, f.severity),
            (FindingKind::Pinning, Severity::Critical)
        );
        assert!(
            f.summary
                .starts_with("`Shop$Audit.record` sleeps while holding a monitor: 4.90s"),
            "{}",
            f.summary
        );
        assert!(
            f.advice.contains("ReentrantLock") && f.advice.contains("JEP 491"),
            "{}",
            f.advice
        );
        assert_eq!(f.threads, [100, 101]);
        // On 25 the monitor is no reason to pin: no JDK upgrade to advise.
        let found = findings(&evidence(25, &threads, &sites, &[]), &Thresholds::default());
        assert_plain(&found);
        assert!(!found[0].advice.contains("JEP 491"), "{}", found[0].advice);
    }

    #[test]
    fn small_pinning_is_no_finding_and_starvation_leads_its_causes() {
        let threads = [carrier(100, 5_000 * MS), carrier(101, 5_000 * MS)];
        // Under 1% of 10 s of carrier time and under 50 ms: nothing to say.
        let small = [site(
            Reason::Monitor,
            Operation::Park,
            &SLEEP_IN_SYNC,
            Some(1),
            20 * MS,
        )];
        assert!(findings(&evidence(21, &threads, &small, &[]), &Thresholds::default()).is_empty());

        let big = [site(
            Reason::Monitor,
            Operation::Park,
            &SLEEP_IN_SYNC,
            Some(1),
            9_000 * MS,
        )];
        let episodes = [Episode {
            start_ns: 2_000 * MS,
            end_ns: 3_500 * MS,
            blocked_carriers: 2,
            carriers: 2,
            queued_max: None,
            cause: crate::analysis::starvation::Cause::Pinned,
        }];
        let found = findings(
            &evidence(21, &threads, &big, &episodes),
            &Thresholds::default(),
        );
        assert_plain(&found);
        let kinds: Vec<_> = found.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FindingKind::Starvation, FindingKind::Pinning]);
        let starving = &found[0];
        assert_eq!(
            starving.start_ns,
            Some(1_000 * MS),
            "from the window's start"
        );
        assert_eq!(starving.duration_ns, 1_500 * MS);
        assert!(
            starving.summary.contains("`Shop$Audit.record`"),
            "{}",
            starving.summary
        );
    }

    #[test]
    fn a_pinning_class_initializer_is_named() {
        let threads = [carrier(100, 5_000 * MS)];
        let mut init = site(
            Reason::ClassInit,
            Operation::ObjectWait,
            &[
                "java.lang.Object.wait0",
                "Shop$Rates.<clinit>",
                "Shop.price",
            ],
            None,
            800 * MS,
        );
        init.class_inits.insert(InitWaitedFor {
            class: "Shop$Rates".into(),
            initializer: None,
        });
        let found = findings(
            &evidence(21, &threads, &[init], &[]),
            &Thresholds::default(),
        );
        assert_plain(&found);
        assert_eq!(found[0].kind, FindingKind::ClassInit);
        assert!(
            found[0].summary.contains("initialization of Shop$Rates"),
            "{}",
            found[0].summary
        );
        assert!(found[0].advice.contains("<clinit>"), "{}", found[0].advice);
    }
}
