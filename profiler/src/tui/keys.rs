//! Every key the terminal view handles, in one table: the handler looks keys up here and the
//! help overlay (`?`) is drawn from it, so the help cannot list a key the view ignores or
//! miss one it takes.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Quit,
    Interrupt,
    NextTab,
    PreviousTab,
    Tab(usize),
    Down,
    Up,
    PageDown,
    PageUp,
    /// The stack pane's lines on / back.
    StackDown,
    StackUp,
    FirstRow,
    LastRow,
    /// The cursor one cell back / on.
    CellBack,
    CellOn,
    /// The cursor a second back / on.
    SecondBack,
    SecondOn,
    PlayPause,
    Slower,
    Faster,
    NextEpisode,
    PreviousEpisode,
    Start,
    End,
    ZoomIn,
    ZoomOut,
    ZoomFit,
    /// Marks one end of a span; again, clears it.
    Mark,
    Open,
    Close,
    Filter,
    Sort,
    Flamegraph,
    Help,
}

/// A row of the key table: the keys (as the help shows them), what they do (in at most
/// `HELP_WIDTH` characters: two columns of help fit 80 columns).
pub struct Binding {
    pub keys: &'static str,
    pub help: &'static str,
    pub action: Action,
    codes: &'static [(KeyCode, KeyModifiers)],
}

pub const HELP_WIDTH: usize = 27;

const NONE: KeyModifiers = KeyModifiers::NONE;
const SHIFT: KeyModifiers = KeyModifiers::SHIFT;
const CONTROL: KeyModifiers = KeyModifiers::CONTROL;

const fn bind(
    keys: &'static str,
    help: &'static str,
    action: Action,
    codes: &'static [(KeyCode, KeyModifiers)],
) -> Binding {
    Binding {
        keys,
        help,
        action,
        codes,
    }
}

