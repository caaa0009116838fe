//! `cargo xtask bench`: pinprof's cost to the target, as ratios against a baseline measured in
//! the same run on the same JVM: throughput while pinprof records versus the mean of the
//! throughput just before and just after, plus pinprof's own CPU use. Two workloads (a mixed
//! one, and one where every wait pins on JDK 21), each recorded with the default settings,
//! with system call tracing off, with the Java stack walk off, which prices each, and through
//! the live view. No timed assertions: the figures are printed and written to
//! target/bench/bench.json.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};

use crate::{cargo, run_cmd, setup, terminal::OnTerminal, workload::Jvm};

const WARMUP: Duration = Duration::from_secs(4);
const PHASE: Duration = Duration::from_secs(5);

struct Phase {
    ops_per_sec: f64,
}

pub fn run(args: &[String]) -> Result<()> {
    let env = setup::run()?;
    let (ours, record_args) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[][..]),
    };
    let mut rounds = 2;
    let mut jdks: Vec<u32> = setup::JDKS.iter().map(|j| j.0).collect();
    let mut it = ours.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--rounds" => rounds = it.next().context("--rounds N")?.parse()?,
            "--jdk" => jdks = vec![it.next().context("--jdk 21|25")?.parse()?],
            other => bail!(
                "bench: unknown argument {other} (usage: bench [--rounds N] [--jdk 21|25] [-- record options])"
            ),
        }
    }
    println!("bench: building pinprof (release)");
    run_cmd(cargo().args(["build", "--release", "--package", "profiler"]))?;
    let pinprof = setup::target_dir().join("release/pinprof");
    let out = setup::target_dir().join("bench");
    std::fs::create_dir_all(&out)?;

    let mut results = Vec::new();
    // (name, Throughput arguments): 64 virtual threads; one sleep in N pinned on JDK 21.
    let workloads = [("mixed", ["64", "10"]), ("pinning", ["64", "1"])];
    // (name, pinprof command, extra options): the default, without system call tracing (which
    // runs on every system call of the machine), without the Java stack walk, and the live
    // view (`top`, on a terminal of its own) with the default settings.
    let configs: [(&str, &str, &[&str]); 4] = [
        ("default", "record", &[]),
        ("no-syscalls", "record", &["--no-syscalls"]),
        ("no-java-stacks", "record", &["--java-stack-min-us", "0"]),
        ("live-view", "top", &[]),
    ];
    for major in jdks {
        for (workload, workload_args) in workloads {
            let mut jvm = Jvm::start(
                env.java(major),
                &env.workloads,
                "Throughput",
                &workload_args,
            )?;
            println!(
                "bench: JDK {major} Throughput {workload} (pid {}), warming up {WARMUP:?}",
                jvm.pid
            );
            measure(&mut jvm, WARMUP)?;
            for (config, subcommand, config_args) in configs {
                let (mut base, mut with, mut cpu, mut events) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                let (mut pinned_events, mut java_stacks) = (Vec::new(), Vec::new());
                for round in 0..rounds {
                    let before = measure(&mut jvm, PHASE)?;
                    let recording =
                        out.join(format!("jdk{major}-{workload}-{config}-{round}.pinrec"));
                    let mut command = Command::new(&pinprof);
                    command
                        .args([subcommand, "--pid", &jvm.pid.to_string(), "--force"])
                        .arg("--output")
                        .arg(&recording)
                        .args(config_args)
                        .args(record_args);
                    let running = if subcommand == "top" {
                        Running::Top(OnTerminal::spawn(&mut command, 40, 140)?)
                    } else {
                        Running::Record(command.arg("--quiet").stderr(Stdio::piped()).spawn()?)
                    };
                    // Attach takes a moment; measure only once programs are in.
                    std::thread::sleep(Duration::from_millis(500));
                    let cpu_before = cpu_seconds(running.pid())?;
                    let during = measure(&mut jvm, PHASE)?;
                    let cpu_used = cpu_seconds(running.pid())? - cpu_before;
                    let (status, said) = running.stop()?;
                    if !status.success() {
                        bail!("pinprof {subcommand} failed: {said}");
                    }
                    let after = measure(&mut jvm, PHASE)?;
                    let report = Command::new(&pinprof)
                        .args(["report", "--format", "json"])
                        .arg(&recording)
                        .output()
                        .context("pinprof report")?;
                    let json: serde_json::Value = serde_json::from_slice(&report.stdout)?;
                    let n = json["off_cpu"]["events"].as_f64().unwrap_or(0.0);
                    let pinned = json["pinned"]["events"].as_f64().unwrap_or(0.0);
                    let stacks = json["capture"]["java_stacks"].as_f64().unwrap_or(0.0);
                    println!(
                        "bench: JDK {major} {workload} {config} round {round}: {n} events, {pinned} pinned, {stacks} Java stacks; baseline {:.0} ops/s, with pinprof {:.0} ops/s, pinprof CPU {:.1}% of a core",
                        (before.ops_per_sec + after.ops_per_sec) / 2.0,
                        during.ops_per_sec,
                        cpu_used / PHASE.as_secs_f64() * 100.0
                    );
                    base.push((before.ops_per_sec + after.ops_per_sec) / 2.0);
                    with.push(during.ops_per_sec);
                    cpu.push(cpu_used / PHASE.as_secs_f64());
                    events.push(n);
                    pinned_events.push(pinned);
                    java_stacks.push(stacks);
                }
                let ratio = with.iter().sum::<f64>() / base.iter().sum::<f64>();
                let cpu_share = mean(&cpu);
                results.push(serde_json::json!({
                    "jdk": major,
                    "workload": workload,
                    "config": config,
                    "rounds": rounds,
                    "record_args": record_args,
                    "baseline_ops_per_sec": mean(&base),
                    "with_pinprof_ops_per_sec": mean(&with),
                    "throughput_ratio": ratio,
                    "pinprof_cpu_share_of_one_core": cpu_share,
                    "events_per_round": mean(&events),
                    "pinned_events_per_round": mean(&pinned_events),
                    "java_stacks_per_round": mean(&java_stacks),
                }));
                println!(
                    "bench: JDK {major} {workload} {config}: throughput with pinprof / baseline = {ratio:.3} ({:+.1}%), pinprof CPU {:.1}% of one core",
                    (ratio - 1.0) * 100.0,
                    cpu_share * 100.0
                );
            }
        }
    }
    let path = out.join("bench.json");
    std::fs::write(&path, serde_json::to_string_pretty(&results)? + "\n")?;
    println!("bench: results in {}", path.display());
    Ok(())
}

