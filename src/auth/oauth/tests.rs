//! The flow against scripted HTTP answers and simulated time: every request it makes is
//! checked, every answer is written here.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::crypto::s256;
use super::crypto::tests::es256_pem;
use super::encode::{base64_decode, parse_query};
use super::*;
use crate::proto::challenge::AuthChallenge;

pub(super) const SERVER: &str = "https://mcp.test/mcp";
pub(super) const PRM_PATH: &str = "https://mcp.test/.well-known/oauth-protected-resource/mcp";
const PRM_ROOT: &str = "https://mcp.test/.well-known/oauth-protected-resource";
pub(super) const AS: &str = "https://as.test";
pub(super) const AS_META: &str = "https://as.test/.well-known/oauth-authorization-server";
const REDIRECT: &str = "http://127.0.0.1:3000/callback";
pub(super) const UNIX: u64 = 1_700_000_000;

/// A memory token store the test keeps a handle on, to look at what the flow saved.
#[derive(Debug, Default)]
struct Shared(std::rc::Rc<std::cell::RefCell<MemoryStore>>);

impl TokenStore for Shared {
    fn load(&mut self, r: &str) -> Option<StoredAuth> {
        self.0.borrow_mut().load(r)
    }
    fn save(&mut self, r: &str, a: &StoredAuth) {
        self.0.borrow_mut().save(r, a)
    }
    fn clear(&mut self, r: &str) {
        self.0.borrow_mut().clear(r)
    }
}

pub(super) struct Harness {
    pub(super) flow: OAuthFlow,
    pub(super) now: Instant,
}

pub(super) fn challenge(resource_metadata: Option<&str>, scope: Option<&str>) -> AuthChallenge {
    AuthChallenge {
        resource_metadata: resource_metadata.map(String::from),
        scope: scope.map(String::from),
        ..AuthChallenge::default()
    }
}

pub(super) fn prm(resource: &str, server: &str, scopes: Option<&[&str]>) -> Value {
    let mut v = json!({"resource": resource, "authorization_servers": [server]});
    if let Some(s) = scopes {
        v["scopes_supported"] = json!(s);
    }
    v
}

/// Metadata for `issuer` as the conformance suite's mock serves it by default, with `extra`
/// merged over it.
pub(super) fn meta(issuer: &str, extra: Value) -> Value {
    let mut v = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "registration_endpoint": format!("{issuer}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
        "token_endpoint_auth_methods_supported": ["none"],
    });
    for (k, val) in extra.as_object().unwrap() {
        if val.is_null() {
            v.as_object_mut().unwrap().remove(k);
        } else {
            v[k] = val.clone();
        }
    }
    v
}

fn fields(text: &str) -> HashMap<String, String> {
    parse_query(text).into_iter().collect()
}

pub(super) fn header<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

impl Harness {
    pub(super) fn new(config: OAuthConfig) -> Self {
        let now = Instant::now();
        Self { flow: OAuthFlow::new(config, now, UNIX).unwrap(), now }
    }

    fn code() -> Self {
        Self::new(OAuthConfig::authorization_code(SERVER, REDIRECT))
    }

    #[track_caller]
    pub(super) fn action(&mut self) -> Action {
        self.flow.poll_action().expect("an action")
    }

    #[track_caller]
    pub(super) fn nothing(&mut self) {
        if let Some(a) = self.flow.poll_action() {
            panic!("unexpected {a:?}");
        }
    }

    #[track_caller]
    pub(super) fn request(&mut self, method: HttpMethod, url: &str) -> HttpRequest {
        match self.action() {
            Action::Send(req) => {
                assert_eq!((req.method, req.url.as_str()), (method, url));
                req
            }
            other => panic!("expected {method:?} {url}, got {other:?}"),
        }
    }

    #[track_caller]
    pub(super) fn get(&mut self, url: &str, status: u16, body: &Value) {
        let req = self.request(HttpMethod::Get, url);
        self.reply(&req, status, body);
    }

    #[track_caller]
    pub(super) fn post(&mut self, url: &str) -> HttpRequest {
        self.request(HttpMethod::Post, url)
    }

    pub(super) fn reply(&mut self, req: &HttpRequest, status: u16, body: &Value) {
        let body = body.to_string();
        self.flow.handle_response(self.now, req.id, HttpResponse::new(status, body.as_bytes()));
    }

    /// The authorization URL's parameters.
    #[track_caller]
    fn authorize(&mut self, endpoint: &str) -> HashMap<String, String> {
        match self.action() {
            Action::Authorize(url) => {
                let (base, query) = url.split_once('?').unwrap();
                assert_eq!(base, endpoint);
                fields(query)
            }
            other => panic!("expected Authorize, got {other:?}"),
        }
    }

    fn redirect(&mut self, query: &str) {
        let _ = self.flow.handle_redirect(self.now, &format!("{REDIRECT}?{query}"));
    }

    #[track_caller]
    pub(super) fn ready(&mut self) {
        match self.action() {
            Action::Ready => {}
            other => panic!("expected Ready, got {other:?}"),
        }
        assert!(!self.flow.is_running());
    }

    #[track_caller]
    pub(super) fn failed(&mut self) -> AuthError {
        match self.action() {
            Action::Failed(e) => {
                assert!(!self.flow.is_running());
                e
            }
            other => panic!("expected Failed, got {other:?}"),
        }
    }

    pub(super) fn bearer(&self) -> Option<&str> {
        self.flow.bearer(self.now).map(Secret::expose)
    }

    /// PRM from the challenge and default metadata at `as_meta`.
    fn discover(&mut self, meta_extra: Value, scopes: Option<&[&str]>) {
        self.flow.handle_challenge(self.now, 401, &challenge(Some(PRM_PATH), None));
        self.get(PRM_PATH, 200, &prm(SERVER, AS, scopes));
        self.get(AS_META, 200, &meta(AS, meta_extra));
    }

    /// Registration answered with `client_id` and `answer` merged in.
    #[track_caller]
    fn register(&mut self, answer: Value) -> Value {
        let req = self.post(&format!("{AS}/register"));
        assert_eq!(header(&req, "content-type"), Some("application/json"));
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let mut reply = json!({"client_id": "dcr-client"});
        for (k, v) in answer.as_object().unwrap() {
            reply[k] = v.clone();
        }
        self.reply(&req, 201, &reply);
        body
    }

    /// Completes an authorization request with a correct redirect; returns its parameters
    /// and the token request.
    #[track_caller]
    fn grant(&mut self, issuer: &str) -> (HashMap<String, String>, HttpRequest) {
        let auth = self.authorize(&format!("{issuer}/authorize"));
        self.redirect(&format!("code=the-code&state={}&iss={issuer}", auth["state"]));
        let req = self.post(&format!("{issuer}/token"));
        (auth, req)
    }

    pub(super) fn token(&mut self, req: &HttpRequest, access: &str, extra: Value) {
        let mut body = json!({"access_token": access, "token_type": "Bearer"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        self.reply(req, 200, &body);
    }
}

pub(super) fn form_of(req: &HttpRequest) -> HashMap<String, String> {
    assert_eq!(header(req, "content-type"), Some("application/x-www-form-urlencoded"));
    fields(std::str::from_utf8(&req.body).unwrap())
}

#[test]
fn full_flow_with_dynamic_registration() {
    let mut h = Harness::code();
    assert_eq!(h.bearer(), None);
    h.discover(json!({}), None);
    let dcr = h.register(json!({}));
    assert_eq!(dcr["application_type"], "native");
    assert_eq!(dcr["redirect_uris"], json!([REDIRECT]));
    assert_eq!(dcr["grant_types"], json!(["authorization_code", "refresh_token"]));
    assert_eq!(dcr["token_endpoint_auth_method"], "none");
    let (auth, req) = h.grant(AS);
    assert_eq!(auth["response_type"], "code");
    assert_eq!(auth["client_id"], "dcr-client");
    assert_eq!(auth["redirect_uri"], REDIRECT);
    assert_eq!(auth["code_challenge_method"], "S256");
    assert_eq!(auth["resource"], SERVER);
    assert!(!auth.contains_key("scope"), "no scope defined anywhere: none sent");
    let form = form_of(&req);
    assert_eq!(form["grant_type"], "authorization_code");
    assert_eq!(form["code"], "the-code");
    assert_eq!(form["redirect_uri"], REDIRECT);
    assert_eq!(form["resource"], SERVER);
    assert_eq!(form["client_id"], "dcr-client");
    assert_eq!(s256(&form["code_verifier"]), auth["code_challenge"]);
    assert_eq!(header(&req, "authorization"), None);
    h.token(&req, "tok-1", json!({"expires_in": 3600}));
    h.ready();
    h.nothing();
    assert_eq!(h.bearer(), Some("tok-1"));
    // No refresh token: nothing to wake for, and the token lapses at its expiry.
    assert_eq!(h.flow.poll_timeout(), None);
    h.now += Duration::from_secs(3600);
    assert_eq!(h.bearer(), None);
}

#[test]
fn prm_path_aware_then_root_with_path_issuer() {
    // metadata-var2: no resource_metadata in the challenge; PRM only at the root, naming
    // the origin; the issuer has a path.
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(None, None));
    h.get(PRM_PATH, 404, &json!({}));
    h.get(PRM_ROOT, 200, &prm("https://mcp.test", "https://as.test/tenant1", None));
    let issuer = "https://as.test/tenant1";
    h.get(
        "https://as.test/.well-known/oauth-authorization-server/tenant1",
        200,
        &meta(issuer, json!({})),
    );
    let req = h.post("https://as.test/tenant1/register");
    h.reply(&req, 201, &json!({"client_id": "c"}));
    let (auth, req) = h.grant(issuer);
    // Exactly as published: no slash appended to a pathless identifier.
    assert_eq!(auth["resource"], "https://mcp.test");
    assert_eq!(form_of(&req)["resource"], "https://mcp.test");
}

#[test]
fn as_metadata_location_order() {
    // metadata-var3: the issuer has a path and only the path-appended OpenID location
    // answers; the root OAuth location must never be asked.
    let mut h = Harness::code();
    h.flow.handle_challenge(
        h.now,
        401,
        &challenge(Some("https://mcp.test/custom/metadata/location.json"), None),
    );
    h.get(
        "https://mcp.test/custom/metadata/location.json",
        200,
        &prm(SERVER, "https://as.test/tenant1", None),
    );
    h.get("https://as.test/.well-known/oauth-authorization-server/tenant1", 404, &json!({}));
    h.get("https://as.test/.well-known/openid-configuration/tenant1", 404, &json!({}));
    h.get(
        "https://as.test/tenant1/.well-known/openid-configuration",
        200,
        &meta("https://as.test/tenant1", json!({})),
    );
    h.post("https://as.test/tenant1/register");

    // metadata-var1: a pathless issuer with only OpenID configuration.
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(None, None));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
    h.get(AS_META, 404, &json!({}));
    h.get("https://as.test/.well-known/openid-configuration", 200, &meta(AS, json!({})));
    h.register(json!({}));
    h.grant(AS);
}

