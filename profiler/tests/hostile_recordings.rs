//! Recordings are untrusted input: whatever a file holds (cut anywhere, bits flipped, hostile
//! lengths, counts and timestamps), reading it and every view made from it ends without a
//! panic or an abort, and with memory bounded by the file's size. Needs no root.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicUsize, Ordering},
};

use clap::ValueEnum as _;
use profiler::analysis::Analysis;
use profiler::{
    events::{
        Counters, Event, Frame, FrameKind, FutexWait, FutexWaker, JavaBlock, JavaThreadInfo,
        JavaThreadState, OffCpu, OffCpuState, RuntimeInfo, ShortOffCpu, Stack, Syscall, SyscallSum,
        TargetInfo, ThreadCpu, ThreadName,
    },
    flamegraph, model,
    recording::{End, Header, Recording, RecordingWriter, StopReason},
    report,
    safe_fs::{Existing, create_output},
};
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

const START: u64 = 1_000_000_000;
const JAVA_STACK: u32 = 1 << 31;

fn header() -> Header {
    Header {
        pinprof_version: "test".into(),
        target: TargetInfo {
            pid: 4242,
            command: "java".into(),
            cmdline: vec!["java".into(), "Shop".into()],
            runtime: Some(RuntimeInfo {
                kind: "hotspot".into(),
                version: Some("21.0.8".into()),
                parallelism: Some(2),
                max_pool_size: None,
                libjvm: None,
            }),
        },
        start_mono_ns: START,
        start_unix_ns: 1_700_000_000_000_000_000,
        hostname: "h".into(),
        kernel_release: "6.18".into(),
        min_off_cpu_ns: 0,
        min_syscall_ns: Some(1_000_000),
    }
}

fn frame(kind: FrameKind, name: &str, holds_monitor: bool) -> Frame {
    Frame {
        kind,
        addr: 0x7f00_0000_1000,
        name: Some(name.into()),
        module: None,
        holds_monitor,
        line: None,
    }
}

/// The events of a small JDK 21 session: two carriers pinned in a `synchronized` method, a
/// lock handed over, system calls and accounts. `t` maps a time offset to the event clock.
fn session(n: u64, t: impl Fn(u64) -> u64, tid: impl Fn(u32) -> u32) -> Vec<Event> {
    let mut events = vec![
        Event::Thread(ThreadName {
            tid: tid(10),
            name: "ForkJoinPool-1-".into(),
        }),
        Event::JavaThreads {
            time_ns: t(0),
            threads: vec![
                JavaThreadInfo {
                    tid: tid(10),
                    name: Some("ForkJoinPool-1-worker-1".into()),
                    carrier: true,
                },
                JavaThreadInfo {
                    tid: tid(11),
                    name: Some("ForkJoinPool-1-worker-2".into()),
                    carrier: true,
                },
            ],
        },
        Event::Stack(Stack {
            id: 7,
            frames: vec![
                frame(FrameKind::Kernel, "__schedule", false),
                frame(FrameKind::Kernel, "futex_wait", false),
            ],
        }),
        Event::Stack(Stack {
            id: JAVA_STACK,
            frames: vec![
                frame(FrameKind::Java, "java.lang.Thread.sleep", false),
                frame(FrameKind::Java, "Shop$Ledger.append", true),
                frame(FrameKind::Java, "Shop.lambda$main$0", false),
            ],
        }),
    ];
    for i in 0..n {
        events.push(Event::OffCpu(OffCpu {
            tid: tid(10 + (i % 2) as u32),
            start_ns: t(i * 10_000_000),
            end_ns: t(i * 10_000_000 + 8_000_000),
            state: OffCpuState::Sleeping,
            kernel_stack: Some(7),
            user_stack: Some(JAVA_STACK),
            waker_tid: Some(tid(12)),
            cpu: (i % 2) as u32,
            java: Some(JavaBlock {
                state: JavaThreadState::Blocked,
                vthread: Some(40 + i),
                pending_monitor: None,
                waiting_monitor: None,
                held_monitors: 1,
                pin_count: 0,
                at_safepoint: false,
                anchor: [0x7ff0_0000, 0x7f00_0000_1000, 0x7ff0_0040],
            }),
        }));
        events.push(Event::Syscall(Syscall {
            tid: tid(12),
            nr: 202,
            name: "futex".into(),
            args: [0x5000, 0x80, 0, 0],
            start_ns: t(i * 10_000_000),
            end_ns: t(i * 10_000_000 + 3_000_000),
            ret: 0,
            user_stack: Some(7),
            fd: None,
            futex: Some(FutexWait {
                uaddr: 0x5000,
                op: 0x80,
                timeout_ns: Some(5_000_000),
                waker: Some(FutexWaker {
                    tid: tid(10),
                    wake_ns: t(i * 10_000_000 + 3_000_000),
                    user_stack: Some(JAVA_STACK),
                    kernel_stack: Some(7),
                }),
            }),
            unfinished: i == n - 1,
        }));
    }
    events.extend([
        Event::Counters {
            time_ns: t(n * 10_000_000),
            counters: Counters {
                lost_events: 3,
                ..Default::default()
            },
        },
        Event::ShortOffCpu {
            time_ns: t(n * 10_000_000),
            threads: vec![ShortOffCpu {
                tid: tid(10),
                count: 5,
                total_ns: 1_000,
                preempted_ns: 100,
            }],
        },
        Event::ThreadCpu {
            time_ns: t(n * 10_000_000),
            threads: vec![ThreadCpu {
                tid: tid(10),
                run_ns: 1_000_000,
                wait_ns: 10,
            }],
        },
        Event::SyscallSums {
            time_ns: t(n * 10_000_000),
            sums: vec![SyscallSum {
                tid: tid(12),
                nr: 0,
                name: "read".into(),
                count: 9,
                total_ns: 900,
                max_ns: 200,
            }],
        },
    ]);
    events
}

/// A recording file of `events`, as pinprof writes it.
fn file(events: &[Event], end_ns: u64) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!(
        "pinprof-hostile-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let output = create_output(&dir, Existing::Replace).unwrap();
    let mut writer = RecordingWriter::create(output, &header(), None).unwrap();
    for event in events {
        writer.write_event(event).unwrap();
    }
    writer
        .finish(End {
            end_mono_ns: end_ns,
            reason: StopReason::Duration,
        })
        .unwrap();
    let bytes = std::fs::read(&dir).unwrap();
    std::fs::remove_file(&dir).unwrap();
    bytes
}

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
            let options = flamegraph::Options { per_thread, kind };
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
