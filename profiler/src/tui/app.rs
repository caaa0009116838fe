//! The terminal UI's state: the model fed by the record stream, what is selected, and the
//! figures of the last refresh. Nothing here draws (see `draw`).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::{
    analysis::{
        Analysis,
        classify::{Operation, Reason},
        findings::Finding,
        kinds::{LockKind, ThreadRole},
        locks::{LockRow, SyscallRow},
        pinning::{PinnedEvent, PinnedSite},
        threads::ThreadRow,
    },
    model::{Model, add, total},
    recording::{Record, StopReason},
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    Overview,
    Pinned,
    Threads,
    Locks,
    Syscalls,
}

impl Tab {
    pub const ALL: [Tab; 5] = [
        Tab::Overview,
        Tab::Pinned,
        Tab::Threads,
        Tab::Locks,
        Tab::Syscalls,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Tab::Overview => "Carriers",
            Tab::Pinned => "Pinned sites",
            Tab::Threads => "Threads",
            Tab::Locks => "Locks",
            Tab::Syscalls => "System calls",
        }
    }

    pub fn index(self) -> usize {
        Tab::ALL.iter().position(|&t| t == self).unwrap_or(0)
    }
}

/// Intervals that ended this long before the newest are folded (see `Model::fold_settled`).
const FOLD_AFTER_NS: u64 = 2_000_000_000;

/// The timeline keeps this many of the latest seconds (far more than a terminal is wide), so
/// its size does not follow the window's length.
pub const TIMELINE_SECONDS: u64 = 4096;

/// Where the stream stands.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    /// Records are still coming.
    Running,
    /// The stream ended with its end marker.
    Ended(StopReason),
    /// The stream stopped without an end marker (a cut recording, or the capture failed).
    Cut,
}

/// Monopolization over the whole live view: the samples it is read from are forgotten as the
/// carriers' waits are folded, so each spell is counted once it is settled, before that.
#[derive(Debug, Default)]
struct MonopolizedSoFar {
    spells: u64,
    total_ns: u64,
    /// The longest: (ns, virtual thread, where).
    longest: Option<(u64, u64, String)>,
    /// Spells that began before this were counted.
    counted_until: u64,
}

impl MonopolizedSoFar {
    /// Counts the spells that end before `settled` (about to be forgotten).
    fn count(&mut self, model: &crate::model::Model, settled: u64) {
        use crate::analysis::monopoly;
        if settled <= self.counted_until {
            return;
        }
        for m in monopoly::monopolized(model, monopoly::DEFAULT_THRESHOLD_NS) {
            if m.end_ns >= settled || m.start_ns < self.counted_until {
                continue;
            }
            self.spells += 1;
            self.total_ns = self.total_ns.saturating_add(m.duration_ns());
            if self.longest.as_ref().is_none_or(|l| m.duration_ns() > l.0) {
                self.longest = Some((m.duration_ns(), m.vthread, m.place(model)));
            }
        }
        self.counted_until = settled;
    }

    /// The line the overview shows: the spells counted, and those not settled yet.
    fn line(&self, analysis: &Analysis) -> Option<String> {
        let model = analysis.model();
        let recent: Vec<_> = analysis
            .monopolized()
            .iter()
            .filter(|m| m.start_ns >= self.counted_until)
            .collect();
        let spells = self.spells + recent.len() as u64;
        if spells == 0 {
            return None;
        }
        let total_ns = self
            .total_ns
            .saturating_add(total(recent.iter().map(|m| m.duration_ns())));
        let longest = recent
            .iter()
            .map(|m| (m.duration_ns(), m.vthread, m.place(model)))
            .chain(self.longest.clone())
            .max_by_key(|l| l.0)?;
        Some(format!(
            "Monopolized: {spells} times a virtual thread held its carrier computing for \
             20ms or more, {} in all; the longest {} by #{} in {}",
            crate::units::secs(total_ns),
            crate::units::secs(longest.0),
            longest.1,
            longest.2
        ))
    }
}

