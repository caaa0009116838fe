//! What the views show, computed once from the model for its window: each figure has one
//! definition here, and `report`, `flamegraph` and `tui` only read it. Each part is computed
//! on first read and kept, so a view pays only for what it shows (a flamegraph of pinning
//! never groups locks).

pub mod blocked;
pub mod causes;
pub mod classify;
pub mod deadlock;
pub mod findings;
pub mod gridlock;
pub mod jdk;
pub mod kinds;
pub mod locks;
pub mod monitors;
pub mod monopoly;
pub mod oncpu;
pub mod pinning;
pub mod scheduler;
pub mod stacks;
pub mod starvation;
pub mod threads;
pub mod throttling;
pub mod unmounted;

use std::cell::OnceCell;
use std::collections::HashSet;

use crate::events::{StackId, Syscall};
use crate::model::{Model, Wait};
use blocked::StackRow;
use classify::Use;
use findings::Finding;
use locks::{FutexSummary, LockRow, SyscallRow};
use pinning::{PinnedEvent, PinnedSite};
use starvation::Episode;
use threads::ThreadRow;

/// A wait's stacks: kernel, native, Java.
pub type WaitStacks = (Option<StackId>, Option<StackId>, Option<StackId>);

pub struct Analysis<'m> {
    model: &'m Model,
    classes: OnceCell<Vec<Option<Use>>>,
    uses: OnceCell<Vec<(&'m Wait, Use)>>,
    threads: OnceCell<Vec<ThreadRow>>,
    jdk_own_threads: OnceCell<HashSet<u32>>,
    /// `waits_for_work` by thread and stacks, found once (views ask per wait, of millions).
    for_work: std::cell::RefCell<crate::model::FastMap<(u32, WaitStacks), bool>>,
    pinned_events: OnceCell<Vec<PinnedEvent>>,
    pinned_sites: OnceCell<Vec<PinnedSite>>,
    starvation: OnceCell<Vec<Episode>>,
    locks: OnceCell<Vec<LockRow>>,
    futex: OnceCell<FutexSummary>,
    syscalls: OnceCell<Vec<SyscallRow>>,
    blocked_stacks: OnceCell<Vec<StackRow>>,
    java_stacks_cut: OnceCell<usize>,
    findings: OnceCell<Vec<Finding>>,
    gridlocks: OnceCell<Vec<gridlock::Gridlock>>,
    deadlocks: OnceCell<Vec<deadlock::Deadlock>>,
    waiting_on: OnceCell<Vec<Option<causes::WaitingOn>>>,
    on_cpu_sites: OnceCell<Vec<oncpu::OnCpuSite>>,
    monopolized: OnceCell<Vec<monopoly::Monopolized>>,
    scheduling: OnceCell<Vec<scheduler::ThreadScheduling>>,
    throttling: OnceCell<Option<throttling::Throttling>>,
}

impl<'m> Analysis<'m> {
    pub fn new(model: &'m Model) -> Self {
        Self {
            model,
            classes: OnceCell::new(),
            uses: OnceCell::new(),
            threads: OnceCell::new(),
            jdk_own_threads: OnceCell::new(),
            for_work: Default::default(),
            pinned_events: OnceCell::new(),
            pinned_sites: OnceCell::new(),
            starvation: OnceCell::new(),
            locks: OnceCell::new(),
            futex: OnceCell::new(),
            syscalls: OnceCell::new(),
            blocked_stacks: OnceCell::new(),
            java_stacks_cut: OnceCell::new(),
            findings: OnceCell::new(),
            gridlocks: OnceCell::new(),
            deadlocks: OnceCell::new(),
            waiting_on: OnceCell::new(),
            on_cpu_sites: OnceCell::new(),
            monopolized: OnceCell::new(),
            scheduling: OnceCell::new(),
            throttling: OnceCell::new(),
        }
    }

