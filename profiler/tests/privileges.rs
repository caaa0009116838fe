//! pinprof without root: a JVM of one unprivileged user (nobody) recorded by a second
//! unprivileged uid that holds only the capabilities pinprof needs, and what happens when one
//! of them is missing. util-linux's `setpriv` switches the uid and sets the capabilities
//! (inheritable and ambient, so that they survive the exec of pinprof).
//!
//! The minimal set for `record` and `top` (measured on Linux 6.18, perf_event_paranoid 2,
//! tracefs mounted 0700 root):
//! - CAP_BPF and CAP_PERFMON: load the programs and maps, attach the tracepoints;
//! - CAP_DAC_READ_SEARCH: read the tracepoints' `format` and `id` files in tracefs (root's,
//!   mode 0700), and open the target's `/proc/PID/mem` (mode 0600, the JVM user's);
//! - CAP_SYS_PTRACE: the ptrace access check of `/proc/PID/mem`, `/proc/PID/root` (libjvm.so's
//!   symbols, the JVM's /tmp), `/proc/PID/cwd`, `/proc/PID/exe`;
//! - CAP_SYSLOG: real addresses in `/proc/kallsyms`, so kernel frames have names.
//!
//! The attach protocol cannot work for a third uid whatever its capabilities (HotSpot talks only
//! to root or its own euid), so it is not in the set; pinprof then goes on without it.
//!
//! Then the other side: a JVM whose owner is hostile plants symlinks where pinprof, as root,
//! creates files (the attach trigger in the JVM's working directory, outputs in a shared
//! directory, their temporary names); a root-owned file they point to must come out as it went
//! in, and pinprof attaches another way or says why not.

mod common;

