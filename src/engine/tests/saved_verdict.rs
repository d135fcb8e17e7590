//! Restart without a probe: a saved `server/discover` verdict (`Config::saved_discover`) lets
//! the first call go out at once, and the engine probes after all when the verdict does not
//! hold. Simulated time, scripted peer.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::Harness;
use crate::engine::*;

const WALL: Duration = Duration::from_secs(1_800_000_000);

fn wall() -> SystemTime {
    SystemTime::UNIX_EPOCH + WALL
}

fn discover(ttl_ms: u64) -> Value {
    json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
           "capabilities": {"tools": {}}, "ttlMs": ttl_ms, "cacheScope": "private",
           "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}})
}

fn saved() -> SavedVerdict {
    SavedVerdict {
        version: ProtocolVersion::MODERN,
        result: discover(60_000).to_string(),
        expires: wall() + Duration::from_secs(60),
    }
}

fn restarted(config: Config) -> Harness {
    let mut h = Harness::new(Config { saved_discover: Some(saved()), ..config });
    h.engine.handle_transport(h.now, TransportEvent::opened());
    assert_eq!(h.events(), ["ready modern 2026-07-28"]);
    h
}

/// Answers the `initialize` just sent as a 2025-11-25 server; returns what followed it.
fn answer_initialize(h: &mut Harness) -> Vec<Value> {
    let init = h.sent_one();
    assert_eq!(init["method"], "initialize");
    let legacy = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                        "serverInfo": {"name": "s", "version": "1"}});
    h.reply(&init, legacy);
    h.take_sent()
}

fn done(call: CallId, result: &Value) -> String {
    format!("done {} {result}", call.get())
}

