//! Without the `server-requests` feature nothing can be declared, and every server request
//! still gets the answer a client that declares nothing gives. CI runs these:
//! `cargo test --no-default-features --features stdio,http --lib -- without_server_requests`
//! (the library's tests need `http`; the stdio-only build is the footprint example's).

use serde_json::{json, Value};

use super::Harness;
use crate::config::ServerRequestKinds;
use crate::engine::*;

#[test]
fn without_server_requests_nothing_can_be_declared() {
    let answers = ServerRequestKinds { roots: true, ..Default::default() };
    // The harness's clock: sans-IO code (its tests included) reads no clock of its own.
    let now = Harness::new(Config::default()).now;
    let e = Engine::new(Config { answers, ..Config::default() }, now).unwrap_err();
    assert_eq!(e.field, "answers");
}

#[test]
fn without_server_requests_legacy_requests_are_method_not_found() {
    let mut h = Harness::new(Config { era: EraPreference::LegacyOnly, ..Config::default() });
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    assert_eq!(init["params"]["capabilities"], json!({}), "nothing is declared");
    h.reply(&init, json!({"protocolVersion": "2025-11-25", "capabilities": {}}));
    h.take_sent();
    assert_eq!(h.events(), ["ready legacy 2025-11-25"]);
    h.peer(json!({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage", "params": {}}));
    h.peer(json!({"jsonrpc": "2.0", "id": 2, "method": "roots/list"}));
    h.peer(json!({"jsonrpc": "2.0", "id": 3, "method": "elicitation/create",
        "params": {"message": "m", "requestedSchema": {"type": "object"}}}));
    h.peer(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}));
    let answers: Vec<(Value, Value)> = h
        .take_sent()
        .iter()
        .map(|f| (f["id"].clone(), f.get("error").map_or(json!("ok"), |e| e["code"].clone())))
        .collect();
    let not_found = json!(-32601);
    assert_eq!(
        answers,
        [
            (json!(1), not_found.clone()),
            (json!(2), not_found.clone()),
            (json!(3), not_found),
            (json!(4), json!("ok"))
        ]
    );
    assert!(h.events().is_empty());
    assert_eq!(h.engine.stats().server_requests, 4);
}

#[test]
fn without_server_requests_an_input_request_fails_its_call_as_undeclared() {
    let mut h = Harness::ready_with(Config::default());
    let c = h.call("t", "{}");
    let first = h.sent_one();
    let roots = json!({"method": "roots/list"});
    h.reply(&first, json!({"resultType": "input_required", "inputRequests": {"r": roots}}));
    assert_eq!(h.events(), [format!("failed {} undeclared_input_request", c.get())]);
}
