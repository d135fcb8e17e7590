//! The JSON-RPC 2.0 envelope: decoding that borrows from the frame, and generation-tagged ids.
//!
//! Decoding never allocates for a well-formed message whose `method` needs no unescaping:
//! `result`, `params`, `error.data` and `id` stay [`RawJson`] slices of the input frame, which
//! [`json::parse`] validated once.

use std::borrow::Cow;
use std::fmt;

use crate::proto::json::{self, Kind, RawJson, Visitor, SKIP};
use crate::proto::mcp::Method;

/// A wire id: a pending-table slot and that slot's generation, packed into one integer.
///
/// The packing keeps the value below 2^53 so JavaScript peers, which read JSON numbers as
/// doubles, echo it back exactly. A late or forged id names a generation the slot no longer
/// holds, so it can never complete the wrong call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WireId(u64);

const SLOT_BITS: u32 = 20;
const GEN_BITS: u32 = 32;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

impl WireId {
    /// The slots an id can name.
    pub(crate) const SLOTS: usize = 1 << SLOT_BITS;

    pub(crate) fn new(slot: usize, generation: u32) -> Self {
        debug_assert!((slot as u64) <= SLOT_MASK);
        Self(((generation as u64) << SLOT_BITS) | (slot as u64 & SLOT_MASK))
    }

    pub(crate) fn slot(self) -> usize {
        (self.0 & SLOT_MASK) as usize
    }

    pub(crate) fn generation(self) -> u32 {
        ((self.0 >> SLOT_BITS) & GEN_MASK) as u32
    }

    /// The integer sent on the wire.
    pub fn get(self) -> u64 {
        self.0
    }

    /// Reads an id the server echoed. Integers are what mcpoll sends; a string of digits is
    /// accepted too, since some peers stringify ids.
    pub fn parse(raw: RawJson<'_>) -> Option<Self> {
        let s = raw.text();
        let digits = s.strip_prefix('"').and_then(|s| s.strip_suffix('"')).unwrap_or(s);
        if digits.is_empty() || digits.len() > 16 {
            return None;
        }
        // One pass that checks and adds each digit. At most 16 digits (checked above), so this
        // cannot overflow.
        let mut v = 0u64;
        for d in digits.bytes() {
            let digit = d.wrapping_sub(b'0');
            if digit > 9 {
                return None;
            }
            v = v * 10 + u64::from(digit);
        }
        (v >> (SLOT_BITS + GEN_BITS) == 0).then_some(Self(v))
    }
}

impl fmt::Display for WireId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One decoded JSON-RPC message, borrowing from its frame.
#[derive(Debug)]
pub enum Message<'a> {
    /// A request from the server (legacy servers only: `ping`, `roots/list`, ...).
    Request {
        /// The id exactly as sent, to echo back.
        id: RawJson<'a>,
        /// The method name.
        method: Cow<'a, str>,
        /// The params, if any.
        params: Option<RawJson<'a>>,
    },
    /// A notification (no id).
    Notification {
        /// The method name.
        method: Cow<'a, str>,
        /// The params, if any.
        params: Option<RawJson<'a>>,
    },
    /// A successful response.
    Result {
        /// The id as sent.
        id: RawJson<'a>,
        /// The result object.
        result: RawJson<'a>,
        /// The result's members that decide how a call ends, read on the same pass.
        head: ResultHead<'a>,
    },
    /// An error response; `id` is `None` when the server could not read ours (`"id": null`).
    Error {
        /// The id as sent, if any.
        id: Option<RawJson<'a>>,
        /// The error object.
        error: ErrorObject<'a>,
    },
}

/// The `error` member of an error response.
#[derive(Debug)]
pub struct ErrorObject<'a> {
    /// The error code.
    pub code: i64,
    /// The message.
    pub message: Cow<'a, str>,
    /// The optional data member.
    pub data: Option<RawJson<'a>>,
}

