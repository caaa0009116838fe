//! Flamegraphs of where time was lost, rendered by inferno: blocked time by the blocked
//! thread's stack, pinned time, futex waits, long system calls, or lock wait time charged to
//! the stack that released the lock.

use std::{collections::HashMap, io::Write};

use anyhow::{Context as _, Result};

use crate::{
    analysis::{Analysis, WaitStacks, jdk},
    events::{Frame, FrameKind, StackId},
    model::{FastMap, add},
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
    /// Time on CPU, from the on-CPU samples, by the running thread's stack (a carrier's is
    /// its mounted virtual thread's).
    #[value(name = "oncpu", alias = "on-cpu")]
    OnCpu,
    /// Wall-clock time of every thread: on CPU (the samples) and off CPU (every wait, idle
    /// included), by stack; draw it `--per-thread` to see each thread's whole time.
    Wall,
    /// Virtual threads' waits off their carriers (`record --vthread-waits`), by the waiting
    /// virtual thread's stack; `--per-thread` roots each under its virtual thread.
    Vthread,
}

impl Kind {
    fn title(self) -> &'static str {
        match self {
            Self::OffCpu => "Blocked time of every thread, by the stack it blocked in",
            Self::Pinned => "Pinned carrier time, by the pinned virtual thread's stack",
            Self::Futex => "Long futex wait time, by the waiter's stack",
            Self::Syscall => "Long system call time, by the caller's stack",
            Self::Locks => "Lock wait time, charged to the stack that released the lock",
            Self::OnCpu => "Time on CPU, by the running stack (sampled)",
            Self::Wall => "Wall-clock time of every thread, on CPU (sampled) and off CPU",
            Self::Vthread => "Virtual threads' waits off their carriers, by the waiting stack",
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Put each thread's name at the root of its stacks.
    pub per_thread: bool,
    pub kind: Kind,
    /// The innermost frame at the root: what every wait ends in, then who called it.
    pub reverse: bool,
    /// Drawn top down (an icicle graph).
    pub inverted: bool,
    /// Draw the JVM's own threads' waits for work too (a JIT compiler idle on its queue,
    /// the Attach Listener), under a root frame of their own. Without it they are left out
    /// of blocked time, futex waits and system calls, and the subtitle says how much.
    pub jvm_threads: bool,
}

/// The root frame the JVM's own threads' waits for work are drawn under.
pub const JVM_THREADS_ROOT: &str = "[the JVM's own threads, waiting for work]";

/// What a flamegraph adds up: how many waits, how long in all, on how many threads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub events: u64,
    pub total_ns: u64,
    pub threads: usize,
    /// The JVM's own threads' waits for work among them (drawn apart), or left out.
    pub jvm_threads_ns: u64,
}

/// Runs of the same frame longer than this (deep recursion) are drawn as one frame, so one
/// very deep stack does not make the picture tall and empty.
const MAX_REPEATS: usize = 8;

/// The kernel frames a thread goes through to leave the CPU: drawn as one `schedule` frame.
fn is_scheduler(name: &str) -> bool {
    let name = name.trim_start_matches('_');
    name.starts_with("schedule")
        || name.starts_with("preempt_schedule")
        || name.starts_with("io_schedule")
        || matches!(
            name,
            "finish_task_switch" | "context_switch" | "do_task_dead"
        )
}

/// A frame's name for inferno's Java palette: the annotations `_[k]` (kernel), `_[j]`
/// (compiled Java or JIT code) and `_[i]` (inlined) pick the colour; interpreted Java frames
/// (dotted names) are green, C++ (`::`) yellow, other native code red.
fn label(frame: &Frame) -> String {
    let name = frame.label().replace(';', ":");
    match (frame.kind, frame.module.as_deref()) {
        (FrameKind::Kernel, _) => format!("{name}_[k]"),
        (FrameKind::Jit, _) | (FrameKind::Java, Some("compiled")) => format!("{name}_[j]"),
        (FrameKind::Java, Some("inlined")) => format!("{name}_[i]"),
        _ => name,
    }
}

