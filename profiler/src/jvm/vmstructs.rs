//! HotSpot's own description of its data structures (`gHotSpotVMStructs` and friends), read
//! from the live process. This is what the Serviceability Agent uses: every offset pinprof needs
//! is looked up here by name, so no JDK build's layout is hard-coded.

use std::collections::HashMap;

use anyhow::{Context, Result, bail};

use super::memory::{Libjvm, Memory, Read, ReadError};

/// The symbols this module reads; `Libjvm::load` must be asked for them.
pub const SYMBOLS: &[&str] = &[
    "gHotSpotVMStructs",
    "gHotSpotVMStructEntryTypeNameOffset",
    "gHotSpotVMStructEntryFieldNameOffset",
    "gHotSpotVMStructEntryTypeStringOffset",
    "gHotSpotVMStructEntryIsStaticOffset",
    "gHotSpotVMStructEntryOffsetOffset",
    "gHotSpotVMStructEntryAddressOffset",
    "gHotSpotVMStructEntryArrayStride",
    "gHotSpotVMTypes",
    "gHotSpotVMTypeEntryTypeNameOffset",
    "gHotSpotVMTypeEntrySizeOffset",
    "gHotSpotVMTypeEntryArrayStride",
    "gHotSpotVMIntConstants",
    "gHotSpotVMIntConstantEntryNameOffset",
    "gHotSpotVMIntConstantEntryValueOffset",
    "gHotSpotVMIntConstantEntryArrayStride",
    "gHotSpotVMLongConstants",
    "gHotSpotVMLongConstantEntryNameOffset",
    "gHotSpotVMLongConstantEntryValueOffset",
    "gHotSpotVMLongConstantEntryArrayStride",
    // JDK 21 lists a few more JavaThread fields only in the JVMCI copy of the table.
    JVMCI_STRUCTS,
    JVMCI_INTS,
];

/// `JVMCIVMStructs::localHotSpotVMStructs`: JDK 21 lists `_held_monitor_count` only here.
const JVMCI_STRUCTS: &str = "_ZN14JVMCIVMStructs21localHotSpotVMStructsE";
/// `JVMCIVMStructs::localHotSpotVMIntConstants`: `ConstMethodFlags::_misc_is_hidden` is only
/// here.
const JVMCI_INTS: &str = "_ZN14JVMCIVMStructs26localHotSpotVMIntConstantsE";

/// Tables end at a NULL type name; this bounds a corrupt one.
const MAX_ENTRIES: usize = 20_000;
/// Entries are a few words (48 bytes for a field in JDK 21 and 25).
const MAX_STRIDE: u64 = 1024;

#[derive(Clone, Debug)]
pub struct Field {
    pub type_string: String,
    pub is_static: bool,
    /// Offset in the type, for instance fields.
    pub offset: u64,
    /// Address, for static fields.
    pub address: u64,
}

#[derive(Default)]
pub struct VmStructs {
    fields: HashMap<(String, String), Field>,
    type_sizes: HashMap<String, u64>,
    int_constants: HashMap<String, i64>,
}

impl VmStructs {
    pub fn read(mem: &Memory, jvm: &Libjvm) -> Result<Self> {
        let jvmci = jvm
            .has(JVMCI_STRUCTS)
            .then(|| jvm.symbol(JVMCI_STRUCTS))
            .transpose()?;
        let mut out = Self::read_with(mem, &|name| jvm.symbol(name), jvmci)?;
        // Same entry type; the array itself, not a pointer. Its names add to the main table's.
        if let Ok(table) = jvm.symbol(JVMCI_INTS) {
            let sym = |name: &str| -> Result<u64> { Ok(mem.u64(jvm.symbol(name)?)?) };
            let _ = out.read_constants(mem, &sym, "Int", 4, Some(table));
        }
        Ok(out)
    }