/// The members of a result object that decide how a call ends (the first of each name), read
/// while the frame is validated so the hot path never walks the result a second time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResultHead<'a> {
    /// `resultType` (MCP 2026-07-28), if present.
    pub result_type: Option<RawJson<'a>>,
    /// `isError` (tool results), if present.
    pub is_error: Option<RawJson<'a>>,
}

impl<'a> ResultHead<'a> {
    /// Reads the head of a result that was not decoded here, walking its members.
    pub fn of(result: RawJson<'a>) -> Self {
        let mut head = Self::default();
        for (key, value) in result.members() {
            head.take(key.raw(), value);
        }
        head
    }

    /// Keeps `value` if `key` names a head member not seen yet.
    fn take(&mut self, key: &str, value: RawJson<'a>) {
        let slot = match key {
            "resultType" => &mut self.result_type,
            "isError" => &mut self.is_error,
            _ => return,
        };
        slot.get_or_insert(value);
    }
}

/// Why a frame is not a JSON-RPC message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// Not JSON, or not a JSON object.
    NotJson,
    /// JSON nested deeper than the parser's limit (127 levels): maybe a valid message, but
    /// one mcpoll does not read.
    TooDeep,
    /// `jsonrpc` is missing or not `"2.0"`.
    BadVersion,
    /// A JSON array: batches are not allowed in either revision.
    Batch,
    /// The members do not form a request, notification or response.
    BadShape,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotJson => "not a JSON object",
            Self::TooDeep => "JSON nested more than 127 levels deep",
            Self::BadVersion => "jsonrpc member is not \"2.0\"",
            Self::Batch => "JSON-RPC batches are not allowed",
            Self::BadShape => "not a request, notification or response",
        })
    }
}

impl std::error::Error for DecodeError {}

/// The envelope's members, each the first of its name, and the members of its first `result`
/// and `error` that decoding needs, each in the slot [`Envelope::slot`] names.
#[derive(Default)]
struct Envelope<'a>([Option<RawJson<'a>>; SLOTS]);

// The envelope's slots.
const JSONRPC: u8 = 0;
const ID: u8 = 1;
const METHOD: u8 = 2;
const PARAMS: u8 = 3;
const RESULT: u8 = 4;
const ERROR: u8 = 5;
const RESULT_TYPE: u8 = 6;
const IS_ERROR: u8 = 7;
const CODE: u8 = 8;
const MESSAGE: u8 = 9;
const DATA: u8 = 10;
const SLOTS: usize = 11;

impl<'a> Envelope<'a> {
    fn get(&self, slot: u8) -> Option<RawJson<'a>> {
        self.0.get(usize::from(slot)).copied().flatten()
    }
}

impl<'a> Visitor<'a> for Envelope<'a> {
    // Inlined into the scanner's key step: called for every key of the envelope and of the
    // result, it was a call of its own (139 instructions per stdio call, callgrind.sh).
    #[inline(always)]
    fn slot(&mut self, parent: Option<u8>, key: &[u8]) -> u8 {
        match parent {
            None => match key {
                b"jsonrpc" => JSONRPC,
                b"id" => ID,
                b"method" => METHOD,
                b"params" => PARAMS,
                b"result" => RESULT,
                b"error" => ERROR,
                _ => SKIP,
            },
            // A nested member is reported before the member holding it, so while `result` is
            // still unset these belong to the first `result`.
            Some(RESULT) if self.get(RESULT).is_none() => match key {
                b"resultType" => RESULT_TYPE,
                b"isError" => IS_ERROR,
                _ => SKIP,
            },
            Some(ERROR) if self.get(ERROR).is_none() => match key {
                b"code" => CODE,
                b"message" => MESSAGE,
                b"data" => DATA,
                _ => SKIP,
            },
            Some(_) => SKIP,
        }
    }

    fn value(&mut self, slot: u8, value: RawJson<'a>) {
        if let Some(kept) = self.0.get_mut(usize::from(slot)) {
            kept.get_or_insert(value);
        }
    }
}

