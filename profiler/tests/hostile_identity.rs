//! The target plays for a pid that is not its own, and hands pinprof files made to break it:
//! every handle on the target is the process attached to (never a later holder of its pid),
//! readers of recordings run without root's capabilities, and a third-party parser that
//! panics on a hostile ELF file costs that file, not the recording.
//!
//! Run as root; the target runs as an unprivileged user (nobody).

mod common;

use std::{
    os::unix::{fs::PermissionsExt as _, process::CommandExt as _},
    process::{Child, Command, Output},
    time::Duration,
};

use common::{fixture, pinprof, terminal::Terminal};

use profiler::{
    jvm::memory::{Memory, ReadError},
    mappings::Mappings,
    process::{Process, is_exited},
    safe_fs::TargetRoot,
    target::Target,
};

/// The unprivileged user the target runs as.
const NOBODY: u32 = 65534;

/// A process of nobody's that lives until killed.
fn nobodys_sleeper() -> Child {
    common::require_root();
    Command::new("sleep")
        .arg("600")
        .uid(NOBODY)
        .gid(NOBODY)
        .spawn()
        .expect("start sleep as nobody")
}

/// Its first mapping's start: an address that reads while it lives.
fn first_mapping(process: &Process) -> u64 {
    process.maps().unwrap().iter().next().unwrap().address.0
}

/// Ends a child and reaps it: its pid is free for anyone then.
fn end(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A handle taken on a process that has exited since refuses to read, and says why; a
/// handle taken before the exit stops reading at it.
#[test]
fn a_handle_on_an_exited_process_refuses_to_read_and_says_why() {
    let child = nobodys_sleeper();
    let pid = child.id();
    let target = Target::open(pid).unwrap();
    let process = target.process().clone();
    let mem = Memory::open(&process).unwrap();
    let at = first_mapping(&process);
    let mut word = [0u8; 8];
    mem.read(at, &mut word)
        .expect("its memory reads while it lives");
    assert!(target.is_alive());
    end(child);

    assert!(!target.is_alive());
    assert!(process.has_exited());
    let exited = format!("process {pid} has exited");
    let err = format!("{:#}", Memory::open(&process).err().unwrap());
    assert!(err.contains(&exited), "{err}");
    let err = format!("{:#}", TargetRoot::open(&process).err().unwrap());
    assert!(err.contains(&exited), "{err}");
    assert_eq!(mem.read(at, &mut word), Err(ReadError::Exited { pid }));
    for name in ["status", "maps", "mem", "task"] {
        let err = process.read(name, 1 << 20).unwrap_err();
        assert!(is_exited(&err), "{name}: {err}");
    }
    assert!(is_exited(&process.procfs().unwrap_err()));
    assert_eq!(Mappings::new(&process).iter().count(), 0);
    // And it says so in a sentence.
    assert!(
        mem.read(at, &mut word)
            .unwrap_err()
            .to_string()
            .contains("its pid may be another process's now")
    );
}

/// Bytes only this test process holds: a fork of it holds them too, at the same address.
static MARKER: [u8; 16] = *b"pinprof-reuse-me";

/// A process of its own (a fork of this one, which pauses until killed) with pid `pid`,
/// through clone3's `set_tid` (root): the pid reuse a target could only hope for, made at once.
fn fork_with_pid(pid: u32) -> std::io::Result<u32> {
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }
    let tid = pid as libc::pid_t;
    let args = CloneArgs {
        exit_signal: libc::SIGCHLD as u64,
        set_tid: (&raw const tid) as u64,
        set_tid_size: 1,
        ..Default::default()
    };
    // SAFETY: a fork: the child calls only pause (async-signal-safe) until it is killed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &raw const args,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    match rc {
        0 => loop {
            // SAFETY: no preconditions.
            unsafe { libc::pause() };
        },
        rc if rc < 0 => Err(std::io::Error::last_os_error()),
        rc => Ok(rc as u32),
    }
}

