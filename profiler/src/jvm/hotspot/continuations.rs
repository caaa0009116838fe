//! Where HotSpot unmounts and mounts virtual threads: the `freeze` and `thaw` instances it
//! chose for its collector at startup, which it keeps in libjvm's own pointers
//! (`freeze_entry`, `thaw_entry`, and `freeze_preempt_entry` from JDK 24). Read from the
//! running JVM, not matched by name: each template is compiled once per collector, and only
//! one copy of each runs.

use std::sync::Arc;

use anyhow::{Context as _, Result, bail};

use crate::jvm::memory::Libjvm;
use crate::jvm::vmstructs::Target;

/// libjvm's pointers to the instances in use (local symbols of its `.symtab`).
pub(super) const SYMBOLS: [&str; 3] = [
    "_ZL12freeze_entry",
    "_ZL10thaw_entry",
    "_ZL20freeze_preempt_entry",
];

/// Where to put the uprobes: offsets in libjvm's file, which stays open.
#[derive(Clone, Debug)]
pub struct ContinuationProbes {
    pub file: Arc<std::fs::File>,
    pub freeze: u64,
    pub thaw: u64,
    /// JDK 24+: a virtual thread unmounted by the VM (a contended monitor, `Object.wait`).
    pub freeze_preempt: Option<u64>,
}

impl ContinuationProbes {
    pub(super) fn read(lib: &Libjvm, mem: &impl Target) -> Result<Self> {
        // Each pointer must point into libjvm's code: the file offset is what it is past
        // the load bias (the JVM's own memory says where, and it is not trusted further).
        let offset = |symbol: &str| -> Result<u64> {
            let at = mem.u64(lib.symbol(symbol)?)?;
            if at < lib.exec.0 || at >= lib.exec.1 {
                bail!("{symbol} points at {at:#x}, outside libjvm's code");
            }
            at.checked_sub(lib.bias)
                .with_context(|| format!("{symbol} points below libjvm's load address"))
        };
        let freeze = offset(SYMBOLS[0])?;
        let thaw = offset(SYMBOLS[1])?;
        let freeze_preempt = if lib.has(SYMBOLS[2]) {
            Some(offset(SYMBOLS[2])?)
        } else {
            None
        };
        Ok(Self {
            file: lib.file.clone(),
            freeze,
            thaw,
            freeze_preempt,
        })
    }
}
