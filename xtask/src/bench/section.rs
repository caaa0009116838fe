//! One JVM and workload's phases, paired and judged: the ratios, the noise, the verdict, the
//! table and the JSON.

use std::fmt::Write as _;

use serde_json::json;

use super::{
    MAX_COST, MAX_VIEW_COST, MIN_BYSTANDER,
    native::Rates,
    stats::{self, Noise, median, min_max},
    tracer::{self, Tracer},
};

/// One phase on the JVM: untraced, or under one tracer.
#[derive(Debug, Clone)]
pub(super) struct Phase {
    pub(super) tracer: Tracer,
    pub(super) ops_per_sec: f64,
    /// The JVM's CPU seconds (user + system, its kernel programs' time included) per operation.
    pub(super) cpu_per_op: f64,
    pub(super) bystander: Rates,
    /// The switch-bound bystander's (round trips for reads).
    pub(super) pipe: Rates,
    /// The tracer's own CPU, in cores.
    pub(super) tracer_cpu: Option<f64>,
    /// pinprof's closing line.
    pub(super) summary: Option<tracer::Summary>,
    /// The target's pinned events a second, from what pinprof recorded.
    pub(super) pinned_per_sec: Option<f64>,
    /// The round of a traced phase.
    pub(super) round: Option<usize>,
    /// Other processes holding tracing BPF programs during the phase (pids).
    pub(super) foreign: Vec<u32>,
}

impl Phase {
    pub(super) fn to_json(&self) -> serde_json::Value {
        json!({
            "tracer": self.tracer.name(),
            "ops_per_sec": self.ops_per_sec,
            "target_cpu_per_op_us": self.cpu_per_op * 1e6,
            "bystander_reads_per_sec": self.bystander.reads_per_sec,
            "bystander_reads_per_cpu_sec": self.bystander.reads_per_cpu_sec,
            "bystander_best_reads_per_cpu_sec": self.bystander.best_reads_per_cpu_sec,
            "bystander_cpu_cores": self.bystander.cpu_share,
            "pipe_bystander_best_trips_per_cpu_sec": self.pipe.best_reads_per_cpu_sec,
            "tracer_cpu_cores": self.tracer_cpu,
            "events": self.summary.map(|s| s.events),
            "events_per_sec": self.summary.map(|s| s.events as f64 / s.seconds.max(1e-3)),
            "lost_events": self.summary.map(|s| s.lost),
            "target_pinned_per_sec": self.pinned_per_sec,
            "round": self.round,
            "other_tracers_on_host": self.foreign,
        })
    }
}

/// One JVM and workload: its phases in order, untraced ones between every two traced ones.
pub(super) struct Section {
    /// Rounds with another tracer on the host count like the others (`--judge-disturbed`).
    pub(super) judge_disturbed: bool,
    pub(super) jdk: u32,
    pub(super) workload: &'static str,
    pub(super) phases: Vec<Phase>,
}

/// A tracer's paired ratios over the rounds.
pub(super) struct Paired {
    pub(super) tracer: Tracer,
    pub(super) throughput: Vec<f64>,
    pub(super) cpu_per_op: Vec<f64>,
    pub(super) bystander: Vec<f64>,
    pub(super) pipe: Vec<f64>,
    pub(super) tracer_cpu: Vec<f64>,
    pub(super) events_per_sec: Vec<f64>,
    pub(super) lost: u64,
    /// Rounds left out because another tracer ran on the host meanwhile.
    pub(super) left_out: usize,
    /// Every round had one: all are used, and none can be judged.
    pub(super) all_disturbed: bool,
}

/// The live view's own cost: `pinprof top`'s CPU minus `pinprof record`'s in the same round
/// (both record the same; the difference is the view's work), over the rounds.
pub(super) struct ViewCost {
    /// Per round used, in cores.
    pub(super) cpu: Vec<f64>,
    /// The target's pinned events a second during the top phases of those rounds (from its
    /// recordings; none when they could not be read).
    pub(super) pinned_per_sec: Vec<f64>,
    /// The target's operations a second during those top phases.
    pub(super) ops_per_sec: Vec<f64>,
    /// Rounds left out because another tracer ran on the host during either phase.
    pub(super) left_out: usize,
    /// Every round had one: all are used, and none can be judged.
    pub(super) all_disturbed: bool,
}

