//! Virtual threads' stacks to the bottom, with source lines, against JFR: virtual threads that
//! unmounted once (their older frames frozen in a stack chunk on the heap) pin three calls
//! deeper; each pinned event pinprof walked is matched to JFR's `jdk.VirtualThreadPinned` of
//! the same virtual thread at the same time, and their Java frames compared from JFR's
//! innermost frame down to the bottom (`Continuation.enterSpecial`), lines included.

mod common;

use std::time::Duration;

use common::{jfr::Jfr, *};
use profiler::{
    events::{Event, FrameKind},
    recording::Recording,
};

/// A walked pinned event: its virtual thread, start (Unix ns) and Java frames with lines.
struct Walked {
    vthread: u64,
    start_unix_ns: u64,
    frames: Vec<(String, Option<u32>)>,
    /// The walk stopped at frames frozen in a chunk it could not read (its marker ends it).
    stopped: bool,
}

/// The Java stacks pinprof recorded for intervals of carriers with a virtual thread mounted.
/// Also the recording's window, in Unix ns.
fn walked(path: &std::path::Path) -> (Vec<Walked>, std::ops::Range<u64>) {
    let recording = Recording::open(path).unwrap();
    let header = &recording.header;
    let mut stacks = std::collections::HashMap::new();
    let mut vthreads = std::collections::HashMap::new();
    let mut java_stacks = Vec::new();
    let mut out = Vec::new();
    for event in &recording.events {
        match event {
            Event::Stack(s) => {
                stacks.insert(s.id, s.frames.clone());
            }
            Event::OffCpu(e) => {
                if let Some(v) = e.java.as_ref().and_then(|j| j.vthread) {
                    vthreads.insert((e.tid, e.start_ns), v);
                }
            }
            Event::JavaStack {
                tid,
                start_ns,
                stack,
            } => java_stacks.push((*tid, *start_ns, *stack)),
            _ => {}
        }
    }
    // (A pinned wait's stack is copied as it blocks: it comes before its interval.)
    for (tid, start_ns, stack) in java_stacks {
        let (Some(&vthread), Some(frames)) = (vthreads.get(&(tid, start_ns)), stacks.get(&stack))
        else {
            continue;
        };
        let stopped = frames
            .last()
            .is_some_and(|f| f.label().starts_with("[callers frozen"));
        let frames = frames
            .iter()
            // Methods: not the marks of a call from the VM or of a VM stub, which
            // JFR does not show. (A frame the walk could not name stays, and differs.)
            .filter(|f| {
                f.kind == FrameKind::Java && !matches!(f.module.as_deref(), Some("vm" | "stub"))
            })
            .map(|f| (f.label(), f.line))
            .collect();
        out.push(Walked {
            vthread,
            start_unix_ns: header.start_unix_ns + (start_ns - header.start_mono_ns),
            frames,
            stopped,
        });
    }
    let end_mono = recording.end.as_ref().map_or(0, |e| e.end_mono_ns);
    let start = header.start_unix_ns;
    (
        out,
        start..start + end_mono.saturating_sub(header.start_mono_ns),
    )
}

/// `Foo$$Lambda/0x...` (JFR), `Foo$$Lambda+0x...` (HotSpot's name) read the same.
fn normalized(name: &str) -> String {
    match name.find("$$Lambda") {
        Some(at) => {
            let method = name.rsplit('.').next().unwrap_or("");
            format!("{}$$Lambda.{method}", &name[..at])
        }
        None => name.to_string(),
    }
}

/// Whether our frames, from JFR's innermost frame on, are JFR's to the bottom, lines
/// included (where JFR gives one).
fn same(ours: &[(String, Option<u32>)], jfr: &[(String, Option<u32>)]) -> bool {
    let Some((first, _)) = jfr.first() else {
        return false;
    };
    let Some(from) = ours.iter().position(|(n, _)| n == first) else {
        return false;
    };
    let ours = &ours[from..];
    ours.len() == jfr.len()
        && ours
            .iter()
            .zip(jfr)
            .all(|((n, l), (jn, jl))| normalized(n) == normalized(jn) && (jl.is_none() || l == jl))
}

