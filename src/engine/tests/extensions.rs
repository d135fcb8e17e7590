//! Extension methods: requests by name (`Engine::request_raw`), notifications the engine does
//! not handle delivered as events, and `Config::extensions` declared in both eras.

use std::time::Duration;

use serde_json::{json, Value};

use super::Harness;
use crate::engine::*;

const SKILLS: &str = r#"{"io.example/skills":{"v":1}}"#;

fn raw(s: &str) -> &RawValue {
    serde_json::from_str(s).unwrap()
}

fn with_skills() -> Config {
    Config { extensions: SKILLS.into(), ..Config::default() }
}

#[test]
fn an_extension_request_goes_by_name_with_the_modern_envelope() {
    let mut h = Harness::ready_with(with_skills());
    let params = raw(r#"{ "cursor": "c1",
        "filter": {"tag": "x"} }"#);
    let call = h.engine.request_raw(h.now, "skills/list", Some(params), &CallOptions::default());
    let call = call.unwrap();
    let sent = h.sent_one();
    assert_eq!(sent["method"], "skills/list");
    assert_eq!(sent["params"]["cursor"], "c1");
    assert_eq!(sent["params"]["filter"], json!({"tag": "x"}));
    let meta = &sent["params"]["_meta"];
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    let caps = &meta["io.modelcontextprotocol/clientCapabilities"];
    assert_eq!(caps["extensions"], serde_json::from_str::<Value>(SKILLS).unwrap());
    let result = json!({"resultType": "complete", "skills": []});
    h.reply(&sent, result.clone());
    match h.engine.poll_event() {
        Some(Event::CallDone { call: c, result: r, record }) => {
            assert_eq!(c, call);
            assert_eq!(serde_json::from_str::<Value>(r.json()).unwrap(), result);
            assert_eq!(record.method, Method::Extension);
            assert_eq!(record.tool, Some("skills/list"), "the record names the method");
        }
        other => panic!("expected CallDone, got {other:?}"),
    }

    // No params: just `_meta`.
    h.engine.request_raw(h.now, "vendor.example/ping", None, &CallOptions::default()).unwrap();
    let sent = h.sent_one();
    assert_eq!(sent["method"], "vendor.example/ping");
    let keys: Vec<_> = sent["params"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["_meta"]);
}

#[test]
fn an_extension_request_has_a_deadline_and_can_be_cancelled() {
    let mut h = Harness::ready_modern();
    let opts = CallOptions::timeout(Duration::from_secs(2));
    let timed = h.engine.request_raw(h.now, "skills/list", None, &opts).unwrap();
    let cancelled = h.engine.request_raw(h.now, "skills/get", None, &opts).unwrap();
    let sent = h.take_sent();
    assert_eq!(sent.len(), 2);
    h.engine.cancel(h.now, cancelled).unwrap();
    let note = h.sent_one();
    assert_eq!(note["method"], "notifications/cancelled");
    assert_eq!(note["params"]["requestId"], sent[1]["id"]);
    h.advance(Duration::from_secs(3));
    assert_eq!(
        h.events(),
        [
            format!("failed {} cancelled", cancelled.get()),
            format!("failed {} deadline_exceeded", timed.get())
        ]
    );
    // A late answer is never delivered.
    h.reply(&sent[0], json!({"resultType": "complete"}));
    assert!(h.events().is_empty());
}

#[test]
fn an_extension_request_is_not_repeated_unless_the_host_says_it_is_safe() {
    let mut h = Harness::ready_modern();
    let unknown = h.engine.request_raw(h.now, "skills/list", None, &CallOptions::default());
    let unknown = unknown.unwrap();
    let read = CallOptions { idempotency: Some(Idempotency::Read), ..CallOptions::default() };
    let safe = h.engine.request_raw(h.now, "skills/get", None, &read).unwrap();
    let sent = h.take_sent();
    assert_eq!(sent.len(), 2);
    let lost = ExchangeFailure::Transport(crate::error::TransportError::ConnectionLost);
    for s in &sent {
        let id = WireId::parse(crate::proto::json::parse(s["id"].to_string().as_bytes()).unwrap());
        h.engine
            .handle_transport(h.now, TransportEvent::exchange_failed(id.unwrap(), lost.clone()));
    }
    h.flush();
    assert_eq!(h.events(), [format!("failed {} delivery_unknown", unknown.get())]);
    h.advance_to_next_timeout();
    let again = h.sent_one();
    assert_eq!(again["method"], "skills/get", "the read goes out again");
    h.reply(&again, json!({"resultType": "complete"}));
    let events = h.events();
    assert_eq!(events.len(), 1);
    assert!(events[0].starts_with(&format!("done {} ", safe.get())), "{events:?}");
}

