//! The tracers the bench compares: pinprof (record, and the live view on a terminal of its
//! own) and its peers, bpftrace with an off-CPU script equivalent to pinprof's core and `perf
//! record` of the switch tracepoint with call graphs; and the floor, a BPF program that does
//! nothing at each of the target's switches, for what any tracer that sees them costs. Each is
//! started on a target, stopped as a user would stop it, and its own CPU read from /proc.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::terminal::OnTerminal;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Tracer {
    /// No tracer: the baseline.
    None,
    /// `pinprof record`, default settings.
    Record,
    /// `pinprof record --syscalls traced`: every system call of the host traced.
    RecordTraced,
    /// `pinprof record --no-syscalls`.
    RecordNoSyscalls,
    /// `pinprof record --java-stack-min 0s`: no Java stack walk.
    RecordNoJavaStacks,
    /// `pinprof record --oncpu-hz 0`: no on-CPU samples (what sampling at 99 Hz costs).
    RecordNoOnCpu,
    /// `pinprof record --vthread-waits`: virtual threads' waits off their carriers too (a
    /// uprobe trap at each unmount and mount: what the opt-in costs).
    RecordVthreadWaits,
    /// `pinprof top` on a terminal, default settings.
    Top,
    Bpftrace,
    Perf,
    /// A BPF program that returns at once, at every switch of each of the target's threads
    /// (a software context-switch perf event per thread): the least a tracer that sees the
    /// target's switches costs. Not a peer: nothing to be ahead of.
    Floor,
}

impl Tracer {
    pub const ALL: [Tracer; 11] = [
        Tracer::None,
        Tracer::Record,
        Tracer::RecordTraced,
        Tracer::RecordNoSyscalls,
        Tracer::RecordNoJavaStacks,
        Tracer::RecordNoOnCpu,
        Tracer::RecordVthreadWaits,
        Tracer::Top,
        Tracer::Bpftrace,
        Tracer::Perf,
        Tracer::Floor,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tracer::None => "none",
            Tracer::Record => "pinprof-record",
            Tracer::RecordTraced => "pinprof-record-traced",
            Tracer::RecordNoSyscalls => "pinprof-record-no-syscalls",
            Tracer::RecordNoJavaStacks => "pinprof-record-no-java-stacks",
            Tracer::RecordNoOnCpu => "pinprof-record-no-oncpu",
            Tracer::RecordVthreadWaits => "pinprof-record-vthread-waits",
            Tracer::Top => "pinprof-top",
            Tracer::Bpftrace => "bpftrace",
            Tracer::Perf => "perf",
            Tracer::Floor => "floor",
        }
    }

    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .with_context(|| {
                format!(
                    "unknown tracer {name} (one of: {})",
                    Self::ALL.map(Tracer::name).join(", ")
                )
            })
    }

    pub fn is_pinprof(self) -> bool {
        matches!(
            self,
            Tracer::Record
                | Tracer::RecordTraced
                | Tracer::RecordNoSyscalls
                | Tracer::RecordNoJavaStacks
                | Tracer::RecordNoOnCpu
                | Tracer::RecordVthreadWaits
                | Tracer::Top
        )
    }

    /// The other tools that do pinprof's job, which pinprof must not be behind.
    pub fn is_peer(self) -> bool {
        matches!(self, Tracer::Bpftrace | Tracer::Perf)
    }

    /// Starts tracing `pid`, writing what it records to `output` (plus an extension).
    /// `exe` is pinprof for pinprof's modes, the floor's program for the floor (the peers are
    /// on the PATH). `extra` are options for pinprof given on the bench's command line.
    pub fn start(
        self,
        exe: &Path,
        pid: u32,
        output: &Path,
        extra: &[String],
    ) -> Result<Option<Running>> {
        let pid_arg = pid.to_string();
        let with_ext = |ext: &str| -> PathBuf { output.with_extension(ext) };
        let running = match self {
            Tracer::None => return Ok(None),
            Tracer::Record
            | Tracer::RecordTraced
            | Tracer::RecordNoSyscalls
            | Tracer::RecordNoJavaStacks
            | Tracer::RecordNoOnCpu
            | Tracer::RecordVthreadWaits
            | Tracer::Top => {
                let file = with_ext("pinrec");
                let mut command = Command::new(exe);
                let sub = if self == Tracer::Top { "top" } else { "record" };
                command
                    .args([sub, "--pid", &pid_arg, "--force", "--output"])
                    .arg(&file)
                    .args(extra);
                match self {
                    Tracer::RecordTraced => {
                        command.args(["--syscalls", "traced"]);
                    }
                    Tracer::RecordNoSyscalls => {
                        command.arg("--no-syscalls");
                    }
                    Tracer::RecordNoJavaStacks => {
                        command.args(["--java-stack-min", "0s"]);
                    }
                    Tracer::RecordNoOnCpu => {
                        command.args(["--oncpu-hz", "0"]);
                    }
                    Tracer::RecordVthreadWaits => {
                        command.arg("--vthread-waits");
                    }
                    _ => {}
                }
                if self == Tracer::Top {
                    Running {
                        tracer: self,
                        process: Process::Terminal(OnTerminal::spawn(&mut command, 40, 140)?),
                        file,
                    }
                } else {
                    command
                        .arg("--quiet")
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped());
                    Running {
                        tracer: self,
                        process: Process::Piped(command.spawn().context("cannot start pinprof")?),
                        file,
                    }
                }
            }
            Tracer::Bpftrace => {
                let file = with_ext("bpftrace.txt");
                let mut command = Command::new("bpftrace");
                command
                    .arg("-o")
                    .arg(&file)
                    .arg("-e")
                    .arg(bpftrace_script(pid));
                self.spawn_piped(&mut command, file)?
            }
            Tracer::Floor => {
                // (It writes no file: the name is only the phase's.)
                let mut command = Command::new(exe);
                command.arg(&pid_arg);
                self.spawn_piped(&mut command, with_ext("floor.txt"))?
            }
            Tracer::Perf => {
                let file = with_ext("perf.data");
                let mut command = Command::new("perf");
                command
                    .args(["record", "-e", "sched:sched_switch", "-g", "-p", &pid_arg])
                    .arg("-o")
                    .arg(&file);
                self.spawn_piped(&mut command, file)?
            }
        };
        Ok(Some(running))
    }
}

