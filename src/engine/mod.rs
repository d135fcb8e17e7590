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

pub mod breaker;
mod events;
mod headers;
mod lifecycle;
mod requests;
mod resilience;
pub mod retry;
mod timers;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use smallvec::SmallVec;

pub use breaker::{BreakerPolicy, BreakerState, OperationClass};
pub use events::{CallRecord, CallResult, Event, ListKind};
#[cfg(feature = "http")]
pub(crate) use headers::ParamHeaderList;
pub use headers::ParamHeaders;
pub use lifecycle::ServerState;
pub use requests::CallId;
pub use retry::{Idempotency, RetryPolicy};

use crate::config::Config;
use crate::error::{
    CallError, CancelError, ConfigError, LocalError, PeerError, RequestError, RpcError,
    TransportError,
};
use crate::proto::json::{self, Kind, RawJson};
pub use crate::proto::jsonrpc::WireId;
use crate::proto::jsonrpc::{self, write_json_str, Message};
use crate::proto::mcp::{self, notify, Method, ResultType, SubscriptionFilter};
use crate::proto::meta::{write_call_meta, StaticMeta, TraceContext};
use crate::proto::version::{Era, EraPreference, ProtocolVersion};
use events::EventQueue;
use lifecycle::{Lifecycle, Opening, ProbeVerdict};
use requests::{CallTraits, Ended, Lookup, Owner, Requests, SendState};
use resilience::Outcome;

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
pub enum ExchangeFailure {
    /// The transport failed, or the server answered with a bare HTTP status.
    Transport(TransportError),
    /// HTTP 401, after the token provider was asked for a fresh token once.
    Unauthorized(crate::auth::AuthChallenge),
    /// HTTP 403.
    Forbidden(crate::auth::AuthChallenge),
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
    pub fn opened_as(kind: TransportKind) -> Self {
        Self(TransportEventInner::Opened(kind))
    }

    /// The transport is gone.
    pub fn closed(error: TransportError) -> Self {
        Self(TransportEventInner::Closed(error))
    }

    /// The exchange that carried request `id` ended without a reply.
    pub fn exchange_failed(id: WireId, failure: ExchangeFailure) -> Self {
        Self(TransportEventInner::ExchangeFailed(id, failure))
    }

    /// The legacy session that request `id` was sent on is gone (HTTP 404 on a request with a
    /// session id): the request was not processed.
    pub fn session_expired(id: WireId) -> Self {
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
    version: Option<ProtocolVersion>,
    name: &'a str,
    params: ParamHeaders<'a>,
}

impl<'a> Transmit<'a> {
    /// The protocol version an HTTP `MCP-Protocol-Version` header names: the probe's version
    /// while probing, the settled version once ready, none during `initialize`.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.version
    }

    /// The unencoded `Mcp-Name` of a request: the tool or prompt name, or the resource URI.
    pub fn name(&self) -> Option<&'a str> {
        (!self.name.is_empty()).then_some(self.name)
    }

    /// The `Mcp-Param-*` headers of a `tools/call` (empty for anything else).
    pub fn param_headers(&self) -> ParamHeaders<'a> {
        self.params
    }
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

/// Counters of what the engine saw; cheap to read, never reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
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
    /// Requests from the server answered (`ping` with `{}`, others with -32601).
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
}

/// A frame that is not a request: notifications and replies to server requests.
#[derive(Debug)]
enum Control {
    Cancelled { id: WireId },
    CloseStream { id: WireId },
    Initialized,
    Reply { id: SmallVec<[u8; 24]>, ok: bool },
}

const MAX_CONTROL: usize = 256;

/// One server's protocol engine. See the module docs for the call order.
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
    latency: Duration,
    restart: resilience::RestartState,
    /// Deadlines and backoffs of pending requests, earliest first.
    timers: timers::Timers,
    stats: Stats,
}

