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
//!
//! # Layout
//!
//! This file holds [`Engine`] and every method of it: the public verbs in the first `impl`
//! block, then one block per job (the lifecycle, outgoing and incoming frames, transport
//! reports, how calls end, retries, restarts, listings, tasks, server requests). Each job's
//! types and pure decisions live in a module of its own that knows nothing of `Engine`: the
//! pending table (`requests`), timers, the event queue, the circuit breakers, the retry
//! policy, the restart bookkeeping, the era probe's verdicts, the task and server-request
//! tables, and the rest. Those modules import from each other, by their defining paths, and
//! from the floors below; nothing in them reaches back into this file. (The two arrows that
//! still point elsewhere are the crate's module map's: the catalog's changes carried by the
//! events, and `auth`'s error payloads in the transport's reports.)

pub(crate) mod answer_checks;
pub(crate) mod breaker;
mod ending;
mod events;
mod headers;
mod inbound;
mod lifecycle;
mod listing;
mod options;
mod outbound;
mod record;
mod requests;
pub(crate) mod retry;
mod roots;
mod server_requests;
mod stamp;
mod stats;
mod supervision;
mod tasks;
mod timers;
mod transport;

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

use serde_json::value::RawValue;

use breaker::Admission;
pub use breaker::{BreakerState, OperationClass};
pub use events::{CallResult, Event, ListKind};
#[cfg(feature = "http")]
pub(crate) use headers::ParamHeaderList;
pub(crate) use headers::ParamHeaders;
pub(crate) use lifecycle::check_saved_verdict;
pub use lifecycle::ServerState;
pub(crate) use lifecycle::VerdictOrigin;
pub use options::CallOptions;
pub use outbound::{Transmit, TransmitKind};
pub use record::{CallRecord, FailureCounts, RecordSink};
pub use requests::CallId;
pub use retry::Idempotency;
pub use roots::{RootsBoundary, RootsBoundaryError};
#[cfg(feature = "stdio")] // the core's catalog keys
pub(crate) use server_requests::declared_capabilities;
pub use server_requests::ServerRequestId;
pub use stats::Stats;
pub use tasks::{TaskMode, TaskStatus, MAX_TASK_ID_BYTES};
pub(crate) use transport::ExchangeFailure;
pub use transport::{TransportEvent, TransportKind};

use smallvec::SmallVec;

use crate::config::{Config, SavedVerdict};
use crate::error::{
    AnswerError, AuthorizeError, CallError, CancelError, ConfigError, LocalError, PeerError,
    RequestError, RpcError, TransportError,
};
use crate::proto::json::{self, Kind, RawJson};
pub use crate::proto::jsonrpc::WireId;
use crate::proto::jsonrpc::{self, write_json_str, Message, MethodName, ResultHead};
use crate::proto::mcp::{self, notify, Method, ResultType, ServerRequestKind, SubscriptionFilter};
use crate::proto::meta::{self, write_call_meta, StaticMeta};
use crate::proto::version::{Era, EraPreference, ProtocolVersion};
use answer_checks::{elicit, sampling};
use ending::Outcome;
pub(crate) use events::EventQueue;
use inbound::{itoa_buf, sniff_id};
use lifecycle::{
    first_probe_version, handshake_result, probe_error, probe_result, ttl_of, Handshake, Lifecycle,
    LifecycleCall, Opening, Probe, ProbeStep, ProbeVerdict, VerdictSource, MAX_INCONCLUSIVE_PROBES,
    MAX_SAME_VERSION_REFUSALS, PROBE_RETRY_BASE,
};
use listing::{cursor_hash, done, ListHints, LISTING_BUF_KEEP};
use outbound::{Control, HostAnswer, NameRef, MAX_CONTROL, MAX_DEFERRED_TASK_CANCELS};
use requests::{CallTraits, Ended, Lookup, Owner, Pending, Requests, SendState};
use retry::{decide, Decision, Delivery};
#[cfg(feature = "server-requests")]
use server_requests::INVALID_PARAMS;
use server_requests::{
    Entry, Origin, INTERNAL, MAX_SERVER_REQUEST_ID_BYTES, TIMED_OUT, USER_REJECTED,
};
use stamp::Stamp;
use supervision::AfterExit;
use tasks::{hash, read_task, read_task_id, LegacyTaskCaps, TaskSlot, TaskView};
use transport::{stream_broke, unauthorized, TransportEventInner};

/// One server's protocol engine.
///
/// Every public verb is in the one `impl` block below, in four families: getters (`&self`, no
/// side effects), commands (`call_tool`, `cancel`, `restart`, ...), inputs (`handle_*`) and
/// outputs (`poll_*`). After any input or command, drain [`poll_transmit`](Self::poll_transmit)
/// until `None`, read [`poll_timeout`](Self::poll_timeout), then drain
/// [`poll_event`](Self::poll_event). Time moves only through the `now` arguments.
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
    /// `tasks/cancel`s of 2026-07-28 tasks whose calls ended while the server restarted: sent
    /// once it is ready again ([`MAX_DEFERRED_TASK_CANCELS`] at most).
    deferred_task_cancels: Vec<Control>,
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
    /// The HTTP session holds the probe or handshake while an authorization flow runs
    /// ([`Engine::hold_for_authorization`]): its timeout waits.
    lifecycle_held: bool,
    /// `Config::extensions` declares the tasks extension: every `tools/call` takes a task.
    tasks_declared: bool,
    /// The modern `_meta` of a call that declares the tasks extension (when `Config` does
    /// not already declare it for every call).
    task_meta: Option<StaticMeta>,
    /// The `Mcp-Name` of the last control request written (`tasks/cancel`: the task id).
    control_name: String,
}

// Every slot of the largest table (`max_pending` and the one more) has an id of its own: the
// last took slot 2^20, which an id masks to slot 0, another call's.
const _: () = assert!(crate::config::MAX_PENDING_LIMIT < WireId::SLOTS);

