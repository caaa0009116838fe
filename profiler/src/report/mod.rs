//! `pinprof report`: the model said in words (text) or as the fixed JSON contract.

mod json;
mod stack;
mod text;

pub use json::to_json;
pub use text::{
    container_label, headline, owner_label, runtime_label, scheduler_label, secs, throttling_label,
    to_text,
};

/// How much of each list the reports show.
#[derive(Clone, Debug)]
pub struct Options {
    /// Stacks listed.
    pub top: usize,
    /// Lines shown per stack in the text report, the culprit frames aside (JSON always has
    /// every frame).
    pub depth: usize,
    /// Every frame of every stack in the text report, none folded or cut.
    pub full: bool,
    /// A lock whose release ended a wait at least this long is long-held.
    pub long_held_ns: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            top: 10,
            depth: 16,
            full: false,
            long_held_ns: 10_000_000,
        }
    }
}
