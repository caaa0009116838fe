//! The JIT's perf map (`/tmp/perf-<pid>.map`: `<start hex> <size hex> <name>` per line), read
//! safely: through the target's own root, without following links, and only when the file
//! belongs to the target's user (anyone can write to /tmp).
//!
//! The target writes it and may make it as large as it likes: it is read by a worker thread,
//! never by the drain (see `worker`), in a stream under a cap in bytes and in entries, into
//! one arena of names and sorted 16-byte entries.

use std::{
    io::{self, BufRead, Read as _},
    os::unix::fs::MetadataExt as _,
    path::PathBuf,
};

use crate::{
    lines,
    safe_fs::{Expect, Owner, TargetRoot, check_file},
};

/// Bytes of a perf map read at most: a larger file is named from its first bytes, and that
/// is said once. The JVM's own map of a large service is a few MB.
pub const MAX_PERF_MAP_BYTES: u64 = 32 << 20;
/// Entries kept at most (16 bytes each besides their names, which the bytes cap bounds).
pub const MAX_PERF_MAP_ENTRIES: usize = 512 << 10;
/// Names longer than this are cut (a method's name is far shorter; a stack of such names
/// must stay a record the reader accepts).
const MAX_NAME: usize = 1024;
/// Lines are cut here: the address and size, then a name that is cut anyway.
const MAX_LINE: usize = MAX_NAME + 64;

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// One line of the map: code at `start`, `size` bytes long, named at `name` in the arena.
#[derive(Clone, Copy, Debug)]
struct Entry {
    start: u64,
    size: u32,
    name: u32,
}

#[derive(Debug, Default)]
pub struct PerfMap {
    /// Sorted by start, one for each start.
    entries: Vec<Entry>,
    /// Every name, each ended by a newline (which no name holds).
    names: String,
    /// What the caps left out, when they did.
    pub cut: Option<PerfMapCut>,
}

/// A perf map read only in part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfMapCut {
    /// The file's size.
    pub file_bytes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Entries kept.
    pub entries: usize,
}

impl std::fmt::Display for PerfMapCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bytes: pinprof reads at most {MAX_PERF_MAP_BYTES} bytes and \
             {MAX_PERF_MAP_ENTRIES} entries of it, and names JIT frames from its first {} \
             bytes ({} entries) alone",
            self.file_bytes, self.read_bytes, self.entries
        )
    }
}

impl PerfMap {
    /// Parses a perf map as `reader` gives it (the caller caps its bytes), keeping at most
    /// `MAX_PERF_MAP_ENTRIES`; the bytes read, and whether the entries cap stopped it.
    fn read(reader: impl BufRead) -> io::Result<(Self, u64, bool)> {
        let mut entries = Vec::new();
        let mut names = String::new();
        let mut full = false;
        let read = lines::for_each(reader, MAX_LINE, |line, _| {
            if entries.len() >= MAX_PERF_MAP_ENTRIES {
                full = true;
                return false;
            }
            if let Some((start, size, name)) = parse_line(line)
                && let Ok(at) = u32::try_from(names.len())
            {
                names.push_str(cut(&String::from_utf8_lossy(name), MAX_NAME));
                names.push('\n');
                entries.push(Entry {
                    start,
                    size,
                    name: at,
                });
            }
            true
        })?;
        // Later lines describe newer code at a reused address: keep the last one for a start
        // (its name lies further in the arena).
        entries.sort_unstable_by_key(|e| (e.start, std::cmp::Reverse(e.name)));
        entries.dedup_by_key(|e| e.start);
        entries.shrink_to_fit();
        names.shrink_to_fit();
        let map = Self {
            entries,
            names,
            cut: None,
        };
        Ok((map, read.bytes, full))
    }

