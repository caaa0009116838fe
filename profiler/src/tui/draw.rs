//! Drawing: the app's state as ratatui widgets. Reads `App`, never changes it.

use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Cell, Clear, Paragraph, Row, Sparkline, Table, TableState, Tabs, Wrap},
};

use super::{
    app::{App, Status, Tab},
    keys,
    lanes::State,
    timeline::{Range, cell_label},
};
use crate::{
    analysis::{
        findings::{Finding, Severity},
        kinds::FrameClass,
        pinning::PinnedSite,
        stacks::StackLabels,
    },
    report::{runtime_label, secs},
};

/// The smallest terminal the views are drawn in.
const MIN: (u16, u16) = (80, 20);

/// Width of a lane's label: a carrier's short name, or a thread's.
fn label_width(width: u16) -> usize {
    if width >= 120 { 24 } else { 12 }
}

/// Cells across the swimlanes on a terminal `width` columns wide (the app sizes its
/// cursor's steps by it).
pub fn lane_cells(width: u16) -> usize {
    usize::from(width.max(MIN.0))
        .saturating_sub(2 + label_width(width))
        .max(10)
}

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
    let short = area.width < 100;
    let titles = Tab::ALL.iter().enumerate().map(|(i, t)| {
        let title = if short { t.short_title() } else { t.title() };
        format!("{} {title}", i + 1)
    });
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
        Tab::Lanes => draw_thread_lanes(frame, body, app),
    }
    draw_footer(frame, footer, app);
    if let Some(popup) = &app.popup {
        draw_popup(frame, body, &popup.title, &popup.lines);
    }
    if app.help {
        // Over everything but the footer: two columns of keys fit 80 x 20.
        let [screen, _] =
            Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(frame.area());
        draw_help(frame, screen);
    }
}

