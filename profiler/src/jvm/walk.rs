//! Walks a Java thread's stack from outside, the way HotSpot's own tools do: from the frame
//! anchor a blocked thread leaves behind, through interpreted frames (their `Method*` sits at a
//! fixed slot below the frame pointer) and compiled ones (their size is in the code blob),
//! naming each method from the JVM's metadata. No frame pointers are needed in Java code.
//!
//! The stack bytes come from a copy made in the kernel as the thread blocked (`StackCopy`);
//! the code cache and metadata are read live, since they outlive the frames that use them.

use std::cell::Cell;

use anyhow::{Context, Result};

use super::{
    chunk::ChunkFrames,
    inlining::Inlining,
    vmstructs::{Target, VmStructs},
};
use crate::{
    budget::{self, Bounded},
    events::UNKNOWN_JAVA_FRAME,
};

/// x86_64 HotSpot frame slots, in words from the frame pointer (not exported in VMStructs;
/// the same in JDK 21 and 25: `frame_x86.hpp`).
const INTERPRETER_SENDER_SP: i64 = -1;
const INTERPRETER_METHOD: i64 = -3;
/// The monitor block of an interpreted frame ends here; the slot holds its top (a pointer, or
/// a word offset from fp in JDKs that relativize interpreter frames).
const INTERPRETER_MONITOR_BLOCK: i64 = -9;
/// `JVM_ACC_SYNCHRONIZED` (JVMS 4.6).
const ACC_SYNCHRONIZED: u16 = 0x0020;
const ENTRY_FRAME_CALL_WRAPPER: i64 = -6;
const INTERPRETER_LOCALS: i64 = -7;
const INTERPRETER_BCP: i64 = -8;
/// Bytes of a line number table read at most (two bytes a line in most methods).
const MAX_LINE_TABLE: usize = 4096;
const MORE_FRAMES: &str = "[more frames not walked]";
const MAX_FRAMES: usize = 128;
/// Native frames followed up to the return into Java code of a sample taken in native code
/// that Java code called without leaving Java (see `walk`).
const LEAF_FRAMES: usize = 8;
/// What the caches may hold until `Walker::set_budget` says (their keys, code addresses and
/// `Method*`s, come from the target: each cache is bounded by bytes).
const DEFAULT_CACHE_BYTES: u64 = 16 << 20;

/// How a frame runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    Interpreted,
    Compiled,
    /// A method the JIT inlined into the compiled frame that follows it.
    Inlined,
    /// A native method's wrapper (`Unsafe.park`, `Object.wait0`...).
    Native,
    /// Generated code that is not a Java method (stubs, adapters).
    Stub,
    /// The Java code below was called from inside the VM (class initialization, upcalls).
    VmCall,
    Unknown,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interpreted => "interpreted",
            Self::Compiled => "compiled",
            Self::Inlined => "inlined",
            Self::Native => "native",
            Self::Stub => "stub",
            Self::VmCall => "vm",
            Self::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct JavaFrame {
    pub pc: u64,
    /// `pkg.Class.method`, or what the frame is when it is not a method.
    pub name: String,
    pub tier: Tier,
    /// The frame holds a monitor: a `synchronized` method, or an interpreted frame with a
    /// locked entry in its monitor block.
    pub holds_monitor: bool,
    /// The source line it is at, from the method's line number table.
    pub line: Option<u32>,
}

impl JavaFrame {
    /// A marker saying where the walk stopped (`FROZEN_CALLERS`).
    pub fn marker(name: &str) -> Self {
        Self::other(0, name, Tier::Unknown)
    }

    /// A frame that is not a method (a stub, a marker saying where the walk stopped).
    fn other(pc: u64, name: impl Into<String>, tier: Tier) -> Self {
        Self {
            pc,
            name: name.into(),
            tier,
            holds_monitor: false,
            line: None,
        }
    }
}

/// Where a mounted virtual thread's stack returns into frames still frozen in its stack
/// chunk on the heap (read by `walk_chunks` when they can be).
pub const FROZEN_CALLERS: &str = "[callers frozen in the virtual thread's stack chunk]";

/// The frame a virtual thread's frames end with: its continuation's entry.
pub const CONTINUATION_ENTRY: &str = "jdk.internal.vm.Continuation.enterSpecial";

/// A copy of stack memory starting at `base`, made as the thread blocked. Nothing outside it is
/// read: the live stack has moved on since. It notes how far up a walk read it, and whether
/// the walk wanted more than it holds.
pub struct StackBytes<'a> {
    pub base: u64,
    pub data: &'a [u8],
    reach: Cell<u64>,
    overran: Cell<bool>,
}

impl<'a> StackBytes<'a> {
    pub fn new(base: u64, data: &'a [u8]) -> Self {
        Self {
            base,
            data,
            reach: Cell::new(base),
            overran: Cell::new(false),
        }
    }

    pub(super) fn word(&self, addr: u64) -> Option<u64> {
        let at = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        let Some(bytes) = self.data.get(at..at.checked_add(8)?) else {
            self.overran.set(true);
            return None;
        };
        self.reach.set(self.reach.get().max(addr.saturating_add(8)));
        Some(u64::from_ne_bytes(bytes.try_into().ok()?))
    }

    fn end(&self) -> u64 {
        self.base.saturating_add(self.data.len() as u64)
    }

    /// The end of the highest word read so far, and whether a read fell past the copy.
    pub fn reach(&self) -> (u64, bool) {
        (self.reach.get(), self.overran.get())
    }
}

struct Heap {
    low: u64,
    high: u64,
    segmap: u64,
    log2_segment: u32,
}

/// Field offsets the walk needs, looked up by name in VMStructs (JDK 21 or 25 spellings).
struct Layout {
    heaps: u64,
    array_len: u64,
    array_data: u64,
    heap_memory: u64,
    heap_segmap: u64,
    heap_log2: u64,
    space_low: u64,
    space_high: u64,
    block_used: u64,
    block_size: u64,
    blob_name: u64,
    blob_frame_size: u64,
    nmethod_method: u64,
    method_const: u64,
    method_flags: u64,
    const_constants: u64,
    const_name_index: u64,
    pool_holder: u64,
    pool_size: u64,
    klass_name: u64,
    symbol_length: u64,
    symbol_body: u64,
    interpreter: (u64, u64),
    call_stub_return: u64,
    wrapper_anchor: u64,
    anchor_sp: u64,
    anchor_pc: u64,
    anchor_fp: u64,
    lines: Option<LineLayout>,
    /// `ConstMethod`'s flags and its `is_hidden` bit.
    hidden: Option<(u64, u32)>,
}

/// Where a method's line number table is: after its bytecodes, which follow its `ConstMethod`.
#[derive(Clone, Copy)]
struct LineLayout {
    const_size: u64,
    code_size: u64,
    flags: u64,
    has_table: u32,
}

pub struct Walker {
    layout: Layout,
    heaps: Vec<Heap>,
    /// Names by `Method*` (None: unreadable).
    methods: Methods,
    /// Source lines by (`Method*`, bci).
    lines: Lines,
    /// What a method's flags say, by `Method*`.
    flags: Bounded<u64, MethodFlags>,
    /// Code blobs by start, and the blob holding each pc walked (its start).
    blobs: Bounded<u64, Blob>,
    pcs: Bounded<u64, u64>,
    /// The pass walks are in now (see `begin_walk`), counted from `epoch`.
    pass: u64,
    epoch: std::time::Instant,
    /// None when this JVM's debug information cannot be found: compiled frames are then
    /// named by their own method only.
    inlining: Option<Inlining>,
    /// Why inlined methods are not expanded in this JVM, if they are not.
    pub inlining_error: Option<String>,
    debug: bool,
}

