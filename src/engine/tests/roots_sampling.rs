//! Roots the host sets (boundary, automatic answers, `notifications/roots/list_changed`) and
//! sampling with tool use, with a scripted peer and simulated time.

use serde_json::{json, Value};

use super::{discover_result, raw, Harness};
use crate::config::ServerRequestKinds;
use crate::engine::*;
use crate::error::AnswerError;

const LIST_CHANGED: &str = "notifications/roots/list_changed";

fn legacy(answers: ServerRequestKinds) -> (Harness, Value) {
    let mut h =
        Harness::new(Config { era: EraPreference::LegacyOnly, answers, ..Config::default() });
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    h.reply(&init, json!({"protocolVersion": "2025-11-25", "capabilities": {}}));
    h.take_sent();
    assert_eq!(h.events(), ["ready legacy 2025-11-25"]);
    (h, init["params"]["capabilities"].clone())
}

fn roots(uris: &[&str]) -> Box<RawValue> {
    let list: Vec<Value> = uris.iter().map(|u| json!({"uri": u})).collect();
    serde_json::value::to_raw_value(&json!({"roots": list})).unwrap()
}

fn set(h: &mut Harness, uris: &[&str]) -> Result<(), AnswerError> {
    let r = h.engine.set_roots(h.now, &roots(uris));
    h.flush();
    r
}

fn methods(frames: &[Value]) -> Vec<&str> {
    frames.iter().filter_map(|f| f["method"].as_str()).collect()
}

fn mismatch(r: Result<(), AnswerError>) -> (String, &'static str) {
    match r {
        Err(AnswerError::Mismatch { field, reason }) => (field, reason),
        other => panic!("{other:?}"),
    }
}

#[test]
fn legacy_roots_changes_are_announced_once_per_change_when_declared() {
    let answers =
        ServerRequestKinds { roots: true, roots_list_changed: true, ..Default::default() };
    let (mut h, caps) = legacy(answers);
    assert_eq!(caps["roots"], json!({"listChanged": true}));
    set(&mut h, &["file:///srv/a"]).unwrap();
    assert_eq!(methods(&h.take_sent()), [LIST_CHANGED]);
    set(&mut h, &["file:///srv/a"]).unwrap();
    assert!(h.take_sent().is_empty(), "the same list again is no change");
    set(&mut h, &["file:///srv/a", "file:///srv/b"]).unwrap();
    assert_eq!(methods(&h.take_sent()), [LIST_CHANGED]);
    // The engine answers roots/list itself now; the host sees no request.
    h.peer(json!({"jsonrpc": "2.0", "id": 7, "method": "roots/list"}));
    let reply = h.sent_one();
    assert_eq!(reply["id"], 7);
    assert_eq!(reply["result"]["roots"][1]["uri"], "file:///srv/b");
    assert!(h.events().is_empty());
}

