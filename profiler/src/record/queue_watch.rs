//! The work waiting for a carrier, sampled while recording: the tasks queued in the
//! virtual-thread scheduler, read at the start and at every checkpoint, and on every pass of the drain loop
//! while every carrier is in a wait (a starvation under way, when the backlog matters) and
//! once more as that ends: so each episode has samples from its first pass to just after
//! its end, a pass (at most 100 ms) apart.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::Session;
use crate::{capture, events::Event};

/// Samples no closer than this (a busy target's drain loop comes back every 5 ms).
const MIN_GAP: Duration = Duration::from_millis(20);
/// Failed reads in a row after which the pool is given up on.
const MAX_FAILURES: u32 = 5;

/// What the sampling remembers between passes.
#[derive(Default)]
pub(super) struct QueueWatch {
    last: Option<Instant>,
    /// Every carrier was in a wait at the last pass.
    starving: bool,
    /// Reads in a row that failed (a pool caught as the collector moves it reads again).
    failures: u32,
    /// The pool could not be read, again and again (said once, then no more tried).
    unreadable: bool,
}

impl Session {
    /// Samples the queued tasks if it is time: at a checkpoint, or while (or just after)
    /// every carrier waits.
    pub(super) fn sample_queued(&mut self, checkpoint: bool) -> Result<()> {
        let Some(jvm) = &mut self.jvm else {
            return Ok(());
        };
        if self.queue.unreadable {
            return Ok(());
        }
        let carriers = jvm.carrier_tids();
        if carriers.is_empty() {
            return Ok(());
        }
        let starving = carriers
            .iter()
            .all(|&tid| self.capture.open_interval(tid).is_some());
        let ended = self.queue.starving && !starving;
        self.queue.starving = starving;
        let due = self.queue.last.is_none_or(|at| at.elapsed() >= MIN_GAP);
        // (And once at the start, so that the window opens with what waited then.)
        let first = self.queue.last.is_none();
        if !(first || checkpoint || ended || (starving && due)) {
            return Ok(());
        }
        self.queue.last = Some(Instant::now());
        let time_ns = capture::monotonic_ns();
        match jvm.hotspot.queued_tasks(&jvm.threads) {
            Some(q) => {
                self.queue.failures = 0;
                self.writer.write_event(&Event::Queued {
                    time_ns,
                    tasks: q.tasks,
                    queues: q.queues,
                })
            }
            None if self.queue.failures + 1 < MAX_FAILURES => {
                self.queue.failures += 1;
                Ok(())
            }
            None => {
                self.queue.unreadable = true;
                self.writer.write_event(&Event::Warning(
                    "the virtual-thread scheduler's queues could not be read: starvation \
                     episodes do not say how much work waited"
                        .into(),
                ))
            }
        }
    }
}
