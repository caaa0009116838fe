//! The target's cgroup CPU quota and throttling, end to end: a real JVM in a cgroup with a
//! small quota (cgroup v1's cpu controller where it is mounted, else v2's), made busy while
//! pinprof records; pinprof's throttling over the window against `cpu.stat` read by the test
//! itself around the busy spell.

mod common;

use std::{path::PathBuf, time::Duration};

use common::*;

/// The quota: 20 ms of CPU every 100 ms.
const QUOTA_US: u64 = 20_000;
const PERIOD_US: u64 = 100_000;

/// Where the test's cgroup goes: the cpu controller's hierarchy and its mount.
#[derive(Debug)]
enum Hierarchy {
    V1(PathBuf),
    V2(PathBuf),
}

/// The mount of the cpu controller from /proc/self/mountinfo: v1's (a `cgroup` mount with
/// the `cpu` option), else v2's when its root offers `cpu`. A mount of a sub-tree does not
/// do (the test makes its cgroup at the root of the hierarchy).
fn cpu_hierarchy() -> Hierarchy {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut v2 = None;
    for line in mounts.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split_whitespace().collect();
        let right: Vec<&str> = right.split_whitespace().collect();
        if fields.len() < 5 || right.len() < 3 || fields[3] != "/" {
            continue;
        }
        let mount = PathBuf::from(fields[4]);
        match right[0] {
            "cgroup" if right[2].split(',').any(|o| o == "cpu") => return Hierarchy::V1(mount),
            "cgroup2" => v2 = Some(mount),
            _ => {}
        }
    }
    let root = v2.expect(
        "no cpu controller on this machine: neither a cgroup v1 mount with `cpu` nor a \
         cgroup2 mount in /proc/self/mountinfo",
    );
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap();
    assert!(
        controllers.split_whitespace().any(|c| c == "cpu"),
        "the cgroup2 hierarchy at {} has no cpu controller ({controllers:?}) and no v1 \
         hierarchy has it",
        root.display()
    );
    Hierarchy::V2(root)
}

/// A cgroup of the test's own with the quota, removed when dropped (whatever is left in it
/// moved out first).
struct Cgroup {
    dir: PathBuf,
    /// Where what is left goes back to.
    parent: PathBuf,
    version: u8,
    /// Its path as /proc/PID/cgroup says it.
    path: String,
}

impl Cgroup {
    fn make(hierarchy: &Hierarchy) -> Self {
        let name = format!("pinprof-cgroup-{}-{}", std::process::id(), unique());
        let (root, version) = match hierarchy {
            Hierarchy::V1(root) => (root, 1),
            Hierarchy::V2(root) => (root, 2),
        };
        let dir = root.join(&name);
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot make the cgroup {}: {e}", dir.display()));
        let cgroup = Self {
            dir,
            parent: root.clone(),
            version,
            path: format!("/{name}"),
        };
        let set = |file: &str, value: String| {
            std::fs::write(cgroup.dir.join(file), &value)
                .unwrap_or_else(|e| panic!("cannot write {value} to {file}: {e}"));
        };
        if version == 1 {
            set("cpu.cfs_period_us", PERIOD_US.to_string());
            set("cpu.cfs_quota_us", QUOTA_US.to_string());
        } else {
            // The controller enabled for the root's children, then the quota.
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
            set("cpu.max", format!("{QUOTA_US} {PERIOD_US}"));
        }
        cgroup
    }

    /// Moves process `pid` (every thread of it) into the cgroup.
    fn enter(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("cannot move process {pid} into {:?}: {e}", self.dir));
    }

    /// `cpu.stat`'s periods, throttled periods and throttled ns.
    fn stat(&self) -> (u64, u64, u64) {
        let text = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap();
        let value = |key: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
                .unwrap_or_else(|| panic!("no {key} in cpu.stat:\n{text}"))
                .trim()
                .parse()
                .unwrap()
        };
        let throttled_ns = if self.version == 1 {
            value("throttled_time")
        } else {
            value("throttled_usec") * 1000
        };
        (value("nr_periods"), value("nr_throttled"), throttled_ns)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
                for pid in procs.split_whitespace() {
                    let _ = std::fs::write(self.parent.join("cgroup.procs"), pid);
                }
            }
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not remove the test's cgroup {}", self.dir.display());
    }
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn in_cgroup(pid: u32, cgroup: &Cgroup) -> bool {
    let lines = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    lines.lines().any(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
        let ours = if cgroup.version == 1 {
            controllers.split(',').any(|c| c == "cpu")
        } else {
            controllers.is_empty()
        };
        ours && path == cgroup.path
    })
}

