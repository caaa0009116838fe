//! Watches the terminal for its hang-up (a closed window, a lost SSH session), and frees
//! crossterm from it.
//!
//! crossterm reads standard input until it has an event or a read would block. A hung-up
//! terminal reads as end-of-file at once, for ever, so a hang-up that lands between the
//! view's own look at the terminal and crossterm's read leaves crossterm spinning, the view
//! stuck in it and the recording never finished. The watch puts an empty non-blocking pipe in
//! the terminal's place as soon as the hang-up comes: crossterm's reads then would block, it
//! returns, and the view sees `seen()` and ends as on Ctrl-C.

use std::{
    sync::{
        Once,
        atomic::{AtomicBool, Ordering},
    },
    thread,
};

static SEEN: AtomicBool = AtomicBool::new(false);
static WATCH: Once = Once::new();

/// Starts the watch on standard input (once per process).
pub fn watch() {
    WATCH.call_once(|| {
        // Not joined: it waits for a hang-up that may never come, and ends with the process.
        let _ = thread::Builder::new()
            .name("hang-up watch".into())
            .spawn(|| {
                if wait_for_hang_up() {
                    SEEN.store(true, Ordering::SeqCst);
                    replace_standard_input();
                }
            });
    });
}

/// Whether the watch has seen the terminal hang up.
pub fn seen() -> bool {
    SEEN.load(Ordering::SeqCst)
}

/// Blocks until standard input hangs up or fails (true), or the wait cannot be made (false).
fn wait_for_hang_up() -> bool {
    loop {
        // No events asked for: poll returns only for a hang-up or an error. And every
        // 200 ms all the same: a hang-up's wake-up says "readable", which does not wake a
        // poll that asked for nothing (input must not wake it either: it is the view's).
        let mut fd = libc::pollfd {
            fd: libc::STDIN_FILENO,
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut fd, 1, 200) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        if fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return true;
        }
    }
}

/// Standard input becomes the read end of an empty pipe whose write end stays open: every
/// read of it would block.
fn replace_standard_input() {
    let mut fds = [0; 2];
    // SAFETY: a valid array of two descriptors for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return;
    }
    // SAFETY: dup2 and close on descriptors pipe2 just made; the write end is left open on
    // purpose, for the life of the process.
    unsafe {
        libc::dup2(fds[0], libc::STDIN_FILENO);
        libc::close(fds[0]);
    }
}
