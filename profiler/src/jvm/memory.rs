//! Reads the target's memory through `/proc/<pid>/mem` and finds `libjvm.so`'s symbols in it.
//!
//! Only reads: pinprof never writes into the target. Reads of a live process race with its
//! threads, so callers treat every value as a hint to be checked, never as a trusted pointer.

use std::{collections::HashMap, fs::File, os::unix::fs::FileExt, path::PathBuf};

use anyhow::{Context, Result, bail};
use object::{Object, ObjectSymbol};

use crate::{mappings::MAX_MAPPED_FILE, process::Process, safe_fs::MappedFile};

pub struct Memory {
    /// `/proc/PID/mem`, opened through the process's own directory: bound to it (its memory
    /// is gone once it exits: reads then end at once, never in another process's memory).
    file: File,
    process: Process,
}

/// A read of the target's memory that failed. Routine (reads race the target's threads, and
/// most callers only ask whether a value is there), so it is cheap to make: no message is
/// built and no backtrace taken until it is shown or turned into an `anyhow::Error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The bytes at `addr` are not mapped in the target (or it is gone).
    Unreadable { addr: u64, len: usize },
    /// No NUL within `max` bytes of a string at `addr`.
    TooLong { addr: u64, max: usize },
    /// The process has exited: nothing more is read of it.
    Exited { pid: u32 },
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::Unreadable { addr: 0, .. } => write!(f, "null pointer"),
            Self::Unreadable { addr, len } => write!(f, "cannot read {len} bytes at {addr:#x}"),
            Self::TooLong { addr, max } => {
                write!(f, "string at {addr:#x} longer than {max} bytes")
            }
            Self::Exited { pid } => write!(f, "{}", crate::process::Exited { pid }),
        }
    }
}

impl std::error::Error for ReadError {}

/// What a read of the target returns.
pub type Read<T> = std::result::Result<T, ReadError>;

impl Memory {
    /// The memory of the process attached to; an error once it has exited.
    pub fn open(process: &Process) -> Result<Self> {
        let pid = process.pid();
        let fd = process.open("mem", libc::O_RDONLY).with_context(|| {
            format!(
                "cannot read the memory of process {pid} (another user's process needs \
                     root, or CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH)"
            )
        })?;
        Ok(Self {
            file: File::from(fd),
            process: process.clone(),
        })
    }

    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Read<()> {
        let unreadable = ReadError::Unreadable {
            addr,
            len: buf.len(),
        };
        if addr == 0 {
            return Err(unreadable);
        }
        self.file.read_exact_at(buf, addr).map_err(|e| {
            // An address not mapped is EIO; the end of the file is a process whose memory
            // has gone (it exited).
            if e.kind() == std::io::ErrorKind::UnexpectedEof && self.process.has_exited() {
                ReadError::Exited {
                    pid: self.process.pid(),
                }
            } else {
                unreadable
            }
        })
    }

    pub fn u64(&self, addr: u64) -> Read<u64> {
        let mut b = [0; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    pub fn u32(&self, addr: u64) -> Read<u32> {
        let mut b = [0; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_ne_bytes(b))
    }

    pub fn u16(&self, addr: u64) -> Read<u16> {
        let mut b = [0; 2];
        self.read(addr, &mut b)?;
        Ok(u16::from_ne_bytes(b))
    }

    /// A NUL-terminated string of at most `max` bytes.
    pub fn c_string(&self, addr: u64, max: usize) -> Read<String> {
        let mut out = Vec::new();
        let mut chunk = [0u8; 64];
        while out.len() < max {
            let at = addr.wrapping_add(out.len() as u64);
            // A string may end just before an unmapped page: read it a byte at a time there.
            if self.read(at, &mut chunk).is_err() {
                let mut one = [0u8; 1];
                self.read(at, &mut one)?;
                if one[0] == 0 {
                    return Ok(String::from_utf8_lossy(&out).into_owned());
                }
                out.push(one[0]);
                continue;
            }
            match chunk.iter().position(|&b| b == 0) {
                Some(end) => {
                    out.extend_from_slice(&chunk[..end]);
                    return Ok(String::from_utf8_lossy(&out).into_owned());
                }
                None => out.extend_from_slice(&chunk),
            }
        }
        Err(ReadError::TooLong { addr, max })
    }
}

/// `libjvm.so` as loaded in the target: where it is and the addresses of named symbols.
pub struct Libjvm {
    pub path: PathBuf,
    symbols: HashMap<String, u64>,
    /// The file the JVM mapped (its very inode), kept open: uprobes are attached to it.
    pub file: std::sync::Arc<std::fs::File>,
    /// Where file offset 0 is mapped, and the executable mapping's range.
    pub bias: u64,
    pub exec: (u64, u64),
}

/// The addresses of the symbols named in `wanted` (local ones too: libjvm ships a full
/// `.symtab`) of the ELF file `name`, whose content is `data`, loaded at `base`. The file is
/// the target's: read behind the parser guard.
pub fn elf_symbols(
    name: &str,
    data: &[u8],
    base: u64,
    wanted: &[&str],
) -> Result<HashMap<String, u64>> {
    crate::parser_guard::guard(name, || read_symbols(data, base, wanted))
        .with_context(|| format!("the ELF parser failed on {name} (a panic, caught)"))?
        .with_context(|| format!("{name} is not an ELF file"))
}

fn read_symbols(data: &[u8], base: u64, wanted: &[&str]) -> Result<HashMap<String, u64>> {
    let elf = object::File::parse(data)?;
    let mut symbols = HashMap::new();
    for symbol in elf.symbols().chain(elf.dynamic_symbols()) {
        if let Ok(name) = symbol.name()
            && wanted.contains(&name)
        {
            // A symbol may claim any address.
            if let Some(addr) = base.checked_add(symbol.address()) {
                symbols.insert(name.to_string(), addr);
            }
        }
    }
    Ok(symbols)
}

impl Libjvm {
    /// Finds `libjvm.so` in the target's maps and reads the symbols pinprof needs (`wanted`).
    /// Local symbols count too: libjvm ships a full `.symtab`.
    pub fn load(process: &Process, wanted: &[&str]) -> Result<Self> {
        let libjvm = crate::procmaps::Maps::open(process)
            .and_then(|mut maps| maps.library("libjvm.so"))
            .with_context(|| format!("cannot read the memory map of process {process}"))?;
        let Some(libjvm) = libjvm else {
            bail!("process {process} has no libjvm.so mapped: not a HotSpot JVM");
        };
        // The load bias: where file offset 0 is mapped.
        let base = libjvm.bias;
        let map = libjvm.exec;
        let path = map.path().to_path_buf();
        // The file the JVM has mapped (its inode, inside its root), never a file it only names.
        let file = MappedFile {
            pid: process,
            start: map.start,
            end: map.end,
            path: &path,
            dev: map.dev,
            inode: map.inode,
        }
        .open(None, MAX_MAPPED_FILE)?;
        // read(2), never a mapping the JVM's owner could cut short under us.
        let data = crate::safe_fs::read_capped(&file, &path, MAX_MAPPED_FILE)?;
        let symbols = elf_symbols(&path.to_string_lossy(), &data, base, wanted)?;
        Ok(Self {
            path,
            symbols,
            file: std::sync::Arc::new(file),
            bias: base,
            exec: (map.start, map.end),
        })
    }

    pub fn symbol(&self, name: &str) -> Result<u64> {
        self.symbols
            .get(name)
            .copied()
            .with_context(|| format!("symbol {name} not found in {}", self.path.display()))
    }

    pub fn has(&self, name: &str) -> bool {
        self.symbols.contains_key(name)
    }
}
