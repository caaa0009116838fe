//! The CPU limit of the cgroup a process runs in, and how often the kernel throttled it.
//!
//! With a CPU quota (`cpu.max` on cgroup v2, `cpu.cfs_quota_us` / `cpu.cfs_period_us` on v1)
//! the kernel stops every thread of the cgroup for the rest of a period once the quota is
//! used: carriers then stall with work to do. `cpu.stat` counts it: the periods
//! (`nr_periods`), those in which the cgroup was throttled (`nr_throttled`) and the time it
//! spent throttled (`throttled_usec` on v2, `throttled_time` in ns on v1).
//!
//! The CPU controller may be on either hierarchy: v2 (the `0::` line of /proc/PID/cgroup,
//! where the cgroup's `cpu.stat` has `nr_throttled` when the controller is enabled there) or
//! v1 (the line whose controllers include `cpu`). A cgroup path is found under the mount of
//! its hierarchy whose root contains it (a mount of a sub-tree, as in a container, maps
//! only what is under its root). The cgroup that limits a process is its own or, when its
//! own has no quota, the nearest ancestor that has one: that is where the kernel counts the
//! throttling.
//!
//! The paths come from the kernel, but a delegated cgroup is named by whoever made it: no
//! `..`, no symlink on the way, regular files of the kernel's, capped; anything unexpected
//! is an error (never a guess).

use std::{
    fs::File,
    path::{Component, Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};

use crate::safe_fs::{Expect, Fs, Owner, TargetRoot, check_file, read_capped};

/// Largest cgroup file read (`cpu.stat` is a dozen lines).
const MAX_CGROUP_FILE: u64 = 4096;
/// Largest /proc/PID/cgroup read (a line per v1 hierarchy).
const MAX_PROC_CGROUP: u64 = 64 << 10;
/// Largest /proc/self/mountinfo read (a host with thousands of mounts).
const MAX_MOUNTINFO: u64 = 8 << 20;
/// Ancestors looked at for a quota (cgroup trees are a few levels deep).
const MAX_DEPTH: usize = 64;

/// The cumulative throttling counters of a cgroup's `cpu.stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStat {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

/// A cgroup of the CPU controller, found under its hierarchy's mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuCgroup {
    /// 1 or 2.
    pub version: u8,
    /// As /proc/PID/cgroup names it (`/kubepods/pod1/c2`).
    pub path: String,
    /// Its directory, as pinprof sees it.
    pub dir: PathBuf,
}

impl CpuCgroup {
    /// The cgroup of the CPU controller that `process` runs in (v2 if the controller is
    /// there, else v1's), None when it has none or runs in the root cgroup (no quota).
    pub fn of(process: &crate::process::Process) -> Result<Option<Self>> {
        let cgroups = proc_cgroup(process)?;
        let mounts = read_kernel_file(Path::new("/proc/self/mountinfo"), MAX_MOUNTINFO)?;
        if let Some(path) = v2_path(&cgroups)
            && let Some(dir) = locate(&mounts, Hierarchy::V2, &path)?
        {
            let cgroup = Self {
                version: 2,
                path,
                dir,
            };
            // The controller is there when the cgroup's cpu.stat counts throttling.
            if cgroup.path != "/" && cgroup.cpu_stat().is_ok() {
                return Ok(Some(cgroup));
            }
        }
        let Some(path) = v1_cpu_path(&cgroups) else {
            return Ok(None);
        };
        if path == "/" {
            return Ok(None);
        }
        let dir = locate(&mounts, Hierarchy::V1Cpu, &path)?.with_context(|| {
            format!("the cpu cgroup {path} is under no cgroup mount pinprof sees")
        })?;
        Ok(Some(Self {
            version: 1,
            path,
            dir,
        }))
    }

