//! The time cursor: where in the window the view stands, how long a swimlane cell is, and
//! what span of time the tables cover. State only; `draw` reads it.

use std::time::Instant;

/// Cell lengths the zoom steps through: 1, 2, 5 of each power of ten, 10 µs to an hour.
pub const LADDER: [u64; 27] = {
    let mut ladder = [0u64; 27];
    let mut i = 0;
    let mut decade = 10_000u64;
    while i < 27 {
        ladder[i] = decade;
        if i + 1 < 27 {
            ladder[i + 1] = decade * 2;
        }
        if i + 2 < 27 {
            ladder[i + 2] = decade * 5;
        }
        decade *= 10;
        i += 3;
    }
    ladder[26] = 3_600_000_000_000;
    ladder
};

/// Replay speeds `[` and `]` step through, in times the recorded pace.
const SPEEDS: [f64; 11] = [
    0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0,
];

#[derive(Debug)]
pub struct Timeline {
    /// Where the cursor is (the kernel's clock, as the recording's times).
    pub cursor_ns: u64,
    /// The cursor stays on the newest time (a live view not paused).
    pub following: bool,
    /// A replay moving the cursor on at `speed`.
    pub playing: bool,
    pub speed: f64,
    /// The cell length: None fits the whole window in the lanes; else `LADDER[i]`.
    pub zoom: Option<usize>,
    /// The first cell's start, when the lanes do not follow the cursor's edge.
    origin_ns: u64,
    /// Cells across the lanes (set from the terminal's width).
    pub cells: usize,
    /// One end of a span the user marked; the cursor is the other.
    pub mark_ns: Option<u64>,
    last_tick: Option<Instant>,
}

/// What the lanes show: `cells` cells of `cell_ns` from `from_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub from_ns: u64,
    pub cell_ns: u64,
    pub cells: usize,
}

impl Range {
    pub fn end_ns(&self) -> u64 {
        self.from_ns
            .saturating_add(self.cell_ns.saturating_mul(self.cells as u64))
    }

    /// The cell `t` falls in, if it is shown.
    pub fn cell_of(&self, t: u64) -> Option<usize> {
        let i = t.checked_sub(self.from_ns)? / self.cell_ns.max(1);
        (i < self.cells as u64).then_some(i as usize)
    }
}

impl Timeline {
    /// A live view follows the newest time; a replay starts at the end, or plays from the
    /// start at `speed`.
    pub fn new(live: bool, speed: Option<f64>) -> Self {
        Self {
            cursor_ns: 0,
            following: live || speed.is_none(),
            playing: speed.is_some(),
            speed: speed.unwrap_or(1.0),
            zoom: None,
            origin_ns: 0,
            cells: 60,
            mark_ns: None,
            last_tick: None,
        }
    }

    /// The cell length at this zoom, for a window `[start, end)`.
    pub fn cell_ns(&self, start: u64, end: u64) -> u64 {
        match self.zoom {
            Some(i) => LADDER[i.min(LADDER.len() - 1)],
            None => fit_cell(start, end, self.cells),
        }
    }

    /// What the lanes show of the window `[start, end)`.
    pub fn range(&self, start: u64, end: u64) -> Range {
        let cell_ns = self.cell_ns(start, end);
        let cells = self.cells.max(1);
        let from_ns = if self.zoom.is_none() {
            start
        } else if self.following || self.playing {
            // The cursor's cell is the last one shown.
            let k = self.cursor_ns.saturating_sub(start) / cell_ns + 1;
            start + k.saturating_sub(cells as u64) * cell_ns
        } else {
            self.origin_ns.clamp(start, end.max(start))
        };
        Range {
            from_ns,
            cell_ns,
            cells,
        }
    }

