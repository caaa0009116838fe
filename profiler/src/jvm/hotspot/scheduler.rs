//! Work waiting for a carrier: the tasks queued in the virtual-thread scheduler's
//! `ForkJoinPool` (each a virtual thread that was started or unparked and waits to be run),
//! read from the heap through a carrier's `ForkJoinWorkerThread.pool`: the pool's
//! `queues`, and of each queue `top - base`, what a `ForkJoinPool.getQueuedTaskCount()` adds
//! up (external submissions included).

use super::{Hotspot, JavaThread};

/// More queues than this is garbage (the pool has a few per carrier, at most 2^16).
const MAX_QUEUES: u32 = 1 << 16;
/// A queue's capacity is at most 2^26 (`ForkJoinPool.MAXIMUM_QUEUE_CAPACITY`, JDK 21-25).
const MAX_QUEUED: i64 = 1 << 26;

/// The scheduler's queues at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    /// Tasks queued, not yet taken by a carrier.
    pub tasks: u64,
    /// Queues that exist (the carriers' own and the external submissions').
    pub queues: u32,
}

impl Hotspot {
    /// The tasks queued in the pool the carriers in `threads` serve, read now; None when
    /// there is no carrier or the pool is not understood in this JVM.
    pub fn queued_tasks(&mut self, threads: &[JavaThread]) -> Option<Queued> {
        let carrier = threads.iter().find(|t| t.carrier)?;
        let thread = self.deref_handle(carrier.addr.wrapping_add(self.layout.thread_obj.into()))?;
        let klass = self.klass_of(thread)?;
        let at = self.field_offset(klass, "pool")?;
        let pool = self.oop_field(thread, at)?;
        let klass = self.klass_of(pool)?;
        let at = self.field_offset(klass, "queues")?;
        let queues = self.oop_field(pool, at)?;
        let length = self
            .mem
            .u32(queues.wrapping_add(self.array_length_offset))
            .ok()
            .filter(|&n| n <= MAX_QUEUES)?;
        let width = self.oops.width();
        let base = match width {
            4 => self.array_base_offset,
            _ => self.array_base_offset.next_multiple_of(8),
        };
        let mut slots = vec![0u8; length as usize * width];
        self.mem.read(queues.wrapping_add(base), &mut slots).ok()?;
        let mut queued = Queued {
            tasks: 0,
            queues: 0,
        };
        let mut fields = None;
        for slot in slots.chunks_exact(width) {
            let Some(queue) = self.oops.from_bytes(slot) else {
                continue;
            };
            // Every queue is a `WorkQueue`: its fields are looked up once.
            let (base_at, top_at) = match fields {
                Some(f) => f,
                None => {
                    let klass = self.klass_of(queue)?;
                    let f = (
                        self.field_offset(klass, "base")?,
                        self.field_offset(klass, "top")?,
                    );
                    *fields.insert(f)
                }
            };
            let base = self.mem.u32(queue.wrapping_add(base_at)).ok()? as i32;
            let top = self.mem.u32(queue.wrapping_add(top_at)).ok()? as i32;
            // Read without the pool's ordering: a queue caught mid-update counts none.
            let n = i64::from(top.wrapping_sub(base));
            if (0..=MAX_QUEUED).contains(&n) {
                queued.tasks += n as u64;
            }
            queued.queues += 1;
        }
        Some(queued)
    }
}
