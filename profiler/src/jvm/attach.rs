//! HotSpot dynamic attach: runs `jcmd` diagnostic commands in a live JVM, loading no agent.
//!
//! The JVM listens on `/tmp/.java_pid<nspid>` (its own /tmp and pid namespace) once its attach
//! listener runs. To start the listener we create `.attach_pid<nspid>` in its cwd (or /tmp) and
//! send SIGQUIT; the JVM's signal dispatcher sees the file and opens the socket instead of
//! printing a thread dump. SIGQUIT kills a process that does not catch it, so we only signal a
//! process that maps `libjvm.so` and has a SIGQUIT handler installed. (A JVM run with -Xrs
//! catches no SIGQUIT but opens its socket at startup, so it is attachable while the socket lasts.)
//!
//! The JVM's owner may be hostile, and pinprof runs as root: the trigger is created
//! `O_EXCL|O_NOFOLLOW` in a directory opened as the JVM sees it and removed only while it is
//! ours; the socket is reached through that same directory and talked to only if the process
//! listening on it is the target; every wait has a deadline, the reply a size cap, and a
//! Ctrl-C ends the exchange at once.

use std::ffi::OsStr;
use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{
    process::Process,
    safe_fs::{Dir, TargetRoot},
};

/// Protocol version 1 limits each argument to this many bytes (HotSpot `arg_length_max`).
/// How much of a failed command's reply an error quotes.
const MAX_FAILURE_TEXT: usize = 2048;
const ARG_LENGTH_MAX: usize = 1024;
const SIGQUIT_MASK: u64 = 1 << (libc::SIGQUIT - 1);
/// Replies longer than this are refused (the commands pinprof sends answer in kilobytes).
pub const MAX_REPLY: usize = 4 << 20;
/// The JVM's command line is read up to this (only to look for a flag).
const MAX_CMDLINE: u64 = 16 << 20;
/// How often waits look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// Leave to use the attach protocol on one JVM: made only by `Hotspot::attach_permit`, once
/// the JVM's own `DisableAttachMechanism` flag has been read and found off.
pub struct AttachPermit(());

impl AttachPermit {
    pub(super) fn new() -> Self {
        Self(())
    }
}

/// Runs one jcmd-style diagnostic command (e.g. "VM.system_properties") in the live JVM
/// `process` and returns its output. `timeout` bounds the whole exchange, including waiting for the JVM
/// to start listening; `stop` (Ctrl-C) ends it early.
pub fn jcmd(
    process: &Process,
    command: &str,
    timeout: Duration,
    _permit: &AttachPermit,
    stop: &AtomicBool,
) -> Result<String> {
    let deadline = Instant::now() + timeout;
    if command.len() > ARG_LENGTH_MAX || command.contains('\0') {
        bail!("jcmd command must be at most {ARG_LENGTH_MAX} bytes without NUL: {command:?}");
    }
    // Read, and signalled (its pidfd), as the process attached to: never another that took
    // its pid since.
    let pid = process.pid();
    let status = process
        .read_to_string("status")
        .with_context(|| format!("cannot read /proc/{pid}/status (is process {pid} running?)"))?;
    let status = Status::parse(&status, pid)?;
    // HotSpot serves only root and its own user: anyone else's trigger and SIGQUIT would only
    // make it print thread dumps.
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if me != 0 && me != status.euid {
        bail!(
            "pinprof runs as uid {me}, neither root nor the JVM's user (uid {}), whom alone the \
             JVM answers: not attaching (no trigger, no signal)",
            status.euid
        );
    }
    let tmp = TargetRoot::open(process)?.open_dir(Path::new("/tmp"))?;
    let socket = format!(".java_pid{}", status.nspid);
    if !socket_ready(pid, &tmp, &socket, status.euid)? {
        start_listener(process, &status, &tmp, &socket, deadline, stop)?;
    }
    let reply = exchange(process, &tmp, &socket, status.euid, command, deadline, stop)?;
    let (code, output) = parse_reply(&reply).with_context(|| {
        let start = String::from_utf8_lossy(&reply[..reply.len().min(200)]);
        format!("JVM {pid} sent a malformed attach reply: {start:?}")
    })?;
    if code != 0 {
        // The JVM's words, which its owner chooses: escaped and cut to what a person reads.
        bail!(
            "jcmd {command:?} failed in JVM {pid} (return code {code}): {}",
            crate::text::for_terminal(output.trim_end(), MAX_FAILURE_TEXT)
        );
    }
    Ok(output)
}

