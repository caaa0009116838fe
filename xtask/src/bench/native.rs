//! The bench's native programs, compiled from C at bench time: a syscall-bound bystander that
//! no tracer is pointed at, and a program making hundreds of thousands of context switches a
//! second.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Instant,
};

use anyhow::{Context as _, Result, bail};

use crate::{procfs, run_cmd};

const BYSTANDER: &str = include_str!("bystander.c");
const PINGPONG: &str = include_str!("pingpong.c");

/// Compiles both programs into `dir`; returns (bystander, pingpong).
pub fn build(dir: &Path) -> Result<(PathBuf, PathBuf)> {
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
    Ok((
        compile("bystander", BYSTANDER)?,
        compile("pingpong", PINGPONG)?,
    ))
}

/// A native program of the bench; killed when dropped.
pub struct Program {
    child: Child,
    pub pid: u32,
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
        // The ping-pong says when its threads are made; the bystander says nothing.
        if exe.ends_with("pingpong") {
            let mut line = String::new();
            BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line)?;
            if !line.starts_with("ready ") {
                bail!("{} did not start: {line:?}", exe.display());
            }
        }
        Ok(Self { child, pid })
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
    /// Reads per CPU second of its own: what a system call costs it.
    pub reads_per_cpu_sec: f64,
    pub switches_per_sec: f64,
    pub cpu_share: f64,
}

impl Sample {
    pub fn rates_since(&self, start: &Sample) -> Rates {
        let secs = (self.at - start.at).as_secs_f64().max(1e-3);
        let cpu = self.cpu - start.cpu;
        let reads = self.reads.saturating_sub(start.reads) as f64;
        Rates {
            reads_per_sec: reads / secs,
            reads_per_cpu_sec: if cpu > 0.0 { reads / cpu } else { 0.0 },
            switches_per_sec: self.switches.saturating_sub(start.switches) as f64 / secs,
            cpu_share: cpu / secs,
        }
    }
}
