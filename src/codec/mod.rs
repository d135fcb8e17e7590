//! Sans-IO codecs: bytes in, complete frames out. Each is incremental, capped and indifferent
//! to how its input is chunked.

pub mod ndjson;