/// The fields of `/proc/<pid>/status` that attach needs.
struct Status {
    nspid: u32,
    euid: u32,
    egid: u32,
    sigcgt: u64,
}

impl Status {
    fn parse(text: &str, pid: u32) -> Result<Self> {
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(str::split_whitespace)
        };
        // Second column of Uid:/Gid: is the effective id.
        let effective = |name: &str| -> Result<u32> {
            let value = field(name).and_then(|mut f| f.nth(1));
            value
                .and_then(|v| v.parse().ok())
                .with_context(|| format!("no {name}: in status"))
        };
        // Kernels before 4.1 have no NSpid: and no pid namespaces to translate.
        let nspid = match field("NSpid").and_then(Iterator::last) {
            Some(v) => v.parse().with_context(|| format!("bad NSpid: {v}"))?,
            None => pid,
        };
        let sigcgt = field("SigCgt")
            .and_then(|mut f| f.next())
            .context("no SigCgt: in status")?;
        let sigcgt =
            u64::from_str_radix(sigcgt, 16).with_context(|| format!("bad SigCgt: {sigcgt}"))?;
        Ok(Self {
            nspid,
            euid: effective("Uid")?,
            egid: effective("Gid")?,
            sigcgt,
        })
    }
}

/// Creates the trigger file, signals the JVM and waits for its socket; the trigger is gone
/// again when this returns, whatever happened.
fn start_listener(
    process: &Process,
    status: &Status,
    tmp: &Dir,
    socket: &str,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<()> {
    let pid = process.pid();
    let libjvm = crate::procmaps::Maps::open(process)
        .and_then(|mut maps| maps.library("libjvm.so"))
        .with_context(|| format!("cannot read /proc/{pid}/maps"))?;
    if libjvm.is_none() {
        bail!("process {pid} is not a JVM (it does not map libjvm.so)");
    }
    // Fail closed: a command line that cannot be read may hold the flag.
    let cmdline = process
        .read("cmdline", MAX_CMDLINE)
        .with_context(|| format!("cannot read /proc/{pid}/cmdline"))?;
    if attach_disabled(&cmdline) {
        bail!("JVM {pid} was started with -XX:+DisableAttachMechanism; cannot attach");
    }
    if status.sigcgt & SIGQUIT_MASK == 0 {
        bail!(
            "JVM {pid} was started with -Xrs / does not catch SIGQUIT (yet); cannot attach safely"
        );
    }
    let _trigger = create_trigger(process, status, tmp)?;
    send_sigquit(pid, process.pidfd())?;
    // As the JDK's own client does, signal once more halfway: a JVM still starting up can drop
    // the first request.
    let mut resend = Some(Instant::now() + deadline.saturating_duration_since(Instant::now()) / 2);
    let mut backoff = Duration::from_millis(20);
    while !socket_ready(pid, tmp, socket, status.euid)? {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted while waiting for JVM {pid} to open its attach socket");
        }
        if resend.is_some_and(|at| now >= at) {
            resend = None;
            send_sigquit(pid, process.pidfd())?;
        }
        if now >= deadline {
            bail!(
                "timed out waiting for JVM {pid} to open its attach socket /tmp/{socket} \
                 (attach disabled?)"
            );
        }
        std::thread::sleep(backoff.min(deadline - now).min(POLL));
        backoff = (backoff * 2).min(Duration::from_millis(200));
    }
    Ok(())
}

/// Creates `.attach_pid<nspid>` where the JVM looks for it: its working directory, else its
/// /tmp. Only a file this call creates is used (and given to the JVM's user, whose files the
/// JVM trusts); an entry already there of any kind, a planted symlink included, is left alone.
fn create_trigger(
    process: &Process,
    status: &Status,
    tmp: &Dir,
) -> Result<crate::safe_fs::Created> {
    let pid = process.pid();
    let name = format!(".attach_pid{}", status.nspid);
    let cwd = open_cwd(process);
    let mut why = Vec::new();
    for (dir, place) in [
        (cwd.as_ref().ok(), "working directory"),
        (Some(tmp), "/tmp"),
    ] {
        let Some(dir) = dir else {
            if let Err(e) = &cwd {
                why.push(format!("its {place}: {e:#}"));
            }
            continue;
        };
        if let Err(e) = trigger_place(dir, status.euid) {
            why.push(format!("its {place} {e}"));
            continue;
        }
        match dir.create_new(OsStr::new(&name)) {
            Ok(trigger) => {
                // SAFETY: geteuid has no preconditions.
                if unsafe { libc::geteuid() } == 0 {
                    trigger
                        .chown(status.euid, status.egid)
                        .with_context(|| format!("cannot give {name} to the JVM's user"))?;
                }
                return Ok(trigger);
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                why.push(format!(
                    "its {place} already has a {name} that pinprof did not make"
                ));
            }
            Err(e) => why.push(format!("its {place}: {e}")),
        }
    }
    bail!(
        "cannot create the attach trigger {name} for JVM {pid}: {}",
        why.join("; ")
    )
}

