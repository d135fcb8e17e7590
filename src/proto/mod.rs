//! Stateless protocol vocabulary: the JSON-RPC envelope, MCP methods, `_meta` and versions.

pub mod header_value;
pub mod json;
pub mod jsonrpc;
pub mod mcp;
pub mod meta;
pub mod version;
