//! Unwinds native user stacks with their DWARF call frame information (`.eh_frame`), for code
//! built without frame pointers (Debian's libc among it), where the kernel's frame-pointer
//! walk stops at the first frame. The kernel sends the registers and the top of the stack of
//! a long system call or of a thread releasing a lock; the unwinding happens here.

use std::{
    collections::{HashMap, HashSet},
    ops::{Deref, Range},
    sync::Arc,
};

use framehop::{
    ExplicitModuleSectionInfo, Module, Unwinder as _,
    x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64},
};
use object::{Object as _, ObjectSection as _, ObjectSegment as _};

use crate::mappings::{Mapping, Mappings, MapsWatch, Place, SealedFile, SealedMap};

/// Frames beyond this are not unwound.
const MAX_FRAMES: usize = 128;

/// Mappings given to the unwinder at most.
const MAX_MODULES: usize = 4096;

#[derive(Default)]
pub struct NativeUnwinder {
    unwinder: UnwinderX86_64<Shared>,
    cache: CacheX86_64,
    /// Mappings already given to the unwinder: (start, end, offset).
    known: HashSet<(u64, u64, u64)>,
    /// Each file's unwind sections, found once and shared by all its mappings (by the sealed
    /// copy's address; their bytes stay in the copy); None where they could not be read.
    sections: HashMap<usize, Option<Arc<Sections>>>,
    /// The ranges given, each with its file's key in `sections` (None: no file): what a
    /// parser's failure takes out.
    ranges: Vec<(Range<u64>, Option<usize>)>,
    /// The reading of the maps whose mappings were given last.
    given: Option<Arc<Mappings>>,
}

impl NativeUnwinder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The addresses of the stack, innermost first: `ip`, then return addresses.
    pub fn unwind(
        &mut self,
        mappings: &mut MapsWatch,
        ip: u64,
        sp: u64,
        bp: u64,
        stack: &[u8],
    ) -> Vec<u64> {
        // Each new reading of the maps gives the unwinder what it did not have; an ip no
        // mapping holds asks for a new one (never waited for).
        let latest = mappings.latest();
        if !self.given.as_ref().is_some_and(|g| Arc::ptr_eq(g, latest)) {
            let latest = Arc::clone(latest);
            for m in latest.iter() {
                self.add_mapping(m);
            }
            self.given = Some(latest);
        }
        if let Some(given) = &self.given
            && matches!(given.place(ip), Place::Unknown)
        {
            mappings.ask();
        }
        self.walk(ip, sp, bp, stack)
    }

    /// The addresses of the stack whose top `stack` holds (from `sp` on), innermost first,
    /// through the mappings given so far.
    pub fn walk(&mut self, ip: u64, sp: u64, bp: u64, stack: &[u8]) -> Vec<u64> {
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let at = addr.checked_sub(sp).ok_or(())? as usize;
            let word = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(word.try_into().map_err(|_| ())?))
        };
        let mut out = Vec::new();
        let (unwinder, cache) = (&self.unwinder, &mut self.cache);
        // framehop reads the target's unwind tables as it goes: behind the parser guard.
        let walked = crate::parser_guard::guard("a native stack's unwind tables", || {
            let mut frames = unwinder.iter_frames(
                ip,
                UnwindRegsX86_64::new(ip, sp, bp),
                cache,
                &mut read_stack,
            );
            while out.len() < MAX_FRAMES {
                match frames.next() {
                    Ok(Some(frame)) => out.push(frame.address()),
                    _ => break,
                }
            }
        });
        if walked.is_none() {
            // The rules of the frame it was at came from the file mapped there: that file's
            // tables go, and the cache the panic may have left half-made.
            self.forget_file_at(out.last().copied().unwrap_or(ip));
            self.cache = CacheX86_64::new();
        }
        out
    }

    /// Takes the unwind tables of the file mapped at `addr` out of the unwinder, for good.
    fn forget_file_at(&mut self, addr: u64) {
        let Some(&(_, Some(key))) = self.ranges.iter().find(|(r, _)| r.contains(&addr)) else {
            return;
        };
        self.sections.insert(key, None);
        for (range, _) in self.ranges.iter().filter(|(_, k)| *k == Some(key)) {
            self.unwinder.remove_module(range.start);
        }
    }

    /// Gives the unwinder a file-backed executable mapping, unless it has it already.
    pub fn add_mapping(&mut self, m: &Mapping) {
        if self.known.len() >= MAX_MODULES || !self.known.insert((m.start, m.end, m.offset)) {
            return;
        }
        let key = m.file.as_ref().map(|file| Arc::as_ptr(file) as usize);
        self.ranges.push((m.start..m.end, key));
        // object and framehop read the target's file here: behind the parser guard, a panic
        // costing that file's tables.
        let sections = m.file.as_ref().and_then(|file| {
            self.sections
                .entry(Arc::as_ptr(file) as usize)
                .or_insert_with(|| {
                    crate::parser_guard::guard(&m.path, || Sections::read(file))
                        .flatten()
                        .map(Arc::new)
                })
                .clone()
        });
        let module = sections.and_then(|s| {
            let module = crate::parser_guard::guard(&m.path, || s.module(m));
            if module.is_none()
                && let Some(key) = key
            {
                self.sections.insert(key, None);
            }
            module.flatten()
        });
        match module {
            Some(module) => self.unwinder.add_module(module),
            None if std::env::var_os("PINPROF_DEBUG").is_some() => {
                say!("pinprof: debug: no unwind tables for {}", m.path);
            }
            None => {}
        }
    }
}

