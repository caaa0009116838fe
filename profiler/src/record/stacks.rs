//! Stacks: the kernel's named once and written before their first use, native stacks
//! unwound by DWARF, Java stacks walked, each stack made in user space interned by its frames.

use std::collections::HashMap;

use anyhow::Result;

use super::{
    Session,
    stack_ids::{Held, Resolved, Slot, StackIds},
};
use crate::{
    budget::{self, Bounded, Cut},
    events::{Event, Frame, FrameKind, Stack},
    jvm::{
        chunk::Frozen,
        walk::{CONTINUATION_ENTRY, Tier},
    },
    mappings::MapsWatch,
    symbolize::Symbolizer,
    unwind::NativeUnwinder,
};

/// The stacks written so far, and the native stacks unwound for events still to come.
pub(super) struct Stacks {
    /// The kernel's stack ids, as the recording names them (see `stack_ids`).
    ids: StackIds,
    /// The kernel's stacks written so far, by kernel or user side and addresses: the same
    /// stack taken again after the kernel's map was emptied keeps its id in the recording
    /// (forgotten as `own` is, then written again under a new id).
    kernel: Bounded<(bool, Vec<u64>), u32>,
    /// The kernel's stack misses counted when the map was last emptied, and when that was.
    misses_seen: u64,
    emptied_at: Option<std::time::Instant>,
    /// Stacks made in user space (Java walks, DWARF unwinds) written so far, by their frames;
    /// their ids start at `OWN_STACK_IDS`. A target makes as many as it likes: the ones not
    /// used for a while are forgotten, and written again (under a new id) when they come back.
    own: Bounded<Vec<Frame>, u32>,
    /// The id the next stack made in user space gets.
    next_own: u32,
    unwinder: NativeUnwinder,
    /// DWARF-unwound native stacks waiting for their event: (thread, key time) -> stack id.
    pending_native: HashMap<(u32, u64), u32>,
    /// Stack ids of the native stacks unwound so far, by their addresses (forgotten as
    /// `own`, whose ids they are).
    unwound: Bounded<Vec<u64>, u32>,
    /// The next id for a kernel stack in the recording.
    next_kernel_id: u32,
}

/// What a stack costs kept as a key of `own`.
fn frames_bytes(frames: &Vec<Frame>, _: &u32) -> u64 {
    let texts: u64 = frames
        .iter()
        .flat_map(|f| [&f.name, &f.module])
        .flatten()
        .map(|s| budget::heap_bytes(s))
        .sum();
    (frames.capacity() * std::mem::size_of::<Frame>()) as u64 + 16 + texts
}

fn addrs_bytes(addrs: &Vec<u64>, _: &u32) -> u64 {
    (addrs.capacity() * 8) as u64 + 16
}

fn kernel_bytes((_, addrs): &(bool, Vec<u64>), id: &u32) -> u64 {
    addrs_bytes(addrs, id) + 8
}

/// The stack tables' budget until `Stacks::set_budget` says.
const DEFAULT_BUDGET: u64 = 32 << 20;

impl Stacks {
    pub(super) fn new() -> Self {
        let (own, unwound, kernel) = Self::parts(DEFAULT_BUDGET);
        Self {
            ids: StackIds::default(),
            kernel: Bounded::new(kernel, kernel_bytes, None),
            misses_seen: 0,
            emptied_at: None,
            own: Bounded::new(own, frames_bytes, Some(Cut::StackForgotten)),
            next_own: OWN_STACK_IDS,
            unwinder: NativeUnwinder::new(),
            pending_native: HashMap::new(),
            unwound: Bounded::new(unwound, addrs_bytes, None),
            next_kernel_id: 0,
        }
    }

    /// Keeps the tables within `bytes` in all: most for the stacks' frames, an eighth each
    /// for the addresses that lead to them (unwound native stacks, the kernel's stacks).
    pub(super) fn set_budget(&mut self, bytes: u64) {
        let (own, unwound, kernel) = Self::parts(bytes);
        self.own.set_max_bytes(own);
        self.unwound.set_max_bytes(unwound);
        self.kernel.set_max_bytes(kernel);
    }

