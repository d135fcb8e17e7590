//! A tiny blocking HTTP/1.1 server and CONNECT proxy for TLS, proxy and auth tests: threads and
//! std sockets, loopback only. Not an MCP implementation: it answers what each test scripts.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The request target (`/mcp`, `/.well-known/...?x`).
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// When the server had read it whole.
    pub at: std::time::Instant,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// No answer at all: the server reads on until the client closes the connection, and
    /// records when (see [`MiniServer::eofs`]).
    pub fn stall() -> Self {
        Self { status: 0, headers: vec![], body: String::new() }
    }

    pub fn json(v: serde_json::Value) -> Self {
        Self {
            status: 200,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: v.to_string(),
        }
    }
}

/// A modern MCP answer for the few methods the tests use.
pub fn mcp_answer(req: &Request) -> Response {
    let msg = req.json();
    let id = msg["id"].clone();
    let result = match msg["method"].as_str() {
        Some("server/discover") => serde_json::json!({
            "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "ttlMs": 0, "cacheScope": "private"}),
        Some("initialize") => serde_json::json!({
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "mini", "version": "0"}}),
        Some("tools/call") => serde_json::json!({
            "resultType": "complete",
            "content": [{"type": "text", "text": msg["params"]["arguments"]["text"].clone()}]}),
        _ => return Response { status: 202, headers: vec![], body: String::new() },
    };
    Response::json(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// An authorization server for the client credentials grant (any client), known as
/// `http://{as_host}:{port}` (127.0.0.1, or a name the test's resolver maps): its metadata on
/// GET, and on the n-th token request (from 0) the token response `grant(n)`. Returns the
/// server and its URL.
pub fn client_credentials_as(
    as_host: &str,
    grant: impl Fn(usize) -> serde_json::Value + Send + Sync + 'static,
) -> (MiniServer, String) {
    let issuer: Arc<std::sync::OnceLock<String>> = Arc::default();
    let issuer2 = Arc::clone(&issuer);
    let grants = AtomicUsize::new(0);
    let auth = MiniServer::start(None, move |req: &Request| {
        let issuer = issuer2.get().cloned().unwrap_or_default();
        if req.method == "GET" {
            return Response::json(serde_json::json!({
                "issuer": issuer, "token_endpoint": format!("{issuer}/token"),
                "grant_types_supported": ["client_credentials"]}));
        }
        Response::json(grant(grants.fetch_add(1, Ordering::SeqCst)))
    });
    let as_url = format!("http://{as_host}:{}", auth.port);
    let _ = issuer.set(as_url.clone());
    (auth, as_url)
}

/// An MCP server protected by the authorization server at `as_url`: its protected-resource
/// metadata on GET; a POST gets `answer(request)`, or a bare 401 challenge when that is `None`
/// (no token it accepts).
pub fn protected_mcp_server(
    as_url: String,
    answer: impl Fn(&Request) -> Option<Response> + Send + Sync + 'static,
) -> MiniServer {
    let port: Arc<std::sync::OnceLock<u16>> = Arc::default();
    let port2 = Arc::clone(&port);
    let mcp = MiniServer::start(None, move |req: &Request| {
        let base = format!("http://127.0.0.1:{}", port2.get().copied().unwrap_or_default());
        if req.method == "GET" {
            return Response::json(serde_json::json!({
                "resource": format!("{base}/mcp"), "authorization_servers": [as_url]}));
        }
        answer(req).unwrap_or_else(|| {
            let headers = vec![("WWW-Authenticate".into(), "Bearer".into())];
            Response { status: 401, headers, body: String::new() }
        })
    });
    let _ = port.set(mcp.port);
    mcp
}

/// An authorization server granting the token `t1` (see [`client_credentials_as`]), and an MCP
/// server that answers only with that token.
pub fn client_credentials_servers(as_host: &str) -> (MiniServer, MiniServer) {
    let (auth, as_url) = client_credentials_as(
        as_host,
        |_| serde_json::json!({"access_token": "t1", "token_type": "Bearer", "expires_in": 3600}),
    );
    let mcp = protected_mcp_server(as_url, |req| {
        (req.header("authorization") == Some("Bearer t1")).then(|| mcp_answer(req))
    });
    (auth, mcp)
}

/// An authorization server's answer to `GET /authorize`: a redirect to `redirect` with the
/// code `c1`, the request's `state`, and `extra` appended to the query as is (`&iss=...`).
pub fn authorize_redirect(req: &Request, redirect: &str, extra: &str) -> Response {
    let query = req.path.split_once('?').map_or("", |(_, q)| q);
    let state = query.split('&').find_map(|p| p.strip_prefix("state=")).unwrap_or("");
    let location = format!("{redirect}?code=c1&state={state}{extra}");
    Response { status: 302, headers: vec![("Location".into(), location)], body: "".into() }
}

/// An authorization server's answer to a dynamic registration: the public client `dyn-1`.
pub fn registered() -> Response {
    let mut r = Response::json(serde_json::json!({
        "client_id": "dyn-1", "token_endpoint_auth_method": "none"}));
    r.status = 201;
    r
}

pub struct MiniServer {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Request>>>,
    /// When a client closed a connection the server was stalling on ([`Response::stall`]).
    pub eofs: Arc<Mutex<Vec<std::time::Instant>>>,
    /// Connections still to be dropped as soon as they are accepted (before a TLS handshake).
    drop_next: Arc<std::sync::atomic::AtomicUsize>,
    /// Connections accepted so far (dropped ones included).
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    /// Connections whose client closed them (or that broke) after they were served.
    ended: Arc<std::sync::atomic::AtomicUsize>,
}

impl MiniServer {
    /// Serves plain HTTP, or TLS with `tls`.
    pub fn start(
        tls: Option<Arc<rustls::ServerConfig>>,
        handler: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let eofs = Arc::new(Mutex::new(Vec::new()));
        let handler: Handler = Arc::new(handler);
        let (seen2, eofs2) = (Arc::clone(&seen), Arc::clone(&eofs));
        let drop_next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let drop_next2 = Arc::clone(&drop_next);
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let accepted2 = Arc::clone(&accepted);
        let ended = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let ended2 = Arc::clone(&ended);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                accepted2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let take = |n: usize| n.checked_sub(1);
                let ordering = std::sync::atomic::Ordering::SeqCst;
                if drop_next2.fetch_update(ordering, ordering, take).is_ok() {
                    drop(stream);
                    continue;
                }
                let (handler, tls) = (Arc::clone(&handler), tls.clone());
                let (seen, eofs) = (Arc::clone(&seen2), Arc::clone(&eofs2));
                let ended = Arc::clone(&ended2);
                std::thread::spawn(move || {
                    let _ = match tls {
                        Some(cfg) => match rustls::ServerConnection::new(cfg) {
                            Ok(conn) => serve(
                                rustls::StreamOwned::new(conn, stream),
                                &handler,
                                &seen,
                                &eofs,
                            ),
                            Err(_) => Ok(()),
                        },
                        None => serve(stream, &handler, &seen, &eofs),
                    };
                    ended.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                });
            }
        });
        Self { port, seen, eofs, drop_next, accepted, ended }
    }

    /// Drops the next `n` connections as soon as they are accepted: a TLS client sees its
    /// handshake cut.
    pub fn drop_next_connections(&self, n: usize) {
        self.drop_next.store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Connections that ended after being served (the client closed them, or they broke).
    pub fn ended(&self) -> usize {
        self.ended.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many of the connections [`drop_next_connections`](Self::drop_next_connections)
    /// named are still to come.
    pub fn drops_to_come(&self) -> usize {
        self.drop_next.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn url(&self, scheme: &str, host: &str) -> String {
        format!("{scheme}://{host}:{}/mcp", self.port)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve<S: Read + Write>(
    stream: S,
    handler: &Handler,
    seen: &Mutex<Vec<Request>>,
    eofs: &Mutex<Vec<std::time::Instant>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut words = line.split(' ');
        let method = words.next().unwrap_or_default().to_owned();
        let path = words.next().unwrap_or_default().to_owned();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((n, v)) = h.split_once(':') {
                headers.push((n.trim().to_owned(), v.trim().to_owned()));
            }
        }
        let len = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        let body = String::from_utf8_lossy(&body).into_owned();
        let req = Request { method, path, headers, body, at: std::time::Instant::now() };
        let resp = handler(&req);
        seen.lock().unwrap().push(req);
        if resp.status == 0 {
            // A close (or a TLS error for a close without close_notify) ends the wait.
            let mut sink = [0u8; 512];
            while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
            eofs.lock().unwrap().push(std::time::Instant::now());
            return Ok(());
        }
        let mut out =
            format!("HTTP/1.1 {} X\r\nContent-Length: {}\r\n", resp.status, resp.body.len());
        for (n, v) in &resp.headers {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        out.push_str("\r\n");
        out.push_str(&resp.body);
        let stream = reader.get_mut();
        stream.write_all(out.as_bytes())?;
        stream.flush()?;
    }
}

/// An HTTP CONNECT proxy that counts the tunnels it opened.
pub struct MiniProxy {
    pub port: u16,
    pub tunnels: Arc<AtomicUsize>,
    pub targets: Arc<Mutex<Vec<String>>>,
    /// While set ([`hold`](Self::hold)), CONNECTs are read but not answered: the client's
    /// connection stays "connecting".
    held: Arc<(Mutex<bool>, Condvar)>,
    /// How many of the next CONNECTs are refused (503).
    pub refuse: Arc<AtomicUsize>,
    /// Every CONNECT's target, in the order they were read.
    pub asked: Arc<Mutex<Vec<String>>>,
    /// CONNECTs to this target are answered only after this long (a proxy slow to reach it).
    pub slow: Arc<Mutex<Option<(String, Duration)>>>,
}

impl MiniProxy {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let tunnels = Arc::new(AtomicUsize::new(0));
        let targets = Arc::new(Mutex::new(Vec::new()));
        let gate = Gate::default();
        let (held, refuse, asked) =
            (Arc::clone(&gate.held), Arc::clone(&gate.refuse), Arc::clone(&gate.asked));
        let slow = Arc::clone(&gate.slow);
        let (t2, g2) = (Arc::clone(&tunnels), Arc::clone(&targets));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (t, g, gate) = (Arc::clone(&t2), Arc::clone(&g2), gate.clone());
                std::thread::spawn(move || {
                    let _ = tunnel(client, &t, &g, &gate);
                });
            }
        });
        Self { port, tunnels, targets, held, refuse, asked, slow }
    }

    /// Holds the CONNECTs read from now on unanswered (`true`), or answers them (`false`).
    pub fn hold(&self, on: bool) {
        let (held, released) = &*self.held;
        *held.lock().unwrap() = on;
        if !on {
            released.notify_all();
        }
    }
}

