//! Starvation: spans when no carrier was left to run the other virtual threads, each carrier
//! pinned, blocked with a virtual thread mounted, held by a virtual thread that computes
//! without yielding (monopolized), or kept off its CPU by the scheduler (cpu); and which of
//! these took most of the carriers' time in the span (its cause).

use super::classify::{Use, classify};
use super::monopoly::Monopolized;
use super::threads::open_intervals;
use crate::events::OffCpuState;
use crate::model::{Model, Wait};

/// Why a carrier could not run another virtual thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    /// Its virtual thread blocked where it cannot unmount.
    Pinned,
    /// Blocked with a virtual thread mounted (a contended monitor on JDK 21, native code).
    Blocked,
    /// Its virtual thread computed, not yielding, for at least the monopolization threshold.
    Monopolized,
    /// Runnable, but not run: preempted, throttled.
    Cpu,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pinned => "pinned",
            Self::Blocked => "blocked",
            Self::Monopolized => "monopolized",
            Self::Cpu => "cpu",
        }
    }
}

/// A span during which every carrier was pinned or blocked with a virtual thread mounted:
/// no carrier was left to run the other virtual threads.
#[derive(Clone, Debug, PartialEq)]
pub struct Episode {
    pub start_ns: u64,
    pub end_ns: u64,
    /// The most carriers unavailable at once in it.
    pub blocked_carriers: u32,
    /// The most carriers alive in it.
    pub carriers: u32,
    /// The most tasks seen waiting in the scheduler for a carrier during it (None: not
    /// sampled then, or not read in this JVM).
    pub queued_max: Option<u64>,
    /// What took most of the carriers' time in it.
    pub cause: Cause,
}

/// Finds starvation episodes from the carriers' unavailable spans `(tid, start, end)` and the
/// number of carriers alive (`carriers_at`, a function of time).
pub fn starvation(
    mut spans: Vec<(u32, u64, u64)>,
    carriers_at: impl Fn(u64) -> u32,
) -> Vec<Episode> {
    // Sweep: +1 at each start, -1 at each end; ends first at equal times.
    let mut edges: Vec<(u64, i64)> = Vec::with_capacity(spans.len().saturating_mul(2));
    spans.retain(|s| s.2 > s.1);
    for &(_, start, end) in &spans {
        edges.push((start, 1));
        edges.push((end, -1));
    }
    edges.sort();
    let mut out: Vec<Episode> = Vec::new();
    let mut blocked: i64 = 0;
    let mut open: Option<(u64, u32, u32)> = None;
    for (time, delta) in edges {
        blocked += delta;
        let carriers = carriers_at(time);
        let starving = carriers > 0 && blocked >= i64::from(carriers);
        let now = u32::try_from(blocked).unwrap_or(u32::MAX);
        match (&mut open, starving) {
            (None, true) => open = Some((time, now, carriers)),
            // (A pool may start carriers during an episode: the most alive in it.)
            (Some((_, peak, n)), true) => {
                *peak = (*peak).max(now);
                *n = (*n).max(carriers);
            }
            (Some((start, peak, n)), false) => {
                out.push(Episode {
                    start_ns: *start,
                    end_ns: time,
                    blocked_carriers: *peak,
                    carriers: *n,
                    queued_max: None,
                    cause: Cause::Pinned,
                });
                open = None;
            }
            (None, false) => {}
        }
    }
    out.retain(|e| e.end_ns > e.start_ns);
    // A carrier free for a moment between two pinnings (a loop that pins again at once) does
    // not end an episode: nothing else could run in that time.
    let mut merged: Vec<Episode> = Vec::with_capacity(out.len());
    for e in out {
        match merged.last_mut() {
            Some(last) if e.start_ns.saturating_sub(last.end_ns) < EPISODE_GAP_NS => {
                last.end_ns = e.end_ns;
                last.blocked_carriers = last.blocked_carriers.max(e.blocked_carriers);
                last.carriers = last.carriers.max(e.carriers);
            }
            _ => merged.push(e),
        }
    }
    merged
}

/// Episodes closer than this are one.
pub const EPISODE_GAP_NS: u64 = 1_000_000;

