//! Engine scenarios with a scripted peer and simulated time: no I/O, no sleeps.

mod authorization;
mod extensions;
mod records;
mod resilience;
mod roots_sampling;
mod saved_verdict;
mod server_requests;
mod tasks;
#[cfg(not(feature = "server-requests"))]
mod without_server_requests;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;
use crate::proto::mcp::{ResultType, SubscriptionFilter};
use crate::proto::meta::TraceContext;

/// An engine, the frames it wrote (decoded), and a clock that only moves forward by addition.
pub(super) struct Harness {
    pub(super) engine: Engine,
    pub(super) now: Instant,
    sent: Vec<Value>,
    /// The route of every request sent, by wire id: (version, name, param headers).
    pub(super) routes: std::collections::HashMap<u64, OwnedRoute>,
    pub(super) buf: Vec<u8>,
}

/// A [`Transmit`]'s route, copied out of the engine's borrow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OwnedRoute {
    pub(super) version: Option<ProtocolVersion>,
    pub(super) name: Option<String>,
    pub(super) params: Vec<(String, Vec<u8>)>,
}

#[allow(dead_code)]
impl Harness {
    pub(super) fn new(config: Config) -> Self {
        let now = Instant::now();
        let engine = Engine::new(config, now).unwrap();
        Self { engine, now, sent: Vec::new(), routes: Default::default(), buf: Vec::new() }
    }

    /// Collects every frame the engine wants to send.
    pub(super) fn flush(&mut self) {
        loop {
            self.buf.clear();
            let Some(t) = self.engine.poll_transmit(self.now, &mut self.buf) else {
                break;
            };
            assert_eq!(t.len, self.buf.len());
            if let TransmitKind::Request { id, .. } = t.kind {
                let route = OwnedRoute {
                    version: t.version(),
                    name: t.name().map(|n| String::from_utf8(n.to_vec()).expect("UTF-8")),
                    params: t.param_headers().map(|(n, v)| (n.to_owned(), v.to_vec())).collect(),
                };
                self.routes.insert(id.get(), route);
            }
            let v: Value = serde_json::from_slice(&self.buf).expect("engine wrote invalid JSON");
            if self.engine.transport != TransportKind::Http {
                assert!(!self.buf.contains(&b'\n'), "a stdio frame must be one line");
            }
            self.sent.push(v);
        }
    }

    pub(super) fn take_sent(&mut self) -> Vec<Value> {
        self.flush();
        std::mem::take(&mut self.sent)
    }

    /// The one frame sent since the last look; fails if there were none or several.
    #[track_caller]
    pub(super) fn sent_one(&mut self) -> Value {
        let mut s = self.take_sent();
        assert_eq!(s.len(), 1, "expected one frame, got {s:#?}");
        s.remove(0)
    }

    pub(super) fn peer(&mut self, v: Value) {
        let bytes = serde_json::to_vec(&v).unwrap();
        self.engine.handle_message(self.now, &bytes);
        self.flush();
    }

    pub(super) fn reply(&mut self, to: &Value, result: Value) {
        self.peer(json!({"jsonrpc": "2.0", "id": to["id"], "result": result}));
    }

    pub(super) fn reply_error(&mut self, to: &Value, code: i64, data: Option<Value>) {
        let mut error = json!({"code": code, "message": "nope"});
        if let Some(d) = data {
            error["data"] = d;
        }
        self.peer(json!({"jsonrpc": "2.0", "id": to["id"], "error": error}));
    }

    pub(super) fn advance(&mut self, d: Duration) {
        self.now += d;
        self.check_due();
        self.engine.handle_timeout(self.now);
        self.flush();
    }

    /// Lets a restart's backoff run out and opens the next process (a first frame, the probe
    /// or `initialize`, goes out).
    pub(super) fn open_next_process(&mut self) {
        for _ in 0..8 {
            if self.engine.wants_transport() {
                break;
            }
            self.now = self.engine.poll_timeout().expect("restart timer");
            self.engine.handle_timeout(self.now);
        }
        assert!(self.engine.wants_transport(), "a new process is asked for when the backoff ends");
        self.engine.handle_transport(self.now, TransportEvent::opened());
    }

    /// Jumps to the next deadline, as a driver would, without sleeping.
    pub(super) fn advance_to_next_timeout(&mut self) {
        let t = self.engine.poll_timeout().expect("no timer armed");
        assert!(t >= self.now);
        self.now = t;
        self.check_due();
        self.engine.handle_timeout(self.now);
        self.flush();
    }

    /// `is_due`, the loop's cheap question, agrees with `poll_timeout` in every scenario that
    /// moves the clock (deadlines, backoffs, restarts, probes, server requests).
    fn check_due(&self) {
        let by_instant = self.engine.poll_timeout().is_some_and(|t| t <= self.now);
        assert_eq!(self.engine.is_due(self.now), by_instant, "at {:?}", self.now);
    }

    pub(super) fn events(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(e) = self.engine.poll_event() {
            out.push(describe(&e));
        }
        out
    }

    pub(super) fn call(&mut self, name: &str, args: &str) -> CallId {
        let args: &RawValue = serde_json::from_str(args).unwrap();
        self.engine.call_tool(self.now, name, args, &CallOptions::default()).unwrap()
    }

    /// Opens the transport and answers the probe as a modern server.
    pub(super) fn ready_modern() -> Self {
        Self::ready_with(Config::default())
    }

    pub(super) fn ready_with(config: Config) -> Self {
        let mut h = Self::new(config);
        h.engine.handle_transport(h.now, TransportEvent::opened());
        let probe = h.sent_one();
        h.reply(&probe, discover_result());
        assert_eq!(h.events(), ["ready modern 2026-07-28"]);
        h
    }

    /// Opens an HTTP transport and answers the probe as a modern server.
    pub(super) fn ready_http() -> Self {
        Self::ready_http_with(Config::default())
    }

    pub(super) fn ready_http_with(config: Config) -> Self {
        let mut h = Self::new(config);
        h.engine.handle_transport(h.now, TransportEvent::opened_as(TransportKind::Http));
        let probe = h.sent_one();
        h.reply(&probe, discover_result());
        assert_eq!(h.events(), ["ready modern 2026-07-28"]);
        h
    }

    /// Opens the transport and walks the legacy handshake.
    pub(super) fn ready_legacy() -> Self {
        let mut h = Self::new(Config::default());
        h.engine.handle_transport(h.now, TransportEvent::opened());
        let probe = h.sent_one();
        h.reply_error(&probe, -32601, None);
        let init = h.sent_one();
        assert_eq!(init["method"], "initialize");
        h.reply(&init, json!({"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}));
        let initialized = h.sent_one();
        assert_eq!(initialized, json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(h.events(), ["ready legacy 2025-11-25"]);
        h
    }
}

fn no_restart() -> Config {
    let restart = crate::config::RestartPolicy { enabled: false, ..Default::default() };
    Config { restart, ..Config::default() }
}

pub(super) fn discover_result() -> Value {
    json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
           "ttlMs": 0, "cacheScope": "private"})
}

pub(super) fn describe(e: &Event<'_>) -> String {
    match e {
        Event::Ready { era, version } => format!("ready {era} {version}"),
        Event::CallDone { call, result, .. } => {
            format!(
                "done {} {}{}",
                call.get(),
                result.json(),
                if result.is_error() { " isError" } else { "" }
            )
        }
        Event::CallFailed { call, error, .. } => format!("failed {} {}", call.get(), error.name()),
        Event::Progress { call, progress, total, message } => {
            format!("progress {} {progress} {total:?} {message:?}", call.get())
        }
        Event::ListChanged(k) => format!("list_changed {k:?}"),
        Event::Subscribed { .. } => "Subscribed".into(),
        Event::ResourceUpdated { uri } => format!("updated {uri}"),
        Event::Notification { method, params } => format!("notification {method} {params}"),
        Event::Closed { error } => format!("closed {}", error.name()),
        Event::Breaker { class, state, .. } => format!("breaker {class:?} {state:?}"),
        Event::TransportLost { error, restart_in } => {
            format!("lost {} {restart_in:?}", error.name())
        }
        Event::ServerRequest { kind, call, params, .. } => {
            format!("asks {} {:?} {params}", kind.method(), call.map(CallId::get))
        }
        Event::ServerRequestExpired { .. } => "expired".into(),
        Event::TaskCreated { call, task } => format!("task {} {task}", call.get()),
        Event::TaskStatus { call, task, status, message } => {
            format!("task {} {task} {} {message:?}", call.get(), status.as_str())
        }
        Event::Client(never) => match *never {},
    }
}

#[test]
fn probe_then_modern_calls_carry_full_meta() {
    let mut h = Harness::new(Config::default());
    let early = h.call("echo", r#"{"text":"hi"}"#);
    assert!(h.take_sent().is_empty(), "nothing before the transport opens");
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    assert_eq!(probe["method"], "server/discover");
    let meta = &probe["params"]["_meta"];
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], json!({}));
    assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "mcpoll");
    assert_eq!(h.engine.state(), ServerState::Probing);

