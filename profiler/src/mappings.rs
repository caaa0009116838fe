//! The target's file-backed executable mappings, each file opened once and as the target maps
//! it (`safe_fs::MappedFile`: the mapping's own inode, a regular file under a size cap), then
//! copied into a sealed memfd. Naming and unwinding native frames read that copy: never a
//! file the target merely names, and never a file it can truncate under a library that maps
//! it (blazesym maps the files it reads, and a mapped file cut short kills with SIGBUS).
//!
//! The maps are as long as the target makes them (see `procmaps`, which reads them): they are
//! read by a worker thread, never by the drain (see `worker`), and the drain looks addresses
//! up in the latest reading. An address no mapping holds asks for a new reading, which comes
//! at a pace bounded by what readings cost, however many addresses ask; executable memory no
//! file backs (the JIT's code) is known as such and asks nothing.

use std::{
    collections::HashMap,
    fs::File,
    io::{self, Read as _},
    os::fd::{AsRawFd as _, FromRawFd as _},
    sync::Arc,
    time::Duration,
};

use anyhow::{Context as _, Result, bail};

use crate::{
    process::Process,
    procmaps::{self, Maps, Vma},
    safe_fs::{MappedFile, TargetRoot},
    worker::{Pace, Worker},
};

/// Mapped files larger than this are not read (libjvm.so with its symbols is about 25 MB).
pub const MAX_MAPPED_FILE: u64 = 256 << 20;
/// What all copies together may take: a target that maps many large files does not make
/// pinprof's memory grow without end.
const MAX_COPIED: u64 = 512 << 20;
/// Distinct files copied at most (each holds a descriptor).
const MAX_FILES: usize = 1024;
/// Executable mappings kept at most, of files and of none.
const MAX_MAPPINGS: usize = 16 << 10;
/// A mapped file's name as frames give it is cut here.
const MAX_NAME: usize = 1024;
/// Readings of the maps: at most one a second, and never more than 1/20 of a core.
const PACE: Pace = Pace {
    min: Duration::from_secs(1),
    factor: 20,
};

/// A mapped file's content, sealed against any change of size or content.
#[derive(Debug)]
pub struct SealedFile {
    memfd: File,
    pub len: u64,
}

impl SealedFile {
    /// A sealed copy of `bytes` (a file's content as read elsewhere: tests, fuzzing).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Self::seal(bytes, u64::MAX - 1)
    }

    /// Copies at most `max` bytes of `file` (as it is now) into a sealed memfd.
    fn copy(file: &File, max: u64) -> Result<Self> {
        Self::seal(file.try_clone()?, max)
    }

    /// Copies at most `max` bytes of `source` into a sealed memfd.
    fn seal(mut source: impl io::Read, max: u64) -> Result<Self> {
        // SAFETY: a NUL-terminated name and flags; a new fd or -1.
        let fd = unsafe {
            libc::memfd_create(
                c"pinprof-mapped".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("cannot make a memfd");
        }
        // SAFETY: a fresh fd nothing else owns.
        let mut memfd = unsafe { File::from_raw_fd(fd) };
        io::copy(&mut (&mut source).take(max.saturating_add(1)), &mut memfd)?;
        let len = memfd.metadata()?.len();
        if len > max {
            bail!("larger than {max} bytes");
        }
        let seals =
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
        // SAFETY: a valid fd and plain flags.
        if unsafe { libc::fcntl(memfd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(io::Error::last_os_error()).context("cannot seal a memfd");
        }
        Ok(Self { memfd, len })
    }

    /// A path to hand a library that opens by path (`/proc/self/fd/N`).
    pub fn path(&self) -> std::path::PathBuf {
        crate::safe_fs::fd_path(&self.memfd)
    }

    /// The whole content, mapped read-only: the seals keep it from changing or shrinking
    /// under the mapping, so it can be read as plain bytes.
    pub fn map(&self) -> Result<SealedMap> {
        let len = usize::try_from(self.len)?;
        if len == 0 {
            bail!("an empty file");
        }
        // SAFETY: a read-only private mapping of a valid fd, of its sealed length.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                self.memfd.as_raw_fd(),
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error()).context("cannot map a sealed copy");
        }
        Ok(SealedMap { at, len })
    }
}

