//! File operations for a root process working next to users it does not trust.
//!
//! pinprof runs as root and creates files in directories others may control (the attach
//! trigger in the JVM's working directory, recordings and SVGs wherever the user says), and
//! reads files the target names (its libraries, its perf map, its JDK's `release`). Every such
//! operation goes through here:
//! - files are created `O_CREAT|O_EXCL|O_NOFOLLOW` relative to a directory opened
//!   `O_DIRECTORY|O_NOFOLLOW`, mode 0600: never through a symlink, never truncating anything;
//! - outputs written at once go to a temporary file beside the target name, then `rename`;
//! - a file we created is removed only while its name still leads to the same inode;
//! - a file the target names is resolved inside the target's own root (`openat2` with
//!   `RESOLVE_IN_ROOT`, so its absolute symlinks cannot lead out to the host);
//! - every file opened for reading goes through one door, `reopen_regular`: the name is
//!   opened `O_PATH` (no driver's `open` runs), the inode checked with `fstat` (a regular
//!   file, not on one of the kernel's pseudo filesystems), and only then opened for reading
//!   through `/proc/self/fd/N`, `O_NOCTTY|O_NONBLOCK`: a device node, a FIFO or a terminal a
//!   target places where pinprof reads is never opened, so no watchdog arms, no tape
//!   rewinds, and no terminal becomes root's controlling terminal;
//! - what is read is read under a size cap.

use std::{
    ffi::{CString, OsStr},
    fs::File,
    io::{self, Read as _, Write as _},
    os::{
        fd::{AsFd, AsRawFd, FromRawFd, OwnedFd},
        unix::{ffi::OsStrExt as _, fs::MetadataExt as _},
    },
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};

/// Mode of every file pinprof creates: recordings hold kernel addresses, file paths, socket
/// peers and stacks.
pub const MODE: libc::mode_t = 0o600;

/// How many names a temporary file tries before giving up (each taken name is skipped).
const TEMP_TRIES: u32 = 16;

