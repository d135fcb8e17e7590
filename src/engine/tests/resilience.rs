//! Resilience scenarios with simulated time: retries and backoff, delivery-unknown writes,
//! supervised restart and crash loops, breakers, the in-flight limit, idempotency classes.

use std::time::Duration;

use serde_json::json;

use super::{discover_result, exit, raw, Harness};
use crate::config::RestartPolicy;
use crate::config::{BreakerPolicy, RetryPolicy};
use crate::engine::*;

fn opts(class: Idempotency) -> CallOptions {
    CallOptions { idempotency: Some(class), ..CallOptions::default() }
}

fn no_jitter() -> Config {
    Config {
        retry: RetryPolicy { jitter_percent: 0, ..RetryPolicy::default() },
        ..Config::default()
    }
}

/// Re-opens the transport after a crash, once the engine asks, and answers the probe.
fn restart_process(h: &mut Harness) {
    h.open_next_process();
    let probe = h.sent_one();
    assert_eq!(probe["method"], "server/discover", "a new process is probed again");
    h.reply(&probe, discover_result());
}

/// A listing's later pages are requests of their own: the third page's first failure is its
/// first attempt, retried as a read, not the listing's third (past `max_attempts`).
#[test]
fn a_later_page_lost_in_a_crash_is_retried_as_its_own_first_attempt() {
    let mut h = Harness::ready_with(no_jitter());
    let c = h.engine.list(h.now, Method::ToolsList, &CallOptions::default()).unwrap();
    let p1 = h.sent_one();
    h.reply(&p1, json!({"tools": [{"name": "a"}], "nextCursor": "c1"}));
    let p2 = h.sent_one();
    h.reply(&p2, json!({"tools": [{"name": "b"}], "nextCursor": "c2"}));
    let p3 = h.sent_one();
    assert_eq!(p3["params"]["cursor"], "c2");
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    let events = h.events();
    assert!(events.iter().all(|e| !e.contains(&c.get().to_string())), "{events:?}");
    restart_process(&mut h);
    let mut again = h.take_sent();
    while again.is_empty() && h.engine.poll_timeout().is_some() {
        h.advance_to_next_timeout();
        again = h.take_sent();
    }
    assert_eq!(again.len(), 1, "{:?}", h.events());
    assert_eq!(again[0]["params"]["cursor"], "c2");
    h.reply(&again[0], json!({"tools": [{"name": "c"}]}));
    // (Pages of a 2026-07-28 server without `ttlMs` are stale at once: the joined one too.)
    let done = format!(
        "done {} {{\"tools\":[{{\"name\":\"a\"}},{{\"name\":\"b\"}},{{\"name\":\"c\"}}],\"ttlMs\":0}}",
        c.get()
    );
    assert_eq!(h.events().last(), Some(&done));
}

/// A table full of host calls that wait without a place in the send queue (held for the
/// host's decision here) still has room for the probe of a restarted process: the engine
/// restarts instead of closing for good.
#[test]
fn a_restart_with_the_table_full_of_held_calls_probes_again() {
    let mut h = Harness::ready_with(Config { max_pending: 2, ..no_jitter() });
    let held = CallOptions { hold: true, ..CallOptions::default() };
    for _ in 0..2 {
        h.engine.call_tool(h.now, "t", raw("{}"), &held).unwrap();
    }
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    h.events();
    restart_process(&mut h);
    assert!(matches!(h.engine.state(), ServerState::Ready(..)), "{:?}", h.engine.state());
    assert_eq!(h.engine.pending(), 2, "the held calls wait on");
}

#[test]
fn a_read_in_flight_during_a_crash_is_resent_to_the_new_process_with_a_new_id() {
    let mut h = Harness::ready_with(no_jitter());
    let c = h.engine.call_tool(h.now, "lookup", raw("{}"), &opts(Idempotency::Read)).unwrap();
    let first = h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(7)));
    let events = h.events();
    assert_eq!(events, ["lost process_exit Some(200ms)"], "the call waits for the restart");
    assert!(!h.engine.wants_transport(), "no restart before the backoff ends");
    restart_process(&mut h);
    h.events();
    // The retry's own backoff (100 ms) may still be running; drive time until it is sent.
    let mut resent = h.take_sent();
    while resent.is_empty() {
        h.advance_to_next_timeout();
        resent = h.take_sent();
    }
    assert_eq!(resent[0]["params"]["name"], "lookup");
    assert_ne!(resent[0]["id"], first["id"], "a new wire id: output for the old one is fenced off");
    // A reply from the old process's id is late, never the answer.
    h.reply(&first, json!({"content": []}));
    assert_eq!(h.engine.stats().late_responses, 1);
    h.reply(&resent[0], json!({"content": [{"type": "text", "text": "v"}]}));
    match h.engine.poll_event() {
        Some(Event::CallDone { call, record, .. }) => {
            assert_eq!(call, c);
            assert_eq!(record.attempts, 2);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.engine.restart_count(), 1);
}

#[test]
fn a_write_in_flight_during_a_crash_ends_as_delivery_unknown_and_is_never_resent() {
    let mut h = Harness::ready_modern();
    let c = h.call("write_note", r#"{"note":"x"}"#);
    h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(7)));
    let first = h.engine.poll_event();
    match first {
        Some(Event::CallFailed {
            call,
            error: CallError::Local(LocalError::DeliveryUnknown(cause)),
            record,
        }) => {
            assert_eq!(call, c);
            assert_eq!(cause.name(), "process_exit");
            assert_eq!(record.attempts, 1);
        }
        other => panic!("{other:?}"),
    }
    restart_process(&mut h);
    assert!(h.take_sent().is_empty(), "the write is not sent again");
}

