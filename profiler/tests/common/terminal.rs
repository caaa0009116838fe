//! A real terminal for the live view's tests: `pinprof` runs on a pseudo-terminal, and what
//! it writes goes through a VT100 emulator, so tests read the screen a user would see.
//! (`cargo xtask bench` starts `pinprof top` the same way, in xtask's own terminal module.)

use std::{
    fs::File,
    io::{Read as _, Write as _},
    num::NonZeroU16,
    os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
    os::unix::process::CommandExt as _,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

pub struct Terminal {
    child: Child,
    input: File,
    screen: Arc<Mutex<vt100::Parser>>,
    /// Says when everything the program wrote has been read.
    read_all: mpsc::Receiver<()>,
    /// Tells the reader to let go of the terminal.
    hang_up: Arc<AtomicBool>,
}

impl Terminal {
    /// Starts `command` as the session leader of a new `rows` x `cols` terminal.
    pub fn spawn(mut command: Command, rows: u16, cols: u16) -> Self {
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
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // Not inherited by what other tests start meanwhile: a stray copy of the terminal
        // would keep it open after pinprof exits.
        for fd in [master, slave] {
            // SAFETY: fcntl on descriptors we own.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        // SAFETY: openpty returned two fresh descriptors that we now own.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the terminal"));
        command
            .stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave))
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
        let child = command.spawn().expect("start pinprof on the terminal");
        drop(slave);
        let mut output = File::from(master.try_clone().expect("dup the terminal"));
        let screen = Arc::new(Mutex::new(vt100::Parser::new(
            NonZeroU16::new(rows).expect("rows"),
            NonZeroU16::new(cols).expect("columns"),
            0,
        )));
        let parser = Arc::clone(&screen);
        let (done, read_all) = mpsc::channel();
        let hang_up = Arc::new(AtomicBool::new(false));
        let let_go = Arc::clone(&hang_up);
        thread::spawn(move || {
            let mut buf = [0u8; 65536];
            // Ends with EIO once the program and its terminal are gone, or when told to.
            while !let_go.load(Ordering::Relaxed) {
                let mut fd = libc::pollfd {
                    fd: output.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                if unsafe { libc::poll(&mut fd, 1, 100) } == 0 {
                    continue;
                }
                match output.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => parser.lock().unwrap().process(&buf[..n]),
                }
            }
            let _ = done.send(());
        });
        Self {
            child,
            input: File::from(master),
            screen,
            read_all,
            hang_up,
        }
    }

    /// Closes the terminal, as closing its window would: the program gets a hang-up, and
    /// its terminal gives it nothing but errors from then on.
    pub fn hang_up(&mut self) {
        self.hang_up.store(true, Ordering::Relaxed);
        // The last copy of our end goes with the reader.
        self.input = File::open("/dev/null").unwrap();
        self.drain();
    }

    /// Resizes the terminal, as dragging its window would: the program gets a SIGWINCH.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: a valid window size for the terminal we own.
        let rc = unsafe { libc::ioctl(self.input.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        assert_eq!(rc, 0, "resize: {}", std::io::Error::last_os_error());
        self.screen.lock().unwrap().set_size(
            NonZeroU16::new(rows).expect("rows"),
            NonZeroU16::new(cols).expect("columns"),
        );
    }

    /// The screen's text now.
    pub fn contents(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    /// Whether the program has the alternate screen (a full-screen UI) up.
    pub fn in_alternate_screen(&self) -> bool {
        self.screen.lock().unwrap().screen().alternate_screen()
    }

    /// Waits until the screen satisfies `done`; panics with the screen after `timeout`.
    pub fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> String {
        let started = Instant::now();
        loop {
            let text = self.contents();
            if done(&text) {
                return text;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                self.drain();
                let text = self.contents();
                assert!(
                    done(&text),
                    "pinprof exited ({status}) before {what}:\n{text}"
                );
                return text;
            }
            assert!(
                started.elapsed() < timeout,
                "no {what} after {timeout:?}; the screen:\n{text}"
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Types `keys`.
    pub fn send(&mut self, keys: &[u8]) {
        self.input.write_all(keys).expect("type into the terminal");
        self.input.flush().unwrap();
    }

    /// Waits for the program to exit; panics with the screen after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.drain();
                return status;
            }
            if started.elapsed() > timeout {
                let _ = self.child.kill();
                panic!(
                    "pinprof still running after {timeout:?}:\n{}",
                    self.contents()
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the emulator has seen all the program wrote (it has exited: its end of
    /// the terminal is closed, and reading ends), for a few seconds at most.
    fn drain(&mut self) {
        let _ = self.read_all.recv_timeout(Duration::from_secs(5));
    }

    /// The program's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
