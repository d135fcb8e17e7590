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
