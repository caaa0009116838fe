//! `pinprof record`: capture a live process into a recording until the duration ends, the user
//! interrupts, or the target exits. Whatever stops it, the file is left readable and every
//! program is detached (dropping `Capture` does that).

use std::{
    collections::{HashMap, HashSet},
    io::IsTerminal as _,
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result};

mod thread_watch;

use thread_watch::ThreadWatch;

use crate::{
    capture::{self, Capture, Raw, WaitAtStart},
    events::{
        Event, Frame, FrameKind, FramePointerCheck, FutexWait, FutexWaker, JavaBlock,
        JavaThreadInfo, JavaThreadState, KernelLock, OffCpu, OffCpuState, OpenWait, Stack, Syscall,
        SyscallSum, ThreadCpu, ThreadName,
    },
    fdname,
    jvm::{
        self,
        chunk::Frozen,
        hotspot::{Hotspot, JavaThread, ThreadStates},
        memory::Memory,
        walk::Tier,
    },
    mappings::Mappings,
    recording::{End, Header, RecordingWriter, StopReason},
    safe_fs::{self, Existing},
    symbolize::Symbolizer,
    target::Target,
    unwind::NativeUnwinder,
};

#[derive(Clone, Debug)]
pub struct Options {
    pub pid: u32,
    pub duration: Option<Duration>,
    pub output: PathBuf,
    /// An existing file at `output` is replaced (else it is an error).
    pub replace: bool,
    pub min_off_cpu: Duration,
    pub ring_buffer_bytes: u32,
    /// Ask the JVM for its settings through the attach protocol (no agent is loaded).
    pub attach: bool,
    /// System calls and futex waits at least this long are events (None: not traced).
    pub min_syscall: Option<Duration>,
    /// Also walk each copied Java stack by frame pointers, name it from the perf map, and
    /// count agreement (a JVM with -XX:+PreserveFramePointer and a perf map; for testing).
    pub fp_cross_check: bool,
    /// Java stacks are walked for blocks at least this long (zero: never).
    pub min_java_stack: Duration,
    /// Print the progress line on stderr.
    pub progress: bool,
}

#[derive(Debug)]
pub struct Summary {
    pub output: PathBuf,
    pub events: u64,
    pub lost: u64,
    /// What the lost events were lost to, said in words ("" when none were).
    pub lost_causes: String,
    pub reason: StopReason,
    pub seconds: f64,
}

/// How often the ring buffer is drained when the target is not busy (the kernel programs do
/// not wake user space per record).
const DRAIN_PERIOD: Duration = Duration::from_millis(100);

/// How often counters are snapshot into the file and the file is flushed.
const CHECKPOINT: Duration = Duration::from_secs(1);

/// Records until the duration ends, Ctrl-C, SIGTERM or a hang-up (the recording is finished
/// all the same), or the target exits.
pub fn run(options: &Options) -> Result<Summary> {
    let stop = crate::signals::stop_flag()?;
    let stops = Stops {
        signal: &stop,
        quit: &AtomicBool::new(false),
    };
    run_with(options, stops, None)
}

/// What ends a recording before its duration: a signal, or the user quitting a live view.
#[derive(Clone, Copy)]
pub struct Stops<'a> {
    pub signal: &'a AtomicBool,
    pub quit: &'a AtomicBool,
}

