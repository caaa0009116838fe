//! The kernel object checked in under `profiler/prebuilt/`, which lets a stable-only toolchain
//! build a `pinprof` that captures (`profiler/build.rs` embeds it when nightly or bpf-linker is
//! missing). `cargo xtask refresh-ebpf` rebuilds it; `cargo xtask test` checks that a fresh build
//! of `profiler-ebpf` still matches it.
//!
//! The build is the one `aya_build` does (same target, flags and toolchain), plus
//! `--remap-path-prefix` for the checkout, the cargo home and the toolchain, whose paths the BTF
//! line information and the DWARF sections otherwise carry: so built twice from the same sources
//! and toolchain, in any directory, the object is the same byte for byte.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};
use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
use sha2::{Digest as _, Sha256};

use crate::{root, run_cmd, setup};

/// The checked-in object and the digests of the sources it was built from, relative to the root.
pub const OBJECT: &str = "profiler/prebuilt/pinprof-ebpf.o";
pub const SOURCES: &str = "profiler/prebuilt/pinprof-ebpf.sources";
/// The nightly rustc and bpf-linker that built it: another compiler makes other code from the
/// same sources.
pub const TOOLCHAIN: &str = "profiler/prebuilt/pinprof-ebpf.toolchain";
/// The kernel crate whose binary the object is.
const CRATE_DIR: &str = "profiler-ebpf";
/// The only target the checked-in object serves (uprobes read x86-64 registers).
const BPF_TARGET_ARCH: &str = "x86_64";
pub const REFRESH: &str = "cargo xtask refresh-ebpf";

/// `cargo xtask refresh-ebpf`: rebuilds the object and its source digests in place.
pub fn refresh() -> Result<()> {
    let built = build()?;
    let root = root();
    std::fs::create_dir_all(root.join(OBJECT).parent().expect("has a parent"))?;
    std::fs::copy(&built, root.join(OBJECT)).with_context(|| format!("cannot write {OBJECT}"))?;
    std::fs::write(root.join(SOURCES), sources_manifest(&root)?)
        .with_context(|| format!("cannot write {SOURCES}"))?;
    std::fs::write(root.join(TOOLCHAIN), toolchain()?)
        .with_context(|| format!("cannot write {TOOLCHAIN}"))?;
    let size = std::fs::metadata(root.join(OBJECT))?.len();
    println!("refresh-ebpf: wrote {OBJECT} ({size} bytes), {SOURCES} and {TOOLCHAIN}; commit them");
    Ok(())
}

/// The check `cargo xtask test` runs: the digests name today's sources, and a fresh build is the
/// checked-in object (byte for byte, or else in every section the kernel sees), unless this
/// machine's compiler is not the one that built it.
pub fn check() -> Result<()> {
    let root = root();
    let recorded = std::fs::read_to_string(root.join(SOURCES))
        .with_context(|| format!("cannot read {SOURCES}: run `{REFRESH}`"))?;
    if recorded != sources_manifest(&root)? {
        bail!(
            "{OBJECT} is stale: profiler-ebpf's sources changed since it was built \
             ({SOURCES} lists other digests); run `{REFRESH}` and commit profiler/prebuilt"
        );
    }
    let fresh = std::fs::read(build()?)?;
    let checked_in =
        std::fs::read(root.join(OBJECT)).with_context(|| format!("cannot read {OBJECT}"))?;
    if fresh == checked_in {
        println!("test: {OBJECT} is a fresh build of profiler-ebpf, byte for byte");
        return Ok(());
    }
    let (fresh, checked_in) = (loaded_parts(&fresh)?, loaded_parts(&checked_in)?);
    let differ: Vec<&str> = fresh
        .keys()
        .chain(checked_in.keys())
        .filter(|name| fresh.get(*name) != checked_in.get(*name))
        .map(String::as_str)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if differ.is_empty() {
        println!(
            "test: {OBJECT} differs from a fresh build only in debug information and BTF \
             (source paths, type ids); its programs, maps, relocations and symbols are the same"
        );
        return Ok(());
    }
    let (built_with, have) = (
        std::fs::read_to_string(root.join(TOOLCHAIN)).unwrap_or_default(),
        toolchain()?,
    );
    if built_with != have {
        // The digests say the object was built from these sources; another compiler's code
        // for them is no sign of staleness.
        println!(
            "test: {OBJECT} fits profiler-ebpf's sources (digests match); a fresh build with \
             this machine's toolchain differs in {} as compilers do: built with `{}`, here `{}`",
            differ.join(", "),
            built_with.trim().replace('\n', ", "),
            have.trim().replace('\n', ", ")
        );
        return Ok(());
    }
    bail!(
        "{OBJECT} is stale: a fresh build of profiler-ebpf with the toolchain that built it \
         differs in {}; run `{REFRESH}` and commit profiler/prebuilt",
        differ.join(", ")
    );
}

