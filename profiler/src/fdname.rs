//! Names a file descriptor of the target the way a person reads it: a path, `pipe:[inode]`, or
//! `socket:[inode]` with its local and peer addresses when the kernel's socket tables have them.

use std::{
    collections::HashMap,
    path::Path,
    time::{Duration, Instant},
};

use crate::process::Process;

/// System calls whose first argument is a file descriptor.
const FD_FIRST: &[&str] = &[
    "read",
    "write",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "recvfrom",
    "sendto",
    "recvmsg",
    "sendmsg",
    "recvmmsg",
    "sendmmsg",
    "accept",
    "accept4",
    "connect",
    "fsync",
    "fdatasync",
    "sync_file_range",
    "fallocate",
    "ftruncate",
    "flock",
    "ioctl",
    "fcntl",
    "getdents64",
    "splice",
    "sendfile",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "close",
    "lseek",
    "fstat",
    "copy_file_range",
    "shutdown",
    "syncfs",
];

/// Whether system call `name` takes a file descriptor first.
pub fn takes_fd(name: &str) -> bool {
    FD_FIRST.contains(&name)
}

/// `S_IFMT` types of an inode's mode.
const S_IFMT: u32 = 0o170_000;
const S_IFIFO: u32 = 0o010_000;
const S_IFSOCK: u32 = 0o140_000;
const S_IFREG: u32 = 0o100_000;

/// The kernel's socket tables are re-read at most this often (a busy server has thousands of
/// sockets: reading them per event would slow the drain).
const SOCKET_TABLE_REFRESH: Duration = Duration::from_millis(500);

/// Names the file descriptors of one process.
pub struct FdNamer {
    process: Process,
    /// Socket inode -> "tcp 127.0.0.1:8080 -> 127.0.0.1:51234", from the last read.
    sockets: HashMap<u64, String>,
    sockets_read: Option<Instant>,
}

impl FdNamer {
    pub fn new(process: &Process) -> Self {
        Self {
            process: process.clone(),
            sockets: HashMap::new(),
            sockets_read: None,
        }
    }

    /// Names `fd` as it was when the kernel saw it (inode `ino` of type `mode`; 0 when
    /// unknown): from /proc if the descriptor still refers to that inode, else from the inode
    /// alone (a pipe or socket is named by its inode anyway).
    pub fn name_at(&mut self, fd: u64, ino: u64, mode: u32) -> Option<String> {
        use std::os::unix::fs::MetadataExt as _;
        if ino == 0 {
            return self.name(fd);
        }
        let same = self
            .process
            .metadata(&format!("fd/{fd}"))
            .is_ok_and(|m| m.ino() == ino);
        if same && let Some(named) = self.name(fd) {
            return Some(named);
        }
        Some(match mode & S_IFMT {
            S_IFIFO => format!("pipe:[{ino}]"),
            S_IFSOCK => match self.socket(ino) {
                Some(addresses) => format!("socket:[{ino}] {addresses}"),
                None => format!("socket:[{ino}]"),
            },
            S_IFREG => format!("[closed file, inode {ino}]"),
            _ => format!("[closed descriptor, inode {ino}]"),
        })
    }

    /// What `fd` is now (None once it is closed or the process is gone).
    pub fn name(&mut self, fd: u64) -> Option<String> {
        let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
        let link = self.process.read_link(&format!("fd/{fd}")).ok()?;
        let link = link.to_string_lossy().into_owned();
        let Some(inode) = link
            .strip_prefix("socket:[")
            .and_then(|rest| rest.strip_suffix(']'))
            .and_then(|i| i.parse::<u64>().ok())
        else {
            return Some(link);
        };
        Some(match self.socket(inode) {
            Some(addresses) => format!("{link} {addresses}"),
            None => link,
        })
    }

    /// A socket's addresses by inode, re-reading the tables on a miss (at most so often).
    fn socket(&mut self, inode: u64) -> Option<String> {
        if let Some(found) = self.sockets.get(&inode) {
            return Some(found.clone());
        }
        if self
            .sockets_read
            .is_some_and(|t| t.elapsed() < SOCKET_TABLE_REFRESH)
        {
            return None;
        }
        self.sockets_read = Some(Instant::now());
        self.sockets = socket_tables(&self.process);
        self.sockets.get(&inode).cloned()
    }
}

/// Every socket of the target's network namespace (read through its own /proc entries), by
/// inode: "tcp local -> remote", or "unix <path>".
fn socket_tables(process: &Process) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    let Ok(process) = process.procfs() else {
        return out;
    };
    let inet = [("tcp", process.tcp().ok()), ("tcp6", process.tcp6().ok())];
    for (proto, entries) in inet {
        for e in entries.into_iter().flatten() {
            out.insert(
                e.inode,
                format!("{proto} {} -> {}", e.local_address, e.remote_address),
            );
        }
    }
    let udp = [("udp", process.udp().ok()), ("udp6", process.udp6().ok())];
    for (proto, entries) in udp {
        for e in entries.into_iter().flatten() {
            out.insert(
                e.inode,
                format!("{proto} {} -> {}", e.local_address, e.remote_address),
            );
        }
    }
    for e in process.unix().ok().into_iter().flatten() {
        let name = match e.path {
            Some(path) => format!("unix {}", Path::new(&path).display()),
            None => "unix".to_string(),
        };
        out.insert(e.inode, name);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::{io::Write as _, os::fd::AsRawFd as _};

    use super::*;

    #[test]
    fn names_files_pipes_and_sockets_of_this_process() {
        let dir = crate::safe_fs::private_temp_dir("pinprof-fdname").unwrap();
        let path = dir.join("named");
        let mut file = std::fs::File::create_new(&path).unwrap();
        file.write_all(b"x").unwrap();
        let mut namer = FdNamer::new(&Process::myself().unwrap());
        assert_eq!(
            namer.name(file.as_raw_fd() as u64).unwrap(),
            path.to_string_lossy()
        );
        std::fs::remove_dir_all(&dir).unwrap();

        let (reader, _writer) = std::io::pipe().unwrap();
        assert!(
            namer
                .name(reader.as_raw_fd() as u64)
                .unwrap()
                .starts_with("pipe:[")
        );

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let socket = namer.name(listener.as_raw_fd() as u64).unwrap();
        assert!(socket.starts_with("socket:["), "{socket}");
        assert!(socket.contains(&format!("127.0.0.1:{port}")), "{socket}");

        assert_eq!(namer.name(1 << 30), None);
        // A pipe closed before it is named keeps its name from the inode the kernel saw.
        let ino = {
            use std::os::unix::fs::MetadataExt as _;
            let (reader, _writer) = std::io::pipe().unwrap();
            std::fs::metadata(format!("/proc/self/fd/{}", reader.as_raw_fd()))
                .unwrap()
                .ino()
        };
        assert_eq!(
            namer.name_at(999, ino, S_IFIFO).unwrap(),
            format!("pipe:[{ino}]")
        );
        assert!(takes_fd("read") && !takes_fd("futex"));
    }
}