/// Records until the duration ends, a stop is set, or the target exits. With `tee`, the
/// stream written to the file also goes there (a live view), and nothing is printed.
pub fn run_with(
    options: &Options,
    stop: Stops,
    tee: Option<std::sync::mpsc::Sender<crate::recording::Record>>,
) -> Result<Summary> {
    capture::check_privileges()?;
    let target = Target::open(options.pid)?;
    let pid_ns = crate::namespaces::capture_namespace(options.pid)?;
    // Made before anything is attached, so that a name already taken is said at once; gone
    // again if the capture fails before its header is written.
    let existing = if options.replace {
        Existing::Replace
    } else {
        Existing::Refuse
    };
    let output = safe_fs::create_output(&options.output, existing)?;
    // A JVM caught starting is read once it has started, not before (see jvm::startup).
    let startup =
        jvm::startup::wait_until_started(options.pid, jvm::startup::WAIT, stop.signal, || {
            if tee.is_none() {
                say!(
                    "pinprof: JVM {} is still starting: waiting up to {}s for it",
                    options.pid,
                    jvm::startup::WAIT.as_secs()
                );
            }
        });
    let mut info = target.info();
    let mut warnings = Vec::new();
    if startup == jvm::startup::Startup::StillStarting {
        warnings.push(format!(
            "the JVM had not finished starting after {}s: what pinprof reads of it may be \
             missing or wrong",
            jvm::startup::WAIT.as_secs()
        ));
    }
    let hotspot = open_jvm(options, &mut info, &mut warnings, stop.signal);
    // Reading the JVM can take seconds (the attach protocol): a Ctrl-C meanwhile ends here.
    if stop.signal.load(Ordering::Relaxed) {
        anyhow::bail!("interrupted before the recording started");
    }
    // Known to the kernel before it sees the first event; read again when the list changes.
    let jvm = hotspot.map(|mut hotspot| {
        let threads = hotspot.java_threads().unwrap_or_default();
        JvmWatch { hotspot, threads }
    });
    let java_threads = jvm
        .iter()
        .flat_map(|j| &j.threads)
        .map(known_thread)
        .collect();
    let syscalls = options.min_syscall.is_some();
    let mut first_accounts = Vec::new();
    // A reader of its own follows the JVM's thread list from the moment the programs attach
    // (opened first: that takes a while, and threads born meanwhile would go unknown).
    let list_reader = jvm.as_ref().map(|j| j.hotspot.reopen());
    let mut capture = Capture::start(
        &capture::Options {
            pid: options.pid,
            pid_ns,
            min_off_cpu_ns: options.min_off_cpu.as_nanos() as u64,
            ring_buffer_bytes: options.ring_buffer_bytes,
            jvm: jvm.as_ref().map(|j| j.hotspot.layout),
            min_java_stack_ns: options.min_java_stack.as_nanos() as u64,
            min_syscall_ns: options.min_syscall.map(|d| (d.as_nanos() as u64).max(1)),
            java_threads,
        },
        || {
            let waits = waits_at_start(&target, jvm.as_ref(), syscalls);
            // Threads' times are counted from their first account: read just before the
            // window opens, so that a thread born after it is not in it.
            first_accounts = target.cpu_accounts();
            waits
        },
    )?;
    let watch = match (list_reader, capture.take_registry(), &jvm) {
        (Some(reader), Some(registry), Some(jvm)) => reader
            .and_then(|reader| ThreadWatch::start(reader, registry, jvm.threads.clone()))
            .map_err(|e| {
                warnings.push(format!(
                    "the JVM's thread list cannot be followed ({e:#}): Java threads born \
                     from now on count as other threads"
                ))
            })
            .ok(),
        _ => None,
    };
    warnings.extend(capture.warnings.iter().cloned());
    if crate::symbolize::kernel_symbols_hidden() {
        warnings.push(
            "the kernel hides its symbols from pinprof (kptr_restrict; needs root or \
             CAP_SYSLOG): kernel frames are left unnamed"
                .into(),
        );
    }

    let header = Header {
        pinprof_version: env!("CARGO_PKG_VERSION").to_string(),
        target: info,
        start_mono_ns: capture.started_ns(),
        // The wall clock at that same instant.
        start_unix_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            .saturating_sub(capture::monotonic_ns().saturating_sub(capture.started_ns())),
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        kernel_release: read_trimmed("/proc/sys/kernel/osrelease"),
        min_off_cpu_ns: options.min_off_cpu.as_nanos() as u64,
        min_syscall_ns: options.min_syscall.map(|d| d.as_nanos() as u64),
    };
    let quiet = tee.is_some();
    let mut writer = RecordingWriter::create(output, &header, tee)?;
    for warning in warnings {
        if !quiet {
            say!("pinprof: warning: {warning}");
        }
        writer.write_event(&Event::Warning(warning))?;
    }
    if let Some(container) = crate::namespaces::container(options.pid) {
        writer.write_event(&Event::Container(container))?;
    }
    // The target's mapped files, copied once for naming and unwinding alike.
    let mut mappings = Mappings::new(options.pid);
    let mut session = Session {
        target_mem: std::fs::File::open(format!("/proc/{}/mem", target.pid)).ok(),
        symbolizer: Symbolizer::new(&target),
        jvm,
        target,
        capture,
        writer,
        known_threads: HashSet::new(),
        known_stacks: HashSet::new(),
        monitor_classes: HashMap::new(),
        init_waits: Default::default(),
        own_stacks: HashMap::new(),
        min_syscall_ns: options
            .min_syscall
            .map_or(u64::MAX, |d| d.as_nanos() as u64),
        native: NativeUnwinder::new(&mut mappings),
        mappings,
        fds: fdname::FdNamer::new(options.pid),
        native_stacks: HashMap::new(),
        unwound: HashMap::new(),
        lock_symbols: HashMap::new(),
        fp_check: options.fp_cross_check.then(FramePointerCheck::default),
        events: 0,
        watch,
        registration_failed: false,
        exit_ns: None,
    };
    session.warm_up();
    let started_ns = session.capture.started_ns();
    session.write_accounts(started_ns, first_accounts)?;
    let result = session.run(options, stop);
    let reason = match &result {
        Ok(reason) => reason.clone(),
        Err(e) => StopReason::Error(format!("{e:#}")),
    };
    let Session {
        writer,
        capture,
        events,
        ..
    } = session;
    let counters = capture.counters();
    let lost = counters.lost();
    let maps_full = counters.start_map_full + counters.syscall_map_full;
    let lost_causes = [
        capture.lost_causes().describe(),
        if maps_full > 0 {
            format!("{maps_full} with a kernel map full")
        } else {
            String::new()
        },
    ]
    .into_iter()
    .filter(|c| !c.is_empty())
    .collect::<Vec<_>>()
    .join(", ");
    // The end marker goes in even after an error, so the file says how it ended.
    let end_mono_ns = capture.stopped_ns().unwrap_or_else(capture::monotonic_ns);
    drop(capture);
    let finished = writer.finish(End {
        end_mono_ns,
        reason: reason.clone(),
    });
    // A write that failed (a full disk) cuts the file where it failed: what came before reads.
    let output = options.output.display();
    finished.with_context(|| {
        format!("the recording {output} is cut short, but what it holds reads (report, replay)")
    })?;
    result.with_context(|| format!("the recording {output} ends there, and reads"))?;
    Ok(Summary {
        output: options.output.clone(),
        events,
        lost,
        lost_causes,
        reason,
        seconds: (end_mono_ns - header.start_mono_ns) as f64 / 1e9,
    })
}