impl ViewCost {
    /// "6.1% of a core [4.9..7.3] over 2 rounds, at 1630 pinned/s [1616..1644]"
    fn describe(&self) -> String {
        let (lo, hi) = min_max(&self.cpu);
        let pins = if self.pinned_per_sec.is_empty() {
            "at an unknown pin rate".to_string()
        } else {
            let (plo, phi) = min_max(&self.pinned_per_sec);
            format!(
                "with the target pinning {:.0}/s [{plo:.0}..{phi:.0}]",
                stats::mean(&self.pinned_per_sec)
            )
        };
        format!(
            "{:.1}% of a core [{:.1}..{:.1}] (mean of {} round{}), {pins}",
            stats::mean(&self.cpu) * 100.0,
            lo * 100.0,
            hi * 100.0,
            self.cpu.len(),
            if self.cpu.len() == 1 { "" } else { "s" }
        )
    }

    fn to_json(&self) -> serde_json::Value {
        let (lo, hi) = min_max(&self.cpu);
        let (plo, phi) = min_max(&self.pinned_per_sec);
        let pins = !self.pinned_per_sec.is_empty();
        json!({
            "what": "pinprof-top's CPU minus pinprof-record's in the same round, in cores",
            "cpu_cores_mean": stats::mean(&self.cpu),
            "cpu_cores_min": lo,
            "cpu_cores_max": hi,
            "cpu_cores_rounds": self.cpu,
            "goal_max_cpu_cores": MAX_VIEW_COST,
            "target_pinned_per_sec_mean": pins.then(|| stats::mean(&self.pinned_per_sec)),
            "target_pinned_per_sec_min": pins.then_some(plo),
            "target_pinned_per_sec_max": pins.then_some(phi),
            "target_pinned_per_sec_rounds": self.pinned_per_sec,
            "target_ops_per_sec_mean": stats::mean(&self.ops_per_sec),
            "rounds_used": self.cpu.len(),
            "rounds_left_out_for_other_tracers": self.left_out,
            "every_round_disturbed": self.all_disturbed,
        })
    }
}

impl Section {
    /// Whether a phase counts: no other tracer on the host meanwhile, or told to judge anyway.
    fn counts(&self, phase: &Phase) -> bool {
        self.judge_disturbed || phase.foreign.is_empty()
    }

    fn untraced(&self, quantity: fn(&Phase) -> f64) -> Vec<f64> {
        self.phases
            .iter()
            .filter(|p| p.tracer == Tracer::None)
            .map(quantity)
            .collect()
    }

    fn noise(&self) -> [Noise; 4] {
        let of = |quantity: fn(&Phase) -> f64| {
            let values: Vec<(f64, bool)> = self
                .phases
                .iter()
                .filter(|p| p.tracer == Tracer::None)
                .map(|p| (quantity(p), self.counts(p)))
                .collect();
            Noise::of(&values)
        };
        [
            of(|p| p.ops_per_sec),
            of(|p| p.cpu_per_op),
            of(|p| p.bystander.best_reads_per_cpu_sec),
            of(|p| p.pipe.best_reads_per_cpu_sec),
        ]
    }

    fn tracers(&self) -> Vec<Tracer> {
        let mut seen = Vec::new();
        for p in &self.phases {
            if p.tracer != Tracer::None && !seen.contains(&p.tracer) {
                seen.push(p.tracer);
            }
        }
        seen
    }

