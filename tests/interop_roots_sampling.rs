//! Roots the host sets and sampling with tool use, against the Python SDK v2 peer
//! (`tests/peers/py_server.py`): on 2025-11-25 the peer counts the
//! `notifications/roots/list_changed` it receives (`roots_changes_seen`), and its `roots` tool
//! gets the list the host set without the host being asked; its `sample_tools` tool samples with
//! a `get_weather` tool offered and returns the tool use the host's "model" chose, in both eras.
//! The TypeScript SDK v2 peer (`tests/peers/ts2_server.mjs`) has the same `sample_tools`, asked
//! as an `input_required` round on 2026-07-28, over stdio and HTTP.

mod common;

use std::time::{Duration, Instant};

use common::*;
use mcpoll::{
    CallOptions, Config, Era, EraPreference, Event, Host, HttpOptions, RootsBoundary, ServerId,
    ServerRequestKind, ServerRequestKinds,
};

fn config(era: EraPreference) -> Config {
    let answers = ServerRequestKinds {
        roots_list_changed: true,
        sampling_tools: true,
        ..ServerRequestKinds::all()
    };
    Config { era, answers, ..Config::default() }
}

/// Calls `tool`, answering sampling requests with a `get_weather` tool use; returns the text
/// and the kinds the host was asked.
fn call_answering(host: &mut Host, id: ServerId, tool: &str) -> (String, Vec<ServerRequestKind>) {
    let call = host.call_tool(id, tool, &raw("{}"), &CallOptions::default()).unwrap();
    let deadline = Instant::now() + common::PATIENCE;
    let mut asked = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "{tool}: no end; asked {asked:?}");
        let mut todo = Vec::new();
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::ServerRequest { request, kind, params, .. } => {
                    asked.push(kind);
                    let params: serde_json::Value = serde_json::from_str(params).unwrap();
                    todo.push((request, kind, params));
                }
                Event::CallDone { call: c, result, .. } if c == call => {
                    let v: serde_json::Value = serde_json::from_str(result.json()).unwrap();
                    let text = v["content"][0]["text"].as_str().unwrap_or_default().to_owned();
                    return (text, asked);
                }
                Event::CallFailed { call: c, error, .. } if c == call => {
                    panic!("{tool} failed: {error}; stderr {:?}", host.stderr_tail(id))
                }
                _ => {}
            }
        }
        for (request, kind, params) in todo {
            assert_eq!(kind, ServerRequestKind::Sampling, "only sampling reaches the host");
            assert_eq!(params["tools"][0]["name"], "get_weather", "the host sees the tools");
            assert_eq!(params["toolChoice"]["mode"], "auto");
            // A use of a tool that was not offered is refused locally first.
            let rogue = r#"{"role":"assistant","model":"m","stopReason":"toolUse","content":[{"type":"tool_use","id":"t1","name":"rm","input":{}}]}"#;
            assert!(host.answer(id, request, &raw(rogue)).is_err());
            let answer = r#"{"role":"assistant","model":"m","stopReason":"toolUse","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Oslo"}}]}"#;
            host.answer(id, request, &raw(answer)).unwrap();
        }
        host.poll(Some(Duration::from_millis(50))).unwrap();
    }
}

