//! The `.pinrec` file: a header, then the event stream, then an end marker.
//!
//! Layout: the 8-byte magic `PINPREC\0`, a little-endian `u32` format version, then frames of
//! `u32 length | u32 crc32(payload) | payload`, each payload one postcard-encoded [`Record`].
//! Frames are written and flushed as capture goes, so a recording cut at any byte (a crash, a
//! full disk, `kill -9`) still holds every frame before the cut; a damaged frame is skipped and
//! reported, and reading resumes at the next intact one.

mod reader;
mod writer;

#[cfg(test)]
pub use reader::Damage;
pub use reader::Recording;
pub use writer::RecordingWriter;

use serde::{Deserialize, Serialize};

use crate::events::{Event, TargetInfo};

pub const MAGIC: &[u8; 8] = b"PINPREC\0";
pub const FORMAT_VERSION: u32 = 3;
/// The oldest format this pinprof still reads: formats only ever add kinds of records
/// (3 added `MonitorClass` and `OpenWaits`).
pub const OLDEST_FORMAT_READ: u32 = 2;
/// Frames larger than this are taken for damage, not data.
pub const MAX_FRAME: usize = 16 << 20;

/// What a recording knows before its first event.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Header {
    pub pinprof_version: String,
    pub target: TargetInfo,
    /// `CLOCK_MONOTONIC` ns at the start of the window (the kernel's event clock).
    pub start_mono_ns: u64,
    /// Wall clock at the same instant, ns since the Unix epoch.
    pub start_unix_ns: u64,
    pub hostname: String,
    pub kernel_release: String,
    /// Off-CPU intervals shorter than this were summed in the kernel, not recorded one by one.
    pub min_off_cpu_ns: u64,
    /// System calls shorter than this were summed; None: system calls were not traced.
    pub min_syscall_ns: Option<u64>,
}

/// Why a recording stopped.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum StopReason {
    Duration,
    Interrupted,
    TargetExited,
    Error(String),
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Duration => write!(f, "duration reached"),
            Self::Interrupted => write!(f, "interrupted"),
            Self::TargetExited => write!(f, "target exited"),
            Self::Error(e) => write!(f, "error: {e}"),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct End {
    pub end_mono_ns: u64,
    pub reason: StopReason,
}

/// One frame's payload.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum Record {
    Header(Header),
    Event(Event),
    End(End),
}

#[cfg(test)]
mod tests;