/// Whether pinprof may make the trigger in `dir`: a directory of the JVM's user, or a shared
/// sticky one such as /tmp. The JVM's owner chooses its working directory (it may be /etc)
/// and, in a namespace of its own, what its /tmp is: a file made and given to that user
/// anywhere else would be theirs in a place that is not.
fn trigger_place(dir: &Dir, jvm_euid: u32) -> Result<(), String> {
    let st = dir
        .stat_self()
        .map_err(|e| format!("cannot be looked at: {e}"))?;
    let shared_sticky = st.st_uid == 0 && st.st_mode & 0o1002 == 0o1002;
    if st.st_uid == jvm_euid || shared_sticky {
        return Ok(());
    }
    Err(format!(
        "belongs to uid {}, not the JVM's user, and is not a shared sticky directory: \
         pinprof makes no file there",
        st.st_uid
    ))
}

/// The JVM's working directory, as a directory fd (the `cwd` magic link is the kernel's).
fn open_cwd(process: &Process) -> Result<Dir> {
    let path = format!("/proc/{process}/cwd");
    let fd = process
        .open("cwd", libc::O_RDONLY | libc::O_DIRECTORY)
        .with_context(|| format!("cannot open {path}"))?;
    Ok(Dir::from_fd(fd, path.into()))
}

/// Whether the JVM's socket is there (checked for good by `open_socket`).
fn socket_ready(pid: u32, tmp: &Dir, name: &str, euid: u32) -> Result<bool> {
    match open_socket(pid, tmp, name, euid) {
        Ok(_) => Ok(true),
        Err(SocketError::Absent) => Ok(false),
        Err(SocketError::Refused(e)) => Err(e),
    }
}

enum SocketError {
    /// Not there (yet), or not a socket (yet).
    Absent,
    Refused(anyhow::Error),
}

/// A handle on the JVM's socket inode itself (`O_PATH`, no symlink followed), refused when
/// another user planted it or others can write to it. Connecting through this handle reaches
/// exactly the inode checked, whatever is renamed into its place meanwhile.
fn open_socket(pid: u32, tmp: &Dir, name: &str, euid: u32) -> Result<OwnedFd, SocketError> {
    let fd = match tmp.open_path(OsStr::new(name)) {
        Ok(fd) => fd,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ELOOP)) => {
            return Err(SocketError::Absent);
        }
        Err(e) => {
            let why = format!("cannot look into JVM {pid}'s /tmp (run as root or as its user)");
            return Err(SocketError::Refused(anyhow::Error::new(e).context(why)));
        }
    };
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid fd and a stat buffer of the right type.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        let e = io::Error::last_os_error();
        return Err(SocketError::Refused(e.into()));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(SocketError::Absent);
    }
    if st.st_uid != euid {
        return Err(SocketError::Refused(anyhow::anyhow!(
            "attach socket owned by uid {}, not the JVM's uid {euid}",
            st.st_uid
        )));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(SocketError::Refused(anyhow::anyhow!(
            "attach socket /tmp/{name} of JVM {pid} is group/other writable"
        )));
    }
    Ok(fd)
}

