//! `cargo xtask dist`: one static `pinprof` (x86_64, musl) with the kernel object inside, and its
//! SHA-256 checksum, for machines with no Rust, no LLVM and no JDK.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};
use object::{
    Endianness,
    read::elf::{ElfFile64, FileHeader as _, ProgramHeader as _},
};
use sha2::{Digest as _, Sha256};

use crate::{cargo, prebuilt::hex, run_cmd, setup};

pub const TARGET: &str = "x86_64-unknown-linux-musl";

/// What `dist` made.
pub struct Dist {
    pub binary: PathBuf,
    pub checksum: PathBuf,
    /// Shell completions (`completions/pinprof.bash`...) and manual pages (`man/*.1`).
    pub docs: PathBuf,
}

pub fn run() -> Result<()> {
    let dist = build()?;
    println!(
        "dist: {} ({:.1} MB), static, kernel programs inside",
        dist.binary.display(),
        std::fs::metadata(&dist.binary)?.len() as f64 / 1e6
    );
    println!(
        "dist: checksum {} (check with `sha256sum -c` beside the binary)",
        dist.checksum.display()
    );
    println!(
        "dist: shell completions and manual pages in {} (completions/, man/)",
        dist.docs.display()
    );
    Ok(())
}

/// The subcommands that get a manual page of their own.
const MAN_PAGES: [&str; 9] = [
    "record",
    "top",
    "replay",
    "jvm",
    "report",
    "flamegraph",
    "export",
    "check",
    "",
];

/// Shell completions and manual pages, as the binary itself generates them (clap's
/// generators, from the very options it parses).
fn docs(binary: &Path, dir: &Path) -> Result<()> {
    let generate = |args: &[&str], out: PathBuf| -> Result<()> {
        let made = Command::new(binary).args(args).output()?;
        if !made.status.success() {
            bail!(
                "pinprof {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&made.stderr)
            );
        }
        std::fs::write(&out, made.stdout).with_context(|| format!("cannot write {}", out.display()))
    };
    let completions = dir.join("completions");
    std::fs::create_dir_all(&completions)?;
    for (shell, file) in [
        ("bash", "pinprof.bash"),
        ("zsh", "_pinprof"),
        ("fish", "pinprof.fish"),
    ] {
        generate(&["completions", shell], completions.join(file))?;
    }
    let man = dir.join("man");
    std::fs::create_dir_all(&man)?;
    for sub in MAN_PAGES {
        let (args, page) = if sub.is_empty() {
            (vec!["man"], "pinprof.1".to_string())
        } else {
            (vec!["man", sub], format!("pinprof-{sub}.1"))
        };
        generate(&args, man.join(page))?;
    }
    Ok(())
}

/// Builds the binary, checks it is static and carries the kernel programs, writes the checksum.
pub fn build() -> Result<Dist> {
    setup::musl_target()?;
    println!("dist: cargo build --release --target {TARGET} (static)");
    // Not static-pie (Rust's musl default, which keeps a dynamic section to relocate itself):
    // a plain static executable, as `file` and `ldd` call static. Only this target's code gets
    // the flags; build scripts and the kernel programs' own build keep theirs.
    run_cmd(
        cargo()
            .args([
                "build",
                "--release",
                "--package",
                "profiler",
                "--bin",
                "pinprof",
            ])
            .args(["--target", TARGET])
            .env(
                "CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS",
                "-C target-feature=+crt-static -C relocation-model=static -C strip=symbols",
            )
            // The C parts of dependencies (ring) against musl's headers and libc, with
            // Debian's wrapper (musl-tools).
            .env("CC_x86_64_unknown_linux_musl", "musl-gcc"),
    )?;
    let built = setup::target_dir().join(TARGET).join("release/pinprof");
    let data = std::fs::read(&built).with_context(|| format!("cannot read {}", built.display()))?;
    check_static(&data).with_context(|| format!("{} is not static", built.display()))?;
    if !has_bpf_object(&data) {
        bail!(
            "{} carries no kernel programs: the BPF build was skipped or produced nothing \
             (AYA_BUILD_SKIP set, or neither nightly with bpf-linker nor a fitting prebuilt object)",
            built.display()
        );
    }
    let dir = setup::target_dir().join("dist");
    std::fs::create_dir_all(&dir)?;
    let name = format!("pinprof-{}-x86_64-linux-musl", env!("CARGO_PKG_VERSION"));
    let binary = dir.join(&name);
    std::fs::write(&binary, &data)?;
    set_executable(&binary)?;
    let checksum = dir.join(format!("{name}.sha256"));
    std::fs::write(
        &checksum,
        format!("{}  {name}\n", hex(&Sha256::digest(&data))),
    )?;
    docs(&binary, &dir)?;
    Ok(Dist {
        binary,
        checksum,
        docs: dir,
    })
}

/// Fails unless the ELF file asks nothing of a dynamic loader: no interpreter, no dynamic
/// section, a fixed-address executable.
pub fn check_static(data: &[u8]) -> Result<()> {
    let elf = ElfFile64::<Endianness>::parse(data).context("not a 64-bit ELF file")?;
    let (header, endian) = (elf.elf_header(), elf.endian());
    let kind = header.e_type(endian);
    if kind != object::elf::ET_EXEC {
        bail!("ELF type {kind}, not a fixed-address executable (ET_EXEC)");
    }
    for segment in elf.elf_program_headers() {
        match segment.p_type(endian) {
            object::elf::PT_INTERP => bail!("it names a program interpreter (PT_INTERP)"),
            object::elf::PT_DYNAMIC => bail!("it has a dynamic section (PT_DYNAMIC)"),
            _ => {}
        }
    }
    Ok(())
}

