//! The live view (`pinprof top`) and replay (`pinprof replay`) on a real pseudo-terminal, read
//! back through a VT100 emulator: what they show is checked against `pinprof report` of the
//! same recording.

mod common;

use std::{process::Stdio, time::Duration};

use common::{
    assert_within, carrier_threads, pinprof, report_json, scratch, start_vt, terminal::Terminal,
};
use serde_json::Value;

const ROWS: u16 = 45;
const COLS: u16 = 150;

/// The number in "Pinned: N events" (or "Pinned (last 60 s): N events") on the carriers view.
fn pinned_on_screen(screen: &str) -> u64 {
    let line = screen
        .lines()
        .find(|l| l.starts_with("Pinned"))
        .unwrap_or_else(|| panic!("no pinned count on the screen:\n{screen}"));
    let at = line.find(": ").expect("a count after the colon");
    line[at + 2..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unreadable pinned count:\n{screen}"))
}

fn carriers(report: &Value) -> Vec<String> {
    carrier_threads(report)
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// `pinprof top` on `pid`, redrawing every 200 ms, recording to `out`, with `extra` options.
fn top(pid: u32, out: &std::path::Path, extra: &[&str]) -> std::process::Command {
    let mut top = pinprof();
    top.args(["top", "--refresh", "200ms"])
        .args(extra)
        .arg("--pid")
        .arg(pid.to_string())
        .arg("--output")
        .arg(out);
    top
}

fn ended(screen: &str) -> bool {
    screen.contains("ended: duration reached")
}

#[test]
fn live_view_and_its_replay_show_what_the_report_says() {
    let jvm = start_vt(21, 2, "PinnedSleep", &["8", "20"]);
    let out = scratch("top.pinrec");
    let mut term = Terminal::spawn(top(jvm.pid, &out, &["--duration", "4"]), ROWS, COLS);
    // Under load the first screen may come late: live, or already ended.
    term.wait_for("a live view", Duration::from_secs(20), |s| {
        (s.contains("● live") || ended(s)) && s.contains("Carriers (2, parallelism 2)")
    });
    assert!(
        term.in_alternate_screen(),
        "the view takes the whole screen"
    );
    let screen = term.wait_for("the end of the recording", Duration::from_secs(30), ended);
    let live_pinned = pinned_on_screen(&screen);
    // The header leads with the most severe finding: 8 virtual threads sleeping inside
    // synchronized on 2 carriers starve them, at the method that holds the monitor.
    assert!(
        screen.contains("critical (1 of ") && screen.contains("every carrier was pinned"),
        "the top finding in the header:\n{screen}"
    );

    // The pinned sites view names the synchronized method that holds the monitor.
    term.send(b"2");
    let sites = term.wait_for("the pinned sites", Duration::from_secs(5), |s| {
        s.contains("Pinned sites:") && s.contains("[holds monitor]")
    });
    assert!(
        sites.contains("PinnedSleep$Ledger.append [monitor]"),
        "the site is named by its monitor's holder:\n{sites}"
    );

    term.send(b"q");
    let status = term.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status}:\n{}", term.contents());
    assert!(!term.in_alternate_screen(), "the terminal is given back");
    assert!(
        term.contents().contains("pinprof: recorded"),
        "the summary is said after the view:\n{}",
        term.contents()
    );
    drop(jvm);

    // The live view's last figures are the report's: one stream, one model.
    let report = report_json(&out);
    assert_eq!(live_pinned, report["pinned"]["events"].as_u64().unwrap());
    assert!(live_pinned > 50, "only {live_pinned} pinned events in 4 s");
    eprintln!("live view at the end: {live_pinned} pinned events, as the report says");
    for name in carriers(&report) {
        assert!(
            screen.contains(&name),
            "carrier {name} not shown:\n{screen}"
        );
    }

    // Replayed, the recording shows the same; its other views answer keys.
    let mut replay = pinprof();
    replay.arg("replay").arg(&out);
    let mut term = Terminal::spawn(replay, ROWS, COLS);
    let screen = term.wait_for("the replayed recording", Duration::from_secs(20), ended);
    assert_eq!(pinned_on_screen(&screen), live_pinned, "{screen}");
    // A resize redraws the screen at its new size at once, not at the next key, and the
    // first key after it is taken.
    term.resize(ROWS, COLS + 10);
    term.wait_for("a redraw at the new size", Duration::from_secs(5), |s| {
        s.lines()
            .any(|l| l.chars().count() == usize::from(COLS + 10))
    });
    term.send(b"3");
    term.wait_for(
        "the threads view after a resize",
        Duration::from_secs(5),
        |s| s.contains("Threads (most blocked or pinned first)"),
    );
    term.send(b"\t");
    term.wait_for("the locks view", Duration::from_secs(5), |s| {
        s.contains("Locks (most wait time first)") && s.contains("futex")
    });
    term.send(b"5");
    term.wait_for("the system calls view", Duration::from_secs(5), |s| {
        s.contains("System calls by time") && s.contains("futex")
    });
    term.send(b"q");
    assert!(term.wait_exit(Duration::from_secs(10)).success());

    // A recording cut short replays what it holds, and says it was cut.
    let bytes = std::fs::read(&out).unwrap();
    let cut = scratch("top-cut.pinrec");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let mut replay = pinprof();
    replay.arg("replay").arg(&cut);
    let mut term = Terminal::spawn(replay, ROWS, COLS);
    let screen = term.wait_for("the cut recording", Duration::from_secs(20), |s| {
        s.contains("ended without an end marker")
    });
    let cut_pinned = pinned_on_screen(&screen);
    assert!(
        cut_pinned > 0 && cut_pinned <= live_pinned,
        "{cut_pinned} of {live_pinned} pinned events:\n{screen}"
    );
    assert!(screen.contains("warning:"), "the damage is said:\n{screen}");
    eprintln!("cut recording: {cut_pinned} of {live_pinned} pinned events");
    term.send(b"q");
    assert!(term.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn a_window_shows_the_latest_pinning_and_the_file_keeps_all() {
    let jvm = start_vt(21, 2, "PinnedSleep", &["8", "20"]);
    let out = scratch("top-window.pinrec");
    let top = top(jvm.pid, &out, &["--window", "2", "--duration", "5"]);
    let mut term = Terminal::spawn(top, ROWS, COLS);
    let screen = term.wait_for("the end of the recording", Duration::from_secs(30), ended);
    assert!(screen.contains("Pinned (last 2 s)"), "{screen}");
    let windowed = pinned_on_screen(&screen);
    term.send(b"q");
    assert!(term.wait_exit(Duration::from_secs(15)).success());
    drop(jvm);
    let all = report_json(&out)["pinned"]["events"].as_u64().unwrap();
    eprintln!("window of 2 s: {windowed} pinned events shown, {all} in the 5 s recording");
    // About 2 s of 5 (the window's edge falls inside an event or two).
    assert!(
        windowed as f64 > 0.2 * all as f64 && (windowed as f64) < 0.6 * all as f64,
        "{windowed} of {all}"
    );
}

#[test]
fn starvation_is_flagged_while_it_lasts() {
    // Two virtual threads sleep 3 s inside synchronized on two carriers: both carriers stay
    // pinned for seconds, and the view must say so before those waits end.
    let jvm = start_vt(21, 2, "PinnedSleep", &["2", "3000"]);
    let out = scratch("top-starving-with-a-long-name-that-fills-the-status-line.pinrec");
    // The smallest terminal the view is made for, narrower than the status line: the flag
    // must come before the path, not be cut off.
    let mut term = Terminal::spawn(top(jvm.pid, &out, &[]), 24, 80);
    let screen = term.wait_for("starvation flagged", Duration::from_secs(20), |s| {
        s.contains("STARVING NOW: all 2 carriers pinned or blocked")
    });
    // The lanes follow the newest time, both carriers pinned in their latest cells.
    let lanes: Vec<&str> = screen
        .lines()
        .filter(|l| l.starts_with("│worker-"))
        .collect();
    assert_eq!(lanes.len(), 2, "{screen}");
    for lane in lanes {
        assert!(lane.trim_end_matches([' ', '│']).ends_with('█'), "{screen}");
    }
    assert!(screen.contains("● following"), "{screen}");
    // Space pauses the cursor while the recording goes on.
    term.send(b" ");
    term.wait_for("a paused view", Duration::from_secs(5), |s| {
        s.contains("❚❚ paused")
    });
    term.send(b"q");
    assert!(term.wait_exit(Duration::from_secs(15)).success());
    // Quitting is said as such, not as an interruption.
    let said = term.contents().replace('\n', "");
    assert!(said.contains("stopped: quit from the live view"), "{said}");
}

#[test]
fn starvation_from_before_attach_is_flagged_at_once() {
    // Both carriers pinned by 10-minute sleeps that began before pinprof attached: the kernel
    // never sees them begin, yet the view must flag the starvation, for as long as it has
    // lasted since attach, and the recording must hold it all.
    let jvm = start_vt(21, 2, "PinnedSleep", &["2", "600000"]);
    // Time for both virtual threads to reach their sleeps.
    std::thread::sleep(Duration::from_secs(1));
    let out = scratch("top-starving-before.pinrec");
    let mut term = Terminal::spawn(top(jvm.pid, &out, &[]), ROWS, COLS);
    // Flagged with how long it has lasted since attach: a second or more on some screen.
    let flag = "STARVING NOW: all 2 carriers pinned or blocked for ";
    let screen = term.wait_for("starvation flagged", Duration::from_secs(20), |s| {
        s.split(flag).nth(1).is_some_and(|rest| {
            rest.split_once('s')
                .and_then(|(secs, _)| secs.parse::<f64>().ok())
                .is_some_and(|secs| secs >= 1.0)
        })
    });
    // The same screen counts the waits under way for what they are: both carriers pinned
    // for a second or more, not blocked; the starvation is said to be under way.
    // The carriers' table: a row's first field is the carrier's id.
    let pinned: Vec<&str> = screen
        .lines()
        .filter(|l| {
            l.trim_start_matches('│')
                .split_whitespace()
                .next()
                .is_some_and(|tid| tid.parse::<u32>().is_ok())
        })
        .filter_map(|l| {
            let mut fields = l.split_whitespace().skip_while(|f| !f.contains("-worker-"));
            fields.nth(1)
        })
        .collect();
    assert_eq!(pinned.len(), 2, "two carrier rows:\n{screen}");
    for p in &pinned {
        let secs = p.strip_suffix('s').and_then(|n| n.parse::<f64>().ok());
        assert!(
            secs.is_some_and(|s| s >= 1.0),
            "pinned {p}, a second or more:\n{screen}"
        );
    }
    assert!(screen.contains("Starvation: under way for"), "{screen}");
    // The workload's only two virtual threads are the ones pinned: none waits to run.
    assert!(
        screen.contains(", 0 virtual threads waiting to run"),
        "{screen}"
    );
    term.send(b"q");
    assert!(term.wait_exit(Duration::from_secs(15)).success());
    drop(jvm);
    let report = report_json(&out);
    let window = report["window"]["duration_ns"].as_u64().unwrap() as f64;
    let starved = report["starvation"]["total_ns"].as_u64().unwrap() as f64;
    // Starved from attach to the end: the window is short (about a second), so a wait taken
    // to begin late (at the first snapshot of the threads, not at attach) shows here.
    assert_within("starvation since attach", starved, window, 0.01);
}

/// The recording was finished properly: `report` reads it without a word about its end.
fn assert_recording_has_its_end(out: &std::path::Path) {
    let report = pinprof().arg("report").arg(out).output().unwrap();
    assert!(report.status.success());
    let said = String::from_utf8_lossy(&report.stderr);
    assert!(
        !said.contains("end marker"),
        "the recording has its end: {said}"
    );
}

#[test]
fn a_closed_terminal_ends_the_views_and_the_recording_is_whole() {
    // Closing the window (or losing the SSH session) hangs the terminal up: the live view
    // must end, not spin on a terminal that is gone, and finish its recording as on Ctrl-C.
    let jvm = start_vt(21, 2, "PinnedSleep", &["4", "20"]);
    let out = scratch("top-hang-up.pinrec");
    let mut term = Terminal::spawn(top(jvm.pid, &out, &[]), ROWS, COLS);
    term.wait_for("carriers at work", Duration::from_secs(20), |s| {
        s.contains("● live") && s.contains("ForkJoinPool-1-worker-")
    });
    term.hang_up();
    // Not a panic (a standard error that has gone must not make one) or a kill.
    let status = term.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status}");
    drop(jvm);
    assert_recording_has_its_end(&out);
    assert!(report_json(&out)["pinned"]["events"].as_u64().unwrap() > 0);
    // A replay too ends with its terminal.
    let mut replay = pinprof();
    replay.arg("replay").arg(&out).args(["--speed", "0.01"]);
    let mut term = Terminal::spawn(replay, ROWS, COLS);
    term.wait_for("the replay", Duration::from_secs(20), |s| {
        s.contains("replay of")
    });
    term.hang_up();
    let status = term.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status}");
}

#[test]
fn ctrl_c_ends_the_live_view_and_the_recording_is_whole() {
    // JDK 25, whose carriers the view must know as well as 21's.
    let jvm = start_vt(25, 2, "PinnedSleep", &["8", "20"]);
    let out = scratch("top-ctrl-c.pinrec");
    let mut term = Terminal::spawn(top(jvm.pid, &out, &[]), ROWS, COLS);
    let screen = term.wait_for("carriers at work", Duration::from_secs(20), |s| {
        s.contains("● live") && s.contains("ForkJoinPool-1-worker-")
    });
    term.send(b"\x03");
    let status = term.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status}:\n{}", term.contents());
    assert!(
        term.contents().contains("stopped: interrupted"),
        "{}",
        term.contents()
    );
    drop(jvm);
    assert_recording_has_its_end(&out);
    // The carriers it showed are the JVM's (compensation may add one after that screen).
    let carriers = carriers(&report_json(&out));
    let shown = carriers
        .iter()
        .filter(|c| screen.contains(c.as_str()))
        .count();
    assert!(
        shown >= 2,
        "{shown} of the carriers {carriers:?} shown:\n{screen}"
    );
}

