//! A stack as the text report shows it: the frames that say where (the application's, the
//! ones holding a monitor, the innermost one, which says how it blocked) in full, runs of the
//! JDK's own frames between them folded into one line, recursion into one line, and the
//! rest cut at a depth that never hides the culprit.

use crate::analysis::jdk::{is_jdk_method, is_marker};

/// One frame to show: its label, and whether it holds a monitor.
pub struct ShownFrame<'a> {
    /// The frame as people read it (with its source line where known).
    pub label: std::borrow::Cow<'a, str>,
    pub holds_monitor: bool,
}

enum Line {
    /// Frame `index`, repeated `times` in a row (recursion).
    Frame { index: usize, times: usize },
    /// Frames of the JDK folded: how many.
    Jdk(usize),
}

/// The JDK's own frames, and stubs: how it got there, not where.
fn foldable(label: &str) -> bool {
    is_jdk_method(label) || (is_marker(label) && label.ends_with("stub]"))
}

/// The lines of a stack, innermost first: every frame when `full`, else folded and cut at
/// `depth` lines past which only the culprit frames show (those holding a monitor, else the
/// innermost application frame, with the application frames next to them).
pub fn lines(frames: &[ShownFrame], depth: usize, full: bool) -> Vec<String> {
    let label = |f: &ShownFrame| {
        if f.holds_monitor {
            format!("{}  [holds monitor]", f.label)
        } else {
            f.label.to_string()
        }
    };
    if full {
        return frames.iter().map(label).collect();
    }
    let application = |i: usize| {
        let l = &*frames[i].label;
        !foldable(l) && !is_marker(l) && l.contains('.')
    };
    // The culprits: frames holding a monitor, else the innermost application frame; and
    // the application frames on either side of each.
    let mut culprits: Vec<usize> = (0..frames.len())
        .filter(|&i| frames[i].holds_monitor)
        .collect();
    if culprits.is_empty() {
        culprits.extend((0..frames.len()).find(|&i| application(i)));
    }
    let mut must: Vec<usize> = Vec::new();
    for &c in &culprits {
        must.push(c);
        must.extend((0..c).rev().find(|&i| application(i)));
        must.extend((c + 1..frames.len()).find(|&i| application(i)));
    }

    let mut folded: Vec<Line> = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        let f = &frames[i];
        if i > 0 && !f.holds_monitor && foldable(&f.label) {
            let run = frames[i..]
                .iter()
                .take_while(|f| !f.holds_monitor && foldable(&f.label))
                .count();
            if run >= 2 {
                folded.push(Line::Jdk(run));
                i += run;
                continue;
            }
        }
        let times = frames[i..]
            .iter()
            .take_while(|g| g.label == f.label && g.holds_monitor == f.holds_monitor)
            .count();
        folded.push(Line::Frame { index: i, times });
        i += times;
    }

    let frames_in = |line: &Line| match line {
        Line::Frame { times, .. } => *times,
        Line::Jdk(n) => *n,
    };
    let shown = |line: &Line| match line {
        Line::Frame { index, times: 1 } => label(&frames[*index]),
        Line::Frame { index, times } => {
            format!("{}  (x{times}, recursive)", label(&frames[*index]))
        }
        Line::Jdk(n) => format!("... {n} JDK frames"),
    };
    let mut out = Vec::new();
    let mut skipped = 0;
    for (n, line) in folded.iter().enumerate() {
        let needed = matches!(line, Line::Frame { index, times }
            if must.iter().any(|m| (*index..index + times).contains(m)));
        if n < depth || needed {
            if skipped > 0 {
                out.push(more(skipped));
                skipped = 0;
            }
            out.push(shown(line));
        } else {
            skipped += frames_in(line);
        }
    }
    if skipped > 0 {
        out.push(more(skipped));
    }
    out
}

fn more(n: usize) -> String {
    format!("... {n} more frame{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(labels: &[(&'static str, bool)]) -> Vec<ShownFrame<'static>> {
        labels
            .iter()
            .map(|&(label, holds_monitor)| ShownFrame {
                label: label.into(),
                holds_monitor,
            })
            .collect()
    }

    #[test]
    fn jdk_runs_and_recursion_fold_and_the_holder_shows_past_the_depth() {
        let mut stack = vec![
            ("jdk.internal.misc.Unsafe.park", false),
            ("java.util.concurrent.locks.LockSupport.park", false),
            ("sun.nio.ch.NioSocketImpl.park", false),
            ("sun.nio.cs.StreamDecoder.readBytes", false),
            ("[monitorenter_nofpu Runtime1 stub]", false),
        ];
        stack.extend(std::iter::repeat_n(("Shop.deeper", false), 20));
        stack.push(("Shop$PriceCache.refresh", true));
        stack.extend(std::iter::repeat_n(("Shop.down", false), 20));
        stack.push(("java.lang.VirtualThread.run", false));
        stack.push((
            "[callers frozen in the virtual thread's stack chunk]",
            false,
        ));
        let f = frames(&stack);
        assert_eq!(
            lines(&f, 16, false),
            [
                "jdk.internal.misc.Unsafe.park",
                "... 4 JDK frames",
                "Shop.deeper  (x20, recursive)",
                "Shop$PriceCache.refresh  [holds monitor]",
                "Shop.down  (x20, recursive)",
                "java.lang.VirtualThread.run",
                "[callers frozen in the virtual thread's stack chunk]",
            ]
        );
        // Cut at 2 lines, the holder and the application frames around it still show.
        assert_eq!(
            lines(&f, 2, false),
            [
                "jdk.internal.misc.Unsafe.park",
                "... 4 JDK frames",
                "Shop.deeper  (x20, recursive)",
                "Shop$PriceCache.refresh  [holds monitor]",
                "Shop.down  (x20, recursive)",
                "... 2 more frames",
            ]
        );
        assert_eq!(lines(&f, 2, true).len(), stack.len());
    }

    #[test]
    fn without_a_holder_the_innermost_application_frame_is_the_culprit() {
        let mut stack = vec![("java.lang.Thread.sleep", false)];
        stack.extend(std::iter::repeat_n(("java.util.Foo.bar", false), 1));
        stack.extend(std::iter::repeat_n(("x.Y.z", false), 1));
        let f = frames(&stack);
        assert_eq!(
            lines(&f, 1, false),
            ["java.lang.Thread.sleep", "... 1 more frame", "x.Y.z"]
        );
    }
}
