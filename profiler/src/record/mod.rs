//! `pinprof record`: capture a live process into a recording until the duration ends, the user
//! interrupts, or the target exits. Whatever stops it, the file is left readable and every
//! program is detached (dropping `Capture` does that).
//!
//! Here: the options, the summary, the start and the drain loop with its stops. Beside it,
//! one concern a file: `seed` (what is read before the programs attach), `jvm_watch` (the
//! JVM while it runs), `translate` (kernel records into events), `stacks`, `checkpoint`
//! (the once-a-second snapshots), `cgroup_watch` (the cgroup's CPU throttling), `progress` (the line on stderr), `queue_watch` (the work
//! waiting for a carrier), `thread_watch` (the JVM's thread list followed from a thread of
//! its own).

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result};

mod cgroup_watch;
mod checkpoint;
mod jvm_watch;
mod progress;
mod queue_watch;
mod seed;
mod stack_ids;
mod stacks;
mod thread_watch;
mod translate;
mod vthread_waits;

use jvm_watch::{JvmWatch, known_thread};
use progress::Progress;
use seed::{open_jvm, waits_at_start};
use stacks::Stacks;
use thread_watch::ThreadWatch;

use crate::{
    budget::{self, Bounded, Budget, TALLY},
    capture::{self, Capture},
    events::{Cuts, Event, FramePointerCheck},
    fdname, jvm,
    mappings::MapsWatch,
    recording::{End, Header, RecordingWriter, StopReason},
    safe_fs::{self, Existing},
    symbolize::Symbolizer,
    target::Target,
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
    /// System calls and futex waits at least this long are events (None: not seen).
    pub min_syscall: Option<Duration>,
    /// Trace every system call from entry to exit, with its result, at a cost to every
    /// process of the host (see `capture::Options::trace_syscalls`).
    pub trace_syscalls: bool,
    /// Also walk each copied Java stack by frame pointers, name it from the perf map, and
    /// count agreement (a JVM with -XX:+PreserveFramePointer and a perf map; for testing).
    pub fp_cross_check: bool,
    /// Java stacks are walked for blocks at least this long (zero: never).
    pub min_java_stack: Duration,
    /// Print the progress line on stderr.
    pub progress: bool,
    /// On-CPU samples a second of each CPU (None: not sampled).
    pub on_cpu_hz: Option<u32>,
    /// Wake-ups that wait at least this long for a CPU are events, with their waker.
    pub late_wakeup: Duration,
    /// Virtual threads' waits off their carriers at least this long are recorded (None:
    /// not traced; the probes cost the target a trap at each unmount and mount).
    pub vthread_waits: Option<Duration>,
    /// The most memory pinprof may hold, what the target makes it keep included.
    pub budget: Budget,
    /// The recording ends once its file reaches this size (None: no cap).
    pub max_size: Option<u64>,
}

#[derive(Debug)]
pub struct Summary {
    pub output: PathBuf,
    /// The recording as written, to be read back through this descriptor: its name may
    /// lead to another file by now (a CI workspace the code under test can write).
    pub file: std::fs::File,
    pub events: u64,
    pub lost: u64,
    /// What the lost events were lost to, said in words ("" when none were).
    pub lost_causes: String,
    pub reason: StopReason,
    pub seconds: f64,
    /// The memory budget recorded under, and what was cut to stay in it.
    pub budget: Budget,
    pub cuts: Cuts,
}

/// Threads named and gone since, the latest `RECENTLY_EXITED` of them: later events that
/// name them (a waker, a lock's holder) do not name them again, when their name can no
/// longer be read.
#[derive(Default)]
struct RecentlyExited {
    order: std::collections::VecDeque<u32>,
    set: HashSet<u32>,
}

const RECENTLY_EXITED: usize = 4096;

impl RecentlyExited {
    fn insert(&mut self, tid: u32) {
        if self.set.insert(tid) {
            if self.order.len() >= RECENTLY_EXITED
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
            self.order.push_back(tid);
        }
    }

