//! A host embedded in a loop the test owns (`Host::embedded`): the test's `mio::Poll` serves a
//! UDP echo of its own and the host's server, forwarding events by token and ticking the host
//! only when `poll_timeout` says so. Real peers (the demo server over stdio and over HTTP);
//! token ranges filled, refused and reused; tokens outside the range refused. And the core
//! under a loop with no `mio` at all (the `own_io` example).

mod common;

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use mcpoll::{
    AddServerError, BlockingError, CallId, CallOptions, Config, EmbedError, Event, ForeignToken,
    Host, HttpOptions, ServerId, ServerState,
};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};

/// The test's own sources: below the host's range.
const UDP_SERVER: Token = Token(0);
const UDP_CLIENT: Token = Token(1);
/// The host's range: room for two stdio servers, or one HTTP server and change.
const RANGE: std::ops::Range<usize> = 1000..1000 + Host::HTTP_SERVER_TOKENS + 6;

/// The program: a poll, a UDP echo server and a client of it, and what went through them.
struct Program {
    poll: Poll,
    events: Events,
    server: UdpSocket,
    client: UdpSocket,
    server_addr: SocketAddr,
    buf: Vec<u8>,
    /// Datagrams the echo server sent back, and the client received.
    echoed: usize,
    received: Vec<String>,
    /// Readiness calls the host took, and ticks.
    forwarded: usize,
    ticks: usize,
}

impl Program {
    fn new() -> Self {
        let poll = Poll::new().unwrap();
        let mut server = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut client = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let server_addr = server.local_addr().unwrap();
        poll.registry().register(&mut server, UDP_SERVER, Interest::READABLE).unwrap();
        poll.registry().register(&mut client, UDP_CLIENT, Interest::READABLE).unwrap();
        Self {
            poll,
            events: Events::with_capacity(64),
            server,
            client,
            server_addr,
            buf: vec![0; 2048],
            echoed: 0,
            received: Vec::new(),
            forwarded: 0,
            ticks: 0,
        }
    }

    fn send(&self, text: &str) {
        self.client.send_to(text.as_bytes(), self.server_addr).unwrap();
    }

    /// One turn of the loop: wait at most `cap` (less when the host is due), forward the
    /// host's events, serve the UDP ones, tick the host when it is due.
    fn turn(&mut self, host: &mut Host, cap: Duration) {
        let now = Instant::now();
        let wait = host.poll_timeout().map_or(cap, |t| t.saturating_duration_since(now).min(cap));
        match self.poll.poll(&mut self.events, Some(wait)) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => other.unwrap(),
        }
        let now = Instant::now();
        for event in self.events.iter() {
            let token = event.token();
            if host.owns_token(token) {
                host.handle_readiness(token, now).unwrap();
                self.forwarded += 1;
            } else if token == UDP_SERVER {
                while let Ok((n, from)) = self.server.recv_from(&mut self.buf) {
                    self.server.send_to(&self.buf[..n], from).unwrap();
                    self.echoed += 1;
                }
            } else if token == UDP_CLIENT {
                while let Ok(n) = self.client.recv(&mut self.buf) {
                    self.received.push(String::from_utf8_lossy(&self.buf[..n]).into_owned());
                }
            } else {
                panic!("an event with token {token:?}: neither the host's range nor the test's");
            }
        }
        // Only when due: the test holds the host to its poll_timeout contract.
        if host.poll_timeout().is_some_and(|t| t <= now) {
            host.handle_timeout(now);
            self.ticks += 1;
        }
    }

    /// Turns until every call in `calls` ended, sending one datagram a turn meanwhile;
    /// returns the results (or failures) in order.
    #[track_caller]
    fn run_calls(
        &mut self,
        host: &mut Host,
        calls: &[(ServerId, CallId)],
        datagrams: usize,
        limit: Duration,
        cap: Duration,
    ) -> Vec<Result<String, String>> {
        let deadline = Instant::now() + limit;
        let mut out: Vec<Option<Result<String, String>>> = vec![None; calls.len()];
        let mut sent = 0;
        while out.iter().any(Option::is_none) || self.received.len() < datagrams {
            assert!(
                Instant::now() < deadline,
                "not done within {limit:?}: results {out:?}, datagrams {}/{datagrams}",
                self.received.len()
            );
            if sent < datagrams {
                self.send(&format!("ping {sent}"));
                sent += 1;
            }
            self.turn(host, cap);
            while let Some((server, event)) = host.poll_event() {
                let (call, result) = match event {
                    Event::CallDone { call, result, .. } => (call, Ok(result.json().to_owned())),
                    Event::CallFailed { call, error, .. } => (call, Err(error.to_string())),
                    _ => continue,
                };
                // Call ids are per server: two servers' first calls have the same one.
                if let Some(i) = calls.iter().position(|&c| c == (server, call)) {
                    out[i] = Some(result);
                }
            }
        }
        out.into_iter().flatten().collect()
    }
}