    fn parts(bytes: u64) -> (u64, u64, u64) {
        (bytes - bytes / 4, bytes / 8, bytes / 8)
    }

    /// The native stack unwound for the event of `tid` keyed by `key_ns`, if one was; taken.
    pub(super) fn take_native(&mut self, tid: u32, key_ns: u64) -> Option<u32> {
        self.pending_native.remove(&(tid, key_ns))
    }
}

/// Stacks made in user space (Java walks, DWARF unwinds) get ids of their own, above those
/// of the kernel's stacks.
const OWN_STACK_IDS: u32 = 1 << 31;

/// The kernel's stack map is emptied at most this often for the stacks it refused (see
/// `Session::keep_stack_map_roomy`).
const EMPTY_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Unwound native stacks kept for events still to come; more means they were never claimed.
const MAX_PENDING_NATIVE: usize = 4096;

/// A kernel stack taken in a raw tracepoint begins with the program and the tracepoint's
/// own frames (`bpf_prog_...`, `bpf_trace_run4`, `__traceiter_sched_switch`): what the
/// thread was doing starts below them.
fn without_tracing_frames(mut frames: Vec<Frame>) -> Vec<Frame> {
    let tracing = |f: &Frame| {
        f.name.as_deref().is_some_and(|n| {
            n.starts_with("bpf_prog_")
                || n.starts_with("bpf_trace_run")
                || n.starts_with("__traceiter_")
                || n.starts_with("__bpf_trace_")
        })
    };
    let n = frames.iter().take_while(|f| tracing(f)).count();
    frames.drain(..n);
    frames
}

/// Cuts every name of a stack (symbols, modules: a C++ template's name, a path) to a name's
/// length.
fn cut_names(frames: &mut [Frame]) {
    for f in frames {
        for text in [&mut f.name, &mut f.module].into_iter().flatten() {
            budget::cut_name(text);
        }
    }
}

/// Threads looked at per pass for a Java stack to read, at most (a map look-up each).
const MAX_STACK_READS: usize = 256;

/// Where the kernel's copies of each carrier's mounted virtual thread's stack end, learned
/// from the walks: the walk of such a stack ends at its continuation's entry frame
/// (`enterSpecial`), whose place on a carrier's stack is the same from one virtual thread to
/// the next (the carrier's own frames below it do not change), so the carrier's frames below
/// it (most of the copy) are left out of the next copies. A walk that wants more than the copy
/// holds (the carrier's frames did change) unlearns it.
#[derive(Default)]
pub(super) struct CopyEnds {
    ends: HashMap<u32, u64>,
}

/// Kept past the highest word the walk read: room for the entry frame to move a little.
const COPY_END_SLACK: u64 = 1024;

impl CopyEnds {
    /// A walk of carrier `tid`'s mounted virtual thread's stack read up to `reach`, wanted
    /// more (`overran`) or not, and ended at the continuation's entry or not: the new end of
    /// its copies, if it changes (`Some(None)`: to the stack's base).
    pub(super) fn walked(
        &mut self,
        tid: u32,
        reach: u64,
        overran: bool,
        at_entry: bool,
    ) -> Option<Option<u64>> {
        match self.ends.get(&tid) {
            Some(_) if overran => {
                self.ends.remove(&tid);
                Some(None)
            }
            None if at_entry && !overran => {
                let end = reach.saturating_add(COPY_END_SLACK) & !15;
                self.ends.insert(tid, end);
                Some(Some(end))
            }
            _ => None,
        }
    }

    /// The thread ended: whether it had an end to forget.
    pub(super) fn forget(&mut self, tid: u32) -> bool {
        self.ends.remove(&tid).is_some()
    }
}

/// Java stacks of other threads' long waits, read from user space (see
/// `read_blocked_java_stacks`).
pub(super) struct BlockedStacks {
    /// Whether they are read here: a JVM, and no system-call programs to copy them.
    pub(super) on: bool,
    /// Waits at least this long get a stack.
    pub(super) min_ns: u64,
    /// Per thread, the start of the wait whose stack was read last.
    pub(super) read: HashMap<u32, u64>,
    /// Where in the thread list the next pass begins.
    pub(super) cursor: usize,
}

