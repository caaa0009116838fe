//! Any bytes as a recording: the reader, the model, both reports and every flamegraph must
//! end without a panic, a hang or an unbounded allocation (libFuzzer's -rss_limit_mb and
//! -timeout catch the last two).
#![no_main]

use clap::ValueEnum as _;
use libfuzzer_sys::fuzz_target;
use profiler::{analysis::Analysis, flamegraph, model::Model, recording::Recording, report};

fuzz_target!(|data: &[u8]| {
    let Ok(recording) = Recording::parse(data) else {
        return;
    };
    let model = Model::from_recording(&recording);
    let analysis = Analysis::new(&model);
    let options = report::Options::default();
    let _ = report::to_text(&analysis, &options);
    let _ = rendered(&report::to_json(&analysis, &options));
    for &kind in flamegraph::Kind::value_variants() {
        let options = flamegraph::Options {
            per_thread: data.len() % 2 == 0,
            kind,
            reverse: data.len() % 3 == 0,
            inverted: data.len() % 5 == 0,
        };
        let _ = flamegraph::write_svg(&analysis, &options, std::io::sink());
    }
});

/// The JSON value rendered, as the report command would.
fn rendered(value: &impl std::fmt::Display) -> usize {
    value.to_string().len()
}
