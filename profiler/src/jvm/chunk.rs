//! The older frames of a virtual thread, frozen in its continuation's stack chunks on the heap.
//!
//! A virtual thread that unmounted once keeps the frames it has not returned to since in
//! `jdk.internal.vm.StackChunk` objects: the continuation's `tail` chunk, then its `parent`s.
//! Once mounted again, its thread stack holds only the frames thawed since, and the oldest of
//! them returns into the return-barrier stub. A chunk holds frames laid out as on a thread
//! stack from its `sp` to its `bottom` (words after the chunk's header), in frozen form:
//! compiled frames as they were; interpreted frames with their frame pointer and the pointers
//! into their own frame stored as word offsets (`StackChunkFrameStream` in HotSpot).
//!
//! The kernel notes the tail chunk and its `sp` as the thread leaves the system call it blocked
//! in, and copies the frames of the tail chunk and its `parent`s then (`ChunkCopy`, up to its
//! limits): by the time the event is processed, a young GC may have moved the chunks, or the
//! thread returned into their frames. A copy that could not hold them all is set aside for
//! the chunks read again from the heap. Frames below the noted `sp` do not change until the
//! thread returns into them, so they are read only after checking that the same virtual
//! thread (same object, same id) still has the same chunk, with its `sp` no higher than noted.
//! A chunk the GC moved since, or frames already returned into, give no frames rather than
//! wrong ones (the walk then shows what the copy holds, and marks the stack cut).

use profiler_ebpf::ChunkHead;

use super::{oops::OopEncoding, vmstructs::Target, walk::StackBytes};

/// Where the fields involved live, from the JVM's own field offsets (`java_lang_VirtualThread::
/// _continuation_offset`...) and `InstanceStackChunkKlass::_offset_of_stack`.
#[derive(Clone, Copy, Debug)]
pub struct ChunkLayout {
    /// `Thread.tid` in a `java.lang.Thread` (a virtual thread too).
    pub thread_tid: u64,
    pub vthread_cont: u64,
    pub cont_tail: u64,
    pub chunk_parent: u64,
    pub chunk_size: u64,
    pub chunk_sp: u64,
    pub chunk_bottom: u64,
    /// Where a chunk's stack begins, from the chunk's start.
    pub stack_offset: u64,
    /// How its oop fields are stored.
    pub oops: OopEncoding,
}

/// What the kernel noted as the thread left its system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frozen {
    pub vthread: u64,
    pub vthread_id: u64,
    pub chunk: u64,
    pub sp: u32,
}

/// Frames of a virtual thread's chunks as the kernel copied them (tail first).
pub struct Copied {
    pub chunks: Vec<ChunkFrames>,
    /// The copy holds every frame, down to the oldest chunk's bottom.
    pub complete: bool,
}

/// One chunk's frames: a copy of its stack words, and where its frames begin and end.
pub struct ChunkFrames {
    pub base: u64,
    pub data: Vec<u8>,
    /// The first frame's sp and the end of the frames (`bottom`), as addresses.
    pub sp: u64,
    pub end: u64,
}

impl ChunkFrames {
    pub fn stack(&self) -> StackBytes<'_> {
        StackBytes::new(self.base, &self.data)
    }
}

/// A chain of chunks longer than this is garbage (a thread adds one only when its tail is
/// full: a few in practice).
const MAX_CHUNKS: usize = 16;
/// Frames read from one chunk, in bytes: deeper stacks are cut.
pub const MAX_CHUNK_BYTES: u64 = 256 << 10;
/// A chunk's size in words past this is not a chunk.
const MAX_CHUNK_WORDS: u64 = 1 << 24;
/// Words below a frame's sp it owns in a chunk: its return address and saved frame pointer.
const METADATA_WORDS: u64 = 2;

/// Why the frozen frames could not be read (said in debug output).
#[derive(Debug, PartialEq, Eq)]
pub enum Unread {
    /// Not the same virtual thread at that address: the GC moved it, or it ended.
    ThreadMoved,
    /// The chunk is no longer the thread's: the GC moved it, or it was thawed away.
    ChunkGone,
    /// The frames noted were returned into since.
    Thawed,
    /// Fields that make no sense.
    Garbage,
}