impl Engine {
    /// Builds an engine; checks the config once and preallocates every table.
    pub fn new(config: Config, _now: Instant) -> Result<Self, ConfigError> {
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
            latency: Duration::ZERO,
            restart: resilience::RestartState::default(),
            timers: timers::Timers::with_capacity(config.max_pending),
            stats: Stats::default(),
            config,
        })
    }

    // ----- getters -------------------------------------------------------------------------

    /// Where the engine is: connecting, probing, handshaking, ready (with era), closed.
    pub fn state(&self) -> ServerState {
        self.lifecycle.public()
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

    /// Calls pending (queued or in flight), including the probe or handshake.
    pub fn pending(&self) -> usize {
        self.requests.len()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        Stats { events_dropped: self.events.dropped, ..self.stats }
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
        let hint = self.tool_headers.class_of(name);
        // Cloned only for keyed calls: the closure below cannot borrow the config.
        let key_field =
            opts.idempotency_key.as_ref().map(|_| self.config.idempotency_key_field.clone());
        let key = opts.idempotency_key.as_deref();
        let call = self.request(now, Method::ToolsCall, opts, hint, |p, n| {
            n.push_str(name);
            p.extend_from_slice(b"\"name\":");
            write_json_str(p, name);
            p.extend_from_slice(b",\"arguments\":");
            resilience::write_arguments(
                p,
                arguments.get(),
                key_field.as_deref().unwrap_or(""),
                key,
            );
        });
        let call = call?;
        if self.transport == TransportKind::Http {
            let slot = call.0.slot();
            let out = &mut self.requests.bufs_mut(slot).param_headers;
            self.tool_headers.write_for_call(name, arguments.get(), out);
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
        self.request(now, method, opts, None, |_, _| {})
    }

    /// Starts `resources/read`.
    pub fn read_resource(
        &mut self,
        now: Instant,
        uri: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.request(now, Method::ResourcesRead, opts, None, |p, n| {
            n.push_str(uri);
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
        self.request(now, Method::PromptsGet, opts, None, |p, n| {
            n.push_str(name);
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
        self.request(now, Method::Complete, opts, None, |p, _| {
            p.extend_from_slice(b"\"ref\":");
            p.extend_from_slice(reference.get().as_bytes());
            p.extend_from_slice(b",\"argument\":{\"name\":");
            write_json_str(p, argument_name);
            p.extend_from_slice(b",\"value\":");
            write_json_str(p, argument_value);
            p.push(b'}');
        })
    }

    /// Sends `server/discover` (modern servers only; the probe's answer is also kept in
    /// [`server_info`](Self::server_info)).
    pub fn discover(&mut self, now: Instant, opts: &CallOptions) -> Result<CallId, RequestError> {
        if self.era() == Some(Era::Legacy) {
            return Err(RequestError::NotSupportedByEra);
        }
        self.request(now, Method::Discover, opts, None, |_, _| {})
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
        self.request(now, Method::Listen, &opts, None, |p, _| {
            p.extend_from_slice(b"\"notifications\":");
            filter.write(p);
        })
    }

    /// Sends `ping` (legacy servers only: 2026-07-28 removed it).
    pub fn ping(&mut self, now: Instant, opts: &CallOptions) -> Result<CallId, RequestError> {
        if self.era() == Some(Era::Modern) {
            return Err(RequestError::NotSupportedByEra);
        }
        self.request(now, Method::Ping, opts, None, |_, _| {})
    }

    fn request(
        &mut self,
        now: Instant,
        method: Method,
        opts: &CallOptions,
        tool_hint: Option<Idempotency>,
        params: impl FnOnce(&mut Vec<u8>, &mut String),
    ) -> Result<CallId, RequestError> {
        if self.lifecycle == Lifecycle::Closed {
            return Err(RequestError::Closed);
        }
        if self.is_degraded() {
            return Err(RequestError::Degraded);
        }
        // Calls that a free in-flight slot will take at the next transmit are not "queued".
        let free = self.config.max_in_flight.saturating_sub(self.requests.in_flight());
        if self.requests.queued() >= self.config.max_queued + free || !self.room_for_end() {
            return Err(RequestError::Overloaded);
        }
        let class = self.classify(method, opts, tool_hint);
        let op =
            if class == Idempotency::Read { OperationClass::Read } else { OperationClass::Write };
        if !self.admit(opts.tenant, op, now) {
            return Err(RequestError::BreakerOpen);
        }
        let timeout = opts.timeout.unwrap_or(self.config.default_timeout);
        let deadline = now.checked_add(timeout).unwrap_or(now + Duration::from_secs(86_400));
        let traits = CallTraits { progress: opts.progress, class, tenant: opts.tenant };
        let slot = self
            .requests
            .insert(method, Owner::Host, now, deadline, traits)
            .ok_or(RequestError::Overloaded)?;
        // SAFETY-style note: `insert` just filled this slot.
        let call = self.requests.call_id(slot).ok_or(RequestError::Overloaded)?;
        self.schedule(slot, deadline, timers::TimerKind::Deadline);
        let bufs = self.requests.bufs_mut(slot);
        params(&mut bufs.params, &mut bufs.name);
        let token = opts.progress.then(|| call.get());
        write_call_meta(&mut bufs.meta, token, opts.trace.as_ref());
        if let Some(id) = self.requests.wire_id(slot) {
            self.send_queue.push_back(id);
        }
        Ok(call)
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

    fn on_exchange_failed(&mut self, now: Instant, id: WireId, failure: ExchangeFailure) {
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return };
        let Some(owner) = self.requests.get(slot).map(|p| p.owner) else { return };
        let error = match failure {
            ExchangeFailure::Transport(e) => CallError::Transport(e),
            ExchangeFailure::Unauthorized(c) => {
                CallError::Peer(PeerError::AuthRequired(Box::new(c)))
            }
            ExchangeFailure::Forbidden(c) => CallError::Peer(PeerError::Forbidden(Box::new(c))),
            ExchangeFailure::TooLarge => {
                self.stats.too_large += 1;
                CallError::Peer(PeerError::TooLarge)
            }
        };
        match owner {
            Owner::Host => {
                // The stream is already gone: nothing to signal. A request that never left
                // (the connection was never made) is safe to send again whatever it does.
                let delivery = match &error {
                    CallError::Transport(TransportError::ConnectFailed(_)) => {
                        retry::Delivery::NotSent
                    }
                    _ => retry::Delivery::MaybeDelivered,
                };
                self.on_attempt_failed(now, slot, error, delivery);
            }
            Owner::Probe => {
                // PROTOCOL.md §5.3: a 4xx without a recognised modern error is legacy evidence;
                // 401, 403, 5xx, network errors and timeouts are evidence of nothing.
                let legacy_evidence = matches!(
                    error,
                    CallError::Transport(TransportError::HttpStatus(s)) if (400..500).contains(&s) && s != 401 && s != 403
                );
                // Authorization and other peer faults end the probe: asking again changes
                // nothing until the host acts.
                let auth = matches!(
                    error,
                    CallError::Peer(_)
                        | CallError::Local(_)
                        | CallError::Transport(TransportError::HttpStatus(401 | 403))
                );
                if legacy_evidence {
                    self.apply_verdict(now, ProbeVerdict::Legacy, None);
                } else if !auth && self.retry_probe_later(now) {
                    // A server still starting up, or a passing network fault: probe again soon.
                    log::debug!("era probe failed: {error}");
                    if let Some(at) = self.reprobe_at() {
                        self.fail_unservable(now, at, &error);
                    }
                } else {
                    self.shut(now, error);
                }
            }
            Owner::Handshake => self.shut(now, error),
        }
    }

    /// A legacy HTTP session vanished under request `id`, which the server therefore did not
    /// process: re-initialize and send it again, once.
    fn on_session_expired(&mut self, now: Instant, id: WireId) {
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return };
        let Some(p) = self.requests.get_mut(slot) else { return };
        match p.owner {
            Owner::Host if !p.resent_for_session => {
                p.resent_for_session = true;
                if let Some(new_id) = self.requests.renew_wire_id(slot) {
                    self.send_queue.push_front(new_id);
                }
                self.stats.sessions_renewed += 1;
                if matches!(self.lifecycle, Lifecycle::Ready { .. }) {
                    log::debug!("legacy session expired; re-initializing");
                    self.start_handshake(now);
                }
            }
            Owner::Host => {
                let e = CallError::Transport(TransportError::SessionExpired);
                self.finish(now, slot, Ended::Abandoned, Outcome::Failed(e));
            }
            _ => self.shut(now, CallError::Transport(TransportError::SessionExpired)),
        }
    }

    fn on_opened(&mut self, now: Instant, kind: TransportKind) {
        self.transport = kind;
        self.wants_transport = false;
        let Lifecycle::Connecting { next } = self.lifecycle else {
            return;
        };
        match next {
            Opening::Probe => self.start_probe(now, lifecycle::first_probe_version()),
            Opening::Handshake => self.start_handshake(now),
        }
    }

    fn on_closed(&mut self, now: Instant, error: TransportError) {
        if matches!(self.lifecycle, Lifecycle::Probing(_)) && self.config.era == EraPreference::Auto
        {
            // Some legacy servers exit when the first message is not `initialize` (PROTOCOL.md
            // U10): take that as the legacy verdict and respawn once for the handshake.
            log::debug!("server exited during the era probe; respawning for initialize");
            self.drop_lifecycle_request();
            self.lifecycle = Lifecycle::Connecting { next: Opening::Handshake };
            self.wants_transport = true;
            return;
        }
        if self.transport == TransportKind::Stdio
            && self.config.restart.enabled
            && self.lifecycle != Lifecycle::Closed
        {
            return self.on_process_lost(now, error);
        }
        self.shut(now, CallError::Transport(error));
    }

    /// Handles one complete frame from the codec. Never panics, whatever the bytes.
    pub fn handle_message(&mut self, now: Instant, frame: &[u8]) {
        self.dispatch(now, frame, None);
    }

    /// Handles one frame that arrived on the response to request `to` (HTTP): like
    /// [`handle_message`](Self::handle_message), except that an error with `"id": null` (legacy
    /// servers send those for transport-level rejections) is taken as the answer to `to`.
    pub fn handle_reply(&mut self, now: Instant, frame: &[u8], to: WireId) {
        self.dispatch(now, frame, Some(to));
    }

    fn dispatch(&mut self, now: Instant, frame: &[u8], reply_to: Option<WireId>) {
        self.stats.frames_in += 1;
        let message = match jsonrpc::decode(frame) {
            Ok(m) => m,
            Err(e) => {
                // Servers print banners and logs to stdout in the wild: skip, count, go on.
                self.stats.invalid_frames += 1;
                log::debug!("skipping a frame that is not JSON-RPC: {e}");
                return;
            }
        };
        match message {
            Message::Result { id, result } => self.on_result(now, id, result),
            Message::Error { id: Some(id), error } => {
                let rpc = RpcError::from_raw(error.code, &error.message, error.data);
                self.on_error(now, id, rpc, error.data);
            }
            Message::Error { id: None, error } => match reply_to {
                Some(to) => {
                    let rpc = RpcError::from_raw(error.code, &error.message, error.data);
                    let id_text = itoa_buf(to);
                    if let Ok(id) = json::parse(id_text.as_str().as_bytes()) {
                        self.on_error(now, id, rpc, error.data);
                    }
                }
                None => {
                    self.stats.errors_without_id += 1;
                    log::debug!("error reply with a null id: {} ({})", error.message, error.code);
                }
            },
            Message::Request { id, method, .. } => self.on_server_request(id, &method),
            Message::Notification { method, params } => self.on_notification(now, &method, params),
        }
    }

    /// Reports a message the codec dropped for size, with the first and last bytes of it: when
    /// the JSON-RPC id can be read from them, that call fails with `TooLarge`.
    pub fn handle_oversize(&mut self, now: Instant, head: &[u8], tail: &[u8]) {
        self.stats.too_large += 1;
        let Some(id) = sniff_id(head, tail) else {
            log::debug!("dropped an oversize message whose id could not be read");
            return;
        };
        if let Lookup::Pending(slot) = self.requests.lookup(id) {
            match self.requests.get(slot).map(|p| p.owner) {
                Some(Owner::Host) => self.abandon(now, slot, CallError::Peer(PeerError::TooLarge)),
                Some(_) => self.lifecycle_failed(now, PeerError::TooLarge),
                None => {}
            }
        }
    }

    /// Fires every deadline that has passed. Safe to call early or often.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.resilience_timeout(now);
        self.lifecycle_timeout(now);
        while let Some(t) = self.timers.pop_due(now) {
            match t.kind {
                timers::TimerKind::Backoff if self.timer_is_live(&t) => {
                    self.backoff_ended(now, t.slot as usize)
                }
                timers::TimerKind::Deadline if self.timer_is_live(&t) => {
                    self.deadline_passed(now, t.slot as usize)
                }
                // The call ended or moved on since this was scheduled.
                _ => {}
            }
        }
        self.tidy_timers();
    }

    fn deadline_passed(&mut self, now: Instant, slot: usize) {
        let Some(owner) = self.requests.get(slot).map(|p| p.owner) else { return };
        match owner {
            Owner::Host => self.abandon(now, slot, CallError::Local(LocalError::DeadlineExceeded)),
            Owner::Probe => {
                log::debug!("era probe timed out; falling back to initialize");
                self.drop_lifecycle_request();
                self.start_handshake(now);
            }
            Owner::Handshake => self.lifecycle_failed(now, LocalError::DeadlineExceeded),
        }
    }

    fn timer_is_live(&self, t: &timers::Timer) -> bool {
        timer_live(&self.requests, t)
    }

    /// Drops timers of calls that ended from the top of the heap, so `poll_timeout` stays
    /// exact in the common case (O(log n) per ended call).
    pub(super) fn tidy_timers(&mut self) {
        let requests = &self.requests;
        self.timers.skip_stale(|t| timer_live(requests, t));
    }

    /// Schedules a pending request's deadline or backoff end.
    pub(super) fn schedule(&mut self, slot: usize, at: Instant, kind: timers::TimerKind) {
        let Some(p) = self.requests.get(slot) else { return };
        self.timers.schedule(timers::Timer { at, slot: slot as u32, call_gen: p.call_gen, kind });
        if self.timers.needs_rebuild() {
            let live = self.requests.iter().flat_map(|(slot, p)| {
                let deadline = timers::Timer {
                    at: p.deadline,
                    slot: slot as u32,
                    call_gen: p.call_gen,
                    kind: timers::TimerKind::Deadline,
                };
                let backoff = match p.state {
                    SendState::Backoff(until) => Some(timers::Timer {
                        at: until,
                        slot: slot as u32,
                        call_gen: p.call_gen,
                        kind: timers::TimerKind::Backoff,
                    }),
                    _ => None,
                };
                std::iter::once(deadline).chain(backoff)
            });
            self.timers.rebuild(live);
        }
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

    /// Addresses a transmit: the era's version, and for a request its name and param headers.
    fn route(&self, len: usize, kind: TransmitKind) -> Transmit<'_> {
        let version = self.lifecycle.version();
        let mut t = Transmit { len, kind, version, name: "", params: ParamHeaders::default() };
        if let TransmitKind::Request { id, .. } = kind {
            let slot = id.slot();
            if self.requests.get(slot).is_some_and(|p| p.wire_gen == id.generation()) {
                let bufs = self.requests.bufs(slot);
                t.name = &bufs.name;
                t.params = bufs.param_headers.iter();
            }
        }
        t
    }

    /// The earliest deadline the engine is waiting for, if any.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // The heap may hold a stale earliest entry: at worst one early wake-up.
        self.timers
            .earliest()
            .into_iter()
            .chain(self.reprobe_at())
            .chain(self.restart.next_wakeup())
            .min()
    }

    /// The next event for the host. Borrowed data in it is valid until the next call on the
    /// engine.
    pub fn poll_event(&mut self) -> Option<Event<'_>> {
        self.events.pop()
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

    // ----- internals: writing ----------------------------------------------------------------

    /// Writes the request with this wire id, if it is still current and queued.
    fn write_request(&mut self, now: Instant, buf: &mut Vec<u8>, id: WireId) -> Option<Method> {
        let slot = id.slot();
        let p = self.requests.get(slot)?;
        if p.wire_gen != id.generation() || p.state != SendState::Queued {
            return None; // cancelled or renewed since it was queued
        }
        let method = p.method;
        let modern = self.lifecycle.version().is_some_and(|v| v.era() == Era::Modern);
        let bufs = self.requests.bufs(slot);
        let static_meta = if modern { self.meta.as_ref().map(StaticMeta::bytes) } else { None };
        let meta = [static_meta.unwrap_or_default(), bufs.meta.as_slice()];
        jsonrpc::write_request(buf, id.get(), method.as_str(), &bufs.params, meta);
        self.mark_sent(now, slot);
        self.stats.requests_sent += 1;
        Some(method)
    }

    fn write_control(&mut self, buf: &mut Vec<u8>, c: Control) -> TransmitKind {
        match c {
            Control::Cancelled { id } => {
                let mut params: SmallVec<[u8; 64]> = SmallVec::new();
                params.extend_from_slice(b"\"requestId\":");
                params.extend_from_slice(itoa_buf(id).as_str().as_bytes());
                jsonrpc::write_notification(buf, notify::CANCELLED, Some(&params));
                TransmitKind::Notification
            }
            Control::CloseStream { id } => TransmitKind::CloseStream { id },
            Control::Initialized => {
                jsonrpc::write_notification(buf, notify::INITIALIZED, None);
                TransmitKind::Notification
            }
            Control::Reply { id, ok } => {
                let id = std::str::from_utf8(&id).unwrap_or("null");
                if ok {
                    jsonrpc::write_result(buf, id, "{}");
                } else {
                    jsonrpc::write_error(buf, id, RpcError::METHOD_NOT_FOUND, "Method not found");
                }
                TransmitKind::Response
            }
        }
    }

    fn push_control(&mut self, c: Control) {
        if self.control.len() >= MAX_CONTROL {
            self.stats.control_dropped += 1;
            return;
        }
        self.control.push_back(c);
    }

    // ----- internals: replies ------------------------------------------------------------------

    /// Ends a host call locally; tells the server if the request was written.
    fn abandon(&mut self, now: Instant, slot: usize, error: CallError) {
        let Some(p) = self.requests.get(slot) else { return };
        if p.state == SendState::Sent {
            self.signal_cancel(WireId::new(slot, p.wire_gen));
        }
        self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error));
    }

    /// Tells the server the way its era and transport expect (PROTOCOL.md §7 "Cancellation"):
    /// stdio sends `notifications/cancelled`; modern HTTP closes the response stream; legacy
    /// HTTP does both, since a disconnect alone is not a cancellation there.
    fn signal_cancel(&mut self, id: WireId) {
        let legacy = self.era() == Some(Era::Legacy);
        match self.transport {
            TransportKind::Stdio => self.push_control(Control::Cancelled { id }),
            TransportKind::Http => {
                if legacy {
                    self.push_control(Control::Cancelled { id });
                }
                self.push_control(Control::CloseStream { id });
            }
        }
    }

    fn resolve(&mut self, id: RawJson<'_>) -> Option<(usize, Owner)> {
        let lookup = WireId::parse(id).map_or(Lookup::Unknown, |w| self.requests.lookup(w));
        match lookup {
            Lookup::Pending(slot) => self.requests.get(slot).map(|p| (slot, p.owner)),
            Lookup::Duplicate => {
                self.stats.duplicate_responses += 1;
                None
            }
            Lookup::Late => {
                self.stats.late_responses += 1;
                None
            }
            Lookup::Unknown => {
                self.stats.unknown_ids += 1;
                log::debug!("reply with an id mcpoll never issued: {}", id.text());
                None
            }
        }
    }

    fn on_result(&mut self, now: Instant, id: RawJson<'_>, result: RawJson<'_>) {
        let Some((slot, owner)) = self.resolve(id) else {
            return;
        };
        if owner != Owner::Host {
            return self.on_lifecycle_result(now, owner, result);
        }
        let Some(method) = self.requests.get(slot).map(|p| p.method) else {
            return;
        };
        if let Some(key) = method.list_key() {
            return self.on_page(now, slot, key, result);
        }
        let outcome = match mcp::result_head(result) {
            Some((result_type, is_error)) => {
                Outcome::Done { json: result.text(), result_type, is_error }
            }
            None => Outcome::Failed(CallError::Peer(PeerError::InvalidResult)),
        };
        self.finish(now, slot, Ended::Answered, outcome);
    }

    /// One page of a listing: gather its items, then ask for the next page or finish.
    fn on_page(&mut self, now: Instant, slot: usize, key: &str, result: RawJson<'_>) {
        let fail = |this: &mut Self, e: CallError| {
            this.finish(now, slot, Ended::Answered, Outcome::Failed(e));
        };
        if result.kind() != Kind::Object || mcp::result_type(result) != Some(ResultType::Complete) {
            return fail(self, PeerError::InvalidResult.into());
        }
        let inner = match result.get(key) {
            Some(a) if a.kind() == Kind::Array => {
                let t = a.text();
                t.get(1..t.len() - 1).unwrap_or_default().trim()
            }
            Some(_) => return fail(self, PeerError::InvalidResult.into()),
            None => "",
        };
        // `nextCursor: null` is taken as absent, like a missing member.
        let next_cursor = result.get("nextCursor").filter(|c| !c.is_null());
        let next_cursor = match next_cursor.map(RawJson::as_str) {
            Some(None) => return fail(self, PeerError::InvalidResult.into()),
            Some(Some(c)) => Some(c),
            None => None,
        };
        let bufs = self.requests.bufs_mut(slot);
        if !inner.is_empty() {
            if !bufs.items.is_empty() {
                bufs.items.push(b',');
            }
            bufs.items.extend_from_slice(inner.as_bytes());
        }
        let Some(cursor) = next_cursor else {
            // The last page: an empty cursor is a valid cursor, only absence ends the list.
            let mut items = std::mem::take(&mut self.requests.bufs_mut(slot).items);
            if key == "tools" {
                let mut array = Vec::with_capacity(items.len() + 2);
                array.push(b'[');
                array.extend_from_slice(&items);
                array.push(b']');
                let enforce = self.transport == TransportKind::Http;
                if let Some(kept) = self.tool_headers.learn(&array, enforce) {
                    items = kept;
                }
            }
            self.finish(now, slot, Ended::Answered, Outcome::Listing { key, items: &items });
            self.requests.bufs_mut(slot).items = items;
            return;
        };
        let hash = cursor_hash(&cursor);
        if bufs.cursors.contains(&hash) {
            return fail(self, PeerError::CursorRepeated.into());
        }
        bufs.cursors.push(hash);
        bufs.params.clear();
        bufs.params.extend_from_slice(b"\"cursor\":");
        write_json_str(&mut bufs.params, &cursor);
        let pages = self.requests.get_mut(slot).map(|p| {
            p.pages += 1;
            p.pages
        });
        if pages.unwrap_or(0) as usize >= self.config.max_pages {
            return fail(self, LocalError::TooManyPages.into());
        }
        if let Some(id) = self.requests.renew_wire_id(slot) {
            self.send_queue.push_front(id);
        }
    }

    fn on_error(
        &mut self,
        now: Instant,
        id: RawJson<'_>,
        error: RpcError,
        data: Option<RawJson<'_>>,
    ) {
        let Some((slot, owner)) = self.resolve(id) else {
            return;
        };
        if owner != Owner::Host {
            return self.on_lifecycle_error(now, owner, error, data);
        }
        if error.code == RpcError::HEADER_MISMATCH && self.park_for_relist(now, slot) {
            return;
        }
        self.finish(now, slot, Ended::Answered, Outcome::Failed(CallError::Protocol(error)));
    }

    /// Legacy servers send requests: `ping` is answered with `{}`, anything else with -32601
    /// (this client declares no capabilities that would invite them).
    fn on_server_request(&mut self, id: RawJson<'_>, method: &str) {
        self.stats.server_requests += 1;
        let id = SmallVec::from_slice(id.text().as_bytes());
        self.push_control(Control::Reply { id, ok: method == "ping" });
    }

    fn on_notification(&mut self, now: Instant, method: &str, params: Option<RawJson<'_>>) {
        match method {
            notify::PROGRESS => self.on_progress(params),
            notify::TOOLS_CHANGED => self.events.list_changed(ListKind::Tools),
            notify::PROMPTS_CHANGED => self.events.list_changed(ListKind::Prompts),
            notify::RESOURCES_CHANGED => self.events.list_changed(ListKind::Resources),
            notify::RESOURCE_UPDATED => {
                if let Some(uri) = params.and_then(|p| p.get("uri")).and_then(RawJson::as_str) {
                    self.events.resource_updated(&uri);
                }
            }
            notify::ACKNOWLEDGED => self.on_acknowledged(params),
            notify::CANCELLED => self.on_server_cancelled(now, params),
            notify::MESSAGE => log::trace!("server notification {method}"),
            _ => log::debug!("ignoring unknown notification {method}"),
        }
    }

    /// The pending listen call a subscription id (its wire id) names.
    fn listen_slot(&self, id: Option<RawJson<'_>>) -> Option<usize> {
        let id = WireId::parse(id?)?;
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return None };
        (self.requests.get(slot)?.method == Method::Listen).then_some(slot)
    }

    fn on_acknowledged(&mut self, params: Option<RawJson<'_>>) {
        let Some(params) = params else { return };
        let id = params.get("_meta").and_then(|m| m.get("io.modelcontextprotocol/subscriptionId"));
        let Some(slot) = self.listen_slot(id) else { return };
        if let Some(call) = self.requests.call_id(slot) {
            let honoured = params.get("notifications").map_or("{}", RawJson::text);
            self.events.subscribed(call, honoured);
        }
    }

    /// On stdio a server ends a subscription with `notifications/cancelled` naming the listen
    /// request (PROTOCOL.md §2.9, U3): the first of that and the graceful result ends it.
    fn on_server_cancelled(&mut self, now: Instant, params: Option<RawJson<'_>>) {
        let Some(slot) = self.listen_slot(params.and_then(|p| p.get("requestId"))) else { return };
        let e = CallError::Transport(TransportError::ClosedByServer);
        self.finish(now, slot, Ended::Answered, Outcome::Failed(e));
    }

    fn on_progress(&mut self, params: Option<RawJson<'_>>) {
        let Some(p) = params.filter(|p| p.kind() == Kind::Object) else {
            self.stats.invalid_frames += 1;
            return;
        };
        // The progress token is the call handle, so it survives new pages and attempts.
        let Some(token) = p.get("progressToken").and_then(WireId::parse) else {
            return;
        };
        let progress = p.get("progress").and_then(RawJson::as_f64).unwrap_or(0.0);
        let total = p.get("total").and_then(RawJson::as_f64);
        let message = p.get("message").and_then(RawJson::as_str);
        let call = CallId(token);
        let wants = self
            .requests
            .slot_of(call)
            .and_then(|s| self.requests.get(s))
            .is_some_and(|r| r.progress);
        if wants {
            self.events.progress(call, progress, total, message.as_deref());
        }
    }
}