/// The target exits and its pid goes to another process (here made on purpose): what
/// pinprof holds of the target reads nothing of the newcomer, though by its number
/// `/proc/PID/...` now leads there.
#[test]
fn a_pid_taken_over_by_another_process_leads_nowhere() {
    let (process, mem, at, newcomer) = (0..5)
        .find_map(|_| {
            let child = nobodys_sleeper();
            let pid = child.id();
            let target = Target::open(pid).unwrap();
            let process = target.process().clone();
            let mem = Memory::open(&process).unwrap();
            let at = first_mapping(&process);
            // Started in a clock tick of its own (start times count 10 ms ticks).
            std::thread::sleep(Duration::from_millis(30));
            end(child);
            // Another process may take the pid first (then try again with a new one).
            match fork_with_pid(pid) {
                Ok(newcomer) => Some((process, mem, at, newcomer)),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => None,
                Err(e) => panic!("clone3 with set_tid {pid} (needs root): {e}"),
            }
        })
        .expect("a freed pid given to a process of the test's");
    let pid = process.pid();
    assert_eq!(newcomer, pid);
    let kill = Killer(newcomer);

    // By number, /proc/PID is the newcomer's now: the reuse is real.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let ppid = format!("\nPPid:\t{}\n", std::process::id());
    assert!(status.contains(&ppid), "{status}");
    let by_number = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut marker = [0u8; 16];
    std::os::unix::fs::FileExt::read_exact_at(&by_number, &mut marker, MARKER.as_ptr() as u64)
        .unwrap();
    assert_eq!(marker, MARKER, "the newcomer's memory, by number");

    // Through the handles taken on the target: nothing of the newcomer.
    assert!(process.has_exited());
    let mut word = [0u8; 16];
    assert_eq!(
        mem.read(MARKER.as_ptr() as u64, &mut word),
        Err(ReadError::Exited { pid })
    );
    assert_eq!(mem.read(at, &mut word[..8]), Err(ReadError::Exited { pid }));
    let exited = format!("process {pid} has exited");
    for err in [
        Memory::open(&process).err().map(|e| format!("{e:#}")),
        TargetRoot::open(&process).err().map(|e| format!("{e:#}")),
    ] {
        let err = err.expect("refused");
        assert!(err.contains(&exited), "{err}");
    }
    for name in ["status", "maps", "cmdline", "root", "mem"] {
        let err = process.read(name, 1 << 20).unwrap_err();
        assert!(is_exited(&err), "{name}: {err}");
    }
    assert!(is_exited(&process.read_link("exe").unwrap_err()));
    assert!(is_exited(&process.procfs().unwrap_err()));
    assert_eq!(Mappings::new(&process).iter().count(), 0);
    // A new hold on the pid is the newcomer, and says so by its start time.
    let again = Process::attach(pid).unwrap();
    assert_ne!(again.start_time(), process.start_time());
    drop(kill);
}

/// Kills and reaps a child made with `fork_with_pid` however the test ends.
struct Killer(u32);

impl Drop for Killer {
    fn drop(&mut self) {
        // SAFETY: plain integers; our own child.
        unsafe {
            libc::kill(self.0 as libc::pid_t, libc::SIGKILL);
            libc::waitpid(self.0 as libc::pid_t, std::ptr::null_mut(), 0);
        }
    }
}

/// A field of `/proc/PID/status`, as written there.
fn status_field(pid: u32, name: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'));
    line.unwrap_or_else(|| panic!("no {name} in {status}"))
        .trim()
        .to_string()
}

/// A reader of recordings that ends as root without root's power: refused (exit `code`),
/// saying why.
fn assert_refused(output: &Output, code: i32, what: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{what}: {stderr}");
    assert!(stderr.contains("Permission denied"), "{what}: {stderr}");
    assert!(
        stderr.contains("without any capability"),
        "{what}: {stderr}"
    );
}

