//! Builds the kernel programs (`profiler-ebpf`'s binary) for the BPF target with the nightly
//! toolchain and bpf-linker. Where they are missing, or `AYA_BUILD_SKIP=1`, it leaves an empty
//! object instead, so that `cargo check` and `cargo clippy` still work; such a `pinprof`
//! says at run time that it cannot capture.

use std::{path::PathBuf, process::Command};

fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("pinprof-ebpf");
    let skip =
        std::env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");
    println!("cargo:rerun-if-env-changed=PATH");
    let missing = if skip { None } else { missing_tools() };
    if skip || missing.is_some() {
        if let Some(why) = missing {
            println!("cargo:warning=kernel programs not built: {why}; run `cargo xtask setup`");
        }
        std::fs::write(&out, [])?;
        return Ok(());
    }
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../profiler-ebpf");
    let root = root.canonicalize()?;
    let package = aya_build::Package {
        name: "profiler-ebpf",
        root_dir: root
            .to_str()
            .ok_or_else(|| anyhow::anyhow!("non-UTF-8 path"))?,
        ..Default::default()
    };
    aya_build::build_ebpf([package], aya_build::Toolchain::default())
}

/// What the BPF build needs and this machine lacks, if anything.
fn missing_tools() -> Option<String> {
    let nightly = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--version"])
        .output();
    if !nightly.is_ok_and(|o| o.status.success()) {
        return Some("the nightly Rust toolchain is missing".into());
    }
    let sysroot = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--print", "sysroot"])
        .output();
    let has_src = sysroot.ok().is_some_and(|o| {
        let root = String::from_utf8_lossy(&o.stdout).trim().to_string();
        PathBuf::from(root)
            .join("lib/rustlib/src/rust/library/core")
            .exists()
    });
    if !has_src {
        return Some("rust-src is missing from the nightly toolchain".into());
    }
    let linker = Command::new("bpf-linker").arg("--version").output();
    if !linker.is_ok_and(|o| o.status.success()) {
        return Some("bpf-linker is missing".into());
    }
    None
}
