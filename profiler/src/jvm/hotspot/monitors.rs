//! Who owns a `synchronized` monitor, read from outside while a thread waits to enter it.
//! `ObjectMonitor::_owner` is, by JDK and locking mode:
//! - a `JavaThread*` (JDK 21), or the owner's `BasicLock` (an address in its stack: a monitor
//!   inflated while stack-locked, legacy locking, the JDK 21 default);
//! - the owner's thread id (JDK 24+: `int64_t`, a virtual thread's too);
//! - `ANONYMOUS_OWNER`: inflated while lightweight-locked (the JDK 24+ default) by a thread
//!   that has not claimed it since; the owner is the thread whose lock stack holds the object.

use super::{Hotspot, JavaThread, small};
use crate::events::BlockerOwner;
use crate::jvm::vmstructs::VmStructs;

/// Entries of a thread's lock stack read at most (HotSpot keeps 8).
const MAX_LOCK_STACK: u64 = 16;

#[derive(Clone, Copy, Debug)]
pub(super) struct MonitorLayout {
    owner: u64,
    /// `_owner` holds a thread id (JDK 24+), not a pointer.
    owner_is_id: bool,
    anonymous: u64,
    stack_base: u64,
    stack_size: u64,
    /// In a `JavaThread`: its lock stack's top (a byte offset from the thread) and first
    /// entry, and how many entries it has room for.
    lock_stack: Option<(u64, u64, u64)>,
}

impl MonitorLayout {
    /// `_owner`'s offset when it holds the owner's thread id (JDK 24+), for the kernel.
    pub(super) fn owner_id_offset(&self) -> Option<u64> {
        self.owner_is_id.then_some(self.owner)
    }

    pub(super) fn read(vm: &VmStructs, major: Option<u32>) -> anyhow::Result<Self> {
        let thread = |name: &str| {
            vm.offset("JavaThread", name)
                .or_else(|_| vm.offset("Thread", name))
        };
        let lock_stack = (|| -> anyhow::Result<(u64, u64, u64)> {
            // (Each offset checked small: the table is the target's.)
            let small = |o: u64| -> anyhow::Result<u64> { Ok(u64::from(small(o)?)) };
            let at = small(vm.offset("JavaThread", "_lock_stack")?)?;
            let top = at + small(vm.offset("LockStack", "_top")?)?;
            let base = at + small(vm.offset("LockStack", "_base[0]")?)?;
            let room = match vm.int_constant("LockStack::_end_offset") {
                Ok(end) => (u64::try_from(end)?.saturating_sub(base) / 8).min(MAX_LOCK_STACK),
                Err(_) => 8,
            };
            Ok((top, base, room))
        })()
        .ok();
        Ok(Self {
            owner: vm.offset("ObjectMonitor", "_owner")?,
            owner_is_id: vm
                .field("ObjectMonitor", "_owner")
                .is_some_and(|f| f.type_string.starts_with("int64"))
                || major.is_some_and(|m| m >= 24),
            anonymous: vm
                .int_constant("ObjectMonitor::ANONYMOUS_OWNER")
                .ok()
                .and_then(|v| u64::try_from(v).ok())
                .unwrap_or(1),
            stack_base: thread("_stack_base")?,
            stack_size: thread("_stack_size")?,
            lock_stack,
        })
    }
}

impl Hotspot {
    /// The owner of the monitor at `monitor` (an `ObjectMonitor*`) now, among `threads`
    /// (the JVM's, last listed): None when it has none or it cannot be told.
    pub fn monitor_owner(&mut self, monitor: u64, threads: &[JavaThread]) -> Option<BlockerOwner> {
        let layout = self.monitor_layout?;
        let word = self.mem.u64(monitor.checked_add(layout.owner)?).ok()?;

        if word == 0 || word == 2 && layout.owner_is_id {
            return None; // unowned, or being deflated
        }
        if word == layout.anonymous {
            let object = self.monitor_oop(monitor)?;
            let owner = threads
                .iter()
                .find(|t| self.lock_stack_holds(t, object, &layout))?;
            return self.platform_owner(owner);
        }
        if layout.owner_is_id {
            return self.owner_by_id(word, threads);
        }
        if let Some(t) = threads.iter().find(|t| t.addr == word) {
            return self.platform_owner(t);
        }
        // A BasicLock in the owner's stack.
        let owner = threads.iter().find(|t| {
            let base = self
                .mem
                .u64(t.addr.wrapping_add(layout.stack_base))
                .unwrap_or(0);
            let size = self
                .mem
                .u64(t.addr.wrapping_add(layout.stack_size))
                .unwrap_or(0);
            base > word && base.saturating_sub(size) <= word
        })?;
        self.platform_owner(owner)
    }

    fn lock_stack_holds(&self, t: &JavaThread, object: u64, layout: &MonitorLayout) -> bool {
        let Some((top_at, base, room)) = layout.lock_stack else {
            return false;
        };
        let Ok(top) = self.mem.u32(t.addr.wrapping_add(top_at)) else {
            return false;
        };
        let n = (u64::from(top).saturating_sub(base) / 8).min(room);
        (0..n).any(|i| self.mem.u64(t.addr.wrapping_add(base + 8 * i)).ok() == Some(object))
    }

    /// A platform thread as an owner.
    fn platform_owner(&self, t: &JavaThread) -> Option<BlockerOwner> {
        let own = self.deref_handle(t.addr.wrapping_add(self.layout.thread_obj.into()))?;
        let java_id = self
            .mem
            .u64(own.wrapping_add(self.layout.java_tid.into()))
            .ok()?;
        Some(BlockerOwner {
            java_id,
            name: t.name.clone(),
            virtual_thread: false,
            tid: Some(t.tid),
        })
    }

    /// The thread whose `Thread.threadId()` is `id`: a platform thread, or a virtual thread
    /// (mounted on a carrier, or not).
    fn owner_by_id(&self, id: u64, threads: &[JavaThread]) -> Option<BlockerOwner> {
        for t in threads {
            let own = self.deref_handle(t.addr.wrapping_add(self.layout.thread_obj.into()));
            let own_id = own.and_then(|o| {
                self.mem
                    .u64(o.wrapping_add(self.layout.java_tid.into()))
                    .ok()
            });
            if own_id == Some(id) {
                return self.platform_owner(t);
            }
            if t.carrier && self.mounted_vthread(t) == Some(id) {
                return Some(BlockerOwner {
                    java_id: id,
                    name: None,
                    virtual_thread: true,
                    tid: Some(t.tid),
                });
            }
        }
        // Not a platform thread's, not mounted: a virtual thread off its carrier.
        Some(BlockerOwner {
            java_id: id,
            name: None,
            virtual_thread: true,
            tid: None,
        })
    }
}
