//! What each thread did over time, kept for the swimlanes: its waits as spans of a state,
//! running between them. The live view folds settled waits into sums to bound its refresh
//! (`Model::fold_settled`); the lanes take each wait before that, in a compact form, so the
//! past can still be drawn and summed by span. State only: `draw` turns it into cells.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::{
    analysis::{
        Analysis,
        classify::{StackMarks, Use, classify_with},
        monopoly::Monopolized,
        threads::ThreadRow,
    },
    model::{Model, Wait, add, total},
};

/// What a thread did in a span (or a cell: what took most of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// A mounted virtual thread blocked its carrier.
    Pinned,
    /// Off CPU waiting for something (sleep, lock, I/O).
    Blocked,
    /// A virtual thread computed on its carrier for long (`analysis::monopoly`).
    Monopolized,
    /// Runnable, waiting for a CPU.
    Preempted,
    Running,
    /// A carrier parked with nothing to do.
    Idle,
}

impl State {
    pub const ALL: [State; 6] = [
        State::Pinned,
        State::Blocked,
        State::Monopolized,
        State::Preempted,
        State::Running,
        State::Idle,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Pinned => "pinned",
            State::Blocked => "blocked",
            State::Monopolized => "monopolized",
            State::Preempted => "waiting for a CPU",
            State::Running => "running",
            State::Idle => "idle",
        }
    }

    fn of(used: Option<Use>) -> State {
        match used {
            None => State::Preempted,
            Some(Use::Idle) => State::Idle,
            Some(Use::Pinned(..)) => State::Pinned,
            Some(Use::Blocked | Use::BlockedMounted) => State::Blocked,
        }
    }
}

/// A wait (or a monopolization spell) of one thread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub start_ns: u64,
    pub end_ns: u64,
    pub state: State,
    /// The virtual thread mounted, when one was (carriers).
    pub vthread: Option<u64>,
}

/// A cell of a lane: the time each state took in it; drawn as the state that took most.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cell {
    pub ns: [u64; 6],
}

impl Cell {
    /// What took most of the cell (None: the thread was not alive in it, or not known).
    pub fn state(&self) -> Option<State> {
        let (i, ns) = self
            .ns
            .iter()
            .enumerate()
            .max_by_key(|(i, ns)| (**ns, std::cmp::Reverse(*i)))?;
        (*ns > 0).then_some(State::ALL[i])
    }

    pub fn get(&self, state: State) -> u64 {
        self.ns[state as usize]
    }

    fn add(&mut self, state: State, ns: u64) {
        add(&mut self.ns[state as usize], ns);
    }
}

/// Spans kept per thread at most: a thread waiting a million times is drawn from its latest
/// million waits (older cells show as unknown).
const MAX_SPANS_PER_THREAD: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct Lanes {
    /// Settled spans by thread, in time order.
    settled: HashMap<u32, VecDeque<Span>>,
    /// Waits that ended before this were taken into `settled`.
    settled_until: u64,
    /// The spans not settled yet (and waits under way), as of the latest refresh.
    recent: HashMap<u32, Vec<Span>>,
    /// Each thread's life in the window, as of the latest refresh.
    lives: HashMap<u32, (u64, u64)>,
    /// Spans older than this were dropped (the view's window, or the cap): not known.
    pub known_from: u64,
    /// The model's end at the latest refresh: what the lanes know goes up to there.
    pub known_until: u64,
}