#[derive(Clone, Default)]
struct Gate {
    held: Arc<(Mutex<bool>, Condvar)>,
    refuse: Arc<AtomicUsize>,
    asked: Arc<Mutex<Vec<String>>>,
    slow: Arc<Mutex<Option<(String, Duration)>>>,
}

fn tunnel(
    client: TcpStream,
    count: &AtomicUsize,
    targets: &Mutex<Vec<String>>,
    gate: &Gate,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (Some("CONNECT"), Some(target)) = (parts.next(), parts.next()) else {
        return (&client).write_all(b"HTTP/1.1 405 Only CONNECT\r\nContent-Length: 0\r\n\r\n");
    };
    let target = target.to_owned();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        if h.trim_end().is_empty() {
            break;
        }
    }
    gate.asked.lock().unwrap().push(target.clone());
    let refused =
        gate.refuse.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    if refused.is_ok() {
        return (&client).write_all(b"HTTP/1.1 503 No\r\nContent-Length: 0\r\n\r\n");
    }
    let (held, released) = &*gate.held;
    drop(released.wait_while(held.lock().unwrap(), |on| *on).unwrap());
    let delay = gate.slow.lock().unwrap().as_ref().filter(|(t, _)| *t == target).map(|s| s.1);
    if let Some(delay) = delay {
        std::thread::sleep(delay);
    }
    let upstream = TcpStream::connect(&target)?;
    targets.lock().unwrap().push(target);
    count.fetch_add(1, Ordering::SeqCst);
    (&client).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    let (mut c2, mut u2) = (client.try_clone()?, upstream.try_clone()?);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut u2, &mut c2);
        // The origin closed: so does the tunnel, as a proxy relays it.
        let _ = c2.shutdown(std::net::Shutdown::Both);
    });
    let mut u = upstream;
    let _ = std::io::copy(&mut reader, &mut u);
    Ok(())
}