#[derive(Clone, Debug)]
struct Blob {
    start: u64,
    name: String,
    frame_words: u64,
    method: Option<u64>,
    /// The pass in which it was last seen to still hold this code.
    checked: u64,
}

/// A method's flags that walking needs, read once per `Method*`.
#[derive(Clone, Copy, Debug)]
struct MethodFlags {
    /// Java's own stack traces leave it out (see `Walker::hidden`).
    hidden: bool,
    synchronized: bool,
    /// Its `ConstMethod*` (bytecodes, line table), which a `Method*` keeps for its life.
    const_method: Option<u64>,
}

/// The caches' parts of the walker's budget, in sixteenths: names are the most and the
/// largest; the inlining tables and chains get the rest (see `Inlining::set_budget`).
const METHODS: u64 = 8;
const LINES: u64 = 2;
const FLAGS: u64 = 1;

/// How long one check of a code blob serves the walks that meet it.
const PASS: std::time::Duration = std::time::Duration::from_millis(10);
const BLOBS: u64 = 2;

fn method_bytes(_: &u64, name: &Option<String>) -> u64 {
    name.as_deref().map_or(0, budget::heap_bytes)
}

fn blob_bytes(_: &u64, blob: &Blob) -> u64 {
    budget::heap_bytes(&blob.name)
}

fn no_heap<K, V>(_: &K, _: &V) -> u64 {
    0
}

impl Walker {
    /// Keeps the caches within `bytes` in all.
    pub fn set_budget(&mut self, bytes: u64) {
        let part = |sixteenths: u64| bytes / 16 * sixteenths;
        self.methods.set_max_bytes(part(METHODS));
        self.lines.set_max_bytes(part(LINES));
        self.flags.set_max_bytes(part(FLAGS));
        self.blobs.set_max_bytes(part(BLOBS) / 2);
        self.pcs.set_max_bytes(part(BLOBS) / 2);
        if let Some(inlining) = &mut self.inlining {
            inlining.set_budget(part(16 - METHODS - LINES - FLAGS - BLOBS));
        }
    }
}

type Methods = Bounded<u64, Option<String>>;
type Lines = Bounded<(u64, i32), Option<u32>>;

/// The caches, empty, within `bytes` in all (see `set_budget`).
struct Caches {
    methods: Methods,
    lines: Lines,
    flags: Bounded<u64, MethodFlags>,
    blobs: Bounded<u64, Blob>,
    pcs: Bounded<u64, u64>,
}

fn caches(bytes: u64) -> Caches {
    let part = |sixteenths: u64| bytes / 16 * sixteenths;
    Caches {
        methods: Bounded::new(part(METHODS), method_bytes, None),
        lines: Bounded::new(part(LINES), no_heap, None),
        flags: Bounded::new(part(FLAGS), no_heap, None),
        blobs: Bounded::new(part(BLOBS) / 2, blob_bytes, None),
        pcs: Bounded::new(part(BLOBS) / 2, no_heap, None),
    }
}

