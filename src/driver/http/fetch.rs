//! One request on a non-blocking connection of its own ([`OneShot`]): TCP, then the proxy's
//! CONNECT tunnel when there is a proxy, then TLS for an https origin, then the request, then
//! its response read to the end (the body capped). No redirect is followed; the connection is
//! never reused.
//!
//! Two users: the OAuth flow's own requests (metadata, registration, token), whose origin is
//! usually not the MCP server's, so they get their own `Host`, proxy choice and TLS name
//! ([`OAuthFetch`], one at a time; the origin's name is resolved off the loop by
//! [`resolve`](super::resolve), on the same token as the connection that follows, and the
//! request's deadline covers both), and the `DELETE` that ends a legacy session after its
//! server was closed ([`close`](super::close)).

use std::fmt;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use super::instances::Instance;
use super::resolve::{Lookup, Resolver};
use crate::auth::oauth::{HttpMethod, HttpRequest, RequestId};
use crate::codec::http1::{self, Limits, RequestHead, ResponseEvent, ResponseParser};
use crate::driver::tls::{TlsConfig, TlsError, TlsSession};
use crate::driver::url::{ProxyChoice, Scheme};

/// Largest response head read.
const MAX_HEAD: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting,
    /// CONNECT sent to the proxy; waiting for its 2xx.
    Tunnelling,
    Open,
}

/// A response read to its end.
#[derive(Debug)]
pub(super) struct Fetched {
    pub(super) status: u16,
    pub(super) body: Vec<u8>,
    /// The `DPoP-Nonce` header (RFC 9449 8), raw.
    pub(super) dpop_nonce: Option<Vec<u8>>,
}

/// Where a request stands after a readiness event.
#[derive(Debug)]
pub(super) enum Progress {
    Pending,
    Done(io::Result<Fetched>),
}

/// One flow request: its origin's name being resolved, then its connection.
#[derive(Debug)]
pub(super) struct OAuthFetch {
    pub(super) id: RequestId,
    /// The whole request (resolution included) fails after this.
    pub(super) deadline: Instant,
    stage: Stage,
    token: Token,
    max_body: u64,
}

// The driver boxes the whole fetch, and it is rarely there: one size is fine.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Stage {
    Resolving {
        lookup: Lookup,
        req: HttpRequest,
        at: Instance,
    },
    Open(OneShot),
    /// Between the two, only inside [`OAuthFetch::on_ready`].
    Moving,
}

impl OAuthFetch {
    /// Starts the request: connects at once to an IP literal, or resolves the origin's name
    /// on a helper thread first. Readiness on `token` moves it on either way.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start(
        req: HttpRequest,
        proxy: &ProxyChoice,
        resolver: &Arc<dyn Resolver>,
        registry: &Registry,
        token: Token,
        now: Instant,
        timeout: Duration,
        max_body: u64,
    ) -> io::Result<Self> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        let at = Instance::parse(&req.url, proxy).map_err(|e| invalid(e.to_string()))?;
        let (id, deadline) = (req.id, crate::time::later(now, timeout));
        let stage = match at.addrs.first() {
            Some(&addr) => {
                let request = encode(&req, &at)?;
                Stage::Open(OneShot::start(request, &at, addr, registry, token, max_body)?)
            }
            None => {
                let (host, port) = at.connect_to();
                let lookup = Lookup::start(resolver, host, port, registry, token)?;
                Stage::Resolving { lookup, req, at }
            }
        };
        Ok(Self { id, deadline, stage, token, max_body })
    }

    /// Moves the request on after a readiness event.
    pub(super) fn on_ready(&mut self, registry: &Registry, tls: Option<&TlsConfig>) -> Progress {
        if let Stage::Resolving { lookup, .. } = &mut self.stage {
            let Some(outcome) = lookup.poll() else { return Progress::Pending };
            let Stage::Resolving { lookup, req, at } =
                std::mem::replace(&mut self.stage, Stage::Moving)
            else {
                return Progress::Pending;
            };
            lookup.close(registry);
            let addr = match outcome {
                Ok(addrs) => match addrs.first() {
                    Some(&addr) => addr,
                    None => return Progress::Done(Err(io::ErrorKind::NotFound.into())),
                },
                Err(e) => return Progress::Done(Err(e)),
            };
            let started = encode(&req, &at).and_then(|request| {
                OneShot::start(request, &at, addr, registry, self.token, self.max_body)
            });
            match started {
                // The connection's own readiness comes next.
                Ok(conn) => self.stage = Stage::Open(conn),
                Err(e) => return Progress::Done(Err(e)),
            }
            return Progress::Pending;
        }
        match &mut self.stage {
            Stage::Open(conn) => conn.on_ready(tls),
            _ => Progress::Pending,
        }
    }

    /// Deregisters what is registered (the resolution's pipe or the socket).
    pub(super) fn close(self: Box<Self>, registry: &Registry) {
        match self.stage {
            Stage::Resolving { lookup, .. } => lookup.close(registry),
            Stage::Open(conn) => conn.close(registry),
            Stage::Moving => {}
        }
    }
}