#[test]
fn a_keyed_write_is_retried_and_its_key_rides_in_the_arguments() {
    let mut h = Harness::ready_with(no_jitter());
    let o = CallOptions { idempotency_key: Some("order-17".into()), ..CallOptions::default() };
    let c = h.engine.call_tool(h.now, "charge", raw(r#"{"amount":5}"#), &o).unwrap();
    let first = h.sent_one();
    assert_eq!(first["params"]["arguments"], json!({"idempotency_key": "order-17", "amount": 5}));
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    restart_process(&mut h);
    let mut resent = h.take_sent();
    while resent.is_empty() {
        h.advance_to_next_timeout();
        resent = h.take_sent();
    }
    assert_eq!(resent[0]["params"]["arguments"]["idempotency_key"], "order-17");
    h.reply(&resent[0], json!({"content": []}));
    assert!(h.events().iter().any(|e| e.starts_with(&format!("done {}", c.get()))));
}

#[test]
fn calls_never_written_survive_a_crash_whatever_their_class() {
    let config = Config { max_in_flight: 1, ..Config::default() };
    let mut h = Harness::ready_with(config);
    let a = h.call("slow", "{}");
    let b = h.call("write_note", "{}");
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1, "the second waits behind the in-flight limit");
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    let events = h.events();
    assert!(events[0].starts_with(&format!("failed {} delivery_unknown", a.get())), "{events:?}");
    restart_process(&mut h);
    let resent = h.sent_one();
    assert_eq!(resent["params"]["name"], "write_note", "never delivered, so safe to send");
    h.reply(&resent, json!({"content": []}));
    assert!(h.events().iter().any(|e| e.starts_with(&format!("done {}", b.get()))));
}

#[test]
fn a_crash_loop_degrades_the_server_until_the_host_restarts_it() {
    let restart = RestartPolicy { crash_loop_exits: 3, ..RestartPolicy::default() };
    let mut h = Harness::ready_with(Config { restart, ..Config::default() });
    for i in 0..2 {
        h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
        let lost = h.events();
        let delay = if i == 0 { "200ms" } else { "400ms" };
        assert_eq!(lost, [format!("lost process_exit Some({delay})")], "backoff doubles");
        restart_process(&mut h);
        h.events();
    }
    let c = h.engine.call_tool(h.now, "t", raw("{}"), &opts(Idempotency::Read)).unwrap();
    h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    let events = h.events();
    assert!(events.contains(&format!("failed {} degraded", c.get())), "{events:?}");
    assert!(events.contains(&"lost process_exit None".to_owned()), "{events:?}");
    assert_eq!(
        h.engine.call_tool(h.now, "t", raw("{}"), &CallOptions::default()),
        Err(RequestError::Degraded)
    );
    assert!(!h.engine.wants_transport());
    h.engine.restart();
    assert!(h.engine.wants_transport(), "the host can ask again");
}

#[test]
fn a_degraded_server_tries_one_restart_after_the_cool_down() {
    let restart = RestartPolicy {
        crash_loop_exits: 1,
        degraded_retry_after: Duration::from_secs(60),
        ..RestartPolicy::default()
    };
    let mut h = Harness::ready_with(Config { restart, ..Config::default() });
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    assert!(!h.engine.wants_transport());
    h.advance(Duration::from_secs(59));
    assert!(!h.engine.wants_transport());
    h.advance(Duration::from_secs(1));
    assert!(h.engine.wants_transport());
}

/// A server closed by the host while it waits for a restart (or a degraded one's retry) stays
/// closed: no new process when the timer would have come due, and no deadline left for it.
#[test]
fn a_server_closed_while_its_restart_waits_is_not_started_again() {
    for crash_loop_exits in [5, 1] {
        let restart = RestartPolicy { crash_loop_exits, ..RestartPolicy::default() };
        let mut h = Harness::ready_with(Config { restart, ..Config::default() });
        h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
        h.events();
        assert!(h.engine.poll_timeout().is_some(), "a restart or a retry is scheduled");
        h.engine.close(h.now);
        assert_eq!(h.engine.poll_timeout(), None, "exits {crash_loop_exits}");
        h.advance(Duration::from_secs(120));
        assert!(!h.engine.wants_transport(), "exits {crash_loop_exits}");
    }
}

#[test]
fn http_transient_failures_retry_reads_with_backoff_and_not_writes() {
    let mut h = Harness::ready_http_with(no_jitter());
    let read = h.engine.call_tool(h.now, "lookup", raw("{}"), &opts(Idempotency::Read)).unwrap();
    let write = h.call("write_note", "{}");
    let sent = h.take_sent();
    let lost = || ExchangeFailure::Transport(TransportError::ConnectionLost);
    for s in &sent {
        h.engine.handle_transport(
            h.now,
            TransportEvent::exchange_failed(super::tests::wire(s), lost()),
        );
    }
    assert_eq!(h.events(), [format!("failed {} delivery_unknown", write.get())]);
    assert!(h.take_sent().is_empty(), "the read waits out its backoff");
    assert_eq!(h.engine.poll_timeout(), Some(h.now + Duration::from_millis(100)));
    h.advance_to_next_timeout();
    let second = h.sent_one();
    h.engine.handle_transport(
        h.now,
        TransportEvent::exchange_failed(super::tests::wire(&second), lost()),
    );
    assert_eq!(
        h.engine.poll_timeout(),
        Some(h.now + Duration::from_millis(200)),
        "the backoff doubles"
    );
    h.advance_to_next_timeout();
    let third = h.sent_one();
    h.engine.handle_transport(
        h.now,
        TransportEvent::exchange_failed(super::tests::wire(&third), lost()),
    );
    let events = h.events();
    assert_eq!(events, [format!("failed {} connection_lost", read.get())], "three attempts in all");
    assert_eq!(h.engine.stats().retries, 2);
}

#[test]
fn a_write_whose_connection_never_opened_is_safe_to_retry() {
    let mut h = Harness::ready_http_with(no_jitter());
    let c = h.call("write_note", "{}");
    let first = h.sent_one();
    let refused = ExchangeFailure::Transport(TransportError::ConnectFailed(
        std::io::ErrorKind::ConnectionRefused,
    ));
    h.engine.handle_transport(
        h.now,
        TransportEvent::exchange_failed(super::tests::wire(&first), refused),
    );
    assert!(h.events().is_empty());
    h.advance_to_next_timeout();
    let second = h.sent_one();
    h.reply(&second, json!({"content": []}));
    assert!(h.events()[0].starts_with(&format!("done {}", c.get())));
}

#[test]
fn the_deadline_ends_a_call_during_its_backoff_without_sending() {
    let config = Config {
        retry: RetryPolicy {
            base_delay: Duration::from_millis(300),
            jitter_percent: 0,
            ..RetryPolicy::default()
        },
        ..Config::default()
    };
    let mut h = Harness::ready_http_with(config);
    let o = CallOptions { timeout: Some(Duration::from_millis(500)), ..opts(Idempotency::Read) };
    let c = h.engine.call_tool(h.now, "lookup", raw("{}"), &o).unwrap();
    let first = h.sent_one();
    h.advance(Duration::from_millis(100));
    let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
    h.engine
        .handle_transport(h.now, TransportEvent::exchange_failed(super::tests::wire(&first), lost));
    // 100 ms in, a 300 ms backoff still fits before the 500 ms deadline.
    assert!(h.events().is_empty());
    let second_at = h.engine.poll_timeout().unwrap();
    h.now = second_at;
    h.engine.handle_timeout(h.now);
    let second = h.sent_one();
    let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
    h.engine.handle_transport(
        h.now,
        TransportEvent::exchange_failed(super::tests::wire(&second), lost),
    );
    // 400 ms in, a 600 ms backoff does not fit: the call ends now with the transport error.
    assert_eq!(h.events(), [format!("failed {} connection_lost", c.get())]);
}

#[test]
fn cancelled_and_timed_out_calls_are_never_retried() {
    let mut h = Harness::ready_with(no_jitter());
    let c = h.engine.call_tool(h.now, "lookup", raw("{}"), &opts(Idempotency::Read)).unwrap();
    h.sent_one();
    h.engine.cancel(h.now, c).unwrap();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    restart_process(&mut h);
    assert!(h.take_sent().is_empty());
    assert_eq!(h.engine.stats().retries, 0);
}

#[test]
fn the_breaker_opens_fails_fast_then_half_opens_and_closes() {
    let breaker = BreakerPolicy { failure_threshold: 2, cool_down: Duration::from_secs(5) };
    let retry = RetryPolicy { max_attempts: 1, ..RetryPolicy::default() };
    let mut h = Harness::ready_http_with(Config { breaker, retry, ..Config::default() });
    let lost = || ExchangeFailure::Transport(TransportError::ConnectionLost);
    for _ in 0..2 {
        h.engine.call_tool(h.now, "lookup", raw("{}"), &opts(Idempotency::Read)).unwrap();
        let s = h.sent_one();
        h.engine.handle_transport(
            h.now,
            TransportEvent::exchange_failed(super::tests::wire(&s), lost()),
        );
    }
    let events = h.events();
    assert_eq!(events.last().unwrap(), "breaker Read Open", "{events:?}");
    let o = opts(Idempotency::Read);
    assert_eq!(h.engine.call_tool(h.now, "lookup", raw("{}"), &o), Err(RequestError::BreakerOpen));
    assert!(
        h.engine.call_tool(h.now, "write", raw("{}"), &CallOptions::default()).is_ok(),
        "writes have their own"
    );
    h.take_sent();
    h.events();
    h.now += Duration::from_secs(5);
    let probe_call = h.engine.call_tool(h.now, "lookup", raw("{}"), &o).unwrap();
    assert_eq!(h.events(), ["breaker Read HalfOpen"]);
    assert_eq!(
        h.engine.call_tool(h.now, "lookup", raw("{}"), &o),
        Err(RequestError::BreakerOpen),
        "one probe at a time"
    );
    let s = h.sent_one();
    h.reply(&s, json!({"content": []}));
    let events = h.events();
    assert_eq!(events[0], format!("done {} {{\"content\":[]}}", probe_call.get()));
    assert_eq!(events[1], "breaker Read Closed");
    assert!(h.engine.call_tool(h.now, "lookup", raw("{}"), &o).is_ok());
}

/// While a breaker is half-open only its probe's end counts: a call written before the breaker
/// opened that gets an error reply, fails or succeeds meanwhile changes nothing. (Its error
/// reply, like a cancel, freed the probe's place with the probe still out, so a second probe
/// went; its failure reopened the breaker under the probe, whose success was then lost.)
#[test]
fn only_the_probe_judges_a_half_open_breaker() {
    let breaker = BreakerPolicy { failure_threshold: 2, cool_down: Duration::from_secs(5) };
    let retry = RetryPolicy { max_attempts: 1, ..RetryPolicy::default() };
    let mut h = Harness::ready_http_with(Config { breaker, retry, ..Config::default() });
    let lost = || ExchangeFailure::Transport(TransportError::ConnectionLost);
    let o = opts(Idempotency::Read);
    let old = |h: &mut Harness| {
        let c = h.engine.call_tool(h.now, "slow", raw("{}"), &o).unwrap();
        (c, h.sent_one())
    };
    let (refused_by_server, refused_sent) = old(&mut h);
    let (failing, failing_sent) = old(&mut h);
    let (answered, answered_sent) = old(&mut h);
    for _ in 0..2 {
        h.engine.call_tool(h.now, "lookup", raw("{}"), &o).unwrap();
        let s = h.sent_one();
        let failed = TransportEvent::exchange_failed(super::tests::wire(&s), lost());
        h.engine.handle_transport(h.now, failed);
    }
    assert_eq!(h.events().last().unwrap(), "breaker Read Open");
    h.now += Duration::from_secs(5);
    h.engine.call_tool(h.now, "lookup", raw("{}"), &o).unwrap();
    assert_eq!(h.events(), ["breaker Read HalfOpen"]);
    let probe = h.sent_one();
    h.reply_error(&refused_sent, -32603, None);
    let refused = h.engine.call_tool(h.now, "lookup", raw("{}"), &o);
    assert_eq!(refused, Err(RequestError::BreakerOpen), "the probe is still out");
    let failed = TransportEvent::exchange_failed(super::tests::wire(&failing_sent), lost());
    h.engine.handle_transport(h.now, failed);
    h.reply(&answered_sent, json!({"content": []}));
    let events = h.events();
    assert!(events.iter().all(|e| !e.starts_with("breaker")), "{events:?}");
    for call in [refused_by_server, failing] {
        assert!(events.iter().any(|e| e.starts_with(&format!("failed {}", call.get()))));
    }
    assert!(events.iter().any(|e| e.starts_with(&format!("done {}", answered.get()))));
    h.reply(&probe, json!({"content": []}));
    assert_eq!(h.events().last().unwrap(), "breaker Read Closed", "the probe's verdict");
}

/// A `subscriptions/listen` stream that breaks is no write whose delivery is unknown, and its
/// end says nothing of the server's health: it ends as the transport error it is, no breaker
/// counts it, and none is asked for it (a re-listen never holds a half-open breaker's probe).
#[test]
fn a_broken_listen_stream_is_no_write_and_leaves_the_breakers_alone() {
    let breaker = BreakerPolicy { failure_threshold: 2, cool_down: Duration::from_secs(5) };
    let mut h = Harness::ready_http_with(Config { breaker, ..Config::default() });
    let filter =
        crate::proto::mcp::SubscriptionFilter { tools_list_changed: true, ..Default::default() };
    let lost = || ExchangeFailure::Transport(TransportError::ConnectionLost);
    for _ in 0..3 {
        let sub = h.engine.listen(h.now, &filter, &CallOptions::default()).unwrap();
        let s = h.sent_one();
        h.engine.handle_transport(
            h.now,
            TransportEvent::exchange_failed(super::tests::wire(&s), lost()),
        );
        assert_eq!(h.events(), [format!("failed {} connection_lost", sub.get())]);
    }
    assert_eq!(h.engine.breaker_state(0, OperationClass::Write), BreakerState::Closed);
    // With the write breaker open, a listen still opens.
    for _ in 0..2 {
        h.engine.call_tool(h.now, "write", raw("{}"), &CallOptions::default()).unwrap();
        let s = h.sent_one();
        h.engine.handle_transport(
            h.now,
            TransportEvent::exchange_failed(super::tests::wire(&s), lost()),
        );
    }
    assert_eq!(h.engine.breaker_state(0, OperationClass::Write), BreakerState::Open);
    h.engine.listen(h.now, &filter, &CallOptions::default()).expect("a listen is not refused");
}

/// Calls that end while they wait in the send queue (past their deadline, cancelled) leave
/// it, even while a call ahead of them waits for the in-flight limit: the queue never holds
/// more than the calls that still wait.
#[test]
fn calls_that_end_queued_leave_the_send_queue() {
    let config = Config { max_in_flight: 1, ..Config::default() };
    let mut h = Harness::ready_with(config);
    h.engine.call_tool(h.now, "slow", raw("{}"), &CallOptions::default()).unwrap();
    let slow = h.sent_one();
    h.engine.call_tool(h.now, "next", raw("{}"), &CallOptions::default()).unwrap();
    let short = CallOptions { timeout: Some(Duration::from_millis(1)), ..CallOptions::default() };
    for i in 0..1000 {
        let call = h.engine.call_tool(h.now, "brief", raw("{}"), &short).unwrap();
        if i % 2 == 0 {
            h.engine.cancel(h.now, call).unwrap();
        } else {
            h.advance(Duration::from_millis(1));
        }
        h.events();
        assert!(h.engine.send_queue.len() <= 2, "{} entries after {i}", h.engine.send_queue.len());
    }
    assert!(h.take_sent().is_empty(), "the queued calls wait for the slow one");
    h.reply(&slow, json!({"content": []}));
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["params"]["name"], "next");
}

