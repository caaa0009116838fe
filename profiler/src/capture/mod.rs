//! Kernel side of pinprof, seen from user space: loads the programs, attaches them, and turns
//! what they send into raw records. It knows nothing of files or reports.
//!
//! Here: loading the programs, seeding their maps, attaching and detaching them. Reading the
//! ring buffer is in `records`, reading the maps in `maps`.

mod btf;
mod java_threads;
mod maps;
mod records;
mod tracefs;

pub use java_threads::{JavaThreadRegistry, KnownThread, ThreadRole};
pub use maps::LostCauses;
pub use records::{BATCH, ChunkedStack, JavaStack, Raw, VthreadWaitRecord};

use std::collections::HashSet;

use anyhow::{Context as _, Result, anyhow, bail};
use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap, MapData, PerCpuArray, PerCpuHashMap, ProgramArray, RingBuf, StackTraceMap},
    programs::Program,
};
use profiler_ebpf::{SyscallKey, WaitSum, counter};

/// Where a kernel program runs.
#[derive(Clone, Debug)]
enum Hook {
    /// A tracepoint (category, name): its fields are read at the offsets its format gives.
    Tracepoint(&'static str, &'static str),
    /// A raw tracepoint: the tracepoint's own arguments, without a record made first.
    Raw(&'static str),
    /// The CPU clock of every online CPU, sampled this many times a second.
    CpuClock(u64),
    /// A function of the target's libjvm: at this offset of the file, in the target alone.
    Uprobe(UprobeAt),
}

/// A uprobe's place: an offset in a file the target mapped (held open, so that the probe
/// goes on that very inode whatever the target's paths say), hit by the target alone.
#[derive(Clone, Debug)]
pub struct UprobeAt {
    pub file: std::sync::Arc<std::fs::File>,
    pub offset: u64,
    pub pid: u32,
}

impl Hook {
    fn load(&self, program: &mut Program) -> Result<()> {
        match (self, program) {
            (Self::Tracepoint(..), Program::TracePoint(p)) => p.load()?,
            (Self::Raw(_), Program::RawTracePoint(p)) => p.load()?,
            (Self::CpuClock(_), Program::PerfEvent(p)) => p.load()?,
            (Self::Uprobe(_), Program::UProbe(p)) => p.load()?,
            (hook, _) => bail!("the kernel object's program for {hook} is of another kind"),
        }
        Ok(())
    }

    fn attach(&self, program: &mut Program) -> Result<()> {
        match (self, program) {
            (Self::Tracepoint(category, name), Program::TracePoint(p)) => {
                p.attach(category, name)?;
            }
            (Self::Uprobe(at), Program::UProbe(p)) => {
                use std::os::fd::AsRawFd as _;
                let pid = std::num::NonZeroU32::new(at.pid).context("no target pid")?;
                // The open file, through pinprof's own descriptor table: the kernel follows
                // the link to that inode, never to a path the target controls.
                let path = format!("/proc/self/fd/{}", at.file.as_raw_fd());
                p.attach(
                    at.offset,
                    path,
                    aya::programs::uprobe::UProbeScope::OneProcess(pid),
                )?;
            }
            (Self::Raw(name), Program::RawTracePoint(p)) => {
                p.attach(name)?;
            }
            (Self::CpuClock(hz), Program::PerfEvent(p)) => {
                use aya::programs::perf_event::{
                    PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent,
                };
                let cpus = aya::util::online_cpus()
                    .map_err(|(what, e)| anyhow!("cannot list the online CPUs ({what}): {e}"))?;
                // A fixed period (the CPU clock counts ns), not a frequency: the kernel
                // reaches a frequency by adjusting the period over the first ticks, which
                // sampled a busy CPU at under half the rate for the first few hundred ms.
                let period = 1_000_000_000 / (*hz).max(1);
                for cpu in cpus {
                    p.attach(
                        PerfEventConfig::Software(SoftwareEvent::CpuClock),
                        PerfEventScope::AllProcessesOneCpu { cpu },
                        SamplePolicy::Period(period),
                        false,
                    )?;
                }
            }
            (hook, _) => bail!("the kernel object's program for {hook} is of another kind"),
        }
        Ok(())
    }

