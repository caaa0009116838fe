//! The process being profiled: checks that it can be profiled, and reads what it is from /proc.

use anyhow::{Result, bail};

use crate::{
    events::{RuntimeInfo, TargetInfo, ThreadCpu, ThreadName},
    process::Process,
    safe_fs::{Expect, Owner, TargetRoot, read_target_file},
};

pub struct Target {
    pub pid: u32,
    /// The process attached to, by identity: what is read of it is read of it alone.
    identity: Process,
    /// The `procfs` crate's view, checked to be the same process.
    process: procfs::process::Process,
}

impl Target {
    /// Opens a live process by PID, with errors a user can act on.
    pub fn open(pid: u32) -> Result<Self> {
        if pid == 0 {
            bail!("PID 0 is not a process");
        }
        // By number first, for messages only (a thread's id, a kernel thread).
        let Ok(probe) = procfs::process::Process::new(pid as i32) else {
            bail!("no process with PID {pid}");
        };
        let Ok(status) = probe.status() else {
            bail!("no process with PID {pid} (it may have just exited)");
        };
        if status.tgid != pid as i32 {
            bail!(
                "{pid} is a thread of process {}; pass the process ID: --pid {}",
                status.tgid,
                status.tgid
            );
        }
        // From here on, this process and no other, whatever its pid becomes.
        let identity = Process::attach(pid)?;
        let process = identity
            .procfs()
            .map_err(|e| anyhow::anyhow!("cannot read process {pid}: {e}"))?;
        // Kernel threads have no memory map of their own.
        let executable = crate::procmaps::Maps::open(&identity).and_then(|mut m| m.executable(1));
        if identity.read_link("exe").is_err() && executable.map_or(true, |l| l.vmas.is_empty()) {
            bail!("{}", uninspectable(pid, &probe, &status));
        }
        if identity.has_exited() {
            bail!("process {pid} ({}) has already exited", status.name);
        }
        Ok(Self {
            pid,
            identity,
            process,
        })
    }

    /// The process attached to, to hand to what reads it.
    pub fn process(&self) -> &Process {
        &self.identity
    }

    /// Its pid in its own PID namespace (a container's), as it knows itself.
    pub fn ns_pid(&self) -> u32 {
        crate::namespaces::nspids(&self.identity, self.pid)
            .and_then(|ids| ids.last().copied())
            .unwrap_or(self.pid)
    }

    /// Whether the process still runs (a zombie does not).
    pub fn is_alive(&self) -> bool {
        !self.identity.has_exited()
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
        let comm = self
            .identity
            .read_to_string(&format!("task/{tid}/comm"))
            .ok()?;
        Some(comm.trim_end().to_string())
    }

    /// The ids of the threads alive now.
    pub fn tids(&self) -> Vec<u32> {
        let Ok(tasks) = self.process.tasks() else {
            return Vec::new();
        };
        tasks.flatten().map(|task| task.tid as u32).collect()
    }

    /// Every thread's scheduler account now.
    pub fn cpu_accounts(&self) -> Vec<ThreadCpu> {
        let Ok(tasks) = self.identity.read_dir("task") else {
            return Vec::new();
        };
        tasks
            .into_iter()
            .filter_map(|name| {
                let tid: u32 = name.to_str()?.parse().ok()?;
                let [run_ns, wait_ns] = schedstat(&self.identity, tid)?;
                Some(ThreadCpu {
                    tid,
                    run_ns,
                    wait_ns,
                })
            })
            .collect()
    }

    /// How many times a thread has been put on a CPU (see `thread_runs`).
    pub fn runs(&self, tid: u32) -> Option<u64> {
        thread_runs(&self.identity, tid)
    }

    /// A thread's scheduler state as `stat` says it: `S` sleeping, `D` uninterruptible, ...
    pub fn thread_state(&self, tid: u32) -> Option<char> {
        let stat = self
            .identity
            .read_to_string(&format!("task/{tid}/stat"))
            .ok()?;
        // The name in parentheses may hold anything; the state follows its last `)`.
        stat[stat.rfind(')')? + 1..].trim_start().chars().next()
    }

    /// The system call a blocked thread is in, with its first arguments (None when it is not
    /// in one).
    pub fn thread_syscall(&self, tid: u32) -> Option<(u32, [u64; 4])> {
        let text = self
            .identity
            .read_to_string(&format!("task/{tid}/syscall"))
            .ok()?;
        let mut fields = text.split_whitespace();
        // "running", or -1 outside a system call.
        let nr: u32 = fields.next()?.parse().ok()?;
        let mut args = [0; 4];
        for arg in &mut args {
            *arg = u64::from_str_radix(fields.next()?.trim_start_matches("0x"), 16).ok()?;
        }
        Some((nr, args))
    }

