//! A validating JSON scanner that never allocates, for decoding frames on the hot path.
//!
//! [`parse`] checks a whole frame once: UTF-8, the RFC 8259 grammar and the nesting depth. It
//! returns a [`RawJson`] that borrows the value's text from the frame. Everything after that
//! reads text that is already known to be valid. [`RawJson::get`], [`RawJson::members`] and
//! [`RawJson::elements`] skip over values without building anything. A string is copied only
//! when it contains an escape and the caller asks for its text with [`RawJson::as_str`] or
//! [`JsonKey::as_str`]. [`JsonKey::eq_str`] compares even escaped keys without allocating.
//!
//! # Agreement with serde_json
//!
//! For every input, `parse(b).is_ok()` equals
//! `serde_json::from_slice::<serde_json::Value>(b).is_ok()`. This holds for invalid UTF-8 as
//! well, because serde_json rejects it inside strings and any non-ASCII byte outside a string
//! is a syntax error. The `json_scan` fuzz target checks this. Three of serde_json's stricter
//! rules are matched on purpose, so that either decoder can read a frame the other accepted:
//!
//! - **Depth.** At most [`MAX_DEPTH`] (127) arrays and objects may be nested. serde_json's
//!   recursion limit is 128, but it counts down on entry and fails when it reaches zero.
//! - **Surrogates.** A `\u` escape for a high surrogate (`\uD800`-`\uDBFF`) must be followed by
//!   a `\u` escape for a low surrogate (`\uDC00`-`\uDFFF`). A low surrogate on its own is
//!   rejected. serde_json refuses both when it builds a `String`.
//! - **Number range.** A number is rejected when serde_json would report "number out of range",
//!   meaning its magnitude overflows `f64` to infinity. Near `f64::MAX`, serde_json's default
//!   float parse is not correctly rounded. For example, it rejects `1.7976931348623158e308`,
//!   which rounds to `f64::MAX`. So the check repeats serde_json's steps instead of calling
//!   `str::parse::<f64>`.
//!
//! The only known disagreements come from serde_json's optional features, which Cargo unifies
//! across the whole build:
//!
//! - `raw_value`, which mcpoll enables, reserves the object key
//!   `"$serde_json::private::RawValue"`. When serde_json builds a `Value`, an object whose first
//!   key is that one stands for the JSON text in its string value, and any other use of the key
//!   is an error. This scanner treats the key like any other.
//! - With `float_roundtrip`, serde_json rounds correctly, so a number within about one ULP of
//!   `f64::MAX` may be judged differently.
//! - With `arbitrary_precision`, serde_json accepts numbers of any size.
//!
//! Other things this scanner does:
//!
//! - Duplicate keys are allowed, and [`RawJson::get`] returns the first one. (A
//!   `serde_json::Value` keeps the last one.)
//! - Whitespace is exactly space, `\t`, `\n` and `\r`, so a byte-order mark is an error.

use std::borrow::Cow;
use std::fmt;
use std::iter::FusedIterator;
use std::str::Chars;

/// The deepest nesting of arrays and objects that [`parse`] accepts, the same as serde_json.
pub(crate) const MAX_DEPTH: u8 = 127;

/// Validates a whole frame and returns its one JSON value.
///
/// Whitespace before and after the value is allowed and is not part of the returned text. The
/// scan is iterative and its stack use is fixed, so hostile nesting cannot overflow the stack.
/// It just fails with [`JsonError::TooDeep`].
///
/// # Errors
///
/// The first problem found, as a [`JsonError`].
/// Whether a parsed number is an integer as JSON Schema counts one: 1, or 1.0.
#[cfg_attr(not(feature = "server-requests"), allow(dead_code))] // elicitation answers, schemas
pub(crate) fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// The value of a number's JSON `text` when it is a non-negative integer in any notation JSON
/// Schema counts as one (`300000`, `300000.0`, `3e5`), saturating at `u64::MAX`; `None` for a
/// negative number or a fraction. How every `ttlMs` is read.
pub(crate) fn whole_number(text: &str) -> Option<u64> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let digits = text.bytes().map(|b| u64::from(b - b'0'));
        return Some(digits.fold(0u64, |n, d| n.saturating_mul(10).saturating_add(d)));
    }
    // A fraction or an exponent: whole all the same when its value is (`as` saturates).
    let f: f64 = text.parse().ok()?;
    (f.is_finite() && f.fract() == 0.0 && f >= 0.0).then_some(f as u64)
}

pub(crate) fn parse(frame: &[u8]) -> Result<RawJson<'_>, JsonError> {
    parse_visit(frame, &mut ())
}

/// [`parse`], reporting on the way the members a [`Visitor`] asks for: members of the
/// top-level object, and members of an object that is itself a member value of the top-level
/// object (two levels: the JSON-RPC envelope and, say, its `result`).
///
/// This is how a reader gets at the members it needs in the one validating pass, instead of
/// walking the text again with [`RawJson::get`] or [`RawJson::members`] for each level. The
/// visitor names a slot for each key as it is read ([`Visitor::slot`]), so a member it does
/// not want costs one key comparison and nothing when its value ends. A member is reported
/// once its value has been validated, so the members of a nested object come before the
/// member that holds it. Members are reported before the whole frame is known to be valid:
/// when this returns an error, forget what the visitor saw.
///
/// # Errors
///
/// As for [`parse`].
pub(crate) fn parse_visit<'a, V: Visitor<'a>>(
    frame: &'a [u8],
    visit: &mut V,
) -> Result<RawJson<'a>, JsonError> {
    // One pass by the standard library is faster than checking UTF-8 while scanning, and it lets
    // every later step slice `str`s safely.
    let text = std::str::from_utf8(frame).map_err(|_| JsonError::NotUtf8)?;
    let bytes = text.as_bytes();
    let start = skip_ws(bytes, 0);
    if start == bytes.len() {
        return Err(JsonError::Empty);
    }
    let long_frame = bytes.len() >= LONG_FRAME;
    let (slots, starts, open) = ([SKIP; 2], [0; 2], Nesting::default());
    let mut scanner = Scanner { text, open, slots, starts, visit, long_frame };
    let end = scanner.scan(start)?;
    if skip_ws(bytes, end) != bytes.len() {
        return Err(JsonError::Trailing);
    }
    text.get(start..end).map(RawJson).ok_or(JsonError::Syntax)
}

/// The slot a [`Visitor`] gives a member it does not want.
pub(crate) const SKIP: u8 = u8::MAX;

/// What [`parse_visit`] reports members to.
pub(crate) trait Visitor<'a> {
    /// The slot for the member whose key is `key` (the bytes between its quotes, escapes still
    /// in place), or [`SKIP`]. `parent` is `None` for a member of the top-level object; for a
    /// member of a nested object it is the slot of the top-level member whose value that
    /// object is (never `SKIP`: the members of a skipped member's value are skipped unasked).
    fn slot(&mut self, parent: Option<u8>, key: &[u8]) -> u8;

    /// The value, already validated, of a member given `slot` (never `SKIP`).
    fn value(&mut self, slot: u8, value: RawJson<'a>);
}

/// Wants nothing: plain [`parse`].
impl Visitor<'_> for () {
    #[inline(always)]
    fn slot(&mut self, _: Option<u8>, _: &[u8]) -> u8 {
        SKIP
    }

    #[inline(always)]
    fn value(&mut self, _: u8, _: RawJson<'_>) {}
}

/// The text of a validated JSON value, borrowed from its frame.
///
/// Only `parse` and the iterators over a parsed value make these. That is why the accessors can
/// skip over the text quickly without checking it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawJson<'a>(&'a str);

/// The six kinds of JSON value.
///
/// This enum is exhaustive on purpose, unlike the crate's other public enums. RFC 8259 fixes the
/// set, and matches on it should stay exhaustive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `{...}`
    Object,
    /// `[...]`
    Array,
    /// `"..."`
    String,
    /// `-1.5e3` and the like.
    Number,
    /// `true` or `false`.
    Bool,
    /// `null`.
    Null,
}