/// Decodes one frame without allocating (unless a method name or message carries escapes).
/// Never panics, whatever the bytes.
///
/// One validating pass reads the envelope, the result's head and the error's members; nothing
/// walks the frame again.
pub fn decode(frame: &[u8]) -> Result<Message<'_>, DecodeError> {
    let mut env = Envelope::default();
    let value = json::parse_visit(frame, &mut env).map_err(|e| match e {
        json::JsonError::TooDeep => DecodeError::TooDeep,
        _ => DecodeError::NotJson,
    })?;
    match value.kind() {
        Kind::Object => {}
        Kind::Array => return Err(DecodeError::Batch),
        _ => return Err(DecodeError::NotJson),
    }
    // The plain spelling first: unescaping is for the rare peer that escapes it.
    let jsonrpc = env.get(JSONRPC);
    let version = jsonrpc.filter(|v| v.text() != r#""2.0""#);
    if version.is_some_and(|v| v.as_str().as_deref() != Some("2.0")) || jsonrpc.is_none() {
        return Err(DecodeError::BadVersion);
    }
    // `"id": null` is the "id could not be read" case: treat it as absent.
    let id = env.get(ID).filter(|v| !v.is_null());
    let method = match env.get(METHOD) {
        Some(m) => Some(m.as_str().ok_or(DecodeError::BadShape)?),
        None => None,
    };
    let params = env.get(PARAMS);
    // Serializers that write every field of a response type (Kotlin's, by default) send the
    // member that does not apply as `null`: `"result": {...}, "error": null`.
    let (result, error) = match (env.get(RESULT), env.get(ERROR)) {
        (Some(r), Some(e)) if e.is_null() && !r.is_null() => (Some(r), None),
        (Some(r), Some(e)) if r.is_null() && !e.is_null() => (None, Some(e)),
        pair => pair,
    };
    match (method, result, error) {
        (Some(method), None, None) => Ok(match id {
            Some(id) => Message::Request { id, method, params },
            None => Message::Notification { method, params },
        }),
        (None, Some(result), None) => match id {
            Some(id) => {
                let head =
                    ResultHead { result_type: env.get(RESULT_TYPE), is_error: env.get(IS_ERROR) };
                Ok(Message::Result { id, result, head })
            }
            None => Err(DecodeError::BadShape),
        },
        (None, None, Some(error)) => {
            if error.kind() != Kind::Object {
                return Err(DecodeError::BadShape);
            }
            let code = env.get(CODE).and_then(RawJson::as_i64).ok_or(DecodeError::BadShape)?;
            let message = env.get(MESSAGE).and_then(RawJson::as_str).unwrap_or_default();
            Ok(Message::Error { id, error: ErrorObject { code, message, data: env.get(DATA) } })
        }
        _ => Err(DecodeError::BadShape),
    }
}

/// Writes a JSON string literal (with escapes) into `out`; never allocates beyond `out`.
pub(crate) fn write_json_str(out: &mut Vec<u8>, s: &str) {
    // Method and tool names need no escapes: copy those as they are. serde_json escapes exactly
    // the quote, the backslash and the control characters, so both paths write the same bytes.
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return;
    }
    // SAFETY-style note: serializing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Writes an unsigned integer in decimal into `out`.
pub(crate) fn write_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// A request's method, as [`write_request`] writes it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum MethodName<'a> {
    /// One of the crate's own methods: none holds a character JSON escapes (a test checks them
    /// all), so its name is copied without looking for one.
    Core(Method),
    /// Any other name (an extension's), escaped where it needs it.
    Other(&'a str),
}

