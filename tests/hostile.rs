//! Hostile HTTP servers (issue 21): floods of input that delivers no message (empty SSE events,
//! comments, interim 1xx heads) cannot hold the host's loop. Each server here is a raw
//! loopback socket scripted by the test, not an MCP implementation.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

mod common;

use common::raw;
use mcpoll::{
    BlockingError, CallError, CallOptions, Config, Event, Host, HttpOptions, LocalError,
    ServerState, TransportError,
};

/// What the server does with a `tools/call`.
#[derive(Clone, Copy)]
enum OnCall {
    /// An event stream of comments, empty events and `id:`-only events, `limit` bytes, then
    /// silence (the connection stays open).
    Sse { limit: u64 },
    /// `103 Early Hints` heads, `limit` bytes, then silence.
    Interim { limit: u64 },
    /// Nothing at all.
    Silent,
    /// The answer, and in the same write a second response nobody asked for (a forged answer
    /// to the same call).
    Stowaway,
}

/// A server that answers `server/discover` and floods each `tools/call` as `on_call` says.
/// `flooded` counts the flood bytes written; `started` gets a message once the first flood
/// write (16 KiB at least) returned.
struct Flooder {
    url: String,
    flooded: Arc<AtomicU64>,
    started: mpsc::Receiver<()>,
    /// Connections accepted.
    connections: Arc<AtomicU64>,
}

fn flooder(on_call: OnCall) -> Flooder {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let flooded = Arc::new(AtomicU64::new(0));
    let (tx, started) = mpsc::channel();
    let counter = Arc::clone(&flooded);
    let connections = Arc::new(AtomicU64::new(0));
    let accepted = Arc::clone(&connections);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            accepted.fetch_add(1, Ordering::Relaxed);
            let (counter, tx) = (Arc::clone(&counter), tx.clone());
            std::thread::spawn(move || serve(stream, on_call, &counter, &tx));
        }
    });
    Flooder { url, flooded, started, connections }
}

/// One request: its body, or `None` when the client closed.
fn read_request(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    stream.read_exact(&mut body).ok()?;
    Some(String::from_utf8_lossy(&body).into_owned())
}

fn serve(mut stream: TcpStream, on_call: OnCall, flooded: &AtomicU64, started: &mpsc::Sender<()>) {
    while let Some(body) = read_request(&mut stream) {
        let msg: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let id = msg["id"].clone();
        match msg["method"].as_str() {
            Some("server/discover") => {
                let reply = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {
                    "resultType": "complete", "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private"}})
                .to_string();
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                    reply.len()
                );
                if stream.write_all(format!("{head}{reply}").as_bytes()).is_err() {
                    return;
                }
            }
            Some("tools/call") if matches!(on_call, OnCall::Stowaway) => {
                let response = |text: &str| {
                    let result = serde_json::json!({"resultType": "complete",
                        "content": [{"type": "text", "text": text}]});
                    let reply = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result})
                        .to_string();
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                         Content-Length: {}\r\n\r\n{reply}",
                        reply.len()
                    )
                };
                let both = response("genuine") + &response("forged");
                if stream.write_all(both.as_bytes()).is_err() {
                    return;
                }
            }
            Some("tools/call") => {
                let (mut chunk, limit) = match on_call {
                    OnCall::Sse { limit } => (
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n".to_vec(),
                        limit,
                    ),
                    OnCall::Interim { limit } => (Vec::new(), limit),
                    OnCall::Silent | OnCall::Stowaway => (Vec::new(), 0),
                };
                let unit: &[u8] = match on_call {
                    OnCall::Sse { .. } => b": keep-alive\n\n\nid: 7\n\n",
                    _ => b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n",
                };
                while chunk.len() < 16 * 1024 {
                    chunk.extend_from_slice(unit);
                }
                let mut first = true;
                while limit > 0 && flooded.load(Ordering::Relaxed) < limit {
                    if stream.write_all(&chunk).is_err() {
                        return;
                    }
                    flooded.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    if first {
                        first = false;
                        let _ = started.send(());
                        // The head goes once; the rest is units only.
                        chunk.clear();
                        while chunk.len() < 16 * 1024 {
                            chunk.extend_from_slice(unit);
                        }
                    }
                }
                // Silence, the connection held open, until the client goes.
                let mut sink = [0u8; 1024];
                while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
                return;
            }
            _ => {
                if stream.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n").is_err()
                {
                    return;
                }
            }
        }
    }
}