/// Spans when no carrier was free: every one pinned, blocked with a virtual thread,
/// monopolized or waiting for a CPU. Computed from `uses` (see `pinned_events_in`), the
/// monopolization spells, and the carriers' long preemptions.
pub fn starvation_in(
    model: &Model,
    uses: &[(&Wait, Use)],
    monopolized: &[Monopolized],
) -> Vec<Episode> {
    let mut spans: Vec<(u32, u64, u64, Cause)> = uses
        .iter()
        .filter(|(o, _)| model.is_carrier(o.tid))
        .filter_map(|(o, u)| match u {
            Use::Pinned(..) => Some((o.tid, o.start_ns, o.end_ns, Cause::Pinned)),
            Use::BlockedMounted => Some((o.tid, o.start_ns, o.end_ns, Cause::Blocked)),
            _ => None,
        })
        .collect();
    spans.extend(
        model
            .off_cpu
            .iter()
            .filter(|o| o.state == OffCpuState::Preempted && model.is_carrier(o.tid))
            .map(|o| (o.tid, o.start_ns, o.end_ns, Cause::Cpu)),
    );
    spans.extend(
        monopolized
            .iter()
            .map(|m| (m.carrier, m.start_ns, m.end_ns, Cause::Monopolized)),
    );
    let alive = carriers_alive(model);
    let mut episodes = starvation(carrier_unions(&spans), alive);
    attribute(&mut episodes, &spans);
    for e in &mut episodes {
        e.queued_max = queued_max(model, e);
    }
    episodes
}

/// Each carrier's unavailable time as disjoint spans: a carrier counts once however many
/// reasons overlap (a monopolized carrier preempted meanwhile).
fn carrier_unions(spans: &[(u32, u64, u64, Cause)]) -> Vec<(u32, u64, u64)> {
    let mut sorted: Vec<(u32, u64, u64)> = spans.iter().map(|s| (s.0, s.1, s.2)).collect();
    sorted.sort_unstable();
    let mut out: Vec<(u32, u64, u64)> = Vec::with_capacity(sorted.len());
    for (tid, start, end) in sorted {
        match out.last_mut() {
            Some(last) if last.0 == tid && start <= last.2 => last.2 = last.2.max(end),
            _ => out.push((tid, start, end)),
        }
    }
    out
}

/// Each episode's cause: the one whose spans cover most carrier time in it (ties go to the
/// first of pinned, blocked, monopolized, cpu).
fn attribute(episodes: &mut [Episode], spans: &[(u32, u64, u64, Cause)]) {
    let mut weights = vec![[0u64; 4]; episodes.len()];
    for &(_, start, end, cause) in spans {
        // Episodes are in time order and apart: the first that ends after the span starts.
        let mut i = episodes.partition_point(|e| e.end_ns <= start);
        while let Some(e) = episodes.get(i)
            && e.start_ns < end
        {
            let overlap = end.min(e.end_ns).saturating_sub(start.max(e.start_ns));
            let w = &mut weights[i][cause as usize];
            *w = w.saturating_add(overlap);
            i += 1;
        }
    }
    for (e, w) in episodes.iter_mut().zip(weights) {
        let causes = [
            Cause::Pinned,
            Cause::Blocked,
            Cause::Monopolized,
            Cause::Cpu,
        ];
        e.cause = causes
            .into_iter()
            .zip(w)
            .fold(
                (Cause::Pinned, 0),
                |best, (c, n)| if n > best.1 { (c, n) } else { best },
            )
            .0;
    }
}

/// How many carriers were alive at a time. From the carriers' lives when the recording
/// has them (a pool's new carriers wait for a listing of the JVM's threads to be counted
/// in a snapshot, and pin at once: an episode must not wait for the listing); else the
/// latest snapshot of the JVM's threads at or before it (the first one for earlier times).
fn carriers_alive(model: &Model) -> impl Fn(u64) -> u32 + '_ {
    let lives: Option<Vec<(u64, u64)>> = (!model.births.is_empty()).then(|| {
        model
            .java_threads
            .values()
            .filter(|t| t.carrier)
            .map(|t| {
                let born = model.births.get(&t.tid).copied().unwrap_or(0);
                let ended = model.exits.get(&t.tid).map_or(u64::MAX, |(at, _)| *at);
                (born, ended)
            })
            .collect()
    });
    let counts = &model.carrier_counts;
    move |t| match &lives {
        Some(lives) => {
            let n = lives
                .iter()
                .filter(|(born, ended)| *born <= t && t < *ended)
                .count();
            u32::try_from(n).unwrap_or(u32::MAX)
        }
        None => {
            let i = counts.partition_point(|(time, _)| *time <= t);
            counts.get(i.saturating_sub(1)).map_or(0, |(_, n)| *n)
        }
    }
}

