//! A live consumer's copy of the stream a recorder writes (the live view, the pusher), bounded
//! by bytes: a consumer that falls behind a target making records faster than it takes them
//! misses records (counted, and said with what the budget cut), and the queue between them
//! never holds more than its share of the memory budget.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
        mpsc::{self, RecvTimeoutError, TryRecvError},
    },
    time::Duration,
};

use super::Record;
use crate::budget::{self, Cut};

/// The recorder's side.
pub struct TeeSender {
    tx: mpsc::Sender<(Record, u64)>,
    /// Bytes sent and not yet taken.
    held: Arc<AtomicU64>,
    /// Records not sent (also in the process's tally), for a consumer that needs to know
    /// which of its stretches missed some (the pusher does not push those).
    missed: Arc<AtomicU64>,
    max_bytes: u64,
}

/// The consumer's side.
pub struct TeeReceiver {
    rx: mpsc::Receiver<(Record, u64)>,
    held: Arc<AtomicU64>,
    missed: Arc<AtomicU64>,
}

/// A tee holding at most about `max_bytes` of records not yet taken.
pub fn tee(max_bytes: u64) -> (TeeSender, TeeReceiver) {
    let (tx, rx) = mpsc::channel();
    let held = Arc::new(AtomicU64::new(0));
    let missed = Arc::new(AtomicU64::new(0));
    (
        TeeSender {
            tx,
            held: Arc::clone(&held),
            missed: Arc::clone(&missed),
            max_bytes,
        },
        TeeReceiver { rx, held, missed },
    )
}

/// What a record of `encoded` bytes (its encoding's length) holds in memory, about: its
/// strings and vectors have headers the encoding has not.
fn held_bytes(encoded: usize) -> u64 {
    2 * encoded as u64 + 64
}

impl TeeSender {
    /// Sends `record` (`encoded` bytes long in the file), unless the consumer is too far
    /// behind to take it (counted). The header and the end always go: the consumer needs them
    /// whatever it missed. A consumer that has gone is not an error.
    pub fn send(&self, record: Record, encoded: usize) {
        let bytes = held_bytes(encoded);
        let always = matches!(record, Record::Header(_) | Record::End(_));
        if !always && self.held.load(Ordering::Relaxed) + bytes > self.max_bytes {
            budget::count(Cut::RecordNotTeed);
            self.missed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.held.fetch_add(bytes, Ordering::Relaxed);
        if self.tx.send((record, bytes)).is_err() {
            self.held.fetch_sub(bytes, Ordering::Relaxed);
        }
    }
}

impl TeeReceiver {
    fn taken(&self, (record, bytes): (Record, u64)) -> Record {
        self.held.fetch_sub(bytes, Ordering::Relaxed);
        record
    }

    pub fn recv(&self) -> Result<Record, mpsc::RecvError> {
        self.rx.recv().map(|r| self.taken(r))
    }

    pub fn try_recv(&self) -> Result<Record, TryRecvError> {
        self.rx.try_recv().map(|r| self.taken(r))
    }

    pub fn recv_timeout(&self, timeout: Duration) -> Result<Record, RecvTimeoutError> {
        self.rx.recv_timeout(timeout).map(|r| self.taken(r))
    }

    /// Records this consumer missed so far (the recorder was too far ahead).
    pub fn dropped(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{events::Event, recording::End};

    #[test]
    fn a_consumer_behind_misses_records_not_memory() {
        let (tx, rx) = tee(64 << 10);
        let before = budget::TALLY.snapshot();
        for _ in 0..10_000 {
            tx.send(Record::Event(Event::Warning("x".repeat(1000))), 1000);
        }
        tx.send(
            Record::End(End {
                end_mono_ns: 1,
                reason: crate::recording::StopReason::Duration,
            }),
            10,
        );
        let missed = budget::TALLY.snapshot().since(&before).records_not_teed;
        let mut taken = 0;
        let mut end = false;
        while let Ok(record) = rx.try_recv() {
            taken += 1;
            end |= matches!(record, Record::End(_));
        }
        assert!(end, "the end always goes");
        assert!(taken < 40, "{taken} records held");
        assert!(missed >= 10_000 - 40, "{missed} counted");
        assert_eq!(
            rx.dropped(),
            10_000 - (taken - 1),
            "each one missed, counted here too"
        );
        // Taken, they make room again.
        tx.send(Record::Event(Event::Warning("y".into())), 1);
        assert!(rx.try_recv().is_ok());
    }
}
