//! The process pinprof attached to, held by identity rather than by number.
//!
//! A pid names whatever process holds it now: once the target exits and is reaped, the
//! number goes to the next process that asks (any user's), and a path built from it
//! (`/proc/PID/mem`, `/proc/PID/root/...`) leads there. So pinprof takes, at attach, a pidfd,
//! the `/proc/PID` directory and the start time, and checks that they are one process (the
//! pidfd, taken first, has not exited once the directory is open). Every `/proc/PID/...` file
//! is then opened relative to that directory, which the kernel binds to the process, not the
//! number: once the process is reaped every lookup there fails (`ESRCH`), whoever has the
//! number now. After each open the pidfd says whether the process has exited, so what a
//! zombie leaves (an empty map, no memory) is an error that says so, not a finding.

use std::{
    ffi::{CString, OsStr, OsString},
    fmt,
    fs::File,
    io::{self, Read as _},
    os::{
        fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
        unix::ffi::OsStrExt as _,
    },
    path::PathBuf,
    sync::Arc,
};

use anyhow::{Context as _, Result, bail};

/// `/proc/PID/stat`, `status` and the like are far below this.
const MAX_SMALL_FILE: u64 = 1 << 20;

/// `/proc/PID/maps` read whole at most (a JVM's is well under 1 MiB; its owner can make it
/// far larger).
pub const MAX_MAPS: u64 = 64 << 20;

/// One process, as it was when pinprof attached to it. Cheap to clone (shared).
#[derive(Clone)]
pub struct Process(Arc<Inner>);

struct Inner {
    pid: u32,
    /// When it started, in clock ticks after boot (`/proc/PID/stat` field 22).
    start_time: u64,
    pidfd: OwnedFd,
    /// `/proc/PID`, `O_PATH`: bound to this process, never to a later holder of its pid.
    dir: OwnedFd,
}

/// The process attached to has exited: nothing more is read of it, since its pid may be
/// another process's now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exited {
    pub pid: u32,
}

impl fmt::Display for Exited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "process {} has exited (pinprof reads nothing more of it: its pid may be another \
             process's now)",
            self.pid
        )
    }
}

impl std::error::Error for Exited {}

/// Whether `e` says the process has exited (an `Exited` inside an `io::Error`).
pub fn is_exited(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Exited>())
}