    /// Reads the tables given where libjvm's symbols are (`symbol`), and the JVMCI table's
    /// address if it has one.
    fn read_with(
        mem: &impl Target,
        symbol: &dyn Fn(&str) -> Result<u64>,
        jvmci: Option<u64>,
    ) -> Result<Self> {
        let mut out = Self::default();
        let sym = |name: &str| -> Result<u64> { Ok(mem.u64(symbol(name)?)?) };

        let stride = sym("gHotSpotVMStructEntryArrayStride")?;
        let layout = [
            sym("gHotSpotVMStructEntryTypeNameOffset")?,
            sym("gHotSpotVMStructEntryFieldNameOffset")?,
            sym("gHotSpotVMStructEntryTypeStringOffset")?,
            sym("gHotSpotVMStructEntryIsStaticOffset")?,
            sym("gHotSpotVMStructEntryOffsetOffset")?,
            sym("gHotSpotVMStructEntryAddressOffset")?,
        ];
        // Every field inside the entry: a layout read from the target is checked like data.
        let widths = [8, 8, 8, 4, 8, 8];
        if !layout
            .iter()
            .zip(widths)
            .all(|(&at, w)| fits(at, w, stride))
        {
            bail!("implausible gHotSpotVMStructs entry layout (stride {stride})");
        }
        let table = sym("gHotSpotVMStructs")?;
        out.read_fields(mem, table, stride, layout)
            .context("reading gHotSpotVMStructs")?;
        // Same entry type; its array is a local symbol (the array itself, not a pointer).
        if let Some(table) = jvmci {
            let _ = out.read_fields(mem, table, stride, layout);
        }

        let stride = sym("gHotSpotVMTypeEntryArrayStride")?;
        let (name_at, size_at) = (
            sym("gHotSpotVMTypeEntryTypeNameOffset")?,
            sym("gHotSpotVMTypeEntrySizeOffset")?,
        );
        if !fits(name_at, 8, stride) || !fits(size_at, 8, stride) {
            bail!("implausible gHotSpotVMTypes entry layout (stride {stride})");
        }
        for_each_entry(
            mem,
            sym("gHotSpotVMTypes")?,
            stride,
            name_at,
            |name, entry| {
                out.type_sizes
                    .insert(name, mem.u64(entry.wrapping_add(size_at))?);
                Ok(())
            },
        )?;

        // Int and long constants (the mark word's layout) share the map: their names are
        // distinct. The longs are optional (only compact headers need them): a bad table
        // costs those alone.
        out.read_constants(mem, &sym, "Int", 4, None)?;
        let _ = out.read_constants(mem, &sym, "Long", 8, None);
        if out.fields.is_empty() {
            bail!("the JVM's VMStructs table is empty");
        }
        Ok(out)
    }

    /// `gHotSpotVM{kind}Constants`, whose values are `width` bytes, signed.
    fn read_constants(
        &mut self,
        mem: &impl Target,
        sym: &impl Fn(&str) -> Result<u64>,
        kind: &str,
        width: u8,
        table: Option<u64>,
    ) -> Result<()> {
        let table = match table {
            Some(t) => t,
            None => sym(&format!("gHotSpotVM{kind}Constants"))?,
        };
        let stride = sym(&format!("gHotSpotVM{kind}ConstantEntryArrayStride"))?;
        let name_at = sym(&format!("gHotSpotVM{kind}ConstantEntryNameOffset"))?;
        let value_at = sym(&format!("gHotSpotVM{kind}ConstantEntryValueOffset"))?;
        if !fits(name_at, 8, stride) || !fits(value_at, width.into(), stride) {
            bail!("implausible gHotSpotVM{kind}Constants entry layout (stride {stride})");
        }
        for_each_entry(mem, table, stride, name_at, |name, entry| {
            let at = entry.wrapping_add(value_at);
            let value = match width {
                4 => mem.u32(at)? as i32 as i64,
                _ => mem.u64(at)? as i64,
            };
            self.int_constants.entry(name).or_insert(value);
            Ok(())
        })
    }