    /// Each traced phase against the mean of the untraced phases on either side.
    fn paired(&self, tracer: Tracer) -> Paired {
        let mut paired = Paired {
            tracer,
            throughput: Vec::new(),
            cpu_per_op: Vec::new(),
            bystander: Vec::new(),
            pipe: Vec::new(),
            tracer_cpu: Vec::new(),
            events_per_sec: Vec::new(),
            lost: 0,
            left_out: 0,
            all_disturbed: false,
        };
        let at: Vec<usize> = (1..self.phases.len().saturating_sub(1))
            .filter(|&i| self.phases[i].tracer == tracer)
            .collect();
        // Rounds with another tracer on the host (another profiler's run) are left out when
        // there are undisturbed ones: its cost would be counted as this tracer's or the
        // baseline's.
        let clean: Vec<usize> = at
            .iter()
            .copied()
            .filter(|&i| (i - 1..=i + 1).all(|j| self.counts(&self.phases[j])))
            .collect();
        paired.all_disturbed = clean.is_empty() && !at.is_empty();
        let used = if clean.is_empty() { at.clone() } else { clean };
        paired.left_out = at.len() - used.len();
        for i in used {
            let p = &self.phases[i];
            let (b, a) = (&self.phases[i - 1], &self.phases[i + 1]);
            let ratio = |q: fn(&Phase) -> f64| q(p) / ((q(b) + q(a)) / 2.0);
            paired.throughput.push(ratio(|x| x.ops_per_sec));
            paired.cpu_per_op.push(ratio(|x| x.cpu_per_op));
            paired
                .bystander
                .push(ratio(|x| x.bystander.best_reads_per_cpu_sec));
            paired.pipe.push(ratio(|x| x.pipe.best_reads_per_cpu_sec));
            paired.tracer_cpu.push(p.tracer_cpu.unwrap_or(0.0));
            if let Some(s) = p.summary {
                paired
                    .events_per_sec
                    .push(s.events as f64 / s.seconds.max(1e-3));
                paired.lost += s.lost;
            }
        }
        paired
    }

    /// The live view's own cost, when both pinprof record and pinprof top ran: per round
    /// where both did, top's CPU minus record's. Rounds where either phase had another
    /// tracer on the host are left out when there are others.
    pub(super) fn view_cost(&self) -> Option<ViewCost> {
        let find = |tracer: Tracer, round: usize| {
            self.phases
                .iter()
                .find(|p| p.tracer == tracer && p.round == Some(round))
        };
        let rounds = self.phases.iter().filter_map(|p| p.round).max()? + 1;
        let both: Vec<(&Phase, &Phase)> = (0..rounds)
            .filter_map(|r| Some((find(Tracer::Top, r)?, find(Tracer::Record, r)?)))
            .collect();
        if both.is_empty() {
            return None;
        }
        let clean: Vec<(&Phase, &Phase)> = both
            .iter()
            .copied()
            .filter(|(top, record)| self.counts(top) && self.counts(record))
            .collect();
        let all_disturbed = clean.is_empty();
        let used = if all_disturbed { both.clone() } else { clean };
        Some(ViewCost {
            cpu: used
                .iter()
                .map(|(top, record)| {
                    top.tracer_cpu.unwrap_or(0.0) - record.tracer_cpu.unwrap_or(0.0)
                })
                .collect(),
            pinned_per_sec: used
                .iter()
                .filter_map(|(top, _)| top.pinned_per_sec)
                .collect(),
            ops_per_sec: used.iter().map(|(top, _)| top.ops_per_sec).collect(),
            left_out: both.len() - used.len(),
            all_disturbed,
        })
    }

