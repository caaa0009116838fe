//! The recorder's live copy of its stream, for a reader in the same process (a live view, a
//! pusher). The recorder never waits on it: a bounded tee drops events past its byte budget
//! and counts them, so a reader that falls behind costs at most the budget, never the
//! recorder's pace nor unbounded memory.

use std::sync::{
    Arc,
    atomic::{AtomicU64, AtomicUsize, Ordering},
    mpsc,
};

use super::Record;

/// Where the recorder sends a copy of each record it writes.
pub enum Tee {
    /// Everything, however far behind the reader is (a live view that reads all it is sent).
    Unbounded(mpsc::Sender<Record>),
    /// At most a budget of bytes waiting (see [`bounded`]).
    Bounded(BoundedTee),
}

impl From<mpsc::Sender<Record>> for Tee {
    fn from(tx: mpsc::Sender<Record>) -> Self {
        Self::Unbounded(tx)
    }
}

/// The sending half of [`bounded`].
pub struct BoundedTee {
    tx: mpsc::Sender<(Record, usize)>,
    shared: Arc<Shared>,
}

/// The reading half of [`bounded`].
pub struct TeeReceiver {
    rx: mpsc::Receiver<(Record, usize)>,
    shared: Arc<Shared>,
}

struct Shared {
    budget: usize,
    /// Bytes sent and not yet received.
    queued: AtomicUsize,
    /// Events not sent: the budget was spent.
    dropped: AtomicU64,
}

/// A tee that holds at most `budget` bytes of records waiting (a record weighs its encoded
/// size plus its fixed in-memory size). An event that would pass the budget is dropped and
/// counted ([`TeeReceiver::dropped`]); the header and the end are always sent (one each), so
/// the reader always learns how the stream began and ended.
pub fn bounded(budget: usize) -> (Tee, TeeReceiver) {
    let (tx, rx) = mpsc::channel();
    let shared = Arc::new(Shared {
        budget,
        queued: AtomicUsize::new(0),
        dropped: AtomicU64::new(0),
    });
    let tee = BoundedTee {
        tx,
        shared: Arc::clone(&shared),
    };
    (Tee::Bounded(tee), TeeReceiver { rx, shared })
}

impl Tee {
    /// Sends a copy of `record`, whose encoding is `encoded` bytes long; a reader that has
    /// gone is ignored. Never waits.
    pub(crate) fn send(&self, record: Record, encoded: usize) {
        match self {
            Self::Unbounded(tx) => {
                let _ = tx.send(record);
            }
            Self::Bounded(tee) => {
                let weight = encoded.saturating_add(size_of::<Record>());
                let shared = &tee.shared;
                // One sender: what is queued only shrinks between this check and the add.
                let queued = shared.queued.load(Ordering::Acquire);
                if matches!(record, Record::Event(_))
                    && queued.saturating_add(weight) > shared.budget
                {
                    shared.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                shared.queued.fetch_add(weight, Ordering::AcqRel);
                if tee.tx.send((record, weight)).is_err() {
                    shared.queued.fetch_sub(weight, Ordering::AcqRel);
                }
            }
        }
    }
}

impl TeeReceiver {
    /// The next record, waiting at most `timeout`.
    pub fn recv_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> Result<Record, mpsc::RecvTimeoutError> {
        let (record, weight) = self.rx.recv_timeout(timeout)?;
        self.shared.queued.fetch_sub(weight, Ordering::AcqRel);
        Ok(record)
    }

    /// Events dropped so far because the budget was spent.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Bytes waiting now.
    pub fn queued(&self) -> usize {
        self.shared.queued.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{events::Event, recording::End, recording::StopReason};

    fn event() -> Record {
        Record::Event(Event::Warning("w".into()))
    }

    #[test]
    fn a_bounded_tee_drops_events_past_its_budget_and_never_the_end() {
        let weight = 100 + size_of::<Record>();
        let (tee, rx) = bounded(3 * weight);
        for _ in 0..5 {
            tee.send(event(), 100);
        }
        assert_eq!((rx.dropped(), rx.queued()), (2, 3 * weight));
        // The end passes whatever is queued.
        let end = End {
            end_mono_ns: 1,
            reason: StopReason::Duration,
        };
        tee.send(Record::End(end.clone()), 100);
        assert_eq!(rx.queued(), 4 * weight);
        // What is read frees its room.
        let got: Vec<Record> =
            std::iter::from_fn(|| rx.recv_timeout(Duration::ZERO).ok()).collect();
        assert_eq!(got.len(), 4);
        assert_eq!(got[3], Record::End(end));
        assert_eq!(rx.queued(), 0);
        tee.send(event(), 100);
        assert_eq!((rx.dropped(), rx.queued()), (2, weight));
        // A reader that has gone costs nothing.
        drop(rx);
        tee.send(event(), 100);
    }
}
