//! The framing of format 4: records cut into fragments that never cross a block boundary.
//!
//! A fragment is `crc32 (u32) | length (u16) | kind (u8) | payload`, little-endian, the crc
//! over the kind byte and the payload. A record fits in one `Full` fragment, or runs `First`,
//! `Middle`..., `Last`. Fewer than a fragment header's bytes left in a block are zeros. So a
//! reader that meets damage knows where to look next without trying every byte: the fragment
//! after (when the length still holds), else the next block. Every byte is checked once.

use std::io::{self, Read};

use super::{BLOCK, MAX_RECORD, reader::Damage};

/// Bytes of a fragment's header.
pub const HEADER: usize = 7;

const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;

/// Cuts records into fragments; keeps track of where the current block stands.
#[derive(Clone, Debug, Default)]
pub struct Framer {
    /// Bytes already used in the current block.
    in_block: usize,
}

impl Framer {
    /// Appends `payload`, framed, to `out` (with the zeros that close a block where needed).
    pub fn frame(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        let mut rest = payload;
        let mut first = true;
        loop {
            let left = BLOCK - self.in_block;
            if left < HEADER {
                out.resize(out.len() + left, 0);
                self.in_block = 0;
                continue;
            }
            let room = (left - HEADER).min(usize::from(u16::MAX));
            let take = rest.len().min(room);
            let last = take == rest.len();
            let kind = match (first, last) {
                (true, true) => FULL,
                (true, false) => FIRST,
                (false, false) => MIDDLE,
                (false, true) => LAST,
            };
            let (chunk, tail) = rest.split_at(take);
            let mut crc = crc32fast::Hasher::new();
            crc.update(&[kind]);
            crc.update(chunk);
            out.extend_from_slice(&crc.finalize().to_le_bytes());
            out.extend_from_slice(&(take as u16).to_le_bytes());
            out.push(kind);
            out.extend_from_slice(chunk);
            self.in_block += HEADER + take;
            rest = tail;
            first = false;
            if last {
                return;
            }
        }
    }
}

/// Reads records' payloads back from blocks, block by block: memory is one block and the
/// record being put together (at most `MAX_RECORD`).
pub struct Deframer<R> {
    src: R,
    block: Vec<u8>,
    /// File offset of the block's first byte.
    block_at: u64,
    /// Where in the block the next fragment starts.
    pos: usize,
    /// The source has no more bytes after this block.
    eof: bool,
    /// A record put together from fragments: its file offset and its bytes so far.
    partial: Option<(u64, Vec<u8>)>,
    done: bool,
}

impl<R: Read> Deframer<R> {
    /// `at` is the file offset of the source's first byte.
    pub fn new(src: R, at: u64) -> Self {
        Self {
            src,
            block: Vec::with_capacity(BLOCK),
            block_at: at,
            pos: 0,
            eof: false,
            partial: None,
            done: false,
        }
    }

    /// The next whole record's payload and its offset; damage on the way goes to `damage`.
    pub fn next_payload(&mut self, damage: &mut Vec<Damage>) -> Option<(u64, Vec<u8>)> {
        while !self.done {
            if self.pos + HEADER > self.block.len() {
                if !self.eof {
                    // The zeros that close a full block (or no block yet): on to the next.
                    if let Err(e) = self.load_block() {
                        damage.push(Damage::Unreadable {
                            offset: self.offset(self.pos),
                            error: e.to_string(),
                        });
                        self.done = true;
                    }
                    continue;
                }
                // The source ended: inside a fragment's header, or cleanly after one.
                let cut = self.pos < self.block.len() && self.block.len() < BLOCK;
                if let Some((at, _)) = self.partial.take() {
                    damage.push(Damage::Truncated { offset: at });
                } else if cut {
                    damage.push(Damage::Truncated {
                        offset: self.offset(self.pos),
                    });
                }
                self.done = true;
                break;
            }
            let at = self.offset(self.pos);
            let head = &self.block[self.pos..self.pos + HEADER];
            let crc = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
            let len = usize::from(u16::from_le_bytes([head[4], head[5]]));
            let end = self.pos + HEADER + len;
            if end > self.block.len() {
                if self.block.len() < BLOCK {
                    // The last block is cut inside this fragment.
                    let from = self.partial.take().map_or(at, |(start, _)| start);
                    damage.push(Damage::Truncated { offset: from });
                    self.done = true;
                    break;
                }
                // A length that cannot be: the rest of the block is lost.
                self.lose(damage, at, self.offset(BLOCK));
                self.pos = BLOCK;
                continue;
            }
            if crc32fast::hash(&self.block[self.pos + HEADER - 1..end]) != crc {
                self.lose(damage, at, self.offset(end));
                self.pos = end;
                continue;
            }
            let kind = self.block[self.pos + HEADER - 1];
            let payload = &self.block[self.pos + HEADER..end];
            self.pos = end;
            match kind {
                FULL | FIRST => {
                    if let Some((start, _)) = self.partial.take() {
                        // The record under way never got its last fragment.
                        push_corrupt(damage, start, at);
                    }
                    if kind == FULL {
                        return Some((at, payload.to_vec()));
                    }
                    self.partial = Some((at, payload.to_vec()));
                }
                MIDDLE | LAST => {
                    let Some((start, mut bytes)) = self.partial.take() else {
                        // Part of a record whose start was lost.
                        push_corrupt(damage, at, self.offset(end));
                        continue;
                    };
                    if bytes.len() + payload.len() > MAX_RECORD {
                        push_corrupt(damage, start, self.offset(end));
                        continue;
                    }
                    bytes.extend_from_slice(payload);
                    if kind == LAST {
                        return Some((start, bytes));
                    }
                    self.partial = Some((start, bytes));
                }
                _ => self.lose(damage, at, self.offset(end)),
            }
        }
        None
    }

