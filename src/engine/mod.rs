//! The per-server protocol state machine: no I/O, no clock, no threads.
//!
//! # Call order
//!
//! After any input (`handle_*`) or command (`call_tool`, `cancel`, ...):
//! 1. drain [`Engine::poll_transmit`] until `None`, writing each frame to the transport;
//! 2. read [`Engine::poll_timeout`] and arrange to call [`Engine::handle_timeout`] then;
//! 3. drain [`Engine::poll_event`].
//!
//! Time moves only through the `now` arguments. `handle_timeout` may be called early or
//! spuriously; it only acts on deadlines that have passed.
//!
//! # DoS warning
//!
//! Every table is bounded by [`Config`]: pending calls, message size, listing pages, queued
//! events. The engine does work proportional to the frames it is given; a driver bounds how
//! many frames it hands over per readiness event (`Config::frames_per_readiness`).

pub(crate) mod answer_checks;
pub(crate) mod breaker;
mod ending;
mod events;
mod headers;
mod inbound;
mod lifecycle;
mod listing;
mod outbound;
mod record;
mod requests;
pub(crate) mod retry;
mod roots;
mod server_requests;
mod stamp;
mod supervision;
mod tasks;
mod timers;
mod transport;

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

use serde_json::value::RawValue;

pub use breaker::{BreakerState, OperationClass};
pub use events::{CallResult, Event, ListKind};
#[cfg(feature = "http")]
pub(crate) use headers::ParamHeaderList;
pub(crate) use headers::ParamHeaders;
pub(crate) use lifecycle::discover_verdict;
pub use lifecycle::ServerState;
pub(crate) use lifecycle::VerdictOrigin;
pub use record::{CallRecord, FailureCounts, RecordSink};
pub use requests::CallId;
pub use retry::Idempotency;
pub use roots::{RootsBoundary, RootsBoundaryError};
pub use server_requests::{ServerRequestId, ServerRequestKind};
pub use tasks::{TaskMode, TaskStatus, MAX_TASK_ID_BYTES};

use crate::config::{Config, SavedVerdict};
use crate::error::{
    AnswerError, AuthorizeError, CallError, CancelError, ConfigError, LocalError, PeerError,
    RequestError, TransportError,
};
use crate::proto::json::{self, Kind};
use crate::proto::jsonrpc::write_json_str;
pub use crate::proto::jsonrpc::WireId;
use crate::proto::mcp::{Method, SubscriptionFilter};
use crate::proto::meta::{write_call_meta, StaticMeta, TraceContext};
use crate::proto::version::{Era, EraPreference, ProtocolVersion};
use ending::Outcome;
use events::EventQueue;
use lifecycle::{Lifecycle, Opening, VerdictSource};
use outbound::Control;
use requests::{CallTraits, Ended, Owner, Requests, SendState};

/// Options for one call.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// The call's deadline, from now (default: `Config::default_timeout`).
    pub timeout: Option<Duration>,
    /// Ask the server for progress notifications (the call's id is the progress token).
    pub progress: bool,
    /// W3C trace context to carry in `_meta`.
    pub trace: Option<TraceContext>,
    /// How safe the call is to send twice, overriding the tool's annotations.
    pub idempotency: Option<Idempotency>,
    /// An idempotency key, placed in the arguments under `Config::idempotency_key_field` (when
    /// not already there); it makes a write safe to retry.
    pub idempotency_key: Option<String>,
    /// The tenant whose circuit breakers the call answers to (0 by default).
    pub tenant: u32,
    /// The run or task the call belongs to, copied into its [`CallRecord`]: a host task sets
    /// its audit id here on every call made under it.
    pub run_id: Option<u64>,
    /// Start the call held: nothing is sent, and it counts against neither the in-flight
    /// limit nor the queue (nor asks its circuit breaker), until
    /// [`Engine::release`] lets it go or [`Engine::refuse`] ends it with
    /// [`LocalError::AuthorizationDenied`]. Its deadline runs meanwhile, and
    /// [`Engine::cancel`] ends it as any other call. It does take a slot of the pending table
    /// (`Config::max_pending`). A [`Host`](crate::Host) sets it for a call its authorization
    /// policy asks about.
    pub hold: bool,
    /// Whether a `tools/call` may run as a task on the server (MCP tasks): it is then polled
    /// to its end within the call's deadline, reported by `TaskCreated` and `TaskStatus`
    /// events, and ends with the usual `CallDone` or `CallFailed`. Other methods ignore it.
    pub task: TaskMode,
}

impl CallOptions {
    /// Options with a deadline.
    pub fn timeout(timeout: Duration) -> Self {
        Self { timeout: Some(timeout), ..Self::default() }
    }
}

/// Something the transport reports to the engine. Built by drivers; opaque so the driver to
/// engine protocol can grow without breaking hosts.
#[derive(Debug, Clone)]
pub struct TransportEvent(TransportEventInner);

#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
enum TransportEventInner {
    Opened(TransportKind),
    Closed(TransportError),
    ExchangeFailed(WireId, ExchangeFailure),
    SessionExpired(WireId),
}

/// Which kind of transport carries the engine's messages; it decides how cancellation and
/// replies to server requests travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportKind {
    /// One child process, newline-delimited JSON both ways.
    Stdio,
    /// Streamable HTTP: one POST per message, each reply on its own response.
    Http,
}

/// How one HTTP exchange (a POST and its response) ended without a JSON-RPC reply.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
pub(crate) enum ExchangeFailure {
    /// The transport failed, or the server answered with a bare HTTP status.
    Transport(TransportError),
    /// HTTP 401, after the token provider was asked for a fresh token once.
    Unauthorized(crate::auth::AuthChallenge),
    /// HTTP 403.
    Forbidden(crate::auth::AuthChallenge),
    /// HTTP 401 or 403, and the OAuth flow failed to get a token the server accepts.
    #[cfg(feature = "http")]
    Authorization(Box<crate::auth::oauth::AuthError>),
    /// The reply was larger than [`Config::max_message_bytes`]: the call fails with
    /// [`PeerError::TooLarge`], as over stdio.
    TooLarge,
}

