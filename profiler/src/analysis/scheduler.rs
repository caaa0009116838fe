//! The scheduler's side: how long threads waited for a CPU once they could run (wakeup
//! latency, run-queue delay after a preemption), from the kernel's per-thread histograms over
//! the recording, and the wake-ups that waited long.

use crate::events::Histogram;
use crate::model::Model;

/// Percentiles of a histogram, in ns: each is the middle of the bucket it falls in (buckets
/// are at most 1/16 of their values wide, so within 3.2%), the largest exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

/// A thread's scheduling over the recording.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadScheduling {
    pub tid: u32,
    pub carrier: bool,
    pub wakeup: Percentiles,
    pub runqueue: Percentiles,
    pub migrations: u64,
    pub involuntary_switches: u64,
}

/// The `q` quantile (0..=1) of `h`, as the middle of its bucket (clamped to the maximum).
pub fn quantile(h: &Histogram, q: f64) -> u64 {
    let total: u64 = h.buckets.iter().map(|(_, n)| u64::from(*n)).sum();
    if total == 0 {
        return 0;
    }
    // The rank of the value sought, 1-based (the nearest-rank definition).
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    if rank == total {
        return h.max_ns; // the largest is known exactly
    }
    let mut buckets = h.buckets.clone();
    buckets.sort_unstable();
    let mut seen = 0u64;
    for (i, n) in buckets {
        seen += u64::from(n);
        if seen >= rank {
            let (low, high) = profiler_ebpf::histogram_bucket_range(usize::from(i));
            return (low + (high - low) / 2)
                .min(h.max_ns)
                .max(low.min(h.max_ns));
        }
    }
    h.max_ns
}

fn percentiles(h: &Histogram) -> Percentiles {
    Percentiles {
        count: h.count,
        p50: quantile(h, 0.50),
        p99: quantile(h, 0.99),
        max: h.max_ns,
    }
}

/// Each thread's scheduling over the recording, carriers first, then by wakeup latency. The
/// kernel counts from the programs' attach, so a thread's latest snapshot holds its whole
/// window (a thread that ended is counted to its last checkpoint).
pub fn threads(model: &Model) -> Vec<ThreadScheduling> {
    let mut rows: Vec<ThreadScheduling> = model
        .sched_last
        .iter()
        .map(|(tid, (_, last))| ThreadScheduling {
            tid: *tid,
            carrier: model.is_carrier(*tid),
            wakeup: percentiles(&last.wakeup),
            runqueue: percentiles(&last.runqueue),
            migrations: last.migrations,
            involuntary_switches: last.involuntary_switches,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.carrier
            .cmp(&a.carrier)
            .then(b.wakeup.p99.cmp(&a.wakeup.p99))
            .then(a.tid.cmp(&b.tid))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[u64]) -> Histogram {
        let mut h = profiler_ebpf::Histogram::default();
        for &v in values {
            h.count += 1;
            h.total_ns += v;
            h.max_ns = h.max_ns.max(v);
            h.buckets[profiler_ebpf::histogram_bucket(v)] += 1;
        }
        (&h).into()
    }

    #[test]
    fn quantiles_are_within_a_bucket_of_the_exact_ones() {
        // 1,000 values from 10 us to 10 ms.
        let values: Vec<u64> = (1..=1000).map(|i| i * 10_000).collect();
        let h = histogram(&values);
        for (q, exact) in [(0.5, 5_000_000.0), (0.99, 9_900_000.0)] {
            let ours = quantile(&h, q) as f64;
            assert!(
                (ours - exact).abs() / exact < 0.04,
                "{q}: {ours} vs {exact}"
            );
        }
        assert_eq!(quantile(&h, 1.0), 10_000_000, "the largest is exact");
        assert_eq!(quantile(&histogram(&[]), 0.5), 0);
        assert_eq!(quantile(&histogram(&[3_000]), 0.99), 3_000);
    }
}
