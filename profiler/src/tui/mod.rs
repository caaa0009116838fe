//! `pinprof top` and `pinprof replay`: the model drawn live in the terminal.
//!
//! Both feed the same record stream into the same `App`: `top` gets the records as the
//! recorder writes them to its file, `replay` reads them back from a file. So what `top`
//! shows at the end is what `report` says of its recording.

mod app;
mod draw;
mod hangup;
pub mod keys;
mod lanes;
#[cfg(test)]
mod snapshots;
mod timeline;

use std::{
    io::IsTerminal as _,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
        mpsc::{self, Receiver, TryRecvError},
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, anyhow, bail};
use crossterm::event::{self, Event as TermEvent, KeyEventKind};

use crate::{
    events::Event,
    record,
    recording::{self, Record, Records},
};
use app::App;

/// How the terminal UI runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// How often the figures are recomputed and redrawn.
    pub refresh: Duration,
    /// Pinning, starvation, locks and system calls are shown for this much of the latest
    /// time, which bounds a long session's memory (None: the whole window).
    pub window: Option<Duration>,
}

/// Records `record` as `pinprof record` does, and shows it live until the user quits. The
/// recording ends when the user quits (or earlier: its duration, the target's exit).
pub fn live(record: &record::Options, options: &Options) -> Result<record::Summary> {
    require_terminal()?;
    let stop = crate::signals::stop_flag()?;
    let quit = Arc::new(AtomicBool::new(false));
    let (recorder, rx) = record::spawn_teed(record, &stop, &quit)?;
    let join = |recorder: thread::JoinHandle<Result<record::Summary>>| {
        recorder
            .join()
            .map_err(|_| anyhow!("the recorder failed unexpectedly"))?
    };
    // A target or a kernel that cannot be recorded is said before the screen is taken over.
    let Ok(header) = rx.recv() else {
        return join(recorder);
    };
    let mut app = App::new(
        format!("recording to {}", record.output.display()),
        true,
        options.window,
    );
    app.on_record(header);
    // Whatever happens to the view, the recording is finished.
    let shown = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        show(&mut app, &rx, &stop, options)
    }))
    .unwrap_or_else(|_| Err(anyhow!("the live view stopped on an internal error")));
    // The recording says how it ended: the user quit, or anything else stopped the view.
    if app.quit && !app.interrupted {
        quit.store(true, Ordering::Relaxed);
    } else {
        stop.store(true, Ordering::Relaxed);
    }
    let summary = join(recorder);
    // The footer showed the latest only; the screen is gone now.
    for warning in app.model.iter().flat_map(|m| &m.warnings) {
        say!("pinprof: warning: {warning}");
    }
    shown?;
    summary
}

/// Shows a recording: at its end, or played from its start at `speed` times the pace it was
/// recorded at (the whole file is read at once; the cursor moves through it). Nothing is
/// folded, so the figures are `report`'s, in as much memory.
pub fn replay(path: &Path, speed: Option<f64>, options: &Options) -> Result<()> {
    require_terminal()?;
    // A file that is no recording is said before the screen is taken over.
    if Records::open(path)?.next().is_none() {
        bail!(
            "{} is not a usable recording: it has no readable record",
            path.display()
        );
    }
    let (tx, rx) = mpsc::sync_channel(4096);
    // Not joined: it ends at its next send once the view has gone.
    let file = path.to_path_buf();
    thread::Builder::new()
        .name("replay".into())
        .spawn(move || feed(&file, &tx))
        .context("cannot start the replay")?;
    let mut app = App::with_speed(
        format!("replay of {}", path.display()),
        false,
        options.window,
        speed,
    );
    let stop = crate::signals::stop_flag()?;
    show(&mut app, &rx, &stop, options)
}

/// Sends a recording's records in order. Stops sending when the receiver goes.
fn feed(path: &Path, tx: &mpsc::SyncSender<Record>) {
    let Ok(records) = Records::open(path) else {
        return;
    };
    let streamed = recording::stream(
        records,
        |header| tx.send(Record::Header(header.clone())).is_ok(),
        |open, event| {
            if *open {
                *open = tx.send(Record::Event(event)).is_ok();
            }
        },
    );
    let Ok((true, outline)) = streamed else {
        return;
    };
    // What the file lost is said as the report says it.
    for warning in outline.warnings() {
        let _ = tx.send(Record::Event(Event::Warning(warning)));
    }
    if let Some(end) = outline.end {
        let _ = tx.send(Record::End(end));
    }
}

/// Where the view's records come from: a live recorder's tee, or a recording read back.
trait Source {
    fn try_recv(&self) -> Result<Record, TryRecvError>;
}

impl Source for Receiver<Record> {
    fn try_recv(&self) -> Result<Record, TryRecvError> {
        Receiver::try_recv(self)
    }
}

impl Source for recording::TeeReceiver {
    fn try_recv(&self) -> Result<Record, TryRecvError> {
        recording::TeeReceiver::try_recv(self)
    }
}

fn require_terminal() -> Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        bail!(
            "the live view needs a terminal (stdin and stdout); to record without one, use \
             `pinprof record`, and `pinprof report` to read it"
        );
    }
    Ok(())
}

