//! Reading the ring buffer: the records the programs send, decoded into `Raw` and cut to the
//! capture's window.

use std::{
    os::fd::{AsFd as _, AsRawFd as _},
    time::Duration,
};

use anyhow::{Context as _, Result};
use profiler_ebpf::{
    CHUNK_COPY_BYTES, ChunkHead, ExitEvent, LateWakeup, MAX_COPIED_CHUNKS, NativeStackCopy,
    OffCpuEvent, OnCpuSample, STACK_COPY_BYTES, StackHead, SyscallEvent, ThreadLife, ThreadRename,
    kind,
};

use super::Capture;

/// A record as the kernel sent it.
#[derive(Clone)]
pub enum Raw {
    OffCpu(OffCpuEvent),
    Exit(ExitEvent),
    StackCopy(JavaStack),
    /// A Java stack with the frames its virtual thread had frozen in a stack chunk.
    StackChunkCopy(Box<ChunkedStack>),
    /// A long system call, or a long futex wait with its waker.
    Syscall(SyscallEvent),
    /// User registers and stack of a long system call or of a waker, for DWARF unwinding.
    NativeStack(Box<NativeStackCopy>),
    Rename(ThreadRename),
    /// A thread of the target was created.
    ThreadStart(ThreadLife),
    /// A thread of the target ended, with its final scheduler account.
    ThreadExit(ThreadLife),
    /// An on-CPU sample of a thread of the target.
    OnCpu(OnCpuSample),
    /// A thread that waited long for a CPU after its wake-up.
    LateWakeup(LateWakeup),
    /// A virtual thread's wait off its carrier, with the frames it waited in when copied.
    VthreadWait(Box<VthreadWaitRecord>),
}

/// A virtual thread's wait as the kernel sent it: its head, the chunks' head (count 0: no
/// frames) and exactly the chunk bytes sent.
#[derive(Clone)]
pub struct VthreadWaitRecord {
    pub head: profiler_ebpf::VthreadWaitHead,
    pub chunk_head: ChunkHead,
    pub chunk: Vec<u8>,
}

impl Raw {
    /// The thread whose seeded wait (start 0) this record comes from, if it does.
    fn seeded_by(&self) -> Option<u32> {
        match self {
            Raw::OffCpu(e) => (e.start_ns == 0).then_some(e.tid),
            Raw::StackCopy(copy) => (copy.head.start_ns == 0).then_some(copy.head.tid),
            Raw::StackChunkCopy(copy) => {
                (copy.stack.head.start_ns == 0).then_some(copy.stack.head.tid)
            }
            Raw::Syscall(e) => (e.start_ns == 0).then_some(e.tid),
            Raw::NativeStack(copy) => (copy.key_ns == 0).then_some(copy.tid),
            Raw::Exit(_)
            | Raw::Rename(_)
            | Raw::ThreadStart(_)
            | Raw::ThreadExit(_)
            | Raw::OnCpu(_)
            | Raw::LateWakeup(_)
            | Raw::VthreadWait(_) => None,
        }
    }

    /// The record as seen within the capture's span: its start no earlier than `start_ns`
    /// (a wait under way then, such as a seeded one, which starts at 0, is seen from there),
    /// its end no later than `end_ns`, and nothing that ended before the span or began after
    /// it (the programs run a little either side of it, while they attach and detach).
    /// Everything that pairs records by start time (a Java stack with its interval, a native
    /// stack with its call) sees the same time.
    fn within(mut self, start_ns: u64, end_ns: Option<u64>) -> Option<Self> {
        let end_ns = end_ns.unwrap_or(u64::MAX);
        let (start, end) = match &mut self {
            Raw::OffCpu(e) => (&mut e.start_ns, Some(&mut e.end_ns)),
            Raw::StackCopy(copy) => (&mut copy.head.start_ns, None),
            Raw::StackChunkCopy(copy) => (&mut copy.stack.head.start_ns, None),
            Raw::Syscall(e) => (&mut e.start_ns, Some(&mut e.end_ns)),
            Raw::VthreadWait(w) => (&mut w.head.start_ns, Some(&mut w.head.end_ns)),
            // Keyed by its call's start, or by a wake-up.
            Raw::NativeStack(copy) => (&mut copy.key_ns, None),
            Raw::Rename(_) => return Some(self),
            // (A target gone while the programs attached was gone as the window opened.)
            Raw::Exit(e) => {
                e.time_ns = e.time_ns.max(start_ns);
                return Some(self);
            }
            // Samples and wake-ups are instants: in the span or not.
            Raw::OnCpu(sample) => {
                let t = sample.time_ns;
                return (t >= start_ns && t < end_ns).then_some(self);
            }
            Raw::LateWakeup(late) => {
                let t = late.run_ns;
                return (late.wake_ns >= start_ns && t < end_ns).then_some(self);
            }
            // A thread born or ended outside the span is none of its business (one born
            // before it and alive at its start is in the first accounts).
            Raw::ThreadStart(life) | Raw::ThreadExit(life) => {
                return (start_ns..end_ns).contains(&life.time_ns).then_some(self);
            }
        };
        if *start >= end_ns || end.as_ref().is_some_and(|end| **end < start_ns) {
            return None;
        }
        *start = (*start).max(start_ns);
        if let Some(end) = end {
            *end = (*end).min(end_ns);
        }
        Some(self)
    }
}

