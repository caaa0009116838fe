//! The stop request every long-running subcommand honours: Ctrl-C, SIGTERM, or a hang-up (a
//! closed terminal or SSH session). A flag instead of the default death, so that whatever is
//! under way (a recording, the JVM's attach trigger) is finished or cleaned up first.

use std::sync::{Arc, atomic::AtomicBool};

use anyhow::{Context as _, Result};

/// A flag set by SIGINT, SIGTERM or SIGHUP from now on.
pub fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("cannot handle signals")?;
    }
    Ok(stop)
}
