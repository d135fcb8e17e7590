//! Interoperability over loopback Streamable HTTP with real MCP servers on the official SDKs
//! (`tests/peers/`): Python SDK v2 and TypeScript SDK v2 (modern), TypeScript SDK v1 (legacy,
//! sessions). Needs the peers (`tests/peers/setup.sh`); `MCPOLL_SKIP_PEERS=1` skips it.

mod common;

use std::time::{Duration, Instant};

use common::*;
use mcpoll::HttpOptions;
use mcpoll::{CallOptions, Config, Era, Event, Host, ServerId, SubscriptionFilter};

fn start_http(host: &mut Host, url: &str) -> ServerId {
    let id = host.add_http_server(HttpOptions::new(url), Config::default()).expect("add");
    let state = host.wait_ready(id, common::PATIENCE).expect("ready");
    assert!(matches!(state, mcpoll::ServerState::Ready(..)), "not ready: {state:?}");
    id
}

/// The common scenario: era, listing, echo, add, fail, progress, cancellation seen from the
/// server's own log.
fn scenario(script: &str, era: Era) {
    init_log();
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, script);
    let mut host = Host::new().unwrap();
    let id = start_http(&mut host, &peer.url());
    assert_eq!(host.era(id), Some(era), "{script}");

    check_lab_tools(&mut host, id, script);

    // Progress arrives on the request's own SSE stream.
    let opts = CallOptions { progress: true, ..CallOptions::default() };
    let slow = host.call_tool(id, "slow", &raw(r#"{"ms":300}"#), &opts).unwrap();
    let events = events_until_done(&mut host, slow, common::PATIENCE);
    assert!(
        events.iter().filter(|e| e.starts_with("progress")).count() >= 2,
        "{script}: {events:?}"
    );
    assert!(events.last().unwrap().starts_with("done"), "{script}: {events:?}");

    // Cancel after the first progress step; the server's log must show the work stopped.
    cancel_slow_and_check(&mut host, id, script, |_| peer.stderr());
}

#[test]
fn python_sdk_v2_http_modern() {
    scenario("run-py-http.sh", Era::Modern);
}

#[test]
fn typescript_sdk_v2_http_modern() {
    scenario("run-ts2-http.sh", Era::Modern);
}

#[test]
fn typescript_sdk_v1_http_legacy_with_session() {
    scenario("run-ts1-http.sh", Era::Legacy);
}

/// `subscriptions/listen` on a long-lived SSE stream: acknowledgement first, then the tools
/// list_changed that `bump_tools` causes.
fn listen_scenario(script: &str) {
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, script);
    let mut host = Host::new().unwrap();
    let id = start_http(&mut host, &peer.url());
    let filter = SubscriptionFilter { tools_list_changed: true, ..SubscriptionFilter::default() };
    let sub = host.listen(id, &filter, &CallOptions::default()).unwrap();
    let mut acknowledged = false;
    poll_until(&mut host, common::PATIENCE, |h| {
        if let Some((_, Event::Subscribed { call, notifications })) = h.poll_event() {
            assert_eq!(call, sub);
            assert!(notifications.contains("toolsListChanged"), "{notifications}");
            acknowledged = true;
        }
        acknowledged
    });
    bump_and_see_tools_changed(&mut host, id);
    // Ending the subscription closes its stream; the call ends as cancelled, once.
    host.cancel(id, sub).unwrap();
    let events = events_until_done(&mut host, sub, common::PATIENCE);
    assert_eq!(events.last().map(String::as_str), Some("failed cancelled"));
}

#[test]
fn python_sdk_v2_http_listen_tools_changed() {
    listen_scenario("run-py-http.sh");
}

#[test]
fn typescript_sdk_v2_http_listen_tools_changed() {
    listen_scenario("run-ts2-http.sh");
}