    /// A perf map's text, parsed whole (but for the caps).
    pub fn parse(text: &str) -> Self {
        Self::read(text.as_bytes()).map_or_else(|_| Self::default(), |(map, ..)| map)
    }

    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self
            .entries
            .partition_point(|e| e.start <= addr)
            .checked_sub(1)?;
        let e = self.entries[i];
        (addr - e.start < u64::from(e.size)).then(|| {
            let name = &self.names[e.name as usize..];
            &name[..name.find('\n').unwrap_or(name.len())]
        })
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// `<start hex> <size hex> <name>`, with or without `0x`.
fn parse_line(line: &[u8]) -> Option<(u64, u32, &[u8])> {
    let mut parts = line.splitn(3, |&b| b == b' ');
    let hex = |field: &[u8]| {
        let field = std::str::from_utf8(field).ok()?;
        u64::from_str_radix(field.strip_prefix("0x").unwrap_or(field), 16).ok()
    };
    let start = hex(parts.next()?)?;
    let size = u32::try_from(hex(parts.next()?)?).ok()?;
    start.checked_add(u64::from(size))?;
    Some((start, size, parts.next()?.trim_ascii()))
}

/// What tells one version of the file from the next: inode, size, modification time.
type Stamp = (u64, u64, i64, i64);

/// The target's perf map as a worker reads it, again whenever it changes.
pub struct PerfMapSource {
    root: TargetRoot,
    /// As the target names it, inside its root.
    path: PathBuf,
    /// The target's user: the only owner trusted.
    owner: u32,
    /// The version last read.
    last: Option<Stamp>,
}

impl PerfMapSource {
    pub fn new(root: TargetRoot, path: PathBuf, owner: u32) -> Self {
        Self {
            root,
            path,
            owner,
            last: None,
        }
    }

    /// The map anew when the file changed since it was last read; None when it has not, is
    /// missing, or is refused (not a regular file, not the target's user's). A file over the
    /// cap is read once as far as the cap, and not again while it stays that file over the
    /// cap (touching it does not make pinprof read 32 MB a second).
    pub fn poll(&mut self) -> Option<PerfMap> {
        let file = self.root.open_file(&self.path).ok()?;
        let expect = Expect {
            // Larger files are read up to the cap, below.
            max_bytes: u64::MAX,
            owner: Owner::Is(self.owner),
        };
        let meta = check_file(&file, &self.path, expect).ok()?;
        let stamp = (meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec());
        let last = self.last.replace(stamp);
        if last == Some(stamp) {
            return None;
        }
        let over = |s: Stamp| s.1 > MAX_PERF_MAP_BYTES;
        if over(stamp) && last.is_some_and(|last| last.0 == stamp.0 && over(last)) {
            return None;
        }
        let capped = io::BufReader::with_capacity(64 << 10, (&file).take(MAX_PERF_MAP_BYTES));
        let (mut map, read_bytes, full) = PerfMap::read(capped).ok()?;
        if over(stamp) || full {
            map.cut = Some(PerfMapCut {
                file_bytes: stamp.1,
                read_bytes,
                entries: map.len(),
            });
        }
        Some(map)
    }

    /// The path read, as the target names it.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_fall_inside_entries() {
        let map = PerfMap::parse(
            "7f0000001000 100 Interpreter\n0x7f0000002000 0x40 LShop;append(I)V\nbad line\n",
        );
        assert_eq!(map.lookup(0x7f0000001000), Some("Interpreter"));
        assert_eq!(map.lookup(0x7f00000010ff), Some("Interpreter"));
        assert_eq!(map.lookup(0x7f0000001100), None);
        assert_eq!(map.lookup(0x7f0000002010), Some("LShop;append(I)V"));
        assert_eq!(map.lookup(0x10), None);
        let long = format!("1000 10 {}\n", "é".repeat(4096));
        let name = PerfMap::parse(&long).lookup(0x1000).unwrap().to_string();
        assert!(
            name.len() <= MAX_NAME && name.starts_with('é'),
            "{}",
            name.len()
        );
    }

    /// Code reused at an address: the last line for it names it.
    #[test]
    fn the_last_line_for_an_address_wins() {
        let map = PerfMap::parse("1000 10 old\n2000 10 other\n1000 20 new\n");
        assert_eq!(map.lookup(0x1018), Some("new"));
        assert_eq!(map.lookup(0x2000), Some("other"));
        assert_eq!(map.len(), 2);
        // Sizes past 4 GiB and ends past the address space are not code.
        let map = PerfMap::parse("1000 100000000 huge\nffffffffffffffff 2 wraps\n");
        assert!(map.is_empty());
    }

