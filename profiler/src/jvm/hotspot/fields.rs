//! Instance field offsets of any loaded class, by name, read from the class itself: its
//! `InstanceKlass::_fieldinfo_stream` (UNSIGNED5 records, JDK 21+: name and signature as
//! constant pool indexes, offset, access flags, field flags, then the optional items those
//! flags announce) and its constant pool's symbols. For the JDK classes whose offsets
//! HotSpot keeps no static int for (the `ForkJoinPool` behind virtual threads).

use std::collections::HashMap;

use super::Hotspot;
use crate::jvm::inlining::read_unsigned5;
use crate::jvm::vmstructs::VmStructs;

/// A class's field stream longer than this is garbage (a few hundred bytes for the JDK's).
const MAX_STREAM: u32 = 1 << 16;
/// A class with more declared fields than this is garbage (or generated beyond reason).
const MAX_FIELDS: u32 = 1 << 14;
/// A class hierarchy deeper than this is garbage.
const MAX_SUPERS: usize = 32;
/// Bounds the cache: its keys come from the target.
const MAX_CACHED: usize = 1 << 10;
const ACC_STATIC: u32 = 0x0008;

/// Where a class keeps its fields' descriptions.
#[derive(Clone, Copy, Debug)]
pub(super) struct FieldLayout {
    fieldinfo_stream: u64,
    constants: u64,
    /// The constant pool's entries follow its header.
    pool_size: u64,
    pool_length: u64,
    array_data: u64,
    klass_super: u64,
    /// `FieldInfo::FieldFlags` bits: the three that announce an optional item each, and
    /// every bit this reader knows (a record with another one is not understood).
    optional: [u32; 3],
    known: u32,
}

impl FieldLayout {
    pub(super) fn read(vm: &VmStructs) -> anyhow::Result<Self> {
        let bit = |name: &str| -> anyhow::Result<u32> {
            let v = vm.int_constant(&format!("FieldInfo::FieldFlags::_ff_{name}"))?;
            anyhow::ensure!((0..32).contains(&v), "implausible field flag bit {v}");
            Ok(1 << v)
        };
        let optional = [bit("initialized")?, bit("generic")?, bit("contended")?];
        Ok(Self {
            fieldinfo_stream: vm.offset("InstanceKlass", "_fieldinfo_stream")?,
            constants: vm.offset("InstanceKlass", "_constants")?,
            pool_size: vm.type_size("ConstantPool")?,
            pool_length: vm.offset("ConstantPool", "_length")?,
            array_data: vm.offset("Array<u1>", "_data")?,
            klass_super: vm.offset("Klass", "_super")?,
            known: optional.iter().sum::<u32>() | bit("injected")? | bit("stable")?,
            optional,
        })
    }
}

/// Fields found (or not) by (class, name).
#[derive(Default)]
pub(super) struct FieldCache(HashMap<(u64, &'static str), Option<u64>>);

impl Hotspot {
    /// The offset of the instance field `name` of the class at `klass` or of the nearest
    /// superclass declaring it. None: not found, or the class's description not understood.
    pub(super) fn field_offset(&mut self, klass: u64, name: &'static str) -> Option<u64> {
        if let Some(&found) = self.field_cache.0.get(&(klass, name)) {
            return found;
        }
        let layout = self.fields?;
        let mut k = klass;
        let mut found = None;
        for _ in 0..MAX_SUPERS {
            if k == 0 {
                break;
            }
            if let Some(offset) = self.declared_field(k, name, &layout) {
                found = Some(offset);
                break;
            }
            k = self.mem.u64(k.wrapping_add(layout.klass_super)).ok()?;
        }
        if self.field_cache.0.len() >= MAX_CACHED {
            self.field_cache.0.clear();
        }
        self.field_cache.0.insert((klass, name), found);
        found
    }

    /// A non-static field `name` declared by the class at `klass` itself.
    fn declared_field(&self, klass: u64, name: &str, l: &FieldLayout) -> Option<u64> {
        let stream = self.mem.u64(klass.wrapping_add(l.fieldinfo_stream)).ok()?;
        let pool = self.mem.u64(klass.wrapping_add(l.constants)).ok()?;
        let pool_length = self.mem.u32(pool.wrapping_add(l.pool_length)).ok()?;
        let length = self.mem.u32(stream).ok().filter(|&n| n <= MAX_STREAM)?;
        let mut bytes = vec![0; length as usize];
        self.mem
            .read(stream.wrapping_add(l.array_data), &mut bytes)
            .ok()?;
        let records = FieldRecords::new(&bytes, l)?;
        records
            .filter(|f| f.access & ACC_STATIC == 0)
            .find(|f| {
                u32::from(f.name_index) < pool_length
                    && self
                        .mem
                        .u64(
                            pool.wrapping_add(l.pool_size)
                                .wrapping_add(8 * u64::from(f.name_index)),
                        )
                        .ok()
                        .and_then(|symbol| self.symbol(symbol))
                        .is_some_and(|s| s == name)
            })
            .map(|f| u64::from(f.offset))
    }
}

/// One field as its record says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FieldRecord {
    name_index: u16,
    offset: u32,
    access: u32,
}

/// The declared (not injected) fields of a field stream, in order; ends early at anything
/// not understood.
struct FieldRecords<'a> {
    bytes: &'a [u8],
    pos: usize,
    left: u32,
    layout: &'a FieldLayout,
}

