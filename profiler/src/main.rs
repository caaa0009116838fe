//! The `pinprof` command line: parses arguments and hands each subcommand to the library.

use profiler::analysis::{Analysis, findings::FindingKind};
use profiler::{export, flamegraph, jvm, model, record, recording, report, say, tui, units};

use std::{io::Write as _, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{Context as _, Result, bail};
use clap::{Args, CommandFactory as _, Parser, Subcommand, ValueEnum};

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
        /// Also write the recording in this format once it ends, as `pinprof export` would
        /// (the name says the format: .folded, .pb.gz, .trace.json, .svg); repeatable.
        #[arg(long, value_name = "FILE")]
        export: Vec<PathBuf>,
        /// Continuous profiling: send a pprof profile of each period to this Pyroscope
        /// server's ingest API (`http://pyroscope:4040`, `https://...`) while recording, until
        /// stopped. Credentials come from the environment: PINPROF_PUSH_BASIC_AUTH=USER:PASSWORD
        /// or PINPROF_PUSH_BEARER_TOKEN=TOKEN.
        #[arg(long, value_name = "URL")]
        push: Option<profiler::push::Server>,
        /// With --push: one profile per this long.
        #[arg(long, value_parser = units::duration, default_value = "15s", requires = "push")]
        every: Duration,
        /// With --push: the longest one push may take, all of it (lookup, connecting,
        /// sending, the answer); also the longest pinprof waits for pushes once it stopped.
        #[arg(long, value_parser = units::duration, default_value = "10s", requires = "push")]
        push_timeout: Duration,
        /// With an http:// --push: send the credentials anyway, in clear text.
        #[arg(long, requires = "push")]
        push_cleartext_credentials: bool,
        /// With --push: the application name (default: pinprof.COMMAND of the target).
        #[arg(long, value_name = "NAME", requires = "push")]
        push_app: Option<profiler::push::AppName>,
        /// With --push: a label added to every profile (repeatable).
        #[arg(long, value_name = "KEY=VALUE", requires = "push")]
        push_label: Vec<profiler::push::Label>,
        /// With --push: the tenant of a multi-tenant server (sent as X-Scope-OrgID).
        #[arg(long, value_name = "ID", requires = "push")]
        push_tenant: Option<String>,
        /// With an https:// --push: also trust the certificate authorities of this PEM file
        /// (beside the system's).
        #[arg(long, value_name = "FILE", requires = "push")]
        push_ca: Option<PathBuf>,
    },
    /// Record a live process as `record` does, and show carriers, pinned sites, threads,
    /// locks and system calls live in the terminal until you quit (q).
    Top {
        #[command(flatten)]
        capture: CaptureArgs,
        /// How often the view is recomputed (`500ms`; at least 50ms).
        #[arg(long, value_parser = units::duration, default_value = "1s")]
        refresh: Duration,
        /// As --refresh, in milliseconds.
        #[arg(long, hide = true, conflicts_with = "refresh")]
        refresh_ms: Option<u64>,
        /// Pinning, starvation, locks and system calls are shown for the latest this long
        /// (`60s`, `5m`; a bare number is seconds), which bounds the view's memory (0: since
        /// the start). Thread times are always since the start; the recording always has
        /// everything.
        #[arg(long, value_parser = units::duration_or_secs, default_value = "60s")]
        window: Duration,
    },
    /// Show a recording in the terminal view of `top`: at once, or replayed at its pace.
    Replay {
        file: PathBuf,
        /// Play the recording from its start at this many times the recorded pace (1 = as it
        /// happened); without it, the view opens at its end (space plays it from the start).
        #[arg(long)]
        speed: Option<f64>,
        /// Show pinning, starvation, locks and system calls for the latest this long only
        /// (`30s`; a bare number is seconds; default: the whole recording).
        #[arg(long, value_parser = units::duration_or_secs)]
        window: Option<Duration>,
    },
    /// Show what pinprof sees in a live JVM now: version, scheduler, carriers, and the virtual
    /// thread mounted on each.
    Jvm {
        #[arg(long, short)]
        pid: u32,
        /// Do not ask the JVM for its scheduler settings through the attach protocol.
        #[arg(long)]
        no_attach: bool,
        /// The most memory pinprof holds (`256MiB`) whatever the JVM makes it read: threads
        /// past it are left out, and said.
        #[arg(long, value_parser = units::size, default_value = "256MiB", value_name = "SIZE")]
        memory_budget: u64,
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
        #[command(flatten)]
        only: FilterArgs,
    },
    /// Render a recording's blocked time as a flamegraph SVG (time-weighted, microseconds).
    Flamegraph {
        file: PathBuf,
        /// The SVG to write (`-` for standard output): a new file (--force replaces a
        /// regular file), never a recording.
        #[arg(long, short)]
        output: PathBuf,
        /// Replace the output file if it exists (without it, an existing file is an error),
        /// as `record --force` does.
        #[arg(long)]
        force: bool,
        /// One tower per thread, named at the root.
        #[arg(long)]
        per_thread: bool,
        /// What to weigh: blocked time (off-cpu), pinned carrier time, futex waits, long system
        /// calls, lock wait time charged to the releasing holder's stack (locks), time on CPU
        /// from the samples (oncpu), every thread's time on and off CPU (wall), or virtual
        /// threads' waits off their carriers (vthread; `record --vthread-waits`).
        #[arg(long, value_enum, default_value_t = flamegraph::Kind::OffCpu)]
        kind: flamegraph::Kind,
        /// The innermost frame at the root (what the waits end in, then their callers).
        #[arg(long)]
        reverse: bool,
        /// Drawn top down (an icicle graph).
        #[arg(long)]
        inverted: bool,
        /// Draw the JVM's own threads' waits for work too (JIT compilers, the Attach
        /// Listener...), under a root frame of their own; left out without it.
        #[arg(long)]
        jvm_threads: bool,
        #[command(flatten)]
        only: FilterArgs,
    },
    /// Write a recording in a format other tools read: folded stacks (.folded), pprof
    /// (.pb.gz), a Chrome trace timeline (.trace.json, for Perfetto) or the flamegraph (.svg).
    Export {
        file: PathBuf,
        /// The file to write (`-` for standard output); its name says the format unless
        /// --format does. A new file (--force replaces a regular file), never a recording.
        #[arg(long, short)]
        output: PathBuf,
        /// Replace the output file if it exists (without it, an existing file is an error),
        /// as `record --force` does.
        #[arg(long)]
        force: bool,
        #[arg(long, short, value_enum)]
        format: Option<export::Format>,
        /// What folded stacks and the SVG weigh (pprof has every kind at once).
        #[arg(long, value_enum, default_value_t = flamegraph::Kind::OffCpu)]
        kind: flamegraph::Kind,
        /// Folded stacks and the SVG: one tower per thread, named at the root.
        #[arg(long)]
        per_thread: bool,
        /// The JVM's own threads' waits for work too (JIT compilers, the Attach Listener...):
        /// under a root frame of their own in folded stacks and the SVG, with the label
        /// `role:jvm` in pprof; left out without it.
        #[arg(long)]
        jvm_threads: bool,
        #[command(flatten)]
        only: FilterArgs,
    },
    /// A gate for CI: record a live process for a while (or read a recording) and hold it
    /// against limits. Exits 0 within limits, 1 when a limit is crossed, 2 when it could not
    /// measure (no such process, no privileges, an unreadable recording).
    Check {
        /// A recording to check, instead of recording one with --pid.
        #[arg(required_unless_present = "pid", conflicts_with = "pid")]
        file: Option<PathBuf>,
        /// Process to record.
        #[arg(long, short)]
        pid: Option<u32>,
        /// How long to record it (`10s`; a bare number is seconds).
        #[arg(long, short, value_parser = units::duration_or_secs, default_value = "10s")]
        duration: Duration,
        /// Keep the recording made (by default it is removed once checked).
        #[arg(long, short, requires = "pid")]
        output: Option<PathBuf>,
        /// Fail when carriers were pinned longer than this in all (`100ms`).
        #[arg(long, value_parser = units::duration)]
        max_pinned: Option<Duration>,
        /// Fail when every carrier was pinned or blocked at once longer than this in all
        /// (`0s`: any starvation fails).
        #[arg(long, value_parser = units::duration)]
        max_starvation: Option<Duration>,
        /// Fail on findings of these kinds (comma-separated).
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "gridlock,deadlock"
        )]
        fail_on: Vec<FindingKind>,
        /// Also write the verdict as JUnit XML, a test case per limit.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Replace the files of --output and --junit if they exist (without it, an existing
        /// file is an error).
        #[arg(long)]
        force: bool,
        /// Judge a damaged recording (cut short, or with damage read past) all the same. By
        /// default it cannot be measured (exit 2): its figures are only what survived.
        #[arg(long)]
        accept_damaged: bool,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Print a shell completion script (`cargo xtask dist` puts them beside the binary).
    #[command(hide = true)]
    Completions { shell: clap_complete::Shell },
    /// Print the manual page, in roff, of pinprof or of one of its subcommands
    /// (`pinprof-record(1)`); `cargo xtask dist` puts them beside the binary.
    #[command(hide = true)]
    Man { subcommand: Option<String> },

    /// Debug: dump the live JVM's VMStructs fields whose type or name contains FILTER.
    #[command(hide = true)]
    Vmstructs { pid: u32, filter: String },
}

