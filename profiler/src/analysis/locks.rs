//! Locks and system calls: long futex waits grouped by the word they wait on, with the
//! threads that released them and where (the holders' release stacks), kernel lock
//! contention, and system call time by call and by file.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::kinds::LockKind;
use crate::events::{BlockerOwner, Frame, FrameKind, ParkBlocker, Syscall};
use crate::model::{Model, add};

/// A lock: a futex word of the target, or a kernel lock its threads contended on.
#[derive(Clone, Debug, PartialEq)]
pub struct LockRow {
    pub address: u64,
    pub kind: LockKind,
    /// The kernel symbol of a static kernel lock.
    pub symbol: Option<String>,
    pub waits: u64,
    pub wait_ns: u64,
    pub max_wait_ns: u64,
    /// Waits still under way when the recording stopped, on a Java object that has a row
    /// (not in `waits`: nothing released them yet). A waiter the barging of a non-fair lock
    /// left parked through the whole window is the longest waiter of all.
    pub waiting_at_end: u64,
    /// Threads that waited, or still wait, by name.
    pub waiters: BTreeSet<String>,
    /// Threads that released waiters: (tid, name, waits released, wait time released), most
    /// first.
    pub holders: Vec<(u32, String, u64, u64)>,
    /// The top holder's stack as it released (native, then Java frames), innermost first.
    pub holder_frames: Vec<String>,
    /// A waiter's stack: the longest wait's with a Java stack, else the longest wait's.
    pub waiter_frames: Vec<String>,
    /// Waits of the JVM's or the JDK's own threads for work (see `jdk::jdk_own_threads`),
    /// or waits those threads ended (a socket poller waking a reader): no lock of the
    /// application's.
    pub jvm_internal: bool,
    /// For parks on a `java.util.concurrent` object (`Thread.parkBlocker`, read during the
    /// waits): the object, its class and owner. All its waiters' waits are this one row
    /// (each parked thread sleeps on a futex of its own).
    pub java: Option<JavaLock>,
}

/// A `java.util.concurrent` lock (or latch, condition...) threads parked on.
#[derive(Clone, Debug, PartialEq)]
pub struct JavaLock {
    pub class: String,
    pub kind: JavaLockKind,
    /// Its owner as last read during a wait (ownable synchronizers held exclusively).
    pub owner: Option<BlockerOwner>,
}

/// What kind of Java lock a row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JavaLockKind {
    /// An `AbstractOwnableSynchronizer` (a `ReentrantLock`'s sync, a write lock): it has an
    /// owner while held exclusively.
    Ownable,
    /// Anything else parked on: a latch, a semaphore, a condition, a future.
    Other,
    /// A monitor (`synchronized`) virtual threads waited on unmounted (JDK 24+).
    Monitor,
}

impl JavaLockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ownable => "ownable",
            Self::Other => "other",
            Self::Monitor => "monitor",
        }
    }
}

/// How an owner's state reads: a virtual thread mounted or not (unmounted, it needs a carrier
/// to let go), or a platform thread.
pub fn owner_state(owner: &BlockerOwner) -> &'static str {
    match (owner.virtual_thread, owner.tid) {
        (true, Some(_)) => "mounted",
        (true, None) => "unmounted",
        (false, _) => "platform",
    }
}

impl LockRow {
    /// A lock whose release ended a wait of `threshold_ns` or more; the JVM's own threads
    /// waiting for work hold nothing up.
    pub fn long_held(&self, threshold_ns: u64) -> bool {
        !self.jvm_internal && self.max_wait_ns >= threshold_ns
    }
}

/// What a futex lock row stands for: a futex word, or the Java object its waiters parked on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum LockKey {
    Word(u64),
    Blocker(u64),
}