impl Lanes {
    /// Takes what the model has now, at a refresh: `folded`, the waits it just folded away
    /// (they are settled: kept here for good), its waits left (settled once they ended
    /// before `settled`, else kept until the next refresh), its waits under way, and the
    /// monopolization `spells` read before its samples were forgotten.
    pub fn absorb(
        &mut self,
        folded: Vec<(Wait, Option<Use>)>,
        spells: &[Monopolized],
        analysis: &Analysis,
        settled: u64,
    ) {
        let model = analysis.model();
        if self.known_from == 0 {
            self.known_from = model.start_mono_ns;
        }
        // (Emptied, not dropped: the same few threads' vectors are refilled every refresh.)
        for spans in self.recent.values_mut() {
            spans.clear();
        }
        let span = |o: &Wait, used: Option<Use>| Span {
            start_ns: o.start_ns,
            end_ns: o.end_ns,
            state: State::of(used),
            vthread: o.java().and_then(|j| j.vthread),
        };
        for (o, used) in &folded {
            if o.end_ns >= self.settled_until {
                push(self.settled.entry(o.tid).or_default(), span(o, *used));
            }
        }
        let classes = analysis.classes();
        for (o, used) in model.off_cpu.iter().zip(classes.iter().copied()) {
            if o.end_ns < self.settled_until {
                continue;
            }
            if o.end_ns < settled {
                push(self.settled.entry(o.tid).or_default(), span(o, used));
            } else {
                self.recent.entry(o.tid).or_default().push(span(o, used));
            }
        }
        // A few waits under way (each reads its own stacks): seen at the latest checkpoint,
        // and not ended since (their end would have come as a wait), so under way up to the
        // newest record.
        for o in &crate::analysis::threads::open_intervals(model) {
            let used = classify_with(model, o, &StackMarks::default());
            let mut under_way = span(o, used);
            under_way.end_ns = under_way.end_ns.max(model.end_mono_ns);
            self.recent.entry(o.tid).or_default().push(under_way);
        }
        for m in spells {
            if m.end_ns < self.settled_until {
                continue;
            }
            let span = Span {
                start_ns: m.start_ns,
                end_ns: m.end_ns,
                state: State::Monopolized,
                vthread: Some(m.vthread),
            };
            if m.end_ns < settled {
                push(self.settled.entry(m.carrier).or_default(), span);
            } else {
                self.recent.entry(m.carrier).or_default().push(span);
            }
        }
        self.recent.retain(|_, spans| !spans.is_empty());
        // Threads idle since before the window with no wait seen (the Signal Dispatcher, a
        // finalizer, the Attach Listener): their scheduler account says they did not run,
        // so they are not drawn running.
        for (tid, (t0, first)) in &model.cpu_first {
            if Some(*t0) != model.cpu_start_ns
                || self.settled.contains_key(tid)
                || self.recent.contains_key(tid)
            {
                continue;
            }
            let Some((t1, last)) = model.cpu_last.get(tid) else {
                continue;
            };
            // Not run at all, not even waited for a CPU: blocked still, up to what the lanes
            // know. (One that ran a little had only waits too short to record, anywhere.)
            if last.run_ns != first.run_ns || last.wait_ns != first.wait_ns || t1 <= t0 {
                continue;
            }
            self.recent.entry(*tid).or_default().push(Span {
                start_ns: *t0,
                end_ns: model.end_mono_ns.max(*t1),
                state: State::Blocked,
                vthread: None,
            });
        }
        for spans in self.recent.values_mut() {
            spans.sort_by_key(|s| s.start_ns);
        }
        self.settled_until = self.settled_until.max(settled);
        // The target's threads: those with waits, or the scheduler's account, or known to
        // the JVM (names alone include other processes' threads that woke the target's).
        self.lives.clear();
        let tids = self
            .settled
            .keys()
            .chain(self.recent.keys())
            .chain(model.cpu_last.keys())
            .chain(model.java_threads.keys())
            .chain(model.folded.keys());
        for tid in tids {
            self.lives.insert(*tid, model.life(*tid));
        }
        self.known_until = model.end_mono_ns;
        // What the view forgot, the lanes forget too.
        if let Some(before) = model.forgotten_before {
            self.forget_before(before);
        }
    }

    fn forget_before(&mut self, before: u64) {
        for spans in self.settled.values_mut() {
            while spans.front().is_some_and(|s| s.end_ns < before) {
                spans.pop_front();
            }
        }
        self.settled.retain(|_, s| !s.is_empty());
        self.known_from = self.known_from.max(before);
    }

    /// The spans of `tid` that overlap `[from, to)`, in time order.
    fn spans(&self, tid: u32, from: u64, to: u64) -> impl Iterator<Item = &Span> {
        let settled = self.settled.get(&tid);
        let first = settled.map_or(0, |s| s.partition_point(|s| s.end_ns <= from));
        let settled = settled
            .into_iter()
            .flat_map(move |s| s.range(first..))
            .take_while(move |s| s.start_ns < to);
        let recent = self
            .recent
            .get(&tid)
            .into_iter()
            .flatten()
            .filter(move |s| s.end_ns > from && s.start_ns < to);
        settled.chain(recent)
    }

    /// `tid`'s lane: `n` cells of `cell_ns` from `from`. A cell's time in no span is running
    /// (within the thread's life and the lanes' knowledge); a spell takes its time from
    /// running.
    pub fn cells(&self, tid: u32, from: u64, cell_ns: u64, n: usize) -> Vec<Cell> {
        let mut cells = vec![Cell::default(); n];
        if cell_ns == 0 || n == 0 {
            return cells;
        }
        let to = from.saturating_add(cell_ns.saturating_mul(n as u64));
        let (born, died) = self.lives.get(&tid).copied().unwrap_or((0, 0));
        let (alive_from, alive_to) = (born.max(self.known_from), died);
        // Running first: the thread's life in each cell; waits then take their part of it.
        for (i, cell) in cells.iter_mut().enumerate() {
            let a = from + i as u64 * cell_ns;
            let b = a + cell_ns;
            let lived = b.min(alive_to).saturating_sub(a.max(alive_from));
            cell.add(State::Running, lived);
        }
        // Waits first: a spell lies over running time only.
        let waits = self
            .spans(tid, from, to)
            .filter(|s| s.state != State::Monopolized);
        let spells = self
            .spans(tid, from, to)
            .filter(|s| s.state == State::Monopolized);
        for span in waits.chain(spells) {
            let (a, b) = (span.start_ns.max(from), span.end_ns.min(to));
            if a >= b {
                continue;
            }
            let first = ((a - from) / cell_ns) as usize;
            let last = (((b - 1) - from) / cell_ns) as usize;
            for (i, cell) in cells.iter_mut().enumerate().take(last + 1).skip(first) {
                let c0 = from + i as u64 * cell_ns;
                let part = b.min(c0 + cell_ns) - a.max(c0);
                // Never more than the running time the cell has left (a wait outside the
                // thread's known life, or spans that overlap, cannot make time).
                let part = part.min(cell.get(State::Running));
                cell.ns[State::Running as usize] -= part;
                cell.add(span.state, part);
            }
        }
        cells
    }