impl<'a> RawJson<'a> {
    /// The value's JSON text, exactly as it appears in the frame, without surrounding whitespace.
    #[must_use]
    pub fn text(self) -> &'a str {
        self.0
    }

    /// The kind of value, read from its first byte.
    #[must_use]
    pub fn kind(self) -> Kind {
        match self.0.as_bytes().first() {
            Some(b'{') => Kind::Object,
            Some(b'[') => Kind::Array,
            Some(b'"') => Kind::String,
            Some(b't' | b'f') => Kind::Bool,
            Some(b'n') => Kind::Null,
            _ => Kind::Number,
        }
    }

    /// The members of an object in document order, including duplicates. The iterator is empty
    /// for any other kind.
    #[must_use]
    pub fn members(self) -> Members<'a> {
        Members(Items::new(self.0, b'{'))
    }

    /// The value of the first member whose unescaped key equals `key`.
    ///
    /// Returns `None` if there is no such member, or if this is not an object. Each call walks
    /// the members from the start, so one pass over [`RawJson::members`] is cheaper for reading
    /// several keys of a large object.
    #[must_use]
    pub fn get(self, key: &str) -> Option<RawJson<'a>> {
        self.members().find(|(name, _)| name.eq_str(key)).map(|(_, value)| value)
    }

    /// The elements of an array in order. The iterator is empty for any other kind.
    #[must_use]
    pub fn elements(self) -> Elements<'a> {
        Elements(Items::new(self.0, b'['))
    }

    /// A string's unescaped text. It is borrowed from the frame when the string has no escapes,
    /// and otherwise built in one allocation. Returns `None` for other kinds.
    #[must_use]
    pub fn as_str(self) -> Option<Cow<'a, str>> {
        let inner = self.0.strip_prefix('"')?.strip_suffix('"')?;
        Some(unescape(inner))
    }

    /// A number written as a non-negative integer that fits in a `u64`.
    ///
    /// Like `serde_json::Value::as_u64`, this returns `None` for `1.0`, `1e2` and anything
    /// negative.
    #[must_use]
    pub fn as_u64(self) -> Option<u64> {
        all_digits(self.0).then(|| self.0.parse().ok()).flatten()
    }

    /// A number written as an integer that fits in an `i64`.
    ///
    /// Like `serde_json::Value::as_i64`, this returns `None` for fractions, exponents and `-0`.
    /// serde_json reads `-0` as a float.
    #[must_use]
    pub fn as_i64(self) -> Option<i64> {
        let magnitude = self.0.strip_prefix('-').unwrap_or(self.0);
        let integer = all_digits(magnitude) && self.0 != "-0";
        integer.then(|| self.0.parse().ok()).flatten()
    }

    /// A number's value as the nearest `f64`. Returns `None` for other kinds.
    ///
    /// `parse` rejects numbers that overflow, but the overflow test it shares with serde_json is
    /// not correctly rounded. A number it accepted can still round past `f64::MAX`, and such a
    /// number reads as `±f64::MAX`.
    #[must_use]
    pub fn as_f64(self) -> Option<f64> {
        if self.kind() != Kind::Number {
            return None;
        }
        let value: f64 = self.0.parse().ok()?;
        Some(if value.is_infinite() { f64::MAX.copysign(value) } else { value })
    }

    /// A boolean's value. Returns `None` for other kinds.
    #[must_use]
    pub fn as_bool(self) -> Option<bool> {
        match self.0 {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }

    /// Whether this value is `null`.
    #[must_use]
    pub fn is_null(self) -> bool {
        self.0 == "null"
    }
}

/// An object member's key, borrowed from the frame with its escapes still in place.
#[derive(Debug, Clone, Copy)]
pub struct JsonKey<'a> {
    raw: &'a str,
}

impl<'a> JsonKey<'a> {
    /// The key's text between the quotes, with escapes still in place.
    #[must_use]
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// Whether the unescaped key equals `s`. This never allocates, even when the key has escapes.
    #[must_use]
    pub fn eq_str(&self, s: &str) -> bool {
        if has_escape(self.raw) {
            Unescape(self.raw.chars()).eq(s.chars())
        } else {
            self.raw == s
        }
    }

    /// The unescaped key. It is borrowed when the key has no escapes, and otherwise built in one
    /// allocation.
    #[must_use]
    pub fn as_str(&self) -> Cow<'a, str> {
        unescape(self.raw)
    }
}

/// An iterator over an object's `(key, value)` members; see [`RawJson::members`].
#[derive(Debug, Clone)]
pub struct Members<'a>(Items<'a>);

impl<'a> Iterator for Members<'a> {
    type Item = (JsonKey<'a>, RawJson<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_member()
    }
}

impl FusedIterator for Members<'_> {}

/// An iterator over an array's elements; see [`RawJson::elements`].
#[derive(Debug, Clone)]
pub struct Elements<'a>(Items<'a>);

impl<'a> Iterator for Elements<'a> {
    type Item = RawJson<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_element()
    }
}

impl FusedIterator for Elements<'_> {}

/// Why a frame is not one valid JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum JsonError {
    /// The frame is not valid UTF-8.
    NotUtf8,
    /// The frame breaks the JSON grammar: a bad token, escape or number, a control character in
    /// a string, a lone surrogate, or a value cut short.
    Syntax,
    /// Arrays and objects are nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Something other than whitespace follows the value.
    Trailing,
    /// The frame is empty or only whitespace.
    Empty,
    /// A number's magnitude overflows `f64`, which serde_json also refuses.
    NumberOutOfRange,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotUtf8 => "frame is not valid UTF-8",
            Self::Syntax => "invalid JSON syntax",
            Self::TooDeep => "JSON nested more than 127 levels deep",
            Self::Trailing => "trailing characters after the JSON value",
            Self::Empty => "empty frame",
            Self::NumberOutOfRange => "JSON number out of f64 range",
        })
    }
}

impl std::error::Error for JsonError {}

// ---------------------------------------------------------------------------------------------
// Validation: one pass over untrusted bytes, without recursion.

/// Whether each open container is an object (bit set) or an array, innermost in bit 0.
///
/// With [`MAX_DEPTH`] below 128, a `u128` holds the whole stack, so deep nesting uses neither
/// the call stack nor the heap.
#[derive(Default)]
struct Nesting {
    bits: u128,
    depth: u8,
}

impl Nesting {
    fn push(&mut self, object: bool) -> Result<(), JsonError> {
        if self.depth >= MAX_DEPTH {
            return Err(JsonError::TooDeep);
        }
        self.bits = (self.bits << 1) | u128::from(object);
        self.depth += 1;
        Ok(())
    }

    fn pop(&mut self) {
        self.bits >>= 1;
        self.depth = self.depth.saturating_sub(1);
    }

    /// `Some(true)` inside an object, `Some(false)` inside an array, `None` at the top level.
    fn top(&self) -> Option<bool> {
        (self.depth > 0).then_some(self.bits & 1 == 1)
    }
}

/// The object depths whose members [`parse_visit`] reports.
const VISIT_DEPTH: usize = 2;

/// The validating pass: [`Nesting`] for the grammar, plus, for the visitor, the slot of the
/// current member and where the current value started at each reported depth.
struct Scanner<'a, 'v, V> {
    text: &'a str,
    open: Nesting,
    /// The slot the visitor gave the current member of the object at depth 1 and 2; [`SKIP`]
    /// for an array there, whose elements are not members.
    slots: [u8; VISIT_DEPTH],
    /// Where the current value starts in the container at depth 1 and 2.
    starts: [usize; VISIT_DEPTH],
    visit: &'v mut V,
    /// At least [`LONG_FRAME`] bytes: string values may be long.
    long_frame: bool,
}

impl<'a, V: Visitor<'a>> Scanner<'a, '_, V> {
    /// Validates the one value that starts at `i` and returns the index just past it.
    fn scan(&mut self, mut i: usize) -> Result<usize, JsonError> {
        let b = self.text.as_bytes();
        loop {
            // A value is expected at `i`. An opening bracket leaves us inside the container, at
            // its first value. Anything else is a whole value, so we move on to what follows it.
            i = skip_ws(b, i);
            if let Some(start) = self.starts.get_mut(usize::from(self.open.depth).wrapping_sub(1)) {
                *start = i;
            }
            match b.get(i) {
                Some(b'{') => {
                    self.open.push(true)?;
                    i = skip_ws(b, i + 1);
                    if b.get(i) != Some(&b'}') {
                        i = self.key(i)?;
                        continue;
                    }
                    self.open.pop();
                    i += 1;
                }
                Some(b'[') => {
                    self.open.push(false)?;
                    // Elements are not members: nothing at this depth is reported.
                    let depth = usize::from(self.open.depth).wrapping_sub(1);
                    if let Some(slot) = self.slots.get_mut(depth) {
                        *slot = SKIP;
                    }
                    i = skip_ws(b, i + 1);
                    if b.get(i) != Some(&b']') {
                        continue;
                    }
                    self.open.pop();
                    i += 1;
                }
                _ => i = scan_scalar(b, i, self.long_frame)?,
            }
            self.value_ended(i);
            i = self.after_value(i)?;
            if self.open.top().is_none() {
                return Ok(i);
            }
        }
    }

    /// Moves past the separators and closing brackets that follow a complete value. It stops at
    /// the next value of an enclosing container, or at the end of the top-level value.
    fn after_value(&mut self, mut i: usize) -> Result<usize, JsonError> {
        let b = self.text.as_bytes();
        while let Some(object) = self.open.top() {
            // The separator or bracket first: compact frames have no whitespace to skip.
            match b.get(i) {
                Some(b',') if object => return self.key(i + 1),
                Some(b',') => return Ok(i + 1),
                Some(b'}') if object => self.open.pop(),
                Some(b']') if !object => self.open.pop(),
                Some(&c) if is_ws(c) => {
                    i = skip_ws(b, i);
                    continue;
                }
                _ => return Err(JsonError::Syntax),
            }
            i += 1;
            // The container just closed is a complete value of the one around it.
            self.value_ended(i);
        }
        Ok(i)
    }

    /// Validates `"key"` and then `:`, returning the index just after the colon. At a reported
    /// depth, asks the visitor for the member's slot.
    #[inline(always)]
    fn key(&mut self, mut i: usize) -> Result<usize, JsonError> {
        let b = self.text.as_bytes();
        // The quote first: compact frames have no whitespace before a key.
        if b.get(i) != Some(&b'"') {
            i = skip_ws(b, i);
            if b.get(i) != Some(&b'"') {
                return Err(JsonError::Syntax);
            }
        }
        let end = scan_string(b, i)?;
        let key = || b.get(i + 1..end - 1).unwrap_or_default();
        match self.open.depth {
            1 => self.slots[0] = self.visit.slot(None, key()),
            // A key at depth 2 is in an object that is the value of the current member at
            // depth 1 (an array there is no member, and has set that slot to `SKIP`).
            2 => {
                self.slots[1] = match self.slots[0] {
                    SKIP => SKIP,
                    parent => self.visit.slot(Some(parent), key()),
                }
            }
            _ => {}
        }
        // Compact frames put the colon right after the key.
        if b.get(end) == Some(&b':') {
            return Ok(end + 1);
        }
        let i = skip_ws(b, end);
        match b.get(i) {
            Some(b':') => Ok(i + 1),
            _ => Err(JsonError::Syntax),
        }
    }