#[test]
fn bad_starts_are_said_plainly() {
    // Not a terminal: nothing is recorded, and the user is told what to use instead.
    let out = scratch("top-no-terminal.pinrec");
    let piped = pinprof()
        .args(["top", "--pid", &std::process::id().to_string(), "--output"])
        .arg(&out)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!piped.status.success());
    let said = String::from_utf8_lossy(&piped.stderr);
    assert!(said.contains("needs a terminal"), "{said}");
    assert!(!out.exists());

    // A process that does not exist: the error is said before the screen is taken.
    let mut top = pinprof();
    top.args(["top", "--pid", "999999999"]);
    let mut term = Terminal::spawn(top, ROWS, COLS);
    let status = term.wait_exit(Duration::from_secs(10));
    assert!(!status.success());
    let screen = term.contents();
    assert!(
        screen.contains("pinprof: error:") && screen.contains("999999999"),
        "{screen}"
    );

    // Replay of something that is not a recording.
    let junk = scratch("junk.pinrec");
    std::fs::write(&junk, b"not a recording").unwrap();
    let mut replay = pinprof();
    replay.arg("replay").arg(&junk);
    let mut term = Terminal::spawn(replay, ROWS, COLS);
    assert!(!term.wait_exit(Duration::from_secs(10)).success());
    assert!(
        term.contents().contains("pinprof: error:"),
        "{}",
        term.contents()
    );
}

