//! Call records and trace context with a scripted peer and simulated time: what each record
//! holds, the trace context on every attempt, page, round and era, and the counters.

use std::time::Duration;

use serde_json::{json, Value};

use super::{raw, wire, Harness};
use crate::config::{BreakerPolicy, RetryPolicy};
use crate::engine::*;
use crate::proto::meta::TraceContext;
use crate::proto::trace::TraceContextError;

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn traced(class: Option<Idempotency>) -> CallOptions {
    let trace = TraceContext::new(TRACEPARENT)
        .and_then(|t| t.with_tracestate("rojo=00f067aa0ba902b7"))
        .and_then(|t| t.with_baggage("userId=alice"))
        .unwrap();
    CallOptions { trace: Some(trace), run_id: Some(77), idempotency: class, ..Default::default() }
}

#[track_caller]
fn assert_traced(frame: &Value) {
    let meta = &frame["params"]["_meta"];
    assert_eq!(meta["traceparent"], TRACEPARENT, "{frame}");
    assert_eq!(meta["tracestate"], "rojo=00f067aa0ba902b7", "{frame}");
    assert_eq!(meta["baggage"], "userId=alice", "{frame}");
}

fn no_jitter() -> Config {
    Config {
        retry: RetryPolicy { jitter_percent: 0, ..RetryPolicy::default() },
        ..Config::default()
    }
}

/// The one terminal event's record, copied out (its strings become owned for the assertion).
fn end(h: &mut Harness) -> (CallRecord<'static>, Option<String>, Option<CallError>) {
    loop {
        match h.engine.poll_event() {
            Some(Event::CallDone { record, .. }) => {
                let tool = record.tool.map(str::to_owned);
                return (record.detached(), tool, None);
            }
            Some(Event::CallFailed { record, error, .. }) => {
                let tool = record.tool.map(str::to_owned);
                return (record.detached(), tool, Some(error));
            }
            Some(_) => {}
            None => panic!("no terminal event"),
        }
    }
}

