//! HTTP/1.1 for the client side of Streamable HTTP: a request writer and a response parser.
//!
//! [`write_request`] appends one request to a caller-owned buffer and refuses anything that
//! would let a header name, value, target or host smuggle a line break onto the wire.
//!
//! [`ResponseParser`] turns the bytes of one connection into [`ResponseEvent`]s: a
//! [`Head`](ResponseEvent::Head), the decoded body in [`Body`](ResponseEvent::Body) pieces as
//! they arrive (an SSE stream may never end, so nothing waits for the whole body), then
//! [`End`](ResponseEvent::End). It is indifferent to how the input is chunked: the same bytes
//! give the same heads, the same concatenated body and the same ends whatever the read
//! boundaries. Every buffer is capped by [`Limits`]. The head is parsed with httparse into a
//! stack array of headers; httparse names stay in this file (STYLE.md 3.3.13).
//!
//! Not supported, because an MCP client never needs them: `HEAD` requests (their responses
//! have no body whatever the headers say), `CONNECT`, upgrades and trailers (read and dropped).

use std::fmt;

/// The most header lines a response head may carry (httparse parses into a fixed array).
pub const MAX_HEADERS: usize = 64;

/// The longest chunk-size line, extensions and CRLF included, of a chunked body.
pub const MAX_CHUNK_LINE: usize = 4096;

/// Byte caps for one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest response head, status line to blank line. Also caps the trailer section
    /// of a chunked body.
    pub max_head_bytes: usize,
    /// The largest decoded body. A `text/event-stream` body can run for hours: raise this
    /// with [`ResponseParser::set_max_body_bytes`] after its head, and cap events in the SSE
    /// parser instead.
    pub max_body_bytes: u64,
}

impl Default for Limits {
    /// 16 KiB heads (Node's default cap) and 16 MiB bodies.
    fn default() -> Self {
        Self { max_head_bytes: 16 * 1024, max_body_bytes: 16 * 1024 * 1024 }
    }
}

/// The head of a request for [`write_request`].
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// The method, for example `POST`. Must be an RFC 9110 token.
    pub method: &'a str,
    /// The origin-form target: absolute path plus optional query, for example `/mcp?x=1`.
    pub target: &'a str,
    /// The `Host` header value: host and optional port, for example `127.0.0.1:8080`.
    pub host: &'a str,
    /// More headers, written in this order after `Host`. `Host`, `Content-Length` and
    /// `Transfer-Encoding` are written by [`write_request`] alone and are refused here.
    pub headers: &'a [(&'a str, &'a [u8])],
}

/// Why [`write_request`] refused a request. Nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// The method is not a token.
    BadMethod,
    /// The target is not an origin-form path (`/` then visible ASCII, no `#`).
    BadTarget,
    /// The host is empty or holds something other than visible ASCII host characters.
    BadHost,
    /// Header number `.0` has a name that is not a token.
    BadHeaderName(usize),
    /// Header number `.0` has a value holding CR, LF or NUL.
    BadHeaderValue(usize),
    /// Header number `.0` is one the writer owns (`Host`, `Content-Length`,
    /// `Transfer-Encoding`): a second copy would make the framing ambiguous.
    ReservedHeader(usize),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadMethod => f.write_str("request method is not a token"),
            Self::BadTarget => f.write_str("request target is not an origin-form path"),
            Self::BadHost => f.write_str("host is not a valid Host header value"),
            Self::BadHeaderName(i) => write!(f, "header {i}: name is not a token"),
            Self::BadHeaderValue(i) => write!(f, "header {i}: value holds CR, LF or NUL"),
            Self::ReservedHeader(i) => write!(f, "header {i}: set by the writer itself"),
        }
    }
}

impl std::error::Error for RequestError {}

