//! Task-backed tool calls (MCP tasks) in both eras, on simulated time with a scripted peer:
//! creation, polling at the server's interval (clamped), status events, the result as a normal
//! call end, cancellation by `tasks/cancel`, the deadline, and reattaching by task id.

use std::time::Duration;

use serde_json::{json, Value};

use super::{exit, raw, transmits, Harness};
use crate::engine::*;

const TASKS: &str = "io.modelcontextprotocol/tasks";

fn prefer() -> CallOptions {
    CallOptions { task: TaskMode::Prefer { ttl: None }, ..CallOptions::default() }
}

fn call_with(h: &mut Harness, opts: &CallOptions) -> CallId {
    h.engine.call_tool(h.now, "build", raw(r#"{"target":"all"}"#), opts).unwrap()
}

/// A modern call whose server made task `t-1` (polled every `poll_ms`), its events drained.
fn task_call(h: &mut Harness, opts: &CallOptions, poll_ms: u64) -> CallId {
    let call = call_with(h, opts);
    let sent = h.sent_one();
    h.reply(&sent, modern_task("task", "working", json!(poll_ms)));
    h.events();
    call
}

/// A 2026-07-28 task object (`tasks/get` result or `CreateTaskResult`).
fn modern_task(result_type: &str, status: &str, poll_ms: Value) -> Value {
    json!({"resultType": result_type, "taskId": "t-1", "status": status,
           "createdAt": "2026-08-01T10:00:00Z", "lastUpdatedAt": "2026-08-01T10:00:00Z",
           "ttlMs": 60000, "pollIntervalMs": poll_ms})
}

/// A 2025-11-25 server that declared task-augmented tool calls (and `tasks.cancel`).
fn ready_legacy_with_tasks(cancel: bool) -> Harness {
    ready_legacy_with_tasks_over(cancel, TransportKind::Stdio)
}

/// [`ready_legacy_with_tasks`] over a transport of choice.
fn ready_legacy_with_tasks_over(cancel: bool, transport: TransportKind) -> Harness {
    ready_legacy_with_tasks_configured(Config::default(), cancel, transport)
}

/// [`ready_legacy_with_tasks_over`] with a configuration of choice.
fn ready_legacy_with_tasks_configured(
    config: Config,
    cancel: bool,
    transport: TransportKind,
) -> Harness {
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened_as(transport));
    let probe = h.sent_one();
    h.reply_error(&probe, -32601, None);
    let init = h.sent_one();
    let mut tasks = json!({"list": {}, "requests": {"tools": {"call": {}}}});
    if cancel {
        tasks["cancel"] = json!({});
    }
    h.reply(
        &init,
        json!({"protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}, "tasks": tasks},
        "serverInfo": {"name": "s", "version": "1"}}),
    );
    let _initialized = h.sent_one();
    assert_eq!(h.events(), ["ready legacy 2025-11-25"]);
    h
}

fn legacy_task(status: &str, poll_ms: u64) -> Value {
    json!({"taskId": "t-9", "status": status, "createdAt": "2025-11-25T10:30:00Z",
           "lastUpdatedAt": "2025-11-25T10:30:00Z", "ttl": 60000, "pollInterval": poll_ms})
}

/// A task-backed call admitted as its half-open breaker's probe: the task's creation says the
/// server is up, so the breaker closes then, not when the task ends (hours later, with every
/// other call of its class refused meanwhile).
#[test]
fn a_task_created_by_a_half_open_breakers_probe_closes_the_breaker() {
    let breaker =
        crate::config::BreakerPolicy { failure_threshold: 1, cool_down: Duration::from_secs(5) };
    let retry = crate::config::RetryPolicy { max_attempts: 1, ..Default::default() };
    let mut h = Harness::ready_http_with(Config { breaker, retry, ..Config::default() });
    let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
    h.engine.call_tool(h.now, "write", raw("{}"), &CallOptions::default()).unwrap();
    let s = h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(super::tests::wire(&s), lost));
    assert_eq!(h.events().last().unwrap(), "breaker Write Open");
    h.now += Duration::from_secs(5);
    let long = CallOptions { timeout: Some(Duration::from_secs(3600)), ..prefer() };
    call_with(&mut h, &long);
    let sent = h.sent_one();
    h.reply(&sent, modern_task("task", "working", json!(60_000)));
    let events = h.events();
    assert!(events.contains(&"breaker Write Closed".to_owned()), "{events:?}");
    h.engine
        .call_tool(h.now, "write", raw("{}"), &CallOptions::default())
        .expect("another write is admitted while the task runs");
}

/// A task resumed by a half-open breaker's probe: the first poll's answer says the server is
/// up, so the breaker closes then. The verdict came only with the task's end, and every other
/// read of the tenant was refused meanwhile (hours for a long task).
#[test]
fn a_task_resumed_by_a_half_open_breakers_probe_closes_the_breaker() {
    let breaker =
        crate::config::BreakerPolicy { failure_threshold: 1, cool_down: Duration::from_secs(5) };
    let retry = crate::config::RetryPolicy { max_attempts: 1, ..Default::default() };
    let mut h = Harness::ready_http_with(Config { breaker, retry, ..Config::default() });
    let read = CallOptions { idempotency: Some(crate::Idempotency::Read), ..Default::default() };
    let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
    h.engine.call_tool(h.now, "read", raw("{}"), &read).unwrap();
    let s = h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(super::tests::wire(&s), lost));
    assert_eq!(h.events().last().unwrap(), "breaker Read Open");
    h.now += Duration::from_secs(5);
    let long = CallOptions { timeout: Some(Duration::from_secs(3600)), ..Default::default() };
    h.engine.resume_task(h.now, "t-1", &long).unwrap();
    let get = h.sent_one();
    assert_eq!(get["method"], "tasks/get");
    h.reply(&get, modern_task("complete", "working", json!(60_000)));
    let events = h.events();
    assert!(events.contains(&"breaker Read Closed".to_owned()), "{events:?}");
    h.engine
        .call_tool(h.now, "read", raw("{}"), &read)
        .expect("another read is admitted while the task runs");
}

