//! The process being profiled: checks that it can be profiled, and reads what it is from /proc.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::events::{RuntimeInfo, TargetInfo, ThreadCpu, ThreadName};

pub struct Target {
    pub pid: u32,
    process: procfs::process::Process,
}

impl Target {
    /// Opens a live process by PID, with errors a user can act on.
    pub fn open(pid: u32) -> Result<Self> {
        if pid == 0 {
            bail!("PID 0 is not a process");
        }
        let Ok(process) = procfs::process::Process::new(pid as i32) else {
            bail!("no process with PID {pid}");
        };
        let Ok(status) = process.status() else {
            bail!("no process with PID {pid} (it may have just exited)");
        };
        if status.tgid != pid as i32 {
            bail!(
                "{pid} is a thread of process {}; pass the process ID: --pid {}",
                status.tgid,
                status.tgid
            );
        }
        // Kernel threads have no memory map of their own.
        if process.exe().is_err() && process.maps().map(|m| m.0.is_empty()).unwrap_or(true) {
            bail!(
                "PID {pid} ({}) is a kernel thread or cannot be inspected",
                status.name
            );
        }
        if is_zombie(&process) {
            bail!("process {pid} ({}) has already exited", status.name);
        }
        Ok(Self { pid, process })
    }

    /// Whether the process still runs (a zombie does not).
    pub fn is_alive(&self) -> bool {
        Path::new(&format!("/proc/{}", self.pid)).exists() && !is_zombie(&self.process)
    }

    pub fn info(&self) -> TargetInfo {
        let command = self.process.stat().map(|s| s.comm).unwrap_or_default();
        let cmdline = self.process.cmdline().unwrap_or_default();
        let runtime = self.detect_runtime(&cmdline);
        TargetInfo {
            pid: self.pid,
            command,
            cmdline,
            runtime,
        }
    }

    /// The threads alive now, with their names.
    pub fn threads(&self) -> Vec<ThreadName> {
        let Ok(tasks) = self.process.tasks() else {
            return Vec::new();
        };
        tasks
            .flatten()
            .filter_map(|task| {
                let name = task.stat().ok()?.comm;
                Some(ThreadName {
                    tid: task.tid as u32,
                    name,
                })
            })
            .collect()
    }

    /// The name of one thread, if it is still there to ask.
    pub fn thread_name(&self, tid: u32) -> Option<String> {
        let comm = std::fs::read_to_string(format!("/proc/{}/task/{tid}/comm", self.pid)).ok()?;
        Some(comm.trim_end().to_string())
    }

    /// Every thread's scheduler account now.
    pub fn cpu_times(&self) -> Vec<ThreadCpu> {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else {
            return Vec::new();
        };
        tasks
            .flatten()
            .filter_map(|entry| {
                let tid: u32 = entry.file_name().to_str()?.parse().ok()?;
                let text = std::fs::read_to_string(entry.path().join("schedstat")).ok()?;
                let mut fields = text.split_whitespace().map(|f| f.parse::<u64>());
                let run_ns = fields.next()?.ok()?;
                let wait_ns = fields.next()?.ok()?;
                Some(ThreadCpu {
                    tid,
                    run_ns,
                    wait_ns,
                })
            })
            .collect()
    }

    /// The user that owns the process (files it writes are trusted only if they are its own).
    pub fn uid(&self) -> Option<u32> {
        self.process.uid().ok()
    }

    /// A path inside the target's mount namespace.
    pub fn root_path(&self, path: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{path}", self.pid))
    }

    fn detect_runtime(&self, cmdline: &[String]) -> Option<RuntimeInfo> {
        let maps = self.process.maps().ok()?;
        let libjvm = maps.iter().find_map(|m| match &m.pathname {
            procfs::process::MMapPath::Path(p) if p.ends_with("libjvm.so") => Some(p.clone()),
            _ => None,
        })?;
        // <java.home>/lib/server/libjvm.so; <java.home>/release names the version.
        let home = libjvm.parent()?.parent()?.parent()?;
        let release = self.root_path(&home.join("release").to_string_lossy());
        let version = std::fs::read_to_string(release).ok().and_then(|text| {
            text.lines().find_map(|l| {
                l.strip_prefix("JAVA_VERSION=")
                    .map(|v| v.trim_matches('"').to_string())
            })
        });
        Some(RuntimeInfo {
            kind: "hotspot".into(),
            version,
            parallelism: scheduler_parallelism(cmdline).or_else(|| self.cpus_allowed()),
            max_pool_size: None,
            libjvm: Some(libjvm.to_string_lossy().into_owned()),
        })
    }

    /// CPUs the process may run on: the JVM's default virtual-thread parallelism.
    fn cpus_allowed(&self) -> Option<u32> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
        Some(count_cpu_list(list.trim()))
    }
}

fn is_zombie(process: &procfs::process::Process) -> bool {
    matches!(process.stat().map(|s| s.state), Ok('Z' | 'X') | Err(_))
}

/// `-Djdk.virtualThreadScheduler.parallelism=N` on the command line, if given.
fn scheduler_parallelism(cmdline: &[String]) -> Option<u32> {
    cmdline
        .iter()
        .find_map(|a| a.strip_prefix("-Djdk.virtualThreadScheduler.parallelism="))
        .and_then(|v| v.parse().ok())
}

/// Counts the CPUs in a list such as `0-3,8,10-11`.
fn count_cpu_list(list: &str) -> u32 {
    list.split(',')
        .filter(|part| !part.is_empty())
        .map(|part| match part.split_once('-') {
            Some((a, b)) => match (a.parse::<u32>(), b.parse::<u32>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => u32::from(part.parse::<u32>().is_ok()),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0-1"), 2);
        assert_eq!(count_cpu_list("0-3,8,10-11"), 7);
        assert_eq!(count_cpu_list("5"), 1);
        assert_eq!(count_cpu_list(""), 0);
    }

    #[test]
    fn parallelism_flag() {
        let args = ["java", "-Djdk.virtualThreadScheduler.parallelism=3", "Demo"].map(String::from);
        assert_eq!(scheduler_parallelism(&args), Some(3));
        assert_eq!(scheduler_parallelism(&["java".to_string()]), None);
    }

    #[test]
    fn wrong_pids_are_explained() {
        assert!(Target::open(0).err().unwrap().to_string().contains("PID 0"));
        // PIDs are capped well below this.
        let err = Target::open(999_999_999).err().unwrap().to_string();
        assert!(err.contains("no process with PID 999999999"), "{err}");
        // PID 2 is kthreadd.
        if let Err(e) = Target::open(2) {
            assert!(e.to_string().contains("kernel thread"), "{e}");
        }
    }
}
