//! JSON-RPC messages in and out: sorting what the client sent, error objects, and the modern
//! `_meta` envelope on requests and results.

use serde_json::{json, Map, Value};

use crate::content::server_info;
use crate::server::Era;
use crate::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, META_SERVER_INFO, MODERN_VERSION};

pub(crate) const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// One well-formed JSON-RPC message from the client.
pub(crate) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// A response; this server never sends requests, so it is only logged.
    Response,
}

/// Sorts a parsed JSON value into a message kind. `Err` carries the id to answer with (null
/// when it could not be read) and the error.
pub(crate) fn classify(message: Value) -> Result<Incoming, (Value, RpcError)> {
    let Value::Object(mut object) = message else {
        return Err((Value::Null, RpcError::invalid_request("a message must be a JSON object")));
    };
    let id = match object.remove("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id),
        Some(_) => {
            return Err((Value::Null, RpcError::invalid_request("id must be a string or number")));
        }
    };
    let reply_id = id.clone().unwrap_or(Value::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((reply_id, RpcError::invalid_request("jsonrpc must be \"2.0\"")));
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) => method,
        None if object.contains_key("result") || object.contains_key("error") => {
            return Ok(Incoming::Response);
        }
        _ => {
            return Err((reply_id, RpcError::invalid_request("method must be a string")));
        }
    };
    let params = match object.remove("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(params @ Value::Object(_)) => params,
        Some(_) => {
            return Err((reply_id, RpcError::invalid_params("params must be an object")));
        }
    };
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

/// A JSON-RPC error object.
#[derive(Debug)]
pub(crate) struct RpcError {
    code: i64,
    message: String,
    data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into(), data: None }
    }

    pub(crate) fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    pub(crate) fn invalid_request(message: &str) -> RpcError {
        RpcError::new(INVALID_REQUEST, message)
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub(crate) fn method_not_found(method: &str) -> RpcError {
        RpcError::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    pub(crate) fn unsupported_version(requested: &str) -> RpcError {
        RpcError {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "Unsupported protocol version".into(),
            data: Some(json!({"supported": [MODERN_VERSION], "requested": requested})),
        }
    }

    fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

pub(crate) fn error_message(id: &Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()})
}

/// Builds a response, adding the modern result envelope (§2.2 of the wire digest) when the
/// process serves 2026-07-28. Legacy results go out exactly as the handler built them.
pub(crate) fn result_message(id: &Value, era: Era, method: &str, mut body: Value) -> Value {
    if let (Era::Modern, Value::Object(result)) = (era, &mut body) {
        // A task's `CreateTaskResult` brings its own `"task"`.
        result.entry("resultType").or_insert(json!("complete"));
        if is_cacheable(method) {
            result.insert("ttlMs".into(), json!(0));
            result.insert("cacheScope".into(), json!("private"));
        }
        result.insert("_meta".into(), json!({ META_SERVER_INFO: server_info() }));
    }
    json!({"jsonrpc": "2.0", "id": id, "result": body})
}

/// Methods whose modern results must carry `ttlMs` and `cacheScope`.
fn is_cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "prompts/list"
    )
}

/// The request's `_meta.progressToken`, when it is a valid one (a string or a number).
pub(crate) fn progress_token(params: &Value) -> Option<Value> {
    params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_number())
        .cloned()
}

/// Checks the per-request `_meta` envelope that 2026-07-28 requires (§2.1 of the wire digest).
pub(crate) fn check_modern_envelope(params: &Value) -> Result<(), RpcError> {
    let version = meta(params, META_PROTOCOL_VERSION).and_then(Value::as_str);
    let capabilities = meta(params, META_CLIENT_CAPABILITIES).filter(|c| c.is_object());
    let (Some(version), Some(_)) = (version, capabilities) else {
        return Err(RpcError::invalid_params(format!(
            "params._meta must carry `{META_PROTOCOL_VERSION}` (a string) and \
             `{META_CLIENT_CAPABILITIES}` (an object)"
        )));
    };
    if version != MODERN_VERSION {
        return Err(RpcError::unsupported_version(version));
    }
    Ok(())
}

/// Looks up `params._meta[key]`.
pub(crate) fn meta<'a>(params: &'a Value, key: &str) -> Option<&'a Value> {
    params.get("_meta").and_then(|m| m.get(key))
}
