//! An authorization server in the test, on loopback, serving each discovery variant of the
//! MCP authorization section (2025-11-25 and 2026-07-28, with the 2025-03-26 fallbacks), and
//! the real `HttpDriver` finding it end to end: where it looked, in which order, and that the
//! call went through with the token. Then deferred authorization: the authorizer answers
//! later, through `Host::handle_redirect`.

mod common;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::mini::{authorize_redirect, mcp_answer, registered, MiniServer, Request, Response};
use common::{raw, refused_with};
use mcpoll::oauth::{
    AuthFailure, AuthStep, Authorization, AuthorizeError, Authorizer, OAuthConfig, PreRegistered,
    RedirectError,
};
use mcpoll::{
    CallError, CallOptions, Config, EraPreference, Host, HttpOptions, LocalError, PeerError,
    ServerState,
};

const TOKEN: &str = "tok-variant";
const REDIRECT: &str = "http://127.0.0.1:9/cb";

/// Where each document is, for one variant. Paths are on the MCP server (PRM) or on the
/// authorization server (metadata), which is the MCP server itself for the legacy variants.
#[derive(Debug, Clone, Copy)]
struct Variant {
    name: &'static str,
    /// `WWW-Authenticate` carries `resource_metadata` pointing at `prm_at`.
    challenge_points: bool,
    /// Where the PRM is served; `None`: no PRM (a 2025-03-26 server).
    prm_at: Option<&'static str>,
    /// The PRM's `resource`: the server's URL (`/mcp`) or its origin (``).
    resource_path: &'static str,
    /// The issuer's path (empty for an origin).
    issuer_path: &'static str,
    /// Where the metadata is served; `None`: nowhere (2025-03-26 default endpoints).
    meta_at: Option<&'static str>,
    /// The metadata says `issuer` is something else.
    wrong_issuer: bool,
}

const BASE: Variant = Variant {
    name: "",
    challenge_points: false,
    prm_at: Some("/.well-known/oauth-protected-resource/mcp"),
    resource_path: "/mcp",
    issuer_path: "",
    meta_at: Some("/.well-known/oauth-authorization-server"),
    wrong_issuer: false,
};

/// The two servers of one variant; the authorization server is the MCP server when there is
/// no PRM.
struct Rig {
    mcp: MiniServer,
    auth: Option<MiniServer>,
    issuer: String,
}