#[test]
fn a_restarted_host_sends_its_first_call_without_a_probe() {
    // First run: probe, then the call: two requests before the call's answer.
    let mut first = Harness::new(Config::default());
    let call = first.call("echo", r#"{"text":"hi"}"#);
    first.engine.handle_transport(first.now, TransportEvent::opened());
    let probe = first.sent_one();
    assert_eq!(probe["method"], "server/discover");
    first.reply(&probe, discover(60_000));
    let sent = first.sent_one();
    assert_eq!(sent["method"], "tools/call");
    let ok = json!({"resultType": "complete", "content": []});
    first.reply(&sent, ok.clone());
    assert_eq!(first.events(), ["ready modern 2026-07-28".to_string(), done(call, &ok)]);
    assert_eq!(first.engine.stats().requests_sent, 2);

    // The host keeps the verdict; 10 s later it has 50 s left.
    first.advance(Duration::from_secs(10));
    let verdict = first.engine.verdict(first.now, wall()).expect("a fresh modern verdict");
    assert_eq!(verdict.version, ProtocolVersion::MODERN);
    assert_eq!(verdict.expires, wall() + Duration::from_secs(50));
    assert_eq!(serde_json::from_str::<Value>(&verdict.result).unwrap(), discover(60_000));

    // Second run: the first frame on the wire is the call itself, in the saved version.
    let mut h = Harness::new(Config { saved_discover: Some(verdict.clone()), ..Config::default() });
    let call = h.call("echo", r#"{"text":"hi"}"#);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let sent = h.sent_one();
    assert_eq!(sent["method"], "tools/call");
    assert_eq!(sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    h.reply(&sent, ok.clone());
    assert_eq!(h.events(), ["ready modern 2026-07-28".to_string(), done(call, &ok)]);
    assert_eq!(h.engine.stats().requests_sent, 1, "one round trip, not two");
    assert_eq!(h.engine.server_info(), Some(verdict.result.as_str()));
    assert_eq!(h.engine.verdict(h.now, wall()), Some(verdict), "given back as it was saved");
}

/// A server's `ttlMs` of centuries keeps the verdict a day at most: the saved verdict
/// outlives the process, and nothing bounded it.
#[test]
fn a_huge_ttl_keeps_the_verdict_a_day_at_most() {
    let mut h = Harness::new(Config::default());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.reply(&probe, discover(1_000_000_000_000_000_000));
    let verdict = h.engine.verdict(h.now, wall()).expect("a fresh modern verdict");
    assert_eq!(verdict.expires, wall() + Duration::from_secs(24 * 3600));
}

#[test]
fn a_refused_version_falls_back_to_the_probe_and_sends_the_call_again() {
    let mut h = restarted(Config::default());
    let call = h.call("write_note", r#"{"note":"x"}"#);
    let first = h.sent_one();
    // -32022: the server did not process it; even a write goes out again.
    let data = json!({"supported": ["2026-07-28"], "requested": "2026-07-28"});
    h.reply_error(&first, -32022, Some(data));
    let probe = h.sent_one();
    assert_eq!(probe["method"], "server/discover");
    assert!(h.events().is_empty(), "the call waits for the probe");
    h.reply(&probe, discover(0));
    let again = h.sent_one();
    assert_eq!(again["method"], "tools/call");
    assert_ne!(again["id"], first["id"], "a new id");
    let ok = json!({"resultType": "complete", "content": []});
    h.reply(&again, ok.clone());
    assert_eq!(h.events(), ["ready modern 2026-07-28".to_string(), done(call, &ok)]);
    assert_eq!(h.engine.verdict(h.now, wall()), None, "ttlMs 0: nothing to keep");
}

/// A read and a write sent at once under a saved verdict, and the read refused as a legacy
/// server refuses a call before `initialize`: the era is probed again. Returns the read, the
/// write, the write's frame and the probe.
fn a_read_and_a_write_and_a_refusal(h: &mut Harness) -> (CallId, CallId, Value, Value) {
    let opts = CallOptions { idempotency: Some(Idempotency::Read), ..CallOptions::default() };
    let args: &RawValue = serde_json::from_str(r#"{"text":"hi"}"#).unwrap();
    let read = h.engine.call_tool(h.now, "echo", args, &opts).unwrap();
    let write = h.call("write_note", r#"{"note":"x"}"#);
    let mut sent = h.take_sent();
    assert_eq!(sent.len(), 2);
    h.reply_error(&sent[0], -32000, None); // "Server not initialized"
    let probe = h.sent_one();
    assert_eq!(probe["method"], "server/discover");
    (read, write, sent.remove(1), probe)
}

#[test]
fn a_legacy_server_refusing_the_first_call_gets_the_handshake() {
    let mut h = restarted(Config::default());
    // The read is safe to repeat: it is sent again after the handshake. The write is not: it
    // ends with the server's error.
    let (read, write, write_frame, probe) = a_read_and_a_write_and_a_refusal(&mut h);
    h.reply_error(&write_frame, -32000, None);
    assert_eq!(h.events(), [format!("failed {} server_error", write.get())]);
    h.reply_error(&probe, -32601, None);
    let sent = answer_initialize(&mut h);
    assert_eq!(sent[0]["method"], "notifications/initialized");
    assert_eq!(sent[1]["method"], "tools/call");
    assert!(sent[1]["params"].get("_meta").is_none(), "legacy: no modern _meta");
    let ok = json!({"content": []});
    h.reply(&sent[1], ok.clone());
    assert_eq!(h.events(), ["ready legacy 2025-11-25".to_string(), done(read, &ok)]);
    assert_eq!(h.engine.verdict(h.now, wall()), None, "a legacy verdict is not kept");
}

/// Two reads sent at once under a saved verdict that no longer holds, both refused as a legacy
/// server refuses a call before `initialize`: both go again after the handshake. The second
/// refusal, coming after the first had ended the assumption, failed its read.
#[test]
fn every_read_refused_under_a_stale_verdict_goes_again() {
    let mut h = restarted(Config::default());
    let opts = CallOptions { idempotency: Some(Idempotency::Read), ..CallOptions::default() };
    let args: &RawValue = serde_json::from_str(r#"{"text":"hi"}"#).unwrap();
    let reads = [(); 2].map(|_| h.engine.call_tool(h.now, "echo", args, &opts).unwrap());
    let sent = h.take_sent();
    assert_eq!(sent.len(), 2);
    h.reply_error(&sent[0], -32000, None);
    let probe = h.sent_one();
    h.reply_error(&sent[1], -32000, None);
    assert!(h.events().is_empty(), "neither read is over");
    h.reply_error(&probe, -32601, None);
    let resent: Vec<Value> =
        answer_initialize(&mut h).into_iter().filter(|f| f["method"] == "tools/call").collect();
    assert_eq!(resent.len(), 2);
    let ok = json!({"content": []});
    for frame in &resent {
        h.reply(frame, ok.clone());
    }
    let events = h.events();
    for read in reads {
        assert!(events.contains(&done(read, &ok)), "{events:?}");
    }
}

/// Once a first answer has confirmed the saved verdict, an error to another call sent with it
/// is that call's own: delivered, the call not sent again (a read was sent twice, and waited
/// twice as long for the same error).
#[test]
fn an_error_after_the_verdict_was_confirmed_is_the_calls_own() {
    let mut h = restarted(Config::default());
    let opts = CallOptions { idempotency: Some(Idempotency::Read), ..CallOptions::default() };
    let args: &RawValue = serde_json::from_str(r#"{"text":"hi"}"#).unwrap();
    let reads = [(); 2].map(|_| h.engine.call_tool(h.now, "echo", args, &opts).unwrap());
    let sent = h.take_sent();
    let ok = json!({"resultType": "complete", "content": []});
    h.reply(&sent[0], ok.clone());
    h.reply_error(&sent[1], -32602, None);
    assert_eq!(
        h.events(),
        [done(reads[0], &ok), format!("failed {} invalid_params", reads[1].get())]
    );
    assert!(h.take_sent().is_empty(), "nothing sent again");
}

/// A call sent under the saved verdict whose error comes after the re-probe another call's
/// error started has settled the same version: the error is the call's own. The read was
/// sent again (and waited twice for the same error), as if the era were still in doubt.
#[test]
fn an_error_after_the_reprobe_settled_the_same_version_is_the_calls_own() {
    let mut h = restarted(Config::default());
    let opts = CallOptions { idempotency: Some(Idempotency::Read), ..CallOptions::default() };
    let args: &RawValue = serde_json::from_str(r#"{"text":"hi"}"#).unwrap();
    let reads = [(); 2].map(|_| h.engine.call_tool(h.now, "echo", args, &opts).unwrap());
    let sent = h.take_sent();
    h.reply_error(&sent[0], -32000, None);
    let probe = h.sent_one();
    assert_eq!(probe["method"], "server/discover");
    h.reply(&probe, discover(0));
    let again = h.sent_one();
    assert_eq!(again["params"]["name"], "echo", "the first read, sent again after the probe");
    h.reply_error(&sent[1], -32602, None);
    assert!(h.take_sent().is_empty(), "the second read is not sent again");
    let failed = format!("failed {} invalid_params", reads[1].get());
    assert!(h.events().contains(&failed), "{failed}");
}

/// A process that exits during the probe a refused first call started (a saved verdict that
/// no longer holds) takes the calls already written with it: a write ends `DeliveryUnknown`
/// at once, a read is sent again after the handshake, and neither waits out its deadline
/// under the old process's id.
#[test]
fn calls_written_before_a_reverify_probe_that_kills_the_process_are_settled() {
    let mut h = restarted(Config::default());
    let (read, write, _, _) = a_read_and_a_write_and_a_refusal(&mut h);
    h.engine.handle_transport(h.now, TransportEvent::closed(super::exit(1)));
    assert_eq!(h.events(), [format!("failed {} delivery_unknown", write.get())]);
    assert!(h.engine.wants_transport(), "respawned for initialize");
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let sent = answer_initialize(&mut h);
    let mut resent: Vec<Value> = sent.into_iter().filter(|f| f["method"] == "tools/call").collect();
    while resent.is_empty() && h.engine.poll_timeout().is_some() {
        h.advance_to_next_timeout();
        resent = h.take_sent().into_iter().filter(|f| f["method"] == "tools/call").collect();
    }
    assert_eq!(resent.len(), 1, "{:?}", h.events());
    assert_eq!(resent[0]["params"]["name"], "echo");
    let ok = json!({"content": []});
    h.reply(&resent[0], ok.clone());
    assert!(h.events().contains(&done(read, &ok)));
}

#[test]
fn a_legacy_answer_is_delivered_and_then_the_era_is_probed() {
    let mut h = restarted(Config::default());
    let call = h.call("echo", r#"{"text":"hi"}"#);
    let sent = h.sent_one();
    // No `resultType`: only a legacy server answers so.
    let legacy = json!({"content": []});
    h.reply(&sent, legacy.clone());
    assert_eq!(h.events(), [done(call, &legacy)]);
    assert_eq!(h.engine.state(), ServerState::Probing);
    let probe = h.sent_one();
    assert_eq!(probe["method"], "server/discover");
}

#[test]
fn a_confirmed_verdict_is_not_questioned_again() {
    let mut h = restarted(Config::default());
    let a = h.call("echo", r#"{"text":"a"}"#);
    let sent = h.sent_one();
    let ok = json!({"resultType": "complete", "content": []});
    h.reply(&sent, ok.clone());
    let b = h.call("echo", r#"{"text":"b"}"#);
    let sent = h.sent_one();
    h.reply_error(&sent, -32602, None);
    assert_eq!(h.events(), [done(a, &ok), format!("failed {} invalid_params", b.get())]);
    assert!(h.take_sent().is_empty(), "no probe once an answer confirmed the verdict");
}

#[test]
fn the_saved_verdict_serves_the_first_transport_only_and_never_legacy_only() {
    let mut h = restarted(no_restart_once());
    h.engine.handle_transport(
        h.now,
        TransportEvent::closed(crate::error::TransportError::ConnectionLost),
    );
    assert!(h.events().iter().any(|e| e.starts_with("lost")));
    h.advance_to_next_timeout();
    assert!(h.engine.wants_transport());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    assert_eq!(h.sent_one()["method"], "server/discover", "a new process is probed");

    let config = Config {
        saved_discover: Some(saved()),
        era: EraPreference::LegacyOnly,
        ..Config::default()
    };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    assert_eq!(h.sent_one()["method"], "initialize");
}

fn no_restart_once() -> Config {
    let restart = crate::config::RestartPolicy {
        base_delay: Duration::from_millis(10),
        ..crate::config::RestartPolicy::default()
    };
    Config { restart, ..Config::default() }
}

#[test]
fn a_saved_verdict_is_checked_once() {
    // What `Engine::new` checks first.
    let bad = |v: SavedVerdict| {
        let config = Config { saved_discover: Some(v), ..Config::default() };
        Engine::new(config, Instant::now()).map(drop).unwrap_err().field
    };
    let legacy = SavedVerdict { version: ProtocolVersion::LEGACY, ..saved() };
    assert_eq!(bad(legacy), "saved_discover");
    let not_json = SavedVerdict { result: "{".into(), ..saved() };
    assert_eq!(bad(not_json), "saved_discover");
    let other =
        SavedVerdict { result: r#"{"supportedVersions":["2099-01-01"]}"#.into(), ..saved() };
    assert_eq!(bad(other), "saved_discover");
    assert!(saved().is_fresh(wall()));
    assert!(!saved().is_fresh(wall() + Duration::from_secs(60)));
    // An expiry more than a day ahead was dated by a wrong clock (then or now): not fresh,
    // or a device booted at 1970 before NTP served a verdict of 2025 for good.
    let booted_at_1970 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
    assert!(!saved().is_fresh(booted_at_1970));
    let a_day = Duration::from_secs(24 * 3600);
    assert!(saved().is_fresh(saved().expires - a_day));
    assert!(!saved().is_fresh(saved().expires - a_day - Duration::from_secs(1)));
}

/// An HTTP engine restarted with the saved verdict, ready at once.
fn restarted_over_http() -> Harness {
    let mut h = Harness::new(Config { saved_discover: Some(saved()), ..Config::default() });
    h.engine.handle_transport(h.now, TransportEvent::opened_as(TransportKind::Http));
    assert_eq!(h.events(), ["ready modern 2026-07-28"]);
    h
}

/// The wire id of a request the harness decoded.
fn id(v: &Value) -> WireId {
    WireId::parse(crate::proto::json::parse(v["id"].to_string().as_bytes()).unwrap()).unwrap()
}

/// A legacy server's "no session" answer: a 400 with no JSON-RPC body.
fn bad() -> ExchangeFailure {
    ExchangeFailure::Transport(crate::error::TransportError::HttpStatus(400))
}

/// The reverify a refusal started: its probe refused as a legacy server refuses it, the
/// handshake answered; returns what followed the `initialize`.
fn legacy_after_the_reverify(h: &mut Harness) -> Vec<Value> {
    h.flush();
    let probe = h.sent_one();
    assert_eq!(probe["method"], "server/discover");
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(id(&probe), bad()));
    h.flush();
    answer_initialize(h)
}

#[test]
fn over_http_a_bare_4xx_to_the_first_call_leads_to_the_handshake() {
    let mut h = restarted_over_http();
    let call = h.call("write_note", r#"{"note":"x"}"#);
    let first = h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(id(&first), bad()));
    let sent = legacy_after_the_reverify(&mut h);
    assert_eq!(sent[1]["method"], "tools/call", "the write goes out again: it was refused");
    let ok = json!({"content": []});
    h.reply(&sent[1], ok.clone());
    assert_eq!(h.events(), ["ready legacy 2025-11-25".to_string(), done(call, &ok)]);
}

/// Two calls out under a saved verdict that no longer holds, each refused with a bare 4xx:
/// both were refused, not processed, and both go again once the handshake is done. The old
/// engine sent only the first again: the second refusal came after the reverify had begun,
/// and failed its call with `HttpStatus(400)`.
#[test]
fn over_http_every_call_refused_under_a_stale_verdict_goes_again() {
    let mut h = restarted_over_http();
    let a = h.call("write_note", r#"{"note":"a"}"#);
    let b = h.call("write_note", r#"{"note":"b"}"#);
    let out = h.take_sent();
    assert_eq!(out.len(), 2, "{out:?}");
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(id(&out[0]), bad()));
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(id(&out[1]), bad()));
    let sent = legacy_after_the_reverify(&mut h);
    let notes: Vec<&Value> = sent.iter().filter(|m| m["method"] == "tools/call").collect();
    assert_eq!(notes.len(), 2, "both go out again: {sent:?}");
    let ok = json!({"content": []});
    for m in &notes {
        h.reply(m, ok.clone());
    }
    let events = h.events();
    assert!(events.contains(&done(a, &ok)) && events.contains(&done(b, &ok)), "{events:?}");
}

#[test]
fn silence_on_the_first_call_fails_it_and_probes_before_the_next() {
    let mut h = restarted(Config::default());
    let opts = CallOptions::timeout(Duration::from_secs(2));
    let args: &RawValue = serde_json::from_str("{}").unwrap();
    let call = h.engine.call_tool(h.now, "echo", args, &opts).unwrap();
    assert_eq!(h.sent_one()["method"], "tools/call");
    h.advance(Duration::from_secs(3));
    assert_eq!(h.events(), [format!("failed {} deadline_exceeded", call.get())]);
    let sent: Vec<_> = h.take_sent().into_iter().map(|v| v["method"].clone()).collect();
    assert_eq!(sent, [json!("notifications/cancelled"), json!("server/discover")]);
}

/// A restarted process of a server whose saved verdict an answer confirmed is probed as a
/// modern server, as one whose own probe settled the era: its exit during the probe is a
/// crash paced by the restart policy, not the legacy server's answer to a non-`initialize`
/// message (respawned at once for `initialize`, the server quietly taken as legacy).
#[test]
fn a_restarted_server_of_a_confirmed_saved_verdict_is_probed_as_modern() {
    let mut h = restarted(Config::default());
    let call = h.call("echo", r#"{"text":"a"}"#);
    let sent = h.sent_one();
    let ok = json!({"resultType": "complete", "content": []});
    h.reply(&sent, ok.clone());
    assert_eq!(h.events(), [done(call, &ok)]);
    h.engine.handle_transport(h.now, TransportEvent::closed(super::exit(1)));
    h.open_next_process();
    assert_eq!(h.sent_one()["method"], "server/discover");
    h.events();
    h.engine.handle_transport(h.now, TransportEvent::closed(super::exit(1)));
    assert!(!h.engine.wants_transport(), "not respawned at once for initialize");
    assert!(h.events().iter().any(|e| e.starts_with("lost process_exit")), "a crash");
}