/// Which part of a recording a view is made of: shared by `report`, `flamegraph`, `export`.
#[derive(Args, Clone, Default)]
struct FilterArgs {
    /// Only these threads (repeatable, or comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    tid: Vec<u32>,
    /// Only threads whose name matches this regular expression (`^http-`).
    #[arg(long, value_name = "REGEX")]
    thread: Option<String>,
    /// Only the virtual-thread carriers.
    #[arg(long)]
    carriers: bool,
    /// From this moment: a time after the recording's start (`30s`, `1m`; a bare number is
    /// seconds) or of the wall clock (`18:41:05`, `2026-12-02 18:41:05` on this machine's
    /// time zone, or `2026-12-02T18:41:05Z`).
    #[arg(long, value_parser = units::moment, value_name = "TIME")]
    from: Option<units::Moment>,
    /// To this moment (as --from).
    #[arg(long, value_parser = units::moment, value_name = "TIME")]
    to: Option<units::Moment>,
}

impl FilterArgs {
    fn filter(&self) -> Result<model::Filter> {
        if let (Some(units::Moment::AfterStart(from)), Some(units::Moment::AfterStart(to))) =
            (self.from, self.to)
            && from >= to
        {
            bail!("--from must come before --to");
        }
        let thread = self
            .thread
            .as_deref()
            .map(regex::Regex::new)
            .transpose()
            .context("--thread is not a regular expression")?;
        Ok(model::Filter {
            tids: self.tid.clone(),
            thread,
            carriers: self.carriers,
            from: self.from,
            to: self.to,
        })
    }
}

