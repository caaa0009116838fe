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
//! It prints a table, writes target/bench/bench.json, and fails when pinprof's default
//! (`record`) costs more than 1% of throughput, is behind a peer by more than the noise, slows
//! the bystander by more than the noise, loses events, or takes a second or 200 MB or more to
//! make a view of the large recording. A benchmark, not a test: CI does not
//! run it.

mod event_rate;
mod native;
mod offline;
mod section;
mod stats;
pub mod tracer;

use std::{
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
/// The event-rate program must make this many context switches a second while pinprof records.
const MIN_SWITCH_RATE: f64 = 200_000.0;

struct Config {
    rounds: usize,
    phase: Duration,
    jdks: Vec<u32>,
    workloads: Vec<(&'static str, [&'static str; 2])>,
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
[--workload mixed|pinning]... [--tracers a,b,...] [--no-event-rate] [--no-offline] [--offline-only] [--judge-disturbed] [-- pinprof options]
  tracers: pinprof-record, pinprof-top, bpftrace, perf (the default four), pinprof-record-no-syscalls,
    pinprof-record-no-java-stacks, pinprof-record-no-oncpu
  --no-offline: leave out the offline part (report and flamegraph of a recording of over a million events:
    each under 1 s and 200 MB); --offline-only: that part alone (about a minute)
  --judge-disturbed: judge rounds during which another process held tracing BPF programs too
    (left out by default: another profiler's cost on every system call would be counted)
  quick run (about 5 minutes on 2 cores): cargo xtask bench --rounds 2 --jdk 25";

// (name, Throughput arguments): 64 virtual threads; one sleep in N pinned on JDK 21.
const WORKLOADS: [(&str, [&str; 2]); 2] = [("mixed", ["64", "10"]), ("pinning", ["64", "1"])];

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
        tracers: vec![Tracer::Record, Tracer::Top, Tracer::Bpftrace, Tracer::Perf],
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
                    .find(|w| w.0 == name)
                    .with_context(|| format!("unknown workload {name}\n{USAGE}"))?;
                config.workloads.push(*w);
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
        config.workloads = WORKLOADS.to_vec();
    }
    Ok(config)
}

pub fn run(args: &[String]) -> Result<()> {
    let config = parse(args)?;
    let started = Instant::now();
    let env = setup::run()?;
    let peers = !config.offline_only && config.tracers.iter().any(|t| !t.is_pinprof());
    if peers {
        setup::apt_install(&PEER_PACKAGES)?;
    }
    println!("bench: building pinprof (release)");
    run_cmd(cargo().args(["build", "--release", "--package", "profiler"]))?;
    let pinprof = setup::target_dir().join("release/pinprof");
    let out = setup::target_dir().join("bench");
    std::fs::create_dir_all(&out)?;
    let (bystander_exe, pingpong_exe) = native::build(&out)?;
    let ready = started.elapsed();

    let bench = Bench {
        config: &config,
        pinprof: &pinprof,
        out: &out,
    };
    let mut sections = Vec::new();
    let sections_started = Instant::now();
    let jvm_sections = if config.offline_only {
        &[][..]
    } else {
        &config.jdks[..]
    };
    for &major in jvm_sections {
        for &(workload, workload_args) in &config.workloads {
            let jvm = Jvm::start(
                env.java(major),
                &env.workloads,
                "Throughput",
                &workload_args,
            )?;
            let bystander = Program::start(&bystander_exe, &[])?;
            println!(
                "bench: JDK {major} Throughput {workload} (pid {}), bystander pid {}, warming up {WARMUP:?}",
                jvm.pid, bystander.pid
            );
            sections.push(bench.jvm_section(major, workload, jvm, &bystander)?);
        }
    }
    // Seconds per traced phase and the untraced one after it, start and stop included.
    let per_pair = sections_started.elapsed().as_secs_f64()
        / (sections.len() * config.rounds * config.tracers.len()).max(1) as f64;
    let event_started = Instant::now();
    let event_rate = if config.event_rate && !config.offline_only {
        Some(bench.event_rate(&pingpong_exe)?)
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
    let elapsed = started.elapsed().as_secs_f64();
    // A full run: 5 rounds, both JDKs, both workloads, the four default tracers, the event rate.
    let full_estimate = ready.as_secs_f64()
        + per_pair * (5 * setup::JDKS.len() * WORKLOADS.len() * 4) as f64
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
            "bench: machine: {} CPUs, kernel {}; this run took {:.0} s; a full run (5 rounds, JDK {}, both workloads, the four tracers) takes about {:.0} min at this phase length",
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
        "pinprof_args": config.pinprof_args,
        "judge_disturbed": config.judge_disturbed,
        "sections": sections.iter().map(Section::to_json).collect::<Vec<_>>(),
        "event_rate": event_rate.as_ref().map(EventRate::to_json),
        "offline": offline.as_ref().map(offline::Offline::to_json),
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
    println!(
        "bench: pass: pinprof's default costs under 1% and is not behind its peers; its views of a large recording each take under a second and 200 MB"
    );
    Ok(())
}

struct Bench<'a> {
    config: &'a Config,
    pinprof: &'a Path,
    out: &'a Path,
}

