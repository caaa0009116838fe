//! Names a file descriptor of the target the way a person reads it: a path, `pipe:[inode]`, or
//! `socket:[inode]` with its local and peer addresses when the kernel's socket tables have them.

use std::path::Path;

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

/// Names `fd` of process `pid` as it was when the kernel saw it (inode `ino` of type `mode`;
/// 0 when unknown): from /proc if the descriptor still refers to that inode, else from the
/// inode alone (a pipe or socket is named by its inode anyway).
pub fn name_at(pid: u32, fd: u64, ino: u64, mode: u32) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    if ino == 0 {
        return name(pid, fd);
    }
    let same = std::fs::metadata(format!("/proc/{pid}/fd/{fd}")).is_ok_and(|m| m.ino() == ino);
    if same && let Some(named) = name(pid, fd) {
        return Some(named);
    }
    Some(match mode & S_IFMT {
        S_IFIFO => format!("pipe:[{ino}]"),
        S_IFSOCK => match socket_addresses(pid, ino) {
            Some(addresses) => format!("socket:[{ino}] {addresses}"),
            None => format!("socket:[{ino}]"),
        },
        S_IFREG => format!("[closed file, inode {ino}]"),
        _ => format!("[closed descriptor, inode {ino}]"),
    })
}

/// What `fd` of process `pid` is now (None once it is closed or the process is gone).
pub fn name(pid: u32, fd: u64) -> Option<String> {
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    let link = link.to_string_lossy().into_owned();
    let Some(inode) = link
        .strip_prefix("socket:[")
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|i| i.parse::<u64>().ok())
    else {
        return Some(link);
    };
    Some(match socket_addresses(pid, inode) {
        Some(addresses) => format!("{link} {addresses}"),
        None => link,
    })
}

/// "tcp 127.0.0.1:8080 -> 127.0.0.1:51234" for a socket inode of the target's network
/// namespace (read through its own /proc entries), or the path of a unix socket.
fn socket_addresses(pid: u32, inode: u64) -> Option<String> {
    let process = procfs::process::Process::new(pid as i32).ok()?;
    let inet = [("tcp", process.tcp().ok()), ("tcp6", process.tcp6().ok())];
    for (proto, entries) in inet {
        if let Some(e) = entries.into_iter().flatten().find(|e| e.inode == inode) {
            return Some(format!(
                "{proto} {} -> {}",
                e.local_address, e.remote_address
            ));
        }
    }
    let udp = [("udp", process.udp().ok()), ("udp6", process.udp6().ok())];
    for (proto, entries) in udp {
        if let Some(e) = entries.into_iter().flatten().find(|e| e.inode == inode) {
            return Some(format!(
                "{proto} {} -> {}",
                e.local_address, e.remote_address
            ));
        }
    }
    let unix = process.unix().ok()?;
    let entry = unix.into_iter().find(|e| e.inode == inode)?;
    Some(match entry.path {
        Some(path) => format!("unix {}", Path::new(&path).display()),
        None => "unix".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::{io::Write as _, os::fd::AsRawFd as _};

    use super::*;

    #[test]
    fn names_files_pipes_and_sockets_of_this_process() {
        let pid = std::process::id();
        let path = std::env::temp_dir().join(format!("pinprof-fdname-{pid}"));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(b"x").unwrap();
        assert_eq!(
            name(pid, file.as_raw_fd() as u64).unwrap(),
            path.to_string_lossy()
        );
        std::fs::remove_file(&path).unwrap();

        let (reader, _writer) = std::io::pipe().unwrap();
        assert!(
            name(pid, reader.as_raw_fd() as u64)
                .unwrap()
                .starts_with("pipe:[")
        );

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let socket = name(pid, listener.as_raw_fd() as u64).unwrap();
        assert!(socket.starts_with("socket:["), "{socket}");
        assert!(socket.contains(&format!("127.0.0.1:{port}")), "{socket}");

        assert_eq!(name(pid, 1 << 30), None);
        assert!(takes_fd("read") && !takes_fd("futex"));
    }
}
