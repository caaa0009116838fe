//! Continuous profiling: while recording, a pprof profile of each period is sent to a
//! Pyroscope server's ingest API (`POST /ingest?name=APP{labels}&from=S&until=S&format=pprof`,
//! multipart: the profile, and its sample types' units and aggregation), until the recording
//! stops. What was sent is forgotten (folded into per-thread sums), so memory stays bounded
//! however long it runs; a profile the server refuses or cannot take is counted and said,
//! never queued up.
//!
//! The server may be slow or hostile, and the target's text goes into the profile's name, so:
//! - the recorder never waits on the pusher: records reach it through a tee bounded by the
//!   memory budget's share for queues, and a period whose records it missed is not pushed
//!   (counted, said);
//! - the pusher never waits on the server: profiles go to a thread of their own through a
//!   queue of one ([`WAITING`]); a profile that finds it full is dropped (counted, said);
//! - a push has one deadline (`--push-timeout`) for all of it: the name lookup (on a thread of
//!   its own, getaddrinfo having no timeout), connecting, sending and reading the answer,
//!   each read and write given what is left; once the recording has ended, what is still
//!   pushed has that long in all;
//! - credentials never go in clear text unless asked for (`--push-cleartext-credentials`);
//! - the application name and label values hold only characters Pyroscope's `name{k=v,...}`
//!   takes as such, the target's and the host's text escaped, so they cannot add a label.

mod link;
mod name;

use std::{
    fs::File,
    path::Path,
    sync::{Arc, atomic::AtomicBool, mpsc},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result, anyhow, bail};

use crate::{analysis::Analysis, model::Model, record, recording::Record};
pub use link::WAITING;
use link::{Outbox, Request};
use name::series_name;
pub use name::{AppName, Label};

/// Where and how to push.
#[derive(Clone, Debug)]
pub struct Options {
    pub server: Server,
    /// One profile per this long.
    pub every: Duration,
    /// The longest one push may take, all of it (looking the server up, connecting, sending,
    /// reading the answer); also the longest pinprof waits for pushes once recording ended.
    pub timeout: Duration,
    /// The application name (`name`'s part before the labels).
    pub app: AppName,
    /// Labels added to every profile (`pid` and `host` are always there).
    pub labels: Vec<Label>,
    /// Who pinprof says it is to the server.
    pub auth: Option<Auth>,
    /// Credentials may go to an http:// server, in clear text (`--push-cleartext-credentials`).
    pub cleartext_credentials: bool,
    /// The tenant of a multi-tenant server (`X-Scope-OrgID`).
    pub tenant: Option<String>,
    /// How an https:// server is checked (None for http://).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Options {
    /// Refuses settings that would leak or hang: credentials in clear text unless asked for,
    /// a push without a deadline.
    pub fn check(&self) -> Result<()> {
        if let (Scheme::Http, Some(auth), false) =
            (self.server.scheme, &self.auth, self.cleartext_credentials)
        {
            bail!(
                "the credentials of {} would go to {} in clear text, readable on the way: \
                 use an https:// address, or give --push-cleartext-credentials to send them \
                 over http:// anyway",
                auth.variable(),
                self.server
            );
        }
        if self.timeout.is_zero() {
            bail!("--push-timeout must be more than 0");
        }
        Ok(())
    }
}

/// Credentials for the server, taken from the environment (a command line shows in `ps`).
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    /// `PINPROF_PUSH_BASIC_AUTH=user:password` (Grafana Cloud: the instance id and a token).
    Basic { user: String, password: String },
    /// `PINPROF_PUSH_BEARER_TOKEN=token`.
    Bearer(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself, not even in a debug print.
        match self {
            Self::Basic { user, .. } => write!(f, "Basic({user}:***)"),
            Self::Bearer(_) => write!(f, "Bearer(***)"),
        }
    }
}