    fn private_dir(name: &str) -> PathBuf {
        crate::safe_fs::private_temp_dir(&format!("pinprof-perfmap-{name}")).unwrap()
    }

    #[test]
    fn links_and_strangers_files_are_refused() {
        let dir = private_dir("links");
        let real = dir.join("real.map");
        std::fs::write(&real, "1000 10 f\n").unwrap();
        let link = dir.join("link.map");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let me = unsafe { libc::geteuid() };
        let root = || TargetRoot::own().unwrap();
        let map = PerfMapSource::new(root(), real.clone(), me).poll().unwrap();
        assert_eq!(map.lookup(0x1005), Some("f"));
        assert!(
            PerfMapSource::new(root(), link, me).poll().is_none(),
            "a symlink must not be followed"
        );
        assert!(
            PerfMapSource::new(root(), real, me + 1).poll().is_none(),
            "another user's file is not trusted"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file over the cap: its first bytes are read once, with what was left out; touched
    /// (or grown), the same file is not read again; a new file is.
    #[test]
    fn a_map_over_the_cap_is_read_once_as_far_as_the_cap() {
        let dir = private_dir("cap");
        let path = dir.join("perf.map");
        // About 100 bytes a line: the bytes cap stops the reading before the entries cap.
        let pad = "x".repeat(64);
        let line = |i: u64| format!("{:x} 40 Lflood/C{i};m{pad}()V\n", 0x1_0000_0000 + i * 0x40);
        let mut text = String::new();
        let mut i = 0;
        while text.len() as u64 <= MAX_PERF_MAP_BYTES + (1 << 20) {
            text.push_str(&line(i));
            i += 1;
        }
        std::fs::write(&path, &text).unwrap();
        let me = unsafe { libc::geteuid() };
        let root = TargetRoot::own().unwrap();
        let mut source = PerfMapSource::new(root, path.clone(), me);
        let map = source.poll().expect("read as far as the cap");
        let cut = map.cut.clone().expect("the cut is said");
        assert_eq!(cut.file_bytes, text.len() as u64);
        // Whole lines only: the one the cap splits is not read as a shorter entry.
        assert_eq!(cut.read_bytes, MAX_PERF_MAP_BYTES);
        let whole = text.as_bytes()[..MAX_PERF_MAP_BYTES as usize]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        assert_eq!(cut.entries, whole);
        let name = |i: u64| format!("Lflood/C{i};m{pad}()V");
        assert_eq!(map.lookup(0x1_0000_0000), Some(name(0).as_str()));
        let last_read = cut.entries as u64 - 1;
        let at = |i: u64| 0x1_0000_0000 + i * 0x40;
        assert_eq!(map.lookup(at(last_read)), Some(name(last_read).as_str()));
        assert_eq!(map.lookup(at(last_read + 1)), None);
        // Touched, then grown: the same file over the cap is not read again.
        let file = std::fs::File::options().append(true).open(&path).unwrap();
        file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
            .unwrap();
        assert!(source.poll().is_none());
        std::io::Write::write_all(&mut &file, line(i).as_bytes()).unwrap();
        assert!(source.poll().is_none());
        // Replaced by a small file: read.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "2000 10 g\n").unwrap();
        let map = source.poll().expect("a new file");
        assert_eq!(map.lookup(0x2001), Some("g"));
        assert!(map.cut.is_none());
        assert!(source.poll().is_none(), "unchanged");
        // Short lines under the bytes cap, more than the entries cap: cut there, said.
        let short = |i: u64| format!("{:x} 4 m{i}\n", 0x1_0000_0000 + i * 4);
        let text: String = (0..MAX_PERF_MAP_ENTRIES as u64 + 10).map(short).collect();
        assert!((text.len() as u64) < MAX_PERF_MAP_BYTES);
        std::fs::write(&path, &text).unwrap();
        let map = source.poll().expect("changed");
        let cut = map.cut.clone().expect("the entries cap is said");
        assert_eq!(cut.entries, MAX_PERF_MAP_ENTRIES);
        assert_eq!(map.len(), MAX_PERF_MAP_ENTRIES);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
