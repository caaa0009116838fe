//! Stacks as views show them: each frame's label, kind and line, and which frames hold a
//! monitor.

use super::kinds::FrameClass;
use crate::events::Frame;

/// Said where a wait has no Java frames: its Java stack is walked only if it lasted long
/// enough, and could be read.
pub const NO_JAVA_STACK: &str = "[no Java stack: short wait, or unreadable]";

/// A stack as views show it, innermost frame first.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StackLabels {
    pub frames: Vec<String>,
    /// What each frame is: kernel, native, jit, or how a Java frame ran.
    pub frame_kinds: Vec<FrameClass>,
    /// Indexes of the frames known to hold a monitor.
    pub monitor_frames: Vec<usize>,
    /// Each frame's source line, where known (Java frames).
    pub lines: Vec<Option<u32>>,
}

impl StackLabels {
    pub fn new(stack: &[&Frame], monitor_frames: Vec<usize>) -> Self {
        Self {
            frames: stack.iter().map(|f| f.label()).collect(),
            frame_kinds: stack.iter().map(|f| FrameClass::of(f)).collect(),
            monitor_frames,
            lines: stack.iter().map(|f| f.line).collect(),
        }
    }

    /// Frame `i` as people read it: `pkg.Class.method:159` where its line is known.
    pub fn display(&self, i: usize) -> String {
        match (self.frames.get(i), self.lines.get(i).copied().flatten()) {
            (Some(name), Some(line)) => format!("{name}:{line}"),
            (Some(name), None) => name.clone(),
            (None, _) => String::new(),
        }
    }
}

/// Indexes of the frames that hold a monitor.
pub fn monitor_frames(frames: &[&Frame]) -> Vec<usize> {
    frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f.holds_monitor)
        .map(|(i, _)| i)
        .collect()
}
