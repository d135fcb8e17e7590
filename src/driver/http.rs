//! Streamable HTTP on mio sockets: a small keep-alive pool per server, one exchange (a request
//! and its response) per connection at a time. Each connection of the pool, of the OAuth
//! flow ([`fetch`]) and of a session's end ([`close`]) is a [`connection::Connection`]: TCP,
//! CONNECT proxies, TLS by [`tls`](super::tls).
//!
//! This is the I/O half: it moves bytes. The sans-IO HTTP session takes the engine's
//! transmits itself, writes each request into the connection's buffer, and reads each response
//! from the connection's parser; it decides what a message means for MCP (the era's headers,
//! the legacy session, what a status or a broken stream means, when a stream is reopened, when
//! to try another instance). This driver calls no engine verb of its own.
//!
//! Host names are resolved on a short-lived helper thread ([`resolve`]) that wakes the poll
//! when done, so a slow resolver never stalls the loop: when the first connection is needed,
//! and again only after every known address failed to connect, never per call.

mod assertion_file;
pub(crate) mod close;
mod connection;
mod fetch;
mod instances;
mod options;
mod resolve;

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::{Registry, Token};
use slab::Slab;
use smallvec::SmallVec;

use crate::auth::oauth::{OAuthFlow, RedirectError};
use crate::codec::http1::Limits;
use crate::driver::tls::{tls_failure, TlsConfig};
use crate::driver::url::Scheme;
use crate::engine::{Engine, ExchangeFailure};
use crate::error::TransportError;
use crate::session::http::{
    BadBearerToken, Budget, ConnNeed, ExchangeId, HttpSession, OAuthState, ResponseStep,
    SessionEvent, SessionSetup,
};
use crate::time::{earlier, later};
use connection::{Connection, Input, Route, MOST_READ};
use instances::{Instance, InstanceId, Instances, NextAddr};

pub use crate::session::http::{StaticToken, TokenProvider};
pub use assertion_file::AssertionFile;
pub use options::{HttpOptions, HttpSetupError};
pub use resolve::{Resolver, SystemResolver};

/// One connection of the pool, with what the pool knows of it.
#[derive(Debug)]
struct Conn {
    conn: Connection,
    /// The address it was opened to (the proxy's, through one).
    addr: std::net::SocketAddr,
    /// Where the connection goes: its requests name this instance, whatever new connections
    /// go to.
    instance: InstanceId,
    started: Instant,
    /// Exchange in flight on this connection.
    exchange: Option<ExchangeId>,
    /// Since when the connection has sat idle, and until when it may.
    idle: Option<Idle>,
    /// Carries the legacy GET stream: never reused, not counted in the pool.
    dedicated: bool,
    /// Events wait in the session for the next frame budget; reading stopped.
    backlog: bool,
}

/// An idle keep-alive connection's times.
#[derive(Debug, Clone, Copy)]
struct Idle {
    since: Instant,
    /// `HttpOptions::idle_timeout` after `since`, or sooner when the server said it closes
    /// sooner (`Keep-Alive: timeout=N`).
    until: Instant,
}

/// How long a connection is kept idle when the server announced it closes one after
/// `announced`: a second less, so a request is not written as the server closes, but at
/// least half of it.
fn idle_within(announced: Duration) -> Duration {
    announced.saturating_sub(Duration::from_secs(1)).max(announced / 2)
}

const TOKEN_CONNS: usize = 128;
/// The token offset of the OAuth flow's connection (and the resolution before it).
const TOKEN_OAUTH: usize = TOKEN_CONNS - 1;
/// The token offset of the MCP server's name resolution.
const TOKEN_RESOLVE: usize = TOKEN_CONNS - 2;
/// The token offset of the legacy session's `DELETE` after a close ([`close`]); MCP
/// connections use the ones below.
const TOKEN_CLOSE: usize = TOKEN_CONNS - 3;
// `HttpOptions::max_connections` documents the cap this makes.
const _: () = assert!(TOKEN_CLOSE - 1 == 124);
/// Tokens an HTTP driver uses, from its base token.
pub(crate) const TOKENS_PER_DRIVER: usize = TOKEN_CONNS;

/// Drives one Streamable HTTP server for one [`Engine`]: sockets, the pool, CONNECT and TLS.
/// What the messages mean for MCP is decided by the sans-IO HTTP session (`session::http`).
#[derive(Debug)]
pub struct HttpDriver {
    /// Where the server is, and the alternates rotated in on connection failure.
    instances: Instances,
    /// For the https instances and the OAuth flow's own requests; `None` when neither has any.
    tls: Option<TlsConfig>,
    base: Token,
    max_conns: usize,
    idle_timeout: Duration,
    connect_timeout: Duration,
    limits: Limits,
    conns: Slab<Conn>,
    /// Boxed: it is most of the driver's size, and hosts keep drivers in an enum.
    session: Box<HttpSession>,
    frames_per_readiness: usize,
    /// `Config::bytes_per_readiness`.
    bytes_per_readiness: usize,
    /// Messages and parsed units still allowed in the current readiness turn.
    budget: Budget,
    /// Bytes still to be read from the socket in the current readiness turn.
    bytes_left: usize,
    /// When a connection was left with a backlog: the driver is due again at once.
    backlog_since: Option<Instant>,
    /// Where the next turn's backlog starts: the connection after the last one served.
    backlog_next: usize,
    /// The OAuth flow's own requests, on connections of their own.
    oauth: fetch::OAuthRequests,
    /// When the OAuth flow is told the wall clock again (`None`: no flow).
    wall_due: Option<Instant>,
}