/// The first number of seconds ("1.234s") after `prefix` on the screen.
fn secs_after(screen: &str, prefix: &str) -> Option<f64> {
    let rest = &screen[screen.find(prefix)? + prefix.len()..];
    rest.split('s').next()?.trim().parse().ok()
}

/// The pinned sleeps the Stall workload printed: (start, end), CLOCK_MONOTONIC ns.
fn stalls(jvm: &mut common::Jvm) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    while let Ok(line) = jvm.lines.recv_timeout(Duration::from_secs(20)) {
        if line == "done" {
            break;
        }
        if let ["pinned", start, end] = line.split_whitespace().collect::<Vec<_>>()[..] {
            out.push((start.parse().unwrap(), end.parse().unwrap()));
        }
    }
    out
}

/// Pinned cells ('█') in the lane of each carrier on the screen (a lane's row begins with
/// the carrier's name; the carriers' table's, with its id).
fn pinned_cells(screen: &str) -> Vec<usize> {
    screen
        .lines()
        .filter(|l| l.starts_with("│worker-") || l.starts_with("│ForkJoinPool-"))
        .map(|l| l.chars().filter(|c| *c == '█').count())
        .collect()
}

#[test]
fn replay_goes_to_each_starvation_names_its_culprit_and_seeks_in_recording_time() {
    // Both carriers pinned for 3 s at once (a synchronized sleep each), then, after a
    // second, for 1 s: two starvation episodes the workload times itself.
    let mut jvm = start_vt(21, 2, "Stall", &["2500", "3000", "1000"]);
    let out = common::record(jvm.pid, 8.0, "stall.pinrec");
    let pins = stalls(&mut jvm);
    drop(jvm);
    assert_eq!(pins.len(), 4, "{pins:?}");
    let report = report_json(&out);
    let start = report["window"]["start_mono_ns"].as_u64().unwrap();
    let episodes = report["starvation"]["episodes"].as_array().unwrap();
    // The two stalls; around them, a carrier starting may add a short wait for a CPU, and
    // the carriers a moment both pinned as the sleeps end.
    let pinned: Vec<usize> = (0..episodes.len())
        .filter(|&i| {
            episodes[i]["cause"] == "pinned"
                && episodes[i]["duration_ns"].as_u64().unwrap() > 500_000_000
        })
        .collect();
    assert_eq!(pinned.len(), 2, "{episodes:#?}");
    let total = episodes.len();
    // Each stall by the workload's clock: from the later of its two pins' starts to the
    // earlier end (when both carriers were pinned), from the window's start, in seconds.
    let stall = |i: usize| {
        let (a, b) = (pins[2 * i], pins[2 * i + 1]);
        let from = a.0.max(b.0) - start;
        let to = a.1.min(b.1) - start;
        (from as f64 / 1e9, to as f64 / 1e9)
    };
    let said = |i: usize| format!("starvation {} of {total} at ", i + 1);
    for (width, height) in [(200, 60), (80, 24)] {
        let mut replay = pinprof();
        replay.arg("replay").arg(&out);
        let mut term = Terminal::spawn(replay, height, width);
        term.wait_for("the replayed recording", Duration::from_secs(20), ended);
        // `?` lists every key of the handler's own table, with what it does.
        term.send(b"?");
        let help = term.wait_for("the help", Duration::from_secs(10), |s| {
            s.contains("Keys (any key closes)")
        });
        let bindings = profiler::tui::keys::help_lines();
        let width = bindings
            .iter()
            .map(|(k, _)| k.chars().count())
            .max()
            .unwrap();
        for (keys, what) in bindings {
            let line = format!("{keys:<width$}  {what}");
            assert!(help.contains(&line), "{line:?} not in the help:\n{help}");
        }
        term.send(b"x");
        term.wait_for("the help closed", Duration::from_secs(10), |s| {
            !s.contains("Keys (any key closes)")
        });
        term.send(b"\x1b[H");
        // `n` from the start steps through the episodes in time order.
        for i in 0..=pinned[0] {
            term.send(b"n");
            term.wait_for(&said(i), Duration::from_secs(10), |s| s.contains(&said(i)));
        }
        let screen = term.contents();
        // Its start, as the report has it (to the screen's millisecond) and as the
        // workload timed it (within 20 ms: the carriers switch out after the sleeps begin).
        let shown = secs_after(&screen, &said(pinned[0])).unwrap();
        let reported = episodes[pinned[0]]["start_ns"].as_u64().unwrap() as f64 / 1e9;
        assert!(
            (shown - reported).abs() <= 0.0015,
            "episode at {shown} s on the screen, {reported} s in the report"
        );
        assert!(
            (shown - stall(0).0).abs() < 0.02,
            "{shown} vs {:?}",
            stall(0)
        );
        assert_eq!(secs_after(&screen, "cursor "), Some(shown), "{screen}");
        assert!(
            screen.contains("culprit: Stall$Gate.hold [monitor]"),
            "the culprit's method:\n{screen}"
        );
        eprintln!(
            "{width}x{height}: the first stall at {shown}s (workload: {:?})",
            stall(0)
        );
        for i in pinned[0] + 1..=pinned[1] {
            term.send(b"n");
            term.wait_for(&said(i), Duration::from_secs(10), |s| s.contains(&said(i)));
        }
        let second = secs_after(&term.contents(), &said(pinned[1])).unwrap();
        assert!(
            (second - stall(1).0).abs() < 0.02,
            "{second} vs {:?}",
            stall(1)
        );
        for i in (pinned[0]..pinned[1]).rev() {
            term.send(b"N");
            term.wait_for(&said(i), Duration::from_secs(10), |s| s.contains(&said(i)));
        }
        assert_eq!(secs_after(&term.contents(), "cursor "), Some(shown));
        // Enter opens the selected carrier's wait there: the pinned sleep, its virtual
        // thread, and its stack with the frame that holds the monitor.
        term.send(b"\r");
        let popup = term.wait_for("the wait under the cursor", Duration::from_secs(10), |s| {
            s.contains("(Esc closes)")
        });
        assert!(popup.contains("pinned from "), "{popup}");
        assert!(popup.contains("virtual thread mounted: #"), "{popup}");
        assert!(popup.contains("Stall$Gate.hold"), "{popup}");
        assert!(popup.contains("[holds monitor]"), "{popup}");
        term.send(b"\x1b");
        term.wait_for("the popup closed", Duration::from_secs(10), |s| {
            !s.contains("(Esc closes)")
        });
        // Shift-→: one second of recording time on.
        term.send(b"\x1b[1;2C");
        let screen = term.wait_for("the cursor a second on", Duration::from_secs(10), |s| {
            secs_after(s, "cursor ").is_some_and(|c| c != shown)
        });
        let moved = secs_after(&screen, "cursor ").unwrap() - shown;
        assert!((moved - 1.0).abs() < 0.0005, "moved {moved} s:\n{screen}");
        term.send(b"q");
        assert!(term.wait_exit(Duration::from_secs(10)).success());
    }

    // At 100 ms a cell, each carrier's lane has its pinned time: the 3 s and the 1 s
    // sleeps, as the workload timed them, within a cell for each.
    let mut replay = pinprof();
    replay.arg("replay").arg(&out);
    let mut term = Terminal::spawn(replay, ROWS, COLS);
    term.wait_for("the replayed recording", Duration::from_secs(20), ended);
    term.send(b"0");
    for _ in 0..30 {
        let screen = term.contents();
        if screen.contains(" 100ms/cell ") {
            break;
        }
        let cell = screen
            .split("ms/cell")
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok());
        term.send(if cell.is_some_and(|ms| ms < 100) {
            b"Z"
        } else {
            b"z"
        });
        std::thread::sleep(Duration::from_millis(300));
    }
    term.send(b"\x1b[H");
    let screen = term.wait_for("100 ms cells", Duration::from_secs(10), |s| {
        s.contains(" 100ms/cell ") && s.contains("cursor 0.000s")
    });
    let per_lane = pinned_cells(&screen);
    assert_eq!(per_lane.len(), 2, "{screen}");
    let pinned_s: f64 = pins.iter().map(|(a, b)| (b - a) as f64 / 1e9).sum::<f64>() / 2.0;
    for cells in per_lane {
        let shown = cells as f64 / 10.0;
        eprintln!(
            "a carrier's lane: {cells} pinned cells ({shown} s), the workload: {pinned_s:.3} s"
        );
        assert!(
            (shown - pinned_s).abs() <= 0.2,
            "{cells} cells of 100 ms against {pinned_s} s pinned:\n{screen}"
        );
    }
    term.send(b"q");
    assert!(term.wait_exit(Duration::from_secs(10)).success());
}

