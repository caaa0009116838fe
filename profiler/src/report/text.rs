//! The report for people: headline first, then where time went, most important first.

pub use crate::analysis::locks::owner_label;
pub use crate::units::secs;
use std::fmt::Write as _;

use super::{
    Options,
    stack::{self, ShownFrame},
};
use crate::analysis::Analysis;
use crate::analysis::kinds::{LockKind, ThreadRole};
use crate::analysis::stacks::StackLabels;
use crate::analysis::threads::{ThreadRow, blocked_total_ns};
use crate::model::{Model, total};

pub fn to_text(analysis: &Analysis, options: &Options) -> String {
    let mut out = String::new();
    let _ = write_report(&mut out, analysis, options);
    out
}

/// The target's runtime and version, as people call it ("HotSpot 21.0.8").
pub fn runtime_label(model: &Model) -> Option<String> {
    model.target.runtime.as_ref().map(|r| {
        let kind = if r.kind == "hotspot" {
            "HotSpot"
        } else {
            &r.kind
        };
        format!(
            "{kind} {}",
            r.version.as_deref().unwrap_or("(version unknown)")
        )
    })
}

/// The container the target ran in, for a header: its PID namespace (and its pid there),
/// its cgroup and that cgroup's CPU limit.
pub fn container_label(model: &Model) -> Option<String> {
    let c = model.container.as_ref()?;
    let mut label = format!(
        "container: pid namespace {} (pid {} inside)",
        c.pid_ns_inode, c.ns_pid
    );
    match &c.cgroup {
        Some(path) => {
            let cpu = c
                .cpu_max
                .as_deref()
                .unwrap_or("not set (no cpu controller there)");
            let _ = write!(label, ", cgroup {path}, cpu.max {cpu}");
        }
        None => label.push_str(", cgroup v2 unknown"),
    }
    Some(label)
}

/// The CPU quota of the target's cgroup and how often it throttled the target in the
/// window: None when there was no quota and no throttling (or no cgroup was read).
pub fn throttling_label(analysis: &Analysis) -> Option<String> {
    let t = analysis.throttling()?;
    let quota = t.cpu_max.as_deref().unwrap_or("unknown");
    if !t.throttled() && quota.starts_with("max") {
        return None;
    }
    let which = format!("cgroup v{} {}", t.version, t.path);
    Some(if t.throttled() {
        format!(
            "CPU quota: {quota} ({which}): throttled {} of {} periods, {}",
            t.nr_throttled,
            t.nr_periods,
            secs(t.throttled_ns)
        )
    } else {
        format!(
            "CPU quota: {quota} ({which}): not throttled in {} periods",
            t.nr_periods
        )
    })
}

/// The carriers' waits for a CPU in a line: the worst wakeup latency p99, and the late
/// wake-ups (None: not known, as in recordings made before they were measured).
pub fn scheduler_label(analysis: &Analysis) -> Option<String> {
    let worst = analysis
        .scheduling()
        .iter()
        .filter(|t| t.carrier)
        .max_by_key(|t| t.wakeup.p99)?;
    let model = analysis.model();
    Some(format!(
        "CPU waits: carriers' wakeup latency p99 up to {} (max {}, {}), run-queue p99 {}; {} \
         late wake-ups",
        secs(worst.wakeup.p99),
        secs(worst.wakeup.max),
        model.thread_name(worst.tid),
        secs(worst.runqueue.p99),
        model.late_wakeups.len()
    ))
}

/// When the window ran, on this machine's clock and zone: what `--from` and `--to` take.
pub fn window_label(model: &Model) -> String {
    let zone = jiff::tz::TimeZone::system();
    let at = |unix_ns: u64| {
        jiff::Timestamp::from_nanosecond(i128::from(unix_ns))
            .ok()
            .map(|t| t.to_zoned_datetime(zone.clone()))
    };
    let start = model.start_unix_ns;
    let end = start.saturating_add(model.duration_ns());
    match (at(start), at(end)) {
        (Some(from), Some(to)) => format!(
            "window: {} to {} ({})",
            from.strftime("%Y-%m-%d %H:%M:%S%.3f"),
            to.strftime("%H:%M:%S%.3f"),
            from.strftime("%Z")
        ),
        _ => "window: start unknown".to_string(),
    }
}

