//! What the model takes in, checked: a recording is untrusted input (a user may be handed a
//! hostile file), so no value in it may size, index or loop anything before it is checked.
//!
//! The rule, applied here once for every event (from a recording, or live):
//! - **Times** must lie in the window: from the header's start to at most [`MAX_SPAN_NS`]
//!   after it, and an interval must not end before it starts. An event whose times do not is
//!   left out, counted, and said in `Model::warnings`.
//! - **The end** of the window (the end marker) must lie in that same range; otherwise it is
//!   ignored, said, and the end is taken from the events let in.
//! - **Counts and durations** of snapshots are cut to [`MAX_COUNT`], stacks to
//!   [`MAX_STACK_FRAMES`] frames, texts to a few KiB with control characters replaced (they
//!   reach terminals); each cut is counted and said.
//!
//! After this, views rely on: every time within `[start, start + MAX_SPAN_NS]` (so a time
//! minus the start never underflows and the start plus a span never overflows), spans of at
//! most `MAX_SPAN_NS`, bounded stacks and texts. Sums over many events still saturate.

use super::Model;
use crate::{
    events::{Event, Frame, TargetInfo},
    recording::Header,
};

/// The longest window a recording may span (a year and a day): a live view that ran longer
/// is not a thing; a time further from the start is damage.
pub const MAX_SPAN_NS: u64 = 366 * 86_400 * 1_000_000_000;

/// The largest count or duration a snapshot may carry (about 36 years in ns): a few of them
/// can be added without overflowing.
pub const MAX_COUNT: u64 = 1 << 60;

/// Frames kept of one stack (kernel and user stacks have at most 127, Java walks 128
/// physical frames, each with a few inlined ones).
pub const MAX_STACK_FRAMES: usize = 1024;

/// Bytes kept of a frame's name or module.
pub const MAX_FRAME_TEXT: usize = 1024;

/// Bytes kept of any other text (names, paths, warnings).
pub const MAX_TEXT: usize = 4096;

/// The last time a window starting at `start_ns` may reach.
/// Threads in one scheduler snapshot at most (the kernel map holds 16 Ki).
const MAX_SCHED_THREADS: usize = 64 * 1024;

pub fn window_limit(start_ns: u64) -> u64 {
    start_ns.saturating_add(MAX_SPAN_NS)
}

/// What the checks found so far, said in `Model::warnings` (each kind as one warning, kept
/// up to date as more comes in).
#[derive(Clone, Debug, Default)]
pub struct Intake {
    /// Events left out for their times.
    dropped: u64,
    /// Values cut to fit.
    cut: u64,
    /// Where each kind's warning is in `warnings`.
    dropped_at: Option<usize>,
    cut_at: Option<usize>,
    /// The latest time of the events let in.
    pub latest_ns: Option<u64>,
}

impl Model {
    /// The last time this model's window may reach (see [`MAX_SPAN_NS`]).
    pub fn window_limit(&self) -> u64 {
        window_limit(self.start_mono_ns)
    }

    fn in_window(&self, t: u64) -> bool {
        (self.start_mono_ns..=self.window_limit()).contains(&t)
    }

    /// Whether an end marker's time can close this window.
    pub(super) fn valid_end(&self, end_ns: u64) -> bool {
        self.in_window(end_ns)
    }

    /// The end of the window when no valid end marker says it: the latest event let in.
    pub(super) fn end_from_events(&self) -> u64 {
        self.intake
            .latest_ns
            .unwrap_or(self.start_mono_ns)
            .max(self.start_mono_ns)
    }

