//! Calls held for the host's authorization (`CallOptions::hold`), on simulated time: allowed,
//! refused, past their deadline and cancelled while held, and the limits, breaker and counters
//! around them.

use std::time::Duration;

use serde_json::json;

use super::{raw, Harness};
use crate::config::BreakerPolicy;
use crate::engine::*;

fn held(timeout_ms: u64) -> CallOptions {
    CallOptions { hold: true, ..CallOptions::timeout(Duration::from_millis(timeout_ms)) }
}

/// The record and error of the one `CallFailed` event queued.
fn failed(h: &mut Harness) -> (CallId, CallError, CallRecord<'static>) {
    match h.engine.poll_event() {
        Some(Event::CallFailed { call, error, record }) => (call, error, record.detached()),
        other => panic!("expected CallFailed, got {:?}", other.map(|e| super::tests::describe(&e))),
    }
}

#[test]
fn a_released_call_is_sent_and_its_record_shows_the_wait() {
    let mut h = Harness::ready_modern();
    let c = h.engine.call_tool(h.now, "echo", raw(r#"{"t":1}"#), &held(1000)).unwrap();
    assert!(h.engine.is_held(c));
    assert!(h.take_sent().is_empty(), "a held call is not sent");
    assert_eq!(h.engine.load(), (0, 0), "a held call is neither queued nor in flight");
    h.advance(Duration::from_millis(300));
    assert!(h.take_sent().is_empty());
    h.engine.release(h.now, c).unwrap();
    assert!(!h.engine.is_held(c));
    let req = h.sent_one();
    assert_eq!(req["params"]["name"], "echo");
    h.reply(&req, json!({"content": []}));
    match h.engine.poll_event() {
        Some(Event::CallDone { call, record, .. }) => {
            assert_eq!(call, c);
            assert_eq!(record.authorization_wait, Duration::from_millis(300));
            assert_eq!(record.queue_wait, Duration::ZERO, "the hold is not queue time");
            assert_eq!(record.attempts, 1);
        }
        other => panic!("{:?}", other.map(|e| super::tests::describe(&e))),
    }
    assert_eq!(h.engine.release(h.now, c), Err(AuthorizeError::NotHeld));
}

#[test]
fn a_refused_call_ends_locally_with_its_reason_and_counts() {
    let mut h = Harness::ready_modern();
    let c = h.engine.call_tool(h.now, "rm", raw("{}"), &held(1000)).unwrap();
    h.advance(Duration::from_millis(40));
    h.engine.refuse(h.now, c, "the operator said no").unwrap();
    assert!(h.take_sent().is_empty(), "nothing is ever sent for a refused call");
    let (call, error, record) = failed(&mut h);
    assert_eq!(call, c);
    assert_eq!(
        error,
        CallError::Local(LocalError::AuthorizationDenied("the operator said no".into()))
    );
    assert_eq!(
        error.to_string(),
        "refused by the local authorization policy: the operator said no"
    );
    assert_eq!(record.error_name, Some("authorization_denied"));
    assert_eq!(record.error_kind, Some("local"));
    assert!(!record.retryable);
    assert_eq!((record.attempts, record.request_id), (0, None));
    assert_eq!(record.authorization_wait, Duration::from_millis(40));
    let stats = h.engine.stats();
    assert_eq!(stats.failures.authorization_denied, 1);
    assert_eq!(stats.failures.local, 1);
    assert_eq!(stats.requests_sent, 1, "the probe only");
    assert_eq!(h.engine.pending(), 0);
    assert_eq!(h.engine.refuse(h.now, c, "again"), Err(AuthorizeError::NotHeld));
    assert_eq!(h.engine.poll_timeout(), None, "the deadline went with the call");
}

#[test]
fn the_deadline_runs_while_held() {
    let mut h = Harness::ready_modern();
    let c = h.engine.call_tool(h.now, "echo", raw("{}"), &held(200)).unwrap();
    assert_eq!(h.engine.poll_timeout(), Some(h.now + Duration::from_millis(200)));
    h.advance_to_next_timeout();
    let (call, error, record) = failed(&mut h);
    assert_eq!((call, error), (c, CallError::Local(LocalError::DeadlineExceeded)));
    assert_eq!(record.authorization_wait, Duration::from_millis(200));
    assert!(h.take_sent().is_empty(), "no cancellation for a call never sent");
    assert_eq!(h.engine.release(h.now, c), Err(AuthorizeError::NotHeld), "too late to allow");
}

#[test]
fn cancel_ends_a_held_call_and_sends_nothing() {
    let mut h = Harness::ready_modern();
    let c = h.engine.call_tool(h.now, "echo", raw("{}"), &held(1000)).unwrap();
    h.engine.cancel(h.now, c).unwrap();
    let (call, error, record) = failed(&mut h);
    assert_eq!((call, error), (c, CallError::Local(LocalError::Cancelled)));
    assert!(record.cancelled);
    assert!(h.take_sent().is_empty());
    assert_eq!(h.engine.release(h.now, c), Err(AuthorizeError::NotHeld));
}

#[test]
fn limits_count_a_held_call_only_once_released() {
    let config = Config { max_in_flight: 1, max_queued: 0, ..Config::default() };
    let mut h = Harness::ready_with(config);
    let first = h.call("a", "{}");
    let req = h.sent_one();
    // The queue is full (nothing may wait behind the one in flight), but a held call is taken.
    let args = raw("{}");
    assert_eq!(
        h.engine.call_tool(h.now, "b", args, &CallOptions::default()),
        Err(RequestError::Overloaded)
    );
    let c = h.engine.call_tool(h.now, "b", args, &held(10_000)).unwrap();
    assert_eq!(h.engine.load(), (1, 0));
    // Released while there is no room: it stays held.
    assert_eq!(h.engine.release(h.now, c), Err(AuthorizeError::Overloaded));
    assert!(h.engine.is_held(c));
    h.reply(&req, json!({"content": []}));
    assert_eq!(h.events(), [format!("done {} {{\"content\":[]}}", first.get())]);
    h.engine.release(h.now, c).unwrap();
    assert_eq!(h.sent_one()["params"]["name"], "b");
    assert_eq!(h.engine.load(), (1, 0));
}

#[test]
fn a_refusal_never_moves_the_breaker_and_an_open_breaker_fails_the_release() {
    let breaker = BreakerPolicy { failure_threshold: 1, cool_down: Duration::from_secs(60) };
    let mut h = Harness::ready_with(Config { breaker, ..Config::default() });
    for _ in 0..3 {
        let c = h.engine.call_tool(h.now, "rm", raw("{}"), &held(1000)).unwrap();
        h.engine.refuse(h.now, c, "no").unwrap();
    }
    assert_eq!(h.engine.breaker_state(0, OperationClass::Write), BreakerState::Closed);
    // A held call asks its breaker when released, not when made.
    let c = h.engine.call_tool(h.now, "rm", raw("{}"), &held(1000)).unwrap();
    h.call("boom", "{}");
    h.sent_one();
    h.engine.handle_transport(
        h.now,
        TransportEvent::closed(TransportError::Closed(crate::error::CloseReason::ReadFailed)),
    );
    let events = h.events();
    assert!(events.iter().any(|e| e.starts_with("breaker Write Open")), "{events:?}");
    assert!(h.engine.is_held(c), "the transport loss leaves a held call waiting");
    h.engine.release(h.now, c).unwrap();
    let (call, error, _) = failed(&mut h);
    assert_eq!((call, error), (c, CallError::Local(LocalError::BreakerOpen)));
}

#[test]
fn a_call_refused_at_once_never_waits_and_an_allowed_one_is_never_held() {
    let mut h = Harness::ready_modern();
    // Deny at once: what the host does when its policy answers Deny.
    let c = h.engine.call_tool(h.now, "rm", raw("{}"), &held(1000)).unwrap();
    h.engine.refuse(h.now, c, "policy").unwrap();
    let (_, error, record) = failed(&mut h);
    assert_eq!(error.name(), "authorization_denied");
    assert_eq!(record.authorization_wait, Duration::ZERO);
    // Allow: the call is made as ever, never held, and sent at once.
    let c = h.call("echo", "{}");
    assert!(!h.engine.is_held(c));
    assert_eq!(h.engine.release(h.now, c), Err(AuthorizeError::NotHeld));
    assert_eq!(h.engine.refuse(h.now, c, "late"), Err(AuthorizeError::NotHeld));
    let req = h.sent_one();
    h.reply(&req, json!({"content": []}));
    assert_eq!(h.events(), [format!("done {} {{\"content\":[]}}", c.get())]);
}