/// A budget small enough that one flood write (16 KiB) is more than one turn may take.
fn small_budget() -> Config {
    Config { bytes_per_readiness: 4096, ..Config::default() }
}

/// One readiness event over a connection holding more flood than the byte budget: the host's
/// handle_event returns with input left, says so through `poll_timeout` (due at once), and
/// counts the stop; the next ticks take the rest a budget at a time. Before the budget, one
/// handle_event read until the socket was empty, however long the server kept it full.
#[test]
fn a_flood_of_empty_sse_events_is_read_one_budget_per_readiness_event() {
    let server = flooder(OnCall::Sse { limit: 64 << 20 });
    let mut poll = mio::Poll::new().unwrap();
    let mut host = Host::embedded(poll.registry(), 0..1000).unwrap();
    let id = host.add_http_server(HttpOptions::new(&server.url), small_budget()).unwrap();
    let mut events = mio::Events::with_capacity(64);
    let limit = Instant::now() + Duration::from_secs(60);
    let mut step =
        |host: &mut Host, poll: &mut mio::Poll, check: &mut dyn FnMut(&Host, Instant)| {
            assert!(Instant::now() < limit, "no progress within 60 s");
            let now = Instant::now();
            let wait = host.poll_timeout().map_or(Duration::from_millis(100), |t| {
                t.saturating_duration_since(now).min(Duration::from_millis(100))
            });
            common::wait_events(poll, &mut events, Some(wait));
            let now = Instant::now();
            for e in events.iter() {
                host.handle_event(e, now).unwrap();
                check(host, now);
            }
            if host.poll_timeout().is_some_and(|t| t <= now) {
                host.handle_timeout(now);
            }
        };
    while !matches!(host.state(id), Some(ServerState::Ready(..))) {
        step(&mut host, &mut poll, &mut |_, _| {});
    }
    let call =
        host.call_tool(id, "flood", &raw("{}"), &CallOptions::timeout(Duration::from_secs(60)));
    let call = call.unwrap();
    server.started.recv_timeout(Duration::from_secs(60)).expect("the flood started");
    // From here on the socket holds at least 16 KiB: the next readiness event cannot take it
    // all.
    let mut cut_short = 0;
    while cut_short == 0 {
        step(&mut host, &mut poll, &mut |host, now| {
            let yields = host.stats(id).unwrap().input_yields;
            if yields > 0 && cut_short == 0 {
                cut_short = yields;
                let due = host.poll_timeout().expect("a deadline");
                assert!(due <= now, "input left over, but poll_timeout is {:?} away", due - now);
            }
        });
    }
    // The flood goes on a budget at a time; the call waits, nothing is delivered.
    let before = server.flooded.load(Ordering::Relaxed);
    while server.flooded.load(Ordering::Relaxed) < before + (1 << 20) {
        step(&mut host, &mut poll, &mut |_, _| {});
    }
    let stats = host.stats(id).unwrap();
    assert!(stats.input_yields > cut_short, "{stats:?}");
    while let Some((_, event)) = host.poll_event() {
        assert!(!matches!(event, Event::CallDone { .. } | Event::CallFailed { .. }), "{event:?}");
    }
    host.cancel(id, call).unwrap();
}

/// While one server floods its call's event stream, a call to another server that never
/// answers ends at its deadline, and so does the flooded call itself.
#[test]
fn deadlines_fire_while_a_server_floods() {
    // Far more than the quiet call's second lets a budgeted host read; a host that read
    // until the socket was empty would read all of it before that call's deadline fired.
    const FLOOD: u64 = 4 << 30;
    let flood = flooder(OnCall::Sse { limit: FLOOD });
    let silent = flooder(OnCall::Silent);
    let mut host = Host::new().unwrap();
    let a = host.add_http_server(HttpOptions::new(&flood.url), small_budget()).unwrap();
    let b = host.add_http_server(HttpOptions::new(&silent.url), Config::default()).unwrap();
    for id in [a, b] {
        let state = host.wait_ready(id, Duration::from_secs(30)).unwrap();
        assert!(matches!(state, ServerState::Ready(..)), "{state:?}");
    }
    let args = raw("{}");
    let flooded_call =
        host.call_tool(a, "flood", &args, &CallOptions::timeout(Duration::from_secs(3)));
    let flooded_call = flooded_call.unwrap();
    flood.started.recv_timeout(Duration::from_secs(60)).expect("the flood started");
    let quiet_call =
        host.call_tool(b, "wait", &args, &CallOptions::timeout(Duration::from_secs(1)));
    let quiet_call = quiet_call.unwrap();
    let limit = Instant::now() + Duration::from_secs(60);
    let (mut quiet_end, mut flooded_end) = (None, None);
    while quiet_end.is_none() || flooded_end.is_none() {
        assert!(Instant::now() < limit, "no deadline fired within 60 s");
        host.poll(Some(Duration::from_millis(100))).unwrap();
        while let Some((server, event)) = host.poll_event() {
            if let Event::CallFailed { call, error, .. } = event {
                if (server, call) == (b, quiet_call) {
                    quiet_end = Some((error, flood.flooded.load(Ordering::Relaxed)));
                } else if (server, call) == (a, flooded_call) {
                    flooded_end = Some(error);
                }
            }
        }
    }
    let (quiet_error, flooded_then) = quiet_end.unwrap();
    assert_eq!(quiet_error, CallError::Local(LocalError::DeadlineExceeded));
    assert_eq!(flooded_end.unwrap(), CallError::Local(LocalError::DeadlineExceeded));
    assert!(
        (16 * 1024..FLOOD).contains(&flooded_then),
        "the flood was going when the quiet call ended ({flooded_then} bytes)"
    );
    assert!(host.stats(a).unwrap().input_yields > 0, "{:?}", host.stats(a));
}