/// An id's decimal text on the stack.
fn itoa_buf(id: WireId) -> SmallString {
    let mut s = SmallString::default();
    use std::fmt::Write;
    let _ = write!(s, "{}", id.get());
    s
}

/// A short string without heap allocation (ids have at most 16 digits).
#[derive(Default)]
struct SmallString {
    buf: [u8; 24],
    len: usize,
}

impl SmallString {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

impl std::fmt::Write for SmallString {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

fn cursor_hash(cursor: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    cursor.hash(&mut h);
    h.finish()
}

/// Finds the JSON-RPC id of an oversize message from its ends: `{"jsonrpc":"2.0","id":N,` or
/// `{"id":N,` at the start (Python SDKs, sorted-key writers) or `"id":N}` at the very end
/// (TypeScript SDKs).
fn sniff_id(head: &[u8], tail: &[u8]) -> Option<WireId> {
    fn digits(s: &[u8]) -> Option<WireId> {
        let end = s.iter().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
        WireId::parse(json::parse(s.get(..end)?).ok()?)
    }
    let compact: SmallVec<[u8; 64]> =
        head.iter().copied().filter(|b| !b.is_ascii_whitespace()).collect();
    let after_brace = compact.strip_prefix(b"{".as_slice())?;
    let after_version =
        after_brace.strip_prefix(b"\"jsonrpc\":\"2.0\",".as_slice()).unwrap_or(after_brace);
    if let Some(rest) = after_version.strip_prefix(b"\"id\":".as_slice()) {
        return digits(rest);
    }
    let tail = tail.trim_ascii_end();
    let body = tail.strip_suffix(b"}")?;
    let start = body.iter().rposition(|b| !b.is_ascii_digit())? + 1;
    let prefix = body[..start].trim_ascii_end();
    let prefix = prefix.strip_suffix(b":")?.trim_ascii_end();
    prefix.ends_with(b"\"id\"").then(|| digits(&body[start..])).flatten()
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_resilience;

/// Whether a timer still stands for its call: same call, same time, same state.
fn timer_live(requests: &Requests, t: &timers::Timer) -> bool {
    let Some(p) = requests.get(t.slot as usize) else { return false };
    p.call_gen == t.call_gen
        && match t.kind {
            timers::TimerKind::Deadline => p.deadline == t.at,
            timers::TimerKind::Backoff => p.state == SendState::Backoff(t.at),
        }
}
