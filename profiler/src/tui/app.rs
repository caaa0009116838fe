//! The terminal UI's state: the model fed by the record stream, what is selected, and the
//! figures of the last refresh. Nothing here draws (see `draw`).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{
    keys::{self, Action},
    lanes::{Lanes, State},
    timeline::{self, Timeline},
};

use crate::{
    analysis::{
        Analysis,
        classify::{Operation, Reason},
        findings::Finding,
        kinds::{LockKind, ThreadRole},
        locks::{LockRow, SyscallRow},
        monopoly::{self, Monopolized},
        pinning::{PinnedEvent, PinnedSite},
        threads::ThreadRow,
    },
    model::{Model, add, total},
    recording::{Record, StopReason},
    report::secs,
};

/// Lines the stack panes scroll by a key.
const STACK_STEP: u16 = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    Overview,
    Pinned,
    Threads,
    Locks,
    Syscalls,
    /// A swimlane per thread.
    Lanes,
}

impl Tab {
    pub const ALL: [Tab; 6] = [
        Tab::Overview,
        Tab::Pinned,
        Tab::Threads,
        Tab::Locks,
        Tab::Syscalls,
        Tab::Lanes,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Tab::Overview => "Carriers",
            Tab::Pinned => "Pinned sites",
            Tab::Threads => "Threads",
            Tab::Locks => "Locks",
            Tab::Syscalls => "System calls",
            Tab::Lanes => "Thread lanes",
        }
    }

    /// The title where the tabs must fit 80 columns.
    pub fn short_title(self) -> &'static str {
        match self {
            Tab::Pinned => "Pinned",
            Tab::Syscalls => "Syscalls",
            Tab::Lanes => "Lanes",
            tab => tab.title(),
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
    /// Counts the spells that end before `settled` (about to be forgotten), of `spells`
    /// (all those the model has).
    fn count(&mut self, model: &Model, spells: &[Monopolized], settled: u64) {
        if settled <= self.counted_until {
            return;
        }
        for m in spells {
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
#[derive(Clone, Debug, Default)]
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
    /// The starvation episodes, in time order.
    pub episode_marks: Vec<EpisodeMark>,
}

impl View {
    /// The carriers, in the order they started (their lanes stay in place as figures change).
    pub fn carriers(&self) -> impl Iterator<Item = &ThreadRow> {
        let mut carriers: Vec<&ThreadRow> = self
            .threads
            .iter()
            .filter(|t| t.role == ThreadRole::Carrier)
            .collect();
        carriers.sort_by_key(|t| t.tid);
        carriers.into_iter()
    }

    /// Threads that did something in the window (a wait as long as the window, too).
    pub fn active_threads(&self) -> impl Iterator<Item = &ThreadRow> {
        self.threads.iter().filter(|t| {
            t.intervals > 0
                || t.running_ns > 0
                || t.blocked_ns > 0
                || t.pinned_ns > 0
                || t.idle_ns > 0
                || t.preempted_ns > 0
        })
    }

    /// What identifies a tab's row `row`, so that the selection stays on it when the table
    /// re-sorts.
    fn key(&self, tab: Tab, row: usize) -> Option<RowKey> {
        match tab {
            Tab::Overview => self.carriers().nth(row).map(|t| RowKey::Thread(t.tid)),
            Tab::Threads | Tab::Lanes => self
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
            (Tab::Threads | Tab::Lanes, RowKey::Thread(tid)) => {
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
            Tab::Threads | Tab::Lanes => self.active_threads().count(),
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

/// A starvation episode of the window, as the lanes mark it and `n`/`N` go to it.
#[derive(Clone, Debug, PartialEq)]
pub struct EpisodeMark {
    pub start_ns: u64,
    pub end_ns: u64,
    pub cause: crate::analysis::starvation::Cause,
    pub blocked_carriers: u32,
    pub carriers: u32,
}

/// What `Enter` opened: a title and lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Popup {
    pub title: String,
    pub lines: Vec<String>,
}

/// How a table is sorted (`s` cycles through its tab's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    /// The default: most time (blocked and pinned, for threads) first.
    Time,
    /// Most events (waits, calls) first.
    Count,
    /// Longest single one first.
    Max,
    Name,
}

impl Sort {
    const ALL: [Sort; 4] = [Sort::Time, Sort::Count, Sort::Max, Sort::Name];

    pub fn as_str(self) -> &'static str {
        match self {
            Sort::Time => "time",
            Sort::Count => "count",
            Sort::Max => "longest",
            Sort::Name => "name",
        }
    }
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
    /// The figures of the whole window (the header's, the lanes' episodes).
    pub whole: View,
    /// The tables' figures for the span the cursor shows, when it is not the whole window.
    span_view: Option<View>,
    /// The span the tables were computed for.
    computed_span: Option<(u64, u64)>,
    /// That span is the whole window.
    span_whole: bool,
    /// What each thread did over time.
    pub lanes: Lanes,
    pub timeline: Timeline,
    pub tab: Tab,
    /// The selected row of each tab's table.
    pub selected: [usize; Tab::ALL.len()],
    /// Each tab's sort.
    pub sorts: [Sort; Tab::ALL.len()],
    /// Rows shown match this (a thread's name, a frame, a lock, a call).
    pub filter: String,
    /// The filter is being typed.
    pub typing: bool,
    pub help: bool,
    pub popup: Option<Popup>,
    /// The latest thing a key did that the user must be told (a file written).
    pub message: Option<String>,
    /// Where `f` writes its flamegraphs: beside the user (the working directory).
    pub out_dir: std::path::PathBuf,
    /// The stack panes' line kept in view and marked (J/K); back to the top when the
    /// selection or the view changes.
    pub stack_scroll: u16,
    /// The episode `n`/`N` went to, and its culprit site.
    pub episode: Option<(usize, Option<String>)>,
    /// That culprit's row, to select in the pinned sites once the tables cover it.
    culprit: Option<RowKey>,
    culprit_selected: bool,
    pub quit: bool,
    /// Quit with Ctrl-C rather than `q`.
    pub interrupted: bool,
    /// Records arrived since the last refresh.
    changed: bool,
    /// A key changed what the tables show.
    dirty: bool,
}

impl App {
    pub fn new(source: String, live: bool, window: Option<std::time::Duration>) -> Self {
        Self::with_speed(source, live, window, None)
    }

    /// A replay played from its start at `speed` (None: shown at its end).
    pub fn with_speed(
        source: String,
        live: bool,
        window: Option<std::time::Duration>,
        speed: Option<f64>,
    ) -> Self {
        Self {
            source,
            live,
            window,
            starved_at: None,
            monopolized: MonopolizedSoFar::default(),
            model: None,
            status: Status::Running,
            records: 0,
            whole: View::default(),
            span_view: None,
            computed_span: None,
            span_whole: true,
            lanes: Lanes::default(),
            timeline: Timeline::new(live, speed),
            tab: Tab::Overview,
            selected: [0; Tab::ALL.len()],
            sorts: [Sort::Time; Tab::ALL.len()],
            filter: String::new(),
            typing: false,
            help: false,
            popup: None,
            message: None,
            out_dir: std::path::PathBuf::from("."),
            stack_scroll: 0,
            episode: None,
            culprit: None,
            culprit_selected: false,
            quit: false,
            interrupted: false,
            changed: false,
            dirty: false,
        }
    }

    /// The tables' figures: of the span shown.
    pub fn view(&self) -> &View {
        self.span_view.as_ref().unwrap_or(&self.whole)
    }

    /// Whether the tables cover the whole window (not a span of it).
    pub fn span_is_whole(&self) -> bool {
        self.span_whole
    }

    /// The window the model covers: (start, end).
    pub fn bounds(&self) -> (u64, u64) {
        self.model.as_ref().map_or((0, 0), |m| {
            let start = m.forgotten_before.unwrap_or(0).max(m.start_mono_ns);
            (start, m.end_mono_ns.max(start))
        })
    }

    /// The cursor's time, within the window: at its end, the last moment in it (the cell the
    /// cursor marks is the last one that has anything).
    pub fn cursor_in_window(&self) -> u64 {
        let (start, end) = self.bounds();
        self.timeline
            .cursor_ns
            .min(end.saturating_sub(1))
            .max(start)
    }

    /// The cursor's cell on the lanes: (its start, its length). At the live edge, the cell up
    /// to what the lanes know: records newer than their last refresh are not in them yet.
    pub fn cursor_cell(&self) -> Option<(u64, u64)> {
        let (start, end) = self.bounds();
        let range = self.timeline.range(start, end);
        let i = range.cell_of(self.cursor_in_window())?;
        let from = range.from_ns + i as u64 * range.cell_ns;
        let from = from.min(
            self.lanes
                .known_until
                .saturating_sub(range.cell_ns)
                .max(range.from_ns),
        );
        Some((from, range.cell_ns))
    }

    /// The time `t` as the view says it: from the recording's start, to the millisecond, or
    /// finer when the cells are (a cell of 10 µs tells times 10 µs apart).
    pub fn at(&self, t: u64) -> String {
        let start = self.model.as_ref().map_or(0, |m| m.start_mono_ns);
        let (from, end) = self.bounds();
        let decimals = match self.timeline.cell_ns(from, end) {
            c if c >= 1_000_000 => 3,
            c if c >= 100_000 => 4,
            c if c >= 10_000 => 5,
            _ => 6,
        };
        format!("{:.decimals$}s", t.saturating_sub(start) as f64 / 1e9)
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

    /// The terminal is `width` columns wide: the lanes have that many cells less labels.
    pub fn on_resize(&mut self, width: u16) {
        let cells = super::draw::lane_cells(width);
        if cells != self.timeline.cells {
            self.timeline.cells = cells;
            self.dirty = true;
        }
    }

    /// Whether carriers starved in the last few seconds.
    pub fn starved_lately(&self) -> bool {
        self.starved_at
            .is_some_and(|at| at.elapsed() < std::time::Duration::from_secs(5))
    }

    /// What the tables cover, in a few words: " (last 60 s)" once the view covers only the
    /// latest time, " (1.200s-3.400s)" for a span, else nothing.
    pub fn window_note(&self) -> String {
        if let Some((from, to)) = self.computed_span.filter(|_| !self.span_whole) {
            return format!(" ({}-{})", self.at(from), self.at(to));
        }
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

    /// A key changed what the tables must show.
    pub fn needs_recompute(&self) -> bool {
        self.dirty
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

    /// Moves the cursor with time (following the newest, or playing).
    pub fn tick(&mut self) {
        let (start, end) = self.bounds();
        // A replay still reading its file plays on past what it has read so far.
        let complete = self.live || self.status != Status::Running;
        self.timeline.tick(start, end, complete);
    }

    /// Recomputes the figures: the window's if records came since the last time, the
    /// tables' if those or the span they cover changed.
    pub fn refresh(&mut self) {
        self.refresh_with(self.changed);
    }

    /// Recomputes the tables if the span they cover changed (a key), but takes in no new
    /// records: what a key costs does not grow with the window.
    pub fn refresh_tables(&mut self) {
        self.refresh_with(false);
    }

    fn refresh_with(&mut self, take_in: bool) {
        // The selection follows its row when the figures change.
        let selected_rows: Vec<Option<RowKey>> = Tab::ALL
            .iter()
            .map(|&tab| self.view().key(tab, self.selected[tab.index()]))
            .collect();
        if take_in {
            self.changed = false;
            self.take_in();
            self.tick();
        }
        let (start, end) = self.bounds();
        let span = self.timeline.span(start, end);
        if self.computed_span != Some(span) || self.dirty {
            self.dirty = false;
            self.tables(span, (start, end), selected_rows);
        }
    }

    /// The model's housekeeping and the whole window's figures, after records came.
    fn take_in(&mut self) {
        let Some(model) = &mut self.model else {
            return;
        };
        // What views never need one by one is summed once settled: memory and refresh time
        // then grow with pinning, not with every context switch. The lanes keep it first.
        // A replay keeps it all, as `report` does: its figures are the report's, and its
        // memory the file's.
        let settled = model.end_mono_ns.saturating_sub(FOLD_AFTER_NS);
        let spells = monopoly::monopolized(model, monopoly::DEFAULT_THRESHOLD_NS);
        let folded = if self.live {
            self.monopolized.count(model, &spells, settled);
            model.fold_settled(settled)
        } else {
            Vec::new()
        };
        if let Some(window) = self.window {
            model.forget_before(model.end_mono_ns.saturating_sub(window.as_nanos() as u64));
        }
        let model = &*model;
        // One analysis per refresh; the view keeps its figures until the next.
        let analysis = Analysis::new(model);
        self.lanes.absorb(folded, &spells, &analysis, settled);
        let whole = figures(&analysis, &self.monopolized, &self.whole);
        // Episodes are known once they end: flag a new one for a few seconds.
        if whole.last_starvation_end_ns.is_some()
            && whole.last_starvation_end_ns > self.whole.last_starvation_end_ns
        {
            self.starved_at = Some(std::time::Instant::now());
        }
        self.whole = whole;
        // The whole window's tables are the whole figures: no span view.
        self.computed_span = None;
    }

    /// The tables' figures for `span` of the window `bounds`: the whole window's figures
    /// when it is all of it, else those of the part of the model in it.
    fn tables(&mut self, span: (u64, u64), bounds: (u64, u64), selected_rows: Vec<Option<RowKey>>) {
        let whole = span.0 <= bounds.0 && span.1 >= bounds.1;
        self.span_view = match &self.model {
            Some(model) if !whole => {
                let mut part = model.clone();
                part.keep_span(span.0, span.1);
                let analysis = Analysis::new(&part);
                let mut view = figures(&analysis, &MonopolizedSoFar::default(), &View::default());
                // Thread times from the lanes: the model folded the past away.
                view.threads = self.lanes.rows(model, span.0, span.1);
                Some(view)
            }
            _ => None,
        };
        self.computed_span = Some(span);
        self.span_whole = whole;
        // Filtered or sorted otherwise, the whole window's figures are copied: the filter
        // may be cleared, and its rows must come back.
        let filter = self.filter.to_lowercase();
        if self.span_view.is_none()
            && (!filter.is_empty() || self.sorts != [Sort::Time; Tab::ALL.len()])
        {
            self.span_view = Some(self.whole.clone());
        }
        if let Some(view) = &mut self.span_view {
            narrow(view, &filter, &self.sorts);
        }
        // The culprit of the episode `n` went to, selected once.
        if let Some(key) = self.culprit.take()
            && let Some(row) = self.view().find(Tab::Pinned, &key)
        {
            self.selected[Tab::Pinned.index()] = row;
            self.culprit_selected = true;
        }
        // The selection follows its row when the table re-sorts; a row gone leaves it where
        // it was, within the table.
        for (tab, key) in Tab::ALL.into_iter().zip(selected_rows) {
            if tab == Tab::Pinned && std::mem::take(&mut self.culprit_selected) {
                continue;
            }
            let rows = self.view().rows(tab);
            let found = key.and_then(|key| self.view().find(tab, &key));
            let selected = &mut self.selected[tab.index()];
            *selected = found.unwrap_or(*selected).min(rows.saturating_sub(1));
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        // Any key closes the help.
        if self.help {
            self.help = false;
            return;
        }
        if self.typing {
            match key.code {
                KeyCode::Enter => self.typing = false,
                KeyCode::Esc => {
                    self.typing = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                    self.quit = true;
                    self.interrupted = true;
                }
                KeyCode::Char(c) if self.filter.chars().count() < 64 => self.filter.push(c),
                _ => {}
            }
            self.dirty = true;
            return;
        }
        let Some(action) = keys::action(key) else {
            return;
        };
        let (start, end) = self.bounds();
        let tab = self.tab.index();
        let cell = self.timeline.range(start, end).cell_ns;
        let shown = (self.tab, self.selected());
        self.act(action, tab, cell, (start, end));
        // Another row or view: its stack from the top.
        if (self.tab, self.selected()) != shown {
            self.stack_scroll = 0;
        }
    }

    fn act(&mut self, action: Action, tab: usize, cell: u64, (start, end): (u64, u64)) {
        match action {
            Action::Quit => self.quit = true,
            Action::Interrupt => {
                self.quit = true;
                self.interrupted = true;
            }
            Action::NextTab => self.tab = Tab::ALL[(tab + 1) % Tab::ALL.len()],
            Action::PreviousTab => self.tab = Tab::ALL[(tab + Tab::ALL.len() - 1) % Tab::ALL.len()],
            Action::Tab(i) => self.tab = Tab::ALL[i.min(Tab::ALL.len() - 1)],
            Action::Down => self.move_selection(1),
            Action::Up => self.move_selection(-1),
            Action::StackDown => {
                let last = self.stack_pane_lines().saturating_sub(1);
                self.stack_scroll = self
                    .stack_scroll
                    .saturating_add(STACK_STEP)
                    .min(u16::try_from(last).unwrap_or(u16::MAX));
            }
            Action::StackUp => self.stack_scroll = self.stack_scroll.saturating_sub(STACK_STEP),
            Action::PageDown => self.move_selection(10),
            Action::PageUp => self.move_selection(-10),
            Action::FirstRow => self.move_selection(i64::MIN / 2),
            Action::LastRow => self.move_selection(i64::MAX / 2),
            Action::CellBack => self.timeline.seek(-(cell as i64), start, end),
            Action::CellOn => self.timeline.seek(cell as i64, start, end),
            Action::SecondBack => self.timeline.seek(-(SECOND as i64), start, end),
            Action::SecondOn => self.timeline.seek(SECOND as i64, start, end),
            Action::PlayPause => self.timeline.play_pause(self.live, start, end),
            Action::Slower => self.timeline.faster(false),
            Action::Faster => self.timeline.faster(true),
            Action::NextEpisode | Action::PreviousEpisode => {
                self.go_to_episode(action == Action::NextEpisode)
            }
            Action::Start => self.timeline.go_to(start, start, end),
            Action::End => {
                self.timeline.go_to(end, start, end);
                self.timeline.following = true;
            }
            Action::ZoomIn => self.timeline.zoom(true, start, end),
            Action::ZoomOut => self.timeline.zoom(false, start, end),
            Action::ZoomFit => self.timeline.zoom_fit(),
            Action::Mark => self.timeline.toggle_mark(),
            Action::Open => self.popup = self.open(),
            Action::Close => {
                self.popup = None;
                self.filter.clear();
                self.timeline.mark_ns = None;
                self.message = None;
            }
            Action::Filter => {
                self.typing = true;
                self.filter.clear();
            }
            Action::Sort => {
                // The thread lanes are the threads table's rows.
                let tab = if self.tab == Tab::Lanes {
                    Tab::Threads.index()
                } else {
                    tab
                };
                let sort = &mut self.sorts[tab];
                let i = Sort::ALL.iter().position(|s| s == sort).unwrap_or(0);
                *sort = Sort::ALL[(i + 1) % Sort::ALL.len()];
            }
            Action::Flamegraph => self.message = Some(self.write_flamegraph()),
            Action::Help => self.help = true,
        }
        self.dirty = true;
    }

    /// Puts the cursor on the next (or previous) starvation episode from the cursor.
    fn go_to_episode(&mut self, next: bool) {
        let (start, end) = self.bounds();
        let marks = &self.whole.episode_marks;
        let at = self.timeline.cursor_ns;
        // (An episode that starts at the cursor is next unless the cursor went to it.)
        let on = self.episode.as_ref().map(|(i, _)| *i);
        let found = if next && self.live && self.timeline.following {
            // Following a live target, the cursor is the present: the latest episode is
            // the one to see.
            marks.len().checked_sub(1)
        } else if next {
            marks
                .iter()
                .enumerate()
                .position(|(i, e)| e.start_ns > at || (e.start_ns == at && on != Some(i)))
        } else {
            marks.iter().rposition(|e| e.start_ns < at)
        };
        // Past the last, round to the first (and back): a replay opens at its end.
        let (found, wrapped) = match found {
            Some(i) => (Some(i), false),
            None if next => (marks.first().map(|_| 0), true),
            None => (marks.len().checked_sub(1), true),
        };
        let Some(i) = found else {
            self.message = Some("no starvation episode".into());
            return;
        };
        let e = marks[i].clone();
        // Zoomed so that the episode takes about a third of the lanes, from one episode's
        // length before it.
        let length = e.end_ns.saturating_sub(e.start_ns).max(1);
        let cells = self.timeline.cells.max(1) as u64;
        let want = length.saturating_mul(3) / cells;
        let zoom = timeline::LADDER.iter().position(|c| *c >= want.max(1));
        self.timeline.zoom = zoom;
        self.timeline
            .go_to_showing(e.start_ns, e.start_ns.saturating_sub(length), start, end);
        // Its culprit: the site with most pinned time in it.
        let culprit = self.model.as_ref().and_then(|model| {
            let analysis = Analysis::new(model);
            let events: Vec<PinnedEvent> = analysis
                .pinned_events()
                .iter()
                .filter(|p| p.end_ns > e.start_ns && p.start_ns < e.end_ns)
                .map(|p| PinnedEvent {
                    start_ns: p.start_ns.max(e.start_ns),
                    end_ns: p.end_ns.min(e.end_ns),
                    ..p.clone()
                })
                .collect();
            crate::analysis::pinning::pinned_sites(model, &events)
                .into_iter()
                .next()
        });
        self.episode = Some((i, culprit.as_ref().map(super::draw::site_label)));
        self.culprit = culprit.map(|s| RowKey::Site(s.reason, s.operation, s.stack.frames));
        self.message = wrapped.then(|| {
            format!(
                "no {} starvation episode: back to the {}",
                if next { "later" } else { "earlier" },
                if next { "first" } else { "last" }
            )
        });
        self.tab = match self.tab {
            Tab::Overview | Tab::Pinned => self.tab,
            _ => Tab::Overview,
        };
    }

    /// What happened on the selected lane at the cursor: the wait (its state, times,
    /// virtual thread, stack, waker), or the running between waits.
    fn open(&self) -> Option<Popup> {
        let model = self.model.as_ref()?;
        let tid = match self.tab {
            Tab::Overview => self.view().carriers().nth(self.selected())?.tid,
            Tab::Lanes | Tab::Threads => self.view().active_threads().nth(self.selected())?.tid,
            _ => return None,
        };
        let t = self.timeline.cursor_ns;
        let name = model.thread_name(tid);
        // What the cursor's cell shows (its main wait), as the line above the lanes says:
        // at 100 ms a cell, not a 40 µs wait that happens to lie under the cursor's instant.
        let span = match self.cursor_cell() {
            Some((from, cell_ns)) => self.lanes.main_span(tid, from, cell_ns),
            None => self.lanes.span_at(tid, t),
        };
        let Some(span) = span else {
            let mounted = self
                .lanes
                .mounted_at(tid, t, t)
                .map_or("none seen".to_string(), |v| format!("#{v}"));
            return Some(Popup {
                title: format!(" {name} at {} ", self.at(t)),
                lines: vec![
                    "running (or in waits too short to record, or not alive; a thread other \
                     than a carrier: or in a wait that began before attach)"
                        .into(),
                    format!("virtual thread mounted: {mounted}"),
                ],
            });
        };
        let mut lines = vec![format!(
            "{} from {} for {}",
            span.state.as_str(),
            self.at(span.start_ns),
            secs(span.end_ns.saturating_sub(span.start_ns))
        )];
        lines.push(format!(
            "virtual thread mounted: {}",
            span.vthread.map_or("none".to_string(), |v| format!("#{v}"))
        ));
        // The wait itself, while the model still has it one by one.
        if let Some(o) = model
            .off_cpu
            .iter()
            .find(|o| o.tid == tid && o.start_ns == span.start_ns)
        {
            if let Some(waker) = o.waker_tid() {
                lines.push(format!("woken by {} ({waker})", model.thread_name(waker)));
            }
            if let Some(m) = o.monitor() {
                let class = model.monitor_class(m, o.start_ns).unwrap_or("an object");
                lines.push(format!("monitor: {class} at {m:#x}"));
            }
            // Who held the monitor it waited to enter, as read during the wait.
            if let Some((_, (_, owner))) = model
                .monitor_owners
                .get(&tid)
                .and_then(|reads| reads.range(o.start_ns..=o.end_ns).next())
            {
                lines.push(format!(
                    "held by {}",
                    crate::analysis::locks::owner_label(owner)
                ));
            }
            lines.push("stack, innermost first:".into());
            let frames = model.frames(o);
            let monitors = crate::analysis::stacks::monitor_frames(&frames);
            let stack = crate::analysis::stacks::StackLabels::new(&frames, monitors);
            // The kernel and native frames on top say how it waits, in one line: the Java
            // frames (where) then fit a small terminal.
            let native = |i: usize| stack.frame_kinds.get(i).is_some_and(|k| k.is_native());
            let on_top = (0..stack.frames.len()).take_while(|&i| native(i)).count();
            let skip = if on_top > 1 && on_top < stack.frames.len() {
                lines.push(format!(
                    "  {} … {}  ({on_top} kernel and native frames)",
                    stack.frames[0],
                    stack.frames[on_top - 1]
                ));
                on_top
            } else {
                0
            };
            lines.extend((skip..stack.frames.len()).map(|i| {
                let holds = if stack.monitor_frames.contains(&i) {
                    "  [holds monitor]"
                } else {
                    ""
                };
                format!("  {}{holds}", stack.display(i))
            }));
        } else if span.state == State::Monopolized {
            lines.push("computing without a break (on-CPU samples)".into());
        } else {
            lines.push("(its stack is no longer kept: the view keeps only recent ones)".into());
        }
        Some(Popup {
            title: format!(" {name} ({tid}) at {} ", self.at(t)),
            lines,
        })
    }

    /// Writes a flamegraph of the span shown (all it blocked or ran: the wall-clock kind)
    /// and says where.
    fn write_flamegraph(&self) -> String {
        let Some(model) = &self.model else {
            return "nothing recorded yet".into();
        };
        let (from, to) = self.computed_span.unwrap_or(self.bounds());
        let mut part = model.clone();
        part.keep_span(from, to);
        let analysis = Analysis::new(&part);
        let options = crate::flamegraph::Options {
            kind: crate::flamegraph::Kind::Wall,
            ..Default::default()
        };
        let name = format!(
            "pinprof-{}-{}-{}.svg",
            model.target.pid,
            self.at(from).trim_end_matches('s'),
            self.at(to).trim_end_matches('s')
        );
        // Beside the user, as every other output: the view may run as root, and a shared
        // temporary directory is where others can plant a name.
        let path = self.out_dir.join(name);
        // Its name is pinprof's, by the span: the same span saved again is the same graph.
        let written =
            crate::safe_fs::write_output(&path, crate::safe_fs::Existing::Replace, |out| {
                crate::flamegraph::write_svg(&analysis, &options, out)
            });
        match written {
            Ok(()) => format!(
                "flamegraph of {}-{} written to {}",
                self.at(from),
                self.at(to),
                std::path::absolute(&path).unwrap_or(path).display()
            ),
            Err(e) => format!("cannot write the flamegraph: {e:#}"),
        }
    }

    fn move_selection(&mut self, by: i64) {
        let last = self.view().rows(self.tab).saturating_sub(1) as i64;
        let selected = &mut self.selected[self.tab.index()];
        *selected = (*selected as i64).saturating_add(by).clamp(0, last) as usize;
    }

    /// Lines of the stack panes of the view shown (the longest, where there are two).
    fn stack_pane_lines(&self) -> usize {
        let view = self.view();
        match self.tab {
            Tab::Pinned => view
                .sites
                .get(self.selected())
                .map_or(0, |s| super::draw::stack_lines(&s.stack).len()),
            Tab::Locks => view
                .locks
                .get(self.selected())
                .map_or(0, |l| l.holder_frames.len().max(l.waiter_frames.len())),
            _ => 0,
        }
    }

    pub fn selected(&self) -> usize {
        self.selected[self.tab.index()]
    }
}

/// The figures of an analysis. `monopolized`: the spells counted before the model forgot
/// them; `before`: the previous figures, whose seconds the model has forgotten since.
fn figures(analysis: &Analysis, monopolized: &MonopolizedSoFar, before: &View) -> View {
    let model = analysis.model();
    let starving_now = analysis.starving_now();
    let throttling = crate::report::throttling_label(analysis);
    let cpu_lines = monopolized
        .line(analysis)
        .into_iter()
        .chain(crate::report::scheduler_label(analysis))
        .collect();
    let throttled = analysis.throttling().cloned();
    let threads = analysis.threads().to_vec();
    let pinned = analysis.pinned_events();
    let sites = analysis.pinned_sites().to_vec();
    let episodes = analysis.starvation();
    let locks = analysis.locks().to_vec();
    let syscalls = analysis.syscalls().to_vec();
    let findings = analysis.findings().to_vec();
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
    // Seconds the model has forgotten keep the figures they had.
    let first_second = timeline_start(model);
    let mut per_second = per_second(model, pinned);
    let forgotten = model.forgotten_before.map_or(0, |t| {
        t.saturating_sub(model.start_mono_ns) / 1_000_000_000 + 1
    });
    let kept = |before_first: u64, before: &[u64], out: &mut [u64]| {
        for (second, ms) in (first_second..forgotten).zip(out.iter_mut()) {
            *ms = second
                .checked_sub(before_first)
                .and_then(|i| before.get(usize::try_from(i).ok()?))
                .copied()
                .unwrap_or(0);
        }
    };
    kept(
        before.first_second,
        &before.pinned_per_second,
        &mut per_second,
    );
    let mut throttled_per_second: Vec<u64> = throttled
        .map(|t| t.per_second(first_second, per_second.len()))
        .unwrap_or_else(|| vec![0; per_second.len()])
        .into_iter()
        .map(|ns| ns.div_ceil(1_000_000))
        .collect();
    kept(
        before.first_second,
        &before.throttled_per_second,
        &mut throttled_per_second,
    );
    View {
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
        last_starvation_end_ns: episodes.last().map(|e| e.end_ns),
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
        episode_marks: episodes
            .iter()
            .map(|e| EpisodeMark {
                start_ns: e.start_ns,
                end_ns: e.end_ns,
                cause: e.cause,
                blocked_carriers: e.blocked_carriers,
                carriers: e.carriers,
            })
            .collect(),
    }
}

/// Keeps the rows that match `filter` (lowercase; empty: all) and sorts each table as asked.
fn narrow(view: &mut View, filter: &str, sorts: &[Sort; Tab::ALL.len()]) {
    let matches = |text: &str| filter.is_empty() || text.to_lowercase().contains(filter);
    if !filter.is_empty() {
        view.threads
            .retain(|t| matches(&t.name) || matches(&t.tid.to_string()));
        view.sites
            .retain(|s| s.stack.frames.iter().any(|f| matches(f)));
        view.locks.retain(|l| {
            l.java.as_ref().is_some_and(|j| matches(&j.class))
                || l.symbol.as_deref().is_some_and(matches)
                || l.waiters.iter().any(|w| matches(w))
                || l.holder_frames
                    .iter()
                    .chain(&l.waiter_frames)
                    .any(|f| matches(f))
        });
        view.syscalls
            .retain(|c| matches(&c.name) || c.files.iter().any(|(name, _, _)| matches(name)));
    }
    let by = |tab: Tab| sorts[tab.index()];
    match by(Tab::Threads) {
        Sort::Time => {}
        Sort::Count => view.threads.sort_by_key(|r| std::cmp::Reverse(r.intervals)),
        Sort::Max => view
            .threads
            .sort_by_key(|r| std::cmp::Reverse(r.running_ns)),
        Sort::Name => view.threads.sort_by(|a, b| a.name.cmp(&b.name)),
    }
    match by(Tab::Pinned) {
        Sort::Time => {}
        Sort::Count => view.sites.sort_by_key(|r| std::cmp::Reverse(r.events)),
        Sort::Max => view.sites.sort_by_key(|r| std::cmp::Reverse(r.max_ns)),
        Sort::Name => view.sites.sort_by_cached_key(super::draw::site_label),
    }
    match by(Tab::Locks) {
        Sort::Time => {}
        Sort::Count => view.locks.sort_by_key(|r| std::cmp::Reverse(r.waits)),
        Sort::Max => view.locks.sort_by_key(|r| std::cmp::Reverse(r.max_wait_ns)),
        Sort::Name => view.locks.sort_by_key(|l| l.address),
    }
    match by(Tab::Syscalls) {
        Sort::Time => {}
        Sort::Count => view.syscalls.sort_by_key(|r| std::cmp::Reverse(r.events)),
        Sort::Max => view.syscalls.sort_by_key(|r| std::cmp::Reverse(r.max_ns)),
        Sort::Name => view.syscalls.sort_by(|a, b| a.name.cmp(&b.name)),
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
        assert_eq!(app.tab, Tab::Lanes);
        app.on_key(key(KeyCode::Char('4')));
        assert_eq!(app.tab, Tab::Locks);
        app.whole.locks = vec![
            LockRow {
                address: 1,
                kind: LockKind::Futex,
                symbol: None,
                waits: 1,
                wait_ns: 1,
                max_wait_ns: 1,
                waiting_at_end: 0,
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
        app.on_key(key(KeyCode::Char('g')));
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
        let tids = |app: &App| {
            app.view()
                .active_threads()
                .map(|t| t.tid)
                .collect::<Vec<_>>()
        };
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
        app.on_resize(100);
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
        assert_eq!(app.view().throttled_per_second, [0, 300, 0]);
        assert_eq!(
            app.view().throttling.as_deref(),
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
        // The lanes mark the throttled second, in its row: a second of cells.
        let row = screen
            .lines()
            .find(|l| l.starts_with("│throttled"))
            .unwrap_or_else(|| panic!("{screen}"));
        let marked = row.chars().filter(|c| *c == '\u{2580}').count() as u64;
        let (start, end) = app.bounds();
        let cell = app.timeline.range(start, end).cell_ns;
        assert_eq!(marked, SECOND / cell, "{screen}");
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
            app.on_key(key(KeyCode::Char('G')));
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
                assert_eq!(app.view().pinned_per_second.len() as u64, TIMELINE_SECONDS);
                assert!(app.view().first_second > 0);
                assert!(app.view().pinned_ns > 0);
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