/// Runs the screen until the user quits or `stop` is set; the terminal is restored however it
/// ends (ratatui's panic hook restores it on a panic too).
fn show(app: &mut App, rx: &dyn Source, stop: &AtomicBool, options: &Options) -> Result<()> {
    hangup::watch();
    let result = ratatui::try_init()
        .context("cannot set up the terminal")
        .and_then(|mut terminal| {
            // ratatui's hook restores the terminal on any panic: one a parser's guard
            // catches (the recorder's, meanwhile) must not reach it.
            crate::parser_guard::quiet_panics_over_current_hook();
            let shown = event_loop(&mut terminal, app, rx, stop, options);
            // A terminal that has gone cannot be restored, and dropping ratatui's would say
            // so on a standard error that has gone too: a panic, which would take the
            // recording down with it. It is left as it is.
            if terminal_gone() {
                std::mem::forget(terminal);
            }
            shown
        });
    // Also after a set-up that failed half-way (raw mode on, no alternate screen); quietly,
    // for the same reason.
    let _ = ratatui::try_restore();
    // The screen is gone: a later panic need not restore it (ratatui's hook would say it
    // could not, on a standard error that may have gone).
    let _ = std::panic::take_hook();
    result
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    rx: &dyn Source,
    stop: &AtomicBool,
    options: &Options,
) -> Result<()> {
    // The view's figures take at most 1 / MAX_SHARE of a core: a refresh that took T waits
    // MAX_SHARE x T before the next.
    const MAX_SHARE: u32 = 20;
    // Records are taken for at most this long between looks at the keyboard.
    const RECORDS_SLICE: Duration = Duration::from_millis(50);
    // Between looks, records gather in the channel: taken in batches, not one wake-up each
    // (a wake-up per record cost the view more than all its figures).
    const BATCH_WAIT: Duration = Duration::from_millis(50);
    let mut connected = true;
    let mut last_refresh: Option<Instant> = None;
    let mut last_draw = Instant::now();
    let mut gap = options.refresh;
    let mut redraw = true;
    if let Ok(size) = terminal.size() {
        app.on_resize(size.width);
    }
    while !app.quit && !stop.load(Ordering::Relaxed) && !hangup::seen() {
        // Whether records were left waiting (the slice ran out): look again at once.
        let mut behind = false;
        if connected {
            let slice = Instant::now();
            loop {
                match rx.try_recv() {
                    Ok(record) => app.on_record(record),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        connected = false;
                        break;
                    }
                }
                if slice.elapsed() >= RECORDS_SLICE {
                    behind = true;
                    break;
                }
            }
            if !connected {
                app.on_disconnect();
                if app.live && app.status == app::Status::Cut {
                    // The recorder failed: its error is said once the screen is gone.
                    break;
                }
            }
        }
        // A playing replay moves its cursor, and the lanes with it, a few times a second.
        app.tick();
        if app.timeline.playing && last_draw.elapsed() >= Duration::from_millis(100) {
            redraw = true;
        }
        // The end of the stream shows its final figures at once; a key's change at once, of
        // the records taken in so far.
        if !(last_refresh.is_none_or(|t| t.elapsed() >= gap) || app.ended_unshown())
            && app.needs_recompute()
        {
            app.refresh_tables();
            redraw = true;
        } else if last_refresh.is_none_or(|t| t.elapsed() >= gap) || app.ended_unshown() {
            let started = Instant::now();
            app.refresh();
            // Recomputing is the view's main cost and grows with the window: keep it to a
            // twentieth of one core at most (5%), whatever the refresh asked for.
            gap = options.refresh.max(started.elapsed() * MAX_SHARE);
            last_refresh = Some(Instant::now());
            redraw = true;
        }
        if redraw {
            if let Err(e) = terminal.draw(|frame| draw::draw(frame, app)) {
                // A closed terminal ends the view as a hang-up does; anything else is an error.
                if terminal_gone() {
                    break;
                }
                return Err(e).context("cannot draw");
            }
            redraw = false;
            last_draw = Instant::now();
        }
        let wait = if behind {
            Duration::ZERO
        } else if connected || app.timeline.playing {
            BATCH_WAIT
        } else {
            Duration::from_millis(200)
        };
        // crossterm spins without end on a terminal that has gone (a closed window), where it
        // would never see the hang-up: it is asked only while the terminal is there (and the
        // hang-up watch frees it from one that comes between this look and its read). It is
        // asked even without input, so that a resize is taken alone: taken together with
        // the next key, it would hide that key until another one comes (crossterm returns
        // the resize and loses the key's edge-triggered wake-up).
        if let Input::Gone = terminal_input(wait) {
            break;
        }
        // All that crossterm has read, so none waits in its buffer for more input to come.
        loop {
            match event::poll(Duration::ZERO).and_then(|ready| {
                if ready {
                    event::read().map(Some)
                } else {
                    Ok(None)
                }
            }) {
                Ok(Some(TermEvent::Key(key))) if key.kind == KeyEventKind::Press => {
                    app.on_key(key);
                    redraw = true;
                }
                Ok(Some(TermEvent::Resize(width, _))) => {
                    app.on_resize(width);
                    redraw = true;
                }
                Ok(Some(_)) => redraw = true,
                Ok(None) => break,
                // Closed as it was read: as a hang-up.
                Err(_) if terminal_gone() => {
                    return Ok(());
                }
                Err(e) => return Err(e).context("cannot read the terminal"),
            }
        }
    }
    Ok(())
}

enum Input {
    None,
    Ready,
    /// Hung up or closed: nobody is looking any more.
    Gone,
}

/// Whether the terminal has gone (hung up or closed) by now.
fn terminal_gone() -> bool {
    hangup::seen() || matches!(terminal_input(Duration::ZERO), Input::Gone)
}

/// Waits up to `wait` for input on the terminal (standard input, which `require_terminal`
/// made sure is one).
fn terminal_input(wait: Duration) -> Input {
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd.
    match unsafe { libc::poll(&mut fd, 1, ms) } {
        0 => Input::None,
        // Interrupted by a signal: the loop looks at the stop flag next.
        n if n < 0 => Input::None,
        _ if fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 => Input::Gone,
        _ => Input::Ready,
    }
}
