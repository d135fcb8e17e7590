//! The HTTP driver's TLS, proxy and authorization paths, against small in-test servers on
//! loopback (certificates made by rcgen in the test).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::mini::{mcp_answer, MiniProxy, MiniServer, Request, Response};
use common::{closed_with, raw, refused_with};
use mcpoll::AddServerError;
use mcpoll::ProxyChoice;
use mcpoll::TlsFailure;
use mcpoll::TlsOptions;
use mcpoll::{CallError, CallOptions, Config, Host, PeerError, ServerState, TransportError};
use mcpoll::{HttpOptions, TokenProvider};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

struct Pki {
    dir: std::path::PathBuf,
    ca_der: CertificateDer<'static>,
    ca_params: CertificateParams,
    ca_key: KeyPair,
}

impl Pki {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("mcpoll-pki-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        Self { dir, ca_der: ca.der().clone(), ca_params, ca_key }
    }

    /// A leaf certificate for `names`, signed by the CA; also written as PEM files `NAME.pem`
    /// and `NAME.key`.
    fn leaf(
        &self,
        file: &str,
        names: &[&str],
    ) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        let issuer = Issuer::from_params(&self.ca_params, &self.ca_key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        std::fs::write(self.dir.join(format!("{file}.pem")), cert.pem()).unwrap();
        std::fs::write(self.dir.join(format!("{file}.key")), key.serialize_pem()).unwrap();
        (cert.der().clone(), PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())))
    }

    fn server_config(
        &self,
        names: &[&str],
        require_client_cert: bool,
    ) -> Arc<rustls::ServerConfig> {
        self.server_config_of(names, require_client_cert, rustls::DEFAULT_VERSIONS)
    }

    fn server_config_of(
        &self,
        names: &[&str],
        require_client_cert: bool,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> Arc<rustls::ServerConfig> {
        let (cert, key) = self.leaf("server", names);
        #[allow(deprecated)] // ring, as src/driver/tls.rs says why
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(versions)
            .unwrap();
        let builder = if require_client_cert {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(self.ca_der.clone()).unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        Arc::new(builder.with_single_cert(vec![cert], key).unwrap())
    }

    fn trust(&self) -> TlsOptions {
        TlsOptions { ca_file: Some(self.dir.join("ca.pem")), ..TlsOptions::default() }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn add(host: &mut Host, opts: HttpOptions) -> mcpoll::ServerId {
    host.add_http_server(opts, Config::default()).expect("add")
}

fn echo(host: &mut Host, id: mcpoll::ServerId, text: &str) -> serde_json::Value {
    let args = raw(&format!(r#"{{"text":"{text}"}}"#));
    let r = host.call_tool_blocking(id, "echo", &args, &CallOptions::default()).expect("call");
    serde_json::from_str(&r.json).unwrap()
}

/// Reads one request head from a raw connection: its `Content-Length` (0 when none), or
/// `None` at the end of the connection.
fn read_head(r: &mut std::io::BufReader<std::net::TcpStream>) -> Option<usize> {
    use std::io::BufRead;
    let mut length = 0;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        if line == "\r\n" {
            return Some(length);
        }
    }
}

/// Accepts the client's connection on a raw server and answers its era probe: the reading
/// side and the writing side of the connection, ready for the next request.
fn accept_ready(
    listener: &std::net::TcpListener,
) -> (std::io::BufReader<std::net::TcpStream>, std::net::TcpStream) {
    let (sock, _) = listener.accept().unwrap();
    let mut reader = std::io::BufReader::new(sock.try_clone().unwrap());
    let mut out = sock;
    answer_probe(&mut reader, &mut out);
    (reader, out)
}

/// Reads the era probe from a raw connection whole and answers it as a 2026-07-28 server.
fn answer_probe(
    reader: &mut std::io::BufReader<std::net::TcpStream>,
    out: &mut std::net::TcpStream,
) {
    use std::io::{Read, Write};
    let length = read_head(reader).unwrap();
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let probe = Request {
        method: "POST".into(),
        path: "/mcp".into(),
        headers: Vec::new(),
        body: String::from_utf8(body).unwrap(),
        at: std::time::Instant::now(),
    };
    let result = mcp_answer(&probe).body;
    let reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{result}",
        result.len()
    );
    out.write_all(reply.as_bytes()).unwrap();
}

/// A server that answers a request before it has read all of it (a 400 or 401 from a
/// middleware, the connection kept) would take the next request on that connection for the
/// rest of the first one's body: the connection is closed instead of reused, as HTTP/1.1 asks
/// of a client that did not finish sending.
#[test]
fn a_connection_answered_before_its_request_was_sent_is_not_reused() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (verdict, told) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut reader, mut out) = accept_ready(&listener);
        // The large call: its head only, then a refusal, the connection kept.
        read_head(&mut reader).unwrap();
        out.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n").unwrap();
        // What follows on this connection: the end of it, or the next request.
        let mut seen = Vec::new();
        let mut chunk = [0u8; 65536];
        let said = loop {
            match reader.read(&mut chunk) {
                Ok(0) | Err(_) => break "closed",
                Ok(n) => seen.extend_from_slice(&chunk[..n]),
            }
            if seen.windows(9).any(|w| w == b"POST /mcp") {
                break "reused";
            }
            let keep = seen.len().saturating_sub(8);
            seen.drain(..keep);
        };
        let _ = verdict.send(said);
    });
    let mut host = Host::new().unwrap();
    let mut opts = HttpOptions::new(format!("http://127.0.0.1:{port}/mcp"));
    opts.max_connections = 1;
    let id = add(&mut host, opts);
    assert!(matches!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Ready(..)));
    let big = raw(&format!(r#"{{"text":"{}"}}"#, "x".repeat(16 << 20)));
    let first = host.call_tool_blocking(id, "echo", &big, &CallOptions::default());
    assert!(first.is_err(), "refused: {first:?}");
    let _next = host.call_tool(id, "echo", &raw(r#"{"text":"y"}"#), &CallOptions::default());
    let deadline = std::time::Instant::now() + common::PATIENCE;
    let said = loop {
        host.poll(Some(Duration::from_millis(10))).unwrap();
        if let Ok(said) = told.try_recv() {
            break said;
        }
        assert!(std::time::Instant::now() < deadline, "the server saw neither");
    };
    assert_eq!(said, "closed", "the next request went on the half-sent connection");
}

/// A server that refuses a large request from its head (a 413, a 401) and closes without
/// reading the body resets the connection: the client's write fails (broken pipe, reset)
/// with the answer already in its receive queue. The call ends with that answer, not with a
/// lost connection (for a write: "delivery unknown", though the server said it refused it).
#[test]
fn an_answer_before_the_write_failed_is_read() {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut reader, mut out) = accept_ready(&listener);
        // The large call: its head only, then the refusal, and a close with the body unread
        // (the kernel answers the client's next bytes with a reset).
        read_head(&mut reader).unwrap();
        let refusal =
            "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        out.write_all(refusal.as_bytes()).unwrap();
    });
    let mut host = Host::new().unwrap();
    let mut opts = HttpOptions::new(format!("http://127.0.0.1:{port}/mcp"));
    opts.max_connections = 1;
    let id = add(&mut host, opts);
    assert!(matches!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Ready(..)));
    let big = raw(&format!(r#"{{"text":"{}"}}"#, "x".repeat(32 << 20)));
    let refused = host.call_tool_blocking(id, "echo", &big, &CallOptions::default());
    let Err(mcpoll::BlockingError::Call(error)) = refused else { panic!("{refused:?}") };
    assert_eq!(error, CallError::Transport(TransportError::HttpStatus(413)));
}

/// A request larger than rustls buffers at once (64 KiB) goes out whole over TLS, as over
/// plain HTTP: the rest is handed to TLS as it sends, not refused.
#[test]
fn a_large_request_goes_out_whole_over_tls() {
    let (_server, mut host, id) = ready_over_tls("large");
    let text = "x".repeat(200 * 1024);
    assert_eq!(echo(&mut host, id, &text)["content"][0]["text"], text.as_str());
}

/// A request larger than rustls takes while it handshakes (64 KiB), written on a new TLS 1.2
/// connection, goes out whole: the rest waited for a writable edge that never came once the
/// handshake ended inside a read (TLS 1.3's session ticket happens to bring another read), and
/// the call waited out its deadline.
#[test]
fn a_large_first_request_on_a_new_tls_1_2_connection_goes_out_whole() {
    let pki = Pki::new("tls12");
    let config = pki.server_config_of(&["localhost"], false, &[&rustls::version::TLS12]);
    let (server, mut host, id) = ready_with_no_idle_connection(&pki, config);
    let text = "x".repeat(200 * 1024);
    let args = raw(&format!(r#"{{"text":"{text}"}}"#));
    let o = CallOptions { timeout: Some(Duration::from_secs(10)), ..CallOptions::default() };
    let r = host.call_tool_blocking(id, "echo", &args, &o).expect("call");
    assert!(r.json.contains(&text));
    assert_eq!(server.accepted(), 2, "the call went on a new connection");
}

/// A 2026 `subscriptions/listen` stream, which lasts as long as the subscription, gets a
/// connection of its own, as the legacy GET stream does: on a pooled one it kept that
/// connection for good, and with a pool of one no call was sent again.
#[test]
fn a_listen_stream_takes_no_connection_of_the_pool() {
    let server = MiniServer::start(None, |req| {
        if req.json()["method"] == "subscriptions/listen" {
            return Response::stall();
        }
        mcp_answer(req)
    });
    let mut host = Host::new().unwrap();
    let mut opts = HttpOptions::new(server.url("http", "127.0.0.1"));
    opts.max_connections = 1;
    let id = add(&mut host, opts);
    assert!(matches!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Ready(..)));
    let filter = mcpoll::SubscriptionFilter { tools_list_changed: true, ..Default::default() };
    host.listen(id, &filter, &CallOptions::default()).unwrap();
    common::poll_until(&mut host, common::PATIENCE, |_| {
        server.requests().iter().any(|r| r.json()["method"] == "subscriptions/listen")
    });
    let o = CallOptions { timeout: Some(Duration::from_secs(10)), ..CallOptions::default() };
    let r = host.call_tool_blocking(id, "echo", &raw(r#"{"text":"beside"}"#), &o).expect("call");
    assert!(r.json.contains("beside"));
}

/// A connection cut during its TLS handshake carried no request (rustls sends none before
/// the handshake ends): a write on it was not delivered, and goes again on a new connection.
/// It was taken for a connection lost with the request on it, and the call ended at once as
/// `DeliveryUnknown`.
#[test]
fn a_write_whose_tls_handshake_is_cut_goes_again() {
    let pki = Pki::new("cut");
    let config = pki.server_config(&["localhost"], false);
    let (server, mut host, id) = ready_with_no_idle_connection(&pki, config);
    server.drop_next_connections(1);
    // A tool call without annotations: a write, resent only when surely not delivered.
    assert_eq!(echo(&mut host, id, "again")["content"][0]["text"], "again");
    assert_eq!(server.drops_to_come(), 0, "the call's first connection was cut");
}

/// Resolves every name to two addresses: one whose server never answers a TLS handshake, then
/// one that serves.
#[derive(Debug)]
struct SilentFirst {
    silent: u16,
    serving: u16,
}

impl mcpoll::Resolver for SilentFirst {
    fn resolve(&self, _: &str, _: u16) -> std::io::Result<Vec<std::net::SocketAddr>> {
        let at = |port| std::net::SocketAddr::from(([127, 0, 0, 1], port));
        Ok(vec![at(self.silent), at(self.serving)])
    }
}

/// A connect (here its TLS handshake) that times out moves new connections on to the next
/// address, as a refused one does. Every attempt went to the silent first address again,
/// and the server was never reached.
#[test]
fn a_connect_that_times_out_moves_on_to_the_next_address() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    // Every connection is taken and held, and its handshake never answered.
    std::thread::spawn(move || {
        let held: Vec<_> = silent.incoming().collect();
        drop(held);
    });
    let pki = Pki::new("silent-first");
    let server = MiniServer::start(Some(pki.server_config(&["localhost"], false)), mcp_answer);
    let mut opts = HttpOptions::new(server.url("https", "localhost"))
        .resolver(Arc::new(SilentFirst { silent: silent_port, serving: server.port }));
    opts.tls = pki.trust();
    opts.connect_timeout = Duration::from_millis(200);
    let mut host = Host::new().unwrap();
    let id = add(&mut host, opts);
    let o = CallOptions {
        idempotency: Some(mcpoll::Idempotency::Read),
        timeout: Some(Duration::from_secs(20)),
        ..CallOptions::default()
    };
    let r = host.call_tool_blocking(id, "echo", &raw(r#"{"text":"second"}"#), &o).expect("call");
    assert!(r.json.contains("second"));
}

/// A server behind TLS (`config`, for `localhost`, of `pki`), and a host ready with it whose
/// keep-alive connection has expired: its next request makes a new connection.
fn ready_with_no_idle_connection(
    pki: &Pki,
    config: Arc<rustls::ServerConfig>,
) -> (MiniServer, Host, mcpoll::ServerId) {
    let server = MiniServer::start(Some(config), mcp_answer);
    let mut host = Host::new().unwrap();
    let mut opts = HttpOptions::new(server.url("https", "localhost"));
    opts.tls = pki.trust();
    opts.idle_timeout = Duration::from_millis(1);
    let id = add(&mut host, opts);
    assert!(matches!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Ready(..)));
    // The idle connection expires 1 ms after the probe's answer: the host polls (its events
    // taken: queued ones end a poll at once) until the server sees that connection end.
    common::poll_until(&mut host, common::PATIENCE, |host| {
        while host.poll_event().is_some() {}
        server.ended() >= 1
    });
    (server, host, id)
}

/// A server behind TLS for `localhost` with a CA of its own (named `name`), and a host that
/// trusts that CA, ready with it.
fn ready_over_tls(name: &str) -> (MiniServer, Host, mcpoll::ServerId) {
    let pki = Pki::new(name);
    let server = MiniServer::start(Some(pki.server_config(&["localhost"], false)), mcp_answer);
    let mut host = Host::new().unwrap();
    let mut opts = HttpOptions::new(server.url("https", "localhost"));
    opts.tls = pki.trust();
    let id = add(&mut host, opts);
    assert!(matches!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Ready(..)));
    (server, host, id)
}

#[test]
fn tls_with_a_trusted_ca_works_and_carries_sni() {
    let (server, mut host, id) = ready_over_tls("ok");
    assert_eq!(echo(&mut host, id, "over tls")["content"][0]["text"], "over tls");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].header("host"), Some(format!("localhost:{}", server.port).as_str()));
    assert_eq!(reqs[1].header("mcp-name"), Some("echo"));
}

#[test]
fn tls_wrong_host_name_is_a_typed_error() {
    let pki = Pki::new("name");
    let server =
        MiniServer::start(Some(pki.server_config(&["not-this-host.example"], false)), mcp_answer);
    let mut host = Host::new().unwrap();
    let mut opts = HttpOptions::new(server.url("https", "localhost"));
    opts.tls = pki.trust();
    let id = add(&mut host, opts);
    assert_eq!(
        closed_with(&mut host, id),
        CallError::Transport(TransportError::Tls(TlsFailure::WrongHostName))
    );
    assert!(server.requests().is_empty());
}

#[test]
fn tls_unknown_ca_is_a_typed_error() {
    let pki = Pki::new("ca");
    let server = MiniServer::start(Some(pki.server_config(&["localhost"], false)), mcp_answer);
    let mut host = Host::new().unwrap();
    // Default trust: the webpki roots, which do not know the test CA.
    let id = add(&mut host, HttpOptions::new(server.url("https", "localhost")));
    assert_eq!(
        closed_with(&mut host, id),
        CallError::Transport(TransportError::Tls(TlsFailure::UnknownIssuer))
    );
}

#[test]
fn mutual_tls_with_and_without_a_client_certificate() {
    let pki = Pki::new("mtls");
    let server = MiniServer::start(Some(pki.server_config(&["localhost"], true)), mcp_answer);
    pki.leaf("client", &["client.example"]);
    let mut host = Host::new().unwrap();
    let mut opts = HttpOptions::new(server.url("https", "localhost"));
    opts.tls = TlsOptions {
        client_cert: Some((pki.dir.join("client.pem"), pki.dir.join("client.key"))),
        ..pki.trust()
    };
    let id = add(&mut host, opts);
    assert_eq!(echo(&mut host, id, "mutual")["content"][0]["text"], "mutual");

    let mut opts = HttpOptions::new(server.url("https", "localhost"));
    opts.tls = pki.trust();
    let id = add(&mut host, opts);
    let state = host.wait_ready(id, common::PATIENCE).unwrap();
    assert_eq!(
        state,
        ServerState::Closed,
        "a server requiring client certificates refuses us without one"
    );
}

#[test]
fn connect_proxy_tunnels_plain_and_tls_requests() {
    let pki = Pki::new("proxy");
    let plain = MiniServer::start(None, mcp_answer);
    let secure = MiniServer::start(Some(pki.server_config(&["localhost"], false)), mcp_answer);
    let proxy = MiniProxy::start();
    let mut host = Host::new().unwrap();

    let mut opts = HttpOptions::new(plain.url("http", "127.0.0.1"));
    opts.proxy = ProxyChoice::Url(format!("http://127.0.0.1:{}", proxy.port));
    let id = add(&mut host, opts);
    assert_eq!(echo(&mut host, id, "via proxy")["content"][0]["text"], "via proxy");

    let mut opts = HttpOptions::new(secure.url("https", "localhost"));
    opts.proxy = ProxyChoice::Url(format!("127.0.0.1:{}", proxy.port));
    opts.tls = pki.trust();
    let id = add(&mut host, opts);
    assert_eq!(echo(&mut host, id, "tls via proxy")["content"][0]["text"], "tls via proxy");

    let targets = proxy.targets.lock().unwrap().clone();
    assert!(targets.contains(&format!("127.0.0.1:{}", plain.port)), "{targets:?}");
    assert!(targets.contains(&format!("localhost:{}", secure.port)), "{targets:?}");
    assert_eq!(proxy.tunnels.load(Ordering::SeqCst), 2, "one keep-alive tunnel per server");
}

/// A provider whose first token the server refuses; `refresh` yields the good one.
#[derive(Debug)]
struct Rotating {
    refreshes: Arc<AtomicUsize>,
}

impl TokenProvider for Rotating {
    fn token(&mut self) -> Option<String> {
        Some("stale-token".into())
    }
    fn refresh(&mut self) -> Option<String> {
        self.refreshes.fetch_add(1, Ordering::SeqCst);
        Some("fresh-token".into())
    }
}

fn bearer_gate(req: &Request) -> Response {
    if req.header("authorization") == Some("Bearer fresh-token") {
        return mcp_answer(req);
    }
    let challenge = r#"Bearer resource_metadata="https://auth.example/.well-known/oauth-protected-resource", scope="tools:call", error="invalid_token""#;
    Response {
        status: 401,
        headers: vec![("WWW-Authenticate".into(), challenge.into())],
        body: String::new(),
    }
}

#[test]
fn a_401_asks_the_provider_once_then_succeeds() {
    let server = MiniServer::start(None, bearer_gate);
    let refreshes = Arc::new(AtomicUsize::new(0));
    let mut host = Host::new().unwrap();
    let mut opts = HttpOptions::new(server.url("http", "127.0.0.1"));
    opts.token_provider = Some(Box::new(Rotating { refreshes: Arc::clone(&refreshes) }));
    let id = add(&mut host, opts);
    assert_eq!(echo(&mut host, id, "authorized")["content"][0]["text"], "authorized");
    assert_eq!(refreshes.load(Ordering::SeqCst), 1);
    let auths: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or("").to_owned())
        .collect();
    assert_eq!(auths, ["Bearer stale-token", "Bearer fresh-token", "Bearer fresh-token"]);
}

