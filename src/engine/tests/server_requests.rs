//! Server requests with a scripted peer and simulated time: `input_required` rounds (modern)
//! and JSON-RPC server requests (legacy), answered, rejected, refused and timed out.

use std::time::Duration;

use serde_json::{json, Value};

use super::{discover_result, raw, Harness};
use crate::config::ServerRequestKinds;
use crate::engine::*;
use crate::error::{AnswerError, CallError, LocalError};

fn config() -> Config {
    Config { answers: ServerRequestKinds::all(), ..Config::default() }
}

fn elicit(message: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message,
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}})
}

/// A server request as the host saw it: handle, call, params.
struct Ask(ServerRequestId, Option<CallId>, Value);

/// Drains events: the server requests and the rest described.
fn drain(h: &mut Harness) -> (Vec<Ask>, Vec<String>) {
    let (mut asks, mut rest) = (Vec::new(), Vec::new());
    while let Some(e) = h.engine.poll_event() {
        match e {
            Event::ServerRequest { request, call, params, .. } => {
                asks.push(Ask(request, call, serde_json::from_str(params).unwrap()))
            }
            other => rest.push(super::tests::describe(&other)),
        }
    }
    (asks, rest)
}

fn answer(h: &mut Harness, request: ServerRequestId, v: Value) -> Result<(), AnswerError> {
    let r = h.engine.answer(h.now, request, raw(&v.to_string()));
    h.flush();
    r
}

const ACCEPT: &str = r#"{"action":"accept","content":{"ok":true}}"#;

#[test]
fn input_required_round_trip_retries_with_responses_and_exact_state() {
    let mut h = Harness::ready_with(config());
    let caps = {
        let c = h.call("deploy", r#"{"env":"prod"}"#);
        let first = h.sent_one();
        let caps = first["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].clone();
        // The state has escapes: it must come back as the very same bytes.
        let frame = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"resultType":"input_required","inputRequests":{{"confirm":{},"where":{{"method":"roots/list"}}}},"requestState":"s\u00e9\"x"}}}}"#,
            first["id"],
            elicit("sure?")
        );
        h.engine.handle_message(h.now, frame.as_bytes());
        h.flush();
        let (asks, rest) = drain(&mut h);
        assert!(rest.is_empty(), "{rest:?}");
        assert_eq!(asks.len(), 2, "one event per input request");
        assert!(asks.iter().all(|a| a.1 == Some(c)));
        assert_eq!(asks[0].2["message"], "sure?");
        answer(&mut h, asks[0].0, serde_json::from_str(ACCEPT).unwrap()).unwrap();
        assert!(h.take_sent().is_empty(), "one input still unanswered");
        answer(&mut h, asks[1].0, json!({"roots": []})).unwrap();
        h.buf.clear();
        let retry = h.sent_one();
        assert_ne!(retry["id"], first["id"], "a new JSON-RPC id");
        assert_eq!(retry["params"]["arguments"], json!({"env": "prod"}));
        assert_eq!(
            retry["params"]["inputResponses"]["confirm"],
            json!({"action": "accept", "content": {"ok": true}})
        );
        assert_eq!(retry["params"]["inputResponses"]["where"], json!({"roots": []}));
        assert!(retry["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].is_string());
        h.reply(&retry, json!({"content": [{"type": "text", "text": "done"}]}));
        match h.engine.poll_event() {
            Some(Event::CallDone { call, record, .. }) => {
                assert_eq!((call, record.rounds, record.attempts), (c, 1, 2));
            }
            other => panic!("{other:?}"),
        }
        // A second answer to a request already sent goes nowhere.
        assert_eq!(answer(&mut h, asks[0].0, json!({})), Err(AnswerError::NotPending));
        caps
    };
    assert_eq!(caps, json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}));
}

