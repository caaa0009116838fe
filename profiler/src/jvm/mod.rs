//! HotSpot, read from outside: its self-description (VMStructs), its Java threads, which of them
//! are virtual-thread carriers and what is mounted on them.

pub mod attach;
pub mod chunk;
mod classinit;
pub mod hotspot;
pub mod initwait;
mod inlining;
pub mod memory;
pub mod oops;
pub mod startup;
pub mod vmstructs;
pub mod walk;

use std::time::Duration;

use anyhow::{Context as _, Result};

/// The virtual-thread scheduler's settings, as the JVM's own system properties say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchedulerSettings {
    pub parallelism: Option<u32>,
    pub max_pool_size: Option<u32>,
}

/// Asks the JVM for its system properties through the attach protocol. (Properties given in
/// `JAVA_TOOL_OPTIONS`, argument files or set by the program are not on the command line.)
/// Refused (fail closed) unless the JVM's own DisableAttachMechanism flag was read as off.
pub fn scheduler_settings(
    process: &crate::process::Process,
    hotspot: &hotspot::Hotspot,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<SchedulerSettings> {
    let permit = hotspot.attach_permit()?;
    let timeout = Duration::from_secs(5);
    let properties = attach::jcmd(process, "VM.system_properties", timeout, &permit, stop)?;
    Ok(parse_scheduler_settings(&properties))
}

fn parse_scheduler_settings(properties: &str) -> SchedulerSettings {
    let value = |key: &str| {
        properties
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.trim().parse().ok())
    };
    SchedulerSettings {
        parallelism: value("jdk.virtualThreadScheduler.parallelism"),
        max_pool_size: value("jdk.virtualThreadScheduler.maxPoolSize"),
    }
}

/// `pinprof jvm`: what pinprof reads from a live JVM, for people.
pub fn describe(
    pid: u32,
    attach: bool,
    budget: crate::budget::Budget,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<String> {
    use std::fmt::Write as _;
    let target = crate::target::Target::open(pid)?;
    let process = target.process();
    // As `record` does: a JVM still starting is read once its VM is created.
    startup::wait_until_started(process, startup::WAIT, stop, || {
        say!(
            "pinprof: JVM {pid} is still starting: waiting up to {}s for it",
            startup::WAIT.as_secs()
        )
    });
    let info = target.info();
    let runtime = info
        .runtime
        .with_context(|| format!("process {pid} ({}) is not a HotSpot JVM", info.command))?;
    // (No ring buffer: the thread list may take the most of the budget.)
    let mut hotspot = hotspot::Hotspot::attach(process, runtime.major(), budget.shares(None, 0))?;
    let threads = hotspot.java_threads()?;
    let settings = if attach {
        scheduler_settings(process, &hotspot, stop)
    } else {
        Err(anyhow::anyhow!("--no-attach"))
    };
    let mut out = String::new();
    let version = runtime.version.as_deref().unwrap_or("(version unknown)");
    let _ = writeln!(out, "pid {pid} ({}): HotSpot {version}", info.command);
    if let Some(c) = crate::namespaces::container(process) {
        let cgroup = c.cgroup.as_deref().unwrap_or("unknown");
        let cpu = c
            .cpu_max
            .as_deref()
            .unwrap_or("not set (no cpu controller there)");
        let _ = writeln!(
            out,
            "container: pid namespace {} (pid {} inside), cgroup {cgroup}, cpu.max {cpu}",
            c.pid_ns_inode, c.ns_pid
        );
    }
    let parallelism = settings
        .as_ref()
        .ok()
        .and_then(|s| s.parallelism)
        .map(|p| format!("{p} (set in the JVM)"))
        .or_else(|| {
            // Without the JVM's word: the command line's, else the CPUs it may use.
            let flag = "-Djdk.virtualThreadScheduler.parallelism=";
            let given = info.cmdline.iter().any(|a| a.starts_with(flag));
            let source = if given {
                "from the command line"
            } else {
                "the CPU count"
            };
            runtime.parallelism.map(|p| format!("{p} ({source})"))
        })
        .unwrap_or_else(|| "unknown".into());
    let _ = writeln!(out, "virtual-thread scheduler parallelism: {parallelism}");
    if let Err(e) = &settings {
        let _ = writeln!(out, "(could not ask the JVM for its settings: {e:#})");
    }
    let carriers: Vec<_> = threads.iter().filter(|t| t.carrier).collect();
    let _ = writeln!(out, "carriers: {}", carriers.len());
    for t in &carriers {
        let mounted = match hotspot.mounted_vthread(t) {
            Some(id) => format!("virtual thread #{id} mounted"),
            None => "nothing mounted".into(),
        };
        let name = t.name.as_deref().unwrap_or("?");
        let _ = writeln!(out, "  {:>8}  {name:<28} {mounted}", t.tid);
    }
    if !carriers.is_empty() {
        let queued = match hotspot.queued_tasks(&threads) {
            Some(q) => format!("{} (in {} queues)", q.tasks, q.queues),
            None => "not read in this JVM".into(),
        };
        let _ = writeln!(out, "tasks waiting for a carrier: {queued}");
    }
    let _ = writeln!(
        out,
        "other Java threads: {}; Java stacks: {}",
        threads.len() - carriers.len(),
        match &hotspot.walk_error {
            None => "can be walked".to_string(),
            Some(e) => format!("cannot be walked ({e})"),
        }
    );
    if hotspot.threads_not_listed() > 0 {
        let _ = writeln!(
            out,
            "(and {} threads not listed: past what pinprof reads of a thread list, or its \
             memory budget, --memory-budget)",
            hotspot.threads_not_listed()
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_settings_from_properties() {
        let text = "#Mon Nov 30\njava.version=21.0.8\njdk.virtualThreadScheduler.parallelism=3\n";
        let settings = parse_scheduler_settings(text);
        assert_eq!(settings.parallelism, Some(3));
        assert_eq!(settings.max_pool_size, None);
        assert_eq!(parse_scheduler_settings(""), SchedulerSettings::default());
    }
}