#[test]
fn a_second_401_is_auth_required_with_the_challenge_and_403_is_forbidden() {
    let server = MiniServer::start(None, bearer_gate);
    let mut host = Host::new().unwrap();
    let id = add(&mut host, HttpOptions::new(server.url("http", "127.0.0.1")).bearer("wrong"));
    match refused_with(&mut host, id) {
        CallError::Peer(PeerError::AuthRequired(c)) => {
            assert_eq!(c.scope.as_deref(), Some("tools:call"));
            assert_eq!(c.error.as_deref(), Some("invalid_token"));
            assert!(c.resource_metadata.unwrap().ends_with("oauth-protected-resource"));
        }
        other => panic!("{other:?}"),
    }
    let forbidding = MiniServer::start(None, |_: &Request| Response {
        status: 403,
        headers: vec![],
        body: String::new(),
    });
    let id = add(&mut host, HttpOptions::new(forbidding.url("http", "127.0.0.1")).bearer("t"));
    assert!(matches!(refused_with(&mut host, id), CallError::Peer(PeerError::Forbidden(_))));
}

#[test]
fn headers_and_tokens_are_sent_and_bad_headers_refused() {
    let server = MiniServer::start(None, mcp_answer);
    let mut host = Host::new().unwrap();
    let opts = HttpOptions::new(server.url("http", "127.0.0.1"))
        .header("X-Tenant", "blue")
        .bearer("s3cret");
    let id = add(&mut host, opts);
    echo(&mut host, id, "h");
    for r in server.requests() {
        assert_eq!(r.header("x-tenant"), Some("blue"));
        assert_eq!(r.header("authorization"), Some("Bearer s3cret"));
        assert_eq!(r.header("mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(r.header("accept"), Some("application/json, text/event-stream"));
    }
    let bad =
        HttpOptions::new(server.url("http", "127.0.0.1")).header("X-Evil", "a\r\nInjected: 1");
    assert!(host.add_http_server(bad, Config::default()).is_err());
    assert!(format!("{:?}", HttpOptions::new("http://x").bearer("s3cret")).contains("redacted"));
}

#[test]
fn x_mcp_header_arguments_become_mcp_param_headers_and_bad_tools_are_dropped() {
    let server = MiniServer::start(None, |req: &Request| {
        let msg = req.json();
        if msg["method"] == "tools/list" {
            let tools = serde_json::json!([
                {"name": "get_weather", "inputSchema": {"type": "object", "properties": {
                    "city": {"type": "string"},
                    "region": {"type": "string", "x-mcp-header": "Region"}}}},
                {"name": "broken", "inputSchema": {"type": "object", "properties": {
                    "n": {"type": "number", "x-mcp-header": "N"}}}}
            ]);
            let result = serde_json::json!({"resultType": "complete", "tools": tools, "ttlMs": 0, "cacheScope": "private"});
            return Response::json(
                serde_json::json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}),
            );
        }
        mcp_answer(req)
    });
    let mut host = Host::new().unwrap();
    let id = add(&mut host, HttpOptions::new(server.url("http", "127.0.0.1")));
    let list = host.list_tools(id, &CallOptions::default()).unwrap();
    let tools: serde_json::Value =
        serde_json::from_str(&host.wait(id, list).unwrap().json).unwrap();
    let names: Vec<_> =
        tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["get_weather"], "the tool breaking the x-mcp-header rules is not listed");
    let args = raw(r#"{"city":"Oslo","region":"Nord, Norge"}"#);
    host.call_tool_blocking(id, "get_weather", &args, &CallOptions::default()).unwrap();
    let call = server.requests().into_iter().find(|r| r.json()["method"] == "tools/call").unwrap();
    assert_eq!(call.header("mcp-param-region"), Some("Nord, Norge"));
    assert_eq!(call.header("mcp-name"), Some("get_weather"));
    assert_eq!(call.header("mcp-method"), Some("tools/call"));
}