impl<'a> FieldRecords<'a> {
    fn new(bytes: &'a [u8], layout: &'a FieldLayout) -> Option<Self> {
        let mut pos = 0;
        let java_fields = read_unsigned5(bytes, &mut pos).filter(|&n| n <= MAX_FIELDS)?;
        let _injected = read_unsigned5(bytes, &mut pos)?;
        Some(Self {
            bytes,
            pos,
            left: java_fields,
            layout,
        })
    }
}

impl Iterator for FieldRecords<'_> {
    type Item = FieldRecord;

    fn next(&mut self) -> Option<FieldRecord> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let mut next = || read_unsigned5(self.bytes, &mut self.pos);
        let name_index = u16::try_from(next()?).ok()?;
        let _signature = next()?;
        let offset = next()?;
        let access = next()?;
        let flags = next()?;
        if flags & !self.layout.known != 0 {
            self.left = 0;
            return None;
        }
        for bit in self.layout.optional {
            if flags & bit != 0 {
                next()?;
            }
        }
        Some(FieldRecord {
            name_index,
            offset,
            access,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> FieldLayout {
        FieldLayout {
            fieldinfo_stream: 0,
            constants: 0,
            pool_size: 0,
            pool_length: 0,
            array_data: 0,
            klass_super: 0,
            optional: [1, 4, 16],
            known: 31,
        }
    }

    /// UNSIGNED5 of a small value: one byte, the value plus one.
    fn u5(v: u8) -> u8 {
        v + 1
    }

    #[test]
    fn records_skip_the_optional_items_their_flags_announce() {
        // Two fields: one plain, one initialized and generic (two items after its flags),
        // then a third that is static.
        let bytes = [
            u5(3),
            u5(0),
            u5(10),
            u5(11),
            u5(12),
            u5(0x02),
            u5(0),
            u5(20),
            u5(21),
            u5(16),
            u5(0x10),
            u5(1 | 4),
            u5(7),
            u5(8),
            u5(30),
            u5(31),
            u5(24),
            u5(0x08),
            u5(0),
        ];
        let l = layout();
        let got: Vec<FieldRecord> = FieldRecords::new(&bytes, &l).unwrap().collect();
        assert_eq!(
            got,
            [
                FieldRecord {
                    name_index: 10,
                    offset: 12,
                    access: 2
                },
                FieldRecord {
                    name_index: 20,
                    offset: 16,
                    access: 0x10
                },
                FieldRecord {
                    name_index: 30,
                    offset: 24,
                    access: 8
                },
            ]
        );
    }

    #[test]
    fn a_flag_not_understood_or_a_cut_stream_ends_the_records() {
        let l = layout();
        let unknown = [
            u5(2),
            u5(0),
            u5(1),
            u5(2),
            u5(12),
            u5(0),
            u5(32),
            u5(1),
            u5(2),
            u5(16),
            u5(0),
            u5(0),
        ];
        assert_eq!(FieldRecords::new(&unknown, &l).unwrap().count(), 0);
        let cut = [u5(2), u5(0), u5(1), u5(2), u5(12), u5(0), u5(0), u5(3)];
        assert_eq!(FieldRecords::new(&cut, &l).unwrap().count(), 1);
        assert!(FieldRecords::new(&[], &l).is_none());
    }
}
