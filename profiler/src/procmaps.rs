//! The target's memory map, read at a cost the target cannot raise. Every reader of a
//! target's maps goes through here.
//!
//! `/proc/PID/maps` is as long as the target makes it: 60,000 mappings of a file with a
//! 3,800-character path are 230 MB of text, which the kernel takes 0.7 s of CPU to write out.
//! Where the kernel has `PROCMAP_QUERY` (Linux 6.11) the mappings wanted (executable ones, or
//! those of one library) are asked for one at a time, and the kernel skips the others without
//! writing anything; elsewhere the text is read in a stream under a cap in lines and bytes,
//! and what the cap left out is said.

use std::{
    ffi::OsStr,
    fs::File,
    io::{self, Read as _, Seek as _},
    os::{fd::AsRawFd as _, unix::ffi::OsStrExt as _},
    path::Path,
};

use crate::lines;

/// Bytes of `/proc/PID/maps` read at most: the kernel's CPU and ours grow with them. A large
/// JVM lists a few thousand mappings, about 100 bytes each.
pub const MAX_MAPS_BYTES: u64 = 16 << 20;
/// Lines of `/proc/PID/maps` read at most.
pub const MAX_MAPS_LINES: u64 = 128 << 10;
/// Lines are cut here (a path holds at most 4096 bytes, some escaped as 4).
const MAX_LINE: usize = 16 << 10;
/// Mappings of one library walked at most.
const MAX_LIBRARY_MAPPINGS: usize = 64;

/// One mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    /// The file offset at `start` (0 for memory no file backs).
    pub offset: u64,
    /// The file's device (major, minor) and inode; 0 for memory no file backs.
    pub dev: (u64, u64),
    pub inode: u64,
    pub exec: bool,
    /// The file's path; `[vdso]` and the like for the kernel's; empty for anonymous memory
    /// (or a path the kernel could not give).
    pub name: Vec<u8>,
}

impl Vma {
    /// Whether a file backs it.
    pub fn is_file(&self) -> bool {
        self.inode != 0
    }

    pub fn path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.name))
    }
}

/// A listing stopped at a cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    /// Mappings listed.
    pub mappings: usize,
    /// Lines and bytes of text read (0 when the kernel was queried).
    pub lines: u64,
    pub bytes: u64,
    /// Where the listing stopped: nothing at or above this address was seen.
    pub at: u64,
}

/// Mappings listed, in address order.
#[derive(Debug, Default)]
pub struct Listing {
    pub vmas: Vec<Vma>,
    pub cut: Option<Cut>,
}

/// A library as mapped.
#[derive(Debug)]
pub struct Library {
    /// Its first executable mapping.
    pub exec: Vma,
    /// The load bias: where file offset 0 would be mapped (the least of its mappings').
    pub bias: u64,
}

/// `struct procmap_query` (linux/fs.h).
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

const _: () = assert!(std::mem::size_of::<ProcmapQuery>() == 104);
/// `_IOWR('f', 17, struct procmap_query)`.
// (The request's type is libc's: unsigned long on glibc, int on musl; the kernel takes the
// low 32 bits either way.)
const PROCMAP_QUERY: libc::Ioctl = 0xc068_6611_u32 as libc::Ioctl;
const QUERY_VMA_EXECUTABLE: u64 = 0x04;
const QUERY_COVERING_OR_NEXT_VMA: u64 = 0x10;
const QUERY_FILE_BACKED_VMA: u64 = 0x20;

/// The target's memory map, opened once.
pub struct Maps {
    file: File,
    /// Whether the kernel answers PROCMAP_QUERY (None: not asked yet).
    queries: Option<bool>,
}

impl Maps {
    /// The memory map of the process attached to (opened through its own `/proc`
    /// directory: bound to it, never to a later holder of its pid).
    pub fn open(process: &crate::process::Process) -> io::Result<Self> {
        Ok(Self {
            file: File::from(process.open("maps", libc::O_RDONLY)?),
            queries: None,
        })
    }

    /// Every executable mapping, at most `max` of them.
    pub fn executable(&mut self, max: usize) -> io::Result<Listing> {
        if self.can_query() {
            let flags = QUERY_COVERING_OR_NEXT_VMA | QUERY_VMA_EXECUTABLE;
            let mut listing = Listing::default();
            let mut at = 0;
            while let Some(vma) = self.query(at, flags)? {
                if listing.vmas.len() >= max {
                    listing.cut = Some(Cut {
                        mappings: listing.vmas.len(),
                        lines: 0,
                        bytes: 0,
                        at,
                    });
                    break;
                }
                at = vma.end;
                listing.vmas.push(vma);
            }
            return Ok(listing);
        }
        self.read(|vma| vma.exec, max)
    }