#[test]
fn legacy_metadata_at_server_root() {
    // 2025-03-26: no PRM; the metadata is at the server's origin, its endpoints elsewhere.
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(None, None));
    h.get(PRM_PATH, 404, &json!({}));
    h.get(PRM_ROOT, 404, &json!({}));
    let origin = "https://mcp.test";
    let m = meta(
        origin,
        json!({
            "authorization_endpoint": "https://mcp.test/oauth/authorize",
            "token_endpoint": "https://mcp.test/oauth/token",
            "registration_endpoint": "https://mcp.test/oauth/register",
        }),
    );
    h.get("https://mcp.test/.well-known/oauth-authorization-server", 200, &m);
    let req = h.post("https://mcp.test/oauth/register");
    h.reply(&req, 201, &json!({"client_id": "c"}));
    let auth = h.authorize("https://mcp.test/oauth/authorize");
    assert!(!auth.contains_key("resource"), "no PRM: no resource identifier to send");
    h.redirect(&format!("code=x&state={}&iss={origin}", auth["state"]));
    let req = h.post("https://mcp.test/oauth/token");
    assert!(!form_of(&req).contains_key("resource"));
    h.token(&req, "t", json!({}));
    h.ready();
}

/// The 2025-03-26 fallback (the origin as authorization server) follows only a PRM that is
/// not there: a 503 (or a 429, a 401) at the well-known locations fails the discovery with
/// its status instead of guessing.
#[test]
fn a_prm_that_fails_is_no_reason_for_the_legacy_fallback() {
    for status in [503, 429, 401] {
        let mut h = Harness::code();
        h.flow.handle_challenge(h.now, 401, &challenge(None, None));
        h.get(PRM_PATH, status, &json!({}));
        h.get(PRM_ROOT, status, &json!({}));
        let e = h.failed();
        assert_eq!((e.step, e.status), (AuthStep::Discovery, Some(status)));
        h.nothing();
    }
}

/// A failure at one metadata location is no absence because the next location says 404:
/// the PRM's path-aware location answering 503 and its root 404 made the flow guess a
/// 2025-03-26 server (the origin as authorization server, no `resource`); so did a 503 and
/// a 404 for the origin's own metadata, which took the default endpoints.
#[test]
fn a_failure_at_one_metadata_location_is_no_absence() {
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(None, None));
    h.get(PRM_PATH, 503, &json!({}));
    h.get(PRM_ROOT, 404, &json!({}));
    let e = h.failed();
    assert_eq!((e.step, e.status), (AuthStep::Discovery, Some(503)));
    h.nothing();

    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(None, None));
    h.get(PRM_PATH, 404, &json!({}));
    h.get(PRM_ROOT, 404, &json!({}));
    h.get("https://mcp.test/.well-known/oauth-authorization-server", 503, &json!({}));
    h.get("https://mcp.test/.well-known/openid-configuration", 404, &json!({}));
    let e = h.failed();
    assert_eq!((e.step, e.status), (AuthStep::Discovery, Some(503)));
    h.nothing();
}

#[test]
fn legacy_default_endpoints() {
    // 2025-03-26 with no metadata at all: /authorize, /token, /register at the origin, and
    // no iss expected (nothing advertised it).
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(None, None));
    h.get(PRM_PATH, 404, &json!({}));
    h.get(PRM_ROOT, 404, &json!({}));
    h.get("https://mcp.test/.well-known/oauth-authorization-server", 404, &json!({}));
    h.get("https://mcp.test/.well-known/openid-configuration", 404, &json!({}));
    let req = h.post("https://mcp.test/register");
    let dcr: Value = serde_json::from_slice(&req.body).unwrap();
    // Nothing published: client_secret_basic is the RFC 8414 default.
    assert_eq!(dcr["token_endpoint_auth_method"], "client_secret_basic");
    h.reply(&req, 201, &json!({"client_id": "c", "client_secret": "s"}));
    let auth = h.authorize("https://mcp.test/authorize");
    h.redirect(&format!("code=x&state={}", auth["state"]));
    let req = h.post("https://mcp.test/token");
    assert_eq!(header(&req, "authorization"), Some("Basic Yzpz"));
    h.token(&req, "t", json!({}));
    h.ready();
}

#[test]
fn refuses_wrong_resource() {
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm("https://evil.example.com/mcp", AS, None));
    let e = h.failed();
    assert_eq!(e.step, AuthStep::Discovery);
    assert_eq!(
        e.reason,
        AuthFailure::ResourceMismatch { resource: "https://evil.example.com/mcp".into() }
    );
    h.nothing();
    assert_eq!(h.bearer(), None);
}

#[test]
fn refuses_wrong_issuer() {
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
    h.get(AS_META, 200, &meta("https://attacker.example.com", json!({})));
    let e = h.failed();
    assert_eq!(
        (e.step, e.reason),
        (
            AuthStep::Discovery,
            AuthFailure::IssuerMismatch { issuer: "https://attacker.example.com".into() }
        )
    );
    h.nothing();
}

