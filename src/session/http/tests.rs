//! The HTTP session against a real engine with simulated time: no sockets, no sleeps. The
//! test plays the driver, a byte pump (takes the requests the session writes, feeds response
//! bytes to a response parser as a connection does), and the server (scripts them).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;
use crate::codec::http1::Limits;
use crate::config::Config;
use crate::engine::{CallOptions, Event};
use crate::error::{CallError, LocalError, PeerError};

const LEGACY_SESSION_GONE: &str =
    r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: no session"},"id":null}"#;

/// One request as the driver would write it.
#[derive(Debug)]
struct Sent {
    x: ExchangeId,
    method: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Sent {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn rpc(&self) -> &str {
        self.body["method"].as_str().unwrap_or_default()
    }
}

/// A plan's preset header lines as (name, value) pairs, each line checked as the request
/// writer checks a header it is given.
fn preset_pairs(preset: Preset) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for piece in preset {
        let text = std::str::from_utf8(piece).expect("ASCII lines");
        assert!(text.is_empty() || text.ends_with("\r\n"), "{text:?}");
        for line in text.split_terminator("\r\n") {
            let (name, value) = line.split_once(": ").expect("Name: value");
            assert!(HeaderName::new(name).is_ok(), "{name:?}");
            assert!(!crate::codec::http1::breaks_line(value.as_bytes()), "{value:?}");
            pairs.push((name.to_owned(), value.to_owned()));
        }
    }
    pairs
}

/// Each preset says what the headers it stands for said, for every version mcpoll speaks
/// (the exact bytes of a request are in the driver's tests).
#[test]
fn the_presets_are_well_formed_lines_for_every_version() {
    use crate::proto::version::{LEGACY_VERSIONS, MODERN_VERSIONS};
    for get in [false, true] {
        let accept = if get { "text/event-stream" } else { "application/json, text/event-stream" };
        let mut expected = Vec::new();
        if !get {
            expected.push(("Content-Type".to_owned(), "application/json".to_owned()));
        }
        expected.push(("Accept".to_owned(), accept.to_owned()));
        expected.push(("Accept-Encoding".to_owned(), "identity".to_owned()));
        assert_eq!(preset_pairs(super::preset(get, None)), expected);
        for &v in MODERN_VERSIONS.iter().chain(LEGACY_VERSIONS) {
            let version = ProtocolVersion::known(v).expect("a known version");
            let mut with_version = expected.clone();
            with_version.push(("MCP-Protocol-Version".to_owned(), v.to_owned()));
            assert_eq!(preset_pairs(super::preset(get, Some(version))), with_version);
        }
    }
}

#[derive(Debug, Default)]
struct Refresher {
    fresh: Vec<&'static str>,
}

impl TokenProvider for Refresher {
    fn token(&mut self) -> Option<String> {
        Some("t0".into())
    }
    fn refresh(&mut self) -> Option<String> {
        self.fresh.pop().map(str::to_owned)
    }
}

struct Sim {
    engine: Engine,
    session: HttpSession,
    now: Instant,
    closed: Vec<ExchangeId>,
    /// The legacy GET stream, once the driver has put it on a connection.
    listen: Option<Sent>,
    /// The response parser of each exchange's connection, until its response is over.
    parsers: Vec<(ExchangeId, ResponseParser)>,
}

impl Sim {
    fn new(tokens: Option<Box<dyn TokenProvider>>) -> Self {
        Self::with_limit(tokens, 1 << 20)
    }

    fn with_limit(tokens: Option<Box<dyn TokenProvider>>, max_body: usize) -> Self {
        let now = Instant::now();
        let mut engine = Engine::new(Config::default(), now).unwrap();
        let extra = vec![("X-Extra".to_owned(), "1".to_owned())];
        let setup = SessionSetup { headers: extra, tokens, max_body, oauth: None };
        let session = HttpSession::open(setup, &mut engine, now).expect("a good token");
        Self { engine, session, now, closed: Vec::new(), listen: None, parsers: Vec::new() }
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        self.engine.handle_timeout(self.now);
    }

    /// Lets the session take the engine's transmits and what is due.
    fn flush(&mut self) {
        self.session.handle_timeout(&mut self.engine, self.now);
        while let Some(x) = self.session.poll_close() {
            self.closed.push(x);
        }
    }

    /// The next request the driver would put on a connection (it looks before it takes, as
    /// the driver does: what the session holds back is not taken).
    fn next(&mut self) -> Option<Sent> {
        self.flush();
        self.session.peek_waiting()?;
        let x = self.session.poll_exchange(&mut self.engine, self.now)?;
        let origin = Origin::new("/mcp", "127.0.0.1:9").unwrap();
        let mut out = Vec::new();
        self.session.write_request(x, self.now, &origin, "http://127.0.0.1:9/mcp", &mut out);
        let mut fields = [httparse::EMPTY_HEADER; 32];
        let mut request = httparse::Request::new(&mut fields);
        let Ok(httparse::Status::Complete(n)) = request.parse(&out) else {
            panic!("the request does not parse: {:?}", String::from_utf8_lossy(&out))
        };
        assert_eq!((request.path, request.version), (Some("/mcp"), Some(1)));
        let headers: Vec<(String, String)> = request
            .headers
            .iter()
            .map(|h| (h.name.to_owned(), String::from_utf8_lossy(h.value).into_owned()))
            .collect();
        let method = request.method.unwrap_or_default().to_owned();
        let body = &out[n..];
        let length = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-length"));
        assert_eq!(length.map(|(_, v)| v.parse::<usize>().unwrap()).unwrap_or(0), body.len());
        let body = serde_json::from_slice(body).unwrap_or(Value::Null);
        Some(Sent { x, method, headers, body })
    }

    /// [`next`](Self::next), answering `notifications/initialized` with 202 as it goes (the
    /// requests after a handshake wait for that).
    fn next_delivered(&mut self) -> Option<Sent> {
        let sent = self.next()?;
        if sent.rpc() == "notifications/initialized" {
            self.respond(sent.x, 202, &[], "");
        }
        Some(sent)
    }

    /// Response bytes for exchange `x`, through its connection's parser and the session, as
    /// the driver hands them over (with no budget to stop them).
    fn feed(&mut self, x: ExchangeId, bytes: &[u8]) -> ResponseStep {
        let Self { engine, session, now, parsers, .. } = self;
        let i = match parsers.iter().position(|(y, _)| *y == x) {
            Some(i) => i,
            None => {
                parsers.push((x, ResponseParser::new(Limits::default())));
                parsers.len() - 1
            }
        };
        let parser = &mut parsers[i].1;
        parser.push(bytes);
        let mut budget = Budget { frames: usize::MAX, units: usize::MAX };
        let step = session.handle_response(engine, *now, x, parser, &mut budget);
        if matches!(step, ResponseStep::Ended { .. } | ResponseStep::Close) {
            parsers.remove(i);
        }
        step
    }

    /// The head of a response whose body comes in chunks ([`body`](Self::body)) and ends with
    /// [`end`](Self::end).
    fn head(&mut self, x: ExchangeId, status: u16, headers: &[(&str, &str)]) -> ResponseStep {
        let mut head = format!("HTTP/1.1 {status} Sim\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        self.feed(x, head.as_bytes())
    }

    fn body(&mut self, x: ExchangeId, chunk: &str) -> ResponseStep {
        self.feed(x, format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes())
    }

    fn end(&mut self, x: ExchangeId) -> ResponseStep {
        self.feed(x, b"0\r\n\r\n")
    }

    /// Exchange `x`'s connection failed: its parser goes with it.
    fn fail(&mut self, x: ExchangeId, failure: ExchangeFailure) {
        self.parsers.retain(|(y, _)| *y != x);
        self.session.handle_event(&mut self.engine, self.now, SessionEvent::Failed(x, failure));
    }

    /// A whole response, its length given.
    fn respond(&mut self, x: ExchangeId, status: u16, headers: &[(&str, &str)], body: &str) {
        let mut response = format!("HTTP/1.1 {status} Sim\r\n");
        for (name, value) in headers {
            response.push_str(&format!("{name}: {value}\r\n"));
        }
        response.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        let step = self.feed(x, response.as_bytes());
        assert!(matches!(step, ResponseStep::Ended { .. } | ResponseStep::Close), "{step:?}");
    }

    fn json(&mut self, x: ExchangeId, body: Value) {
        self.respond(x, 200, &[("Content-Type", "application/json")], &body.to_string());
    }

    fn events(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(e) = self.engine.poll_event() {
            out.push(match e {
                Event::CallDone { result, .. } => format!("done {}", result.json()),
                Event::CallFailed { error, .. } => format!("failed {error:?}"),
                other => format!("{other:?}"),
            });
        }
        out
    }

    fn call(&mut self, name: &str) -> crate::CallId {
        let args = serde_json::value::RawValue::from_string(r#"{"city":"Oslo"}"#.into()).unwrap();
        let opts = CallOptions::timeout(Duration::from_secs(30));
        self.engine.call_tool(self.now, name, &args, &opts).unwrap()
    }

    /// Probe answered: a stateless 2026-07-28 server.
    fn modern() -> Self {
        Self::modern_in(Self::new(None))
    }

    /// [`modern`](Self::modern) from a new simulator `s`.
    fn modern_in(mut s: Self) -> Self {
        let probe = s.next().unwrap();
        assert_eq!(probe.rpc(), "server/discover");
        let result = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private"});
        s.json(probe.x, reply(&probe, result));
        s.events();
        s
    }

    /// [`legacy`](Self::legacy) with its GET stream refused, and a call `t` on the wire.
    fn legacy_call() -> (Self, Sent) {
        let mut s = Self::legacy(None);
        let get = s.listen.take().unwrap();
        s.respond(get.x, 405, &[], "");
        s.call("t");
        let call = s.next().unwrap();
        (s, call)
    }

    /// Probe refused, handshake done, session `s-1`; the GET stream is open, unanswered.
    fn legacy(tokens: Option<Box<dyn TokenProvider>>) -> Self {
        Self::legacy_in(Self::new(tokens))
    }

    /// [`legacy`](Self::legacy) from a new simulator `s`.
    fn legacy_in(mut s: Self) -> Self {
        let probe = s.next().unwrap();
        let json_type = [("Content-Type", "application/json")];
        s.respond(probe.x, 400, &json_type, LEGACY_SESSION_GONE);
        let init = s.next().unwrap();
        assert_eq!(init.rpc(), "initialize");
        assert_eq!(init.header("mcp-session-id"), None);
        assert_eq!(init.header("mcp-protocol-version"), None, "U6: none on initialize");
        let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "sim", "version": "1"}});
        let body = reply(&init, result).to_string();
        s.respond(
            init.x,
            200,
            &[("Content-Type", "application/json"), ("Mcp-Session-Id", "s-1")],
            &body,
        );
        let get = s.next().unwrap();
        assert_eq!(get.method, "GET", "the GET stream opens first, once ready");
        let initialized = s.next().unwrap();
        assert_eq!(initialized.rpc(), "notifications/initialized");
        s.respond(initialized.x, 202, &[], "");
        s.listen = Some(get);
        s.events();
        assert_eq!(s.session.session_id(), Some("s-1"));
        s
    }
}