    /// The cgroup whose quota limits this one: itself when it has a quota, else its nearest
    /// ancestor that has one (below the root), else itself.
    pub fn limiting(self) -> Self {
        if !self.unlimited() {
            return self;
        }
        let mut path = self.path.clone();
        let mut dir = self.dir.clone();
        for _ in 0..MAX_DEPTH {
            let (Some(parent_path), Some(parent_dir)) = (parent(&path), dir.parent()) else {
                break;
            };
            if parent_path == "/" {
                break;
            }
            let up = Self {
                version: self.version,
                path: parent_path.to_string(),
                dir: parent_dir.to_path_buf(),
            };
            if !up.unlimited() {
                return up;
            }
            path = up.path;
            dir = up.dir;
        }
        self
    }

    fn unlimited(&self) -> bool {
        self.cpu_max().map_or(true, |m| m.starts_with("max"))
    }

    /// The quota as `cpu.max` says it: `<quota> <period>` in µs, or `max <period>`.
    pub fn cpu_max(&self) -> Result<String> {
        match self.version {
            2 => {
                let text = self.read("cpu.max")?;
                let text = text.trim();
                let mut fields = text.split_whitespace();
                let quota = fields.next().unwrap_or("");
                let period = fields.next().unwrap_or("");
                if (quota != "max" && quota.parse::<u64>().is_err())
                    || period.parse::<u64>().is_err()
                    || fields.next().is_some()
                {
                    bail!("unexpected cpu.max of cgroup {}: {text:?}", self.path);
                }
                Ok(text.to_string())
            }
            _ => {
                let quota = self.read("cpu.cfs_quota_us")?;
                let period = self.read("cpu.cfs_period_us")?;
                v1_cpu_max(&quota, &period).with_context(|| {
                    format!(
                        "unexpected cpu.cfs_quota_us {quota:?} or cpu.cfs_period_us {period:?} \
                         of cgroup {}",
                        self.path
                    )
                })
            }
        }
    }

    /// The throttling counters now.
    pub fn cpu_stat(&self) -> Result<CpuStat> {
        let text = self.read("cpu.stat")?;
        parse_cpu_stat(&text, self.version).with_context(|| {
            format!(
                "cpu.stat of cgroup {} counts no throttling (no cpu controller there?)",
                self.path
            )
        })
    }

    /// One snapshot of the limit and the counters, read at `time_ns`.
    pub fn snapshot(&self, time_ns: u64) -> Result<crate::events::CgroupCpu> {
        let stat = self.cpu_stat()?;
        Ok(crate::events::CgroupCpu {
            time_ns,
            path: self.path.clone(),
            version: self.version,
            cpu_max: self.cpu_max().ok(),
            nr_periods: stat.nr_periods,
            nr_throttled: stat.nr_throttled,
            throttled_ns: stat.throttled_ns,
        })
    }

    fn read(&self, name: &str) -> Result<String> {
        let path = self.dir.join(name);
        let file =
            open_no_symlinks(&path).with_context(|| format!("cannot open {}", path.display()))?;
        let expect = Expect {
            max_bytes: MAX_CGROUP_FILE,
            owner: Owner::Anyone,
        };
        check_file(&file, &path, expect)?;
        let bytes = read_capped(&file, &path, MAX_CGROUP_FILE)?;
        String::from_utf8(bytes).with_context(|| format!("{} is not text", path.display()))
    }
}

/// The parent of a cgroup path (`/a/b` -> `/a`, `/a` -> `/`), None for the root.
fn parent(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    let cut = path.rfind('/')?;
    Some(if cut == 0 { "/" } else { &path[..cut] })
}

/// The cgroup v2 path of `process` (the `0::` line of /proc/PID/cgroup), whatever
/// controllers it has.
pub fn v2_path_of(process: &crate::process::Process) -> Option<String> {
    v2_path(&proc_cgroup(process).ok()?)
}

