//! Java stacks (frozen chunks too), copied as they block: at a pinned carrier's switch-out,
//! in a waker's wake-up, or as a thread leaves the system call it blocked in.

use aya_ebpf::{bindings::BPF_RB_NO_WAKEUP, maps::PerCpuArray};
use profiler_ebpf::{
    CARRIER_BIT, CHUNK_COPY_BYTES, ChunkHead, CopiedChunk, JavaState, JvmLayout, MAX_COPIED_CHUNKS,
    OffCpuStart, STACK_COPY_BYTES, StackChunkCopy, StackCopy, StackHead, StackRequest, THREAD_BITS,
    counter, java_flags, kind, task_state, uncolor_oop,
};

use super::{
    maps::{
        COPY_ENDS, EVENTS, JAVA_THREADS, STACK_CHUNK_SCRATCH, STACK_REQUESTS, STACK_SCRATCH, count,
    },
    memory::read_user,
    settings::{
        JAVA_STATE_IN_JAVA, JVM_LAYOUT, MIN_JAVA_STACK_NS, MIN_SYSCALL_NS, SYSCALLS_AT_SWITCHES,
        setting,
    },
};

/// When system calls are traced, a Java thread that blocked for long in a call out of Java
/// (its frame anchor is set) gets its stack copied when it leaves that system call, where
/// `sys_exit` runs; a carrier blocked with a virtual thread mounted (pinned) gets it however
/// short the block: those are rare next to all switches, and each is a pinned event to be
/// named. Idle carriers (nothing mounted) do not. (Otherwise stacks are copied as threads
/// block: see `copy_blocked_java_stack`.)
#[inline(always)]
pub(crate) fn request_java_stack(tid: u32, start: &OffCpuStart, duration: u64) {
    let min = setting(&MIN_JAVA_STACK_NS);
    let java = &start.java;
    let carrier = java.flags & java_flags::CARRIER != 0;
    let mounted = java.flags & java_flags::MOUNTED != 0;
    if min == 0
        || setting(&MIN_SYSCALL_NS) == u64::MAX
        || setting(&SYSCALLS_AT_SWITCHES) != 0
        || (duration < min && !(carrier && mounted))
        || start.prev_state == task_state::RUNNING
        || java.flags & java_flags::KNOWN == 0
        || java.anchor_sp == 0
        || (carrier && !mounted)
    {
        return;
    }
    let request = StackRequest {
        start_ns: start.start_ns,
        anchor_sp: java.anchor_sp,
    };
    if STACK_REQUESTS.insert(tid, request, 0).is_err() {
        count(counter::STACK_COPY_MISSES);
    }
}

/// Copies the Java stack of the current thread `tid` as it goes off CPU (when system calls
/// are not traced): `java` is its state read at this switch-out and `start_ns` the wait's
/// start, the copy's key.
#[inline(always)]
pub(crate) fn copy_blocked_java_stack(
    tid: u32,
    start_ns: u64,
    java: &JavaState,
    scratch: &Scratch,
) {
    if setting(&MIN_JAVA_STACK_NS) == 0 || java.anchor_sp == 0 {
        return;
    }
    let Some(&entry) = (unsafe { JAVA_THREADS.get(&tid) }) else {
        return;
    };
    let layout: JvmLayout = setting(&JVM_LAYOUT);
    let field = |offset: u32| read_user::<u64>((entry & !THREAD_BITS) + offset as u64);
    // The anchor as it is now (the fp may be filled in after the window was read).
    let fp = match java.anchor_fp {
        0 => field(layout.anchor_fp).unwrap_or(0),
        fp => fp,
    };
    let from = [java.anchor_sp, java.anchor_pc, fp];
    copy_stack_from(tid, start_ns, entry, &layout, from, scratch);
}

/// Copies the Java stack of `tid` if one was requested for it (see `request_java_stack`).
#[inline(always)]
pub(crate) fn copy_java_stack(tid: u32) {
    let Some(request) = STACK_REQUESTS.get_ptr(tid) else {
        return;
    };
    let request = unsafe { *request };
    let _ = STACK_REQUESTS.remove(tid);
    let Some(&entry) = (unsafe { JAVA_THREADS.get(&tid) }) else {
        return;
    };
    let thread = entry & !THREAD_BITS;
    let layout: JvmLayout = setting(&JVM_LAYOUT);
    // The same anchor as at the block, or the thread went on in between (not a syscall wait).
    let sp = read_user::<u64>(thread + layout.anchor_sp as u64).unwrap_or(0);
    if sp == 0 || sp != request.anchor_sp {
        count(counter::STACK_COPY_MISSES);
        return;
    }
    let pc = read_user::<u64>(thread + layout.anchor_pc as u64).unwrap_or(0);
    let fp = read_user::<u64>(thread + layout.anchor_fp as u64).unwrap_or(0);
    let scratch = Scratch {
        stack: &STACK_SCRATCH,
        chunked: &STACK_CHUNK_SCRATCH,
        kinds: [kind::STACK_COPY, kind::STACK_CHUNK_COPY],
    };
    copy_stack_from(
        tid,
        request.start_ns,
        entry,
        &layout,
        [sp, pc, fp],
        &scratch,
    );
}