    fn contains(&self, tid: &u32) -> bool {
        self.set.contains(tid)
    }

    /// An id used again is a new thread, to be named as one.
    fn remove(&mut self, tid: u32) {
        if self.set.remove(&tid) {
            self.order.retain(|&t| t != tid);
        }
    }
}

/// How often the ring buffer is drained when the target is not busy (the kernel programs do
/// not wake user space per record).
const DRAIN_PERIOD: Duration = Duration::from_millis(100);
/// How often blocked Java threads' stacks are looked for (without the system-call programs):
/// a wait longer than this gets its stack, a shorter one only if a pass falls within it.
const STACK_READ_PERIOD: Duration = Duration::from_millis(20);

/// The chores (naming waits, sampling queues) run at the end of a drain, but at most this
/// often: a busy target ends a drain hundreds of times a second, and each chore looks up
/// every thread's open wait in the kernel's maps, one system call each.
const CHORE_PERIOD: Duration = STACK_READ_PERIOD;

/// How often counters are snapshot into the file and the file is flushed.
const CHECKPOINT: Duration = Duration::from_secs(1);

/// How long the ending may take to drain what the kernel made last and walk the stacks of
/// the waits still open: past it, what is left is counted lost.
const CLOSING: Duration = Duration::from_secs(2);

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