    fn unload(program: &mut Program) -> Result<()> {
        match program {
            Program::TracePoint(p) => p.unload()?,
            Program::RawTracePoint(p) => p.unload()?,
            Program::PerfEvent(p) => p.unload()?,
            Program::UProbe(p) => p.unload()?,
            _ => {}
        }
        Ok(())
    }
}

impl std::fmt::Display for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tracepoint(category, name) => write!(f, "{category}:{name}"),
            Self::Raw(name) => write!(f, "raw tracepoint {name}"),
            Self::CpuClock(hz) => write!(f, "the CPU clock at {hz} Hz"),
            Self::Uprobe(at) => write!(f, "a uprobe at offset {:#x} of libjvm", at.offset),
        }
    }
}

/// Waits for a CPU shorter than this are summed per thread in the kernel, not sent one by
/// one: they are most switches of a busy target, and the scheduler's account has their total.
/// Longer ones (a CPU quota's throttling, a starved carrier) are events.
pub const MIN_PREEMPTED_NS: u64 = 1_000_000;

/// The kernel object built by `build.rs` (empty when the build had to skip it).
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/pinprof-ebpf"));

#[derive(Clone, Debug)]
pub struct Options {
    /// The target, by identity; its pid as pinprof's PID namespace numbers it (as are all
    /// thread ids).
    pub process: crate::process::Process,
    /// pinprof's PID namespace (device, inode) when it is not the host's (the target is in
    /// it too): the programs then work in that namespace's ids.
    pub pid_ns: Option<(u64, u64)>,
    /// Off-CPU intervals shorter than this are summed in the kernel instead of sent one by one.
    pub min_off_cpu_ns: u64,
    /// Size of the ring buffer; a power of two, multiple of the page size.
    pub ring_buffer_bytes: u32,
    /// HotSpot's layout, when the target is a JVM pinprof could read.
    pub jvm: Option<profiler_ebpf::JvmLayout>,
    /// HotSpot's `_thread_in_Java`, when the target is a JVM pinprof could read.
    pub java_state_in_java: Option<u32>,
    /// Java stacks are copied for blocks at least this long (0: never).
    pub min_java_stack_ns: u64,
    /// System calls and futex waits at least this long are events; shorter ones are summed.
    /// None: system calls are not seen.
    pub min_syscall_ns: Option<u64>,
    /// Trace every system call from entry to exit, with its result (`sys_enter`/`sys_exit`,
    /// which put every task of the host on the system calls' slow path). Otherwise the call
    /// a thread blocks in is read from its registers as it blocks, and timed to its switch-in.
    pub trace_syscalls: bool,
    /// The Java threads known at start: registered before any program attaches, so the first events already see them as Java threads.
    pub java_threads: Vec<KnownThread>,
    /// On-CPU samples a second, per CPU (None: not sampled).
    pub on_cpu_hz: Option<u64>,
    /// A thread that waits at least this long from its wake-up to running is an event.
    pub late_wakeup_ns: u64,
    /// Virtual threads' waits off their carriers: where they unmount and mount, and the
    /// shortest sent one by one (None: not traced).
    pub vthread_waits: Option<(crate::jvm::hotspot::ContinuationProbes, u64)>,
}

/// A thread asleep as capture starts, in a wait the programs cannot see begin: seeded into
/// their maps just before they attach, so it ends, with its waker, Java stack and system
/// call, as if the kernel had seen it begin. Its start times are 0: before the window, to
/// whose start the capture clamps them.
#[derive(Clone, Debug)]
pub struct WaitAtStart {
    pub tid: u32,
    /// How many times the thread had been put on a CPU when it was read: if it has run
    /// since, by the time the programs are attached, its wait may have ended.
    pub runs: u64,
    /// Its off-CPU interval, when it has something to show (a carrier's, or a Java thread's
    /// with a Java stack); others' time is in their scheduler accounts, without a stack.
    pub off_cpu: Option<profiler_ebpf::OffCpuStart>,
    /// The system call it sleeps in, when system calls are traced.
    pub syscall: Option<profiler_ebpf::SyscallStart>,
}

