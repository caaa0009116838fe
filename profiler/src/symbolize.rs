//! Names stack addresses while the target is alive, so that recordings carry names and can be
//! read anywhere later: kernel frames from kallsyms, native frames from the ELF symbols of the
//! mapped files, JIT frames from the runtime's perf map where it wrote one (read by a worker
//! thread: the drain only looks names up in its latest reading).

use std::{sync::Arc, time::Duration};

use blazesym::symbolize::{
    Input, Symbolized, Symbolizer as Blaze,
    source::{Elf, Kernel, Source},
};

use crate::{
    events::{Frame, FrameKind},
    mappings::{MapsWatch, Place, SealedFile},
    perfmap::{PerfMap, PerfMapSource},
    safe_fs::TargetRoot,
    target::Target,
    worker::{Pace, Worker},
};

/// How often the perf map may be looked at again (a stat) when addresses outside any file
/// turn up, and read again when it changed: at most once a second, and never more than 1/20
/// of a core.
const PERF_MAP_PACE: Pace = Pace {
    min: Duration::from_secs(1),
    factor: 20,
};

pub struct Symbolizer {
    /// For the kernel's symbols.
    blaze: Blaze,
    /// For the target's files.
    elf: ElfSymbols,
    /// Reads the target's perf map (None: its user or root is not known, or no thread).
    perf_map: Option<Worker<PerfMap>>,
    /// The perf map as the target names it, for what is said about it.
    perf_map_path: std::path::PathBuf,
    /// Whether a perf map read only in part was said.
    perf_map_cut_said: bool,
}

impl Symbolizer {
    /// Starts reading the perf map at once: made before the capture starts, the first
    /// reading is there before the first stack.
    pub fn new(target: &Target) -> Self {
        // The JVM names it by its pid in its own PID namespace (a container's), and writes
        // it in its own /tmp: read inside its root.
        let perf_map_path: std::path::PathBuf = format!("/tmp/perf-{}.map", target.ns_pid()).into();
        let perf_map = target
            .uid()
            .zip(TargetRoot::open(target.process()).ok())
            .and_then(|(owner, root)| {
                let mut source = PerfMapSource::new(root, perf_map_path.clone(), owner);
                let worker = Worker::spawn(
                    "pinprof-perfmap",
                    Arc::default(),
                    PERF_MAP_PACE,
                    move || source.poll().map(Arc::new),
                )
                .ok()?;
                worker.ask();
                Some(worker)
            });
        Self {
            blaze: Blaze::new(),
            elf: ElfSymbols::default(),
            perf_map,
            perf_map_path,
            perf_map_cut_said: false,
        }
    }

    /// The latest reading of the perf map, asking for a fresher one (never waiting).
    fn perf_map(&mut self) -> Option<&Arc<PerfMap>> {
        let worker = self.perf_map.as_mut()?;
        worker.ask();
        Some(worker.latest())
    }

    /// A perf map read only in part, the first time one is seen: to be said once.
    pub fn news(&mut self) -> Option<String> {
        if self.perf_map_cut_said {
            return None;
        }
        let cut = self.perf_map.as_mut()?.latest().cut.as_ref()?.to_string();
        self.perf_map_cut_said = true;
        Some(format!(
            "the perf map {} is {cut}",
            self.perf_map_path.display()
        ))
    }

    pub fn kernel(&self, addrs: &[u64]) -> Vec<Frame> {
        let kernel = Kernel {
            vmlinux: blazesym::MaybeDefault::None,
            debug_syms: false,
            ..Default::default()
        };
        let lookups = call_sites(addrs);
        let named = self
            .blaze
            .symbolize(&Source::Kernel(kernel), Input::AbsAddr(&lookups));
        addrs
            .iter()
            .enumerate()
            .map(|(i, &addr)| {
                let name = named
                    .as_ref()
                    .ok()
                    .and_then(|n| n.get(i))
                    .and_then(sym_name);
                Frame {
                    kind: FrameKind::Kernel,
                    addr,
                    name,
                    module: None,
                    holds_monitor: false,
                    line: None,
                }
            })
            .collect()
    }