/// A directory opened without following a symlink at its last component, to create and
/// remove files relative to it.
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl Dir {
    /// Opens `path` as a directory; a symlink there is refused, not followed.
    pub fn open(path: &Path) -> Result<Self> {
        let path = if path.as_os_str().is_empty() {
            Path::new(".")
        } else {
            path
        };
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let fd = open_at(libc::AT_FDCWD, path.as_os_str(), flags, 0).map_err(|e| {
            // O_DIRECTORY|O_NOFOLLOW says ENOTDIR (or ELOOP) for a symlink.
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            let why = match e.raw_os_error() {
                _ if link => " (it is a symbolic link: give its real path)",
                Some(libc::ENOTDIR) => " (not a directory)",
                _ => "",
            };
            anyhow::Error::new(e).context(format!("cannot open directory {}{why}", path.display()))
        })?;
        Ok(Self {
            fd,
            path: path.to_owned(),
        })
    }

    /// A directory fd handed over by the caller (e.g. one resolved inside a target's root).
    pub fn from_fd(fd: OwnedFd, path: PathBuf) -> Self {
        Self { fd, path }
    }

    /// Creates `name` here, exclusively: an existing entry of any kind (a file, a symlink)
    /// is `ErrorKind::AlreadyExists`, untouched. The file is 0600 and removed when the guard
    /// is dropped, unless kept.
    pub fn create_new(&self, name: &OsStr) -> io::Result<Created> {
        check_name(name)?;
        // Read and write: a recording is read back through this descriptor, not by name.
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let fd = open_at(self.fd.as_raw_fd(), name, flags | libc::O_CLOEXEC, MODE)?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        Ok(Created {
            dir: self.try_clone()?,
            name: name.to_owned(),
            file,
            dev_ino: (meta.dev(), meta.ino()),
            keep: false,
        })
    }

    /// Creates a temporary file beside `name` (`.name.pinprof.tmp`, or a further name when
    /// that one is taken, whatever it is).
    pub fn create_temp(&self, name: &OsStr) -> Result<Created> {
        check_name(name)?;
        let mut last = None;
        for attempt in 0..TEMP_TRIES {
            let mut temp = b".".to_vec();
            if attempt == 0 {
                temp.extend_from_slice(name.as_bytes());
                temp.extend_from_slice(b".pinprof.tmp");
            } else {
                let salt = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                let tail = format!("pinprof.{}.{attempt}.{salt:x}.tmp", std::process::id());
                temp.extend_from_slice(tail.as_bytes());
            }
            match self.create_new(OsStr::from_bytes(&temp)) {
                Ok(created) => return Ok(created),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                // A long output name: the tries after the first do without it.
                Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => last = Some(e),
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("cannot create a temporary file in {}", self.path.display())
                    });
                }
            }
        }
        Err(last.unwrap_or_else(|| io::ErrorKind::AlreadyExists.into())).with_context(|| {
            format!(
                "cannot create a temporary file in {}: every name tried is taken",
                self.path.display()
            )
        })
    }

    fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            fd: self.fd.try_clone()?,
            path: self.path.clone(),
        })
    }

    fn display(&self, name: &OsStr) -> String {
        self.path.join(name).display().to_string()
    }

    /// The inode `name` leads to now, without following a symlink.
    fn dev_ino(&self, name: &OsStr) -> io::Result<(u64, u64)> {
        let st = self.stat(name)?;
        Ok((st.st_dev, st.st_ino))
    }

    /// The directory itself: its owner and mode.
    pub fn stat_self(&self) -> io::Result<libc::stat> {
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid fd and a stat buffer of the right type.
        if unsafe { libc::fstat(self.fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }

    /// An `O_PATH` handle on the inode `name` is now, without following a symlink: what it
    /// is can be checked and used (e.g. a socket connected through `/proc/self/fd/N`)
    /// without another lookup of the name.
    pub fn open_path(&self, name: &OsStr) -> io::Result<OwnedFd> {
        check_name(name)?;
        let flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        open_at(self.fd.as_raw_fd(), name, flags, 0)
    }

    /// What `name` is here, without following a symlink.
    pub fn stat(&self, name: &OsStr) -> io::Result<libc::stat> {
        let c = cstring(name)?;
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid fd, a NUL-terminated name and a stat buffer of the right type.
        let rc = unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }
}

impl AsRawFd for Dir {
    fn as_raw_fd(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }
}

/// A file this process just created (it did not exist before): removed on drop unless kept,
/// and only while its name still leads to the same inode.
pub struct Created {
    dir: Dir,
    name: std::ffi::OsString,
    file: File,
    dev_ino: (u64, u64),
    keep: bool,
}

impl Created {
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Gives the file to `uid:gid` (through its fd, so only this file can be given).
    pub fn chown(&self, uid: u32, gid: u32) -> io::Result<()> {
        std::os::unix::fs::fchown(self.file(), Some(uid), Some(gid))
    }

    /// Moves the file to `name` in the same directory, replacing what was there (`rename`
    /// replaces a directory entry: a symlink there is replaced, never followed).
    pub fn rename_to(mut self, name: &OsStr) -> Result<()> {
        check_name(name)?;
        let (from, to) = (cstring(&self.name)?, cstring(name)?);
        let dir = self.dir.fd.as_raw_fd();
        // SAFETY: valid fds and NUL-terminated names.
        if unsafe { libc::renameat(dir, from.as_ptr(), dir, to.as_ptr()) } != 0 {
            let e = io::Error::last_os_error();
            return Err(e).with_context(|| format!("cannot write {}", self.dir.display(name)));
        }
        self.keep = true;
        Ok(())
    }

    /// Moves the file to `name` in the same directory only if nothing is there
    /// (`RENAME_NOREPLACE`): an error of kind `AlreadyExists` otherwise.
    pub fn rename_new(mut self, name: &OsStr) -> Result<()> {
        check_name(name)?;
        let (from, to) = (cstring(&self.name)?, cstring(name)?);
        let dir = self.dir.fd.as_raw_fd();
        // The system call itself: the musl of the static build has no `renameat2` wrapper.
        // SAFETY: valid fds and NUL-terminated names.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                dir,
                from.as_ptr(),
                dir,
                to.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error().into());
        }
        self.keep = true;
        Ok(())
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        // Someone may have replaced the name since: remove only what we made.
        if self.dir.dev_ino(&self.name).ok() != Some(self.dev_ino) {
            return;
        }
        if let Ok(c) = cstring(&self.name) {
            // SAFETY: a valid fd and a NUL-terminated name.
            unsafe { libc::unlinkat(self.dir.fd.as_raw_fd(), c.as_ptr(), 0) };
        }
    }
}