impl Walker {
    pub fn new(mem: &impl Target, vm: &VmStructs) -> Result<Self> {
        let f = |t: &str, n: &str| vm.offset(t, n);
        let s = |t: &str, n: &str| vm.address(t, n);
        // Two offsets that add up to one: both from the target, so the sum is checked.
        let sum = |a: u64, b: u64| a.checked_add(b).context("implausible field offsets");
        let interpreter_queue = mem.u64(s("AbstractInterpreter", "_code")?)?;
        let stub_buffer =
            mem.u64(interpreter_queue.wrapping_add(f("StubQueue", "_stub_buffer")?))?;
        let limit = mem.u32(interpreter_queue.wrapping_add(f("StubQueue", "_buffer_limit")?))?;
        let interpreter_end = stub_buffer
            .checked_add(limit.into())
            .context("the interpreter's code ends past the address space")?;
        let header = f("HeapBlock", "_header").unwrap_or(0);
        let block_size = vm.type_size("HeapBlock").unwrap_or(16);
        let anchor = |n: &str| f("JavaFrameAnchor", n);
        let layout = Layout {
            heaps: s("CodeCache", "_heaps")?,
            array_len: f("GrowableArrayBase", "_len")?,
            array_data: f("GrowableArray<int>", "_data")?,
            heap_memory: f("CodeHeap", "_memory")?,
            heap_segmap: f("CodeHeap", "_segmap")?,
            heap_log2: f("CodeHeap", "_log2_segment_size")?,
            space_low: f("VirtualSpace", "_low")?,
            space_high: f("VirtualSpace", "_high")?,
            block_used: sum(header, f("HeapBlock::Header", "_used")?)?,
            block_size,
            blob_name: f("CodeBlob", "_name")?,
            blob_frame_size: f("CodeBlob", "_frame_size")?,
            nmethod_method: f("nmethod", "_method").or_else(|_| f("CompiledMethod", "_method"))?,
            method_const: f("Method", "_constMethod")?,
            method_flags: sum(f("Method", "_access_flags")?, f("AccessFlags", "_flags")?)?,
            const_constants: f("ConstMethod", "_constants")?,
            const_name_index: f("ConstMethod", "_name_index")?,
            pool_holder: f("ConstantPool", "_pool_holder")?,
            pool_size: vm.type_size("ConstantPool")?,
            klass_name: f("Klass", "_name")?,
            symbol_length: f("Symbol", "_length")?,
            symbol_body: f("Symbol", "_body")?,
            interpreter: (stub_buffer, interpreter_end),
            call_stub_return: mem.u64(s("StubRoutines", "_call_stub_return_address")?)?,
            wrapper_anchor: f("JavaCallWrapper", "_anchor")?,
            anchor_sp: anchor("_last_Java_sp")?,
            anchor_pc: anchor("_last_Java_pc")?,
            anchor_fp: anchor("_last_Java_fp")?,
            lines: (|| -> Result<LineLayout> {
                let flag = vm.int_constant("ConstMethodFlags::_misc_has_linenumber_table")?;
                Ok(LineLayout {
                    const_size: vm.type_size("ConstMethod")?,
                    code_size: f("ConstMethod", "_code_size")?,
                    flags: f("ConstMethod", "_flags._flags")?,
                    has_table: u32::try_from(flag).context("implausible line table flag")?,
                })
            })()
            .ok(),
            hidden: (|| -> Option<(u64, u32)> {
                let flag = vm.int_constant("ConstMethodFlags::_misc_is_hidden").ok()?;
                Some((
                    f("ConstMethod", "_flags._flags").ok()?,
                    u32::try_from(flag).ok()?,
                ))
            })(),
        };
        let (inlining, inlining_error) = match Inlining::new(vm) {
            Ok(i) => (Some(i), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        let Caches {
            methods,
            lines,
            flags,
            blobs,
            pcs,
        } = caches(DEFAULT_CACHE_BYTES);
        let mut walker = Self {
            layout,
            heaps: Vec::new(),
            methods,
            lines,
            flags,
            blobs,
            pcs,
            pass: 0,
            epoch: std::time::Instant::now(),
            inlining,
            inlining_error,
            debug: std::env::var_os("PINPROF_DEBUG").is_some(),
        };
        walker.read_heaps(mem).context("reading the code cache")?;
        Ok(walker)
    }

    fn read_heaps(&mut self, mem: &impl Target) -> Result<()> {
        let l = &self.layout;
        let array = mem.u64(l.heaps)?;
        // (At most 16 heaps: 8 * i does not overflow.)
        let len = mem.u32(array.wrapping_add(l.array_len))?.min(16) as u64;
        let data = mem.u64(array.wrapping_add(l.array_data))?;
        self.heaps.clear();
        for i in 0..len {
            let heap = mem.u64(data.wrapping_add(8 * i))?;
            let memory = heap.wrapping_add(l.heap_memory);
            let segmap = heap.wrapping_add(l.heap_segmap);
            self.heaps.push(Heap {
                low: mem.u64(memory.wrapping_add(l.space_low))?,
                high: mem.u64(memory.wrapping_add(l.space_high))?,
                segmap: mem.u64(segmap.wrapping_add(l.space_low))?,
                log2_segment: mem.u32(heap.wrapping_add(l.heap_log2))?.min(63),
            });
        }
        Ok(())
    }

    /// The Java frames of a blocked thread, innermost first, from its frame anchor.
    pub fn walk(
        &mut self,
        mem: &impl Target,
        stack: &StackBytes,
        anchor: [u64; 3],
    ) -> Vec<JavaFrame> {
        let [mut sp, pc, mut fp] = anchor;
        let mut frames = Vec::new();
        if sp == 0 {
            return frames;
        }
        self.begin_walk();
        // HotSpot sets the pc before blocking; without it, the return address just below sp
        // (below the copy) is read live, once.
        let mut pc = if pc != 0 {
            pc
        } else {
            mem.u64(sp.wrapping_sub(8)).unwrap_or(0)
        };
        // A sample taken from the registers can land in native code that compiled Java code
        // calls without leaving Java (a leaf call, such as `System.nanoTime`'s clock): no
        // anchor is set, so the walk starts at the return into Java code, found up the native
        // frames' frame pointers (a word that merely looks like code, left on the stack, would
        // be taken for a caller by a plain scan).
        if !self.is_code(mem, pc) {
            let mut link = fp;
            for _ in 0..LEAF_FRAMES {
                if link <= sp || !link.is_multiple_of(8) {
                    break;
                }
                let (Some(ret), Some(up)) = (stack.word(link.wrapping_add(8)), stack.word(link))
                else {
                    break;
                };
                if self.is_code(mem, ret) {
                    (sp, pc, fp) = (link.wrapping_add(16), ret, up);
                    break;
                }
                link = up;
            }
        }
        loop {
            if frames.len() >= MAX_FRAMES {
                // Say where the walk stopped rather than end the stack silently.
                frames.push(JavaFrame::other(pc, MORE_FRAMES, Tier::Unknown));
                break;
            }
            let next = if self.interpreted(pc) {
                frames.extend(self.interpreted_frame(mem, stack, pc, fp));
                // sender sp, return address, saved fp
                (
                    stack.word(slot(fp, INTERPRETER_SENDER_SP)),
                    stack.word(fp.wrapping_add(8)),
                    stack.word(fp),
                )
            } else if pc == self.layout.call_stub_return {
                // An entry frame: Java called from C++. The JavaCallWrapper keeps the anchor of
                // the Java frames that made that call, if any.
                frames.push(JavaFrame::other(pc, "[called from the VM]", Tier::VmCall));
                let Some(wrapper) = stack.word(slot(fp, ENTRY_FRAME_CALL_WRAPPER)) else {
                    break;
                };
                let at = |field: u64| {
                    let addr = wrapper
                        .wrapping_add(self.layout.wrapper_anchor)
                        .wrapping_add(field);
                    stack.word(addr)
                };
                let caller_sp = at(self.layout.anchor_sp).unwrap_or(0);
                if caller_sp == 0 {
                    break; // the thread's first Java call
                }
                let caller_pc = at(self.layout.anchor_pc)
                    .filter(|&p| p != 0)
                    .or_else(|| stack.word(caller_sp.wrapping_sub(8)));
                (Some(caller_sp), caller_pc, at(self.layout.anchor_fp))
            } else if let Some(blob) = self.blob(mem, pc) {
                let bottom = self.code_frames(mem, stack, &blob, sp, pc, &mut frames);
                if bottom {
                    break;
                }
                if blob.frame_words == 0 {
                    // A buffer of many stubs (the compiler's intrinsics: SHA-256, AES, array
                    // copies) has no frame size: its caller is found from the stub's frame.
                    match blob
                        .method
                        .is_none()
                        .then(|| self.stub_caller(mem, stack, sp, fp))
                    {
                        Some(Some(caller)) => caller,
                        _ => break,
                    }
                } else {
                    let sender_sp = sp.wrapping_add(blob.frame_words.wrapping_mul(8));
                    (
                        Some(sender_sp),
                        stack.word(sender_sp.wrapping_sub(8)),
                        stack.word(sender_sp.wrapping_sub(16)),
                    )
                }
            } else {
                let caller_of = frames.last().map(|f| (f.name.clone(), f.tier));
                frames.push(JavaFrame::other(pc, UNKNOWN_JAVA_FRAME, Tier::Unknown));
                self.debug(format_args!(
                    "pc {pc:#x} (sp {sp:#x}, fp {fp:#x}, the caller of {caller_of:?}; anchor \
                     {anchor:x?}, stack copy {:#x}..{:#x}) is neither in the interpreter nor \
                     in a code blob",
                    stack.base,
                    stack.end()
                ));
                break;
            };
            // Stacks grow down: a caller's frame is always above; anything else is garbage.
            match next {
                (Some(next_sp), Some(next_pc), next_fp)
                    if next_sp > sp && next_sp.is_multiple_of(8) =>
                {
                    if next_sp >= stack.end() {
                        stack.overran.set(true);
                        // Deeper than the copy the kernel made: say so rather than guess.
                        frames.push(JavaFrame::other(
                            next_pc,
                            "[more frames beyond the copied stack]",
                            Tier::Unknown,
                        ));
                        break;
                    }
                    sp = next_sp;
                    pc = next_pc;
                    fp = next_fp.unwrap_or(0);
                }
                _ => break,
            }
        }
        frames
    }

    /// The frames frozen in a virtual thread's stack chunks (tail first), innermost first: the
    /// callers of a stack that ended at `FROZEN_CALLERS`. Interpreted frames there keep their
    /// frame pointer, sender sp and locals as word offsets (HotSpot's `StackChunkFrameStream`).
    /// Below the oldest comes the continuation's entry frame (`Continuation.enterSpecial`) on
    /// the thread's stack, named from `entry_pc`, its return address.
    pub fn walk_chunks(
        &mut self,
        mem: &impl Target,
        chunks: &[ChunkFrames],
        entry_pc: Option<u64>,
    ) -> Vec<JavaFrame> {
        self.begin_walk();
        let mut frames = Vec::new();
        for chunk in chunks {
            let stack = chunk.stack();
            let end = chunk.end;
            // A frame's sp, and its unextended sp (where a compiled frame's size counts from).
            let (mut sp, mut unextended) = (chunk.sp, chunk.sp);
            while sp < end {
                if frames.len() >= MAX_FRAMES {
                    frames.push(JavaFrame::other(0, MORE_FRAMES, Tier::Unknown));
                    return frames;
                }
                let Some(pc) = stack.word(sp.wrapping_sub(8)) else {
                    frames.push(JavaFrame::other(0, MORE_FRAMES, Tier::Unknown));
                    return frames;
                };
                let next = if self.interpreted(pc) {
                    let link = sp.wrapping_sub(16);
                    // A link out of the chunk is garbage, not its bottom: the frames below
                    // are not known, and the stack says so rather than end here.
                    let Some(fp) = relative(&stack, link, link) else {
                        frames.push(JavaFrame::other(0, MORE_FRAMES, Tier::Unknown));
                        return frames;
                    };
                    frames.extend(self.interpreted_frame(mem, &stack, pc, fp));
                    let locals = relative(&stack, fp, slot(fp, INTERPRETER_LOCALS));
                    if locals.is_none_or(|l| l.saturating_add(8) >= end) {
                        break; // the chunk's bottom frame
                    }
                    let Some(sender) = relative(&stack, fp, slot(fp, INTERPRETER_SENDER_SP)) else {
                        frames.push(JavaFrame::other(0, MORE_FRAMES, Tier::Unknown));
                        return frames;
                    };
                    (fp.wrapping_add(16), sender)
                } else if let Some(blob) = self.blob(mem, pc) {
                    let bottom = self.code_frames(mem, &stack, &blob, sp, pc, &mut frames);
                    if bottom || blob.frame_words == 0 {
                        break;
                    }
                    let next = unextended.wrapping_add(blob.frame_words.wrapping_mul(8));
                    if next >= end.saturating_sub(16) {
                        break;
                    }
                    (next, next)
                } else {
                    frames.push(JavaFrame::other(pc, UNKNOWN_JAVA_FRAME, Tier::Unknown));
                    self.debug(format_args!("pc {pc:#x} in a stack chunk is not code"));
                    return frames;
                };
                // Frames go up the chunk: anything else is garbage.
                if next.0 <= sp || !next.0.is_multiple_of(8) {
                    return frames;
                }
                (sp, unextended) = next;
            }
        }
        if !frames.is_empty()
            && let Some(pc) = entry_pc
            && let Some(blob) = self.blob(mem, pc)
            && blob.method.is_some()
        {
            let empty = StackBytes::new(0, &[]);
            self.code_frames(mem, &empty, &blob, 0, pc, &mut frames);
        }
        frames
    }

    /// The caller of a stub without a frame size of its own, at `sp` with frame pointer `fp`:
    /// (sender sp, return address, caller's fp). A stub that has opened no frame (an
    /// adapter, a leaf, one sampled before its `enter`) has its return address at `sp`, and
    /// `fp` is still a caller's (an interpreted caller's own frame, whose return would skip
    /// it): `sp` first. A stub that opened one (`enter`: the caller's fp, then the return
    /// address above it) has its return at `fp + 8`. Either way the return must be into a
    /// Java method (interpreted or compiled), or the walk stops rather than guess.
    fn stub_caller(
        &mut self,
        mem: &impl Target,
        stack: &StackBytes,
        sp: u64,
        fp: u64,
    ) -> Option<(Option<u64>, Option<u64>, Option<u64>)> {
        let mut java = |pc: u64| {
            pc != 0
                && (self.interpreted(pc) || self.blob(mem, pc).is_some_and(|b| b.method.is_some()))
        };
        if let Some(ret) = stack.word(sp)
            && java(ret)
        {
            return Some((Some(sp.wrapping_add(8)), Some(ret), Some(fp)));
        }
        if fp > sp
            && fp.is_multiple_of(8)
            && let (Some(ret), Some(up)) = (stack.word(fp.wrapping_add(8)), stack.word(fp))
            && java(ret)
        {
            return Some((Some(fp.wrapping_add(16)), Some(ret), Some(up)));
        }
        None
    }

    /// Whether `pc` is in Java code: the interpreter, a code blob, or the call stub's return.
    fn is_code(&mut self, mem: &impl Target, pc: u64) -> bool {
        pc != 0
            && (self.interpreted(pc)
                || pc == self.layout.call_stub_return
                || self.blob(mem, pc).is_some())
    }

    fn interpreted(&self, pc: u64) -> bool {
        let (lo, hi) = self.layout.interpreter;
        (lo..hi).contains(&pc)
    }

    /// The frame of an interpreted method whose frame pointer is `fp` (None: a method Java's
    /// own stack traces hide).
    fn interpreted_frame(
        &mut self,
        mem: &impl Target,
        stack: &StackBytes,
        pc: u64,
        fp: u64,
    ) -> Option<JavaFrame> {
        let method = stack.word(slot(fp, INTERPRETER_METHOD));
        if self.hidden(mem, method) {
            return None;
        }
        // The bytecode pointer stays absolute, on a stack and in a chunk.
        let bci = stack
            .word(slot(fp, INTERPRETER_BCP))
            .zip(method)
            .and_then(|(bcp, m)| self.bci_of(mem, m, bcp));
        Some(JavaFrame {
            pc,
            name: self.method_name(mem, method),
            tier: Tier::Interpreted,
            holds_monitor: self.synchronized(mem, method) || interpreted_frame_locks(stack, fp),
            line: method.zip(bci).and_then(|(m, b)| self.line(mem, m, b)),
        })
    }

    /// Whether Java's own stack traces (JFR's, jstack's, a `Throwable`'s) leave a method out:
    /// lambda forms, methods of hidden classes (a lambda's `call`), the JDK's `@Hidden`
    /// plumbing (`Continuation.enter`, `Thread.runWith`).
    fn hidden(&mut self, mem: &impl Target, method: Option<u64>) -> bool {
        self.method_flags(mem, method).is_some_and(|f| f.hidden)
    }

    /// Whether a method is declared `synchronized`.
    fn synchronized(&mut self, mem: &impl Target, method: Option<u64>) -> bool {
        self.method_flags(mem, method)
            .is_some_and(|f| f.synchronized)
    }

    /// A method's flags, read once per `Method*` (a frame of it is met at every wait).
    fn method_flags(&mut self, mem: &impl Target, method: Option<u64>) -> Option<MethodFlags> {
        let method = method.filter(|&m| m != 0)?;
        if let Some(&known) = self.flags.get(&method) {
            return Some(known);
        }
        let const_method = mem
            .u64(method.wrapping_add(self.layout.method_const))
            .ok()
            .filter(|&c| c != 0);
        let hidden = self
            .layout
            .hidden
            .zip(const_method)
            .is_some_and(|(flag, c)| {
                mem.u32(c.wrapping_add(flag.0))
                    .is_ok_and(|flags| flags & flag.1 != 0)
            });
        let synchronized = mem
            .u16(method.wrapping_add(self.layout.method_flags))
            .is_ok_and(|flags| flags & ACC_SYNCHRONIZED != 0);
        let flags = MethodFlags {
            hidden,
            synchronized,
            const_method,
        };
        self.flags.insert(method, flags);
        Some(flags)
    }

    /// The frames of code blob `blob` at `pc`: the methods the JIT inlined there, then its own
    /// (or the stub it is). True when the virtual thread's frames end with it.
    fn code_frames(
        &mut self,
        mem: &impl Target,
        stack: &StackBytes,
        blob: &Blob,
        sp: u64,
        pc: u64,
        frames: &mut Vec<JavaFrame>,
    ) -> bool {
        let tier = match (&blob.method, blob.name.as_str()) {
            (Some(_), "native nmethod") => Tier::Native,
            (Some(_), _) => Tier::Compiled,
            (None, _) => Tier::Stub,
        };
        // A return into the continuation stubs (the return barrier): the callers are still
        // frozen in the virtual thread's stack chunk on the heap.
        let frozen = blob.method.is_none() && blob.name.contains("continuation");
        let name = match blob.method {
            Some(m) => self.method_name(mem, Some(m)),
            None if frozen => FROZEN_CALLERS.into(),
            None => format!("[{}]", blob.name),
        };
        // The virtual thread's frames end at its continuation's entry.
        let bottom = frozen || name == CONTINUATION_ENTRY;
        // Methods the JIT inlined here come first, innermost first; the chain must end with
        // the frame's own method to be trusted.
        let mut own_bci = None;
        let pass = self.pass;
        if tier == Tier::Compiled
            && let Some(mut scopes) = self
                .inlining
                .as_mut()
                .and_then(|i| i.scopes(mem, stack, blob.start, sp, pc, pass))
            && scopes.pop().map(|(m, bci)| {
                own_bci = Some(bci);
                m
            }) == blob.method
        {
            // Marked from the method's `synchronized` flag: C2 may have elided the lock of a
            // receiver that does not escape.
            for (method, bci) in scopes {
                if self.hidden(mem, Some(method)) {
                    continue;
                }
                frames.push(JavaFrame {
                    pc,
                    name: self.method_name(mem, Some(method)),
                    tier: Tier::Inlined,
                    holds_monitor: self.synchronized(mem, Some(method)),
                    line: self.line(mem, method, bci),
                });
            }
        }
        if blob.method.is_some() && self.hidden(mem, blob.method) {
            return bottom;
        }
        let holds_monitor = self.synchronized(mem, blob.method);
        let line = blob
            .method
            .zip(own_bci)
            .and_then(|(m, bci)| self.line(mem, m, bci));
        frames.push(JavaFrame {
            pc,
            name,
            tier,
            holds_monitor,
            line,
        });
        bottom
    }

    /// The bytecode index `bcp` points at in `method`.
    fn bci_of(&mut self, mem: &impl Target, method: u64, bcp: u64) -> Option<i32> {
        let lines = self.layout.lines?;
        let const_method = self.method_flags(mem, Some(method))?.const_method?;
        let code = const_method.checked_add(lines.const_size)?;
        i32::try_from(bcp.checked_sub(code)?).ok()
    }

    /// The source line of bytecode `bci` of `method`, from its line number table (HotSpot's
    /// `Method::line_number_from_bci`: the entry at `bci`, else the last one before it).
    fn line(&mut self, mem: &impl Target, method: u64, bci: i32) -> Option<u32> {
        if let Some(&known) = self.lines.get(&(method, bci)) {
            return known;
        }
        let line = self.read_line(mem, method, bci);
        self.lines.insert((method, bci), line);
        line
    }

    fn read_line(&self, mem: &impl Target, method: u64, bci: i32) -> Option<u32> {
        let lines = self.layout.lines?;
        let const_method = mem
            .u64(method.wrapping_add(self.layout.method_const))
            .ok()?;
        let flags = mem.u32(const_method.wrapping_add(lines.flags)).ok()?;
        if flags & lines.has_table == 0 {
            return None;
        }
        let code_size = mem.u16(const_method.wrapping_add(lines.code_size)).ok()?;
        // (A synchronized method's entry, -1, counts as its first bytecode.)
        let bci = u32::try_from(bci.max(0)).ok()?;
        if bci >= u32::from(code_size) {
            return None;
        }
        let table = const_method
            .checked_add(lines.const_size)?
            .checked_add(code_size.into())?;
        let mut bytes = vec![0; MAX_LINE_TABLE];
        // The table may end near the end of the mapping: read what can be read.
        let mut len = MAX_LINE_TABLE;
        while mem.read(table, &mut bytes[..len]).is_err() {
            len /= 4;
            if len < 16 {
                return None;
            }
        }
        line_at(&bytes[..len], bci)
    }

    /// Starts a new pass if the last began `PASS` ago or more: code blobs are checked again
    /// as they are met (within a pass, one check of a blob serves every stack that holds it).
    fn begin_walk(&mut self) {
        self.pass = (self.epoch.elapsed().as_nanos() / PASS.as_nanos()) as u64 + 1;
    }

    /// The code blob holding `pc`: the one it held this pass, else through the code heap's
    /// segment map.
    fn blob(&mut self, mem: &impl Target, pc: u64) -> Option<Blob> {
        // Code is freed and its space reused (recompilation, unloading), rarely: a blob seen
        // at `pc` this pass is taken to be there still. (A check per frame is no surer: the
        // stack was copied before it, up to a pass of the recorder ago.)
        let pass = self.pass;
        if let Some(&start) = self.pcs.get(&pc)
            && let Some(known) = self.blobs.get(&start)
            && known.checked == pass
        {
            return Some(known.clone());
        }
        let start = self.blob_start(mem, pc)?;
        // A cached blob is trusted only while it still holds the same method with the same
        // frame size (a method recompiled at another tier may land where its old code was).
        let cached = self.blobs.get(&start).cloned().filter(|known| {
            let method_now = known
                .method
                .and_then(|_| mem.u64(start.wrapping_add(self.layout.nmethod_method)).ok());
            let words_now = mem
                .u32(start.wrapping_add(self.layout.blob_frame_size))
                .ok()
                .map(|w| (w as i32).max(0) as u64);
            known.method == method_now && words_now == Some(known.frame_words)
        });
        let mut blob = match cached {
            Some(known) => known,
            None => self.read_blob(mem, start)?,
        };
        blob.checked = pass;
        self.blobs.insert(start, blob.clone());
        self.pcs.insert(pc, start);
        Some(blob)
    }

    /// The start of the used code block holding `pc`, through the code heap's segment map.
    fn blob_start(&mut self, mem: &impl Target, pc: u64) -> Option<u64> {
        let mut heap = self.heaps.iter().find(|h| (h.low..h.high).contains(&pc));
        if heap.is_none() {
            // The heaps may have grown since they were read.
            self.read_heaps(mem).ok()?;
            heap = self.heaps.iter().find(|h| (h.low..h.high).contains(&pc));
        }
        let heap = heap?;
        let mut i = (pc - heap.low).checked_shr(heap.log2_segment)?;
        // Each hop goes back up to 254 segments: 1024 cover any real blob. A map that does
        // not reach a block's start by then is garbage, not a block.
        let mut hops = 0;
        loop {
            let mut tag = [0u8];
            mem.read(heap.segmap.wrapping_add(i), &mut tag).ok()?;
            match tag[0] {
                0xFF => return None, // free
                0 => break,
                _ if hops == 1024 => return None,
                n => i = i.checked_sub(n as u64)?,
            }
            hops += 1;
        }
        let block = heap.low.wrapping_add(i << heap.log2_segment);
        let mut used = [0u8];
        mem.read(block.wrapping_add(self.layout.block_used), &mut used)
            .ok()?;
        (used[0] != 0).then(|| block.wrapping_add(self.layout.block_size))
    }

    fn read_blob(&self, mem: &impl Target, blob: u64) -> Option<Blob> {
        let l = &self.layout;
        let name = mem
            .c_string(mem.u64(blob.wrapping_add(l.blob_name)).ok()?, 128)
            .ok()?;
        let frame_words = mem.u32(blob.wrapping_add(l.blob_frame_size)).ok()? as i32;
        let method = if name.contains("nmethod") {
            mem.u64(blob.wrapping_add(l.nmethod_method))
                .ok()
                .filter(|&m| m != 0)
        } else {
            None
        };
        Some(Blob {
            start: blob,
            name,
            frame_words: frame_words.max(0) as u64,
            method,
            checked: 0,
        })
    }

    /// The return addresses up the frame-pointer chain from a frame anchor, the anchor's own
    /// pc first: what a frame-pointer unwinder sees. Meaningful for Java code only with
    /// `-XX:+PreserveFramePointer`; pinprof uses it to cross-check its own walk. A native
    /// method's wrapper leaves no fp in the anchor: its frame pointer then comes from its size.
    pub fn frame_pointer_chain(
        &mut self,
        mem: &impl Target,
        stack: &StackBytes,
        anchor: [u64; 3],
    ) -> Vec<u64> {
        let [sp, pc, mut fp] = anchor;
        if fp == 0
            && let Some(blob) = self.blob(mem, pc)
        {
            fp = sp
                .wrapping_add(blob.frame_words.wrapping_mul(8))
                .wrapping_sub(16);
        }
        let mut pcs = vec![pc];
        while pcs.len() < MAX_FRAMES && fp != 0 {
            let (Some(ret), Some(next)) = (stack.word(fp.wrapping_add(8)), stack.word(fp)) else {
                break;
            };
            pcs.push(ret);
            if next <= fp {
                break;
            }
            fp = next;
        }
        pcs
    }

    /// Whether `pc` is in a compiled Java method (an nmethod, native wrappers included).
    pub fn in_compiled_method(&mut self, mem: &impl Target, pc: u64) -> bool {
        self.blob(mem, pc).is_some_and(|b| b.method.is_some())
    }

    /// Says why a virtual thread's frozen frames were not read, when PINPROF_DEBUG is set.
    pub fn say_unread(&self, why: super::chunk::Unread) {
        if self.debug {
            say!("pinprof: debug: frozen frames not read: {why:?}");
        }
    }

    /// Says why a frame could not be named, when PINPROF_DEBUG is set: never a guessed name.
    fn debug(&self, why: std::fmt::Arguments) {
        if self.debug {
            say!("pinprof: debug: [unknown java frame]: {why}");
        }
    }

    /// `pkg.Class.method` of a `Method*`.
    fn method_name(&mut self, mem: &impl Target, method: Option<u64>) -> String {
        let Some(method) = method.filter(|&m| m != 0) else {
            return UNKNOWN_JAVA_FRAME.into();
        };
        if let Some(known) = self.methods.get(&method) {
            return known.clone().unwrap_or_else(|| UNKNOWN_JAVA_FRAME.into());
        }
        let name = self.read_method_name(mem, method);
        if name.is_none() {
            self.debug(format_args!(
                "Method* {method:#x} cannot be read (a stale slot, or its class was unloaded)"
            ));
        }
        self.methods.insert(method, name.clone());
        name.unwrap_or_else(|| UNKNOWN_JAVA_FRAME.into())
    }

    fn read_method_name(&self, mem: &impl Target, method: u64) -> Option<String> {
        let l = &self.layout;
        let at = |base: u64, offset: u64| mem.u64(base.wrapping_add(offset)).ok();
        let const_method = at(method, l.method_const)?;
        let pool = at(const_method, l.const_constants)?;
        let holder = at(pool, l.pool_holder)?;
        let class = self.symbol(mem, at(holder, l.klass_name)?)?;
        let index = mem
            .u16(const_method.wrapping_add(l.const_name_index))
            .ok()?;
        // The constant pool's slots follow it; a u16 index times 8 cannot overflow.
        let name = self.symbol(
            mem,
            at(pool.wrapping_add(l.pool_size), 8 * u64::from(index))?,
        )?;
        // Each part is cut to a name's length already; the whole is one name.
        let mut name = format!("{}.{name}", class.replace('/', "."));
        budget::cut_name(&mut name);
        Some(name)
    }

    fn symbol(&self, mem: &impl Target, symbol: u64) -> Option<String> {
        mem.symbol(symbol, self.layout.symbol_length, self.layout.symbol_body)
    }
}

/// Whether an interpreted frame's monitor block holds a locked object (`synchronized (x)`).
/// Each entry is a `BasicObjectLock`: a displaced header word, then the object.
fn interpreted_frame_locks(stack: &StackBytes, fp: u64) -> bool {
    let bottom = slot(fp, INTERPRETER_MONITOR_BLOCK);
    let Some(value) = stack.word(bottom) else {
        return false;
    };
    let top = if (value as i64).unsigned_abs() < 1 << 16 {
        slot(fp, value as i64)
    } else {
        value
    };
    if top >= bottom || !(bottom - top).is_multiple_of(16) || bottom - top > 64 * 16 {
        return false;
    }
    (0..(bottom - top) / 16).any(|i| {
        let object = top.wrapping_add(16 * i + 8);
        stack.word(object).is_some_and(|o| o != 0)
    })
}

/// A chunk slot holding a word offset from `from`, as an address.
fn relative(stack: &StackBytes, from: u64, at: u64) -> Option<u64> {
    let offset = stack.word(at)? as i64;
    // Offsets within a frame: anything larger is garbage.
    if offset.unsigned_abs() > 1 << 20 {
        return None;
    }
    Some(slot(from, offset))
}

/// The line of `bci` in a compressed line number table (`CompressedLineNumberReadStream`):
/// pairs of (bci, line) deltas from (0, 0), a byte of 5 + 3 bits each, or 0xFF then two
/// signed UNSIGNED5 ints; a 0 byte ends it.
fn line_at(table: &[u8], bci: u32) -> Option<u32> {
    let (mut at_bci, mut line) = (0i64, 0i64);
    let mut best: Option<(i64, i64)> = None;
    let mut pos = 0;
    while let Some(&b) = table.get(pos) {
        if b == 0 {
            break;
        }
        if b == 0xFF {
            pos += 1;
            let mut signed = || {
                let v = super::inlining::read_unsigned5(table, &mut pos)?;
                Some(i64::from((v >> 1) as i32 ^ -((v & 1) as i32)))
            };
            at_bci += signed()?;
            line += signed()?;
        } else {
            pos += 1;
            at_bci += i64::from(b >> 3);
            line += i64::from(b & 7);
        }
        if at_bci == i64::from(bci) {
            return u32::try_from(line).ok();
        }
        if at_bci < i64::from(bci) && best.is_none_or(|(b, _)| at_bci >= b) {
            best = Some((at_bci, line));
        }
    }
    best.and_then(|(_, l)| u32::try_from(l).ok())
}

fn slot(fp: u64, words: i64) -> u64 {
    fp.wrapping_add_signed(words.wrapping_mul(8))
}

#[cfg(test)]
mod tests {
    use super::{super::vmstructs::fake::FakeMemory, *};

    const STACK: u64 = 0x7000;
    const INTERPRETER: u64 = 0x10_0000;
    const CALL_STUB_RETURN: u64 = 0x20_0000;
    const HEAP: u64 = 0x40_0000;
    const SEGMAP: u64 = 0x50_0000;
    /// A stub's blob: the first block of the heap, its header 16 bytes.
    const BLOB: u64 = HEAP + 16;
    const STUB_PC: u64 = HEAP + 0x100;

    fn layout() -> Layout {
        Layout {
            heaps: 0x1000,
            array_len: 0,
            array_data: 8,
            heap_memory: 0,
            heap_segmap: 16,
            heap_log2: 32,
            space_low: 0,
            space_high: 8,
            block_used: 8,
            block_size: 16,
            blob_name: 0,
            blob_frame_size: 8,
            nmethod_method: 16,
            method_const: 8,
            method_flags: 16,
            const_constants: 8,
            const_name_index: 16,
            pool_holder: 8,
            pool_size: 16,
            klass_name: 8,
            symbol_length: 0,
            symbol_body: 2,
            interpreter: (INTERPRETER, INTERPRETER + 0x1000),
            call_stub_return: CALL_STUB_RETURN,
            wrapper_anchor: 0,
            anchor_sp: 0,
            anchor_pc: 8,
            anchor_fp: 16,
            lines: None,
            hidden: None,
        }
    }

    fn walker(layout: Layout) -> Walker {
        let Caches {
            methods,
            lines,
            flags,
            blobs,
            pcs,
        } = caches(DEFAULT_CACHE_BYTES);
        Walker {
            layout,
            heaps: vec![Heap {
                low: HEAP,
                high: HEAP + 0x1_0000,
                segmap: SEGMAP,
                log2_segment: 6,
            }],
            methods,
            lines,
            flags,
            blobs,
            pcs,
            pass: 0,
            epoch: std::time::Instant::now(),
            inlining: None,
            inlining_error: None,
            debug: false,
        }
    }

    /// A code heap holding one used block of 8 segments: a stub of `frame_words` words.
    fn code(frame_words: u32) -> FakeMemory {
        let mut mem = FakeMemory::default();
        mem.put(SEGMAP, &[0, 1, 2, 3, 4, 5, 6, 7])
            .put(HEAP + 8, &[1])
            .put_u64(BLOB, 0x9000)
            .put_str(0x9000, "StubRoutines")
            .put_u32(BLOB + 8, frame_words);
        mem
    }

    fn words(values: &[u64]) -> Vec<u8> {
        values.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    #[test]
    fn a_stack_that_never_ends_is_cut_at_the_frame_cap() {
        // Every word is a return address into a one-word stub: each frame's caller is the next
        // word up, forever.
        let data = words(&[STUB_PC; 4 * MAX_FRAMES]);
        let stack = StackBytes::new(STACK, &data);
        let frames = walker(layout()).walk(&code(1), &stack, [STACK, STUB_PC, 0]);
        assert_eq!(frames.len(), MAX_FRAMES + 1);
        assert_eq!(frames[0].name, "[StubRoutines]");
        assert_eq!(frames[MAX_FRAMES].name, "[more frames not walked]");
    }

    #[test]
    fn a_stub_without_a_frame_size_returns_to_its_java_caller() {
        // An intrinsic stub (frame size 0) that opened a frame at fp: the caller's fp, then
        // the return into the interpreter; and one that has not (the return at sp).
        let caller_fp = STACK + 0x80;
        let mut values = [0u64; 32];
        values[4] = caller_fp; // at fp = STACK + 0x20
        values[5] = INTERPRETER + 0x10;
        let data = words(&values);
        let stack = StackBytes::new(STACK, &data);
        let mem = code(0);
        let frames = walker(layout()).walk(&mem, &stack, [STACK, STUB_PC, STACK + 0x20]);
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(frames[0].name, "[StubRoutines]");
        assert_eq!(frames[1].tier, Tier::Interpreted);

        let mut values = [0u64; 32];
        values[0] = INTERPRETER + 0x10;
        let data = words(&values);
        let stack = StackBytes::new(STACK, &data);
        let frames = walker(layout()).walk(&mem, &stack, [STACK, STUB_PC, caller_fp]);
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(frames[1].tier, Tier::Interpreted);

        // Both words returns into Java code (an adapter called from the interpreter, `fp`
        // still its caller's): the one at sp, the nearer frame, whose caller's fp is kept.
        let mut values = [0u64; 32];
        values[0] = INTERPRETER + 0x10;
        values[4] = caller_fp;
        values[5] = INTERPRETER + 0x20;
        let data = words(&values);
        let stack = StackBytes::new(STACK, &data);
        let frames = walker(layout()).walk(&mem, &stack, [STACK, STUB_PC, STACK + 0x20]);
        assert_eq!(frames[1].pc, INTERPRETER + 0x10, "{frames:?}");

        // Neither word a return into Java code: the walk stops at the stub, no guess.
        let data = words(&[0x1234; 32]);
        let stack = StackBytes::new(STACK, &data);
        let frames = walker(layout()).walk(&mem, &stack, [STACK, STUB_PC, STACK + 0x20]);
        assert_eq!(frames.len(), 1, "{frames:?}");
    }

    #[test]
    fn frame_chains_that_do_not_move_up_the_stack_end() {
        // An interpreted frame whose sender is itself (sender sp = sp, fp links to itself).
        let fp = STACK + 0x40;
        let mut values = [0u64; 32];
        values[(fp - STACK) as usize / 8 - 1] = STACK; // sender sp
        values[(fp - STACK) as usize / 8] = fp; // saved fp
        values[(fp - STACK) as usize / 8 + 1] = INTERPRETER; // return address
        let data = words(&values);
        let stack = StackBytes::new(STACK, &data);
        let mem = FakeMemory::default();
        let frames = walker(layout()).walk(&mem, &stack, [STACK, INTERPRETER, fp]);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].tier, Tier::Interpreted);
        assert_eq!(frames[0].name, UNKNOWN_JAVA_FRAME);
        // The frame-pointer view of the same loop.
        let pcs = walker(layout()).frame_pointer_chain(&mem, &stack, [STACK, INTERPRETER, fp]);
        assert_eq!(pcs, vec![INTERPRETER, INTERPRETER]);
    }

    #[test]
    fn hostile_frame_sizes_and_addresses_end_the_walk() {
        let data = words(&[STUB_PC; 8]);
        let stack = StackBytes::new(STACK, &data);
        // Huge, negative and zero frame sizes.
        for frame_words in [i32::MAX as u32, u32::MAX, 0x8000_0000, 0] {
            let frames = walker(layout()).walk(&code(frame_words), &stack, [STACK, STUB_PC, 0]);
            assert!(frames.len() <= 2, "{frame_words:#x}: {frames:?}");
        }
        // A stack pointer at the top of the address space.
        let top = StackBytes::new(u64::MAX - 15, &data[..16]);
        let frames = walker(layout()).walk(&code(1), &top, [u64::MAX - 7, STUB_PC, 0]);
        assert_eq!(frames.len(), 1);
        let pcs = walker(layout()).frame_pointer_chain(&code(4), &top, [u64::MAX - 7, STUB_PC, 0]);
        assert!(pcs.len() <= 2);
    }

    #[test]
    fn entry_frames_with_garbage_call_wrappers_end_the_walk() {
        let fp = STACK + 0x40;
        let mut values = [u64::MAX; 16];
        values[(fp - STACK) as usize / 8 - 6] = u64::MAX - 3;
        let data = words(&values);
        let stack = StackBytes::new(STACK, &data);
        let layout = Layout {
            wrapper_anchor: u64::MAX,
            anchor_sp: u64::MAX,
            anchor_pc: u64::MAX - 8,
            ..layout()
        };
        let frames = walker(layout).walk(
            &FakeMemory::default(),
            &stack,
            [STACK, CALL_STUB_RETURN, fp],
        );
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].tier, Tier::VmCall);
    }

    #[test]
    fn garbage_segment_maps_name_no_blob() {
        // A map that hops back one segment at a time for longer than any blob.
        let mut mem = code(1);
        mem.put(SEGMAP, &[1; 2048]);
        let mut w = walker(layout());
        w.heaps[0].high = HEAP + (2048 << 6);
        assert!(w.blob(&mem, HEAP + (2000 << 6)).is_none());
        // Hops past the start of the heap, a free segment, and a map at the top of memory.
        mem.put(SEGMAP, &[0, 5, 0xFF]);
        assert!(w.blob(&mem, HEAP + (1 << 6)).is_none());
        assert!(w.blob(&mem, HEAP + (2 << 6)).is_none());
        w.heaps[0].segmap = u64::MAX - 1;
        mem.put(u64::MAX - 1, &[1, 1]);
        assert!(w.blob(&mem, HEAP + (1 << 6)).is_none());
        // A heap spanning the address space, with the largest segments.
        mem.put(SEGMAP, &[0, 0]);
        w.heaps[0] = Heap {
            low: 0,
            high: u64::MAX,
            segmap: SEGMAP,
            log2_segment: 63,
        };
        assert!(w.blob(&mem, u64::MAX - 1).is_none());
    }

    #[test]
    fn garbage_metadata_names_no_method() {
        let layout = Layout {
            method_const: u64::MAX,
            method_flags: u64::MAX,
            pool_size: u64::MAX,
            const_name_index: u64::MAX,
            ..layout()
        };
        let mut mem = FakeMemory::default();
        mem.put(u64::MAX - 63, &[0xff; 64]).put(0, &[0xff; 64]);
        let mut w = walker(layout);
        for method in [u64::MAX, u64::MAX - 8, 1] {
            assert_eq!(w.method_name(&mem, Some(method)), UNKNOWN_JAVA_FRAME);
            // (Whatever the flags say: reading them must not panic.)
            let _ = w.synchronized(&mem, Some(method));
        }
    }

    #[test]
    fn garbage_monitor_blocks_hold_no_lock() {
        let fp = STACK + 0x80;
        for top in [
            i64::MIN as u64,
            u64::MAX,
            1 << 16,
            (-(1i64 << 15)) as u64,
            fp,
        ] {
            let mut values = [1u64; 32];
            values[(fp - STACK) as usize / 8 - 9] = top;
            let data = words(&values);
            let stack = StackBytes::new(STACK, &data);
            assert!(!interpreted_frame_locks(&stack, fp), "{top:#x}");
        }
    }

    /// `Class.method` metadata for a `Method*` at `method`, in the fake layout above.
    fn put_method(mem: &mut FakeMemory, method: u64, class: &str, name: &str) {
        let (cm, pool, klass, sym_class, sym_name) = (
            method + 0x100,
            method + 0x200,
            method + 0x300,
            method + 0x400,
            method + 0x500,
        );
        mem.put_u64(method + 8, cm)
            .put_u64(cm + 8, pool)
            .put(cm + 16, &1u16.to_ne_bytes())
            .put_u64(pool + 8, klass)
            .put_u64(pool + 16 + 8, sym_name)
            .put_u64(klass + 8, sym_class)
            .put(sym_class, &(class.len() as u16).to_ne_bytes())
            .put(sym_class + 2, class.as_bytes())
            .put(sym_name, &(name.len() as u16).to_ne_bytes())
            .put(sym_name + 2, name.as_bytes());
    }

    #[test]
    fn frozen_interpreted_and_compiled_frames_are_walked_from_a_kernel_copy() {
        use profiler_ebpf::{CHUNK_COPY_BYTES, ChunkCopy, ChunkHead, CopiedChunk};

        use super::super::chunk::{ChunkLayout, Frozen};
        const CHUNK: u64 = 0x80_0000;
        const STACK_OFFSET: u64 = 32;
        const INNER: u64 = 0x60_0000;
        const OUTER: u64 = 0x61_0000;
        // Words of the chunk's stack: an interpreted frame (sp 4, fp 14, its slots relative
        // to fp as frozen), then a compiled one (sp 16, 4 words) ending at bottom 22.
        let mut w = [0u64; 22];
        w[2] = 12; // saved fp: word 14, as words from this slot
        w[3] = INTERPRETER + 0x10; // the interpreted frame's pc
        w[5] = (-9i64) as u64; // empty monitor block
        w[7] = 3; // locals: fp + 3 words
        w[11] = INNER; // Method*
        w[13] = 2; // sender sp: fp + 2 words
        w[15] = STUB_PC; // the compiled frame's pc
        let bytes = words(&w[2..]);
        let mut copy = ChunkCopy {
            head: ChunkHead {
                count: 1,
                ..ChunkHead::default()
            },
            data: [0; CHUNK_COPY_BYTES],
        };
        copy.data[..bytes.len()].copy_from_slice(&bytes);
        copy.head.chunks[0] = CopiedChunk {
            addr: CHUNK,
            sp: 4,
            bottom: 22,
            offset: 0,
            len: bytes.len() as u32,
        };
        let chunk_layout = ChunkLayout {
            thread_tid: 8,
            vthread_cont: 16,
            cont_tail: 8,
            chunk_parent: 8,
            chunk_size: 16,
            chunk_sp: 20,
            chunk_bottom: 24,
            stack_offset: STACK_OFFSET,
            oops: crate::jvm::oops::OopEncoding::Full { colored: false },
        };
        let frozen = Frozen {
            vthread: 0x1000,
            vthread_id: 7,
            chunk: CHUNK,
            sp: 4,
        };
        let copied = chunk_layout
            .from_copy(&frozen, &copy.head, &copy.data)
            .unwrap();
        assert!(copied.complete);
        // Code and metadata only: the chunk itself is not in memory, it was copied.
        let mut mem = code(4);
        mem.put_str(0x9000, "nmethod").put_u64(BLOB + 16, OUTER);
        put_method(&mut mem, INNER, "pkg/A", "inner");
        put_method(&mut mem, OUTER, "pkg/B", "outer");
        let frames = walker(layout()).walk_chunks(&mem, &copied.chunks, None);
        let seen: Vec<_> = frames.iter().map(|f| (f.name.as_str(), f.tier)).collect();
        assert_eq!(
            seen,
            [
                ("pkg.A.inner", Tier::Interpreted),
                ("pkg.B.outer", Tier::Compiled)
            ]
        );
    }
}
