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

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Registry, Token};

use super::connection::{Connection, Input, Route};
use super::instances::Instance;
use super::resolve::{Lookup, Resolver};
use crate::auth::oauth::{HttpMethod, HttpRequest, RequestId};
use crate::codec::http1::{self, Limits, RequestHead, ResponseEvent};
use crate::driver::tls::TlsConfig;
use crate::driver::url::ProxyChoice;

/// Largest response head read.
const MAX_HEAD: usize = 16 * 1024;

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
        tls: Option<&TlsConfig>,
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
                Stage::Open(OneShot::start(request, &at, tls, addr, registry, token, max_body)?)
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
                OneShot::start(request, &at, tls, addr, registry, self.token, self.max_body)
            });
            match started {
                // The connection's own readiness comes next.
                Ok(conn) => self.stage = Stage::Open(conn),
                Err(e) => return Progress::Done(Err(e)),
            }
            return Progress::Pending;
        }
        match &mut self.stage {
            Stage::Open(conn) => conn.on_ready(),
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

/// One request on a connection of its own, and its response as it comes.
#[derive(Debug)]
pub(super) struct OneShot {
    conn: Connection,
    status: u16,
    body: Vec<u8>,
    dpop_nonce: Option<Vec<u8>>,
}

impl OneShot {
    /// Connects to `addr` (of `at`: its proxy's when it has one) without waiting, registers
    /// the socket with `token`, and sends `request` (whole, with its head) once the connection
    /// (and tunnel, and TLS with `tls`) is up. A response body past `max_body` ends it as an
    /// error.
    pub(super) fn start(
        request: Vec<u8>,
        at: &Instance,
        tls: Option<&TlsConfig>,
        addr: std::net::SocketAddr,
        registry: &Registry,
        token: Token,
        max_body: u64,
    ) -> io::Result<Self> {
        let limits = Limits { max_head_bytes: MAX_HEAD, max_body_bytes: max_body };
        let mut conn = Connection::connect(addr, Route::to(at, tls)?, registry, token, limits)?;
        *conn.request_buf() = request;
        Ok(Self { conn, status: 0, body: Vec::new(), dpop_nonce: None })
    }

    /// Deregisters the socket; dropping it closes it.
    pub(super) fn close(mut self, registry: &Registry) {
        self.conn.deregister(registry);
    }

    /// Moves the socket's registration from `from` to `to`, with `token`.
    pub(super) fn move_to(
        &mut self,
        from: &Registry,
        to: &Registry,
        token: Token,
    ) -> io::Result<()> {
        self.conn.move_to(from, to, token)
    }

    /// Moves the request on after a readiness event (a hint: a spurious call finds nothing).
    pub(super) fn on_ready(&mut self) -> Progress {
        match self.drive() {
            Ok(Some(done)) => Progress::Done(Ok(done)),
            Ok(None) => Progress::Pending,
            Err(e) => Progress::Done(Err(e)),
        }
    }

    /// Sends what it can, then reads what is there; the response once it is whole.
    fn drive(&mut self) -> io::Result<Option<Fetched>> {
        let mut buf = [0u8; 8192];
        if !self.conn.advance(&mut buf)? {
            return Ok(None);
        }
        self.conn.write()?;
        let mut closed = false;
        loop {
            while let Some(ev) = self.conn.parser().next() {
                match ev {
                    Ok(ResponseEvent::Head(h)) => {
                        self.status = h.status();
                        self.dpop_nonce = h.header("dpop-nonce").map(<[u8]>::to_vec);
                    }
                    Ok(ResponseEvent::Body(chunk)) => self.body.extend_from_slice(chunk),
                    Ok(ResponseEvent::End { .. }) => {
                        let body = std::mem::take(&mut self.body);
                        let dpop_nonce = self.dpop_nonce.take();
                        return Ok(Some(Fetched { status: self.status, body, dpop_nonce }));
                    }
                    Err(e) => {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
                    }
                }
            }
            if closed {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            match self.conn.read(&mut buf)? {
                Input::Read { .. } => {}
                Input::Blocked => return Ok(None),
                Input::Closed => closed = true,
            }
        }
    }
}
