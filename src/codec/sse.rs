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
//! and no line longer than the cap is ever buffered.

use std::fmt;

/// The UTF-8 byte order mark, skipped once at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Room for `data: ` ahead of a value, so a line carrying a full-size value is not oversize.
const FIELD_SLACK: usize = 6;

/// One dispatched event. It borrows the parser until the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
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
pub enum SseError {
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
#[derive(Debug)]
pub struct SseParser {
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
#[derive(Debug)]
struct Fields {
    max_data: usize,
    data: String,
    /// `data` has had a line, so the next one is joined with `\n`.
    data_lines: bool,
    event_type: String,
    /// The last event ID buffer: set by `id` lines, committed at each blank line.
    id_buf: String,
    last_id: String,
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
    /// A parser whose events carry at most `max_event_bytes` of data (after UTF-8 decoding).
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            line_cap: max_event_bytes.saturating_add(FIELD_SLACK),
            bom_done: false,
            after_cr: false,
            discarding: false,
            fields: Fields {
                max_data: max_event_bytes,
                data: String::new(),
                data_lines: false,
                event_type: String::new(),
                id_buf: String::new(),
                last_id: String::new(),
                retry: None,
                skipping: false,
                dispatched: false,
            },
        }
    }

    /// Appends stream bytes. Call [`next_event`](Self::next_event) until `None` before pushing
    /// more, or memory use grows by one read.
    pub fn push(&mut self, mut data: &[u8]) {
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
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The last event ID: the value of the last `id` field, as of the last blank line. `None`
    /// if there was none or it was set empty. Send it as `Last-Event-ID` to resume.
    pub fn last_event_id(&self) -> Option<&str> {
        Some(self.fields.last_id.as_str()).filter(|id| !id.is_empty())
    }

    /// The reconnection time the server asked for with `retry`, in milliseconds.
    pub fn retry_ms(&self) -> Option<u64> {
        self.fields.retry
    }

    /// The next event or error, or `None` when more input is needed.
    pub fn next_event(&mut self) -> Option<Result<SseEvent<'_>, SseError>> {
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
        if line[0] == b':' {
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
            b"id" => {
                if !value.contains(&0) {
                    self.id_buf.clear();
                    push_lossy(&mut self.id_buf, value);
                }
            }
            b"retry" => {
                if !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
                    // All digits but too many for a u64: the longest wait there is.
                    let ms = value.iter().try_fold(0u64, |n, &d| {
                        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
                    });
                    self.retry = Some(ms.unwrap_or(u64::MAX));
                }
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
        self.last_id.clone_from(&self.id_buf);
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
