//! The one door to third-party parsers of the target's files.
//!
//! blazesym (symbols), framehop (unwind tables) and object (ELF) read the ELF files the target
//! maps, which its owner may have crafted. A panic in one of them must cost what it was doing
//! (one file's symbols, one file's unwind tables), not the recording: every call into them on
//! a target's file goes through `guard`, which catches the panic, counts it, keeps the first
//! one's message for the recording's warning, and keeps it off the terminal (the panic hook
//! stays quiet for guarded panics only; `quiet_panics`). What the caller held of that parser
//! may be half-updated: it drops it and does not call it on that file again.

use std::{
    cell::Cell,
    panic::{self, AssertUnwindSafe},
    sync::{
        Mutex, Once,
        atomic::{AtomicU64, Ordering},
    },
};

/// Characters of a panic's message kept (it may quote the file).
const MAX_MESSAGE: usize = 200;

static PANICS: AtomicU64 = AtomicU64::new(0);
/// The first panic: the file and what the parser said.
static FIRST: Mutex<Option<(String, String)>> = Mutex::new(None);

thread_local! {
    /// Whether this thread is inside `guard` (its panics are caught, and not printed).
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    /// What the last guarded panic of this thread said, for `guard` to keep.
    static MESSAGE: Cell<Option<String>> = const { Cell::new(None) };
}

/// Runs `parse`, a third-party parser at work on the target's file `file` (named for the
/// warning), so that a panic in it is caught and counted: None then.
pub fn guard<T>(file: &str, parse: impl FnOnce() -> T) -> Option<T> {
    quiet_panics();
    let outer = GUARDED.with(|g| g.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(parse));
    GUARDED.with(|g| g.set(outer));
    match result {
        Ok(value) => Some(value),
        Err(payload) => {
            PANICS.fetch_add(1, Ordering::Relaxed);
            let message = MESSAGE
                .with(Cell::take)
                .unwrap_or_else(|| payload_text(payload.as_ref()));
            let mut first = FIRST.lock().unwrap_or_else(|e| e.into_inner());
            if first.is_none() {
                *first = Some((clean(file), clean(&message)));
            }
            None
        }
    }
}

/// How many guarded parsers panicked so far in this process.
pub fn panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

/// The warning a recording carries when a parser panicked, None when none did.
pub fn warning() -> Option<String> {
    let count = panics();
    if count == 0 {
        return None;
    }
    let first = FIRST.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let (file, message) = first.unwrap_or_default();
    Some(format!(
        "a parser of the target's ELF files failed {count} times on what they hold (first: \
         {file}: {message}); the symbols or unwind tables of those files are left out"
    ))
}

/// Installs, once and then again after any other hook was set over it (`tui` sets ratatui's
/// after its own start), the panic hook that keeps guarded panics quiet: a panic outside
/// `guard` goes to the hook that was there before, as it did.
pub fn quiet_panics() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(install);
}

/// `quiet_panics`, installed again over whatever hook is there now (after a terminal UI set
/// its own, which would otherwise run first on a guarded panic and restore the terminal).
pub fn quiet_panics_over_current_hook() {
    install();
}

fn install() {
    let previous = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if GUARDED.with(Cell::get) {
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let text = format!("{}{at}", payload_text(info.payload()));
            MESSAGE.with(|m| m.set(Some(text)));
            return;
        }
        previous(info);
    }));
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}

/// A text fit for a terminal and a log line: control characters escaped, length capped.
fn clean(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == MAX_MESSAGE {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_is_caught_counted_and_said_once() {
        let before = panics();
        assert_eq!(guard("lib.so", || 7), Some(7));
        let caught: Option<u32> = guard("/tmp/evil.so", || panic!("index out of \x1b]52;c;bad"));
        assert_eq!(caught, None);
        let nested = guard("outer.so", || {
            guard("inner.so", || -> u8 { panic!("inner") })
        });
        assert_eq!(nested, Some(None), "the inner guard caught it");
        assert_eq!(panics() - before, 2);
        let warning = warning().unwrap();
        assert!(warning.contains("failed"), "{warning}");
        assert!(!warning.contains('\x1b'), "{warning}");
    }

    #[test]
    fn texts_are_cleaned_and_cut() {
        assert_eq!(clean("a\x1b[2Jb\n"), "a\\u{1b}[2Jb\\n");
        let long = clean(&"x".repeat(1000));
        assert_eq!(long.len(), MAX_MESSAGE + 3);
    }
}
