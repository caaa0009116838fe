//! Narrowing a recording to what the user asks about before any view reads it: some threads
//! (by id, by a regular expression on their names, the carriers), a span of the window. The
//! model keeps only their intervals, calls and stacks, so that every figure of every view is
//! of that part alone.

use std::collections::HashSet;

use super::Model;
use crate::units::Moment;

/// What to keep. Empty: everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only these threads (none given: all).
    pub tids: Vec<u32>,
    /// Only threads whose name matches.
    pub thread: Option<regex::Regex>,
    /// Only carriers.
    pub carriers: bool,
    /// From this moment (a time after the window's start, or of the wall clock).
    pub from: Option<Moment>,
    /// To this moment.
    pub to: Option<Moment>,
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.tids.is_empty()
            && self.thread.is_none()
            && !self.carriers
            && self.from.is_none()
            && self.to.is_none()
    }

    fn narrows_threads(&self) -> bool {
        !self.tids.is_empty() || self.thread.is_some() || self.carriers
    }
}

impl Model {
    /// Keeps only what `filter` asks for (see the module's comment). A span that misses the
    /// window, or ends before it begins, is an error that says where the window is.
    pub fn filter(&mut self, filter: &Filter) -> anyhow::Result<()> {
        if filter.narrows_threads() {
            self.keep_threads(filter);
        }
        if filter.from.is_some() || filter.to.is_some() {
            let (from, to) = self.span(filter)?;
            self.keep_span(from, to);
        }
        Ok(())
    }

    /// The kernel-clock span that `filter`'s moments name, inside the window.
    fn span(&self, filter: &Filter) -> anyhow::Result<(u64, u64)> {
        let start = self.start_mono_ns;
        let length = self.end_mono_ns.saturating_sub(start);
        let place = |moment: &Moment| -> anyhow::Result<u64> {
            moment
                .after_start_ns(self.start_unix_ns)
                .map_err(anyhow::Error::msg)
        };
        let from = filter.from.as_ref().map(place).transpose()?.unwrap_or(0);
        let to = filter.to.as_ref().map(place).transpose()?;
        let window = || {
            format!(
                "the recording runs {} from {}",
                crate::units::secs(length),
                jiff::Timestamp::from_nanosecond(i128::from(self.start_unix_ns))
                    .map_or_else(|_| "an unknown time".into(), |t| t.to_string())
            )
        };
        if from >= length {
            anyhow::bail!(
                "--from {} is after the recording's end: {}",
                filter.from.expect("from is past 0"),
                window()
            );
        }
        if let Some(to) = to {
            if to == 0 {
                anyhow::bail!(
                    "--to {} is before the recording's start: {}",
                    filter.to.expect("to is set"),
                    window()
                );
            }
            if to <= from {
                anyhow::bail!("--from must come before --to");
            }
        }
        let to = to.map_or(length, |t| t.min(length));
        Ok((start.saturating_add(from), start.saturating_add(to)))
    }

    fn keep_threads(&mut self, filter: &Filter) {
        let mut tids: HashSet<u32> = self
            .names
            .keys()
            .chain(self.java_threads.keys())
            .chain(self.off_cpu.iter().map(|o| &o.tid))
            .chain(self.syscalls.iter().map(|s| &s.tid))
            .chain(self.cpu_first.keys())
            .copied()
            .collect();
        tids.retain(|&tid| {
            (filter.tids.is_empty() || filter.tids.contains(&tid))
                && (!filter.carriers || self.is_carrier(tid))
                && filter
                    .thread
                    .as_ref()
                    .is_none_or(|re| re.is_match(&self.thread_name(tid)))
        });
        let keep = |tid: &u32| tids.contains(tid);
        self.off_cpu.retain(|o| keep(&o.tid));
        self.syscalls.retain(|s| keep(&s.tid));
        self.short.retain(|tid, _| keep(tid));
        self.folded.retain(|tid, _| keep(tid));
        self.cpu_first.retain(|tid, _| keep(tid));
        self.cpu_last.retain(|tid, _| keep(tid));
        self.births.retain(|tid, _| keep(tid));
        self.first_wait_ns.retain(|tid, _| keep(tid));
        self.exits.retain(|tid, _| keep(tid));
        self.syscall_sums.retain(|(tid, _), _| keep(tid));
        self.kernel_lock_threads.retain(|tid, _| keep(tid));
        self.samples.retain(|s| keep(&s.tid));
        self.sched_first.retain(|tid, _| keep(tid));
        self.sched_last.retain(|tid, _| keep(tid));
        self.late_wakeups.retain(|w| keep(&w.tid));
        // (Names and Java threads stay: a kept wait names the thread that woke it.)
        self.only_threads = Some(tids);
    }

    pub(crate) fn keep_span(&mut self, from: u64, to: u64) {
        let mut moved = Vec::new();
        self.off_cpu.retain_mut(|o| {
            if o.end_ns <= from || o.start_ns >= to {
                return false;
            }
            if o.start_ns < from {
                moved.push((o.tid, o.start_ns, from));
                o.start_ns = from;
            }
            o.end_ns = o.end_ns.min(to);
            true
        });
        // A clipped wait keeps its Java stack, under its new start.
        for (tid, old, new) in moved {
            if let Some(stack) = self.java_stacks.remove(&(tid, old)) {
                self.java_stacks.insert((tid, new), stack);
            }
        }
        // System calls that cross an end of the span are kept whole (their Java stacks are
        // found by the waits inside them).
        self.syscalls.retain(|s| s.end_ns > from && s.start_ns < to);
        // Sums over the whole recording cannot be cut: threads' running time becomes what
        // their recorded waits leave of the span.
        self.short.clear();
        self.syscall_sums.clear();
        self.kernel_locks.clear();
        self.kernel_lock_threads.clear();
        self.cpu_first.clear();
        self.cpu_last.clear();
        self.cpu_start_ns = None;
        self.first_wait_ns.clear();
        // The scheduler's histograms are sums over the recording, like the sums above.
        if !self.sched_last.is_empty() {
            self.sched_first.clear();
            self.sched_last.clear();
            self.warnings.push(
                "the scheduler's latency histograms cover the whole recording, not a part of \
                 it: with --from/--to, only the late wake-ups inside the span are shown"
                    .into(),
            );
        }
        self.samples.retain(|s| s.time_ns >= from && s.time_ns < to);
        self.late_wakeups
            .retain(|w| w.run_ns > from && w.wake_ns < to);
        self.exits.retain(|_, (t, _)| *t > from);
        for (_, account) in self.exits.values_mut() {
            *account = None;
        }
        self.queued = self
            .queued
            .range(from..=to)
            .map(|(t, n)| (*t, *n))
            .collect();
        // Counters are differences of snapshots: those around the span are kept too.
        self.cgroup_cpu = super::bracketing(&self.cgroup_cpu, from, to);
        self.start_unix_ns = self
            .start_unix_ns
            .saturating_add(from.saturating_sub(self.start_mono_ns));
        self.start_mono_ns = from;
        self.end_mono_ns = to;
    }
}