/// An owner as people read it: `teller-3 (tid 812)`, `virtual thread #25 (unmounted: it
/// needs a carrier to let go)`.
pub fn owner_label(o: &BlockerOwner) -> String {
    let name = o
        .name
        .as_deref()
        .map(|n| format!(" {n}"))
        .unwrap_or_default();
    match (o.virtual_thread, o.tid) {
        (true, Some(tid)) => format!("virtual thread #{}{name} (mounted on tid {tid})", o.java_id),
        (true, None) => format!(
            "virtual thread #{}{name} (unmounted: it needs a carrier to let go)",
            o.java_id
        ),
        (false, Some(tid)) => format!("{} (tid {tid})", name.trim_start()),
        (false, None) => format!("{} (thread #{})", name.trim_start(), o.java_id),
    }
}

/// What makes a lock wait the JDK's own (see `jdk_internal_wait`).
struct Internal {
    threads: HashSet<u32>,
    no_java: HashMap<u32, BTreeSet<u64>>,
}

/// Time spent in one system call, long calls and short ones together.
#[derive(Clone, Debug, PartialEq)]
pub struct SyscallRow {
    pub name: String,
    pub events: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Calls at least as long as the recording's threshold, recorded one by one.
    pub long_events: u64,
    /// Long calls by the file they used: (name, calls, time), most time first.
    pub files: Vec<(String, u64, u64)>,
    /// Calls of the JVM's or the JDK's own threads (see `jdk::jdk_own_threads`; a long one
    /// under the application's code is the application's): their waits for work (the
    /// Attach Listener's `accept`, which pinprof's own attach starts) are a row of their
    /// own, after the application's.
    pub jvm_internal: bool,
}

/// Long futex waits in all, by how they ended and by operation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FutexSummary {
    pub waits: u64,
    pub total_ns: u64,
    /// Ended by another thread of the target (lock waits).
    pub released: u64,
    /// Ended by their timeout (`-ETIMEDOUT`).
    pub timed_out: u64,
    /// Ended by a signal (`-EINTR`).
    pub interrupted: u64,
    /// Still waiting when the recording stopped (a deadlock's waits are here).
    pub unfinished: u64,
    /// (operation, waits), most first.
    pub by_op: Vec<(&'static str, u64)>,
}

/// The name of a `futex(2)` operation (the command, without the private/clock flags).
fn futex_op_name(nr: u32, op: u64) -> &'static str {
    use profiler_ebpf::{futex_op, sysno};
    match nr {
        sysno::FUTEX_WAITV => return "waitv",
        sysno::FUTEX_WAIT => return "wait",
        _ => {}
    }
    match op & futex_op::CMD_MASK {
        futex_op::WAIT => "wait",
        futex_op::WAIT_BITSET => "wait_bitset",
        futex_op::LOCK_PI => "lock_pi",
        futex_op::LOCK_PI2 => "lock_pi2",
        futex_op::WAIT_REQUEUE_PI => "wait_requeue_pi",
        _ => "other",
    }
}

/// Every long futex wait, summed.
pub fn futex_summary(model: &Model) -> FutexSummary {
    const EINTR: i64 = 4;
    let clocks = unix_minus_mono(model);
    let mut out = FutexSummary::default();
    let mut ops: BTreeMap<&'static str, u64> = BTreeMap::new();
    for s in &model.syscalls {
        let Some(f) = &s.futex else {
            continue;
        };
        out.waits += 1;
        add(&mut out.total_ns, s.duration_ns());
        if s.unfinished {
            out.unfinished += 1;
        } else if s.timed_out(clocks) {
            out.timed_out += 1;
        } else if s.result() == Some(-EINTR) {
            out.interrupted += 1;
        }
        *ops.entry(futex_op_name(s.nr, f.op)).or_default() += 1;
    }
    out.released = lock_waits(model).count() as u64;
    out.by_op = ops.into_iter().collect();
    out.by_op.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    out
}

/// The recording's wall clock less its monotonic one.
fn unix_minus_mono(model: &Model) -> i64 {
    (i128::from(model.start_unix_ns) - i128::from(model.start_mono_ns)) as i64
}

