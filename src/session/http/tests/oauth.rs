//! The OAuth flow in the session, in simulated time: the test plays the driver (makes the
//! flow's requests), the authorization server and the MCP server.

use super::*;
use crate::auth::oauth::{HttpMethod, HttpResponse, OAuthConfig, OAuthFlow, PreRegistered};
use crate::session::http::OAuthState;

const SERVER: &str = "https://mcp.test/mcp";
const CHALLENGE: &str =
    r#"Bearer resource_metadata="https://mcp.test/.well-known/oauth-protected-resource/mcp""#;

/// What the authorization server says, and what it was asked.
#[derive(Default)]
struct As {
    /// Token responses, in order: `(status, body)`.
    tokens: Vec<(u16, Value)>,
    asked: Vec<String>,
}

impl As {
    fn answer(&mut self, url: &str, body: &[u8]) -> (u16, Value) {
        let form = String::from_utf8_lossy(body).into_owned();
        self.asked.push(format!("{url} {form}"));
        if url.contains("oauth-protected-resource") {
            (200, json!({"resource": SERVER, "authorization_servers": ["https://as.test"]}))
        } else if url.contains("/.well-known/oauth-authorization-server") {
            (
                200,
                json!({"issuer": "https://as.test", "token_endpoint": "https://as.test/token",
                "grant_types_supported": ["client_credentials", "refresh_token"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"]}),
            )
        } else if url == "https://as.test/token" && !self.tokens.is_empty() {
            self.tokens.remove(0)
        } else {
            (404, json!({}))
        }
    }
}

fn token(access: &str) -> (u16, Value) {
    (
        200,
        json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600,
        "refresh_token": format!("r-{access}")}),
    )
}

impl Sim {
    fn with_oauth(mut self) -> Self {
        let config =
            OAuthConfig::client_credentials(SERVER, PreRegistered::with_secret("id", "secret"));
        let flow = OAuthFlow::new(config, self.now, 1_800_000_000).unwrap();
        self.session.with_oauth(self.now, OAuthState::new(flow, None));
        self
    }

    /// Plays the driver for the flow's requests until it has none.
    fn run_flow(&mut self, server: &mut As) -> usize {
        let mut n = 0;
        while let Some(req) = self.session.poll_oauth_request() {
            n += 1;
            assert!(self.session.peek_waiting().is_none(), "requests wait for the flow");
            assert_eq!(req.method == HttpMethod::Post, req.url.ends_with("/token"));
            let (status, body) = server.answer(&req.url, &req.body);
            let body = body.to_string();
            let response = HttpResponse::new(status, body.as_bytes());
            let answer = OAuthAnswer::Response(response);
            self.session.handle_event(
                &mut self.engine,
                self.now,
                SessionEvent::OAuth(req.id, answer),
            );
        }
        n
    }