/// The target's threads asleep now, in waits the kernel programs will not see begin: their
/// state and system call from /proc, their JVM state from the JVM's memory (the fields the
/// kernel program reads as a thread blocks; they cannot change while it sleeps). An interval
/// is given only where it has something to show (see `WaitAtStart`); an idle carrier's park
/// is the scheduler waiting for work, as in the kernel program.
fn waits_at_start(target: &Target, jvm: Option<&JvmWatch>, syscalls: bool) -> Vec<WaitAtStart> {
    use profiler_ebpf::{
        OffCpuStart, SyscallStart,
        java_flags::{CARRIER, KNOWN, MOUNTED},
        syscall_flags, sysno, task_state,
    };
    if jvm.is_none() && !syscalls {
        return Vec::new(); // nothing to seed: no JVM state to show, no calls traced
    }
    // For futex timeouts: the caller's `struct timespec` (a null pointer reads as none).
    let mem = syscalls.then(|| Memory::open(target.pid).ok()).flatten();
    let mut waits = Vec::new();
    for tid in target.tids() {
        // Read first: a change by the time the programs are attached means it ran.
        let Some(runs) = target.runs(tid) else {
            continue;
        };
        let prev_state = match target.thread_state(tid) {
            Some('S') => task_state::INTERRUPTIBLE,
            Some('D') => task_state::UNINTERRUPTIBLE,
            _ => continue,
        };
        let java = jvm
            .and_then(|jvm| {
                let thread = jvm.threads.iter().find(|t| t.tid == tid)?;
                jvm.hotspot.java_state(thread)
            })
            .unwrap_or_default();
        let shown = java.flags & KNOWN != 0 && (java.flags & CARRIER != 0 || java.anchor_sp != 0);
        let idle_carrier = java.flags & (CARRIER | MOUNTED) == CARRIER;
        let off_cpu = shown.then_some(OffCpuStart {
            start_ns: 0,
            prev_state,
            kernel_stack_id: -1,
            user_stack_id: -1,
            waker_tid: 0,
            _pad: 0,
            java,
        });
        let syscall = syscalls
            .then(|| target.thread_syscall(tid))
            .flatten()
            .map(|(nr, args)| {
                let futex_wait = match nr {
                    sysno::FUTEX => profiler_ebpf::futex_op::waits(args[1]),
                    sysno::FUTEX_WAITV | sysno::FUTEX_WAIT => true,
                    _ => false,
                };
                // As the kernel program reads it at entry: the caller's timespec, which stays
                // as it was while the caller waits.
                let timeout_ns = (nr == sysno::FUTEX && futex_wait)
                    .then(|| {
                        let mem = mem.as_ref()?;
                        let (sec, nsec) = (
                            mem.u64(args[3]).ok()?,
                            mem.u64(args[3].wrapping_add(8)).ok()?,
                        );
                        Some(sec.wrapping_mul(1_000_000_000).wrapping_add(nsec))
                    })
                    .flatten()
                    .unwrap_or(u64::MAX);
                let mut flags = 0;
                if futex_wait {
                    flags |= syscall_flags::FUTEX_WAIT;
                }
                if idle_carrier {
                    flags |= syscall_flags::IDLE;
                }
                SyscallStart {
                    start_ns: 0,
                    nr,
                    flags,
                    args,
                    timeout_ns,
                    waker: Default::default(),
                }
            });
        if off_cpu.is_some() || syscall.is_some() {
            waits.push(WaitAtStart {
                tid,
                runs,
                off_cpu,
                syscall,
            });
        }
    }
    waits
}

/// Reads the JVM's internals and, through the attach protocol, its scheduler settings. A JVM
/// pinprof cannot read is still profiled, only without its Java view: what failed becomes a
/// warning in the recording.
fn open_jvm(
    options: &Options,
    info: &mut crate::events::TargetInfo,
    warnings: &mut Vec<String>,
    stop: &AtomicBool,
) -> Option<Hotspot> {
    let hotspot = match &info.runtime {
        Some(r) if r.kind == "hotspot" => match Hotspot::attach(options.pid, r.major()) {
            Ok(h) => {
                if let Some(e) = &h.walk_error {
                    warnings.push(format!("cannot walk this JVM's Java stacks: {e}"));
                }
                warnings.extend(h.limits.clone());
                Some(h)
            }
            Err(e) => {
                warnings.push(format!(
                    "cannot read the JVM's internals ({e:#}): no carriers, mounted virtual \
                     threads or pinning in this recording"
                ));
                None
            }
        },
        _ => None,
    };
    if let Some(h) = &hotspot
        && options.attach
        && let Some(runtime) = &mut info.runtime
    {
        match jvm::scheduler_settings(options.pid, h, stop) {
            Ok(settings) => {
                runtime.parallelism = settings.parallelism.or(runtime.parallelism);
                runtime.max_pool_size = settings.max_pool_size;
            }
            Err(e) => warnings.push(format!(
                "cannot ask the JVM for its scheduler settings ({e:#}); parallelism is the \
                 command line's or the CPU count"
            )),
        }
    }
    hotspot
}

struct Session {
    target: Target,
    /// The target's memory, opened once: bound to this process, never to a later one that
    /// reuses its pid.
    target_mem: Option<std::fs::File>,
    capture: Capture,
    writer: RecordingWriter,
    symbolizer: Symbolizer,
    known_threads: HashSet<u32>,
    known_stacks: HashSet<u32>,
    /// The class last said for each monitor, and when it was read (re-read after a while: a
    /// deflated monitor may serve another object).
    /// Per monitor: when it was named, its object's class and, for a `java.lang.Class`
    /// object, the class that stands for.
    monitor_classes: HashMap<u64, (Instant, String, Option<String>)>,
    /// The class initializations carriers wait for.
    init_waits: crate::jvm::initwait::InitWaits,
    /// Stacks made in user space (Java walks, DWARF unwinds) written so far, by their frames;
    /// their ids start at `OWN_STACK_IDS`.
    own_stacks: HashMap<Vec<Frame>, u32>,
    /// System calls shorter than this are not events (u64::MAX: not traced).
    min_syscall_ns: u64,
    native: NativeUnwinder,
    /// The target's executable mappings and sealed copies of their files.
    mappings: Mappings,
    fds: fdname::FdNamer,
    /// DWARF-unwound native stacks waiting for their event: (thread, key time) -> stack id.
    native_stacks: HashMap<(u32, u64), u32>,
    /// Stack ids of the native stacks unwound so far, by their addresses.
    unwound: HashMap<Vec<u64>, u32>,
    /// Kernel symbols of the contended kernel locks named so far (static locks have one).
    lock_symbols: HashMap<u64, Option<String>>,
    fp_check: Option<FramePointerCheck>,
    events: u64,
    jvm: Option<JvmWatch>,
    /// Follows the JVM's thread list (None: no JVM, or it could not be followed).
    watch: Option<ThreadWatch>,
    /// Whether the watch failed to register threads already (said once).
    registration_failed: bool,
    /// When the target exited, if the kernel said so: the end of the window.
    exit_ns: Option<u64>,
}

/// A system call still under way as capture stops.
struct UnfinishedCall {
    tid: u32,
    nr: u32,
    args: [u64; 4],
    start_ns: u64,
    /// A futex wait's timeout (None inside: none, or not known); None: not a futex wait.
    futex_timeout_ns: Option<Option<u64>>,
}

/// Stacks made in user space (Java walks, DWARF unwinds) get ids of their own, above any id
/// of the kernel's stack map.
const OWN_STACK_IDS: u32 = 1 << 31;

/// Unwound native stacks kept for events still to come; more means they were never claimed.
const MAX_PENDING_NATIVE: usize = 4096;

/// A Java thread as the kernel programs are told of it: a carrier, one of the JDK's own
/// service threads (by its class), or another.
fn known_thread(t: &JavaThread) -> capture::KnownThread {
    let role = if t.carrier {
        capture::ThreadRole::Carrier
    } else if t
        .class
        .as_deref()
        .is_some_and(crate::analysis::jdk::is_jdk_service_class)
    {
        capture::ThreadRole::Service
    } else {
        capture::ThreadRole::Other
    };
    capture::KnownThread {
        tid: t.tid,
        addr: t.addr,
        role,
    }
}

