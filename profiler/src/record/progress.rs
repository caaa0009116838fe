//! The progress line: how far the recording is, said on stderr while it records.

use std::{io::IsTerminal as _, time::Duration};

/// The line on stderr that says how far the recording is.
pub(super) struct Progress {
    enabled: bool,
    tty: bool,
    /// Whether the line is on the terminal now, unended.
    shown: std::cell::Cell<bool>,
}

impl Progress {
    pub(super) fn new(enabled: bool) -> Self {
        Self {
            enabled,
            tty: std::io::stderr().is_terminal(),
            shown: std::cell::Cell::new(false),
        }
    }

    /// `window`: the recording's time so far, as the summary at the end counts it.
    pub(super) fn show(&self, window: Duration, events: u64, bytes: u64, lost: u64) {
        if !self.enabled {
            return;
        }
        let line = format!(
            "recording: {:5.1}s, {events} events, {:.1} MiB, {lost} lost",
            window.as_secs_f64(),
            bytes as f64 / f64::from(1 << 20)
        );
        if self.tty {
            let _ = std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("\r{line}   "));
            self.shown.set(true);
        } else if window.as_secs().is_multiple_of(5) {
            say!("{line}");
        }
    }

    /// Says a line of its own on stderr, below the progress line if one is shown.
    pub(super) fn say(&self, line: &str) {
        if self.shown.replace(false) {
            say!();
        }
        say!("{line}");
    }

    pub(super) fn finish(&self, window: Duration, events: u64, bytes: u64, lost: u64) {
        if self.enabled && self.tty {
            self.show(window, events, bytes, lost);
            say!();
        }
    }
}
