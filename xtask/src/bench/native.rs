//! The bench's native programs, compiled from C at bench time: a syscall-bound bystander that
//! no tracer is pointed at, a program making hundreds of thousands of context switches a
//! second, and the floor tracer (a BPF program that does nothing, at each of the target's
//! switches).

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::Instant,
};

use anyhow::{Context as _, Result, bail};

use crate::{procfs, run_cmd};

const BYSTANDER: &str = include_str!("bystander.c");
const PINGPONG: &str = include_str!("pingpong.c");
const FLOOR: &str = include_str!("floor.c");

/// The compiled programs.
pub struct Programs {
    pub bystander: PathBuf,
    pub pingpong: PathBuf,
    pub floor: PathBuf,
}

/// Compiles the programs into `dir`.
pub fn build(dir: &Path) -> Result<Programs> {
    let compile = |name: &str, source: &str| -> Result<PathBuf> {
        let c = dir.join(format!("{name}.c"));
        std::fs::write(&c, source)?;
        let exe = dir.join(name);
        run_cmd(
            Command::new("cc")
                .args(["-O2", "-pthread", "-o"])
                .arg(&exe)
                .arg(&c),
        )
        .with_context(|| format!("cannot compile {name}.c (cc comes with gcc)"))?;
        Ok(exe)
    };
    Ok(Programs {
        bystander: compile("bystander", BYSTANDER)?,
        pingpong: compile("pingpong", PINGPONG)?,
        floor: compile("floor", FLOOR)?,
    })
}

/// A native program of the bench; killed when dropped.
pub struct Program {
    child: Child,
    pub pid: u32,
    /// The bystander's bursts as they come: (when, reads, CPU ns).
    bursts: Arc<Mutex<Vec<(Instant, u64, u64)>>>,
}

impl Program {
    pub fn start(exe: &Path, args: &[&str]) -> Result<Self> {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", exe.display()))?;
        let pid = child.id();
        let mut stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        let bursts = Arc::new(Mutex::new(Vec::new()));
        if exe.ends_with("pingpong") {
            // It says when its threads are made.
            let mut line = String::new();
            stdout.read_line(&mut line)?;
            if !line.starts_with("ready ") {
                bail!("{} did not start: {line:?}", exe.display());
            }
        } else {
            let kept = Arc::clone(&bursts);
            std::thread::spawn(move || {
                for line in stdout.lines().map_while(Result::ok) {
                    let mut words = line.split_whitespace().skip(1).map(str::parse::<u64>);
                    if let (Some(Ok(reads)), Some(Ok(cpu))) = (words.next(), words.next()) {
                        kept.lock().unwrap().push((Instant::now(), reads, cpu));
                    }
                }
            });
        }
        Ok(Self { child, pid, bursts })
    }

    /// Counters at a moment, to be differenced over a phase.
    pub fn sample(&self) -> Result<Sample> {
        Ok(Sample {
            at: Instant::now(),
            cpu: procfs::cpu_seconds(self.pid)?,
            reads: procfs::read_calls(self.pid)?,
            switches: procfs::context_switches(self.pid)?,
        })
    }

    /// What it did between two samples.
    pub fn rates(&self, start: &Sample, end: &Sample) -> Rates {
        let secs = (end.at - start.at).as_secs_f64().max(1e-3);
        let cpu = end.cpu - start.cpu;
        let reads = end.reads.saturating_sub(start.reads) as f64;
        let mut bursts: Vec<f64> = self
            .bursts
            .lock()
            .unwrap()
            .iter()
            .filter(|b| b.0 > start.at && b.0 <= end.at && b.2 > 0)
            .map(|b| b.1 as f64 / b.2 as f64 * 1e9)
            .collect();
        bursts.sort_by(f64::total_cmp);
        Rates {
            reads_per_sec: reads / secs,
            reads_per_cpu_sec: if cpu > 0.0 { reads / cpu } else { 0.0 },
            best_reads_per_cpu_sec: bursts
                .get(bursts.len() * 9 / 10)
                .copied()
                .unwrap_or(f64::NAN),
            switches_per_sec: end.switches.saturating_sub(start.switches) as f64 / secs,
            cpu_share: cpu / secs,
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Clone, Copy)]
pub struct Sample {
    at: Instant,
    cpu: f64,
    reads: u64,
    switches: u64,
}

/// What a native program did between two samples.
#[derive(Clone, Copy, Debug)]
pub struct Rates {
    pub reads_per_sec: f64,
    /// Reads per CPU second of its own (from /proc): what a system call costs it.
    pub reads_per_cpu_sec: f64,
    /// The same from the bystander's own bursts: the 90th percentile of the phase's, those
    /// that other processes on the machine (a busy sibling hyperthread, preemption)
    /// disturbed least. A cost on every system call lowers them all.
    pub best_reads_per_cpu_sec: f64,
    pub switches_per_sec: f64,
    pub cpu_share: f64,
}
