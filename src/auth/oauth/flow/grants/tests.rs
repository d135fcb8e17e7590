//! The assertion grants against scripted answers and simulated time: the exact request
//! bodies, every failure typed, and when the host's provider is asked again.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use serde_json::json;

use crate::auth::oauth::encode::{base64_decode, base64url};
use crate::auth::oauth::metadata::{parse_exchange_response, ParseError};
use crate::auth::oauth::tests::{
    challenge, header, meta, prm, Harness, AS, AS_META, PRM_PATH, SERVER, UNIX,
};
use crate::auth::oauth::*;

const IDP_TOKEN: &str = "https://idp.test/token";

/// What the provider was asked, and the answers it gives in order (the last one repeats).
#[derive(Default)]
struct Script {
    asked: Vec<(AssertionKind, String, String, bool)>,
    answers: VecDeque<Result<Assertion, AssertionError>>,
}

fn provider(
    answers: Vec<Result<Assertion, AssertionError>>,
) -> (Rc<RefCell<Script>>, Box<dyn AssertionProvider>) {
    let script = Rc::new(RefCell::new(Script { answers: answers.into(), ..Script::default() }));
    let inner = Rc::clone(&script);
    let provider = move |r: &AssertionRequest<'_>| {
        let mut s = inner.borrow_mut();
        s.asked.push((r.kind, r.audience.to_owned(), r.resource.to_owned(), r.renew));
        if s.answers.len() > 1 {
            s.answers.pop_front().unwrap()
        } else {
            s.answers.front().cloned().unwrap()
        }
    };
    (script, Box::new(provider))
}