/// A server answering with interim heads without end: the response fails as malformed after
/// a bounded number of them, long before the call's deadline. Before, the parser skipped
/// them for as long as they came, and the call waited out its deadline.
#[test]
fn an_endless_run_of_interim_heads_fails_the_call() {
    let server = flooder(OnCall::Interim { limit: 4 << 20 });
    let mut host = Host::new().unwrap();
    let config = Config::default();
    let id = host.add_http_server(HttpOptions::new(&server.url), config).unwrap();
    let state = host.wait_ready(id, Duration::from_secs(30)).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{state:?}");
    let opts = CallOptions::timeout(Duration::from_secs(50));
    let error = host.call_tool_blocking(id, "flood", &raw("{}"), &opts).unwrap_err();
    // A write (no idempotency said) whose response broke: its delivery is unknown, and the
    // broken response is why.
    let BlockingError::Call(CallError::Local(LocalError::DeliveryUnknown(why))) = error else {
        panic!("{error:?}")
    };
    assert_eq!(*why, TransportError::BadResponse);
}

/// A response nobody asked for, after the answer on a keep-alive connection: the connection
/// is out of step with its requests, so it is closed rather than kept, and the next call goes
/// on a new one and gets its own answer, not the forged one left in the buffer.
#[test]
fn bytes_after_an_answer_close_the_connection_rather_than_answer_the_next_call() {
    let server = flooder(OnCall::Stowaway);
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(&server.url), Config::default()).unwrap();
    let state = host.wait_ready(id, Duration::from_secs(30)).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{state:?}");
    let opts = CallOptions::timeout(Duration::from_secs(30));
    let before = server.connections.load(Ordering::Relaxed);
    for n in 0..3 {
        let result = host.call_tool_blocking(id, "echo", &raw("{}"), &opts).unwrap();
        let text = &common::parse(&result)["content"][0]["text"];
        assert_eq!(text, "genuine", "call {n}");
    }
    // Each answer came with a stowaway, so each call after the first had a new connection.
    let connections = server.connections.load(Ordering::Relaxed) - before;
    assert_eq!(connections, 2, "{connections} new connections for 3 calls");
}

/// Issue 21: a bearer token with a line break (or NUL) would break the request head or add a
/// header to it; it is refused when the server is added, with a typed error, and nothing is
/// sent. Before, the server was added, every request was silently not written, and the calls
/// waited out their deadlines.
#[test]
fn a_bearer_token_with_a_line_break_is_refused_when_the_server_is_added() {
    let server = flooder(OnCall::Silent);
    let mut host = Host::new().unwrap();
    for token in ["tok\r\nX-Injected: 1", "tok\n", "tok\0"] {
        let opts = HttpOptions::new(&server.url).bearer(token);
        match host.add_http_server(opts, Config::default()) {
            Err(mcpoll::AddServerError::Http(mcpoll::HttpSetupError::BearerToken)) => {}
            other => panic!("{token:?}: {other:?}"),
        }
    }
    let ok = host.add_http_server(HttpOptions::new(&server.url).bearer("tok"), Config::default());
    let id = ok.expect("a plain token is fine");
    let state = host.wait_ready(id, Duration::from_secs(30)).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{state:?}");
}