    /// Names a user stack from the target's mapped files (`mappings`) and its perf map.
    pub fn user(&mut self, mappings: &mut MapsWatch, addrs: &[u64]) -> Vec<Frame> {
        let lookups = call_sites(addrs);
        let mut frames: Vec<Frame> = addrs
            .iter()
            .map(|&addr| Frame {
                kind: FrameKind::Native,
                addr,
                name: None,
                module: None,
                holds_monitor: false,
                line: None,
            })
            .collect();
        // Named from sealed copies of the files the target has mapped (handed to blazesym as
        // this process's own memfd, never by the target's path), one call per file.
        let mut by_file: Vec<(Arc<SealedFile>, Vec<usize>, Vec<u64>)> = Vec::new();
        let maps = Arc::clone(mappings.latest());
        for (i, &lookup) in lookups.iter().enumerate() {
            let m = match maps.place(lookup) {
                Place::File(m) => m,
                Place::Anonymous => continue,
                // Mapped since the last reading, perhaps: a new one is asked for (named
                // from the next stack on), never waited for.
                Place::Unknown => {
                    mappings.ask();
                    continue;
                }
            };
            let offset = m.file_offset(lookup);
            frames[i].module = Some(m.path.clone());
            // Outside any symbol (or a file not read): at least say which file and where,
            // e.g. `[libc.so.6+0x8ff16]`.
            frames[i].name = Some(offset_name(&m.path, offset));
            let Some(file) = &m.file else { continue };
            match by_file.iter_mut().find(|(f, ..)| Arc::ptr_eq(f, file)) {
                Some((_, at, offsets)) => {
                    at.push(i);
                    offsets.push(offset);
                }
                None => by_file.push((Arc::clone(file), vec![i], vec![offset])),
            }
        }
        for (file, at, offsets) in by_file {
            let module = frames[at[0]].module.clone().unwrap_or_default();
            let Some(named) = self.elf.names(&file, &module, &offsets) else {
                continue;
            };
            for (i, name) in at.into_iter().zip(named) {
                if name.is_some() {
                    frames[i].name = name;
                }
            }
        }
        // The rest are JIT code, named by the runtime's perf map where it wrote one.
        if frames.iter().any(|f| f.module.is_none())
            && let Some(perf_map) = self.perf_map()
        {
            for (frame, &lookup) in frames.iter_mut().zip(&lookups) {
                if frame.module.is_none()
                    && let Some(name) = perf_map.lookup(lookup)
                {
                    frame.kind = FrameKind::Jit;
                    frame.name = Some(name.to_string());
                }
            }
        }
        frames
    }

    /// The Java method the JVM's perf map names at `addr`, as `pkg.Class.method` (the map says
    /// `void pkg.Class.method(long)`); None for code that is not a method.
    pub fn perf_map_method(&mut self, addr: u64) -> Option<String> {
        let entry = self.perf_map()?.lookup(addr)?;
        let head = entry.split('(').next()?;
        let method = head.rsplit(' ').next()?;
        // Stubs are named too ("StubRoutines (1)"): a method has a class and a name.
        (head.len() < entry.len() && method.contains('.')).then(|| method.to_string())
    }
}

/// Names places in the target's files with blazesym, behind the parser guard: a panic on a
/// crafted file costs that file's names (it is not asked again), and the parser's state,
/// which the panic may have left half-made, is dropped.
#[derive(Default)]
pub struct ElfSymbols {
    blaze: Blaze,
    /// Files blazesym failed on (by their sealed copy's address: the maps reader keeps
    /// every copy for good).
    refused: std::collections::HashSet<usize>,
    /// Each file's separate debug file on this host, if it has one (see `DebugFile`).
    debug: std::collections::HashMap<usize, Option<DebugFile>>,
}

/// Where the host keeps the separate debug files of its packages (`libc6-dbg` and the
/// other `-dbg` packages), by build id.
const BUILD_ID_DIR: &str = "/usr/lib/debug/.build-id";

/// Debug files larger than this are not read (libc's is 4 MiB, libjvm's some 200 MiB).
const MAX_DEBUG_FILE_BYTES: u64 = 256 << 20;

/// The host's separate debug file of a file's very build, found by its build id alone (hex
/// digits: nothing the target wrote in its files names any other path): its symbol table
/// names a stripped library's static functions (libc's `__futex_abstimed_wait_common`,
/// where threads wait, shown as `[libc.so.6+0x85f16]` without it). A file of another build
/// (a container's own libc) finds none.
#[derive(Clone, Debug)]
struct DebugFile {
    /// Opened once through the one door for reads; blazesym reads it by its fd's path.
    file: Arc<std::fs::File>,
    /// The file's loaded segments: (file offset, size, virtual address), to turn the
    /// offsets of its frames into the addresses both files' symbols use.
    segments: Vec<(u64, u64, u64)>,
}

impl DebugFile {
    fn find(file: &SealedFile) -> Option<Self> {
        use object::{Object as _, ObjectSegment as _};
        let bytes = file.map().ok()?;
        let elf = object::File::parse(&*bytes).ok()?;
        let id = elf.build_id().ok()??;
        if id.len() < 2 {
            return None;
        }
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let path = std::path::Path::new(BUILD_ID_DIR)
            .join(&hex[..2])
            .join(format!("{}.debug", &hex[2..]));
        // Root's regular file, not reached through a symlink at its name; a size cap keeps
        // a parse within the memory budget's reach.
        let expect = crate::safe_fs::Expect {
            max_bytes: MAX_DEBUG_FILE_BYTES,
            owner: crate::safe_fs::Owner::RootOr(0),
        };
        let file = Arc::new(crate::safe_fs::open_host_file(&path, expect).ok()?);
        let segments = elf
            .segments()
            .filter_map(|s| {
                let (offset, size) = s.file_range();
                (size > 0).then_some((offset, size, s.address()))
            })
            .collect();
        Some(Self { file, segments })
    }