use std::{
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use common::*;

/// The JVM's user and group: nobody / nogroup.
const JVM_ID: u32 = 65534;
/// pinprof's uid and gid: neither root nor the JVM's.
const PINPROF_ID: u32 = 65533;
/// What `record` (and `top`) needs, nothing more.
const RECORD_CAPS: [&str; 5] = ["bpf", "perfmon", "dac_read_search", "sys_ptrace", "syslog"];
/// What `jvm` needs: it reads the JVM's memory and loads no BPF program.
const JVM_CAPS: [&str; 2] = ["dac_read_search", "sys_ptrace"];

/// Capability numbers (linux/capability.h) of the names used here.
fn cap_number(name: &str) -> u32 {
    match name {
        "chown" => 0,
        "dac_override" => 1,
        "dac_read_search" => 2,
        "fowner" => 3,
        "kill" => 5,
        "sys_ptrace" => 19,
        "sys_admin" => 21,
        "syslog" => 34,
        "perfmon" => 38,
        "bpf" => 39,
        _ => panic!("unknown capability {name}"),
    }
}

/// Everything the two unprivileged users need to reach, in a fresh directory of root's
/// (mode 0755) under the system's temporary directory: the repository, the target directory
/// and the JDK cache may sit under /root, which nobody else may enter. Removed when dropped.
struct Stage {
    dir: PathBuf,
}

impl Stage {
    fn new(name: &str) -> Self {
        require_root();
        let dir =
            std::env::temp_dir().join(format!("pinprof-privileges-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let stage = Self { dir };
        stage.chmod(&stage.dir, 0o755);
        // The JDK runtime (bin/java's grandparent) and the compiled workloads, readable by all.
        let java = java(21);
        let runtime = java.parent().and_then(Path::parent).unwrap();
        copy_tree(runtime, &stage.jdk());
        copy_tree(&workloads(), &stage.classes());
        // pinprof's own binary (the BPF objects are inside it).
        std::fs::copy(common::pinprof_bin(), stage.pinprof()).unwrap();
        stage.chmod(&stage.pinprof(), 0o755);
        // The JVM's working directory belongs to its user; pinprof's output directory to
        // pinprof's user, closed to others.
        for (dir, owner, mode) in [
            (stage.jvm_home(), JVM_ID, 0o755),
            (stage.out(), PINPROF_ID, 0o700),
        ] {
            std::fs::create_dir(&dir).unwrap();
            std::os::unix::fs::chown(&dir, Some(owner), Some(owner)).unwrap();
            stage.chmod(&dir, mode);
        }
        stage
    }

    fn chmod(&self, path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn jdk(&self) -> PathBuf {
        self.dir.join("jdk")
    }

    fn classes(&self) -> PathBuf {
        self.dir.join("classes")
    }

    fn pinprof(&self) -> PathBuf {
        self.dir.join("pinprof")
    }

    fn jvm_home(&self) -> PathBuf {
        self.dir.join("jvm-home")
    }

    fn out(&self) -> PathBuf {
        self.dir.join("out")
    }

    /// The names in pinprof's output directory (temporary files included).
    fn outputs(&self) -> Vec<String> {
        std::fs::read_dir(self.out())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// `PinnedSleep` on JDK 21 as nobody, from a working directory of its own, on 2 carriers:
    /// 8 virtual threads that sleep 20 ms inside `synchronized`, so the carriers are pinned
    /// nearly all the time.
    fn start_jvm(&self) -> Jvm {
        let mut command = Command::new("setpriv");
        command
            .args(ids(JVM_ID))
            .arg("--")
            .arg(self.jdk().join("bin/java"))
            .arg("-Djdk.virtualThreadScheduler.parallelism=2")
            .arg("-cp")
            .arg(self.classes())
            .arg("PinnedSleep")
            .current_dir(self.jvm_home());
        let jvm = Jvm::spawn(command).expect("the JVM started as nobody (setpriv, util-linux)");
        let status = std::fs::metadata(format!("/proc/{}", jvm.pid)).unwrap();
        assert_eq!(status.uid(), JVM_ID, "the JVM runs as nobody");
        // An attach socket another test's JVM of the same pid left behind (pids wrap) is
        // not this JVM's: pinprof would rightly refuse it, and these tests be about nothing.
        let stale = format!("/tmp/.java_pid{}", jvm.pid);
        if std::fs::symlink_metadata(&stale).is_ok_and(|m| m.uid() != JVM_ID) {
            std::fs::remove_file(&stale).unwrap();
        }
        jvm
    }

    /// Runs this test's pinprof as `PINPROF_ID` with exactly `caps`, in its output directory;
    /// the output and how long it took.
    fn pinprof_as(&self, caps: &[&str], args: &[&str]) -> (Output, Duration) {
        let started = Instant::now();
        let output = as_pinprof_user(caps)
            .arg(self.pinprof())
            .args(args)
            .current_dir(self.out())
            .stdin(Stdio::null())
            .output()
            .expect("run setpriv (util-linux)");
        (output, started.elapsed())
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `cp -a`, then readable (and directories enterable) by everyone.
fn copy_tree(from: &Path, to: &Path) {
    let copied = Command::new("cp").arg("-a").arg(from).arg(to).status();
    assert!(copied.unwrap().success(), "cp -a {}", from.display());
    let opened = Command::new("chmod").arg("-R").arg("a+rX").arg(to).status();
    assert!(opened.unwrap().success(), "chmod -R a+rX {}", to.display());
}

/// setpriv's arguments for uid and gid `id` with no supplementary groups.
fn ids(id: u32) -> [String; 3] {
    [
        format!("--reuid={id}"),
        format!("--regid={id}"),
        "--clear-groups".into(),
    ]
}

/// `setpriv` as `PINPROF_ID` with `caps` (inheritable and ambient, hence permitted and
/// effective in the program it runs), ready for the program and its arguments.
fn as_pinprof_user(caps: &[&str]) -> Command {
    let set: String = std::iter::once("-all".to_string())
        .chain(caps.iter().map(|c| format!("+{c}")))
        .collect::<Vec<_>>()
        .join(",");
    let mut command = Command::new("setpriv");
    command
        .args(ids(PINPROF_ID))
        .arg(format!("--inh-caps={set}"))
        .arg(format!("--ambient-caps={set}"))
        .arg("--");
    command
}

/// Checks that setpriv really gives a program `PINPROF_ID` and exactly `caps`.
fn assert_credentials(caps: &[&str]) {
    let output = as_pinprof_user(caps)
        .args(["cat", "/proc/self/status"])
        .output()
        .expect("run setpriv (util-linux)");
    assert_ok(&output, "setpriv cat /proc/self/status");
    let status = String::from_utf8_lossy(&output.stdout);
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {status}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    let id = PINPROF_ID.to_string();
    assert_eq!(field("Uid:"), [id.as_str(); 4], "{status}");
    assert_eq!(field("Gid:"), [id.as_str(); 4], "{status}");
    let wanted = caps.iter().fold(0u64, |m, c| m | 1 << cap_number(c));
    let effective = u64::from_str_radix(field("CapEff:")[0], 16).unwrap();
    assert_eq!(effective, wanted, "effective capabilities {effective:#x}");
}

/// The report of a recording in the stage's output directory (pinprof's user's, 0700). Root
/// reads recordings without its capabilities, so the test (root, with them) copies it to a
/// directory of root's first.
fn report_of(recording: &Path) -> serde_json::Value {
    let name = recording.file_name().unwrap().to_string_lossy();
    let copy = scratch(&format!("privileges-{name}"));
    std::fs::copy(recording, &copy).unwrap();
    report_json(&copy)
}

/// All but `dropped` of `caps`.
fn without<'a>(caps: &[&'a str], dropped: &str) -> Vec<&'a str> {
    assert!(caps.contains(&dropped), "{dropped} is not in {caps:?}");
    caps.iter().copied().filter(|c| *c != dropped).collect()
}

/// The lines the JVM printed so far.
fn printed(jvm: &Jvm) -> Vec<String> {
    jvm.lines.try_iter().collect()
}

#[test]
fn records_another_users_jvm_with_only_the_minimal_capabilities() {
    let stage = Stage::new("minimal");
    let mut jvm = stage.start_jvm();
    let pid = jvm.pid.to_string();
    assert_credentials(&RECORD_CAPS);
    assert_credentials(&JVM_CAPS);
    jvm.wait_for("sleeps ", Duration::from_secs(10)).unwrap();

    // `jvm` needs no BPF: the JVM's memory and its libjvm.so are enough.
    let (output, took) = stage.pinprof_as(&JVM_CAPS, &["jvm", "--pid", &pid]);
    assert_ok(&output, "pinprof jvm");
    let text = String::from_utf8_lossy(&output.stdout);
    eprintln!("pinprof jvm ({took:?}):\n{text}");
    assert!(text.contains("HotSpot 21."), "{text}");
    let carriers = text
        .lines()
        .filter(|l| l.contains("ForkJoinPool-1-worker-"))
        .count();
    assert!(carriers >= 2, "two carriers in:\n{text}");
    assert!(text.contains("virtual thread #"), "{text}");

    // `record` as the user would type it (the attach protocol is tried and, as it cannot
    // work for a third uid, given up without harm).
    let file = stage.out().join("x.pinrec");
    // (the output path is relative to pinprof's working directory, its output directory)
    let args = [
        "record",
        "--quiet",
        "--pid",
        &pid,
        "--duration",
        "3",
        "--output",
        "x.pinrec",
    ];
    let (output, took) = stage.pinprof_as(&RECORD_CAPS, &args);
    assert_ok(&output, "pinprof record");
    eprintln!(
        "pinprof record ({took:?}): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(took < Duration::from_secs(15), "record took {took:?}");
    let meta = std::fs::metadata(&file).expect("the recording");
    assert_eq!(meta.uid(), PINPROF_ID, "the recording is pinprof's user's");
    assert_eq!(stage.outputs(), ["x.pinrec"], "nothing else left behind");

    let report = report_of(&file);
    assert_eq!(report["target"]["runtime"]["kind"], "hotspot");
    assert!(
        report["target"]["runtime"]["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("21.")),
        "the JVM's version, read from its libjvm.so: {}",
        report["target"]
    );
    let carriers = carrier_threads(&report);
    assert!(carriers.len() >= 2, "{} carriers", carriers.len());
    for carrier in &carriers {
        assert!(
            carrier["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("ForkJoinPool-1-worker-")),
            "{carrier}"
        );
    }
    assert!(report["capture"]["java_stacks"].as_u64().unwrap() > 0);

    // Pinned parks of the workload's synchronized sleep, with their Java frames, and
    // kernel frames named from kallsyms.
    let pinned = report["pinned"]["events"].as_u64().unwrap();
    assert!(pinned >= 30, "{pinned} pinned events in 3 s");
    let sites = report["pinned"]["sites"].as_array().unwrap();
    let site = sites
        .iter()
        .find(|s| strings(&s["frames"]).contains(&"PinnedSleep$Ledger.append"))
        .unwrap_or_else(|| panic!("no pinned site in PinnedSleep$Ledger.append: {sites:#?}"));
    assert_eq!(site["reason"], "monitor");
    assert_eq!(site["operation"], "park");
    let events = site["events"].as_u64().unwrap();
    assert!(events >= 30, "{events} pinned parks in Ledger.append");
    let total = ns(&site["total_ns"]);
    assert!(total >= 1e9, "{total} ns pinned in Ledger.append");
    let frames = strings(&site["frames"]);
    let kinds = strings(&site["frame_kinds"]);
    let kernel: Vec<&str> = frames
        .iter()
        .zip(&kinds)
        .filter(|(_, k)| **k == "kernel")
        .map(|(f, _)| *f)
        .collect();
    assert!(!kernel.is_empty(), "kernel frames in {frames:?}");
    assert!(
        kernel.iter().all(|f| !f.starts_with('[')),
        "kernel frames named (CAP_SYSLOG): {kernel:?}"
    );
    assert!(kernel.contains(&"schedule"), "{kernel:?}");

    // The JVM was not disturbed: no thread dump (a SIGQUIT whose trigger file the JVM did not
    // accept prints one), no trigger file left where the JVM looks for it.
    let lines = printed(&jvm);
    assert!(
        !lines.iter().any(|l| l.starts_with("Full thread dump")),
        "pinprof made the JVM print a thread dump"
    );
    let trigger = format!(".attach_pid{pid}");
    for dir in [stage.jvm_home(), PathBuf::from("/tmp")] {
        assert!(!dir.join(&trigger).exists(), "{trigger} left in {dir:?}");
    }
}

#[test]
fn a_missing_capability_fails_fast_and_says_what() {
    let stage = Stage::new("missing");
    let jvm = stage.start_jvm();
    let pid = jvm.pid.to_string();
    // A long recording: a refusal must come at once, not after it.
    let record = [
        "record",
        "--quiet",
        "--pid",
        &pid,
        "--duration",
        "30",
        "--output",
        "x.pinrec",
    ];

    let refused = |caps: &[&str], what: &str| -> String {
        assert_credentials(caps);
        let (output, took) = stage.pinprof_as(caps, &record);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        eprintln!("{what}: {} in {took:?}: {stderr}", output.status);
        assert!(!output.status.success(), "{what}: record succeeded");
        assert!(
            took < Duration::from_secs(5),
            "{what}: refused after {took:?}"
        );
        assert_eq!(stage.outputs(), Vec::<String>::new(), "{what}: files left");
        stderr
    };

    // Without either BPF capability pinprof refuses before touching anything, and says
    // which capabilities it needs.
    for dropped in ["bpf", "perfmon"] {
        let stderr = refused(&without(&RECORD_CAPS, dropped), dropped);
        assert!(
            stderr.contains("CAP_BPF and CAP_PERFMON"),
            "without {dropped}: {stderr}"
        );
    }
    // Without CAP_DAC_READ_SEARCH tracefs (root's, 0700) cannot be read. (pinprof says tracefs
    // is not mounted, which it is: it cannot tell the two apart yet.)
    let stderr = refused(&without(&RECORD_CAPS, "dac_read_search"), "dac_read_search");
    assert!(stderr.contains("tracefs"), "{stderr}");

    // `jvm` without CAP_SYS_PTRACE cannot look into the JVM at all.
    let caps = without(&JVM_CAPS, "sys_ptrace");
    assert_credentials(&caps);
    let (output, took) = stage.pinprof_as(&caps, &["jvm", "--pid", &pid]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!(
        "jvm without sys_ptrace: {} in {took:?}: {stderr}",
        output.status
    );
    assert!(!output.status.success(), "jvm without sys_ptrace succeeded");
    assert!(took < Duration::from_secs(5), "refused after {took:?}");
    // It names the process and the capability it lacks, and takes it for no kernel thread.
    assert!(stderr.contains(&pid), "{stderr}");
    assert!(stderr.contains("without CAP_SYS_PTRACE"), "{stderr}");
    assert!(!stderr.contains("kernel thread"), "{stderr}");
    // `jvm` without CAP_DAC_READ_SEARCH cannot open the JVM's memory.
    let caps = without(&JVM_CAPS, "dac_read_search");
    assert_credentials(&caps);
    let (output, _) = stage.pinprof_as(&caps, &["jvm", "--pid", &pid]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "jvm without dac_read_search succeeded"
    );
    assert!(
        stderr.contains(&format!("cannot read the memory of process {pid}")),
        "{stderr}"
    );

    // `record` without CAP_SYS_PTRACE still records the threads from the kernel, but without
    // the Java view, and says why in the recording.
    let caps = without(&RECORD_CAPS, "sys_ptrace");
    assert_credentials(&caps);
    let short = [
        "record",
        "--quiet",
        "--pid",
        &pid,
        "--duration",
        "1",
        "--output",
        "np.pinrec",
    ];
    let (output, _) = stage.pinprof_as(&caps, &short);
    assert_ok(&output, "pinprof record without sys_ptrace");
    let report = report_of(&stage.out().join("np.pinrec"));
    let warnings = report["capture"]["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("cannot read the JVM's internals")),
        "{warnings:?}"
    );
    assert_eq!(report["pinned"]["events"], 0);
    assert!(carrier_threads(&report).is_empty());
    assert!(report["threads"].as_array().unwrap().len() > 5);
    drop(jvm);
}

// A JVM whose owner is hostile: what it plants where pinprof (as root) creates files.

/// A root-owned 0600 file that must come out of every test as it went in (think /etc/shadow).
fn precious(stage: &Stage) -> PathBuf {
    let path = stage.dir.join("precious");
    std::fs::write(&path, b"root:$6$secret\n").unwrap();
    stage.chmod(&path, 0o600);
    path
}

fn assert_untouched(path: &Path) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), b"root:$6$secret\n", "content");
    assert_eq!((meta.uid(), meta.gid()), (0, 0), "owner");
    assert_eq!(meta.mode() & 0o7777, 0o600, "mode");
}

/// A symlink owned by the JVM's user, as that user would plant it.
fn plant(link: &Path, to: &Path) {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(to, link).unwrap();
    std::os::unix::fs::lchown(link, Some(JVM_ID), Some(JVM_ID)).unwrap();
}

/// pinprof as root (the administrator the JVM's owner hopes to fool).
fn pinprof_as_root(stage: &Stage, args: &[&str]) -> Output {
    Command::new(stage.pinprof())
        .args(args)
        .current_dir(stage.out())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `pinprof record` as root for `seconds`, into `out`.
fn record_as_root(stage: &Stage, pid: &str, seconds: &str, out: &Path) -> Output {
    let out = out.to_str().unwrap();
    let args = ["record", "--quiet", "--pid", pid, "--duration", seconds];
    pinprof_as_root(stage, &[&args[..], &["--output", out]].concat())
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn a_planted_attach_trigger_link_reaches_no_root_file() {
    let stage = Stage::new("trigger");
    let precious = precious(&stage);
    let jvm = stage.start_jvm();
    let pid = jvm.pid.to_string();
    let name = format!(".attach_pid{pid}");
    let in_cwd = stage.jvm_home().join(&name);
    let in_tmp = Path::new("/tmp").join(&name);
    plant(&in_cwd, &precious);

    // The working directory's name is taken: pinprof makes its trigger in /tmp instead, and
    // the JVM answers.
    let jvm_view = pinprof_as_root(&stage, &["jvm", "--pid", &pid]);
    assert_ok(&jvm_view, "pinprof jvm");
    let said = String::from_utf8_lossy(&jvm_view.stdout);
    assert!(said.contains("parallelism: 2 (set in the JVM)"), "{said}");
    assert_untouched(&precious);
    let first = record_as_root(&stage, &pid, "2", &stage.out().join("trigger.pinrec"));
    assert_ok(&first, "pinprof record");
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        !stderr.contains("scheduler settings"),
        "attach failed: {stderr}"
    );
    assert_untouched(&precious);
    // The planted link is the JVM owner's: left as it is. Ours is gone.
    assert!(std::fs::symlink_metadata(&in_cwd).unwrap().is_symlink());
    assert!(!in_tmp.exists(), "pinprof's trigger was left behind");

    // A JVM whose listener has not started yet, both places taken: no trigger, no signal,
    // and the recording says why.
    drop(jvm);
    let jvm = stage.start_jvm();
    let pid = jvm.pid.to_string();
    let name = format!(".attach_pid{pid}");
    let in_tmp = Path::new("/tmp").join(&name);
    plant(&stage.jvm_home().join(&name), &precious);
    plant(&in_tmp, &precious);
    let out = stage.out().join("both.pinrec");
    let both = record_as_root(&stage, &pid, "1", &out);
    let _ = std::fs::remove_file(&in_tmp);
    assert_ok(&both, "pinprof record");
    let stderr = String::from_utf8_lossy(&both.stderr);
    assert!(
        stderr.contains(&format!("already has a {name} that pinprof did not make")),
        "{stderr}"
    );
    assert_untouched(&precious);
    let report = report_of(&out);
    assert!(
        report["pinned"]["events"].as_u64().unwrap() > 10,
        "recorded all the same"
    );
    // No thread dump came out of the JVM: it was never signalled.
    assert!(
        !printed(&jvm).iter().any(|l| l.contains("Full thread dump")),
        "the JVM was signalled"
    );
}

#[test]
fn planted_output_links_are_refused_never_followed() {
    let stage = Stage::new("outputs");
    let precious = precious(&stage);
    let jvm = stage.start_jvm();
    let pid = jvm.pid.to_string();
    let dir = stage.out();
    // pinprof's output directory is one the JVM's owner can write to, as /tmp is.
    stage.chmod(&dir, 0o1777);
    let record = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "record",
            "--quiet",
            "--no-attach",
            "--pid",
            &pid,
            "--duration",
            "1",
        ];
        args.extend(extra);
        args.extend(["--output", out.to_str().unwrap()]);
        pinprof_as_root(&stage, &args)
    };

    // A link at the output: refused, with --force too; neither followed nor replaced.
    let out = dir.join("shop.pinrec");
    plant(&out, &precious);
    for extra in [&[][..], &["--force"][..]] {
        let refused = record(&out, extra);
        assert!(!refused.status.success());
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(said.contains("is a symbolic link"), "{said}");
        assert_untouched(&precious);
        assert!(std::fs::symlink_metadata(&out).unwrap().is_symlink());
    }
    // A regular file there is replaced with --force, by a new 0600 file.
    std::fs::remove_file(&out).unwrap();
    std::fs::write(&out, b"old").unwrap();
    assert_ok(&record(&out, &["--force"]), "pinprof record --force");
    assert_eq!(mode_of(&out), 0o600, "recordings are 0600");
    assert!(report_json(&out)["pinned"]["events"].as_u64().unwrap() > 0);

    // A link at the temporary name: another name is taken, the output is made all the same.
    let out = dir.join("temp.pinrec");
    plant(&dir.join(".temp.pinrec.pinprof.tmp"), &precious);
    assert_ok(&record(&out, &[]), "pinprof record");
    assert_untouched(&precious);
    assert_eq!(mode_of(&out), 0o600);
    assert!(report_json(&out)["pinned"]["events"].as_u64().unwrap() > 0);

    // The same for a flamegraph: a link at the SVG is refused, one at its temporary name
    // passed by.
    let svg = dir.join("shop.svg");
    plant(&svg, &precious);
    plant(&dir.join(".shop.svg.pinprof.tmp"), &precious);
    let graph = |svg: &Path| {
        let args = ["flamegraph", out.to_str().unwrap(), "--output"];
        pinprof_as_root(&stage, &[&args[..], &[svg.to_str().unwrap()]].concat())
    };
    let refused = graph(&svg);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("is a symbolic link"), "{said}");
    assert_untouched(&precious);
    std::fs::remove_file(&svg).unwrap();
    assert_ok(&graph(&svg), "pinprof flamegraph");
    assert_untouched(&precious);
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<?xml"));
    assert_eq!(mode_of(&svg), 0o600, "SVGs are 0600");
}

/// An installed pinprof may hold CAP_DAC_READ_SEARCH for everyone who runs it; reading a
/// recording needs none, so it must not read a 0600 recording of someone else's with it.
#[test]
fn reading_a_recording_takes_no_capability() {
    let stage = Stage::new("readers");
    // A root 0600 recording, as pinprof writes them.
    let recording = stage.dir.join("root.pinrec");
    let out = Command::new(stage.pinprof())
        .args(["record", "--quiet", "--duration", "0.5", "--pid"])
        .arg(std::process::id().to_string())
        .arg("--output")
        .arg(&recording)
        .output()
        .unwrap();
    assert_ok(&out, "pinprof record");
    assert_eq!(mode_of(&recording), 0o600);
    let path = recording.to_str().unwrap();
    let svg = stage.out().join("x.svg");
    for args in [
        vec!["report", path],
        vec!["flamegraph", path, "--output", svg.to_str().unwrap()],
    ] {
        let (output, _) = stage.pinprof_as(&RECORD_CAPS, &args);
        assert!(!output.status.success(), "{args:?} read a root 0600 file");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(said.contains("Permission denied"), "{args:?}: {said}");
    }
    assert!(!svg.exists());
}
