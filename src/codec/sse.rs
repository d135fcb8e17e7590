//! `text/event-stream` parsing: server-sent events, as Streamable HTTP servers send them.
//!
//! [`SseParser`] follows the WHATWG HTML event-stream rules: lines end in CRLF, LF or CR; a
//! leading BOM is skipped; `field: value` lines (one space after the colon is dropped);
//! lines starting with `:` are comments (keep-alives); `data` lines join with `\n`; `event`
//! sets the type; `id` sets the last event ID, which persists across events; `retry` sets the
//! reconnection time; unknown fields are ignored; a blank line dispatches the event.
//!
//! One deliberate difference: an event whose joined data is empty is not dispatched. The
//! standard dispatches `data:` alone as an empty message, but to MCP an empty data is never
//! a JSON-RPC message: it is the priming event of a resumable stream (PROTOCOL.md 6.2). Its
//! `id` still becomes the last event ID.
//!
//! The parser is indifferent to how its input is chunked, bytes are decoded as UTF-8 (lossily)
//! only once a line is complete, and memory is bounded: an event whose data grows past the
//! cap yields one [`SseError::TooLarge`] and the rest of it is skipped without buffering,
//! and no line longer than the cap is ever buffered. Other oversize lines (a huge `id`,
//! `event` or comment) are dropped silently; `id` and `retry` lines inside a skipped event
//! still count, so resuming does not replay an event that cannot be read.

use std::fmt;

/// The UTF-8 byte order mark, skipped once at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The longest event ID taken. A longer one is ignored, as one holding NUL is: it is sent
/// back in a request head (`Last-Event-ID`), and every blank line compares it with the last
/// one, so an ID of megabytes made each empty line of a flood cost a megabyte's comparison.
const MAX_EVENT_ID: usize = 1024;

/// Room for `data: ` ahead of a value, so a line carrying a full-size value is not oversize.
const FIELD_SLACK: usize = 6;

/// One dispatched event. It borrows the parser until the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SseEvent<'a> {
    /// The `event` field, or `message` when there was none.
    pub event_type: &'a str,
    /// The `data` lines joined with `\n`. Never empty.
    pub data: &'a str,
    /// The last event ID at dispatch (set by this event or an earlier one), if any.
    pub id: Option<&'a str>,
}

/// Why an event was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum SseError {
    /// The event's data grew past the maximum. The rest of the event is skipped; the next
    /// event is parsed normally.
    TooLarge,
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge => f.write_str("server-sent event data larger than the maximum"),
        }
    }
}

impl std::error::Error for SseError {}

/// Incremental `text/event-stream` parser for one stream.
///
/// Call order: [`push`](Self::push) decoded body bytes, then call
/// [`next_event`](Self::next_event) until it returns `None`. When the stream ends, an event
/// without its blank line is dropped, as the standard says; [`last_event_id`](Self::last_event_id)
/// and [`retry_ms`](Self::retry_ms) are what a resuming client needs.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    /// First unconsumed byte in `buf`.
    start: usize,
    /// Bytes after `start` known to hold no line end, so they are never rescanned.
    scanned: usize,
    /// Longest line kept in `buf`; anything longer is dropped as it arrives.
    line_cap: usize,
    /// The start of the stream was checked for a BOM.
    bom_done: bool,
    /// The last line ended in CR, so an LF right after it (maybe in the next push) is part
    /// of the same line end, not an empty line.
    after_cr: bool,
    /// Inside an oversize line: bytes are dropped up to its end.
    discarding: bool,
    fields: Fields,
}

/// The event being assembled, and the stream-wide state the fields set.
#[derive(Debug, Default)]
struct Fields {
    max_data: usize,
    data: String,
    /// `data` has had a line, so the next one is joined with `\n`.
    data_lines: bool,
    event_type: String,
    /// The last event ID buffer: set by `id` lines, committed at each blank line.
    id_buf: String,
    last_id: String,
    /// A blank line committed an ID other than the last one since the stream began.
    id_changed: bool,
    retry: Option<u64>,
    /// `TooLarge` was reported for this event: its data is dropped until the blank line.
    skipping: bool,
    /// An event was handed out; its buffers are cleared on the next call, not before, because
    /// the event borrows them.
    dispatched: bool,
}