impl Engine {
    /// Builds an engine; checks the config once and preallocates every table.
    pub fn new(config: Config, now: Instant) -> Result<Self, ConfigError> {
        config.check()?;
        // The config's own floor cannot read a discover result; the engine checks it here.
        if let Some(v) = &config.saved_discover {
            check_saved_verdict(v)?;
        }
        let next = match config.era {
            EraPreference::LegacyOnly => Opening::Handshake,
            _ => Opening::Probe,
        };
        Ok(Self {
            lifecycle: Lifecycle::Connecting { next },
            wants_transport: true,
            transport: TransportKind::Stdio,
            // One slot more than the host may fill: the probe's or handshake's (`is_full`).
            // One slot more than `max_pending`, for the handshake or the probe.
            requests: Requests::with_capacity(config.max_pending.saturating_add(1)),
            send_queue: VecDeque::with_capacity(config.max_pending),
            control: VecDeque::with_capacity(MAX_CONTROL),
            deferred_task_cancels: Vec::new(),
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
            capabilities: server_requests::declared_capabilities(&config),
            roots: roots::Roots::default(),
            verdict: VerdictSource::None,
            saved_pending: config.saved_discover.is_some()
                && config.era != EraPreference::LegacyOnly,
            assumed: false,
            lifecycle_held: false,
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

    /// Whether the engine is closed for good (the host closed it, or it closed by itself).
    #[inline]
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the host's tick
    pub(crate) fn is_closed(&self) -> bool {
        self.lifecycle == Lifecycle::Closed
    }

    /// Where the engine is: connecting, probing, handshaking, ready (with era), closed.
    pub fn state(&self) -> ServerState {
        // Closed is final, whatever refused the server before (its authorization error stays
        // readable): an unauthorized server the host closed read as still unauthorized, and a
        // principal's lane could be opened on it.
        if self.unauthorized.is_some() && self.lifecycle != Lifecycle::Closed {
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
    /// `server/discover` result, its version and, from its `ttlMs` (a day at most), when it
    /// expires. `wall` is the wall-clock time at `now` (the engine reads no clock). `None`
    /// unless the server is ready in the modern era and the verdict is still fresh; a saved
    /// verdict in use is given back as it was.
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

    /// When the engine was made (the `now` given to [`Engine::new`]).
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the lanes' alone
    pub(crate) fn created_at(&self) -> Instant {
        self.epoch.origin()
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
            self.ask_for_task(call.0.slot(), ttl, opts.task == TaskMode::Auto);
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
    /// printable ASCII (it travels in the `Mcp-Method` header). A `_meta` object in `params`
    /// is merged into the one the engine writes (one `_meta` on the wire, the engine's keys
    /// first); a `_meta` that is not an object is refused with
    /// [`RequestError::ArgumentsNotObject`].
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
        // A `_meta` key the engine writes itself is the engine's: a second `progressToken`
        // took the call's progress away from it (servers keep the last of two keys).
        let writes = |key: &str| meta::engine_writes(key, opts.progress, opts.trace.as_ref());
        let (members, meta) = outbound::split_meta(members, writes)?;
        // The method name is kept where a call's `Mcp-Name` goes: extensions have none.
        let call = self.request(now, Method::Extension, opts, None, method, |p| {
            p.extend_from_slice(members.as_bytes())
        })?;
        if !meta.is_empty() {
            // Written with the engine's own: two `_meta` members in one frame are kept last
            // by some servers (the engine's, dropping the host's), refused by others, and
            // kept first by readers that then miss the protocol version.
            self.requests.bufs_mut(call.0.slot()).extend_meta(meta.as_bytes());
        }
        Ok(call)
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
        // server whose calls alone were refused would; a held call, when it is released (it
        // may never be: a policy can refuse it, and nothing should go out for it then).
        if !opts.hold {
            self.retry_authorization(now);
        }
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
        let class =
            retry::classify(method, opts.idempotency, opts.idempotency_key.is_some(), tool_hint);
        let op =
            if class == Idempotency::Read { OperationClass::Read } else { OperationClass::Write };
        // A held call asks when it is released.
        let admission =
            if opts.hold { Admission::Admitted } else { self.admit(method, opts.tenant, op, now) };
        if !admission.admitted() {
            return Err(RequestError::BreakerOpen);
        }
        let timeout = opts.timeout.unwrap_or(self.config.default_timeout);
        let now = self.epoch.stamp(now);
        let deadline = now.after(timeout);
        let (progress, tenant, run_id) = (opts.progress, opts.tenant, opts.run_id);
        let traits = CallTraits { progress, class, tenant, trace, run_id };
        let Some(slot) = self.requests.insert(method, Owner::Host, now, deadline, traits) else {
            if admission == Admission::Probe {
                self.breakers.release_probe(tenant, op);
            }
            return Err(RequestError::Overloaded);
        };
        if admission == Admission::Probe {
            // A call is inserted as no probe: only a probe is noted.
            self.requests.note_admission(slot, admission);
        }
        // SAFETY-style note: `insert` just filled this slot.
        let call = self.requests.call_id(slot).ok_or(RequestError::Overloaded)?;
        self.timers.schedule_request(&self.requests, slot, deadline, timers::TimerKind::Deadline);
        let bufs = self.requests.bufs_mut(slot);
        let token = opts.progress.then(|| call.get());
        bufs.start(|meta| write_call_meta(meta, token, opts.trace.as_ref()), name);
        params(bufs.params_buf().0);
        // Host JSON may be pretty-printed. In valid JSON a raw CR or LF can only be whitespace
        // (inside strings they must be escaped), and on stdio one would end the frame early.
        // An HTTP body has its length: there they stay as the host wrote them.
        if self.transport != TransportKind::Http {
            let params = bufs.params_mut();
            let mut at = 0;
            while let Some(k) =
                params.get(at..).and_then(|rest| memchr::memchr2(b'\n', b'\r', rest))
            {
                at += k;
                if let Some(b) = params.get_mut(at) {
                    *b = b' ';
                }
                at += 1;
            }
        }
        if opts.hold {
            self.requests.set_state(slot, SendState::Held);
        } else if let Some(id) = self.requests.wire_id(slot) {
            self.enqueue(method, id);
        }
        Ok(call)
    }

    /// A call joins the send queue: at its back, in order; a subscription stream at its
    /// front, since it takes no call's place and so waits for none (behind a fresh call the
    /// in-flight limit holds, it waited with it).
    #[inline]
    fn enqueue(&mut self, method: Method, id: WireId) {
        if method == Method::Listen {
            self.send_queue.push_front(id);
        } else {
            self.send_queue.push_back(id);
        }
    }

    /// Lets a held call ([`CallOptions::hold`]) go: it joins the queue now, behind the calls
    /// already there, and asks its circuit breaker. `Err(Overloaded)` when the queue has no
    /// room: the call stays held (release it later, or refuse it). An open breaker ends the
    /// call with [`LocalError::BreakerOpen`] (an event, as for any call).
    pub fn release(&mut self, now: Instant, call: CallId) -> Result<(), AuthorizeError> {
        let slot = self.held_slot(call)?;
        if self.requests.get(slot).is_some_and(|p| p.deadline <= self.epoch.stamp(now)) {
            // Past its deadline (its task's too), with no tick since to end it (the host asked
            // its user and waited): it ends now, as the tick would have ended it, and is never
            // sent. Released, it went out after the deadline it was promised not to outlive.
            let late = CallError::Local(LocalError::DeadlineExceeded);
            self.finish(now, slot, Ended::Abandoned, Outcome::Failed(late));
            return Err(AuthorizeError::NotHeld);
        }
        if !self.room_in_queue() {
            return Err(AuthorizeError::Overloaded);
        }
        self.retry_authorization(now);
        let Some(p) = self.requests.get(slot) else { return Err(AuthorizeError::NotHeld) };
        let (method, tenant, op, created) = (p.method, p.tenant, p.op, p.created);
        // Kept with the slot's rarely used buffers: a held call is the exception.
        self.requests.bufs_mut(slot).more().held = self.epoch.stamp(now).since(created).into();
        let admission = self.admit(method, tenant, op, now);
        self.requests.note_admission(slot, admission);
        if !admission.admitted() {
            let error = CallError::Local(LocalError::BreakerOpen);
            self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error));
            return Ok(());
        }
        self.requests.set_state(slot, SendState::Queued);
        if let Some(id) = self.requests.wire_id(slot) {
            self.enqueue(method, id);
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

    /// The tool a held `tools/call` calls.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the core's gate
    pub(crate) fn held_tool(&self, call: CallId) -> Option<&str> {
        let slot = self.held_slot(call).ok()?;
        let p = self.requests.get(slot)?;
        (p.method == Method::ToolsCall).then(|| self.requests.bufs(slot).name())
    }

    /// Asks the call's circuit breaker; a change of its state is an event.
    #[inline(always)]
    fn admit(
        &mut self,
        method: Method,
        tenant: u32,
        op: OperationClass,
        now: Instant,
    ) -> Admission {
        if !judged_by_breaker(method) {
            return Admission::Admitted;
        }
        let (admission, change) = self.breakers.admit(tenant, op, now);
        if let Some(c) = change {
            self.events.breaker(c.tenant, c.class, c.state);
        }
        admission
    }

    /// Bounds the roots the host offers: an answer to a roots request, and any list given to
    /// [`set_roots`](Self::set_roots), is refused when a root lies outside every directory. A
    /// list set earlier that the new boundary refuses is dropped (roots requests go to the host
    /// again), so a narrowed boundary never lets old roots out; a 2025-11-25 server told of
    /// list changes is told of this one, as of any.
    pub fn set_roots_boundary(&mut self, boundary: RootsBoundary) {
        if self.roots.set_boundary(boundary) {
            self.announce_roots_changed();
        }
    }

    /// The roots list the host set ([`set_roots`](Self::set_roots)), if any.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the core's boundary check
    pub(crate) fn roots(&self) -> Option<&str> {
        self.roots.current()
    }

    /// Forgets the roots list the host set: roots requests go to the host again. For a list
    /// a check beyond the engine's (the file system's) no longer lets through.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the core's boundary check
    pub(crate) fn forget_roots(&mut self) {
        if self.roots.forget() {
            self.announce_roots_changed();
        }
    }

    /// Tells a 2025-11-25 server the roots changed, when the host declared it would
    /// (`ServerRequestKinds::roots_list_changed`): such a server asks again only when told,
    /// and works on in roots withdrawn from it until then. (2026-07-28 has no such
    /// notification: a modern server asks for roots in each round.)
    fn announce_roots_changed(&mut self) {
        let answers = self.config.answers;
        if answers.roots && answers.roots_list_changed && self.era() == Some(Era::Legacy) {
            self.push_control(outbound::Control::RootsChanged);
        }
    }

    /// Sets the host's roots (a `ListRootsResult`: `{"roots":[{"uri":"file:///...",
    /// "name":..}]}`), checked like an answer; from now on the engine answers roots requests
    /// with it. When the list changed, the server speaks 2025-11-25 and the host declared
    /// `ServerRequestKinds::roots_list_changed`, `notifications/roots/list_changed` is sent
    /// (2026-07-28 has no such notification: a modern server asks for roots in each round).
    pub fn set_roots(&mut self, _now: Instant, roots: &RawValue) -> Result<(), AnswerError> {
        if self.roots.set(roots.get())? {
            self.announce_roots_changed();
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
        self.queue_room() > 0
    }

    /// How many more calls the in-flight limit and the queue take now.
    pub(crate) fn queue_room(&self) -> usize {
        let free = self.config.max_in_flight.saturating_sub(self.requests.in_flight());
        // Saturating: `usize::MAX` is how a configuration says "no limit".
        self.config.max_queued.saturating_add(free).saturating_sub(self.requests.queued())
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

    /// The host asks a degraded (or closed-by-crash) server to start again now. Does nothing
    /// to a server whose transport is up, nor to a closed one.
    pub fn restart(&mut self) {
        if !matches!(self.lifecycle, Lifecycle::Connecting { .. }) {
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
            TransportEventInner::SessionGone => self.on_session_gone(now),
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

    /// Whether request `id` still waits for its answer (the HTTP session asks once a
    /// response body was handed over: if it answered, the exchange has nothing left to fail).
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn awaits(&self, id: WireId) -> bool {
        matches!(self.requests.lookup(id), Lookup::Pending(_))
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
            let went = matches!(c, Control::Cancelled { went: true, .. });
            let kind = self.write_control(buf, c);
            let mut t = self.route(buf.len() - start, kind);
            t.went = went;
            return Some(t);
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
                // The limit is reached: the rest wait, in order. (What holds its place already,
                // a retry, a task's poll, an answered input round, joins at the front.)
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
        let timer = self.timers.earliest().map(|at| self.epoch.instant(at));
        crate::time::earlier(timer, self.untimed_deadline())
    }

    /// The earliest deadline kept outside the timer heap: a probe's retry, a restart, a
    /// legacy server request's answer.
    #[inline(always)]
    fn untimed_deadline(&self) -> Option<Instant> {
        let other = crate::time::earlier(self.reprobe_at(), self.restart.next_wakeup());
        crate::time::earlier(other, self.server_requests.next_deadline())
    }

    /// Whether [`poll_timeout`](Self::poll_timeout) has come at `now`: what a loop asks every
    /// round before [`handle_timeout`](Self::handle_timeout). The timers are compared as
    /// stamps, which `now` usually is already (the round's input was stamped with it), where
    /// `poll_timeout` turns the earliest one back into an `Instant` first.
    #[must_use]
    pub fn is_due(&self, now: Instant) -> bool {
        let timer_due = self.timers.earliest().is_some_and(|at| at <= self.epoch.stamp(now));
        timer_due || self.untimed_deadline().is_some_and(|at| at <= now)
    }

    /// The next event for the host. Borrowed data in it is valid until the next call on the
    /// engine.
    pub fn poll_event(&mut self) -> Option<Event<'_>> {
        self.events.pop()
    }

    /// [`poll_event`](Self::poll_event), paired with `tag` (the host's server id) in place.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // read by the host only
    pub(crate) fn poll_event_tagged<T, C>(&mut self, tag: T) -> Option<(T, Event<'_, C>)> {
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

    /// Whether `call` is still pending on this engine (its end not come yet).
    pub fn is_pending(&self, call: CallId) -> bool {
        self.requests.slot_of(call).is_some()
    }

    /// Removes and returns the terminal event (`CallDone` or `CallFailed`) of one call, with
    /// the call's own progress and task events queued before it, leaving every other event
    /// queued in order. For blocking helpers.
    pub fn take_call_event(&mut self, call: CallId) -> Option<Event<'_>> {
        self.events.take_terminal(call)
    }

    /// Events waiting for the host.
    pub fn queued_events(&self) -> usize {
        self.events.len()
    }

    /// The events still queued, the rest of the engine dropped: what a removed server leaves
    /// for the host to take.
    #[cfg(feature = "stdio")] // the core's, for removed servers
    pub(crate) fn into_events(self) -> EventQueue {
        self.events
    }

    /// `list_changed` notifications of each kind received so far (tools, prompts, resources),
    /// whether or not their events were drained or dropped: how the host's capability cache
    /// notices a change without taking the host's events.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // read by the host only
    pub(crate) fn list_changes(&self) -> [u64; 3] {
        self.events.list_changes
    }
}

/// The lifecycle applied to the engine: probe, handshake, verdicts, and the end of it all.
// Era detection and the legacy handshake: the probe, its verdict, `initialize` (decisions in
// `lifecycle`).
impl Engine {
    /// A request's deadline passed: a host call ends; a timed-out probe or handshake decides
    /// what the lifecycle tries next.
    fn deadline_passed(&mut self, now: Instant, slot: usize) {
        let Some(owner) = self.requests.get(slot).map(|p| p.owner) else { return };
        if self.lifecycle_held && owner != Owner::Host {
            // A user's consent in a browser is no measure of the server: wait on.
            self.restart_lifecycle_timeout(now, slot);
            return;
        }
        match owner {
            Owner::Host => {
                self.abandon(now, slot, CallError::Local(LocalError::DeadlineExceeded));
                // Under a saved verdict, silence may be a legacy server ignoring a request
                // before `initialize`: the next calls wait for a probe.
                self.reverify_once(now);
            }
            Owner::Probe | Owner::Handshake if self.timeout_is_no_verdict(owner) => {
                log::debug!("{owner:?} timed out; sending it again");
                self.close_lifecycle_stream();
                if !self.retry_lifecycle_later(now) {
                    self.lifecycle_failed(now, LocalError::DeadlineExceeded)
                }
            }
            Owner::Probe => {
                log::debug!("era probe timed out; falling back to initialize");
                self.close_lifecycle_stream();
                self.drop_lifecycle_request();
                self.start_handshake(now);
                if let Lifecycle::Handshaking(h) = &mut self.lifecycle {
                    h.after_silence = true;
                }
            }
            Owner::Handshake => self.lifecycle_failed(now, LocalError::DeadlineExceeded),
        }
    }

    /// Whether a timed-out probe or handshake says nothing of the server, so it goes again
    /// (a bounded number of times) rather than deciding the era or closing: over HTTP, where
    /// every server answers a POST (a slow `initialize` is a session renewed under load, a
    /// server starting); and a probe of a server known (or last seen) modern, or of a host that
    /// speaks only the modern era. Over stdio a legacy server may ignore a request before
    /// `initialize`, so an unknown server's silent probe falls back to it.
    fn timeout_is_no_verdict(&self, owner: Owner) -> bool {
        self.transport == TransportKind::Http
            || (owner == Owner::Probe
                && (self.lifecycle.probing_modern()
                    || self.config.era == EraPreference::ModernOnly))
    }

    /// The HTTP session holds the request `id` while an OAuth flow runs (`held`), or sent it
    /// again once the flow ended. Only the probe and the handshake care: while held, their
    /// timeout (which measures the server) waits; sent again, it starts anew. A call's own
    /// deadline is the host's, and runs on.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn hold_for_authorization(&mut self, now: Instant, id: WireId, held: bool) {
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return };
        if !self.requests.get(slot).is_some_and(|p| p.owner != Owner::Host) {
            return;
        }
        self.lifecycle_held = held;
        if !held {
            self.restart_lifecycle_timeout(now, slot);
        }
    }

    /// Gives the probe or handshake in `slot` its whole timeout again from `now`.
    fn restart_lifecycle_timeout(&mut self, now: Instant, slot: usize) {
        let timeout = match self.requests.get(slot).map(|p| p.owner) {
            Some(Owner::Probe) => self.config.probe_timeout,
            Some(Owner::Handshake) => self.config.handshake_timeout,
            _ => return,
        };
        let deadline = self.epoch.stamp(now).after(timeout);
        if let Some(p) = self.requests.get_mut(slot) {
            p.deadline = deadline;
        }
        self.timers.schedule_request(&self.requests, slot, deadline, timers::TimerKind::Deadline);
    }

    /// Probes in `version`, keeping the failure counts of a probe already under way.
    fn start_probe(&mut self, now: Instant, version: ProtocolVersion) {
        let (inconclusive, refusals, known_modern, was_modern) = match self.lifecycle {
            Lifecycle::Probing(p) => (p.inconclusive, p.refusals, p.known_modern, p.was_modern),
            // A restarted process of a server whose probe settled the modern era, or whose
            // saved verdict an answer confirmed (the verdict outlives the process;
            // `reverify` clears it): its exit during the probe is a crash and its silence a
            // slow start, not the legacy server's answer.
            _ => {
                let modern = match self.verdict {
                    VerdictSource::Probed { .. } => true,
                    VerdictSource::Saved => !self.assumed,
                    VerdictSource::None => false,
                };
                (0, 0, false, modern)
            }
        };
        self.assumed = false;
        self.meta = Some(self.static_meta(version));
        self.task_meta = None;
        let timeout = self.config.probe_timeout;
        let Some(call) = self.start_lifecycle_request(now, Method::Discover, Owner::Probe, timeout)
        else {
            return;
        };
        let step = ProbeStep::InFlight(call);
        let probe = Probe { version, step, inconclusive, refusals, known_modern, was_modern };
        self.lifecycle = Lifecycle::Probing(probe);
    }

    fn start_handshake(&mut self, now: Instant) {
        self.start_handshake_after(now, 0);
    }

    /// [`start_handshake`](Self::start_handshake) after `inconclusive` passing failures.
    fn start_handshake_after(&mut self, now: Instant, inconclusive: u32) {
        self.meta = None;
        self.assumed = false;
        let timeout = self.config.handshake_timeout;
        let Some(call) =
            self.start_lifecycle_request(now, Method::Initialize, Owner::Handshake, timeout)
        else {
            return;
        };
        let step = ProbeStep::InFlight(call);
        self.lifecycle =
            Lifecycle::Handshaking(Handshake { step, inconclusive, after_silence: false });
        let c = &self.config;
        let p = self.requests.bufs_mut(call.slot).params_buf().0;
        p.extend_from_slice(b"\"protocolVersion\":");
        write_json_str(p, ProtocolVersion::LEGACY.as_str());
        p.extend_from_slice(b",\"capabilities\":");
        let caps = c.answers.legacy_capabilities(&self.capabilities);
        p.extend_from_slice(caps.as_bytes());
        p.extend_from_slice(b",\"clientInfo\":{\"name\":");
        write_json_str(p, &c.client_name);
        p.extend_from_slice(b",\"version\":");
        write_json_str(p, &c.client_version);
        p.push(b'}');
    }

    /// [`static_meta`](Self::static_meta) with the tasks extension declared too.
    fn static_task_meta(&self, version: ProtocolVersion) -> StaticMeta {
        let c = &self.config;
        let caps = tasks::with_tasks_extension(&self.capabilities);
        StaticMeta::new(version, &caps, &c.client_name, &c.client_version)
    }

    fn static_meta(&self, version: ProtocolVersion) -> StaticMeta {
        let c = &self.config;
        StaticMeta::new(version, &self.capabilities, &c.client_name, &c.client_version)
    }

    /// Puts the probe or handshake request in the table; `None` when the engine had to close.
    fn start_lifecycle_request(
        &mut self,
        now: Instant,
        method: Method,
        owner: Owner,
        timeout: Duration,
    ) -> Option<LifecycleCall> {
        self.drop_lifecycle_request();
        // The table keeps a slot for it, so no host call is failed to make room.
        let traits = CallTraits::control();
        let at = self.epoch.stamp(now);
        let deadline = at.after(timeout);
        let Some(slot) = self.requests.insert(method, owner, at, deadline, traits) else {
            self.lifecycle_failed(now, LocalError::HandshakeFailed);
            return None;
        };
        self.timers.schedule_request(&self.requests, slot, deadline, timers::TimerKind::Deadline);
        Some(LifecycleCall { slot, unsent: self.requests.wire_id(slot) })
    }

    /// Gives up the probe written over HTTP the 2026 way, by closing its stream (left open,
    /// it would hold a connection until the server answered). Over stdio nothing is said: a
    /// `notifications/cancelled` before `initialize` would reach a server that may be legacy.
    fn close_lifecycle_stream(&mut self) {
        if self.transport != TransportKind::Http {
            return;
        }
        let Some(call) = self.lifecycle.call() else { return };
        if call.unsent.is_some() {
            return;
        }
        if let Some(id) = self.requests.wire_id(call.slot) {
            self.push_control(Control::CloseStream { id });
        }
    }

    /// Forgets the probe or handshake request in flight (its reply, if any, becomes late).
    /// With no request left the engine is back to waiting for what to send first; every
    /// caller then moves on to the state it chose.
    fn drop_lifecycle_request(&mut self) {
        self.lifecycle_held = false;
        let Some(call) = self.lifecycle.call() else { return };
        self.requests.remove(call.slot, Ended::Abandoned);
        self.timers.tidy(&self.requests);
        let next = match self.lifecycle {
            Lifecycle::Handshaking(_) => Opening::Handshake,
            _ => Opening::Probe,
        };
        self.lifecycle = Lifecycle::Connecting { next };
    }

    /// The probe or handshake frame to write next, once.
    fn take_lifecycle_send(&mut self) -> Option<WireId> {
        match &mut self.lifecycle {
            Lifecycle::Probing(Probe { step: ProbeStep::InFlight(call), .. })
            | Lifecycle::Handshaking(Handshake { step: ProbeStep::InFlight(call), .. }) => {
                call.unsent.take()
            }
            _ => None,
        }
    }

    /// When an inconclusive failure of the probe or the handshake asked to send it again.
    fn reprobe_at(&self) -> Option<Instant> {
        match self.lifecycle {
            Lifecycle::Probing(Probe { step: ProbeStep::RetryAt(at), .. })
            | Lifecycle::Handshaking(Handshake { step: ProbeStep::RetryAt(at), .. }) => Some(at),
            _ => None,
        }
    }

    /// Sends the probe or the handshake again once its retry delay has passed.
    fn lifecycle_timeout(&mut self, now: Instant) {
        match self.lifecycle {
            Lifecycle::Probing(p) if matches!(p.step, ProbeStep::RetryAt(at) if at <= now) => {
                self.start_probe(now, p.version);
            }
            Lifecycle::Handshaking(h) if matches!(h.step, ProbeStep::RetryAt(at) if at <= now) => {
                self.start_handshake_after(now, h.inconclusive);
            }
            _ => {}
        }
    }

    /// The probe or the handshake failed in a way that says nothing of the server's answer
    /// (HTTP 5xx, a network fault: a server starting or restarting, a load balancer between
    /// two instances): send it again after a growing delay, a bounded number of times.
    /// Returns `false` when spent.
    fn retry_lifecycle_later(&mut self, now: Instant) -> bool {
        let before = self.lifecycle;
        let inconclusive = match before {
            Lifecycle::Probing(p) => p.inconclusive,
            Lifecycle::Handshaking(h) => h.inconclusive,
            _ => return false,
        };
        if inconclusive >= MAX_INCONCLUSIVE_PROBES {
            return false;
        }
        self.drop_lifecycle_request();
        let delay = PROBE_RETRY_BASE * 2u32.pow(inconclusive);
        let (step, inconclusive) = (ProbeStep::RetryAt(now + delay), inconclusive + 1);
        self.lifecycle = match before {
            Lifecycle::Probing(p) => {
                log::debug!("era probe failed; probing again in {delay:?}");
                Lifecycle::Probing(Probe { step, inconclusive, ..p })
            }
            _ => {
                log::debug!("initialize failed; sending it again in {delay:?}");
                Lifecycle::Handshaking(Handshake { step, inconclusive, after_silence: false })
            }
        };
        true
    }

    fn on_lifecycle_result(&mut self, now: Instant, owner: Owner, result: RawJson<'_>) {
        match (owner, self.lifecycle) {
            (Owner::Probe, Lifecycle::Probing(p)) => {
                let verdict = probe_result(result, p.version);
                self.apply_verdict(now, verdict, Some(result));
            }
            (Owner::Handshake, Lifecycle::Handshaking(_)) => match handshake_result(result) {
                Some(version) => {
                    self.drop_lifecycle_request();
                    self.server_info.clear();
                    self.server_info.push_str(result.text());
                    self.push_control(Control::Initialized);
                    self.verdict = VerdictSource::None;
                    self.become_ready(version);
                }
                None => {
                    log::debug!("initialize settled on a version mcpoll does not speak");
                    self.lifecycle_failed(now, PeerError::NoCommonVersion);
                }
            },
            _ => self.drop_lifecycle_request(),
        }
    }

    fn on_lifecycle_error(
        &mut self,
        now: Instant,
        owner: Owner,
        error: RpcError,
        data: Option<RawJson<'_>>,
    ) {
        match (owner, self.lifecycle) {
            (Owner::Probe, Lifecycle::Probing(p)) => {
                let verdict = probe_error(error.code, data, p.version);
                self.apply_verdict(now, verdict, None);
            }
            // A slow server that answered the timed-out probe late has settled on the modern
            // era for this connection and refuses `initialize` with `-32022` (PROTOCOL.md
            // §5.1: proof of a modern server; never fall back because of it). Probe again in
            // a version it lists, once: a second timeout then fails the start.
            // The code is the server's to choose (§5.4): a modern version in the refusal's
            // `supported` list is the proof, whatever the code (`-32602` with the list is the
            // spec's own example), and closing for good on it lost a server that works.
            (Owner::Handshake, Lifecycle::Handshaking(h)) => {
                let code = RpcError::UNSUPPORTED_PROTOCOL_VERSION;
                // A host that speaks only the legacy era is not moved to the modern one.
                let legacy_only = self.config.era == EraPreference::LegacyOnly;
                // Sent after the probe's silence, `initialize` refused as a method the server
                // does not know is the same proof with no list: a slow modern server (an
                // `npx` cold start) that answered the probe after its timeout.
                let unknown = error.code == RpcError::METHOD_NOT_FOUND && h.after_silence;
                let verdict = match probe_error(code, data, ProtocolVersion::LEGACY) {
                    ProbeVerdict::Legacy if unknown => ProbeVerdict::Reprobe(first_probe_version()),
                    verdict => verdict,
                };
                match verdict {
                    ProbeVerdict::Reprobe(version) if !legacy_only => {
                        log::debug!("initialize refused by a modern server; probing in {version}");
                        self.drop_lifecycle_request();
                        self.start_probe(now, version);
                        if let Lifecycle::Probing(p) = &mut self.lifecycle {
                            p.known_modern = true;
                        }
                    }
                    _ => {
                        log::debug!("initialize failed: {}", error.name());
                        self.shut(now, CallError::Protocol(error));
                    }
                }
            }
            _ => {
                log::debug!("initialize failed: {}", error.name());
                self.shut(now, CallError::Protocol(error));
            }
        }
    }

    fn apply_verdict(&mut self, now: Instant, verdict: ProbeVerdict, result: Option<RawJson<'_>>) {
        let modern_only = self.config.era == EraPreference::ModernOnly;
        match verdict {
            ProbeVerdict::Modern(version) => {
                self.drop_lifecycle_request();
                if let Some(r) = result {
                    self.server_info.clear();
                    self.server_info.push_str(r.text());
                    self.verdict = VerdictSource::Probed { at: now, ttl: ttl_of(r) };
                }
                self.become_ready(version);
            }
            ProbeVerdict::Reprobe(version) => self.start_probe(now, version),
            ProbeVerdict::Refused(version) => match self.lifecycle {
                Lifecycle::Probing(p) if p.refusals < MAX_SAME_VERSION_REFUSALS => {
                    log::debug!("server refused {version} yet lists it; asking once more");
                    self.lifecycle = Lifecycle::Probing(Probe { refusals: p.refusals + 1, ..p });
                    self.start_probe(now, version);
                }
                _ => self.lifecycle_failed(now, PeerError::VersionRefused(version)),
            },
            // Not for a server that refused `initialize` as a modern one (-32022): falling
            // back again would go round between the two for good.
            ProbeVerdict::Legacy if !modern_only && !self.lifecycle.known_modern() => {
                self.drop_lifecycle_request();
                self.start_handshake(now);
            }
            ProbeVerdict::Legacy => self.lifecycle_failed(now, PeerError::NoCommonVersion),
            ProbeVerdict::NoCommonVersion => self.lifecycle_failed(now, PeerError::NoCommonVersion),
        }
    }

    /// Takes the era from `Config::saved_discover`, once, on the first transport: ready at
    /// once, no probe. `false` when there is none (or it was used).
    fn resume_saved_verdict(&mut self) -> bool {
        if !std::mem::take(&mut self.saved_pending) {
            return false;
        }
        let Some(saved) = &self.config.saved_discover else { return false };
        let version = saved.version;
        self.server_info.clear();
        self.server_info.push_str(&saved.result);
        self.verdict = VerdictSource::Saved;
        self.assumed = true;
        log::trace!("era taken from the saved verdict: {version}");
        self.become_ready(version);
        true
    }

    /// [`reverify`](Self::reverify) while the saved verdict is still assumed: a refusal of a
    /// call sent under it that comes after the first re-probes nothing again.
    fn reverify_once(&mut self, now: Instant) {
        if self.assumed {
            self.reverify(now);
        }
    }

    /// Whether the call in `slot` went out under a saved verdict still in doubt: sent while
    /// it was assumed, and not confirmed since (a first answer confirms it; a refusal makes
    /// it doubted until the probe settles the era). Such a call's error may be the era's.
    /// Once the probe settled the very version the call went out in, its error is its own.
    fn sent_under_doubt(&self, slot: usize) -> bool {
        if !self.requests.get(slot).is_some_and(|p| p.sent_assumed) {
            return false;
        }
        let saved = self.config.saved_discover.as_ref().map(|v| v.version);
        match (self.verdict, self.lifecycle) {
            _ if self.assumed => true,
            (VerdictSource::Saved, _) => false,
            (VerdictSource::Probed { .. }, Lifecycle::Ready { version }) => Some(version) != saved,
            _ => true,
        }
    }

    /// The saved verdict did not hold (the server refused its version, answered like a legacy
    /// server, or failed the first call): forget it and probe, as on a first start. Calls
    /// wait in the queue until the era is settled again.
    fn reverify(&mut self, now: Instant) {
        self.assumed = false;
        self.verdict = VerdictSource::None;
        if matches!(self.lifecycle, Lifecycle::Ready { .. }) {
            log::debug!("the saved era verdict did not hold; probing");
            self.start_probe(now, first_probe_version());
        }
    }

    /// The verdict to save for the next run, with its expiry in wall-clock time (`wall` is
    /// the wall-clock reading at `now`): only a modern verdict still fresh has one.
    fn saved_verdict(&self, now: Instant, wall: SystemTime) -> Option<SavedVerdict> {
        let Lifecycle::Ready { version } = self.lifecycle else { return None };
        match self.verdict {
            VerdictSource::Probed { at, ttl } => {
                let left = at.checked_add(ttl)?.checked_duration_since(now)?;
                if left.is_zero() {
                    return None;
                }
                let expires = wall.checked_add(left)?;
                Some(SavedVerdict { version, result: self.server_info.clone(), expires })
            }
            VerdictSource::Saved => self.config.saved_discover.clone(),
            VerdictSource::None => None,
        }
    }

    fn become_ready(&mut self, version: ProtocolVersion) {
        self.lifecycle = Lifecycle::Ready { version };
        self.restart.ready();
        // Cancels of 2026-07-28 tasks that ended while the server restarted; a server that
        // comes back legacy never had those tasks.
        for cancel in std::mem::take(&mut self.deferred_task_cancels) {
            if version.era() == Era::Modern {
                self.push_control(cancel);
            }
        }
        self.meta = (version.era() == Era::Modern).then(|| self.static_meta(version));
        self.task_meta = (version.era() == Era::Modern && !self.tasks_declared)
            .then(|| self.static_task_meta(version));
        self.events.ready(version.era(), version);
    }

    fn lifecycle_failed(&mut self, now: Instant, error: impl Into<CallError>) {
        self.shut(now, error.into());
    }

    /// The probe or handshake was refused for want of authorization: the calls waiting for it
    /// fail with `error`, and the server waits for the next call or the host
    /// ([`Engine::retry_authorization`]) instead of closing, so that both eras behave alike
    /// (a legacy server that lets `initialize` through refuses only the calls).
    fn authorization_failed(&mut self, now: Instant, error: CallError) {
        if self.lifecycle == Lifecycle::Closed {
            return;
        }
        log::debug!("the era probe or handshake was refused: {}", error.name());
        self.drop_lifecycle_request();
        self.fail_all(now, error.clone());
        self.unauthorized = Some(error);
    }

    /// Ends everything: every pending call fails with `error`, then a `Closed` event.
    fn shut(&mut self, now: Instant, error: CallError) {
        if self.lifecycle == Lifecycle::Closed {
            return;
        }
        self.drop_lifecycle_request();
        self.fail_all(now, error.clone());
        // The legacy server's own requests end too: nobody will answer them on a closed
        // server, and their deadlines would keep the engine waking up to refuse them.
        self.forget_legacy_requests();
        self.control.clear();
        self.deferred_task_cancels.clear();
        self.lifecycle = Lifecycle::Closed;
        self.wants_transport = false;
        // A restart (or a degraded server's retry) scheduled before the close would start a
        // process for a closed server when its time came.
        self.restart.stop();
        self.events.closed(error);
    }
}

// Outgoing frames: requests with their `_meta`, control frames, the route a driver needs
// (`outbound`).
impl Engine {
    /// `true` while requests, control frames or the era's own request (the probe, the
    /// handshake) wait for `poll_transmit`; when `false`, `poll_transmit` returns `None`. The
    /// core names the servers to write by it, and a driver skips its pass over an engine with
    /// nothing to send.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the core and the drivers
    #[inline]
    pub(crate) fn has_output(&self) -> bool {
        !self.send_queue.is_empty() || !self.control.is_empty() || self.lifecycle_has_unsent()
    }

    /// The client capabilities this engine declares ([`declared_capabilities`]).
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the core's catalog keys
    pub(crate) fn declared_capabilities(&self) -> &str {
        &self.capabilities
    }

    fn lifecycle_has_unsent(&self) -> bool {
        match &self.lifecycle {
            Lifecycle::Probing(Probe { step: ProbeStep::InFlight(call), .. })
            | Lifecycle::Handshaking(Handshake { step: ProbeStep::InFlight(call), .. }) => {
                call.unsent.is_some()
            }
            _ => false,
        }
    }

    /// Writes the request with this wire id, if it is still current and queued.
    fn write_request(&mut self, now: Instant, buf: &mut Vec<u8>, id: WireId) -> Option<Method> {
        let slot = id.slot();
        let p = self.requests.get(slot)?;
        if p.wire_gen != id.generation() || p.state != SendState::Queued {
            return None; // cancelled or renewed since it was queued
        }
        let at = self.epoch.stamp(now);
        if p.deadline <= at {
            // Past its deadline with no tick since to end it (a reply read in the same round
            // freed its place): never written, it is ended by its timer, now due. Written, a
            // call went out after the deadline it was promised not to outlive.
            return None;
        }
        let (mut method, tasked, asked) = (p.method, p.task, p.task_asked);
        let modern = self.lifecycle.version().is_some_and(|v| v.era() == Era::Modern);
        if p.owner == Owner::Host && !in_era(method, modern) {
            // Made before the era was known (or a restart changed it): the server would
            // answer "method not found" for a method the host asked of the other era.
            let error = CallError::Local(LocalError::NotSupportedByEra);
            self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error));
            return None;
        }
        // Only calls that asked for a task look further (plain calls: one flag). A task's
        // own requests (its polls, its input's updates) declare the extension as the call did:
        // a server may refuse a request that does not.
        let mut task_meta = false;
        if asked || tasked {
            if modern {
                task_meta = true;
            } else if !tasked {
                self.augment_legacy_call(slot);
            }
        }
        let bufs = self.requests.bufs(slot);
        let static_meta = if !modern {
            None
        } else if task_meta && self.task_meta.is_some() {
            self.task_meta.as_ref().map(StaticMeta::bytes)
        } else {
            self.meta.as_ref().map(StaticMeta::bytes)
        };
        // A task's polls carry no per-call `_meta` (progress token, trace): the tool call did.
        let call_meta = if tasked { &[][..] } else { bufs.meta() };
        let meta = [static_meta.unwrap_or_default(), call_meta];
        if tasked {
            if let Some(t) = bufs.more.as_ref().and_then(|m| m.task.as_ref()) {
                method = t.method();
            }
        }
        let name = match method {
            Method::Extension => MethodName::Other(bufs.name()),
            core => MethodName::Core(core),
        };
        jsonrpc::write_request(buf, id.get(), name, bufs.params(), meta);
        self.mark_sent(at, slot);
        self.stats.requests_sent += 1;
        Some(method)
    }

    fn write_control(&mut self, buf: &mut Vec<u8>, c: Control) -> TransmitKind {
        match c {
            Control::Cancelled { id, .. } => {
                let mut params: SmallVec<[u8; 64]> = SmallVec::new();
                params.extend_from_slice(b"\"requestId\":");
                params.extend_from_slice(itoa_buf(id).as_str().as_bytes());
                jsonrpc::write_notification(buf, notify::CANCELLED, Some(&params));
                TransmitKind::Cancelled { id }
            }
            Control::CloseStream { id } => TransmitKind::CloseStream { id },
            Control::Initialized => {
                jsonrpc::write_notification(buf, notify::INITIALIZED, None);
                TransmitKind::Initialized
            }
            Control::RootsChanged => {
                jsonrpc::write_notification(buf, notify::ROOTS_LIST_CHANGED, None);
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
            Control::Answer { id, result } => {
                jsonrpc::write_result(buf, std::str::from_utf8(&id).unwrap_or("null"), &result.0);
                TransmitKind::Response
            }
            Control::Refuse { id, code, message } => {
                let id = std::str::from_utf8(&id).unwrap_or("null");
                jsonrpc::write_error(buf, id, code, message);
                TransmitKind::Response
            }
            Control::TaskCancel { id, task } => {
                let mut params: Vec<u8> = Vec::with_capacity(task.len() + 16);
                params.extend_from_slice(b"\"taskId\":");
                write_json_str(&mut params, &task);
                let modern = self.era() == Some(Era::Modern);
                // Declaring the tasks extension, as the task's other requests do.
                let meta = self.task_meta.as_ref().or(self.meta.as_ref()).filter(|_| modern);
                let meta = meta.map(StaticMeta::bytes);
                let method = Method::TasksCancel;
                jsonrpc::write_request(
                    buf,
                    id.get(),
                    MethodName::Core(method),
                    &params,
                    [meta.unwrap_or_default(), b""],
                );
                self.stats.requests_sent += 1;
                self.control_name = task;
                TransmitKind::Request { id, method }
            }
        }
    }

    fn push_control(&mut self, c: Control) {
        // A stream close is never dropped: it is the only cancel a 2026-07-28 HTTP server
        // gets, and without it the call's connection stays busy until the server is done.
        // It carries no bytes, and each call has one at most, so the pending table bounds
        // them. Nor is the handshake's end (one per handshake): without it a 2025-11-25
        // server refuses every call.
        let kept = matches!(c, Control::CloseStream { .. } | Control::Initialized);
        if self.control.len() >= MAX_CONTROL && !kept {
            self.stats.control_dropped += 1;
            return;
        }
        self.control.push_back(c);
    }

    /// Addresses a transmit: the era's version, and for a request its name and param headers.
    #[inline]
    fn route(&self, len: usize, kind: TransmitKind) -> Transmit<'_> {
        let version = self.lifecycle.version();
        let params = ParamHeaders::default();
        let name = NameRef::Text("");
        let mut t = Transmit { len, kind, version, name, method_name: "", params, went: false };
        if let TransmitKind::Request { id, method } = kind {
            let slot = id.slot();
            t.method_name = method.as_str();
            if method == Method::TasksCancel {
                // Written from a control frame: the call is gone, its task id kept here.
                t.name = NameRef::Text(&self.control_name);
            } else if self.requests.get(slot).is_some_and(|p| p.wire_gen == id.generation()) {
                let bufs = self.requests.bufs(slot);
                if method == Method::Extension {
                    t.method_name = bufs.name();
                    t.params = bufs.param_headers.iter();
                } else if matches!(
                    method,
                    Method::TasksGet | Method::TasksResult | Method::TasksUpdate
                ) {
                    // `Mcp-Name` of a task's request is its task id (tasks extension, HTTP).
                    let task = bufs.more.as_ref().and_then(|m| m.task.as_ref());
                    t.name = NameRef::Text(task.map_or("", |t| t.id.as_str()));
                } else {
                    t.name = NameRef::Slot(bufs);
                    t.params = bufs.param_headers.iter();
                }
            }
        }
        t
    }

    /// Tells the server the way its era and transport expect (PROTOCOL.md §7 "Cancellation"):
    /// stdio sends `notifications/cancelled`; modern HTTP closes the response stream; legacy
    /// HTTP does both, since a disconnect alone is not a cancellation there.
    fn signal_cancel(&mut self, id: WireId) {
        let legacy = self.era() == Some(Era::Legacy);
        match self.transport {
            TransportKind::Stdio => self.push_control(Control::Cancelled { id, went: false }),
            TransportKind::Http => {
                if legacy {
                    self.push_control(Control::Cancelled { id, went: false });
                }
                self.push_control(Control::CloseStream { id });
            }
        }
    }
}

// Incoming messages: replies matched to their calls, server requests taken, notifications routed
// (`inbound`).
impl Engine {
    fn dispatch(&mut self, now: Instant, frame: &[u8], reply_to: Option<WireId>) {
        self.stats.frames_in += 1;
        // A byte order mark, which a program writing UTF-8 "with signature" puts before its
        // first output (RFC 8259 8.1: a parser may ignore it).
        let frame = frame.strip_prefix(UTF8_BOM).unwrap_or(frame);
        let message = match jsonrpc::decode(frame) {
            Ok(m) => m,
            Err(jsonrpc::DecodeError::TooDeep) => {
                // Perhaps a reply: when its id is at either end, its call fails now instead of
                // waiting out its deadline.
                self.stats.invalid_frames += 1;
                let ends = frame.len().min(64);
                let (head, tail) = (&frame[..ends], &frame[frame.len() - ends..]);
                return self.fail_unreadable(now, sniff_id(head, tail), PeerError::TooDeep);
            }
            Err(jsonrpc::DecodeError::BadShape) => {
                // JSON, but no message: when it is a reply by its id (a result beside an error,
                // an error without an integer code), its call fails now instead of waiting
                // out its deadline. (A probe's or a handshake's is left to its timeout, which
                // falls back.)
                self.stats.invalid_frames += 1;
                let id = inbound::reply_id(frame).filter(|&id| self.is_host_call(id));
                return self.fail_unreadable(now, id, PeerError::InvalidResult);
            }
            Err(e) => {
                self.stats.invalid_frames += 1;
                if e == jsonrpc::DecodeError::NotJson {
                    // JSON to its writer that mcpoll does not read (a lone surrogate escape
                    // from a string cut inside an emoji, a number past f64, bytes that are not
                    // UTF-8): when it is a host call's reply by the id at either end, the call
                    // fails now instead of waiting out its deadline.
                    let ends = frame.len().min(64);
                    let (head, tail) = (&frame[..ends], &frame[frame.len() - ends..]);
                    let id = sniff_id(head, tail).filter(|&id| self.is_host_call(id));
                    if id.is_some() {
                        return self.fail_unreadable(now, id, PeerError::InvalidResult);
                    }
                }
                // Servers print banners and logs to stdout in the wild: skip, count, go on.
                log::debug!("skipping a frame that is not JSON-RPC: {e}");
                return;
            }
        };
        match message {
            Message::Result { id, result, head } => self.on_result(now, id, result, head),
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
                    // The server's message may quote the request: TRACE only.
                    log::debug!("error reply with a null id: code {}", error.code);
                    log::trace!("error reply with a null id: {}", error.message);
                }
            },
            Message::Request { id, method, params } => {
                self.on_server_request(now, id, &method, params)
            }
            Message::Notification { method, params } => self.on_notification(now, &method, params),
        }
    }

    /// A message that could not be read (`error`): when its id was read from its ends and
    /// names a pending request, that request fails with `error`.
    /// Whether `id` is the wire id of a host call still waiting for its reply.
    fn is_host_call(&self, id: WireId) -> bool {
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return false };
        self.requests.get(slot).is_some_and(|p| p.owner == Owner::Host)
    }

    fn fail_unreadable(&mut self, now: Instant, id: Option<WireId>, error: PeerError) {
        let Some(id) = id else {
            log::debug!("dropped an unreadable message ({error}) whose id could not be read");
            return;
        };
        if let Lookup::Pending(slot) = self.requests.lookup(id) {
            match self.requests.get(slot).map(|p| p.owner) {
                // Answered, if unreadably: the server is not told to stop.
                Some(Owner::Host) => {
                    self.requests.end_exchange(slot, self.epoch.stamp(now));
                    self.finish(now, slot, Ended::Answered, Outcome::Failed(CallError::Peer(error)))
                }
                Some(_) => self.lifecycle_failed(now, error),
                None => {}
            }
        }
    }

    fn resolve(&mut self, now: Instant, id: RawJson<'_>) -> Option<(usize, Owner)> {
        let lookup = WireId::parse(id).map_or(Lookup::Unknown, |w| self.requests.lookup(w));
        match lookup {
            Lookup::Pending(slot) => {
                self.requests.end_exchange(slot, self.epoch.stamp(now));
                self.requests.get(slot).map(|p| (slot, p.owner))
            }
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

    fn on_result(
        &mut self,
        now: Instant,
        id: RawJson<'_>,
        result: RawJson<'_>,
        head: ResultHead<'_>,
    ) {
        let Some((slot, owner)) = self.resolve(now, id) else {
            return self.cancel_orphan_task(id, result);
        };
        if owner != Owner::Host {
            return self.on_lifecycle_result(now, owner, result);
        }
        // Under a saved verdict, the first answer confirms it, unless it has no `resultType`:
        // a legacy server answered (it is delivered as it is, then the era is probed).
        let legacy_answer = self.assumed && result.get("resultType").is_none();
        self.assumed = false;
        if legacy_answer {
            self.on_host_result(now, slot, result, head);
            return self.reverify(now);
        }
        self.on_host_result(now, slot, result, head)
    }

    fn on_host_result(
        &mut self,
        now: Instant,
        slot: usize,
        result: RawJson<'_>,
        head: ResultHead<'_>,
    ) {
        let Some((method, tasked, asked)) =
            self.requests.get(slot).map(|p| (p.method, p.task, p.task_asked))
        else {
            return;
        };
        if let Some(key) = method.list_key() {
            return self.on_page(now, slot, key, result);
        }
        if tasked {
            return self.on_task_reply(now, slot, result, head);
        }
        // An MCP result is an object: `null`, a number or a list is a broken reply, not a
        // success (a `ping` answered `null` by a lax server, and an extension's own result,
        // are taken as they come).
        if result.kind() != Kind::Object && !matches!(method, Method::Ping | Method::Extension) {
            let e = CallError::Peer(PeerError::InvalidResult);
            return self.finish(now, slot, Ended::Answered, Outcome::Failed(e));
        }
        let head = mcp::result_head(head);
        if asked && method == Method::ToolsCall {
            let rt = head.map_or(ResultType::Complete, |(t, _)| t);
            if self.creates_task(slot, result, rt) {
                return self.on_task_created(now, slot, result);
            }
        }
        let task = head.is_some_and(|(t, _)| t == ResultType::Task);
        if task && !asked && self.tasks_declared && method == Method::ToolsCall {
            // A call made without a task (`TaskMode::Off`) declared the extension all the
            // same when the host's configuration does (one declaration serves every call):
            // the server may run it as a task, and that task is followed as an asked one.
            // Refused, it ran on for nobody, and a write the server took was reported as an
            // invalid result, which a host may send again.
            self.ask_for_task(slot, None, false);
            if self.creates_task(slot, result, ResultType::Task) {
                return self.on_task_created(now, slot, result);
            }
        }
        // A task nobody asked for is no result (the tasks extension, 2026-07-28).
        let head = head.filter(|(t, _)| *t != ResultType::Task);
        if matches!(head, Some((ResultType::InputRequired, _))) && method.takes_input() {
            return self.on_input_required(now, slot, result, &[]);
        }
        let outcome = match head {
            Some((result_type, is_error)) => {
                Outcome::Done { json: result.text(), result_type, is_error }
            }
            None => Outcome::Failed(CallError::Peer(PeerError::InvalidResult)),
        };
        self.finish(now, slot, Ended::Answered, outcome);
    }

    fn on_error(
        &mut self,
        now: Instant,
        id: RawJson<'_>,
        error: RpcError,
        data: Option<RawJson<'_>>,
    ) {
        let Some((slot, owner)) = self.resolve(now, id) else {
            return;
        };
        if owner != Owner::Host {
            return self.on_lifecycle_error(now, owner, error, data);
        }
        // Whether this call went out under the saved verdict: the first refusal of one ends
        // the assumption (`reverify`), and the others sent with it are judged alike when
        // their refusals come after it (the read among them was failed).
        let sent_assumed = self.sent_under_doubt(slot);
        if sent_assumed || matches!(self.lifecycle, Lifecycle::Probing(_)) {
            // Under a saved verdict any error may mean the verdict is wrong; `-32022` says
            // so and that the call was not processed. Such a call, and one safe to repeat,
            // goes out again once the probe has settled the era.
            let refused = error.code == RpcError::UNSUPPORTED_PROTOCOL_VERSION;
            let safe = self.requests.get(slot).is_some_and(|p| p.class.retry_safe());
            if refused || (sent_assumed && safe) {
                if let Some(id) = self.requests.renew_wire_id(slot) {
                    self.send_queue.push_front(id);
                }
                return self.reverify_once(now);
            }
            if sent_assumed {
                let failed = Outcome::Failed(CallError::Protocol(error));
                self.finish(now, slot, Ended::Answered, failed);
                return self.reverify_once(now);
            }
        }
        if error.code == RpcError::HEADER_MISMATCH && self.park_for_relist(now, slot) {
            return;
        }
        self.finish(now, slot, Ended::Answered, Outcome::Failed(CallError::Protocol(error)));
    }

    fn on_notification(&mut self, now: Instant, method: &str, params: Option<RawJson<'_>>) {
        match method {
            notify::PROGRESS => self.on_progress(method, params),
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
            notify::INITIALIZED | notify::ROOTS_LIST_CHANGED => {
                log::debug!("ignoring notification {method}")
            }
            // The server's log messages (`notifications/message`), an extension's or a
            // vendor's: the host's to read.
            _ => self.events.notification(method, params.map_or("{}", |p| p.text())),
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
        let request_id = params.and_then(|p| p.get("requestId"));
        if let Some(slot) = self.listen_slot(request_id) {
            let e = CallError::Transport(TransportError::ClosedByServer);
            return self.finish(now, slot, Ended::Answered, Outcome::Failed(e));
        }
        // 2025-11-25: the server withdrew a request of its own. It ends for the host, and the
        // server is owed no reply to it (not even the timeout error).
        if let Some(request) = request_id.and_then(|id| self.server_requests.take_legacy(id)) {
            self.events.server_request_withdrawn(request);
        }
    }

    fn on_progress(&mut self, method: &str, params: Option<RawJson<'_>>) {
        let Some(p) = params.filter(|p| p.kind() == Kind::Object) else {
            self.stats.invalid_frames += 1;
            return;
        };
        // The progress token is the call handle, so it survives new pages and attempts. One
        // the engine never writes is a token the host chose (in a `_meta` of its own): the
        // host's to read, as any notification the engine does not handle.
        let Some(token) = p.get("progressToken") else {
            self.stats.invalid_frames += 1;
            return;
        };
        // A call handle has a generation (bits 20 and up): a token without one is not the
        // engine's, but a number the host chose (the host's to read). One with a generation
        // is the engine's, of a call that may have ended (late progress: dropped).
        let engines = WireId::parse(token).filter(|id| id.generation() != 0);
        let Some(call) = engines.map(CallId) else {
            self.events.notification(method, p.text());
            return;
        };
        // Required, a number: a report without one is no progress (read as 0, it looked like
        // progress going back).
        let Some(progress) = p.get("progress").and_then(RawJson::as_f64) else {
            self.stats.invalid_frames += 1;
            return;
        };
        let total = p.get("total").and_then(RawJson::as_f64);
        let message = p.get("message").and_then(RawJson::as_str);
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

// What the transport reports: opened, closed, an HTTP exchange that failed, a legacy session that
// vanished (`transport`).
impl Engine {
    fn on_exchange_failed(&mut self, now: Instant, id: WireId, failure: ExchangeFailure) {
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return };
        let Some(owner) = self.requests.get(slot).map(|p| p.owner) else { return };
        let sent_assumed = self.sent_under_doubt(slot);
        let unsent = matches!(failure, ExchangeFailure::Unsent(_));
        let error = match failure {
            ExchangeFailure::Transport(e) | ExchangeFailure::Unsent(e) => CallError::Transport(e),
            ExchangeFailure::Unauthorized(c) => {
                CallError::Peer(PeerError::AuthRequired(Box::new(c)))
            }
            ExchangeFailure::Forbidden(c) => CallError::Peer(PeerError::Forbidden(Box::new(c))),
            // The host's own OAuth configuration cannot work: not the server's fault.
            #[cfg(feature = "http")]
            ExchangeFailure::Authorization(e) if e.is_local() => {
                CallError::Local(LocalError::OAuthSetup(e))
            }
            #[cfg(feature = "http")]
            ExchangeFailure::Authorization(e) => CallError::Peer(PeerError::Authorization(e)),
            ExchangeFailure::TooLarge => {
                self.stats.too_large += 1;
                CallError::Peer(PeerError::TooLarge)
            }
        };
        let bare_4xx = matches!(
            error,
            CallError::Transport(TransportError::HttpStatus(s)) if (400..500).contains(&s) && s != 401 && s != 403
        );
        // A 4xx that passes (408, 429: a timeout, a rate limit in front of the server) says
        // "not now", not what the server makes of the request: to the probe no era evidence,
        // to `initialize` no refusal. Taken as a bare 4xx, a rate limiter's 429 to the probe
        // and then to `initialize` closed the server for good.
        let refusal = bare_4xx && !retry::is_transient(&error);
        match owner {
            // Under a saved verdict, a 4xx without a JSON-RPC answer is what a legacy server
            // says to a modern request (PROTOCOL.md §5.3): refused, not processed. Send it again
            // once the probe has settled the era: every request sent under the verdict, the
            // ones refused after the first began the reverify too.
            Owner::Host if sent_assumed && bare_4xx => {
                self.requests.end_exchange(slot, self.epoch.stamp(now));
                if let Some(id) = self.requests.renew_wire_id(slot) {
                    self.send_queue.push_front(id);
                }
                self.reverify_once(now);
            }
            Owner::Host => {
                // 2025-11-25: a response stream that broke is no cancellation, and the server
                // may run on for nobody (the call ends or goes again under a new id): tell it.
                // (A 2026-07-28 server takes the broken stream itself as the cancellation; a
                // task's poll is no work of its own, and the task goes on by design.)
                let task = self.requests.get(slot).is_some_and(|p| p.task);
                if self.era() == Some(Era::Legacy) && !task && !unsent && stream_broke(&error) {
                    self.push_control(Control::Cancelled { id, went: true });
                }
                // A request that never left (the connection was never made, or its TLS
                // handshake failed) is safe to send again whatever it does.
                let delivery = match &error {
                    _ if unsent => retry::Delivery::NotSent,
                    CallError::Transport(
                        TransportError::ConnectFailed(_) | TransportError::ProxyRefused(_),
                    ) => retry::Delivery::NotSent,
                    _ => retry::Delivery::MaybeDelivered,
                };
                self.on_attempt_failed(now, slot, error, delivery);
            }
            Owner::Probe => {
                // PROTOCOL.md §5.3: a 4xx without a recognised modern error is legacy evidence;
                // 401, 403, 5xx, network errors and timeouts are evidence of nothing.
                let legacy_evidence = refusal;
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
                } else if unauthorized(&error) {
                    self.authorization_failed(now, error);
                } else if !auth && self.retry_lifecycle_later(now) {
                    // A server still starting up, or a passing network fault: probe again soon.
                    log::debug!("era probe failed: {}", error.name());
                    if let Some(at) = self.reprobe_at() {
                        self.fail_unservable(now, at, &error);
                    }
                } else {
                    self.shut(now, error);
                }
            }
            Owner::Handshake if unauthorized(&error) => self.authorization_failed(now, error),
            // A 4xx, or a peer's or the host's own fault, is the server's answer; anything else
            // passes (a 503 while a server restarts, a connection lost). Closing on it lost for
            // good a legacy server a moment's outage hid, and every session it renewed.
            Owner::Handshake
                if !refusal
                    && matches!(error, CallError::Transport(_))
                    && self.retry_lifecycle_later(now) =>
            {
                log::debug!("initialize failed: {}", error.name());
                if let Some(at) = self.reprobe_at() {
                    self.fail_unservable(now, at, &error);
                }
            }
            Owner::Handshake => self.shut(now, error),
        }
    }

    /// A legacy HTTP session vanished under request `id`, which the server therefore did not
    /// process: re-initialize and send it again, once.
    /// The legacy session is gone, learnt from the GET stream: a new one is made, as when a
    /// request finds it gone (its calls go under the new one; its server requests end).
    fn on_session_gone(&mut self, now: Instant) {
        if matches!(self.lifecycle, Lifecycle::Ready { .. }) && self.era() == Some(Era::Legacy) {
            log::debug!("legacy session gone (GET stream); re-initializing");
            self.stats.sessions_renewed += 1;
            self.end_session_tasks(now, &TransportError::SessionExpired);
            self.forget_legacy_requests();
            self.start_handshake(now);
        }
    }

    fn on_session_expired(&mut self, now: Instant, id: WireId) {
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return };
        self.requests.end_exchange(slot, self.epoch.stamp(now));
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
                    self.end_session_tasks(now, &TransportError::SessionExpired);
                    // Their ids were the old session's: the new one never made them.
                    self.forget_legacy_requests();
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
            Opening::Probe if self.resume_saved_verdict() => {}
            Opening::Probe => self.start_probe(now, lifecycle::first_probe_version()),
            Opening::Handshake => self.start_handshake(now),
        }
    }

    fn on_closed(&mut self, now: Instant, error: TransportError) {
        self.forget_legacy_requests();
        let probing_unknown =
            matches!(self.lifecycle, Lifecycle::Probing(_)) && !self.lifecycle.probing_modern();
        if probing_unknown && self.config.era == EraPreference::Auto {
            // Some legacy servers exit when the first message is not `initialize` (PROTOCOL.md
            // U10): take that as the legacy verdict and respawn once for the handshake. Not a
            // server that refused `initialize` as a modern one: that exit is a crash, which
            // the restart policy paces (taken as legacy, it went round without end, no backoff
            // and restarts off or not).
            log::debug!("server exited during the era probe; respawning for initialize");
            self.drop_lifecycle_request();
            // Calls sent under a saved verdict before it was probed again went down with the
            // process: the retry policy settles them as after any crash.
            self.fail_sent_calls(now, &CallError::Transport(error));
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
}

// How calls end: the one path every terminal event takes, and the admission check that keeps room
// for every end (`ending`).
impl Engine {
    /// `true` when one more host call's terminal event is sure to fit: terminal events are
    /// never dropped, so they are bounded here, at admission. Those the host has not drained
    /// plus those every pending host call will produce stay within `Config::max_queued_events`.
    fn room_for_end(&self) -> bool {
        let engine_own =
            usize::from(self.lifecycle.call().is_some()) + usize::from(self.refresh.is_some());
        let host_calls = self.requests.len().saturating_sub(engine_own);
        self.events.terminals() + host_calls < self.config.max_queued_events
    }

    /// A request was written: count the attempt and the time it waited in the queue.
    fn mark_sent(&mut self, now: Stamp, slot: usize) {
        self.requests.set_state(slot, SendState::Sent);
        let held = self.requests.bufs(slot).held().get();
        let assumed = self.assumed;
        if let Some(p) = self.requests.get_mut(slot) {
            p.sent_assumed = assumed;
            if p.attempt == 0 {
                let waited = now.since(p.created).saturating_sub(held);
                p.queue_wait = waited.into();
                if p.owner == Owner::Host {
                    self.stats.queue_wait += waited;
                }
            }
            // A task's polls are not attempts of the call (a resumed call's first is); each
            // is a try of its own, counted until a poll is answered (`task_wait`).
            if !p.task || p.attempt == 0 {
                p.attempt += 1;
            }
            p.tries = p.tries.saturating_add(1);
            p.renewed_unwritten = 0;
            p.sent_at = now;
            p.exchange_open = true;
        }
    }

    /// Over HTTP: request `id`, written at `sent_at`, goes on a connection only now (every
    /// `HttpOptions::max_connections` was busy). The wait moves from network time to queue
    /// time, in the call's record and in [`Stats`].
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn handle_on_wire(&mut self, now: Instant, id: WireId) {
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return };
        let now = self.epoch.stamp(now);
        let Some(p) = self.requests.get_mut(slot) else { return };
        if p.owner != Owner::Host || !p.exchange_open {
            return;
        }
        let waited = now.since(p.sent_at);
        if waited.is_zero() {
            return;
        }
        p.queue_wait = p.queue_wait.add(waited);
        p.sent_at = now;
        self.stats.queue_wait += waited;
    }

    /// Ends a host call: frees the slot, tells its breaker, and queues the terminal event.
    fn finish(&mut self, now: Instant, slot: usize, how: Ended, mut outcome: Outcome<'_>) {
        let Some(call) = self.requests.call_id(slot) else { return };
        if matches!(outcome, Outcome::Failed(_)) && self.requests.get(slot).is_some_and(|p| p.task)
        {
            // A task's polls are reads, but the call is what it was: a write the server took
            // as a task may have run, all or part, whatever broke its polls. Ended by the
            // transport, it is `DeliveryUnknown` (as when its session is lost), so a host that
            // retries failures on its own does not run it twice.
            let write = self.requests.get(slot).is_some_and(|p| p.op == OperationClass::Write);
            if let Outcome::Failed(e @ CallError::Transport(_)) = &mut outcome {
                if write {
                    *e = retry::delivery_unknown(e.clone());
                }
            }
            // However the call fails (its polls failing, an answer refused, a reply
            // unreadable; a cancel or a deadline asked already, in `abandon`), a task the
            // server still runs would run on for nobody: it is cancelled. One that ended on
            // the server needs nothing.
            let running =
                self.task_of(slot).is_some_and(|t| !t.status.is_some_and(|s| s.is_terminal()));
            if running {
                self.cancel_task(slot);
            }
        }
        let at = self.epoch.stamp(now);
        self.requests.end_exchange(slot, at);
        let Some(p) = self.requests.remove(slot, how) else { return };
        if p.state == SendState::Queued {
            // Out of the send queue at once: behind a call that waits for the in-flight limit,
            // ended calls would pile up there with no bound.
            let id = WireId::new(slot, p.wire_gen);
            self.send_queue.retain(|&q| q != id);
        }
        // Its input requests the host has not taken yet go with it: it would be asked for
        // what no call waits for.
        if !self.server_requests.is_empty() {
            for request in self.server_requests.drop_call(call) {
                self.events.remove_server_request(request);
            }
        }
        let failure = match &outcome {
            Outcome::Failed(e) => Some(e),
            _ => None,
        };
        let change = if !judged_by_breaker(p.method) {
            None
        } else if p.attempt > 0 && p.renewed_unwritten == 0 {
            self.breakers.record(p.tenant, p.op, failure, now, p.probe)
        } else {
            // Unsent (never, or not its retry: its last attempt's failure was told already, in
            // `on_attempt_failed`), its end says nothing new of the server; a probe (its retry
            // admitted as one) gives its place back.
            if p.probe {
                self.breakers.release_probe(p.tenant, p.op);
            }
            None
        };
        if failure.is_none() && p.attempt > 0 && !p.task && judged_by_latency(p.method) {
            // A moving average of one attempt's duration, for judging whether a retry fits.
            self.latency = self.latency.average_in(at.since(p.sent_at));
        }
        if p.internal {
            // The tool-list refresh: its end releases the calls waiting for it. It went
            // through the breaker as any read (it may be the half-open breaker's probe), so
            // its end was recorded there above.
            self.refresh = None;
            self.unpark(now, matches!(outcome, Outcome::Listing { .. }));
            if let Some(c) = change {
                self.events.breaker(c.tenant, c.class, c.state);
            }
            self.timers.tidy(&self.requests);
            return;
        }
        let named = matches!(p.method, Method::ToolsCall | Method::Extension);
        let tool = named.then(|| self.requests.bufs(slot).name());
        let record = self.record_of(at, call, slot, &p, tool, &outcome);
        self.stats.calls += 1;
        if let Some(e) = failure {
            self.stats.failures.count(e);
        }
        match outcome {
            Outcome::Done { json, result_type, is_error } => {
                self.events.done(call, json, result_type, is_error, &record)
            }
            Outcome::Listing { key, items, hints } => {
                self.events.done_listing(call, key, items, hints, &record)
            }
            Outcome::Failed(e) => self.events.failed(call, e, &record),
        }
        // The call's own end first, then what it did to its breaker.
        if let Some(c) = change {
            self.events.breaker(c.tenant, c.class, c.state);
        }
        self.timers.tidy(&self.requests);
    }

    /// The record of a host call that ends now (all but what only the host knows).
    fn record_of<'t>(
        &self,
        now: Stamp,
        call: CallId,
        slot: usize,
        p: &Pending,
        tool: Option<&'t str>,
        outcome: &Outcome<'_>,
    ) -> CallRecord<'t> {
        let mut r = CallRecord::new(p.method, self.transport);
        r.call = Some(call);
        let bufs = self.requests.bufs(slot);
        (r.trace_id, r.run_id) = bufs.tags();
        r.version = self.lifecycle.version();
        r.request_id = (p.attempt > 0).then(|| WireId::new(slot, p.written_gen()));
        r.tool = tool;
        r.attempts = p.attempt;
        r.queue_wait = p.queue_wait.get();
        // A call that ends while held (refused, cancelled, past its deadline) waited all along.
        r.authorization_wait =
            if p.state == SendState::Held { now.since(p.created) } else { bufs.held().get() };
        r.network = p.network.get();
        r.elapsed = now.since(p.created);
        r.rounds = p.rounds;
        match outcome {
            Outcome::Done { is_error, .. } => r.tool_error = *is_error,
            Outcome::Listing { .. } => {}
            Outcome::Failed(e) => r.failed(e),
        }
        r
    }

    /// Fails every host call (not the lifecycle request) with `error`.
    fn fail_all(&mut self, now: Instant, error: CallError) {
        let mut slots: SmallVec<[usize; 16]> = self
            .requests
            .iter()
            .filter(|(_, p)| p.owner == Owner::Host)
            .map(|(slot, _)| slot)
            .collect();
        // The tool-list refresh last: its end releases the calls parked for it with its own
        // failure, and theirs is this one.
        slots.sort_by_key(|&slot| self.requests.get(slot).is_some_and(|p| p.internal));
        // A write on the wire may be running on the server whatever ended the engine (a lost
        // transport, a handshake refused, a session gone): `error` is not its answer, and it
        // ends `DeliveryUnknown`, so a host retrying on its own does not send it again as if
        // the server had refused it. The host's own close stands as it is (a lifecycle's
        // local end, a handshake past its time, is not the write's). (A subscription changes
        // nothing.)
        let own_end = matches!(
            error,
            CallError::Transport(TransportError::Closed(crate::error::CloseReason::Host))
        );
        for slot in slots {
            let unknown = !own_end
                && self.requests.get(slot).is_some_and(|p| {
                    p.state == SendState::Sent
                        && p.method != Method::Listen
                        && !p.class.retry_safe()
                });
            let error = match unknown {
                true => retry::delivery_unknown(error.clone()),
                false => error.clone(),
            };
            self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error));
        }
        self.send_queue.clear();
    }

    /// Ends a host call locally; tells the server if the request was written.
    fn abandon(&mut self, now: Instant, slot: usize, error: CallError) {
        let Some(p) = self.requests.get(slot) else { return };
        if p.task {
            // A poll on the wire over HTTP holds a connection until it is answered, and a
            // 2025-11-25 `tasks/result` is answered only when the task ends: its stream is
            // closed (the poll alone; the task is the next line's business).
            if p.state == SendState::Sent && self.transport == TransportKind::Http {
                self.push_control(Control::CloseStream { id: WireId::new(slot, p.wire_gen) });
            }
            // The third way to cancel: the task goes on without a request in flight.
            self.cancel_task(slot);
        } else if p.state == SendState::Sent {
            self.signal_cancel(WireId::new(slot, p.wire_gen));
        }
        self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error));
    }
}