/// A Java stack the kernel copied: its head and exactly the bytes it copied (`head.len`, at
/// most `STACK_COPY_BYTES`). Kept at its length: thousands arrive a second, and a copy at the
/// kernel's full size would be mostly zeroes written and moved.
#[derive(Clone)]
pub struct JavaStack {
    pub head: StackHead,
    pub data: Vec<u8>,
}

/// A Java stack copy with the copy of its virtual thread's frozen frames: the chunks' head and
/// exactly the chunk bytes the kernel sent (at most `CHUNK_COPY_BYTES`).
#[derive(Clone)]
pub struct ChunkedStack {
    pub stack: JavaStack,
    pub chunk_head: ChunkHead,
    pub chunk: Vec<u8>,
}
impl Capture {
    /// Waits up to `timeout` for records (not at all while a backlog is left from the last
    /// call), then drains at most `limit` of those ready into `out`; returns the bytes drained.
    pub fn poll(&mut self, timeout: Duration, out: &mut Vec<Raw>, limit: usize) -> Result<usize> {
        let timeout = if self.backlog {
            Duration::ZERO
        } else {
            timeout
        };
        let mut fd = libc::pollfd {
            fd: self.events.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut fd, 1, ms) };
        if rc < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err).context("poll on the ring buffer failed");
            }
        }
        let mut bytes = 0;
        let mut taken = 0;
        self.backlog = false;
        while let Some(item) = self.events.next() {
            bytes += item.len();
            match decode(&item, &mut self.spare) {
                Some(raw)
                    if raw
                        .seeded_by()
                        .is_some_and(|t| self.stale_seeds.contains(&t)) => {}
                Some(raw) => out.extend(raw.within(self.started_ns, self.stopped_ns)),
                None => self.malformed += 1,
            }
            taken += 1;
            if taken >= limit {
                self.backlog = true;
                break;
            }
        }
        Ok(bytes)
    }

    /// Whether the last `poll` left records for the next (it stopped at its limit).
    pub fn backlog(&self) -> bool {
        self.backlog
    }

    /// Takes back a record handled, to reuse its stack buffers: thousands of stack copies
    /// arrive a second, and a fresh allocation for each (and the heap grown and given back
    /// with every drain) cost more than walking them.
    pub fn recycle(&mut self, raw: Raw) {
        let buffers = match raw {
            Raw::StackCopy(copy) => [Some(copy.data), None],
            Raw::StackChunkCopy(copy) => {
                let ChunkedStack { stack, chunk, .. } = *copy;
                [Some(stack.data), Some(chunk)]
            }
            _ => return,
        };
        for buffer in buffers.into_iter().flatten() {
            if self.spare.len() < SPARE_BUFFERS {
                self.spare.push(buffer);
            }
        }
    }
}

/// Records a drain takes at a time (`Capture::poll`), so that the stack buffers of one batch
/// are those of the next: a whole drain period of a busy target is thousands of copies.
pub const BATCH: usize = 128;

/// Stack buffers kept for reuse at most: a batch's (4 MiB of stack copies at most).
const SPARE_BUFFERS: usize = 2 * BATCH;