/// How `create_output` treats a file already at the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// An existing entry is an error.
    Refuse,
    /// An existing entry is replaced by a new file (its name only: its content, or what a
    /// symlink there points to, is never touched).
    Replace,
}

/// A new output file being made, under a temporary name beside its own until `commit`
/// (removed if dropped before): a reader of the name never finds a file without its header.
pub struct NewOutput {
    created: Created,
    path: PathBuf,
    name: std::ffi::OsString,
    existing: Existing,
}

impl NewOutput {
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self) -> &File {
        self.created.file()
    }

    /// The file is whole enough to stand at its name (a recording with its header): move it
    /// there, over the old file when replacing, else only if the name is still free.
    pub fn commit(self) -> Result<()> {
        match self.existing {
            Existing::Replace => self.created.rename_to(&self.name),
            Existing::Refuse => self.created.rename_new(&self.name).map_err(|e| {
                if e.downcast_ref::<io::Error>()
                    .is_some_and(|e| e.kind() == io::ErrorKind::AlreadyExists)
                {
                    already_exists(&self.path, FileKind::Regular)
                } else {
                    e
                }
            }),
        }
    }
}

/// Starts a new 0600 output file for `path`, to be written as it goes (a recording): a
/// crash after `commit` leaves what was written readable at its name. An existing entry at
/// `path` is refused (said at once, and again at `commit` should one appear meanwhile), or
/// replaced at `commit`.
pub fn create_output(path: &Path, existing: Existing) -> Result<NewOutput> {
    let (dir, name) = split(path)?;
    let dir = Dir::open(dir)?;
    if let Some(kind) = existing_kind(&dir, name)
        && (existing == Existing::Refuse || kind != FileKind::Regular)
    {
        return Err(already_exists(path, kind));
    }
    Ok(NewOutput {
        created: dir.create_temp(name)?,
        path: path.to_owned(),
        name: name.to_owned(),
        existing,
    })
}

/// Writes an output made at once (an SVG, a JSON file): into a temporary 0600 file beside
/// `path`, synced, then moved to its name (as `create_output` and `commit`), so a reader never
/// sees half a file. An existing regular file there is refused or replaced as `existing` says,
/// as a recording's is; a symlink, a device (`/dev/stdout` is a symlink), a FIFO or a
/// directory at `path` is always refused, never written through nor replaced.
pub fn write_output(
    path: &Path,
    existing: Existing,
    write: impl FnOnce(&mut io::BufWriter<&File>) -> Result<()>,
) -> Result<()> {
    let output = create_output(path, existing)?;
    {
        let mut out = io::BufWriter::new(output.file());
        write(&mut out)?;
        out.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    output
        .file()
        .sync_all()
        .with_context(|| format!("cannot write {}", path.display()))?;
    output.commit()
}

/// What stands at an output's name, for the message that refuses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FileKind {
    Regular,
    Directory,
    Symlink,
    Other,
}

fn existing_kind(dir: &Dir, name: &OsStr) -> Option<FileKind> {
    let st = dir.stat(name).ok()?;
    Some(match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => FileKind::Regular,
        libc::S_IFDIR => FileKind::Directory,
        libc::S_IFLNK => FileKind::Symlink,
        _ => FileKind::Other,
    })
}

fn already_exists(path: &Path, kind: FileKind) -> anyhow::Error {
    let path = path.display();
    match kind {
        FileKind::Regular => anyhow::anyhow!(
            "{path} already exists; pinprof does not overwrite it (choose another name, or \
             --force to replace it)"
        ),
        FileKind::Directory => anyhow::anyhow!("{path} is a directory: give a file name"),
        FileKind::Symlink => anyhow::anyhow!(
            "{path} is a symbolic link; pinprof neither writes through nor replaces one \
             (give the real path of a new or regular file)"
        ),
        FileKind::Other => {
            anyhow::anyhow!("{path} is a device, FIFO or socket; pinprof writes only regular files")
        }
    }
}

/// The directory and file name of an output path.
fn split(path: &Path) -> Result<(&Path, &OsStr)> {
    let name = path
        .file_name()
        .with_context(|| format!("{} does not name a file", path.display()))?;
    Ok((path.parent().unwrap_or(Path::new(".")), name))
}

