//! Just enough of the kernel's BTF (`/sys/kernel/btf/vmlinux`) to find where a field sits in a
//! kernel struct, so the kernel programs can follow a few pointers (a file descriptor to its
//! inode) on this kernel's own layout, not a guessed one.

use std::collections::HashMap;

use anyhow::{Context as _, Result, bail};

const MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;

struct Member {
    name: u32,
    type_id: u32,
    /// In bits (bit-field members are not needed here).
    offset: u32,
}

struct Type {
    name: u32,
    kind: u32,
    members: Vec<Member>,
}

pub struct Btf {
    strings: Vec<u8>,
    /// Index i holds type id i + 1.
    types: Vec<Type>,
    structs: HashMap<String, u32>,
}

impl Btf {
    pub fn from_sys_fs() -> Result<Self> {
        let data = std::fs::read("/sys/kernel/btf/vmlinux")
            .context("cannot read the kernel's BTF (/sys/kernel/btf/vmlinux)")?;
        Self::parse(&data)
    }

    pub fn parse(data: &[u8]) -> Result<Self> {
        let u16_at = |at: usize| -> Result<u16> {
            Ok(u16::from_le_bytes(
                data.get(at..at + 2).context("short BTF")?.try_into()?,
            ))
        };
        let u32_at = |at: usize| -> Result<u32> {
            Ok(u32::from_le_bytes(
                data.get(at..at + 4).context("short BTF")?.try_into()?,
            ))
        };
        if u16_at(0)? != MAGIC {
            bail!("not BTF (or not little-endian)");
        }
        let header = u32_at(4)? as usize;
        let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
        let (str_off, str_len) = (u32_at(16)? as usize, u32_at(20)? as usize);
        let strings = data
            .get(header + str_off..header + str_off + str_len)
            .context("short BTF strings")?
            .to_vec();
        let mut types = Vec::new();
        let mut at = header + type_off;
        let end = at + type_len;
        while at < end {
            let name = u32_at(at)?;
            let info = u32_at(at + 4)?;
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            at += 12;
            let mut members = Vec::new();
            // Each kind's trailing data (see the kernel's Documentation/bpf/btf.rst).
            let extra = match kind {
                1 | 14 | 17 => 4, // int, var, decl_tag
                3 => 12,          // array
                KIND_STRUCT | KIND_UNION => {
                    for i in 0..vlen {
                        let m = at + 12 * i;
                        members.push(Member {
                            name: u32_at(m)?,
                            type_id: u32_at(m + 4)?,
                            offset: u32_at(m + 8)? & 0x00ff_ffff,
                        });
                    }
                    12 * vlen
                }
                6 | 13 => 8 * vlen,   // enum, func_proto
                15 | 19 => 12 * vlen, // datasec, enum64
                _ => 0,
            };
            at += extra;
            types.push(Type {
                name,
                kind,
                members,
            });
        }
        let mut btf = Self {
            strings,
            types,
            structs: HashMap::new(),
        };
        for (i, t) in btf.types.iter().enumerate() {
            if t.kind == KIND_STRUCT && t.name != 0 {
                let name = btf.string(t.name).to_string();
                btf.structs.entry(name).or_insert(i as u32 + 1);
            }
        }
        Ok(btf)
    }

    fn string(&self, offset: u32) -> &str {
        let rest = self.strings.get(offset as usize..).unwrap_or(&[]);
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        std::str::from_utf8(&rest[..end]).unwrap_or("")
    }

    /// Byte offset of `field` in `struct name`, looking inside anonymous unions and structs.
    pub fn offset(&self, name: &str, field: &str) -> Result<u32> {
        let id = *self
            .structs
            .get(name)
            .with_context(|| format!("the kernel's BTF has no struct {name}"))?;
        self.find(id, field)
            .map(|bits| bits / 8)
            .with_context(|| format!("struct {name} has no field {field} in the kernel's BTF"))
    }

    fn find(&self, id: u32, field: &str) -> Option<u32> {
        let t = self.types.get(id.checked_sub(1)? as usize)?;
        for m in &t.members {
            if m.name != 0 {
                if self.string(m.name) == field {
                    return Some(m.offset);
                }
            } else if let Some(inner) = self.find(self.resolve(m.type_id), field) {
                return Some(m.offset + inner);
            }
        }
        None
    }

    /// The id itself when it is a struct or union (anonymous members point at one directly).
    fn resolve(&self, id: u32) -> u32 {
        match self.types.get(id.wrapping_sub(1) as usize) {
            Some(t) if matches!(t.kind, KIND_STRUCT | KIND_UNION) => id,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_file_descriptor_path_in_this_kernel() {
        // pinprof needs BTF (see the README's requirements), so a test machine has it.
        let btf = Btf::from_sys_fs().unwrap();
        for (name, field) in [
            ("task_struct", "files"),
            ("files_struct", "fdt"),
            ("fdtable", "max_fds"),
            ("fdtable", "fd"),
            ("file", "f_inode"),
            ("inode", "i_ino"),
            ("inode", "i_mode"),
        ] {
            btf.offset(name, field).unwrap();
        }
        assert!(btf.offset("inode", "no_such_field").is_err());
        // Where `pid` sits is ABI-stable enough to check: after the scheduler's fields.
        assert!(btf.offset("task_struct", "pid").unwrap() > 0);
    }
}