/// The half-open breaker's probe that became a task gave its verdict when the task was made:
/// it is an ordinary call after that. Its end, much later, came as a probe's still, and
/// closed (or opened) the breaker again while another probe was out.
#[test]
fn a_task_made_by_a_probe_is_no_probe_when_it_ends() {
    let breaker =
        crate::config::BreakerPolicy { failure_threshold: 1, cool_down: Duration::from_secs(5) };
    let retry = crate::config::RetryPolicy { max_attempts: 1, ..Default::default() };
    let mut h = Harness::ready_http_with(Config { breaker, retry, ..Config::default() });
    let lost = || ExchangeFailure::Transport(TransportError::ConnectionLost);
    let fail = |h: &mut Harness| {
        h.engine.call_tool(h.now, "write", raw("{}"), &CallOptions::default()).unwrap();
        let s = h.sent_one();
        let failed = TransportEvent::exchange_failed(super::tests::wire(&s), lost());
        h.engine.handle_transport(h.now, failed);
        assert_eq!(h.events().last().unwrap(), "breaker Write Open");
        h.now += Duration::from_secs(5);
    };
    fail(&mut h);
    let long = CallOptions { timeout: Some(Duration::from_secs(3600)), ..prefer() };
    call_with(&mut h, &long);
    let sent = h.sent_one();
    h.reply(&sent, modern_task("task", "working", json!(60_000)));
    assert!(h.events().contains(&"breaker Write Closed".to_owned()));
    // Open again, and half-open with a new probe out.
    fail(&mut h);
    let probe = CallOptions { timeout: Some(Duration::from_secs(3600)), ..CallOptions::default() };
    h.engine.call_tool(h.now, "write", raw("{}"), &probe).unwrap();
    let p = h.sent_one();
    assert_eq!(h.engine.breaker_state(0, OperationClass::Write), BreakerState::HalfOpen);
    // The task ends.
    h.advance(Duration::from_secs(60));
    let get = h.sent_one();
    assert_eq!(get["method"], "tasks/get");
    let mut done = modern_task("complete", "completed", json!(60_000));
    done["result"] = json!({"content": [], "isError": false});
    h.reply(&get, done);
    h.events();
    let state = h.engine.breaker_state(0, OperationClass::Write);
    assert_eq!(state, BreakerState::HalfOpen, "the probe out has the verdict");
    h.reply(&p, json!({"resultType": "complete", "content": []}));
    assert!(h.events().contains(&"breaker Write Closed".to_owned()));
}

/// A task's polls that keep failing (an HTTP 503 each) are tried with growing waits, ask no
/// breaker, and after `max_attempts` in a row end the call with the failure and cancel the
/// task: they neither poll every 100 ms until the deadline nor end as `BreakerOpen` with
/// the task left running.
#[test]
fn failing_polls_back_off_then_end_the_call_and_cancel_the_task() {
    let breaker =
        crate::config::BreakerPolicy { failure_threshold: 2, cool_down: Duration::from_secs(60) };
    let mut h = Harness::ready_http_with(Config { breaker, ..Config::default() });
    let call = task_call(&mut h, &prefer(), 1000);
    h.advance(Duration::from_millis(1000));
    let mut waits = Vec::new();
    let mut get = h.sent_one();
    loop {
        assert_eq!(get["method"], "tasks/get");
        let unavailable = ExchangeFailure::Transport(TransportError::HttpStatus(503));
        let failed = TransportEvent::exchange_failed(super::tests::wire(&get), unavailable);
        h.engine.handle_transport(h.now, failed);
        let sent = h.take_sent();
        if !sent.is_empty() {
            assert_eq!(sent.len(), 1, "{sent:?}");
            assert_eq!(sent[0]["method"], "tasks/cancel");
            assert_eq!(sent[0]["params"]["taskId"], "t-1");
            break;
        }
        let before = h.now;
        h.advance_to_next_timeout();
        waits.push(h.now - before);
        get = h.sent_one();
    }
    assert_eq!(waits.len(), 2, "max_attempts 3: two retries, {waits:?}");
    assert!(waits[1] > waits[0], "the wait grows: {waits:?}");
    // The call was a write the server took as a task: it may have run, so its end is
    // `DeliveryUnknown`, not the polls' transport error a host might retry on.
    let events = h.events();
    assert!(events.contains(&format!("failed {} delivery_unknown", call.get())), "{events:?}");
}

/// A task-backed write whose `tasks/result` keeps failing in transport ends `DeliveryUnknown`:
/// the tool ran (the task completed), and a plain `connection_lost` invited a host to send the
/// write again.
#[test]
fn a_task_backed_write_whose_result_fetch_fails_ends_delivery_unknown() {
    let mut h = ready_legacy_with_tasks_over(true, TransportKind::Http);
    let call = call_with(&mut h, &prefer());
    let sent = h.sent_one();
    h.reply(&sent, json!({"task": legacy_task("completed", 100)}));
    h.events();
    let mut fetch = h.sent_one();
    for _ in 0..8 {
        assert_eq!(fetch["method"], "tasks/result");
        let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
        h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&fetch), lost));
        if !h.engine.is_pending(call) {
            break;
        }
        h.advance_to_next_timeout();
        fetch = h.sent_one();
    }
    let events = h.events();
    assert!(events.contains(&format!("failed {} delivery_unknown", call.get())), "{events:?}");
}

/// A task-backed read ends with its polls' transport error as it is: nothing is unknown.
#[test]
fn a_task_backed_read_whose_polls_fail_ends_with_the_transport_error() {
    let retry = crate::config::RetryPolicy { max_attempts: 1, ..Default::default() };
    let mut h = Harness::ready_http_with(Config { retry, ..Config::default() });
    let read = CallOptions { idempotency: Some(Idempotency::Read), ..prefer() };
    let call = task_call(&mut h, &read, 1000);
    h.advance(Duration::from_millis(1000));
    let get = h.sent_one();
    let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&get), lost));
    let events = h.events();
    assert!(events.contains(&format!("failed {} connection_lost", call.get())), "{events:?}");
}

/// A modern task call whose task asks the host for a name (a form elicitation) in a poll's
/// reply: the harness, the call, the input request handed to the host, and that reply.
#[cfg(feature = "server-requests")]
fn a_task_asking_for_a_name() -> (Harness, CallId, ServerRequestId, Value) {
    let answers =
        crate::config::ServerRequestKinds { elicitation_form: true, ..Default::default() };
    let mut h = Harness::ready_with(Config { answers, ..Config::default() });
    let call = task_call(&mut h, &prefer(), 100);
    h.advance(Duration::from_millis(100));
    let get = h.sent_one();
    let mut input = modern_task("complete", "input_required", json!(100));
    input["inputRequests"] = json!({"name": {"method": "elicitation/create", "params": {
        "mode": "form", "message": "Your name?", "requestedSchema": {"type": "object",
        "properties": {"name": {"type": "string"}}}}}});
    h.reply(&get, input.clone());
    let mut request = None;
    while let Some(e) = h.engine.poll_event() {
        if let Event::ServerRequest { request: r, kind, call: c, .. } = e {
            assert_eq!((kind, c), (ServerRequestKind::ElicitationForm, Some(call)));
            request = Some(r);
        }
    }
    let request = request.expect("the task's input request reaches the host");
    (h, call, request, input)
}

