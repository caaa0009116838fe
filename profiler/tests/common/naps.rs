//! What pinprof-testprog's `sleep` scenario says of its napper thread: its naps by its own
//! clock, and the kernel's account of its life, the ground truth for its blocked time.

/// The napper's lines, read up to `done`.
#[derive(Default)]
pub struct Naps {
    /// (start, end) of each sleep, CLOCK_MONOTONIC.
    pub slept: Vec<(u64, u64)>,
    /// (time, CPU time, run-queue time) at the thread's first and last steps.
    pub account: Option<[(u64, u64, u64); 2]>,
    /// From before the thread was spawned to after it was joined.
    pub lived: Option<(u64, u64)>,
}

impl Naps {
    pub fn read(lines: impl Iterator<Item = std::io::Result<String>>) -> Naps {
        let mut naps = Naps::default();
        for line in lines {
            let line = line.unwrap();
            if line == "done" {
                break;
            }
            let parts: Vec<&str> = line.split_whitespace().collect();
            let n: Vec<u64> = parts
                .iter()
                .skip(1)
                .map(|p| p.parse().unwrap_or(0))
                .collect();
            match parts.first() {
                Some(&"slept") => naps.slept.push((n[0], n[1])),
                Some(&"account") => naps.account = Some([(n[0], n[1], n[2]), (n[3], n[4], n[5])]),
                Some(&"lived") => naps.lived = Some((n[0], n[1])),
                _ => {}
            }
        }
        naps
    }

    /// The sleeps' length by the napper's clock (each with its wake-up's wait for a CPU).
    pub fn measured_ns(&self) -> u64 {
        self.slept.iter().map(|(a, b)| b - a).sum()
    }

    /// Bounds on the thread's blocked time (neither running nor waiting for a CPU) over its
    /// whole life. Low: the 20 ms each nap asked for (a timer never fires early). High: the
    /// kernel's account between the thread's first and last steps (its time less its CPU and
    /// run-queue time), plus all of the time outside those steps from spawn to join (its
    /// start and its exit, which a loaded machine can stretch), of which only part is the
    /// thread's and less still blocked.
    pub fn blocked_bounds_ns(&self) -> (u64, u64) {
        let [(t0, run0, wait0), (t1, run1, wait1)] = self.account.expect("the napper's account");
        let (spawned, joined) = self.lived.expect("the napper's life");
        let inside = (t1 - t0).saturating_sub((run1 - run0) + (wait1 - wait0));
        let outside = (joined - spawned).saturating_sub(t1 - t0);
        (self.slept.len() as u64 * 20_000_000, inside + outside)
    }
}
