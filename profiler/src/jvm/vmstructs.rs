//! HotSpot's own description of its data structures (`gHotSpotVMStructs` and friends), read
//! from the live process. This is what the Serviceability Agent uses: every offset pinprof needs
//! is looked up here by name, so no JDK build's layout is hard-coded.

use std::collections::HashMap;

use anyhow::{Context, Result, bail};

use super::memory::{Libjvm, Memory};

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
];

/// `JVMCIVMStructs::localHotSpotVMStructs`: JDK 21 lists `_held_monitor_count` only here.
const JVMCI_STRUCTS: &str = "_ZN14JVMCIVMStructs21localHotSpotVMStructsE";

/// Tables end at a NULL type name; this bounds a corrupt one.
const MAX_ENTRIES: usize = 20_000;

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
        let mut out = Self::default();
        let sym = |name: &str| -> Result<u64> { mem.u64(jvm.symbol(name)?) };

        let stride = sym("gHotSpotVMStructEntryArrayStride")?;
        let layout = [
            sym("gHotSpotVMStructEntryTypeNameOffset")?,
            sym("gHotSpotVMStructEntryFieldNameOffset")?,
            sym("gHotSpotVMStructEntryTypeStringOffset")?,
            sym("gHotSpotVMStructEntryIsStaticOffset")?,
            sym("gHotSpotVMStructEntryOffsetOffset")?,
            sym("gHotSpotVMStructEntryAddressOffset")?,
        ];
        let table = sym("gHotSpotVMStructs")?;
        out.read_fields(mem, table, stride, layout)
            .context("reading gHotSpotVMStructs")?;
        // Same entry type; its array is a local symbol (the array itself, not a pointer).
        if jvm.has(JVMCI_STRUCTS) {
            let table = jvm.symbol(JVMCI_STRUCTS)?;
            let _ = out.read_fields(mem, table, stride, layout);
        }

        let stride = sym("gHotSpotVMTypeEntryArrayStride")?;
        let (name_at, size_at) = (
            sym("gHotSpotVMTypeEntryTypeNameOffset")?,
            sym("gHotSpotVMTypeEntrySizeOffset")?,
        );
        for_each_entry(
            mem,
            sym("gHotSpotVMTypes")?,
            stride,
            name_at,
            |name, entry| {
                out.type_sizes.insert(name, mem.u64(entry + size_at)?);
                Ok(())
            },
        )?;

        // Int and long constants (the mark word's layout) share the map: their names are
        // distinct. The longs are optional (only compact headers need them): a bad table
        // costs those alone.
        out.read_constants(mem, &sym, "Int", 4)?;
        let _ = out.read_constants(mem, &sym, "Long", 8);
        if out.fields.is_empty() {
            bail!("the JVM's VMStructs table is empty");
        }
        Ok(out)
    }

    /// `gHotSpotVM{kind}Constants`, whose values are `width` bytes, signed.
    fn read_constants(
        &mut self,
        mem: &Memory,
        sym: &impl Fn(&str) -> Result<u64>,
        kind: &str,
        width: u8,
    ) -> Result<()> {
        let table = sym(&format!("gHotSpotVM{kind}Constants"))?;
        let stride = sym(&format!("gHotSpotVM{kind}ConstantEntryArrayStride"))?;
        let name_at = sym(&format!("gHotSpotVM{kind}ConstantEntryNameOffset"))?;
        let value_at = sym(&format!("gHotSpotVM{kind}ConstantEntryValueOffset"))?;
        for_each_entry(mem, table, stride, name_at, |name, entry| {
            let at = entry.wrapping_add(value_at);
            let value = match width {
                4 => mem.u32(at)? as i32 as i64,
                _ => mem.u64(at)? as i64,
            };
            self.int_constants.insert(name, value);
            Ok(())
        })
    }

    fn read_fields(&mut self, mem: &Memory, table: u64, stride: u64, at: [u64; 6]) -> Result<()> {
        for_each_entry(mem, table, stride, at[0], |type_name, entry| {
            let field_name = mem.c_string(mem.u64(entry + at[1])?, 256)?;
            let type_string = match mem.u64(entry + at[2])? {
                0 => String::new(),
                p => mem.c_string(p, 256)?,
            };
            let field = Field {
                type_string,
                is_static: mem.u32(entry + at[3])? != 0,
                offset: mem.u64(entry + at[4])?,
                address: mem.u64(entry + at[5])?,
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

/// Calls `each(name, entry address)` for every entry of a VMStructs-style table: `stride`
/// bytes apart, the name a `char*` at `name_at`, ending at a NULL name.
fn for_each_entry(
    mem: &Memory,
    table: u64,
    stride: u64,
    name_at: u64,
    mut each: impl FnMut(String, u64) -> Result<()>,
) -> Result<()> {
    let mut entry = table;
    for _ in 0..MAX_ENTRIES {
        let name = mem.u64(entry + name_at)?;
        if name == 0 {
            return Ok(());
        }
        each(mem.c_string(name, 256)?, entry)?;
        entry += stride;
    }
    bail!("no end after {MAX_ENTRIES} entries")
}