    h.reply(&probe, discover_result());
    let call = h.sent_one();
    assert_eq!(call["method"], "tools/call");
    assert_eq!(call["params"]["name"], "echo");
    assert_eq!(call["params"]["arguments"], json!({"text": "hi"}));
    assert_eq!(call["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert_ne!(call["id"], probe["id"]);
    h.reply(&call, json!({"resultType": "complete", "content": [{"type": "text", "text": "hi"}]}));
    assert_eq!(
        h.events(),
        [
            "ready modern 2026-07-28".to_string(),
            format!("done {} {{\"content\":[{{\"text\":\"hi\",\"type\":\"text\"}}],\"resultType\":\"complete\"}}", early.get()),
        ]
    );
    assert_eq!(h.engine.era(), Some(Era::Modern));
    assert!(h.engine.server_info().unwrap().contains("supportedVersions"));
    assert_eq!(h.engine.pending(), 0);
}

#[test]
fn probe_error_falls_back_to_initialize_and_legacy_calls_have_no_modern_meta() {
    let mut h = Harness::ready_legacy();
    let c = h.call("add", r#"{"a":1,"b":2}"#);
    let req = h.sent_one();
    assert!(req["params"].get("_meta").is_none(), "legacy requests carry no envelope: {req}");
    h.reply(&req, json!({"content": [], "structuredContent": {"sum": 3}}));
    assert_eq!(
        h.events(),
        [format!("done {} {{\"content\":[],\"structuredContent\":{{\"sum\":3}}}}", c.get())]
    );
    assert!(matches!(
        h.engine.discover(h.now, &CallOptions::default()),
        Err(RequestError::NotSupportedByEra)
    ));
}

#[test]
fn probe_fallback_does_not_depend_on_the_error_code() {
    for code in [-32601, -32602, -32600, -32000, -32020, -32021, 1] {
        let mut h = Harness::new(Config::default());
        h.engine.handle_transport(h.now, TransportEvent::opened());
        let probe = h.sent_one();
        h.reply_error(&probe, code, None);
        assert_eq!(h.sent_one()["method"], "initialize", "code {code}");
    }
}

#[test]
fn probe_timeout_falls_back_and_a_late_discover_reply_is_ignored() {
    let mut h = Harness::new(Config::default());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.advance(Duration::from_millis(4999));
    assert!(h.take_sent().is_empty());
    h.advance_to_next_timeout();
    let init = h.sent_one();
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    h.reply(&probe, discover_result());
    assert_eq!(h.engine.stats().late_responses, 1);
    assert_eq!(h.engine.state(), ServerState::Handshaking);
    h.reply(&init, json!({"protocolVersion": "2025-11-25", "capabilities": {}}));
    assert_eq!(h.sent_one()["method"], "notifications/initialized");
    assert_eq!(h.engine.era(), Some(Era::Legacy));
}

/// A server slow to start answers the probe after its timeout, commits the connection to the
/// modern era, and refuses the fallback `initialize`: the engine probes again instead of
/// closing (seen with the Python SDK over stdio on a busy machine). With `-32022` and its
/// version list; or with `-32601` and no list, a method the server does not know, which after
/// the probe's silence is the same proof (it closed the server for good).
#[test]
fn initialize_refused_by_a_modern_server_after_a_probe_timeout_probes_again() {
    let listed = json!({"supported": ["2026-07-28"], "requested": "2025-11-25"});
    for (code, data) in [(-32022, Some(listed)), (-32601, None)] {
        let mut h = Harness::new(Config::default());
        let early = h.call("echo", r#"{"text":"hi"}"#);
        h.engine.handle_transport(h.now, TransportEvent::opened());
        let probe = h.sent_one();
        h.advance_to_next_timeout();
        let init = h.sent_one();
        assert_eq!(init["method"], "initialize");
        h.reply(&probe, discover_result());
        h.reply_error(&init, code, data);
        let again = h.sent_one();
        assert_eq!(again["method"], "server/discover", "code {code}");
        let version = &again["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"];
        assert_eq!(version, "2026-07-28");
        assert_eq!(h.engine.state(), ServerState::Probing);
        h.reply(&again, discover_result());
        let call = h.sent_one();
        assert_eq!(call["method"], "tools/call");
        h.reply(&call, json!({"resultType": "complete", "content": []}));
        assert_eq!(
            h.events(),
            [
                "ready modern 2026-07-28".to_string(),
                format!("done {} {{\"content\":[],\"resultType\":\"complete\"}}", early.get())
            ]
        );
    }
    // Only after silence: a probe refused as legacy and then `initialize` refused too is no
    // server mcpoll can talk to, and nothing goes round.
    let mut h = Harness::new(Config::default());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.reply_error(&probe, -32601, None);
    let init = h.sent_one();
    h.reply_error(&init, -32601, None);
    assert_eq!(h.events(), ["closed method_not_found"]);
    assert!(h.take_sent().is_empty());
}

/// A modern server may refuse `initialize` with another code than `-32022`: the modern version
/// in its `supported` list is the proof. `-32602` (the spec's example) closed the engine.
#[test]
fn initialize_refused_with_any_code_listing_a_modern_version_probes_again() {
    let mut h = Harness::new(Config::default());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let _probe = h.sent_one();
    h.advance_to_next_timeout();
    let init = h.sent_one();
    assert_eq!(init["method"], "initialize");
    let data = json!({"supported": ["2026-07-28"], "requested": "2025-11-25"});
    h.reply_error(&init, -32602, Some(data));
    let again = h.sent_one();
    assert_eq!(again["method"], "server/discover");
    h.reply(&again, discover_result());
    assert_eq!(h.events(), ["ready modern 2026-07-28"]);
    // Without a modern version listed, the refusal stands.
    let config = Config { era: EraPreference::LegacyOnly, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    h.reply_error(&init, -32602, Some(json!({"supported": ["2025-06-18"]})));
    assert_eq!(h.events(), ["closed invalid_params"]);
    // Nor is a host that speaks only the legacy era moved to the modern one.
    let config = Config { era: EraPreference::LegacyOnly, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    h.reply_error(&init, -32022, Some(json!({"supported": ["2026-07-28"]})));
    assert_eq!(h.events(), ["closed unsupported_protocol_version"]);
    assert!(h.take_sent().is_empty(), "no probe");
}

/// Restarts off; the probe timed out, `initialize` was refused by a modern server (-32022),
/// and the probe has gone out again, unanswered.
fn probing_again_after_a_modern_refusal() -> Harness {
    let mut h = Harness::new(no_restart());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let _probe = h.sent_one();
    h.advance_to_next_timeout();
    let init = h.sent_one();
    let data = json!({"supported": ["2026-07-28"], "requested": "2025-11-25"});
    h.reply_error(&init, -32022, Some(data));
    assert_eq!(h.sent_one()["method"], "server/discover");
    h
}

/// A server that refused `initialize` as a modern one and then exits during the probe that
/// followed has crashed: with restarts off the engine closes. Taken as a legacy server's exit,
/// it was respawned for `initialize` again and again, with no backoff.
#[test]
fn a_known_modern_server_exiting_during_the_probe_is_a_crash() {
    let mut h = probing_again_after_a_modern_refusal();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    assert!(!h.engine.wants_transport(), "no respawn for initialize");
    assert_eq!(h.engine.state(), ServerState::Closed);
}

/// Probing again is bounded: a server that said it is modern and then does not answer gets
/// a few more probes, never a second `initialize`, then the start fails.
#[test]
fn a_second_probe_timeout_after_a_modern_refusal_closes_instead_of_looping() {
    let mut h = probing_again_after_a_modern_refusal();
    let mut probes = 1;
    while h.engine.state() != ServerState::Closed {
        assert!(probes <= 8, "the probes never end");
        h.advance_to_next_timeout();
        for frame in h.take_sent() {
            assert_eq!(frame["method"], "server/discover", "no second initialize");
            probes += 1;
        }
    }
    assert!(probes > 1, "a slow server is probed again");
    assert_eq!(h.events(), ["closed deadline_exceeded"]);
}

/// A server that refuses `initialize` as a modern one (-32022) and then answers the probe in
/// the version it listed like a legacy server (an error, here "method not found") is not
/// given `initialize` again: the two would alternate for good. The start fails.
#[test]
fn a_legacy_answer_after_a_modern_refusal_closes_instead_of_looping() {
    let mut h = Harness::new(no_restart());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let mut probes = 0;
    while h.engine.state() != ServerState::Closed {
        assert!(probes < 4, "discover and initialize alternate");
        let Some(frame) = h.take_sent().into_iter().next() else { break };
        match frame["method"].as_str() {
            Some("server/discover") => {
                probes += 1;
                h.reply_error(&frame, -32601, None);
            }
            Some("initialize") => {
                let data = json!({"supported": ["2026-07-28"], "requested": "2025-11-25"});
                h.reply_error(&frame, -32022, Some(data));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(probes, 2, "the first probe, and the one after the modern refusal");
    assert_eq!(h.engine.state(), ServerState::Closed);
    assert_eq!(h.events(), ["closed no_common_version"]);
}

/// A host that speaks only the modern era never falls back to `initialize`: a probe that
/// timed out (a server slow to start) is sent again, and its answer settles the era.
#[test]
fn modern_only_probes_again_after_a_probe_timeout() {
    let config = Config { era: crate::EraPreference::ModernOnly, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let _probe = h.sent_one();
    h.advance_to_next_timeout();
    while h.engine.state() == ServerState::Probing {
        let sent = h.take_sent();
        if let Some(again) = sent.first() {
            assert_eq!(again["method"], "server/discover", "{sent:?}");
            h.reply(again, discover_result());
            break;
        }
        h.advance_to_next_timeout();
    }
    assert_eq!(h.events(), ["ready modern 2026-07-28"]);
}

/// A legacy answer to `initialize` that is an error without a modern version list still
/// closes, as before.
#[test]
fn initialize_refused_without_a_modern_version_closes() {
    let mut h = Harness::new(no_restart());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.reply_error(&probe, -32601, None);
    let init = h.sent_one();
    h.reply_error(
        &init,
        -32022,
        Some(json!({"supported": ["2025-11-25"], "requested": "2025-11-25"})),
    );
    assert!(h.take_sent().is_empty());
    assert_eq!(h.engine.state(), ServerState::Closed);
}

#[test]
fn unsupported_version_error_is_modern_evidence() {
    // Only handshake revisions in common: -32022 leads to initialize.
    let mut h = Harness::new(Config::default());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.reply_error(
        &probe,
        -32022,
        Some(json!({"supported": ["2025-11-25"], "requested": "2026-07-28"})),
    );
    assert_eq!(h.sent_one()["method"], "initialize");

    // Nothing in common: a typed error, and never a fallback to initialize.
    let mut h = Harness::new(Config::default());
    let c = h.call("echo", "{}");
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.reply_error(
        &probe,
        -32022,
        Some(json!({"supported": ["2099-01-01"], "requested": "2026-07-28"})),
    );
    assert!(h.take_sent().is_empty());
    assert_eq!(
        h.events(),
        [format!("failed {} no_common_version", c.get()), "closed no_common_version".into()]
    );
    assert_eq!(h.engine.state(), ServerState::Closed);
    assert!(matches!(
        h.engine.call_tool(h.now, "x", raw("{}"), &CallOptions::default()),
        Err(RequestError::Closed)
    ));
}

/// Conformance `request-metadata` (sep-2575-client-retry-supported-version): the first
/// `server/discover` gets -32022 naming the very version asked for as supported. The client
/// asks once more in that version with a new id; a second refusal is a typed error that says so.
#[test]
fn a_refused_version_the_server_lists_is_asked_once_more_with_a_new_id() {
    let refusal = json!({"supported": ["2026-07-28"], "requested": "2026-07-28"});
    let mut h = Harness::new(Config::default());
    let c = h.call("echo", "{}");
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let first = h.sent_one();
    h.reply_error(&first, -32022, Some(refusal.clone()));
    let second = h.sent_one();
    assert_eq!(second["method"], "server/discover");
    assert_ne!(second["id"], first["id"], "a retry is a new request");
    assert_eq!(second["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    h.reply(&second, discover_result());
    assert_eq!(h.events(), ["ready modern 2026-07-28"]);
    assert_eq!(h.sent_one()["params"]["name"], "echo", "the queued call goes out");
    let _ = c;

    // Refused twice: no loop, and the error names the refusal, not "no version in common".
    let mut h = Harness::new(Config::default());
    let c = h.call("echo", "{}");
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let first = h.sent_one();
    h.reply_error(&first, -32022, Some(refusal.clone()));
    let second = h.sent_one();
    h.reply_error(&second, -32022, Some(refusal));
    assert!(h.take_sent().is_empty(), "no third probe");
    assert_eq!(
        h.events(),
        [format!("failed {} version_refused", c.get()), "closed version_refused".into()]
    );
    let e = CallError::Peer(PeerError::VersionRefused(ProtocolVersion::MODERN));
    assert!(e.to_string().contains("refused protocol version 2026-07-28 twice"), "{e}");
}

/// Pretty-printed arguments from the host must not split a stdio frame: their line breaks are
/// JSON whitespace, and the frame goes out as one line (the harness asserts it) that still
/// carries the same arguments.
#[test]
fn pretty_printed_arguments_stay_on_one_line() {
    let mut h = Harness::ready_modern();
    let args = "{\n  \"text\": \"a\\nb\",\r\n  \"n\": [1,\n 2]\n}";
    h.call("echo", args);
    let sent = h.sent_one();
    assert_eq!(sent["params"]["arguments"], json!({"text": "a\nb", "n": [1, 2]}));
    let prompt: &RawValue = serde_json::from_str("{\n\"k\": \"v\"\n}").unwrap();
    h.engine.get_prompt(h.now, "p", Some(prompt), &CallOptions::default()).unwrap();
    assert_eq!(h.sent_one()["params"]["arguments"], json!({"k": "v"}));
}

/// Over HTTP the body has its length: pretty-printed arguments go as the host wrote them.
#[test]
fn over_http_pretty_printed_arguments_are_sent_as_they_are() {
    let mut h = Harness::ready_http();
    let args = "{\n  \"text\": \"a\\nb\",\r\n  \"n\": [1,\n 2]\n}";
    h.call("echo", args);
    let mut body = Vec::new();
    assert!(h.engine.poll_transmit(h.now, &mut body).is_some());
    assert!(body.windows(args.len()).any(|w| w == args.as_bytes()), "the host's bytes");
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(sent["params"]["arguments"], json!({"text": "a\nb", "n": [1, 2]}));
}

#[test]
fn modern_only_refuses_legacy_servers() {
    let config = Config { era: EraPreference::ModernOnly, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.reply_error(&probe, -32601, None);
    assert!(h.take_sent().is_empty());
    assert_eq!(h.events(), ["closed no_common_version"]);
}

#[test]
fn legacy_only_skips_the_probe() {
    let config = Config { era: EraPreference::LegacyOnly, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    assert_eq!(h.sent_one()["method"], "initialize");
}

/// `restart` is for a server waiting for its transport (degraded, or between processes): on a
/// server whose transport is up it changes nothing, and asks for no transport a driver would
/// never give (which kept a host from ever being idle).
#[test]
fn restarting_a_server_whose_transport_is_up_changes_nothing() {
    for mut h in [Harness::ready_modern(), Harness::ready_http()] {
        h.engine.restart();
        assert!(!h.engine.wants_transport());
        assert!(matches!(h.engine.state(), ServerState::Ready(..)));
    }
    // Between processes it asks for one at once.
    let mut h = Harness::ready_modern();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(3)));
    assert!(!h.engine.wants_transport(), "the restart waits for its backoff");
    h.engine.restart();
    assert!(h.engine.wants_transport(), "the host asked for it now");
}

#[test]
fn process_exit_during_probe_respawns_once_for_initialize() {
    let mut h = Harness::new(no_restart());
    let c = h.call("echo", "{}");
    assert!(h.engine.wants_transport());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    assert!(!h.engine.wants_transport());
    let _probe = h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(3)));
    assert!(h.engine.wants_transport(), "the engine asks for a new process");
    assert!(h.events().is_empty(), "queued calls survive the probe's death");
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    assert_eq!(init["method"], "initialize");
    // A second death is final: every call fails with the exit, and the engine closes.
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(3)));
    assert!(!h.engine.wants_transport());
    assert_eq!(
        h.events(),
        [format!("failed {} process_exit", c.get()), "closed process_exit".into()]
    );
}

#[test]
fn initialize_error_closes_with_the_protocol_error() {
    let config = Config { era: EraPreference::LegacyOnly, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    h.reply_error(&init, -32602, None);
    assert_eq!(h.events(), ["closed invalid_params"]);
}

#[test]
fn initialize_with_unknown_version_fails() {
    let config = Config { era: EraPreference::LegacyOnly, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    h.reply(&init, json!({"protocolVersion": "2024-01-01"}));
    assert_eq!(h.events(), ["closed no_common_version"]);
}

#[test]
fn deadline_fails_locally_and_tells_the_server() {
    let mut h = Harness::ready_modern();
    let opts = CallOptions::timeout(Duration::from_millis(200));
    let c = h.engine.call_tool(h.now, "slow", raw("{}"), &opts).unwrap();
    let req = h.sent_one();
    assert_eq!(h.engine.poll_timeout(), Some(h.now + Duration::from_millis(200)));
    h.advance(Duration::from_millis(199));
    assert!(h.events().is_empty());
    h.advance_to_next_timeout();
    let cancel = h.sent_one();
    assert_eq!(
        cancel,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": req["id"]}})
    );
    assert_eq!(h.events(), [format!("failed {} deadline_exceeded", c.get())]);
    assert_eq!(h.engine.poll_timeout(), None);
    // A reply after the deadline is late, never a second completion.
    h.reply(&req, json!({"content": []}));
    assert!(h.events().is_empty());
    assert_eq!(h.engine.stats().late_responses, 1);
}

#[test]
fn deadline_runs_while_queued_and_sends_nothing() {
    let mut h = Harness::new(Config::default());
    let opts = CallOptions::timeout(Duration::from_millis(50));
    let c = h.engine.call_tool(h.now, "echo", raw("{}"), &opts).unwrap();
    h.advance(Duration::from_millis(50));
    assert_eq!(h.events(), [format!("failed {} deadline_exceeded", c.get())]);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.reply(&probe, discover_result());
    assert!(h.take_sent().is_empty(), "the expired call is never written");
}

#[test]
fn cancel_ends_the_wait_at_once_and_a_late_reply_is_counted() {
    let mut h = Harness::ready_modern();
    let c = h.call("slow", r#"{"ms":5000}"#);
    let req = h.sent_one();
    h.engine.cancel(h.now, c).unwrap();
    assert_eq!(h.events(), [format!("failed {} cancelled", c.get())]);
    let note = h.sent_one();
    assert_eq!(note["method"], "notifications/cancelled");
    assert_eq!(note["params"]["requestId"], req["id"]);
    assert_eq!(h.engine.cancel(h.now, c), Err(CancelError::NotPending));
    h.reply(&req, json!({"content": []}));
    h.reply_error(&req, -32800, None);
    assert!(h.events().is_empty());
    assert_eq!(h.engine.stats().late_responses, 2);
    assert_eq!(h.engine.pending(), 0);
}

#[test]
fn cancel_before_sending_sends_nothing() {
    let mut h = Harness::new(Config::default());
    let c = h.call("echo", "{}");
    h.engine.cancel(h.now, c).unwrap();
    assert_eq!(h.events(), [format!("failed {} cancelled", c.get())]);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.reply(&probe, discover_result());
    assert!(h.take_sent().is_empty());
}

#[test]
fn the_handshake_cannot_be_cancelled() {
    let mut h = Harness::new(Config::default());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    let id = wire(&probe);
    let probe_call = h.engine.requests.call_id(id.slot()).unwrap();
    assert_eq!(h.engine.cancel(h.now, probe_call), Err(CancelError::Handshake));
}

#[test]
fn reply_racing_a_cancel_is_delivered_once_at_most() {
    // The reply is already in the engine when the host cancels: the call is done, cancel fails.
    let mut h = Harness::ready_modern();
    let c = h.call("echo", "{}");
    let req = h.sent_one();
    h.reply(&req, json!({"content": []}));
    assert_eq!(h.engine.cancel(h.now, c), Err(CancelError::NotPending));
    assert_eq!(h.events().len(), 1);
    assert!(h.take_sent().is_empty(), "no cancel notification for a finished call");
}

#[test]
fn out_of_order_duplicate_and_unknown_replies() {
    let mut h = Harness::ready_modern();
    let a = h.call("echo", r#"{"text":"a"}"#);
    let b = h.call("echo", r#"{"text":"b"}"#);
    let sent = h.take_sent();
    assert_eq!(sent.len(), 2);
    h.reply(&sent[1], json!({"n": "b"}));
    h.reply(&sent[0], json!({"n": "a"}));
    h.reply(&sent[1], json!({"n": "b again"}));
    h.peer(json!({"jsonrpc": "2.0", "id": 987654321, "result": {}}));
    h.peer(json!({"jsonrpc": "2.0", "id": "not-ours", "result": {}}));
    h.peer(json!({"jsonrpc": "2.0", "id": -1, "error": {"code": 1, "message": "x"}}));
    assert_eq!(
        h.events(),
        [format!("done {} {{\"n\":\"b\"}}", b.get()), format!("done {} {{\"n\":\"a\"}}", a.get())]
    );
    let s = h.engine.stats();
    assert_eq!((s.duplicate_responses, s.unknown_ids), (1, 3));
}

#[test]
fn error_reply_is_data_not_a_panic_and_null_id_errors_are_counted() {
    let mut h = Harness::ready_modern();
    let c = h.call("nope", "{}");
    let req = h.sent_one();
    h.peer(
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request"}}),
    );
    h.reply_error(&req, -32602, Some(json!({"tool": "nope"})));
    let e = h.engine.poll_event().unwrap();
    match e {
        Event::CallFailed { call, error: CallError::Protocol(rpc), .. } => {
            assert_eq!(call, c);
            assert_eq!(rpc.code, -32602);
            assert_eq!(rpc.data.as_deref(), Some(r#"{"tool":"nope"}"#));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.engine.stats().errors_without_id, 1);
}

#[test]
fn is_error_results_are_completions() {
    let mut h = Harness::ready_modern();
    let c = h.call("fail", "{}");
    let req = h.sent_one();
    h.reply(&req, json!({"resultType": "complete", "isError": true, "content": []}));
    let events = h.events();
    assert_eq!(events.len(), 1);
    assert!(events[0].starts_with(&format!("done {}", c.get())) && events[0].ends_with("isError"));
}

#[test]
fn result_type_missing_is_complete_unknown_is_invalid_input_required_is_carried() {
    let mut h = Harness::ready_modern();
    let a = h.call("t", "{}");
    let b = h.call("t", "{}");
    let c = h.call("t", "{}");
    let sent = h.take_sent();
    h.reply(&sent[0], json!({"content": []}));
    h.reply(&sent[1], json!({"resultType": "task", "taskId": "x"}));
    h.reply(&sent[2], json!({"resultType": "input_required", "requestState": "s"}));
    let mut kinds = Vec::new();
    while let Some(e) = h.engine.poll_event() {
        kinds.push(match e {
            Event::CallDone { call, result, .. } => (call, Some(result.result_type())),
            Event::CallFailed { call, error, .. } => {
                assert_eq!(error, CallError::Peer(PeerError::InvalidResult));
                (call, None)
            }
            other => panic!("{other:?}"),
        });
    }
    assert_eq!(kinds, [(a, Some(ResultType::Complete)), (b, None)]);
    // Only requestState (load shedding): retried at once, under a new id, with the state.
    let retry = h.sent_one();
    assert_ne!(retry["id"], sent[2]["id"]);
    assert_eq!(retry["params"]["requestState"], "s");
    assert!(retry["params"].get("inputResponses").is_none());
    h.reply(&retry, json!({"content": []}));
    match h.engine.poll_event() {
        Some(Event::CallDone { call, result, record }) => {
            assert_eq!((call, result.result_type(), record.rounds), (c, ResultType::Complete, 1));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn pagination_follows_cursors_including_the_empty_one() {
    let mut h = Harness::ready_modern();
    let c = h.engine.list(h.now, Method::ToolsList, &CallOptions::default()).unwrap();
    let p1 = h.sent_one();
    assert!(p1["params"].get("cursor").is_none());
    h.reply(&p1, json!({"resultType": "complete", "tools": [{"name": "a"}, {"name": "b"}], "nextCursor": ""}));
    let p2 = h.sent_one();
    assert_eq!(p2["params"]["cursor"], "");
    assert_ne!(p2["id"], p1["id"], "each page has its own id");
    assert!(p2["params"]["_meta"].is_object());
    h.reply(&p2, json!({"tools": [], "nextCursor": "c2"}));
    let p3 = h.sent_one();
    assert_eq!(p3["params"]["cursor"], "c2");
    h.reply(&p3, json!({"tools": [{"name": "c"}], "ttlMs": 0}));
    assert_eq!(
        h.events(),
        [format!(
            "done {} {{\"tools\":[{{\"name\":\"a\"}},{{\"name\":\"b\"}},{{\"name\":\"c\"}}],\"ttlMs\":0}}",
            c.get()
        )]
    );
    // A reply to an earlier page's id is late, not a second page.
    h.reply(&p1, json!({"tools": [{"name": "zzz"}]}));
    assert_eq!(h.engine.stats().late_responses, 1);
}

#[test]
fn a_repeated_cursor_is_a_typed_error_not_a_loop() {
    let mut h = Harness::ready_modern();
    let c = h.engine.list(h.now, Method::PromptsList, &CallOptions::default()).unwrap();
    let p1 = h.sent_one();
    h.reply(&p1, json!({"prompts": [], "nextCursor": "same"}));
    let p2 = h.sent_one();
    h.reply(&p2, json!({"prompts": [], "nextCursor": "same"}));
    assert!(h.take_sent().is_empty());
    assert_eq!(h.events(), [format!("failed {} cursor_repeated", c.get())]);
}

#[test]
fn page_limit_is_enforced() {
    let config = Config { max_pages: 3, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.reply(&probe, discover_result());
    h.events();
    let c = h.engine.list(h.now, Method::ResourcesList, &CallOptions::default()).unwrap();
    for i in 0..3 {
        let p = h.sent_one();
        h.reply(&p, json!({"resources": [], "nextCursor": format!("c{i}")}));
    }
    assert_eq!(h.events(), [format!("failed {} too_many_pages", c.get())]);
}

/// Issue 21: pages of large items behind ever new cursors stop at the listing's byte cap,
/// long before the page cap, with `too_large`; the pages gathered so far are freed.
#[test]
fn a_listing_stops_at_its_byte_cap() {
    let config = Config { max_listing_bytes: 64 * 1024, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.reply(&probe, discover_result());
    h.events();
    let c = h.engine.list(h.now, Method::ToolsList, &CallOptions::default()).unwrap();
    let big = "x".repeat(10_000);
    let mut pages = 0;
    let events = loop {
        let p = h.sent_one();
        let tool = json!({"name": format!("t{pages}"), "description": big, "inputSchema": {}});
        h.reply(&p, json!({"tools": [tool], "nextCursor": format!("c{pages}")}));
        pages += 1;
        assert!(pages < 1000, "no cap");
        let events = h.events();
        if !events.is_empty() {
            break events;
        }
    };
    assert_eq!(events, [format!("failed {} too_large", c.get())]);
    assert_eq!(pages, 7, "six pages fit in 64 KiB, the seventh does not");
    assert_eq!(h.engine.stats().too_large, 1);
    assert!(h.take_sent().is_empty(), "no eighth page asked for");
}

/// Issue 21: a reply nested deeper than the JSON limit cannot be read, but its id can be at
/// either end: that call fails at once with `too_deep` instead of waiting for its deadline.
/// One whose id is nowhere near the ends is dropped and counted, as before.
#[test]
fn a_reply_nested_too_deep_fails_its_call_at_once() {
    let mut h = Harness::ready_modern();
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let first = h.call("t", "{}");
    let second = h.call("t", "{}");
    let sent = h.take_sent();
    let (a, b) = (sent[0]["id"].to_string(), sent[1]["id"].to_string());
    // The id first, as most servers write it; then the id last.
    let frames = [
        format!(r#"{{"jsonrpc":"2.0","id":{a},"result":{{"content":{deep}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","result":{{"content":{deep}}},"id":{b}}}"#),
    ];
    for frame in &frames {
        h.engine.handle_message(h.now, frame.as_bytes());
    }
    assert_eq!(
        h.events(),
        [format!("failed {} too_deep", first.get()), format!("failed {} too_deep", second.get())]
    );
    let third = h.call("t", "{}");
    let _ = h.take_sent();
    let hidden = format!(r#"{{"jsonrpc":"2.0","result":{{"a":{deep},"id":1}},"x":{deep}}}"#);
    h.engine.handle_message(h.now, hidden.as_bytes());
    assert!(h.events().is_empty());
    assert_eq!(h.engine.stats().invalid_frames, 3);
    assert_eq!(h.engine.pending(), 1, "{}", third.get());
}

/// A reply that is JSON to its writer but that mcpoll does not read (a lone surrogate from a
/// string cut inside an emoji, a number past f64, bytes that are not UTF-8) fails its call at
/// once when its id is at either end; a banner line is only counted.
#[test]
fn a_reply_that_does_not_scan_fails_its_call_at_once() {
    let mut h = Harness::ready_modern();
    let calls: Vec<CallId> = (0..3).map(|_| h.call("t", "{}")).collect();
    let ids: Vec<String> = h.take_sent().iter().map(|s| s["id"].to_string()).collect();
    let frames: [Vec<u8>; 4] = [
        format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":"ab\ud83d"}}]}}}}"#, ids[0]).into_bytes(),
        format!(r#"{{"jsonrpc":"2.0","result":{{"n":1e999}},"id":{}}}"#, ids[1]).into_bytes(),
        [format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{"text":""#, ids[2]).as_bytes(), b"\xff\xfe", b"\"}}"].concat(),
        b"Server listening on stdio".to_vec(),
    ];
    for frame in &frames {
        h.engine.handle_message(h.now, frame);
    }
    let failed: Vec<String> =
        calls.iter().map(|c| format!("failed {} invalid_result", c.get())).collect();
    assert_eq!(h.events(), failed);
    assert_eq!(h.engine.stats().invalid_frames, 4);
}

/// A server that writes UTF-8 with a byte order mark puts one before its first line: that
/// line is still read (it is usually the probe's answer).
#[test]
fn a_byte_order_mark_before_a_frame_is_ignored() {
    let mut h = Harness::new(Config::default());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    let reply = json!({"jsonrpc": "2.0", "id": probe["id"], "result": discover_result()});
    let frame = [b"\xEF\xBB\xBF".as_slice(), &serde_json::to_vec(&reply).unwrap()].concat();
    h.engine.handle_message(h.now, &frame);
    assert_eq!(h.events(), ["ready modern 2026-07-28"]);
    assert_eq!(h.engine.stats().invalid_frames, 0);
}

/// A reply whose members do not form one (a result beside an error, an error without an
/// integer code, an error that is not an object) fails its call at once as an invalid result,
/// instead of leaving it to wait out its deadline. A malformed message that is no reply (a
/// method that is not a string) is only counted.
#[test]
fn a_malformed_reply_fails_its_call_at_once() {
    let mut h = Harness::ready_modern();
    let calls: Vec<CallId> = (0..3).map(|_| h.call("t", "{}")).collect();
    let sent = h.take_sent();
    let ids: Vec<String> = sent.iter().map(|f| f["id"].to_string()).collect();
    let frames = [
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{}},"error":{{"code":1,"message":"m"}}}}"#,
            ids[0]
        ),
        format!(r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":"x","message":"m"}}}}"#, ids[1]),
        format!(r#"{{"jsonrpc":"2.0","error":7,"id":{}}}"#, ids[2]),
        r#"{"jsonrpc":"2.0","id":1,"method":7}"#.to_owned(),
    ];
    for frame in &frames {
        h.engine.handle_message(h.now, frame.as_bytes());
    }
    let failed: Vec<String> =
        calls.iter().map(|c| format!("failed {} invalid_result", c.get())).collect();
    assert_eq!(h.events(), failed);
    assert_eq!(h.engine.stats().invalid_frames, 4);
    assert!(h.take_sent().is_empty(), "no cancellation for calls that were answered");
    // A malformed answer to the probe is left to the probe's timeout, which falls back.
    let mut h = Harness::new(Config::default());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    let frame = format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}},"error":{{}}}}"#, probe["id"]);
    h.engine.handle_message(h.now, frame.as_bytes());
    assert_eq!(h.engine.state(), ServerState::Probing);
    h.advance_to_next_timeout();
    assert_eq!(h.sent_one()["method"], "initialize");
}

#[test]
fn progress_is_routed_to_the_call_that_asked() {
    let mut h = Harness::ready_modern();
    let opts = CallOptions { progress: true, ..CallOptions::default() };
    let c = h.engine.call_tool(h.now, "slow", raw("{}"), &opts).unwrap();
    let quiet = h.call("slow", "{}");
    let sent = h.take_sent();
    assert_eq!(sent[0]["params"]["_meta"]["progressToken"], json!(c.get()));
    assert!(sent[1]["params"]["_meta"].get("progressToken").is_none());
    let progress = |token: u64, n: f64| {
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": token, "progress": n, "total": 3.0, "message": "step"}})
    };
    h.peer(progress(c.get(), 1.0));
    h.peer(progress(quiet.get(), 1.0));
    h.peer(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"bad": 1}}));
    assert_eq!(h.events(), [format!("progress {} 1 Some(3.0) Some(\"step\")", c.get())]);
    // A number with no generation is no call handle: the host's to read.
    h.peer(progress(424242, 1.0));
    let events = h.events();
    assert!(events.len() == 1 && events[0].contains("notifications/progress"), "{events:?}");
    // Late progress of a call that ended (cancelled here) is dropped, as before: handed to
    // the host as a notification it named a call already seen ending.
    let late = h.engine.call_tool(h.now, "slow", raw("{}"), &opts).unwrap();
    h.take_sent();
    h.engine.cancel(h.now, late).unwrap();
    h.events();
    h.peer(progress(late.get(), 2.0));
    assert!(h.events().is_empty());
    // Required, a number: a report without one is refused, not read as 0 (which looked like
    // progress going back).
    let invalid = h.engine.stats().invalid_frames;
    for params in
        [json!({"progressToken": c.get()}), json!({"progressToken": c.get(), "progress": "50%"})]
    {
        h.peer(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}));
    }
    assert!(h.events().is_empty());
    assert_eq!(h.engine.stats().invalid_frames, invalid + 2);
}

/// The server's log messages reach the host as notifications (they were only logged at
/// TRACE, though the docs say what the engine does not handle reaches the host).
#[test]
fn log_messages_reach_the_host() {
    let mut h = Harness::ready_legacy();
    h.peer(json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "error", "data": "disk full"}}));
    let events = h.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].contains("notifications/message") && events[0].contains("disk full"));
}

/// A progress token the engine never writes is one the host chose (in a `_meta` of its own,
/// `request_raw`): its notifications reach the host as any notification the engine does not
/// handle (they were dropped), and the host's `_meta` never writes a second `progressToken`
/// beside the engine's (servers keep the last: the call's progress went to the host's token).
#[test]
fn a_progress_token_the_host_chose_is_the_hosts() {
    let mut h = Harness::ready_modern();
    let params = raw(r#"{"_meta":{"progressToken":"job-1","vendor/x":1},"q":2}"#);
    let plain = CallOptions::default();
    h.engine.request_raw(h.now, "vendor/run", Some(params), &plain).unwrap();
    let sent = h.sent_one();
    assert_eq!(sent["params"]["_meta"]["progressToken"], "job-1", "no engine token: the host's");
    // A string, or a number as many SDKs use (the engine read one as its own, found no call,
    // and dropped it).
    for token in [json!("job-1"), json!(7)] {
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 1}});
        h.peer(progress);
        let events = h.events();
        assert_eq!(events.len(), 1, "{token}: {events:?}");
        assert!(events[0].contains("notifications/progress"), "{events:?}");
    }
    // Nor may it write again what the engine writes in every request of the era.
    let version = raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01"}}"#);
    h.engine.request_raw(h.now, "vendor/run", Some(version), &plain).unwrap();
    let frame = h.sent_one();
    assert_eq!(frame["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");

    let asked = CallOptions { progress: true, ..CallOptions::default() };
    let c = h.engine.request_raw(h.now, "vendor/run", Some(params), &asked).unwrap();
    // Parsed as servers do, the last of two keys wins.
    let frame = h.sent_one();
    assert_eq!(frame["params"]["_meta"]["progressToken"], json!(c.get()));
    assert_eq!(frame["params"]["_meta"]["vendor/x"], 1, "the host's other members stay");
}

#[test]
fn legacy_server_requests_are_answered() {
    let mut h = Harness::ready_legacy();
    h.peer(json!({"jsonrpc": "2.0", "id": "p-1", "method": "ping"}));
    assert_eq!(h.sent_one(), json!({"jsonrpc": "2.0", "id": "p-1", "result": {}}));
    h.peer(json!({"jsonrpc": "2.0", "id": 9, "method": "roots/list", "params": {}}));
    let reply = h.sent_one();
    assert_eq!(reply["id"], 9);
    assert_eq!(reply["error"]["code"], -32601);
    h.peer(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    assert_eq!(h.events(), ["list_changed Tools"]);
}

#[test]
fn ping_before_initialized_is_answered_first() {
    let config = Config { era: EraPreference::LegacyOnly, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    h.peer(json!({"jsonrpc": "2.0", "id": 0, "method": "ping"}));
    assert_eq!(h.sent_one(), json!({"jsonrpc": "2.0", "id": 0, "result": {}}));
    h.reply(&init, json!({"protocolVersion": "2025-11-25"}));
    assert_eq!(h.sent_one()["method"], "notifications/initialized");
}

/// A ping's reply keeps a copy of its id: ids of megabytes from a server that stopped
/// reading filled the 256 waiting replies with gigabytes. An id past the bound is ignored.
#[test]
fn a_server_request_with_an_oversized_id_is_ignored() {
    let mut h = Harness::ready_legacy();
    let long = "x".repeat(64 << 10);
    h.peer(json!({"jsonrpc": "2.0", "id": long, "method": "ping"}));
    assert!(h.take_sent().is_empty(), "an oversized id was answered");
    assert_eq!(h.engine.stats().invalid_frames, 1);
    let usual = "y".repeat(64);
    h.peer(json!({"jsonrpc": "2.0", "id": usual, "method": "ping"}));
    assert_eq!(h.sent_one(), json!({"jsonrpc": "2.0", "id": usual, "result": {}}));
}

/// Each zero timeout is refused under its own name: a zero handshake timeout passed, and
/// made `initialize` due as it was made (never sent: a legacy server was never ready).
#[test]
fn zero_timeouts_are_refused_by_name() {
    let zero = Duration::ZERO;
    let refused = |config: Config| Engine::new(config, Instant::now()).map(drop).unwrap_err().field;
    assert_eq!(refused(Config { default_timeout: zero, ..Config::default() }), "default_timeout");
    assert_eq!(refused(Config { probe_timeout: zero, ..Config::default() }), "probe_timeout");
    let handshake = Config { handshake_timeout: zero, ..Config::default() };
    assert_eq!(refused(handshake), "handshake_timeout");
}

#[test]
fn junk_frames_are_skipped_and_counted() {
    let mut h = Harness::ready_modern();
    for junk in [
        &b"server starting"[..],
        b"{",
        b"[1,2]",
        b"{\"jsonrpc\":\"1.0\"}",
        b"\xff\xfe",
        b"null",
        b"",
    ] {
        h.engine.handle_message(h.now, junk);
    }
    assert_eq!(h.engine.stats().invalid_frames, 7);
    assert!(h.events().is_empty());
    let c = h.call("echo", "{}");
    let req = h.sent_one();
    h.reply(&req, json!({}));
    assert_eq!(h.events(), [format!("done {} {{}}", c.get())]);
}

#[test]
fn oversize_reply_fails_its_call_when_the_id_is_readable() {
    let mut h = Harness::ready_modern();
    let c = h.call("big", "{}");
    let d = h.call("big", "{}");
    let sent = h.take_sent();
    // Python SDK layout: the id near the start.
    let head = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"content\":[", sent[0]["id"]);
    h.engine.handle_oversize(h.now, head.as_bytes(), b"xxxx]}}");
    // TypeScript SDK layout: the id at the very end.
    let tail = format!("\"}}]}},\"jsonrpc\":\"2.0\",\"id\":{}}}", sent[1]["id"]);
    h.engine.handle_oversize(
        h.now,
        b"{\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"xxxx",
        tail.as_bytes(),
    );
    h.engine.handle_oversize(h.now, b"xxxx", b"xxxx");
    assert_eq!(
        h.events(),
        [format!("failed {} too_large", c.get()), format!("failed {} too_large", d.get())]
    );
    assert_eq!(h.engine.stats().too_large, 3);
}

#[test]
fn a_full_table_is_overloaded() {
    let config = Config { max_pending: 2, ..Config::default() };
    let mut h = Harness::new(config);
    h.call("a", "{}");
    h.call("b", "{}");
    let args = raw("{}");
    assert_eq!(
        h.engine.call_tool(h.now, "c", args, &CallOptions::default()),
        Err(RequestError::Overloaded)
    );
    // The probe still gets a slot, its own: no call gives way.
    h.engine.handle_transport(h.now, TransportEvent::opened());
    assert_eq!(h.sent_one()["method"], "server/discover");
    assert!(h.events().is_empty());
    assert_eq!(h.engine.pending(), 3, "both calls, and the probe");
}

#[test]
fn transport_loss_fails_every_call_once() {
    let mut h = Harness::ready_with(no_restart());
    let a = h.call("a", "{}");
    let read = CallOptions { idempotency: Some(Idempotency::Read), ..CallOptions::default() };
    let b = h.engine.call_tool(h.now, "b", raw("{}"), &read).unwrap();
    h.take_sent();
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    // The write on the wire may have run: its delivery is unknown (as when restarts are on);
    // the read failed as it is.
    assert_eq!(
        h.events(),
        [
            format!("failed {} delivery_unknown", a.get()),
            format!("failed {} process_exit", b.get()),
            "closed process_exit".into()
        ]
    );
    assert_eq!(h.engine.pending(), 0);
    assert_eq!(h.engine.poll_timeout(), None);
    h.engine.handle_transport(h.now, TransportEvent::closed(exit(1)));
    assert!(h.events().is_empty(), "closing twice reports nothing new");
}

/// Client capabilities and extensions written over several lines (`to_string_pretty`, a
/// config file) go out on one line: they are copied into every request's `_meta` and into
/// `initialize`, and a stdio frame is one line. Copied as they were, the probe and the
/// handshake were split into lines that are not JSON, and the server never became ready.
#[test]
fn multi_line_capabilities_and_extensions_keep_stdio_frames_on_one_line() {
    let extensions = "{\n  \"io.example/skills\": {\r\n  }\n}".to_owned();
    let client_capabilities = "{\"experimental\": {\n\"x\": {}}}".to_owned();
    for era in [EraPreference::Auto, EraPreference::LegacyOnly] {
        let config = Config {
            era,
            extensions: extensions.clone(),
            client_capabilities: client_capabilities.clone(),
            ..Config::default()
        };
        let mut h = Harness::new(config);
        h.engine.handle_transport(h.now, TransportEvent::opened());
        let sent = h.take_sent();
        assert_eq!(sent.len(), 1, "{era:?}: the probe or the handshake, one line each");
        let meta = &sent[0]["params"];
        let caps = meta["capabilities"].clone();
        let caps = if caps.is_null() {
            meta["_meta"]["io.modelcontextprotocol/clientCapabilities"].clone()
        } else {
            caps
        };
        assert_eq!(caps["experimental"]["x"], json!({}), "{era:?}: {caps}");
        assert_eq!(caps["extensions"]["io.example/skills"], json!({}), "{era:?}: {caps}");
    }
}

#[test]
fn arguments_must_be_an_object() {
    let mut h = Harness::ready_modern();
    for bad in ["[]", "1", "\"x\"", "null"] {
        assert_eq!(
            h.engine.call_tool(h.now, "t", raw(bad), &CallOptions::default()),
            Err(RequestError::ArgumentsNotObject)
        );
    }
}

#[test]
fn other_methods_encode_their_params() {
    let mut h = Harness::ready_modern();
    let o = CallOptions::default();
    h.engine.read_resource(h.now, "demo://readme", &o).unwrap();
    h.engine.get_prompt(h.now, "greet", Some(raw(r#"{"name":"Ann"}"#)), &o).unwrap();
    h.engine
        .complete(h.now, raw(r#"{"type":"ref/prompt","name":"greet"}"#), "name", "A", &o)
        .unwrap();
    let trace = TraceContext {
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
        ..Default::default()
    };
    h.engine.call_tool(h.now, "t", raw("{}"), &CallOptions { trace: Some(trace), ..o }).unwrap();
    let s = h.take_sent();
    assert_eq!(s[0]["method"], "resources/read");
    assert_eq!(s[0]["params"]["uri"], "demo://readme");
    assert_eq!(s[1]["params"]["arguments"]["name"], "Ann");
    assert_eq!(s[2]["params"]["argument"], json!({"name": "name", "value": "A"}));
    assert_eq!(s[2]["params"]["ref"]["type"], "ref/prompt");
    assert_eq!(
        s[3]["params"]["_meta"]["traceparent"],
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    );
}

#[test]
fn spec_example_tools_call_request_shape_matches() {
    // The validated spec example message (tests/data/spec): our encoding of the same call has the
    // same members (ids and client info aside).
    let example: Value =
        serde_json::from_str(include_str!("../../tests/data/spec/2026-tools-call-request.json"))
            .unwrap();
    let caps = example["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].to_string();
    // What the example declares, mcpoll declares only for what the host answers.
    let answers = crate::ServerRequestKinds { elicitation_form: true, ..Default::default() };
    let mut h = Harness::new(Config { client_capabilities: caps, answers, ..Config::default() });
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    h.reply(&probe, discover_result());
    let args = serde_json::to_string(&example["params"]["arguments"]).unwrap();
    h.call(example["params"]["name"].as_str().unwrap(), &args);
    let ours = h.sent_one();
    assert_eq!(ours["method"], example["method"]);
    assert_eq!(ours["params"]["arguments"], example["params"]["arguments"]);
    let (m, e) = (&ours["params"]["_meta"], &example["params"]["_meta"]);
    for key in
        ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"]
    {
        assert_eq!(m[key], e[key], "{key}");
    }
}

pub(super) fn raw(s: &str) -> &RawValue {
    serde_json::from_str(s).unwrap()
}

pub(super) fn exit(code: i32) -> TransportError {
    TransportError::ProcessExit(crate::error::ProcessExit {
        code: Some(code),
        signal: None,
        stderr_tail: "".into(),
    })
}

// ----- HTTP-facing transport events ----------------------------------------------------------

fn http_harness(era: EraPreference) -> Harness {
    let mut h = Harness::new(Config { era, ..Config::default() });
    h.engine.handle_transport(h.now, TransportEvent::opened_as(TransportKind::Http));
    h
}

pub(super) fn wire(v: &Value) -> WireId {
    let text = v["id"].to_string();
    WireId::parse(crate::proto::json::parse(text.as_bytes()).unwrap()).unwrap()
}

/// Drains transmits with their kinds (frames decoded when there are bytes).
pub(super) fn transmits(h: &mut Harness) -> Vec<(TransmitKind, Option<Value>)> {
    let mut out = Vec::new();
    loop {
        h.buf.clear();
        let Some(t) = h.engine.poll_transmit(h.now, &mut h.buf) else { break };
        let frame = (t.len > 0).then(|| serde_json::from_slice(&h.buf).unwrap());
        out.push((t.kind, frame));
    }
    out
}

/// Every call cancelled at once over 2026-07-28 HTTP gets its stream closed, past the bound
/// on control frames: a stream close is the only cancel such a server gets, and the dropped
/// ones left their connections busy until the server was done.
#[test]
fn stream_closes_are_never_dropped() {
    let config =
        Config { max_pending: 400, max_in_flight: 300, max_queued: 0, ..Config::default() };
    let mut h = Harness::ready_http_with(config);
    let calls: Vec<CallId> = (0..300).map(|i| h.call(&format!("t{i}"), "{}")).collect();
    assert_eq!(transmits(&mut h).len(), 300);
    for c in &calls {
        h.engine.cancel(h.now, *c).unwrap();
    }
    let closes = transmits(&mut h);
    assert_eq!(closes.len(), 300);
    assert!(closes.iter().all(|(k, _)| matches!(k, TransmitKind::CloseStream { .. })));
    assert_eq!(h.engine.stats().control_dropped, 0);
}

#[test]
fn http_probe_4xx_without_rpc_body_is_legacy_but_auth_and_5xx_are_not_evidence() {
    #[derive(Debug, PartialEq)]
    enum Then {
        Initialize,
        Unauthorized,
        ProbeAgain,
    }
    for (status, then) in [
        (400, Then::Initialize),
        (404, Then::Initialize),
        (405, Then::Initialize),
        (401, Then::Unauthorized),
        (403, Then::Unauthorized),
        (500, Then::ProbeAgain),
        (503, Then::ProbeAgain),
    ] {
        let mut h = http_harness(EraPreference::Auto);
        let probe = h.sent_one();
        let failure = ExchangeFailure::Transport(TransportError::HttpStatus(status));
        h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&probe), failure));
        let got = match h.take_sent().first() {
            Some(frame) if frame["method"] == "initialize" => Then::Initialize,
            Some(frame) => panic!("{status}: {frame}"),
            None if h.engine.state() == ServerState::Unauthorized => {
                let e = h.engine.authorization_error().cloned();
                assert_eq!(e, Some(CallError::Transport(TransportError::HttpStatus(status))));
                // Not closed: a new call probes again, as `retry_authorization` does.
                let opts = CallOptions::default();
                h.engine
                    .call_tool(h.now, "t", &RawValue::from_string("{}".into()).unwrap(), &opts)
                    .unwrap();
                assert_eq!(h.engine.state(), ServerState::Probing, "{status}");
                assert_eq!(h.sent_one()["method"], "server/discover", "{status}");
                Then::Unauthorized
            }
            None => {
                h.advance_to_next_timeout();
                assert_eq!(h.sent_one()["method"], "server/discover", "{status}");
                Then::ProbeAgain
            }
        };
        assert_eq!(got, then, "{status}");
    }
}

#[test]
fn http_probe_retries_transient_failures_with_backoff_then_gives_up() {
    let mut h = http_harness(EraPreference::Auto);
    let mut delays = Vec::new();
    for _ in 0..4 {
        let probe = h.sent_one();
        let failure = ExchangeFailure::Transport(TransportError::HttpStatus(503));
        h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&probe), failure));
        assert!(h.take_sent().is_empty());
        let at = h.engine.poll_timeout().unwrap();
        delays.push((at - h.now).as_millis());
        h.advance_to_next_timeout();
    }
    assert_eq!(delays, [250, 500, 1000, 2000]);
    let probe = h.sent_one();
    h.reply(&probe, discover_result());
    assert_eq!(h.engine.state(), ServerState::Ready(Era::Modern, ProtocolVersion::MODERN));
    // After the budget, a failure closes the engine.
    let mut h = http_harness(EraPreference::Auto);
    for _ in 0..5 {
        let probe = h.sent_one();
        let failure = ExchangeFailure::Transport(TransportError::ConnectionLost);
        h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&probe), failure));
        if h.engine.state() == ServerState::Closed {
            break;
        }
        h.advance_to_next_timeout();
    }
    assert_eq!(h.engine.state(), ServerState::Closed);
}

#[test]
fn http_unauthorized_is_auth_required_with_the_challenge() {
    let mut h = http_harness(EraPreference::Auto);
    let probe = h.sent_one();
    h.reply(&probe, discover_result());
    h.events();
    let c = h.call("echo", "{}");
    let req = h.sent_one();
    let challenge = crate::proto::challenge::AuthChallenge {
        scope: Some("tools".into()),
        ..Default::default()
    };
    let failure = ExchangeFailure::Unauthorized(challenge.clone());
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&req), failure));
    match h.engine.poll_event() {
        Some(Event::CallFailed {
            call,
            error: CallError::Peer(PeerError::AuthRequired(got)),
            ..
        }) => {
            assert_eq!(call, c);
            assert_eq!(*got, challenge);
        }
        other => panic!("{other:?}"),
    }
}

/// A result that is not an object is a broken reply: the call fails `InvalidResult`. It was
/// delivered as a success (`CallDone` with `null`, not an error).
#[test]
fn a_result_that_is_not_an_object_is_an_invalid_result() {
    let mut h = Harness::ready_modern();
    for bad in [json!(null), json!(5), json!([]), json!("x")] {
        let call = h.call("t", "{}");
        let sent = h.sent_one();
        h.reply(&sent, bad.clone());
        assert_eq!(h.events(), [format!("failed {} invalid_result", call.get())], "{bad}");
    }
}

/// A server refused for want of authorization and then closed by the host is closed.
#[test]
fn an_unauthorized_server_closed_is_closed() {
    let mut h = http_harness(EraPreference::Auto);
    let probe = h.sent_one();
    let failure = ExchangeFailure::Unauthorized(Default::default());
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&probe), failure));
    assert_eq!(h.engine.state(), ServerState::Unauthorized);
    h.engine.close(h.now);
    assert_eq!(h.engine.state(), ServerState::Closed);
    assert!(h.engine.authorization_error().is_some(), "why it was refused stays readable");
}

/// A held call (one the host's policy decides before it may go) starts no new probe on a
/// server refused for want of authorization: a call then refused locally (a disabled tool)
/// re-ran the probe, and over OAuth the whole flow. Its release does, as a new call would.
#[test]
fn a_held_call_retries_authorization_only_when_released() {
    let mut h = http_harness(EraPreference::Auto);
    let probe = h.sent_one();
    let failure = ExchangeFailure::Unauthorized(Default::default());
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&probe), failure));
    h.events();
    assert_eq!(h.engine.state(), ServerState::Unauthorized);
    let held = CallOptions { hold: true, ..CallOptions::default() };
    let call = h.engine.call_tool(h.now, "x", raw("{}"), &held).unwrap();
    assert!(h.take_sent().is_empty(), "nothing goes out for a held call");
    h.engine.refuse(h.now, call, "disabled").unwrap();
    assert!(h.take_sent().is_empty());
    let call = h.engine.call_tool(h.now, "y", raw("{}"), &held).unwrap();
    h.engine.release(h.now, call).unwrap();
    let sent = h.take_sent();
    assert_eq!(
        sent.first().map(|f| f["method"].clone()),
        Some("server/discover".into()),
        "{sent:?}"
    );
}