#[test]
fn typescript_sdk_v1_session_expiry_reinitializes_transparently() {
    let Some(dir) = peers_dir() else { return };
    let mut peer = HttpPeer::start(&dir, "run-ts1-http.sh");
    let mut host = Host::new().unwrap();
    let id = start_http(&mut host, &peer.url());
    assert_eq!(host.era(id), Some(Era::Legacy));
    let first_session = host.session_id(id).expect("ts1 issues a session").to_owned();
    assert_eq!(
        parse(&call(&mut host, id, "echo", r#"{"text":"one"}"#))["content"][0]["text"],
        "one"
    );

    // Restart the server on the same port: every session it knew is gone.
    peer.stop();
    let _restarted = HttpPeer::start_on(peer.script.clone(), peer.port);
    assert_eq!(
        parse(&call(&mut host, id, "echo", r#"{"text":"two"}"#))["content"][0]["text"],
        "two"
    );
    let second_session = host.session_id(id).expect("a new session").to_owned();
    assert_ne!(first_session, second_session);
    assert_eq!(host.stats(id).unwrap().sessions_renewed, 1);
}

#[test]
fn typescript_sdk_v1_list_changed_arrives_on_the_get_stream() {
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, "run-ts1-http.sh");
    let mut host = Host::new().unwrap();
    let id = start_http(&mut host, &peer.url());
    // Give the GET stream a moment to open, then change the tool list.
    let until = Instant::now() + Duration::from_millis(300);
    poll_until(&mut host, common::PATIENCE, |_| Instant::now() >= until);
    bump_and_see_tools_changed(&mut host, id);
}

/// The `mcpoll` command-line example lists and calls tools by URL, both eras.
#[test]
fn cli_lists_and_calls_over_http_in_both_eras() {
    let Some(dir) = peers_dir() else { return };
    let exe = cli();
    for script in ["run-py-http.sh", "run-ts1-http.sh"] {
        let peer = HttpPeer::start(&dir, script);
        // `exit`: 0, or 4 for a tool's isError result.
        let run_exiting = |args: &[&str], exit: i32| {
            let out = std::process::Command::new(&exe)
                .arg("--json")
                .arg("--http")
                .arg(peer.url())
                .args(args)
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(exit),
                "{script} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
        };
        let run = |args: &[&str]| run_exiting(args, 0);
        let tools = run(&["tools"]);
        assert!(tools["tools"].as_array().unwrap().iter().any(|t| t["name"] == "echo"), "{script}");
        let sum = run(&["call", "add", r#"{"a":20,"b":22}"#]);
        assert_eq!(sum["structuredContent"]["sum"].as_f64(), Some(42.0), "{script}");
        let fail = run_exiting(&["call", "fail"], 4);
        assert_eq!(fail["isError"], true, "{script}");
    }
}

/// The status of a `ping` POSTed in `session` on a connection of its own.
fn ping_in_session(peer: &HttpPeer, session: &str) -> u16 {
    use std::io::{Read, Write};
    let body = r#"{"jsonrpc":"2.0","id":"probe","method":"ping"}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n\
         MCP-Protocol-Version: 2025-11-25\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        peer.port,
        body.len()
    );
    let mut s = std::net::TcpStream::connect(("127.0.0.1", peer.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    std::str::from_utf8(&head[9..12]).unwrap().parse().unwrap()
}

/// Closing a server with a legacy session ends it at the SDK's server: the `DELETE` gets
/// there (the session id is refused afterwards, as the SDK refuses an unknown one), and the
/// close itself returned at once.
fn closing_ends_the_session(script: &str) {
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, script);
    let mut host = Host::new().unwrap();
    let config = Config { era: mcpoll::EraPreference::LegacyOnly, ..Config::default() };
    let id = host.add_http_server(HttpOptions::new(peer.url()), config).expect("add");
    let state = host.wait_ready(id, common::PATIENCE).expect("ready");
    assert!(matches!(state, mcpoll::ServerState::Ready(Era::Legacy, _)), "{script}: {state:?}");
    let session = host.session_id(id).expect("a legacy session").to_owned();
    assert_eq!(ping_in_session(&peer, &session), 200, "{script}: the session works");
    // That the close returns at once, before the DELETE is answered, is checked against a
    // server that never answers (http_transport.rs); here, that the session really ends.
    host.close_server(id);
    poll_until(&mut host, common::PATIENCE, |h| h.poll_timeout().is_none());
    let status = ping_in_session(&peer, &session);
    assert!(matches!(status, 400 | 404), "{script}: the session outlived the close: {status}");
}

#[test]
fn typescript_sdk_v1_http_closing_ends_the_session_with_delete() {
    closing_ends_the_session("run-ts1-http.sh");
}

#[test]
fn python_sdk_v2_http_legacy_closing_ends_the_session_with_delete() {
    closing_ends_the_session("run-py-http.sh");
}
