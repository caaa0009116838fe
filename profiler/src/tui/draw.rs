//! Drawing: the app's state as ratatui widgets. Reads `App`, never changes it.

use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Cell, Paragraph, Row, Sparkline, Table, TableState, Tabs, Wrap},
};

use super::app::{App, Status, Tab};
use crate::{
    analysis::{
        findings::{Finding, Severity},
        kinds::FrameClass,
        pinning::PinnedSite,
        stacks::StackLabels,
    },
    report::{runtime_label, secs},
};

pub fn draw(frame: &mut Frame, app: &App) {
    let [header, tabs, body, footer] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(1),
        Constraint::Min(5),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    draw_header(frame, header, app);
    // Below this, the tables' columns squeeze into nonsense: the header (with any alert)
    // still shows, and says what is missing.
    const MIN: (u16, u16) = (80, 20);
    let area = frame.area();
    if area.width < MIN.0 || area.height < MIN.1 {
        frame.render_widget(
            Paragraph::new(format!(
                "The terminal is {}x{}; the views need {}x{} or more.",
                area.width, area.height, MIN.0, MIN.1
            ))
            .wrap(Wrap { trim: true }),
            body,
        );
        return;
    }
    let titles = Tab::ALL
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{} {}", i + 1, t.title()));
    frame.render_widget(
        Tabs::new(titles)
            .select(app.tab.index())
            .highlight_style(Style::new().bold().reversed()),
        tabs,
    );
    match app.tab {
        Tab::Overview => draw_overview(frame, body, app),
        Tab::Pinned => draw_pinned(frame, body, app),
        Tab::Threads => draw_threads(frame, body, app),
        Tab::Locks => draw_locks(frame, body, app),
        Tab::Syscalls => draw_syscalls(frame, body, app),
    }
    // The latest warning; all of them are printed when the view ends.
    let warnings = app.model.as_ref().map_or(&[][..], |m| &m.warnings[..]);
    let warning = warnings.last().map(|w| {
        let more = match warnings.len() {
            1 => String::new(),
            n => format!(" ({n} warnings)"),
        };
        Span::styled(format!("  warning{more}: {w}"), Style::new().yellow())
    });
    let mut keys = vec![Span::styled(
        "q quit  Tab/1-5 view  ↑↓ select",
        Style::new().dim(),
    )];
    keys.extend(warning);
    frame.render_widget(Paragraph::new(Line::from(keys)), footer);
}

fn draw_header(frame: &mut Frame, area: Rect, app: &App) {
    let Some(model) = &app.model else {
        frame.render_widget(Paragraph::new("waiting for the recording to start"), area);
        return;
    };
    let mut runtime = runtime_label(model).map_or(String::new(), |r| format!(" · {r}"));
    if let Some(p) = model.target.runtime.as_ref().and_then(|r| r.parallelism) {
        runtime += &format!(" · parallelism {p}");
    }
    let (state, color) = match &app.status {
        Status::Running if app.live => ("● live".to_string(), Color::Green),
        Status::Running => ("▶ replaying".to_string(), Color::Green),
        Status::Ended(reason) => (format!("■ ended: {reason}"), Color::Blue),
        Status::Cut => ("■ ended without an end marker".to_string(), Color::Yellow),
    };
    if let Some(c) = &model.container {
        runtime += &format!(" · container pidns {} pid {}", c.pid_ns_inode, c.ns_pid);
        if let Some(cgroup) = &c.cgroup {
            let cpu = c.cpu_max.as_deref().unwrap_or("-");
            runtime += &format!(" · cgroup {cgroup} cpu.max {cpu}");
        }
    }
    let lost = model.counters.lost();
    let first = Line::from(vec![
        Span::styled("pinprof ", Style::new().bold()),
        Span::raw(format!(
            "pid {} {}{runtime}",
            model.target.pid, model.target.command
        )),
        Span::raw(" · "),
        Span::styled(state, Style::new().fg(color).bold()),
        Span::raw(format!(" {}", secs(model.duration_ns()))),
    ]);
    // Alerts first: a long recording path must never push them off a narrow terminal.
    let mut second = Vec::new();
    let running = app.live && app.status == Status::Running;
    if let (true, Some((for_ns, carriers))) = (running, app.view.starving_now) {
        let which = match carriers {
            1 => "the only carrier".to_string(),
            n => format!("all {n} carriers"),
        };
        let waiting = app
            .view
            .queued_now
            .map(|n| format!(", {n} virtual threads waiting to run"))
            .unwrap_or_default();
        second.push(Span::styled(
            format!(
                "STARVING NOW: {which} pinned or blocked for {}{waiting}",
                secs(for_ns)
            ),
            Style::new().white().on_red().bold(),
        ));
    } else if running && app.starved_lately() {
        second.push(Span::styled(
            "carriers starved just now (every one pinned or blocked)",
            Style::new().red().bold(),
        ));
    }
    // Events arrive at least every second (checkpoints); more than this behind is a view
    // that cannot keep up, not a quiet target.
    let lag = app.lag_ns();
    if lag > 3_000_000_000 {
        second.push(Span::styled(
            format!("view {} behind", secs(lag)),
            Style::new().yellow().bold(),
        ));
    }
    if lost > 0 {
        second.push(Span::styled(
            format!("{lost} lost events"),
            Style::new().red().bold(),
        ));
    }
    let mut source = format!("{} · {} records", app.source, app.records);
    if lost == 0 {
        source += " · 0 lost events";
    }
    second.push(Span::raw(source));
    let second: Vec<Span> = second
        .into_iter()
        .enumerate()
        .flat_map(|(i, span)| (i > 0).then(|| Span::raw(" · ")).into_iter().chain([span]))
        .collect();
    let second = Line::from(second);
    frame.render_widget(
        Paragraph::new(vec![first, second, finding_line(&app.view.findings)]),
        area,
    );
}

