//! A JVM whose owner is hostile, played for real: the JVM runs as nobody, pinprof as root.
//! - Device nodes, FIFOs and terminals planted where pinprof reads the target's files (its
//!   perf map, its JDK's `release`) are never opened: an inotify watch on each sees every
//!   open of it, whoever makes it, and must see none.
//! - Terminal escapes in the JVM's thread names and in its attach replies never reach the
//!   terminal pinprof writes to (a pseudo-terminal here, read byte for byte).
//! - A recording swapped for another while `check --pid -o FILE` or `record --export` runs:
//!   the verdict and the export come from what pinprof recorded.

mod common;

use std::{
    ffi::CString,
    fs::File,
    io::Read as _,
    os::{
        fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
        unix::fs::MetadataExt as _,
    },
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use common::{
    nobody::{NOBODY as JVM_ID, Stage},
    *,
};

/// What the JVM's owner plants at a path pinprof reads.
#[derive(Clone, Copy, Debug)]
enum Plant {
    /// A character device: 1:3 is /dev/null, harmless when opened (a watchdog would not be).
    Device,
    Fifo,
    /// A node of the slave side of a pseudo-terminal: opened without O_NOCTTY by a process
    /// with no controlling terminal, it would become that process's terminal.
    Terminal(libc::dev_t),
}

/// Replaces whatever is at `path` by `what`, owned by the JVM's user (as its own files are).
fn plant(path: &Path, what: Plant) {
    let _ = std::fs::remove_file(path);
    let c = CString::new(path.to_str().unwrap()).unwrap();
    let (mode, dev) = match what {
        Plant::Device => (libc::S_IFCHR | 0o644, libc::makedev(1, 3)),
        Plant::Fifo => (libc::S_IFIFO | 0o644, 0),
        Plant::Terminal(dev) => (libc::S_IFCHR | 0o644, dev),
    };
    // SAFETY: a NUL-terminated path.
    let made = unsafe { libc::mknod(c.as_ptr(), mode, dev) };
    assert_eq!(
        made,
        0,
        "mknod {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
    std::os::unix::fs::chown(path, Some(JVM_ID), Some(JVM_ID)).unwrap();
}

/// A pseudo-terminal: the master, and the device number of its slave.
struct Pty {
    master: OwnedFd,
    slave: libc::dev_t,
}

impl Pty {
    fn open() -> Self {
        // SAFETY: plain libc calls on a descriptor they return; ptsname_r writes into `name`.
        unsafe {
            let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
            let master = OwnedFd::from_raw_fd(fd);
            assert_eq!(libc::grantpt(fd), 0);
            assert_eq!(libc::unlockpt(fd), 0);
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(fd, name.as_mut_ptr(), name.len()), 0);
            let name = std::ffi::CStr::from_ptr(name.as_ptr()).to_str().unwrap();
            let slave = std::fs::metadata(name).unwrap().rdev();
            Self { master, slave }
        }
    }

    /// A new slave side, to hand to a program as its terminal.
    fn slave_file(&self) -> File {
        let mut name = [0 as libc::c_char; 128];
        // SAFETY: a valid master descriptor and a buffer of the size given.
        let rc = unsafe { libc::ptsname_r(self.master.as_raw_fd(), name.as_mut_ptr(), name.len()) };
        assert_eq!(rc, 0);
        // SAFETY: ptsname_r wrote a NUL-terminated name.
        let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags_noctty()
            .open(name.to_str().unwrap())
            .unwrap()
    }
}

trait NoCtty {
    fn custom_flags_noctty(&mut self) -> &mut Self;
}

impl NoCtty for std::fs::OpenOptions {
    fn custom_flags_noctty(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt as _;
        self.custom_flags(libc::O_NOCTTY)
    }
}

/// An inotify watch on files: every open of them, by anyone, is an event.
struct OpenWatch {
    fd: OwnedFd,
    paths: Vec<(i32, PathBuf)>,
}

impl OpenWatch {
    fn new(paths: &[&Path]) -> Self {
        // SAFETY: inotify_init1 returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let paths = paths
            .iter()
            .map(|path| {
                let c = CString::new(path.to_str().unwrap()).unwrap();
                let mask = libc::IN_OPEN | libc::IN_ACCESS | libc::IN_CLOSE_NOWRITE;
                // SAFETY: a valid inotify descriptor and a NUL-terminated path.
                let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), mask) };
                assert!(wd >= 0, "watch {}", path.display());
                (wd, path.to_path_buf())
            })
            .collect();
        Self { fd, paths }
    }

    /// The files opened (or read) since the watch began, by path, with their event masks.
    fn opened(&self) -> Vec<(PathBuf, u32)> {
        let mut buf = vec![0u8; 64 << 10];
        let mut seen = Vec::new();
        loop {
            // SAFETY: a valid descriptor and a buffer of the length given.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return seen;
            }
            let mut at = 0;
            while at + std::mem::size_of::<libc::inotify_event>() <= n as usize {
                // SAFETY: the kernel wrote whole events; read_unaligned copies one header.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                if let Some((_, path)) = self.paths.iter().find(|(wd, _)| *wd == event.wd) {
                    seen.push((path.clone(), event.mask));
                }
                at += std::mem::size_of::<libc::inotify_event>() + event.len as usize;
            }
        }
    }
}

