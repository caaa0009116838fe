//! The other ways carriers starve, end to end on real JVMs: a virtual thread that computes
//! without yielding (monopolization, timed against the workload's own clock, and the on-CPU
//! samples that name its method), and carriers the scheduler does not run (wakeup latency
//! and run-queue delay with CPU hogs on the carriers' CPU, against `perf sched`'s view of
//! the same run).

mod common;

use std::{
    collections::HashMap,
    process::{Child, Command, Stdio},
    time::Duration,
};

use common::*;
use serde_json::Value;

/// A burst the workload timed with `System.nanoTime`: (virtual thread id, start, end).
type Burst = (u64, u64, u64);

/// The bursts the Monopolize workload printed, up to the first that began after `until_ns`
/// (CLOCK_MONOTONIC, like `System.nanoTime`).
fn bursts(jvm: &mut Jvm, until_ns: u64) -> Vec<Burst> {
    let mut out = Vec::new();
    while let Ok(line) = jvm.lines.recv_timeout(Duration::from_secs(5)) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if let ["burst", id, start, duration] = parts[..] {
            let start: u64 = start.parse().unwrap();
            out.push((
                id.parse().unwrap(),
                start,
                start + duration.parse::<u64>().unwrap(),
            ));
            if start > until_ns {
                break;
            }
        }
    }
    out
}

/// Two virtual threads, each computing 200 ms at a time in `Monopolize.crunch`, on one
/// carrier: every burst inside the window is a monopolization episode of its virtual thread,
/// as long as the workload measured it (within 10%), naming the method; and most on-CPU
/// samples of the process are in that method, as much time as the carriers ran by the
/// scheduler's account (within 15%: samples are a statistic).
fn monopolization_matches_the_workloads_clock(major: u32) {
    let mut jvm = start_vt(major, 1, "Monopolize", &["2", "200", "50"]);
    // Compiled by now: the bursts run at full speed from the window's start.
    std::thread::sleep(Duration::from_millis(1500));
    let recording = record(jvm.pid, 4.0, &format!("monopolize-{major}.pinrec"));
    let report = report_json(&recording);
    let from = report["window"]["start_mono_ns"].as_u64().unwrap();
    let to = from + report["window"]["duration_ns"].as_u64().unwrap();
    let bursts = bursts(&mut jvm, to);
    assert_eq!(report["oncpu"]["hz"], 99, "sampled at the default rate");

    let episodes = report["monopolized"].as_array().unwrap();
    let mut matched = 0;
    // Bursts wholly inside the window, clear of its first half second: pinprof's own start
    // (reading the JVM, naming its libraries) takes CPU from the carrier on this 2-CPU
    // machine then, so fewer samples mark where a burst begins. Each is one episode.
    for &(id, start, end) in bursts
        .iter()
        .filter(|b| b.1 > from + 500_000_000 && b.2 + 20_000_000 < to)
    {
        let episode = episodes
            .iter()
            .find(|e| {
                let s = from + e["start_ns"].as_u64().unwrap();
                let e_end = s + e["duration_ns"].as_u64().unwrap();
                e["vthread_id"] == id && s < end && start < e_end
            })
            .unwrap_or_else(|| {
                panic!("JDK {major}: no episode of virtual thread {id} for its burst at {start}: {episodes:#?}")
            });
        assert_within(
            &format!("JDK {major}: virtual thread {id}'s burst"),
            ns(&episode["duration_ns"]),
            (end - start) as f64,
            0.10,
        );
        let frames = strings(&episode["frames"]);
        assert!(
            frames.iter().take(3).any(|f| *f == "Monopolize.crunch"),
            "JDK {major}: the episode names the spinning method: {frames:?}"
        );
        matched += 1;
    }
    assert!(
        matched >= 10,
        "JDK {major}: only {matched} bursts in the window ({} printed)",
        bursts.len()
    );

    let sites = report["oncpu"]["sites"].as_array().unwrap();
    let in_crunch: u64 = sites
        .iter()
        .filter(|s| strings(&s["frames"]).contains(&"Monopolize.crunch"))
        .map(|s| s["samples"].as_u64().unwrap())
        .sum();
    // Against the time the carriers ran, by the scheduler's account: on a busy host the
    // bursts' wall time holds time the carrier waited for a CPU, which no sample sees.
    // (Between bursts a carrier only parks and wakes: nearly all it runs is the bursts.)
    let ran: f64 = carrier_threads(&report)
        .iter()
        .map(|t| ns(&t["running_ns"]))
        .sum();
    assert_within(
        &format!("JDK {major}: time sampled in Monopolize.crunch vs the carriers' CPU time"),
        in_crunch as f64 * 1e9 / 99.0,
        ran,
        0.15,
    );
}

