//! Recordings are untrusted input: whatever a file holds (cut anywhere, bits flipped, hostile
//! lengths, counts and timestamps), reading it and every view made from it ends without a
//! panic or an abort, and with memory bounded by the file's size. Needs no root.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicUsize, Ordering},
};

mod common;

use clap::ValueEnum as _;
use common::fixture::{START, file, session};
use profiler::analysis::Analysis;
use profiler::{flamegraph, model, recording::Recording, report};
use proptest::prelude::*;

/// Counts the bytes allocated and live, and the peak, to bound what a hostile file costs.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Everything made from a recording: the model, both reports, every flamegraph.
fn every_view(bytes: &[u8]) {
    let Ok(recording) = Recording::parse(bytes) else {
        return;
    };
    let model = model::Model::from_recording(&recording);
    let analysis = Analysis::new(&model);
    let options = report::Options::default();
    let _ = report::to_text(&analysis, &options);
    let _ = serde_json::to_string(&report::to_json(&analysis, &options)).unwrap();
    for &kind in flamegraph::Kind::value_variants() {
        for per_thread in [false, true] {
            let options = flamegraph::Options {
                per_thread,
                kind,
                ..Default::default()
            };
            let _ = flamegraph::write_svg(&analysis, &options, std::io::sink());
        }
    }
}

/// Runs `every_view` and checks what it cost at most: a generous multiple of the input and a
/// constant (the largest record a file may hold is 16 MiB).
fn bounded(bytes: &[u8]) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    every_view(bytes);
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    let bound = 64 * bytes.len() + (64 << 20);
    assert!(
        peak <= bound,
        "{peak} bytes for a {}-byte file",
        bytes.len()
    );
}

/// Values a hostile file would hold where a length, count or time goes.
fn hostile_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0),
        Just(u64::MAX),
        Just(u64::MAX / 2),
        Just(u64::from(u32::MAX)),
        Just(1 << 40),
        Just(START - 1),
        any::<u64>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A well-formed file whose times and ids are hostile.
    #[test]
    fn hostile_times_and_ids(base in hostile_u64(), scale in hostile_u64(), end in hostile_u64(),
                             tid_base in any::<u32>()) {
        let t = |x: u64| base.wrapping_add(x.wrapping_mul(scale % 1_000_003));
        let events = session(20, t, |tid| tid_base.wrapping_add(tid));
        bounded(&file(&events, end));
    }

    /// A good file, damaged: cut, bits flipped, hostile words written over it.
    #[test]
    fn damaged_files(cut in any::<prop::sample::Index>(),
                     flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 0..16),
                     words in prop::collection::vec((any::<prop::sample::Index>(), hostile_u64()), 0..8)) {
        let mut bytes = file(&session(200, |x| START + x, |tid| tid), START + 3_000_000_000);
        for (at, bit) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        for (at, word) in words {
            let i = at.index(bytes.len().saturating_sub(8).max(1));
            let end = (i + 8).min(bytes.len());
            bytes[i..end].copy_from_slice(&word.to_le_bytes()[..end - i]);
        }
        let keep = cut.index(bytes.len() + 1);
        bytes.truncate(keep.max(1));
        bounded(&bytes);
    }
}

#[test]
fn a_good_file_is_read_whole() {
    let events = session(200, |x| START + x, |tid| tid);
    let bytes = file(&events, START + 3_000_000_000);
    // Left for `cargo xtask fuzz` to start from.
    let seeds = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("pinprof-tests");
    std::fs::create_dir_all(&seeds).unwrap();
    std::fs::write(seeds.join("synthetic.pinrec"), &bytes).unwrap();
    let recording = Recording::parse(&bytes).unwrap();
    assert_eq!(recording.events, events);
    assert!(recording.damage.is_empty());
    let model = model::Model::from_recording(&recording);
    let json = report::to_json(&Analysis::new(&model), &report::Options::default());
    // Two carriers pinned 8 ms a time, 200 times: 1.6 s.
    assert_eq!(json["pinned"]["events"], 200);
    assert_eq!(json["pinned"]["total_ns"], 1_600_000_000u64);
}