/// Records on a thread of its own, the stream teed to the receiver returned (a live view, a
/// pusher), which holds at most the queues' share of the budget; a bug in the recorder ends
/// the recording with an error, not the process. Stopped by `stop` (a signal) or `quit` (the
/// user leaving the view).
pub fn spawn_teed(
    options: &Options,
    stop: &std::sync::Arc<AtomicBool>,
    quit: &std::sync::Arc<AtomicBool>,
) -> Result<(
    std::thread::JoinHandle<Result<Summary>>,
    crate::recording::TeeReceiver,
)> {
    let queues = options
        .budget
        .shares(None, options.ring_buffer_bytes.into())
        .queues;
    let (tx, rx) = crate::recording::tee(queues);
    let (options, stop, quit) = (
        options.clone(),
        std::sync::Arc::clone(stop),
        std::sync::Arc::clone(quit),
    );
    std::thread::Builder::new()
        .name("recorder".into())
        .spawn(move || {
            let stops = Stops {
                signal: &stop,
                quit: &quit,
            };
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_with(&options, stops, Some(tx))
            }))
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the recorder stopped on an internal error")))
        })
        .context("cannot start the recorder")
        .map(|recorder| (recorder, rx))
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
    tee: Option<crate::recording::TeeSender>,
) -> Result<Summary> {
    capture::check_privileges()?;
    // What is cut from here on is this recording's.
    let cuts_at_start = TALLY.snapshot();
    let target = Target::open(options.pid)?;
    let process = target.process().clone();
    let pid_ns = crate::namespaces::capture_namespace(&process)?;
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
        jvm::startup::wait_until_started(&process, jvm::startup::WAIT, stop.signal, || {
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
    let hotspot = open_jvm(options, &process, &mut info, &mut warnings, stop.signal);
    // Reading the JVM can take seconds (the attach protocol): a Ctrl-C meanwhile ends here.
    if stop.signal.load(Ordering::Relaxed) {
        anyhow::bail!("interrupted before the recording started");
    }
    // Said now, not first by the report: a user who gave the wrong pid learns it at once.
    let hotspot_runtime = info.runtime.as_ref().is_some_and(|r| r.kind == "hotspot");
    if !hotspot_runtime && tee.is_none() {
        say!(
            "pinprof: note: process {} is no HotSpot JVM: its threads' off-CPU time, stacks and \
             system calls are recorded; carriers, pinning and Java stacks need one",
            options.pid
        );
    }
    // The target's mapped files (copied once for naming and unwinding alike) and its perf
    // map, read before anything is attached; read again from now on by threads of their
    // own, never by the drain.
    let mut mappings = MapsWatch::start(&process)?;
    let mut symbolizer = Symbolizer::new(&target);
    if hotspot.is_some() {
        stacks::warm_up(&mut symbolizer, &mut mappings);
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
    // Java stacks of waits read from user space: not when the system-call programs copy them.
    let blocked_stacks_on =
        !(syscalls && options.trace_syscalls || options.min_java_stack.is_zero());
    let mut seed_stacks = Vec::new();
    let (mut cgroup, cgroup_warning) = cgroup_watch::CgroupWatch::find(&process);
    warnings.extend(cgroup_warning);
    // A reader of its own follows the JVM's thread list from the moment the programs attach
    // (opened first: that takes a while, and threads born meanwhile would go unknown).
    let list_reader = jvm.as_ref().map(|j| j.hotspot.reopen());
    let vthread_min_ns = options
        .vthread_waits
        .map_or(u64::MAX, |d| (d.as_nanos() as u64).max(1));
    let vthread_probes = match (options.vthread_waits, &jvm) {
        (None, _) => None,
        (Some(_), None) => {
            warnings.push(
                "--vthread-waits: the target is no HotSpot JVM pinprof could read: no \
                 virtual-thread waits"
                    .into(),
            );
            None
        }
        (Some(_), Some(j)) => match (&j.hotspot.continuations, &j.hotspot.continuations_error) {
            (Some(p), _) => Some(p.clone()),
            (None, e) => {
                warnings.push(format!(
                    "--vthread-waits: where this JVM unmounts virtual threads is not known \
                     ({}): no virtual-thread waits",
                    e.as_deref().unwrap_or("no reason")
                ));
                None
            }
        },
    };
    // Said as traced only where the probes are in (a JVM without them says why instead).
    let vthread_traced = vthread_probes.is_some().then_some(vthread_min_ns);
    let mut capture = Capture::start(
        &capture::Options {
            process: process.clone(),
            pid_ns,
            min_off_cpu_ns: options.min_off_cpu.as_nanos() as u64,
            ring_buffer_bytes: options.ring_buffer_bytes,
            jvm: jvm.as_ref().map(|j| j.hotspot.layout),
            java_state_in_java: jvm.as_ref().map(|j| j.hotspot.states.in_java),
            min_java_stack_ns: options.min_java_stack.as_nanos() as u64,
            min_syscall_ns: options.min_syscall.map(|d| (d.as_nanos() as u64).max(1)),
            trace_syscalls: options.trace_syscalls,
            java_threads,
            on_cpu_hz: options.on_cpu_hz.map(u64::from),
            late_wakeup_ns: options.late_wakeup.as_nanos() as u64,
            vthread_waits: vthread_probes.map(|p| (p, vthread_min_ns)),
        },
        || {
            let seeds = waits_at_start(&target, jvm.as_ref(), syscalls, blocked_stacks_on);
            seed_stacks = seeds.java_stacks;
            seeds.waits
        },
    )?;
    // Threads' times are counted from their first account: read just after the window
    // opens, so that every thread alive then is in it (one born since is seen born, which
    // tells it apart).
    let first_accounts = target.cpu_accounts();
    // And the throttling counters (stamped with the window's start below).
    let mut first_cgroup = cgroup.read(0);
    // pinprof is now about as large as it is before the target grows anything (the programs
    // loaded, the ring buffer mapped, the JVM's symbols read): the shares are of what the
    // budget leaves. (The ring buffer is counted whole: it fills as the target makes events.)
    let ring = u64::from(options.ring_buffer_bytes);
    let shares = options
        .budget
        .shares(crate::budget::resident_bytes().map(|r| r + ring), ring);
    let mut jvm = jvm;
    if let Some(jvm) = &mut jvm {
        jvm.hotspot.set_shares(shares);
    }
    let list_reader = list_reader.map(|reader| {
        reader.map(|mut r| {
            r.set_shares(shares);
            r
        })
    });
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
    writer.set_max_bytes(options.max_size);
    for warning in warnings {
        if !quiet {
            say!("pinprof: warning: {warning}");
        }
        writer.write_event(&Event::Warning(warning))?;
    }
    if let Some(container) = crate::namespaces::container(&process) {
        writer.write_event(&Event::Container(container))?;
    }
    if let Some(hz) = options.on_cpu_hz.filter(|_| capture.samples()) {
        writer.write_event(&Event::Sampling { hz })?;
    }
    let mut session = Session {
        vthread_min_ns: vthread_traced,
        quiet,
        target_mem: process
            .open("mem", libc::O_RDONLY)
            .map(std::fs::File::from)
            .ok(),
        symbolizer,
        jvm,
        target,
        capture,
        writer,
        known_threads: HashSet::new(),
        recently_exited: Default::default(),
        monitor_classes: Bounded::new(
            shares.java_names / 4,
            |_, (_, class, object): &(Instant, String, Option<String>)| {
                budget::heap_bytes(class) + object.as_deref().map_or(0, budget::heap_bytes)
            },
            None,
        ),
        init_waits: Default::default(),
        blockers_read: Default::default(),
        blocker_cursor: 0,
        blocker_classes: Default::default(),
        min_syscall_ns: options
            .min_syscall
            .map_or(u64::MAX, |d| d.as_nanos() as u64),
        blocked_stacks: stacks::BlockedStacks {
            on: blocked_stacks_on,
            min_ns: options.min_java_stack.as_nanos() as u64,
            read: HashMap::new(),
            cursor: 0,
        },
        stacks: Stacks::new(),
        copy_ends: Default::default(),
        mappings,
        fds: fdname::FdNamer::new(&process),
        lock_symbols: HashMap::new(),
        fp_check: options.fp_cross_check.then(FramePointerCheck::default),
        events: 0,
        watch,
        registration_failed: false,
        exit_ns: None,
        queue: Default::default(),
        cgroup,
        budget: options.budget,
        cuts_at_start,
        threads_not_listed: 0,
        list_watched: false,
    };
    session.threads_not_listed = session
        .jvm
        .as_ref()
        .map_or(0, |j| j.hotspot.threads_not_listed());
    session.stacks.set_budget(shares.stacks);
    let started_ns = session.capture.started_ns();
    session.write_accounts(started_ns, first_accounts)?;
    if let Some(Ok(first)) = &mut first_cgroup {
        first.time_ns = started_ns;
    }
    session.write_cgroup(first_cgroup)?;
    let result = session
        .seeded_java_stacks(seed_stacks)
        .and_then(|()| session.run(options, stop));
    // What the parsers of the target's ELF files failed on (their panics, caught) is said,
    // and kept with the recording.
    if let Some(warning) = crate::parser_guard::warning() {
        if !quiet {
            say!("pinprof: warning: {warning}");
        }
        let _ = session.writer.write_event(&Event::Warning(warning));
    }
    let reason = match &result {
        Ok(reason) => reason.clone(),
        Err(e) => StopReason::Error(format!("{e:#}")),
    };
    let cuts = session.cuts();
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
    let file = finished.with_context(|| {
        format!("the recording {output} is cut short, but what it holds reads (report, replay)")
    })?;
    result.with_context(|| format!("the recording {output} ends there, and reads"))?;
    Ok(Summary {
        output: options.output.clone(),
        file,
        events,
        lost,
        lost_causes,
        reason,
        seconds: (end_mono_ns - header.start_mono_ns) as f64 / 1e9,
        budget: options.budget,
        cuts,
    })
}

struct Session {
    /// Virtual threads' waits this long are sent one by one (None: not traced).
    vthread_min_ns: Option<u64>,
    /// Warnings go into the recording alone (a live view owns the terminal).
    quiet: bool,
    target: Target,
    /// The target's memory, opened once: bound to this process, never to a later one that
    /// reuses its pid.
    target_mem: Option<std::fs::File>,
    capture: Capture,
    writer: RecordingWriter,
    symbolizer: Symbolizer,
    known_threads: HashSet<u32>,
    recently_exited: RecentlyExited,
    /// The class last said for each monitor, and when it was read (re-read after a while: a
    /// deflated monitor may serve another object).
    /// Per monitor: when it was named, its object's class and, for a `java.lang.Class`
    /// object, the class that stands for.
    monitor_classes: Bounded<u64, (Instant, String, Option<String>)>,
    /// The class initializations carriers wait for.
    init_waits: crate::jvm::initwait::InitWaits,
    /// The wait (its start) whose park blocker was read last, by thread.
    blockers_read: HashMap<u32, u64>,
    /// Where in the thread list the next pass for park blockers begins.
    blocker_cursor: usize,
    /// Park blockers' classes (and whether ownable) as read, and when, by object.
    blocker_classes: HashMap<u64, (Instant, Option<(String, bool)>)>,
    /// System calls shorter than this are not events (u64::MAX: not traced).
    min_syscall_ns: u64,
    /// Other Java threads' long waits, their stacks read from user space.
    blocked_stacks: stacks::BlockedStacks,
    /// The stacks written so far and the native ones waiting for their event.
    stacks: Stacks,
    /// The target's executable mappings and sealed copies of their files.
    mappings: MapsWatch,
    fds: fdname::FdNamer,
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
    queue: queue_watch::QueueWatch,
    cgroup: cgroup_watch::CgroupWatch,
    budget: Budget,
    /// The process's tally of cuts as the recording began.
    cuts_at_start: Cuts,
    /// The most threads of the JVM's list a read left out.
    threads_not_listed: u64,
    /// Whether the thread watch has said a change yet.
    list_watched: bool,
    /// Where the kernel's copies of carriers' virtual thread stacks end.
    copy_ends: stacks::CopyEnds,
}

impl Session {
    fn run(&mut self, options: &Options, stop: Stops) -> Result<StopReason> {
        for thread in self.target.threads() {
            self.known_threads.insert(thread.tid);
            self.writer.write_event(&Event::Thread(thread))?;
        }
        self.write_java_threads(capture::monotonic_ns())?;
        // The duration is the window's: counted from the capture's start, not from here
        // (writing what was there at the start can take a while).
        let started = Instant::now()
            .checked_sub(self.window(capture::monotonic_ns()))
            .unwrap_or_else(Instant::now);
        let mut last_checkpoint = Instant::now();
        let mut raws = Vec::new();
        let progress = Progress::new(options.progress);
        let mut wait = DRAIN_PERIOD;
        let mut drained = 0;
        let mut last_chores = Instant::now();
        // The first pass at once: the waits open as capture began end unread otherwise.
        self.read_blocked_java_stacks()?;
        let mut last_stack_read = Instant::now();
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
            if self.writer.full() {
                break StopReason::SizeCap {
                    bytes: options.max_size.unwrap_or(0),
                };
            }
            // A batch at a time (see `capture::BATCH`); what one drain period brought decides
            // the next wait.
            let poll_wait = if self.blocked_stacks.on {
                wait.min(STACK_READ_PERIOD)
            } else {
                wait
            };
            drained += self.capture.poll(poll_wait, &mut raws, capture::BATCH)?;
            let backlog = self.capture.backlog();
            if !backlog {
                // A busy target fills the ring buffer faster: come back sooner, before it is full.
                wait = if drained > self.capture.ring_buffer_bytes / 8 {
                    Duration::from_millis(5)
                } else {
                    DRAIN_PERIOD
                };
                drained = 0;
            }
            self.refresh_java_threads()?;
            // Each record can be made slow to handle (a stack to name, a thread to read): the
            // end is looked at as they go, and those left then are handled as the recording
            // ends, within its deadline.
            let end = || {
                stop.quit.load(Ordering::Relaxed)
                    || stop.signal.load(Ordering::Relaxed)
                    || options.duration.is_some_and(|d| started.elapsed() >= d)
            };
            if self.handle(&mut raws, &end)? {
                break StopReason::TargetExited;
            }
            if last_stack_read.elapsed() >= STACK_READ_PERIOD {
                last_stack_read = Instant::now();
                self.read_blocked_java_stacks()?;
            }
            self.keep_stack_map_roomy();
            // The rest waits for the end of a drain, or a drain period at most.
            let since_chores = last_chores.elapsed();
            if !raws.is_empty()
                || since_chores < CHORE_PERIOD
                || (backlog && since_chores < DRAIN_PERIOD)
            {
                continue;
            }
            last_chores = Instant::now();
            self.name_class_init_waits()?;
            self.name_park_blockers()?;
            self.sample_queued(false)?;
            // (Not when the recording ends now: the ending takes its last checkpoint.)
            if last_checkpoint.elapsed() >= CHECKPOINT && !end() {
                last_checkpoint = Instant::now();
                self.checkpoint()?;
                self.say_cuts(&progress)?;
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
        // What the ending does is bounded too, whatever the target makes it: what is left at
        // this deadline is counted lost.
        let closing = Instant::now() + CLOSING;
        let closed = || Instant::now() >= closing;
        if let Some(watch) = &mut self.watch {
            watch.stop();
        }
        self.refresh_java_threads()?;
        // A last look at the threads, then the programs are detached and the recording ends:
        // the ring buffer holds all they made, and the maps the waits still open, which end
        // with it (walking their stacks takes time that is not theirs).
        self.checkpoint()?;
        self.say_cuts(&progress)?;
        let end_ns = self.capture.stop(self.exit_ns);
        // (After the records the loop had no time for.)
        self.capture.poll(Duration::ZERO, &mut raws, usize::MAX)?;
        self.handle(&mut raws, &closed)?;
        self.capture.count_unhandled(raws.len() as u64);
        raws.clear();
        self.close_open_intervals(end_ns, &closed)?;
        self.close_open_syscalls(end_ns)?;
        self.close_open_vthread_waits(end_ns)?;
        // The counts as the capture stopped, so the file says what the closing line says.
        self.writer.write_event(&Event::Counters {
            time_ns: end_ns,
            counters: self.capture.counters(),
        })?;
        self.write_vthread_sums(end_ns)?;
        self.write_budget(end_ns)?;

        progress.finish(
            self.window(end_ns),
            self.events,
            self.writer.bytes(),
            self.capture.counters().lost(),
        );
        Ok(reason)
    }

    /// What the caps on the target's maps and perf map left out, said once each (in the
    /// recording always; on the terminal unless a live view owns it).
    fn say_cuts(&mut self, progress: &Progress) -> Result<()> {
        for cut in self.symbol_inputs_cut()? {
            if !self.quiet {
                progress.say(&format!("pinprof: warning: {cut}"));
            }
        }
        Ok(())
    }

    /// The recording's window up to `now_ns`: what the progress line and the summary give.
    fn window(&self, now_ns: u64) -> Duration {
        Duration::from_nanos(now_ns.saturating_sub(self.capture.started_ns()))
    }

    /// What was cut to stay in the budget since the recording began.
    fn cuts(&self) -> Cuts {
        Cuts {
            threads_not_listed: self.threads_not_listed,
            ..TALLY.snapshot().since(&self.cuts_at_start)
        }
    }

    /// Says the budget and what it cut so far (at each checkpoint and at the end).
    fn write_budget(&mut self, time_ns: u64) -> Result<()> {
        let cuts = self.cuts();
        self.writer.write_event(&Event::MemoryBudget {
            time_ns,
            bytes: self.budget.bytes(),
            cuts,
        })
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