/// Appends one HTTP/1.1 request to `out`: request line, `Host`, the caller's headers in
/// order, `Content-Length` when there is a body or the method carries one (`POST`, `PUT`,
/// `PATCH`), a blank line and the body.
///
/// Everything is checked before the first byte is written, so on error `out` is unchanged.
/// `out` grows at most once, by exactly the request's size.
pub fn write_request(
    out: &mut Vec<u8>,
    req: &RequestHead<'_>,
    body: &[u8],
) -> Result<(), RequestError> {
    if !is_token(req.method.as_bytes()) {
        return Err(RequestError::BadMethod);
    }
    let target = req.target.as_bytes();
    if target.first() != Some(&b'/') || !target.iter().all(|&b| is_vchar(b) && b != b'#') {
        return Err(RequestError::BadTarget);
    }
    let host = req.host.as_bytes();
    if host.is_empty() || !host.iter().all(|&b| is_vchar(b) && !b"/?#@".contains(&b)) {
        return Err(RequestError::BadHost);
    }
    // "Host: " + value + CRLF, and the request line with its two spaces and " HTTP/1.1\r\n".
    let mut len = req.method.len() + 1 + target.len() + 11 + 6 + host.len() + 2;
    for (i, &(name, value)) in req.headers.iter().enumerate() {
        if !is_token(name.as_bytes()) {
            return Err(RequestError::BadHeaderName(i));
        }
        if value.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)) {
            return Err(RequestError::BadHeaderValue(i));
        }
        if ["host", "content-length", "transfer-encoding"]
            .iter()
            .any(|r| name.eq_ignore_ascii_case(r))
        {
            return Err(RequestError::ReservedHeader(i));
        }
        len += name.len() + 2 + value.len() + 2;
    }
    let with_length = !body.is_empty() || matches!(req.method, "POST" | "PUT" | "PATCH");
    if with_length {
        len += "Content-Length: ".len() + decimal_len(body.len()) + 2;
    }
    len += 2 + body.len();
    out.reserve(len);

    out.extend_from_slice(req.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target);
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host);
    out.extend_from_slice(b"\r\n");
    for &(name, value) in req.headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    if with_length {
        out.extend_from_slice(b"Content-Length: ");
        push_decimal(out, body.len());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    Ok(())
}

/// One output of the [`ResponseParser`].
#[derive(Debug, Clone, Copy)]
pub enum ResponseEvent<'a> {
    /// A final (non-1xx) response head. Interim `1xx` heads are skipped.
    Head(ResponseHead<'a>),
    /// The next piece of the decoded body (chunked framing removed). Never empty.
    Body(&'a [u8]),
    /// The response is complete. With `keep_alive` the connection may carry the next
    /// response, and [`ResponseParser::next`] is ready for it; otherwise close it.
    End {
        /// Whether the connection may be reused.
        keep_alive: bool,
    },
}

/// Why a response cannot be read. The connection is unusable afterwards: close it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpError {
    /// The status line or a header line is malformed; the text says what httparse found.
    BadHead(&'static str),
    /// The head has more than [`MAX_HEADERS`] header lines.
    TooManyHeaders,
    /// The head, or a chunked body's trailer section, is larger than
    /// [`Limits::max_head_bytes`].
    HeadTooLarge,
    /// `Content-Length` is not a decimal number, or copies of it disagree.
    BadContentLength,
    /// The chunked framing is malformed: size line, extension or the CRLF after the data.
    BadChunk,
    /// The decoded body is larger than [`Limits::max_body_bytes`].
    BodyTooLarge,
    /// The connection closed inside a head or a delimited body.
    Truncated,
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadHead(what) => write!(f, "malformed response head: {what}"),
            Self::TooManyHeaders => write!(f, "more than {MAX_HEADERS} response headers"),
            Self::HeadTooLarge => f.write_str("response head too large"),
            Self::BadContentLength => f.write_str("invalid Content-Length"),
            Self::BadChunk => f.write_str("malformed chunked body"),
            Self::BodyTooLarge => f.write_str("response body too large"),
            Self::Truncated => f.write_str("connection closed inside a response"),
        }
    }
}

impl std::error::Error for HttpError {}

impl From<HttpError> for std::io::Error {
    fn from(e: HttpError) -> Self {
        let kind = match e {
            HttpError::Truncated => std::io::ErrorKind::UnexpectedEof,
            _ => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, e)
    }
}

/// A response head. It borrows the parser: copy out what must outlive the next call.
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'a> {
    status: u16,
    minor: u8,
    reason: &'a str,
    raw: &'a [u8],
    spans: &'a [Span],
}

