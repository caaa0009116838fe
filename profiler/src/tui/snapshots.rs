//! The views drawn from a recording made up here (every figure known), compared with the
//! screens kept in `snapshots/`: at 80 x 24, the smallest terminal the views are made for,
//! and at 200 x 60. `UPDATE_SNAPSHOTS=1 cargo test -p profiler --lib snapshots` rewrites
//! them after a change of the views that was meant (read the difference first).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{
    app::{App, Tab},
    draw, keys,
    lanes::State,
};
use crate::{
    events::{
        Event, Frame, FrameKind, JavaBlock, JavaThreadInfo, JavaThreadState, OffCpu, OffCpuState,
        RuntimeInfo, Stack, TargetInfo, ThreadName,
    },
    recording::{End, Header, Record, StopReason},
};

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
/// The scene's window: [START, START + 6 s).
const START: u64 = 100 * S;

fn java(vthread: Option<u64>, held_monitors: u32) -> JavaBlock {
    JavaBlock {
        state: JavaThreadState::Blocked,
        vthread,
        pending_monitor: None,
        waiting_monitor: None,
        held_monitors,
        pin_count: 0,
        at_safepoint: false,
        anchor: [1, 2, 3],
    }
}

fn wait(tid: u32, from_ms: u64, to_ms: u64, java: Option<JavaBlock>) -> OffCpu {
    OffCpu {
        tid,
        start_ns: START + from_ms * MS,
        end_ns: START + to_ms * MS,
        state: OffCpuState::Sleeping,
        kernel_stack: None,
        user_stack: None,
        waker_tid: Some(103),
        cpu: 0,
        java,
    }
}

fn frame(name: &str, module: &str, holds_monitor: bool) -> Frame {
    Frame {
        kind: FrameKind::Java,
        addr: 0x1000,
        name: Some(name.into()),
        module: Some(module.into()),
        holds_monitor,
        line: Some(42),
    }
}

/// Two carriers of a JDK 21 pool: worker-1 idle, pinned from 1 s to 4 s in `Shop.buy`
/// (sleeping inside synchronized), then idle; worker-2 pinned from 1.5 s to 3.5 s, so that
/// every carrier is pinned from 1.5 s to 3.5 s; `main` sleeps; a GC thread waits now and
/// then.
pub fn scene() -> Vec<Record> {
    let header = Header {
        pinprof_version: "0".into(),
        target: TargetInfo {
            pid: 4242,
            command: "java".into(),
            cmdline: vec!["java".into(), "Shop".into()],
            runtime: Some(RuntimeInfo {
                kind: "hotspot".into(),
                version: Some("21.0.8".into()),
                parallelism: Some(2),
                max_pool_size: Some(256),
                libjvm: None,
            }),
        },
        start_mono_ns: START,
        start_unix_ns: 1_760_000_000 * S,
        hostname: "host".into(),
        kernel_release: "6.1".into(),
        min_off_cpu_ns: MS,
        min_syscall_ns: None,
    };
    let mut events = vec![
        Event::Stack(Stack {
            id: 1,
            frames: vec![
                frame("java.lang.Thread.sleep0", "native", false),
                frame("java.lang.Thread.sleep", "interpreted", false),
                frame("Shop.buy", "compiled", true),
                frame("Shop.run", "compiled", false),
            ],
        }),
        Event::JavaThreads {
            time_ns: START,
            threads: [(101, true), (102, true), (103, false), (104, false)]
                .into_iter()
                .map(|(tid, carrier)| JavaThreadInfo {
                    tid,
                    name: None,
                    carrier,
                })
                .collect(),
        },
    ];
    for (tid, name) in [
        (101, "ForkJoinPool-1-worker-1"),
        (102, "ForkJoinPool-1-worker-2"),
        (103, "main"),
        (104, "GC Thread#0"),
    ] {
        events.push(Event::Thread(ThreadName {
            tid,
            name: name.into(),
        }));
    }
    let pinned = |tid, from, to, vthread| {
        [
            Event::OffCpu(wait(tid, from, to, Some(java(Some(vthread), 1)))),
            Event::JavaStack {
                tid,
                start_ns: START + from * MS,
                stack: 1,
            },
        ]
    };
    let idle = |tid, from, to| Event::OffCpu(wait(tid, from, to, Some(java(None, 0))));
    events.push(idle(101, 0, 1000));
    events.extend(pinned(101, 1000, 4000, 21));
    events.push(idle(102, 0, 1500));
    events.extend(pinned(102, 1500, 3500, 22));
    events.push(idle(102, 3600, 6000));
    events.push(idle(101, 4200, 6000));
    events.push(Event::OffCpu(wait(103, 500, 5500, None)));
    for i in 0..12 {
        events.push(Event::OffCpu(wait(104, i * 500, i * 500 + 200, None)));
    }
    let mut records = vec![Record::Header(header)];
    records.extend(events.into_iter().map(Record::Event));
    records.push(Record::End(End {
        end_mono_ns: START + 6 * S,
        reason: StopReason::Duration,
    }));
    records
}

