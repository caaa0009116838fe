//! pprof profiles (`profile.proto`, gzipped): what `go tool pprof`, Pyroscope and Parca read.
//! One profile holds every kind of lost time as its own sample type, in nanoseconds:
//! `off_cpu` (blocked time of every thread, as the off-CPU flamegraph weighs it), `pinned`
//! (carrier time pinned, by the pinned virtual thread's stack), `futex` (long futex waits,
//! by the waiter's stack) and `lock` (lock wait time, by the stack of the holder that
//! released it). The JVM's own threads' waits for work are left out unless asked for (then
//! with `role:jvm`); the kernel's frames of a stack are one location, named for the system
//! call (`sys_futex`). Samples carry labels: `thread`, `tid`, `role`, and for pinned time the
//! virtual thread (`vthread_id`), `reason` and `operation`. Java frames are functions named
//! `pkg.Class.method` whose file is their class.

use std::collections::HashMap;
use std::io::Write;

use anyhow::{Context as _, Result};

use super::protobuf::Message;
use crate::analysis::{Analysis, jdk, kinds::ThreadRole};
use crate::events::{Frame, FrameKind};
use crate::model::{FastMap, add};

/// The sample types, in the order of each sample's values.
pub const SAMPLE_TYPES: [&str; 4] = ["off_cpu", "pinned", "futex", "lock"];
const OFF_CPU: usize = 0;
const PINNED: usize = 1;
const FUTEX: usize = 2;
const LOCK: usize = 3;

/// A label's value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Value {
    Str(String),
    Num(u64),
}

/// A wait's stacks: kernel, native, Java.
type Ids = crate::analysis::WaitStacks;
/// A sample's labels beyond its thread's.
type Labels = Vec<(&'static str, Value)>;

/// One sample before it is written: its type, stack (innermost first) and labels.
#[derive(PartialEq, Eq, Hash)]
struct Key {
    kind: usize,
    locations: Vec<u64>,
    labels: Labels,
}

/// The tables a profile refers to by index.
#[derive(Default)]
struct Tables {
    strings: Vec<String>,
    string_ids: HashMap<String, u64>,
    /// (name, file) to function id.
    functions: HashMap<(u64, u64), u64>,
    /// (function id, line) to location id.
    locations: HashMap<(u64, u64), u64>,
    /// Frames already turned into locations, by their stack.
    stacks: FastMap<Ids, Vec<u64>>,
}

impl Tables {
    fn new() -> Self {
        let mut t = Self::default();
        t.string("");
        t
    }

    fn string(&mut self, s: &str) -> u64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    fn location(&mut self, frame: &Frame) -> u64 {
        let name = frame.label();
        let file = match frame.kind {
            // A Java frame's class.
            FrameKind::Java => name
                .rsplit_once('.')
                .map_or("", |(class, _)| class)
                .to_string(),
            FrameKind::Kernel => "[kernel]".to_string(),
            _ => frame.module.clone().unwrap_or_default(),
        };
        let key = (self.string(&name), self.string(&file));
        let next = self.functions.len() as u64 + 1;
        let function = *self.functions.entry(key).or_insert(next);
        let line = u64::from(frame.line.unwrap_or(0));
        let next = self.locations.len() as u64 + 1;
        *self.locations.entry((function, line)).or_insert(next)
    }

    fn stack(&mut self, analysis: &Analysis, ids: Ids) -> Vec<u64> {
        if let Some(known) = self.stacks.get(&ids) {
            return known.clone();
        }
        let frames = analysis.model().frames_of(ids.0, ids.1, ids.2);
        let locations = self.locations_of(&frames);
        self.stacks.insert(ids, locations.clone());
        locations
    }

    /// A stack's locations, innermost first; a wait with no stack gets one frame that says
    /// so (a sample without locations is dropped by some readers). The kernel's frames are
    /// one location, named for the system call they serve (`sys_futex`), else for the
    /// kernel's entry (an interrupt, a page fault): pprof's flat view charges the innermost
    /// location, which would otherwise be the scheduler's `__schedule` for every wait.
    fn locations_of(&mut self, frames: &[&Frame]) -> Vec<u64> {
        let kernel = frames
            .iter()
            .take_while(|f| f.kind == FrameKind::Kernel)
            .count();
        if kernel > 0 {
            let name = kernel_entry(&frames[..kernel]);
            let folded = Frame {
                kind: FrameKind::Kernel,
                addr: 0,
                name: Some(name),
                module: None,
                holds_monitor: false,
                line: None,
            };
            let mut out = vec![self.location(&folded)];
            out.extend(frames[kernel..].iter().map(|f| self.location(f)));
            return out;
        }
        if frames.is_empty() {
            let none = Frame {
                kind: FrameKind::Native,
                addr: 0,
                name: Some("[no stack]".into()),
                module: None,
                holds_monitor: false,
                line: None,
            };
            return vec![self.location(&none)];
        }
        frames.iter().map(|f| self.location(f)).collect()
    }
}

/// What the kernel frames of a stack (innermost first) were doing, in a word: `sys_<call>`
/// for a system call, else the outermost frame (how the kernel was entered).
fn kernel_entry(frames: &[&Frame]) -> String {
    // (`SyS_` and `sys_`: kernels before 4.17.)
    const SYSCALL: [&str; 7] = [
        "__x64_sys_",
        "__ia32_sys_",
        "__arm64_sys_",
        "__se_sys_",
        "__do_sys_",
        "SyS_",
        "sys_",
    ];
    let names = || frames.iter().filter_map(|f| f.name.as_deref());
    names()
        .find_map(|n| SYSCALL.iter().find_map(|p| n.strip_prefix(p)))
        .map(|call| format!("sys_{call}"))
        .or_else(|| names().next_back().map(str::to_string))
        .unwrap_or_else(|| "[kernel]".into())
}

/// Writes the profile of a recording, gzipped; the JVM's own threads' waits for work only
/// with `jvm_threads` (labelled `role:jvm`).
pub fn write(analysis: &Analysis, jvm_threads: bool, out: impl Write) -> Result<()> {
    let bytes = encode(analysis, jvm_threads);
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&bytes)
        .and_then(|()| gz.finish().map(drop))
        .context("cannot write the pprof profile")
}