/// What to record and how: shared by `record` and `top`.
#[derive(Args)]
struct CaptureArgs {
    /// Process to attach to (no restart, no flags, nothing loaded into it).
    #[arg(long, short)]
    pid: u32,
    /// How long to record (`30s`, `5m`; a bare number is seconds); without it, until
    /// Ctrl-C (q in `top`) or the target exits.
    #[arg(long, short, value_parser = units::duration_or_secs)]
    duration: Option<Duration>,
    /// Recording to write (default: pinprof-<pid>.pinrec); created new, mode 0600.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Replace the output file if it exists (without it, an existing file is an error). The
    /// old file is replaced, never written through.
    #[arg(long)]
    force: bool,
    /// Off-CPU intervals shorter than this (`100us`) are summed per thread in the kernel
    /// instead of recorded one by one with their stacks.
    #[arg(long, value_parser = units::duration, default_value = "0s")]
    min_off_cpu: Duration,
    /// Java stacks are walked for blocks at least this long (`5ms`), and for every pinned
    /// block however short; 0s turns the Java stack walk off.
    #[arg(long, value_parser = units::duration, default_value = "1ms")]
    java_stack_min: Duration,
    /// As --min-off-cpu, in microseconds (kept for scripts that give it).
    #[arg(long, hide = true, conflicts_with = "min_off_cpu")]
    min_off_cpu_us: Option<u64>,
    /// As --java-stack-min, in microseconds.
    #[arg(long, hide = true, conflicts_with = "java_stack_min")]
    java_stack_min_us: Option<u64>,
    /// Ring buffer size in MiB (a power of two); raise it if events are lost.
    #[arg(long, default_value_t = 16)]
    ring_buffer_mib: u32,
    /// System calls and futex waits at least this long (`1ms`) are recorded one by one with
    /// their stacks, file and waker; shorter ones are counted per thread and call.
    #[arg(long, value_parser = units::duration, default_value = "1ms")]
    min_syscall: Duration,
    /// As --min-syscall, in microseconds.
    #[arg(long, hide = true, conflicts_with = "min_syscall")]
    min_syscall_us: Option<u64>,
    /// Do not record system calls, futex waits and kernel lock contention.
    #[arg(long)]
    no_syscalls: bool,
    /// How system calls are seen: `blocking`, the call a thread blocks in, read as it blocks
    /// (no program at the host's system calls: other processes pay nothing); `traced` from
    /// entry to exit, every call with its result (each system call of every process of the
    /// host takes the kernel's slow path while pinprof records).
    #[arg(long, value_enum, default_value_t = SyscallView::Blocking, conflicts_with = "no_syscalls")]
    syscalls: SyscallView,
    /// Do not use the JVM's attach protocol (pinprof uses it once, to read the
    /// scheduler's settings; it starts the JVM's "Attach Listener" thread).
    #[arg(long)]
    no_attach: bool,
    /// Testing aid: cross-check the Java walk against a frame-pointer walk named from the
    /// JVM's perf map (needs -XX:+PreserveFramePointer and `jcmd <pid> Compiler.perfmap`).
    #[arg(long, hide = true)]
    fp_cross_check: bool,
    /// On-CPU samples a second of each CPU, charged to the sampled thread's stack and, on a
    /// carrier, to the mounted virtual thread (monopolization); 0 turns sampling off.
    #[arg(long, default_value_t = 99, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    oncpu_hz: u32,
    /// A thread that waits at least this long from its wake-up to running (`2ms`) is
    /// recorded with its waker (every wake-up counts in the latency histograms).
    #[arg(long, value_parser = units::duration, default_value = "2ms")]
    late_wakeup: Duration,
    /// Also record virtual threads' waits off their carriers (unmounted: a
    /// `ReentrantLock`, a `Condition`, a sleep, socket I/O, a monitor on JDK 24+), each
    /// at least this long (`1ms`) with its blocker, owner and stack; shorter ones are counted.
    /// Opt-in: each unmount and mount of a virtual thread then costs the target a trap.
    #[arg(long, value_parser = units::duration, value_name = "MIN", num_args = 0..=1, default_missing_value = "1ms")]
    vthread_waits: Option<Duration>,
    #[command(flatten)]
    limits: LimitArgs,
}

