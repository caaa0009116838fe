//! pinprof: finds what blocks and pins the carrier threads of a live JVM, from the kernel.
//!
//! Data flows one way: `capture` (kernel programs) -> `events` -> `recording` (file) ->
//! `model` (the store) -> `analysis` (the figures) -> views (`report`, `flamegraph`, `tui`).
//! Live and replay share everything after events.
//! The `pinprof` binary parses its arguments and calls into these modules.

/// `eprintln!` that does not panic when standard error has gone (a closed terminal): nothing
/// pinprof says there is worth losing a recording over. What it says may hold the target's
/// text (names, paths, the JVM's replies): it reaches the terminal escaped and cut
/// (`text::for_terminal`).
#[macro_export]
macro_rules! say {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let said = format!($($arg)*);
        let shown = $crate::text::for_terminal(&said, $crate::text::MAX_MESSAGE);
        let _ = writeln!(std::io::stderr(), "{shown}");
    }};
}

pub mod analysis;
pub mod budget;
pub mod capabilities;
pub mod capture;
pub mod cgroup;
pub mod check;
pub mod events;
pub mod export;
pub mod fdname;
pub mod flamegraph;
pub mod jvm;
pub mod lines;
pub mod mappings;
pub mod model;
pub mod namespaces;
pub mod parser_guard;
pub mod perfmap;
pub mod process;
pub mod procmaps;
pub mod push;
pub mod record;
pub mod recording;
pub mod report;
pub mod safe_fs;
pub mod signals;
pub mod symbolize;
pub mod target;
pub mod text;
pub mod tui;
pub mod units;
pub mod unwind;
pub mod worker;