/// Up to `STACK_COPY_BYTES` of the target's stack from `sp` (less where the stack ends).
fn read_stack(mem: &std::fs::File, sp: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    let mut data = vec![0u8; profiler_ebpf::STACK_COPY_BYTES];
    let mut len = data.len();
    while len >= 512 {
        if mem.read_exact_at(&mut data[..len], sp).is_ok() {
            data.truncate(len);
            return Some(data);
        }
        len /= 2;
    }
    None
}

/// Reads the JVM library's symbols now, before the capture starts: the first stacks through
/// it otherwise take that time (a large symbol table) on the drain while events wait, new
/// threads among them, whose waits would go unknown as Java threads' until the JVM's list is
/// read again.
pub(super) fn warm_up(symbolizer: &mut Symbolizer, mappings: &mut MapsWatch) {
    let libjvm = mappings
        .latest()
        .iter()
        .find(|m| m.path.ends_with("/libjvm.so"))
        .map(|m| m.start);
    if let Some(addr) = libjvm {
        let _ = symbolizer.user(mappings, &[addr]);
    }
}

impl Session {
    /// The recording's id of the kernel's stack `id`, taken at `taken_ns`: named and written
    /// the first time, before any event uses it; `None` when there is none or it cannot be
    /// known (counted).
    pub(super) fn stack(&mut self, id: i32, kernel: bool, taken_ns: u64) -> Result<Option<u32>> {
        let Ok(id) = u32::try_from(id) else {
            return Ok(None);
        };
        match self.stacks.ids.resolve(id, taken_ns) {
            Resolved::Known(rec) => Ok(Some(rec)),
            Resolved::Lost => {
                self.capture.stack_lost();
                Ok(None)
            }
            Resolved::ReadMap => {
                let addrs = self.capture.stack(id).unwrap_or_default();
                let rec = self.kernel_stack(addrs, kernel)?;
                self.stacks.ids.named(id, rec);
                Ok(Some(rec))
            }
            Resolved::Read { emptying, addrs } => {
                let rec = self.kernel_stack(addrs, kernel)?;
                self.stacks.ids.named_at(emptying, id, rec);
                Ok(Some(rec))
            }
        }
    }

    /// The recording's id of a stack the kernel took, named and written the first time.
    fn kernel_stack(&mut self, addrs: Vec<u64>, kernel: bool) -> Result<u32> {
        let key = (kernel, addrs);
        if let Some(&rec) = self.stacks.kernel.get(&key) {
            return Ok(rec);
        }
        let id = self.stacks.next_kernel_id;
        self.stacks.next_kernel_id = (id + 1) % OWN_STACK_IDS;
        let frames = if kernel {
            without_tracing_frames(self.symbolizer.kernel(&key.1))
        } else {
            self.symbolizer.user(&mut self.mappings, &key.1)
        };
        self.stacks.kernel.insert(key, id);
        self.write_stack(id, frames)?;
        // Many new stacks in a batch are a map filling up: looked at as the batch goes.
        if id.is_multiple_of(128) {
            self.keep_stack_map_roomy();
        }
        Ok(id)
    }

    /// Empties the kernel's stack map when it is three quarters full with stacks read, or
    /// when it refused stacks since it was last emptied (full, or a collision: a bucket holds
    /// one stack, so a map a tenth full refuses a tenth of new stacks), at most every
    /// `EMPTY_EVERY`: a target with many distinct stacks would otherwise leave later waits
    /// without theirs. A target whose stacks repeat never gets here.
    pub(super) fn keep_stack_map_roomy(&mut self) {
        let entries = self.capture.stack_map_entries() as usize;
        let read = self.stacks.ids.read_since_emptied();
        let full = read * 4 >= entries * 3;
        let due = self
            .stacks
            .emptied_at
            .is_none_or(|at| at.elapsed() >= EMPTY_EVERY);
        if entries == 0 || !(full || due) {
            return;
        }
        let misses = self.capture.kernel_stack_misses();
        if !full && misses == self.stacks.misses_seen {
            return;
        }
        self.stacks.misses_seen = misses;
        self.stacks.emptied_at = Some(std::time::Instant::now());
        let ids = &self.stacks.ids;
        let emptied = self.capture.empty_stack_map(|id| ids.current(id).is_some());
        let deleted = emptied
            .deleted
            .into_iter()
            .filter_map(|(id, deleted_ns, addrs)| {
                let held = match addrs {
                    Some(addrs) => Held::Read(addrs),
                    None => Held::Named(self.stacks.ids.current(id)?),
                };
                Some((id, Slot { deleted_ns, held }))
            })
            .collect::<std::collections::HashMap<_, _>>();
        if std::env::var_os("PINPROF_DEBUG").is_some() {
            crate::say!(
                "pinprof: emptied the kernel's stack map ({read} stacks read since, {misses} \
                 refused so far): {} deleted",
                deleted.len(),
            );
        }
        self.stacks.ids.emptied(emptied.end_ns, deleted);
    }