    fn address(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(at, size, _)| (*at..at.saturating_add(*size)).contains(&offset))
            .map(|(at, _, address)| address.wrapping_add(offset - at))
    }
}

impl ElfSymbols {
    /// The symbol at each file offset of `file` (the target's `module`), None where there
    /// is none; None for all when the parser failed on the file.
    pub fn names(
        &mut self,
        file: &Arc<SealedFile>,
        module: &str,
        offsets: &[u64],
    ) -> Option<Vec<Option<String>>> {
        let key = Arc::as_ptr(file) as usize;
        if self.refused.contains(&key) {
            return None;
        }
        let elf = Elf {
            debug_syms: false,
            ..Elf::new(file.path())
        };
        let blaze = &self.blaze;
        let named = crate::parser_guard::guard(module, || {
            let named = blaze
                .symbolize(&Source::Elf(elf), Input::FileOffset(offsets))
                .ok()?;
            Some(named.iter().map(sym_name).collect::<Vec<_>>())
        });
        let mut named = match named {
            Some(named) => named?,
            None => {
                self.refused.insert(key);
                self.blaze = Blaze::new();
                return None;
            }
        };
        if named.iter().any(Option::is_none) {
            self.name_from_debug_file(key, file, module, offsets, &mut named);
        }
        Some(named)
    }

    /// Names what the file's own symbols did not, from the host's debug file of its build.
    fn name_from_debug_file(
        &mut self,
        key: usize,
        file: &SealedFile,
        module: &str,
        offsets: &[u64],
        named: &mut [Option<String>],
    ) {
        let debug = self.debug.entry(key).or_insert_with(|| {
            crate::parser_guard::guard(module, || DebugFile::find(file)).flatten()
        });
        let Some(debug) = debug.clone() else {
            return;
        };
        let (at, addresses): (Vec<usize>, Vec<u64>) = named
            .iter()
            .zip(offsets)
            .enumerate()
            .filter(|(_, (name, _))| name.is_none())
            .filter_map(|(i, (_, offset))| Some((i, debug.address(*offset)?)))
            .unzip();
        if addresses.is_empty() {
            return;
        }
        let elf = Elf {
            debug_syms: false,
            ..Elf::new(crate::safe_fs::fd_path(&*debug.file))
        };
        let blaze = &self.blaze;
        let found = crate::parser_guard::guard(module, || {
            let found = blaze
                .symbolize(&Source::Elf(elf), Input::VirtOffset(&addresses))
                .ok()?;
            Some(found.iter().map(sym_name).collect::<Vec<_>>())
        });
        match found {
            Some(Some(found)) => {
                for (i, name) in at.into_iter().zip(found) {
                    named[i] = name;
                }
            }
            Some(None) => {}
            // A debug file the parser failed on is not asked again.
            None => {
                self.debug.insert(key, None);
                self.blaze = Blaze::new();
            }
        }
    }
}

/// Whether the kernel hides its symbols' addresses from pinprof (`kptr_restrict`, without
/// root or CAP_SYSLOG): `/proc/kallsyms` then shows zeros, and kernel frames go unnamed.
pub fn kernel_symbols_hidden() -> bool {
    use std::io::BufRead as _;
    let Ok(file) = std::fs::File::open("/proc/kallsyms") else {
        return true;
    };
    let mut first = String::new();
    if std::io::BufReader::new(file).read_line(&mut first).is_err() {
        return true;
    }
    first
        .split_whitespace()
        .next()
        .is_none_or(|addr| addr.bytes().all(|b| b == b'0'))
}

/// `[libc.so.6+0x8ff16]`: a place in a file where no symbol is known.
fn offset_name(path: &str, offset: u64) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    format!("[{base}+{offset:#x}]")
}

fn sym_name(s: &Symbolized<'_>) -> Option<String> {
    match s {
        Symbolized::Sym(sym) => Some(sym.name.to_string()),
        Symbolized::Unknown(_) => None,
    }
}

/// Return addresses point after their call; look up the byte before so that a call at the very
/// end of a function is not charged to the next one. The first frame is a real pc.
fn call_sites(addrs: &[u64]) -> Vec<u64> {
    addrs
        .iter()
        .enumerate()
        .map(|(i, &a)| if i == 0 { a } else { a.saturating_sub(1) })
        .collect()
}
