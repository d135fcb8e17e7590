//! The API a host writes against (issue 24), through the public API only: tool arguments as
//! text and the empty-arguments shortcut; the queue behind the two throughput knobs
//! (`Config::max_in_flight`, `HttpOptions::max_connections`) in `Stats` and the call records;
//! starting the next call from inside the drain (`Host::drain`), counted by the allocator.

mod common;

use std::time::{Duration, Instant};

use common::counting::{allocs, snapshot, Counting};
use common::{demo_server, raw, start};
use mcpoll::{
    BlockingError, CallId, CallOptions, Config, Event, Host, HttpOptions, RequestError, ServerState,
};

#[global_allocator]
static GLOBAL: Counting = Counting;

// ----- 5. arguments as text --------------------------------------------------------------------

#[test]
fn tool_arguments_as_text_are_checked_once_and_sent_as_they_are() {
    let mut host = Host::new().unwrap();
    let server = start(&mut host, demo_server(), Config::default());
    let opts = CallOptions::default();

    // Nested values and whitespace around the object: no RawValue, no serde_json in sight.
    let args = " \n{\"text\":\"hi\",\"extra\":{\"n\":[1,{\"m\":null}]}}\t";
    let result = host.call_tool_json_blocking(server, "echo", args, &opts).unwrap();
    assert!(result.json.contains("\"hi\""), "{}", result.json);
    assert!(!result.is_error);

    // The empty-arguments shortcut: `fail` takes none and answers isError.
    let call = host.call_tool_no_args(server, "fail", &opts).unwrap();
    let result = host.wait(server, call).unwrap();
    assert!(result.is_error, "{}", result.json);

    // Refused before anything is sent, each with its own reason.
    let before = host.pending(server).unwrap();
    for (text, expected) in [
        (r#"{"text":"#, RequestError::ArgumentsNotJson),
        (r#"{"text":"a"} x"#, RequestError::ArgumentsNotJson),
        ("", RequestError::ArgumentsNotJson),
        ("[1]", RequestError::ArgumentsNotObject),
        (r#""{}""#, RequestError::ArgumentsNotObject),
    ] {
        assert_eq!(host.call_tool_json(server, "echo", text, &opts), Err(expected), "{text:?}");
        match host.call_tool_json_blocking(server, "echo", text, &opts) {
            Err(BlockingError::Request(e)) => assert_eq!(e, expected, "{text:?}"),
            other => panic!("{text:?}: {other:?}"),
        }
    }
    assert_eq!(host.pending(server), Some(before));
}

/// Starting a call from text allocates no more than starting it from a `RawValue` (nothing,
/// once warm), nested arguments included: the check is one scan that builds nothing.
#[test]
fn a_call_from_text_allocates_no_more_than_one_from_a_raw_value() {
    const CALLS: u64 = 20;
    let mut host = Host::new().unwrap();
    let server = start(&mut host, demo_server(), Config::default());
    let opts = CallOptions::default();
    let text = r#"{"text":"hi","extra":{"n":[1,{"m":[true,false]}],"o":{"p":{"q":"\u00e9"}}}}"#;
    let value = raw(text);
    let run = |host: &mut Host, from_text: bool| {
        let mut spent = 0;
        for _ in 0..CALLS {
            let before = allocs();
            let call = if from_text {
                host.call_tool_json(server, "echo", text, &opts).unwrap()
            } else {
                host.call_tool(server, "echo", &value, &opts).unwrap()
            };
            spent += allocs() - before;
            host.wait(server, call).unwrap();
        }
        spent
    };
    // Warm up both paths (buffers, pending table slots, the pipe's write buffer).
    run(&mut host, true);
    run(&mut host, false);
    let from_raw = run(&mut host, false);
    let from_text = run(&mut host, true);
    eprintln!(
        "allocations to start {CALLS} calls: from text {from_text}, from RawValue {from_raw}"
    );
    assert!(from_text <= from_raw, "text {from_text} > RawValue {from_raw}");
    assert_eq!(from_text, 0, "starting a warm call from text allocated");
}

// ----- 4. the queue behind the throughput knobs -------------------------------------------------

/// Four 300 ms calls through `max_in_flight: 2` and one connection: `Stats::queued` counts the
/// two behind the in-flight limit and the one written but waiting for the connection; each
/// call's record and `Stats::queue_wait` carry the wait, which is never counted as network
/// time. Lower bounds only: the server serves the one connection in order, so the n-th call
/// waits at least (n - 1) x 300 ms however slow the machine.
#[test]
fn the_queue_behind_both_knobs_shows_in_stats_and_records() {
    let demo = common::HttpDemo::start(&[]);
    let mut host = Host::new().unwrap();
    let config = Config { max_in_flight: 2, ..Config::default() };
    let opts = HttpOptions::new(demo.url.clone()).max_connections(1);
    let server = host.add_http_server(opts, config).unwrap();
    let state = host.wait_ready(server, Duration::from_secs(30)).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{state}");
    let before = host.stats(server).unwrap();
    assert_eq!(before.queued, 0);
    let calls: Vec<CallId> = (0..4)
        .map(|_| host.call_tool_json(server, "slow", r#"{"ms":300}"#, &Default::default()).unwrap())
        .collect();
    // Two behind the in-flight limit, one written and waiting for the connection.
    assert_eq!(host.stats(server).unwrap().queued, 3);
    let mut records = vec![None; calls.len()];
    let deadline = Instant::now() + Duration::from_secs(60);
    while records.iter().any(Option::is_none) {
        assert!(Instant::now() < deadline, "calls did not end: {records:?}");
        host.poll(Some(Duration::from_millis(50))).unwrap();
        while let Some((_, event)) = host.poll_event() {
            if let Event::CallDone { call, .. } = &event {
                let r = event.record().expect("a record");
                let i = calls.iter().position(|c| c == call).expect("one of ours");
                records[i] = Some((r.queue_wait, r.network, r.elapsed));
            }
        }
    }
    let step = Duration::from_millis(300);
    let mut total = Duration::ZERO;
    for (n, r) in records.iter().enumerate() {
        let (queue_wait, network, elapsed) = r.unwrap();
        assert!(queue_wait >= step * n as u32, "call {n}: waited {queue_wait:?}");
        assert!(network >= step, "call {n}: network {network:?}");
        assert!(
            queue_wait + network <= elapsed,
            "call {n}: {queue_wait:?} + {network:?} > {elapsed:?}"
        );
        total += queue_wait;
    }
    let after = host.stats(server).unwrap();
    assert_eq!(after.queued, 0);
    assert!(after.queue_wait - before.queue_wait >= total, "{:?} < {total:?}", after.queue_wait);
}

// ----- 6. starting the next call while draining -------------------------------------------------

/// A loop that keeps `IN_FLIGHT` calls in flight, starting each next call from inside the
/// drain that sees one end (`Host::drain` hands out `Commands` with the event), allocates
/// nothing per call once warm: the event's text is copied into one buffer the host reuses.
#[test]
fn the_drain_starts_the_next_call_without_an_allocation_per_call() {
    const IN_FLIGHT: usize = 8;
    const WARM: u64 = 2_000;
    const CALLS: u64 = 10_000;
    let mut host = Host::new().unwrap();
    let server = start(&mut host, demo_server(), Config::default());
    let opts = CallOptions::default();
    let args = r#"{"text":"ping"}"#;
    let mut done = 0u64;
    let mut started = 0u64;
    let mut failed = 0u64;
    let mut measured = None;
    for _ in 0..IN_FLIGHT {
        host.call_tool_json(server, "echo", args, &opts).unwrap();
        started += 1;
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    while done < WARM + CALLS {
        assert!(Instant::now() < deadline, "{done} calls done in time");
        host.poll(Some(Duration::from_millis(100))).unwrap();
        host.drain(|commands, id, event| {
            let ended = match event {
                Event::CallDone { result, .. } => {
                    assert!(result.json().contains("ping"));
                    true
                }
                Event::CallFailed { .. } => {
                    failed += 1;
                    true
                }
                _ => false,
            };
            if ended {
                done += 1;
                if started < WARM + CALLS {
                    commands.call_tool_json(id, "echo", args, &opts).unwrap();
                    started += 1;
                }
            }
        });
        if measured.is_none() && done >= WARM {
            measured = Some((done, snapshot()));
        }
    }
    let (from, (live_before, allocs_before)) = measured.unwrap();
    let (live_after, allocs_after) = snapshot();
    let calls = done - from;
    let per_call = (allocs_after - allocs_before) as f64 / calls as f64;
    eprintln!(
        "{calls} calls kept {IN_FLIGHT} in flight from the drain: {} allocations \
         ({per_call:.4} per call), live heap {live_before} -> {live_after}",
        allocs_after - allocs_before
    );
    assert_eq!(failed, 0);
    assert_eq!(host.pending(server), Some(0), "every call ended");
    assert_eq!(allocs_after, allocs_before, "allocations while draining and starting calls");
}

/// A call started from inside the drain gets the local authorization any call gets: a policy
/// that refuses it ends it unsent, with the reason (it used to go out unasked).
#[test]
fn a_call_started_in_the_drain_is_decided_by_the_policy() {
    use mcpoll::{AccessRequest, CallError, Decision, Event, LocalError};
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server(), Config::default());
    host.set_policy(|call: &AccessRequest<'_>| {
        if call.name == "add" {
            Decision::deny("no adding here")
        } else {
            Decision::Allow
        }
    });
    let first = host.call_tool_json(id, "echo", r#"{"text":"x"}"#, &CallOptions::default());
    let first = first.unwrap();
    let (mut second, mut refused, mut sent_before) = (None, None, None);
    let started = Instant::now();
    while refused.is_none() {
        assert!(started.elapsed() < common::PATIENCE, "the drained call never ended");
        host.poll(Some(Duration::from_millis(20))).unwrap();
        // Read before the drain that may start the add: everything sent until then is
        // another request's (the first poll may already bring the echo's reply).
        let sent_now = host.stats(id).unwrap().requests_sent;
        if second.is_none() {
            sent_before = Some(sent_now);
        }
        host.drain(|commands, server, event| match event {
            Event::CallDone { call, .. } if call == first => {
                let opts = CallOptions::default();
                second = Some(commands.call_tool_json(server, "add", r#"{"a":1,"b":2}"#, &opts));
            }
            Event::CallFailed { call, error, .. } if Some(Ok(call)) == second => {
                refused = Some(error.clone());
            }
            _ => {}
        });
    }
    let denied = LocalError::AuthorizationDenied("no adding here".into());
    assert_eq!(refused, Some(CallError::Local(denied)));
    assert_eq!(Some(host.stats(id).unwrap().requests_sent), sent_before, "the add was never sent");
}

// ----- removing a server -----------------------------------------------------------------------

/// A server removed with a call pending ends it with an event, under the removed handle, then
/// says it closed; the handle is no server's after. (The engine and its events were dropped:
/// the call never ended for the host, nor reached the record sink.)
#[test]
fn removing_a_server_ends_its_pending_calls_with_events() {
    let mut host = Host::new().unwrap();
    let server = start(&mut host, demo_server(), Config::default());
    while host.poll_event().is_some() {}
    let opts = CallOptions::default();
    let call = host.call_tool_json(server, "slow", r#"{"ms":60000}"#, &opts).unwrap();
    host.remove_server(server);
    assert!(host.has_events(), "the ends wait for poll_event");
    let mut seen = Vec::new();
    while let Some((id, event)) = host.poll_event() {
        assert_eq!(id, server);
        seen.push(match event {
            Event::CallFailed { call: c, .. } if c == call => "failed".to_owned(),
            Event::Closed { .. } => "closed".to_owned(),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(seen, ["failed", "closed"]);
    assert!(!host.has_events());
    assert_eq!(host.pending(server), None, "no such server");
}

/// `{:?}` of a host shows a stdio server's driver without its buffers' bytes: it printed the
/// request written and the reply read (a call's arguments and result) as lists of numbers,
/// 650 KB after one call of 100 KB and as much as `max_message_bytes` allows per buffer.
#[test]
fn debug_output_of_a_stdio_host_shows_no_call_data_and_stays_small() {
    let mut host = Host::new().unwrap();
    let id = host.add_stdio_server(common::demo_server(), Config::default()).unwrap();
    host.wait_ready(id, common::PATIENCE).unwrap();
    let args = format!(r#"{{"text":"s3cret{}"}}"#, "x".repeat(100_000));
    let done = host.call_tool_blocking(id, "echo", &raw(&args), &CallOptions::default());
    assert!(done.unwrap().json.contains("s3cret"));
    let shown = format!("{host:?}");
    let as_bytes = "s3cret".bytes().map(|b| b.to_string()).collect::<Vec<_>>().join(", ");
    assert!(!shown.contains("s3cret") && !shown.contains(&as_bytes), "call data in {shown}");
    assert!(shown.len() < 16 * 1024, "{} bytes of Debug", shown.len());
}