    /// The event as the model may take it (cut to fit), or None when its times put it outside
    /// the window.
    pub(super) fn admit(&mut self, mut event: Event) -> Option<Event> {
        let ok = |t: u64| self.in_window(t);
        let times_ok = match &event {
            Event::OffCpu(o) => ok(o.start_ns) && ok(o.end_ns) && o.start_ns <= o.end_ns,
            Event::Syscall(s) => ok(s.start_ns) && ok(s.end_ns) && s.start_ns <= s.end_ns,
            Event::JavaStack { start_ns, .. } => ok(*start_ns),
            Event::LateWakeup(w) => ok(w.wake_ns) && ok(w.run_ns) && w.wake_ns <= w.run_ns,
            Event::VthreadWait(w) => ok(w.start_ns) && ok(w.end_ns) && w.start_ns <= w.end_ns,
            Event::OpenWaits { time_ns, waits } => {
                ok(*time_ns)
                    && waits
                        .iter()
                        .all(|w| ok(w.start_ns) && w.start_ns <= *time_ns)
            }
            other => other.time_ns().is_none_or(ok),
        };
        if !times_ok {
            self.intake.dropped += 1;
            let text = format!(
                "{} events of the recording have times outside its window (before its start, \
                 more than a year after it, or ending before they begin): they are left out",
                self.intake.dropped
            );
            say(&mut self.warnings, &mut self.intake.dropped_at, text);
            return None;
        }
        if let Some(t) = event.time_ns() {
            self.intake.latest_ns = Some(self.intake.latest_ns.map_or(t, |l| l.max(t)));
        }
        let cut = cut_event(&mut event);
        self.count_cut(cut);
        Some(event)
    }

    /// Counts values cut to fit, and says so.
    pub(super) fn count_cut(&mut self, cut: u64) {
        if cut == 0 {
            return;
        }
        self.intake.cut = self.intake.cut.saturating_add(cut);
        let text = format!(
            "{} values of the recording were out of bounds (counts or durations beyond {MAX_COUNT}, \
             stacks of more than {MAX_STACK_FRAMES} frames, texts of more than {MAX_TEXT} bytes \
             or with control characters): they were cut to fit",
            self.intake.cut
        );
        say(&mut self.warnings, &mut self.intake.cut_at, text);
    }
}

/// Sets (or first adds) one warning that keeps its place.
fn say(warnings: &mut Vec<String>, at: &mut Option<usize>, text: String) {
    match at.and_then(|i| warnings.get_mut(i)) {
        Some(w) => *w = text,
        None => {
            *at = Some(warnings.len());
            warnings.push(text);
        }
    }
}

/// The header's texts, cut to fit: how many were cut.
pub(super) fn cut_header(header: &Header) -> (TargetInfo, u64) {
    let mut target = header.target.clone();
    let mut cut = text(&mut target.command, MAX_TEXT);
    if target.cmdline.len() > MAX_STACK_FRAMES {
        target.cmdline.truncate(MAX_STACK_FRAMES);
        cut += 1;
    }
    for arg in &mut target.cmdline {
        cut += text(arg, MAX_TEXT);
    }
    if let Some(r) = &mut target.runtime {
        cut += text(&mut r.kind, MAX_TEXT);
        for s in [&mut r.version, &mut r.libjvm].into_iter().flatten() {
            cut += text(s, MAX_TEXT);
        }
    }
    (target, cut)
}