/// Loaded and attached programs. Dropping it detaches and unloads everything.
pub struct Capture {
    events: RingBuf<MapData>,
    stacks: StackTraceMap<MapData>,
    /// Each thread's last native stack ids, reused by its next waits (`KSTACKS`; the value,
    /// a `StackReuse`, is never read here): forgotten when the stack map is emptied.
    stack_reuse: HashMap<MapData, u32, [u64; 6]>,
    /// Where copies of each carrier's mounted virtual thread's stack end (`COPY_ENDS`).
    copy_ends: HashMap<MapData, u32, u64>,
    /// How many entries the stack map has room for.
    stack_map_entries: u32,
    /// Stacks user space could not name (taken while the map was being emptied).
    stacks_lost_to_emptying: u64,
    /// Waits whose Java stack user space was to read and did not (they ended first).
    java_stacks_missed: u64,
    /// `sched_switch`'s tail call slot, held open (see `load_switch_tail`).
    switch_tail: Option<ProgramArray<MapData>>,
    counters: PerCpuArray<MapData, u64>,
    short: HashMap<MapData, u32, profiler_ebpf::ShortOffCpu>,
    starts: HashMap<MapData, u32, profiler_ebpf::OffCpuStart>,
    /// The programs' Java threads, and the Java state of waits they began unknown.
    registry: JavaThreadRegistry,
    /// A second handle on the same, for the thread that follows the JVM's thread list.
    spare_registry: Option<JavaThreadRegistry>,
    syscall_sums: Option<HashMap<MapData, SyscallKey, WaitSum>>,
    kernel_locks: Option<PerCpuHashMap<MapData, u64, WaitSum>>,
    kernel_lock_threads: Option<HashMap<MapData, u32, WaitSum>>,
    sched_stats: HashMap<MapData, u32, profiler_ebpf::SchedStats>,
    /// Virtual threads unmounted now, by id (`UNMOUNTED`), when their waits are traced.
    unmounted: Option<HashMap<MapData, u64, profiler_ebpf::Unmount>>,
    /// What could not be traced on this kernel, said to the user.
    pub warnings: Vec<String>,
    in_syscall: Option<HashMap<MapData, u32, profiler_ebpf::SyscallStart>>,
    pub ring_buffer_bytes: usize,
    /// Records the ring buffer held that were too short for their kind.
    malformed: u64,
    /// Records drained that the recorder had no time left to handle (see `count_unhandled`).
    unhandled: u64,
    /// Waits that could not be seeded at start: intervals, system calls.
    seeds_lost: [u64; 2],
    /// Threads whose seeded wait may have ended before the programs attached: what the
    /// kernel makes of their seeds is dropped.
    stale_seeds: HashSet<u32>,
    /// Threads whose off-CPU seed went into the map and was not stale.
    seeded_off_cpu: HashSet<u32>,
    /// Buffers of stack copies already handled, for the next ones (see `recycle`).
    spare: Vec<Vec<u8>>,
    /// The last drain stopped at its batch's size with records left.
    backlog: bool,
    started_ns: u64,
    /// When `stop` was called: the end of what this capture sees.
    stopped_ns: Option<u64>,
    process: crate::process::Process,
    /// The programs attached, by name, to detach at `stop`.
    attached: Vec<&'static str>,
    /// Their runs the kernel skipped, as `stop` found them.
    skipped_at_stop: u64,
    /// The kernel's counters as `stop` found them: what the programs count while they are
    /// being detached (events past the end, dropped from a ring buffer no one drains then)
    /// is not the window's.
    counters_at_stop: Option<Vec<u64>>,
    // Keeps the programs loaded and attached; dropped last.
    ebpf: Ebpf,
}