/// The most severe finding, in one line (the report and JSON have them all).
fn finding_line(findings: &[Finding]) -> Line<'static> {
    let Some(top) = findings.first() else {
        return Line::styled("no findings", Style::new().dim());
    };
    let style = match top.severity {
        Severity::Critical => Style::new().red().bold(),
        Severity::Warning => Style::new().yellow(),
        Severity::Info => Style::new(),
    };
    let more = match findings.len() {
        1 => String::new(),
        n => format!(" (1 of {n})"),
    };
    Line::from(vec![
        Span::styled(format!("{}{more}: ", top.severity.as_str()), style),
        Span::raw(top.summary.clone()),
    ])
}

/// Carriers first: their time, pinning over time, starvation, and the worst pinned sites.
fn draw_overview(frame: &mut Frame, area: Rect, app: &App) {
    let view = &app.view;
    let carriers: Vec<_> = view.carriers().collect();
    let [table, timeline, summary, sites] = Layout::vertical([
        Constraint::Length(
            u16::try_from(carriers.len().max(1)).map_or(u16::MAX, |n| n.saturating_add(3)),
        ),
        Constraint::Length(5),
        Constraint::Length(
            2 + u16::from(view.throttling.is_some())
                + u16::try_from(view.cpu_lines.len()).unwrap_or(0),
        ),
        Constraint::Min(3),
    ])
    .areas(area);
    let rows = carriers.iter().map(|t| {
        // Of the carrier's own time (it may have come after attach), as far as it is known.
        let life = crate::model::total([
            t.pinned_ns,
            t.blocked_ns,
            t.idle_ns,
            t.running_ns,
            t.preempted_ns,
        ]);
        let share = t.pinned_ns as f64 * 100.0 / life.max(1) as f64;
        Row::new(vec![
            Cell::from(t.tid.to_string()),
            Cell::from(t.name.clone()),
            Cell::from(secs(t.pinned_ns)).style(if t.pinned_ns > 0 {
                Style::new().red()
            } else {
                Style::new()
            }),
            Cell::from(format!("{share:.1}%")),
            Cell::from(secs(t.blocked_ns)),
            Cell::from(secs(t.idle_ns)),
            Cell::from(secs(t.running_ns)),
        ])
    });
    let jvm = app
        .model
        .as_ref()
        .is_some_and(|m| m.target.runtime.is_some());
    let title = if !jvm {
        " Carriers: the target is not a HotSpot JVM (threads, locks, system calls: views 3-5) "
            .to_string()
    } else if carriers.is_empty() {
        " Carriers: none known yet (no virtual thread has run, or see the warnings) ".to_string()
    } else {
        let parallelism = app
            .model
            .as_ref()
            .and_then(|m| m.target.runtime.as_ref())
            .and_then(|r| r.parallelism)
            .map_or(String::new(), |p| format!(", parallelism {p}"));
        format!(" Carriers ({}{parallelism}) ", carriers.len())
    };
    let columns = [
        ("tid", Constraint::Length(8)),
        ("name", Constraint::Min(20)),
        ("pinned", Constraint::Length(10)),
        ("pinned%", Constraint::Length(8)),
        ("blocked", Constraint::Length(10)),
        ("idle", Constraint::Length(10)),
        ("running", Constraint::Length(10)),
    ];
    draw_table(frame, table, app, title, &columns, rows);

    // The latest seconds that fit, newest on the right.
    let width = timeline.width.saturating_sub(2) as usize;
    let per_second = &view.pinned_per_second;
    let shown = &per_second[per_second.len().saturating_sub(width)..];
    let peak = shown.iter().copied().max().unwrap_or(0);
    // The seconds the CPU quota throttled the target, marked under the same seconds.
    let throttled = view
        .throttled_per_second
        .get(per_second.len().saturating_sub(width)..)
        .unwrap_or_default();
    let marked = throttled.iter().filter(|ms| **ms > 0).count();
    let title = if marked > 0 {
        format!(
            " Carrier time pinned per second (peak {peak} ms, last {} s); \u{2580} CPU quota throttled ({marked} s) ",
            shown.len()
        )
    } else {
        format!(
            " Carrier time pinned per second (peak {peak} ms, last {} s) ",
            shown.len()
        )
    };
    let block = Block::bordered().title(title);
    let inner = block.inner(timeline);
    frame.render_widget(block, timeline);
    let (spark, marks) = if marked > 0 {
        let [spark, marks] =
            Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(inner);
        (spark, Some(marks))
    } else {
        (inner, None)
    };
    frame.render_widget(
        Sparkline::default().data(shown).style(Style::new().red()),
        spark,
    );
    if let Some(marks) = marks {
        let line: String = throttled
            .iter()
            .map(|ms| if *ms > 0 { '\u{2580}' } else { ' ' })
            .collect();
        frame.render_widget(
            Paragraph::new(Line::styled(line, Style::new().yellow().bold())),
            marks,
        );
    }

    let note = app.window_note();
    let starvation = if let (0, Some((for_ns, _))) = (view.episodes, view.starving_now) {
        Line::from(Span::styled(
            format!(
                "Starvation{note}: under way for {} (every carrier pinned or blocked); none \
                 has ended yet",
                secs(for_ns)
            ),
            Style::new().red().bold(),
        ))
    } else if view.episodes == 0 {
        Line::from(format!(
            "Starvation{note}: none (never were all carriers pinned or blocked at once)"
        ))
    } else {
        use crate::analysis::starvation::Cause;
        // Said as before when every episode is pinning; else by cause.
        let pinning_only = view
            .starvation_causes
            .iter()
            .all(|(c, _)| matches!(c, Cause::Pinned | Cause::Blocked));
        let what = if pinning_only {
            "every carrier pinned or blocked".to_string()
        } else {
            let causes: Vec<String> = view
                .starvation_causes
                .iter()
                .map(|(c, ns)| format!("{} {}", c.as_str(), secs(*ns)))
                .collect();
            format!("no carrier free ({})", causes.join(", "))
        };
        Line::from(Span::styled(
            format!(
                "Starvation{note}: {what} for {} in {} episodes (longest {}): no other \
                 virtual thread could run then",
                secs(view.starved_ns),
                view.episodes,
                secs(view.longest_starvation_ns)
            ),
            Style::new().red().bold(),
        ))
    };
    let pinned = Line::from(format!(
        "Pinned{note}: {} events, {} in all, at {} sites",
        view.pinned_events,
        secs(view.pinned_ns),
        view.sites.len()
    ));
    let mut lines = vec![starvation, pinned];
    if let Some(throttling) = &view.throttling {
        let style = if view.throttled_per_second.iter().any(|ms| *ms > 0) {
            Style::new().yellow().bold()
        } else {
            Style::new()
        };
        lines.push(Line::styled(format!("{throttling}{note}"), style));
    }
    lines.extend(view.cpu_lines.iter().map(|l| Line::from(l.as_str())));
    frame.render_widget(Paragraph::new(lines), summary);

    let lines: Vec<Line> = view
        .sites
        .iter()
        .take(sites.height.saturating_sub(2) as usize)
        .map(|s| {
            Line::from(vec![
                Span::styled(
                    format!("{:<10} {:<13}", s.reason.as_str(), s.operation.as_str()),
                    Style::new().red(),
                ),
                Span::raw(format!(
                    "{:>7} {:>9}  ",
                    format!("x{}", s.events),
                    secs(s.total_ns)
                )),
                Span::styled(site_label(s), Style::new().bold()),
            ])
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" Top pinned sites (2 for stacks) ")),
        sites,
    );
}

