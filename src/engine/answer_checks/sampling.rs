//! Sampling with tool use (2025-11-25, SEP-1577; the same shapes ride 2026-07-28 input
//! requests): the checks on a `sampling/createMessage` request before the host sees it, and on
//! the host's `CreateMessageResult` before it is sent.
//!
//! Request: `tools`/`toolChoice` only when the client declared `sampling.tools`; in
//! `messages`, a user message that carries `tool_result` blocks carries nothing else, and every
//! assistant `tool_use` is answered by a `tool_result` with its id in the next message
//! (`client/sampling.mdx`: otherwise -32602).
//!
//! Answer: `role`, `model` and `content` present; content blocks of a known type; a `tool_use`
//! names one of the offered tools (none when `toolChoice.mode` is `"none"`), has an `id` and an
//! object `input` (with the `schema` feature, checked against that tool's `inputSchema`); a
//! `stopReason` of `"toolUse"` comes with at least one `tool_use`.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::Value;

use crate::error::AnswerError;
use crate::proto::json::{self, Kind, RawJson};

/// Why a sampling request is refused (-32602). Read with the engine's own scanner, not a
/// `serde_json::Value`: this runs on every server request of a client that answers sampling,
/// and a client that never touches a `Value` links none of serde_json's tree building.
pub(crate) fn check_request(params: &str, tools_declared: bool) -> Result<(), &'static str> {
    let params = json::parse(params.as_bytes()).map_err(|_| "params are not JSON")?;
    let offers_tools = params.get("tools").is_some_and(|t| !t.is_null())
        || params.get("toolChoice").is_some_and(|t| !t.is_null());
    if offers_tools && !tools_declared {
        return Err("tool use in sampling was not declared (sampling.tools)");
    }
    // The rest of the shape is the host's model's business; only tool pairing is checked.
    let Some(messages) = params.get("messages").filter(|m| m.kind() == Kind::Array) else {
        return Ok(());
    };
    let messages: Vec<RawJson<'_>> = messages.elements().collect();
    for (i, message) in messages.iter().enumerate() {
        let own = raw_blocks(message.get("content"));
        let results = own.iter().filter(|b| raw_kind(**b) == "tool_result").count();
        if results > 0 && results < own.len() {
            return Err("tool results mixed with other content in one message");
        }
        let uses: Vec<Cow<'_, str>> = own
            .iter()
            .filter(|b| raw_kind(**b) == "tool_use")
            .map(|b| b.get("id").and_then(RawJson::as_str).unwrap_or_default())
            .collect();
        if uses.is_empty() {
            continue;
        }
        let next = messages.get(i + 1).map(|m| raw_blocks(m.get("content"))).unwrap_or_default();
        // The answered ids once, in a set: looking for each use among the next message's
        // blocks costs uses times blocks, which a server's one large request can make
        // minutes of the host's loop.
        let answered: HashSet<Cow<'_, str>> = next
            .iter()
            .filter(|b| raw_kind(**b) == "tool_result")
            .filter_map(|b| b.get("toolUseId").and_then(RawJson::as_str))
            .collect();
        // A server asks again only once it has the results, so an unanswered use is an error.
        if !uses.iter().all(|id| answered.contains(id)) {
            return Err("a tool use has no tool result in the next message");
        }
    }
    Ok(())
}

