//! The target's file-backed executable mappings, each file opened once and as the target maps
//! it (`safe_fs::MappedFile`: the mapping's own inode, a regular file under a size cap), then
//! copied into a sealed memfd. Naming and unwinding native frames read that copy: never a
//! file the target merely names, and never a file it can truncate under a library that maps
//! it (blazesym maps the files it reads, and a mapped file cut short kills with SIGBUS).

use std::{
    collections::HashMap,
    fs::File,
    io::{self, Read as _},
    os::fd::{AsRawFd as _, FromRawFd as _},
    sync::Arc,
};

use anyhow::{Context as _, Result, bail};

use crate::{
    process::Process,
    safe_fs::{MappedFile, TargetRoot},
};

/// Mapped files larger than this are not read (libjvm.so with its symbols is about 25 MB).
pub const MAX_MAPPED_FILE: u64 = 256 << 20;
/// What all copies together may take: a target that maps many large files does not make
/// pinprof's memory grow without end.
const MAX_COPIED: u64 = 512 << 20;
/// Distinct files copied at most (each holds a descriptor).
const MAX_FILES: usize = 1024;
/// Mappings kept at most.
const MAX_MAPPINGS: usize = 16 << 10;

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
    /// The file as the target names it (for people; never opened by this name alone).
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

pub struct Mappings {
    process: Process,
    root: Option<TargetRoot>,
    list: Vec<Mapping>,
    /// Files copied so far, by (device, inode): a library mapped in pieces is copied once.
    files: HashMap<(u64, u64), Option<Arc<SealedFile>>>,
    copied: u64,
}

impl Mappings {
    pub fn new(process: &Process) -> Self {
        let mut mappings = Self {
            process: process.clone(),
            root: TargetRoot::open(process).ok(),
            list: Vec::new(),
            files: HashMap::new(),
            copied: 0,
        };
        mappings.refresh();
        mappings
    }

    /// Re-reads the target's maps (libraries load late), copying files not seen before.
    pub fn refresh(&mut self) {
        let Ok(maps) = self.process.maps() else {
            return;
        };
        let mut list = Vec::new();
        for m in maps {
            if list.len() >= MAX_MAPPINGS {
                break;
            }
            if !m.perms.contains(procfs::process::MMPermissions::EXECUTE) {
                continue;
            }
            let procfs::process::MMapPath::Path(path) = &m.pathname else {
                continue;
            };
            let dev = (m.dev.0 as u64, m.dev.1 as u64);
            let key = ((dev.0 << 32) | dev.1, m.inode);
            let file = match self.files.get(&key) {
                Some(file) => file.clone(),
                None if self.files.len() >= MAX_FILES => None,
                None => {
                    let mapped = MappedFile {
                        pid: &self.process,
                        start: m.address.0,
                        end: m.address.1,
                        path,
                        dev,
                        inode: m.inode,
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
                                say!("pinprof: debug: {}: {e:#}", path.display());
                            }
                            None
                        }
                    };
                    self.files.insert(key, file.clone());
                    file
                }
            };
            list.push(Mapping {
                start: m.address.0,
                end: m.address.1,
                offset: m.offset,
                path: path.to_string_lossy().into_owned(),
                file,
            });
        }
        self.list = list;
    }

    /// The mapping that holds `addr`, if any.
    pub fn find(&self, addr: u64) -> Option<&Mapping> {
        self.list.iter().find(|m| addr >= m.start && addr < m.end)
    }

    /// As `find`, re-reading the maps once on a miss.
    pub fn find_or_refresh(&mut self, addr: u64) -> Option<&Mapping> {
        if self.find(addr).is_none() {
            self.refresh();
        }
        self.find(addr)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Mapping> {
        self.list.iter()
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
        let mappings = Mappings::new(&Process::myself().unwrap());
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
        assert!(mappings.copied <= MAX_COPIED);
        for at in maps {
            // SAFETY: the mappings made above.
            unsafe { libc::munmap(at, 64 << 10) };
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
