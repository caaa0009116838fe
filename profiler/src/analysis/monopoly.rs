//! Monopolization: a virtual thread that keeps its carrier, running, for long. Virtual threads
//! are not time-sliced, so while one computes, its carrier serves no other.
//!
//! Seen from the carrier's on-CPU samples, each of which says which virtual thread was mounted,
//! and from its waits: a run of samples of one virtual thread, with no wait of the carrier in
//! between (a blocked wait ends it: that is pinning, not computing; a preemption, a stop
//! for a safepoint or a sampler's stop, which the virtual thread did not ask for, does
//! not), is a spell of that
//! virtual thread on the carrier. Its ends lie between the run's first and
//! last samples and the observations around them: halfway to a sample of something else, or
//! at the edge of a wait (a carrier mounts a virtual thread as it wakes, and parks as it is
//! left with none).

use super::oncpu::{SampleStacks, stacks_of};
use super::stacks::{StackLabels, monitor_frames};
use crate::events::JavaThreadState;
use crate::model::{FastMap, Model, Sample, Wait};

/// Spells shorter than this are not monopolization (a virtual thread's CPU burst between two
/// blocking calls is usually well under a millisecond).
pub const DEFAULT_THRESHOLD_NS: u64 = 20_000_000;

/// A virtual thread that held its carrier, running, for at least the threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Monopolized {
    pub carrier: u32,
    /// `Thread.threadId()` (0: mounted, but its id could not be read).
    pub vthread: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub samples: u64,
    /// The stack most of its samples were in.
    pub stacks: SampleStacks,
}

impl Monopolized {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// The stack most of its samples were in, as views show it.
    pub fn stack(&self, model: &Model) -> StackLabels {
        let frames = model.frames_of(self.stacks.0, self.stacks.1, self.stacks.2);
        StackLabels::new(&frames, monitor_frames(&frames))
    }

    /// Where it computed, in a word: the stack's culprit frame, else its innermost.
    pub fn place(&self, model: &Model) -> String {
        let stack = self.stack(model);
        super::findings::culprit(&stack)
            .or_else(|| stack.frames.first().cloned())
            .unwrap_or_else(|| "[no stack]".into())
    }
}

/// What a carrier was seen doing, in time order.
#[derive(Clone, Copy, Debug)]
enum Seen<'m> {
    Sample(&'m Sample),
    /// The carrier seen with a virtual thread mounted (None: none), without a stack: at
    /// either end of a wait imposed on it whose Java state the kernel read.
    Mounted {
        time_ns: u64,
        vthread: Option<u64>,
    },
    /// A wait: one the virtual thread did not ask for (preempted, or stopped for a
    /// safepoint: it runs on after) or not.
    Wait {
        start_ns: u64,
        end_ns: u64,
        imposed: bool,
    },
}

impl Seen<'_> {
    fn time(&self) -> u64 {
        match self {
            Seen::Sample(s) => s.time_ns,
            Seen::Mounted { time_ns, .. } => *time_ns,
            Seen::Wait { start_ns, .. } => *start_ns,
        }
    }

    /// What a sample or a reading says was mounted (None: it says nothing).
    fn mounted(&self) -> Option<Option<u64>> {
        match self {
            Seen::Sample(s) => Some(s.vthread),
            Seen::Mounted { vthread, .. } => Some(*vthread),
            Seen::Wait { .. } => None,
        }
    }
}

/// Every spell of a virtual thread on a carrier of at least `threshold_ns`, in time order.
pub fn monopolized(model: &Model, threshold_ns: u64) -> Vec<Monopolized> {
    let mut by_carrier: FastMap<u32, Vec<Seen>> = FastMap::default();
    for s in &model.samples {
        if model.is_carrier(s.tid) {
            by_carrier.entry(s.tid).or_default().push(Seen::Sample(s));
        }
    }
    if by_carrier.is_empty() {
        return Vec::new();
    }
    for o in &model.off_cpu {
        if let Some(seen) = by_carrier.get_mut(&o.tid) {
            wait(o, seen);
        }
    }
    let mut out = Vec::new();
    for (carrier, mut seen) in by_carrier {
        seen.sort_by_key(Seen::time);
        spells(model, carrier, &seen, threshold_ns, &mut out);
    }
    out.sort_by_key(|m| (m.start_ns, m.carrier));
    out
}

/// A wait of a carrier, as seen: the wait, and for one imposed on it whose Java state was
/// read, what was mounted at both its ends (a preempted or stopped carrier switches
/// nothing): a carrier preempted for long between two virtual threads is seen to switch
/// before, not halfway through.
fn wait<'m>(o: &Wait, seen: &mut Vec<Seen<'m>>) {
    // Imposed: a preemption, a stop for a safepoint, a block while the thread's Java state
    // was still "in Java" (a signal handler stopped it there, as JFR's sampler does, or a
    // page fault did), or a wait inside the VM's own code (one of its locks, a handshake).
    // A park, a monitor, a sleep or native code says "blocked" or "in native": pinning.
    let java = o.java();
    let imposed = !o.state.is_blocked()
        || java.as_ref().is_some_and(|j| {
            j.at_safepoint || matches!(j.state, JavaThreadState::InJava | JavaThreadState::InVm)
        });
    seen.push(Seen::Wait {
        start_ns: o.start_ns,
        end_ns: o.end_ns,
        imposed,
    });
    if let Some(j) = java.filter(|_| imposed) {
        for time_ns in [o.start_ns, o.end_ns] {
            seen.push(Seen::Mounted {
                time_ns,
                vthread: j.vthread,
            });
        }
    }
}

