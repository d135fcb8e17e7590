//! The `schema` feature against the demo server: tool arguments checked before anything is
//! sent, `structuredContent` checked against `outputSchema`, a network `$ref` refused (and
//! never fetched), each definition compiled once; and a Python SDK peer's `pattern`, read as the
//! server reads it.
#![cfg(feature = "schema")]

mod common;

use std::time::Duration;

use mcpoll::{CallOptions, Config, Host, SchemaError, ServerId, StdioCommand, ToolCallError};

use common::counting::{allocs, Counting};
use common::{demo_server, parse, peers_dir, raw, start};

#[global_allocator]
static GLOBAL: Counting = Counting;

const WAIT: Duration = common::PATIENCE;

fn listed_server(host: &mut Host) -> ServerId {
    let cmd = demo_server().arg("--resilience-tools").arg("--schema-tools");
    let id = start(host, cmd, Config::default());
    host.tool_catalog_blocking(id, WAIT).expect("tools listed");
    id
}

/// How many calls of `tool` reached the server (the demo's `stats` tool counts deliveries).
fn deliveries(host: &mut Host, id: ServerId, tool: &str) -> u64 {
    let stats = host.call_tool_blocking(id, "stats", &raw("{}"), &CallOptions::default());
    let stats = parse(&stats.expect("stats"));
    stats["structuredContent"]["deliveries"][tool].as_u64().unwrap_or(0)
}