    /// The user that owns the process (files it writes are trusted only if they are its own).
    pub fn uid(&self) -> Option<u32> {
        self.process.uid().ok()
    }

    fn detect_runtime(&self, cmdline: &[String]) -> Option<RuntimeInfo> {
        let mut maps = crate::procmaps::Maps::open(&self.identity).ok()?;
        let libjvm = maps.library("libjvm.so").ok()??.exec.path().to_path_buf();
        // <java.home>/lib/server/libjvm.so; <java.home>/release names the version.
        let home = libjvm.parent()?.parent()?.parent()?;
        // The target's file, read as it sees it: regular, small, inside its root.
        let release = TargetRoot::open(&self.identity).ok().and_then(|root| {
            let expect = Expect {
                max_bytes: 64 << 10,
                owner: Owner::RootOr(self.uid()?),
            };
            read_target_file(&root, &home.join("release"), expect).ok()
        });
        let version = release.and_then(|bytes| {
            let text = String::from_utf8_lossy(&bytes);
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
        let status = self.identity.read_to_string("status").ok()?;
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
        Some(count_cpu_list(list.trim()))
    }
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

/// How many times thread `tid` of `process` has been put on a CPU: the same count at two
/// reads means it did not run in between.
pub fn thread_runs(process: &Process, tid: u32) -> Option<u64> {
    let text = process
        .read_to_string(&format!("task/{tid}/schedstat"))
        .ok()?;
    text.split_whitespace().nth(2)?.parse().ok()
}

/// Run time and run-queue time of thread `tid`, from its `schedstat`.
fn schedstat(process: &Process, tid: u32) -> Option<[u64; 2]> {
    let text = process
        .read_to_string(&format!("task/{tid}/schedstat"))
        .ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some([fields.next()??, fields.next()??])
}

/// Why a process shows no executable: a kernel thread has none; anything else is a process
/// pinprof may not look into, and what it lacks is said.
fn uninspectable(
    pid: u32,
    probe: &procfs::process::Process,
    status: &procfs::process::Status,
) -> String {
    // PF_KTHREAD in the kernel's flags of the task.
    const PF_KTHREAD: u32 = 0x0020_0000;
    let name = crate::text::for_terminal(&status.name, 64);
    if probe.stat().is_ok_and(|s| s.flags & PF_KTHREAD != 0) {
        return format!("PID {pid} ({name}) is a kernel thread: it has no user space to profile");
    }
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    let owner = status.ruid;
    let ptrace = crate::capabilities::effective() & (1 << crate::capabilities::CAP_SYS_PTRACE) != 0;
    if owner != me && !ptrace {
        format!(
            "cannot look into PID {pid} ({name}): it runs as uid {owner} and pinprof as uid {me} \
             without CAP_SYS_PTRACE, which another user's /proc/{pid} files need (run pinprof \
             as root, or give it CAP_SYS_PTRACE: see Privileges in the README)"
        )
    } else {
        format!(
            "cannot look into PID {pid} ({name}): its /proc/{pid} files cannot be read (a \
             security module may refuse them, or it is exiting)"
        )
    }
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

    #[test]
    fn a_thread_asleep_in_a_call_is_read_as_such() {
        use std::io::{Read as _, Write as _};
        let (mut reader, writer) = std::io::pipe().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let sleeper = std::thread::spawn(move || {
            // "<pid>/task/<tid>"
            let me = std::fs::read_link("/proc/thread-self").unwrap();
            tx.send(
                me.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .parse::<u32>()
                    .unwrap(),
            )
            .unwrap();
            let mut byte = [0u8];
            reader.read_exact(&mut byte).unwrap();
        });
        let tid = rx.recv().unwrap();
        let target = Target::open(std::process::id()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(target.tids().contains(&tid));
        let runs = target.runs(tid).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(target.runs(tid), Some(runs), "it did not run");
        assert_eq!(target.thread_state(tid), Some('S'));
        let (nr, _) = target.thread_syscall(tid).unwrap();
        assert_eq!(nr, 0, "read(2)");
        (&writer).write_all(b"x").unwrap();
        sleeper.join().unwrap();
    }
}
