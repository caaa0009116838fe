//! An off-CPU interval as the model keeps it: the recording's `OffCpu` event packed into 80
//! bytes instead of 152, since a recording holds millions of them and a report keeps them all.
//! Absent ids are a reserved value instead of an `Option`'s tag (a monitor address of 0, which
//! pinprof never records, reads as none), and the Java frame anchor, which the model only asks
//! "was there a Java frame", is that one bit.

use std::num::NonZeroU64;

use crate::events::{JavaBlock, JavaThreadState, OffCpu, OffCpuState, StackId};

/// No stack, no waker: ids are never this (a recording that says so is read as "none").
const NONE: u32 = u32::MAX;

#[derive(Clone, Debug, PartialEq)]
pub struct Wait {
    pub tid: u32,
    pub cpu: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub state: OffCpuState,
    kernel_stack: u32,
    user_stack: u32,
    waker_tid: u32,
    java: Option<PackedJava>,
}

/// `JavaBlock`, packed: monitors (never 0) as `NonZeroU64`, the state's tag apart from the
/// value of `Other`. A mounted virtual thread's id may be 0 (the kernel could not read it,
/// as with ZGC's colored pointers), so whether one was mounted is a flag of its own.
#[derive(Clone, Copy, Debug, PartialEq)]
struct PackedJava {
    vthread: u64,
    pending_monitor: Option<NonZeroU64>,
    waiting_monitor: Option<NonZeroU64>,
    held_monitors: u32,
    pin_count: u32,
    other_state: u32,
    state: StateTag,
    at_safepoint: bool,
    java_frames: bool,
    mounted: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum StateTag {
    InNative,
    InVm,
    InJava,
    Blocked,
    Other,
}

/// What the thread was doing in the JVM as it blocked, as `Wait::java` gives it: the
/// kernel's `events::JavaBlock` without its frame anchor, of which the store keeps only
/// whether it was set (`java_frames`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JavaAt {
    pub state: JavaThreadState,
    /// `Thread.threadId()` of the virtual thread mounted on this carrier, if one was.
    pub vthread: Option<u64>,
    /// `ObjectMonitor*` the thread was blocked entering (contended `synchronized`).
    pub pending_monitor: Option<u64>,
    /// `ObjectMonitor*` the thread was waiting on (`Object.wait`).
    pub waiting_monitor: Option<u64>,
    pub held_monitors: u32,
    pub pin_count: u32,
    pub at_safepoint: bool,
    /// It had a Java frame on its stack (a `JavaFrameAnchor` was set).
    pub java_frames: bool,
}

fn id(value: Option<u32>) -> u32 {
    value.unwrap_or(NONE)
}

fn some(value: u32) -> Option<u32> {
    (value != NONE).then_some(value)
}

impl From<&JavaBlock> for PackedJava {
    fn from(j: &JavaBlock) -> Self {
        let (state, other_state) = match j.state {
            JavaThreadState::InNative => (StateTag::InNative, 0),
            JavaThreadState::InVm => (StateTag::InVm, 0),
            JavaThreadState::InJava => (StateTag::InJava, 0),
            JavaThreadState::Blocked => (StateTag::Blocked, 0),
            JavaThreadState::Other(v) => (StateTag::Other, v),
        };
        let nz = |v: Option<u64>| v.and_then(NonZeroU64::new);
        Self {
            vthread: j.vthread.unwrap_or(0),
            pending_monitor: nz(j.pending_monitor),
            waiting_monitor: nz(j.waiting_monitor),
            held_monitors: j.held_monitors,
            pin_count: j.pin_count,
            other_state,
            state,
            at_safepoint: j.at_safepoint,
            java_frames: j.anchor[0] != 0,
            mounted: j.vthread.is_some(),
        }
    }
}

impl From<&OffCpu> for Wait {
    fn from(o: &OffCpu) -> Self {
        Self {
            tid: o.tid,
            cpu: o.cpu,
            start_ns: o.start_ns,
            end_ns: o.end_ns,
            state: o.state,
            kernel_stack: id(o.kernel_stack),
            user_stack: id(o.user_stack),
            waker_tid: id(o.waker_tid),
            java: o.java.as_ref().map(PackedJava::from),
        }
    }
}

impl From<OffCpu> for Wait {
    fn from(o: OffCpu) -> Self {
        Self::from(&o)
    }
}