enum LineStep {
    Wait,
    /// The buffered part of the current line is already longer than the cap.
    Oversize,
    /// A whole line, `buf[a..b]`, line end excluded.
    Got(usize, usize),
}

enum FieldStep {
    Continue,
    Dispatch,
    TooLarge,
}

impl SseParser {
    /// Makes this parser as [`new`](Self::new) would, for a new stream, keeping its buffers'
    /// room: an exchange's parser is reset for every request it carries, and a stream after
    /// a stream allocates nothing.
    pub(crate) fn reset(&mut self, max_event_bytes: usize) {
        // Field by field, every one named (a new one cannot be missed), to keep the buffers
        // where they are: rebuilding the parser around them cost 64 instructions a request.
        let Self { buf, start, scanned, line_cap, bom_done, after_cr, discarding, fields } = self;
        buf.clear();
        (*start, *scanned) = (0, 0);
        *line_cap = max_event_bytes.saturating_add(FIELD_SLACK);
        (*bom_done, *after_cr, *discarding) = (false, false, false);
        let Fields {
            max_data,
            data,
            data_lines,
            event_type,
            id_buf,
            last_id,
            id_changed,
            retry,
            skipping,
            dispatched,
        } = fields;
        *max_data = max_event_bytes;
        data.clear();
        event_type.clear();
        id_buf.clear();
        last_id.clear();
        *retry = None;
        (*data_lines, *id_changed, *skipping, *dispatched) = (false, false, false, false);
    }

    /// Gives back the room of a buffer that a large event grew past `keep` bytes: the
    /// parser belongs to a slot that lives as long as its session, and a reset keeps room.
    pub(crate) fn shed(&mut self, keep: usize) {
        if self.buf.capacity() > keep {
            self.buf = Vec::new();
            (self.start, self.scanned) = (0, 0);
        }
        if self.fields.data.capacity() > keep {
            self.fields.data = String::new();
            self.fields.data_lines = false;
        }
        if self.fields.event_type.capacity() > keep {
            self.fields.event_type = String::new();
        }
    }

    /// Starts a reconnected stream from the last event ID of the one before (the `Last-Event-ID`
    /// it was resumed with), as an `EventSource` keeps its last event ID buffer across
    /// reconnections: only an `id` line of the new stream changes it. Call after
    /// [`reset`](Self::reset).
    pub(crate) fn resume_from(&mut self, last_event_id: &str) {
        self.fields.id_buf.clear();
        self.fields.id_buf.push_str(last_event_id);
        self.fields.last_id.clone_from(&self.fields.id_buf);
    }

    /// A parser whose events carry at most `max_event_bytes` of data (after UTF-8 decoding).
    pub(crate) fn new(max_event_bytes: usize) -> Self {
        let mut parser = Self::default();
        parser.reset(max_event_bytes);
        parser
    }