/// `pinprof ARGS` as root, with no controlling terminal (as a service manager starts it),
/// standard output and error on the slave side of `pty` when given: (exit code, the bytes
/// it wrote). Ends within `limit`.
fn run_pinprof(args: &[&str], pty: Option<&Pty>, limit: Duration) -> (Option<i32>, Vec<u8>) {
    use std::os::unix::process::CommandExt as _;
    let mut command = pinprof();
    command.args(args).stdin(Stdio::null());
    // SAFETY: setsid is async-signal-safe: the child starts a session with no terminal.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let started = Instant::now();
    match pty {
        Some(pty) => {
            let slave = pty.slave_file();
            command.stdout(slave.try_clone().unwrap()).stderr(slave);
            let mut child = command.spawn().unwrap();
            let mut master = File::from(pty.master.try_clone().unwrap());
            set_nonblocking(&master);
            let mut written = Vec::new();
            let status = loop {
                drain(&mut master, &mut written);
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                assert!(
                    started.elapsed() < limit,
                    "pinprof {args:?} ran past {limit:?}"
                );
                std::thread::sleep(Duration::from_millis(20));
            };
            std::thread::sleep(Duration::from_millis(100));
            drain(&mut master, &mut written);
            (status.code(), written)
        }
        None => {
            let output = command.output().unwrap();
            assert!(
                started.elapsed() < limit,
                "pinprof {args:?} ran past {limit:?}"
            );
            let mut said = output.stdout;
            said.extend_from_slice(&output.stderr);
            (output.status.code(), said)
        }
    }
}