/// Follows the JVM's thread list, so the kernel knows every Java thread's `JavaThread`.
struct JvmWatch {
    hotspot: Hotspot,
    /// As the thread watch read them last.
    threads: Vec<JavaThread>,
}

impl Session {
    fn run(&mut self, options: &Options, stop: Stops) -> Result<StopReason> {
        for thread in self.target.threads() {
            self.known_threads.insert(thread.tid);
            self.writer.write_event(&Event::Thread(thread))?;
        }
        self.write_java_threads(capture::monotonic_ns())?;
        let started = Instant::now();
        let mut last_checkpoint = Instant::now();
        let mut raws = Vec::new();
        let progress = Progress::new(options.progress);
        let mut wait = DRAIN_PERIOD;
        let reason = loop {
            if stop.quit.load(Ordering::Relaxed) {
                break StopReason::Quit;
            }
            if stop.signal.load(Ordering::Relaxed) {
                break StopReason::Interrupted;
            }
            if options.duration.is_some_and(|d| started.elapsed() >= d) {
                break StopReason::Duration;
            }
            raws.clear();
            let drained = self.capture.poll(wait, &mut raws)?;
            // A busy target fills the ring buffer faster: come back sooner, before it is full.
            wait = if drained > self.capture.ring_buffer_bytes / 8 {
                Duration::from_millis(5)
            } else {
                DRAIN_PERIOD
            };
            self.refresh_java_threads()?;
            if self.handle(&raws)? {
                break StopReason::TargetExited;
            }
            self.name_class_init_waits()?;
            if last_checkpoint.elapsed() >= CHECKPOINT {
                last_checkpoint = Instant::now();
                self.checkpoint()?;
                if !self.target.is_alive() {
                    break StopReason::TargetExited;
                }
                progress.show(
                    self.window(capture::monotonic_ns()),
                    self.events,
                    self.writer.bytes(),
                    self.capture.counters().lost(),
                );
            }
        };
        if let Some(watch) = &mut self.watch {
            watch.stop();
        }
        self.refresh_java_threads()?;
        // A last look at the threads, then the programs are detached and the recording ends:
        // the ring buffer holds all they made, and the maps the waits still open, which end
        // with it (walking their stacks takes time that is not theirs).
        self.checkpoint()?;
        let end_ns = self.capture.stop(self.exit_ns);
        raws.clear();
        self.capture.poll(Duration::ZERO, &mut raws)?;
        self.handle(&raws)?;
        self.close_open_intervals(end_ns)?;
        self.close_open_syscalls(end_ns)?;
        // The counts as the capture stopped, so the file says what the closing line says.
        self.writer.write_event(&Event::Counters {
            time_ns: end_ns,
            counters: self.capture.counters(),
        })?;

        progress.finish(
            self.window(end_ns),
            self.events,
            self.writer.bytes(),
            self.capture.counters().lost(),
        );
        Ok(reason)
    }

    /// Reads the JVM library's symbols now: the first stacks through it otherwise take that
    /// time (a large symbol table) while events wait, new threads among them, whose waits
    /// would go unknown as Java threads' until the JVM's list is read again.
    fn warm_up(&mut self) {
        if self.jvm.is_none() {
            return;
        }
        let libjvm = self
            .mappings
            .iter()
            .find(|m| m.path.ends_with("/libjvm.so"))
            .map(|m| m.start);
        if let Some(addr) = libjvm {
            let _ = self.symbolizer.user(&mut self.mappings, &[addr]);
        }
    }

    /// The recording's window up to `now_ns`: what the progress line and the summary give.
    fn window(&self, now_ns: u64) -> Duration {
        Duration::from_nanos(now_ns.saturating_sub(self.capture.started_ns()))
    }

    /// Takes what the thread watch read of the JVM's thread list since last time (it has
    /// told the kernel already), and writes it.
    fn refresh_java_threads(&mut self) -> Result<()> {
        let Some(watch) = &self.watch else {
            return Ok(());
        };
        for update in watch.updates() {
            if let Some(why) = update.failed
                && !self.registration_failed
            {
                self.registration_failed = true;
                self.writer.write_event(&Event::Warning(format!(
                    "some Java threads could not be made known to the kernel programs ({why}): \
                     their waits count as blocked"
                )))?;
            }
            if let Some(jvm) = &mut self.jvm {
                jvm.threads = update.threads;
                self.write_java_threads(update.time_ns)?;
            }
        }
        Ok(())
    }

    /// Writes the Java threads last read (their full names, which are carriers).
    fn write_java_threads(&mut self, time_ns: u64) -> Result<()> {
        let Some(jvm) = self.jvm.as_ref().filter(|j| !j.threads.is_empty()) else {
            return Ok(());
        };
        let threads = jvm
            .threads
            .iter()
            .map(|t| JavaThreadInfo {
                tid: t.tid,
                name: t.name.clone(),
                carrier: t.carrier,
            })
            .collect();
        self.writer
            .write_event(&Event::JavaThreads { time_ns, threads })?;
        let classes: Vec<(u32, String)> = jvm
            .threads
            .iter()
            .filter_map(|t| Some((t.tid, t.class.clone()?)))
            .collect();
        if classes.is_empty() {
            return Ok(());
        }
        self.writer.write_event(&Event::JavaThreadClasses {
            time_ns,
            threads: classes,
        })
    }

    fn java_block(&self, raw: &profiler_ebpf::JavaState) -> Option<JavaBlock> {
        use profiler_ebpf::java_flags;
        let jvm = self.jvm.as_ref()?;
        if raw.flags & java_flags::KNOWN == 0 {
            return None;
        }
        let nonzero = |v: u64| (v != 0).then_some(v);
        Some(JavaBlock {
            state: thread_state(&jvm.hotspot.states, raw.thread_state),
            vthread: (raw.flags & java_flags::MOUNTED != 0).then_some(raw.vthread_id),
            pending_monitor: nonzero(raw.pending_monitor),
            waiting_monitor: nonzero(raw.waiting_monitor),
            held_monitors: raw.held_monitors,
            pin_count: raw.pin_count,
            at_safepoint: raw.flags & java_flags::SAFEPOINT != 0,
            anchor: [raw.anchor_sp, raw.anchor_pc, raw.anchor_fp],
        })
    }

