//! A fixture recording through the library's stages in-process, without root: read as a
//! stream into the model, analysed once, said as the JSON report. Its figures are the ones the
//! fixture was built with, and the `pinprof` binary, a thin layer over the same stages, prints
//! the very same report.

mod common;

use common::fixture::{START, file, session};
use common::{assert_ok, pinprof, scratch};
use profiler::analysis::Analysis;
use profiler::events::{Event, OffCpu};
use profiler::{model::Model, recording::Recording, report};
use serde_json::Value;

const MS: u64 = 1_000_000;

/// The report of a recording file made through the library: streamed into the model.
fn library_report(path: &std::path::Path) -> Value {
    let model = Model::read(path).expect("the fixture is a usable recording");
    report::to_json(&Analysis::new(&model), &report::Options::default())
}

/// `pinprof report --format json` of the same file, as the binary prints it.
fn binary_report(path: &std::path::Path) -> Value {
    let out = pinprof()
        .arg("report")
        .arg(path)
        .args(["--format", "json"])
        .output()
        .expect("run pinprof report");
    assert_ok(&out, "pinprof report");
    serde_json::from_slice(&out.stdout).expect("the report is JSON")
}

fn carrier(report: &Value, tid: u64) -> &Value {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == tid)
        .unwrap_or_else(|| panic!("no thread {tid} in {}", report["threads"]))
}

/// Two carriers pinned by turns, 8 ms in every 10, 200 times, never both at once: the
/// fixture's own figures, whichever way the recording is read.
#[test]
fn a_fixture_reports_the_figures_it_was_built_with() {
    let events = session(200, |x| START + x, |tid| tid);
    let path = scratch("fixture-session.pinrec");
    std::fs::write(&path, file(&events, START + 3_000 * MS)).unwrap();

    let streamed = library_report(&path);
    // Read as a stream or whole: one model, one report.
    let whole = {
        let bytes = std::fs::read(&path).unwrap();
        let recording = Recording::parse(&bytes).unwrap();
        let model = Model::from_recording(&recording);
        report::to_json(&Analysis::new(&model), &report::Options::default())
    };
    assert_eq!(streamed, whole);
    // The binary only parses its arguments and calls the same stages.
    assert_eq!(binary_report(&path), streamed);

    let pinned = &streamed["pinned"];
    assert_eq!(pinned["events"], 200);
    assert_eq!(pinned["total_ns"], 200 * 8 * MS);
    // Each carrier took every other wait: 100 of 8 ms.
    for tid in [10, 11] {
        let row = carrier(&streamed, tid);
        assert_eq!(row["role"], "carrier", "{row}");
        assert_eq!(row["pinned_ns"], 100 * 8 * MS, "{row}");
    }
    // One cause: a sleep inside the synchronized `Shop$Ledger.append`, under the kernel's
    // frames of the futex wait it blocked in.
    let sites = pinned["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 1, "{sites:?}");
    assert_eq!(sites[0]["reason"], "monitor");
    assert_eq!(sites[0]["operation"], "park");
    assert_eq!(sites[0]["events"], 200);
    let frames: Vec<&str> = sites[0]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(
        frames,
        [
            "__schedule",
            "futex_wait",
            "java.lang.Thread.sleep",
            "Shop$Ledger.append",
            "Shop.lambda$main$0"
        ]
    );
    // Never both carriers at once: no starvation.
    assert_eq!(streamed["starvation"]["total_ns"], 0);
    assert_eq!(streamed["lost_events"], 3);
}

/// The same session with the second carrier's waits moved 4 ms earlier: each round both are
/// pinned for 4 ms at once, and that is the starvation, episode by episode.
#[test]
fn overlapping_pins_are_starvation_of_the_overlap() {
    let rounds = 50;
    let events: Vec<Event> = session(rounds, |x| START + x, |tid| tid)
        .into_iter()
        .map(|e| match e {
            // Carrier 11 waits in the odd rounds: [i*10 + 6, i*10 + 14) ms once moved.
            Event::OffCpu(o) if o.tid == 11 => Event::OffCpu(OffCpu {
                start_ns: o.start_ns - 4 * MS,
                end_ns: o.end_ns - 4 * MS,
                ..o
            }),
            e => e,
        })
        .collect();
    let path = scratch("fixture-overlap.pinrec");
    std::fs::write(&path, file(&events, START + 3_000 * MS)).unwrap();
    let report = library_report(&path);
    assert_eq!(binary_report(&path), report);
    // Carrier 10 waits [0,8), [20,28)...; carrier 11 [6,14), [26,34)...: they overlap
    // [6,8), [26,28)... 2 ms in each of the 25 pairs of rounds.
    let pairs = rounds / 2;
    let episodes = report["starvation"]["episodes"].as_array().unwrap();
    assert_eq!(episodes.len() as u64, pairs, "{episodes:?}");
    assert_eq!(report["starvation"]["total_ns"], pairs * 2 * MS);
    for (i, e) in episodes.iter().enumerate() {
        assert_eq!(e["start_ns"], i as u64 * 20 * MS + 6 * MS, "{e}");
        assert_eq!(e["duration_ns"], 2 * MS, "{e}");
        assert_eq!(e["blocked_carriers"], 2, "{e}");
    }
    assert_eq!(report["pinned"]["total_ns"], rounds * 8 * MS);
}