    fn read_fields(
        &mut self,
        mem: &impl Target,
        table: u64,
        stride: u64,
        at: [u64; 6],
    ) -> Result<()> {
        for_each_entry(mem, table, stride, at[0], |type_name, entry| {
            let field_name = mem.c_string(mem.u64(entry.wrapping_add(at[1]))?, 256)?;
            let type_string = match mem.u64(entry.wrapping_add(at[2]))? {
                0 => String::new(),
                p => mem.c_string(p, 256)?,
            };
            let field = Field {
                type_string,
                is_static: mem.u32(entry.wrapping_add(at[3]))? != 0,
                offset: mem.u64(entry.wrapping_add(at[4]))?,
                address: mem.u64(entry.wrapping_add(at[5]))?,
            };
            self.fields.entry((type_name, field_name)).or_insert(field);
            Ok(())
        })
    }

    pub fn field(&self, ty: &str, name: &str) -> Option<&Field> {
        self.fields.get(&(ty.to_string(), name.to_string()))
    }

    /// Offset of an instance field.
    pub fn offset(&self, ty: &str, name: &str) -> Result<u64> {
        match self.field(ty, name) {
            Some(f) if !f.is_static => Ok(f.offset),
            Some(_) => bail!("{ty}::{name} is static"),
            None => bail!("the JVM does not describe {ty}::{name}"),
        }
    }

    /// Address of a static field.
    pub fn address(&self, ty: &str, name: &str) -> Result<u64> {
        match self.field(ty, name) {
            Some(f) if f.is_static => Ok(f.address),
            Some(_) => bail!("{ty}::{name} is not static"),
            None => bail!("the JVM does not describe {ty}::{name}"),
        }
    }

    pub fn type_size(&self, ty: &str) -> Result<u64> {
        self.type_sizes
            .get(ty)
            .copied()
            .with_context(|| format!("the JVM does not describe type {ty}"))
    }

    pub fn int_constant(&self, name: &str) -> Result<i64> {
        self.int_constants
            .get(name)
            .copied()
            .with_context(|| format!("the JVM does not describe constant {name}"))
    }

    /// Every integer constant, for `pinprof` debugging output.
    pub fn int_constants(&self) -> impl Iterator<Item = (&String, &i64)> {
        self.int_constants.iter()
    }

    /// Every field, for `pinprof` debugging output.
    pub fn fields(&self) -> impl Iterator<Item = (&(String, String), &Field)> {
        self.fields.iter()
    }
}

/// The live JVM `pid`'s VMStructs fields and integer constants whose type or name contains
/// `filter`, a line each, sorted (the hidden `vmstructs` command, for finding fields).
pub fn dump(pid: u32, filter: &str) -> Result<String> {
    let process = crate::process::Process::attach(pid)?;
    let mem = Memory::open(&process)?;
    let lib = Libjvm::load(&process, SYMBOLS)?;
    let vm = VmStructs::read(&mem, &lib)?;
    let mut lines: Vec<String> = vm
        .fields()
        .filter(|((t, n), _)| t.contains(filter) || n.contains(filter))
        .map(|((t, n), f)| {
            format!(
                "{t}::{n} {} static={} off={} addr={:#x}",
                f.type_string, f.is_static, f.offset, f.address
            )
        })
        .collect();
    lines.extend(
        vm.int_constants()
            .filter(|(name, _)| name.contains(filter))
            .map(|(name, value)| format!("constant {name} = {value}")),
    );
    lines.sort();
    Ok(lines.join("\n") + "\n")
}

#[cfg(test)]
impl VmStructs {
    /// A description made of the given fields and type sizes.
    pub(super) fn for_test(fields: &[(&str, &str, Field)], sizes: &[(&str, u64)]) -> Self {
        Self {
            fields: fields
                .iter()
                .map(|(ty, name, f)| ((ty.to_string(), name.to_string()), f.clone()))
                .collect(),
            type_sizes: sizes.iter().map(|&(t, s)| (t.to_string(), s)).collect(),
            int_constants: HashMap::new(),
        }
    }