/// A JWT-shaped assertion named `name`, expiring at `exp`.
fn jwt(name: &str, exp: u64) -> String {
    let claims = json!({"sub": name, "exp": exp}).to_string();
    format!("{}.{}.sig-{name}", base64url(br#"{"alg":"ES256"}"#), base64url(claims.as_bytes()))
}

fn body(req: &HttpRequest) -> &str {
    std::str::from_utf8(&req.body).unwrap()
}

fn enc(text: &str) -> String {
    let mut out = String::new();
    crate::auth::oauth::encode::percent_encode(text, &mut out);
    out
}

fn wif(answers: Vec<Result<Assertion, AssertionError>>) -> (Rc<RefCell<Script>>, Harness) {
    let (script, p) = provider(answers);
    (script, Harness::new(OAuthConfig::jwt_bearer(SERVER, "wif-client", p)))
}

/// Discovery as the suite's workload identity scenario serves it: a public client, the
/// JWT-bearer grant only, no registration.
fn discover_wif(h: &mut Harness) {
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
    let extra = json!({
        "grant_types_supported": ["urn:ietf:params:oauth:grant-type:jwt-bearer"],
        "registration_endpoint": null,
    });
    h.get(AS_META, 200, &meta(AS, extra));
}

fn bearer_body(assertion: &str, client: &str) -> String {
    format!(
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={}&resource={}{client}",
        enc(assertion),
        enc(SERVER)
    )
}

fn refuse(h: &mut Harness, req: &HttpRequest, error: &str) {
    h.reply(req, 400, &json!({"error": error}));
}

#[test]
fn jwt_bearer_sends_the_hosts_assertion_and_reuses_it_until_near_expiry() {
    let a1 = jwt("w1", UNIX + 600);
    let (script, mut h) = wif(vec![Ok(Assertion::new(a1.clone()))]);
    discover_wif(&mut h);
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(body(&req), bearer_body(&a1, "&client_id=wif-client"));
    assert_eq!(header(&req, "authorization"), None);
    assert_eq!(header(&req, "content-type"), Some("application/x-www-form-urlencoded"));
    assert_eq!(
        script.borrow().asked,
        [(AssertionKind::JwtBearer, AS.into(), SERVER.into(), false)]
    );
    h.token(&req, "wif-token", json!({"expires_in": 300}));
    h.ready();
    assert_eq!(h.bearer(), Some("wif-token"));
    assert!(!format!("{:?}", h.flow).contains(&a1), "the held assertion never shows");

    // The token lapses; the assertion still has more than the margin left: no new one.
    h.now += Duration::from_secs(300);
    discover_wif(&mut h);
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(body(&req), bearer_body(&a1, "&client_id=wif-client"));
    h.token(&req, "wif-token-2", json!({}));
    h.ready();
    assert_eq!(script.borrow().asked.len(), 1);

    // Within the margin of its expiry it is asked for again, as a renewal.
    let a2 = jwt("w2", UNIX + 1200);
    script.borrow_mut().answers = VecDeque::from([Ok(Assertion::new(a2.clone()))]);
    h.now += Duration::from_secs(280);
    discover_wif(&mut h);
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(body(&req), bearer_body(&a2, "&client_id=wif-client"));
    assert_eq!(
        script.borrow().asked[1],
        (AssertionKind::JwtBearer, AS.into(), SERVER.into(), true)
    );
}

#[test]
fn jwt_bearer_invalid_grant_asks_for_a_new_assertion_once() {
    let (a1, a2) = (jwt("w1", UNIX + 600), jwt("w2", UNIX + 600));
    let answers = vec![Ok(Assertion::new(a1.clone())), Ok(Assertion::new(a2.clone()))];
    let (script, mut h) = wif(answers);
    discover_wif(&mut h);
    let req = h.post(&format!("{AS}/token"));
    refuse(&mut h, &req, "invalid_grant");
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(body(&req), bearer_body(&a2, "&client_id=wif-client"));
    assert!(script.borrow().asked[1].3, "asked as a renewal");
    // Refused again: no third try in this run.
    refuse(&mut h, &req, "invalid_grant");
    let e = h.failed();
    assert_eq!(
        (e.step, e.reason, e.status, e.error.as_deref()),
        (AuthStep::Token, AuthFailure::Status, Some(400), Some("invalid_grant"))
    );
    h.nothing();
    assert_eq!(script.borrow().asked.len(), 2);

    // The next run may retry again; a provider that hands back the refused assertion ends it
    // with the server's answer, and the assertion is not sent twice.
    discover_wif(&mut h);
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(body(&req), bearer_body(&a2, "&client_id=wif-client"));
    refuse(&mut h, &req, "invalid_grant");
    let e = h.failed();
    assert_eq!((e.step, e.error.as_deref()), (AuthStep::Token, Some("invalid_grant")));
    h.nothing();
}

#[test]
fn jwt_bearer_other_refusals_are_not_retried() {
    for error in ["invalid_scope", "unauthorized_client", "invalid_client"] {
        let (script, mut h) = wif(vec![Ok(Assertion::new(jwt("w", UNIX + 600)))]);
        discover_wif(&mut h);
        let req = h.post(&format!("{AS}/token"));
        refuse(&mut h, &req, error);
        let e = h.failed();
        assert_eq!((e.status, e.error.as_deref()), (Some(400), Some(error)));
        h.nothing();
        assert_eq!(script.borrow().asked.len(), 1);
    }
}

#[test]
fn jwt_bearer_local_failures_are_typed_and_send_nothing() {
    let cases = [
        (Err(AssertionError::Unavailable), AssertionError::Unavailable),
        (
            Err(AssertionError::Io(std::io::ErrorKind::NotFound)),
            AssertionError::Io(std::io::ErrorKind::NotFound),
        ),
        (Ok(Assertion::new("")), AssertionError::Empty),
        // The suite's expired_jwt: exp a minute ago.
        (Ok(Assertion::new(jwt("old", UNIX - 60))), AssertionError::Expired),
        (Ok(Assertion::new("opaque").expires_at(UNIX)), AssertionError::Expired),
    ];
    for (answer, why) in cases {
        let (_, mut h) = wif(vec![answer]);
        discover_wif(&mut h);
        let e = h.failed();
        assert_eq!((e.step, e.reason.clone()), (AuthStep::Token, AuthFailure::Assertion(why)));
        assert!(e.is_local(), "{e}");
        h.nothing();
    }
    // A JWT-bearer grant without a provider.
    let mut config = OAuthConfig::jwt_bearer(
        SERVER,
        "c",
        Box::new(|_: &AssertionRequest<'_>| Err(AssertionError::Unavailable)),
    );
    config.assertions = None;
    let mut h = Harness::new(config);
    discover_wif(&mut h);
    assert_eq!(h.failed().reason, AuthFailure::MissingCredentials);
    // A transport failure names the step.
    let (_, mut h) = wif(vec![Ok(Assertion::new("opaque"))]);
    discover_wif(&mut h);
    let req = h.post(&format!("{AS}/token"));
    h.flow.handle_transport_error(h.now, req.id);
    let e = h.failed();
    assert_eq!((e.step, e.reason), (AuthStep::Token, AuthFailure::Transport));
}

fn enterprise(
    idp: IdentityProvider,
    answers: Vec<Result<Assertion, AssertionError>>,
) -> (Rc<RefCell<Script>>, Harness) {
    let (script, p) = provider(answers);
    let client = PreRegistered::with_secret("xaa-client", "xaa-secret");
    (script, Harness::new(OAuthConfig::identity_assertion(SERVER, client, idp, p)))
}

/// Discovery as the suite's enterprise scenario serves it: the JWT-bearer grant with
/// client_secret_basic.
fn discover_enterprise(h: &mut Harness) {
    h.flow.handle_challenge(h.now, 401, &challenge(Some(PRM_PATH), None));
    h.get(PRM_PATH, 200, &prm(SERVER, AS, None));
    let extra = json!({
        "grant_types_supported": ["urn:ietf:params:oauth:grant-type:jwt-bearer"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    });
    h.get(AS_META, 200, &meta(AS, extra));
}

fn exchange_body(id_token: &str, client: &str) -> String {
    format!(
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange\
         &requested_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aid-jag\
         &audience={}&resource={}&subject_token={}\
         &subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aid_token{client}",
        enc(AS),
        enc(SERVER),
        enc(id_token)
    )
}

fn id_jag(h: &mut Harness, req: &HttpRequest, jag: &str) {
    let answer = json!({
        "access_token": jag,
        "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
        "token_type": "N_A",
    });
    h.reply(req, 200, &answer);
}

fn basic(req: &HttpRequest) -> String {
    let b = header(req, "authorization").unwrap().strip_prefix("Basic ").unwrap();
    String::from_utf8(base64_decode(b).unwrap()).unwrap()
}

#[test]
fn identity_assertion_exchanges_the_id_token_then_presents_the_id_jag() {
    let id_token = jwt("user", UNIX + 3600);
    let (script, mut h) = enterprise(
        IdentityProvider::new(IDP_TOKEN, "idp-client"),
        vec![Ok(Assertion::new(id_token.clone()))],
    );
    discover_enterprise(&mut h);
    let req = h.post(IDP_TOKEN);
    assert_eq!(body(&req), exchange_body(&id_token, "&client_id=idp-client"));
    assert_eq!(header(&req, "authorization"), None);
    assert_eq!(
        script.borrow().asked,
        [(AssertionKind::IdToken, IDP_TOKEN.into(), SERVER.into(), false)]
    );
    id_jag(&mut h, &req, "the-id-jag");
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(body(&req), bearer_body("the-id-jag", ""));
    assert_eq!(basic(&req), "xaa-client:xaa-secret");
    h.token(&req, "xaa-token", json!({}));
    h.ready();
    assert_eq!(h.bearer(), Some("xaa-token"));
    assert!(!format!("{:?}", h.flow).contains(&id_token));

    // A client secret at the identity provider goes in HTTP Basic, not the form.
    let idp = IdentityProvider::new(IDP_TOKEN, "idp client").client_secret("idp:secret");
    let (_, mut h) = enterprise(idp, vec![Ok(Assertion::new(id_token.clone()))]);
    discover_enterprise(&mut h);
    let req = h.post(IDP_TOKEN);
    assert_eq!(body(&req), exchange_body(&id_token, ""));
    assert_eq!(basic(&req), "idp%20client:idp%3Asecret");
}

#[test]
fn identity_assertion_refusals_renew_once_what_was_refused() {
    let (t1, t2) = (jwt("user-1", UNIX + 3600), jwt("user-2", UNIX + 3600));
    let answers = vec![Ok(Assertion::new(t1.clone())), Ok(Assertion::new(t2.clone()))];
    let (script, mut h) = enterprise(IdentityProvider::new(IDP_TOKEN, "idp-client"), answers);
    discover_enterprise(&mut h);
    // The identity provider refuses the identity token: a new one is asked for.
    let req = h.post(IDP_TOKEN);
    refuse(&mut h, &req, "invalid_grant");
    let req = h.post(IDP_TOKEN);
    assert_eq!(body(&req), exchange_body(&t2, "&client_id=idp-client"));
    assert_eq!(script.borrow().asked.len(), 2);
    id_jag(&mut h, &req, "jag-1");
    // The authorization server refuses the ID-JAG: the retry of this run is spent.
    let req = h.post(&format!("{AS}/token"));
    refuse(&mut h, &req, "invalid_grant");
    let e = h.failed();
    assert_eq!((e.step, e.error.as_deref()), (AuthStep::Token, Some("invalid_grant")));
    h.nothing();

    // Next run: the ID-JAG refused, the held identity token is exchanged again (the
    // provider is not asked: that token is fine).
    discover_enterprise(&mut h);
    let req = h.post(IDP_TOKEN);
    id_jag(&mut h, &req, "jag-2");
    let req = h.post(&format!("{AS}/token"));
    refuse(&mut h, &req, "invalid_grant");
    let req = h.post(IDP_TOKEN);
    assert_eq!(body(&req), exchange_body(&t2, "&client_id=idp-client"));
    id_jag(&mut h, &req, "jag-3");
    let req = h.post(&format!("{AS}/token"));
    assert_eq!(body(&req), bearer_body("jag-3", ""));
    h.token(&req, "xaa-token", json!({}));
    h.ready();
    assert_eq!(script.borrow().asked.len(), 2);
}

#[test]
fn identity_assertion_failures_are_typed() {
    let ok = || vec![Ok(Assertion::new("id-token"))];
    // The identity token never travels in clear text to a remote identity provider.
    let (_, mut h) = enterprise(IdentityProvider::new("http://idp.test/token", "c"), ok());
    discover_enterprise(&mut h);
    let e = h.failed();
    assert_eq!(
        (e.step, e.reason),
        (AuthStep::Exchange, AuthFailure::NotHttps("identity provider"))
    );
    // On loopback it may.
    let (_, mut h) = enterprise(IdentityProvider::new("http://127.0.0.1:9/token", "c"), ok());
    discover_enterprise(&mut h);
    h.post("http://127.0.0.1:9/token");

    let idp = || IdentityProvider::new(IDP_TOKEN, "c");
    for (answer, why) in [
        (
            json!({"access_token": "x", "token_type": "N_A"}),
            ParseError::Missing("issued_token_type"),
        ),
        (
            json!({"access_token": "x", "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}),
            ParseError::Invalid("issued_token_type"),
        ),
        (
            json!({"issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"}),
            ParseError::Missing("access_token"),
        ),
    ] {
        let (_, mut h) = enterprise(idp(), ok());
        discover_enterprise(&mut h);
        let req = h.post(IDP_TOKEN);
        h.reply(&req, 200, &answer);
        let e = h.failed();
        assert_eq!((e.step, e.reason), (AuthStep::Exchange, AuthFailure::Malformed(why)));
    }
    // Any other refusal at the identity provider is not retried.
    let (script, mut h) = enterprise(idp(), ok());
    discover_enterprise(&mut h);
    let req = h.post(IDP_TOKEN);
    h.reply(&req, 401, &json!({"error": "invalid_client"}));
    let e = h.failed();
    assert_eq!(
        (e.step, e.status, e.error.as_deref()),
        (AuthStep::Exchange, Some(401), Some("invalid_client"))
    );
    assert_eq!(script.borrow().asked.len(), 1);
    // No identity token.
    let (_, mut h) = enterprise(idp(), vec![Err(AssertionError::Unavailable)]);
    discover_enterprise(&mut h);
    let e = h.failed();
    assert_eq!(
        (e.step, e.reason),
        (AuthStep::Exchange, AuthFailure::Assertion(AssertionError::Unavailable))
    );
    // A transport failure at the identity provider.
    let (_, mut h) = enterprise(idp(), ok());
    discover_enterprise(&mut h);
    let req = h.post(IDP_TOKEN);
    h.flow.handle_transport_error(h.now, req.id);
    assert_eq!(h.failed().step, AuthStep::Exchange);
}

#[test]
fn exchange_response_parser() {
    let ok = br#"{"access_token":"jag","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag","token_type":"N_A","expires_in":300}"#;
    assert_eq!(parse_exchange_response(ok).unwrap().assertion.expose(), "jag");
    let no_type =
        br#"{"access_token":"jag","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag"}"#;
    assert!(parse_exchange_response(no_type).is_ok());
    let cases: &[(&[u8], ParseError)] = &[
        (b"[]", ParseError::NotJson),
        (b"\xff", ParseError::NotJson),
        (br#"{"access_token":"","issued_token_type":"x"}"#, ParseError::Missing("access_token")),
        (br#"{"access_token":"a","issued_token_type":7}"#, ParseError::Invalid("issued_token_type")),
        (
            br#"{"access_token":"a","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag","token_type":1}"#,
            ParseError::Invalid("token_type"),
        ),
    ];
    for (body, err) in cases {
        assert_eq!(parse_exchange_response(body), Err(*err), "{}", String::from_utf8_lossy(body));
    }
}