/// A replay of the scene, refreshed, on a terminal `width` wide.
pub fn replayed(width: u16) -> App {
    replay_of(scene(), width)
}

fn replay_of(records: Vec<Record>, width: u16) -> App {
    let mut app = App::new("replay of shop.pinrec".into(), false, None);
    app.on_resize(width);
    for record in records {
        app.on_record(record);
    }
    app.on_disconnect();
    app.refresh();
    app
}

pub fn press(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
    app.tick();
    app.refresh();
}

/// The screen's text, a line per row.
pub fn screen(app: &App, width: u16, height: u16) -> String {
    let backend = ratatui::backend::TestBackend::new(width, height);
    let mut terminal = ratatui::Terminal::new(backend).unwrap();
    terminal.draw(|frame| draw::draw(frame, app)).unwrap();
    terminal
        .backend()
        .buffer()
        .content()
        .chunks(usize::from(width))
        .map(|row| {
            let line: String = row.iter().map(|c| c.symbol()).collect();
            line.trim_end().to_string() + "\n"
        })
        .collect()
}

fn check(name: &str, screen: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/tui/snapshots")
        .join(format!("{name}.txt"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, screen).unwrap();
        return;
    }
    let kept = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_SNAPSHOTS=1 makes it)", path.display()));
    assert!(
        kept == screen,
        "{name} differs from {}:\n--- kept\n{kept}\n--- drawn now\n{screen}",
        path.display()
    );
}

#[test]
fn every_view_matches_its_snapshot_at_80x24_and_200x60() {
    for (width, height) in [(80, 24), (200, 60)] {
        let mut app = replayed(width);
        for tab in Tab::ALL {
            app.tab = tab;
            let name = format!(
                "{}-{width}x{height}",
                tab.title().to_lowercase().replace(' ', "-")
            );
            check(&name, &screen(&app, width, height));
        }
        // On the starvation episode, zoomed, its culprit named.
        app.tab = Tab::Overview;
        press(&mut app, KeyCode::Home);
        press(&mut app, KeyCode::Char('n'));
        check(
            &format!("episode-{width}x{height}"),
            &screen(&app, width, height),
        );
        press(&mut app, KeyCode::Char('?'));
        check(
            &format!("help-{width}x{height}"),
            &screen(&app, width, height),
        );
    }
}

#[test]
fn the_help_lists_every_key_the_view_handles() {
    let mut app = replayed(80);
    press(&mut app, KeyCode::Char('?'));
    let shown = screen(&app, 80, 24);
    let width = keys::help_lines()
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap();
    for (keys, help) in keys::help_lines() {
        // The keys, then what they do, whole.
        let said = format!("{keys:<width$}  {help}");
        assert!(shown.contains(&said), "{said:?} not in the help:\n{shown}");
    }
    // Any key closes it, and is not taken as anything else.
    press(&mut app, KeyCode::Char('q'));
    assert!(!app.help && !app.quit);
}