impl Auth {
    /// The credentials the environment gives, if any; both at once is an error.
    pub fn from_env() -> Result<Option<Self>> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let auth = match (
            var("PINPROF_PUSH_BASIC_AUTH"),
            var("PINPROF_PUSH_BEARER_TOKEN"),
        ) {
            (Some(_), Some(_)) => bail!(
                "PINPROF_PUSH_BASIC_AUTH and PINPROF_PUSH_BEARER_TOKEN are both set: give one"
            ),
            (Some(basic), None) => {
                let (user, password) = basic
                    .split_once(':')
                    .context("PINPROF_PUSH_BASIC_AUTH must be USER:PASSWORD")?;
                Some(Self::Basic {
                    user: user.to_string(),
                    password: password.to_string(),
                })
            }
            (None, Some(token)) => Some(Self::Bearer(token)),
            (None, None) => None,
        };
        if let Some(auth) = &auth {
            header_value(&auth.header()).context("the push credentials")?;
        }
        Ok(auth)
    }

    /// The `Authorization` header's value.
    fn header(&self) -> String {
        match self {
            Self::Basic { user, password } => {
                format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))
            }
            Self::Bearer(token) => format!("Bearer {token}"),
        }
    }

    /// The environment variable they came from.
    fn variable(&self) -> &'static str {
        match self {
            Self::Basic { .. } => "PINPROF_PUSH_BASIC_AUTH",
            Self::Bearer(_) => "PINPROF_PUSH_BEARER_TOKEN",
        }
    }
}

/// A header value as given, or an error when it could end the header early (a line break
/// or another control character would let it write headers of its own).
pub fn header_value(value: &str) -> Result<&str> {
    if value.chars().any(|c| c.is_control()) {
        bail!("a header value must not hold control characters");
    }
    Ok(value)
}

/// The TLS settings for an https:// server: the system's trusted roots (`SSL_CERT_FILE` and
/// `SSL_CERT_DIR` are honoured), plus the certificates of `ca` (a PEM file) when given.
pub fn tls_config(ca: Option<&Path>) -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(ca) = ca {
        use rustls::pki_types::{CertificateDer, pem::PemObject as _};
        let pem = read_small(ca, 1 << 20)?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("{} is not a PEM certificate file", ca.display()))?;
        if certs.is_empty() {
            bail!("{} holds no certificate", ca.display());
        }
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            bail!("no certificate of {} can be used", ca.display());
        }
    }
    if roots.is_empty() {
        bail!(
            "no trusted certificate authority found: install the system's (ca-certificates) \
             or give --push-ca FILE"
        );
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("no TLS version in common with the TLS library")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A file the user names, read whole (at most `cap` bytes) if the user may read it.
fn read_small(path: &Path, cap: u64) -> Result<Vec<u8>> {
    let file = open_regular(path, cap)?;
    crate::safe_fs::read_capped(&file, path, cap)
}

/// Opens a file the user names for reading (`safe_fs::open_user_file`: never anything but a
/// regular file, read with the user's own rights), at most `cap` bytes.
fn open_regular(path: &Path, cap: u64) -> Result<File> {
    let file = crate::safe_fs::open_user_file(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let expect = crate::safe_fs::Expect {
        max_bytes: cap,
        owner: crate::safe_fs::Owner::Anyone,
    };
    crate::safe_fs::check_file(&file, path, expect)?;
    Ok(file)
}

/// Standard base64 with padding (RFC 4648), for basic authentication.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Whether a server is spoken to in the clear or over TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// An `http://host:port/prefix` or `https://...` server address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
    /// Path before `/ingest` (a server behind a reverse proxy), without a trailing slash.
    pub prefix: String,
}

impl std::str::FromStr for Server {
    type Err = String;

    fn from_str(url: &str) -> Result<Self, String> {
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("http://") {
            (Scheme::Http, rest)
        } else if let Some(rest) = url.strip_prefix("https://") {
            (Scheme::Https, rest)
        } else {
            return Err(format!("{url}: the address begins http:// or https://"));
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.contains('@') {
            return Err(format!(
                "{url}: credentials go in PINPROF_PUSH_BASIC_AUTH or PINPROF_PUSH_BEARER_TOKEN, \
                 not in the address (a command line shows in ps)"
            ));
        }
        let default_port = match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse().map_err(|_| format!("{url}: bad port {p:?}"))?),
            None => (authority, default_port),
        };
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._[]:".contains(c))
        {
            return Err(format!("{url}: bad host {host:?}"));
        }
        Ok(Server {
            scheme,
            host: host.to_string(),
            port,
            prefix: format!("/{}", path.trim_matches('/'))
                .trim_end_matches('/')
                .to_string(),
        })
    }
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        write!(f, "{scheme}://{}:{}{}", self.host, self.port, self.prefix)
    }
}