/// The figures views show, computed from the model at each refresh (not at each draw).
#[derive(Debug, Default)]
pub struct View {
    pub threads: Vec<ThreadRow>,
    pub pinned_events: usize,
    pub pinned_ns: u64,
    pub sites: Vec<PinnedSite>,
    pub episodes: usize,
    pub starved_ns: u64,
    pub longest_starvation_ns: u64,
    /// When the latest starvation episode ended.
    pub last_starvation_end_ns: Option<u64>,
    /// Starvation under way at the latest checkpoint: (for how long, carriers).
    pub starving_now: Option<(u64, u32)>,
    /// Tasks waiting in the scheduler for a carrier, as last sampled (if lately).
    pub queued_now: Option<u64>,
    pub locks: Vec<LockRow>,
    pub syscalls: Vec<SyscallRow>,
    /// What the user must know, most severe first.
    pub findings: Vec<Finding>,
    /// Carrier time pinned in each second of the window (ms; several carriers add up), for
    /// the latest `TIMELINE_SECONDS` seconds at most.
    pub pinned_per_second: Vec<u64>,
    /// The second of the window (from its start) that `pinned_per_second` begins with.
    pub first_second: u64,
    /// Time the CPU quota throttled the target's cgroup in each of the same seconds (ms).
    pub throttled_per_second: Vec<u64>,
    /// The quota and its throttling, in a line (None: no quota, no throttling).
    pub throttling: Option<String>,
    /// Monopolization and the carriers' waits for a CPU, a line each when there is any.
    pub cpu_lines: Vec<String>,
    /// Starvation time by cause, the causes that had any.
    pub starvation_causes: Vec<(crate::analysis::starvation::Cause, u64)>,
}

impl View {
    pub fn carriers(&self) -> impl Iterator<Item = &ThreadRow> {
        self.threads
            .iter()
            .filter(|t| t.role == ThreadRole::Carrier)
    }

    /// Threads that did something in the window.
    pub fn active_threads(&self) -> impl Iterator<Item = &ThreadRow> {
        self.threads
            .iter()
            .filter(|t| t.intervals > 0 || t.running_ns > 0)
    }

    /// What identifies a tab's row `row`, so that the selection stays on it when the table
    /// re-sorts.
    fn key(&self, tab: Tab, row: usize) -> Option<RowKey> {
        match tab {
            Tab::Overview => self.carriers().nth(row).map(|t| RowKey::Thread(t.tid)),
            Tab::Threads => self
                .active_threads()
                .nth(row)
                .map(|t| RowKey::Thread(t.tid)),
            Tab::Pinned => self
                .sites
                .get(row)
                .map(|s| RowKey::Site(s.reason, s.operation, s.stack.frames.clone())),
            Tab::Locks => self.locks.get(row).map(|l| RowKey::Lock(l.kind, l.address)),
            Tab::Syscalls => self
                .syscalls
                .get(row)
                .map(|c| RowKey::Syscall(c.name.clone())),
        }
    }

    /// Where the row `key` is in a tab's table now.
    fn find(&self, tab: Tab, key: &RowKey) -> Option<usize> {
        match (tab, key) {
            (Tab::Overview, RowKey::Thread(tid)) => self.carriers().position(|t| t.tid == *tid),
            (Tab::Threads, RowKey::Thread(tid)) => {
                self.active_threads().position(|t| t.tid == *tid)
            }
            (Tab::Pinned, RowKey::Site(reason, operation, frames)) => {
                self.sites.iter().position(|s| {
                    s.reason == *reason && s.operation == *operation && s.stack.frames == *frames
                })
            }
            (Tab::Locks, RowKey::Lock(kind, address)) => self
                .locks
                .iter()
                .position(|l| l.kind == *kind && l.address == *address),
            (Tab::Syscalls, RowKey::Syscall(name)) => {
                self.syscalls.iter().position(|c| c.name == *name)
            }
            _ => None,
        }
    }

    /// Rows of a tab's table (for moving the selection).
    fn rows(&self, tab: Tab) -> usize {
        match tab {
            Tab::Overview => self.carriers().count(),
            Tab::Pinned => self.sites.len(),
            Tab::Threads => self.active_threads().count(),
            Tab::Locks => self.locks.len(),
            Tab::Syscalls => self.syscalls.len(),
        }
    }
}

