use std::{
    fs::File,
    io::{BufReader, Read},
    path::Path,
};

use anyhow::{Context as _, Result, bail};

use super::{
    BLOCK_FORMAT, End, FORMAT_VERSION, Header, MAGIC, MAX_RECORD, OLDEST_FORMAT_READ, Record,
    blocks::{Deframer, push_corrupt},
};
use crate::events::Event;

/// A recording read back whole, with an account of any damage found on the way.
#[derive(Debug)]
pub struct Recording {
    pub header: Header,
    pub events: Vec<Event>,
    /// `None` when the recording was cut before its end marker.
    pub end: Option<End>,
    pub damage: Vec<Damage>,
}

/// A part of the file that could not be read.
#[derive(Clone, Debug, PartialEq)]
pub enum Damage {
    /// The file ends inside a record: everything from `offset` on is lost.
    Truncated { offset: u64 },
    /// Bytes `from..to` did not hold a valid record and were skipped.
    Corrupt { from: u64, to: u64 },
    /// Reading the file failed at `offset`.
    Unreadable { offset: u64, error: String },
    /// The header was damaged: the target, the window's start and the settings are unknown.
    HeaderLost,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated { offset } => {
                write!(
                    f,
                    "recording is cut at byte {offset}: the end of the capture is missing"
                )
            }
            Self::Corrupt { from, to } => {
                write!(f, "bytes {from}..{to} are damaged and were skipped")
            }
            Self::Unreadable { offset, error } => {
                write!(f, "cannot read the recording past byte {offset}: {error}")
            }
            Self::HeaderLost => write!(
                f,
                "the recording's header is damaged: its target, start time and settings are \
                 unknown (the window starts at its first event)"
            ),
        }
    }
}

impl Recording {
    /// Reads a recording file. Only a regular file is read (a FIFO, a device or a directory
    /// is refused at once), as a stream.
    pub fn open(path: &Path) -> Result<Self> {
        let records = Records::open(path)?;
        Self::read(records).with_context(|| format!("{} is not a usable recording", path.display()))
    }

    /// Whether `path` is a regular file that begins as a recording does (never blocking, never
    /// following a symlink at its name).
    pub fn is_one(path: &Path) -> bool {
        let Ok(mut file) = crate::safe_fs::open_user_file(path) else {
            return false;
        };
        let mut magic = [0u8; MAGIC.len()];
        read_up_to(&mut file, &mut magic).is_ok_and(|n| n == magic.len()) && &magic == MAGIC
    }

    pub fn parse(bytes: &[u8]) -> Result<Self> {
        Self::read(Records::new(bytes, bytes.len() as u64)?)
    }

    fn read<R: Read>(records: Records<R>) -> Result<Self> {
        let (events, outline) = stream(records, |_| Vec::new(), Vec::push)?;
        let Outline {
            header,
            end,
            damage,
        } = outline;
        Ok(Self {
            header,
            events,
            end,
            damage,
        })
    }

    /// What the file lost, said to the user with its results: damaged frames, or an end that
    /// never came.
    pub fn warnings(&self) -> Vec<String> {
        warnings(&self.damage, self.end.as_ref())
    }

    /// CLOCK_MONOTONIC ns of the window's end: the end marker, else the last thing recorded.
    pub fn end_mono_ns(&self) -> u64 {
        if let Some(end) = &self.end {
            return end.end_mono_ns;
        }
        let last = self.events.iter().filter_map(Event::time_ns);
        last.max()
            .unwrap_or(self.header.start_mono_ns)
            .max(self.header.start_mono_ns)
    }
}

/// A recording's records but its events, once read through.
#[derive(Debug)]
pub struct Outline {
    pub header: Header,
    /// `None` when the recording was cut before its end marker.
    pub end: Option<End>,
    pub damage: Vec<Damage>,
}

impl Outline {
    /// As `Recording::warnings`.
    pub fn warnings(&self) -> Vec<String> {
        warnings(&self.damage, self.end.as_ref())
    }
}

fn warnings(damage: &[Damage], end: Option<&End>) -> Vec<String> {
    let mut warnings: Vec<String> = damage.iter().map(ToString::to_string).collect();
    if end.is_none() && damage.is_empty() {
        warnings.push("recording has no end marker: the capture did not finish".into());
    }
    warnings
}

