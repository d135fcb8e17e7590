//! DPoP in the session, in simulated time: the test plays the driver, the authorization
//! server and the MCP server, and checks every proof by decoding it and verifying its
//! signature with ring.

use super::*;
use crate::auth::oauth::dpop::tests::verify;
use crate::auth::oauth::{
    DpopKey, DpopMode, HttpResponse, MemoryStore, OAuthConfig, OAuthFlow, PreRegistered, Secret,
    StoredAuth, TokenStore, Tokens,
};
use crate::session::http::OAuthState;

const SERVER: &str = "https://mcp.test/mcp";
/// What the simulated driver gives as the MCP request's `htu`.
const HTU: &str = "http://127.0.0.1:9/mcp";
const UNIX: u64 = 1_800_000_000;
const CHALLENGE: &str =
    r#"DPoP resource_metadata="https://mcp.test/.well-known/oauth-protected-resource/mcp""#;
const NONCE_CHALLENGE: &str = r#"DPoP error="use_dpop_nonce", algs="ES256""#;

/// An authorization server that may offer DPoP and may demand nonces.
struct DpopAs {
    /// `dpop_signing_alg_values_supported`, if advertised.
    algs: Option<Value>,
    token_type: &'static str,
    /// How many token requests to answer with `use_dpop_nonce` first.
    demands: usize,
    /// Each token request's `DPoP` header, or `None`.
    proofs: Vec<Option<String>>,
    issued: usize,
    /// The token endpoint its metadata names.
    token_endpoint: &'static str,
}

impl DpopAs {
    fn new(algs: Option<Value>, token_type: &'static str) -> Self {
        let token_endpoint = "https://as.test/token?tenant=1";
        Self { algs, token_type, demands: 0, proofs: Vec::new(), issued: 0, token_endpoint }
    }

