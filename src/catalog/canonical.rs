//! The canonical text of a JSON value, so that equal content always hashes equal.
//!
//! Rules (the "mcpoll canonical form", version 1; changing any of them changes every hash):
//!
//! - No whitespace outside strings.
//! - Object members sorted by key, compared as UTF-8 bytes (which is Unicode code point order;
//!   RFC 8785 uses UTF-16 order instead, which differs only between U+E000..U+FFFF and
//!   characters above U+FFFF). A key given twice keeps its last value, as serde_json does, so
//!   the canonical form describes what every serde_json reader of the same text sees.
//! - Array order is kept: it is meaningful inside a value (`required`, `enum`, content).
//!   Ordering the items of a list is the job of [`super::listing`].
//! - Numbers are copied exactly as given (`1`, `1.0` and `1e0` stay different). Converting
//!   through `f64` would make the form depend on a float formatter's version.
//! - Strings are decoded, then written with the shortest escapes: `\"`, `\\`, `\b`, `\f`,
//!   `\n`, `\r`, `\t`, other controls below U+0020 as `\u00xx` (lowercase hex), and every
//!   other character as itself in UTF-8. `"\u0041"` and `"A"` are the same string.
//!
//! The parser is a small recursive descent over already-valid UTF-8 (`&str`) with a depth cap.
//! It builds a tree because sorting needs one; catalogs are not on the call hot path. Strings
//! without escapes are borrowed; escaped ones are decoded by serde_json.

use std::borrow::Cow;
use std::fmt;

/// Arrays and objects nested deeper than this are refused, so a hostile catalog cannot
/// exhaust the stack. Real tool schemas nest a few levels.
pub(crate) const MAX_DEPTH: usize = 128;

/// A parsed JSON value. Objects are kept sorted by key with unique keys.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    /// The number's text exactly as it appeared.
    Number(&'a str),
    String(Cow<'a, str>),
    Array(Vec<Value<'a>>),
    /// Sorted by key, keys unique (last one given wins).
    Object(Vec<(Cow<'a, str>, Value<'a>)>),
}

/// Why a text is not JSON this module accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CanonicalError {
    /// What went wrong.
    pub(crate) kind: CanonicalErrorKind,
    /// Byte offset in the input where it was noticed.
    pub(crate) offset: usize,
}

/// The kinds of [`CanonicalError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CanonicalErrorKind {
    UnexpectedEnd,
    UnexpectedByte,
    BadNumber,
    BadString,
    TooDeep,
    TrailingData,
}

impl fmt::Display for CanonicalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            CanonicalErrorKind::UnexpectedEnd => "unexpected end of JSON",
            CanonicalErrorKind::UnexpectedByte => "unexpected character in JSON",
            CanonicalErrorKind::BadNumber => "malformed JSON number",
            CanonicalErrorKind::BadString => "malformed JSON string",
            CanonicalErrorKind::TooDeep => "JSON nested too deeply",
            CanonicalErrorKind::TrailingData => "data after the JSON value",
        };
        write!(f, "{what} at byte {}", self.offset)
    }
}

impl std::error::Error for CanonicalError {}

/// Parses one JSON value (surrounding whitespace allowed).
pub(crate) fn parse(text: &str) -> Result<Value<'_>, CanonicalError> {
    let mut p = Parser { text, pos: 0 };
    let v = p.value(0)?;
    p.skip_ws();
    if p.pos != text.len() {
        return Err(p.err(CanonicalErrorKind::TrailingData));
    }
    Ok(v)
}

/// The canonical text of `text`, as a new string.
pub(crate) fn canonicalize(text: &str) -> Result<String, CanonicalError> {
    Ok(parse(text)?.to_canonical())
}

