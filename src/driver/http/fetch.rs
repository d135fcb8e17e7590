//! One request on a non-blocking connection of its own ([`OneShot`], on a
//! [`Connection`]: TCP, then the proxy's CONNECT tunnel when there is a proxy, then TLS for
//! an https origin), then its response read to the end (the body capped). No redirect is
//! followed; the connection is never reused.
//!
//! Two users: the OAuth flow's own requests (metadata, registration, token), whose origin is
//! usually not the MCP server's, so they get their own `Host`, proxy choice and TLS name
//! ([`OAuthRequests`], one at a time; the origin's name is resolved off the loop by
//! [`resolve`](super::resolve), on the same token as the connection that follows, and the
//! request's deadline covers both), and the `DELETE` that ends a legacy session after its
//! server was closed ([`close`](super::close)).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Registry, Token};
use smallvec::SmallVec;

use super::connection::{Connection, Input, Route};
use super::instances::Instance;
use super::resolve::{Lookup, Resolver};
use crate::auth::oauth::{HttpMethod, HttpRequest, HttpResponse, RequestId};
use crate::codec::http1::{
    self, HeaderName, Limits, Preset, RequestHead, ResponseEvent, NO_PRESET,
};
use crate::driver::tls::TlsConfig;
use crate::driver::url::ProxyChoice;
use crate::engine::Engine;
use crate::error::TransportError;
use crate::session::http::{HttpSession, OAuthAnswer, SessionEvent};

/// Largest response head read.
const MAX_HEAD: usize = 16 * 1024;
/// Largest response body read for one of the OAuth flow's own requests.
const MAX_BODY: u64 = 256 * 1024;

/// A response read to its end. `Debug` shows the body's length only: a token response's
/// body holds the tokens.
pub(super) struct Fetched {
    pub(super) status: u16,
    pub(super) body: Vec<u8>,
    /// The `DPoP-Nonce` header (RFC 9449 8), raw.
    pub(super) dpop_nonce: Option<Vec<u8>>,
}

impl std::fmt::Debug for Fetched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetched")
            .field("status", &self.status)
            .field("body", &format_args!("<{} bytes>", self.body.len()))
            .finish_non_exhaustive()
    }
}

/// Where a request stands after a readiness event.
#[derive(Debug)]
pub(super) enum Progress {
    Pending,
    Done(io::Result<Fetched>),
}

/// The OAuth flow's own requests: one at a time, each on a connection of its own, on one
/// token.
#[derive(Debug)]
pub(super) struct OAuthRequests {
    proxy: ProxyChoice,
    /// Resolves the flow's origins (the MCP server's are resolved by the driver's instances).
    resolver: Arc<dyn Resolver>,
    /// The driver's TLS configuration, for https origins.
    tls: Option<TlsConfig>,
    token: Token,
    /// How long a request may take, resolution included.
    timeout: Duration,
    /// The request in flight (boxed: rarely there, and hosts keep drivers in an enum).
    current: Option<Box<OAuthFetch>>,
}

impl OAuthRequests {
    pub(super) fn new(
        proxy: ProxyChoice,
        resolver: Arc<dyn Resolver>,
        tls: Option<TlsConfig>,
        token: Token,
        timeout: Duration,
    ) -> Self {
        Self { proxy, resolver, tls, token, timeout, current: None }
    }

    /// Puts the flow's next request on a connection, when it has one and none is in flight:
    /// at once to an IP literal, or after its origin's name is resolved on a helper thread.
    /// Readiness on the token moves it on either way.
    pub(super) fn start(
        &mut self,
        session: &mut HttpSession,
        engine: &mut Engine,
        registry: &Registry,
        now: Instant,
    ) {
        while self.current.is_none() {
            let Some(req) = session.poll_oauth_request() else { return };
            let id = req.id;
            let url = req.url.clone();
            match self.begin(req, registry, now) {
                Ok(fetch) => self.current = Some(Box::new(fetch)),
                Err(e) => {
                    log::debug!(
                        "oauth request to {} failed: {e}",
                        crate::redact::RedactedUrl(&url)
                    );
                    // An endpoint URL refused is no connection failure; the rest are.
                    let refused_url = e.kind() == io::ErrorKind::InvalidInput;
                    let connection = (!refused_url).then(|| connection_error(&e, false));
                    let answer = OAuthAnswer::Failed(connection.flatten());
                    session.handle_event(engine, now, SessionEvent::OAuth(id, answer));
                }
            }
        }
    }

