//! Newline-delimited JSON framing (the stdio transport of both revisions).
//!
//! [`LineFramer`] cuts a byte stream into lines. It is indifferent to how the stream is
//! chunked: the same input yields the same frames whatever the read boundaries. A line longer
//! than the configured maximum yields one [`Frame::TooLarge`]; the framer then skips to the
//! next newline without buffering the rest. Blank lines are skipped. Whether a line is JSON is
//! the decoder's business, not the framer's.

use std::io::{self, Read};

/// How many bytes of an oversize line are kept from each end, so the engine can still find
/// the JSON-RPC id (Python SDKs write it near the start, TypeScript SDKs at the very end).
pub(crate) const OVERSIZE_SNIPPET: usize = 64;

/// One output of the framer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// A complete line, without `\n` or a trailing `\r`.
    Line(&'a [u8]),
    /// A line longer than the maximum ended; it was dropped. Reported once, when its newline
    /// arrives, with the first and last bytes of the line.
    TooLarge {
        /// Up to [`OVERSIZE_SNIPPET`] bytes from the start of the line.
        head: &'a [u8],
        /// Up to [`OVERSIZE_SNIPPET`] bytes from the end of the line.
        tail: &'a [u8],
    },
}

/// Incremental line framer with a byte cap per line.
#[derive(Debug)]
pub(crate) struct LineFramer {
    /// The bytes read and not yet framed are `buf[start..filled]`; the rest of `buf` is room
    /// for the next read, kept initialized so that a read lands in it directly, with no copy
    /// out of a read buffer of its own.
    buf: Vec<u8>,
    /// The end of the bytes read.
    filled: usize,
    /// Start of the first unconsumed byte in `buf`.
    start: usize,
    /// Bytes after `start` already known to hold no newline (so they are never rescanned).
    scanned: usize,
    max_line: usize,
    /// Inside an oversize line: bytes are dropped until the next newline.
    discarding: bool,
    /// An oversize line has ended and is waiting to be reported.
    oversize_done: bool,
    /// Bytes of the oversize line seen so far.
    oversize_len: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
}

/// The most room the buffer keeps once a long line is out: more than a read (the stdio
/// driver's are 64 KiB at most) and what a read leaves over, so shedding never repeats in
/// steady state.
const ROOM_KEPT: usize = 256 * 1024;

/// The buffer's room from the start: a read of the stdio driver's first size, with no line
/// left over.
const FIRST_ROOM: usize = 4 * 1024;

impl LineFramer {
    /// A framer accepting lines of at most `max_line` bytes (excluding the newline).
    pub(crate) fn new(max_line: usize) -> Self {
        Self {
            // Room for a first read (the stdio driver's starts at 4 KiB) from the start, so a
            // burst of replies that arrives in one read does not grow it in steady state.
            buf: vec![0; FIRST_ROOM],
            filled: 0,
            start: 0,
            scanned: 0,
            max_line,
            discarding: false,
            oversize_done: false,
            oversize_len: 0,
            head: Vec::with_capacity(TAIL_KEPT),
            tail: Vec::with_capacity(2 * TAIL_KEPT),
        }
    }

