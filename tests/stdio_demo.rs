//! The stdio driver and host over real pipes, against the crate's own demo server: both eras,
//! the probe's fallbacks, cancellation, crashes, junk, oversize messages and isolation.

mod common;

use std::time::Duration;

use common::*;
use mcpoll::{AddServerError, BlockingError};
use mcpoll::{
    CallError, CallOptions, Config, Era, EraPreference, Host, LocalError, Method, PeerError,
    ServerState, TransportError,
};

#[test]
fn modern_server_discover_list_call_fail() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server(), Config::default());
    assert_eq!(host.era(id), Some(Era::Modern));
    let info: serde_json::Value = serde_json::from_str(host.server_info(id).unwrap()).unwrap();
    assert_eq!(info["supportedVersions"][0], "2026-07-28");

    // The demo server pages its tools two at a time: the listing follows every cursor.
    let list = host.list_tools(id, &CallOptions::default()).unwrap();
    let tools = parse(&host.wait(id, list).unwrap());
    let names: Vec<_> =
        tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["echo", "add", "slow", "fail", "write_note"]);

    let echo = call(&mut host, id, "echo", r#"{"text":"héllo\nworld"}"#);
    assert_eq!(parse(&echo)["content"][0]["text"], "héllo\nworld");
    assert!(!echo.is_error);
    let add = call(&mut host, id, "add", r#"{"a":2,"b":3}"#);
    assert_eq!(parse(&add)["structuredContent"]["sum"], 5);
    let fail = call(&mut host, id, "fail", "{}");
    assert!(fail.is_error, "isError is a completed call");
    match call_err(&mut host, id, "no_such_tool", "{}") {
        CallError::Protocol(e) => assert_eq!(e.code, -32602),
        other => panic!("{other:?}"),
    }

    let o = CallOptions::default();
    let read = host.read_resource(id, "demo://readme", &o).unwrap();
    assert_eq!(parse(&host.wait(id, read).unwrap())["contents"][0]["text"], "mcpoll demo server");
    let prompt = host.get_prompt(id, "greet", Some(&raw(r#"{"name":"Ann"}"#)), &o).unwrap();
    assert!(host.wait(id, prompt).unwrap().json.contains("Ann"));
    let complete = host
        .complete(id, &raw(r#"{"type":"ref/prompt","name":"greet"}"#), ("name", "a"), &o)
        .unwrap();
    assert_eq!(parse(&host.wait(id, complete).unwrap())["completion"]["values"][0], "alpha");
    let resources = host.list(id, Method::ResourcesList, &o).unwrap();
    assert_eq!(parse(&host.wait(id, resources).unwrap())["resources"][0]["uri"], "demo://readme");
    assert_eq!(host.stats(id).unwrap().invalid_frames, 0);
}

#[test]
fn legacy_server_handshake_and_calls() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server().arg("--legacy-only"), Config::default());
    assert_eq!(host.era(id), Some(Era::Legacy));
    assert!(host.server_info(id).unwrap().contains("\"protocolVersion\":\"2025-11-25\""));
    assert_eq!(parse(&call(&mut host, id, "echo", r#"{"text":"x"}"#))["content"][0]["text"], "x");
    assert!(call(&mut host, id, "fail", "{}").is_error);
}

#[test]
fn probe_that_kills_the_server_leads_to_a_respawn_and_initialize() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server().arg("--exit-on-non-initialize"), Config::default());
    assert_eq!(host.era(id), Some(Era::Legacy));
    assert_eq!(
        parse(&call(&mut host, id, "add", r#"{"a":1,"b":1}"#))["structuredContent"]["sum"],
        2
    );
}

#[test]
fn silent_probe_times_out_into_legacy() {
    let mut host = Host::new().unwrap();
    let config = Config { probe_timeout: Duration::from_millis(300), ..Config::default() };
    let id = start(&mut host, demo_server().arg("--silent-discover"), config);
    assert_eq!(host.era(id), Some(Era::Legacy));
    assert_eq!(
        parse(&call(&mut host, id, "echo", r#"{"text":"late"}"#))["content"][0]["text"],
        "late"
    );
}

#[test]
fn junk_on_stdout_and_a_flood_on_stderr_do_not_stop_the_server() {
    let mut host = Host::new().unwrap();
    let cmd = demo_server().args(["--junk-stdout", "--stderr-noise", "1024"]);
    let config = Config { stderr_tail_bytes: 4096, ..Config::default() };
    let id = start(&mut host, cmd, config);
    assert_eq!(parse(&call(&mut host, id, "echo", r#"{"text":"ok"}"#))["content"][0]["text"], "ok");
    assert_eq!(
        host.stats(id).unwrap().invalid_frames,
        1,
        "the banner line was skipped and counted"
    );
    let tail = host.stderr_tail(id).unwrap();
    assert!(tail.len() <= 4096 && tail.len() > 1000, "stderr ring is bounded: {}", tail.len());
}

#[test]
fn cancel_ends_the_wait_tells_the_server_and_the_server_stops() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server(), Config::default());
    let opts = CallOptions { progress: true, ..CallOptions::default() };
    let slow = host.call_tool(id, "slow", &raw(r#"{"ms":5000}"#), &opts).unwrap();
    // Wait for the first progress event, then cancel.
    poll_until(&mut host, common::PATIENCE, |h| {
        matches!(h.poll_event(), Some((_, mcpoll::Event::Progress { .. })))
    });
    host.cancel(id, slow).unwrap();
    let events = events_until_done(&mut host, slow, Duration::from_secs(1));
    assert_eq!(events.last().unwrap(), "failed cancelled");
    poll_until(&mut host, common::PATIENCE, |h| {
        h.stderr_tail(id).unwrap().contains("[slow] cancelled")
    });
    // The server stays usable, and no late reply ever arrives for the cancelled call.
    assert_eq!(
        parse(&call(&mut host, id, "echo", r#"{"text":"after"}"#))["content"][0]["text"],
        "after"
    );
    assert_eq!(host.stats(id).unwrap().late_responses, 0);
}

#[test]
fn deadline_on_a_real_server() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server(), Config::default());
    let opts = CallOptions::timeout(Duration::from_millis(150));
    // The call would take 3 s: only its deadline can end it with DeadlineExceeded.
    let err = host.call_tool_blocking(id, "slow", &raw(r#"{"ms":3000}"#), &opts).unwrap_err();
    assert!(matches!(
        err,
        mcpoll::BlockingError::Call(CallError::Local(LocalError::DeadlineExceeded))
    ));
    poll_until(&mut host, common::PATIENCE, |h| {
        h.stderr_tail(id).unwrap().contains("[slow] cancelled")
    });
}

#[test]
fn progress_events_reach_their_call() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server(), Config::default());
    let opts = CallOptions { progress: true, ..CallOptions::default() };
    let slow = host.call_tool(id, "slow", &raw(r#"{"ms":300}"#), &opts).unwrap();
    let events = events_until_done(&mut host, slow, common::PATIENCE);
    assert_eq!(events.iter().filter(|e| e.starts_with("progress")).count(), 3, "{events:?}");
    assert!(events.last().unwrap().starts_with("done"));
}

#[test]
fn a_crash_fails_that_servers_calls_with_exit_status_and_leaves_the_other_server_alone() {
    let mut host = Host::new().unwrap();
    let crashing = start(
        &mut host,
        demo_server().args(["--crash-on", "add", "--stderr-noise", "1"]),
        Config::default(),
    );
    let healthy = start(&mut host, demo_server(), Config::default());
    let o = CallOptions::default();
    let healthy_slow = host.call_tool(healthy, "slow", &raw(r#"{"ms":400}"#), &o).unwrap();
    let doomed_slow = host.call_tool(crashing, "slow", &raw(r#"{"ms":5000}"#), &o).unwrap();
    // Neither call is known to be safe to repeat, and both may have run: delivery unknown,
    // with the exit status and the stderr tail that explain it.
    let err = call_err(&mut host, crashing, "add", r#"{"a":1,"b":2}"#);
    match &err {
        CallError::Local(LocalError::DeliveryUnknown(cause)) => match &**cause {
            TransportError::ProcessExit(exit) => {
                assert_eq!(exit.code, Some(7));
                assert!(!exit.stderr_tail.is_empty(), "the stderr tail explains the exit");
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        host.wait(crashing, doomed_slow),
        Err(mcpoll::BlockingError::Call(CallError::Local(LocalError::DeliveryUnknown(_))))
    ));
    assert!(
        host.wait(healthy, healthy_slow).unwrap().json.contains("slept"),
        "the other server's call is untouched"
    );
    assert_eq!(
        parse(&call(&mut host, healthy, "echo", r#"{"text":"still here"}"#))["content"][0]["text"],
        "still here"
    );
    // The crashed server is restarted and serves again.
    poll_until(&mut host, common::PATIENCE, |h| {
        matches!(h.state(crashing), Some(ServerState::Ready(..)))
    });
    assert_eq!(
        parse(&call(&mut host, crashing, "echo", r#"{"text":"back"}"#))["content"][0]["text"],
        "back"
    );
}

#[test]
fn oversize_reply_fails_its_call_and_the_stream_resynchronises() {
    let mut host = Host::new().unwrap();
    let config = Config { max_message_bytes: 2048, ..Config::default() };
    let id = start(&mut host, demo_server(), config);
    let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(8000));
    assert_eq!(call_err(&mut host, id, "echo", &big), CallError::Peer(PeerError::TooLarge));
    assert_eq!(
        parse(&call(&mut host, id, "echo", r#"{"text":"small"}"#))["content"][0]["text"],
        "small"
    );
    assert_eq!(host.stats(id).unwrap().too_large, 1);
}

#[test]
fn a_missing_program_is_a_clear_spawn_error() {
    let mut host = Host::new().unwrap();
    let err = host
        .add_stdio_server(mcpoll::StdioCommand::new("/nonexistent/mcp-server"), Config::default());
    match err {
        Err(AddServerError::Spawn { program, error }) => {
            assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
            assert_eq!(program, "/nonexistent/mcp-server");
        }
        other => panic!("{other:?}"),
    }
}

/// A working directory that is not there fails the spawn with the same `NotFound` as a missing
/// program: the error says which it was, so "python3: No such file or directory" does not
/// send the user looking for python3.
#[test]
fn a_missing_working_directory_is_named_in_the_spawn_error() {
    let mut host = Host::new().unwrap();
    let command = demo_server().current_dir("/nonexistent/srv");
    match host.add_stdio_server(command, Config::default()) {
        Err(AddServerError::Spawn { error, .. }) => {
            assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
            let said = error.to_string();
            assert!(said.contains("working directory /nonexistent/srv"), "{said}");
        }
        other => panic!("{other:?}"),
    }
    // A program that is missing is still said so.
    let missing = mcpoll::StdioCommand::new("/nonexistent/mcp-server").current_dir("/");
    match host.add_stdio_server(missing, Config::default()) {
        Err(AddServerError::Spawn { error, .. }) => {
            assert!(!error.to_string().contains("working directory"), "{error}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn closing_a_server_stops_its_process_and_fails_its_calls() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server(), Config::default());
    let pid = host.pid(id).unwrap();
    assert!(alive(pid));
    let slow = host.call_tool(id, "slow", &raw(r#"{"ms":5000}"#), &CallOptions::default()).unwrap();
    host.close_server(id);
    // Closing does not wait for the process: the tick reaps it (`tests/closing.rs`).
    poll_until(&mut host, common::PATIENCE, |_| !alive(pid));
    assert!(matches!(
        host.wait(id, slow),
        Err(mcpoll::BlockingError::Call(CallError::Transport(_)))
    ));
    let args = raw("{}");
    assert_eq!(
        host.call_tool(id, "echo", &args, &CallOptions::default()),
        Err(mcpoll::RequestError::Closed)
    );
}

#[test]
fn dropping_the_host_kills_its_children() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server(), Config::default());
    let pid = host.pid(id).unwrap();
    drop(host);
    assert!(!alive(pid));
}

#[test]
fn modern_only_config_refuses_a_legacy_server() {
    let mut host = Host::new().unwrap();
    let config = Config { era: EraPreference::ModernOnly, ..Config::default() };
    let id = host.add_stdio_server(demo_server().arg("--legacy-only"), config).unwrap();
    assert_eq!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Closed);
}

#[test]
fn many_concurrent_calls_out_of_order() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server(), Config::default());
    let o = CallOptions::default();
    let calls: Vec<_> = (0..20)
        .map(|i| {
            let ms = (20 - i) * 10;
            (i, host.call_tool(id, "slow", &raw(&format!(r#"{{"ms":{ms}}}"#)), &o).unwrap())
        })
        .collect();
    for (i, c) in calls {
        let r = host.wait(id, c).unwrap();
        assert!(r.json.contains(&format!("slept {} ms", (20 - i) * 10)), "{}", r.json);
    }
}

/// `Host::is_idle` is `false` while anything waits for a poll (a pending call, an undrained
/// event) and `true` once the host is through with it, so a loop that polls only when it is
/// `false` misses nothing it asked for.
#[test]
fn is_idle_until_a_call_is_made_and_again_once_it_is_done() {
    let mut host = Host::new().unwrap();
    assert!(host.is_idle(), "no servers");
    let id = start(&mut host, demo_server(), Config::default());
    while host.poll_event().is_some() {}
    assert!(host.is_idle(), "ready, nothing pending: {:?}", host.pending(id));
    let call = host.call_tool(id, "slow", &raw(r#"{"ms":100}"#), &CallOptions::default());
    let call = call.unwrap();
    assert!(!host.is_idle(), "a call is pending");
    let deadline = std::time::Instant::now() + common::PATIENCE;
    let mut done = false;
    while !done {
        assert!(std::time::Instant::now() < deadline, "the call never ended");
        if host.is_idle() {
            panic!("idle while the call is still pending");
        }
        host.poll(Some(Duration::from_millis(10))).unwrap();
        if host.pending(id) == Some(0) {
            assert!(!host.is_idle(), "its end waits for the host");
            while let Some((_, e)) = host.poll_event() {
                done |= matches!(e, mcpoll::Event::CallDone { call: c, .. } if c == call);
            }
        }
    }
    assert!(host.is_idle(), "the call ended and its event was taken");
}

/// `wait` on a call that is no longer pending (its end taken through `poll_event`), or that is
/// another server's, returns `NotPending` at once instead of polling for good.
#[test]
fn waiting_for_a_call_that_is_not_pending_returns_at_once() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server(), Config::default());
    let other = start(&mut host, demo_server(), Config::default());
    let call = host.call_tool(id, "echo", &raw(r#"{"text":"x"}"#), &CallOptions::default());
    let call = call.unwrap();
    assert!(matches!(host.wait(other, call), Err(BlockingError::NotPending)), "another's call");
    poll_until(&mut host, PATIENCE, |h| {
        let mut done = false;
        while let Some((_, e)) = h.poll_event() {
            done |= matches!(e, mcpoll::Event::CallDone { call: c, .. } if c == call);
        }
        done
    });
    assert!(matches!(host.wait(id, call), Err(BlockingError::NotPending)), "its end was taken");
}

/// With several servers, the idle ones count by what the ticks filed them as: a call on one
/// makes the host busy however many idle servers sit beside it, while it is pending through
/// polls that touch no other server, and the host is idle again once it ended.
#[test]
fn is_idle_sees_a_call_on_one_of_many_servers() {
    let mut host = Host::new().unwrap();
    let ids: Vec<_> = (0..4).map(|_| start(&mut host, demo_server(), Config::default())).collect();
    while host.poll_event().is_some() {}
    // Ticks that find nothing to do file every server as it is.
    poll_until(&mut host, PATIENCE, |h| {
        while h.poll_event().is_some() {}
        h.is_idle()
    });
    host.poll(Some(Duration::ZERO)).unwrap();
    assert!(host.is_idle(), "four servers, nothing pending");
    let call = host.call_tool(ids[2], "slow", &raw(r#"{"ms":100}"#), &CallOptions::default());
    let call = call.unwrap();
    let deadline = std::time::Instant::now() + PATIENCE;
    let mut done = false;
    while !done {
        assert!(!host.is_idle(), "idle while a call is pending");
        assert!(std::time::Instant::now() < deadline, "the call never ended");
        host.poll(Some(Duration::from_millis(10))).unwrap();
        while let Some((_, e)) = host.poll_event() {
            done |= matches!(e, mcpoll::Event::CallDone { call: c, .. } if c == call);
        }
    }
    assert!(host.is_idle(), "the call ended and its event was taken");
}
