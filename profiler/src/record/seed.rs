//! Seeding from /proc and the JVM before the programs attach: the waits already under way,
//! and the JVM read once (its internals and its scheduler settings).

use std::sync::atomic::AtomicBool;

use super::{Options, jvm_watch::JvmWatch};
use crate::{
    capture::WaitAtStart,
    jvm::{self, hotspot::Hotspot, memory::Memory},
    target::Target,
};

/// The target's threads asleep now, in waits the kernel programs will not see begin: their
/// state and system call from /proc, their JVM state from the JVM's memory (the fields the
/// kernel program reads as a thread blocks; they cannot change while it sleeps). An interval
/// is given only where it has something to show (see `WaitAtStart`); an idle carrier's park
/// is the scheduler waiting for work, as in the kernel program.
///
/// With `java_stacks`, the Java stacks of these waits are read too: the kernel programs copy
/// a stack as a thread blocks, which these did before they were attached, and user space
/// reads the stacks of the waits open only every few milliseconds, which a wait that ends
/// soon after attach outruns.
pub(super) fn waits_at_start(
    target: &Target,
    jvm: Option<&JvmWatch>,
    syscalls: bool,
    java_stacks: bool,
) -> Seeds {
    use profiler_ebpf::{
        OffCpuStart, SyscallStart,
        java_flags::{CARRIER, KNOWN, MOUNTED},
        syscall_flags, sysno, task_state,
    };
    let mut seeds = Seeds::default();
    if jvm.is_none() && !syscalls {
        return seeds; // nothing to seed: no JVM state to show, no calls traced
    }
    // For futex timeouts: the caller's `struct timespec` (a null pointer reads as none).
    let mem = syscalls
        .then(|| Memory::open(target.process()).ok())
        .flatten();
    let stack_mem = (java_stacks && jvm.is_some())
        .then(|| target.process().open("mem", libc::O_RDONLY).ok())
        .flatten()
        .map(std::fs::File::from);
    let mut stack_bytes = 0;
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
            // Its waits before attach are not known: its next one has its Java stack copied
            // as it blocks, as after a long one.
            flags: profiler_ebpf::wait_flags::LAST_LONG,
            wake_ns: 0,
            java,
            run_ns: u64::MAX,
        });
        let syscall = syscalls
            .then(|| target.thread_syscall(tid))
            .flatten()
            .map(|(nr, args)| {
                let futex_wait = profiler_ebpf::futex_op::call_waits(nr, args[1]);
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
        // Kept only if the thread did not run while it was read: the same wait throughout.
        // (At most `SEED_STACK_BYTES` in all, however many threads the target has: the waits
        // past them have their stacks read by the passes over blocked threads.)
        let stack = off_cpu
            .as_ref()
            .zip(stack_mem.as_ref())
            .filter(|_| stack_bytes < SEED_STACK_BYTES)
            .and_then(|(start, mem)| super::stacks::blocked_java_stack(mem, start))
            .filter(|_| target.runs(tid) == Some(runs));
        if let Some(mut stack) = stack {
            stack.head.tid = tid;
            stack_bytes += stack.data.len();
            seeds.java_stacks.push(stack);
        }
        if off_cpu.is_some() || syscall.is_some() {
            seeds.waits.push(WaitAtStart {
                tid,
                runs,
                off_cpu,
                syscall,
            });
        }
    }
    seeds
}

/// The most the Java stacks read with the seeds hold, in all (they are held until the capture
/// has started, before the memory budget's shares are known).
const SEED_STACK_BYTES: usize = 16 << 20;

/// What `waits_at_start` read.
#[derive(Default)]
pub(super) struct Seeds {
    pub(super) waits: Vec<WaitAtStart>,
    /// Copies of their Java stacks, keyed by thread (their start is the capture's).
    pub(super) java_stacks: Vec<crate::capture::JavaStack>,
}

/// Reads the JVM's internals and, through the attach protocol, its scheduler settings. A JVM
/// pinprof cannot read is still profiled, only without its Java view: what failed becomes a
/// warning in the recording.
pub(super) fn open_jvm(
    options: &Options,
    process: &crate::process::Process,
    info: &mut crate::events::TargetInfo,
    warnings: &mut Vec<String>,
    stop: &AtomicBool,
) -> Option<Hotspot> {
    let hotspot = match &info.runtime {
        Some(r) if r.kind == "hotspot" => match Hotspot::attach(
            process,
            r.major(),
            options
                .budget
                .shares(None, options.ring_buffer_bytes.into()),
        ) {
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
        match jvm::scheduler_settings(process, h, stop) {
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