/// `report`, `flamegraph`, `export`, `replay` and `check FILE` run as root hold no capability:
/// seen in a running `replay`'s status, and in what they may no longer do that root may (a
/// directory of nobody's 0700, a 0600 recording of nobody's), while writing where root owns
/// goes on.
#[test]
fn readers_of_recordings_give_up_every_capability_even_as_root() {
    common::require_root();
    let scratch = profiler::safe_fs::private_temp_dir("pinprof-readers").unwrap();
    let _cleanup = RemoveDir(scratch.clone());
    let bytes = fixture::file(
        &fixture::session(50, |x| fixture::START + x, |tid| tid),
        fixture::START + 3_000_000_000,
    );
    let ours = scratch.join("ours.pinrec");
    std::fs::write(&ours, &bytes).unwrap();
    // Nobody's: a directory others may not enter, and a recording others may not read.
    let theirs = scratch.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    let their_recording = scratch.join("theirs.pinrec");
    std::fs::write(&their_recording, &bytes).unwrap();
    for (path, mode) in [(&theirs, 0o700), (&their_recording, 0o600)] {
        std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // Root with its capabilities may do both.
    std::fs::write(theirs.join("probe"), b"root may").unwrap();
    std::fs::remove_file(theirs.join("probe")).unwrap();
    assert_eq!(std::fs::read(&their_recording).unwrap(), bytes);

    // A reader at work: uid 0, no capability in any set, no way to gain one.
    let mut replay = pinprof();
    replay.arg("replay").arg(&ours);
    let mut term = Terminal::spawn(replay, 45, 150);
    term.wait_for("the replayed recording", Duration::from_secs(30), |s| {
        s.contains("ended: duration reached")
    });
    let pid = term.pid();
    let seen: Vec<(&str, String)> = ["Uid", "CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"]
        .into_iter()
        .chain(["NoNewPrivs"])
        .map(|name| (name, status_field(pid, name)))
        .collect();
    eprintln!("replay as root: {seen:?}");
    term.send(b"q");
    assert!(term.wait_exit(Duration::from_secs(10)).success());
    for (name, value) in &seen {
        let expected = match *name {
            "Uid" => "0\t0\t0\t0",
            "NoNewPrivs" => "1",
            _ => "0000000000000000",
        };
        assert_eq!(value, expected, "{name} of a replay run as root");
    }

    // What only root's capabilities could do is refused, and said for what it is.
    let run = |args: &[&std::ffi::OsStr]| pinprof().args(args).output().unwrap();
    let svg = theirs.join("x.svg");
    let folded = theirs.join("x.folded");
    let output = run(&[
        "flamegraph".as_ref(),
        ours.as_os_str(),
        "-o".as_ref(),
        svg.as_os_str(),
    ]);
    assert_refused(&output, 1, "flamegraph into nobody's 0700 directory");
    let output = run(&[
        "export".as_ref(),
        ours.as_os_str(),
        "-o".as_ref(),
        folded.as_os_str(),
    ]);
    assert_refused(&output, 1, "export into nobody's 0700 directory");
    let output = run(&["report".as_ref(), their_recording.as_os_str()]);
    assert_refused(&output, 1, "report of nobody's 0600 recording");
    let output = run(&["check".as_ref(), their_recording.as_os_str()]);
    assert_refused(&output, 2, "check of nobody's 0600 recording");
    assert!(
        std::fs::read_dir(&theirs).unwrap().next().is_none(),
        "nothing written there"
    );

    // Where root owns, a reader writes as before.
    let svg = scratch.join("x.svg");
    let output = run(&[
        "flamegraph".as_ref(),
        ours.as_os_str(),
        "-o".as_ref(),
        svg.as_os_str(),
    ]);
    common::assert_ok(&output, "flamegraph into root's directory");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let output = run(&["check".as_ref(), ours.as_os_str()]);
    assert!(output.status.code().is_some_and(|c| c < 2), "{output:?}");
}

/// Removes a test's directory however the test ends.
struct RemoveDir(std::path::PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
