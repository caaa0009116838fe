//! Names stack addresses while the target is alive, so that recordings carry names and can be
//! read anywhere later: kernel frames from kallsyms, native frames from the ELF symbols of the
//! mapped files, JIT frames from the runtime's perf map where it wrote one.

use std::time::{Duration, Instant};

use blazesym::symbolize::{
    Input, Symbolized, Symbolizer as Blaze,
    source::{Kernel, Process, Source},
};

use crate::{
    events::{Frame, FrameKind},
    perfmap::PerfMap,
    target::Target,
};

/// How often to re-read the perf map when addresses outside any file turn up.
const PERF_MAP_REFRESH: Duration = Duration::from_secs(1);

pub struct Symbolizer {
    blaze: Blaze,
    pid: u32,
    owner: Option<u32>,
    perf_map_path: std::path::PathBuf,
    perf_map: PerfMap,
    perf_map_read: Option<Instant>,
    /// File-backed executable mappings: (start, end, file offset at start, path).
    modules: Vec<(u64, u64, u64, String)>,
}

impl Symbolizer {
    pub fn new(target: &Target) -> Self {
        Self {
            blaze: Blaze::new(),
            pid: target.pid,
            owner: target.uid(),
            perf_map_path: target.root_path(&format!("/tmp/perf-{}.map", target.pid)),
            perf_map: PerfMap::default(),
            perf_map_read: None,
            modules: Vec::new(),
        }
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
                }
            })
            .collect()
    }

    pub fn user(&mut self, addrs: &[u64]) -> Vec<Frame> {
        let mut process = Process::new(self.pid.into());
        process.debug_syms = false;
        process.perf_map = false; // read by `PerfMap`, which checks who wrote it
        let lookups = call_sites(addrs);
        let named = self
            .blaze
            .symbolize(&Source::Process(process), Input::AbsAddr(&lookups))
            .ok();
        let mut frames: Vec<Frame> = addrs
            .iter()
            .enumerate()
            .map(|(i, &addr)| match named.as_ref().and_then(|n| n.get(i)) {
                Some(Symbolized::Sym(sym)) => Frame {
                    kind: FrameKind::Native,
                    addr,
                    name: Some(sym.name.to_string()),
                    module: sym
                        .module
                        .as_ref()
                        .map(|m| m.to_string_lossy().into_owned()),
                    holds_monitor: false,
                },
                _ => Frame {
                    kind: FrameKind::Native,
                    addr,
                    name: None,
                    module: None,
                    holds_monitor: false,
                },
            })
            .collect();

        if frames.iter().any(|f| f.name.is_none()) {
            // Outside any symbol: at least say which file and where, e.g. `[libc.so.6+0x8ff16]`.
            for (frame, &lookup) in frames.iter_mut().zip(&lookups) {
                if frame.name.is_none()
                    && frame.module.is_none()
                    && let Some((module, offset)) = self.module_of(lookup)
                {
                    let base = module.rsplit('/').next().unwrap_or(&module).to_string();
                    frame.name = Some(format!("[{base}+{offset:#x}]"));
                    frame.module = Some(module);
                }
            }
            self.refresh_perf_map();
            for (frame, &lookup) in frames.iter_mut().zip(&lookups) {
                if frame.name.is_none()
                    && let Some(name) = self.perf_map.lookup(lookup)
                {
                    frame.kind = FrameKind::Jit;
                    frame.name = Some(name.to_string());
                }
            }
        }
        frames
    }

    /// The file mapped at `addr` and the offset in it, re-reading the maps once on a miss
    /// (libraries load late).
    fn module_of(&mut self, addr: u64) -> Option<(String, u64)> {
        let find = |modules: &[(u64, u64, u64, String)]| {
            modules
                .iter()
                .find(|m| addr >= m.0 && addr < m.1)
                .map(|m| (m.3.clone(), addr - m.0 + m.2))
        };
        if let Some(found) = find(&self.modules) {
            return Some(found);
        }
        self.modules = executable_mappings(self.pid);
        find(&self.modules)
    }

    /// The Java method the JVM's perf map names at `addr`, as `pkg.Class.method` (the map says
    /// `void pkg.Class.method(long)`); None for code that is not a method.
    pub fn perf_map_method(&mut self, addr: u64) -> Option<String> {
        self.refresh_perf_map();
        let entry = self.perf_map.lookup(addr)?;
        let head = entry.split('(').next()?;
        let method = head.rsplit(' ').next()?;
        // Stubs are named too ("StubRoutines (1)"): a method has a class and a name.
        (head.len() < entry.len() && method.contains('.')).then(|| method.to_string())
    }

    fn refresh_perf_map(&mut self) {
        if self
            .perf_map_read
            .is_some_and(|t| t.elapsed() < PERF_MAP_REFRESH)
        {
            return;
        }
        self.perf_map_read = Some(Instant::now());
        if let Some(owner) = self.owner
            && let Ok(map) = PerfMap::load(&self.perf_map_path, owner)
        {
            self.perf_map = map;
        }
    }
}

/// The target's file-backed executable mappings: (start, end, file offset at start, path).
pub fn executable_mappings(pid: u32) -> Vec<(u64, u64, u64, String)> {
    let Ok(process) = procfs::process::Process::new(pid as i32) else {
        return Vec::new();
    };
    let Ok(maps) = process.maps() else {
        return Vec::new();
    };
    maps.into_iter()
        .filter(|m| m.perms.contains(procfs::process::MMPermissions::EXECUTE))
        .filter_map(|m| match m.pathname {
            procfs::process::MMapPath::Path(p) => Some((
                m.address.0,
                m.address.1,
                m.offset,
                p.to_string_lossy().into_owned(),
            )),
            _ => None,
        })
        .collect()
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
