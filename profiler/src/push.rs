//! Continuous profiling: while recording, a pprof profile of each period is sent to a
//! Pyroscope server's ingest API (`POST /ingest?name=APP{labels}&from=S&until=S&format=pprof`,
//! multipart: the profile, and its sample types' units and aggregation), until the recording
//! stops. What was sent is forgotten (folded into per-thread sums), so memory stays bounded
//! however long it runs; a profile the server refuses or cannot take is counted and said,
//! never queued up.

use std::{
    io::{Read as _, Write as _},
    net::{TcpStream, ToSocketAddrs as _},
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
}

/// An `http://host:port/prefix` server address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    pub host: String,
    pub port: u16,
    /// Path before `/ingest` (a server behind a reverse proxy), without a trailing slash.
    pub prefix: String,
}

impl std::str::FromStr for Server {
    type Err = String;

    fn from_str(url: &str) -> Result<Self, String> {
        let Some(rest) = url.strip_prefix("http://") else {
            return Err(format!(
                "{url}: only http:// is supported (put an agent or a TLS-terminating proxy in \
                 front of an https:// server)"
            ));
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse().map_err(|_| format!("{url}: bad port {p:?}"))?),
            None => (authority, 80),
        };
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._[]:".contains(c))
        {
            return Err(format!("{url}: bad host {host:?}"));
        }
        Ok(Server {
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
    let (tx, rx) = mpsc::channel();
    let recorder = record::spawn_teed(record, &stop, &quit, tx)?;
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
    let head = format!(
        "POST {}/ingest?{query} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: pinprof/{}\r\n\
         Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        push.server.prefix,
        push.server.host,
        push.server.port,
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    let address = (push.server.host.as_str(), push.server.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {}", push.server.host))?
        .next()
        .with_context(|| format!("{} has no address", push.server.host))?;
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))
        .with_context(|| format!("cannot connect to {address}"))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(head.as_bytes())?;
    stream.write_all(&body)?;
    // The status line is all that matters; a reply is read up to 64 KiB, never more.
    let mut reply = Vec::new();
    stream.take(64 << 10).read_to_end(&mut reply)?;
    let status = String::from_utf8_lossy(&reply);
    let line = status.lines().next().unwrap_or_default();
    let code = line.split_whitespace().nth(1).unwrap_or_default();
    if !code.starts_with('2') {
        bail!("the server answered {line:?}");
    }
    Ok(())
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
                host: "pyroscope".into(),
                port: 4040,
                prefix: String::new()
            })
        );
        let behind: Server = "http://proxy/pyroscope/".parse().unwrap();
        assert_eq!((behind.port, behind.prefix.as_str()), (80, "/pyroscope"));
        assert!("https://pyroscope:4040".parse::<Server>().is_err());
        assert!("http://a b:1".parse::<Server>().is_err());
        assert!("http://host:port".parse::<Server>().is_err());
        assert_eq!(url_encode("java{pid=1}"), "java%7Bpid%3D1%7D");
    }
}