impl Process {
    /// Takes hold of process `pid` (a process id, not a thread's): its pidfd, its `/proc`
    /// directory and its start time, checked to be one and the same process.
    pub fn attach(pid: u32) -> Result<Self> {
        if pid == 0 || pid > i32::MAX as u32 {
            bail!("{pid} is not a process id");
        }
        // The raw system call: the static build's musl has no wrapper.
        // SAFETY: plain integers; a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ESRCH) => anyhow::anyhow!("no process with PID {pid}"),
                Some(libc::EINVAL | libc::ENOENT) => {
                    anyhow::anyhow!("{pid} is not a process id (a thread's?)")
                }
                _ => anyhow::Error::new(e).context(format!(
                    "cannot take hold of process {pid} (pidfd_open: Linux 5.3 or later, and a \
                     seccomp profile that allows it)"
                )),
            });
        }
        // SAFETY: a fresh fd nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        let path = format!("/proc/{pid}");
        let dir = open_at(
            libc::AT_FDCWD,
            OsStr::new(&path),
            libc::O_PATH | libc::O_DIRECTORY,
        )
        .with_context(|| format!("cannot open {path}"))?;
        // The pidfd was taken first: if its process has not exited once the directory is
        // open, the pid could not have passed to another one in between.
        if pidfd_exited(&pidfd) {
            return Err(Exited { pid }.into());
        }
        let stat = open_at(dir.as_raw_fd(), OsStr::new("stat"), libc::O_RDONLY)
            .and_then(|fd| read_capped(File::from(fd), MAX_SMALL_FILE))
            .with_context(|| format!("cannot read {path}/stat"))?;
        let start_time = parse_start_time(&String::from_utf8_lossy(&stat))
            .with_context(|| format!("no start time in {path}/stat"))?;
        if pidfd_exited(&pidfd) {
            return Err(Exited { pid }.into());
        }
        Ok(Self(Arc::new(Inner {
            pid,
            start_time,
            pidfd,
            dir,
        })))
    }

    /// pinprof itself (for tests, and for reading its own files as a target's are read).
    pub fn myself() -> Result<Self> {
        Self::attach(std::process::id())
    }

    pub fn pid(&self) -> u32 {
        self.0.pid
    }

    /// When it started, in clock ticks after boot.
    pub fn start_time(&self) -> u64 {
        self.0.start_time
    }

    /// The pidfd, to signal this very process.
    pub fn pidfd(&self) -> BorrowedFd<'_> {
        self.0.pidfd.as_fd()
    }

    /// Whether it has exited (a zombie has): its pidfd has become readable. A pidfd that
    /// cannot be asked counts as exited (fail closed).
    pub fn has_exited(&self) -> bool {
        pidfd_exited(&self.0.pidfd)
    }

    /// An error once it has exited.
    pub fn check(&self) -> std::result::Result<(), Exited> {
        if self.has_exited() {
            return Err(Exited { pid: self.0.pid });
        }
        Ok(())
    }

    /// Opens `name` under `/proc/PID` (`mem`, `maps`, `root`, `task/TID/stat`), relative to
    /// the directory taken at attach, with `flags` (and `O_CLOEXEC`); an `Exited` error if the
    /// process has exited, checked after the open.
    pub fn open(&self, name: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
        check_name(name)?;
        let opened = open_at(self.0.dir.as_raw_fd(), OsStr::new(name), flags);
        self.after(opened)
    }

    /// Reads `name` under `/proc/PID` whole, at most `max` bytes (more is an error).
    pub fn read(&self, name: &str, max: u64) -> io::Result<Vec<u8>> {
        let file = File::from(self.open(name, libc::O_RDONLY)?);
        let data = read_capped(file, max);
        // A process that exits while it is read leaves an empty or partial file.
        self.after(data)
    }

    /// A small text file under `/proc/PID` (`status`, `task/TID/comm`).
    pub fn read_to_string(&self, name: &str) -> io::Result<String> {
        let data = self.read(name, MAX_SMALL_FILE)?;
        Ok(String::from_utf8_lossy(&data).into_owned())
    }

    /// Where the symbolic link `name` under `/proc/PID` leads (`exe`, `fd/N`).
    pub fn read_link(&self, name: &str) -> io::Result<PathBuf> {
        check_name(name)?;
        let c = cstring(OsStr::new(name))?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: a valid dirfd, a NUL-terminated name and a buffer of the length given.
        let n = unsafe {
            libc::readlinkat(
                self.0.dir.as_raw_fd(),
                c.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let read = if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            buf.truncate(n as usize);
            Ok(PathBuf::from(OsString::from(std::ffi::OsStr::from_bytes(
                &buf,
            ))))
        };
        self.after(read)
    }

    /// What `name` under `/proc/PID` is, following a last magic link (`ns/pid`, `fd/N`).
    pub fn metadata(&self, name: &str) -> io::Result<std::fs::Metadata> {
        let fd = self.open(name, libc::O_PATH)?;
        let meta = File::from(fd).metadata();
        self.after(meta)
    }

    /// The entries of directory `name` under `/proc/PID` (`task`, `fd`).
    pub fn read_dir(&self, name: &str) -> io::Result<Vec<OsString>> {
        let dir = self.open(name, libc::O_RDONLY | libc::O_DIRECTORY)?;
        // Listed through this process's own descriptor: the directory opened, no other.
        let listed = std::fs::read_dir(crate::safe_fs::fd_path(&dir)).and_then(|entries| {
            entries
                .map(|e| e.map(|e| e.file_name()))
                .collect::<io::Result<Vec<_>>>()
        });
        self.after(listed)
    }

    /// The `procfs` crate's view of this process. That crate opens `/proc/PID` by number
    /// (and reads relative to that directory from then on): checked after the open to be
    /// this process still (not exited, so the number was still its own; the same start time).
    pub fn procfs(&self) -> io::Result<procfs::process::Process> {
        let opened = procfs::process::Process::new(self.0.pid as i32).map_err(io::Error::other);
        let process = self.after(opened)?;
        let start_time = process.stat().map_err(io::Error::other)?.starttime;
        if start_time != self.0.start_time {
            return Err(io::Error::other(Exited { pid: self.0.pid }));
        }
        Ok(process)
    }

    /// `result` of an operation on the process, or `Exited` if it has exited by now (what
    /// failed because it exited says so, and what a zombie gave is not taken).
    fn after<T>(&self, result: io::Result<T>) -> io::Result<T> {
        match self.check() {
            Ok(()) => result,
            Err(exited) => Err(io::Error::other(exited)),
        }
    }
}

