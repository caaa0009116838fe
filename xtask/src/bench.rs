//! `cargo xtask bench`: what pinprof costs, against its peers, in one run on the same JVM.
//!
//! For each JDK and bundled workload, phases alternate: no tracer, a tracer, no tracer, the
//! next tracer... (pinprof record, pinprof top, an equivalent bpftrace off-CPU script, perf
//! record of the switch tracepoint), for a number of rounds. Each traced phase is paired with
//! the untraced phases just before and after it: the ratio of the target's throughput, of its
//! CPU time per operation (which the kernel programs' time is charged to, and less noisy than
//! throughput), and of a syscall-bound bystander's reads per CPU second (a process no tracer
//! is pointed at: what tracing costs the rest of the host). The noise is how much consecutive
//! untraced phases differ. Then a native program making hundreds of thousands of context
//! switches a second is recorded: lost events, pinprof's CPU, events per second. Last, the
//! offline part: the views made from a recording of over a million events (`offline`).
//!
//! The live view's own cost: where both `pinprof record` and `pinprof top` ran on a JVM, the
//! CPU of top minus that of record in the same round (both record the same events with the
//! same kernel programs: the difference is the view's work), in share of one core, mean and
//! spread over the rounds, with the target's pinned events a second during the top phases
//! (from top's recording, `report --format json`). On the `pinning` workload on JDK 21 every
//! operation is one pinned sleep, so the pin rate is the target's throughput: about 820 a
//! second per carrier, so the number of CPUs decides it; `pinning-2k` fixes 3 carriers for
//! about 2,000-2,500 a second on any machine, and runs only pinprof record and top, on JDKs
//! where `synchronized` pins (before 24).
//!
//! It prints a table, writes target/bench/bench.json, and fails when pinprof's default
//! (`record`) costs more than 1% of throughput, is behind a peer by more than the noise, slows
//! the bystander by more than the noise, loses events, when the live view's own CPU is more
//! than 5% of a core, or when it takes a second or 200 MB or more to make a view of the large
//! recording. A benchmark, not a test: CI does not run it.

mod event_rate;
mod native;
mod offline;
mod section;
mod stats;
pub mod tracer;

