//! A live HotSpot JVM seen from outside: its layout (from VMStructs), its Java threads, and
//! which of them carry virtual threads.

mod blockers;
mod continuations;
mod fields;
mod monitors;
mod scheduler;

pub use continuations::ContinuationProbes;
pub use scheduler::Queued;

use std::collections::{HashMap, HashSet};

use anyhow::{Context, Result, bail};
use profiler_ebpf::{ChunkHead, JavaState, JvmLayout, java_flags};

use crate::budget::{self, Bounded, Shares};
use crate::process::Process;

use super::{
    chunk::{ChunkLayout, Frozen},
    classinit::{self, ClassLayout},
    memory::{Libjvm, Memory},
    oops::OopEncoding,
    vmstructs::{self, Target, VmStructs},
    walk::{FROZEN_CALLERS, JavaFrame, StackBytes, Tier, Walker},
};

/// Offsets HotSpot keeps in static ints of its own (`java_lang_Thread::_tid_offset`...): the
/// field offsets of Java classes, computed when the JVM started.
const JAVA_FIELD_OFFSETS: &[&str] = &[
    "_ZN16java_lang_Thread11_tid_offsetE",
    "_ZN16java_lang_Thread12_name_offsetE",
    "_ZN16java_lang_String13_value_offsetE",
    "_ZN16java_lang_String13_coder_offsetE",
];

/// The same for the virtual thread's frozen frames (see `chunk`): `VirtualThread.cont`,
/// `Continuation.tail`, `StackChunk.parent`, `.size`, `.sp`, `.bottom`, and where a chunk's
/// stack begins (`InstanceStackChunkKlass::_offset_of_stack`).
const CHUNK_FIELD_OFFSETS: [&str; 7] = [
    "_ZN23java_lang_VirtualThread20_continuation_offsetE",
    "_ZN28jdk_internal_vm_Continuation12_tail_offsetE",
    "_ZN26jdk_internal_vm_StackChunk14_parent_offsetE",
    "_ZN26jdk_internal_vm_StackChunk12_size_offsetE",
    "_ZN26jdk_internal_vm_StackChunk10_sp_offsetE",
    "_ZN26jdk_internal_vm_StackChunk14_bottom_offsetE",
    "_ZN23InstanceStackChunkKlass16_offset_of_stackE",
];

/// `ContinuationEntry::_return_pc`: where `Continuation.enterSpecial` calls the virtual
/// thread's frames, the frame below its oldest frozen one. Not in VMStructs.
const CONTINUATION_RETURN_PC: &str = "_ZN17ContinuationEntry10_return_pcE";
/// `java_lang_Class::_init_lock_offset`: where a `java.lang.Class` object keeps its class's
/// init lock while the class is being initialized; not in VMStructs, but in libjvm's symbols.
const CLASS_INIT_LOCK: &str = "_ZN15java_lang_Class17_init_lock_offsetE";

/// `SafepointSynchronize::_state`: not in VMStructs, but its symbol is in libjvm's symbol
/// table; 0 (`_not_synchronized`) when no safepoint is under way, in every JDK since 9.
const SAFEPOINT_STATE: &str = "_ZN20SafepointSynchronize6_stateE";

/// The class of the default scheduler's carrier threads, as HotSpot names it.
const CARRIER_CLASS: &str = "jdk/internal/misc/CarrierThread";

/// Above this, an offset into a `JavaThread` (a few KB in JDK 21 and 25) or a small VM
/// structure is not one: the table it came from is garbage.
const MAX_FIELD_OFFSET: u64 = 1 << 16;

/// Platform threads past this many are a thread list being rewritten, or garbage.
const MAX_THREADS: u32 = 1_000_000;

/// Threads read of the list at most: as many as the kernel programs can know (their map of
/// Java threads holds 64 Ki).
const MAX_LISTED: u32 = 64 << 10;

/// The copies of the thread list pinprof keeps at once, each within a part of the list's
/// share: this reader's and the list it returns, the watcher's, the recorder's, the changes
/// between them, and the other reader's.
const LIST_COPIES: u64 = 6;

/// `JavaThreadState` values pinprof tells apart (HotSpot's `_thread_*` constants).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ThreadStates {
    pub in_native: u32,
    pub in_vm: u32,
    pub in_java: u32,
    pub blocked: u32,
}

/// Where an object's class pointer is.
#[derive(Clone, Copy, Debug)]
enum KlassPointer {
    /// A field after the mark word: a full `Klass*`, or a narrow one (base, shift).
    Field {
        offset: u64,
        narrow: Option<(u64, u32)>,
    },
    /// Compact object headers (JDK 24+): a narrow class pointer in the mark word's top bits.
    MarkWord {
        bits_shift: u32,
        base: u64,
        shift: u32,
    },
}

/// One Java thread (a platform thread: carriers included, virtual threads not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JavaThread {
    pub tid: u32,
    /// Address of its `JavaThread` in the target.
    pub addr: u64,
    /// Its `java.lang.Thread` name, in full (the kernel keeps 15 bytes).
    pub name: Option<String>,
    /// An instance of `jdk.internal.misc.CarrierThread`: a virtual-thread carrier.
    pub carrier: bool,
    /// The class of its `java.lang.Thread` object (`pkg.Class`, nested with `$`): what kind
    /// of thread it is (the JDK's own threads are instances of the JDK's classes).
    pub class: Option<String>,
}

/// A class whose static initializer runs now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassInit {
    /// As Java source writes it (`pkg.Outer$Inner`).
    pub class: String,
    /// The object threads waiting for the initialization wait on.
    pub lock: u64,
    /// The `JavaThread*` running the initializer.
    pub init_thread: u64,
}