fn check(major: u32, mode: &str) {
    let jvm = start_vt(major, 4, "DeepPin", &[mode, "4", "3"]);
    std::thread::sleep(Duration::from_millis(1500));
    let jfr = Jfr::start(major, jvm.pid, &format!("frozen{major}"));
    // Some 800 pinned waits a second, each with its stack and frozen frames copied: a ring
    // buffer with room for the drain falling behind while the other tests load the machine.
    let path = record_with(
        jvm.pid,
        4.0,
        &format!("frozen{major}.pinrec"),
        &["--ring-buffer-mib", "64"],
    );
    let truth = jfr.stop();
    let lost = report_json(&path)["lost_events"].as_u64().unwrap();
    let (ours, window) = walked(&path);
    // JFR records longer than pinprof: its events inside pinprof's window count.
    let truth: Vec<_> = truth
        .into_iter()
        .filter(|e| window.contains(&e.start_unix_ns))
        .collect();
    let in_window = truth.len();
    // The ring buffer has room to spare, but the kernel can still skip a switch-in or a
    // program's run (CI lost 1 of some 3,000): a few losses are counted and shown, and the
    // matching below stands on proportions they cannot tip. More would make it unfair.
    eprintln!("JDK {major}: {lost} events lost");
    assert!(
        lost as f64 <= 0.01 * in_window as f64,
        "JDK {major}: {lost} events lost of JFR's {in_window}; the comparison would be unfair"
    );
    let (mut matched, mut equal, mut deep) = (0, 0, 0);
    let mut first_difference = None;
    for event in truth.iter().filter(|e| !e.truncated) {
        // Ours of the same virtual thread that began closest to JFR's (within 2 ms).
        let Some(mine) = ours
            .iter()
            .filter(|w| Some(w.vthread) == event.thread_id)
            .min_by_key(|w| w.start_unix_ns.abs_diff(event.start_unix_ns))
            .filter(|w| w.start_unix_ns.abs_diff(event.start_unix_ns) < 2_000_000)
        else {
            continue;
        };
        matched += 1;
        if same(&mine.frames, &event.frames) {
            equal += 1;
            deep += usize::from(mine.frames.iter().any(|(n, _)| n == "DeepPin.task"));
        } else if first_difference.is_none() {
            first_difference = Some((mine.frames.clone(), event.frames.clone()));
        } else if std::env::var_os("FROZEN_STACKS_DIFFS").is_some() {
            let line = |f: &[(String, Option<u32>)]| {
                f.iter()
                    .map(|(n, l)| format!("{n}:{}", l.unwrap_or(0)))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            eprintln!("ours {}\njfr  {}", line(&mine.frames), line(&event.frames));
        }
    }
    eprintln!(
        "JDK {major} ({mode}): JFR {} pinned events, {matched} matched to ours, {equal} with \
         the same Java frames and lines to the bottom ({:.1}%)",
        truth.len(),
        100.0 * equal as f64 / matched.max(1) as f64
    );
    assert!(
        equal as f64 >= 0.95 * matched as f64,
        "JDK {major}: {equal} of {matched} equal; first difference (ours, JFR): {:#?}",
        first_difference
    );
    assert!(matched >= 100, "JDK {major}: only {matched} events matched");
    assert!(
        matched as f64 >= 0.9 * in_window as f64,
        "JDK {major}: {matched} of JFR's {in_window} events in the window matched"
    );
    assert_eq!(
        deep, equal,
        "the task's own frames are in every equal stack"
    );
    // The report says how many stacks stop short at frozen frames: few, and not hidden.
    let cut = report_json(&path)["capture"]["java_stacks_cut"]
        .as_u64()
        .expect("capture.java_stacks_cut");
    let stopped = ours.iter().filter(|w| w.stopped).count() as u64;
    eprintln!(
        "JDK {major}: the report counts {cut} blocked stacks cut at frozen frames; {stopped} of \
         the {} walked here stop there",
        ours.len()
    );
    for n in [cut, stopped] {
        assert!(
            n as f64 <= 0.05 * ours.len() as f64,
            "{n} of {} stacks cut",
            ours.len()
        );
    }
}

#[test]
fn jdk21_pinned_stacks_equal_jfr_to_the_bottom() {
    check(21, "monitor");
}

#[test]
fn jdk25_pinned_stacks_equal_jfr_to_the_bottom() {
    check(25, "clinit");
}