/// The bytes of one flow request to `at`, closing its connection after the response.
fn encode(req: &HttpRequest, at: &Instance) -> io::Result<Vec<u8>> {
    let mut headers: Vec<(&str, &[u8])> =
        req.headers.iter().map(|(k, v)| (*k, v.as_bytes())).collect();
    headers.push(("Connection", b"close"));
    let method = match req.method {
        HttpMethod::Get => "GET",
        HttpMethod::Post => "POST",
    };
    let head =
        RequestHead { method, target: &at.url.target, host: &at.host_header, headers: &headers };
    let mut request = Vec::new();
    http1::write_request(&mut request, &head, &req.body)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("request head: {e:?}")))?;
    Ok(request)
}

/// One request on a connection of its own. Its bytes carry credentials (a bearer token, a
/// client secret, an authorization code): `Debug` shows none of them.
pub(super) struct OneShot {
    sock: TcpStream,
    phase: Phase,
    /// The name TLS checks, for an https origin.
    tls_host: Option<String>,
    tls: Option<TlsSession>,
    proxied: bool,
    authority: String,
    /// The request, written once the connection (and tunnel) is up.
    request: Vec<u8>,
    out: Vec<u8>,
    written: usize,
    parser: ResponseParser,
    limits: Limits,
    status: u16,
    body: Vec<u8>,
    dpop_nonce: Option<Vec<u8>>,
}