    /// The span the tables cover: the marked one, else what the lanes show, up to the cursor
    /// while it moves on (what has happened by then), within the window.
    pub fn span(&self, start: u64, end: u64) -> (u64, u64) {
        if let Some(mark) = self.mark_ns {
            // At least the cursor's cell: a mark just set is not an empty span.
            let cell = self.cell_ns(start, end);
            let (a, b) = (mark.min(self.cursor_ns), mark.max(self.cursor_ns));
            let b = b.max(a.saturating_add(cell));
            return (a.max(start), b.min(end).max(a.max(start)));
        }
        let range = self.range(start, end);
        let mut to = range.end_ns().min(end);
        if self.playing || (self.following && self.zoom.is_some()) {
            to = to.min(self.cursor_ns.saturating_add(1));
        }
        (range.from_ns.max(start), to.max(range.from_ns.max(start)))
    }

    /// Moves the cursor with time: onto the newest while following, on at the replay's speed
    /// while playing (stopping at the end once the window is `complete`).
    pub fn tick(&mut self, start: u64, end: u64, complete: bool) {
        let now = Instant::now();
        let elapsed = self
            .last_tick
            .map_or(0.0, |t| now.duration_since(t).as_secs_f64());
        self.last_tick = Some(now);
        if self.playing {
            let step = (elapsed * self.speed * 1e9) as u64;
            self.cursor_ns = self.cursor_ns.max(start).saturating_add(step);
            if self.cursor_ns >= end {
                self.cursor_ns = end;
                if complete {
                    self.playing = false;
                    self.following = true;
                }
            }
        } else if self.following {
            self.cursor_ns = end;
        }
        self.cursor_ns = self.cursor_ns.clamp(start, end.max(start));
    }

    /// Moves the cursor by `by` ns (back when negative): the view stops following or playing.
    pub fn seek(&mut self, by: i64, start: u64, end: u64) {
        self.pause_here(start, end);
        self.cursor_ns = self
            .cursor_ns
            .saturating_add_signed(by)
            .clamp(start, end.max(start));
        self.keep_in_view(start, end);
    }

    /// Puts the cursor at `t`, paused.
    pub fn go_to(&mut self, t: u64, start: u64, end: u64) {
        self.pause_here(start, end);
        self.cursor_ns = t.clamp(start, end.max(start));
        self.keep_in_view(start, end);
    }

    /// Puts the cursor at `t`, paused, the lanes showing from `from` on, with a cell starting
    /// at `t`: the cursor's cell is then what happened from `t` on (an episode's start), not
    /// mostly what came before it.
    pub fn go_to_showing(&mut self, t: u64, from: u64, start: u64, end: u64) {
        self.go_to(t, start, end);
        if self.zoom.is_some() {
            let cell = self.cell_ns(start, end);
            let t = t.clamp(start, end.max(start));
            let before = (t - from.clamp(start, t))
                .div_ceil(cell)
                .min((t - start) / cell);
            self.origin_ns = t - before * cell;
            // (`from` too far back for this zoom: the cursor is shown all the same.)
            self.keep_in_view(start, end);
        }
    }

    /// Stops following or playing, the lanes staying where they are.
    fn pause_here(&mut self, start: u64, end: u64) {
        if self.following || self.playing {
            self.origin_ns = self.range(start, end).from_ns;
        }
        self.following = false;
        self.playing = false;
    }

    /// Space: a live view pauses (the recording goes on) or goes back to the newest; a replay
    /// pauses or plays on (from the start once at the end).
    pub fn play_pause(&mut self, live: bool, start: u64, end: u64) {
        if live {
            if self.following {
                self.pause_here(start, end);
            } else {
                self.following = true;
            }
            return;
        }
        if self.playing {
            self.pause_here(start, end);
            return;
        }
        if self.cursor_ns >= end {
            self.cursor_ns = start;
        }
        self.origin_ns = self.range(start, end).from_ns;
        self.following = false;
        self.playing = true;
        self.last_tick = None;
    }