/// Appends a request: `{"jsonrpc":"2.0","id":<id>,"method":<method>,"params":{..}}`.
/// `params` are the members inside the params object; each part of `meta` (already-encoded
/// members) joins one `_meta` object, which is left out when every part is empty.
pub(crate) fn write_request(
    out: &mut Vec<u8>,
    id: u64,
    method: MethodName<'_>,
    params: &[u8],
    meta: [&[u8]; 2],
) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    write_u64(out, id);
    match method {
        MethodName::Core(m) => out.extend_from_slice(m.request_middle().as_bytes()),
        MethodName::Other(name) => {
            out.extend_from_slice(b",\"method\":");
            write_json_str(out, name);
            out.extend_from_slice(b",\"params\":{");
        }
    }
    out.extend_from_slice(params);
    let mut parts = meta.iter().filter(|m| !m.is_empty());
    if let Some(first) = parts.next() {
        if !params.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(b"\"_meta\":{");
        out.extend_from_slice(first);
        for part in parts {
            out.push(b',');
            out.extend_from_slice(part);
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"}}");
}

/// Appends a notification; `params` are the members inside the params object, or `None` for
/// a notification without params.
pub(crate) fn write_notification(out: &mut Vec<u8>, method: &str, params: Option<&[u8]>) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
    write_json_str(out, method);
    if let Some(p) = params {
        out.extend_from_slice(b",\"params\":{");
        out.extend_from_slice(p);
        out.push(b'}');
    }
    out.push(b'}');
}

/// Appends a response to a server request: `{"jsonrpc":"2.0","id":<id>,"result":<result>}`.
pub(crate) fn write_result(out: &mut Vec<u8>, id: &str, result: &str) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(result.as_bytes());
    out.push(b'}');
}

