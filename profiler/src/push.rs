//! Continuous profiling: while recording, a pprof profile of each period is sent to a
//! Pyroscope server's ingest API (`POST /ingest?name=APP{labels}&from=S&until=S&format=pprof`,
//! multipart: the profile, and its sample types' units and aggregation), until the recording
//! stops. What was sent is forgotten (folded into per-thread sums), so memory stays bounded
//! however long it runs; a profile the server refuses or cannot take is counted and said,
//! never queued up.

use std::{
    io::{Read, Write},
    net::{TcpStream, ToSocketAddrs as _},
    path::Path,
    sync::{Arc, atomic::AtomicBool, mpsc},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result, anyhow, bail};

use crate::{analysis::Analysis, model::Model, record, recording::Record};

/// Where and how to push.
#[derive(Clone, Debug)]
pub struct Options {
    pub server: Server,
    /// One profile per this long.
    pub every: Duration,
    /// The application name (`name`'s part before the labels).
    pub app: String,
    /// Labels added to every profile (`pid` and `host` are always there).
    pub labels: Vec<(String, String)>,
    /// Who pinprof says it is to the server.
    pub auth: Option<Auth>,
    /// The tenant of a multi-tenant server (`X-Scope-OrgID`).
    pub tenant: Option<String>,
    /// How an https:// server is checked (None for http://).
    pub tls: Option<Arc<rustls::ClientConfig>>,
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

/// A file the user names: opened without blocking (never a FIFO's writer to wait for), then
/// held to `safe_fs`'s checks (a regular file, at most `cap` bytes, read no further).
fn read_small(path: &Path, cap: u64) -> Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let expect = crate::safe_fs::Expect {
        max_bytes: cap,
        owner: crate::safe_fs::Owner::Anyone,
    };
    crate::safe_fs::check_file(&file, path, expect)?;
    crate::safe_fs::read_capped(&file, path, cap)
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

/// How the pushing went.
#[derive(Debug, Default)]
pub struct Pushed {
    pub sent: u64,
    pub failed: u64,
}

/// Records as `record` does, pushing a profile per period; returns the recording's summary.
pub fn run(record: &record::Options, push: &Options) -> Result<(record::Summary, Pushed)> {
    let stop = crate::signals::stop_flag()?;
    let quit = Arc::new(AtomicBool::new(false));
    let (recorder, rx) = record::spawn_teed(record, &stop, &quit)?;
    let mut pushed = Pushed::default();
    let mut model: Option<Model> = None;
    let mut host = String::new();
    let mut period_start = SystemTime::now();
    let mut next = Instant::now() + push.every;
    loop {
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
            match send(push, m, &host, period_start, until) {
                Ok(()) => pushed.sent += 1,
                Err(e) => {
                    pushed.failed += 1;
                    say!("pinprof: warning: a profile was not pushed: {e:#}");
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
    let summary = recorder
        .join()
        .map_err(|_| anyhow!("the recorder failed unexpectedly"))??;
    Ok((summary, pushed))
}

/// Sends the profile of what the model holds (the period since the last one).
fn send(
    push: &Options,
    model: &Model,
    host: &str,
    from: SystemTime,
    until: SystemTime,
) -> Result<()> {
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
        ("pid".to_string(), model.target.pid.to_string()),
        ("host".to_string(), host.to_string()),
    ];
    labels.extend(push.labels.iter().cloned());
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let name = format!("{}{{{}}}", push.app, labels.join(","));
    let query = format!(
        "name={}&from={}&until={}&format=pprof&spyName=pinprof",
        url_encode(&name),
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
    let address = (push.server.host.as_str(), push.server.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {}", push.server.host))?
        .next()
        .with_context(|| format!("{} has no address", push.server.host))?;
    let tcp = TcpStream::connect_timeout(&address, Duration::from_secs(5))
        .with_context(|| format!("cannot connect to {address}"))?;
    tcp.set_write_timeout(Some(Duration::from_secs(10)))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let line = match (push.server.scheme, &push.tls) {
        (Scheme::Http, _) => exchange(tcp, head.as_bytes(), &body)?,
        (Scheme::Https, Some(config)) => {
            let name = rustls::pki_types::ServerName::try_from(push.server.host.clone())
                .with_context(|| format!("{} is not a TLS server name", push.server.host))?;
            let tls = rustls::ClientConnection::new(Arc::clone(config), name)
                .context("cannot start TLS")?;
            exchange(rustls::StreamOwned::new(tls, tcp), head.as_bytes(), &body)
                .with_context(|| format!("TLS with {}", push.server.host))?
        }
        (Scheme::Https, None) => bail!("https:// without TLS settings"),
    };
    let code = line.split_whitespace().nth(1).unwrap_or_default();
    if !code.starts_with('2') {
        bail!("the server answered {line:?}");
    }
    Ok(())
}

/// Sends a request and returns the reply's status line: read up to its end (64 KiB at
/// most), not to the end of the stream, so a server that closes without TLS's closing
/// message still answers.
fn exchange(mut stream: impl Read + Write, head: &[u8], body: &[u8]) -> Result<String> {
    stream.write_all(head)?;
    stream.write_all(body)?;
    stream.flush()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.windows(2).any(|w| w == b"\r\n") && reply.len() < 64 << 10 {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if reply.is_empty() => return Err(e).context("no answer"),
            Err(_) => break,
        }
    }
    let status = String::from_utf8_lossy(&reply);
    Ok(status.lines().next().unwrap_or_default().to_string())
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
}