#[test]
fn a_carrier_pinned_for_three_seconds_reads_as_thirty_cells_of_100ms() {
    let mut app = replayed(120);
    press(&mut app, KeyCode::Char('0'));
    // Zoomed to 100 ms cells.
    for _ in 0..10 {
        match app.timeline.range(app.bounds().0, app.bounds().1).cell_ns {
            c if c > 100 * MS => press(&mut app, KeyCode::Char('z')),
            c if c < 100 * MS => press(&mut app, KeyCode::Char('Z')),
            _ => break,
        }
    }
    press(&mut app, KeyCode::Home);
    let range = app.timeline.range(app.bounds().0, app.bounds().1);
    assert_eq!(range.cell_ns, 100 * MS);
    let cells = app
        .lanes
        .cells(101, range.from_ns, range.cell_ns, range.cells);
    let pinned = cells
        .iter()
        .filter(|c| c.state() == Some(State::Pinned))
        .count();
    assert_eq!(pinned, 30);
    // The screen says so too: worker-1's row has 30 pinned glyphs.
    let shown = screen(&app, 120, 30);
    let row = shown
        .lines()
        .find(|l| l.contains("worker-1") && l.contains('█'))
        .unwrap_or_else(|| panic!("{shown}"));
    assert_eq!(row.chars().filter(|c| *c == '█').count(), 30, "{shown}");
}

#[test]
fn n_goes_to_the_starvation_and_names_its_culprit_and_seeking_moves_the_cursor() {
    let mut app = replayed(80);
    press(&mut app, KeyCode::Home);
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(app.timeline.cursor_ns, START + 1500 * MS);
    let shown = screen(&app, 80, 24);
    assert!(shown.contains("cursor 1.500s"), "{shown}");
    assert!(
        shown.contains("starvation 1 of 1 at 1.500s for 2.00s"),
        "{shown}"
    );
    assert!(shown.contains("culprit: Shop.buy"), "{shown}");
    // The culprit is the pinned sites' selected row, and the tables cover the span shown.
    app.tab = Tab::Pinned;
    let shown = screen(&app, 80, 24);
    assert!(shown.contains("Shop.buy [monitor]"), "{shown}");
    app.tab = Tab::Overview;
    // Past the last episode, `n` goes round to the first.
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(
        app.message.as_deref(),
        Some("no later starvation episode: back to the first")
    );
    assert_eq!(app.timeline.cursor_ns, START + 1500 * MS);
    press(&mut app, KeyCode::Char('L'));
    assert_eq!(app.timeline.cursor_ns, START + 2500 * MS);
    assert!(screen(&app, 80, 24).contains("cursor 2.500s"));
    press(&mut app, KeyCode::Char('N'));
    assert_eq!(app.timeline.cursor_ns, START + 1500 * MS);
    // Enter on worker-2 there opens the pinned wait: its stack and the monitor's holder.
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Enter);
    let popup = app.popup.clone().expect("a popup");
    assert!(popup.title.contains("ForkJoinPool-1-worker-2"), "{popup:?}");
    assert!(
        popup.lines[0].starts_with("pinned from 1.500s for 2.00s"),
        "{popup:?}"
    );
    assert!(popup.lines.iter().any(|l| l.contains("#22")), "{popup:?}");
    assert!(
        popup
            .lines
            .iter()
            .any(|l| l.contains("Shop.buy:42  [holds monitor]")),
        "{popup:?}"
    );
}

#[test]
fn enter_opens_the_wait_the_cell_shows_not_a_short_one_under_the_cursor() {
    // Worker-2 blocked 1 ms (a safepoint, say) just before its pinned sleep: the episode
    // starts in that wait, but the cursor's cell shows the pinning, and so does Enter.
    let mut records = scene();
    for r in &mut records {
        match r {
            Record::Event(Event::OffCpu(o)) if o.tid == 102 && o.start_ns == START + 1500 * MS => {
                o.start_ns += MS;
            }
            Record::Event(Event::JavaStack {
                tid: 102, start_ns, ..
            }) if *start_ns == START + 1500 * MS => {
                *start_ns += MS;
            }
            _ => {}
        }
    }
    let end = records.pop().unwrap();
    let safepoint = JavaBlock {
        at_safepoint: true,
        ..java(Some(22), 0)
    };
    records.push(Record::Event(Event::OffCpu(wait(
        102,
        1500,
        1501,
        Some(safepoint),
    ))));
    records.push(end);
    let mut app = replay_of(records, 80);
    press(&mut app, KeyCode::Home);
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(app.timeline.cursor_ns, START + 1500 * MS);
    press(&mut app, KeyCode::Down);
    assert_eq!(
        app.lanes
            .span_at(102, app.timeline.cursor_ns)
            .unwrap()
            .state,
        State::Blocked
    );
    assert!(screen(&app, 80, 24).contains("worker-2: pinned, #22 mounted"));
    press(&mut app, KeyCode::Enter);
    let popup = app.popup.clone().expect("a popup");
    assert!(
        popup.lines[0].starts_with("pinned from 1.501s for 2.00s"),
        "{popup:?}"
    );
}

