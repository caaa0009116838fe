//! Capabilities pinprof gives up when it does not need them.
//!
//! Installed with file capabilities (`setcap`), pinprof holds `CAP_DAC_READ_SEARCH` and
//! `CAP_SYS_PTRACE` for any user who may run it: `report`, `flamegraph` and `replay` need
//! none, and must not read a 0600 recording of someone else's on that user's behalf.

use anyhow::{Result, bail};

/// Drops every capability (effective, permitted, inheritable, ambient) of a process started
/// by a user other than root; root keeps its own.
pub fn drop_unless_root() -> Result<()> {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 {
        return Ok(());
    }
    // SAFETY: plain integers.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // _LINUX_CAPABILITY_VERSION_3: two 32-bit words of each set.
    let header = Header {
        version: 0x2008_0522,
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
    Ok(())
}
