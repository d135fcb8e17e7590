//! Sans-IO codecs: bytes in, complete frames out. Each is incremental, capped and indifferent
//! to how its input is chunked.

#[cfg(feature = "http")]
pub mod http1;
pub mod ndjson;
pub mod sse;