    fn begin(&self, req: HttpRequest, registry: &Registry, now: Instant) -> io::Result<OAuthFetch> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        let at = Instance::parse(&req.url, &self.proxy).map_err(|e| invalid(e.to_string()))?;
        let (id, deadline) = (req.id, crate::time::later(now, self.timeout));
        let mut fetch = OAuthFetch { id, deadline, attempt_until: None, stage: Stage::Moving };
        fetch.stage = match at.addrs.first() {
            Some(_) => {
                let addrs = at.addrs.clone();
                self.open(&mut fetch, req, at, addrs, registry, now)?
            }
            None => {
                let (host, port) = at.connect_to();
                let lookup = Lookup::start(&self.resolver, host, port, registry, self.token)?;
                Stage::Resolving { lookup, req, at }
            }
        };
        Ok(fetch)
    }

    /// Connects to the first of `addrs` that does not refuse at once; the rest are kept for
    /// a connect refused later ([`step`](Self::step)) or not made in time: while addresses
    /// are left, each attempt gets an equal share of the time `fetch` has left
    /// ([`OAuthFetch::attempt_until`]).
    fn open(
        &self,
        fetch: &mut OAuthFetch,
        req: HttpRequest,
        at: Instance,
        addrs: Vec<SocketAddr>,
        registry: &Registry,
        now: Instant,
    ) -> io::Result<Stage> {
        let mut rest = addrs.into_iter();
        let mut failed = io::Error::from(io::ErrorKind::NotFound);
        while let Some(addr) = rest.next() {
            match self.connect(&req, &at, addr, registry) {
                Ok(conn) => {
                    let rest: Vec<SocketAddr> = rest.collect();
                    fetch.attempt_until = attempt_share(now, fetch.deadline, rest.len());
                    let next = (!rest.is_empty()).then(|| Box::new(Next { req, at, rest }));
                    return Ok(Stage::Open(conn, next));
                }
                Err(e) => failed = e,
            }
        }
        Err(failed)
    }

    /// Gives up on the address `fetch` is connecting to and opens the next one, if any (the
    /// connect was refused, or not made in its share of the time): `Pending` when one is
    /// open, else `Done` with `failed`.
    fn next_address(
        &self,
        fetch: &mut OAuthFetch,
        registry: &Registry,
        now: Instant,
        failed: Progress,
    ) -> Progress {
        let Stage::Open(_, next) = &mut fetch.stage else { return failed };
        let Some(next) = next.take() else { return failed };
        let Stage::Open(conn, _) = std::mem::replace(&mut fetch.stage, Stage::Moving) else {
            return failed;
        };
        conn.close(registry);
        let Next { req, at, rest } = *next;
        match self.open(fetch, req, at, rest, registry, now) {
            Ok(stage) => {
                fetch.stage = stage;
                Progress::Pending
            }
            Err(e) => Progress::Done(Err(e)),
        }
    }

    fn connect(
        &self,
        req: &HttpRequest,
        at: &Instance,
        addr: SocketAddr,
        registry: &Registry,
    ) -> io::Result<OneShot> {
        // The flow's names are its own constants; checking them here costs an OAuth fetch, not
        // a call.
        let headers = req
            .headers
            .iter()
            .map(|(k, v)| Ok((HeaderName::new(k).map_err(refused)?, v.as_bytes())))
            .collect::<io::Result<SmallVec<[_; 16]>>>()?;
        let method = match req.method {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
        };
        let request = encode(method, at, NO_PRESET, &headers, &req.body)?;
        OneShot::start(request, at, self.tls.as_ref(), addr, registry, self.token, MAX_BODY)
    }

    /// A readiness event on the token; `true` when a request ended, its outcome handed to the
    /// flow.
    pub(super) fn handle_readiness(
        &mut self,
        session: &mut HttpSession,
        engine: &mut Engine,
        registry: &Registry,
        now: Instant,
    ) -> bool {
        let Some(mut fetch) = self.current.take() else { return false };
        let progress = self.step(&mut fetch, registry, now);
        self.current = Some(fetch);
        match progress {
            Progress::Pending => false,
            Progress::Done(outcome) => {
                self.finish(session, engine, registry, now, outcome);
                true
            }
        }
    }

    /// Moves `fetch` on: from its resolution to its connection, or its connection on.
    fn step(&self, fetch: &mut OAuthFetch, registry: &Registry, now: Instant) -> Progress {
        if let Stage::Open(conn, _) = &mut fetch.stage {
            let progress = conn.on_ready();
            // A connect refused (nothing sent yet) moves on to the next address of the name,
            // as the server's own connections do.
            let refused = matches!(progress, Progress::Done(Err(_))) && !conn.is_open();
            if !refused {
                // The addresses left stay for a refusal still to come (a proxy that took the
                // connection and closes it before answering its CONNECT): taken on every
                // event, they were gone by then.
                return progress;
            }
            return self.next_address(fetch, registry, now, progress);
        }
        let Stage::Resolving { lookup, .. } = &mut fetch.stage else { return Progress::Pending };
        let Some(outcome) = lookup.poll() else { return Progress::Pending };
        let Stage::Resolving { lookup, req, at } =
            std::mem::replace(&mut fetch.stage, Stage::Moving)
        else {
            return Progress::Pending;
        };
        lookup.close(registry);
        match outcome.and_then(|addrs| self.open(fetch, req, at, addrs, registry, now)) {
            // The connection's own readiness comes next.
            Ok(stage) => {
                fetch.stage = stage;
                Progress::Pending
            }
            Err(e) => Progress::Done(Err(e)),
        }
    }

    /// The deadline of the request in flight, or of its attempt at the current address.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.current.as_ref().map(|f| f.attempt_until.map_or(f.deadline, |t| t.min(f.deadline)))
    }

    /// Fails the request in flight when its deadline has come; moves it to its name's next
    /// address when the current one has not taken the connection in its share of the time
    /// (an address that swallows packets: a dual-stack name whose first family does not
    /// route would otherwise fail every request of the flow, each at its first address).
    pub(super) fn handle_timeout(
        &mut self,
        session: &mut HttpSession,
        engine: &mut Engine,
        registry: &Registry,
        now: Instant,
    ) {
        let Some(mut fetch) = self.current.take() else { return };
        let progress = if now >= fetch.deadline {
            Progress::Done(Err(io::ErrorKind::TimedOut.into()))
        } else if fetch.attempt_until.is_some_and(|t| now >= t) {
            fetch.attempt_until = None;
            match &fetch.stage {
                Stage::Open(conn, Some(_)) if conn.is_connecting() => {
                    log::debug!("an OAuth TCP connect took its share of time: the next address");
                    let failed = Progress::Done(Err(io::ErrorKind::TimedOut.into()));
                    self.next_address(&mut fetch, registry, now, failed)
                }
                // Connected (a proxy's tunnel or TLS may still be under way: the address
                // answered), or nothing left to try: the request's own deadline stands.
                _ => Progress::Pending,
            }
        } else {
            Progress::Pending
        };
        self.current = Some(fetch);
        if let Progress::Done(outcome) = progress {
            self.finish(session, engine, registry, now, outcome);
        }
    }

    /// The request in flight is over: its outcome goes to the flow.
    fn finish(
        &mut self,
        session: &mut HttpSession,
        engine: &mut Engine,
        registry: &Registry,
        now: Instant,
        outcome: io::Result<Fetched>,
    ) {
        let Some(fetch) = self.current.take() else { return };
        let id = fetch.id;
        let connected = matches!(&fetch.stage, Stage::Open(one, _) if one.is_established());
        fetch.close(registry);
        match outcome {
            Ok(r) => {
                let dpop_nonce = r.dpop_nonce.as_deref();
                let response = HttpResponse { status: r.status, body: &r.body, dpop_nonce };
                let answer = OAuthAnswer::Response(response);
                session.handle_event(engine, now, SessionEvent::OAuth(id, answer));
            }
            Err(e) => {
                log::debug!("oauth request failed: {e}");
                let connection = connection_error(&e, connected);
                let answer = OAuthAnswer::Failed(connection);
                session.handle_event(engine, now, SessionEvent::OAuth(id, answer));
            }
        }
    }

    /// Whether a request is in flight.
    pub(super) fn is_busy(&self) -> bool {
        self.current.is_some()
    }

    /// Drops the request in flight, deregistering what it registered.
    pub(super) fn close(&mut self, registry: &Registry) {
        if let Some(fetch) = self.current.take() {
            fetch.close(registry);
        }
    }
}

