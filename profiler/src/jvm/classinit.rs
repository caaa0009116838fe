//! Classes whose static initializer is running now, found by walking the JVM's loaded classes
//! (`ClassLoaderDataGraph`): what a thread waiting for another thread's class initialization
//! waits for. HotSpot makes such a thread wait on the class's init lock (an `int[]` its
//! `java.lang.Class` object holds while the class is being initialized) in JDK 21 and 25, and
//! `InstanceKlass::_init_thread` names the thread running the initializer.

use anyhow::{Result, bail};

use super::vmstructs::{Target, VmStructs};

/// Class loaders past this many are a graph being rewritten, or garbage.
const MAX_LOADERS: usize = 100_000;
/// Classes visited in one walk, over all loaders (a large application loads some 50k).
const MAX_CLASSES: usize = 200_000;
/// Classes being initialized at once that one walk reports.
const MAX_FOUND: usize = 1024;

/// Where HotSpot keeps what the walk reads (from VMStructs; `init_lock` from libjvm's
/// `java_lang_Class::_init_lock_offset`).
#[derive(Clone, Copy, Debug)]
pub struct ClassLayout {
    /// Address of `ClassLoaderDataGraph::_head`.
    head: u64,
    loader_next: u64,
    loader_klasses: u64,
    next_link: u64,
    layout_helper: u64,
    java_mirror: u64,
    init_state: u64,
    init_thread: u64,
    /// `InstanceKlass::being_initialized`.
    being_initialized: u8,
    /// The span of a `Klass` read at once: from `layout_helper` to past the last field read.
    span: (u64, u64),
}

impl ClassLayout {
    /// `init_lock` is checked by the caller (an offset into a `java.lang.Class` object).
    pub fn read(vm: &VmStructs) -> Result<Self> {
        let offset = |ty: &str, name: &str| -> Result<u64> {
            let offset = vm.offset(ty, name)?;
            if offset >= 1 << 12 {
                bail!("implausible offset {ty}::{name} = {offset:#x}");
            }
            Ok(offset)
        };
        let being_initialized = vm.int_constant("InstanceKlass::being_initialized")?;
        let Ok(being_initialized) = u8::try_from(being_initialized) else {
            bail!("implausible InstanceKlass::being_initialized = {being_initialized}");
        };
        let mut layout = Self {
            head: vm.address("ClassLoaderDataGraph", "_head")?,
            loader_next: offset("ClassLoaderData", "_next")?,
            loader_klasses: offset("ClassLoaderData", "_klasses")?,
            next_link: offset("Klass", "_next_link")?,
            layout_helper: offset("Klass", "_layout_helper")?,
            java_mirror: offset("Klass", "_java_mirror")?,
            init_state: offset("InstanceKlass", "_init_state")?,
            init_thread: offset("InstanceKlass", "_init_thread")?,
            being_initialized,
            span: (0, 0),
        };
        let fields = [
            (layout.next_link, 8),
            (layout.layout_helper, 4),
            (layout.java_mirror, 8),
            (layout.init_state, 1),
            (layout.init_thread, 8),
        ];
        // (Each offset below 4096: no sum overflows.)
        layout.span = fields.iter().fold((u64::MAX, 0), |(lo, hi), &(at, len)| {
            (lo.min(at), hi.max(at + len))
        });
        Ok(layout)
    }
}

/// A class being initialized when the walk passed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BeingInitialized {
    pub klass: u64,
    /// The `JavaThread*` running its static initializer.
    pub init_thread: u64,
    /// Address of its `OopHandle` to its `java.lang.Class` object.
    pub mirror_handle: u64,
}

