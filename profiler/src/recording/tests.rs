use super::*;
use crate::events::{Counters, JavaBlock, JavaThreadState, OffCpu, OffCpuState, ThreadName};

fn header() -> Header {
    Header {
        pinprof_version: "test".into(),
        target: TargetInfo {
            pid: 42,
            command: "java".into(),
            ..Default::default()
        },
        start_mono_ns: 1_000,
        start_unix_ns: 2_000,
        hostname: "h".into(),
        kernel_release: "6.18".into(),
        min_off_cpu_ns: 0,
        min_syscall_ns: Some(1_000_000),
    }
}

fn event(i: u64) -> Event {
    Event::OffCpu(OffCpu {
        tid: 7,
        start_ns: 1_000 + i * 10,
        end_ns: 1_005 + i * 10,
        state: OffCpuState::Sleeping,
        kernel_stack: Some(1),
        user_stack: None,
        waker_tid: Some(8),
        cpu: 0,
        // Every other event as a pinned carrier's, so the Java part round-trips too.
        java: i.is_multiple_of(2).then(|| JavaBlock {
            state: JavaThreadState::Blocked,
            vthread: Some(40 + i),
            pending_monitor: None,
            waiting_monitor: Some(0x7f00_0000_1000),
            held_monitors: 1,
            pin_count: 0,
            at_safepoint: false,
            anchor: [1, 2, 3],
        }),
    })
}

fn write_sample(n: u64) -> (Vec<u8>, Vec<usize>) {
    let scratch = crate::safe_fs::private_temp_dir("pinprof-rec").unwrap();
    let dir = scratch.join(format!("{n}.pinrec"));
    let output = crate::safe_fs::create_output(&dir, crate::safe_fs::Existing::Replace).unwrap();
    let mut w = RecordingWriter::create(output, &header(), None).unwrap();
    // Offsets at which each event frame is complete.
    let mut ends = Vec::new();
    w.write_event(&Event::Thread(ThreadName {
        tid: 7,
        name: "sleeper".into(),
    }))
    .unwrap();
    for i in 0..n {
        w.write_event(&event(i)).unwrap();
        ends.push(w.bytes() as usize);
    }
    w.write_event(&Event::Counters {
        time_ns: 9_999,
        counters: Counters::default(),
    })
    .unwrap();
    w.finish(End {
        end_mono_ns: 10_000,
        reason: StopReason::Duration,
    })
    .unwrap();
    let bytes = std::fs::read(&dir).unwrap();
    std::fs::remove_dir_all(&scratch).unwrap();
    (bytes, ends)
}

fn off_cpu_count(r: &Recording) -> usize {
    r.events
        .iter()
        .filter(|e| matches!(e, Event::OffCpu(_)))
        .count()
}

#[test]
fn round_trip_keeps_everything() {
    let (bytes, _) = write_sample(5);
    let r = Recording::parse(&bytes).unwrap();
    assert_eq!(r.header, header());
    assert_eq!(off_cpu_count(&r), 5);
    assert_eq!(r.events[1], event(0));
    assert_eq!(r.end.as_ref().unwrap().reason, StopReason::Duration);
    assert!(r.damage.is_empty());
    assert_eq!(r.end_mono_ns(), 10_000);
}

#[test]
fn a_cut_at_any_byte_keeps_the_events_before_it() {
    let (bytes, ends) = write_sample(20);
    for cut in 0..bytes.len() {
        match Recording::parse(&bytes[..cut]) {
            Ok(r) => {
                let whole = ends.iter().filter(|&&end| end <= cut).count();
                assert_eq!(off_cpu_count(&r), whole, "cut at {cut}");
                if cut < bytes.len() && r.end.is_none() && cut > ends[0] {
                    assert!(matches!(
                        r.damage.last(),
                        Some(Damage::Truncated { .. }) | None
                    ));
                }
            }
            // Only a cut inside the magic, version or header frame may fail, and it says why.
            Err(e) => assert!(cut < ends[0], "cut at {cut} failed: {e}"),
        }
    }
}

