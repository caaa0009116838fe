//! `cargo xtask fuzz [SECONDS]`: runs the recording reader's fuzz target (cargo-fuzz on the
//! nightly toolchain) for a bounded time, seeded with the recordings the tests and the demo
//! left behind. Installs cargo-fuzz where it is missing. A crash leaves its input under
//! `profiler/fuzz/artifacts/` and fails the command.

use std::{path::Path, process::Command};

use anyhow::{Context as _, Result};

use crate::{root, run_cmd};

/// Seeds larger than this are left out (libFuzzer works best on small inputs).
const MAX_SEED: u64 = 1 << 20;

pub fn run(args: &[String]) -> Result<()> {
    let seconds: u64 = match args.first() {
        Some(s) => s
            .parse()
            .with_context(|| format!("fuzz takes a number of seconds, not {s:?}"))?,
        None => 60,
    };
    crate::setup::run()?;
    cargo_fuzz()?;
    let fuzz = root().join("profiler/fuzz");
    let corpus = fuzz.join("corpus/recording");
    std::fs::create_dir_all(&corpus)?;
    let seeded = seed(&root().join("target"), &corpus)?;
    println!("fuzz: recording reader, {seconds} s, {seeded} new seeds");
    let fuzzed = run_cmd(
        Command::new("cargo")
            .current_dir(root().join("profiler"))
            .env("AYA_BUILD_SKIP", "1")
            .args(["+nightly", "fuzz", "run", "recording"])
            .arg(&corpus)
            .args([
                "--",
                &format!("-max_total_time={seconds}"),
                // A hang or a runaway allocation is a finding too.
                "-timeout=10",
                "-rss_limit_mb=1024",
                "-max_len=262144",
            ]),
    );
    match fuzzed {
        Ok(()) => println!("fuzz: no crash, hang or runaway allocation in {seconds} s"),
        Err(_) => println!("fuzz: FAILED; the input that failed is under profiler/fuzz/artifacts/"),
    }
    fuzzed
}

fn cargo_fuzz() -> Result<()> {
    let present = Command::new("cargo")
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !present {
        println!("fuzz: installing cargo-fuzz");
        run_cmd(Command::new("cargo").args(["install", "cargo-fuzz", "--locked"]))?;
    }
    Ok(())
}

/// Copies the small recordings found under `dir` into the corpus; how many were new.
fn seed(dir: &Path, corpus: &Path) -> Result<usize> {
    let mut found = Vec::new();
    find_recordings(dir, 0, &mut found);
    let mut added = 0;
    for path in found {
        let Some(name) = path.file_name() else {
            continue;
        };
        let to = corpus.join(name);
        if !to.exists() {
            std::fs::copy(&path, &to)?;
            added += 1;
        }
    }
    if added == 0 && std::fs::read_dir(corpus)?.next().is_none() {
        println!(
            "fuzz: no recordings to seed with (`cargo xtask test` leaves some): starting from nothing"
        );
    }
    Ok(added)
}

fn find_recordings(dir: &Path, depth: u32, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() && depth < 4 {
            find_recordings(&path, depth + 1, out);
        } else if kind.is_file()
            && path.extension().is_some_and(|e| e == "pinrec")
            && entry.metadata().is_ok_and(|m| m.len() <= MAX_SEED)
        {
            out.push(path);
        }
    }
}