impl Sim {
    /// Answers a legacy `initialize` as the server would, naming the new session `session`.
    fn answer_initialize(&mut self, init: &Sent, session: &str) {
        let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "sim", "version": "1"}});
        let body = reply(init, result).to_string();
        let headers = [("Content-Type", "application/json"), ("Mcp-Session-Id", session)];
        self.respond(init.x, 200, &headers, &body);
    }
}

fn reply(req: &Sent, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": req.body["id"], "result": result})
}

const SSE: [(&str, &str); 1] = [("Content-Type", "text/event-stream")];

#[test]
fn modern_requests_carry_the_2026_headers_and_no_session() {
    let mut s = Sim::modern();
    s.call("get_weather");
    let call = s.next().unwrap();
    assert_eq!(call.method, "POST");
    assert_eq!(call.header("mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(call.header("mcp-method"), Some("tools/call"));
    assert_eq!(call.header("mcp-name"), Some("get_weather"));
    assert_eq!(call.header("accept"), Some("application/json, text/event-stream"));
    assert_eq!(call.header("accept-encoding"), Some("identity"), "no coding is decoded");
    assert_eq!(call.header("authorization"), None);
    assert_eq!(call.header("x-extra"), Some("1"));
    assert_eq!(call.header("mcp-session-id"), None);
    assert_eq!(call.header("last-event-id"), None);
    // A session id in a modern response is not adopted.
    let body = reply(&call, json!({"content": []})).to_string();
    s.respond(call.x, 200, &[("Content-Type", "application/json"), ("Mcp-Session-Id", "x")], &body);
    assert_eq!(s.session.session_id(), None);
    assert_eq!(s.events(), [r#"done {"content":[]}"#]);
    s.advance(Duration::from_secs(120));
    assert!(s.next().is_none(), "no GET stream in 2026");
}

/// `Mcp-Name` is required on a tool call, a prompt and a resource read whatever the name: an
/// empty tool name is sent encoded, not left out (a server refuses a call without the header,
/// -32020, which read as a stale tool listing).
#[test]
fn an_empty_tool_name_is_sent_encoded_in_mcp_name() {
    let mut s = Sim::modern();
    s.call("");
    let call = s.next().unwrap();
    assert_eq!(call.header("mcp-name"), Some("=?base64??="));
}

/// A JSON body that starts with a byte order mark (a server writing UTF-8 "with signature")
/// is the call's answer, not a body that is no JSON.
#[test]
fn a_json_body_after_a_byte_order_mark_answers_its_call() {
    let mut s = Sim::modern();
    s.call("t");
    let call = s.next().unwrap();
    let body = format!("\u{feff}{}", reply(&call, json!({"content": []})));
    s.respond(call.x, 200, &[("Content-Type", "application/json")], &body);
    assert_eq!(s.events(), [r#"done {"content":[]}"#]);
}

#[test]
fn legacy_requests_carry_the_session_and_no_2026_headers() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    assert_eq!(get.method, "GET", "the GET stream opens once ready");
    assert_eq!(get.header("accept"), Some("text/event-stream"));
    assert_eq!(get.header("accept-encoding"), Some("identity"));
    assert_eq!(get.header("mcp-session-id"), Some("s-1"));
    assert_eq!(get.header("mcp-protocol-version"), Some("2025-11-25"));
    s.call("get_weather");
    let call = s.next().unwrap();
    assert_eq!(call.method, "POST");
    assert_eq!(call.header("mcp-session-id"), Some("s-1"));
    assert_eq!(call.header("mcp-protocol-version"), Some("2025-11-25"));
    assert_eq!(call.header("mcp-method"), None);
    assert_eq!(call.header("mcp-name"), None);
}

#[test]
fn a_session_id_is_adopted_only_from_a_successful_initialize() {
    let mut s = Sim::new(None);
    let probe = s.next().unwrap();
    s.respond(
        probe.x,
        400,
        &[("Content-Type", "application/json"), ("Mcp-Session-Id", "p")],
        LEGACY_SESSION_GONE,
    );
    assert_eq!(s.session.session_id(), None, "not from the probe");
    let init = s.next().unwrap();
    s.respond(init.x, 500, &[("Mcp-Session-Id", "bad")], "");
    assert_eq!(s.session.session_id(), None, "not from a failed initialize");
}

#[test]
fn session_gone_on_404_and_ts1_400_only_when_a_session_id_was_sent() {
    for (status, body) in [(404, ""), (400, LEGACY_SESSION_GONE)] {
        let mut s = Sim::legacy(None);
        s.call("t");
        let call = s.next().unwrap();
        assert_eq!(call.header("mcp-session-id"), Some("s-1"));
        s.respond(call.x, status, &[("Content-Type", "application/json")], body);
        assert_eq!(s.session.session_id(), Some("s-1"));
        let again = s.next().unwrap();
        assert_eq!(again.rpc(), "initialize", "{status}: the session is renewed");
        assert!(s.events().is_empty(), "{status}: the call waits for the new session");
    }
    // Without a session id sent, a 404 is just a status.
    let mut s = Sim::modern();
    s.call("t");
    let call = s.next().unwrap();
    s.respond(call.x, 404, &[], "");
    assert!(s.next().is_none());
    let events = s.events();
    assert!(events[0].contains("HttpStatus(404)"), "{events:?}");
}

#[test]
fn a_401_refreshes_the_token_once_then_is_unauthorized() {
    let tokens = Refresher { fresh: vec!["t2", "t1"] };
    let mut s = Sim::new(Some(Box::new(tokens)));
    let probe = s.next().unwrap();
    assert_eq!(probe.header("authorization"), Some("Bearer t0"));
    let challenge = [("WWW-Authenticate", r#"Bearer resource_metadata="https://r/m", scope="a""#)];
    s.respond(probe.x, 401, &challenge, "");
    let again = s.next().unwrap();
    assert_eq!(again.x, probe.x, "the same exchange is sent again");
    assert_eq!(again.body, probe.body);
    assert_eq!(again.header("authorization"), Some("Bearer t1"));
    s.respond(again.x, 401, &challenge, "");
    assert!(s.next().is_none(), "refreshed once only");
    assert_eq!(s.engine.state(), ServerState::Unauthorized);
    let why = format!("{:?}", s.engine.authorization_error());
    assert!(why.contains("AuthRequired"), "{why}");
}

#[test]
fn the_get_stream_resumes_with_its_last_event_id_after_the_clamped_retry() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    assert_eq!(get.header("last-event-id"), None);
    let note = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
    s.respond(get.x, 200, &SSE, &format!("id: ev-7\nretry: 0\ndata: {note}\n\n"));
    assert!(s.next().is_none(), "not at once: retry 0 is raised to the floor");
    assert_eq!(s.session.poll_timeout(), Some(s.now + Duration::from_millis(250)));
    s.advance(Duration::from_millis(249));
    assert!(s.next().is_none());
    s.advance(Duration::from_millis(1));
    let again = s.next().unwrap();
    assert_eq!(again.method, "GET");
    assert_eq!(again.header("last-event-id"), Some("ev-7"));
    // A huge retry is capped at a minute.
    s.respond(again.x, 200, &SSE, "retry: 99999999\n\n");
    assert_eq!(s.session.poll_timeout(), Some(s.now + Duration::from_secs(60)));
    // A broken connection reopens on the same schedule; a refusal ends it for good.
    s.advance(Duration::from_secs(60));
    let third = s.next().unwrap();
    s.fail(third.x, ExchangeFailure::Transport(TransportError::ConnectionLost));
    assert_eq!(s.session.poll_timeout(), Some(s.now + Duration::from_secs(60)));
    s.advance(Duration::from_secs(60));
    let fourth = s.next().unwrap();
    s.respond(fourth.x, 405, &[], "");
    assert_eq!(s.session.poll_timeout(), None);
    s.advance(Duration::from_secs(600));
    assert!(s.next().is_none(), "405: no GET stream");
}

/// A GET stream the server opens and ends at once, bringing nothing, is no stream served: it
/// is opened again later each time (each open is a new connection), not every second for good.
#[test]
fn a_get_stream_ended_at_once_with_nothing_backs_off() {
    let mut s = Sim::legacy(None);
    let mut get = s.listen.take().unwrap();
    let mut waits = Vec::new();
    for _ in 0..4 {
        s.respond(get.x, 200, &SSE, "");
        let due = s.session.poll_timeout().expect("the GET stream is due again");
        waits.push(due - s.now);
        s.now = due;
        get = s.next().expect("the GET stream again");
        assert_eq!(get.method, "GET");
    }
    let secs = |n: u64| Duration::from_secs(n);
    assert_eq!(waits, [secs(1), secs(2), secs(4), secs(8)]);
    // One held open a minute served, though it brought nothing (an idle server, a proxy's
    // idle timeout): the waits start over.
    s.now += secs(60);
    s.respond(get.x, 200, &SSE, "");
    let due = s.session.poll_timeout().expect("the GET stream is due again");
    assert_eq!(due - s.now, secs(1));
}

/// A GET stream that cannot get a connection waits longer each time (1 s, 2 s, 4 s, ...):
/// the last stream's 200, left in the slot, made each refusal look served and the server
/// was asked every second while it was down. And a 2xx that is no event stream (a page for
/// `GET /mcp`) served nothing: asked again later each time too.
#[test]
fn a_get_stream_that_cannot_connect_or_is_no_stream_backs_off() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    s.respond(get.x, 200, &SSE, "retry: 1000\n\n");
    let refused = || {
        ExchangeFailure::Transport(TransportError::ConnectFailed(
            std::io::ErrorKind::ConnectionRefused,
        ))
    };
    let mut waits = Vec::new();
    for _ in 0..4 {
        let due = s.session.poll_timeout().expect("the GET stream is due again");
        waits.push(due - s.now);
        s.now = due;
        s.flush();
        assert!(s.session.peek_waiting().is_some(), "the GET waits for a connection");
        s.session.handle_event(&mut s.engine, s.now, SessionEvent::NoConnection(refused()));
        assert!(s.session.peek_waiting().is_none(), "failed, and scheduled again");
    }
    let secs = |n: u64| Duration::from_secs(n);
    assert_eq!(waits, [secs(1), secs(1), secs(2), secs(4)]);

    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    s.respond(get.x, 200, &SSE, "retry: 1000\n\n");
    let mut waits = Vec::new();
    for _ in 0..3 {
        let due = s.session.poll_timeout().expect("the GET stream is due again");
        waits.push(due - s.now);
        s.now = due;
        let again = s.next().expect("the GET again");
        assert_eq!(again.method, "GET");
        s.respond(again.x, 200, &[("Content-Type", "text/html")], "<html></html>");
    }
    waits.push(s.session.poll_timeout().unwrap() - s.now);
    assert_eq!(waits, [secs(1), secs(1), secs(2), secs(4)]);
}

#[test]
fn a_legacy_post_stream_broken_before_the_reply_resumes_after_retry_for_reads_and_writes() {
    for (break_by_loss, name) in [(false, "write"), (true, "read")] {
        let mut s = Sim::legacy(None);
        let get = s.listen.take().unwrap();
        s.respond(get.x, 405, &[], "");
        s.call(name);
        let call = s.next().unwrap();
        s.head(call.x, 200, &SSE);
        assert_eq!(s.body(call.x, "id: e1\nretry: 500\ndata:\n\n"), ResponseStep::More);
        if break_by_loss {
            let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
            s.fail(call.x, lost);
        } else {
            assert_eq!(s.end(call.x), ResponseStep::Ended { keep_alive: true });
        }
        assert!(s.events().is_empty(), "{name}: the call is not over");
        assert_eq!(s.session.poll_timeout(), Some(s.now + Duration::from_millis(500)));
        s.advance(Duration::from_millis(499));
        assert!(s.next().is_none(), "{name}: the server's retry is honoured");
        s.advance(Duration::from_millis(1));
        let resume = s.next().unwrap();
        assert_eq!(resume.method, "GET", "{name}: resuming is not re-sending");
        assert_eq!(resume.header("last-event-id"), Some("e1"));
        assert_eq!(resume.header("mcp-session-id"), Some("s-1"));
        assert_eq!(resume.header("accept"), Some("text/event-stream"));
        s.head(resume.x, 200, &SSE);
        let done = reply(&call, json!({"content": []}));
        assert_eq!(s.body(resume.x, &format!("id: e2\ndata: {done}\n\n")), ResponseStep::Close);
        assert_eq!(s.events(), [r#"done {"content":[]}"#], "{name}");
        assert!(s.next().is_none());
    }
}

/// Found by the `http_session` fuzz target: the id to resume from was read at the end of
/// each piece of the body, so an id the server cleared (`id:` with no value) was kept when the
/// two came in separate pieces, and forgotten when they came in one. As in one piece, the
/// stream has no id to resume from: the reply is lost.
#[test]
fn an_event_id_the_server_cleared_is_not_resumed_from_however_the_stream_was_cut() {
    for pieces in [&["id: 1\n\nid:\n\n"][..], &["id: 1\n\n", "id:\n\n"]] {
        let mut s = Sim::legacy(None);
        let get = s.listen.take().unwrap();
        s.respond(get.x, 405, &[], "");
        s.call("t");
        let call = s.next().unwrap();
        s.head(call.x, 200, &SSE);
        for piece in pieces {
            assert_eq!(s.body(call.x, piece), ResponseStep::More);
        }
        assert_eq!(s.end(call.x), ResponseStep::Ended { keep_alive: true });
        let events = s.events();
        assert_eq!(events.len(), 1, "{pieces:?}: {events:?}");
        assert!(events[0].contains("DeliveryUnknown(ConnectionLost)"), "{pieces:?}: {events:?}");
        assert_eq!(s.session.poll_timeout(), None, "{pieces:?}: no resume");
    }
}

/// A reconnected GET stream carries the last event id until the server sends another: one
/// that brings only comments before it ends must not make the next reconnect forget it.
#[test]
fn the_get_stream_keeps_its_last_event_id_across_reconnects_that_bring_none() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    s.respond(get.x, 200, &SSE, "id: ev-7\ndata: {}\n\n");
    s.advance(DEFAULT_RETRY);
    let again = s.next().unwrap();
    assert_eq!(again.header("last-event-id"), Some("ev-7"));
    s.respond(again.x, 200, &SSE, ": keep-alive\n\n");
    s.advance(DEFAULT_RETRY);
    let third = s.next().unwrap();
    assert_eq!(third.method, "GET");
    assert_eq!(third.header("last-event-id"), Some("ev-7"), "still the last id the server gave");
}

/// Only 405 says a server has no GET stream (§6.2). A refused token is refreshed and the GET
/// sent again; a busy server, or a 409 for a stream of the session it has not seen go (the
/// TypeScript SDK's answer), is asked again later, each time later than the last; other
/// refusals turn the stream off for the session.
#[test]
fn the_get_stream_is_off_only_for_405_and_lasting_refusals() {
    let tokens = Refresher { fresh: vec!["t1"] };
    let mut s = Sim::legacy(Some(Box::new(tokens)));
    let get = s.listen.take().unwrap();
    s.respond(get.x, 401, &[], "");
    let again = s.next().expect("the GET again, with the fresh token");
    assert_eq!((again.method.as_str(), again.header("authorization")), ("GET", Some("Bearer t1")));
    let mut gaps = Vec::new();
    let mut x = again.x;
    for status in [503, 409, 429, 503] {
        s.respond(x, status, &[], "");
        let mut waited = Duration::ZERO;
        let next = loop {
            assert!(waited < Duration::from_secs(120), "{status}: no GET again");
            if let Some(next) = s.next() {
                break next;
            }
            s.advance(Duration::from_millis(250));
            waited += Duration::from_millis(250);
        };
        assert_eq!(next.method, "GET", "{status}");
        gaps.push(waited);
        x = next.x;
    }
    assert!(gaps.windows(2).all(|w| w[0] < w[1]), "each wait longer: {gaps:?}");
    // A stream that opens resets the waits; a 405 turns it off for good.
    s.respond(x, 200, &SSE, ": ok\n\n");
    s.advance(DEFAULT_RETRY);
    let next = s.next().unwrap();
    s.respond(next.x, 405, &[], "");
    s.advance(Duration::from_secs(3600));
    assert!(s.next().is_none(), "no GET after 405");
    for status in [400, 403] {
        let mut s = Sim::legacy(None);
        let get = s.listen.take().unwrap();
        s.respond(get.x, status, &[], "");
        s.advance(Duration::from_secs(3600));
        assert!(s.next().is_none(), "no GET after {status}");
    }
}

/// A notification or a reply to a server request refused for its token is sent again once
/// with a fresh one, as a request is: the server may be waiting for that reply.
#[test]
fn a_message_refused_for_its_token_is_sent_again_with_a_fresh_one() {
    let tokens = Refresher { fresh: vec!["t1"] };
    let mut s = Sim::legacy(Some(Box::new(tokens)));
    let get = s.listen.take().unwrap();
    s.head(get.x, 200, &SSE);
    s.body(get.x, "data: {\"jsonrpc\":\"2.0\",\"id\":\"p1\",\"method\":\"ping\"}\n\n");
    let pong = s.next().expect("the reply to the ping");
    assert_eq!(pong.body["id"], "p1");
    assert_eq!(pong.header("authorization"), Some("Bearer t0"));
    s.respond(pong.x, 401, &[], "");
    let again = s.next().expect("sent again");
    assert_eq!((again.body.clone(), again.header("authorization")), (pong.body, Some("Bearer t1")));
    s.respond(again.x, 401, &[], "");
    assert!(s.next().is_none(), "once only");
}

/// A POST's event stream that goes on after it brought the call's reply (keep-alive comments,
/// more events) has its connection closed a grace after the reply: the server should have
/// ended it, and a connection held by an answered call is one the pool cannot use, in either
/// era. Until then what it brings is still read; a stream that ends in time is not closed.
#[test]
fn a_post_stream_that_goes_on_after_its_reply_is_closed_after_a_grace() {
    for legacy in [false, true] {
        let (mut s, call) = if legacy {
            Sim::legacy_call()
        } else {
            let mut s = Sim::modern();
            s.call("t");
            let call = s.next().unwrap();
            (s, call)
        };
        s.head(call.x, 200, &SSE);
        let done = reply(&call, json!({"content": []}));
        let step = s.body(call.x, &format!("id: 1\ndata: {done}\n\n"));
        assert_eq!(step, ResponseStep::More, "legacy: {legacy}");
        assert!(s.events()[0].starts_with("done"), "legacy: {legacy}");
        let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        assert_eq!(
            s.body(call.x, &format!(": keep-alive\n\ndata: {changed}\n\n")),
            ResponseStep::More
        );
        assert_eq!(s.events().len(), 1, "what comes within the grace is read");
        assert_eq!(s.session.poll_timeout(), Some(s.now + REPLY_LINGER), "legacy: {legacy}");
        s.advance(REPLY_LINGER - Duration::from_millis(1));
        s.flush();
        assert!(s.closed.is_empty(), "legacy: {legacy}: closed before the grace ended");
        s.advance(Duration::from_millis(1));
        s.flush();
        assert_eq!(s.closed, [call.x], "legacy: {legacy}");
        s.session.handle_event(&mut s.engine, s.now, SessionEvent::Abandoned(call.x));
        assert_eq!(s.session.poll_timeout(), None, "legacy: {legacy}");
        assert!(s.events().is_empty());
    }
    // A stream that ends in time leaves nothing to close.
    let mut s = Sim::modern();
    s.call("t");
    let call = s.next().unwrap();
    s.head(call.x, 200, &SSE);
    s.body(call.x, &format!("data: {}\n\n", reply(&call, json!({"content": []}))));
    assert!(matches!(s.end(call.x), ResponseStep::Ended { .. }));
    assert_eq!(s.session.poll_timeout(), None);
    s.advance(REPLY_LINGER);
    s.flush();
    assert!(s.closed.is_empty());
}

/// A call the server answers on another stream (the GET stream, or another call's, against
/// the spec) has its own stream closed a grace later, as if the reply had come on it: held
/// open and silent, it kept a connection of the pool for good, and a server doing it for
/// every call left no connection for the next ones.
#[test]
fn a_call_answered_on_another_stream_gives_its_connection_back() {
    for on_the_get_stream in [true, false] {
        let mut s = Sim::legacy(None);
        let get = s.listen.take().unwrap();
        s.head(get.x, 200, &SSE);
        s.call("a");
        let a = s.next().unwrap();
        s.head(a.x, 200, &SSE);
        s.call("b");
        let b = s.next().unwrap();
        s.head(b.x, 200, &SSE);
        let answer = reply(&a, json!({"content": []}));
        let carrier = if on_the_get_stream { get.x } else { b.x };
        assert_eq!(s.body(carrier, &format!("data: {answer}\n\n")), ResponseStep::More);
        assert!(s.events()[0].starts_with("done"), "get: {on_the_get_stream}");
        assert_eq!(s.session.poll_timeout(), Some(s.now + REPLY_LINGER));
        s.advance(REPLY_LINGER);
        s.flush();
        assert_eq!(s.closed, [a.x], "get: {on_the_get_stream}: only the answered call's");
    }
}

/// Event ids belong to a stream of one session: after the session is renewed, the new
/// session's GET stream starts afresh, with no `Last-Event-ID` (which a server would take for
/// a resumption of a stream it never had) and the default retry delay.
#[test]
fn a_new_session_opens_its_get_stream_without_the_old_sessions_event_id() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    s.respond(get.x, 200, &SSE, "retry: 60000\nid: ev-7\ndata: {}\n\n");
    s.call("t");
    let call = s.next().unwrap();
    s.respond(call.x, 404, &[], "");
    let init = s.next().unwrap();
    assert_eq!(init.rpc(), "initialize");
    s.answer_initialize(&init, "s-2");
    let get = s.next().unwrap();
    assert_eq!(get.method, "GET");
    assert_eq!(get.header("mcp-session-id"), Some("s-2"));
    assert_eq!(get.header("last-event-id"), None, "no id of the old session's stream");
    // Its end is followed by a new GET after the default delay, not the old stream's minute.
    s.respond(get.x, 200, &SSE, ": keep-alive\n\n");
    s.advance(DEFAULT_RETRY);
    let gets: Vec<Sent> = std::iter::from_fn(|| s.next()).filter(|x| x.method == "GET").collect();
    assert_eq!(gets.len(), 1, "the GET stream reopens after the default delay");
}

/// Found by the `http_session` fuzz target: a legacy POST stream counted as answered as soon
/// as any response came on it, whatever its id. A reply to another request (a server's
/// mistake) on a resumed stream then dropped the stream, and the call, whose own reply came
/// later, waited for its deadline; on the first stream it made the call's loss final instead
/// of resumable.
#[test]
fn only_the_calls_own_reply_answers_its_stream() {
    let stray = json!({"jsonrpc": "2.0", "id": 999_999, "result": {}});
    // On the first stream: the stray reply, then the stream breaks. It is resumed.
    let (mut s, call) = Sim::legacy_call();
    s.respond(call.x, 200, &SSE, &format!("id: e1\ndata: {stray}\n\n"));
    assert!(s.events().is_empty(), "the call is not over");
    s.advance(DEFAULT_RETRY);
    let resume = s.next().expect("the stream is resumed");
    assert_eq!(resume.header("last-event-id"), Some("e1"));
    // On the resumed stream: the stray reply does not end it; the call's own does.
    s.head(resume.x, 200, &SSE);
    assert_eq!(s.body(resume.x, &format!("id: e2\ndata: {stray}\n\n")), ResponseStep::More);
    let done = reply(&call, json!({"content": []}));
    assert_eq!(s.body(resume.x, &format!("id: e3\ndata: {done}\n\n")), ResponseStep::Close);
    assert_eq!(s.events(), [r#"done {"content":[]}"#]);
}

/// Found by the `http_session` fuzz target: a resumed stream is closed once the call's reply
/// is on it, and what followed the reply was read when it came in the same read and dropped
/// when it came in the next. Now nothing after the reply is read, however the bytes were cut.
#[test]
fn a_resumed_stream_ends_at_its_reply_however_the_bytes_were_cut() {
    let (mut s, call) = Sim::legacy_call();
    s.respond(call.x, 200, &SSE, "id: e1\ndata:\n\n");
    s.advance(DEFAULT_RETRY);
    let resume = s.next().unwrap();
    s.head(resume.x, 200, &SSE);
    let done = reply(&call, json!({"content": []}));
    let note = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
    let both = format!("id: e2\ndata: {done}\n\ndata: {note}\n\n");
    assert_eq!(s.body(resume.x, &both), ResponseStep::Close);
    assert_eq!(s.events(), [r#"done {"content":[]}"#], "the reply, and nothing after it");
}

#[test]
fn a_resume_that_is_refused_or_brings_nothing_ends_as_a_lost_reply() {
    let (mut s, call) = Sim::legacy_call();
    s.respond(call.x, 200, &SSE, "id: e1\ndata:\n\n");
    for i in 1..=MAX_IDLE_RESUMES {
        s.advance(DEFAULT_RETRY);
        let resume = s.next().unwrap();
        assert_eq!(resume.header("last-event-id"), Some("e1"));
        s.respond(resume.x, 200, &SSE, ": nothing new\n\n");
        if i < MAX_IDLE_RESUMES {
            assert!(s.events().is_empty(), "resume {i}: still waiting");
        }
    }
    assert!(s.session.poll_timeout().is_none(), "no endless resumes");
    let events = s.events();
    assert_eq!(events.len(), 1, "the call ended: {events:?}");
    assert!(events[0].starts_with("failed"), "{events:?}");
    // A 2025-11-25 server may still be working on the call: it is told nobody waits.
    s.advance(DEFAULT_RETRY);
    let note = s.next().expect("the cancellation");
    assert_eq!(
        (note.rpc(), &note.body["params"]["requestId"]),
        ("notifications/cancelled", &call.body["id"])
    );
    assert!(s.next().is_none());
    // A refused resume fails the call at once.
    let (mut s, call) = Sim::legacy_call();
    s.respond(call.x, 200, &SSE, "id: e1\ndata:\n\n");
    s.advance(DEFAULT_RETRY);
    let resume = s.next().unwrap();
    s.respond(resume.x, 404, &[], "");
    assert_eq!(s.events().len(), 1, "the call ended");
}

/// A resend keeps the kind of send it repeats: a resume refused for its token goes again as
/// a resume (`Stage::Waiting(Attempt::Resume)`), never as the request itself.
#[test]
fn a_resume_refused_for_its_token_resumes_again_with_the_fresh_token() {
    let tokens = Refresher { fresh: vec!["t1"] };
    let mut s = Sim::legacy(Some(Box::new(tokens)));
    let get = s.listen.take().unwrap();
    s.respond(get.x, 405, &[], "");
    s.call("t");
    let call = s.next().unwrap();
    assert_eq!(call.header("authorization"), Some("Bearer t0"));
    s.respond(call.x, 200, &SSE, "id: e1\ndata:\n\n");
    s.advance(DEFAULT_RETRY);
    let resume = s.next().unwrap();
    assert_eq!(resume.method, "GET");
    s.respond(resume.x, 401, &[], "");
    assert!(s.events().is_empty(), "the call is not over");
    let again = s.next().unwrap();
    assert_eq!(again.method, "GET", "the tools/call is not sent twice");
    assert_eq!(again.header("last-event-id"), Some("e1"));
    assert_eq!(again.header("authorization"), Some("Bearer t1"));
    s.head(again.x, 200, &SSE);
    let done = reply(&call, json!({"content": []}));
    assert_eq!(s.body(again.x, &format!("id: e2\ndata: {done}\n\n")), ResponseStep::Close);
    assert_eq!(s.events(), [r#"done {"content":[]}"#]);
    assert!(s.next().is_none());
}

#[test]
fn a_resume_that_cannot_connect_never_makes_the_request_look_unsent() {
    let (mut s, call) = Sim::legacy_call();
    s.respond(call.x, 200, &SSE, "id: e1\ndata:\n\n");
    let mut posts = Vec::new();
    for _ in 0..=MAX_IDLE_RESUMES {
        s.advance(DEFAULT_RETRY);
        let Some(resume) = s.next() else { break };
        if resume.method == "POST" {
            posts.push(resume.rpc().to_owned());
            continue;
        }
        assert_eq!(resume.method, "GET");
        let refused = TransportError::ConnectFailed(std::io::ErrorKind::ConnectionRefused);
        s.fail(resume.x, ExchangeFailure::Transport(refused));
    }
    s.advance(Duration::from_secs(10));
    posts.extend(s.next().map(|sent| sent.rpc().to_owned()));
    // Not the tools/call again: the cancellation a 2025-11-25 server is owed, once.
    assert_eq!(posts, ["notifications/cancelled"]);
    assert!(s.next().is_none());
    let events = s.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0].contains("ConnectionLost") && !events[0].contains("ConnectFailed"),
        "{events:?}"
    );
}

/// A resume whose GET was written and whose connection then broke before a head came (a TLS
/// handshake reset while the server restarts) is tried again, as one that could not connect
/// is: the request being written had made its exchange look like no event stream, and the
/// call failed at the first such break.
#[test]
fn a_resume_that_breaks_after_it_was_written_resumes_again() {
    let (mut s, call) = Sim::legacy_call();
    s.respond(call.x, 200, &SSE, "id: e1\ndata:\n\n");
    s.advance(DEFAULT_RETRY);
    let resume = s.next().unwrap();
    assert_eq!(resume.method, "GET");
    let reset = TransportError::ConnectFailed(std::io::ErrorKind::ConnectionReset);
    s.fail(resume.x, ExchangeFailure::Unsent(reset));
    assert!(s.events().is_empty(), "the call is not over");
    s.advance(DEFAULT_RETRY);
    let again = s.next().unwrap();
    assert_eq!((again.method.as_str(), again.header("last-event-id")), ("GET", Some("e1")));
    // A refusal of the resume ends the call, its delivery unknown.
    s.respond(again.x, 404, &[], "");
    let events = s.events();
    assert!(events.len() == 1 && events[0].contains("ConnectionLost"), "{events:?}");
}

/// A 307 or 308 with a `Location` was not processed: the request goes again, once, and the
/// driver is told where (Starlette answers `POST /mcp` with a 307 to `/mcp/`). The same
/// request redirected again fails with the status, as do a 302 (which would make the POST a
/// GET) and a 307 without a `Location`.
#[test]
fn a_redirect_sends_the_request_again_once_and_names_where() {
    for status in [307, 308] {
        let mut s = Sim::modern();
        s.call("t");
        let call = s.next().unwrap();
        s.respond(call.x, status, &[("Location", "http://127.0.0.1:9/mcp/")], "");
        assert!(s.events().is_empty(), "{status}: the call goes on");
        assert_eq!(s.session.take_moved().as_deref(), Some("http://127.0.0.1:9/mcp/"));
        assert_eq!(s.session.take_moved(), None, "told once");
        let again = s.next().expect("sent again");
        assert_eq!((again.rpc(), &again.body["id"]), ("tools/call", &call.body["id"]));
        s.respond(again.x, status, &[("Location", "/elsewhere")], "");
        assert_eq!(s.session.take_moved(), None, "{status}: followed once");
        let events = s.events();
        assert!(
            events.len() == 1 && events[0].contains(&format!("HttpStatus({status})")),
            "{events:?}"
        );
    }
    for (status, headers) in [(302, &[("Location", "/mcp/")][..]), (307, &[][..])] {
        let mut s = Sim::modern();
        s.call("t");
        let call = s.next().unwrap();
        s.respond(call.x, status, headers, "");
        assert_eq!(s.session.take_moved(), None, "{status}");
        let events = s.events();
        assert!(
            events.len() == 1 && events[0].contains(&format!("HttpStatus({status})")),
            "{events:?}"
        );
    }
}

/// A redirect whose response broke before its end is no redirect of the next request that
/// takes its slot: the location was kept by the session until some response ended, and that
/// request's own answer was thrown away and the request sent again (a write twice).
#[test]
fn a_redirect_cut_short_leaves_nothing_for_the_next_request() {
    let mut s = Sim::modern();
    s.call("first");
    let first = s.next().unwrap();
    s.head(first.x, 307, &[("Location", "/mcp/")]);
    s.fail(first.x, ExchangeFailure::Transport(TransportError::ConnectionLost));
    s.events();
    s.call("second");
    let second = s.next().expect("the second call");
    assert_eq!(second.x, first.x, "the slot is reused");
    s.json(second.x, reply(&second, json!({"content": []})));
    assert_eq!(s.events(), [r#"done {"content":[]}"#]);
    assert_eq!(s.session.take_moved(), None);
    assert!(s.next().is_none(), "sent once");
}

#[test]
fn modern_streams_are_never_resumed() {
    let mut s = Sim::modern();
    s.call("t");
    let call = s.next().unwrap();
    s.respond(call.x, 200, &SSE, "id: e1\nretry: 500\ndata:\n\n");
    assert!(s.session.poll_timeout().is_none());
    assert!(s.next().is_none());
    let events = s.events();
    assert!(
        events[0].contains("ConnectionLost") || events[0].contains("DeliveryUnknown"),
        "{events:?}"
    );
}

#[test]
fn cancelling_a_modern_call_hands_its_exchange_back_to_be_closed() {
    let mut s = Sim::modern();
    let c = s.call("t");
    let call = s.next().unwrap();
    s.engine.cancel(s.now, c).unwrap();
    s.flush();
    assert_eq!(s.closed, [call.x], "the driver closes the connection carrying it");
    s.session.handle_event(&mut s.engine, s.now, SessionEvent::Abandoned(call.x));
    s.call("u");
    assert_eq!(s.next().unwrap().x, call.x, "the exchange slot is reused");
}

#[test]
fn rotation_is_for_stateless_servers_and_network_failures_only() {
    let lost = TransportError::ConnectionLost;
    assert!(should_rotate(Some(Era::Modern), &lost));
    assert!(should_rotate(None, &lost), "while probing");
    assert!(!should_rotate(Some(Era::Legacy), &lost), "a session lives on one instance");
    let tls = TransportError::Tls(crate::error::TlsFailure::UnknownIssuer);
    assert!(!should_rotate(Some(Era::Modern), &tls));
}

#[test]
fn an_oversize_json_body_fails_the_call_as_too_large() {
    let mut s = Sim::with_limit(None, 4096);
    let probe = s.next().unwrap();
    let result = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private"});
    s.json(probe.x, reply(&probe, result));
    s.events();
    s.call("t");
    let call = s.next().unwrap();
    s.head(call.x, 200, &[("Content-Type", "application/json")]);
    assert_eq!(s.body(call.x, &"x".repeat(3000)), ResponseStep::More);
    assert_eq!(s.body(call.x, &"x".repeat(3000)), ResponseStep::Close);
    assert_eq!(s.events(), [format!("failed {:?}", CallError::Peer(PeerError::TooLarge))]);
    assert_eq!(s.engine.stats().too_large, 1);
}

/// An event over the size cap is dropped; when the stream then ends without the call's reply,
/// the reply was that event: the call fails as too large, as over a JSON body, and not as a
/// lost connection (which would make a write's delivery unknown and a read be retried).
#[test]
fn an_oversize_event_fails_the_call_as_too_large_in_either_era() {
    for legacy in [false, true] {
        let s = Sim::with_limit(None, 4096);
        let mut s = if legacy { Sim::legacy_in(s) } else { Sim::modern_in(s) };
        if let Some(get) = s.listen.take() {
            s.respond(get.x, 405, &[], "");
        }
        // Progress for the call, which asked for none: dropped, no event.
        let t = s.call("t");
        let call = s.next().unwrap();
        let big = json!({"content": [{"type": "text", "text": "x".repeat(5000)}]});
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": t.get(), "progress": 1}});
        let stream = format!("data: {progress}\n\ndata: {}\n\n", reply(&call, big));
        s.respond(call.x, 200, &SSE, &stream);
        let failed = format!("failed {:?}", CallError::Peer(PeerError::TooLarge));
        assert_eq!(s.events(), [failed], "legacy: {legacy}");
        assert_eq!(s.engine.stats().too_large, 1, "legacy: {legacy}");
    }
}

/// What the response parser refuses fails the exchange, and the connection closes: its
/// bytes can no longer be trusted to frame another response.
#[test]
fn a_response_the_parser_refuses_fails_its_call_and_closes_the_connection() {
    let mut s = Sim::modern();
    s.call("t");
    let call = s.next().unwrap();
    let broken = "HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n";
    assert_eq!(s.feed(call.x, broken.as_bytes()), ResponseStep::Close);
    let events = s.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].starts_with("failed") && events[0].contains("BadResponse"), "{events:?}");
}

/// Bytes of a response that has not ended yet ask for more; its end lets the connection
/// carry the next exchange unless the server said otherwise.
#[test]
fn a_response_ends_with_what_the_server_said_of_the_connection() {
    let mut s = Sim::modern();
    for (close, keep_alive) in [(false, true), (true, false)] {
        s.call("t");
        let call = s.next().unwrap();
        let body = reply(&call, json!({"content": []})).to_string();
        let connection = if close { "Connection: close\r\n" } else { "" };
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{connection}\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        assert_eq!(s.feed(call.x, head.as_bytes()), ResponseStep::More);
        assert_eq!(s.feed(call.x, body.as_bytes()), ResponseStep::Ended { keep_alive });
        assert_eq!(s.events(), [r#"done {"content":[]}"#]);
    }
}

#[test]
fn the_frame_budget_leaves_events_for_the_next_turn() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    s.head(get.x, 200, &SSE);
    let note = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
    let five: String = (0..5).map(|_| format!("data: {note}\n\n")).collect();
    let two = || Budget { frames: 2, units: usize::MAX };
    let mut budget = two();
    let flow = s.session.handle_body(&mut s.engine, s.now, get.x, five.as_bytes(), &mut budget);
    assert_eq!((flow, budget.frames), (ResponseStep::Backlog, 0));
    let mut budget = two();
    let flow = s.session.handle_body(&mut s.engine, s.now, get.x, &[], &mut budget);
    assert_eq!((flow, budget.frames), (ResponseStep::Backlog, 0));
    let mut budget = two();
    let flow = s.session.handle_body(&mut s.engine, s.now, get.x, &[], &mut budget);
    assert_eq!((flow, budget.frames), (ResponseStep::More, 1), "the fifth, then nothing waits");
}

/// Comments, blank lines and `id:`-only events deliver nothing, so the frame budget never
/// stops them: the unit budget does, one unit per line, and the rest waits for the next turn.
#[test]
fn the_unit_budget_stops_a_flood_that_delivers_nothing() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    s.head(get.x, 200, &SSE);
    let flood = ": ping\n\nid: 7\n\n\n\n".repeat(1000);
    let mut turns = 0;
    let mut budget = Budget { frames: 64, units: 100 };
    let mut flow =
        s.session.handle_body(&mut s.engine, s.now, get.x, flood.as_bytes(), &mut budget);
    while flow == ResponseStep::Backlog {
        assert_eq!(budget, Budget { frames: 64, units: 0 });
        turns += 1;
        budget = Budget { frames: 64, units: 100 };
        flow = s.session.handle_body(&mut s.engine, s.now, get.x, &[], &mut budget);
    }
    // 6,000 lines at 100 a turn: 59 turns left a backlog, the 60th took the last 100 lines.
    assert_eq!((flow, turns, budget.units), (ResponseStep::More, 59, 0));
    assert!(s.events().is_empty());
}

mod dpop;
mod oauth;

/// A token the session holds (a bearer, a provider's, OAuth's) is the one `Authorization`:
/// a configured header of that name (a config file's `Authorization: Bearer ${TOKEN}` beside
/// `--bearer`) is left out, not sent as a second one that servers and proxies refuse or pick
/// from at random. Without a token the configured header goes as it is.
#[test]
fn a_token_replaces_a_configured_authorization_header() {
    let token: Box<dyn TokenProvider> = Box::new(StaticToken("real".into()));
    let mut s = Sim::new(Some(token));
    s.session.headers.push(("authorization".into(), "Bearer from-file".into()));
    let probe = s.next().unwrap();
    let values: Vec<&str> = probe
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(values, ["Bearer real"]);
    assert_eq!(probe.header("x-extra"), Some("1"), "other configured headers still go");

    let mut s = Sim::new(None);
    s.session.headers.push(("Authorization".into(), "Bearer from-file".into()));
    assert_eq!(s.next().unwrap().header("authorization"), Some("Bearer from-file"));
}

#[test]
fn debug_output_shows_no_credentials_session_id_or_bodies() {
    let extra = vec![("X-Api-Key".to_owned(), "k3y-value".to_owned())];
    let token: Box<dyn TokenProvider> = Box::new(StaticToken("s3cret".into()));
    let mut session = HttpSession::new(extra, Some(token), 1024).unwrap();
    session.session_id = Some("sess-777".into());
    let shown = format!("{session:?}");
    // "115, 51, 99" is "s3c" as the bytes a derived `Debug` of a `Vec<u8>` shows.
    for secret in ["s3cret", "k3y-value", "sess-777", "115, 51, 99"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("X-Api-Key") && shown.contains("<redacted>"), "{shown}");
}

/// A notification POST whose answer never comes has its connection closed after
/// `MESSAGE_WAIT`: no call's deadline bounds it, and it kept a connection of the pool for
/// good (four such, the default pool, and no call was ever sent again).
#[test]
fn a_notification_whose_answer_never_comes_gives_its_connection_back() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    s.respond(get.x, 405, &[], "");
    let id = s.call("t");
    let call = s.next().unwrap();
    // A legacy cancel posts `notifications/cancelled` (and closes the call's stream).
    s.engine.cancel(s.now, id).unwrap();
    let note = s.next().expect("a notification");
    assert_eq!(note.rpc(), "notifications/cancelled");
    assert_eq!(s.closed, [call.x]);
    s.closed.clear();
    s.events();
    assert_eq!(s.session.poll_timeout(), Some(s.now + MESSAGE_WAIT));
    s.advance(MESSAGE_WAIT);
    s.flush();
    assert_eq!(s.closed, [note.x], "its connection is closed");
    s.session.handle_event(&mut s.engine, s.now, SessionEvent::Abandoned(note.x));
    assert_eq!(s.session.poll_timeout(), None);
}

/// A 404 from a session already replaced (its request went out before another request's 404
/// renewed the session) sends the request again in the current session, and renews nothing:
/// taken as the current session's end, it made a third session, ending the second's tasks and
/// server requests.
#[test]
fn a_late_404_of_a_replaced_session_is_sent_again_in_the_new_one() {
    let (mut s, first) = Sim::legacy_call();
    s.call("b");
    let second = s.next().unwrap();
    assert_eq!(second.header("mcp-session-id"), Some("s-1"));
    s.respond(first.x, 404, &[], "");
    let init = s.next().expect("the handshake");
    s.answer_initialize(&init, "s-2");
    while let Some(sent) = s.next_delivered() {
        assert_ne!(sent.rpc(), "initialize");
        if sent.rpc() == "tools/call" {
            assert_eq!(sent.body["params"]["name"], "t", "the first call goes again");
        }
    }
    s.respond(second.x, 404, &[], "");
    let again = s.next().expect("the second call, again");
    assert_eq!(again.rpc(), "tools/call");
    assert_eq!(again.body["params"]["name"], "b");
    assert_eq!(again.header("mcp-session-id"), Some("s-2"));
    assert!(s.next().is_none(), "no third session");
    assert_eq!(s.engine.stats().sessions_renewed, 1);
}

/// A legacy call cancelled while it still waits for a connection is released unsent, and no
/// `notifications/cancelled` goes for it: the notice named a request id the server never saw.
#[test]
fn a_legacy_call_cancelled_before_it_went_is_not_announced() {
    let (mut s, _first) = Sim::legacy_call();
    let waiting = s.call("b");
    s.flush(); // `b` waits for a connection
    s.engine.cancel(s.now, waiting).unwrap();
    s.flush();
    assert!(s.session.peek_waiting().is_none(), "nothing to send");
    let events = s.events();
    assert!(events.iter().any(|e| e.starts_with("failed Local(Cancelled)")), "{events:?}");
}

/// A legacy session that expires is made anew before anything else goes: a request that
/// waited for a connection went out first, with no session id (the old one is dropped when
/// the new `initialize` is queued), and the server refused it (a 400 the call failed with).
#[test]
fn requests_waiting_at_a_session_renewal_go_after_the_handshake_with_the_new_id() {
    let (mut s, first) = Sim::legacy_call();
    s.call("b");
    s.flush(); // `b` waits for a connection
    s.respond(first.x, 404, &[], "");
    let init = s.next().expect("the handshake");
    assert_eq!(init.rpc(), "initialize", "the handshake goes first");
    assert!(s.next().is_none(), "nothing goes before the new session's id");
    s.answer_initialize(&init, "s-2");
    let mut calls = Vec::new();
    while let Some(sent) = s.next_delivered() {
        if sent.rpc() == "tools/call" {
            assert_eq!(sent.header("mcp-session-id"), Some("s-2"), "{:?}", sent.body);
            calls.push(sent.body["params"]["name"].as_str().unwrap_or_default().to_owned());
        }
    }
    calls.sort();
    assert_eq!(calls, ["b", "t"], "both calls go, in the new session");
}

/// A request sent again while a session renewal's handshake waits (a 401 a fresh token
/// answers) goes behind the handshake, not in front of it: at the front it held the handshake
/// back for good (nothing goes before a new session's id), and the server was closed when the
/// handshake's time ran out.
#[test]
fn a_request_sent_again_during_a_renewal_waits_behind_the_handshake() {
    let mut s = Sim::legacy(Some(Box::new(Refresher { fresh: vec!["t1"] })));
    let get = s.listen.take().unwrap();
    s.respond(get.x, 405, &[], "");
    s.call("a");
    let a = s.next().unwrap();
    s.call("b");
    let b = s.next().unwrap();
    s.respond(a.x, 404, &[], "");
    s.flush(); // the handshake waits for a connection
    s.respond(b.x, 401, &[], "");
    let init = s.next().expect("the handshake goes");
    assert_eq!(init.rpc(), "initialize");
    s.answer_initialize(&init, "s-2");
    let mut calls = Vec::new();
    while let Some(sent) = s.next_delivered() {
        if sent.rpc() == "tools/call" {
            assert_eq!(sent.header("mcp-session-id"), Some("s-2"), "{:?}", sent.body);
            calls.push(sent.body["params"]["name"].as_str().unwrap_or_default().to_owned());
        }
    }
    calls.sort();
    assert_eq!(calls, ["a", "b"], "both calls go, in the new session");
}

/// An `initialize` whose SSE stream brought the session id in its head and then broke is
/// resumed in that session: the resume carries `Mcp-Session-Id` as every request after the
/// initialize does (without it the SDKs refuse the resume, and the session was left open).
#[test]
fn a_broken_initialize_stream_is_resumed_in_its_session() {
    let mut s = Sim::new(None);
    let probe = s.next().unwrap();
    s.respond(probe.x, 400, &[("Content-Type", "application/json")], LEGACY_SESSION_GONE);
    let init = s.next().unwrap();
    assert_eq!(init.rpc(), "initialize");
    let head = [("Content-Type", "text/event-stream"), ("Mcp-Session-Id", "s-1")];
    assert!(matches!(s.head(init.x, 200, &head), ResponseStep::More));
    s.body(init.x, "id: i1\nretry: 250\ndata:\n\n");
    s.fail(init.x, ExchangeFailure::Transport(TransportError::ConnectionLost));
    s.advance(Duration::from_millis(250));
    let resume = s.next().expect("the resume");
    assert_eq!((resume.method.as_str(), resume.header("last-event-id")), ("GET", Some("i1")));
    assert_eq!(resume.header("mcp-session-id"), Some("s-1"));
    // The resume's head names the session again (as the TypeScript SDK's does), and its
    // stream breaks too: the same session, so it is resumed again; a second adoption made it
    // a gone session's resume, and the handshake failed and started a session anew.
    let head = [("Content-Type", "text/event-stream"), ("Mcp-Session-Id", "s-1")];
    assert!(matches!(s.head(resume.x, 200, &head), ResponseStep::More));
    s.body(resume.x, "id: i2\n\n");
    s.fail(resume.x, ExchangeFailure::Transport(TransportError::ConnectionLost));
    s.advance(Duration::from_millis(250));
    let again = s.next().expect("resumed again");
    assert_eq!((again.method.as_str(), again.header("last-event-id")), ("GET", Some("i2")));
    assert_eq!(again.header("mcp-session-id"), Some("s-1"));
    assert!(s.events().is_empty(), "nothing failed");
}

/// The handshake that renews a session has its broken stream resumed before what waits for a
/// connection: nothing goes before a handshake under way, so the resume, queued behind a call
/// that waited, waited for good, and the server was closed when the handshake's time ran out.
#[test]
fn a_renewals_broken_initialize_stream_is_resumed_before_what_waits() {
    let (mut s, first) = Sim::legacy_call();
    // `x` waits for a connection (the pool busy): taken by the session, not by the driver.
    s.call("x");
    s.flush();
    assert_eq!(s.session.requests_waiting(), 1);
    s.respond(first.x, 404, &[], "");
    let init = s.next().expect("the handshake");
    assert_eq!(init.rpc(), "initialize");
    let head = [("Content-Type", "text/event-stream"), ("Mcp-Session-Id", "s-2")];
    assert!(matches!(s.head(init.x, 200, &head), ResponseStep::More));
    s.body(init.x, "id: i1\nretry: 250\ndata:\n\n");
    s.fail(init.x, ExchangeFailure::Transport(TransportError::ConnectionLost));
    assert!(s.session.requests_waiting() > 0, "a request waits behind the handshake");
    s.advance(Duration::from_millis(250));
    let resume = s.next().expect("the handshake's resume");
    assert_eq!((resume.method.as_str(), resume.header("last-event-id")), ("GET", Some("i1")));
    assert_eq!(resume.header("mcp-session-id"), Some("s-2"));
}

/// A broken stream of a session that another request's 404 replaced is not resumed in the new
/// session, whose server never saw its event ids: its call ends as a lost connection (a write:
/// `DeliveryUnknown`). It went as a GET with the old `Last-Event-ID` and the new session's id.
#[test]
fn a_broken_stream_of_a_gone_session_is_not_resumed_in_the_new_one() {
    let (mut s, first) = Sim::legacy_call();
    assert!(matches!(s.head(first.x, 200, &SSE), ResponseStep::More));
    s.body(first.x, "id: e1\nretry: 500\ndata:\n\n");
    s.fail(first.x, ExchangeFailure::Transport(TransportError::ConnectionLost));
    s.call("b");
    let b = s.next().expect("b");
    s.respond(b.x, 404, &[], "");
    let init = s.next().expect("the handshake");
    assert_eq!(init.rpc(), "initialize");
    s.answer_initialize(&init, "s-2");
    s.advance(Duration::from_millis(500));
    while let Some(sent) = s.next() {
        assert_ne!(sent.header("last-event-id"), Some("e1"), "resumed in the new session");
    }
    let events = s.events();
    assert!(events.iter().any(|e| e.contains("DeliveryUnknown")), "{events:?}");
}

/// A write whose stream is open when the session's renewal is refused (the new `initialize`
/// answered 401, 400 or with an error) may be running on the server: its end is
/// `DeliveryUnknown`, not the handshake's error, which read as the server refusing the write
/// (and a host that re-authorized and retried ran it twice).
#[test]
fn a_write_running_when_the_renewal_is_refused_is_delivery_unknown() {
    for (status, body) in [(401, ""), (400, ""), (200, "error")] {
        let (mut s, write) = renewal_under_a_running_write(Duration::from_secs(30));
        let init = s.next().expect("the handshake");
        assert_eq!(init.rpc(), "initialize");
        if body == "error" {
            let error = json!({"jsonrpc": "2.0", "id": init.body["id"],
                "error": {"code": -32603, "message": "no"}});
            s.json(init.x, error);
        } else {
            s.respond(init.x, status, &[], body);
        }
        let w_end = failure_of(&mut s, write);
        let unknown = matches!(w_end, Some(CallError::Local(LocalError::DeliveryUnknown(_))));
        assert!(unknown, "{status} {body}: {w_end:?}");
    }
}

/// A legacy session (its GET stream refused) with write `w` (of `timeout`) running, its event
/// stream open, and another call's 404 starting the session's renewal.
fn renewal_under_a_running_write(timeout: Duration) -> (Sim, crate::CallId) {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    s.respond(get.x, 405, &[], "");
    let args = serde_json::value::RawValue::from_string("{}".into()).unwrap();
    let write = s.engine.call_tool(s.now, "w", &args, &CallOptions::timeout(timeout)).unwrap();
    let w = s.next().expect("w");
    assert!(matches!(s.head(w.x, 200, &SSE), ResponseStep::More));
    s.body(w.x, "id: e1\ndata:\n\n");
    s.call("b");
    let b = s.next().expect("b");
    s.respond(b.x, 404, &[], "");
    (s, write)
}

/// How `call` failed, among the events (all taken).
fn failure_of(s: &mut Sim, call: crate::CallId) -> Option<CallError> {
    let mut failed = None;
    while let Some(e) = s.engine.poll_event() {
        if let Event::CallFailed { call: c, error, .. } = e {
            if c == call {
                failed = Some(error.clone());
            }
        }
    }
    failed
}

/// A write whose stream is open while the session's renewal never answers (its handshake
/// given up after its retries) ends `DeliveryUnknown` too: the handshake's local end
/// (`DeadlineExceeded`, long before the write's own deadline) is not the write's.
#[test]
fn a_write_running_when_the_renewal_times_out_is_delivery_unknown() {
    let (mut s, write) = renewal_under_a_running_write(Duration::from_secs(24 * 3600));
    let mut w_end = None;
    for _ in 0..64 {
        while let Some(sent) = s.next() {
            assert_eq!(sent.rpc(), "initialize", "only the handshake goes, unanswered");
        }
        s.advance(s.engine.config().handshake_timeout);
        w_end = failure_of(&mut s, write);
        if w_end.is_some() {
            break;
        }
    }
    let unknown = matches!(w_end, Some(CallError::Local(LocalError::DeliveryUnknown(_))));
    assert!(unknown, "{w_end:?}");
}

/// A 2xx that does not carry a write's reply (text, an empty body, JSON answering another
/// id) says the server took the request and no more: the write ends `DeliveryUnknown`, not
/// as a refusal (`HttpStatus(200)` read as "nothing happened", and a host sent it again).
#[test]
fn a_write_answered_2xx_without_its_reply_is_delivery_unknown() {
    let plain = [("Content-Type", "text/plain")];
    let json_type = [("Content-Type", "application/json")];
    let other = json!({"jsonrpc": "2.0", "id": 999_999, "result": {}}).to_string();
    for (status, headers, body) in
        [(200, &plain[..], "ok"), (202, &[][..], ""), (200, &json_type[..], other.as_str())]
    {
        let mut s = Sim::modern();
        s.call("t");
        let t = s.next().expect("t");
        s.respond(t.x, status, headers, body);
        let events = s.events();
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(events[0].contains("DeliveryUnknown"), "{status} {body}: {events:?}");
    }
}

/// A legacy call taken for a connection that is still opening (TCP, a proxy's tunnel, TLS)
/// has not been written: cancelled then, its connection closes and no
/// `notifications/cancelled` is posted for an id the server never saw.
#[test]
fn a_cancel_of_a_request_never_written_posts_no_notice() {
    let (mut s, _first) = Sim::legacy_call();
    let call = s.call("b");
    s.flush();
    assert!(s.session.peek_waiting().is_some());
    let x = s.session.poll_exchange(&mut s.engine, s.now).expect("on a connection, unwritten");
    s.engine.cancel(s.now, call).unwrap();
    s.flush();
    assert!(s.closed.contains(&x), "its connection closes");
    let sent = s.next();
    assert!(sent.is_none(), "a notice for an id the server never saw: {sent:?}");
}

/// A slot keeps no more room than [`SLOT_BUF_KEEP`] once its exchange is over, and the body
/// of an answer's POST is not gathered at all: a server answering with megabytes left every
/// slot it passed through holding them for the session's life.
#[test]
fn slots_give_back_the_room_of_large_bodies() {
    let mut s = Sim::legacy_in(Sim::with_limit(None, 4 << 20));
    let get = s.listen.take().unwrap();
    assert!(matches!(s.head(get.x, 200, &SSE), ResponseStep::More));
    s.body(get.x, &format!("data: {}\n\n", json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})));
    s.flush();
    let pong = s.next().expect("the ping's answer");
    assert_eq!(pong.body["id"], 1);
    let big = "x".repeat(1 << 20);
    s.json(pong.x, json!({"padding": big}));
    s.call("a");
    let a = s.next().unwrap();
    let body = reply(&a, json!({"content": [{"type": "text", "text": big}]}));
    s.json(a.x, body);
    assert!(s.events().iter().any(|e| e.starts_with("done")));
    let held: Vec<usize> = s.session.exchanges.iter().map(|x| x.reply.capacity()).collect();
    assert!(held.iter().all(|&c| c <= SLOT_BUF_KEEP), "{held:?}");
}

/// The bound on answers waiting to be posted leaves a cancellation through: a call cancelled
/// while the server floods the session with pings still tells the server (the notice was
/// dropped with the pongs past the bound).
#[test]
fn a_cancellation_passes_the_bound_on_waiting_answers() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    assert!(matches!(s.head(get.x, 200, &SSE), ResponseStep::More));
    let call = s.call("slow");
    let sent = s.next().expect("the call");
    assert_eq!(sent.rpc(), "tools/call");
    for n in 0..(MAX_MESSAGES + 10) {
        let ping = json!({"jsonrpc": "2.0", "id": n, "method": "ping"});
        s.body(get.x, &format!("data: {ping}\n\n"));
    }
    s.flush();
    s.engine.cancel(s.now, call).unwrap();
    let mut cancelled = false;
    while let Some(sent) = s.next() {
        cancelled |= sent.rpc() == "notifications/cancelled";
    }
    assert!(cancelled, "the server is told");
}

/// A server that asks faster than the answers' POSTs complete (pings on the GET stream, none
/// of their POSTs answered) cannot grow the session's exchanges past a bound: each answer
/// became an exchange of its own, without limit.
#[test]
fn answers_waiting_to_be_posted_are_bounded() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    assert!(matches!(s.head(get.x, 200, &SSE), ResponseStep::More));
    for round in 0..20 {
        for n in 0..100 {
            let ping = json!({"jsonrpc": "2.0", "id": round * 100 + n, "method": "ping"});
            s.body(get.x, &format!("data: {ping}\n\n"));
        }
        s.flush();
    }
    assert!(s.session.exchanges.len() <= MAX_MESSAGES + 4, "{}", s.session.exchanges.len());
    // A call still goes, once the driver gets to it.
    s.call("after");
    let mut went = false;
    while let Some(sent) = s.next() {
        went |= sent.rpc() == "tools/call";
    }
    assert!(went, "the call was sent");
}

/// A legacy GET stream answered 404 (the server forgot the session, say after a restart)
/// makes a new session, and the new session gets a GET stream of its own: the stream was
/// given up as unsupported, and an idle client heard nothing more from the server.
#[test]
fn a_get_stream_that_finds_its_session_gone_makes_a_new_one() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    assert_eq!(get.header("mcp-session-id"), Some("s-1"));
    s.respond(get.x, 404, &[], "");
    let init = s.next().expect("a new handshake");
    assert_eq!(init.rpc(), "initialize");
    s.answer_initialize(&init, "s-2");
    let get = s.next().expect("the new session's GET stream");
    assert_eq!((get.method.as_str(), get.header("mcp-session-id")), ("GET", Some("s-2")));
}

/// A stateful server with no GET handler answers the GET stream 404, as a web framework does
/// for a method it has no route for: the first 404 makes the session anew (it may be gone),
/// the new session's 404 says there is no GET stream. It made a session after each before:
/// handshakes in a loop, each ending the old session's task calls and server requests.
#[test]
fn a_get_stream_refused_404_in_a_new_session_is_no_stream() {
    let mut s = Sim::legacy(None);
    let mut get = s.listen.take().unwrap();
    let mut handshakes = 0;
    for n in 2..6 {
        s.respond(get.x, 404, &[], "");
        let Some(init) = s.next().filter(|x| x.rpc() == "initialize") else { break };
        handshakes += 1;
        s.answer_initialize(&init, &format!("s-{n}"));
        let Some(next) = s.next().filter(|x| x.method == "GET") else { break };
        get = next;
    }
    assert_eq!(handshakes, 1, "one new session, then no GET stream");
    assert!(s.next().is_none(), "nothing more is sent");
    s.advance(Duration::from_secs(60));
    assert!(s.next().is_none(), "nor asked again later");
}

/// A probe the server never answers is given up after its timeout the 2026 HTTP way, by
/// closing its stream: left open, it held a connection for good (with `max_connections` 1
/// the fallback `initialize` never got one, and a server that would have worked was not
/// reached).
#[test]
fn a_probe_that_timed_out_has_its_stream_closed() {
    let mut s = Sim::new(None);
    let probe = s.next().unwrap();
    assert_eq!(probe.rpc(), "server/discover");
    s.advance(Duration::from_secs(5));
    s.flush();
    assert!(s.closed.contains(&probe.x), "the probe's stream is closed");
    // Over HTTP a timeout is no era evidence: the probe goes again, not `initialize`.
    s.advance(Duration::from_millis(250));
    assert_eq!(s.next().unwrap().rpc(), "server/discover");
}

/// The TypeScript SDK (v1) says a session it forgot (it restarted) with 400 and a JSON-RPC
/// -32000, on the GET stream as on a POST: the session is made anew, once, as for a 404. The
/// stream was switched off for good instead, and a client that only listened (for
/// `list_changed`, server requests) never heard from the server again.
#[test]
fn a_get_stream_refused_400_for_a_forgotten_session_makes_a_new_one() {
    let json_type = [("Content-Type", "application/json")];
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    assert!(matches!(s.head(get.x, 200, &SSE), ResponseStep::More));
    s.fail(get.x, ExchangeFailure::Transport(TransportError::ConnectionLost));
    s.advance(Duration::from_secs(2));
    let again = s.next().expect("the GET reconnects");
    assert_eq!((again.method.as_str(), again.header("mcp-session-id")), ("GET", Some("s-1")));
    s.respond(again.x, 400, &json_type, LEGACY_SESSION_GONE);
    let init = s.next().expect("a new session");
    assert_eq!((init.rpc(), init.header("mcp-session-id")), ("initialize", None));
    s.answer_initialize(&init, "s-2");
    let get = s.next().unwrap();
    assert_eq!((get.method.as_str(), get.header("mcp-session-id")), ("GET", Some("s-2")));
    // The same answer to the new session's first GET: no GET stream, no third session.
    s.respond(get.x, 400, &json_type, LEGACY_SESSION_GONE);
    s.advance(Duration::from_secs(120));
    let rest: Vec<String> = std::iter::from_fn(|| s.next()).map(|x| x.rpc().to_owned()).collect();
    assert_eq!(rest, ["notifications/initialized"], "nothing but the new session's own");
}

/// The guard on GET-made sessions holds only until the session is known to work: a call's
/// 404 that made the session anew, or a GET stream served, and a later 404 on the GET stream
/// is a gone session again (it was taken for no GET stream, for good).
#[test]
fn a_get_stream_404_after_a_calls_renewal_makes_a_new_session_again() {
    let mut s = Sim::legacy(None);
    let get = s.listen.take().unwrap();
    s.respond(get.x, 404, &[], "");
    let init = s.next().expect("a new session");
    s.answer_initialize(&init, "s-2");
    let frames: Vec<Sent> = std::iter::from_fn(|| s.next_delivered()).collect();
    let get = frames.iter().find(|x| x.method == "GET").expect("its GET stream");
    // The stream is not served yet; a call finds the session gone (the server restarted).
    s.call("t");
    let call = s.next().unwrap();
    s.respond(call.x, 404, &[], "");
    let init = s.next().expect("a session for the call");
    assert_eq!(init.rpc(), "initialize");
    s.session.handle_event(&mut s.engine, s.now, SessionEvent::Abandoned(get.x));
    s.answer_initialize(&init, "s-3");
    let frames: Vec<Sent> = std::iter::from_fn(|| s.next_delivered()).collect();
    let get = frames.iter().find(|x| x.method == "GET").expect("the third session's GET");
    assert_eq!(get.header("mcp-session-id"), Some("s-3"));
    s.respond(get.x, 404, &[], "");
    let again = s.next().expect("the GET stream's 404 makes a session again");
    assert_eq!(again.rpc(), "initialize");
}

/// A session made anew closes the old session's GET stream: left open, its later end set the
/// new session's stream state (a 404 gave it up as unsupported; another end opened a second
/// stream) and its events named the `Last-Event-ID` the new stream would resume from.
#[test]
fn a_session_made_anew_closes_the_old_get_stream() {
    let mut s = Sim::legacy(None);
    let old_get = s.listen.take().unwrap();
    assert!(matches!(s.head(old_get.x, 200, &SSE), ResponseStep::More));
    s.body(old_get.x, "id: old-7\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n");
    s.call("t");
    let call = s.next().unwrap();
    s.respond(call.x, 404, &[], "");
    let init = s.next().expect("the handshake");
    assert_eq!(init.rpc(), "initialize");
    assert!(s.closed.contains(&old_get.x), "the old GET stream is closed");
    s.session.handle_event(&mut s.engine, s.now, SessionEvent::Abandoned(old_get.x));
    s.answer_initialize(&init, "s-2");
    let get = s.next().expect("the new session's GET stream");
    assert_eq!(get.method, "GET");
    assert_eq!(get.header("mcp-session-id"), Some("s-2"));
    assert_eq!(get.header("last-event-id"), None, "nothing of the old stream");
}

/// A 401 or 403 whose body is a JSON-RPC error (a rejected `Origin` answers so, with a null
/// id) is an authorization answer, not the request's protocol error: during the probe it was
/// taken as legacy evidence, `initialize` was refused the same way, and the server closed
/// with `Protocol(-32000)` instead of waiting as `Unauthorized` (`Forbidden`, the challenge
/// kept).
#[test]
fn a_401_or_403_with_a_json_rpc_body_is_an_authorization_answer() {
    let body = r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Invalid Origin"},"id":null}"#;
    for (status, kind) in [(403, "Forbidden"), (401, "AuthRequired")] {
        let mut s = Sim::new(None);
        let probe = s.next().unwrap();
        s.respond(probe.x, status, &[("Content-Type", "application/json")], body);
        assert!(s.next().is_none(), "{status}: no initialize");
        assert_eq!(s.engine.state(), ServerState::Unauthorized, "{status}");
        let why = format!("{:?}", s.engine.authorization_error());
        assert!(why.contains(kind), "{status}: {why}");
    }
}

/// Over HTTP each message is a POST of its own, on whichever connection is free: a call
/// queued during the handshake would race `notifications/initialized`, and a server that
/// reads the call first refuses it (the Python SDK: "Received request before initialization
/// was complete"). Requests wait until the notification's POST is over.
#[test]
fn requests_wait_for_the_initialized_notification_to_be_delivered() {
    let mut s = Sim::new(None);
    let probe = s.next().unwrap();
    s.respond(probe.x, 400, &[("Content-Type", "application/json")], LEGACY_SESSION_GONE);
    s.call("t");
    let init = s.next().unwrap();
    assert_eq!(init.rpc(), "initialize");
    s.answer_initialize(&init, "s-1");
    let get = s.next().unwrap();
    assert_eq!(get.method, "GET");
    let initialized = s.next().unwrap();
    assert_eq!(initialized.rpc(), "notifications/initialized");
    assert!(s.next().is_none(), "the call waits for the notification's delivery");
    s.respond(initialized.x, 202, &[], "");
    let call = s.next().unwrap();
    assert_eq!((call.rpc(), call.header("mcp-session-id")), ("tools/call", Some("s-1")));

    // A notification POST that fails holds nothing back for good.
    let mut s = Sim::new(None);
    let probe = s.next().unwrap();
    s.respond(probe.x, 400, &[("Content-Type", "application/json")], LEGACY_SESSION_GONE);
    s.call("t");
    let init = s.next().unwrap();
    s.answer_initialize(&init, "s-1");
    let _get = s.next().unwrap();
    let initialized = s.next().unwrap();
    s.fail(initialized.x, ExchangeFailure::Transport(TransportError::ConnectionLost));
    assert_eq!(s.next().unwrap().rpc(), "tools/call");
}

/// An `initialize` answered with an empty `Mcp-Session-Id` names no session: adopted, the
/// empty header went out on every request after it, and a server that keeps sessions refused
/// each one as a gone session, over and over.
#[test]
fn an_empty_session_id_is_not_adopted() {
    let mut s = Sim::new(None);
    let probe = s.next().unwrap();
    s.respond(probe.x, 400, &[("Content-Type", "application/json")], LEGACY_SESSION_GONE);
    let init = s.next().unwrap();
    s.answer_initialize(&init, "");
    assert_eq!(s.session.session_id(), None);
    s.call("t");
    let sent: Vec<Sent> = std::iter::from_fn(|| s.next_delivered()).collect();
    let call = sent.iter().find(|x| x.rpc() == "tools/call").expect("the call goes");
    assert_eq!(call.header("mcp-session-id"), None);
}

impl Sim {
    /// [`legacy_call`](Self::legacy_call) whose call found the session gone (404), with a
    /// second call `b` (300 s to live) waiting for a connection: the renewal's `initialize`
    /// is on the wire, and returned.
    fn renewal_with_a_waiting_call() -> (Self, Sent) {
        let (mut s, first) = Sim::legacy_call();
        let args = serde_json::value::RawValue::from_string(r#"{"city":"Oslo"}"#.into()).unwrap();
        let opts = CallOptions::timeout(Duration::from_secs(300));
        s.engine.call_tool(s.now, "b", &args, &opts).unwrap();
        s.flush(); // `b` waits for a connection
        s.respond(first.x, 404, &[], "");
        let init = s.next().expect("the handshake");
        assert_eq!(init.rpc(), "initialize");
        (s, init)
    }

    /// What goes first once anything does, a second at a time for at most 20 s.
    fn first_to_go(&mut self) -> Vec<Sent> {
        for _ in 0..20 {
            let sent: Vec<Sent> = std::iter::from_fn(|| self.next()).collect();
            if !sent.is_empty() {
                return sent;
            }
            self.advance(Duration::from_secs(1));
        }
        Vec::new()
    }
}

/// A renewal whose `initialize` the engine sends again later (it timed out, or met a 503)
/// holds the old session's requests meanwhile: between the two sends the handshake's exchange
/// was over, and they went out with no session id, which a server that keeps sessions
/// refuses. They go in the new session, with its id.
#[test]
fn requests_wait_out_a_renewal_sent_again_later() {
    let (mut s, _) = Sim::renewal_with_a_waiting_call();
    // The handshake times out: its stream is closed (the driver abandons the exchange), and
    // it goes again after a backoff.
    s.advance(Duration::from_secs(31));
    s.flush();
    for x in std::mem::take(&mut s.closed) {
        s.session.handle_event(&mut s.engine, s.now, SessionEvent::Abandoned(x));
    }
    let sent = s.first_to_go();
    let methods: Vec<&str> = sent.iter().map(Sent::rpc).collect();
    assert_eq!(methods, ["initialize"], "nothing goes before the new session");
    s.answer_initialize(&sent[0], "s-2");
    let after: Vec<Sent> = std::iter::from_fn(|| s.next_delivered()).collect();
    let b = after.iter().find(|x| x.rpc() == "tools/call").expect("b goes");
    assert_eq!(b.header("mcp-session-id"), Some("s-2"));
}

/// The renewal's hold ends where the handshake does, and only there. A 2xx head naming the
/// new session is not the end: its body may break before the result, and the `initialize`
/// that goes again after a backoff must still come first (the waiting call went under the
/// half-made session). And a renewal the server refuses as one upgraded to the modern era
/// ends with the legacy session: the probe that follows goes (held behind the waiting
/// legacy call, it never went, and the server was closed).
#[test]
fn a_renewals_hold_ends_with_its_handshake_or_its_era() {
    // Broken after its head: nothing but the handshake goes until it is answered.
    let (mut s, init) = Sim::renewal_with_a_waiting_call();
    let head = [("Content-Type", "text/event-stream"), ("Mcp-Session-Id", "s-2")];
    assert!(matches!(s.head(init.x, 200, &head), ResponseStep::More));
    s.fail(init.x, ExchangeFailure::Transport(TransportError::ConnectionLost));
    let methods: Vec<String> = s.first_to_go().iter().map(|x| x.rpc().to_owned()).collect();
    assert_eq!(methods, ["initialize"], "nothing before the handshake ends");
    // Refused by a server now modern: the probe goes.
    let (mut s, init) = Sim::renewal_with_a_waiting_call();
    let refusal = json!({"jsonrpc": "2.0", "id": init.body["id"], "error": {"code": -32022,
        "message": "unsupported", "data": {"supported": ["2026-07-28"]}}});
    s.respond(init.x, 400, &[("Content-Type", "application/json")], &refusal.to_string());
    let methods: Vec<String> =
        std::iter::from_fn(|| s.next()).map(|x| x.rpc().to_owned()).take(4).collect();
    assert!(methods.iter().any(|m| m == "server/discover"), "{methods:?}");
}