/// How the pushing went.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// Taken by the server.
    pub sent: u64,
    /// Refused, or not taken within the deadline.
    pub failed: u64,
    /// Dropped: the server was still taking the ones before.
    pub busy: u64,
    /// Not made: the pusher missed records of their periods.
    pub incomplete: u64,
    /// The records the pusher missed (the recording file has them).
    pub missed_records: u64,
    /// The last period's profile was not made: the pusher had not caught up with the
    /// recording's end within the push timeout.
    pub late: bool,
}

impl std::fmt::Display for Pushed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pushed {} profiles ({} not delivered",
            self.sent, self.failed
        )?;
        if self.busy > 0 {
            write!(
                f,
                ", {} dropped while the server was still taking earlier ones",
                self.busy
            )?;
        }
        if self.incomplete > 0 {
            write!(
                f,
                ", {} not made: the pusher fell behind and missed {} records of their \
                 periods, all in the recording",
                self.incomplete, self.missed_records
            )?;
        }
        if self.late {
            write!(
                f,
                ", the last not made: the pusher had not caught up with the recording's end \
                 within the push timeout"
            )?;
        }
        write!(f, ")")
    }
}

/// Records as `record` does, pushing a profile per period; returns the recording's summary.
pub fn run(record: &record::Options, push: &Options) -> Result<(record::Summary, Pushed)> {
    push.check()?;
    let stop = crate::signals::stop_flag()?;
    let quit = Arc::new(AtomicBool::new(false));
    let outbox = Outbox::start(push)?;
    let (recorder, rx) = record::spawn_teed(record, &stop, &quit)?;
    let mut pushed = Pushed::default();
    let mut model: Option<Model> = None;
    let mut host = String::new();
    let mut period_start = SystemTime::now();
    let mut next = Instant::now() + push.every;
    // Records the tee had dropped when the period began.
    let mut missed_before = 0;
    let mut last = None;
    // Once the recording has ended: when pushing must be over.
    let mut closing: Option<Instant> = None;
    loop {
        if closing.is_none() && recorder.is_finished() {
            let by = Instant::now() + push.timeout;
            outbox.close_by(by);
            closing = Some(by);
        }
        if closing.is_some_and(|by| Instant::now() >= by) {
            // Still behind the recording's end (a burst of events, a busy host): what the
            // pusher has not taken in is not pushed, and pinprof ends on time.
            pushed.late = true;
            say!(
                "pinprof: warning: the last period's profile was not pushed: the pusher had \
                 not caught up with the recording's end within --push-timeout {}s",
                push.timeout.as_secs_f64()
            );
            break;
        }
        let wait = next.saturating_duration_since(Instant::now());
        let ended = match rx.recv_timeout(wait) {
            Ok(Record::Header(h)) => {
                model = Some(Model::new(&h));
                host.clone_from(&h.hostname);
                period_start = SystemTime::now();
                next = Instant::now() + push.every;
                false
            }
            Ok(Record::Event(e)) => {
                if let Some(m) = &mut model {
                    m.apply_owned(e);
                }
                false
            }
            Ok(Record::End(end)) => {
                if let Some(m) = &mut model {
                    m.finish(&end);
                }
                true
            }
            Err(mpsc::RecvTimeoutError::Timeout) => false,
            Err(mpsc::RecvTimeoutError::Disconnected) => true,
        };
        if (ended || Instant::now() >= next)
            && let Some(m) = &mut model
        {
            let until = SystemTime::now();
            let missed = rx.dropped() - missed_before;
            missed_before += missed;
            if missed > 0 {
                // A profile that lacks part of its period would pass for all of it.
                pushed.incomplete += 1;
                pushed.missed_records += missed;
                say!(
                    "pinprof: warning: a period's profile was not pushed: the pusher fell \
                     behind and missed {missed} of its records (the recording has them)"
                );
            } else {
                match request(push, m, &host, period_start, until) {
                    Ok(request) if ended => last = Some(request),
                    Ok(request) => {
                        if !outbox.offer(request) {
                            pushed.busy += 1;
                            say!(
                                "pinprof: warning: a profile was dropped: the server has not \
                                 yet taken the one before ({} dropped so far)",
                                pushed.busy
                            );
                        }
                    }
                    Err(e) => {
                        pushed.failed += 1;
                        say!("pinprof: warning: a profile was not pushed: {e:#}");
                    }
                }
            }
            // What was sent is forgotten, so that the next profile holds the next period.
            let sent_to = m.end_mono_ns;
            m.forget_before(sent_to);
            period_start = until;
            next = Instant::now() + push.every;
        }
        if ended {
            break;
        }
    }
    let (sent, failed) = outbox.finish(last);
    pushed.sent += sent;
    pushed.failed += failed;
    let summary = recorder
        .join()
        .map_err(|_| anyhow!("the recorder failed unexpectedly"))??;
    Ok((summary, pushed))
}