/// The key table, in the order the help lists it.
pub const BINDINGS: &[Binding] = &[
    bind(
        "?",
        "this help",
        Action::Help,
        &[(KeyCode::Char('?'), NONE)],
    ),
    // Not Esc: a lone escape byte may be half an arrow key on a slow link, and quitting ends
    // the recording.
    bind(
        "q",
        "quit; live: ends recording",
        Action::Quit,
        &[(KeyCode::Char('q'), NONE)],
    ),
    bind(
        "Ctrl-C",
        "interrupt",
        Action::Interrupt,
        &[(KeyCode::Char('c'), CONTROL)],
    ),
    bind("Tab", "next view", Action::NextTab, &[(KeyCode::Tab, NONE)]),
    bind(
        "Shift-Tab",
        "previous view",
        Action::PreviousTab,
        &[(KeyCode::BackTab, SHIFT), (KeyCode::BackTab, NONE)],
    ),
    bind("1-6", "view 1 to 6", Action::Tab(0), &[]),
    bind(
        "↓ j",
        "next row or lane",
        Action::Down,
        &[(KeyCode::Down, NONE), (KeyCode::Char('j'), NONE)],
    ),
    bind(
        "↑ k",
        "previous row or lane",
        Action::Up,
        &[(KeyCode::Up, NONE), (KeyCode::Char('k'), NONE)],
    ),
    bind(
        "PgDn",
        "ten rows down",
        Action::PageDown,
        &[(KeyCode::PageDown, NONE)],
    ),
    bind(
        "PgUp",
        "ten rows up",
        Action::PageUp,
        &[(KeyCode::PageUp, NONE)],
    ),
    bind(
        "J",
        "stack pane lines down",
        Action::StackDown,
        &[(KeyCode::Char('J'), NONE), (KeyCode::Char('J'), SHIFT)],
    ),
    bind(
        "K",
        "stack pane lines up",
        Action::StackUp,
        &[(KeyCode::Char('K'), NONE), (KeyCode::Char('K'), SHIFT)],
    ),
    bind(
        "g",
        "first row",
        Action::FirstRow,
        &[(KeyCode::Char('g'), NONE)],
    ),
    bind(
        "G",
        "last row",
        Action::LastRow,
        &[(KeyCode::Char('G'), NONE), (KeyCode::Char('G'), SHIFT)],
    ),
    bind(
        "← h",
        "cursor a cell back",
        Action::CellBack,
        &[(KeyCode::Left, NONE), (KeyCode::Char('h'), NONE)],
    ),
    bind(
        "→ l",
        "cursor a cell on",
        Action::CellOn,
        &[(KeyCode::Right, NONE), (KeyCode::Char('l'), NONE)],
    ),
    bind(
        "Shift-← H",
        "cursor a second back",
        Action::SecondBack,
        &[
            (KeyCode::Left, SHIFT),
            (KeyCode::Char('H'), NONE),
            (KeyCode::Char('H'), SHIFT),
        ],
    ),
    bind(
        "Shift-→ L",
        "cursor a second on",
        Action::SecondOn,
        &[
            (KeyCode::Right, SHIFT),
            (KeyCode::Char('L'), NONE),
            (KeyCode::Char('L'), SHIFT),
        ],
    ),
    bind(
        "space",
        "pause / play from cursor",
        Action::PlayPause,
        &[(KeyCode::Char(' '), NONE)],
    ),
    bind(
        "[",
        "play slower",
        Action::Slower,
        &[(KeyCode::Char('['), NONE)],
    ),
    bind(
        "]",
        "play faster",
        Action::Faster,
        &[(KeyCode::Char(']'), NONE)],
    ),
    bind(
        "n",
        "next starvation, culprit",
        Action::NextEpisode,
        &[(KeyCode::Char('n'), NONE)],
    ),
    bind(
        "N",
        "previous starvation",
        Action::PreviousEpisode,
        &[(KeyCode::Char('N'), NONE), (KeyCode::Char('N'), SHIFT)],
    ),
    bind(
        "Home",
        "cursor to the start",
        Action::Start,
        &[(KeyCode::Home, NONE)],
    ),
    bind(
        "End",
        "cursor to the end, follow",
        Action::End,
        &[(KeyCode::End, NONE)],
    ),
    bind(
        "+ z",
        "zoom in (shorter cells)",
        Action::ZoomIn,
        &[
            (KeyCode::Char('+'), NONE),
            (KeyCode::Char('+'), SHIFT),
            (KeyCode::Char('z'), NONE),
        ],
    ),
    bind(
        "- Z",
        "zoom out (longer cells)",
        Action::ZoomOut,
        &[
            (KeyCode::Char('-'), NONE),
            (KeyCode::Char('Z'), NONE),
            (KeyCode::Char('Z'), SHIFT),
        ],
    ),
    bind(
        "0",
        "fit the whole window",
        Action::ZoomFit,
        &[(KeyCode::Char('0'), NONE)],
    ),
    bind(
        "v",
        "mark span start; again: off",
        Action::Mark,
        &[(KeyCode::Char('v'), NONE)],
    ),
    bind(
        "Enter",
        "open the event at cursor",
        Action::Open,
        &[(KeyCode::Enter, NONE)],
    ),
    bind(
        "Esc",
        "close; clear filter, span",
        Action::Close,
        &[(KeyCode::Esc, NONE)],
    ),
    bind(
        "/",
        "filter rows: name or frame",
        Action::Filter,
        &[(KeyCode::Char('/'), NONE)],
    ),
    bind(
        "s",
        "cycle the table's sort",
        Action::Sort,
        &[(KeyCode::Char('s'), NONE)],
    ),
    bind(
        "f",
        "flamegraph SVG of the span",
        Action::Flamegraph,
        &[(KeyCode::Char('f'), NONE)],
    ),
];

/// What `key` does in the view (None: nothing).
pub fn action(key: KeyEvent) -> Option<Action> {
    if let KeyCode::Char(c @ '1'..='6') = key.code {
        return Some(Action::Tab(c as usize - '1' as usize));
    }
    BINDINGS.iter().find_map(|b| {
        b.codes
            .iter()
            .any(|(code, mods)| *code == key.code && *mods == key.modifiers)
            .then_some(b.action)
    })
}

/// The help, a line per binding: its keys, then what they do.
pub fn help_lines() -> Vec<(&'static str, &'static str)> {
    BINDINGS.iter().map(|b| (b.keys, b.help)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_binding_is_reachable_and_no_key_is_bound_twice() {
        let mut seen = std::collections::HashSet::new();
        for b in BINDINGS {
            for code in b.codes {
                assert!(seen.insert(*code), "{code:?} bound twice");
                assert_eq!(action(KeyEvent::new(code.0, code.1)), Some(b.action));
            }
            assert!(b.help.chars().count() <= HELP_WIDTH, "{}", b.help);
            // Every binding but the digits is a key the handler takes.
            assert!(
                !b.codes.is_empty() || b.action == Action::Tab(0),
                "{}",
                b.keys
            );
        }
        assert_eq!(
            action(KeyEvent::new(KeyCode::Char('3'), NONE)),
            Some(Action::Tab(2))
        );
        assert_eq!(action(KeyEvent::new(KeyCode::Char('x'), NONE)), None);
    }
}
