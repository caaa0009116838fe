//! The Java workloads under `profiler/tests/java`, compiled by setup.

use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, Result};

use crate::{root, run_cmd, setup::target_dir};

#[path = "../../profiler/tests/common/jvm.rs"]
mod jvm;
pub use jvm::Jvm;

/// Compiles the workloads when a source is newer than the classes; returns the class directory.
pub fn compile() -> Result<PathBuf> {
    let sources_dir = root().join("profiler/tests/java");
    let out = target_dir().join("java-workloads");
    let stamp = out.join(".stamp");
    let sources: Vec<PathBuf> = std::fs::read_dir(&sources_dir)
        .with_context(|| format!("cannot read {}", sources_dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .collect();
    let newest = sources
        .iter()
        .filter_map(|p| p.metadata().and_then(|m| m.modified()).ok())
        .max();
    let built = stamp.metadata().and_then(|m| m.modified()).ok();
    if built.is_some() && newest <= built {
        println!("setup: Java workloads up to date");
        return Ok(out);
    }
    println!("setup: compiling the Java workloads (javac --release 17)");
    std::fs::create_dir_all(&out)?;
    run_cmd(
        Command::new("javac")
            .args(["--release", "17", "-d"])
            .arg(&out)
            .args(&sources),
    )
    .context("javac failed (it comes with openjdk-17-jdk-headless)")?;
    std::fs::write(&stamp, b"")?;
    Ok(out)
}