/// A row of a table, whatever its place.
#[derive(Clone, Debug, PartialEq)]
enum RowKey {
    Thread(u32),
    Site(Reason, Operation, Vec<String>),
    Lock(LockKind, u64),
    Syscall(String),
}

pub struct App {
    /// What is shown: "recording to FILE" or "replay of FILE".
    pub source: String,
    /// A capture under way (else a recording read back).
    pub live: bool,
    /// Pinning, starvation, locks and system calls cover this much of the latest time
    /// (None: all of it); thread times always cover all of it.
    pub window: Option<std::time::Duration>,
    /// When a starvation episode last showed up, to flag it for a few seconds.
    pub starved_at: Option<std::time::Instant>,
    /// Monopolization spells counted so far (see `count_monopolized`).
    monopolized: MonopolizedSoFar,
    pub model: Option<Model>,
    pub status: Status,
    pub records: u64,
    pub view: View,
    pub tab: Tab,
    /// The selected row of each tab's table.
    pub selected: [usize; Tab::ALL.len()],
    pub quit: bool,
    /// Quit with Ctrl-C rather than `q`.
    pub interrupted: bool,
    /// Records arrived since the last refresh.
    changed: bool,
}

impl App {
    pub fn new(source: String, live: bool, window: Option<std::time::Duration>) -> Self {
        Self {
            source,
            live,
            window,
            starved_at: None,
            monopolized: MonopolizedSoFar::default(),
            model: None,
            status: Status::Running,
            records: 0,
            view: View::default(),
            tab: Tab::Overview,
            selected: [0; Tab::ALL.len()],
            quit: false,
            interrupted: false,
            changed: false,
        }
    }

    /// Takes one record of the stream into the model.
    pub fn on_record(&mut self, record: Record) {
        self.records += 1;
        self.changed = true;
        match record {
            Record::Header(header) => self.model = Some(Model::new(&header)),
            Record::Event(event) => {
                if let Some(model) = &mut self.model {
                    model.apply_owned(event);
                }
            }
            Record::End(end) => {
                if let Some(model) = &mut self.model {
                    model.finish(&end);
                }
                self.status = Status::Ended(end.reason);
            }
        }
    }

    /// The stream has no more records.
    pub fn on_disconnect(&mut self) {
        if self.status == Status::Running {
            self.status = Status::Cut;
            self.changed = true;
        }
    }

    /// Whether carriers starved in the last few seconds.
    pub fn starved_lately(&self) -> bool {
        self.starved_at
            .is_some_and(|at| at.elapsed() < std::time::Duration::from_secs(5))
    }

    /// " (last 60 s)" once the view covers only the latest time; else nothing.
    pub fn window_note(&self) -> String {
        match (
            self.window,
            self.model.as_ref().and_then(|m| m.forgotten_before),
        ) {
            (Some(window), Some(_)) => format!(" (last {} s)", window.as_secs()),
            _ => String::new(),
        }
    }

    /// The stream has ended since the figures were last computed.
    pub fn ended_unshown(&self) -> bool {
        self.changed && self.status != Status::Running
    }

    /// How far the newest record is behind the present (a live view that cannot keep up).
    pub fn lag_ns(&self) -> u64 {
        match &self.model {
            Some(model) if self.live && self.status == Status::Running => {
                crate::capture::monotonic_ns().saturating_sub(model.end_mono_ns)
            }
            _ => 0,
        }
    }

