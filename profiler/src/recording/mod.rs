//! The `.pinrec` file: a header, then the event stream, then an end marker.
//!
//! Layout: the 8-byte magic `PINPREC\0`, a little-endian `u32` format version, then blocks of
//! [`BLOCK`] bytes holding fragments of postcard-encoded [`Record`]s (see `blocks`). Records
//! are written and flushed as capture goes, so a recording cut at any byte (a crash, a full
//! disk, `kill -9`) still holds every record before the cut. A damaged fragment is skipped and
//! reported; reading goes on at the next fragment, or at the next block when the damage hides
//! where that is, so recovering from damage costs time linear in the file's size. Formats 2
//! and 3 (records one after another, each `u32 length | u32 crc32 | payload`) are still read,
//! and so are the frames of formats 2 to 4, which had no source lines.
//!
//! A recording is untrusted input (it may come from anywhere): the reader streams it with
//! memory bounded by the largest record, and refuses anything but a regular file.

mod blocks;
mod legacy;
mod reader;
mod tee;
mod writer;

#[cfg(test)]
pub use reader::Damage;
pub use reader::{Outline, Recording, Records, stream};
pub use tee::{TeeReceiver, TeeSender, tee};
pub use writer::RecordingWriter;

use serde::{Deserialize, Serialize};

use crate::events::{Event, TargetInfo};

pub const MAGIC: &[u8; 8] = b"PINPREC\0";
pub const FORMAT_VERSION: u32 = 10;
/// The oldest format this pinprof still reads: formats add kinds of records (3 added
/// `MonitorClass` and `OpenWaits`), 4 changed the framing into blocks, 5 added source lines to
/// frames (older stacks are read by `legacy`), 6 added `ParkBlocker`, 7 `Queued`, 8 on-CPU
/// samples, the scheduler's histograms and the cgroup's throttling (`Sampling`, `OnCpu`,
/// `SchedStats`, `LateWakeup`, `CgroupCpu`), 9 the thread list's changes and the memory
/// budget (`JavaThreadsChanged`, `MemoryBudget`, the size cap's `StopReason`), 10 virtual
/// threads' waits off their carriers (`VthreadWait`, `VthreadWaitSums`).
pub const OLDEST_FORMAT_READ: u32 = 2;
/// The first format written in blocks.
pub const BLOCK_FORMAT: u32 = 4;
/// Records larger than this are taken for damage, not data.
pub const MAX_RECORD: usize = 16 << 20;
/// Size of a block: damage that hides where the next fragment starts costs the rest of its
/// block, no more.
pub const BLOCK: usize = 32 << 10;

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
    /// The user quit the live view.
    Quit,
    /// The recording reached its size cap (`bytes`); format 9.
    SizeCap {
        bytes: u64,
    },
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Duration => write!(f, "duration reached"),
            Self::Interrupted => write!(f, "interrupted"),
            Self::TargetExited => write!(f, "target exited"),
            Self::Error(e) => write!(f, "error: {e}"),
            Self::Quit => write!(f, "quit from the live view"),
            Self::SizeCap { bytes } => write!(
                f,
                "the recording reached its size cap ({}; --max-size)",
                crate::budget::mib(*bytes)
            ),
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
