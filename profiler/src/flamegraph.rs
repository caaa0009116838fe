//! Off-CPU flamegraphs: blocked time by stack, rendered by inferno.

use std::io::Write;

use anyhow::{Context as _, Result};

use crate::model::Model;

#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Put each thread's name at the root of its stacks.
    pub per_thread: bool,
}

/// Folded stacks (`root;...;leaf weight`), outermost frame first, weights in microseconds.
pub fn folded(model: &Model, options: &Options) -> Vec<String> {
    let mut weights: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for o in model.off_cpu.iter().filter(|o| o.state.is_blocked()) {
        let mut parts: Vec<String> = Vec::new();
        if options.per_thread {
            parts.push(model.thread_name(o.tid));
        }
        parts.extend(
            model
                .frames(o)
                .iter()
                .rev()
                .map(|f| f.label().replace(';', ":")),
        );
        if parts.is_empty() {
            parts.push("[no stack]".into());
        }
        *weights.entry(parts.join(";")).or_default() += o.duration_ns() / 1_000;
    }
    let mut lines: Vec<String> = weights
        .into_iter()
        .filter(|(_, w)| *w > 0)
        .map(|(k, w)| format!("{k} {w}"))
        .collect();
    lines.sort();
    lines
}

pub fn write_svg(model: &Model, options: &Options, out: impl Write) -> Result<()> {
    let lines = folded(model, options);
    let mut inferno = inferno::flamegraph::Options::default();
    inferno.title = format!(
        "Off-CPU time (blocked, in microseconds): pid {} ({})",
        model.target.pid, model.target.command
    );
    inferno.count_name = "us".into();
    inferno.subtitle = Some(crate::report::headline(model));
    if lines.is_empty() {
        // inferno refuses empty input; say so in the picture instead.
        return write_empty(&inferno.title, out);
    }
    inferno::flamegraph::from_lines(&mut inferno, lines.iter().map(String::as_str), out)
        .context("cannot render the flamegraph")
}

fn write_empty(title: &str, mut out: impl Write) -> Result<()> {
    write!(
        out,
        r#"<?xml version="1.0" standalone="no"?><svg version="1.1" width="1200" height="60" xmlns="http://www.w3.org/2000/svg"><text x="10" y="24">{}</text><text x="10" y="48">No blocked time was recorded.</text></svg>"#,
        title.replace('&', "&amp;").replace('<', "&lt;")
    )?;
    Ok(())
}
