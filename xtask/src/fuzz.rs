//! `cargo xtask fuzz [SECONDS]`: runs the fuzz targets (cargo-fuzz on the nightly toolchain)
//! for a bounded time each: the recording reader, seeded with the recordings the tests and the
//! demo left behind, and the parsers of the target's ELF files, seeded with small libraries of
//! the test JDK and hostile variants of them. Installs cargo-fuzz where it is missing. A crash
//! leaves its input under `profiler/fuzz/artifacts/` and fails the command.

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
    let env = crate::setup::run()?;
    cargo_fuzz()?;
    let fuzz = root().join("profiler/fuzz");
    let recordings = fuzz.join("corpus/recording");
    std::fs::create_dir_all(&recordings)?;
    let seeded = seed(&root().join("target"), &recordings)?;
    println!("fuzz: recording reader, {seconds} s, {seeded} new seeds");
    fuzz_target("recording", &recordings, seconds)?;
    let elves = fuzz.join("corpus/elf");
    std::fs::create_dir_all(&elves)?;
    let seeded = seed_elf(&env, &elves)?;
    println!("fuzz: parsers of the target's ELF files, {seconds} s, {seeded} new seeds");
    fuzz_target("elf", &elves, seconds)
}

/// Runs fuzz target `name` on `corpus` for `seconds`.
fn fuzz_target(name: &str, corpus: &Path, seconds: u64) -> Result<()> {
    let fuzzed = run_cmd(
        Command::new("cargo")
            .current_dir(root().join("profiler"))
            .env("AYA_BUILD_SKIP", "1")
            .args(["+nightly", "fuzz", "run", name])
            .arg(corpus)
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
        Ok(()) => println!("fuzz: {name}: no crash, hang or runaway allocation in {seconds} s"),
        Err(_) => println!(
            "fuzz: {name}: FAILED; the input that failed is under profiler/fuzz/artifacts/{name}/"
        ),
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

/// Seeds the ELF corpus with the test JDK's small libraries (under libFuzzer's length cap) and
/// hostile variants of them: cut short, and with counts and offsets out of all proportion.
/// How many were new.
fn seed_elf(env: &crate::setup::Env, corpus: &Path) -> Result<usize> {
    let mut added = 0;
    let mut add = |name: String, bytes: &[u8]| -> Result<()> {
        let to = corpus.join(name);
        if !to.exists() {
            std::fs::write(&to, bytes)?;
            added += 1;
        }
        Ok(())
    };
    for (major, java) in &env.java {
        let Some(lib) = java.parent().and_then(Path::parent).map(|r| r.join("lib")) else {
            continue;
        };
        for entry in std::fs::read_dir(&lib)?.flatten() {
            let path = entry.path();
            let small = entry.metadata().is_ok_and(|m| m.len() <= MAX_ELF_SEED);
            if !small || path.extension().is_none_or(|e| e != "so") {
                continue;
            }
            let bytes = std::fs::read(&path)?;
            let stem = format!("{major}-{}", entry.file_name().to_string_lossy());
            add(stem.clone(), &bytes)?;
            if bytes.len() < 0x40 || &bytes[..4] != b"\x7fELF" {
                continue;
            }
            add(format!("{stem}-cut"), &bytes[..bytes.len() / 2])?;
            // e_phnum, e_shnum (u16) and e_shoff (u64) out of proportion.
            for (what, at, value) in [
                ("phnum", 0x38, &0xffffu16.to_le_bytes()[..]),
                ("shnum", 0x3c, &0xffffu16.to_le_bytes()[..]),
                ("shoff", 0x28, &(bytes.len() as u64 - 1).to_le_bytes()[..]),
            ] {
                let mut hostile = bytes.clone();
                hostile[at..at + value.len()].copy_from_slice(value);
                add(format!("{stem}-{what}"), &hostile)?;
            }
        }
    }
    Ok(added)
}

/// ELF seeds larger than this are left out (libFuzzer's -max_len).
const MAX_ELF_SEED: u64 = 256 << 10;