impl<'a> ResponseHead<'a> {
    /// The status code, for example `200`.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The reason phrase, possibly empty (it is empty too when it was not valid UTF-8).
    pub fn reason(&self) -> &'a str {
        self.reason
    }

    /// The minor HTTP version: `1` for HTTP/1.1, `0` for HTTP/1.0.
    pub fn version_minor(&self) -> u8 {
        self.minor
    }

    /// The value of the first header called `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v)
    }

    /// All headers in wire order, as `(name, value)`.
    pub fn headers(&self) -> Headers<'a> {
        Headers { raw: self.raw, spans: self.spans.iter() }
    }
}

/// Iterator over a [`ResponseHead`]'s headers, from [`ResponseHead::headers`].
#[derive(Debug, Clone)]
pub struct Headers<'a> {
    raw: &'a [u8],
    spans: std::slice::Iter<'a, Span>,
}

impl<'a> Iterator for Headers<'a> {
    type Item = (&'a str, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let span = self.spans.next()?;
        let name = self.raw.get(span.name.0..span.name.1).unwrap_or_default();
        // httparse only accepts token bytes in names, so this never falls back.
        let name = std::str::from_utf8(name).unwrap_or("");
        let value = self.raw.get(span.value.0..span.value.1).unwrap_or_default();
        Some((name, value))
    }
}

/// Where one header's name and value sit in the saved head, as byte ranges.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    name: (usize, usize),
    value: (usize, usize),
}

/// Incremental HTTP/1.x response parser for one connection.
///
/// Call order: [`push`](Self::push) what was read, then call [`next`](Self::next) until it
/// returns `None`; when the peer closes, call [`eof`](Self::eof) and drain `next` again. After
/// [`ResponseEvent::End`] with `keep_alive` the parser reads the next response (pipelined
/// bytes already pushed are kept). After an error or an `End` without `keep_alive`, `next`
/// returns `None` and pushed bytes are dropped until [`reset`](Self::reset).
///
/// Memory: the parser holds at most one partial head (capped by
/// [`Limits::max_head_bytes`]) or chunk-size line plus the last push, and a copy of the
/// current head. Body bytes are handed out, never accumulated.
#[derive(Debug)]
pub struct ResponseParser {
    limits: Limits,
    buf: Vec<u8>,
    /// First unconsumed byte in `buf`.
    start: usize,
    /// Bytes after `start` already searched for a line feed, so partial heads and lines are
    /// not rescanned (or re-parsed by httparse) on every push.
    scanned: usize,
    state: State,
    eof: bool,
    /// The current head's bytes, copied so body bytes can be consumed and compacted away
    /// while [`head`](Self::head) stays valid.
    head_raw: Vec<u8>,
    spans: [Span; MAX_HEADERS],
    span_count: usize,
    status: u16,
    minor: u8,
    reason: (usize, usize),
    has_head: bool,
    keep_alive: bool,
    /// Decoded body bytes of the current response counted against the limit so far.
    body_seen: u64,
    /// Trailer bytes of the current chunked body so far.
    trailer_seen: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Length {
        remaining: u64,
    },
    ChunkSize,
    ChunkData {
        remaining: u64,
    },
    /// The CRLF after a chunk's data.
    ChunkDataEnd,
    Trailers,
    /// No length, not chunked: the body runs until the peer closes.
    ToClose,
    /// The body is complete; `End` comes next.
    End,
    /// Nothing more can be read on this connection.
    Closed,
}

/// What one attempt at the head produced.
enum HeadStep {
    Wait,
    /// An interim 1xx head was consumed; try again.
    Skipped,
    Ready,
    Fail(HttpError),
}

/// What one attempt at a line produced: `Got(a, b)` is `buf[a..b]`, line feed excluded.
enum LineStep {
    Wait,
    TooLong,
    Got(usize, usize),
}