/// Every instance class in state `being_initialized` now. A racy read of a live graph: a
/// class loaded or unloaded meanwhile may be missed, and the result is checked by the caller
/// (the class's init lock must be the object a thread waits on).
pub fn being_initialized(mem: &impl Target, layout: &ClassLayout) -> Vec<BeingInitialized> {
    let mut found = Vec::new();
    let Ok(mut loader) = mem.u64(layout.head) else {
        return found;
    };
    let (low, high) = layout.span;
    let mut span = vec![0u8; (high - low) as usize];
    let at = |field: u64| (field - low) as usize;
    let word = |bytes: &[u8], field: u64| {
        let i = at(field);
        u64::from_ne_bytes(bytes[i..i + 8].try_into().expect("8 bytes"))
    };
    let mut visited = 0;
    for _ in 0..MAX_LOADERS {
        if loader == 0 {
            break;
        }
        let mut klass = mem
            .u64(loader.wrapping_add(layout.loader_klasses))
            .unwrap_or(0);
        while klass != 0 && visited < MAX_CLASSES && found.len() < MAX_FOUND {
            visited += 1;
            if mem.read(klass.wrapping_add(low), &mut span).is_err() {
                // A small Klass (an array class) at the end of a mapping: its link alone.
                klass = mem.u64(klass.wrapping_add(layout.next_link)).unwrap_or(0);
                continue;
            }
            let i = at(layout.layout_helper);
            let helper = i32::from_ne_bytes(span[i..i + 4].try_into().expect("4 bytes"));
            // Positive layout helpers are instance classes; arrays have negative ones.
            if helper > 0 && span[at(layout.init_state)] == layout.being_initialized {
                found.push(BeingInitialized {
                    klass,
                    init_thread: word(&span, layout.init_thread),
                    mirror_handle: klass.wrapping_add(layout.java_mirror),
                });
            }
            klass = word(&span, layout.next_link);
        }
        if visited >= MAX_CLASSES || found.len() >= MAX_FOUND {
            break;
        }
        loader = mem
            .u64(loader.wrapping_add(layout.loader_next))
            .unwrap_or(0);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jvm::vmstructs::{Field, fake::FakeMemory};

    const HEAD: u64 = 0x1000;

    fn layout() -> ClassLayout {
        let field = |offset| Field {
            type_string: String::new(),
            is_static: false,
            offset,
            address: 0,
        };
        let mut head = field(0);
        head.is_static = true;
        head.address = HEAD;
        let vm = VmStructs::for_test_with_constants(
            &[
                ("ClassLoaderDataGraph", "_head", head),
                ("ClassLoaderData", "_next", field(112)),
                ("ClassLoaderData", "_klasses", field(56)),
                ("Klass", "_next_link", field(144)),
                ("Klass", "_layout_helper", field(8)),
                ("Klass", "_java_mirror", field(112)),
                ("InstanceKlass", "_init_state", field(305)),
                ("InstanceKlass", "_init_thread", field(312)),
            ],
            &[("InstanceKlass::being_initialized", 3)],
        );
        ClassLayout::read(&vm).unwrap()
    }

    /// A class at `at`: its layout helper, state, initializing thread and next class.
    fn class(mem: &mut FakeMemory, at: u64, helper: i32, state: u8, thread: u64, next: u64) {
        mem.put(at, &[0; 320])
            .put(at + 8, &helper.to_ne_bytes())
            .put(at + 305, &[state])
            .put_u64(at + 312, thread)
            .put_u64(at + 144, next);
    }

    #[test]
    fn classes_being_initialized_are_found_in_every_loader() {
        let mut mem = FakeMemory::default();
        // Two loaders: the first with a loaded class and one being initialized, the second
        // with an array class (whose bytes where the state would be say 3) and another.
        mem.put_u64(HEAD, 0x2000)
            .put_u64(0x2000 + 56, 0x10_000)
            .put_u64(0x2000 + 112, 0x3000)
            .put_u64(0x3000 + 56, 0x12_000)
            .put_u64(0x3000 + 112, 0);
        class(&mut mem, 0x10_000, 16, 4, 0, 0x11_000);
        class(&mut mem, 0x11_000, 24, 3, 0x7777, 0);
        class(&mut mem, 0x12_000, -0x7fff_0000, 3, 0x8888, 0x13_000);
        class(&mut mem, 0x13_000, 16, 3, 0x9999, 0);
        let found = being_initialized(&mem, &layout());
        assert_eq!(
            found,
            vec![
                BeingInitialized {
                    klass: 0x11_000,
                    init_thread: 0x7777,
                    mirror_handle: 0x11_000 + 112
                },
                BeingInitialized {
                    klass: 0x13_000,
                    init_thread: 0x9999,
                    mirror_handle: 0x13_000 + 112
                },
            ]
        );
    }

    #[test]
    fn hostile_graphs_end() {
        // A class linked to itself, a loader linked to itself, and unreadable pointers.
        let mut mem = FakeMemory::default();
        mem.put_u64(HEAD, 0x2000)
            .put_u64(0x2000 + 56, 0x10_000)
            .put_u64(0x2000 + 112, 0x2000);
        class(&mut mem, 0x10_000, 16, 3, 0x7777, 0x10_000);
        let found = being_initialized(&mem, &layout());
        assert_eq!(found.len(), MAX_FOUND);

        let mut mem = FakeMemory::default();
        mem.put_u64(HEAD, 0x2000)
            .put_u64(0x2000 + 56, 0xdead_0000)
            .put_u64(0x2000 + 112, 0x2000);
        assert!(being_initialized(&mem, &layout()).is_empty());
        assert!(being_initialized(&FakeMemory::default(), &layout()).is_empty());
    }
}