/// How often an OAuth flow is told what the wall clock reads: a device's clock set by NTP
/// after the server was added, or a suspend, is seen within this.
const WALL_CLOCK_READ: Duration = Duration::from_secs(1);

/// The wall clock, in seconds since the Unix epoch (0 for a clock set before it). Read here,
/// at the edge: the flow only derives Unix times (token expiry, JWT claims) from it.
fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// How long a keep-alive connection may sit idle and still be reused without a peek: servers
/// close idle connections after seconds, and the readiness events report the closes the host
/// has polled since.
const IDLE_PEEK_AFTER: Duration = Duration::from_millis(100);

impl HttpDriver {
    /// Parses the URL, builds TLS, and tells the engine the transport is open. No I/O: the
    /// host name is resolved off the loop when the first connection is needed, and
    /// connections are made on demand.
    pub fn new(
        opts: HttpOptions,
        config: &crate::config::Config,
        base: Token,
        engine: &mut Engine,
        now: Instant,
    ) -> Result<Self, HttpSetupError> {
        opts.check_headers()?;
        if opts.oauth.is_some() {
            // The token goes on every request, to whichever instance is current: each must
            // be one the flow itself would send it to (https, or loopback), as its own
            // `server_url` must be.
            let urls = std::iter::once(&opts.url).chain(&opts.alternates);
            if urls.clone().any(|u| !crate::auth::oauth::is_secure(u)) {
                use crate::auth::oauth::{AuthError, AuthFailure, AuthStep};
                let e = AuthError::new(AuthStep::Discovery, AuthFailure::CleartextResource);
                return Err(HttpSetupError::OAuth(e));
            }
        }
        let primary = Instance::parse(&opts.url, &opts.proxy)?;
        let mut standby = VecDeque::new();
        for alt in &opts.alternates {
            standby.push_back(Instance::parse(alt, &opts.proxy)?);
        }
        // For every https instance (alternates may differ from the first in scheme), and for
        // the OAuth flow's own requests, which may go to https origins whatever the server's.
        let https =
            std::iter::once(&primary).chain(&standby).any(|at| at.url.scheme == Scheme::Https);
        let tls = match https || opts.oauth.is_some() {
            true => Some(TlsConfig::new(&opts.tls).map_err(HttpSetupError::Tls)?),
            false => None,
        };
        let oauth = match opts.oauth {
            Some(config) => {
                // Told again every WALL_CLOCK_READ on `flush`: a clock set later moves it.
                let flow =
                    OAuthFlow::new(config, now, unix_now()).map_err(HttpSetupError::OAuth)?;
                Some(OAuthState::new(flow, opts.authorizer))
            }
            None => None,
        };
        let wall_due = oauth.is_some().then(|| later(now, WALL_CLOCK_READ));
        let setup = SessionSetup {
            headers: opts.headers,
            tokens: opts.token_provider,
            max_body: config.max_message_bytes,
            oauth,
        };
        let session = HttpSession::open(setup, engine, now)
            .map_err(|BadBearerToken| HttpSetupError::BearerToken)?;
        let resolver = opts.resolver.unwrap_or_else(|| Arc::new(SystemResolver));
        Ok(Self {
            instances: Instances::new(primary, standby, Arc::clone(&resolver)),
            tls: tls.clone(),
            base,
            max_conns: opts.max_connections.clamp(1, TOKEN_CLOSE - 1),
            idle_timeout: opts.idle_timeout,
            connect_timeout: opts.connect_timeout,
            limits: Limits {
                max_head_bytes: opts.max_head_bytes,
                max_body_bytes: config.max_message_bytes as u64,
            },
            conns: Slab::with_capacity(8),
            session: Box::new(session),
            frames_per_readiness: config.frames_per_readiness,
            bytes_per_readiness: config.bytes_per_readiness,
            budget: turn_budget(config.frames_per_readiness, config.bytes_per_readiness),
            bytes_left: config.bytes_per_readiness,
            backlog_since: None,
            backlog_next: 0,
            wall_due,
            oauth: fetch::OAuthRequests::new(
                opts.proxy,
                resolver,
                tls,
                Token(base.0 + TOKEN_OAUTH),
                opts.connect_timeout,
            ),
        })
    }

    /// `true` when `token` belongs to this driver.
    pub fn owns(&self, token: Token) -> bool {
        token.0.wrapping_sub(self.base.0) < TOKENS_PER_DRIVER
    }

