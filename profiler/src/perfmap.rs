//! The JIT's perf map (`/tmp/perf-<pid>.map`: `<start hex> <size hex> <name>` per line), read
//! safely: through the target's own root, without following links, and only when the file
//! belongs to the target's user (anyone can write to /tmp).

use std::{fs::File, io::Read as _, os::unix::fs::MetadataExt as _, path::Path};

use anyhow::{Context as _, Result, bail};

#[derive(Debug, Default)]
pub struct PerfMap {
    /// (start, end, name), sorted by start.
    entries: Vec<(u64, u64, String)>,
}

impl PerfMap {
    /// Reads `path`, which must be a regular file owned by `owner`.
    pub fn load(path: &Path, owner: u32) -> Result<Self> {
        let file = open_no_follow(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            bail!("{} is not a regular file", path.display());
        }
        if meta.uid() != owner {
            bail!(
                "{} belongs to uid {}, not to the target's uid {owner}",
                path.display(),
                meta.uid()
            );
        }
        let mut text = String::new();
        file.take(256 << 20).read_to_string(&mut text)?;
        Ok(Self::parse(&text))
    }

    pub fn parse(text: &str) -> Self {
        let mut entries: Vec<_> = text
            .lines()
            .filter_map(|line| {
                let mut parts = line.splitn(3, ' ');
                let start = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
                let size = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
                let name = parts.next()?.trim().to_string();
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

fn open_no_follow(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))
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
    }

    #[test]
    fn links_and_strangers_files_are_refused() {
        let dir = std::env::temp_dir().join(format!("pinprof-perfmap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let real = dir.join("real.map");
        std::fs::write(&real, "1000 10 f\n").unwrap();
        let link = dir.join("link.map");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let me = unsafe { libc::geteuid() };
        assert_eq!(PerfMap::load(&real, me).unwrap().lookup(0x1005), Some("f"));
        assert!(
            PerfMap::load(&link, me).is_err(),
            "a symlink must not be followed"
        );
        assert!(
            PerfMap::load(&real, me + 1).is_err(),
            "another user's file is not trusted"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
