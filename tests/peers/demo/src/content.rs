//! What the server is and serves besides tools: its info and capabilities, the handshake and
//! discover bodies, the resource, the prompt, and list paging.

use serde_json::{json, Value};

use crate::jsonrpc::RpcError;
use crate::{LEGACY_VERSION, MODERN_VERSION, SERVER_NAME, SERVER_VERSION};

const README_URI: &str = "demo://readme";
const README_TEXT: &str = "mcpoll demo server";

/// Items per page for every list method; small so that tests exercise pagination.
const PAGE_SIZE: usize = 2;

pub(crate) fn server_info() -> Value {
    json!({"name": SERVER_NAME, "version": SERVER_VERSION})
}

fn server_capabilities() -> Value {
    json!({"tools": {"listChanged": true}, "resources": {}, "prompts": {}, "completions": {}})
}

/// Body of the `server/discover` result; the envelope adds `resultType`, the cache hints and
/// `serverInfo`.
pub(crate) fn discover_result() -> Value {
    json!({"supportedVersions": [MODERN_VERSION], "capabilities": server_capabilities()})
}

/// The legacy handshake answer. It always offers 2025-11-25, whatever the client asked for;
/// the client decides whether it can live with that.
pub(crate) fn initialize_result() -> Value {
    json!({
        "protocolVersion": LEGACY_VERSION,
        "capabilities": server_capabilities(),
        "serverInfo": server_info(),
    })
}

pub(crate) fn resource_definitions() -> Vec<Value> {
    vec![json!({"uri": README_URI, "name": "readme", "mimeType": "text/plain"})]
}

pub(crate) fn prompt_definitions() -> Vec<Value> {
    vec![json!({
        "name": "greet",
        "description": "Ask the model to greet someone.",
        "arguments": [{"name": "name", "description": "Who to greet", "required": true}],
    })]
}

/// Returns one page of `items` under `key`. The cursor is an opaque string naming the list and
/// the offset of the next page; anything this server did not hand out is rejected with -32602
/// (§2.5 of the wire digest).
pub(crate) fn list_page(key: &str, items: &[Value], params: &Value) -> Result<Value, RpcError> {
    list_page_of(key, items, params, PAGE_SIZE)
}

/// Items per page of a listing with `--bulk-tools`.
pub(crate) const BULK_PAGE_SIZE: usize = 1000;

pub(crate) fn list_page_of(
    key: &str,
    items: &[Value],
    params: &Value,
    page_size: usize,
) -> Result<Value, RpcError> {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(cursor) => cursor
            .as_str()
            .and_then(|c| parse_cursor(key, c, items.len(), page_size))
            .ok_or_else(|| RpcError::invalid_params(format!("unknown cursor: {cursor}")))?,
    };
    let end = (start + page_size).min(items.len());
    let mut result = json!({ key: items[start..end] });
    if end < items.len() {
        result["nextCursor"] = json!(make_cursor(key, end));
    }
    Ok(result)
}

fn make_cursor(key: &str, offset: usize) -> String {
    format!("{key}.page.{offset}")
}

fn parse_cursor(key: &str, cursor: &str, len: usize, page_size: usize) -> Option<usize> {
    let offset = cursor.strip_prefix(key)?.strip_prefix(".page.")?.parse::<usize>().ok()?;
    // Only offsets this server could have produced: a later page start that still has items.
    (offset > 0 && offset < len && offset % page_size == 0).then_some(offset)
}

pub(crate) fn read_resource(params: &Value) -> Result<Value, RpcError> {
    let uri = params
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("resources/read needs a string `uri`"))?;
    if uri != README_URI {
        // 2026-07-28 reports an unknown resource as -32602 (2025-11-25 used -32002).
        return Err(RpcError::invalid_params(format!("unknown resource: {uri}")));
    }
    Ok(json!({"contents": [{"uri": README_URI, "mimeType": "text/plain", "text": README_TEXT}]}))
}

pub(crate) fn get_prompt(params: &Value) -> Result<Value, RpcError> {
    let name = params.get("name").and_then(Value::as_str);
    if name != Some("greet") {
        return Err(RpcError::invalid_params(format!("unknown prompt: {}", name.unwrap_or(""))));
    }
    let who = params
        .get("arguments")
        .and_then(|a| a.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("prompt `greet` needs the argument `name`"))?;
    Ok(json!({
        "description": "Ask the model to greet someone.",
        "messages": [{
            "role": "user",
            "content": {"type": "text", "text": format!("Please greet {who}.")},
        }],
    }))
}