    /// `for_test` with integer constants.
    pub(super) fn for_test_with_constants(
        fields: &[(&str, &str, Field)],
        constants: &[(&str, i64)],
    ) -> Self {
        let mut out = Self::for_test(fields, &[]);
        out.int_constants = constants.iter().map(|&(n, v)| (n.to_string(), v)).collect();
        out
    }
}

/// Calls `each(name, entry address)` for every entry of a VMStructs-style table: `stride`
/// bytes apart, the name a `char*` at `name_at`, ending at a NULL name.
fn for_each_entry(
    mem: &impl Target,
    table: u64,
    stride: u64,
    name_at: u64,
    mut each: impl FnMut(String, u64) -> Result<()>,
) -> Result<()> {
    if !fits(name_at, 8, stride) {
        bail!("implausible table entry layout (stride {stride}, name at {name_at})");
    }
    let mut entry = table;
    for _ in 0..MAX_ENTRIES {
        if entry.checked_add(stride).is_none() {
            bail!("table at {table:#x} runs past the end of memory");
        }
        let name = mem.u64(entry.wrapping_add(name_at))?;
        if name == 0 {
            return Ok(());
        }
        each(mem.c_string(name, 256)?, entry)?;
        entry += stride;
    }
    bail!("no end after {MAX_ENTRIES} entries")
}

/// Whether a field of `width` bytes at `offset` lies inside a table entry of `stride` bytes
/// (and the stride is one a real entry could have).
fn fits(offset: u64, width: u64, stride: u64) -> bool {
    (8..=MAX_STRIDE).contains(&stride) && offset.checked_add(width).is_some_and(|end| end <= stride)
}

/// What the readers of the target need of its memory: `Memory`, or bytes in a test.
pub trait Target {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Read<()>;

    fn u64(&self, addr: u64) -> Read<u64> {
        let mut b = [0; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    fn u32(&self, addr: u64) -> Read<u32> {
        let mut b = [0; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_ne_bytes(b))
    }

    fn u16(&self, addr: u64) -> Read<u16> {
        let mut b = [0; 2];
        self.read(addr, &mut b)?;
        Ok(u16::from_ne_bytes(b))
    }

    /// A NUL-terminated string of at most `max` bytes.
    fn c_string(&self, addr: u64, max: usize) -> Read<String> {
        let mut out = Vec::new();
        while out.len() < max {
            let mut one = [0u8];
            self.read(addr.wrapping_add(out.len() as u64), &mut one)?;
            if one[0] == 0 {
                return Ok(String::from_utf8_lossy(&out).into_owned());
            }
            out.push(one[0]);
        }
        Err(ReadError::TooLong { addr, max })
    }

    /// The text of a HotSpot `Symbol` (a u2 length, then the bytes): see `read_symbol`.
    fn symbol(&self, symbol: u64, length_at: u64, body_at: u64) -> Option<String> {
        read_symbol(self, symbol, length_at, body_at)
    }
}

/// The text of a HotSpot `Symbol` (a u2 length, then the bytes), every name the JVM's
/// metadata gives (classes, methods, fields): at most `budget::MAX_NAME` bytes of it are read,
/// a longer one cut there (a class file allows 65,535; a stack of such names would cost
/// pinprof that much per frame).
pub fn read_symbol(
    mem: &(impl Target + ?Sized),
    symbol: u64,
    length_at: u64,
    body_at: u64,
) -> Option<String> {
    let len = usize::from(mem.u16(symbol.wrapping_add(length_at)).ok()?);
    let cut = len > crate::budget::MAX_NAME;
    let mut body = vec![0; len.min(crate::budget::MAX_NAME)];
    mem.read(symbol.wrapping_add(body_at), &mut body).ok()?;
    if !cut {
        // Not UTF-8 (modified UTF-8 of a NUL or a supplementary character aside): not a
        // symbol, or not one read whole.
        return String::from_utf8(body).ok();
    }
    Some(crate::budget::name_from_bytes(body, true))
}

impl Target for Memory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Read<()> {
        Memory::read(self, addr, buf)
    }

    fn c_string(&self, addr: u64, max: usize) -> Read<String> {
        Memory::c_string(self, addr, max)
    }
}

/// Target memory made of bytes put at chosen addresses, for tests; the rest is unmapped.
#[cfg(test)]
pub(super) mod fake {
    use std::collections::HashMap;