pub struct Hotspot {
    /// What it was opened with, to open it again (`reopen`).
    process: Process,
    major: Option<u32>,
    mem: Memory,
    vm: VmStructs,
    pub layout: JvmLayout,
    pub states: ThreadStates,
    thread_list: u64,
    oops: OopEncoding,
    /// Where an object says its class (None: this JVM's layout is not understood).
    klass: Option<KlassPointer>,
    name_offset: u64,
    /// `ObjectMonitor::_object`, the weak handle to the object a monitor belongs to.
    monitor_object: Option<u64>,
    string_value_offset: u64,
    string_coder_offset: u64,
    array_length_offset: u64,
    array_base_offset: u64,
    /// Class names by Klass*, which never move (the target makes as many as it likes: a
    /// quarter of the budget's share for names; the walk has half, the recorder's monitors'
    /// classes the rest).
    klass_names: Bounded<u64, String>,
    /// The parts of the memory budget this reader keeps to.
    shares: Shares,
    /// Where the loaded classes and their initialization state are (None: not described).
    classes: Option<ClassLayout>,
    /// `java_lang_Class::_init_lock_offset` and `_klass_offset`: a `java.lang.Class` object's
    /// init lock and the `Klass*` it stands for.
    class_init_lock: Option<u64>,
    class_klass: Option<u64>,
    walker: Option<Walker>,
    /// Where virtual threads keep their frozen frames (None: not understood in this JVM).
    chunks: Option<ChunkLayout>,
    /// Where `ContinuationEntry::_return_pc` is.
    continuation_return_pc: Option<u64>,
    /// What is there, once set.
    continuation_return: Option<u64>,
    /// Why Java stacks cannot be walked in this JVM, if they cannot.
    pub walk_error: Option<String>,
    /// What this JVM's settings or layout keep pinprof from seeing.
    pub limits: Vec<String>,
    /// None: the flag could not be read, so attach is refused (fail closed).
    attach_disabled: Option<bool>,
    /// The JVM's thread ids (its own PID namespace's) to /proc's and the kernel's.
    tids: crate::namespaces::ThreadIds,
    /// The thread list as `java_threads` read it last.
    listed: ListedThreads,
    /// Where parked threads' blockers and their owners are (None: not found in this JVM).
    blockers: Option<blockers::BlockerLayout>,
    /// Where virtual threads unmount and mount (None: not found in this JVM).
    pub continuations: Option<ContinuationProbes>,
    /// Why `continuations` is None.
    pub continuations_error: Option<String>,
    /// Where a monitor says its owner (None: not understood in this JVM).
    monitor_layout: Option<monitors::MonitorLayout>,
    /// Where classes describe their fields (None: not understood in this JVM).
    fields: Option<fields::FieldLayout>,
    field_cache: fields::FieldCache,
}

/// How long a Java thread's name is trusted before it is read again.
const NAMES_REFRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// The thread list as last read: its array, and each thread read from it (by `JavaThread`
/// address: its OS id as the JVM gave it, and what was read of it).
#[derive(Default)]
struct ListedThreads {
    addrs: Vec<u64>,
    known: HashMap<u64, (u32, JavaThread)>,
    names_read: Option<std::time::Instant>,
    /// Threads of the list left out of the last read: past what the kernel can know, or
    /// past the list's share of the budget.
    not_listed: u64,
    /// The threads (by `JavaThread` address) the last read listed.
    kept: HashSet<u64>,
}

/// The JVM's thread list was replaced while it was read.
#[derive(Debug)]
struct ListChanged;

impl std::fmt::Display for ListChanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the JVM's thread list changed while it was read")
    }
}

impl std::error::Error for ListChanged {}

/// What a listed thread costs in memory, in each copy of the list (see `LIST_COPIES`).
fn thread_bytes(t: &JavaThread) -> u64 {
    // Its place in a map or a vector, and its texts.
    2 * std::mem::size_of::<(u64, (u32, JavaThread))>() as u64
        + t.name.as_deref().map_or(0, budget::heap_bytes)
        + t.class.as_deref().map_or(0, budget::heap_bytes)
}