impl Tracer {
    /// Starts a tracer other than pinprof, what it says on stderr kept for `stop`.
    fn spawn_piped(self, command: &mut Command, file: PathBuf) -> Result<Running> {
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", self.name()))?;
        Ok(Running {
            tracer: self,
            process: Process::Piped(child),
            file,
        })
    }
}

/// Off-CPU stacks and time as pinprof's core records them: at every switch-out of one of the
/// target's threads, its user stack (counted) and the time; at its switch-in, the time off
/// CPU, summed per thread. The stacks are not printed at the end: bpftrace symbolizes a JVM's
/// thousands of stacks for minutes, after the measured phase, which would only make the bench
/// longer.
fn bpftrace_script(pid: u32) -> String {
    format!(
        "tracepoint:sched:sched_switch /pid == {pid}/ {{ @out[tid] = nsecs; @stacks[ustack] = count(); }}
tracepoint:sched:sched_switch {{ $t = @out[args->next_pid]; if ($t) {{ @off_cpu_ns[args->next_pid] = sum(nsecs - $t); delete(@out[args->next_pid]); }} }}
END {{ clear(@stacks); clear(@out); }}"
    )
}

/// A tracer at work; dropped without being stopped (the bench failed half-way), it is stopped
/// all the same, not left attached.
pub struct Running {
    tracer: Tracer,
    process: Process,
    /// What it writes.
    pub file: PathBuf,
}

enum Process {
    Piped(Child),
    Terminal(OnTerminal),
}

impl Running {
    fn child(&mut self) -> &mut Child {
        match &mut self.process {
            Process::Piped(child) => child,
            Process::Terminal(on) => &mut on.child,
        }
    }

    pub fn pid(&self) -> u32 {
        match &self.process {
            Process::Piped(child) => child.id(),
            Process::Terminal(on) => on.child.id(),
        }
    }

    /// Whether it has exited already (it failed to start, most likely).
    pub fn exited(&mut self) -> Result<Option<ExitStatus>> {
        Ok(self.child().try_wait()?)
    }