/// A pinprof under measurement. Stopped as a user would stop it; dropped without being
/// stopped (the bench failed half-way), it is stopped all the same, not left attached.
enum Running {
    Record(std::process::Child),
    Top(OnTerminal),
}

impl Running {
    fn child(&mut self) -> &mut std::process::Child {
        match self {
            Running::Record(child) => child,
            Running::Top(on) => &mut on.child,
        }
    }

    fn pid(&self) -> u32 {
        match self {
            Running::Record(child) => child.id(),
            Running::Top(on) => on.child.id(),
        }
    }

    /// Ctrl-C for a recording; SIGTERM for the live view (its Ctrl-C is a key). Returns how
    /// it ended and what it said.
    fn stop(mut self) -> Result<(std::process::ExitStatus, String)> {
        self.signal();
        // What it says is read to its end first: a full pipe would keep it from exiting.
        let mut said = String::new();
        if let Running::Record(child) = &mut self
            && let Some(stderr) = child.stderr.as_mut()
        {
            use std::io::Read as _;
            let _ = stderr.read_to_string(&mut said);
        }
        let status = self.child().wait()?;
        if let Running::Top(on) = &self {
            said = on.output();
        }
        Ok((status, said))
    }

    fn signal(&self) {
        let signal = match self {
            Running::Record(_) => libc::SIGINT,
            Running::Top(_) => libc::SIGTERM,
        };
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.pid() as i32, signal) };
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Nobody reads its stderr any more: close it rather than let a full pipe block it.
        if let Running::Record(child) = self {
            child.stderr.take();
        }
        if let Ok(None) = self.child().try_wait() {
            self.signal();
            let _ = self.child().wait();
        }
    }
}

/// Throughput of the workload over `length`, from its own "ops <count> <nanoTime>" lines.
fn measure(jvm: &mut Jvm, length: Duration) -> Result<Phase> {
    // Drop stale lines, then take the first and last sample of the phase.
    while jvm.lines.try_recv().is_ok() {}
    let first = sample(&jvm.wait_for("ops ", Duration::from_secs(5))?)?;
    let start = std::time::Instant::now();
    let mut last = first;
    while start.elapsed() < length {
        last = sample(&jvm.wait_for("ops ", Duration::from_secs(5))?)?;
    }
    let secs = (last.1 - first.1) as f64 / 1e9;
    if secs <= 0.0 {
        bail!("no progress from the workload");
    }
    Ok(Phase {
        ops_per_sec: (last.0 - first.0) as f64 / secs,
    })
}

fn sample(line: &str) -> Result<(u64, u64)> {
    let mut parts = line.split_whitespace().skip(1);
    let ops = parts.next().context("ops line")?.parse()?;
    let time = parts.next().context("ops line")?.parse()?;
    Ok((ops, time))
}

/// User + system CPU seconds of a process so far.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let field =
        |i: usize| -> Result<f64> { Ok(fields.get(i).context("short /proc stat")?.parse()?) };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok((field(11)? + field(12)?) / hz)
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}
