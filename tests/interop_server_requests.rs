//! Server requests against a real SDK server (`tests/peers/py_server.py`, Python SDK v2): its
//! `ask` tool elicits a name and then a confirmation, `roots` lists the client's roots and
//! `sample` samples its model. On 2025-11-25 the SDK sends each as a JSON-RPC request mid-call;
//! on 2026-07-28 it answers `input_required` (two rounds for `ask`, the second with
//! `requestState`) and resumes on the retry. The TypeScript SDK peers have the same tools: v2
//! (`ts2_server.mjs`, `inputRequired` rounds, a legacy shim on stdio) and v1
//! (`ts1_server.mjs`, legacy only). The host answers through `Host::answer`, and the tool
//! returns what it was given. Over stdio and over HTTP, in both eras.

mod common;

use std::time::{Duration, Instant};

use common::*;
use mcpoll::{
    elicitation_defaults, CallOptions, Config, Era, EraPreference, Event, Host, HttpOptions,
    ServerId, ServerRequestKind, ServerRequestKinds,
};

fn config(era: EraPreference) -> Config {
    Config { era, answers: ServerRequestKinds::all(), ..Config::default() }
}

/// Calls `tool` and answers every server request until it ends; returns its text and the
/// kinds asked, in order, with whether each came with a call (modern) or alone (legacy).
fn call_answering(
    host: &mut Host,
    id: ServerId,
    tool: &str,
) -> (String, Vec<(ServerRequestKind, bool)>, u32) {
    let call = host.call_tool(id, tool, &raw("{}"), &CallOptions::default()).unwrap();
    let deadline = Instant::now() + common::PATIENCE;
    let mut asked = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "{tool}: no end; asked {asked:?}");
        let mut todo = Vec::new();
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::ServerRequest { request, kind, call: of, params } => {
                    asked.push((kind, of.is_some()));
                    todo.push((request, kind, params.to_owned()));
                }
                Event::CallDone { call: c, result, record } if c == call => {
                    let v: serde_json::Value = serde_json::from_str(result.json()).unwrap();
                    let text = v["content"][0]["text"].as_str().unwrap_or_default().to_owned();
                    return (text, asked, record.rounds);
                }
                Event::CallFailed { call: c, error, .. } if c == call => {
                    panic!("{tool} failed: {error}; stderr {:?}", host.stderr_tail(id))
                }
                _ => {}
            }
        }
        for (request, kind, params) in todo {
            let answer = match kind {
                ServerRequestKind::ElicitationForm => elicitation_defaults(&params).unwrap(),
                ServerRequestKind::Roots => r#"{"roots":[{"uri":"file:///srv/project-a","name":"a"}]}"#.into(),
                ServerRequestKind::Sampling => r#"{"role":"assistant","model":"m","content":{"type":"text","text":"hi from the host"}}"#.into(),
                other => panic!("unexpected {other:?}"),
            };
            host.answer(id, request, &raw(&answer)).unwrap();
        }
        host.poll(Some(Duration::from_millis(50))).unwrap();
    }
}

fn scenario(host: &mut Host, id: ServerId, era: Era) {
    assert_eq!(host.era(id), Some(era));
    let modern = era == Era::Modern;
    let form = ServerRequestKind::ElicitationForm;
    let (text, asked, rounds) = call_answering(host, id, "ask");
    assert_eq!(text, "name=Ann ok=true", "the tool got the defaults the host answered");
    assert_eq!(asked, [(form, modern), (form, modern)]);
    assert_eq!(rounds, if modern { 2 } else { 0 }, "the confirmation depends on the name");
    let (text, asked, _) = call_answering(host, id, "roots");
    assert_eq!(
        (text.as_str(), asked),
        ("file:///srv/project-a", vec![(ServerRequestKind::Roots, modern)])
    );
    let (text, asked, _) = call_answering(host, id, "sample");
    assert_eq!(
        (text.as_str(), asked),
        ("hi from the host", vec![(ServerRequestKind::Sampling, modern)])
    );
}

fn stdio(era: EraPreference, expect: Era) {
    stdio_peer("run-py-stdio.sh", era, expect);
}

fn stdio_peer(script: &str, era: EraPreference, expect: Era) {
    let Some(dir) = peers_dir() else { return };
    let mut host = Host::new().unwrap();
    let cmd = mcpoll::StdioCommand::new(dir.join(script));
    let id = start(&mut host, cmd, config(era));
    scenario(&mut host, id, expect);
}

fn http(era: EraPreference, expect: Era) {
    http_peer("run-py-http.sh", era, expect);
}

fn http_peer(script: &str, era: EraPreference, expect: Era) {
    init_log();
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, script);
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(peer.url()), config(era)).unwrap();
    host.wait_ready(id, common::PATIENCE).unwrap();
    scenario(&mut host, id, expect);
}

