//! Checkpoints: once a second, the threads' CPU accounts, the counters, the kernel's sums and
//! the cgroup's throttling go into the recording, and the file is flushed.

use anyhow::Result;

use super::{Session, translate::syscall_name};
use crate::{
    capture,
    events::{Event, KernelLock, SyscallSum, ThreadCpu, ThreadSched},
};

impl Session {
    pub(super) fn checkpoint(&mut self) -> Result<()> {
        self.cpu_snapshot()?;
        self.open_carrier_waits()?;
        self.sample_queued(true)?;
        self.sample_cgroup()?;
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
        self.write_vthread_sums(time_ns)?;
        self.write_budget(time_ns)?;
        let threads = self.capture.short_off_cpu();
        if !threads.is_empty() {
            self.writer
                .write_event(&Event::ShortOffCpu { time_ns, threads })?;
        }
        self.sched_snapshot(time_ns)?;
        self.writer.flush()
    }

    /// The target's maps or perf map read only in part (over a cap), the first time each is
    /// seen: written into the recording, and given back to be said.
    pub(super) fn symbol_inputs_cut(&mut self) -> Result<Vec<String>> {
        let cuts: Vec<String> = [self.mappings.news(), self.symbolizer.news()]
            .into_iter()
            .flatten()
            .collect();
        for cut in &cuts {
            self.writer.write_event(&Event::Warning(cut.clone()))?;
        }
        Ok(cuts)
    }

    /// Every thread's scheduler histograms, as the kernel has them now.
    fn sched_snapshot(&mut self, time_ns: u64) -> Result<()> {
        let threads: Vec<ThreadSched> = self
            .capture
            .sched_stats()
            .iter()
            .map(|(tid, s)| ThreadSched {
                tid: *tid,
                wakeup: (&s.wakeup).into(),
                runqueue: (&s.runqueue).into(),
                migrations: s.migrations,
                involuntary_switches: s.involuntary_switches,
            })
            .collect();
        let (samples, sample_stacks_skipped, threads_not_kept) = self.capture.sampling_counts();
        self.writer.write_event(&Event::SchedStats {
            time_ns,
            threads,
            samples,
            sample_stacks_skipped,
            threads_not_kept,
        })
    }

    fn cpu_snapshot(&mut self) -> Result<()> {
        let time_ns = capture::monotonic_ns();
        let accounts = self.target.cpu_accounts();
        self.write_accounts(time_ns, accounts)
    }

    /// Writes the threads' scheduler accounts read at `time_ns`.
    pub(super) fn write_accounts(&mut self, time_ns: u64, accounts: Vec<ThreadCpu>) -> Result<()> {
        if accounts.is_empty() {
            return Ok(()); // the target is gone
        }
        self.writer.write_event(&Event::ThreadCpu {
            time_ns,
            threads: accounts,
        })
    }
}