    fn refuse(&mut self, x: ExchangeId, status: u16, challenge: &str) {
        self.respond(x, status, &[("WWW-Authenticate", challenge)], "");
    }
}

#[test]
fn a_401_runs_the_flow_and_the_refused_requests_go_again_first_with_the_token() {
    let mut s = Sim::modern().with_oauth();
    let mut server = As { tokens: vec![token("tok-1")], ..As::default() };
    s.call("a");
    let a = s.next().unwrap();
    assert_eq!(a.header("authorization"), None, "no token yet");
    s.refuse(a.x, 401, CHALLENGE);
    assert_eq!(s.events(), Vec::<String>::new(), "the refusal is not the call's outcome");
    // A call made while the flow runs waits for it.
    s.call("b");
    s.flush();
    assert!(s.session.peek_waiting().is_none());
    assert_eq!(s.run_flow(&mut server), 3, "PRM, AS metadata, token");
    assert!(server.asked[2].contains("grant_type=client_credentials"), "{:?}", server.asked);
    let again = s.next().unwrap();
    assert_eq!(again.body["params"]["name"], "a", "the refused call goes first");
    assert_eq!(again.header("authorization"), Some("Bearer tok-1"));
    let b = s.next().unwrap();
    assert_eq!(b.body["params"]["name"], "b");
    assert_eq!(b.header("authorization"), Some("Bearer tok-1"));
    let body = reply(&again, json!({"content": []}));
    s.json(again.x, body);
    assert_eq!(s.events(), [r#"done {"content":[]}"#]);
}

/// A probe refused with 401 waits for the flow it started however long the flow takes (a
/// user's consent in a browser), and goes again with the token: its timeout measures the
/// server. It ran on while the flow ran, and after 5 s the engine fell back to `initialize`,
/// which a modern-only server refuses (closing the server when the refusal lists no version).
/// And a probe over HTTP that times out is sent again, never exchanged for `initialize`: a
/// timeout says nothing of the era.
#[test]
fn a_probe_waiting_for_the_flow_keeps_its_era_and_its_timeout() {
    let mut s = Sim::new(None).with_oauth();
    let mut server = As { tokens: vec![token("tok-1")], ..As::default() };
    let probe = s.next().unwrap();
    assert_eq!(probe.rpc(), "server/discover");
    s.refuse(probe.x, 401, CHALLENGE);
    s.advance(Duration::from_secs(60));
    s.flush();
    assert_eq!(s.run_flow(&mut server), 3);
    let again = s.next().unwrap();
    assert_eq!(again.rpc(), "server/discover", "the probe again, with the token");
    assert_eq!(again.header("authorization"), Some("Bearer tok-1"));
    assert!(s.next().is_none());
    // Unanswered, it times out after its own 5 s from now on, and is sent again.
    s.advance(Duration::from_millis(4_900));
    s.flush();
    assert!(s.next().is_none(), "its timeout starts at the resend");
    let mut methods = Vec::new();
    for _ in 0..4 {
        s.advance(Duration::from_secs(3));
        s.flush();
        methods.extend(std::iter::from_fn(|| s.next()).map(|x| x.rpc().to_owned()));
    }
    assert!(!methods.is_empty(), "probed again after the timeout");
    assert!(methods.iter().all(|m| m == "server/discover"), "{methods:?}");
}

/// Call `a` refused with a 401, and the flow it started run (PRM, metadata, token) against an
/// authorization server that gives `tokens` in turn.
fn refused_then_flowed(tokens: &[&str]) -> (Sim, As) {
    let mut s = Sim::modern().with_oauth();
    let mut server = As { tokens: tokens.iter().map(|t| token(t)).collect(), ..As::default() };
    s.call("a");
    let a = s.next().unwrap();
    s.refuse(a.x, 401, CHALLENGE);
    assert_eq!(s.run_flow(&mut server), 3);
    (s, server)
}

/// A request refused with 401 again after a flow got a token for it is answered so: no flow
/// per round for it, though another request's success starts the flow's own count over.
#[test]
fn a_request_refused_again_after_its_flow_is_answered_not_flowed_again() {
    let (mut s, mut server) = refused_then_flowed(&["tok-1", "tok-2"]);
    let a = s.next().unwrap();
    assert_eq!(a.header("authorization"), Some("Bearer tok-1"));
    s.call("b");
    let b = s.next().unwrap();
    let body = reply(&b, json!({"content": []}));
    s.json(b.x, body);
    s.refuse(a.x, 401, CHALLENGE);
    assert_eq!(s.run_flow(&mut server), 0, "no second flow for the same request");
    let events = s.events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events[1].starts_with("failed Peer(AuthRequired"), "{events:?}");
    assert!(s.next().is_none(), "nothing is resent");
}

/// A second 401 that names other resource metadata (the resource moved to another
/// authorization server) gets a flow of its own; a third refusal is the answer.
#[test]
fn a_request_whose_resource_moved_gets_one_more_flow() {
    const MOVED: &str =
        r#"Bearer resource_metadata="https://mcp.test/.well-known/oauth-protected-resource/v2""#;
    let (mut s, mut server) = refused_then_flowed(&["tok-1", "tok-2"]);
    let a = s.next().unwrap();
    s.refuse(a.x, 401, MOVED);
    assert!(s.run_flow(&mut server) > 0, "the moved resource's metadata is followed");
    assert!(server.asked.iter().any(|q| q.contains("oauth-protected-resource/v2")));
    let a = s.next().unwrap();
    assert_eq!(a.header("authorization"), Some("Bearer tok-2"));
    s.refuse(a.x, 401, CHALLENGE);
    assert_eq!(s.run_flow(&mut server), 0, "two flows per request at most");
    let events = s.events();
    assert!(events.iter().any(|e| e.starts_with("failed Peer(AuthRequired")), "{events:?}");
    assert!(s.next().is_none(), "nothing is resent");
}

/// A closed session keeps no token refresh due: the flow's timer kept a closed server in the
/// host's deadlines and refreshed (rotated) the user's tokens for nobody.
#[test]
fn a_closed_session_refreshes_no_token() {
    let (mut s, _) = refused_then_flowed(&["tok-1"]);
    assert!(s.session.poll_timeout().is_some(), "the refresh is due before the expiry");
    s.session.close(s.now, "http://127.0.0.1:9/mcp", |_| ());
    assert_eq!(s.session.poll_timeout(), None);
    s.now += Duration::from_secs(3600);
    s.session.handle_timeout(&mut s.engine, s.now);
    assert!(s.session.poll_oauth_request().is_none(), "no refresh");
}

#[test]
fn a_failed_flow_fails_the_refused_requests_with_the_step_that_failed() {
    let mut s = Sim::modern().with_oauth();
    let refused = (401, json!({"error": "invalid_client"}));
    let mut server = As { tokens: vec![refused], ..As::default() };
    s.call("a");
    let a = s.next().unwrap();
    s.refuse(a.x, 401, CHALLENGE);
    s.run_flow(&mut server);
    let events = s.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].starts_with("failed Peer(Authorization("), "{events:?}");
    assert!(events[0].contains("invalid_client"), "{events:?}");
    assert!(s.next().is_none(), "nothing is resent");
}

