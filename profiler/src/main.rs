//! The `pinprof` command line: parses arguments and hands each subcommand to the library.

use profiler::analysis::Analysis;
use profiler::{flamegraph, jvm, model, record, recording, report, say, tui};

use std::{io::Write as _, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{Context as _, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "pinprof",
    version,
    about = "Off-CPU, blocking and pinning profiler for live JVMs, from eBPF"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Attach to a live process and record what its threads wait on, until the duration ends,
    /// Ctrl-C (or SIGTERM, or a closed terminal), or the process exits.
    Record {
        #[command(flatten)]
        capture: CaptureArgs,
        /// No progress line.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Record a live process as `record` does, and show carriers, pinned sites, threads,
    /// locks and system calls live in the terminal until you quit (q).
    Top {
        #[command(flatten)]
        capture: CaptureArgs,
        /// How often the view is recomputed (milliseconds).
        #[arg(long, default_value_t = 1000)]
        refresh_ms: u64,
        /// Pinning, starvation, locks and system calls are shown for the latest this many
        /// seconds, which bounds the view's memory (0: since the start). Thread times are
        /// always since the start; the recording always has everything.
        #[arg(long, default_value_t = 60)]
        window: u64,
    },
    /// Show a recording in the terminal view of `top`: at once, or replayed at its pace.
    Replay {
        file: PathBuf,
        /// Replay at this many times the recorded pace (1 = as it happened); without it, the
        /// whole recording at once.
        #[arg(long)]
        speed: Option<f64>,
        /// Show pinning, starvation, locks and system calls for the latest this many seconds
        /// only (default: the whole recording).
        #[arg(long)]
        window: Option<u64>,
    },
    /// Show what pinprof sees in a live JVM now: version, scheduler, carriers, and the virtual
    /// thread mounted on each.
    Jvm {
        #[arg(long, short)]
        pid: u32,
        /// Do not ask the JVM for its scheduler settings through the attach protocol.
        #[arg(long)]
        no_attach: bool,
    },
    /// Summarize a recording: per-thread time, top blocked stacks.
    Report {
        file: PathBuf,
        #[arg(long, short, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// How many stacks to list.
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// Lines per stack in the text report (runs of JDK frames fold into one; the frame
        /// holding a monitor, and the application frames next to it, always show).
        #[arg(long, default_value_t = 16)]
        depth: usize,
        /// Every frame of every stack in the text report, none folded or cut.
        #[arg(long)]
        full: bool,
    },
    /// Render a recording's blocked time as a flamegraph SVG (time-weighted, microseconds).
    Flamegraph {
        file: PathBuf,
        /// The SVG to write (`-` for standard output). A new file, or a regular file to
        /// replace, never a recording.
        #[arg(long, short)]
        output: PathBuf,
        /// One tower per thread, named at the root.
        #[arg(long)]
        per_thread: bool,
        /// What to weigh: blocked time (off-cpu), pinned carrier time, futex waits, long system
        /// calls, or lock wait time charged to the releasing holder's stack (locks).
        #[arg(long, value_enum, default_value_t = flamegraph::Kind::OffCpu)]
        kind: flamegraph::Kind,
    },

    /// Debug: dump the live JVM's VMStructs fields whose type or name contains FILTER.
    #[command(hide = true)]
    Vmstructs { pid: u32, filter: String },
}

/// What to record and how: shared by `record` and `top`.
#[derive(Args)]
struct CaptureArgs {
    /// Process to attach to (no restart, no flags, nothing loaded into it).
    #[arg(long, short)]
    pid: u32,
    /// Seconds to record; without it, until Ctrl-C (q in `top`) or the target exits.
    #[arg(long, short)]
    duration: Option<f64>,
    /// Recording to write (default: pinprof-<pid>.pinrec); created new, mode 0600.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Replace the output file if it exists (without it, an existing file is an error). The
    /// old file is replaced, never written through.
    #[arg(long)]
    force: bool,
    /// Off-CPU intervals shorter than this (microseconds) are summed per thread in the
    /// kernel instead of recorded one by one with their stacks.
    #[arg(long, default_value_t = 0)]
    min_off_cpu_us: u64,
    /// Java stacks are walked for blocks at least this long (microseconds), and for every
    /// pinned block however short; 0 turns the Java stack walk off.
    #[arg(long, default_value_t = 1000)]
    java_stack_min_us: u64,
    /// Ring buffer size in MiB (a power of two); raise it if events are lost.
    #[arg(long, default_value_t = 16)]
    ring_buffer_mib: u32,
    /// System calls and futex waits at least this long (microseconds) are recorded one by
    /// one with their stacks, file and waker; shorter ones are counted per thread and call.
    #[arg(long, default_value_t = 1000)]
    min_syscall_us: u64,
    /// Do not trace system calls, futex waits and kernel lock contention.
    #[arg(long)]
    no_syscalls: bool,
    /// Do not use the JVM's attach protocol (pinprof uses it once, to read the
    /// scheduler's settings; it starts the JVM's "Attach Listener" thread).
    #[arg(long)]
    no_attach: bool,
    /// Testing aid: cross-check the Java walk against a frame-pointer walk named from the
    /// JVM's perf map (needs -XX:+PreserveFramePointer and `jcmd <pid> Compiler.perfmap`).
    #[arg(long, hide = true)]
    fp_cross_check: bool,
}

impl CaptureArgs {
    fn options(self, progress: bool) -> Result<record::Options> {
        let duration = self
            .duration
            .map(|d| {
                Duration::try_from_secs_f64(d)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .with_context(|| {
                        format!("--duration must be a positive number of seconds, not {d}")
                    })
            })
            .transpose()?;
        let ring_buffer_bytes = self
            .ring_buffer_mib
            .checked_mul(1 << 20)
            .filter(|b| b.is_power_of_two())
            .context("--ring-buffer-mib must be a power of two, at most 2048")?;
        let pid = self.pid;
        Ok(record::Options {
            pid,
            duration,
            output: self
                .output
                .unwrap_or_else(|| PathBuf::from(format!("pinprof-{pid}.pinrec"))),
            replace: self.force,
            min_off_cpu: Duration::from_micros(self.min_off_cpu_us),
            ring_buffer_bytes,
            min_java_stack: Duration::from_micros(self.java_stack_min_us),
            attach: !self.no_attach,
            min_syscall: (!self.no_syscalls).then(|| Duration::from_micros(self.min_syscall_us)),
            fp_cross_check: self.fp_cross_check,
            progress,
        })
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

fn main() -> ExitCode {
    // Errors are shown as their messages, never with a backtrace, and many are routine (a
    // read of the target that raced its threads): with RUST_BACKTRACE set, anyhow would
    // take a backtrace for each (milliseconds apiece in the static binary). Panics keep theirs.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: the first thing main does, before any thread is started.
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("pinprof: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> Result<()> {
    if matches!(
        command,
        Command::Report { .. } | Command::Flamegraph { .. } | Command::Replay { .. }
    ) {
        // They read a file and write one: no capability of an installed pinprof applies.
        profiler::capabilities::drop_unless_root()?;
    }
    match command {
        Command::Record { capture, quiet } => {
            let summary = record::run(&capture.options(!quiet)?)?;
            print_summary(&summary);
            Ok(())
        }
        Command::Top {
            capture,
            refresh_ms,
            window,
        } => {
            let options = tui::Options {
                refresh: Duration::from_millis(refresh_ms.max(50)),
                window: (window > 0).then(|| Duration::from_secs(window)),
            };
            let summary = tui::live(&capture.options(false)?, &options)?;
            print_summary(&summary);
            Ok(())
        }
        Command::Replay {
            file,
            speed,
            window,
        } => {
            if let Some(s) = speed
                && !(s.is_finite() && s >= 0.01)
            {
                bail!("--speed must be a number of at least 0.01, not {s}");
            }
            let options = tui::Options {
                refresh: Duration::from_secs(1),
                window: window.filter(|&w| w > 0).map(Duration::from_secs),
            };
            tui::replay(&file, speed, &options)
        }
        Command::Report {
            file,
            format,
            top,
            depth,
            full,
        } => {
            let model = load(&file)?;
            let options = report::Options {
                top,
                depth,
                full,
                ..Default::default()
            };
            let analysis = Analysis::new(&model);
            let text = match format {
                Format::Text => report::to_text(&analysis, &options),
                Format::Json => {
                    serde_json::to_string_pretty(&report::to_json(&analysis, &options))? + "\n"
                }
            };
            print_stdout(&text)
        }
        Command::Flamegraph {
            file,
            output,
            per_thread,
            kind,
        } => {
            let options = flamegraph::Options { per_thread, kind };
            if output.as_os_str() == "-" {
                let model = load(&file)?;
                let mut svg = Vec::new();
                flamegraph::write_svg(&Analysis::new(&model), &options, &mut svg)?;
                return print_stdout(&String::from_utf8_lossy(&svg));
            }
            if recording::Recording::is_one(&output) {
                bail!(
                    "{} is a pinprof recording; pinprof does not replace it with an SVG",
                    output.display()
                );
            }
            let model = load(&file)?;
            // A temporary file beside the output, renamed over it: never written through a
            // symlink, never half-written.
            profiler::safe_fs::write_output(&output, |svg| {
                flamegraph::write_svg(&Analysis::new(&model), &options, svg)
            })?;
            say!("pinprof: wrote {}", output.display());
            Ok(())
        }
        Command::Vmstructs { pid, filter } => print_stdout(&jvm::vmstructs::dump(pid, &filter)?),
        Command::Jvm { pid, no_attach } => {
            let stop = profiler::signals::stop_flag()?;
            print_stdout(&jvm::describe(pid, !no_attach, &stop)?)
        }
    }
}

fn print_summary(summary: &record::Summary) {
    let causes = if summary.lost_causes.is_empty() {
        String::new()
    } else {
        format!(": {}", summary.lost_causes)
    };
    say!(
        "pinprof: recorded {} events in {:.1}s ({} lost{causes}) to {}; stopped: {}",
        summary.events,
        summary.seconds,
        summary.lost,
        summary.output.display(),
        summary.reason
    );
}

fn load(file: &std::path::Path) -> Result<model::Model> {
    let model = model::Model::read(file)?;
    for warning in &model.warnings {
        say!("pinprof: warning: {warning}");
    }
    Ok(model)
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn print_stdout(text: &str) -> Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to stdout"),
    }
}