/// What pinprof may spend on a target: shared by every command that records.
#[derive(Args)]
struct LimitArgs {
    /// The most memory pinprof holds (`256MiB`, `1GiB`), whatever the target makes it keep:
    /// longer names are cut, unused stacks forgotten, threads past it left out, each counted.
    #[arg(long, value_parser = units::size, default_value = "256MiB", value_name = "SIZE")]
    memory_budget: u64,
    /// The recording ends, readable, once its file reaches this size (`4GiB`).
    #[arg(long, value_parser = units::size, default_value = "4GiB", value_name = "SIZE")]
    max_size: u64,
}

impl LimitArgs {
    fn budget(&self) -> Result<profiler::budget::Budget> {
        profiler::budget::Budget::new(self.memory_budget).context("--memory-budget")
    }

    fn max_size(&self) -> Result<u64> {
        if self.max_size < 1 << 20 {
            bail!("--max-size must be at least 1MiB");
        }
        Ok(self.max_size)
    }
}

impl CaptureArgs {
    fn options(self, progress: bool) -> Result<record::Options> {
        if self.duration.is_some_and(|d| d.is_zero()) {
            bail!("--duration must be more than 0s");
        }
        let duration = self.duration;
        let micros = |old: Option<u64>, new: Duration| old.map_or(new, Duration::from_micros);
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
            min_off_cpu: micros(self.min_off_cpu_us, self.min_off_cpu),
            ring_buffer_bytes,
            min_java_stack: micros(self.java_stack_min_us, self.java_stack_min),
            attach: !self.no_attach,
            min_syscall: (!self.no_syscalls).then(|| micros(self.min_syscall_us, self.min_syscall)),
            trace_syscalls: self.syscalls == SyscallView::Traced,
            fp_cross_check: self.fp_cross_check,
            progress,
            on_cpu_hz: (self.oncpu_hz > 0).then_some(self.oncpu_hz),
            late_wakeup: self.late_wakeup.max(Duration::from_nanos(1)),
            vthread_waits: self.vthread_waits,
            budget: self.limits.budget()?,
            max_size: Some(self.limits.max_size()?),
        })
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