#[test]
fn a_completed_call_records_what_the_engine_knows() {
    let mut h = Harness::ready_with(Config { max_in_flight: 1, ..Config::default() });
    let blocker = h.call("first", "{}");
    let c = h.engine.call_tool(h.now, "lookup", raw(r#"{"q":"x"}"#), &traced(None)).unwrap();
    let first = h.sent_one();
    h.advance(Duration::from_millis(5));
    h.reply(&first, json!({"content": []}));
    let (r, _, _) = end(&mut h);
    assert_eq!(r.call, Some(blocker));
    // Queued 5 ms behind the first call, then 30 ms on the wire.
    let sent = h.sent_one();
    assert_traced(&sent);
    h.advance(Duration::from_millis(30));
    h.reply(&sent, json!({"content": [], "isError": true}));
    let (r, tool, error) = end(&mut h);
    assert_eq!(error, None);
    assert_eq!(tool.as_deref(), Some("lookup"));
    assert_eq!(r.call, Some(c));
    assert_eq!(r.server, None, "an engine does not know its server's name");
    assert_eq!(r.trace_id.map(|t| t.to_string()).as_deref(), Some(&TRACEPARENT[3..35]));
    assert_eq!(r.run_id, Some(77));
    assert_eq!(r.transport, TransportKind::Stdio);
    assert_eq!(r.version, Some(ProtocolVersion::MODERN));
    assert_eq!(r.request_id, Some(wire(&sent)));
    assert_eq!(r.method, Method::ToolsCall);
    assert_eq!((r.attempts, r.rounds), (1, 0));
    assert_eq!(r.queue_wait, Duration::from_millis(5));
    assert_eq!(r.network, Duration::from_millis(30));
    assert_eq!(r.elapsed, Duration::from_millis(35));
    assert!(r.tool_error, "isError is a completion, flagged");
    assert!(!r.cancelled && !r.retryable && !r.cache_hit);
    assert_eq!((r.error_kind, r.error_name, r.error_code), (None, None, None));
}

#[test]
fn failures_record_their_kind_name_code_and_whether_they_are_retryable() {
    let mut h = Harness::ready_http_with(no_jitter());
    // A JSON-RPC error: protocol, its code, not retryable.
    h.call("t", "{}");
    let sent = h.sent_one();
    h.reply_error(&sent, -32602, None);
    let (r, tool, _) = end(&mut h);
    assert_eq!(tool.as_deref(), Some("t"), "a failed call keeps its tool name too");
    assert_eq!(
        (r.error_kind, r.error_name, r.error_code),
        (Some("protocol"), Some("invalid_params"), Some(-32602))
    );
    assert!(!r.retryable && !r.cancelled);

    // A read failing in transport three times: retryable, three attempts, network time is the
    // attempts' own time (10 ms each), not the backoffs between them.
    let c = h.engine.call_tool(h.now, "r", raw("{}"), &traced(Some(Idempotency::Read))).unwrap();
    let lost = || ExchangeFailure::Transport(TransportError::ConnectionLost);
    let start = h.now;
    let mut frames = Vec::new();
    for _ in 0..3 {
        let mut s = h.take_sent();
        while s.is_empty() {
            h.advance_to_next_timeout();
            s = h.take_sent();
        }
        let frame = s.remove(0);
        assert_traced(&frame);
        h.advance(Duration::from_millis(10));
        h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&frame), lost()));
        frames.push(frame);
    }
    let (r, _, error) = end(&mut h);
    assert_eq!(error, Some(CallError::Transport(TransportError::ConnectionLost)));
    assert_eq!(r.call, Some(c));
    assert_eq!(r.transport, TransportKind::Http);
    assert_eq!(r.attempts, 3);
    assert_eq!(r.request_id, Some(wire(&frames[2])), "the last attempt's id");
    assert_eq!(r.network, Duration::from_millis(30));
    assert_eq!(r.elapsed, h.now - start);
    assert!(r.elapsed > r.network + Duration::from_millis(250), "backoffs of 100 and 200 ms");
    assert!(r.retryable);
    assert_eq!((r.error_kind, r.error_name), (Some("transport"), Some("connection_lost")));

    // Cancelled before it was written: no attempt, no request id.
    let c = h.call("slow", "{}");
    h.engine.cancel(h.now, c).unwrap();
    let (r, _, _) = end(&mut h);
    assert!(r.cancelled);
    assert_eq!((r.attempts, r.request_id, r.error_name), (0, None, Some("cancelled")));
}

/// A call that ends in its backoff (cancelled before its retry went) records the id of the
/// attempt the server saw: the retry's id, renewed but never written, named a request no
/// server log holds.
#[test]
fn a_call_ending_in_its_backoff_records_the_id_that_was_written() {
    let mut h = Harness::ready_http_with(no_jitter());
    let c = h.engine.call_tool(h.now, "r", raw("{}"), &traced(Some(Idempotency::Read))).unwrap();
    let frame = h.sent_one();
    let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&frame), lost));
    assert!(h.take_sent().is_empty(), "the retry waits for its backoff");
    h.engine.cancel(h.now, c).unwrap();
    let (r, _, _) = end(&mut h);
    assert_eq!((r.attempts, r.request_id), (1, Some(wire(&frame))));
}

#[test]
fn a_malformed_traceparent_is_refused_before_anything_is_sent() {
    let mut h = Harness::ready_modern();
    let bad = TraceContext { traceparent: "00-a-b-01".into(), ..Default::default() };
    let opts = CallOptions { trace: Some(bad), ..Default::default() };
    let got = h.engine.call_tool(h.now, "t", raw("{}"), &opts);
    assert_eq!(got, Err(RequestError::TraceContext(TraceContextError::Format)));
    let zero = "00-00000000000000000000000000000000-b7ad6b7169203331-01";
    let opts = CallOptions {
        trace: Some(TraceContext { traceparent: zero.into(), ..Default::default() }),
        ..Default::default()
    };
    let got = h.engine.list(h.now, Method::ToolsList, &opts);
    assert_eq!(got, Err(RequestError::TraceContext(TraceContextError::TraceId)));
    assert!(h.take_sent().is_empty());
    assert_eq!(h.engine.pending(), 0);
}