fn draw_pinned(frame: &mut Frame, area: Rect, app: &App) {
    let view = &app.view;
    let [table, detail] =
        Layout::vertical([Constraint::Percentage(35), Constraint::Min(4)]).areas(area);
    let rows = view.sites.iter().map(|s| {
        Row::new(vec![
            Cell::from(s.reason.as_str()),
            Cell::from(s.operation.as_str()),
            Cell::from(s.events.to_string()),
            Cell::from(secs(s.total_ns)),
            Cell::from(secs(s.max_ns)),
            Cell::from(s.virtual_threads.len().to_string()),
            Cell::from(s.carriers.len().to_string()),
            Cell::from(site_label(s)),
        ])
    });
    let columns = [
        ("reason", Constraint::Length(11)),
        ("operation", Constraint::Length(14)),
        ("events", Constraint::Length(8)),
        ("total", Constraint::Length(9)),
        ("max", Constraint::Length(9)),
        ("vthreads", Constraint::Length(9)),
        ("carriers", Constraint::Length(8)),
        ("site", Constraint::Min(20)),
    ];
    draw_table(
        frame,
        table,
        app,
        format!(
            " Pinned sites{}: {} events, {} ",
            app.window_note(),
            view.pinned_events,
            secs(view.pinned_ns)
        ),
        &columns,
        rows,
    );
    let site = view.sites.get(app.selected());
    let said = site.and_then(|s| {
        crate::analysis::monitors::monitors_said(
            &s.monitor_classes,
            &s.class_monitors,
            &s.class_inits,
        )
    });
    let title = match said {
        Some(said) => format!(" Stack (innermost first) · {said} "),
        None => " Stack (innermost first) ".to_string(),
    };
    draw_stack(frame, detail, &title, site.map(|s| &s.stack));
}