    /// pinprof's default against the goal and against each peer, each figure against the
    /// noise of the same figure; the live view's own CPU against its goal. What only disturbed
    /// rounds could show (another tracer on the host meanwhile) is not judged: it goes to
    /// `undecided`.
    pub(super) fn judge(&self, failures: &mut Vec<String>, undecided: &mut Vec<String>) {
        let noise = self.noise();
        let at = format!("JDK {} {}", self.jdk, self.workload);
        if let Some(view) = self.view_cost() {
            if view.all_disturbed {
                undecided.push(format!(
                    "{at}: the live view's own CPU: every round of pinprof top or record had another tracer on the host"
                ));
            } else if stats::mean(&view.cpu) > MAX_VIEW_COST {
                failures.push(format!(
                    "{at}: the live view's own CPU (pinprof top's minus pinprof record's) is {}: more than {:.0}% of a core",
                    view.describe(),
                    MAX_VIEW_COST * 100.0
                ));
            }
        }
        if !self.tracers().contains(&Tracer::Record) {
            return;
        }
        let ours = self.paired(Tracer::Record);
        if ours.all_disturbed {
            undecided.push(format!(
                "{at}: every pinprof record round had another tracer on the host"
            ));
            return;
        }
        let figures = |p: &Paired| {
            [
                median(&p.throughput),
                median(&p.cpu_per_op),
                median(&p.bystander),
                median(&p.pipe),
            ]
        };
        let mine = figures(&ours);
        let thr = mine[0];
        if thr < 1.0 - MAX_COST {
            failures.push(format!(
                "{at}: pinprof record's throughput ratio {thr:.3} is below {:.2} (it costs {:.1}%)",
                1.0 - MAX_COST,
                (1.0 - thr) * 100.0
            ));
        }
        // (what, whether higher is better)
        const FIGURES: [(&str, bool); 4] = [
            ("throughput ratio", true),
            ("CPU-per-operation ratio", false),
            ("bystander's speed ratio", true),
            ("pipe bystander's speed ratio", true),
        ];
        // Neither bystander may be slowed beyond the noise, nor below the goal for processes
        // pinprof does not profile.
        for (k, which) in [
            (2, "bystander (one-byte reads)"),
            (3, "pipe bystander (round trips)"),
        ] {
            if !noise[k].clean {
                undecided.push(format!(
                    "{at}: no two undisturbed untraced phases in a row: the {which}'s noise is unknown"
                ));
            } else if mine[k] < (1.0 - noise[k].median_abs).min(MIN_BYSTANDER) {
                // What the kernel alone takes from it when the target's switches are seen.
                let floor = if self.tracers().contains(&Tracer::Floor) {
                    format!(
                        "; a program that does nothing at the target's switches leaves it at {:.3}",
                        figures(&self.paired(Tracer::Floor))[k]
                    )
                } else {
                    String::new()
                };
                failures.push(format!(
                    "{at}: the {which}, not profiled, runs at {:.3} of its untraced speed under pinprof record, below {MIN_BYSTANDER} and beyond the noise ({:.3}){floor}",
                    mine[k], noise[k].median_abs
                ));
            }
        }
        for peer in self.tracers().into_iter().filter(|t| t.is_peer()) {
            let name = peer.name();
            let theirs = self.paired(peer);
            if theirs.all_disturbed {
                undecided.push(format!(
                    "{at}: every {name} round had another tracer on the host"
                ));
                continue;
            }
            let their = figures(&theirs);
            for (k, (what, higher_better)) in FIGURES.into_iter().enumerate() {
                if !noise[k].clean {
                    undecided.push(format!(
                        "{at}: pinprof record's {what} against {name}: the noise is unknown (no two undisturbed untraced phases in a row)"
                    ));
                    continue;
                }
                let behind = if higher_better {
                    their[k] - mine[k]
                } else {
                    mine[k] - their[k]
                };
                if behind > noise[k].median_abs {
                    failures.push(format!(
                        "{at}: pinprof record's {what} {:.3} is behind {name}'s {:.3} by more than the noise ({:.3})",
                        mine[k], their[k], noise[k].median_abs
                    ));
                }
            }
        }
    }