/// A task whose input answer the server refuses (`tasks/update` with an error) ends the call,
/// and the task, left waiting for input nobody will give, is cancelled.
#[cfg(feature = "server-requests")]
#[test]
fn a_task_whose_update_is_refused_is_cancelled() {
    let (mut h, call, request, _) = a_task_asking_for_a_name();
    let answer = r#"{"action":"accept","content":{"name":"Ann"}}"#;
    h.engine.answer(h.now, request, raw(answer)).unwrap();
    let update = h.sent_one();
    assert_eq!(update["method"], "tasks/update");
    h.reply_error(&update, -32602, None);
    let cancel = h.sent_one();
    assert_eq!(
        (&cancel["method"], &cancel["params"]["taskId"]),
        (&json!("tasks/cancel"), &json!("t-1"))
    );
    assert!(h.events().iter().any(|e| e.starts_with(&format!("failed {}", call.get()))));
}

/// A reply that creates a task the call asked for but describes it unreadably (a status no
/// revision has) ends the call as an invalid result; the task it names runs on the server all
/// the same, so it is cancelled rather than left to run for nobody. In both eras; an id past
/// the bound, which cannot be named back, sends nothing.
#[test]
fn a_task_created_with_an_unreadable_description_is_cancelled() {
    let mut h = Harness::ready_modern();
    let call = call_with(&mut h, &prefer());
    let sent = h.sent_one();
    h.reply(&sent, modern_task("task", "submitted", json!(100)));
    assert_eq!(h.events(), [format!("failed {} invalid_result", call.get())]);
    let cancel = h.sent_one();
    assert_eq!(
        (&cancel["method"], &cancel["params"]["taskId"]),
        (&json!("tasks/cancel"), &json!("t-1"))
    );

    let mut h = ready_legacy_with_tasks(true);
    let call = call_with(&mut h, &prefer());
    let sent = h.sent_one();
    h.reply(&sent, json!({"task": legacy_task("Working", 500)}));
    assert_eq!(h.events(), [format!("failed {} invalid_result", call.get())]);
    let cancel = h.sent_one();
    assert_eq!(
        (&cancel["method"], &cancel["params"]["taskId"]),
        (&json!("tasks/cancel"), &json!("t-9"))
    );

    let mut h = Harness::ready_modern();
    let call = call_with(&mut h, &prefer());
    let sent = h.sent_one();
    let mut long = modern_task("task", "submitted", json!(100));
    long["taskId"] = json!("t".repeat(4096));
    h.reply(&sent, long);
    assert_eq!(h.events(), [format!("failed {} invalid_result", call.get())]);
    assert!(h.take_sent().is_empty());
}

/// A second copy of the reply that created the task is a duplicate: it must not be taken for
/// a late reply that created an orphan task, and cancel the task the call polls.
#[test]
fn a_duplicate_of_the_task_creation_reply_cancels_nothing() {
    let mut h = Harness::ready_modern();
    let call = call_with(&mut h, &prefer());
    let sent = h.sent_one();
    h.reply(&sent, modern_task("task", "working", json!(1000)));
    h.events();
    h.reply(&sent, modern_task("task", "working", json!(1000)));
    assert!(h.take_sent().is_empty(), "no tasks/cancel");
    assert_eq!(h.engine.stats().duplicate_responses, 1);
    h.advance(Duration::from_millis(1000));
    let poll = h.sent_one();
    assert_eq!(poll["method"], "tasks/get");
    assert_eq!(poll["params"]["taskId"], "t-1", "the task is polled on");
    assert_eq!(h.engine.pending(), 1, "{}", call.get());
}

/// A copy of the creation reply that comes after a poll (its id no longer the call's last,
/// so no duplicate but late) names the task the call still polls: it cancels nothing.
#[test]
fn a_copy_of_the_task_creation_reply_after_a_poll_cancels_nothing() {
    let mut h = Harness::ready_modern();
    let call = call_with(&mut h, &prefer());
    let sent = h.sent_one();
    h.reply(&sent, modern_task("task", "working", json!(1000)));
    h.events();
    h.advance(Duration::from_millis(1000));
    let poll = h.sent_one();
    assert_eq!(poll["method"], "tasks/get");
    h.reply(&poll, modern_task("complete", "working", json!(1000)));
    h.reply(&sent, modern_task("task", "working", json!(1000)));
    assert!(h.take_sent().is_empty(), "no tasks/cancel");
    assert!(h.engine.is_pending(call));
    h.advance(Duration::from_millis(1000));
    let poll = h.sent_one();
    assert_eq!(poll["params"]["taskId"], "t-1", "the task is polled on");
}

/// The same for a 2025-11-25 task created already needing input (or done): its result is
/// fetched at once, and a copy of the creation reply cancels nothing.
#[test]
fn a_duplicate_of_a_legacy_creation_reply_needing_input_cancels_nothing() {
    let mut h = ready_legacy_with_tasks(true);
    call_with(&mut h, &prefer());
    let sent = h.sent_one();
    let created = json!({"task": legacy_task("input_required", 500)});
    h.reply(&sent, created.clone());
    h.events();
    let fetch = h.sent_one();
    assert_eq!(fetch["method"], "tasks/result");
    h.reply(&sent, created);
    assert!(h.take_sent().is_empty(), "no tasks/cancel");
    assert_eq!(h.engine.stats().duplicate_responses, 1);
}

#[test]
fn a_modern_task_is_created_polled_at_its_interval_and_ends_as_the_call() {
    let mut h = Harness::ready_modern();
    let opts = CallOptions { progress: true, ..prefer() };
    let call = call_with(&mut h, &opts);
    let sent = h.sent_one();
    assert_eq!(sent["method"], "tools/call");
    let caps = &sent["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert_eq!(caps["extensions"], json!({TASKS: {}}), "the call declares the extension");
    assert!(sent["params"].get("task").is_none(), "no 2025 task param in the modern era");

    h.reply(&sent, modern_task("task", "working", json!(2000)));
    assert_eq!(h.events(), [format!("task {} t-1", call.get())]);
    assert!(h.take_sent().is_empty(), "nothing until the poll interval passes");
    assert_eq!(h.engine.tasks().collect::<Vec<_>>(), [(call, "t-1", Some(TaskStatus::Working))]);
    assert_eq!(h.engine.load(), (0, 0), "a waiting task holds no in-flight slot");

    h.advance(Duration::from_millis(1999));
    assert!(h.take_sent().is_empty());
    h.advance(Duration::from_millis(1));
    let get = h.sent_one();
    assert_eq!(get["method"], "tasks/get");
    assert_eq!(get["params"]["taskId"], "t-1");
    let meta = &get["params"]["_meta"];
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert!(meta.get("progressToken").is_none(), "the poll asks no progress of its own");
    let caps = &meta["io.modelcontextprotocol/clientCapabilities"];
    assert_eq!(caps["extensions"], json!({TASKS: {}}), "the poll declares the extension too");
    let route = &h.routes[&get["id"].as_u64().unwrap()];
    assert_eq!(route.name.as_deref(), Some("t-1"), "Mcp-Name of tasks/get is the task id");

    // Progress on the original token still reaches the call.
    h.peer(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": call.get(), "progress": 1, "total": 4}}));
    let mut working = modern_task("complete", "working", json!(500));
    working["statusMessage"] = json!("step 1/4");
    h.reply(&get, working);
    assert_eq!(
        h.events(),
        [
            format!("progress {} 1 Some(4.0) None", call.get()),
            format!("task {} t-1 working Some(\"step 1/4\")", call.get()),
        ]
    );
    h.advance(Duration::from_millis(500));
    let get = h.sent_one();
    let mut done = modern_task("complete", "completed", json!(500));
    done["result"] = json!({"content": [{"type": "text", "text": "built"}], "isError": false});
    h.reply(&get, done);
    let events = h.events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], format!("task {} t-1 completed None", call.get()));
    assert_eq!(
        events[1],
        format!(
            "done {} {{\"content\":[{{\"text\":\"built\",\"type\":\"text\"}}],\"isError\":false}}",
            call.get()
        )
    );
    assert_eq!(h.engine.tasks().count(), 0);
    assert_eq!(h.engine.pending(), 0);
}