#[test]
fn http_null_id_error_is_attributed_to_its_exchange() {
    let mut h = http_harness(EraPreference::Auto);
    let probe = h.sent_one();
    let body = br#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}"#;
    h.engine.handle_reply(h.now, body, wire(&probe));
    h.flush();
    assert_eq!(h.sent_one()["method"], "initialize", "a legacy rejection of the probe");
}

#[test]
fn modern_http_cancel_closes_the_stream_and_sends_no_notification() {
    let mut h = http_harness(EraPreference::Auto);
    let probe = h.sent_one();
    h.reply(&probe, discover_result());
    let c = h.call("slow", "{}");
    let req = h.sent_one();
    h.engine.cancel(h.now, c).unwrap();
    assert_eq!(transmits(&mut h), [(TransmitKind::CloseStream { id: wire(&req) }, None)]);
}

/// 2025-11-25: a disconnect is no cancellation there, so a call whose response stream broke
/// (and which ends, or goes again under a new id) tells the server it stopped waiting, with a
/// notice the HTTP session sends whatever became of the exchange (`Transmit::went`). A 2026-07-28 server takes
/// the broken stream as the cancellation: nothing is sent to it.
#[test]
fn a_legacy_call_whose_stream_broke_is_announced_cancelled() {
    for (legacy, read) in [(true, false), (true, true), (false, false)] {
        let mut h =
            http_harness(if legacy { EraPreference::LegacyOnly } else { EraPreference::Auto });
        let first = h.sent_one();
        if legacy {
            h.reply(&first, json!({"protocolVersion": "2025-11-25"}));
        } else {
            h.reply(&first, discover_result());
        }
        h.take_sent();
        // A listing is read-only, retried under a new id; a tool call is a write, which ends.
        if read {
            h.engine.list(h.now, Method::ToolsList, &CallOptions::default()).unwrap();
        } else {
            h.call("write", "{}");
        }
        let req = h.sent_one();
        let failure = ExchangeFailure::Transport(TransportError::ConnectionLost);
        h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&req), failure));
        let t = transmits(&mut h);
        if !legacy {
            assert!(t.is_empty(), "{t:?}");
            continue;
        }
        assert_eq!(t[0].0, TransmitKind::Cancelled { id: wire(&req) }, "read {read}");
        let note = t[0].1.as_ref().unwrap();
        assert_eq!(
            (note["method"].as_str(), &note["params"]["requestId"]),
            (Some("notifications/cancelled"), &req["id"])
        );
    }
}