/// One line that says what was profiled and how well.
pub fn headline(analysis: &Analysis) -> String {
    let model = analysis.model();
    let runtime = runtime_label(model).map_or(String::new(), |r| format!(", {r}"));
    let threads = analysis.threads();
    format!(
        "pid {} ({}{runtime}): {} window, {} threads blocked {} in all, {} off-CPU intervals, {} lost events",
        model.target.pid,
        model.target.command,
        secs(analysis.duration_ns()),
        threads.len(),
        secs(blocked_total_ns(threads)),
        model.off_cpu.len(),
        model.counters.lost(),
    )
}

fn write_report(out: &mut String, analysis: &Analysis, options: &Options) -> std::fmt::Result {
    let model = analysis.model();
    writeln!(out, "{}", headline(analysis))?;
    writeln!(out, "{}", window_label(model))?;
    if let Some(container) = container_label(model) {
        writeln!(out, "{container}")?;
    }
    if let Some(throttling) = throttling_label(analysis) {
        writeln!(out, "{throttling}")?;
    }
    if model.target.runtime.is_none() {
        writeln!(
            out,
            "note: no JVM found in the target: its threads' times and stacks are shown; \
             carriers, pinning and Java stacks need a HotSpot JVM"
        )?;
    }
    if let Some(t) = model.target_exit_ns {
        writeln!(
            out,
            "note: the target exited {} into the recording, which ended there",
            secs(t.saturating_sub(model.start_mono_ns))
        )?;
    }
    for warning in &model.warnings {
        writeln!(out, "warning: {warning}")?;
    }
    if model.counters.lost() > 0 {
        writeln!(
            out,
            "warning: {} events were lost in the kernel (ring buffer or a map full: try --ring-buffer-mib); totals are low",
            model.counters.lost()
        )?;
    }
    if let Some((bytes, cuts)) = &model.memory_budget
        && *cuts != Default::default()
    {
        writeln!(
            out,
            "note: to stay within its memory budget ({}, --memory-budget) pinprof cut: {}",
            crate::budget::mib(*bytes),
            cuts.describe()
        )?;
    }
    if model.counters.java_stack_misses > 0 {
        writeln!(
            out,
            "note: {} Java stacks could not be copied (the thread had moved on, or no room)",
            model.counters.java_stack_misses
        )?;
    }
    if model.counters.stack_misses > 0 {
        writeln!(
            out,
            "note: {} stacks could not be captured",
            model.counters.stack_misses
        )?;
    }
    let cut = analysis.java_stacks_cut();
    if cut > 0 {
        writeln!(
            out,
            "note: {cut} Java stacks end where a virtual thread's frozen frames could not be read"
        )?;
    }

    write_findings(out, analysis)?;
    write_carriers(out, analysis, options)?;
    write_locks(out, analysis, options)?;
    write_unmounted(out, analysis, options)?;
    write_syscalls(out, analysis, options)?;
    write_on_cpu(out, analysis, options)?;

    let own = analysis.jdk_own_threads();
    let mut threads: Vec<&ThreadRow> = analysis.threads().iter().collect();
    // Carriers first, then the application's threads, then the JVM's and the JDK's own,
    // whose waits for work would lead otherwise; each most blocked or pinned first. Threads
    // seen doing nothing at all (asleep since before attach: a VM thread whose class and
    // code say nothing, or a deadlock) come after the others of their kind.
    threads.sort_by_key(|t| {
        let group = match (t.role, own.contains(&t.tid)) {
            (ThreadRole::Carrier, _) => 0,
            (_, false) => 1,
            (_, true) => 2,
        };
        (group, t.intervals == 0 && t.running_ns == 0)
    });
    writeln!(
        out,
        "\nThreads (carriers, the application's, then the JVM's own; most blocked or pinned first):"
    )?;
    writeln!(
        out,
        "  {:>8}  {:<26} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
        "tid", "name", "pinned", "blocked", "idle", "running", "preempted", "intervals"
    )?;
    // Threads idle all along (carriers with nothing to run) are left to the JSON report;
    // a thread blocked all along (a wait from before attach, a deadlock) is not.
    let shown: Vec<_> = threads
        .iter()
        .filter(|t| t.intervals > 0 || t.running_ns > 0 || t.blocked_ns > 0 || t.pinned_ns > 0)
        .collect();
    if shown.len() > 20 {
        writeln!(
            out,
            "  (the first 20 of {}; --format json lists every one)",
            shown.len()
        )?;
    }
    for t in shown.iter().take(20) {
        writeln!(
            out,
            "  {:>8}  {:<26} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
            t.tid,
            truncate(&t.name, 26),
            secs(t.pinned_ns),
            secs(t.blocked_ns),
            secs(t.idle_ns),
            secs(t.running_ns),
            secs(t.preempted_ns),
            t.intervals
        )?;
    }

    let stacks = analysis.blocked_stacks();
    writeln!(
        out,
        "\nTop blocked stacks (innermost frame first; the JVM's own threads waiting for work last):"
    )?;
    if stacks.is_empty() {
        writeln!(out, "  none recorded")?;
    }
    for (i, s) in stacks.iter().take(options.top).enumerate() {
        writeln!(
            out,
            "  #{} {} in {} intervals (max {}), threads: {}{}{}",
            i + 1,
            secs(s.total_ns),
            s.events,
            secs(s.max_ns),
            s.threads
                .iter()
                .take(4)
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            on_monitors(&s.monitor_classes, &s.class_monitors, &Default::default()),
            if s.jvm_internal {
                "  (the JVM's own, waiting for work)"
            } else {
                ""
            }
        )?;
        let frames = shown_frames(&s.stack, |_| true);
        write_frames(out, "      ", &frames, options)?;
    }
    Ok(())
}

