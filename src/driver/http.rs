//! Streamable HTTP on mio sockets: a small keep-alive pool per server, one exchange (a POST and
//! its response) per connection at a time, TLS by [`tls`](super::tls), CONNECT proxies.
//!
//! Each message the engine sends becomes one POST. A reply is either one JSON body or an SSE
//! stream carrying progress and then the reply; the body is always parsed before the status is
//! trusted (servers send JSON-RPC errors with 200 and with 4xx). What a bare status means is
//! the engine's call: the driver reports it as [`ExchangeFailure`].
//!
//! Name resolution uses the system resolver, which blocks: it runs when the server is added
//! and again only after every known address failed to connect, never per call.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use slab::Slab;
use smallvec::SmallVec;

use crate::codec::http1::{self, Limits, RequestHead, ResponseEvent, ResponseParser};
use crate::codec::sse::SseParser;
use crate::driver::tls::{tls_failure, TlsConfig, TlsOptions, TlsSession, TlsSetupError};
use crate::driver::url::{proxy_for, HttpUrl, ProxyChoice, Scheme, UrlError};
use crate::engine::{Engine, ExchangeFailure, TransmitKind, TransportEvent, TransportKind, WireId};
use crate::error::{AuthChallenge, TransportError};
use crate::proto::mcp::Method;
use crate::proto::version::{Era, ProtocolVersion};

/// Supplies bearer tokens. mcpoll never logs them.
pub trait TokenProvider: fmt::Debug {
    /// The token to send now, if any.
    fn token(&mut self) -> Option<String>;
    /// The server refused the last token (HTTP 401): a fresh one, or `None` to give up.
    fn refresh(&mut self) -> Option<String>;
}

/// A fixed token (the `--bearer` case): refreshing yields nothing new.
#[derive(Clone)]
pub struct StaticToken(pub String);

impl fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StaticToken(<redacted>)")
    }
}

impl TokenProvider for StaticToken {
    fn token(&mut self) -> Option<String> {
        Some(self.0.clone())
    }
    fn refresh(&mut self) -> Option<String> {
        None
    }
}

/// How to reach one HTTP server.
#[derive(Debug)]
#[non_exhaustive]
pub struct HttpOptions {
    /// The MCP endpoint, e.g. `https://host/mcp`.
    pub url: String,
    /// Extra headers sent on every request.
    pub headers: Vec<(String, String)>,
    /// Where bearer tokens come from.
    pub token_provider: Option<Box<dyn TokenProvider>>,
    /// Certificate trust and client certificates.
    pub tls: TlsOptions,
    /// Direct, from the environment (default), or an explicit CONNECT proxy.
    pub proxy: ProxyChoice,
    /// Most connections used for calls at once (the legacy GET stream has its own).
    pub max_connections: usize,
    /// An idle keep-alive connection is closed after this long.
    pub idle_timeout: Duration,
    /// A connection attempt (TCP, proxy and TLS) fails after this long.
    pub connect_timeout: Duration,
    /// Largest response head accepted.
    pub max_head_bytes: usize,
    /// More instances of the same stateless (2026-07-28) server, e.g. behind no load balancer:
    /// after a connection to one fails, new connections go to the next, so a retried call lands
    /// elsewhere. Legacy servers keep sessions on one instance and never rotate.
    pub alternates: Vec<String>,
}

impl HttpOptions {
    /// Options for `url` with every default.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: Vec::new(),
            token_provider: None,
            tls: TlsOptions::default(),
            proxy: ProxyChoice::FromEnv,
            max_connections: 4,
            idle_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_head_bytes: 16 * 1024,
            alternates: Vec::new(),
        }
    }

    /// Sends `Authorization: Bearer <token>` on every request.
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.token_provider = Some(Box::new(StaticToken(token.into())));
        self
    }

    /// Adds a header to every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// Why an HTTP server could not be added.
#[derive(Debug)]
#[non_exhaustive]
pub enum HttpSetupError {
    /// The URL (or the proxy URL) is not valid.
    Url(UrlError),
    /// The host name did not resolve.
    Resolve(io::Error),
    /// The TLS options are not usable.
    Tls(TlsSetupError),
    /// A configured header is not a valid HTTP header.
    Header(String),
}

impl fmt::Display for HttpSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(e) => write!(f, "{e}"),
            Self::Resolve(e) => write!(f, "cannot resolve the server's host: {e}"),
            Self::Tls(e) => write!(f, "{e}"),
            Self::Header(h) => write!(f, "invalid header {h:?}"),
        }
    }
}

impl std::error::Error for HttpSetupError {}

/// What one exchange carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carries {
    Request {
        id: WireId,
        method: Method,
    },
    /// A notification or a reply to a server request: 202 expected, nothing to report.
    Message,
    /// The legacy server-to-client GET stream.
    Listen,
}