/// A request whose connection failed before any byte of it left (a certificate refused in
/// the TLS handshake) was not delivered: a write fails with the TLS error, not
/// `DeliveryUnknown`, and a 2025-11-25 server is sent no cancellation for an id it never saw.
#[test]
fn a_request_whose_tls_handshake_failed_was_not_delivered() {
    let mut h = http_harness(EraPreference::LegacyOnly);
    let init = h.sent_one();
    h.reply(&init, json!({"protocolVersion": "2025-11-25"}));
    h.take_sent();
    let c = h.call("write", "{}");
    let req = h.sent_one();
    let tls = TransportError::Tls(crate::error::TlsFailure::UnknownIssuer);
    let failure = ExchangeFailure::Unsent(tls);
    h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&req), failure));
    assert!(transmits(&mut h).is_empty(), "nothing to cancel");
    let events = h.events();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with(&format!("failed {}", c.get()))
                && !e.contains("delivery_unknown")),
        "{events:?}"
    );
}

#[test]
fn legacy_http_cancel_posts_the_notification_and_closes_the_stream() {
    let mut h = http_harness(EraPreference::LegacyOnly);
    let init = h.sent_one();
    h.reply(&init, json!({"protocolVersion": "2025-11-25"}));
    h.take_sent();
    let c = h.call("slow", "{}");
    let req = h.sent_one();
    h.engine.cancel(h.now, c).unwrap();
    let t = transmits(&mut h);
    assert_eq!(t.len(), 2);
    assert_eq!(t[0].0, TransmitKind::Cancelled { id: wire(&req) });
    assert_eq!(t[0].1.as_ref().unwrap()["params"]["requestId"], req["id"]);
    assert_eq!(t[1], (TransmitKind::CloseStream { id: wire(&req) }, None));
}

