//! HotSpot, read from outside: its self-description (VMStructs), its Java threads, which of them
//! are virtual-thread carriers and what is mounted on them.

pub mod attach;
pub mod hotspot;
pub mod memory;
pub mod vmstructs;
pub mod walk;