impl TransportEvent {
    /// A stdio transport is open (a child was spawned).
    pub fn opened() -> Self {
        Self(TransportEventInner::Opened(TransportKind::Stdio))
    }

    /// A transport of this kind is open (for HTTP: the server was added; connections are the
    /// driver's business).
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn opened_as(kind: TransportKind) -> Self {
        Self(TransportEventInner::Opened(kind))
    }

    /// The transport is gone.
    pub fn closed(error: TransportError) -> Self {
        Self(TransportEventInner::Closed(error))
    }

    /// The exchange that carried request `id` ended without a reply.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn exchange_failed(id: WireId, failure: ExchangeFailure) -> Self {
        Self(TransportEventInner::ExchangeFailed(id, failure))
    }

    /// The legacy session that request `id` was sent on is gone (HTTP 404 on a request with a
    /// session id): the request was not processed.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn session_expired(id: WireId) -> Self {
        Self(TransportEventInner::SessionExpired(id))
    }
}

/// One frame [`Engine::poll_transmit`] wrote, or one thing the transport must do, with its
/// full route: what an HTTP transport needs to address it, borrowed from the engine.
#[derive(Debug, Clone, Copy)]
#[must_use]
pub struct Transmit<'a> {
    /// Bytes appended to the caller's buffer (0 for [`TransmitKind::CloseStream`]).
    pub len: usize,
    /// What the frame is.
    pub kind: TransmitKind,
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    version: Option<ProtocolVersion>,
    name: NameRef<'a>,
    method_name: &'a str,
    params: ParamHeaders<'a>,
}

impl<'a> Transmit<'a> {
    /// The protocol version an HTTP `MCP-Protocol-Version` header names: the probe's version
    /// while probing, the settled version once ready, none during `initialize`.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn version(&self) -> Option<ProtocolVersion> {
        self.version
    }

    /// The method of a request as written on the wire (`Mcp-Method`): the name an
    /// extension request was made with, else [`Method::as_str`]. Empty for anything else.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn method_name(&self) -> &'a str {
        self.method_name
    }

    /// The unencoded `Mcp-Name` of a request: the tool or prompt name, or the resource URI.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn name(&self) -> Option<&'a str> {
        let name = match self.name {
            NameRef::Text(text) => text,
            NameRef::Slot(bufs) => bufs.name(),
        };
        (!name.is_empty()).then_some(name)
    }

    /// The `Mcp-Param-*` headers of a `tools/call` (empty for anything else).
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn param_headers(&self) -> ParamHeaders<'a> {
        self.params
    }
}

/// Where a [`Transmit`]'s `Mcp-Name` is: text, or a call's buffers, whose name is read as text
/// (a UTF-8 check) only when a driver asks for it; the stdio driver never does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NameRef<'a> {
    Text(&'a str),
    Slot(&'a requests::SlotBufs),
}

/// What a [`Transmit`] is, so a driver can route it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransmitKind {
    /// A request; its reply will name `id`.
    Request {
        /// The wire id.
        id: WireId,
        /// The method.
        method: Method,
    },
    /// A notification (`notifications/cancelled`, `notifications/initialized`).
    Notification,
    /// A reply to a request the server sent.
    Response,
    /// Close the response stream of request `id` (HTTP cancellation); no bytes were written.
    CloseStream {
        /// The wire id of the request whose stream to close.
        id: WireId,
    },
}

/// Counters of what the engine saw; cheap to read, never reset (but for `queued`, a gauge).
///
/// Throughput: at most `Config::max_in_flight` calls (default 32) are written at once, and an
/// HTTP server carries at most `HttpOptions::max_connections` (default 4) of them at a time;
/// past either limit calls wait. `queued` says how many wait now and `queue_wait` how long
/// they have waited in all; each call's [`CallRecord::queue_wait`] says its own share.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Host calls waiting now: for an in-flight slot (`Config::max_in_flight`) or for the
    /// server to be ready, and, from `Host::stats` over HTTP, written but waiting for a
    /// connection (`HttpOptions::max_connections`).
    pub queued: u64,
    /// Time host calls have spent waiting, summed over every call so far: before their first
    /// write, and over HTTP for a connection (each attempt).
    pub queue_wait: Duration,
    /// Frames handed to `handle_message`.
    pub frames_in: u64,
    /// Frames that were not JSON-RPC messages (junk on stdout, bad shapes); skipped.
    pub invalid_frames: u64,
    /// Messages over the size limit.
    pub too_large: u64,
    /// Replies whose id was never issued.
    pub unknown_ids: u64,
    /// Second replies for an id already answered.
    pub duplicate_responses: u64,
    /// Replies for calls that had been cancelled or had timed out.
    pub late_responses: u64,
    /// Error replies with `"id": null`.
    pub errors_without_id: u64,
    /// Requests from the server (legacy JSON-RPC requests: `ping`, and those handed to the
    /// host or refused).
    pub server_requests: u64,
    /// Control frames dropped because their queue was full.
    pub control_dropped: u64,
    /// Progress and change events dropped because the host did not drain events.
    pub events_dropped: u64,
    /// Requests written.
    pub requests_sent: u64,
    /// Attempts sent again after a transient failure.
    pub retries: u64,
    /// Legacy HTTP sessions renewed after the server forgot them.
    pub sessions_renewed: u64,
    /// Host calls that ended (completed or failed).
    pub calls: u64,
    /// Host calls that failed, by the kind of their error.
    pub failures: FailureCounts,
    /// Times a circuit breaker opened.
    pub breaker_trips: u64,
    /// Readiness turns a driver cut short because the server's input passed
    /// `Config::bytes_per_readiness` (or its unit budget) before the turn ended: a server
    /// sending faster than the host polls, or flooding with input that delivers nothing.
    pub input_yields: u64,
}

