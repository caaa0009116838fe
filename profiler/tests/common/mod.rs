//! Harness for the integration tests: real JVMs from the test runtimes, the real `pinprof`
//! binary, real BPF programs. Needs root (or CAP_BPF + CAP_PERFMON) and `cargo xtask setup`.
#![allow(dead_code)] // each test file uses its own part of the harness

pub mod counts;
pub mod fixture;
pub mod jfr;
pub mod jvm;
pub mod naps;
pub mod nobody;
pub mod terminal;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

pub use jvm::Jvm;
use serde_json::Value;

/// `java` of the JDK test runtime `major` (21 or 25). `cargo xtask test` installs the runtimes
/// and says where they are; it alone knows their versions.
pub fn java(major: u32) -> PathBuf {
    let var = format!("PINPROF_JAVA{major}");
    let java = std::env::var_os(&var)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{var} is not set: run the tests with `cargo xtask test`"));
    assert!(
        java.exists(),
        "{} is missing: run `cargo xtask test`",
        java.display()
    );
    java
}

/// The compiled Java workloads.
pub fn workloads() -> PathBuf {
    let dir = std::env::var_os("PINPROF_WORKLOADS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/java-workloads"));
    assert!(
        dir.join("Vt.class").exists(),
        "{} has no workloads: run `cargo xtask setup`",
        dir.display()
    );
    dir
}

pub fn start(major: u32, main: &str, args: &[&str]) -> Jvm {
    require_root();
    Jvm::start(&java(major), &workloads(), main, args).expect("start the workload JVM")
}

/// A workload on a virtual-thread scheduler of `parallelism` carriers.
pub fn start_vt(major: u32, parallelism: u32, main: &str, args: &[&str]) -> Jvm {
    require_root();
    let option = format!("-Djdk.virtualThreadScheduler.parallelism={parallelism}");
    Jvm::start_with(&java(major), &[&option], &workloads(), main, args)
        .expect("start the workload JVM")
}

/// A tool of the same JDK as `java(major)` (jcmd, jfr).
pub fn jdk_tool(major: u32, name: &str) -> PathBuf {
    java(major).with_file_name(name)
}

pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the integration tests load BPF programs: run them as root"
    );
}

/// The `pinprof` under test: the one cargo built with the tests, or the binary `PINPROF_BIN`
/// names (`cargo xtask test` runs the integration tests a second time against the static
/// binary of `cargo xtask dist`).
pub fn pinprof_bin() -> PathBuf {
    match std::env::var_os("PINPROF_BIN") {
        Some(bin) => {
            let bin = PathBuf::from(bin);
            assert!(
                bin.is_file(),
                "PINPROF_BIN={} is not a file: build it with `cargo xtask dist`",
                bin.display()
            );
            bin
        }
        None => PathBuf::from(env!("CARGO_BIN_EXE_pinprof")),
    }
}

pub fn pinprof() -> Command {
    Command::new(pinprof_bin())
}

/// A fresh path for a test's output files (pinprof never overwrites: an earlier run's file
/// is removed).
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pinprof-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// Runs `pinprof record` for `seconds` and returns the recording.
pub fn record(pid: u32, seconds: f64, name: &str) -> PathBuf {
    record_with(pid, seconds, name, &[])
}

/// `record` with more `pinprof record` options.
pub fn record_with(pid: u32, seconds: f64, name: &str, options: &[&str]) -> PathBuf {
    let out = scratch(name);
    let result = pinprof()
        .args([
            "record",
            "--quiet",
            "--pid",
            &pid.to_string(),
            "--duration",
            &seconds.to_string(),
            "--output",
        ])
        .arg(&out)
        .args(options)
        .output()
        .expect("run pinprof record");
    assert_ok(&result, "pinprof record");
    out
}

/// Starts `pinprof record` with no duration (it runs until stopped), stderr captured.
pub fn spawn_record(pid: u32, name: &str) -> (std::process::Child, PathBuf) {
    spawn_record_with(pid, name, &[])
}