    /// The id of a stack made in user space, writing it the first time (or the first time
    /// since it was forgotten).
    pub(super) fn own_stack(&mut self, mut frames: Vec<Frame>) -> Result<u32> {
        cut_names(&mut frames);
        if let Some(&id) = self.stacks.own.get(&frames) {
            return Ok(id);
        }
        // Ids past the last one start again: a stack forgotten that long ago is used by no
        // event still to come. (2^31 stacks of a recording: never in practice.)
        let id = self.stacks.next_own;
        self.stacks.next_own = id.checked_add(1).unwrap_or(OWN_STACK_IDS);
        self.stacks.own.insert(frames.clone(), id);
        self.write_stack(id, frames)?;
        Ok(id)
    }

    /// Writes a stack, every name in it cut to a name's length.
    fn write_stack(&mut self, id: u32, mut frames: Vec<Frame>) -> Result<()> {
        cut_names(&mut frames);
        self.writer.write_event(&Event::Stack(Stack { id, frames }))
    }

    /// Unwinds a native stack the kernel copied and keeps it for its event.
    pub(super) fn native_stack(&mut self, copy: &profiler_ebpf::NativeStackCopy) -> Result<()> {
        let len = (copy.len as usize).min(copy.data.len());
        let addrs = self.stacks.unwinder.unwind(
            &mut self.mappings,
            copy.ip,
            copy.sp,
            copy.bp,
            &copy.data[..len],
        );
        if addrs.is_empty() {
            return Ok(());
        }
        // The same addresses name the same frames: symbolize each stack once.
        let id = match self.stacks.unwound.get(&addrs) {
            Some(&id) => id,
            None => {
                let frames = self.symbolizer.user(&mut self.mappings, &addrs);
                let id = self.own_stack(frames)?;
                self.stacks.unwound.insert(addrs, id);
                id
            }
        };
        if self.stacks.pending_native.len() >= MAX_PENDING_NATIVE {
            // Unclaimed for a minute: their events were lost or never came.
            let horizon = copy.key_ns.saturating_sub(60_000_000_000);
            self.stacks
                .pending_native
                .retain(|(_, key), _| *key >= horizon);
        }
        self.stacks
            .pending_native
            .insert((copy.tid, copy.key_ns), id);
        Ok(())
    }