impl Bench<'_> {
    /// Starts a tracer on `pid` and waits until it is attached; None for no tracer.
    fn start(&self, tracer: Tracer, pid: u32, name: &str) -> Result<Option<tracer::Running>> {
        let Some(mut running) = tracer.start(
            self.pinprof,
            pid,
            &self.out.join(name),
            &self.config.pinprof_args,
        )?
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
        mut jvm: Jvm,
        bystander: &Program,
    ) -> Result<Section> {
        measure(&mut jvm, bystander, None, WARMUP)?;
        let untraced = |jvm: &mut Jvm| -> Result<Phase> {
            let m = measure(jvm, bystander, None, self.config.phase)?;
            Ok(Phase {
                tracer: Tracer::None,
                ops_per_sec: m.ops_per_sec,
                cpu_per_op: m.cpu_per_op,
                bystander: m.bystander,
                tracer_cpu: None,
                summary: None,
                foreign: m.foreign,
            })
        };
        let mut phases = vec![untraced(&mut jvm)?];
        for round in 0..self.config.rounds {
            for &tracer in &self.config.tracers {
                let name = format!("jdk{major}-{workload}-{}-{round}", tracer.name());
                let running = self.start(tracer, jvm.pid, &name)?;
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
                let phase = Phase {
                    tracer,
                    ops_per_sec: m.ops_per_sec,
                    cpu_per_op: m.cpu_per_op,
                    bystander: m.bystander,
                    tracer_cpu: m.tracer_cpu,
                    summary,
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
                );
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
    bystander: &Program,
    tracer: Option<u32>,
    length: Duration,
) -> Result<Measured> {
    // Another tracer on the host, now or at the end (another profiler's run).
    let mut foreign = procfs::foreign_tracing_programs(tracer)?;
    // Drop stale lines, then take the first and last sample of the phase.
    while jvm.lines.try_recv().is_ok() {}
    let first = sample(&jvm.wait_for("ops ", Duration::from_secs(5))?)?;
    let cpu_first = procfs::cpu_seconds(jvm.pid)?;
    let by_first = bystander.sample()?;
    let tracer_first = tracer.map(procfs::cpu_seconds).transpose()?;
    let start = Instant::now();
    let mut last = first;
    while start.elapsed() < length {
        last = sample(&jvm.wait_for("ops ", Duration::from_secs(5))?)?;
    }
    let cpu = procfs::cpu_seconds(jvm.pid)? - cpu_first;
    let by = bystander.rates(&by_first, &bystander.sample()?);
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
        tracer_cpu,
        foreign,
    })
}

/// What one phase measured.
struct Measured {
    ops_per_sec: f64,
    cpu_per_op: f64,
    bystander: Rates,
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
