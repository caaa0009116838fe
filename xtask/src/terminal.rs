//! A pseudo-terminal for running `pinprof top` without a person: the bench prices the live
//! view as a user would run it, full screen and redrawing. (The integration tests have the
//! same in `profiler/tests/common/terminal.rs`, with a VT100 emulator on top.)

use std::{
    fs::File,
    io::Read as _,
    os::fd::{FromRawFd as _, OwnedFd},
    os::unix::process::CommandExt as _,
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

/// A program running on its own terminal; what it draws is read and kept (the last 64 KiB),
/// so that it never blocks on a full terminal.
pub struct OnTerminal {
    pub child: Child,
    output: Arc<Mutex<Vec<u8>>>,
    /// Set once the terminal is closed and all it showed has been read.
    closed: Arc<AtomicBool>,
}

impl OnTerminal {
    pub fn spawn(command: &mut Command, rows: u16, cols: u16) -> Result<Self> {
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: valid out-pointers and window size; no name buffer or termios.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        if rc != 0 {
            bail!("openpty: {}", std::io::Error::last_os_error());
        }
        for fd in [master, slave] {
            // SAFETY: fcntl on descriptors we own: not inherited by later children.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        // SAFETY: openpty returned two fresh descriptors that we now own.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let stdio = |fd: &OwnedFd| -> Result<Stdio> { Ok(Stdio::from(fd.try_clone()?)) };
        command
            .stdin(stdio(&slave)?)
            .stdout(stdio(&slave)?)
            .stderr(stdio(&slave)?)
            .env("TERM", "xterm-256color");
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().context("cannot start on a terminal")?;
        drop(slave);
        let output = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&output);
        let closed = Arc::new(AtomicBool::new(false));
        let done = Arc::clone(&closed);
        let mut master = File::from(master);
        thread::spawn(move || {
            let mut buf = [0u8; 65536];
            // Ends with EIO once the program and its terminal are gone.
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut kept = kept.lock().unwrap();
                kept.extend_from_slice(&buf[..n]);
                let excess = kept.len().saturating_sub(65536);
                kept.drain(..excess);
            }
            done.store(true, Ordering::Release);
        });
        Ok(Self {
            child,
            output,
            closed,
        })
    }

    /// What the program wrote last, after it exited: its last words (what it says once off
    /// the screen) may still be on their way through the terminal, so they are waited for
    /// (a moment at most).
    pub fn output_at_exit(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.closed.load(Ordering::Acquire) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        self.output()
    }

    /// What the program wrote last, as text (escape sequences included).
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }
}