    /// Walks a Java stack the kernel copied (with its virtual thread's frozen frames, when it
    /// copied those too) and records its frames for the interval.
    pub(super) fn java_stack(
        &mut self,
        copy: &crate::capture::JavaStack,
        chunk: Option<(&profiler_ebpf::ChunkHead, &[u8])>,
    ) -> Result<()> {
        let Some(jvm) = &mut self.jvm else {
            return Ok(());
        };
        let head = &copy.head;
        let len = (head.len as usize).min(copy.data.len());
        if len == 0 {
            // The kernel could not read the stack (counted there as a miss).
            return Ok(());
        }
        let anchor = [head.anchor_sp, head.anchor_pc, head.anchor_fp];
        let frozen = (head.chunk != 0).then_some(Frozen {
            vthread: head.vthread,
            vthread_id: head.vthread_id,
            chunk: head.chunk,
            sp: head.chunk_sp,
        });
        let (walked, (reach, overran)) =
            jvm.hotspot
                .walk(head.anchor_sp, &copy.data[..len], anchor, frozen, chunk);
        if head.vthread != 0 {
            let at_entry = walked.last().is_some_and(|f| f.name == CONTINUATION_ENTRY);
            if let Some(end) = self.copy_ends.walked(head.tid, reach, overran, at_entry) {
                self.capture.set_copy_end(head.tid, end);
            }
        }
        if let Some(check) = &mut self.fp_check {
            // Unwinding: both walks must find the same compiled frames (by return address).
            // Naming: where the perf map knows a frame, it must give the same method.
            let ours: Vec<(u64, String)> = walked
                .iter()
                .filter(|f| matches!(f.tier, Tier::Compiled | Tier::Native))
                .map(|f| (f.pc, f.name.clone()))
                .collect();
            let chain = jvm
                .hotspot
                .frame_pointer_chain(head.anchor_sp, &copy.data[..len], anchor);
            let theirs: Vec<u64> = chain
                .into_iter()
                .filter(|&pc| jvm.hotspot.in_compiled_method(pc))
                .collect();
            let mut named = 0;
            let mut same = ours.len() == theirs.len();
            for (i, ((pc, name), their_pc)) in ours.iter().zip(&theirs).enumerate() {
                // Return addresses point after their call: look up the byte before.
                let lookup = if i == 0 { *their_pc } else { their_pc - 1 };
                let their_name = self.symbolizer.perf_map_method(lookup);
                named += usize::from(their_name.is_some());
                same &= pc == their_pc && their_name.as_ref().is_none_or(|n| n == name);
            }
            if named > 0 {
                check.compared += 1;
                if same {
                    check.agreed += 1;
                } else if check.first_difference.is_none() {
                    let names = |pcs: &[u64]| pcs.iter().map(|p| format!("{p:#x}")).collect();
                    let ours_named = ours.iter().map(|(p, n)| format!("{p:#x} {n}")).collect();
                    check.first_difference = Some((ours_named, names(&theirs)));
                }
            }
        }
        let frames = java_frames(walked);
        if frames.is_empty() {
            return Ok(());
        }
        let id = self.own_stack(frames)?;
        let sampled = matches!(
            copy.head.kind,
            profiler_ebpf::kind::SAMPLE_STACK_COPY | profiler_ebpf::kind::SAMPLE_STACK_CHUNK_COPY
        );
        let event = if sampled {
            Event::SampleStack {
                tid: copy.head.tid,
                time_ns: copy.head.start_ns,
                stack: id,
            }
        } else {
            Event::JavaStack {
                tid: copy.head.tid,
                start_ns: copy.head.start_ns,
                stack: id,
            }
        };
        self.writer.write_event(&event)
    }

