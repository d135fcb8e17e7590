//! What the fuzz targets and benches reach inside the crate: not part of the API, hidden from
//! the docs, and free to change in any release (the rustls pattern).

#[cfg(any(fuzzing, test))]
pub mod fuzzing;

#[cfg(any(fuzzing, test))]
pub mod catalog_fuzz;

pub use crate::proto::jsonrpc::decode as decode_jsonrpc;

pub use crate::proto::json::{Kind, RawJson};

/// The crate's zero-copy JSON scanner (what the engine reads every frame with): the CLI reads
/// a large listing with it instead of building a `serde_json::Value` of it.
pub fn parse_json(text: &str) -> Option<RawJson<'_>> {
    crate::proto::json::parse(text.as_bytes()).ok()
}
