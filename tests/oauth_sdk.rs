//! The official MCP Python SDK v2 as the protected resource (its own bearer middleware, 401
//! with `resource_metadata`, its Protected Resource Metadata), the test's own authorization
//! server on loopback, and the real `HttpDriver` running OAuth between them: the client
//! credentials grant, then the authorization code grant with dynamic registration.

mod common;

use std::sync::{Arc, Mutex, OnceLock};

use common::mini::{authorize_redirect, registered, MiniServer, Request, Response};
use common::{peers_dir, raw, HttpPeer};
use mcpoll::oauth::{AuthorizeError, Authorizer, OAuthConfig, PreRegistered};
use mcpoll::{CallOptions, Config, Host, HttpOptions, ServerState};

const TOKEN: &str = "tok-sdk";
const REDIRECT: &str = "http://127.0.0.1:9/cb";

/// Both grants: client credentials for `id:secret` (HTTP Basic), and the authorization code
/// grant with registration; `/authorize` redirects at once with code `c1`.
fn authorization_server() -> MiniServer {
    let issuer: Arc<OnceLock<String>> = Arc::default();
    let issuer2 = Arc::clone(&issuer);
    let server = MiniServer::start(None, move |req: &Request| {
        let issuer = issuer2.get().cloned().unwrap_or_default();
        let path = req.path.split('?').next().unwrap_or_default();
        let token = || {
            Response::json(serde_json::json!({
                "access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600}))
        };
        match (req.method.as_str(), path) {
            ("GET", "/.well-known/oauth-authorization-server") => {
                Response::json(serde_json::json!({
                    "issuer": issuer,
                    "authorization_endpoint": format!("{issuer}/authorize"),
                    "token_endpoint": format!("{issuer}/token"),
                    "registration_endpoint": format!("{issuer}/register"),
                    "response_types_supported": ["code"],
                    "grant_types_supported": ["authorization_code", "client_credentials"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"]}))
            }
            ("GET", "/authorize") => authorize_redirect(req, REDIRECT, ""),
            ("POST", "/register") => registered(),
            ("POST", "/token")
                if req.body.contains("grant_type=client_credentials")
                    && req.header("authorization") == Some("Basic aWQ6c2VjcmV0") =>
            {
                token()
            }
            ("POST", "/token") if req.body.contains("code=c1") => token(),
            _ => {
                let mut r = Response::json(serde_json::json!({"error": "invalid_request"}));
                r.status = 400;
                r
            }
        }
    });
    let _ = issuer.set(format!("http://127.0.0.1:{}", server.port));
    server
}

/// A headless user: reads the redirect off the authorization server's 302.
#[derive(Debug, Default)]
struct Follow(Arc<Mutex<Vec<String>>>);

impl Authorizer for Follow {
    fn authorize(&mut self, url: &str) -> Result<String, AuthorizeError> {
        use std::io::{Read, Write};
        self.0.lock().unwrap().push(url.to_owned());
        let io = |e: std::io::Error| AuthorizeError::Io(e.kind());
        let rest = url.strip_prefix("http://").ok_or(AuthorizeError::NoRedirect)?;
        let (authority, target) = rest.split_at(rest.find('/').ok_or(AuthorizeError::NoRedirect)?);
        let mut s = std::net::TcpStream::connect(authority).map_err(io)?;
        write!(s, "GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n")
            .map_err(io)?;
        // Up to the end of the head: the test server keeps the connection open.
        let mut head = String::new();
        let mut buf = [0u8; 4096];
        while !head.contains("\r\n\r\n") {
            let n = s.read(&mut buf).map_err(io)?;
            if n == 0 {
                return Err(AuthorizeError::NoRedirect);
            }
            head.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        let location = head.lines().find_map(|l| l.strip_prefix("Location: "));
        location.map(|l| l.trim().to_owned()).ok_or(AuthorizeError::NoRedirect)
    }
}

fn echo_through(host: &mut Host, opts: HttpOptions, text: &str) {
    let id = host.add_http_server(opts, Config::default()).unwrap();
    let state = host.wait_ready(id, common::PATIENCE).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{state}");
    let args = raw(&format!(r#"{{"text":"{text}"}}"#));
    let out = host.call_tool_blocking(id, "echo", &args, &CallOptions::default()).expect("echo");
    assert!(out.json.contains(text), "{}", out.json);
}

#[test]
fn the_python_sdks_protected_server_is_reached_with_both_grants() {
    let Some(dir) = peers_dir() else { return };
    let auth = authorization_server();
    // The only test in this binary: the peer reads the issuer from its environment.
    std::env::set_var("MCPOLL_AUTH_ISSUER", format!("http://127.0.0.1:{}", auth.port));
    std::env::set_var("MCPOLL_AUTH_TOKEN", TOKEN);
    let peer = HttpPeer::start(&dir, "run-py-auth-http.sh");
    let url = peer.url();
    let mut host = Host::new().unwrap();

    let client = PreRegistered::with_secret("id", "secret");
    let opts = HttpOptions::new(url.clone()).oauth(OAuthConfig::client_credentials(&url, client));
    echo_through(&mut host, opts, "as a machine");
    let seen: Vec<String> =
        auth.requests().iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    assert_eq!(seen, ["GET /.well-known/oauth-authorization-server", "POST /token"]);

    let urls = Arc::default();
    let opts = HttpOptions::new(url.clone())
        .oauth(OAuthConfig::authorization_code(&url, REDIRECT))
        .authorizer(Box::new(Follow(Arc::clone(&urls))));
    echo_through(&mut host, opts, "as a user");
    let urls = urls.lock().unwrap().clone();
    assert_eq!(urls.len(), 1);
    // The resource indicator is the URL the SDK's PRM names.
    let resource = url.replace(':', "%3A").replace('/', "%2F");
    assert!(urls[0].contains(&format!("resource={resource}")), "{}", urls[0]);
    drop(peer);
}