    /// Without the system-call programs the kernel copies Java stacks as threads block: a
    /// pinned carrier's, and another thread's when its last wait was long (or once a
    /// millisecond per CPU, whatever its last wait). The long waits it
    /// did not copy have theirs read here, while they are still blocked: a blocked thread's
    /// stack does not move, and a copy is kept only if the same wait is still open once it is
    /// read (the waits already open as capture began at the first pass, right away). At most
    /// `MAX_STACK_READS` threads a pass; a wait that lasted two passes and still
    /// has no stack is counted as a Java stack missed (see `blocked_stack_done`).
    pub(super) fn read_blocked_java_stacks(&mut self) -> Result<()> {
        use profiler_ebpf::java_flags::{CARRIER, KNOWN, MOUNTED};
        if !self.blocked_stacks.on {
            return Ok(());
        }
        let Some(jvm) = &self.jvm else {
            return Ok(());
        };
        let now_ns = crate::capture::monotonic_ns();
        let min_ns = self.blocked_stacks.min_ns;
        let n = jvm.threads.len();
        let from = self.blocked_stacks.cursor % n.max(1);
        self.blocked_stacks.cursor = from + MAX_STACK_READS;
        if self.blocked_stacks.read.len() > 2 * n + 64 {
            let listed: std::collections::HashSet<u32> =
                jvm.threads.iter().map(|t| t.tid).collect();
            self.blocked_stacks
                .read
                .retain(|tid, _| listed.contains(tid));
        }
        let mut copies = Vec::new();
        for t in jvm
            .threads
            .iter()
            .cycle()
            .skip(from)
            .take(n.min(MAX_STACK_READS))
        {
            let Some(start) = self.capture.open_interval(t.tid) else {
                continue;
            };
            // A wait begun before the capture (its start is the capture's) may be long
            // already: read at once, since the kernel copies none as it ends.
            let before_capture = start.start_ns <= self.capture.started_ns();
            if start.prev_state == profiler_ebpf::task_state::RUNNING
                || start.flags & profiler_ebpf::wait_flags::STACK_COPIED != 0
                || (now_ns.saturating_sub(start.start_ns) < min_ns && !before_capture)
                || self.blocked_stacks.read.get(&t.tid) == Some(&start.start_ns)
            {
                continue;
            }
            // A wait begun before the kernel knew the thread: its state is read now (it has
            // not moved since).
            let mut start = start;
            if start.java.flags & KNOWN == 0 {
                match jvm.hotspot.java_state(t) {
                    Some(state) => start.java = state,
                    None => continue,
                }
            }
            // An idle carrier waits for work: its stack is the scheduler's. (A pinned one's is
            // read here only if the kernel did not copy it: it blocked before the capture
            // began, or before the kernel knew it as a carrier.)
            if start.java.flags & (CARRIER | MOUNTED) == CARRIER {
                continue;
            }
            self.blocked_stacks.read.insert(t.tid, start.start_ns);
            if let Some(mut copy) = self.open_java_stack(&start) {
                copy.head.tid = t.tid;
                copies.push(copy);
            }
        }
        for copy in copies {
            let still = self.capture.open_interval(copy.head.tid);
            if still.is_some_and(|s| s.start_ns == copy.head.start_ns) {
                self.java_stack(&copy, None)?;
            } else {
                // It ran on before its copy was checked: as good as unread.
                self.blocked_stacks.read.remove(&copy.head.tid);
            }
        }
        Ok(())
    }

    /// The kernel sent a copy of a Java stack: if it is one of a wait (not a sample's), that
    /// wait has its stack.
    pub(super) fn blocked_stack_copied(&mut self, head: &profiler_ebpf::StackHead) {
        use profiler_ebpf::kind::{STACK_CHUNK_COPY, STACK_COPY};
        if self.blocked_stacks.on && matches!(head.kind, STACK_COPY | STACK_CHUNK_COPY) {
            self.blocked_stacks.read.insert(head.tid, head.start_ns);
        }
    }

    /// An off-CPU interval ended: if it was one whose Java stack is read from user space and
    /// none was, though it lasted for a pass to read it, a Java stack missed. (A shorter wait
    /// has its stack only when the kernel copied it: when its thread's wait before was long,
    /// or on the CPU's spare turn.)
    pub(super) fn blocked_stack_done(&mut self, e: &profiler_ebpf::OffCpuEvent) {
        use profiler_ebpf::java_flags::{CARRIER, KNOWN, MOUNTED};
        if !self.blocked_stacks.on || self.jvm.is_none() {
            return;
        }
        let read = self.blocked_stacks.read.get(&e.tid) == Some(&e.start_ns);
        if read {
            self.blocked_stacks.read.remove(&e.tid);
            return;
        }
        let wanted = e.java.flags & KNOWN != 0
            && e.java.flags & (CARRIER | MOUNTED) != CARRIER
            && e.java.anchor_sp != 0
            && e.prev_state != profiler_ebpf::task_state::RUNNING
            && e.end_ns.saturating_sub(e.start_ns)
                >= self.blocked_stacks.min_ns + 2 * super::STACK_READ_PERIOD.as_nanos() as u64;
        if wanted {
            self.capture.count_java_stack_missed();
        }
    }

    /// A copy of the stack of a Java thread still blocked as capture stops: it never left its
    /// system call, so the kernel made none. Its stack does not move while it stays blocked;
    /// the caller keeps the copy only if it still was afterwards.
    pub(super) fn open_java_stack(
        &self,
        start: &profiler_ebpf::OffCpuStart,
    ) -> Option<crate::capture::JavaStack> {
        self.jvm.as_ref()?;
        blocked_java_stack(self.target_mem.as_ref()?, start)
    }