/// The frames of a stack for `stack::lines`, those `keep` keeps.
fn shown_frames(stack: &StackLabels, keep: impl Fn(usize) -> bool) -> Vec<ShownFrame<'_>> {
    (0..stack.frames.len())
        .filter(|&i| keep(i))
        .map(|i| ShownFrame {
            label: stack.display(i).into(),
            holds_monitor: stack.monitor_frames.contains(&i),
        })
        .collect()
}

fn write_frames(
    out: &mut String,
    indent: &str,
    frames: &[ShownFrame],
    options: &Options,
) -> std::fmt::Result {
    for line in stack::lines(frames, options.depth, options.full) {
        writeln!(out, "{indent}{line}")?;
    }
    Ok(())
}

/// Pinning first: it is what stalls a virtual-thread service.
fn write_carriers(out: &mut String, analysis: &Analysis, options: &Options) -> std::fmt::Result {
    let model = analysis.model();
    if !analysis.knows_java_threads() {
        return Ok(());
    }
    let rows = analysis.threads();
    let carriers: Vec<_> = rows
        .iter()
        .filter(|t| t.role == ThreadRole::Carrier)
        .collect();
    let parallelism = model
        .target
        .runtime
        .as_ref()
        .and_then(|r| r.parallelism)
        .map_or(String::new(), |p| format!(", parallelism {p}"));
    writeln!(out, "\nCarriers ({}{parallelism}):", carriers.len())?;
    if carriers.is_empty() {
        writeln!(
            out,
            "  none known: no virtual thread has run yet, or pinprof could not tell (see warnings)"
        )?;
    } else {
        writeln!(
            out,
            "  {:>8}  {:<26} {:>10} {:>10} {:>10} {:>10}",
            "tid", "name", "pinned", "blocked", "idle", "running"
        )?;
    }
    for t in &carriers {
        writeln!(
            out,
            "  {:>8}  {:<26} {:>10} {:>10} {:>10} {:>10}",
            t.tid,
            truncate(&t.name, 26),
            secs(t.pinned_ns),
            secs(t.blocked_ns),
            secs(t.idle_ns),
            secs(t.running_ns)
        )?;
    }

    let episodes = analysis.starvation();
    if !episodes.is_empty() {
        let starved = total(episodes.iter().map(|e| e.end_ns.saturating_sub(e.start_ns)));
        let longest = episodes
            .iter()
            .map(|e| e.end_ns.saturating_sub(e.start_ns))
            .max()
            .unwrap_or(0);
        let waited = episodes
            .iter()
            .filter_map(|e| e.queued_max)
            .max()
            .map(|n| format!("; up to {n} virtual threads waited to run"))
            .unwrap_or_default();
        use crate::analysis::starvation::Cause;
        let by_cause = |cause: Cause| {
            total(
                episodes
                    .iter()
                    .filter(|e| e.cause == cause)
                    .map(|e| e.end_ns.saturating_sub(e.start_ns)),
            )
        };
        let other = by_cause(Cause::Monopolized) + by_cause(Cause::Cpu);
        let what = if other == 0 {
            "every carrier pinned or blocked"
        } else {
            "no carrier free"
        };
        writeln!(
            out,
            "\nCarrier starvation: {what} for {} in {} episodes (longest {}): no other \
             virtual thread could run then{waited}",
            secs(starved),
            episodes.len(),
            secs(longest)
        )?;
        if other > 0 {
            let causes: Vec<String> = [
                (Cause::Pinned, "pinned"),
                (Cause::Blocked, "blocked"),
                (
                    Cause::Monopolized,
                    "monopolized (a virtual thread computing)",
                ),
                (Cause::Cpu, "waiting for a CPU"),
            ]
            .into_iter()
            .map(|(c, label)| (by_cause(c), label))
            .filter(|(ns, _)| *ns > 0)
            .map(|(ns, label)| format!("{label} {}", secs(ns)))
            .collect();
            writeln!(out, "  by cause: {}", causes.join(", "))?;
        }
    }
    write_monopolized(out, analysis, options)?;
    write_scheduler(out, analysis)?;

    let events = analysis.pinned_events();
    let sites = analysis.pinned_sites();
    let pinned = total(events.iter().map(|e| e.duration_ns()));
    writeln!(
        out,
        "\nPinned: {} events, {} in all{}",
        events.len(),
        secs(pinned),
        if sites.is_empty() {
            ""
        } else {
            " (sites by time; Java frames innermost first)"
        }
    )?;
    for (i, site) in sites.iter().take(options.top).enumerate() {
        let locked = on_monitors(
            &site.monitor_classes,
            &site.class_monitors,
            &site.class_inits,
        );
        writeln!(
            out,
            "  #{} {} {} x{}, {} (max {}){locked}",
            i + 1,
            site.reason.as_str(),
            site.operation.as_str(),
            site.events,
            secs(site.total_ns),
            secs(site.max_ns)
        )?;
        if !site.released_by.is_empty() {
            let mut by: Vec<(&u32, &u64)> = site.released_by.iter().collect();
            by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let names: Vec<String> = by
                .iter()
                .take(4)
                .map(|(tid, n)| format!("{} {tid} ({n})", model.thread_name(**tid)))
                .collect();
            writeln!(out, "      monitor released by: {}", names.join(", "))?;
        }
        // Java frames say where; kernel and native frames only say how, so they are left
        // out when there are Java frames.
        let java = |i: usize| !site.stack.frame_kinds[i].is_native();
        let frames = if (0..site.stack.frames.len()).any(java) {
            shown_frames(&site.stack, java)
        } else {
            writeln!(out, "      {}", crate::analysis::stacks::NO_JAVA_STACK)?;
            shown_frames(&site.stack, |_| true)
        };
        write_frames(out, "      ", &frames, options)?;
    }
    Ok(())
}