    fn answer(&mut self, req: &crate::auth::oauth::HttpRequest) -> (u16, Value, Option<String>) {
        if req.url.contains("oauth-protected-resource") {
            let prm = json!({"resource": SERVER, "authorization_servers": ["https://as.test"]});
            return (200, prm, None);
        }
        if req.url.contains("/.well-known/oauth-authorization-server") {
            let mut meta = json!({"issuer": "https://as.test",
                "token_endpoint": self.token_endpoint,
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"]});
            if let Some(algs) = &self.algs {
                meta["dpop_signing_alg_values_supported"] = algs.clone();
            }
            return (200, meta, None);
        }
        let endpoint = self.token_endpoint.split('?').next().unwrap_or_default();
        if req.url.starts_with(endpoint) {
            let proof = req.headers.iter().find(|(k, _)| *k == "DPoP").map(|(_, v)| v.clone());
            self.proofs.push(proof);
            let n = self.proofs.len();
            if self.demands > 0 {
                self.demands -= 1;
                let body = json!({"error": "use_dpop_nonce"});
                return (400, body, Some(format!("as-n{n}")));
            }
            self.issued += 1;
            let token = json!({"access_token": format!("tok-{}", self.issued),
                "token_type": self.token_type, "expires_in": 3600});
            return (200, token, Some(format!("as-n{n}")));
        }
        (404, json!({}), None)
    }
}

impl Sim {
    fn with_dpop(self, mode: DpopMode) -> Self {
        self.with_dpop_config(mode, Box::<MemoryStore>::default(), None)
    }

    fn with_dpop_config(
        mut self,
        mode: DpopMode,
        store: Box<dyn TokenStore>,
        key: Option<DpopKey>,
    ) -> Self {
        let client = PreRegistered::with_secret("id", "secret");
        let mut config = OAuthConfig::client_credentials(SERVER, client).dpop(mode).store(store);
        config.dpop_key = key;
        let flow = OAuthFlow::new(config, self.now, UNIX).unwrap();
        self.session.with_oauth(self.now, OAuthState::new(flow, None));
        self
    }

    /// Plays the driver for the flow's requests until it has none; returns how many.
    fn run_dpop_flow(&mut self, server: &mut DpopAs) -> usize {
        let mut n = 0;
        while let Some(req) = self.session.poll_oauth_request() {
            n += 1;
            let (status, body, nonce) = server.answer(&req);
            let body = body.to_string();
            let response = HttpResponse {
                dpop_nonce: nonce.as_deref().map(str::as_bytes),
                ..HttpResponse::new(status, body.as_bytes())
            };
            let answer = OAuthAnswer::Response(response);
            self.session.handle_event(
                &mut self.engine,
                self.now,
                SessionEvent::OAuth(req.id, answer),
            );
        }
        n
    }

    /// A call refused for want of a token, then the flow run: the call's resend.
    fn authorized_call(&mut self, name: &str, server: &mut DpopAs) -> Sent {
        self.call(name);
        let first = self.next().unwrap();
        assert_eq!(first.header("authorization"), None, "no token yet");
        self.respond(first.x, 401, &[("WWW-Authenticate", CHALLENGE)], "");
        self.run_dpop_flow(server);
        self.next().unwrap()
    }
}

/// The proof a request carries: its header and claims, the signature checked.
fn proof_of(sent: &Sent) -> (Value, Value) {
    verify(sent.header("dpop").expect("a DPoP header"))
}

fn ath(token: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = Vec::new();
    crate::codec::base64::url_safe_into(&mut out, digest.as_ref());
    String::from_utf8(out).unwrap()
}

fn es256() -> Option<Value> {
    Some(json!(["ES256"]))
}

/// The token request's proof names the endpoint as the request goes (RFC 9449 4.2): the
/// metadata's spelling (`https://AS.test:443/token`) normalised as the driver normalises the
/// request line and `Host`. It kept the spelling, and a server comparing `htu` exactly with
/// the request refused the proof.
#[test]
fn the_token_requests_proof_names_the_endpoint_as_the_request_goes() {
    let mut s = Sim::modern().with_dpop(DpopMode::IfSupported);
    let mut server = DpopAs::new(es256(), "DPoP");
    server.token_endpoint = "https://AS.test:443/token?tenant=1";
    s.authorized_call("a", &mut server);
    let (_, claims) = verify(server.proofs[0].as_deref().expect("a proof"));
    assert_eq!(claims["htu"], "https://as.test/token");
}

#[test]
fn a_dpop_token_goes_with_the_dpop_scheme_and_a_fresh_proof_on_every_request() {
    let mut s = Sim::modern().with_dpop(DpopMode::IfSupported);
    let mut server = DpopAs::new(es256(), "DPoP");
    let a = s.authorized_call("a", &mut server);
    // The token request's proof: POST to the token endpoint without its query, no ath.
    let token_proof = server.proofs[0].as_deref().expect("the token request has a proof");
    let (token_header, token_claims) = verify(token_proof);
    assert_eq!(token_header["typ"], "dpop+jwt");
    assert_eq!(token_header["alg"], "ES256");
    assert_eq!(token_claims["htm"], "POST");
    assert_eq!(token_claims["htu"], "https://as.test/token");
    assert_eq!(token_claims["iat"], UNIX);
    assert!(token_claims.get("ath").is_none() && token_claims.get("nonce").is_none());
    // The MCP request: the DPoP scheme, a proof by the same key with ath for the token.
    assert_eq!(a.header("authorization"), Some("DPoP tok-1"));
    let (header, claims) = proof_of(&a);
    assert_eq!(header["jwk"], token_header["jwk"], "one key for the token and its use");
    assert_eq!(claims["htm"], "POST");
    assert_eq!(claims["htu"], HTU);
    assert_eq!(claims["ath"], ath("tok-1"));
    assert_eq!(claims["iat"], UNIX);
    s.json(a.x, reply(&a, json!({"content": []})));
    // Later, another call: a new proof, its iat from the simulated clock.
    s.advance(Duration::from_secs(100));
    s.call("b");
    let b = s.next().unwrap();
    assert_eq!(b.header("authorization"), Some("DPoP tok-1"));
    let (_, later) = proof_of(&b);
    assert_eq!(later["iat"], UNIX + 100);
    assert_ne!(later["jti"], claims["jti"], "a fresh jti on every request");
    assert_eq!(later["ath"], claims["ath"]);
    s.json(b.x, reply(&b, json!({"content": []})));
    let events = s.events();
    assert_eq!(events.iter().filter(|e| e.starts_with("done")).count(), 2, "{events:?}");
    assert_eq!(server.proofs.len(), 1, "one token request");
}

#[test]
fn the_token_endpoints_nonce_demand_is_met_once() {
    let mut s = Sim::modern().with_dpop(DpopMode::IfSupported);
    let mut server = DpopAs::new(es256(), "DPoP");
    server.demands = 1;
    let a = s.authorized_call("a", &mut server);
    assert_eq!(server.proofs.len(), 2, "the token request went again once");
    let (_, first) = verify(server.proofs[0].as_deref().unwrap());
    let (_, second) = verify(server.proofs[1].as_deref().unwrap());
    assert!(first.get("nonce").is_none());
    assert_eq!(second["nonce"], "as-n1", "the retry carries the server's nonce");
    assert_ne!(first["jti"], second["jti"]);
    assert_eq!(a.header("authorization"), Some("DPoP tok-1"));
    s.json(a.x, reply(&a, json!({"content": []})));
    assert!(s.events()[0].starts_with("done"));
}

#[test]
fn the_token_endpoints_second_nonce_demand_fails_the_flow() {
    let mut s = Sim::modern().with_dpop(DpopMode::IfSupported);
    let mut server = DpopAs::new(es256(), "DPoP");
    server.demands = 2;
    s.call("a");
    let a = s.next().unwrap();
    s.respond(a.x, 401, &[("WWW-Authenticate", CHALLENGE)], "");
    assert_eq!(s.run_dpop_flow(&mut server), 4, "PRM, metadata, token, token once more");
    assert_eq!(server.proofs.len(), 2, "not a third time");
    let events = s.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].starts_with("failed") && events[0].contains("use_dpop_nonce"), "{events:?}");
}

