//! A JVM still starting up. Until HotSpot has created its VM, what pinprof reads from it is not
//! there yet or not final: the Java field offsets the VM computes, its code cache, the bases of
//! compressed pointers, the flags ergonomics sets; and before the `java` launcher has loaded
//! `libjvm.so` the process does not even look like a JVM. Read then, a JVM would be recorded
//! without its Java view (or with a wrong one) for the whole recording: pinprof waits instead,
//! within a bound, for the VM to say it is initialized.

use std::{
    path::Path,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use super::memory::{Libjvm, Memory};
use crate::process::Process;

/// `static bool _init_completed` of HotSpot's init.cpp (a local symbol in libjvm's full
/// `.symtab`, JDK 21 and 25): set once `Threads::create_vm` is done, before `main` runs.
const INIT_COMPLETED: &str = "_ZL15_init_completed";

const POLL: Duration = Duration::from_millis(20);

/// How long a JVM still starting up is waited for (it starts in well under a second when
/// the machine is not overloaded).
pub const WAIT: Duration = Duration::from_secs(20);

/// How a wait for a starting JVM ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Startup {
    /// A JVM whose VM is initialized (at once, or after a wait).
    Started,
    /// No JVM: no libjvm, and no Java launcher that could load one.
    NotJava,
    /// A JVM that cannot say whether it is initialized (no such symbol, memory unreadable):
    /// read as it is, as before.
    Unknown,
    /// Still starting when the time ran out, or the wait was interrupted.
    StillStarting,
}

/// What the process is at one look.
enum Phase {
    /// The launcher has not loaded libjvm yet.
    Launcher,
    /// libjvm is loaded: its init flag, once found.
    Libjvm,
    NotJava,
}

/// Waits up to `timeout` for the JVM of process `pid` to finish starting, calling `waiting`
/// once if it must wait at all. Returns at once for a process that is no JVM.
pub fn wait_until_started(
    process: &Process,
    timeout: Duration,
    stop: &AtomicBool,
    mut waiting: impl FnMut(),
) -> Startup {
    let deadline = Instant::now() + timeout;
    let mut said = false;
    let mut flag: Option<(Memory, u64)> = None;
    loop {
        let ready = match &flag {
            Some((mem, at)) => {
                let mut byte = [0u8];
                match mem.read(*at, &mut byte) {
                    Ok(()) => byte[0] != 0,
                    Err(_) => return Startup::Unknown,
                }
            }
            None => match phase(process) {
                Phase::NotJava => return Startup::NotJava,
                Phase::Launcher => false,
                Phase::Libjvm => {
                    let found = Libjvm::load(process, &[INIT_COMPLETED])
                        .and_then(|lib| lib.symbol(INIT_COMPLETED))
                        .and_then(|at| Ok((Memory::open(process)?, at)));
                    match found {
                        Ok(f) => flag = Some(f),
                        Err(_) => return Startup::Unknown,
                    }
                    continue;
                }
            },
        };
        if ready {
            return Startup::Started;
        }
        if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
            return Startup::StillStarting;
        }
        if !said {
            said = true;
            waiting();
        }
        std::thread::sleep(POLL);
    }
}

/// libjvm mapped, or a `java` launcher (it links libjli, and loads libjvm itself later).
fn phase(process: &Process) -> Phase {
    let Ok(mut maps) = crate::procmaps::Maps::open(process) else {
        return Phase::NotJava;
    };
    let mut mapped = |name: &str| maps.library(name).is_ok_and(|l| l.is_some());
    if mapped("libjvm.so") {
        return Phase::Libjvm;
    }
    // Right after exec, before the dynamic loader has mapped libjli: the program's name.
    let exe = process.read_link("exe").unwrap_or_default();
    if mapped("libjli.so") || exe.file_name() == Some(Path::new("java").as_os_str()) {
        Phase::Launcher
    } else {
        Phase::NotJava
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_that_is_no_jvm_is_not_waited_for() {
        let stop = AtomicBool::new(false);
        let waited = || panic!("waited for a process that is no JVM");
        let me = Process::myself().unwrap();
        let own = wait_until_started(&me, Duration::from_secs(5), &stop, waited);
        assert_eq!(own, Startup::NotJava);
        // Gone: nothing to wait for either.
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let gone = Process::attach(child.id()).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let gone = wait_until_started(&gone, Duration::from_secs(5), &stop, waited);
        assert_eq!(gone, Startup::NotJava);
    }
}