/// Appends an error response to a server request.
pub(crate) fn write_error(out: &mut Vec<u8>, id: &str, code: i64, message: &str) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"error\":{\"code\":");
    use std::io::Write;
    let _ = write!(out, "{code}");
    out.extend_from_slice(b",\"message\":");
    write_json_str(out, message);
    out.extend_from_slice(b"}}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_notifications_encode_as_json_rpc() {
        let mut out = Vec::new();
        write_request(
            &mut out,
            7,
            MethodName::Core(Method::ToolsCall),
            br#""name":"x""#,
            [b"", b""],
        );
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}"#);
        out.clear();
        write_request(
            &mut out,
            8,
            MethodName::Core(Method::ToolsList),
            b"",
            [br#""a":1"#, br#""b":2"#],
        );
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"a":1,"b":2}}}"#
        );
        out.clear();
        write_request(&mut out, 9, MethodName::Other("x"), br#""k":1"#, [b"", br#""b":2"#]);
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0","id":9,"method":"x","params":{"k":1,"_meta":{"b":2}}}"#
        );
        out.clear();
        write_notification(&mut out, "notifications/initialized", None);
        assert_eq!(out, br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        out.clear();
        write_notification(&mut out, "notifications/cancelled", Some(br#""requestId":3"#));
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#
        );
    }

    fn raw(s: &str) -> RawJson<'_> {
        json::parse(s.as_bytes()).unwrap()
    }

    /// Kotlin SDK servers (kotlinx.serialization with explicit nulls) write the member that
    /// does not apply as `null`: the other one is the answer. Both null, or both set, is no
    /// response.
    #[test]
    fn a_null_result_or_error_beside_the_other_is_absent() {
        let ok = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true},"error":null}"#;
        match decode(ok) {
            Ok(Message::Result { id, result, head }) => {
                assert_eq!(id.as_i64(), Some(1));
                assert_eq!(result.text(), r#"{"content":[],"isError":true}"#);
                assert_eq!(head.is_error.map(|v| v.text()), Some("true"));
            }
            other => panic!("{other:?}"),
        }
        let failed =
            br#"{"jsonrpc":"2.0","id":2,"result":null,"error":{"code":-32602,"message":"m"}}"#;
        match decode(failed) {
            Ok(Message::Error { error, .. }) => {
                assert_eq!((error.code, &*error.message), (-32602, "m"))
            }
            other => panic!("{other:?}"),
        }
        let neither = br#"{"jsonrpc":"2.0","id":3,"result":null,"error":null}"#;
        assert!(matches!(decode(neither), Err(DecodeError::BadShape)));
        let both = br#"{"jsonrpc":"2.0","id":4,"result":{},"error":{"code":1,"message":""}}"#;
        assert!(matches!(decode(both), Err(DecodeError::BadShape)));
    }

    /// The crate's own method names are written without an escape check: none may need one.
    #[test]
    fn core_method_names_need_no_escapes() {
        for m in Method::CORE {
            let mut core = Vec::new();
            write_request(&mut core, 1, MethodName::Core(m), b"", [b"", b""]);
            let mut escaped = Vec::new();
            write_request(&mut escaped, 1, MethodName::Other(m.as_str()), b"", [b"", b""]);
            assert_eq!(core, escaped, "{m:?}");
        }
        let mut out = Vec::new();
        write_request(&mut out, 2, MethodName::Other("a\"b"), b"", [b"", b""]);
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":2,"method":"a\"b","params":{}}"#);
    }

    #[test]
    fn writes_strings_like_serde_json() {
        let cases = ["", "tools/call", "é ✓ \u{7f}", "a\"b", "a\\b", "\n", "\u{1}x", "\u{1f}"];
        for s in cases {
            let mut out = Vec::new();
            write_json_str(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn writes_integers_like_display() {
        for v in [
            0,
            7,
            9,
            10,
            11,
            99,
            100,
            101,
            999,
            1000,
            12_345,
            4_503_599_627_370_495,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut out = b"x".to_vec();
            write_u64(&mut out, v);
            assert_eq!(out, format!("x{v}").into_bytes());
        }
    }

    #[test]
    fn wire_ids_round_trip_and_stay_below_2_pow_53() {
        let id = WireId::new((1 << 20) - 1, u32::MAX);
        assert!(id.get() < (1 << 53));
        assert_eq!(id.slot(), (1 << 20) - 1);
        assert_eq!(id.generation(), u32::MAX);
        assert_eq!(WireId::parse(raw(&id.get().to_string())), Some(id));
        assert_eq!(WireId::parse(raw(&format!("\"{}\"", id.get()))), Some(id));
        // The bytes either side of the digits, `/` and `:`, are not digits.
        let neighbours = ["\"1/2\"", "\"12:4\"", "\"/\"", "\":\"", "\"12a\""];
        for bad in ["-1", "1.5", "null", "\"x\"", "1e3", "9007199254740993", "\"\""]
            .into_iter()
            .chain(neighbours)
        {
            assert_eq!(WireId::parse(raw(bad)), None, "{bad}");
        }
    }

    #[test]
    fn decodes_each_message_kind() {
        let m = decode(br#"{"jsonrpc":"2.0","id":7,"result":{"a":1}}"#).unwrap();
        assert!(
            matches!(m, Message::Result { id, result, .. } if id.text() == "7" && result.text() == r#"{"a":1}"#)
        );
        let m = decode(br#"{"result":{},"id":"x","jsonrpc":"2.0"}"#).unwrap();
        assert!(matches!(m, Message::Result { .. }));
        let m = decode(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"m"}}"#);
        assert!(matches!(m, Ok(Message::Error { id: None, error }) if error.code == -32000));
        let m = decode(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x","data":[1]}}"#);
        assert!(
            matches!(m, Ok(Message::Error { id: Some(_), error }) if error.data.unwrap().text() == "[1]")
        );
        let m = decode(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#);
        assert!(
            matches!(m, Ok(Message::Notification { method, .. }) if method == "notifications/progress")
        );
        let m = decode(br#"{"jsonrpc":"2.0","id":"p1","method":"ping"}"#);
        assert!(matches!(m, Ok(Message::Request { method, params: None, .. }) if method == "ping"));
        let m = decode(br#"{"jsonrpc":"2.0","method":"a\/b"}"#);
        assert!(matches!(m, Ok(Message::Notification { method, .. }) if method == "a/b"));
    }

    /// The head and error members read on the decode's one pass are the first of each name in
    /// the first `result` or `error`, exactly what a second walk finds.
    #[test]
    fn one_pass_reads_the_first_result_and_error_members() {
        let head = |frame: &'static str| match decode(frame.as_bytes()) {
            Ok(Message::Result { result, head, .. }) => {
                assert_eq!(head, ResultHead::of(result), "{frame}");
                (head.result_type.map(RawJson::text), head.is_error.map(RawJson::text))
            }
            other => panic!("{frame}: {other:?}"),
        };
        let r = |rest: &str| format!(r#"{{"jsonrpc":"2.0","id":1,{rest}}}"#).leak() as &str;
        assert_eq!(head(r(r#""result":{"content":[],"isError":false}"#)), (None, Some("false")));
        assert_eq!(
            head(r(r#""result":{"resultType":"x","isError":true,"isError":false}"#)),
            (Some(r#""x""#), Some("true"))
        );
        // Only the first `result` counts, and only its own members.
        assert_eq!(
            head(r(r#""result":{"isError":true},"result":{"isError":false}"#)).1,
            Some("true")
        );
        assert_eq!(head(r(r#""result":5,"result":{"isError":true}"#)), (None, None));
        assert_eq!(
            head(r(r#""result":{"a":{"isError":true}},"b":{"isError":true}"#)),
            (None, None)
        );
        assert_eq!(head(r(r#""result":[{"isError":true}]"#)), (None, None));
        let error = |rest: &str| match decode(r(rest).as_bytes()) {
            Ok(Message::Error { error, .. }) => {
                (error.code, error.message.into_owned(), error.data.map(|d| d.text().to_owned()))
            }
            other => panic!("{rest}: {other:?}"),
        };
        assert_eq!(
            error(r#""error":{"data":2,"message":"m","code":-1,"code":-2,"data":3}"#),
            (-1, "m".to_owned(), Some("2".to_owned()))
        );
        assert_eq!(error(r#""error":{"code":1},"error":{"code":2,"message":"n"}"#).0, 1);
        assert_eq!(
            decode(r(r#""error":{"message":"no code"},"error":{"code":2}"#).as_bytes())
                .unwrap_err(),
            DecodeError::BadShape
        );
        assert_eq!(decode(r(r#""error":[1]"#).as_bytes()).unwrap_err(), DecodeError::BadShape);
    }

    #[test]
    fn rejects_what_is_not_a_message() {
        assert_eq!(decode(b"").unwrap_err(), DecodeError::NotJson);
        assert_eq!(decode(b"hello").unwrap_err(), DecodeError::NotJson);
        assert_eq!(decode(b"[]").unwrap_err(), DecodeError::Batch);
        assert_eq!(decode(br#"{"jsonrpc":"2.0","id":1"#).unwrap_err(), DecodeError::NotJson);
        assert_eq!(decode(br#"{"id":1,"result":{}}"#).unwrap_err(), DecodeError::BadVersion);
        assert_eq!(
            decode(br#"{"jsonrpc":"1.0","id":1,"result":{}}"#).unwrap_err(),
            DecodeError::BadVersion
        );
        assert_eq!(decode(br#"{"jsonrpc":"2.0","id":1}"#).unwrap_err(), DecodeError::BadShape);
        assert_eq!(decode(br#"{"jsonrpc":"2.0","result":{}}"#).unwrap_err(), DecodeError::BadShape);
        let both = br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}"#;
        assert_eq!(decode(both).unwrap_err(), DecodeError::BadShape);
        assert_eq!(
            decode(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\xff}").unwrap_err(),
            DecodeError::NotJson
        );
    }

    #[test]
    fn writes_replies_to_server_requests() {
        let mut out = Vec::new();
        write_result(&mut out, "\"a\"", "{}");
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":"a","result":{}}"#);
        out.clear();
        write_error(&mut out, "4", -32601, "Method \"x\" not found");
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"Method \"x\" not found"}}"#);
    }
}
