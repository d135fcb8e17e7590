//! A watched server's listen stream that breaks is opened again after a backoff: that backoff
//! is a deadline of the host, so a host that waits in `poll(None)` (or a foreign loop on
//! `poll_timeout`) wakes for it instead of waiting for unrelated I/O.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::mini::{mcp_answer, MiniServer, Request, Response};
use mcpoll::{Config, Host, HttpOptions, ServerId, ServerState};

/// A host watching `server`'s catalogs, once the first listen stream (counted in `listens`)
/// broke and the host has taken that in: nothing is pending.
fn watched_after_its_first_stream_broke(
    server: &MiniServer,
    listens: &AtomicUsize,
) -> (Host, ServerId) {
    let mut host = Host::new().unwrap();
    let opts = HttpOptions::new(server.url("http", "127.0.0.1"));
    let id = host.add_http_server(opts, Config::default()).unwrap();
    assert!(matches!(host.wait_ready(id, common::PATIENCE), Ok(ServerState::Ready(..))));
    host.watch_catalogs(id).unwrap();
    common::poll_until(&mut host, common::PATIENCE, |h| {
        while h.poll_event().is_some() {}
        listens.load(Ordering::SeqCst) == 1 && h.pending(id) == Some(0)
    });
    (host, id)
}

#[test]
fn a_broken_listen_stream_is_reopened_by_a_host_waiting_in_poll_none() {
    let listens = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&listens);
    let server = MiniServer::start(None, move |req: &Request| {
        let msg = req.json();
        if msg["method"] == "subscriptions/listen" {
            seen.fetch_add(1, Ordering::SeqCst);
            let error = serde_json::json!({"code": -32603, "message": "listen broke"});
            return Response::json(
                serde_json::json!({"jsonrpc": "2.0", "id": msg["id"], "error": error}),
            );
        }
        mcp_answer(req)
    });
    let (mut host, _) = watched_after_its_first_stream_broke(&server, &listens);
    // The backoff is 200 ms from the failure, which came before this line: whatever else the
    // host waits for (a pooled connection's idle end, 30 s), it is due before a second.
    let due = host.poll_timeout().expect("the re-listen backoff is a deadline of the host");
    let soon = std::time::Instant::now() + std::time::Duration::from_secs(1);
    assert!(due <= soon, "the host's next deadline is not the re-listen: {due:?}");
    // Only that deadline can wake this wait: no call is pending, the server sends nothing.
    while listens.load(Ordering::SeqCst) < 2 {
        host.poll(None).unwrap();
        while host.poll_event().is_some() {}
    }
}

/// A blocking helper's wait reopens a watched server's broken stream when its backoff ends,
/// as `poll` does: the deadline is the host's, so a wait that left the re-listen to `poll`
/// woke for it at once, again and again (a busy loop), until the call it waited for ended.
/// Here the server answers the call only once the stream is open again.
#[test]
fn a_blocking_wait_reopens_a_broken_listen_stream() {
    let listens = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&listens);
    let server = MiniServer::start(None, move |req: &Request| {
        let msg = req.json();
        if msg["method"] == "subscriptions/listen" {
            if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                let error = serde_json::json!({"code": -32603, "message": "listen broke"});
                return Response::json(
                    serde_json::json!({"jsonrpc": "2.0", "id": msg["id"], "error": error}),
                );
            }
            // The second stream stays open: no answer until the test ends.
            std::thread::sleep(common::PATIENCE);
        }
        if msg["method"] == "tools/call" {
            let end = std::time::Instant::now() + common::PATIENCE;
            while seen.load(Ordering::SeqCst) < 2 && std::time::Instant::now() < end {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        mcp_answer(req)
    });
    let (mut host, id) = watched_after_its_first_stream_broke(&server, &listens);
    let args = serde_json::value::RawValue::from_string(r#"{"text":"hi"}"#.into()).unwrap();
    let result = host.call_tool_blocking(id, "echo", &args, &Default::default());
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(listens.load(Ordering::SeqCst), 2, "the wait opened the stream again");
}