/// A stack's frames, outermost first, as the flamegraph draws them.
fn parts(frames: &[&Frame]) -> Vec<String> {
    // The innermost kernel frames that only switch the CPU away become one frame.
    let scheduler = frames
        .iter()
        .take_while(|f| f.kind == FrameKind::Kernel && f.name.as_deref().is_some_and(is_scheduler))
        .count();
    let mut parts: Vec<String> = Vec::with_capacity(frames.len());
    for frame in frames[scheduler..].iter().rev() {
        parts.push(label(frame));
    }
    if scheduler > 0 {
        parts.push("schedule_[k]".into());
    }
    fold_recursion(parts)
}

/// Replaces each run of more than `MAX_REPEATS` identical frames by its first `MAX_REPEATS`
/// and one frame that says how many more there were.
fn fold_recursion(parts: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(parts.len());
    let mut i = 0;
    while i < parts.len() {
        let run = parts[i..].iter().take_while(|p| **p == parts[i]).count();
        out.extend(parts[i..i + run.min(MAX_REPEATS)].iter().cloned());
        if run > MAX_REPEATS {
            out.push(format!(
                "[{} more calls of the same method]",
                run - MAX_REPEATS
            ));
        }
        i += run;
    }
    out
}

/// Folded stacks (`root;...;leaf weight`), outermost frame first, weights in microseconds,
/// and what they add up to.
pub fn folded(analysis: &Analysis, options: &Options) -> (Vec<String>, Summary) {
    let model = analysis.model();
    let mut summary = Summary::default();
    let mut threads = std::collections::HashSet::new();
    // Events are summed by their stacks' ids first (millions of waits, thousands of
    // stacks), then each stack is named once. Each event adds its own whole microseconds,
    // as a line per event would.
    // (thread when drawn per thread, the JVM's own wait for work, stacks)
    type Ids = (
        Option<u32>,
        bool,
        Option<StackId>,
        Option<StackId>,
        Option<StackId>,
    );
    let mut by_ids: FastMap<Ids, u64> = FastMap::default();
    let mut by_frames: Vec<(u32, bool, Vec<&Frame>, u64)> = Vec::new();
    // Virtual threads' waits: (virtual thread, stack, microseconds).
    let mut by_vthread: Vec<(u64, Option<StackId>, u64)> = Vec::new();
    let mut vthreads = std::collections::HashSet::new();
    // Whether a wait is the JVM's own for work (known only when a kind asks), and whether
    // it is drawn.
    let theirs =
        |tid: u32, frames: &[&Frame]| jdk::waits_for_work(analysis.jdk_own_threads(), tid, frames);
    let mut count = |tid: u32, jvm: bool, ns: u64| {
        if jvm {
            add(&mut summary.jvm_threads_ns, ns);
            if !options.jvm_threads {
                return false;
            }
        }
        summary.events += 1;
        add(&mut summary.total_ns, ns);
        threads.insert(tid);
        true
    };
    let mut add_wait = |tid: u32, ids: WaitStacks, ns| {
        let jvm = analysis.waits_for_work(tid, ids);
        if count(tid, jvm, ns) {
            let thread = options.per_thread.then_some(tid);
            add(
                by_ids
                    .entry((thread, jvm, ids.0, ids.1, ids.2))
                    .or_default(),
                ns / 1_000,
            );
        }
    };
    match options.kind {
        Kind::OffCpu => {
            // The report's blocked time: an idle carrier's park is waiting for work.
            for (o, ns) in analysis.blocked_intervals() {
                add_wait(
                    o.tid,
                    (o.kernel_stack(), o.user_stack(), model.java_stack(o)),
                    ns,
                );
            }
        }
        Kind::Pinned => {
            for e in analysis.pinned_events() {
                count(e.carrier, false, e.duration_ns());
                let thread = options.per_thread.then_some(e.carrier);
                let ids = (thread, false, e.kernel_stack, e.user_stack, e.java_stack);
                add(by_ids.entry(ids).or_default(), e.duration_ns() / 1_000);
            }
        }
        // (Long system calls and lock waits: few, one by one.)
        Kind::Futex | Kind::Syscall => {
            let futex = options.kind == Kind::Futex;
            for s in model.syscalls.iter().filter(|s| s.futex.is_some() == futex) {
                let frames = model.waiter_frames(s);
                let jvm = theirs(s.tid, &frames);
                if count(s.tid, jvm, s.duration_ns()) {
                    by_frames.push((s.tid, jvm, frames, s.duration_ns() / 1_000));
                }
            }
        }
        Kind::OnCpu | Kind::Wall => {
            // Every thread's whole time: the JVM's own included, as they are.
            let each = crate::analysis::oncpu::sample_ns(model);
            let mut add_ids = |tid: u32, (k, u, j), ns: u64| {
                count(tid, false, ns);
                let thread = options.per_thread.then_some(tid);
                add(
                    by_ids.entry((thread, false, k, u, j)).or_default(),
                    ns / 1_000,
                );
            };
            for s in &model.samples {
                add_ids(s.tid, crate::analysis::oncpu::stacks_of(model, s), each);
            }
            if options.kind == Kind::Wall {
                for o in &model.off_cpu {
                    let ns = model.lived_ns(o);
                    if ns > 0 {
                        add_ids(
                            o.tid,
                            (o.kernel_stack(), o.user_stack(), model.java_stack(o)),
                            ns,
                        );
                    }
                }
            }
        }
        Kind::Vthread => {
            // (Waits under way at the end are not drawn: the report counts them apart.)
            for w in model.vthread_waits.iter().filter(|w| !w.unfinished) {
                let ns = w.duration_ns();
                summary.events += 1;
                add(&mut summary.total_ns, ns);
                vthreads.insert(w.vthread_id);
                by_vthread.push((w.vthread_id, w.stack, ns / 1_000));
            }
        }
        Kind::Locks => {
            for s in analysis.lock_waits() {
                let holder = s.releaser();
                count(holder, false, s.duration_ns());
                by_frames.push((
                    holder,
                    false,
                    model.holder_frames(s),
                    s.duration_ns() / 1_000,
                ));
            }
        }
    }
    let mut weights: HashMap<String, u64> = HashMap::new();
    // The root a line is drawn under, per thread: an OS thread's name, or a virtual thread.
    enum Root {
        Os(u32),
        Virtual(u64),
    }
    let mut line = |root: Root, jvm: bool, frames: Vec<&Frame>, us: u64| {
        let mut parts: Vec<String> = Vec::new();
        if jvm {
            parts.push(JVM_THREADS_ROOT.into());
        }
        if options.per_thread {
            parts.push(match root {
                Root::Os(tid) => model.thread_name(tid).replace(';', ":"),
                Root::Virtual(id) => crate::analysis::unmounted::vthread_label(id),
            });
        }
        parts.extend(self::parts(&frames));
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
        add(weights.entry(stack).or_default(), us);
    };
    for ((thread, jvm, kernel, user, java), us) in by_ids {
        line(
            Root::Os(thread.unwrap_or(0)),
            jvm,
            model.frames_of(kernel, user, java),
            us,
        );
    }
    for (tid, jvm, frames, us) in by_frames {
        line(Root::Os(tid), jvm, frames, us);
    }
    for (id, stack, us) in by_vthread {
        line(
            Root::Virtual(id),
            false,
            model.frames_of(None, None, stack),
            us,
        );
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
    summary.threads = threads.len() + vthreads.len();
    (lines, summary)
}

pub fn write_svg(analysis: &Analysis, options: &Options, out: impl Write) -> Result<()> {
    let model = analysis.model();
    let (lines, summary) = folded(analysis, options);
    let mut inferno = inferno::flamegraph::Options::default();
    inferno.title = format!(
        "{}: pid {} ({})",
        options.kind.title(),
        model.target.pid,
        model.target.command
    );
    inferno.count_name = "us".into();
    inferno.subtitle = Some(subtitle(analysis, options, summary));
    inferno.colors =
        inferno::flamegraph::Palette::Multi(inferno::flamegraph::color::MultiPalette::Java);
    inferno.reverse_stack_order = options.reverse;
    if options.inverted {
        inferno.direction = inferno::flamegraph::Direction::Inverted;
    }
    if lines.is_empty() {
        // inferno refuses empty input; say so in the picture instead.
        return write_empty(&inferno.title, out);
    }
    inferno::flamegraph::from_lines(&mut inferno, lines.iter().map(String::as_str), out)
        .context("cannot render the flamegraph")
}

/// What the picture adds up, in the words of its kind, and the colours' key.
fn subtitle(analysis: &Analysis, options: &Options, s: Summary) -> String {
    let kind = options.kind;
    let what = match kind {
        Kind::OffCpu => "blocked intervals",
        Kind::Pinned => "pinned waits",
        Kind::Futex => "futex waits",
        Kind::Syscall => "long system calls",
        Kind::Locks => "lock waits",
        Kind::OnCpu => "on-CPU samples",
        Kind::Wall => "samples and waits",
        Kind::Vthread => "waits off their carriers",
    };
    let whose = match kind {
        Kind::Pinned => "carriers",
        Kind::Locks => "releasing threads",
        Kind::Vthread => "virtual threads",
        _ => "threads",
    };
    let jvm = match (s.jvm_threads_ns, options.jvm_threads) {
        (0, _) => String::new(),
        (ns, false) => format!(
            "; the JVM's own threads' waits for work ({}) left out: --jvm-threads draws them",
            crate::report::secs(ns)
        ),
        (ns, true) => format!(
            "; the JVM's own threads' waits for work ({}) under {JVM_THREADS_ROOT}",
            crate::report::secs(ns)
        ),
    };
    format!(
        "{} {what}, {} on {} {whose}, in a {} window{jvm}; width: time in microseconds; green Java, aqua inlined, yellow C++, red native, orange kernel",
        s.events,
        crate::report::secs(s.total_ns),
        s.threads,
        crate::report::secs(analysis.duration_ns()),
    )
}

fn write_empty(title: &str, mut out: impl Write) -> Result<()> {
    write!(
        out,
        r#"<?xml version="1.0" standalone="no"?><svg version="1.1" width="1200" height="60" xmlns="http://www.w3.org/2000/svg"><text x="10" y="24">{}</text><text x="10" y="48">Nothing of this kind was recorded.</text></svg>"#,
        title.replace('&', "&amp;").replace('<', "&lt;")
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: FrameKind, name: &str, module: Option<&str>) -> Frame {
        Frame {
            kind,
            addr: 0,
            name: Some(name.into()),
            module: module.map(Into::into),
            holds_monitor: false,
            line: None,
        }
    }

    #[test]
    fn scheduler_frames_become_one_and_kinds_are_annotated() {
        let frames = [
            frame(FrameKind::Kernel, "__schedule", None),
            frame(FrameKind::Kernel, "schedule", None),
            frame(FrameKind::Kernel, "futex_wait_queue", None),
            frame(FrameKind::Native, "ObjectMonitor::enter(JavaThread*)", None),
            frame(FrameKind::Java, "a.B.inner", Some("inlined")),
            frame(FrameKind::Java, "a.B.outer", Some("compiled")),
            frame(FrameKind::Java, "a.B.run", Some("interpreted")),
        ];
        let refs: Vec<&Frame> = frames.iter().collect();
        assert_eq!(
            parts(&refs),
            [
                "a.B.run",
                "a.B.outer_[j]",
                "a.B.inner_[i]",
                "ObjectMonitor::enter(JavaThread*)",
                "futex_wait_queue_[k]",
                "schedule_[k]",
            ]
        );
    }

    #[test]
    fn deep_recursion_is_folded() {
        let mut parts = vec!["main".to_string()];
        parts.extend(std::iter::repeat_n("f".to_string(), 100));
        parts.push("leaf".into());
        let folded = fold_recursion(parts);
        assert_eq!(folded.len(), 1 + MAX_REPEATS + 1 + 1);
        assert_eq!(
            folded[MAX_REPEATS + 1],
            "[92 more calls of the same method]"
        );
        assert_eq!(folded.last().unwrap(), "leaf");
    }
}