/// Where a program makes its stack copies (one for each program that can interrupt another).
pub(crate) struct Scratch {
    pub stack: &'static PerCpuArray<StackCopy>,
    pub chunked: &'static PerCpuArray<StackChunkCopy>,
    /// The record kinds its copies are sent as: plain, with frozen chunks.
    pub kinds: [u32; 2],
}

/// Copies the Java stack of the current thread `tid` as an on-CPU sample finds it, keyed by
/// the sample's time: from its frame anchor when it is out of Java code (in the VM or native
/// code, the anchor is set), else from its user registers (`regs`: sp, pc, fp) in Java code.
#[inline(always)]
pub(crate) fn copy_sampled_java_stack(
    tid: u32,
    time_ns: u64,
    java: &JavaState,
    regs: [u64; 3],
    scratch: &Scratch,
) {
    let Some(&entry) = (unsafe { JAVA_THREADS.get(&tid) }) else {
        return;
    };
    let layout: JvmLayout = setting(&JVM_LAYOUT);
    // Neither in Java code nor out of it with a Java frame (a compiler thread, the VM's own
    // work): no Java stack, and its registers point at no Java frame.
    let from = if java.anchor_sp != 0 {
        [java.anchor_sp, java.anchor_pc, java.anchor_fp]
    } else if java.thread_state == setting(&JAVA_STATE_IN_JAVA) {
        regs
    } else {
        return;
    };
    if from[0] == 0 {
        return;
    }
    copy_stack_from(tid, time_ns, entry, &layout, from, scratch);
}

/// Copies the stack of Java thread `tid` (its `JAVA_THREADS` entry) from `start` (sp, pc,
/// fp), with its mounted virtual thread's frozen frames, and sends it keyed by `key_ns`.
#[inline(always)]
fn copy_stack_from(
    tid: u32,
    key_ns: u64,
    entry: u64,
    layout: &JvmLayout,
    start: [u64; 3],
    scratch: &Scratch,
) {
    let thread = entry & !THREAD_BITS;
    let sp = start[0];
    let base = read_user::<u64>(thread + layout.stack_base as u64).unwrap_or(0);
    let mut len = if base > sp {
        (base - sp).min(STACK_COPY_BYTES as u64)
    } else {
        STACK_COPY_BYTES as u64
    };
    let frozen = frozen_frames(layout, thread, entry);
    // A mounted virtual thread's frames end at its continuation's entry frame: the carrier's
    // own frames below it (thousands of bytes, to the stack's base) are never walked.
    if frozen.vthread != 0
        && let Some(&end) = unsafe { COPY_ENDS.get(&tid) }
        && end > sp
    {
        len = len.min(end - sp);
    }
    // A virtual thread with frames frozen in a chunk: those frames are copied too, now, while
    // they are where the chunk says (later, the GC may move the chunk, or the thread thaw them).
    // Either copy is made in its scratch map and only its used part sent.
    if frozen.chunk != 0
        && layout.chunk_stack != 0
        && let Some(copy) = scratch.chunked.get_ptr_mut(0)
    {
        unsafe {
            let data = (*copy).data.as_mut_ptr();
            let used = copy_chunks(
                core::ptr::addr_of_mut!((*copy).chunk),
                data,
                layout,
                &frozen,
            );
            // A bound the verifier can see for where the stack goes (never false).
            if used > CHUNK_COPY_BYTES {
                return;
            }
            let head = core::ptr::addr_of_mut!((*copy).stack);
            let len = fill_stack_copy(head, data.add(used), tid, key_ns, start, len, &frozen);
            (*head).kind = scratch.kinds[1];
            let heads = size_of::<StackHead>() + size_of::<ChunkHead>();
            send_stack(copy.cast(), heads + used, len);
        }
        return;
    }
    let Some(copy) = scratch.stack.get_ptr_mut(0) else {
        count(counter::STACK_COPY_MISSES);
        return;
    };
    unsafe {
        let head = core::ptr::addr_of_mut!((*copy).head);
        let data = (*copy).data.as_mut_ptr();
        let len = fill_stack_copy(head, data, tid, key_ns, start, len, &frozen);
        (*head).kind = scratch.kinds[0];
        send_stack(copy.cast(), size_of::<StackHead>(), len);
    }
}