#[test]
fn python_sdk_v2_stdio_modern_input_rounds() {
    stdio(EraPreference::ModernOnly, Era::Modern);
}

#[test]
fn python_sdk_v2_stdio_legacy_server_requests() {
    stdio(EraPreference::LegacyOnly, Era::Legacy);
}

#[test]
fn python_sdk_v2_http_modern_input_rounds() {
    http(EraPreference::ModernOnly, Era::Modern);
}

#[test]
fn python_sdk_v2_http_legacy_server_requests() {
    http(EraPreference::LegacyOnly, Era::Legacy);
}

#[test]
fn typescript_sdk_v2_stdio_modern_input_rounds() {
    stdio_peer("run-ts2-stdio.sh", EraPreference::ModernOnly, Era::Modern);
}

#[test]
fn typescript_sdk_v2_stdio_legacy_server_requests() {
    stdio_peer("run-ts2-stdio.sh", EraPreference::LegacyOnly, Era::Legacy);
}

#[test]
fn typescript_sdk_v2_http_modern_input_rounds() {
    http_peer("run-ts2-http.sh", EraPreference::ModernOnly, Era::Modern);
}

// No TypeScript SDK v2 over legacy HTTP: its stateless per-request serving cannot send
// server-to-client requests (the tool answers "per-request legacy serving cannot receive
// server-to-client requests"), whatever the client declares.

#[test]
fn typescript_sdk_v1_stdio_legacy_server_requests() {
    stdio_peer("run-ts1-stdio.sh", EraPreference::Auto, Era::Legacy);
}

#[test]
fn typescript_sdk_v1_http_legacy_server_requests() {
    http_peer("run-ts1-http.sh", EraPreference::Auto, Era::Legacy);
}