impl Hotspot {
    /// Reads the JVM of `process`, of feature release `major` if known, keeping to
    /// `shares` of the memory budget.
    pub fn attach(process: &Process, major: Option<u32>, shares: Shares) -> Result<Self> {
        let wanted: Vec<&str> = vmstructs::SYMBOLS
            .iter()
            .chain(JAVA_FIELD_OFFSETS)
            .chain(&CHUNK_FIELD_OFFSETS)
            .chain([&SAFEPOINT_STATE, &CONTINUATION_RETURN_PC, &CLASS_INIT_LOCK])
            .chain(&blockers::SYMBOLS)
            .chain(&continuations::SYMBOLS)
            .copied()
            .collect();
        let lib = Libjvm::load(process, &wanted)?;
        let mem = Memory::open(process)?;
        let vm = VmStructs::read(&mem, &lib).context("reading the JVM's VMStructs")?;
        // Java field offsets: u32 in the target, below the size of an object in practice.
        let java_offset = |name: &str| -> Result<u64> {
            let offset = mem.u32(lib.symbol(name)?)?;
            small(offset.into()).with_context(|| format!("{name} = {offset:#x}"))?;
            Ok(offset.into())
        };

        let thread_offset = |name: &str| {
            vm.offset("JavaThread", name)
                .or_else(|_| vm.offset("Thread", name))
        };
        let thread_field = |name: &str| -> Result<u32> {
            small(thread_offset(name)?).with_context(|| format!("JavaThread::{name}"))
        };
        // Fields some JDKs lack are 0; one described with a garbage offset is an error.
        let optional_thread_field = |name: &str| -> Result<u32> {
            match thread_offset(name) {
                Ok(_) => thread_field(name),
                Err(_) => Ok(0),
            }
        };
        let anchor = u64::from(thread_field("_anchor")?);
        let anchor_field = |name: &str| -> Result<u32> {
            let offset = vm.offset("JavaFrameAnchor", name)?;
            small(anchor + offset.min(MAX_FIELD_OFFSET))
                .with_context(|| format!("JavaFrameAnchor::{name}"))
        };
        let layout = JvmLayout {
            thread_obj: thread_field("_threadObj")?,
            vthread: thread_field("_vthread")?,
            thread_state: thread_field("_thread_state")?,
            pending_monitor: thread_field("_current_pending_monitor")?,
            waiting_monitor: thread_field("_current_waiting_monitor")?,
            held_monitor_count: optional_thread_field("_held_monitor_count")?,
            cont_entry: optional_thread_field("_cont_entry")?,
            cont_pin_count: match vm.offset("ContinuationEntry", "_pin_count") {
                Ok(offset) => small(offset).context("ContinuationEntry::_pin_count")?,
                Err(_) => 0,
            },
            anchor_sp: anchor_field("_last_Java_sp")?,
            anchor_pc: anchor_field("_last_Java_pc")?,
            anchor_fp: anchor_field("_last_Java_fp")?,
            java_tid: java_offset(JAVA_FIELD_OFFSETS[0])? as u32,
            stack_base: thread_field("_stack_base")?,
            safepoint_state: lib.symbol(SAFEPOINT_STATE).unwrap_or(0),
            ..JvmLayout::NONE
        };
        let mut layout = layout;
        // The fields read at every block, in one span of JavaThread if they fit (JDK 21 and 25:
        // about 470 bytes). Fields read as 8-byte words, so the span ends 8 bytes after the last.
        let fields = [
            layout.thread_obj,
            layout.vthread,
            layout.thread_state,
            layout.pending_monitor,
            layout.waiting_monitor,
            layout.held_monitor_count,
            layout.cont_entry,
            layout.anchor_sp,
            layout.anchor_pc,
            layout.anchor_fp,
        ];
        // (Each below MAX_FIELD_OFFSET: no sum overflows.)
        let used = fields.iter().copied().filter(|&f| f != 0);
        let (low, high) = used.fold((u32::MAX, 0), |(lo, hi), f| (lo.min(f), hi.max(f + 8)));
        if high > low && (high - low) as usize <= profiler_ebpf::JAVA_WINDOW_BYTES {
            layout.window_start = low;
            layout.window_len = high - low;
        }
        let constant = |name: &str| -> Result<u32> {
            let value = vm.int_constant(name)?;
            u32::try_from(value).with_context(|| format!("implausible {name} = {value}"))
        };
        let states = ThreadStates {
            in_native: constant("_thread_in_native")?,
            in_vm: constant("_thread_in_vm")?,
            in_java: constant("_thread_in_Java")?,
            blocked: constant("_thread_blocked")?,
        };

        let flags = read_flags(
            &mem,
            &vm,
            &[
                "UseCompressedOops",
                "UseCompressedClassPointers",
                "UseCompactObjectHeaders",
                "DisableAttachMechanism",
                "UseZGC",
                "ZGenerational",
            ],
        );
        // With compact object headers (JDK 24+, off by default) the class pointer lives in
        // the mark word, and arrays lose their class field.
        let compact_headers = flags.get("UseCompactObjectHeaders") == Some(&true);
        let static_pair = |ty: &str, base: &[&str], shift: &[&str]| -> Option<(u64, u32)> {
            let base = base.iter().find_map(|n| vm.address(ty, n).ok())?;
            let shift = shift.iter().find_map(|n| vm.address(ty, n).ok())?;
            // A shift past 63 is not an encoding: garbage, or a layout not understood.
            Some((
                mem.u64(base).ok()?,
                mem.u32(shift).ok().filter(|&s| s < 64)?,
            ))
        };
        let compressed_oops = if flags.get("UseCompressedOops") == Some(&true) {
            Some(
                static_pair(
                    "CompressedOops",
                    &["_base", "_narrow_oop._base"],
                    &["_shift", "_narrow_oop._shift"],
                )
                .context("compressed oops in use, but their base is not described")?,
            )
        } else {
            None
        };
        // ZGC is generational when asked for on JDK 21-23 (`ZGenerational`, the default from
        // 23), always from 24 (the flag is gone).
        let generational_zgc =
            flags.get("UseZGC") == Some(&true) && flags.get("ZGenerational") != Some(&false);
        let oops = OopEncoding::of(compressed_oops, generational_zgc);
        let compressed_klass = if flags.get("UseCompressedClassPointers") != Some(&false) {
            Some(
                static_pair(
                    "CompressedKlassPointers",
                    &["_base", "_narrow_klass._base"],
                    &["_shift", "_narrow_klass._shift"],
                )
                .context("compressed class pointers in use, but their base is not described")?,
            )
        } else {
            None
        };
        let mut limits: Vec<String> = Vec::new();
        let chunks = CHUNK_FIELD_OFFSETS
            .iter()
            .map(|name| java_offset(name))
            .collect::<Result<Vec<u64>>>()
            .map(|o| ChunkLayout {
                thread_tid: layout.java_tid.into(),
                vthread_cont: o[0],
                cont_tail: o[1],
                chunk_parent: o[2],
                chunk_size: o[3],
                chunk_sp: o[4],
                chunk_bottom: o[5],
                stack_offset: o[6],
                oops,
            });
        match &chunks {
            Ok(c) => {
                // (Each offset was checked small.)
                layout.vthread_cont = c.vthread_cont as u32;
                layout.cont_tail = c.cont_tail as u32;
                layout.chunk_sp = c.chunk_sp as u32;
                layout.chunk_parent = c.chunk_parent as u32;
                layout.chunk_bottom = c.chunk_bottom as u32;
                layout.chunk_stack = c.stack_offset as u32;
            }
            Err(e) => limits.push(format!(
                "the frames a virtual thread froze in its stack chunk are not read in this JVM \
                 ({e:#}): its stacks end where they begin"
            )),
        }
        let (klass, array_length_offset, array_base_offset) = if compact_headers {
            // A byte array's length follows the mark word; its elements follow the length.
            let klass = compressed_klass.and_then(|(base, shift)| {
                let bits_shift = vm.int_constant("markWord::klass_shift").ok()?;
                Some(KlassPointer::MarkWord {
                    bits_shift: u32::try_from(bits_shift).ok().filter(|&s| s < 64)?,
                    base,
                    shift,
                })
            });
            if klass.is_none() {
                limits.push(
                    "the JVM runs with -XX:+UseCompactObjectHeaders, but does not describe its \
                     mark word's class bits: carriers are not identified (mounted state and \
                     Java stacks still are)"
                        .into(),
                );
            }
            (klass, 8, 12)
        } else {
            let offset = vm.offset("oopDesc", "_metadata._klass")?;
            let klass = KlassPointer::Field {
                offset,
                narrow: compressed_klass,
            };
            // Arrays: length right after the class field. Byte elements follow the length from
            // JDK 22 (JDK-8139457); before, every element type started 8-aligned.
            let offset = u64::from(small(offset).context("oopDesc::_metadata._klass")?);
            let length = offset + if compressed_klass.is_some() { 4 } else { 8 };
            let base = if major.is_some_and(|m| m >= 22) {
                length + 4
            } else {
                (length + 4).next_multiple_of(8)
            };
            (Some(klass), length, base)
        };

        let (walker, walk_error) = match Walker::new(&mem, &vm) {
            Ok(mut w) => {
                w.set_budget(shares.java_names / 2);
                (Some(w), None)
            }
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        if let Some(e) = walker.as_ref().and_then(|w| w.inlining_error.as_ref()) {
            limits.push(format!(
                "methods the JIT inlined are not expanded in this JVM ({e}): compiled frames \
                 are named by their own method"
            ));
        }
        // How the kernel decodes an oop field (the frozen frames', a park blocker).
        (layout.oop_base, layout.oop_shift) = compressed_oops.unwrap_or((0, u32::MAX));
        layout.colored_oops = oops.colored_for_kernel();
        let blockers = blockers::BlockerLayout::read(&lib, &mem, &vm);
        match &blockers {
            // (Checked small.)
            Ok(b) => {
                layout.park_blocker = b.park_blocker as u32;
                layout.ownable_owner = b.ownable_owner() as u32;
            }
            Err(e) => limits.push(format!(
                "what parked threads park on is not read in this JVM ({e:#}): each waiter's \
                 parks are a lock row of their own"
            )),
        }
        let fields = fields::FieldLayout::read(&vm);
        if let Err(e) = &fields {
            limits.push(format!(
                "the tasks queued in the virtual-thread scheduler are not read in this JVM \
                 ({e:#}): starvation episodes do not say how much work waited"
            ));
        }
        let continuations = continuations::ContinuationProbes::read(&lib, &mem);
        let monitor_layout = monitors::MonitorLayout::read(&vm, major).ok();
        // (Checked small as it was read.)
        layout.monitor_owner = monitor_layout
            .and_then(|m| m.owner_id_offset())
            .and_then(|o| u32::try_from(o).ok())
            .unwrap_or(0);
        Ok(Self {
            continuations_error: continuations.as_ref().err().map(|e| format!("{e:#}")),
            continuations: continuations.ok(),
            process: process.clone(),
            major,
            walker,
            chunks: chunks.ok(),
            continuation_return_pc: lib.symbol(CONTINUATION_RETURN_PC).ok(),
            continuation_return: None,
            walk_error,
            limits,
            attach_disabled: flags.get("DisableAttachMechanism").copied(),
            tids: crate::namespaces::ThreadIds::new(process),
            listed: ListedThreads::default(),
            blockers: blockers.ok(),
            monitor_layout,
            fields: fields.ok(),
            field_cache: Default::default(),
            thread_list: vm.address("ThreadsSMRSupport", "_java_thread_list")?,
            name_offset: java_offset(JAVA_FIELD_OFFSETS[1])?,
            monitor_object: vm.offset("ObjectMonitor", "_object").ok(),
            string_value_offset: java_offset(JAVA_FIELD_OFFSETS[2])?,
            string_coder_offset: java_offset(JAVA_FIELD_OFFSETS[3])?,
            array_length_offset,
            array_base_offset,
            oops,
            klass,
            klass_names: Bounded::new(
                shares.java_names / 4,
                |_, name: &String| budget::heap_bytes(name),
                None,
            ),
            shares,
            classes: ClassLayout::read(&vm).ok(),
            class_init_lock: lib
                .symbol(CLASS_INIT_LOCK)
                .and_then(|at| java_offset_at(&mem, at))
                .ok(),
            class_klass: vm
                .address("java_lang_Class", "_klass_offset")
                .and_then(|at| java_offset_at(&mem, at))
                .ok(),
            layout,
            states,
            vm,
            mem,
        })
    }

    /// The Java frames of a stack copied as its thread blocked, innermost first; empty when
    /// this JVM's stacks cannot be walked. A virtual thread's stack goes on with the frames
    /// still frozen in its stack chunks (`frozen`, noted by the kernel): from the kernel's copy
    /// of them (`copy`) when it holds them all, else read from the heap now, when they can be.
    /// With them, how far up the copy the walk read (the end of the highest word), and whether
    /// it wanted more than the copy holds.
    pub fn walk(
        &mut self,
        base: u64,
        data: &[u8],
        anchor: [u64; 3],
        frozen: Option<Frozen>,
        copy: Option<(&ChunkHead, &[u8])>,
    ) -> (Vec<JavaFrame>, (u64, bool)) {
        let Some(w) = &mut self.walker else {
            return (Vec::new(), (base, false));
        };
        let stack = StackBytes::new(base, data);
        let mut frames = w.walk(&self.mem, &stack, anchor);
        let reach = stack.reach();
        if frames.last().is_some_and(|f| f.name == FROZEN_CALLERS)
            && let (Some(layout), Some(frozen)) = (&self.chunks, frozen)
        {
            let copied = copy.and_then(|(head, data)| layout.from_copy(&frozen, head, data));
            let (chunks, complete) = match copied {
                // Every frame, copied: the heap is not read at all.
                Some(copied) if copied.complete => (copied.chunks, true),
                // Older chunks, or the rest of a chunk, had no room in the copy: all from the
                // heap if it still holds them, else what the copy holds.
                copied => match layout.read(&self.mem, &frozen) {
                    Ok(chunks) => (chunks, true),
                    Err(why) => {
                        w.say_unread(why);
                        (copied.map(|c| c.chunks).unwrap_or_default(), false)
                    }
                },
            };
            // Set once, as the JVM makes its continuation stubs: read until it is.
            if self.continuation_return.is_none() {
                self.continuation_return = self
                    .continuation_return_pc
                    .and_then(|a| self.mem.u64(a).ok())
                    .filter(|&pc| pc != 0);
            }
            let entry = self.continuation_return.filter(|_| complete);
            let mut callers = w.walk_chunks(&self.mem, &chunks, entry);
            if !callers.is_empty() {
                let marker = frames.pop();
                if !complete && callers.last().is_some_and(|f| f.tier != Tier::Unknown) {
                    callers.extend(marker);
                }
                frames.extend(callers);
            }
        }
        (frames, reach)
    }

    /// The frames of an unmounted virtual thread, innermost first, from the kernel's copy of
    /// its stack chunks made as it mounted again (the heap is not read: by now the frames
    /// were thawed). A copy cut short ends with the `FROZEN_CALLERS` marker.
    pub fn walk_unmounted(&mut self, head: &ChunkHead, data: &[u8]) -> Vec<JavaFrame> {
        let entry = self.continuation_return();
        let (Some(w), Some(layout)) = (&mut self.walker, &self.chunks) else {
            return Vec::new();
        };
        let Some(tail) = head.chunks.first().filter(|_| head.count > 0) else {
            return Vec::new();
        };
        let frozen = Frozen {
            vthread: 0,
            vthread_id: 0,
            chunk: tail.addr,
            sp: tail.sp,
        };
        let Some(copied) = layout.from_copy(&frozen, head, data) else {
            return Vec::new();
        };
        let entry = entry.filter(|_| copied.complete);
        let mut frames = w.walk_chunks(&self.mem, &copied.chunks, entry);
        if !copied.complete && frames.last().is_some_and(|f| f.tier != Tier::Unknown) {
            frames.push(JavaFrame::marker(FROZEN_CALLERS));
        }
        frames
    }

    /// The frames of virtual thread `id`, unmounted now, from its stack chunks on the heap
    /// (`oop`: its address as it unmounted; empty if a collection moved it since).
    pub fn walk_parked(&mut self, oop: u64, id: u64) -> Vec<JavaFrame> {
        let entry = self.continuation_return();
        let (Some(w), Some(layout)) = (&mut self.walker, &self.chunks) else {
            return Vec::new();
        };
        let field = |at: u64| layout.oops.field(&self.mem, at);
        let Some(chunk) = field(oop.wrapping_add(layout.vthread_cont))
            .and_then(|cont| field(cont.wrapping_add(layout.cont_tail)))
        else {
            return Vec::new();
        };
        let Ok(sp) = self.mem.u32(chunk.wrapping_add(layout.chunk_sp)) else {
            return Vec::new();
        };
        let frozen = Frozen {
            vthread: oop,
            vthread_id: id,
            chunk,
            sp,
        };
        let Ok(chunks) = layout.read(&self.mem, &frozen) else {
            return Vec::new();
        };
        w.walk_chunks(&self.mem, &chunks, entry)
    }

    /// Where a continuation's entry frame returns to: set once, as the JVM makes its
    /// continuation stubs, so read until it is.
    fn continuation_return(&mut self) -> Option<u64> {
        if self.continuation_return.is_none() {
            self.continuation_return = self
                .continuation_return_pc
                .and_then(|a| self.mem.u64(a).ok())
                .filter(|&pc| pc != 0);
        }
        self.continuation_return
    }

    /// The frame-pointer view of the same copied stack (see `walk::frame_pointer_chain`).
    pub fn frame_pointer_chain(&mut self, base: u64, data: &[u8], anchor: [u64; 3]) -> Vec<u64> {
        match &mut self.walker {
            Some(w) => w.frame_pointer_chain(&self.mem, &StackBytes::new(base, data), anchor),
            None => Vec::new(),
        }
    }

    pub fn in_compiled_method(&mut self, pc: u64) -> bool {
        match &mut self.walker {
            Some(w) => w.in_compiled_method(&self.mem, pc),
            None => false,
        }
    }

    /// Leave to use the attach protocol: the JVM's own `DisableAttachMechanism` flag (set
    /// anywhere: on the command line, in JAVA_TOOL_OPTIONS, in an argument file) was read and
    /// is off. A flag that cannot be read refuses attach, since signalling a JVM that does
    /// not expect it prints a thread dump into its output.
    pub fn attach_permit(&self) -> Result<super::attach::AttachPermit> {
        match self.attach_disabled {
            Some(false) => Ok(super::attach::AttachPermit::new()),
            Some(true) => bail!("the JVM runs with -XX:+DisableAttachMechanism"),
            None => bail!(
                "the JVM's DisableAttachMechanism flag cannot be read, so pinprof does not attach"
            ),
        }
    }

    /// The same JVM read again, for another thread of pinprof's (each reader keeps caches of
    /// its own, within the same shares).
    pub fn reopen(&self) -> Result<Self> {
        Self::attach(&self.process, self.major, self.shares)
    }

    /// Keeps to new shares of the memory budget (measured once pinprof has started): what
    /// is held past them goes as it is next added to.
    pub fn set_shares(&mut self, shares: Shares) {
        self.shares = shares;
        self.klass_names.set_max_bytes(shares.java_names / 4);
        if let Some(walker) = &mut self.walker {
            walker.set_budget(shares.java_names / 2);
        }
    }

    /// Threads of the JVM's list its last read left out (past what the kernel can know, or
    /// past the list's share of the budget): the rest count as other threads.
    pub fn threads_not_listed(&self) -> u64 {
        self.listed.not_listed
    }

    /// What changes whenever a Java thread starts or ends: the current `ThreadsList*` (a new
    /// list each time), with its length and last thread (a new thread is added at the end).
    /// The pointer alone is not enough: a list freed and a new one allocated at its address
    /// (two changes between reads) would look unchanged.
    pub fn thread_list_version(&self) -> Result<u64> {
        let (list, length, threads) = self.thread_list_head()?;
        let last = match u64::from(length).checked_sub(1) {
            Some(i) if length <= MAX_THREADS => self.mem.u64(threads.wrapping_add(8 * i))?,
            _ => 0,
        };
        Ok(list ^ u64::from(length).rotate_left(48) ^ last.rotate_left(17))
    }

    /// The JVM's current thread list: its address, its length and its array of threads.
    fn thread_list_head(&self) -> Result<(u64, u32, u64)> {
        let list = self.mem.u64(self.thread_list)?;
        let length = self
            .mem
            .u32(list.wrapping_add(self.vm.offset("ThreadsList", "_length")?))?;
        let threads = self
            .mem
            .u64(list.wrapping_add(self.vm.offset("ThreadsList", "_threads")?))?;
        Ok((list, length, threads))
    }

    /// Every Java thread alive now.
    ///
    /// Read often (every millisecond while a thread just born is awaited), so only what may
    /// have changed is read again: the list's array in one read; a thread's OS id only when
    /// the array changed or the thread had none yet (a thread writes it as it starts); its
    /// name and class only when its address or OS id are new, or at the latest every
    /// `NAMES_REFRESH` (a thread may rename itself).
    ///
    /// What the target's list costs pinprof is bounded: entries pointing at a thread already
    /// listed are skipped, at most `MAX_LISTED` are read, and threads past the list's share of
    /// the budget are left out (`threads_not_listed` says how many).
    pub fn java_threads(&mut self) -> Result<Vec<JavaThread>> {
        // A list replaced while it is read is read again (see `read_java_threads`).
        let mut tries = 0;
        loop {
            match self.read_java_threads() {
                Err(e) if e.is::<ListChanged>() && tries < 4 => tries += 1,
                other => return other,
            }
        }
    }

    fn read_java_threads(&mut self) -> Result<Vec<JavaThread>> {
        let head = self.thread_list_head()?;
        let (_, length, threads) = head;
        if length > MAX_THREADS {
            bail!("implausible thread count {length}: the JVM's thread list is changing");
        }
        let mut not_listed = u64::from(length.saturating_sub(MAX_LISTED));
        let length = length.min(MAX_LISTED);
        let max_bytes = self.shares.thread_list / LIST_COPIES;
        let osthread = self
            .vm
            .offset("JavaThread", "_osthread")
            .or_else(|_| self.vm.offset("Thread", "_osthread"))?;
        let thread_id = self.vm.offset("OSThread", "_thread_id")?;
        // The array a page at a time: the length alone (the target's word) does not size an
        // allocation; what is read does.
        const PAGE: u32 = 512;
        let mut addrs: Vec<u64> = Vec::new();
        let mut page = [0u8; 8 * PAGE as usize];
        for first in (0..length).step_by(PAGE as usize) {
            let n = (length - first).min(PAGE) as usize;
            // (first < MAX_THREADS: 8 * first does not overflow.)
            let at = threads.wrapping_add(8 * u64::from(first));
            self.mem.read(at, &mut page[..8 * n])?;
            addrs.extend(
                page[..8 * n]
                    .chunks_exact(8)
                    .map(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes"))),
            );
        }
        // The JVM frees a list it replaced once no thread of its own uses it: one replaced
        // while it was read may have been freed and reused meanwhile (half of it garbage, a
        // thousand threads gone from a read and back at the next). Read again next time.
        if self.thread_list_head()? != head {
            return Err(ListChanged.into());
        }
        let mut listed = std::mem::take(&mut self.listed);
        let same_array = listed.addrs == addrs;
        if listed
            .names_read
            .is_none_or(|t| t.elapsed() >= NAMES_REFRESH)
        {
            listed.known.clear();
            listed.names_read = Some(std::time::Instant::now());
        }
        self.tids.new_round();
        // Each thread once (a forged list may point many entries at one), with its OS id:
        // (address, the JVM's id, /proc's id, what was read of it before).
        let mut seen_addrs = HashSet::with_capacity(addrs.len());
        let mut seen_tids = HashSet::with_capacity(addrs.len());
        let mut found = Vec::with_capacity(addrs.len());
        for &addr in &addrs {
            if !seen_addrs.insert(addr) {
                continue;
            }
            let cached = listed.known.remove(&addr);
            if same_array && let Some((own_tid, thread)) = cached {
                if seen_tids.insert(thread.tid) {
                    found.push((addr, own_tid, thread.tid, Some(thread)));
                }
                continue;
            }
            let Ok(os) = self.mem.u64(addr.wrapping_add(osthread)) else {
                continue;
            };
            let Ok(own_tid) = self.mem.u32(os.wrapping_add(thread_id)) else {
                continue;
            };
            let cached = cached.filter(|(own, _)| *own == own_tid).map(|(_, t)| t);
            // In a container the JVM numbers its threads as its PID namespace does; a thread
            // that cannot be matched with one of /proc (it just ended, or has not started)
            // is left out, and read again next time.
            let tid = match &cached {
                Some(t) => t.tid,
                None => match self.tids.to_proc(own_tid).filter(|_| own_tid != 0) {
                    Some(tid) => tid,
                    None => continue,
                },
            };
            if seen_tids.insert(tid) {
                found.push((addr, own_tid, tid, cached));
            }
        }
        // Within the list's share, the threads listed last time first: a thread born when the
        // share is full is left out, not one listed before (which would come and go).
        found.sort_by_key(|(addr, ..)| !listed.kept.contains(addr));
        let mut out = Vec::with_capacity(found.len());
        let mut known = HashMap::with_capacity(found.len());
        let mut kept = HashSet::with_capacity(found.len());
        let mut bytes = 0;
        for (addr, own_tid, tid, cached) in found {
            if bytes >= max_bytes {
                not_listed += 1;
                continue;
            }
            let thread = match cached {
                Some(thread) => thread,
                None => {
                    let object =
                        self.deref_handle(addr.wrapping_add(self.layout.thread_obj.into()));
                    let class = object.and_then(|oop| self.class_name(oop));
                    JavaThread {
                        tid,
                        addr,
                        name: object.and_then(|oop| self.thread_name(oop)),
                        carrier: class.as_deref() == Some(CARRIER_CLASS),
                        class: class.as_deref().map(source_type_name),
                    }
                }
            };
            bytes += thread_bytes(&thread);
            if bytes > max_bytes {
                not_listed += 1;
                continue;
            }
            kept.insert(addr);
            out.push(thread.clone());
            // A thread whose object could not be read yet is read again next time: whether
            // it is a carrier depends on it.
            if thread.class.is_some() {
                known.insert(addr, (own_tid, thread));
            }
        }
        listed.addrs = addrs;
        listed.known = known;
        listed.kept = kept;
        listed.not_listed = not_listed;
        self.listed = listed;
        Ok(out)
    }

    /// `Thread.threadId()` of the virtual thread mounted on a carrier now, if one is (a racy
    /// read of a running thread: fine for a snapshot, not for events).
    pub fn mounted_vthread(&self, thread: &JavaThread) -> Option<u64> {
        let own = self.deref_handle(thread.addr.wrapping_add(self.layout.thread_obj.into()))?;
        let current = self.deref_handle(thread.addr.wrapping_add(self.layout.vthread.into()))?;
        if own == current {
            return None;
        }
        self.mem
            .u64(current.wrapping_add(self.layout.java_tid.into()))
            .ok()
    }

    /// What a thread that is not running is doing in the JVM, read now: the same fields the
    /// kernel program reads as a thread blocks (see `java_state` there), for a wait that began
    /// before pinprof attached, which the kernel never saw begin. Not whether a safepoint is
    /// under way now: that says why a thread blocks as it blocks, not why it has slept since.
    pub fn java_state(&self, thread: &JavaThread) -> Option<JavaState> {
        let layout = &self.layout;
        let word = |offset: u32| self.mem.u64(thread.addr.wrapping_add(offset.into())).ok();
        let mut state = JavaState {
            flags: java_flags::KNOWN,
            thread_state: word(layout.thread_state)? as u32,
            pending_monitor: word(layout.pending_monitor).unwrap_or(0),
            waiting_monitor: word(layout.waiting_monitor).unwrap_or(0),
            anchor_sp: word(layout.anchor_sp).unwrap_or(0),
            anchor_pc: word(layout.anchor_pc).unwrap_or(0),
            anchor_fp: word(layout.anchor_fp).unwrap_or(0),
            ..Default::default()
        };
        if thread.carrier {
            state.flags |= java_flags::CARRIER;
        }
        if layout.held_monitor_count != 0 {
            state.held_monitors = word(layout.held_monitor_count).unwrap_or(0) as u32;
        }
        if let Some(vthread) = self.mounted_vthread(thread) {
            state.flags |= java_flags::MOUNTED;
            state.vthread_id = vthread;
            if layout.cont_entry != 0 && layout.cont_pin_count != 0 {
                state.pin_count = word(layout.cont_entry)
                    .filter(|&entry| entry != 0)
                    .and_then(|entry| {
                        let at = entry.wrapping_add(layout.cont_pin_count.into());
                        self.mem.u32(at).ok()
                    })
                    .unwrap_or(0);
            }
        }
        Some(state)
    }

    /// The class (`pkg.Class`, nested with `$`) of the object whose monitor is at `monitor`
    /// (an `ObjectMonitor*`): its `_object` is a weak handle to it. Read live, so only
    /// meaningful while the monitor is in use.
    pub fn monitor_class(&mut self, monitor: u64) -> Option<String> {
        let oop = self.deref_handle(monitor.checked_add(self.monitor_object?)?)?;
        Some(source_type_name(&self.class_name(oop)?))
    }

    /// For a monitor whose object is a `java.lang.Class` (the monitor of `static
    /// synchronized` methods): the class it stands for, as Java source writes it.
    pub fn monitor_class_object(&mut self, monitor: u64) -> Option<String> {
        let mirror = self.monitor_oop(monitor)?;
        if self.class_name(mirror)? != "java/lang/Class" {
            return None;
        }
        // A metadata field: a full Klass* (null for primitive types' classes).
        let klass = self
            .mem
            .u64(mirror.checked_add(self.class_klass?)?)
            .ok()
            .filter(|&k| k != 0)?;
        Some(source_type_name(&self.klass_name(klass)?))
    }

    /// The object of the monitor at `monitor` (an `ObjectMonitor*`), read now.
    pub fn monitor_oop(&self, monitor: u64) -> Option<u64> {
        self.deref_handle(monitor.checked_add(self.monitor_object?)?)
    }

    /// The classes being initialized now: the class, its init lock (the object its waiters
    /// wait on) and the `JavaThread*` running its static initializer. Walks every loaded
    /// class (a few thousand reads): call it when a thread is seen waiting on an init lock.
    pub fn classes_being_initialized(&mut self) -> Vec<ClassInit> {
        let (Some(layout), Some(lock_at)) = (self.classes, self.class_init_lock) else {
            return Vec::new();
        };
        let found = classinit::being_initialized(&self.mem, &layout);
        found
            .into_iter()
            .filter_map(|c| {
                let mirror = self.deref_handle(c.mirror_handle)?;
                let lock = self.oop_field(mirror, lock_at)?;
                Some(ClassInit {
                    class: source_type_name(&self.klass_name(c.klass)?),
                    lock,
                    init_thread: c.init_thread,
                })
            })
            .collect()
    }

    /// The oop an `OopHandle` at `addr` refers to.
    fn deref_handle(&self, addr: u64) -> Option<u64> {
        self.oops.handle(&self.mem, addr)
    }

    /// An oop-typed field of an object.
    fn oop_field(&self, obj: u64, offset: u64) -> Option<u64> {
        self.oops.field(&self.mem, obj.wrapping_add(offset))
    }

    fn class_name(&mut self, obj: u64) -> Option<String> {
        let klass = self.klass_of(obj)?;
        self.klass_name(klass)
    }

    /// The `Klass*` of an object.
    fn klass_of(&self, obj: u64) -> Option<u64> {
        Some(match self.klass? {
            KlassPointer::Field {
                offset,
                narrow: Some((base, shift)),
            } => base.wrapping_add((self.mem.u32(obj.wrapping_add(offset)).ok()? as u64) << shift),
            // (shifts were checked below 64 at attach)
            KlassPointer::Field {
                offset,
                narrow: None,
            } => self.mem.u64(obj.wrapping_add(offset)).ok()?,
            KlassPointer::MarkWord {
                bits_shift,
                base,
                shift,
            } => {
                let narrow = self.mem.u64(obj).ok()?.checked_shr(bits_shift)?;
                base.wrapping_add(narrow << shift)
            }
        })
    }

    /// The name of the class at `klass` (`pkg/Class`, arrays by descriptor).
    fn klass_name(&mut self, klass: u64) -> Option<String> {
        if let Some(name) = self.klass_names.get(&klass) {
            return Some(name.clone());
        }
        let symbol = self
            .mem
            .u64(klass.wrapping_add(self.vm.offset("Klass", "_name").ok()?))
            .ok()?;
        let name = self.symbol(symbol)?;
        self.klass_names.insert(klass, name.clone());
        Some(name)
    }

    fn symbol(&self, symbol: u64) -> Option<String> {
        let length_at = self.vm.offset("Symbol", "_length").ok()?;
        let body_at = self.vm.offset("Symbol", "_body").ok()?;
        self.mem.symbol(symbol, length_at, body_at)
    }

    /// `Thread.name` of a `java.lang.Thread` oop (a String: Latin-1 or UTF-16 bytes), cut to
    /// `budget::MAX_NAME` bytes: only as much of it is read.
    fn thread_name(&self, thread: u64) -> Option<String> {
        let string = self.oop_field(thread, self.name_offset)?;
        let value = self.oop_field(string, self.string_value_offset)?;
        let coder = self
            .mem
            .u16(string.wrapping_add(self.string_coder_offset))
            .ok()? as u8;
        let len = self
            .mem
            .u32(value.wrapping_add(self.array_length_offset))
            .ok()?;
        // Each character takes at least one byte of UTF-8, and one (Latin-1) or two (UTF-16)
        // of the array: a character more than a name holds tells a longer one.
        let max = (budget::MAX_NAME as u32 + 1) * if coder == 0 { 1 } else { 2 };
        let mut bytes = vec![0; len.min(max) as usize];
        self.mem
            .read(value.wrapping_add(self.array_base_offset), &mut bytes)
            .ok()?;
        let mut name: String = match coder {
            0 => bytes.iter().map(|&b| b as char).collect(),
            _ => {
                let units: Vec<u16> = bytes
                    .chunks_exact(2)
                    .map(|c| u16::from_ne_bytes([c[0], c[1]]))
                    .collect();
                String::from_utf16_lossy(&units)
            }
        };
        // (Read again each second: counted where written.)
        budget::cut_name_uncounted(&mut name);
        Some(name)
    }
}

/// Values of boolean `-XX` flags, from HotSpot's flag table.
fn read_flags(mem: &impl Target, vm: &VmStructs, names: &[&str]) -> HashMap<String, bool> {
    let mut out = HashMap::new();
    let (Ok(table), Ok(count), Ok(size)) = (
        vm.address("JVMFlag", "flags"),
        vm.address("JVMFlag", "numFlags"),
        vm.type_size("JVMFlag"),
    ) else {
        return out;
    };
    let (Ok(name_at), Ok(addr_at)) = (vm.offset("JVMFlag", "_name"), vm.offset("JVMFlag", "_addr"))
    else {
        return out;
    };
    let (Ok(table), Ok(count)) = (mem.u64(table), mem.u64(count)) else {
        return out;
    };
    for i in 0..count.min(10_000) {
        // The size comes from the target: a product past the address space ends the table.
        let Some(flag) = i.checked_mul(size).and_then(|o| table.checked_add(o)) else {
            break;
        };
        let Ok(name) = mem
            .u64(flag.wrapping_add(name_at))
            .and_then(|p| mem.c_string(p, 128))
        else {
            continue;
        };
        if names.contains(&name.as_str())
            && let Ok(value) = mem.u64(flag.wrapping_add(addr_at)).and_then(|p| {
                let mut b = [0u8; 1];
                mem.read(p, &mut b).map(|()| b[0] != 0)
            })
        {
            out.insert(name, value);
        }
    }
    out
}

/// A Java field offset HotSpot keeps in a static int at `at`, if plausible.
fn java_offset_at(mem: &impl Target, at: u64) -> Result<u64> {
    let offset = mem.u32(at)?;
    small(offset.into())?;
    Ok(offset.into())
}

/// An offset read from VMStructs as the kernel programs take it (u32), if plausible.
fn small(offset: u64) -> Result<u32> {
    if offset >= MAX_FIELD_OFFSET {
        bail!("implausible field offset {offset:#x}");
    }
    Ok(offset as u32)
}

/// A class as Java source writes it: `java.lang.String`, `int[]`, `java.lang.Object[][]`
/// (the JVM names arrays by descriptor: `[I`, `[[Ljava/lang/Object;`).
fn source_type_name(internal: &str) -> String {
    let element = internal.trim_start_matches('[');
    let dimensions = internal.len() - element.len();
    if dimensions == 0 {
        return internal.replace('/', ".");
    }
    let element = match element {
        "Z" => "boolean".to_string(),
        "B" => "byte".to_string(),
        "C" => "char".to_string(),
        "S" => "short".to_string(),
        "I" => "int".to_string(),
        "J" => "long".to_string(),
        "F" => "float".to_string(),
        "D" => "double".to_string(),
        class => class
            .strip_prefix('L')
            .and_then(|c| c.strip_suffix(';'))
            .unwrap_or(class)
            .replace('/', "."),
    };
    element + &"[]".repeat(dimensions)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::jvm::vmstructs::{Field, fake::FakeMemory};

    const FLAGS: u64 = 0x1000;
    const COUNT: u64 = 0x2000;
    const TABLE: u64 = 0x3000;

    fn flag_table(size: u64) -> VmStructs {
        let field = |is_static, offset, address| Field {
            type_string: String::new(),
            is_static,
            offset,
            address,
        };
        VmStructs::for_test(
            &[
                ("JVMFlag", "flags", field(true, 0, FLAGS)),
                ("JVMFlag", "numFlags", field(true, 0, COUNT)),
                ("JVMFlag", "_name", field(false, 0, 0)),
                ("JVMFlag", "_addr", field(false, 8, 0)),
            ],
            &[("JVMFlag", size)],
        )
    }

    #[test]
    fn flags_are_read_by_name() {
        let mut mem = FakeMemory::default();
        mem.put_u64(FLAGS, TABLE)
            .put_u64(COUNT, 2)
            .put_u64(TABLE, 0x4000)
            .put_str(0x4000, "UseCompressedOops")
            .put_u64(TABLE + 8, 0x5000)
            .put(0x5000, &[1])
            .put_u64(TABLE + 16, 0x4100)
            .put_str(0x4100, "DisableAttachMechanism")
            .put_u64(TABLE + 24, 0x5001)
            .put(0x5001, &[0]);
        let flags = read_flags(
            &mem,
            &flag_table(16),
            &["UseCompressedOops", "DisableAttachMechanism"],
        );
        assert_eq!(flags.get("UseCompressedOops"), Some(&true));
        assert_eq!(flags.get("DisableAttachMechanism"), Some(&false));
    }

    #[test]
    fn hostile_flag_tables_end() {
        for (table, count, size) in [
            (TABLE, u64::MAX, u64::MAX),
            (u64::MAX - 8, u64::MAX, 16),
            (TABLE, 1 << 40, 1 << 60),
        ] {
            let mut mem = FakeMemory::default();
            mem.put_u64(FLAGS, table)
                .put_u64(COUNT, count)
                .put_u64(TABLE, 0x4000)
                .put_str(0x4000, "UseCompressedOops");
            let flags = read_flags(&mem, &flag_table(size), &["UseCompressedOops"]);
            assert!(flags.is_empty(), "{table:#x} {count:#x} {size:#x}");
        }
    }

    #[test]
    fn field_offsets_past_a_thread_are_refused() {
        assert_eq!(small(0x1a0).unwrap(), 0x1a0);
        assert!(small(MAX_FIELD_OFFSET).is_err());
        assert!(small(u64::MAX).is_err());
    }

    #[test]
    fn array_classes_read_as_in_java() {
        assert_eq!(source_type_name("java/lang/String"), "java.lang.String");
        assert_eq!(source_type_name("Demo$AuditLog"), "Demo$AuditLog");
        assert_eq!(source_type_name("[I"), "int[]");
        assert_eq!(
            source_type_name("[[Ljava/lang/Object;"),
            "java.lang.Object[][]"
        );
    }
}