/// A half-open breaker's probe that ends before it is written (cancelled, or past its
/// deadline in the queue) gives back the probe's place, so the next call can probe: it must
/// not leave the breaker refusing every call for good.
#[test]
fn a_probe_that_ends_unsent_lets_the_next_call_probe() {
    let breaker = BreakerPolicy { failure_threshold: 1, cool_down: Duration::from_secs(5) };
    let retry = RetryPolicy { max_attempts: 1, ..RetryPolicy::default() };
    let config = Config { breaker, retry, max_in_flight: 1, ..Config::default() };
    let mut h = Harness::ready_http_with(config);
    let o = opts(Idempotency::Read);
    let lost = || ExchangeFailure::Transport(TransportError::ConnectionLost);
    h.engine.call_tool(h.now, "lookup", raw("{}"), &o).unwrap();
    let s = h.sent_one();
    h.engine
        .handle_transport(h.now, TransportEvent::exchange_failed(super::tests::wire(&s), lost()));
    assert_eq!(h.events().last().unwrap(), "breaker Read Open");
    // A write fills the one in-flight place, so a read probe waits in the queue unsent.
    h.engine.call_tool(h.now, "write", raw("{}"), &CallOptions::default()).unwrap();
    let write = h.sent_one();
    h.now += Duration::from_secs(5);
    let probe = h.engine.call_tool(h.now, "lookup", raw("{}"), &o).unwrap();
    h.engine.cancel(h.now, probe).unwrap();
    let short = CallOptions { timeout: Some(Duration::from_secs(1)), ..o.clone() };
    h.engine.call_tool(h.now, "lookup", raw("{}"), &short).expect("the cancelled probe's place");
    h.now += Duration::from_secs(2);
    h.engine.handle_timeout(h.now);
    h.events();
    // The second probe ran out of time in the queue: a third may go.
    let third = h.engine.call_tool(h.now, "lookup", raw("{}"), &o).expect("a probe again");
    h.reply(&write, json!({"content": []}));
    let s = h.sent_one();
    h.reply(&s, json!({"content": []}));
    let events = h.events();
    assert!(events.contains(&format!("done {} {{\"content\":[]}}", third.get())), "{events:?}");
    assert_eq!(events.last().unwrap(), "breaker Read Closed");
}