#[test]
fn a_failed_instance_rotates_to_an_alternate_and_a_retried_read_lands_there() {
    let good = MiniServer::start(None, mcp_answer);
    let dead_port = common::free_port();
    let mut host = Host::new().unwrap();
    let mut opts = HttpOptions::new(format!("http://127.0.0.1:{dead_port}/mcp"));
    opts.alternates = vec![good.url("http", "127.0.0.1")];
    let id = add(&mut host, opts);
    assert!(matches!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Ready(..)));
    let o = CallOptions { idempotency: Some(mcpoll::Idempotency::Read), ..CallOptions::default() };
    let r = host.call_tool_blocking(id, "echo", &raw(r#"{"text":"elsewhere"}"#), &o).unwrap();
    assert!(r.json.contains("elsewhere"));
    assert!(good.requests().len() >= 2, "the probe and the call went to the alternate");
}

#[test]
fn an_alternate_is_reached_with_its_own_scheme_whatever_the_first_instances() {
    let dead_port = common::free_port();
    let call = |host: &mut Host, id| {
        assert!(matches!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Ready(..)));
        let o =
            CallOptions { idempotency: Some(mcpoll::Idempotency::Read), ..CallOptions::default() };
        host.call_tool_blocking(id, "echo", &raw(r#"{"text":"elsewhere"}"#), &o).unwrap().json
    };
    // An https instance that is down, and a plain-HTTP alternate: no TLS to the alternate.
    let plain = MiniServer::start(None, mcp_answer);
    let mut host = Host::new().unwrap();
    let mut opts = HttpOptions::new(format!("https://127.0.0.1:{dead_port}/mcp"));
    opts.alternates = vec![plain.url("http", "127.0.0.1")];
    let id = add(&mut host, opts);
    assert!(call(&mut host, id).contains("elsewhere"));
    assert!(plain.requests().len() >= 2, "the probe and the call went to the alternate");
    // A plain-HTTP instance that is down, and an https alternate: TLS to the alternate.
    let pki = Pki::new("alternate");
    let tls = MiniServer::start(Some(pki.server_config(&["localhost"], false)), mcp_answer);
    let mut opts = HttpOptions::new(format!("http://127.0.0.1:{dead_port}/mcp"));
    opts.alternates = vec![tls.url("https", "localhost")];
    opts.tls = pki.trust();
    let id = add(&mut host, opts);
    assert!(call(&mut host, id).contains("elsewhere"));
    assert!(tls.requests().len() >= 2, "the probe and the call went to the alternate");
}

#[test]
fn a_connection_made_before_a_rotation_writes_its_request_for_its_own_instance() {
    // The first instance holds the call `busy` until told.
    let (got_tx, got_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (got_tx, go_rx) = (Mutex::new(got_tx), Mutex::new(go_rx));
    let first = MiniServer::start(None, move |req| {
        if req.json()["params"]["arguments"]["text"] == "busy" {
            let _ = got_tx.lock().unwrap().send(());
            let _ = go_rx.lock().unwrap().recv();
        }
        mcp_answer(req)
    });
    let alternate = MiniServer::start(None, mcp_answer);
    // Through a proxy, a connection stays "connecting" for as long as its CONNECT is held.
    let proxy = MiniProxy::start();
    let mut opts = HttpOptions::new(first.url("http", "127.0.0.1"));
    opts.alternates = vec![format!("http://127.0.0.1:{}/other", alternate.port)];
    opts.proxy = ProxyChoice::Url(format!("http://127.0.0.1:{}", proxy.port));
    let mut host = Host::new().unwrap();
    let id = add(&mut host, opts);
    assert!(matches!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Ready(..)));
    let echo = |host: &mut Host, text: &str| {
        let args = raw(&format!(r#"{{"text":"{text}"}}"#));
        host.call_tool(id, "echo", &args, &CallOptions::default()).unwrap()
    };
    let asked = |n: usize| {
        let asked = Arc::clone(&proxy.asked);
        move |_: &mut Host| asked.lock().unwrap().len() >= n
    };
    let before = proxy.asked.lock().unwrap().len();
    // `busy` takes the open connection; `second` needs a new one, which stays connecting.
    let busy = echo(&mut host, "busy");
    common::poll_until(&mut host, common::PATIENCE, |_| got_rx.try_recv().is_ok());
    proxy.hold(true);
    let second = echo(&mut host, "second");
    common::poll_until(&mut host, common::PATIENCE, asked(before + 1));
    // `third`'s connection is refused: new connections go to the alternate, where `third`
    // is sent again (it was not delivered).
    proxy.refuse.store(1, Ordering::SeqCst);
    let third = echo(&mut host, "third");
    common::poll_until(&mut host, common::PATIENCE, asked(before + 3));
    let to_alternate = format!("127.0.0.1:{}", alternate.port);
    assert_eq!(proxy.asked.lock().unwrap()[before + 2], to_alternate, "rotated");
    proxy.hold(false);
    go_tx.send(()).unwrap();
    for (call, text) in [(busy, "busy"), (second, "second"), (third, "third")] {
        let r = host.wait(id, call).unwrap();
        assert!(r.json.contains(text), "{}", r.json);
    }
    // `second`'s connection was made to the first instance: its request names that instance.
    let seen = first.requests();
    let req = seen.iter().find(|r| r.json()["params"]["arguments"]["text"] == "second");
    let req = req.expect("`second` went where its connection goes");
    assert_eq!(req.path, "/mcp");
    assert_eq!(req.header("host"), Some(format!("127.0.0.1:{}", first.port).as_str()));
    let third = alternate.requests().into_iter().find(|r| r.json()["method"] == "tools/call");
    assert_eq!(third.expect("`third` at the alternate").path, "/other");
    // The connections that finished at the first instance are not kept for the next call.
    let fourth = echo(&mut host, "fourth");
    assert!(host.wait(id, fourth).unwrap().json.contains("fourth"));
    let at_alternate = |r: &Request| r.json()["params"]["arguments"]["text"] == "fourth";
    assert!(alternate.requests().iter().any(at_alternate), "`fourth` went to the alternate");
}

/// A legacy (2025-11-25) server in a few lines: sessions, SSE replies, a server-sent `ping`
/// on the call's stream, and a GET stream that drops after one event with an id.
fn legacy_server(req: &Request) -> Response {
    let sse = |body: String| Response {
        status: 200,
        headers: vec![
            ("Content-Type".into(), "text/event-stream".into()),
            ("Mcp-Session-Id".into(), "s-1".into()),
        ],
        body,
    };
    if req.method == "GET" {
        // One event with an id, then the stream ends: the client must come back with the id.
        let note = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        return sse(format!("id: ev-7\nretry: 50\ndata: {note}\n\n"));
    }
    let msg = req.json();
    let id = msg["id"].clone();
    match msg["method"].as_str() {
        Some("server/discover") => Response {
            status: 400,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}"#.into(),
        },
        Some("initialize") => {
            let result = serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": true}},
                                            "serverInfo": {"name": "mini", "version": "1"}});
            sse(format!("data: {}\n\n", serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result})))
        }
        Some("tools/call") => {
            let ping = r#"{"jsonrpc":"2.0","id":"srv-1","method":"ping"}"#;
            let done = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}});
            sse(format!("id: p0\ndata:\n\ndata: {ping}\n\ndata: {done}\n\n"))
        }
        _ => Response { status: 202, headers: vec![], body: String::new() },
    }
}