impl ResponseParser {
    /// A parser for a new connection.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            state: State::Head,
            eof: false,
            head_raw: Vec::new(),
            spans: [Span::default(); MAX_HEADERS],
            span_count: 0,
            status: 0,
            minor: 1,
            reason: (0, 0),
            has_head: false,
            keep_alive: false,
            body_seen: 0,
            trailer_seen: 0,
        }
    }

    /// Appends bytes read from the connection. Call [`next`](Self::next) until `None` before
    /// pushing more, or memory use grows by one read. Bytes pushed after [`eof`](Self::eof),
    /// an error or a final `End` are dropped.
    pub fn push(&mut self, data: &[u8]) {
        if self.eof || self.state == State::Closed {
            return;
        }
        if self.start > 0 {
            // Compact: consumed bytes are never needed again (the head lives in `head_raw`).
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// The peer closed the connection. A read-to-close body then ends; a partial head or a
    /// body cut short of its length yields [`HttpError::Truncated`] from [`next`](Self::next).
    pub fn eof(&mut self) {
        self.eof = true;
    }

    /// Forgets the connection: buffered bytes, the current response, end of stream and any
    /// error. Use it to reuse the parser on a new connection or to abandon a response.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.start = 0;
        self.scanned = 0;
        self.state = State::Head;
        self.eof = false;
        self.has_head = false;
        self.span_count = 0;
        self.body_seen = 0;
        self.trailer_seen = 0;
    }

    /// Changes the body cap, from the next call on, for the current response and later ones.
    /// A driver raises it after the head of a `text/event-stream` response.
    pub fn set_max_body_bytes(&mut self, max: u64) {
        self.limits.max_body_bytes = max;
    }

    /// Bytes buffered and not yet parsed.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The head of the current response, from its `Head` event until the next one or
    /// [`reset`](Self::reset).
    pub fn head(&self) -> Option<ResponseHead<'_>> {
        self.has_head.then(|| self.head_view())
    }

    /// The next event, or `None` when more input (or [`eof`](Self::eof)) is needed.
    // Not `Iterator::next`: each event borrows the parser, which an `Iterator` cannot express.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<ResponseEvent<'_>, HttpError>> {
        loop {
            match self.state {
                State::Closed => return None,
                State::Head => match self.parse_head() {
                    HeadStep::Wait => return None,
                    HeadStep::Skipped => continue,
                    HeadStep::Ready => return Some(Ok(ResponseEvent::Head(self.head_view()))),
                    HeadStep::Fail(e) => return Some(Err(self.fail(e))),
                },
                State::Length { remaining } => {
                    if self.body_seen.saturating_add(remaining) > self.limits.max_body_bytes {
                        return Some(Err(self.fail(HttpError::BodyTooLarge)));
                    }
                    let Some(n) = self.body_piece(remaining) else {
                        return self.wait_or_truncated();
                    };
                    self.body_seen += n as u64;
                    let remaining = remaining - n as u64;
                    self.state =
                        if remaining == 0 { State::End } else { State::Length { remaining } };
                    return Some(Ok(ResponseEvent::Body(self.take(n))));
                }
                State::ChunkData { remaining } => {
                    let Some(n) = self.body_piece(remaining) else {
                        return self.wait_or_truncated();
                    };
                    let remaining = remaining - n as u64;
                    self.state = if remaining == 0 {
                        State::ChunkDataEnd
                    } else {
                        State::ChunkData { remaining }
                    };
                    return Some(Ok(ResponseEvent::Body(self.take(n))));
                }
                State::ToClose => {
                    let room = self.limits.max_body_bytes.saturating_sub(self.body_seen);
                    if self.buffered() == 0 {
                        if !self.eof {
                            return None;
                        }
                        self.keep_alive = false;
                        self.state = State::End;
                        continue;
                    }
                    if room == 0 {
                        return Some(Err(self.fail(HttpError::BodyTooLarge)));
                    }
                    let n =
                        usize::try_from(room).map_or(self.buffered(), |r| r.min(self.buffered()));
                    self.body_seen += n as u64;
                    return Some(Ok(ResponseEvent::Body(self.take(n))));
                }
                State::ChunkSize => match self.take_line(MAX_CHUNK_LINE) {
                    LineStep::Wait => return self.wait_or_truncated(),
                    LineStep::TooLong => return Some(Err(self.fail(HttpError::BadChunk))),
                    LineStep::Got(a, b) => {
                        let Some(size) = parse_chunk_size(&self.buf[a..b]) else {
                            return Some(Err(self.fail(HttpError::BadChunk)));
                        };
                        if size == 0 {
                            self.trailer_seen = 0;
                            self.state = State::Trailers;
                            continue;
                        }
                        match self.body_seen.checked_add(size) {
                            Some(total) if total <= self.limits.max_body_bytes => {
                                self.body_seen = total;
                            }
                            _ => return Some(Err(self.fail(HttpError::BodyTooLarge))),
                        }
                        self.state = State::ChunkData { remaining: size };
                    }
                },
                State::ChunkDataEnd => {
                    let pending = &self.buf[self.start..];
                    match pending {
                        [b'\r', b'\n', ..] => {
                            self.start += 2;
                            self.state = State::ChunkSize;
                        }
                        [] | [b'\r'] => return self.wait_or_truncated(),
                        _ => return Some(Err(self.fail(HttpError::BadChunk))),
                    }
                }
                State::Trailers => {
                    let room = self.limits.max_head_bytes.saturating_sub(self.trailer_seen);
                    match self.take_line(room) {
                        LineStep::Wait => return self.wait_or_truncated(),
                        LineStep::TooLong => return Some(Err(self.fail(HttpError::HeadTooLarge))),
                        LineStep::Got(a, b) => {
                            self.trailer_seen += b - a + 1;
                            // Trailer fields are dropped: nothing in MCP uses them.
                            if matches!(self.buf[a..b], [] | [b'\r']) {
                                self.state = State::End;
                            }
                        }
                    }
                }
                State::End => {
                    let keep_alive = self.keep_alive;
                    self.body_seen = 0;
                    self.trailer_seen = 0;
                    if keep_alive {
                        self.state = State::Head;
                    } else {
                        self.close();
                    }
                    return Some(Ok(ResponseEvent::End { keep_alive }));
                }
            }
        }
    }

    /// Tries to parse a head from the buffered bytes.
    fn parse_head(&mut self) -> HeadStep {
        let pending = &self.buf[self.start..];
        if pending.is_empty() {
            // A close between responses is the normal end of a connection, not an error.
            return HeadStep::Wait;
        }
        let max = self.limits.max_head_bytes;
        let window = &pending[..pending.len().min(max)];
        let full = window.len() == max;
        // A head can only complete on a line feed: re-run httparse only when one arrived,
        // when the cap is reached or at end of stream. That bounds re-parsing to once per
        // head line instead of once per push.
        let new_line = window.get(self.scanned..).is_some_and(|fresh| fresh.contains(&b'\n'));
        self.scanned = window.len();
        if !(new_line || full || self.eof) {
            return HeadStep::Wait;
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let parsed = httparse::ParserConfig::default()
            // Lenient where browsers are: these never change where the head ends.
            .allow_spaces_after_header_name_in_responses(true)
            .allow_multiple_spaces_in_response_status_delimiters(true)
            .parse_response(&mut response, window);
        let len = match parsed {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if full => {
                return HeadStep::Fail(HttpError::HeadTooLarge)
            }
            Ok(httparse::Status::Partial) if self.eof => {
                if window.iter().all(|b| matches!(b, b'\r' | b'\n')) {
                    // Stray line ends after the last response, then a clean close.
                    self.close();
                    return HeadStep::Wait;
                }
                return HeadStep::Fail(HttpError::Truncated);
            }
            Ok(httparse::Status::Partial) => return HeadStep::Wait,
            Err(e) => return HeadStep::Fail(head_error(e)),
        };
        let (Some(status), Some(minor)) = (response.code, response.version) else {
            return HeadStep::Fail(HttpError::BadHead("incomplete status line"));
        };
        if (100..200).contains(&status) {
            // Interim responses (100 Continue, 103 Early Hints) carry no body: skip them.
            self.start += len;
            self.scanned = 0;
            return HeadStep::Skipped;
        }
        self.head_raw.clear();
        self.head_raw.extend_from_slice(&window[..len]);
        let mut count = 0;
        for (slot, h) in self.spans.iter_mut().zip(response.headers.iter()) {
            // httparse hands out slices of `window`; keep their positions, which are the
            // same in the copy, instead of the borrows.
            let (Some(name), Some(value)) =
                (range_in(window, h.name.as_bytes()), range_in(window, h.value))
            else {
                return HeadStep::Fail(HttpError::BadHead("header outside the head"));
            };
            *slot = Span { name, value };
            count += 1;
        }
        self.span_count = count;
        // httparse returns a static "" for a reason that is not UTF-8: treat that as empty.
        self.reason =
            response.reason.and_then(|r| range_in(window, r.as_bytes())).unwrap_or((0, 0));
        self.status = status;
        self.minor = minor;
        self.has_head = true;
        self.start += len;
        self.scanned = 0;
        self.body_seen = 0;
        match framing(&self.head_view()) {
            Ok((state, keep_alive)) => {
                self.state = state;
                self.keep_alive = keep_alive;
                HeadStep::Ready
            }
            Err(e) => HeadStep::Fail(e),
        }
    }

    fn head_view(&self) -> ResponseHead<'_> {
        let reason = self.head_raw.get(self.reason.0..self.reason.1).unwrap_or_default();
        ResponseHead {
            status: self.status,
            minor: self.minor,
            reason: std::str::from_utf8(reason).unwrap_or(""),
            raw: &self.head_raw,
            spans: &self.spans[..self.span_count],
        }
    }

    /// How many body bytes to hand out next, at most `remaining`; `None` if none are buffered.
    fn body_piece(&self, remaining: u64) -> Option<usize> {
        let available = self.buffered();
        if available == 0 {
            return None;
        }
        Some(usize::try_from(remaining).map_or(available, |r| r.min(available)))
    }

    /// Consumes `n` buffered bytes and returns them.
    fn take(&mut self, n: usize) -> &[u8] {
        let from = self.start;
        self.start += n;
        &self.buf[from..from + n]
    }

    /// Takes the next line if it ends (with its line feed) within `cap` bytes.
    fn take_line(&mut self, cap: usize) -> LineStep {
        let pending = &self.buf[self.start..];
        let window = &pending[..pending.len().min(cap)];
        let fresh = window.get(self.scanned..).unwrap_or_default();
        if let Some(i) = fresh.iter().position(|&b| b == b'\n') {
            let end = self.start + self.scanned + i;
            let line = (self.start, end);
            self.start = end + 1;
            self.scanned = 0;
            return LineStep::Got(line.0, line.1);
        }
        self.scanned = window.len();
        if window.len() == cap {
            LineStep::TooLong
        } else {
            LineStep::Wait
        }
    }

    /// `None` while the peer may still send; [`HttpError::Truncated`] once it has closed.
    fn wait_or_truncated(&mut self) -> Option<Result<ResponseEvent<'_>, HttpError>> {
        if self.eof {
            Some(Err(self.fail(HttpError::Truncated)))
        } else {
            None
        }
    }

    fn fail(&mut self, e: HttpError) -> HttpError {
        self.close();
        e
    }

    /// Nothing more is read on this connection; drop what is buffered.
    fn close(&mut self) {
        self.state = State::Closed;
        self.buf.clear();
        self.start = 0;
        self.scanned = 0;
    }
}