/// `record --syscalls`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum SyscallView {
    /// Every call from entry to exit, with its result.
    Traced,
    /// The call a thread blocks in, read as it blocks, timed to its switch back in.
    Blocking,
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
    if let Command::Check {
        file,
        pid,
        duration,
        output,
        max_pinned,
        max_starvation,
        fail_on,
        junit,
        force,
        accept_damaged,
        limits: spend,
    } = cli.command
    {
        let limits = profiler::check::Options {
            max_pinned,
            max_starvation,
            fail_on,
            accept_damaged,
        };
        let outputs = CheckOutputs {
            recording: output,
            junit,
            existing: existing(force),
        };
        return check(file, pid, duration, outputs, &limits, &spend);
    }
    let reader = cli.command.attaches_to_nothing();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("pinprof: error: {e:#}");
            note_without_capabilities(reader, &e);
            ExitCode::FAILURE
        }
    }
}

impl Command {
    /// Whether it reads files only (a recording) and writes what the user asked for.
    fn attaches_to_nothing(&self) -> bool {
        matches!(
            self,
            Command::Report { .. }
                | Command::Flamegraph { .. }
                | Command::Export { .. }
                | Command::Replay { .. }
                | Command::Completions { .. }
                | Command::Man { .. }
        ) || matches!(self, Command::Check { file: Some(_), .. })
    }
}

/// A permission refused to a reader run as root is said for what it is: root without its
/// capabilities.
fn note_without_capabilities(reader: bool, e: &anyhow::Error) {
    // SAFETY: getuid has no preconditions.
    let root = unsafe { libc::getuid() } == 0;
    if reader && root && profiler::capabilities::is_permission_denied(e) {
        say!(
            "pinprof: note: {}",
            profiler::capabilities::ROOT_WITHOUT_CAPABILITIES
        );
    }
}

