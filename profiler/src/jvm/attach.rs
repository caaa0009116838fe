//! HotSpot dynamic attach: runs `jcmd` diagnostic commands in a live JVM, loading no agent.
//!
//! The JVM listens on `/tmp/.java_pid<nspid>` (its own /tmp and pid namespace) once its attach
//! listener runs. To start the listener we create `.attach_pid<nspid>` in its cwd (or /tmp) and
//! send SIGQUIT; the JVM's signal dispatcher sees the file and opens the socket instead of
//! printing a thread dump. SIGQUIT kills a process that does not catch it, so we only signal a
//! process that maps `libjvm.so` and has a SIGQUIT handler installed. (A JVM run with -Xrs
//! catches no SIGQUIT but opens its socket at startup, so it is attachable while the socket lasts.)

use std::fs;
use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// Protocol version 1 limits each argument to this many bytes (HotSpot `arg_length_max`).
const ARG_LENGTH_MAX: usize = 1024;
const SIGQUIT_MASK: u64 = 1 << (libc::SIGQUIT - 1);

/// Runs one jcmd-style diagnostic command (e.g. "Thread.print", "VM.system_properties",
/// "Compiler.perfmap", "JFR.start settings=/path name=x") in the live JVM `pid` and returns its
/// output. `timeout` bounds the whole exchange, including waiting for the JVM to start listening.
pub fn jcmd(pid: u32, command: &str, timeout: Duration) -> Result<String> {
    let deadline = Instant::now() + timeout;
    if command.len() > ARG_LENGTH_MAX || command.contains('\0') {
        bail!("jcmd command must be at most {ARG_LENGTH_MAX} bytes without NUL: {command:?}");
    }
    // Opened before any check so that a signal can only reach the process we checked, even if
    // the pid is reused meanwhile.
    let pidfd = pidfd_open(pid)?;
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status (is process {pid} running?)"))?;
    let status = Status::parse(&status, pid)?;
    let socket = PathBuf::from(format!("/proc/{pid}/root/tmp/.java_pid{}", status.nspid));
    if !socket_ready(pid, &socket, status.euid)? {
        start_listener(pid, &pidfd, &status, &socket, deadline)?;
    }
    let reply = exchange(pid, &socket, command, deadline)?;
    let (code, output) = parse_reply(&reply).with_context(|| {
        let start = String::from_utf8_lossy(&reply[..reply.len().min(200)]);
        format!("JVM {pid} sent a malformed attach reply: {start:?}")
    })?;
    if code != 0 {
        bail!(
            "jcmd {command:?} failed in JVM {pid} (return code {code}): {}",
            output.trim_end()
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

/// Creates the trigger file, signals the JVM and waits for its socket.
fn start_listener(
    pid: u32,
    pidfd: &OwnedFd,
    status: &Status,
    socket: &Path,
    deadline: Instant,
) -> Result<()> {
    let maps = fs::read(format!("/proc/{pid}/maps"))
        .with_context(|| format!("cannot read /proc/{pid}/maps"))?;
    if !maps_libjvm(&maps) {
        bail!("process {pid} is not a JVM (it does not map libjvm.so)");
    }
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if attach_disabled(&cmdline) {
        bail!("JVM {pid} was started with -XX:+DisableAttachMechanism; cannot attach");
    }
    if status.sigcgt & SIGQUIT_MASK == 0 {
        bail!(
            "JVM {pid} was started with -Xrs / does not catch SIGQUIT (yet); cannot attach safely"
        );
    }
    let name = format!(".attach_pid{}", status.nspid);
    let _trigger = Trigger::create(&format!("/proc/{pid}/cwd/{name}"), status)
        .or_else(|_| Trigger::create(&format!("/proc/{pid}/root/tmp/{name}"), status))
        .with_context(|| format!("cannot create the attach trigger file {name} for JVM {pid}"))?;
    send_sigquit(pid, pidfd)?;
    // As the JDK's own client does, signal once more halfway: a JVM still starting up can drop
    // the first request.
    let mut resend = Some(Instant::now() + deadline.saturating_duration_since(Instant::now()) / 2);
    let mut backoff = Duration::from_millis(20);
    while !socket_ready(pid, socket, status.euid)? {
        let now = Instant::now();
        if resend.is_some_and(|at| now >= at) {
            resend = None;
            send_sigquit(pid, pidfd)?;
        }
        if now >= deadline {
            bail!(
                "timed out waiting for JVM {pid} to open its attach socket {} (attach disabled?)",
                socket.display()
            );
        }
        std::thread::sleep(backoff.min(deadline - now));
        backoff = (backoff * 2).min(Duration::from_millis(200));
    }
    Ok(())
}

/// The `.attach_pid` file; removed when dropped, whether attach worked or not.
struct Trigger(PathBuf);

impl Trigger {
    fn create(path: &str, status: &Status) -> io::Result<Self> {
        let file = fs::File::create(path)?;
        let trigger = Self(PathBuf::from(path));
        // The JVM ignores a trigger not owned by its euid or root; root's is fine, but matching
        // the owner also keeps the file removable by the JVM's user.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::fchown(&file, Some(status.euid), Some(status.egid))?;
        }
        Ok(trigger)
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Whether the JVM's socket is there; refuses one that another user planted or can hijack.
fn socket_ready(pid: u32, path: &Path, euid: u32) -> Result<bool> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => meta,
        Err(e) if e.kind() != ErrorKind::NotFound => {
            let why = format!("cannot look into JVM {pid}'s /tmp (run as root or as its user)");
            return Err(e).context(why);
        }
        _ => return Ok(false),
    };
    if meta.uid() != euid {
        bail!(
            "attach socket owned by uid {}, not the JVM's uid {euid}",
            meta.uid()
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!("attach socket {} is group/other writable", path.display());
    }
    Ok(true)
}

/// Sends one protocol-1 `jcmd` request and reads the reply to EOF.
fn exchange(pid: u32, socket: &Path, command: &str, deadline: Instant) -> Result<Vec<u8>> {
    let mut stream = UnixStream::connect(socket).map_err(|e| match e.kind() {
        ErrorKind::ConnectionRefused => anyhow::anyhow!(
            "nothing listens on attach socket {} (stale file from an earlier JVM?)",
            socket.display()
        ),
        _ => anyhow::Error::new(e).context(format!("cannot connect to JVM {pid}'s attach socket")),
    })?;
    // SO_RCVTIMEO/SO_SNDTIMEO expiry shows up as WouldBlock; a zero timeout would block forever.
    let remaining = || {
        Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        )
    };
    let fail = |e: io::Error, what: &str| match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => {
            anyhow::anyhow!("timed out waiting for JVM {pid} to answer {command:?}")
        }
        _ => anyhow::Error::new(e).context(format!("cannot {what} JVM {pid}")),
    };
    stream.set_write_timeout(remaining())?;
    let request = format!("1\0jcmd\0{command}\0\0\0");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| fail(e, "send the request to"))?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        if Instant::now() >= deadline {
            return Err(fail(ErrorKind::TimedOut.into(), ""));
        }
        stream.set_read_timeout(remaining())?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(fail(e, "read the reply of")),
        }
    }
    if reply.is_empty() {
        // HotSpot drops peers that are neither root nor its own euid/egid without a word.
        bail!("JVM {pid} closed the attach connection without a reply (not its user or root?)");
    }
    Ok(reply)
}