// Retries: which failed attempts go again and when (the policy is `retry`).
impl Engine {
    /// `true` when `id` has never been written: only first attempts wait for the in-flight
    /// limit; a retry already holds its slot. The engine's own tool-list refresh never waits:
    /// the calls it unparks hold the slots it would wait for.
    fn is_fresh(&self, id: WireId) -> bool {
        // A subscription stream takes no call's place, so it waits for none either.
        self.requests
            .get(id.slot())
            .is_some_and(|p| p.attempt == 0 && !p.internal && p.method != Method::Listen)
    }

    /// An attempt failed in transport: send it again after a backoff if the policy allows,
    /// else end the call (as `DeliveryUnknown` when a write may have run).
    fn on_attempt_failed(
        &mut self,
        now: Instant,
        slot: usize,
        error: CallError,
        delivery: Delivery,
    ) {
        self.requests.end_exchange(slot, self.epoch.stamp(now));
        let Some(p) = self.requests.get(slot) else { return };
        if p.method == Method::Listen {
            // A subscription changes nothing on the server, and is opened again by the host,
            // never behind its back: it ends with the error as it is.
            return self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error));
        }
        let (class, attempt, deadline, tenant, op, probe) = (
            p.class,
            u32::from(p.tries.max(1)),
            self.epoch.instant(p.deadline),
            p.tenant,
            p.op,
            p.probe,
        );
        let random = self.jitter.next();
        let decision = decide(
            &self.config.retry,
            class,
            &error,
            delivery,
            attempt,
            now,
            deadline,
            self.latency.get(),
            random,
        );
        match decision {
            Decision::Retry(delay) => {
                // A failed attempt tells its breaker even when the call goes on (a final
                // failure is told by `finish`).
                if let Some(c) = self.breakers.record(tenant, op, Some(&error), now, probe) {
                    self.events.breaker(c.tenant, c.class, c.state);
                }
                // Its verdict given, it is no probe now: the breaker it reopened may admit
                // another probe after the cool-down, whose place this call's end (a cancel
                // in the backoff) must not free. Its retry is admitted anew when it is due.
                self.requests.note_admission(slot, Admission::Admitted);
                // The error's name only: its text may quote the server's stderr or message.
                log::debug!("attempt {attempt} failed ({}); retrying in {delay:?}", error.name());
                // The old wire id becomes late: a reply to it is never taken for the new one.
                self.requests.renew_wire_id(slot);
                let until = self.epoch.stamp(now).after(delay);
                self.requests.set_state(slot, SendState::Backoff(until));
                self.timers.schedule_request(
                    &self.requests,
                    slot,
                    until,
                    timers::TimerKind::Backoff,
                );
            }
            Decision::Fail => self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error)),
            Decision::DeliveryUnknown => {
                let e = retry::delivery_unknown(error);
                self.finish(now, slot, Ended::Abandoned, Outcome::Failed(e));
            }
        }
    }

    /// A retry's backoff ended: send it again, unless its breaker says no.
    fn backoff_ended(&mut self, now: Instant, slot: usize) {
        let Some(p) = self.requests.get(slot) else { return };
        let (method, tenant, op, task) = (p.method, p.tenant, p.op, p.task);
        // A task's poll asks no breaker, as its scheduled polls do not (`task_poll_due`): the
        // task runs on the server whatever the breaker says, and the call polls for it.
        let admission =
            if task { Admission::Admitted } else { self.admit(method, tenant, op, now) };
        self.requests.note_admission(slot, admission);
        if !admission.admitted() {
            let e = CallError::Local(LocalError::BreakerOpen);
            self.finish(now, slot, Ended::Abandoned, Outcome::Failed(e));
            return;
        }
        self.stats.retries += 1;
        self.requests.set_state(slot, SendState::Queued);
        if let Some(id) = self.requests.wire_id(slot) {
            self.send_queue.push_front(id);
        }
    }
}