const MAX_CONTROL: usize = 256;

/// One server's protocol engine.
///
/// Every public verb is in the one `impl` block below, in four families: getters (`&self`, no
/// side effects), commands (`call_tool`, `cancel`, `restart`, ...), inputs (`handle_*`) and
/// outputs (`poll_*`). After any input or command, drain [`poll_transmit`](Self::poll_transmit)
/// until `None`, read [`poll_timeout`](Self::poll_timeout), then drain
/// [`poll_event`](Self::poll_event). Time moves only through the `now` arguments. The work
/// behind the verbs lives in modules named for their job: `lifecycle`, `inbound`, `outbound`,
/// `transport`, `ending`, `listing`, `retry`, `breaker`, `supervision`, `timers`.
#[derive(Debug)]
pub struct Engine {
    config: Config,
    lifecycle: Lifecycle,
    wants_transport: bool,
    transport: TransportKind,
    requests: Requests,
    /// Host requests waiting to be written, in call order.
    send_queue: VecDeque<WireId>,
    control: VecDeque<Control>,
    events: EventQueue,
    meta: Option<StaticMeta>,
    /// The `server/discover` or `initialize` result, kept for the host.
    server_info: String,
    /// `x-mcp-header` annotations and idempotency hints from the last complete tool listing.
    tool_headers: headers::ToolHeaders,
    /// The engine's own `tools/list`, run when a server says a call's headers were wrong.
    refresh: Option<usize>,
    breakers: breaker::Breakers,
    jitter: retry::Jitter,
    /// How long calls have been taking (moving average), to judge whether a retry still fits.
    /// A [`Span`](stamp::Span): the average is integer arithmetic on nanoseconds, where a
    /// `Duration` multiplied and divided costs a division of seconds and nanoseconds per call.
    latency: stamp::Span,
    restart: supervision::RestartState,
    /// Why the probe or handshake was refused for want of authorization, until the next call
    /// or [`retry_authorization`](Self::retry_authorization) runs it again.
    unauthorized: Option<CallError>,
    /// Deadlines and backoffs of pending requests, earliest first.
    timers: timers::Timers,
    /// What the compact times in the pending table count from.
    epoch: stamp::Epoch,
    stats: Stats,
    /// Server requests waiting for the host's answer.
    server_requests: server_requests::ServerRequests,
    /// `Config::client_capabilities` with exactly the declared server-request kinds.
    capabilities: String,
    /// The host's roots and where they may point.
    roots: roots::Roots,
    /// Where the modern verdict came from, and how long it stays fresh.
    verdict: VerdictSource,
    /// `Config::saved_discover` is still to be used (on the first transport).
    saved_pending: bool,
    /// The era was taken from a saved verdict and no answer has confirmed it yet.
    assumed: bool,
    /// `Config::extensions` declares the tasks extension: every `tools/call` takes a task.
    tasks_declared: bool,
    /// The modern `_meta` of a call that declares the tasks extension (when `Config` does
    /// not already declare it for every call).
    task_meta: Option<StaticMeta>,
    /// The `Mcp-Name` of the last control request written (`tasks/cancel`: the task id).
    control_name: String,
}

impl Engine {
    /// Builds an engine; checks the config once and preallocates every table.
    pub fn new(config: Config, now: Instant) -> Result<Self, ConfigError> {
        config.check()?;
        let next = match config.era {
            EraPreference::LegacyOnly => Opening::Handshake,
            _ => Opening::Probe,
        };
        Ok(Self {
            lifecycle: Lifecycle::Connecting { next },
            wants_transport: true,
            transport: TransportKind::Stdio,
            requests: Requests::with_capacity(config.max_pending),
            send_queue: VecDeque::with_capacity(config.max_pending),
            control: VecDeque::with_capacity(MAX_CONTROL),
            events: EventQueue::new(config.max_queued_events),
            meta: None,
            server_info: String::new(),
            tool_headers: headers::ToolHeaders::default(),
            refresh: None,
            breakers: breaker::Breakers::new(config.breaker),
            jitter: retry::Jitter::new(config.jitter_seed),
            latency: stamp::Span::ZERO,
            restart: supervision::RestartState::default(),
            unauthorized: None,
            timers: timers::Timers::with_capacity(config.max_pending),
            epoch: stamp::Epoch::new(now),
            stats: Stats::default(),
            server_requests: server_requests::ServerRequests::with_capacity(
                config.max_server_requests,
            ),
            capabilities: server_requests::with_extensions(
                config.answers.capabilities(&config.client_capabilities),
                &config.extensions,
            ),
            roots: roots::Roots::default(),
            verdict: VerdictSource::None,
            saved_pending: config.saved_discover.is_some()
                && config.era != EraPreference::LegacyOnly,
            assumed: false,
            tasks_declared: tasks::declared(&config.extensions),
            task_meta: None,
            control_name: String::new(),
            config,
        })
    }

    // ----- getters -------------------------------------------------------------------------

