//! Walks a Java thread's stack from outside, the way HotSpot's own tools do: from the frame
//! anchor a blocked thread leaves behind, through interpreted frames (their `Method*` sits at a
//! fixed slot below the frame pointer) and compiled ones (their size is in the code blob),
//! naming each method from the JVM's metadata. No frame pointers are needed in Java code.
//!
//! The stack bytes come from a copy made in the kernel as the thread blocked (`StackCopy`);
//! the code cache and metadata are read live, since they outlive the frames that use them.

use std::collections::HashMap;

use anyhow::{Context, Result};

use super::{inlining::Inlining, memory::Memory, vmstructs::VmStructs};
use crate::events::UNKNOWN_JAVA_FRAME;

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
const MAX_FRAMES: usize = 128;

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
}

/// A copy of stack memory starting at `base`, made as the thread blocked. Nothing outside it is
/// read: the live stack has moved on since.
pub struct StackBytes<'a> {
    pub base: u64,
    pub data: &'a [u8],
}

impl StackBytes<'_> {
    pub(super) fn word(&self, addr: u64) -> Option<u64> {
        let at = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        let bytes = self.data.get(at..at.checked_add(8)?)?;
        Some(u64::from_ne_bytes(bytes.try_into().ok()?))
    }

    fn end(&self) -> u64 {
        self.base.saturating_add(self.data.len() as u64)
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
}

pub struct Walker {
    layout: Layout,
    heaps: Vec<Heap>,
    methods: HashMap<u64, Option<String>>,
    blobs: HashMap<u64, Blob>,
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
}