    /// On-CPU samples by stack, most first.
    pub fn on_cpu_sites(&self) -> &[oncpu::OnCpuSite] {
        self.on_cpu_sites.get_or_init(|| oncpu::sites(self.model))
    }

    /// Virtual threads that held their carrier, running, for long (see `monopoly`).
    pub fn monopolized(&self) -> &[monopoly::Monopolized] {
        self.monopolized
            .get_or_init(|| monopoly::monopolized(self.model, monopoly::DEFAULT_THRESHOLD_NS))
    }

    /// Each thread's wakeup latency and run-queue delay, carriers first.
    pub fn scheduling(&self) -> &[scheduler::ThreadScheduling] {
        self.scheduling
            .get_or_init(|| scheduler::threads(self.model))
    }

    /// The store the figures come from (names, stacks, counters).
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// What each of the model's intervals counts as, in the model's order (None: preempted):
    /// classified once for every figure.
    pub(crate) fn classes(&self) -> &[Option<Use>] {
        self.classes
            .get_or_init(|| classify::classify_all(self.model))
    }

    /// Every off-CPU interval that was a wait, with what it counts as, by thread and time.
    pub fn uses(&self) -> &[(&'m Wait, Use)] {
        self.uses
            .get_or_init(|| classify::uses_of(self.model, self.classes()))
    }

    /// Blocked time, the one definition every view shares: waits other than an idle
    /// carrier's (waiting for work), with the part of each that lies in its thread's life
    /// (never zero).
    pub fn blocked_intervals(&self) -> impl Iterator<Item = (&'m Wait, u64)> + '_ {
        let model = self.model;
        self.uses()
            .iter()
            .filter(|(_, u)| *u != Use::Idle)
            .map(move |&(o, _)| (o, model.lived_ns(o)))
            .filter(|(_, d)| *d > 0)
    }

    /// Every thread's time, most blocked or pinned first.
    pub fn threads(&self) -> &[ThreadRow] {
        self.threads
            .get_or_init(|| threads::threads_of(self.model, self.classes()))
    }

    /// The JVM's and the JDK's own threads.
    pub fn jdk_own_threads(&self) -> &HashSet<u32> {
        self.jdk_own_threads
            .get_or_init(|| jdk::jdk_own_threads(self.model))
    }

    /// Whether a wait of `tid` with these stacks (kernel, native, Java) is one of the JVM's
    /// own threads waiting for work (see `jdk::waits_for_work`).
    pub fn waits_for_work(&self, tid: u32, (k, u, j): WaitStacks) -> bool {
        let own = self.jdk_own_threads();
        if !own.contains(&tid) {
            return false;
        }
        *self
            .for_work
            .borrow_mut()
            .entry((tid, (k, u, j)))
            .or_insert_with(|| jdk::waits_for_work(own, tid, &self.model.frames_of(k, u, j)))
    }

    /// Every pinning, in time order.
    pub fn pinned_events(&self) -> &[PinnedEvent] {
        self.pinned_events
            .get_or_init(|| pinning::pinned_events_in(self.model, self.uses()))
    }

    /// Pinned sites, most time first.
    pub fn pinned_sites(&self) -> &[PinnedSite] {
        self.pinned_sites
            .get_or_init(|| pinning::pinned_sites(self.model, self.pinned_events()))
    }

    /// Spans when no carrier was free.
    pub fn starvation(&self) -> &[Episode] {
        self.starvation
            .get_or_init(|| starvation::starvation_in(self.model, self.uses(), self.monopolized()))
    }

    /// Starvation under way at the latest checkpoint: since when, and how many carriers (see
    /// `starvation::starving_now`).
    pub fn starving_now(&self) -> Option<(u64, u32)> {
        starvation::starving_now(self.model)
    }

    /// Long futex waits that another thread of the target ended, but those on a monitor or
    /// for a class initialization (see `locks::lock_waits_not_on_monitors`).
    pub fn lock_waits(&self) -> impl Iterator<Item = &'m Syscall> + use<'m> {
        locks::lock_waits_not_on_monitors(self.model)
    }

    /// Lock rows, most wait first.
    pub fn locks(&self) -> &[LockRow] {
        self.locks
            .get_or_init(|| locks::locks(self.model, self.jdk_own_threads()))
    }

    pub fn futex(&self) -> &FutexSummary {
        self.futex.get_or_init(|| locks::futex_summary(self.model))
    }

    /// System call time by call, most first.
    pub fn syscalls(&self) -> &[SyscallRow] {
        self.syscalls
            .get_or_init(|| locks::syscall_rows(self.model, self.jdk_own_threads()))
    }

    /// Blocked time by stack, most first (the JVM's own waits for work last).
    pub fn blocked_stacks(&self) -> &[StackRow] {
        self.blocked_stacks.get_or_init(|| {
            blocked::blocked_stacks(self.model, self.blocked_intervals(), self.jdk_own_threads())
        })
    }

    /// Blocked intervals whose Java stack was cut where frozen frames could not be read.
    pub fn java_stacks_cut(&self) -> usize {
        *self
            .java_stacks_cut
            .get_or_init(|| blocked::java_stacks_cut(self.model))
    }

    /// Starvation whose pinned carriers waited for a lock an unmounted virtual thread owned.
    pub fn gridlocks(&self) -> &[gridlock::Gridlock] {
        self.gridlocks.get_or_init(|| {
            gridlock::gridlocks(self.model, self.starvation(), self.pinned_events())
        })
    }

    /// For each starvation episode, what most of its pinned carrier time waited on.
    pub fn waiting_on(&self) -> &[Option<causes::WaitingOn>] {
        self.waiting_on
            .get_or_init(|| causes::waiting_on(self.model, self.starvation(), self.pinned_events()))
    }

    /// Threads stuck to the end, each waiting for a lock the next one holds.
    pub fn deadlocks(&self) -> &[deadlock::Deadlock] {
        self.deadlocks
            .get_or_init(|| deadlock::deadlocks(self.model))
    }

    /// What the user must know, most severe first (see `findings`).
    pub fn findings(&self) -> &[Finding] {
        self.findings.get_or_init(|| {
            let evidence = findings::Evidence {
                start_ns: self.model.start_mono_ns,
                window_ns: self.duration_ns(),
                jdk_major: self.model.jdk_major(),
                threads: self.threads(),
                sites: self.pinned_sites(),
                starvation: self.starvation(),
                locks: self.locks(),
                gridlocks: self.gridlocks(),
                deadlocks: self.deadlocks(),
                waiting_on: self.waiting_on(),
                deadlock_stacks: self
                    .deadlocks()
                    .iter()
                    .map(|d| {
                        d.threads
                            .first()
                            .and_then(|s| s.java_stack)
                            .and_then(|id| self.model.stacks.get(&id))
                            .map(|frames| {
                                let frames: Vec<&crate::events::Frame> = frames.iter().collect();
                                stacks::StackLabels::new(&frames, stacks::monitor_frames(&frames))
                            })
                            .unwrap_or_default()
                    })
                    .collect(),
                monopolized: self.monopolized(),
                longest_monopoly_stack: self
                    .monopolized()
                    .iter()
                    .max_by_key(|m| m.duration_ns())
                    .map(|m| m.stack(self.model))
                    .unwrap_or_default(),
                scheduling: self.scheduling(),
                throttling: self.throttling(),
            };
            findings::findings(&evidence, &findings::Thresholds::default())
        })
    }

    /// The CPU quota of the target's cgroup and its throttling over the window (None: no
    /// cgroup of the CPU controller was read).
    pub fn throttling(&self) -> Option<&throttling::Throttling> {
        self.throttling
            .get_or_init(|| throttling::throttling(self.model))
            .as_ref()
    }

    /// Whether the recording knows the JVM's threads (carriers, mounted state).
    pub fn knows_java_threads(&self) -> bool {
        self.model.knows_java_threads()
    }

    pub fn duration_ns(&self) -> u64 {
        self.model.duration_ns()
    }

    /// Moves the parts a live view keeps between refreshes out (computing them if needed).
    pub fn into_parts(self) -> Parts {
        self.threads();
        self.pinned_sites();
        self.locks();
        self.syscalls();
        self.starvation();
        self.findings();
        Parts {
            threads: self.threads.into_inner().unwrap_or_default(),
            pinned_events: self.pinned_events.into_inner().unwrap_or_default(),
            pinned_sites: self.pinned_sites.into_inner().unwrap_or_default(),
            starvation: self.starvation.into_inner().unwrap_or_default(),
            locks: self.locks.into_inner().unwrap_or_default(),
            syscalls: self.syscalls.into_inner().unwrap_or_default(),
            findings: self.findings.into_inner().unwrap_or_default(),
        }
    }
}

/// What a live view keeps of one refresh's analysis.
pub struct Parts {
    pub threads: Vec<ThreadRow>,
    pub pinned_events: Vec<PinnedEvent>,
    pub pinned_sites: Vec<PinnedSite>,
    pub starvation: Vec<Episode>,
    pub locks: Vec<LockRow>,
    pub syscalls: Vec<SyscallRow>,
    pub findings: Vec<Finding>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{JavaThreadInfo, OffCpuState};
    use crate::flamegraph::{self, Kind};
    use crate::model::intake::hostile;
    use crate::model::tests::{interval, parked};

    const MS: u64 = 1_000_000;

    /// A carrier that idles 10 ms and is pinned 10 ms, a thread blocked 5 ms, and a wait
    /// that lies outside its thread's life.
    fn model() -> Model {
        let mut model = Model::new(&hostile::header(0));
        model.start_mono_ns = 0;
        model.end_mono_ns = 100 * MS;
        let carrier = JavaThreadInfo {
            tid: 1,
            name: Some("carrier".into()),
            carrier: true,
        };
        model.java_threads.insert(1, carrier);
        model.off_cpu = vec![
            Wait::from(parked(1, 0, 10, None)),
            Wait::from(parked(1, 20, 10, Some(7))),
            Wait::from(interval(2, 0, 5, OffCpuState::Sleeping)),
            Wait::from(interval(3, 50, 5, OffCpuState::Sleeping)),
        ];
        model.births.insert(3, 60 * MS);
        model
    }

    #[test]
    fn the_off_cpu_flamegraph_weighs_the_reports_blocked_stacks() {
        let model = model();
        let analysis = Analysis::new(&model);
        let uses: Vec<Use> = analysis.uses().iter().map(|(_, u)| *u).collect();
        assert!(uses.contains(&Use::Idle), "{uses:?}");
        let stacks = analysis.blocked_stacks();
        let options = flamegraph::Options {
            per_thread: false,
            kind: Kind::OffCpu,
            ..Default::default()
        };
        let (_, summary) = flamegraph::folded(&analysis, &options);
        // The idle park is waiting for work, the wait before thread 3's birth is not its own.
        assert_eq!(summary.total_ns, 15 * MS);
        assert_eq!(summary.events, 2);
        assert_eq!(stacks.iter().map(|s| s.total_ns).sum::<u64>(), 15 * MS);
        assert_eq!(stacks.iter().map(|s| s.events).sum::<u64>(), 2);
        let blocked = analysis
            .threads()
            .iter()
            .map(|t| t.blocked_ns + t.pinned_ns);
        assert_eq!(blocked.sum::<u64>(), 15 * MS);
    }

    #[test]
    fn each_part_is_computed_once() {
        let model = model();
        let analysis = Analysis::new(&model);
        assert!(std::ptr::eq(analysis.threads(), analysis.threads()));
        assert!(std::ptr::eq(
            analysis.pinned_events(),
            analysis.pinned_events()
        ));
        assert_eq!(analysis.pinned_events().len(), 1);
        assert_eq!(analysis.pinned_sites().len(), 1);
    }
}
