//! What belongs to the JDK rather than to the application: its methods (to fold them out of
//! the way of the application's frames) and its own threads (whose waits for work are no
//! lock of the application's). Threads are known by what they are, not by their names.

use std::collections::HashSet;

use crate::events::{Frame, FrameKind};
use crate::model::{FastMap, FastSet, Model};

/// Packages of the JDK's own code.
const JDK_PACKAGES: [&str; 5] = ["java.", "javax.", "jdk.", "sun.", "com.sun."];

/// A Java method (`pkg.Class.method`) of the JDK's own code.
pub fn is_jdk_method(name: &str) -> bool {
    JDK_PACKAGES.iter().any(|p| name.starts_with(p))
}

/// A frame label that says what a frame is rather than naming a method (`[... stub]`,
/// `[callers frozen in the virtual thread's stack chunk]`).
pub fn is_marker(label: &str) -> bool {
    label.starts_with('[')
}

/// A Java frame of the application's code: a named method outside the JDK's packages.
pub fn is_application_frame(frame: &Frame) -> bool {
    frame.kind == FrameKind::Java
        && frame
            .name
            .as_deref()
            .is_some_and(|n| !is_marker(n) && !is_jdk_method(n))
}

/// A wait of one of the JVM's or the JDK's own threads (`own`, see `jdk_own_threads`) for
/// work: none of the application's code under it (a finalizer, a cleaner or a timer
/// running the application's task waits for the application). Views leave these last, or
/// out.
pub fn waits_for_work(own: &HashSet<u32>, tid: u32, frames: &[&Frame]) -> bool {
    own.contains(&tid) && !frames.iter().any(|f| is_application_frame(f))
}

/// A thread class of the JDK's own services: a JDK class that is neither the plain
/// `java.lang.Thread` (what applications start) nor a fork-join worker (whose pools run the
/// application's tasks). `jdk.internal.misc.InnocuousThread` (socket pollers, the common
/// cleaner, timers), `java.lang.ref.Reference$ReferenceHandler`,
/// `java.lang.ref.Finalizer$FinalizerThread`, `java.util.concurrent.DelayScheduler`...
pub fn is_jdk_service_class(class: &str) -> bool {
    is_jdk_method(class)
        && class != "java.lang.Thread"
        && !class.starts_with("java.util.concurrent.ForkJoinWorkerThread")
}

/// The method a thread runs, from one of its Java stacks: the outermost named frame above
/// `Thread.run` (and the lambda that adapts a method to a `Runnable`). None when the stack
/// does not reach the thread's first frame.
pub fn entry_method(frames: &[Frame]) -> Option<&str> {
    let names: Vec<&str> = frames
        .iter()
        .filter(|f| f.kind == FrameKind::Java)
        .filter_map(|f| f.name.as_deref())
        .collect();
    let bottom = names.last()?;
    if !bottom.starts_with("java.lang.Thread.run") {
        return None;
    }
    names
        .iter()
        .rev()
        .find(|n| {
            !n.starts_with("java.lang.Thread.run") && !n.contains("$$Lambda") && !is_marker(n)
        })
        .copied()
}

/// Whether a thread's entry method is one of the JDK's service loops: a JDK method outside
/// `java.util.concurrent` (whose executors run the application's tasks).
fn is_service_entry(method: &str) -> bool {
    is_jdk_method(method) && !method.starts_with("java.util.concurrent.")
}

/// The threads of a HotSpot target that are the JVM's or the JDK's own, not the
/// application's (carriers never are):
/// - Java threads of a JDK service class (see `is_jdk_service_class`);
/// - Java threads that run no Java code (compiler threads, the service thread, the
///   signal dispatcher): every wait seen had no Java frame under it (an empty anchor);
/// - Java threads, in recordings that do not say their class, whose entry method is a
///   JDK service loop (`sun.nio.ch.Poller.pollerLoop`, `jdk.internal.ref.CleanerImpl.run`);
/// - threads that are not Java threads at all (the VM thread, GC workers): there when the
///   window opened or alive for seconds after their birth, yet never in the JVM's thread
///   list, never seen with a Java state.
pub fn jdk_own_threads(model: &Model) -> HashSet<u32> {
    // A thread born in the window is looked for in the JVM's list for a second (the
    // recorder's watch of births): one alive longer and never listed is no Java thread.
    const UNLISTED_AFTER_NS: u64 = 2_000_000_000;
    let mut out = HashSet::new();
    if !model.knows_java_threads() {
        return out;
    }
    // Per thread: (waits with a Java state, of which with an empty anchor).
    let mut anchors: FastMap<u32, (u64, u64)> = FastMap::default();
    for o in &model.off_cpu {
        if let Some(j) = o.java() {
            let a = anchors.entry(o.tid).or_default();
            a.0 += 1;
            a.1 += u64::from(!j.java_frames);
        }
    }
    // The Attach Listener: the thread that accepts on the JVM's attach socket. pinprof's own
    // attach starts it, and its one wait (it runs no Java code) may span the window, unseen
    // by the kernel's reads of Java states.
    let attach_listeners: FastSet<u32> = model
        .syscalls
        .iter()
        .filter(|s| s.fd.as_deref().is_some_and(is_attach_socket))
        .map(|s| s.tid)
        .collect();
    let tids: FastSet<u32> = model
        .names
        .keys()
        .chain(model.java_threads.keys())
        .chain(model.cpu_first.keys())
        .chain(model.off_cpu.iter().map(|o| &o.tid))
        .copied()
        .collect();
    for tid in tids {
        if model.is_carrier(tid) {
            continue;
        }
        let runs_no_java = || {
            !model.java_stack_starts.contains_key(&tid)
                && anchors
                    .get(&tid)
                    .is_some_and(|(n, empty)| *n > 0 && n == empty)
        };
        let own = match (
            model.java_threads.contains_key(&tid),
            model.java_thread_classes.get(&tid),
        ) {
            (true, Some(class)) => is_jdk_service_class(class) || runs_no_java(),
            (true, None) => runs_no_java() || runs_service_loop(model, tid),
            // Not in the JVM's list, though there when the window opened, or born in it
            // and alive long after the recorder looked for it in the list (a GC worker
            // started on demand); a short-lived thread of the application's can come and
            // go between two reads of the list.
            (false, _) => {
                let there_at_start = model
                    .cpu_first
                    .get(&tid)
                    .is_some_and(|(t, _)| Some(*t) == model.cpu_start_ns);
                let born_unlisted = model.births.get(&tid).is_some_and(|&born| {
                    model.life(tid).1.saturating_sub(born) >= UNLISTED_AFTER_NS
                });
                !anchors.contains_key(&tid) && (there_at_start || born_unlisted)
            }
        };
        if own || (attach_listeners.contains(&tid) && model.java_threads.contains_key(&tid)) {
            out.insert(tid);
        }
    }
    out
}