/// A failed attempt is told to its breaker once: a call in its backoff that ends before its
/// retry (its deadline falls before the restart) is not counted a second time, nor counted as
/// a retry that was never sent. (Twice, two failures opened a breaker of threshold two.)
#[test]
fn a_call_ending_in_its_backoff_is_counted_once_by_its_breaker_and_not_as_a_retry() {
    let breaker = BreakerPolicy { failure_threshold: 2, cool_down: Duration::from_secs(5) };
    let mut h = Harness::ready_with(Config { breaker, ..no_jitter() });
    let o = CallOptions { timeout: Some(Duration::from_millis(150)), ..opts(Idempotency::Read) };
    let c = h.engine.call_tool(h.now, "lookup", raw("{}"), &o).unwrap();
    h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    let events = h.events();
    assert!(events.iter().any(|e| e.starts_with(&format!("failed {}", c.get()))), "{events:?}");
    assert!(events.iter().all(|e| !e.starts_with("breaker")), "{events:?}");
    assert_eq!(h.engine.stats().retries, 0);
    assert_eq!(h.engine.breaker_state(0, OperationClass::Read), BreakerState::Closed);
}

/// The same once its backoff is over and its retry waits unsent (here for the process that
/// restarts): its end is no second failure either.
#[test]
fn a_retry_that_ends_unsent_after_its_backoff_is_not_counted_again() {
    let breaker = BreakerPolicy { failure_threshold: 2, cool_down: Duration::from_secs(5) };
    let mut h = Harness::ready_with(Config { breaker, ..no_jitter() });
    let o = CallOptions { timeout: Some(Duration::from_millis(500)), ..opts(Idempotency::Read) };
    let c = h.engine.call_tool(h.now, "lookup", raw("{}"), &o).unwrap();
    h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    let mut events = h.events();
    while h.engine.is_pending(c) {
        h.advance_to_next_timeout();
        events.extend(h.events());
    }
    assert!(h.take_sent().is_empty(), "no process to send it to");
    assert!(events.iter().any(|e| e.starts_with(&format!("failed {}", c.get()))), "{events:?}");
    assert!(events.iter().all(|e| !e.starts_with("breaker")), "{events:?}");
    assert_eq!(h.engine.breaker_state(0, OperationClass::Read), BreakerState::Closed);
}

