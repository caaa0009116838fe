//! Virtual threads' waits off their carriers, as the kernel sent them: their frames walked
//! from the copy of their stack chunks, what they parked on named by its class.

use anyhow::Result;

use super::{Session, stacks::java_frames};
use crate::capture::VthreadWaitRecord;
use crate::events::{Event, ParkBlocker, Unmounted, VthreadWait};

/// What the kernel kept of an unmount, as the recording says it.
struct Unmount {
    how: Unmounted,
    blocker: Option<ParkBlocker>,
    owner_id: Option<u64>,
    monitor: Option<u64>,
}

impl Session {
    /// Records one virtual thread's wait.
    pub(super) fn vthread_wait(&mut self, raw: &VthreadWaitRecord) -> Result<()> {
        let head = &raw.head;
        let u = self.unmount(
            head.how,
            head.blocker,
            head.owner_id,
            head.monitor,
            head.start_ns,
        )?;
        let stack = self.unmounted_stack(raw)?;
        for tid in [head.tid, head.unmount_tid] {
            self.thread(tid)?;
        }
        self.writer.write_event(&Event::VthreadWait(VthreadWait {
            vthread_id: head.vthread_id,
            start_ns: head.start_ns,
            end_ns: head.end_ns,
            unmount_tid: head.unmount_tid,
            mount_tid: head.tid,
            how: u.how,
            blocker: u.blocker,
            owner_id: u.owner_id,
            monitor: u.monitor,
            stack,
            unfinished: false,
        }))?;
        self.events += 1;
        Ok(())
    }

    /// Writes the virtual threads' waits still under way at `end_ns` (at least the
    /// threshold long): their frames read from the heap, where an unmounted thread's chunks
    /// stay as they are until it mounts again.
    pub(super) fn close_open_vthread_waits(&mut self, end_ns: u64) -> Result<()> {
        let Some(min) = self.vthread_min_ns else {
            return Ok(());
        };
        for (id, open) in self.capture.open_vthread_waits() {
            if end_ns.saturating_sub(open.start_ns) < min {
                continue;
            }
            let u = self.unmount(
                open.how,
                open.blocker,
                open.owner_id,
                open.monitor,
                open.start_ns,
            )?;
            let stack = self.parked_stack(open.oop, id)?;
            self.thread(open.tid)?;
            self.writer.write_event(&Event::VthreadWait(VthreadWait {
                vthread_id: id,
                start_ns: open.start_ns,
                end_ns,
                unmount_tid: open.tid,
                mount_tid: open.tid,
                how: u.how,
                blocker: u.blocker,
                owner_id: u.owner_id,
                monitor: u.monitor,
                stack,
                unfinished: true,
            }))?;
            self.events += 1;
        }
        Ok(())
    }

    /// Names what the kernel read at an unmount: the blocker by its class, the monitor by
    /// its object's (a `MonitorClass` record), the owner kept only where it means something.
    fn unmount(
        &mut self,
        how: u32,
        blocker: u64,
        owner_id: u64,
        monitor: u64,
        start_ns: u64,
    ) -> Result<Unmount> {
        let how = match how {
            profiler_ebpf::unmount::MONITOR => Unmounted::Monitor,
            profiler_ebpf::unmount::OBJECT_WAIT => Unmounted::ObjectWait,
            _ => Unmounted::Park,
        };
        let blocker = match blocker {
            0 => None,
            object => self
                .blocker_class(object)
                .map(|(class, ownable)| ParkBlocker {
                    object,
                    class,
                    ownable,
                    owner: None,
                }),
        };
        let monitor = (monitor != 0).then_some(monitor);
        if let Some(monitor) = monitor {
            self.name_monitor(monitor, start_ns)?;
        }
        // An owner only means something for an ownable synchronizer (the kernel read the
        // field whatever the class) or a monitor.
        let owner_id = (owner_id != 0
            && (monitor.is_some() || blocker.as_ref().is_some_and(|b| b.ownable)))
        .then_some(owner_id);
        Ok(Unmount {
            how,
            blocker,
            owner_id,
            monitor,
        })
    }

    /// What the kernel counted of virtual threads' waits without sending them, when they are
    /// traced.
    pub(super) fn write_vthread_sums(&mut self, time_ns: u64) -> Result<()> {
        let Some(min_wait_ns) = self.vthread_min_ns else {
            return Ok(());
        };
        let sums = self.capture.vthread_wait_sums(time_ns, min_wait_ns);
        self.writer.write_event(&Event::VthreadWaitSums(sums))
    }

    /// The frames of the wait, walked from the kernel's copy of its chunks (None: no copy,
    /// or nothing in it walked).
    fn unmounted_stack(&mut self, raw: &VthreadWaitRecord) -> Result<Option<u32>> {
        let Some(jvm) = &mut self.jvm else {
            return Ok(None);
        };
        if raw.chunk_head.count == 0 {
            return Ok(None);
        }
        let frames = java_frames(jvm.hotspot.walk_unmounted(&raw.chunk_head, &raw.chunk));
        if frames.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.own_stack(frames)?))
    }

    /// The frames of a virtual thread unmounted now, read from its chunks on the heap.
    fn parked_stack(&mut self, oop: u64, id: u64) -> Result<Option<u32>> {
        let Some(jvm) = &mut self.jvm else {
            return Ok(None);
        };
        let frames = java_frames(jvm.hotspot.walk_parked(oop, id));
        if frames.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.own_stack(frames)?))
    }
}