#[test]
fn a_401_to_a_token_already_replaced_resends_without_a_new_flow() {
    let mut s = Sim::modern().with_oauth();
    let mut server = As { tokens: vec![token("tok-1")], ..As::default() };
    s.call("a");
    s.call("b");
    let a = s.next().unwrap();
    let b = s.next().unwrap();
    s.refuse(a.x, 401, CHALLENGE);
    s.run_flow(&mut server);
    // `b` was sent without the token and is refused after the flow got one.
    s.refuse(b.x, 401, CHALLENGE);
    assert!(s.session.poll_oauth_request().is_none(), "no second flow");
    let first = s.next().unwrap();
    let second = s.next().unwrap();
    let mut names = [first.body["params"]["name"].clone(), second.body["params"]["name"].clone()];
    names.sort_by_key(|v| v.to_string());
    assert_eq!(names, [json!("a"), json!("b")]);
    assert_eq!(second.header("authorization"), Some("Bearer tok-1"));
}

#[test]
fn the_token_is_refreshed_before_it_expires() {
    let mut s = Sim::modern().with_oauth();
    let mut server = As { tokens: vec![token("tok-1"), token("tok-2")], ..As::default() };
    s.call("a");
    let a = s.next().unwrap();
    s.refuse(a.x, 401, CHALLENGE);
    s.run_flow(&mut server);
    let a = s.next().unwrap();
    let body = reply(&a, json!({"content": []}));
    s.json(a.x, body);
    s.events();
    let due = s.session.poll_timeout().expect("a refresh is scheduled");
    assert!(due > s.now + Duration::from_secs(3000) && due < s.now + Duration::from_secs(3600));
    s.now = due;
    s.session.oauth_timeout(&mut s.engine, s.now);
    assert_eq!(s.run_flow(&mut server), 1);
    assert!(server.asked.last().unwrap().contains("grant_type=refresh_token"));
    s.call("c");
    let c = s.next().unwrap();
    assert_eq!(c.header("authorization"), Some("Bearer tok-2"));
}