#[test]
fn the_retried_state_is_the_servers_bytes() {
    let mut h = Harness::ready_with(config());
    h.call("t", "{}");
    let first = h.sent_one();
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"resultType":"input_required","requestState":"a\/b\u0041"}}}}"#,
        first["id"]
    );
    h.engine.handle_message(h.now, frame.as_bytes());
    h.buf.clear();
    let _ = h.engine.poll_transmit(h.now, &mut h.buf).unwrap();
    let text = String::from_utf8(h.buf.clone()).unwrap();
    assert!(text.contains(r#""requestState":"a\/b\u0041""#), "{text}");
}

#[test]
fn two_rounds_send_only_the_latest_responses_and_no_state_when_none_came() {
    let mut h = Harness::ready_with(config());
    let c = h.call("t", r#"{"x":1}"#);
    let first = h.sent_one();
    let ask = json!({"resultType": "input_required", "inputRequests": {"a": elicit("one")}, "requestState": "r1"});
    h.reply(&first, ask);
    let (asks, _) = drain(&mut h);
    answer(&mut h, asks[0].0, serde_json::from_str(ACCEPT).unwrap()).unwrap();
    let second = h.sent_one();
    assert_eq!(second["params"]["requestState"], "r1");
    h.reply(
        &second,
        json!({"resultType": "input_required", "inputRequests": {"b": elicit("two")}}),
    );
    let (asks, _) = drain(&mut h);
    assert_eq!(asks.len(), 1);
    answer(&mut h, asks[0].0, json!({"action": "decline"})).unwrap();
    let third = h.sent_one();
    let ids = [&first["id"], &second["id"], &third["id"]];
    assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
    assert!(third["params"].get("requestState").is_none(), "the server sent none this round");
    assert_eq!(third["params"]["inputResponses"], json!({"b": {"action": "decline"}}));
    assert_eq!(third["params"]["arguments"], json!({"x": 1}));
    h.reply(&third, json!({"content": []}));
    match h.engine.poll_event() {
        Some(Event::CallDone { call, record, .. }) => assert_eq!((call, record.rounds), (c, 2)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rounds_past_the_bound_fail_the_call() {
    let mut h = Harness::ready_with(Config { max_input_rounds: 1, ..config() });
    let c = h.call("t", "{}");
    let first = h.sent_one();
    h.reply(&first, json!({"resultType": "input_required", "requestState": "again"}));
    let second = h.sent_one();
    h.reply(&second, json!({"resultType": "input_required", "requestState": "again"}));
    assert!(h.take_sent().is_empty(), "no third attempt");
    match h.engine.poll_event() {
        Some(Event::CallFailed { call, error, record }) => {
            assert_eq!(call, c);
            assert_eq!(error, CallError::Local(LocalError::TooManyInputRounds));
            assert_eq!(record.rounds, 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn cancel_or_deadline_during_a_round_ends_the_call_and_forgets_its_requests() {
    let mut h = Harness::ready_with(config());
    let opts = CallOptions::timeout(Duration::from_secs(5));
    let a = h.engine.call_tool(h.now, "t", raw("{}"), &opts).unwrap();
    let b = h.engine.call_tool(h.now, "t", raw("{}"), &opts).unwrap();
    let sent = h.take_sent();
    for s in &sent {
        h.reply(s, json!({"resultType": "input_required", "inputRequests": {"k": elicit("?")}}));
    }
    let (asks, _) = drain(&mut h);
    assert_eq!(asks.iter().map(|a| a.1).collect::<Vec<_>>(), [Some(a), Some(b)]);
    h.engine.cancel(h.now, a).unwrap();
    // Nothing is in flight on the server between rounds: there is nothing to cancel there.
    assert!(h.take_sent().is_empty());
    assert_eq!(h.events(), [format!("failed {} cancelled", a.get())]);
    assert_eq!(
        answer(&mut h, asks[0].0, json!({"action": "cancel"})),
        Err(AnswerError::NotPending)
    );
    h.advance(Duration::from_secs(6));
    assert_eq!(h.events(), [format!("failed {} deadline_exceeded", b.get())]);
    assert_eq!(
        answer(&mut h, asks[1].0, json!({"action": "cancel"})),
        Err(AnswerError::NotPending)
    );
    assert!(h.take_sent().is_empty());
}

#[test]
fn parallel_flows_of_one_tool_keep_their_own_state_and_answers() {
    let mut h = Harness::ready_with(config());
    let a = h.call("t", r#"{"n":"a"}"#);
    let b = h.call("t", r#"{"n":"b"}"#);
    let plain = h.call("other", "{}");
    let sent = h.take_sent();
    h.reply(&sent[0], json!({"resultType": "input_required", "inputRequests": {"k": elicit("a?")}, "requestState": "A"}));
    h.reply(&sent[1], json!({"resultType": "input_required", "inputRequests": {"k": elicit("b?")}, "requestState": "B"}));
    let (asks, _) = drain(&mut h);
    let for_b = asks.iter().find(|x| x.1 == Some(b)).unwrap().0;
    answer(&mut h, for_b, json!({"action": "decline"})).unwrap();
    let retry_b = h.sent_one();
    assert_eq!(retry_b["params"]["arguments"], json!({"n": "b"}));
    assert_eq!(retry_b["params"]["requestState"], "B");
    assert_eq!(retry_b["params"]["inputResponses"], json!({"k": {"action": "decline"}}));
    let for_a = asks.iter().find(|x| x.1 == Some(a)).unwrap().0;
    answer(&mut h, for_a, serde_json::from_str(ACCEPT).unwrap()).unwrap();
    let retry_a = h.sent_one();
    assert_eq!(retry_a["params"]["requestState"], "A");
    assert_eq!(retry_a["params"]["arguments"], json!({"n": "a"}));
    assert!(sent[2]["params"].get("inputResponses").is_none());
    h.reply(&sent[2], json!({"content": []}));
    assert_eq!(h.events(), [format!("done {} {{\"content\":[]}}", plain.get())]);
}

#[test]
fn an_undeclared_input_kind_fails_the_call_and_only_declared_kinds_are_advertised() {
    let answers = ServerRequestKinds { elicitation_form: true, ..Default::default() };
    let caps = r#"{"sampling":{},"experimental":{"x":{}}}"#.to_owned();
    let mut h = Harness::ready_with(Config { answers, client_capabilities: caps, ..config() });
    let c = h.call("t", "{}");
    let first = h.sent_one();
    assert_eq!(
        first["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        json!({"experimental": {"x": {}}, "elicitation": {"form": {}}}),
        "sampling is not answered, so it is not declared"
    );
    let sample =
        json!({"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}});
    h.reply(&first, json!({"resultType": "input_required", "inputRequests": {"s": sample}}));
    assert_eq!(h.events(), [format!("failed {} undeclared_input_request", c.get())]);
}

#[test]
fn a_form_answer_that_does_not_fit_the_schema_is_refused_locally() {
    let mut h = Harness::ready_with(config());
    h.call("t", "{}");
    let first = h.sent_one();
    h.reply(&first, json!({"resultType": "input_required", "inputRequests": {"k": elicit("?")}}));
    let (asks, _) = drain(&mut h);
    let bad = json!({"action": "accept", "content": {"ok": "yes"}});
    assert_eq!(
        answer(&mut h, asks[0].0, bad),
        Err(AnswerError::Mismatch {
            field: "ok".into(),
            reason: "wrong type for the requested schema"
        })
    );
    assert!(h.take_sent().is_empty());
    answer(&mut h, asks[0].0, serde_json::from_str(ACCEPT).unwrap()).unwrap();
    assert_eq!(h.take_sent().len(), 1, "a fitting answer still goes");
}

#[test]
fn a_root_that_is_not_a_file_uri_is_refused_locally() {
    let mut h = legacy(ServerRequestKinds { roots: true, ..Default::default() });
    h.peer(json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}));
    let (asks, _) = drain(&mut h);
    let web = json!({"roots": [{"uri": "https://example.com/"}]});
    assert_eq!(
        answer(&mut h, asks[0].0, web),
        Err(AnswerError::Mismatch {
            field: "roots[0].uri".into(),
            reason: "must be a file:// URI"
        })
    );
    assert!(h.take_sent().is_empty());
}

#[test]
fn rejecting_an_input_request_ends_the_call_without_a_retry() {
    let mut h = Harness::ready_with(config());
    let c = h.call("t", "{}");
    let first = h.sent_one();
    h.reply(&first, json!({"resultType": "input_required", "inputRequests": {"k": elicit("?")}}));
    let (asks, _) = drain(&mut h);
    h.engine.reject(h.now, asks[0].0).unwrap();
    assert!(h.take_sent().is_empty());
    assert_eq!(h.events(), [format!("failed {} input_rejected", c.get())]);
}

// ----- legacy server requests ----------------------------------------------------------------

fn legacy(answers: ServerRequestKinds) -> Harness {
    let mut h =
        Harness::new(Config { era: EraPreference::LegacyOnly, answers, ..Config::default() });
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    assert_eq!(init["params"]["capabilities"], json!(answers_caps(answers)));
    h.reply(&init, json!({"protocolVersion": "2025-11-25", "capabilities": {}}));
    h.take_sent();
    assert_eq!(h.events(), ["ready legacy 2025-11-25"]);
    h
}

fn answers_caps(a: ServerRequestKinds) -> Value {
    serde_json::from_str(&a.capabilities("{}")).unwrap()
}

#[test]
fn declared_capabilities_replace_the_configured_ones_and_keep_the_rest() {
    let configured = r#"{"experimental":{"b":[1, 2],"a":{}},"sampling":{"x":1},"roots":{},
        "dup":1,"elicitation":{},"dup":2}"#;
    let none = ServerRequestKinds::default();
    let caps = |a: ServerRequestKinds| -> Value {
        serde_json::from_str(&a.capabilities(configured)).unwrap()
    };
    assert_eq!(caps(none), json!({"experimental": {"b": [1, 2], "a": {}}, "dup": 2}));
    // Once, as a map would have it (a parse of the text would hide a second one).
    assert_eq!(none.capabilities(configured).matches(r#""dup""#).count(), 1);
    let all = ServerRequestKinds {
        sampling_tools: true,
        roots_list_changed: true,
        ..ServerRequestKinds::all()
    };
    let modern = all.capabilities(configured);
    assert_eq!(
        serde_json::from_str::<Value>(&modern).unwrap(),
        json!({"experimental": {"b": [1, 2], "a": {}}, "dup": 2,
            "elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}})
    );
    let legacy: Value = serde_json::from_str(&all.legacy_capabilities(&modern)).unwrap();
    assert_eq!(legacy["roots"], json!({"listChanged": true}));
    assert_eq!(legacy["sampling"], json!({"tools": {}}));
    let url_only = ServerRequestKinds { elicitation_url: true, ..none };
    assert_eq!(caps(url_only)["elicitation"], json!({"url": {}}));
    assert_eq!(ServerRequestKinds::default().capabilities("{}"), "{}");
}

#[test]
fn legacy_requests_go_to_the_host_and_the_answer_carries_the_servers_id() {
    let mut h = legacy(ServerRequestKinds::all());
    let params = json!({"message": "name?", "requestedSchema": {"type": "object",
        "properties": {"name": {"type": "string", "default": "Ann"}}}});
    h.peer(
        json!({"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create", "params": params}),
    );
    h.peer(json!({"jsonrpc": "2.0", "id": 7, "method": "roots/list"}));
    assert!(h.take_sent().is_empty(), "nothing until the host answers");
    let (asks, rest) = drain(&mut h);
    assert!(rest.is_empty());
    assert_eq!((asks[0].1, &asks[0].2), (None, &params));
    let defaults = crate::elicitation_defaults(&params.to_string()).unwrap();
    h.engine.answer(h.now, asks[0].0, raw(&defaults)).unwrap();
    // Pretty-printed by the host: it must still leave as one line (the harness checks).
    h.engine.answer(h.now, asks[1].0, raw("{\"roots\":\r\n [{\"uri\":\"file:///w\"}]\n}")).unwrap();
    let sent = h.take_sent();
    assert_eq!(
        sent,
        [
            json!({"jsonrpc": "2.0", "id": "srv-1", "result": {"action": "accept", "content": {"name": "Ann"}}}),
            json!({"jsonrpc": "2.0", "id": 7, "result": {"roots": [{"uri": "file:///w"}]}}),
        ]
    );
    assert_eq!(h.engine.stats().server_requests, 2);
}

/// A URL-mode elicitation's answer is checked before it leaves: content (a password typed
/// into the client instead of the server's page) or an unknown action is refused locally and
/// nothing is sent; the request still waits for a good answer.
#[test]
fn a_url_mode_answer_with_content_is_refused_locally() {
    let mut h = legacy(ServerRequestKinds::all());
    let params = json!({"mode": "url", "message": "sign in", "url": "https://example.com/x",
        "elicitationId": "e-1"});
    h.peer(json!({"jsonrpc": "2.0", "id": 3, "method": "elicitation/create", "params": params}));
    let (asks, _) = drain(&mut h);
    let with_content = json!({"action": "accept", "content": {"password": "x"}});
    assert!(matches!(
        answer(&mut h, asks[0].0, with_content),
        Err(AnswerError::Mismatch { field, .. }) if field == "content"
    ));
    assert!(answer(&mut h, asks[0].0, json!({"action": "maybe"})).is_err());
    assert!(h.take_sent().is_empty());
    answer(&mut h, asks[0].0, json!({"action": "accept"})).unwrap();
    assert_eq!(h.sent_one()["result"], json!({"action": "accept"}));
}

/// A server that reuses the id of a request still waiting (a sampling request sent twice
/// as id 5) is asked once: the host was asked twice (two model calls, two prompts to the
/// user) and two responses went under one id. Once answered, the id is free again.
#[test]
fn a_server_request_reusing_a_waiting_id_is_asked_once() {
    let mut h = legacy(ServerRequestKinds::all());
    for _ in 0..2 {
        let mut request = elicit("sure?");
        request["jsonrpc"] = json!("2.0");
        request["id"] = json!(5);
        h.peer(request);
    }
    let (asks, rest) = drain(&mut h);
    assert_eq!((asks.len(), rest.len()), (1, 0));
    // Nor is a copy refused under the id (a method the client does not know would be): a
    // refusal would end the waiting request with the wrong response.
    h.peer(json!({"jsonrpc": "2.0", "id": 5, "method": "no/such/method"}));
    h.peer(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}));
    assert!(h.take_sent().is_empty(), "nothing under the waiting request's id");
    answer(&mut h, asks[0].0, serde_json::from_str(ACCEPT).unwrap()).unwrap();
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["id"], 5);
    let mut request = elicit("again?");
    request["jsonrpc"] = json!("2.0");
    request["id"] = json!(5);
    h.peer(request);
    assert_eq!(drain(&mut h).0.len(), 1, "a new request under the freed id");
    // A string id is the same id however it is escaped (as an answer's id is matched).
    let mut request = elicit("named?");
    request["jsonrpc"] = json!("2.0");
    request["id"] = json!("s-5");
    h.peer(request);
    h.engine.handle_message(h.now, br#"{"jsonrpc":"2.0","id":"\u0073-5","method":"ping"}"#);
    assert!(h.take_sent().is_empty(), "no ping reply under the waiting request's id");
}

/// Closing a legacy server ends its requests: nothing is answered or refused on it later (no
/// timer wakes the engine for them), an answer finds nothing pending, and a request or ping
/// that arrives after the close is not answered.
#[test]
fn a_closed_servers_requests_end_with_it() {
    let mut h = legacy(ServerRequestKinds { roots: true, ..Default::default() });
    h.peer(json!({"jsonrpc": "2.0", "id": 3, "method": "roots/list"}));
    let (asks, _) = drain(&mut h);
    h.engine.close(h.now);
    let events = h.events();
    assert_eq!(events, ["expired", "closed closed"], "the request ends, then the server");
    assert_eq!(h.engine.poll_timeout(), None, "nothing left to wake for");
    assert_eq!(
        h.engine.answer(h.now, asks[0].0, raw(r#"{"roots":[]}"#)),
        Err(AnswerError::NotPending)
    );
    h.peer(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}));
    h.peer(json!({"jsonrpc": "2.0", "id": 5, "method": "roots/list"}));
    h.advance(Duration::from_secs(120));
    assert!(h.take_sent().is_empty());
    assert!(h.events().is_empty());
}

#[test]
fn legacy_requests_of_undeclared_kinds_are_refused_as_the_spec_says() {
    let answers = ServerRequestKinds { elicitation_form: true, ..Default::default() };
    let mut h = legacy(answers);
    h.peer(json!({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage", "params": {}}));
    h.peer(json!({"jsonrpc": "2.0", "id": 2, "method": "roots/list"}));
    h.peer(json!({"jsonrpc": "2.0", "id": 3, "method": "elicitation/create",
        "params": {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e"}}));
    h.peer(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}));
    let codes: Vec<Value> = h
        .take_sent()
        .iter()
        .map(|f| f.get("error").map_or(json!("ok"), |e| e["code"].clone()))
        .collect();
    assert_eq!(codes, [json!(-32601), json!(-32601), json!(-32602), json!("ok")]);
    assert!(h.events().is_empty());
}

/// A blocking helper ends its call for a legacy request nobody answers, and refuses the
/// request on the wire. A host that had taken the request's event is told it expired (as for
/// any request that leaves the table unanswered): it was dropped without a word, and the
/// host's answer found nothing.
#[test]
fn a_taken_legacy_request_ended_for_a_blocked_call_is_told_expired() {
    let answers = ServerRequestKinds { sampling: true, ..Default::default() };
    let mut h = legacy(answers);
    h.peer(json!({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {}}));
    let (asks, _) = drain(&mut h);
    let [Ask(request, None, _)] = asks[..] else { panic!("one legacy request") };
    let call = h.engine.call_tool(h.now, "t", raw("{}"), &CallOptions::default()).unwrap();
    let (blocking, _) = h.engine.unanswered_for(call).expect("the legacy request blocks it");
    assert_eq!(blocking, request);
    let error = CallError::Local(LocalError::Unanswered(ServerRequestKind::Sampling));
    h.engine.end_unanswered(h.now, call, request, error);
    let events = h.events();
    assert!(events.iter().any(|e| e == "expired"), "{events:?}");
    let refused = h.take_sent();
    assert!(refused.iter().any(|f| f["id"] == 7 && f["error"]["code"] == -32603), "{refused:?}");
}

#[test]
fn an_unanswered_legacy_request_times_out_on_both_sides() {
    let answers = ServerRequestKinds { sampling: true, ..Default::default() };
    let mut h = legacy(answers);
    let timeout = h.engine.config().server_request_timeout;
    h.peer(json!({"jsonrpc": "2.0", "id": 9, "method": "sampling/createMessage",
        "params": {"messages": [], "maxTokens": 1}}));
    let (asks, _) = drain(&mut h);
    assert_eq!(h.engine.poll_timeout(), Some(h.now + timeout));
    h.advance(timeout - Duration::from_millis(1));
    assert!(h.take_sent().is_empty());
    h.advance(Duration::from_millis(1));
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!((&sent[0]["id"], &sent[0]["error"]["code"]), (&json!(9), &json!(-32001)));
    assert_eq!(h.events(), ["expired"]);
    assert_eq!(h.engine.answer(h.now, asks[0].0, raw("{}")), Err(AnswerError::NotPending));
    assert_eq!(h.engine.poll_timeout(), None);
}

/// 2025-11-25: a server may withdraw a request of its own with `notifications/cancelled`.
/// The request ends for the host (`ServerRequestExpired`), its answer is refused, and the
/// server is sent nothing for it, not even the timeout error later. Ids match as JSON values,
/// string or number; another request stays.
#[test]
fn a_legacy_request_the_server_cancels_ends_and_is_never_answered() {
    let answers = ServerRequestKinds { roots: true, ..Default::default() };
    let mut h = legacy(answers);
    let timeout = h.engine.config().server_request_timeout;
    h.peer(json!({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"}));
    h.peer(json!({"jsonrpc": "2.0", "id": 7, "method": "roots/list"}));
    h.peer(json!({"jsonrpc": "2.0", "id": 8, "method": "roots/list"}));
    let (asks, _) = drain(&mut h);
    for id in [json!("s1"), json!(7), json!("8"), json!("unknown")] {
        h.peer(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "no longer needed"}}));
    }
    assert_eq!(h.events(), ["expired", "expired"]);
    assert_eq!(h.engine.answer(h.now, asks[0].0, raw("{}")), Err(AnswerError::NotPending));
    assert_eq!(h.engine.answer(h.now, asks[1].0, raw("{}")), Err(AnswerError::NotPending));
    h.advance(timeout);
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["id"], json!(8), "only the request still waiting times out");
}

#[test]
fn legacy_requests_end_with_their_transport() {
    let answers = ServerRequestKinds { roots: true, ..Default::default() };
    let mut h = legacy(answers);
    h.peer(json!({"jsonrpc": "2.0", "id": 3, "method": "roots/list"}));
    let (asks, _) = drain(&mut h);
    h.engine.handle_transport(h.now, TransportEvent::closed(super::tests::exit(1)));
    h.flush();
    assert!(h.events().iter().any(|e| e == "expired"));
    assert_eq!(h.engine.answer(h.now, asks[0].0, raw("{}")), Err(AnswerError::NotPending));
    assert!(h.take_sent().iter().all(|f| f.get("id") != Some(&json!(3))), "nothing for id 3");
}

#[test]
fn a_huge_server_request_timeout_does_not_overflow_the_clock() {
    let answers = ServerRequestKinds { roots: true, ..Default::default() };
    let mut h = Harness::new(Config {
        era: EraPreference::LegacyOnly,
        answers,
        server_request_timeout: Duration::MAX,
        ..Config::default()
    });
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    h.reply(&init, json!({"protocolVersion": "2025-11-25", "capabilities": {}}));
    h.peer(json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}));
    assert!(h.engine.poll_timeout().is_some_and(|t| t > h.now));
}

#[test]
fn a_rejected_sampling_request_gets_the_user_rejected_error() {
    let answers = ServerRequestKinds { sampling: true, ..Default::default() };
    let mut h = legacy(answers);
    h.peer(json!({"jsonrpc": "2.0", "id": 5, "method": "sampling/createMessage", "params": {}}));
    let (asks, _) = drain(&mut h);
    h.engine.reject(h.now, asks[0].0).unwrap();
    let sent = h.sent_one();
    assert_eq!(sent["error"]["code"], -1);
    assert_eq!(h.engine.reject(h.now, asks[0].0), Err(AnswerError::NotPending));
}

#[test]
fn a_full_table_refuses_more_legacy_requests() {
    let answers = ServerRequestKinds { roots: true, ..Default::default() };
    let mut h = Harness::new(Config {
        era: EraPreference::LegacyOnly,
        answers,
        max_server_requests: 1,
        ..Config::default()
    });
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    h.reply(&init, json!({"protocolVersion": "2025-11-25", "capabilities": {}}));
    h.take_sent();
    h.peer(json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}));
    h.peer(json!({"jsonrpc": "2.0", "id": 2, "method": "roots/list"}));
    let sent = h.take_sent();
    assert_eq!((&sent[0]["id"], &sent[0]["error"]["code"]), (&json!(2), &json!(-32603)));
}

#[test]
fn modern_discover_declares_the_answered_kinds_too() {
    let mut h = Harness::new(config());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    assert_eq!(
        probe["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        answers_caps(ServerRequestKinds::all())
    );
    h.reply(&probe, discover_result());
}

/// A server that asks and withdraws without end cannot grow the events of a host that does
/// not drain them: a request withdrawn before the host took it leaves no event at all (each
/// pair left its `ServerRequest`, params copied, and an `expired` behind, past
/// `max_queued_events`). One the host took is still said to have expired.
#[test]
fn requests_withdrawn_before_the_host_took_them_leave_no_events() {
    let answers = ServerRequestKinds { roots: true, ..Default::default() };
    let mut h = legacy(answers);
    for id in 0..5_000 {
        h.peer(json!({"jsonrpc": "2.0", "id": id, "method": "roots/list"}));
        h.peer(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id}}));
    }
    assert_eq!(h.engine.queued_events(), 0);
    h.peer(json!({"jsonrpc": "2.0", "id": "seen", "method": "roots/list"}));
    let (asks, _) = drain(&mut h);
    assert_eq!(asks.len(), 1);
    h.peer(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "seen"}}));
    assert_eq!(h.events(), ["expired"]);
}

/// A call that ends takes the input requests the host has not taken yet with it: rejecting
/// one of two left the other on the queue, asking the host for a call that had failed.
#[test]
fn a_call_that_ends_takes_its_untaken_input_requests_along() {
    let mut h = Harness::ready_with(config());
    let c = h.call("t", "{}");
    let first = h.sent_one();
    let inputs = json!({"a": elicit("first?"), "b": elicit("second?")});
    h.reply(&first, json!({"resultType": "input_required", "inputRequests": inputs}));
    let request = loop {
        match h.engine.poll_event() {
            Some(Event::ServerRequest { request, .. }) => break request,
            Some(_) => {}
            None => panic!("no input request"),
        }
    };
    h.engine.reject(h.now, request).unwrap();
    assert_eq!(h.events(), [format!("failed {} input_rejected", c.get())]);
}

/// A 2026-07-28 server that sends a request anyway (the era has none: input comes as
/// `input_required`) gets no response and the host is not asked: `ping` was answered, and a
/// declared kind reached the host as a legacy request whose answer went on the wire.
#[test]
fn a_modern_servers_requests_are_ignored() {
    // Before the era is settled too: a request that comes ahead of the probe's answer.
    let mut h = Harness::new(config());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.peer(json!({"jsonrpc": "2.0", "id": "s0", "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            "maxTokens": 10}}));
    h.reply(&probe, discover_result());
    assert_eq!(h.events(), ["ready modern 2026-07-28"], "the host is not asked");
    assert!(h.take_sent().is_empty(), "no answer goes");

    let mut h = Harness::ready_with(config());
    h.peer(json!({"jsonrpc": "2.0", "id": "s1", "method": "ping"}));
    h.peer(json!({"jsonrpc": "2.0", "id": "s2", "method": "elicitation/create",
        "params": {"mode": "form", "message": "Name?",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}));
    assert!(h.take_sent().is_empty(), "no response in 2026");
    assert!(h.events().is_empty(), "the host is not asked");
    assert_eq!(h.engine.stats().invalid_frames, 2);
}

/// What a user typed into an elicitation (a password) and the call's arguments stay out of
/// the engine's debug output, while they wait in its buffers (a round's answers until the
/// slot is reused; a legacy answer until it is written): the derived output printed them.
#[test]
fn answers_and_arguments_stay_out_of_debug_output() {
    const SECRET: &str = "hunter2-secret";
    let no_secret = |h: &Harness| {
        let bytes = format!("{:?}", SECRET.as_bytes());
        let bytes = bytes.trim_matches(['[', ']']);
        for shown in [format!("{:?}", h.engine), format!("{:#?}", h.engine)] {
            assert!(!shown.contains(SECRET) && !shown.contains(bytes), "{shown}");
        }
    };
    let ask_code = json!({"method": "elicitation/create", "params": {"message": "code?",
        "requestedSchema": {"type": "object", "properties": {"code": {"type": "string"}}}}});
    let mut h = Harness::ready_with(config());
    h.call("login", &format!(r#"{{"password":"{SECRET}"}}"#));
    let first = h.sent_one();
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"resultType":"input_required","inputRequests":{{"a":{ask_code},"b":{ask_code}}}}}}}"#,
        first["id"],
    );
    h.engine.handle_message(h.now, frame.as_bytes());
    let (asks, _) = drain(&mut h);
    let typed = json!({"action": "accept", "content": {"code": SECRET}});
    h.engine.answer(h.now, asks[0].0, raw(&typed.to_string())).unwrap();
    no_secret(&h);
    answer(&mut h, asks[1].0, typed.clone()).unwrap();
    let retry = h.sent_one();
    assert_eq!(retry["params"]["inputResponses"]["a"]["content"]["code"], SECRET);
    no_secret(&h);

    let mut h = legacy(ServerRequestKinds::all());
    let mut request = ask_code;
    request["jsonrpc"] = json!("2.0");
    request["id"] = json!(1);
    h.peer(request);
    let (asks, _) = drain(&mut h);
    h.engine.answer(h.now, asks[0].0, raw(&typed.to_string())).unwrap();
    no_secret(&h);
}
