//! Continuous profiling: while recording, a pprof profile of each period is sent to a
//! Pyroscope server's ingest API (`POST /ingest?name=APP{labels}&from=S&until=S&format=pprof`,
//! multipart: the profile, and its sample types' units and aggregation), until the recording
//! stops. What was sent is forgotten (folded into per-thread sums), so memory stays bounded
//! however long it runs; a profile the server refuses or cannot take is counted and said,
//! never queued up.
//!
//! The server may be slow or hostile, and the target's text goes into the profile's name, so:
//! - the recorder never waits on the pusher: records reach it through a bounded tee
//!   ([`TEE_BUDGET`]), and a period whose records it missed is not pushed (counted, said);
//! - the pusher never waits on the server: profiles go to a thread of their own through a
//!   queue of one ([`WAITING`]); a profile that finds it full is dropped (counted, said);
//! - a push has one deadline (`--push-timeout`) for all of it: the name lookup (on a thread of
//!   its own, getaddrinfo having no timeout), connecting, sending and reading the answer,
//!   each read and write given what is left; once the recording has ended, what is still
//!   pushed has that long in all;
//! - credentials never go in clear text unless asked for (`--push-cleartext-credentials`);
//! - the application name and label values hold only characters Pyroscope's `name{k=v,...}`
//!   takes as such, the target's and the host's text escaped, so they cannot add a label.

use std::{
    fs::File,
    io::{self, Read, Write},
    net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs as _},
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc,
    },
    thread::JoinHandle,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result, anyhow, bail};

use crate::{
    analysis::Analysis,
    model::Model,
    record,
    recording::{Record, tee},
};

/// Bytes of records that may wait between the recorder and the pusher; past it, events are
/// dropped (the recording file has them all) and the period they belong to is not pushed.
pub const TEE_BUDGET: usize = 16 << 20;
/// Profiles that may wait for the server while it takes the one before.
pub const WAITING: usize = 1;
/// A reply is read up to the end of its status line, at most this many bytes.
const MAX_STATUS_LINE: usize = 8 << 10;
/// The most characters of text from elsewhere (the target's command, the host's name) put
/// into a profile's name.
const MAX_TEXT: usize = 64;

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

/// A character Pyroscope takes in a label's key (`flameql.IsTagKeyRuneAllowed`).
fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// A character Pyroscope takes in an application name (`flameql.IsAppNameRuneAllowed`).
fn app_char(c: char) -> bool {
    key_char(c) || c == '-' || c == '/'
}

/// A character pinprof puts in a label's value. Pyroscope's syntax has no escape: a value
/// ends at `,` or `}`, so those (and `=`, `{`, spaces, control characters) never go in.
fn value_char(c: char) -> bool {
    key_char(c) || c == '-'
}

/// `text` cut at [`MAX_TEXT`] characters, each one `keep` refuses written `_`: text from
/// elsewhere (the target's command, the host's name) can then neither end the name or a
/// value nor add a label, and carries no control character.
fn escape(text: &str, keep: fn(char) -> bool) -> String {
    text.chars()
        .take(MAX_TEXT)
        .map(|c| if keep(c) { c } else { '_' })
        .collect()
}

/// A profile's application name (`name`'s part before the labels): only characters
/// Pyroscope takes in one (letters, digits, `_ . - /`), so it cannot open the label set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppName(String);

impl AppName {
    /// `pinprof.COMMAND` of the target's command (its `comm`, which the target chooses),
    /// escaped.
    pub fn of_command(command: &str) -> Self {
        let command = escape(command, app_char);
        Self(format!(
            "pinprof.{}",
            if command.is_empty() { "_" } else { &command }
        ))
    }
}

impl std::str::FromStr for AppName {
    type Err = String;

    /// The user's name, as given or refused (nothing of it is changed behind their back).
    fn from_str(name: &str) -> Result<Self, String> {
        if name.is_empty() || name.len() > 256 || !name.chars().all(app_char) {
            return Err(format!(
                "{name:?}: an application name is 1 to 256 letters, digits, _ . - /"
            ));
        }
        Ok(Self(name.to_string()))
    }
}

/// One `key=value` of a profile's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    key: String,
    value: String,
}

impl Label {
    /// A label of pinprof's own: `key` is pinprof's, `value` may come from elsewhere (the
    /// host's name) and is escaped.
    fn escaped(key: &'static str, value: &str) -> Self {
        debug_assert!(key.chars().all(key_char));
        let value = escape(value, value_char);
        Self {
            key: key.to_string(),
            value: if value.is_empty() { "_".into() } else { value },
        }
    }
}

impl std::str::FromStr for Label {
    type Err = String;

    /// The user's `KEY=VALUE`, as given or refused.
    fn from_str(text: &str) -> Result<Self, String> {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))?;
        let ok = |s: &str, keep: fn(char) -> bool| {
            !s.is_empty() && s.len() <= 256 && s.chars().all(keep)
        };
        if !ok(key, key_char) || !ok(value, value_char) {
            return Err(format!(
                "{text:?}: a key is letters, digits, _ . and a value also -"
            ));
        }
        if ["pid", "host", "__name__"].contains(&key) {
            return Err(format!("{text:?}: {key} is pinprof's own label"));
        }
        Ok(Self {
            key: key.to_string(),
            value: value.to_string(),
        })
    }
}

