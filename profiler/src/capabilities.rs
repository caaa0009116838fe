//! Capabilities pinprof gives up when it does not need them.
//!
//! `report`, `flamegraph`, `export`, `replay` and `check FILE` read a recording, which may come
//! from anyone, and write what the user asked for: no capability applies. They give up every
//! one at start, as root too: a flaw in reading a hostile file then holds no `CAP_DAC_OVERRIDE`
//! (every file), `CAP_SYS_PTRACE` (every process's memory) or `CAP_BPF`. Installed with file
//! capabilities (`setcap`), pinprof would otherwise read a 0600 recording of someone else's
//! on its user's behalf.
//!
//! Root without capabilities is uid 0 under the permission bits: it reads and writes what
//! uid 0 owns (a directory of root's), not another user's files without access for others.

use anyhow::{Result, bail};

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words of each set.
const VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct Header {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Gives up every capability for good, whoever runs pinprof: the effective, permitted,
/// inheritable and ambient sets are emptied, the bounding set too where that is allowed (root),
/// and `no_new_privs` is set, so that no program started from here gains any. Returns whether
/// any capability was held. An error if one is left (fail closed: the caller stops).
pub fn drop_all() -> Result<bool> {
    let held = current()?.iter().any(|d| d.effective | d.permitted != 0);
    // SAFETY: prctl with plain integers throughout.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            bail!(
                "cannot set no_new_privs: {}",
                std::io::Error::last_os_error()
            );
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        // Needs CAP_SETPCAP (root has it): the bound on what any later exec could regain.
        // Past the last capability the kernel knows, EINVAL ends the loop.
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
            {
                break;
            }
        }
    }
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data::default(); 2];
    // SAFETY: a v3 header and the two data words it describes.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if rc != 0 {
        bail!(
            "cannot drop capabilities: {}",
            std::io::Error::last_os_error()
        );
    }
    if current()? != [Data::default(); 2] {
        bail!("capabilities are left after dropping them all");
    }
    Ok(held)
}

/// The capability sets of this thread now.
fn current() -> Result<[Data; 2]> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: a v3 header and room for the two data words it describes.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    if rc != 0 {
        bail!(
            "cannot read capabilities: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(data)
}

/// The capabilities in effect for this thread (`CapEff` of /proc/self/status); 0 when it
/// cannot be read.
pub fn effective() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0)
}

/// `CAP_SYS_PTRACE`: another user's /proc/PID files (its exe, maps, memory) need it.
pub const CAP_SYS_PTRACE: u32 = 19;

/// Whether `e` is a permission refused, as root without capabilities meets them.
pub fn is_permission_denied(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
    })
}

/// Said after a reader's refused permission, when it gave up root's capabilities.
pub const ROOT_WITHOUT_CAPABILITIES: &str = "pinprof reads recordings without any capability, \
     root's included: as root it reads and writes only what uid 0 may by the files' permission \
     bits (a directory root owns, not another user's without access for others); give another \
     path, or run pinprof as the user who owns it";
