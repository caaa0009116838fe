//! The memory a target can make pinprof hold, under one budget.
//!
//! pinprof runs as root, outside the target's memory cgroup: whatever the target makes it keep
//! (its thread list and names, the stacks it makes, the names the stack walk reads, its perf map
//! and maps, what waits between pinprof's threads) is memory the target spends on the host's
//! account. Each of those takes a share of one [`Budget`]; what does not fit is cut, forgotten
//! or dropped, and counted in the [`Tally`] that the recording, the closing line and the report
//! say.
//!
//! The budget is for the whole process: its shares are what is left once pinprof itself is
//! resident (its code, the kernel's ring buffer, the JVM's symbols), measured as it starts.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::atomic::{AtomicU64, Ordering},
};

use anyhow::{Result, bail};

use crate::events::Cuts;

/// The budget when none is given.
pub const DEFAULT_BYTES: u64 = 256 << 20;

/// The smallest budget taken: below it pinprof's own code and buffers leave nothing.
pub const MIN_BYTES: u64 = 64 << 20;

/// Bytes kept of any name the target gives (a method, a class, a thread, a path, a symbol):
/// real ones are far shorter, and a stack of such names stays a small record.
pub const MAX_NAME: usize = 1024;

/// What pinprof is assumed to take before its shares are measured (`Budget::shares`): its
/// code, its buffers, the JVM's symbols (about 80 MiB measured for a debug build on JDK 21).
const ASSUMED_BASE: u64 = 96 << 20;

/// What the shares have at least, however little the budget leaves.
const MIN_GROWABLE: u64 = 8 << 20;

/// The most memory pinprof may hold, the target's doing included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    total: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            total: DEFAULT_BYTES,
        }
    }
}

impl Budget {
    pub fn new(total: u64) -> Result<Self> {
        if total < MIN_BYTES {
            bail!(
                "a memory budget of {} is too small: pinprof itself takes tens of MiB (give \
                 at least {})",
                mib(total),
                mib(MIN_BYTES)
            );
        }
        Ok(Self { total })
    }

    pub fn bytes(&self) -> u64 {
        self.total
    }

    /// The shares of what is left once pinprof itself holds `base` bytes (None: not
    /// measured yet, so assumed, with a ring buffer of `ring_buffer` bytes).
    pub fn shares(&self, base: Option<u64>, ring_buffer: u64) -> Shares {
        let base = base.unwrap_or(ASSUMED_BASE + ring_buffer);
        let growable = self.total.saturating_sub(base).max(MIN_GROWABLE);
        // 3/16 is left to no share: the allocator's slack, and what no share counts. The
        // thread list has the most: a Java thread left out is one whose waits are not
        // understood.
        let sixteenths = |n: u64| growable / 16 * n;
        Shares {
            thread_list: sixteenths(4),
            stacks: sixteenths(3),
            java_names: sixteenths(2),
            symbol_inputs: sixteenths(3),
            queues: sixteenths(1),
        }
    }
}

/// Each consumer's part of the budget, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shares {
    /// The JVM's thread list as read (names and classes included), in every copy pinprof
    /// keeps: the reader's, the watcher's, the recorder's, the changes between them.
    pub thread_list: u64,
    /// Stacks made in user space (Java walks, DWARF unwinds), kept to be written once.
    pub stacks: u64,
    /// What the Java stack walk caches of the JVM: method and class names, code blobs,
    /// inlining chains.
    pub java_names: u64,
    /// The target's symbol inputs: its perf map and its memory maps, held by their readers
    /// under caps of their own (`perfmap::MAX_PERF_MAP_BYTES` and `_ENTRIES`, about 40 MiB
    /// at most; the maps are streamed): this share keeps their room in the sum.
    pub symbol_inputs: u64,
    /// What waits between pinprof's threads (the live view's records, the thread list's
    /// changes).
    pub queues: u64,
}

/// What was cut, forgotten or dropped to stay in the budget, counted as it happens (from
/// any of pinprof's threads, deep in readers of the target) since the process started: a
/// recording says the difference between its end and its start. (Threads left out of the
/// JVM's list are a state, not events: the recorder says how many, from the list's reader.)
#[derive(Debug, Default)]
pub struct Tally {
    names_cut: AtomicU64,
    stacks_forgotten: AtomicU64,
    births_unsignaled: AtomicU64,
    records_not_teed: AtomicU64,
    events_not_written: AtomicU64,
}

/// The one tally of this process.
pub static TALLY: Tally = Tally {
    names_cut: AtomicU64::new(0),
    stacks_forgotten: AtomicU64::new(0),
    births_unsignaled: AtomicU64::new(0),
    records_not_teed: AtomicU64::new(0),
    events_not_written: AtomicU64::new(0),
};

