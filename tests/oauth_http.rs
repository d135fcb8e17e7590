//! The HTTP driver running OAuth by itself: a protected MCP endpoint and an authorization
//! server, both in the test on loopback; the host only configures the client credentials.

mod common;

use std::sync::{Arc, OnceLock};

use common::mini::{mcp_answer, MiniProxy, MiniServer, Request, Response};
use common::raw;
use mcpoll::oauth::{AuthStep, OAuthConfig, PreRegistered};
use mcpoll::{CallError, CallOptions, Config, Host, HttpOptions, PeerError, ServerState};
use mcpoll::{ProxyChoice, TlsOptions};

const TOKEN: &str = "tok-from-as";

/// An authorization server for the client credentials grant: its metadata on GET, tokens on
/// POST for `id:secret` (HTTP Basic, `aWQ6c2VjcmV0`).
fn authorization_server() -> MiniServer {
    authorization_server_on(None, "http://127.0.0.1")
}

/// The same over TLS (`tls`) with the issuer `base:PORT`.
fn authorization_server_on(tls: Option<Arc<rustls::ServerConfig>>, base: &str) -> MiniServer {
    let issuer: Arc<OnceLock<String>> = Arc::default();
    let issuer2 = Arc::clone(&issuer);
    let server = MiniServer::start(tls, move |req: &Request| {
        let issuer = issuer2.get().cloned().unwrap_or_default();
        if req.method == "GET" {
            return Response::json(serde_json::json!({
                "issuer": issuer, "token_endpoint": format!("{issuer}/token"),
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"]}));
        }
        let form_ok = req.body.contains("grant_type=client_credentials");
        if !form_ok || req.header("authorization") != Some("Basic aWQ6c2VjcmV0") {
            let mut r = Response::json(serde_json::json!({"error": "invalid_client"}));
            r.status = 401;
            return r;
        }
        Response::json(serde_json::json!({
            "access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600}))
    });
    let _ = issuer.set(format!("{base}:{}", server.port));
    server
}

/// A CA and a certificate for `localhost` signed by it; the CA file for the client.
fn localhost_tls(dir: &std::path::Path) -> (Arc<rustls::ServerConfig>, TlsOptions) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    std::fs::create_dir_all(dir).unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    let cert = params.signed_by(&key, &Issuer::from_params(&ca_params, &ca_key)).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    #[allow(deprecated)] // ring, as src/driver/tls.rs says why
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .unwrap();
    let trust = TlsOptions { ca_file: Some(dir.join("ca.pem")), ..TlsOptions::default() };
    (Arc::new(config), trust)
}

/// An MCP endpoint that refuses any request without the token, pointing at its Protected
/// Resource Metadata (served on GET), which names `as_url` as its authorization server.
fn protected_mcp(as_url: String) -> MiniServer {
    let port: Arc<OnceLock<u16>> = Arc::default();
    let port2 = Arc::clone(&port);
    let server = MiniServer::start(None, move |req: &Request| {
        let base = format!("http://127.0.0.1:{}", port2.get().copied().unwrap_or_default());
        if req.method == "GET" {
            return Response::json(serde_json::json!({
                "resource": format!("{base}/mcp"), "authorization_servers": [as_url]}));
        }
        if req.header("authorization") == Some(&format!("Bearer {TOKEN}")) {
            return mcp_answer(req);
        }
        let challenge = format!(
            r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
        );
        Response {
            status: 401,
            headers: vec![("WWW-Authenticate".into(), challenge)],
            body: String::new(),
        }
    });
    let _ = port.set(server.port);
    server
}

fn options(mcp: &MiniServer, secret: &str) -> HttpOptions {
    let url = mcp.url("http", "127.0.0.1");
    let client = PreRegistered::with_secret("id", secret);
    HttpOptions::new(url.clone()).oauth(OAuthConfig::client_credentials(url, client))
}

#[test]
fn client_credentials_are_obtained_and_sent_without_the_host_driving_anything() {
    let auth = authorization_server();
    let mcp = protected_mcp(format!("http://127.0.0.1:{}", auth.port));
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(options(&mcp, "secret"), Config::default()).unwrap();
    let state = host.wait_ready(id, common::PATIENCE).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{state}");
    let args = raw(r#"{"text":"authorized"}"#);
    let r = host.call_tool_blocking(id, "echo", &args, &CallOptions::default()).expect("call");
    assert!(r.json.contains("authorized"), "{}", r.json);

    let to_as = auth.requests();
    assert_eq!(to_as.iter().map(|r| r.method.as_str()).collect::<Vec<_>>(), ["GET", "POST"]);
    let to_mcp = mcp.requests();
    let posts: Vec<Option<&str>> =
        to_mcp.iter().filter(|r| r.method == "POST").map(|r| r.header("authorization")).collect();
    let bearer = format!("Bearer {TOKEN}");
    // The probe is refused once, then it and the call carry the token.
    assert_eq!(posts, [None, Some(bearer.as_str()), Some(bearer.as_str())]);
    assert_eq!(to_mcp.iter().filter(|r| r.method == "GET").count(), 1, "one PRM fetch");
}

/// The OAuth token goes on every request to whichever instance is current: an alternate
/// reached in clear on a remote host would get it (and the session) after a failover, so
/// such a server is refused at setup, as a cleartext `server_url` is.
#[test]
fn an_oauth_server_with_a_cleartext_remote_alternate_is_refused() {
    let url = "https://mcp.example.com/mcp";
    let client = || PreRegistered::with_secret("id", "secret");
    let opts = |alt: &str| {
        HttpOptions::new(url).alternate(alt).oauth(OAuthConfig::client_credentials(url, client()))
    };
    let mut host = Host::new().unwrap();
    match host.add_http_server(opts("http://10.0.0.7/mcp"), Config::default()) {
        Err(mcpoll::AddServerError::Http(mcpoll::HttpSetupError::OAuth(e))) => {
            assert_eq!(e.reason, mcpoll::oauth::AuthFailure::CleartextResource)
        }
        other => panic!("{other:?}"),
    }
    assert!(host.add_http_server(opts("https://10.0.0.7/mcp"), Config::default()).is_ok());
    assert!(host.add_http_server(opts("http://127.0.0.1:9/mcp"), Config::default()).is_ok());
}

#[test]
fn debug_output_never_shows_the_client_secret() {
    let url = "http://127.0.0.1:1/mcp";
    let client = PreRegistered::with_secret("id", "s3cr3t-value");
    let opts = HttpOptions::new(url).oauth(OAuthConfig::client_credentials(url, client));
    let debug = format!("{opts:?}");
    assert!(debug.contains("client_credentials") || debug.contains("ClientCredentials"), "{debug}");
    assert!(!debug.contains("s3cr3t-value"), "{debug}");
}

#[test]
fn the_flow_reaches_an_https_authorization_server_through_the_proxy_with_its_own_name() {
    let dir = std::env::temp_dir().join(format!("mcpoll-oauth-pki-{}", std::process::id()));
    let (server_tls, trust) = localhost_tls(&dir);
    // The certificate names `localhost` only: the flow's connection must ask for that name,
    // not the MCP server's 127.0.0.1.
    let auth = authorization_server_on(Some(server_tls), "https://localhost");
    let mcp = protected_mcp(format!("https://localhost:{}", auth.port));
    let proxy = MiniProxy::start();
    let mut opts = options(&mcp, "secret");
    opts.tls = trust;
    opts.proxy = ProxyChoice::Url(format!("http://127.0.0.1:{}", proxy.port));
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(opts, Config::default()).unwrap();
    let state = host.wait_ready(id, common::PATIENCE).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{state}");
    assert_eq!(auth.requests().len(), 2, "metadata and token, over TLS");
    let targets = proxy.targets.lock().unwrap().clone();
    let as_authority = format!("localhost:{}", auth.port);
    assert_eq!(targets.iter().filter(|t| **t == as_authority).count(), 2, "{targets:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_refused_client_fails_with_the_step_and_the_oauth_error() {
    let auth = authorization_server();
    let mcp = protected_mcp(format!("http://127.0.0.1:{}", auth.port));
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(options(&mcp, "wrong"), Config::default()).unwrap();
    match common::refused_with(&mut host, id) {
        CallError::Peer(PeerError::Authorization(e)) => {
            assert_eq!(e.step, AuthStep::Token);
            assert_eq!(e.status, Some(401));
            assert_eq!(e.error.as_deref(), Some("invalid_client"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_cli_takes_client_credentials() {
    let auth = authorization_server();
    let mcp = protected_mcp(format!("http://127.0.0.1:{}", auth.port));
    let url = mcp.url("http", "127.0.0.1");
    let run = |credentials: &str| {
        let args = ["--json", "--http", &url, "--client-credentials", credentials, "call", "echo"];
        let out = std::process::Command::new(common::cli())
            .args(args)
            .arg(r#"{"text":"via cli"}"#)
            .output()
            .expect("run mcpoll");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), stdout, stderr)
    };
    let (code, stdout, stderr) = run("id:secret");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("via cli"), "{stdout}");
    let (code, _, stderr) = run("id:wrong");
    assert_eq!(code, Some(1));
    let line: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(line["error"]["name"], "authorization", "{stderr}");
    assert!(line["error"]["message"].as_str().unwrap().contains("invalid_client"), "{stderr}");
    assert!(!stderr.contains("wrong"), "the secret is never printed: {stderr}");
}

/// An authorization server for the authorization code grant with dynamic registration: its
/// metadata on GET; on POST, a registration (JSON) or a token request for code `c1`.
fn code_server() -> MiniServer {
    let issuer: Arc<OnceLock<String>> = Arc::default();
    let issuer2 = Arc::clone(&issuer);
    let server = MiniServer::start(None, move |req: &Request| {
        let issuer = issuer2.get().cloned().unwrap_or_default();
        if req.method == "GET" {
            return Response::json(serde_json::json!({
                "issuer": issuer, "authorization_endpoint": format!("{issuer}/authorize"),
                "token_endpoint": format!("{issuer}/token"),
                "registration_endpoint": format!("{issuer}/register"),
                "code_challenge_methods_supported": ["S256"],
                "response_types_supported": ["code"],
                "token_endpoint_auth_methods_supported": ["none"]}));
        }
        if req.body.starts_with('{') {
            let mut r = Response::json(serde_json::json!({
                "client_id": "dyn-1", "token_endpoint_auth_method": "none"}));
            r.status = 201;
            return r;
        }
        if req.body.contains("grant_type=authorization_code") && req.body.contains("code=c1") {
            return Response::json(serde_json::json!({
                "access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600}));
        }
        let mut r = Response::json(serde_json::json!({"error": "invalid_grant"}));
        r.status = 400;
        r
    });
    let _ = issuer.set(format!("http://127.0.0.1:{}", server.port));
    server
}

#[test]
fn the_cli_prints_the_authorization_url_and_takes_the_redirect_on_stdin() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let auth = code_server();
    let mcp = protected_mcp(format!("http://127.0.0.1:{}", auth.port));
    let url = mcp.url("http", "127.0.0.1");
    let mut child = std::process::Command::new(common::cli())
        .args(["--http", &url, "--oauth", "--redirect-uri", "http://127.0.0.1:9/cb"])
        .args(["call", "echo", r#"{"text":"as a user"}"#])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mcpoll");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let authorize = format!("http://127.0.0.1:{}/authorize?", auth.port);
    let mut line = String::new();
    let printed = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no authorization URL printed");
        if let Some(at) = line.find(&authorize) {
            break line[at..].trim().to_owned();
        }
    };
    assert!(printed.contains("client_id=dyn-1"), "{printed}");
    assert!(printed.contains("code_challenge_method=S256"), "{printed}");
    let state = printed
        .split(['?', '&'])
        .find_map(|p| p.strip_prefix("state="))
        .expect("a state parameter")
        .to_owned();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "http://127.0.0.1:9/cb?code=c1&state={state}").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    assert!(out.status.success(), "{stdout} {rest}");
    assert!(stdout.contains("as a user"), "{stdout}");
}

/// A configuration file's `mcpoll.oauth` runs the same flow through `Host::from_config`. (A
/// shared file would name the secret as `${VAR}`; the expansion has its own unit tests, and
/// this test leaves the process environment alone, since other tests run beside it.)
#[test]
fn a_config_files_client_credentials_run_the_flow() {
    let auth = authorization_server();
    let mcp = protected_mcp(format!("http://127.0.0.1:{}", auth.port));
    let dir = std::env::temp_dir().join(format!("mcpoll-oauth-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mcp.json");
    let file = serde_json::json!({"mcpServers": {"protected": {
        "url": mcp.url("http", "127.0.0.1"),
        "mcpoll": {"oauth": {"clientId": "id", "clientSecret": "secret"}}
    }}});
    std::fs::write(&path, file.to_string()).unwrap();
    let (mut host, names) = Host::from_config(&path).expect("from_config");
    let _ = std::fs::remove_dir_all(&dir);
    let id = names.get("protected").expect("named");
    let state = host.wait_ready(id, common::PATIENCE).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{state}");
    let args = raw(r#"{"text":"from the file"}"#);
    let r = host.call_tool_blocking(id, "echo", &args, &CallOptions::default()).expect("call");
    assert!(r.json.contains("from the file"), "{}", r.json);
    assert_eq!(auth.requests().iter().filter(|r| r.method == "POST").count(), 1, "one token");
}