/// What both servers answer: the MCP endpoint (bearer required), PRM, metadata, and the
/// authorization server's endpoints.
fn handler(
    v: Variant,
    mcp_base: Arc<OnceLock<String>>,
    issuer: Arc<OnceLock<String>>,
) -> impl Fn(&Request) -> Response + Send + Sync + 'static {
    move |req: &Request| {
        let mcp_base = mcp_base.get().cloned().unwrap_or_default();
        let issuer = issuer.get().cloned().unwrap_or_default();
        let path = req.path.split('?').next().unwrap_or_default();
        let endpoints = issuer.clone();
        if req.method == "POST" && path == "/mcp" {
            if req.header("authorization") == Some(&format!("Bearer {TOKEN}")) {
                return mcp_answer(req);
            }
            let challenge = match (v.challenge_points, v.prm_at) {
                (true, Some(prm)) => format!(r#"Bearer resource_metadata="{mcp_base}{prm}""#),
                _ => "Bearer".to_owned(),
            };
            let headers = vec![("WWW-Authenticate".into(), challenge)];
            return Response { status: 401, headers, body: String::new() };
        }
        if req.method == "GET" && Some(path) == v.prm_at {
            return Response::json(serde_json::json!({
                "resource": format!("{mcp_base}{}", v.resource_path),
                "authorization_servers": [issuer]}));
        }
        if req.method == "GET" && Some(path) == v.meta_at {
            let named = if v.wrong_issuer { format!("{issuer}/other") } else { issuer.clone() };
            return Response::json(serde_json::json!({
                "issuer": named,
                "authorization_endpoint": format!("{endpoints}/authorize"),
                "token_endpoint": format!("{endpoints}/token"),
                "registration_endpoint": format!("{endpoints}/register"),
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": true,
                "token_endpoint_auth_methods_supported": ["none"]}));
        }
        // The endpoints: at the issuer's path, or the origin's defaults without metadata.
        let endpoint = path.strip_prefix(v.issuer_path).unwrap_or(path);
        match (req.method.as_str(), endpoint) {
            ("GET", "/authorize") => {
                // RFC 9207: `iss` where the metadata advertises it.
                let iss = match v.meta_at {
                    Some(_) => format!("&iss={}", encode(&issuer)),
                    None => String::new(),
                };
                authorize_redirect(req, REDIRECT, &iss)
            }
            ("POST", "/register") => registered(),
            ("POST", "/token") if req.body.contains("code=c1") => {
                Response::json(serde_json::json!({
                    "access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600}))
            }
            _ => {
                let mut r = Response::json(serde_json::json!({"error": "not_found"}));
                r.status = 404;
                r
            }
        }
    }
}

/// Percent-encodes what a URL in a query needs.
fn encode(s: &str) -> String {
    s.replace('%', "%25").replace(':', "%3A").replace('/', "%2F")
}

impl Rig {
    fn start(v: Variant) -> Self {
        let (mcp_base, issuer): (Arc<OnceLock<String>>, Arc<OnceLock<String>>) = Default::default();
        let mcp = MiniServer::start(None, handler(v, Arc::clone(&mcp_base), Arc::clone(&issuer)));
        let base = format!("http://127.0.0.1:{}", mcp.port);
        let _ = mcp_base.set(base.clone());
        let (auth, origin) = match v.prm_at {
            Some(_) => {
                let auth = MiniServer::start(None, handler(v, mcp_base, Arc::clone(&issuer)));
                let origin = format!("http://127.0.0.1:{}", auth.port);
                (Some(auth), origin)
            }
            None => (None, base),
        };
        let _ = issuer.set(format!("{origin}{}", v.issuer_path));
        Self { mcp, auth, issuer: format!("{origin}{}", v.issuer_path) }
    }

    /// Every request either server saw, in order, as `METHOD server path` (`mcp` or `as`),
    /// without the MCP POSTs.
    fn discovery(&self) -> Vec<String> {
        let mut all: Vec<(std::time::Instant, String)> = Vec::new();
        for (name, server) in [("mcp", Some(&self.mcp)), ("as", self.auth.as_ref())] {
            for r in server.map(MiniServer::requests).unwrap_or_default() {
                if r.method == "POST" && r.path == "/mcp" {
                    continue;
                }
                let path = r.path.split('?').next().unwrap_or_default().to_owned();
                all.push((r.at, format!("{} {name} {path}", r.method)));
            }
        }
        all.sort_by_key(|(at, _)| *at);
        all.into_iter().map(|(_, s)| s).collect()
    }

    fn options(&self, authorizer: Box<dyn Authorizer>) -> HttpOptions {
        let url = self.mcp.url("http", "127.0.0.1");
        HttpOptions::new(url.clone())
            .oauth(OAuthConfig::authorization_code(url, REDIRECT))
            .authorizer(authorizer)
    }
}

/// A headless user: follows the authorization URL with a plain GET and returns the
/// `Location` it is sent to. Records the URLs it was given.
#[derive(Debug, Default)]
struct Follow(Arc<Mutex<Vec<String>>>);

fn follow(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, target) = rest.split_at(rest.find('/').expect("a path"));
    let mut s = std::net::TcpStream::connect(authority).expect("connect to the AS");
    write!(s, "GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n").unwrap();
    let mut head = String::new();
    let mut buf = [0u8; 4096];
    while !head.contains("\r\n\r\n") {
        let n = s.read(&mut buf).expect("read the AS");
        assert!(n > 0, "the AS closed early: {head}");
        head.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    head.lines().find_map(|l| l.strip_prefix("Location: ")).expect("a redirect").trim().to_owned()
}

impl Authorizer for Follow {
    fn authorize(&mut self, url: &str) -> Result<String, AuthorizeError> {
        self.0.lock().unwrap().push(url.to_owned());
        Ok(follow(url))
    }
}

/// Runs `v` to a successful call; returns what was fetched, in order, and the
/// authorization URL.
fn run(v: Variant) -> (Rig, Vec<String>, String) {
    let rig = Rig::start(v);
    let urls = Arc::default();
    let mut host = Host::new().unwrap();
    let id = host
        .add_http_server(rig.options(Box::new(Follow(Arc::clone(&urls)))), Config::default())
        .unwrap();
    let state = host.wait_ready(id, common::PATIENCE).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{}: {state}", v.name);
    let r = host.call_tool_blocking(id, "echo", &raw(r#"{"text":"in"}"#), &CallOptions::default());
    assert!(r.expect(v.name).json.contains("\"in\""), "{}", v.name);
    let urls = urls.lock().unwrap().clone();
    assert_eq!(urls.len(), 1, "{}: one authorization", v.name);
    let seen = rig.discovery();
    (rig, seen, urls[0].clone())
}

#[test]
fn prm_from_the_challenges_resource_metadata() {
    let v = Variant {
        name: "resource_metadata",
        challenge_points: true,
        prm_at: Some("/custom/prm"),
        ..BASE
    };
    let (rig, seen, url) = run(v);
    assert_eq!(
        seen,
        [
            "GET mcp /custom/prm",
            "GET as /.well-known/oauth-authorization-server",
            "POST as /register",
            "GET as /authorize",
            "POST as /token"
        ]
    );
    assert!(url.starts_with(&format!("{}/authorize?", rig.issuer)), "{url}");
    assert!(url.contains(&format!("resource={}", encode(&rig.mcp.url("http", "127.0.0.1")))));
}

#[test]
fn prm_at_the_path_aware_well_known_location() {
    let (_, seen, _) = run(Variant { name: "path-aware PRM", ..BASE });
    assert_eq!(
        seen,
        [
            "GET mcp /.well-known/oauth-protected-resource/mcp",
            "GET as /.well-known/oauth-authorization-server",
            "POST as /register",
            "GET as /authorize",
            "POST as /token"
        ]
    );
}

#[test]
fn prm_at_the_root_well_known_location_after_the_path_aware_one() {
    let v = Variant {
        name: "root PRM",
        prm_at: Some("/.well-known/oauth-protected-resource"),
        resource_path: "",
        ..BASE
    };
    let (_, seen, _) = run(v);
    assert_eq!(
        seen,
        [
            "GET mcp /.well-known/oauth-protected-resource/mcp",
            "GET mcp /.well-known/oauth-protected-resource",
            "GET as /.well-known/oauth-authorization-server",
            "POST as /register",
            "GET as /authorize",
            "POST as /token"
        ]
    );
}

#[test]
fn openid_configuration_at_the_root_after_rfc_8414() {
    let v =
        Variant { name: "OpenID root", meta_at: Some("/.well-known/openid-configuration"), ..BASE };
    let (_, seen, _) = run(v);
    assert_eq!(
        seen[1..3],
        [
            "GET as /.well-known/oauth-authorization-server",
            "GET as /.well-known/openid-configuration"
        ]
    );
}

#[test]
fn an_issuer_with_a_path_by_rfc_8414_path_insertion() {
    let v = Variant {
        name: "8414 insertion",
        issuer_path: "/tenant1",
        meta_at: Some("/.well-known/oauth-authorization-server/tenant1"),
        ..BASE
    };
    let (rig, seen, url) = run(v);
    assert_eq!(
        seen,
        [
            "GET mcp /.well-known/oauth-protected-resource/mcp",
            "GET as /.well-known/oauth-authorization-server/tenant1",
            "POST as /tenant1/register",
            "GET as /tenant1/authorize",
            "POST as /tenant1/token"
        ]
    );
    assert!(url.starts_with(&format!("{}/authorize?", rig.issuer)), "{url}");
}

#[test]
fn an_issuer_with_a_path_by_openid_path_insertion() {
    let v = Variant {
        name: "OpenID insertion",
        issuer_path: "/tenant1",
        meta_at: Some("/.well-known/openid-configuration/tenant1"),
        ..BASE
    };
    let (_, seen, _) = run(v);
    assert_eq!(
        seen[1..3],
        [
            "GET as /.well-known/oauth-authorization-server/tenant1",
            "GET as /.well-known/openid-configuration/tenant1"
        ]
    );
}

#[test]
fn an_issuer_with_a_path_by_openid_path_appending() {
    let v = Variant {
        name: "OpenID appending",
        issuer_path: "/tenant1",
        meta_at: Some("/tenant1/.well-known/openid-configuration"),
        ..BASE
    };
    let (_, seen, _) = run(v);
    assert_eq!(
        seen[1..4],
        [
            "GET as /.well-known/oauth-authorization-server/tenant1",
            "GET as /.well-known/openid-configuration/tenant1",
            "GET as /tenant1/.well-known/openid-configuration"
        ]
    );
}

#[test]
fn no_prm_means_metadata_at_the_servers_origin() {
    // 2025-03-26: the MCP server's origin is the authorization server.
    let v = Variant { name: "legacy metadata", prm_at: None, ..BASE };
    let (rig, seen, url) = run(v);
    assert_eq!(
        seen,
        [
            "GET mcp /.well-known/oauth-protected-resource/mcp",
            "GET mcp /.well-known/oauth-protected-resource",
            "GET mcp /.well-known/oauth-authorization-server",
            "POST mcp /register",
            "GET mcp /authorize",
            "POST mcp /token"
        ]
    );
    assert!(url.starts_with(&format!("{}/authorize?", rig.issuer)), "{url}");
    assert!(!url.contains("resource="), "no PRM, no resource parameter: {url}");
}

#[test]
fn no_metadata_at_all_means_the_default_endpoints() {
    let v = Variant { name: "legacy defaults", prm_at: None, meta_at: None, ..BASE };
    let (rig, seen, url) = run(v);
    assert_eq!(
        seen,
        [
            "GET mcp /.well-known/oauth-protected-resource/mcp",
            "GET mcp /.well-known/oauth-protected-resource",
            "GET mcp /.well-known/oauth-authorization-server",
            "GET mcp /.well-known/openid-configuration",
            "POST mcp /register",
            "GET mcp /authorize",
            "POST mcp /token"
        ]
    );
    assert!(url.starts_with(&format!("{}/authorize?", rig.issuer)), "{url}");
}

/// Runs `v`, which discovery must refuse: the engine closes with an authorization error of
/// the discovery step; returns the rig and the reason.
fn refused_in_discovery(v: Variant) -> (Rig, AuthFailure) {
    let rig = Rig::start(v);
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(rig.options(Box::<Follow>::default()), Config::default());
    match refused_with(&mut host, id.unwrap()) {
        CallError::Peer(PeerError::Authorization(e)) => {
            assert_eq!(e.step, AuthStep::Discovery, "{e}");
            (rig, e.reason)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_prm_for_another_resource_is_refused() {
    let v = Variant { name: "wrong resource", resource_path: "/other", ..BASE };
    let (rig, reason) = refused_in_discovery(v);
    assert!(matches!(reason, AuthFailure::ResourceMismatch { .. }), "{reason:?}");
    assert_eq!(rig.discovery(), ["GET mcp /.well-known/oauth-protected-resource/mcp"]);
}

#[test]
fn metadata_for_another_issuer_is_refused() {
    let v = Variant { name: "wrong issuer", wrong_issuer: true, ..BASE };
    let (rig, reason) = refused_in_discovery(v);
    assert!(matches!(reason, AuthFailure::IssuerMismatch { .. }), "{reason:?}");
    assert!(rig.discovery().iter().all(|r| r.starts_with("GET")), "nothing registered");
}

/// A UI host's authorizer: keeps the URL for the host's loop and answers later.
#[derive(Debug, Default)]
struct Later(Arc<Mutex<Vec<String>>>);

impl Authorizer for Later {
    fn begin(&mut self, url: &str) -> Authorization {
        self.0.lock().unwrap().push(url.to_owned());
        Authorization::Pending
    }
}

#[test]
fn a_deferred_authorization_parks_the_calls_until_the_host_delivers_the_redirect() {
    let rig = Rig::start(Variant { name: "deferred", ..BASE });
    let urls: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut host = Host::new().unwrap();
    let id = host
        .add_http_server(rig.options(Box::new(Later(Arc::clone(&urls)))), Config::default())
        .unwrap();
    let no_flow = host.handle_redirect(id, &format!("{REDIRECT}?code=c1&state=x"));
    assert_eq!(no_flow, Err(RedirectError::NotWaiting), "nothing asked yet");
    let call = host.call_tool(id, "echo", &raw(r#"{"text":"parked"}"#), &CallOptions::default());
    let call = call.unwrap();
    // The host's loop runs on while the user is in the browser.
    let url = loop {
        host.poll(Some(Duration::from_millis(20))).unwrap();
        if let Some(url) = urls.lock().unwrap().first().cloned() {
            break url;
        }
    };
    for _ in 0..5 {
        host.poll(Some(Duration::from_millis(20))).unwrap();
    }
    assert!(matches!(host.state(id), Some(ServerState::Probing | ServerState::Connecting)));
    assert!(host.pending(id).unwrap() >= 2, "the probe and the call wait");
    let posts = rig.mcp.requests().iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 1, "only the refused probe reached the server");

    let redirect = follow(&url);
    assert_eq!(host.handle_redirect(id, &redirect), Ok(()));
    let out = host.wait(id, call).expect("the parked call");
    assert!(out.json.contains("parked"), "{}", out.json);
    assert_eq!(host.handle_redirect(id, &redirect), Err(RedirectError::Duplicate));
}

#[test]
fn a_deferred_authorization_expires_and_a_late_redirect_is_refused() {
    let rig = Rig::start(Variant { name: "expiry", ..BASE });
    let urls: Arc<Mutex<Vec<String>>> = Arc::default();
    let url = rig.mcp.url("http", "127.0.0.1");
    let mut config = OAuthConfig::authorization_code(url.clone(), REDIRECT);
    config.authorization_timeout = Duration::from_millis(300);
    let opts = HttpOptions::new(url).oauth(config).authorizer(Box::new(Later(Arc::clone(&urls))));
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(opts, Config::default()).unwrap();
    match refused_with(&mut host, id) {
        CallError::Peer(PeerError::Authorization(e)) => {
            assert_eq!((e.step, e.reason.clone()), (AuthStep::Authorization, AuthFailure::Expired))
        }
        other => panic!("{other:?}"),
    }
    let url = urls.lock().unwrap().first().cloned().expect("an authorization URL");
    let late = follow(&url);
    assert_eq!(host.handle_redirect(id, &late), Err(RedirectError::Late));
    assert!(!rig.discovery().iter().any(|r| r.ends_with("/token")), "no token asked for");
}

/// A host's own public client (an id, no secret) built with the builders alone: the flow
/// registers nothing, shows the id at the authorization endpoint, and authenticates at the
/// token endpoint with `none` (no secret, no `Authorization` header).
#[test]
fn a_public_pre_registered_client_built_with_the_builders_is_used_as_given() {
    let rig = Rig::start(Variant { name: "public client", ..BASE });
    let url = rig.mcp.url("http", "127.0.0.1");
    let urls = Arc::default();
    let oauth = OAuthConfig::authorization_code(url.clone(), REDIRECT)
        .pre_registered(PreRegistered::public("pub-7").issuer(rig.issuer.clone()))
        .client_name("not-used")
        .client_metadata_url("https://client.example/meta.json")
        .max_reauthorizations(1)
        .refresh_margin(Duration::from_secs(5))
        .authorization_timeout(Duration::from_secs(30));
    let opts = HttpOptions::new(url)
        .oauth(oauth)
        .authorizer(Box::new(Follow(Arc::clone(&urls))))
        .max_connections(2)
        .connect_timeout(Duration::from_secs(20))
        .idle_timeout(Duration::from_secs(5))
        .max_head_bytes(8 * 1024)
        .proxy(mcpoll::ProxyChoice::Direct)
        .header("X-Tenant", "blue");
    assert_eq!(opts.max_connections, 2);
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(opts, Config::default()).unwrap();
    let out =
        host.call_tool_json_blocking(id, "echo", r#"{"text":"pub"}"#, &CallOptions::default());
    assert!(out.expect("the call with the public client's token").json.contains("\"pub\""));
    let urls = urls.lock().unwrap().clone();
    assert_eq!(urls.len(), 1);
    assert!(urls[0].contains("client_id=pub-7"), "{}", urls[0]);
    let seen = rig.discovery();
    assert!(!seen.iter().any(|r| r.contains("/register")), "registered anyway: {seen:?}");
    let token = rig.auth.as_ref().unwrap().requests();
    let token = token.iter().find(|r| r.path == "/token").expect("a token request");
    assert!(token.body.contains("client_id=pub-7"), "{}", token.body);
    assert!(!token.body.contains("client_secret"), "{}", token.body);
    assert_eq!(token.header("authorization"), None);
}

/// An authorizer that cannot ask anyone says so, and the failure carries its reason instead
/// of reading as a user's "no".
#[test]
fn an_authorizers_reason_reaches_the_host() {
    struct Headless;
    impl Authorizer for Headless {}
    struct Broken;
    impl Authorizer for Broken {
        fn authorize(&mut self, _url: &str) -> Result<String, AuthorizeError> {
            Err(AuthorizeError::Io(std::io::ErrorKind::ConnectionRefused))
        }
    }
    let cases: [(Box<dyn Authorizer>, AuthorizeError); 2] = [
        (Box::new(Headless), AuthorizeError::NoUser),
        (Box::new(Broken), AuthorizeError::Io(std::io::ErrorKind::ConnectionRefused)),
    ];
    for (authorizer, why) in cases {
        let rig = Rig::start(Variant { name: "refused", ..BASE });
        let mut host = Host::new().unwrap();
        let id = host.add_http_server(rig.options(authorizer), Config::default()).unwrap();
        let error = match host.call_tool_json_blocking(id, "echo", "{}", &CallOptions::default()) {
            Err(mcpoll::BlockingError::Call(e)) => e,
            other => panic!("{other:?}"),
        };
        // No user to ask is the host's configuration; a failure to follow the page is not.
        let e = match (error, &why) {
            (CallError::Local(LocalError::OAuthSetup(e)), AuthorizeError::NoUser) => e,
            (CallError::Peer(PeerError::Authorization(e)), AuthorizeError::Io(_)) => e,
            (other, _) => panic!("{why}: {other:?}"),
        };
        assert_eq!(e.step, AuthStep::Authorization, "{e}");
        assert_eq!(e.reason, AuthFailure::Declined(why.clone()), "{e}");
        assert!(e.to_string().contains(&why.to_string()), "{e}");
    }
}

/// An authorizer whose user says no the first time and yes after.
#[derive(Debug, Default)]
struct SecondTime(Arc<Mutex<u32>>);

impl Authorizer for SecondTime {
    fn authorize(&mut self, url: &str) -> Result<String, AuthorizeError> {
        let mut n = self.0.lock().unwrap();
        *n += 1;
        if *n == 1 {
            return Err(AuthorizeError::Declined);
        }
        Ok(follow(url))
    }
}

/// An OAuth failure while first connecting behaves the same in both eras: the server is
/// `Unauthorized` (not closed) with the cause in `Host::authorization_error`, a call made
/// meanwhile fails with it, and `restart` runs the flow again on the same server (and the
/// same `OAuthConfig`), which then works.
#[test]
fn an_oauth_failure_while_connecting_is_recoverable_in_both_eras() {
    for era in [EraPreference::ModernOnly, EraPreference::LegacyOnly] {
        let rig = Rig::start(Variant { name: "second time", ..BASE });
        let tries = Arc::default();
        let mut host = Host::new().unwrap();
        let config = Config { era, ..Config::default() };
        let opts = rig.options(Box::new(SecondTime(Arc::clone(&tries))));
        let id = host.add_http_server(opts, config).unwrap();
        let call = host.call_tool_json(id, "echo", r#"{"text":"early"}"#, &CallOptions::default());
        match refused_with(&mut host, id) {
            CallError::Peer(PeerError::Authorization(e)) => {
                assert_eq!(e.reason, AuthFailure::Declined(AuthorizeError::Declined), "{era:?}")
            }
            other => panic!("{era:?}: {other:?}"),
        }
        match host.wait(id, call.unwrap()) {
            Err(mcpoll::BlockingError::Call(CallError::Peer(PeerError::Authorization(_)))) => {}
            other => panic!("{era:?}: the waiting call: {other:?}"),
        }
        assert_eq!(host.state(id), Some(ServerState::Unauthorized), "{era:?}");
        host.restart(id);
        let state = host.wait_ready(id, Duration::from_secs(30)).expect("ready after restart");
        assert!(matches!(state, ServerState::Ready(..)), "{era:?}: {state}");
        assert_eq!(host.authorization_error(id), None);
        let out = host.call_tool_json_blocking(
            id,
            "echo",
            r#"{"text":"later"}"#,
            &CallOptions::default(),
        );
        assert!(out.expect("the call after restart").json.contains("later"), "{era:?}");
        assert_eq!(*tries.lock().unwrap(), 2, "{era:?}: one authorization each time");
    }
}

/// A configuration that cannot work (the client credentials grant with a public client: no
/// secret, no key) is a local error, not a server fault, and leaves the server
/// `Unauthorized`, not closed.
#[test]
fn a_local_oauth_configuration_problem_is_a_local_error() {
    let rig = Rig::start(Variant { name: "local", ..BASE });
    let url = rig.mcp.url("http", "127.0.0.1");
    let oauth = OAuthConfig::client_credentials(url.clone(), PreRegistered::public("no-secret"));
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(url).oauth(oauth), Config::default()).unwrap();
    match refused_with(&mut host, id) {
        e @ CallError::Local(LocalError::OAuthSetup(_)) => {
            assert_eq!(e.kind(), "local");
            assert_eq!(e.name(), "oauth_setup");
            assert!(!e.to_string().contains("server fault"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}
