//! Pinning: each time a mounted virtual thread blocked its carrier (one event for the retries
//! of one monitor entry), and the sites they pinned at, as a user acts on them.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::classify::{Operation, Reason, Use};
use super::locks::lock_waits;
use super::monitors::{InitWaitedFor, init_waited_for, note_monitor};
use super::stacks::{StackLabels, monitor_frames};
use crate::analysis::jdk;
use crate::events::{Frame, FrameKind, StackId};
use crate::model::{FastMap, Model, Wait, add};

/// One pinning: a mounted virtual thread blocked its carrier. A contended monitor entry that
/// blocked several times before it got the monitor is one event.
#[derive(Clone, Debug, PartialEq)]
pub struct PinnedEvent {
    pub carrier: u32,
    pub vthread: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Time actually off CPU (less than the span for a merged monitor entry).
    pub blocked_ns: u64,
    pub reason: Reason,
    pub operation: Operation,
    pub kernel_stack: Option<StackId>,
    pub user_stack: Option<StackId>,
    pub java_stack: Option<StackId>,
    pub monitor: Option<u64>,
}

impl PinnedEvent {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Pinned events from intervals in time order, one thread's after another's.
pub fn pinned_events<'a>(
    intervals: impl Iterator<Item = (&'a Wait, Use, Option<StackId>)>,
) -> Vec<PinnedEvent> {
    let mut out: Vec<PinnedEvent> = Vec::new();
    // Index of each carrier's last event, to merge the retries of one monitor entry.
    // (A look-up per interval, millions of them: the fast hasher.)
    let mut last: FastMap<u32, usize> = FastMap::default();
    for (o, u, java_stack) in intervals {
        let Use::Pinned(reason, operation) = u else {
            // Anything else in between ends a monitor entry.
            last.remove(&o.tid);
            continue;
        };
        let java = o.java();
        let vthread = java.and_then(|j| j.vthread).unwrap_or(0);
        let monitor = java.and_then(|j| j.pending_monitor.or(j.waiting_monitor));
        if operation == Operation::MonitorEnter
            && let Some(&i) = last.get(&o.tid)
            && out[i].operation == Operation::MonitorEnter
            && out[i].vthread == vthread
            && out[i].monitor == monitor
        {
            out[i].end_ns = o.end_ns;
            add(&mut out[i].blocked_ns, o.duration_ns());
            continue;
        }
        last.insert(o.tid, out.len());
        out.push(PinnedEvent {
            carrier: o.tid,
            vthread,
            start_ns: o.start_ns,
            end_ns: o.end_ns,
            blocked_ns: o.duration_ns(),
            reason,
            operation,
            kernel_stack: o.kernel_stack(),
            user_stack: o.user_stack(),
            java_stack,
            monitor,
        });
    }
    out
}

/// The pinnings among `uses` (from `uses`, which a caller needing both this and
/// `starvation_in` computes once).
pub fn pinned_events_in(model: &Model, uses: &[(&Wait, Use)]) -> Vec<PinnedEvent> {
    // (Only a pinning needs its Java stack.)
    let with_stacks = uses.iter().map(|&(o, u)| {
        let pinned = matches!(u, Use::Pinned(..));
        (o, u, pinned.then(|| model.java_stack(o)).flatten())
    });
    let mut events = pinned_events(with_stacks);
    events.sort_by_key(|e| (e.start_ns, e.carrier));
    events
}

/// Pinned time at one site: same reason, operation and stack.
#[derive(Clone, Debug, PartialEq)]
pub struct PinnedSite {
    pub reason: Reason,
    pub operation: Operation,
    pub stack: StackLabels,
    pub events: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// `Thread.threadId()` of the virtual threads pinned here.
    pub virtual_threads: std::collections::BTreeSet<u64>,
    /// Thread ids of the carriers they pinned.
    pub carriers: std::collections::BTreeSet<u32>,
    /// Classes of the objects whose monitors they entered or waited on.
    pub monitor_classes: std::collections::BTreeSet<String>,
    /// Of those that were `java.lang.Class` objects (`static synchronized`): their classes.
    pub class_monitors: std::collections::BTreeSet<String>,
    /// For waits for another thread's class initialization: which class, run by whom.
    pub class_inits: std::collections::BTreeSet<InitWaitedFor>,
    /// For monitor entries: the threads whose release of the monitor let them in (the
    /// holders), with how many entries each released.
    pub released_by: BTreeMap<u32, u64>,
}

impl PinnedSite {
    /// A site with nothing counted yet.
    pub fn new(reason: Reason, operation: Operation, stack: StackLabels) -> Self {
        Self {
            reason,
            operation,
            stack,
            events: 0,
            total_ns: 0,
            max_ns: 0,
            virtual_threads: Default::default(),
            carriers: Default::default(),
            monitor_classes: Default::default(),
            class_monitors: Default::default(),
            class_inits: Default::default(),
            released_by: Default::default(),
        }
    }
}

/// Pinned sites, most time first.
pub fn pinned_sites(model: &Model, events: &[PinnedEvent]) -> Vec<PinnedSite> {
    // Events are grouped by their stack ids first, so each distinct stack is labelled
    // once (a live view does this every refresh); groups whose labels read the same
    // (other ids, same frames) are one site.
    type Ids = (
        Reason,
        Operation,
        Option<StackId>,
        Option<StackId>,
        Option<StackId>,
    );
    let mut by_ids: HashMap<Ids, Vec<&PinnedEvent>> = HashMap::new();
    for e in events {
        let ids = (
            e.reason,
            e.operation,
            e.kernel_stack,
            e.user_stack,
            e.java_stack,
        );
        by_ids.entry(ids).or_default().push(e);
    }
    let entering: HashSet<u32> = events
        .iter()
        .filter(|e| e.operation == Operation::MonitorEnter)
        .map(|e| e.carrier)
        .collect();
    let releasers = Releasers::of(model, &entering);
    let mut sites: HashMap<(Reason, Operation, Vec<String>), PinnedSite> = HashMap::new();
    for ((reason, operation, kernel, user, java), group) in by_ids {
        let stack = model.frames_of(kernel, user, java);
        let labels = StackLabels::new(&stack, holders(&stack, operation));
        let place = site_place(&stack, &labels);
        let site = sites
            .entry((reason, operation, place))
            .or_insert_with(|| PinnedSite::new(reason, operation, labels.clone()));
        // (The same one whatever order the groups come in.)
        if (labels.frames.len(), &labels) > (site.stack.frames.len(), &site.stack) {
            site.stack = labels;
        }
        for e in group {
            if e.operation == Operation::MonitorEnter
                && let Some(holder) = releasers.released(e.carrier, e.end_ns)
            {
                *site.released_by.entry(holder).or_default() += 1;
            }
            if let Some(m) = e.monitor {
                note_monitor(
                    model,
                    m,
                    e.start_ns,
                    &mut site.monitor_classes,
                    &mut site.class_monitors,
                );
                if e.reason == Reason::ClassInit
                    && let Some(wait) = model.class_init_wait(m, e.start_ns, e.end_ns)
                {
                    add_init(&mut site.class_inits, init_waited_for(model, wait));
                }
            }
            site.virtual_threads.insert(e.vthread);
            site.carriers.insert(e.carrier);
            site.events += 1;
            add(&mut site.total_ns, e.duration_ns());
            site.max_ns = site.max_ns.max(e.duration_ns());
        }
    }
    let mut sites: Vec<PinnedSite> = sites.into_values().collect();
    name_inits_across(&mut sites);
    sites.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.stack.cmp(&b.stack)));
    sites
}

