//! Project tasks: `cargo xtask setup | test | demo | bench | soak | fuzz | dist | refresh-ebpf |
//! check-ebpf`.
//!
//! `setup` installs what building and testing need on a fresh Debian machine and is quick when
//! everything is there; `test`, `demo` and `bench` run it first.

mod bench;
mod demo;
mod dist;
mod fuzz;
mod prebuilt;
mod procfs;
mod setup;
mod soak;
mod terminal;
mod workload;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};

const USAGE: &str = "usage: cargo xtask <setup|test|demo|bench|soak|fuzz|dist|refresh-ebpf|check-ebpf>
  setup   install build and test dependencies (apt, rust-src, bpf-linker, musl target, JDK 21/25), compile the Java workloads
  test    setup, then fmt check, clippy, the checked-in kernel object's freshness, the whole test suite
          (eBPF and JVM tests need root), then the integration tests again against the `dist` binary
  demo    setup, then profile the bundled demo JVM for a few seconds: recording, report, flamegraph
  bench   setup, then measure pinprof's cost on JVM workloads against bpftrace and perf in the same run (--help)
  soak [MINUTES]  the demo JVM under pinprof record, then top, for MINUTES each (default 10): memory, losses, leftovers
  fuzz [SECONDS]  fuzz the recording reader and the views, then the parsers of the target's ELF files, for SECONDS
                  each (default 60), seeded with the recordings tests left and the test JDK's small libraries
  dist    build the static pinprof (x86_64 musl, kernel programs inside) and its SHA-256 into target/dist
  refresh-ebpf  rebuild the checked-in kernel object (profiler/prebuilt) after changing profiler-ebpf
  check-ebpf    check that object against a fresh build (part of `test`)";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("setup") => setup::run().map(|_| ()),
        Some("test") => test(&args[1..]),
        Some("demo") => demo::run(),
        Some("bench") => bench::run(&args[1..]),
        Some("fuzz") => fuzz::run(&args[1..]),
        Some("soak") => soak::run(&args[1..]),
        Some("dist") => dist::run(),
        Some("refresh-ebpf") => prebuilt::refresh(),
        Some("check-ebpf") => prebuilt::check(),
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(1);
    }
}

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_owned()
}

/// Runs a command to completion, failing with its command line if it fails.
pub fn run_cmd(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

fn test(extra: &[String]) -> Result<()> {
    let mut env = setup::run()?;
    env.readers = Some(setup::readers()?);
    println!("test: cargo fmt --check");
    run_cmd(cargo().args(["fmt", "--all", "--check"]))?;
    println!("test: cargo clippy");
    run_cmd(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    println!("test: the checked-in kernel object against a fresh build");
    prebuilt::check()?;
    println!("test: cargo test (integration tests load BPF programs and start real JVMs)");
    let mut cmd = cargo();
    // The binary cargo builds, whatever the caller's environment names. One test at a time:
    // tests that record would otherwise attach and detach BPF programs on the scheduler's
    // tracepoints while others record, which makes the kernel skip programs now and then,
    // and pinprof rightly counts those waits as lost.
    cmd.args(["test", "--workspace"])
        .args(extra)
        .env_remove("PINPROF_BIN")
        .env("RUST_TEST_THREADS", "1");
    env.apply(&mut cmd);
    let (passed, failed, ok) = run_counting_tests(&mut cmd)?;
    // One closing line for the whole suite, whatever order cargo ran the binaries in.
    println!("tests: {passed} passed, {failed} failed");
    if !ok {
        bail!("cargo test failed");
    }
    if passed == 0 {
        bail!("no test ran");
    }

    // The static binary users copy to their machines: first a loud check that it is static and
    // captures, then every integration test once more with PINPROF_BIN pointing the harness at
    // it. The whole set rather than a sample: it adds what the integration tests take (about 3
    // minutes on 2 cores), well inside CI's budget, and a musl-only failure (libc differences in
    // file, socket or /proc handling) may show in any of them.
    let dist = dist::build()?;
    dist::smoke(&dist, &env)?;
    println!(
        "test: the integration tests against the static binary {}",
        dist.binary.display()
    );
    let mut cmd = cargo();
    cmd.args(["test", "--package", "profiler", "--test", "*"])
        .args(extra)
        .env("PINPROF_BIN", &dist.binary)
        .env("RUST_TEST_THREADS", "1");
    env.apply(&mut cmd);
    let (passed, failed, ok) = run_counting_tests(&mut cmd)?;
    println!("tests against the static binary: {passed} passed, {failed} failed");
    if !ok {
        bail!("cargo test against the static binary failed");
    }
    if passed == 0 {
        bail!("no test ran against the static binary");
    }
    Ok(())
}

/// Runs `cargo test`, passing its output through, and adds up its "test result" lines.
fn run_counting_tests(cmd: &mut Command) -> Result<(u64, u64, bool)> {
    use std::io::{BufRead as _, BufReader};
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("cannot start cargo test")?;
    let (mut passed, mut failed) = (0, 0);
    for line in BufReader::new(child.stdout.take().context("no stdout")?).lines() {
        let line = line?;
        println!("{line}");
        if let Some(rest) = line.strip_prefix("test result: ") {
            let count = |what: &str| -> u64 {
                rest.split(';')
                    .find_map(|part| {
                        part.trim()
                            .trim_start_matches("ok. ")
                            .trim_start_matches("FAILED. ")
                            .strip_suffix(what)
                    })
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap_or(0)
            };
            passed += count(" passed");
            failed += count(" failed");
        }
    }
    let status = child.wait()?;
    Ok((passed, failed, status.success()))
}