/// Cuts what is out of bounds in an event: how many values were cut.
fn cut_event(event: &mut Event) -> u64 {
    let mut cut = 0;
    let mut count = |n: &mut u64| {
        if *n > MAX_COUNT {
            *n = MAX_COUNT;
            cut += 1;
        }
    };
    match event {
        Event::Thread(t) => return text(&mut t.name, MAX_TEXT),
        Event::Stack(s) => return frames(&mut s.frames),
        Event::OffCpu(_) | Event::TargetExit { .. } | Event::JavaStack { .. } => {}
        Event::Counters { counters: c, .. } => {
            for n in [
                &mut c.lost_events,
                &mut c.stack_misses,
                &mut c.start_map_full,
                &mut c.short_intervals,
                &mut c.java_stack_misses,
                &mut c.syscall_map_full,
                &mut c.waker_stacks_skipped,
            ] {
                count(n);
            }
        }
        Event::ShortOffCpu { threads, .. } => {
            for t in threads {
                count(&mut t.count);
                count(&mut t.total_ns);
                count(&mut t.preempted_ns);
            }
        }
        Event::ThreadCpu { threads, .. } => {
            for t in threads {
                count(&mut t.run_ns);
                count(&mut t.wait_ns);
            }
        }
        Event::SyscallSums { sums, .. } => {
            for s in sums.iter_mut() {
                count(&mut s.count);
                count(&mut s.total_ns);
                count(&mut s.max_ns);
            }
            return cut
                + sums
                    .iter_mut()
                    .map(|s| text(&mut s.name, MAX_TEXT))
                    .sum::<u64>();
        }
        Event::KernelLocks { locks, threads, .. } => {
            for l in locks.iter_mut() {
                count(&mut l.count);
                count(&mut l.total_ns);
                count(&mut l.max_ns);
            }
            for (_, n, ns) in threads {
                count(n);
                count(ns);
            }
            let symbols = locks.iter_mut().filter_map(|l| l.symbol.as_mut());
            return cut + symbols.map(|s| text(s, MAX_TEXT)).sum::<u64>();
        }
        Event::FramePointerCheck(check) => {
            count(&mut check.compared);
            count(&mut check.agreed);
            if let Some((ours, theirs)) = &mut check.first_difference {
                for names in [ours, theirs] {
                    if names.len() > MAX_STACK_FRAMES {
                        names.truncate(MAX_STACK_FRAMES);
                        cut += 1;
                    }
                    cut += names
                        .iter_mut()
                        .map(|n| text(n, MAX_FRAME_TEXT))
                        .sum::<u64>();
                }
            }
        }
        Event::JavaThreads { threads, .. } => {
            let names = threads.iter_mut().filter_map(|t| t.name.as_mut());
            return names.map(|n| text(n, MAX_TEXT)).sum();
        }
        Event::JavaThreadClasses { threads, .. } => {
            return threads.iter_mut().map(|(_, c)| text(c, MAX_TEXT)).sum();
        }
        Event::JavaThreadsChanged {
            listed, classes, ..
        } => {
            let names = listed.iter_mut().filter_map(|t| t.name.as_mut());
            return names.map(|n| text(n, MAX_TEXT)).sum::<u64>()
                + classes
                    .iter_mut()
                    .map(|(_, c)| text(c, MAX_TEXT))
                    .sum::<u64>();
        }
        Event::Warning(w) => return text(w, MAX_TEXT),
        Event::Syscall(s) => {
            return text(&mut s.name, MAX_TEXT) + s.fd.as_mut().map_or(0, |f| text(f, MAX_TEXT));
        }
        Event::MonitorClass { class, .. }
        | Event::MonitorClassObject { class, .. }
        | Event::ClassInitLock { class, .. } => return text(class, MAX_TEXT),
        Event::OpenWaits { .. }
        | Event::ThreadStart { .. }
        | Event::Sampling { .. }
        | Event::OnCpu(_)
        | Event::SampleStack { .. }
        | Event::MemoryBudget { .. }
        | Event::LateWakeup(_) => {}
        Event::SchedStats { threads, .. } => {
            // Each histogram's buckets are bounded by the kernel's; a thread list by the
            // kernel map's size.
            let mut cut = 0;
            if threads.len() > MAX_SCHED_THREADS {
                cut += (threads.len() - MAX_SCHED_THREADS) as u64;
                threads.truncate(MAX_SCHED_THREADS);
            }
            for t in threads.iter_mut() {
                for h in [&mut t.wakeup, &mut t.runqueue] {
                    let before = h.buckets.len();
                    h.buckets
                        .retain(|(i, _)| usize::from(*i) < profiler_ebpf::HISTOGRAM_BUCKETS);
                    cut += (before - h.buckets.len()) as u64;
                }
            }
            return cut;
        }
        Event::Queued { tasks, .. } => count(tasks),
        Event::CgroupCpu(c) => {
            count(&mut c.nr_periods);
            count(&mut c.nr_throttled);
            count(&mut c.throttled_ns);
            return cut
                + text(&mut c.path, MAX_TEXT)
                + c.cpu_max.as_mut().map_or(0, |t| text(t, MAX_TEXT));
        }
        Event::MonitorOwner { owner, .. } => {
            return owner.name.as_mut().map_or(0, |n| text(n, MAX_TEXT));
        }
        Event::VthreadWait(w) => {
            let Some(blocker) = &mut w.blocker else {
                return 0;
            };
            let owner = blocker.owner.as_mut().and_then(|o| o.name.as_mut());
            return text(&mut blocker.class, MAX_TEXT) + owner.map_or(0, |n| text(n, MAX_TEXT));
        }
        Event::VthreadWaitSums(s) => {
            for n in [
                &mut s.unmounts,
                &mut s.short_waits,
                &mut s.short_wait_ns,
                &mut s.unmatched,
                &mut s.stacks_skipped,
            ] {
                count(n);
            }
        }
        Event::ParkBlocker { blocker, .. } => {
            let owner = blocker.owner.as_mut().and_then(|o| o.name.as_mut());
            return text(&mut blocker.class, MAX_TEXT) + owner.map_or(0, |n| text(n, MAX_TEXT));
        }
        Event::Container(c) => {
            return c.cgroup.as_mut().map_or(0, |t| text(t, MAX_TEXT))
                + c.cpu_max.as_mut().map_or(0, |t| text(t, MAX_TEXT));
        }
        Event::ThreadExit { tid, account, .. } => {
            if let Some(a) = account {
                count(&mut a.run_ns);
                count(&mut a.wait_ns);
                // The account is the thread's own.
                if a.tid != *tid {
                    a.tid = *tid;
                    cut += 1;
                }
            }
        }
    }
    cut
}

