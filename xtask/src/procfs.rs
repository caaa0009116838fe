//! What /proc says about a process, for the bench and the soak: CPU time, memory, context
//! switches, system calls, and the BPF objects it holds.

use anyhow::{Context as _, Result};

/// User + system CPU seconds of a process (all its threads) so far.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("process {pid} is gone"))?;
    // The command name may hold spaces and parentheses: fields count from the last ')'.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let field =
        |i: usize| -> Result<f64> { Ok(fields.get(i).context("short /proc stat")?.parse()?) };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok((field(11)? + field(12)?) / hz)
}

/// Resident memory in KiB.
pub fn rss_kib(pid: u32) -> Result<u64> {
    status_field(&format!("/proc/{pid}/status"), "VmRSS:")
}

/// Context switches (voluntary and not) of all the threads of a process so far. Threads that
/// ended are not counted: the bench's programs keep theirs.
pub fn context_switches(pid: u32) -> Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))?.flatten() {
        let status = task.path().join("status");
        // A thread may end between the listing and the read.
        if let (Ok(v), Ok(n)) = (
            status_field(&status.to_string_lossy(), "voluntary_ctxt_switches:"),
            status_field(&status.to_string_lossy(), "nonvoluntary_ctxt_switches:"),
        ) {
            total += v + n;
        }
    }
    Ok(total)
}

/// read(2)-family system calls made so far (`syscr` of /proc/PID/io).
pub fn read_calls(pid: u32) -> Result<u64> {
    status_field(&format!("/proc/{pid}/io"), "syscr:")
}

fn status_field(path: &str, name: &str) -> Result<u64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {name} in {path}"))
}

/// The BPF programs and links a process holds open, by kernel id (from /proc/PID/fdinfo).
#[derive(Debug, Default, Clone)]
pub struct BpfHeld {
    pub programs: Vec<u32>,
    pub links: Vec<u32>,
}

pub fn bpf_held(pid: u32) -> Result<BpfHeld> {
    let mut held = BpfHeld::default();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))?.flatten() {
        let Ok(info) = std::fs::read_to_string(fd.path()) else {
            continue;
        };
        for line in info.lines() {
            let id = |prefix: &str| {
                line.strip_prefix(prefix)
                    .and_then(|v| v.trim().parse::<u32>().ok())
            };
            if let Some(id) = id("prog_id:") {
                held.programs.push(id);
            } else if let Some(id) = id("link_id:") {
                held.links.push(id);
            }
        }
    }
    held.programs.sort_unstable();
    held.programs.dedup();
    held.links.sort_unstable();
    held.links.dedup();
    Ok(held)
}

/// Tracing BPF programs (kprobes, tracepoints, raw tracepoints, fentry and the like) held open
/// by processes other than `except`, as (program id, holder pid): another profiler on the
/// host, whose cost on every process would be taken for the tracer's under measurement.
pub fn foreign_tracing_programs(except: Option<u32>) -> Result<Vec<(u32, u32)>> {
    // BPF_PROG_TYPE_KPROBE, _TRACEPOINT, _PERF_EVENT, _RAW_TRACEPOINT, _RAW_TRACEPOINT_WRITABLE,
    // _TRACING.
    const TRACING: [u32; 6] = [2, 5, 7, 17, 24, 26];
    let mut found = Vec::new();
    for process in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = process
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if Some(pid) == except || pid == std::process::id() {
            continue;
        }
        // Processes come and go while they are listed: whatever cannot be read is skipped.
        let Ok(fds) = std::fs::read_dir(process.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if !std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == "anon_inode:bpf-prog")
            {
                continue;
            }
            let Ok(info) =
                std::fs::read_to_string(process.path().join("fdinfo").join(fd.file_name()))
            else {
                continue;
            };
            let field = |name: &str| {
                info.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.trim().parse::<u32>().ok())
            };
            if let (Some(kind), Some(id)) = (field("prog_type:"), field("prog_id:"))
                && TRACING.contains(&kind)
            {
                found.push((id, pid));
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    Ok(found)
}
