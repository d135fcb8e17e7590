//! DPoP (RFC 9449) through the HTTP driver and the CLI: an authorization server that binds
//! tokens to the proof's key and demands a nonce once, and an MCP endpoint that accepts only
//! `Authorization: DPoP` with a valid proof and demands its own nonce once. Both check every
//! proof's signature (ring), `htm`, `htu`, `ath` and `jti`, on loopback.

mod common;

use std::sync::{Arc, Mutex, OnceLock};

use common::counting::{allocs, Counting};
use common::mini::{mcp_answer, MiniServer, Request, Response};
use common::raw;
use mcpoll::oauth::{DpopMode, OAuthConfig, PreRegistered};
use mcpoll::{CallOptions, Config, Host, HttpOptions, ServerState};
use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};
use serde_json::{json, Value};

#[global_allocator]
static GLOBAL: Counting = Counting;

const TOKEN: &str = "dpop-bound-token";

fn b64url_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for b in text.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

fn b64url(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = c.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=c.len() {
            out.push(char::from(A[(n >> (18 - 6 * i)) as usize & 63]));
        }
    }
    out
}

/// A proof checked as a server would: typ, the signature by the key in its own header, the
/// method and URL. Returns the claims, or why it is refused.
fn check_proof(req: &Request, htu: &str) -> Result<Value, String> {
    let proof = req.header("dpop").ok_or("no DPoP header")?;
    let (input, sig) = proof.rsplit_once('.').ok_or("not a JWS")?;
    let (header, claims) = input.split_once('.').ok_or("not a JWS")?;
    let json = |s: &str| -> Result<Value, String> {
        serde_json::from_slice(&b64url_decode(s).ok_or("base64")?).map_err(|e| e.to_string())
    };
    let (header, claims) = (json(header)?, json(claims)?);
    if header["typ"] != "dpop+jwt" || header["alg"] != "ES256" {
        return Err(format!("header {header}"));
    }
    let coord = |c: &str| b64url_decode(header["jwk"][c].as_str().unwrap_or_default());
    let mut point = vec![4u8];
    point.extend(coord("x").ok_or("x")?);
    point.extend(coord("y").ok_or("y")?);
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
        .verify(input.as_bytes(), &b64url_decode(sig).ok_or("sig")?)
        .map_err(|_| "the signature does not verify")?;
    if claims["htm"] != req.method.as_str() || claims["htu"] != htu {
        return Err(format!("htm/htu {claims}"));
    }
    if !claims["jti"].is_string() || !claims["iat"].is_u64() {
        return Err(format!("jti/iat {claims}"));
    }
    Ok(claims)
}

/// What both servers saw.
#[derive(Default)]
struct Seen {
    token_requests: usize,
    nonce_demands_as: usize,
    nonce_demands_mcp: usize,
    jtis: Vec<String>,
    errors: Vec<String>,
}

fn error(status: u16, headers: Vec<(String, String)>, body: Value) -> Response {
    Response { status, headers, body: body.to_string() }
}

/// The authorization server: metadata offering ES256 proofs; the token endpoint wants a
/// proof, then its nonce, and grants a DPoP token to `id:secret`.
fn dpop_as(seen: Arc<Mutex<Seen>>) -> (MiniServer, String) {
    let issuer: Arc<OnceLock<String>> = Arc::default();
    let issuer2 = Arc::clone(&issuer);
    let server = MiniServer::start(None, move |req: &Request| {
        let issuer = issuer2.get().cloned().unwrap_or_default();
        if req.method == "GET" {
            return Response::json(json!({
                "issuer": issuer, "token_endpoint": format!("{issuer}/token"),
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                "dpop_signing_alg_values_supported": ["ES256"]}));
        }
        let mut seen = seen.lock().unwrap();
        seen.token_requests += 1;
        let claims = match check_proof(req, &format!("{issuer}/token")) {
            Ok(c) => c,
            Err(e) => {
                seen.errors.push(format!("token request: {e}"));
                return error(400, vec![], json!({"error": "invalid_dpop_proof"}));
            }
        };
        if claims["nonce"] != "as-nonce" {
            seen.nonce_demands_as += 1;
            let headers = vec![("DPoP-Nonce".into(), "as-nonce".into())];
            return error(400, headers, json!({"error": "use_dpop_nonce"}));
        }
        if req.header("authorization") != Some("Basic aWQ6c2VjcmV0") {
            return error(401, vec![], json!({"error": "invalid_client"}));
        }
        Response::json(json!({"access_token": TOKEN, "token_type": "DPoP", "expires_in": 3600}))
    });
    let url = format!("http://127.0.0.1:{}", server.port);
    let _ = issuer.set(url.clone());
    (server, url)
}