// Supervised restart of a crashed stdio server (the bookkeeping is `supervision::RestartState`).
impl Engine {
    /// The server process died. Calls that never left wait for the next process; calls that
    /// may have reached it are retried or end by the retry policy; a restart is scheduled
    /// with backoff, unless the exits come too fast (a crash loop: the server is degraded).
    fn on_process_lost(&mut self, now: Instant, error: TransportError) {
        // No new process until the backoff ends (a failed spawn lands here too: without this
        // the host would try again on every poll).
        self.wants_transport = false;
        self.drop_lifecycle_request();
        self.restart.note_loss(error.clone());
        let cause = CallError::Transport(error);
        self.fail_sent_calls(now, &cause);
        // A server that died during `initialize` already had its legacy verdict (the probe
        // failed, or it exited on the probe): the next process gets the handshake straight
        // away rather than another probe that would kill it again.
        let died_handshaking =
            matches!(self.lifecycle, Lifecycle::Connecting { next: Opening::Handshake });
        let next = match self.era() {
            Some(Era::Legacy) => Opening::Handshake,
            _ if self.config.era == EraPreference::LegacyOnly => Opening::Handshake,
            _ if died_handshaking => Opening::Handshake,
            _ => Opening::Probe,
        };
        self.lifecycle = Lifecycle::Connecting { next };
        self.meta = None;
        let policy = self.config.restart;
        match self.restart.after_exit(now, &policy) {
            AfterExit::Degraded { crashes, first_loss } => {
                log::warn!(
                    "server crashed {crashes} times within {:?}: degraded",
                    policy.crash_loop_window
                );
                let first = first_loss.map(Box::new);
                self.fail_all(now, CallError::Local(LocalError::Degraded(first)));
                self.events.transport_lost(cause, None);
            }
            AfterExit::RestartIn(delay) => {
                self.fail_unservable(now, crate::time::later(now, delay), &cause);
                self.events.transport_lost(cause, Some(delay));
            }
        }
    }