fn draw_threads(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.view.active_threads().map(|t| {
        Row::new(vec![
            Cell::from(t.tid.to_string()),
            Cell::from(t.name.clone()),
            Cell::from(t.role.as_str()),
            Cell::from(secs(t.blocked_ns)),
            Cell::from(secs(t.pinned_ns)),
            Cell::from(secs(t.idle_ns)),
            Cell::from(secs(t.running_ns)),
            Cell::from(secs(t.preempted_ns)),
            Cell::from(t.intervals.to_string()),
        ])
    });
    let columns = [
        ("tid", Constraint::Length(8)),
        ("name", Constraint::Min(20)),
        ("role", Constraint::Length(8)),
        ("blocked", Constraint::Length(10)),
        ("pinned", Constraint::Length(10)),
        ("idle", Constraint::Length(10)),
        ("running", Constraint::Length(10)),
        ("preempted", Constraint::Length(10)),
        ("intervals", Constraint::Length(10)),
    ];
    draw_table(
        frame,
        area,
        app,
        " Threads (most blocked or pinned first) ",
        &columns,
        rows,
    );
}

fn draw_locks(frame: &mut Frame, area: Rect, app: &App) {
    let [table, detail] =
        Layout::vertical([Constraint::Percentage(45), Constraint::Min(4)]).areas(area);
    let rows = app.view.locks.iter().map(|l| {
        let waiters = l.waiters.iter().cloned().collect::<Vec<_>>().join(", ");
        // A java.util.concurrent lock says its class and owner; a futex word its address.
        let owner = l.java.as_ref().and_then(|j| j.owner.as_ref());
        let holder = match owner {
            Some(o) => format!("owner: {}", crate::report::owner_label(o)),
            None => l
                .holders
                .first()
                .map_or(String::new(), |(_, name, n, _)| format!("{name} ({n})")),
        };
        let what = match (&l.java, &l.symbol) {
            (Some(j), _) => j.class.clone(),
            (None, Some(symbol)) => symbol.clone(),
            (None, None) => format!("{:#x}", l.address),
        };
        Row::new(vec![
            Cell::from(l.kind.as_str()),
            Cell::from(what),
            Cell::from(l.waits.to_string()),
            Cell::from(secs(l.wait_ns)),
            Cell::from(secs(l.max_wait_ns)),
            // The JVM's own threads waiting for work, marked as such (they are listed last).
            Cell::from(if l.jvm_internal {
                format!("(JVM) {waiters}")
            } else {
                waiters
            }),
            Cell::from(holder),
        ])
    });
    let columns = [
        ("kind", Constraint::Length(7)),
        ("lock", Constraint::Length(18)),
        ("waits", Constraint::Length(7)),
        ("total", Constraint::Length(9)),
        ("max", Constraint::Length(9)),
        ("waiters", Constraint::Min(16)),
        ("top holder", Constraint::Min(16)),
    ];
    draw_table(
        frame,
        table,
        app,
        format!(" Locks (most wait time first){} ", app.window_note()),
        &columns,
        rows,
    );
    let [release, wait] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(detail);
    let lock = app.view.locks.get(app.selected());
    frame.render_widget(
        Paragraph::new(plain_lines(lock.map(|l| l.holder_frames.as_slice())))
            .block(Block::bordered().title(" Holder's stack as it released ")),
        release,
    );
    frame.render_widget(
        Paragraph::new(plain_lines(lock.map(|l| l.waiter_frames.as_slice())))
            .block(Block::bordered().title(" Longest waiter's stack ")),
        wait,
    );
}