impl Capture {
    /// Loads the programs, fills their maps (with the waits `waits_at_start` reads, just
    /// before they attach), and attaches them.
    pub fn start(
        options: &Options,
        waits_at_start: impl FnOnce() -> Vec<WaitAtStart>,
    ) -> Result<Self> {
        if EBPF_OBJECT.is_empty() {
            bail!(
                "this pinprof was built without its kernel programs (no nightly toolchain with \
                 bpf-linker, and the checked-in object is older than their sources); run \
                 `cargo xtask setup` and rebuild"
            );
        }
        let tracefs = tracefs::ensure_mounted()?;
        let offset = |cat, name, field| tracefs::field_offset(&tracefs, cat, name, field);
        // Read once: the layouts below all come from it (a few MB to parse).
        let btf = btf::Btf::from_sys_fs()
            .context("pinprof needs the kernel's BTF (/sys/kernel/btf/vmlinux)")?;
        let (task_pid, task_state) = task_ids_layout(&btf)?;
        // (Without it the programs tell the host's other tasks apart by map lookups.)
        let task_tgid = btf.offset("task_struct", "tgid").unwrap_or(0);
        // Kernel lock contention needs CONFIG_LOCKDEP-free lock tracepoints (5.19+).
        let lock_addr = offset("lock", "contention_end", "lock_addr");
        // Names of short-lived threads; optional.
        let rename = offset("task", "task_rename", "pid")
            .and_then(|pid| Ok((pid, offset("task", "task_rename", "newcomm")?)));
        let (rename_pid, rename_comm) = rename.as_ref().map_or((8, 28), |r| *r);
        let group_dead = offset("sched", "sched_process_exit", "group_dead")?;
        // Threads' births; optional (without, a thread's life starts when it is first seen).
        let newtask = offset("task", "task_newtask", "pid")
            .and_then(|pid| Ok((pid, offset("task", "task_newtask", "clone_flags")?)));
        let (newtask_pid, newtask_flags) = newtask.as_ref().map_or((8, 32), |n| *n);

        let jvm = options.jvm.unwrap_or_default();
        let mut warnings = Vec::new();
        let fd_layout = fd_layout(&btf).unwrap_or_else(|e| {
            warnings.push(format!(
                "file descriptors are named from /proc only ({e:#}): one closed right after its \
                 call stays unnamed"
            ));
            Default::default()
        });
        let task_layout = task_layout(&btf).unwrap_or_else(|e| {
            warnings.push(format!(
                "the final CPU account of threads that end is not known ({e:#}): their running \
                 time is what is left of their life"
            ));
            Default::default()
        });
        let min_syscall_ns = options.min_syscall_ns.unwrap_or(u64::MAX);
        let syscalls_at_switches =
            u32::from(options.min_syscall_ns.is_some() && !options.trace_syscalls);
        let min_java_stack_ns = if options.jvm.is_some() {
            options.min_java_stack_ns
        } else {
            0
        };
        let mut ebpf = EbpfLoader::new()
            .override_global("JVM_LAYOUT", &jvm, true)
            .override_global(
                "JAVA_STATE_IN_JAVA",
                &options.java_state_in_java.unwrap_or(u32::MAX),
                true,
            )
            .override_global("MIN_JAVA_STACK_NS", &min_java_stack_ns, true)
            .override_global("MIN_SYSCALL_NS", &min_syscall_ns, true)
            .override_global("SYSCALLS_AT_SWITCHES", &syscalls_at_switches, true)
            .override_global("FD_LAYOUT", &fd_layout, true)
            .override_global("RENAME_PID_OFFSET", &rename_pid, true)
            .override_global("RENAME_NEWCOMM_OFFSET", &rename_comm, true)
            .override_global("NEWTASK_PID_OFFSET", &newtask_pid, true)
            .override_global("NEWTASK_FLAGS_OFFSET", &newtask_flags, true)
            .override_global("TASK_LAYOUT", &task_layout, true)
            .override_global("TARGET_TGID", &options.process.pid(), true)
            .override_global("PID_NS_DEV", &options.pid_ns.map_or(0, |ns| ns.0), true)
            .override_global("PID_NS_INO", &options.pid_ns.map_or(0, |ns| ns.1), true)
            .override_global("MIN_OFF_CPU_NS", &options.min_off_cpu_ns, true)
            .override_global("LATE_WAKEUP_NS", &options.late_wakeup_ns, true)
            .override_global(
                "MIN_PREEMPTED_NS",
                &options.min_off_cpu_ns.max(MIN_PREEMPTED_NS),
                true,
            )
            .override_global("TASK_PID_OFFSET", &task_pid, true)
            .override_global("TASK_TGID_OFFSET", &task_tgid, true)
            .override_global("TASK_STATE_OFFSET", &task_state, true)
            .override_global("EXIT_GROUP_DEAD_OFFSET", &group_dead, true)
            .override_global(
                "MIN_VTHREAD_WAIT_NS",
                &options.vthread_waits.as_ref().map_or(u64::MAX, |v| v.1),
                true,
            )
            .map_max_entries("EVENTS", options.ring_buffer_bytes)
            .load(EBPF_OBJECT)
            .map_err(|e| explain_bpf_error(anyhow!(e), "load the kernel programs"))?;

        // Wake-ups first, so no switch-in misses its waker; exits before switches so nothing
        // of a dying thread lingers.
        // sched_waking runs in the waker's context (sched_wakeup may run on the wakee's CPU).
        let mut programs = vec![];
        // Births first of all: a thread born after the window opened is then seen born.
        match &newtask {
            Ok(_) => programs.push(("task_newtask", Hook::Tracepoint("task", "task_newtask"))),
            Err(e) => warnings.push(format!(
                "threads' births are not seen ({e:#}): a thread born during the recording is \
                 counted from its first event"
            )),
        }
        programs.extend([
            ("sched_waking", Hook::Raw("sched_waking")),
            (
                "sched_process_exit",
                Hook::Tracepoint("sched", "sched_process_exit"),
            ),
            ("sched_switch", Hook::Raw("sched_switch")),
        ]);
        match &rename {
            Ok(_) => programs.push(("task_rename", Hook::Tracepoint("task", "task_rename"))),
            Err(e) => warnings.push(format!(
                "names of threads that end before pinprof reads them are not known ({e:#})"
            )),
        }
        // System calls are timed from enter to exit, and then other threads' Java stacks are
        // copied as they leave the call they blocked in. These run on every system call of the
        // machine (raw tracepoints, the cheapest hook there, return at once for other
        // processes), and one attached puts every task of the host on the system calls' slow
        // path: only when system calls are asked for. Without them, pinned carriers' stacks
        // are copied as they block and other threads' read while they still are.
        let syscalls = options.min_syscall_ns.is_some();
        if syscalls && options.trace_syscalls {
            programs.push(("sys_enter", Hook::Raw("sys_enter")));
            programs.push(("sys_exit", Hook::Raw("sys_exit")));
        }
        if let Some(hz) = options.on_cpu_hz {
            programs.push(("on_cpu", Hook::CpuClock(hz)));
        }
        if let Some((probes, _)) = &options.vthread_waits {
            let at = |offset| {
                Hook::Uprobe(UprobeAt {
                    file: probes.file.clone(),
                    offset,
                    pid: options.process.pid(),
                })
            };
            programs.push(("vthread_thaw", at(probes.thaw)));
            programs.push(("vthread_freeze", at(probes.freeze)));
            if let Some(offset) = probes.freeze_preempt {
                programs.push(("vthread_freeze_preempt", at(offset)));
            }
        }
        if let (Err(e), true) = (&lock_addr, syscalls) {
            warnings.push(format!("kernel lock contention is not traced: {e:#}"));
        }
        if syscalls && lock_addr.is_ok() {
            programs.push(("contention_begin", Hook::Raw("contention_begin")));
            programs.push(("contention_end", Hook::Raw("contention_end")));
        }
        let take = |ebpf: &mut Ebpf, name: &str| {
            ebpf.take_map(name)
                .with_context(|| format!("kernel object has no map {name}"))
        };
        let events = RingBuf::try_from(take(&mut ebpf, "EVENTS")?)?;
        let stacks = take(&mut ebpf, "STACKS")?;
        let stack_map_entries = match &stacks {
            aya::maps::Map::StackTraceMap(data) => data.info()?.max_entries(),
            _ => 0,
        };
        let stacks = StackTraceMap::try_from(stacks)?;
        let stack_reuse = HashMap::try_from(take(&mut ebpf, "KSTACKS")?)?;
        let copy_ends = HashMap::try_from(take(&mut ebpf, "COPY_ENDS")?)?;
        let counters = PerCpuArray::try_from(take(&mut ebpf, "COUNTERS")?)?;
        let short = HashMap::try_from(take(&mut ebpf, "SHORT_OFF_CPU")?)?;
        let sched_stats = HashMap::try_from(take(&mut ebpf, "SCHED_STATS")?)?;
        let starts = take(&mut ebpf, "STARTS")?;
        let (registry, spare_registry) = JavaThreadRegistry::pair(
            [
                take(&mut ebpf, "JAVA_THREADS")?,
                java_threads::second_handle(&starts)?,
                take(&mut ebpf, "AMENDMENTS")?,
            ],
            options.process.clone(),
        )?;
        let starts = HashMap::try_from(starts)?;
        let in_syscall = if syscalls {
            Some(HashMap::try_from(take(&mut ebpf, "IN_SYSCALL")?)?)
        } else {
            None
        };
        let (syscall_sums, kernel_locks, kernel_lock_threads) = if syscalls {
            (
                Some(HashMap::try_from(take(&mut ebpf, "SYSCALL_SUMS")?)?),
                Some(PerCpuHashMap::try_from(take(&mut ebpf, "KERNEL_LOCKS")?)?),
                Some(HashMap::try_from(take(&mut ebpf, "KERNEL_LOCK_THREADS")?)?),
            )
        } else {
            (None, None, None)
        };
        let unmounted = match &options.vthread_waits {
            Some(_) => Some(HashMap::try_from(take(&mut ebpf, "UNMOUNTED")?)?),
            None => None,
        };
        let mut capture = Self {
            unmounted,
            ring_buffer_bytes: options.ring_buffer_bytes as usize,
            registry,
            spare_registry: Some(spare_registry),
            syscall_sums,
            kernel_locks,
            kernel_lock_threads,
            sched_stats,
            warnings,
            in_syscall,
            events,
            stacks,
            stack_reuse,
            copy_ends,
            stack_map_entries,
            stacks_lost_to_emptying: 0,
            java_stacks_missed: 0,
            switch_tail: None,
            counters,
            short,
            starts,
            malformed: 0,
            unhandled: 0,
            seeds_lost: [0; 2],
            stale_seeds: HashSet::new(),
            seeded_off_cpu: HashSet::new(),
            spare: Vec::new(),
            backlog: false,
            started_ns: 0,
            stopped_ns: None,
            process: options.process.clone(),
            attached: Vec::new(),
            skipped_at_stop: 0,
            counters_at_stop: None,
            ebpf,
        };
        capture.set_java_threads(&options.java_threads)?;
        // Verified first, attached last and together: every map the programs read is filled
        // by then, and the waits seeded just before have the least time to go stale.
        for (program, hook) in &programs {
            let prog = capture
                .ebpf
                .program_mut(program)
                .with_context(|| format!("kernel object has no program {program}"))?;
            hook.load(prog)
                .map_err(|e| explain_bpf_error(e, &format!("load {program}")))?;
        }
        capture.switch_tail = Some(capture.load_switch_tail()?);
        let waits = waits_at_start();
        capture.seed_waits(&waits);
        for (program, hook) in programs {
            let prog = capture
                .ebpf
                .program_mut(program)
                .with_context(|| format!("kernel object has no program {program}"))?;
            match hook.attach(prog) {
                Ok(()) => capture.attached.push(program),
                // Samples add to the rest: where the CPU clock cannot be sampled (a sandbox
                // refusing perf_event_open), the rest is recorded, and that is said.
                Err(e) if matches!(hook, Hook::CpuClock(_)) => {
                    let _ = Hook::unload(prog);
                    capture.warnings.push(format!(
                        "no on-CPU samples (no monopolization, no oncpu flamegraph): the CPU \
                         clock cannot be sampled here: {e:#}"
                    ));
                }
                Err(e) => return Err(explain_bpf_error(e, &format!("attach {hook}"))),
            }
        }
        capture.drop_stale_seeds(&waits);
        // The capture's start, once every program is attached: attaching can take tens of
        // milliseconds on a busy machine, and a thread born and gone meanwhile, before the
        // programs that see births and ends were both in, would lie in the window and in no
        // event. What the programs made before it is cut at it (`Raw::within`).
        capture.started_ns = monotonic_ns();
        Ok(capture)
    }

