//! W3C trace context (`traceparent`, `tracestate`) and W3C baggage, carried in a request's
//! `_meta` (PROTOCOL.md §2.12), checked before anything is sent.
//!
//! `traceparent` is checked to the letter of W3C Trace Context §3.2: a server or collector that
//! gets a malformed one drops it, and the trace silently breaks, so a bad value is refused when
//! the call is made instead. `tracestate` and `baggage` are opaque to mcpoll: they are only
//! held to their specs' length bounds and to printable ASCII (both are header values by design).

use std::fmt;

/// W3C trace context to carry in `_meta` (`traceparent`, `tracestate`, `baggage`).
///
/// The fields are public for convenience; a call whose `traceparent` is malformed is refused
/// with [`RequestError::TraceContext`](crate::RequestError::TraceContext). Build one with
/// [`TraceContext::new`] to find out earlier.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContext {
    /// `traceparent`, e.g. `00-<32 hex>-<16 hex>-01`.
    pub traceparent: String,
    /// `tracestate`, when there is one.
    pub tracestate: Option<String>,
    /// `baggage`, when there is one.
    pub baggage: Option<String>,
}

/// Why a [`TraceContext`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceContextError {
    /// `traceparent` is not `version-traceid-parentid-flags` of the right lengths.
    Format,
    /// The version is not two lowercase hex digits, or is the invalid `ff`.
    Version,
    /// The trace id is not 32 lowercase hex digits, or is all zeros.
    TraceId,
    /// The parent id is not 16 lowercase hex digits, or is all zeros.
    ParentId,
    /// The flags are not two lowercase hex digits.
    Flags,
    /// `tracestate` has a byte that is neither printable ASCII nor a tab.
    TraceState,
    /// `baggage` has a byte that is neither printable ASCII nor a tab.
    Baggage,
}

impl fmt::Display for TraceContextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Format => "traceparent is not version-traceid-parentid-flags",
            Self::Version => "traceparent version is not two lowercase hex digits (or is ff)",
            Self::TraceId => "traceparent trace id is not 32 lowercase hex digits, or is zero",
            Self::ParentId => "traceparent parent id is not 16 lowercase hex digits, or is zero",
            Self::Flags => "traceparent flags are not two lowercase hex digits",
            Self::TraceState => "tracestate is not printable ASCII",
            Self::Baggage => "baggage is not printable ASCII",
        })
    }
}

impl std::error::Error for TraceContextError {}

/// A W3C trace id: the 16 bytes of a `traceparent`'s second field. Displays as 32 lowercase
/// hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId([u8; 16]);

impl TraceId {
    /// The id's bytes.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({self})")
    }
}

/// W3C Trace Context §3.3.1.5: at least 512 bytes of `tracestate` are propagated; a longer one
/// is cut, list-members over [`LARGE_TRACESTATE_MEMBER`] bytes first, then from the end.
const MAX_TRACESTATE: usize = 512;
const LARGE_TRACESTATE_MEMBER: usize = 128;
/// W3C Baggage §3.3.2: at least 8192 bytes are propagated; a longer one loses whole
/// list-members from its end.
const MAX_BAGGAGE: usize = 8192;

impl TraceContext {
    /// A context with this `traceparent`, checked.
    pub fn new(traceparent: &str) -> Result<Self, TraceContextError> {
        parse_traceparent(traceparent)?;
        Ok(Self { traceparent: traceparent.to_owned(), tracestate: None, baggage: None })
    }

    /// Adds a `tracestate`, checked; one over 512 bytes is cut as W3C Trace Context says
    /// (list-members over 128 bytes first, then from the end; whole members only).
    pub fn with_tracestate(mut self, tracestate: &str) -> Result<Self, TraceContextError> {
        check_opaque(tracestate, TraceContextError::TraceState)?;
        let kept = cut_list(tracestate, MAX_TRACESTATE, LARGE_TRACESTATE_MEMBER);
        self.tracestate = Some(kept);
        Ok(self)
    }

    /// Adds a `baggage`, checked; one over 8192 bytes loses whole list-members from its end.
    pub fn with_baggage(mut self, baggage: &str) -> Result<Self, TraceContextError> {
        check_opaque(baggage, TraceContextError::Baggage)?;
        self.baggage = Some(cut_list(baggage, MAX_BAGGAGE, usize::MAX));
        Ok(self)
    }

    /// Checks every part, and returns the trace id (for the call's record).
    pub fn check(&self) -> Result<TraceId, TraceContextError> {
        let id = parse_traceparent(&self.traceparent)?;
        if let Some(s) = &self.tracestate {
            check_opaque(s, TraceContextError::TraceState)?;
        }
        if let Some(b) = &self.baggage {
            check_opaque(b, TraceContextError::Baggage)?;
        }
        Ok(id)
    }

    /// The trace id, when `traceparent` is well formed.
    pub fn trace_id(&self) -> Option<TraceId> {
        parse_traceparent(&self.traceparent).ok()
    }
}

/// Printable ASCII, and tabs (the lists' optional whitespace may be one).
fn check_opaque(s: &str, e: TraceContextError) -> Result<(), TraceContextError> {
    if !s.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) {
        return Err(e);
    }
    Ok(())
}

/// A comma-separated `list` within `max` bytes, whole list-members only: members longer than
/// `large` go first, then members from the end. The list as it is when it fits.
fn cut_list(list: &str, max: usize, large: usize) -> String {
    if list.len() <= max {
        return list.to_owned();
    }
    let members = list.split(',').map(|m| m.trim_matches([' ', '\t'])).filter(|m| !m.is_empty());
    let mut kept: Vec<&str> = members.filter(|m| m.len() <= large).collect();
    let joined =
        |kept: &[&str]| kept.iter().map(|m| m.len()).sum::<usize>() + kept.len().saturating_sub(1);
    while joined(&kept) > max {
        kept.pop();
    }
    kept.join(",")
}