/// Cuts a stack to [`MAX_STACK_FRAMES`] and its texts to [`MAX_FRAME_TEXT`].
fn frames(frames: &mut Vec<Frame>) -> u64 {
    let mut cut = 0;
    if frames.len() > MAX_STACK_FRAMES {
        frames.truncate(MAX_STACK_FRAMES);
        cut += 1;
    }
    for f in frames {
        for s in [&mut f.name, &mut f.module].into_iter().flatten() {
            cut += text(s, MAX_FRAME_TEXT);
        }
    }
    cut
}

/// Cuts a text to `max` bytes (at a character, with an ellipsis) and replaces its control
/// characters (a terminal would act on them): 1 if it changed anything.
pub(super) fn text(s: &mut String, max: usize) -> u64 {
    if s.len() <= max && !s.chars().any(char::is_control) {
        return 0;
    }
    let mut out = String::with_capacity(s.len().min(max + 3));
    for c in s.chars() {
        if out.len() + c.len_utf8() > max {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { '\u{fffd}' } else { c });
    }
    *s = out;
    1
}

/// Hostile recordings, built directly (no file), for the tests of every view.
#[cfg(test)]
pub(crate) mod hostile {
    use crate::{
        events::{
            Counters, Event, FramePointerCheck, FutexWait, FutexWaker, JavaBlock, JavaThreadInfo,
            JavaThreadState, KernelLock, OffCpu, OffCpuState, OpenWait, ShortOffCpu, Stack,
            Syscall, SyscallSum, ThreadCpu, ThreadName,
        },
        recording::{End, Header, Recording, StopReason},
    };

    use super::{Frame, MAX_SPAN_NS, TargetInfo};

    pub fn header(start_mono_ns: u64) -> Header {
        Header {
            pinprof_version: "0".into(),
            target: TargetInfo {
                pid: u32::MAX,
                command: "\u{1b}]0;owned\u{7}java".into(),
                cmdline: vec!["x".repeat(100_000)],
                runtime: Some(crate::events::RuntimeInfo {
                    kind: "hotspot".into(),
                    version: Some("21.0.8".into()),
                    parallelism: Some(u32::MAX),
                    max_pool_size: Some(u32::MAX),
                    libjvm: None,
                }),
            },
            start_mono_ns,
            start_unix_ns: u64::MAX,
            hostname: String::new(),
            kernel_release: String::new(),
            min_off_cpu_ns: u64::MAX,
            min_syscall_ns: Some(u64::MAX),
        }
    }