#[test]
fn throttling_is_counted_as_cpu_stat_counts_it() {
    let hierarchy = cpu_hierarchy();
    // Made before the JVM, so dropped after it: the JVM is gone when the cgroup goes.
    let cgroup = Cgroup::make(&hierarchy);
    let mut jvm = start(21, "Burst", &[]);
    cgroup.enter(jvm.pid);
    assert!(
        in_cgroup(jvm.pid, &cgroup),
        "process {} is not in {}",
        jvm.pid,
        cgroup.path
    );
    eprintln!("cgroup v{} {} ({hierarchy:?})", cgroup.version, cgroup.path);
    // Let the JVM's start-up work end before the window opens.
    std::thread::sleep(Duration::from_secs(2));

    // pinprof's first reading is taken as the window opens, before the file appears; its
    // last as it stops. The test reads cpu.stat just inside that window, around the burst:
    // what pinprof adds is the idle JVM's throttling in the few ms at either end.
    let (recorder, recording) = spawn_record_with(jvm.pid, "cgroup-throttling.pinrec", &[]);
    let before = cgroup.stat();
    // Two threads busy for 6 s on a fifth of a CPU: throttled in nearly every period.
    say(&mut jvm, "burst 6000 2");
    jvm.wait_for("burst-done ", Duration::from_secs(60))
        .expect("the burst ends");
    let after = cgroup.stat();
    interrupt(recorder);

    let report = report_json(&recording);
    let c = &report["scheduler"]["cgroup"];
    eprintln!(
        "cpu.stat before {before:?}, after {after:?}; pinprof: {} periods, {} throttled, {} ns",
        c["nr_periods"], c["nr_throttled"], c["throttled_ns"]
    );
    assert!(c.is_object(), "no scheduler.cgroup in the report: {c}");
    assert_eq!(c["path"], cgroup.path.as_str(), "{c}");
    assert_eq!(c["version"], cgroup.version, "{c}");
    assert_eq!(c["cpu_max"], format!("{QUOTA_US} {PERIOD_US}"), "{c}");
    let throttled = (after.1 - before.1) as f64;
    let throttled_ns = (after.2 - before.2) as f64;
    assert!(
        throttled >= 30.0,
        "the burst should be throttled in most of its 60 periods: {before:?} -> {after:?}"
    );
    assert_within(
        "periods throttled (pinprof vs cpu.stat read around the burst, 5%)",
        ns(&c["nr_throttled"]),
        throttled,
        0.05,
    );
    assert_within(
        "time throttled (pinprof vs cpu.stat read around the burst, 5%)",
        ns(&c["throttled_ns"]),
        throttled_ns,
        0.05,
    );
    // The time line adds up to the window's throttled time, and puts it in the burst.
    let series = c["series"].as_array().unwrap();
    let sum: u64 = series
        .iter()
        .map(|s| s["throttled_ns"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, c["throttled_ns"].as_u64().unwrap(), "{c}");
    let busy = series
        .iter()
        .filter(|s| s["throttled_ns"].as_u64().unwrap() > 0)
        .count();
    assert!((3..=series.len()).contains(&busy), "throttled spans: {c}");

    // The text report says it among its first lines.
    let out = pinprof().arg("report").arg(&recording).output().unwrap();
    assert_ok(&out, "pinprof report");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = format!(
        "CPU quota: {QUOTA_US} {PERIOD_US} (cgroup v{} {}): throttled ",
        cgroup.version, cgroup.path
    );
    assert!(
        text.lines().take(5).any(|l| l.starts_with(&line)),
        "{line}... among the first lines of:\n{text}"
    );
}