    /// The tokens this driver registers its connections with.
    pub(crate) fn tokens(&self) -> std::ops::Range<usize> {
        self.base.0..self.base.0 + TOKENS_PER_DRIVER
    }

    /// The legacy session id, when the server issued one.
    pub fn session_id(&self) -> Option<&str> {
        self.session.session_id()
    }

    /// The scope the authorization server granted with the current OAuth token, when this
    /// server runs an OAuth flow and holds a token.
    pub fn granted_scope(&self) -> Option<&str> {
        self.session.granted_scope()
    }

    /// Open connections (for tests and diagnostics).
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Whether anything is left for [`detach`](Self::detach) to end: a connection, a legacy
    /// session, an OAuth flow (whose timer refreshes the token) or its request in flight, a
    /// resolution.
    pub(crate) fn is_live(&self) -> bool {
        !self.conns.is_empty()
            || self.session.session_id().is_some()
            || self.session.has_oauth()
            || self.oauth.is_busy()
            || self.instances.resolving_since().is_some()
    }

    /// The driver's own next deadline: a connect timeout, an idle expiry, a stream to reopen,
    /// or now when a connection has events waiting for a frame budget.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Called twice per poll: the connections' ages are compared before any deadline is
        // made of them, so the pool costs one deadline sum, not one per connection.
        let (mut idle, mut opening) = (None, None);
        for (_, c) in &self.conns {
            match (c.conn.is_established(), c.idle) {
                (true, since) => idle = earlier(idle, since.map(|i| i.until)),
                (false, _) => opening = earlier(opening, Some(c.started)),
            }
        }
        let mut next = self.session.poll_timeout();
        let mut keep = |t: Option<Instant>| next = earlier(next, t);
        // The timeouts are the host's to choose (`Duration::MAX` among them): `later`, not `+`,
        // which panics past the clock's range.
        keep(idle);
        keep(opening.map(|t| later(t, self.connect_timeout)));
        keep(self.backlog_since);
        keep(self.oauth.poll_timeout());
        keep(self.instances.resolving_since().map(|t| later(t, self.connect_timeout)));
        next
    }

    /// Closes idle and timed-out connections, drains backlogs, reopens streams when due.
    pub fn handle_timeout(&mut self, registry: &Registry, engine: &mut Engine, now: Instant) {
        self.handle_timers(registry, engine, now);
        self.drain_backlog(registry, engine, now);
        self.flush(registry, engine, now);
    }

    /// [`handle_timeout`](Self::handle_timeout) without the backlog: input a readiness call
    /// just left unread waits for the next turn (a host's readiness path: one call hands the
    /// engine one frame budget).
    pub(crate) fn handle_timeout_keeping_backlog(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
    ) {
        self.handle_timers(registry, engine, now);
        self.flush(registry, engine, now);
    }

    /// Closes idle and timed-out connections, and moves the OAuth flow and the name lookup on.
    fn handle_timers(&mut self, registry: &Registry, engine: &mut Engine, now: Instant) {
        let expired: SmallVec<[(usize, bool); 8]> = self
            .conns
            .iter()
            .filter_map(|(k, c)| match (c.conn.is_established(), c.idle) {
                (true, Some(idle)) => (now >= idle.until).then_some((k, false)),
                (true, None) => None,
                (false, _) => (now >= later(c.started, self.connect_timeout)).then_some((k, true)),
            })
            .collect();
        for (k, timed_out) in expired {
            let failure =
                timed_out.then_some(TransportError::ConnectFailed(io::ErrorKind::TimedOut));
            if let Some(error) = &failure {
                // As a refused connect: the next address next time, or the next instance.
                self.connect_failed(registry, engine, k, error);
            }
            self.drop_conn(registry, engine, now, k, failure);
        }
        self.oauth.handle_timeout(&mut self.session, engine, registry, now);
        if self.instances.resolving_since().is_some_and(|t| now >= later(t, self.connect_timeout)) {
            // Like a connect timeout, for what waits now; the resolution goes on for the next.
            log::debug!("resolving {} is taking too long", self.instances.current().url.host);
            self.instances.rearm_lookup(now);
            self.fail_waiting(registry, engine, now, io::ErrorKind::TimedOut);
        }
    }

    /// Hands over input frame budgets left unread: one budget for the turn, whatever the
    /// number of connections holding some (a budget each let one turn hand the engine as
    /// many). The connection after the last one served goes first, so a stream that always
    /// has more cannot keep the others' input waiting.
    fn drain_backlog(&mut self, registry: &Registry, engine: &mut Engine, now: Instant) {
        if self.backlog_since.take().is_none() {
            return;
        }
        let mut backlog: SmallVec<[usize; 8]> =
            self.conns.iter().filter(|(_, c)| c.backlog).map(|(k, _)| k).collect();
        let first = backlog.iter().position(|&k| k >= self.backlog_next).unwrap_or(0);
        backlog.rotate_left(first);
        // The next turn starts after the one served first now, which this budget goes to.
        self.backlog_next = backlog.first().map_or(0, |k| k + 1);
        self.fresh_budget();
        for k in backlog {
            if let Some(c) = self.conns.get_mut(k) {
                c.backlog = false;
            }
            // No event to ask whether the server closed: read on to `WouldBlock`. A spent
            // budget leaves the connection's input for the next turn.
            if let Err(e) = self.read_conn(registry, engine, now, k, true, AtEof::Fail) {
                self.on_conn_error(registry, engine, now, k, &e);
            }
        }
    }

    // ----- outgoing ------------------------------------------------------------------------

    /// Lets the session take the engine's transmits and what is due, closes the response
    /// streams of cancelled calls, and starts what can start.
    pub fn flush(&mut self, registry: &Registry, engine: &mut Engine, now: Instant) {
        if self.wall_due.is_some_and(|due| now >= due) {
            self.session.handle_event(engine, now, SessionEvent::WallClock(unix_now()));
            self.wall_due = Some(later(now, WALL_CLOCK_READ));
        }
        self.session.handle_timeout(engine, now);
        while let Some(x) = self.session.poll_close() {
            let conn = self.conns.iter().find(|(_, c)| c.exchange == Some(x)).map(|(k, _)| k);
            if let Some(x) = conn.and_then(|k| self.close_quietly(registry, k)) {
                self.session.handle_event(engine, now, SessionEvent::Abandoned(x));
            }
        }
        self.oauth.start(&mut self.session, engine, registry, now);
        self.dispatch(registry, engine, now);
    }

    /// The redirect of a deferred OAuth authorization (see
    /// [`Authorizer::begin`](crate::oauth::Authorizer::begin)): the flow goes on to the token
    /// request, and the refused calls follow once it is done.
    pub fn handle_redirect(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        redirect: &str,
    ) -> Result<(), RedirectError> {
        let taken = self.session.handle_oauth_redirect(engine, now, redirect);
        self.flush(registry, engine, now);
        taken
    }

    /// Requests written by the engine that wait for a connection (all `max_connections` busy).
    pub(crate) fn requests_waiting(&self) -> usize {
        self.session.requests_waiting()
    }

    /// Gives waiting exchanges to idle connections, opening new ones up to the limit.
    fn dispatch(&mut self, registry: &Registry, engine: &mut Engine, now: Instant) {
        while let Some((_, need)) = self.session.peek_waiting() {
            let dedicated = need == ConnNeed::Own;
            let idle = self.live_idle_connection(registry, now);
            let k = match idle {
                Some(k) if !dedicated => k,
                _ => {
                    let busy = self.conns.iter().filter(|(_, c)| !c.dedicated).count();
                    // An answer to the server may take one connection past the limit: the
                    // calls holding the pool may be waiting for it (it comes first).
                    let limit = self.max_conns + usize::from(need == ConnNeed::PoolOrSpare);
                    if !dedicated && busy >= limit {
                        return;
                    }
                    match self.connect(registry, now) {
                        Ok(Some(k)) => k,
                        // Readiness on the resolver token dispatches again.
                        Ok(None) => return,
                        Err(e) => {
                            let error = TransportError::ConnectFailed(e.kind());
                            self.rotate_after(registry, engine, &error);
                            let failure = ExchangeFailure::Transport(error);
                            self.session.handle_event(
                                engine,
                                now,
                                SessionEvent::NoConnection(failure),
                            );
                            continue;
                        }
                    }
                }
            };
            let Some(x) = self.session.poll_exchange(engine, now) else { return };
            let Some(c) = self.conns.get_mut(k) else { continue };
            (c.exchange, c.idle, c.dedicated) = (Some(x), None, dedicated);
            if c.conn.is_open() {
                self.start_exchange(registry, engine, now, k);
            }
        }
    }

    /// An idle keep-alive connection that is still open.
    ///
    /// Servers close idle connections on their own schedule (uvicorn after 5 s). Such a
    /// connection becomes readable with the end of file, and its readiness event retires it
    /// (`read_conn`), so a host that polls never puts a request on it. What the events cannot
    /// have said yet is a close since the host last polled: a connection idle for
    /// [`IDLE_PEEK_AFTER`] or more is checked with a non-blocking peek first, so no request
    /// has to be resent because its connection was already dead. One reused sooner (calls
    /// back to back) costs no system call.
    fn live_idle_connection(&mut self, registry: &Registry, now: Instant) -> Option<usize> {
        loop {
            let k = self
                .conns
                .iter()
                .find(|(_, c)| {
                    c.conn.is_open()
                        && c.exchange.is_none()
                        && !c.dedicated
                        && c.instance == self.instances.current_id()
                })
                .map(|(k, _)| k)?;
            let c = self.conns.get(k)?;
            let fresh =
                c.idle.is_some_and(|i| now.saturating_duration_since(i.since) < IDLE_PEEK_AFTER);
            if fresh || c.conn.peek_alive() {
                return Some(k);
            }
            log::trace!("dropping a keep-alive connection the server closed");
            self.close_quietly(registry, k);
        }
    }

    /// A new connection to the server; `None` while its name is being resolved.
    fn connect(&mut self, registry: &Registry, now: Instant) -> io::Result<Option<usize>> {
        if self.conns.len() >= TOKEN_CLOSE {
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, "connection table full"));
        }
        let resolve_token = Token(self.base.0 + TOKEN_RESOLVE);
        let addr = match self.instances.next_addr(registry, resolve_token, now)? {
            NextAddr::At(addr) => addr,
            NextAddr::Resolving => return Ok(None),
        };
        let route = Route::to(self.instances.current(), self.tls.as_ref())?;
        let entry = self.conns.vacant_entry();
        let k = entry.key();
        let token = Token(self.base.0 + k);
        let conn = match Connection::connect(addr, route, registry, token, self.limits) {
            Ok(conn) => conn,
            Err(e) => {
                // Refused in `connect` itself (a network with no route): as a connection that
                // fails later, the next address next time.
                self.instances.connect_failed(addr);
                return Err(e);
            }
        };
        entry.insert(Conn {
            conn,
            addr,
            instance: self.instances.current_id(),
            started: now,
            exchange: None,
            idle: None,
            dedicated: false,
            backlog: false,
        });
        Ok(Some(k))
    }

    /// Fails every exchange waiting for a connection, as a connection that could not be made
    /// (the server's name did not resolve, or not in time); their next attempts go to the next
    /// instance where the session allows it, as after a failed connect.
    fn fail_waiting(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        kind: io::ErrorKind,
    ) {
        let error = TransportError::ConnectFailed(kind);
        self.rotate_after(registry, engine, &error);
        let failure = ExchangeFailure::Transport(error);
        self.session.handle_event(engine, now, SessionEvent::Unreachable(failure));
    }

    /// Writes the exchange's request into the connection's buffer and sends what it can.
    fn start_exchange(&mut self, registry: &Registry, engine: &mut Engine, now: Instant, k: usize) {
        let Some(c) = self.conns.get_mut(k) else { return };
        let Some(x) = c.exchange else { return };
        c.conn.parser().set_max_body_bytes(self.limits.max_body_bytes);
        let out = c.conn.request_buf();
        let at = self.instances.get(c.instance);
        self.session.write_request(x, now, &at.origin, &at.htu, out);
        if let Err(e) = c.conn.write() {
            self.on_conn_error(registry, engine, now, k, &e);
        }
    }

    // ----- incoming ------------------------------------------------------------------------

    /// Handles a readiness event for one of this driver's connections: reads until
    /// `WouldBlock` (or the frame budget), hands what arrived to the engine, and writes what
    /// it has to send. [`handle_event`](Self::handle_event) does the same with one system call
    /// fewer per response.
    pub fn handle_readiness(
        &mut self,
        registry: &Registry,
        token: Token,
        engine: &mut Engine,
        now: Instant,
    ) {
        self.handle_token(registry, token, true, engine, now);
    }

    /// [`handle_readiness`](Self::handle_readiness) for a whole mio event, which lets the driver
    /// skip the `read` that only returns `WouldBlock`.
    ///
    /// A plain-TCP read that returns less than asked for has emptied the socket's receive
    /// queue, and with edge-triggered readiness whatever the server sends next (bytes or its
    /// close) raises a new event, so the driver stops there. Once the event says the server
    /// closed its end (`is_read_closed`) no later event will come, so then it reads on to the
    /// end of file.
    pub fn handle_event(
        &mut self,
        registry: &Registry,
        event: &mio::event::Event,
        engine: &mut Engine,
        now: Instant,
    ) {
        self.handle_token(registry, event.token(), event.is_read_closed(), engine, now);
    }

    /// [`handle_event`](Self::handle_event) for a host that passes the token and what the event
    /// said of the peer's end (a host that only has the token passes `true`).
    pub(crate) fn handle_token(
        &mut self,
        registry: &Registry,
        token: Token,
        read_closed: bool,
        engine: &mut Engine,
        now: Instant,
    ) {
        let k = token.0.wrapping_sub(self.base.0);
        if k == TOKEN_RESOLVE {
            match self.instances.on_resolved(registry) {
                None => return,
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    log::debug!("resolving {} failed: {e}", self.instances.current().url.host);
                    self.fail_waiting(registry, engine, now, e.kind());
                }
            }
            self.flush(registry, engine, now);
            return;
        }
        if k == TOKEN_OAUTH {
            if self.oauth.handle_readiness(&mut self.session, engine, registry, now) {
                self.flush(registry, engine, now);
            }
            return;
        }
        if !self.conns.contains(k) {
            return;
        }
        self.fresh_budget();
        let result = self.drive_conn(registry, engine, now, k, read_closed);
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
        read_closed: bool,
    ) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(k) else { return Ok(()) };
        if !c.conn.advance()? {
            return Ok(());
        }
        if c.exchange.is_some() && !c.conn.has_request() {
            self.start_exchange(registry, engine, now, k);
        } else {
            c.conn.write()?;
        }
        if self.conns.get(k).is_some_and(|c| c.backlog) {
            // Waiting for its turn in `handle_timeout`; reading now would break the budget.
            return Ok(());
        }
        self.read_conn(registry, engine, now, k, read_closed, AtEof::Fail)
    }

    /// A new readiness turn: a full budget of messages, units and bytes.
    fn fresh_budget(&mut self) {
        self.budget = turn_budget(self.frames_per_readiness, self.bytes_per_readiness);
        self.bytes_left = self.bytes_per_readiness;
    }

    /// Connection `k` stops for this turn with input left (parsed or still in the socket):
    /// [`poll_timeout`](Self::poll_timeout) is due at once and the tick carries on with it.
    fn backlog(&mut self, engine: &mut Engine, now: Instant, k: usize) {
        if let Some(c) = self.conns.get_mut(k) {
            c.backlog = true;
        }
        self.backlog_since.get_or_insert(now);
        if self.bytes_left == 0 || self.budget.units == 0 {
            self.session.handle_event(engine, now, SessionEvent::Yield);
        }
    }

    /// Handles what the parser holds, then reads until `WouldBlock`, the end of the
    /// connection, or the end of the frame budget. Unless `read_closed`, a plain-TCP read
    /// shorter than asked for counts as `WouldBlock` ([`handle_event`](Self::handle_event)).
    /// `at_eof` says what the end of the connection does to an exchange it leaves unanswered.
    fn read_conn(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        k: usize,
        read_closed: bool,
        at_eof: AtEof,
    ) -> io::Result<()> {
        let mut eof = false;
        let mut drained = false;
        loop {
            let step = self.parse_responses(engine, now, k);
            if step == Parsed::Backlog {
                self.backlog(engine, now, k);
                return Ok(());
            }
            if drained && step != Parsed::Close {
                // The receive queue was empty after the last read: the next bytes, or the
                // server's close, raise a new edge.
                return Ok(());
            }
            if eof || step == Parsed::Close {
                let Some(c) = self.conns.get(k) else { return Ok(()) };
                if eof && !c.conn.is_established() {
                    // Cut during the TLS handshake: no request byte left (as `on_conn_error`).
                    return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                }
                if eof && c.exchange.is_some() && at_eof == AtEof::Keep {
                    return Ok(());
                }
                let failure = c.exchange.map(|_| TransportError::ConnectionLost);
                self.drop_conn(registry, engine, now, k, failure);
                return Ok(());
            }
            if self.bytes_left == 0 {
                // The socket may hold more, and no new edge would say so: come back soon.
                self.backlog(engine, now, k);
                return Ok(());
            }
            let Some(c) = self.conns.get_mut(k) else { return Ok(()) };
            match c.conn.read(self.bytes_left.min(MOST_READ))? {
                Input::Read { n, emptied } => {
                    drained = !read_closed && emptied;
                    self.bytes_left = self.bytes_left.saturating_sub(n);
                }
                Input::Blocked => return Ok(()),
                Input::Closed => eof = true,
            }
        }
    }

    /// Hands what the connection's response parser holds to the session, exchange by
    /// exchange, and says what the connection does next. Called from `read_conn` only, which
    /// inlines it (and the session's `handle_response` in it: a second caller cost each of
    /// them a call, 60 instructions per HTTP call, callgrind.sh).
    fn parse_responses(&mut self, engine: &mut Engine, now: Instant, k: usize) -> Parsed {
        loop {
            let Some(c) = self.conns.get_mut(k) else { return Parsed::Close };
            let Some(x) = c.exchange else {
                // Bytes nobody asked for: the connection is out of step; close it. (With
                // nothing buffered there is nothing to ask the parser: the usual case, after
                // a response that ended.)
                let parser = c.conn.parser();
                let unasked = parser.buffered() > 0 && parser.next().is_some();
                return if unasked { Parsed::Close } else { Parsed::More };
            };
            let budget = &mut self.budget;
            let ended = match self.session.handle_response(engine, now, x, c.conn.parser(), budget)
            {
                ResponseStep::More => return Parsed::More,
                ResponseStep::Backlog => return Parsed::Backlog,
                ResponseStep::Close => None,
                ResponseStep::Ended { keep_alive } => Some(keep_alive),
            };
            if let Some(location) = self.session.take_moved() {
                // Before the request goes again: it is written to the new path.
                follow_redirect(&mut self.instances, c.instance, &location);
            }
            c.exchange = None;
            // One that finished at an instance rotated away from is not kept, nor one whose
            // request was answered before it was all sent (the server would read the next
            // request as the rest of this one: HTTP/1.1 says close it).
            let current = c.instance == self.instances.current_id();
            if ended != Some(true) || c.dedicated || !current || c.conn.request_unsent() {
                return Parsed::Close;
            }
            let announced = c.conn.parser().keep_alive_timeout();
            let kept =
                announced.map_or(self.idle_timeout, |t| idle_within(t).min(self.idle_timeout));
            c.idle = Some(Idle { since: now, until: later(now, kept) });
            c.conn.clear_request();
        }
    }

    fn on_conn_error(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        k: usize,
        e: &io::Error,
    ) {
        let established = self.conns.get(k).is_some_and(|c| c.conn.is_established());
        if established && write_refused(e) && self.read_answer_left(registry, engine, now, k) {
            return;
        }
        let error = conn_failure(e, established);
        self.connect_failed(registry, engine, k, &error);
        log::debug!("HTTP connection failed: {e}");
        self.drop_conn(registry, engine, now, k, Some(error));
    }

    /// After a write to connection `k` failed: reads what the server sent before it closed
    /// (a server refusing a request from its head, a 413 or a 401, may close without reading
    /// the body, and its kernel resets the connection, which fails the write with the
    /// answer already in our receive queue). `true` when a whole answer settled the
    /// exchange and the connection is gone; `false` leaves the failure to be reported as it
    /// is. Rare: kept out of the response path.
    #[cold]
    #[inline(never)]
    fn read_answer_left(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        k: usize,
    ) -> bool {
        if self.conns.get(k).is_none_or(|c| c.exchange.is_none()) {
            return false;
        }
        // The turn that wrote may have spent its budget on other connections; this answer is
        // at most one response.
        self.fresh_budget();
        if let Err(e) = self.read_conn(registry, engine, now, k, true, AtEof::Keep) {
            log::debug!("nothing more to read after the write failed: {e}");
            return false;
        }
        // A whole answer settled the exchange, and a connection whose request was not all
        // sent is never kept: it is gone. Anything less left it for the caller to fail.
        !self.conns.contains(k)
    }

    /// What the failure of connection `k` with `error` says of where new connections go: a
    /// failed connect tries the next address next time, and the session may move to the next
    /// instance. Only for a connection to the current instance: the failures of several
    /// connections to an instance already left behind moved the choice back to it, or on past
    /// the next one.
    fn connect_failed(
        &mut self,
        registry: &Registry,
        engine: &Engine,
        k: usize,
        error: &TransportError,
    ) {
        let Some(conn) = self.conns.get(k).filter(|c| c.instance == self.instances.current_id())
        else {
            return;
        };
        if matches!(error, TransportError::ConnectFailed(_)) {
            self.instances.connect_failed(conn.addr);
        }
        self.rotate_after(registry, engine, error);
    }

    /// After a connection failed with `error`: new connections go to the next instance where
    /// the session allows it (a stateless server), and idle connections to the old one close;
    /// those in use finish where they are.
    fn rotate_after(&mut self, registry: &Registry, engine: &Engine, error: &TransportError) {
        if self.session.rotates(engine, error) && self.instances.rotate(registry) {
            let idle: SmallVec<[usize; 8]> =
                self.conns.iter().filter(|(_, c)| c.exchange.is_none()).map(|(k, _)| k).collect();
            for k in idle {
                self.close_quietly(registry, k);
            }
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
        c.conn.deregister(registry);
        if let Some(x) = c.exchange {
            // Even a request that failed before any response byte may have reached the server
            // (it can crash after reading it): the engine's policy decides what is safe to resend.
            // Until the connection is established (TCP, proxy, TLS) no request byte left.
            let error = failure.unwrap_or(TransportError::ConnectionLost);
            let failure = if c.conn.is_established() {
                ExchangeFailure::Transport(error)
            } else {
                ExchangeFailure::Unsent(error)
            };
            self.session.handle_event(engine, now, SessionEvent::Failed(x, failure));
        }
    }

    /// Closes a connection without reporting anything (cancellation, shutdown, an idle
    /// one): returns the exchange it carried, which the caller abandons
    /// ([`SessionEvent::Abandoned`]) unless the whole session closes.
    fn close_quietly(&mut self, registry: &Registry, k: usize) -> Option<ExchangeId> {
        let mut c = self.conns.try_remove(k)?;
        c.conn.deregister(registry);
        c.exchange
    }

    /// Closes every connection, and ends a legacy session when there is one: its `DELETE`
    /// is sent through the same TLS and proxy as the server's requests, and waited for
    /// `grace` at most. Blocks for up to `grace`: a [`Host`](crate::Host) does not call this,
    /// it hands the `DELETE` to its tick instead, so closing never stalls its loop.
    pub fn shutdown(&mut self, registry: &Registry, grace: Duration) {
        self.close_all(registry);
        // A poll of its own: the caller's is not this driver's to wait on.
        match mio::Poll::new() {
            Ok(mut poll) => {
                let now = Instant::now();
                let deadline = crate::time::later(now, grace);
                if let Some(end) = self.end_session(poll.registry(), now, deadline) {
                    end.wait(&mut poll);
                }
            }
            Err(e) => {
                log::debug!("cannot end the legacy session: {e}");
                let htu = &self.instances.current().htu;
                self.session.close(Instant::now(), htu, |_| ());
            }
        }
    }

    /// Closes every connection without waiting. The `DELETE` that ends a legacy session, when
    /// there is one, is returned started, its connection registered with `registry`: whoever
    /// holds it moves it on with readiness events and drops it at `now + grace`.
    pub(crate) fn detach(
        &mut self,
        registry: &Registry,
        grace: Duration,
        now: Instant,
    ) -> Option<close::SessionEnd> {
        self.close_all(registry);
        self.end_session(registry, now, later(now, grace))
    }

    /// Closes every connection and stops listening for a resolution. The exchanges they
    /// carried end with the session's `close`, which follows ([`end_session`](Self::end_session)).
    fn close_all(&mut self, registry: &Registry) {
        let keys: SmallVec<[usize; 8]> = self.conns.iter().map(|(k, _)| k).collect();
        for k in keys {
            self.close_quietly(registry, k);
        }
        self.oauth.close(registry);
        self.instances.close(registry);
    }

    /// Closes the session, and starts the `DELETE` that ends its legacy session, when there is
    /// one, on this driver's closing token.
    fn end_session(
        &mut self,
        registry: &Registry,
        now: Instant,
        deadline: Instant,
    ) -> Option<close::SessionEnd> {
        let (token, tls) = (Token(self.base.0 + TOKEN_CLOSE), self.tls.as_ref());
        let session = &mut self.session;
        close::SessionEnd::start(session, &self.instances, tls, registry, token, now, deadline)
    }
}