impl<'a> Value<'a> {
    /// The member `key` of an object (binary search: objects are sorted).
    pub(crate) fn get(&self, key: &str) -> Option<&Value<'a>> {
        match self {
            Value::Object(members) => members
                .binary_search_by(|(k, _)| k.as_ref().cmp(key))
                .ok()
                .and_then(|i| members.get(i))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The text of a string value.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The length in bytes of the canonical text, so it can be written into one allocation.
    pub(crate) fn canonical_len(&self) -> usize {
        match self {
            Value::Null => 4,
            Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => n.len(),
            Value::String(s) => string_len(s),
            Value::Array(items) => {
                2 + items.len().saturating_sub(1)
                    + items.iter().map(Value::canonical_len).sum::<usize>()
            }
            Value::Object(members) => {
                2 + members.len().saturating_sub(1)
                    + members
                        .iter()
                        .map(|(k, v)| string_len(k) + 1 + v.canonical_len())
                        .sum::<usize>()
            }
        }
    }

    /// The canonical text as a new string of exactly the right size.
    pub(crate) fn to_canonical(&self) -> String {
        let mut out = String::with_capacity(self.canonical_len());
        self.write_canonical(&mut out);
        out
    }

    /// Appends this value's canonical text to `out`.
    pub(crate) fn write_canonical(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(true) => out.push_str("true"),
            Value::Bool(false) => out.push_str("false"),
            Value::Number(n) => out.push_str(n),
            Value::String(s) => write_string(s, out),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_canonical(out);
                }
                out.push(']');
            }
            Value::Object(members) => {
                out.push('{');
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(k, out);
                    out.push(':');
                    v.write_canonical(out);
                }
                out.push('}');
            }
        }
    }
}