    /// The library whose file is named `file_name` (`libjvm.so`), if one is mapped.
    pub fn library(&mut self, file_name: &str) -> io::Result<Option<Library>> {
        let named = |vma: &Vma| vma.is_file() && vma.path().file_name() == Some(file_name.as_ref());
        if !self.can_query() {
            // Every mapping of the file, as far as the cap.
            let listing = self.read(named, MAX_LIBRARY_MAPPINGS)?;
            let bias = listing
                .vmas
                .iter()
                .filter_map(|v| v.start.checked_sub(v.offset))
                .min();
            let exec = listing.vmas.into_iter().find(|v| v.exec);
            return match (exec.zip(bias), listing.cut) {
                (None, Some(cut)) => Err(io::Error::other(format!(
                    "no {file_name} in the first {} bytes of the memory map, which is longer \
                     than pinprof reads",
                    cut.bytes
                ))),
                (found, _) => Ok(found.map(|(exec, bias)| Library { exec, bias })),
            };
        }
        let flags = QUERY_COVERING_OR_NEXT_VMA | QUERY_VMA_EXECUTABLE | QUERY_FILE_BACKED_VMA;
        let mut at = 0;
        let exec = loop {
            let Some(vma) = self.query(at, flags)? else {
                return Ok(None);
            };
            if named(&vma) {
                break vma;
            }
            at = vma.end;
        };
        // The library's other mappings lie just below (a loader maps it in one reservation,
        // its first segment, at offset 0, lowest): walk down while they are its file's.
        let mut bias = exec.start.checked_sub(exec.offset);
        let mut below = exec.start;
        for _ in 0..MAX_LIBRARY_MAPPINGS {
            let Some(vma) = below.checked_sub(1).map(|a| self.query(a, 0)).transpose()? else {
                break;
            };
            let Some(vma) = vma.filter(|v| (v.dev, v.inode) == (exec.dev, exec.inode)) else {
                break;
            };
            if let Some(b) = vma.start.checked_sub(vma.offset) {
                bias = Some(bias.map_or(b, |bias| bias.min(b)));
            }
            below = vma.start;
        }
        Ok(bias.map(|bias| Library { exec, bias }))
    }

    /// Reads the text alone, as on a kernel without PROCMAP_QUERY.
    #[cfg(test)]
    pub fn text_only(&mut self) {
        self.queries = Some(false);
    }

    /// Whether the kernel answers PROCMAP_QUERY, asked once.
    fn can_query(&mut self) -> bool {
        if self.queries.is_none() {
            let answered = self.query(0, QUERY_COVERING_OR_NEXT_VMA);
            self.queries = Some(answered.is_ok());
        }
        self.queries == Some(true)
    }

    /// The mapping that holds `addr` (or, with `QUERY_COVERING_OR_NEXT_VMA`, the first above
    /// it) that matches `flags`, with its name.
    fn query(&self, addr: u64, flags: u64) -> io::Result<Option<Vma>> {
        let mut name = vec![0u8; libc::PATH_MAX as usize];
        let mut q = ProcmapQuery {
            size: std::mem::size_of::<ProcmapQuery>() as u64,
            query_flags: flags,
            query_addr: addr,
            vma_name_size: name.len() as u32,
            vma_name_addr: name.as_mut_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: a valid fd, the ioctl's own struct of the size it says, and a name buffer
        // of the size it says, alive across the call.
        let mut r = unsafe { libc::ioctl(self.file.as_raw_fd(), PROCMAP_QUERY, &mut q) };
        if r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENAMETOOLONG) {
            // A path longer than the kernel gives: the mapping without its name.
            q.vma_name_size = 0;
            q.vma_name_addr = 0;
            // SAFETY: as above, without a name buffer.
            r = unsafe { libc::ioctl(self.file.as_raw_fd(), PROCMAP_QUERY, &mut q) };
        }
        if r != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOENT) => Ok(None),
                _ => Err(e),
            };
        }
        // The size counts the terminating NUL.
        name.truncate((q.vma_name_size as usize).min(name.len()).saturating_sub(1));
        Ok(Some(Vma {
            start: q.vma_start,
            end: q.vma_end,
            offset: q.vma_offset,
            dev: (u64::from(q.dev_major), u64::from(q.dev_minor)),
            inode: q.inode,
            exec: q.vma_flags & QUERY_VMA_EXECUTABLE != 0,
            name,
        }))
    }

    /// The mappings `keep` keeps, at most `max`, from the text read under the caps.
    fn read(&self, mut keep: impl FnMut(&Vma) -> bool, max: usize) -> io::Result<Listing> {
        let mut listing = Listing::default();
        let mut at = 0;
        let mut full = false;
        (&self.file).seek(io::SeekFrom::Start(0))?;
        let text = io::BufReader::with_capacity(64 << 10, (&self.file).take(MAX_MAPS_BYTES));
        let read = lines::for_each(text, MAX_LINE, |line, _| {
            let Some(vma) = parse_line(line) else {
                return true;
            };
            if keep(&vma) {
                if listing.vmas.len() >= max {
                    full = true;
                    return false;
                }
                at = vma.end;
                listing.vmas.push(vma);
            } else {
                at = vma.end;
            }
            true
        })?;
        if full || read.lines >= MAX_MAPS_LINES || read.bytes >= MAX_MAPS_BYTES {
            listing.cut = Some(Cut {
                mappings: listing.vmas.len(),
                lines: read.lines,
                bytes: read.bytes,
                at,
            });
        }
        Ok(listing)
    }
}