/// A probe whose attempt fails and backs off has given its verdict (the breaker reopened): when
/// the host then cancels it, the place of the probe admitted after the cool-down is not freed,
/// so no second probe goes beside it.
#[test]
fn a_probe_cancelled_in_its_backoff_frees_no_later_probes_place() {
    let breaker = BreakerPolicy { failure_threshold: 1, cool_down: Duration::from_millis(50) };
    let retry = RetryPolicy {
        base_delay: Duration::from_secs(1),
        jitter_percent: 0,
        ..RetryPolicy::default()
    };
    let mut h = Harness::ready_http_with(Config { breaker, retry, ..Config::default() });
    let o = opts(Idempotency::Read);
    let lost = || ExchangeFailure::Transport(TransportError::ConnectionLost);
    let fail = |h: &mut Harness, s: &serde_json::Value| {
        let failed = TransportEvent::exchange_failed(super::tests::wire(s), lost());
        h.engine.handle_transport(h.now, failed);
    };
    h.engine.call_tool(h.now, "lookup", raw("{}"), &o).unwrap();
    let s = h.sent_one();
    fail(&mut h, &s);
    assert_eq!(h.events().last().unwrap(), "breaker Read Open");
    h.now += Duration::from_millis(50);
    let first_probe = h.engine.call_tool(h.now, "lookup", raw("{}"), &o).unwrap();
    let s = h.sent_one();
    fail(&mut h, &s);
    assert_eq!(h.events().last().unwrap(), "breaker Read Open", "the probe's failure");
    h.now += Duration::from_millis(50);
    h.engine.call_tool(h.now, "lookup", raw("{}"), &o).expect("the next probe");
    h.sent_one();
    h.engine.cancel(h.now, first_probe).unwrap();
    assert_eq!(
        h.engine.call_tool(h.now, "lookup", raw("{}"), &o),
        Err(RequestError::BreakerOpen),
        "one probe at a time"
    );
}

/// The engine's own tool-list refresh (after a header mismatch) goes through the Read
/// breaker as any read, so it can be the half-open breaker's probe: its end must be recorded
/// there, or the breaker stays half-open with its probe out and refuses every read for good.
#[test]
fn a_tool_list_refresh_that_probes_a_half_open_breaker_closes_it() {
    let breaker = BreakerPolicy { failure_threshold: 1, cool_down: Duration::from_secs(5) };
    let retry = RetryPolicy { max_attempts: 1, ..RetryPolicy::default() };
    let mut h = Harness::ready_http_with(Config { breaker, retry, ..Config::default() });
    let lost = || ExchangeFailure::Transport(TransportError::ConnectionLost);
    h.engine.call_tool(h.now, "lookup", raw("{}"), &opts(Idempotency::Read)).unwrap();
    let s = h.sent_one();
    h.engine
        .handle_transport(h.now, TransportEvent::exchange_failed(super::tests::wire(&s), lost()));
    assert_eq!(h.events().last().unwrap(), "breaker Read Open");
    h.now += Duration::from_secs(5);
    // A write refused for its headers: the refresh is the first read after the cool-down.
    let write = h.call("t", "{}");
    let first = h.sent_one();
    h.reply_error(&first, -32020, None);
    let list = h.sent_one();
    assert_eq!(list["method"], "tools/list");
    h.reply(&list, json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}));
    assert_eq!(h.events(), ["breaker Read HalfOpen", "breaker Read Closed"]);
    let again = h.sent_one();
    h.reply(&again, json!({"content": []}));
    assert_eq!(h.events(), [format!("done {} {{\"content\":[]}}", write.get())]);
    assert_eq!(h.engine.breaker_state(0, OperationClass::Read), BreakerState::Closed);
    h.engine
        .call_tool(h.now, "lookup", raw("{}"), &opts(Idempotency::Read))
        .expect("reads go again");
}

/// A subscription that ends gracefully after an hour says nothing of how long a call takes:
/// with it in the moving average, no retry would fit any call's deadline for the next dozens
/// of calls.
#[test]
fn a_long_subscription_leaves_the_retries_of_later_calls_alone() {
    let mut h = Harness::ready_http_with(no_jitter());
    let filter = SubscriptionFilter { tools_list_changed: true, ..SubscriptionFilter::default() };
    h.engine.listen(h.now, &filter, &CallOptions::default()).unwrap();
    let listen = h.sent_one();
    h.advance(Duration::from_secs(3600));
    let meta = json!({"io.modelcontextprotocol/subscriptionId": listen["id"]});
    h.reply(&listen, json!({"resultType": "complete", "_meta": meta}));
    h.events();
    h.engine.call_tool(h.now, "lookup", raw("{}"), &opts(Idempotency::Read)).unwrap();
    let s = h.sent_one();
    let unavailable = ExchangeFailure::Transport(TransportError::HttpStatus(503));
    let failed = TransportEvent::exchange_failed(super::tests::wire(&s), unavailable);
    h.engine.handle_transport(h.now, failed);
    let mut resent = h.take_sent();
    while resent.is_empty() && h.engine.poll_timeout().is_some() {
        h.advance_to_next_timeout();
        resent = h.take_sent();
    }
    assert_eq!(resent.len(), 1, "the read is retried: {:?}", h.events());
    assert_eq!(h.engine.stats().retries, 1);
}

#[test]
fn is_error_protocol_errors_and_cancels_leave_the_breaker_alone() {
    let breaker = BreakerPolicy { failure_threshold: 1, cool_down: Duration::from_secs(5) };
    let mut h = Harness::ready_with(Config { breaker, ..Config::default() });
    let o = opts(Idempotency::Read);
    h.engine.call_tool(h.now, "a", raw("{}"), &o).unwrap();
    let s = h.sent_one();
    h.reply(&s, json!({"isError": true, "content": []}));
    h.engine.call_tool(h.now, "b", raw("{}"), &o).unwrap();
    let s = h.sent_one();
    h.reply_error(&s, -32602, None);
    let c = h.engine.call_tool(h.now, "c", raw("{}"), &o).unwrap();
    h.sent_one();
    h.engine.cancel(h.now, c).unwrap();
    assert!(h.events().iter().all(|e| !e.starts_with("breaker")));
    assert_eq!(h.engine.breaker_state(0, OperationClass::Read), BreakerState::Closed);
}