/// Virtual threads that held their carrier for long, the longest first.
fn write_monopolized(out: &mut String, analysis: &Analysis, options: &Options) -> std::fmt::Result {
    let model = analysis.model();
    let spells = analysis.monopolized();
    if spells.is_empty() {
        return Ok(());
    }
    let mut longest: Vec<_> = spells.iter().collect();
    longest.sort_by_key(|m| (std::cmp::Reverse(m.duration_ns()), m.start_ns));
    writeln!(
        out,
        "\nMonopolized: {} times a virtual thread held its carrier, running, for {} or more \
         ({} in all; virtual threads are not time-sliced); the longest:",
        spells.len(),
        secs(crate::analysis::monopoly::DEFAULT_THRESHOLD_NS),
        secs(total(spells.iter().map(|m| m.duration_ns())))
    )?;
    for m in longest.iter().take(options.top.min(5)) {
        let place = m.place(model);
        writeln!(
            out,
            "  {} virtual thread #{} on {} ({}) at {}, in {place}",
            secs(m.duration_ns()),
            m.vthread,
            model.thread_name(m.carrier),
            m.carrier,
            secs(m.start_ns.saturating_sub(model.start_mono_ns)),
        )?;
    }
    Ok(())
}

/// How long the carriers waited for a CPU once they could run, from the kernel's histograms.
fn write_scheduler(out: &mut String, analysis: &Analysis) -> std::fmt::Result {
    let model = analysis.model();
    let carriers: Vec<_> = analysis.scheduling().iter().filter(|t| t.carrier).collect();
    if carriers.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nScheduler (carriers' waits for a CPU: woken to running, preempted to running again; \
         {} wake-ups of any thread waited longer than --late-wakeup):",
        model.late_wakeups.len(),
    )?;
    writeln!(
        out,
        "  {:>8}  {:<26} {:>23} {:>23} {:>6} {:>8}",
        "tid", "carrier", "wakeup p50/p99/max", "run queue p50/p99/max", "migr", "preempt"
    )?;
    let three = |p: &crate::analysis::scheduler::Percentiles| {
        format!("{}/{}/{}", secs(p.p50), secs(p.p99), secs(p.max))
    };
    for t in carriers {
        writeln!(
            out,
            "  {:>8}  {:<26} {:>23} {:>23} {:>6} {:>8}",
            t.tid,
            truncate(&model.thread_name(t.tid), 26),
            three(&t.wakeup),
            three(&t.runqueue),
            t.migrations,
            t.involuntary_switches
        )?;
    }
    Ok(())
}

