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
    jvm::memory::{Memory, ReadError, elf_symbols},
    mappings::{Mapping, MapsWatch, SealedFile},
    parser_guard,
    process::{Process, is_exited},
    safe_fs::TargetRoot,
    symbolize::ElfSymbols,
    target::Target,
    unwind::NativeUnwinder,
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

/// Its first executable mapping's start: an address that reads while it lives.
fn first_mapping(process: &Process) -> u64 {
    let mut maps = profiler::procmaps::Maps::open(process).unwrap();
    maps.executable(1).unwrap().vmas[0].start
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
    assert_eq!(
        MapsWatch::start(&process).unwrap().latest().iter().count(),
        0
    );
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
    assert_eq!(
        MapsWatch::start(&process).unwrap().latest().iter().count(),
        0
    );
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

// ---------------------------------------------------------------------------------------
// Hostile ELF files through the parsers' door.

/// A deterministic stream of numbers (xorshift64*), so that a failing mutant is made again.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A 64-bit little-endian ELF file's bytes, with the fields the mutations aim at.
struct Elf(Vec<u8>);

/// A section: its name, where its header is, where its bytes are.
struct Section {
    name: String,
    header: usize,
    offset: usize,
    size: usize,
}

impl Elf {
    fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.0[at..at + 2].try_into().unwrap())
    }
    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.0[at..at + 4].try_into().unwrap())
    }
    fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.0[at..at + 8].try_into().unwrap())
    }
    fn put(bytes: &mut [u8], at: usize, value: &[u8]) {
        if let Some(dst) = bytes.get_mut(at..at + value.len()) {
            dst.copy_from_slice(value);
        }
    }

    fn sections(&self) -> Vec<Section> {
        let (shoff, shnum, shstrndx) = (
            self.u64(0x28) as usize,
            self.u16(0x3c) as usize,
            self.u16(0x3e) as usize,
        );
        let header = |i: usize| shoff + i * 64;
        let names_at = self.u64(header(shstrndx) + 0x18) as usize;
        (0..shnum)
            .map(|i| {
                let h = header(i);
                let name_at = names_at + self.u32(h) as usize;
                let end = self.0[name_at..].iter().position(|&b| b == 0).unwrap();
                Section {
                    name: String::from_utf8_lossy(&self.0[name_at..name_at + end]).into(),
                    header: h,
                    offset: self.u64(h + 0x18) as usize,
                    size: self.u64(h + 0x20) as usize,
                }
            })
            .collect()
    }

    /// The executable load segment: (file offset, address, size in the file).
    fn exec_segment(&self) -> (u64, u64, u64) {
        let (phoff, phnum) = (self.u64(0x20) as usize, self.u16(0x38) as usize);
        (0..phnum)
            .map(|i| phoff + i * 56)
            .find(|&p| self.u32(p) == 1 && self.u32(p + 4) & 1 != 0)
            .map(|p| (self.u64(p + 8), self.u64(p + 0x10), self.u64(p + 0x20)))
            .expect("an executable PT_LOAD")
    }

    /// Hostile variants of this file, each named by what was done to it: cut short, counts and
    /// offsets out of all proportion, section tables and unwind tables pointing anywhere,
    /// symbols with names and values out of range, and random bytes flipped.
    fn mutants(&self, plan: &Plan, rng: &mut Rng) -> Vec<(String, Vec<u8>)> {
        let len = self.0.len();
        let mut out: Vec<(String, Vec<u8>)> = Vec::new();
        let mut with = |name: String, edit: &dyn Fn(&mut Vec<u8>)| {
            let mut bytes = self.0.clone();
            edit(&mut bytes);
            out.push((name, bytes));
        };
        let shoff = self.u64(0x28) as usize;
        for cut in [
            0,
            4,
            63,
            64,
            self.u64(0x20) as usize + 10,
            shoff,
            shoff + 100,
            len / 2,
            len - 1,
        ] {
            with(format!("cut at {cut}"), &|b| b.truncate(cut.min(len)));
        }
        for (field, at, width) in [
            ("e_shnum", 0x3c, 2),
            ("e_phnum", 0x38, 2),
            ("e_shstrndx", 0x3e, 2),
            ("e_shentsize", 0x3a, 2),
            ("e_phentsize", 0x36, 2),
            ("e_shoff", 0x28, 8),
            ("e_phoff", 0x20, 8),
            ("e_entry", 0x18, 8),
        ] {
            for &value in plan.values {
                let value = match value {
                    LEN => len as u64 - 1,
                    v => v,
                };
                let bytes = value.to_le_bytes();
                let shown = value & (u64::MAX >> (64 - 8 * width));
                with(format!("{field} = {shown:#x}"), &|b| {
                    Elf::put(b, at, &bytes[..width])
                });
            }
        }
        // Extended numbering: e_shnum 0, the count in section 0's size.
        with("extended section count".into(), &|b| {
            Elf::put(b, 0x3c, &0u16.to_le_bytes());
            Elf::put(b, shoff + 0x20, &u64::MAX.to_le_bytes());
        });
        let aimed = |s: &Section| plan.sections.is_none_or(|names| names.contains(&&*s.name));
        for section in self.sections().into_iter().filter(aimed) {
            let h = section.header;
            let name = &section.name;
            for (field, at, value) in [
                ("sh_offset", 0x18, u64::MAX - 0x10),
                ("sh_offset", 0x18, len as u64 - 1),
                ("sh_size", 0x20, u64::MAX),
                ("sh_size", 0x20, len as u64 * 2),
                ("sh_entsize", 0x38, 0),
                ("sh_entsize", 0x38, 1),
                ("sh_entsize", 0x38, u64::MAX),
                ("sh_addr", 0x10, u64::MAX - 0x1000),
                ("sh_link", 0x28, 0xffff_ffff),
                ("sh_name", 0, 0xffff_ffff),
                ("sh_type", 4, 0xffff_ffff),
            ] {
                let width = if at == 0 || at == 4 || at == 0x28 {
                    4
                } else {
                    8
                };
                let bytes = value.to_le_bytes();
                with(format!("{name}: {field} = {value:#x}"), &|b| {
                    Elf::put(b, h + at, &bytes[..width])
                });
            }
            // Its content: all ones, all zeros, and random bytes.
            let range = section.offset..(section.offset + section.size).min(len);
            if range.start < range.end && range.end - range.start < 1 << 20 {
                for (what, fill) in [("0xff", Some(0xffu8)), ("zeros", Some(0)), ("noise", None)] {
                    let noise: Vec<u8> = (0..range.len()).map(|_| rng.next() as u8).collect();
                    let range = range.clone();
                    with(format!("{name}: content {what}"), &|b| match fill {
                        Some(v) => b[range.clone()].fill(v),
                        None => b[range.clone()].copy_from_slice(&noise),
                    });
                }
            }
            // The unwind tables' own fields: encodings, counts, lengths.
            if name == ".eh_frame_hdr" || name == ".eh_frame" {
                for k in 0..plan.unwind_bytes.min(section.size) {
                    for v in [0x00u8, 0x7f, 0xff] {
                        let at = section.offset + k;
                        with(format!("{name}: byte {k} = {v:#x}"), &|b| b[at] = v);
                    }
                }
            }
        }
        // Bytes flipped at random: anywhere, and in the first page (headers and tables).
        for i in 0..plan.flips {
            let count = 1 + rng.below(16);
            let head = i % 2 == 0;
            let places: Vec<(usize, u8)> = (0..count)
                .map(|_| {
                    let span = if head { len.min(4096) } else { len };
                    (rng.below(span), 1 << rng.below(8))
                })
                .collect();
            with(format!("{count} bits flipped (seed {i})"), &|b| {
                for &(at, bit) in &places {
                    b[at] ^= bit;
                }
            });
        }
        out
    }
}

