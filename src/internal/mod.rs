//! What the fuzz targets and benches reach inside the crate: not part of the API, hidden from
//! the docs, and free to change in any release (the rustls pattern).

#[cfg(any(fuzzing, test))]
pub mod fuzzing;

#[cfg(any(fuzzing, test))]
pub mod catalog_fuzz;

pub use crate::proto::jsonrpc::decode as decode_jsonrpc;