#[test]
fn expired_legacy_session_reinitializes_and_resends_once() {
    let mut h = http_harness(EraPreference::LegacyOnly);
    let init = h.sent_one();
    h.reply(&init, json!({"protocolVersion": "2025-11-25"}));
    h.take_sent();
    h.events();
    let c = h.call("echo", r#"{"text":"x"}"#);
    let first = h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::session_expired(wire(&first)));
    let reinit = h.sent_one();
    assert_eq!(reinit["method"], "initialize");
    h.reply(&reinit, json!({"protocolVersion": "2025-11-25"}));
    let sent = h.take_sent();
    assert_eq!(sent[0]["method"], "notifications/initialized");
    assert_eq!(sent[1]["method"], "tools/call");
    assert_ne!(sent[1]["id"], first["id"], "resent with a new id");
    // A second expiry for the same call is surfaced, not looped on.
    h.engine.handle_transport(h.now, TransportEvent::session_expired(wire(&sent[1])));
    let events = h.events();
    assert_eq!(events.last().unwrap(), &format!("failed {} session_expired", c.get()));
    assert_eq!(h.engine.stats().sessions_renewed, 1);
}

/// Over HTTP an `initialize` that times out (a session renewed while the server is under
/// load) goes again after a backoff, as a probe that times out does, a bounded number of
/// times; it closed the server for good, and every later call got `Closed`. The call that
/// waits for it goes once the handshake is answered.
#[test]
fn an_initialize_timing_out_over_http_is_sent_again() {
    // Frames only: the timed-out initialize's stream close carries no bytes.
    let frames = |h: &mut Harness| -> Vec<Value> {
        transmits(h).into_iter().filter_map(|(_, frame)| frame).collect()
    };
    // The next deadline, the frames read as they come (the harness's own reading wants
    // bytes in every transmit).
    let next = |h: &mut Harness| {
        h.now = h.engine.poll_timeout().expect("a timer");
        h.engine.handle_timeout(h.now);
    };
    let config = Config {
        era: EraPreference::LegacyOnly,
        default_timeout: Duration::from_secs(120),
        ..Config::default()
    };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened_as(TransportKind::Http));
    let c = h.call("echo", r#"{"text":"x"}"#);
    let init = frames(&mut h);
    assert_eq!(init[0]["method"], "initialize");
    next(&mut h);
    assert_eq!(h.engine.state(), ServerState::Handshaking, "{:?}", h.events());
    assert!(frames(&mut h).is_empty());
    next(&mut h);
    let again = frames(&mut h);
    assert_eq!(again[0]["method"], "initialize");
    h.reply(&again[0], json!({"protocolVersion": "2025-11-25"}));
    let sent = h.take_sent();
    let call = sent.iter().find(|f| f["method"] == "tools/call").expect("the call goes");
    h.reply(call, json!({"content": []}));
    assert!(h.events().iter().any(|e| e.starts_with(&format!("done {}", c.get()))));
    // Bounded: a server that never answers ends the start.
    let mut h = http_harness(EraPreference::LegacyOnly);
    let _ = h.call("echo", r#"{"text":"x"}"#);
    for _ in 0..40 {
        frames(&mut h);
        next(&mut h);
        if h.engine.state() == ServerState::Closed {
            break;
        }
    }
    assert_eq!(h.engine.state(), ServerState::Closed);
}

/// A legacy server's `initialize` that fails in passing (a 503 while it restarts, a connection
/// lost), at the start or when a session is renewed, is sent again after a growing delay, as
/// the probe is; a refusal (a 4xx) still closes. It closed the engine for good: the host had
/// to remove the server and add it again.
#[test]
fn a_handshake_failing_in_passing_is_sent_again() {
    let fail = |h: &mut Harness, frame: &Value, error: TransportError| {
        let failure = ExchangeFailure::Transport(error);
        h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(frame), failure));
    };
    let mut h = http_harness(EraPreference::LegacyOnly);
    let c = h.call("echo", r#"{"text":"x"}"#);
    let init = h.sent_one();
    fail(&mut h, &init, TransportError::HttpStatus(503));
    assert_eq!(h.engine.state(), ServerState::Handshaking);
    assert!(h.events().is_empty(), "the call waits");
    h.advance_to_next_timeout();
    let again = h.sent_one();
    assert_eq!(again["method"], "initialize");
    h.reply(&again, json!({"protocolVersion": "2025-11-25"}));
    let sent = h.take_sent();
    assert_eq!(sent[1]["method"], "tools/call");
    // A renewed session whose `initialize` loses its connection once.
    h.engine.handle_transport(h.now, TransportEvent::session_expired(wire(&sent[1])));
    let reinit = h.sent_one();
    fail(&mut h, &reinit, TransportError::ConnectionLost);
    assert_eq!(h.engine.state(), ServerState::Handshaking);
    h.advance_to_next_timeout();
    let reinit = h.sent_one();
    h.reply(&reinit, json!({"protocolVersion": "2025-11-25"}));
    let resent = h.take_sent();
    assert_eq!(resent[1]["method"], "tools/call");
    h.reply(&resent[1], json!({"content": []}));
    assert!(h.events().last().unwrap().starts_with(&format!("done {}", c.get())));
    // Bounded: a server that keeps failing closes after a few tries; a refusal at once.
    let mut h = http_harness(EraPreference::LegacyOnly);
    let mut tries = 0;
    while h.engine.state() != ServerState::Closed {
        tries += 1;
        assert!(tries < 10, "no end");
        let init = h.sent_one();
        fail(&mut h, &init, TransportError::HttpStatus(502));
        if h.engine.state() != ServerState::Closed {
            h.advance_to_next_timeout();
        }
    }
    assert_eq!(tries, 5, "the first and four more");
    let mut h = http_harness(EraPreference::LegacyOnly);
    let init = h.sent_one();
    fail(&mut h, &init, TransportError::HttpStatus(400));
    assert_eq!(h.engine.state(), ServerState::Closed);
}