/// Runs the flow to the redirect with `iss_supported` and answers with `iss`; returns
/// whether a token request followed, or the error.
fn iss_case(iss_supported: Option<bool>, iss: Option<&str>) -> Result<(), AuthError> {
    let mut h = Harness::code();
    let advertised = match iss_supported {
        Some(b) => json!(b),
        None => Value::Null,
    };
    h.discover(json!({"authorization_response_iss_parameter_supported": advertised}), None);
    h.register(json!({}));
    let auth = h.authorize(&format!("{AS}/authorize"));
    let mut query = format!("code=c&state={}", auth["state"]);
    if let Some(iss) = iss {
        query.push_str("&iss=");
        super::encode::percent_encode(iss, &mut query);
    }
    h.redirect(&query);
    match h.action() {
        Action::Send(req) => {
            assert_eq!(req.url, format!("{AS}/token"));
            Ok(())
        }
        Action::Failed(e) => {
            h.nothing();
            Err(e)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn iss_response_parameter() {
    assert_eq!(iss_case(Some(true), Some(AS)), Ok(()));
    assert_eq!(iss_case(None, None), Ok(()));
    assert_eq!(iss_case(Some(false), None), Ok(()));
    assert_eq!(iss_case(None, Some(AS)), Ok(()));
    let e = iss_case(Some(true), None).unwrap_err();
    assert_eq!((e.step, e.reason), (AuthStep::Authorization, AuthFailure::IssMissing));
    for (supported, iss) in [
        (Some(true), "https://evil.example.com"),
        (None, "https://evil.example.com"),
        // Exact comparison: a trailing slash or other case is another issuer.
        (Some(true), "https://as.test/"),
        (Some(true), "HTTP://as.test"),
    ] {
        let e = iss_case(supported, Some(iss)).unwrap_err();
        assert_eq!(e.reason, AuthFailure::IssMismatch { iss: iss.into() }, "{iss}");
    }
}

/// An authorizer that leaves the user in the browser: the redirect comes later.
struct Deferred(Vec<String>);

impl Authorizer for Deferred {
    fn begin(&mut self, url: &str) -> Authorization {
        self.0.push(url.to_owned());
        Authorization::Pending
    }
}

/// A flow waiting for a deferred redirect; the authorization URL's parameters.
fn deferred() -> (Harness, HashMap<String, String>) {
    let mut config = OAuthConfig::authorization_code(SERVER, REDIRECT);
    config.authorization_timeout = Duration::from_secs(120);
    let mut h = Harness::new(config);
    h.discover(json!({}), None);
    h.register(json!({}));
    let Action::Authorize(url) = h.action() else { panic!("expected Authorize") };
    let mut host = Deferred(Vec::new());
    h.flow.authorize_with(h.now, &url, &mut host);
    assert_eq!(host.0, std::slice::from_ref(&url));
    h.nothing();
    assert!(h.flow.is_running(), "waiting for the redirect");
    (h, fields(url.split_once('?').unwrap().1))
}

#[test]
fn deferred_redirect_is_taken_later_and_only_once() {
    let (mut h, auth) = deferred();
    assert_eq!(h.flow.poll_timeout(), Some(h.now + Duration::from_secs(120)));
    h.now += Duration::from_secs(60);
    h.flow.handle_timeout(h.now);
    h.nothing();
    let redirect = format!("{REDIRECT}?code=the-code&state={}&iss={AS}", auth["state"]);
    assert_eq!(h.flow.handle_redirect(h.now, &redirect), Ok(()));
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(form_of(&req)["code"], "the-code");
    // The browser tab reloaded: the same redirect again, while the token request runs and
    // after it.
    assert_eq!(h.flow.handle_redirect(h.now, &redirect), Err(RedirectError::Duplicate));
    h.token(&req, "tok-1", json!({}));
    h.ready();
    assert_eq!(h.flow.handle_redirect(h.now, &redirect), Err(RedirectError::Duplicate));
    h.nothing();
    assert_eq!(h.bearer(), Some("tok-1"));
}

#[test]
fn deferred_redirect_expires_and_a_late_one_changes_nothing() {
    let (mut h, auth) = deferred();
    h.now += Duration::from_secs(119);
    h.flow.handle_timeout(h.now);
    h.nothing();
    h.now += Duration::from_secs(1);
    h.flow.handle_timeout(h.now);
    let e = h.failed();
    assert_eq!((e.step, e.reason), (AuthStep::Authorization, AuthFailure::Expired));
    let late = format!("{REDIRECT}?code=c&state={}&iss={AS}", auth["state"]);
    assert_eq!(h.flow.handle_redirect(h.now, &late), Err(RedirectError::Late));
    h.nothing();

    // A new authorization is waiting: the old redirect does not disturb it.
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
    h.get(AS_META, 200, &meta(AS, json!({})));
    let fresh = h.authorize(&format!("{AS}/authorize"));
    assert_ne!(fresh["state"], auth["state"]);
    assert_eq!(h.flow.handle_redirect(h.now, &late), Err(RedirectError::Late));
    assert!(h.flow.is_running());
    h.redirect(&format!("code=c2&state={}&iss={AS}", fresh["state"]));
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(form_of(&req)["code"], "c2");
}

#[test]
fn deferred_redirect_with_another_state_fails_the_authorization() {
    let (mut h, auth) = deferred();
    let forged = format!("{REDIRECT}?code=c&state=forged&iss={AS}");
    assert_eq!(h.flow.handle_redirect(h.now, &forged), Err(RedirectError::StateMismatch));
    assert_eq!(h.failed().reason, AuthFailure::StateMismatch);
    let genuine = format!("{REDIRECT}?code=c&state={}&iss={AS}", auth["state"]);
    assert_eq!(h.flow.handle_redirect(h.now, &genuine), Err(RedirectError::Late));
    let unknown = format!("{REDIRECT}?code=c&state=other");
    assert_eq!(h.flow.handle_redirect(h.now, &unknown), Err(RedirectError::NotWaiting));
    h.nothing();
}

#[test]
fn redirect_state_and_error() {
    let mut h = Harness::code();
    h.discover(json!({}), None);
    h.register(json!({}));
    let auth = h.authorize(&format!("{AS}/authorize"));
    h.redirect(&format!("code=c&state=forged&iss={AS}"));
    assert_eq!(h.failed().reason, AuthFailure::StateMismatch);
    let _ = auth;

    let mut h = Harness::code();
    h.discover(json!({}), None);
    h.register(json!({}));
    let auth = h.authorize(&format!("{AS}/authorize"));
    h.redirect(&format!("error=access_denied&state={}&iss={AS}", auth["state"]));
    let e = h.failed();
    assert_eq!(
        (e.step, e.reason, e.error.as_deref()),
        (AuthStep::Authorization, AuthFailure::Denied, Some("access_denied"))
    );

    // The host gives up while the user is away; the late redirect changes nothing.
    let mut h = Harness::code();
    h.discover(json!({}), None);
    h.register(json!({}));
    let auth = h.authorize(&format!("{AS}/authorize"));
    h.flow.abandon();
    assert_eq!(h.failed().reason, AuthFailure::Declined(AuthorizeError::Abandoned));
    h.redirect(&format!("code=c&state={}&iss={AS}", auth["state"]));
    h.nothing();
    h.flow.abandon();
    h.nothing();

    // A redirect with no flow waiting is ignored.
    h.redirect("code=c&state=x");
    h.nothing();
}

#[test]
fn client_id_metadata_document() {
    let cimd = "https://client.example/metadata.json";
    let mut config = OAuthConfig::authorization_code(SERVER, REDIRECT);
    config.client_metadata_url = Some(cimd.into());
    let mut h = Harness::new(config);
    h.discover(json!({"client_id_metadata_document_supported": true}), None);
    // No registration: the URL is the client_id.
    let (auth, req) = h.grant(AS);
    assert_eq!(auth["client_id"], cimd);
    assert_eq!(form_of(&req)["client_id"], cimd);

    // Without the server's support the URL is not used.
    let mut config = OAuthConfig::authorization_code(SERVER, REDIRECT);
    config.client_metadata_url = Some(cimd.into());
    let mut h = Harness::new(config);
    h.discover(json!({}), None);
    h.register(json!({}));
}

#[test]
fn pre_registered_client() {
    let mut config = OAuthConfig::authorization_code(SERVER, REDIRECT);
    config.pre_registered =
        Some(PreRegistered::with_secret("pre-registered-client", "pre-registered-secret"));
    let mut h = Harness::new(config);
    h.discover(json!({"registration_endpoint": null, "token_endpoint_auth_methods_supported": ["client_secret_basic"]}), None);
    let (auth, req) = h.grant(AS);
    assert_eq!(auth["client_id"], "pre-registered-client");
    let basic = header(&req, "authorization").unwrap().strip_prefix("Basic ").unwrap();
    assert_eq!(base64_decode(basic).unwrap(), b"pre-registered-client:pre-registered-secret");
    let form = form_of(&req);
    assert!(!form.contains_key("client_secret") && !form.contains_key("client_id"));

    // Credentials bound to another issuer are not shown to this one; with no registration
    // endpoint there is then no identity at all.
    let mut config = OAuthConfig::authorization_code(SERVER, REDIRECT);
    let mut pre = PreRegistered::with_secret("c", "s");
    pre.issuer = Some("https://other-as.example".into());
    config.pre_registered = Some(pre);
    let mut h = Harness::new(config);
    h.discover(json!({"registration_endpoint": null}), None);
    let e = h.failed();
    assert_eq!((e.step, e.reason), (AuthStep::Registration, AuthFailure::NoClientIdentity));
}

#[test]
fn token_endpoint_auth_methods() {
    for method in ["client_secret_basic", "client_secret_post", "none"] {
        let mut h = Harness::code();
        h.discover(json!({"token_endpoint_auth_methods_supported": [method]}), None);
        let secret = if method == "none" { Value::Null } else { json!("sec ret") };
        let dcr =
            h.register(json!({"client_secret": secret, "token_endpoint_auth_method": method}));
        assert_eq!(dcr["token_endpoint_auth_method"], method);
        let (_, req) = h.grant(AS);
        let form = form_of(&req);
        let basic = header(&req, "authorization");
        match method {
            "client_secret_basic" => {
                let creds = base64_decode(basic.unwrap().strip_prefix("Basic ").unwrap()).unwrap();
                // RFC 6749 2.3.1: form-encoded before base64.
                assert_eq!(creds, b"dcr-client:sec%20ret");
                assert!(!form.contains_key("client_secret"));
            }
            "client_secret_post" => {
                assert_eq!(basic, None);
                assert_eq!(
                    (form["client_id"].as_str(), form["client_secret"].as_str()),
                    ("dcr-client", "sec ret")
                );
            }
            _ => {
                assert_eq!(basic, None);
                assert_eq!(form["client_id"], "dcr-client");
                assert!(!form.contains_key("client_secret"));
            }
        }
        h.token(&req, "t", json!({}));
        h.ready();
    }
}

/// A registration answer naming a client authentication method this client cannot perform
/// (RFC 7591 lets the server choose) fails the registration step before the user is sent to
/// authorize, and nothing of it is kept: a token request would be refused only after the
/// user's work, and the refusal would register (and ask the user) again on the next flow.
#[test]
fn a_registration_for_an_authentication_method_it_cannot_perform_is_refused() {
    for method in ["private_key_jwt", "tls_client_auth"] {
        let store = Shared::default();
        let config = OAuthConfig::authorization_code(SERVER, REDIRECT);
        let mut h = Harness::new(config.store(Box::new(Shared(store.0.clone()))));
        h.discover(json!({}), None);
        h.register(json!({"client_secret": "s", "token_endpoint_auth_method": method}));
        let e = h.failed();
        assert_eq!(e.step, AuthStep::Registration);
        assert_eq!(e.reason, AuthFailure::UnsupportedAuthMethod { method: method.into() });
        h.nothing();
        let kept = store.0.borrow_mut().load(SERVER);
        assert!(kept.is_none_or(|a| a.client.is_none()), "{method}: not kept");
    }
}

#[track_caller]
fn requested_scope(
    challenge_scope: Option<&str>,
    prm_scopes: Option<&[&str]>,
    as_scopes: Option<&[&str]>,
) -> Option<String> {
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), challenge_scope));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, prm_scopes));
    h.get(AS_META, 200, &meta(AS, json!({"scopes_supported": as_scopes})));
    h.register(json!({}));
    h.authorize(&format!("{AS}/authorize")).remove("scope")
}

#[test]
fn scope_selection() {
    let all: &[&str] = &["mcp:basic", "mcp:read", "mcp:write"];
    assert_eq!(requested_scope(Some("mcp:basic"), Some(all), None).as_deref(), Some("mcp:basic"));
    assert_eq!(
        requested_scope(None, Some(all), None).as_deref(),
        Some("mcp:basic mcp:read mcp:write")
    );
    assert_eq!(requested_scope(None, None, None), None);
    assert_eq!(requested_scope(Some("  "), None, None), None);
    // offline_access only where the authorization server lists it.
    assert_eq!(
        requested_scope(None, Some(&["mcp:basic"]), Some(&["mcp:basic", "offline_access"]))
            .as_deref(),
        Some("mcp:basic offline_access")
    );
    assert_eq!(
        requested_scope(None, Some(&["mcp:basic", "mcp:read"]), Some(&["mcp:basic", "mcp:read"]))
            .as_deref(),
        Some("mcp:basic mcp:read")
    );
}