/// Sends one protocol-1 `jcmd` request and reads the reply to EOF (at most `MAX_REPLY`).
fn exchange(
    process: &Process,
    tmp: &Dir,
    socket: &str,
    euid: u32,
    command: &str,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<Vec<u8>> {
    let pid = process.pid();
    let mut stream = connect(pid, tmp, socket, euid, deadline, stop)?;
    // The listener was process `pid`, and the process attached to holds that pid still: it
    // is the one (no other could have had the pid while it did).
    process.check()?;
    let timed_out = || anyhow::anyhow!("timed out waiting for JVM {pid} to answer {command:?}");
    let request = format!("1\0jcmd\0{command}\0\0\0");
    let mut sent = 0;
    while sent < request.len() {
        wait_ready(&stream, libc::POLLOUT, deadline, stop)?
            .then_some(())
            .ok_or_else(timed_out)?;
        match stream.write(&request.as_bytes()[sent..]) {
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(e) => {
                return Err(e).with_context(|| format!("cannot send the request to JVM {pid}"));
            }
        }
    }
    let mut reply = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        wait_ready(&stream, libc::POLLIN, deadline, stop)?
            .then_some(())
            .ok_or_else(timed_out)?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if reply.len() + n > MAX_REPLY {
                    bail!(
                        "JVM {pid} sent more than {MAX_REPLY} bytes in answer to {command:?}: refused"
                    );
                }
                reply.extend_from_slice(&buf[..n]);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e).with_context(|| format!("cannot read the reply of JVM {pid}")),
        }
    }
    if reply.is_empty() {
        // HotSpot drops peers that are neither root nor its own euid/egid without a word.
        bail!("JVM {pid} closed the attach connection without a reply (not its user or root?)");
    }
    Ok(reply)
}

/// Connects to the socket without blocking past the deadline, through a handle on the socket
/// inode checked (never a path that could lead elsewhere), and only to the target itself:
/// the peer that listens must be process `pid`.
fn connect(
    pid: u32,
    tmp: &Dir,
    socket: &str,
    euid: u32,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<UnixStream> {
    let inode = match open_socket(pid, tmp, socket, euid) {
        Ok(fd) => fd,
        Err(SocketError::Absent) => bail!("JVM {pid}'s attach socket /tmp/{socket} has gone"),
        Err(SocketError::Refused(e)) => return Err(e),
    };
    // /proc/self/fd/<handle>: the very socket inode checked, not whatever has its name now.
    let path = format!("/proc/self/fd/{}", inode.as_raw_fd());
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if path.len() >= addr.sun_path.len() {
        bail!("attach socket path too long: {path}");
    }
    for (dst, src) in addr.sun_path.iter_mut().zip(path.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: plain integers; a new fd or -1.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error()).context("cannot make a socket");
    }
    // SAFETY: a fresh fd nothing else owns.
    let stream = UnixStream::from(unsafe { OwnedFd::from_raw_fd(fd) });
    loop {
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        // SAFETY: a valid socket and a sockaddr_un of the length given.
        let rc = unsafe {
            libc::connect(
                stream.as_raw_fd(),
                (&raw const addr).cast::<libc::sockaddr>(),
                len,
            )
        };
        if rc == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            // A full backlog (EAGAIN) or a connect under way: wait and look again.
            Some(libc::EAGAIN | libc::EINPROGRESS | libc::EINTR) => {
                if stop.load(Ordering::Relaxed) {
                    bail!("interrupted while connecting to JVM {pid}");
                }
                if Instant::now() >= deadline {
                    bail!("timed out connecting to JVM {pid}'s attach socket");
                }
                std::thread::sleep(POLL.min(deadline - Instant::now()));
            }
            Some(libc::EISCONN) => break,
            Some(libc::ECONNREFUSED) => bail!(
                "nothing listens on JVM {pid}'s attach socket /tmp/{socket} (stale file from \
                 an earlier JVM?)"
            ),
            _ => {
                return Err(e)
                    .with_context(|| format!("cannot connect to JVM {pid}'s attach socket"));
            }
        }
    }
    let peer = peer_pid(&stream)?;
    if peer != Some(pid) {
        bail!(
            "the attach socket of JVM {pid} is served by another process ({}): not talking to it",
            peer.map_or("unknown".into(), |p| p.to_string())
        );
    }
    Ok(stream)
}

/// The pid (in pinprof's namespace) of the process that made the listening socket.
fn peer_pid(stream: &UnixStream) -> Result<Option<u32>> {
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket and a ucred buffer of the length given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error()).context("cannot ask who serves the attach socket");
    }
    Ok(u32::try_from(cred.pid).ok().filter(|&p| p > 0))
}

/// Waits until `stream` is ready for `events`, the deadline passes (false), or a stop request
/// comes (an error).
fn wait_ready(
    stream: &UnixStream,
    events: libc::c_short,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<bool> {
    loop {
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted while talking to the JVM");
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        let mut pfd = libc::pollfd {
            fd: stream.as_raw_fd(),
            events,
            revents: 0,
        };
        let ms = left.min(POLL).as_millis().max(1) as libc::c_int;
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc > 0 {
            return Ok(true);
        }
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != ErrorKind::Interrupted {
                return Err(e).context("cannot wait for the JVM");
            }
        }
    }
}