#[test]
fn names_with_a_verb_of_their_own_and_bad_params_are_refused() {
    let mut h = Harness::ready_modern();
    let o = CallOptions::default();
    for m in ["tools/call", "initialize", "server/discover", "", "a b", "x\n"] {
        assert_eq!(
            h.engine.request_raw(h.now, m, None, &o),
            Err(RequestError::InvalidMethod),
            "{m:?}"
        );
    }
    let err = h.engine.request_raw(h.now, "skills/list", Some(raw("[1]")), &o);
    assert_eq!(err, Err(RequestError::ArgumentsNotObject));
    assert!(h.take_sent().is_empty());
}

#[test]
fn unknown_notifications_reach_the_host() {
    let mut h = Harness::ready_modern();
    h.peer(json!({"jsonrpc": "2.0", "method": "notifications/skills/list_changed",
                  "params": {"skill": "a"}}));
    h.peer(json!({"jsonrpc": "2.0", "method": "vendor.example/tick"}));
    assert_eq!(
        h.events(),
        [
            r#"notification notifications/skills/list_changed {"skill":"a"}"#,
            "notification vendor.example/tick {}"
        ]
    );
}

#[test]
fn extensions_are_declared_in_both_eras() {
    let declared: Value = serde_json::from_str(SKILLS).unwrap();
    // Modern: the probe's `_meta` capabilities.
    let mut h = Harness::new(with_skills());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    let caps = &probe["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert_eq!(caps["extensions"], declared);
    // Legacy: `initialize` capabilities.
    h.reply_error(&probe, -32601, None);
    let init = h.sent_one();
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["capabilities"]["extensions"], declared);
    // `Config::extensions` replaces an `extensions` member of `client_capabilities`.
    let config = Config {
        client_capabilities: r#"{"extensions":{"old.example/x":{}},"experimental":{}}"#.into(),
        ..with_skills()
    };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let caps =
        h.sent_one()["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].clone();
    assert_eq!(caps, json!({"experimental": {}, "extensions": declared}));
}

#[test]
fn extensions_are_checked_once() {
    let bad = |e: &str| {
        // What `Engine::new` checks first.
        Config { extensions: e.into(), ..Config::default() }.check().unwrap_err().field
    };
    for e in
        ["[]", "{", r#"{"skills":{}}"#, r#"{"io.example/":{}}"#, r#"{"io.example/skills":true}"#]
    {
        assert_eq!(bad(e), "extensions", "{e}");
    }
}

/// A `_meta` of the host's own in an extension request's params joins the engine's: one
/// `_meta` on the wire with both sets of keys, pretty-printed lines flattened (stdio). Two
/// `_meta` members were written, which servers read as one or the other, or refuse.
#[test]
fn an_extension_requests_own_meta_is_merged_into_the_engines() {
    let mut h = Harness::ready_with(with_skills());
    let params = raw("{\"a\": 1, \"_meta\": {\n  \"com.example/x\": 1\n}, \"b\": [2]}");
    h.engine.request_raw(h.now, "skills/list", Some(params), &CallOptions::default()).unwrap();
    let mut frame = Vec::new();
    assert!(h.engine.poll_transmit(h.now, &mut frame).is_some());
    let text = String::from_utf8(frame).unwrap();
    assert_eq!(text.matches("\"_meta\"").count(), 1, "{text}");
    assert!(!text.trim_end().contains('\n'), "one line: {text}");
    let sent: Value = serde_json::from_str(&text).unwrap();
    let meta = &sent["params"]["_meta"];
    assert_eq!(meta["com.example/x"], 1, "{sent}");
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert_eq!((&sent["params"]["a"], &sent["params"]["b"]), (&json!(1), &json!([2])));
    let not_an_object = raw(r#"{"_meta": 5}"#);
    let refused =
        h.engine.request_raw(h.now, "skills/list", Some(not_an_object), &CallOptions::default());
    assert!(matches!(refused, Err(RequestError::ArgumentsNotObject)), "{refused:?}");
}

#[test]
fn an_http_transmit_names_the_extension_method() {
    let mut h = Harness::ready_http();
    h.engine.request_raw(h.now, "skills/list", None, &CallOptions::default()).unwrap();
    let mut buf = Vec::new();
    let t = h.engine.poll_transmit(h.now, &mut buf).unwrap();
    assert_eq!(t.method_name(), "skills/list");
    assert_eq!(t.name(), None, "no Mcp-Name for an extension");
    assert!(matches!(t.kind, TransmitKind::Request { method: Method::Extension, .. }));
}