#[test]
fn no_refresh_token_grant_when_unsupported() {
    let mut h = Harness::code();
    h.discover(json!({"grant_types_supported": ["authorization_code"]}), None);
    let dcr = h.register(json!({}));
    assert_eq!(dcr["grant_types"], json!(["authorization_code"]));
}

/// A flow through its first token with scope `mcp:basic` from the challenge.
fn ready_with_scope(config: OAuthConfig) -> Harness {
    let mut h = Harness::new(config);
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), Some("mcp:basic")));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, Some(&["mcp:profile"])));
    h.get(AS_META, 200, &meta(AS, json!({})));
    h.register(json!({}));
    let (auth, req) = h.grant(AS);
    assert_eq!(auth["scope"], "mcp:basic");
    h.token(&req, "t1", json!({"scope": "mcp:basic"}));
    h.ready();
    h.flow.handle_authorized();
    h
}

fn step_up(h: &mut Harness, scope: &str) {
    let c = AuthChallenge {
        error: Some("insufficient_scope".into()),
        ..challenge(Some(PRM_PATH), Some(scope))
    };
    h.flow.handle_challenge(h.now, 403, &c);
}

#[test]
fn step_up_asks_for_the_union() {
    let mut h = ready_with_scope(OAuthConfig::authorization_code(SERVER, REDIRECT));
    step_up(&mut h, "mcp:write");
    h.get(PRM_PATH, 200, &prm(SERVER, AS, Some(&["mcp:profile"])));
    h.get(AS_META, 200, &meta(AS, json!({})));
    // The registration is kept; only the authorization is repeated.
    let (auth, req) = h.grant(AS);
    assert_eq!(auth["scope"], "mcp:basic mcp:write");
    h.token(&req, "t2", json!({}));
    h.ready();
    assert_eq!(h.bearer(), Some("t2"));
}

/// A re-authorization the refresh timer started (its refresh token dead) asks for what was
/// asked last, the step-up's union: it asked for the last challenge's scope alone, which lost
/// the base scopes, and the next call's 403 had the user asked again.
#[test]
fn a_reauthorization_the_timer_started_asks_for_the_scope_asked_last() {
    let mut h = ready_with_scope(OAuthConfig::authorization_code(SERVER, REDIRECT));
    step_up(&mut h, "mcp:write");
    h.get(PRM_PATH, 200, &prm(SERVER, AS, Some(&["mcp:profile"])));
    h.get(
        AS_META,
        200,
        &meta(AS, json!({"grant_types_supported": ["authorization_code", "refresh_token"]})),
    );
    let (auth, req) = h.grant(AS);
    assert_eq!(auth["scope"], "mcp:basic mcp:write");
    h.token(
        &req,
        "t2",
        json!({"scope": "mcp:basic mcp:write", "refresh_token": "r2", "expires_in": 3600}),
    );
    h.ready();
    h.flow.handle_authorized();
    // Long after (a suspend): the access token is over, and the refresh is refused.
    h.now += Duration::from_secs(7200);
    h.flow.handle_timeout(h.now);
    let refresh = h.post(&format!("{AS}/token"));
    assert_eq!(form_of(&refresh)["grant_type"], "refresh_token");
    h.reply(&refresh, 400, &json!({"error": "invalid_grant"}));
    let auth = h.authorize(&format!("{AS}/authorize"));
    assert_eq!(auth["scope"], "mcp:basic mcp:write");
}

/// A step-up the authorization server granted less than was asked for is not asked again:
/// the refusal of the second identical 403 reset what the flow knew was asked (to the
/// token's scope), so the third asked the user again, and every second call after.
#[test]
fn a_step_up_the_server_never_grants_is_not_asked_again() {
    let mut h = ready_with_scope(OAuthConfig::authorization_code(SERVER, REDIRECT));
    step_up(&mut h, "mcp:write");
    h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
    h.get(AS_META, 200, &meta(AS, json!({})));
    let (_, req) = h.grant(AS);
    h.token(&req, "t2", json!({"scope": "mcp:basic"}));
    h.ready();
    for round in 0..3 {
        step_up(&mut h, "mcp:write");
        assert_eq!(h.failed().reason, AuthFailure::StepUpLimit, "round {round}");
        h.nothing();
    }
}

/// A step-up that did not end in a token (abandoned here) does not count as asked: the same
/// scope can be asked for again (it failed at once with StepUpLimit, until some 401). A blank
/// scope asks for nothing new, and is no loop either.
#[test]
fn an_unfinished_step_up_can_be_asked_again() {
    let mut h = ready_with_scope(OAuthConfig::authorization_code(SERVER, REDIRECT));
    step_up(&mut h, "mcp:write");
    h.get(PRM_PATH, 200, &prm(SERVER, AS, Some(&["mcp:profile"])));
    h.get(AS_META, 200, &meta(AS, json!({})));
    let (auth, _) = h.grant(AS);
    assert_eq!(auth["scope"], "mcp:basic mcp:write");
    h.flow.abandon();
    h.failed();
    step_up(&mut h, "mcp:write");
    h.request(HttpMethod::Get, PRM_PATH);

    let mut h = ready_with_scope(OAuthConfig::authorization_code(SERVER, REDIRECT));
    step_up(&mut h, " ");
    h.request(HttpMethod::Get, PRM_PATH);
}

/// A 403 `insufficient_scope` that names no scope is asked about while the server's PRM lists
/// a scope not yet asked for; once all of them are, the same 403 again is refused, not one
/// more identical authorization (a server answering it to every token had the user asked
/// over and over, whenever another request succeeded between).
#[test]
fn a_step_up_naming_no_scope_is_refused_once_nothing_new_is_left() {
    let mut h = ready_with_scope(OAuthConfig::authorization_code(SERVER, REDIRECT));
    step_up(&mut h, " ");
    h.get(PRM_PATH, 200, &prm(SERVER, AS, Some(&["mcp:profile"])));
    h.get(AS_META, 200, &meta(AS, json!({})));
    let (auth, req) = h.grant(AS);
    assert_eq!(auth["scope"], "mcp:basic mcp:profile");
    h.token(&req, "t2", json!({"scope": "mcp:basic mcp:profile"}));
    h.ready();
    h.flow.handle_authorized();
    step_up(&mut h, " ");
    let e = h.failed();
    assert_eq!((e.step, e.reason), (AuthStep::Authorization, AuthFailure::StepUpLimit));
    h.nothing();
}

#[test]
fn step_up_is_bounded() {
    // The same scope again after it was asked for: no new authorization at all.
    let mut h = ready_with_scope(OAuthConfig::authorization_code(SERVER, REDIRECT));
    step_up(&mut h, "mcp:basic");
    let e = h.failed();
    assert_eq!((e.step, e.reason), (AuthStep::Authorization, AuthFailure::StepUpLimit));
    h.nothing();

    // New scopes each time: at most max_reauthorizations in a row without a success.
    let mut config = OAuthConfig::authorization_code(SERVER, REDIRECT);
    config.max_reauthorizations = 2;
    let mut h = ready_with_scope(config);
    for i in 0..2 {
        step_up(&mut h, &format!("extra:{i}"));
        h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
        h.get(AS_META, 200, &meta(AS, json!({})));
        let (_, req) = h.grant(AS);
        h.token(&req, "t", json!({}));
        h.ready();
    }
    // Refused at the limit, and again: a refusal is no flow, and gives back no count (it did,
    // so every second challenge ran a whole new authorization).
    for i in 9..12 {
        step_up(&mut h, &format!("extra:{i}"));
        assert_eq!(h.failed().reason, AuthFailure::StepUpLimit, "extra:{i}");
        h.nothing();
    }
    // A success starts the count over.
    h.flow.handle_authorized();
    step_up(&mut h, "extra:10");
    h.request(HttpMethod::Get, PRM_PATH);

    // A 403 for anything but scope is final.
    let mut h = Harness::code();
    let c = AuthChallenge { error: Some("forbidden".into()), ..AuthChallenge::default() };
    h.flow.handle_challenge(h.now, 403, &c);
    let e = h.failed();
    assert_eq!((e.status, e.error.as_deref()), (Some(403), Some("forbidden")));
}

/// A flow through a token that expires in an hour, with a refresh token.
fn ready_refreshable() -> Harness {
    let mut h = Harness::code();
    h.discover(json!({}), None);
    h.register(json!({}));
    let (_, req) = h.grant(AS);
    h.token(&req, "t1", json!({"expires_in": 3600, "refresh_token": "r1"}));
    h.ready();
    h
}

/// A 401 to a flow holding a refresh token: discovery, then the refresh request (checked to
/// be one), given back to be answered.
fn refresh_after_a_401(h: &mut Harness) -> HttpRequest {
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
    h.get(AS_META, 200, &meta(AS, json!({})));
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(form_of(&req)["grant_type"], "refresh_token");
    req
}