    /// The Java stacks of waits under way as capture began, read just before it did (see
    /// `seed::waits_at_start`): those whose seed the capture kept are its waits' stacks,
    /// keyed by its start (a seed's).
    pub(super) fn seeded_java_stacks(
        &mut self,
        copies: Vec<crate::capture::JavaStack>,
    ) -> Result<()> {
        let started_ns = self.capture.started_ns();
        for mut copy in copies {
            if !self.capture.seeded_off_cpu(copy.head.tid) {
                continue;
            }
            copy.head.start_ns = started_ns;
            self.blocked_stacks.read.insert(copy.head.tid, started_ns);
            self.java_stack(&copy, None)?;
        }
        Ok(())
    }
}

/// A copy of the Java stack of a thread blocked in the wait `start` (its anchor, as it
/// blocked), read from the target's memory; None for an idle carrier (the scheduler's
/// stack) or a thread not in a Java call. `tid` is left 0, for the caller.
pub(super) fn blocked_java_stack(
    mem: &std::fs::File,
    start: &profiler_ebpf::OffCpuStart,
) -> Option<crate::capture::JavaStack> {
    let java = &start.java;
    let carrier_idle = java.flags & profiler_ebpf::java_flags::CARRIER != 0
        && java.flags & profiler_ebpf::java_flags::MOUNTED == 0;
    if java.anchor_sp == 0 || carrier_idle {
        return None;
    }
    let data = read_stack(mem, java.anchor_sp)?;
    Some(crate::capture::JavaStack {
        head: profiler_ebpf::StackHead {
            kind: profiler_ebpf::kind::STACK_COPY,
            tid: 0,
            start_ns: start.start_ns,
            anchor_sp: java.anchor_sp,
            anchor_pc: java.anchor_pc,
            anchor_fp: java.anchor_fp,
            // Read now, like the stack: the frozen frames of a thread still blocked.
            vthread: 0,
            vthread_id: 0,
            chunk: 0,
            chunk_sp: 0,
            len: data.len() as u32,
        },
        data,
    })
}

/// Walked Java frames as the recording's frames.
pub(super) fn java_frames(walked: Vec<crate::jvm::walk::JavaFrame>) -> Vec<Frame> {
    walked
        .into_iter()
        .map(|f| Frame {
            kind: FrameKind::Java,
            addr: f.pc,
            name: Some(f.name),
            module: Some(f.tier.as_str().to_string()),
            holds_monitor: f.holds_monitor,
            line: f.line,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_end_past_the_entry_frame_until_a_walk_wants_more() {
        let mut ends = CopyEnds::default();
        // Walks that did not reach the entry teach nothing.
        assert_eq!(ends.walked(7, 0x1000, false, false), None);
        assert_eq!(ends.walked(7, 0x1000, true, true), None);
        let end = 0x1008 + COPY_END_SLACK;
        assert_eq!(ends.walked(7, 0x1008, false, true), Some(Some(end & !15)));
        // Learned once; later walks within the copy change nothing.
        assert_eq!(ends.walked(7, 0x1100, false, true), None);
        // One that wanted more than the copy held unlearns it, and the next complete walk
        // learns it again.
        assert_eq!(ends.walked(7, 0x1800, true, false), Some(None));
        assert_eq!(
            ends.walked(7, 0x1800, false, true),
            Some(Some(0x1800 + COPY_END_SLACK))
        );
        assert!(ends.forget(7));
        assert!(!ends.forget(7));
    }

    #[test]
    fn a_raw_tracepoints_own_frames_are_left_out_of_kernel_stacks() {
        let frame = |name: &str| Frame {
            kind: FrameKind::Kernel,
            addr: 1,
            name: Some(name.into()),
            module: None,
            holds_monitor: false,
            line: None,
        };
        let stack = [
            "bpf_prog_fb7ad53284862973_sched_switch",
            "bpf_trace_run4",
            "__traceiter_sched_switch",
            "__schedule",
            "schedule",
            "bpf_trace_run4",
        ];
        let kept = without_tracing_frames(stack.iter().map(|n| frame(n)).collect());
        let names: Vec<_> = kept.iter().filter_map(|f| f.name.as_deref()).collect();
        assert_eq!(names, ["__schedule", "schedule", "bpf_trace_run4"]);
    }
}