    /// A thread that ran between its reading and the programs' attaching may have ended the
    /// wait it was seeded with: its seeds still there are taken out, and whatever the kernel
    /// already made of them is dropped as it is read.
    fn drop_stale_seeds(&mut self, waits: &[WaitAtStart]) {
        for wait in waits {
            if crate::target::thread_runs(&self.process, wait.tid) == Some(wait.runs) {
                continue;
            }
            self.stale_seeds.insert(wait.tid);
            self.seeded_off_cpu.remove(&wait.tid);
            if self.starts.get(&wait.tid, 0).is_ok_and(|s| s.start_ns == 0) {
                let _ = self.starts.remove(&wait.tid);
            }
            if let Some(calls) = self.in_syscall.as_mut()
                && calls.get(&wait.tid, 0).is_ok_and(|c| c.start_ns == 0)
            {
                let _ = calls.remove(&wait.tid);
            }
        }
    }

    /// Ends the capture now, and returns that time. The programs are detached (which can
    /// take a while): the maps stay as they are, the ring buffer holds all there is to read,
    /// and what the programs saw after that time is cut off or left out.
    ///
    /// `until`: when the target exited, if it did: nothing after that is the target's, and
    /// the capture ends there rather than when its exit was read.
    pub fn stop(&mut self, until: Option<u64>) -> u64 {
        let now = until.map_or(monotonic_ns(), |end| end.min(monotonic_ns()));
        self.skipped_at_stop = self.skipped_runs();
        self.counters_at_stop = Some((0..counter::COUNT).map(|i| self.counter(i)).collect());
        self.stopped_ns = Some(now);
        // Each detach waits for the kernel's grace periods (tens of milliseconds, seconds on a
        // loaded machine), while the programs still attached keep running: together, not one
        // after the other.
        let attached: HashSet<&str> = self.attached.drain(..).collect();
        std::thread::scope(|scope| {
            for (name, program) in self.ebpf.programs_mut() {
                if attached.contains(name) {
                    scope.spawn(move || {
                        let _ = Hook::unload(program);
                    });
                }
            }
        });
        now
    }