/// One POST (or GET) and what it needs to be written again (a 401 retry).
#[derive(Debug, Default)]
struct Exchange {
    carries: Option<Carries>,
    body: Vec<u8>,
    /// `Mcp-Name`, already encoded for a header.
    name: Vec<u8>,
    /// `Mcp-Param-*` headers as `name\0value\0` pairs.
    params: Vec<u8>,
    version: Option<ProtocolVersion>,
    modern: bool,
    auth_retried: bool,
    sent_session: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnPhase {
    Connecting,
    /// CONNECT sent to the proxy; waiting for its 200.
    Tunnelling,
    Open,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyMode {
    Json,
    Sse,
}

#[derive(Debug)]
struct Conn {
    sock: TcpStream,
    tls: Option<TlsSession>,
    phase: ConnPhase,
    started: Instant,
    out: Vec<u8>,
    written: usize,
    plain: Vec<u8>,
    parser: ResponseParser,
    /// Exchange slot in flight on this connection.
    exchange: Option<usize>,
    status: u16,
    mode: BodyMode,
    body: Vec<u8>,
    sse: SseParser,
    challenge: Option<AuthChallenge>,
    idle_since: Option<Instant>,
    dedicated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listen {
    /// Not wanted (modern era, or not ready yet).
    Off,
    /// Open it at this time.
    At(Instant),
    /// Open on this connection.
    Open(usize),
    /// The server has none (405) or refused it: never again for this session.
    Unsupported,
}

const TOKEN_CONNS: usize = 128;
/// Tokens an HTTP driver uses, from its base token.
pub const TOKENS_PER_DRIVER: usize = TOKEN_CONNS;

/// One instance of the server: where it is and how to reach it.
#[derive(Debug, Clone)]
struct Instance {
    url: HttpUrl,
    host_header: String,
    proxy: Option<HttpUrl>,
    addrs: Vec<SocketAddr>,
}

/// Drives one Streamable HTTP server for one [`Engine`].
#[derive(Debug)]
pub struct HttpDriver {
    /// The other instances, when the host named alternates; rotated in on connection failure.
    standby: VecDeque<Instance>,
    url: HttpUrl,
    host_header: String,
    proxy: Option<HttpUrl>,
    addrs: Vec<SocketAddr>,
    next_addr: usize,
    tls: Option<TlsConfig>,
    headers: Vec<(String, String)>,
    tokens: Option<Box<dyn TokenProvider>>,
    token: Option<String>,
    base: Token,
    max_conns: usize,
    idle_timeout: Duration,
    connect_timeout: Duration,
    limits: Limits,
    max_event: usize,
    conns: Slab<Conn>,
    exchanges: Vec<Exchange>,
    free_exchanges: Vec<usize>,
    waiting: VecDeque<usize>,
    session: Option<String>,
    listen: Listen,
    listen_retry: Duration,
    last_event_id: Option<String>,
    frame: Vec<u8>,
    read_buf: Box<[u8]>,
}

impl HttpDriver {
    /// Parses the URL, resolves the host (blocking, once), builds TLS, and tells the engine
    /// the transport is open. Connections are made on demand.
    pub fn new(
        opts: HttpOptions,
        config: &crate::Config,
        base: Token,
        engine: &mut Engine,
        now: Instant,
    ) -> Result<Self, HttpSetupError> {
        let url = HttpUrl::parse(&opts.url).map_err(HttpSetupError::Url)?;
        let proxy = proxy_for(&url, &opts.proxy).map_err(HttpSetupError::Url)?;
        for (name, value) in &opts.headers {
            let ok = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b))
                && !value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0);
            if !ok {
                return Err(HttpSetupError::Header(name.clone()));
            }
        }
        let tls = match url.scheme {
            Scheme::Https => Some(TlsConfig::new(&opts.tls).map_err(HttpSetupError::Tls)?),
            Scheme::Http => None,
        };
        let mut tokens = opts.token_provider;
        let token = tokens.as_mut().and_then(|t| t.token());
        let mut driver = Self {
            standby: VecDeque::new(),
            host_header: url.host_header(),
            url,
            proxy,
            addrs: Vec::new(),
            next_addr: 0,
            tls,
            headers: opts.headers,
            tokens,
            token,
            base,
            max_conns: opts.max_connections.clamp(1, TOKEN_CONNS - 2),
            idle_timeout: opts.idle_timeout,
            connect_timeout: opts.connect_timeout,
            limits: Limits {
                max_head_bytes: opts.max_head_bytes,
                max_body_bytes: config.max_message_bytes as u64,
            },
            max_event: config.max_message_bytes,
            conns: Slab::with_capacity(8),
            exchanges: Vec::new(),
            free_exchanges: Vec::new(),
            waiting: VecDeque::with_capacity(64),
            session: None,
            listen: Listen::Off,
            listen_retry: Duration::from_secs(1),
            last_event_id: None,
            frame: Vec::with_capacity(4096),
            read_buf: vec![0; 64 * 1024].into_boxed_slice(),
        };
        driver.resolve().map_err(HttpSetupError::Resolve)?;
        for alt in &opts.alternates {
            let url = HttpUrl::parse(alt).map_err(HttpSetupError::Url)?;
            let proxy = proxy_for(&url, &opts.proxy).map_err(HttpSetupError::Url)?;
            let (host, port) =
                proxy.as_ref().map_or((url.host.as_str(), url.port), |p| (p.host.as_str(), p.port));
            let addrs: Vec<SocketAddr> =
                (host, port).to_socket_addrs().map_err(HttpSetupError::Resolve)?.collect();
            driver.standby.push_back(Instance {
                host_header: url.host_header(),
                url,
                proxy,
                addrs,
            });
        }
        engine.handle_transport(now, TransportEvent::opened_as(TransportKind::Http));
        Ok(driver)
    }