    /// Says which class of object `monitor` belongs to, when not said recently.
    fn name_monitor(&mut self, monitor: u64, time_ns: u64) -> Result<()> {
        const FRESH: Duration = Duration::from_secs(1);
        if self
            .monitor_classes
            .get(&monitor)
            .is_some_and(|(read, _, _)| read.elapsed() < FRESH)
        {
            return Ok(());
        }
        let Some(jvm) = &mut self.jvm else {
            return Ok(());
        };
        let Some(class) = jvm.hotspot.monitor_class(monitor) else {
            return Ok(());
        };
        let class_object = (class == "java.lang.Class")
            .then(|| jvm.hotspot.monitor_class_object(monitor))
            .flatten();
        // One entry per monitor seen; a program that inflates monitors without end would
        // grow it for ever, so it is forgotten now and then (and re-read).
        if self.monitor_classes.len() >= 100_000 {
            self.monitor_classes.clear();
        }
        let said = self.monitor_classes.insert(
            monitor,
            (Instant::now(), class.clone(), class_object.clone()),
        );
        let changed =
            said.is_none_or(|(_, before, object)| before != class || object != class_object);
        if changed {
            self.writer.write_event(&Event::MonitorClass {
                time_ns,
                monitor,
                class,
            })?;
            if let Some(class) = class_object {
                self.writer.write_event(&Event::MonitorClassObject {
                    time_ns,
                    monitor,
                    class,
                })?;
            }
        }
        Ok(())
    }

    /// Records raw kernel records; true once the target has exited.
    fn handle(&mut self, raws: &[Raw]) -> Result<bool> {
        let mut exited = false;
        // Births first: the JVM lists a new Java thread before it starts it, and what follows
        // (naming and walking stacks) can take a while, during which the new thread blocks.
        if let Some(watch) = &self.watch {
            for raw in raws {
                if let Raw::ThreadStart(life) = raw {
                    watch.born(life.tid);
                }
            }
        }
        for raw in raws {
            // (Cheap: the watch has read the list; this writes what it read, in order.)
            self.refresh_java_threads()?;
            match raw {
                Raw::OffCpu(e) => {
                    let event = OffCpu {
                        tid: e.tid,
                        start_ns: e.start_ns,
                        end_ns: e.end_ns,
                        state: OffCpuState::from_prev_state(e.prev_state),
                        kernel_stack: self.stack(e.kernel_stack_id, true)?,
                        user_stack: self.stack(e.user_stack_id, false)?,
                        waker_tid: (e.waker_tid != 0).then_some(e.waker_tid),
                        cpu: e.cpu,
                        java: self.java_block(&e.java),
                    };
                    if let Some(java) = &event.java {
                        for monitor in [java.pending_monitor, java.waiting_monitor]
                            .into_iter()
                            .flatten()
                        {
                            self.name_monitor(monitor, e.start_ns)?;
                        }
                    }
                    self.thread(e.tid)?;
                    self.writer.write_event(&Event::OffCpu(event))?;
                    self.events += 1;
                }
                Raw::StackCopy(copy) => self.java_stack(copy, None)?,
                Raw::StackChunkCopy(copy) => self.java_stack(&copy.stack, Some(&copy.chunk))?,
                Raw::Syscall(e) => self.syscall(e)?,
                Raw::NativeStack(copy) => self.native_stack(copy)?,
                Raw::Rename(r) => {
                    let end = r.comm.iter().position(|&b| b == 0).unwrap_or(r.comm.len());
                    let name = String::from_utf8_lossy(&r.comm[..end]).into_owned();
                    self.known_threads.insert(r.tid);
                    self.writer
                        .write_event(&Event::Thread(ThreadName { tid: r.tid, name }))?;
                }
                Raw::ThreadStart(life) => {
                    self.writer.write_event(&Event::ThreadStart {
                        tid: life.tid,
                        time_ns: life.time_ns,
                    })?;
                }
                Raw::ThreadExit(life) => {
                    let known = life.run_ns != u64::MAX && life.wait_ns != u64::MAX;
                    self.writer.write_event(&Event::ThreadExit {
                        tid: life.tid,
                        time_ns: life.time_ns,
                        account: known.then_some(ThreadCpu {
                            tid: life.tid,
                            run_ns: life.run_ns,
                            wait_ns: life.wait_ns,
                        }),
                    })?;
                }
                Raw::Exit(e) => {
                    self.writer
                        .write_event(&Event::TargetExit { time_ns: e.time_ns })?;
                    self.exit_ns = Some(e.time_ns);
                    exited = true;
                }
            }
        }
        Ok(exited)
    }

    /// Records a long system call or futex wait, naming its call, its file and its stacks.
    fn syscall(&mut self, e: &profiler_ebpf::SyscallEvent) -> Result<()> {
        let name = syscall_name(e.nr);
        let fd = fdname::takes_fd(&name)
            .then(|| self.fds.name_at(e.args[0], e.fd_inode, e.fd_mode))
            .flatten();
        let futex = if e.kind == profiler_ebpf::kind::FUTEX_WAIT {
            let waker = if e.waker.tid != 0 {
                // The DWARF-unwound stack when there is one: it sees through libc.
                let unwound = self.native_stacks.remove(&(e.waker.tid, e.waker.wake_ns));
                Some(FutexWaker {
                    tid: e.waker.tid,
                    wake_ns: e.waker.wake_ns,
                    user_stack: match unwound {
                        Some(id) => Some(id),
                        None => self.stack(e.waker.user_stack_id, false)?,
                    },
                    kernel_stack: self.stack(e.waker.kernel_stack_id, true)?,
                })
            } else {
                None
            };
            if let Some(w) = &waker {
                self.thread(w.tid)?;
            }
            Some(FutexWait {
                uaddr: e.args[0],
                op: e.args[1],
                timeout_ns: (e.timeout_ns != u64::MAX).then_some(e.timeout_ns),
                waker,
            })
        } else {
            None
        };
        let event = Syscall {
            tid: e.tid,
            nr: e.nr,
            name,
            args: e.args,
            start_ns: e.start_ns,
            end_ns: e.end_ns,
            ret: e.ret,
            user_stack: match self.native_stacks.remove(&(e.tid, e.start_ns)) {
                Some(id) => Some(id),
                None => self.stack(e.user_stack_id, false)?,
            },
            fd,
            futex,
            unfinished: false,
        };
        self.write_syscall(event)
    }