/// A task's poll holds its place in flight already: it is not held behind a fresh call the
/// in-flight limit keeps waiting (it waited as long as the call on the wire ran, and the
/// task could meet its deadline and be cancelled for nothing).
#[test]
fn a_tasks_poll_passes_fresh_calls_held_by_the_in_flight_limit() {
    let mut h = Harness::ready_with(Config { max_in_flight: 1, ..Config::default() });
    let task = task_call(&mut h, &prefer(), 1000);
    let long = h.engine.call_tool(h.now, "long", raw("{}"), &CallOptions::default()).unwrap();
    let long_sent = h.sent_one();
    assert_eq!(long_sent["params"]["name"], "long");
    let held = h.engine.call_tool(h.now, "held", raw("{}"), &CallOptions::default()).unwrap();
    assert!(h.take_sent().is_empty(), "the limit holds the fresh call");
    h.advance(Duration::from_millis(1000));
    let get = h.sent_one();
    assert_eq!(get["method"], "tasks/get", "the poll goes past the held call");
    h.reply(&long_sent, json!({"content": []}));
    h.reply(&get, modern_task("complete", "working", json!(1000)));
    let next = h.sent_one();
    assert_eq!(next["params"]["name"], "held", "the held call goes once there is room");
    assert!(h.engine.is_pending(task) && h.engine.is_pending(held) && !h.engine.is_pending(long));
}

#[test]
fn poll_intervals_from_the_server_are_clamped() {
    for (poll, wait) in [
        (json!(0), Duration::from_millis(100)),
        (json!(1_000_000_000_000_000u64), Duration::from_secs(30)),
        (json!(-5), Duration::from_secs(1)),
        (json!(1.5), Duration::from_secs(1)),
        (Value::Null, Duration::from_secs(1)),
    ] {
        let mut h = Harness::ready_modern();
        let opts = CallOptions { timeout: Some(Duration::from_secs(3600)), ..prefer() };
        call_with(&mut h, &opts);
        let sent = h.sent_one();
        h.reply(&sent, modern_task("task", "working", poll.clone()));
        let at = h.engine.poll_timeout().unwrap();
        assert_eq!(at - h.now, wait, "pollIntervalMs {poll}");
        h.advance_to_next_timeout();
        assert_eq!(h.sent_one()["method"], "tasks/get");
    }
}