/// The transport error of a flow request that failed before its connection was
/// `connected` (TCP, proxy, TLS), or with a TLS failure at any point: what the flow's failure
/// names ([`AuthFailure::Connection`](crate::oauth::AuthFailure::Connection)). `None` for a
/// response that broke or was too large, which the flow reports as it did.
fn connection_error(e: &io::Error, connected: bool) -> Option<TransportError> {
    Some(super::conn_failure(e, connected)).filter(|t| *t != TransportError::ConnectionLost)
}

/// One flow request: its origin's name being resolved, then its connection.
#[derive(Debug)]
struct OAuthFetch {
    id: RequestId,
    /// The whole request (resolution included) fails after this.
    deadline: Instant,
    /// While the name has addresses left to try: when the TCP connection to the current one
    /// must be made, or the next is tried. An address that took the connection keeps it
    /// (a tunnel or handshake under way has the request's whole time, as it had before).
    attempt_until: Option<Instant>,
    stage: Stage,
}

/// When an attempt at one of a name's addresses gives way to the next: an equal share of the
/// time left to each address, `left` after this one. `None` for the last: the request's own
/// deadline is its.
fn attempt_share(now: Instant, deadline: Instant, left: usize) -> Option<Instant> {
    if left == 0 {
        return None;
    }
    let share =
        deadline.saturating_duration_since(now) / u32::try_from(left + 1).unwrap_or(u32::MAX);
    Some(crate::time::later(now, share))
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
    /// Connected (or connecting) to one address, with the addresses after it.
    Open(OneShot, Option<Box<Next>>),
    /// While a fetch's stage is being replaced (`begin`, `step`, `next_address`).
    Moving,
}