#[test]
fn a_damaged_frame_is_skipped_and_reported() {
    let (mut bytes, ends) = write_sample(10);
    // Flip a byte inside the payload of the 4th event.
    let at = ends[3] - 2;
    bytes[at] ^= 0xff;
    let r = Recording::parse(&bytes).unwrap();
    assert_eq!(off_cpu_count(&r), 9);
    assert!(matches!(r.damage.as_slice(), [Damage::Corrupt { .. }]));
    assert!(r.end.is_some(), "frames after the damage are read");
}

#[test]
fn a_damaged_header_leaves_the_events_readable() {
    let (mut bytes, ends) = write_sample(10);
    // A byte inside the header record (it follows the magic, the version and its own
    // fragment header).
    bytes[MAGIC.len() + 4 + 7 + 3] ^= 0xff;
    let r = Recording::parse(&bytes).unwrap();
    assert_eq!(off_cpu_count(&r), 10);
    assert!(r.damage.contains(&Damage::HeaderLost), "{:?}", r.damage);
    assert_eq!(r.header.start_mono_ns, 1_000, "the first event's time");
    assert!(r.warnings().iter().any(|w| w.contains("header is damaged")));
    assert!(ends[0] > 20);
}

#[test]
fn not_a_recording_is_a_clear_error() {
    let err = Recording::parse(b"hello world, this is text").unwrap_err();
    assert!(err.to_string().contains("not a pinprof recording"));
    let err = Recording::parse(b"").unwrap_err();
    assert!(err.to_string().contains("not a pinprof recording"));
}

/// A format-3 file as earlier pinprof versions wrote it: frames one after another.
fn legacy_file(records: &[Record]) -> Vec<u8> {
    let payloads: Vec<Vec<u8>> = records
        .iter()
        .map(|r| postcard::to_stdvec(r).unwrap())
        .collect();
    legacy_payloads(&payloads)
}

fn legacy_payloads(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    for payload in payloads {
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        bytes.extend_from_slice(payload);
    }
    bytes
}

#[test]
fn stacks_of_formats_before_5_are_read_without_lines() {
    use crate::events::{Frame, FrameKind, Stack};
    /// A frame as formats 2 to 4 wrote it.
    #[derive(serde::Serialize)]
    struct OldFrame {
        kind: FrameKind,
        addr: u64,
        name: Option<String>,
        module: Option<String>,
        holds_monitor: bool,
    }
    let old = OldFrame {
        kind: FrameKind::Java,
        addr: 0x1234,
        name: Some("Shop.buy".into()),
        module: Some("interpreted".into()),
        holds_monitor: true,
    };
    // Record::Event, Event::Stack, then the stack's id and frames.
    let mut stack = vec![1u8, 1];
    stack.extend(postcard::to_stdvec(&(7u32, vec![old])).unwrap());
    let header = postcard::to_stdvec(&Record::Header(header())).unwrap();
    let r = Recording::parse(&legacy_payloads(&[header, stack])).unwrap();
    assert!(r.damage.is_empty(), "{:?}", r.damage);
    let expected = Stack {
        id: 7,
        frames: vec![Frame {
            kind: FrameKind::Java,
            addr: 0x1234,
            name: Some("Shop.buy".into()),
            module: Some("interpreted".into()),
            holds_monitor: true,
            line: None,
        }],
    };
    assert_eq!(r.events, vec![Event::Stack(expected)]);
}

#[test]
fn format_3_is_still_read_damage_included() {
    let mut records = vec![Record::Header(header())];
    records.extend((0..10).map(|i| Record::Event(event(i))));
    records.push(Record::End(End {
        end_mono_ns: 10_000,
        reason: StopReason::Duration,
    }));
    let bytes = legacy_file(&records);
    let r = Recording::parse(&bytes).unwrap();
    assert_eq!((off_cpu_count(&r), r.damage.len()), (10, 0));
    assert_eq!(r.end.as_ref().unwrap().end_mono_ns, 10_000);
    // A damaged frame is skipped, the ones after it found again.
    let mut damaged = bytes.clone();
    let len = damaged.len();
    damaged[len / 2] ^= 0xff;
    let r = Recording::parse(&damaged).unwrap();
    assert_eq!(off_cpu_count(&r), 9);
    assert!(matches!(r.damage.as_slice(), [Damage::Corrupt { .. }]));
    assert!(r.end.is_some());
    // Cut anywhere after the header: whole frames before the cut, no error.
    for cut in [len - 1, len / 2, len / 3] {
        let r = Recording::parse(&bytes[..cut]).unwrap();
        assert!(off_cpu_count(&r) <= 10);
        assert!(matches!(r.damage.last(), Some(Damage::Truncated { .. })));
    }
}