#[test]
fn cancelling_a_task_backed_call_ends_it_now_and_sends_tasks_cancel() {
    let mut h = Harness::ready_modern();
    let call = task_call(&mut h, &prefer(), 1000);
    h.advance(Duration::from_secs(1));
    let get = h.sent_one();
    h.engine.cancel(h.now, call).unwrap();
    assert_eq!(h.events(), [format!("failed {} cancelled", call.get())]);
    let cancel = h.sent_one();
    assert_eq!(cancel["method"], "tasks/cancel");
    assert_eq!(cancel["params"]["taskId"], "t-1");
    assert_eq!(cancel["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    let caps = &cancel["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert_eq!(caps["extensions"], json!({TASKS: {}}), "tasks/cancel declares the extension");
    let route = &h.routes[&cancel["id"].as_u64().unwrap()];
    assert_eq!(route.name.as_deref(), Some("t-1"), "Mcp-Name of tasks/cancel is the task id");
    // Neither the poll's answer nor the cancel's acknowledgement ends the call again.
    h.reply(&get, modern_task("complete", "working", json!(1000)));
    h.reply(&cancel, json!({"resultType": "complete"}));
    assert!(h.events().is_empty());
    assert_eq!(h.engine.stats().late_responses, 2);
    assert_eq!(h.engine.pending(), 0);
    h.advance(Duration::from_secs(5));
    assert!(h.take_sent().is_empty(), "no poll after the cancel");
}

/// A call cancelled (or past its deadline) after it was sent but before the reply that
/// creates its task: when that reply comes late, the task it made is cancelled with
/// `tasks/cancel` (PROTOCOL.md §6.4), in either era, rather than left to run for nobody. A
/// late reply that creates nothing, or names a task already over, sends nothing.
#[test]
fn a_task_created_by_a_late_reply_is_cancelled() {
    let mut h = Harness::ready_modern();
    let call = call_with(&mut h, &prefer());
    let sent = h.sent_one();
    h.engine.cancel(h.now, call).unwrap();
    h.take_sent();
    h.events();
    h.reply(&sent, modern_task("task", "working", json!(1000)));
    let cancel = h.sent_one();
    assert_eq!(cancel["method"], "tasks/cancel");
    assert_eq!(cancel["params"]["taskId"], "t-1");
    // Its acknowledgement (the task, cancelled) asks for nothing more.
    h.reply(&cancel, modern_task("complete", "cancelled", json!(1000)));
    assert!(h.take_sent().is_empty());
    // A late plain result, or a task already over, sends nothing.
    for late in [
        json!({"resultType": "complete", "content": []}),
        modern_task("task", "completed", json!(1)),
    ] {
        let call = call_with(&mut h, &prefer());
        let sent = h.sent_one();
        h.engine.cancel(h.now, call).unwrap();
        h.take_sent();
        h.reply(&sent, late);
        assert!(h.take_sent().is_empty());
    }
    assert!(h.events().iter().all(|e| e.contains("cancelled")));

    let mut h = ready_legacy_with_tasks(true);
    let opts = CallOptions { timeout: Some(Duration::from_secs(1)), ..prefer() };
    let call = call_with(&mut h, &opts);
    let sent = h.sent_one();
    h.advance(Duration::from_secs(1));
    assert_eq!(h.events(), [format!("failed {} deadline_exceeded", call.get())]);
    h.take_sent();
    h.reply(&sent, json!({"task": legacy_task("working", 100)}));
    let cancel = h.sent_one();
    assert_eq!(
        (&cancel["method"], &cancel["params"]),
        (&json!("tasks/cancel"), &json!({"taskId": "t-9"}))
    );
}

/// A late reply that created a task after the engine was closed sends nothing: a closed
/// engine writes nothing more (its `tasks/cancel` went out after the close).
#[test]
fn a_task_created_by_a_late_reply_after_the_close_sends_nothing() {
    for modern in [true, false] {
        let mut h = if modern { Harness::ready_modern() } else { ready_legacy_with_tasks(true) };
        let call = call_with(&mut h, &prefer());
        let sent = h.sent_one();
        h.engine.close(h.now);
        h.take_sent();
        let events = h.events();
        assert!(events.iter().any(|e| e.starts_with(&format!("failed {}", call.get()))));
        let created = match modern {
            true => modern_task("task", "working", json!(1000)),
            false => json!({"task": legacy_task("working", 100)}),
        };
        h.reply(&sent, created);
        assert!(h.take_sent().is_empty(), "modern: {modern}");
    }
}

#[test]
fn the_deadline_ends_a_task_backed_call_and_cancels_its_task() {
    let mut h = Harness::ready_modern();
    let opts = CallOptions { timeout: Some(Duration::from_secs(5)), ..prefer() };
    let call = task_call(&mut h, &opts, 2000);
    for _ in 0..2 {
        h.advance(Duration::from_secs(2));
        let get = h.sent_one();
        h.reply(&get, modern_task("complete", "working", json!(2000)));
    }
    assert!(h.events().is_empty());
    h.advance(Duration::from_secs(1));
    assert_eq!(h.events(), [format!("failed {} deadline_exceeded", call.get())]);
    assert_eq!(h.sent_one()["method"], "tasks/cancel");
}

#[test]
fn a_failed_task_ends_the_call_with_its_json_rpc_error() {
    let mut h = Harness::ready_modern();
    let call = task_call(&mut h, &prefer(), 100);
    h.advance(Duration::from_millis(100));
    let get = h.sent_one();
    let mut failed = modern_task("complete", "failed", json!(100));
    failed["error"] = json!({"code": -32603, "message": "rate limited"});
    h.reply(&get, failed);
    let mut got = None;
    while let Some(e) = h.engine.poll_event() {
        if let Event::CallFailed { call: c, error: CallError::Protocol(rpc), .. } = e {
            got = Some((c, rpc.code, rpc.message.clone()));
        }
    }
    assert_eq!(got, Some((call, -32603, "rate limited".into())));
}

#[test]
fn a_task_the_call_did_not_ask_for_is_an_invalid_result() {
    let mut h = Harness::ready_modern();
    let off = CallOptions { task: TaskMode::Off, ..CallOptions::default() };
    let call = call_with(&mut h, &off);
    let sent = h.sent_one();
    let caps = &sent["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert!(caps.get("extensions").is_none(), "{caps}");
    h.reply(&sent, modern_task("task", "working", json!(100)));
    assert_eq!(h.events(), [format!("failed {} invalid_result", call.get())]);
    assert!(h.take_sent().is_empty());
}

#[test]
fn declaring_the_extension_in_config_makes_every_tool_call_task_capable() {
    let config = Config { extensions: format!("{{\"{TASKS}\":{{}}}}"), ..Config::default() };
    let mut h = Harness::ready_with(config);
    let call = call_with(&mut h, &CallOptions::default());
    let sent = h.sent_one();
    h.reply(&sent, modern_task("task", "working", json!(100)));
    assert_eq!(h.events(), [format!("task {} t-1", call.get())]);
}

/// With the extension in the host's configuration every call declares it, one made without
/// a task (`TaskMode::Off`) too: a task the server makes of it is followed. It was an invalid
/// result, the task left running on the server for nobody, and a write it had taken reported
/// as failed.
#[test]
fn a_task_made_of_a_call_that_declared_the_extension_without_asking_is_followed() {
    let config = Config { extensions: format!("{{\"{TASKS}\":{{}}}}"), ..Config::default() };
    let mut h = Harness::ready_with(config);
    let off = CallOptions { task: TaskMode::Off, ..CallOptions::default() };
    let call = call_with(&mut h, &off);
    let sent = h.sent_one();
    let caps = &sent["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert!(caps["extensions"].get(TASKS).is_some(), "{caps}");
    h.reply(&sent, modern_task("task", "working", json!(100)));
    assert_eq!(h.events(), [format!("task {} t-1", call.get())]);
    h.advance(Duration::from_millis(100));
    let get = h.sent_one();
    assert_eq!(
        (get["method"].as_str(), get["params"]["taskId"].as_str()),
        (Some("tasks/get"), Some("t-1"))
    );
    let mut done = modern_task("complete", "completed", json!(100));
    done["result"] = json!({"content": [], "isError": false});
    h.reply(&get, done);
    let events = h.events();
    assert!(events.last().unwrap().starts_with(&format!("done {}", call.get())), "{events:?}");
}

#[test]
fn a_lost_poll_is_sent_again_never_delivery_unknown() {
    let mut h = Harness::ready_modern();
    let call = task_call(&mut h, &prefer(), 100);
    h.advance(Duration::from_millis(100));
    let get = h.sent_one();
    let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&get), lost));
    h.flush();
    assert!(h.events().iter().all(|e| !e.starts_with("failed")), "the call goes on");
    h.advance(Duration::from_secs(2));
    let again = h.sent_one();
    assert_eq!(
        (again["method"].as_str(), again["params"]["taskId"].as_str()),
        (Some("tasks/get"), Some("t-1"))
    );
    let mut done = modern_task("complete", "completed", json!(100));
    done["result"] = json!({"content": []});
    h.reply(&again, done);
    assert!(h.events().contains(&format!("done {} {{\"content\":[]}}", call.get())));
}

fn wire(v: &Value) -> WireId {
    super::tests::wire(v)
}

#[test]
fn a_task_is_reattached_by_id_after_a_restart() {
    // A new engine stands for the restarted host: it knows nothing but the saved task id.
    let mut h = Harness::ready_modern();
    let call = h.engine.resume_task(h.now, "t-1", &CallOptions::default()).unwrap();
    assert_eq!(h.engine.tasks().collect::<Vec<_>>(), [(call, "t-1", None)]);
    let get = h.sent_one();
    assert_eq!(get["method"], "tasks/get", "the first poll goes at once");
    assert_eq!(get["params"]["taskId"], "t-1");
    h.reply(&get, modern_task("complete", "input_required", json!(300)));
    assert_eq!(h.events(), [format!("task {} t-1 input_required None", call.get())]);
    h.advance(Duration::from_millis(300));
    let get = h.sent_one();
    let mut done = modern_task("complete", "completed", json!(300));
    done["result"] = json!({"content": [], "isError": true});
    h.reply(&get, done);
    let events = h.events();
    assert_eq!(
        events.last().unwrap(),
        &format!("done {} {{\"content\":[],\"isError\":true}} isError", call.get())
    );

    // A task the server no longer knows ends the resumed call with its error.
    let call = h.engine.resume_task(h.now, "gone", &CallOptions::default()).unwrap();
    let get = h.sent_one();
    h.reply_error(&get, -32602, None);
    assert_eq!(h.events(), [format!("failed {} invalid_params", call.get())]);
    assert_eq!(
        h.engine.resume_task(h.now, "", &CallOptions::default()),
        Err(RequestError::InvalidTaskId)
    );
}

/// Answers `init` as a 2025-11-25 server declaring no tasks, lets 5 s pass, and returns
/// what was sent meanwhile.
fn answer_initialize_then_wait(h: &mut Harness, init: &Value) -> Vec<Value> {
    let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
        "serverInfo": {"name": "s", "version": "1"}});
    h.reply(init, result);
    h.advance(Duration::from_secs(5));
    h.take_sent()
}

