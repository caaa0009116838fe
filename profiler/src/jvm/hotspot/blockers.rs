//! What a parked Java thread parks on, read from outside while it parks: its
//! `Thread.parkBlocker` (the virtual thread's own when one is mounted: `LockSupport.park`
//! sets it on the current thread), the blocker's class, and for an ownable synchronizer (the
//! sync of a `ReentrantLock`, a write lock) its owner (`exclusiveOwnerThread`): a platform
//! thread, or a virtual thread with the carrier it is mounted on, if any. The same fields a
//! thread dump reads ("parking to wait for <0x...> (a ...ReentrantLock$NonfairSync)").

use super::{Hotspot, JavaThread, small, source_type_name};
use crate::events::{BlockerOwner, ParkBlocker};
use crate::jvm::memory::Libjvm;
use crate::jvm::vmstructs::VmStructs;

/// Field offsets in libjvm's static ints (as `JAVA_FIELD_OFFSETS`), in every JDK since 21.
pub(super) const SYMBOLS: [&str; 4] = [
    "_ZN16java_lang_Thread20_park_blocker_offsetE",
    "_ZN54java_util_concurrent_locks_AbstractOwnableSynchronizer13_owner_offsetE",
    "_ZN16java_lang_Thread13_eetop_offsetE",
    "_ZN23java_lang_VirtualThread21_carrierThread_offsetE",
];

const OWNABLE: &str = "java/util/concurrent/locks/AbstractOwnableSynchronizer";
const VIRTUAL_THREAD: &str = "java/lang/VirtualThread";
/// A class hierarchy deeper than this is garbage (the JDK's own are under 10).
const MAX_SUPERS: usize = 32;

/// Where the fields are.
#[derive(Clone, Copy, Debug)]
pub(super) struct BlockerLayout {
    pub(super) park_blocker: u64,
    /// 0 until the JVM has loaded the class (computed then).
    ownable_owner: u64,
    eetop: u64,
    carrier_thread: u64,
    klass_super: u64,
}

impl BlockerLayout {
    /// `exclusiveOwnerThread`'s offset (0: its class was not loaded when this was read).
    pub(super) fn ownable_owner(&self) -> u64 {
        self.ownable_owner
    }

    pub(super) fn read(
        lib: &Libjvm,
        mem: &impl crate::jvm::vmstructs::Target,
        vm: &VmStructs,
    ) -> anyhow::Result<Self> {
        let offset = |name: &str| -> anyhow::Result<u64> {
            Ok(small(mem.u32(lib.symbol(name)?)?.into())?.into())
        };
        Ok(Self {
            park_blocker: offset(SYMBOLS[0])?,
            ownable_owner: offset(SYMBOLS[1])?,
            eetop: offset(SYMBOLS[2])?,
            carrier_thread: offset(SYMBOLS[3])?,
            klass_super: vm.offset("Klass", "_super")?,
        })
    }
}

impl Hotspot {
    /// What `thread` (or the virtual thread mounted on it) parks on now, if anything: read
    /// while it parks (it clears the field as it returns). `threads` are the JVM's threads
    /// last listed, to name an owner by its OS thread id.
    pub fn park_blocker(
        &mut self,
        thread: &JavaThread,
        threads: &[JavaThread],
    ) -> Option<ParkBlocker> {
        let layout = self.blockers?;
        let current = self
            .deref_handle(thread.addr.wrapping_add(self.layout.vthread.into()))
            .or_else(|| {
                self.deref_handle(thread.addr.wrapping_add(self.layout.thread_obj.into()))
            })?;
        let object = self.oop_field(current, layout.park_blocker)?;
        let klass = self.klass_of(object)?;
        let class = source_type_name(&self.klass_name(klass)?);
        let ownable = layout.ownable_owner != 0 && self.is_a(klass, OWNABLE, layout.klass_super);
        let owner = if ownable {
            self.oop_field(object, layout.ownable_owner)
                .and_then(|owner| self.owner(owner, threads, &layout))
        } else {
            None
        };
        Some(ParkBlocker {
            object,
            class,
            ownable,
            owner,
        })
    }

    /// The class of a park blocker the kernel read as its thread blocked (`object`, an oop),
    /// and whether it is an ownable synchronizer; read now, so only while the object lives
    /// where it was (a lock outlives its waits; a collection may move it).
    pub fn blocker_class(&mut self, object: u64) -> Option<(String, bool)> {
        let layout = self.blockers?;
        let klass = self.klass_of(object)?;
        let class = source_type_name(&self.klass_name(klass)?);
        let ownable = layout.ownable_owner != 0 && self.is_a(klass, OWNABLE, layout.klass_super);
        Some((class, ownable))
    }

    /// A `java.lang.Thread` oop as an owner: its Java id and name, and the OS thread that runs
    /// it (a virtual thread's carrier, if it is mounted).
    fn owner(
        &mut self,
        owner: u64,
        threads: &[JavaThread],
        layout: &BlockerLayout,
    ) -> Option<BlockerOwner> {
        let java_id = self
            .mem
            .u64(owner.wrapping_add(self.layout.java_tid.into()))
            .ok()?;
        let name = self.thread_name(owner).filter(|n| !n.is_empty());
        let klass = self.klass_of(owner)?;
        let is_virtual = self.is_a(klass, VIRTUAL_THREAD, layout.klass_super);
        // The OS thread: a platform thread's own (`eetop`, its JavaThread*), a virtual
        // thread's carrier's while it is mounted.
        let platform = if is_virtual {
            self.oop_field(owner, layout.carrier_thread)
        } else {
            Some(owner)
        };
        let tid = platform
            .and_then(|t| self.mem.u64(t.wrapping_add(layout.eetop)).ok())
            .filter(|&addr| addr != 0)
            .and_then(|addr| threads.iter().find(|t| t.addr == addr))
            .map(|t| t.tid);
        Some(BlockerOwner {
            java_id,
            name,
            virtual_thread: is_virtual,
            tid,
        })
    }

    /// Whether the class at `klass` is `name` or extends it.
    fn is_a(&mut self, klass: u64, name: &str, super_at: u64) -> bool {
        let mut k = klass;
        for _ in 0..MAX_SUPERS {
            if k == 0 {
                return false;
            }
            if self.klass_name(k).as_deref() == Some(name) {
                return true;
            }
            k = match self.mem.u64(k.wrapping_add(super_at)) {
                Ok(s) => s,
                Err(_) => return false,
            };
        }
        false
    }
}