/// What is done to one file: the values its header's counts and offsets take (`LEN`: the
/// file's length less one), the sections aimed at (all: None), how many leading bytes of its
/// unwind tables are set to extremes, and how many random flips.
struct Plan {
    values: &'static [u64],
    sections: Option<&'static [&'static str]>,
    unwind_bytes: usize,
    flips: usize,
}

const LEN: u64 = 0x4c45_4e00;

/// Where the hostile mappings go (far from anything of this process's).
const BASE: u64 = 0x5000_0000_0000;

/// One hostile file through every third-party parser the `record` path calls on a target's
/// files, at their door: blazesym's symbols, object's sections and framehop's unwind tables
/// (added as the mapping the target's maps describe, and walked from inside it), and the
/// symbol lookup of libjvm. Says how long it took and what was found.
fn through_the_doors(name: &str, bytes: &[u8], exec: (u64, u64, u64), rng: &mut Rng) -> Seen {
    let started = std::time::Instant::now();
    let Ok(file) = SealedFile::from_bytes(bytes) else {
        // Empty: nothing to map, as the target could not either.
        return Seen {
            took: started.elapsed(),
            ..Seen::default()
        };
    };
    let file = std::sync::Arc::new(file);
    let (offset, address, size) = exec;
    let page = |v: u64| v & !0xfff;
    let start = BASE + page(address);
    let mapping = Mapping {
        start,
        end: start + (size + (address & 0xfff)).next_multiple_of(0x1000),
        offset: page(offset),
        path: name.to_string(),
        file: Some(file.clone()),
    };
    let inside: Vec<u64> = (0..8)
        .map(|_| offset + (rng.next() % size.max(1)))
        .chain([
            0,
            1,
            offset,
            offset + size / 2,
            bytes.len() as u64,
            u64::MAX / 2,
        ])
        .collect();
    let named = ElfSymbols::default()
        .names(&file, name, &inside)
        .map_or(0, |names| names.iter().flatten().count());
    let mut unwinder = NativeUnwinder::default();
    unwinder.add_mapping(&mapping);
    let stack: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
    let sp = 0x7ff0_0000_0000;
    for k in inside.iter().take(10) {
        let ip = mapping.start + (k % (mapping.end - mapping.start));
        let _ = unwinder.walk(ip, sp, sp + 64, &stack);
    }
    let wanted = [
        "JNI_CreateJavaVM",
        "_ZL15_init_completed",
        "gHotSpotVMStructs",
    ];
    let symbols = elf_symbols(name, bytes, BASE, &wanted).map_or(0, |s| s.len());
    Seen {
        took: started.elapsed(),
        named,
        symbols,
    }
}

