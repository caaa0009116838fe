//! Lines of a text the target writes (its memory map, its perf map), read in a stream with
//! every line cut at a cap: a file of one endless line costs no more memory than a short one.

use std::io::{self, BufRead};

/// What a reading went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Read {
    /// Whole lines handed over.
    pub lines: u64,
    /// Bytes consumed, newlines included.
    pub bytes: u64,
    /// Lines longer than the cap (handed over cut).
    pub long: u64,
}

/// Hands `each` every line of `reader` ended by a newline, without it, cut to `max_line` bytes
/// (and whether it was cut), until the reader ends or `each` says false. A last line without
/// its newline is not handed over: a reading stopped at a byte cap ends in the middle of one.
pub fn for_each(
    mut reader: impl BufRead,
    max_line: usize,
    mut each: impl FnMut(&[u8], bool) -> bool,
) -> io::Result<Read> {
    let mut read = Read::default();
    // The start of a line that spans the reader's buffer, up to the cap.
    let mut line = Vec::new();
    let mut cut = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(read);
        }
        let Some(at) = buf.iter().position(|&b| b == b'\n') else {
            let room = max_line.saturating_sub(line.len());
            line.extend_from_slice(&buf[..buf.len().min(room)]);
            cut |= buf.len() > room;
            let n = buf.len();
            reader.consume(n);
            read.bytes += n as u64;
            continue;
        };
        let go = if line.is_empty() && !cut {
            // The whole line is in the buffer: handed over in place.
            let long = at > max_line;
            read.long += u64::from(long);
            each(&buf[..at.min(max_line)], long)
        } else {
            let room = max_line.saturating_sub(line.len());
            line.extend_from_slice(&buf[..at.min(room)]);
            cut |= at > room;
            read.long += u64::from(cut);
            let go = each(&line, cut);
            line.clear();
            cut = false;
            go
        };
        reader.consume(at + 1);
        read.bytes += at as u64 + 1;
        read.lines += 1;
        if !go {
            return Ok(read);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[u8], max: usize, buffer: usize) -> (Vec<(Vec<u8>, bool)>, Read) {
        let mut seen = Vec::new();
        let reader = io::BufReader::with_capacity(buffer, text);
        let read = for_each(reader, max, |l, cut| {
            seen.push((l.to_vec(), cut));
            true
        })
        .unwrap();
        (seen, read)
    }

    #[test]
    fn lines_are_cut_at_the_cap_across_buffers() {
        let text = b"short\nthis one is long\n\nlast without newline";
        for buffer in [1, 3, 7, 64] {
            let (seen, read) = lines(text, 8, buffer);
            let want: Vec<(Vec<u8>, bool)> = vec![
                (b"short".to_vec(), false),
                (b"this one".to_vec(), true),
                (b"".to_vec(), false),
            ];
            assert_eq!(seen, want, "buffer {buffer}");
            assert_eq!(read.lines, 3);
            assert_eq!(read.long, 1);
            assert_eq!(read.bytes, text.len() as u64, "buffer {buffer}");
        }
        // Exactly at the cap is not cut.
        let (seen, _) = lines(b"12345678\n", 8, 4);
        assert_eq!(seen, vec![(b"12345678".to_vec(), false)]);
    }

    /// One line of 64 MiB, read with an 8-byte cap: memory for 8 bytes, not 64 MiB.
    #[test]
    fn an_endless_line_is_not_held() {
        struct Endless(u64);
        impl io::Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = (buf.len() as u64).min(self.0) as usize;
                buf[..n].fill(b'x');
                self.0 -= n as u64;
                if self.0 == 0 && n > 0 {
                    buf[n - 1] = b'\n';
                }
                Ok(n)
            }
        }
        let mut longest = 0;
        let read = for_each(io::BufReader::new(Endless(64 << 20)), 8, |l, cut| {
            longest = longest.max(l.len());
            assert!(cut);
            true
        })
        .unwrap();
        assert_eq!((read.lines, longest), (1, 8));
    }

    #[test]
    fn each_can_stop_the_reading() {
        let mut n = 0;
        let read = for_each(&b"a\nb\nc\n"[..], 8, |_, _| {
            n += 1;
            n < 2
        })
        .unwrap();
        assert_eq!((n, read.lines, read.bytes), (2, 2, 4));
    }
}
