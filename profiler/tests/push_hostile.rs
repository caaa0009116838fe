//! `record --push` against a hostile server and a hostile target, with real sockets on
//! 127.0.0.1: a server that trickles a byte a second costs pinprof neither memory nor time
//! (the queue to the pusher is bounded, each push has one deadline, the recording ends on
//! time and whole); a name server that never answers costs no more; credentials never go
//! in clear text unless asked for; and a target whose process name holds Pyroscope's label
//! syntax (`{`, `}`, `,`, `=`) adds or changes no label.

mod common;

use std::{
    collections::BTreeMap,
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::{TcpListener, TcpStream},
    os::unix::fs::PermissionsExt as _,
    path::PathBuf,
    process::{Command, Output, Stdio},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use common::{
    nobody::{Stage, spawn_as_nobody},
    *,
};

/// A server on 127.0.0.1 that takes every connection and, a byte a second, reads the
/// request and writes an answer whose status line never ends ("HTTP/1.1 200 OK" first, so
/// that a status cut short would read as a success): no single read or write of pinprof's
/// ever waits long, only the whole push does.
struct Trickler {
    port: u16,
    connections: Arc<AtomicU64>,
    bytes_read: Arc<AtomicU64>,
}

impl Trickler {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicU64::new(0));
        let bytes_read = Arc::new(AtomicU64::new(0));
        let (c, r) = (Arc::clone(&connections), Arc::clone(&bytes_read));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { break };
                c.fetch_add(1, Ordering::Relaxed);
                let r = Arc::clone(&r);
                std::thread::spawn(move || {
                    let reply = b"HTTP/1.1 200 OK".iter().chain(std::iter::repeat(&b'x'));
                    for &b in reply {
                        let mut one = [0u8];
                        if stream.read(&mut one).is_ok_and(|n| n == 1) {
                            r.fetch_add(1, Ordering::Relaxed);
                        }
                        if stream.write_all(&[b]).is_err() {
                            break;
                        }
                        std::thread::sleep(Duration::from_secs(1));
                    }
                });
            }
        });
        Self {
            port,
            connections,
            bytes_read,
        }
    }
}

/// One request as Pyroscope's ingest API reads it: its target (path and query), headers by
/// lower-case name, and the length of its body.
struct Ingested {
    target: String,
    headers: BTreeMap<String, String>,
    body_bytes: usize,
}

impl Ingested {
    /// A query parameter, percent-decoded.
    fn query(&self, name: &str) -> String {
        let (_, query) = self.target.split_once('?').unwrap();
        let value = query
            .split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {}", self.target));
        url_decode(value)
    }
}

fn url_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// A server on 127.0.0.1 that reads each request whole and answers 200 at once, as
/// Pyroscope's ingest API does; the requests as they come.
fn ingest_listener() -> (u16, mpsc::Receiver<Ingested>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            if tx.send(ingest_one(stream)).is_err() {
                break;
            }
        }
    });
    (port, rx)
}

fn ingest_one(mut stream: TcpStream) -> Ingested {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').unwrap();
        headers.insert(k.to_ascii_lowercase(), v.trim().to_string());
    }
    let length: usize = headers["content-length"].parse().unwrap();
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    stream
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        .unwrap();
    let mut words = request_line.split_whitespace();
    assert_eq!(words.next(), Some("POST"), "{request_line}");
    Ingested {
        target: words.next().unwrap().to_string(),
        headers,
        body_bytes: length,
    }
}

/// Pyroscope's reading of a profile's `name` (`segment.ParseKey`): the application name up
/// to `{`, then keys up to `=` and values up to `,` or `}`, trimmed, with no escape; a key
/// given twice keeps its last value.
fn pyroscope_labels(name: &str) -> (String, BTreeMap<String, String>) {
    let (app, rest) = name.split_once('{').unwrap_or((name, ""));
    let mut labels = BTreeMap::new();
    let (mut key, mut value, mut in_value) = (String::new(), String::new(), false);
    for c in rest.chars() {
        match (in_value, c) {
            (false, '}') => break,
            (false, '=') => in_value = true,
            (false, c) => key.push(c),
            (true, ',' | '}') => {
                labels.insert(
                    std::mem::take(&mut key).trim().to_string(),
                    std::mem::take(&mut value).trim().to_string(),
                );
                in_value = false;
                if c == '}' {
                    break;
                }
            }
            (true, c) => value.push(c),
        }
    }
    (app.trim().to_string(), labels)
}

