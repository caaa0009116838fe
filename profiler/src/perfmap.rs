//! The JIT's perf map (`/tmp/perf-<pid>.map`: `<start hex> <size hex> <name>` per line), read
//! safely: through the target's own root, without following links, and only when the file
//! belongs to the target's user (anyone can write to /tmp).

use std::path::Path;

use anyhow::Result;

use crate::safe_fs::{Expect, Owner, TargetRoot, read_target_file};

/// Perf maps larger than this are not read.
const MAX_PERF_MAP: u64 = 256 << 20;
/// Names longer than this are cut (a method's name is far shorter; a stack of such names
/// must stay a record the reader accepts).
const MAX_NAME: usize = 1024;

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[derive(Debug, Default)]
pub struct PerfMap {
    /// (start, end, name), sorted by start.
    entries: Vec<(u64, u64, String)>,
}

impl PerfMap {
    /// Reads `path` as the target sees it (inside its root), which must be a regular file
    /// owned by `owner`.
    pub fn load(root: &TargetRoot, path: &Path, owner: u32) -> Result<Self> {
        let expect = Expect {
            max_bytes: MAX_PERF_MAP,
            owner: Owner::Is(owner),
        };
        let bytes = read_target_file(root, path, expect)?;
        Ok(Self::parse(&String::from_utf8_lossy(&bytes)))
    }

    /// What tells one version of the file from the next (inode, size, modification time),
    /// read without reading the file: a map that has not changed is not parsed again.
    pub fn stamp(root: &TargetRoot, path: &Path) -> Option<(u64, u64, i64, i64)> {
        use std::os::unix::fs::MetadataExt as _;
        let meta = root.open_file(path).ok()?.metadata().ok()?;
        Some((meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec()))
    }

    pub fn parse(text: &str) -> Self {
        let mut entries: Vec<_> = text
            .lines()
            .filter_map(|line| {
                let mut parts = line.splitn(3, ' ');
                let start = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
                let size = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
                let name = cut(parts.next()?.trim(), MAX_NAME).to_string();
                Some((start, start.checked_add(size)?, name))
            })
            .collect();
        // Later lines describe newer code at a reused address: keep the last one for a start.
        entries.reverse();
        entries.sort_by_key(|e| e.0);
        entries.dedup_by_key(|e| e.0);
        Self { entries }
    }

    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self
            .entries
            .partition_point(|e| e.0 <= addr)
            .checked_sub(1)?;
        let (start, end, name) = &self.entries[i];
        (addr >= *start && addr < *end).then_some(name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_fall_inside_entries() {
        let map = PerfMap::parse(
            "7f0000001000 100 Interpreter\n0x7f0000002000 0x40 LShop;append(I)V\nbad line\n",
        );
        assert_eq!(map.lookup(0x7f0000001000), Some("Interpreter"));
        assert_eq!(map.lookup(0x7f00000010ff), Some("Interpreter"));
        assert_eq!(map.lookup(0x7f0000001100), None);
        assert_eq!(map.lookup(0x7f0000002010), Some("LShop;append(I)V"));
        assert_eq!(map.lookup(0x10), None);
        let long = format!("1000 10 {}\n", "é".repeat(4096));
        let name = PerfMap::parse(&long).lookup(0x1000).unwrap().to_string();
        assert!(
            name.len() <= MAX_NAME && name.starts_with('é'),
            "{}",
            name.len()
        );
    }

    #[test]
    fn links_and_strangers_files_are_refused() {
        let dir = crate::safe_fs::private_temp_dir("pinprof-perfmap").unwrap();
        let real = dir.join("real.map");
        std::fs::write(&real, "1000 10 f\n").unwrap();
        let link = dir.join("link.map");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let me = unsafe { libc::geteuid() };
        let root = TargetRoot::own().unwrap();
        let map = PerfMap::load(&root, &real, me).unwrap();
        assert_eq!(map.lookup(0x1005), Some("f"));
        assert!(
            PerfMap::load(&root, &link, me).is_err(),
            "a symlink must not be followed"
        );
        assert!(
            PerfMap::load(&root, &real, me + 1).is_err(),
            "another user's file is not trusted"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