/// The budget of one readiness turn: `frames` messages, and a unit per 64 bytes of the byte
/// budget (see `Config::bytes_per_readiness`).
fn turn_budget(frames: usize, bytes: usize) -> Budget {
    Budget { frames, units: (bytes / UNIT_BYTES).max(1) }
}

/// Bytes of the byte budget that buy one parsed unit.
const UNIT_BYTES: usize = 64;

/// A connection's I/O failure as the transport error it reports: a proxy's refusal of the
/// tunnel and a TLS failure as such; until the connection is `established` (TCP, proxy, TLS;
/// rustls sends no request byte before) a failed connect, the request surely not delivered;
/// after, a lost connection. The MCP connections' and the OAuth flow's requests' one reading.
pub(super) fn conn_failure(e: &io::Error, established: bool) -> TransportError {
    if let Some(status) = connection::proxy_refusal(e) {
        return TransportError::ProxyRefused(status);
    }
    match tls_failure(e) {
        Some(t) => TransportError::Tls(t),
        None if !established => TransportError::ConnectFailed(e.kind()),
        None => TransportError::ConnectionLost,
    }
}

/// A write failure that a server closing the connection on purpose makes: it may have
/// answered first ([`HttpDriver::read_answer_left`]).
fn write_refused(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset)
}