    /// Ctrl-C, or SIGTERM for the live view (its Ctrl-C is a key); waits for it to exit and
    /// returns what it said. Fails if it did not end well. A peer still there after a while
    /// gets SIGTERM (bpftrace does not always act on Ctrl-C at once).
    pub fn stop(mut self) -> Result<String> {
        self.signal();
        // What it says is read as it comes: a full pipe would keep it from exiting.
        let reader = match &mut self.process {
            Process::Piped(child) => child.stderr.take().map(|mut stderr| {
                std::thread::spawn(move || {
                    use std::io::Read as _;
                    let mut said = String::new();
                    let _ = stderr.read_to_string(&mut said);
                    said
                })
            }),
            Process::Terminal(_) => None,
        };
        let start = Instant::now();
        let mut termed = false;
        let status = loop {
            if let Some(status) = self.child().try_wait()? {
                break status;
            }
            if !termed && !self.tracer.is_pinprof() && start.elapsed() > Duration::from_secs(10) {
                // SAFETY: plain kill(2) on our own child.
                unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
                termed = true;
            }
            if start.elapsed() > Duration::from_secs(300) {
                let _ = self.child().kill();
                let _ = self.child().wait();
                bail!(
                    "{} did not exit within 5 minutes of being stopped",
                    self.tracer.name()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let said = match (&self.process, reader) {
            (Process::Terminal(on), _) => on.output_at_exit(),
            (_, Some(reader)) => reader.join().unwrap_or_default(),
            _ => String::new(),
        };
        // A peer ended by the signal it was sent is a peer that was stopped.
        use std::os::unix::process::ExitStatusExt as _;
        let by_us = [libc::SIGINT, libc::SIGTERM]
            .iter()
            .any(|&sig| status.signal() == Some(sig) || status.code() == Some(128 + sig));
        let stopped_peer = by_us && !self.tracer.is_pinprof();
        if !status.success() && !stopped_peer {
            bail!("{} failed ({status}): {said}", self.tracer.name());
        }
        Ok(said)
    }

    fn signal(&self) {
        let signal = match self.process {
            Process::Piped(_) => libc::SIGINT,
            Process::Terminal(_) => libc::SIGTERM,
        };
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.pid() as i32, signal) };
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Nobody reads its stderr any more: close it rather than let a full pipe block it.
        if let Process::Piped(child) = &mut self.process {
            child.stderr.take();
        }
        if let Ok(None) = self.child().try_wait() {
            self.signal();
            let start = Instant::now();
            while let Ok(None) = self.child().try_wait() {
                if start.elapsed() > Duration::from_secs(10) {
                    let _ = self.child().kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child().wait();
        }
    }
}

/// What pinprof's closing line says: "recorded N events in S s (L lost)".
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub events: u64,
    pub seconds: f64,
    pub lost: u64,
}

pub fn pinprof_summary(said: &str) -> Result<Summary> {
    let line = said
        .lines()
        .rev()
        .find_map(|l| l.split_once("pinprof: recorded ").map(|(_, rest)| rest))
        .with_context(|| format!("no summary line from pinprof in: {said}"))?;
    let mut words = line.split_whitespace();
    let events = words.next().context("summary: events")?.parse()?;
    let seconds = words
        .nth(2)
        .and_then(|s| s.strip_suffix('s'))
        .context("summary: seconds")?
        .parse()?;
    let lost = words
        .next()
        .and_then(|s| s.strip_prefix('('))
        .context("summary: lost")?
        .parse()?;
    Ok(Summary {
        events,
        seconds,
        lost,
    })
}

/// The target's pinned events a second over the window of a pinprof recording, from its JSON
/// report (`pinned.events` over `window.duration_ns`).
pub fn pinned_per_sec(pinprof: &Path, recording: &Path) -> Result<f64> {
    let out = Command::new(pinprof)
        .args(["report", "--format", "json"])
        .arg(recording)
        .stdin(Stdio::null())
        .output()
        .context("cannot run pinprof report")?;
    if !out.status.success() {
        bail!(
            "pinprof report failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("pinprof report's JSON")?;
    let events = report["pinned"]["events"]
        .as_u64()
        .context("no pinned.events in the report")?;
    let ns = report["window"]["duration_ns"]
        .as_u64()
        .context("no window.duration_ns in the report")?;
    if ns == 0 {
        bail!("an empty recording");
    }
    Ok(events as f64 / (ns as f64 / 1e9))
}