/// The futex waits of some threads that another thread ended, by thread, in time order: a
/// blocked monitor entry parks in one, and the thread that woke it is the one that released
/// the monitor (its waker is paired in the kernel, inside its own futex call).
struct Releasers(HashMap<u32, Vec<(u64, u64, u32)>>);

impl Releasers {
    fn of(model: &Model, tids: &HashSet<u32>) -> Self {
        let mut waits: HashMap<u32, Vec<(u64, u64, u32)>> = HashMap::new();
        if !tids.is_empty() {
            for s in lock_waits(model).filter(|s| tids.contains(&s.tid)) {
                if let Some(w) = s.futex.as_ref().and_then(|f| f.waker.as_ref()) {
                    waits
                        .entry(s.tid)
                        .or_default()
                        .push((s.start_ns, s.end_ns, w.tid));
                }
            }
        }
        for list in waits.values_mut() {
            list.sort_unstable();
        }
        Self(waits)
    }

    /// Who ended the wait of `tid` that was under way at `end_ns`, the end of its entry's
    /// time off CPU (the call returns just after).
    fn released(&self, tid: u32, end_ns: u64) -> Option<u32> {
        let waits = self.0.get(&tid)?;
        let i = waits.partition_point(|(start, _, _)| *start <= end_ns);
        let (_, end, waker) = waits.get(i.checked_sub(1)?)?;
        (*end >= end_ns).then_some(*waker)
    }
}