#[test]
fn the_trace_context_rides_every_page_round_and_era() {
    // Every page of a listing.
    let mut h = Harness::ready_modern();
    h.engine.list(h.now, Method::ToolsList, &traced(None)).unwrap();
    let page1 = h.sent_one();
    assert_traced(&page1);
    h.reply(&page1, json!({"tools": [], "nextCursor": "c2"}));
    let page2 = h.sent_one();
    assert_eq!(page2["params"]["cursor"], "c2");
    assert_traced(&page2);
    h.reply(&page2, json!({"tools": []}));
    let (r, tool, _) = end(&mut h);
    assert_eq!((r.method, tool, r.attempts), (Method::ToolsList, None, 2), "one per page");
    assert_eq!(r.request_id, Some(wire(&page2)));

    // Each `input_required` round.
    let config = Config { answers: crate::ServerRequestKinds::all(), ..Config::default() };
    let mut h = Harness::ready_with(config);
    h.engine.call_tool(h.now, "deploy", raw("{}"), &traced(None)).unwrap();
    let first = h.sent_one();
    assert_traced(&first);
    let frame = json!({"jsonrpc": "2.0", "id": first["id"], "result": {"resultType": "input_required",
        "inputRequests": {"where": {"method": "roots/list"}}}});
    h.peer(frame);
    let request = loop {
        match h.engine.poll_event() {
            Some(Event::ServerRequest { request, .. }) => break request,
            Some(_) => {}
            None => panic!("no input request"),
        }
    };
    h.engine.answer(h.now, request, raw(r#"{"roots":[]}"#)).unwrap();
    let round = h.sent_one();
    assert!(round["params"]["inputResponses"].is_object());
    assert_traced(&round);
    h.reply(&round, json!({"content": []}));
    let (r, _, _) = end(&mut h);
    assert_eq!(r.rounds, 1);
    assert_eq!(r.trace_id.map(|t| t.to_string()).as_deref(), Some(&TRACEPARENT[3..35]));

    // The legacy era: `_meta` carries the trace context too (and no 2026 members).
    let mut h = Harness::ready_legacy();
    h.engine.call_tool(h.now, "t", raw("{}"), &traced(None)).unwrap();
    let sent = h.sent_one();
    assert_traced(&sent);
    assert!(sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].is_null());
    h.reply(&sent, json!({"content": []}));
    let (r, _, _) = end(&mut h);
    assert_eq!(r.version.map(|v| v.era()), Some(crate::Era::Legacy));
}

#[test]
fn stats_count_calls_failures_by_kind_and_breaker_trips() {
    let breaker = BreakerPolicy { failure_threshold: 2, ..BreakerPolicy::default() };
    let retry = RetryPolicy { max_attempts: 1, ..RetryPolicy::default() };
    let mut h = Harness::ready_http_with(Config { breaker, retry, ..Config::default() });
    h.call("ok", "{}");
    let s = h.sent_one();
    h.reply(&s, json!({"content": []}));
    h.call("bad", "{}");
    let s = h.sent_one();
    h.reply_error(&s, -32601, None);
    for _ in 0..2 {
        h.call("w", "{}");
        let s = h.sent_one();
        let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
        h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&s), lost));
    }
    // The write breaker is open now; a read answers to its own.
    let read = CallOptions { idempotency: Some(Idempotency::Read), ..Default::default() };
    let c = h.engine.call_tool(h.now, "never", raw("{}"), &read).unwrap();
    h.engine.cancel(h.now, c).unwrap();
    h.events();
    let st = h.engine.stats();
    assert_eq!(st.calls, 5);
    assert_eq!(st.failures.total(), 4);
    assert_eq!((st.failures.protocol, st.failures.local, st.failures.cancelled), (1, 3, 1));
    assert_eq!(st.breaker_trips, 1, "two transport failures in a row open the breaker once");
}
