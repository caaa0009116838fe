//! The way to the server: a thread that sends one push at a time, fed through a queue of
//! one, and each push held to one deadline for all of it (the name lookup, connecting,
//! sending, the answer), whatever the server or the name server does.

use std::{
    io::{self, Read, Write},
    net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs as _},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::{Options, Scheme, Server};

/// Profiles that may wait for the server while it takes the one before.
pub const WAITING: usize = 1;
/// A reply is read up to the end of its status line, at most this many bytes.
const MAX_STATUS_LINE: usize = 8 << 10;
/// One push, ready to go.
pub(super) struct Request {
    pub(super) head: Vec<u8>,
    pub(super) body: Vec<u8>,
}

/// The thread that talks to the server, one push at a time, and the queue to it: the
/// pusher hands profiles over without waiting.
pub(super) struct Outbox {
    tx: mpsc::SyncSender<Request>,
    thread: JoinHandle<()>,
    sent: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    /// Set once the recording has ended: no push goes on past it.
    close_by: Arc<Mutex<Option<Instant>>>,
    timeout: Duration,
}

impl Outbox {
    pub(super) fn start(push: &Options) -> Result<Self> {
        let (tx, rx) = mpsc::sync_channel::<Request>(WAITING);
        let (sent, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let close_by = Arc::new(Mutex::new(None));
        let link = Link {
            server: push.server.clone(),
            tls: push.tls.clone(),
            timeout: push.timeout,
            close_by: Arc::clone(&close_by),
            looking_up: Arc::new(AtomicBool::new(false)),
        };
        let counts = (Arc::clone(&sent), Arc::clone(&failed));
        let thread = std::thread::Builder::new()
            .name("pusher".into())
            .spawn(move || {
                for request in rx {
                    match link.deliver(&request) {
                        Ok(()) => counts.0.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            say!("pinprof: warning: a profile was not pushed: {e:#}");
                            counts.1.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            })
            .context("cannot start the pusher")?;
        Ok(Self {
            tx,
            thread,
            sent,
            failed,
            close_by,
            timeout: push.timeout,
        })
    }

    /// Hands a profile over without waiting: false (the profile dropped) when one already
    /// waits for the server.
    pub(super) fn offer(&self, request: Request) -> bool {
        match self.tx.try_send(request) {
            Ok(()) => true,
            Err(mpsc::TrySendError::Full(_)) => false,
            Err(mpsc::TrySendError::Disconnected(_)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                true
            }
        }
    }

    /// No push goes on past `by` (the recording has ended).
    pub(super) fn close_by(&self, by: Instant) {
        *self.close_by.lock().unwrap_or_else(|e| e.into_inner()) = Some(by);
    }

    /// Hands the last profile over and waits for what is left: until the bound set by
    /// `close_by`, or the push timeout from now if none was (every push ends by its
    /// deadline, and none goes on past the bound); the profiles sent and failed.
    pub(super) fn finish(self, last: Option<Request>) -> (u64, u64) {
        self.close_by
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| Instant::now() + self.timeout);
        if let Some(last) = last
            && self.tx.send(last).is_err()
        {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        drop(self.tx);
        // A pusher that panicked has counted what it did.
        let _ = self.thread.join();
        (
            self.sent.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

/// What the pushing thread needs to reach the server.
struct Link {
    server: Server,
    tls: Option<Arc<rustls::ClientConfig>>,
    timeout: Duration,
    close_by: Arc<Mutex<Option<Instant>>>,
    /// A name lookup is under way (at most one: one left behind by a name server that never
    /// answers is not joined by another each period).
    looking_up: Arc<AtomicBool>,
}

impl Link {
    /// Sends one push and reads the status of the answer, all of it within one deadline.
    fn deliver(&self, request: &Request) -> Result<()> {
        let close_by = *self.close_by.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = Deadline::new(self.timeout, close_by);
        let addresses = self.resolve(&deadline)?;
        let tcp = connect(&addresses, &deadline)?;
        let stream = Timed {
            tcp,
            deadline: &deadline,
        };
        let line = match (self.server.scheme, &self.tls) {
            (Scheme::Http, _) => exchange(stream, &request.head, &request.body)?,
            (Scheme::Https, Some(config)) => {
                let name = rustls::pki_types::ServerName::try_from(self.server.host.clone())
                    .with_context(|| format!("{} is not a TLS server name", self.server.host))?;
                let tls = rustls::ClientConnection::new(Arc::clone(config), name)
                    .context("cannot start TLS")?;
                let stream = rustls::StreamOwned::new(tls, stream);
                exchange(stream, &request.head, &request.body)
                    .with_context(|| format!("TLS with {}", self.server.host))?
            }
            (Scheme::Https, None) => bail!("https:// without TLS settings"),
        };
        let code = line.split_whitespace().nth(1).unwrap_or_default();
        if !code.starts_with('2') {
            // The server's text, as data: escaped, cut.
            let line: String = line.chars().take(200).collect();
            bail!("the server answered {line:?}");
        }
        Ok(())
    }

    /// The server's addresses: an IP address as it is, a name looked up on a thread of its
    /// own (getaddrinfo has no timeout) waited for until the deadline.
    fn resolve(&self, deadline: &Deadline) -> Result<Vec<SocketAddr>> {
        let host = &self.server.host;
        let port = self.server.port;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        if self.looking_up.swap(true, Ordering::AcqRel) {
            bail!(
                "cannot resolve {host}: the lookup begun for an earlier push has not ended \
                 (the name server does not answer)"
            );
        }
        let (tx, rx) = mpsc::channel();
        let (name, looking_up) = (host.clone(), Arc::clone(&self.looking_up));
        let spawned = std::thread::Builder::new()
            .name("push-lookup".into())
            .spawn(move || {
                let found = (name.as_str(), port)
                    .to_socket_addrs()
                    .map(|a| a.collect::<Vec<_>>());
                looking_up.store(false, Ordering::Release);
                let _ = tx.send(found);
            });
        if let Err(e) = spawned {
            self.looking_up.store(false, Ordering::Release);
            return Err(e).context("cannot start a name lookup");
        }
        match rx.recv_timeout(deadline.left()?) {
            Ok(Ok(found)) if !found.is_empty() => Ok(found),
            Ok(Ok(_)) => bail!("{host} has no address"),
            Ok(Err(e)) => Err(e).with_context(|| format!("cannot resolve {host}")),
            Err(_) => bail!(
                "cannot resolve {host}: no answer within the push's deadline ({})",
                deadline.said()
            ),
        }
    }
}

/// Connects to the first of `addresses` that answers before the deadline.
fn connect(addresses: &[SocketAddr], deadline: &Deadline) -> Result<TcpStream> {
    let mut failed = None;
    for address in addresses {
        match TcpStream::connect_timeout(address, deadline.left()?) {
            Ok(tcp) => return Ok(tcp),
            Err(e) => failed = Some((address, e)),
        }
    }
    let (address, e) = failed.context("no address to connect to")?;
    Err(e).with_context(|| format!("cannot connect to {address}"))
}

/// When a push must be done by: its timeout from its start, or the recording's end's
/// bound if sooner.
struct Deadline {
    at: Instant,
    timeout: Duration,
}

impl Deadline {
    fn new(timeout: Duration, close_by: Option<Instant>) -> Self {
        let at = Instant::now() + timeout;
        Self {
            at: close_by.map_or(at, |c| c.min(at)),
            timeout,
        }
    }

    /// The time left, or an error once there is none.
    fn left(&self) -> io::Result<Duration> {
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("not done within the push's deadline ({})", self.said()),
            ));
        }
        Ok(left)
    }

    fn said(&self) -> String {
        format!("--push-timeout {}s", self.timeout.as_secs_f64())
    }
}

/// A connection whose every read and write waits at most until the deadline: a server that
/// trickles a byte at a time cannot stretch a push past it.
struct Timed<'a> {
    tcp: TcpStream,
    deadline: &'a Deadline,
}

/// Whether an error only says that a socket's timeout passed (or a signal came).
fn waited(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            self.tcp.set_read_timeout(Some(self.deadline.left()?))?;
            match self.tcp.read(buf) {
                Err(e) if waited(&e) => {}
                done => return done,
            }
        }
    }
}