/// Indexes of the frames that hold a monitor during a pinning. A thread entering a contended
/// `synchronized` method does not hold that monitor yet: its innermost Java frame is the one
/// waiting to enter, so its mark is dropped.
fn holders(frames: &[&Frame], operation: Operation) -> Vec<usize> {
    let mut marked = monitor_frames(frames);
    if operation == Operation::MonitorEnter
        && let Some(first) = frames.iter().position(|f| {
            f.kind == FrameKind::Java
                && matches!(
                    f.module.as_deref(),
                    Some("interpreted" | "compiled" | "inlined" | "native")
                )
        })
    {
        marked.retain(|&i| i != first);
    }
    marked
}

/// Where a pinning is, as a user acts on it: the Java methods from the blocking operation out
/// to the culprit (the frame that holds the monitor, else the innermost application frame).
/// So the same place is one site whether or not its stack says how it ran (a Runtime1 stub on
/// the way into a monitor) or how far the walk got below the culprit (callers frozen in the
/// stack chunk, frames beyond the copy), and with or without kernel and libc frames (a wait
/// from before attach has none). A stack without Java methods is its own place.
fn site_place(stack: &[&Frame], labels: &StackLabels) -> Vec<String> {
    let methods: Vec<(usize, &str)> = stack
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind == FrameKind::Java)
        .filter_map(|(i, f)| Some((i, f.name.as_deref()?)))
        .filter(|(_, name)| !jdk::is_marker(name))
        .collect();
    if methods.is_empty() {
        return labels.frames.clone();
    }
    let culprit = methods
        .iter()
        .map(|&(i, _)| i)
        .find(|i| labels.monitor_frames.contains(i))
        .or_else(|| {
            methods
                .iter()
                .map(|&(i, _)| i)
                .find(|&i| jdk::is_application_frame(stack[i]))
        });
    methods
        .iter()
        .take_while(|(i, _)| culprit.is_none_or(|c| *i <= c))
        .map(|(_, name)| name.to_string())
        .collect()
}

/// Adds a class initialization waited for. The virtual thread running an initializer is read
/// live and can be missed in a read that races its mount: the initializer without it is the
/// same one (a virtual thread in `<clinit>` stays mounted), so the one that names it stands.
fn add_init(inits: &mut std::collections::BTreeSet<InitWaitedFor>, init: InitWaitedFor) {
    let (same, named) = (same_init, init_named);
    if named(&init) {
        inits.retain(|known| !same(known, &init) || named(known));
    } else if inits.iter().any(|known| same(known, &init) && named(known)) {
        return;
    }
    inits.insert(init);
}

/// The same initialization, run by the same thread.
fn same_init(a: &InitWaitedFor, b: &InitWaitedFor) -> bool {
    a.class == b.class
        && match (&a.initializer, &b.initializer) {
            (Some(x), Some(y)) => x.tid == y.tid,
            _ => false,
        }
}