    /// The host calls written to a process that is gone: each is settled by the retry policy
    /// (sent again, or `DeliveryUnknown` for a write), and nothing of the old process is
    /// written to the new one.
    fn fail_sent_calls(&mut self, now: Instant, cause: &CallError) {
        let lost = match cause {
            CallError::Transport(t) => t.clone(),
            _ => TransportError::ConnectionLost,
        };
        self.end_session_tasks(now, &lost);
        let sent: SmallVec<[usize; 16]> = self
            .requests
            .iter()
            .filter(|(_, p)| p.owner == Owner::Host && p.state == SendState::Sent)
            .map(|(slot, _)| slot)
            .collect();
        for slot in sent {
            self.on_attempt_failed(now, slot, cause.clone(), Delivery::MaybeDelivered);
        }
        self.control.clear();
    }

    /// 2025-11-25 task-backed calls whose task lived in a process or session that is gone
    /// (PROTOCOL.md §4: one process is one session): the next one never heard of the task,
    /// so polling it there ends the call with the server's error for an unknown id (or its
    /// `tasks/cancel` goes to a process that never saw the task). The tool may have run, all
    /// or part: each ends with `DeliveryUnknown`, and no cancel is sent.
    fn end_session_tasks(&mut self, now: Instant, lost: &TransportError) {
        if self.era() != Some(Era::Legacy) {
            // A 2026-07-28 task is the server's, not a session's: it is polled on.
            return;
        }
        let tasks: SmallVec<[usize; 8]> = self
            .requests
            .iter()
            .filter(|(_, p)| p.owner == Owner::Host && p.task)
            .map(|(slot, _)| slot)
            .collect();
        for slot in tasks {
            if let Some(t) = self.task_mut(slot) {
                // Taken as over, so the call's end (`finish`) sends no `tasks/cancel`.
                t.status = Some(TaskStatus::Cancelled);
            }
            // A write may have run, a read has nothing to be unknown about: `finish` says so.
            let e = CallError::Transport(lost.clone());
            self.finish(now, slot, Ended::Abandoned, Outcome::Failed(e));
        }
    }