#[test]
fn jdk21_monopolization_matches_the_workloads_clock() {
    monopolization_matches_the_workloads_clock(21);
}

#[test]
fn jdk25_monopolization_matches_the_workloads_clock() {
    monopolization_matches_the_workloads_clock(25);
}

/// Requests that hash (SHA-256 on the CPU's SHA instructions: the JIT calls a compiler stub,
/// where most samples land), on one carrier, with JFR's own profiling beside pinprof (its
/// sampler stops the carrier many times a second, and safepoints with it): each burst is one
/// episode (a stop imposed on the carrier does not split it), as long as the workload
/// measured (within two sample periods), named by the Java method that called the stub, in the episode, in
/// the finding and in the on-CPU sites (at most 5% of the samples end at a stub with no Java
/// caller: a sample taken as the stub builds its frame).
fn hashing_bursts_hold_through_jfr(major: u32) {
    let mut jvm = start_vt(major, 1, "Monopolize", &["2", "150", "50", "sha256"]);
    // Compiled by now: the digests run through the stub from the window's start.
    std::thread::sleep(Duration::from_millis(2500));
    let jcmd = |args: &[&str]| {
        let out = Command::new(jdk_tool(major, "jcmd"))
            .arg(jvm.pid.to_string())
            .args(args)
            .output()
            .expect("run jcmd");
        assert_ok(&out, "jcmd");
    };
    jcmd(&["JFR.start", "name=beside", "settings=profile"]);
    let recording = record(jvm.pid, 4.0, &format!("hashing-{major}.pinrec"));
    jcmd(&["JFR.stop", "name=beside"]);
    let report = report_json(&recording);
    let from = report["window"]["start_mono_ns"].as_u64().unwrap();
    let to = from + report["window"]["duration_ns"].as_u64().unwrap();
    let bursts = bursts(&mut jvm, to);

    let episodes = report["monopolized"].as_array().unwrap();
    let mut matched = 0;
    for &(id, start, end) in bursts
        .iter()
        .filter(|b| b.1 > from + 500_000_000 && b.2 + 20_000_000 < to)
    {
        let of_burst: Vec<&Value> = episodes
            .iter()
            .filter(|e| {
                let s = from + e["start_ns"].as_u64().unwrap();
                let e_end = s + e["duration_ns"].as_u64().unwrap();
                e["vthread_id"] == id && s < end && start < e_end
            })
            .collect();
        assert_eq!(
            of_burst.len(),
            1,
            "JDK {major}: virtual thread {id}'s burst at {start} is one episode: {of_burst:#?}"
        );
        let episode = of_burst[0];
        // Each end lies between two samples, one on either side of the switch: within a
        // sample period of the truth, two for the length.
        let period_ns = 1e9 / report["oncpu"]["hz"].as_f64().unwrap();
        assert_within(
            &format!("JDK {major}: virtual thread {id}'s burst"),
            ns(&episode["duration_ns"]),
            (end - start) as f64,
            2.0 * period_ns / (end - start) as f64,
        );
        let frames = strings(&episode["frames"]);
        assert!(
            frames.contains(&"Monopolize.hash"),
            "JDK {major}: the episode names the Java caller: {frames:?}"
        );
        matched += 1;
    }
    assert!(
        matched >= 10,
        "JDK {major}: only {matched} bursts in the window ({} printed)",
        bursts.len()
    );
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "monopolized")
        .expect("a monopolization finding");
    let summary = finding["summary"].as_str().unwrap();
    assert!(
        summary.contains("in `Monopolize.hash"),
        "JDK {major}: {summary}"
    );

    let sites = report["oncpu"]["sites"].as_array().unwrap();
    let samples = |keep: &dyn Fn(&[&str]) -> bool| -> u64 {
        sites
            .iter()
            .filter(|s| keep(&strings(&s["frames"])))
            .map(|s| s["samples"].as_u64().unwrap())
            .sum()
    };
    let in_hash = samples(&|f| f.contains(&"Monopolize.hash"));
    let stub_alone = samples(&|f| {
        f.last().is_some_and(|root| root.starts_with('['))
            && f.iter()
                .any(|n| n.contains("stubs") || n.contains("StubRoutines"))
    });
    let with_stub = samples(&|f| {
        f.contains(&"Monopolize.hash")
            && f.iter()
                .any(|n| n.contains("stubs") || n.contains("StubRoutines"))
    });
    eprintln!(
        "JDK {major}: {in_hash} samples in Monopolize.hash, {with_stub} of them in a stub; \
         {stub_alone} in a stub with no Java caller"
    );
    assert!(with_stub > 0, "JDK {major}: no sample in the SHA-256 stub");
    assert!(
        stub_alone * 20 <= in_hash,
        "JDK {major}: {stub_alone} samples end at a stub, {in_hash} in Monopolize.hash"
    );
}