/// What a fetch needs to connect to the next address of its origin's name.
#[derive(Debug)]
struct Next {
    req: HttpRequest,
    at: Instance,
    rest: Vec<SocketAddr>,
}

impl OAuthFetch {
    /// Deregisters what is registered (the resolution's pipe or the socket).
    fn close(self: Box<Self>, registry: &Registry) {
        match self.stage {
            Stage::Resolving { lookup, .. } => lookup.close(registry),
            Stage::Open(conn, _) => conn.close(registry),
            Stage::Moving => {}
        }
    }
}

/// The bytes of a request to `at` that closes its connection after the response.
pub(super) fn encode(
    method: &str,
    at: &Instance,
    preset: Preset,
    headers: &[(HeaderName<'_>, &[u8])],
    body: &[u8],
) -> io::Result<Vec<u8>> {
    const CONNECTION: HeaderName<'static> = HeaderName::fixed("Connection");
    let mut all: SmallVec<[(HeaderName<'_>, &[u8]); 16]> = headers.iter().copied().collect();
    all.push((CONNECTION, b"close"));
    let head = RequestHead { method, origin: &at.origin, preset, headers: &all };
    let mut request = Vec::with_capacity(512);
    http1::write_request(&mut request, &head, body).map_err(refused)?;
    Ok(request)
}

/// A request head the writer refused, as the I/O error of the fetch that would have sent it.
fn refused(e: impl std::fmt::Debug) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("request head: {e:?}"))
}

/// One request on a connection of its own, and its response as it comes. `Debug` shows the
/// body's length only (a token response's body holds the tokens).
pub(super) struct OneShot {
    conn: Connection,
    status: u16,
    body: Vec<u8>,
    dpop_nonce: Option<Vec<u8>>,
}

impl std::fmt::Debug for OneShot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OneShot")
            .field("conn", &self.conn)
            .field("status", &self.status)
            .field("body", &format_args!("<{} bytes>", self.body.len()))
            .finish_non_exhaustive()
    }
}

