//! tracefs: where tracepoints are described, and where their field offsets are read from.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs mount, mounting it at `/sys/kernel/tracing` if nothing is mounted yet
/// (fresh machines often have it unmounted; attaching a tracepoint needs it).
pub fn ensure_mounted() -> Result<PathBuf> {
    if let Some(found) = find() {
        return Ok(found);
    }
    // Mounted but closed to this user (tracefs is root's, mode 0700): mounting would not help.
    for dir in CANDIDATES {
        let probe = Path::new(dir).join("events");
        if let Err(e) = std::fs::metadata(&probe)
            && e.kind() == std::io::ErrorKind::PermissionDenied
        {
            bail!(
                "cannot read tracefs at {dir} ({e}): pinprof needs root, or CAP_DAC_READ_SEARCH, \
                 to read its tracepoints' descriptions"
            );
        }
    }
    let target = CANDIDATES[0];
    let source = c"tracefs";
    let dir = std::ffi::CString::new(target)?;
    // SAFETY: plain mount(2) with NUL-terminated strings and no data.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            dir.as_ptr(),
            source.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        bail!(
            "tracefs is not mounted and mounting it failed ({err}); \
             mount it with: mount -t tracefs tracefs {target}"
        );
    }
    find().context("tracefs was mounted but shows no events")
}

fn find() -> Option<PathBuf> {
    CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("events/sched/sched_switch/format").exists())
}

/// Offset of `field` in the records of tracepoint `category:name`, from its `format` file.
pub fn field_offset(tracefs: &Path, category: &str, name: &str, field: &str) -> Result<u32> {
    let path = tracefs
        .join("events")
        .join(category)
        .join(name)
        .join("format");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "tracepoint {category}:{name} is not available ({})",
            path.display()
        )
    })?;
    parse_offset(&text, field)
        .with_context(|| format!("tracepoint {category}:{name} has no field {field}"))
}

fn parse_offset(format: &str, field: &str) -> Option<u32> {
    format.lines().find_map(|line| {
        let mut parts = line.trim().split(';').map(str::trim);
        let decl = parts.next()?.strip_prefix("field:")?;
        // "char prev_comm[16]" -> "prev_comm"
        let declared = decl.rsplit(' ').next()?.split('[').next()?;
        if declared != field {
            return None;
        }
        parts.find_map(|p| p.strip_prefix("offset:"))?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::parse_offset;

    const SWITCH: &str = "name: sched_switch
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
";

    #[test]
    fn reads_offsets_by_field_name() {
        assert_eq!(parse_offset(SWITCH, "prev_state"), Some(32));
        assert_eq!(parse_offset(SWITCH, "next_pid"), Some(56));
        assert_eq!(parse_offset(SWITCH, "prev_comm"), Some(8));
        assert_eq!(parse_offset(SWITCH, "pid"), None);
    }
}