fn set_nonblocking(file: &File) {
    // SAFETY: fcntl on a valid descriptor.
    unsafe {
        let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

fn drain(master: &mut File, into: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        into.extend_from_slice(&buf[..n]);
    }
}

/// How many events `record`'s closing line says it recorded.
fn recorded_events(said: &str) -> u64 {
    said.lines()
        .find_map(|l| {
            l.strip_prefix("pinprof: recorded ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no closing line in {said}"))
}

/// A FIFO, a harmless character device and a pseudo-terminal's slave node planted at the
/// JVM's perf-map path and at its JDK's `release`, in two rounds: `record` (which reads both,
/// the perf map each time the JIT's code needs naming) and `jvm` run as root against the JVM
/// and never open them, and still do their work (the events recorded, the JVM described).
#[test]
fn planted_devices_fifos_and_terminals_are_never_opened() {
    let stage = Stage::new("hostile-devices", 21);
    let mut jvm = stage.start_jvm(
        &["-Djdk.virtualThreadScheduler.parallelism=2"],
        "PinnedSleep",
        &[],
    );
    jvm.wait_for("sleeps", Duration::from_secs(20)).unwrap();
    let pid = jvm.pid.to_string();
    let release = stage.jdk().join("release");
    let perf_map = PathBuf::from(format!("/tmp/perf-{pid}.map"));
    let pty = Pty::open();
    let rounds = [
        (Plant::Device, Plant::Fifo),
        (Plant::Terminal(pty.slave), Plant::Device),
        (Plant::Fifo, Plant::Terminal(pty.slave)),
    ];
    for (round, (at_release, at_perf_map)) in rounds.into_iter().enumerate() {
        plant(&release, at_release);
        plant(&perf_map, at_perf_map);
        let watch = OpenWatch::new(&[&release, &perf_map]);
        let out = stage.path(&format!("round{round}.pinrec"));
        let (code, said) = run_pinprof(
            &[
                "record",
                "--pid",
                &pid,
                "--duration",
                "2",
                "--quiet",
                "--output",
                out.to_str().unwrap(),
            ],
            None,
            Duration::from_secs(60),
        );
        let said = String::from_utf8_lossy(&said).into_owned();
        assert_eq!(code, Some(0), "round {round}: record: {said}");
        assert!(recorded_events(&said) > 10, "round {round}: {said}");
        let (code, said) = run_pinprof(&["jvm", "--pid", &pid], None, Duration::from_secs(60));
        let said = String::from_utf8_lossy(&said).into_owned();
        assert_eq!(code, Some(0), "round {round}: jvm: {said}");
        assert!(
            said.contains("HotSpot") && said.contains("carriers: 2"),
            "{said}"
        );
        let opened = watch.opened();
        assert!(
            opened.is_empty(),
            "round {round} ({at_release:?} at release, {at_perf_map:?} at the perf map): \
             pinprof opened {opened:?}"
        );
    }
    let _ = std::fs::remove_file(&perf_map);
}

/// The bytes a terminal would act on: ESC (CSI, OSC), BEL (ends an OSC), the one-byte CSI
/// (C1, in UTF-8), and the carriage return that rewrites a line.
fn escapes(bytes: &[u8]) -> Vec<(usize, u8)> {
    let mut found: Vec<(usize, u8)> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| matches!(b, 0x1b | 0x07))
        .map(|(i, b)| (i, *b))
        .collect();
    found.extend(
        bytes
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[0] == 0xc2 && (0x80..0xa0).contains(&w[1]))
            .map(|(i, w)| (i, w[1])),
    );
    found
}

/// Thread names (the carriers' too) and attach replies (the JVM serves its own socket) with
/// OSC 0, OSC 52, a cleared screen and BEL: `jvm`, `record` and `check --pid` write none of those bytes to their terminal,
/// and still say what they mean (the escaped names, the failed attach).
#[test]
fn escapes_from_the_target_never_reach_the_terminal() {
    let stage = Stage::new("hostile-escapes", 21);
    let jvm = stage.start_jvm(
        &[
            "-Djdk.virtualThreadScheduler.parallelism=2",
            "--add-opens",
            "java.base/java.lang=ALL-UNNAMED",
        ],
        "HostileNames",
        &["2"],
    );
    let pid = jvm.pid.to_string();
    let pty = Pty::open();
    let out = stage.path("escapes.pinrec");
    let runs: [(&str, Vec<&str>); 3] = [
        ("jvm", vec!["jvm", "--pid", &pid]),
        (
            "record",
            vec![
                "record",
                "--pid",
                &pid,
                "--duration",
                "2",
                "--output",
                out.to_str().unwrap(),
            ],
        ),
        ("check", vec!["check", "--pid", &pid, "--duration", "2s"]),
    ];
    for (what, args) in runs {
        let (code, written) = run_pinprof(&args, Some(&pty), Duration::from_secs(60));
        let shown = String::from_utf8_lossy(&written);
        let found = escapes(&written);
        assert!(
            found.is_empty(),
            "{what} wrote {found:?} to its terminal:\n{shown:?}"
        );
        assert!(matches!(code, Some(0 | 1)), "{what}: {code:?}\n{shown}");
        // What the target said is still there for a person, escaped and cut.
        match what {
            "jvm" => {
                assert!(shown.contains("\\x1b]52;c;"), "{what}: {shown}");
                assert!(shown.contains("(could not ask the JVM"), "{what}: {shown}");
                assert!(written.len() < 64 << 10, "{what}: {} bytes", written.len());
            }
            "record" => assert!(shown.contains("pinprof: recorded"), "{what}: {shown}"),
            _ => {}
        }
    }
}