/// Whether an ELF object for the BPF machine sits somewhere in the bytes (the embedded kernel
/// programs; an empty object means a `pinprof` that cannot capture).
fn has_bpf_object(data: &[u8]) -> bool {
    const EM_BPF: u16 = 247;
    data.windows(20)
        .any(|w| w.starts_with(b"\x7fELF\x02\x01") && u16::from_le_bytes([w[18], w[19]]) == EM_BPF)
}

fn set_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// The loud check `cargo xtask test` runs on the dist binary before the suite runs against it:
/// static, and it captures a real JVM (carriers seen, pinning counted) in a short record made
/// inside a root directory that holds nothing but the binary and the kernel's /proc and /sys:
/// no libc, no Rust, no LLVM, no JDK to lean on.
pub fn smoke(dist: &Dist, env: &setup::Env) -> Result<()> {
    check_static(&std::fs::read(&dist.binary)?)?;
    let bare = Bare::new(&dist.binary)?;
    let jvm = crate::workload::Jvm::start(env.java(21), &env.workloads, "Demo", &[])?;
    std::thread::sleep(std::time::Duration::from_secs(1));
    // A private mount namespace, so the bind mounts vanish with it and never reach the host.
    let script = r#"mount --make-rprivate / && mount --bind /proc "$1/proc" &&
        mount --rbind /sys "$1/sys" &&
        exec chroot "$1" /pinprof record --quiet --duration 2 --pid "$2" --output /out/smoke.pinrec"#;
    let recorded = run_cmd(
        Command::new("unshare")
            .args(["--mount", "sh", "-c", script, "sh"])
            .arg(&bare.dir)
            .arg(jvm.pid.to_string()),
    );
    drop(jvm);
    recorded.context("the dist binary did not record in a bare root directory")?;
    let report = Command::new(&dist.binary)
        .args(["report", "--format", "json"])
        .arg(bare.dir.join("out/smoke.pinrec"))
        .output()
        .context("cannot run the dist binary")?;
    if !report.status.success() {
        bail!(
            "the dist binary's report failed: {}",
            String::from_utf8_lossy(&report.stderr)
        );
    }
    let json: serde_json::Value = serde_json::from_slice(&report.stdout)?;
    let carriers = json["threads"]
        .as_array()
        .map_or(0, |t| t.iter().filter(|t| t["role"] == "carrier").count());
    let pinned = json["pinned"]["events"].as_u64().unwrap_or(0);
    let stacks = json["capture"]["java_stacks"].as_u64().unwrap_or(0);
    if carriers == 0 || pinned == 0 || stacks == 0 {
        bail!(
            "the dist binary, alone in a bare root, captured {carriers} carriers, {pinned} pinned \
             events and {stacks} Java stacks from the demo JVM in 2 s"
        );
    }
    println!(
        "test: the dist binary is static and, alone in a bare root, captures ({carriers} carriers, \
         {pinned} pinned events, {stacks} Java stacks in 2 s)"
    );
    check_docs(&dist.docs)
}

/// The completions load in bash (and complete a subcommand), and every manual page renders
/// in man with the options of its subcommand.
fn check_docs(dir: &Path) -> Result<()> {
    let bash = dir.join("completions/pinprof.bash");
    let script = r#"source "$1" && COMP_WORDS=(pinprof ch) COMP_CWORD=1 && _pinprof pinprof ch pinprof && echo "${COMPREPLY[@]}""#;
    let completed = Command::new("bash")
        .args(["-c", script, "bash"])
        .arg(&bash)
        .output()?;
    let words = String::from_utf8_lossy(&completed.stdout);
    if !completed.status.success() || !words.split_whitespace().any(|w| w == "check") {
        bail!(
            "bash does not complete `pinprof ch` to `check` with {}: {words} {}",
            bash.display(),
            String::from_utf8_lossy(&completed.stderr)
        );
    }
    for (page, option) in [
        ("pinprof.1", "record"),
        ("pinprof-check.1", "--max-pinned"),
        ("pinprof-export.1", "--format"),
    ] {
        let path = dir.join("man").join(page);
        let shown = Command::new("man")
            .arg("-l")
            .arg(&path)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .context("cannot run man")?;
        let text = String::from_utf8_lossy(&shown.stdout);
        if !shown.status.success() || !text.contains(option) {
            bail!("man -l {} does not show {option}: {text}", path.display());
        }
    }
    println!("test: the completions complete in bash, the manual pages render in man");
    Ok(())
}

/// A root directory with the binary as `/pinprof`, empty `/proc` and `/sys` to mount on, and
/// `/out` for the recording. Taken apart file by file: never a recursive removal, which a mount
/// still in place would turn against the host.
struct Bare {
    dir: PathBuf,
}

impl Bare {
    const DIRS: [&str; 3] = ["proc", "sys", "out"];

    fn new(binary: &Path) -> Result<Self> {
        let bare = Self {
            dir: setup::target_dir().join("dist/bare"),
        };
        bare.remove();
        std::fs::create_dir(&bare.dir)
            .with_context(|| format!("cannot create {}", bare.dir.display()))?;
        for dir in Self::DIRS {
            std::fs::create_dir(bare.dir.join(dir))?;
        }
        std::fs::copy(binary, bare.dir.join("pinprof"))?;
        set_executable(&bare.dir.join("pinprof"))?;
        Ok(bare)
    }

    fn remove(&self) {
        let _ = std::fs::remove_file(self.dir.join("pinprof"));
        let _ = std::fs::remove_file(self.dir.join("out/smoke.pinrec"));
        for dir in Self::DIRS {
            let _ = std::fs::remove_dir(self.dir.join(dir));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl Drop for Bare {
    fn drop(&mut self) {
        self.remove();
    }
}
