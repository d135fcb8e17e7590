//! Stateless protocol vocabulary: the JSON-RPC envelope, MCP methods, `_meta` and versions.

pub(crate) mod annotations;
pub(crate) mod challenge;
pub(crate) mod header_value;
pub(crate) mod json;
pub(crate) mod jsonrpc;
pub(crate) mod mcp;
pub(crate) mod meta;
pub(crate) mod percent;
pub(crate) mod trace;
pub(crate) mod version;