    /// Recomputes the views' figures if records came since the last time.
    pub fn refresh(&mut self) {
        if !self.changed {
            return;
        }
        self.changed = false;
        let Some(model) = &mut self.model else {
            return;
        };
        // What views never need one by one is summed once settled: memory and refresh time
        // then grow with pinning, not with every context switch.
        let settled = model.end_mono_ns.saturating_sub(FOLD_AFTER_NS);
        self.monopolized.count(model, settled);
        model.fold_settled(settled);
        if let Some(window) = self.window {
            model.forget_before(model.end_mono_ns.saturating_sub(window.as_nanos() as u64));
        }
        let model = &*model;
        // One analysis per refresh; the view keeps its figures until the next.
        let analysis = Analysis::new(model);
        let starving_now = analysis.starving_now();
        let throttling = crate::report::throttling_label(&analysis);
        let cpu_lines = self
            .monopolized
            .line(&analysis)
            .into_iter()
            .chain(crate::report::scheduler_label(&analysis))
            .collect();
        let throttled = analysis.throttling().cloned();
        let crate::analysis::Parts {
            threads,
            pinned_events: pinned,
            pinned_sites: sites,
            starvation: episodes,
            locks,
            syscalls,
            findings,
        } = analysis.into_parts();
        let starvation_causes = {
            use crate::analysis::starvation::Cause;
            [
                Cause::Pinned,
                Cause::Blocked,
                Cause::Monopolized,
                Cause::Cpu,
            ]
            .into_iter()
            .map(|c| {
                let ns = total(
                    episodes
                        .iter()
                        .filter(|e| e.cause == c)
                        .map(|e| e.end_ns.saturating_sub(e.start_ns)),
                );
                (c, ns)
            })
            .filter(|(_, ns)| *ns > 0)
            .collect()
        };
        // Episodes are known once they end: flag a new one for a few seconds.
        let newest = episodes.last().map(|e| e.end_ns);
        if newest.is_some() && newest > self.view.last_starvation_end_ns {
            self.starved_at = Some(std::time::Instant::now());
        }
        // Seconds the model has forgotten keep the figures they had.
        let first_second = timeline_start(model);
        let mut per_second = per_second(model, &pinned);
        let forgotten = model.forgotten_before.map_or(0, |t| {
            t.saturating_sub(model.start_mono_ns) / 1_000_000_000 + 1
        });
        let before = (self.view.first_second, &self.view.pinned_per_second);
        for (second, ms) in (first_second..forgotten).zip(per_second.iter_mut()) {
            *ms = second
                .checked_sub(before.0)
                .and_then(|i| before.1.get(usize::try_from(i).ok()?))
                .copied()
                .unwrap_or(0);
        }
        let mut throttled_per_second: Vec<u64> = throttled
            .map(|t| t.per_second(first_second, per_second.len()))
            .unwrap_or_else(|| vec![0; per_second.len()])
            .into_iter()
            .map(|ns| ns.div_ceil(1_000_000))
            .collect();
        let before = (self.view.first_second, &self.view.throttled_per_second);
        for (second, ms) in (first_second..forgotten).zip(throttled_per_second.iter_mut()) {
            *ms = second
                .checked_sub(before.0)
                .and_then(|i| before.1.get(usize::try_from(i).ok()?))
                .copied()
                .unwrap_or(0);
        }
        let selected_rows: Vec<Option<RowKey>> = Tab::ALL
            .iter()
            .map(|&tab| self.view.key(tab, self.selected[tab.index()]))
            .collect();
        self.view = View {
            threads,
            pinned_events: pinned.len(),
            pinned_ns: total(pinned.iter().map(PinnedEvent::duration_ns)),
            sites,
            episodes: episodes.len(),
            starved_ns: total(episodes.iter().map(|e| e.end_ns.saturating_sub(e.start_ns))),
            longest_starvation_ns: episodes
                .iter()
                .map(|e| e.end_ns.saturating_sub(e.start_ns))
                .max()
                .unwrap_or(0),
            last_starvation_end_ns: newest,
            starving_now: starving_now.and_then(|(since, carriers)| {
                let (at, _) = model.open_waits.as_ref()?;
                // Only a recent look: a capture that stopped says nothing of now.
                (model.end_mono_ns.saturating_sub(*at) < 3_000_000_000)
                    .then(|| (at.saturating_sub(since), carriers))
            }),
            queued_now: model
                .queued
                .last_key_value()
                .filter(|(at, _)| model.end_mono_ns.saturating_sub(**at) < 3_000_000_000)
                .map(|(_, n)| *n),
            locks,
            syscalls,
            findings,
            pinned_per_second: per_second,
            first_second,
            throttled_per_second,
            throttling,
            cpu_lines,
            starvation_causes,
        };
        // The selection follows its row when the table re-sorts; a row gone leaves it where
        // it was, within the table.
        for (tab, key) in Tab::ALL.into_iter().zip(selected_rows) {
            let rows = self.view.rows(tab);
            let found = key.and_then(|key| self.view.find(tab, &key));
            let selected = &mut self.selected[tab.index()];
            *selected = found.unwrap_or(*selected).min(rows.saturating_sub(1));
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        let tab = self.tab.index();
        match key.code {
            // Not Esc: a lone escape byte may be half an arrow key on a slow link, and quitting
            // ends the recording.
            KeyCode::Char('q') => self.quit = true,
            // Ctrl-C in the view is what it is outside it: an interruption.
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.quit = true;
                self.interrupted = true;
            }
            KeyCode::Tab | KeyCode::Right | KeyCode::Char('l') => {
                self.tab = Tab::ALL[(tab + 1) % Tab::ALL.len()]
            }
            KeyCode::BackTab | KeyCode::Left | KeyCode::Char('h') => {
                self.tab = Tab::ALL[(tab + Tab::ALL.len() - 1) % Tab::ALL.len()]
            }
            KeyCode::Char(c @ '1'..='5') => self.tab = Tab::ALL[c as usize - '1' as usize],
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1),
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1),
            KeyCode::PageDown => self.move_selection(10),
            KeyCode::PageUp => self.move_selection(-10),
            KeyCode::Home | KeyCode::Char('g') => self.move_selection(i64::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_selection(i64::MAX / 2),
            _ => {}
        }
    }

    fn move_selection(&mut self, by: i64) {
        let last = self.view.rows(self.tab).saturating_sub(1) as i64;
        let selected = &mut self.selected[self.tab.index()];
        *selected = (*selected as i64).saturating_add(by).clamp(0, last) as usize;
    }

    pub fn selected(&self) -> usize {
        self.selected[self.tab.index()]
    }
}

