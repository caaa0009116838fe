//! Reading the programs' maps: their counters and what was lost, the sums kept in the
//! kernel, the stacks, and the waits and system calls still open.

use std::os::fd::{AsFd as _, AsRawFd as _};

use aya::maps::{HashMap, MapData};
use profiler_ebpf::{SyscallKey, WaitSum, counter};

use super::{Capture, monotonic_ns};
use crate::events::{Counters, ShortOffCpu};

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
    /// Records drained but not handled by the recording's end (its duration, a signal): a
    /// target that makes each one slow to handle cannot hold the end back.
    pub unhandled: u64,
}

impl LostCauses {
    pub fn total(&self) -> u64 {
        self.ring_buffer_full
            + self.switch_ins_missed
            + self.runs_skipped
            + self.malformed
            + self.unhandled
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
            (
                self.unhandled,
                "not handled by the recording's end (each slow to handle)",
            ),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// What `Capture::empty_stack_map` did.
pub struct EmptiedStacks {
    pub end_ns: u64,
    /// The ids deleted, when, and their addresses when they were read.
    pub deleted: Vec<(u32, u64, Option<Vec<u64>>)>,
}

/// Every entry of a map the kernel programs keep, if it was loaded (a read that fails mid-way
/// means the entry went away meanwhile).
fn entries<K: aya::Pod, V: aya::Pod>(map: Option<&HashMap<MapData, K, V>>) -> Vec<(K, V)> {
    map.map(|m| m.iter().flatten().collect())
        .unwrap_or_default()
}

impl Capture {
    /// The addresses of stack `id`, innermost first.
    pub fn stack(&self, id: u32) -> Option<Vec<u64>> {
        let trace = self.stacks.get(&id, 0).ok()?;
        Some(trace.frames().iter().map(|f| f.ip).collect())
    }

    /// How many stacks the kernel's stack map holds at most.
    pub fn stack_map_entries(&self) -> u32 {
        self.stack_map_entries
    }

    /// How many stacks the kernel could not keep so far (the map full, or a collision).
    pub fn kernel_stack_misses(&self) -> u64 {
        self.counter(counter::STACK_MISSES)
    }

    /// Empties the kernel's stack map so that new stacks find room: first each thread's
    /// reused kernel stack id (so no program takes an id from before), then every stack,
    /// each read before it is deleted unless `known` says user space has it already.
    /// Returns when it began and ended, and what was deleted (`None`: known, not read).
    pub fn empty_stack_map(&mut self, known: impl Fn(u32) -> bool) -> EmptiedStacks {
        let reused: Vec<u32> = self.stack_reuse.keys().flatten().collect();
        for tid in reused {
            let _ = self.stack_reuse.remove(&tid);
        }
        let ids: Vec<u32> = self.stacks.stack_ids().flatten().collect();
        let mut deleted = Vec::with_capacity(ids.len());
        for id in ids {
            let addrs = if known(id) {
                None
            } else {
                match self.stack(id) {
                    Some(addrs) => Some(addrs),
                    None => continue, // gone meanwhile
                }
            };
            // The time just after: an event's stack taken before it was what was read.
            if self.stacks.remove(&id).is_ok() {
                deleted.push((id, monotonic_ns(), addrs));
            }
        }
        EmptiedStacks {
            end_ns: monotonic_ns(),
            deleted,
        }
    }

    /// A stack the kernel took that user space could not name (see `empty_stack_map`):
    /// counted with the kernel's own stack misses.
    pub fn stack_lost(&mut self) {
        self.stacks_lost_to_emptying += 1;
    }

    /// Runs of the programs the kernel skipped that cost an event: a tracepoint that fires
    /// while another BPF program runs on the same CPU does not run its programs
    /// (`recursion_misses`). Wake-ups and kernel lock contention are left out: those that
    /// fire inside a BPF program are its own (a ring buffer's wake-up, a map's lock), and a
    /// skipped one costs at most a waker's name, not an event.
    pub(super) fn skipped_runs(&self) -> u64 {
        if self.stopped_ns.is_some() {
            return self.skipped_at_stop;
        }
        self.attached
            .iter()
            .filter(|name| {
                !matches!(
                    **name,
                    // (Samples are statistics: one skipped loses no event.)
                    "sched_waking" | "contention_begin" | "contention_end" | "on_cpu"
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
    pub(super) fn counter(&self, index: u32) -> u64 {
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
            unhandled: self.unhandled,
        }
    }

    /// Kernel counters summed over CPUs, plus what user space itself could not decode.
    pub fn counters(&self) -> Counters {
        let read = |index: u32| self.counter(index);
        Counters {
            lost_events: self.lost_causes().total(),
            stack_misses: read(counter::STACK_MISSES) + self.stacks_lost_to_emptying,
            start_map_full: read(counter::START_MAP_FULL)
                + self.seeds_lost[0]
                + self.registry.lost(),
            short_intervals: read(counter::SHORT_INTERVALS),
            java_stack_misses: read(counter::STACK_COPY_MISSES) + self.java_stacks_missed,
            syscall_map_full: read(counter::SYSCALL_MAP_FULL) + self.seeds_lost[1],
            waker_stacks_skipped: read(counter::WAKER_STACKS_SKIPPED),
        }
    }

    /// Virtual threads unmounted now (their waits under way), by id, those that unmounted
    /// within the capture's span.
    pub fn open_vthread_waits(&self) -> Vec<(u64, profiler_ebpf::Unmount)> {
        entries(self.unmounted.as_ref())
            .into_iter()
            .filter_map(|(id, mut u)| {
                u.start_ns = self.seen_from(u.start_ns)?;
                Some((id, u))
            })
            .collect()
    }

    /// What the kernel counted of virtual threads' waits without sending them.
    pub fn vthread_wait_sums(
        &self,
        time_ns: u64,
        min_wait_ns: u64,
    ) -> crate::events::VthreadWaitSums {
        let read = |index: u32| self.counter(index);
        crate::events::VthreadWaitSums {
            time_ns,
            unmounts: read(counter::VTHREAD_UNMOUNTS),
            short_waits: read(counter::VTHREAD_SHORT_WAITS),
            short_wait_ns: read(counter::VTHREAD_SHORT_WAIT_NS),
            min_wait_ns,
            unmatched: read(counter::VTHREAD_UNMATCHED),
            stacks_skipped: read(counter::VTHREAD_STACKS_SKIPPED),
        }
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

    /// Each thread's scheduler histograms and counts, cumulative (threads that ended are
    /// gone from the map).
    pub fn sched_stats(&self) -> Vec<(u32, profiler_ebpf::SchedStats)> {
        self.sched_stats.iter().flatten().collect()
    }

    /// On-CPU samples taken so far, and threads whose scheduler histograms had no room.
    /// On-CPU samples taken, those sent without their Java stack, and threads whose
    /// scheduler histograms had no room.
    pub fn sampling_counts(&self) -> (u64, u64, u64) {
        (
            self.counter(counter::ON_CPU_SAMPLES),
            self.counter(counter::SAMPLE_STACKS_SKIPPED),
            self.counter(counter::SCHED_MAP_FULL),
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_events_are_said_by_cause() {
        let none = LostCauses::default();
        assert_eq!((none.total(), none.describe()), (0, String::new()));
        let some = LostCauses {
            ring_buffer_full: 2,
            switch_ins_missed: 1,
            runs_skipped: 0,
            malformed: 0,
            unhandled: 0,
        };
        assert_eq!(some.total(), 3);
        assert_eq!(
            some.describe(),
            "2 with the ring buffer full (--ring-buffer-mib), 1 waits whose end the kernel did \
             not show (a skipped switch)"
        );
    }
}
