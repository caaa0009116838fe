//! The event-rate program's figures: untraced and recorded phases, judged and shown.

use std::fmt::Write as _;

use serde_json::json;

use super::{
    MIN_SWITCH_RATE,
    native::Rates,
    stats::{self, median},
    tracer,
};

/// The ping-pong program: untraced phases and recorded ones, alternately.
pub(super) struct EventRate {
    pub(super) untraced: Vec<Rates>,
    pub(super) traced: Vec<(Rates, f64, tracer::Summary)>,
    /// Phases during which another process held tracing BPF programs (its cost slows the
    /// ping-pong's system calls too).
    pub(super) disturbed: usize,
}

impl EventRate {
    fn untraced_rate(&self) -> f64 {
        median(
            &self
                .untraced
                .iter()
                .map(|r| r.switches_per_sec)
                .collect::<Vec<_>>(),
        )
    }

    fn figures(&self) -> (f64, f64, f64, u64) {
        let traced: Vec<f64> = self.traced.iter().map(|t| t.0.switches_per_sec).collect();
        let cpu: Vec<f64> = self.traced.iter().map(|t| t.1).collect();
        let events: Vec<f64> = self
            .traced
            .iter()
            .map(|t| t.2.events as f64 / t.2.seconds.max(1e-3))
            .collect();
        let lost = self.traced.iter().map(|t| t.2.lost).sum();
        (median(&traced), stats::mean(&cpu), median(&events), lost)
    }

    /// pinprof-record's point of the cost curve here.
    pub(super) fn cost_point(&self) -> super::section::CostPoint {
        let (_, cpu, events, _) = self.figures();
        super::section::CostPoint {
            what: "native ping-pong".into(),
            events_per_sec: events,
            cpu_cores: cpu,
        }
    }

    pub(super) fn judge(&self, failures: &mut Vec<String>) {
        let (traced, _, _, lost) = self.figures();
        // The rate that counts is the one pinprof kept up with: the ping-pong's while recorded.
        if traced < MIN_SWITCH_RATE {
            failures.push(format!(
                "event rate: the ping-pong made only {traced:.0} switches/s while recorded (untraced {:.0}); at least {MIN_SWITCH_RATE:.0} are needed to show the rate",
                self.untraced_rate()
            ));
        }
        if lost > 0 {
            failures.push(format!(
                "event rate: pinprof record lost {lost} events at {traced:.0} switches/s"
            ));
        }
    }

    pub(super) fn print(&self, table: &mut String) {
        let (traced, cpu, events, lost) = self.figures();
        let _ = writeln!(
            table,
            "Event rate (native ping-pong, {} rounds, {} of {} phases with another tracer on the host): untraced {:.0} switches/s; under pinprof record {:.0} switches/s ({:.3}), {:.0} events/s recorded, {} lost, pinprof CPU {:.1}% of a core",
            self.traced.len(),
            self.disturbed,
            self.traced.len() + self.untraced.len(),
            self.untraced_rate(),
            traced,
            traced / self.untraced_rate(),
            events,
            lost,
            cpu * 100.0
        );
    }

    pub(super) fn to_json(&self) -> serde_json::Value {
        let (traced, cpu, events, lost) = self.figures();
        json!({
            "untraced_switches_per_sec": self.untraced_rate(),
            "recorded_switches_per_sec": traced,
            "pinprof_cpu_cores_mean": cpu,
            "events_per_sec": events,
            "lost_events": lost,
            "phases_with_other_tracers_on_host": self.disturbed,
            "rounds": self.traced.iter().map(|(r, cpu, s)| json!({
                "switches_per_sec": r.switches_per_sec,
                "pinprof_cpu_cores": cpu,
                "events": s.events,
                "seconds": s.seconds,
                "lost_events": s.lost,
            })).collect::<Vec<_>>(),
            "untraced_rounds": self.untraced.iter().map(|r| r.switches_per_sec).collect::<Vec<_>>(),
        })
    }
}