    /// Bytes `from..to` are damaged, and so is any record under way.
    fn lose(&mut self, damage: &mut Vec<Damage>, from: u64, to: u64) {
        let from = self.partial.take().map_or(from, |(start, _)| start);
        push_corrupt(damage, from, to);
    }

    fn offset(&self, pos: usize) -> u64 {
        self.block_at + pos as u64
    }

    fn load_block(&mut self) -> io::Result<()> {
        self.block_at += self.block.len() as u64;
        self.block.clear();
        self.pos = 0;
        let mut src = (&mut self.src).take(BLOCK as u64);
        loop {
            match src.read_to_end(&mut self.block) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.block.len() < BLOCK {
            self.eof = true;
        }
        Ok(())
    }
}

/// Adds a damaged range, merged with the one before when they touch.
pub fn push_corrupt(damage: &mut Vec<Damage>, from: u64, to: u64) {
    if let Some(Damage::Corrupt { to: last_to, .. }) = damage.last_mut()
        && *last_to >= from
    {
        *last_to = (*last_to).max(to);
        return;
    }
    damage.push(Damage::Corrupt { from, to });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(records: &[Vec<u8>]) -> Vec<u8> {
        let mut framer = Framer::default();
        let mut out = Vec::new();
        for r in records {
            framer.frame(r, &mut out);
        }
        out
    }

    fn read_all(bytes: &[u8]) -> (Vec<Vec<u8>>, Vec<Damage>) {
        let mut d = Deframer::new(bytes, 0);
        let mut damage = Vec::new();
        let mut out = Vec::new();
        while let Some((_, p)) = d.next_payload(&mut damage) {
            out.push(p);
        }
        (out, damage)
    }

    #[test]
    fn records_of_every_size_come_back_across_blocks() {
        let records: Vec<Vec<u8>> = [
            0usize,
            1,
            6,
            7,
            100,
            BLOCK - 7,
            BLOCK,
            3 * BLOCK + 5,
            200_000,
        ]
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|b| (b * 7 + i) as u8).collect())
        .collect();
        let bytes = framed(&records);
        let (back, damage) = read_all(&bytes);
        assert_eq!(back, records);
        assert!(damage.is_empty(), "{damage:?}");
    }

    #[test]
    fn a_bad_fragment_costs_itself_or_its_block() {
        let records: Vec<Vec<u8>> = (0..2000u32).map(|i| i.to_le_bytes().repeat(5)).collect();
        // A flipped payload byte: only that record is lost.
        let mut bytes = framed(&records);
        bytes[HEADER + 3] ^= 1;
        let (back, damage) = read_all(&bytes);
        assert_eq!(back.len(), records.len() - 1);
        assert_eq!(damage, vec![Damage::Corrupt { from: 0, to: 27 }]);
        // A flipped length: the rest of that block, no more.
        let mut bytes = framed(&records);
        bytes[4] ^= 0x40;
        let (back, damage) = read_all(&bytes);
        let per_block = BLOCK / (HEADER + 20);
        assert!(
            back.len() >= records.len() - per_block - 1,
            "{}",
            back.len()
        );
        assert_eq!(back.last(), records.last());
        assert!(matches!(
            damage.as_slice(),
            [Damage::Corrupt { from: 0, .. }]
        ));
    }
}