/// `bytes` in a buffer from `spare` if there is one, else in one that fits any stack copy.
fn reuse(spare: &mut Vec<Vec<u8>>, bytes: &[u8]) -> Vec<u8> {
    let mut buffer = spare
        .pop()
        .unwrap_or_else(|| Vec::with_capacity(STACK_COPY_BYTES));
    buffer.clear();
    buffer.extend_from_slice(bytes);
    buffer
}

/// A plain `#[repr(C)]` integer struct from the start of `bytes`, if they hold one.
fn read<T: Copy>(bytes: &[u8]) -> Option<T> {
    (bytes.len() >= size_of::<T>())
        // SAFETY: length checked; T is a plain `#[repr(C)]` integer struct.
        .then(|| unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

fn decode(bytes: &[u8], spare: &mut Vec<Vec<u8>>) -> Option<Raw> {
    match read::<u32>(bytes)? {
        kind::OFF_CPU => read(bytes).map(Raw::OffCpu),
        kind::EXIT => read(bytes).map(Raw::Exit),
        kind::STACK_COPY | kind::SAMPLE_STACK_COPY => {
            let head = read::<StackHead>(bytes)?;
            stack_copy(head, &bytes[size_of::<StackHead>()..], spare).map(Raw::StackCopy)
        }
        kind::STACK_CHUNK_COPY | kind::SAMPLE_STACK_CHUNK_COPY => {
            chunked_stack(bytes, spare).map(Raw::StackChunkCopy)
        }
        kind::SYSCALL | kind::FUTEX_WAIT => read(bytes).map(Raw::Syscall),
        kind::NATIVE_STACK => read(bytes).map(|copy| Raw::NativeStack(Box::new(copy))),
        kind::RENAME => read(bytes).map(Raw::Rename),
        kind::THREAD_START => read(bytes).map(Raw::ThreadStart),
        kind::THREAD_EXIT => read(bytes).map(Raw::ThreadExit),
        kind::ON_CPU => read(bytes).map(Raw::OnCpu),
        kind::LATE_WAKEUP => read(bytes).map(Raw::LateWakeup),
        kind::VTHREAD_WAIT => vthread_wait(bytes).map(Raw::VthreadWait),
        _ => None,
    }
}

/// A stack copy from its head and the bytes the kernel sent after it: exactly `head.len`.
fn stack_copy(head: StackHead, stack: &[u8], spare: &mut Vec<Vec<u8>>) -> Option<JavaStack> {
    let len = usize::try_from(head.len).ok()?;
    if len == 0 || len > STACK_COPY_BYTES || stack.len() != len {
        return None;
    }
    Some(JavaStack {
        head,
        data: reuse(spare, stack),
    })
}

/// A stack copy with its chunk copy, as the kernel sends them: the two heads, the chunks'
/// bytes, then the stack's (`head.len` of them, the last ones). Every chunk must lie within
/// the chunks' bytes.
fn chunked_stack(bytes: &[u8], spare: &mut Vec<Vec<u8>>) -> Option<Box<ChunkedStack>> {
    let head = read::<StackHead>(bytes)?;
    let rest = &bytes[size_of::<StackHead>()..];
    let chunk_head = read::<ChunkHead>(rest)?;
    let rest = &rest[size_of::<ChunkHead>()..];
    let used = rest.len().checked_sub(usize::try_from(head.len).ok()?)?;
    let count = usize::try_from(chunk_head.count).ok()?;
    if used > CHUNK_COPY_BYTES || count > MAX_COPIED_CHUNKS {
        return None;
    }
    let (frozen, stack) = rest.split_at(used);
    let mut kept = ChunkHead {
        chunks: Default::default(),
        ..chunk_head
    };
    for (i, entry) in chunk_head.chunks[..count].iter().enumerate() {
        let end = entry.offset.checked_add(entry.len)?;
        if usize::try_from(end).ok()? > used {
            return None;
        }
        kept.chunks[i] = *entry;
    }
    Some(Box::new(ChunkedStack {
        stack: stack_copy(head, stack, spare)?,
        chunk_head: kept,
        chunk: reuse(spare, frozen),
    }))
}

/// A virtual thread's wait: its head, the chunks' head, then the chunks' bytes; every chunk
/// must lie within those bytes.
fn vthread_wait(bytes: &[u8]) -> Option<Box<VthreadWaitRecord>> {
    let head = read::<profiler_ebpf::VthreadWaitHead>(bytes)?;
    let rest = &bytes[size_of::<profiler_ebpf::VthreadWaitHead>()..];
    let chunk_head = read::<ChunkHead>(rest)?;
    let data = &rest[size_of::<ChunkHead>()..];
    let count = usize::try_from(chunk_head.count).ok()?;
    if data.len() > CHUNK_COPY_BYTES || count > MAX_COPIED_CHUNKS {
        return None;
    }
    for entry in &chunk_head.chunks[..count] {
        let end = entry.offset.checked_add(entry.len)?;
        if usize::try_from(end).ok()? > data.len() {
            return None;
        }
    }
    let mut kept = chunk_head;
    for entry in &mut kept.chunks[count..] {
        *entry = Default::default();
    }
    Some(Box::new(VthreadWaitRecord {
        head,
        chunk_head: kept,
        chunk: data.to_vec(),
    }))
}

#[cfg(test)]
mod tests {
    use profiler_ebpf::CopiedChunk;

    use super::*;

    fn bytes_of<T: Copy>(value: &T) -> Vec<u8> {
        // SAFETY: T is a plain `#[repr(C)]` integer struct without padding.
        unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }
            .to_vec()
    }

    fn stack_head(kind: u32, len: u32) -> StackHead {
        StackHead {
            kind,
            tid: 7,
            start_ns: 1_000,
            anchor_sp: 0x7000,
            chunk: 0x9000,
            chunk_sp: 12,
            len,
            ..StackHead::default()
        }
    }

    /// A record as the kernel sends a stack with two copied chunks: heads, chunk bytes
    /// (24 + 40), stack bytes (100).
    fn chunked_record() -> Vec<u8> {
        let mut chunk = ChunkHead {
            count: 2,
            rest: 0x5000,
            ..ChunkHead::default()
        };
        chunk.chunks[0] = CopiedChunk {
            addr: 0x9000,
            sp: 12,
            bottom: 15,
            offset: 0,
            len: 24,
        };
        chunk.chunks[1] = CopiedChunk {
            addr: 0xa000,
            sp: 4,
            bottom: 7,
            offset: 24,
            len: 40,
        };
        let mut bytes = bytes_of(&stack_head(kind::STACK_CHUNK_COPY, 100));
        bytes.extend(bytes_of(&chunk));
        bytes.extend((0..64).map(|i| i as u8));
        bytes.extend((0..100).map(|i| 200 - i as u8));
        bytes
    }

    #[test]
    fn what_the_programs_made_while_attaching_is_cut_at_the_start() {
        let life = |kind, time_ns| ThreadLife {
            kind,
            tid: 7,
            time_ns,
            ..ThreadLife::default()
        };
        let off_cpu = |start_ns, end_ns| {
            Raw::OffCpu(OffCpuEvent {
                kind: kind::OFF_CPU,
                tid: 7,
                start_ns,
                end_ns,
                ..OffCpuEvent::default()
            })
        };
        let (start, end) = (1_000, Some(5_000));
        // Born or gone before the window opened: not the window's (the first accounts have
        // a thread there as it opened).
        assert!(
            Raw::ThreadStart(life(kind::THREAD_START, 999))
                .within(start, end)
                .is_none()
        );
        assert!(
            Raw::ThreadExit(life(kind::THREAD_EXIT, 999))
                .within(start, end)
                .is_none()
        );
        assert!(
            Raw::ThreadStart(life(kind::THREAD_START, 1_000))
                .within(start, end)
                .is_some()
        );
        assert!(
            Raw::ThreadExit(life(kind::THREAD_EXIT, 5_000))
                .within(start, end)
                .is_none()
        );
        // A wait over before the start is left out; one under way then is seen from it.
        assert!(off_cpu(200, 900).within(start, end).is_none());
        let Some(Raw::OffCpu(seen)) = off_cpu(200, 1_500).within(start, end) else {
            panic!("a wait under way at the start is kept");
        };
        assert_eq!((seen.start_ns, seen.end_ns), (1_000, 1_500));
        // A target gone meanwhile was gone as the window opened.
        let exit = ExitEvent {
            kind: kind::EXIT,
            tid: 7,
            time_ns: 900,
        };
        let Some(Raw::Exit(gone)) = Raw::Exit(exit).within(start, end) else {
            panic!("the target's exit is kept");
        };
        assert_eq!(gone.time_ns, 1_000);
    }

    #[test]
    fn a_stack_copy_is_read_from_its_used_bytes() {
        let mut bytes = bytes_of(&stack_head(kind::STACK_COPY, 5));
        bytes.extend([1, 2, 3, 4, 5]);
        let Some(Raw::StackCopy(copy)) = decode(&bytes, &mut Vec::new()) else {
            panic!("not decoded");
        };
        assert_eq!((copy.head.tid, copy.head.len), (7, 5));
        assert_eq!(copy.data, [1, 2, 3, 4, 5]);
        // A length that disagrees with the bytes sent, either way, or none at all.
        for cut in [1, 6] {
            assert!(decode(&bytes[..bytes.len() - cut], &mut Vec::new()).is_none());
        }
        bytes.push(6);
        assert!(decode(&bytes, &mut Vec::new()).is_none());
        assert!(decode(&bytes_of(&stack_head(kind::STACK_COPY, 0)), &mut Vec::new()).is_none());
        let over = bytes_of(&stack_head(kind::STACK_COPY, STACK_COPY_BYTES as u32 + 1));
        assert!(
            decode(
                &[over, vec![0; STACK_COPY_BYTES + 1]].concat(),
                &mut Vec::new()
            )
            .is_none()
        );
    }

    #[test]
    fn a_chunked_stack_copy_splits_chunk_and_stack_bytes_by_the_stack_length() {
        let Some(Raw::StackChunkCopy(copy)) = decode(&chunked_record(), &mut Vec::new()) else {
            panic!("not decoded");
        };
        assert_eq!(copy.stack.head.len, 100);
        assert_eq!(copy.stack.data[0], 200);
        assert_eq!(copy.stack.data[99], 101);
        assert_eq!(copy.stack.data.len(), 100);
        assert_eq!((copy.chunk_head.count, copy.chunk_head.rest), (2, 0x5000));
        assert_eq!(copy.chunk_head.chunks[1].offset, 24);
        assert_eq!(&copy.chunk[62..], &[62, 63]);
    }

    #[test]
    fn chunked_copies_whose_lengths_do_not_fit_their_bytes_are_refused() {
        const CHUNKS: usize = size_of::<StackHead>() + std::mem::offset_of!(ChunkHead, chunks);
        const COUNT: usize = size_of::<StackHead>() + std::mem::offset_of!(ChunkHead, count);
        const LEN: usize = std::mem::offset_of!(StackHead, len);
        const ENTRY: usize = size_of::<CopiedChunk>();
        const HEADS: usize = size_of::<StackHead>() + size_of::<ChunkHead>();
        fn put(bytes: &mut [u8], at: usize, value: u32) {
            bytes[at..at + 4].copy_from_slice(&value.to_ne_bytes());
        }
        type Breaks = (&'static str, fn(&mut Vec<u8>));
        let broken: [Breaks; 9] = [
            ("no stack bytes", |b| b.truncate(b.len() - 100)),
            ("cut in the heads", |b| b.truncate(100)),
            ("stack longer than the record", |b| put(b, LEN, 10_000)),
            ("stack takes chunk bytes", |b| put(b, LEN, 120)),
            ("more chunks than copied at most", |b| put(b, COUNT, 5)),
            ("chunk bytes cut short", |b| {
                b.remove(HEADS);
            }),
            ("more chunk bytes than copied at most", |b| {
                b.splice(HEADS.., vec![0; CHUNK_COPY_BYTES + 1 + 100]);
            }),
            ("an entry past the chunk bytes", |b| {
                put(b, CHUNKS + ENTRY + 20, 41);
            }),
            ("an entry whose end overflows", |b| {
                put(b, CHUNKS + ENTRY + 16, u32::MAX - 3);
                put(b, CHUNKS + ENTRY + 20, 8);
            }),
        ];
        for (what, breaks) in broken {
            let mut bytes = chunked_record();
            breaks(&mut bytes);
            assert!(decode(&bytes, &mut Vec::new()).is_none(), "{what}");
        }
        // Entries past `count` are not kept.
        let mut bytes = chunked_record();
        put(&mut bytes, COUNT, 1);
        let Some(Raw::StackChunkCopy(copy)) = decode(&bytes, &mut Vec::new()) else {
            panic!("not decoded");
        };
        assert_eq!(copy.chunk_head.chunks[1], CopiedChunk::default());
    }
}