    /// Calls whose deadline comes before the next process (or the next era probe) does cannot
    /// be answered: they end now with the failure that stopped them (an exit status and stderr
    /// tail, a lost connection) instead of a bare `DeadlineExceeded` when their deadline
    /// passes. Calls in flight were settled by the retry policy already; this takes the ones
    /// waiting to be (re)sent.
    fn fail_unservable(&mut self, now: Instant, restart_at: Instant, cause: &CallError) {
        let restart_at = self.epoch.stamp(restart_at);
        let doomed: SmallVec<[usize; 16]> = self
            .requests
            .iter()
            .filter(|(_, p)| {
                p.owner == Owner::Host
                    && p.state != SendState::Sent
                    && !p.internal
                    && p.deadline <= restart_at
            })
            .map(|(slot, _)| slot)
            .collect();
        for slot in doomed {
            self.finish(now, slot, Ended::Abandoned, Outcome::Failed(cause.clone()));
        }
    }

    /// Backoffs that ended, restarts that are due.
    fn resilience_timeout(&mut self, now: Instant) {
        if self.restart.due(now) {
            self.wants_transport = true;
        }
    }
}

// Listings: pages joined behind `nextCursor`, and the re-listing a header mismatch asks for
// (`listing`).
impl Engine {
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
        if self.requests.get(slot).is_some_and(|p| p.one_page) {
            return self.finish_one_page(now, slot, key, result, inner, next_cursor.is_some());
        }
        let modern = self.era() == Some(Era::Modern);
        let bufs = self.requests.bufs_mut(slot);
        let more = bufs.more();
        more.list_hints.add(result, modern);
        if !inner.is_empty() {
            if more.items.len().saturating_add(inner.len() + 1) > self.config.max_listing_bytes {
                // Freed, not only cleared: the pages so far may be most of the cap.
                more.items = Vec::new();
                self.stats.too_large += 1;
                return fail(self, PeerError::TooLarge.into());
            }
            // The items are gathered as a JSON array (`[` first, `]` added at the end), so
            // the tool-header table reads them in place rather than from a copy.
            more.items.push(if more.items.is_empty() { b'[' } else { b',' });
            more.items.extend_from_slice(inner.as_bytes());
        }
        let Some(cursor) = next_cursor else {
            // The last page: an empty cursor is a valid cursor, only absence ends the list.
            let mut array = std::mem::take(&mut self.requests.bufs_mut(slot).more().items);
            let mut kept = None;
            if !array.is_empty() {
                array.push(b']');
                if key == "tools" {
                    let enforce = self.transport == TransportKind::Http;
                    kept = self.tool_headers.learn(&array, enforce);
                }
            } else if key == "tools" {
                let enforce = self.transport == TransportKind::Http;
                kept = self.tool_headers.learn(b"[]", enforce);
            }
            let items = match &kept {
                Some(kept) => kept.as_slice(),
                None => array.get(1..array.len().saturating_sub(1)).unwrap_or_default(),
            };
            let hints = self.requests.bufs_mut(slot).more().list_hints;
            let listing = Outcome::Listing { key, items, hints };
            self.finish(now, slot, Ended::Answered, listing);
            // The buffer is kept for the slot's next listing, unless a large one grew it: the
            // result is in the event queue now, and a second copy would stay for nothing.
            if array.capacity() <= LISTING_BUF_KEEP {
                array.clear();
                self.requests.bufs_mut(slot).more().items = array;
            }
            return;
        };
        let hash = cursor_hash(&cursor);
        if bufs.more().cursors.contains(&hash) {
            return fail(self, PeerError::CursorRepeated.into());
        }
        bufs.more().cursors.push(hash);
        bufs.truncate_params(0);
        let params = bufs.params_buf().0;
        params.extend_from_slice(b"\"cursor\":");
        write_json_str(params, &cursor);
        let pages = self.requests.get_mut(slot).map(|p| {
            p.pages += 1;
            p.tries = 0;
            p.pages
        });
        if pages.unwrap_or(0) as usize >= self.config.max_pages {
            return fail(self, LocalError::TooManyPages.into());
        }
        if let Some(id) = self.requests.renew_answered_wire_id(slot) {
            self.send_queue.push_front(id);
        }
    }

    /// A one-page listing ([`Engine::list_page`]) ends with the page as the server sent it. A
    /// tool page also teaches the `x-mcp-header` table (merged: the other pages' tools keep
    /// theirs), and over HTTP a tool breaking those rules is left out of the page handed on.
    fn finish_one_page(
        &mut self,
        now: Instant,
        slot: usize,
        key: &str,
        result: RawJson<'_>,
        inner: &str,
        has_next: bool,
    ) {
        if key != "tools" {
            return self.finish(now, slot, Ended::Answered, done(result.text()));
        }
        // A page asked for without a cursor (no params at all) starts a walk.
        let at = headers::PageAt {
            first: self.requests.bufs_mut(slot).params_len() == 0,
            last: !has_next,
        };
        let mut array = std::mem::take(&mut self.requests.bufs_mut(slot).more().items);
        array.clear();
        array.push(b'[');
        array.extend_from_slice(inner.as_bytes());
        array.push(b']');
        let enforce = self.transport == TransportKind::Http;
        let Some(kept) = self.tool_headers.learn_page(&array, enforce, at) else {
            self.requests.bufs_mut(slot).more().items = array;
            return self.finish(now, slot, Ended::Answered, done(result.text()));
        };
        // Rebuilt without the dropped tools; the cursor and the cache hints go along.
        let mut hints = ListHints::default();
        hints.add(result, self.era() == Some(Era::Modern));
        let mut json = String::with_capacity(kept.len() + 64);
        json.push_str("{\"tools\":[");
        json.push_str(std::str::from_utf8(&kept).unwrap_or_default());
        json.push(']');
        if let Some(c) = result.get("nextCursor").filter(|_| has_next) {
            json.push_str(",\"nextCursor\":");
            json.push_str(c.text());
        }
        hints.write(&mut json);
        json.push('}');
        self.requests.bufs_mut(slot).more().items = array;
        self.finish(now, slot, Ended::Answered, done(&json));
    }

    /// HTTP -32020: the server says the call's `Mcp-Param-*` headers are missing or wrong, so
    /// the tool list this engine knows is stale or absent. The spec asks to re-fetch
    /// `tools/list` and retry: the call waits (once) for a fresh listing. Returns `false` when
    /// that does not apply and the error should end the call.
    fn park_for_relist(&mut self, now: Instant, slot: usize) -> bool {
        let Some(p) = self.requests.get_mut(slot) else { return false };
        if self.transport != TransportKind::Http || p.method != Method::ToolsCall || p.relisted {
            return false;
        }
        p.relisted = true;
        self.requests.set_state(slot, SendState::Parked);
        if self.refresh.is_none() {
            match self.request(now, Method::ToolsList, &CallOptions::default(), None, "", |_| {}) {
                Ok(call) => {
                    let refresh = call.0.slot();
                    if let Some(r) = self.requests.get_mut(refresh) {
                        r.internal = true;
                    }
                    self.refresh = Some(refresh);
                    // The parked calls hold in-flight slots and wait for this listing: it goes
                    // first, past the limit (`is_fresh`), or neither would ever move.
                    if let Some(id) = self.requests.wire_id(refresh) {
                        self.send_queue.retain(|&q| q != id);
                        self.send_queue.push_front(id);
                    }
                }
                Err(e) => {
                    log::debug!("cannot refresh the tool list: {e}");
                    self.unpark(now, false);
                }
            }
        }
        true
    }

    /// The refresh ended: parked calls go again with headers from the fresh listing, or end
    /// with the header mismatch when the listing failed.
    fn unpark(&mut self, now: Instant, listed: bool) {
        let parked: SmallVec<[usize; 8]> = self
            .requests
            .iter()
            .filter(|(_, p)| p.state == SendState::Parked)
            .map(|(s, _)| s)
            .collect();
        for slot in parked {
            if !listed {
                let e = crate::error::RpcError {
                    code: crate::error::RpcError::HEADER_MISMATCH,
                    message: "header mismatch, and re-listing the tools failed".into(),
                    data: None,
                };
                self.finish(now, slot, Ended::Abandoned, Outcome::Failed(CallError::Protocol(e)));
                continue;
            }
            let bufs = self.requests.bufs_mut(slot);
            let mut params = Vec::with_capacity(bufs.params_len() + 2);
            params.push(b'{');
            params.extend_from_slice(bufs.params());
            params.push(b'}');
            let arguments =
                crate::proto::json::parse(&params).ok().and_then(|p| p.get("arguments"));
            let mut headers = std::mem::take(&mut bufs.param_headers);
            headers.clear();
            if let Some(a) = arguments {
                self.tool_headers.write_for_call(bufs.name(), a.text(), &mut headers);
            }
            self.requests.bufs_mut(slot).param_headers = headers;
            if let Some(id) = self.requests.renew_wire_id(slot) {
                self.send_queue.push_front(id);
            }
        }
    }
}

// Task-backed tool calls: polled to their end, one call for the host (`tasks`).
impl Engine {
    /// The task (asked for or running) of the call in `slot`.
    fn task_of(&self, slot: usize) -> Option<&TaskSlot> {
        self.requests.bufs(slot).more.as_ref()?.task.as_ref()
    }

    fn task_mut(&mut self, slot: usize) -> Option<&mut TaskSlot> {
        self.requests.bufs_mut(slot).more.as_mut()?.task.as_mut()
    }

    /// `true` when `task`'s `inputRequests` has a key not asked before; all its keys are then
    /// remembered as asked.
    /// When the task's `inputRequests` name a key not asked before: the keys asked before
    /// (to leave out: a server may list an answered key until it has taken the answer in),
    /// after noting the new ones as asked. `None` when every key was asked already.
    fn new_input_keys(&mut self, slot: usize, task: RawJson<'_>) -> Option<SmallVec<[u64; 4]>> {
        let inputs = task.get("inputRequests").filter(|r| r.kind() == Kind::Object);
        let keys: SmallVec<[u64; 4]> =
            inputs.into_iter().flat_map(RawJson::members).map(|(k, _)| hash(k.raw())).collect();
        let t = self.task_mut(slot)?;
        let (old, fresh): (SmallVec<[u64; 4]>, SmallVec<[u64; 4]>) =
            keys.into_iter().partition(|k| t.asked.contains(k));
        if fresh.is_empty() {
            return None;
        }
        t.asked.extend(fresh);
        Some(old)
    }

    /// Whether a `tools/call` of `tool` made with `mode` asks for a task, and with what ttl.
    fn task_wanted(&self, tool: &str, mode: TaskMode) -> Option<Option<Duration>> {
        match mode {
            TaskMode::Off => None,
            TaskMode::Prefer { ttl } => Some(ttl),
            TaskMode::Auto if self.tasks_declared => Some(None),
            TaskMode::Auto => {
                let required =
                    self.tool_headers.task_support(tool) == Some(headers::TaskSupport::Required);
                required.then_some(None)
            }
        }
    }

    /// Marks a new `tools/call` as asking for a task (`auto`: by [`TaskMode::Auto`]).
    fn ask_for_task(&mut self, slot: usize, ttl: Option<Duration>, auto: bool) {
        let more = self.requests.bufs_mut(slot).more();
        more.task = Some(TaskSlot { ttl, requested: true, auto, ..TaskSlot::default() });
        if let Some(p) = self.requests.get_mut(slot) {
            p.task_asked = true;
        }
    }

    /// Right before a task-asking `tools/call` is written on a 2025-11-25 server: adds
    /// `params.task` once, if the server and the tool allow tasks; otherwise the call goes
    /// plain. Returns whether the call still asks for a task.
    fn augment_legacy_call(&mut self, slot: usize) -> bool {
        let caps = LegacyTaskCaps::of_server_info(&self.server_info);
        let support = self.tool_headers.task_support(self.requests.bufs(slot).name());
        let bufs = self.requests.bufs_mut(slot);
        let Some(task) = bufs.more.as_mut().and_then(|m| m.task.as_mut()) else { return false };
        // `Auto` asks (on this era) for the tools that must run as tasks, whatever the
        // configuration declares for the 2026-07-28 servers; a task asked for outright, for
        // every tool no listing forbids it.
        let tool_ok = match support {
            _ if task.auto => support == Some(headers::TaskSupport::Required),
            Some(headers::TaskSupport::Forbidden) => false,
            _ => true,
        };
        if !task.requested {
            return false;
        }
        if task.augmented {
            return true;
        }
        if !(caps.tool_calls && tool_ok) {
            task.requested = false;
            return false;
        }
        task.augmented = true;
        let ttl = task.ttl.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
        let (params, _) = bufs.params_buf();
        params.extend_from_slice(b",\"task\":{");
        if let Some(ms) = ttl {
            params.extend_from_slice(b"\"ttl\":");
            crate::proto::jsonrpc::write_u64(params, ms);
        }
        params.push(b'}');
        true
    }

    /// `true` when the reply to the `tools/call` in `slot` creates a task the call asked for.
    fn creates_task(&self, slot: usize, result: RawJson<'_>, rt: ResultType) -> bool {
        let task = self.task_of(slot);
        if !task.is_some_and(|t| t.requested) {
            return false;
        }
        match self.era() {
            Some(Era::Modern) => rt == ResultType::Task,
            _ => {
                task.is_some_and(|t| t.augmented)
                    && result.get("task").is_some_and(|t| t.kind() == Kind::Object)
            }
        }
    }

