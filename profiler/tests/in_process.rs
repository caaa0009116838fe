//! The capture driven in-process through the library, as aya's own integration tests load
//! their programs: the test process itself loads pinprof's kernel programs, records the native
//! test program, stops the capture, and runs the recording through the model and the analysis.
//! No `pinprof` binary in between. Needs root.

mod common;

use std::{
    io::{BufRead as _, BufReader, Write as _},
    process::{Command, Stdio},
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use common::{assert_within, require_root, scratch};
use profiler::{
    analysis::Analysis,
    model::Model,
    record::{self, Stops},
    recording::StopReason,
    report,
};

/// pinprof-testprog's `sleep` scenario, recorded in this process from before it starts to
/// after it ends: the napper thread's blocked time is what it measured itself sleeping.
#[test]
fn an_in_process_capture_sees_the_naps_the_program_measured() {
    require_root();
    let mut prog = Command::new(env!("CARGO_BIN_EXE_pinprof-testprog"))
        .args(["sleep", "40"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start pinprof-testprog");
    let mut lines = BufReader::new(prog.stdout.take().unwrap()).lines();
    let ready = lines.next().unwrap().unwrap();
    let pid: u32 = ready.trim_start_matches("ready ").parse().unwrap();

    let output = scratch("in-process.pinrec");
    let options = record::Options {
        pid,
        duration: Some(Duration::from_secs(30)),
        output: output.clone(),
        replace: false,
        min_off_cpu: Duration::ZERO,
        ring_buffer_bytes: 16 << 20,
        attach: false,
        min_syscall: Some(Duration::from_millis(1)),
        trace_syscalls: true,
        fp_cross_check: false,
        min_java_stack: Duration::from_millis(1),
        progress: false,
        on_cpu_hz: Some(99),
        late_wakeup: Duration::from_millis(2),
        vthread_waits: None,
        budget: Default::default(),
        max_size: None,
    };
    let (signal, quit) = (AtomicBool::new(false), AtomicBool::new(false));
    let mut naps = common::naps::Naps::default();
    let summary = std::thread::scope(|scope| {
        let recorder = scope.spawn(|| {
            record::run_with(
                &options,
                Stops {
                    signal: &signal,
                    quit: &quit,
                },
                None,
            )
        });
        // The file appears once the programs are attached.
        let deadline = Instant::now() + Duration::from_secs(15);
        while !output.exists() && Instant::now() < deadline && !recorder.is_finished() {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(output.exists(), "the capture did not start within 15 s");
        let mut stdin = prog.stdin.take().unwrap();
        writeln!(stdin, "go").unwrap();
        naps = common::naps::Naps::read(lines.by_ref());
        std::thread::sleep(Duration::from_millis(300));
        // As Ctrl-C would.
        signal.store(true, Ordering::Relaxed);
        let summary = recorder.join().expect("the recorder thread");
        drop(stdin);
        summary
    })
    .expect("the in-process capture");
    let _ = prog.wait();
    assert_eq!(summary.reason, StopReason::Interrupted);
    assert_eq!(summary.lost, 0, "{}", summary.lost_causes);
    assert!(summary.events > 40, "{} events", summary.events);
    assert_eq!(naps.slept.len(), 40);

    let model = Model::read(&output).expect("the recording reads back");
    let analysis = Analysis::new(&model);
    let napper = analysis
        .threads()
        .iter()
        .find(|t| t.name == "napper")
        .expect("the napper thread");
    // The time off CPU inside each nap the program measured (from its sleep call to its
    // clock read after it) is that nap: the wait, and the wake-up's wait for a CPU.
    let measured = naps.measured_ns();
    let off_cpu: u64 = naps
        .slept
        .iter()
        .map(|&(from, to)| {
            model
                .off_cpu
                .iter()
                .filter(|o| o.tid == napper.tid)
                .map(|o| o.end_ns.min(to).saturating_sub(o.start_ns.max(from)))
                .sum::<u64>()
        })
        .sum();
    assert_within(
        "napper's time off CPU in its naps (ms)",
        off_cpu as f64 / 1e6,
        measured as f64 / 1e6,
        0.05,
    );
    // Of which blocked: at least the 20 ms each nap asked for, at most what the kernel's
    // account of the thread's life leaves for it (see `Naps::blocked_bounds_ns`).
    let (low, high) = naps.blocked_bounds_ns();
    assert!(
        (low..=high).contains(&napper.blocked_ns),
        "napper blocked {} ns in 40 naps of 20 ms measured as {measured} ns; bounds {low}-{high} ns",
        napper.blocked_ns
    );
    // The report says the same figure as the analysis it reads.
    let json = report::to_json(&analysis, &report::Options::default());
    let row = json["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "napper")
        .unwrap();
    assert_eq!(row["blocked_ns"], napper.blocked_ns);
    assert_eq!(json["lost_events"], 0);
}