    /// When `stop` ended the capture, if it did.
    pub fn stopped_ns(&self) -> Option<u64> {
        self.stopped_ns
    }

    /// When something still under way that began at `start_ns` is seen to begin: no
    /// earlier than the capture's start (a seed begins at 0); None if it began after the
    /// capture stopped.
    fn seen_from(&self, start_ns: u64) -> Option<u64> {
        self.stopped_ns
            .is_none_or(|end| start_ns < end)
            .then(|| start_ns.max(self.started_ns))
    }

    /// Records drained and not handled: the recording had to end first. Counted as lost.
    pub fn count_unhandled(&mut self, n: u64) {
        self.unhandled += n;
    }

    /// Loads `sched_switch`'s second half, which it reaches by a tail call, into its slot.
    /// The slot's map is kept open for the capture's life: the kernel empties a program
    /// array once user space holds no descriptor of it.
    fn load_switch_tail(&mut self) -> Result<ProgramArray<MapData>> {
        const NAME: &str = "sched_switch_blocked";
        let map = self
            .ebpf
            .take_map("SWITCH_TAIL")
            .context("kernel object has no map SWITCH_TAIL")?;
        let mut slots = ProgramArray::try_from(map)?;
        let prog = self
            .ebpf
            .program_mut(NAME)
            .with_context(|| format!("kernel object has no program {NAME}"))?;
        Hook::Raw("sched_switch")
            .load(prog)
            .map_err(|e| explain_bpf_error(e, &format!("load {NAME}")))?;
        let Program::RawTracePoint(prog) = prog else {
            bail!("the kernel object's program {NAME} is of another kind");
        };
        slots.set(0, prog.fd()?, 0)?;
        Ok(slots)
    }