    /// The call in `slot` follows the server's task `id` from now on: its end cancels the task
    /// while it runs (`finish`).
    fn follow_task(&mut self, slot: usize, id: &str) {
        let task = self.requests.bufs_mut(slot).more().task.get_or_insert_with(TaskSlot::default);
        task.id.clear();
        task.id.push_str(id);
        if let Some(p) = self.requests.get_mut(slot) {
            p.task = true;
        }
    }

    /// The server created the call's task: report it and start polling.
    fn on_task_created(&mut self, now: Instant, slot: usize, result: RawJson<'_>) {
        let Some(view) = self.task_object(result).and_then(read_task) else {
            // The server took the call as a task but described it unreadably (a status of no
            // revision, say): the task runs all the same, for nobody once the call ends. With
            // its id readable, the call follows it just long enough for `finish` to cancel it.
            if let Some(id) = self.task_object(result).and_then(read_task_id) {
                self.follow_task(slot, &id);
            }
            let e = CallError::Peer(PeerError::InvalidResult);
            return self.finish(now, slot, Ended::Answered, Outcome::Failed(e));
        };
        let Some(call) = self.requests.call_id(slot) else { return };
        self.follow_task(slot, &view.id);
        let bufs = self.requests.bufs_mut(slot);
        let more = bufs.more();
        // An earlier `input_required` round's members are no part of the polls.
        more.params_base = None;
        more.request_state.clear();
        bufs.truncate_params(0);
        let (params, _) = bufs.params_buf();
        params.extend_from_slice(b"\"taskId\":");
        write_json_str(params, &view.id);
        if let Some(p) = self.requests.get_mut(slot) {
            // The write was delivered: what follows are polls, safe to repeat.
            p.class = Idempotency::Read;
        }
        self.answered_for_now(now, slot);
        self.events.task_created(call, &view.id);
        log::trace!("{call} runs as a task");
        self.on_task_state(now, slot, view, result, true);
    }

    /// A call the server answered for now (its task was created, or it asks for input): the
    /// server is up, and its breaker hears so now. A half-open breaker's probe would otherwise
    /// be out for as long as the task runs or the input takes, refusing every other call.
    fn answered_for_now(&mut self, now: Instant, slot: usize) {
        let Some(p) = self.requests.get(slot) else { return };
        if judged_by_breaker(p.method) {
            if let Some(c) = self.breakers.record(p.tenant, p.op, None, now, p.probe) {
                self.events.breaker(c.tenant, c.class, c.state);
            }
            // A probe has given its verdict: its end, much later, is an ordinary call's,
            // which neither closes nor opens a breaker half-open for another probe.
            if p.probe {
                self.requests.note_admission(slot, Admission::Admitted);
            }
        }
    }

    /// The task object of a result that creates one: the result itself (2026-07-28, flat) or
    /// its `task` member (2025-11-25).
    fn task_object<'a>(&self, result: RawJson<'a>) -> Option<RawJson<'a>> {
        match self.era() {
            Some(Era::Modern) => Some(result),
            _ => result.get("task"),
        }
    }

    /// A reply to a task-backed call's `tasks/get` or `tasks/result`.
    fn on_task_reply(
        &mut self,
        now: Instant,
        slot: usize,
        result: RawJson<'_>,
        head: crate::proto::jsonrpc::ResultHead<'_>,
    ) {
        let (fetching, updating) =
            self.task_of(slot).map_or((false, false), |t| (t.fetch_result, t.updating));
        if updating {
            // `tasks/update` acknowledged: the polls go on, without the answers.
            let bufs = self.requests.bufs_mut(slot);
            let base = bufs.more.as_mut().and_then(|m| m.params_base.take());
            if let Some(base) = base {
                bufs.truncate_params(base);
            }
            if let Some(t) = bufs.more.as_mut().and_then(|m| m.task.as_mut()) {
                t.updating = false;
            }
            return self.task_wait(now, slot);
        }
        if fetching {
            // `tasks/result`: exactly what `tools/call` would have returned.
            let outcome = match mcp::result_head(head) {
                Some((ResultType::Complete, is_error)) => Outcome::Done {
                    json: result.text(),
                    result_type: ResultType::Complete,
                    is_error,
                },
                _ => Outcome::Failed(CallError::Peer(PeerError::InvalidResult)),
            };
            return self.finish(now, slot, Ended::Answered, outcome);
        }
        let same =
            |v: &TaskView<'_>, s: &Self| s.task_of(slot).map(|t| t.id.as_str()) == Some(&*v.id);
        let modern_ok = self.era() != Some(Era::Modern)
            || mcp::result_head(head).is_some_and(|(t, _)| t == ResultType::Complete);
        match read_task(result) {
            Some(view) if modern_ok && same(&view, self) => {
                self.on_task_state(now, slot, view, result, false)
            }
            _ => {
                let e = CallError::Peer(PeerError::InvalidResult);
                self.finish(now, slot, Ended::Answered, Outcome::Failed(e))
            }
        }
    }

    /// A task's state as a poll (or its creation) reported it: an event when it changed,
    /// then the next step.
    fn on_task_state(
        &mut self,
        now: Instant,
        slot: usize,
        view: TaskView<'_>,
        json: RawJson<'_>,
        created: bool,
    ) {
        let Some(call) = self.requests.call_id(slot) else { return };
        let (min, max) = (self.config.task_poll_min, self.config.task_poll_max);
        let message = view.message.as_deref().map_or(0, hash);
        let Some(task) = self.requests.bufs_mut(slot).more.as_mut().and_then(|m| m.task.as_mut())
        else {
            return;
        };
        let changed = task.status != Some(view.status) || task.message != message;
        let first = task.status.is_none();
        task.status = Some(view.status);
        task.message = message;
        task.poll = view.poll.map_or(Duration::from_secs(1), Duration::from_millis).clamp(min, max);
        if changed && !first || first && view.status != TaskStatus::Working {
            self.events.task_status(call, &view.id, view.status, view.message.as_deref());
        }
        if first && !created {
            // A resumed task's first poll answered: the server is up (a created task said so
            // at its creation). A half-open breaker's probe would otherwise be out for as
            // long as the task runs, refusing every other call of its class.
            self.answered_for_now(now, slot);
        }
        let modern = self.era() == Some(Era::Modern);
        match view.status {
            TaskStatus::Working => self.task_wait(now, slot),
            TaskStatus::Cancelled => {
                let e = CallError::Peer(PeerError::TaskCancelled);
                self.finish(now, slot, Ended::Answered, Outcome::Failed(e))
            }
            // A `CreateTaskResult` carries no result to use (2026-07-28): polled for it.
            TaskStatus::Completed if modern && !created => {
                let outcome = match json.get("result").filter(|r| r.kind() == Kind::Object) {
                    Some(r) => {
                        let is_error = r.get("isError").and_then(|v| v.as_bool()).unwrap_or(false);
                        Outcome::Done {
                            json: r.text(),
                            result_type: ResultType::Complete,
                            is_error,
                        }
                    }
                    None => Outcome::Failed(CallError::Peer(PeerError::InvalidResult)),
                };
                self.finish(now, slot, Ended::Answered, outcome)
            }
            TaskStatus::Failed if modern && !created => {
                let error = json.get("error").filter(|e| e.kind() == Kind::Object);
                let code = error.and_then(|e| e.get("code")).and_then(|c| c.text().parse().ok());
                let outcome = match (error, code) {
                    (Some(e), Some(code)) => {
                        let message = e.get("message").and_then(RawJson::as_str);
                        let data = e.get("data");
                        let rpc = RpcError::from_raw(code, message.as_deref().unwrap_or(""), data);
                        Outcome::Failed(CallError::Protocol(rpc))
                    }
                    _ => Outcome::Failed(CallError::Peer(PeerError::InvalidResult)),
                };
                self.finish(now, slot, Ended::Answered, outcome)
            }
            // Input the task needs goes to the host as a call's input requests would; the
            // answers go back in `tasks/update`. Keys already asked are not asked again.
            TaskStatus::InputRequired if modern && !created => {
                let Some(asked) = self.new_input_keys(slot, json) else {
                    return self.task_wait(now, slot);
                };
                if let Some(t) = self.task_mut(slot) {
                    t.updating = true;
                }
                self.on_input_required(now, slot, json, &asked)
            }
            _ if modern => self.task_wait(now, slot),
            // 2025-11-25: the result (or the requests that need input) come on `tasks/result`.
            TaskStatus::InputRequired | TaskStatus::Completed | TaskStatus::Failed => {
                if let Some(t) =
                    self.requests.bufs_mut(slot).more.as_mut().and_then(|m| m.task.as_mut())
                {
                    t.fetch_result = true;
                }
                // The reply answered this wire id: a second copy of it is a duplicate (taken
                // as late, a creation reply's copy looked like an orphan task's and cancelled
                // the task being fetched).
                self.requests.renew_answered_wire_id(slot);
                if let Some(id) = self.requests.wire_id(slot) {
                    self.send_queue.push_front(id);
                }
            }
        }
    }

    /// Waits the task's poll interval before the next `tasks/get`.
    fn task_wait(&mut self, now: Instant, slot: usize) {
        let poll = self.task_of(slot).map_or(self.config.task_poll_min, |t| t.poll);
        // The reply answered this wire id; the next poll goes under a new one. A second copy
        // of it is a duplicate: taken as late, it looked like an orphan task's creation and
        // cancelled the task this call polls.
        self.requests.renew_answered_wire_id(slot);
        if let Some(p) = self.requests.get_mut(slot) {
            p.tries = 0;
        }
        let until = self.epoch.stamp(now).after(poll);
        self.requests.set_state(slot, SendState::TaskWait(until));
        self.timers.schedule_request(&self.requests, slot, until, timers::TimerKind::Backoff);
    }

    /// The wait before a poll ended: the poll joins the queue (a read: no breaker asked), at
    /// its front as a retry does: it holds its place in flight already, and behind fresh
    /// calls the in-flight limit holds it waited as long as the calls on the wire ran (the
    /// task could meet its deadline and be cancelled for nothing).
    fn task_poll_due(&mut self, slot: usize) {
        self.requests.set_state(slot, SendState::Queued);
        if let Some(id) = self.requests.wire_id(slot) {
            self.send_queue.push_front(id);
        }
    }

    /// Ending a task-backed call locally: asks the server to cancel the task (`tasks/cancel`,
    /// on 2025-11-25 only when the server declared `tasks.cancel`). Its reply is counted as
    /// late: the call has ended. While the server restarts, a 2026-07-28 task's cancel waits
    /// for it to be ready (the next process's first message must be its probe; a legacy
    /// task ended with its process, `end_session_tasks`).
    fn cancel_task(&mut self, slot: usize) {
        let ready = matches!(self.lifecycle, Lifecycle::Ready { .. });
        let modern = match self.era() {
            Some(era) => era == Era::Modern,
            // Restarting: the era it was ready in, as its verdict says.
            None => matches!(self.verdict, VerdictSource::Probed { .. } | VerdictSource::Saved),
        };
        if self.lifecycle == Lifecycle::Closed || (!ready && !modern) {
            return;
        }
        if !modern && !LegacyTaskCaps::of_server_info(&self.server_info).cancel {
            return;
        }
        let Some(task) = self.task_of(slot) else {
            return;
        };
        let task = task.id.clone();
        // A fresh id of the slot: the poll in flight becomes late, and so will this reply
        // once the slot is freed.
        let Some(id) = self.requests.renew_wire_id(slot) else { return };
        if ready {
            self.push_control(Control::TaskCancel { id, task });
        } else if self.deferred_task_cancels.len() < MAX_DEFERRED_TASK_CANCELS {
            self.deferred_task_cancels.push(Control::TaskCancel { id, task });
        }
        // Taken as cancelled from now on, so the call's end (`finish`) asks no second time.
        if let Some(t) = self.task_mut(slot) {
            t.status = Some(TaskStatus::Cancelled);
        }
    }

    /// A late reply (its call ended before it came: cancelled, past its deadline) that
    /// created a task: the task would run on for nobody, so it is cancelled (PROTOCOL.md §6.4)
    /// where the server takes `tasks/cancel`. Its acknowledgement is late in turn, and names
    /// a task that is over, so it asks for nothing more.
    fn cancel_orphan_task(&mut self, id: RawJson<'_>, result: RawJson<'_>) {
        // Closed, nothing more may be written; in a new handshake, no request before it ends.
        if !matches!(self.lifecycle, Lifecycle::Ready { .. }) {
            return;
        }
        let Some(wire) = WireId::parse(id) else { return };
        if self.requests.lookup(wire) != Lookup::Late {
            return;
        }
        let legacy = self.era() != Some(Era::Modern);
        let rt = result.get("resultType").and_then(|t| t.as_str());
        if !legacy && rt.as_deref() != Some("task") {
            return;
        }
        let Some(view) = self.task_object(result).and_then(read_task) else { return };
        if view.status.is_terminal()
            || (legacy && !LegacyTaskCaps::of_server_info(&self.server_info).cancel)
        {
            return;
        }
        if self.task_calls().any(|(_, task, _)| task == view.id) {
            // A copy of the reply that created a task a call still follows (late, not a
            // duplicate, once a poll took the call's id on): no orphan.
            return;
        }
        log::debug!("a late reply created a task: cancelling it");
        // The reply's own id, done with on both sides: the acknowledgement is late too.
        self.push_control(Control::TaskCancel { id: wire, task: view.id.into_owned() });
    }

    /// Starts a call that reattaches to a task this client (or an earlier run of it) made:
    /// see [`Engine::resume_task`].
    fn resume(
        &mut self,
        now: Instant,
        task_id: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        if task_id.is_empty() || task_id.len() > MAX_TASK_ID_BYTES {
            return Err(RequestError::InvalidTaskId);
        }
        let call =
            self.request(now, Method::ToolsCall, opts, Some(Idempotency::Read), "", |p| {
                p.extend_from_slice(b"\"taskId\":");
                write_json_str(p, task_id);
            })?;
        let slot = call.0.slot();
        let more = self.requests.bufs_mut(slot).more();
        more.task = Some(TaskSlot { id: task_id.into(), requested: true, ..TaskSlot::default() });
        if let Some(p) = self.requests.get_mut(slot) {
            p.task = true;
        }
        Ok(call)
    }

    /// The task-backed calls pending, with their task ids and last known status.
    fn task_calls(&self) -> impl Iterator<Item = (CallId, &str, Option<TaskStatus>)> + '_ {
        self.requests.iter().filter(|(_, p)| p.task).filter_map(move |(slot, _)| {
            let call = self.requests.call_id(slot)?;
            let task = self.requests.bufs(slot).more.as_ref()?.task.as_ref()?;
            Some((call, task.id.as_str(), task.status))
        })
    }
}

// Requests the server makes of the client, and the host's answers to them (the table is
// `server_requests`).
impl Engine {
    /// A legacy server's request: `ping` is answered at once, a declared kind goes to the
    /// host, anything else is refused: -32601 for a kind not declared, -32602 for an
    /// elicitation in a mode not declared (`client/elicitation.mdx`).
    fn on_server_request(
        &mut self,
        now: Instant,
        id: RawJson<'_>,
        method: &str,
        params: Option<RawJson<'_>>,
    ) {
        self.stats.server_requests += 1;
        if self.lifecycle == Lifecycle::Closed {
            log::debug!("a request ({method}) reached a closed server: ignored");
            return;
        }
        if self.era() == Some(Era::Modern) {
            // 2026-07-28: servers send no requests and clients no responses (PROTOCOL.md 1);
            // input comes as `input_required`. Answering would put a response on the wire
            // the era forbids, and a host would be asked to sample or elicit for it.
            log::debug!("a 2026-07-28 server sent a request ({method}): ignored");
            self.stats.invalid_frames += 1;
            return;
        }
        if id.text().len() > MAX_SERVER_REQUEST_ID_BYTES {
            // Every waiting reply and table entry keeps a copy of the id: a server that
            // stops reading and sends pings with ids of megabytes would fill the control
            // queue's 256 replies with gigabytes. No SDK writes an id of this size.
            log::debug!("a server request with an id of {} bytes: ignored", id.text().len());
            self.stats.invalid_frames += 1;
            return;
        }
        if self.server_requests.has_legacy(id) {
            // The server reused the id of a request still waiting (JSON-RPC forbids it): the
            // host would be asked twice and answer twice under one id. The first stands; any
            // reply to the copy (a ping's, an answer, a refusal) would end the server's first
            // request with the wrong response.
            log::debug!("a server request reused the id of one still waiting: ignored");
            return;
        }
        let id = SmallVec::from_slice(id.text().as_bytes());
        if method == "ping" {
            return self.push_control(Control::Reply { id, ok: true });
        }
        if !matches!(self.lifecycle, Lifecycle::Ready { .. }) {
            // The era is not settled (the probe or the handshake is out): a server that turns
            // out modern may send none, and a legacy one none before `initialized`. Taken as
            // legacy, it asked a host that pinned 2026-07-28 to sample or elicit, and its
            // answer went out on a 2026 connection.
            log::debug!("a request ({method}) before the server was ready: ignored");
            return;
        }
        // Without the feature `Config::check` lets no kind be declared, so every request but
        // `ping` is one this client does not know, as with nothing declared.
        #[cfg(not(feature = "server-requests"))]
        {
            let _ = (now, params);
            self.push_control(Control::Reply { id, ok: false })
        }
        #[cfg(feature = "server-requests")]
        self.take_server_request(now, id, method, params);
    }