/// The kernel's peak resident set size of a process (VmHWM), in KiB.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// A run of `pinprof record` watched from outside.
struct Watched {
    output: Output,
    /// The last VmHWM read before it exited (read every 20 ms), KiB.
    peak_kib: u64,
    /// From the recording's file appearing (the programs attached) to the exit.
    attached_to_exit: Duration,
    /// From the end of pinprof's `recorder` thread (the recording written, its end marker
    /// synced) to the exit.
    finished_to_exit: Duration,
    recording: PathBuf,
}

impl Watched {
    fn said(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
}

/// Runs `command` (which ends in `pinprof record ... --output`, the path appended here) and
/// watches its memory and time until it exits, at most `limit`.
fn watch(mut command: Command, name: &str, limit: Duration) -> Watched {
    let recording = scratch(name);
    let mut child = command
        .arg(&recording)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pinprof record");
    // Read as it comes: a full pipe would stop pinprof.
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let outs = std::thread::spawn(move || {
        let (mut o, mut e) = (Vec::new(), Vec::new());
        let errs = std::thread::spawn(move || {
            err.read_to_end(&mut e).unwrap();
            e
        });
        out.read_to_end(&mut o).unwrap();
        (o, errs.join().unwrap())
    });
    let started = Instant::now();
    let (mut attached, mut peak_kib) = (None, 0);
    let (mut recording_seen, mut recorded) = (false, None);
    let status = loop {
        if attached.is_none() && recording.exists() {
            attached = Some(Instant::now());
        }
        if recorded.is_none() {
            let running = recorder_running(child.id());
            recording_seen |= running;
            if recording_seen && !running {
                recorded = Some(Instant::now());
            }
        }
        if let Some(kib) = vm_hwm_kib(child.id()) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let (_, stderr) = outs.join().unwrap();
            panic!(
                "pinprof record ran past {limit:?}:\n{}",
                String::from_utf8_lossy(&stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let exited = Instant::now();
    let (stdout, stderr) = outs.join().unwrap();
    Watched {
        finished_to_exit: recorded.map_or(Duration::MAX, |r| exited - r),
        output: Output {
            status,
            stdout,
            stderr,
        },
        peak_kib,
        attached_to_exit: attached.map_or(Duration::ZERO, |a| exited - a),
        recording,
    }
}

/// Whether a process has a thread named `recorder` (pinprof's, that writes the recording).
fn recorder_running(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.trim_end() == "recorder")
    })
}

/// `pinprof record --quiet --pid PID --duration SECONDS` and `args`, ready for `watch`.
fn record_command(pid: u32, seconds: u64, args: &[&str]) -> Command {
    let mut command = pinprof();
    command
        .args(["record", "--quiet", "--pid", &pid.to_string()])
        .args(["--duration", &format!("{seconds}s")])
        .args(args)
        .arg("--output");
    command
}

/// A count said in the closing line, as `... N what ...`.
fn count_before(said: &str, what: &str) -> u64 {
    let line = said
        .lines()
        .find(|l| l.starts_with("pinprof: pushed "))
        .unwrap_or_else(|| panic!("no closing line of the push in:\n{said}"));
    let at = match line.find(what) {
        Some(at) => at,
        None => return 0,
    };
    line[..at]
        .split(|c: char| !c.is_ascii_digit())
        .rfind(|w| !w.is_empty())
        .unwrap()
        .parse()
        .unwrap()
}

/// The recording ended at its duration, complete (its end marker), and pinprof at most
/// the push deadline after its recorder, whatever the server did, plus 2 s: the profile
/// being made when the recorder ends and the last one are made first (each well under a
/// second, longer on a busy host). The window may pass the duration by up to a quarter:
/// the recorder stops at its next look at the clock, which a busy host delays (as it does
/// without --push).
fn assert_on_time(run: &Watched, seconds: u64, timeout: u64) {
    let said = run.said();
    assert!(said.contains("stopped: duration reached"), "{said}");
    let report = report_json(&run.recording);
    let warnings = strings(&report["capture"]["warnings"]).join("\n");
    assert!(!warnings.contains("end marker"), "{warnings}");
    let window = ns(&report["window"]["duration_ns"]) / 1e9;
    let after = run.finished_to_exit.as_secs_f64();
    eprintln!(
        "window {window:.2} s for --duration {seconds}s; the recorder ended {:.2} s after \
         attaching, pinprof {after:.2} s after it (--push-timeout {timeout}s)",
        run.attached_to_exit.as_secs_f64() - after
    );
    assert!(
        (seconds as f64 - 0.05..=seconds as f64 * 1.25).contains(&window),
        "window {window} s"
    );
    assert!(
        after <= timeout as f64 + 2.0,
        "pinprof exited {after:.2} s after the recording ended:\n{said}"
    );
}

/// How much more pinprof may take at its peak with a trickling server than with one that
/// answers at once: the queue to the pusher (the budget's share for queues, about 10 MiB
/// of the default 256 MiB), as much again in
/// the pusher's model when a busy host makes it lag (what it has not yet folded is either
/// queued or in its model), and a profile waiting and one being sent. A pusher held up by
/// the server, queueing the whole run, would take ~150 MB more here.
const EXTRA_PEAK_KIB: u64 = 48 << 10;

/// A server that trickles a byte a second, pushed to once a second with a 2 s deadline for
/// each push, while a JVM makes 40,000-80,000 events a second: each push fails at its
/// deadline and is said, every profile is counted (not delivered, dropped, not made),
/// pinprof's peak memory stays within `EXTRA_PEAK_KIB` of the same run against a server
/// that answers at once (the kernel's VmHWM), and the recording ends at its duration,
/// complete, with pinprof gone soon after (see `assert_on_time`).
#[test]
fn jdk21_push_to_a_trickling_server_is_bounded_in_memory_and_time() {
    const SECONDS: u64 = 8;
    const TIMEOUT: u64 = 2;
    // One pair of virtual threads handing a token back and forth: tens of thousands of
    // switches a second (2.5-5 MB of records a second), which a pusher held up would queue.
    let jvm = start(21, "Handoff", &["1", "virtual"]);
    let trickler = Trickler::start();
    let url = format!("http://127.0.0.1:{}", trickler.port);
    let push = [
        "--push",
        &url,
        "--every",
        "1s",
        "--push-timeout",
        &format!("{TIMEOUT}s"),
    ];
    let slow = watch(
        record_command(jvm.pid, SECONDS, &push),
        "push-trickle.pinrec",
        Duration::from_secs(60),
    );
    let said = slow.said();
    assert_ok(&slow.output, "pinprof record --push to a trickling server");
    eprintln!("{said}");
    assert_on_time(&slow, SECONDS, TIMEOUT);
    // Every push failed at its deadline and was said; the others were dropped or not made,
    // and all are counted.
    let (sent, failed, busy, incomplete) = (
        count_before(&said, "profiles ("),
        count_before(&said, "not delivered"),
        count_before(&said, "dropped while"),
        count_before(&said, "not made"),
    );
    eprintln!("sent {sent}, failed {failed}, dropped {busy}, not made {incomplete}");
    assert_eq!(sent, 0, "{said}");
    let deadlines = said.matches("not done within the push's deadline").count() as u64;
    assert!(deadlines >= 3 && deadlines == failed, "{said}");
    // At most one a second and one at the end (a pusher that falls behind the events makes
    // longer periods), each accounted for.
    assert!(failed + busy + incomplete <= SECONDS + 2, "{said}");
    // The server saw the pushes that failed (those begun once their time was up did not
    // connect), and was being read from when they failed.
    let (connections, read) = (
        trickler.connections.load(Ordering::Relaxed),
        trickler.bytes_read.load(Ordering::Relaxed),
    );
    eprintln!("the trickling server: {connections} connections, {read} bytes read");
    assert!(
        (2..=failed).contains(&connections),
        "{connections} connections"
    );
    assert!(read >= connections, "{read} bytes read");

    // The same against a server that answers at once.
    let (port, requests) = ingest_listener();
    let url = format!("http://127.0.0.1:{port}");
    let push = ["--push", &url, "--every", "1s", "--push-timeout", "2s"];
    let fast = watch(
        record_command(jvm.pid, SECONDS, &push),
        "push-prompt.pinrec",
        Duration::from_secs(60),
    );
    assert_ok(&fast.output, "pinprof record --push to a prompt server");
    let taken = requests.try_iter().count() as u64;
    assert_eq!(count_before(&fast.said(), "profiles ("), taken);
    eprintln!(
        "peak RSS (VmHWM): {} KiB against the trickling server, {} KiB against the prompt \
         one ({taken} profiles taken), bound {} KiB more",
        slow.peak_kib, fast.peak_kib, EXTRA_PEAK_KIB
    );
    assert!(fast.peak_kib > 0 && slow.peak_kib > 0);
    assert!(
        slow.peak_kib <= fast.peak_kib + EXTRA_PEAK_KIB,
        "{} KiB against the trickling server, {} KiB against the prompt one",
        slow.peak_kib,
        fast.peak_kib
    );
}

/// A name server that never answers (the only one pinprof's resolver knows, in a mount
/// namespace of its own): each push's lookup ends at the push's deadline, one lookup at
/// most is ever left waiting (the next pushes fail at once while it is), and the recording
/// still ends on time, complete.
#[test]
fn jdk21_push_to_a_name_no_server_answers_ends_on_time() {
    const SECONDS: u64 = 6;
    const TIMEOUT: u64 = 2;
    let jvm = start(21, "PinnedSleep", &[]);
    // A name server on a loopback address of its own that reads queries and answers none.
    let address = format!("127.53.{}.{}", std::process::id() % 250 + 1, 53);
    let server = std::net::UdpSocket::bind(format!("{address}:53")).unwrap();
    let queries = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&queries);
    std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        while server.recv(&mut buf).is_ok() {
            counted.fetch_add(1, Ordering::Relaxed);
        }
    });
    let resolv = scratch("push-resolv.conf");
    // Each try waits 30 s: far past the push's deadline.
    std::fs::write(
        &resolv,
        format!("nameserver {address}\noptions timeout:30 attempts:1\n"),
    )
    .unwrap();
    std::fs::set_permissions(&resolv, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(r#"mount --bind "$0" /etc/resolv.conf && exec "$@""#)
        .arg(&resolv)
        .arg(pinprof_bin())
        .args(["record", "--quiet", "--pid", &jvm.pid.to_string()])
        .args(["--duration", &format!("{SECONDS}s")])
        .args(["--push", "http://pyroscope.invalid:4040", "--every", "1s"])
        .args(["--push-timeout", &format!("{TIMEOUT}s"), "--output"]);
    let run = watch(command, "push-dns.pinrec", Duration::from_secs(60));
    let said = run.said();
    assert_ok(
        &run.output,
        "pinprof record --push to a name no server answers",
    );
    eprintln!("{said}");
    assert_on_time(&run, SECONDS, TIMEOUT);
    // The lookups did go to the silent server, and none was answered.
    let asked = queries.load(Ordering::Relaxed);
    assert!(asked >= 1, "the name server was never asked");
    assert_eq!(count_before(&said, "profiles ("), 0, "{said}");
    let waited = said.matches("no answer within the push's deadline").count();
    let at_once = said
        .matches("the lookup begun for an earlier push has not ended")
        .count();
    eprintln!("{asked} queries; {waited} lookups ran to the deadline, {at_once} failed at once");
    // One lookup at most runs at a time (30 s each here): the first waits for the
    // deadline, the pushes after it fail at once.
    assert_eq!(waited, 1, "{said}");
    assert!(at_once >= 1, "{said}");
    assert_eq!(
        count_before(&said, "not delivered") as usize,
        waited + at_once,
        "{said}"
    );
}

/// Credentials over http:// are refused before anything is recorded or sent, with a
/// message that says how to send them anyway, and without the secret.
#[test]
fn push_refuses_credentials_over_plain_http_and_says_how_to_allow_them() {
    require_root();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let mut target = Command::new("sleep").arg("30").spawn().unwrap();
    for (variable, value, secret) in [
        (
            "PINPROF_PUSH_BASIC_AUTH",
            "tenant:s3cret-pass",
            "s3cret-pass",
        ),
        ("PINPROF_PUSH_BEARER_TOKEN", "tok-s3cret", "tok-s3cret"),
    ] {
        let out = scratch("push-cleartext.pinrec");
        let run = pinprof()
            .args(["record", "--quiet", "--pid", &target.id().to_string()])
            .args(["--duration", "2s", "--push", &url, "--output"])
            .arg(&out)
            .env(variable, value)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{said}");
        assert!(
            said.contains(variable)
                && said.contains("clear text")
                && said.contains("https://")
                && said.contains("--push-cleartext-credentials"),
            "{said}"
        );
        assert!(!said.contains(secret), "{said}");
        // Nothing recorded, nothing sent.
        assert!(!out.exists());
        assert_eq!(
            listener.accept().map(|_| ()).unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock
        );
    }
    let _ = target.kill();
    let _ = target.wait();
}

/// `PinnedSleep` on JDK 21 as nobody on `stage`, its `java` run through a symlink named
/// `comm`: the process's name (`comm`) is what its owner chose.
fn start_jvm_named(stage: &Stage, comm: &str) -> Jvm {
    let named = stage.path("named");
    std::fs::create_dir_all(&named).unwrap();
    let named = named.join(comm);
    std::os::unix::fs::symlink(stage.jdk().join("bin/java"), &named).unwrap();
    let mut command = stage.java_as_nobody(&named);
    command
        .arg("-Djdk.virtualThreadScheduler.parallelism=2")
        .arg("PinnedSleep");
    spawn_as_nobody(command)
}

/// A JVM whose process name is `j{pid=1,env=x}` (its owner ran `java` through a symlink of
/// that name): with the default application name, every profile's name, read as Pyroscope
/// reads it, holds exactly pinprof's labels (`pid` the JVM's, `host` this host's, and the
/// user's `env=test`), the target's text escaped in the application name. Credentials go
/// over http:// once the user asks for it.
#[test]
fn jdk21_push_of_a_process_named_with_label_syntax_keeps_pinprofs_labels() {
    const HOSTILE: &str = "j{pid=1,env=x}";
    let stage = Stage::new("push-labels", 21);
    let jvm = start_jvm_named(&stage, HOSTILE);
    // The premise: the kernel names the process as its owner chose.
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", jvm.pid)).unwrap();
    assert_eq!(comm.trim_end(), HOSTILE);
    let (port, requests) = ingest_listener();
    let url = format!("http://127.0.0.1:{port}");
    let run = pinprof()
        .args(["record", "--quiet", "--pid", &jvm.pid.to_string()])
        .args(["--duration", "3s", "--push", &url, "--every", "1s"])
        .args(["--push-label", "env=test", "--push-cleartext-credentials"])
        .arg("--output")
        .arg(scratch("push-labels.pinrec"))
        .env("PINPROF_PUSH_BASIC_AUTH", "tenant:s3cret-pass")
        .output()
        .unwrap();
    assert_ok(&run, "pinprof record --push of a hostile process name");
    let pushes: Vec<Ingested> = requests.try_iter().collect();
    assert!((2..=5).contains(&pushes.len()), "{} pushes", pushes.len());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    assert!(
        host.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
        "this host's name {host:?} would be escaped: the check below needs a plain one"
    );
    let wanted: BTreeMap<String, String> = [
        ("env", "test"),
        ("host", host),
        ("pid", &jvm.pid.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for push in &pushes {
        let name = push.query("name");
        let (app, labels) = pyroscope_labels(&name);
        eprintln!("{name} -> {app} {labels:?}");
        assert_eq!(app, "pinprof.j_pid_1_env_x_", "{name}");
        assert_eq!(labels, wanted, "{name}");
        assert!(push.body_bytes > 0);
        // "tenant:s3cret-pass", base64.
        assert_eq!(
            push.headers["authorization"],
            "Basic dGVuYW50OnMzY3JldC1wYXNz"
        );
    }
}