use std::{
    fmt::Write as _,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::json;

use crate::{cargo, procfs, run_cmd, setup, workload::Jvm};
use event_rate::EventRate;
use native::{Program, Rates};
use section::{Phase, Section};
use tracer::Tracer;

const WARMUP: Duration = Duration::from_secs(4);
/// The peers, from Debian: bpftrace, and perf (in linux-perf).
const PEER_PACKAGES: [&str; 2] = ["bpftrace", "linux-perf"];
/// pinprof's default may cost at most this share of the target's throughput.
const MAX_COST: f64 = 0.01;
/// The live view's own CPU (`pinprof top`'s minus `pinprof record`'s) may be at most this
/// share of one core.
const MAX_VIEW_COST: f64 = 0.05;
/// A process pinprof does not profile must run at this share of its speed at least (and within
/// the noise), whether it makes system calls or context switches.
const MIN_BYSTANDER: f64 = 0.97;
/// What runs unless `--tracers` says otherwise: pinprof (recording, with the opt-in probes on
/// virtual threads' unmounts, and the live view), its peers, and the floor they are all read
/// against.
const DEFAULT_TRACERS: [Tracer; 6] = [
    Tracer::Record,
    Tracer::RecordVthreadWaits,
    Tracer::Top,
    Tracer::Bpftrace,
    Tracer::Perf,
    Tracer::Floor,
];
/// The event-rate program must make this many context switches a second while pinprof records.
const MIN_SWITCH_RATE: f64 = 200_000.0;

struct Config {
    rounds: usize,
    phase: Duration,
    jdks: Vec<u32>,
    workloads: Vec<&'static Workload>,
    tracers: Vec<Tracer>,
    event_rate: bool,
    /// The views made from a large recording (`offline`).
    offline: bool,
    /// Only that part: no JVM sections, no event rate.
    offline_only: bool,
    judge_disturbed: bool,
    /// Options passed to every pinprof.
    pinprof_args: Vec<String>,
}

const USAGE: &str =
    "usage: cargo xtask bench [--rounds N (5)] [--phase SECONDS (5)] [--jdk 21|25]... \
[--workload mixed|pinning|pinning-2k|service]... [--tracers a,b,...] [--no-event-rate] [--no-offline] [--offline-only] [--judge-disturbed] [-- pinprof options]
  tracers: pinprof-record, pinprof-top, bpftrace, perf, floor (the default five), pinprof-record-traced,
    pinprof-record-no-syscalls, pinprof-record-no-java-stacks, pinprof-record-no-oncpu
  floor: a BPF program that does nothing at each switch of each of the target's threads: what any tracer
    that sees the target's switches costs the host, shown beside pinprof's figures, not a peer to beat
  workloads (all four by default): mixed (64 virtual threads, one sleep in 10 inside synchronized),
    pinning (every sleep inside synchronized: on JDK 21 every operation is a pinned sleep, about 820 a
    second per CPU), pinning-2k (as pinning with 3 carriers whatever the CPUs: about 2,000-2,500 pins a
    second on JDK 21; for the live view's cost, so only pinprof-record and pinprof-top run on it, and not
    on JDK 24+, where synchronized does not pin), service (500 virtual threads parking, locking and
    pinning: about 50,000 parks and 8,000 pinned waits a second on JDK 21; pinprof's own CPU per event)
  the live view's own cost: pinprof-top's CPU minus pinprof-record's in the same round, where both ran
    (at most 5% of a core), with the target's pinned events a second; on its own:
    cargo xtask bench --jdk 21 --workload pinning-2k --tracers pinprof-record,pinprof-top --no-event-rate --no-offline
  --no-offline: leave out the offline part (report and flamegraph of a recording of over a million events:
    each under 1 s and 200 MB); --offline-only: that part alone (about a minute)
  --judge-disturbed: judge rounds during which another process held tracing BPF programs too
    (left out by default: another profiler's cost on every system call would be counted)
  quick run (about 7 minutes on 2 cores): cargo xtask bench --rounds 2 --jdk 25";

/// A bundled workload: its class, arguments and JVM options.
#[derive(Debug)]
struct Workload {
    name: &'static str,
    class: &'static str,
    /// Throughput: virtual threads; one sleep in N inside `synchronized` (pinned on JDK 21-23).
    /// Service: virtual threads; ns of computing per operation.
    args: [&'static str; 2],
    jvm_options: &'static [&'static str],
    /// For the live view's cost only: of the chosen tracers only pinprof-record and
    /// pinprof-top run on it (and only when both are chosen), on JDKs where it pins (21-23).
    view_only: bool,
}

/// Each operation of Throughput is 50 us of computing then a 1 ms sleep: with every sleep
/// pinned, a carrier does about 820 a second (the sleep's timer slack and the mounting
/// included), so on JDK 21 `pinning` pins about 820 times a second per CPU (the scheduler's
/// default parallelism): about 1,650 on 2 CPUs. `pinning-2k` is the same with 3 carriers
/// whatever the machine: about 2,300-2,500 a second on JDK 21, under pinprof too (measured on
/// 2 CPUs; 3 is the fewest carriers reaching 2,000).
///
/// `service` is the switch-heavy one (see Service.java): 500 virtual threads, on 2 CPUs about
/// 80,000 operations, 50,000 parks and 8,000 pinned waits a second on JDK 21, the rate at
/// which pinprof's own CPU per event shows.
const WORKLOADS: [Workload; 4] = [
    Workload {
        name: "mixed",
        class: "Throughput",
        args: ["64", "10"],
        jvm_options: &[],
        view_only: false,
    },
    Workload {
        name: "pinning",
        class: "Throughput",
        args: ["64", "1"],
        jvm_options: &[],
        view_only: false,
    },
    Workload {
        name: "pinning-2k",
        class: "Throughput",
        args: ["64", "1"],
        jvm_options: &["-Djdk.virtualThreadScheduler.parallelism=3"],
        view_only: true,
    },
    Workload {
        name: "service",
        class: "Service",
        args: ["500", "5000"],
        jvm_options: &[],
        view_only: false,
    },
];

/// The tracers that run on `workload` on JDK `major`, of those chosen; empty: the section is
/// skipped.
fn section_tracers(workload: &Workload, major: u32, chosen: &[Tracer]) -> Vec<Tracer> {
    if !workload.view_only {
        return chosen.to_vec();
    }
    let both = chosen.contains(&Tracer::Record) && chosen.contains(&Tracer::Top);
    if major >= 24 || !both {
        return Vec::new();
    }
    chosen
        .iter()
        .copied()
        .filter(|t| matches!(t, Tracer::Record | Tracer::Top))
        .collect()
}

fn parse(args: &[String]) -> Result<Config> {
    let (ours, pinprof_args) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], args[i + 1..].to_vec()),
        None => (args, Vec::new()),
    };
    let mut config = Config {
        rounds: 5,
        phase: Duration::from_secs(5),
        jdks: Vec::new(),
        workloads: Vec::new(),
        tracers: DEFAULT_TRACERS.to_vec(),
        event_rate: true,
        offline: true,
        offline_only: false,
        judge_disturbed: false,
        pinprof_args,
    };
    let mut it = ours.iter();
    while let Some(arg) = it.next() {
        let mut value = |what: &str| it.next().with_context(|| format!("{arg} {what}\n{USAGE}"));
        match arg.as_str() {
            "--rounds" => config.rounds = value("N")?.parse()?,
            "--phase" => config.phase = Duration::from_secs_f64(value("SECONDS")?.parse()?),
            "--jdk" => config.jdks.push(value("21|25")?.parse()?),
            "--workload" => {
                let name = value("NAME")?;
                let w = WORKLOADS
                    .iter()
                    .find(|w| w.name == name)
                    .with_context(|| format!("unknown workload {name}\n{USAGE}"))?;
                config.workloads.push(w);
            }
            "--tracers" => {
                config.tracers = value("LIST")?
                    .split(',')
                    .map(Tracer::parse)
                    .collect::<Result<_>>()?;
                config.tracers.retain(|t| *t != Tracer::None);
            }
            "--no-event-rate" => config.event_rate = false,
            "--no-offline" => config.offline = false,
            "--offline-only" => config.offline_only = true,
            "--judge-disturbed" => config.judge_disturbed = true,
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("bench: unknown argument {other}\n{USAGE}"),
        }
    }
    if config.rounds < 1 || config.phase < Duration::from_secs(2) {
        bail!("bench: at least 1 round of phases of at least 2 s\n{USAGE}");
    }
    if config.jdks.is_empty() {
        config.jdks = setup::JDKS.iter().map(|j| j.0).collect();
    }
    if config.workloads.is_empty() {
        config.workloads = WORKLOADS.iter().collect();
    }
    Ok(config)
}

