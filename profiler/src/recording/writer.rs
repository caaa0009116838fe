use std::{
    fs::File,
    io::{BufWriter, Write as _},
    path::PathBuf,
};

use anyhow::{Context as _, Result};

use super::{End, FORMAT_VERSION, Header, MAGIC, Record, blocks::Framer, tee::TeeSender};
use crate::{events::Event, safe_fs::NewOutput};

/// Appends records to a `.pinrec` file. Call [`RecordingWriter::flush`] now and then so that
/// a crash loses little, and [`RecordingWriter::finish`] at the end.
pub struct RecordingWriter {
    out: BufWriter<File>,
    path: PathBuf,
    bytes: u64,
    framer: Framer,
    /// Reused for each record's framed bytes.
    scratch: Vec<u8>,
    /// A live view's copy of the stream: every record written is sent here too (unless the
    /// view is too far behind: see `TeeSender`).
    tee: Option<TeeSender>,
    /// The file's size cap (see `full`): events past it are not written, and counted.
    max_bytes: Option<u64>,
}

/// What a recording keeps of its cap for closing (the last checkpoint, the waits still
/// open, the end marker): it is `full` that much before the cap.
fn closing_room(max_bytes: u64) -> u64 {
    (max_bytes / 8).min(16 << 20)
}

impl RecordingWriter {
    /// Writes `header` into a new output file (see `safe_fs::create_output`) and puts the file
    /// at its name. With `tee`, every record (header, events, end) is also sent there as it is
    /// written; a receiver that has gone is ignored.
    pub fn create(output: NewOutput, header: &Header, tee: Option<TeeSender>) -> Result<Self> {
        let path = output.path().to_owned();
        let file = output
            .file()
            .try_clone()
            .with_context(|| format!("cannot write to {}", path.display()))?;
        let mut writer = Self {
            out: BufWriter::new(file),
            path,
            bytes: 0,
            framer: Framer::default(),
            scratch: Vec::new(),
            tee,
            max_bytes: None,
        };
        writer.write_raw(MAGIC)?;
        writer.write_raw(&FORMAT_VERSION.to_le_bytes())?;
        writer.write(Record::Header(header.clone()))?;
        writer.flush()?;
        // Only a file with its header stands at the output's name.
        output.commit()?;
        Ok(writer)
    }

    /// Caps the file at `max_bytes` (None: no cap): the recorder ends the recording once it
    /// is `full`; events that would take it past the cap are not written (the end marker
    /// always is).
    pub fn set_max_bytes(&mut self, max_bytes: Option<u64>) {
        self.max_bytes = max_bytes;
    }

    /// Whether the recording has reached its cap, less the room its closing takes: it must
    /// end now.
    pub fn full(&self) -> bool {
        self.max_bytes
            .is_some_and(|max| self.bytes >= max.saturating_sub(closing_room(max)))
    }

    pub fn write_event(&mut self, event: &Event) -> Result<()> {
        self.write(Record::Event(event.clone()))
    }

    fn write(&mut self, record: Record) -> Result<()> {
        let payload = postcard::to_stdvec(&record).context("cannot encode a record")?;
        let mut framed = std::mem::take(&mut self.scratch);
        framed.clear();
        let mut framer = self.framer.clone();
        framer.frame(&payload, &mut framed);
        if !matches!(record, Record::End(_))
            && self
                .max_bytes
                .is_some_and(|max| self.bytes + framed.len() as u64 > max)
        {
            // Not written: the blocks go on where they stood.
            crate::budget::count(crate::budget::Cut::EventNotWritten);
            return Ok(());
        }
        self.framer = framer;
        let written = self.write_raw(&framed);
        // A large record (a whole thread list) leaves no large buffer behind.
        if framed.capacity() <= 1 << 20 {
            self.scratch = framed;
        }
        written?;
        if let Some(tee) = &self.tee {
            tee.send(record, payload.len());
        }
        Ok(())
    }

    fn write_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .with_context(|| format!("cannot write to {}", self.path.display()))?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    pub fn flush(&mut self) -> Result<()> {
        self.out
            .flush()
            .with_context(|| format!("cannot write to {}", self.path.display()))
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Writes the end marker and syncs; the file is handed back to be read back through
    /// this descriptor (opened for reading and writing), never reopened by its name.
    pub fn finish(mut self, end: End) -> Result<File> {
        self.write(Record::End(end))?;
        self.flush()?;
        let file = self
            .out
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("cannot write to {}", self.path.display()))?;
        file.sync_all()
            .with_context(|| format!("cannot sync {}", self.path.display()))?;
        Ok(file)
    }
}