fn run(command: Command) -> Result<()> {
    if command.attaches_to_nothing() {
        // Before any thread is started (capabilities are each thread's): a recording may
        // come from anyone, and reading it needs no capability, root's included.
        profiler::capabilities::drop_all()?;
    }
    match command {
        Command::Record {
            capture,
            quiet,
            export,
            push,
            every,
            push_timeout,
            push_cleartext_credentials,
            push_app,
            push_label,
            push_tenant,
            push_ca,
        } => {
            // Every export's format is known before anything is recorded; --force replaces
            // them as it does the recording.
            let existing = existing(capture.force);
            let exports = export
                .into_iter()
                .map(|path| {
                    let format = export::Format::choose(None, &path)?;
                    // Said now, not after minutes of recording (and again as it is written).
                    if existing == profiler::safe_fs::Existing::Refuse
                        && std::fs::symlink_metadata(&path).is_ok()
                    {
                        bail!(
                            "{} already exists; pinprof does not overwrite it (choose another \
                             name, or --force to replace it)",
                            path.display()
                        );
                    }
                    Ok((path, format))
                })
                .collect::<Result<Vec<_>>>()?;
            let options = capture.options(!quiet && push.is_none())?;
            let summary = match push {
                None => record::run(&options)?,
                Some(server) => {
                    if every < Duration::from_secs(1) {
                        bail!("--every must be at least 1s");
                    }
                    // Settings and credentials are checked before anything is recorded.
                    let tls = match server.scheme {
                        profiler::push::Scheme::Https => {
                            Some(profiler::push::tls_config(push_ca.as_deref())?)
                        }
                        profiler::push::Scheme::Http if push_ca.is_some() => {
                            bail!("--push-ca is for an https:// server")
                        }
                        profiler::push::Scheme::Http => None,
                    };
                    if let Some(tenant) = &push_tenant {
                        profiler::push::header_value(tenant).context("--push-tenant")?;
                    }
                    let command = profiler::target::Target::open(options.pid)?.info().command;
                    let push = profiler::push::Options {
                        server,
                        every,
                        timeout: push_timeout,
                        app: push_app
                            .unwrap_or_else(|| profiler::push::AppName::of_command(&command)),
                        labels: push_label,
                        auth: profiler::push::Auth::from_env()?,
                        cleartext_credentials: push_cleartext_credentials,
                        tenant: push_tenant,
                        tls,
                    };
                    let (summary, pushed) = profiler::push::run(&options, &push)?;
                    say!("pinprof: {pushed}");
                    summary
                }
            };
            print_summary(&summary);
            for (path, format) in exports {
                let options = export::Options {
                    format,
                    flamegraph: flamegraph::Options::default(),
                };
                write_export(|| load_written(&summary), &path, existing, &options)?;
                if !quiet {
                    say!("pinprof: wrote {}", path.display());
                }
            }
            Ok(())
        }
        Command::Top {
            capture,
            refresh,
            refresh_ms,
            window,
        } => {
            let refresh = refresh_ms.map_or(refresh, Duration::from_millis);
            let options = tui::Options {
                refresh: refresh.max(Duration::from_millis(50)),
                window: (!window.is_zero()).then_some(window),
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
                window: window.filter(|w| !w.is_zero()),
            };
            tui::replay(&file, speed, &options)
        }
        Command::Report {
            file,
            format,
            top,
            depth,
            full,
            only,
        } => {
            let model = load_only(&file, &only.filter()?)?;
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
            force,
            per_thread,
            kind,
            reverse,
            inverted,
            jvm_threads,
            only,
        } => {
            let options = flamegraph::Options {
                per_thread,
                kind,
                reverse,
                inverted,
                jvm_threads,
            };
            let only = only.filter()?;
            if output.as_os_str() == "-" {
                let model = load_only(&file, &only)?;
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
            let model = load_only(&file, &only)?;
            // A temporary file beside the output, then moved to its name: never written
            // through a symlink, never half-written.
            profiler::safe_fs::write_output(&output, existing(force), |svg| {
                flamegraph::write_svg(&Analysis::new(&model), &options, svg)
            })?;
            say!("pinprof: wrote {}", output.display());
            Ok(())
        }
        Command::Vmstructs { pid, filter } => print_stdout(&jvm::vmstructs::dump(pid, &filter)?),
        Command::Export {
            file,
            output,
            force,
            format,
            kind,
            per_thread,
            jvm_threads,
            only,
        } => {
            let options = export::Options {
                format: export::Format::choose(format, &output)?,
                flamegraph: flamegraph::Options {
                    per_thread,
                    kind,
                    jvm_threads,
                    ..Default::default()
                },
            };
            let only = only.filter()?;
            write_export(
                || load_only(&file, &only),
                &output,
                existing(force),
                &options,
            )
        }
        Command::Check { .. } => unreachable!("handled in main"),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "pinprof", &mut out);
            print_stdout(&String::from_utf8_lossy(&out))
        }
        Command::Man { subcommand } => {
            let cli = Cli::command();
            let page = match subcommand {
                None => cli,
                Some(name) => {
                    let sub = cli
                        .find_subcommand(&name)
                        .filter(|s| !s.is_hide_set())
                        .with_context(|| format!("pinprof has no subcommand {name}"))?;
                    sub.clone().name(format!("pinprof-{name}"))
                }
            };
            let mut out = Vec::new();
            clap_mangen::Man::new(page).render(&mut out)?;
            print_stdout(&String::from_utf8_lossy(&out))
        }
        Command::Jvm {
            pid,
            no_attach,
            memory_budget,
        } => {
            let budget = profiler::budget::Budget::new(memory_budget).context("--memory-budget")?;
            let stop = profiler::signals::stop_flag()?;
            print_stdout(&jvm::describe(pid, !no_attach, budget, &stop)?)
        }
    }
}