/// `spawn_record` with more `pinprof record` options.
pub fn spawn_record_with(pid: u32, name: &str, options: &[&str]) -> (std::process::Child, PathBuf) {
    let out = scratch(name);
    let _ = std::fs::remove_file(&out);
    let child = pinprof()
        .args(["record", "--quiet", "--pid", &pid.to_string(), "--output"])
        .arg(&out)
        .args(options)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start pinprof record");
    // The file appears once the programs are attached: from then on the window is open.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !out.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(out.exists(), "pinprof record did not start within 15 s");
    (child, out)
}

/// Writes a line to a workload's standard input.
pub fn say(jvm: &mut Jvm, line: &str) {
    use std::io::Write as _;
    let stdin = jvm.child.stdin.as_mut().expect("the workload's stdin");
    writeln!(stdin, "{line}").expect("write to the workload");
}

/// Stops a recording started with `spawn_record` as a user would (Ctrl-C), and checks that
/// it ended well.
pub fn interrupt(recorder: std::process::Child) -> Output {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) };
    let output = recorder.wait_with_output().unwrap();
    assert_ok(&output, "pinprof record");
    output
}

pub fn report_json(recording: &Path) -> Value {
    let result = pinprof()
        .arg("report")
        .arg(recording)
        .args(["--format", "json", "--top", "50"])
        .output()
        .unwrap();
    assert_ok(&result, "pinprof report");
    let report = serde_json::from_slice(&result.stdout).expect("report is JSON");
    if let Err(why) = schema_errors(&report) {
        panic!("the report does not follow profiler/report.schema.json: {why}");
    }
    report
}

/// Whether a report follows the checked-in schema, as Python's `jsonschema` (set up by
/// `cargo xtask test`) reads both: Err says where it does not.
pub fn schema_errors(report: &Value) -> Result<(), String> {
    use std::io::Write as _;
    let path = std::env::var_os("PINPROF_PYTHONPATH")
        .expect("PINPROF_PYTHONPATH is not set: run the tests with `cargo xtask test`");
    let schema = concat!(env!("CARGO_MANIFEST_DIR"), "/report.schema.json");
    let script = "import json, sys, jsonschema\n\
                  schema = json.load(open(sys.argv[1]))\n\
                  jsonschema.Draft202012Validator.check_schema(schema)\n\
                  errors = list(jsonschema.Draft202012Validator(schema).iter_errors(json.load(sys.stdin)))\n\
                  for e in errors[:5]: print(list(e.absolute_path), e.message[:300])\n\
                  sys.exit(1 if errors else 0)";
    let mut child = Command::new("python3")
        .args(["-c", script, schema])
        .env("PYTHONPATH", path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run python3");
    let input = serde_json::to_vec(report).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    match out.status.code() {
        Some(0) => Ok(()),
        Some(1) => Err(String::from_utf8_lossy(&out.stdout).into_owned()),
        _ => panic!(
            "jsonschema could not run: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

pub fn assert_ok(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The thread row named `name` in a JSON report.
pub fn thread<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no thread {name} in the report"))
}

pub fn ns(v: &Value) -> f64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is not a count")) as f64
}

/// A JSON array of strings (frames, thread names).
pub fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

/// The threads the report says are carriers.
pub fn carrier_threads(report: &Value) -> Vec<&Value> {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "carrier")
        .collect()
}

/// `ours` within `tolerance` (a fraction) of `truth`, said either way.
pub fn assert_within(what: &str, ours: f64, truth: f64, tolerance: f64) {
    let error = (ours - truth).abs() / truth;
    eprintln!(
        "{what}: pinprof {ours:.2}, truth {truth:.2}, {:.1}% off",
        error * 100.0
    );
    assert!(
        truth > 0.0 && error <= tolerance,
        "{what}: pinprof {ours}, truth {truth}: {:.1}% off (tolerance {:.0}%)",
        error * 100.0,
        tolerance * 100.0
    );
}

/// How many waits the closing line of `pinprof record` says were lost because the kernel did
/// not show their end ("3 waits whose end the kernel did not show"): now and then (about one
/// recording in 25 of a churning target) the kernel does not run the programs at a thread's
/// switch back in, and pinprof counts and names that wait as lost.
pub fn missed_switch_ins(closing: &str) -> u64 {
    closing
        .split_once(" waits whose end the kernel did not show")
        .and_then(|(before, _)| before.rsplit([' ', '(', ',']).next()?.parse().ok())
        .unwrap_or(0)
}