/// The MCP endpoint: only `DPoP <token>` with a proof for this token and URL, carrying its
/// nonce (asked for once with a 401).
fn dpop_mcp(as_url: String, seen: Arc<Mutex<Seen>>) -> MiniServer {
    let port: Arc<OnceLock<u16>> = Arc::default();
    let port2 = Arc::clone(&port);
    let server = MiniServer::start(None, move |req: &Request| {
        let base = format!("http://127.0.0.1:{}", port2.get().copied().unwrap_or_default());
        if req.method == "GET" {
            return Response::json(json!({
                "resource": format!("{base}/mcp"), "authorization_servers": [as_url]}));
        }
        let Some(token) = req.header("authorization").and_then(|a| a.strip_prefix("DPoP ")) else {
            let prm = format!(
                r#"DPoP resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
            );
            return error(401, vec![("WWW-Authenticate".into(), prm)], json!({}));
        };
        let mut seen = seen.lock().unwrap();
        let claims = match check_proof(req, &format!("{base}/mcp")) {
            Ok(c) => c,
            Err(e) => {
                seen.errors.push(format!("mcp request: {e}"));
                return error(401, vec![], json!({}));
            }
        };
        let ath = b64url(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
        if token != TOKEN || claims["ath"] != ath.as_str() {
            seen.errors.push(format!("mcp request: token or ath {claims}"));
        }
        let jti = claims["jti"].as_str().unwrap_or_default().to_owned();
        if seen.jtis.contains(&jti) {
            seen.errors.push(format!("a jti used twice: {jti}"));
        }
        seen.jtis.push(jti);
        if claims["nonce"] != "rs-nonce" {
            seen.nonce_demands_mcp += 1;
            let headers = vec![
                ("WWW-Authenticate".into(), r#"DPoP error="use_dpop_nonce""#.into()),
                ("DPoP-Nonce".into(), "rs-nonce".into()),
            ];
            return error(401, headers, json!({}));
        }
        mcp_answer(req)
    });
    let _ = port.set(server.port);
    server
}

fn servers() -> (Arc<Mutex<Seen>>, MiniServer, MiniServer) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (auth, as_url) = dpop_as(Arc::clone(&seen));
    let mcp = dpop_mcp(as_url, Arc::clone(&seen));
    (seen, auth, mcp)
}

#[test]
fn the_driver_gets_a_dpop_token_and_proves_every_request_meeting_both_nonces_once() {
    let (seen, _auth, mcp) = servers();
    let url = mcp.url("http", "127.0.0.1");
    let client = PreRegistered::with_secret("id", "secret");
    let oauth = OAuthConfig::client_credentials(url.clone(), client).dpop(DpopMode::Required);
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(url).oauth(oauth), Config::default()).unwrap();
    let state = host.wait_ready(id, common::PATIENCE).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{state}");
    for text in ["first", "second"] {
        let args = raw(&format!(r#"{{"text":"{text}"}}"#));
        let r = host.call_tool_blocking(id, "echo", &args, &CallOptions::default()).expect("call");
        assert!(r.json.contains(text), "{}", r.json);
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.errors, Vec::<String>::new());
    assert_eq!((seen.token_requests, seen.nonce_demands_as), (2, 1), "the token request once more");
    assert_eq!(seen.nonce_demands_mcp, 1, "the MCP nonce is asked for once and then kept");
    // The refused probe with its proof, its resend, and the two calls.
    assert_eq!(seen.jtis.len(), 4, "{:?}", seen.jtis);
}

#[test]
fn the_cli_takes_dpop_with_client_credentials() {
    let (seen, _auth, mcp) = servers();
    let url = mcp.url("http", "127.0.0.1");
    let out = std::process::Command::new(common::cli())
        .args(["--json", "--http", &url, "--client-credentials", "id:secret"])
        .args(["--dpop", "required", "call", "echo", r#"{"text":"via cli"}"#])
        .output()
        .expect("run mcpoll");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("via cli"), "{stdout}");
    assert_eq!(seen.lock().unwrap().errors, Vec::<String>::new());
    // Without an OAuth flow, --dpop is a usage error.
    let out = std::process::Command::new(common::cli())
        .args(["--http", &url, "--dpop", "required", "tools"])
        .output()
        .expect("run mcpoll");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The proof costs no allocation once warm: a DPoP call allocates no more than the same call
/// with a bearer token, through the same driver against the same kind of loopback server.
#[test]
fn a_dpop_call_allocates_no_more_than_a_bearer_call() {
    const CALLS: u64 = 20;
    let run = |host: &mut Host, id| {
        let args = raw(r#"{"text":"x"}"#);
        let opts = CallOptions::default();
        let before = allocs();
        for _ in 0..CALLS {
            host.call_tool_blocking(id, "echo", &args, &opts).expect("call");
        }
        allocs() - before
    };
    let start = |host: &mut Host, url: String, mode: DpopMode| {
        let client = PreRegistered::with_secret("id", "secret");
        let oauth = OAuthConfig::client_credentials(url.clone(), client).dpop(mode);
        let id = host.add_http_server(HttpOptions::new(url).oauth(oauth), Config::default());
        let id = id.unwrap();
        host.wait_ready(id, common::PATIENCE).unwrap();
        id
    };
    let (_seen, _auth, mcp) = servers();
    let (_auth2, bearer_mcp) = common::mini::client_credentials_servers("127.0.0.1");
    let mut host = Host::new().unwrap();
    let dpop = start(&mut host, mcp.url("http", "127.0.0.1"), DpopMode::Required);
    let bearer = start(&mut host, bearer_mcp.url("http", "127.0.0.1"), DpopMode::Off);
    // Warm up both (buffers, connections, the nonce).
    run(&mut host, dpop);
    run(&mut host, bearer);
    let with_dpop = run(&mut host, dpop);
    let with_bearer = run(&mut host, bearer);
    eprintln!("allocations for {CALLS} calls: DPoP {with_dpop}, bearer {with_bearer}");
    assert!(with_dpop <= with_bearer, "DPoP {with_dpop} > bearer {with_bearer}");
}