pub fn run(args: &[String]) -> Result<()> {
    let config = parse(args)?;
    let started = Instant::now();
    let env = setup::run()?;
    let peers = !config.offline_only && config.tracers.iter().any(|t| t.is_peer());
    if peers {
        setup::apt_install(&PEER_PACKAGES)?;
    }
    println!("bench: building pinprof (release)");
    run_cmd(cargo().args(["build", "--release", "--package", "profiler"]))?;
    let pinprof = setup::target_dir().join("release/pinprof");
    let out = setup::target_dir().join("bench");
    std::fs::create_dir_all(&out)?;
    let programs = native::build(&out)?;
    let ready = started.elapsed();

    let bench = Bench {
        config: &config,
        pinprof: &pinprof,
        floor: &programs.floor,
        out: &out,
    };
    let mut sections = Vec::new();
    // Traced phases run, for the time per phase.
    let mut pairs = 0;
    let sections_started = Instant::now();
    let jvm_sections = if config.offline_only {
        &[][..]
    } else {
        &config.jdks[..]
    };
    for &major in jvm_sections {
        for &workload in &config.workloads {
            let tracers = section_tracers(workload, major, &config.tracers);
            if tracers.is_empty() {
                println!(
                    "bench: JDK {major} {} {} skipped: {}",
                    workload.class,
                    workload.name,
                    if major >= 24 {
                        "synchronized does not pin on JDK 24+"
                    } else {
                        "it is for the live view's cost, and needs pinprof-record and pinprof-top"
                    }
                );
                continue;
            }
            let jvm = Jvm::start_with(
                env.java(major),
                workload.jvm_options,
                &env.workloads,
                workload.class,
                &workload.args,
            )?;
            let bystander = Bystanders {
                reads: Program::start(&programs.bystander, &[])?,
                pipe: Program::start(&programs.bystander, &["pipe"])?,
            };
            println!(
                "bench: JDK {major} {} {} {}{} (pid {}), bystander pids {} and {}, warming up {WARMUP:?}",
                workload.class,
                workload.name,
                workload.args.join(" "),
                workload
                    .jvm_options
                    .iter()
                    .map(|o| format!(" {o}"))
                    .collect::<String>(),
                jvm.pid,
                bystander.reads.pid,
                bystander.pipe.pid
            );
            pairs += config.rounds * tracers.len();
            sections.push(bench.jvm_section(major, workload.name, &tracers, jvm, &bystander)?);
        }
    }
    // Seconds per traced phase and the untraced one after it, start and stop included.
    let per_pair = sections_started.elapsed().as_secs_f64() / pairs.max(1) as f64;
    let event_started = Instant::now();
    let event_rate = if config.event_rate && !config.offline_only {
        Some(bench.event_rate(&programs.pingpong)?)
    } else {
        None
    };
    let per_event_round = event_started.elapsed().as_secs_f64() / config.rounds as f64;
    let offline = if config.offline || config.offline_only {
        Some(offline::run(&pinprof, env.java(25), &env.workloads, &out)?)
    } else {
        None
    };

    let (mut failures, mut undecided) = (Vec::new(), Vec::new());
    let mut table = String::new();
    for s in &sections {
        s.judge(&mut failures, &mut undecided);
        s.print(&mut table);
    }
    if let Some(e) = &event_rate {
        e.judge(&mut failures);
        e.print(&mut table);
    }
    if let Some(o) = &offline {
        o.judge(&mut failures);
        o.print(&mut table);
    }
    // pinprof-record's own CPU against its event rate, every section's and the ping-pong's.
    let mut curve: Vec<section::CostPoint> =
        sections.iter().filter_map(section::record_cost).collect();
    if let Some(e) = &event_rate {
        curve.push(e.cost_point());
    }
    curve.sort_by(|a, b| a.events_per_sec.total_cmp(&b.events_per_sec));
    if !curve.is_empty() {
        let _ = writeln!(
            table,
            "pinprof record's own CPU against the events it recorded (medians over the rounds):"
        );
        for p in &curve {
            let _ = writeln!(
                table,
                "  {:>9.0} events/s  {:>5.1}% of a core  {:>5.1} us/event  ({})",
                p.events_per_sec,
                p.cpu_cores * 100.0,
                p.us_per_event(),
                p.what
            );
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    // A full run: 5 rounds, both JDKs, every workload, the default tracers, the event rate.
    let full_pairs: usize = setup::JDKS
        .iter()
        .flat_map(|j| {
            WORKLOADS
                .iter()
                .map(move |w| 5 * section_tracers(w, j.0, &DEFAULT_TRACERS).len())
        })
        .sum();
    let full_estimate = ready.as_secs_f64()
        + per_pair * full_pairs as f64
        + if config.event_rate {
            per_event_round * 5.0
        } else {
            60.0
        };
    println!();
    print!("{table}");
    if config.offline_only {
        println!(
            "bench: machine: {} CPUs, kernel {}; this run took {:.0} s",
            cpus(),
            kernel(),
            elapsed
        );
    } else {
        println!(
            "bench: machine: {} CPUs, kernel {}; this run took {:.0} s; a full run (5 rounds, JDK {}, every workload, the default tracers) takes about {:.0} min at this phase length",
            cpus(),
            kernel(),
            elapsed,
            setup::JDKS.map(|j| j.0.to_string()).join(" and "),
            full_estimate / 60.0
        );
    }
    let report = json!({
        "machine": { "cpus": cpus(), "kernel": kernel() },
        "rounds": config.rounds,
        "phase_seconds": config.phase.as_secs_f64(),
        "goals": {
            "max_throughput_cost": MAX_COST,
            "max_live_view_cpu_cores": MAX_VIEW_COST,
        },
        "pinprof_args": config.pinprof_args,
        "judge_disturbed": config.judge_disturbed,
        "sections": sections.iter().map(Section::to_json).collect::<Vec<_>>(),
        "event_rate": event_rate.as_ref().map(EventRate::to_json),
        "offline": offline.as_ref().map(offline::Offline::to_json),
        "record_cost_curve": curve.iter().map(section::CostPoint::to_json).collect::<Vec<_>>(),
        "verdict": {
            "pass": failures.is_empty() && undecided.is_empty(),
            "failures": failures,
            "not_judged": undecided,
        },
        "elapsed_seconds": elapsed,
        "full_run_estimate_seconds": full_estimate,
    });
    let path = out.join("bench.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)? + "\n")?;
    println!("bench: results in {}", path.display());
    for u in &undecided {
        println!("bench: NOT JUDGED: {u}");
    }
    for f in &failures {
        println!("bench: FAIL: {f}");
    }
    if !failures.is_empty() {
        bail!("{} of pinprof's goals not met", failures.len());
    }
    if !undecided.is_empty() {
        bail!(
            "other tracers ran on this host during the bench: {} comparisons could not be judged; run it on a quiet machine",
            undecided.len()
        );
    }
    let view = if sections.iter().any(|s| s.view_cost().is_some()) {
        format!(
            "; the live view's own CPU is at most {:.0}% of a core",
            MAX_VIEW_COST * 100.0
        )
    } else {
        String::new()
    };
    println!(
        "bench: pass: pinprof's default costs under 1% and is not behind its peers{view}; its views of a large recording each take under a second and 200 MB"
    );
    Ok(())
}

struct Bench<'a> {
    config: &'a Config,
    pinprof: &'a Path,
    /// The floor tracer's program.
    floor: &'a Path,
    out: &'a Path,
}

impl Bench<'_> {
    /// Starts a tracer on `pid` and waits until it is attached; None for no tracer.
    fn start(&self, tracer: Tracer, pid: u32, name: &str) -> Result<Option<tracer::Running>> {
        let exe = if tracer == Tracer::Floor {
            self.floor
        } else {
            self.pinprof
        };
        let Some(mut running) =
            tracer.start(exe, pid, &self.out.join(name), &self.config.pinprof_args)?
        else {
            return Ok(None);
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = running.exited()? {
                let said = running.stop().err().map(|e| format!("{e:#}"));
                bail!("{} exited at start ({status}): {said:?}", tracer.name());
            }
            let attached = match tracer {
                // Its programs are loaded (then attached at once).
                t if t.is_pinprof() => !procfs::bpf_held(running.pid())?.programs.is_empty(),
                Tracer::Bpftrace => {
                    std::fs::read_to_string(&running.file).is_ok_and(|t| t.contains("Attaching"))
                }
                _ => true,
            };
            if attached {
                break;
            }
            if Instant::now() > deadline {
                bail!("{} did not attach within a minute", tracer.name());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Attaching and the first moments (symbols, the JVM's structures) are not measured.
        std::thread::sleep(Duration::from_secs(1));
        Ok(Some(running))
    }

    fn jvm_section(
        &self,
        major: u32,
        workload: &'static str,
        tracers: &[Tracer],
        mut jvm: Jvm,
        bystander: &Bystanders,
    ) -> Result<Section> {
        measure(&mut jvm, bystander, None, WARMUP)?;
        let untraced = |jvm: &mut Jvm| -> Result<Phase> {
            let m = measure(jvm, bystander, None, self.config.phase)?;
            Ok(Phase {
                tracer: Tracer::None,
                ops_per_sec: m.ops_per_sec,
                cpu_per_op: m.cpu_per_op,
                bystander: m.bystander,
                pipe: m.pipe,
                tracer_cpu: None,
                summary: None,
                pinned_per_sec: None,
                round: None,
                foreign: m.foreign,
            })
        };
        let mut phases = vec![untraced(&mut jvm)?];
        for round in 0..self.config.rounds {
            for &tracer in tracers {
                let name = format!("jdk{major}-{workload}-{}-{round}", tracer.name());
                let running = self.start(tracer, jvm.pid, &name)?;
                let recording = running.as_ref().map(|r| r.file.clone());
                let m = measure(
                    &mut jvm,
                    bystander,
                    running.as_ref().map(|r| r.pid()),
                    self.config.phase,
                )?;
                let said = match running {
                    Some(r) => r.stop().with_context(|| tracer.name())?,
                    None => String::new(),
                };
                let summary = if tracer.is_pinprof() {
                    Some(tracer::pinprof_summary(&said)?)
                } else {
                    None
                };
                // The target's pin rate, from what pinprof recorded (after the phase: not
                // measured). Not having it is no reason to lose the run.
                let pinned_per_sec = match (&recording, tracer.is_pinprof()) {
                    (Some(file), true) => match tracer::pinned_per_sec(self.pinprof, file) {
                        Ok(rate) => Some(rate),
                        Err(e) => {
                            println!("bench: warning: no pin rate from {}: {e:#}", file.display());
                            None
                        }
                    },
                    _ => None,
                };
                let phase = Phase {
                    tracer,
                    ops_per_sec: m.ops_per_sec,
                    cpu_per_op: m.cpu_per_op,
                    bystander: m.bystander,
                    pipe: m.pipe,
                    tracer_cpu: m.tracer_cpu,
                    summary,
                    pinned_per_sec,
                    round: Some(round),
                    foreign: m.foreign,
                };
                let base = untraced(&mut jvm)?;
                let before = &phases[phases.len() - 1];
                println!(
                    "bench: JDK {major} {workload} round {round} {}: {:.0} ops/s (untraced {:.0}, {:.0}), CPU/op {:.1} us (untraced {:.1}, {:.1}), bystander {:.2}M reads/CPU-s (untraced {:.2}M, {:.2}M), tracer CPU {:.1}%{}",
                    tracer.name(),
                    phase.ops_per_sec,
                    before.ops_per_sec,
                    base.ops_per_sec,
                    phase.cpu_per_op * 1e6,
                    before.cpu_per_op * 1e6,
                    base.cpu_per_op * 1e6,
                    phase.bystander.best_reads_per_cpu_sec / 1e6,
                    before.bystander.best_reads_per_cpu_sec / 1e6,
                    base.bystander.best_reads_per_cpu_sec / 1e6,
                    phase.tracer_cpu.unwrap_or(0.0) * 100.0,
                    summary
                        .map(|s| format!(", {} events, {} lost", s.events, s.lost))
                        .unwrap_or_default()
                        + &pinned_per_sec
                            .map(|r| format!(", target pinned {r:.0}/s"))
                            .unwrap_or_default()
                );
                // The live view's own CPU this round: top's over record's.
                if tracer == Tracer::Top
                    && let Some(record) = phases
                        .iter()
                        .find(|p| p.tracer == Tracer::Record && p.round == Some(round))
                {
                    let (top, rec) = (
                        phase.tracer_cpu.unwrap_or(0.0),
                        record.tracer_cpu.unwrap_or(0.0),
                    );
                    println!(
                        "bench:   the live view's own CPU this round: {:.1}% of a core (pinprof-top {:.1}% - pinprof-record {:.1}%)",
                        (top - rec) * 100.0,
                        top * 100.0,
                        rec * 100.0
                    );
                }
                let mut others: Vec<u32> = [&phase.foreign, &base.foreign]
                    .into_iter()
                    .flatten()
                    .copied()
                    .collect();
                others.sort_unstable();
                others.dedup();
                if !others.is_empty() {
                    println!(
                        "bench:   (other processes on the host held tracing BPF programs meanwhile: pids {others:?}; this round counts only if no other is undisturbed)"
                    );
                }
                phases.push(phase);
                phases.push(base);
            }
        }
        Ok(Section {
            judge_disturbed: self.config.judge_disturbed,
            jdk: major,
            workload,
            phases,
        })
    }

    /// The ping-pong program, untraced and under `pinprof record`, alternately.
    fn event_rate(&self, exe: &Path) -> Result<EventRate> {
        let program = Program::start(exe, &[])?;
        println!(
            "bench: event rate: ping-pong pid {} (a pair of threads on each CPU, handing a byte back and forth through pipes)",
            program.pid
        );
        let disturbed = std::cell::Cell::new(0);
        let phase = |running: Option<&tracer::Running>| -> Result<(Rates, Option<f64>)> {
            let except = running.map(|r| r.pid());
            let others = procfs::foreign_tracing_programs(except)?.len();
            let start = program.sample()?;
            let tracer_start = running.map(|r| procfs::cpu_seconds(r.pid())).transpose()?;
            std::thread::sleep(self.config.phase);
            let rates = program.rates(&start, &program.sample()?);
            let tracer_cpu = match (running, tracer_start) {
                (Some(r), Some(c)) => {
                    Some((procfs::cpu_seconds(r.pid())? - c) / self.config.phase.as_secs_f64())
                }
                _ => None,
            };
            if others + procfs::foreign_tracing_programs(except)?.len() > 0 {
                disturbed.set(disturbed.get() + 1);
            }
            Ok((rates, tracer_cpu))
        };
        let mut untraced = vec![phase(None)?.0];
        let mut traced = Vec::new();
        for round in 0..self.config.rounds {
            let running = self
                .start(
                    Tracer::Record,
                    program.pid,
                    &format!("event-rate-pinprof-record-{round}"),
                )?
                .context("pinprof")?;
            let (rates, cpu) = phase(Some(&running))?;
            let summary = tracer::pinprof_summary(&running.stop()?)?;
            let after = phase(None)?.0;
            println!(
                "bench: event rate round {round}: untraced {:.0} switches/s, recorded {:.0} switches/s; pinprof: {} events ({:.0}/s), {} lost, CPU {:.1}%",
                untraced[untraced.len() - 1].switches_per_sec,
                rates.switches_per_sec,
                summary.events,
                summary.events as f64 / summary.seconds.max(1e-3),
                summary.lost,
                cpu.unwrap_or(0.0) * 100.0
            );
            traced.push((rates, cpu.unwrap_or(0.0), summary));
            untraced.push(after);
        }
        Ok(EventRate {
            untraced,
            traced,
            disturbed: disturbed.get(),
        })
    }
}

/// Runs the JVM for `length`; returns its throughput and CPU per operation from its own
/// "ops <count> <nanoTime>" lines and /proc, the bystander's rates, and the tracer's CPU
/// (cores), all over the same span (first to last sample of the workload).
fn measure(
    jvm: &mut Jvm,
    bystander: &Bystanders,
    tracer: Option<u32>,
    length: Duration,
) -> Result<Measured> {
    // Another tracer on the host, now or at the end (another profiler's run).
    let mut foreign = procfs::foreign_tracing_programs(tracer)?;
    // Drop stale lines, then take the first and last sample of the phase.
    while jvm.lines.try_recv().is_ok() {}
    let first = sample(&jvm.wait_for("ops ", Duration::from_secs(5))?)?;
    let cpu_first = procfs::cpu_seconds(jvm.pid)?;
    let by_first = bystander.reads.sample()?;
    let pipe_first = bystander.pipe.sample()?;
    let tracer_first = tracer.map(procfs::cpu_seconds).transpose()?;
    let start = Instant::now();
    let mut last = first;
    while start.elapsed() < length {
        last = sample(&jvm.wait_for("ops ", Duration::from_secs(5))?)?;
    }
    let cpu = procfs::cpu_seconds(jvm.pid)? - cpu_first;
    let by = bystander.reads.rates(&by_first, &bystander.reads.sample()?);
    let pipe = bystander.pipe.rates(&pipe_first, &bystander.pipe.sample()?);
    let wall = start.elapsed().as_secs_f64();
    let tracer_cpu = match (tracer, tracer_first) {
        (Some(pid), Some(c)) => Some((procfs::cpu_seconds(pid)? - c) / wall),
        _ => None,
    };
    let secs = (last.1 - first.1) as f64 / 1e9;
    let ops = last.0.saturating_sub(first.0) as f64;
    if secs <= 0.0 || ops <= 0.0 {
        bail!("no progress from the workload");
    }
    foreign.extend(procfs::foreign_tracing_programs(tracer)?);
    let mut foreign: Vec<u32> = foreign.into_iter().map(|(_, pid)| pid).collect();
    foreign.sort_unstable();
    foreign.dedup();
    Ok(Measured {
        ops_per_sec: ops / secs,
        cpu_per_op: cpu / ops,
        bystander: by,
        pipe,
        tracer_cpu,
        foreign,
    })
}

/// The processes no tracer is pointed at: a system-call-bound one and a switch-bound one.
struct Bystanders {
    reads: Program,
    pipe: Program,
}

/// What one phase measured.
struct Measured {
    ops_per_sec: f64,
    cpu_per_op: f64,
    bystander: Rates,
    pipe: Rates,
    tracer_cpu: Option<f64>,
    /// Processes other than the tracer under measurement that held tracing BPF programs.
    foreign: Vec<u32>,
}

fn sample(line: &str) -> Result<(u64, u64)> {
    let mut parts = line.split_whitespace().skip(1);
    let ops = parts.next().context("ops line")?.parse()?;
    let time = parts.next().context("ops line")?.parse()?;
    Ok((ops, time))
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