    /// A value of the innermost open container ended just before `end`. Reports it when it is
    /// a member value at a reported depth that the visitor gave a slot.
    #[inline(always)]
    fn value_ended(&mut self, end: usize) {
        let depth = usize::from(self.open.depth).wrapping_sub(1);
        let (Some(&slot), Some(&start)) = (self.slots.get(depth), self.starts.get(depth)) else {
            return;
        };
        if slot == SKIP {
            return;
        }
        if let Some(value) = self.text.get(start..end) {
            self.visit.value(slot, RawJson(value));
        }
    }
}

#[inline(always)]
fn scan_scalar(b: &[u8], i: usize, long_frame: bool) -> Result<usize, JsonError> {
    match b.get(i) {
        Some(b'"') if long_frame => scan_long_string(b, i),
        Some(b'"') => scan_string(b, i),
        Some(b'-' | b'0'..=b'9') => scan_number(b, i),
        Some(b't') => scan_literal(b, i, b"true"),
        Some(b'f') => scan_literal(b, i, b"false"),
        Some(b'n') => scan_literal(b, i, b"null"),
        _ => Err(JsonError::Syntax),
    }
}

fn scan_literal(b: &[u8], i: usize, literal: &[u8]) -> Result<usize, JsonError> {
    match b.get(i..i + literal.len()) {
        Some(found) if found == literal => Ok(i + literal.len()),
        _ => Err(JsonError::Syntax),
    }
}

/// Validates the string whose opening quote is at `i` and returns the index just past its
/// closing quote.
#[inline(always)]
fn scan_string(b: &[u8], i: usize) -> Result<usize, JsonError> {
    scan_string_in::<false>(b, i)
}

/// Frames from this size on scan their string values with [`scan_long_string`].
const LONG_FRAME: usize = 2048;

/// [`scan_string`] for the string values of a large frame (a tool's long text result), out of
/// line: past [`LONG_RUN`] bytes of plain content it takes memchr's vector search
/// ([`plain_run`]). Small frames keep [`scan_string`] alone: a call, and a call into memchr,
/// cost more than their short strings.
#[inline(never)]
fn scan_long_string(b: &[u8], i: usize) -> Result<usize, JsonError> {
    scan_string_in::<true>(b, i)
}

/// The string scan of both: eight bytes per step, and with `LONG` the vector search for long
/// runs (the run's start is dead code without it, and the compiler drops it).
#[inline(always)]
fn scan_string_in<const LONG: bool>(b: &[u8], i: usize) -> Result<usize, JsonError> {
    let mut j = i + 1;
    let mut run_start = j;
    loop {
        // Jump to the next byte that matters, eight bytes per step while eight are left (most
        // strings are keys and short values, so the first word usually ends them). UTF-8 was
        // checked already, so any other byte, multi-byte characters included, is content.
        match b.get(j..j + 8) {
            Some(_) if LONG && j - run_start >= LONG_RUN => {
                j += plain_run(b.get(j..).unwrap_or_default()).ok_or(JsonError::Syntax)?
            }
            Some(chunk) => {
                // `get` gave eight bytes, so this is one load; the fallback is unreachable.
                let word = u64::from_le_bytes(chunk.try_into().unwrap_or([b' '; 8]));
                let hits = special_lanes(word);
                if hits == 0 {
                    j += 8;
                    continue;
                }
                // Lane k holds byte k, and the lowest flagged lane is always a real hit.
                j += (hits.trailing_zeros() / 8) as usize;
            }
            None => {
                j += find_special(b.get(j..).unwrap_or_default(), true).ok_or(JsonError::Syntax)?
            }
        }
        match b.get(j) {
            Some(b'"') => return Ok(j + 1),
            Some(b'\\') => j = scan_escape(b, j + 1)?,
            _ => return Err(JsonError::Syntax), // a raw control character
        }
        run_start = j;
    }
}

/// The index in `s` of the first quote or backslash, by memchr's vector search; `None` when
/// there is none, or a control character comes before it (either is a syntax error). The
/// control characters are looked for without early exit, which the compiler vectorises.
fn plain_run(s: &[u8]) -> Option<usize> {
    let end = memchr::memchr2(b'"', b'\\', s)?;
    let controls = s.get(..end)?.iter().fold(0u8, |seen, &c| seen | u8::from(c < 0x20));
    (controls == 0).then_some(end)
}

/// Bytes of plain string content after which [`scan_long_string`] takes memchr's search.
const LONG_RUN: usize = 64;

/// Validates the escape whose letter is at `i` (just after the backslash) and returns the index
/// past it.
fn scan_escape(b: &[u8], i: usize) -> Result<usize, JsonError> {
    match b.get(i) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 1),
        Some(b'u') => scan_unicode_escape(b, i + 1),
        _ => Err(JsonError::Syntax),
    }
}

/// Validates the four hex digits at `i` after `\u`, plus the low half when they name a high
/// surrogate. serde_json rejects unpaired surrogates because they cannot be stored in a `String`.
fn scan_unicode_escape(b: &[u8], i: usize) -> Result<usize, JsonError> {
    match hex4(b, i).ok_or(JsonError::Syntax)? {
        0xD800..=0xDBFF => {
            let low = match b.get(i + 4..i + 6) {
                Some(br"\u") => hex4(b, i + 6),
                _ => None,
            };
            match low {
                Some(0xDC00..=0xDFFF) => Ok(i + 10),
                _ => Err(JsonError::Syntax),
            }
        }
        0xDC00..=0xDFFF => Err(JsonError::Syntax),
        _ => Ok(i + 4),
    }
}

fn hex4(b: &[u8], i: usize) -> Option<u32> {
    b.get(i..i + 4)?.iter().try_fold(0, |acc, &c| Some((acc << 4) | char::from(c).to_digit(16)?))
}

/// Validates `-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?` at `start`, plus serde_json's range rule.
fn scan_number(b: &[u8], start: usize) -> Result<usize, JsonError> {
    let int_start = start + usize::from(b.get(start) == Some(&b'-'));
    let mut i = match b.get(int_start) {
        // A leading zero may not be followed by more digits.
        Some(b'0') if b.get(int_start + 1).is_some_and(u8::is_ascii_digit) => {
            return Err(JsonError::Syntax)
        }
        Some(b'0') => int_start + 1,
        Some(b'1'..=b'9') => skip_digits(b, int_start + 1),
        _ => return Err(JsonError::Syntax),
    };
    let int_digits = i - int_start;
    let mut integer = true;
    if b.get(i) == Some(&b'.') {
        i = at_least_one_digit(b, i + 1)?;
        integer = false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(i + 1), Some(b'+' | b'-')));
        i = at_least_one_digit(b, i + 1 + sign)?;
        integer = false;
    }
    // Integers below 10^308 cannot overflow, and that covers every id, code and count. Only
    // fractions, exponents and very long integers pay for the range check.
    let may_overflow = !integer || int_digits > 308;
    if may_overflow && out_of_range(b.get(start..i).unwrap_or_default()) {
        return Err(JsonError::NumberOutOfRange);
    }
    Ok(i)
}

fn at_least_one_digit(b: &[u8], i: usize) -> Result<usize, JsonError> {
    match skip_digits(b, i) {
        end if end > i => Ok(end),
        _ => Err(JsonError::Syntax),
    }
}

// ---------------------------------------------------------------------------------------------
// serde_json's "number out of range" rule (serde_json 1.x `de.rs`, without `float_roundtrip`).

/// 10^289 through 10^308, written as literals so they round the same way as the entries in
/// serde_json's `POW10` table.
const POW10_FROM_289: [f64; 20] = [
    1e289, 1e290, 1e291, 1e292, 1e293, 1e294, 1e295, 1e296, 1e297, 1e298, 1e299, 1e300, 1e301,
    1e302, 1e303, 1e304, 1e305, 1e306, 1e307, 1e308,
];