/// Picks the body framing of a final response, and whether the connection may carry
/// another one (RFC 9112 6.3 and 9.3).
fn framing(head: &ResponseHead<'_>) -> Result<(State, bool), HttpError> {
    let close = has_token(head, "connection", "close");
    let keep_alive = if head.minor == 0 {
        !close && has_token(head, "connection", "keep-alive")
    } else {
        !close
    };
    if matches!(head.status, 204 | 304) {
        return Ok((State::End, keep_alive));
    }
    let mut last_coding: Option<&[u8]> = None;
    for (_, value) in head.headers().filter(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding")) {
        last_coding = list_items(value).last().or(last_coding);
    }
    let content_length = content_length(head);
    if let Some(coding) = last_coding {
        // Transfer-Encoding overrides Content-Length. An HTTP/1.0 message with it has faulty
        // framing, and a final coding other than chunked is delimited by the close.
        if head.minor == 0 || !coding.eq_ignore_ascii_case(b"chunked") {
            return Ok((State::ToClose, false));
        }
        // A message with both might be an attempt at response splitting: read it, but do
        // not reuse the connection.
        return Ok((State::ChunkSize, keep_alive && matches!(content_length, Ok(None))));
    }
    match content_length? {
        Some(0) => Ok((State::End, keep_alive)),
        Some(n) => Ok((State::Length { remaining: n }, keep_alive)),
        None => Ok((State::ToClose, false)),
    }
}

