//! `cargo xtask soak [MINUTES]`: the demo JVM under `pinprof record` for MINUTES, then under
//! `pinprof top` (on a terminal of its own) for MINUTES. pinprof's resident memory is sampled
//! every 10 s. It passes when the JVM is alive at the end, pinprof's memory is flat (the mean
//! of the last minute within 10% of the second minute's: the first is start-up, and the live
//! view's 60 s window filling), no event was
//! lost, and once pinprof has exited none of the BPF programs and links it held is left in the
//! kernel. Writes target/bench/soak.json; not run by CI.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::json;

use crate::{
    bench::tracer::{self, Tracer},
    cargo, procfs, run_cmd, setup,
    workload::Jvm,
};

const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// Memory may grow by at most this share from the second minute to the last.
const MAX_GROWTH: f64 = 0.10;

pub fn run(args: &[String]) -> Result<()> {
    let mut minutes = 10.0;
    let mut jdk = 21;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--jdk" => jdk = it.next().context("--jdk 21|25")?.parse()?,
            m => minutes = m
                .parse()
                .ok()
                .filter(|m: &f64| m.is_finite() && *m >= 1.0)
                .with_context(|| {
                    format!(
                        "usage: cargo xtask soak [MINUTES (10), at least 1] [--jdk 21|25]; not {m}"
                    )
                })?,
        }
    }
    let env = setup::run()?;
    setup::apt_install(&["bpftool"])?;
    println!("soak: building pinprof (release)");
    run_cmd(cargo().args(["build", "--release", "--package", "profiler"]))?;
    let pinprof = setup::target_dir().join("release/pinprof");
    let out = setup::target_dir().join("bench");
    std::fs::create_dir_all(&out)?;
    let length = Duration::from_secs_f64(minutes * 60.0);

    let mut jvm = Jvm::start(env.java(jdk), &env.workloads, "Demo", &[])?;
    println!(
        "soak: demo JVM on JDK {jdk} (pid {}); {minutes} min under pinprof record, then {minutes} min under pinprof top",
        jvm.pid
    );
    std::thread::sleep(Duration::from_secs(2));
    let before = bpf_ids()?;
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for tracer in [Tracer::Record, Tracer::Top] {
        let run = soak_one(&pinprof, &out, &mut jvm, tracer, length)?;
        run.judge(&mut failures);
        runs.push(run);
    }
    let after = bpf_ids()?;

    println!();
    for run in &runs {
        run.print();
    }
    println!(
        "soak: BPF programs in the kernel (all owners): {} before, {} after; links: {} before, {} after",
        before.programs.len(),
        after.programs.len(),
        before.links.len(),
        after.links.len()
    );
    let report = json!({
        "minutes": minutes,
        "jdk": jdk,
        "sample_every_seconds": SAMPLE_EVERY.as_secs(),
        "runs": runs.iter().map(Run::to_json).collect::<Vec<_>>(),
        "kernel_bpf_before": { "programs": before.programs, "links": before.links },
        "kernel_bpf_after": { "programs": after.programs, "links": after.links },
        "verdict": { "pass": failures.is_empty(), "failures": failures },
    });
    let path = out.join("soak.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)? + "\n")?;
    println!("soak: results in {}", path.display());
    if !failures.is_empty() {
        for f in &failures {
            println!("soak: FAIL: {f}");
        }
        bail!("the soak failed");
    }
    println!("soak: pass");
    Ok(())
}

struct Run {
    tracer: Tracer,
    /// (seconds since start, pinprof's resident KiB, pinprof's CPU seconds so far).
    samples: Vec<(f64, u64, f64)>,
    jvm_alive: bool,
    events: u64,
    lost_summary: u64,
    lost_report: u64,
    /// pinprof's closing line, which says what lost events were lost to.
    closing: String,
    held: procfs::BpfHeld,
    left: procfs::BpfHeld,
    /// The span the memory means are taken over.
    window: f64,
}

