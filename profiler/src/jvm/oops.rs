//! How the target stores a reference to an object (an oop) in a field or an `OopHandle` slot,
//! and the address it holds.

use profiler_ebpf::{ZGC_REMAP_SHIFT, uncolor_oop};

use super::vmstructs::Target;

/// How oop fields are stored in this JVM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OopEncoding {
    /// Compressed oops: 32 bits, the address `base + (narrow << shift)`.
    Narrow { base: u64, shift: u32 },
    /// Full-width addresses; `colored` with generational ZGC, whose pointers carry their GC
    /// state in their low bits (in fields and in `OopHandle` slots alike).
    Full { colored: bool },
}

impl OopEncoding {
    /// The encoding of a JVM whose flags say this (compressed oops: their base and shift).
    pub fn of(compressed: Option<(u64, u32)>, generational_zgc: bool) -> Self {
        match compressed {
            Some((base, shift)) => Self::Narrow { base, shift },
            None => Self::Full {
                colored: generational_zgc,
            },
        }
    }

    /// The oop field at `at` (None: null or unreadable).
    pub fn field(&self, mem: &impl Target, at: u64) -> Option<u64> {
        let raw = match self {
            Self::Narrow { .. } => u64::from(mem.u32(at).ok()?),
            Self::Full { .. } => mem.u64(at).ok()?,
        };
        self.decode(raw)
    }

    /// Bytes an oop field (an array element) takes.
    pub fn width(&self) -> usize {
        match self {
            Self::Narrow { .. } => 4,
            Self::Full { .. } => 8,
        }
    }

    /// The oop stored in `bytes`, a field `width()` long (None: null, or not that long).
    pub fn from_bytes(&self, bytes: &[u8]) -> Option<u64> {
        let raw = match self {
            Self::Narrow { .. } => u64::from(u32::from_ne_bytes(bytes.try_into().ok()?)),
            Self::Full { .. } => u64::from_ne_bytes(bytes.try_into().ok()?),
        };
        self.decode(raw)
    }

    /// The address a stored oop (`raw`, as wide as the field) holds (None: null).
    fn decode(&self, raw: u64) -> Option<u64> {
        let oop = match *self {
            Self::Narrow { .. } if raw == 0 => return None,
            Self::Narrow { base, shift } => base.wrapping_add(raw << shift),
            Self::Full { .. } => self.full(raw),
        };
        (oop != 0).then_some(oop)
    }

    /// The object an `OopHandle` at `at` refers to: its slot (native memory) holds a
    /// full-width oop, compressed oops or not.
    pub fn handle(&self, mem: &impl Target, at: u64) -> Option<u64> {
        let slot = mem.u64(at).ok().filter(|&p| p != 0)?;
        Some(self.full(mem.u64(slot).ok()?)).filter(|&p| p != 0)
    }

    /// The address a full-width oop holds.
    fn full(&self, raw: u64) -> u64 {
        uncolor_oop(raw, self.colored_for_kernel())
    }

    /// What the kernel programs are told (`JvmLayout::colored_oops`).
    pub fn colored_for_kernel(&self) -> u32 {
        match self {
            Self::Full { colored: true } => ZGC_REMAP_SHIFT,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{super::vmstructs::fake::FakeMemory, *};

    #[test]
    fn handles_and_fields_give_the_address_in_each_encoding() {
        let object = 0x0000_0401_0000_1000_u64;
        // Generational ZGC: the slot holds the address past a remap bit (here the second).
        let colored = (object << (ZGC_REMAP_SHIFT + 2)) | (1 << (ZGC_REMAP_SHIFT + 1)) | 0x30;
        let mut mem = FakeMemory::default();
        mem.put_u64(0x100, 0x200)
            .put_u64(0x200, colored)
            .put_u64(0x300, colored)
            .put_u32(0x400, 0x20)
            .put_u64(0x500, 0);
        let zgc = OopEncoding::of(None, true);
        assert_eq!(zgc.handle(&mem, 0x100), Some(object));
        assert_eq!(zgc.field(&mem, 0x300), Some(object));
        assert_eq!(zgc.field(&mem, 0x500), None);
        let plain = OopEncoding::of(None, false);
        assert_eq!(plain.field(&mem, 0x300), Some(colored));
        let narrow = OopEncoding::of(Some((0x8_0000_0000, 3)), false);
        assert_eq!(narrow.field(&mem, 0x400), Some(0x8_0000_0100));
        // A handle's slot is full width even with compressed oops.
        assert_eq!(narrow.handle(&mem, 0x100), Some(colored));
        assert_eq!(zgc.from_bytes(&colored.to_ne_bytes()), Some(object));
        assert_eq!(
            narrow.from_bytes(&0x20u32.to_ne_bytes()),
            Some(0x8_0000_0100)
        );
        assert_eq!(narrow.from_bytes(&0u32.to_ne_bytes()), None);
        assert_eq!(zgc.colored_for_kernel(), ZGC_REMAP_SHIFT);
        assert_eq!(narrow.colored_for_kernel(), 0);
    }
}