    fn mounted(vthread: u64) -> JavaBlock {
        JavaBlock {
            state: JavaThreadState::Blocked,
            vthread: Some(vthread),
            // (Waiting, not entering: the futex waits of a monitor entry are no lock rows,
            // and the lock rows' sums are among what overflows.)
            pending_monitor: None,
            waiting_monitor: Some(u64::MAX),
            held_monitors: u32::MAX,
            pin_count: u32::MAX,
            at_safepoint: false,
            anchor: [u64::MAX; 3],
        }
    }

    pub fn off_cpu(tid: u32, start_ns: u64, end_ns: u64) -> OffCpu {
        OffCpu {
            tid,
            start_ns,
            end_ns,
            state: OffCpuState::Sleeping,
            kernel_stack: Some(u32::MAX),
            user_stack: Some(7),
            waker_tid: Some(u32::MAX),
            cpu: u32::MAX,
            java: Some(mounted(u64::from(tid))),
        }
    }

    fn futex_wait(tid: u32, start_ns: u64, end_ns: u64) -> Syscall {
        Syscall {
            tid,
            nr: u32::MAX,
            name: "futex\u{1b}[2J".into(),
            args: [u64::MAX; 4],
            start_ns,
            end_ns,
            ret: 0,
            user_stack: Some(7),
            fd: Some("\n".repeat(10_000)),
            futex: Some(FutexWait {
                uaddr: u64::MAX,
                op: u64::MAX,
                timeout_ns: Some(u64::MAX),
                waker: Some(FutexWaker {
                    tid: tid.wrapping_add(1),
                    wake_ns: u64::MAX,
                    user_stack: Some(7),
                    kernel_stack: Some(u32::MAX),
                }),
            }),
            unfinished: false,
        }
    }