/// Checks the host's `CreateMessageResult` against the request it answers.
pub(crate) fn check_answer(params: &str, answer: &str) -> Result<(), AnswerError> {
    let bad = |field: &str, reason| Err(AnswerError::Mismatch { field: field.into(), reason });
    let answer: Value = serde_json::from_str(answer).map_err(|_| AnswerError::NotObject)?;
    if !matches!(answer.get("role").and_then(Value::as_str), Some("assistant" | "user")) {
        return bad("role", "must be \"assistant\" or \"user\"");
    }
    if !answer.get("model").is_some_and(Value::is_string) {
        return bad("model", "must be a string");
    }
    let content = answer.get("content");
    if !matches!(content, Some(Value::Object(_) | Value::Array(_))) {
        return bad("content", "must be a content block or an array of them");
    }
    let params: Value = serde_json::from_str(params).unwrap_or(Value::Null);
    let tools = params.get("tools").and_then(Value::as_array);
    let choice = params.get("toolChoice").and_then(|c| c.get("mode")).and_then(Value::as_str);
    let mut used = 0;
    for (i, block) in blocks(content).into_iter().enumerate() {
        let field = |name: &str| format!("content[{i}]{name}");
        match kind(block) {
            "text" | "image" | "audio" => {}
            "tool_use" => {
                used += 1;
                let name = block.get("name").and_then(Value::as_str).unwrap_or_default();
                let Some(tool) = tools.and_then(|t| t.iter().find(|t| t["name"] == name)) else {
                    return bad(&field(".name"), "not one of the tools the request offered");
                };
                if choice == Some("none") {
                    return bad(&field(""), "the request's toolChoice is \"none\"");
                }
                if !block.get("id").is_some_and(Value::is_string) {
                    return bad(&field(".id"), "must be a string");
                }
                let Some(input) = block.get("input").filter(|i| i.is_object()) else {
                    return bad(&field(".input"), "must be an object");
                };
                check_input(tool, input, &field(".input"))?;
            }
            "tool_result" => return bad(&field(""), "a model's answer carries no tool results"),
            _ => return bad(&field(".type"), "not a sampling content type"),
        }
    }
    if answer.get("stopReason").and_then(Value::as_str) == Some("toolUse") && used == 0 {
        return bad("stopReason", "\"toolUse\" without a tool_use block");
    }
    Ok(())
}

/// With the `schema` feature, a `tool_use` input must fit the offered tool's `inputSchema`
/// (a schema the validator refuses is not held against the answer).
#[cfg(feature = "schema")]
fn check_input(tool: &Value, input: &Value, field: &str) -> Result<(), AnswerError> {
    use crate::schema::{Schema, SchemaLimits};
    let Some(schema) = tool.get("inputSchema") else { return Ok(()) };
    let Ok(schema) = Schema::compile_value(schema, SchemaLimits::default()) else { return Ok(()) };
    schema.validate(input).map_err(|v| AnswerError::Mismatch {
        field: format!("{field}{}", v.pointer),
        reason: v.reason,
    })
}

#[cfg(not(feature = "schema"))]
fn check_input(_tool: &Value, _input: &Value, _field: &str) -> Result<(), AnswerError> {
    Ok(())
}

/// A message's content as a list of blocks (one block or an array).
fn blocks(content: Option<&Value>) -> Vec<&Value> {
    match content {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(block @ Value::Object(_)) => vec![block],
        _ => Vec::new(),
    }
}