/// Reads a recording as a stream: `start` makes the reader's state from the header, and
/// `each` takes every event in the file's order, as it is read, so that memory is the
/// state's, not the file's. Events before a late header wait for it; with no header at all,
/// one is made from what the events say (and the damage said).
pub fn stream<R: Read, S>(
    mut records: Records<R>,
    start: impl FnOnce(&Header) -> S,
    mut each: impl FnMut(&mut S, Event),
) -> Result<(S, Outline)> {
    let mut start = Some(start);
    let mut state = None;
    let mut header = None;
    let mut early = Vec::new();
    let mut end = None;
    for record in records.by_ref() {
        match record {
            Record::Header(h) if header.is_none() => {
                if let Some(start) = start.take() {
                    let mut s = start(&h);
                    for e in early.drain(..) {
                        each(&mut s, e);
                    }
                    state = Some(s);
                }
                header = Some(h);
            }
            Record::Header(_) => {} // a second header means nothing; ignore it
            Record::Event(e) => match &mut state {
                Some(s) => each(s, e),
                None => early.push(e),
            },
            Record::End(e) => end = Some(e),
        }
    }
    let mut damage = records.damage;
    let (state, header) = match (state, header, start) {
        (Some(state), Some(header), _) => (state, header),
        // The header alone was hit: the events are still worth reading.
        (_, _, Some(start)) if !early.is_empty() => {
            damage.push(Damage::HeaderLost);
            let header = unknown_header(&early);
            let mut s = start(&header);
            for e in early {
                each(&mut s, e);
            }
            (s, header)
        }
        _ => bail!("recording has no readable header"),
    };
    Ok((
        state,
        Outline {
            header,
            end,
            damage,
        },
    ))
}

/// A header for a recording whose own is lost: what the events say, nothing more.
fn unknown_header(events: &[Event]) -> Header {
    Header {
        pinprof_version: "unknown".into(),
        target: crate::events::TargetInfo {
            command: "(unknown: the recording's header is damaged)".into(),
            ..Default::default()
        },
        start_mono_ns: events
            .iter()
            .filter_map(|e| match e {
                Event::OffCpu(o) => Some(o.start_ns),
                Event::Syscall(s) => Some(s.start_ns),
                e => e.time_ns(),
            })
            .min()
            .unwrap_or(0),
        start_unix_ns: 0,
        hostname: String::new(),
        kernel_release: String::new(),
        min_off_cpu_ns: 0,
        min_syscall_ns: None,
    }
}

/// The records of a recording, one at a time, as the file is read: memory stays bounded by
/// the largest record. Damage met on the way is skipped and kept in `damage`.
pub struct Records<R> {
    framing: Framing<R>,
    /// The file's format: older ones decode some records as they were then.
    version: u32,
    pub damage: Vec<Damage>,
}

enum Framing<R> {
    Blocks(Deframer<R>),
    Frames(FrameReader<R>),
}

impl Records<BufReader<File>> {
    /// Opens a recording file to read as a stream; anything but a regular file is refused
    /// without being opened (`safe_fs::open_user_file`: a device's driver never runs).
    pub fn open(path: &Path) -> Result<Self> {
        let file = crate::safe_fs::open_user_file(path).map_err(|e| {
            let e = anyhow::Error::new(e).context(format!("cannot read {}", path.display()));
            if e.root_cause()
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::InvalidInput)
            {
                e.context("pinprof reads recordings from regular files only")
            } else {
                e
            }
        })?;
        Self::from_file(file)
            .with_context(|| format!("{} is not a usable recording", path.display()))
    }

    /// Reads a recording from a file already open (one pinprof wrote, read back through the
    /// descriptor it wrote with, never reopened by name), from its first byte.
    pub fn from_file(mut file: File) -> Result<Self> {
        use std::io::Seek as _;
        file.rewind()
            .context("cannot read the recording from its start")?;
        let len = file.metadata().context("cannot read the recording")?.len();
        Self::new(BufReader::with_capacity(1 << 16, file), len)
    }
}

impl<R: Read> Records<R> {
    /// Reads the magic and format version from `src`, whose size is `size` bytes.
    pub fn new(mut src: R, size: u64) -> Result<Self> {
        let mut magic = [0u8; MAGIC.len()];
        let got = read_up_to(&mut src, &mut magic)?;
        if got < magic.len() || &magic != MAGIC {
            bail!("not a pinprof recording (bad magic)");
        }
        let mut version = [0u8; 4];
        if read_up_to(&mut src, &mut version)? < version.len() {
            bail!("recording is cut inside its header");
        }
        let version = u32::from_le_bytes(version);
        if !(OLDEST_FORMAT_READ..=FORMAT_VERSION).contains(&version) {
            bail!(
                "recording format {version} is not supported (this pinprof reads formats \
                 {OLDEST_FORMAT_READ} to {FORMAT_VERSION}): a newer pinprof wrote it, or its \
                 first bytes are damaged"
            );
        }
        let at = (MAGIC.len() + 4) as u64;
        let framing = if version >= BLOCK_FORMAT {
            Framing::Blocks(Deframer::new(src, at))
        } else {
            Framing::Frames(FrameReader::new(src, at, size))
        };
        Ok(Self {
            framing,
            version,
            damage: Vec::new(),
        })
    }
}