/// Splits a reply into its return code (first line) and the output after it.
fn parse_reply(reply: &[u8]) -> Option<(i32, String)> {
    let text = String::from_utf8_lossy(reply);
    let (code, output) = text.split_once('\n').unwrap_or((&text, ""));
    Some((code.trim().parse().ok()?, output.to_owned()))
}

/// The last of `-XX:±DisableAttachMechanism` wins, as in HotSpot's own flag parsing.
fn attach_disabled(cmdline: &[u8]) -> bool {
    cmdline
        .split(|&b| b == 0)
        .fold(false, |disabled, arg| match arg {
            b"-XX:+DisableAttachMechanism" => true,
            b"-XX:-DisableAttachMechanism" => false,
            _ => disabled,
        })
}

fn send_sigquit(pid: u32, pidfd: BorrowedFd) -> Result<()> {
    let null = std::ptr::null::<libc::siginfo_t>();
    // SAFETY: plain integers and a null siginfo, which means "as kill() would".
    let sys = libc::SYS_pidfd_send_signal;
    let rc = unsafe { libc::syscall(sys, pidfd.as_raw_fd(), libc::SIGQUIT, null, 0) };
    if rc != 0 {
        let err = io::Error::last_os_error();
        return Err(err).with_context(|| format!("cannot send SIGQUIT to JVM {pid}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tjava\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n\
        NSpid:\t4242\t7\nUid:\t1000\t1001\t1000\t1001\nGid:\t50\t51\t50\t51\n\
        SigIgn:\t0000000000000000\nSigCgt:\t2000000181005ccf\n";

    #[test]
    fn parses_status() {
        let s = Status::parse(STATUS, 4242).unwrap();
        assert_eq!((s.nspid, s.euid, s.egid), (7, 1001, 51));
        assert_eq!(s.sigcgt, 0x2000000181005ccf);
        assert_ne!(s.sigcgt & SIGQUIT_MASK, 0);
        // Without NSpid: (old kernels) the pid is the namespace pid; -Xrs leaves SIGQUIT uncaught.
        let text = STATUS
            .replace("NSpid:\t4242\t7\n", "")
            .replace("5ccf", "5cc8");
        let s = Status::parse(&text, 4242).unwrap();
        assert_eq!(s.nspid, 4242);
        assert_eq!(s.sigcgt & SIGQUIT_MASK, 0);
        assert!(Status::parse("Name:\tjava\n", 1).is_err());
    }

    use std::{os::unix::net::UnixListener, sync::Arc, thread};

    /// An attach socket served by this very process (the target, for the test): what it does
    /// with a connection is up to `serve`. Removed when dropped.
    struct FakeJvm {
        path: std::path::PathBuf,
    }

    impl FakeJvm {
        fn serve(target: u32, serve: impl Fn(UnixStream) + Send + 'static) -> Self {
            let path = std::path::PathBuf::from(format!("/tmp/.java_pid{target}"));
            let _ = std::fs::remove_file(&path);
            let listener = UnixListener::bind(&path).unwrap();
            thread::spawn(move || {
                for stream in listener.incoming() {
                    match stream {
                        Ok(stream) => serve(stream),
                        Err(_) => break,
                    }
                }
            });
            Self { path }
        }
    }

    impl Drop for FakeJvm {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    fn ask(target: u32, timeout: Duration, stop: &AtomicBool) -> (Result<String>, Duration) {
        let started = Instant::now();
        let target = Process::attach(target).unwrap();
        let result = jcmd(&target, "VM.version", timeout, &AttachPermit::new(), stop);
        (result, started.elapsed())
    }

    // One test, so that the fake sockets (named by this process's pid) never overlap.
    #[test]
    fn hostile_listeners_cost_a_deadline_and_bounded_memory() {
        let me = std::process::id();
        let stop = AtomicBool::new(false);

        // A well-behaved JVM answers.
        let jvm = FakeJvm::serve(me, |mut s| {
            let mut request = [0u8; 64];
            let _ = s.read(&mut request);
            let _ = s.write_all(b"0\nOpenJDK 64-Bit Server VM\n");
        });
        let (answer, _) = ask(me, Duration::from_secs(5), &stop);
        assert_eq!(answer.unwrap(), "OpenJDK 64-Bit Server VM\n");
        drop(jvm);

        // A listener that never answers: given up at the deadline.
        let held = Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = Arc::clone(&held);
        let jvm = FakeJvm::serve(me, move |s| keep.lock().unwrap().push(s));
        let (answer, took) = ask(me, Duration::from_millis(800), &stop);
        let err = format!("{:#}", answer.unwrap_err());
        assert!(err.contains("timed out"), "{err}");
        assert!(took < Duration::from_secs(5), "{took:?}");

        // Ctrl-C while it does not answer: ends at once, long before the deadline.
        let stop = Arc::new(AtomicBool::new(false));
        let later = Arc::clone(&stop);
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            later.store(true, Ordering::Relaxed);
        });
        let (answer, took) = ask(me, Duration::from_secs(60), &stop);
        let err = format!("{:#}", answer.unwrap_err());
        assert!(err.contains("interrupted"), "{err}");
        assert!(took < Duration::from_secs(3), "{took:?}");
        drop(jvm);
        held.lock().unwrap().clear();

        // A listener that floods: refused past the cap, not read for ever.
        let stop = AtomicBool::new(false);
        let jvm = FakeJvm::serve(me, |mut s| {
            thread::spawn(move || {
                let chunk = vec![b'x'; 1 << 16];
                while s.write_all(&chunk).is_ok() {}
            });
        });
        let (answer, took) = ask(me, Duration::from_secs(30), &stop);
        let err = format!("{:#}", answer.unwrap_err());
        assert!(
            err.contains(&format!("more than {MAX_REPLY} bytes")),
            "{err}"
        );
        assert!(took < Duration::from_secs(20), "{took:?}");
        drop(jvm);
    }

    /// A socket at the target's name that another process serves is not talked to.
    #[test]
    fn a_socket_served_by_another_process_is_refused() {
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = other.id();
        let answered = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&answered);
        let jvm = FakeJvm::serve(pid, move |mut s| {
            seen.store(true, Ordering::Relaxed);
            let _ = s.write_all(b"0\nsecrets\n");
        });
        let stop = AtomicBool::new(false);
        let (answer, _) = ask(pid, Duration::from_secs(5), &stop);
        let err = format!("{:#}", answer.unwrap_err());
        assert!(err.contains("served by another process"), "{err}");
        drop(jvm);
        let _ = other.kill();
        let _ = other.wait();
    }

    /// The trigger goes only where the JVM's user may make files anyway.
    #[test]
    fn triggers_go_only_to_the_jvms_own_or_shared_sticky_directories() {
        let base = crate::safe_fs::private_temp_dir("pinprof-trigger").unwrap();
        let (own, roots, sticky) = (base.join("own"), base.join("etc"), base.join("tmp"));
        for dir in [&own, &roots, &sticky] {
            std::fs::create_dir_all(dir).unwrap();
        }
        use std::os::unix::fs::PermissionsExt as _;
        std::os::unix::fs::chown(&own, Some(4242), Some(4242)).unwrap();
        std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let open = |p: &std::path::Path| Dir::open(p).unwrap();
        assert!(trigger_place(&open(&own), 4242).is_ok());
        assert!(trigger_place(&open(&sticky), 4242).is_ok());
        let err = trigger_place(&open(&roots), 4242).unwrap_err();
        assert!(err.contains("not a shared sticky directory"), "{err}");
        // Root's own JVM: its directories are its user's.
        assert!(trigger_place(&open(&roots), 0).is_ok());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn parses_replies() {
        let ok = parse_reply(b"0\nhello\nworld\n");
        assert_eq!(ok, Some((0, "hello\nworld\n".into())));
        let failed = parse_reply(b"-1\njava.lang.IllegalArgumentException: Unknown");
        assert_eq!(
            failed,
            Some((-1, "java.lang.IllegalArgumentException: Unknown".into()))
        );
        assert_eq!(parse_reply(b"0"), Some((0, String::new())));
        assert_eq!(parse_reply(b"oops\n"), None);
    }

    #[test]
    fn reads_cmdline() {
        assert!(attach_disabled(
            b"java\0-XX:+DisableAttachMechanism\0Main\0"
        ));
        let reenabled = b"java\0-XX:+DisableAttachMechanism\0-XX:-DisableAttachMechanism\0";
        assert!(!attach_disabled(reenabled));
        assert!(!attach_disabled(
            b"java\0Main\0-XX:+DisableAttachMechanismX\0"
        ));
    }
}