impl fmt::Debug for OneShot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OneShot")
            .field("phase", &self.phase)
            .field("authority", &self.authority)
            .field("proxied", &self.proxied)
            .field("tls", &self.tls)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl OneShot {
    /// Connects to `addr` (of `at`: its proxy's when it has one) without waiting, registers
    /// the socket with `token`, and sends `request` (whole, with its head) once the connection
    /// (and tunnel, and TLS) is up. A response body past `max_body` ends it as an error.
    pub(super) fn start(
        request: Vec<u8>,
        at: &Instance,
        addr: std::net::SocketAddr,
        registry: &Registry,
        token: Token,
        max_body: u64,
    ) -> io::Result<Self> {
        let mut sock = TcpStream::connect(addr)?;
        let _ = sock.set_nodelay(true);
        registry.register(&mut sock, token, Interest::READABLE | Interest::WRITABLE)?;
        let limits = Limits { max_head_bytes: MAX_HEAD, max_body_bytes: max_body };
        Ok(Self {
            sock,
            phase: Phase::Connecting,
            tls_host: (at.url.scheme == Scheme::Https).then(|| at.url.host.clone()),
            tls: None,
            proxied: at.proxy.is_some(),
            authority: at.url.authority(),
            request,
            out: Vec::new(),
            written: 0,
            parser: ResponseParser::new(limits),
            limits,
            status: 0,
            body: Vec::new(),
            dpop_nonce: None,
        })
    }

    /// Deregisters the socket; dropping it closes it.
    pub(super) fn close(mut self, registry: &Registry) {
        let _ = registry.deregister(&mut self.sock);
    }

    /// Moves the socket's registration from `from` to `to`, with `token`.
    pub(super) fn move_to(
        &mut self,
        from: &Registry,
        to: &Registry,
        token: Token,
    ) -> io::Result<()> {
        from.deregister(&mut self.sock)?;
        to.register(&mut self.sock, token, Interest::READABLE | Interest::WRITABLE)
    }

    /// Moves the request on after a readiness event (a hint: a spurious call finds nothing).
    pub(super) fn on_ready(&mut self, tls: Option<&TlsConfig>) -> Progress {
        match self.drive(tls) {
            Ok(Some(done)) => Progress::Done(Ok(done)),
            Ok(None) => Progress::Pending,
            Err(e) => Progress::Done(Err(e)),
        }
    }

    fn drive(&mut self, tls: Option<&TlsConfig>) -> io::Result<Option<Fetched>> {
        if self.phase == Phase::Connecting {
            if let Some(e) = self.sock.take_error()? {
                return Err(e);
            }
            match self.sock.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(None),
                Err(e) => return Err(e),
            }
            if self.proxied {
                // Authority-form target (RFC 9110 §9.3.6), as for the MCP connections.
                let a = &self.authority;
                self.out = format!("CONNECT {a} HTTP/1.1\r\nHost: {a}\r\n\r\n").into_bytes();
                self.phase = Phase::Tunnelling;
            } else {
                self.open(tls)?;
            }
        }
        if self.phase == Phase::Tunnelling {
            self.write()?;
            if !self.read_tunnel()? {
                return Ok(None);
            }
            self.open(tls)?;
        }
        self.write()?;
        self.read()
    }

    /// TCP (and the tunnel) is up: TLS for an https origin, then the request.
    fn open(&mut self, tls: Option<&TlsConfig>) -> io::Result<()> {
        self.phase = Phase::Open;
        self.parser = ResponseParser::new(self.limits);
        self.out = std::mem::take(&mut self.request);
        self.written = 0;
        if let Some(host) = &self.tls_host {
            let config = tls.ok_or_else(|| io::Error::other("no TLS configuration"))?;
            let mut session = config.session(host).map_err(|f| io::Error::other(TlsError(f)))?;
            // Buffered by rustls until the handshake is done.
            session.write_plaintext(&self.out)?;
            self.written = self.out.len();
            self.tls = Some(session);
        }
        Ok(())
    }

    fn write(&mut self) -> io::Result<()> {
        if let Some(tls) = self.tls.as_mut() {
            return tls.flush(&mut self.sock);
        }
        while self.written < self.out.len() {
            match self.sock.write(&self.out[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads the proxy's answer to CONNECT; `true` once the tunnel is open.
    fn read_tunnel(&mut self) -> io::Result<bool> {
        let mut buf = [0u8; 4096];
        loop {
            let n = match self.sock.read(&mut buf) {
                Ok(0) => return Err(io::ErrorKind::ConnectionAborted.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.parser.push(&buf[..n]);
            if let Some(ev) = self.parser.next() {
                return match ev {
                    Ok(ResponseEvent::Head(h)) if (200..300).contains(&h.status()) => Ok(true),
                    _ => Err(io::Error::new(io::ErrorKind::ConnectionRefused, "proxy refused")),
                };
            }
        }
    }

    /// Reads what is there; the response once it is whole.
    fn read(&mut self) -> io::Result<Option<Fetched>> {
        let mut buf = [0u8; 8192];
        loop {
            while let Some(ev) = self.parser.next() {
                match ev {
                    Ok(ResponseEvent::Head(h)) => {
                        self.status = h.status();
                        self.dpop_nonce = h.header("dpop-nonce").map(<[u8]>::to_vec);
                    }
                    Ok(ResponseEvent::Body(chunk)) => self.body.extend_from_slice(chunk),
                    Ok(ResponseEvent::End { .. }) => {
                        let body = std::mem::take(&mut self.body);
                        return Ok(Some(Fetched {
                            status: self.status,
                            body,
                            dpop_nonce: self.dpop_nonce.take(),
                        }));
                    }
                    Err(e) => {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
                    }
                }
            }
            let eof = match self.tls.as_mut() {
                Some(tls) => {
                    let mut plain = Vec::new();
                    let r = tls.read(&mut self.sock, &mut plain, buf.len())?;
                    // Handshake bytes, then the buffered request once it is done.
                    tls.flush(&mut self.sock)?;
                    self.parser.push(&plain);
                    match r {
                        None => true,
                        Some(0) => return Ok(None),
                        Some(_) => false,
                    }
                }
                None => match self.sock.read(&mut buf) {
                    Ok(0) => true,
                    Ok(n) => {
                        self.parser.push(&buf[..n]);
                        false
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                },
            };
            if eof {
                self.parser.eof();
                while let Some(ev) = self.parser.next() {
                    match ev {
                        Ok(ResponseEvent::Body(chunk)) => self.body.extend_from_slice(chunk),
                        Ok(ResponseEvent::End { .. }) => {
                            let body = std::mem::take(&mut self.body);
                            return Ok(Some(Fetched {
                                status: self.status,
                                body,
                                dpop_nonce: self.dpop_nonce.take(),
                            }));
                        }
                        Ok(ResponseEvent::Head(h)) => {
                            self.status = h.status();
                            self.dpop_nonce = h.header("dpop-nonce").map(<[u8]>::to_vec);
                        }
                        Err(e) => {
                            return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
                        }
                    }
                }
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}