/// `/proc/PID/cgroup` of the process attached to (and of no later holder of its pid).
fn proc_cgroup(process: &crate::process::Process) -> Result<String> {
    let bytes = process
        .read("cgroup", MAX_PROC_CGROUP)
        .with_context(|| format!("cannot read /proc/{process}/cgroup"))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The `cpu.max` of the cgroup v2 `path` (`max 100000`, `50000 100000`); an error when the
/// hierarchy has no CPU controller there.
pub fn v2_cpu_max(path: &str) -> Result<String> {
    let mounts = read_kernel_file(Path::new("/proc/self/mountinfo"), MAX_MOUNTINFO)?;
    let dir = locate(&mounts, Hierarchy::V2, path)?.context("no cgroup v2 hierarchy is mounted")?;
    CpuCgroup {
        version: 2,
        path: path.to_string(),
        dir,
    }
    .cpu_max()
}

/// The cgroup v2 path in a /proc/PID/cgroup text (its `0::` line).
pub fn v2_path(text: &str) -> Option<String> {
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    path.starts_with('/').then(|| path.to_string())
}

/// The path of the v1 hierarchy that has the `cpu` controller (`4:cpu,cpuacct:/a`).
pub fn v1_cpu_path(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let _id = fields.next()?;
        let controllers = fields.next()?;
        let path = fields.next()?.trim();
        (controllers.split(',').any(|c| c == "cpu") && path.starts_with('/'))
            .then(|| path.to_string())
    })
}

/// Which hierarchy a cgroup path is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    V2,
    /// The v1 hierarchy of the `cpu` controller.
    V1Cpu,
}

/// The directory of cgroup `path` of `hierarchy`, from a /proc/self/mountinfo text: under
/// the mount whose root holds it (the deepest such root), None when none does. A path with
/// `..` or anything but plain names is an error (a cgroup outside pinprof's cgroup
/// namespace reads as `/../..`).
pub fn locate(mountinfo: &str, hierarchy: Hierarchy, path: &str) -> Result<Option<PathBuf>> {
    let relative = plain(path)?;
    let mut best: Option<(usize, PathBuf)> = None;
    for line in mountinfo.lines() {
        // `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER`
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mut right = right.split_whitespace();
        let fstype = right.next().unwrap_or("");
        let options = right.nth(1).unwrap_or("");
        let wanted = match hierarchy {
            Hierarchy::V2 => fstype == "cgroup2",
            Hierarchy::V1Cpu => fstype == "cgroup" && options.split(',').any(|o| o == "cpu"),
        };
        if !wanted {
            continue;
        }
        let mut fields = left.split_whitespace();
        let (Some(root), Some(mount_point)) = (fields.nth(3), fields.next()) else {
            continue;
        };
        let (Ok(root), Some(mount_point)) = (plain(&unescape(root)), unescape_path(mount_point))
        else {
            continue;
        };
        let Ok(rest) = relative.strip_prefix(&root) else {
            continue;
        };
        let depth = root.components().count();
        if best.as_ref().is_none_or(|(d, _)| depth > *d) {
            best = Some((depth, mount_point.join(rest)));
        }
    }
    Ok(best.map(|(_, dir)| dir))
}

/// A cgroup path as a relative path of plain names (`/a/b` -> `a/b`, `/` -> ``).
fn plain(path: &str) -> Result<PathBuf> {
    let Some(relative) = path.strip_prefix('/') else {
        bail!("unexpected cgroup path {path:?}");
    };
    if relative.is_empty() {
        return Ok(PathBuf::new());
    }
    if relative
        .split('/')
        .any(|name| matches!(name, "" | "." | "..") || name.contains('\0'))
    {
        bail!("unexpected cgroup path {path:?}");
    }
    Ok(PathBuf::from(relative))
}