/// What a user saw at 80x24: a pinned stack 40 frames deep whose pane showed the top ten and
/// never its bottom. On a real terminal, J moves down the stack pane to the virtual
/// thread's first frame, and K back up.
#[test]
fn a_deep_pinned_stack_scrolls_to_its_bottom_at_80x24() {
    let mut jvm = start_vt(21, 4, "DeepPinning", &[]);
    jvm.wait_for("cause ", Duration::from_secs(20))
        .expect("the workload's causes");
    let out = common::record(jvm.pid, 2.0, "deep-tui.pinrec");
    drop(jvm);
    let mut replay = pinprof();
    replay.arg("replay").arg(&out);
    let mut term = Terminal::spawn(replay, 24, 80);
    term.wait_for("the replayed recording", Duration::from_secs(20), ended);
    term.send(b"2");
    const BOTTOM: &str = "Continuation.enterSpecial";
    let top = term.wait_for("the pinned sites", Duration::from_secs(10), |s| {
        s.contains("Pinned sites") && s.contains("↓ more (J/K)")
    });
    assert!(!top.contains(BOTTOM), "{top}");
    // As deep as the JIT made it (an inlined and a compiled frame each, a method of
    // many): J until the pane says nothing more is below. (The first presses move the
    // marked line within the first screen only; extra ones stop at the last line.)
    let mut screen = top;
    let mut presses = 0;
    while screen.contains("↓ more") && presses < 200 {
        term.send(b"J");
        presses += 1;
        std::thread::sleep(Duration::from_millis(100));
        screen = term.contents();
    }
    assert!(screen.contains(BOTTOM), "the stack's bottom:\n{screen}");
    assert!(!screen.contains("↓ more"), "{screen}");
    for _ in 0..=presses {
        term.send(b"K");
    }
    let back = term.wait_for("the stack's top", Duration::from_secs(10), |s| {
        !s.contains(BOTTOM) && !s.contains("↑")
    });
    assert!(back.contains("↓ more (J/K)"), "{back}");
}