fn kind(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// [`blocks`], on the scanner's view of a request.
fn raw_blocks(content: Option<RawJson<'_>>) -> Vec<RawJson<'_>> {
    match content {
        Some(list) if list.kind() == Kind::Array => list.elements().collect(),
        Some(block) if block.kind() == Kind::Object => vec![block],
        _ => Vec::new(),
    }
}

fn raw_kind(block: RawJson<'_>) -> Cow<'_, str> {
    block.get("type").and_then(RawJson::as_str).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Each tool use is looked for among the next message's results in a set: with a list
    /// scan, a request of 20,000 uses of one id, answered only by the last of 20,000 results,
    /// kept the host's loop busy for minutes.
    #[test]
    fn many_tool_uses_are_paired_in_linear_time() {
        let n = 20_000;
        let uses = vec![json!({"type": "tool_use", "id": "a", "name": "t", "input": {}}); n];
        let mut results =
            vec![json!({"type": "tool_result", "toolUseId": "b", "content": []}); n - 1];
        results.push(json!({"type": "tool_result", "toolUseId": "a", "content": []}));
        let params = json!({"messages": [
            {"role": "assistant", "content": uses},
            {"role": "user", "content": results},
        ], "maxTokens": 10, "tools": [{"name": "t", "inputSchema": {"type": "object"}}]});
        assert_eq!(check_request(&params.to_string(), true), Ok(()));
        // And one use left unanswered is still found.
        let mut params = params;
        params["messages"][1]["content"][n - 1]["toolUseId"] = json!("c");
        assert!(check_request(&params.to_string(), true).is_err());
    }

    fn weather() -> Value {
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Weather?"}}],
            "maxTokens": 100,
            "tools": [{"name": "get_weather", "inputSchema": {"type": "object",
                "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
            "toolChoice": {"mode": "auto"}})
    }

    #[test]
    fn tools_need_the_capability_and_well_formed_messages() {
        let p = weather().to_string();
        assert!(check_request(&p, true).is_ok());
        assert_eq!(
            check_request(&p, false),
            Err("tool use in sampling was not declared (sampling.tools)")
        );
        let plain = json!({"messages": [], "maxTokens": 1}).to_string();
        assert!(check_request(&plain, false).is_ok());
        let use_ = json!({"type": "tool_use", "id": "u1", "name": "get_weather", "input": {}});
        let result = json!({"type": "tool_result", "toolUseId": "u1", "content": []});
        let text = json!({"type": "text", "text": "x"});
        let with = |messages: Value| {
            check_request(&json!({"messages": messages, "tools": []}).to_string(), true)
        };
        assert!(with(json!([
            {"role": "assistant", "content": [use_]}, {"role": "user", "content": [result]}
        ]))
        .is_ok());
        assert_eq!(
            with(
                json!([{"role": "assistant", "content": use_}, {"role": "user", "content": text}])
            ),
            Err("a tool use has no tool result in the next message")
        );
        assert_eq!(
            with(json!([
                {"role": "assistant", "content": use_},
                {"role": "user", "content": [result, text]}
            ])),
            Err("tool results mixed with other content in one message")
        );
    }

    #[test]
    fn answers_are_checked_against_the_offered_tools() {
        let p = weather().to_string();
        let answer = |content: Value, stop: &str| {
            let a = json!({"role": "assistant", "model": "m", "content": content,
                "stopReason": stop});
            check_answer(&p, &a.to_string())
        };
        let field = |r: Result<(), AnswerError>| match r {
            Err(AnswerError::Mismatch { field, reason }) => (field, reason),
            other => panic!("{other:?}"),
        };
        let ok = json!([{"type": "text", "text": "let me look"},
            {"type": "tool_use", "id": "u1", "name": "get_weather", "input": {"city": "Oslo"}}]);
        assert!(answer(ok, "toolUse").is_ok());
        assert!(answer(json!({"type": "text", "text": "sunny"}), "endTurn").is_ok());
        let other = json!({"type": "tool_use", "id": "u1", "name": "rm_rf", "input": {}});
        assert_eq!(field(answer(other, "toolUse")).0, "content[0].name");
        let no_input = json!({"type": "tool_use", "id": "u1", "name": "get_weather"});
        assert_eq!(field(answer(no_input, "toolUse")).0, "content[0].input");
        let stop = field(answer(json!({"type": "text", "text": "x"}), "toolUse"));
        assert_eq!(stop.0, "stopReason");
        let result = json!({"type": "tool_result", "toolUseId": "u1", "content": []});
        assert_eq!(field(answer(result, "endTurn")).0, "content[0]");
        assert_eq!(field(check_answer(&p, r#"{"role":"assistant","content":[]}"#)).0, "model");
        // A tool use when the request offered none.
        let plain = json!({"messages": [], "maxTokens": 1}).to_string();
        let a = json!({"role": "assistant", "model": "m",
            "content": {"type": "tool_use", "id": "u", "name": "get_weather", "input": {}}});
        assert_eq!(field(check_answer(&plain, &a.to_string())).0, "content[0].name");
        // toolChoice none forbids any use.
        let mut none = weather();
        none["toolChoice"] = json!({"mode": "none"});
        let a = json!({"role": "assistant", "model": "m",
            "content": {"type": "tool_use", "id": "u", "name": "get_weather", "input": {"city": "x"}}});
        assert_eq!(
            field(check_answer(&none.to_string(), &a.to_string())).1,
            "the request's toolChoice is \"none\""
        );
    }

    #[cfg(feature = "schema")]
    #[test]
    fn with_the_schema_feature_tool_input_is_checked() {
        let p = weather().to_string();
        let a = json!({"role": "assistant", "model": "m", "stopReason": "toolUse",
            "content": {"type": "tool_use", "id": "u", "name": "get_weather", "input": {"city": 3}}});
        assert_eq!(
            check_answer(&p, &a.to_string()),
            Err(AnswerError::Mismatch {
                field: "content[0].input/city".into(),
                reason: "type: wrong type"
            })
        );
    }
}
