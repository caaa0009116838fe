//! Text on its way to a terminal or a log line. Thread names, process names, paths, symbols
//! and the JVM's attach replies come from the target, whose owner may put escape sequences
//! in them: a title change, OSC 52 (root's clipboard), a cleared screen with a fake line.
//! Everything pinprof prints goes through `for_terminal`: control characters are shown
//! escaped, never sent as they are, and a message is cut to a length a person reads.

use std::{borrow::Cow, fmt::Write as _};

/// The longest message said on standard error (an attach reply can be megabytes).
pub const MAX_MESSAGE: usize = 16 << 10;

/// `text` with every control character (but the newline and the tab) and every invisible
/// direction override escaped (`\x1b`, `\u{202e}`), cut to `max` bytes with the count of
/// what was left out; borrowed when nothing needed changing.
pub fn for_terminal(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max && !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(max) + 32);
    let mut cut_at = None;
    for (i, c) in text.char_indices() {
        if out.len() >= max {
            cut_at = Some(i);
            break;
        }
        if needs_escape(c) {
            if (c as u32) < 0x100 {
                let _ = write!(out, "\\x{:02x}", c as u32);
            } else {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        } else {
            out.push(c);
        }
    }
    if let Some(i) = cut_at {
        let _ = write!(out, "… ({} more bytes not shown)", text.len() - i);
    }
    Cow::Owned(out)
}

/// Control characters (C0, DEL, C1) but the newline and the tab, and the bidirectional
/// overrides and isolates that reorder what a reader sees.
fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_reach_no_terminal() {
        let hostile = "worker\x1b]52;c;Y3VybCB8IHNo\x07\x1b[2J\u{9b}31m\u{202e}gnp.exe\rok\n\tnext";
        let shown = for_terminal(hostile, MAX_MESSAGE);
        assert_eq!(
            shown,
            "worker\\x1b]52;c;Y3VybCB8IHNo\\x07\\x1b[2J\\x9b31m\\u{202e}gnp.exe\\x0dok\n\tnext"
        );
        assert!(!shown.chars().any(needs_escape));
        assert!(matches!(
            for_terminal("plain ünïcode\n", 100),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn long_messages_are_cut_and_say_so() {
        let long = "é".repeat(10_000);
        let shown = for_terminal(&long, 100);
        assert!(shown.len() < 160, "{}", shown.len());
        assert!(shown.ends_with("(19900 more bytes not shown)"), "{shown}");
        assert!(shown.starts_with("éé"));
    }
}