/// The spells of one carrier's observations `seen`.
fn spells(
    model: &Model,
    carrier: u32,
    seen: &[Seen],
    threshold_ns: u64,
    out: &mut Vec<Monopolized>,
) {
    let mut i = 0;
    while i < seen.len() {
        let Some(Some(vthread)) = seen[i].mounted() else {
            i += 1;
            continue;
        };
        // The run: samples and readings of the same virtual thread, and waits it did not
        // ask for.
        let mut j = i;
        let mut last_at = i;
        let mut samples: FastMap<SampleStacks, u64> = FastMap::default();
        let mut count = 0;
        while j < seen.len() {
            match seen[j] {
                Seen::Wait { imposed: true, .. } => {}
                Seen::Wait { .. } => break,
                Seen::Sample(s) if s.vthread == Some(vthread) => {
                    last_at = j;
                    count += 1;
                    *samples.entry(stacks_of(model, s)).or_default() += 1;
                }
                Seen::Mounted { vthread: v, .. } if v == Some(vthread) => last_at = j,
                _ => break,
            }
            j += 1;
        }
        let (first_ns, last_ns) = (seen[i].time(), seen[last_at].time());
        // Before the run: past the waits imposed on the carrier, what it was seen doing.
        let before = (0..i)
            .rev()
            .find(|&k| !matches!(seen[k], Seen::Wait { imposed: true, .. }));
        let start_ns = match before.map(|k| (k, seen[k])) {
            Some((_, Seen::Wait { end_ns, .. })) => end_ns.min(first_ns),
            Some((k, _)) => switch_between(seen, k, i),
            None => first_ns.max(model.start_mono_ns),
        };
        let end_ns = match seen.get(j) {
            Some(Seen::Wait { start_ns, .. }) => (*start_ns).max(last_ns),
            Some(_) => switch_between(seen, last_at, j),
            None => last_ns.min(model.end_mono_ns),
        };
        // (A run of readings alone, with no sample, has no stack to show.)
        if count > 0 && end_ns.saturating_sub(start_ns) >= threshold_ns {
            let stacks = samples
                .into_iter()
                .max_by_key(|(ids, n)| (*n, std::cmp::Reverse(*ids)))
                .map(|(ids, _)| ids)
                .unwrap_or_default();
            out.push(Monopolized {
                carrier,
                vthread,
                start_ns,
                end_ns,
                samples: count,
                stacks,
            });
        }
        i = j.max(i + 1);
    }
}