/// Long futex waits that another thread of the target ended: lock waits. (Waits that
/// timed out, or that a signal or another process ended, are not waits for a holder.
/// A timeout's wake-up runs in whatever thread its timer interrupted, which may be a
/// thread of the target inside a futex call of its own: the result tells them apart, or
/// where it was not seen, the wait's timeout.)
pub fn lock_waits(model: &Model) -> impl Iterator<Item = &Syscall> {
    let clocks = unix_minus_mono(model);
    model.syscalls.iter().filter(move |s| {
        s.result().is_none_or(|r| r >= 0)
            && !s.timed_out(clocks)
            && s.futex
                .as_ref()
                .and_then(|f| f.waker.as_ref())
                .is_some_and(|w| w.tid != s.tid)
    })
}

/// The starts of the off-CPU intervals, by thread, in which a Java thread had no Java
/// frame on its stack (an empty anchor): it was starting, ending, or the JVM's own.
fn waits_without_java_frames(model: &Model) -> HashMap<u32, BTreeSet<u64>> {
    let mut out: HashMap<u32, BTreeSet<u64>> = HashMap::new();
    for o in &model.off_cpu {
        if o.java().is_some_and(|j| !j.java_frames) {
            out.entry(o.tid).or_default().insert(o.start_ns);
        }
    }
    out
}

/// The lock waits (see `lock_waits`) that are no wait on a monitor or for a class
/// initialization (see `waits_on_monitors`): what the lock rows, the lock flamegraph and
/// pprof's lock time count.
pub fn lock_waits_not_on_monitors(model: &Model) -> impl Iterator<Item = &Syscall> {
    let on_monitors = waits_on_monitors(model);
    lock_waits(model).filter(move |s| {
        on_monitors
            .get(&s.tid)
            .is_none_or(|starts| starts.range(s.start_ns..=s.end_ns).next().is_none())
    })
}

/// The starts of the off-CPU intervals, by thread, that the views explain as waits on a
/// monitor: entering a contended `synchronized`, or waiting for another thread's class
/// initialization (on its init lock's monitor). Their futex waits are those (a monitor
/// parks each waiter on a futex of its own), counted there, not again as anonymous locks.
fn waits_on_monitors(model: &Model) -> HashMap<u32, BTreeSet<u64>> {
    let mut out: HashMap<u32, BTreeSet<u64>> = HashMap::new();
    for o in &model.off_cpu {
        let Some(j) = o.java() else {
            continue;
        };
        if j.pending_monitor.is_some()
            || super::classify::waits_for_class_init(model, o, model.java_stack(o))
        {
            out.entry(o.tid).or_default().insert(o.start_ns);
        }
    }
    out
}

/// A wait in the JVM's own code alone: no Java frame, and every native frame in libjvm
/// or the C library (a thread starting before the JVM lists it, a safepoint): the JVM's
/// machinery, whichever thread waits. Code of the application's own (JNI) is elsewhere.
fn in_the_jvm_alone(model: &Model, s: &Syscall) -> bool {
    if model.jdk_major().is_none() {
        return false;
    }
    let java = model
        .java_stack_within(s.tid, s.start_ns, s.end_ns)
        .and_then(|id| model.stacks.get(&id))
        .is_some_and(|frames| !frames.is_empty());
    let file = |f: &Frame| {
        let module = f.module.as_deref().unwrap_or("");
        module.rsplit('/').next().unwrap_or(module).to_string()
    };
    let jvm = |f: &Frame| file(f).starts_with("libjvm.so");
    let jvm_or_libc = |f: &Frame| {
        ["libjvm.so", "libc.so", "libpthread.so"]
            .iter()
            .any(|lib| file(f).starts_with(lib))
    };
    // (A stack cut short in the C library says nothing: the JVM's own code must show.)
    !java
        && s.user_stack
            .and_then(|id| model.stacks.get(&id))
            .is_some_and(|frames| frames.iter().any(jvm) && frames.iter().all(jvm_or_libc))
}