/// The largest table the configuration allows has an id for every slot: at `max_pending` of
/// 2^20, the handshake's slot (one more) was 2^20, which an id masks to slot 0, so its reply
/// went to another call, or to none. (A compile-time assertion in `engine/mod.rs` holds the
/// bound against the ids' slot bits.)
#[test]
fn the_largest_pending_table_has_an_id_for_every_slot() {
    let at = |max_pending| Config { max_pending, ..Config::default() }.check();
    assert!(at(1 << 20).is_err(), "2^20 calls and the handshake's slot need 2^20 + 1 ids");
    assert!(at((1 << 20) - 1).is_ok());
    let last = (1 << 20) - 1;
    assert_eq!(WireId::new(last, 1).slot(), last);
}

/// A rate limiter's 429 (or a 408) to the era probe is no legacy evidence and to `initialize`
/// no refusal: both are asked again after a delay, and the server's real answer decides. The
/// probe's 429 was taken for a legacy server's bare 4xx, the handshake's for a refusal, and
/// the server was closed for good (under `ModernOnly`, with `NoCommonVersion`).
#[test]
fn a_429_or_408_at_start_up_passes() {
    let fail = |h: &mut Harness, frame: &Value, status: u16| {
        let failure = ExchangeFailure::Transport(TransportError::HttpStatus(status));
        h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(frame), failure));
    };
    for status in [429, 408] {
        // The probe: asked again, and answered by a modern server.
        let mut h = http_harness(EraPreference::Auto);
        let probe = h.sent_one();
        assert_eq!(probe["method"], "server/discover");
        fail(&mut h, &probe, status);
        assert_ne!(h.engine.state(), ServerState::Closed, "{status}");
        h.advance_to_next_timeout();
        let probe = h.sent_one();
        assert_eq!(probe["method"], "server/discover", "{status}: probed again");
        h.reply(
            &probe,
            json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {}}),
        );
        assert_eq!(h.engine.era(), Some(Era::Modern), "{status}");
        // The handshake: sent again, and answered.
        let mut h = http_harness(EraPreference::LegacyOnly);
        let init = h.sent_one();
        fail(&mut h, &init, status);
        assert_eq!(h.engine.state(), ServerState::Handshaking, "{status}");
        h.advance_to_next_timeout();
        let init = h.sent_one();
        assert_eq!(init["method"], "initialize", "{status}: sent again");
        h.reply(&init, json!({"protocolVersion": "2025-11-25"}));
        assert_eq!(h.engine.era(), Some(Era::Legacy), "{status}");
    }
}

