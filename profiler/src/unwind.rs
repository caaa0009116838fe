//! Unwinds native user stacks with their DWARF call frame information (`.eh_frame`), for code
//! built without frame pointers (Debian's libc among it), where the kernel's frame-pointer
//! walk stops at the first frame. The kernel sends the registers and the top of the stack of
//! a long system call or of a thread releasing a lock; the unwinding happens here.

use std::{collections::HashSet, ops::Range, path::Path};

use framehop::{
    ExplicitModuleSectionInfo, Module, Unwinder as _,
    x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64},
};
use object::{Object as _, ObjectSection as _, ObjectSegment as _};

use crate::mappings::{Mapping, Mappings};

/// Frames beyond this are not unwound.
const MAX_FRAMES: usize = 128;

pub struct NativeUnwinder {
    mappings: Mappings,
    unwinder: UnwinderX86_64<Vec<u8>>,
    cache: CacheX86_64,
    /// Mappings already given to the unwinder: (start, path).
    known: HashSet<(u64, String)>,
    /// Executable ranges known, to tell when the maps must be read again.
    ranges: Vec<Range<u64>>,
}

impl NativeUnwinder {
    pub fn new(pid: u32) -> Self {
        let mut unwinder = Self {
            mappings: Mappings::new(pid),
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            known: HashSet::new(),
            ranges: Vec::new(),
        };
        unwinder.refresh_modules();
        unwinder
    }

    /// The addresses of the stack, innermost first: `ip`, then return addresses.
    pub fn unwind(&mut self, ip: u64, sp: u64, bp: u64, stack: &[u8]) -> Vec<u64> {
        if !self.ranges.iter().any(|r| r.contains(&ip)) {
            self.refresh_modules();
        }
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let at = addr.checked_sub(sp).ok_or(())? as usize;
            let word = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(word.try_into().map_err(|_| ())?))
        };
        let mut frames = self.unwinder.iter_frames(
            ip,
            UnwindRegsX86_64::new(ip, sp, bp),
            &mut self.cache,
            &mut read_stack,
        );
        let mut out = Vec::new();
        while out.len() < MAX_FRAMES {
            match frames.next() {
                Ok(Some(frame)) => out.push(frame.address()),
                _ => break,
            }
        }
        out
    }

    /// Gives the unwinder every file-backed executable mapping it does not have yet.
    fn refresh_modules(&mut self) {
        self.mappings.refresh();
        for m in self.mappings.iter() {
            if !self.known.insert((m.start, m.path.clone())) {
                continue;
            }
            self.ranges.push(m.start..m.end);
            match m.file.as_deref().and_then(|file| load_module(file, m)) {
                Some(module) => self.unwinder.add_module(module),
                None if std::env::var_os("PINPROF_DEBUG").is_some() => {
                    say!("pinprof: debug: no unwind tables for {}", m.path);
                }
                None => {}
            }
        }
    }
}

/// The unwind sections of one mapped ELF file (read from the file the target has mapped).
fn load_module(file: &std::fs::File, m: &Mapping) -> Option<Module<Vec<u8>>> {
    let (range, offset) = (m.start..m.end, m.offset);
    let data = crate::mappings::read_all(file, Path::new(&m.path)).ok()?;
    let elf = object::File::parse(&*data).ok()?;
    // Where the file's addresses land: the executable load segment this mapping comes from.
    // Segments need not start on a page; their mappings do.
    const PAGE: u64 = 0xfff;
    let segment = elf.segments().find(|s| {
        let executable =
            matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & 1 != 0);
        let (start, size) = s.file_range();
        executable && start & !PAGE <= offset && start.checked_add(size).is_some_and(|e| offset < e)
    })?;
    let file_page = segment.file_range().0 & !PAGE;
    // The file is the target's: its numbers may be anything.
    let loaded = (segment.address() & !PAGE).checked_add(offset.checked_sub(file_page)?)?;
    let bias = range.start.checked_sub(loaded)?;
    let section = |name: &str| {
        let s = elf.section_by_name(name)?;
        let svma = s.address()..s.address().checked_add(s.size())?;
        Some((svma, s.data().ok()?.to_vec()))
    };
    let text = section(".text");
    let eh_frame = section(".eh_frame");
    let eh_frame_hdr = section(".eh_frame_hdr");
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: text.as_ref().map(|t| t.0.clone()),
        text: text.map(|t| t.1),
        eh_frame_svma: eh_frame.as_ref().map(|t| t.0.clone()),
        eh_frame: eh_frame.map(|t| t.1),
        eh_frame_hdr_svma: eh_frame_hdr.as_ref().map(|t| t.0.clone()),
        eh_frame_hdr: eh_frame_hdr.map(|t| t.1),
        ..Default::default()
    };
    Some(Module::new(m.path.clone(), range, bias, info))
}