fn draw_syscalls(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.view.syscalls.iter().map(|s| {
        let file = s
            .files
            .first()
            .map_or(String::new(), |(name, n, _)| format!("{name} ({n})"));
        Row::new(vec![
            Cell::from(s.name.clone()),
            Cell::from(s.events.to_string()),
            Cell::from(secs(s.total_ns)),
            Cell::from(secs(s.max_ns)),
            Cell::from(s.long_events.to_string()),
            Cell::from(file),
        ])
    });
    let long = app
        .model
        .as_ref()
        .map(|m| m.min_syscall_ns)
        .filter(|&ns| ns > 0)
        .map_or(" (not traced) ".to_string(), |ns| {
            format!(" (long: at least {}) ", secs(ns))
        });
    let columns = [
        ("call", Constraint::Length(18)),
        ("calls", Constraint::Length(10)),
        ("total", Constraint::Length(10)),
        ("max", Constraint::Length(10)),
        ("long", Constraint::Length(8)),
        ("top file (long calls)", Constraint::Min(20)),
    ];
    draw_table(
        frame,
        area,
        app,
        format!(" System calls by time{}{long}", app.window_note()),
        &columns,
        rows,
    );
}

/// A stack, innermost first: Java frames bold, the frame that holds the monitor marked.
fn draw_stack(frame: &mut Frame, area: Rect, title: &str, stack: Option<&StackLabels>) {
    let lines: Vec<Line> = stack.map_or_else(Vec::new, |stack| {
        // The kernel and native frames on top say how it waits, the Java ones where: folded
        // into one line, so that the Java frames fit in a small panel.
        let native = |i: usize| stack.frame_kinds.get(i).is_some_and(|k| k.is_native());
        let on_top = (0..stack.frames.len()).take_while(|&i| native(i)).count();
        let folded = (on_top > 1 && on_top < stack.frames.len()).then(|| {
            Line::from(Span::styled(
                format!(
                    "{} … {}  ({on_top} kernel and native frames)",
                    stack.frames[0],
                    stack.frames[on_top - 1]
                ),
                Style::new().dim(),
            ))
        });
        let skip = if folded.is_some() { on_top } else { 0 };
        folded
            .into_iter()
            .chain(stack.frames.iter().enumerate().skip(skip).map(|(i, name)| {
                let kind = stack.frame_kinds.get(i).copied();
                let style = match kind {
                    Some(FrameClass::Kernel | FrameClass::Native) => Style::new().dim(),
                    Some(FrameClass::Jit | FrameClass::Stub | FrameClass::VmCall) => Style::new(),
                    _ => Style::new().add_modifier(Modifier::BOLD),
                };
                let kind = kind.map_or("", FrameClass::as_str);
                let mut spans = vec![Span::styled(name.clone(), style)];
                if stack.monitor_frames.contains(&i) {
                    spans.push(Span::styled("  [holds monitor]", Style::new().red()));
                }
                spans.push(Span::styled(format!("  {kind}"), Style::new().dim()));
                Line::from(spans)
            }))
            .collect()
    });
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(title.to_string())),
        area,
    );
}