/// A plain file name: no separator, not `.` or `..`, no NUL.
fn check_name(name: &OsStr) -> io::Result<()> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a file name"),
        ));
    }
    Ok(())
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn open_at(
    dir: libc::c_int,
    name: &OsStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let c = cstring(name)?;
    // SAFETY: a NUL-terminated name; the kernel returns a new fd or -1.
    let fd = unsafe { libc::openat(dir, c.as_ptr(), flags, libc::c_uint::from(mode)) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

// ---------------------------------------------------------------------------------------
// Reading what the target names.

/// The target's root directory (`/proc/PID/root`), to resolve its paths inside it.
pub struct TargetRoot {
    fd: OwnedFd,
    pid: u32,
}

impl TargetRoot {
    /// The root of the process attached to: opened through its own `/proc` directory, so
    /// never another process's that took its pid since (an error once it has exited).
    pub fn open(process: &crate::process::Process) -> Result<Self> {
        let pid = process.pid();
        let flags = libc::O_PATH | libc::O_DIRECTORY;
        // Following this magic link is the point: it is the target's root, set by the kernel.
        let fd = process.open("root", flags).with_context(|| {
            format!(
                "cannot open /proc/{pid}/root (is process {pid} running? another user's \
                 process needs root, or CAP_SYS_PTRACE)"
            )
        })?;
        Ok(Self { fd, pid })
    }

    /// pinprof's own root, to resolve paths as it sees them through no symlink at all.
    pub fn own() -> Result<Self> {
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        let fd = open_at(libc::AT_FDCWD, OsStr::new("/proc/self/root"), flags, 0)
            .context("cannot open /proc/self/root")?;
        Ok(Self {
            fd,
            pid: std::process::id(),
        })
    }

    /// Opens `path` as the target sees it, for reading: resolved inside the target's root,
    /// through no symlink at all (the paths pinprof reads are the kernel's own, canonical,
    /// names: a symlink on the way is someone's redirection), and only if it is a regular
    /// file on an ordinary filesystem (`reopen_regular`).
    pub fn open_file(&self, path: &Path) -> io::Result<File> {
        self.open_file_on(path, Fs::Ordinary)
    }

    /// `open_file` for a file on the filesystems `fs` allows.
    pub fn open_file_on(&self, path: &Path, fs: Fs) -> io::Result<File> {
        let fd = self.open_with(path, libc::O_PATH | libc::O_NOFOLLOW, RESOLVE_NO_SYMLINKS)?;
        reopen_regular(fd, fs)
    }

    /// Opens directory `path` as the target sees it (e.g. its `/tmp`), resolved inside its
    /// root.
    pub fn open_dir(&self, path: &Path) -> Result<Dir> {
        let fd = self
            .open_with(path, libc::O_RDONLY | libc::O_DIRECTORY, 0)
            .with_context(|| format!("cannot open {} of process {}", path.display(), self.pid))?;
        Ok(Dir::from_fd(
            fd,
            PathBuf::from(format!("/proc/{}/root{}", self.pid, path.display())),
        ))
    }

    fn open_with(&self, path: &Path, flags: libc::c_int, resolve: u64) -> io::Result<OwnedFd> {
        let c = cstring(path.as_os_str())?;
        let how = OpenHow {
            flags: (flags | libc::O_CLOEXEC) as u64,
            mode: 0,
            resolve: RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | resolve,
        };
        // SAFETY: a valid dirfd, a NUL-terminated path and an open_how of the size given.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
    }
}

/// `struct open_how` of openat2(2).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_IN_ROOT: u64 = 0x10;

/// What a file the target names must be before pinprof reads it.
#[derive(Clone, Copy, Debug)]
pub struct Expect {
    /// Larger files are refused.
    pub max_bytes: u64,
    pub owner: Owner,
}

/// Whom a file the target names must belong to.
#[derive(Clone, Copy, Debug)]
pub enum Owner {
    Anyone,
    /// This user (the target's own files: its perf map).
    Is(u32),
    /// Root or this user (files of the target's installation: its JDK).
    RootOr(u32),
}

/// Checks an opened file: a regular file (never a FIFO, device or directory), under the size
/// cap, owned as expected. `what` names it in errors.
pub fn check_file(file: &File, what: &Path, expect: Expect) -> Result<std::fs::Metadata> {
    let meta = file
        .metadata()
        .with_context(|| format!("cannot stat {}", what.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", what.display());
    }
    if meta.len() > expect.max_bytes {
        bail!(
            "{} is {} bytes, more than the {} pinprof reads",
            what.display(),
            meta.len(),
            expect.max_bytes
        );
    }
    let trusted = match expect.owner {
        Owner::Anyone => true,
        Owner::Is(uid) => meta.uid() == uid,
        Owner::RootOr(uid) => meta.uid() == uid || meta.uid() == 0,
    };
    if !trusted {
        bail!(
            "{} belongs to uid {}, neither the target's user nor root as expected ({:?})",
            what.display(),
            meta.uid(),
            expect.owner
        );
    }
    Ok(meta)
}

/// Reads a checked file whole, never more than the cap (a file may grow after the check).
pub fn read_capped(file: &File, what: &Path, max_bytes: u64) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut data)
        .with_context(|| format!("cannot read {}", what.display()))?;
    if data.len() as u64 > max_bytes {
        bail!(
            "{} grew past the {max_bytes} bytes pinprof reads",
            what.display()
        );
    }
    Ok(data)
}

/// Opens, checks and reads a file the target names, as it sees it.
pub fn read_target_file(root: &TargetRoot, path: &Path, expect: Expect) -> Result<Vec<u8>> {
    let file = root
        .open_file(path)
        .with_context(|| format!("cannot open {} of process {}", path.display(), root.pid))?;
    check_file(&file, path, expect)?;
    read_capped(&file, path, expect.max_bytes)
}

/// A file the target has mapped, as it maps it: the exact inode of the mapping, through
/// `/proc/PID/map_files/` where pinprof may open it (CAP_SYS_ADMIN), else by its path inside
/// the target's root, accepted only if it is the inode the mapping names. Then checked as a
/// regular file under `max_bytes`.
pub struct MappedFile<'a> {
    /// The process attached to (shown as its pid).
    pub pid: &'a crate::process::Process,
    pub start: u64,
    pub end: u64,
    pub path: &'a Path,
    /// The mapping's device (major, minor) and inode, from `/proc/PID/maps`.
    pub dev: (u64, u64),
    pub inode: u64,
}