#[test]
fn the_tables_cover_the_span_shown_and_the_filter_narrows_them() {
    let mut app = replayed(80);
    // Whole: main blocked 5 s.
    let main = |app: &App| {
        app.view()
            .threads
            .iter()
            .find(|t| t.name == "main")
            .cloned()
    };
    assert_eq!(main(&app).unwrap().blocked_ns, 5 * S);
    // A marked span from 1 s to 2 s: main blocked all of it, worker-1 pinned all of it.
    press(&mut app, KeyCode::Home);
    press(&mut app, KeyCode::Char('L'));
    press(&mut app, KeyCode::Char('v'));
    press(&mut app, KeyCode::Char('L'));
    assert_eq!(main(&app).unwrap().blocked_ns, S);
    let worker = app
        .view()
        .threads
        .iter()
        .find(|t| t.tid == 101)
        .unwrap()
        .clone();
    assert_eq!((worker.pinned_ns, worker.running_ns), (S, 0));
    // Both pinnings overlap it (worker-2's from 1.5 s), and nothing after it.
    assert_eq!(app.view().pinned_events, 2);
    assert_eq!(app.view().pinned_ns, S + S / 2);
    press(&mut app, KeyCode::Char('/'));
    for c in "gc".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    let names: Vec<_> = app.view().threads.iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["GC Thread#0"]);
    press(&mut app, KeyCode::Esc);
    assert!(app.view().threads.len() > 1);
}