/// Pyroscope's `app{key=value,...}`.
fn series_name(app: &AppName, labels: &[Label]) -> String {
    let labels: Vec<String> = labels
        .iter()
        .map(|l| format!("{}={}", l.key, l.value))
        .collect();
    format!("{}{{{}}}", app.0, labels.join(","))
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

// TODO(lead): use the safe_fs door
/// Opens a file the user names for reading, never anything but a regular file: `O_PATH`
/// first (no driver's `open` runs, no FIFO is waited on, no tty becomes ours), checked
/// through that descriptor (a regular file, at most `cap` bytes, readable by the user who
/// started pinprof: file capabilities do not read for them), then reopened through
/// `/proc/self/fd/N`, which is the same inode whatever happens to the path meanwhile.
fn open_regular(path: &Path, cap: u64) -> Result<File> {
    use std::os::{
        fd::AsRawFd as _,
        unix::fs::{MetadataExt as _, OpenOptionsExt as _},
    };
    let cannot = || format!("cannot open {}", path.display());
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .with_context(cannot)?;
    let expect = crate::safe_fs::Expect {
        max_bytes: cap,
        owner: crate::safe_fs::Owner::Anyone,
    };
    let before = crate::safe_fs::check_file(&handle, path, expect)?;
    let through = format!("/proc/self/fd/{}\0", handle.as_raw_fd());
    // access(2) checks the real user's right with no capability.
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::access(through.as_ptr().cast(), libc::R_OK) } != 0 {
        return Err(io::Error::last_os_error()).with_context(cannot);
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(through.trim_end_matches('\0'))
        .with_context(cannot)?;
    let after = crate::safe_fs::check_file(&file, path, expect)?;
    if (before.dev(), before.ino()) != (after.dev(), after.ino()) {
        bail!("{} changed while it was opened", path.display());
    }
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
    let (tee, rx) = tee::bounded(TEE_BUDGET);
    let outbox = Outbox::start(push)?;
    let recorder = record::spawn_teed(record, &stop, &quit, tee)?;
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

/// One push, ready to go.
struct Request {
    head: Vec<u8>,
    body: Vec<u8>,
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

/// The thread that talks to the server, one push at a time, and the queue to it: the
/// pusher hands profiles over without waiting.
struct Outbox {
    tx: mpsc::SyncSender<Request>,
    thread: JoinHandle<()>,
    sent: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    /// Set once the recording has ended: no push goes on past it.
    close_by: Arc<Mutex<Option<Instant>>>,
    timeout: Duration,
}

impl Outbox {
    fn start(push: &Options) -> Result<Self> {
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
    fn offer(&self, request: Request) -> bool {
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
    fn close_by(&self, by: Instant) {
        *self.close_by.lock().unwrap_or_else(|e| e.into_inner()) = Some(by);
    }

    /// Hands the last profile over and waits for what is left: until the bound set by
    /// `close_by`, or the push timeout from now if none was (every push ends by its
    /// deadline, and none goes on past the bound); the profiles sent and failed.
    fn finish(self, last: Option<Request>) -> (u64, u64) {
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

    /// Pyroscope's own parser of `name` (`segment.ParseKey`): the name up to `{`, then keys
    /// up to `=` and values up to `,` or `}`, no escape; the labels by key.
    fn parse_series(name: &str) -> (String, std::collections::BTreeMap<String, String>) {
        let (app, rest) = name.split_once('{').unwrap();
        let mut labels = std::collections::BTreeMap::new();
        let (mut key, mut value, mut in_value) = (String::new(), String::new(), false);
        for c in rest.chars() {
            match (in_value, c) {
                (false, '}') => break,
                (false, '=') => in_value = true,
                (false, c) => key.push(c),
                (true, ',' | '}') => {
                    labels.insert(std::mem::take(&mut key), std::mem::take(&mut value));
                    in_value = false;
                }
                (true, c) => value.push(c),
            }
        }
        (app.to_string(), labels)
    }

    #[test]
    fn the_targets_text_cannot_add_or_change_a_label() {
        let hostile = "j{pid=1,x=y}a,\u{1b}]52;c;\u{7}=\n";
        let app = AppName::of_command(hostile);
        assert_eq!(app.0, "pinprof.j_pid_1_x_y_a___52_c____");
        let labels = [
            Label::escaped("pid", "42"),
            Label::escaped("host", hostile),
            "env=prod".parse().unwrap(),
        ];
        let (name, parsed) = parse_series(&series_name(&app, &labels));
        assert_eq!(name, app.0);
        assert_eq!(
            parsed.into_iter().collect::<Vec<_>>(),
            [
                ("env".to_string(), "prod".to_string()),
                ("host".into(), "j_pid_1_x_y_a___52_c____".into()),
                ("pid".into(), "42".into()),
            ]
        );
        // Cut, and never empty.
        assert_eq!(AppName::of_command(&"a".repeat(1000)).0.len(), 8 + MAX_TEXT);
        assert_eq!(AppName::of_command("").0, "pinprof._");
        assert_eq!(Label::escaped("host", "").value, "_");
        // The user's text is taken as given or refused, never changed.
        for bad in ["a{b", "a b", "", "a,b"] {
            assert!(bad.parse::<AppName>().is_err(), "{bad}");
        }
        assert_eq!("shop/api-1".parse::<AppName>().unwrap().0, "shop/api-1");
        for bad in [
            "k=v,x=y", "k=v}", "my-key=v", "k=", "=v", "pid=1", "host=h", "k",
        ] {
            assert!(bad.parse::<Label>().is_err(), "{bad}");
        }
        assert_eq!(
            "k.1_a=v-1.b".parse::<Label>().unwrap(),
            Label {
                key: "k.1_a".into(),
                value: "v-1.b".into()
            }
        );
    }

    fn options(url: &str, auth: Option<Auth>, cleartext: bool) -> Options {
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
        let refused = read_small(&fifo, 1 << 20).unwrap_err().to_string();
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
            let refused = read_small(path, 1 << 20).unwrap_err().to_string();
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