impl MappedFile<'_> {
    pub fn open(&self, root: Option<&TargetRoot>, max_bytes: u64) -> Result<File> {
        let expect = Expect {
            max_bytes,
            owner: Owner::Anyone,
        };
        let by_map = format!("map_files/{:x}-{:x}", self.start, self.end);
        // The map_files entry is a magic link to the very file mapped: following it is safe.
        // Opened through the process's own /proc directory: its mapping, no other's.
        if let Ok(fd) = self.pid.open(&by_map, libc::O_PATH) {
            let file = reopen_regular(fd, Fs::Ordinary)
                .with_context(|| format!("cannot open {}", self.path.display()))?;
            check_file(&file, self.path, expect)?;
            return Ok(file);
        }
        let owned;
        let root = match root {
            Some(root) => root,
            None => {
                owned = TargetRoot::open(self.pid)?;
                &owned
            }
        };
        let file = root.open_file(self.path).with_context(|| {
            format!(
                "cannot open {} of process {}",
                self.path.display(),
                self.pid
            )
        })?;
        let meta = check_file(&file, self.path, expect)?;
        let dev = (
            u64::from(libc::major(meta.dev())),
            u64::from(libc::minor(meta.dev())),
        );
        if meta.ino() != self.inode || dev != self.dev {
            bail!(
                "{} is not the file process {} has mapped (replaced since?)",
                self.path.display(),
                self.pid
            );
        }
        Ok(file)
    }
}