impl ChunkLayout {
    fn oop(&self, mem: &impl Target, at: u64) -> Option<u64> {
        self.oops.field(mem, at)
    }

    fn int(&self, mem: &impl Target, chunk: u64, offset: u64) -> Option<u64> {
        let value = mem.u32(chunk.wrapping_add(offset)).ok()? as i32;
        u64::try_from(value).ok()
    }

    /// The chunks' frames from the kernel's copy of them (a `ChunkCopy`'s head and bytes);
    /// None when it holds none, or does not fit the chunk fields read beside it.
    pub fn from_copy(&self, frozen: &Frozen, head: &ChunkHead, data: &[u8]) -> Option<Copied> {
        let count = usize::try_from(head.count).ok()?;
        let entries = head.chunks.get(..count).filter(|e| !e.is_empty())?;
        let mut chunks = Vec::with_capacity(count);
        let mut next_offset = 0u64;
        for (i, entry) in entries.iter().enumerate() {
            let last = i + 1 == count;
            let (sp, bottom) = (u64::from(entry.sp), u64::from(entry.bottom));
            // The tail's frames from where the kernel noted them, as for a heap read.
            if entry.addr == 0
                || (entry.addr == frozen.chunk && entry.sp != frozen.sp)
                || sp >= bottom
                || bottom > MAX_CHUNK_WORDS
            {
                return None;
            }
            let from = sp.saturating_sub(METADATA_WORDS);
            // (Word counts are below MAX_CHUNK_WORDS: times 8 they do not overflow.)
            let whole = (bottom - from) * 8;
            let (offset, len) = (u64::from(entry.offset), u64::from(entry.len));
            // Entries follow each other in the copy; only the last may be cut, by `cut`.
            let cut = if last { u64::from(head.cut) } else { 0 };
            if offset != next_offset || len == 0 || len + cut != whole {
                return None;
            }
            next_offset = offset + len;
            let data = data.get(offset as usize..next_offset as usize)?;
            let at = |words: u64| {
                entry
                    .addr
                    .checked_add(self.stack_offset)?
                    .checked_add(words * 8)
            };
            chunks.push(ChunkFrames {
                base: at(from)?,
                data: data.to_vec(),
                sp: at(sp)?,
                end: at(bottom)?,
            });
        }
        Some(Copied {
            chunks,
            complete: head.cut == 0 && head.rest == 0,
        })
    }

    /// The frames frozen below the thread's stack at the event, tail chunk first.
    pub fn read(&self, mem: &impl Target, frozen: &Frozen) -> Result<Vec<ChunkFrames>, Unread> {
        self.read_chain(mem, frozen)
    }