impl OneShot {
    /// Whether the connection is up (TCP, proxy and TLS): before, no request byte left.
    fn is_established(&self) -> bool {
        self.conn.is_established()
    }

    /// Whether the TCP connect is still under way: the address has not answered yet.
    fn is_connecting(&self) -> bool {
        self.conn.is_connecting()
    }

    /// Connects to `addr` (of `at`: its proxy's when it has one) without waiting, registers
    /// the socket with `token`, and sends `request` (whole, with its head) once the connection
    /// (and tunnel, and TLS with `tls`) is up. A response body past `max_body` ends it as an
    /// error.
    pub(super) fn start(
        request: Vec<u8>,
        at: &Instance,
        tls: Option<&TlsConfig>,
        addr: SocketAddr,
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
    /// `true` once the connection is made (before that, a failure is a refused connect).
    fn is_open(&self) -> bool {
        self.conn.is_open()
    }

    pub(super) fn on_ready(&mut self) -> Progress {
        match self.drive() {
            Ok(Some(done)) => Progress::Done(Ok(done)),
            Ok(None) => Progress::Pending,
            Err(e) => Progress::Done(Err(e)),
        }
    }

    /// Sends what it can, then reads what is there; the response once it is whole.
    fn drive(&mut self) -> io::Result<Option<Fetched>> {
        if !self.conn.advance()? {
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
            match self.conn.read(FETCH_READ)? {
                Input::Read { .. } => {}
                Input::Blocked => return Ok(None),
                Input::Closed => closed = true,
            }
        }
    }
}

/// The most one read of an OAuth fetch takes (the answers are small; more is read in turn).
const FETCH_READ: usize = 8 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::tls::TlsError;
    use crate::error::TlsFailure;

    /// Each address left gets an equal share of the time left; the last one the rest.
    #[test]
    fn each_address_gets_its_share_of_the_time_left() {
        let now = Instant::now();
        let secs = Duration::from_secs;
        assert_eq!(attempt_share(now, now + secs(6), 2), Some(now + secs(2)));
        assert_eq!(attempt_share(now, now + secs(6), 1), Some(now + secs(3)));
        assert_eq!(attempt_share(now, now + secs(6), 0), None);
        // Past the deadline, the next address is due at once (the deadline fails it first).
        assert_eq!(attempt_share(now + secs(7), now + secs(6), 1), Some(now + secs(7)));
    }

    /// What the flow is told of a failed request: the connection's error before it was up,
    /// a TLS failure at any point, and nothing more of a response that broke.
    #[test]
    fn a_failed_flow_request_names_its_connection_error() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let expected = TransportError::ConnectFailed(io::ErrorKind::ConnectionRefused);
        assert_eq!(connection_error(&refused, false), Some(expected));
        let tls = io::Error::new(io::ErrorKind::InvalidData, TlsError(TlsFailure::UnknownIssuer));
        let expected = TransportError::Tls(TlsFailure::UnknownIssuer);
        assert_eq!(connection_error(&tls, true), Some(expected));
        let broken = io::Error::from(io::ErrorKind::InvalidData);
        assert_eq!(connection_error(&broken, true), None);
    }
}
