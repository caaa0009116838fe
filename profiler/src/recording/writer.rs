use std::{
    fs::File,
    io::{BufWriter, Write as _},
    path::{Path, PathBuf},
    sync::mpsc::Sender,
};

use anyhow::{Context as _, Result};

use super::{End, FORMAT_VERSION, Header, MAGIC, Record};
use crate::events::Event;

/// Appends records to a `.pinrec` file. Call [`RecordingWriter::flush`] now and then so that
/// a crash loses little, and [`RecordingWriter::finish`] at the end.
pub struct RecordingWriter {
    out: BufWriter<File>,
    path: PathBuf,
    bytes: u64,
    /// A live view's copy of the stream: every record written is sent here too.
    tee: Option<Sender<Record>>,
}

impl RecordingWriter {
    /// Creates the file and writes `header`. With `tee`, every record (header, events, end)
    /// is also sent there as it is written; a receiver that has gone is ignored.
    pub fn create(path: &Path, header: &Header, tee: Option<Sender<Record>>) -> Result<Self> {
        let file = File::create(path)
            .with_context(|| format!("cannot create recording {}", path.display()))?;
        let mut writer = Self {
            out: BufWriter::new(file),
            path: path.to_owned(),
            bytes: 0,
            tee,
        };
        writer.write_raw(MAGIC)?;
        writer.write_raw(&FORMAT_VERSION.to_le_bytes())?;
        writer.write(Record::Header(header.clone()))?;
        writer.flush()?;
        Ok(writer)
    }

    pub fn write_event(&mut self, event: &Event) -> Result<()> {
        self.write(Record::Event(event.clone()))
    }

    fn write(&mut self, record: Record) -> Result<()> {
        let payload = postcard::to_stdvec(&record).context("cannot encode a record")?;
        let len = u32::try_from(payload.len()).context("record too large")?;
        let crc = crc32fast::hash(&payload);
        self.write_raw(&len.to_le_bytes())?;
        self.write_raw(&crc.to_le_bytes())?;
        self.write_raw(&payload)?;
        if let Some(tee) = &self.tee {
            let _ = tee.send(record);
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

    pub fn finish(mut self, end: End) -> Result<()> {
        self.write(Record::End(end))?;
        self.flush()?;
        self.out
            .get_ref()
            .sync_all()
            .with_context(|| format!("cannot sync {}", self.path.display()))
    }
}
