//! `cargo xtask demo`: the main job on the bundled demo JVM, start to finish.

use std::{io::IsTerminal as _, process::Command, time::Duration};

use anyhow::{Context as _, Result};

use crate::{cargo, run_cmd, setup, workload::Jvm};

const SECONDS: &str = "5";

pub fn run() -> Result<()> {
    let env = setup::run()?;
    println!("demo: building pinprof (release)");
    run_cmd(cargo().args(["build", "--release", "--package", "profiler"]))?;
    let pinprof = setup::target_dir().join("release/pinprof");
    let out = setup::target_dir().join("demo");
    std::fs::create_dir_all(&out)?;
    let recording = out.join("demo.pinrec");
    let svg = out.join("demo-offcpu.svg");

    let jvm = Jvm::start(env.java(21), &env.workloads, "Demo", &[])?;
    println!(
        "demo: started the demo shop on JDK 21 (pid {}); recording {SECONDS} s",
        jvm.pid
    );
    // Let the JVM settle so the window shows steady state, not start-up.
    std::thread::sleep(Duration::from_secs(1));
    // In a terminal the recording is watched live; the view stays up until q.
    let live = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if live {
        println!(
            "demo: live view; ? lists the keys, Tab or 1-6 switch views, n goes to each starvation, q ends it (the recording stops at {SECONDS} s)"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    run_cmd(
        Command::new(&pinprof)
            .args([
                if live { "top" } else { "record" },
                "--pid",
                &jvm.pid.to_string(),
                "--duration",
                SECONDS,
                // A demo run again replaces its recording.
                "--force",
                "--output",
            ])
            .arg(&recording),
    )?;
    drop(jvm);
    println!("demo: stopped the demo JVM");

    run_cmd(
        Command::new(&pinprof)
            .arg("flamegraph")
            .arg(&recording)
            .arg("--force")
            .arg("--output")
            .arg(&svg),
    )?;
    let report = Command::new(&pinprof)
        .arg("report")
        .arg(&recording)
        .output()
        .context("cannot run pinprof report")?;
    let text = String::from_utf8_lossy(&report.stdout);
    println!();
    for line in text.lines().take(80) {
        println!("{line}");
    }
    println!();
    println!("demo: recording  {}", recording.display());
    println!("demo: flamegraph {}", svg.display());
    println!(
        "demo: more with: {0} report {1} --format json; {0} replay {1}",
        pinprof.display(),
        recording.display()
    );
    Ok(())
}