/// `check --pid -o FILE` on a JVM that deadlocks: while it records, the code under test (which
/// can write the CI workspace) swaps FILE for a clean recording, and a symlink to one.
/// The verdict and the JUnit report are still about what pinprof recorded: FAIL, a deadlock.
/// `record --export` the same: the export is the JVM's, not the planted one's.
#[test]
fn a_recording_swapped_under_check_and_export_is_not_what_they_read() {
    require_root();
    // A clean recording to plant: a JVM that neither deadlocks nor pins (JDK 25, sleeps).
    let clean_jvm = start(25, "Sleeper", &[]);
    let clean = record(clean_jvm.pid, 1.5, "swap-clean.pinrec");
    drop(clean_jvm);
    let clean_pid = report_json(&clean)["target"]["pid"].as_u64().unwrap();

    let jvm = start(21, "Deadlock", &[]);
    let pid = jvm.pid.to_string();
    for swap in ["file", "symlink"] {
        let out = scratch(&format!("swap-check-{swap}.pinrec"));
        let junit = scratch(&format!("swap-check-{swap}.xml"));
        let child = pinprof()
            .args(["check", "--pid", &pid, "--duration", "3s", "--output"])
            .arg(&out)
            .arg("--junit")
            .arg(&junit)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        swap_when_written(&out, &clean, swap);
        let output = child.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(output.status.code(), Some(1), "swapped by a {swap}: {said}");
        assert!(said.contains("deadlock"), "{said}");
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(xml.contains("<failure"), "{xml}");
    }
    // record --export: the export is of the deadlocking JVM's stacks, whatever stands at the
    // recording's name when it is read.
    let out = scratch("swap-export.pinrec");
    let export = scratch("swap-export.folded");
    let child = pinprof()
        .args([
            "record",
            "--pid",
            &pid,
            "--duration",
            "3",
            "--quiet",
            "--output",
        ])
        .arg(&out)
        .arg("--export")
        .arg(&export)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    swap_when_written(&out, &clean, "file");
    let output = child.wait_with_output().unwrap();
    assert_ok(&output, "record --export");
    let folded = std::fs::read_to_string(&export).unwrap();
    assert!(folded.contains("Deadlock.both"), "{folded}");
    assert!(!folded.contains("Sleeper"), "{folded}");
    // And the planted file is what a later read by name finds: the swap did happen.
    assert_eq!(report_json(&out)["target"]["pid"].as_u64(), Some(clean_pid));
}

/// Waits for `out` to stand at its name (pinprof puts it there with its header), then puts
/// `clean` there instead: a copy of it, or a symlink to it.
fn swap_when_written(out: &Path, clean: &Path, how: &str) {
    let started = Instant::now();
    while std::fs::symlink_metadata(out).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{} never appeared",
            out.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::fs::remove_file(out).unwrap();
    match how {
        "symlink" => std::os::unix::fs::symlink(clean, out).unwrap(),
        _ => {
            std::fs::copy(clean, out).unwrap();
        }
    }
}