/// A 2025-11-25 task lives in its process's session (PROTOCOL.md §4): when the process dies
/// the call ends `DeliveryUnknown` (the tool may have run), and the next process hears
/// neither a poll nor a cancel of a task it never saw. (The call was kept, its old task
/// polled in the new session, and the server's "unknown task" error ended it as a protocol
/// error, then `tasks/cancel` went for it.)
#[test]
fn a_legacy_task_ends_with_its_process() {
    let mut h = ready_legacy_with_tasks(true);
    let call = call_with(&mut h, &prefer());
    let sent = h.sent_one();
    h.reply(&sent, json!({"task": legacy_task("working", 500)}));
    h.events();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    let events = h.events();
    assert!(events.contains(&format!("failed {} delivery_unknown", call.get())), "{events:?}");
    h.open_next_process();
    let init = h.sent_one();
    assert_eq!(init["method"], "initialize", "the new process's first message");
    let sent = answer_initialize_then_wait(&mut h, &init);
    assert!(sent.iter().all(|m| m["method"] == "notifications/initialized"), "{sent:?}");
}

/// A read-only call run as a legacy task ends with its process as a read does, with the
/// transport's error: `DeliveryUnknown` says a write may have run, and a read changed nothing.
/// (The old engine took the class of the task's polls for the call's own.)
#[test]
fn a_legacy_read_task_ends_with_its_process_as_a_read() {
    let mut h = ready_legacy_with_tasks(true);
    let opts = CallOptions { idempotency: Some(Idempotency::Read), ..prefer() };
    let call = call_with(&mut h, &opts);
    let sent = h.sent_one();
    h.reply(&sent, json!({"task": legacy_task("working", 500)}));
    h.events();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    let ended: Vec<String> = h.events().into_iter().filter(|e| e.starts_with("failed")).collect();
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert!(ended[0].starts_with(&format!("failed {} ", call.get())), "{ended:?}");
    assert!(!ended[0].contains("delivery_unknown"), "{ended:?}");
}

/// The same for a legacy HTTP session the server forgot: its tasks end with it, and the new
/// session polls none of them.
#[test]
fn a_legacy_task_ends_with_its_http_session() {
    let mut h = ready_legacy_with_tasks_over(true, TransportKind::Http);
    let task = call_with(&mut h, &prefer());
    let sent = h.sent_one();
    h.reply(&sent, json!({"task": legacy_task("working", 500)}));
    h.events();
    h.call("other", "{}");
    let other = h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::session_expired(wire(&other)));
    let events = h.events();
    assert!(events.contains(&format!("failed {} delivery_unknown", task.get())), "{events:?}");
    let init = h.sent_one();
    assert_eq!(init["method"], "initialize");
    let sent = answer_initialize_then_wait(&mut h, &init);
    let methods: Vec<_> = sent.iter().map(|m| m["method"].clone()).collect();
    assert_eq!(methods, [json!("notifications/initialized"), json!("tools/call")], "{sent:?}");
}

/// A 2026-07-28 task is the server's: one whose call is cancelled while its server restarts
/// is cancelled once the server is ready again, after the probe (the cancel was dropped, and
/// the task ran on for nobody).
#[test]
fn a_modern_task_cancelled_while_its_server_restarts_is_cancelled_once_ready() {
    let mut h = Harness::ready_modern();
    let call = task_call(&mut h, &prefer(), 60_000);
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    h.events();
    h.engine.cancel(h.now, call).unwrap();
    h.open_next_process();
    let probe = h.sent_one();
    assert_eq!(probe["method"], "server/discover", "the probe goes first");
    h.reply(&probe, super::discover_result());
    let cancel = h.sent_one();
    assert_eq!(cancel["method"], "tasks/cancel");
    assert_eq!(cancel["params"]["taskId"], "t-1");
}

/// A task-backed call cancelled while its server restarts: nothing is queued for the next
/// process ahead of its probe (a `tasks/cancel` went out first, and a server that exits on
/// any first message but its handshake crashed again).
#[test]
fn a_task_cancelled_while_its_server_restarts_sends_nothing_before_the_handshake() {
    let mut h = ready_legacy_with_tasks(true);
    let call = call_with(&mut h, &prefer());
    let sent = h.sent_one();
    h.reply(&sent, json!({"task": legacy_task("working", 60_000)}));
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    // Ended with its process already; a cancel now finds nothing to cancel.
    let _ = h.engine.cancel(h.now, call);
    let events = h.events();
    assert_eq!(
        events.iter().filter(|e| e.starts_with(&format!("failed {}", call.get()))).count(),
        1
    );
    h.open_next_process();
    assert_eq!(h.sent_one()["method"], "initialize");
}