/// The profile, not compressed.
pub fn encode(analysis: &Analysis, jvm_threads: bool) -> Vec<u8> {
    let model = analysis.model();
    let mut tables = Tables::new();
    let roles: HashMap<u32, ThreadRole> =
        analysis.threads().iter().map(|t| (t.tid, t.role)).collect();
    let own = analysis.jdk_own_threads();
    let jvm_role = || vec![("role", Value::Str("jvm".into()))];
    // Summed by stack ids and thread first (millions of intervals, thousands of stacks).
    let mut by_ids: FastMap<(usize, u32, Ids, Labels), u64> = FastMap::default();
    for (o, ns) in analysis.blocked_intervals() {
        let ids = (o.kernel_stack(), o.user_stack(), model.java_stack(o));
        let labels = if analysis.waits_for_work(o.tid, ids) {
            if !jvm_threads {
                continue;
            }
            jvm_role()
        } else {
            Vec::new()
        };
        add(by_ids.entry((OFF_CPU, o.tid, ids, labels)).or_default(), ns);
    }
    for e in analysis.pinned_events() {
        let labels = vec![
            ("vthread_id", Value::Num(e.vthread)),
            ("reason", Value::Str(e.reason.as_str().into())),
            ("operation", Value::Str(e.operation.as_str().into())),
        ];
        let ids = (e.kernel_stack, e.user_stack, e.java_stack);
        add(
            by_ids.entry((PINNED, e.carrier, ids, labels)).or_default(),
            e.duration_ns(),
        );
    }
    let mut samples: HashMap<Key, u64> = HashMap::new();
    // (A role among the extra labels, the JVM's, stands.)
    let labels_of = |tid: u32, mut extra: Labels| {
        let role = match roles.get(&tid) {
            Some(ThreadRole::Carrier) => "carrier",
            _ => "other",
        };
        let mut labels = vec![
            ("thread", Value::Str(model.thread_name(tid))),
            ("tid", Value::Num(u64::from(tid))),
        ];
        if !extra.iter().any(|(name, _)| *name == "role") {
            labels.push(("role", Value::Str(role.into())));
        }
        labels.append(&mut extra);
        labels
    };
    for ((kind, tid, ids, extra), ns) in by_ids {
        let key = Key {
            kind,
            locations: tables.stack(analysis, ids),
            labels: labels_of(tid, extra),
        };
        add(samples.entry(key).or_default(), ns);
    }
    // (Long futex waits and lock waits: few, one by one.)
    let mut one_by_one = |kind: usize, tid: u32, frames: Vec<&Frame>, extra: Labels, ns: u64| {
        let key = Key {
            kind,
            locations: tables.locations_of(&frames),
            labels: labels_of(tid, extra),
        };
        add(samples.entry(key).or_default(), ns);
    };
    for s in model.syscalls.iter().filter(|s| s.futex.is_some()) {
        let frames = model.waiter_frames(s);
        let extra = if jdk::waits_for_work(own, s.tid, &frames) {
            if !jvm_threads {
                continue;
            }
            jvm_role()
        } else {
            Vec::new()
        };
        one_by_one(FUTEX, s.tid, frames, extra, s.duration_ns());
    }
    for s in analysis.lock_waits() {
        one_by_one(
            LOCK,
            s.releaser(),
            model.holder_frames(s),
            Vec::new(),
            s.duration_ns(),
        );
    }

    let mut profile = Message::default();
    let nanoseconds = tables.string("nanoseconds");
    for name in SAMPLE_TYPES {
        let mut t = Message::default();
        t.int(1, tables.string(name)).int(2, nanoseconds);
        profile.message(1, &t);
    }
    // In a stable order, so that one recording gives one file.
    let mut samples: Vec<(Key, u64)> = samples.into_iter().collect();
    samples.sort_by(|a, b| {
        (a.0.kind, &a.0.locations)
            .cmp(&(b.0.kind, &b.0.locations))
            .then(b.1.cmp(&a.1))
    });
    for (key, ns) in samples {
        let mut values = [0u64; SAMPLE_TYPES.len()];
        values[key.kind] = ns.min(i64::MAX as u64);
        let mut s = Message::default();
        s.packed(1, key.locations.iter().copied()).packed(2, values);
        for (name, value) in key.labels {
            let mut l = Message::default();
            l.int(1, tables.string(name));
            match value {
                Value::Str(v) => l.int(2, tables.string(&v)),
                Value::Num(n) => l.int(3, n),
            };
            s.message(3, &l);
        }
        profile.message(2, &s);
    }
    let mut locations: Vec<(&(u64, u64), &u64)> = tables.locations.iter().collect();
    locations.sort_by_key(|(_, id)| **id);
    for ((function, line), id) in locations {
        let mut l = Message::default();
        l.int(1, *id);
        let mut line_msg = Message::default();
        line_msg.int(1, *function).int(2, *line);
        l.message(4, &line_msg);
        profile.message(4, &l);
    }
    let mut functions: Vec<(&(u64, u64), &u64)> = tables.functions.iter().collect();
    functions.sort_by_key(|(_, id)| **id);
    for ((name, file), id) in functions {
        let mut f = Message::default();
        f.int(1, *id).int(2, *name).int(3, *name).int(4, *file);
        profile.message(5, &f);
    }
    profile.int(9, model.start_unix_ns);
    profile.int(10, analysis.duration_ns());
    let mut period = Message::default();
    period
        .int(1, tables.string(SAMPLE_TYPES[OFF_CPU]))
        .int(2, nanoseconds);
    profile.message(11, &period).int(12, 1);
    profile.int(14, tables.string(SAMPLE_TYPES[OFF_CPU]));
    // Last, once every string is in the table.
    for s in &tables.strings {
        profile.bytes(6, s.as_bytes());
    }
    profile.0
}
