//! Flamegraphs of where time was lost, rendered by inferno: blocked time by the blocked
//! thread's stack, pinned time, futex waits, long system calls, or lock wait time charged to
//! the stack that released the lock.

use std::io::Write;

use anyhow::{Context as _, Result};

use crate::{
    events::Frame,
    model::{Model, add},
};

/// The most microseconds a flamegraph adds up (some 36,000 years of thread time).
const MAX_TOTAL_US: u64 = 1 << 60;

/// What the flamegraph weighs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Blocked time of every thread, by the stack it blocked in.
    #[default]
    #[value(alias = "blocked")]
    OffCpu,
    /// Time carriers were pinned, by the pinned virtual thread's stack.
    Pinned,
    /// Long futex waits, by the waiter's stack.
    Futex,
    /// Long system calls, by the caller's stack.
    Syscall,
    /// Lock wait time charged to the stack that released the lock (the holder's).
    Locks,
}

impl Kind {
    fn title(self) -> &'static str {
        match self {
            Self::OffCpu => "Off-CPU time (blocked)",
            Self::Pinned => "Pinned carrier time",
            Self::Futex => "Futex wait time (by waiter)",
            Self::Syscall => "Long system call time",
            Self::Locks => "Lock wait time, charged to the releasing holder's stack",
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Put each thread's name at the root of its stacks.
    pub per_thread: bool,
    pub kind: Kind,
}

/// Folded stacks (`root;...;leaf weight`), outermost frame first, weights in microseconds.
pub fn folded(model: &Model, options: &Options) -> Vec<String> {
    let mut weights: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    let mut add = |tid: u32, frames: Vec<&Frame>, ns: u64| {
        let mut parts: Vec<String> = Vec::new();
        if options.per_thread {
            parts.push(model.thread_name(tid));
        }
        parts.extend(frames.iter().rev().map(|f| f.label().replace(';', ":")));
        if parts.is_empty() {
            parts.push("[no stack]".into());
        }
        let mut stack = parts.join(";");
        // A stack that ends in " <number>" would read as a second count (a differential
        // flamegraph): its last space becomes a no-break one.
        if let Some(i) = stack.rfind(' ')
            && stack[i + 1..]
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.')
        {
            stack.replace_range(i..=i, "\u{a0}");
        }
        add(weights.entry(stack).or_default(), ns / 1_000);
    };
    match options.kind {
        Kind::OffCpu => {
            for o in model.off_cpu.iter().filter(|o| o.state.is_blocked()) {
                add(o.tid, model.frames(o), model.lived_ns(o));
            }
        }
        Kind::Pinned => {
            for e in model.pinned_events() {
                let frames = model.frames_of(e.kernel_stack, e.user_stack, e.java_stack);
                add(e.carrier, frames, e.duration_ns());
            }
        }
        Kind::Futex => {
            for s in model.syscalls.iter().filter(|s| s.futex.is_some()) {
                add(s.tid, model.waiter_frames(s), s.duration_ns());
            }
        }
        Kind::Syscall => {
            for s in model.syscalls.iter().filter(|s| s.futex.is_none()) {
                add(s.tid, model.waiter_frames(s), s.duration_ns());
            }
        }
        Kind::Locks => {
            for s in model.lock_waits() {
                let holder = s
                    .futex
                    .as_ref()
                    .and_then(|f| f.waker.as_ref())
                    .map_or(s.tid, |w| w.tid);
                add(holder, model.holder_frames(s), s.duration_ns());
            }
        }
    }
    // The renderer adds the weights up in a u64: a recording whose times add up to more
    // (only a hostile one) is scaled down to fit, proportions kept.
    let sum: u128 = weights.values().map(|&w| u128::from(w)).sum();
    let scale = u64::try_from(sum.div_ceil(u128::from(MAX_TOTAL_US)))
        .unwrap_or(u64::MAX)
        .max(1);
    let mut lines: Vec<String> = weights
        .into_iter()
        .map(|(k, w)| (k, w / scale))
        .filter(|(_, w)| *w > 0)
        .map(|(k, w)| format!("{k} {w}"))
        .collect();
    lines.sort();
    lines
}

pub fn write_svg(model: &Model, options: &Options, out: impl Write) -> Result<()> {
    let lines = folded(model, options);
    let mut inferno = inferno::flamegraph::Options::default();
    inferno.title = format!(
        "{} in microseconds: pid {} ({})",
        options.kind.title(),
        model.target.pid,
        model.target.command
    );
    inferno.count_name = "us".into();
    inferno.subtitle = Some(crate::report::headline(model));
    if lines.is_empty() {
        // inferno refuses empty input; say so in the picture instead.
        return write_empty(&inferno.title, out);
    }
    inferno::flamegraph::from_lines(&mut inferno, lines.iter().map(String::as_str), out)
        .context("cannot render the flamegraph")
}

fn write_empty(title: &str, mut out: impl Write) -> Result<()> {
    write!(
        out,
        r#"<?xml version="1.0" standalone="no"?><svg version="1.1" width="1200" height="60" xmlns="http://www.w3.org/2000/svg"><text x="10" y="24">{}</text><text x="10" y="48">Nothing of this kind was recorded.</text></svg>"#,
        title.replace('&', "&amp;").replace('<', "&lt;")
    )?;
    Ok(())
}