/// Builds the push of what the model holds (the period since the last one).
fn request(
    push: &Options,
    model: &Model,
    host: &str,
    from: SystemTime,
    until: SystemTime,
) -> Result<Request> {
    let mut profile = Vec::new();
    crate::export::write(
        &Analysis::new(model),
        &crate::export::Options {
            format: crate::export::Format::Pprof,
            flamegraph: Default::default(),
        },
        &mut profile,
    )?;
    let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut labels = vec![
        Label::escaped("pid", &model.target.pid.to_string()),
        Label::escaped("host", host),
    ];
    labels.extend(push.labels.iter().cloned());
    let query = format!(
        "name={}&from={}&until={}&format=pprof&spyName=pinprof",
        url_encode(&series_name(&push.app, &labels)),
        secs(from),
        secs(until).max(secs(from) + 1)
    );
    let config = sample_type_config();
    let boundary = "pinprof-profile-boundary-7f3a";
    let mut body = Vec::new();
    for (field, file, data) in [
        ("profile", "profile.pprof", profile.as_slice()),
        (
            "sample_type_config",
            "sample_type_config.json",
            config.as_bytes(),
        ),
    ] {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; \
                 filename=\"{file}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let mut head = format!(
        "POST {}/ingest?{query} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: pinprof/{}\r\n\
         Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        push.server.prefix,
        push.server.host,
        push.server.port,
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    if let Some(auth) = &push.auth {
        head.push_str(&format!("Authorization: {}\r\n", auth.header()));
    }
    if let Some(tenant) = &push.tenant {
        head.push_str(&format!("X-Scope-OrgID: {}\r\n", header_value(tenant)?));
    }
    head.push_str("\r\n");
    Ok(Request {
        head: head.into_bytes(),
        body,
    })
}

/// The units and aggregation of pinprof's sample types, for servers that need them named.
fn sample_type_config() -> String {
    let types: Vec<String> = crate::export::SAMPLE_TYPES
        .iter()
        .map(|t| format!("\"{t}\":{{\"units\":\"nanoseconds\",\"aggregation\":\"sum\",\"display-name\":\"{t}_nanoseconds\"}}"))
        .collect();
    format!("{{{}}}", types.join(","))
}

/// Percent-encoding for a query parameter's value.
fn url_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses_are_read_strictly() {
        assert_eq!(
            "http://pyroscope:4040".parse(),
            Ok(Server {
                scheme: Scheme::Http,
                host: "pyroscope".into(),
                port: 4040,
                prefix: String::new()
            })
        );
        let behind: Server = "http://proxy/pyroscope/".parse().unwrap();
        assert_eq!((behind.port, behind.prefix.as_str()), (80, "/pyroscope"));
        let tls: Server = "https://profiles.example/".parse().unwrap();
        assert_eq!((tls.scheme, tls.port), (Scheme::Https, 443));
        assert!("ftp://pyroscope:4040".parse::<Server>().is_err());
        assert!("https://user:secret@host".parse::<Server>().is_err());
        assert!("http://a b:1".parse::<Server>().is_err());
        assert!("http://host:port".parse::<Server>().is_err());
        assert_eq!(url_encode("java{pid=1}"), "java%7Bpid%3D1%7D");
    }

    #[test]
    fn credentials_are_encoded_and_never_printed() {
        // RFC 4648's test vectors, and RFC 7617's example.
        for (text, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(text.as_bytes()), encoded);
        }
        let auth = Auth::Basic {
            user: "Aladdin".into(),
            password: "open sesame".into(),
        };
        assert_eq!(auth.header(), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert!(!format!("{auth:?}").contains("sesame"));
        assert!(header_value("team-a").is_ok());
        assert!(header_value("a\r\nX-Evil: 1").is_err());
    }

    pub(super) fn options(url: &str, auth: Option<Auth>, cleartext: bool) -> Options {
        Options {
            server: url.parse().unwrap(),
            every: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            app: AppName::of_command("java"),
            labels: Vec::new(),
            auth,
            cleartext_credentials: cleartext,
            tenant: None,
            tls: None,
        }
    }

    #[test]
    fn credentials_go_in_clear_text_only_when_asked_for() {
        let basic = Some(Auth::Basic {
            user: "u".into(),
            password: "p".into(),
        });
        let bearer = Some(Auth::Bearer("t".into()));
        for auth in [&basic, &bearer] {
            let refused = options("http://pyroscope:4040", auth.clone(), false)
                .check()
                .unwrap_err()
                .to_string();
            assert!(
                refused.contains("clear text") && refused.contains("--push-cleartext-credentials"),
                "{refused}"
            );
            assert!(
                !refused.contains("\"p\"") && !refused.contains(" t "),
                "{refused}"
            );
            options("http://pyroscope:4040", auth.clone(), true)
                .check()
                .unwrap();
            options("https://pyroscope:4040", auth.clone(), false)
                .check()
                .unwrap();
        }
        options("http://pyroscope:4040", None, false)
            .check()
            .unwrap();
    }

    #[test]
    fn the_ca_file_is_never_opened_unless_a_regular_file() {
        let dir = std::env::temp_dir().join(format!("pinprof-push-ca-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        // A FIFO, and a writer waiting in open(2) for a reader: any open for reading, even
        // one that gives up at once, lets it through.
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::OpenOptions::new().write(true).open(fifo))
        };
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        let refused = format!("{:#}", read_small(&fifo, 1 << 20).unwrap_err());
        assert!(refused.contains("not a regular file"), "{refused}");
        assert!(started.elapsed() < Duration::from_secs(1));
        std::thread::sleep(Duration::from_millis(200));
        assert!(!writer.is_finished(), "the FIFO was opened for reading");
        // The test's own reader lets the writer go.
        let reader = std::fs::File::open(&fifo).unwrap();
        writer.join().unwrap().unwrap();
        drop(reader);
        // A device, a directory, a file over the cap.
        for path in [Path::new("/dev/null"), Path::new("/dev/tty"), &dir] {
            let refused = format!("{:#}", read_small(path, 1 << 20).unwrap_err());
            assert!(refused.contains("not a regular file"), "{refused}");
        }
        let big = dir.join("big.pem");
        std::fs::write(&big, vec![b'x'; 2000]).unwrap();
        assert!(read_small(&big, 1000).is_err());
        // A regular file is read, through a symlink too (the user names it).
        let pem = dir.join("ca.pem");
        std::fs::write(&pem, b"certificate").unwrap();
        std::os::unix::fs::symlink(&pem, dir.join("link")).unwrap();
        assert_eq!(read_small(&dir.join("link"), 1000).unwrap(), b"certificate");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
