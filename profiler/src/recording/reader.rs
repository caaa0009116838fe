use std::path::Path;

use anyhow::{Context as _, Result, bail};

use super::{End, FORMAT_VERSION, Header, MAGIC, MAX_FRAME, OLDEST_FORMAT_READ, Record};
use crate::events::Event;

/// A recording read back whole, with an account of any damage found on the way.
#[derive(Debug)]
pub struct Recording {
    pub header: Header,
    pub events: Vec<Event>,
    /// `None` when the recording was cut before its end marker.
    pub end: Option<End>,
    pub damage: Vec<Damage>,
}

/// A part of the file that could not be read.
#[derive(Clone, Debug, PartialEq)]
pub enum Damage {
    /// The file ends inside a frame: everything from `offset` on is lost.
    Truncated { offset: usize },
    /// Bytes `from..to` did not hold a valid frame and were skipped.
    Corrupt { from: usize, to: usize },
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated { offset } => {
                write!(
                    f,
                    "recording is cut at byte {offset}: the end of the capture is missing"
                )
            }
            Self::Corrupt { from, to } => {
                write!(f, "bytes {from}..{to} are damaged and were skipped")
            }
        }
    }
}

impl Recording {
    pub fn open(path: &Path) -> Result<Self> {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&bytes).with_context(|| format!("{} is not a usable recording", path.display()))
    }

    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let prelude = MAGIC.len() + 4;
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            bail!("not a pinprof recording (bad magic)");
        }
        if bytes.len() < prelude {
            bail!("recording is cut inside its header");
        }
        let version = u32::from_le_bytes(bytes[MAGIC.len()..prelude].try_into()?);
        if !(OLDEST_FORMAT_READ..=FORMAT_VERSION).contains(&version) {
            bail!(
                "recording format {version} is not supported (this pinprof reads formats \
                 {OLDEST_FORMAT_READ} to {FORMAT_VERSION})"
            );
        }

        let mut header = None;
        let mut events = Vec::new();
        let mut end = None;
        let mut damage = Vec::new();
        let mut pos = prelude;
        while pos < bytes.len() {
            match frame_at(bytes, pos) {
                Frame::Ok(record, next) => {
                    match *record {
                        Record::Header(h) if header.is_none() => header = Some(h),
                        Record::Header(_) => {} // a second header means nothing; ignore it
                        Record::Event(e) => events.push(e),
                        Record::End(e) => end = Some(e),
                    }
                    pos = next;
                }
                Frame::Truncated => {
                    damage.push(Damage::Truncated { offset: pos });
                    break;
                }
                Frame::Bad => match resync(bytes, pos + 1) {
                    Some(next) => {
                        damage.push(Damage::Corrupt {
                            from: pos,
                            to: next,
                        });
                        pos = next;
                    }
                    None => {
                        damage.push(Damage::Corrupt {
                            from: pos,
                            to: bytes.len(),
                        });
                        break;
                    }
                },
            }
        }
        let Some(header) = header else {
            bail!("recording has no readable header");
        };
        Ok(Self {
            header,
            events,
            end,
            damage,
        })
    }

    /// What the file lost, said to the user with its results: damaged frames, or an end that
    /// never came.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings: Vec<String> = self.damage.iter().map(ToString::to_string).collect();
        if self.end.is_none() && self.damage.is_empty() {
            warnings.push("recording has no end marker: the capture did not finish".into());
        }
        warnings
    }

    /// CLOCK_MONOTONIC ns of the window's end: the end marker, else the last thing recorded.
    pub fn end_mono_ns(&self) -> u64 {
        if let Some(end) = &self.end {
            return end.end_mono_ns;
        }
        let last = self.events.iter().filter_map(Event::time_ns);
        last.max()
            .unwrap_or(self.header.start_mono_ns)
            .max(self.header.start_mono_ns)
    }
}

enum Frame {
    Ok(Box<Record>, usize),
    Truncated,
    Bad,
}

fn frame_at(bytes: &[u8], pos: usize) -> Frame {
    let Some(head) = bytes.get(pos..pos + 8) else {
        return Frame::Truncated;
    };
    let len = u32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
    let crc = u32::from_le_bytes(head[4..].try_into().unwrap());
    if len == 0 || len > MAX_FRAME {
        return Frame::Bad;
    }
    let Some(payload) = bytes.get(pos + 8..pos + 8 + len) else {
        return Frame::Truncated;
    };
    if crc32fast::hash(payload) != crc {
        return Frame::Bad;
    }
    match postcard::from_bytes::<Record>(payload) {
        Ok(record) => Frame::Ok(Box::new(record), pos + 8 + len),
        Err(_) => Frame::Bad,
    }
}

/// The next offset at or after `from` where an intact frame starts.
fn resync(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len().saturating_sub(8)).find(|&pos| matches!(frame_at(bytes, pos), Frame::Ok(..)))
}
