//! Starvation: spans when every carrier was pinned or blocked with a virtual thread mounted,
//! so that no carrier was left to run the other virtual threads.

use super::classify::{Use, classify};
use super::threads::open_intervals;
use crate::model::{Model, Wait};

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

/// Spans when no carrier was free: every one pinned or blocked with a virtual thread.
/// Computed from `uses` (see `pinned_events_in`).
pub fn starvation_in(model: &Model, uses: &[(&Wait, Use)]) -> Vec<Episode> {
    let spans = uses
        .iter()
        .filter(|(o, u)| {
            model.is_carrier(o.tid) && matches!(u, Use::Pinned(..) | Use::BlockedMounted)
        })
        .map(|(o, _)| (o.tid, o.start_ns, o.end_ns))
        .collect();
    let alive = carriers_alive(model);
    let mut episodes = starvation(spans, alive);
    for e in &mut episodes {
        e.queued_max = queued_max(model, e);
    }
    episodes
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