#[test]
fn refresh_before_expiry() {
    let mut h = ready_refreshable();
    let start = h.now;
    assert_eq!(h.flow.poll_timeout(), Some(start + Duration::from_secs(3540)));
    h.now = start + Duration::from_secs(3000);
    h.flow.handle_timeout(h.now);
    h.nothing();
    h.now = start + Duration::from_secs(3540);
    h.flow.handle_timeout(h.now);
    let req = h.post(&format!("{AS}/token"));
    let form = form_of(&req);
    assert_eq!(form["grant_type"], "refresh_token");
    assert_eq!(form["refresh_token"], "r1");
    assert_eq!(form["resource"], SERVER);
    assert_eq!(form["client_id"], "dcr-client");
    assert_eq!(h.flow.poll_timeout(), None, "no timer while refreshing");
    // The refresh response omits the refresh token: the old one stays.
    h.token(&req, "t2", json!({"expires_in": 3600}));
    h.ready();
    assert_eq!(h.bearer(), Some("t2"));
    assert_eq!(h.flow.poll_timeout(), Some(h.now + Duration::from_secs(3540)));
}

/// A refresh answered 200 with a rotated refresh token, but refused here (no `token_type`):
/// the server spent the old refresh token all the same, so the new one is kept. Sent again,
/// the spent one got the whole grant revoked by a server's reuse detection.
#[test]
fn a_refused_refresh_answer_keeps_its_rotated_refresh_token() {
    let mut h = ready_refreshable();
    let req = refresh_after_a_401(&mut h);
    h.reply(&req, 200, &json!({"access_token": "t2", "refresh_token": "r2"}));
    let e = h.failed();
    assert_eq!(e.step, AuthStep::Refresh);
    let again = refresh_after_a_401(&mut h);
    assert_eq!(form_of(&again)["refresh_token"], "r2", "not the spent r1");
}

/// A refresh the timer started ahead of the expiry, refused (a dead refresh token): the
/// token in hand serves to its end, and nobody is asked now; the dead refresh token is
/// dropped from the store too. (The user was asked at once, every request held meanwhile.)
#[test]
fn a_background_refresh_refused_keeps_the_token_until_it_expires() {
    let store = Shared::default();
    let mut h = Harness::new(
        OAuthConfig::authorization_code(SERVER, REDIRECT).store(Box::new(Shared(store.0.clone()))),
    );
    h.discover(json!({}), None);
    h.register(json!({}));
    let (_, req) = h.grant(AS);
    h.token(&req, "t1", json!({"expires_in": 3600, "refresh_token": "r1"}));
    h.ready();
    h.now += Duration::from_secs(3540);
    h.flow.handle_timeout(h.now);
    let req = h.post(&format!("{AS}/token"));
    h.reply(&req, 400, &json!({"error": "invalid_grant"}));
    h.ready();
    assert!(!h.flow.is_running(), "nobody is asked");
    assert_eq!(h.bearer(), Some("t1"));
    let kept = store.0.borrow_mut().load(SERVER).unwrap();
    assert!(kept.tokens.unwrap().refresh_token.is_none(), "the dead refresh token is gone");
    assert_eq!(h.flow.poll_timeout(), None, "no refresh left to try");
}

/// A refresh refused for another reason than a dead grant or client (a malformed request, a
/// DPoP proof or scope refused) keeps the refresh token: it is tried again after a wait. (Any
/// 400 dropped it, from the store too, and the user was asked again for nothing.)
#[test]
fn a_refresh_refused_for_another_reason_keeps_the_refresh_token() {
    for error in [json!({"error": "invalid_request"}), json!({"error": "invalid_dpop_proof"})] {
        let mut h = ready_refreshable();
        h.now += Duration::from_secs(3540);
        h.flow.handle_timeout(h.now);
        let req = h.post(&format!("{AS}/token"));
        h.reply(&req, 400, &error);
        let e = h.failed();
        assert_eq!((e.step, e.status), (AuthStep::Refresh, Some(400)), "{error}");
        let next = h.flow.poll_timeout().expect("a refresh left to try");
        h.now = next;
        h.flow.handle_timeout(h.now);
        let req = h.post(&format!("{AS}/token"));
        assert_eq!(form_of(&req)["refresh_token"], "r1", "{error}");
    }
}

/// A refresh a 401 started, refused for a reason that may pass: the user is asked now, the
/// refresh token kept. (Failed, the same refusal came at every 401 and nobody was asked.)
#[test]
fn a_refresh_after_a_401_refused_for_another_reason_asks_the_user() {
    let mut h = ready_refreshable();
    let req = refresh_after_a_401(&mut h);
    h.reply(&req, 400, &json!({"error": "invalid_request"}));
    let (_, req) = h.grant(AS);
    assert_eq!(form_of(&req)["grant_type"], "authorization_code");
    h.token(&req, "t2", json!({}));
    h.ready();
    assert_eq!(h.bearer(), Some("t2"));
}

/// A dead refresh token refused with 403 or 401 (Auth0 answers 403 invalid_grant), not the
/// spec's 400: dropped, and the user is asked. Only a 400 was taken for a dead grant: the
/// refresh token was kept, tried again at every 401, and nobody was asked again.
#[test]
fn a_dead_refresh_token_refused_with_403_or_401_asks_the_user() {
    for status in [403, 401] {
        let mut h = ready_refreshable();
        let req = refresh_after_a_401(&mut h);
        h.reply(&req, status, &json!({"error": "invalid_grant"}));
        let (_, req) = h.grant(AS);
        assert_eq!(form_of(&req)["grant_type"], "authorization_code", "{status}");
        h.token(&req, "t2", json!({}));
        h.ready();
        assert_eq!(h.bearer(), Some("t2"), "{status}");
    }
}

/// A 401 while a refresh the timer started is out: the server refused the token in hand, so
/// when the refresh is refused too the user is asked, not the refused token kept as one that
/// "still works" (the call parked on the 401 was sent again with it and failed).
#[test]
fn a_401_during_a_background_refresh_makes_its_refusal_ask_the_user() {
    let mut h = ready_refreshable();
    h.now += Duration::from_secs(3540);
    h.flow.handle_timeout(h.now);
    let req = h.post(&format!("{AS}/token"));
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.nothing();
    h.reply(&req, 400, &json!({"error": "invalid_grant"}));
    let (_, req) = h.grant(AS);
    assert_eq!(form_of(&req)["grant_type"], "authorization_code");
    h.token(&req, "t2", json!({}));
    h.ready();
    assert_eq!(h.bearer(), Some("t2"));
}

/// A refresh answer without `scope` keeps the scope granted before (RFC 6749 6), also after a
/// restart, when nothing was asked in this process (it became none).
#[test]
fn a_refresh_without_scope_keeps_the_granted_one() {
    let mut store = MemoryStore::default();
    let tokens = Tokens {
        access_token: Secret::new("old"),
        refresh_token: Some(Secret::new("r1")),
        expires_at: Some(UNIX + 3_600),
        scope: Some("a b".into()),
        dpop_jkt: None,
    };
    let client = ClientRegistration {
        client_id: "dcr-client".into(),
        client_secret: None,
        token_endpoint_auth_method: "none".into(),
    };
    let auth = StoredAuth { issuer: AS.into(), client: Some(client), tokens: Some(tokens) };
    store.save(SERVER, &auth);
    let config = OAuthConfig::authorization_code(SERVER, REDIRECT).store(Box::new(store));
    let mut h = Harness::new(config);
    h.discover(json!({}), None);
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(form_of(&req)["grant_type"], "refresh_token");
    h.token(&req, "t2", json!({"expires_in": 3600}));
    h.ready();
    assert_eq!(h.flow.granted_scope(), Some("a b"));
}

/// A token whose lifetime is shorter than twice the refresh margin is refreshed halfway
/// through it, not at once on arrival (which, with the refresh waits doubling, ended with the
/// token expired before the next refresh).
#[test]
fn a_short_lived_token_is_refreshed_halfway() {
    let mut h = Harness::code();
    h.discover(json!({}), None);
    h.register(json!({}));
    let (_, req) = h.grant(AS);
    h.token(&req, "t1", json!({"expires_in": 30, "refresh_token": "r1"}));
    h.ready();
    assert_eq!(h.flow.poll_timeout(), Some(h.now + Duration::from_secs(15)));
    h.flow.handle_timeout(h.now + Duration::from_secs(14));
    h.nothing();
    h.now += Duration::from_secs(15);
    h.flow.handle_timeout(h.now);
    let req = h.post(&format!("{AS}/token"));
    h.token(&req, "t2", json!({"expires_in": 30}));
    h.ready();
    assert_eq!(h.flow.poll_timeout(), Some(h.now + Duration::from_secs(15)), "and so on");
}

#[test]
fn refresh_on_401_then_fallback_to_authorization() {
    let mut h = ready_refreshable();
    let req = refresh_after_a_401(&mut h);
    // The refresh token is dead: ask the user again instead of failing.
    h.reply(&req, 400, &json!({"error": "invalid_grant"}));
    let (_, req) = h.grant(AS);
    assert_eq!(form_of(&req)["grant_type"], "authorization_code");
    h.token(&req, "t3", json!({}));
    h.ready();

    // The registered client itself is gone (a public client's refusal is a 400 too): it is
    // registered anew before the user is asked, not used for the authorization.
    let mut h = ready_refreshable();
    let req = refresh_after_a_401(&mut h);
    h.reply(&req, 400, &json!({"error": "invalid_client"}));
    h.register(json!({"client_id": "dcr-client-2"}));
    let (params, req) = h.grant(AS);
    assert_eq!(params["client_id"], "dcr-client-2");
    h.token(&req, "t4", json!({}));
    h.ready();

    // A refresh failing otherwise is a Refresh error with the server's words.
    let mut h = ready_refreshable();
    h.now += Duration::from_secs(3600);
    assert_eq!(h.bearer(), None);
    h.flow.handle_timeout(h.now);
    let req = h.post(&format!("{AS}/token"));
    h.reply(&req, 503, &json!({"error": "temporarily_unavailable"}));
    let e = h.failed();
    assert_eq!(
        (e.step, e.status, e.error.as_deref()),
        (AuthStep::Refresh, Some(503), Some("temporarily_unavailable"))
    );
}