    pub(super) fn print(&self, table: &mut String) {
        let [noise_ops, noise_cpu, noise_by, noise_pipe] = self.noise();
        let _ = writeln!(
            table,
            "JDK {} {} (ratios: medians over the rounds of traced / untraced on either side, [min..max]; rounds: used / run, those with another tracer on the host left out; 0/N: all had one, shown but not judged)",
            self.jdk, self.workload
        );
        let _ = writeln!(
            table,
            "  {:<30} {:>22} {:>22} {:>22} {:>22} {:>10} {:>9} {:>6} {:>6}",
            "tracer",
            "throughput",
            "target CPU/op",
            "bystander reads/CPU-s",
            "pipe bystander",
            "tracer CPU",
            "events/s",
            "lost",
            "rounds"
        );
        let cell = |v: &[f64]| {
            let (lo, hi) = min_max(v);
            format!("{:.3} [{lo:.3}..{hi:.3}]", median(v))
        };
        for tracer in self.tracers() {
            let p = self.paired(tracer);
            let _ = writeln!(
                table,
                "  {:<30} {:>22} {:>22} {:>22} {:>22} {:>9.1}% {:>9} {:>6} {:>6}",
                tracer.name(),
                cell(&p.throughput),
                cell(&p.cpu_per_op),
                cell(&p.bystander),
                cell(&p.pipe),
                stats::mean(&p.tracer_cpu) * 100.0,
                if p.events_per_sec.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.0}", stats::mean(&p.events_per_sec))
                },
                if p.tracer.is_pinprof() {
                    p.lost.to_string()
                } else {
                    "-".to_string()
                },
                if p.all_disturbed {
                    format!("0/{}", p.throughput.len())
                } else {
                    format!("{}/{}", p.throughput.len(), p.throughput.len() + p.left_out)
                },
            );
        }
        let noise_cell = |n: &Noise| {
            let (lo, hi) = min_max(&n.pair_ratios);
            format!("±{:.3} [{lo:.3}..{hi:.3}]", n.median_abs)
        };
        let _ = writeln!(
            table,
            "  {:<30} {:>22} {:>22} {:>22} {:>22}",
            "noise (untraced pairs)",
            noise_cell(&noise_ops),
            noise_cell(&noise_cpu),
            noise_cell(&noise_by),
            noise_cell(&noise_pipe)
        );
        let _ = writeln!(
            table,
            "  untraced: {:.0} ops/s, {:.1} us CPU/op, bystander {:.2}M reads/CPU-s, pipe bystander {:.0}k round trips/CPU-s",
            median(&self.untraced(|p| p.ops_per_sec)),
            median(&self.untraced(|p| p.cpu_per_op)) * 1e6,
            median(&self.untraced(|p| p.bystander.best_reads_per_cpu_sec)) / 1e6,
            median(&self.untraced(|p| p.pipe.best_reads_per_cpu_sec)) / 1e3
        );
        if let Some(view) = self.view_cost() {
            let verdict = if view.all_disturbed {
                "not judged: another tracer on the host in every round".to_string()
            } else if stats::mean(&view.cpu) > MAX_VIEW_COST {
                format!("over the goal of {:.0}%", MAX_VIEW_COST * 100.0)
            } else {
                format!("within the goal of {:.0}%", MAX_VIEW_COST * 100.0)
            };
            let _ = writeln!(
                table,
                "  live view's own CPU (pinprof-top - pinprof-record, same round): {}, target {:.0} ops/s; rounds {}/{}; {verdict}",
                view.describe(),
                stats::mean(&view.ops_per_sec),
                if view.all_disturbed {
                    0
                } else {
                    view.cpu.len()
                },
                view.cpu.len() + view.left_out,
            );
        }
    }

    pub(super) fn to_json(&self) -> serde_json::Value {
        let [noise_ops, noise_cpu, noise_by, noise_pipe] = self.noise();
        let summary = |v: &[f64]| {
            let (lo, hi) = min_max(v);
            json!({ "median": median(v), "min": lo, "max": hi, "rounds": v })
        };
        json!({
            "jdk": self.jdk,
            "workload": self.workload,
            "noise": {
                "throughput": noise_ops.to_json(),
                "target_cpu_per_op": noise_cpu.to_json(),
                "bystander_best_reads_per_cpu_sec": noise_by.to_json(),
                "pipe_bystander_best_trips_per_cpu_sec": noise_pipe.to_json(),
            },
            "tracers": self.tracers().into_iter().map(|t| {
                let p = self.paired(t);
                json!({
                    "tracer": t.name(),
                    "throughput_ratio": summary(&p.throughput),
                    "target_cpu_per_op_ratio": summary(&p.cpu_per_op),
                    "bystander_ratio": summary(&p.bystander),
                    "pipe_bystander_ratio": summary(&p.pipe),
                    "tracer_cpu_cores_mean": stats::mean(&p.tracer_cpu),
                    "events_per_sec_mean": (!p.events_per_sec.is_empty()).then(|| stats::mean(&p.events_per_sec)),
                    "lost_events": t.is_pinprof().then_some(p.lost),
                    "rounds_used": p.throughput.len(),
                    "rounds_left_out_for_other_tracers": p.left_out,
                    "every_round_disturbed": p.all_disturbed,
                })
            }).collect::<Vec<_>>(),
            "live_view_cost": self.view_cost().map(|v| v.to_json()),
            "phases": self.phases.iter().map(Phase::to_json).collect::<Vec<_>>(),
        })
    }
}

