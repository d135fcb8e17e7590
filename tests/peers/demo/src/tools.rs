//! The tools: their definitions for tools/list and the ones that need no state.

use serde_json::{json, Map, Value};

use crate::slow::SLOW_MAX_MS;

/// The tools for tools/list: the five everyone sees, then, when `resilience` asks for them,
/// the tools the resilience tests use.
pub(crate) fn tool_definitions(resilience: bool) -> Vec<Value> {
    let mut tools = vec![
        json!({
            "name": "echo",
            "description": "Echo back the `text` argument.",
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
            "annotations": {"readOnlyHint": true},
        }),
        json!({
            "name": "add",
            "description": "Add `a` and `b`; returns structuredContent {sum}.",
            "inputSchema": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
            "outputSchema": {
                "type": "object",
                "properties": {"sum": {"type": "number"}},
                "required": ["sum"],
            },
        }),
        json!({
            "name": "slow",
            "description": "Wait `ms` milliseconds, reporting progress every 100 ms; cancellable.",
            "inputSchema": {
                "type": "object",
                "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": SLOW_MAX_MS}},
                "required": ["ms"],
            },
        }),
        json!({
            "name": "fail",
            "description": "Always fails with isError true.",
            "inputSchema": {"type": "object", "properties": {}},
        }),
        json!({
            "name": "write_note",
            "description": "Append `note` to an in-memory list; returns the number of notes.",
            "inputSchema": {
                "type": "object",
                "properties": {"note": {"type": "string"}},
                "required": ["note"],
            },
            "annotations": {"readOnlyHint": false, "idempotentHint": false},
        }),
    ];
    if resilience {
        tools.extend(resilience_tool_definitions());
    }
    tools
}

fn resilience_tool_definitions() -> Vec<Value> {
    vec![
        json!({
            "name": "stats",
            "description": "How many calls of each tool this server received, counted before \
                            any fault acts; structuredContent {deliveries, chargeKeys}.",
            "inputSchema": {"type": "object", "properties": {}},
            "outputSchema": {
                "type": "object",
                "properties": {
                    "deliveries": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "chargeKeys": {"type": "object", "additionalProperties": {"type": "integer"}},
                },
                "required": ["deliveries", "chargeKeys"],
            },
            "annotations": {"readOnlyHint": true},
        }),
        json!({
            "name": "lookup",
            "description": "Return the text `value-of-<key>`.",
            "inputSchema": {
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
            },
            "annotations": {"readOnlyHint": true},
        }),
        json!({
            "name": "put",
            "description": "Store `value` under `key`; storing it again changes nothing.",
            "inputSchema": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                "required": ["key", "value"],
            },
            "annotations": {"readOnlyHint": false, "idempotentHint": true},
        }),
        json!({
            "name": "charge",
            "description": "Charge `amount`; a repeated `idempotency_key` is charged once. \
                            Returns the number of charges.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number"},
                    "idempotency_key": {"type": "string"},
                },
                "required": ["amount"],
            },
            "annotations": {"readOnlyHint": false, "idempotentHint": false},
        }),
    ]
}

/// Tools whose schemas the client's `schema` feature must catch out.
pub(crate) fn schema_tool_definitions() -> Vec<Value> {
    vec![
        json!({
            "name": "bad_output",
            "description": "Returns structuredContent {sum: \"three\"}, against its outputSchema.",
            "inputSchema": {"type": "object", "properties": {}},
            "outputSchema": {
                "type": "object",
                "properties": {"sum": {"type": "number"}},
                "required": ["sum"],
            },
        }),
        json!({
            "name": "remote_ref",
            "description": "An inputSchema that refers to a schema on the network.",
            "inputSchema": {"$ref": "http://127.0.0.1:9/never-fetched.json"},
        }),
    ]
}

/// `bad_output`'s result: a string where the outputSchema wants a number.
pub(crate) fn bad_output_tool() -> Value {
    let structured = json!({"sum": "three"});
    json!({"content": [{"type": "text", "text": structured.to_string()}],
           "structuredContent": structured})
}

/// The largest result `echo`'s `repeat` makes.
const MAX_ECHO_BYTES: u64 = 1 << 20;

/// `text`, or `text` `repeat` times: the benches' large results from a small request. The
/// listed schema leaves `repeat` out (it allows other members) so listings stay as they were.
pub(crate) fn echo_tool(args: &Map<String, Value>) -> Value {
    let Some(text) = args.get("text").and_then(Value::as_str) else {
        return tool_error("echo needs a string `text`");
    };
    match args.get("repeat").map(Value::as_u64) {
        None => text_result(text),
        Some(Some(n)) if n.saturating_mul(text.len() as u64) <= MAX_ECHO_BYTES => {
            text_result(&text.repeat(n as usize))
        }
        Some(_) => tool_error("echo's `repeat` is a count up to 1 MiB of text"),
    }
}

pub(crate) fn add_tool(args: &Map<String, Value>) -> Value {
    let (Some(a), Some(b)) = (args.get("a"), args.get("b")) else {
        return tool_error("add needs numbers `a` and `b`");
    };
    // Integers stay integers (2 + 3 = 5, not 5.0); anything else is added as f64.
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) => a.checked_add(b).map(Value::from),
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => serde_json::Number::from_f64(a + b).map(Value::Number),
            _ => return tool_error("add needs numbers `a` and `b`"),
        },
    };
    let Some(sum) = sum else {
        return tool_error("the sum does not fit in a JSON number");
    };
    json!({
        "content": [{"type": "text", "text": sum.to_string()}],
        "structuredContent": {"sum": sum},
        "isError": false,
    })
}

pub(crate) fn lookup_tool(args: &Map<String, Value>) -> Value {
    match args.get("key").and_then(Value::as_str) {
        Some(key) => text_result(&format!("value-of-{key}")),
        None => tool_error("lookup needs a string `key`"),
    }
}

pub(crate) fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

/// A tool execution failure: a normal result with `isError`, not a JSON-RPC error.
pub(crate) fn tool_error(message: &str) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

/// `count` generated tools for `--bulk-tools`, made once per process (every page of every
/// listing slices the same list).
pub(crate) fn bulk_tool_definitions(count: u64) -> &'static [Value] {
    static BULK: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    BULK.get_or_init(|| {
        (0..count)
            .map(|i| {
                json!({
                    "name": format!("bulk_{i:06}"),
                    "description": format!("Generated tool {i} of a large listing."),
                    "inputSchema": {"type": "object"},
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(args: Value) -> Value {
        echo_tool(args.as_object().expect("an object"))
    }

    #[test]
    fn echo_repeats_its_text_when_asked_up_to_a_mebibyte() {
        assert_eq!(echo(json!({"text": "ab"})), text_result("ab"));
        assert_eq!(echo(json!({"text": "ab", "repeat": 3})), text_result("ababab"));
        let too_much = echo(json!({"text": "ab", "repeat": MAX_ECHO_BYTES}));
        assert_eq!(too_much["isError"], true);
        assert_eq!(echo(json!({"text": "ab", "repeat": -1}))["isError"], true);
    }
}