/// A refresh that failed (the token endpoint down) or brought a token already due for its
/// refresh (`expires_in` within the margin) is not tried again at once: the flow's timer is
/// later than now, further each time, so a driver that runs it never spins on refreshes. A
/// refresh that brings a long-lived token resets the wait.
#[test]
fn a_failed_or_short_refresh_waits_before_the_next() {
    let mut h = ready_refreshable();
    h.now += Duration::from_secs(3540);
    let mut waits = Vec::new();
    // Failures in a row wait longer each time. (A short-lived token no longer counts as one:
    // it is refreshed halfway through its life, `a_short_lived_token_is_refreshed_halfway`.)
    for round in 0..4 {
        h.flow.handle_timeout(h.now);
        let req = h.post(&format!("{AS}/token"));
        h.reply(&req, 503, &json!({"error": "temporarily_unavailable"}));
        h.failed();
        let next = h.flow.poll_timeout().expect("a refresh is still due");
        assert!(next > h.now, "round {round}: the next refresh at once");
        h.flow.handle_timeout(h.now);
        h.nothing();
        waits.push(next - h.now);
        h.now = next;
    }
    assert!(waits.windows(2).all(|w| w[0] < w[1]), "each wait longer: {waits:?}");
    h.flow.handle_timeout(h.now);
    let req = h.post(&format!("{AS}/token"));
    h.token(&req, "long", json!({"expires_in": 3600, "refresh_token": "r3"}));
    h.ready();
    assert_eq!(h.flow.poll_timeout(), Some(h.now + Duration::from_secs(3540)));
    // The wait starts small again for the next failure.
    h.now += Duration::from_secs(3540);
    h.flow.handle_timeout(h.now);
    let req = h.post(&format!("{AS}/token"));
    h.reply(&req, 503, &json!({}));
    h.failed();
    assert_eq!(h.flow.poll_timeout().map(|t| t - h.now), Some(waits[0]));
}

#[test]
fn authorization_server_migration() {
    let as2 = "https://as2.test";
    let mut h = ready_refreshable();
    h.flow.handle_authorized();
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), Some("mcp:basic")));
    h.get(PRM_PATH, 200, &prm(SERVER, as2, None));
    // Old client and tokens stay until the new server's metadata passed its checks (its
    // metadata request carries none of them), and are gone before anything else reaches it.
    assert!(h.bearer().is_some());
    h.get("https://as2.test/.well-known/oauth-authorization-server", 200, &meta(as2, json!({})));
    assert_eq!(h.bearer(), None);
    let req = h.post("https://as2.test/register");
    h.reply(&req, 201, &json!({"client_id": "as2-client"}));
    let (auth, req) = h.grant(as2);
    assert_eq!(auth["client_id"], "as2-client");
    let form = form_of(&req);
    assert_eq!(form["client_id"], "as2-client");
    assert_eq!(form["grant_type"], "authorization_code", "no refresh token from the old server");
    h.token(&req, "as2-token", json!({}));
    h.ready();
    assert_eq!(h.bearer(), Some("as2-token"));
}

/// A resource whose metadata names an authorization server in clear text is refused before
/// anything of the current server's is dropped: the tokens held (and stored) stay.
#[test]
fn a_cleartext_new_issuer_costs_no_tokens() {
    let mut h = ready_refreshable();
    h.flow.handle_authorized();
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, "http://as2.test", None));
    let e = h.failed();
    assert_eq!((e.step, e.reason), (AuthStep::Discovery, AuthFailure::NotHttps("issuer")));
    assert_eq!(h.bearer(), Some("t1"), "the token held is kept");
}

/// A PRM that is gone (404 at every location) after the tokens came from the authorization
/// server it named: the discovery fails with the status, and the tokens and the stored
/// credentials are kept. (The 2025-03-26 guess, the origin, was taken for an issuer change.)
#[test]
fn a_prm_gone_after_tokens_from_its_issuer_costs_no_tokens() {
    let store = Shared::default();
    let config =
        OAuthConfig::authorization_code(SERVER, REDIRECT).store(Box::new(Shared(store.0.clone())));
    let mut h = Harness::new(config);
    h.discover(json!({}), None);
    h.register(json!({}));
    let (_, req) = h.grant(AS);
    h.token(&req, "t1", json!({"expires_in": 3600, "refresh_token": "r1"}));
    h.ready();
    h.flow.handle_authorized();
    h.flow.handle_challenge(h.now, 401, &challenge(None, None));
    h.get(PRM_PATH, 404, &json!({}));
    h.get(PRM_ROOT, 404, &json!({}));
    let e = h.failed();
    assert_eq!((e.step, e.status), (AuthStep::Discovery, Some(404)));
    h.nothing();
    assert_eq!(h.bearer(), Some("t1"), "the token held is kept");
    assert_eq!(store.0.borrow_mut().load(SERVER).map(|a| a.issuer), Some(AS.to_owned()));
}

#[test]
fn host_credentials_stay_with_their_first_server() {
    // Pre-registered credentials with no issuer named are bound to the server they were
    // first used at: when the resource moves, they are not shown to the new one.
    let as2 = "https://as2.test";
    let mut config = OAuthConfig::authorization_code(SERVER, REDIRECT);
    config.pre_registered = Some(PreRegistered::with_secret("pre-client", "pre-secret"));
    let mut h = Harness::new(config);
    h.discover(json!({"registration_endpoint": null}), None);
    let (auth, req) = h.grant(AS);
    assert_eq!(auth["client_id"], "pre-client");
    h.token(&req, "t1", json!({}));
    h.ready();
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, as2, None));
    let m = meta(as2, json!({"registration_endpoint": null}));
    h.get("https://as2.test/.well-known/oauth-authorization-server", 200, &m);
    let e = h.failed();
    assert_eq!((e.step, e.reason), (AuthStep::Registration, AuthFailure::NoClientIdentity));

    // The same for a machine identity.
    let pre = PreRegistered::with_secret("cc", "secret");
    let mut h = Harness::new(OAuthConfig::client_credentials(SERVER, pre));
    h.discover(json!({}), None);
    let req = h.post(&format!("{AS}/token"));
    h.token(&req, "t1", json!({}));
    h.ready();
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, as2, None));
    h.get("https://as2.test/.well-known/oauth-authorization-server", 200, &meta(as2, json!({})));
    assert_eq!(h.failed().reason, AuthFailure::NoClientIdentity);
}

/// The binding of the host's credentials to their first server outlives a restart: the
/// store remembers the issuer, and a resource that names another after the restart does not
/// get the client secret sent there (it was, once the in-memory binding was gone).
#[test]
fn host_credentials_stay_with_their_first_server_across_a_restart() {
    let mut store = MemoryStore::default();
    let tokens = Tokens {
        access_token: Secret::new("old"),
        refresh_token: None,
        expires_at: Some(UNIX + 3_600),
        scope: None,
        dpop_jkt: None,
    };
    store.save(SERVER, &StoredAuth { issuer: AS.into(), client: None, tokens: Some(tokens) });
    let pre = PreRegistered::with_secret("cc", "secret");
    let mut h = Harness::new(OAuthConfig::client_credentials(SERVER, pre).store(Box::new(store)));
    let as2 = "https://as2.test";
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, as2, None));
    h.get("https://as2.test/.well-known/oauth-authorization-server", 200, &meta(as2, json!({})));
    assert_eq!(h.failed().reason, AuthFailure::NoClientIdentity);
    h.nothing();
}

/// A resource that names a new authorization server costs nothing of the old one's until
/// the new one's metadata passed its checks, and host credentials named with no issuer stay
/// bound to the server they were first used at in the store too: the old code cleared the
/// store as soon as the new issuer was named, so after a restart the host's secret went to
/// the new server's token endpoint.
#[test]
fn host_credentials_stay_bound_after_a_refused_move_and_a_restart() {
    let store = Shared::default();
    let t1 = Tokens {
        access_token: Secret::new("t1"),
        refresh_token: Some(Secret::new("r1")),
        expires_at: Some(UNIX + 3_600),
        scope: None,
        dpop_jkt: None,
    };
    let held = StoredAuth { issuer: AS.into(), client: None, tokens: Some(t1) };
    store.0.borrow_mut().save(SERVER, &held);
    let config = || {
        OAuthConfig::client_credentials(SERVER, PreRegistered::with_secret("cc", "secret"))
            .store(Box::new(Shared(store.0.clone())))
    };
    let as2 = "https://as2.test";
    let as2_meta = "https://as2.test/.well-known/oauth-authorization-server";
    // The new server's metadata is not found: nothing of the old one's is lost.
    let mut h = Harness::new(config());
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, as2, None));
    h.get(as2_meta, 404, &json!({}));
    h.get("https://as2.test/.well-known/openid-configuration", 404, &json!({}));
    assert_eq!(h.failed().step, AuthStep::Discovery);
    assert_eq!(h.bearer(), Some("t1"), "the token held is kept");
    assert_eq!(store.0.borrow_mut().load(SERVER), Some(held.clone()), "and stored");
    // The new server is found: the host's credentials are not for it, in this run or after
    // a restart; nor for a third one it moves to next.
    let as3 = "https://as3.test";
    let as3_meta = "https://as3.test/.well-known/oauth-authorization-server";
    for run in ["first", "after a restart"] {
        let mut h = Harness::new(config());
        h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
        h.get(PRM_PATH, 200, &prm(SERVER, as2, None));
        h.get(as2_meta, 200, &meta(as2, json!({})));
        assert_eq!(h.failed().reason, AuthFailure::NoClientIdentity, "{run}");
        h.nothing();
        h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
        h.get(PRM_PATH, 200, &prm(SERVER, as3, None));
        h.get(as3_meta, 200, &meta(as3, json!({})));
        assert_eq!(h.failed().reason, AuthFailure::NoClientIdentity, "{run}: as3");
        h.nothing();
        let kept = store.0.borrow_mut().load(SERVER).map(|a| a.issuer);
        assert_eq!(kept.as_deref(), Some(AS), "{run}: the binding is kept");
    }
}