/// Splits a reply into its return code (first line) and the output after it.
fn parse_reply(reply: &[u8]) -> Option<(i32, String)> {
    let text = String::from_utf8_lossy(reply);
    let (code, output) = text.split_once('\n').unwrap_or((&text, ""));
    Some((code.trim().parse().ok()?, output.to_owned()))
}

fn maps_libjvm(maps: &[u8]) -> bool {
    maps.windows(b"/libjvm.so".len())
        .any(|w| w == b"/libjvm.so")
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

fn pidfd_open(pid: u32) -> Result<OwnedFd> {
    let raw = libc::pid_t::try_from(pid).ok().filter(|&p| p > 0);
    let raw = raw.with_context(|| format!("invalid pid {pid}"))?;
    // SAFETY: pidfd_open takes plain integers and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, 0) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ESRCH) {
            bail!("no process {pid}");
        }
        return Err(err).with_context(|| format!("cannot open process {pid}"));
    }
    // SAFETY: the kernel just returned this fd, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn send_sigquit(pid: u32, pidfd: &OwnedFd) -> Result<()> {
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
    fn reads_maps_and_cmdline() {
        assert!(maps_libjvm(
            b"7f00-7f01 r-xp 0 08:01 1 /opt/jdk/lib/server/libjvm.so\n"
        ));
        assert!(!maps_libjvm(
            b"7f00-7f01 r-xp 0 08:01 1 /usr/lib/libc.so.6\n"
        ));
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