/// Whether serde_json would reject the valid number `num` as out of range.
///
/// serde_json reduces a number to a `u64` significand and a decimal exponent. Once the
/// significand is full it drops the remaining digits: dropped integer digits still raise the
/// exponent, and dropped fraction digits are simply ignored. An exponent that overflows `i32`
/// counts as overflow when it is positive and the significand is not zero. The value is then
/// `significand as f64 * 10^exponent` in a single rounding step, and infinity is the error. This
/// function reproduces those steps without allocating.
fn out_of_range(num: &[u8]) -> bool {
    let unsigned = num.strip_prefix(b"-").unwrap_or(num);
    let (int, rest) = split_digits(unsigned);
    let mut significand = 0u64;
    let mut exponent = 0i32;
    let mut full = false;
    for &d in int {
        full = full || !push_digit(&mut significand, d);
        if full {
            exponent = exponent.saturating_add(1);
        }
    }
    let rest = match rest.strip_prefix(b".") {
        Some(fraction) => {
            let (fraction, rest) = split_digits(fraction);
            // serde_json starts a fresh overflow check at the decimal point, so a small digit can
            // still fit into a significand that just refused a larger one.
            let mut full = false;
            for &d in fraction {
                full = full || !push_digit(&mut significand, d);
                if !full {
                    exponent = exponent.saturating_sub(1);
                }
            }
            rest
        }
        None => rest,
    };
    if let Some((_, exp)) = rest.split_first() {
        let (negative, digits) = match exp.split_first() {
            Some((b'-', digits)) => (true, digits),
            Some((b'+', digits)) => (false, digits),
            _ => (false, exp),
        };
        let mut n = 0i32;
        for &d in digits {
            let next = n.checked_mul(10).and_then(|n| n.checked_add(i32::from(digit(d))));
            match next {
                Some(next) => n = next,
                None => return significand != 0 && !negative,
            }
        }
        exponent = if negative { exponent.saturating_sub(n) } else { exponent.saturating_add(n) };
    }
    overflows(significand, exponent)
}

/// Whether `significand as f64 * 10^exponent`, computed as serde_json computes it, is infinite.
fn overflows(significand: u64, exponent: i32) -> bool {
    // serde_json only divides for negative exponents, and zero stays zero.
    if significand == 0 || exponent < 0 {
        return false;
    }
    let digits = significand.checked_ilog10().unwrap_or(0) + 1;
    // The value lies in [10^(magnitude - 1), 10^magnitude). Only the decade just above 10^308,
    // where f64::MAX sits, depends on rounding. Every other decade is clearly finite or clearly
    // infinite.
    let magnitude = i64::from(digits) + i64::from(exponent);
    match magnitude {
        ..=308 => false,
        309 => {
            let power = usize::try_from(exponent - 289).ok().and_then(|k| POW10_FROM_289.get(k));
            // The conversion rounds to nearest, as serde_json's `as f64` does.
            power.is_none_or(|p| (significand as f64 * p).is_infinite())
        }
        _ => true,
    }
}

/// Appends a decimal digit if the result still fits in a `u64`, as serde_json's `overflow!` does.
fn push_digit(significand: &mut u64, d: u8) -> bool {
    let next = significand.checked_mul(10).and_then(|s| s.checked_add(u64::from(digit(d))));
    if let Some(next) = next {
        *significand = next;
    }
    next.is_some()
}

/// A digit's value, always below 10.
fn digit(d: u8) -> u8 {
    // The bytes come from a validated number. The remainder costs nothing and keeps the result
    // in range (so casts and arithmetic on it stay exact) even if that ever failed.
    d.wrapping_sub(b'0') % 10
}

fn split_digits(s: &[u8]) -> (&[u8], &[u8]) {
    s.split_at(s.iter().take_while(|c| c.is_ascii_digit()).count())
}

// ---------------------------------------------------------------------------------------------
// Reading validated text: quick skips that trust the grammar but never index out of bounds.

/// The cursor shared by [`Members`] and [`Elements`]: the container's text and where the next
/// item (or its leading comma) starts.
#[derive(Debug, Clone)]
struct Items<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Items<'a> {
    /// Starts just inside `text` if it opens with `open`. Otherwise the cursor starts at the end,
    /// so the iterator is empty.
    fn new(text: &'a str, open: u8) -> Self {
        let pos = match text.as_bytes().first() {
            Some(&c) if c == open => 1,
            _ => text.len(),
        };
        Self { text, pos }
    }

    /// The next item's first byte, past whitespace and one comma. Returns `None` at the closing
    /// bracket.
    ///
    /// The cursor is left at the end beforehand. Any surprise then leaves the iterator finished
    /// instead of stuck, and a successful step moves it forward again.
    fn next_start(&mut self) -> Option<usize> {
        let b = self.text.as_bytes();
        let mut i = skip_ws(b, std::mem::replace(&mut self.pos, b.len()));
        if b.get(i) == Some(&b',') {
            i = skip_ws(b, i + 1);
        }
        match b.get(i) {
            None | Some(b'}' | b']') => None,
            Some(_) => Some(i),
        }
    }

    /// The value starting at `i`. On success the cursor moves past it.
    fn value_at(&mut self, i: usize) -> Option<RawJson<'a>> {
        let end = value_end(self.text.as_bytes(), i);
        let value = self.text.get(i..end).filter(|v| !v.is_empty())?;
        self.pos = end;
        Some(RawJson(value))
    }

    fn next_element(&mut self) -> Option<RawJson<'a>> {
        let i = self.next_start()?;
        self.value_at(i)
    }

    fn next_member(&mut self) -> Option<(JsonKey<'a>, RawJson<'a>)> {
        let b = self.text.as_bytes();
        let i = self.next_start()?;
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(b, i);
        let raw = self.text.get(i + 1..key_end.checked_sub(1)?)?;
        let colon = skip_ws(b, key_end);
        if b.get(colon) != Some(&b':') {
            return None;
        }
        let value = self.value_at(skip_ws(b, colon + 1))?;
        Some((JsonKey { raw }, value))
    }
}

/// The end of the valid value that starts at `i`.
fn value_end(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(b'"') => string_end(b, i),
        Some(b'{' | b'[') => container_end(b, i),
        _ => {
            let rest = b.get(i..).unwrap_or_default();
            i + rest.iter().take_while(|&&c| !is_delimiter(c)).count()
        }
    }
}

/// The index just past the closing quote of the valid string whose opening quote is at `i`.
fn string_end(b: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while let Some(k) = b.get(j..).and_then(|rest| find_special(rest, false)) {
        j += k;
        if b.get(j) == Some(&b'"') {
            return j + 1;
        }
        // Skipping the escaped byte is enough, even for `\uXXXX`: hex digits are never quotes.
        j += 2;
    }
    b.len()
}

/// The index just past the bracket that closes the valid container opening at `i`.
fn container_end(b: &[u8], i: usize) -> usize {
    let mut depth = 0usize;
    let mut j = i;
    while let Some(k) = b.get(j..).and_then(|rest| rest.iter().position(|&c| is_structural(c))) {
        j += k;
        match b.get(j) {
            Some(b'"') => {
                j = string_end(b, j);
                continue;
            }
            Some(b'{' | b'[') => depth += 1,
            _ => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return j + 1;
                }
            }
        }
        j += 1;
    }
    b.len()
}

// ---------------------------------------------------------------------------------------------
// Shared helpers.

#[inline(always)]
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    // Frames are mostly compact, so the first byte usually ends it.
    while b.get(i).is_some_and(|&c| is_ws(c)) {
        i += 1;
    }
    i
}

/// The index just past the run of ASCII digits at `i`: eight bytes per step while eight are
/// left (every reply's id is a run of ten or more digits).
fn skip_digits(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        // `get` gave eight bytes, so this is one load; the fallback is unreachable.
        let stops = non_digit_lanes(u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])));
        if stops != 0 {
            return i + (stops.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// Sets the high bit of each byte lane of `word` that is not an ASCII digit; exact up to the
/// first such lane (the only one callers use). Below 0x30 is [`lanes_below`]'s test; adding
/// 0x46 sets the high bit of 0x3A to 0x7F, and the byte's own high bit covers 0x80 up. Lanes
/// below the first hit are digits, so neither test carries or borrows into it.
fn non_digit_lanes(word: u64) -> u64 {
    lanes_below(word, 0x30) | ((word.wrapping_add(LANES * 0x46) | word) & (LANES * 0x80))
}

/// JSON whitespace. This is narrower than `u8::is_ascii_whitespace`, which also accepts form feed.
fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// The bytes that change nesting, quotes included because brackets inside strings do not count.
fn is_structural(c: u8) -> bool {
    matches!(c, b'"' | b'{' | b'[' | b'}' | b']')
}

fn is_delimiter(c: u8) -> bool {
    matches!(c, b',' | b'}' | b']') || is_ws(c)
}

/// The index of the first byte in `s` that ends a run of plain string content: a quote, a
/// backslash, or with `controls` a byte below 0x20.
///
/// Strings are most of a frame's bytes (tool results are mostly text), so this looks at eight
/// bytes per step, in safe code, the way serde_json's own string skipping does.
#[inline]
fn find_special(s: &[u8], controls: bool) -> Option<usize> {
    let mut chunks = s.chunks_exact(8);
    let mut base = 0;
    for chunk in chunks.by_ref() {
        // `chunks_exact` gives eight bytes, so this is one load; the fallback is unreachable.
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([b' '; 8]));
        let hits = if controls {
            special_lanes(word)
        } else {
            lanes_equal(word, b'"') | lanes_equal(word, b'\\')
        };
        if hits != 0 {
            // Lane k holds byte k, and the lowest flagged lane is always a real hit.
            return Some(base + (hits.trailing_zeros() / 8) as usize);
        }
        base += 8;
    }
    let special = |c: u8| c == b'"' || c == b'\\' || (controls && c < 0x20);
    chunks.remainder().iter().position(|&c| special(c)).map(|k| base + k)
}

/// The lanes of `word` that end plain string content: a quote, a backslash or a control
/// character (with [`lanes_below`]'s caveat: only the lowest flagged lane is sure).
#[inline]
fn special_lanes(word: u64) -> u64 {
    // XOR with 0x02 maps the quote (0x22) to 0x20 and the control characters onto themselves,
    // and moves nothing else below 0x21: one `lanes_below` finds both. Each term keeps
    // `lanes_below`'s caveat, and so does their union; the high-bit mask is applied once.
    let quote_or_control = word ^ (LANES * 0x02);
    let backslash = word ^ (LANES * u64::from(b'\\'));
    ((quote_or_control.wrapping_sub(LANES * 0x21) & !quote_or_control)
        | (backslash.wrapping_sub(LANES) & !backslash))
        & (LANES * 0x80)
}

/// 0x01 in each of a `u64`'s eight byte lanes.
const LANES: u64 = u64::from_le_bytes([1; 8]);

/// Sets the high bit of each byte lane of `word` whose value is below `n` (at most 0x80).
///
/// A lane at or above `n` never borrows from the next one, so every lane below the first real
/// hit stays clear. Lanes above it may be false positives, and callers only use the lowest.
pub(crate) fn lanes_below(word: u64, n: u8) -> u64 {
    word.wrapping_sub(LANES * u64::from(n)) & !word & (LANES * 0x80)
}

/// Sets the high bit of each byte lane of `word` equal to `byte`, with the same caveat as
/// [`lanes_below`].
pub(crate) fn lanes_equal(word: u64, byte: u8) -> u64 {
    lanes_below(word ^ (LANES * u64::from(byte)), 1)
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

fn has_escape(s: &str) -> bool {
    s.as_bytes().contains(&b'\\')
}

fn unescape(raw: &str) -> Cow<'_, str> {
    if !has_escape(raw) {
        return Cow::Borrowed(raw);
    }
    // Unescaping only shrinks text, so one allocation of the raw length is always enough.
    let mut out = String::with_capacity(raw.len());
    out.extend(Unescape(raw.chars()));
    Cow::Owned(out)
}

/// The characters of a validated string's body, with escapes decoded.
struct Unescape<'a>(Chars<'a>);

