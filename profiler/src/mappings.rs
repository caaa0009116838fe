//! The target's file-backed executable mappings, each file opened once and as the target maps
//! it (`safe_fs::MappedFile`: the mapping's own inode, a regular file under a size cap), so
//! that naming and unwinding native frames never reads a file the target merely names.

use std::{collections::HashMap, fs::File, os::unix::fs::FileExt as _, path::Path, sync::Arc};

use anyhow::{Result, bail};

use crate::safe_fs::{MappedFile, TargetRoot};

/// Mapped files larger than this are not read (libjvm.so with its symbols is about 25 MB).
pub const MAX_MAPPED_FILE: u64 = 1 << 30;

/// One executable mapping of a file.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// The file offset at `start`.
    pub offset: u64,
    /// The file as the target names it (for people; never opened by this name alone).
    pub path: String,
    /// The file, opened safely; None where that was refused or failed.
    pub file: Option<Arc<File>>,
}

impl Mapping {
    /// The file offset of an address inside this mapping.
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr - self.start + self.offset
    }
}

pub struct Mappings {
    pid: u32,
    root: Option<TargetRoot>,
    list: Vec<Mapping>,
    /// Files opened so far, by (device, inode): a library mapped in pieces is opened once.
    files: HashMap<(u64, u64), Option<Arc<File>>>,
}

impl Mappings {
    pub fn new(pid: u32) -> Self {
        let mut mappings = Self {
            pid,
            root: TargetRoot::open(pid).ok(),
            list: Vec::new(),
            files: HashMap::new(),
        };
        mappings.refresh();
        mappings
    }

    /// Re-reads the target's maps (libraries load late), opening files not seen before.
    pub fn refresh(&mut self) {
        let Ok(maps) = procfs::process::Process::new(self.pid as i32).and_then(|p| p.maps()) else {
            return;
        };
        let mut list = Vec::new();
        for m in maps {
            if !m.perms.contains(procfs::process::MMPermissions::EXECUTE) {
                continue;
            }
            let procfs::process::MMapPath::Path(path) = &m.pathname else {
                continue;
            };
            let dev = (m.dev.0 as u64, m.dev.1 as u64);
            let key = (dev.0 << 32 | dev.1, m.inode);
            let file = match self.files.get(&key) {
                Some(file) => file.clone(),
                None => {
                    let mapped = MappedFile {
                        pid: self.pid,
                        start: m.address.0,
                        end: m.address.1,
                        path,
                        dev,
                        inode: m.inode,
                    };
                    let file = match mapped.open(self.root.as_ref(), MAX_MAPPED_FILE) {
                        Ok(file) => Some(Arc::new(file)),
                        Err(e) => {
                            if std::env::var_os("PINPROF_DEBUG").is_some() {
                                say!("pinprof: debug: {e:#}");
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

/// A mapped file's whole content (read from its start whatever its offset; at most the cap).
pub fn read_all(file: &File, what: &Path) -> Result<Vec<u8>> {
    let len = file.metadata()?.len();
    if len > MAX_MAPPED_FILE {
        bail!("{} is larger than pinprof reads", what.display());
    }
    let mut data = vec![0u8; len as usize];
    file.read_exact_at(&mut data, 0)?;
    Ok(data)
}