/// A section's bytes, read in place from the file's sealed copy and shared by every mapping
/// of the file.
#[derive(Clone, Default)]
struct Shared(Option<Arc<SealedMap>>, Range<usize>);

impl Deref for Shared {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.as_deref().map_or(&[], |map| &map[self.1.clone()])
    }
}

/// What unwinding needs of one ELF file: its executable load segments and the sections with
/// their addresses in the file (svma).
struct Sections {
    /// Executable segments: (file offset, file size, address).
    segments: Vec<(u64, u64, u64)>,
    text: Option<(Range<u64>, Shared)>,
    eh_frame: Option<(Range<u64>, Shared)>,
    eh_frame_hdr: Option<(Range<u64>, Shared)>,
}

impl Sections {
    /// From the file's sealed copy; the file is the target's, so its numbers may be anything.
    fn read(file: &SealedFile) -> Option<Self> {
        let map = Arc::new(file.map().ok()?);
        let elf = object::File::parse(&**map).ok()?;
        let segments = elf
            .segments()
            .filter(
                |s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & 1 != 0),
            )
            .map(|s| {
                let (start, size) = s.file_range();
                (start, size, s.address())
            })
            .collect();
        let section = |name: &str| {
            let s = elf.section_by_name(name)?;
            let svma = s.address()..s.address().checked_add(s.size())?;
            // Where its bytes are in the file (none for a section without file data).
            let (at, len) = s.file_range()?;
            let at = usize::try_from(at).ok()?;
            let range = at..at.checked_add(usize::try_from(len).ok()?)?;
            map.get(range.clone())?;
            Some((svma, Shared(Some(Arc::clone(&map)), range)))
        };
        Some(Self {
            segments,
            text: section(".text"),
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
        })
    }

    /// The unwinder's module for one mapping of this file.
    fn module(&self, m: &Mapping) -> Option<Module<Shared>> {
        // Where the file's addresses land: the executable load segment this mapping comes
        // from. Segments need not start on a page; their mappings do.
        const PAGE: u64 = 0xfff;
        let offset = m.offset;
        let &(file_start, _, address) = self.segments.iter().find(|(start, size, _)| {
            start & !PAGE <= offset && start.checked_add(*size).is_some_and(|e| offset < e)
        })?;
        let file_page = file_start & !PAGE;
        let loaded = (address & !PAGE).checked_add(offset.checked_sub(file_page)?)?;
        let bias = m.start.checked_sub(loaded)?;
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.as_ref().map(|t| t.0.clone()),
            text: self.text.as_ref().map(|t| t.1.clone()),
            eh_frame_svma: self.eh_frame.as_ref().map(|t| t.0.clone()),
            eh_frame: self.eh_frame.as_ref().map(|t| t.1.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|t| t.0.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|t| t.1.clone()),
            ..Default::default()
        };
        Some(Module::new(m.path.clone(), m.start..m.end, bias, info))
    }
}