/// Maps httparse's error to ours, so its type stays inside this file.
fn head_error(e: httparse::Error) -> HttpError {
    match e {
        httparse::Error::TooManyHeaders => HttpError::TooManyHeaders,
        httparse::Error::HeaderName => HttpError::BadHead("invalid header name"),
        httparse::Error::HeaderValue => HttpError::BadHead("invalid header value"),
        httparse::Error::NewLine => HttpError::BadHead("invalid line ending"),
        httparse::Error::Status => HttpError::BadHead("invalid status"),
        httparse::Error::Token => HttpError::BadHead("invalid token"),
        httparse::Error::Version => HttpError::BadHead("invalid HTTP version"),
    }
}

/// The byte range `part` occupies inside `whole`, if it is a subslice of it.
fn range_in(whole: &[u8], part: &[u8]) -> Option<(usize, usize)> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some((start, end))
}

/// `Content-Length` from every copy of the header; copies and list members must agree
/// (RFC 9110 8.6 allows `5, 5`).
fn content_length(head: &ResponseHead<'_>) -> Result<Option<u64>, HttpError> {
    let mut found = None;
    for (_, value) in head.headers().filter(|(n, _)| n.eq_ignore_ascii_case("content-length")) {
        for member in value.split(|&b| b == b',') {
            let n = parse_decimal(trim_ows(member)).ok_or(HttpError::BadContentLength)?;
            if found.is_some_and(|f| f != n) {
                return Err(HttpError::BadContentLength);
            }
            found = Some(n);
        }
    }
    Ok(found)
}

fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        let d = (b as char).to_digit(10)?;
        n.checked_mul(10)?.checked_add(u64::from(d))
    })
}

/// Parses `1*HEXDIG [ BWS ";" chunk-ext ] CR` (the line feed is already cut off).
/// Extensions are skipped but may not hold control characters, so a stray CR or NUL in the
/// framing is an error rather than something two parsers could read differently.
fn parse_chunk_size(line: &[u8]) -> Option<u64> {
    let line = line.strip_suffix(b"\r")?;
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > 16 {
        return None;
    }
    let mut size = 0u64;
    for &b in &line[..digits] {
        // 16 hex digits always fit in a u64.
        size = (size << 4) | u64::from((b as char).to_digit(16)?);
    }
    let rest = &line[digits..];
    let ext = trim_ows_start(rest);
    if !ext.is_empty() && ext[0] != b';' {
        return None;
    }
    if ext.iter().any(|&b| b != b'\t' && (b < 0x20 || b == 0x7f)) {
        return None;
    }
    Some(size)
}

/// Whether any `name` header's comma-separated list holds `token` (case-insensitive).
fn has_token(head: &ResponseHead<'_>, name: &str, token: &str) -> bool {
    head.headers()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .any(|(_, v)| list_items(v).any(|item| item.eq_ignore_ascii_case(token.as_bytes())))
}

/// The non-empty members of a comma-separated header list, trimmed.
fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim_ows).filter(|item| !item.is_empty())
}

fn trim_ows(s: &[u8]) -> &[u8] {
    let s = trim_ows_start(s);
    let end = s.iter().rposition(|&b| b != b' ' && b != b'\t').map_or(0, |i| i + 1);
    &s[..end]
}