/// A lock wait that is the JDK's business, not the application's: a wait of one of the
/// JDK's own threads with no application frame under it (a finalizer or a cleaner may
/// run the application's code, and wait for its locks), a wait one of them ended (a
/// socket poller waking a reader is no lock's release), a wait of a Java thread with no
/// Java frame under it (a new thread waiting for its start), or a wait in the JVM's own
/// code alone.
fn jdk_internal_wait(model: &Model, s: &Syscall, own: &Internal) -> bool {
    // One of the JDK's threads ended the wait: no lock's release, unless it was running
    // the application's code then (a timer's or a cleaner's task releasing its lock).
    let waker = s.futex.as_ref().and_then(|f| f.waker.as_ref());
    if waker.is_some_and(|w| own.threads.contains(&w.tid))
        && !model
            .holder_frames(s)
            .iter()
            .any(|f| super::jdk::is_application_frame(f))
    {
        return true;
    }
    if in_the_jvm_alone(model, s) {
        return true;
    }
    if own
        .no_java
        .get(&s.tid)
        .is_some_and(|starts| starts.range(s.start_ns..=s.end_ns).next().is_some())
    {
        return true;
    }
    own.threads.contains(&s.tid)
        && !model
            .java_stack_within(s.tid, s.start_ns, s.end_ns)
            .and_then(|id| model.stacks.get(&id))
            .is_some_and(|frames| frames.iter().any(super::jdk::is_application_frame))
}

