//! The methods the JIT inlined into a compiled frame, read from its nmethod's debug
//! information as HotSpot's own stack walks do (`nmethod::pc_desc_at`, `ScopeDesc`): the
//! `PcDesc` of the frame's return address points into the scopes data, whose records chain
//! from the innermost inlined method out to the nmethod's own method.
//!
//! JDK 21 keeps the debug information inside the code blob; JDK 25 moved it to separate
//! immutable (PcDescs, scopes) and mutable (metadata) blocks. Both are found through VMStructs.

use anyhow::Result;

use crate::budget::Bounded;

use super::{
    vmstructs::{Target, VmStructs},
    walk::StackBytes,
};

/// Where an nmethod keeps its debug information.
enum Place {
    /// JDK 21: everything in the blob; offsets from the nmethod, two absolute pointers.
    InBlob {
        code_begin: u64,
        pcs_begin: u64,
        pcs_end: u64,
        scopes_begin: u64,
        metadata: u64,
        deopt_handler: u64,
        deopt_mh_handler: Option<u64>,
    },
    /// JDK 25: code from an offset; PcDescs and scopes in the immutable block, metadata after
    /// the relocations in the mutable block.
    Split {
        code_offset: u64,
        immutable: u64,
        immutable_size: u64,
        pcs_offset: u64,
        scopes_offset: u64,
        mutable: u64,
        mutable_size: u64,
        relocation_size: u64,
        deopt_handler_offset: u64,
        deopt_mh_handler_offset: Option<u64>,
    },
}

struct Layout {
    place: Place,
    pc_desc_size: u64,
    pc_offset: u64,
    scope_offset: u64,
    orig_pc_offset: u64,
    compile_id: u64,
}

/// One nmethod's debug information, as the lookups need it.
#[derive(Clone)]
struct Tables {
    code_begin: u64,
    pcs: (u64, u64),
    scopes: (u64, u64),
    metadata: (u64, u64),
    /// Where frames being deoptimized return to (the method-handle one may be absent).
    deopt_handlers: [Option<u64>; 2],
}

/// A method running in a compiled frame (`Method*`) and the bytecode it is at.
pub type Scope = (u64, i32);

/// Bounds against reading garbage from a stale or racing nmethod.
const MAX_PC_DESCS: u64 = 1 << 20;
const MAX_SCOPES: usize = 64;
/// What the caches may hold until `set_budget` says (their keys come from the target).
const DEFAULT_CACHE_BYTES: u64 = 4 << 20;

pub struct Inlining {
    layout: Layout,
    /// Debug information by (nmethod, compile id): a recompiled method at the same address
    /// has another id.
    tables: Bounded<(u64, u32), Tables>,
    /// Scope chains by (nmethod, compile id, pc): methods innermost first, or None.
    chains: Chains,
    /// Each nmethod's compile id as read in a pass: (id, pass) (see `Walker::new_pass`).
    ids: Bounded<u64, (u32, u64)>,
}

fn chain_bytes(_: &(u64, u32, u64), chain: &Option<Vec<Scope>>) -> u64 {
    chain.as_ref().map_or(0, |c| {
        (c.capacity() * std::mem::size_of::<Scope>()) as u64 + 16
    })
}

fn no_heap<K, V>(_: &K, _: &V) -> u64 {
    0
}

type Chains = Bounded<(u64, u32, u64), Option<Vec<Scope>>>;

/// The caches, empty, within `bytes` in all: a third for the tables, the rest for chains.
fn caches(bytes: u64) -> (Bounded<(u64, u32), Tables>, Chains) {
    (
        Bounded::new(bytes / 3, no_heap, None),
        Bounded::new(bytes - bytes / 3, chain_bytes, None),
    )
}