/// Sends the used part of a stack copy filled in its scratch map: `before` bytes, then `len`
/// bytes of stack (none: nothing to send, the miss was counted). A full ring buffer loses it.
#[inline(always)]
unsafe fn send_stack(copy: *const u8, before: usize, len: usize) {
    let size = before + len;
    // Never false; bounds the verifier can see: the larger scratch map's size.
    if len == 0 || size > size_of::<StackChunkCopy>() {
        return;
    }
    let bytes = unsafe { core::slice::from_raw_parts(copy, size) };
    if EVENTS
        .output::<[u8]>(bytes, BPF_RB_NO_WAKEUP as u64)
        .is_err()
    {
        count(counter::STACK_COPY_MISSES);
        count(counter::LOST_EVENTS);
    }
}

/// Fills a stack copy's head (where the walk starts: sp, pc, fp; the frozen frames'
/// whereabouts) and copies `len` bytes of the stack from sp to `data`; returns the bytes
/// copied (0: none, counted as a miss), `STACK_COPY_BYTES` at most.
#[inline(always)]
unsafe fn fill_stack_copy(
    copy: *mut StackHead,
    data: *mut u8,
    tid: u32,
    key_ns: u64,
    start: [u64; 3],
    len: u64,
    frozen: &Frozen,
) -> usize {
    let sp = start[0];
    unsafe {
        (*copy).kind = kind::STACK_COPY;
        (*copy).tid = tid;
        (*copy).start_ns = key_ns;
        (*copy).anchor_sp = sp;
        (*copy).anchor_pc = start[1];
        (*copy).anchor_fp = start[2];
        (*copy).vthread = frozen.vthread;
        (*copy).vthread_id = frozen.vthread_id;
        (*copy).chunk = frozen.chunk;
        (*copy).chunk_sp = frozen.sp;
        // A length the verifier can bound: 1..=STACK_COPY_BYTES.
        let len = ((len as usize).wrapping_sub(1) & (STACK_COPY_BYTES - 1)) + 1;
        let read = aya_ebpf::helpers::generated::bpf_probe_read_user(
            data.cast(),
            len as u32,
            sp as *const core::ffi::c_void,
        );
        if read != 0 {
            count(counter::STACK_COPY_MISSES);
            (*copy).len = 0;
            return 0;
        }
        (*copy).len = len as u32;
        len
    }
}

/// Two words below a chunk frame's sp belong to it: its return address and saved fp.
const CHUNK_METADATA_WORDS: u32 = 2;
/// A chunk larger than this many words is garbage.
const MAX_CHUNK_WORDS: u32 = 1 << 24;

/// Copies the frames of the chunks `frozen` begins with: the tail from its noted `sp`, then
/// its parents from theirs, each down to its `bottom` and with the two words below its `sp`,
/// one read per chunk, `CHUNK_COPY_BYTES` and `MAX_COPIED_CHUNKS` at most (what is left is
/// said in `cut` and `rest`). The bytes go to `data`, one chunk after the other; returns how
/// many.
#[inline(always)]
pub(crate) unsafe fn copy_chunks(
    copy: *mut ChunkHead,
    data: *mut u8,
    layout: &JvmLayout,
    frozen: &Frozen,
) -> usize {
    unsafe {
        (*copy).count = 0;
        (*copy).cut = 0;
        (*copy).rest = 0;
    }
    let mut chunk = frozen.chunk;
    let mut off = 0u64;
    let mut cut = 0u64;
    for i in 0..MAX_COPIED_CHUNKS + 1 {
        if chunk == 0 || off >= CHUNK_COPY_BYTES as u64 {
            break;
        }
        let int = |offset: u32| read_user::<u32>(chunk + offset as u64).unwrap_or(0);
        let sp = if i == 0 {
            frozen.sp
        } else {
            int(layout.chunk_sp)
        };
        let bottom = int(layout.chunk_bottom);
        let parent = oop_field(layout, chunk, layout.chunk_parent);
        if bottom > MAX_CHUNK_WORDS {
            break;
        }
        // An empty chunk has no frames: on to its parent.
        if sp < bottom {
            let n = unsafe { (*copy).count } as usize;
            if n >= MAX_COPIED_CHUNKS {
                break;
            }
            let from = sp.saturating_sub(CHUNK_METADATA_WORDS);
            let whole = (bottom - from) as u64 * 8;
            let len = whole.min(CHUNK_COPY_BYTES as u64 - off);
            // Bounds the verifier can see: an offset below CHUNK_COPY_BYTES, a length of
            // 1..=CHUNK_COPY_BYTES, in a buffer of at least twice that.
            let at = off as usize & (CHUNK_COPY_BYTES - 1);
            let len = ((len as usize).wrapping_sub(1) & (CHUNK_COPY_BYTES - 1)) + 1;
            let src = chunk + layout.chunk_stack as u64 + from as u64 * 8;
            let read = unsafe {
                aya_ebpf::helpers::generated::bpf_probe_read_user(
                    data.add(at).cast(),
                    len as u32,
                    src as *const core::ffi::c_void,
                )
            };
            if read != 0 {
                count(counter::STACK_COPY_MISSES);
                break;
            }
            unsafe {
                (*copy).chunks[n & (MAX_COPIED_CHUNKS - 1)] = CopiedChunk {
                    addr: chunk,
                    sp,
                    bottom,
                    offset: off as u32,
                    len: len as u32,
                };
                (*copy).count = n as u32 + 1;
            }
            off += len as u64;
            cut = whole - len as u64;
            if cut != 0 {
                break;
            }
        }
        chunk = parent;
    }
    if cut != 0 || chunk != 0 {
        unsafe {
            (*copy).cut = cut as u32;
            (*copy).rest = if cut != 0 { 0 } else { chunk };
        }
        count(counter::CHUNK_COPIES_CUT);
    }
    off as usize
}

