//! The kernel programs (`profiler-ebpf`'s binary) that `pinprof` embeds.
//!
//! With the nightly toolchain, rust-src and bpf-linker, they are built here for the BPF target.
//! Without them (a stable-only `cargo install`), or with `AYA_BUILD_SKIP=1`, the object checked
//! in under `prebuilt/` is embedded instead, provided it was built from today's sources
//! (`prebuilt/pinprof-ebpf.sources` lists their SHA-256; `cargo xtask refresh-ebpf` writes both,
//! and `cargo xtask test` checks a fresh build matches). Where it does not fit, the object is left
//! empty so that `cargo check` still works; such a `pinprof` says at run time that it cannot
//! capture.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use sha2::{Digest as _, Sha256};

fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("pinprof-ebpf");
    let skip =
        std::env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");
    println!("cargo:rerun-if-env-changed=PATH");
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let root = manifest_dir.join("../profiler-ebpf").canonicalize()?;
    let missing = if skip { None } else { missing_tools() };
    if skip || missing.is_some() {
        let prebuilt = manifest_dir.join("prebuilt");
        println!("cargo:rerun-if-changed={}", prebuilt.display());
        println!("cargo:rerun-if-changed={}", root.display());
        match usable_prebuilt(&prebuilt, &root) {
            Ok(object) => {
                if let Some(why) = missing {
                    println!(
                        "cargo:warning={why}: embedding the checked-in kernel object (prebuilt/pinprof-ebpf.o)"
                    );
                }
                std::fs::copy(object, &out)?;
            }
            Err(unusable) => {
                if let Some(why) = missing {
                    println!(
                        "cargo:warning=kernel programs not built: {why}, and {unusable}; run `cargo xtask setup`"
                    );
                }
                std::fs::write(&out, [])?;
            }
        }
        return Ok(());
    }
    let package = aya_build::Package {
        name: "profiler-ebpf",
        root_dir: root
            .to_str()
            .ok_or_else(|| anyhow::anyhow!("non-UTF-8 path"))?,
        ..Default::default()
    };
    aya_build::build_ebpf([package], aya_build::Toolchain::default())
}

/// The checked-in object, if it serves this target and was built from the sources at `crate_dir`.
fn usable_prebuilt(prebuilt: &Path, crate_dir: &Path) -> Result<PathBuf, String> {
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if arch != "x86_64" {
        return Err(format!(
            "the checked-in kernel object is for x86_64, not {arch}"
        ));
    }
    let object = prebuilt.join("pinprof-ebpf.o");
    let recorded = std::fs::read_to_string(prebuilt.join("pinprof-ebpf.sources"))
        .map_err(|e| format!("the checked-in kernel object's source list is unreadable ({e})"))?;
    let current = sources_manifest(crate_dir)
        .map_err(|e| format!("profiler-ebpf's sources are unreadable ({e})"))?;
    if recorded != current {
        return Err(
            "the checked-in kernel object is older than profiler-ebpf's sources \
                    (`cargo xtask refresh-ebpf` rebuilds it)"
                .into(),
        );
    }
    if !object.is_file() {
        return Err("the checked-in kernel object is missing".into());
    }
    Ok(object)
}

/// `sha256sum` lines for every file of the kernel crate, sorted, paths from the workspace root;
/// the same list `cargo xtask refresh-ebpf` writes (xtask/src/prebuilt.rs).
fn sources_manifest(crate_dir: &Path) -> std::io::Result<String> {
    let workspace = crate_dir.parent().unwrap_or(crate_dir);
    let mut files = Vec::new();
    collect_files(crate_dir, &mut files)?;
    files.sort();
    let mut out = String::new();
    for file in files {
        let digest = Sha256::digest(std::fs::read(&file)?);
        let relative = file.strip_prefix(workspace).unwrap_or(&file);
        for byte in digest {
            out += &format!("{byte:02x}");
        }
        out += &format!("  {}\n", relative.display());
    }
    Ok(out)
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') || name == "target" {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect_files(&entry.path(), out)?;
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
    Ok(())
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