#[test]
fn the_mcp_servers_nonce_demand_is_met_once_and_the_nonce_kept() {
    let mut s = Sim::modern().with_dpop(DpopMode::IfSupported);
    let mut server = DpopAs::new(es256(), "DPoP");
    let a = s.authorized_call("a", &mut server);
    let nonce_refusal =
        |nonce: &'static str| [("WWW-Authenticate", NONCE_CHALLENGE), ("DPoP-Nonce", nonce)];
    s.respond(a.x, 401, &nonce_refusal("rs-n1"), "");
    assert!(s.session.poll_oauth_request().is_none(), "a nonce demand runs no flow");
    let again = s.next().unwrap();
    assert_eq!(again.body["params"]["name"], "a");
    assert_eq!(again.header("authorization"), Some("DPoP tok-1"));
    let (_, claims) = proof_of(&again);
    assert_eq!(claims["nonce"], "rs-n1");
    s.json(again.x, reply(&again, json!({"content": []})));
    assert!(s.events()[0].starts_with("done"));
    // The next request carries the nonce kept; a new demand is met once, not twice.
    s.call("b");
    let b = s.next().unwrap();
    assert_eq!(proof_of(&b).1["nonce"], "rs-n1");
    s.respond(b.x, 401, &nonce_refusal("rs-n2"), "");
    let b2 = s.next().unwrap();
    assert_eq!(proof_of(&b2).1["nonce"], "rs-n2");
    s.respond(b2.x, 401, &nonce_refusal("rs-n3"), "");
    assert!(s.next().is_none(), "no third send");
    assert!(s.session.poll_oauth_request().is_none(), "and no flow");
    let events = s.events();
    assert!(events[0].starts_with("failed") && events[0].contains("use_dpop_nonce"), "{events:?}");
    // A nonce that came with a success is kept too.
    s.call("c");
    let c = s.next().unwrap();
    assert_eq!(proof_of(&c).1["nonce"], "rs-n3");
    let body = reply(&c, json!({"content": []})).to_string();
    let ok = [("Content-Type", "application/json"), ("DPoP-Nonce", "rs-n4")];
    s.respond(c.x, 200, &ok, &body);
    s.call("d");
    let d = s.next().unwrap();
    assert_eq!(proof_of(&d).1["nonce"], "rs-n4");
}

#[test]
fn without_server_support_if_supported_stays_with_bearer_tokens() {
    let mut s = Sim::modern().with_dpop(DpopMode::IfSupported);
    let mut server = DpopAs::new(None, "Bearer");
    let a = s.authorized_call("a", &mut server);
    assert_eq!(server.proofs, [None], "no proof to a server that does not offer DPoP");
    assert_eq!(a.header("authorization"), Some("Bearer tok-1"));
    assert_eq!(a.header("dpop"), None);
    // A nonce demand to a bearer token cannot be met: the call fails with the server's 401.
    s.respond(a.x, 401, &[("WWW-Authenticate", NONCE_CHALLENGE), ("DPoP-Nonce", "n")], "");
    assert!(s.session.poll_oauth_request().is_none());
    let events = s.events();
    assert!(events[0].starts_with("failed"), "{events:?}");
}

#[test]
fn required_dpop_refuses_an_unbound_token_and_a_server_without_es256() {
    let mut s = Sim::modern().with_dpop(DpopMode::Required);
    let mut server = DpopAs::new(es256(), "Bearer");
    s.call("a");
    let a = s.next().unwrap();
    s.respond(a.x, 401, &[("WWW-Authenticate", CHALLENGE)], "");
    s.run_dpop_flow(&mut server);
    assert!(server.proofs[0].is_some(), "the token request had a proof");
    let events = s.events();
    assert!(events[0].contains("DpopUnbound"), "{events:?}");

    let mut s = Sim::modern().with_dpop(DpopMode::Required);
    let mut server = DpopAs::new(Some(json!(["RS256"])), "DPoP");
    s.call("a");
    let a = s.next().unwrap();
    s.respond(a.x, 401, &[("WWW-Authenticate", CHALLENGE)], "");
    s.run_dpop_flow(&mut server);
    assert!(server.proofs.is_empty(), "no token request");
    let events = s.events();
    assert!(events[0].contains("DpopAlgorithm"), "{events:?}");
}