/// What went through the doors for one file.
#[derive(Debug, Default)]
struct Seen {
    took: Duration,
    /// Places named by their symbol.
    named: usize,
    /// libjvm symbols found.
    symbols: usize,
}

/// Hostile ELF files (cut short, counts and offsets out of all proportion, tables pointing
/// anywhere, random flips; from a small library of the JDK's and from libjvm.so) go through
/// every third-party parser at its door: nothing panics past the door (a panic there is
/// caught and counted: this test would end at the first that is not), and no file takes
/// long.
#[test]
fn hostile_elf_files_cost_their_own_symbols_at_most() {
    let runtime = common::java(21);
    let lib = runtime.parent().unwrap().parent().unwrap().join("lib");
    let started = std::time::Instant::now();
    let panics_before = parser_guard::panics();
    let mut slowest = (Duration::ZERO, String::new());
    let mut count = 0;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Every mutation of a small library; the ones that matter most of libjvm.so (26 MB: its
    // header, unwind tables and symbol tables), which pinprof also reads for its symbols.
    let small = Plan {
        values: &[0, 1, 0xffff, LEN, u64::MAX - 0x40, u64::MAX],
        sections: None,
        unwind_bytes: 16,
        flips: 600,
    };
    let libjvm = Plan {
        values: &[0xffff, LEN, u64::MAX],
        sections: Some(&[".eh_frame_hdr", ".symtab", ".strtab", ".dynsym"]),
        unwind_bytes: 8,
        flips: 12,
    };
    for (file, plan) in [("libjli.so", small), ("server/libjvm.so", libjvm)] {
        let elf = Elf(std::fs::read(lib.join(file)).unwrap());
        let exec = elf.exec_segment();
        // The untouched file goes through and gives what it holds: the door itself costs
        // nothing.
        let seen = through_the_doors(&format!("/{file}"), &elf.0, exec, &mut rng);
        eprintln!("{file} untouched: {seen:?}");
        assert!(seen.named > 0, "{file}: {seen:?}");
        let libjvm = file.ends_with("libjvm.so");
        assert_eq!(seen.symbols, if libjvm { 3 } else { 0 }, "{file}");
        let file_started = std::time::Instant::now();
        for (what, bytes) in elf.mutants(&plan, &mut rng) {
            let name = format!("{file} ({what})");
            let before = parser_guard::panics();
            let took = through_the_doors(&name, &bytes, exec, &mut rng).took;
            if parser_guard::panics() > before {
                eprintln!("caught: {name}");
            }
            assert!(took < Duration::from_secs(20), "{name}: {took:?}");
            if took > slowest.0 {
                slowest = (took, name);
            }
            count += 1;
        }
        eprintln!("{file}: {:.1}s", file_started.elapsed().as_secs_f64());
    }
    let caught = parser_guard::panics() - panics_before;
    eprintln!(
        "{count} hostile ELF files in {:.1}s (slowest {:?}: {}); {caught} parser panics \
         caught at the door",
        started.elapsed().as_secs_f64(),
        slowest.0,
        slowest.1
    );
    if let Some(warning) = parser_guard::warning() {
        eprintln!("{warning}");
    }
    assert!(count > 1200, "{count} mutants");
    assert!(started.elapsed() < Duration::from_secs(600));
}