    /// Appends bytes read from the stream. Call [`next_frame`](Self::next_frame) until `None`
    /// before pushing more, or memory use grows by one read.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn push(&mut self, mut data: &[u8]) {
        // A slice reads whole into room made for all of it: the same path as a pipe's bytes.
        let size = data.len();
        let _ = self.read_from(&mut data, size);
    }

    /// One `read` of at most `size` bytes from `source`, straight into the framer's buffer;
    /// what `read` returned. Call [`next_frame`](Self::next_frame) until `None` before reading
    /// more, or memory use grows by one read.
    pub(crate) fn read_from(
        &mut self,
        source: &mut (impl Read + ?Sized),
        size: usize,
    ) -> io::Result<usize> {
        if self.start == self.filled && self.buf.len() > ROOM_KEPT {
            // A long line grew the buffer; it is out now, and its room goes back rather than
            // staying for the process's life (a 16 MiB line, even one dropped as oversize).
            // Reads are smaller than what is kept, so steady state allocates nothing.
            self.buf.truncate(ROOM_KEPT);
            self.buf.shrink_to_fit();
            (self.start, self.filled, self.scanned) = (0, 0, 0);
        }
        let n = super::read_after(&mut self.buf, &mut self.start, &mut self.filled, source, size)?;
        let from = self.filled;
        self.filled += n;
        if self.discarding {
            // Inside an oversize line the framer holds nothing else (`next_frame` cleared it).
            let newline = memchr::memchr(b'\n', &self.buf[from..self.filled]);
            let dropped = from..newline.map_or(self.filled, |i| from + i);
            self.keep_tail_of(dropped);
            match newline {
                None => self.filled = from,
                Some(i) => {
                    self.discarding = false;
                    self.oversize_done = true;
                    self.start = from + i + 1;
                }
            }
        }
        Ok(n)
    }

    #[cfg_attr(not(any(test, fuzzing)), allow(dead_code))] // read by the table tests and fuzz targets
    /// Bytes buffered and not yet framed.
    pub(crate) fn buffered(&self) -> usize {
        self.filled - self.start
    }

    /// The next frame, or `None` when more input is needed.
    pub(crate) fn next_frame(&mut self) -> Option<Frame<'_>> {
        if self.oversize_done {
            self.oversize_done = false;
            if self.tail.last() == Some(&b'\r') {
                self.tail.pop();
                if self.oversize_len <= TAIL_KEPT {
                    // The head is the whole line: it holds that same `\r`.
                    self.head.pop();
                }
            }
            let excess = self.tail.len().saturating_sub(OVERSIZE_SNIPPET);
            self.tail.drain(..excess);
            self.head.truncate(OVERSIZE_SNIPPET);
            return Some(Frame::TooLarge { head: &self.head, tail: &self.tail });
        }
        loop {
            let pending = &self.buf[self.start..self.filled];
            if self.scanned == pending.len() {
                // Nothing new since the last search (the common case once a read's last line
                // is out): that search already found no newline and checked the length.
                return None;
            }
            let Some(offset) = memchr::memchr(b'\n', &pending[self.scanned..]) else {
                self.scanned = pending.len();
                // One byte of slack: a full-size line may still end in "\r\n".
                // Saturating: `usize::MAX` is a host's way to say "no limit".
                if pending.len() > self.max_line.saturating_add(1) {
                    self.head.clear();
                    self.head.extend_from_slice(&pending[..TAIL_KEPT.min(pending.len())]);
                    self.oversize_len = pending.len();
                    self.tail.clear();
                    let from = pending.len().saturating_sub(TAIL_KEPT);
                    self.tail.extend_from_slice(&pending[from..]);
                    self.filled = 0;
                    self.start = 0;
                    self.scanned = 0;
                    self.discarding = true;
                }
                return None;
            };
            let line_start = self.start;
            let mut end = self.start + self.scanned + offset;
            self.start = end + 1;
            self.scanned = 0;
            if end > line_start && self.buf[end - 1] == b'\r' {
                end -= 1;
            }
            let line = &self.buf[line_start..end];
            if line.len() > self.max_line {
                self.head.clear();
                self.head.extend_from_slice(&line[..OVERSIZE_SNIPPET.min(line.len())]);
                self.tail.clear();
                self.tail.extend_from_slice(&line[line.len().saturating_sub(OVERSIZE_SNIPPET)..]);
                return Some(Frame::TooLarge { head: &self.head, tail: &self.tail });
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(Frame::Line(&self.buf[line_start..end]));
        }
    }

    /// [`keep_tail`] of the `dropped` range of the buffer.
    fn keep_tail_of(&mut self, dropped: std::ops::Range<usize>) {
        let Self { buf, head, tail, oversize_len, .. } = self;
        keep_tail(head, tail, oversize_len, &buf[dropped]);
    }
}

/// Keeps the first and last bytes of a line being dropped.
fn keep_tail(head: &mut Vec<u8>, tail: &mut Vec<u8>, oversize_len: &mut usize, dropped: &[u8]) {
    *oversize_len += dropped.len();
    let room = TAIL_KEPT - head.len();
    head.extend_from_slice(&dropped[..room.min(dropped.len())]);
    if dropped.len() >= TAIL_KEPT {
        tail.clear();
        tail.extend_from_slice(&dropped[dropped.len() - TAIL_KEPT..]);
        return;
    }
    tail.extend_from_slice(dropped);
    let excess = tail.len().saturating_sub(TAIL_KEPT);
    tail.drain(..excess);
}

/// Head and tail keep one byte more than they report, for a `\r` that may precede the newline.
const TAIL_KEPT: usize = OVERSIZE_SNIPPET + 1;

/// What a framer makes of a stream, as comparable values: shared by the table tests and the
/// fuzz target, which both check that it does not depend on how the stream is split.
#[cfg(any(test, fuzzing))]
#[derive(Debug, PartialEq)]
pub(crate) enum Observed {
    Line(Vec<u8>),
    /// An oversize line: its head and tail.
    TooLarge(Vec<u8>, Vec<u8>),
}