/// The versions of the tools that make the object, one a line.
fn toolchain() -> Result<String> {
    let version = |cmd: &mut Command| -> Result<String> {
        let out = cmd
            .output()
            .with_context(|| format!("cannot run {cmd:?}"))?;
        if !out.status.success() {
            bail!("{cmd:?} failed: run `cargo xtask setup`");
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    Ok(format!(
        "{}\n{}\n",
        version(Command::new("rustup").args(["run", "nightly", "rustc", "--version"]))?,
        version(Command::new("bpf-linker").arg("--version"))?
    ))
}

/// Builds the kernel programs as `aya_build` would, with paths remapped; returns the object.
fn build() -> Result<PathBuf> {
    let root = root();
    let target_dir = setup::target_dir().join("ebpf-prebuilt");
    let sysroot = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--print", "sysroot"])
        .output()
        .context("rustup is missing")?;
    if !sysroot.status.success() {
        bail!("the nightly toolchain is missing: run `cargo xtask setup`");
    }
    let sysroot = String::from_utf8(sysroot.stdout)?.trim().to_owned();
    let cargo_home = std::env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo"),
        PathBuf::from,
    );
    let remap = |from: &Path, to: &str| format!("--remap-path-prefix={}={to}", from.display());
    let flags = [
        format!("--cfg=bpf_target_arch=\"{BPF_TARGET_ARCH}\""),
        "-Cdebuginfo=2".into(),
        "-Clink-arg=--btf".into(),
        remap(&cargo_home, "/cargo"),
        remap(Path::new(&sysroot), "/rust"),
        remap(&root, "/pinprof"),
    ];
    println!("ebpf: building profiler-ebpf for bpfel-unknown-none (nightly, bpf-linker)");
    run_cmd(
        Command::new("rustup")
            .args(["run", "nightly", "cargo", "build", "--quiet", "--release"])
            .args(["--package", "profiler-ebpf", "--bins"])
            .args(["--target", "bpfel-unknown-none", "-Z", "build-std=core"])
            .arg("--target-dir")
            .arg(&target_dir)
            .current_dir(&root)
            .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"))
            .env_remove("RUSTFLAGS")
            .env_remove("RUSTC")
            .env_remove("RUSTC_WRAPPER")
            .env_remove("RUSTC_WORKSPACE_WRAPPER"),
    )
    .context("cannot build the kernel programs; `cargo xtask setup` installs what they need")?;
    Ok(target_dir.join("bpfel-unknown-none/release/pinprof-ebpf"))
}

/// What the kernel and aya use from the object, by section: each section's bytes and
/// relocations, and the symbols defined in it. Debug information and BTF are left out: they
/// carry source paths and ids that change with where and how the crate was built.
fn loaded_parts(data: &[u8]) -> Result<BTreeMap<String, String>> {
    let file = object::File::parse(data).context("not an ELF object")?;
    let mut parts = BTreeMap::new();
    for section in file.sections() {
        let name = section.name().unwrap_or("?").to_owned();
        // Relocation sections and the symbol table come in below, through the sections
        // they serve.
        let skipped = [".debug", ".BTF", ".rel", ".symtab", ".strtab"];
        if name.is_empty() || skipped.iter().any(|prefix| name.starts_with(prefix)) {
            continue;
        }
        let mut text = format!("{:?}\n", section.data()?);
        for (offset, reloc) in section.relocations() {
            let target = match reloc.target() {
                object::RelocationTarget::Symbol(index) => file
                    .symbol_by_index(index)
                    .and_then(|s| s.name().map(str::to_owned))
                    .unwrap_or_default(),
                other => format!("{other:?}"),
            };
            text += &format!(
                "reloc {offset} {target} {:?} {}\n",
                reloc.flags(),
                reloc.addend()
            );
        }
        for symbol in file.symbols() {
            if symbol.section_index() == Some(section.index()) {
                text += &format!(
                    "symbol {} {} {} {:?}\n",
                    symbol.name().unwrap_or("?"),
                    symbol.address(),
                    symbol.size(),
                    symbol.kind()
                );
            }
        }
        parts.insert(name, text);
    }
    Ok(parts)
}

/// `sha256sum`-style lines for every file of the kernel crate, sorted, paths from the root:
/// `sha256sum -c profiler/prebuilt/pinprof-ebpf.sources` checks them by hand.
/// `profiler/build.rs` computes the same list to tell whether the object fits the sources.
fn sources_manifest(root: &Path) -> Result<String> {
    let mut files = Vec::new();
    collect_files(&root.join(CRATE_DIR), &mut files)?;
    files.sort();
    let mut out = String::new();
    for file in files {
        let digest = Sha256::digest(std::fs::read(&file)?);
        let relative = file.strip_prefix(root)?;
        out += &format!("{}  {}\n", hex(&digest), relative.display());
    }
    Ok(out)
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        // Build output and editor state are not sources.
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

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