/// A file the user names (a recording to read, a CA bundle), opened for reading the way
/// files the target names are (`reopen_regular`): a symlink the user gives is followed, as
/// any tool would, but what it leads to must be a regular file on an ordinary filesystem,
/// which the user who started pinprof may read (`access(2)` checks the real user, without
/// the capabilities an installed pinprof may hold).
pub fn open_user_file(path: &Path) -> io::Result<File> {
    let flags = libc::O_PATH | libc::O_CLOEXEC;
    let fd = open_at(libc::AT_FDCWD, path.as_os_str(), flags, 0)?;
    let through = cstring(OsStr::new(&format!("/proc/self/fd/{}", fd.as_raw_fd())))?;
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::access(through.as_ptr(), libc::R_OK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    reopen_regular(fd, Fs::Ordinary)
}

/// A host file at a path pinprof made itself (a build id's debug file): never through a
/// symlink at its name, a regular file on an ordinary filesystem (`reopen_regular`), checked
/// against `expect` before any read.
pub fn open_host_file(path: &Path, expect: Expect) -> Result<File> {
    let flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let fd = open_at(libc::AT_FDCWD, path.as_os_str(), flags, 0)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let file = reopen_regular(fd, Fs::Ordinary)
        .with_context(|| format!("cannot read {}", path.display()))?;
    check_file(&file, path, expect)?;
    Ok(file)
}

/// Which filesystems a file may be read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fs {
    /// Ordinary ones, never the kernel's pseudo filesystems: a `/proc/kmsg` bind-mounted at a
    /// path the target names is a "regular file" whose read drains the kernel's log, and
    /// sysfs and debugfs files act when read.
    Ordinary,
    /// The kernel's own files (procfs, sysfs, cgroupfs) at paths pinprof chose.
    Kernel,
}

/// Magic numbers of `statfs(2)` for the kernel's pseudo filesystems (linux/magic.h).
const PSEUDO_FS: [(i64, &str); 12] = [
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0x1cd1, "devpts"),
    (0xcafe_4a11, "bpf"),
    (0x6265_6570, "configfs"),
    (0xde5e_81e4, "efivarfs"),
    (0x6165_676c, "pstore"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
];

/// The one door for reading a file: `fd` is an `O_PATH` handle (opening it ran no driver);
/// the inode must be a regular file on a filesystem `fs` allows, and is then opened for
/// reading through `/proc/self/fd/N` (the same inode, whatever the name leads to now),
/// `O_NOCTTY|O_NONBLOCK`. Anything else (a device, a FIFO, a socket, a directory, a
/// symlink) is refused without being opened.
pub fn reopen_regular(fd: OwnedFd, fs: Fs) -> io::Result<File> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid fd and a stat buffer of the right type.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => None,
        libc::S_IFCHR | libc::S_IFBLK => Some("a device"),
        libc::S_IFIFO => Some("a FIFO"),
        libc::S_IFSOCK => Some("a socket"),
        libc::S_IFDIR => Some("a directory"),
        libc::S_IFLNK => Some("a symbolic link"),
        _ => Some("not a regular file"),
    };
    if let Some(kind) = kind {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{kind}, not a regular file: not opened"),
        ));
    }
    let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid fd (fstatfs takes O_PATH ones) and a statfs buffer of the right type.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut sfs) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // f_type is i64 on glibc, u32/i64 elsewhere
    let magic = sfs.f_type as i64;
    let pseudo = PSEUDO_FS.iter().find(|(m, _)| *m == magic).map(|(_, n)| *n);
    match (fs, pseudo) {
        (Fs::Ordinary, Some(name)) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a file of the kernel's {name} filesystem: not read"),
            ));
        }
        (Fs::Kernel, None) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a file of the kernel's own filesystems: not read",
            ));
        }
        _ => {}
    }
    let flags = libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let file = File::from(open_at(libc::AT_FDCWD, OsStr::new(&path), flags, 0)?);
    // The magic link leads to the inode checked; say so rather than trust it.
    let meta = file.metadata()?;
    if (meta.dev(), meta.ino()) != (st.st_dev, st.st_ino) {
        return Err(io::Error::other("the file changed while it was opened"));
    }
    Ok(file)
}

/// The fd of an open file as a path this process can hand to a library that opens by path
/// (`/proc/self/fd/N`): it leads to exactly this file while it stays open.
pub fn fd_path(file: &impl AsFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", file.as_fd().as_raw_fd()))
}

#[cfg(test)]
mod tests;

/// A new directory of pinprof's own under the temporary directory, mode 0700: made, never
/// found (a name already taken, by anything, is passed over), so nothing another user
/// planted is written into. The caller removes it.
pub fn private_temp_dir(prefix: &str) -> Result<std::path::PathBuf> {
    use std::os::unix::fs::DirBuilderExt as _;
    let base = std::env::temp_dir();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    for attempt in 0..16u32 {
        let dir = base.join(format!(
            "{prefix}-{}-{stamp:x}-{attempt}",
            std::process::id()
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot make a directory in {}", base.display()));
            }
        }
    }
    bail!("cannot make a directory of its own in {}", base.display())
}