    pub fn faster(&mut self, faster: bool) {
        let i = SPEEDS
            .iter()
            .position(|s| *s >= self.speed)
            .unwrap_or(SPEEDS.len() - 1);
        let i = if faster {
            (i + 1).min(SPEEDS.len() - 1)
        } else {
            i.saturating_sub(1)
        };
        self.speed = SPEEDS[i];
    }

    /// Shorter (`finer`) or longer cells; the cursor stays where it is on the screen.
    pub fn zoom(&mut self, finer: bool, start: u64, end: u64) {
        let before = self.range(start, end);
        let column = before.cell_of(self.cursor_ns).unwrap_or(before.cells / 2) as u64;
        // Along the ladder; from the fit, to the ladder's cell just shorter or longer.
        self.zoom = Some(match self.zoom {
            Some(i) if finer => i.saturating_sub(1),
            Some(i) => (i + 1).min(LADDER.len() - 1),
            None => {
                let fit = fit_cell(start, end, self.cells);
                if finer {
                    LADDER.iter().rposition(|c| *c < fit).unwrap_or(0)
                } else {
                    LADDER
                        .iter()
                        .position(|c| *c > fit)
                        .unwrap_or(LADDER.len() - 1)
                }
            }
        });
        let cell = self.cell_ns(start, end);
        let from = self
            .cursor_ns
            .saturating_sub(column.saturating_mul(cell))
            .max(start);
        self.origin_ns = start + (from - start) / cell * cell;
    }

    pub fn zoom_fit(&mut self) {
        self.zoom = None;
    }

    /// Scrolls the lanes, by half a screen at a time, so that the cursor is shown.
    fn keep_in_view(&mut self, start: u64, end: u64) {
        let range = self.range(start, end);
        if range.cell_of(self.cursor_ns).is_some() || self.zoom.is_none() {
            return;
        }
        let cell = range.cell_ns;
        let half = cell.saturating_mul(range.cells as u64 / 2);
        let from = self.cursor_ns.saturating_sub(half).max(start);
        self.origin_ns = start + (from - start) / cell * cell;
    }

    /// A mark at the cursor, or none if there was one.
    pub fn toggle_mark(&mut self) {
        self.mark_ns = match self.mark_ns {
            Some(_) => None,
            None => Some(self.cursor_ns),
        };
    }
}

/// The shortest round cell (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 of a power of ten) that fits
/// `[start, end)` in `cells` cells: the whole window fills most of the lanes (the ladder's
/// 1-2-5 steps would leave up to 60% of them empty).
fn fit_cell(start: u64, end: u64, cells: usize) -> u64 {
    let per = end
        .saturating_sub(start)
        .div_ceil(cells.max(1) as u64)
        .max(1);
    let mut decade = 1_000u64;
    loop {
        for step in [10, 15, 20, 25, 30, 40, 50, 60, 80] {
            let cell = decade.saturating_mul(step) / 10;
            if cell >= per.max(LADDER[0]) {
                return cell;
            }
        }
        if decade > u64::MAX / 100 {
            return LADDER[LADDER.len() - 1];
        }
        decade *= 10;
    }
}