#[test]
fn arguments_are_checked_before_send_and_nothing_is_sent_on_a_mismatch() {
    let mut host = Host::new().unwrap();
    let id = listed_server(&mut host);
    let opts = CallOptions::default();
    let ok = host.call_tool_checked_blocking(id, "add", &raw(r#"{"a":1,"b":2}"#), &opts);
    assert_eq!(parse(&ok.expect("add"))["structuredContent"]["sum"], 3.0);

    let sent_before = host.stats(id).unwrap().requests_sent;
    let bad = host.call_tool_checked(id, "add", &raw(r#"{"a":"one","b":2}"#), &opts);
    match bad {
        Err(ToolCallError::Arguments(v)) => {
            assert_eq!(v.pointer, "/a");
            assert_eq!(v.reason, "type: wrong type");
        }
        other => panic!("{other:?}"),
    }
    match host.call_tool_checked(id, "add", &raw(r#"{"a":1}"#), &opts) {
        Err(ToolCallError::Arguments(v)) => assert_eq!(v.pointer, "/b"),
        other => panic!("{other:?}"),
    }
    assert_eq!(host.stats(id).unwrap().requests_sent, sent_before, "nothing was written");
    assert_eq!(deliveries(&mut host, id, "add"), 1, "only the valid call reached the server");
    // Four checks of two definitions (add, and stats has none checked here): `add` compiled once.
    assert_eq!(host.schema_compiles(), 1);
}

#[test]
fn structured_content_is_checked_against_output_schema() {
    let mut host = Host::new().unwrap();
    let id = listed_server(&mut host);
    let opts = CallOptions::default();
    match host.call_tool_checked_blocking(id, "bad_output", &raw("{}"), &opts) {
        Err(ToolCallError::Output { violation, result }) => {
            assert_eq!(violation.pointer, "/sum");
            assert_eq!(violation.reason, "type: wrong type");
            assert_eq!(parse(&result)["structuredContent"]["sum"], "three", "result kept");
        }
        other => panic!("{other:?}"),
    }
    // The same check on results the host holds: a missing structuredContent fails, an
    // isError result passes, a matching one passes.
    let missing = host.check_tool_result(id, "add", r#"{"content":[]}"#);
    assert!(matches!(missing, Err(ToolCallError::Output { violation, .. })
        if violation.reason.starts_with("structuredContent: missing")));
    let is_error = r#"{"content":[],"isError":true,"structuredContent":{"sum":"x"}}"#;
    assert!(host.check_tool_result(id, "add", is_error).is_ok());
    assert!(host.check_tool_result(id, "add", r#"{"structuredContent":{"sum":1}}"#).is_ok());
    // A tool without an outputSchema: nothing to check.
    assert!(host.check_tool_result(id, "echo", r#"{"content":[]}"#).is_ok());
}

#[test]
fn a_network_ref_is_refused_and_nothing_is_sent() {
    let mut host = Host::new().unwrap();
    let id = listed_server(&mut host);
    let opts = CallOptions::default();
    for _ in 0..2 {
        match host.call_tool_checked(id, "remote_ref", &raw("{}"), &opts) {
            Err(ToolCallError::Schema(SchemaError::RemoteRef(r))) => {
                assert_eq!(r, "http://127.0.0.1:9/never-fetched.json")
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(host.schema_compiles(), 1, "a refused definition is remembered, not recompiled");
    assert_eq!(deliveries(&mut host, id, "remote_ref"), 0);
    // A tool the catalog does not hold cannot be checked.
    let unknown = host.call_tool_checked(id, "nope", &raw("{}"), &opts);
    assert!(matches!(unknown, Err(ToolCallError::NotInCatalog)));
}

#[test]
fn an_oversized_schema_is_refused_within_the_limits() {
    let mut host = Host::new().unwrap();
    let id = listed_server(&mut host);
    let limits = mcpoll::SchemaLimits { max_bytes: 40, ..Default::default() };
    host.set_schema_limits(limits);
    let r = host.call_tool_checked(id, "add", &raw(r#"{"a":1,"b":2}"#), &CallOptions::default());
    assert!(matches!(r, Err(ToolCallError::Schema(SchemaError::TooLarge))), "{r:?}");
}

/// The Python SDK peer's `book` tool: pydantic writes its bounds into the input schema
/// (`"pattern": "^[A-Z]{3}-[0-9]{3}$"`, `minimum` 1, `maximum` 9) and checks them itself. What
/// the schema refuses is never sent, what it takes the server takes, and what it refuses the
/// server refuses too when it is sent unchecked.
#[test]
fn a_python_sdk_tools_pattern_is_checked_before_send_as_the_server_checks_it() {
    let Some(dir) = peers_dir() else { return };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, StdioCommand::new(dir.join("run-py-stdio.sh")), Config::default());
    host.tool_catalog_blocking(id, WAIT).expect("tools listed");
    let opts = CallOptions::default();
    let good = raw(r#"{"flight":"ABC-123","seats":2}"#);
    let booked = host.call_tool_checked_blocking(id, "book", &good, &opts).expect("booked");
    assert_eq!(parse(&booked)["content"][0]["text"], "booked 2 on ABC-123");

    let sent_before = host.stats(id).unwrap().requests_sent;
    for (args, pointer, reason) in [
        (r#"{"flight":"abc-123"}"#, "/flight", "pattern: does not match"),
        (r#"{"flight":"XABC-123"}"#, "/flight", "pattern: does not match"),
        (r#"{"flight":"ABC-123","seats":10}"#, "/seats", "maximum: too large"),
    ] {
        match host.call_tool_checked(id, "book", &raw(args), &opts) {
            Err(ToolCallError::Arguments(v)) => {
                assert_eq!((v.pointer.as_str(), v.reason), (pointer, reason), "{args}");
            }
            other => panic!("{args}: {other:?}"),
        }
    }
    assert_eq!(host.stats(id).unwrap().requests_sent, sent_before, "nothing was written");

    // Unchecked, the server refuses the same flight name itself (an `isError` result).
    let refused = host.call_tool_blocking(id, "book", &raw(r#"{"flight":"abc-123"}"#), &opts);
    assert!(refused.expect("a tool result").is_error, "the server's own check");
}

/// The mismatches a validation makes and throws away (every branch of an `anyOf` that does not
/// match) write no location: a schema with thousands of branches, against an instance with a
/// long member name, had the name copied into a pointer, a character at a time, for each
/// branch, work no step counted (minutes of the poll thread for a 10 MB name and 9,000
/// branches, all within the limits). Counted here by the allocations the pointers made.
#[test]
fn mismatches_inside_any_of_write_no_location() {
    let branches: Vec<serde_json::Value> =
        (0..2_000).map(|_| serde_json::json!({"type": "string"})).collect();
    let schema = serde_json::json!({"additionalProperties": {"anyOf": branches}});
    let schema = mcpoll::Schema::compile_value(&schema, mcpoll::SchemaLimits::default()).unwrap();
    let mut instance = serde_json::Map::new();
    instance.insert("k".repeat(64 * 1024), serde_json::json!(1));
    let instance = serde_json::Value::Object(instance);
    let before = allocs();
    let violation = schema.validate(&instance).unwrap_err();
    let made = allocs() - before;
    assert!(!violation.budget, "{violation}");
    assert_eq!(violation.pointer.len(), 1 + 64 * 1024, "the one reported is located");
    assert!(made < 200, "{made} allocations for one reported mismatch");
}