    /// A wait whose Java stack user space was to read ended before it was read.
    pub fn count_java_stack_missed(&mut self) {
        self.java_stacks_missed += 1;
    }

    /// When the programs were all attached: the start of what this capture sees. Waits under
    /// way then (the seeded ones among them) are given as starting there.
    pub fn started_ns(&self) -> u64 {
        self.started_ns
    }

    /// Enters the waits under way into the programs' maps; a full map loses only the seed,
    /// counted.
    fn seed_waits(&mut self, waits: &[WaitAtStart]) {
        for wait in waits {
            if let Some(start) = wait.off_cpu {
                match self.starts.insert(wait.tid, start, 0) {
                    Ok(()) => _ = self.seeded_off_cpu.insert(wait.tid),
                    Err(_) => self.seeds_lost[0] += 1,
                }
            }
            if let (Some(call), Some(calls)) = (wait.syscall, self.in_syscall.as_mut()) {
                self.seeds_lost[1] += u64::from(calls.insert(wait.tid, call, 0).is_err());
            }
        }
    }

    /// Copies of carrier `tid`'s mounted virtual thread's stack end at `end` (None: at the
    /// stack's base). A full map leaves the carrier copied to its base.
    pub fn set_copy_end(&mut self, tid: u32, end: Option<u64>) {
        let _ = match end {
            Some(end) => self.copy_ends.insert(tid, end, 0),
            None => self.copy_ends.remove(&tid),
        };
    }