#[test]
fn the_legacy_get_stream_and_delete_carry_proofs_with_their_methods() {
    let mut s = Sim::legacy(None).with_dpop(DpopMode::IfSupported);
    let mut server = DpopAs::new(es256(), "DPoP");
    let a = s.authorized_call("a", &mut server);
    assert_eq!(proof_of(&a).1["htm"], "POST");
    s.json(a.x, reply(&a, json!({"content": []})));
    let (method, headers) = s
        .session
        .close(s.now, HTU, |plan| {
            let headers: Vec<(String, Vec<u8>)> =
                plan.headers.iter().map(|(n, v)| (n.as_str().to_owned(), v.to_vec())).collect();
            (plan.method.to_owned(), headers)
        })
        .expect("a legacy session to end");
    assert_eq!(method, "DELETE");
    let find = |name: &str| {
        headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_slice())
    };
    assert_eq!(find("authorization"), Some(&b"DPoP tok-1"[..]));
    let (_, claims) = verify(std::str::from_utf8(find("dpop").unwrap()).unwrap());
    assert_eq!(claims["htm"], "DELETE");
    assert_eq!(claims["ath"], ath("tok-1"));
    // The close that planned the `DELETE` forgot the session: there is none to end again.
    assert_eq!(s.session.session_id(), None);
    assert!(s.session.close(s.now, HTU, |_| ()).is_none());
}

/// With DPoP required, a stored bearer token (saved by a run without DPoP, or against an
/// authorization server that bound nothing) is not presented: it was sent as
/// `Authorization: Bearer` on every request until the server refused it, where a run's own
/// token requests refuse an unbound token. With DPoP merely preferred it is used as before.
#[test]
fn a_stored_bearer_token_is_not_used_when_dpop_is_required() {
    let store = || {
        let mut store = MemoryStore::default();
        let tokens = Tokens {
            access_token: Secret::new("bearer"),
            refresh_token: None,
            expires_at: None,
            scope: None,
            dpop_jkt: None,
        };
        let auth =
            StoredAuth { issuer: "https://as.test".into(), client: None, tokens: Some(tokens) };
        store.save(SERVER, &auth);
        Box::new(store)
    };
    let mut s = Sim::modern().with_dpop_config(DpopMode::Required, store(), None);
    s.call("a");
    let a = s.next().unwrap();
    assert_eq!(a.header("authorization"), None, "no bearer token under DPoP required");
    let mut s = Sim::modern().with_dpop_config(DpopMode::Off, store(), None);
    s.call("a");
    let a = s.next().unwrap();
    assert_eq!(a.header("authorization"), Some("Bearer bearer"));
}

#[test]
fn a_stored_dpop_token_is_used_only_with_its_key() {
    let pem = crate::auth::oauth::dpop::tests::es256_pem();
    let jkt = DpopKey::from_pkcs8_pem(&pem).unwrap().thumbprint().to_owned();
    let store = || {
        let mut store = MemoryStore::default();
        let tokens = Tokens {
            access_token: Secret::new("kept"),
            refresh_token: None,
            expires_at: None,
            scope: None,
            dpop_jkt: Some(jkt.clone()),
        };
        let auth =
            StoredAuth { issuer: "https://as.test".into(), client: None, tokens: Some(tokens) };
        store.save(SERVER, &auth);
        Box::new(store)
    };
    // The host's key again (a restart): the token is used from the first request.
    let key = DpopKey::from_pkcs8_pem(&pem).unwrap();
    let mut s = Sim::modern().with_dpop_config(DpopMode::IfSupported, store(), Some(key));
    s.call("a");
    let a = s.next().unwrap();
    assert_eq!(a.header("authorization"), Some("DPoP kept"));
    assert_eq!(proof_of(&a).1["ath"], ath("kept"));
    // A generated key, or DPoP off: the token cannot be presented, so it is not.
    for mode in [DpopMode::IfSupported, DpopMode::Off] {
        let mut s = Sim::modern().with_dpop_config(mode, store(), None);
        s.call("a");
        let a = s.next().unwrap();
        assert_eq!(a.header("authorization"), None, "{mode:?}");
        assert_eq!(a.header("dpop"), None);
    }
}