    /// Writes a system call event, naming its thread the first time.
    fn write_syscall(&mut self, event: Syscall) -> Result<()> {
        self.thread(event.tid)?;
        self.writer.write_event(&Event::Syscall(event))?;
        self.events += 1;
        Ok(())
    }

    /// The id of a stack made in user space, writing it the first time.
    fn own_stack(&mut self, frames: Vec<Frame>) -> Result<u32> {
        if let Some(&id) = self.own_stacks.get(&frames) {
            return Ok(id);
        }
        let id = OWN_STACK_IDS + self.own_stacks.len() as u32;
        self.own_stacks.insert(frames.clone(), id);
        self.writer
            .write_event(&Event::Stack(Stack { id, frames }))?;
        Ok(id)
    }

    /// Unwinds a native stack the kernel copied and keeps it for its event.
    fn native_stack(&mut self, copy: &profiler_ebpf::NativeStackCopy) -> Result<()> {
        let len = (copy.len as usize).min(copy.data.len());
        let addrs = self.native.unwind(
            &mut self.mappings,
            copy.ip,
            copy.sp,
            copy.bp,
            &copy.data[..len],
        );
        if addrs.is_empty() {
            return Ok(());
        }
        // The same addresses name the same frames: symbolize each stack once.
        let id = match self.unwound.get(&addrs) {
            Some(&id) => id,
            None => {
                let frames = self.symbolizer.user(&mut self.mappings, &addrs);
                let id = self.own_stack(frames)?;
                self.unwound.insert(addrs, id);
                id
            }
        };
        if self.native_stacks.len() >= MAX_PENDING_NATIVE {
            // Unclaimed for a minute: their events were lost or never came.
            let horizon = copy.key_ns.saturating_sub(60_000_000_000);
            self.native_stacks.retain(|(_, key), _| *key >= horizon);
        }
        self.native_stacks.insert((copy.tid, copy.key_ns), id);
        Ok(())
    }

    /// Walks a Java stack the kernel copied (with its virtual thread's frozen frames, when it
    /// copied those too) and records its frames for the interval.
    fn java_stack(
        &mut self,
        copy: &profiler_ebpf::StackCopy,
        chunk: Option<&profiler_ebpf::ChunkCopy>,
    ) -> Result<()> {
        let Some(jvm) = &mut self.jvm else {
            return Ok(());
        };
        let head = &copy.head;
        let len = (head.len as usize).min(copy.data.len());
        if len == 0 {
            // The kernel could not read the stack (counted there as a miss).
            return Ok(());
        }
        let anchor = [head.anchor_sp, head.anchor_pc, head.anchor_fp];
        let frozen = (head.chunk != 0).then_some(Frozen {
            vthread: head.vthread,
            vthread_id: head.vthread_id,
            chunk: head.chunk,
            sp: head.chunk_sp,
        });
        let walked = jvm
            .hotspot
            .walk(head.anchor_sp, &copy.data[..len], anchor, frozen, chunk);
        if let Some(check) = &mut self.fp_check {
            // Unwinding: both walks must find the same compiled frames (by return address).
            // Naming: where the perf map knows a frame, it must give the same method.
            let ours: Vec<(u64, String)> = walked
                .iter()
                .filter(|f| matches!(f.tier, Tier::Compiled | Tier::Native))
                .map(|f| (f.pc, f.name.clone()))
                .collect();
            let chain = jvm
                .hotspot
                .frame_pointer_chain(head.anchor_sp, &copy.data[..len], anchor);
            let theirs: Vec<u64> = chain
                .into_iter()
                .filter(|&pc| jvm.hotspot.in_compiled_method(pc))
                .collect();
            let mut named = 0;
            let mut same = ours.len() == theirs.len();
            for (i, ((pc, name), their_pc)) in ours.iter().zip(&theirs).enumerate() {
                // Return addresses point after their call: look up the byte before.
                let lookup = if i == 0 { *their_pc } else { their_pc - 1 };
                let their_name = self.symbolizer.perf_map_method(lookup);
                named += usize::from(their_name.is_some());
                same &= pc == their_pc && their_name.as_ref().is_none_or(|n| n == name);
            }
            if named > 0 {
                check.compared += 1;
                if same {
                    check.agreed += 1;
                } else if check.first_difference.is_none() {
                    let names = |pcs: &[u64]| pcs.iter().map(|p| format!("{p:#x}")).collect();
                    let ours_named = ours.iter().map(|(p, n)| format!("{p:#x} {n}")).collect();
                    check.first_difference = Some((ours_named, names(&theirs)));
                }
            }
        }
        let frames: Vec<Frame> = walked
            .into_iter()
            .map(|f| Frame {
                kind: FrameKind::Java,
                addr: f.pc,
                name: Some(f.name),
                module: Some(f.tier.as_str().to_string()),
                holds_monitor: f.holds_monitor,
                line: f.line,
            })
            .collect();
        if frames.is_empty() {
            return Ok(());
        }
        let id = self.own_stack(frames)?;
        self.writer.write_event(&Event::JavaStack {
            tid: copy.head.tid,
            start_ns: copy.head.start_ns,
            stack: id,
        })
    }

    /// System calls still in progress when capture stops (a deadlock's waits among them, and
    /// calls under way since before attach) are recorded as unfinished, up to the window's
    /// end, `now`.
    fn close_open_syscalls(&mut self, now: u64) -> Result<()> {
        for (tid, call) in self.capture.open_syscalls() {
            if call.flags & profiler_ebpf::syscall_flags::IDLE != 0
                || now.saturating_sub(call.start_ns) < self.min_syscall_ns
            {
                continue;
            }
            let futex_wait = call.flags & profiler_ebpf::syscall_flags::FUTEX_WAIT != 0;
            let timeout_ns = (call.timeout_ns != u64::MAX).then_some(call.timeout_ns);
            let call = UnfinishedCall {
                tid,
                nr: call.nr,
                args: call.args,
                start_ns: call.start_ns,
                futex_timeout_ns: futex_wait.then_some(timeout_ns),
            };
            self.write_unfinished_call(call, now)?;
        }
        Ok(())
    }