fn soak_one(
    pinprof: &std::path::Path,
    out: &std::path::Path,
    jvm: &mut Jvm,
    tracer: Tracer,
    length: Duration,
) -> Result<Run> {
    let base = out.join(format!("soak-{}", tracer.name()));
    let running = tracer
        .start(pinprof, jvm.pid, &base, &[])?
        .context("pinprof")?;
    let pid = running.pid();
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut held = procfs::BpfHeld::default();
    let mut jvm_alive = true;
    println!("soak: pinprof {} (pid {pid})", tracer.name());
    while start.elapsed() < length {
        std::thread::sleep(SAMPLE_EVERY.min(length.saturating_sub(start.elapsed())));
        let t = start.elapsed().as_secs_f64();
        let rss = procfs::rss_kib(pid).context("pinprof exited during the soak")?;
        let cpu = procfs::cpu_seconds(pid)?;
        // What it holds, gathered over the run (programs come in when new threads appear too).
        let now = procfs::bpf_held(pid)?;
        held.programs.extend(now.programs);
        held.links.extend(now.links);
        held.programs.sort_unstable();
        held.programs.dedup();
        held.links.sort_unstable();
        held.links.dedup();
        jvm_alive = jvm.child.try_wait()?.is_none();
        println!(
            "soak: {} {t:5.0}s RSS {:.1} MiB, CPU {cpu:.1} s{}",
            tracer.name(),
            rss as f64 / 1024.0,
            if jvm_alive { "" } else { ", JVM gone" }
        );
        samples.push((t, rss, cpu));
        if !jvm_alive {
            break;
        }
    }
    let file = running.file.clone();
    let said = running.stop()?;
    let summary = tracer::pinprof_summary(&said)?;
    // The live view's screen precedes it on the same line (the terminal's output).
    let closing = said
        .rfind("pinprof: recorded ")
        .map(|at| {
            said[at..]
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .unwrap_or_default();
    // The kernel frees programs a moment after their last holder is gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    let left = loop {
        let left = still_loaded(&held)?;
        if (left.programs.is_empty() && left.links.is_empty()) || Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let report = Command::new(pinprof)
        .args(["report", "--format", "json"])
        .arg(&file)
        .output()
        .context("pinprof report")?;
    if !report.status.success() {
        bail!(
            "pinprof report {}: {}",
            file.display(),
            String::from_utf8_lossy(&report.stderr)
        );
    }
    let json: serde_json::Value = serde_json::from_slice(&report.stdout)?;
    let lost_report = json["lost_events"]
        .as_u64()
        .context("no lost_events in the report")?;
    Ok(Run {
        tracer,
        samples,
        jvm_alive: jvm_alive && jvm.child.try_wait()?.is_none(),
        events: summary.events,
        lost_summary: summary.lost,
        lost_report,
        closing,
        held,
        left,
        // A minute: the first is start-up (and the live view's 60 s window filling).
        window: 60.0,
    })
}

impl Run {
    /// Mean resident KiB over the samples in [from, to).
    fn mean_rss(&self, from: f64, to: f64) -> Option<f64> {
        let v: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.0 >= from - 0.5 && s.0 < to - 0.5)
            .map(|s| s.1 as f64)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// (second window's mean, last window's mean).
    fn memory(&self) -> (Option<f64>, Option<f64>) {
        let end = self.samples.last().map_or(0.0, |s| s.0) + 0.5;
        (
            self.mean_rss(self.window, 2.0 * self.window),
            self.mean_rss(end - self.window, end + 0.5),
        )
    }

    fn judge(&self, failures: &mut Vec<String>) {
        let name = self.tracer.name();
        if !self.jvm_alive {
            failures.push(format!("{name}: the JVM died"));
        }
        match self.memory() {
            (Some(second), Some(last)) if last > second * (1.0 + MAX_GROWTH) => {
                failures.push(format!(
                    "{name}: memory grew from {:.1} MiB (second window) to {:.1} MiB (last), more than {:.0}%",
                    second / 1024.0,
                    last / 1024.0,
                    MAX_GROWTH * 100.0
                ))
            }
            (Some(_), Some(_)) => {}
            _ => failures.push(format!("{name}: too few memory samples")),
        }
        if self.lost_summary > 0 || self.lost_report > 0 {
            failures.push(format!(
                "{name}: {} events lost (pinprof said {}, the report {}): {}",
                self.lost_summary.max(self.lost_report),
                self.lost_summary,
                self.lost_report,
                self.closing
            ));
        }
        if self.held.programs.is_empty() {
            failures.push(format!("{name}: no BPF program seen held by pinprof"));
        }
        if !self.left.programs.is_empty() || !self.left.links.is_empty() {
            failures.push(format!(
                "{name}: after exit, pinprof's BPF programs {:?} and links {:?} are still in the kernel",
                self.left.programs, self.left.links
            ));
        }
    }

    fn print(&self) {
        let (second, last) = self.memory();
        println!(
            "soak: pinprof {}: {} events, {} lost; RSS (MiB) every {} s: {}",
            self.tracer.name(),
            self.events,
            self.lost_summary.max(self.lost_report),
            SAMPLE_EVERY.as_secs(),
            self.samples
                .iter()
                .map(|s| format!("{:.1}", s.1 as f64 / 1024.0))
                .collect::<Vec<_>>()
                .join(" ")
        );
        println!(
            "soak: pinprof {}: mean RSS {:.1} MiB in the second {:.0} s, {:.1} MiB in the last; {} BPF programs and {} links held, {} left after exit; JVM {}",
            self.tracer.name(),
            second.unwrap_or(f64::NAN) / 1024.0,
            self.window,
            last.unwrap_or(f64::NAN) / 1024.0,
            self.held.programs.len(),
            self.held.links.len(),
            self.left.programs.len() + self.left.links.len(),
            if self.jvm_alive { "alive" } else { "dead" }
        );
    }

    fn to_json(&self) -> serde_json::Value {
        let (second, last) = self.memory();
        json!({
            "tracer": self.tracer.name(),
            "samples": self.samples.iter().map(|(t, rss, cpu)| json!({
                "seconds": t, "rss_kib": rss, "cpu_seconds": cpu,
            })).collect::<Vec<_>>(),
            "window_seconds": self.window,
            "rss_kib_second_window": second,
            "rss_kib_last_window": last,
            "jvm_alive": self.jvm_alive,
            "events": self.events,
            "lost_events_summary": self.lost_summary,
            "lost_events_report": self.lost_report,
            "bpf_programs_held": self.held.programs,
            "bpf_links_held": self.held.links,
            "bpf_programs_left": self.left.programs,
            "bpf_links_left": self.left.links,
        })
    }
}

/// Which of these programs and links the kernel still has.
fn still_loaded(held: &procfs::BpfHeld) -> Result<procfs::BpfHeld> {
    let exists = |kind: &str, id: u32| -> Result<bool> {
        Ok(Command::new("bpftool")
            .args([kind, "show", "id", &id.to_string()])
            .output()
            .context("bpftool (Debian package bpftool)")?
            .status
            .success())
    };
    let mut left = procfs::BpfHeld::default();
    for &id in &held.programs {
        if exists("prog", id)? {
            left.programs.push(id);
        }
    }
    for &id in &held.links {
        if exists("link", id)? {
            left.links.push(id);
        }
    }
    Ok(left)
}

/// Every BPF program and link in the kernel, whoever loaded it.
fn bpf_ids() -> Result<procfs::BpfHeld> {
    let list = |kind: &str| -> Result<Vec<u32>> {
        let out = Command::new("bpftool")
            .args(["--json", kind, "show"])
            .output()
            .context("bpftool (Debian package bpftool)")?;
        if !out.status.success() {
            bail!(
                "bpftool {kind} show: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p["id"].as_u64().map(|id| id as u32))
                    .collect()
            })
            .unwrap_or_default())
    };
    Ok(procfs::BpfHeld {
        programs: list("prog")?,
        links: list("link")?,
    })
}
