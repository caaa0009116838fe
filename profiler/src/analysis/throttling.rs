//! The CPU quota of the target's cgroup and its throttling over the window: the increase of
//! the kernel's counters (`cpu.stat`) between the snapshots that open and close it, and how
//! the throttled time fell between consecutive snapshots (about a second apart) for a time
//! line. A window narrowed by a filter counts from the last snapshot before it to the first
//! after it.

use crate::events::CgroupCpu;
use crate::model::{Model, add};

const SECOND_NS: u64 = 1_000_000_000;

/// Throttling of the cgroup that limits the target, over the window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Throttling {
    pub path: String,
    /// The cgroup hierarchy: 1 or 2.
    pub version: u8,
    /// The quota as last read (`cpu.max`: `<quota> <period>` in µs, or `max <period>`).
    pub cpu_max: Option<String>,
    /// Periods that went by, periods throttled, time throttled, over the window.
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
    /// Between consecutive snapshots, in time order.
    pub series: Vec<Span>,
}

/// The throttled time between two snapshots, clipped to the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    /// From the window's start.
    pub time_ns: u64,
    pub duration_ns: u64,
    pub throttled_ns: u64,
}

impl Throttling {
    /// Whether the quota stopped the cgroup at all in the window.
    pub fn throttled(&self) -> bool {
        self.nr_throttled > 0 || self.throttled_ns > 0
    }

    /// Throttled ns in each of `count` seconds of the window from second `first` (each
    /// span's time spread evenly over it): what a time line of seconds shows.
    pub fn per_second(&self, first: u64, count: usize) -> Vec<u64> {
        let mut seconds = vec![0u64; count];
        let from_ns = first.saturating_mul(SECOND_NS);
        let to_ns = from_ns.saturating_add((count as u64).saturating_mul(SECOND_NS));
        for s in &self.series {
            let (start, end) = (s.time_ns, s.time_ns.saturating_add(s.duration_ns));
            if s.throttled_ns == 0 || end <= from_ns || start >= to_ns {
                continue;
            }
            if s.duration_ns == 0 {
                let i = (start.saturating_sub(from_ns) / SECOND_NS) as usize;
                if let Some(slot) = seconds.get_mut(i) {
                    add(slot, s.throttled_ns);
                }
                continue;
            }
            // Only the seconds shown are visited: the work is bounded by `count`.
            let mut t = start.max(from_ns);
            while t < end.min(to_ns) {
                let i = ((t - from_ns) / SECOND_NS) as usize;
                let next = (from_ns + (i as u64 + 1) * SECOND_NS).min(end);
                let part = (u128::from(s.throttled_ns) * u128::from(next - t)
                    / u128::from(s.duration_ns)) as u64;
                if let Some(slot) = seconds.get_mut(i) {
                    add(slot, part);
                }
                t = next;
            }
        }
        seconds
    }
}