/// Where the threads ran, from the on-CPU samples.
fn write_on_cpu(out: &mut String, analysis: &Analysis, options: &Options) -> std::fmt::Result {
    let model = analysis.model();
    let Some(hz) = model.on_cpu_hz else {
        return Ok(());
    };
    let sites = analysis.on_cpu_sites();
    writeln!(
        out,
        "\nOn CPU: {} samples at {hz} Hz ({} of thread time){}{}",
        model.samples.len(),
        secs(crate::analysis::oncpu::sample_ns(model).saturating_mul(model.samples.len() as u64)),
        match model.sample_stacks_skipped {
            0 => String::new(),
            n => format!(", {n} without their Java stack (the ring buffer was filling)"),
        },
        if sites.is_empty() {
            ""
        } else {
            "; stacks by samples:"
        }
    )?;
    for site in sites.iter().take(options.top.min(5)) {
        let java = |i: usize| !site.stack.frame_kinds[i].is_native();
        let frames = if (0..site.stack.frames.len()).any(java) {
            shown_frames(&site.stack, java)
        } else {
            shown_frames(&site.stack, |_| true)
        };
        writeln!(out, "  {} samples", site.samples)?;
        write_frames(out, "      ", &frames, options)?;
    }
    Ok(())
}

/// Locks by wait time: who waited, who held them, where the holder released.
fn write_locks(out: &mut String, analysis: &Analysis, options: &Options) -> std::fmt::Result {
    let model = analysis.model();
    let locks = analysis.locks();
    let futex = analysis.futex();
    if futex.waits > 0 {
        writeln!(
            out,
            "\nFutex waits of {} or more: {} ({} in all): {} released by another thread, {} timed out, {} interrupted, {} still waiting at the end",
            secs(model.min_syscall_ns),
            futex.waits,
            secs(futex.total_ns),
            futex.released,
            futex.timed_out,
            futex.interrupted,
            futex.unfinished
        )?;
    }
    if locks.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nLocks (futex words from waits of {} or more, kernel locks{}; most wait first, the JVM's own last):",
        secs(model.min_syscall_ns),
        match &model.vthread_wait_sums {
            Some(s) => format!(
                ", and objects virtual threads waited on unmounted for {} or more",
                secs(s.min_wait_ns)
            ),
            None => String::new(),
        }
    )?;
    for l in locks.iter().take(options.top) {
        let long = if l.jvm_internal {
            "  the JVM's own threads, waiting for work"
        } else if l.long_held(options.long_held_ns) {
            "  LONG-HELD"
        } else {
            ""
        };
        let what = l.symbol.as_deref().unwrap_or("");
        match &l.java {
            Some(j) => writeln!(
                out,
                "  {} @{:#x}: {} waits by {} {}threads, {} (max {}){long}",
                j.class,
                l.address,
                l.waits,
                l.waiters.len(),
                if l.kind == LockKind::Unmounted {
                    "virtual "
                } else {
                    ""
                },
                secs(l.wait_ns),
                secs(l.max_wait_ns)
            )?,
            None => writeln!(
                out,
                "  {} {:#x} {what}: {} waits, {} (max {}){long}",
                l.kind,
                l.address,
                l.waits,
                secs(l.wait_ns),
                secs(l.max_wait_ns)
            )?,
        }
        if let Some(owner) = l.java.as_ref().and_then(|j| j.owner.as_ref()) {
            writeln!(out, "      owner: {}", owner_label(owner))?;
        }
        if l.waiting_at_end > 0 {
            writeln!(out, "      still waiting at the end: {}", l.waiting_at_end)?;
        }
        if !l.waiters.is_empty() {
            let waiters: Vec<&str> = l.waiters.iter().take(4).map(String::as_str).collect();
            writeln!(out, "      waiters: {}", waiters.join(", "))?;
        }
        if !l.holders.is_empty() {
            let holders: Vec<String> = l
                .holders
                .iter()
                .take(4)
                .map(|(tid, name, n, ns)| format!("{name} {tid} ({n} releases, {})", secs(*ns)))
                .collect();
            writeln!(out, "      released by: {}", holders.join(", "))?;
        }
        // Both sides: where the longest wait waited, and where its holder let go.
        let plain = |labels: &[String]| -> Vec<String> {
            let frames: Vec<ShownFrame> = labels
                .iter()
                .map(|label| ShownFrame {
                    label: label.as_str().into(),
                    holds_monitor: false,
                })
                .collect();
            stack::lines(&frames, options.depth, options.full)
        };
        if !l.waiter_frames.is_empty() {
            writeln!(out, "      wait stack (longest wait):")?;
            for line in plain(&l.waiter_frames) {
                writeln!(out, "        {line}")?;
            }
        }
        if !l.holder_frames.is_empty() {
            if l.kind == LockKind::Unmounted {
                writeln!(out, "      owner's stack (waiting itself, holding it):")?;
            } else {
                writeln!(out, "      release stack (top holder):")?;
            }
            for line in plain(&l.holder_frames) {
                writeln!(out, "        {line}")?;
            }
        }
    }
    Ok(())
}