    /// A server request of a kind the host may answer: refused, answered from the roots the
    /// host set, or queued for the host.
    #[cfg(feature = "server-requests")]
    fn take_server_request(
        &mut self,
        now: Instant,
        id: SmallVec<[u8; 24]>,
        method: &str,
        params: Option<RawJson<'_>>,
    ) {
        let answers = self.config.answers;
        let kind = ServerRequestKind::of(method, params).filter(|k| answers.declares(*k));
        let Some(kind) = kind else {
            let elicits = answers.elicitation_form || answers.elicitation_url;
            if method == "elicitation/create" && elicits {
                let message = "elicitation mode not supported";
                return self.push_control(Control::Refuse { id, code: INVALID_PARAMS, message });
            }
            return self.push_control(Control::Reply { id, ok: false });
        };
        if kind == ServerRequestKind::Sampling {
            let params = params.map_or("{}", RawJson::text);
            if let Err(message) = sampling::check_request(params, answers.sampling_tools) {
                return self.push_control(Control::Refuse { id, code: INVALID_PARAMS, message });
            }
        }
        if let (ServerRequestKind::Roots, Some(roots)) = (kind, self.roots.current()) {
            let result = HostAnswer(roots.to_owned());
            return self.push_control(Control::Answer { id, result });
        }
        let params = params.map_or("{}", RawJson::text);
        let timeout = self.config.server_request_timeout;
        let deadline = crate::time::later(now, timeout);
        let origin = Origin::Legacy { id: id.clone() };
        match self.server_requests.insert(Entry::waiting(kind, origin, deadline, params)) {
            Some(request) => self.events.server_request(request, kind, None, params),
            None => {
                let message = "too many server requests waiting";
                self.push_control(Control::Refuse { id, code: INTERNAL, message });
            }
        }
    }

    /// A call's `input_required` result: each input request goes to the host, and the call
    /// waits (its deadline running) until every one is answered; with none (only
    /// `requestState`, PROTOCOL.md §2.8 point 4) it is retried at once.
    fn on_input_required(
        &mut self,
        now: Instant,
        slot: usize,
        result: RawJson<'_>,
        asked_before: &[u64],
    ) {
        let Some(call) = self.requests.call_id(slot) else { return };
        let rounds = self.requests.get(slot).map_or(0, |p| p.rounds);
        if rounds >= self.config.max_input_rounds {
            let e = CallError::Local(LocalError::TooManyInputRounds);
            return self.fail_input_round(now, slot, e);
        }
        let inputs = result.get("inputRequests").filter(|r| r.kind() == Kind::Object);
        let state = result.get("requestState").filter(|s| s.kind() == Kind::String);
        if inputs.is_none() && state.is_none() {
            let e = CallError::Peer(PeerError::InvalidResult);
            return self.fail_input_round(now, slot, e);
        }
        let mut asked: SmallVec<[(&str, ServerRequestKind, &str); 4]> = SmallVec::new();
        let members = inputs.into_iter().flat_map(RawJson::members);
        for (key, request) in members.filter(|(k, _)| !asked_before.contains(&hash(k.raw()))) {
            let method = request.get("method").and_then(RawJson::as_str).unwrap_or_default();
            let params = request.get("params");
            let kind = ServerRequestKind::of(&method, params);
            // Without the feature nothing is declared (`Config::check`): every input request
            // fails the call as undeclared.
            #[cfg(not(feature = "server-requests"))]
            let kind: Option<ServerRequestKind> = kind.and(None);
            match kind.filter(|k| self.config.answers.declares(*k)) {
                Some(ServerRequestKind::Sampling) => {
                    let params = params.map_or("{}", RawJson::text);
                    let tools = self.config.answers.sampling_tools;
                    if let Err(reason) = sampling::check_request(params, tools) {
                        log::debug!("refused a sampling input request: {reason}");
                        let e = CallError::Peer(PeerError::InvalidResult);
                        return self.fail_input_round(now, slot, e);
                    }
                    asked.push((key.raw(), ServerRequestKind::Sampling, params));
                }
                Some(kind) => asked.push((key.raw(), kind, params.map_or("{}", RawJson::text))),
                None => {
                    let e = CallError::Peer(PeerError::UndeclaredInputRequest(method.into_owned()));
                    return self.fail_input_round(now, slot, e);
                }
            }
        }
        if asked.len() > self.server_requests.room() {
            let e = CallError::Local(LocalError::TooManyServerRequests);
            return self.fail_input_round(now, slot, e);
        }
        let bufs = self.requests.bufs_mut(slot);
        // The original params, without an earlier round's members, are what every retry sends.
        let len = bufs.params_len();
        let more = bufs.more();
        let base = *more.params_base.get_or_insert(len);
        more.request_state.clear();
        if let Some(s) = state {
            more.request_state.extend_from_slice(s.text().as_bytes());
        }
        bufs.truncate_params(base);
        // The interim result answered this wire id; the retry goes under a new one.
        self.requests.renew_answered_wire_id(slot);
        self.requests.set_state(slot, SendState::AwaitingInput);
        if let Some(p) = self.requests.get_mut(slot) {
            p.rounds += 1;
            p.tries = 0;
        }
        self.answered_for_now(now, slot);
        let deadline = self.requests.get(slot).map_or(now, |p| self.epoch.instant(p.deadline));
        let mut waiting = false;
        for (key, kind, params) in asked.iter().copied() {
            let origin = Origin::Input { call, key: key.to_owned() };
            // Roots the host set answer at once; the host sees only the other requests.
            let known = self.roots.current().filter(|_| kind == ServerRequestKind::Roots);
            let answer = known.map(|roots| HostAnswer(roots.to_owned()));
            let answered = answer.is_some();
            let entry = Entry::waiting(kind, origin, deadline, params);
            // Answered already, it is no answer handler's to see either: offered, a handler
            // refusing what it does not handle failed the call, or one answering replaced
            // the host's roots.
            let offered = answered;
            let insert = |g| Entry { answer, offered, ..entry(g) };
            let Some(request) = self.server_requests.insert(insert) else {
                continue;
            };
            if !answered {
                waiting = true;
                self.events.server_request(request, kind, Some(call), params);
            }
        }
        if !waiting {
            self.send_round(slot, call);
        }
    }

    /// A round of input that cannot go on ends its call. A plain call's server is done with
    /// it (the interim result answered it); a task waits on the server for the input, so it is
    /// cancelled there, as a cancel by the host would.
    fn fail_input_round(&mut self, now: Instant, slot: usize, error: CallError) {
        match self.requests.get(slot).is_some_and(|p| p.task) {
            true => self.abandon(now, slot, error),
            false => self.finish(now, slot, Ended::Answered, Outcome::Failed(error)),
        }
    }

    /// Every input request of the call is answered: the call goes again with
    /// `inputResponses`, and `requestState` exactly as the server sent it (left out when it
    /// sent none), under the wire id taken when the interim result came.
    fn send_round(&mut self, slot: usize, call: CallId) {
        let mut responses: Vec<u8> = Vec::new();
        for (_, e) in self.server_requests.of_call(call) {
            let (Origin::Input { key, .. }, Some(answer)) = (&e.origin, &e.answer) else {
                continue;
            };
            responses.push(if responses.is_empty() { b'{' } else { b',' });
            responses.push(b'"');
            responses.extend_from_slice(key.as_bytes());
            responses.extend_from_slice(b"\":");
            responses.extend_from_slice(answer.0.as_bytes());
        }
        self.server_requests.drop_call(call);
        let bufs = self.requests.bufs_mut(slot);
        let (params, more) = bufs.params_buf();
        let state = more.map_or(&[][..], |m| m.request_state.as_slice());
        if !responses.is_empty() {
            responses.push(b'}');
            params.extend_from_slice(b",\"inputResponses\":");
            params.extend_from_slice(&responses);
        }
        if !state.is_empty() {
            params.extend_from_slice(b",\"requestState\":");
            params.extend_from_slice(state);
        }
        // At the front, as a task's poll: the call holds its place already.
        self.requests.set_state(slot, SendState::Queued);
        if let Some(id) = self.requests.wire_id(slot) {
            self.send_queue.push_front(id);
        }
    }

    /// What a waiting server request asks for; `None` once it is answered or gone.
    pub fn server_request_kind(&self, request: ServerRequestId) -> Option<ServerRequestKind> {
        self.server_requests.get(request).map(|e| e.kind)
    }

    /// The first server request not yet offered to the host's answer handlers, now marked
    /// offered: its handle, kind, call (`None` for a legacy request) and params.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the host's handlers only
    pub(crate) fn offer_server_request(
        &mut self,
    ) -> Option<(ServerRequestId, ServerRequestKind, Option<CallId>, &str)> {
        self.server_requests.offer()
    }

    /// Whether any server request waits to be offered to the host's answer handlers.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn has_unoffered_server_requests(&self) -> bool {
        self.server_requests.has_unoffered()
    }

    /// A server request nobody answered that `call` depends on: one of its input requests
    /// (2026-07-28), or any legacy request (2025-11-25 does not link a request to a call).
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn unanswered_for(
        &self,
        call: CallId,
    ) -> Option<(ServerRequestId, ServerRequestKind)> {
        self.server_requests.unanswered_for(call)
    }

    /// Ends `call` at once with `error` because of server request `request` nobody can
    /// answer (a blocking helper waits for it): a legacy request is refused, so the server is
    /// not left waiting; the call ends as cancelled on the wire. Their events are dropped (a
    /// legacy request whose event the host took is told expired).
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn end_unanswered(
        &mut self,
        now: Instant,
        call: CallId,
        request: ServerRequestId,
        error: CallError,
    ) {
        let legacy = matches!(
            self.server_requests.get(request),
            Some(Entry { origin: Origin::Legacy { .. }, .. })
        );
        if let Some(Entry { origin: Origin::Legacy { id }, .. }) =
            legacy.then(|| self.server_requests.remove(request)).flatten()
        {
            // Linked to no call: a host that took its event hears it expired (its answer
            // would find nothing), as for any request leaving the table unanswered.
            self.events.server_request_withdrawn(request);
            let (code, message) = (INTERNAL, "the client has no answer for this request");
            self.push_control(Control::Refuse { id, code, message });
        }
        let of_call: SmallVec<[ServerRequestId; 4]> = self
            .server_requests
            .of_call(call)
            .map(|(slot, e)| ServerRequestId::new(slot, e.generation))
            .collect();
        for r in of_call {
            self.events.remove_server_request(r);
        }
        if let Some(slot) = self.requests.slot_of(call) {
            self.abandon(now, slot, error);
        }
    }

    /// Drops the queued `Event::ServerRequest` of a request the host's handler answered.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn forget_server_request_event(&mut self, request: ServerRequestId) {
        self.events.remove_server_request(request);
    }

    /// The host's answer to a server request (a JSON object: an `ElicitResult`,
    /// `CreateMessageResult` or `ListRootsResult`). It is checked first, and nothing is sent
    /// when it does not fit: a form elicitation's against its requested schema, a URL-mode
    /// one's for its action and no content, a sampling answer and roots for their shape.
    pub fn answer(
        &mut self,
        _now: Instant,
        request: ServerRequestId,
        result: &RawValue,
    ) -> Result<(), AnswerError> {
        let entry = self.server_requests.get_mut(request).ok_or(AnswerError::NotPending)?;
        let text = result.get().trim();
        if !text.starts_with('{') {
            return Err(AnswerError::NotObject);
        }
        match entry.kind {
            ServerRequestKind::ElicitationForm => elicit::check_form_answer(&entry.params, text)?,
            ServerRequestKind::ElicitationUrl => elicit::check_url_answer(text)?,
            ServerRequestKind::Roots => self.roots.check(text)?,
            ServerRequestKind::Sampling => sampling::check_answer(&entry.params, text)?,
        }
        // A line break can only be whitespace in valid JSON (strings escape them), and on
        // stdio it would end the frame: the answer goes out on one line.
        let text = text.replace(['\n', '\r'], " ");
        let text = text.as_str();
        if let Origin::Input { call, .. } = entry.origin {
            entry.answer = Some(HostAnswer(text.to_owned()));
            let waiting = self.server_requests.of_call(call).any(|(_, e)| e.answer.is_none());
            if let (false, Some(slot)) = (waiting, self.requests.slot_of(call)) {
                self.send_round(slot, call);
            }
            return Ok(());
        }
        if let Some(Entry { origin: Origin::Legacy { id }, .. }) =
            self.server_requests.remove(request)
        {
            self.push_control(Control::Answer { id, result: HostAnswer(text.to_owned()) });
        }
        Ok(())
    }

    /// The host refuses a server request. A legacy request gets an error reply (sampling:
    /// -1, "User rejected sampling request"); a modern call is not retried and fails with
    /// `LocalError::InputRejected` (there is no error slot in `inputResponses`). To decline an
    /// elicitation politely, answer `{"action":"decline"}` instead.
    pub fn reject(&mut self, now: Instant, request: ServerRequestId) -> Result<(), AnswerError> {
        let entry = self.server_requests.remove(request).ok_or(AnswerError::NotPending)?;
        match entry.origin {
            Origin::Legacy { id } => {
                let (code, message) = match entry.kind {
                    ServerRequestKind::Sampling => {
                        (USER_REJECTED, "User rejected sampling request")
                    }
                    _ => (INTERNAL, "the client refused the request"),
                };
                self.push_control(Control::Refuse { id, code, message });
            }
            Origin::Input { call, .. } => {
                if let Some(slot) = self.requests.slot_of(call) {
                    // As a cancel: a task waiting for this input is cancelled on the server,
                    // not left there in `input_required` for nobody.
                    self.abandon(now, slot, CallError::Local(LocalError::InputRejected));
                }
            }
        }
        Ok(())
    }

    /// The transport closed: the legacy requests' ids mean nothing to a new process or
    /// session, so they end (`ServerRequestExpired`) and nothing is sent for them.
    fn forget_legacy_requests(&mut self) {
        for request in self.server_requests.drain_legacy() {
            self.events.server_request_withdrawn(request);
        }
    }

    /// Legacy server requests whose deadline passed: the server is told with a timeout error,
    /// the host with `ServerRequestExpired`.
    fn expire_server_requests(&mut self, now: Instant) {
        while let Some((request, id)) = self.server_requests.take_expired(now) {
            let message = "the client did not answer in time";
            self.push_control(Control::Refuse { id, code: TIMED_OUT, message });
            self.events.server_request_withdrawn(request);
        }
    }
}

/// The UTF-8 byte order mark.
pub(crate) const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Whether `method` exists in the era of a ready server (`modern`): 2026-07-28 removed `ping`,
/// and `subscriptions/listen` and `server/discover` are its own.
#[inline]
fn in_era(method: Method, modern: bool) -> bool {
    match method {
        Method::Ping => !modern,
        Method::Listen | Method::Discover => modern,
        _ => true,
    }
}

/// Whether a request's outcome tells its circuit breaker about the server's health. Not a
/// `subscriptions/listen` stream: its end is how long the stream lived, not whether the server
/// works, and it holds no breaker's probe for its whole life.
fn judged_by_breaker(method: Method) -> bool {
    method != Method::Listen
}

/// Whether a successful request's duration says how long an attempt takes. A subscription's
/// stream lasts as long as the host listens, and a 2025-11-25 `tasks/result` as long as its
/// task runs (a task-backed call's last poll is one: `finish` leaves those out by the slot's
/// task flag, its method being the call's): hours in the average would leave no call time
/// for a retry.
fn judged_by_latency(method: Method) -> bool {
    !matches!(method, Method::Listen | Method::TasksResult)
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
