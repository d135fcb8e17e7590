//! How a host call ended: what `Engine::finish`, the one path every terminal event takes, is
//! told.

use crate::error::CallError;
use crate::proto::mcp::ResultType;

/// How a host call ended.
pub(super) enum Outcome<'a> {
    Done { json: &'a str, result_type: ResultType, is_error: bool },
    Listing { key: &'a str, items: &'a [u8], hints: super::listing::ListHints },
    Failed(CallError),
}