/// Takes where the endpoint moved ([`HttpSession::take_moved`]) as the new target of the
/// instance that answered (which new connections may have rotated away from), if it may.
/// Rare: kept out of the response path.
#[cold]
#[inline(never)]
fn follow_redirect(instances: &mut Instances, answered: InstanceId, location: &str) {
    if !instances.move_instance(answered, location) {
        log::debug!("not following a redirect to another origin");
    }
}

/// What [`HttpDriver::read_conn`] does when the connection ends with its exchange unanswered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtEof {
    /// Fails the exchange: the connection was lost.
    Fail,
    /// Leaves the connection and its exchange to the caller, who has an error of its own to
    /// report ([`HttpDriver::read_answer_left`]).
    Keep,
}

/// Where [`HttpDriver::parse_responses`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parsed {
    /// The parser needs more bytes.
    More,
    /// The turn's budget is spent; input waits.
    Backlog,
    /// The connection must close.
    Close,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oauth::{OAuthConfig, PreRegistered};

    /// A driver whose OAuth flow is set up has something for `detach` to end with no
    /// connection and no session: the flow's timer refreshes its token. The host ends the
    /// transport of a server that closed by itself only while it is live, and took it for
    /// dead then: a closed server's flow went on refreshing tokens until it was removed.
    #[test]
    fn an_oauth_flow_alone_keeps_the_driver_live_until_detached() {
        const URL: &str = "https://mcp.example.com/mcp";
        let (config, now) = (crate::Config::default(), Instant::now());
        let mut engine = Engine::new(config.clone(), now).unwrap();
        let mut opts = HttpOptions::new(URL);
        let client = PreRegistered::with_secret("id", "secret");
        opts.oauth = Some(OAuthConfig::client_credentials(URL, client));
        let mut driver = HttpDriver::new(opts, &config, Token(0), &mut engine, now).unwrap();
        assert_eq!((driver.connections(), driver.session_id()), (0, None));
        assert!(driver.is_live(), "the flow is there to drop");
        let poll = mio::Poll::new().unwrap();
        assert!(driver.detach(poll.registry(), Duration::from_millis(250), now).is_none());
        assert!(!driver.is_live(), "nothing is left");
    }
}