/// One line of `/proc/PID/maps`: `start-end perms offset major:minor inode   path`.
fn parse_line(line: &[u8]) -> Option<Vma> {
    let hex = |field: &[u8]| u64::from_str_radix(std::str::from_utf8(field).ok()?, 16).ok();
    let split = |field: &[u8], at: u8| {
        let i = field.iter().position(|&b| b == at)?;
        Some((hex(&field[..i])?, hex(&field[i + 1..])?))
    };
    let mut fields = line.splitn(6, |&b| b == b' ');
    let (start, end) = split(fields.next()?, b'-')?;
    let perms = fields.next()?;
    let offset = hex(fields.next()?)?;
    let dev = split(fields.next()?, b':')?;
    let inode = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    (start < end).then(|| Vma {
        start,
        end,
        offset,
        dev,
        inode,
        exec: perms.get(2) == Some(&b'x'),
        name: fields.next().unwrap_or_default().trim_ascii().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_parsed_as_the_kernel_writes_them() {
        let vma = parse_line(
            b"7f3c1d0a2000-7f3c1d0a4000 r-xp 0001a000 fd:01 1835032                    /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(
            (vma.start, vma.end, vma.offset),
            (0x7f3c1d0a2000, 0x7f3c1d0a4000, 0x1a000)
        );
        assert_eq!((vma.dev, vma.inode, vma.exec), ((0xfd, 1), 1835032, true));
        assert_eq!(vma.path(), Path::new("/usr/lib/x86_64-linux-gnu/libc.so.6"));
        let anon = parse_line(b"7f00-7f01 rw-p 00000000 00:00 0 ").unwrap();
        assert!(!anon.is_file() && !anon.exec && anon.name.is_empty());
        let spaced = parse_line(b"1000-2000 r--p 0 08:01 7 /tmp/a b (deleted)").unwrap();
        assert_eq!(spaced.name, b"/tmp/a b (deleted)");
        assert!(parse_line(b"2000-1000 r--p 0 08:01 7 /x").is_none());
        assert!(parse_line(b"garbage").is_none());
    }

    /// The kernel's answers and the text agree, where both are read.
    #[test]
    fn queries_and_text_list_the_same_executable_mappings() {
        let mut maps = Maps::open(&crate::process::Process::myself().unwrap()).unwrap();
        assert!(maps.can_query(), "this kernel has PROCMAP_QUERY (6.11+)");
        let queried = maps.executable(1 << 16).unwrap();
        let read = maps.read(|v| v.exec, 1 << 16).unwrap();
        assert!(queried.cut.is_none() && read.cut.is_none());
        assert!(queried.vmas.len() > 2);
        // The text adds the kernel's legacy page (its gate area, no mapping of the process's).
        let text: Vec<_> = read
            .vmas
            .into_iter()
            .filter(|v| v.name != b"[vsyscall]")
            .collect();
        assert_eq!(queried.vmas, text);
        // This test's own libc, by name: its first executable mapping, and the load bias of
        // its first segment (at offset 0, below).
        let libc = maps.library("libc.so.6").unwrap().expect("libc is mapped");
        let first = text
            .iter()
            .find(|v| v.path().file_name() == Some("libc.so.6".as_ref()));
        assert_eq!(Some(&libc.exec), first);
        let all = maps
            .read(|v| v.path().file_name() == Some("libc.so.6".as_ref()), 64)
            .unwrap();
        let lowest = all.vmas.iter().map(|v| v.start - v.offset).min().unwrap();
        assert_eq!(libc.bias, lowest);
        maps.queries = Some(false);
        let by_text = maps.library("libc.so.6").unwrap().unwrap();
        assert_eq!((by_text.exec, by_text.bias), (libc.exec, libc.bias));
        assert!(maps.library("libnothing.so").unwrap().is_none());
    }
}