fn trim_ows_start(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(s.len());
    &s[start..]
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// Visible ASCII, no space.
fn is_vchar(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

fn decimal_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

/// Writes `n` in decimal without going through `fmt` (which would need an error path).
fn push_decimal(out: &mut Vec<u8>, mut n: usize) {
    // 20 digits hold any u64, so any usize this code runs on.
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// The auth-params of the `Bearer` challenge in a `WWW-Authenticate` header (RFC 6750 3,
/// RFC 9728 5.1), as an MCP client needs them after a 401 or 403.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    /// `resource_metadata`: the URL of the Protected Resource Metadata document.
    pub resource_metadata: Option<String>,
    /// `scope`: space-separated scopes the resource wants.
    pub scope: Option<String>,
    /// `error`, for example `invalid_token` or `insufficient_scope`.
    pub error: Option<String>,
    /// `error_description`: human-readable text.
    pub error_description: Option<String>,
}

/// Finds the `Bearer` challenge in one `WWW-Authenticate` value and reads its parameters.
///
/// Returns `None` when the value holds no `Bearer` challenge. Scheme and parameter names are
/// case-insensitive; values may be tokens or quoted strings; the first copy of a parameter
/// wins. Junk is skipped rather than refused: this runs on an error path, where a partial
/// answer beats none. A response may carry several `WWW-Authenticate` headers: try each.
pub fn parse_www_authenticate(value: &[u8]) -> Option<BearerChallenge> {
    let mut found: Option<BearerChallenge> = None;
    let mut in_bearer = false;
    let mut pos = 0;
    loop {
        while pos < value.len() && matches!(value[pos], b' ' | b'\t' | b',') {
            pos += 1;
        }
        if pos >= value.len() {
            return found;
        }
        let name_end = pos + value[pos..].iter().take_while(|&&b| is_tchar(b)).count();
        if name_end == pos {
            // Not a token: skip one byte, or a whole quoted string so its commas and spaces
            // are not misread.
            pos = if value[pos] == b'"' { quoted(value, pos).1 } else { pos + 1 };
            continue;
        }
        let name = &value[pos..name_end];
        pos = name_end;
        let after_ws =
            pos + value[pos..].iter().take_while(|&&b| matches!(b, b' ' | b'\t')).count();
        if value.get(after_ws) != Some(&b'=') {
            // A token not followed by `=` starts a new challenge.
            in_bearer = name.eq_ignore_ascii_case(b"bearer");
            if in_bearer && found.is_none() {
                found = Some(BearerChallenge::default());
            }
            continue;
        }
        pos = after_ws + 1;
        while pos < value.len() && matches!(value[pos], b' ' | b'\t') {
            pos += 1;
        }
        let param = match value.get(pos) {
            Some(b'"') => {
                let (text, end) = quoted(value, pos);
                pos = end;
                text
            }
            // A token68 (`Bearer abc==`) ends in `=` padding: nothing to read.
            None | Some(b'=' | b',') => continue,
            Some(_) => {
                // Be lenient about unquoted values: read to the next separator, so an
                // unquoted URL still comes through whole.
                let end = pos
                    + value[pos..]
                        .iter()
                        .take_while(|&&b| !matches!(b, b',' | b' ' | b'\t' | b'"'))
                        .count();
                let text = String::from_utf8_lossy(&value[pos..end]).into_owned();
                pos = end;
                text
            }
        };
        let Some(challenge) = found.as_mut().filter(|_| in_bearer) else {
            continue;
        };
        let slot = match name.to_ascii_lowercase().as_slice() {
            b"resource_metadata" => &mut challenge.resource_metadata,
            b"scope" => &mut challenge.scope,
            b"error" => &mut challenge.error,
            b"error_description" => &mut challenge.error_description,
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(param);
        }
    }
}

/// Reads the quoted string opening at `value[open]` (a `"`), undoing `\` escapes. Returns
/// the text and the position after the closing quote (or the end, if it is missing).
fn quoted(value: &[u8], open: usize) -> (String, usize) {
    let mut text = Vec::new();
    let mut pos = open + 1;
    while let Some(&b) = value.get(pos) {
        pos += 1;
        match b {
            b'"' => break,
            b'\\' => {
                if let Some(&escaped) = value.get(pos) {
                    text.push(escaped);
                    pos += 1;
                }
            }
            _ => text.push(b),
        }
    }
    (String::from_utf8_lossy(&text).into_owned(), pos)
}