/// Feeds `chunks` to a framer capped at `max`, checking its bound on the way.
#[cfg(any(test, fuzzing))]
pub(crate) fn observe(max: usize, chunks: &[&[u8]]) -> Vec<Observed> {
    let mut f = LineFramer::new(max);
    let mut out = Vec::new();
    for c in chunks {
        f.push(c);
        while let Some(r) = f.next_frame() {
            out.push(match r {
                Frame::Line(l) => Observed::Line(l.to_vec()),
                Frame::TooLarge { head, tail } => Observed::TooLarge(head.to_vec(), tail.to_vec()),
            });
        }
        let bound = max.saturating_add(1).saturating_add(c.len());
        assert!(f.buffered() <= bound, "framer holds more than a line plus one read");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::{observe as run, Observed as Out};

    /// Each case: max line, input, expected frames. Every case is re-run split at every offset
    /// and at every pair of offsets, and byte by byte.
    macro_rules! frames {
        ($($name:ident: $max:expr, $input:expr => [$($out:expr),* $(,)?];)*) => {$(
            #[test]
            fn $name() {
                let input: &[u8] = $input;
                let expected: Vec<Out> = vec![$($out),*];
                crate::codec::check_every_split(input, &expected, usize::MAX, |parts| run($max, parts));
            }
        )*};
    }

    fn f(s: &str) -> Out {
        Out::Line(s.as_bytes().to_vec())
    }

    fn big(head: &str, tail: &str) -> Out {
        Out::TooLarge(head.as_bytes().to_vec(), tail.as_bytes().to_vec())
    }

    frames! {
        single_line: 64, b"{\"a\":1}\n" => [f("{\"a\":1}")];
        two_lines: 64, b"{}\n[]\n" => [f("{}"), f("[]")];
        partial_tail_waits: 64, b"{}\n{\"x\"" => [f("{}")];
        crlf_is_stripped: 64, b"{}\r\n{}\r\n" => [f("{}"), f("{}")];
        blank_lines_skipped: 64, b"\n\r\n  \n{}\n\n" => [f("{}")];
        junk_is_framed_for_the_decoder: 64, b"starting up...\n{}\n" => [f("starting up..."), f("{}")];
        exactly_max_is_fine: 4, b"1234\n" => [f("1234")];
        exactly_max_with_crlf: 4, b"1234\r\n" => [f("1234")];
        oversize_line_reported_once_then_resync: 4, b"12345678901\n{}\n" => [big("12345678901", "12345678901"), f("{}")];
        oversize_then_partial: 4, b"{}\n123456789\n12" => [f("{}"), big("123456789", "123456789")];
        oversize_by_one_with_crlf: 4, b"12345\r\n1\n" => [big("12345", "12345"), f("1")];
        oversize_unterminated_waits: 4, b"{}\n1234567" => [f("{}")];
        utf8_passes_through: 64, "{\"t\":\"héllo 世界\"}\n".as_bytes() => [f("{\"t\":\"héllo 世界\"}")];
        // `usize::MAX` as the limit means none: a line cut across reads still waits whole (the
        // check of its length overflowed: a panic in a debug build, and in a release build
        // every line cut across reads was discarded as oversize).
        no_limit: usize::MAX, b"{\"a\":1}\n{}\n" => [f("{\"a\":1}"), f("{}")];
    }

    /// A long line's room goes back once the line is out: the buffer kept it for the
    /// process's life.
    #[test]
    fn a_long_lines_room_is_given_back() {
        let mut f = LineFramer::new(16 << 20);
        let line = format!("{{\"pad\":\"{}\"}}\n", "p".repeat(4 << 20));
        f.push(line.as_bytes());
        assert!(matches!(f.next_frame(), Some(Frame::Line(l)) if l.len() == line.len() - 1));
        assert!(f.next_frame().is_none());
        f.push(b"{}\n");
        assert!(matches!(f.next_frame(), Some(Frame::Line(b"{}"))));
        assert!(f.buf.capacity() <= ROOM_KEPT, "{}", f.buf.capacity());
    }

    #[test]
    fn oversize_line_is_not_buffered_and_keeps_both_ends() {
        let mut f = LineFramer::new(8);
        f.push(b"{\"jsonrpc\":\"2.0\",\"id\":5,");
        assert_eq!(f.next_frame(), None);
        for _ in 0..1000 {
            f.push(&[b'x'; 1024]);
            assert_eq!(f.next_frame(), None);
            assert_eq!(f.buffered(), 0);
        }
        f.push(b",\"id\":9}\r\n{}\n");
        match f.next_frame() {
            Some(Frame::TooLarge { head, tail }) => {
                assert!(head.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":5,xxx"));
                assert_eq!(head.len(), OVERSIZE_SNIPPET);
                assert_eq!(tail.len(), OVERSIZE_SNIPPET);
                assert!(tail.ends_with(b"xx,\"id\":9}"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(f.next_frame(), Some(Frame::Line(b"{}")));
        assert_eq!(f.next_frame(), None);
    }
}
