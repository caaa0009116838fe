//! Exports of a recording into the formats other tools read: folded stacks (flamegraph.pl,
//! inferno, speedscope), pprof (`go tool pprof`, Pyroscope, Parca), a Chrome trace timeline
//! (Perfetto, `chrome://tracing`) and the flamegraph SVG. Each reads the one analysis.

mod pprof;
mod protobuf;
pub mod timeline;

use std::{io::Write, path::Path};

use anyhow::{Result, bail};

use crate::{analysis::Analysis, flamegraph};

pub use pprof::{SAMPLE_TYPES, encode as encode_pprof};

/// What to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Folded stacks, `root;...;leaf microseconds` a line (`.folded`).
    Folded,
    /// A gzipped pprof profile, a sample type per kind of lost time (`.pb.gz`).
    Pprof,
    /// A Chrome trace event timeline (`.trace.json`, `.json`).
    Timeline,
    /// The flamegraph SVG (`.svg`).
    Svg,
}

impl Format {
    /// The format an output file's name asks for.
    pub fn of_path(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_str()?;
        [
            (".folded", Self::Folded),
            (".collapsed", Self::Folded),
            (".pb.gz", Self::Pprof),
            (".pprof", Self::Pprof),
            (".json", Self::Timeline),
            (".svg", Self::Svg),
        ]
        .into_iter()
        .find(|(suffix, _)| name.ends_with(suffix))
        .map(|(_, f)| f)
    }

    /// The format given, else the one the output's name asks for.
    pub fn choose(given: Option<Self>, output: &Path) -> Result<Self> {
        match given.or_else(|| Self::of_path(output)) {
            Some(f) => Ok(f),
            None => bail!(
                "cannot tell the format of {} from its name: give --format (folded, pprof, \
                 timeline, svg), or name it .folded, .pb.gz, .trace.json or .svg",
                output.display()
            ),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub format: Format,
    /// What folded stacks and the SVG weigh (pprof has every kind; the timeline, time).
    pub flamegraph: flamegraph::Options,
}

pub fn write(analysis: &Analysis, options: &Options, mut out: impl Write) -> Result<()> {
    match options.format {
        Format::Folded => {
            let (lines, _) = flamegraph::folded(analysis, &options.flamegraph);
            for line in lines {
                writeln!(out, "{line}")?;
            }
            Ok(out.flush()?)
        }
        Format::Pprof => pprof::write(analysis, options.flamegraph.jvm_threads, out),
        Format::Timeline => timeline::write(analysis, out),
        Format::Svg => flamegraph::write_svg(analysis, &options.flamegraph, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_name_says_the_format() {
        for (name, format) in [
            ("a.folded", Some(Format::Folded)),
            ("a.pb.gz", Some(Format::Pprof)),
            ("a.trace.json", Some(Format::Timeline)),
            ("a.svg", Some(Format::Svg)),
            ("a.gz", None),
        ] {
            assert_eq!(Format::of_path(Path::new(name)), format, "{name}");
        }
        assert!(Format::choose(None, Path::new("x")).is_err());
        assert_eq!(
            Format::choose(Some(Format::Pprof), Path::new("x.svg")).unwrap(),
            Format::Pprof
        );
    }
}