impl Wait {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    pub fn kernel_stack(&self) -> Option<StackId> {
        some(self.kernel_stack)
    }

    pub fn user_stack(&self) -> Option<StackId> {
        some(self.user_stack)
    }

    /// The thread whose `sched_wakeup` made this one runnable, if one did.
    pub fn waker_tid(&self) -> Option<u32> {
        some(self.waker_tid)
    }

    /// Whether the JVM's state of the thread was read as it blocked.
    pub fn has_java(&self) -> bool {
        self.java.is_some()
    }

    /// What the thread was doing in the JVM as it blocked (Java threads of a HotSpot target).
    pub fn java(&self) -> Option<JavaAt> {
        let j = self.java?;
        let state = match j.state {
            StateTag::InNative => JavaThreadState::InNative,
            StateTag::InVm => JavaThreadState::InVm,
            StateTag::InJava => JavaThreadState::InJava,
            StateTag::Blocked => JavaThreadState::Blocked,
            StateTag::Other => JavaThreadState::Other(j.other_state),
        };
        Some(JavaAt {
            state,
            vthread: j.mounted.then_some(j.vthread),
            pending_monitor: j.pending_monitor.map(NonZeroU64::get),
            waiting_monitor: j.waiting_monitor.map(NonZeroU64::get),
            held_monitors: j.held_monitors,
            pin_count: j.pin_count,
            at_safepoint: j.at_safepoint,
            java_frames: j.java_frames,
        })
    }

    /// The monitor it was entering, else the one it was waiting on.
    pub fn monitor(&self) -> Option<u64> {
        let j = self.java.as_ref()?;
        j.pending_monitor.or(j.waiting_monitor).map(NonZeroU64::get)
    }

    /// A virtual thread was mounted on it.
    pub fn mounted(&self) -> bool {
        self.java.is_some_and(|j| j.mounted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(java: Option<JavaBlock>) -> OffCpu {
        OffCpu {
            tid: 7,
            start_ns: 10,
            end_ns: 30,
            state: OffCpuState::Sleeping,
            kernel_stack: Some(3),
            user_stack: None,
            waker_tid: Some(0),
            cpu: 1,
            java,
        }
    }

    #[test]
    fn a_wait_is_packed_small() {
        assert!(std::mem::size_of::<Wait>() <= 80);
    }

    #[test]
    fn what_is_packed_reads_back_as_it_was() {
        for state in [
            JavaThreadState::InNative,
            JavaThreadState::InVm,
            JavaThreadState::InJava,
            JavaThreadState::Blocked,
            JavaThreadState::Other(77),
        ] {
            let block = JavaBlock {
                state,
                vthread: Some(41),
                pending_monitor: None,
                waiting_monitor: Some(0x7f00_1000),
                held_monitors: 2,
                pin_count: 1,
                at_safepoint: true,
                anchor: [0x7ff0, 0, 0],
            };
            let w = Wait::from(event(Some(block.clone())));
            assert_eq!((w.tid, w.cpu, w.start_ns, w.end_ns), (7, 1, 10, 30));
            assert_eq!(w.state, OffCpuState::Sleeping);
            assert_eq!(w.kernel_stack(), Some(3));
            assert_eq!(w.user_stack(), None);
            assert_eq!(w.waker_tid(), Some(0));
            assert_eq!(w.duration_ns(), 20);
            assert_eq!(w.monitor(), Some(0x7f00_1000));
            assert!(w.mounted());
            let j = w.java().unwrap();
            assert_eq!(
                (j.state, j.vthread, j.pending_monitor, j.waiting_monitor),
                (state, Some(41), None, Some(0x7f00_1000))
            );
            assert_eq!((j.held_monitors, j.pin_count), (2, 1));
            assert!(j.at_safepoint && j.java_frames);
        }
        // Mounted, its id unread: still mounted.
        let unread = JavaBlock {
            state: JavaThreadState::Blocked,
            vthread: Some(0),
            pending_monitor: None,
            waiting_monitor: None,
            held_monitors: 1,
            pin_count: 0,
            at_safepoint: false,
            anchor: [0; 3],
        };
        let w = Wait::from(event(Some(unread)));
        assert!(w.mounted());
        assert_eq!(w.java().unwrap().vthread, Some(0));
        assert!(!w.java().unwrap().java_frames);
        let bare = Wait::from(event(None));
        assert!(!bare.has_java() && bare.java().is_none() && !bare.mounted());
    }
}