/// The throttling of the window, None when the recording has no snapshot of a cgroup (the
/// target had no CPU controller cgroup, or an older pinprof recorded it). Only the snapshots
/// of the cgroup last read count.
pub fn throttling(model: &Model) -> Option<Throttling> {
    let last = model.cgroup_cpu.values().next_back()?;
    let same = |c: &&CgroupCpu| c.path == last.path && c.version == last.version;
    let snapshots: Vec<&CgroupCpu> = model.cgroup_cpu.values().filter(same).collect();
    let (start, end) = (
        model.start_mono_ns,
        model.end_mono_ns.max(model.start_mono_ns),
    );
    let mut out = Throttling {
        path: last.path.clone(),
        version: last.version,
        cpu_max: snapshots.iter().rev().find_map(|c| c.cpu_max.clone()),
        ..Default::default()
    };
    for pair in snapshots.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // A counter that went back (the cgroup made anew) counts from there.
        let periods = b.nr_periods.saturating_sub(a.nr_periods);
        let throttled = b.nr_throttled.saturating_sub(a.nr_throttled);
        let throttled_ns = b.throttled_ns.saturating_sub(a.throttled_ns);
        add(&mut out.nr_periods, periods);
        add(&mut out.nr_throttled, throttled);
        add(&mut out.throttled_ns, throttled_ns);
        let from = a.time_ns.clamp(start, end);
        let to = b.time_ns.clamp(start, end);
        out.series.push(Span {
            time_ns: from - start,
            duration_ns: to - from,
            throttled_ns,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::intake::hostile;
    use crate::units::Moment;
    use std::time::Duration;

    const S: u64 = SECOND_NS;

    fn snapshot(time_ns: u64, periods: u64, throttled: u64, throttled_ns: u64) -> CgroupCpu {
        CgroupCpu {
            time_ns,
            path: "/pinprof-x".into(),
            version: 1,
            cpu_max: Some("20000 100000".into()),
            nr_periods: periods,
            nr_throttled: throttled,
            throttled_ns,
        }
    }

    fn model(snapshots: &[CgroupCpu], end: u64) -> Model {
        let mut model = Model::new(&hostile::header(10 * S));
        for s in snapshots {
            model.apply(&crate::events::Event::CgroupCpu(s.clone()));
        }
        model.end_mono_ns = end;
        model
    }

    #[test]
    fn the_window_counts_the_increase_from_first_to_last() {
        let model = model(
            &[
                snapshot(10 * S, 100, 50, 4 * S),
                snapshot(11 * S, 110, 59, 4 * S + 700_000_000),
                snapshot(12 * S, 120, 60, 4 * S + 800_000_000),
                snapshot(13 * S, 130, 60, 4 * S + 800_000_000),
            ],
            13 * S,
        );
        let t = throttling(&model).unwrap();
        assert_eq!(
            (t.nr_periods, t.nr_throttled, t.throttled_ns),
            (30, 10, 800_000_000)
        );
        assert_eq!(t.cpu_max.as_deref(), Some("20000 100000"));
        assert_eq!((t.path.as_str(), t.version), ("/pinprof-x", 1));
        let series: Vec<(u64, u64, u64)> = t
            .series
            .iter()
            .map(|s| (s.time_ns, s.duration_ns, s.throttled_ns))
            .collect();
        assert_eq!(
            series,
            [(0, S, 700_000_000), (S, S, 100_000_000), (2 * S, S, 0)]
        );
        assert_eq!(t.per_second(0, 4), [700_000_000, 100_000_000, 0, 0]);
        assert_eq!(t.per_second(1, 1), [100_000_000]);
        assert!(t.throttled());
    }

    #[test]
    fn a_span_is_spread_over_its_seconds() {
        let t = Throttling {
            series: vec![Span {
                time_ns: S / 2,
                duration_ns: 2 * S,
                throttled_ns: 1_000,
            }],
            ..Default::default()
        };
        assert_eq!(t.per_second(0, 3), [250, 500, 250]);
        // A span of a year costs only the seconds shown.
        let long = Throttling {
            series: vec![Span {
                time_ns: 0,
                duration_ns: u64::MAX / 2,
                throttled_ns: u64::MAX,
            }],
            ..Default::default()
        };
        assert_eq!(long.per_second(u64::MAX / S, 2).len(), 2);
    }

    #[test]
    fn a_filtered_window_keeps_the_snapshots_around_it() {
        let mut model = model(
            &[
                snapshot(10 * S, 0, 0, 0),
                snapshot(11 * S, 10, 5, S / 2),
                snapshot(12 * S, 20, 10, S),
                snapshot(13 * S, 30, 15, 3 * S / 2),
            ],
            13 * S,
        );
        let filter = crate::model::Filter {
            from: Some(Moment::AfterStart(Duration::from_millis(1500))),
            to: Some(Moment::AfterStart(Duration::from_millis(1700))),
            ..Default::default()
        };
        model.filter(&filter).unwrap();
        let t = throttling(&model).unwrap();
        assert_eq!(
            (t.nr_periods, t.nr_throttled, t.throttled_ns),
            (10, 5, S / 2)
        );
        assert_eq!(t.series.len(), 1);
        assert_eq!(t.series[0].time_ns, 0);
        assert_eq!(t.series[0].duration_ns, S / 5);
    }

    #[test]
    fn counters_that_go_back_or_overflow_stay_in_bounds() {
        let model = model(
            &[
                snapshot(10 * S, u64::MAX, u64::MAX, u64::MAX),
                snapshot(11 * S, 0, 0, 0),
                snapshot(12 * S, u64::MAX, u64::MAX, u64::MAX),
            ],
            12 * S,
        );
        let t = throttling(&model).unwrap();
        // (Intake cut the counts to MAX_COUNT.)
        assert_eq!(t.nr_throttled, crate::model::intake::MAX_COUNT);
        assert!(throttling(&Model::new(&hostile::header(0))).is_none());
    }
}