/// The keys, the filter being typed, what a key just did, or the latest warning.
fn draw_footer(frame: &mut Frame, area: Rect, app: &App) {
    if app.typing {
        let line = Line::from(vec![
            Span::styled("filter: ", Style::new().bold()),
            Span::raw(app.filter.clone()),
            Span::styled("▏ (Enter keeps it, Esc clears it)", Style::new().dim()),
        ]);
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    // What a key just did comes first: the keys are in the help.
    let mut spans = Vec::new();
    if let Some(message) = &app.message {
        spans.push(Span::styled(
            format!("{message}  "),
            Style::new().cyan().bold(),
        ));
    }
    if !app.filter.is_empty() {
        spans.push(Span::styled(
            format!("filter: {} (Esc clears)  ", app.filter),
            Style::new().cyan().bold(),
        ));
    }
    spans.push(Span::styled(
        "? help  q quit  Tab view  ←→ cursor  space play  n/N starvation  z/Z zoom",
        Style::new().dim(),
    ));
    // The latest warning; all of them are printed when the view ends.
    let warnings = app.model.as_ref().map_or(&[][..], |m| &m.warnings[..]);
    if let Some(w) = warnings.last() {
        let more = match warnings.len() {
            1 => String::new(),
            n => format!(" ({n} warnings)"),
        };
        spans.push(Span::styled(
            format!("  warning{more}: {w}"),
            Style::new().yellow(),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// A box over the middle of `area`, cleared first.
fn overlay(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

/// Every key the view takes, from the key table itself.
fn draw_help(frame: &mut Frame, area: Rect) {
    let bindings = keys::help_lines();
    let keys_width = bindings
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let lines: Vec<String> = bindings
        .iter()
        .map(|(k, help)| format!("{k:<keys_width$}  {help}"))
        .collect();
    // Two columns when one does not fit the height.
    let inner_height = usize::from(area.height.saturating_sub(2)).max(1);
    let columns = lines.len().div_ceil(inner_height).max(1);
    let per_column = lines.len().div_ceil(columns);
    let column_width = usize::from(area.width.saturating_sub(2)) / columns;
    let rows: Vec<Line> = (0..per_column)
        .map(|r| {
            let text: String = (0..columns)
                .filter_map(|c| lines.get(c * per_column + r))
                .map(|l| {
                    let l: String = l.chars().take(column_width.saturating_sub(1)).collect();
                    format!("{l:<column_width$}")
                })
                .collect();
            Line::from(text.trim_end().to_string())
        })
        .collect();
    let widest = if columns == 1 {
        lines.iter().map(|l| l.chars().count()).max().unwrap_or(0) + 2
    } else {
        usize::from(area.width)
    };
    let rect = overlay(
        area,
        u16::try_from(widest).unwrap_or(u16::MAX),
        u16::try_from(per_column + 2).unwrap_or(u16::MAX),
    );
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(rows).block(Block::bordered().title(" Keys (any key closes) ")),
        rect,
    );
}

fn draw_popup(frame: &mut Frame, area: Rect, title: &str, lines: &[String]) {
    let title = format!("{title}(Esc closes) ");
    let width = lines
        .iter()
        .map(|l| l.chars().count())
        .chain([title.chars().count()])
        .max()
        .unwrap_or(0)
        + 2;
    let rect = overlay(
        area,
        u16::try_from(width).unwrap_or(u16::MAX),
        u16::try_from(lines.len() + 2).unwrap_or(u16::MAX),
    );
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(
            lines
                .iter()
                .map(|l| Line::from(l.as_str()))
                .collect::<Vec<_>>(),
        )
        .block(Block::bordered().title(title)),
        rect,
    );
}

/// How a cell in this state is drawn: a glyph that tells it without colour, and a colour.
fn glyph(state: Option<State>) -> (char, Style) {
    match state {
        Some(State::Pinned) => ('█', Style::new().red()),
        Some(State::Blocked) => ('▓', Style::new().yellow()),
        Some(State::Monopolized) => ('▞', Style::new().magenta()),
        Some(State::Preempted) => ('░', Style::new().blue()),
        Some(State::Running) => ('▒', Style::new().green()),
        Some(State::Idle) => ('·', Style::new().dim()),
        None => (' ', Style::new()),
    }
}

/// The legend, as the lanes' bottom title.
fn legend() -> Line<'static> {
    let mut spans = vec![Span::raw(" ")];
    for state in State::ALL {
        let (c, style) = glyph(Some(state));
        let name = match state {
            State::Preempted => "CPU wait",
            s => s.as_str(),
        };
        spans.push(Span::styled(c.to_string(), style));
        spans.push(Span::raw(format!(" {name}  ")));
    }
    spans.push(Span::styled("▄", Style::new().red().bold()));
    spans.push(Span::raw(" starved "));
    Line::from(spans)
}

/// A lane's label: a carrier by its worker number, any other thread by its name.
fn lane_label(name: &str, width: usize) -> String {
    let short = name
        .rfind("worker-")
        .filter(|_| width < 20)
        .map_or(name, |i| &name[i..]);
    let short: String = short.chars().take(width.saturating_sub(1)).collect();
    format!("{short:<width$}")
}

/// The swimlanes of `tids` (those from `first` on that fit), with the cursor's line, the
/// starvation row, and the time axis, in a titled box.
fn draw_lanes(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    title: String,
    tids: &[(u32, String)],
    selected: Option<usize>,
) {
    let (start, end) = app.bounds();
    let range = app.timeline.range(start, end);
    let width = label_width(frame.area().width);
    let block = Block::bordered()
        .title(format!(
            "{title}· {}/cell · {}-{} ",
            cell_label(range.cell_ns),
            app.at(range.from_ns),
            app.at(range.end_ns())
        ))
        .title_bottom(legend());
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let cursor = range.cell_of(app.cursor_in_window());
    let mut lines = Vec::from(cursor_lines(app, tids.get(selected.unwrap_or(0))));
    // Starvation, and the CPU quota's throttling, across every lane. Starvation by the
    // share of each cell it took: hundreds of short episodes do not make a solid row, and
    // only cells mostly starved get the lanes' red ground.
    let starved_share = shares(
        &range,
        app.whole
            .episode_marks
            .iter()
            .map(|e| (e.start_ns, e.end_ns)),
    );
    let starved: Vec<bool> = starved_share.iter().map(|s| *s >= 0.5).collect();
    lines.push(share_line(
        "starved",
        width,
        &starved_share,
        Style::new().red().bold(),
        cursor,
    ));
    if app.whole.throttled_per_second.iter().any(|ms| *ms > 0) {
        let origin = app.model.as_ref().map_or(0, |m| m.start_mono_ns);
        let first = app.whole.first_second;
        let seconds = app
            .whole
            .throttled_per_second
            .iter()
            .enumerate()
            .filter(|(_, ms)| **ms > 0)
            .map(|(i, _)| {
                let s = origin + (first + i as u64) * 1_000_000_000;
                (s, s + 1_000_000_000)
            });
        let throttled = marks(&range, seconds);
        lines.push(row_line(
            "throttled",
            width,
            &throttled,
            '▀',
            Style::new().yellow().bold(),
            cursor,
        ));
    }
    let room = usize::from(inner.height).saturating_sub(lines.len() + 1);
    // The selected lane stays in sight.
    let first = selected.map_or(0, |s| s.saturating_sub(room.saturating_sub(1)));
    for (i, (tid, name)) in tids.iter().enumerate().skip(first).take(room) {
        let cells = app
            .lanes
            .cells(*tid, range.from_ns, range.cell_ns, range.cells);
        let label_style = if Some(i) == selected {
            Style::new().reversed()
        } else {
            Style::new()
        };
        let mut spans = vec![Span::styled(lane_label(name, width), label_style)];
        for (c, cell) in cells.iter().enumerate() {
            let (ch, mut style) = glyph(cell.state());
            // Starvation across every lane: a dark red ground.
            if starved.get(c).copied().unwrap_or(false) {
                style = style.bg(Color::Indexed(52));
            }
            if Some(c) == cursor {
                style = style.add_modifier(Modifier::REVERSED);
            }
            spans.push(Span::styled(ch.to_string(), style));
        }
        lines.push(Line::from(spans));
    }
    lines.push(axis(app, &range, width, cursor));
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The cells of `range` that any of `spans` overlaps.
fn marks(range: &Range, spans: impl Iterator<Item = (u64, u64)>) -> Vec<bool> {
    let mut marked = vec![false; range.cells];
    let to = range.end_ns();
    for (a, b) in spans {
        if b <= range.from_ns || a >= to {
            continue;
        }
        let first = (a.max(range.from_ns) - range.from_ns) / range.cell_ns.max(1);
        let last = (b.min(to) - 1 - range.from_ns) / range.cell_ns.max(1);
        for i in first..=last {
            if let Some(m) = marked.get_mut(i as usize) {
                *m = true;
            }
        }
    }
    marked
}

/// The share of each cell of `range` that `spans` (disjoint) cover, from 0 to 1.
fn shares(range: &Range, spans: impl Iterator<Item = (u64, u64)>) -> Vec<f64> {
    let cell_ns = range.cell_ns.max(1);
    let mut covered = vec![0u64; range.cells];
    let to = range.end_ns();
    for (a, b) in spans {
        let (a, b) = (a.max(range.from_ns), b.min(to));
        if a >= b {
            continue;
        }
        let first = (a - range.from_ns) / cell_ns;
        let last = (b - 1 - range.from_ns) / cell_ns;
        for i in first..=last {
            let c0 = range.from_ns + i * cell_ns;
            if let Some(n) = covered.get_mut(i as usize) {
                *n = n.saturating_add(b.min(c0 + cell_ns) - a.max(c0));
            }
        }
    }
    covered
        .into_iter()
        .map(|n| (n as f64 / cell_ns as f64).min(1.0))
        .collect()
}

/// A row of bars, each as high as its cell's share (eighths; any share at least one).
fn share_line(
    label: &str,
    width: usize,
    share: &[f64],
    style: Style,
    cursor: Option<usize>,
) -> Line<'static> {
    const BARS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let mut spans = vec![Span::styled(lane_label(label, width), Style::new().dim())];
    for (i, s) in share.iter().enumerate() {
        let eighths = if *s > 0.0 {
            ((s * 8.0).ceil() as usize).clamp(1, 8)
        } else {
            0
        };
        let style = if Some(i) == cursor {
            style.add_modifier(Modifier::REVERSED)
        } else {
            style
        };
        spans.push(Span::styled(BARS[eighths].to_string(), style));
    }
    Line::from(spans)
}

fn row_line(
    label: &str,
    width: usize,
    marked: &[bool],
    ch: char,
    style: Style,
    cursor: Option<usize>,
) -> Line<'static> {
    let mut spans = vec![Span::styled(lane_label(label, width), Style::new().dim())];
    for (i, m) in marked.iter().enumerate() {
        let c = if *m { ch } else { ' ' };
        let style = if Some(i) == cursor {
            style.add_modifier(Modifier::REVERSED)
        } else {
            style
        };
        spans.push(Span::styled(c.to_string(), style));
    }
    Line::from(spans)
}

/// Ticks every few cells, with the time, and the cursor's cell marked.
fn axis(app: &App, range: &Range, width: usize, cursor: Option<usize>) -> Line<'static> {
    let mut text: Vec<char> = vec![' '; range.cells];
    // A tick every `every` cells: a round time (of the zoom's ladder), 12 columns or more
    // apart.
    let every = super::timeline::LADDER
        .iter()
        .map(|t| (*t / range.cell_ns.max(1)) as usize)
        .find(|k| *k >= 12)
        .unwrap_or(range.cells);
    let start = app.model.as_ref().map_or(0, |m| m.start_mono_ns);
    let step = every as u64 * range.cell_ns;
    let first = range.from_ns.saturating_sub(start).div_ceil(step.max(1)) * step;
    let mut t = first;
    while let Some(i) = range.cell_of(start + t).filter(|_| step > 0) {
        text[i] = '|';
        for (j, c) in app.at(start + t).chars().enumerate() {
            if let Some(slot) = text.get_mut(i + 1 + j) {
                *slot = c;
            }
        }
        t += step;
    }
    // The marked span, under the lanes.
    if let Some(mark) = app.timeline.mark_ns {
        let (a, b) = (
            mark.min(app.timeline.cursor_ns),
            mark.max(app.timeline.cursor_ns),
        );
        for (i, slot) in text.iter_mut().enumerate() {
            let c0 = range.from_ns + i as u64 * range.cell_ns;
            if c0 + range.cell_ns > a && c0 <= b && *slot == ' ' {
                *slot = '═';
            }
        }
    }
    if let Some(c) = cursor {
        text[c] = '▲';
    }
    let line: String = text.into_iter().collect();
    Line::from(vec![
        Span::raw(" ".repeat(width)),
        Span::styled(line, Style::new().dim()),
    ])
}

/// Where the cursor is and how it moves, and what the selected lane did there; then, on a
/// starvation episode, which one, and its culprit (else nothing).
fn cursor_lines(app: &App, lane: Option<&(u32, String)>) -> [Line<'static>; 3] {
    let t = &app.timeline;
    let how = if app.live && t.following {
        "● following".to_string()
    } else if t.playing {
        format!("▶ {}x", t.speed)
    } else {
        "❚❚ paused".to_string()
    };
    let mut spans = vec![
        Span::styled(
            format!("cursor {}", app.at(t.cursor_ns)),
            Style::new().bold(),
        ),
        Span::raw(format!(" {how}")),
    ];
    if let Some(mark) = t.mark_ns {
        spans.push(Span::styled(
            format!(" · span from {}", app.at(mark)),
            Style::new().cyan(),
        ));
    }
    // What the cursor's cell on the selected lane shows.
    if let Some((tid, name)) = lane
        && let Some((from, cell_ns)) = app.cursor_cell()
    {
        let what = app.lanes.cells(*tid, from, cell_ns, 1)[0]
            .state()
            .map_or("not alive", State::as_str);
        let mounted = app
            .lanes
            .mounted_at(*tid, t.cursor_ns.clamp(from, from + cell_ns - 1), from)
            .map_or(String::new(), |v| format!(", #{v} mounted"));
        spans.push(Span::raw(format!(
            " · {}: {what}{mounted}",
            lane_label(name, 12).trim_end()
        )));
    }
    let episode = app
        .whole
        .episode_marks
        .iter()
        .enumerate()
        .find(|(_, e)| (e.start_ns..e.end_ns.max(e.start_ns + 1)).contains(&t.cursor_ns));
    let (second, third) = match episode {
        Some((i, e)) => {
            let culprit = app
                .episode
                .as_ref()
                .filter(|(j, _)| *j == i)
                .and_then(|(_, c)| c.clone())
                .map(|c| {
                    Line::from(vec![
                        Span::raw("culprit: "),
                        Span::styled(c, Style::new().bold()),
                    ])
                })
                .unwrap_or_default();
            let said = Line::styled(
                format!(
                    "starvation {} of {} at {} for {} ({}, {} of {} carriers)",
                    i + 1,
                    app.whole.episode_marks.len(),
                    app.at(e.start_ns),
                    secs(e.end_ns.saturating_sub(e.start_ns)),
                    e.cause.as_str(),
                    e.blocked_carriers,
                    e.carriers
                ),
                Style::new().red().bold(),
            );
            (said, culprit)
        }
        None => (Line::default(), Line::default()),
    };
    [Line::from(spans), second, third]
}

/// The carriers' lanes, as a list of (tid, name).
fn carrier_lanes(app: &App) -> Vec<(u32, String)> {
    app.view()
        .carriers()
        .map(|t| (t.tid, t.name.clone()))
        .collect()
}

fn draw_thread_lanes(frame: &mut Frame, area: Rect, app: &App) {
    let tids: Vec<(u32, String)> = app
        .view()
        .active_threads()
        .map(|t| (t.tid, t.name.clone()))
        .collect();
    draw_lanes(
        frame,
        area,
        app,
        format!(
            " Threads ({}, most blocked or pinned first{}) ",
            tids.len(),
            match app.sorts[Tab::Threads.index()] {
                super::app::Sort::Time => String::new(),
                sort => format!("; sorted by {}", sort.as_str()),
            }
        ),
        &tids,
        Some(app.selected()),
    );
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
    // The state before the runtime: a narrow terminal cuts the end of the line.
    let first = Line::from(vec![
        Span::styled("pinprof ", Style::new().bold()),
        Span::raw(format!(
            "pid {} {} · ",
            model.target.pid, model.target.command
        )),
        Span::styled(state, Style::new().fg(color).bold()),
        Span::raw(format!(" {}{runtime}", secs(model.duration_ns()))),
    ]);
    // Alerts first: a long recording path must never push them off a narrow terminal.
    let mut second = Vec::new();
    let running = app.live && app.status == Status::Running;
    if let (true, Some((for_ns, carriers))) = (running, app.whole.starving_now) {
        let which = match carriers {
            1 => "the only carrier".to_string(),
            n => format!("all {n} carriers"),
        };
        let waiting = app
            .whole
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
        Paragraph::new(vec![first, second, finding_line(&app.whole.findings)]),
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

/// Carriers first: their swimlanes, starvation, the figures of the span shown, their time,
/// and the worst pinned sites. What does not fit a small terminal goes, lanes last.
fn draw_overview(frame: &mut Frame, area: Rect, app: &App) {
    let view = app.view();
    let carriers: Vec<_> = view.carriers().collect();
    let lanes = carrier_lanes(app);
    let throttled = u16::from(app.whole.throttled_per_second.iter().any(|ms| *ms > 0));
    let lanes_height = 7 + throttled + u16::try_from(lanes.len().max(1)).unwrap_or(u16::MAX);
    let summary_height =
        2 + u16::from(view.throttling.is_some()) + u16::try_from(view.cpu_lines.len()).unwrap_or(0);
    let table_height =
        u16::try_from(carriers.len().max(1)).map_or(u16::MAX, |n| n.saturating_add(3));
    // Sites keep 4 rows; the carriers' table and the pinned-time sparkline come when there
    // is room for them too.
    let left = area
        .height
        .saturating_sub(lanes_height + summary_height + 5);
    let table_height = if left >= table_height {
        table_height
    } else {
        0
    };
    let spark_height = if left.saturating_sub(table_height) >= 9 {
        5
    } else {
        0
    };
    let [lanes_area, summary, table, timeline, sites] = Layout::vertical([
        Constraint::Length(lanes_height),
        Constraint::Length(summary_height),
        Constraint::Length(table_height),
        Constraint::Length(spark_height),
        Constraint::Min(3),
    ])
    .areas(area);
    let jvm = app
        .model
        .as_ref()
        .is_some_and(|m| m.target.runtime.is_some());
    let title = if !jvm {
        " Not a HotSpot JVM: no carriers (threads: 3, 6; locks: 4; calls: 5) ".to_string()
    } else if carriers.is_empty() && !app.filter.is_empty() {
        format!(
            " Carriers: none matches the filter {:?} (Esc clears it) ",
            app.filter
        )
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
    draw_lanes(frame, lanes_area, app, title, &lanes, Some(app.selected()));
    if table_height > 0 {
        draw_carrier_table(frame, table, app);
    }
    if spark_height > 0 {
        draw_sparkline(frame, timeline, app);
    }
    draw_summary(frame, summary, app);

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
        Paragraph::new(lines).block(Block::bordered().title(format!(
            " Top pinned sites{} (2 for stacks) ",
            app.window_note()
        ))),
        sites,
    );
}

fn draw_carrier_table(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.view().carriers().map(|t| {
        // Of the carrier's own time (it may have come after attach), as far as it is known.
        let life = crate::model::total([
            t.pinned_ns,
            t.blocked_ns,
            t.idle_ns,
            t.running_ns,
            t.preempted_ns,
        ]);
        let share = t.pinned_ns as f64 * 100.0 / life.max(1) as f64;
        vec![
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
        ]
    });
    let columns = [
        ("tid", Constraint::Length(8)),
        ("name", Constraint::Min(20)),
        ("pinned", Constraint::Length(10)),
        ("pinned%", Constraint::Length(8)),
        ("blocked", Constraint::Length(10)),
        ("idle", Constraint::Length(10)),
        ("running", Constraint::Length(10)),
    ];
    draw_table(
        frame,
        area,
        app,
        format!(" Carriers' time{} ", app.window_note()),
        &columns,
        &[0],
        rows,
    );
}

/// Pinned carrier time per second, newest on the right (the whole window's).
fn draw_sparkline(frame: &mut Frame, area: Rect, app: &App) {
    let view = &app.whole;
    let width = area.width.saturating_sub(2) as usize;
    let per_second = &view.pinned_per_second;
    let shown = &per_second[per_second.len().saturating_sub(width)..];
    let peak = shown.iter().copied().max().unwrap_or(0);
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
    let inner = block.inner(area);
    frame.render_widget(block, area);
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
}

/// Starvation, pinning, the quota and the CPU lines, of the span shown.
fn draw_summary(frame: &mut Frame, area: Rect, app: &App) {
    let view = app.view();
    let note = app.window_note();
    let starving_now = app.whole.starving_now.filter(|_| app.span_is_whole());
    let starvation = if let (0, Some((for_ns, _))) = (view.episodes, starving_now) {
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
        // Said whole where it fits; on a narrow terminal, the figures first.
        let text = if area.width >= 120 {
            format!(
                "Starvation{note}: {what} for {} in {} (longest {}): no other \
                 virtual thread could run then",
                secs(view.starved_ns),
                counted(view.episodes, "episode"),
                secs(view.longest_starvation_ns)
            )
        } else {
            format!(
                "Starvation{note}: {} in {} (longest {}), {what}",
                secs(view.starved_ns),
                counted(view.episodes, "episode"),
                secs(view.longest_starvation_ns)
            )
        };
        Line::from(Span::styled(text, Style::new().red().bold()))
    };
    let pinned = Line::from(format!(
        "Pinned{note}: {}, {} in all, at {}",
        counted(view.pinned_events, "event"),
        secs(view.pinned_ns),
        counted(view.sites.len(), "site")
    ));
    let mut lines = vec![starvation, pinned];
    if let Some(throttling) = &view.throttling {
        let style = if app.whole.throttled_per_second.iter().any(|ms| *ms > 0) {
            Style::new().yellow().bold()
        } else {
            Style::new()
        };
        lines.push(Line::styled(format!("{throttling}{note}"), style));
    }
    lines.extend(view.cpu_lines.iter().map(|l| Line::from(l.as_str())));
    frame.render_widget(Paragraph::new(lines), area);
}

fn draw_pinned(frame: &mut Frame, area: Rect, app: &App) {
    let view = app.view();
    let [table, detail] =
        Layout::vertical([Constraint::Percentage(35), Constraint::Min(4)]).areas(area);
    let rows = view.sites.iter().map(|s| {
        vec![
            Cell::from(s.reason.as_str()),
            Cell::from(s.operation.as_str()),
            Cell::from(s.events.to_string()),
            Cell::from(secs(s.total_ns)),
            Cell::from(secs(s.max_ns)),
            Cell::from(s.virtual_threads.len().to_string()),
            Cell::from(s.carriers.len().to_string()),
            Cell::from(site_label(s)),
        ]
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
            " Pinned sites{}: {} events, {}{} ",
            app.window_note(),
            view.pinned_events,
            secs(view.pinned_ns),
            sorted(app)
        ),
        &columns,
        &[6, 5, 4],
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
    draw_stack(
        frame,
        detail,
        &title,
        site.map(|s| &s.stack),
        app.stack_scroll,
    );
}

fn draw_threads(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.view().active_threads().map(|t| {
        vec![
            Cell::from(t.tid.to_string()),
            Cell::from(t.name.clone()),
            Cell::from(t.role.as_str()),
            Cell::from(secs(t.blocked_ns)),
            Cell::from(secs(t.pinned_ns)),
            Cell::from(secs(t.idle_ns)),
            Cell::from(secs(t.running_ns)),
            Cell::from(secs(t.preempted_ns)),
            Cell::from(t.intervals.to_string()),
        ]
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
        format!(
            " Threads{} (most blocked or pinned first){} ",
            app.window_note(),
            sorted(app)
        ),
        &columns,
        &[8, 2, 7, 0],
        rows,
    );
}

fn draw_locks(frame: &mut Frame, area: Rect, app: &App) {
    let [table, detail] =
        Layout::vertical([Constraint::Percentage(45), Constraint::Min(4)]).areas(area);
    let rows = app.view().locks.iter().map(|l| {
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
        vec![
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
        ]
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
        format!(
            " Locks (most wait time first){}{} ",
            app.window_note(),
            sorted(app)
        ),
        &columns,
        &[4, 0],
        rows,
    );
    let [release, wait] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(detail);
    let lock = app.view().locks.get(app.selected());
    // A virtual thread's lock waited on unmounted shows its owner's own wait (a sleep, a
    // call it made holding the lock): no release was seen.
    let unmounted = lock.is_some_and(|l| l.kind == crate::analysis::kinds::LockKind::Unmounted);
    draw_scrolled(
        frame,
        release,
        if unmounted {
            " Owner's stack while it held it "
        } else {
            " Holder's stack as it released "
        },
        plain_lines(lock.map(|l| l.holder_frames.as_slice())),
        app.stack_scroll,
    );
    draw_scrolled(
        frame,
        wait,
        " Longest waiter's stack ",
        plain_lines(lock.map(|l| l.waiter_frames.as_slice())),
        app.stack_scroll,
    );
}

fn draw_syscalls(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.view().syscalls.iter().map(|s| {
        let file = s
            .files
            .first()
            .map_or(String::new(), |(name, n, _)| format!("{name} ({n})"));
        vec![
            // The JVM's own threads waiting for work, marked as such (they are listed last).
            Cell::from(if s.jvm_internal {
                format!("(JVM) {}", s.name)
            } else {
                s.name.clone()
            }),
            Cell::from(s.events.to_string()),
            Cell::from(secs(s.total_ns)),
            Cell::from(secs(s.max_ns)),
            Cell::from(s.long_events.to_string()),
            Cell::from(file),
        ]
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
        format!(
            " System calls by time{}{}{long}",
            app.window_note(),
            sorted(app)
        ),
        &columns,
        &[4],
        rows,
    );
}

/// "1 episode", "2 episodes".
fn counted(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The table's sort, when not the default (`s` cycles it).
fn sorted(app: &App) -> String {
    match app.sorts[app.tab.index()] {
        super::app::Sort::Time => String::new(),
        sort => format!(" · sorted by {}", sort.as_str()),
    }
}

/// A stack, innermost first: Java frames bold, the frame that holds the monitor marked;
/// its line `scroll` in view (J/K).
fn draw_stack(
    frame: &mut Frame,
    area: Rect,
    title: &str,
    stack: Option<&StackLabels>,
    scroll: u16,
) {
    let lines = stack.map_or_else(Vec::new, stack_lines);
    draw_scrolled(frame, area, title, lines, scroll);
}

/// A stack's lines as its pane shows them: the kernel and native frames on top folded into
/// one (they say how it waits, the Java ones where), so that the Java frames fit.
pub fn stack_lines(stack: &StackLabels) -> Vec<Line<'static>> {
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
}

/// Lines in a bordered pane, wrapped, with line `cursor` (J/K; 0: the top) marked and in
/// view; the title says when there is more above or below, and the keys.
fn draw_scrolled(frame: &mut Frame, area: Rect, title: &str, mut lines: Vec<Line>, cursor: u16) {
    let width = usize::from(area.width.saturating_sub(2)).max(1);
    let height = usize::from(area.height.saturating_sub(2));
    let rows_of = |l: &Line| l.width().div_ceil(width).max(1);
    let rows: usize = lines.iter().map(rows_of).sum();
    let cursor = usize::from(cursor).min(lines.len().saturating_sub(1));
    // The cursor's line at the pane's bottom once it is past the first screen.
    let through_cursor: usize = lines.iter().take(cursor + 1).map(rows_of).sum();
    let top = through_cursor.saturating_sub(height);
    if cursor > 0
        && let Some(line) = lines.get_mut(cursor)
    {
        *line = std::mem::take(line).patch_style(Style::new().add_modifier(Modifier::REVERSED));
    }
    let title = match (top > 0, top + height < rows) {
        (false, false) => title.to_string(),
        (above, below) => format!(
            "{title}· {}{} (J/K) ",
            if above { "↑" } else { "" },
            if below { "↓ more" } else { "" }
        ),
    };
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((u16::try_from(top).unwrap_or(u16::MAX), 0))
            .block(Block::bordered().title(title)),
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

/// Rows under a bold header in a titled box, the selected one highlighted. Where the
/// columns do not fit, those of `drop` go, in that order (a narrow terminal loses columns,
/// not rows).
fn draw_table<'a>(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    title: impl Into<Line<'a>>,
    columns: &[(&'static str, Constraint)],
    drop: &[usize],
    rows: impl IntoIterator<Item = Vec<Cell<'a>>>,
) {
    let width = |c: &Constraint| match c {
        Constraint::Length(n) | Constraint::Min(n) => *n,
        _ => 0,
    };
    let mut kept: Vec<usize> = (0..columns.len()).collect();
    let room = area.width.saturating_sub(2);
    for column in drop {
        let need: u16 = kept.iter().map(|&i| width(&columns[i].1) + 1).sum();
        if need <= room + 1 {
            break;
        }
        kept.retain(|i| i != column);
    }
    let header = Row::new(kept.iter().map(|&i| Cell::from(columns[i].0)))
        .style(Style::new().bold().underlined());
    let rows = rows.into_iter().map(|cells| {
        let mut cells: Vec<Option<Cell>> = cells.into_iter().map(Some).collect();
        Row::new(
            kept.iter()
                .filter_map(|&i| cells.get_mut(i).and_then(Option::take)),
        )
    });
    let table = Table::new(rows, kept.iter().map(|&i| columns[i].1))
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
    // Without a monitor held, the application's frame where there is one (a class
    // initializer's own sleep is `Unsafe.park` innermost, `TaxRules.<clinit>` where the fix
    // goes), else the innermost Java method.
    let application = (0..stack.frames.len())
        .find(|i| is_method(i) && !crate::analysis::jdk::is_jdk_method(&stack.frames[*i]));
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
        (None, Some(i)) => stack.frames[application.unwrap_or(i)].clone(),
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
        // No monitor held: the application's frame (a class initializer's own sleep).
        assert_eq!(site_label(&site(&frames, Vec::new())), "Shop.buy");
        assert_eq!(
            site_label(&site(&frames[..3], Vec::new())),
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

    /// 800 starvation episodes of a millisecond in 10 s: at a second a cell, each cell is
    /// 8% starved: a low bar, not a solid row.
    #[test]
    fn many_short_episodes_do_not_make_a_solid_starved_row() {
        let ms = 1_000_000u64;
        let range = super::super::timeline::Range {
            from_ns: 0,
            cell_ns: 1_000 * ms,
            cells: 10,
        };
        let episodes = (0..800u64).map(|i| (i * 12_500_000, i * 12_500_000 + ms));
        let share = shares(&range, episodes);
        assert!(share.iter().all(|s| (0.07..0.10).contains(s)), "{share:?}");
        let line = share_line("starved", 8, &share, Style::new(), None);
        let bars: String = line.spans[1..].iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(bars, "▁".repeat(10));
        // One long episode fills its cells.
        let full = shares(&range, [(0, 2_500 * ms)].into_iter());
        assert_eq!(&full[..3], &[1.0, 1.0, 0.5]);
    }
}