    fn resolve(&mut self) -> io::Result<()> {
        let (host, port) = match &self.proxy {
            Some(p) => (p.host.as_str(), p.port),
            None => (self.url.host.as_str(), self.url.port),
        };
        self.addrs = (host, port).to_socket_addrs()?.collect();
        self.next_addr = 0;
        if self.addrs.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no address for host"));
        }
        Ok(())
    }

    /// `true` when `token` belongs to this driver.
    pub fn owns(&self, token: Token) -> bool {
        token.0.wrapping_sub(self.base.0) < TOKENS_PER_DRIVER
    }

    /// The legacy session id, when the server issued one.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Open connections (for tests and diagnostics).
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The driver's own next deadline: a connect timeout, an idle expiry, a GET stream retry.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let conns = self.conns.iter().filter_map(|(_, c)| match (c.phase, c.idle_since) {
            (ConnPhase::Open, Some(idle)) => Some(idle + self.idle_timeout),
            (ConnPhase::Open, None) => None,
            _ => Some(c.started + self.connect_timeout),
        });
        let listen = match self.listen {
            Listen::At(t) => Some(t),
            _ => None,
        };
        conns.chain(listen).min()
    }

    /// Closes idle and timed-out connections, reopens the GET stream when due.
    pub fn handle_timeout(&mut self, registry: &Registry, engine: &mut Engine, now: Instant) {
        let expired: SmallVec<[(usize, bool); 8]> = self
            .conns
            .iter()
            .filter_map(|(k, c)| match (c.phase, c.idle_since) {
                (ConnPhase::Open, Some(idle)) if now >= idle + self.idle_timeout => {
                    Some((k, false))
                }
                (ConnPhase::Connecting | ConnPhase::Tunnelling, _)
                    if now >= c.started + self.connect_timeout =>
                {
                    Some((k, true))
                }
                _ => None,
            })
            .collect();
        for (k, timed_out) in expired {
            let failure = TransportError::ConnectFailed(io::ErrorKind::TimedOut);
            self.drop_conn(registry, engine, now, k, timed_out.then_some(failure));
        }
        self.flush(registry, engine, now);
    }

    // ----- outgoing ------------------------------------------------------------------------

    /// Turns the engine's transmits into exchanges and starts what can start.
    pub fn flush(&mut self, registry: &Registry, engine: &mut Engine, now: Instant) {
        loop {
            self.frame.clear();
            let Some(t) = engine.poll_transmit(now, &mut self.frame) else { break };
            match t.kind {
                TransmitKind::CloseStream { id } => self.close_stream(registry, id),
                TransmitKind::Request { id, method } => {
                    if method == Method::Initialize {
                        // A new handshake starts a new session; the old id must not be sent.
                        self.session = None;
                        self.listen = Listen::Off;
                    }
                    let carries = Carries::Request { id, method };
                    Self::enqueue(
                        &mut self.exchanges,
                        &mut self.free_exchanges,
                        &mut self.waiting,
                        &self.frame,
                        &t,
                        carries,
                    );
                }
                _ => Self::enqueue(
                    &mut self.exchanges,
                    &mut self.free_exchanges,
                    &mut self.waiting,
                    &self.frame,
                    &t,
                    Carries::Message,
                ),
            }
        }
        self.maybe_listen(engine, now);
        self.dispatch(registry, engine, now);
    }

    fn take_exchange(&mut self) -> usize {
        match self.free_exchanges.pop() {
            Some(i) => i,
            None => {
                self.exchanges.push(Exchange::default());
                self.exchanges.len() - 1
            }
        }
    }

    fn release_exchange(&mut self, i: usize) {
        if let Some(x) = self.exchanges.get_mut(i) {
            x.carries = None;
            self.free_exchanges.push(i);
        }
    }

    fn enqueue(
        exchanges: &mut Vec<Exchange>,
        free: &mut Vec<usize>,
        waiting: &mut VecDeque<usize>,
        frame: &[u8],
        t: &crate::engine::Transmit<'_>,
        carries: Carries,
    ) {
        let version = t.version();
        let modern = version.is_some_and(|v| v.era() == Era::Modern);
        let i = free.pop().unwrap_or_else(|| {
            exchanges.push(Exchange::default());
            exchanges.len() - 1
        });
        let x = &mut exchanges[i];
        x.carries = Some(carries);
        x.body.clear();
        x.body.extend_from_slice(frame);
        x.name.clear();
        x.params.clear();
        if let (Carries::Request { method: Method::ToolsCall, .. }, true) = (carries, modern) {
            for (name, value) in t.param_headers() {
                x.params.extend_from_slice(name.as_bytes());
                x.params.push(0);
                x.params.extend_from_slice(value);
                x.params.push(0);
            }
        }
        if let (Carries::Request { method, .. }, true) = (carries, modern) {
            if matches!(method, Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead) {
                if let Some(name) = t.name() {
                    crate::proto::header_value::encode(&mut x.name, name);
                }
            }
        }
        x.version = version;
        x.modern = modern;
        x.auth_retried = false;
        x.sent_session = false;
        waiting.push_back(i);
    }

    /// Modern HTTP cancellation: close the response stream of request `id`.
    fn close_stream(&mut self, registry: &Registry, id: WireId) {
        let is_it =
            |x: &Exchange| matches!(x.carries, Some(Carries::Request { id: xid, .. }) if xid == id);
        if let Some(pos) =
            self.waiting.iter().position(|&i| self.exchanges.get(i).is_some_and(is_it))
        {
            if let Some(i) = self.waiting.remove(pos) {
                self.release_exchange(i);
            }
            return;
        }
        let conn = self
            .conns
            .iter()
            .find(|(_, c)| c.exchange.and_then(|i| self.exchanges.get(i)).is_some_and(is_it));
        if let Some((k, _)) = conn {
            log::trace!("closing the response stream of request {id} (cancellation)");
            self.close_quietly(registry, k);
        }
    }

    /// Opens the legacy GET stream once the handshake is done.
    fn maybe_listen(&mut self, engine: &Engine, now: Instant) {
        let legacy_ready = matches!(engine.state(), crate::ServerState::Ready(Era::Legacy, _));
        match self.listen {
            Listen::Off if legacy_ready => self.listen = Listen::At(now),
            Listen::At(t) if legacy_ready && now >= t => {
                let i = self.take_exchange();
                // SAFETY-style note: as in `enqueue`, the index is in range.
                let x = &mut self.exchanges[i];
                x.carries = Some(Carries::Listen);
                x.body.clear();
                x.name.clear();
                x.params.clear();
                x.version = match engine.state() {
                    crate::ServerState::Ready(_, v) => Some(v),
                    _ => None,
                };
                x.modern = false;
                x.auth_retried = false;
                self.listen = Listen::Open(usize::MAX);
                self.waiting.push_front(i);
            }
            _ => {}
        }
    }

    /// Gives waiting exchanges to idle connections, opening new ones up to the limit.
    fn dispatch(&mut self, registry: &Registry, engine: &mut Engine, now: Instant) {
        while let Some(&i) = self.waiting.front() {
            let listen =
                matches!(self.exchanges.get(i).and_then(|x| x.carries), Some(Carries::Listen));
            let idle = self.live_idle_connection(registry);
            let k = match idle {
                Some(k) if !listen => k,
                _ => {
                    let busy = self.conns.iter().filter(|(_, c)| !c.dedicated).count();
                    if !listen && busy >= self.max_conns {
                        return;
                    }
                    match self.connect(registry, now) {
                        Ok(k) => k,
                        Err(e) => {
                            self.waiting.pop_front();
                            self.fail_exchange(
                                engine,
                                now,
                                i,
                                TransportError::ConnectFailed(e.kind()),
                            );
                            continue;
                        }
                    }
                }
            };
            self.waiting.pop_front();
            if let Some(c) = self.conns.get_mut(k) {
                c.exchange = Some(i);
                c.idle_since = None;
                c.dedicated = listen;
            }
            if listen {
                self.listen = Listen::Open(k);
            }
            if self.conns.get(k).is_some_and(|c| c.phase == ConnPhase::Open) {
                self.start_exchange(registry, engine, now, k);
            }
        }
    }

    /// An idle keep-alive connection that is still open. Servers close idle connections on
    /// their own schedule (uvicorn after 5 s); a peek finds those before a request is put on
    /// one, so no request has to be resent because its connection was already dead.
    fn live_idle_connection(&mut self, registry: &Registry) -> Option<usize> {
        loop {
            let k = self
                .conns
                .iter()
                .find(|(_, c)| c.phase == ConnPhase::Open && c.exchange.is_none() && !c.dedicated)
                .map(|(k, _)| k)?;
            let alive = match self.conns.get(k).map(|c| c.sock.peek(&mut [0u8; 1])) {
                Some(Err(e)) => e.kind() == io::ErrorKind::WouldBlock,
                // EOF, or bytes nobody asked for: either way the connection is unusable.
                _ => false,
            };
            if alive {
                return Some(k);
            }
            log::trace!("dropping a keep-alive connection the server closed");
            self.close_quietly(registry, k);
        }
    }

    fn connect(&mut self, registry: &Registry, now: Instant) -> io::Result<usize> {
        if self.conns.len() >= TOKEN_CONNS {
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, "connection table full"));
        }
        if self.next_addr >= self.addrs.len() {
            // Every known address failed: ask the resolver again (this blocks).
            self.resolve()?;
        }
        // SAFETY-style note: `resolve` succeeded with at least one address and reset the index.
        let addr = self.addrs[self.next_addr];
        let mut sock = TcpStream::connect(addr)?;
        let _ = sock.set_nodelay(true);
        let entry = self.conns.vacant_entry();
        let k = entry.key();
        registry.register(
            &mut sock,
            Token(self.base.0 + k),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        entry.insert(Conn {
            sock,
            tls: None,
            phase: ConnPhase::Connecting,
            started: now,
            out: Vec::with_capacity(2048),
            written: 0,
            plain: Vec::with_capacity(8192),
            parser: ResponseParser::new(self.limits),
            exchange: None,
            status: 0,
            mode: BodyMode::Json,
            body: Vec::new(),
            sse: SseParser::new(self.max_event),
            challenge: None,
            idle_since: None,
            dedicated: false,
        });
        Ok(k)
    }

    /// Writes the exchange's request into the connection's buffer and sends what it can.
    fn start_exchange(&mut self, registry: &Registry, engine: &mut Engine, now: Instant, k: usize) {
        let Some(i) = self.conns.get(k).and_then(|c| c.exchange) else { return };
        {
            let Some(x) = self.exchanges.get_mut(i) else { return };
            let Some(c) = self.conns.get_mut(k) else { return };
            c.out.clear();
            c.written = 0;
            c.status = 0;
            c.body.clear();
            c.mode = BodyMode::Json;
            c.challenge = None;
            c.sse = SseParser::new(self.max_event);
            let mut bearer: SmallVec<[u8; 256]> = SmallVec::new();
            if let Some(t) = &self.token {
                bearer.extend_from_slice(b"Bearer ");
                bearer.extend_from_slice(t.as_bytes());
            }
            let mut headers: SmallVec<[(&str, &[u8]); 16]> = SmallVec::new();
            let listen = x.carries == Some(Carries::Listen);
            if listen {
                headers.push(("Accept", b"text/event-stream"));
            } else {
                headers.push(("Content-Type", b"application/json"));
                headers.push(("Accept", b"application/json, text/event-stream"));
            }
            if let Some(v) = x.version {
                headers.push(("MCP-Protocol-Version", v.as_str().as_bytes()));
            }
            if let (true, Some(Carries::Request { method, .. })) = (x.modern, x.carries) {
                headers.push(("Mcp-Method", method.as_str().as_bytes()));
                if !x.name.is_empty() {
                    headers.push(("Mcp-Name", &x.name));
                }
                let mut parts = x.params.split(|&b| b == 0);
                while let (Some(name), Some(value)) = (parts.next(), parts.next()) {
                    if let (Ok(name), false) = (std::str::from_utf8(name), name.is_empty()) {
                        headers.push((name, value));
                    }
                }
            }
            let is_initialize =
                matches!(x.carries, Some(Carries::Request { method: Method::Initialize, .. }));
            x.sent_session = false;
            if let (Some(s), false, false) = (&self.session, x.modern, is_initialize) {
                headers.push(("Mcp-Session-Id", s.as_bytes()));
                x.sent_session = true;
            }
            if !bearer.is_empty() {
                headers.push(("Authorization", &bearer));
            }
            if let (true, Some(id)) = (listen, &self.last_event_id) {
                headers.push(("Last-Event-ID", id.as_bytes()));
            }
            for (n, v) in &self.headers {
                headers.push((n.as_str(), v.as_bytes()));
            }
            let head = RequestHead {
                method: if listen { "GET" } else { "POST" },
                target: &self.url.target,
                host: &self.host_header,
                headers: &headers,
            };
            if let Err(e) = http1::write_request(&mut c.out, &head, &x.body) {
                // Only caller-supplied values can be refused here; they were checked at setup.
                log::debug!("request head refused: {e:?}");
            }
        }
        if let Err(e) = self.write_conn(k) {
            self.on_conn_error(registry, engine, now, k, &e);
        }
    }

    /// Sends the connection's buffered request bytes (through TLS when there is TLS).
    fn write_conn(&mut self, k: usize) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(k) else { return Ok(()) };
        match c.tls.as_mut() {
            Some(tls) => {
                if c.written < c.out.len() {
                    tls.write_plaintext(&c.out[c.written..])?;
                    c.written = c.out.len();
                }
                tls.flush(&mut c.sock)
            }
            None => {
                while c.written < c.out.len() {
                    match c.sock.write(&c.out[c.written..]) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => c.written += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
        }
    }

    // ----- incoming ------------------------------------------------------------------------

    /// Handles a readiness event for one of this driver's connections.
    pub fn handle_readiness(
        &mut self,
        registry: &Registry,
        token: Token,
        engine: &mut Engine,
        now: Instant,
    ) {
        let k = token.0.wrapping_sub(self.base.0);
        if !self.conns.contains(k) {
            return;
        }
        let result = self.drive_conn(registry, engine, now, k);
        if let Err(e) = result {
            self.on_conn_error(registry, engine, now, k, &e);
        }
        self.flush(registry, engine, now);
    }

    fn drive_conn(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        k: usize,
    ) -> io::Result<()> {
        let phase = self.conns.get(k).map(|c| c.phase);
        if phase == Some(ConnPhase::Connecting) {
            let Some(c) = self.conns.get_mut(k) else { return Ok(()) };
            if let Some(e) = c.sock.take_error()? {
                return Err(e);
            }
            match c.sock.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(()),
                Err(e) => return Err(e),
            }
            self.on_connected(k)?;
        }
        if self.conns.get(k).map(|c| c.phase) == Some(ConnPhase::Tunnelling) {
            self.read_tunnel(k)?;
        }
        if self.conns.get(k).map(|c| c.phase) != Some(ConnPhase::Open) {
            return Ok(());
        }
        if self.conns.get(k).is_some_and(|c| c.exchange.is_some() && c.out.is_empty()) {
            self.start_exchange(registry, engine, now, k);
        } else {
            self.write_conn(k)?;
        }
        self.read_conn(registry, engine, now, k)
    }

    /// TCP is up: start the proxy tunnel, or TLS, or nothing.
    fn on_connected(&mut self, k: usize) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(k) else { return Ok(()) };
        if self.proxy.is_some() {
            // Authority-form target (RFC 9110 §9.3.6), which the origin-form writer refuses.
            let authority = self.url.authority();
            c.out.clear();
            c.written = 0;
            c.out.extend_from_slice(b"CONNECT ");
            c.out.extend_from_slice(authority.as_bytes());
            c.out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
            c.out.extend_from_slice(authority.as_bytes());
            c.out.extend_from_slice(b"\r\n\r\n");
            c.phase = ConnPhase::Tunnelling;
            c.parser = ResponseParser::new(self.limits);
            return self.write_conn(k);
        }
        self.start_tls_or_open(k)
    }

    fn start_tls_or_open(&mut self, k: usize) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(k) else { return Ok(()) };
        c.out.clear();
        c.written = 0;
        if let Some(tls) = &self.tls {
            let mut session = tls
                .session(&self.url.host)
                .map_err(|f| io::Error::other(crate::driver::tls::TlsError(f)))?;
            session.flush(&mut c.sock)?;
            c.tls = Some(session);
        }
        c.phase = ConnPhase::Open;
        c.parser = ResponseParser::new(self.limits);
        Ok(())
    }

    /// Reads the proxy's answer to CONNECT: a 2xx opens the tunnel.
    fn read_tunnel(&mut self, k: usize) -> io::Result<()> {
        self.write_conn(k)?;
        loop {
            let Some(c) = self.conns.get_mut(k) else { return Ok(()) };
            let n = match c.sock.read(&mut self.read_buf) {
                Ok(0) => return Err(io::ErrorKind::ConnectionAborted.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            c.parser.push(&self.read_buf[..n]);
            while let Some(ev) = c.parser.next() {
                match ev {
                    Ok(ResponseEvent::Head(head)) if (200..300).contains(&head.status()) => {
                        return self.start_tls_or_open(k);
                    }
                    Ok(ResponseEvent::Head(head)) => {
                        log::debug!("proxy refused CONNECT with {}", head.status());
                        return Err(io::Error::new(
                            io::ErrorKind::ConnectionRefused,
                            "proxy refused CONNECT",
                        ));
                    }
                    Ok(_) => {}
                    Err(_) => return Err(io::Error::other("bad proxy response")),
                }
            }
        }
    }

    fn read_conn(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        k: usize,
    ) -> io::Result<()> {
        loop {
            let Some(c) = self.conns.get_mut(k) else { return Ok(()) };
            c.plain.clear();
            let eof = match c.tls.as_mut() {
                Some(tls) => {
                    let r = tls.read(&mut c.sock, &mut c.plain)?;
                    // TLS may have produced handshake bytes to send.
                    tls.flush(&mut c.sock)?;
                    match r {
                        None => true,
                        Some(0) => return Ok(()),
                        Some(_) => false,
                    }
                }
                None => match c.sock.read(&mut self.read_buf) {
                    Ok(0) => true,
                    Ok(n) => {
                        c.plain.extend_from_slice(&self.read_buf[..n]);
                        false
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                },
            };
            if c.tls.as_ref().is_some_and(|t| !t.is_handshaking()) && c.written < c.out.len() {
                self.write_conn(k)?;
            }
            let Some(c) = self.conns.get_mut(k) else { return Ok(()) };
            if !c.plain.is_empty() {
                let plain = std::mem::take(&mut c.plain);
                c.parser.push(&plain);
                if let Some(c) = self.conns.get_mut(k) {
                    c.plain = plain;
                }
            }
            if eof {
                if let Some(c) = self.conns.get_mut(k) {
                    c.parser.eof();
                }
            }
            let closed = self.parse_responses(registry, engine, now, k)?;
            if eof || closed {
                if self.conns.contains(k) {
                    let lost = self.conns.get(k).and_then(|c| c.exchange).is_some();
                    let failure = lost.then_some(TransportError::ConnectionLost);
                    self.drop_conn(registry, engine, now, k, failure);
                }
                return Ok(());
            }
        }
    }

    /// Runs the response parser; returns `true` when the connection must close.
    fn parse_responses(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        k: usize,
    ) -> io::Result<bool> {
        loop {
            let Some(c) = self.conns.get_mut(k) else { return Ok(true) };
            if c.mode == BodyMode::Sse && c.status != 0 {
                // An event stream is endless by design; each event has its own cap instead.
                c.parser.set_max_body_bytes(u64::MAX);
            }
            let Some(ev) = c.parser.next() else { return Ok(false) };
            let Some(i) = c.exchange else {
                // Bytes nobody asked for: the connection is out of step; close it.
                return Ok(true);
            };
            match ev {
                Err(e) => {
                    log::debug!("bad HTTP response: {e:?}");
                    c.exchange = None;
                    // A response cut off by the connection closing is a lost connection (a
                    // transient failure); anything else is a broken response.
                    let error = match e {
                        http1::HttpError::Truncated => TransportError::ConnectionLost,
                        _ => TransportError::BadResponse,
                    };
                    self.fail_exchange(engine, now, i, error);
                    return Ok(true);
                }
                Ok(ResponseEvent::Head(head)) => {
                    c.status = head.status();
                    let sse = head
                        .header("content-type")
                        .is_some_and(|v| starts_with_ci(v, b"text/event-stream"));
                    c.mode = if sse && (200..300).contains(&c.status) {
                        BodyMode::Sse
                    } else {
                        BodyMode::Json
                    };
                    if matches!(c.status, 401 | 403) {
                        c.challenge = head
                            .header("www-authenticate")
                            .and_then(http1::parse_www_authenticate)
                            .map(|b| AuthChallenge {
                                resource_metadata: b.resource_metadata,
                                scope: b.scope,
                                error: b.error,
                                error_description: b.error_description,
                            });
                    }
                    let session =
                        head.header("mcp-session-id").and_then(|v| std::str::from_utf8(v).ok());
                    let is_init = matches!(
                        self.exchanges.get(i).and_then(|x| x.carries),
                        Some(Carries::Request { method: Method::Initialize, .. })
                    );
                    if let (Some(s), true, true) =
                        (session, is_init, (200..300).contains(&c.status))
                    {
                        if s.bytes().all(|b| b.is_ascii_graphic()) {
                            self.session = Some(s.to_owned());
                        }
                    }
                }
                Ok(ResponseEvent::Body(chunk)) => match c.mode {
                    BodyMode::Json => {
                        if (c.body.len() + chunk.len()) as u64 > self.limits.max_body_bytes {
                            c.exchange = None;
                            self.fail_exchange(engine, now, i, TransportError::BadResponse);
                            return Ok(true);
                        }
                        c.body.extend_from_slice(chunk);
                    }
                    BodyMode::Sse => {
                        c.sse.push(chunk);
                        let carries = self.exchanges.get(i).and_then(|x| x.carries);
                        while let Some(event) = c.sse.next_event() {
                            match event {
                                Ok(e) if e.event_type == "message" || e.event_type.is_empty() => {
                                    deliver(engine, now, carries, e.data.as_bytes());
                                }
                                Ok(_) => {}
                                Err(err) => {
                                    log::debug!("SSE event dropped: {err:?}");
                                }
                            }
                        }
                        if carries == Some(Carries::Listen) {
                            if let Some(ms) = c.sse.retry_ms() {
                                // The server's word, within bounds: `retry: 0` on a stream that
                                // ends at once must not become a reconnect loop.
                                self.listen_retry = Duration::from_millis(ms.clamp(250, 60_000));
                            }
                            let id = c.sse.last_event_id();
                            if id != self.last_event_id.as_deref() {
                                self.last_event_id = id.map(str::to_owned);
                            }
                        }
                    }
                },
                Ok(ResponseEvent::End { keep_alive }) => {
                    c.exchange = None;
                    let status = c.status;
                    let mode = c.mode;
                    let body = std::mem::take(&mut c.body);
                    let challenge = c.challenge.take();
                    self.finish_exchange(engine, now, i, status, mode, &body, challenge);
                    let Some(c) = self.conns.get_mut(k) else { return Ok(true) };
                    c.body = body;
                    c.body.clear();
                    if !keep_alive || c.dedicated {
                        return Ok(true);
                    }
                    c.idle_since = Some(now);
                    c.out.clear();
                    c.written = 0;
                    let _ = registry;
                }
            }
        }
    }

    /// A response ended: decide what its status and body mean for the engine.
    #[allow(clippy::too_many_arguments)]
    fn finish_exchange(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        i: usize,
        status: u16,
        mode: BodyMode,
        body: &[u8],
        challenge: Option<AuthChallenge>,
    ) {
        let Some(x) = self.exchanges.get(i) else { return };
        let carries = x.carries;
        let sent_session = x.sent_session;
        match carries {
            Some(Carries::Listen) => {
                self.listen = if (200..300).contains(&status) {
                    Listen::At(now + self.listen_retry)
                } else {
                    log::debug!("the server offers no GET stream ({status})");
                    Listen::Unsupported
                };
                self.release_exchange(i);
                return;
            }
            Some(Carries::Message) | None => {
                if !(200..300).contains(&status) {
                    log::debug!("a notification or reply POST got HTTP {status}");
                }
                self.release_exchange(i);
                return;
            }
            Some(Carries::Request { .. }) => {}
        }
        let Some(Carries::Request { id, .. }) = carries else { return };
        if status == 401 && self.retry_with_fresh_token(i) {
            return;
        }
        let json =
            mode == BodyMode::Json && body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        // A legacy session the server forgot: 404 per the spec; the TypeScript SDK v1 answers
        // 400 with -32000 instead (lab FINDINGS §6). Either way the request was not processed.
        let session_gone = sent_session
            && (status == 404 || (status == 400 && json && is_error_code(body, -32000)));
        if session_gone {
            self.release_exchange(i);
            engine.handle_transport(now, TransportEvent::session_expired(id));
            return;
        }
        if json {
            engine.handle_reply(now, body, id);
        }
        let failure = match status {
            401 => ExchangeFailure::Unauthorized(challenge.unwrap_or_default()),
            403 => ExchangeFailure::Forbidden(challenge.unwrap_or_default()),
            s if mode == BodyMode::Sse && (200..300).contains(&s) => {
                ExchangeFailure::Transport(TransportError::ConnectionLost)
            }
            s => ExchangeFailure::Transport(TransportError::HttpStatus(s)),
        };
        // A no-op when the body already answered the request.
        engine.handle_transport(now, TransportEvent::exchange_failed(id, failure));
        self.release_exchange(i);
    }

    /// HTTP 401: ask the token provider once for a fresh token and send the request again.
    fn retry_with_fresh_token(&mut self, i: usize) -> bool {
        let Some(x) = self.exchanges.get_mut(i) else { return false };
        if x.auth_retried {
            return false;
        }
        let Some(fresh) = self.tokens.as_mut().and_then(|t| t.refresh()) else { return false };
        self.token = Some(fresh);
        x.auth_retried = true;
        self.waiting.push_front(i);
        true
    }

    fn fail_exchange(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        i: usize,
        error: TransportError,
    ) {
        if let Some(Carries::Request { id, .. }) = self.exchanges.get(i).and_then(|x| x.carries) {
            engine.handle_transport(
                now,
                TransportEvent::exchange_failed(id, ExchangeFailure::Transport(error)),
            );
        }
        if matches!(self.exchanges.get(i).and_then(|x| x.carries), Some(Carries::Listen)) {
            self.listen = Listen::At(now + self.listen_retry);
        }
        self.release_exchange(i);
    }

    fn on_conn_error(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        k: usize,
        e: &io::Error,
    ) {
        let connecting = self.conns.get(k).is_some_and(|c| c.phase != ConnPhase::Open);
        let error = if let Some(t) = tls_failure(e) {
            TransportError::Tls(t)
        } else if connecting {
            // Try the next address next time.
            self.next_addr += 1;
            TransportError::ConnectFailed(e.kind())
        } else {
            TransportError::ConnectionLost
        };
        if !matches!(error, TransportError::Tls(_)) && engine.era() != Some(Era::Legacy) {
            self.rotate_instance(registry);
        }
        log::debug!("HTTP connection failed: {e}");
        self.drop_conn(registry, engine, now, k, Some(error));
    }

    /// Moves new connections to the next instance (stateless servers only). Idle connections
    /// to the old one are closed; connections in use finish where they are.
    fn rotate_instance(&mut self, registry: &Registry) {
        let Some(next) = self.standby.pop_front() else { return };
        log::debug!("switching to instance {}", next.url.host_header());
        let current = Instance {
            url: std::mem::replace(&mut self.url, next.url),
            host_header: std::mem::replace(&mut self.host_header, next.host_header),
            proxy: std::mem::replace(&mut self.proxy, next.proxy),
            addrs: std::mem::replace(&mut self.addrs, next.addrs),
        };
        self.next_addr = 0;
        self.standby.push_back(current);
        let idle: SmallVec<[usize; 8]> =
            self.conns.iter().filter(|(_, c)| c.exchange.is_none()).map(|(k, _)| k).collect();
        for k in idle {
            self.close_quietly(registry, k);
        }
    }

    /// Removes a connection; its exchange (if any) fails with `failure`.
    fn drop_conn(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        k: usize,
        failure: Option<TransportError>,
    ) {
        let Some(mut c) = self.conns.try_remove(k) else { return };
        let _ = registry.deregister(&mut c.sock);
        if let Some(i) = c.exchange {
            // Even a request that failed before any response byte may have reached the server
            // (it can crash after reading it): the engine's policy decides what is safe to resend.
            self.fail_exchange(engine, now, i, failure.unwrap_or(TransportError::ConnectionLost));
        }
        if self.listen == Listen::Open(k) {
            self.listen = Listen::At(now + self.listen_retry);
        }
    }

    /// Closes a connection without reporting anything (cancellation, shutdown).
    fn close_quietly(&mut self, registry: &Registry, k: usize) {
        if let Some(mut c) = self.conns.try_remove(k) {
            let _ = registry.deregister(&mut c.sock);
            if let Some(i) = c.exchange {
                self.release_exchange(i);
            }
        }
    }

    /// Closes every connection. A legacy session is ended with DELETE first when one exists
    /// (best effort, bounded by `grace`).
    pub fn shutdown(&mut self, registry: &Registry, grace: Duration) {
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for k in keys {
            self.close_quietly(registry, k);
        }
        if let (Some(session), Scheme::Http, None) =
            (self.session.take(), self.url.scheme, &self.proxy)
        {
            self.delete_session(&session, grace);
        }
    }

    /// DELETE with the session id over a short-lived blocking connection (plain HTTP only).
    fn delete_session(&self, session: &str, grace: Duration) {
        let Some(addr) = self.addrs.first() else { return };
        let Ok(mut s) = std::net::TcpStream::connect_timeout(addr, grace) else { return };
        let _ = s.set_read_timeout(Some(grace));
        let _ = s.set_write_timeout(Some(grace));
        let mut out = Vec::new();
        let headers: [(&str, &[u8]); 1] = [("Mcp-Session-Id", session.as_bytes())];
        let head = RequestHead {
            method: "DELETE",
            target: &self.url.target,
            host: &self.host_header,
            headers: &headers,
        };
        if http1::write_request(&mut out, &head, &[]).is_ok() && s.write_all(&out).is_ok() {
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf);
        }
    }
}

/// Hands one message from a response body to the engine.
fn deliver(engine: &mut Engine, now: Instant, carries: Option<Carries>, data: &[u8]) {
    match carries {
        Some(Carries::Request { id, .. }) => engine.handle_reply(now, data, id),
        _ => engine.handle_message(now, data),
    }
}

fn starts_with_ci(v: &[u8], prefix: &[u8]) -> bool {
    v.len() >= prefix.len() && v[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Whether `body` is a JSON-RPC error with `code` (the ts1 session-gone shape).
fn is_error_code(body: &[u8], code: i64) -> bool {
    matches!(crate::proto::jsonrpc::decode(body), Ok(crate::proto::jsonrpc::Message::Error { error, .. }) if error.code == code)
}
