//! Project tasks: `cargo xtask setup | test | demo | bench`.
//!
//! `setup` installs what building and testing need on a fresh Debian machine and is quick when
//! everything is there; `test`, `demo` and `bench` run it first.

mod bench;
mod demo;
mod setup;
mod workload;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};

const USAGE: &str = "usage: cargo xtask <setup|test|demo|bench>
  setup   install build and test dependencies (apt, rust-src, bpf-linker, JDK 21/25), compile the Java workloads
  test    setup, then fmt check, clippy, and the whole test suite (eBPF and JVM tests need root)
  demo    setup, then profile the bundled demo JVM for a few seconds: recording, report, flamegraph
  bench   setup, then measure pinprof's overhead on a JVM workload against a baseline in the same run";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("setup") => setup::run().map(|_| ()),
        Some("test") => test(&args[1..]),
        Some("demo") => demo::run(),
        Some("bench") => bench::run(&args[1..]),
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
    let env = setup::run()?;
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
    println!("test: cargo test (integration tests load BPF programs and start real JVMs)");
    let mut cmd = cargo();
    cmd.args(["test", "--workspace"]).args(extra);
    env.apply(&mut cmd);
    run_cmd(&mut cmd)
}