fn echo(host: &mut Host, id: ServerId, text: &str) -> (ServerId, CallId) {
    let args = raw(&format!(r#"{{"text":"{text}"}}"#));
    (id, host.call_tool(id, "echo", &args, &CallOptions::default()).unwrap())
}

fn echoed_text(result: &Result<String, String>) -> String {
    let json: serde_json::Value = serde_json::from_str(result.as_ref().unwrap()).unwrap();
    json["content"][0]["text"].as_str().unwrap().to_owned()
}

#[test]
fn stdio_server_and_udp_share_the_programs_poll() {
    let mut p = Program::new();
    let mut host = Host::embedded(p.poll.registry(), RANGE).unwrap();
    assert!(host.is_embedded());
    let id = host.add_stdio_server(demo_server(), Config::default()).unwrap();
    // Made before the server is ready: it waits in the engine's queue.
    let calls = [echo(&mut host, id, "one"), echo(&mut host, id, "two")];
    let results = p.run_calls(&mut host, &calls, 20, common::PATIENCE, Duration::from_secs(5));
    assert_eq!(echoed_text(&results[0]), "one");
    assert_eq!(echoed_text(&results[1]), "two");
    assert!(matches!(host.state(id), Some(ServerState::Ready(..))));
    assert_eq!(p.echoed, 20);
    let expected: Vec<String> = (0..20).map(|i| format!("ping {i}")).collect();
    assert_eq!(p.received, expected, "the test's own datagrams went through the same poll");
    assert!(p.forwarded > 0, "the server's pipes are registered on the test's poll");

    // Idle: nothing pending, no deadline; the server's pipes are quiet.
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        p.turn(&mut host, Duration::from_millis(50));
        while host.poll_event().is_some() {}
    }
    let forwarded = p.forwarded;
    p.turn(&mut host, Duration::from_millis(100));
    assert_eq!(p.forwarded, forwarded, "an idle server produced readiness");
    host.remove_server(id);
}

/// A server whose engine closes on a reply read through the program's poll (a modern-only
/// host against a legacy-only server: no common version) has its process ended too, in a
/// loop that ticks only when the host is due: the end was left to a tick, and with no
/// deadline left none came, so the process ran on with its pipes registered.
#[test]
fn a_server_closed_by_a_reply_ends_its_process_without_a_tick() {
    let mut p = Program::new();
    let mut host = Host::embedded(p.poll.registry(), RANGE).unwrap();
    let modern_only = Config { era: mcpoll::EraPreference::ModernOnly, ..Config::default() };
    let id = host.add_stdio_server(demo_server().arg("--legacy-only"), modern_only).unwrap();
    let deadline = Instant::now() + common::PATIENCE;
    while !matches!(host.state(id), Some(ServerState::Closed)) || host.pid(id).is_some() {
        assert!(Instant::now() < deadline, "state {:?}, pid {:?}", host.state(id), host.pid(id));
        p.turn(&mut host, Duration::from_millis(100));
        while host.poll_event().is_some() {}
    }
    host.remove_server(id);
}

#[test]
fn http_server_through_the_programs_poll() {
    let demo = common::HttpDemo::start(&[]);
    let mut p = Program::new();
    let mut host = Host::embedded(p.poll.registry(), RANGE).unwrap();
    let id = host.add_http_server(HttpOptions::new(&demo.url), Config::default()).unwrap();
    let calls = [echo(&mut host, id, "over http")];
    let results = p.run_calls(&mut host, &calls, 10, common::PATIENCE, Duration::from_secs(5));
    assert_eq!(echoed_text(&results[0]), "over http");
    assert_eq!(p.received.len(), 10);
    assert!(p.forwarded > 0, "the server's sockets are registered on the test's poll");
    // The HTTP server's block fills the range but for 6 tokens: two stdio servers still fit.
    let a = host.add_stdio_server(demo_server(), Config::default()).unwrap();
    let b = host.add_stdio_server(demo_server(), Config::default()).unwrap();
    match host.add_stdio_server(demo_server(), Config::default()) {
        Err(AddServerError::TooManyServers) => {}
        other => panic!("expected TooManyServers, got {other:?}"),
    }
    let calls = [echo(&mut host, a, "a"), echo(&mut host, b, "b"), echo(&mut host, id, "c")];
    let results = p.run_calls(&mut host, &calls, 0, common::PATIENCE, Duration::from_secs(5));
    let texts: Vec<String> = results.iter().map(echoed_text).collect();
    assert_eq!(texts, ["a", "b", "c"]);
}

#[test]
fn a_full_range_refuses_servers_and_a_removed_servers_tokens_are_reused() {
    let mut p = Program::new();
    let range = 500..500 + 2 * Host::STDIO_SERVER_TOKENS;
    let mut host = Host::embedded(p.poll.registry(), range.clone()).unwrap();
    assert_eq!(host.token_range(), range);
    // An HTTP server needs a whole pool's worth of tokens: refused before any I/O.
    let http = HttpOptions::new("http://127.0.0.1:9/mcp");
    assert!(matches!(
        host.add_http_server(http, Config::default()),
        Err(AddServerError::TooManyServers)
    ));
    let first = host.add_stdio_server(demo_server(), Config::default()).unwrap();
    let second = host.add_stdio_server(demo_server(), Config::default()).unwrap();
    for _ in 0..3 {
        match host.add_stdio_server(demo_server(), Config::default()) {
            Err(e @ AddServerError::TooManyServers) => {
                assert!(e.to_string().contains("token range"), "{e}");
            }
            other => panic!("expected TooManyServers, got {other:?}"),
        }
    }
    let calls = [echo(&mut host, first, "first"), echo(&mut host, second, "second")];
    let results = p.run_calls(&mut host, &calls, 0, common::PATIENCE, Duration::from_secs(5));
    assert_eq!(echoed_text(&results[0]), "first");

    host.remove_server(first);
    assert_eq!(host.state(first), None, "the old handle is gone");
    // The freed block goes to the next server, which works through the same tokens.
    let third = host.add_stdio_server(demo_server(), Config::default()).unwrap();
    assert!(matches!(
        host.add_stdio_server(demo_server(), Config::default()),
        Err(AddServerError::TooManyServers)
    ));
    let calls = [echo(&mut host, third, "third"), echo(&mut host, second, "again")];
    let results = p.run_calls(&mut host, &calls, 3, common::PATIENCE, Duration::from_secs(5));
    assert_eq!(echoed_text(&results[0]), "third");
    assert_eq!(echoed_text(&results[1]), "again");
    assert_eq!(host.state(first), None, "a reused slot does not revive the old handle");
}

#[test]
fn tokens_outside_the_range_are_refused_and_vacant_ones_ignored() {
    let p = Program::new();
    let mut host = Host::embedded(p.poll.registry(), 100..200).unwrap();
    let now = Instant::now();
    assert!(!host.owns_token(UDP_SERVER));
    assert!(!host.owns_token(Token(200)));
    assert!(host.owns_token(Token(100)) && host.owns_token(Token(199)));
    assert_eq!(host.handle_readiness(UDP_SERVER, now), Err(ForeignToken(UDP_SERVER)));
    assert_eq!(host.handle_readiness(Token(200), now), Err(ForeignToken(Token(200))));
    assert_eq!(host.handle_readiness(Token(usize::MAX), now), Err(ForeignToken(Token(usize::MAX))));
    // In the range, held by no server (a server removed after its event was collected).
    assert_eq!(host.handle_readiness(Token(150), now), Ok(()));
    let id = host.add_stdio_server(demo_server(), Config::default()).unwrap();
    assert_eq!(host.handle_readiness(Token(150), now), Ok(()));
    // A spurious event for the server's own tokens is a hint, not a promise: nothing breaks.
    for t in 100..103 {
        assert_eq!(host.handle_readiness(Token(t), now), Ok(()));
    }
    assert!(host.pending(id).is_some());
    let e = ForeignToken(Token(7));
    assert_eq!(e.to_string(), "token 7 is outside the host's token range");
}

#[test]
fn a_range_too_small_for_any_server_is_refused_at_once() {
    let poll = Poll::new().unwrap();
    #[allow(clippy::reversed_empty_ranges)] // a reversed range is one of the cases
    let ranges = [10..12, 10..10, 12..10];
    for range in ranges {
        match Host::embedded(poll.registry(), range.clone()) {
            Err(EmbedError::TokenRange { tokens, needed }) => {
                assert_eq!(tokens, range);
                assert_eq!(needed, Host::STDIO_SERVER_TOKENS);
            }
            other => panic!("{range:?}: expected TokenRange, got {other:?}"),
        }
    }
    assert!(Host::embedded(poll.registry(), 10..13).is_ok());
}

#[test]
fn an_embedded_host_cannot_wait_on_its_own() {
    let poll = Poll::new().unwrap();
    let mut host = Host::embedded(poll.registry(), 100..200).unwrap();
    let e = host.poll(Some(Duration::ZERO)).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::Unsupported);
    let id = host.add_stdio_server(demo_server(), Config::default()).unwrap();
    match host.wait_ready(id, Duration::from_secs(1)) {
        Err(BlockingError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::Unsupported),
        other => panic!("{other:?}"),
    }
    // The helpers that send refuse before they send: a call sent and then refused ran on for
    // nobody (and a write the host retried, taking the error for "nothing happened", twice).
    let args = raw(r#"{"text":"x"}"#);
    let pending = host.client().engine(id).unwrap().pending();
    match host.call_tool_blocking(id, "echo", &args, &CallOptions::default()) {
        Err(BlockingError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::Unsupported),
        other => panic!("{other:?}"),
    }
    match host.call_tool_json_blocking(id, "echo", "{}", &CallOptions::default()) {
        Err(BlockingError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::Unsupported),
        other => panic!("{other:?}"),
    }
    match host.tool_catalog_blocking(id, Duration::from_secs(1)) {
        Err(mcpoll::CatalogError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::Unsupported),
        other => panic!("{other:?}"),
    }
    assert_eq!(host.client().engine(id).unwrap().pending(), pending, "no call was made");
    // The owned mode is the same host with a poll of its own.
    assert!(!Host::new().unwrap().is_embedded());
}

/// `Host::wait` on an embedded host refuses at once, as the other blocking helpers do: it
/// ended the call for a server request waiting in the queue (no handler answers while a
/// helper blocks), refused the request on the wire and took its event from the program.
#[test]
fn wait_on_an_embedded_host_leaves_a_waiting_server_request_alone() {
    let Some(dir) = peers_dir() else { return };
    let mut p = Program::new();
    let mut host = Host::embedded(p.poll.registry(), RANGE).unwrap();
    let config = Config {
        era: mcpoll::EraPreference::LegacyOnly,
        answers: mcpoll::ServerRequestKinds::all(),
        ..Config::default()
    };
    let cmd = mcpoll::StdioCommand::new(dir.join("run-py-stdio.sh"));
    let id = host.add_stdio_server(cmd, config).unwrap();
    let call = host.call_tool(id, "ask", &raw("{}"), &CallOptions::default()).unwrap();
    let deadline = Instant::now() + common::PATIENCE;
    while host.client().engine(id).unwrap().stats().server_requests == 0 {
        assert!(Instant::now() < deadline, "no elicitation came");
        p.turn(&mut host, Duration::from_millis(100));
    }
    match host.wait(id, call) {
        Err(BlockingError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::Unsupported),
        other => panic!("{other:?}"),
    }
    assert!(host.client().engine(id).unwrap().is_pending(call), "the call runs on");
    let mut requests = 0;
    while let Some((_, e)) = host.poll_event() {
        requests += usize::from(matches!(e, mcpoll::Event::ServerRequest { .. }));
    }
    assert_eq!(requests, 1, "the elicitation is still the program's");
}

/// Input past the frame budget has no readiness edge of its own: `poll_timeout` must say the
/// host is due at once, or a loop that waits on it stalls (here, for the 10 s cap per turn).
#[test]
fn input_left_by_the_frame_budget_makes_the_host_due_at_once() {
    let mut p = Program::new();
    let mut host = Host::embedded(p.poll.registry(), RANGE).unwrap();
    let config = Config { frames_per_readiness: 1, ..Config::default() };
    let id = host.add_stdio_server(demo_server(), config).unwrap();
    // Wait for readiness first, so the replies below arrive close together.
    let ready = [echo(&mut host, id, "warm")];
    p.run_calls(&mut host, &ready, 0, common::PATIENCE, Duration::from_secs(10));
    let calls: Vec<_> = (0..16).map(|i| echo(&mut host, id, &format!("n{i}"))).collect();
    // A turn that stalled on left-over input would wait out its cap of 120 s, far past
    // the outer bound: finishing at all shows the host said it was due at once.
    let results = p.run_calls(&mut host, &calls, 0, common::PATIENCE, Duration::from_secs(120));
    let texts: Vec<String> = results.iter().map(echoed_text).collect();
    let expected: Vec<String> = (0..16).map(|i| format!("n{i}")).collect();
    assert_eq!(texts, expected);
    assert!(p.ticks > 0, "left-over input is taken by ticks");
}

/// The `foreign_loop` example, run as a user would: both tool calls and every datagram.
#[test]
fn the_foreign_loop_example_runs() {
    let out = std::process::Command::new(example("foreign_loop")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(r#""text":"hello from a foreign loop""#), "{stdout}");
    assert!(stdout.contains(r#""structuredContent":{"sum":42}"#), "{stdout}");
    assert!(stdout.contains("udp: ping 9"), "{stdout}");
    assert!(stdout.contains("10 datagrams echoed, 10 returned"), "{stdout}");
}

/// The `own_io` example: the sans-IO core (`Client`) driven with `std::process` and a thread,
/// no `mio` and no `Host`, calls the echo server once and exits when its child has.
#[test]
fn the_own_io_example_drives_the_core_with_std_io() {
    let out = std::process::Command::new(example("own_io")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(r#""text":"hello from a loop of its own""#), "{stdout}");
}

/// Read system calls this thread has made so far (`syscr` in `/proc/thread-self/io`).
fn reads_so_far() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    let line = io.lines().find(|l| l.starts_with("syscr:")).unwrap();
    line["syscr:".len()..].trim().parse().unwrap()
}

/// Calls `echo` ten times, one at a time, forwarding the host's events with `handle_event`
/// (`whole`) or `handle_readiness`; the `read`s each readable event of the server cost.
fn reads_per_readable_event(whole: bool) -> Vec<u64> {
    let mut p = Program::new();
    let mut host = Host::embedded(p.poll.registry(), RANGE).unwrap();
    let id = host.add_stdio_server(demo_server(), Config::default()).unwrap();
    let warm = [echo(&mut host, id, "warm")];
    p.run_calls(&mut host, &warm, 0, common::PATIENCE, Duration::from_secs(10));
    // What reading the counter costs by itself.
    let counting = {
        let a = reads_so_far();
        reads_so_far() - a
    };
    let mut reads = Vec::new();
    for i in 0..10 {
        let (_, call) = echo(&mut host, id, &format!("n{i}"));
        let deadline = Instant::now() + common::PATIENCE;
        let mut done = false;
        while !done {
            assert!(Instant::now() < deadline, "call {i} did not end");
            common::wait_events(&mut p.poll, &mut p.events, Some(Duration::from_millis(100)));
            let now = Instant::now();
            for event in p.events.iter() {
                assert!(host.owns_token(event.token()), "no UDP traffic in this test");
                let before = reads_so_far();
                if whole {
                    host.handle_event(event, now).unwrap();
                } else {
                    host.handle_readiness(event.token(), now).unwrap();
                }
                let spent = reads_so_far() - before - counting;
                if event.is_readable() && !event.is_read_closed() {
                    reads.push(spent);
                }
            }
            if host.poll_timeout().is_some_and(|t| t <= now) {
                host.handle_timeout(now);
            }
            while let Some((_, e)) = host.poll_event() {
                done |= matches!(e, Event::CallDone { call: c, .. } if c == call);
            }
        }
    }
    reads
}

/// A foreign loop that hands over the whole event gets the owned mode's one `read` per event
/// (a short read means the pipe is empty); with only the token the driver reads on to
/// `WouldBlock`, one `read` more.
#[test]
fn handle_event_reads_once_per_event_where_the_token_alone_reads_on_to_would_block() {
    let whole = reads_per_readable_event(true);
    assert!(whole.len() >= 10, "a reply per call: {whole:?}");
    assert!(whole.iter().all(|&n| n == 1), "one read per readable event: {whole:?}");
    let token = reads_per_readable_event(false);
    assert!(token.iter().all(|&n| n == 2), "a short read, then WouldBlock: {token:?}");
}