    fn read_chain(&self, mem: &impl Target, frozen: &Frozen) -> Result<Vec<ChunkFrames>, Unread> {
        let id = mem
            .u64(frozen.vthread.wrapping_add(self.thread_tid))
            .map_err(|_| Unread::ThreadMoved)?;
        if frozen.vthread_id == 0 || id != frozen.vthread_id {
            return Err(Unread::ThreadMoved);
        }
        let cont = self
            .oop(mem, frozen.vthread.wrapping_add(self.vthread_cont))
            .ok_or(Unread::ThreadMoved)?;
        // The thread's chunks now: the one noted must be among them, at the same address.
        let mut chain = Vec::new();
        let mut next = self.oop(mem, cont.wrapping_add(self.cont_tail));
        while let Some(chunk) = next {
            if chain.len() == MAX_CHUNKS || chain.contains(&chunk) {
                return Err(Unread::Garbage);
            }
            chain.push(chunk);
            next = self.oop(mem, chunk.wrapping_add(self.chunk_parent));
        }
        let first = chain
            .iter()
            .position(|&c| c == frozen.chunk)
            .ok_or(Unread::ChunkGone)?;
        let mut out = Vec::new();
        for (i, &chunk) in chain[first..].iter().enumerate() {
            let field = |offset| self.int(mem, chunk, offset).ok_or(Unread::Garbage);
            let (size, sp_now, bottom) = (
                field(self.chunk_size)?,
                field(self.chunk_sp)?,
                field(self.chunk_bottom)?,
            );
            let sp = if i == 0 {
                // Frames above the noted sp were frozen since: they are not this event's.
                let noted = u64::from(frozen.sp);
                if sp_now > noted {
                    return Err(Unread::Thawed);
                }
                noted
            } else {
                sp_now
            };
            if size > MAX_CHUNK_WORDS || bottom > size || sp > bottom {
                return Err(Unread::Garbage);
            }
            if sp == bottom {
                continue; // empty
            }
            // (Word counts are below MAX_CHUNK_WORDS: times 8 they do not overflow.)
            let at = |words: u64| {
                chunk
                    .checked_add(self.stack_offset)
                    .and_then(|start| start.checked_add(words * 8))
                    .ok_or(Unread::Garbage)
            };
            // From the first frame's return address and saved fp to the bottom, capped.
            let from = at(sp.saturating_sub(METADATA_WORDS))?;
            let end = at(bottom)?;
            let len = (end - from).min(MAX_CHUNK_BYTES);
            let mut data = vec![0; len as usize];
            mem.read(from, &mut data).map_err(|_| Unread::Garbage)?;
            out.push(ChunkFrames {
                base: from,
                data,
                sp: at(sp)?,
                end,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::{super::vmstructs::fake::FakeMemory, *};

    const VTHREAD: u64 = 0x1000;
    const CONT: u64 = 0x2000;
    const CHUNK: u64 = 0x3000;
    const PARENT: u64 = 0x5000;

    fn layout() -> ChunkLayout {
        ChunkLayout {
            thread_tid: 8,
            vthread_cont: 16,
            cont_tail: 8,
            chunk_parent: 8,
            chunk_size: 16,
            chunk_sp: 20,
            chunk_bottom: 24,
            stack_offset: 32,
            oops: OopEncoding::Full { colored: false },
        }
    }

    fn chunk(mem: &mut FakeMemory, at: u64, parent: u64, size: u32, sp: u32, bottom: u32) {
        mem.put_u64(at + 8, parent)
            .put_u32(at + 16, size)
            .put_u32(at + 20, sp)
            .put_u32(at + 24, bottom);
        for w in 0..u64::from(size) {
            mem.put_u64(at + 32 + 8 * w, w);
        }
    }

    fn memory() -> FakeMemory {
        let mut mem = FakeMemory::default();
        mem.put_u64(VTHREAD + 8, 77)
            .put_u64(VTHREAD + 16, CONT)
            .put_u64(CONT + 8, CHUNK);
        chunk(&mut mem, CHUNK, PARENT, 32, 10, 30);
        chunk(&mut mem, PARENT, 0, 16, 4, 16);
        mem
    }

    fn frozen() -> Frozen {
        Frozen {
            vthread: VTHREAD,
            vthread_id: 77,
            chunk: CHUNK,
            sp: 12,
        }
    }

    #[test]
    fn frames_from_the_noted_sp_then_the_parents() {
        let chunks = layout().read(&memory(), &frozen()).unwrap();
        assert_eq!(chunks.len(), 2);
        let start = CHUNK + 32;
        assert_eq!(chunks[0].sp, start + 12 * 8);
        assert_eq!(chunks[0].end, start + 30 * 8);
        assert_eq!(chunks[0].base, start + 10 * 8);
        assert_eq!(chunks[0].stack().word(start + 11 * 8), Some(11));
        assert_eq!(chunks[1].sp, PARENT + 32 + 4 * 8);
    }

    #[test]
    fn a_moved_thread_a_gone_chunk_or_thawed_frames_give_nothing() {
        let mem = memory();
        let other_id = Frozen {
            vthread_id: 78,
            ..frozen()
        };
        assert_eq!(
            layout().read(&mem, &other_id).err(),
            Some(Unread::ThreadMoved)
        );
        let other_chunk = Frozen {
            chunk: 0x9000,
            ..frozen()
        };
        assert_eq!(
            layout().read(&mem, &other_chunk).err(),
            Some(Unread::ChunkGone)
        );
        let thawed = Frozen { sp: 8, ..frozen() };
        assert_eq!(layout().read(&mem, &thawed).err(), Some(Unread::Thawed));
    }

    /// What the kernel copies of the chunks in `memory()`: the tail from the noted sp, then
    /// the parent from its own.
    fn kernel_copy() -> profiler_ebpf::ChunkCopy {
        use profiler_ebpf::{CHUNK_COPY_BYTES, CopiedChunk};
        let mem = memory();
        let mut copy = profiler_ebpf::ChunkCopy {
            head: ChunkHead {
                count: 2,
                ..ChunkHead::default()
            },
            data: [0; CHUNK_COPY_BYTES],
        };
        // Tail: words 10..30 (two below sp 12); parent: words 2..16 (two below sp 4).
        let mut off = 0;
        for (i, (addr, sp, from, bottom)) in [(CHUNK, 12, 10, 30), (PARENT, 4, 2, 16)]
            .into_iter()
            .enumerate()
        {
            let len = (bottom - from) * 8;
            mem.read(
                addr + 32 + u64::from(from) * 8,
                &mut copy.data[off..off + len as usize],
            )
            .unwrap();
            copy.head.chunks[i] = CopiedChunk {
                addr,
                sp,
                bottom,
                offset: off as u32,
                len,
            };
            off += len as usize;
        }
        copy
    }

    #[test]
    fn frames_from_the_kernels_copy_match_those_read_from_the_heap() {
        let copied = layout()
            .from_copy(&frozen(), &kernel_copy().head, &kernel_copy().data)
            .unwrap();
        assert!(copied.complete);
        let heap = layout().read(&memory(), &frozen()).unwrap();
        assert_eq!(copied.chunks.len(), heap.len());
        for (c, h) in copied.chunks.iter().zip(&heap) {
            assert_eq!((c.base, c.sp, c.end), (h.base, h.sp, h.end));
            assert_eq!(c.data, h.data);
        }
    }

    #[test]
    fn a_cut_copy_is_not_complete_and_holds_what_was_copied() {
        let mut copy = kernel_copy();
        copy.head.chunks[1].len = 64;
        copy.head.cut = (16 - 2) * 8 - 64;
        let copied = layout()
            .from_copy(&frozen(), &copy.head, &copy.data)
            .unwrap();
        assert!(!copied.complete);
        assert_eq!(copied.chunks[1].data.len(), 64);
        assert_eq!(copied.chunks[1].end, PARENT + 32 + 16 * 8);
        // Older chunks left for lack of room.
        let mut copy = kernel_copy();
        copy.head.count = 1;
        copy.head.rest = PARENT;
        let copied = layout()
            .from_copy(&frozen(), &copy.head, &copy.data)
            .unwrap();
        assert!(!copied.complete);
        assert_eq!(copied.chunks.len(), 1);
    }

    #[test]
    fn copies_that_do_not_fit_their_chunks_are_refused() {
        let broken: [fn(&mut profiler_ebpf::ChunkCopy); 7] = [
            |c| c.head.count = 0,
            |c| c.head.count = 9,
            |c| c.head.chunks[0].sp = 14,     // not the noted sp
            |c| c.head.chunks[1].offset += 8, // a gap
            |c| c.head.chunks[0].len -= 8,    // shorter, though not cut
            |c| c.head.chunks[1].bottom = 1 << 30,
            |c| c.head.chunks[1].offset = u32::MAX - 8, // past the copy
        ];
        for (i, breaks) in broken.iter().enumerate() {
            let mut copy = kernel_copy();
            breaks(&mut copy);
            assert!(
                layout()
                    .from_copy(&frozen(), &copy.head, &copy.data)
                    .is_none(),
                "case {i}"
            );
        }
    }

    #[test]
    fn hostile_chunks_are_refused() {
        // A chain that loops, sizes past the caps, and a bottom past the size.
        let mut mem = memory();
        mem.put_u64(PARENT + 8, CHUNK);
        assert_eq!(layout().read(&mem, &frozen()).err(), Some(Unread::Garbage));
        for (size, sp, bottom) in [(u32::MAX, 12, 30), (32, 12, 40), (1 << 30, 12, 1 << 29)] {
            let mut mem = memory();
            mem.put_u32(CHUNK + 16, size)
                .put_u32(CHUNK + 20, sp)
                .put_u32(CHUNK + 24, bottom);
            assert!(layout().read(&mem, &frozen()).is_err(), "{size} {bottom}");
        }
        // Addresses at the top of memory.
        let at_top = Frozen {
            vthread: u64::MAX - 4,
            ..frozen()
        };
        assert!(layout().read(&mem, &at_top).is_err());
    }
}