/// A mountinfo field with its octal escapes (`\040` for a space) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(code) = bytes.get(i + 1..i + 4)
            && code.iter().all(|b| (b'0'..=b'7').contains(b))
        {
            let value = code.iter().fold(0u32, |v, b| v * 8 + u32::from(b - b'0'));
            if let Ok(byte) = u8::try_from(value) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A mount point as a path: absolute, with no `..`.
fn unescape_path(field: &str) -> Option<PathBuf> {
    let path = PathBuf::from(unescape(field));
    (path.is_absolute() && !path.components().any(|c| c == Component::ParentDir)).then_some(path)
}

/// `cpu.max` as v1 says it in two files: `max <period>` when the quota is -1.
pub fn v1_cpu_max(quota: &str, period: &str) -> Option<String> {
    let period: u64 = period.trim().parse().ok()?;
    match quota.trim() {
        "-1" => Some(format!("max {period}")),
        quota => Some(format!("{} {period}", quota.parse::<u64>().ok()?)),
    }
}

/// The throttling counters of a `cpu.stat` text of cgroup `version`; None when it has none
/// (a v2 cgroup without the cpu controller counts only usage).
pub fn parse_cpu_stat(text: &str, version: u8) -> Option<CpuStat> {
    let mut periods = None;
    let mut throttled = None;
    let mut time_ns = None;
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (Some(key), Some(value), None) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let Ok(value) = value.parse::<u64>() else {
            continue;
        };
        match (key, version) {
            ("nr_periods", _) => periods = Some(value),
            ("nr_throttled", _) => throttled = Some(value),
            ("throttled_usec", 2) => time_ns = Some(value.saturating_mul(1000)),
            ("throttled_time", 1) => time_ns = Some(value),
            _ => {}
        }
    }
    Some(CpuStat {
        nr_periods: periods?,
        nr_throttled: throttled?,
        throttled_ns: time_ns?,
    })
}

