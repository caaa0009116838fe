//! Kernel side of pinprof, seen from user space: loads the programs, attaches them, and turns
//! what they send into raw records. It knows nothing of files or reports.

mod btf;
mod java_threads;
mod tracefs;

pub use java_threads::{JavaThreadRegistry, KnownThread, ThreadRole};

use std::{
    collections::HashSet,
    os::fd::{AsFd as _, AsRawFd as _},
    time::Duration,
};

use anyhow::{Context as _, Result, anyhow, bail};
use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap, MapData, PerCpuArray, PerCpuHashMap, RingBuf, StackTraceMap},
    programs::Program,
};
use profiler_ebpf::{
    CHUNK_COPY_BYTES, ChunkCopy, ChunkHead, ExitEvent, MAX_COPIED_CHUNKS, NativeStackCopy,
    OffCpuEvent, STACK_COPY_BYTES, StackCopy, StackHead, SyscallEvent, SyscallKey, ThreadLife,
    ThreadRename, WaitSum, counter, kind,
};

use crate::events::{Counters, ShortOffCpu};

/// Where a kernel program runs.
#[derive(Clone, Copy, Debug)]
enum Hook {
    /// A tracepoint (category, name): its fields are read at the offsets its format gives.
    Tracepoint(&'static str, &'static str),
    /// A raw tracepoint: the tracepoint's own arguments, without a record made first.
    Raw(&'static str),
}

impl Hook {
    fn load(self, program: &mut Program) -> Result<()> {
        match (self, program) {
            (Self::Tracepoint(..), Program::TracePoint(p)) => p.load()?,
            (Self::Raw(_), Program::RawTracePoint(p)) => p.load()?,
            (hook, _) => bail!("the kernel object's program for {hook} is of another kind"),
        }
        Ok(())
    }

    fn attach(self, program: &mut Program) -> Result<()> {
        match (self, program) {
            (Self::Tracepoint(category, name), Program::TracePoint(p)) => {
                p.attach(category, name)?;
            }
            (Self::Raw(name), Program::RawTracePoint(p)) => {
                p.attach(name)?;
            }
            (hook, _) => bail!("the kernel object's program for {hook} is of another kind"),
        }
        Ok(())
    }

    fn unload(program: &mut Program) -> Result<()> {
        match program {
            Program::TracePoint(p) => p.unload()?,
            Program::RawTracePoint(p) => p.unload()?,
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
        }
    }
}

/// Why events were lost, each a different remedy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LostCauses {
    /// The ring buffer had no room: a larger one (`--ring-buffer-mib`) keeps them.
    pub ring_buffer_full: u64,
    /// Waits whose end the kernel never showed the programs (it skipped a switch back in).
    pub switch_ins_missed: u64,
    /// Program runs the kernel skipped because another BPF program was running on that CPU.
    pub runs_skipped: u64,
    /// Records user space could not decode.
    pub malformed: u64,
}

impl LostCauses {
    pub fn total(&self) -> u64 {
        self.ring_buffer_full + self.switch_ins_missed + self.runs_skipped + self.malformed
    }