#[test]
fn no_notification_without_the_promise_or_on_a_modern_server() {
    let (mut h, caps) = legacy(ServerRequestKinds { roots: true, ..Default::default() });
    assert_eq!(caps["roots"], json!({}), "listChanged only when promised");
    set(&mut h, &["file:///srv/a"]).unwrap();
    assert!(h.take_sent().is_empty());

    let answers = ServerRequestKinds {
        roots: true,
        roots_list_changed: true,
        elicitation_form: true,
        ..Default::default()
    };
    let mut h = Harness::new(Config { answers, ..Config::default() });
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    let caps = &probe["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert_eq!(caps["roots"], json!({}), "2026-07-28 has no roots.listChanged");
    h.reply(&probe, discover_result());
    h.take_sent();
    h.events();
    set(&mut h, &["file:///srv/a"]).unwrap();
    assert!(h.take_sent().is_empty(), "2026-07-28 has no roots notification");
    // A round that asks for roots and an elicitation: only the elicitation reaches the host,
    // and the retry carries the roots that were set.
    h.call("t", "{}");
    let first = h.sent_one();
    h.reply(
        &first,
        json!({"resultType": "input_required", "inputRequests": {
            "r": {"method": "roots/list"},
            "e": {"method": "elicitation/create", "params": {"message": "?",
                "requestedSchema": {"type": "object", "properties": {}}}}}}),
    );
    let mut asks = Vec::new();
    while let Some(e) = h.engine.poll_event() {
        if let Event::ServerRequest { request, kind, .. } = e {
            asks.push((request, kind));
        }
    }
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0].1, ServerRequestKind::ElicitationForm);
    h.engine.answer(h.now, asks[0].0, raw(r#"{"action":"decline"}"#)).unwrap();
    h.flush();
    let retry = h.sent_one();
    assert_eq!(
        retry["params"]["inputResponses"]["r"],
        json!({"roots": [{"uri": "file:///srv/a"}]})
    );
}

#[test]
fn roots_outside_the_boundary_never_leave() {
    let answers =
        ServerRequestKinds { roots: true, roots_list_changed: true, ..Default::default() };
    let (mut h, _) = legacy(answers);
    h.engine.set_roots_boundary(RootsBoundary::new(["/srv/work/", "/home/u"]).unwrap());
    assert_eq!(h.engine.roots_boundary().dirs().collect::<Vec<_>>(), ["/srv/work", "/home/u"]);
    for (uri, reason) in [
        ("file:///srv/work/../../etc", "must not contain `..`"),
        ("file:///srv/work/%2E%2E/etc", "must not contain `..`"),
        ("file:///srv/workshop", "outside the allowed directories"),
        ("file://other-host/srv/work", "must be on this host (file:///...)"),
    ] {
        assert_eq!(
            mismatch(set(&mut h, &["file:///srv/work/a", uri])),
            ("roots[1].uri".into(), reason)
        );
    }
    assert!(h.take_sent().is_empty(), "nothing announced for a refused list");
    // A host answering by hand is held to the same boundary.
    h.peer(json!({"jsonrpc": "2.0", "id": 3, "method": "roots/list"}));
    let mut request = None;
    while let Some(e) = h.engine.poll_event() {
        if let Event::ServerRequest { request: r, .. } = e {
            request = Some(r);
        }
    }
    let request = request.expect("the host is asked: no roots were set");
    let escape = roots(&["file:///etc"]);
    assert_eq!(
        mismatch(h.engine.answer(h.now, request, &escape)).1,
        "outside the allowed directories"
    );
    h.flush();
    assert!(h.take_sent().is_empty());
    h.engine.answer(h.now, request, &roots(&["file:///home/u/p"])).unwrap();
    h.flush();
    assert_eq!(h.sent_one()["result"]["roots"][0]["uri"], "file:///home/u/p");
    // A boundary narrowed after roots were set drops the list that no longer fits, and the
    // server that was told of list changes is told of this one: it asked again only when
    // told, and worked on in roots withdrawn from it.
    set(&mut h, &["file:///srv/work/a"]).unwrap();
    h.take_sent();
    h.engine.set_roots_boundary(RootsBoundary::new(["/home/u"]).unwrap());
    h.flush();
    assert_eq!(methods(&h.take_sent()), [LIST_CHANGED]);
    h.peer(json!({"jsonrpc": "2.0", "id": 4, "method": "roots/list"}));
    assert!(h.take_sent().is_empty(), "the old list is not sent");
    assert_eq!(h.events().len(), 1, "the host is asked instead");
    assert!(matches!(
        RootsBoundary::new(["relative/dir"]),
        Err(RootsBoundaryError::BadDirectory { reason: "must be an absolute path", .. })
    ));
}

fn sampling_request(id: u64, tools: bool) -> Value {
    let mut params = json!({"messages": [{"role": "user",
        "content": {"type": "text", "text": "Weather in Oslo?"}}], "maxTokens": 50});
    if tools {
        params["tools"] = json!([{"name": "get_weather", "inputSchema": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}]);
        params["toolChoice"] = json!({"mode": "auto"});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "sampling/createMessage", "params": params})
}

#[test]
fn sampling_with_tools_is_declared_passed_to_the_host_and_its_answer_checked() {
    let answers = ServerRequestKinds { sampling: true, sampling_tools: true, ..Default::default() };
    let (mut h, caps) = legacy(answers);
    assert_eq!(caps["sampling"], json!({"tools": {}}));
    h.peer(sampling_request(4, true));
    let mut asked = None;
    while let Some(e) = h.engine.poll_event() {
        if let Event::ServerRequest { request, params, .. } = e {
            let params: Value = serde_json::from_str(params).unwrap();
            assert_eq!(params["tools"][0]["name"], "get_weather", "the host sees the tools");
            asked = Some(request);
        }
    }
    let request = asked.expect("asked");
    let wrong = raw(
        r#"{"role":"assistant","model":"m","stopReason":"toolUse","content":[{"type":"tool_use","id":"u1","name":"delete_all","input":{}}]}"#,
    );
    assert_eq!(mismatch(h.engine.answer(h.now, request, wrong)).0, "content[0].name");
    h.flush();
    assert!(h.take_sent().is_empty(), "a refused answer is not sent");
    let good = raw(
        r#"{"role":"assistant","model":"m","stopReason":"toolUse","content":[{"type":"tool_use","id":"u1","name":"get_weather","input":{"city":"Oslo"}}]}"#,
    );
    h.engine.answer(h.now, request, good).unwrap();
    h.flush();
    let reply = h.sent_one();
    assert_eq!(
        (&reply["id"], &reply["result"]["content"][0]["name"]),
        (&json!(4), &json!("get_weather"))
    );
}

#[test]
fn sampling_with_tools_is_refused_when_not_declared() {
    let (mut h, caps) = legacy(ServerRequestKinds { sampling: true, ..Default::default() });
    assert_eq!(caps["sampling"], json!({}));
    h.peer(sampling_request(9, true));
    let reply = h.sent_one();
    assert_eq!((&reply["id"], &reply["error"]["code"]), (&json!(9), &json!(-32602)));
    assert!(h.events().is_empty(), "the host is not asked");
    // Plain sampling still reaches the host.
    h.peer(sampling_request(10, false));
    assert!(h.take_sent().is_empty());
    assert_eq!(h.events().len(), 1);
}