/// Virtual threads' waits off their carriers that no lock row stands for (sleeps, socket
/// I/O, parks without a blocker), by where they waited; and what was only counted.
fn write_unmounted(out: &mut String, analysis: &Analysis, options: &Options) -> std::fmt::Result {
    let model = analysis.model();
    let Some(sums) = &model.vthread_wait_sums else {
        return Ok(());
    };
    let (open, ended): (Vec<_>, Vec<_>) = model.vthread_waits.iter().partition(|w| w.unfinished);
    let total = ended
        .iter()
        .map(|w| w.duration_ns())
        .fold(0u64, u64::saturating_add);
    writeln!(
        out,
        "\nVirtual threads waiting unmounted (off their carriers, no OS thread blocked): {} waits of {} or more, {} in all; {} still waiting at the end; {} shorter ones counted ({}); {} unmounts{}{}",
        ended.len(),
        secs(sums.min_wait_ns),
        secs(total),
        open.len(),
        sums.short_waits,
        secs(sums.short_wait_ns),
        sums.unmounts,
        match sums.unmatched {
            0 => String::new(),
            n => format!("; {n} mounts whose unmount was not seen"),
        },
        match sums.stacks_skipped {
            0 => String::new(),
            n => format!("; {n} waits without their stack (copy budget)"),
        },
    )?;
    for site in crate::analysis::unmounted::other_waits(model)
        .into_iter()
        .take(options.top)
    {
        writeln!(
            out,
            "  {}: {} waits, {} (max {}):",
            site.operation.as_str().replace('_', " "),
            site.waits,
            secs(site.wait_ns),
            secs(site.max_wait_ns)
        )?;
        let shown: Vec<ShownFrame> = site
            .frames
            .iter()
            .map(|label| ShownFrame {
                label: label.as_str().into(),
                holds_monitor: false,
            })
            .collect();
        for line in stack::lines(&shown, options.depth, options.full) {
            writeln!(out, "      {line}")?;
        }
    }
    Ok(())
}