#[test]
fn f_writes_a_flamegraph_of_the_span_shown_and_says_where() {
    let dir = crate::safe_fs::private_temp_dir("pinprof-tui").unwrap();
    let mut app = replayed(80);
    app.out_dir = dir.clone();
    // The span from 4.5 s to the end: worker-1 idle, main's sleep ending, no pinning.
    press(&mut app, KeyCode::Home);
    for _ in 0..4 {
        press(&mut app, KeyCode::Char('L'));
    }
    for _ in 0..5 {
        press(&mut app, KeyCode::Right);
    }
    press(&mut app, KeyCode::Char('v'));
    press(&mut app, KeyCode::End);
    press(&mut app, KeyCode::Char('f'));
    let said = app.message.clone().unwrap();
    let path = said
        .split(" written to ")
        .nth(1)
        .unwrap_or_else(|| panic!("{said}"));
    assert!(said.starts_with("flamegraph of 4.500s-6.000s"), "{said}");
    let svg = std::fs::read_to_string(path).unwrap();
    assert!(svg.contains("<svg"), "{svg}");
    assert!(!svg.contains("Shop.buy"), "no pinning in the span");
    assert!(screen(&app, 80, 24).contains("flamegraph of 4.500s-6.000s"));
    // The whole window has the pinned stacks.
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('f'));
    let said = app.message.clone().unwrap();
    let path = said.split(" written to ").nth(1).unwrap();
    assert!(std::fs::read_to_string(path).unwrap().contains("Shop.buy"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_live_view_keeps_no_more_than_its_window() {
    // Ten minutes of a carrier pinned 10 ms in every 20, and a thread blocked as often,
    // taken in a second at a time as a live view does, with a 10 s window.
    let mut app = App::new(
        "test".into(),
        true,
        Some(std::time::Duration::from_secs(10)),
    );
    app.on_resize(80);
    let mut records = scene();
    records.retain(|r| !matches!(r, Record::End(_) | Record::Event(Event::OffCpu(_))));
    for r in records {
        app.on_record(r);
    }
    let mut kept = Vec::new();
    for second in 0..600u64 {
        for i in 0..50 {
            let from = second * 1000 + i * 20;
            let pinned = [
                Event::OffCpu(wait(101, from, from + 10, Some(java(Some(21), 1)))),
                Event::OffCpu(wait(103, from + 5, from + 15, None)),
            ];
            for e in pinned {
                app.on_record(Record::Event(e));
            }
        }
        app.refresh();
        if second % 60 == 59 {
            kept.push((app.lanes.len(), app.model.as_ref().unwrap().off_cpu.len()));
        }
    }
    // After the first minute, the same (within a refresh's worth).
    let (lanes, model) = kept[1];
    for (l, m) in &kept[1..] {
        assert!(
            l.abs_diff(lanes) <= 200 && m.abs_diff(model) <= 200,
            "{kept:?}"
        );
    }
    assert!(lanes < 2 * 100 * 13, "{kept:?}");
}

/// A pinned stack deeper than its pane at 80x24 (the application's frame at the bottom): J
/// scrolls the pane down to it, K back up, and another row starts from the top.
#[test]
fn a_deep_stack_scrolls_in_its_pane() {
    let mut records = scene();
    for r in &mut records {
        if let Record::Event(Event::Stack(s)) = r {
            let bottom = s.frames.pop().unwrap();
            for i in 0..30 {
                s.frames
                    .push(frame(&format!("Shop.layer{i}"), "interpreted", false));
            }
            s.frames.push(frame("LegacyDb.query", "interpreted", false));
            s.frames.push(bottom);
        }
    }
    let mut app = replay_of(records, 80);
    app.tab = Tab::Pinned;
    let top = screen(&app, 80, 24);
    assert!(!top.contains("LegacyDb.query"), "{top}");
    assert!(top.contains("↓ more (J/K)"), "{top}");
    for _ in 0..8 {
        press(&mut app, KeyCode::Char('J'));
    }
    let bottom = screen(&app, 80, 24);
    assert!(bottom.contains("LegacyDb.query"), "{bottom}");
    assert!(bottom.contains("Shop.run"), "the last frame: {bottom}");
    assert!(!bottom.contains("↓ more"), "{bottom}");
    // Back up: the marked line moves, and the pane with it once past its top.
    for _ in 0..4 {
        press(&mut app, KeyCode::Char('K'));
    }
    let back = screen(&app, 80, 24);
    assert!(back.contains("↑↓ more (J/K)"), "{back}");
    assert!(!back.contains("LegacyDb.query"), "{back}");
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.stack_scroll, 0, "another view starts from the top");
}

/// A thread blocked since before the window opened, never seen to switch (the Signal
/// Dispatcher): its scheduler account says it did not run, so its lane is not running.
#[test]
fn a_thread_idle_since_before_the_window_is_not_drawn_running() {
    use crate::events::ThreadCpu;
    let mut records = scene();
    let end = records.pop().unwrap();
    let account = |time_ms: u64, run_ns| {
        Record::Event(Event::ThreadCpu {
            time_ns: START + time_ms * MS,
            threads: vec![ThreadCpu {
                tid: 105,
                run_ns,
                wait_ns: 7,
            }],
        })
    };
    records.push(Record::Event(Event::Thread(ThreadName {
        tid: 105,
        name: "Signal Dispatcher".into(),
    })));
    records.push(account(0, 1_000));
    records.push(account(5_900, 1_000));
    records.push(end);
    let app = replay_of(records, 80);
    let cells = app.lanes.cells(105, START, S, 6);
    let states: Vec<Option<State>> = cells.iter().map(|c| c.state()).collect();
    assert_eq!(states, [Some(State::Blocked); 6]);
}

/// Following a live target, `n` goes to the latest starvation episode (the cursor is the
/// present), not round to the first.
#[test]
fn n_while_following_live_goes_to_the_latest_episode() {
    let mut records = scene();
    let end = records.pop().unwrap();
    // Both carriers pinned again from 5 s to 5.8 s: a second episode.
    for r in &mut records {
        if let Record::Event(Event::OffCpu(o)) = r
            && (o.tid == 101 || o.tid == 102)
            && o.end_ns == START + 6 * S
        {
            o.end_ns = START + 5000 * MS;
        }
    }
    for tid in [101, 102] {
        records.push(Record::Event(Event::OffCpu(wait(
            tid,
            5000,
            5800,
            Some(java(Some(u64::from(tid)), 1)),
        ))));
        records.push(Record::Event(Event::JavaStack {
            tid,
            start_ns: START + 5000 * MS,
            stack: 1,
        }));
    }
    let mut app = App::new("pid 4242".into(), true, None);
    app.on_resize(80);
    for r in records {
        app.on_record(r);
    }
    app.refresh();
    assert!(app.timeline.following);
    press(&mut app, KeyCode::Char('n'));
    let shown = screen(&app, 80, 24);
    assert!(shown.contains("starvation 2 of 2 at 5.000s"), "{shown}");
    assert_eq!(app.message, None);
    drop(end);
}