/// `usize::MAX` for the in-flight limit or the queue (a configuration's "no limit") is no
/// limit: their sum overflowed (a panic in a debug build; in a release build the wrapped room
/// refused the 128th call, or every call).
#[test]
fn limits_of_usize_max_are_no_limits() {
    let config = Config { max_in_flight: usize::MAX, max_queued: 128, ..Config::default() };
    let mut h = Harness::ready_with(config);
    for i in 0..200 {
        h.call(&format!("t{i}"), "{}");
    }
    assert_eq!(h.take_sent().len(), 200);
    let config = Config { max_in_flight: 1, max_queued: usize::MAX, ..Config::default() };
    let mut h = Harness::ready_with(config);
    h.call("a", "{}");
    h.call("b", "{}");
    assert_eq!(h.take_sent().len(), 1, "one in flight, one queued");
    // The server request table is made whole with the engine: "no limit" there is refused.
    let config = Config { max_server_requests: usize::MAX, ..Config::default() };
    let e = Engine::new(config, std::time::Instant::now()).err().map(|e| e.field);
    assert_eq!(e, Some("max_server_requests"));
}

/// A call queued behind the in-flight limit whose deadline passes before its place frees (the
/// reply that frees it read in the same round, before the tick) is never written: its timer
/// ends it. It went out after its deadline, and the tick then cancelled it.
#[test]
fn a_queued_call_past_its_deadline_is_never_written() {
    let mut h = Harness::ready_with(Config { max_in_flight: 1, ..Config::default() });
    let first = h.call("first", "{}");
    let sent = h.sent_one();
    let short = CallOptions { timeout: Some(Duration::from_secs(1)), ..CallOptions::default() };
    let late = h.engine.call_tool(h.now, "late", raw("{}"), &short).unwrap();
    assert!(h.take_sent().is_empty(), "it waits for the in-flight limit");
    h.now += Duration::from_secs(2);
    h.reply(&sent, json!({"content": []}));
    assert!(h.take_sent().is_empty(), "written past its deadline");
    h.engine.handle_timeout(h.now);
    let events = h.events();
    assert!(events.iter().any(|e| e.starts_with(&format!("done {}", first.get()))), "{events:?}");
    let ended = format!("failed {} deadline_exceeded", late.get());
    assert!(events.contains(&ended), "{events:?}");
    assert!(h.take_sent().is_empty(), "nothing to cancel: it never went");
}

#[test]
fn the_in_flight_limit_queues_in_order_records_the_wait_and_overflows_as_overloaded() {
    let config = Config { max_in_flight: 2, max_queued: 2, ..Config::default() };
    let mut h = Harness::ready_with(config);
    let calls: Vec<CallId> = (0..4).map(|i| h.call(&format!("t{i}"), "{}")).collect();
    assert_eq!(
        h.engine.call_tool(h.now, "t4", raw("{}"), &CallOptions::default()),
        Err(RequestError::Overloaded)
    );
    let sent = h.take_sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(h.engine.load(), (2, 2));
    h.advance(Duration::from_millis(40));
    h.reply(&sent[0], json!({}));
    let next = h.sent_one();
    assert_eq!(next["params"]["name"], "t2", "first in, first out");
    h.reply(&sent[1], json!({}));
    h.reply(&next, json!({}));
    let last = h.sent_one();
    h.reply(&last, json!({}));
    let mut waits = Vec::new();
    while let Some(e) = h.engine.poll_event() {
        if let Event::CallDone { call, record, .. } = e {
            waits.push((call, record.queue_wait));
        }
    }
    assert_eq!(waits.len(), 4);
    assert_eq!(waits.iter().find(|(c, _)| *c == calls[0]).unwrap().1, Duration::ZERO);
    assert_eq!(waits.iter().find(|(c, _)| *c == calls[2]).unwrap().1, Duration::from_millis(40));
}

#[test]
fn tool_annotations_from_the_listing_set_the_class() {
    let mut h = Harness::ready_with(no_jitter());
    h.engine.list(h.now, Method::ToolsList, &CallOptions::default()).unwrap();
    let list = h.sent_one();
    h.reply(&list, json!({"tools": [
        {"name": "echo", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}},
        {"name": "put", "inputSchema": {"type": "object"}, "annotations": {"idempotentHint": true}},
        {"name": "write_note", "inputSchema": {"type": "object"}}
    ]}));
    h.events();
    for (tool, retried) in [("echo", true), ("put", true), ("write_note", false)] {
        h.call(tool, "{}");
        h.sent_one();
        h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
        let events = h.events();
        assert_eq!(
            events.iter().any(|e| e.contains("delivery_unknown")),
            !retried,
            "{tool}: {events:?}"
        );
        restart_process(&mut h);
        h.events();
        let mut resent = h.take_sent();
        while retried && resent.is_empty() {
            h.advance_to_next_timeout();
            resent = h.take_sent();
        }
        if retried {
            h.reply(&resent[0], json!({}));
            h.events();
        }
        h.advance(Duration::from_secs(120));
    }
}