impl Write for Timed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            self.tcp.set_write_timeout(Some(self.deadline.left()?))?;
            match self.tcp.write(buf) {
                Err(e) if waited(&e) => {}
                done => return done,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Sends a request and returns the reply's status line: read up to its end
/// ([`MAX_STATUS_LINE`] bytes at most), not to the end of the stream, so a server that
/// closes without TLS's closing message still answers. A line cut short (the deadline, a
/// closed connection) is no answer: its first bytes could read as a success.
fn exchange(mut stream: impl Read + Write, head: &[u8], body: &[u8]) -> Result<String> {
    stream.write_all(head)?;
    stream.write_all(body)?;
    stream.flush()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = reply.windows(2).position(|w| w == b"\r\n") {
            return Ok(String::from_utf8_lossy(&reply[..end]).into_owned());
        }
        if reply.len() >= MAX_STATUS_LINE {
            bail!("the answer's status line is longer than {MAX_STATUS_LINE} bytes");
        }
        match stream.read(&mut buf) {
            Ok(0) => bail!("the server closed the connection before its answer's status line"),
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("no complete answer"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::tests::options;

    /// A server on 127.0.0.1 that takes every connection and, a byte a second, reads the
    /// request and writes a status line that never ends ("HTTP/1.1 200 OK" first).
    fn trickler() -> (u16, Arc<AtomicU64>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let read = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&read);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { break };
                let counted = Arc::clone(&counted);
                std::thread::spawn(move || {
                    let reply = b"HTTP/1.1 200 OK".iter().chain(std::iter::repeat(&b'x'));
                    for &b in reply {
                        let mut one = [0u8];
                        if stream.read(&mut one).is_ok_and(|n| n == 1) {
                            counted.fetch_add(1, Ordering::Relaxed);
                        }
                        if stream.write_all(&[b]).is_err() {
                            break;
                        }
                        std::thread::sleep(Duration::from_secs(1));
                    }
                });
            }
        });
        (port, read)
    }

    #[test]
    fn a_push_to_a_trickling_server_ends_at_its_deadline_and_fails() {
        let (port, read) = trickler();
        let link = Link {
            server: format!("http://127.0.0.1:{port}").parse().unwrap(),
            tls: None,
            timeout: Duration::from_millis(2500),
            close_by: Arc::default(),
            looking_up: Arc::default(),
        };
        // Small (all of it fits in the sockets' buffers: the answer is waited for) and
        // large (the send is).
        for size in [1_000, 16 << 20] {
            let request = Request {
                head: b"POST /ingest HTTP/1.1\r\n\r\n".to_vec(),
                body: vec![b'.'; size],
            };
            let started = Instant::now();
            let failed = link.deliver(&request).unwrap_err();
            let took = started.elapsed();
            assert!(
                format!("{failed:#}").contains("deadline"),
                "{size} bytes: {failed:#}"
            );
            assert!(
                (2.5..3.5).contains(&took.as_secs_f64()),
                "{size} bytes: {took:?}"
            );
        }
        // The server was read from: the push was under way, not refused.
        assert!(read.load(Ordering::Relaxed) >= 2);
        // Once the recording has ended, a push has until the bound, not its whole timeout.
        *link.close_by.lock().unwrap() = Some(Instant::now() + Duration::from_millis(700));
        let started = Instant::now();
        let request = Request {
            head: b"POST /ingest HTTP/1.1\r\n\r\n".to_vec(),
            body: Vec::new(),
        };
        assert!(link.deliver(&request).is_err());
        assert!(
            (0.7..1.5).contains(&started.elapsed().as_secs_f64()),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_profile_that_finds_the_server_busy_is_dropped_and_the_end_is_bounded() {
        let (port, _) = trickler();
        let mut push = options(&format!("http://127.0.0.1:{port}"), None, false);
        push.timeout = Duration::from_secs(2);
        let outbox = Outbox::start(&push).unwrap();
        let request = || Request {
            head: b"POST /ingest HTTP/1.1\r\n\r\n".to_vec(),
            body: Vec::new(),
        };
        // One is sent (held by the server), one waits, the next finds no room.
        assert!(outbox.offer(request()));
        std::thread::sleep(Duration::from_millis(300));
        assert!(outbox.offer(request()));
        assert!(!outbox.offer(request()));
        // Once the recording has ended (as `run` does: the timeout from then), the one
        // being sent, the one waiting and the last have that long in all, not 2 s each.
        let started = Instant::now();
        outbox.close_by(started + push.timeout);
        let (sent, failed) = outbox.finish(Some(request()));
        let took = started.elapsed().as_secs_f64();
        assert_eq!((sent, failed), (0, 3));
        assert!((1.9..2.5).contains(&took), "{took} s");
    }

    #[test]
    fn a_status_line_cut_short_is_no_answer() {
        struct Canned(io::Cursor<Vec<u8>>);
        impl Read for Canned {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                match self.0.read(buf)? {
                    0 => Err(io::Error::new(io::ErrorKind::TimedOut, "deadline")),
                    n => Ok(n),
                }
            }
        }
        impl Write for Canned {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let answer = |reply: &[u8]| exchange(Canned(io::Cursor::new(reply.to_vec())), b"", b"");
        assert_eq!(
            answer(b"HTTP/1.1 204 No Content\r\n").unwrap(),
            "HTTP/1.1 204 No Content"
        );
        assert!(answer(b"HTTP/1.1 200").is_err());
        assert!(answer(&vec![b'x'; 2 * MAX_STATUS_LINE]).is_err());
    }
}