/// Locks by wait time, most first: futex words from long waits, then kernel locks; the
/// JVM's own waits for work last. Waits on monitors and for class initialization are not
/// here: the views name them by their monitor or class (see `waits_on_monitors`).
/// `own`: the JVM's and the JDK's own threads (`jdk::jdk_own_threads`).
pub fn locks(model: &Model, own: &HashSet<u32>) -> Vec<LockRow> {
    #[derive(Default)]
    struct Acc<'a> {
        waits: u64,
        wait_ns: u64,
        waiting_at_end: u64,
        longest: Option<&'a Syscall>,
        /// Every wait, for the waiter's stack.
        all: Vec<&'a Syscall>,
        waiters: BTreeSet<String>,
        holders: HashMap<u32, (u64, u64)>,
        /// The waits each holder released, for its stack.
        releases: HashMap<u32, Vec<&'a Syscall>>,
    }
    // A word's waits for the JDK's own threads are a row of their own, apart from its
    // waits for the application's (a carrier's parker serves both).
    let own = Internal {
        threads: own.clone(),
        no_java: waits_without_java_frames(model),
    };
    // Parks on one java.util.concurrent object are one row whatever futex each waiter
    // slept on (its own parker's): keyed by the object, the latest reading of it standing.
    let mut by_word: BTreeMap<(LockKey, bool), Acc> = BTreeMap::new();
    let mut blockers: HashMap<u64, &ParkBlocker> = HashMap::new();
    // Its owner: as last read during a wait (the kernel's readings at the block have none).
    let mut owners: HashMap<u64, (u64, &BlockerOwner)> = HashMap::new();
    // A wait whose blocker went unread (the thread was not yet known to the kernel as a Java
    // thread, the class read failed) parked on what the same thread parked on from the same
    // place, on the same parker: the one object seen there, if only one was.
    let site = |s: &Syscall| {
        let futex = s.futex.as_ref().expect("futex wait");
        (
            s.tid,
            futex.uaddr,
            model.java_stack_within(s.tid, s.start_ns, s.end_ns),
        )
    };
    let mut seen_at: HashMap<(u32, u64, Option<crate::events::StackId>), Option<u64>> =
        HashMap::new();
    for s in lock_waits(model) {
        if let Some((_, b)) = model.park_blocker_reading(s.tid, s.start_ns, s.end_ns) {
            let one = seen_at.entry(site(s)).or_insert(Some(b.object));
            if *one != Some(b.object) {
                *one = None;
            }
        }
    }
    for s in lock_waits_not_on_monitors(model) {
        let futex = s.futex.as_ref().expect("futex wait");
        let internal = jdk_internal_wait(model, s, &own);
        let reading = model.park_blocker_reading(s.tid, s.start_ns, s.end_ns);
        let inherited = || seen_at.get(&site(s)).copied().flatten();
        let key = match reading {
            None => match inherited() {
                Some(object) => LockKey::Blocker(object),
                None => LockKey::Word(futex.uaddr),
            },
            Some((at, b)) => {
                blockers.entry(b.object).or_insert(b);
                if let Some(owner) = &b.owner {
                    let seen = owners.entry(b.object).or_insert((at, owner));
                    if at >= seen.0 {
                        *seen = (at, owner);
                    }
                }
                LockKey::Blocker(b.object)
            }
        };
        let acc = by_word.entry((key, internal)).or_default();
        let d = s.duration_ns();
        acc.waits += 1;
        add(&mut acc.wait_ns, d);
        if acc.longest.is_none_or(|l| l.duration_ns() < d) {
            acc.longest = Some(s);
        }
        acc.all.push(s);
        acc.waiters.insert(model.thread_name(s.tid));
        if let Some(w) = &futex.waker {
            let h = acc.holders.entry(w.tid).or_default();
            h.0 += 1;
            add(&mut h.1, d);
            acc.releases.entry(w.tid).or_default().push(s);
        }
    }
    // Parks still under way at the end join the row of the object they park on, if it has
    // one: a thread parked on a lock others took and released meanwhile waits on it (a
    // park on an object no wait was released from, a worker idle on its queue, is none).
    for s in model
        .syscalls
        .iter()
        .filter(|s| s.unfinished && s.futex.is_some())
    {
        let Some((_, b)) = model.park_blocker_reading(s.tid, s.start_ns, s.end_ns) else {
            continue;
        };
        let internal = jdk_internal_wait(model, s, &own);
        if let Some(acc) = by_word.get_mut(&(LockKey::Blocker(b.object), internal)) {
            acc.waiting_at_end += 1;
            acc.waiters.insert(model.thread_name(s.tid));
        }
    }
    let labels = |frames: Vec<&Frame>| frames.iter().map(|f| f.label()).collect::<Vec<_>>();
    let hotspot = model.jdk_major().is_some();
    let mut rows: Vec<LockRow> = by_word
        .into_iter()
        .map(|((key, internal), acc)| {
            let (address, java) = match key {
                LockKey::Word(w) => (w, None),
                LockKey::Blocker(object) => (
                    object,
                    blockers.get(&object).map(|b| JavaLock {
                        class: b.class.clone(),
                        kind: if b.ownable {
                            JavaLockKind::Ownable
                        } else {
                            JavaLockKind::Other
                        },
                        owner: owners.get(&object).map(|(_, o)| (*o).clone()),
                    }),
                ),
            };
            let mut holders: Vec<(u32, u64, u64)> = acc
                .holders
                .iter()
                .map(|(t, (n, ns))| (*t, *n, *ns))
                .collect();
            holders.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
            // The top holder's release stack: from its longest release whose stacks were
            // captured (the kernel captures them within a budget), one with its Java
            // frames first (they say where; a copy missed leaves the native ones alone).
            let holder_frames = holders
                .first()
                .and_then(|(t, _, _)| acc.releases.get(t))
                .map(|releases| {
                    let mut releases = releases.clone();
                    releases.sort_by_key(|s| std::cmp::Reverse(s.duration_ns()));
                    let stacks = releases.iter().map(|s| model.holder_frames(s));
                    let with_java = stacks
                        .clone()
                        .find(|frames| frames.iter().any(|f| f.kind == FrameKind::Java));
                    with_java
                        .or_else(|| stacks.clone().find(|frames| !frames.is_empty()))
                        .map(labels)
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            LockRow {
                address,
                kind: LockKind::Futex,
                symbol: None,
                waits: acc.waits,
                wait_ns: acc.wait_ns,
                max_wait_ns: acc.longest.map_or(0, |s| s.duration_ns()),
                waiting_at_end: acc.waiting_at_end,
                holders: holders
                    .into_iter()
                    .map(|(t, n, ns)| (t, model.thread_name(t), n, ns))
                    .collect(),
                holder_frames,
                // A wait only counts as off CPU (and gets its Java stack walked) for
                // the part it slept: on a busy machine the longest wait may have spent
                // most of itself waiting for a CPU after its wake-up.
                waiter_frames: {
                    let java = |f: &Vec<&Frame>| f.iter().any(|f| f.kind == FrameKind::Java);
                    let mut waits = if hotspot { acc.all.clone() } else { Vec::new() };
                    waits.sort_by_key(|s| std::cmp::Reverse(s.duration_ns()));
                    waits
                        .iter()
                        .map(|s| model.waiter_frames(s))
                        .find(java)
                        .or_else(|| acc.longest.map(|s| model.waiter_frames(s)))
                        .map(labels)
                        .unwrap_or_default()
                },
                jvm_internal: internal,
                waiters: acc.waiters,
                java,
            }
        })
        .collect();
    rows.extend(model.kernel_locks.iter().map(|k| LockRow {
        address: k.addr,
        kind: LockKind::Kernel,
        symbol: k.symbol.clone(),
        waits: k.count,
        wait_ns: k.total_ns,
        max_wait_ns: k.max_ns,
        waiting_at_end: 0,
        waiters: BTreeSet::new(),
        holders: Vec::new(),
        holder_frames: Vec::new(),
        waiter_frames: Vec::new(),
        jvm_internal: false,
        java: None,
    }));
    rows.extend(super::unmounted::lock_rows(model));
    // The application's locks first: the JVM's threads waiting for work would lead
    // otherwise (a JIT compiler idles on its queue for seconds).
    rows.sort_by(|a, b| {
        (a.jvm_internal.cmp(&b.jvm_internal))
            .then(b.wait_ns.cmp(&a.wait_ns))
            .then(a.address.cmp(&b.address))
    });
    rows
}

/// System call time by call, most first: long calls (events) and short ones (sums).
pub fn syscall_rows(model: &Model, own: &HashSet<u32>) -> Vec<SyscallRow> {
    let mut rows: BTreeMap<(bool, &str), SyscallRow> = BTreeMap::new();
    let mut files: HashMap<(bool, &str, &str), (u64, u64)> = HashMap::new();
    for s in &model.syscalls {
        // A long call under the application's code (a cleaner or a timer running its task)
        // is the application's.
        let internal =
            own.contains(&s.tid) && super::jdk::waits_for_work(own, s.tid, &model.waiter_frames(s));
        let r = rows
            .entry((internal, &s.name))
            .or_insert_with(|| empty_row(&s.name, internal));
        let d = s.duration_ns();
        r.events += 1;
        r.long_events += 1;
        add(&mut r.total_ns, d);
        r.max_ns = r.max_ns.max(d);
        if let Some(fd) = &s.fd {
            let f = files.entry((internal, &s.name, fd)).or_default();
            f.0 += 1;
            add(&mut f.1, d);
        }
    }
    for ((tid, _), sum) in &model.syscall_sums {
        let internal = own.contains(tid);
        let r = rows
            .entry((internal, &sum.name))
            .or_insert_with(|| empty_row(&sum.name, internal));
        add(&mut r.events, sum.count);
        add(&mut r.total_ns, sum.total_ns);
        r.max_ns = r.max_ns.max(sum.max_ns);
    }
    for ((internal, name, file), (n, ns)) in files {
        if let Some(r) = rows.get_mut(&(internal, name)) {
            r.files.push((file.to_string(), n, ns));
        }
    }
    let mut rows: Vec<SyscallRow> = rows.into_values().collect();
    for r in &mut rows {
        r.files.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    }
    // The application's calls first, the JVM's own waits for work after them.
    rows.sort_by(|a, b| {
        (a.jvm_internal.cmp(&b.jvm_internal))
            .then(b.total_ns.cmp(&a.total_ns))
            .then(a.name.cmp(&b.name))
    });
    rows
}

fn empty_row(name: &str, jvm_internal: bool) -> SyscallRow {
    SyscallRow {
        name: name.to_string(),
        events: 0,
        total_ns: 0,
        max_ns: 0,
        long_events: 0,
        files: Vec::new(),
        jvm_internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::jdk::jdk_own_threads;

    #[test]
    fn a_timed_out_futex_wait_is_no_lock_wait_whoever_ran_its_wake_up() {
        let wait = |ret: i64| crate::events::Syscall {
            tid: 1,
            nr: 202,
            name: "futex".into(),
            args: [0x1000, 0, 0, 0],
            start_ns: 0,
            end_ns: 5_000_000,
            ret,
            user_stack: None,
            fd: None,
            futex: Some(crate::events::FutexWait {
                uaddr: 0x1000,
                op: 0,
                timeout_ns: Some(5_000_000),
                // The timer interrupted thread 2 inside a futex call of its own.
                waker: Some(crate::events::FutexWaker {
                    tid: 2,
                    wake_ns: 5_000_000,
                    user_stack: None,
                    kernel_stack: None,
                }),
            }),
            unfinished: false,
        };
        let model = Model {
            syscalls: vec![wait(-110), wait(0)],
            ..Default::default()
        };
        let released: Vec<i64> = lock_waits(&model).map(|s| s.ret).collect();
        assert_eq!(released, vec![0]);
        assert_eq!(locks(&model, &jdk_own_threads(&model))[0].waits, 1);

        // The same wait entering a contended monitor (any monitor, the largest address
        // too): the monitor's, counted by the views that name it, not a lock row.
        let mut model = model;
        model.syscalls.retain(|s| s.ret == 0);
        let mut entering = crate::model::tests::parked(1, 0, 5, Some(7));
        if let Some(j) = &mut entering.java {
            j.pending_monitor = Some(u64::MAX);
        }
        model.off_cpu.push(entering.into());
        assert_eq!(lock_waits(&model).count(), 1);
        assert_eq!(lock_waits_not_on_monitors(&model).count(), 0);
        assert!(locks(&model, &jdk_own_threads(&model)).is_empty());
    }

    /// Three threads park on one object: one released, one parked through the whole window
    /// (still waiting at the end), and one parked at the end on an object no wait was
    /// released from (an idle worker): that one is no lock's waiter.
    #[test]
    fn a_park_under_way_at_the_end_joins_its_objects_row() {
        use crate::events::{FutexWait, FutexWaker, ParkBlocker};
        let ms = 1_000_000;
        let park = |tid: u32, start_ms: u64, waker: Option<u32>| Syscall {
            tid,
            nr: 202,
            name: "futex".into(),
            args: [0x1000 * u64::from(tid), 0, 0, 0],
            start_ns: start_ms * ms,
            end_ns: 100 * ms,
            ret: 0,
            user_stack: None,
            fd: None,
            futex: Some(FutexWait {
                uaddr: 0x1000 * u64::from(tid),
                op: 0,
                timeout_ns: None,
                waker: waker.map(|tid| FutexWaker {
                    tid,
                    wake_ns: 100 * ms,
                    user_stack: None,
                    kernel_stack: None,
                }),
            }),
            unfinished: waker.is_none(),
        };
        let blocker = |object: u64| ParkBlocker {
            object,
            class: "java.util.concurrent.locks.ReentrantLock$NonfairSync".into(),
            ownable: true,
            owner: None,
        };
        let mut model = Model {
            syscalls: vec![park(1, 50, Some(9)), park(2, 0, None), park(3, 0, None)],
            ..Default::default()
        };
        for (tid, object) in [(1, 0xa0), (2, 0xa0), (3, 0xb0)] {
            model
                .park_blockers
                .entry(tid)
                .or_default()
                .insert(60 * ms, blocker(object));
        }
        let rows = locks(&model, &jdk_own_threads(&model));
        assert_eq!(rows.len(), 1, "{rows:#?}");
        assert_eq!(rows[0].address, 0xa0);
        assert_eq!((rows[0].waits, rows[0].waiting_at_end), (1, 1));
        assert_eq!(rows[0].waiters.len(), 2);
    }
}