    /// The record of a listing the host's capability cache answered without a request.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // made by the host only
    pub(crate) fn cache_hit_record(&self, method: Method, age: Duration) -> CallRecord<'static> {
        let mut r = CallRecord::new(method, self.transport);
        r.version = self.lifecycle.version();
        r.cache_hit = true;
        r.cache_age = Some(age);
        r
    }

    /// The boundary set by [`set_roots_boundary`](Self::set_roots_boundary) (empty: roots may
    /// be anywhere lexically sound).
    pub fn roots_boundary(&self) -> &RootsBoundary {
        self.roots.boundary()
    }

    /// Where the engine is: connecting, probing, handshaking, ready (with era), closed.
    pub fn state(&self) -> ServerState {
        if self.unauthorized.is_some() {
            return ServerState::Unauthorized;
        }
        self.lifecycle.public()
    }

    /// Why the server is [`ServerState::Unauthorized`]: the error its probe or handshake
    /// failed with (`PeerError::Authorization` naming the OAuth step, `AuthRequired`,
    /// `Forbidden`, or a local OAuth configuration problem, `LocalError::OAuthSetup`).
    pub fn authorization_error(&self) -> Option<&CallError> {
        self.unauthorized.as_ref()
    }

    /// The era the server speaks, once settled.
    pub fn era(&self) -> Option<Era> {
        match self.lifecycle {
            Lifecycle::Ready { version } => Some(version.era()),
            _ => None,
        }
    }

    /// The raw `server/discover` (modern) or `initialize` (legacy) result, once ready.
    pub fn server_info(&self) -> Option<&str> {
        (!self.server_info.is_empty()).then_some(self.server_info.as_str())
    }

    /// The era verdict to keep for the next run of the host ([`Config::saved_discover`]): the
    /// `server/discover` result, its version and, from its `ttlMs`, when it expires. `wall`
    /// is the wall-clock time at `now` (the engine reads no clock). `None` unless the server
    /// is ready in the modern era and the verdict is still fresh; a saved verdict in use is
    /// given back as it was.
    pub fn verdict(&self, now: Instant, wall: SystemTime) -> Option<SavedVerdict> {
        self.saved_verdict(now, wall)
    }

    /// Where the era came from, without copying the verdict: what the host's capability
    /// store looks at on every tick.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the host's alone
    pub(crate) fn verdict_origin(&self) -> VerdictOrigin {
        match (self.era(), &self.verdict) {
            (_, VerdictSource::Probed { .. }) => VerdictOrigin::Probed,
            (_, VerdictSource::Saved) => VerdictOrigin::Saved,
            (Some(Era::Legacy), VerdictSource::None) => VerdictOrigin::Legacy,
            (_, VerdictSource::None) => VerdictOrigin::Unsettled,
        }
    }

    /// Calls pending (queued or in flight), including the probe or handshake.
    pub fn pending(&self) -> usize {
        self.requests.len()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let (events_dropped, breaker_trips) = (self.events.dropped, self.events.breaker_trips);
        let queued = self.requests.queued() as u64;
        Stats { events_dropped, breaker_trips, queued, ..self.stats }
    }

    /// A driver stopped reading this server's input at its byte or unit budget.
    #[cfg(feature = "stdio")]
    pub(crate) fn note_input_yield(&mut self) {
        self.stats.input_yields += 1;
    }

    /// `true` when the engine needs a (new) transport: at start, and after a probe killed the
    /// server process (it is respawned once, for the legacy handshake).
    pub fn wants_transport(&self) -> bool {
        self.wants_transport
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// `true` while restarts are suspended because the server kept crashing (until the
    /// cool-down ends or the host calls [`restart`](Self::restart)).
    pub fn is_degraded(&self) -> bool {
        self.restart.is_degraded()
    }

    /// Why the last server process ended (stdio: its exit status and stderr tail), once one
    /// has; kept across restarts for diagnostics.
    pub fn last_transport_error(&self) -> Option<&TransportError> {
        self.restart.last_loss()
    }

    /// A breaker's state, for diagnostics.
    pub fn breaker_state(&self, tenant: u32, class: OperationClass) -> breaker::BreakerState {
        self.breakers.state(tenant, class)
    }

    /// Calls in flight (written or backing off) and waiting in the queue.
    pub fn load(&self) -> (usize, usize) {
        (self.requests.in_flight(), self.requests.queued())
    }

    /// Processes started after the first (stdio), for diagnostics.
    pub fn restart_count(&self) -> u32 {
        self.restart.restarts
    }

    /// The old name of [`restart_count`](Self::restart_count), which read as a verb beside
    /// [`restart`](Self::restart).
    #[deprecated(note = "renamed restart_count")]
    pub fn restarts(&self) -> u32 {
        self.restart_count()
    }

    // ----- commands ------------------------------------------------------------------------

    /// Starts `tools/call`. `arguments` must be a JSON object.
    pub fn call_tool(
        &mut self,
        now: Instant,
        name: &str,
        arguments: &RawValue,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        if !arguments.get().trim_start().starts_with('{') {
            return Err(RequestError::ArgumentsNotObject);
        }
        self.call_tool_checked_text(now, name, arguments.get(), opts)
    }

    /// [`call_tool`](Self::call_tool) with the arguments as JSON text: checked once here (the
    /// RFC 8259 grammar, UTF-8 and nesting, without allocating) and written as they are, so
    /// the caller needs no `RawValue`. Whitespace around the object is left out.
    ///
    /// # Errors
    ///
    /// [`RequestError::ArgumentsNotJson`] when the text is not one JSON value,
    /// [`RequestError::ArgumentsNotObject`] when it is another kind of value; then the others
    /// of [`call_tool`](Self::call_tool).
    pub fn call_tool_json(
        &mut self,
        now: Instant,
        name: &str,
        arguments: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let arguments = checked_arguments(arguments)?;
        self.call_tool_checked_text(now, name, arguments, opts)
    }

    /// `tools/call` with arguments known to be one JSON object.
    fn call_tool_checked_text(
        &mut self,
        now: Instant,
        name: &str,
        arguments: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let hint = self.tool_headers.class_of(name);
        // Cloned only for keyed calls: the closure below cannot borrow the config.
        let key_field =
            opts.idempotency_key.as_ref().map(|_| self.config.idempotency_key_field.clone());
        let key = opts.idempotency_key.as_deref();
        let call = self.request(now, Method::ToolsCall, opts, hint, name, |p| {
            p.extend_from_slice(b"\"name\":");
            write_json_str(p, name);
            p.extend_from_slice(b",\"arguments\":");
            retry::write_arguments(p, arguments, key_field.as_deref().unwrap_or(""), key);
        });
        let call = call?;
        if let Some(ttl) = self.task_wanted(name, opts.task) {
            self.ask_for_task(call.0.slot(), ttl);
        }
        if self.transport == TransportKind::Http {
            let slot = call.0.slot();
            let out = &mut self.requests.bufs_mut(slot).param_headers;
            self.tool_headers.write_for_call(name, arguments, out);
        }
        Ok(call)
    }

    /// Starts a listing (`tools/list`, `resources/list`, `resources/templates/list`,
    /// `prompts/list`) that follows `nextCursor` to the end and completes with every item.
    pub fn list(
        &mut self,
        now: Instant,
        method: Method,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        if method.list_key().is_none() {
            return Err(RequestError::NotSupportedByEra);
        }
        self.request(now, method, opts, None, "", |_| {})
    }

    /// Starts a listing of one page: the request carries `cursor` (none for the first page)
    /// and completes with the page's result as the server sent it (`nextCursor`, `ttlMs`,
    /// `cacheScope` kept), less any tool whose `x-mcp-header` annotation breaks the rules. The
    /// caller follows the cursor; the capability cache does, to cache each page on its own.
    pub fn list_page(
        &mut self,
        now: Instant,
        method: Method,
        cursor: Option<&str>,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        if method.list_key().is_none() {
            return Err(RequestError::NotSupportedByEra);
        }
        let call = self.request(now, method, opts, None, "", |p| {
            if let Some(c) = cursor {
                p.extend_from_slice(b"\"cursor\":");
                write_json_str(p, c);
            }
        })?;
        if let Some(p) = self.requests.get_mut(call.0.slot()) {
            p.one_page = true;
        }
        Ok(call)
    }

    /// Starts `resources/read`.
    pub fn read_resource(
        &mut self,
        now: Instant,
        uri: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.request(now, Method::ResourcesRead, opts, None, uri, |p| {
            p.extend_from_slice(b"\"uri\":");
            write_json_str(p, uri);
        })
    }

    /// Starts `prompts/get`. `arguments` must be a JSON object of strings, or `None`.
    pub fn get_prompt(
        &mut self,
        now: Instant,
        name: &str,
        arguments: Option<&RawValue>,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        if arguments.is_some_and(|a| !a.get().trim_start().starts_with('{')) {
            return Err(RequestError::ArgumentsNotObject);
        }
        self.request(now, Method::PromptsGet, opts, None, name, |p| {
            p.extend_from_slice(b"\"name\":");
            write_json_str(p, name);
            if let Some(a) = arguments {
                p.extend_from_slice(b",\"arguments\":");
                p.extend_from_slice(a.get().as_bytes());
            }
        })
    }

    /// Starts `completion/complete`. `reference` is the `ref` object
    /// (`{"type":"ref/prompt","name":..}` or `{"type":"ref/resource","uri":..}`).
    pub fn complete(
        &mut self,
        now: Instant,
        reference: &RawValue,
        argument_name: &str,
        argument_value: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        if !reference.get().trim_start().starts_with('{') {
            return Err(RequestError::ArgumentsNotObject);
        }
        self.request(now, Method::Complete, opts, None, "", |p| {
            p.extend_from_slice(b"\"ref\":");
            p.extend_from_slice(reference.get().as_bytes());
            p.extend_from_slice(b",\"argument\":{\"name\":");
            write_json_str(p, argument_name);
            p.extend_from_slice(b",\"value\":");
            write_json_str(p, argument_value);
            p.push(b'}');
        })
    }

    /// Starts a request by method name, for methods mcpoll has no verb for: an extension's
    /// (declare it in `Config::extensions`) or a vendor's. `params` is a JSON object (the
    /// engine adds `_meta`), or `None` for none. The call is like any other: deadline,
    /// cancellation, circuit breaker, call record, retries only when `opts.idempotency` says
    /// it is safe to repeat (unknown by default). It completes with the raw result. A method
    /// with a verb of its own (`tools/call`, `initialize`, ...) is refused with
    /// [`RequestError::InvalidMethod`], as is an empty name or one with a byte outside
    /// printable ASCII (it travels in the `Mcp-Method` header).
    pub fn request_raw(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&RawValue>,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let printable = method.bytes().all(|b| b.is_ascii_graphic());
        if method.is_empty() || !printable || Method::CORE.iter().any(|m| m.as_str() == method) {
            return Err(RequestError::InvalidMethod);
        }
        let members = match params.map(|p| p.get().trim()) {
            None => "",
            Some(p) if p.starts_with('{') && p.ends_with('}') => p[1..p.len() - 1].trim(),
            Some(_) => return Err(RequestError::ArgumentsNotObject),
        };
        // The method name is kept where a call's `Mcp-Name` goes: extensions have none.
        self.request(now, Method::Extension, opts, None, method, |p| {
            p.extend_from_slice(members.as_bytes())
        })
    }

    /// Starts a call that reattaches to a task by its id: one a `TaskCreated` event named,
    /// kept across a dropped connection or a restart of the host. The call polls the task
    /// (`tasks/get`) at once and then at its `pollInterval`, reports `TaskStatus` events, and
    /// ends as the task-backed call would have: `CallDone` with the tool's result, or
    /// `CallFailed` (a server that no longer knows the task answers with an error, `-32602`).
    /// Cancelling it sends `tasks/cancel`. `opts.timeout` bounds the wait as for any call.
    pub fn resume_task(
        &mut self,
        now: Instant,
        task_id: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.resume(now, task_id, opts)
    }

    /// The task-backed calls pending: each call, its task id and the status last reported
    /// (`None` until the first poll of a resumed call). What a host persists to resume
    /// them after a restart.
    pub fn tasks(&self) -> impl Iterator<Item = (CallId, &str, Option<TaskStatus>)> + '_ {
        self.task_calls()
    }

    /// Sends `server/discover` (modern servers only; the probe's answer is also kept in
    /// [`server_info`](Self::server_info)).
    pub fn discover(&mut self, now: Instant, opts: &CallOptions) -> Result<CallId, RequestError> {
        if self.era() == Some(Era::Legacy) {
            return Err(RequestError::NotSupportedByEra);
        }
        self.request(now, Method::Discover, opts, None, "", |_| {})
    }

    /// Opens a `subscriptions/listen` subscription (modern servers). The returned call stays
    /// pending while the subscription lives: `Subscribed` when the server acknowledges it, then
    /// `ListChanged` / `ResourceUpdated` events, and finally the call's own terminal event.
    /// [`cancel`](Self::cancel) ends it the transport's way. It has no deadline unless
    /// `opts.timeout` sets one.
    pub fn listen(
        &mut self,
        now: Instant,
        filter: &SubscriptionFilter,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        if self.era() == Some(Era::Legacy) {
            return Err(RequestError::NotSupportedByEra);
        }
        let mut opts = opts.clone();
        // No deadline by default: ten years stands in for "never" without a special case.
        opts.timeout = opts.timeout.or(Some(Duration::from_secs(10 * 365 * 86_400)));
        self.request(now, Method::Listen, &opts, None, "", |p| {
            p.extend_from_slice(b"\"notifications\":");
            filter.write(p);
        })
    }

    /// Sends `ping` (legacy servers only: 2026-07-28 removed it).
    pub fn ping(&mut self, now: Instant, opts: &CallOptions) -> Result<CallId, RequestError> {
        if self.era() == Some(Era::Modern) {
            return Err(RequestError::NotSupportedByEra);
        }
        self.request(now, Method::Ping, opts, None, "", |_| {})
    }

    fn request(
        &mut self,
        now: Instant,
        method: Method,
        opts: &CallOptions,
        tool_hint: Option<Idempotency>,
        name: &str,
        params: impl FnOnce(&mut Vec<u8>),
    ) -> Result<CallId, RequestError> {
        if self.lifecycle == Lifecycle::Closed {
            return Err(RequestError::Closed);
        }
        // A server refused for want of authorization tries again for a new call, as a legacy
        // server whose calls alone were refused would.
        self.retry_authorization(now);
        if self.is_degraded() {
            return Err(RequestError::Degraded);
        }
        // A held call takes its place in the queue, and asks its breaker, when released.
        if (!opts.hold && !self.room_in_queue()) || !self.room_for_end() {
            return Err(RequestError::Overloaded);
        }
        let trace = match &opts.trace {
            Some(t) => Some(t.check().map_err(RequestError::TraceContext)?),
            None => None,
        };
        let class = self.classify(method, opts, tool_hint);
        let op =
            if class == Idempotency::Read { OperationClass::Read } else { OperationClass::Write };
        if !opts.hold && !self.admit(opts.tenant, op, now) {
            return Err(RequestError::BreakerOpen);
        }
        let timeout = opts.timeout.unwrap_or(self.config.default_timeout);
        let now = self.epoch.stamp(now);
        let deadline = now.after(timeout);
        let (progress, tenant, run_id) = (opts.progress, opts.tenant, opts.run_id);
        let traits = CallTraits { progress, class, tenant, trace, run_id };
        let slot = self
            .requests
            .insert(method, Owner::Host, now, deadline, traits)
            .ok_or(RequestError::Overloaded)?;
        // SAFETY-style note: `insert` just filled this slot.
        let call = self.requests.call_id(slot).ok_or(RequestError::Overloaded)?;
        self.timers.schedule_request(&self.requests, slot, deadline, timers::TimerKind::Deadline);
        let bufs = self.requests.bufs_mut(slot);
        let token = opts.progress.then(|| call.get());
        bufs.start(|meta| write_call_meta(meta, token, opts.trace.as_ref()), name);
        params(bufs.params_buf().0);
        // Host JSON may be pretty-printed. In valid JSON a raw CR or LF can only be whitespace
        // (inside strings they must be escaped), and on stdio one would end the frame early.
        let params = bufs.params_mut();
        let mut at = 0;
        while let Some(k) = params.get(at..).and_then(|rest| memchr::memchr2(b'\n', b'\r', rest)) {
            at += k;
            if let Some(b) = params.get_mut(at) {
                *b = b' ';
            }
            at += 1;
        }
        if opts.hold {
            self.requests.set_state(slot, SendState::Held);
        } else if let Some(id) = self.requests.wire_id(slot) {
            self.send_queue.push_back(id);
        }
        Ok(call)
    }

    /// Lets a held call ([`CallOptions::hold`]) go: it joins the queue now, behind the calls
    /// already there, and asks its circuit breaker. `Err(Overloaded)` when the queue has no
    /// room: the call stays held (release it later, or refuse it). An open breaker ends the
    /// call with [`LocalError::BreakerOpen`] (an event, as for any call).
    pub fn release(&mut self, now: Instant, call: CallId) -> Result<(), AuthorizeError> {
        let slot = self.held_slot(call)?;
        if !self.room_in_queue() {
            return Err(AuthorizeError::Overloaded);
        }
        let Some(p) = self.requests.get(slot) else { return Err(AuthorizeError::NotHeld) };
        let (tenant, op, created) = (p.tenant, p.op, p.created);
        // Kept with the slot's rarely used buffers: a held call is the exception.
        self.requests.bufs_mut(slot).more().held = self.epoch.stamp(now).since(created).into();
        if !self.admit(tenant, op, now) {
            let error = CallError::Local(LocalError::BreakerOpen);
            self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error));
            return Ok(());
        }
        self.requests.set_state(slot, SendState::Queued);
        if let Some(id) = self.requests.wire_id(slot) {
            self.send_queue.push_back(id);
        }
        Ok(())
    }

    /// Ends a held call ([`CallOptions::hold`]) unsent, with
    /// [`LocalError::AuthorizationDenied`] carrying `reason` (a `CallFailed` event and a call
    /// record, as for any call). It is not retried and its breaker never hears of it.
    pub fn refuse(
        &mut self,
        now: Instant,
        call: CallId,
        reason: &str,
    ) -> Result<(), AuthorizeError> {
        let slot = self.held_slot(call)?;
        let error = CallError::Local(LocalError::AuthorizationDenied(reason.into()));
        self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error));
        Ok(())
    }

    /// `true` while `call` is held for authorization.
    pub fn is_held(&self, call: CallId) -> bool {
        self.held_slot(call).is_ok()
    }

    /// Asks the call's circuit breaker; a change of its state is an event.
    fn admit(&mut self, tenant: u32, op: OperationClass, now: Instant) -> bool {
        let (ok, change) = self.breakers.admit(tenant, op, now);
        if let Some(c) = change {
            self.events.breaker(c.tenant, c.class, c.state);
        }
        ok
    }

    /// Bounds the roots the host offers: an answer to a roots request, and any list given to
    /// [`set_roots`](Self::set_roots), is refused when a root lies outside every directory. A
    /// list set earlier that the new boundary refuses is dropped (roots requests go to the host
    /// again), so a narrowed boundary never lets old roots out.
    pub fn set_roots_boundary(&mut self, boundary: RootsBoundary) {
        self.roots.set_boundary(boundary);
    }

    /// Sets the host's roots (a `ListRootsResult`: `{"roots":[{"uri":"file:///...",
    /// "name":..}]}`), checked like an answer; from now on the engine answers roots requests
    /// with it. When the list changed, the server speaks 2025-11-25 and the host declared
    /// `ServerRequestKinds::roots_list_changed`, `notifications/roots/list_changed` is sent
    /// (2026-07-28 has no such notification: a modern server asks for roots in each round).
    pub fn set_roots(&mut self, _now: Instant, roots: &RawValue) -> Result<(), AnswerError> {
        let answers = self.config.answers;
        if self.roots.set(roots.get())?
            && answers.roots
            && answers.roots_list_changed
            && self.era() == Some(Era::Legacy)
        {
            self.push_control(outbound::Control::RootsChanged);
        }
        Ok(())
    }

    fn held_slot(&self, call: CallId) -> Result<usize, AuthorizeError> {
        let slot = self.requests.slot_of(call).ok_or(AuthorizeError::NotHeld)?;
        match self.requests.get(slot) {
            Some(p) if p.state == SendState::Held => Ok(slot),
            _ => Err(AuthorizeError::NotHeld),
        }
    }

    /// Room for one more queued call. Calls that a free in-flight slot will take at the next
    /// transmit are not "queued".
    fn room_in_queue(&self) -> bool {
        let free = self.config.max_in_flight.saturating_sub(self.requests.in_flight());
        self.requests.queued() < self.config.max_queued + free
    }

    /// Cancels a call: the local wait ends at once (a `CallFailed { Cancelled }` event), the
    /// server is told if the request was written (`notifications/cancelled`), and a reply that
    /// arrives later is counted as late and never delivered. Side effects are not undone.
    pub fn cancel(&mut self, now: Instant, call: CallId) -> Result<(), CancelError> {
        let slot = self.requests.slot_of(call).ok_or(CancelError::NotPending)?;
        let Some(p) = self.requests.get(slot) else {
            return Err(CancelError::NotPending);
        };
        if p.owner != Owner::Host {
            return Err(CancelError::Handshake);
        }
        self.abandon(now, slot, CallError::Local(LocalError::Cancelled));
        Ok(())
    }

    /// Closes the engine: every pending call fails, and nothing more is sent.
    pub fn close(&mut self, now: Instant) {
        let error = CallError::Transport(TransportError::Closed(crate::error::CloseReason::Host));
        self.shut(now, error);
    }

    /// Runs the probe or handshake again on a server that is
    /// [`ServerState::Unauthorized`] (an OAuth flow that failed, credentials refused), after
    /// the host fixed what was wrong (a redirect, a token provider, a user's consent). A new
    /// call does the same. Does nothing in any other state.
    pub fn retry_authorization(&mut self, now: Instant) {
        if self.unauthorized.take().is_none() {
            return;
        }
        if let Lifecycle::Connecting { .. } = self.lifecycle {
            self.on_opened(now, self.transport);
        }
    }

    /// The host asks a degraded (or closed-by-crash) server to start again now.
    pub fn restart(&mut self) {
        if self.lifecycle == Lifecycle::Closed {
            return;
        }
        self.restart.reset();
        self.wants_transport = true;
    }

    // ----- inputs --------------------------------------------------------------------------

    /// Reports a transport change.
    pub fn handle_transport(&mut self, now: Instant, event: TransportEvent) {
        match event.0 {
            TransportEventInner::Opened(kind) => self.on_opened(now, kind),
            TransportEventInner::Closed(error) => self.on_closed(now, error),
            TransportEventInner::ExchangeFailed(id, failure) => {
                self.on_exchange_failed(now, id, failure)
            }
            TransportEventInner::SessionExpired(id) => self.on_session_expired(now, id),
        }
    }

    /// Handles one complete frame from the codec. Never panics, whatever the bytes.
    pub fn handle_message(&mut self, now: Instant, frame: &[u8]) {
        self.dispatch(now, frame, None);
    }

    /// Handles one frame that arrived on the response to request `to` (HTTP): like
    /// [`handle_message`](Self::handle_message), except that an error with `"id": null` (legacy
    /// servers send those for transport-level rejections) is taken as the answer to `to`.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn handle_reply(&mut self, now: Instant, frame: &[u8], to: WireId) {
        self.dispatch(now, frame, Some(to));
    }

    /// Reports a message the codec dropped for size, with the first and last bytes of it: when
    /// the JSON-RPC id can be read from them, that call fails with `TooLarge`.
    pub fn handle_oversize(&mut self, now: Instant, head: &[u8], tail: &[u8]) {
        self.stats.too_large += 1;
        self.fail_unreadable(now, inbound::sniff_id(head, tail), PeerError::TooLarge);
    }

    /// Fires every deadline that has passed. Safe to call early or often.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.resilience_timeout(now);
        self.expire_server_requests(now);
        self.lifecycle_timeout(now);
        let at = self.epoch.stamp(now);
        while let Some(t) = self.timers.pop_due(at) {
            match t.kind {
                timers::TimerKind::Backoff if timers::timer_live(&self.requests, &t) => {
                    let slot = t.slot as usize;
                    match self.requests.get(slot).map(|p| p.state) {
                        Some(SendState::TaskWait(_)) => self.task_poll_due(slot),
                        _ => self.backoff_ended(now, slot),
                    }
                }
                timers::TimerKind::Deadline if timers::timer_live(&self.requests, &t) => {
                    self.deadline_passed(now, t.slot as usize)
                }
                // The call ended or moved on since this was scheduled.
                _ => {}
            }
        }
        self.timers.tidy(&self.requests);
    }

    // ----- outputs -------------------------------------------------------------------------

    /// Appends the next frame to `buf` (without a newline: framing is the driver's), or
    /// returns `None` when there is nothing to send.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit<'_>> {
        let start = buf.len();
        if let Some(c) = self.control.pop_front() {
            let kind = self.write_control(buf, c);
            return Some(self.route(buf.len() - start, kind));
        }
        if let Some(id) = self.take_lifecycle_send() {
            let method = self.write_request(now, buf, id)?;
            return Some(self.route(buf.len() - start, TransmitKind::Request { id, method }));
        }
        if !matches!(self.lifecycle, Lifecycle::Ready { .. }) {
            return None;
        }
        while let Some(id) = self.send_queue.pop_front() {
            if self.requests.in_flight() >= self.config.max_in_flight && self.is_fresh(id) {
                // The limit is reached: the rest wait, in order.
                self.send_queue.push_front(id);
                return None;
            }
            if let Some(method) = self.write_request(now, buf, id) {
                return Some(self.route(buf.len() - start, TransmitKind::Request { id, method }));
            }
        }
        None
    }

    /// The earliest deadline the engine is waiting for, if any.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // The heap may hold a stale earliest entry: at worst one early wake-up.
        self.timers
            .earliest()
            .map(|at| self.epoch.instant(at))
            .into_iter()
            .chain(self.reprobe_at())
            .chain(self.restart.next_wakeup())
            .chain(self.server_requests.next_deadline())
            .min()
    }

    /// The next event for the host. Borrowed data in it is valid until the next call on the
    /// engine.
    pub fn poll_event(&mut self) -> Option<Event<'_>> {
        self.events.pop()
    }

    /// [`poll_event`](Self::poll_event), paired with `tag` (the host's server id) in place.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // read by the host only
    pub(crate) fn poll_event_tagged<T>(&mut self, tag: T) -> Option<(T, Event<'_>)> {
        self.events.pop_tagged(tag)
    }

    /// [`poll_event`](Self::poll_event), with the event's text copied into `scratch` so the
    /// event does not borrow the engine (see `Host::drain`).
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn poll_event_into(
        &mut self,
        scratch: &mut String,
    ) -> Option<events::DetachedEvent> {
        self.events.pop_into(scratch)
    }

    /// Removes and returns the terminal event (`CallDone` or `CallFailed`) of one call,
    /// leaving every other event queued in order. For blocking helpers.
    pub fn take_call_event(&mut self, call: CallId) -> Option<Event<'_>> {
        self.events.take_terminal(call)
    }

    /// Events waiting for the host.
    pub fn queued_events(&self) -> usize {
        self.events.len()
    }

    /// `list_changed` notifications of each kind received so far (tools, prompts, resources),
    /// whether or not their events were drained or dropped: how the host's capability cache
    /// notices a change without taking the host's events.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // read by the host only
    pub(crate) fn list_changes(&self) -> [u64; 3] {
        self.events.list_changes
    }
}

/// Tool-call arguments given as text: one JSON object (the text of it, without the whitespace
/// around it). One validating scan that allocates nothing.
fn checked_arguments(text: &str) -> Result<&str, RequestError> {
    let value = json::parse(text.as_bytes()).map_err(|_| RequestError::ArgumentsNotJson)?;
    if value.kind() != Kind::Object {
        return Err(RequestError::ArgumentsNotObject);
    }
    Ok(value.text())
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_authorization;
#[cfg(test)]
mod tests_extensions;
#[cfg(test)]
mod tests_records;
#[cfg(test)]
mod tests_resilience;
#[cfg(test)]
mod tests_roots_sampling;
#[cfg(test)]
mod tests_saved_verdict;
#[cfg(test)]
mod tests_server_requests;
#[cfg(test)]
mod tests_tasks;
#[cfg(all(test, not(feature = "server-requests")))]
mod tests_without_server_requests;