    #[derive(Default)]
    pub struct FakeMemory {
        bytes: HashMap<u64, u8>,
    }

    impl FakeMemory {
        pub fn put(&mut self, addr: u64, bytes: &[u8]) -> &mut Self {
            for (i, &b) in bytes.iter().enumerate() {
                self.bytes.insert(addr.wrapping_add(i as u64), b);
            }
            self
        }

        pub fn put_u64(&mut self, addr: u64, value: u64) -> &mut Self {
            self.put(addr, &value.to_ne_bytes())
        }

        pub fn put_u32(&mut self, addr: u64, value: u32) -> &mut Self {
            self.put(addr, &value.to_ne_bytes())
        }

        /// A NUL-terminated string.
        pub fn put_str(&mut self, addr: u64, text: &str) -> &mut Self {
            self.put(addr, text.as_bytes());
            self.put(addr.wrapping_add(text.len() as u64), &[0])
        }
    }

    impl super::Target for FakeMemory {
        fn read(&self, addr: u64, buf: &mut [u8]) -> super::Read<()> {
            let unreadable = super::ReadError::Unreadable {
                addr,
                len: buf.len(),
            };
            for (i, b) in buf.iter_mut().enumerate() {
                let at = addr.wrapping_add(i as u64);
                *b = *self.bytes.get(&at).ok_or(unreadable)?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{fake::FakeMemory, *};

    const SYMBOLS_AT: u64 = 0x1000;
    const STRUCTS: u64 = 0x10_000;
    const TYPES: u64 = 0x20_000;
    const INTS: u64 = 0x30_000;
    const LONGS: u64 = 0x40_000;
    const STRINGS: u64 = 0x50_000;

    /// libjvm's tables as JDK 21 and 25 lay them out: one field, one type, one int constant.
    struct Jvm {
        mem: FakeMemory,
        symbols: HashMap<String, u64>,
        strings: u64,
    }

    impl Jvm {
        fn new() -> Self {
            let mut jvm = Self {
                mem: FakeMemory::default(),
                symbols: HashMap::new(),
                strings: STRINGS,
            };
            for (name, value) in [
                ("gHotSpotVMStructs", STRUCTS),
                ("gHotSpotVMStructEntryTypeNameOffset", 0),
                ("gHotSpotVMStructEntryFieldNameOffset", 8),
                ("gHotSpotVMStructEntryTypeStringOffset", 16),
                ("gHotSpotVMStructEntryIsStaticOffset", 24),
                ("gHotSpotVMStructEntryOffsetOffset", 32),
                ("gHotSpotVMStructEntryAddressOffset", 40),
                ("gHotSpotVMStructEntryArrayStride", 48),
                ("gHotSpotVMTypes", TYPES),
                ("gHotSpotVMTypeEntryTypeNameOffset", 0),
                ("gHotSpotVMTypeEntrySizeOffset", 8),
                ("gHotSpotVMTypeEntryArrayStride", 16),
                ("gHotSpotVMIntConstants", INTS),
                ("gHotSpotVMIntConstantEntryNameOffset", 0),
                ("gHotSpotVMIntConstantEntryValueOffset", 8),
                ("gHotSpotVMIntConstantEntryArrayStride", 16),
                ("gHotSpotVMLongConstants", LONGS),
                ("gHotSpotVMLongConstantEntryNameOffset", 0),
                ("gHotSpotVMLongConstantEntryValueOffset", 8),
                ("gHotSpotVMLongConstantEntryArrayStride", 16),
            ] {
                jvm.set(name, value);
            }
            let (ty, field, ty_string) = (
                jvm.string("JavaThread"),
                jvm.string("_anchor"),
                jvm.string("JavaFrameAnchor"),
            );
            jvm.mem
                .put_u64(STRUCTS, ty)
                .put_u64(STRUCTS + 8, field)
                .put_u64(STRUCTS + 16, ty_string)
                .put_u32(STRUCTS + 24, 0)
                .put_u64(STRUCTS + 32, 0x1a0)
                .put_u64(STRUCTS + 40, 0)
                .put_u64(STRUCTS + 48, 0);
            let size_name = jvm.string("JavaThread");
            jvm.mem
                .put_u64(TYPES, size_name)
                .put_u64(TYPES + 8, 1184)
                .put_u64(TYPES + 16, 0);
            let constant = jvm.string("_thread_blocked");
            jvm.mem
                .put_u64(INTS, constant)
                .put_u32(INTS + 8, -1i32 as u32)
                .put_u64(INTS + 16, 0)
                .put_u64(LONGS, 0);
            jvm
        }

        /// The value of a libjvm variable.
        fn set(&mut self, name: &str, value: u64) {
            let next = SYMBOLS_AT + 8 * self.symbols.len() as u64;
            let at = *self.symbols.entry(name.into()).or_insert(next);
            self.mem.put_u64(at, value);
        }

        fn string(&mut self, text: &str) -> u64 {
            let at = self.strings;
            self.mem.put_str(at, text);
            self.strings += text.len() as u64 + 1;
            at
        }

        fn read(&self) -> Result<VmStructs> {
            let symbol = |name: &str| self.symbols.get(name).copied().context("no such symbol");
            VmStructs::read_with(&self.mem, &symbol, None)
        }
    }

    #[test]
    fn reads_the_tables() {
        let vm = Jvm::new().read().unwrap();
        assert_eq!(vm.offset("JavaThread", "_anchor").unwrap(), 0x1a0);
        assert_eq!(
            vm.field("JavaThread", "_anchor").unwrap().type_string,
            "JavaFrameAnchor"
        );
        assert_eq!(vm.type_size("JavaThread").unwrap(), 1184);
        assert_eq!(vm.int_constant("_thread_blocked").unwrap(), -1);
    }

    #[test]
    fn hostile_layouts_are_errors_not_panics() {
        for (name, value) in [
            ("gHotSpotVMStructEntryArrayStride", 0),
            ("gHotSpotVMStructEntryArrayStride", u64::MAX),
            ("gHotSpotVMStructEntryIsStaticOffset", u64::MAX - 2),
            ("gHotSpotVMStructEntryAddressOffset", 48),
            ("gHotSpotVMStructs", u64::MAX - 16),
            ("gHotSpotVMTypeEntrySizeOffset", u64::MAX),
            ("gHotSpotVMTypeEntryArrayStride", 1 << 40),
            ("gHotSpotVMTypes", u64::MAX),
            ("gHotSpotVMIntConstantEntryValueOffset", 13),
            ("gHotSpotVMIntConstants", u64::MAX - 7),
        ] {
            let mut jvm = Jvm::new();
            jvm.set(name, value);
            assert!(jvm.read().is_err(), "{name} = {value:#x}");
        }
        // A bad long-constant table costs the long constants alone.
        let mut jvm = Jvm::new();
        jvm.set("gHotSpotVMLongConstants", u64::MAX - 3);
        assert!(jvm.read().is_ok());
    }

    #[test]
    fn a_table_without_an_end_is_an_error() {
        // Every entry names the same type: the table never reaches its NULL.
        let mut jvm = Jvm::new();
        let name = jvm.string("T");
        jvm.set("gHotSpotVMTypeEntryArrayStride", 8);
        jvm.set("gHotSpotVMTypeEntrySizeOffset", 0);
        for i in 0..=MAX_ENTRIES as u64 {
            jvm.mem.put_u64(TYPES + 8 * i, name);
        }
        assert!(jvm.read().is_err());
    }
}