impl fmt::Display for Process {
    /// The pid, for messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.pid)
    }
}

impl fmt::Debug for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Process")
            .field("pid", &self.0.pid)
            .field("start_time", &self.0.start_time)
            .finish()
    }
}

/// Whether a pidfd's process has exited (its pidfd is readable). A pidfd that cannot be
/// asked counts as exited (fail closed).
fn pidfd_exited(pidfd: &OwnedFd) -> bool {
    let mut poll = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd, no wait.
        match unsafe { libc::poll(&mut poll, 1, 0) } {
            0 => return false,
            n if n > 0 => return true,
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return true,
        }
    }
}

/// At most `max` bytes of `file` (more is an error).
fn read_capped(file: File, max: u64) -> io::Result<Vec<u8>> {
    let mut data = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut data)?;
    if data.len() as u64 > max {
        return Err(io::Error::other(format!(
            "larger than the {max} bytes pinprof reads"
        )));
    }
    Ok(data)
}

/// Field 22 of `/proc/PID/stat`, the start time. The command (field 2, in parentheses) may
/// hold anything, spaces and parentheses included: fields are counted after its last `)`.
fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 (the state) is the first after it.
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// A path below `/proc/PID`: relative, and never up out of it.
fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name.starts_with('/') || name.split('/').any(|c| c == "..") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a path below /proc/PID"),
        ));
    }
    Ok(())
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn open_at(dir: libc::c_int, name: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = cstring(name)?;
    // SAFETY: a NUL-terminated name; the kernel returns a new fd or -1.
    let fd = unsafe { libc::openat(dir, c.as_ptr(), flags | libc::O_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_field_22_whatever_the_command() {
        let stat = "4242 (a) b) (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 \
                    987654 1000 100";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("4242 (x) S 1"), None);
        assert_eq!(parse_start_time("no parenthesis"), None);
    }

    #[test]
    fn names_stay_below_the_process_directory() {
        for bad in ["", "/etc/passwd", "..", "task/../../1/mem", "../self/mem"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        for good in ["mem", "task/12/stat", "ns/pid", "map_files/1000-2000"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn this_process_is_read_through_its_own_directory() {
        let me = Process::myself().unwrap();
        assert_eq!(me.pid(), std::process::id());
        assert!(!me.has_exited());
        assert!(me.start_time() > 0);
        let status = me.read_to_string("status").unwrap();
        assert!(status.contains(&format!("\nPid:\t{}\n", std::process::id())));
        assert_eq!(
            me.read_link("exe").unwrap(),
            std::fs::read_link("/proc/self/exe").unwrap()
        );
        assert!(
            me.read_dir("task")
                .unwrap()
                .contains(&OsString::from(std::process::id().to_string()))
        );
        assert!(!me.read("maps", MAX_MAPS).unwrap().is_empty());
        assert_eq!(me.procfs().unwrap().pid(), std::process::id() as i32);
        assert!(matches!(Process::attach(0), Err(e) if e.to_string().contains("not a process")));
    }
}
