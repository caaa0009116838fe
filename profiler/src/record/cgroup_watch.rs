//! The CPU quota of the target's cgroup and its throttling, read at the window's start, at
//! every checkpoint and at the end (see `cgroup`). A target with no cgroup of the CPU
//! controller (or in the root cgroup) records nothing; a cgroup that cannot be read is said
//! once.

use anyhow::Result;

use super::Session;
use crate::{capture, cgroup::CpuCgroup, events::Event};

/// What the sampling remembers between checkpoints.
#[derive(Default)]
pub(super) struct CgroupWatch {
    /// The cgroup that limits the target (None: none, or it could not be found).
    cgroup: Option<CpuCgroup>,
    /// A read failed and was said (said once: the next ones are only left out).
    said: bool,
}

impl CgroupWatch {
    /// The cgroup that limits `process`, found before the window opens; a warning when it
    /// cannot be told.
    pub(super) fn find(process: &crate::process::Process) -> (Self, Option<String>) {
        match CpuCgroup::of(process) {
            Ok(cgroup) => (
                Self {
                    cgroup: cgroup.map(CpuCgroup::limiting),
                    said: false,
                },
                None,
            ),
            Err(e) => (
                Self::default(),
                Some(format!(
                    "the target's cgroup CPU quota and throttling cannot be read ({e:#}): the \
                     report does not say whether the quota stalled it"
                )),
            ),
        }
    }

    /// A snapshot stamped `time_ns`; Err once a read fails (then no more errors).
    pub(super) fn read(&mut self, time_ns: u64) -> Option<Result<crate::events::CgroupCpu>> {
        let cgroup = self.cgroup.as_ref()?;
        match cgroup.snapshot(time_ns) {
            Ok(s) => Some(Ok(s)),
            Err(_) if self.said => None,
            Err(e) => {
                self.said = true;
                Some(Err(e))
            }
        }
    }
}

impl Session {
    /// Writes a snapshot of the cgroup's throttling read now (at a checkpoint).
    pub(super) fn sample_cgroup(&mut self) -> Result<()> {
        let time_ns = capture::monotonic_ns();
        let read = self.cgroup.read(time_ns);
        self.write_cgroup(read)
    }

    /// Writes a snapshot, or says once why there is none.
    pub(super) fn write_cgroup(
        &mut self,
        read: Option<Result<crate::events::CgroupCpu>>,
    ) -> Result<()> {
        match read {
            None => Ok(()),
            Some(Ok(snapshot)) => self.writer.write_event(&Event::CgroupCpu(snapshot)),
            Some(Err(e)) => self.writer.write_event(&Event::Warning(format!(
                "the target's cgroup CPU throttling could not be read ({e:#}): its figures \
                 end at the last reading"
            ))),
        }
    }
}