impl Walker {
    pub fn new(mem: &Memory, vm: &VmStructs) -> Result<Self> {
        let f = |t: &str, n: &str| vm.offset(t, n);
        let s = |t: &str, n: &str| vm.address(t, n);
        let interpreter_queue = mem.u64(s("AbstractInterpreter", "_code")?)?;
        let stub_buffer = mem.u64(interpreter_queue + f("StubQueue", "_stub_buffer")?)?;
        let limit = mem.u32(interpreter_queue + f("StubQueue", "_buffer_limit")?)? as u64;
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
            block_used: header + f("HeapBlock::Header", "_used")?,
            block_size,
            blob_name: f("CodeBlob", "_name")?,
            blob_frame_size: f("CodeBlob", "_frame_size")?,
            nmethod_method: f("nmethod", "_method").or_else(|_| f("CompiledMethod", "_method"))?,
            method_const: f("Method", "_constMethod")?,
            method_flags: f("Method", "_access_flags")? + f("AccessFlags", "_flags")?,
            const_constants: f("ConstMethod", "_constants")?,
            const_name_index: f("ConstMethod", "_name_index")?,
            pool_holder: f("ConstantPool", "_pool_holder")?,
            pool_size: vm.type_size("ConstantPool")?,
            klass_name: f("Klass", "_name")?,
            symbol_length: f("Symbol", "_length")?,
            symbol_body: f("Symbol", "_body")?,
            interpreter: (stub_buffer, stub_buffer + limit),
            call_stub_return: mem.u64(s("StubRoutines", "_call_stub_return_address")?)?,
            wrapper_anchor: f("JavaCallWrapper", "_anchor")?,
            anchor_sp: anchor("_last_Java_sp")?,
            anchor_pc: anchor("_last_Java_pc")?,
            anchor_fp: anchor("_last_Java_fp")?,
        };
        let (inlining, inlining_error) = match Inlining::new(vm) {
            Ok(i) => (Some(i), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        let mut walker = Self {
            layout,
            heaps: Vec::new(),
            methods: HashMap::new(),
            blobs: HashMap::new(),
            inlining,
            inlining_error,
            debug: std::env::var_os("PINPROF_DEBUG").is_some(),
        };
        walker.read_heaps(mem).context("reading the code cache")?;
        Ok(walker)
    }

    fn read_heaps(&mut self, mem: &Memory) -> Result<()> {
        let l = &self.layout;
        let array = mem.u64(l.heaps)?;
        let len = mem.u32(array + l.array_len)?.min(16) as u64;
        let data = mem.u64(array + l.array_data)?;
        self.heaps.clear();
        for i in 0..len {
            let heap = mem.u64(data + 8 * i)?;
            let memory = heap + l.heap_memory;
            let segmap = heap + l.heap_segmap;
            self.heaps.push(Heap {
                low: mem.u64(memory + l.space_low)?,
                high: mem.u64(memory + l.space_high)?,
                segmap: mem.u64(segmap + l.space_low)?,
                log2_segment: mem.u32(heap + l.heap_log2)?.min(63),
            });
        }
        Ok(())
    }

    /// The Java frames of a blocked thread, innermost first, from its frame anchor.
    pub fn walk(&mut self, mem: &Memory, stack: &StackBytes, anchor: [u64; 3]) -> Vec<JavaFrame> {
        let [mut sp, pc, mut fp] = anchor;
        let mut frames = Vec::new();
        if sp == 0 {
            return frames;
        }
        // HotSpot sets the pc before blocking; without it, the return address just below sp
        // (below the copy) is read live, once.
        let mut pc = if pc != 0 {
            pc
        } else {
            mem.u64(sp.wrapping_sub(8)).unwrap_or(0)
        };
        loop {
            if frames.len() >= MAX_FRAMES {
                // Say where the walk stopped rather than end the stack silently.
                frames.push(JavaFrame {
                    pc,
                    name: "[more frames not walked]".into(),
                    tier: Tier::Unknown,
                    holds_monitor: false,
                });
                break;
            }
            let (lo, hi) = self.layout.interpreter;
            let next = if (lo..hi).contains(&pc) {
                let method = stack.word(slot(fp, INTERPRETER_METHOD));
                frames.push(JavaFrame {
                    pc,
                    name: self.method_name(mem, method),
                    tier: Tier::Interpreted,
                    holds_monitor: self.synchronized(mem, method)
                        || interpreted_frame_locks(stack, fp),
                });
                // sender sp, return address, saved fp
                (
                    stack.word(slot(fp, INTERPRETER_SENDER_SP)),
                    stack.word(fp.wrapping_add(8)),
                    stack.word(fp),
                )
            } else if pc == self.layout.call_stub_return {
                // An entry frame: Java called from C++. The JavaCallWrapper keeps the anchor of
                // the Java frames that made that call, if any.
                frames.push(JavaFrame {
                    pc,
                    name: "[called from the VM]".into(),
                    tier: Tier::VmCall,
                    holds_monitor: false,
                });
                let Some(wrapper) = stack.word(slot(fp, ENTRY_FRAME_CALL_WRAPPER)) else {
                    break;
                };
                let at = |field: u64| {
                    let addr = wrapper.wrapping_add(self.layout.wrapper_anchor + field);
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
                let tier = match (&blob.method, blob.name.as_str()) {
                    (Some(_), "native nmethod") => Tier::Native,
                    (Some(_), _) => Tier::Compiled,
                    (None, _) => Tier::Stub,
                };
                // A return into the continuation stubs (the return barrier): the callers
                // are still frozen in the virtual thread's stack chunk on the heap.
                let frozen = blob.method.is_none() && blob.name.contains("continuation");
                let name = match blob.method {
                    Some(m) => self.method_name(mem, Some(m)),
                    None if frozen => "[callers frozen in the virtual thread's stack chunk]".into(),
                    None => format!("[{}]", blob.name),
                };
                // The virtual thread's frames end at its continuation's entry.
                let bottom = frozen || name == "jdk.internal.vm.Continuation.enterSpecial";
                // Methods the JIT inlined here come first, innermost first; the chain must end
                // with the frame's own method to be trusted.
                if tier == Tier::Compiled
                    && let Some(mut scopes) = self
                        .inlining
                        .as_mut()
                        .and_then(|i| i.scopes(mem, stack, blob.start, sp, pc))
                    && scopes.pop() == blob.method
                {
                    // Marked from the method's `synchronized` flag: C2 may have elided the lock
                    // of a receiver that does not escape.
                    for method in scopes {
                        frames.push(JavaFrame {
                            pc,
                            name: self.method_name(mem, Some(method)),
                            tier: Tier::Inlined,
                            holds_monitor: self.synchronized(mem, Some(method)),
                        });
                    }
                }
                let holds_monitor = self.synchronized(mem, blob.method);
                frames.push(JavaFrame {
                    pc,
                    name,
                    tier,
                    holds_monitor,
                });
                if bottom || blob.frame_words == 0 {
                    break;
                }
                let sender_sp = sp.wrapping_add(blob.frame_words.wrapping_mul(8));
                (
                    Some(sender_sp),
                    stack.word(sender_sp.wrapping_sub(8)),
                    stack.word(sender_sp.wrapping_sub(16)),
                )
            } else {
                frames.push(JavaFrame {
                    pc,
                    name: UNKNOWN_JAVA_FRAME.into(),
                    tier: Tier::Unknown,
                    holds_monitor: false,
                });
                self.debug(format_args!(
                    "pc {pc:#x} (sp {sp:#x}) is neither in the interpreter nor in a code blob"
                ));
                break;
            };
            // Stacks grow down: a caller's frame is always above; anything else is garbage.
            match next {
                (Some(next_sp), Some(next_pc), next_fp)
                    if next_sp > sp && next_sp.is_multiple_of(8) =>
                {
                    if next_sp >= stack.end() {
                        // Deeper than the copy the kernel made: say so rather than guess.
                        frames.push(JavaFrame {
                            pc: next_pc,
                            name: "[more frames beyond the copied stack]".into(),
                            tier: Tier::Unknown,
                            holds_monitor: false,
                        });
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

    /// The code blob holding `pc`, through the code heap's segment map.
    fn blob(&mut self, mem: &Memory, pc: u64) -> Option<Blob> {
        let mut heap = self.heaps.iter().find(|h| (h.low..h.high).contains(&pc));
        if heap.is_none() {
            // The heaps may have grown since they were read.
            self.read_heaps(mem).ok()?;
            heap = self.heaps.iter().find(|h| (h.low..h.high).contains(&pc));
        }
        let heap = heap?;
        let mut i = (pc - heap.low).checked_shr(heap.log2_segment)?;
        for _ in 0..1024 {
            let mut tag = [0u8];
            mem.read(heap.segmap + i, &mut tag).ok()?;
            match tag[0] {
                0xFF => return None, // free
                0 => break,
                n => i = i.checked_sub(n as u64)?,
            }
        }
        let block = heap.low.wrapping_add(i << heap.log2_segment);
        let start = block.wrapping_add(self.layout.block_size);
        let mut used = [0u8];
        mem.read(block.wrapping_add(self.layout.block_used), &mut used)
            .ok()?;
        if used[0] == 0 {
            return None;
        }
        // Code is freed and its space reused (recompilation, unloading): a cached blob is
        // trusted only while it still holds the same method.
        if let Some(known) = self.blobs.get(&start) {
            let method_now = known
                .method
                .and_then(|_| mem.u64(start.wrapping_add(self.layout.nmethod_method)).ok());
            if known.method == method_now {
                return Some(known.clone());
            }
        }
        let blob = self.read_blob(mem, start)?;
        self.blobs.insert(start, blob.clone());
        Some(blob)
    }

    fn read_blob(&self, mem: &Memory, blob: u64) -> Option<Blob> {
        let l = &self.layout;
        let name = mem.c_string(mem.u64(blob + l.blob_name).ok()?, 128).ok()?;
        let frame_words = mem.u32(blob + l.blob_frame_size).ok()? as i32;
        let method = if name.contains("nmethod") {
            mem.u64(blob + l.nmethod_method).ok().filter(|&m| m != 0)
        } else {
            None
        };
        Some(Blob {
            start: blob,
            name,
            frame_words: frame_words.max(0) as u64,
            method,
        })
    }

    /// The return addresses up the frame-pointer chain from a frame anchor, the anchor's own
    /// pc first: what a frame-pointer unwinder sees. Meaningful for Java code only with
    /// `-XX:+PreserveFramePointer`; pinprof uses it to cross-check its own walk. A native
    /// method's wrapper leaves no fp in the anchor: its frame pointer then comes from its size.
    pub fn frame_pointer_chain(
        &mut self,
        mem: &Memory,
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
    pub fn in_compiled_method(&mut self, mem: &Memory, pc: u64) -> bool {
        self.blob(mem, pc).is_some_and(|b| b.method.is_some())
    }

    /// Says why a frame could not be named, when PINPROF_DEBUG is set: never a guessed name.
    fn debug(&self, why: std::fmt::Arguments) {
        if self.debug {
            say!("pinprof: debug: [unknown java frame]: {why}");
        }
    }

    /// Whether a method is declared `synchronized`.
    fn synchronized(&self, mem: &Memory, method: Option<u64>) -> bool {
        method
            .filter(|&m| m != 0)
            .and_then(|m| mem.u16(m + self.layout.method_flags).ok())
            .is_some_and(|flags| flags & ACC_SYNCHRONIZED != 0)
    }

    /// `pkg.Class.method` of a `Method*`.
    fn method_name(&mut self, mem: &Memory, method: Option<u64>) -> String {
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

    fn read_method_name(&self, mem: &Memory, method: u64) -> Option<String> {
        let l = &self.layout;
        let const_method = mem.u64(method + l.method_const).ok()?;
        let pool = mem.u64(const_method + l.const_constants).ok()?;
        let holder = mem.u64(pool + l.pool_holder).ok()?;
        let class = self.symbol(mem, mem.u64(holder + l.klass_name).ok()?)?;
        let index = mem.u16(const_method + l.const_name_index).ok()? as u64;
        let name = self.symbol(mem, mem.u64(pool + l.pool_size + 8 * index).ok()?)?;
        Some(format!("{}.{name}", class.replace('/', ".")))
    }

    fn symbol(&self, mem: &Memory, symbol: u64) -> Option<String> {
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

fn slot(fp: u64, words: i64) -> u64 {
    fp.wrapping_add_signed(words * 8)
}