/// Made so that the byte-by-byte search of formats 2 and 3 finds, at every fourth offset, a
/// frame claiming almost 16 MiB: checked naively, 32 MiB of it costs hours of CRC.
#[test]
fn a_crafted_legacy_file_is_read_in_linear_time() {
    let mut bytes = legacy_file(&[Record::Header(header())]);
    let pattern = [0xF0u8, 0xFF, 0xFF, 0x00];
    bytes.extend(pattern.iter().cycle().take(32 << 20));
    let started = std::time::Instant::now();
    let r = Recording::parse(&bytes).unwrap();
    // Generous: the linear search takes well under a second; the quadratic one, hours.
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    assert_eq!(r.header, header());
    assert_eq!(
        r.damage,
        vec![Damage::Corrupt {
            from: bytes.len() as u64 - (32 << 20),
            to: bytes.len() as u64
        }]
    );
}

/// Every block full of fragments that claim more than the block holds, or that fail their
/// check, or that continue records never begun.
#[test]
fn a_crafted_block_file_is_read_in_linear_time() {
    let (mut bytes, _) = write_sample(3);
    let whole = bytes.len();
    let junk: [&[u8]; 3] = [
        &[0xAA, 0xAA, 0xAA, 0xAA, 0xFF, 0xFF, 3],
        &[0, 0, 0, 0, 0x10, 0, 4],
        &[1, 2, 3, 4, 0, 0, 2],
    ];
    for i in 0..(32 << 20) / 7 {
        bytes.extend_from_slice(junk[i % 3]);
    }
    let started = std::time::Instant::now();
    let r = Recording::parse(&bytes).unwrap();
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    assert_eq!(
        off_cpu_count(&r),
        3,
        "the records before the junk are all there"
    );
    assert!(!r.damage.is_empty());
    assert!(bytes.len() > whole);
}

#[test]
fn only_regular_files_are_read_and_at_once() {
    let started = std::time::Instant::now();
    for path in ["/dev/zero", "/", "/dev/null"] {
        let err = Recording::open(std::path::Path::new(path)).unwrap_err();
        assert!(
            format!("{err:#}").contains("regular files only"),
            "{path}: {err:#}"
        );
    }
    let scratch = crate::safe_fs::private_temp_dir("pinprof-fifo").unwrap();
    let fifo = scratch.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let err = Recording::open(&fifo).unwrap_err();
    assert!(format!("{err:#}").contains("a FIFO"), "{err:#}");
    std::fs::remove_dir_all(&scratch).unwrap();
    assert!(started.elapsed().as_secs() < 5);
}

#[test]
fn a_container_round_trips_and_reaches_the_headers() {
    let scratch = crate::safe_fs::private_temp_dir("pinprof-rec-container").unwrap();
    let dir = scratch.join("container.pinrec");
    let output = crate::safe_fs::create_output(&dir, crate::safe_fs::Existing::Replace).unwrap();
    let mut w = RecordingWriter::create(output, &header(), None).unwrap();
    let container = crate::events::ContainerInfo {
        pid_ns_inode: 4026532178,
        ns_pid: 1,
        cgroup: Some("/kubepods/pod1/c2".into()),
        cpu_max: Some("50000 100000".into()),
    };
    w.write_event(&Event::Container(container.clone())).unwrap();
    w.finish(End {
        end_mono_ns: 10_000,
        reason: StopReason::Duration,
    })
    .unwrap();
    let bytes = std::fs::read(&dir).unwrap();
    std::fs::remove_dir_all(&scratch).unwrap();
    let r = Recording::parse(&bytes).unwrap();
    assert!(r.damage.is_empty());
    assert_eq!(r.events, vec![Event::Container(container.clone())]);
    let mut model = crate::model::Model::default();
    model.apply(&r.events[0]);
    assert_eq!(model.container, Some(container));
    assert_eq!(
        crate::report::container_label(&model).unwrap(),
        "container: pid namespace 4026532178 (pid 1 inside), cgroup /kubepods/pod1/c2, \
         cpu.max 50000 100000"
    );
}