impl Iterator for Unescape<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        let c = self.0.next()?;
        if c != '\\' {
            return Some(c);
        }
        Some(match self.0.next()? {
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => self.unicode(),
            quoted => quoted, // `"`, `\` and `/` stand for themselves
        })
    }
}

impl Unescape<'_> {
    /// Decodes the code point after `\u`. This includes the `\uXXXX` low half when the first
    /// unit is a high surrogate, since validation guaranteed it is there. If that guarantee were
    /// ever broken, the result would be U+FFFD, not a panic.
    fn unicode(&mut self) -> char {
        let Some(unit) = self.hex4() else {
            return char::REPLACEMENT_CHARACTER;
        };
        let code = if (0xD800..0xDC00).contains(&unit) {
            let low = match (self.0.next(), self.0.next()) {
                (Some('\\'), Some('u')) => self.hex4(),
                _ => None,
            };
            match low {
                Some(low @ 0xDC00..=0xDFFF) => 0x1_0000 + ((unit - 0xD800) << 10) + (low - 0xDC00),
                _ => return char::REPLACEMENT_CHARACTER,
            }
        } else {
            unit
        };
        char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER)
    }

    fn hex4(&mut self) -> Option<u32> {
        (0..4).try_fold(0, |acc, _| Some((acc << 4) | self.0.next()?.to_digit(16)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ttlMs` in any notation of a whole number; negatives and fractions are not.
    #[test]
    fn whole_numbers_in_every_notation() {
        for (text, n) in [
            ("0", Some(0)),
            ("300000", Some(300_000)),
            ("300000.0", Some(300_000)),
            ("3e5", Some(300_000)),
            ("3E+5", Some(300_000)),
            ("-0", Some(0)),
            ("99999999999999999999999", Some(u64::MAX)),
            ("1e300", Some(u64::MAX)),
            ("-1", None),
            ("1.5", None),
            ("-1e3", None),
            ("", None),
        ] {
            assert_eq!(whole_number(text), n, "{text}");
        }
    }

    use serde_json::Value;

    /// Valid documents: each must parse, agree with serde_json, and read back the same strings,
    /// numbers and structure.
    const VALID: &[&str] = &[
        // scalars
        "0",
        "-0",
        "1",
        "-1",
        "42",
        "1.5",
        "-0.0",
        "1e5",
        "1E5",
        "1e+5",
        "1e-5",
        "0.1e-0",
        "123.456e+78",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "9223372036854775807",
        "9223372036854775808",
        "1e308",
        "-1e308",
        "1.7976931348623157e308",
        "1e-400",
        "0e400",
        "0.0e99999999999999999999",
        "1e-99999999999999999999",
        "123456789012345678901234567890",
        "true",
        "false",
        "null",
        r#""""#,
        r#""plain""#,
        r#""\"\\\/\b\f\n\r\t""#,
        r#""\u0000""#,
        r#""\u00e9\u00E9""#,
        r#""\ud83d\ude00""#,
        r#""\uD834\uDD1E tail""#,
        r#""\uFFFF\uE000\uD7FF""#,
        "\"caf\u{e9} \u{1f600} \u{7f}\"",
        // containers
        "[]",
        "{}",
        "[1]",
        "[1,2,3]",
        " [ 1 , [ ] , { } , \"x\" ] ",
        r#"{"a":1}"#,
        r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
        "{ \"a\" : 1 , \"b\" : 2 }",
        "\t\r\n{\n\t\"k\"\r:\n\"v\"\t}\r\n",
        "{\"a\":1,\n\t\"b\":[1,\r\n2 ],\r\"c\"\n:{ },\"d\" :{\"e\":{}\t}\n}",
        r#"{"a":1,"a":2}"#,
        r#"{"":0}"#,
        r#"{"\u0041":"\u0041","A":"B"}"#,
        r#"{"a\"b":{"c\\d":[]}}"#,
        r#"[[[[[[[[[[]]]]]]]]]]"#,
        r#"[{"a":[{"b":[{}]}]}]"#,
        r#"{"jsonrpc":"2.0","id":42,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"x","version":"1"}},"content":[{"type":"text","text":"hi"}],"isError":false,"resultType":"complete"}}"#,
        r#"{"jsonrpc":"2.0","id":"7","error":{"code":-32602,"message":"bad \"x\"","data":null}}"#,
    ];

    /// Invalid documents and the error each must produce. serde_json must reject them too.
    const INVALID: &[(&[u8], JsonError)] = &[
        (b"", JsonError::Empty),
        (b" \t\r\n", JsonError::Empty),
        (b"\xff", JsonError::NotUtf8),
        (b"\"\xc3\x28\"", JsonError::NotUtf8),
        (b"\xef\xbb\xbf1", JsonError::Syntax), // a byte-order mark
        (b"\x0c1", JsonError::Syntax),         // form feed is not JSON whitespace
        (b"1\x0c", JsonError::Trailing),
        // trailing garbage
        (b"1 2", JsonError::Trailing),
        (b"[] []", JsonError::Trailing),
        (b"{}}", JsonError::Trailing),
        (b"nulll", JsonError::Trailing),
        (b"1x", JsonError::Trailing),
        (b"\"a\"\"", JsonError::Trailing),
        (b"1\0", JsonError::Trailing),
        // literals
        (b"tru", JsonError::Syntax),
        (b"True", JsonError::Syntax),
        (b"nul", JsonError::Syntax),
        (b"NaN", JsonError::Syntax),
        (b"Infinity", JsonError::Syntax),
        (b"-Infinity", JsonError::Syntax),
        (b"undefined", JsonError::Syntax),
        // numbers
        (b"01", JsonError::Syntax),
        (b"-01", JsonError::Syntax),
        (b"00", JsonError::Syntax),
        (b"[01]", JsonError::Syntax),
        (b"-", JsonError::Syntax),
        (b"+1", JsonError::Syntax),
        (b".5", JsonError::Syntax),
        (b"1.", JsonError::Syntax),
        (b"1.e5", JsonError::Syntax),
        (b"1e", JsonError::Syntax),
        (b"1e+", JsonError::Syntax),
        (b"1e-", JsonError::Syntax),
        (b"0x10", JsonError::Trailing),
        (b"1_000", JsonError::Trailing),
        (b"- 1", JsonError::Syntax),
        (b"1e400", JsonError::NumberOutOfRange),
        (b"-1e400", JsonError::NumberOutOfRange),
        (b"1e99999999999999999999", JsonError::NumberOutOfRange),
        (b"1.7976931348623158e308", JsonError::NumberOutOfRange),
        (b"[1,1e309]", JsonError::NumberOutOfRange),
        // strings
        (b"\"", JsonError::Syntax),
        (b"\"abc", JsonError::Syntax),
        (b"\"a\nb\"", JsonError::Syntax),
        (b"\"a\tb\"", JsonError::Syntax),
        (b"\"\x00\"", JsonError::Syntax),
        (b"\"\x1f\"", JsonError::Syntax),
        (br#""\x""#, JsonError::Syntax),
        (br#""\a""#, JsonError::Syntax),
        (br#""\'""#, JsonError::Syntax),
        (br#""\U0041""#, JsonError::Syntax),
        (br#""\u12""#, JsonError::Syntax),
        (br#""\u12g4""#, JsonError::Syntax),
        (br#""\"#, JsonError::Syntax),
        (b"'a'", JsonError::Syntax),
        // surrogates
        (br#""\ud800""#, JsonError::Syntax),
        (br#""\udbff x""#, JsonError::Syntax),
        (br#""\udc00""#, JsonError::Syntax),
        (br#""\udfff\ud800""#, JsonError::Syntax),
        (br#""\ud800\ud800\udc00""#, JsonError::Syntax),
        (br#""\ud800\u0041""#, JsonError::Syntax),
        (br#""\ud800\n""#, JsonError::Syntax),
        (br#""\ud800\udc0""#, JsonError::Syntax),
        // containers
        (b"[", JsonError::Syntax),
        (b"]", JsonError::Syntax),
        (b"{", JsonError::Syntax),
        (b"[1,]", JsonError::Syntax),
        (b"[,1]", JsonError::Syntax),
        (b"[1 2]", JsonError::Syntax),
        (b"[1,,2]", JsonError::Syntax),
        (b"[}", JsonError::Syntax),
        (b"{]", JsonError::Syntax),
        (b"{\"a\":1]", JsonError::Syntax),
        (b"[1}", JsonError::Syntax),
        (b"{\"a\":1,}", JsonError::Syntax),
        (b"{\"a\":1, }", JsonError::Syntax),
        (b"{\"a\":1,\n\t1:2}", JsonError::Syntax),
        (b"{,}", JsonError::Syntax),
        (b"{\"a\"}", JsonError::Syntax),
        (b"{\"a\" 1}", JsonError::Syntax),
        (b"{\"a\":}", JsonError::Syntax),
        (b"{a:1}", JsonError::Syntax),
        (b"{1:1}", JsonError::Syntax),
        (b"{null:1}", JsonError::Syntax),
        (b"{\"a\"::1}", JsonError::Syntax),
        (b"{\"a\":1 \"b\":2}", JsonError::Syntax),
        (b"[\"a\" : 1]", JsonError::Syntax),
    ];

    fn serde_ok(input: &[u8]) -> bool {
        serde_json::from_slice::<Value>(input).is_ok()
    }

    /// Walks a parsed value and its serde_json twin together, requiring the same structure and
    /// the same unescaped strings and numbers.
    fn assert_same(raw: RawJson<'_>, value: &Value) {
        let text = raw.text();
        assert_eq!(parse(text.as_bytes()), Ok(raw), "{text} reparses to itself");
        match value {
            Value::Null => assert!(raw.is_null() && raw.kind() == Kind::Null, "{text}"),
            Value::Bool(b) => assert_eq!(raw.as_bool(), Some(*b), "{text}"),
            Value::String(s) => assert_eq!(raw.as_str().as_deref(), Some(s.as_str()), "{text}"),
            Value::Number(n) => {
                assert_eq!(raw.kind(), Kind::Number, "{text}");
                assert_eq!(raw.as_u64(), n.as_u64(), "{text}");
                assert_eq!(raw.as_i64(), n.as_i64(), "{text}");
                let (ours, theirs) = (raw.as_f64().unwrap(), n.as_f64().unwrap());
                assert!(close(ours, theirs), "{text}: {ours} vs {theirs}");
            }
            Value::Array(items) => {
                assert_eq!(raw.kind(), Kind::Array, "{text}");
                assert_eq!(raw.elements().count(), items.len(), "{text}");
                raw.elements().zip(items).for_each(|(r, v)| assert_same(r, v));
            }
            Value::Object(map) => {
                assert_eq!(raw.kind(), Kind::Object, "{text}");
                for (key, member) in raw.members() {
                    let name = key.as_str();
                    assert!(key.eq_str(&name) && map.contains_key(&*name), "{text}");
                    let first = raw.members().find(|(k, _)| k.as_str() == name);
                    assert_eq!(raw.get(&name), first.map(|(_, v)| v), "{text}");
                    // serde_json keeps the last duplicate, so compare against the last one.
                    let last = raw.members().filter(|(k, _)| k.eq_str(&name)).last();
                    if last.map(|(_, v)| v) == Some(member) {
                        assert_same(member, &map[&*name]);
                    }
                }
            }
        }
    }

    /// serde_json's default float parse is not correctly rounded, so allow a few ULPs (and noise
    /// below the smallest normal float).
    fn close(a: f64, b: f64) -> bool {
        let diff = (a - b).abs();
        diff <= 8.0 * f64::EPSILON * a.abs().max(b.abs()) || diff <= f64::MIN_POSITIVE
    }

    #[test]
    fn valid_cases_agree_with_serde_json() {
        for case in VALID {
            let value: Value = serde_json::from_str(case).unwrap();
            let raw = parse(case.as_bytes()).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(raw.text(), case.trim_matches(|c| is_ws(c as u8)));
            assert_same(raw, &value);
        }
    }

    #[test]
    fn invalid_cases_fail_like_serde_json() {
        for (case, error) in INVALID {
            let shown = String::from_utf8_lossy(case);
            assert_eq!(parse(case), Err(*error), "{shown}");
            assert!(!serde_ok(case), "serde_json accepts {shown}");
        }
    }

    /// The scanner is not incremental, so the analogue of the codec tests' "split at every
    /// offset" is to cut every case at every offset and every byte. Each piece must get the same
    /// accept-or-reject decision as serde_json.
    #[test]
    fn every_prefix_and_suffix_agrees_with_serde_json() {
        let cases = VALID.iter().map(|c| c.as_bytes());
        for case in cases.chain(INVALID.iter().map(|(c, _)| *c)) {
            for cut in 0..=case.len() {
                for piece in [&case[..cut], &case[cut..]] {
                    let shown = String::from_utf8_lossy(piece);
                    assert_eq!(parse(piece).is_ok(), serde_ok(piece), "{shown}");
                }
            }
        }
    }

    #[test]
    fn valid_cases_nest_inside_arrays_and_objects() {
        for case in VALID {
            let inner = case.trim_matches(|c| is_ws(c as u8));
            let array = format!("[ {case} ,{case}]");
            let items: Vec<_> = parse(array.as_bytes()).unwrap().elements().collect();
            assert_eq!(items.iter().map(|v| v.text()).collect::<Vec<_>>(), [inner, inner]);
            let object = format!("{{\"k\" :{case}, \"z\":{case} }}");
            let doc = parse(object.as_bytes()).unwrap();
            assert_eq!(doc.get("k").map(RawJson::text), Some(inner), "{object}");
            assert_eq!(doc.get("z").map(RawJson::text), Some(inner), "{object}");
        }
    }

    /// The documented exception. If serde_json ever stops reserving the key, this test fails
    /// and the exception (and the fuzz target's skip) can go.
    #[test]
    fn raw_value_token_is_an_ordinary_key() {
        let doc = br#"{"$serde_json::private::RawValue":""}"#;
        let raw = parse(doc).unwrap();
        assert_eq!(raw.get("$serde_json::private::RawValue").map(RawJson::text), Some(r#""""#));
        assert!(!serde_ok(doc));
        let doc = br#"{"$serde_json::private::RawValue":"[1]"}"#;
        assert_eq!(serde_json::from_slice::<Value>(doc).unwrap(), serde_json::json!([1]));
    }

    #[test]
    fn depth_limit_matches_serde_json() {
        let nest = |depth: usize, open: &str, inner: &str, close: &str| {
            format!("{}{inner}{}", open.repeat(depth), close.repeat(depth))
        };
        for (open, inner, close) in [("[", "", "]"), ("{\"a\":", "1", "}"), ("[{\"a\":", "0", "}]")]
        {
            // The mixed pattern adds two levels per repeat.
            let per = if open.len() > 5 { 2 } else { 1 };
            let ok = nest(usize::from(MAX_DEPTH) / per, open, inner, close);
            assert!(parse(ok.as_bytes()).is_ok() && serde_ok(ok.as_bytes()), "{ok}");
            let deep = nest(usize::from(MAX_DEPTH) / per + 1, open, inner, close);
            assert_eq!(parse(deep.as_bytes()), Err(JsonError::TooDeep), "{deep}");
            assert!(!serde_ok(deep.as_bytes()));
        }
        let exact = |depth: usize| nest(depth, "[", "", "]");
        assert!(parse(exact(127).as_bytes()).is_ok() && serde_ok(exact(127).as_bytes()));
        assert_eq!(parse(exact(128).as_bytes()), Err(JsonError::TooDeep));
        assert!(!serde_ok(exact(128).as_bytes()));
        assert_eq!(parse(exact(129).as_bytes()), Err(JsonError::TooDeep));
        // Empty containers count too, as do unclosed ones: the limit trips before the syntax
        // error, with no recursion.
        assert_eq!(parse("[".repeat(100_000).as_bytes()), Err(JsonError::TooDeep));
        let wide = format!("[{}0]", "[],".repeat(10_000));
        assert_eq!(parse(wide.as_bytes()).map(|v| v.elements().count()), Ok(10_001));
    }

    /// Numbers on both sides of f64::MAX, where serde_json's rounding decides, and the range
    /// rule's corner cases: long significands, fraction digits after a full significand, and
    /// exponents that overflow `i32`.
    #[test]
    fn number_range_matches_serde_json() {
        let mut cases: Vec<String> = Vec::new();
        let mantissas = [
            "1",
            "9",
            "17",
            "18",
            "179769313486231",
            "17976931348623157",
            "17976931348623158",
            "17976931348623159",
            "1797693134862315708",
            "1797693134862315807",
            "1797693134862315808",
            "18446744073709551615",
            "18446744073709551616",
            "17976931348623157081452742373170435679",
            "99999999999999999999",
        ];
        for m in mantissas {
            for exp in 280..=312 {
                cases.push(format!("{m}e{exp}"));
                cases.push(format!("-{m}E+{exp}"));
                if m.len() > 1 {
                    let (int, frac) = m.split_at(1);
                    cases.push(format!("{int}.{frac}e{exp}"));
                }
                cases.push(format!("0.000{m}e{}", exp + 3));
            }
        }
        let long = format!("1{}", "0".repeat(308));
        cases.push(long.clone());
        cases.push(format!("{long}0"));
        cases.push(format!("17976931348623158{}", "0".repeat(292)));
        cases.push(format!("17976931348623157{}", "9".repeat(292)));
        cases.push(format!("1844674407370955161{}.5e270", "9".repeat(20)));
        cases.push(format!("1844674407370955161{}.9e270", "9".repeat(20)));
        cases.push(format!("0.{}1e400", "0".repeat(100)));
        cases.push(format!("0.{}e400", "0".repeat(100)));
        cases.push("1e2147483647".into());
        cases.push("1e2147483648".into());
        cases.push("0e2147483648".into());
        cases.push("1e-2147483648".into());
        cases.push("0.1e-2147483647".into());
        let mut rejected = 0;
        for case in &cases {
            let ours = parse(case.as_bytes());
            assert_eq!(ours.is_ok(), serde_ok(case.as_bytes()), "{case}: {ours:?}");
            if let Ok(raw) = ours {
                assert_same(raw, &serde_json::from_str(case).unwrap());
            } else {
                rejected += 1;
                assert_eq!(ours, Err(JsonError::NumberOutOfRange), "{case}");
            }
        }
        assert!(rejected > 100 && rejected < cases.len() - 100, "{rejected}");
    }

    /// The eight-lane search must find exactly what a byte-by-byte search finds, at every
    /// offset and next to bytes that could confuse the lane arithmetic (0x00, 0x1f, 0x20, 0x7f,
    /// 0x80, 0xff, and the neighbours of `"` and `\`).
    #[test]
    fn find_special_matches_a_byte_scan() {
        let noise = [0x00, 0x1f, 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff];
        for len in 0..24 {
            for at in 0..len {
                for special in [b'"', b'\\', 0x00, 0x1f] {
                    for &fill in &noise[2..] {
                        let mut bytes = vec![fill; len];
                        bytes[at] = special;
                        // A second hit later on, where a stray borrow could show up first.
                        if at + 1 < len {
                            bytes[len - 1] = b'\\';
                        }
                        for controls in [false, true] {
                            let hit = |c: u8| c == b'"' || c == b'\\' || (controls && c < 0x20);
                            let naive = bytes.iter().position(|&c| hit(c));
                            assert_eq!(find_special(&bytes, controls), naive, "{bytes:x?}");
                        }
                    }
                }
            }
            let plain: Vec<u8> = (0..len).map(|k| noise[2 + k % (noise.len() - 2)]).collect();
            assert_eq!(find_special(&plain, true), None, "{plain:x?}");
        }
    }

    /// Long frames' string values take memchr's search past [`LONG_RUN`] bytes: a quote, a
    /// backslash (a valid or a broken escape) or a control character at every offset around and
    /// past that point, in ASCII and multi-byte content, gets serde_json's verdict.
    #[test]
    fn long_strings_agree_with_serde_json_wherever_the_special_byte_is() {
        let fills: [&str; 3] = ["x", "é", "\u{1F600}"];
        let specials: [&str; 6] = ["\"", "\\n", "\\q", "\u{1}", "\u{1f}", "\\u00e9"];
        for fill in fills {
            for at in 0..160 {
                for special in specials {
                    let mut text = String::from("\"");
                    (0..at).for_each(|_| text.push_str(fill));
                    text.push_str(special);
                    (0..70).for_each(|_| text.push_str(fill));
                    text.push('"');
                    // Alone, and in a frame long enough for the long path (trailing spaces).
                    let long = format!("{text}{}", " ".repeat(LONG_FRAME));
                    for frame in [&text, &long] {
                        let verdict = parse(frame.as_bytes()).is_ok();
                        assert_eq!(verdict, serde_ok(frame.as_bytes()), "{fill} {at} {special:?}");
                        if let Ok(raw) = parse(frame.as_bytes()) {
                            assert_same(raw, &serde_json::from_str(frame).unwrap());
                        }
                    }
                }
            }
        }
        // Content to the end with no closing quote, and a string that is long and clean.
        let open = format!("[\"{}", "x".repeat(LONG_FRAME));
        assert_eq!(parse(open.as_bytes()), Err(JsonError::Syntax));
        let clean = format!("{open}\"]");
        assert_eq!(parse(clean.as_bytes()).map(|r| r.text().len()), Ok(LONG_FRAME + 4));
    }

    /// `special_lanes`' lowest flagged lane is the first quote, backslash or control byte, for
    /// every byte value in every lane, behind plain bytes, ASCII or not, and before any others.
    #[test]
    fn the_lowest_special_lane_is_the_first_special_byte() {
        let special = |c: u8| c == b'"' || c == b'\\' || c < 0x20;
        for fill in [b'a', b' ', b'!', b'#', b'[', b']', 0x7f, 0x80, 0xc3, 0xff] {
            for lane in 0..8 {
                for byte in 0..=u8::MAX {
                    for after in [fill, b'"', 0x00, 0xff] {
                        let mut word = [after; 8];
                        word[..lane].fill(fill);
                        word[lane] = byte;
                        let first = word.iter().position(|&c| special(c));
                        let hits = special_lanes(u64::from_le_bytes(word));
                        let found = (hits != 0).then(|| (hits.trailing_zeros() / 8) as usize);
                        assert_eq!(found, first, "{word:?}");
                    }
                }
            }
        }
    }

    /// `non_digit_lanes`' lowest flagged lane is the first byte that is not a digit, for every
    /// byte value in every lane, behind digits, and before any others.
    #[test]
    fn the_lowest_non_digit_lane_is_the_first_non_digit() {
        for digit in [b'0', b'5', b'9'] {
            for lane in 0..8 {
                for byte in 0..=u8::MAX {
                    for after in [digit, b',', 0x00, 0x39, 0x3a, 0x7f, 0x80, 0xff] {
                        let mut word = [after; 8];
                        word[..lane].fill(digit);
                        word[lane] = byte;
                        let first = word.iter().position(|c| !c.is_ascii_digit());
                        let stops = non_digit_lanes(u64::from_le_bytes(word));
                        let found = (stops != 0).then(|| (stops.trailing_zeros() / 8) as usize);
                        assert_eq!(found, first, "{word:?}");
                        // And the run as `skip_digits` finds it, eight bytes or fewer at a time.
                        let run = first.unwrap_or(8);
                        assert_eq!(skip_digits(&word, 0), run, "{word:?}");
                        let mut longer = [b'1'; 19].to_vec();
                        longer.extend_from_slice(&word);
                        assert_eq!(skip_digits(&longer, 0), 19 + run, "{longer:?}");
                    }
                }
            }
        }
    }

    const REPLY: &str = r#"{"jsonrpc":"2.0","id":42,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"x","version":"1"}},"content":[{"type":"text","text":"hi"}],"isError":false,"resultType":"complete"}}"#;

    /// What `parse_visit` reports for `text`, as `(parent, key, value)` in report order.
    fn visits(text: &str) -> Vec<(Option<&str>, &str, &str)> {
        let mut all = Everything::default();
        let parsed = parse_visit(text.as_bytes(), &mut all);
        assert!(parsed.is_ok(), "{text}");
        let key = |slot: u8| all.keys[usize::from(slot)];
        all.seen
            .iter()
            .map(|&(slot, value)| (key(slot).0.map(key).map(|k| k.1), key(slot).1, value))
            .collect()
    }

    /// A visitor that wants every member: each key read gets a new slot.
    #[derive(Default)]
    struct Everything<'a> {
        /// Each slot's parent slot and key.
        keys: Vec<(Option<u8>, &'a str)>,
        seen: Vec<(u8, &'a str)>,
    }

    impl<'a> Visitor<'a> for Everything<'a> {
        fn slot(&mut self, parent: Option<u8>, key: &[u8]) -> u8 {
            // Keys are validated UTF-8 with their escapes in place; leak a copy for the test.
            let key: &'a str = String::from_utf8(key.to_vec()).unwrap().leak();
            self.keys.push((parent, key));
            u8::try_from(self.keys.len() - 1).unwrap()
        }

        fn value(&mut self, slot: u8, value: RawJson<'a>) {
            assert_ne!(slot, SKIP);
            self.seen.push((slot, value.text()));
        }
    }

    /// A visitor that skips every top-level member except `c`: nothing inside a skipped member
    /// is asked about or reported.
    #[test]
    fn skipped_members_hide_their_members() {
        struct OnlyC(Vec<(Option<u8>, String)>, Vec<String>);
        impl<'a> Visitor<'a> for OnlyC {
            fn slot(&mut self, parent: Option<u8>, key: &[u8]) -> u8 {
                self.0.push((parent, String::from_utf8(key.to_vec()).unwrap()));
                if parent.is_none() && key == b"c" {
                    7
                } else {
                    SKIP
                }
            }
            fn value(&mut self, slot: u8, value: RawJson<'a>) {
                assert_eq!(slot, 7);
                self.1.push(value.text().to_owned());
            }
        }
        let mut v = OnlyC(Vec::new(), Vec::new());
        parse_visit(br#"{"a":{"x":1},"b":[{"y":2}],"c":{"z":3}}"#, &mut v).unwrap();
        let asked: Vec<_> = v.0.iter().map(|(p, k)| (*p, k.as_str())).collect();
        assert_eq!(asked, [(None, "a"), (None, "b"), (None, "c"), (Some(7), "z")]);
        assert_eq!(v.1, [r#"{"z":3}"#]);
    }

    #[test]
    fn visits_two_object_levels_in_one_pass() {
        let (head, result) = REPLY.split_at(34);
        assert_eq!(
            visits(REPLY),
            [
                (None, "jsonrpc", r#""2.0""#),
                (None, "id", "42"),
                (
                    Some("result"),
                    "_meta",
                    r#"{"io.modelcontextprotocol/serverInfo":{"name":"x","version":"1"}}"#
                ),
                (Some("result"), "content", r#"[{"type":"text","text":"hi"}]"#),
                (Some("result"), "isError", "false"),
                (Some("result"), "resultType", r#""complete""#),
                (None, "result", &result[..result.len() - 1]),
            ]
        );
        assert!(head.ends_with(r#""result":"#));
        // Whitespace, empty containers, escaped keys and duplicates are reported as they are.
        assert_eq!(
            visits(" { \"a\" : { } , \"b\":[ ] ,\"a\\u0062\":{\"x\" : 1 , \"x\":\"y\" } } "),
            [
                (None, "a", "{ }"),
                (None, "b", "[ ]"),
                (Some("a\\u0062"), "x", "1"),
                (Some("a\\u0062"), "x", r#""y""#),
                (None, "a\\u0062", r#"{"x" : 1 , "x":"y" }"#),
            ]
        );
        // Members of objects inside arrays, and anything deeper than two levels, are not.
        assert_eq!(visits(r#"[{"a":1}]"#), []);
        assert_eq!(
            visits(r#"{"a":[{"b":1}],"c":{"d":{"e":2}}}"#),
            [
                (None, "a", r#"[{"b":1}]"#),
                (Some("c"), "d", r#"{"e":2}"#),
                (None, "c", r#"{"d":{"e":2}}"#),
            ]
        );
        assert_eq!(visits("7"), []);
    }

    /// `parse` and `parse_visit` give the same verdict, at the top and at visited depths.
    #[test]
    fn visiting_changes_no_verdict() {
        let valid = VALID.iter().map(|v| v.as_bytes());
        for case in valid.chain(INVALID.iter().map(|(b, _)| *b)) {
            let nested = [br#"{"a":{"b":"#, case, br#"},"c":"#, case, b"}"].concat();
            for text in [case, &nested[..]] {
                let visited = parse_visit(text, &mut Everything::default()).map(RawJson::text);
                assert_eq!(visited, parse(text).map(RawJson::text), "{text:?}");
            }
        }
    }

    #[test]
    fn get_members_and_elements_walk_a_reply() {
        let reply = parse(REPLY.as_bytes()).unwrap();
        assert_eq!(reply.kind(), Kind::Object);
        assert_eq!(reply.get("jsonrpc").and_then(RawJson::as_str).as_deref(), Some("2.0"));
        assert_eq!(reply.get("id").and_then(RawJson::as_u64), Some(42));
        assert_eq!(reply.get("missing"), None);
        let result = reply.get("result").unwrap();
        let keys: Vec<_> = result.members().map(|(k, _)| k.raw()).collect();
        assert_eq!(keys, ["_meta", "content", "isError", "resultType"]);
        let info =
            result.get("_meta").and_then(|m| m.get("io.modelcontextprotocol/serverInfo")).unwrap();
        assert_eq!(info.text(), r#"{"name":"x","version":"1"}"#);
        let content: Vec<_> = result.get("content").unwrap().elements().collect();
        assert_eq!(content.len(), 1);
        assert_eq!(content[0].get("text").and_then(RawJson::as_str).as_deref(), Some("hi"));
        assert_eq!(result.get("isError").and_then(RawJson::as_bool), Some(false));
        // Lookups do not descend: "name" is two levels down.
        assert_eq!(result.get("name"), None);
        assert_eq!(reply.members().count(), 3);
    }

    #[test]
    fn walking_tolerates_whitespace_duplicates_and_escaped_keys() {
        let doc = parse(
            br#" { "a" : [ 1 , { "b" : "}]" } , [ ] ] , "a" : 2 ,
                "q\"k" : "\\" , "\u0041" : true , "e\/" : null } "#,
        )
        .unwrap();
        assert_eq!(doc.get("a").map(RawJson::text), Some(r#"[ 1 , { "b" : "}]" } , [ ] ]"#));
        let a: Vec<_> = doc.get("a").unwrap().elements().map(RawJson::text).collect();
        assert_eq!(a, ["1", r#"{ "b" : "}]" }"#, "[ ]"]);
        assert_eq!(doc.members().filter(|(k, _)| k.eq_str("a")).count(), 2);
        assert_eq!(doc.get("q\"k").and_then(RawJson::as_str).as_deref(), Some("\\"));
        assert_eq!(doc.get("A").and_then(RawJson::as_bool), Some(true));
        assert!(doc.get("e/").is_some_and(RawJson::is_null));
        assert_eq!(doc.get("\\u0041"), None);
        let keys: Vec<_> = doc.members().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "a", "q\"k", "A", "e/"]);
        assert!(doc.members().all(|(k, _)| !k.eq_str("")));
    }

    #[test]
    fn iterators_are_empty_for_the_wrong_kind_and_stay_finished() {
        for case in ["1", "\"{}\"", "null", "[1]", "{\"a\":[]}"] {
            let v = parse(case.as_bytes()).unwrap();
            assert_eq!(v.members().count() > 0, v.kind() == Kind::Object, "{case}");
            assert_eq!(v.elements().count() > 0, v.kind() == Kind::Array, "{case}");
            assert_eq!(v.get("a").is_some(), v.kind() == Kind::Object, "{case}");
        }
        let mut items = parse(b"[1]").unwrap().elements();
        assert!(items.next().is_some());
        assert_eq!((items.next(), items.next()), (None, None));
        assert_eq!(parse(b"[]").unwrap().elements().next(), None);
        assert_eq!(parse(b"{}").unwrap().members().count(), 0);
    }

    #[test]
    fn as_str_borrows_unless_escaped() {
        let read = |s: &'static str| parse(s.as_bytes()).unwrap().as_str().unwrap();
        assert!(matches!(read(r#""plain é""#), Cow::Borrowed("plain é")));
        assert!(matches!(read(r#""""#), Cow::Borrowed("")));
        let cases = [
            (r#""a\nb""#, "a\nb"),
            (r#""\"\\\/\b\f\r\t""#, "\"\\/\u{8}\u{c}\r\t"),
            (r#""\u00e9\u00C9""#, "éÉ"),
            (r#""x\ud83d\ude00y""#, "x😀y"),
            (r#""\u0000""#, "\0"),
        ];
        for (json, text) in cases {
            let got = read(json);
            assert!(matches!(got, Cow::Owned(_)), "{json}");
            assert_eq!(got, text, "{json}");
        }
        for other in ["1", "null", "true", "[\"a\"]", "{}"] {
            assert_eq!(parse(other.as_bytes()).unwrap().as_str(), None, "{other}");
        }
        let (key, _) = parse(br#"{"a\tb":1}"#).unwrap().members().next().unwrap();
        assert!(matches!(key.as_str(), Cow::Owned(k) if k == "a\tb"));
        assert!(key.eq_str("a\tb") && !key.eq_str("a\\tb") && !key.eq_str("a\tbc"));
        let (plain, _) = parse(br#"{"ab":1}"#).unwrap().members().next().unwrap();
        assert!(matches!(plain.as_str(), Cow::Borrowed("ab")));
    }

    #[test]
    fn number_accessors() {
        let read = |s: &'static str| parse(s.as_bytes()).unwrap();
        assert_eq!(read("0").as_u64(), Some(0));
        assert_eq!(read("18446744073709551615").as_u64(), Some(u64::MAX));
        assert_eq!(read("18446744073709551616").as_u64(), None);
        assert_eq!(read("-1").as_u64(), None);
        assert_eq!(read("1.0").as_u64(), None);
        assert_eq!(read("1e2").as_u64(), None);
        assert_eq!(read("-9223372036854775808").as_i64(), Some(i64::MIN));
        assert_eq!(read("9223372036854775807").as_i64(), Some(i64::MAX));
        assert_eq!(read("9223372036854775808").as_i64(), None);
        assert_eq!(read("-0").as_i64(), None);
        assert_eq!(read("-0").as_f64(), Some(-0.0));
        assert_eq!(read("2.5e-3").as_f64(), Some(0.0025));
        assert_eq!(read("1.7976931348623157e308").as_f64(), Some(f64::MAX));
        assert_eq!(read("\"1\"").as_u64(), None);
        assert_eq!(read("\"1\"").as_f64(), None);
        assert_eq!(read("true").as_i64(), None);
        assert_eq!(read("null").as_bool(), None);
        assert!(!read("0").is_null());
    }

    #[test]
    fn errors_display_distinctly() {
        let all = [
            JsonError::NotUtf8,
            JsonError::Syntax,
            JsonError::TooDeep,
            JsonError::Trailing,
            JsonError::Empty,
            JsonError::NumberOutOfRange,
        ];
        let shown: std::collections::HashSet<_> = all.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), all.len());
        assert!(JsonError::TooDeep.to_string().contains(&MAX_DEPTH.to_string()));
    }
}