#[test]
fn the_server_requests_example_answers_the_python_peer() {
    let Some(dir) = peers_dir() else { return };
    let out = std::process::Command::new(example("server_requests"))
        .arg(dir.join("run-py-stdio.sh"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("name=Ann ok=true"), "{stdout}");
    assert!(stdout.contains("(2 rounds)"), "{stdout}");
    assert!(stdout.contains("hello from the host"), "{stdout}");
}

// ----- answer handlers (issue 24) --------------------------------------------------------------

/// [`config`] with a probe that waits out a busy machine (several Python peers start at once
/// when the tests run in parallel).
fn patient(era: EraPreference) -> Config {
    Config { probe_timeout: Duration::from_secs(30), ..config(era) }
}

/// The host's answers, as a handler: form elicitations with the schema's defaults, a sampling
/// answer; roots only for the server that has no handler of its own.
fn host_handler(_: ServerId, kind: ServerRequestKind, params: &str) -> mcpoll::Answer {
    match kind {
        ServerRequestKind::ElicitationForm => {
            mcpoll::Answer::Result(elicitation_defaults(params).unwrap())
        }
        ServerRequestKind::Sampling => mcpoll::Answer::Result(
            r#"{"role":"assistant","model":"m","content":{"type":"text","text":"hi from a handler"}}"#
                .into(),
        ),
        ServerRequestKind::Roots => {
            mcpoll::Answer::Result(r#"{"roots":[{"uri":"file:///srv/from-host"}]}"#.into())
        }
        _ => mcpoll::Answer::Reject,
    }
}

/// Handlers answer inside `call_tool_blocking` (no loop of the host's), and the server's own
/// handler is asked before the host's (roots), passing what it does not take (the rest).
fn handlers_answer_in_the_blocking_helpers(host: &mut Host, id: ServerId) {
    host.set_answer_handler(Box::new(host_handler));
    let own = |_: ServerId, kind: ServerRequestKind, _: &str| match kind {
        ServerRequestKind::Roots => {
            mcpoll::Answer::Result(r#"{"roots":[{"uri":"file:///srv/own"}]}"#.into())
        }
        _ => mcpoll::Answer::Pass,
    };
    assert!(host.set_server_answer_handler(id, Box::new(own)));
    let opts = CallOptions { timeout: Some(Duration::from_secs(60)), ..CallOptions::default() };
    let text = |r: mcpoll::OwnedResult| {
        let v: serde_json::Value = serde_json::from_str(&r.json).unwrap();
        v["content"][0]["text"].as_str().unwrap_or_default().to_owned()
    };
    let ask = host.call_tool_no_args(id, "ask", &opts).unwrap();
    assert_eq!(text(host.wait(id, ask).unwrap()), "name=Ann ok=true");
    let roots = host.call_tool_json_blocking(id, "roots", "{}", &opts).unwrap();
    assert_eq!(text(roots), "file:///srv/own");
    let sample = host.call_tool_json_blocking(id, "sample", "{}", &opts).unwrap();
    assert_eq!(text(sample), "hi from a handler");
    // Answered requests left no events behind.
    while let Some((_, e)) = host.poll_event() {
        assert!(!matches!(e, Event::ServerRequest { .. }), "{e:?}");
    }
}

#[test]
fn answer_handlers_answer_in_the_blocking_helpers_python_stdio_both_eras() {
    let Some(dir) = peers_dir() else { return };
    for (era, expect) in
        [(EraPreference::ModernOnly, Era::Modern), (EraPreference::LegacyOnly, Era::Legacy)]
    {
        let mut host = Host::new().unwrap();
        let cmd = mcpoll::StdioCommand::new(dir.join("run-py-stdio.sh"));
        let id = start(&mut host, cmd, patient(era));
        assert_eq!(host.era(id), Some(expect));
        handlers_answer_in_the_blocking_helpers(&mut host, id);
    }
}

#[test]
fn answer_handlers_answer_in_the_blocking_helpers_typescript_v1_http_legacy() {
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, "run-ts1-http.sh");
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(peer.url()), patient(EraPreference::Auto));
    let id = id.unwrap();
    host.wait_ready(id, Duration::from_secs(20)).unwrap();
    handlers_answer_in_the_blocking_helpers(&mut host, id);
}

/// Without a handler that answers, a blocking call whose server asks ends at once with a
/// typed error, long before its 60 s deadline, and the server goes on serving: with no
/// handler at all, and with one that passes. A host with its own loop still gets the event.
#[test]
fn a_blocking_call_whose_server_asks_and_no_handler_answers_ends_at_once() {
    let Some(dir) = peers_dir() else { return };
    for era in [EraPreference::ModernOnly, EraPreference::LegacyOnly] {
        for passing in [false, true] {
            let mut host = Host::new().unwrap();
            let cmd = mcpoll::StdioCommand::new(dir.join("run-py-stdio.sh"));
            let id = start(&mut host, cmd, patient(era));
            if passing {
                host.set_answer_handler(Box::new(|_: ServerId, _: ServerRequestKind, _: &str| {
                    mcpoll::Answer::Pass
                }));
            }
            let opts =
                CallOptions { timeout: Some(Duration::from_secs(60)), ..CallOptions::default() };
            match host.call_tool_json_blocking(id, "ask", "{}", &opts) {
                Err(mcpoll::BlockingError::Call(mcpoll::CallError::Local(
                    mcpoll::LocalError::Unanswered(ServerRequestKind::ElicitationForm),
                ))) => {}
                other => panic!("{era:?} passing={passing}: {other:?}"),
            }
            let r = call(&mut host, id, "echo", r#"{"text":"still here"}"#);
            assert!(r.json.contains("still here"), "{era:?}: {}", r.json);

            // A host that drains events itself still sees the request.
            let ask = host.call_tool_no_args(id, "ask", &opts).unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            let seen = 'seen: loop {
                assert!(Instant::now() < deadline, "{era:?}: no ServerRequest event");
                host.poll(Some(Duration::from_millis(50))).unwrap();
                while let Some((_, e)) = host.poll_event() {
                    if let Event::ServerRequest { kind, .. } = e {
                        break 'seen kind;
                    }
                }
            };
            assert_eq!(seen, ServerRequestKind::ElicitationForm);
            host.cancel(id, ask).unwrap();
        }
    }
}

/// The embedded loop: the program's own `mio::Poll`, `handle_event` / `handle_timeout`, and
/// the handler answers from there; the program sees only the call's end.
#[test]
fn answer_handlers_answer_in_an_embedded_loop() {
    let Some(dir) = peers_dir() else { return };
    let mut poll = mio::Poll::new().unwrap();
    let mut events = mio::Events::with_capacity(64);
    let mut host = Host::embedded(poll.registry(), 100..200).unwrap();
    host.set_answer_handler(Box::new(host_handler));
    let cmd = mcpoll::StdioCommand::new(dir.join("run-py-stdio.sh"));
    let id = host.add_stdio_server(cmd, patient(EraPreference::ModernOnly)).unwrap();
    let call = host.call_tool_no_args(id, "ask", &CallOptions::default()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the call did not end");
        let now = Instant::now();
        let wait = host.poll_timeout().map_or(Duration::from_millis(50), |t| {
            t.saturating_duration_since(now).min(Duration::from_millis(50))
        });
        common::wait_events(&mut poll, &mut events, Some(wait));
        let now = Instant::now();
        for event in events.iter() {
            host.handle_event(event, now).unwrap();
        }
        if host.poll_timeout().is_some_and(|t| t <= now) {
            host.handle_timeout(now);
        }
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::ServerRequest { .. } => panic!("the handler should have answered"),
                Event::CallDone { call: c, result, .. } if c == call => {
                    assert!(result.json().contains("name=Ann ok=true"), "{}", result.json());
                    return;
                }
                Event::CallFailed { call: c, error, .. } if c == call => panic!("{error}"),
                _ => {}
            }
        }
    }
}