fn text_of(host: &mut Host, id: ServerId, tool: &str) -> String {
    let r = host.call_tool_blocking(id, tool, &raw("{}"), &CallOptions::default()).unwrap();
    parse(&r)["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// The peer's count of roots notifications, once it reaches `want` (notifications and calls
/// are handled concurrently by the SDK, so the count may trail the call by a moment).
fn wait_for_changes(host: &mut Host, id: ServerId, want: u32) {
    let deadline = Instant::now() + common::PATIENCE;
    loop {
        let seen: u32 = text_of(host, id, "roots_changes_seen").parse().unwrap();
        if seen == want {
            return;
        }
        assert!(seen < want, "more notifications than changes: {seen} > {want}");
        assert!(Instant::now() < deadline, "the peer saw {seen} of {want} roots changes");
        host.poll(Some(Duration::from_millis(50))).unwrap();
    }
}

/// `tag` keeps the directories of tests running at once apart.
fn roots_scenario(host: &mut Host, id: ServerId, tag: &str) {
    assert_eq!(host.era(id), Some(Era::Legacy));
    let here = std::env::temp_dir().canonicalize().unwrap();
    let a = here.join(format!("mcpoll-roots-{tag}-a-{}", std::process::id()));
    let b = here.join(format!("mcpoll-roots-{tag}-b-{}", std::process::id()));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    host.set_roots_boundary(id, RootsBoundary::new([here.to_str().unwrap()]).unwrap()).unwrap();
    let list = |dirs: &[&std::path::Path]| {
        let roots: Vec<String> =
            dirs.iter().map(|d| format!(r#"{{"uri":"file://{}"}}"#, d.display())).collect();
        raw(&format!(r#"{{"roots":[{}]}}"#, roots.join(",")))
    };
    host.set_roots(id, &list(&[&a])).unwrap();
    wait_for_changes(host, id, 1);
    host.set_roots(id, &list(&[&a])).unwrap();
    host.set_roots(id, &list(&[&a, &b])).unwrap();
    wait_for_changes(host, id, 2);
    // Outside the boundary: refused, nothing announced.
    assert!(host.set_roots(id, &raw(r#"{"roots":[{"uri":"file:///etc"}]}"#)).is_err());
    wait_for_changes(host, id, 2);
    // The peer's roots/list is answered by the engine from the list set.
    let (text, asked) = call_answering(host, id, "roots");
    assert_eq!(text, format!("file://{},file://{}", a.display(), b.display()));
    assert!(asked.is_empty(), "the host was not asked: {asked:?}");
    let _ = (std::fs::remove_dir(&a), std::fs::remove_dir(&b));
}

/// `expected`: the peer's report of the tool use (each SDK prints the input its own way).
fn sampling_scenario_with(host: &mut Host, id: ServerId, expected: &str) {
    let (text, asked) = call_answering(host, id, "sample_tools");
    assert_eq!(text, expected);
    assert_eq!(asked, [ServerRequestKind::Sampling]);
}

fn sampling_scenario(host: &mut Host, id: ServerId) {
    sampling_scenario_with(host, id, r#"get_weather {"city": "Oslo"} stop=toolUse"#);
}

const TS2_TOOL_USE: &str = r#"get_weather {"city":"Oslo"} stop=toolUse"#;

#[test]
fn typescript_sdk_v2_stdio_samples_with_tools_in_an_input_round() {
    let Some(dir) = peers_dir() else { return };
    let mut host = Host::new().unwrap();
    let cmd = mcpoll::StdioCommand::new(dir.join("run-ts2-stdio.sh"));
    let id = start(&mut host, cmd, config(EraPreference::ModernOnly));
    assert_eq!(host.era(id), Some(Era::Modern));
    sampling_scenario_with(&mut host, id, TS2_TOOL_USE);
}

#[test]
fn typescript_sdk_v2_http_samples_with_tools_in_an_input_round() {
    init_log();
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, "run-ts2-http.sh");
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(peer.url()), config(EraPreference::ModernOnly));
    let id = id.unwrap();
    host.wait_ready(id, common::PATIENCE).unwrap();
    assert_eq!(host.era(id), Some(Era::Modern));
    sampling_scenario_with(&mut host, id, TS2_TOOL_USE);
}

#[test]
fn python_sdk_v2_stdio_legacy_sees_roots_list_changed() {
    let Some(dir) = peers_dir() else { return };
    let mut host = Host::new().unwrap();
    let cmd = mcpoll::StdioCommand::new(dir.join("run-py-stdio.sh"));
    let id = start(&mut host, cmd, config(EraPreference::LegacyOnly));
    roots_scenario(&mut host, id, "stdio");
    sampling_scenario(&mut host, id);
}

#[test]
fn python_sdk_v2_http_legacy_sees_roots_list_changed() {
    init_log();
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, "run-py-http.sh");
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(peer.url()), config(EraPreference::LegacyOnly));
    let id = id.unwrap();
    host.wait_ready(id, common::PATIENCE).unwrap();
    roots_scenario(&mut host, id, "http");
    sampling_scenario(&mut host, id);
}

#[test]
fn python_sdk_v2_stdio_modern_samples_with_tools() {
    let Some(dir) = peers_dir() else { return };
    let mut host = Host::new().unwrap();
    let cmd = mcpoll::StdioCommand::new(dir.join("run-py-stdio.sh"));
    let id = start(&mut host, cmd, config(EraPreference::ModernOnly));
    assert_eq!(host.era(id), Some(Era::Modern));
    sampling_scenario(&mut host, id);
}