/// System call time by call, with the files the long calls used.
fn write_syscalls(out: &mut String, analysis: &Analysis, options: &Options) -> std::fmt::Result {
    let model = analysis.model();
    let rows = analysis.syscalls();
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nSystem calls (by time; long = {} or more; the JVM's own last):",
        secs(model.min_syscall_ns)
    )?;
    writeln!(
        out,
        "  {:<18} {:>9} {:>10} {:>10} {:>6}",
        "call", "calls", "time", "max", "long"
    )?;
    for r in rows.iter().take(options.top) {
        writeln!(
            out,
            "  {:<18} {:>9} {:>10} {:>10} {:>6}{}",
            truncate(&r.name, 18),
            r.events,
            secs(r.total_ns),
            secs(r.max_ns),
            r.long_events,
            if r.jvm_internal {
                "  the JVM's own threads"
            } else {
                ""
            }
        )?;
        for (file, n, ns) in r.files.iter().take(3) {
            writeln!(out, "      {n} x {} on {file}", secs(*ns))?;
        }
    }
    Ok(())
}

/// The findings first: what to know and what to change, most severe first.
fn write_findings(out: &mut String, analysis: &Analysis) -> std::fmt::Result {
    let findings = analysis.findings();
    if findings.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nFindings (most severe first):")?;
    for (i, f) in findings.iter().enumerate() {
        writeln!(out, "  {}. [{}] {}", i + 1, f.severity.as_str(), f.summary)?;
        writeln!(out, "     what to do: {}", f.advice)?;
    }
    Ok(())
}

/// ", on a pkg.Lock" for waits on monitors of known class (see `monitors::monitors_said`).
fn on_monitors(
    classes: &std::collections::BTreeSet<String>,
    class_objects: &std::collections::BTreeSet<String>,
    inits: &std::collections::BTreeSet<crate::analysis::monitors::InitWaitedFor>,
) -> String {
    crate::analysis::monitors::monitors_said(classes, class_objects, inits)
        .map(|said| format!(", {said}"))
        .unwrap_or_default()
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n).collect()
    }
}