/// A file name (see `fdname`) that is a socket bound to HotSpot's attach path,
/// `.java_pid<pid>` (or the `.tmp` name it binds before renaming).
fn is_attach_socket(file: &str) -> bool {
    file.split_once(" unix ")
        .and_then(|(_, path)| path.rsplit('/').next()?.strip_prefix(".java_pid"))
        .map(|rest| rest.strip_suffix(".tmp").unwrap_or(rest))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether every Java stack of a thread that reaches its first frame shows a JDK service
/// loop as its entry method (and one at least does).
fn runs_service_loop(model: &Model, tid: u32) -> bool {
    let Some(starts) = model.java_stack_starts.get(&tid) else {
        return false;
    };
    let entries: Vec<&str> = starts
        .values()
        .filter_map(|id| model.stacks.get(id))
        .filter_map(|frames| entry_method(frames))
        .collect();
    !entries.is_empty() && entries.iter().all(|m| is_service_entry(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::java_frame as java;

    #[test]
    fn the_attach_socket_is_told_by_its_path() {
        assert!(is_attach_socket(
            "socket:[37657] unix /tmp/.java_pid22150.tmp"
        ));
        assert!(is_attach_socket("socket:[1] unix /tmp/.java_pid7"));
        assert!(!is_attach_socket("socket:[1] unix /tmp/.java_pidx"));
        assert!(!is_attach_socket("socket:[1] unix /tmp/app.sock"));
        assert!(!is_attach_socket("/tmp/.java_pid7"));
    }

    #[test]
    fn service_threads_are_told_by_their_class() {
        for class in [
            "jdk.internal.misc.InnocuousThread",
            "java.lang.ref.Reference$ReferenceHandler",
            "java.lang.ref.Finalizer$FinalizerThread",
            "java.util.concurrent.DelayScheduler",
        ] {
            assert!(is_jdk_service_class(class), "{class}");
        }
        for class in [
            "java.lang.Thread",
            "java.util.concurrent.ForkJoinWorkerThread",
            "com.example.Worker",
            "io.netty.util.concurrent.FastThreadLocalThread",
        ] {
            assert!(!is_jdk_service_class(class), "{class}");
        }
    }

    #[test]
    fn the_entry_method_is_the_outermost_frame_above_thread_run() {
        let poller = [
            java("jdk.internal.misc.Unsafe.park"),
            java("sun.nio.ch.Poller.poll"),
            java("sun.nio.ch.Poller.pollerLoop"),
            java("sun.nio.ch.Poller$$Lambda/0x1.run"),
            java("java.lang.Thread.runWith"),
            java("java.lang.Thread.run"),
        ];
        assert_eq!(entry_method(&poller), Some("sun.nio.ch.Poller.pollerLoop"));
        assert!(is_service_entry("sun.nio.ch.Poller.pollerLoop"));
        let worker = [
            java("java.util.concurrent.LinkedBlockingQueue.take"),
            java("java.util.concurrent.ThreadPoolExecutor.runWorker"),
            java("java.util.concurrent.ThreadPoolExecutor$Worker.run"),
            java("java.lang.Thread.run"),
        ];
        assert!(!is_service_entry(entry_method(&worker).unwrap()));
        // A stack that does not reach the bottom says nothing.
        let cut = [
            java("sun.nio.ch.Poller.poll"),
            java("[more frames beyond the copied stack]"),
        ];
        assert_eq!(entry_method(&cut), None);
    }
}