/// What `pinprof check` writes besides its verdict.
struct CheckOutputs {
    /// The recording it makes, kept (--output).
    recording: Option<PathBuf>,
    /// The verdict as JUnit XML.
    junit: Option<PathBuf>,
    /// What an existing file at either name gets.
    existing: profiler::safe_fs::Existing,
}

/// `pinprof check`: 0 within the limits, 1 a limit crossed, 2 not measured.
fn check(
    file: Option<PathBuf>,
    pid: Option<u32>,
    duration: Duration,
    outputs: CheckOutputs,
    limits: &profiler::check::Options,
    spend: &LimitArgs,
) -> ExitCode {
    let CheckOutputs {
        recording: output,
        junit,
        existing,
    } = outputs;
    let suite = match (&file, pid) {
        (Some(f), _) => format!("pinprof check {}", f.display()),
        (None, Some(pid)) => format!("pinprof check pid {pid}"),
        (None, None) => "pinprof check".into(),
    };
    let write_junit = |xml: String| -> Result<()> {
        match &junit {
            Some(path) => profiler::safe_fs::write_output(path, existing, |out| {
                Ok(out.write_all(xml.as_bytes())?)
            }),
            None => Ok(()),
        }
    };
    let verdict = (|| -> Result<profiler::check::Verdict> {
        let (recording, scratch) = match (file, pid) {
            (Some(file), _) => {
                // As `report` does (see `run`).
                profiler::capabilities::drop_all()?;
                (Recorded::Named(file), None)
            }
            (None, Some(pid)) => {
                let (path, scratch) = match output {
                    Some(path) => (path, None),
                    None => {
                        let dir =
                            profiler::safe_fs::private_temp_dir(&format!("pinprof-check-{pid}"))?;
                        (dir.join("check.pinrec"), Some(dir))
                    }
                };
                let options = record::Options {
                    pid,
                    duration: Some(duration),
                    output: path.clone(),
                    replace: existing == profiler::safe_fs::Existing::Replace,
                    min_off_cpu: Duration::ZERO,
                    ring_buffer_bytes: 16 << 20,
                    attach: true,
                    min_syscall: Some(Duration::from_millis(1)),
                    trace_syscalls: false,
                    fp_cross_check: false,
                    min_java_stack: Duration::from_millis(1),
                    progress: false,
                    on_cpu_hz: Some(99),
                    late_wakeup: Duration::from_millis(2),
                    vthread_waits: None,
                    budget: spend.budget()?,
                    max_size: Some(spend.max_size()?),
                };
                let recorded = record::run(&options);
                let summary = match recorded {
                    Ok(summary) => summary,
                    Err(e) => {
                        if let Some(dir) = &scratch {
                            let _ = std::fs::remove_dir_all(dir);
                        }
                        return Err(e);
                    }
                };
                (Recorded::Written(summary), scratch)
            }
            (None, None) => bail!("give a recording, or --pid"),
        };
        // What this run recorded is read back through its own descriptor: the verdict is
        // about what pinprof recorded, whatever now stands at the output's name.
        let model = match &recording {
            Recorded::Named(file) => load(file),
            Recorded::Written(summary) => load_written(summary),
        };
        if let Some(dir) = &scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
        let model = model?;
        // A gate that passes on what survived of a cut file would pass on a crash.
        if !limits.accept_damaged
            && let Some(first) = model.damage.first()
        {
            let more = match model.damage.len() {
                1 => String::new(),
                n => format!(", and {} more", n - 1),
            };
            bail!(
                "the recording is damaged ({first}{more}): its figures are only what survived; \
                 --accept-damaged judges it all the same"
            );
        }
        Ok(profiler::check::evaluate(&Analysis::new(&model), limits))
    })();
    match verdict {
        Ok(verdict) => {
            let _ = print_stdout(&verdict.summary());
            if let Err(e) = write_junit(profiler::check::junit(&verdict, &suite)) {
                say!("pinprof: error: {e:#}");
                note_without_capabilities(pid.is_none(), &e);
                return ExitCode::from(2);
            }
            ExitCode::from(if verdict.passed() { 0 } else { 1 })
        }
        Err(e) => {
            say!("pinprof check: could not measure: {e:#}");
            note_without_capabilities(pid.is_none(), &e);
            let _ = write_junit(profiler::check::junit_error(&suite, &format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// What `--force` says of an output that exists.
fn existing(force: bool) -> profiler::safe_fs::Existing {
    if force {
        profiler::safe_fs::Existing::Replace
    } else {
        profiler::safe_fs::Existing::Refuse
    }
}

/// Writes an export of the recording `load` reads to `output` (`-`: standard output).
fn write_export(
    load: impl FnOnce() -> Result<model::Model>,
    output: &std::path::Path,
    existing: profiler::safe_fs::Existing,
    options: &export::Options,
) -> Result<()> {
    if output.as_os_str() == "-" {
        let model = load()?;
        let mut stdout = std::io::stdout().lock();
        return export::write(&Analysis::new(&model), options, &mut stdout);
    }
    if recording::Recording::is_one(output) {
        bail!(
            "{} is a pinprof recording; pinprof does not replace it with an export",
            output.display()
        );
    }
    let model = load()?;
    // A temporary file beside the output, then moved to its name: never written through a
    // symlink, never half-written.
    profiler::safe_fs::write_output(output, existing, |out| {
        export::write(&Analysis::new(&model), options, out)
    })
}

fn print_summary(summary: &record::Summary) {
    let causes = if summary.lost_causes.is_empty() {
        String::new()
    } else {
        format!(": {}", summary.lost_causes)
    };
    // What the memory budget cut, when it cut anything.
    let cuts = match summary.cuts.describe() {
        cut if cut.is_empty() => String::new(),
        cut => format!(
            "; within its memory budget of {}: {cut}",
            profiler::budget::mib(summary.budget.bytes())
        ),
    };
    say!(
        "pinprof: recorded {} events in {:.1}s ({} lost{causes}{cuts}) to {}; stopped: {}",
        summary.events,
        summary.seconds,
        summary.lost,
        summary.output.display(),
        summary.reason
    );
}

/// The recording `check` judges: one the user names, or the one it just made.
enum Recorded {
    Named(PathBuf),
    Written(record::Summary),
}

/// `load`, narrowed to what the filter keeps.
fn load_only(file: &std::path::Path, only: &model::Filter) -> Result<model::Model> {
    let mut model = load(file)?;
    if !only.is_empty() {
        model.filter(only)?;
    }
    Ok(model)
}

fn load(file: &std::path::Path) -> Result<model::Model> {
    said(model::Model::read(file)?)
}

/// The model of what this run recorded, read back through the descriptor it was written
/// with: the name may lead to another file by now.
fn load_written(summary: &record::Summary) -> Result<model::Model> {
    let file = summary
        .file
        .try_clone()
        .with_context(|| format!("cannot read back {}", summary.output.display()))?;
    said(model::Model::read_file(file, &summary.output)?)
}

/// The model, its warnings said.
fn said(model: model::Model) -> Result<model::Model> {
    for warning in &model.warnings {
        say!("pinprof: warning: {warning}");
    }
    Ok(model)
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn print_stdout(text: &str) -> Result<()> {
    // Whatever it holds of the target's, no escape sequence reaches the terminal.
    let text = profiler::text::for_terminal(text, usize::MAX);
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to stdout"),
    }
}