    /// Whether `tid`'s off-CPU interval at the capture's start was seeded (and kept): a wait
    /// under way as the programs attached, that they did not see begin.
    pub fn seeded_off_cpu(&self, tid: u32) -> bool {
        self.seeded_off_cpu.contains(&tid)
    }

    /// Tells the kernel programs which threads are Java threads (see
    /// `JavaThreadRegistry::set`).
    pub fn set_java_threads(&mut self, threads: &[KnownThread]) -> Result<()> {
        self.registry.set(threads)
    }

    /// Whether the on-CPU sampler is attached.
    pub fn samples(&self) -> bool {
        self.attached.contains(&"on_cpu")
    }

    /// A handle on the programs' Java threads for another thread (the one that follows the
    /// JVM's thread list); there is one.
    pub fn take_registry(&mut self) -> Option<JavaThreadRegistry> {
        self.spare_registry.take()
    }
}

/// Where this kernel keeps a file descriptor's inode, and which system calls take one first.
fn fd_layout(btf: &btf::Btf) -> Result<profiler_ebpf::FdLayout> {
    let mut fd_syscalls = [0u64; 8];
    for sysno in syscalls::Sysno::iter() {
        let nr = sysno.id() as usize;
        if crate::fdname::takes_fd(sysno.name()) && nr < 512 {
            fd_syscalls[nr / 64] |= 1 << (nr % 64);
        }
    }
    Ok(profiler_ebpf::FdLayout {
        task_files: btf.offset("task_struct", "files")?,
        files_fdt: btf.offset("files_struct", "fdt")?,
        fdt_max_fds: btf.offset("fdtable", "max_fds")?,
        fdt_fd: btf.offset("fdtable", "fd")?,
        file_inode: btf.offset("file", "f_inode")?,
        inode_ino: btf.offset("inode", "i_ino")?,
        inode_mode: btf.offset("inode", "i_mode")?,
        _pad: 0,
        fd_syscalls,
    })
}

/// Where this kernel keeps a task's id (`pid`) and state (`__state`, `state` before 5.14), read
/// from the tasks the scheduler's raw tracepoints hand over.
fn task_ids_layout(btf: &btf::Btf) -> Result<(u32, u32)> {
    let pid = btf.offset("task_struct", "pid")?;
    let state = btf
        .offset("task_struct", "__state")
        .or_else(|_| btf.offset("task_struct", "state"))?;
    Ok((pid, state))
}

/// Where this kernel keeps a task's scheduler account (`/proc/<pid>/task/<tid>/schedstat`).
fn task_layout(btf: &btf::Btf) -> Result<profiler_ebpf::TaskLayout> {
    let at = |outer: &str, inner_struct: &str, field: &str| -> Result<u32> {
        Ok(btf.offset("task_struct", outer)? + btf.offset(inner_struct, field)?)
    };
    Ok(profiler_ebpf::TaskLayout {
        run_ns: at("se", "sched_entity", "sum_exec_runtime")?,
        run_delay: at("sched_info", "sched_info", "run_delay")?,
    })
}

/// Fails early, with what to do, when this process may not load BPF programs.
pub fn check_privileges() -> Result<()> {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let effective = crate::capabilities::effective();
    let has = |cap: u32| effective & (1 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    bail!(
        "pinprof needs root, or the capabilities CAP_BPF and CAP_PERFMON, to load its kernel \
         programs (try: sudo pinprof ...)"
    )
}

/// Turns the kernel's terse refusals into something a user can act on.
fn explain_bpf_error(err: anyhow::Error, what: &str) -> anyhow::Error {
    let text = format!("{err:#}");
    let io = err
        .chain()
        .find_map(|e| e.downcast_ref::<std::io::Error>())
        .and_then(|e| e.raw_os_error());
    if io == Some(libc::EPERM)
        || io == Some(libc::EACCES)
        || text.contains("Operation not permitted")
    {
        return anyhow!(
            "cannot {what}: permission denied. pinprof needs root, or CAP_BPF and CAP_PERFMON \
             (and CAP_SYS_ADMIN on kernels before 5.8): {text}"
        );
    }
    anyhow!(
        "cannot {what}: {text}. pinprof needs Linux >= 5.15 with BTF, BPF ring buffers and tracepoints"
    )
}

/// `CLOCK_MONOTONIC` now, in ns: the clock of `bpf_ktime_get_ns` and of Java's `System.nanoTime`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
