//! Synthetic recordings for the tests that need no root: a small JDK 21 session whose every
//! figure is known by construction, written as pinprof writes a recording.

use profiler::{
    events::{
        Counters, Event, Frame, FrameKind, FutexWait, FutexWaker, JavaBlock, JavaThreadInfo,
        JavaThreadState, OffCpu, OffCpuState, RuntimeInfo, ShortOffCpu, Stack, Syscall, SyscallSum,
        TargetInfo, ThreadCpu, ThreadName,
    },
    recording::{End, Header, RecordingWriter, StopReason},
    safe_fs::{Existing, create_output},
};

pub const START: u64 = 1_000_000_000;
pub const JAVA_STACK: u32 = 1 << 31;

pub fn header() -> Header {
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

pub fn frame(kind: FrameKind, name: &str, holds_monitor: bool) -> Frame {
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
pub fn session(n: u64, t: impl Fn(u64) -> u64, tid: impl Fn(u32) -> u32) -> Vec<Event> {
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
pub fn file(events: &[Event], end_ns: u64) -> Vec<u8> {
    let scratch = profiler::safe_fs::private_temp_dir("pinprof-hostile").unwrap();
    let dir = scratch.join("fixture.pinrec");
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
    std::fs::remove_dir_all(&scratch).unwrap();
    bytes
}