    /// A recording of `carriers` carriers, each pinned for the whole (longest) window many
    /// times over, with every kind of event also given out-of-bounds values: times far out of
    /// the window or reversed, the largest ids and counts, a stack of `frames` frames, texts
    /// that are long or would act on a terminal.
    pub fn recording(start: u64, end: Option<u64>, carriers: u32, frames: usize) -> Recording {
        let last = start.saturating_add(MAX_SPAN_NS);
        let mut events = vec![
            Event::Warning("\u{1b}[31mred\u{1b}[0m".into()),
            Event::Stack(Stack {
                id: 7,
                frames: (0..frames)
                    .map(|i| Frame {
                        kind: crate::events::FrameKind::Java,
                        addr: u64::MAX - i as u64,
                        name: Some(format!("f{i} 18446744073709551615\u{1b}")),
                        module: Some("compiled".into()),
                        holds_monitor: true,
                        line: None,
                    })
                    .collect(),
            }),
            Event::Stack(Stack {
                id: u32::MAX,
                frames: vec![Frame {
                    kind: crate::events::FrameKind::Kernel,
                    addr: 0,
                    name: Some("y".repeat(1 << 20)),
                    module: None,
                    holds_monitor: false,
                    line: None,
                }],
            }),
            Event::Thread(ThreadName {
                tid: u32::MAX,
                name: "\u{1b}]52;c;AAAA\u{7}".into(),
            }),
            Event::JavaThreads {
                time_ns: start,
                threads: (1..=carriers)
                    .chain([u32::MAX])
                    .map(|tid| JavaThreadInfo {
                        tid,
                        name: Some(format!("carrier-{tid}\r")),
                        carrier: true,
                    })
                    .collect(),
            },
            Event::JavaThreadClasses {
                time_ns: start,
                threads: vec![(u32::MAX, format!("\u{1b}[2J{}", "C".repeat(1 << 20)))],
            },
            Event::Counters {
                time_ns: start,
                counters: Counters {
                    lost_events: u64::MAX,
                    stack_misses: u64::MAX,
                    start_map_full: u64::MAX,
                    short_intervals: u64::MAX,
                    java_stack_misses: u64::MAX,
                    syscall_map_full: u64::MAX,
                    waker_stacks_skipped: u64::MAX,
                },
            },
            Event::ShortOffCpu {
                time_ns: start,
                threads: vec![ShortOffCpu {
                    tid: 1,
                    count: u64::MAX,
                    total_ns: u64::MAX,
                    preempted_ns: 0,
                }],
            },
            Event::ThreadCpu {
                time_ns: start,
                threads: vec![ThreadCpu {
                    tid: 1,
                    run_ns: u64::MAX,
                    wait_ns: u64::MAX,
                }],
            },
            Event::ThreadCpu {
                time_ns: last,
                threads: vec![ThreadCpu {
                    tid: 1,
                    run_ns: 0,
                    wait_ns: u64::MAX,
                }],
            },
            Event::SyscallSums {
                time_ns: start,
                sums: vec![
                    SyscallSum {
                        tid: 1,
                        nr: 1,
                        name: "futex\u{1b}[2J".into(),
                        count: u64::MAX,
                        total_ns: u64::MAX,
                        max_ns: u64::MAX,
                    };
                    2
                ],
            },
            Event::KernelLocks {
                time_ns: start,
                locks: vec![KernelLock {
                    addr: u64::MAX,
                    symbol: Some("\u{1b}".into()),
                    count: u64::MAX,
                    total_ns: u64::MAX,
                    max_ns: u64::MAX,
                }],
                threads: vec![(1, u64::MAX, u64::MAX), (1, u64::MAX, u64::MAX)],
            },
            Event::FramePointerCheck(FramePointerCheck {
                compared: u64::MAX,
                agreed: u64::MAX,
                first_difference: Some((vec!["a".into(); 5000], Vec::new())),
            }),
            Event::OpenWaits {
                time_ns: last,
                waits: (1..=carriers)
                    .map(|tid| OpenWait {
                        tid,
                        start_ns: start,
                        state: OffCpuState::Sleeping,
                        java: Some(mounted(1)),
                    })
                    .collect(),
            },
            // Throttling counters beyond any count that go back, a path that would act on a
            // terminal, and a reading outside the window.
            Event::CgroupCpu(crate::events::CgroupCpu {
                time_ns: start,
                path: format!("/\u{1b}[2J{}", "p".repeat(1 << 20)),
                version: u8::MAX,
                cpu_max: Some("\u{1b}]52;c;AAAA\u{7}".into()),
                nr_periods: u64::MAX,
                nr_throttled: u64::MAX,
                throttled_ns: u64::MAX,
            }),
            Event::CgroupCpu(crate::events::CgroupCpu {
                time_ns: last,
                path: format!("/\u{1b}[2J{}", "p".repeat(1 << 20)),
                version: u8::MAX,
                cpu_max: None,
                nr_periods: 0,
                nr_throttled: 0,
                throttled_ns: 0,
            }),
            Event::CgroupCpu(crate::events::CgroupCpu {
                time_ns: u64::MAX,
                path: "/x".into(),
                version: 1,
                cpu_max: None,
                nr_periods: 0,
                nr_throttled: 0,
                throttled_ns: 0,
            }),
            // Born after it ended, with an account beyond any life, said to be another's.
            Event::ThreadStart {
                tid: 2,
                time_ns: last,
            },
            Event::ThreadExit {
                tid: 2,
                time_ns: start,
                account: Some(ThreadCpu {
                    tid: 3,
                    run_ns: u64::MAX,
                    wait_ns: u64::MAX,
                }),
            },
            // Out of the window, or reversed: left out.
            Event::ThreadStart {
                tid: 1,
                time_ns: u64::MAX,
            },
            Event::ThreadExit {
                tid: 1,
                time_ns: 0,
                account: None,
            },
            Event::OffCpu(off_cpu(1, 0, u64::MAX)),
            Event::OffCpu(off_cpu(1, last, start)),
            Event::OffCpu(off_cpu(1, start, u64::MAX)),
            Event::Syscall(futex_wait(1, u64::MAX, 0)),
            Event::TargetExit { time_ns: u64::MAX },
            Event::JavaStack {
                tid: 1,
                start_ns: u64::MAX,
                stack: 7,
            },
            Event::OpenWaits {
                time_ns: start,
                waits: vec![OpenWait {
                    tid: 1,
                    start_ns: u64::MAX,
                    state: OffCpuState::Sleeping,
                    java: None,
                }],
            },
            Event::MonitorClass {
                time_ns: u64::MAX,
                monitor: u64::MAX,
                class: "C".into(),
            },
            Event::Counters {
                time_ns: u64::MAX,
                counters: Counters::default(),
            },
        ];
        // Every carrier pinned, again and again, for the longest window: sums of these
        // times are far beyond a u64.
        for round in 0..3 {
            for tid in 1..=carriers {
                events.push(Event::OffCpu(off_cpu(tid, start, last)));
                events.push(Event::JavaStack {
                    tid,
                    start_ns: start,
                    stack: 7,
                });
                events.push(Event::Syscall(futex_wait(tid, start, last)));
                events.push(Event::MonitorClass {
                    // In reverse time order.
                    time_ns: last - u64::from(round * carriers + tid),
                    monitor: u64::MAX,
                    class: format!("C{tid}"),
                });
            }
        }
        Recording {
            header: header(start),
            events,
            end: end.map(|end_mono_ns| End {
                end_mono_ns,
                reason: StopReason::Error("\u{1b}[2J".into()),
            }),
            damage: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{flamegraph, report};

    /// Everything a recording is shown by: no panic (nor overflow: tests run with overflow
    /// checks), bounded results, and what was wrong said.
    fn show_all(recording: &crate::recording::Recording) -> Model {
        let model = Model::from_recording(recording);
        assert!(model.start_mono_ns <= model.end_mono_ns);
        assert!(model.end_mono_ns <= model.window_limit());
        assert!(model.duration_ns() <= MAX_SPAN_NS);
        assert!(model.stacks.values().all(|f| f.len() <= MAX_STACK_FRAMES));
        let options = report::Options::default();
        let text = report::to_text(&crate::analysis::Analysis::new(&model), &options);
        assert!(
            !text.contains('\u{1b}'),
            "no terminal escapes in the report"
        );
        let json = report::to_json(&crate::analysis::Analysis::new(&model), &options);
        assert_eq!(json["schema"], 1);
        for kind in [
            flamegraph::Kind::OffCpu,
            flamegraph::Kind::Pinned,
            flamegraph::Kind::Futex,
            flamegraph::Kind::Syscall,
            flamegraph::Kind::Locks,
            flamegraph::Kind::Vthread,
        ] {
            for per_thread in [false, true] {
                let options = flamegraph::Options {
                    per_thread,
                    kind,
                    ..Default::default()
                };
                let mut svg = Vec::new();
                flamegraph::write_svg(&crate::analysis::Analysis::new(&model), &options, &mut svg)
                    .unwrap();
                assert!(!svg.is_empty());
            }
        }
        model
    }

    fn said(model: &Model, what: &str) -> bool {
        model.warnings.iter().any(|w| w.contains(what))
    }

    #[test]
    fn hostile_values_are_left_out_or_cut_and_said() {
        let start = 5_000_000_000;
        for end in [Some(u64::MAX), Some(0), Some(start - 1), None] {
            // Sums of 600 windows' lengths are beyond a u64.
            let recording = hostile::recording(start, end, 200, 10);
            let model = show_all(&recording);
            assert!(said(&model, "outside its window"), "{:?}", model.warnings);
            assert!(said(&model, "cut to fit"), "{:?}", model.warnings);
            if end.is_some() {
                assert!(said(&model, "end marker"), "{:?}", model.warnings);
            }
            // The end is taken from the events let in: the last of them.
            assert_eq!(model.end_mono_ns, window_limit(start));
            assert!(model.warnings.iter().all(|w| !w.contains('\u{1b}')));
            // Each kind of damage is one warning, with its count.
            let counted = |what| model.warnings.iter().filter(|w| w.contains(what)).count();
            assert_eq!(counted("events of the recording have times"), 1);
            assert_eq!(counted("cut to fit"), 1);
            assert!(model.counters.lost() >= MAX_COUNT);
            assert!(model.target.command.len() <= MAX_TEXT + 3);
            // The cgroup's counters, cut and gone back, stay in bounds; its texts are clean.
            let t = crate::analysis::Analysis::new(&model)
                .throttling()
                .cloned()
                .unwrap();
            assert!(t.path.len() <= MAX_TEXT + 3 && !t.path.contains('\u{1b}'));
            assert_eq!((t.nr_throttled, t.throttled_ns), (0, 0));
            // The wait time of 600 windows stays at the largest sum.
            let json = report::to_json(
                &crate::analysis::Analysis::new(&model),
                &report::Options::default(),
            );
            assert_eq!(json["futex_waits"]["total_ns"], u64::MAX);
            assert_eq!(json["locks"][0]["wait_ns"], u64::MAX);
            // The thread born after it ended lives no time, whatever its account says.
            assert!(!model.births.contains_key(&1) && !model.exits.contains_key(&1));
            assert_eq!(model.exits[&2].1.map(|a| a.tid), Some(2));
            let (from, to) = model.life(2);
            assert_eq!(from, to);
            let rows = crate::analysis::threads::threads(&model);
            let row = rows.into_iter().find(|t| t.tid == 2).unwrap();
            let times = [
                row.running_ns,
                row.preempted_ns,
                row.blocked_ns,
                row.idle_ns,
            ];
            assert_eq!(times, [0; 4]);
        }
    }

    #[test]
    fn a_stack_of_a_million_frames_is_cut() {
        let model = show_all(&hostile::recording(0, None, 2, 1_000_000));
        assert_eq!(model.stacks[&7].len(), MAX_STACK_FRAMES);
        assert!(said(&model, "cut to fit"));
    }

    #[test]
    fn a_window_at_either_end_of_the_clock_is_shown() {
        for start in [0, 1, u64::MAX - MAX_SPAN_NS / 2, u64::MAX - 1, u64::MAX] {
            for end in [Some(u64::MAX), Some(start), None] {
                let model = show_all(&hostile::recording(start, end, 3, 10));
                assert!(said(&model, "outside its window") || start == 0);
            }
        }
    }

    #[test]
    fn a_valid_end_marker_closes_the_window() {
        let start = 5_000_000_000;
        let end = start + 10_000_000_000;
        let model = show_all(&hostile::recording(start, Some(end), 2, 10));
        assert_eq!(model.end_mono_ns, end);
        assert!(!said(&model, "end marker"));
    }

    #[test]
    fn texts_are_cut_at_a_character_and_cleaned() {
        let mut s = "é".repeat(10);
        assert_eq!(text(&mut s, 5), 1);
        assert_eq!(s, "éé…");
        let mut s = "a\u{1b}[2Jb".to_string();
        assert_eq!(text(&mut s, 100), 1);
        assert_eq!(s, "a\u{fffd}[2Jb");
        let mut s = "java.lang.Thread.sleep".to_string();
        assert_eq!(text(&mut s, 100), 0);
    }

    #[test]
    fn events_in_the_window_pass_unchanged_and_unsaid() {
        let start = 1_000;
        let mut model = Model::new(&hostile::header(start));
        model.warnings.clear();
        let o = hostile::off_cpu(1, start, start + 10);
        model.apply(&Event::OffCpu(o.clone()));
        model.apply(&Event::JavaStack {
            tid: 1,
            start_ns: start,
            stack: 7,
        });
        assert_eq!(model.off_cpu, [super::super::Wait::from(&o)]);
        assert_eq!(model.java_stack_within(1, start, start + 10), Some(7));
        assert!(model.warnings.is_empty());
    }
}