/// A legacy session that expires takes its server requests with it: their ids were the old
/// session's, so an answer (or the timeout error) sent to the new one named a request it
/// never made. The host that took one is told it expired.
#[test]
fn an_expired_legacy_session_ends_its_server_requests() {
    let answers = crate::config::ServerRequestKinds { roots: true, ..Default::default() };
    let config = Config { era: EraPreference::LegacyOnly, answers, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened_as(TransportKind::Http));
    let init = h.sent_one();
    h.reply(&init, json!({"protocolVersion": "2025-11-25"}));
    h.take_sent();
    h.events();
    h.peer(json!({"jsonrpc": "2.0", "id": 7, "method": "roots/list"}));
    let request = loop {
        match h.engine.poll_event() {
            Some(Event::ServerRequest { request, .. }) => break request,
            Some(_) => {}
            None => panic!("no server request"),
        }
    };
    h.call("echo", r#"{"text":"x"}"#);
    let first = h.sent_one();
    h.engine.handle_transport(h.now, TransportEvent::session_expired(wire(&first)));
    assert_eq!(h.sent_one()["method"], "initialize");
    assert_eq!(h.events(), ["expired"]);
    let answer = RawValue::from_string(r#"{"roots":[]}"#.into()).unwrap();
    assert_eq!(h.engine.answer(h.now, request, &answer), Err(AnswerError::NotPending));
}

#[test]
fn transmits_carry_the_http_route() {
    let mut h = http_harness(EraPreference::Auto);
    let probe = h.sent_one();
    let route = |h: &Harness, frame: &Value| h.routes[&wire(frame).get()].clone();
    assert_eq!(route(&h, &probe).version, Some(ProtocolVersion::MODERN), "the probe carries it");
    h.reply(&probe, discover_result());
    h.call("get_weather", "{}");
    h.engine.read_resource(h.now, "file:///a b", &CallOptions::default()).unwrap();
    let sent = h.take_sent();
    assert_eq!(route(&h, &sent[0]).name.as_deref(), Some("get_weather"));
    assert_eq!(route(&h, &sent[0]).version, Some(ProtocolVersion::MODERN));
    assert_eq!(route(&h, &sent[1]).name.as_deref(), Some("file:///a b"));
    assert!(route(&h, &sent[1]).params.is_empty());
}

// ----- subscriptions/listen --------------------------------------------------------------------

fn listen_all(h: &mut Harness) -> CallId {
    let filter = SubscriptionFilter { tools_list_changed: true, ..SubscriptionFilter::default() };
    h.engine.listen(h.now, &filter, &CallOptions::default()).unwrap()
}

/// A subscription stream, open for as long as it is watched, takes no call's place under the
/// in-flight limit, nor waits for one: with a limit of one, a listen held the only place for
/// good and no call went out again (the cache's own listings neither).
#[test]
fn a_listen_stream_takes_no_place_under_the_in_flight_limit() {
    let mut h = Harness::ready_with(Config { max_in_flight: 1, ..Config::default() });
    let c = h.call("busy", "{}");
    // A fresh call the limit holds, queued before the stream: the stream does not wait
    // behind it either.
    let held = h.engine.call_tool(h.now, "held", raw("{}"), &CallOptions::default()).unwrap();
    // One released from a hold goes the same way.
    let hold = CallOptions { hold: true, ..CallOptions::default() };
    let filter = SubscriptionFilter { tools_list_changed: true, ..SubscriptionFilter::default() };
    let released = h.engine.listen(h.now, &filter, &hold).unwrap();
    h.engine.release(h.now, released).unwrap();
    let mut calls = h.take_sent();
    assert_eq!(calls.len(), 2, "the listen does not wait behind the calls: {calls:?}");
    calls.sort_by_key(|c| c["method"] != "tools/call");
    assert_eq!(
        (&calls[0]["params"]["name"], &calls[1]["method"]),
        (&json!("busy"), &json!("subscriptions/listen"))
    );
    h.reply(&calls[0], json!({"resultType": "complete", "content": []}));
    assert!(h.events().iter().any(|e| e.starts_with(&format!("done {}", c.get()))));
    let sent = h.sent_one();
    assert_eq!(sent["params"]["name"], "held");
    h.reply(&sent, json!({"resultType": "complete", "content": []}));
    assert!(h.events().iter().any(|e| e.starts_with(&format!("done {}", held.get()))));
    for _ in 0..3 {
        h.call("t", "{}");
        let sent = h.sent_one();
        assert_eq!(sent["method"], "tools/call");
        h.reply(&sent, json!({"resultType": "complete", "content": []}));
    }
    assert_eq!(h.engine.pending(), 1, "the stream is still open");
}

#[test]
fn listen_acknowledged_then_notifications_then_graceful_end() {
    let mut h = Harness::ready_modern();
    let sub = listen_all(&mut h);
    let req = h.sent_one();
    assert_eq!(req["method"], "subscriptions/listen");
    assert_eq!(req["params"]["notifications"], json!({"toolsListChanged": true}));
    let meta = json!({"io.modelcontextprotocol/subscriptionId": req["id"]});
    h.peer(json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                  "params": {"notifications": {"toolsListChanged": true}, "_meta": meta}}));
    h.peer(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": meta}}));
    // No deadline by default: an hour later it is still open.
    h.advance(Duration::from_secs(3600));
    h.reply(&req, json!({"resultType": "complete", "_meta": meta}));
    let events = h.events();
    assert_eq!(events[0], "Subscribed".to_owned() + "");
    assert_eq!(events[1], "list_changed Tools");
    assert!(events[2].starts_with(&format!("done {}", sub.get())), "{events:?}");
}

/// A server repeating the acknowledgement of a live subscription (each copy up to the
/// largest message) grows the host's event queue no more than any notification does.
#[test]
fn repeated_acknowledgements_are_bounded_like_any_notification() {
    let mut h = Harness::ready_with(Config { max_queued_events: 8, ..Config::default() });
    listen_all(&mut h);
    let req = h.sent_one();
    let meta = json!({"io.modelcontextprotocol/subscriptionId": req["id"]});
    for _ in 0..100 {
        h.peer(json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                      "params": {"notifications": {"toolsListChanged": true}, "_meta": meta}}));
    }
    assert!(h.engine.queued_events() <= 8, "{} events queued", h.engine.queued_events());
    assert!(h.engine.stats().events_dropped >= 92);
    assert_eq!(h.events()[0], "Subscribed");
}