#[test]
fn a_403_other_than_insufficient_scope_is_not_the_flows_business() {
    let mut s = Sim::modern().with_oauth();
    s.call("a");
    let a = s.next().unwrap();
    s.refuse(a.x, 403, r#"Bearer error="invalid_token""#);
    assert!(s.session.poll_oauth_request().is_none());
    let events = s.events();
    assert!(events[0].starts_with("failed Peer(Forbidden("), "{events:?}");
}

#[test]
fn a_403_insufficient_scope_runs_the_flow_for_more_scope() {
    let mut s = Sim::modern().with_oauth();
    let mut server = As { tokens: vec![token("tok-1"), token("tok-2")], ..As::default() };
    s.call("a");
    let a = s.next().unwrap();
    s.refuse(a.x, 401, CHALLENGE);
    s.run_flow(&mut server);
    let a = s.next().unwrap();
    let step_up = format!(r#"{CHALLENGE}, error="insufficient_scope", scope="admin""#);
    s.refuse(a.x, 403, &step_up);
    assert_eq!(s.events(), Vec::<String>::new());
    // A call made while the step-up runs goes at once with the token in hand: held, every
    // request waited for the step-up (a user's consent, up to 300 s).
    s.call("b");
    let b = s.next().expect("not held by the step-up");
    assert_eq!(b.header("authorization"), Some("Bearer tok-1"));
    s.run_flow(&mut server);
    assert!(server.asked.last().unwrap().contains("scope=admin"), "{:?}", server.asked);
    let a = s.next().unwrap();
    assert_eq!(a.header("authorization"), Some("Bearer tok-2"));
}

/// Every request the driver would put on a connection now.
fn drain(s: &mut Sim) -> Vec<Sent> {
    std::iter::from_fn(|| s.next()).collect()
}

#[test]
fn legacy_get_stream_and_notifications_wait_for_the_flow_then_go_with_the_token() {
    let mut s = Sim::legacy(None).with_oauth();
    let mut server = As { tokens: vec![token("tok-1")], ..As::default() };
    let get = s.listen.take().unwrap();
    let note = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
    // The server ends the GET stream after one event: it is due again after the 250 ms floor.
    s.respond(get.x, 200, &SSE, &format!("id: ev-3\nretry: 0\ndata: {note}\n\n"));
    let b = s.call("b");
    let b_sent = s.next().unwrap();
    s.call("a");
    let a = s.next().unwrap();
    s.refuse(a.x, 401, CHALLENGE);
    // While the flow runs: a notification to send (b cancelled) and the GET stream due.
    s.engine.cancel(s.now, b).unwrap();
    s.advance(Duration::from_millis(250));
    assert!(s.next().is_none(), "nothing goes out while the flow runs");
    assert_eq!(s.run_flow(&mut server), 3, "PRM, AS metadata, token");

    let sent = drain(&mut s);
    let what: Vec<String> = sent
        .iter()
        .map(|x| if x.method == "GET" { "GET".to_owned() } else { x.rpc().to_owned() })
        .collect();
    assert_eq!(what.len(), 3, "{what:?}");
    assert_eq!(sent[0].body["params"]["name"], "a", "the refused call goes first: {what:?}");
    for x in &sent {
        assert_eq!(x.header("authorization"), Some("Bearer tok-1"), "{}", x.rpc());
        assert_eq!(x.header("mcp-session-id"), Some("s-1"), "{}", x.rpc());
    }
    let get = sent.iter().find(|x| x.method == "GET").expect("the GET stream reopens");
    assert_eq!(get.header("last-event-id"), Some("ev-3"), "and resumes where it was");
    let cancel = sent.iter().find(|x| x.rpc() == "notifications/cancelled").expect("the notice");
    assert_eq!(cancel.body["params"]["requestId"], b_sent.body["id"]);
}

#[test]
fn a_legacy_get_stream_refused_with_401_waits_for_the_flow_and_for_a_refresh() {
    let mut s = Sim::legacy(None).with_oauth();
    let tokens = vec![token("tok-1"), token("tok-2"), token("tok-3")];
    let mut server = As { tokens, ..As::default() };
    // A token from a first flow (a call refused, then answered).
    s.call("a");
    let a = s.next().unwrap();
    s.refuse(a.x, 401, CHALLENGE);
    s.run_flow(&mut server);
    let a = s.next().unwrap();
    s.json(a.x, reply(&a, json!({"content": []})));
    s.events();

    // The GET stream (opened before any token) ends; its reopening carries tok-1 and is
    // refused (the server revoked it): it waits for a new flow, then reopens with its
    // Last-Event-ID and the new token.
    let get = s.listen.take().unwrap();
    s.respond(get.x, 200, &SSE, "id: ev-5\nretry: 0\ndata: {}\n\n");
    s.advance(Duration::from_millis(250));
    let get = s.next().unwrap();
    assert_eq!(get.method, "GET");
    assert_eq!(get.header("authorization"), Some("Bearer tok-1"));
    s.refuse(get.x, 401, CHALLENGE);
    s.advance(Duration::from_secs(5));
    assert!(s.next().is_none(), "the GET stream is parked, not retried on its schedule");
    assert_eq!(s.run_flow(&mut server), 3);
    let get = s.next().unwrap();
    assert_eq!(get.method, "GET");
    assert_eq!(get.header("authorization"), Some("Bearer tok-2"));
    assert_eq!(get.header("last-event-id"), Some("ev-5"));
    assert!(s.next().is_none());

    // A refresh before tok-2 expires: the stream ending meanwhile waits for it too.
    s.respond(get.x, 200, &SSE, "id: ev-6\nretry: 0\n\n");
    let due = s.session.oauth_poll_timeout().expect("a refresh is scheduled");
    assert!(due > s.now + Duration::from_secs(3000), "tok-2 lasts an hour");
    s.now = due;
    s.session.oauth_timeout(&mut s.engine, s.now);
    s.call("c");
    assert!(s.next().is_none(), "nothing goes out while the refresh runs");
    assert_eq!(s.run_flow(&mut server), 1, "one refresh request");
    assert!(server.asked.last().unwrap().contains("grant_type=refresh_token"));
    let sent = drain(&mut s);
    assert_eq!(sent.len(), 2, "{sent:?}");
    for x in &sent {
        assert_eq!(x.header("authorization"), Some("Bearer tok-3"));
    }
    let get = sent.iter().find(|x| x.method == "GET").expect("the GET stream reopens");
    assert_eq!(get.header("last-event-id"), Some("ev-6"));
    assert!(sent.iter().any(|x| x.body["params"]["name"] == "c"));
}

/// A 401 may carry its challenges on several `WWW-Authenticate` lines; the `Bearer` one
/// after a `Basic` one is read (only the first line was, and its `resource_metadata` lost).
#[test]
fn a_bearer_challenge_on_a_second_header_line_is_read() {
    let mut s = Sim::modern().with_oauth();
    let mut server = As { tokens: vec![token("tok-1")], ..As::default() };
    s.call("a");
    let a = s.next().unwrap();
    let prm = "https://mcp.test/elsewhere/oauth-protected-resource-of-mcp";
    let bearer = format!(r#"Bearer resource_metadata="{prm}""#);
    let headers = [("WWW-Authenticate", r#"Basic realm="mcp""#), ("WWW-Authenticate", &bearer)];
    s.respond(a.x, 401, &headers, "");
    s.run_flow(&mut server);
    assert!(server.asked[0].starts_with(prm), "{:?}", server.asked);
    assert_eq!(s.next().unwrap().header("authorization"), Some("Bearer tok-1"));
}

/// A 2025-11-25 GET stream refused 401 whose flow fails (no authorizer, the authorization
/// server down) is opened again later each time, as after any failure: it was opened again
/// every second for as long as the session lived, each time a whole flow (discovery, a token
/// request, a prompt with a user authorizer).
#[test]
fn a_get_stream_whose_flow_fails_is_not_reopened_every_second() {
    let mut s = Sim::legacy(None).with_oauth();
    let mut server = As::default();
    let (mut flows, mut get) = (0, s.listen.take());
    for _ in 0..20 {
        if let Some(g) = get.take() {
            assert_eq!(g.method, "GET");
            s.refuse(g.x, 401, CHALLENGE);
            flows += usize::from(s.run_flow(&mut server) > 0);
        }
        s.advance(Duration::from_secs(1));
        get = s.next();
    }
    assert!((2..=5).contains(&flows), "{flows} flows in 20 s");
}