    /// Appends stream bytes. Call [`next_event`](Self::next_event) until `None` before pushing
    /// more, or memory use grows by one read.
    pub(crate) fn push(&mut self, mut data: &[u8]) {
        if self.start > 0 {
            // Compact: consumed bytes are never needed again.
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if self.discarding {
            let Some(end) = data.iter().position(|&b| b == b'\n' || b == b'\r') else {
                return;
            };
            self.discarding = false;
            self.after_cr = data[end] == b'\r';
            data = &data[end + 1..];
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes buffered and not yet parsed.
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The last event ID: the value of the last `id` field, as of the last blank line. `None`
    /// if there was none or it was set empty. Send it as `Last-Event-ID` to resume.
    pub(crate) fn last_event_id(&self) -> Option<&str> {
        Some(self.fields.last_id.as_str()).filter(|id| !id.is_empty())
    }

    /// Whether the stream has committed a new event ID since it began (or since the ID it
    /// resumed from), however its bytes were cut: a stream that did has made progress.
    pub(crate) fn id_changed(&self) -> bool {
        self.fields.id_changed
    }

    /// The reconnection time the server asked for with `retry`, in milliseconds.
    pub(crate) fn retry_ms(&self) -> Option<u64> {
        self.fields.retry
    }

    /// The next event or error, or `None` when more input is needed.
    #[cfg_attr(not(any(test, fuzzing)), allow(dead_code))] // the driver uses `next_event_within`
    #[must_use = "an event left unread is lost"]
    pub(crate) fn next_event(&mut self) -> Option<Result<SseEvent<'_>, SseError>> {
        let mut unbounded = usize::MAX;
        self.next_event_within(&mut unbounded)
    }

    /// [`next_event`](Self::next_event), reading at most `lines` more lines (each taken
    /// counts, comments and blank lines too). `None` with `*lines == 0` and
    /// [`buffered`](Self::buffered) bytes left means the budget, not the input, ran out.
    #[must_use = "an event left unread is lost"]
    pub(crate) fn next_event_within(
        &mut self,
        lines: &mut usize,
    ) -> Option<Result<SseEvent<'_>, SseError>> {
        if self.fields.dispatched {
            self.fields.dispatched = false;
            self.fields.clear_event();
        }
        if !self.bom_done {
            let pending = &self.buf[self.start..];
            if pending.len() < BOM.len() && BOM.starts_with(pending) {
                // Maybe a BOM split across pushes: wait for enough bytes to tell.
                return None;
            }
            if pending.starts_with(BOM) {
                self.start += BOM.len();
            }
            self.bom_done = true;
        }
        loop {
            if *lines == 0 {
                return None;
            }
            let step = match self.next_line() {
                LineStep::Wait => return None,
                LineStep::Got(a, b) => self.fields.line(&self.buf[a..b], self.line_cap),
                LineStep::Oversize => {
                    let step = self.fields.oversize(&self.buf[self.start..]);
                    self.buf.clear();
                    self.start = 0;
                    self.scanned = 0;
                    self.discarding = true;
                    step
                }
            };
            *lines -= 1;
            match step {
                FieldStep::Continue => {}
                FieldStep::TooLarge => return Some(Err(SseError::TooLarge)),
                FieldStep::Dispatch => return Some(Ok(self.fields.event())),
            }
        }
    }

    fn next_line(&mut self) -> LineStep {
        if self.after_cr {
            match self.buf.get(self.start) {
                None => return LineStep::Wait,
                Some(b'\n') => self.start += 1,
                Some(_) => {}
            }
            self.after_cr = false;
        }
        let pending = &self.buf[self.start..];
        let fresh = pending.get(self.scanned..).unwrap_or_default();
        if let Some(i) = fresh.iter().position(|&b| b == b'\n' || b == b'\r') {
            let line_start = self.start;
            let end = self.start + self.scanned + i;
            self.after_cr = self.buf[end] == b'\r';
            self.start = end + 1;
            self.scanned = 0;
            return LineStep::Got(line_start, end);
        }
        self.scanned = pending.len();
        if pending.len() > self.line_cap {
            LineStep::Oversize
        } else {
            LineStep::Wait
        }
    }
}

impl Fields {
    /// Applies one complete line.
    fn line(&mut self, line: &[u8], line_cap: usize) -> FieldStep {
        if line.len() > line_cap {
            // The same verdict as for a line caught while still arriving, so the output does
            // not depend on where the line was split.
            return self.oversize(line);
        }
        if line.is_empty() {
            return self.blank_line();
        }
        if line.first() == Some(&b':') {
            return FieldStep::Continue;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match name {
            b"data" => {
                if self.skipping {
                    return FieldStep::Continue;
                }
                let added = decoded_len(value) + usize::from(self.data_lines);
                if self.data.len().saturating_add(added) > self.max_data {
                    return self.too_large();
                }
                if self.data_lines {
                    self.data.push('\n');
                }
                push_lossy(&mut self.data, value);
                self.data_lines = true;
            }
            b"event" => {
                self.event_type.clear();
                push_lossy(&mut self.event_type, value);
            }
            // An ID holding NUL is ignored (it could not be sent back in a header), and so
            // is one too long to send back.
            b"id" if value.len() <= MAX_EVENT_ID && !value.contains(&0) => {
                self.id_buf.clear();
                push_lossy(&mut self.id_buf, value);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // All digits but too many for a u64: the longest wait there is.
                let ms = value
                    .iter()
                    .try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')));
                self.retry = Some(ms.unwrap_or(u64::MAX));
            }
            _ => {}
        }
        FieldStep::Continue
    }

    /// A line longer than the cap, whole or only its start: it is dropped, and if it is a
    /// `data` line the event is too large.
    fn oversize(&mut self, line_start: &[u8]) -> FieldStep {
        // The cap exceeds every known field name, so the name is within what was seen; with
        // no colon in sight, the name is the long line itself, an unknown field.
        let is_data =
            line_start.iter().position(|&b| b == b':').is_some_and(|i| &line_start[..i] == b"data");
        if is_data && !self.skipping {
            self.too_large()
        } else {
            FieldStep::Continue
        }
    }

    fn too_large(&mut self) -> FieldStep {
        self.skipping = true;
        self.clear_event();
        FieldStep::TooLarge
    }

    fn blank_line(&mut self) -> FieldStep {
        // The ID is committed even when nothing is dispatched: priming events exist for it.
        if self.last_id != self.id_buf {
            self.id_changed = true;
            self.last_id.clone_from(&self.id_buf);
        }
        if self.skipping || self.data.is_empty() {
            self.skipping = false;
            self.clear_event();
            return FieldStep::Continue;
        }
        self.dispatched = true;
        FieldStep::Dispatch
    }

    fn clear_event(&mut self) {
        self.data.clear();
        self.data_lines = false;
        self.event_type.clear();
    }

    fn event(&self) -> SseEvent<'_> {
        SseEvent {
            event_type: if self.event_type.is_empty() { "message" } else { &self.event_type },
            data: &self.data,
            id: Some(self.last_id.as_str()).filter(|id| !id.is_empty()),
        }
    }
}

/// Appends `bytes` decoded as UTF-8, each invalid sequence becoming U+FFFD (as
/// `String::from_utf8_lossy` does, without its temporary).
fn push_lossy(out: &mut String, bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        if !chunk.invalid().is_empty() {
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }
}

/// The length [`push_lossy`] would add.
fn decoded_len(bytes: &[u8]) -> usize {
    bytes
        .utf8_chunks()
        .map(|c| {
            let replacement =
                if c.invalid().is_empty() { 0 } else { char::REPLACEMENT_CHARACTER.len_utf8() };
            c.valid().len() + replacement
        })
        .sum()
}

/// What a parser makes of a stream, as comparable values: shared by the table tests and the
/// fuzz target, which both check that it does not depend on how the stream is split.
#[cfg(any(test, fuzzing))]
#[derive(Debug, PartialEq)]
pub(crate) enum Observed {
    /// An event: type, data, id.
    Event(String, String, Option<String>),
    TooLarge,
    /// After the input: `last_event_id()`, `retry_ms()` and `id_changed()`.
    State(Option<String>, Option<u64>, bool),
}

/// Feeds `chunks` to a parser capped at `max`, checking its bounds on the way.
#[cfg(any(test, fuzzing))]
pub(crate) fn observe(max: usize, chunks: &[&[u8]]) -> Vec<Observed> {
    observe_in(&mut SseParser::new(max), max, chunks)
}

/// [`observe`] with a parser of the caller's (one that `max` was given to).
#[cfg(any(test, fuzzing))]
fn observe_in(p: &mut SseParser, max: usize, chunks: &[&[u8]]) -> Vec<Observed> {
    let mut out = Vec::new();
    for c in chunks {
        p.push(c);
        while let Some(r) = p.next_event() {
            out.push(match r {
                Ok(e) => {
                    assert!(!e.data.is_empty() && e.data.len() <= max);
                    Observed::Event(e.event_type.into(), e.data.into(), e.id.map(String::from))
                }
                Err(SseError::TooLarge) => Observed::TooLarge,
            });
        }
        assert!(p.buffered() <= max + FIELD_SLACK, "parser holds more than a line");
    }
    out.push(Observed::State(p.last_event_id().map(String::from), p.retry_ms(), p.id_changed()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::{observe as run, Observed as Out};

    /// Each case: max event bytes, input, expected outputs (the last is the parser's state).
    /// Every case is re-run split at every offset, at every pair of offsets (short inputs),
    /// and byte by byte.
    macro_rules! events {
        ($($name:ident: $max:expr, $input:expr => [$($out:expr),* $(,)?];)*) => {$(
            #[test]
            fn $name() {
                let input: &[u8] = $input;
                let expected: Vec<Out> = vec![$($out),*];
                crate::codec::check_every_split(input, &expected, 200, |parts| run($max, parts));
            }
        )*};
    }

    fn ev(event_type: &str, data: &str, id: Option<&str>) -> Out {
        Out::Event(event_type.into(), data.into(), id.map(String::from))
    }

    fn msg(data: &str) -> Out {
        ev("message", data, None)
    }

    /// The state after a stream; an id it ends with is one it changed to (a fresh parser
    /// has none).
    fn state(id: Option<&str>, retry: Option<u64>) -> Out {
        Out::State(id.map(String::from), retry, id.is_some())
    }

    /// An ID longer than [`MAX_EVENT_ID`] is ignored, however it arrives: the last one taken
    /// stays (it is what the stream resumes from), and no blank line compares a megabyte.
    #[test]
    fn an_event_id_too_long_to_send_back_is_ignored() {
        let long = format!("id: {}\n", "x".repeat(1 << 20));
        let limit = format!("id: {}\n\n", "y".repeat(MAX_EVENT_ID));
        for cut in [7, 4096, usize::MAX] {
            let mut p = SseParser::new(2 << 20);
            let stream = [b"id: e1\n\n", long.as_bytes(), b"data: x\n\n\n\n"].concat();
            let pieces: Vec<&[u8]> = stream.chunks(cut.min(stream.len())).collect();
            let seen = observe_in(&mut p, 2 << 20, &pieces);
            assert_eq!(seen.last(), Some(&Out::State(Some("e1".into()), None, true)), "cut {cut}");
            p.push(limit.as_bytes());
            while p.next_event().is_some() {}
            assert_eq!(p.last_event_id().map(str::len), Some(MAX_EVENT_ID), "the longest taken");
        }
    }

    /// A reconnected stream keeps the id it resumed from until an `id` line changes it, and
    /// only a change counts as one, however the bytes are cut.
    #[test]
    fn a_resumed_stream_starts_from_its_last_event_id() {
        for (stream, id, changed) in [
            (&b": ping\n\ndata: x\n\n"[..], Some("e1"), false),
            (b"id: e1\n\n", Some("e1"), false),
            (b"id: e2\ndata: x\n\nid: e1\n\n", Some("e1"), true),
            (b"id:\n\n", None, true),
        ] {
            for cut in [1, 3, stream.len()] {
                let mut p = SseParser::new(64);
                p.resume_from("e1");
                let pieces: Vec<&[u8]> = stream.chunks(cut).collect();
                let seen = observe_in(&mut p, 64, &pieces);
                let end = Out::State(id.map(String::from), None, changed);
                assert_eq!(seen.last(), Some(&end), "{stream:?} cut every {cut}");
            }
        }
    }

    const TOOLS_CALL: &[u8] =
        include_bytes!("../../tests/data/spec/2026-sse-response-to-tools-call.txt");
    const LISTEN: &[u8] = include_bytes!("../../tests/data/spec/2026-sse-listen-stream.txt");
    const WITH_IDS: &[u8] =
        include_bytes!("../../tests/data/spec/2025-sse-post-stream-with-event-ids.txt");

    /// A parser reset after any stream, however it was cut off, reads the next stream as a
    /// new parser does (the session resets an exchange's parser for every request).
    #[test]
    fn a_reset_parser_reads_the_next_stream_as_a_new_one() {
        let cut_offs: [&[u8]; 8] = [
            b"",
            b"data: half a li",
            b"data: a\r",
            b"\xEF\xBB",
            b"id: 7\nretry: 1500\nevent: e\ndata: x",
            b"id: 7\ndata: done\n\n",
            &[b'x'; 300],
            b"data: 0123456789012345678901234567890123456789\n",
        ];
        let next: [&[u8]; 6] = [
            TOOLS_CALL,
            LISTEN,
            WITH_IDS,
            b"\xEF\xBB\xBFdata: a\n\n",
            b"\ndata: b\n\n",
            b"data: 0123456789012345678901234567890123456789\n\n",
        ];
        for first_max in [16, 4096] {
            for cut in cut_offs {
                for stream in next {
                    for max in [16, 4096] {
                        let mut used = SseParser::new(first_max);
                        observe_in(&mut used, first_max, &[cut]);
                        used.reset(max);
                        let again = observe_in(&mut used, max, &[stream]);
                        assert_eq!(again, run(max, &[stream]), "{cut:?} then {stream:?}");
                    }
                }
            }
        }
    }

    events! {
        single_event: 64, b"data: hello\n\n" => [msg("hello"), state(None, None)];
        no_space_after_colon: 64, b"data:hello\n\n" => [msg("hello"), state(None, None)];
        only_one_space_is_stripped: 64, b"data:  two\n\n" => [msg(" two"), state(None, None)];
        event_type: 64, b"event: message\ndata: {}\n\nevent: custom\ndata: x\n\ndata: y\n\n"
            => [msg("{}"), ev("custom", "x", None), msg("y"), state(None, None)];
        multi_line_data: 64, b"data: a\ndata:\ndata: c\n\n" => [msg("a\n\nc"), state(None, None)];
        crlf_line_ends: 64, b"event: e\r\ndata: a\r\ndata: b\r\n\r\n" => [ev("e", "a\nb", None), state(None, None)];
        cr_line_ends: 64, b"event: e\rdata: a\rdata: b\r\rdata: c\r\r" => [ev("e", "a\nb", None), msg("c"), state(None, None)];
        mixed_line_ends: 64, b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r\n"
            => [msg("a\nb\nc"), msg("d"), state(None, None)];
        cr_then_lf_is_one_line_end: 64, b"data: a\r\n\r\ndata: b\r\n\r\n" => [msg("a"), msg("b"), state(None, None)];
        lf_cr_is_two_line_ends: 64, b"data: a\n\rdata: b\n\n" => [msg("a"), msg("b"), state(None, None)];
        bom_is_skipped: 64, b"\xEF\xBB\xBFdata: a\n\n" => [msg("a"), state(None, None)];
        bom_only_at_the_start: 64, b"\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\ndata: c\n\n"
            => [msg("a"), msg("c"), state(None, None)];
        partial_bom_is_data: 64, b"\xEF\xBBdata: a\n\ndata: b\n\n" => [msg("b"), state(None, None)];
        second_bom_is_kept: 64, b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n" => [msg("b"), state(None, None)];
        comments_are_ignored: 64, b":\n: keepalive\n:data: no\ndata: yes\n: mid\n\n" => [msg("yes"), state(None, None)];
        unknown_fields_are_ignored: 64, b"foo: bar\nDATA: no\ndata : no\nevent\ndata: yes\n\n"
            => [msg("yes"), state(None, None)];
        field_without_colon: 64, b"data\ndata\n\n" => [msg("\n"), state(None, None)];
        empty_data_is_not_dispatched: 64, b"data:\n\nevent: e\n\ndata: x\n\n" => [msg("x"), state(None, None)];
        id_persists: 64, b"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"
            => [ev("message", "a", Some("1")), ev("message", "b", Some("1")), msg("c"), Out::State(None, None, true)];
        id_commits_at_blank_line: 64, b"id: 1\ndata: a\n\nid: 2\ndata: b"
            => [ev("message", "a", Some("1")), state(Some("1"), None)];
        id_with_nul_is_ignored: 64, b"id: 1\n\nid: 2\x003\ndata: a\n\n"
            => [ev("message", "a", Some("1")), state(Some("1"), None)];
        priming_event_sets_id: 64, b"id: p-0\ndata:\n\n" => [state(Some("p-0"), None)];
        retry: 64, b"retry: 3000\n\nretry: 3x\n\nretry:\n\n" => [state(None, Some(3000))];
        retry_overflow_saturates: 64, b"retry: 99999999999999999999999\n\n" => [state(None, Some(u64::MAX))];
        retry_last_wins: 64, b"retry: 1\nretry: 2\n" => [state(None, Some(2))];
        incomplete_event_is_not_dispatched: 64, b"data: a\n\ndata: b\n" => [msg("a"), state(None, None)];
        utf8_passes_through: 64, "data: héllo 世界 🎉\n\n".as_bytes() => [msg("héllo 世界 🎉"), state(None, None)];
        invalid_utf8_is_replaced: 64, b"data: a\xffb\xe4\xb8\n\n" => [msg("a\u{fffd}b\u{fffd}"), state(None, None)];
        data_exactly_max: 4, b"data: abcd\n\n" => [msg("abcd"), state(None, None)];
        joined_data_exactly_max: 4, b"data: ab\ndata: c\n\n" => [msg("ab\nc"), state(None, None)];
        data_over_max: 4, b"data: abcde\n\ndata: ok\n\n" => [Out::TooLarge, msg("ok"), state(None, None)];
        joined_data_over_max: 4, b"data: ab\ndata: cd\ndata: ef\n\ndata: ok\n\n"
            => [Out::TooLarge, msg("ok"), state(None, None)];
        replacement_counts_against_max: 4, b"data: \xff\xff\n\ndata: \xff\n\n"
            => [Out::TooLarge, msg("\u{fffd}"), state(None, None)];
        oversize_line_skips_event_but_keeps_id: 8,
            b"id: 7\nevent: big\ndata: 0123456789012345678901234567890123456789\ndata: more\n\ndata: ok\n\n"
            => [Out::TooLarge, ev("message", "ok", Some("7")), state(Some("7"), None)];
        oversize_comment_is_silent: 8, b": 0123456789012345678901234567890123456789\ndata: ok\n\n"
            => [msg("ok"), state(None, None)];
        oversize_unknown_field_is_silent: 8, b"dataxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx: 1\ndata: ok\n\n"
            => [msg("ok"), state(None, None)];
        oversize_id_is_dropped: 8, b"id: 1\nid: 0123456789012345678901234567890123456789\ndata: ok\n\n"
            => [ev("message", "ok", Some("1")), state(Some("1"), None)];
        oversize_line_ended_by_cr_lf: 8, b"data: 0123456789012345678901234567890123456789\r\n\r\ndata: ok\r\n\r\n"
            => [Out::TooLarge, msg("ok"), state(None, None)];
        oversize_line_ended_by_cr: 8, b"data: 0123456789012345678901234567890123456789\r\rdata: ok\r\r"
            => [Out::TooLarge, msg("ok"), state(None, None)];
        two_oversize_events: 4, b"data: 123456\n\ndata: 123456\n\n" => [Out::TooLarge, Out::TooLarge, state(None, None)];
        tools_call_example: 4096, TOOLS_CALL => [
            msg(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-3","progress":1,"total":2,"message":"geocoding"}}"#),
            msg(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","logger":"weather","data":"upstream slow"}}"#),
            msg(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-3","progress":2,"total":2}}"#),
            msg(r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[{"type":"text","text":"4.5 C, overcast"}],"structuredContent":{"tempC":4.5,"sky":"overcast"},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"example-server","version":"2.3.0"}}}}"#),
            state(None, None),
        ];
        listen_example: 4096, LISTEN => [
            msg(r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"},"notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///project/config.toml"]}}}"#),
            msg(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}"#),
            msg(r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"},"uri":"file:///project/config.toml"}}"#),
            msg(r#"{"jsonrpc":"2.0","id":"listen-1","result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1","io.modelcontextprotocol/serverInfo":{"name":"example-server","version":"2.3.0"}}}}"#),
            state(None, None),
        ];
        event_ids_example: 4096, WITH_IDS => [
            ev("message", r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":12,"progress":0.5,"total":1.0}}"#, Some("s1-1")),
            ev("message", r#"{"jsonrpc":"2.0","id":"srv-1","method":"elicitation/create","params":{"mode":"form","message":"Unit?","requestedSchema":{"type":"object","properties":{"unit":{"type":"string","enum":["C","F"]}},"required":["unit"]}}}"#, Some("s1-2")),
            ev("message", r#"{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"4.5 C, overcast"}],"isError":false}}"#, Some("s1-3")),
            state(Some("s1-3"), Some(3000)),
        ];
        example_too_large_for_a_small_cap: 140, LISTEN => [
            Out::TooLarge,
            msg(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}"#),
            Out::TooLarge,
            Out::TooLarge,
            state(None, None),
        ];
    }

    #[test]
    fn examples_with_crlf_and_cr_line_ends() {
        for example in [TOOLS_CALL, LISTEN, WITH_IDS] {
            let lf = run(4096, &[example]);
            let text = std::str::from_utf8(example).unwrap();
            for ending in ["\r\n", "\r"] {
                let other = text.replace('\n', ending);
                let bytes = other.as_bytes();
                assert_eq!(run(4096, &[bytes]), lf);
                for i in 0..=bytes.len() {
                    assert_eq!(run(4096, &[&bytes[..i], &bytes[i..]]), lf, "split at {i}");
                }
            }
        }
    }

    #[test]
    fn huge_line_is_not_buffered() {
        let mut p = SseParser::new(16);
        p.push(b"id: 9\ndata: {\"jsonrpc\":");
        assert_eq!(p.next_event(), None);
        for _ in 0..1000 {
            p.push(&[b'x'; 1024]);
            match p.next_event() {
                None | Some(Err(SseError::TooLarge)) => {}
                other => panic!("{other:?}"),
            }
            assert_eq!(p.buffered(), 0);
        }
        p.push(b"}\ndata: more\n\ndata: ok\n\n");
        assert_eq!(
            p.next_event(),
            Some(Ok(SseEvent { event_type: "message", data: "ok", id: Some("9") }))
        );
        assert_eq!(p.next_event(), None);
    }

    #[test]
    fn too_large_is_reported_once_while_the_line_arrives() {
        let mut p = SseParser::new(16);
        p.push(b"data: 0123456789abcdefghij");
        assert_eq!(p.next_event(), Some(Err(SseError::TooLarge)));
        assert_eq!(p.next_event(), None);
        p.push(b"klmnop\ndata: x\n");
        assert_eq!(p.next_event(), None);
        p.push(b"\n");
        assert_eq!(p.next_event(), None);
        p.push(b"data: y\n\n");
        assert_eq!(p.next_event().map(|r| r.map(|e| e.data)), Some(Ok("y")));
    }

    /// A huge `event:` line (a name of up to the event cap) grows the event type's buffer as
    /// a large `data:` grows the data's: shedding gives back both, or a hostile server pins
    /// the cap in every slot of the session for its life.
    #[test]
    fn shedding_gives_back_the_room_of_a_huge_event_type() {
        let max = 1 << 20;
        let mut p = SseParser::new(max);
        let stream = format!("event: {}\ndata: x\n\n", "e".repeat(max - 1));
        p.push(stream.as_bytes());
        while p.next_event().is_some() {}
        p.shed(4096);
        p.reset(max);
        assert!(p.fields.event_type.capacity() <= 4096, "{}", p.fields.event_type.capacity());
        p.push(b"event: custom\ndata: y\n\n");
        let event = p.next_event().map(|r| r.map(|e| (e.event_type, e.data)));
        assert_eq!(event, Some(Ok(("custom", "y"))));
    }

    #[test]
    fn cr_at_the_end_of_a_push_dispatches_at_once() {
        let mut p = SseParser::new(64);
        p.push(b"data: a\r\r");
        assert_eq!(p.next_event().map(|r| r.map(|e| e.data)), Some(Ok("a")));
        p.push(b"\ndata: b\r");
        assert_eq!(p.next_event(), None);
        p.push(b"\n\r\n");
        assert_eq!(p.next_event().map(|r| r.map(|e| e.data)), Some(Ok("b")));
        assert_eq!(p.next_event(), None);
    }
}