#[test]
fn a_header_mismatch_refreshes_the_tool_list_and_resends_once_with_the_headers() {
    let mut h = Harness::ready_http();
    let c = h.call("get_weather", r#"{"city":"Oslo","region":"eu-north"}"#);
    let first = h.sent_one();
    let route =
        |h: &Harness, frame: &serde_json::Value| h.routes[&super::tests::wire(frame).get()].clone();
    assert!(route(&h, &first).params.is_empty(), "no listing yet");
    h.reply_error(&first, -32020, None);
    let list = h.sent_one();
    assert_eq!(list["method"], "tools/list", "the engine re-fetches the tools");
    assert!(h.events().is_empty(), "the call waits; the internal listing is no host event");
    h.reply(
        &list,
        json!({"tools": [{"name": "get_weather", "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}}}}]}),
    );
    assert!(h.events().is_empty());
    let again = h.sent_one();
    assert_eq!(again["params"]["name"], "get_weather");
    assert_ne!(again["id"], first["id"]);
    assert_eq!(route(&h, &again).params, [("Mcp-Param-Region".to_owned(), b"eu-north".to_vec())]);
    // A second mismatch is the server's final word: no loop.
    h.reply_error(&again, -32020, None);
    assert!(h.take_sent().is_empty());
    assert_eq!(h.events(), [format!("failed {} header_mismatch", c.get())]);
}

/// The refresh a header mismatch makes is the engine's own, and the parked calls wait for it:
/// it does not wait behind the in-flight limit they hold (nor behind the calls queued there),
/// which left them all to their deadline with the listing unsent.
#[test]
fn the_tool_list_refresh_passes_the_in_flight_limit_its_parked_calls_hold() {
    let mut h = Harness::ready_http_with(Config { max_in_flight: 1, ..Config::default() });
    let c = h.call("t", "{}");
    let first = h.sent_one();
    let queued = h.call("t", "{}");
    assert!(h.take_sent().is_empty(), "the second call waits for the limit");
    h.reply_error(&first, -32020, None);
    let list = h.sent_one();
    assert_eq!(list["method"], "tools/list", "the refresh goes at once");
    h.reply(&list, json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}));
    let again = h.sent_one();
    assert_eq!(again["params"]["name"], "t");
    h.reply(&again, json!({"content": []}));
    let next = h.sent_one();
    h.reply(&next, json!({"content": []}));
    let done = |c: CallId| format!("done {} {{\"content\":[]}}", c.get());
    assert_eq!(h.events(), [done(c), done(queued)]);
}

#[test]
fn a_failed_refresh_ends_the_waiting_calls_with_the_mismatch() {
    let mut h = Harness::ready_http();
    let c = h.call("t", "{}");
    let first = h.sent_one();
    h.reply_error(&first, -32020, None);
    let list = h.sent_one();
    h.reply_error(&list, -32603, None);
    assert_eq!(h.events(), [format!("failed {} header_mismatch", c.get())]);
    assert_eq!(h.engine.pending(), 0);
}

/// A call parked for the tool-list refresh ends, when the server is closed, with the close:
/// the refresh took a lower slot than the call (slots are reused newest first), its end came
/// first and ended the parked call with the refresh's failure, a header mismatch.
#[test]
fn a_parked_call_ends_with_the_close_not_with_its_refresh() {
    let mut h = Harness::ready_http();
    let c0 = h.call("t", "{}");
    let c1 = h.call("t", "{}");
    let sent = h.take_sent();
    h.reply(&sent[0], json!({"content": []}));
    assert_eq!(h.events(), [format!("done {} {{\"content\":[]}}", c0.get())]);
    h.reply_error(&sent[1], -32020, None);
    assert_eq!(h.sent_one()["method"], "tools/list", "the refresh, in the freed slot");
    h.engine.close(h.now);
    assert_eq!(h.events(), [format!("failed {} closed", c1.get()), "closed closed".into()]);
}

#[test]
fn over_stdio_a_header_mismatch_is_just_an_error() {
    let mut h = Harness::ready_modern();
    let c = h.call("t", "{}");
    let first = h.sent_one();
    h.reply_error(&first, -32020, None);
    assert!(h.take_sent().is_empty());
    assert_eq!(h.events(), [format!("failed {} header_mismatch", c.get())]);
}

/// A process exit with a code and some stderr, as the stdio driver reports it.
fn exit_with(code: i32, stderr: &str) -> TransportError {
    TransportError::ProcessExit(crate::error::ProcessExit {
        code: Some(code),
        signal: None,
        stderr_tail: stderr.into(),
    })
}

/// The issue 8 defect at the engine level, with the default `Config`: a server that exits with
/// status 3 at every start. Every wake-up the engine asks for is a due restart (no spin), the
/// gaps double, the crash-loop bound degrades the server, and a call with a 3 s deadline ends
/// as soon as no restart can come in time, with the exit status and stderr of the last exit.
#[test]
fn a_server_exiting_at_every_start_backs_off_then_degrades_under_the_default_config() {
    let mut h = Harness::new(Config::default());
    let start = h.now;
    let call = h
        .engine
        .call_tool(h.now, "echo", raw("{}"), &CallOptions::timeout(Duration::from_secs(3)))
        .unwrap();
    let mut spawns = 0;
    let mut gaps = Vec::new();
    let mut wakeups = 0;
    let mut failed_at = None;
    let mut last_spawn = h.now;
    while !h.engine.is_degraded() {
        assert!(spawns < 10, "never degraded");
        // The driver starts a process whenever the engine asks, and it dies at once.
        assert!(h.engine.wants_transport());
        gaps.push(h.now - last_spawn);
        last_spawn = h.now;
        spawns += 1;
        h.engine.handle_transport(h.now, TransportEvent::opened());
        h.take_sent();
        h.engine.handle_transport(h.now, TransportEvent::closed(exit_with(3, "boom\n")));
        for e in h.events() {
            if e.starts_with(&format!("failed {}", call.get())) {
                failed_at = Some((h.now - start, e));
            }
        }
        // Sleep until the engine's next deadline; it must be a real wait, and the restart.
        while !h.engine.wants_transport() && !h.engine.is_degraded() {
            let at = h.engine.poll_timeout().expect("a restart is scheduled");
            assert!(at > h.now, "a zero wait would be a busy loop");
            h.now = at;
            h.engine.handle_timeout(h.now);
            wakeups += 1;
        }
    }
    let ms = |d: Duration| d.as_millis();
    let gaps: Vec<u128> = gaps.into_iter().map(ms).collect();
    // The first exit is during the era probe: taken as the legacy verdict, respawned at once
    // for `initialize` (not a crash). Then 200 ms doubling, and the fifth crash degrades.
    assert_eq!(gaps, [0, 0, 200, 400, 800, 1600]);
    assert_eq!(wakeups, 4, "one wake-up per restart, none in between");
    let (when, error) = failed_at.expect("the call ended");
    assert_eq!(error, format!("failed {} process_exit", call.get()));
    assert_eq!(ms(when), 1400, "the fourth exit's restart (at 3 s) comes too late for it");
    // Degraded: the next wake-up is the cool-down, and no process is asked for until then.
    assert!(!h.engine.wants_transport());
    assert_eq!(h.engine.poll_timeout(), Some(h.now + Duration::from_secs(60)));
    match h.engine.last_transport_error() {
        Some(TransportError::ProcessExit(x)) => {
            assert_eq!((x.code, &*x.stderr_tail), (Some(3), "boom\n"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_call_failed_for_a_late_restart_carries_the_exit_status_and_stderr() {
    let mut h = Harness::ready_with(Config { max_in_flight: 1, ..Config::default() });
    let long = h.engine.call_tool(h.now, "t", raw("{}"), &opts(Idempotency::Read)).unwrap();
    let short =
        CallOptions { timeout: Some(Duration::from_millis(150)), ..opts(Idempotency::Read) };
    let c = h.engine.call_tool(h.now, "t", raw("{}"), &short).unwrap();
    assert_eq!(h.take_sent().len(), 1, "the second waits behind the in-flight limit");
    // The restart comes in 200 ms, past the waiting call's deadline: it ends now, with the
    // exit, rather than with a bare deadline_exceeded at 150 ms. The sent read is retried.
    h.engine.handle_transport(h.now, TransportEvent::closed(exit_with(3, "boom\n")));
    let mut failed = Vec::new();
    while let Some(e) = h.engine.poll_event() {
        if let Event::CallFailed { call, error, .. } = e {
            failed.push((call, error));
        }
    }
    assert_eq!(failed.len(), 1, "{failed:?}");
    let (call, error) = failed.remove(0);
    assert_eq!(call, c);
    match error {
        CallError::Transport(TransportError::ProcessExit(x)) => {
            assert_eq!((x.code, &*x.stderr_tail), (Some(3), "boom\n"));
        }
        other => panic!("{other:?}"),
    }
    assert!(h.engine.requests.slot_of(long).is_some(), "the retried read waits for the restart");
}

/// The HTTP equivalent: a server that closes every connection. The era probe is retried with
/// backoff; a call whose deadline falls before the next probe ends with the transport error.
#[test]
fn calls_waiting_on_a_failing_http_probe_end_with_the_transport_error_within_their_deadline() {
    let mut h = Harness::new(Config::default());
    let start = h.now;
    h.engine.handle_transport(h.now, TransportEvent::opened_as(TransportKind::Http));
    let c = h
        .engine
        .call_tool(h.now, "echo", raw("{}"), &CallOptions::timeout(Duration::from_secs(3)))
        .unwrap();
    let lost = || ExchangeFailure::Transport(TransportError::ConnectionLost);
    let mut ended = None;
    for _ in 0..6 {
        let sent = h.take_sent();
        let Some(probe) = sent.first() else { break };
        assert_eq!(probe["method"], "server/discover");
        h.engine.handle_transport(
            h.now,
            TransportEvent::exchange_failed(super::tests::wire(probe), lost()),
        );
        for e in h.events() {
            if e.starts_with(&format!("failed {}", c.get())) {
                ended.get_or_insert((h.now - start, e));
            }
        }
        match h.engine.poll_timeout() {
            Some(at) => {
                assert!(at > h.now, "a zero wait would be a busy loop");
                h.now = at;
                h.engine.handle_timeout(h.now);
            }
            None => break,
        }
    }
    let (when, e) = ended.expect("the call ended");
    assert_eq!(e, format!("failed {} connection_lost", c.get()));
    // Probes at 0, 250, 750 and 1750 ms; the next would be at 3750 ms, past the deadline.
    assert_eq!(when, Duration::from_millis(1750));
}

#[test]
fn a_deadline_is_due_from_its_instant_on_and_not_a_nanosecond_before() {
    let mut h = Harness::ready_modern();
    assert!(!h.engine.is_due(h.now), "nothing pending, nothing due");
    let opts = CallOptions { timeout: Some(Duration::from_millis(500)), ..CallOptions::default() };
    h.engine.call_tool(h.now, "slow", raw("{}"), &opts).unwrap();
    h.flush();
    let deadline = h.engine.poll_timeout().expect("the call's deadline");
    assert_eq!(deadline, h.now + Duration::from_millis(500));
    assert!(!h.engine.is_due(deadline - Duration::from_nanos(1)));
    assert!(h.engine.is_due(deadline));
    assert!(h.engine.is_due(deadline + Duration::from_secs(3600)));
}

/// A restarted process of a server that answered the probe is probed as one known to be
/// modern: it exits during the probe, or answers it late, and that is a crash (paced by the
/// restart policy) or a slow start (probed again), not the legacy server that exits on a
/// first message other than `initialize`. The engine forgot, sent the next process
/// `initialize` at once, and a modern-only server's refusal closed it for good.
#[test]
fn a_restarted_modern_server_is_probed_as_modern() {
    let lost = |h: &mut Harness| {
        h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    };
    let mut h = Harness::ready_modern();
    lost(&mut h);
    h.open_next_process();
    assert_eq!(h.sent_one()["method"], "server/discover");
    h.events();
    // It exits during the probe: a crash, paced by the restart policy.
    lost(&mut h);
    assert!(!h.engine.wants_transport(), "not respawned at once for initialize");
    assert!(h.events().iter().any(|e| e.starts_with("lost process_exit")), "a crash");
    restart_process(&mut h);
    assert_eq!(h.events(), ["ready modern 2026-07-28"]);
    // Slower than the probe timeout: probed again, never `initialize`.
    lost(&mut h);
    h.open_next_process();
    assert_eq!(h.sent_one()["method"], "server/discover");
    let mut methods = Vec::new();
    for _ in 0..3 {
        h.advance_to_next_timeout();
        methods.extend(h.take_sent().into_iter().map(|f| f["method"].to_string()));
    }
    assert!(
        !methods.is_empty() && methods.iter().all(|m| m == "\"server/discover\""),
        "{methods:?}"
    );
}

/// A restarted process of a modern server that answers the probe like a legacy server (the
/// program was swapped for another build) is believed: it gets `initialize`, not a close for
/// want of a common version, as a first start would.
#[test]
fn a_restarted_modern_server_that_answers_as_legacy_is_believed() {
    let mut h = Harness::ready_modern();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    h.open_next_process();
    let probe = h.sent_one();
    h.reply_error(&probe, -32601, None);
    assert_eq!(h.sent_one()["method"], "initialize");
    assert_ne!(h.engine.state(), ServerState::Closed);
}

/// `Ready` is a state event, dropped past the queue's bound as the others are: a server that
/// crashes now and then (never a crash loop) is ready again after each restart, and a host
/// that does not drain kept every one, past `max_queued_events`.
#[test]
fn ready_events_keep_to_the_queue_bound() {
    let config = Config { max_queued_events: 8, ..Config::default() };
    let mut h = Harness::ready_with(config);
    for _ in 0..40 {
        h.advance(Duration::from_secs(30));
        h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
        restart_process(&mut h);
    }
    assert!(h.engine.queued_events() <= 8, "{}", h.engine.queued_events());
}

/// A bare 4xx (a request too large, a media type refused) is the server's answer to the
/// request, as a JSON-RPC error is, and leaves the breaker alone: five 413s for oversized
/// arguments opened the write breaker, and every other write failed fast for the
/// cool-down. A 429 or a 5xx still counts.
#[test]
fn a_bare_4xx_is_an_answer_not_a_sign_of_ill_health() {
    let breaker = BreakerPolicy { failure_threshold: 2, cool_down: Duration::from_secs(5) };
    let failing = |status: u16| {
        let mut h = Harness::ready_http_with(Config { breaker, ..Config::default() });
        for _ in 0..2 {
            h.engine.call_tool(h.now, "upload", raw("{}"), &CallOptions::default()).unwrap();
            let s = h.sent_one();
            let failure = ExchangeFailure::Transport(TransportError::HttpStatus(status));
            let event = TransportEvent::exchange_failed(super::tests::wire(&s), failure);
            h.engine.handle_transport(h.now, event);
            h.events();
        }
        h.engine.breaker_state(0, OperationClass::Write)
    };
    for status in [400, 404, 413, 415] {
        assert_eq!(failing(status), BreakerState::Closed, "{status}");
    }
    for status in [429, 503] {
        assert_eq!(failing(status), BreakerState::Open, "{status}");
    }
}