    /// The span that makes the cell `[from, from + cell_ns)` of `tid` what it shows: of the
    /// cell's state, the one with most time in it (None: the cell shows running or nothing).
    pub fn main_span(&self, tid: u32, from: u64, cell_ns: u64) -> Option<Span> {
        let to = from.saturating_add(cell_ns.max(1));
        let state = self.cells(tid, from, cell_ns.max(1), 1)[0].state()?;
        self.spans(tid, from, to)
            .filter(|s| s.state == state)
            .max_by_key(|s| s.end_ns.min(to).saturating_sub(s.start_ns.max(from)))
            .copied()
    }

    /// The span of `tid` at `t` (None: running there, or nothing known).
    pub fn span_at(&self, tid: u32, t: u64) -> Option<Span> {
        // A spell lies over running time: a wait at the same moment wins.
        let mut found: Option<Span> = None;
        for s in self.spans(tid, t, t + 1) {
            if found.is_none_or(|f| f.state == State::Monopolized) {
                found = Some(*s);
            }
        }
        found
    }

    /// The virtual thread mounted on `tid` at `t`, as far as its spans tell: the one its
    /// wait or spell there had, or the one its waits on both sides had.
    /// A wait that ended at or after `since` counts as there (the latest look at a wait under
    /// way may be a moment before `t`).
    pub fn mounted_at(&self, tid: u32, t: u64, since: u64) -> Option<u64> {
        if let Some(s) = self.span_at(tid, t) {
            return s.vthread;
        }
        if let Some(s) = self
            .spans(tid, since, t.saturating_add(1))
            .filter(|s| s.state != State::Monopolized)
            .last()
        {
            return s.vthread;
        }
        let before = self
            .spans(tid, t.saturating_sub(10_000_000_000), t)
            .filter(|s| s.end_ns <= t)
            .last()
            .copied();
        let after = self
            .spans(tid, t, t.saturating_add(10_000_000_000))
            .find(|s| s.start_ns >= t)
            .copied();
        match (before, after) {
            (Some(b), Some(a)) if b.vthread == a.vthread => b.vthread,
            _ => None,
        }
    }

    /// Each thread's time in `[from, to)` by state, as the thread table shows it: summed
    /// from the lanes, so a span of the past is counted even where the model folded it.
    pub fn rows(&self, model: &Model, from: u64, to: u64) -> Vec<ThreadRow> {
        let mut rows: BTreeMap<u32, ThreadRow> = BTreeMap::new();
        for (&tid, &(born, died)) in &self.lives {
            // A carrier keeps its row (and its lane) in a span it was not alive in.
            if (died <= from.max(self.known_from) || born >= to) && !model.is_carrier(tid) {
                continue;
            }
            let mut sum = [0u64; 6];
            let mut intervals = 0;
            let mut blocked_intervals = 0;
            let (a, b) = (from.max(born).max(self.known_from), to.min(died));
            for s in self.spans(tid, a, b) {
                if s.state == State::Monopolized {
                    continue;
                }
                let part = s.end_ns.min(b).saturating_sub(s.start_ns.max(a));
                add(&mut sum[s.state as usize], part);
                intervals += 1;
                blocked_intervals += u64::from(s.state != State::Preempted);
            }
            let waits = total(sum);
            let running = b.saturating_sub(a).saturating_sub(waits);
            rows.insert(
                tid,
                ThreadRow {
                    running_ns: running,
                    idle_ns: sum[State::Idle as usize],
                    blocked_ns: sum[State::Blocked as usize],
                    pinned_ns: sum[State::Pinned as usize],
                    preempted_ns: sum[State::Preempted as usize],
                    intervals,
                    blocked_intervals,
                    ..ThreadRow::of(model, tid)
                },
            );
        }
        let mut rows: Vec<ThreadRow> = rows.into_values().collect();
        rows.sort_by(|a, b| {
            (b.blocked_ns + b.pinned_ns)
                .cmp(&(a.blocked_ns + a.pinned_ns))
                .then(a.tid.cmp(&b.tid))
        });
        rows
    }

    /// Spans kept (for the tests of its bounds).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.settled.values().map(VecDeque::len).sum::<usize>()
            + self.recent.values().map(Vec::len).sum::<usize>()
    }
}

/// Adds a span in time order (waits arrive about in the order they end).
fn push(spans: &mut VecDeque<Span>, span: Span) {
    if spans.len() >= MAX_SPANS_PER_THREAD {
        spans.pop_front();
    }
    match spans.back() {
        Some(last) if last.start_ns > span.start_ns => {
            let at = spans.partition_point(|s| s.start_ns <= span.start_ns);
            spans.insert(at, span);
        }
        _ => spans.push_back(span),
    }
}
