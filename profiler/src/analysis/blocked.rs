//! Blocked time by stack: the report's table of where threads waited.

use std::collections::HashSet;

use super::jdk;
use super::monitors::note_monitor;
use super::stacks::{StackLabels, monitor_frames};
use crate::events::StackId;
use crate::model::{FastMap, FastSet, Model, Wait, add};

/// Blocked time charged to one (kernel, user) stack pair.
#[derive(Clone, Debug, PartialEq)]
pub struct StackRow {
    /// Kernel frames, then native, then Java.
    pub stack: StackLabels,
    pub events: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Threads that blocked here, by name, most time first.
    pub threads: Vec<String>,
    /// Classes of the objects whose monitors they entered or waited on.
    pub monitor_classes: std::collections::BTreeSet<String>,
    /// Of those that were `java.lang.Class` objects (`static synchronized`): their classes.
    pub class_monitors: std::collections::BTreeSet<String>,
    /// Every thread here is one of the JVM's or the JDK's own (see `jdk_own_threads`): they
    /// wait for work, and are listed after the application's.
    pub jvm_internal: bool,
}

/// Blocked time by stack, most time first.
pub fn blocked_stacks<'m>(
    model: &'m Model,
    intervals: impl Iterator<Item = (&'m Wait, u64)>,
    own: &HashSet<u32>,
) -> Vec<StackRow> {
    #[derive(Default)]
    struct Acc {
        events: u64,
        total_ns: u64,
        max_ns: u64,
        by_thread: FastMap<u32, u64>,
        monitor_classes: std::collections::BTreeSet<String>,
        class_monitors: std::collections::BTreeSet<String>,
    }
    // One row is one cause: one stack, one class of monitor, and, for a stack without
    // Java frames (which says nothing of what the thread was doing), one thread; the
    // JVM's own threads' waits apart from the application's (see `jdk::waits_for_work`).
    type Key<'a> = (
        Option<StackId>,
        Option<StackId>,
        Option<StackId>,
        Option<u32>,
        Option<&'a str>,
        bool,
    );
    // First by stack, thread and class, one look-up per interval (millions of them); then
    // the threads of a stack with Java frames are put together, a look-up per group.
    #[derive(Default)]
    struct ByThread {
        events: u64,
        total_ns: u64,
        max_ns: u64,
        monitor_classes: std::collections::BTreeSet<String>,
        class_monitors: std::collections::BTreeSet<String>,
    }
    let mut by_thread: FastMap<Key, ByThread> = FastMap::default();
    for (o, d) in intervals {
        let class = o.monitor().and_then(|m| model.monitor_class(m, o.start_ns));
        let key = (
            o.kernel_stack(),
            o.user_stack(),
            model.java_stack(o),
            Some(o.tid),
            class,
            own.contains(&o.tid),
        );
        let entry = by_thread.entry(key).or_default();
        entry.events += 1;
        add(&mut entry.total_ns, d);
        entry.max_ns = entry.max_ns.max(d);
        if let Some(m) = o.monitor() {
            note_monitor(
                model,
                m,
                o.start_ns,
                &mut entry.monitor_classes,
                &mut entry.class_monitors,
            );
        }
    }
    let mut by_stack: FastMap<Key, Acc> = FastMap::default();
    for ((k, u, java, tid, class, theirs), t) in by_thread {
        let has_java = java
            .and_then(|id| model.stacks.get(&id))
            .is_some_and(|frames| !frames.is_empty());
        let thread = if has_java { None } else { tid };
        // The JVM's own waits for work: theirs, with none of the application's code under
        // them (see `jdk::waits_for_work`); a stack with it is one row whoever waited.
        let theirs = theirs
            && !model
                .frames_of(k, u, java)
                .iter()
                .any(|f| jdk::is_application_frame(f));
        let entry = by_stack
            .entry((k, u, java, thread, class, theirs))
            .or_default();
        add(&mut entry.events, t.events);
        add(&mut entry.total_ns, t.total_ns);
        entry.max_ns = entry.max_ns.max(t.max_ns);
        if let Some(tid) = tid {
            add(entry.by_thread.entry(tid).or_default(), t.total_ns);
        }
        entry.monitor_classes.extend(t.monitor_classes);
        entry.class_monitors.extend(t.class_monitors);
    }
    let mut rows: Vec<StackRow> = by_stack
        .into_iter()
        .map(|((k, u, j, _, _, theirs), acc)| {
            let stack = model.frames_of(k, u, j);
            let Acc {
                events,
                total_ns,
                max_ns,
                by_thread,
                monitor_classes,
                class_monitors,
            } = acc;
            let mut threads: Vec<(u32, u64)> = by_thread.into_iter().collect();
            threads.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            // The JVM's own threads waiting for work (the key kept them apart).
            let jvm_internal = theirs;
            StackRow {
                jvm_internal,
                stack: StackLabels::new(&stack, monitor_frames(&stack)),
                events,
                total_ns,
                max_ns,
                threads: threads
                    .into_iter()
                    .map(|(tid, _)| model.thread_name(tid))
                    .collect(),
                monitor_classes,
                class_monitors,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.jvm_internal.cmp(&b.jvm_internal))
            .then(b.total_ns.cmp(&a.total_ns))
            .then(a.stack.cmp(&b.stack))
            // (Rows of one stack without Java frames differ by thread: the same order each run.)
            .then(a.threads.cmp(&b.threads))
    });
    rows
}

/// Blocked intervals whose Java stack ends where a virtual thread's frozen frames could
/// not be read (copied in part and gone from the heap): their older callers are missing.
/// (A thread preempted, not blocked, has its stack copied without them: it shows in no
/// stack, so it is not counted.)
pub fn java_stacks_cut(model: &Model) -> usize {
    // The few stacks that were cut first: most recordings have none, and then no interval
    // needs looking at.
    let cut: FastSet<StackId> = model
        .stacks
        .iter()
        .filter(|(_, frames)| {
            frames
                .last()
                .is_some_and(|f| f.name.as_deref() == Some(crate::jvm::walk::FROZEN_CALLERS))
        })
        .map(|(&id, _)| id)
        .collect();
    if cut.is_empty() {
        return 0;
    }
    model
        .off_cpu
        .iter()
        .filter(|o| o.state.is_blocked())
        .filter_map(|o| model.java_stack(o))
        .filter(|id| cut.contains(id))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analysis;
    use crate::events::OffCpuState;
    use crate::model::tests::interval;

    #[test]
    fn stacks_without_java_frames_are_not_merged_across_threads() {
        let model = Model {
            end_mono_ns: 100_000_000,
            off_cpu: vec![
                Wait::from(interval(1, 0, 10, OffCpuState::Sleeping)),
                Wait::from(interval(2, 0, 20, OffCpuState::Sleeping)),
                Wait::from(interval(2, 30, 20, OffCpuState::Sleeping)),
            ],
            ..Default::default()
        };
        let rows = Analysis::new(&model).blocked_stacks().to_vec();
        let threads: Vec<(Vec<String>, u64)> =
            rows.iter().map(|r| (r.threads.clone(), r.events)).collect();
        assert_eq!(
            threads,
            [
                (vec!["tid-2".to_string()], 2),
                (vec!["tid-1".to_string()], 1)
            ]
        );
    }
}