/// A sealed copy mapped into memory; unmapped when dropped.
#[derive(Debug)]
pub struct SealedMap {
    at: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and its content sealed: shared reads from any thread.
unsafe impl Send for SealedMap {}
unsafe impl Sync for SealedMap {}

impl std::ops::Deref for SealedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` readable bytes at `at` for as long as self lives, never written
        // (PROT_READ, and the memfd is sealed against writes and shrinking).
        unsafe { std::slice::from_raw_parts(self.at.cast::<u8>(), self.len) }
    }
}

impl Drop for SealedMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `SealedFile::map`, unmapped once.
        unsafe { libc::munmap(self.at, self.len) };
    }
}

/// One executable mapping of a file.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// The file offset at `start`.
    pub offset: u64,
    /// The file as the target names it, cut at 1 KiB (for people; never opened by this name
    /// alone).
    pub path: String,
    /// The file's sealed copy; None where it was refused, failed or over the budget.
    pub file: Option<Arc<SealedFile>>,
}

impl Mapping {
    /// The file offset of an address inside this mapping.
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.offset)
    }
}

/// What holds an address, as a reading of the maps found it.
#[derive(Debug)]
pub enum Place<'a> {
    File(&'a Mapping),
    /// Executable memory no file backs: code the JIT or the interpreter made, the vDSO.
    Anonymous,
    /// Nothing executable: mapped since, or not an address of code at all.
    Unknown,
}

/// A reading stopped at a cap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsCut {
    /// How far it went.
    pub cut: procmaps::Cut,
    /// Mappings kept from the reading before, above where it stopped.
    pub kept: usize,
}

impl std::fmt::Display for MapsCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let procmaps::Cut {
            mappings,
            lines,
            bytes,
            at,
        } = self.cut;
        write!(
            f,
            "the target's memory map is larger than pinprof reads (at most {} bytes or {} \
             lines of it, {MAX_MAPPINGS} executable mappings): it stopped after {mappings} \
             executable mappings ({lines} lines, {bytes} bytes read) at {at:#x}; above it, {} \
             are as read before, and native frames in others go unnamed",
            procmaps::MAX_MAPS_BYTES,
            procmaps::MAX_MAPS_LINES,
            self.kept
        )
    }
}

/// The target's executable memory as one reading of its maps found it; never changes.
#[derive(Debug, Default)]
pub struct Mappings {
    /// Mappings of files, sorted by start.
    list: Vec<Mapping>,
    /// Executable memory no file backs, sorted by start.
    anonymous: Vec<(u64, u64)>,
    /// Set when the reading stopped at a cap.
    pub cut: Option<MapsCut>,
}

impl Mappings {
    /// The mapping that holds `addr`, if any.
    pub fn find(&self, addr: u64) -> Option<&Mapping> {
        let i = self
            .list
            .partition_point(|m| m.start <= addr)
            .checked_sub(1)?;
        let m = &self.list[i];
        (addr < m.end).then_some(m)
    }

    /// What holds `addr`.
    pub fn place(&self, addr: u64) -> Place<'_> {
        if let Some(m) = self.find(addr) {
            return Place::File(m);
        }
        let i = self.anonymous.partition_point(|r| r.0 <= addr);
        match i.checked_sub(1).map(|i| self.anonymous[i]) {
            Some((_, end)) if addr < end => Place::Anonymous,
            _ => Place::Unknown,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Mapping> {
        self.list.iter()
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Reads the target's maps, copying files not seen before: the worker's side.
struct MapsReader {
    process: Process,
    /// Opened once: bound to the process attached, not to one that reuses its pid.
    maps: Option<Maps>,
    root: Option<TargetRoot>,
    /// Files copied so far, by (device, inode): a library mapped in pieces is copied once.
    files: HashMap<(u64, u64), Option<Arc<SealedFile>>>,
    copied: u64,
    /// The reading before, whose mappings past a cut are kept.
    last: Arc<Mappings>,
}

impl MapsReader {
    fn new(process: &Process) -> Self {
        Self {
            process: process.clone(),
            maps: Maps::open(process).ok(),
            root: TargetRoot::open(process).ok(),
            files: HashMap::new(),
            copied: 0,
            last: Arc::default(),
        }
    }

    /// Reads the maps anew (None if they cannot be read: the target is gone).
    fn read(&mut self) -> Option<Arc<Mappings>> {
        let listing = self.maps.as_mut()?.executable(MAX_MAPPINGS).ok()?;
        let mut list = Vec::new();
        let mut anonymous = Vec::new();
        for vma in &listing.vmas {
            if vma.is_file() {
                list.push(self.mapping(vma));
            } else {
                anonymous.push((vma.start, vma.end));
            }
        }
        let cut = listing.cut.map(|cut| {
            // Past the cut, what the reading before found (a target that grows its maps
            // late leaves the libraries it loaded first known).
            let before = list.len() + anonymous.len();
            list.extend(self.last.list.iter().filter(|m| m.start >= cut.at).cloned());
            anonymous.extend(self.last.anonymous.iter().filter(|r| r.0 >= cut.at));
            MapsCut {
                cut,
                kept: list.len() + anonymous.len() - before,
            }
        });
        self.last = Arc::new(Mappings {
            list,
            anonymous,
            cut,
        });
        Some(Arc::clone(&self.last))
    }

    /// The mapping of a file, copied the first time it is seen.
    fn mapping(&mut self, vma: &Vma) -> Mapping {
        let key = ((vma.dev.0 << 32) | vma.dev.1, vma.inode);
        let file = match self.files.get(&key) {
            Some(file) => file.clone(),
            None if self.files.len() >= MAX_FILES => None,
            None => {
                let mapped = MappedFile {
                    pid: &self.process,
                    start: vma.start,
                    end: vma.end,
                    path: vma.path(),
                    dev: vma.dev,
                    inode: vma.inode,
                };
                let budget = MAX_COPIED.saturating_sub(self.copied).min(MAX_MAPPED_FILE);
                let copy = mapped
                    .open(self.root.as_ref(), MAX_MAPPED_FILE)
                    .and_then(|file| SealedFile::copy(&file, budget));
                let file = match copy {
                    Ok(copy) => {
                        self.copied += copy.len;
                        Some(Arc::new(copy))
                    }
                    Err(e) => {
                        if std::env::var_os("PINPROF_DEBUG").is_some() {
                            say!("pinprof: debug: {}: {e:#}", vma.path().display());
                        }
                        None
                    }
                };
                self.files.insert(key, file.clone());
                file
            }
        };
        Mapping {
            start: vma.start,
            end: vma.end,
            offset: vma.offset,
            path: cut(vma.path().to_string_lossy().into_owned(), MAX_NAME),
            file,
        }
    }
}

/// The drain's view of the target's maps: the latest reading, and a worker that reads them
/// again when asked.
pub struct MapsWatch {
    worker: Worker<Mappings>,
    /// Whether a cut reading was said.
    cut_said: bool,
}

impl MapsWatch {
    /// Reads the maps once now (before any event waits on the drain), then leaves further
    /// readings to a worker.
    pub fn start(process: &Process) -> Result<Self> {
        let mut reader = MapsReader::new(process);
        let first = reader.read().unwrap_or_default();
        let worker = Worker::spawn("pinprof-maps", first, PACE, move || reader.read())
            .context("cannot start a thread to read the target's maps")?;
        Ok(Self {
            worker,
            cut_said: false,
        })
    }

    /// The latest reading.
    pub fn latest(&mut self) -> &Arc<Mappings> {
        self.worker.latest()
    }

    /// Asks for a new reading, without waiting for it.
    pub fn ask(&self) {
        self.worker.ask();
    }

    /// How many readings the worker has made after the first.
    pub fn readings(&self) -> u64 {
        self.worker.runs()
    }

    /// A reading cut short, the first time one is seen: to be said once.
    pub fn news(&mut self) -> Option<String> {
        if self.cut_said {
            return None;
        }
        let cut = self.worker.latest().cut.as_ref()?.to_string();
        self.cut_said = true;
        Some(cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The target may cut its file short while pinprof reads it: a mapping of the file would
    /// then kill pinprof with SIGBUS; the sealed copy keeps what it had, and cannot be cut.
    #[test]
    fn a_sealed_copy_outlives_its_source_being_cut() {
        let dir = crate::safe_fs::private_temp_dir("pinprof-sealed").unwrap();
        let path = dir.join("file");
        let content: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        let file = File::open(&path).unwrap();
        let copy = SealedFile::copy(&file, 4 << 20).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        let map = copy.map().unwrap();
        assert_eq!(&map[..], &content[..]);
        // Sealed: neither cut nor grown, nor written.
        assert!(copy.memfd.set_len(10).is_err());
        assert!(copy.memfd.set_len(10 << 20).is_err());
        // Over its cap, a file is not copied.
        std::fs::write(&path, b"12345").unwrap();
        assert!(SealedFile::copy(&File::open(&path).unwrap(), 4).is_err());
        assert!(SealedFile::copy(&File::open(&path).unwrap(), 5).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// One file mapped many times is copied once; the copies have a budget.
    #[test]
    fn a_file_mapped_many_times_is_copied_once() {
        let dir = crate::safe_fs::private_temp_dir("pinprof-maps").unwrap();
        let path = dir.join("file");
        std::fs::write(&path, vec![0x90u8; 64 << 10]).unwrap();
        let file = File::open(&path).unwrap();
        let mut maps = Vec::new();
        for _ in 0..32 {
            // SAFETY: a fresh private read-only executable mapping of a file we own.
            let at = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    64 << 10,
                    libc::PROT_READ | libc::PROT_EXEC,
                    libc::MAP_PRIVATE,
                    file.as_raw_fd(),
                    0,
                )
            };
            assert_ne!(at, libc::MAP_FAILED);
            maps.push(at);
        }
        let mut reader = MapsReader::new(&Process::myself().unwrap());
        let mappings = reader.read().unwrap();
        let ours: Vec<_> = mappings
            .iter()
            .filter(|m| std::path::Path::new(&m.path) == path)
            .collect();
        assert_eq!(ours.len(), 32);
        let copies: std::collections::HashSet<_> = ours
            .iter()
            .map(|m| Arc::as_ptr(m.file.as_ref().unwrap()))
            .collect();
        assert_eq!(copies.len(), 1, "one copy for every mapping of the file");
        assert!(reader.copied <= MAX_COPIED);
        for at in maps {
            // SAFETY: the mappings made above.
            unsafe { libc::munmap(at, 64 << 10) };
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An address in libc's code (mapped before any test's flood, and above it).
    fn libc_code() -> u64 {
        libc::getpid as *const () as u64
    }

    /// A page of a file mapped `count` times (each its own mapping: the same offset every
    /// time, so the kernel cannot merge them), unmapped when dropped.
    struct Flood(Vec<*mut libc::c_void>);

    impl Flood {
        fn new(file: &File, count: usize, prot: libc::c_int) -> Self {
            let maps = (0..count)
                .map(|_| {
                    // SAFETY: a fresh private mapping of one page of a file we own.
                    let at = unsafe {
                        libc::mmap(
                            std::ptr::null_mut(),
                            4096,
                            prot,
                            libc::MAP_PRIVATE,
                            file.as_raw_fd(),
                            0,
                        )
                    };
                    assert_ne!(at, libc::MAP_FAILED);
                    at
                })
                .collect();
            Self(maps)
        }
    }

    impl Drop for Flood {
        fn drop(&mut self) {
            for &at in &self.0 {
                // SAFETY: the mappings made in `new`.
                unsafe { libc::munmap(at, 4096) };
            }
        }
    }

    /// What the kernel counts this thread has read (`rchar`: every read system call's bytes).
    fn bytes_read_by_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        io.lines()
            .find_map(|l| l.strip_prefix("rchar:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// A file under 15 directories of 250 characters: each line of the maps that names it
    /// is about 3,900 bytes long.
    fn long_named_file(dir: &std::path::Path) -> File {
        let mut deep = dir.to_path_buf();
        for c in 'a'..='o' {
            deep.push(c.to_string().repeat(250));
        }
        std::fs::create_dir_all(&deep).unwrap();
        let path = deep.join("page");
        std::fs::write(&path, vec![0u8; 4096]).unwrap();
        File::open(&path).unwrap()
    }

    /// A flood of mappings that are not executable costs a reading nothing where the kernel
    /// answers queries: nothing is cut, and the libraries above it are found.
    #[test]
    fn a_flood_of_mappings_is_skipped_by_the_kernel() {
        let dir = crate::safe_fs::private_temp_dir("pinprof-maps-skip").unwrap();
        let file = long_named_file(&dir);
        let mut reader = MapsReader::new(&Process::myself().unwrap());
        // A first reading copies the libraries; the flood comes after.
        reader.read().unwrap();
        let flood = Flood::new(&file, 6000, libc::PROT_READ);
        let before = bytes_read_by_this_thread();
        let maps = reader.read().unwrap();
        let read = bytes_read_by_this_thread() - before;
        assert!(maps.cut.is_none());
        assert!(maps.find(libc_code()).is_some());
        // The text alone is 23 MB here; the queries skip it (the kernel's count of what this
        // thread read, not a time: the reading is done on this thread).
        assert!(read < 1 << 20, "{read} bytes read");
        drop(flood);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Maps that grow past a cap are read as far as the cap; what lies above it (here the
    /// libraries, mapped before the flood and higher) stays as read before, and the cut is
    /// said with its figures. As text (a kernel without queries), the bytes cap stops it; by
    /// queries, the count of executable mappings.
    #[test]
    fn a_reading_stops_at_the_cap_and_keeps_what_lies_above() {
        let dir = crate::safe_fs::private_temp_dir("pinprof-maps-cap").unwrap();
        let file = long_named_file(&dir);
        for (text, prot, count) in [
            // About 23 MB of text, 16 MiB read.
            (true, libc::PROT_READ, 6000),
            (false, libc::PROT_READ | libc::PROT_EXEC, MAX_MAPPINGS + 100),
        ] {
            let mut reader = MapsReader::new(&Process::myself().unwrap());
            if text {
                reader.maps.as_mut().unwrap().text_only();
            }
            let before = reader.read().unwrap();
            assert!(before.cut.is_none());
            let libc_fn = libc_code();
            let libc_path = before.find(libc_fn).expect("libc is mapped").path.clone();
            let flood = Flood::new(&file, count, prot);
            let after = reader.read().unwrap();
            let cut = after.cut.clone().expect("a cap stopped the reading");
            if text {
                assert_eq!(cut.cut.bytes, procmaps::MAX_MAPS_BYTES);
                assert!(cut.cut.lines < 6000, "{cut:?}");
            } else {
                assert_eq!(cut.cut.mappings, MAX_MAPPINGS);
            }
            assert!(cut.kept > 0, "{cut:?}");
            assert_eq!(after.find(libc_fn).map(|m| &m.path), Some(&libc_path));
            let said = cut.to_string();
            let figures = format!(
                "stopped after {} executable mappings ({} lines, {} bytes read)",
                cut.cut.mappings, cut.cut.lines, cut.cut.bytes
            );
            assert!(said.contains(&figures), "{said}");
            drop(flood);
            assert!(reader.read().unwrap().cut.is_none());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Executable memory no file backs (the JIT's code) is known, and asks for no reading;
    /// an address nothing holds asks, and asks are paced however many there are.
    #[test]
    fn only_unknown_addresses_ask_and_asks_are_paced() {
        // SAFETY: a fresh anonymous executable mapping.
        let jit = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                1 << 16,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(jit, libc::MAP_FAILED);
        let mut watch = MapsWatch::start(&Process::myself().unwrap()).unwrap();
        let latest = Arc::clone(watch.latest());
        assert!(matches!(latest.place(jit as u64 + 100), Place::Anonymous));
        assert!(matches!(latest.place(libc_code()), Place::File(_)));
        assert!(matches!(latest.place(8), Place::Unknown));
        // Ten thousand misses in 1.5 s: one reading a second at most.
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(1500) {
            if matches!(watch.latest().place(8), Place::Unknown) {
                watch.ask();
            }
            std::thread::sleep(Duration::from_micros(150));
        }
        let readings = watch.readings();
        assert!((1..=2).contains(&readings), "{readings} readings");
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(jit, 1 << 16) };
    }
}