impl Inlining {
    pub fn new(vm: &VmStructs) -> Result<Self> {
        let f = |t: &str, n: &str| vm.offset(t, n);
        let place = if let Ok(immutable) = f("nmethod", "_immutable_data") {
            Place::Split {
                code_offset: f("CodeBlob", "_code_offset")?,
                immutable,
                immutable_size: f("nmethod", "_immutable_data_size")?,
                pcs_offset: f("nmethod", "_scopes_pcs_offset")?,
                scopes_offset: f("nmethod", "_scopes_data_offset")?,
                mutable: f("CodeBlob", "_mutable_data")?,
                mutable_size: f("CodeBlob", "_mutable_data_size")?,
                relocation_size: f("CodeBlob", "_relocation_size")?,
                deopt_handler_offset: f("nmethod", "_deopt_handler_offset")?,
                deopt_mh_handler_offset: f("nmethod", "_deopt_mh_handler_offset").ok(),
            }
        } else {
            Place::InBlob {
                code_begin: f("CodeBlob", "_code_begin")?,
                pcs_begin: f("nmethod", "_scopes_pcs_offset")?,
                pcs_end: f("nmethod", "_dependencies_offset")?,
                scopes_begin: f("CompiledMethod", "_scopes_data_begin")?,
                metadata: f("nmethod", "_metadata_offset")?,
                deopt_handler: f("CompiledMethod", "_deopt_handler_begin")?,
                deopt_mh_handler: f("CompiledMethod", "_deopt_mh_handler_begin").ok(),
            }
        };
        let (tables, chains) = caches(DEFAULT_CACHE_BYTES);
        Ok(Self {
            layout: Layout {
                place,
                pc_desc_size: vm.type_size("PcDesc")?,
                pc_offset: f("PcDesc", "_pc_offset")?,
                scope_offset: f("PcDesc", "_scope_decode_offset")?,
                orig_pc_offset: f("nmethod", "_orig_pc_offset")?,
                compile_id: f("nmethod", "_compile_id")?,
            },
            tables,
            chains,
            ids: Bounded::new(DEFAULT_CACHE_BYTES / 16, no_heap, None),
        })
    }

    /// Keeps the caches within `bytes` in all.
    pub fn set_budget(&mut self, bytes: u64) {
        self.tables.set_max_bytes(bytes / 3);
        self.chains.set_max_bytes(bytes - bytes / 3 - bytes / 16);
        self.ids.set_max_bytes(bytes / 16);
    }

    /// The methods running at `pc` in the frame of nmethod `nm` whose stack pointer is `sp`,
    /// with their bytecode index, innermost first, ending with the nmethod's own method. None
    /// when the nmethod has no debug information for that pc (native wrappers, a pc not at a
    /// call).
    pub fn scopes(
        &mut self,
        mem: &impl Target,
        stack: &StackBytes,
        nm: u64,
        sp: u64,
        pc: u64,
        pass: u64,
    ) -> Option<Vec<Scope>> {
        // Read once a pass, as the blob is checked (see `Walker::blob`).
        let compile_id = match self.ids.get(&nm) {
            Some(&(id, seen)) if seen == pass => id,
            _ => {
                let id = mem.u32(nm.wrapping_add(self.layout.compile_id)).ok()?;
                self.ids.insert(nm, (id, pass));
                id
            }
        };
        // A failed read (an nmethod caught half-installed) is tried again next time.
        let tables = match self.tables.get(&(nm, compile_id)) {
            Some(known) => known.clone(),
            None => {
                let read = self.read_tables(mem, nm)?;
                self.tables.insert((nm, compile_id), read.clone());
                read
            }
        };
        // A frame being deoptimized returns into a deopt handler; the pc it had is saved in
        // the frame (so it is looked up, and cached, by that pc). JVMCI's second deopt entry
        // is not recognised: C1 and C2 do not use it.
        let pc = if tables.deopt_handlers.contains(&Some(pc)) {
            let offset = mem.u32(nm.wrapping_add(self.layout.orig_pc_offset)).ok()?;
            stack.word(sp.wrapping_add(offset as u64))?
        } else {
            pc
        };
        let key = (nm, compile_id, pc);
        if let Some(known) = self.chains.get(&key) {
            return known.clone();
        }
        let chain = u32::try_from(pc.checked_sub(tables.code_begin)?)
            .ok()
            .and_then(|offset| self.find_pc_desc(mem, &tables, offset))
            .and_then(|scope| decode_chain(mem, &tables, scope));
        self.chains.insert(key, chain.clone());
        chain
    }

