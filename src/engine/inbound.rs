//! Helpers of the incoming path: an id's decimal text without allocation, and the id of an
//! oversize message found from its ends.

use smallvec::SmallVec;

use crate::proto::json::{self};
use crate::proto::jsonrpc::WireId;

/// An id's decimal text on the stack.
pub(super) fn itoa_buf(id: WireId) -> SmallString {
    let mut s = SmallString::default();
    use std::fmt::Write;
    let _ = write!(s, "{}", id.get());
    s
}

/// A short string without heap allocation (ids have at most 16 digits).
#[derive(Default)]
pub(super) struct SmallString {
    buf: [u8; 24],
    len: usize,
}

impl SmallString {
    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

impl std::fmt::Write for SmallString {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Finds the JSON-RPC id of an oversize message from its ends: `{"jsonrpc":"2.0","id":N,` or
/// `{"id":N,` at the start (Python SDKs, sorted-key writers) or `"id":N}` at the very end
/// (TypeScript SDKs).
/// The id of a frame that is JSON but no JSON-RPC message, when it is shaped like a reply
/// (an `id`, no `method`): its call can then be failed.
pub(super) fn reply_id(frame: &[u8]) -> Option<WireId> {
    let message = json::parse(frame).ok()?;
    if message.get("method").is_some() {
        return None;
    }
    WireId::parse(message.get("id")?)
}

pub(super) fn sniff_id(head: &[u8], tail: &[u8]) -> Option<WireId> {
    fn digits(s: &[u8]) -> Option<WireId> {
        let end = s.iter().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
        WireId::parse(json::parse(s.get(..end)?).ok()?)
    }
    let compact: SmallVec<[u8; 64]> =
        head.iter().copied().filter(|b| !b.is_ascii_whitespace()).collect();
    let after_brace = compact.strip_prefix(b"{".as_slice())?;
    let after_version =
        after_brace.strip_prefix(b"\"jsonrpc\":\"2.0\",".as_slice()).unwrap_or(after_brace);
    if let Some(rest) = after_version.strip_prefix(b"\"id\":".as_slice()) {
        return digits(rest);
    }
    let tail = tail.trim_ascii_end();
    let body = tail.strip_suffix(b"}")?;
    let start = body.iter().rposition(|b| !b.is_ascii_digit())? + 1;
    let prefix = body[..start].trim_ascii_end();
    let prefix = prefix.strip_suffix(b":")?.trim_ascii_end();
    prefix.ends_with(b"\"id\"").then(|| digits(&body[start..])).flatten()
}