#[test]
fn legacy_http_answers_server_pings_by_post_and_resumes_the_get_stream_with_last_event_id() {
    let server = MiniServer::start(None, legacy_server);
    let mut host = Host::new().unwrap();
    let id = add(&mut host, HttpOptions::new(server.url("http", "127.0.0.1")));
    assert!(matches!(
        host.wait_ready(id, common::PATIENCE).unwrap(),
        ServerState::Ready(mcpoll::Era::Legacy, _)
    ));
    assert_eq!(host.session_id(id), Some("s-1"));
    let r = host.call_tool_blocking(id, "t", &raw("{}"), &CallOptions::default()).unwrap();
    assert_eq!(r.json, r#"{"content":[]}"#, "the priming event with empty data is skipped");
    common::poll_until(&mut host, common::PATIENCE, |_| {
        server.requests().iter().filter(|r| r.method == "GET").count() >= 2
    });
    let reqs = server.requests();
    let pong =
        reqs.iter().find(|r| r.json()["id"] == "srv-1").expect("the ping was answered by POST");
    assert_eq!(pong.json()["result"], serde_json::json!({}));
    assert_eq!(pong.header("mcp-session-id"), Some("s-1"));
    assert_eq!(pong.header("mcp-protocol-version"), Some("2025-11-25"));
    let gets: Vec<_> = reqs.iter().filter(|r| r.method == "GET").collect();
    assert_eq!(gets[0].header("last-event-id"), None);
    assert_eq!(gets[1].header("last-event-id"), Some("ev-7"), "resumed where the stream broke");
    assert_eq!(gets[1].header("mcp-session-id"), Some("s-1"));
    let init = reqs.iter().find(|r| r.json()["method"] == "initialize").unwrap();
    assert_eq!(init.header("mcp-protocol-version"), None, "no version header on initialize (U6)");
    assert_eq!(init.header("mcp-session-id"), None);
    assert!(
        reqs.iter()
            .all(|r| r.header("mcp-method").is_none() || r.json()["method"] == "server/discover"),
        "no 2026 headers on the legacy exchange"
    );
}

#[test]
fn an_oversize_json_reply_fails_the_call_as_too_large_as_over_stdio() {
    let server = MiniServer::start(None, |req| {
        if req.json()["method"] == "tools/call" {
            let big = "x".repeat(8 * 1024);
            let reply = serde_json::json!({"jsonrpc": "2.0", "id": req.json()["id"],
                "result": {"content": [{"type": "text", "text": big}]}});
            return Response::json(reply);
        }
        mcp_answer(req)
    });
    let mut host = Host::new().unwrap();
    let config = Config { max_message_bytes: 4096, ..Config::default() };
    let opts = HttpOptions::new(server.url("http", "127.0.0.1"));
    let id = host.add_http_server(opts, config).expect("add");
    let args = raw(r#"{"text":"hi"}"#);
    let err = host.call_tool_blocking(id, "echo", &args, &CallOptions::default()).unwrap_err();
    assert!(
        matches!(err, mcpoll::BlockingError::Call(CallError::Peer(PeerError::TooLarge))),
        "{err:?}"
    );
}

/// Replies from a few bytes to several hundred KiB, one after another on one keep-alive
/// connection, over plain TCP and over TLS: each arrives whole, however many reads (or TLS
/// records) it takes, as a connection's reads start small and grow while they fill, and a
/// short reply after a long one is not mixed with it.
#[test]
fn replies_of_every_size_arrive_whole_one_after_another() {
    let pki = Pki::new("sizes");
    for tls in [false, true] {
        let sized = |req: &Request| {
            if req.json()["method"] != "tools/call" {
                return mcp_answer(req);
            }
            let n = req.json()["params"]["arguments"]["n"].as_u64().unwrap() as usize;
            let text: String = (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            Response::json(serde_json::json!({"jsonrpc": "2.0", "id": req.json()["id"],
                "result": {"content": [{"type": "text", "text": text}]}}))
        };
        let server_tls = tls.then(|| pki.server_config(&["localhost"], false));
        let server = MiniServer::start(server_tls, sized);
        let mut host = Host::new().unwrap();
        let config = Config { max_message_bytes: 1 << 20, ..Config::default() };
        let mut opts =
            HttpOptions::new(server.url(if tls { "https" } else { "http" }, "localhost"));
        opts.tls = pki.trust();
        let id = host.add_http_server(opts, config).expect("add");
        for n in [3, 5_000, 70_000, 10, 300_000, 4_096, 1] {
            let args = raw(&format!(r#"{{"n":{n}}}"#));
            let done = host.call_tool_blocking(id, "echo", &args, &CallOptions::default());
            let result: serde_json::Value = serde_json::from_str(&done.unwrap().json).unwrap();
            let text = result["content"][0]["text"].as_str().unwrap();
            assert_eq!(text.len(), n, "a reply of {n} bytes of text, tls {tls}");
            let expected = |(i, b): (usize, u8)| b == b'a' + (i % 26) as u8;
            assert!(text.bytes().enumerate().all(expected), "{n}, tls {tls}");
        }
        assert_eq!(server.requests().len(), 8, "one probe and seven calls");
    }
}

/// A legacy server whose `tools/call` stream primes an event id and `retry: 500`, then ends
/// before the reply; the reply waits for a GET that resumes after that id.
fn resumable_server(call_id: &Mutex<serde_json::Value>, req: &Request) -> Response {
    let sse = |body: String| Response {
        status: 200,
        headers: vec![
            ("Content-Type".into(), "text/event-stream".into()),
            ("Mcp-Session-Id".into(), "s-1".into()),
        ],
        body,
    };
    if req.method == "GET" {
        if req.header("last-event-id") != Some("e1") {
            return Response { status: 405, headers: vec![], body: String::new() };
        }
        let id = call_id.lock().unwrap().clone();
        let done = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}});
        return sse(format!("id: e2\ndata: {done}\n\n"));
    }
    if req.json()["method"] == "tools/call" {
        *call_id.lock().unwrap() = req.json()["id"].clone();
        return sse("id: e1\nretry: 500\ndata:\n\n".into());
    }
    legacy_server(req)
}

#[test]
fn a_legacy_post_stream_closed_before_the_reply_is_resumed_after_retry_with_last_event_id() {
    let call_id = Arc::new(Mutex::new(serde_json::Value::Null));
    let ids = Arc::clone(&call_id);
    let server = MiniServer::start(None, move |req| resumable_server(&ids, req));
    let mut host = Host::new().unwrap();
    let id = add(&mut host, HttpOptions::new(server.url("http", "127.0.0.1")));
    assert!(matches!(
        host.wait_ready(id, common::PATIENCE).unwrap(),
        ServerState::Ready(mcpoll::Era::Legacy, _)
    ));
    // A write (no annotations): resuming is not re-sending, so it is safe.
    let r = host.call_tool_blocking(id, "t", &raw("{}"), &CallOptions::default()).unwrap();
    assert_eq!(r.json, r#"{"content":[]}"#, "the reply came on the resumed stream");
    let reqs = server.requests();
    let calls: Vec<_> = reqs.iter().filter(|r| r.json()["method"] == "tools/call").collect();
    assert_eq!(calls.len(), 1, "the call was not sent again");
    let resume = reqs
        .iter()
        .find(|r| r.method == "GET" && r.header("last-event-id").is_some())
        .expect("a GET resumed the stream");
    assert_eq!(resume.header("last-event-id"), Some("e1"));
    assert_eq!(resume.header("mcp-session-id"), Some("s-1"));
    let waited = resume.at.duration_since(calls[0].at);
    assert!(
        waited >= Duration::from_millis(500),
        "the server's retry: 500 was honoured: {waited:?}"
    );
    assert!(waited < Duration::from_secs(10), "and bounded: {waited:?}");
}

#[test]
fn a_long_event_stream_is_handed_over_in_bounded_turns_and_still_completes() {
    let server = MiniServer::start(None, |req| {
        if req.json()["method"] != "tools/call" {
            return legacy_server(req);
        }
        let note = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#;
        let done = serde_json::json!({"jsonrpc": "2.0", "id": req.json()["id"], "result": {"content": []}});
        let mut body: String = (0..500).map(|_| format!("data: {note}\n\n")).collect();
        body.push_str(&format!("data: {done}\n\n"));
        Response {
            status: 200,
            headers: vec![("Content-Type".into(), "text/event-stream".into())],
            body,
        }
    });
    let mut host = Host::new().unwrap();
    let id = add(&mut host, HttpOptions::new(server.url("http", "127.0.0.1")));
    let r = host.call_tool_blocking(id, "t", &raw("{}"), &CallOptions::default()).unwrap();
    assert_eq!(r.json, r#"{"content":[]}"#, "the reply after 500 events arrives");
}

// ----- closing a legacy session: the DELETE never stalls the loop -------------------------

/// What a host call may take: its work is far less, the rest is room for a busy machine.
const PROMPT: Duration = Duration::from_millis(250);
/// The host's close grace: how long a session's DELETE may wait for its answer.
const GRACE: Duration = Duration::from_millis(250);
/// What a busy machine's scheduling may add to a wait: an upper bound over a grace says
/// "no second wait of its own" (the next one would be the 30 s handshake), not a latency.
const SCHEDULING: Duration = Duration::from_secs(10);

/// A legacy server issuing session `s-1` from a JSON `initialize`, with no GET stream; it
/// echoes, and answers DELETE with `on_delete`.
fn session_server(on_delete: fn() -> Response) -> impl Fn(&Request) -> Response + Send + Sync {
    move |req| {
        match req.method.as_str() {
            "DELETE" => return on_delete(),
            "GET" => return Response { status: 405, headers: vec![], body: String::new() },
            _ => {}
        }
        let msg = req.json();
        let result = match msg["method"].as_str() {
            Some("initialize") => serde_json::json!({"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}}, "serverInfo": {"name": "mini", "version": "1"}}),
            Some("tools/call") => serde_json::json!({
                "content": [{"type": "text", "text": msg["params"]["arguments"]["text"].clone()}]}),
            _ => return Response { status: 202, headers: vec![], body: String::new() },
        };
        let reply = serde_json::json!({"jsonrpc": "2.0", "id": msg["id"], "result": result});
        let mut r = Response::json(reply);
        r.headers.push(("Mcp-Session-Id".into(), "s-1".into()));
        r
    }
}

fn deleted() -> Response {
    Response { status: 200, headers: vec![], body: String::new() }
}

fn legacy_only() -> Config {
    Config { era: mcpoll::EraPreference::LegacyOnly, ..Config::default() }
}

/// Adds a legacy server and makes one call in its session.
fn add_legacy(host: &mut Host, opts: HttpOptions) -> mcpoll::ServerId {
    let id = host.add_http_server(opts, legacy_only()).expect("add");
    assert!(matches!(
        host.wait_ready(id, common::PATIENCE).unwrap(),
        ServerState::Ready(mcpoll::Era::Legacy, _)
    ));
    assert_eq!(host.session_id(id), Some("s-1"));
    assert_eq!(echo(host, id, "in session")["content"][0]["text"], "in session");
    id
}

/// Runs `f`, asserting it returned promptly.
#[track_caller]
fn prompt<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = std::time::Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(took < PROMPT, "{what} took {took:?}");
    out
}

/// Closes `id` promptly, then polls until its DELETE reached `server`; that DELETE.
fn close_and_see_delete(host: &mut Host, id: mcpoll::ServerId, server: &MiniServer) -> Request {
    prompt("close_server", || host.close_server(id));
    common::poll_until(host, common::PATIENCE, |_| {
        server.requests().iter().any(|r| r.method == "DELETE")
    });
    let reqs = server.requests();
    let delete = reqs.iter().find(|r| r.method == "DELETE").unwrap().clone();
    assert_eq!(reqs.iter().filter(|r| r.method == "DELETE").count(), 1, "one DELETE");
    delete
}

/// Polls until nothing is left of the close: no deadline, nothing to do.
fn until_settled(host: &mut Host) {
    common::poll_until(host, common::PATIENCE, |h| h.poll_timeout().is_none());
    while host.poll_event().is_some() {}
    assert!(host.is_idle(), "a closed server's session end keeps nothing going");
}

#[test]
fn closing_a_legacy_session_sends_delete_with_the_sessions_headers_without_waiting() {
    let server = MiniServer::start(None, session_server(deleted));
    let mut host = Host::new().unwrap();
    let opts = HttpOptions::new(server.url("http", "127.0.0.1"))
        .bearer("tok-1")
        .header("X-Tenant", "blue");
    let id = add_legacy(&mut host, opts);
    let delete = close_and_see_delete(&mut host, id, &server);
    assert_eq!(delete.path, "/mcp");
    assert_eq!(delete.header("mcp-session-id"), Some("s-1"));
    assert_eq!(delete.header("mcp-protocol-version"), Some("2025-11-25"));
    assert_eq!(delete.header("authorization"), Some("Bearer tok-1"), "§8: every request");
    assert_eq!(delete.header("x-tenant"), Some("blue"));
    assert_eq!(host.session_id(id), None, "the session is over locally");
    until_settled(&mut host);
}

/// A legacy server whose GET stream fails (503) is closed while the stream backs off: the
/// backoff's deadline went on being reported after the close, in the past, so the host's loop
/// never slept again (and never became idle) until the server was removed.
#[test]
fn a_closed_legacy_server_whose_get_stream_backs_off_leaves_no_deadline() {
    let legacy = session_server(deleted);
    let server = MiniServer::start(None, move |req: &Request| match req.method.as_str() {
        "GET" => Response { status: 503, headers: vec![], body: String::new() },
        _ => legacy(req),
    });
    let mut host = Host::new().unwrap();
    let id = add_legacy(&mut host, HttpOptions::new(server.url("http", "127.0.0.1")));
    common::poll_until(&mut host, common::PATIENCE, |_| {
        server.requests().iter().any(|r| r.method == "GET")
    });
    close_and_see_delete(&mut host, id, &server);
    until_settled(&mut host);
}

#[test]
fn the_delete_goes_over_tls_and_through_a_connect_proxy_like_the_sessions_requests() {
    let pki = Pki::new("delete");
    let direct =
        MiniServer::start(Some(pki.server_config(&["localhost"], false)), session_server(deleted));
    let tunnelled =
        MiniServer::start(Some(pki.server_config(&["localhost"], false)), session_server(deleted));
    let proxy = MiniProxy::start();
    let mut host = Host::new().unwrap();

    let mut opts = HttpOptions::new(direct.url("https", "localhost")).bearer("tok-tls");
    opts.tls = pki.trust();
    let id = add_legacy(&mut host, opts);
    let delete = close_and_see_delete(&mut host, id, &direct);
    assert_eq!(delete.header("mcp-session-id"), Some("s-1"));
    assert_eq!(delete.header("authorization"), Some("Bearer tok-tls"));
    assert_eq!(delete.header("host"), Some(format!("localhost:{}", direct.port).as_str()));

    let mut opts = HttpOptions::new(tunnelled.url("https", "localhost"));
    opts.proxy = ProxyChoice::Url(format!("http://127.0.0.1:{}", proxy.port));
    opts.tls = pki.trust();
    let id = add_legacy(&mut host, opts);
    let tunnels = proxy.tunnels.load(Ordering::SeqCst);
    let delete = close_and_see_delete(&mut host, id, &tunnelled);
    assert_eq!(delete.header("mcp-session-id"), Some("s-1"));
    assert_eq!(proxy.tunnels.load(Ordering::SeqCst), tunnels + 1, "its own tunnel");
    until_settled(&mut host);
}

#[test]
fn a_delete_the_server_never_answers_is_dropped_after_the_grace_and_its_socket_closed() {
    let server = MiniServer::start(None, session_server(Response::stall));
    let mut host = Host::new().unwrap();
    let id = add_legacy(&mut host, HttpOptions::new(server.url("http", "127.0.0.1")));
    let closed = std::time::Instant::now();
    prompt("close_server", || host.close_server(id));
    while host.poll_event().is_some() {}
    assert!(!host.is_idle(), "the DELETE moves only when polled");
    while server.eofs.lock().unwrap().is_empty() {
        assert!(closed.elapsed() < common::PATIENCE, "the DELETE's socket stayed open");
        prompt("poll", || host.poll(Some(Duration::from_millis(10))).unwrap());
    }
    let eof = server.eofs.lock().unwrap()[0];
    assert!(server.requests().iter().any(|r| r.method == "DELETE"), "it was sent");
    let open = eof.duration_since(closed);
    assert!(open >= GRACE - Duration::from_millis(10), "dropped before its grace: {open:?}");
    // Late only by what a busy machine's scheduling adds, not by another wait of its own.
    assert!(open < GRACE + SCHEDULING, "dropped late: {open:?}");
    until_settled(&mut host);
}

/// Dropping the host gives a DELETE still out 100 ms more, then closes it: well before its
/// own deadline (the close's grace), and the drop waits no longer than that.
#[test]
fn dropping_the_host_closes_a_delete_still_waiting_for_its_answer() {
    let server = MiniServer::start(None, session_server(Response::stall));
    let mut host = Host::new().unwrap();
    let id = add_legacy(&mut host, HttpOptions::new(server.url("http", "127.0.0.1")));
    let _ = close_and_see_delete(&mut host, id, &server);
    let dropped = std::time::Instant::now();
    drop(host);
    let took = dropped.elapsed();
    // Its last 100 ms, and not the DELETE's own grace of 250 ms.
    assert!(took < Duration::from_millis(240), "the drop waited {took:?}");
    let limit = dropped + Duration::from_secs(5);
    while server.eofs.lock().unwrap().is_empty() {
        assert!(std::time::Instant::now() < limit, "the DELETE's socket outlived the host");
        std::thread::sleep(Duration::from_millis(2));
    }
    let open = server.eofs.lock().unwrap()[0].duration_since(dropped);
    assert!(open >= Duration::from_millis(90), "not given its last 100 ms: {open:?}");
    assert!(open < Duration::from_millis(200), "closed by the drop, not its deadline: {open:?}");
}

/// A program that closes a server and exits at once (the host dropped right after the close,
/// before any poll) still ends the session: closing used to send the DELETE before it returned.
#[test]
fn a_program_that_closes_and_exits_at_once_still_ends_its_session() {
    let server = MiniServer::start(None, session_server(deleted));
    let mut host = Host::new().unwrap();
    let id = add_legacy(&mut host, HttpOptions::new(server.url("http", "127.0.0.1")));
    prompt("close_server", || host.close_server(id));
    let dropped = std::time::Instant::now();
    drop(host);
    let took = dropped.elapsed();
    assert!(took < Duration::from_secs(1), "the drop waited {took:?}");
    let delete = server.requests().into_iter().find(|r| r.method == "DELETE");
    let delete = delete.expect("the DELETE was answered before the drop returned");
    assert_eq!(delete.header("mcp-session-id"), Some("s-1"));
}

/// The program's loop for an embedded host: forward its events, tick it when due, and time
/// every host call, until `until` holds.
fn run_embedded(poll: &mut mio::Poll, host: &mut Host, mut until: impl FnMut(&mut Host) -> bool) {
    let mut events = mio::Events::with_capacity(64);
    let start = std::time::Instant::now();
    while !until(host) {
        assert!(start.elapsed() < common::PATIENCE, "condition not met in time");
        let now = std::time::Instant::now();
        let due = host.poll_timeout().map(|t| t.saturating_duration_since(now));
        let wait = due.map_or(Duration::from_millis(10), |d| d.min(Duration::from_millis(10)));
        common::wait_events(poll, &mut events, Some(wait));
        let now = std::time::Instant::now();
        for event in events.iter() {
            prompt("handle_readiness", || host.handle_readiness(event.token(), now).unwrap());
        }
        if host.poll_timeout().is_some_and(|t| t <= now) {
            prompt("handle_timeout", || host.handle_timeout(now));
        }
    }
}

#[test]
fn embedded_removing_a_legacy_server_never_stalls_and_its_tokens_wait_for_the_delete() {
    let server = MiniServer::start(None, session_server(Response::stall));
    let mut poll = mio::Poll::new().unwrap();
    // Room for exactly one HTTP server.
    let mut host = Host::embedded(poll.registry(), 5000..5000 + Host::HTTP_SERVER_TOKENS).unwrap();
    let url = server.url("http", "127.0.0.1");
    let id = host.add_http_server(HttpOptions::new(url.clone()), legacy_only()).unwrap();
    run_embedded(&mut poll, &mut host, |h| {
        matches!(h.state(id), Some(ServerState::Ready(mcpoll::Era::Legacy, _)))
    });
    let removed = std::time::Instant::now();
    prompt("remove_server", || host.remove_server(id));
    assert!(host.state(id).is_none());
    let again = host.add_http_server(HttpOptions::new(url.clone()), legacy_only());
    assert!(
        matches!(again, Err(AddServerError::TooManyServers)),
        "the DELETE still uses a token of the block: {again:?}"
    );
    run_embedded(&mut poll, &mut host, |h| {
        !server.eofs.lock().unwrap().is_empty() && h.poll_timeout().is_none()
    });
    let delete = server.requests().into_iter().find(|r| r.method == "DELETE").expect("sent");
    assert_eq!(delete.header("mcp-session-id"), Some("s-1"));
    let open = server.eofs.lock().unwrap()[0].duration_since(removed);
    assert!(open >= GRACE - Duration::from_millis(10), "dropped before its grace: {open:?}");
    while host.poll_event().is_some() {}
    assert!(host.is_idle());
    host.add_http_server(HttpOptions::new(url), legacy_only()).expect("the block is free again");
}

/// A ready server on an embedded host with a budget of one frame, whose tool calls answer with
/// an event stream of `notes` notices and then the reply.
fn embedded_with_noisy_calls(notes: usize) -> (MiniServer, mio::Poll, Host, mcpoll::ServerId) {
    let server = MiniServer::start(None, move |req: &Request| {
        if req.json()["method"] != "tools/call" {
            return mcp_answer(req);
        }
        // A vendor's notification: each one is a host event.
        let note = r#"{"jsonrpc":"2.0","method":"notifications/test/tick","params":{}}"#;
        let done = serde_json::json!({"jsonrpc": "2.0", "id": req.json()["id"], "result": {"content": []}});
        let mut body: String = (0..notes).map(|_| format!("data: {note}\n\n")).collect();
        body.push_str(&format!("data: {done}\n\n"));
        Response {
            status: 200,
            headers: vec![("Content-Type".into(), "text/event-stream".into())],
            body,
        }
    });
    let mut poll = mio::Poll::new().unwrap();
    let mut host = Host::embedded(poll.registry(), 5000..5000 + Host::HTTP_SERVER_TOKENS).unwrap();
    let config = Config { frames_per_readiness: 1, ..Config::default() };
    let url = server.url("http", "127.0.0.1");
    let id = host.add_http_server(HttpOptions::new(url), config).unwrap();
    run_embedded(&mut poll, &mut host, |h| matches!(h.state(id), Some(ServerState::Ready(..))));
    while host.poll_event().is_some() {}
    (server, poll, host, id)
}

/// A reply read before its call's deadline but left unhanded by the frame budget (one frame
/// per turn: three notices, then the reply, in one event stream) is handed to the engine
/// before the engine's timers run, as a stdio driver's is: a host ticked only after the
/// deadline gets the reply, not a timeout. The old tick ran the engine's timers first.
#[test]
fn embedded_a_reply_the_frame_budget_left_unread_beats_its_deadline() {
    const NOTES: usize = 3;
    let (_server, mut poll, mut host, id) = embedded_with_noisy_calls(NOTES);
    // Longer than the loop below may take on a busy machine: the deadline passes only at the
    // tick the test makes past it.
    let timeout = 2 * common::PATIENCE;
    let call = host.call_tool(id, "t", &raw("{}"), &CallOptions::timeout(timeout)).unwrap();
    let start = std::time::Instant::now();
    // Readiness, then a tick whenever due, one frame each, until every notice is in: the
    // reply is then the next frame, already read and waiting.
    let (mut notes, mut ended) = (0, None);
    let mut take_events = |host: &mut Host, notes: &mut usize| {
        while let Some((_, event)) = host.poll_event() {
            match event {
                mcpoll::HostEvent::Notification { .. } => *notes += 1,
                mcpoll::HostEvent::CallDone { call: c, result, .. } if c == call => {
                    ended = Some(Ok(result.json().to_owned()))
                }
                mcpoll::HostEvent::CallFailed { call: c, error, .. } if c == call => {
                    ended = Some(Err(error.to_string()))
                }
                _ => {}
            }
        }
        ended.clone()
    };
    let mut events = mio::Events::with_capacity(64);
    while notes < NOTES {
        assert!(start.elapsed() < common::PATIENCE, "the notices never came");
        let now = std::time::Instant::now();
        if host.poll_timeout().is_some_and(|t| t <= now) {
            host.handle_timeout(now);
        } else {
            common::wait_events(&mut poll, &mut events, Some(Duration::from_millis(10)));
            for event in events.iter() {
                host.handle_readiness(event.token(), now).unwrap();
            }
        }
        assert_eq!(take_events(&mut host, &mut notes), None, "the reply came with a notice");
    }
    assert!(host.poll_timeout().is_some_and(|t| t <= std::time::Instant::now()), "input left");
    host.handle_timeout(start + timeout + Duration::from_secs(1));
    let ended = take_events(&mut host, &mut notes);
    assert_eq!(ended, Some(Ok(r#"{"content":[]}"#.to_owned())));
}

/// One readiness call hands an HTTP server's engine at most `frames_per_readiness` frames, and
/// one tick at most one such budget of left-over input, as over stdio (the embedded host's
/// documented bound). The readiness call's upkeep drained the backlog it had just left (a
/// second budget), and the tick gave each backlogged connection a budget of its own.
#[test]
fn embedded_http_input_is_bounded_per_readiness_call_and_per_tick() {
    const NOTES: usize = 12;
    let (_server, mut poll, mut host, id) = embedded_with_noisy_calls(NOTES);
    let opts = CallOptions::timeout(common::PATIENCE);
    let calls = [
        host.call_tool(id, "a", &raw("{}"), &opts).unwrap(),
        host.call_tool(id, "b", &raw("{}"), &opts).unwrap(),
    ];
    let frames = |host: &Host| host.stats(id).unwrap().frames_in;
    let (mut ended, mut most) = (0, 0);
    let mut events = mio::Events::with_capacity(64);
    let start = std::time::Instant::now();
    while ended < calls.len() {
        assert!(start.elapsed() < common::PATIENCE, "the calls never ended");
        let now = std::time::Instant::now();
        let due = host.poll_timeout().map(|t| t.saturating_duration_since(now));
        let wait = due.map_or(Duration::from_millis(10), |d| d.min(Duration::from_millis(10)));
        common::wait_events(&mut poll, &mut events, Some(wait));
        let now = std::time::Instant::now();
        for event in events.iter() {
            let before = frames(&host);
            host.handle_readiness(event.token(), now).unwrap();
            most = most.max(frames(&host) - before);
        }
        if host.poll_timeout().is_some_and(|t| t <= now) {
            let before = frames(&host);
            host.handle_timeout(now);
            most = most.max(frames(&host) - before);
        }
        while let Some((_, event)) = host.poll_event() {
            ended += usize::from(matches!(event, mcpoll::HostEvent::CallDone { .. }));
        }
    }
    assert_eq!(most, 1, "frames handed to the engine by one readiness call or one tick");
}

/// A driver outside a host, brought to a ready legacy session by a loop of the test's own.
fn ready_driver(url: String, poll: &mut mio::Poll) -> (mcpoll::HttpDriver, mcpoll::Engine) {
    let now = std::time::Instant::now();
    let mut engine = mcpoll::Engine::new(legacy_only(), now).unwrap();
    let config = engine.config().clone();
    let opts = HttpOptions::new(url);
    let mut driver =
        mcpoll::HttpDriver::new(opts, &config, mio::Token(0), &mut engine, now).unwrap();
    driver.flush(poll.registry(), &mut engine, now);
    let mut events = mio::Events::with_capacity(16);
    let deadline = now + Duration::from_secs(10);
    while !matches!(engine.state(), ServerState::Ready(mcpoll::Era::Legacy, _)) {
        assert!(std::time::Instant::now() < deadline, "not ready: {:?}", engine.state());
        common::wait_events(poll, &mut events, Some(Duration::from_millis(10)));
        let now = std::time::Instant::now();
        for e in events.iter() {
            driver.handle_readiness(poll.registry(), e.token(), &mut engine, now);
        }
        engine.handle_timeout(now);
        driver.handle_timeout(poll.registry(), &mut engine, now);
    }
    assert_eq!(driver.session_id(), Some("s-1"));
    (driver, engine)
}

/// Outside a host, `HttpDriver::shutdown` sends the same DELETE on a poll of its own and
/// waits for it, at most the grace.
#[test]
fn a_driver_outside_a_host_ends_its_session_on_shutdown_within_the_grace() {
    let answering = MiniServer::start(None, session_server(deleted));
    let stalling = MiniServer::start(None, session_server(Response::stall));
    let mut poll = mio::Poll::new().unwrap();

    let (mut driver, _engine) = ready_driver(answering.url("http", "127.0.0.1"), &mut poll);
    // A long grace, so that returning before it is the answer's doing, however busy the
    // machine is.
    let long_grace = common::PATIENCE / 2;
    let start = std::time::Instant::now();
    driver.shutdown(poll.registry(), long_grace);
    let took = start.elapsed();
    let reqs = answering.requests();
    let delete = reqs.iter().find(|r| r.method == "DELETE").expect("sent before returning");
    assert_eq!(delete.header("mcp-session-id"), Some("s-1"));
    assert!(took < long_grace, "an answered DELETE ends the wait: {took:?}");
    assert_eq!(driver.session_id(), None);

    // A grace past the clock's range ("as long as it takes") ends with the answer too, and
    // does not overflow.
    let (mut driver, _engine) = ready_driver(answering.url("http", "127.0.0.1"), &mut poll);
    driver.shutdown(poll.registry(), Duration::MAX);
    assert_eq!(driver.session_id(), None);

    let (mut driver, _engine) = ready_driver(stalling.url("http", "127.0.0.1"), &mut poll);
    let start = std::time::Instant::now();
    driver.shutdown(poll.registry(), GRACE);
    let took = start.elapsed();
    assert!(took >= GRACE - Duration::from_millis(10), "waited for the answer: {took:?}");
    assert!(took < GRACE + SCHEDULING, "but no longer than the grace: {took:?}");
    let limit = std::time::Instant::now() + common::PATIENCE;
    while stalling.eofs.lock().unwrap().is_empty() {
        assert!(std::time::Instant::now() < limit, "the DELETE's socket stayed open");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(stalling.requests().iter().any(|r| r.method == "DELETE"));
}

/// `{:?}` and `{:#?}` of a host (what a program logging its state prints) show no credential,
/// even with a request in flight: not the bearer token, as text or as bytes, nor a header's value.
#[test]
fn debug_output_of_a_host_with_a_request_in_flight_shows_no_credentials() {
    let server = MiniServer::start(None, |req| {
        if req.json()["method"] == "tools/call" {
            return Response::stall();
        }
        mcp_answer(req)
    });
    let mut host = Host::new().unwrap();
    let opts = HttpOptions::new(server.url("http", "127.0.0.1"))
        .bearer("s3cret-token")
        .header("X-Api-Key", "k3y-value");
    let id = add(&mut host, opts);
    host.wait_ready(id, common::PATIENCE).unwrap();
    host.call_tool(id, "echo", &raw(r#"{"text":"x"}"#), &CallOptions::default()).unwrap();
    common::poll_until(&mut host, common::PATIENCE, |_| {
        server.requests().iter().any(|r| r.json()["method"] == "tools/call")
    });
    // The alternate form shows the slabs' entries (the pool's connections) too.
    for shown in [format!("{host:?}"), format!("{host:#?}")] {
        let compact: String = shown.chars().filter(|c| !c.is_whitespace()).collect();
        let bytes = |s: &str| s.bytes().map(|b| b.to_string()).collect::<Vec<_>>().join(",");
        for secret in ["s3cret-token", "k3y-value"] {
            assert!(!compact.contains(secret), "{secret} in {shown}");
            assert!(!compact.contains(&bytes(secret)), "{secret} as bytes in {shown}");
        }
    }
}

/// A keep-alive server that closes each connection after its first answer, without saying so
/// (no `Connection: close`), the way a server's idle timer closes a kept-alive connection.
/// `closed` counts the connections it closed; `client_gone` those whose client then closed
/// its end too; `accepted` the connections made.
struct ClosingServer {
    port: u16,
    accepted: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    client_gone: Arc<AtomicUsize>,
}

impl ClosingServer {
    fn start() -> Self {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let client_gone = Arc::new(AtomicUsize::new(0));
        let counters = (Arc::clone(&accepted), Arc::clone(&closed), Arc::clone(&client_gone));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                counters.0.fetch_add(1, Ordering::SeqCst);
                let (closed, client_gone) = (Arc::clone(&counters.1), Arc::clone(&counters.2));
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream);
                    let mut len = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; len];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let text = String::from_utf8_lossy(&body).into_owned();
                    let req = Request {
                        method: "POST".into(),
                        path: "/mcp".into(),
                        headers: vec![],
                        body: text,
                        at: std::time::Instant::now(),
                    };
                    let resp = mcp_answer(&req);
                    let mut out = format!(
                        "HTTP/1.1 {} X\r\nContent-Length: {}\r\n",
                        resp.status,
                        resp.body.len()
                    );
                    for (n, v) in &resp.headers {
                        out.push_str(&format!("{n}: {v}\r\n"));
                    }
                    out.push_str("\r\n");
                    out.push_str(&resp.body);
                    let stream = reader.get_mut();
                    let _ = stream.write_all(out.as_bytes());
                    let _ = stream.shutdown(std::net::Shutdown::Write);
                    closed.fetch_add(1, Ordering::SeqCst);
                    let mut sink = [0u8; 512];
                    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
                    client_gone.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Self { port, accepted, closed, client_gone }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// Issue 25: the driver no longer peeks at an idle connection before each request. A
/// connection the server closed while idle becomes readable with the end of file, and a host
/// that polls retires it on that event (with no call pending, so nothing else could); the
/// next call goes on a new connection and succeeds.
#[test]
fn an_idle_connection_the_server_closed_is_retired_by_its_readiness_event() {
    let server = ClosingServer::start();
    let mut host = Host::new().unwrap();
    let id = add(&mut host, HttpOptions::new(server.url()));
    let state = host.wait_ready(id, Duration::from_secs(30)).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{state:?}");
    for round in 0..3 {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        // Every connection the server closed is closed by the client too, on its own poll.
        while server.client_gone.load(Ordering::SeqCst) < server.accepted.load(Ordering::SeqCst) {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: a closed connection was kept"
            );
            host.poll(Some(Duration::from_millis(50))).unwrap();
        }
        assert_eq!(echo(&mut host, id, "hi")["content"][0]["text"], "hi");
    }
}

/// A connection the server closed while the host was not polling, idle for longer than the
/// driver reuses one unchecked, is checked before use: the call goes on a new connection.
#[test]
fn an_idle_connection_closed_while_the_host_did_not_poll_is_not_used() {
    let server = ClosingServer::start();
    let mut host = Host::new().unwrap();
    let id = add(&mut host, HttpOptions::new(server.url()));
    host.wait_ready(id, Duration::from_secs(30)).unwrap();
    for _ in 0..2 {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while server.closed.load(Ordering::SeqCst) < server.accepted.load(Ordering::SeqCst) {
            assert!(std::time::Instant::now() < deadline, "the server did not close");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Longer than the driver's unchecked reuse (100 ms): a lower bound, not a race.
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(echo(&mut host, id, "hi")["content"][0]["text"], "hi");
    }
}

/// A host header the request writer sets itself (`Host`, `Content-Length`,
/// `Transfer-Encoding`) is refused when the server is added. It used to pass the setup check,
/// and then the request writer refused every request's head, so the driver sent none.
#[test]
fn a_header_the_request_writer_owns_is_refused_when_the_server_is_added() {
    for name in ["Content-Length", "host", "Transfer-Encoding"] {
        let mut host = Host::new().unwrap();
        let opts = HttpOptions::new("http://127.0.0.1:9/mcp").header(name, "1");
        match host.add_http_server(opts, Config::default()) {
            Err(AddServerError::Http(mcpoll::HttpSetupError::Header(refused))) => {
                assert_eq!(refused, name)
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // Any other token is a header the host may add.
    let mut host = Host::new().unwrap();
    let opts = HttpOptions::new("http://127.0.0.1:9/mcp").header("X-Content-Length", "1");
    assert!(host.add_http_server(opts, Config::default()).is_ok());
}

/// The pool's deadlines are the host's: once a call is done, the keep-alive connection it
/// used expires `idle_timeout` after its response ended, and that is the host's next deadline
/// (a host waiting in `poll` wakes for it). At that instant the connection is closed, and its
/// deadline is gone. Pins what `HttpDriver::poll_timeout` reports, which compares the pool's
/// idle and opening times before it makes deadlines of them.
#[test]
fn an_idle_connection_expires_at_the_hosts_next_deadline() {
    let server = MiniServer::start(None, mcp_answer);
    let mut host = Host::new().unwrap();
    let idle = Duration::from_secs(7);
    let due = idle_expiry_after_one_call(&mut host, &server, idle, idle);
    host.handle_timeout(due);
    assert!(host.poll_timeout().is_none_or(|next| next > due), "the expiry is still due");
}

/// A server mounted at `/mcp/` answers `POST /mcp` with a 307 to `/mcp/` (Starlette does):
/// the request goes again there, and so does every request after it. The old client failed
/// every request with `HttpStatus(307)` (the probe, and so the server).
#[test]
fn a_307_to_another_path_is_followed_and_kept() {
    let server = MiniServer::start(None, |req: &Request| match req.path.as_str() {
        "/mcp" => Response {
            status: 307,
            headers: vec![("Location".into(), "/mcp/".into())],
            body: String::new(),
        },
        _ => mcp_answer(req),
    });
    let mut host = Host::new().unwrap();
    let id = add(&mut host, HttpOptions::new(server.url("http", "127.0.0.1")));
    host.wait_ready(id, Duration::from_secs(30)).unwrap();
    assert_eq!(echo(&mut host, id, "hi")["content"][0]["text"], "hi");
    assert_eq!(echo(&mut host, id, "again")["content"][0]["text"], "again");
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/mcp", "/mcp/", "/mcp/", "/mcp/"]);
}

/// A server that says it closes idle connections sooner (`Keep-Alive: timeout=3`, as Apache
/// does) gets its connection closed a second before that, not after the host's own 7 s, when
/// a request written into it would meet the server's close.
#[test]
fn an_idle_connection_expires_before_the_servers_announced_timeout() {
    let server = MiniServer::start(None, |req: &Request| {
        let mut answer = mcp_answer(req);
        answer.headers.push(("Keep-Alive".into(), "timeout=3, max=100".into()));
        answer
    });
    let mut host = Host::new().unwrap();
    let (idle, kept) = (Duration::from_secs(7), Duration::from_secs(2));
    idle_expiry_after_one_call(&mut host, &server, idle, kept);
}

/// Calls `server` once with `idle` as the idle timeout and checks the host's next deadline is
/// the connection's expiry, `kept` after the call; returns that deadline.
fn idle_expiry_after_one_call(
    host: &mut Host,
    server: &MiniServer,
    idle: Duration,
    kept: Duration,
) -> std::time::Instant {
    let opts = HttpOptions::new(server.url("http", "127.0.0.1")).idle_timeout(idle);
    let id = add(host, opts);
    host.wait_ready(id, Duration::from_secs(30)).unwrap();
    let before = std::time::Instant::now();
    assert_eq!(echo(host, id, "hi")["content"][0]["text"], "hi");
    let after = std::time::Instant::now();
    let due = host.poll_timeout().expect("the idle connection's expiry");
    assert!(due >= before + kept && due <= after + kept, "{:?}", due - before);
    due
}

/// The pool's timeouts are the host's to choose, `Duration::MAX` ("never") among them. A
/// deadline made of one used to be `Instant + Duration`, which panics past the clock's range:
/// the first `poll` with a connection being opened, or one idle, panicked in the driver.
#[test]
fn timeouts_of_duration_max_mean_never_and_do_not_panic() {
    let server = MiniServer::start(None, mcp_answer);
    let mut host = Host::new().unwrap();
    let opts = HttpOptions::new(server.url("http", "127.0.0.1"))
        .idle_timeout(Duration::MAX)
        .connect_timeout(Duration::MAX);
    let id = add(&mut host, opts);
    host.wait_ready(id, Duration::from_secs(30)).unwrap();
    assert_eq!(echo(&mut host, id, "hi")["content"][0]["text"], "hi");
    let far = std::time::Instant::now() + Duration::from_secs(86_400 * 365);
    assert!(host.poll_timeout().is_none_or(|due| due > far), "{:?}", host.poll_timeout());
    host.poll(Some(Duration::ZERO)).unwrap();
}

/// A legacy server that pings the client on a call's own response stream and answers the
/// call only once the pong arrives: with `max_connections` 1 the call holds the pool, and the
/// pong must still get a connection (one past the limit) or both wait for the call's deadline.
#[test]
fn an_answer_to_the_server_gets_a_connection_while_the_calls_hold_the_pool() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::mpsc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (pong_tx, pong_rx) = mpsc::channel::<()>();
    let pong_rx = Arc::new(Mutex::new(pong_rx));
    std::thread::spawn(move || {
        for sock in listener.incoming().flatten() {
            let (pong_tx, pong_rx) = (pong_tx.clone(), Arc::clone(&pong_rx));
            std::thread::spawn(move || {
                let mut reader = BufReader::new(sock.try_clone().unwrap());
                let mut out = sock;
                loop {
                    let (mut method, mut length) = (String::new(), 0);
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if method.is_empty() {
                            method = line.split(' ').next().unwrap_or_default().to_owned();
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap();
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let msg: serde_json::Value =
                        serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                    let json = |v: serde_json::Value, extra: &str| {
                        let v = v.to_string();
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{v}",
                            v.len()
                        )
                    };
                    let reply = match (method.as_str(), msg["method"].as_str()) {
                        ("GET", _) => "HTTP/1.1 405 No\r\nContent-Length: 0\r\n\r\n".to_owned(),
                        (_, Some("initialize")) => json(
                            serde_json::json!({"jsonrpc": "2.0", "id": msg["id"], "result": {
                                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                "serverInfo": {"name": "pinger", "version": "1"}}}),
                            "Mcp-Session-Id: s-1\r\n",
                        ),
                        (_, Some("tools/call")) => {
                            let ping = r#"{"jsonrpc":"2.0","id":"p-1","method":"ping"}"#;
                            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                            let _ = out.write_all(format!("{head}data: {ping}\n\n").as_bytes());
                            let pong =
                                pong_rx.lock().unwrap().recv_timeout(Duration::from_secs(30));
                            let text = if pong.is_ok() { "after the pong" } else { "no pong" };
                            let result = serde_json::json!({"jsonrpc": "2.0", "id": msg["id"],
                                "result": {"content": [{"type": "text", "text": text}]}});
                            let _ = out.write_all(format!("data: {result}\n\n").as_bytes());
                            return;
                        }
                        (_, None) if msg["id"] == "p-1" => {
                            let _ = pong_tx.send(());
                            "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_owned()
                        }
                        _ => "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_owned(),
                    };
                    if out.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut host = Host::new().unwrap();
    let mut opts = HttpOptions::new(format!("http://127.0.0.1:{port}/mcp"));
    opts.max_connections = 1;
    let config = Config { era: mcpoll::EraPreference::LegacyOnly, ..Config::default() };
    let id = host.add_http_server(opts, config).unwrap();
    assert!(matches!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Ready(..)));
    let opts = CallOptions::timeout(Duration::from_secs(20));
    let r = host.call_tool_blocking(id, "echo", &raw(r#"{"text":"x"}"#), &opts).expect("the call");
    assert!(r.json.contains("after the pong"), "{}", r.json);
}
