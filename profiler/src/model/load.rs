//! Building a model from a recording: read as a stream (each event taken in as it is read),
//! or from one already in memory.

use std::path::Path;

use anyhow::{Context as _, Result};

use super::{Model, intake};
use crate::recording::{self, End, Outline, Recording, Records};

impl Model {
    /// The model of a recording file, read as a stream: memory is the model's, not the
    /// file's. Every event is checked as it is taken in (see `intake`): what a hostile file
    /// holds is left out or cut to fit, and said in `warnings`.
    pub fn read(path: &Path) -> Result<Self> {
        Self::read_records(Records::open(path)?, path)
    }

    /// `read` of a recording this process wrote, through the descriptor it wrote with (its
    /// name may lead elsewhere by now); `path` names it in messages.
    pub fn read_file(file: std::fs::File, path: &Path) -> Result<Self> {
        let records = Records::from_file(file)
            .with_context(|| format!("{} is not a usable recording", path.display()))?;
        Self::read_records(records, path)
    }

    fn read_records<R: std::io::Read>(records: Records<R>, path: &Path) -> Result<Self> {
        let (mut model, outline) = recording::stream(records, Model::new, Model::apply_owned)
            .with_context(|| format!("{} is not a usable recording", path.display()))?;
        model.close(&outline);
        Ok(model)
    }

    /// The model of a recording read whole (see `read`).
    pub fn from_recording(recording: &Recording) -> Self {
        let mut model = Self::new(&recording.header);
        for event in &recording.events {
            model.apply(event);
        }
        model.close_with(recording.end.as_ref(), recording.warnings());
        model
    }

    fn close(&mut self, outline: &Outline) {
        self.close_with(outline.end.as_ref(), outline.warnings());
    }

    /// The window closes at the recording's end marker, else with its latest event; what the
    /// file lost is said.
    fn close_with(&mut self, end: Option<&End>, warnings: Vec<String>) {
        match end {
            Some(end) => self.finish(end),
            None => self.end_mono_ns = self.end_from_events(),
        }
        let warnings: Vec<String> = warnings
            .into_iter()
            .map(|mut w| {
                intake::text(&mut w, intake::MAX_TEXT);
                w
            })
            .collect();
        self.damage = warnings.clone();
        self.warnings.extend(warnings);
    }
}