#[test]
fn a_legacy_task_is_augmented_polled_and_its_result_fetched() {
    let mut h = ready_legacy_with_tasks(true);
    let opts = CallOptions {
        task: TaskMode::Prefer { ttl: Some(Duration::from_secs(60)) },
        ..CallOptions::default()
    };
    let call = call_with(&mut h, &opts);
    let sent = h.sent_one();
    assert_eq!(sent["params"]["task"], json!({"ttl": 60000}));
    assert_eq!(sent["params"]["arguments"], json!({"target": "all"}));
    h.reply(&sent, json!({"task": legacy_task("working", 500)}));
    assert_eq!(h.events(), [format!("task {} t-9", call.get())]);
    h.advance(Duration::from_millis(500));
    let get = h.sent_one();
    assert_eq!(
        get,
        json!({"jsonrpc": "2.0", "id": get["id"], "method": "tasks/get",
                           "params": {"taskId": "t-9"}})
    );
    h.reply(&get, legacy_task("working", 500));
    assert!(h.events().is_empty(), "no change, no event");
    h.advance(Duration::from_millis(500));
    let get = h.sent_one();
    h.reply(&get, legacy_task("completed", 500));
    assert_eq!(h.events(), [format!("task {} t-9 completed None", call.get())]);
    let fetch = h.sent_one();
    assert_eq!(fetch["method"], "tasks/result", "the result is fetched at once");
    assert_eq!(fetch["params"], json!({"taskId": "t-9"}));
    h.reply(
        &fetch,
        json!({"content": [{"type": "text", "text": "ok"}],
        "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t-9"}}}),
    );
    let events = h.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].starts_with(&format!("done {} {{", call.get())), "{events:?}");
    assert!(events[0].contains(r#""content":[{"text":"ok","type":"text"}]"#), "{events:?}");
}

#[test]
fn a_legacy_task_failure_comes_back_on_tasks_result() {
    let mut h = ready_legacy_with_tasks(false);
    let call = call_with(&mut h, &prefer());
    let sent = h.sent_one();
    assert_eq!(sent["params"]["task"], json!({}));
    h.reply(&sent, json!({"task": legacy_task("failed", 100)}));
    let fetch = h.sent_one();
    assert_eq!(fetch["method"], "tasks/result");
    h.reply_error(&fetch, -32603, None);
    let events = h.events();
    assert_eq!(events.last().unwrap(), &format!("failed {} internal_error", call.get()));
}

#[test]
fn a_legacy_task_is_cancelled_only_where_the_server_declared_it() {
    for declared in [true, false] {
        let mut h = ready_legacy_with_tasks(declared);
        let call = call_with(&mut h, &prefer());
        let sent = h.sent_one();
        h.reply(&sent, json!({"task": legacy_task("working", 100)}));
        h.events();
        h.engine.cancel(h.now, call).unwrap();
        assert_eq!(h.events(), [format!("failed {} cancelled", call.get())]);
        let sent = h.take_sent();
        if declared {
            assert_eq!(sent.len(), 1);
            assert_eq!(sent[0]["method"], "tasks/cancel");
            assert_eq!(sent[0]["params"], json!({"taskId": "t-9"}));
        } else {
            assert!(sent.is_empty(), "{sent:?}");
        }
    }
}

/// Cancelling a task-backed call over HTTP while its poll is on the wire closes that poll's
/// stream: a 2025-11-25 `tasks/result` waits on the server until the task ends, and where
/// the server takes no `tasks/cancel` nothing else frees its connection (it stayed taken
/// from the pool until the task ended, hours maybe).
#[test]
fn cancelling_a_task_closes_the_stream_of_its_poll() {
    for declared in [false, true] {
        let mut h = ready_legacy_with_tasks_over(declared, TransportKind::Http);
        let call = call_with(&mut h, &prefer());
        let sent = h.sent_one();
        h.reply(&sent, json!({"task": legacy_task("completed", 100)}));
        let fetch = h.sent_one();
        assert_eq!(fetch["method"], "tasks/result");
        h.events();
        h.engine.cancel(h.now, call).unwrap();
        let t = transmits(&mut h);
        let kinds: Vec<_> = t.iter().map(|(kind, _)| *kind).collect();
        assert!(
            kinds.contains(&TransmitKind::CloseStream { id: wire(&fetch) }),
            "declared {declared}: {t:?}"
        );
        let cancels =
            t.iter().filter(|(_, f)| f.as_ref().is_some_and(|f| f["method"] == "tasks/cancel"));
        assert_eq!(cancels.count(), usize::from(declared), "{t:?}");
    }
}

/// A 2025-11-25 task whose `tasks/result` waited an hour for the task says nothing of how long
/// a call takes: with it in the moving average, no retry would fit a later call's deadline.
#[test]
fn a_long_task_leaves_the_retries_of_later_calls_alone() {
    let mut h = ready_legacy_with_tasks_over(true, TransportKind::Http);
    let long = CallOptions { timeout: Some(Duration::from_secs(7200)), ..prefer() };
    call_with(&mut h, &long);
    let sent = h.sent_one();
    h.reply(&sent, json!({"task": legacy_task("completed", 100)}));
    let fetch = h.sent_one();
    assert_eq!(fetch["method"], "tasks/result");
    h.advance(Duration::from_secs(3600));
    h.reply(&fetch, json!({"content": []}));
    h.events();
    let read = CallOptions { idempotency: Some(Idempotency::Read), ..CallOptions::default() };
    h.engine.call_tool(h.now, "lookup", raw("{}"), &read).unwrap();
    let s = h.sent_one();
    let unavailable = ExchangeFailure::Transport(TransportError::HttpStatus(503));
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&s), unavailable));
    let mut resent = h.take_sent();
    while resent.is_empty() && h.engine.poll_timeout().is_some() {
        h.advance_to_next_timeout();
        resent = h.take_sent();
    }
    assert_eq!(resent.len(), 1, "the read is retried: {:?}", h.events());
}

#[test]
fn a_legacy_server_without_task_support_gets_a_plain_call() {
    let mut h = Harness::ready_legacy();
    call_with(&mut h, &prefer());
    let sent = h.sent_one();
    assert!(sent["params"].get("task").is_none(), "{sent}");
}