/// The length of `s` as [`write_string`] writes it.
fn string_len(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\u{08}' | '\u{0c}' | '\n' | '\r' | '\t' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let esc = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\u{08}' => "\\b",
            '\u{0c}' => "\\f",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            c if (c as u32) < 0x20 => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let b = c as u32 as usize;
            out.push_str("\\u00");
            out.push(char::from(HEX[b >> 4]));
            out.push(char::from(HEX[b & 0xf]));
        } else {
            out.push_str(esc);
        }
        start = i + c.len_utf8();
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Removes all but the last element of each run of `same` neighbours, in place.
pub(crate) fn keep_last_of_runs<T>(v: &mut Vec<T>, same: impl Fn(&T, &T) -> bool) {
    // `dedup_by` hands (later, kept earlier) and drops the later one; swapping first keeps
    // the later value in the earlier slot.
    v.dedup_by(|later, kept| {
        if same(later, kept) {
            std::mem::swap(later, kept);
            true
        } else {
            false
        }
    });
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, kind: CanonicalErrorKind) -> CanonicalError {
        CanonicalError { kind, offset: self.pos }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect_literal(&mut self, lit: &str) -> Result<(), CanonicalError> {
        if self.text.as_bytes()[self.pos..].starts_with(lit.as_bytes()) {
            self.pos += lit.len();
            Ok(())
        } else {
            Err(self.err(CanonicalErrorKind::UnexpectedByte))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value<'a>, CanonicalError> {
        self.skip_ws();
        match self.peek() {
            None => Err(self.err(CanonicalErrorKind::UnexpectedEnd)),
            Some(b'n') => self.expect_literal("null").map(|()| Value::Null),
            Some(b't') => self.expect_literal("true").map(|()| Value::Bool(true)),
            Some(b'f') => self.expect_literal("false").map(|()| Value::Bool(false)),
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number().map(Value::Number),
            Some(b'[') => self.array(depth + 1),
            Some(b'{') => self.object(depth + 1),
            Some(_) => Err(self.err(CanonicalErrorKind::UnexpectedByte)),
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value<'a>, CanonicalError> {
        if depth > MAX_DEPTH {
            return Err(self.err(CanonicalErrorKind::TooDeep));
        }
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                None => return Err(self.err(CanonicalErrorKind::UnexpectedEnd)),
                Some(_) => return Err(self.err(CanonicalErrorKind::UnexpectedByte)),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value<'a>, CanonicalError> {
        if depth > MAX_DEPTH {
            return Err(self.err(CanonicalErrorKind::TooDeep));
        }
        self.pos += 1; // '{'
        let mut members: Vec<(Cow<'a, str>, Value<'a>)> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'"') => {}
                None => return Err(self.err(CanonicalErrorKind::UnexpectedEnd)),
                Some(_) => return Err(self.err(CanonicalErrorKind::UnexpectedByte)),
            }
            let key = self.string()?;
            self.skip_ws();
            match self.peek() {
                Some(b':') => self.pos += 1,
                None => return Err(self.err(CanonicalErrorKind::UnexpectedEnd)),
                Some(_) => return Err(self.err(CanonicalErrorKind::UnexpectedByte)),
            }
            let value = self.value(depth)?;
            members.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                None => return Err(self.err(CanonicalErrorKind::UnexpectedEnd)),
                Some(_) => return Err(self.err(CanonicalErrorKind::UnexpectedByte)),
            }
        }
        // Stable sort keeps the given order among equal keys; then the last of each run wins.
        members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        keep_last_of_runs(&mut members, |a, b| a.0 == b.0);
        Ok(Value::Object(members))
    }

    fn string(&mut self) -> Result<Cow<'a, str>, CanonicalError> {
        let start = self.pos;
        self.pos += 1; // opening quote
        let bytes = self.text.as_bytes();
        let mut escaped = false;
        loop {
            match bytes.get(self.pos) {
                None => return Err(self.err(CanonicalErrorKind::UnexpectedEnd)),
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    // Skip the escaped byte too; serde_json checks the escape itself.
                    self.pos += 2;
                }
                Some(&b) if b < 0x20 => return Err(self.err(CanonicalErrorKind::BadString)),
                Some(_) => self.pos += 1,
            }
        }
        self.pos += 1; // closing quote
        let raw = &self.text[start..self.pos];
        if !escaped {
            return Ok(Cow::Borrowed(&raw[1..raw.len() - 1]));
        }
        serde_json::from_str::<String>(raw)
            .map(Cow::Owned)
            .map_err(|_| CanonicalError { kind: CanonicalErrorKind::BadString, offset: start })
    }

    /// RFC 8259 number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Result<&'a str, CanonicalError> {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        let digits = |pos: &mut usize| {
            let from = *pos;
            while bytes.get(*pos).is_some_and(u8::is_ascii_digit) {
                *pos += 1;
            }
            *pos - from
        };
        let mut pos = self.pos;
        if bytes.get(pos) == Some(&b'-') {
            pos += 1;
        }
        match bytes.get(pos) {
            Some(b'0') => pos += 1,
            Some(b'1'..=b'9') => {
                digits(&mut pos);
            }
            _ => return Err(CanonicalError { kind: CanonicalErrorKind::BadNumber, offset: pos }),
        }
        if bytes.get(pos) == Some(&b'.') {
            pos += 1;
            if digits(&mut pos) == 0 {
                return Err(CanonicalError { kind: CanonicalErrorKind::BadNumber, offset: pos });
            }
        }
        if let Some(b'e' | b'E') = bytes.get(pos) {
            pos += 1;
            if let Some(b'+' | b'-') = bytes.get(pos) {
                pos += 1;
            }
            if digits(&mut pos) == 0 {
                return Err(CanonicalError { kind: CanonicalErrorKind::BadNumber, offset: pos });
            }
        }
        self.pos = pos;
        Ok(&self.text[start..pos])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        canonicalize(s).expect("valid JSON")
    }

    #[test]
    fn sorts_keys_recursively_and_drops_whitespace() {
        assert_eq!(
            canon(r#" { "b" : [ {"y":1, "x":2} ], "a" : { "d":null, "c":true } } "#),
            r#"{"a":{"c":true,"d":null},"b":[{"x":2,"y":1}]}"#
        );
    }

    #[test]
    fn keeps_array_order_and_numbers_as_given() {
        assert_eq!(canon("[3, 1.50, -0, 1e3, 2E-2]"), "[3,1.50,-0,1e3,2E-2]");
    }

    #[test]
    fn canonical_len_is_exact() {
        for text in [
            "null",
            "true",
            "false",
            "-1.5e3",
            r#""a\"b\\c\n\u0001é😀""#,
            "[]",
            "{}",
            "[1,[2,{}]]",
            r#"{"b":{"x":[true,false,null]},"a":"\t"}"#,
        ] {
            let v = parse(text).expect("json");
            let mut out = String::new();
            v.write_canonical(&mut out);
            assert_eq!(v.canonical_len(), out.len(), "{text}");
        }
    }

    #[test]
    fn normalises_string_escapes() {
        assert_eq!(canon(r#""\u0041\/\u00e9""#), "\"A/é\"");
        assert_eq!(canon(r#""a\"b\\c\n\u0001\u001F""#), r#""a\"b\\c\n\u0001\u001f""#);
        assert_eq!(canon(r#""\ud83d\ude00""#), "\"😀\"");
        // An escaped key sorts by its decoded text.
        assert_eq!(canon(r#"{"\u0062":1,"a":2}"#), r#"{"a":2,"b":1}"#);
    }

    #[test]
    fn duplicate_keys_keep_the_last_value() {
        assert_eq!(canon(r#"{"a":1,"b":0,"a":2}"#), r#"{"a":2,"b":0}"#);
        // serde_json reads the same text the same way.
        let v: serde_json::Value = serde_json::from_str(r#"{"a":1,"b":0,"a":2}"#).expect("json");
        assert_eq!(v["a"], 2);
    }

    #[test]
    fn rejects_malformed_input_with_a_position() {
        let cases: &[(&str, CanonicalErrorKind)] = &[
            ("", CanonicalErrorKind::UnexpectedEnd),
            ("{\"a\":1", CanonicalErrorKind::UnexpectedEnd),
            ("[1,]", CanonicalErrorKind::UnexpectedByte),
            ("{\"a\" 1}", CanonicalErrorKind::UnexpectedByte),
            ("01", CanonicalErrorKind::TrailingData),
            ("1.", CanonicalErrorKind::BadNumber),
            ("-", CanonicalErrorKind::BadNumber),
            ("1e+", CanonicalErrorKind::BadNumber),
            ("\"\\x\"", CanonicalErrorKind::BadString),
            ("\"\\ud800\"", CanonicalErrorKind::BadString),
            ("\"a\u{1}\"", CanonicalErrorKind::BadString),
            ("\"abc", CanonicalErrorKind::UnexpectedEnd),
            ("\"abc\\", CanonicalErrorKind::UnexpectedEnd),
            ("nul", CanonicalErrorKind::UnexpectedByte),
            ("{} {}", CanonicalErrorKind::TrailingData),
        ];
        for (text, kind) in cases {
            let err = parse(text).expect_err(text);
            assert_eq!(err.kind, *kind, "{text:?}: {err}");
        }
        assert_eq!(parse("[1,]").expect_err("bad").offset, 3);
    }

    #[test]
    fn depth_is_capped() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(&ok).is_ok());
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(parse(&deep).expect_err("deep").kind, CanonicalErrorKind::TooDeep);
        let deep_obj = "{\"a\":".repeat(MAX_DEPTH + 1) + "1" + &"}".repeat(MAX_DEPTH + 1);
        assert_eq!(parse(&deep_obj).expect_err("deep").kind, CanonicalErrorKind::TooDeep);
    }

    #[test]
    fn canonical_text_is_a_fixed_point_and_valid_json() {
        let input = r#"{"z":[{"q":"\t","p":-1.5e10}],"a":"\u00e9\u2028","m":{}}"#;
        let once = canon(input);
        assert_eq!(parse(input).expect("json").canonical_len(), once.len());
        assert_eq!(canon(&once), once);
        let theirs: serde_json::Value = serde_json::from_str(input).expect("json");
        let ours: serde_json::Value = serde_json::from_str(&once).expect("json");
        assert_eq!(theirs, ours);
    }

    #[test]
    fn get_finds_members_of_sorted_objects() {
        let v = parse(r#"{"c":1,"a":"x","b":true}"#).expect("json");
        assert_eq!(v.get("a").and_then(Value::as_str), Some("x"));
        assert_eq!(v.get("b"), Some(&Value::Bool(true)));
        assert_eq!(v.get("d"), None);
        assert_eq!(Value::Null.get("a"), None);
    }
}