/// One kind of thing the budget cut.
#[derive(Clone, Copy, Debug)]
pub enum Cut {
    /// A name longer than [`MAX_NAME`].
    Name,
    /// A stack forgotten by the tables that keep them (written again if seen again).
    StackForgotten,
    /// A thread's birth not passed to the thread list's watcher (it finds the thread at
    /// its next look, a few ms later).
    BirthUnsignaled,
    /// A record the live view or the pusher was too far behind to take.
    RecordNotTeed,
    /// An event not written: the recording had reached its size cap.
    EventNotWritten,
}

impl Tally {
    pub fn add(&self, cut: Cut, n: u64) {
        let counter = match cut {
            Cut::Name => &self.names_cut,
            Cut::StackForgotten => &self.stacks_forgotten,
            Cut::BirthUnsignaled => &self.births_unsignaled,
            Cut::RecordNotTeed => &self.records_not_teed,
            Cut::EventNotWritten => &self.events_not_written,
        };
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Cuts {
        let read = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Cuts {
            names_cut: read(&self.names_cut),
            threads_not_listed: 0,
            stacks_forgotten: read(&self.stacks_forgotten),
            births_unsignaled: read(&self.births_unsignaled),
            records_not_teed: read(&self.records_not_teed),
            events_not_written: read(&self.events_not_written),
        }
    }
}

/// Counts one cut in the process's tally.
pub fn count(cut: Cut) {
    TALLY.add(cut, 1);
}

/// `name` cut to [`MAX_NAME`] bytes at a character, an ellipsis saying so (counted); true
/// if it was cut.
pub fn cut_name(name: &mut String) -> bool {
    if name.len() <= MAX_NAME {
        return false;
    }
    mark_cut(name);
    count(Cut::Name);
    true
}

/// As [`cut_name`], not counted: for a name read again and again (a thread's, each second),
/// counted where it is written (see [`is_cut`]).
pub fn cut_name_uncounted(name: &mut String) -> bool {
    if name.len() <= MAX_NAME {
        return false;
    }
    mark_cut(name);
    true
}

/// Whether `name` is one that was cut (its length and its ellipsis say so).
pub fn is_cut(name: &str) -> bool {
    // Cut at a character at most 3 bytes before the room left for the ellipsis.
    name.len() + 6 >= MAX_NAME && name.ends_with('…')
}

/// Cuts `name` to leave room for an ellipsis within [`MAX_NAME`], and adds it.
fn mark_cut(name: &mut String) {
    const ELLIPSIS: char = '…';
    let mut end = name.len().min(MAX_NAME - ELLIPSIS.len_utf8());
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.truncate(end);
    name.push(ELLIPSIS);
    name.shrink_to_fit();
}

/// A name from bytes that may have been cut anywhere (a UTF-8 character split at the end is
/// dropped, invalid bytes replaced), then cut as [`cut_name`] does; `cut` says the bytes
/// were already cut short of the name's full length.
pub fn name_from_bytes(mut bytes: Vec<u8>, cut: bool) -> String {
    if cut && let Err(e) = std::str::from_utf8(&bytes) {
        // A character the cut split is dropped; other damage is replaced.
        if e.error_len().is_none() {
            bytes.truncate(e.valid_up_to());
        }
    }
    let mut name = match String::from_utf8(bytes) {
        Ok(name) => name,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    if cut || name.len() > MAX_NAME {
        mark_cut(&mut name);
        count(Cut::Name);
    }
    name
}

/// Bytes a `String` holds on the heap, with the allocator's overhead.
pub fn heap_bytes(s: &str) -> u64 {
    if s.is_empty() { 0 } else { s.len() as u64 + 16 }
}

/// A seeded fast hash: the walker's caches are looked up several times per frame of every
/// stack, and their keys (addresses in the target) are not the target's to choose freely.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A map of at most about `max_bytes` (as `cost` counts an entry, the map's own overhead
/// included), which forgets its older half when full: what is used again soon stays, what is
/// not goes, and nothing grows with what the target makes. Each forgotten entry is counted
/// as `forgetting`, when given.
pub struct Bounded<K, V> {
    recent: Map<K, V>,
    older: Map<K, V>,
    recent_bytes: u64,
    older_bytes: u64,
    max_bytes: u64,
    cost: fn(&K, &V) -> u64,
    forgetting: Option<Cut>,
}

impl<K: Hash + Eq, V> Bounded<K, V> {
    pub fn new(max_bytes: u64, cost: fn(&K, &V) -> u64, forgetting: Option<Cut>) -> Self {
        Self {
            recent: Map::default(),
            older: Map::default(),
            recent_bytes: 0,
            older_bytes: 0,
            max_bytes,
            cost,
            forgetting,
        }
    }

    /// A new limit; what is held past it is forgotten at the next insert.
    pub fn set_max_bytes(&mut self, max_bytes: u64) {
        self.max_bytes = max_bytes;
    }

    /// The entry of `key`, if still held (used: kept with the recent ones).
    pub fn get(&mut self, key: &K) -> Option<&V> {
        if !self.recent.contains_key(key) {
            let (key, value) = self.older.remove_entry(key)?;
            self.older_bytes -= self.entry_cost(&key, &value);
            self.insert(key, value);
        }
        self.recent.get(key)
    }

    pub fn insert(&mut self, key: K, value: V) {
        let cost = self.entry_cost(&key, &value);
        // Each half holds at most half the budget: the older half goes when the recent one
        // is full (so an entry larger than half is held alone, until the next).
        if self.recent_bytes + cost > self.max_bytes / 2 && !self.recent.is_empty() {
            let forgotten = std::mem::take(&mut self.older);
            if let Some(cut) = self.forgetting {
                TALLY.add(cut, forgotten.len() as u64);
            }
            drop(forgotten);
            self.older = std::mem::take(&mut self.recent);
            self.older_bytes = self.recent_bytes;
            self.recent_bytes = 0;
            // A smaller budget than before: the older half may not fit either.
            if self.older_bytes > self.max_bytes / 2 {
                if let Some(cut) = self.forgetting {
                    TALLY.add(cut, self.older.len() as u64);
                }
                self.older = Map::default();
                self.older_bytes = 0;
            }
        }
        if let Some(old) = self.recent.insert(key, value) {
            // (Replaced: its cost is counted twice until the next turn; harmless.)
            drop(old);
        }
        self.recent_bytes += cost;
    }

    /// Bytes held, as counted.
    pub fn bytes(&self) -> u64 {
        self.recent_bytes + self.older_bytes
    }

    pub fn len(&self) -> usize {
        self.recent.len() + self.older.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn entry_cost(&self, key: &K, value: &V) -> u64 {
        // A hash map's slot (key and value inline, a control byte), at most half full after
        // it grows: twice the inline size, plus what the entry holds on the heap.
        2 * (std::mem::size_of::<(K, V)>() as u64 + 1) + (self.cost)(key, value)
    }
}

/// pinprof's resident memory now (`VmRSS`), if it can be read.
pub fn resident_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|k| k * 1024)
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// Bytes as MiB, for people (`64 MiB`).
pub fn mib(bytes: u64) -> String {
    let m = bytes as f64 / f64::from(1u32 << 20);
    if m.fract() == 0.0 {
        format!("{m:.0} MiB")
    } else {
        format!("{m:.1} MiB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cut_at_a_character_and_marked() {
        let mut short = "a".repeat(MAX_NAME);
        assert!(!cut_name(&mut short));
        let mut long = "é".repeat(MAX_NAME);
        assert!(cut_name(&mut long));
        assert!(long.len() <= MAX_NAME, "{}", long.len());
        assert!(long.ends_with('…'));
        assert!(long.trim_end_matches('…').chars().all(|c| c == 'é'));
        assert!(is_cut(&long));
        let mut ascii = "a".repeat(5000);
        assert!(cut_name_uncounted(&mut ascii));
        assert!(is_cut(&ascii) && !is_cut("short…"));
    }

    #[test]
    fn bytes_cut_inside_a_character_lose_only_that_character() {
        let mut bytes = "é".repeat(600).into_bytes();
        bytes.truncate(MAX_NAME + 1); // mid-character
        let name = name_from_bytes(bytes, true);
        assert!(name.len() <= MAX_NAME);
        assert!(name.ends_with('…'));
        assert!(name.trim_end_matches('…').chars().all(|c| c == 'é'));
        let short = name_from_bytes(b"abc".to_vec(), true);
        assert_eq!(short, "abc…");
        assert_eq!(name_from_bytes(b"abc".to_vec(), false), "abc");
        assert_eq!(name_from_bytes(vec![0xff, b'a'], false), "\u{fffd}a");
    }

    #[test]
    fn a_bounded_map_holds_its_budget_and_keeps_what_is_used() {
        let cost = |_: &u64, v: &String| heap_bytes(v);
        let mut map: Bounded<u64, String> = Bounded::new(64 << 10, cost, None);
        for i in 0..10_000u64 {
            map.insert(i, "x".repeat(1000));
            // Key 0 is used all along: it stays.
            assert!(map.get(&0).is_some(), "{i}");
            assert!(map.bytes() <= 64 << 10, "{i}: {}", map.bytes());
        }
        assert!(map.len() < 100);
        assert!(map.get(&5).is_none());
        assert!(map.get(&9_999).is_some());
        // A smaller budget holds from the next insert on.
        map.set_max_bytes(8 << 10);
        map.insert(10_000, "y".into());
        map.insert(10_001, "y".repeat(5000));
        assert!(map.bytes() <= 8 << 10, "{}", map.bytes());
    }

    #[test]
    fn shares_fit_in_what_the_budget_leaves() {
        let budget = Budget::new(128 << 20).unwrap();
        let s = budget.shares(Some(88 << 20), 16 << 20);
        let sum = s.thread_list + s.stacks + s.java_names + s.symbol_inputs + s.queues;
        assert!(sum < 40 << 20, "{s:?}");
        assert!(Budget::new(1 << 20).is_err());
        // A budget smaller than pinprof itself still leaves each share something.
        let tiny = Budget::new(MIN_BYTES).unwrap().shares(Some(1 << 30), 0);
        assert!(tiny.stacks > 0);
    }
}