/// Reads a file of the kernel's (/proc) whole, capped.
fn read_kernel_file(path: &Path, max_bytes: u64) -> Result<String> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let expect = Expect {
        max_bytes,
        owner: Owner::Anyone,
    };
    check_file(&file, path, expect)?;
    let bytes = read_capped(&file, path, max_bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Opens a cgroup file for reading through no symlink at all, never blocking: resolved from
/// pinprof's own root as the target's files are from the target's (`openat2`, no symlinks),
/// and only a regular file of the kernel's own filesystems.
fn open_no_symlinks(path: &Path) -> Result<File> {
    let root = TargetRoot::own()?;
    Ok(root.open_file_on(path, Fs::Kernel)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS_V1: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
33 31 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn proc_cgroup_lines() {
        let v1_and_v2 = "4:memory:/a\n2:cpu,cpuacct:/pinprof-x\n0::/kubepods/pod1/c2\n";
        assert_eq!(v2_path(v1_and_v2).as_deref(), Some("/kubepods/pod1/c2"));
        assert_eq!(v1_cpu_path(v1_and_v2).as_deref(), Some("/pinprof-x"));
        assert_eq!(v2_path("1:cpu:/\n"), None);
        assert_eq!(v2_path("0::relative\n"), None);
        // `cpuacct` or `cpuset` alone is not `cpu`.
        assert_eq!(v1_cpu_path("3:cpuset:/a\n2:cpuacct:/b\n"), None);
        assert_eq!(v1_cpu_path("1:cpu:/c\n").as_deref(), Some("/c"));
        // A path with a colon stays whole.
        assert_eq!(v1_cpu_path("1:cpu:/a:b\n").as_deref(), Some("/a:b"));
    }

    #[test]
    fn paths_are_found_under_their_mount() {
        let dir = |h, p| locate(MOUNTS_V1, h, p).unwrap();
        assert_eq!(
            dir(Hierarchy::V1Cpu, "/pinprof-x"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/pinprof-x"))
        );
        assert_eq!(
            dir(Hierarchy::V2, "/a/b"),
            Some(PathBuf::from("/sys/fs/cgroup/unified/a/b"))
        );
        assert_eq!(
            dir(Hierarchy::V2, "/"),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        // A mount of a sub-tree (a container's view) maps only what is under its root, and
        // the deepest root that holds the path wins.
        let subtree = "\
50 1 0:29 /kubepods/pod1 /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
51 1 0:29 / /host/cpu rw - cgroup cgroup rw,cpu
52 1 0:40 /docker/x /sys/fs/cgroup rw - cgroup2 cgroup2 rw
";
        assert_eq!(
            locate(subtree, Hierarchy::V1Cpu, "/kubepods/pod1/c2").unwrap(),
            Some(PathBuf::from("/sys/fs/cgroup/cpu/c2"))
        );
        assert_eq!(
            locate(subtree, Hierarchy::V1Cpu, "/other").unwrap(),
            Some(PathBuf::from("/host/cpu/other"))
        );
        assert_eq!(locate(subtree, Hierarchy::V2, "/docker/y").unwrap(), None);
        assert_eq!(
            locate(subtree, Hierarchy::V2, "/docker/x").unwrap(),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        // (`/kubepods/pod10` is not under `/kubepods/pod1`.)
        assert_eq!(
            locate(subtree, Hierarchy::V1Cpu, "/kubepods/pod10").unwrap(),
            Some(PathBuf::from("/host/cpu/kubepods/pod10"))
        );
        // Escaped mount points.
        let spaced = "60 1 0:29 / /mnt/cg\\040cpu rw - cgroup cgroup rw,cpu\n";
        assert_eq!(
            locate(spaced, Hierarchy::V1Cpu, "/a").unwrap(),
            Some(PathBuf::from("/mnt/cg cpu/a"))
        );
        // No mount of the hierarchy.
        assert_eq!(locate("", Hierarchy::V1Cpu, "/a").unwrap(), None);
    }

    #[test]
    fn odd_cgroup_paths_are_refused() {
        for path in ["/../../etc", "/a/../b", "a", "/a/./b", "//a", "/a/"] {
            assert!(locate(MOUNTS_V1, Hierarchy::V2, path).is_err(), "{path}");
        }
        assert!(v2_cpu_max("/../../etc").is_err());
        // A mount point with `..` is passed over.
        let odd = "60 1 0:29 / /mnt/../etc rw - cgroup cgroup rw,cpu\n";
        assert_eq!(locate(odd, Hierarchy::V1Cpu, "/a").unwrap(), None);
    }

    #[test]
    fn cpu_stat_of_either_version() {
        let v2 = "usage_usec 5404\nuser_usec 4345\nsystem_usec 1059\nnr_periods 45\n\
                  nr_throttled 41\nthrottled_usec 2310000\nnr_bursts 0\nburst_usec 0\n";
        assert_eq!(
            parse_cpu_stat(v2, 2),
            Some(CpuStat {
                nr_periods: 45,
                nr_throttled: 41,
                throttled_ns: 2_310_000_000
            })
        );
        let v1 = "nr_periods 12\nnr_throttled 3\nthrottled_time 123456789\nnr_bursts 0\n\
                  burst_time 0\n";
        assert_eq!(
            parse_cpu_stat(v1, 1),
            Some(CpuStat {
                nr_periods: 12,
                nr_throttled: 3,
                throttled_ns: 123_456_789
            })
        );
        // v2 without the cpu controller: usage only.
        assert_eq!(parse_cpu_stat("usage_usec 1\nuser_usec 1\n", 2), None);
        // The other version's time is not taken for this one's.
        assert_eq!(parse_cpu_stat(v1, 2), None);
        assert_eq!(parse_cpu_stat("nr_periods x\nnr_throttled 1\n", 1), None);
        assert_eq!(parse_cpu_stat("", 1), None);
    }

    #[test]
    fn v1_quota_reads_as_cpu_max() {
        assert_eq!(
            v1_cpu_max("-1\n", "100000\n").as_deref(),
            Some("max 100000")
        );
        assert_eq!(
            v1_cpu_max("20000\n", "100000\n").as_deref(),
            Some("20000 100000")
        );
        assert_eq!(v1_cpu_max("-2", "100000"), None);
        assert_eq!(v1_cpu_max("20000", ""), None);
    }

    #[test]
    fn parents_of_cgroup_paths() {
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("/"), None);
    }

    #[test]
    fn a_process_in_the_root_cgroup_has_no_limit() {
        // This test's own process: whatever the machine, the call answers without error,
        // and a cgroup found has a readable cpu.stat.
        let me = crate::process::Process::myself().unwrap();
        if let Some(c) = CpuCgroup::of(&me).unwrap() {
            assert!(c.path != "/");
            let _ = c.cpu_stat();
        }
    }
}
