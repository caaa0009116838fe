//! On-CPU samples: where the target's threads ran, by stack, and on carriers which virtual
//! thread the time belongs to.

use super::stacks::{StackLabels, monitor_frames};
use crate::model::{FastMap, Model, Sample};

/// Samples of one stack.
#[derive(Clone, Debug, PartialEq)]
pub struct OnCpuSite {
    pub stack: StackLabels,
    pub samples: u64,
}

/// The stack ids of a sample: kernel, native, Java.
pub type SampleStacks = (Option<u32>, Option<u32>, Option<u32>);

/// A sample's stacks (its Java stack is the one walked at its time).
pub fn stacks_of(model: &Model, s: &Sample) -> SampleStacks {
    (
        s.kernel_stack,
        s.user_stack,
        model.sample_stacks.get(&(s.tid, s.time_ns)).copied(),
    )
}

/// On-CPU samples by stack, most first.
pub fn sites(model: &Model) -> Vec<OnCpuSite> {
    let mut by_ids: FastMap<SampleStacks, u64> = FastMap::default();
    for s in &model.samples {
        *by_ids.entry(stacks_of(model, s)).or_default() += 1;
    }
    // Different ids can name the same frames (a kernel stack and none): merged by label.
    let mut by_labels: std::collections::HashMap<StackLabels, u64> = Default::default();
    for ((kernel, user, java), n) in by_ids {
        let frames = model.frames_of(kernel, user, java);
        let labels = StackLabels::new(&frames, monitor_frames(&frames));
        *by_labels.entry(labels).or_default() += n;
    }
    let mut sites: Vec<OnCpuSite> = by_labels
        .into_iter()
        .map(|(stack, samples)| OnCpuSite { stack, samples })
        .collect();
    sites.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.stack.cmp(&b.stack)));
    sites
}

/// The time one sample stands for, in ns (a sample of a CPU every 1/hz s).
pub fn sample_ns(model: &Model) -> u64 {
    model
        .on_cpu_hz
        .filter(|&hz| hz > 0)
        .map_or(0, |hz| 1_000_000_000 / u64::from(hz))
}