const SECOND: u64 = 1_000_000_000;

/// The first second of the window (from its start) the timeline gives (see `per_second`).
fn timeline_start(model: &Model) -> u64 {
    let seconds = model.duration_ns().div_ceil(SECOND).max(1);
    seconds.saturating_sub(TIMELINE_SECONDS)
}

/// Pinned carrier time per second of the window, in ms, for its latest `TIMELINE_SECONDS`
/// seconds (from `timeline_start`): an event spanning a second boundary counts in both
/// seconds. Work and memory follow the events and that bound, never the window's length or
/// an event's.
fn per_second(model: &Model, pinned: &[PinnedEvent]) -> Vec<u64> {
    let seconds = model.duration_ns().div_ceil(SECOND).max(1);
    let first = timeline_start(model);
    let len = (seconds - first) as usize;
    // Times from the start of the first second given (`first * SECOND` is within the window,
    // whose end is `start + duration`: no overflow).
    let origin = model.start_mono_ns.saturating_add(first * SECOND);
    let end = origin.saturating_add(len as u64 * SECOND);
    let mut ns = vec![0u64; len];
    // Seconds covered whole by an event: +1 where such a run begins, -1 after it ends.
    let mut whole = vec![0i64; len + 1];
    for e in pinned {
        let (from, until) = (e.start_ns.max(origin), e.end_ns.min(end));
        if from >= until {
            continue;
        }
        let (from, until) = (from - origin, until - origin);
        let (a, b) = ((from / SECOND) as usize, ((until - 1) / SECOND) as usize);
        if a == b {
            add(&mut ns[a], until - from);
            continue;
        }
        add(&mut ns[a], (a as u64 + 1) * SECOND - from);
        add(&mut ns[b], until - b as u64 * SECOND);
        whole[a + 1] += 1;
        whole[b] -= 1;
    }
    let mut covering: i64 = 0;
    for (slot, delta) in ns.iter_mut().zip(&whole) {
        covering += delta;
        add(slot, (covering.max(0) as u64).saturating_mul(SECOND));
    }
    ns.into_iter().map(|n| n / 1_000_000).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn keys_move_between_tabs_and_rows_within_bounds() {
        let mut app = App::new("test".into(), true, None);
        app.on_key(key(KeyCode::Tab));
        assert_eq!(app.tab, Tab::Pinned);
        app.on_key(key(KeyCode::BackTab));
        app.on_key(key(KeyCode::BackTab));
        assert_eq!(app.tab, Tab::Syscalls);
        app.on_key(key(KeyCode::Char('4')));
        assert_eq!(app.tab, Tab::Locks);
        app.view.locks = vec![
            LockRow {
                address: 1,
                kind: LockKind::Futex,
                symbol: None,
                waits: 1,
                wait_ns: 1,
                max_wait_ns: 1,
                waiters: Default::default(),
                holders: Vec::new(),
                holder_frames: Vec::new(),
                waiter_frames: Vec::new(),
                jvm_internal: false,
                java: None,
            };
            3
        ];
        app.on_key(key(KeyCode::Down));
        app.on_key(key(KeyCode::PageDown));
        assert_eq!(app.selected(), 2, "the selection stops at the last row");
        app.on_key(key(KeyCode::Home));
        assert_eq!(app.selected(), 0);
        app.on_key(key(KeyCode::Up));
        assert_eq!(app.selected(), 0);
        assert!(!app.quit);
        app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(app.quit);
    }

    #[test]
    fn the_selection_follows_its_row_when_the_table_re_sorts() {
        use crate::{events::Event, model::intake::hostile};
        let start = 5_000_000_000;
        let mut app = App::new("test".into(), true, None);
        app.on_record(Record::Header(hostile::header(start)));
        let blocked = |tid, from_ms: u64, ms: u64| {
            let from = start + from_ms * 1_000_000;
            Record::Event(Event::OffCpu(hostile::off_cpu(
                tid,
                from,
                from + ms * 1_000_000,
            )))
        };
        app.on_record(blocked(1, 0, 300));
        app.on_record(blocked(2, 0, 100));
        app.refresh();
        app.tab = Tab::Threads;
        let tids = |app: &App| app.view.active_threads().map(|t| t.tid).collect::<Vec<_>>();
        assert_eq!(tids(&app), [1, 2]);
        app.on_key(key(KeyCode::Down));
        // Thread 2 now blocked longest: it moves up, and the selection with it.
        app.on_record(blocked(2, 200, 500));
        app.refresh();
        assert_eq!(tids(&app), [2, 1]);
        assert_eq!(app.selected(), 0, "the selection stayed on thread 2");
    }

    #[test]
    fn throttled_seconds_are_marked_and_said() {
        use crate::{
            events::{CgroupCpu, Event},
            model::intake::hostile,
        };
        let start = 5_000_000_000;
        let mut app = App::new("test".into(), false, None);
        app.on_record(Record::Header(hostile::header(start)));
        // Throttled 300 ms in the second second, nothing in the others.
        for (second, throttled, throttled_ns) in [(0, 0, 0), (1, 0, 0), (2, 3, 300_000_000)] {
            app.on_record(Record::Event(Event::CgroupCpu(CgroupCpu {
                time_ns: start + second * SECOND,
                path: "/shop".into(),
                version: 2,
                cpu_max: Some("20000 100000".into()),
                nr_periods: second * 10,
                nr_throttled: throttled,
                throttled_ns,
            })));
        }
        app.on_record(Record::End(crate::recording::End {
            end_mono_ns: start + 3 * SECOND,
            reason: crate::recording::StopReason::Duration,
        }));
        app.refresh();
        assert_eq!(app.view.throttled_per_second, [0, 300, 0]);
        assert_eq!(
            app.view.throttling.as_deref(),
            Some("CPU quota: 20000 100000 (cgroup v2 /shop): throttled 3 of 20 periods, 300.0ms")
        );
        let backend = ratatui::backend::TestBackend::new(100, 30);
        let mut terminal = ratatui::Terminal::new(backend).unwrap();
        terminal
            .draw(|frame| super::super::draw::draw(frame, &app))
            .unwrap();
        let screen: String = terminal
            .backend()
            .buffer()
            .content()
            .chunks(100)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n")
            .collect();
        assert!(screen.contains("CPU quota: 20000 100000"), "{screen}");
        assert!(screen.contains("CPU quota throttled (1 s)"), "{screen}");
        assert!(screen.contains(" \u{2580} "), "{screen}");
    }

    /// A replay of a hostile recording: its records through the app's state, as the view
    /// takes them, with the figures recomputed between them.
    fn replay(recording: crate::recording::Recording, window: Option<u64>) -> App {
        let mut app = App::new(
            "test".into(),
            false,
            window.map(std::time::Duration::from_secs),
        );
        app.on_record(Record::Header(recording.header));
        for (i, event) in recording.events.into_iter().enumerate() {
            app.on_record(Record::Event(event));
            if i % 100 == 0 {
                app.refresh();
            }
        }
        if let Some(end) = recording.end {
            app.on_record(Record::End(end));
        }
        app.on_disconnect();
        app.refresh();
        for tab in Tab::ALL {
            app.tab = tab;
            app.on_key(key(KeyCode::End));
        }
        app
    }

    #[test]
    fn a_hostile_replay_keeps_its_timeline_bounded_and_says_what_was_wrong() {
        use crate::model::intake::{MAX_SPAN_NS, hostile};
        let start = 5_000_000_000;
        for end in [Some(u64::MAX), Some(0), None] {
            for window in [None, Some(60)] {
                let app = replay(hostile::recording(start, end, 200, 10), window);
                let model = app.model.as_ref().unwrap();
                assert!(model.duration_ns() <= MAX_SPAN_NS);
                assert_eq!(app.view.pinned_per_second.len() as u64, TIMELINE_SECONDS);
                assert!(app.view.first_second > 0);
                assert!(app.view.pinned_ns > 0);
                let said = |what| model.warnings.iter().any(|w| w.contains(what));
                assert!(said("outside its window"), "{:?}", model.warnings);
                assert!(said("cut to fit"), "{:?}", model.warnings);
            }
        }
    }

    #[test]
    fn the_timeline_keeps_the_latest_seconds_of_a_long_window() {
        let hour = 3_600_000_000_000;
        let model = Model {
            start_mono_ns: 0,
            end_mono_ns: 2 * hour,
            ..Default::default()
        };
        let last = PinnedEvent {
            carrier: 1,
            vthread: 2,
            start_ns: 2 * hour - 2_500_000_000,
            end_ns: u64::MAX,
            blocked_ns: 0,
            reason: crate::analysis::classify::Reason::Monitor,
            operation: crate::analysis::classify::Operation::Park,
            kernel_stack: None,
            user_stack: None,
            java_stack: None,
            monitor: None,
        };
        let all = PinnedEvent {
            start_ns: 0,
            ..last.clone()
        };
        let seconds = per_second(&model, &[last, all]);
        assert_eq!(seconds.len() as u64, TIMELINE_SECONDS);
        assert_eq!(timeline_start(&model), 7200 - TIMELINE_SECONDS);
        let n = seconds.len();
        assert_eq!(seconds[..n - 3], vec![1000; n - 3][..]);
        assert_eq!(seconds[n - 3..], [1500, 2000, 2000]);
    }

    #[test]
    fn pinned_time_is_split_at_second_boundaries() {
        let model = Model {
            start_mono_ns: 10_000_000_000,
            end_mono_ns: 13_000_000_000,
            ..Default::default()
        };
        let event = |start: u64, end: u64| PinnedEvent {
            carrier: 1,
            vthread: 2,
            start_ns: start,
            end_ns: end,
            blocked_ns: end - start,
            reason: crate::analysis::classify::Reason::Monitor,
            operation: crate::analysis::classify::Operation::Park,
            kernel_stack: None,
            user_stack: None,
            java_stack: None,
            monitor: None,
        };
        // 0.5 s in the first second and 0.25 s in the second; 0.1 s in the third.
        let pinned = [
            event(10_500_000_000, 11_250_000_000),
            event(12_000_000_000, 12_100_000_000),
        ];
        assert_eq!(per_second(&model, &pinned), vec![500, 250, 100]);
    }
}