/// A registration the authorization server no longer knows (`invalid_client`) is dropped,
/// here and in the store: the next flow registers anew (it reused the dead client for good,
/// and every authorization failed the same way).
#[test]
fn a_registration_the_server_refuses_is_registered_anew() {
    let mut h = Harness::code();
    h.discover(json!({}), None);
    h.register(json!({}));
    let (_, req) = h.grant(AS);
    let refused = HttpResponse::new(401, br#"{"error":"invalid_client"}"#);
    h.flow.handle_response(h.now, req.id, refused);
    assert_eq!(h.failed().error.as_deref(), Some("invalid_client"));
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
    h.get(AS_META, 200, &meta(AS, json!({})));
    h.register(json!({}));
}

#[test]
fn store_keeps_tokens_and_registration() {
    let store = Shared::default();
    let mut config = OAuthConfig::authorization_code(SERVER, REDIRECT);
    config.store = Box::new(Shared(store.0.clone()));
    let mut h = Harness::new(config);
    h.discover(json!({}), None);
    h.register(json!({}));
    let (_, req) = h.grant(AS);
    h.token(&req, "kept", json!({"expires_in": 60}));
    h.ready();
    let saved = store.0.borrow_mut().load(SERVER).unwrap();
    assert_eq!(saved.issuer, AS);
    assert_eq!(saved.client.unwrap().client_id, "dcr-client");
    assert_eq!(saved.tokens.as_ref().unwrap().expires_at, Some(UNIX + 60));
    assert!(!format!("{:?}", h.flow).contains("kept"));

    // A restart: the token is there at once, and expires when it said.
    let mut config = OAuthConfig::authorization_code(SERVER, REDIRECT);
    config.store = Box::new(Shared(store.0.clone()));
    let now = Instant::now();
    let flow = OAuthFlow::new(config, now, UNIX + 30).unwrap();
    assert_eq!(flow.bearer(now).map(Secret::expose), Some("kept"));
    assert_eq!(flow.bearer(now + Duration::from_secs(30)), None);
}

#[test]
fn client_credentials_with_secret() {
    let pre = PreRegistered::with_secret("conformance-test-client", "conformance-test-secret");
    let mut h = Harness::new(OAuthConfig::client_credentials(SERVER, pre));
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, Some(&["mcp:basic"])));
    h.get(AS_META, 200, &meta(AS, json!({"grant_types_supported": ["client_credentials"], "token_endpoint_auth_methods_supported": ["client_secret_basic"]})));
    let req = h.post(&format!("{AS}/token"));
    let form = form_of(&req);
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(form["scope"], "mcp:basic");
    assert_eq!(form["resource"], SERVER);
    let basic = header(&req, "authorization").unwrap().strip_prefix("Basic ").unwrap();
    assert_eq!(base64_decode(basic).unwrap(), b"conformance-test-client:conformance-test-secret");
    h.token(&req, "cc-token", json!({"scope": "mcp:basic"}));
    h.ready();
    assert_eq!(h.bearer(), Some("cc-token"));
    h.flow.handle_authorized();

    // Step-up for a machine identity: a new token for the union, no user involved.
    step_up(&mut h, "mcp:admin");
    h.get(PRM_PATH, 200, &prm(SERVER, AS, Some(&["mcp:basic"])));
    h.get(AS_META, 200, &meta(AS, json!({"scopes_supported": ["mcp:basic", "offline_access"]})));
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(form_of(&req)["scope"], "mcp:basic mcp:admin");
    h.token(&req, "cc-token-2", json!({}));
    h.ready();

    // Without a secret or key there is nothing to authenticate with.
    let pre = PreRegistered { client_secret: None, ..PreRegistered::with_secret("c", "") };
    let mut h = Harness::new(OAuthConfig::client_credentials(SERVER, pre));
    h.discover(json!({}), None);
    assert_eq!(h.failed().reason, AuthFailure::MissingCredentials);
}

#[test]
fn client_credentials_with_private_key_jwt() {
    use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};
    let (pem, public) = es256_pem();
    let key = SigningKey::from_pkcs8_pem(&pem, JwtAlgorithm::Es256).unwrap();
    let mut h =
        Harness::new(OAuthConfig::client_credentials(SERVER, PreRegistered::with_key("cc", key)));
    h.now += Duration::from_secs(10);
    h.discover(json!({"token_endpoint_auth_methods_supported": ["private_key_jwt"], "token_endpoint_auth_signing_alg_values_supported": ["ES256"]}), None);
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(header(&req, "authorization"), None);
    let form = form_of(&req);
    assert_eq!(
        form["client_assertion_type"],
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    );
    let jwt = &form["client_assertion"];
    let (input, sig) = jwt.rsplit_once('.').unwrap();
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &public)
        .verify(input.as_bytes(), &base64_decode(sig).unwrap())
        .unwrap();
    let claims: Value =
        serde_json::from_slice(&base64_decode(input.split('.').nth(1).unwrap()).unwrap()).unwrap();
    assert_eq!(
        (claims["iss"].as_str(), claims["sub"].as_str(), claims["aud"].as_str()),
        (Some("cc"), Some("cc"), Some(AS))
    );
    assert_eq!(claims["iat"], UNIX + 10);
    assert_eq!(claims["exp"], UNIX + 310);
    assert!(claims["jti"].as_str().is_some_and(|j| j.len() >= 16));
    h.token(&req, "cc-token", json!({}));
    h.ready();
}

/// A wall clock set after the flow was made (a device booted at 1970, synced by NTP later)
/// dates what the flow signs from then on: the assertion of the next grant carries the
/// clock's new reading, not the boot-time one plus the time since.
#[test]
fn the_wall_clock_told_later_dates_the_claims() {
    let (pem, _) = es256_pem();
    let key = SigningKey::from_pkcs8_pem(&pem, JwtAlgorithm::Es256).unwrap();
    let mut h =
        Harness::new(OAuthConfig::client_credentials(SERVER, PreRegistered::with_key("cc", key)));
    h.now += Duration::from_secs(30);
    let synced = UNIX + 1_000_000;
    h.flow.handle_wall_clock(h.now, synced);
    h.now += Duration::from_secs(10);
    h.discover(json!({"token_endpoint_auth_methods_supported": ["private_key_jwt"], "token_endpoint_auth_signing_alg_values_supported": ["ES256"]}), None);
    let req = h.post(&format!("{AS}/token"));
    let jwt = &form_of(&req)["client_assertion"];
    let (input, _) = jwt.rsplit_once('.').unwrap();
    let claims: Value =
        serde_json::from_slice(&base64_decode(input.split('.').nth(1).unwrap()).unwrap()).unwrap();
    assert_eq!(
        (claims["iat"].as_u64(), claims["exp"].as_u64()),
        (Some(synced + 10), Some(synced + 310))
    );
}

#[test]
fn malformed_and_refused_answers() {
    // Metadata that is not JSON.
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    let req = h.request(HttpMethod::Get, PRM_PATH);
    h.flow.handle_response(h.now, req.id, HttpResponse::new(200, b"<html>"));
    let e = h.failed();
    assert_eq!(
        (e.step, e.reason),
        (AuthStep::Discovery, AuthFailure::Malformed(ParseError::NotJson))
    );

    // The challenge's PRM URL fails: no guessing elsewhere.
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 500, &json!({}));
    assert_eq!(h.failed().status, Some(500));

    // PRM found but its server publishes no metadata.
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
    h.get(AS_META, 404, &json!({}));
    h.get("https://as.test/.well-known/openid-configuration", 404, &json!({}));
    let e = h.failed();
    assert_eq!(
        (e.step, e.reason, e.status),
        (AuthStep::Discovery, AuthFailure::NoMetadata, Some(404))
    );

    // No PKCE S256 on offer.
    let mut h = Harness::code();
    h.discover(json!({"code_challenge_methods_supported": ["plain"]}), None);
    h.register(json!({}));
    assert_eq!(h.failed().reason, AuthFailure::PkceUnsupported);

    // Registration refused.
    let mut h = Harness::code();
    h.discover(json!({}), None);
    let req = h.post(&format!("{AS}/register"));
    h.reply(&req, 400, &json!({"error": "invalid_client_metadata"}));
    let e = h.failed();
    assert_eq!(
        (e.step, e.status, e.error.as_deref()),
        (AuthStep::Registration, Some(400), Some("invalid_client_metadata"))
    );

    // Token refused, then a token response without a token.
    for (status, body, reason) in [
        (401, json!({"error": "invalid_client"}), AuthFailure::Status),
        (
            200,
            json!({"token_type": "Bearer"}),
            AuthFailure::Malformed(ParseError::Missing("access_token")),
        ),
    ] {
        let mut h = Harness::code();
        h.discover(json!({}), None);
        h.register(json!({}));
        let (_, req) = h.grant(AS);
        h.reply(&req, status, &body);
        let e = h.failed();
        assert_eq!((e.step, e.reason), (AuthStep::Token, reason));
        assert_eq!(h.bearer(), None);
    }

    // Display names the step, status and code.
    let mut e = AuthError::new(AuthStep::Token, AuthFailure::Status);
    e.status = Some(401);
    e.error = Some("invalid_client".into());
    assert_eq!(
        e.to_string(),
        "OAuth token failed: unexpected HTTP status (HTTP 401) [invalid_client]"
    );
}