/// Read with the virtual thread that ran the initializer.
fn init_named(i: &InitWaitedFor) -> bool {
    i.initializer.as_ref().is_some_and(|t| t.vthread.is_some())
}

/// The initializers read without their virtual thread, in any site, replaced by the same
/// ones read with it in another (a site's waits may all have raced the initializer's mount).
fn name_inits_across(sites: &mut [PinnedSite]) {
    let named: Vec<InitWaitedFor> = sites
        .iter()
        .flat_map(|s| s.class_inits.iter())
        .filter(|i| init_named(i))
        .cloned()
        .collect();
    for site in sites {
        let unnamed: Vec<InitWaitedFor> = site
            .class_inits
            .iter()
            .filter(|i| !init_named(i))
            .cloned()
            .collect();
        for u in unnamed {
            if let Some(n) = named.iter().find(|n| same_init(n, &u)) {
                site.class_inits.remove(&u);
                site.class_inits.insert(n.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analysis;
    use crate::analysis::classify::StackHints;
    use crate::analysis::classify::interpret;
    use crate::analysis::classify::tests::{block, interval as at};
    use crate::analysis::monitors::monitors_said;
    use crate::events::{Event, JavaThreadState};
    use crate::model::tests::{init_lock_wait, make_carrier};

    #[test]
    fn retries_of_one_monitor_entry_are_one_event() {
        let mut entering = block(JavaThreadState::Blocked, Some(7));
        entering.pending_monitor = Some(0x1000);
        let a = at(1, 0, 10, Some(entering.clone()));
        let b = at(1, 12, 20, Some(entering.clone()));
        let idle = at(1, 30, 40, Some(block(JavaThreadState::Blocked, None)));
        let c = at(1, 50, 60, Some(entering));
        let u = |o: &Wait| interpret(o, true, Some(21), StackHints::default()).unwrap();
        let waits = [a, b, idle, c].map(Wait::from);
        let events = pinned_events(waits.iter().map(|o| (o, u(o), None)));
        assert_eq!(events.len(), 2);
        assert_eq!((events[0].start_ns, events[0].end_ns), (0, 20));
        assert_eq!(events[0].blocked_ns, 18);
        assert_eq!(events[1].start_ns, 50);
    }

    #[test]
    fn one_place_is_one_site_however_its_stack_ends_or_enters_the_monitor() {
        let java = |name: &str, module: &str, holds_monitor: bool| Frame {
            kind: FrameKind::Java,
            addr: 0,
            name: Some(name.into()),
            module: Some(module.into()),
            holds_monitor,
            line: None,
        };
        let top = [
            java("jdk.internal.misc.Unsafe.park", "native", false),
            java("java.lang.Thread.sleep", "interpreted", false),
            java("Shop$PriceCache.refresh", "interpreted", true),
            java("Shop.handle", "compiled", false),
        ];
        let place = |bottom: &[Frame]| {
            let frames: Vec<&Frame> = top.iter().chain(bottom).collect();
            site_place(&frames, &StackLabels::new(&frames, monitor_frames(&frames)))
        };
        let full = place(&[
            java("Shop.serve", "compiled", false),
            java("java.lang.VirtualThread.run", "interpreted", false),
        ]);
        assert_eq!(
            full,
            [
                "jdk.internal.misc.Unsafe.park",
                "java.lang.Thread.sleep",
                "Shop$PriceCache.refresh"
            ]
        );
        let frozen = [java(
            "[callers frozen in the virtual thread's stack chunk]",
            "stub",
            false,
        )];
        assert_eq!(place(&frozen), full);
        assert_eq!(
            place(&[java("[more frames beyond the copied stack]", "", false)]),
            full
        );
        // A Runtime1 stub on the way into the monitor is how, not where.
        let mut stubbed = vec![java("[monitorenter_nofpu Runtime1 stub]", "stub", false)];
        stubbed.extend(top.iter().cloned());
        let frames: Vec<&Frame> = stubbed.iter().collect();
        let labels = StackLabels::new(&frames, monitor_frames(&frames));
        assert_eq!(site_place(&frames, &labels), full);
        // Another monitor holder is another place.
        let other = [java("Shop$Pool.take", "interpreted", true)];
        let frames: Vec<&Frame> = top[..2].iter().chain(&other).collect();
        let labels = StackLabels::new(&frames, monitor_frames(&frames));
        assert_ne!(site_place(&frames, &labels), full);
    }

    #[test]
    fn class_init_waits_are_named_by_the_lock_read_during_them() {
        use crate::events::Initializer;
        let ms = 1_000_000;
        let mut model = Model::default();
        make_carrier(&mut model, 1);
        model.names.insert(2, "worker-2".into());
        model.apply(&Event::MonitorClass {
            time_ns: 100 * ms,
            monitor: 0x20,
            class: "int[]".into(),
        });
        // Read during the first wait; the second, later, on the same monitor is another.
        model.apply(&Event::ClassInitLock {
            time_ns: 500 * ms,
            monitor: 0x20,
            class: "Shop$Fmt".into(),
            initializer: Some(Initializer {
                tid: 2,
                vthread: Some(9),
            }),
        });
        model.apply(&Event::OffCpu(init_lock_wait(100, 1000)));
        model.apply(&Event::OffCpu(init_lock_wait(3000, 100)));
        let events = Analysis::new(&model).pinned_events().to_vec();
        let reasons: Vec<Reason> = events.iter().map(|e| e.reason).collect();
        assert_eq!(reasons, [Reason::ClassInit, Reason::Monitor]);
        let sites = pinned_sites(&model, &events);
        let init = sites
            .iter()
            .find(|s| s.reason == Reason::ClassInit)
            .unwrap();
        let said = monitors_said(
            &init.monitor_classes,
            &init.class_monitors,
            &init.class_inits,
        );
        assert_eq!(
            said.as_deref(),
            Some("waiting for the initialization of Shop$Fmt by worker-2 (virtual thread #9)")
        );
        let other = sites.iter().find(|s| s.reason == Reason::Monitor).unwrap();
        assert!(other.class_inits.is_empty());
    }

    #[test]
    fn an_initializer_read_without_its_virtual_thread_is_the_one_read_with_it() {
        use super::{InitWaitedFor, add_init};
        use crate::analysis::monitors::InitializerThread;
        let init = |tid, vthread| InitWaitedFor {
            class: "Shop$Fmt".into(),
            initializer: Some(InitializerThread {
                tid,
                name: format!("worker-{tid}"),
                vthread,
            }),
        };
        let mut inits = Default::default();
        add_init(&mut inits, init(2, None));
        add_init(&mut inits, init(2, Some(9)));
        add_init(&mut inits, init(2, None));
        add_init(&mut inits, init(3, None));
        let said: Vec<String> = inits.iter().map(|i| i.to_string()).collect();
        assert_eq!(
            said,
            [
                "Shop$Fmt by worker-2 (virtual thread #9)",
                "Shop$Fmt by worker-3"
            ]
        );
        // Across sites: one site's waits all raced the mount, another's named it.
        let site = |inits: Vec<InitWaitedFor>| PinnedSite {
            class_inits: inits.into_iter().collect(),
            ..PinnedSite::new(
                Reason::ClassInit,
                Operation::ObjectWait,
                StackLabels::default(),
            )
        };
        let mut sites = [
            site(vec![init(2, None), init(3, None)]),
            site(vec![init(2, Some(9))]),
        ];
        super::name_inits_across(&mut sites);
        let said: Vec<String> = sites[0].class_inits.iter().map(|i| i.to_string()).collect();
        assert_eq!(
            said,
            [
                "Shop$Fmt by worker-2 (virtual thread #9)",
                "Shop$Fmt by worker-3"
            ]
        );
    }
}