/// Lowercase hex only: W3C Trace Context §3.2.2 ("HEXDIGLC").
fn hex_lc(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

fn hex_bytes<const N: usize>(s: &[u8], e: TraceContextError) -> Result<[u8; N], TraceContextError> {
    let mut out = [0u8; N];
    if s.len() != 2 * N {
        return Err(e);
    }
    for (i, pair) in s.chunks_exact(2).enumerate() {
        let (Some(hi), Some(lo)) = (hex_lc(pair[0]), hex_lc(pair[1])) else { return Err(e) };
        out[i] = hi << 4 | lo;
    }
    Ok(out)
}

/// Parses `version-traceid-parentid-flags` (§3.2). Version 00 is exactly 55 bytes; a later
/// version may append `-`-separated fields, which are kept and not read (§3.2.4).
fn parse_traceparent(s: &str) -> Result<TraceId, TraceContextError> {
    let b = s.as_bytes();
    if b.len() < 55 || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
        return Err(TraceContextError::Format);
    }
    let [version] = hex_bytes::<1>(&b[..2], TraceContextError::Version)?;
    if version == 0xff {
        return Err(TraceContextError::Version);
    }
    if (version == 0 && b.len() != 55) || (b.len() > 55 && b[55] != b'-') {
        return Err(TraceContextError::Format);
    }
    let trace = hex_bytes::<16>(&b[3..35], TraceContextError::TraceId)?;
    let parent = hex_bytes::<8>(&b[36..52], TraceContextError::ParentId)?;
    hex_bytes::<1>(&b[53..55], TraceContextError::Flags)?;
    if trace == [0; 16] {
        return Err(TraceContextError::TraceId);
    }
    if parent == [0; 8] {
        return Err(TraceContextError::ParentId);
    }
    Ok(TraceId(trace))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn traceparent_table() {
        use TraceContextError::*;
        let cases: &[(&str, Result<(), TraceContextError>)] = &[
            (GOOD, Ok(())),
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", Ok(())),
            // A later version may carry more fields after the flags.
            ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra", Ok(())),
            ("", Err(Format)),
            ("00-a-b-01", Err(Format)),
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-", Err(Format)),
            ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x", Err(Format)),
            ("00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Err(Format)),
            ("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Err(Version)),
            ("0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Err(Version)),
            ("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", Err(TraceId)),
            ("00-00000000000000000000000000000000-b7ad6b7169203331-01", Err(TraceId)),
            ("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", Err(ParentId)),
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333z-01", Err(ParentId)),
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0x", Err(Flags)),
            // A multi-byte character where a hex digit belongs: refused, never sliced.
            ("00-0af7651916cd43dd8448eb211c8031é-b7ad6b7169203331-01", Err(TraceId)),
        ];
        for (input, want) in cases {
            let got = TraceContext::new(input).map(|_| ());
            assert_eq!(&got, want, "{input:?}");
        }
    }

    #[test]
    fn the_trace_id_is_the_second_field() {
        let t = TraceContext::new(GOOD).unwrap();
        assert_eq!(t.trace_id().unwrap().to_string(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(t.check().unwrap(), t.trace_id().unwrap());
    }

    #[test]
    fn tracestate_and_baggage_are_bounded_and_printable() {
        let t = TraceContext::new(GOOD).unwrap();
        assert!(t.clone().with_tracestate("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7").is_ok());
        assert_eq!(t.clone().with_tracestate("a=1\r").err(), Some(TraceContextError::TraceState));
        assert_eq!(t.clone().with_baggage("k=v\n").err(), Some(TraceContextError::Baggage));
        assert!(t.clone().with_baggage("userId=alice,serverNode=DF%2028").is_ok());
        // Set directly, then checked as a whole.
        let raw = TraceContext { baggage: Some("\u{7f}".into()), ..t };
        assert_eq!(raw.check(), Err(TraceContextError::Baggage));
    }

    /// A valid `tracestate` longer than 512 bytes (32 members is the W3C maximum) or with
    /// tabs for whitespace is cut the W3C way, not refused (which failed the call).
    #[test]
    fn a_long_tracestate_or_baggage_is_cut_at_whole_members() {
        let t = TraceContext::new(GOOD).unwrap();
        let members: Vec<String> =
            (0..32).map(|i| format!("vendor{i:02}=0123456789abcdef")).collect();
        let long = members.join(",");
        assert!(long.len() > 512);
        let cut = t.clone().with_tracestate(&long).unwrap().tracestate.unwrap();
        assert!(cut.len() <= 512 && long.starts_with(&cut), "{cut}");
        // 25 bytes a member and a comma between: 19 fit in 512.
        assert_eq!(cut.split(',').count(), 19, "whole members, from the start");
        // Large members go first, before any from the end.
        let with_large = format!("big={},{}", "x".repeat(200), members[..2].join(","));
        let padded = format!("{with_large},{}", "y=1,".repeat(80));
        let cut = t.clone().with_tracestate(&padded).unwrap().tracestate.unwrap();
        assert!(cut.starts_with("vendor00=") && !cut.contains("big="), "{cut}");
        let tabs = t.clone().with_tracestate("a=1,\tb=2").unwrap();
        assert_eq!(tabs.tracestate.as_deref(), Some("a=1,\tb=2"), "kept as given when it fits");
        let baggage: String = (0..1000).map(|i| format!("k{i}=v{i},")).collect();
        let cut = t.with_baggage(&baggage).unwrap().baggage.unwrap();
        assert!(cut.len() <= 8192 && cut.ends_with(|c: char| c.is_ascii_digit()), "{cut}");
    }
}