#[test]
fn a_legacy_tool_that_requires_tasks_gets_one_and_a_forbidding_one_does_not() {
    let mut h = ready_legacy_with_tasks(true);
    let list = h.engine.list(h.now, Method::ToolsList, &CallOptions::default()).unwrap();
    let sent = h.sent_one();
    h.reply(&sent, json!({"tools": [
        {"name": "build", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
        {"name": "echo", "inputSchema": {"type": "object"}}]}));
    assert!(h.events()[0].starts_with(&format!("done {}", list.get())));
    call_with(&mut h, &CallOptions::default());
    assert_eq!(h.sent_one()["params"]["task"], json!({}), "required: a task even on Auto");
    h.engine.call_tool(h.now, "echo", raw("{}"), &prefer()).unwrap();
    assert!(h.sent_one()["params"].get("task").is_none(), "absent taskSupport forbids tasks");
}

/// With the tasks extension configured (for the 2026-07-28 servers), an `Auto` call to a
/// 2025-11-25 server still asks for a task only when the listing says the tool requires
/// one: it asked whenever the server took tasks and no listing forbade it, so a tool not
/// listed yet, or an `optional` one, became a polled task (or was refused by a server that
/// forbids it).
#[test]
fn an_auto_call_to_a_legacy_server_asks_a_task_only_where_required_whatever_is_configured() {
    let config = Config { extensions: format!("{{\"{TASKS}\":{{}}}}"), ..Config::default() };
    let mut h = ready_legacy_with_tasks_configured(config, true, TransportKind::Stdio);
    call_with(&mut h, &CallOptions::default());
    let sent = h.sent_one();
    assert!(sent["params"].get("task").is_none(), "not listed yet: {sent}");
    h.engine.list(h.now, Method::ToolsList, &CallOptions::default()).unwrap();
    let list = h.sent_one();
    h.reply(&list, json!({"tools": [
        {"name": "build", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
        {"name": "slow", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}));
    h.events();
    call_with(&mut h, &CallOptions::default());
    let sent = h.sent_one();
    assert!(sent["params"].get("task").is_none(), "optional: {sent}");
    h.engine.call_tool(h.now, "slow", raw("{}"), &CallOptions::default()).unwrap();
    assert_eq!(h.sent_one()["params"]["task"], json!({}), "required: a task");
    h.engine.call_tool(h.now, "build", raw("{}"), &prefer()).unwrap();
    assert_eq!(h.sent_one()["params"]["task"], json!({}), "asked for: a task where allowed");
}

#[cfg(feature = "server-requests")]
#[test]
fn a_modern_tasks_input_goes_to_the_host_and_back_in_tasks_update() {
    let (mut h, call, request, input) = a_task_asking_for_a_name();
    assert!(h.take_sent().is_empty(), "no poll while the host answers");
    let answer = r#"{"action":"accept","content":{"name":"Ann"}}"#;
    h.engine.answer(h.now, request, raw(answer)).unwrap();
    let update = h.sent_one();
    assert_eq!(update["method"], "tasks/update");
    assert_eq!(update["params"]["taskId"], "t-1");
    assert_eq!(
        update["params"]["inputResponses"],
        json!({"name": {"action": "accept", "content": {"name": "Ann"}}})
    );
    assert_eq!(h.routes[&update["id"].as_u64().unwrap()].name.as_deref(), Some("t-1"));
    h.reply(&update, json!({"resultType": "complete"}));
    assert!(h.take_sent().is_empty(), "the next poll waits its interval");
    h.advance(Duration::from_millis(100));
    let get = h.sent_one();
    assert_eq!(get["params"], json!({"taskId": "t-1", "_meta": get["params"]["_meta"]}));
    // Not yet taken in on the server: the same key again is not asked again.
    h.reply(&get, input);
    assert!(h.events().iter().all(|e| !e.starts_with("asks")));
    h.advance(Duration::from_millis(100));
    let get = h.sent_one();
    assert_eq!(get["method"], "tasks/get");
    let mut done = modern_task("complete", "completed", json!(100));
    done["result"] = json!({"content": [{"type": "text", "text": "hi Ann"}]});
    h.reply(&get, done);
    assert!(h.events().last().unwrap().starts_with(&format!("done {}", call.get())));
}

/// A modern server, ready, whose client answers form elicitations (and nothing else).
fn answering_forms() -> Harness {
    let answers =
        crate::config::ServerRequestKinds { elicitation_form: true, ..Default::default() };
    Harness::ready_with(Config { answers, ..Config::default() })
}

/// A form elicitation by `method` asking `message`, as a task's input request.
fn form_ask(method: &str, message: &str) -> Value {
    json!({"method": method, "params": {"mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": {"v": {"type": "string"}}}}})
}

/// The input requests the host was asked since the last look, with their params.
fn asked(h: &mut Harness) -> Vec<(ServerRequestId, String)> {
    let mut out = Vec::new();
    while let Some(e) = h.engine.poll_event() {
        if let Event::ServerRequest { request, params, .. } = e {
            out.push((request, params.to_owned()));
        }
    }
    out
}

/// A task waiting on the server for input it will not get ends with `tasks/cancel`, as a
/// cancel by the host does: when the host rejects the input request, and when the request
/// cannot be asked at all (here one of a kind the client did not declare). Both ended the
/// call locally and left the task in `input_required` for nobody.
#[test]
fn a_task_whose_input_will_not_come_is_cancelled() {
    for undeclared in [false, true] {
        let mut h = answering_forms();
        let call = task_call(&mut h, &prefer(), 100);
        h.advance(Duration::from_millis(100));
        let get = h.sent_one();
        let method = if undeclared { "sampling/createMessage" } else { "elicitation/create" };
        let mut input = modern_task("complete", "input_required", json!(100));
        input["inputRequests"] = json!({"name": form_ask(method, "Your name?")});
        h.reply(&get, input);
        if !undeclared {
            let asks = asked(&mut h);
            assert_eq!(asks.len(), 1, "the task's input request reaches the host");
            h.engine.reject(h.now, asks[0].0).unwrap();
        }
        let cancel = h.sent_one();
        assert_eq!(cancel["method"], "tasks/cancel", "undeclared: {undeclared}");
        assert_eq!(cancel["params"]["taskId"], "t-1");
        let failed = format!("failed {}", call.get());
        assert!(h.events().iter().any(|e| e.starts_with(&failed)), "undeclared: {undeclared}");
    }
}

/// A task that lists an answered key beside a new one (the server has not taken the answer in
/// yet) asks the host for the new key alone: every key the list held was asked again, and
/// the host was prompted twice for the same input.
#[test]
fn a_tasks_answered_key_is_not_asked_again_beside_a_new_one() {
    let mut h = answering_forms();
    task_call(&mut h, &prefer(), 100);
    let ask = |message: &str| form_ask("elicitation/create", message);
    h.advance(Duration::from_millis(100));
    let get = h.sent_one();
    let mut input = modern_task("complete", "input_required", json!(100));
    input["inputRequests"] = json!({"name": ask("Your name?")});
    h.reply(&get, input);
    let first = asked(&mut h);
    assert_eq!(first.len(), 1);
    h.engine
        .answer(h.now, first[0].0, raw(r#"{"action":"accept","content":{"v":"Ann"}}"#))
        .unwrap();
    let update = h.sent_one();
    assert_eq!(update["method"], "tasks/update");
    h.reply(&update, json!({"resultType": "complete"}));
    h.advance(Duration::from_millis(100));
    let get = h.sent_one();
    let mut input = modern_task("complete", "input_required", json!(100));
    input["inputRequests"] = json!({"name": ask("Your name?"), "age": ask("Your age?")});
    h.reply(&get, input);
    let second = asked(&mut h);
    assert_eq!(second.len(), 1, "{second:?}");
    assert!(second[0].1.contains("Your age?"), "{second:?}");
    h.engine.answer(h.now, second[0].0, raw(r#"{"action":"accept","content":{"v":"7"}}"#)).unwrap();
    let update = h.sent_one();
    assert_eq!(
        update["params"]["inputResponses"],
        json!({"age": {"action": "accept", "content": {"v": "7"}}})
    );
}