impl<R: Read> Iterator for Records<R> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        loop {
            let (at, payload) = match &mut self.framing {
                Framing::Blocks(d) => d.next_payload(&mut self.damage)?,
                Framing::Frames(f) => f.next_payload(&mut self.damage)?,
            };
            match super::legacy::decode(self.version, &payload) {
                Some(record) => return Some(record),
                // Intact framing around a payload this pinprof cannot decode.
                None => push_corrupt(&mut self.damage, at, at + payload.len() as u64),
            }
        }
    }
}

/// Formats 2 and 3: `u32 length | u32 crc32 | payload` one after another. After damage, the
/// next intact frame is searched byte by byte; the search may check at most twice the file's
/// size (plus a little) in all, so a file crafted to make every offset look like a huge
/// frame costs linear time: past that budget the rest of the file counts as damaged.
struct FrameReader<R> {
    src: R,
    /// Bytes read and not yet consumed start at `buf[start]`, which is file offset `at`.
    buf: Vec<u8>,
    start: usize,
    at: u64,
    eof: bool,
    /// Bytes the search for an intact frame may still check.
    budget: u64,
    done: bool,
}

const FRAME_HEAD: usize = 8;

impl<R: Read> FrameReader<R> {
    fn new(src: R, at: u64, size: u64) -> Self {
        Self {
            src,
            buf: Vec::new(),
            start: 0,
            at,
            eof: false,
            budget: size.saturating_mul(2).saturating_add(1 << 20),
            done: false,
        }
    }

    fn next_payload(&mut self, damage: &mut Vec<Damage>) -> Option<(u64, Vec<u8>)> {
        // Where the search for an intact frame began, when one is under way.
        let mut searching_from = None;
        while !self.done {
            if !self.fill(FRAME_HEAD) {
                match searching_from {
                    Some(from) => {
                        self.consume(self.available());
                        push_corrupt(damage, from, self.at);
                    }
                    None if self.available() > 0 => {
                        damage.push(Damage::Truncated { offset: self.at });
                    }
                    None => {}
                }
                self.done = true;
                break;
            }
            let head = &self.buf[self.start..self.start + FRAME_HEAD];
            let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
            let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
            let fits = len > 0 && len <= MAX_RECORD;
            let whole = fits && self.fill(FRAME_HEAD + len);
            if fits && !whole && searching_from.is_none() {
                damage.push(Damage::Truncated { offset: self.at });
                self.done = true;
                break;
            }
            if whole && let Some(from) = searching_from {
                if self.budget < len as u64 {
                    // Searched enough: the rest of the file counts as damaged.
                    self.skip_rest();
                    push_corrupt(damage, from, self.at);
                    self.done = true;
                    break;
                }
                self.budget -= len as u64;
            }
            if whole {
                let payload = &self.buf[self.start + FRAME_HEAD..][..len];
                if crc32fast::hash(payload) == crc {
                    let found = (self.at, payload.to_vec());
                    if let Some(from) = searching_from {
                        push_corrupt(damage, from, self.at);
                    }
                    self.consume(FRAME_HEAD + len);
                    return Some(found);
                }
            }
            // Not a frame here: look at the next byte.
            searching_from.get_or_insert(self.at);
            self.consume(1);
        }
        None
    }

    fn available(&self) -> usize {
        self.buf.len() - self.start
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.at += n as u64;
    }

    /// Makes `n` bytes available if the source has them.
    fn fill(&mut self, n: usize) -> bool {
        while self.available() < n && !self.eof {
            if self.start > 0 && self.start >= self.buf.len() / 2 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            let want = (n - self.available()).max(1 << 16);
            let before = self.buf.len();
            match (&mut self.src).take(want as u64).read_to_end(&mut self.buf) {
                Ok(_) if self.buf.len() == before => self.eof = true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => self.eof = true,
            }
        }
        self.available() >= n
    }

    /// Reads past everything left, counting it as consumed.
    fn skip_rest(&mut self) {
        self.at += self.available() as u64;
        self.buf.clear();
        self.start = 0;
        if let Ok(n) = std::io::copy(&mut self.src, &mut std::io::sink()) {
            self.at += n;
        }
        self.eof = true;
    }
}

/// Reads until `buf` is full or the source ends; the bytes read.
fn read_up_to(src: &mut impl Read, buf: &mut [u8]) -> Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match src.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("cannot read the recording"),
        }
    }
    Ok(got)
}