#[test]
fn jdk21_hashing_bursts_hold_through_jfr() {
    hashing_bursts_hold_through_jfr(21);
}

#[test]
fn jdk25_hashing_bursts_hold_through_jfr() {
    hashing_bursts_hold_through_jfr(25);
}

/// A process spinning on CPU 0, killed when dropped.
struct Hog(Child);

impl Hog {
    fn start() -> Self {
        Self(
            Command::new("taskset")
                .args(["-c", "0", "sh", "-c", "while :; do :; done"])
                .spawn()
                .expect("start a CPU hog (taskset, sh)"),
        )
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How long each switch-in of the carriers waited for the CPU, as `perf sched timehist` says
/// from its own record of the scheduler's events: (tid, woken rather than preempted, ns),
/// for the switch-ins inside [from, to).
fn perf_delays(
    data: &std::path::Path,
    carriers: &[u64],
    from: u64,
    to: u64,
) -> Vec<(u64, bool, f64)> {
    let out = Command::new("perf")
        .args(["sched", "timehist", "--state", "-i"])
        .arg(data)
        .stderr(Stdio::null())
        .output()
        .expect("run perf sched timehist");
    assert_ok(&out, "perf sched timehist");
    // time [cpu] comm[tid/pid] wait(ms) sched-delay(ms) run(ms) state
    let mut last_state: HashMap<u64, String> = HashMap::new();
    let mut delays = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((_, rest)) = line.split_once("] ") else {
            continue;
        };
        let Some(open) = rest.rfind('[') else {
            continue;
        };
        let Some((ids, numbers)) = rest[open + 1..].split_once(']') else {
            continue;
        };
        let Some(tid) = ids.split('/').next().and_then(|t| t.parse::<u64>().ok()) else {
            continue;
        };
        if !carriers.contains(&tid) {
            continue;
        }
        let fields: Vec<&str> = numbers.split_whitespace().collect();
        let (Some(time), Some(wait), Some(delay), Some(run), Some(state)) = (
            line.split_whitespace()
                .next()
                .and_then(|t| t.parse::<f64>().ok()),
            fields.first().and_then(|f| f.parse::<f64>().ok()),
            fields.get(1).and_then(|f| f.parse::<f64>().ok()),
            fields.get(2).and_then(|f| f.parse::<f64>().ok()),
            fields.get(3),
        ) else {
            continue;
        };
        // Each line is one run, printed as it ends: it began `run` ms before. Woken (its
        // previous run ended asleep), it waited `delay` ms for the CPU since its wake-up;
        // preempted (its previous run ended runnable, R), all its `wait` was for the CPU.
        let switch_in = time * 1e9 - run * 1e6;
        let woken = last_state.get(&tid).is_some_and(|s| s != "R");
        let seen_before = last_state.insert(tid, state.to_string()).is_some();
        if seen_before && switch_in >= from as f64 && switch_in < to as f64 {
            let waited = if woken { delay } else { wait };
            delays.push((tid, woken, waited * 1e6));
        }
    }
    delays
}

/// The nearest-rank quantile of `values`.
fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

/// Two carriers on CPU 0 pinned in 2 ms sleeps (JDK 21: a sleep inside `synchronized`), woken
/// about a thousand times a second: alone on the CPU, their wakeup latency is short; with two
/// CPU hogs on it, the scheduler makes them wait. In the same test run: p99 rises at least
/// threefold; and against `perf sched` recording the same span, each carrier's wake-ups and
/// preemptions agree in number and p99 within 10%.
#[test]
fn jdk21_cpu_hogs_raise_the_carriers_wakeup_latency_as_perf_sched_measures_it() {
    require_root();
    let java = java(21);
    let mut command = Command::new("taskset");
    command
        .args(["-c", "0"])
        .arg(&java)
        .arg("-Djdk.virtualThreadScheduler.parallelism=2")
        .arg("-cp")
        .arg(workloads())
        .args(["PinnedSleep", "4", "2"]);
    let jvm = Jvm::spawn(command).expect("start the workload JVM on CPU 0");
    std::thread::sleep(Duration::from_millis(1000));

    let p99 = |report: &Value| -> Vec<(u64, f64)> {
        report["scheduler"]["carriers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["tid"].as_u64().unwrap(),
                    ns(&c["wakeup_latency_ns"]["p99"]),
                )
            })
            .collect()
    };
    let alone = report_json(&record(jvm.pid, 3.0, "latency-alone.pinrec"));
    let alone_p99 = p99(&alone);
    assert_eq!(alone_p99.len(), 2, "two carriers: {alone_p99:?}");

    let _hogs = [Hog::start(), Hog::start()];
    let data = scratch("latency-hogs.perf.data");
    let mut perf = Command::new("perf")
        .args(["sched", "record", "-k", "CLOCK_MONOTONIC", "-o"])
        .arg(&data)
        .args(["--", "sleep", "8"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run perf sched record");
    std::thread::sleep(Duration::from_millis(1500));
    let busy = report_json(&record(jvm.pid, 3.0, "latency-hogs.pinrec"));
    assert!(perf.wait().unwrap().success(), "perf sched record failed");
    let busy_p99 = p99(&busy);

    for ((tid, quiet), (_, loaded)) in alone_p99.iter().zip(&busy_p99) {
        eprintln!(
            "carrier {tid}: wakeup latency p99 {quiet:.0} ns alone, {loaded:.0} ns with hogs"
        );
        // Hogs that share its CPU make it wait for their slices (milliseconds): the p99 rises
        // past 0.5 ms. (Not a ratio to the quiet run's: on a busy host that one read 2 ms.)
        assert!(
            *loaded > *quiet && *loaded > 500_000.0,
            "carrier {tid}: p99 {quiet} ns alone, {loaded} ns with two CPU hogs on its CPU"
        );
    }

    let from = busy["window"]["start_mono_ns"].as_u64().unwrap();
    let to = from + busy["window"]["duration_ns"].as_u64().unwrap();
    let carriers: Vec<u64> = busy_p99.iter().map(|(t, _)| *t).collect();
    let delays = perf_delays(&data, &carriers, from, to);
    for c in busy["scheduler"]["carriers"].as_array().unwrap() {
        let tid = c["tid"].as_u64().unwrap();
        for (woken, key) in [(true, "wakeup_latency_ns"), (false, "runqueue_ns")] {
            let mut theirs: Vec<f64> = delays
                .iter()
                .filter(|d| d.0 == tid && d.1 == woken)
                .map(|d| d.2)
                .collect();
            assert!(
                theirs.len() > 100,
                "carrier {tid}: perf saw only {} switch-ins ({key})",
                theirs.len()
            );
            let what = format!("carrier {tid}, {key}");
            assert_within(
                &format!("{what}: count"),
                ns(&c[key]["count"]),
                theirs.len() as f64,
                0.10,
            );
            assert_within(
                &format!("{what}: p99"),
                ns(&c[key]["p99"]),
                quantile(&mut theirs, 0.99),
                0.10,
            );
        }
    }
    let late = busy["scheduler"]["late_wakeups"].as_array().unwrap();
    assert!(
        late.iter()
            .any(|w| carriers.contains(&w["tid"].as_u64().unwrap())),
        "the carriers' wake-ups of over 2 ms are listed"
    );
}