fn plain_lines(texts: Option<&[String]>) -> Vec<Line<'_>> {
    texts
        .unwrap_or_default()
        .iter()
        .map(|t| Line::from(t.as_str()))
        .collect()
}

/// Rows under a bold header in a titled box, the selected one highlighted.
fn draw_table<'a>(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    title: impl Into<Line<'a>>,
    columns: &[(&'static str, Constraint)],
    rows: impl IntoIterator<Item = Row<'a>>,
) {
    let header = Row::new(columns.iter().map(|(name, _)| Cell::from(*name)))
        .style(Style::new().bold().underlined());
    let table = Table::new(rows, columns.iter().map(|(_, width)| *width))
        .header(header)
        .block(Block::bordered().title(title))
        .row_highlight_style(Style::new().reversed());
    let mut state = TableState::default().with_selected(Some(app.selected()));
    frame.render_stateful_widget(table, area, &mut state);
}

/// What a pinned site is called in one line: the frame that holds the monitor (where the
/// fix goes), then the innermost Java frame (what it waits in).
pub fn site_label(site: &PinnedSite) -> String {
    let stack = &site.stack;
    // A Java method: not a stub or a call from the VM, which say how, not where.
    let is_method = |i: &usize| {
        stack
            .frame_kinds
            .get(*i)
            .is_some_and(|k| k.is_java_method())
    };
    let holder = stack.monitor_frames.first().copied();
    let java = (0..stack.frames.len()).find(is_method);
    let lock = crate::analysis::monitors::monitors_said(
        &site.monitor_classes,
        &site.class_monitors,
        &site.class_inits,
    )
    .map(|said| format!(" · {said}"))
    .unwrap_or_default();
    let label = match (holder, java) {
        (Some(h), Some(j)) if h != j => {
            format!("{} [monitor] → {}", stack.frames[h], stack.frames[j])
        }
        (Some(i), _) => format!("{} [monitor]", stack.frames[i]),
        (None, Some(i)) => stack.frames[i].clone(),
        // A stub or a call from the VM, else no Java stack: kernel frames say nothing here.
        (None, None) => (0..stack.frames.len())
            .find(|&i| !stack.frame_kinds.get(i).is_some_and(|k| k.is_native()))
            .map_or_else(
                || crate::analysis::stacks::NO_JAVA_STACK.into(),
                |i| stack.frames[i].clone(),
            ),
    };
    label + &lock
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(frames: &[(&str, FrameClass)], monitor_frames: Vec<usize>) -> PinnedSite {
        let stack = StackLabels {
            frames: frames.iter().map(|(f, _)| f.to_string()).collect(),
            frame_kinds: frames.iter().map(|(_, k)| *k).collect(),
            monitor_frames,
            lines: vec![None; frames.len()],
        };
        use crate::analysis::classify::{Operation, Reason};
        PinnedSite {
            events: 1,
            total_ns: 1,
            max_ns: 1,
            ..PinnedSite::new(Reason::Monitor, Operation::Park, stack)
        }
    }

    #[test]
    fn a_site_is_named_by_its_monitor_holder_then_where_it_waits() {
        let frames = [
            ("futex_wait", FrameClass::Kernel),
            ("jdk.internal.misc.Unsafe.park", FrameClass::JavaNative),
            ("java.lang.Thread.sleep", FrameClass::Interpreted),
            ("Shop.buy", FrameClass::Compiled),
        ];
        assert_eq!(
            site_label(&site(&frames, vec![3])),
            "Shop.buy [monitor] → jdk.internal.misc.Unsafe.park"
        );
        assert_eq!(
            site_label(&site(&frames, Vec::new())),
            "jdk.internal.misc.Unsafe.park"
        );
        assert_eq!(
            site_label(&site(&frames[..1], Vec::new())),
            crate::analysis::stacks::NO_JAVA_STACK
        );
        // A stub says how it blocked, not where; the lock's class says on what.
        let mut entering = site(
            &[
                ("futex_wait", FrameClass::Kernel),
                ("[monitorenter_nofpu Runtime1 stub]", FrameClass::Stub),
                ("Shop$Till.ring", FrameClass::Compiled),
            ],
            Vec::new(),
        );
        entering.monitor_classes.insert("Shop$Till".into());
        assert_eq!(site_label(&entering), "Shop$Till.ring · on a Shop$Till");
    }
}