    /// Writes a system call still under way at `end_ns`, named with its file.
    fn write_unfinished_call(&mut self, call: UnfinishedCall, end_ns: u64) -> Result<()> {
        let name = syscall_name(call.nr);
        let fd = fdname::takes_fd(&name)
            .then(|| self.fds.name(call.args[0]))
            .flatten();
        let futex = call.futex_timeout_ns.map(|timeout_ns| FutexWait {
            uaddr: call.args[0],
            op: call.args[1],
            timeout_ns,
            waker: None,
        });
        let event = Syscall {
            tid: call.tid,
            nr: call.nr,
            name,
            args: call.args,
            start_ns: call.start_ns,
            end_ns,
            ret: 0,
            user_stack: None,
            fd,
            futex,
            unfinished: true,
        };
        self.write_syscall(event)
    }

    /// Intervals still open when capture stops (those since before attach among them) end
    /// at the window's end, `now`.
    fn close_open_intervals(&mut self, now: u64) -> Result<()> {
        let open = self.capture.open_intervals();
        // Java stacks of the threads still blocked, read now; kept below only for threads
        // still in the same wait once all are read (one more look at the map, not one each).
        let stacks: Vec<_> = open
            .iter()
            .filter_map(|(tid, start)| {
                let mut copy = self.open_java_stack(start)?;
                copy.head.tid = *tid;
                Some(((*tid, start.start_ns), copy))
            })
            .collect();
        let still_open: HashSet<(u32, u64)> = self
            .capture
            .open_intervals()
            .iter()
            .map(|(tid, s)| (*tid, s.start_ns))
            .collect();
        for (tid, start) in open {
            let event = OffCpu {
                tid,
                start_ns: start.start_ns,
                end_ns: now,
                state: OffCpuState::from_prev_state(start.prev_state),
                kernel_stack: self.stack(start.kernel_stack_id, true)?,
                user_stack: self.stack(start.user_stack_id, false)?,
                waker_tid: None,
                cpu: 0,
                java: self.java_block(&start.java),
            };
            self.thread(tid)?;
            self.writer.write_event(&Event::OffCpu(event))?;
            self.events += 1;
        }
        for (key, copy) in stacks {
            if still_open.contains(&key) {
                self.java_stack(&copy, None)?;
            }
        }
        Ok(())
    }

    /// Names the class initializations that mounted virtual threads wait for now, while the
    /// waits last (the class's init lock is gone once it is initialized): a look-up per
    /// carrier, and a walk of the loaded classes only when one waits on an init lock.
    fn name_class_init_waits(&mut self) -> Result<()> {
        use profiler_ebpf::java_flags::{KNOWN, MOUNTED};
        let Some(jvm) = &self.jvm else {
            return Ok(());
        };
        let mut waits: Vec<(u64, u64)> = Vec::new();
        for t in jvm.threads.iter().filter(|t| t.carrier) {
            let Some(start) = self.capture.open_interval(t.tid) else {
                continue;
            };
            // A carrier that blocked before the kernel knew it for a Java thread (one just
            // started) has its JVM state read now: it has not moved since.
            let java = match start.java.flags & KNOWN {
                0 => match jvm.hotspot.java_state(t) {
                    Some(state) => state,
                    None => continue,
                },
                _ => start.java,
            };
            if java.flags & MOUNTED == 0 {
                continue;
            }
            for monitor in [java.waiting_monitor, java.pending_monitor] {
                if monitor != 0 {
                    waits.push((monitor, start.start_ns));
                }
            }
        }
        if waits.is_empty() {
            return Ok(());
        }
        for &(monitor, start_ns) in &waits {
            self.name_monitor(monitor, start_ns)?;
        }
        let Some(jvm) = &mut self.jvm else {
            return Ok(());
        };
        let now_ns = capture::monotonic_ns();
        let events = self
            .init_waits
            .name(&mut jvm.hotspot, &jvm.threads, &waits, now_ns);
        for event in events {
            self.writer.write_event(&event)?;
        }
        Ok(())
    }

    /// Says which carriers are in a wait that has not ended yet, so that a live view sees
    /// starvation while it lasts (a long pinning is otherwise known only when it ends).
    fn open_carrier_waits(&mut self) -> Result<()> {
        let Some(jvm) = &self.jvm else {
            return Ok(());
        };
        // A look-up per carrier, not a walk of every thread's entry.
        let carriers: Vec<u32> = jvm
            .threads
            .iter()
            .filter(|t| t.carrier)
            .map(|t| t.tid)
            .collect();
        if carriers.is_empty() {
            return Ok(());
        }
        let waits = carriers
            .into_iter()
            .filter_map(|tid| Some((tid, self.capture.open_interval(tid)?)))
            .map(|(tid, start)| OpenWait {
                tid,
                start_ns: start.start_ns,
                state: OffCpuState::from_prev_state(start.prev_state),
                java: self.java_block(&start.java),
            })
            .collect();
        self.writer.write_event(&Event::OpenWaits {
            time_ns: capture::monotonic_ns(),
            waits,
        })
    }

    /// A copy of the stack of a Java thread still blocked as capture stops: it never left its
    /// system call, so the kernel made none. Its stack does not move while it stays blocked;
    /// the caller keeps the copy only if it still was afterwards.
    fn open_java_stack(
        &self,
        start: &profiler_ebpf::OffCpuStart,
    ) -> Option<Box<profiler_ebpf::StackCopy>> {
        let java = &start.java;
        let carrier_idle = java.flags & profiler_ebpf::java_flags::CARRIER != 0
            && java.flags & profiler_ebpf::java_flags::MOUNTED == 0;
        if java.anchor_sp == 0 || carrier_idle || self.jvm.is_none() {
            return None;
        }
        let data = read_stack(self.target_mem.as_ref()?, java.anchor_sp)?;
        let mut copy = Box::new(profiler_ebpf::StackCopy {
            head: profiler_ebpf::StackHead {
                kind: profiler_ebpf::kind::STACK_COPY,
                tid: 0,
                start_ns: start.start_ns,
                anchor_sp: java.anchor_sp,
                anchor_pc: java.anchor_pc,
                anchor_fp: java.anchor_fp,
                // Read now, like the stack: the frozen frames of a thread still blocked.
                vthread: 0,
                vthread_id: 0,
                chunk: 0,
                chunk_sp: 0,
                len: data.len() as u32,
            },
            data: [0; profiler_ebpf::STACK_COPY_BYTES],
        });
        copy.data[..data.len()].copy_from_slice(&data);
        Some(copy)
    }

