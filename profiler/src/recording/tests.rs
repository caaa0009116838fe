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
    let dir = std::env::temp_dir().join(format!("pinprof-rec-{}-{n}", std::process::id()));
    let mut w = RecordingWriter::create(&dir, &header(), None).unwrap();
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
    std::fs::remove_file(&dir).unwrap();
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
fn not_a_recording_is_a_clear_error() {
    let err = Recording::parse(b"hello world, this is text").unwrap_err();
    assert!(err.to_string().contains("not a pinprof recording"));
    let err = Recording::parse(b"").unwrap_err();
    assert!(err.to_string().contains("not a pinprof recording"));
}