#[test]
fn listen_ended_by_a_server_cancelled_notification() {
    let mut h = Harness::ready_modern();
    let sub = listen_all(&mut h);
    let req = h.sent_one();
    h.peer(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": req["id"]}}));
    assert_eq!(h.events(), [format!("failed {} closed_by_server", sub.get())]);
    // The graceful result that may follow (U3) is then a duplicate, not a second end.
    h.reply(&req, json!({"resultType": "complete"}));
    assert!(h.events().is_empty());
}

#[test]
fn listen_cancelled_by_the_host_on_stdio_sends_cancelled() {
    let mut h = Harness::ready_modern();
    let sub = listen_all(&mut h);
    let req = h.sent_one();
    h.engine.cancel(h.now, sub).unwrap();
    assert_eq!(h.sent_one()["params"]["requestId"], req["id"]);
    assert!(h
        .engine
        .listen(h.now, &SubscriptionFilter::default(), &CallOptions::default())
        .is_ok());
    let legacy = &mut Harness::ready_legacy();
    let f = SubscriptionFilter::default();
    assert_eq!(
        legacy.engine.listen(legacy.now, &f, &CallOptions::default()),
        Err(RequestError::NotSupportedByEra)
    );
}

/// A method the era the server settles on does not have, asked before the era was known,
/// ends with `NotSupportedByEra` and is never sent: `ping` went to a 2026-07-28 server, and
/// `subscriptions/listen` or `server/discover` to a 2025-11-25 one, and came back as "method
/// not found" (a ping used as a health check said a healthy server was broken). Asked once
/// the era is known, each is refused at once, as before.
#[test]
fn a_method_asked_before_the_era_is_known_that_the_era_lacks_is_not_sent() {
    let filter = SubscriptionFilter { tools_list_changed: true, ..SubscriptionFilter::default() };
    let mut h = Harness::new(Config::default());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    let ping = h.engine.ping(h.now, &CallOptions::default()).unwrap();
    h.reply(&probe, discover_result());
    let sent = h.take_sent();
    assert!(sent.iter().all(|f| f["method"] != "ping"), "{sent:?}");
    let events = h.events();
    assert!(events.contains(&format!("failed {} not_supported_by_era", ping.get())), "{events:?}");

    let mut h = Harness::new(Config::default());
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let probe = h.sent_one();
    let listen = h.engine.listen(h.now, &filter, &CallOptions::default()).unwrap();
    let discover = h.engine.discover(h.now, &CallOptions::default()).unwrap();
    h.reply_error(&probe, -32601, None);
    let init = h.sent_one();
    h.reply(
        &init,
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
        "serverInfo": {"name": "s", "version": "1"}}),
    );
    let sent = h.take_sent();
    assert_eq!(sent.len(), 1, "notifications/initialized alone: {sent:?}");
    let events = h.events();
    for call in [listen, discover] {
        let failed = format!("failed {} not_supported_by_era", call.get());
        assert!(events.contains(&failed), "{events:?}");
    }
    let legacy_ping = h.engine.ping(h.now, &CallOptions::default());
    assert!(legacy_ping.is_ok(), "ping is the legacy era's");
}

/// The handshake's end passes the bound on queued control frames: behind a flood of the
/// server's pings whose answers the transport has not taken yet, a dropped
/// `notifications/initialized` left a ready engine sending calls that a 2025-11-25 server
/// refuses for good.
#[test]
fn the_initialized_notification_passes_the_control_bound() {
    let config = Config { era: EraPreference::LegacyOnly, ..Config::default() };
    let mut h = Harness::new(config);
    h.engine.handle_transport(h.now, TransportEvent::opened());
    let init = h.sent_one();
    for n in 0..300 {
        let ping = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": n, "method": "ping"}));
        h.engine.handle_message(h.now, &ping.unwrap());
    }
    h.reply(
        &init,
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
        "serverInfo": {"name": "s", "version": "1"}}),
    );
    let sent = h.take_sent();
    let initialized = sent.iter().filter(|v| v["method"] == "notifications/initialized");
    assert_eq!(initialized.count(), 1, "{} frames", sent.len());
}