/// When the carrier went from what it ran at the sample `seen[a]` to what it ran at the
/// sample `seen[b]`: halfway between them in the time it ran, not in wall time. A switch of
/// virtual threads happens while the carrier runs, never in a wait imposed on it (a
/// preemption, a safepoint stop); and a carrier that other processes keep off the CPU is
/// sampled seldom, so the wall-time midpoint of two samples can lie tens of milliseconds from
/// the switch.
fn switch_between(seen: &[Seen], a: usize, b: usize) -> u64 {
    let (from, to) = (seen[a].time(), seen[b].time());
    let stops: Vec<(u64, u64)> = seen[a + 1..b]
        .iter()
        .filter_map(|s| match *s {
            Seen::Wait {
                start_ns, end_ns, ..
            } => Some((start_ns.max(from), end_ns.min(to))),
            Seen::Sample(_) | Seen::Mounted { .. } => None,
        })
        .filter(|(s, e)| s < e)
        .collect();
    let stopped: u64 = stops.iter().map(|(s, e)| e - s).sum();
    let mut left = to.saturating_sub(from).saturating_sub(stopped) / 2;
    let mut at = from;
    for (start, end) in stops {
        let ran = start.saturating_sub(at);
        if ran >= left {
            return at + left;
        }
        left -= ran;
        at = at.max(end);
    }
    (at + left).min(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::OffCpuState;
    use crate::model::tests::{interval, make_carrier};

    const MS: u64 = 1_000_000;

    /// A model of one carrier (tid 1) over a second.
    fn carrier() -> Model {
        let mut model = Model {
            end_mono_ns: 1_000 * MS,
            ..Default::default()
        };
        make_carrier(&mut model, 1);
        model
    }

    /// The spells of 20 ms or more: (virtual thread, start ms, end ms).
    fn spells(model: &Model) -> Vec<(u64, u64, u64)> {
        monopolized(model, 20 * MS)
            .iter()
            .map(|m| (m.vthread, m.start_ns / MS, m.end_ns / MS))
            .collect()
    }

    fn sample(time_ms: u64, vthread: Option<u64>) -> Sample {
        Sample {
            tid: 1,
            cpu: 0,
            time_ns: time_ms * MS,
            kernel_stack: None,
            user_stack: None,
            vthread,
        }
    }

    #[test]
    fn a_spell_runs_between_its_neighbours_and_ends_at_a_blocked_wait() {
        let mut model = carrier();
        // Virtual thread 7 from 100 to 300 ms (a preemption at 200 does not end it), then 8
        // until it blocks at 352; 9 once the carrier is back at 398, until about 415.
        model.samples.push(sample(90, Some(5)));
        model
            .samples
            .extend((0..=20).map(|i| sample(100 + 10 * i, Some(7))));
        model
            .samples
            .extend((0..5).map(|i| sample(310 + 10 * i, Some(8))));
        model
            .samples
            .extend([sample(400, Some(9)), sample(410, Some(9))]);
        model.samples.push(sample(420, None));
        model
            .off_cpu
            .push(interval(1, 200, 2, OffCpuState::Preempted).into());
        model
            .off_cpu
            .push(interval(1, 352, 46, OffCpuState::Sleeping).into());
        let spells = monopolized(&model, 20 * MS);
        let seen: Vec<(u64, u64, u64, u64)> = spells
            .iter()
            .map(|m| (m.vthread, m.start_ns / MS, m.end_ns / MS, m.samples))
            .collect();
        // 7: halfway from 5's sample at 90 to its own at 100, to halfway to 8's at 310.
        // 8: from 305 to its wait at 352. 9: from the wait's end, 17 ms: not a spell.
        assert_eq!(seen, [(7, 95, 305, 21), (8, 305, 352, 5)]);
    }

    /// A sampler's stop (a signal handler blocks the thread while its Java state is still
    /// "in Java", as JFR's does) does not split a spell; and a spell that a preemption
    /// interrupts before its first sample began as the carrier woke, not after the preemption.
    #[test]
    fn a_spell_holds_through_a_samplers_stop_and_begins_at_the_wake_up() {
        use crate::analysis::classify::tests::block;
        use crate::events::JavaThreadState;
        let mut model = carrier();
        // Idle until 100; preempted 101 to 130; 7 sampled from 131 to 301, stopped by a
        // sampler at 200 for a millisecond; blocked (a park) at 310.
        let mut idle = interval(1, 0, 100, OffCpuState::Sleeping);
        idle.java = Some(block(JavaThreadState::Blocked, None));
        let mut stopped = interval(1, 200, 1, OffCpuState::Sleeping);
        stopped.java = Some(block(JavaThreadState::InJava, Some(7)));
        let mut park = interval(1, 310, 50, OffCpuState::Sleeping);
        park.java = Some(block(JavaThreadState::Blocked, Some(7)));
        for o in [
            idle,
            interval(1, 101, 29, OffCpuState::Preempted),
            stopped,
            park,
        ] {
            model.off_cpu.push(o.into());
        }
        model
            .samples
            .extend((0..=17).map(|i| sample(131 + 10 * i, Some(7))));
        let seen = spells(&model);
        assert_eq!(seen, [(7, 100, 310)]);
    }

    /// A preemption whose Java state names the virtual thread mounted says who held the
    /// carrier through it: 7 sampled to 100, 8 mounted as the carrier was preempted at 110
    /// for 200 ms, then sampled: the switch lies before the preemption, not in it.
    #[test]
    fn a_preemption_says_which_virtual_thread_it_held() {
        use crate::analysis::classify::tests::block;
        use crate::events::JavaThreadState;
        let mut model = carrier();
        let mut preempted = interval(1, 110, 200, OffCpuState::Preempted);
        preempted.java = Some(block(JavaThreadState::InJava, Some(8)));
        model.off_cpu.push(preempted.into());
        model
            .samples
            .extend((0..=10).map(|i| sample(10 * i, Some(7))));
        model
            .samples
            .extend((0..=5).map(|i| sample(320 + 10 * i, Some(8))));
        let seen = spells(&model);
        assert_eq!(seen, [(7, 0, 105), (8, 105, 370)]);
    }

    #[test]
    fn a_switch_between_sparse_samples_is_placed_in_the_time_the_carrier_ran() {
        let mut model = carrier();
        // Other processes hold the CPU: 7 is sampled at 100 and 120, 8 at 200 and 260. The
        // carrier was preempted from 125 to 185, so of the 80 ms between 120 and 200 it ran
        // 20: the switch lies 10 ms of running after 120 (5 before the preemption, 5 after
        // it), at 190, not at the wall-time midpoint 160.
        for (t, v) in [(100, 7), (120, 7), (200, 8), (260, 8)] {
            model.samples.push(sample(t, Some(v)));
        }
        model
            .off_cpu
            .push(interval(1, 125, 60, OffCpuState::Preempted).into());
        let seen = spells(&model);
        // 7 from its first sample (nothing before) to 190; 8 from there to its last sample.
        assert_eq!(seen, [(7, 100, 190), (8, 190, 260)]);
    }
}