/// A request whose connection failed says how (a refused certificate at the authorization
/// server, a name that does not resolve), not only that it failed in transport: the driver
/// knew, and the failure the host saw did not say.
#[test]
fn connection_failures_name_their_cause() {
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(None, None));
    let req = h.request(HttpMethod::Get, PRM_PATH);
    let tls = crate::error::TransportError::Tls(crate::error::TlsFailure::UnknownIssuer);
    h.flow.handle_connection_error(h.now, req.id, tls.clone());
    let e = h.failed();
    assert_eq!((e.step, &e.reason), (AuthStep::Discovery, &AuthFailure::Connection(tls)));
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");
}

#[test]
fn transport_failures_name_the_step() {
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(None, None));
    let req = h.request(HttpMethod::Get, PRM_PATH);
    h.flow.handle_transport_error(h.now, RequestId(99));
    h.nothing();
    h.flow.handle_transport_error(h.now, req.id);
    let e = h.failed();
    // Not taken for a missing document: no next location, no legacy fallback.
    assert_eq!((e.step, e.reason, e.status), (AuthStep::Discovery, AuthFailure::Transport, None));
    h.nothing();

    let mut h = ready_refreshable();
    h.now += Duration::from_secs(3600);
    h.flow.handle_timeout(h.now);
    let req = h.post(&format!("{AS}/token"));
    h.flow.handle_transport_error(h.now, req.id);
    assert_eq!(h.failed().step, AuthStep::Refresh);
}

#[test]
fn stale_answers_and_overlapping_challenges() {
    let mut h = Harness::code();
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    let first = h.request(HttpMethod::Get, PRM_PATH);
    // A second 401 while the flow runs starts nothing new.
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.nothing();
    // Nor does a redirect nobody asked for disturb it.
    h.redirect("code=c&state=s");
    h.nothing();
    assert!(h.flow.is_running());
    // A response with another id is ignored; the real one goes on.
    let stale = HttpRequest {
        id: RequestId(99),
        method: HttpMethod::Get,
        url: String::new(),
        headers: Vec::new(),
        body: Vec::new(),
    };
    h.reply(&stale, 200, &prm(SERVER, AS, None));
    h.nothing();
    h.reply(&first, 200, &prm(SERVER, AS, None));
    h.request(HttpMethod::Get, AS_META);
    assert!(OAuthFlow::new(OAuthConfig::authorization_code("mcp.test/mcp", REDIRECT), h.now, 0)
        .is_err());
}

#[test]
fn request_debug_redacts() {
    let req = HttpRequest {
        id: RequestId(1),
        method: HttpMethod::Post,
        url: "https://as.test/token".into(),
        headers: vec![("Authorization", "Basic c2VjcmV0".into())],
        body: b"refresh_token=SECRET".to_vec(),
    };
    let text = format!("{req:?}");
    assert!(!text.contains("c2VjcmV0") && !text.contains("SECRET"), "{text}");
}

#[test]
fn the_pkce_verifier_never_shows_in_debug_while_the_flow_waits_for_the_redirect() {
    let (mut h, auth) = deferred();
    let waiting = format!("{:?} {:#?}", h.flow, h.flow);
    let redirect = format!("{REDIRECT}?code=the-code&state={}&iss={AS}", auth["state"]);
    assert_eq!(h.flow.handle_redirect(h.now, &redirect), Ok(()));
    let req = h.post(&format!("{AS}/token"));
    let verifier = form_of(&req)["code_verifier"].clone();
    assert!(verifier.len() >= 43, "{verifier}");
    assert!(!waiting.contains(&verifier), "{waiting}");
    assert!(waiting.contains("Redirect"), "the step still shows: {waiting}");
}

/// A token response's `expires_in` is the authorization server's to choose: an absurd one
/// (10^19 s, 1e300, a numeric string past `u64`) is clamped, and the refresh timer is still a
/// time the host can wait for, without an overflow panic.
#[test]
fn absurd_expires_in_is_clamped() {
    for expires_in in [json!(10_000_000_000_000_000_000u64), json!(1e300), json!(u64::MAX)] {
        let mut h = Harness::code();
        h.discover(json!({}), None);
        h.register(json!({}));
        let (_, req) = h.grant(AS);
        h.token(&req, "t1", json!({"expires_in": expires_in, "refresh_token": "r1"}));
        h.ready();
        let at = h.flow.poll_timeout().expect("a refresh timer");
        assert!(at > h.now + Duration::from_secs(86_400 * 365), "{expires_in}: {at:?}");
        h.flow.handle_timeout(h.now + Duration::from_secs(86_400));
        h.nothing();
        assert_eq!(h.bearer(), Some("t1"));
    }
}

/// A cleartext MCP server on a remote host gets no token: the flow is refused when it is
/// made, and a resource metadata URL in cleartext named by an https server's challenge is not
/// fetched (an attacker on the path could name any authorization server in it). Loopback
/// hosts are exempt.
#[test]
fn cleartext_resources_get_no_token() {
    let secret = || PreRegistered::with_secret("id", "the-secret");
    for url in ["http://mcp.example.com/mcp", "http://10.0.0.1/mcp", "http://localhost.evil/mcp"] {
        let e = OAuthFlow::new(OAuthConfig::client_credentials(url, secret()), Instant::now(), 0)
            .err()
            .unwrap_or_else(|| panic!("{url} accepted"));
        assert_eq!((e.step, e.reason), (AuthStep::Discovery, AuthFailure::CleartextResource));
    }
    for url in ["http://127.0.0.1:8080/mcp", "http://localhost/mcp", "http://[::1]/mcp"] {
        let flow =
            OAuthFlow::new(OAuthConfig::client_credentials(url, secret()), Instant::now(), 0);
        assert!(flow.is_ok(), "{url}");
    }
    let mut h = Harness::new(OAuthConfig::client_credentials(SERVER, secret()));
    h.flow.handle_challenge(h.now, 401, &challenge(Some("http://evil.example/prm"), None));
    let e = h.failed();
    assert_eq!((e.step, e.reason), (AuthStep::Discovery, AuthFailure::CleartextResource));
    h.nothing();
}

/// Issue 21: a cleartext authorization server on a remote host gets nothing, neither the
/// request for its metadata nor the client secret; its endpoints are checked one by one, since
/// https metadata may still name an http token endpoint. Loopback hosts are exempt.
#[test]
fn cleartext_authorization_servers_are_refused_except_on_loopback() {
    let secret = || PreRegistered::with_secret("id", "the-secret");
    // The resource metadata names a cleartext issuer: no metadata request goes out.
    for issuer in
        ["http://as.example:8443", "http://10.0.0.1", "http://[::2]:80", "http://localhost.evil"]
    {
        let mut h = Harness::new(OAuthConfig::client_credentials(SERVER, secret()));
        h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
        h.get(PRM_PATH, 200, &prm(SERVER, issuer, None));
        let e = h.failed();
        assert_eq!((e.step, e.reason), (AuthStep::Discovery, AuthFailure::NotHttps("issuer")));
        h.nothing();
    }
    // https metadata naming a cleartext endpoint: nothing goes to it.
    for (field, name) in [
        ("token_endpoint", "token_endpoint"),
        ("registration_endpoint", "registration_endpoint"),
        ("authorization_endpoint", "authorization_endpoint"),
    ] {
        let mut h = Harness::new(OAuthConfig::client_credentials(SERVER, secret()));
        h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
        h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
        h.get(AS_META, 200, &meta(AS, json!({ field: "http://as.example/x" })));
        let e = h.failed();
        assert_eq!((e.step, e.reason), (AuthStep::Discovery, AuthFailure::NotHttps(name)));
        h.nothing();
    }
    // Loopback, by address or as localhost: the flow goes on to the token request.
    for issuer in ["http://127.0.0.1:9000", "http://[::1]:9000", "http://localhost:9000"] {
        let mut h = Harness::new(OAuthConfig::client_credentials(SERVER, secret()));
        h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
        h.get(PRM_PATH, 200, &prm(SERVER, issuer, None));
        let meta_url = format!("{issuer}/.well-known/oauth-authorization-server");
        h.get(&meta_url, 200, &meta(issuer, json!({})));
        let req = h.post(&format!("{issuer}/token"));
        assert!(header(&req, "authorization").is_some_and(|a| a.starts_with("Basic ")));
    }
}

/// Flows that get no token (the authorization server unreachable, a user who declines) are
/// no re-authorizations the server went on refusing: the next challenge starts a flow again,
/// however many failed before. Counted, three of them locked the server out for good (every
/// 401 failed at once with StepUpLimit, a host's restart included).
#[test]
fn failed_flows_do_not_count_against_the_reauthorization_limit() {
    let pre = PreRegistered::with_secret("cc", "secret");
    let mut h = Harness::new(OAuthConfig::client_credentials(SERVER, pre));
    for _ in 0..5 {
        h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
        let req = h.request(HttpMethod::Get, PRM_PATH);
        h.flow.handle_transport_error(h.now, req.id);
        assert_eq!(h.failed().step, AuthStep::Discovery);
    }
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
}

/// A response's `Debug` shows no body: a token response carries the access and refresh
/// tokens (the derived `Debug` printed them as a byte array, which a host logging each
/// response of a flow it drives decodes at a glance).
#[test]
fn a_responses_debug_shows_no_token() {
    let body = br#"{"access_token":"sekrit","refresh_token":"r3fresh"}"#;
    let shown = format!("{:?}", HttpResponse::new(200, body));
    let bytes = |s: &[u8]| format!("{s:?}").trim_matches(['[', ']']).to_owned();
    assert!(!shown.contains("sekrit") && !shown.contains(&bytes(b"sekrit")), "{shown}");
    assert!(shown.contains("200"), "{shown}");
}
