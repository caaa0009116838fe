//! A workload JVM under test: started from the compiled classes, its stdout read line by line,
//! killed when dropped. Shared by the integration tests and by xtask (demo, bench).

use std::{
    io::{BufRead as _, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

/// A running workload JVM; killed when dropped.
pub struct Jvm {
    pub child: Child,
    pub pid: u32,
    pub lines: mpsc::Receiver<String>,
}

impl Jvm {
    pub fn start(java: &Path, classes: &Path, main: &str, args: &[&str]) -> Result<Self> {
        Self::start_with(java, &[], classes, main, args)
    }

    /// Like `start`, with JVM options (`-D...`) before the main class.
    pub fn start_with(
        java: &Path,
        options: &[&str],
        classes: &Path,
        main: &str,
        args: &[&str],
    ) -> Result<Self> {
        let mut command = Command::new(java);
        command
            .args(options)
            .arg("-cp")
            .arg(classes)
            .arg(main)
            .args(args);
        Self::spawn(command).with_context(|| format!("cannot start {}", java.display()))
    }

    /// Starts a workload from a command of the caller's (another user, another directory):
    /// its stdin and stdout piped, ready once it prints `ready <pid>`.
    pub fn spawn(mut command: Command) -> Result<Self> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot run {command:?}"))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut jvm = Self {
            child,
            pid: 0,
            lines,
        };
        let ready = jvm.wait_for("ready ", Duration::from_secs(30))?;
        jvm.pid = ready.trim_start_matches("ready ").trim().parse()?;
        Ok(jvm)
    }

    pub fn wait_for(&mut self, prefix: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return Ok(line),
                Ok(_) => {}
                Err(_) => bail!("the JVM did not print '{prefix}...' within {timeout:?}"),
            }
        }
    }
}

impl Jvm {
    /// The lines the JVM prints up to (not with) `end`, within `timeout`. (The tests use it;
    /// xtask, which shares this file, does not.)
    #[allow(dead_code)]
    pub fn lines_until(&mut self, end: &str, timeout: Duration) -> Result<Vec<String>> {
        let deadline = Instant::now() + timeout;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line == end => return Ok(lines),
                Ok(line) => lines.push(line),
                Err(_) => bail!("the JVM did not print '{end}' within {timeout:?}"),
            }
        }
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Killed, it leaves its attach socket behind: a later JVM given the same pid (pids
        // wrap quickly on a test machine) would find it there and be refused attach.
        let _ = std::fs::remove_file(format!("/tmp/.java_pid{}", self.pid));
    }
}