/// A mounted virtual thread and where its frozen frames begin (all zero: none).
pub(crate) struct Frozen {
    pub(crate) vthread: u64,
    pub(crate) vthread_id: u64,
    pub(crate) chunk: u64,
    pub(crate) sp: u32,
}

/// An object field of `obj` holding an oop, compressed or not (0: null or unreadable).
#[inline(always)]
pub(crate) fn oop_field(layout: &JvmLayout, obj: u64, offset: u32) -> u64 {
    let at = obj + offset as u64;
    if layout.oop_shift == u32::MAX {
        read_user::<u64>(at).map_or(0, |raw| uncolor_oop(raw, layout.colored_oops))
    } else {
        match read_user::<u32>(at) {
            Some(0) | None => 0,
            Some(narrow) => layout.oop_base + ((narrow as u64) << (layout.oop_shift & 63)),
        }
    }
}

/// The mounted virtual thread of carrier `thread` (its oop and id) and where its frozen
/// frames begin: its continuation's tail `StackChunk` and that chunk's `sp`. Read as the thread
/// leaves its system call, before it runs again: only the thread itself changes its chunk
/// while mounted. All zero when nothing is mounted or the layout lacks the offsets.
#[inline(always)]
fn frozen_frames(layout: &JvmLayout, thread: u64, entry: u64) -> Frozen {
    let none = Frozen {
        vthread: 0,
        vthread_id: 0,
        chunk: 0,
        sp: 0,
    };
    if entry & CARRIER_BIT == 0 || layout.vthread_cont == 0 {
        return none;
    }
    let handle = |offset: u32| {
        read_user::<u64>(thread + offset as u64)
            .and_then(read_user::<u64>)
            .map(|raw| uncolor_oop(raw, layout.colored_oops))
    };
    let (Some(own), Some(vthread)) = (handle(layout.thread_obj), handle(layout.vthread)) else {
        return none;
    };
    if own == vthread || vthread == 0 {
        return none;
    }
    frozen_of(layout, vthread)
}

/// Where the frozen frames of virtual thread `vthread` (an oop) begin: its continuation's
/// tail `StackChunk` and that chunk's `sp` (zero where a field is not there).
#[inline(always)]
pub(crate) fn frozen_of(layout: &JvmLayout, vthread: u64) -> Frozen {
    let id = read_user::<u64>(vthread + layout.java_tid as u64).unwrap_or(0);
    let cont = oop_field(layout, vthread, layout.vthread_cont);
    let chunk = if cont == 0 {
        0
    } else {
        oop_field(layout, cont, layout.cont_tail)
    };
    let sp = if chunk == 0 {
        0
    } else {
        read_user::<u32>(chunk + layout.chunk_sp as u64).unwrap_or(0)
    };
    Frozen {
        vthread,
        vthread_id: id,
        chunk,
        sp,
    }
}

/// Copies the Java stack of the current thread `tid` as it releases a waiter from inside a
/// system call (an unpark, a mutex unlock), keyed by the wake-up's time: it is in the VM or
/// native code, so its frame anchor says where its Java frames begin.
#[inline(always)]
pub(crate) fn copy_waker_java_stack(tid: u32, wake_ns: u64, scratch: &Scratch) {
    let Some(&entry) = (unsafe { JAVA_THREADS.get(&tid) }) else {
        return;
    };
    let layout: JvmLayout = setting(&JVM_LAYOUT);
    let thread = entry & !THREAD_BITS;
    let field = |offset: u32| read_user::<u64>(thread + offset as u64).unwrap_or(0);
    let sp = field(layout.anchor_sp);
    if sp == 0 {
        return;
    }
    let from = [sp, field(layout.anchor_pc), field(layout.anchor_fp)];
    copy_stack_from(tid, wake_ns, entry, &layout, from, scratch);
}