    fn read_tables(&self, mem: &impl Target, nm: u64) -> Option<Tables> {
        let int = |offset: u64| {
            mem.u32(nm.wrapping_add(offset))
                .ok()
                .map(|v| v as i32 as i64 as u64)
        };
        let ptr = |offset: u64| mem.u64(nm.wrapping_add(offset)).ok();
        Some(match self.layout.place {
            Place::InBlob {
                code_begin,
                pcs_begin,
                pcs_end,
                scopes_begin,
                metadata,
                deopt_handler,
                deopt_mh_handler,
            } => {
                let pcs = (
                    nm.wrapping_add(int(pcs_begin)?),
                    nm.wrapping_add(int(pcs_end)?),
                );
                let scopes_begin = ptr(scopes_begin)?;
                Tables {
                    code_begin: ptr(code_begin)?,
                    pcs,
                    // Scopes end where the PcDescs begin; metadata ends where scopes begin.
                    scopes: (scopes_begin, pcs.0),
                    metadata: (nm.wrapping_add(int(metadata)?), scopes_begin),
                    deopt_handlers: [ptr(deopt_handler), deopt_mh_handler.and_then(ptr)],
                }
            }
            Place::Split {
                code_offset,
                immutable,
                immutable_size,
                pcs_offset,
                scopes_offset,
                mutable,
                mutable_size,
                relocation_size,
                deopt_handler_offset,
                deopt_mh_handler_offset,
            } => {
                let imm = ptr(immutable)?;
                let scopes_begin = imm.wrapping_add(int(scopes_offset)?);
                let mutable = ptr(mutable)?;
                Tables {
                    code_begin: nm.wrapping_add(int(code_offset)?),
                    pcs: (imm.wrapping_add(int(pcs_offset)?), scopes_begin),
                    // The true ends are not exported; the blocks' sizes bound them.
                    scopes: (scopes_begin, imm.wrapping_add(int(immutable_size)?)),
                    metadata: (
                        mutable.wrapping_add(int(relocation_size)?),
                        mutable.wrapping_add(int(mutable_size)?),
                    ),
                    deopt_handlers: [
                        int(deopt_handler_offset).map(|o| nm.wrapping_add(o)),
                        deopt_mh_handler_offset
                            .and_then(int)
                            .map(|o| nm.wrapping_add(o)),
                    ],
                }
            }
        })
    }

    /// The scope offset of the PcDesc at exactly `pc_offset` (return addresses are recorded
    /// exactly; the array is sorted, with sentinels at both ends): a binary search that reads
    /// one PcDesc per step.
    fn find_pc_desc(&self, mem: &impl Target, tables: &Tables, pc_offset: u32) -> Option<u32> {
        let (begin, end) = tables.pcs;
        let size = self.layout.pc_desc_size;
        let count = end.checked_sub(begin)? / size.max(1);
        if size < 8 || count == 0 || count > MAX_PC_DESCS {
            return None;
        }
        let field = |i: u64, offset: u64| {
            let at = begin
                .wrapping_add(i.wrapping_mul(size))
                .wrapping_add(offset);
            mem.u32(at).ok().map(|v| v as i32)
        };
        // PcDescs hold i32 offsets: a larger one is in no nmethod (nor a sentinel's -1).
        let pc_offset = i32::try_from(pc_offset).ok()?;
        let (mut lo, mut hi) = (0, count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match field(mid, self.layout.pc_offset)?.cmp(&pc_offset) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    let scope = field(mid, self.layout.scope_offset)?;
                    return u32::try_from(scope).ok().filter(|&s| s != 0);
                }
            }
        }
        None
    }
}

/// Follows the scope records from `offset`: each is (sender offset, metadata index, bci + 1)
/// in UNSIGNED5; the chain ends at sender offset 0. Offsets strictly decrease (callers are
/// written first), which also bounds a walk through garbage.
fn decode_chain(mem: &impl Target, tables: &Tables, mut offset: u32) -> Option<Vec<Scope>> {
    let (scopes, scopes_end) = tables.scopes;
    let (metadata, metadata_end) = tables.metadata;
    let mut methods = Vec::new();
    let mut previous = u32::MAX;
    while offset != 0 {
        if offset >= previous || methods.len() >= MAX_SCOPES {
            return None;
        }
        let at = scopes.checked_add(offset as u64)?;
        // Three UNSIGNED5 ints of at most 5 bytes each.
        let mut record = [0u8; 15];
        let len = scopes_end.checked_sub(at)?.min(record.len() as u64) as usize;
        mem.read(at, &mut record[..len]).ok()?;
        let mut pos = 0;
        let sender = read_unsigned5(&record[..len], &mut pos)?;
        let index = read_unsigned5(&record[..len], &mut pos)? as u64;
        // Stored plus one (`InvocationEntryBci` is -1).
        let bci = (read_unsigned5(&record[..len], &mut pos)? as i32).wrapping_sub(1);
        // Index 0 is null; the array is biased by one.
        let slot = metadata.checked_add(index.checked_sub(1)?.checked_mul(8)?)?;
        if slot.checked_add(8)? > metadata_end {
            return None;
        }
        methods.push((mem.u64(slot).ok().filter(|&m| m != 0)?, bci));
        previous = offset;
        offset = sender;
    }
    (!methods.is_empty()).then_some(methods)
}