/// A cell length as the lanes' title says it ("100ms", "2s", "1.5s").
pub fn cell_label(ns: u64) -> String {
    let unit = |n: u64, per: u64, name: &str| {
        if n.is_multiple_of(per) {
            format!("{}{name}", n / per)
        } else {
            format!("{}{name}", n as f64 / per as f64)
        }
    };
    match ns {
        n if n >= 60_000_000_000 && n.is_multiple_of(60_000_000_000) => {
            format!("{}min", n / 60_000_000_000)
        }
        n if n >= 1_000_000_000 => unit(n, 1_000_000_000, "s"),
        n if n >= 1_000_000 => unit(n, 1_000_000, "ms"),
        n => unit(n, 1_000, "µs"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    #[test]
    fn the_ladder_steps_one_two_five() {
        assert_eq!(&LADDER[..4], &[10_000, 20_000, 50_000, 100_000]);
        assert_eq!(LADDER[12], 100 * MS);
        assert!(LADDER.is_sorted());
        assert_eq!(cell_label(100 * MS), "100ms");
        assert_eq!(cell_label(2 * S), "2s");
        assert_eq!(cell_label(600 * S), "10min");
    }

    #[test]
    fn fit_shows_the_whole_window_and_zoom_keeps_the_cursor_in_place() {
        let (start, end) = (10 * S, 16 * S);
        let mut t = Timeline::new(false, None);
        t.cells = 60;
        t.tick(start, end, true);
        assert_eq!(
            t.cursor_ns, end,
            "a replay without a pace starts at its end"
        );
        let r = t.range(start, end);
        assert_eq!((r.from_ns, r.cell_ns), (start, 100 * MS));
        assert_eq!(t.span(start, end), (start, end));
        t.go_to(13 * S, start, end);
        t.zoom(true, start, end);
        let r = t.range(start, end);
        assert_eq!(r.cell_ns, 50 * MS);
        assert_eq!(
            r.cell_of(13 * S),
            Some(30),
            "the cursor stays in its column"
        );
        // A second on moves the cursor a second; the lanes scroll to keep it shown.
        t.seek(S as i64, start, end);
        assert_eq!(t.cursor_ns, 14 * S);
        assert!(t.range(start, end).cell_of(14 * S).is_some());
        let (a, b) = t.span(start, end);
        assert_eq!(b - a, 3 * S, "the tables cover what the lanes show");
        // Out along the ladder, past the fit if asked; `0` fits again.
        for _ in 0..3 {
            t.zoom(false, start, end);
        }
        assert_eq!(t.cell_ns(start, end), 500 * MS);
        t.zoom_fit();
        assert_eq!(t.cell_ns(start, end), 100 * MS);
        // The fit is round and fills most of the lanes: 8.1 s in 60 cells of 150 ms.
        assert_eq!(fit_cell(0, 8_100 * MS, 60), 150 * MS);
        assert_eq!(cell_label(150 * MS), "150ms");
        assert_eq!(cell_label(1_500 * MS), "1.5s");
    }

    #[test]
    fn going_to_an_episode_starts_a_cell_at_it() {
        // An episode at 1.697 s, cells of 100 ms: the cursor's cell is 1.697-1.797 s, not
        // 1.6-1.7 s, of which the episode holds only 3 ms.
        let (start, end) = (0, 17 * S);
        let mut t = Timeline::new(false, None);
        t.cells = 100;
        t.zoom = LADDER.iter().position(|c| *c == 100 * MS);
        let at = 1_697 * MS;
        t.go_to_showing(at, at.saturating_sub(3 * S), start, end);
        let r = t.range(start, end);
        let i = r.cell_of(at).unwrap() as u64;
        assert_eq!(r.from_ns + i * r.cell_ns, at);
        assert!(r.from_ns >= start);
    }

    #[test]
    fn a_replay_plays_from_the_cursor_and_stops_at_the_end() {
        let (start, end) = (0, 10 * S);
        let mut t = Timeline::new(false, Some(64.0));
        t.tick(start, end, true);
        assert_eq!(t.cursor_ns, start);
        std::thread::sleep(std::time::Duration::from_millis(50));
        t.tick(start, end, true);
        assert!(t.cursor_ns > start && t.playing, "{}", t.cursor_ns);
        let (_, to) = t.span(start, end);
        assert!(to <= t.cursor_ns + 1, "the tables stop at the cursor");
        std::thread::sleep(std::time::Duration::from_millis(200));
        t.tick(start, end, true);
        assert_eq!((t.cursor_ns, t.playing), (end, false));
        t.play_pause(false, start, end);
        assert!(
            t.playing && t.cursor_ns == start,
            "played again from the start"
        );
        t.faster(true);
        assert_eq!(t.speed, 64.0);
        t.faster(false);
        assert_eq!(t.speed, 32.0);
    }
}