    /// Names a stack the first time its id is seen, and writes it before any event uses it.
    fn stack(&mut self, id: i32, kernel: bool) -> Result<Option<u32>> {
        let Ok(id) = u32::try_from(id) else {
            return Ok(None);
        };
        if self.known_stacks.insert(id) {
            let addrs = self.capture.stack(id).unwrap_or_default();
            let frames = if kernel {
                self.symbolizer.kernel(&addrs)
            } else {
                self.symbolizer.user(&mut self.mappings, &addrs)
            };
            self.writer
                .write_event(&Event::Stack(Stack { id, frames }))?;
        }
        Ok(Some(id))
    }

    fn thread(&mut self, tid: u32) -> Result<()> {
        if self.known_threads.insert(tid) {
            let name = self
                .target
                .thread_name(tid)
                .unwrap_or_else(|| format!("tid-{tid}"));
            self.writer
                .write_event(&Event::Thread(ThreadName { tid, name }))?;
        }
        Ok(())
    }

    fn cpu_snapshot(&mut self) -> Result<()> {
        let time_ns = capture::monotonic_ns();
        let accounts = self.target.cpu_accounts();
        self.write_accounts(time_ns, accounts)
    }

    /// Writes the threads' scheduler accounts read at `time_ns`.
    fn write_accounts(&mut self, time_ns: u64, accounts: Vec<ThreadCpu>) -> Result<()> {
        if accounts.is_empty() {
            return Ok(()); // the target is gone
        }
        self.writer.write_event(&Event::ThreadCpu {
            time_ns,
            threads: accounts,
        })
    }

    fn checkpoint(&mut self) -> Result<()> {
        self.cpu_snapshot()?;
        self.open_carrier_waits()?;
        let sums: Vec<SyscallSum> = self
            .capture
            .syscall_sums()
            .into_iter()
            .map(|(k, s)| SyscallSum {
                tid: k.tid,
                nr: k.nr,
                name: syscall_name(k.nr),
                count: s.count,
                total_ns: s.total_ns,
                max_ns: s.max_ns,
            })
            .collect();
        if !sums.is_empty() {
            let time_ns = capture::monotonic_ns();
            self.writer
                .write_event(&Event::SyscallSums { time_ns, sums })?;
        }
        let locks = self.capture.kernel_locks();
        if !locks.is_empty() {
            // Each checkpoint lists every lock again: name only the ones not seen before.
            let new: Vec<u64> = locks
                .iter()
                .map(|(a, _)| *a)
                .filter(|a| !self.lock_symbols.contains_key(a))
                .collect();
            if !new.is_empty() {
                let names = self.symbolizer.kernel(&new);
                for (addr, frame) in new.into_iter().zip(names) {
                    self.lock_symbols.insert(addr, frame.name);
                }
            }
            let locks = locks
                .into_iter()
                .map(|(addr, s)| KernelLock {
                    addr,
                    symbol: self.lock_symbols.get(&addr).cloned().flatten(),
                    count: s.count,
                    total_ns: s.total_ns,
                    max_ns: s.max_ns,
                })
                .collect();
            let threads = self
                .capture
                .kernel_lock_threads()
                .into_iter()
                .map(|(tid, s)| (tid, s.count, s.total_ns))
                .collect();
            let time_ns = capture::monotonic_ns();
            self.writer.write_event(&Event::KernelLocks {
                time_ns,
                locks,
                threads,
            })?;
        }
        if let Some(check) = &self.fp_check {
            self.writer
                .write_event(&Event::FramePointerCheck(check.clone()))?;
        }
        let time_ns = capture::monotonic_ns();
        let counters = self.capture.counters();
        self.writer
            .write_event(&Event::Counters { time_ns, counters })?;
        let threads = self.capture.short_off_cpu();
        if !threads.is_empty() {
            self.writer
                .write_event(&Event::ShortOffCpu { time_ns, threads })?;
        }
        self.writer.flush()
    }
}

struct Progress {
    enabled: bool,
    tty: bool,
}

impl Progress {
    fn new(enabled: bool) -> Self {
        Self {
            enabled,
            tty: std::io::stderr().is_terminal(),
        }
    }

    /// `window`: the recording's time so far, as the summary at the end counts it.
    fn show(&self, window: Duration, events: u64, bytes: u64, lost: u64) {
        if !self.enabled {
            return;
        }
        let line = format!(
            "recording: {:5.1}s, {events} events, {:.1} MiB, {lost} lost",
            window.as_secs_f64(),
            bytes as f64 / f64::from(1 << 20)
        );
        if self.tty {
            let _ = std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("\r{line}   "));
        } else if window.as_secs().is_multiple_of(5) {
            say!("{line}");
        }
    }

    fn finish(&self, window: Duration, events: u64, bytes: u64, lost: u64) {
        if self.enabled && self.tty {
            self.show(window, events, bytes, lost);
            say!();
        }
    }
}

/// Up to `STACK_COPY_BYTES` of the target's stack from `sp` (less where the stack ends).
fn read_stack(mem: &std::fs::File, sp: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    let mut data = vec![0u8; profiler_ebpf::STACK_COPY_BYTES];
    let mut len = data.len();
    while len >= 512 {
        if mem.read_exact_at(&mut data[..len], sp).is_ok() {
            data.truncate(len);
            return Some(data);
        }
        len /= 2;
    }
    None
}

/// The name of an x86_64 system call number.
fn syscall_name(nr: u32) -> String {
    syscalls::Sysno::new(nr as usize)
        .map(|s| s.name().to_string())
        .unwrap_or_else(|| format!("syscall_{nr}"))
}

fn thread_state(states: &ThreadStates, raw: u32) -> JavaThreadState {
    match raw {
        s if s == states.in_native => JavaThreadState::InNative,
        s if s == states.in_vm => JavaThreadState::InVm,
        s if s == states.in_java => JavaThreadState::InJava,
        s if s == states.blocked => JavaThreadState::Blocked,
        s => JavaThreadState::Other(s),
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