/// pinprof-record's own CPU against the events a second it recorded: one point per section
/// (medians over its rounds), for the cost curve.
pub(super) fn record_cost(section: &Section) -> Option<CostPoint> {
    let rounds: Vec<&Phase> = section
        .phases
        .iter()
        .filter(|p| p.tracer == Tracer::Record)
        .collect();
    let rates: Vec<f64> = rounds
        .iter()
        .filter_map(|p| p.summary.map(|s| s.events as f64 / s.seconds.max(1e-3)))
        .collect();
    let cpu: Vec<f64> = rounds.iter().filter_map(|p| p.tracer_cpu).collect();
    if rates.is_empty() || cpu.is_empty() {
        return None;
    }
    Some(CostPoint {
        what: format!("JDK {} {}", section.jdk, section.workload),
        events_per_sec: median(&rates),
        cpu_cores: median(&cpu),
    })
}

/// One point of pinprof-record's cost curve.
pub(super) struct CostPoint {
    pub(super) what: String,
    pub(super) events_per_sec: f64,
    pub(super) cpu_cores: f64,
}

impl CostPoint {
    /// CPU microseconds per recorded event.
    pub(super) fn us_per_event(&self) -> f64 {
        self.cpu_cores * 1e6 / self.events_per_sec.max(1.0)
    }

    pub(super) fn to_json(&self) -> serde_json::Value {
        json!({
            "what": self.what,
            "events_per_sec": self.events_per_sec,
            "cpu_cores": self.cpu_cores,
            "cpu_us_per_event": self.us_per_event(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATES: Rates = Rates {
        reads_per_sec: 1.0,
        reads_per_cpu_sec: 1.0,
        best_reads_per_cpu_sec: 1.0,
        switches_per_sec: 1.0,
        cpu_share: 1.0,
    };

    fn phase(tracer: Tracer, round: Option<usize>, cpu: f64, foreign: bool) -> Phase {
        Phase {
            tracer,
            ops_per_sec: 2000.0,
            cpu_per_op: 1e-5,
            bystander: RATES,
            pipe: RATES,
            tracer_cpu: round.map(|_| cpu),
            summary: None,
            pinned_per_sec: round.map(|r| 2000.0 + r as f64),
            round,
            foreign: if foreign { vec![1] } else { Vec::new() },
        }
    }

    fn section(phases: Vec<Phase>) -> Section {
        Section {
            judge_disturbed: false,
            jdk: 21,
            workload: "pinning",
            phases,
        }
    }

    #[test]
    fn view_cost_is_top_minus_record_in_the_same_round() {
        let none = || phase(Tracer::None, None, 0.0, false);
        let s = section(vec![
            none(),
            phase(Tracer::Record, Some(0), 0.20, false),
            none(),
            phase(Tracer::Top, Some(0), 0.23, false),
            none(),
            phase(Tracer::Record, Some(1), 0.10, false),
            none(),
            phase(Tracer::Top, Some(1), 0.19, true),
            none(),
        ]);
        let view = s.view_cost().unwrap();
        // Round 1 had another tracer on the host: left out.
        assert_eq!(view.cpu.len(), 1);
        assert!((view.cpu[0] - 0.03).abs() < 1e-9);
        assert_eq!(view.pinned_per_sec, vec![2000.0]);
        assert_eq!(view.left_out, 1);
        let (mut failures, mut undecided) = (Vec::new(), Vec::new());
        s.judge(&mut failures, &mut undecided);
        assert!(
            failures.iter().all(|f| !f.contains("live view")),
            "{failures:?}"
        );

        let over = section(vec![
            none(),
            phase(Tracer::Record, Some(0), 0.20, false),
            none(),
            phase(Tracer::Top, Some(0), 0.27, false),
            none(),
        ]);
        let (mut failures, mut undecided) = (Vec::new(), Vec::new());
        over.judge(&mut failures, &mut undecided);
        assert!(
            failures
                .iter()
                .any(|f| f.contains("live view") && f.contains("7.0%")),
            "{failures:?}"
        );
        let mut table = String::new();
        over.print(&mut table);
        assert!(table.contains("over the goal of 5%"), "{table}");

        let only_record = section(vec![
            none(),
            phase(Tracer::Record, Some(0), 0.20, false),
            none(),
        ]);
        assert!(only_record.view_cost().is_none());
    }
}