/// HotSpot's `UNSIGNED5` (`CompressedReadStream::read_int`, JDK 20+): bytes 1..=191 end a
/// value, 192..=255 carry 6 more bits each, at most 5 bytes; 0 never occurs.
pub(super) fn read_unsigned5(bytes: &[u8], pos: &mut usize) -> Option<u32> {
    const X: u32 = 1;
    const L: u32 = 191;
    const LG_H: u32 = 6;
    let mut sum = 0u32;
    for i in 0..5 {
        let b = *bytes.get(*pos + i)? as u32;
        if b < X {
            return None;
        }
        sum = sum.wrapping_add((b - X) << (LG_H * i as u32));
        if b < X + L || i == 4 {
            *pos += i + 1;
            return Some(sum);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{super::vmstructs::fake::FakeMemory, *};

    const SCOPES: u64 = 0x1000;
    const METADATA: u64 = 0x2000;
    const PCS: u64 = 0x3000;

    fn tables() -> Tables {
        Tables {
            code_begin: 0x10_000,
            pcs: (PCS, PCS + 3 * 16),
            scopes: (SCOPES, SCOPES + 0x100),
            metadata: (METADATA, METADATA + 3 * 8),
            deopt_handlers: [None, None],
        }
    }

    /// Method* 0xa1, 0xa2, 0xa3 at metadata indexes 1, 2, 3; scope records at offsets 10
    /// (index 1, the outermost) and 20 (index 2, inlined into it); three PcDescs (the first a
    /// sentinel) of 16 bytes: pc offset, then scope offset.
    fn memory() -> FakeMemory {
        let mut mem = FakeMemory::default();
        mem.put(SCOPES, &[0; 0x100])
            .put_u64(METADATA, 0xa1)
            .put_u64(METADATA + 8, 0xa2)
            .put_u64(METADATA + 16, 0xa3)
            // (sender offset, metadata index, bci + 1), each + 1 in UNSIGNED5
            .put(SCOPES + 10, &[0x01, 0x02, 0x01])
            .put(SCOPES + 20, &[0x0b, 0x03, 0x06]);
        for (i, (pc, scope)) in [(-1i32, 0u32), (0x40, 20), (0x80, 10)].iter().enumerate() {
            let at = PCS + 16 * i as u64;
            mem.put_u32(at, *pc as u32)
                .put_u32(at + 4, *scope)
                .put_u64(at + 8, 0);
        }
        mem
    }

    fn inlining(pc_desc_size: u64) -> Inlining {
        let (tables, chains) = caches(DEFAULT_CACHE_BYTES);
        Inlining {
            layout: Layout {
                place: Place::InBlob {
                    code_begin: 0,
                    pcs_begin: 8,
                    pcs_end: 12,
                    scopes_begin: 16,
                    metadata: 24,
                    deopt_handler: 32,
                    deopt_mh_handler: None,
                },
                pc_desc_size,
                pc_offset: 0,
                scope_offset: 4,
                orig_pc_offset: 40,
                compile_id: 44,
            },
            tables,
            chains,
            ids: Bounded::new(DEFAULT_CACHE_BYTES / 16, no_heap, None),
        }
    }

    #[test]
    fn scope_chains_decode_innermost_first() {
        let mem = memory();
        // With their bcis: stored plus one, then plus one again in UNSIGNED5.
        assert_eq!(
            decode_chain(&mem, &tables(), 20),
            Some(vec![(0xa2, 4), (0xa1, -1)])
        );
        assert_eq!(decode_chain(&mem, &tables(), 10), Some(vec![(0xa1, -1)]));
    }

    #[test]
    fn hostile_scope_chains_end() {
        let mut mem = memory();
        // A record naming itself, or a later one (that ends well), as its sender.
        mem.put(SCOPES + 30, &[0x1f, 0x02, 0x01])
            .put(SCOPES + 40, &[0x2e, 0x02, 0x01])
            .put(SCOPES + 45, &[0x01, 0x02, 0x01]);
        assert_eq!(decode_chain(&mem, &tables(), 30), None);
        assert_eq!(decode_chain(&mem, &tables(), 40), None);
        // Metadata index 0 (null), and indexes past the array or past u32 arithmetic.
        mem.put(SCOPES + 50, &[0x01, 0x01, 0x01])
            .put(SCOPES + 60, &[0x01, 0x05, 0x01])
            .put(SCOPES + 70, &[0x01, 0xc0, 0xfe, 0xfd, 0xfd, 0xfd, 0x01]);
        for offset in [50, 60, 70] {
            assert_eq!(decode_chain(&mem, &tables(), offset), None, "{offset}");
        }
        // Offsets past the scopes or past the address space.
        assert_eq!(decode_chain(&mem, &tables(), 0x100), None);
        assert_eq!(decode_chain(&mem, &tables(), u32::MAX), None);
        let mut high = tables();
        high.scopes = (u64::MAX - 4, u64::MAX);
        high.metadata = (u64::MAX - 8, 0);
        assert_eq!(decode_chain(&mem, &high, 20), None);
        // A chain of the longest length allowed is read; one longer is not. Records of two
        // bytes, each the sender of the next (its bci is the next record's first byte).
        let mut deep = memory();
        for i in 1..=MAX_SCOPES as u8 + 1 {
            deep.put(SCOPES + 2 * u64::from(i), &[1 + 2 * (i - 1), 0x02]);
        }
        deep.put(SCOPES + 2 * (MAX_SCOPES as u64 + 2), &[0x01]);
        let longest = decode_chain(&deep, &tables(), 2 * MAX_SCOPES as u32);
        assert_eq!(longest.map(|c| c.len()), Some(MAX_SCOPES));
        assert_eq!(
            decode_chain(&deep, &tables(), 2 * (MAX_SCOPES as u32 + 1)),
            None
        );
    }

    #[test]
    fn pc_descs_are_found_by_exact_offset() {
        let (mem, inlining) = (memory(), inlining(16));
        assert_eq!(inlining.find_pc_desc(&mem, &tables(), 0x40), Some(20));
        assert_eq!(inlining.find_pc_desc(&mem, &tables(), 0x80), Some(10));
        assert_eq!(inlining.find_pc_desc(&mem, &tables(), 0x50), None);
        // Beyond i32: not the sentinel's -1.
        assert_eq!(inlining.find_pc_desc(&mem, &tables(), u32::MAX), None);
    }

    #[test]
    fn hostile_pc_desc_tables_end() {
        let mem = memory();
        for size in [0, 1, 7, u64::MAX] {
            assert_eq!(inlining(size).find_pc_desc(&mem, &tables(), 0x40), None);
        }
        let inlining = inlining(16);
        for pcs in [
            (PCS + 16, PCS),
            (PCS, PCS + 16 * (MAX_PC_DESCS + 1)),
            (u64::MAX - 8, u64::MAX),
            (u64::MAX - 40, u64::MAX),
            (0, u64::MAX),
        ] {
            let t = Tables { pcs, ..tables() };
            assert_eq!(inlining.find_pc_desc(&mem, &t, 0x40), None, "{pcs:x?}");
        }
    }

    #[test]
    fn garbage_nmethods_are_no_scopes() {
        let mut mem = FakeMemory::default();
        // Every field of the nmethod all ones, near the top of the address space.
        let nm = u64::MAX - 63;
        mem.put(nm, &[0xff; 64]);
        let stack = StackBytes::new(0x7000, &[0xff; 64]);
        let mut inlining = inlining(u64::MAX);
        for pc in [0, u64::MAX, nm] {
            assert_eq!(inlining.scopes(&mem, &stack, nm, 0x7000, pc, 1), None);
        }
    }

    #[test]
    fn unsigned5_reads_hotspots_encoding() {
        // Encodings as HotSpot's UNSIGNED5::write_uint writes them.
        for (bytes, value) in [
            (&[0x01][..], 0u32),
            (&[0xbf], 190),
            (&[0xc0, 0x01], 191),
            (&[0xc0, 0x02], 255),
            (&[0xc1, 0xc7, 0xf2, 0x01], 1_000_000),
            (&[0xc0, 0xfe, 0xfd, 0xfd, 0xfd], u32::MAX),
        ] {
            let mut pos = 0;
            assert_eq!(read_unsigned5(bytes, &mut pos), Some(value), "{bytes:x?}");
            assert_eq!(pos, bytes.len());
        }
        // A scope record: sender 41, metadata index 4, bci + 1 = 2.
        let record = [0x2a, 0x05, 0x03];
        let mut pos = 0;
        assert_eq!(read_unsigned5(&record, &mut pos), Some(41));
        assert_eq!(read_unsigned5(&record, &mut pos), Some(4));
        assert_eq!(read_unsigned5(&record, &mut pos), Some(2));
        // Zero bytes and cut values are not data.
        assert_eq!(read_unsigned5(&[0x00], &mut 0), None);
        assert_eq!(read_unsigned5(&[0xc0], &mut 0), None);
    }
}