    /// "2 with the ring buffer full, 1 switch back in not shown", the non-zero causes.
    pub fn describe(&self) -> String {
        [
            (
                self.ring_buffer_full,
                "with the ring buffer full (--ring-buffer-mib)",
            ),
            (
                self.switch_ins_missed,
                "waits whose end the kernel did not show (a skipped switch)",
            ),
            (
                self.runs_skipped,
                "program runs the kernel skipped (another BPF program was running)",
            ),
            (self.malformed, "malformed records"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect::<Vec<_>>()
        .join(", ")
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
    /// The target, as pinprof's PID namespace numbers it (as are all thread ids).
    pub pid: u32,
    /// pinprof's PID namespace (device, inode) when it is not the host's (the target is in
    /// it too): the programs then work in that namespace's ids.
    pub pid_ns: Option<(u64, u64)>,
    /// Off-CPU intervals shorter than this are summed in the kernel instead of sent one by one.
    pub min_off_cpu_ns: u64,
    /// Size of the ring buffer; a power of two, multiple of the page size.
    pub ring_buffer_bytes: u32,
    /// HotSpot's layout, when the target is a JVM pinprof could read.
    pub jvm: Option<profiler_ebpf::JvmLayout>,
    /// Java stacks are copied for blocks at least this long (0: never).
    pub min_java_stack_ns: u64,
    /// System calls and futex waits at least this long are events; shorter ones are summed.
    /// None: system calls are not traced.
    pub min_syscall_ns: Option<u64>,
    /// The Java threads known at start: registered before any program attaches, so the first events already see them as Java threads.
    pub java_threads: Vec<KnownThread>,
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

/// A record as the kernel sent it.
#[derive(Clone)]
pub enum Raw {
    OffCpu(OffCpuEvent),
    Exit(ExitEvent),
    StackCopy(Box<StackCopy>),
    /// A Java stack with the frames its virtual thread had frozen in a stack chunk.
    StackChunkCopy(Box<ChunkedStack>),
    /// A long system call, or a long futex wait with its waker.
    Syscall(SyscallEvent),
    /// User registers and stack of a long system call or of a waker, for DWARF unwinding.
    NativeStack(Box<NativeStackCopy>),
    Rename(ThreadRename),
    /// A thread of the target was created.
    ThreadStart(ThreadLife),
    /// A thread of the target ended, with its final scheduler account.
    ThreadExit(ThreadLife),
}

/// A Java stack copy with the copy of its virtual thread's frozen frames.
#[derive(Clone)]
pub struct ChunkedStack {
    pub stack: StackCopy,
    pub chunk: ChunkCopy,
}

/// Loaded and attached programs. Dropping it detaches and unloads everything.
pub struct Capture {
    events: RingBuf<MapData>,
    stacks: StackTraceMap<MapData>,
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
    /// What could not be traced on this kernel, said to the user.
    pub warnings: Vec<String>,
    in_syscall: Option<HashMap<MapData, u32, profiler_ebpf::SyscallStart>>,
    pub ring_buffer_bytes: usize,
    /// Records the ring buffer held that were too short for their kind.
    malformed: u64,
    /// Waits that could not be seeded at start: intervals, system calls.
    seeds_lost: [u64; 2],
    /// Threads whose seeded wait may have ended before the programs attached: what the
    /// kernel makes of their seeds is dropped.
    stale_seeds: HashSet<u32>,
    started_ns: u64,
    /// When `stop` was called: the end of what this capture sees.
    stopped_ns: Option<u64>,
    pid: u32,
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
        let prev_state = offset("sched", "sched_switch", "prev_state")?;
        let next_pid = offset("sched", "sched_switch", "next_pid")?;
        let wakeup_pid = offset("sched", "sched_waking", "pid")?;
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
        let fd_layout = fd_layout().unwrap_or_else(|e| {
            warnings.push(format!(
                "file descriptors are named from /proc only ({e:#}): one closed right after its \
                 call stays unnamed"
            ));
            Default::default()
        });
        let task_layout = task_layout().unwrap_or_else(|e| {
            warnings.push(format!(
                "the final CPU account of threads that end is not known ({e:#}): their running \
                 time is what is left of their life"
            ));
            Default::default()
        });
        let min_syscall_ns = options.min_syscall_ns.unwrap_or(u64::MAX);
        let min_java_stack_ns = if options.jvm.is_some() {
            options.min_java_stack_ns
        } else {
            0
        };
        let mut ebpf = EbpfLoader::new()
            .override_global("JVM_LAYOUT", &jvm, true)
            .override_global("MIN_JAVA_STACK_NS", &min_java_stack_ns, true)
            .override_global("MIN_SYSCALL_NS", &min_syscall_ns, true)
            .override_global("LOCK_ADDR_OFFSET", lock_addr.as_ref().unwrap_or(&8), true)
            .override_global("FD_LAYOUT", &fd_layout, true)
            .override_global("RENAME_PID_OFFSET", &rename_pid, true)
            .override_global("RENAME_NEWCOMM_OFFSET", &rename_comm, true)
            .override_global("NEWTASK_PID_OFFSET", &newtask_pid, true)
            .override_global("NEWTASK_FLAGS_OFFSET", &newtask_flags, true)
            .override_global("TASK_LAYOUT", &task_layout, true)
            .override_global("TARGET_TGID", &options.pid, true)
            .override_global("PID_NS_DEV", &options.pid_ns.map_or(0, |ns| ns.0), true)
            .override_global("PID_NS_INO", &options.pid_ns.map_or(0, |ns| ns.1), true)
            .override_global("MIN_OFF_CPU_NS", &options.min_off_cpu_ns, true)
            .override_global(
                "MIN_PREEMPTED_NS",
                &options.min_off_cpu_ns.max(MIN_PREEMPTED_NS),
                true,
            )
            .override_global("SWITCH_PREV_STATE_OFFSET", &prev_state, true)
            .override_global("SWITCH_NEXT_PID_OFFSET", &next_pid, true)
            .override_global("WAKEUP_PID_OFFSET", &wakeup_pid, true)
            .override_global("EXIT_GROUP_DEAD_OFFSET", &group_dead, true)
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
            ("sched_waking", Hook::Tracepoint("sched", "sched_waking")),
            (
                "sched_process_exit",
                Hook::Tracepoint("sched", "sched_process_exit"),
            ),
            ("sched_switch", Hook::Tracepoint("sched", "sched_switch")),
        ]);
        match &rename {
            Ok(_) => programs.push(("task_rename", Hook::Tracepoint("task", "task_rename"))),
            Err(e) => warnings.push(format!(
                "names of threads that end before pinprof reads them are not known ({e:#})"
            )),
        }
        // System calls are timed from enter to exit, and Java stacks are copied as threads
        // leave the call they blocked in. These run on every system call of the machine (and
        // return at once for other processes): raw tracepoints, the cheapest hook there.
        let syscalls = options.min_syscall_ns.is_some();
        if syscalls {
            programs.push(("sys_enter", Hook::Raw("sys_enter")));
        }
        if syscalls || min_java_stack_ns > 0 {
            programs.push(("sys_exit", Hook::Raw("sys_exit")));
        }
        if let (Err(e), true) = (&lock_addr, syscalls) {
            warnings.push(format!("kernel lock contention is not traced: {e:#}"));
        }
        if syscalls && lock_addr.is_ok() {
            programs.push((
                "contention_begin",
                Hook::Tracepoint("lock", "contention_begin"),
            ));
            programs.push(("contention_end", Hook::Tracepoint("lock", "contention_end")));
        }
        let take = |ebpf: &mut Ebpf, name: &str| {
            ebpf.take_map(name)
                .with_context(|| format!("kernel object has no map {name}"))
        };
        let events = RingBuf::try_from(take(&mut ebpf, "EVENTS")?)?;
        let stacks = StackTraceMap::try_from(take(&mut ebpf, "STACKS")?)?;
        let counters = PerCpuArray::try_from(take(&mut ebpf, "COUNTERS")?)?;
        let short = HashMap::try_from(take(&mut ebpf, "SHORT_OFF_CPU")?)?;
        let starts = take(&mut ebpf, "STARTS")?;
        let (registry, spare_registry) = JavaThreadRegistry::pair(
            [
                take(&mut ebpf, "JAVA_THREADS")?,
                java_threads::second_handle(&starts)?,
                take(&mut ebpf, "AMENDMENTS")?,
            ],
            options.pid,
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
        let mut capture = Self {
            ring_buffer_bytes: options.ring_buffer_bytes as usize,
            registry,
            spare_registry: Some(spare_registry),
            syscall_sums,
            kernel_locks,
            kernel_lock_threads,
            warnings,
            in_syscall,
            events,
            stacks,
            counters,
            short,
            starts,
            malformed: 0,
            seeds_lost: [0; 2],
            stale_seeds: HashSet::new(),
            started_ns: 0,
            stopped_ns: None,
            pid: options.pid,
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
        let waits = waits_at_start();
        capture.seed_waits(&waits);
        // The capture's start: every time the programs take is later, so only the seeded
        // waits (which start at 0) begin before it.
        capture.started_ns = monotonic_ns();
        for (program, hook) in programs {
            let prog = capture
                .ebpf
                .program_mut(program)
                .with_context(|| format!("kernel object has no program {program}"))?;
            hook.attach(prog)
                .map_err(|e| explain_bpf_error(e, &format!("attach {hook}")))?;
            capture.attached.push(program);
        }
        capture.drop_stale_seeds(&waits);
        Ok(capture)
    }

    /// A thread that ran between its reading and the programs' attaching may have ended the
    /// wait it was seeded with: its seeds still there are taken out, and whatever the kernel
    /// already made of them is dropped as it is read.
    fn drop_stale_seeds(&mut self, waits: &[WaitAtStart]) {
        for wait in waits {
            if crate::target::thread_runs(self.pid, wait.tid) == Some(wait.runs) {
                continue;
            }
            self.stale_seeds.insert(wait.tid);
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

    /// When the programs began to attach: the start of what this capture sees. Waits under
    /// way then (the seeded ones) are given as starting there.
    pub fn started_ns(&self) -> u64 {
        self.started_ns
    }

    /// Enters the waits under way into the programs' maps; a full map loses only the seed,
    /// counted.
    fn seed_waits(&mut self, waits: &[WaitAtStart]) {
        for wait in waits {
            if let Some(start) = wait.off_cpu {
                self.seeds_lost[0] += u64::from(self.starts.insert(wait.tid, start, 0).is_err());
            }
            if let (Some(call), Some(calls)) = (wait.syscall, self.in_syscall.as_mut()) {
                self.seeds_lost[1] += u64::from(calls.insert(wait.tid, call, 0).is_err());
            }
        }
    }

    /// Waits up to `timeout` for records, then drains all that are ready into `out`; returns
    /// the bytes drained.
    pub fn poll(&mut self, timeout: Duration, out: &mut Vec<Raw>) -> Result<usize> {
        let mut fd = libc::pollfd {
            fd: self.events.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut fd, 1, ms) };
        if rc < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err).context("poll on the ring buffer failed");
            }
        }
        let mut bytes = 0;
        while let Some(item) = self.events.next() {
            bytes += item.len();
            match decode(&item) {
                Some(raw)
                    if raw
                        .seeded_by()
                        .is_some_and(|t| self.stale_seeds.contains(&t)) => {}
                Some(raw) => out.extend(raw.within(self.started_ns, self.stopped_ns)),
                None => self.malformed += 1,
            }
        }
        Ok(bytes)
    }

    /// The addresses of stack `id`, innermost first.
    pub fn stack(&self, id: u32) -> Option<Vec<u64>> {
        let trace = self.stacks.get(&id, 0).ok()?;
        Some(trace.frames().iter().map(|f| f.ip).collect())
    }

    /// Runs of the programs the kernel skipped that cost an event: a tracepoint that fires
    /// while another BPF program runs on the same CPU does not run its programs
    /// (`recursion_misses`). Wake-ups and kernel lock contention are left out: those that
    /// fire inside a BPF program are its own (a ring buffer's wake-up, a map's lock), and a
    /// skipped one costs at most a waker's name, not an event.
    fn skipped_runs(&self) -> u64 {
        if self.stopped_ns.is_some() {
            return self.skipped_at_stop;
        }
        self.attached
            .iter()
            .filter(|name| {
                !matches!(
                    **name,
                    "sched_waking" | "contention_begin" | "contention_end"
                )
            })
            .filter_map(|name| {
                let fd = self.ebpf.program(name)?.fd().ok()?;
                let info = std::fs::read_to_string(format!(
                    "/proc/self/fdinfo/{}",
                    fd.as_fd().as_raw_fd()
                ))
                .ok()?;
                info.lines()
                    .find_map(|l| l.strip_prefix("recursion_misses:"))?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    }

    /// A kernel counter, summed over CPUs.
    fn counter(&self, index: u32) -> u64 {
        if let Some(at_stop) = &self.counters_at_stop {
            return at_stop.get(index as usize).copied().unwrap_or(0);
        }
        self.counters
            .get(&index, 0)
            .map(|per_cpu| per_cpu.iter().sum())
            .unwrap_or(0)
    }

    /// The events lost so far, by cause (their total is `Counters::lost_events`).
    pub fn lost_causes(&self) -> LostCauses {
        LostCauses {
            ring_buffer_full: self.counter(counter::LOST_EVENTS),
            switch_ins_missed: self.counter(counter::MISSED_SWITCH_INS),
            runs_skipped: self.skipped_runs(),
            malformed: self.malformed,
        }
    }

    /// Kernel counters summed over CPUs, plus what user space itself could not decode.
    pub fn counters(&self) -> Counters {
        let read = |index: u32| self.counter(index);
        Counters {
            lost_events: self.lost_causes().total(),
            stack_misses: read(counter::STACK_MISSES),
            start_map_full: read(counter::START_MAP_FULL)
                + self.seeds_lost[0]
                + self.registry.lost(),
            short_intervals: read(counter::SHORT_INTERVALS),
            java_stack_misses: read(counter::STACK_COPY_MISSES),
            syscall_map_full: read(counter::SYSCALL_MAP_FULL) + self.seeds_lost[1],
            waker_stacks_skipped: read(counter::WAKER_STACKS_SKIPPED),
        }
    }

    /// Tells the kernel programs which threads are Java threads (see
    /// `JavaThreadRegistry::set`).
    pub fn set_java_threads(&mut self, threads: &[KnownThread]) -> Result<()> {
        self.registry.set(threads)
    }

    /// A handle on the programs' Java threads for another thread (the one that follows the
    /// JVM's thread list); there is one.
    pub fn take_registry(&mut self) -> Option<JavaThreadRegistry> {
        self.spare_registry.take()
    }

    fn amended(&self, tid: u32, start: profiler_ebpf::OffCpuStart) -> profiler_ebpf::OffCpuStart {
        self.registry.amended(tid, start)
    }

    /// Per-(thread, system call) sums of the calls below the threshold, cumulative.
    pub fn syscall_sums(&self) -> Vec<(SyscallKey, WaitSum)> {
        entries(self.syscall_sums.as_ref())
    }

    /// Kernel lock contention of the target's threads per lock address, cumulative.
    pub fn kernel_locks(&self) -> Vec<(u64, WaitSum)> {
        let Some(map) = &self.kernel_locks else {
            return Vec::new();
        };
        map.iter()
            .flatten()
            .map(|(lock, per_cpu)| {
                let sum = per_cpu.iter().fold(WaitSum::default(), |a, s| WaitSum {
                    count: a.count + s.count,
                    total_ns: a.total_ns + s.total_ns,
                    max_ns: a.max_ns.max(s.max_ns),
                });
                (lock, sum)
            })
            .collect()
    }

    /// System calls in progress now: (thread, call).
    pub fn open_syscalls(&self) -> Vec<(u32, profiler_ebpf::SyscallStart)> {
        entries(self.in_syscall.as_ref())
            .into_iter()
            .filter_map(|(tid, mut call)| {
                if self.idle_in(tid, call.start_ns) {
                    call.flags |= profiler_ebpf::syscall_flags::IDLE;
                }
                call.start_ns = self.seen_from(call.start_ns)?;
                Some((tid, call))
            })
            .collect()
    }

    /// The kernel's entry for the wait `tid` is in now, if it is in one.
    fn open_start(&self, tid: u32) -> Option<profiler_ebpf::OffCpuStart> {
        self.starts
            .get(&tid, 0)
            .ok()
            .filter(|s| s.start_ns != profiler_ebpf::WAIT_ENDED)
    }

    /// Whether `tid` is a carrier idling (nothing mounted) in a wait that began after
    /// `since`, as amended: the kernel marks such a carrier's call at the wait's end.
    fn idle_in(&self, tid: u32, since: u64) -> bool {
        use profiler_ebpf::java_flags::{CARRIER, MOUNTED};
        self.open_start(tid).is_some_and(|start| {
            let start = self.amended(tid, start);
            start.java.flags & (CARRIER | MOUNTED) == CARRIER
                && start.prev_state != profiler_ebpf::task_state::RUNNING
                && since <= start.start_ns
        })
    }

    /// Kernel lock contention per thread of the target, cumulative.
    pub fn kernel_lock_threads(&self) -> Vec<(u32, WaitSum)> {
        entries(self.kernel_lock_threads.as_ref())
    }

    /// Threads that are off CPU right now, with where and since when.
    pub fn open_intervals(&self) -> Vec<(u32, profiler_ebpf::OffCpuStart)> {
        self.starts
            .iter()
            .flatten()
            .filter(|(_, start)| start.start_ns != profiler_ebpf::WAIT_ENDED)
            .filter_map(|(tid, start)| {
                let mut start = self.amended(tid, start);
                start.start_ns = self.seen_from(start.start_ns)?;
                Some((tid, start))
            })
            .collect()
    }

    /// The interval `tid` is off CPU in now, if it is.
    pub fn open_interval(&self, tid: u32) -> Option<profiler_ebpf::OffCpuStart> {
        let mut start = self.amended(tid, self.open_start(tid)?);
        start.start_ns = self.seen_from(start.start_ns)?;
        Some(start)
    }

    /// Per-thread sums of the intervals below the threshold.
    pub fn short_off_cpu(&self) -> Vec<ShortOffCpu> {
        self.short
            .iter()
            .flatten()
            .map(|(tid, s)| ShortOffCpu {
                tid,
                count: s.count,
                total_ns: s.total_ns,
                preempted_ns: s.preempted_ns,
            })
            .collect()
    }
}

/// Where this kernel keeps a file descriptor's inode, and which system calls take one first.
fn fd_layout() -> Result<profiler_ebpf::FdLayout> {
    let btf = btf::Btf::from_sys_fs()?;
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

/// Where this kernel keeps a task's scheduler account (`/proc/<pid>/task/<tid>/schedstat`).
fn task_layout() -> Result<profiler_ebpf::TaskLayout> {
    let btf = btf::Btf::from_sys_fs()?;
    let at = |outer: &str, inner_struct: &str, field: &str| -> Result<u32> {
        Ok(btf.offset("task_struct", outer)? + btf.offset(inner_struct, field)?)
    };
    Ok(profiler_ebpf::TaskLayout {
        run_ns: at("se", "sched_entity", "sum_exec_runtime")?,
        run_delay: at("sched_info", "sched_info", "run_delay")?,
    })
}

/// Every entry of a map the kernel programs keep, if it was loaded (a read that fails mid-way
/// means the entry went away meanwhile).
fn entries<K: aya::Pod, V: aya::Pod>(map: Option<&HashMap<MapData, K, V>>) -> Vec<(K, V)> {
    map.map(|m| m.iter().flatten().collect())
        .unwrap_or_default()
}

impl Raw {
    /// The thread whose seeded wait (start 0) this record comes from, if it does.
    fn seeded_by(&self) -> Option<u32> {
        match self {
            Raw::OffCpu(e) => (e.start_ns == 0).then_some(e.tid),
            Raw::StackCopy(copy) => (copy.head.start_ns == 0).then_some(copy.head.tid),
            Raw::StackChunkCopy(copy) => {
                (copy.stack.head.start_ns == 0).then_some(copy.stack.head.tid)
            }
            Raw::Syscall(e) => (e.start_ns == 0).then_some(e.tid),
            Raw::NativeStack(copy) => (copy.key_ns == 0).then_some(copy.tid),
            Raw::Exit(_) | Raw::Rename(_) | Raw::ThreadStart(_) | Raw::ThreadExit(_) => None,
        }
    }

    /// The record as seen within the capture's span: its start no earlier than `start_ns`
    /// (a wait under way then, such as a seeded one, which starts at 0, is seen from there),
    /// its end no later than `end_ns`, and nothing that began after that. Everything that
    /// pairs records by start time (a Java stack with its interval, a native stack with its
    /// call) sees the same time.
    fn within(mut self, start_ns: u64, end_ns: Option<u64>) -> Option<Self> {
        let end_ns = end_ns.unwrap_or(u64::MAX);
        let (start, end) = match &mut self {
            Raw::OffCpu(e) => (&mut e.start_ns, Some(&mut e.end_ns)),
            Raw::StackCopy(copy) => (&mut copy.head.start_ns, None),
            Raw::StackChunkCopy(copy) => (&mut copy.stack.head.start_ns, None),
            Raw::Syscall(e) => (&mut e.start_ns, Some(&mut e.end_ns)),
            // Keyed by its call's start, or by a wake-up.
            Raw::NativeStack(copy) => (&mut copy.key_ns, None),
            Raw::Exit(_) | Raw::Rename(_) => return Some(self),
            // A thread born or ended after the capture stopped is none of its business.
            Raw::ThreadStart(life) | Raw::ThreadExit(life) => {
                return (life.time_ns < end_ns).then_some(self);
            }
        };
        if *start >= end_ns {
            return None;
        }
        *start = (*start).max(start_ns);
        if let Some(end) = end {
            *end = (*end).min(end_ns);
        }
        Some(self)
    }
}

/// A plain `#[repr(C)]` integer struct from the start of `bytes`, if they hold one.
fn read<T: Copy>(bytes: &[u8]) -> Option<T> {
    (bytes.len() >= size_of::<T>())
        // SAFETY: length checked; T is a plain `#[repr(C)]` integer struct.
        .then(|| unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

fn decode(bytes: &[u8]) -> Option<Raw> {
    match read::<u32>(bytes)? {
        kind::OFF_CPU => read(bytes).map(Raw::OffCpu),
        kind::EXIT => read(bytes).map(Raw::Exit),
        kind::STACK_COPY => {
            let head = read::<StackHead>(bytes)?;
            stack_copy(head, &bytes[size_of::<StackHead>()..]).map(Raw::StackCopy)
        }
        kind::STACK_CHUNK_COPY => chunked_stack(bytes).map(Raw::StackChunkCopy),
        kind::SYSCALL | kind::FUTEX_WAIT => read(bytes).map(Raw::Syscall),
        kind::NATIVE_STACK => read(bytes).map(|copy| Raw::NativeStack(Box::new(copy))),
        kind::RENAME => read(bytes).map(Raw::Rename),
        kind::THREAD_START => read(bytes).map(Raw::ThreadStart),
        kind::THREAD_EXIT => read(bytes).map(Raw::ThreadExit),
        _ => None,
    }
}

/// A stack copy from its head and the bytes the kernel sent after it: exactly `head.len`.
fn stack_copy(head: StackHead, stack: &[u8]) -> Option<Box<StackCopy>> {
    let len = usize::try_from(head.len).ok()?;
    if len == 0 || len > STACK_COPY_BYTES || stack.len() != len {
        return None;
    }
    let mut copy = Box::new(StackCopy {
        head,
        data: [0; STACK_COPY_BYTES],
    });
    copy.data[..len].copy_from_slice(stack);
    Some(copy)
}

/// A stack copy with its chunk copy, as the kernel sends them: the two heads, the chunks'
/// bytes, then the stack's (`head.len` of them, the last ones). Every chunk must lie within
/// the chunks' bytes.
fn chunked_stack(bytes: &[u8]) -> Option<Box<ChunkedStack>> {
    let head = read::<StackHead>(bytes)?;
    let rest = &bytes[size_of::<StackHead>()..];
    let chunk_head = read::<ChunkHead>(rest)?;
    let rest = &rest[size_of::<ChunkHead>()..];
    let used = rest.len().checked_sub(usize::try_from(head.len).ok()?)?;
    let count = usize::try_from(chunk_head.count).ok()?;
    if used > CHUNK_COPY_BYTES || count > MAX_COPIED_CHUNKS {
        return None;
    }
    let (frozen, stack) = rest.split_at(used);
    let mut chunk = ChunkCopy {
        head: ChunkHead {
            chunks: Default::default(),
            ..chunk_head
        },
        data: [0; CHUNK_COPY_BYTES],
    };
    for (i, copied) in chunk_head.chunks[..count].iter().enumerate() {
        let end = copied.offset.checked_add(copied.len)?;
        if usize::try_from(end).ok()? > used {
            return None;
        }
        chunk.head.chunks[i] = *copied;
    }
    chunk.data[..used].copy_from_slice(frozen);
    let stack = stack_copy(head, stack)?;
    Some(Box::new(ChunkedStack {
        stack: *stack,
        chunk,
    }))
}

/// Fails early, with what to do, when this process may not load BPF programs.
pub fn check_privileges() -> Result<()> {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
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

#[cfg(test)]
mod tests {
    use profiler_ebpf::CopiedChunk;

    use super::*;

    fn bytes_of<T: Copy>(value: &T) -> Vec<u8> {
        // SAFETY: T is a plain `#[repr(C)]` integer struct without padding.
        unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }
            .to_vec()
    }

    fn stack_head(kind: u32, len: u32) -> StackHead {
        StackHead {
            kind,
            tid: 7,
            start_ns: 1_000,
            anchor_sp: 0x7000,
            chunk: 0x9000,
            chunk_sp: 12,
            len,
            ..StackHead::default()
        }
    }

    /// A record as the kernel sends a stack with two copied chunks: heads, chunk bytes
    /// (24 + 40), stack bytes (100).
    fn chunked_record() -> Vec<u8> {
        let mut chunk = ChunkHead {
            count: 2,
            rest: 0x5000,
            ..ChunkHead::default()
        };
        chunk.chunks[0] = CopiedChunk {
            addr: 0x9000,
            sp: 12,
            bottom: 15,
            offset: 0,
            len: 24,
        };
        chunk.chunks[1] = CopiedChunk {
            addr: 0xa000,
            sp: 4,
            bottom: 7,
            offset: 24,
            len: 40,
        };
        let mut bytes = bytes_of(&stack_head(kind::STACK_CHUNK_COPY, 100));
        bytes.extend(bytes_of(&chunk));
        bytes.extend((0..64).map(|i| i as u8));
        bytes.extend((0..100).map(|i| 200 - i as u8));
        bytes
    }

    #[test]
    fn a_stack_copy_is_read_from_its_used_bytes() {
        let mut bytes = bytes_of(&stack_head(kind::STACK_COPY, 5));
        bytes.extend([1, 2, 3, 4, 5]);
        let Some(Raw::StackCopy(copy)) = decode(&bytes) else {
            panic!("not decoded");
        };
        assert_eq!((copy.head.tid, copy.head.len), (7, 5));
        assert_eq!(&copy.data[..6], &[1, 2, 3, 4, 5, 0]);
        // A length that disagrees with the bytes sent, either way, or none at all.
        for cut in [1, 6] {
            assert!(decode(&bytes[..bytes.len() - cut]).is_none());
        }
        bytes.push(6);
        assert!(decode(&bytes).is_none());
        assert!(decode(&bytes_of(&stack_head(kind::STACK_COPY, 0))).is_none());
        let over = bytes_of(&stack_head(kind::STACK_COPY, STACK_COPY_BYTES as u32 + 1));
        assert!(decode(&[over, vec![0; STACK_COPY_BYTES + 1]].concat()).is_none());
    }

    #[test]
    fn a_chunked_stack_copy_splits_chunk_and_stack_bytes_by_the_stack_length() {
        let Some(Raw::StackChunkCopy(copy)) = decode(&chunked_record()) else {
            panic!("not decoded");
        };
        assert_eq!(copy.stack.head.len, 100);
        assert_eq!(copy.stack.data[0], 200);
        assert_eq!(copy.stack.data[99], 101);
        assert_eq!(copy.stack.data[100], 0);
        assert_eq!((copy.chunk.head.count, copy.chunk.head.rest), (2, 0x5000));
        assert_eq!(copy.chunk.head.chunks[1].offset, 24);
        assert_eq!(&copy.chunk.data[62..65], &[62, 63, 0]);
    }

    #[test]
    fn chunked_copies_whose_lengths_do_not_fit_their_bytes_are_refused() {
        const CHUNKS: usize = size_of::<StackHead>() + std::mem::offset_of!(ChunkHead, chunks);
        const COUNT: usize = size_of::<StackHead>() + std::mem::offset_of!(ChunkHead, count);
        const LEN: usize = std::mem::offset_of!(StackHead, len);
        const ENTRY: usize = size_of::<CopiedChunk>();
        const HEADS: usize = size_of::<StackHead>() + size_of::<ChunkHead>();
        fn put(bytes: &mut [u8], at: usize, value: u32) {
            bytes[at..at + 4].copy_from_slice(&value.to_ne_bytes());
        }
        type Breaks = (&'static str, fn(&mut Vec<u8>));
        let broken: [Breaks; 9] = [
            ("no stack bytes", |b| b.truncate(b.len() - 100)),
            ("cut in the heads", |b| b.truncate(100)),
            ("stack longer than the record", |b| put(b, LEN, 10_000)),
            ("stack takes chunk bytes", |b| put(b, LEN, 120)),
            ("more chunks than copied at most", |b| put(b, COUNT, 5)),
            ("chunk bytes cut short", |b| {
                b.remove(HEADS);
            }),
            ("more chunk bytes than copied at most", |b| {
                b.splice(HEADS.., vec![0; CHUNK_COPY_BYTES + 1 + 100]);
            }),
            ("an entry past the chunk bytes", |b| {
                put(b, CHUNKS + ENTRY + 20, 41);
            }),
            ("an entry whose end overflows", |b| {
                put(b, CHUNKS + ENTRY + 16, u32::MAX - 3);
                put(b, CHUNKS + ENTRY + 20, 8);
            }),
        ];
        for (what, breaks) in broken {
            let mut bytes = chunked_record();
            breaks(&mut bytes);
            assert!(decode(&bytes).is_none(), "{what}");
        }
        // Entries past `count` are not kept.
        let mut bytes = chunked_record();
        put(&mut bytes, COUNT, 1);
        let Some(Raw::StackChunkCopy(copy)) = decode(&bytes) else {
            panic!("not decoded");
        };
        assert_eq!(copy.chunk.head.chunks[1], CopiedChunk::default());
    }

    #[test]
    fn lost_events_are_said_by_cause() {
        let none = LostCauses::default();
        assert_eq!((none.total(), none.describe()), (0, String::new()));
        let some = LostCauses {
            ring_buffer_full: 2,
            switch_ins_missed: 1,
            runs_skipped: 0,
            malformed: 0,
        };
        assert_eq!(some.total(), 3);
        assert_eq!(
            some.describe(),
            "2 with the ring buffer full (--ring-buffer-mib), 1 waits whose end the kernel did \
             not show (a skipped switch)"
        );
    }
}