/// The most tasks waiting for a carrier in the samples taken during an episode (the
/// recorder samples while every carrier waits, a drain pass apart).
fn queued_max(model: &Model, e: &Episode) -> Option<u64> {
    model
        .queued
        .range(e.start_ns..=e.end_ns)
        .map(|(_, &tasks)| tasks)
        .max()
}

/// Starvation under way at the latest checkpoint: every carrier alive in a wait that has
/// not ended, pinned or blocked with a virtual thread mounted. Returns since when (the
/// latest of their starts) and how many carriers.
pub fn starving_now(model: &Model) -> Option<(u64, u32)> {
    let (time_ns, _) = model.open_waits.as_ref()?;
    let unavailable: Vec<u64> = open_intervals(model)
        .iter()
        .filter(|o| {
            matches!(
                classify(model, o),
                Some(Use::Pinned(..) | Use::BlockedMounted)
            )
        })
        .map(|o| o.start_ns)
        .collect();
    let alive = carriers_alive(model)(*time_ns);
    (alive > 0 && u32::try_from(unavailable.len()).unwrap_or(u32::MAX) >= alive)
        .then(|| (unavailable.iter().copied().max().unwrap_or(*time_ns), alive))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::{make_carrier, parked};

    #[test]
    fn starvation_needs_every_carrier() {
        // Two carriers: both blocked from 5 to 8 only.
        let spans = vec![(1, 0, 8), (2, 5, 12), (1, 20, 30)];
        let episodes = starvation(spans, |_| 2);
        assert_eq!(
            episodes,
            vec![Episode {
                start_ns: 5,
                end_ns: 8,
                blocked_carriers: 2,
                carriers: 2,
                queued_max: None,
                cause: crate::analysis::starvation::Cause::Pinned,
            }]
        );
        assert!(starvation(vec![(1, 0, 8)], |_| 0).is_empty());
        // Freed for 100 us between pinnings: one episode.
        let ms = 1_000_000;
        let spans = vec![
            (1, 0, 10 * ms),
            (2, 0, 30 * ms),
            (1, 10 * ms + ms / 10, 30 * ms),
        ];
        let episodes = starvation(spans, |_| 2);
        assert_eq!(episodes.len(), 1);
        assert_eq!((episodes[0].start_ns, episodes[0].end_ns), (0, 30 * ms));
    }

    #[test]
    fn an_episode_has_the_most_tasks_sampled_in_it() {
        let mut model = Model::default();
        model
            .queued
            .extend([(5, 900), (10, 3), (20, 40), (30, 120), (41, 7)]);
        let episode = |start_ns, end_ns| Episode {
            start_ns,
            end_ns,
            blocked_carriers: 2,
            carriers: 2,
            queued_max: None,
            cause: crate::analysis::starvation::Cause::Pinned,
        };
        assert_eq!(queued_max(&model, &episode(10, 30)), Some(120));
        assert_eq!(
            queued_max(&model, &episode(11, 19)),
            None,
            "no sample in it"
        );
    }

    #[test]
    fn starving_now_needs_every_carrier_in_an_open_pinned_wait() {
        let mut model = Model::default();
        model.carrier_counts.push((0, 2));
        for tid in [1, 2] {
            make_carrier(&mut model, tid);
        }
        let open = |tid: u32, start_ms: u64, vthread: Option<u64>| {
            let o = parked(tid, start_ms, 0, vthread);
            crate::events::OpenWait {
                tid,
                start_ns: o.start_ns,
                state: o.state,
                java: o.java,
            }
        };
        let at = 3_000_000_000;
        model.open_waits = Some((at, vec![open(1, 1000, Some(7)), open(2, 1500, None)]));
        assert_eq!(starving_now(&model), None, "carrier 2 is idle, free to run");
        model.open_waits = Some((at, vec![open(1, 1000, Some(7)), open(2, 1500, Some(8))]));
        assert_eq!(starving_now(&model), Some((1_500_000_000, 2)));
    }
}
