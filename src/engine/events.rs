//! Events the engine hands the host, and the queue that holds them.
//!
//! Result bytes are copied once into an arena, so an event can hand out borrowed JSON without a
//! per-call allocation. The arena is reset when the queue drains, and compacted (the queued
//! events' ranges copied to the front of a second buffer) once its dead bytes pass both the live
//! ones and [`COMPACT_MIN`]: an event the host never reads cannot pin the arena's growth.
//!
//! # Bounds
//!
//! Progress, change and state events are dropped, and counted, once `max` events are queued,
//! or when the text they bring would take the queue's text past 32 MiB.
//! Terminal events (`CallDone`, `CallFailed`) are never dropped; they are bounded at admission
//! instead: the engine refuses a new call (`Overloaded`) while the terminal events waiting for
//! the host plus the calls pending reach `max`, so each pending call always has room for its
//! end.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

use std::time::Duration;

use crate::engine::breaker::{BreakerState, OperationClass};
use crate::engine::record::CallRecord;
use crate::engine::requests::CallId;
use crate::engine::server_requests::ServerRequestId;
use crate::error::CallError;
use crate::proto::mcp::{ResultType, ServerRequestKind};
use crate::proto::version::{Era, ProtocolVersion};

/// Something the host should know; drained with [`Engine::poll_event`](crate::Engine::poll_event)
/// (or [`Host::poll_event`](crate::Host::poll_event), whose events carry the many-server core's
/// own in [`Event::Client`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a, C = Infallible> {
    /// The era is settled and calls flow: the probe or handshake succeeded.
    Ready {
        /// The era the server speaks.
        era: Era,
        /// The version in use.
        version: ProtocolVersion,
    },
    /// A call completed (a tool's `isError` result is a completion too).
    CallDone {
        /// The call.
        call: CallId,
        /// Its result, valid until the next call on the engine.
        result: CallResult<'a>,
        /// What happened to the call on its way.
        record: CallRecord<'a>,
    },
    /// A call ended without a result.
    CallFailed {
        /// The call.
        call: CallId,
        /// Why.
        error: CallError,
        /// What happened to the call on its way.
        record: CallRecord<'a>,
    },
    /// A circuit breaker changed state.
    Breaker {
        /// The tenant it guards.
        tenant: u32,
        /// The kind of calls it guards.
        class: OperationClass,
        /// Its new state.
        state: BreakerState,
    },
    /// The server process died; calls that may have reached it were retried or ended by the
    /// retry policy. `restart_in` is when a new process starts (`None`: restarts are suspended
    /// because it keeps crashing: the server is degraded until the host restarts it).
    TransportLost {
        /// What happened to the process.
        error: CallError,
        /// When the next process starts.
        restart_in: Option<Duration>,
    },
    /// The server reported progress on a call that asked for it.
    Progress {
        /// The call.
        call: CallId,
        /// Progress so far.
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// A human-readable message, when sent.
        message: Option<&'a str>,
    },
    /// The server acknowledged a `subscriptions/listen` call: notifications follow until the
    /// call ends (`CallDone` for a graceful end, `CallFailed` when the stream broke, the
    /// server ended it, or the host cancelled it).
    Subscribed {
        /// The listen call.
        call: CallId,
        /// The filter the server honours (a subset of what was asked), as JSON.
        notifications: &'a str,
    },
    /// The server says a list changed (tools, prompts or resources).
    ListChanged(ListKind),
    /// The server updated a resource the client subscribed to.
    ResourceUpdated {
        /// The resource URI.
        uri: &'a str,
    },
    /// A notification the engine does not handle itself: an extension's (or a vendor's),
    /// delivered as the server sent it.
    Notification {
        /// The notification's method.
        method: &'a str,
        /// Its `params` as raw JSON (`{}` when it had none).
        params: &'a str,
    },
    /// The server asks the host for something it declared it answers (`Config::answers`):
    /// answer with [`Engine::answer`](crate::Engine::answer) or
    /// [`Host::answer`](crate::Host::answer), or reject it. A legacy request waits
    /// `Config::server_request_timeout`; an input request of a modern call waits under the
    /// call's deadline and is forgotten when the call ends.
    ServerRequest {
        /// The handle to answer with.
        request: ServerRequestId,
        /// What is asked.
        kind: ServerRequestKind,
        /// The call whose `input_required` round this is (`None`: a legacy server request).
        call: Option<CallId>,
        /// The request's `params` as JSON.
        params: &'a str,
    },
    /// The server runs a `tools/call` as a task (MCP tasks). The call stays pending: mcpoll
    /// polls the task and the call ends with the usual `CallDone` or `CallFailed`. Keep the
    /// task id to reattach after a restart ([`Engine::resume_task`](crate::Engine::resume_task)).
    TaskCreated {
        /// The call.
        call: CallId,
        /// The server's task id.
        task: &'a str,
    },
    /// A task-backed call's task changed status (or status message), as a poll reported it.
    TaskStatus {
        /// The call.
        call: CallId,
        /// The server's task id.
        task: &'a str,
        /// The new status.
        status: crate::engine::TaskStatus,
        /// The server's `statusMessage`, when it sent one.
        message: Option<&'a str>,
    },
    /// A legacy server request ended unanswered: it was not answered in time (the server was
    /// told it timed out), the server cancelled it (`notifications/cancelled`), or its
    /// transport closed. Its answer is refused from now on. Only for a request whose
    /// `ServerRequest` the host took: one that ends before then leaves no event at all.
    ServerRequestExpired {
        /// The request.
        request: ServerRequestId,
    },
    /// The connection is closed and will not come back by itself; all calls have ended.
    Closed {
        /// What closed it.
        error: CallError,
    },
    /// An event of the layer above the engine: a [`Client`](crate::Client), and so a
    /// [`Host`](crate::Host), hands out its own here ([`ClientEvent`](crate::ClientEvent):
    /// catalog changes, authorization asks). An engine on its own has none: its `C` is
    /// [`Infallible`].
    Client(C),
}

impl<'a, C> Event<'a, C> {
    /// The call's record, for `CallDone` and `CallFailed`: what an engine-only host hands to
    /// its [`RecordSink`](crate::RecordSink).
    pub fn record(&self) -> Option<&CallRecord<'a>> {
        match self {
            Self::CallDone { record, .. } | Self::CallFailed { record, .. } => Some(record),
            _ => None,
        }
    }
}

/// Which list a `list_changed` notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `notifications/tools/list_changed`.
    Tools,
    /// `notifications/prompts/list_changed`.
    Prompts,
    /// `notifications/resources/list_changed`.
    Resources,
}

/// A completed call's result: the raw JSON object, with the members mcpoll read from it.
#[derive(Debug, Clone, Copy)]
pub struct CallResult<'a> {
    json: &'a str,
    result_type: ResultType,
    is_error: bool,
}

impl<'a> CallResult<'a> {
    /// The result object as JSON text, exactly as the server sent it (for listings: the items
    /// of every page gathered under one key).
    pub fn json(&self) -> &'a str {
        self.json
    }

    /// `true` when a tool reported failure (`isError: true`). The call itself succeeded.
    pub fn is_error(&self) -> bool {
        self.is_error
    }

    /// `Complete`. (`tools/call`, `resources/read` and `prompts/get` answered with
    /// `input_required` are carried through their rounds by the engine and end complete;
    /// `InputRequired` reaches the host only from a method that has no rounds.)
    pub fn result_type(&self) -> ResultType {
        self.result_type
    }

    /// The result as a borrowed raw JSON value.
    pub fn raw(&self) -> Option<&'a RawValue> {
        serde_json::from_str(self.json).ok()
    }

    /// Deserializes the result into a type of the host's choosing (borrowing where it can).
    pub fn parse<T: Deserialize<'a>>(&self) -> serde_json::Result<T> {
        serde_json::from_str(self.json)
    }
}

/// An event as stored: borrowed data is kept as ranges into the arena.
/// A completed call in the queue. `text` is the tool name (`tool_len` bytes) followed by the
/// result.
#[derive(Debug)]
struct StoredDone {
    call: CallId,
    text: Range<usize>,
    tool_len: usize,
    result_type: ResultType,
    is_error: bool,
    record: CallRecord<'static>,
}

#[derive(Debug)]
enum Stored {
    Ready {
        era: Era,
        version: ProtocolVersion,
    },
    Done(StoredDone),
    /// `tool` is the tool name (empty when none).
    Failed {
        call: CallId,
        error: CallError,
        tool: Range<usize>,
        record: CallRecord<'static>,
    },
    Breaker {
        tenant: u32,
        class: OperationClass,
        state: BreakerState,
    },
    TransportLost {
        error: CallError,
        restart_in: Option<Duration>,
    },
    Progress {
        call: CallId,
        progress: f64,
        total: Option<f64>,
        message: Option<Range<usize>>,
    },
    ListChanged(ListKind),
    Subscribed {
        call: CallId,
        notifications: Range<usize>,
    },
    ResourceUpdated {
        uri: Range<usize>,
    },
    Notification {
        text: Range<usize>,
        method_len: usize,
    },
    Closed {
        error: CallError,
    },
    ServerRequest {
        request: ServerRequestId,
        kind: ServerRequestKind,
        call: Option<CallId>,
        params: Range<usize>,
    },
    ServerRequestExpired {
        request: ServerRequestId,
    },
    TaskCreated {
        call: CallId,
        task: Range<usize>,
    },
    /// `text` is the task id (`task_len` bytes) followed by the message.
    TaskStatus {
        call: CallId,
        text: Range<usize>,
        task_len: usize,
        status: crate::engine::TaskStatus,
        has_message: bool,
    },
}

impl Stored {
    fn is_terminal_for(&self, target: CallId) -> bool {
        matches!(self, Self::Done(StoredDone { call, .. }) | Self::Failed { call, .. } if *call == target)
    }

    fn is_terminal(&self) -> bool {
        matches!(self, Self::Done(_) | Self::Failed { .. })
    }

    /// An event of `target` before its end: its progress, its task's. (Not a subscription's
    /// acknowledgement: a catalog watch's reaches the host whoever takes the stream's end,
    /// and it is dropped past the queue's bound as any state event.)
    fn is_on_the_way_of(&self, target: CallId) -> bool {
        match self {
            Self::Progress { call, .. }
            | Self::TaskCreated { call, .. }
            | Self::TaskStatus { call, .. } => *call == target,
            _ => false,
        }
    }

    /// The arena text it refers to (each event has at most one range).
    fn range_mut(&mut self) -> Option<&mut Range<usize>> {
        match self {
            Self::Done(StoredDone { text: r, .. })
            | Self::Failed { tool: r, .. }
            | Self::Subscribed { notifications: r, .. }
            | Self::ResourceUpdated { uri: r }
            | Self::Notification { text: r, .. }
            | Self::ServerRequest { params: r, .. }
            | Self::TaskCreated { task: r, .. }
            | Self::TaskStatus { text: r, .. }
            | Self::Progress { message: Some(r), .. } => Some(r),
            _ => None,
        }
    }
}

/// Events the queue has room for from the start. It grows past that (to at most `max`) only
/// when the host leaves more undrained, and keeps the room it grew, as the arena does: the
/// room is paid for by events that piled up, not reserved for every pending call.
const INITIAL_ROOM: usize = 64;

/// Dead arena bytes tolerated before compaction, so small queues are never copied.
const COMPACT_MIN: usize = 64 * 1024;

/// The arena's room from the start.
const ARENA_START: usize = 4 * 1024;

/// The arena room kept once the queue drains; what a large result grew beyond it is freed.
const ARENA_KEEP: usize = 1024 * 1024;

/// The most text the queue holds before it drops the droppable events that bring more: a
/// server's 1,024 notifications of 16 MiB each (one per event the count allows) otherwise
/// made 16 GiB wait for a host that does not drain.
const DROPPABLE_TEXT_CAP: usize = 32 * 1024 * 1024;

#[derive(Debug)]
pub(crate) struct EventQueue {
    queue: VecDeque<Stored>,
    /// Text of the queued events' borrowed parts; a `String`, so reading it back needs no
    /// UTF-8 check. Ranges grow with queue order (text is only appended).
    arena: String,
    /// The buffer compaction copies into; the two swap, so compacting allocates nothing once
    /// both have grown to the working size.
    spare: String,
    /// Arena bytes that queued events refer to; the rest is dead.
    live: usize,
    /// `CallDone` and `CallFailed` events queued.
    terminals: usize,
    max: usize,
    pub(crate) dropped: u64,
    /// `list_changed` notifications per kind (tools, prompts, resources), queued or dropped.
    pub(crate) list_changes: [u64; 3],
    /// Breakers that opened.
    pub(crate) breaker_trips: u64,
}

impl EventQueue {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            queue: VecDeque::with_capacity(max.min(INITIAL_ROOM)),
            // The texts of a burst of ordinary events (a few replies of a few hundred bytes
            // each) fit from the start: the arena grows only for more, or larger, at once.
            arena: String::with_capacity(ARENA_START),
            spare: String::new(),
            live: 0,
            terminals: 0,
            max,
            dropped: 0,
            list_changes: [0; 3],
            breaker_trips: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// `CallDone` and `CallFailed` events waiting for the host.
    pub(crate) fn terminals(&self) -> usize {
        self.terminals
    }

    /// The queue of a removed server's engine, kept for the events it holds and nothing more:
    /// no room for events to come, and no compaction buffer of its own until one is needed.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the core's, for removed servers
    pub(crate) fn retire(mut self) -> Self {
        self.spare = String::new();
        self.queue.shrink_to_fit();
        self.arena.shrink_to_fit();
        self
    }

    /// The bytes the queue holds on the heap: its events' slots and their text.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the core's, for removed servers
    pub(crate) fn heap_bytes(&self) -> usize {
        let slots = self.queue.capacity() * std::mem::size_of::<Stored>();
        slots + self.arena.capacity() + self.spare.capacity()
    }

    /// Arena bytes in use, dead ones included (for tests of the bound).
    #[cfg(test)]
    pub(crate) fn arena_len(&self) -> usize {
        self.arena.len()
    }

    fn keep(&mut self, text: &str) -> Range<usize> {
        self.keep_pair(text, "")
    }

    /// Keeps two texts back to back as one range (one range per event keeps compaction
    /// simple): the split is the first one's length.
    fn keep_pair(&mut self, first: &str, second: &str) -> Range<usize> {
        let start = self.arena_end();
        self.arena.push_str(first);
        self.arena.push_str(second);
        self.live += first.len() + second.len();
        start..self.arena.len()
    }

    /// Where the next text goes: clears or compacts the arena first when that pays.
    fn arena_end(&mut self) -> usize {
        let dead = self.arena.len() - self.live;
        if self.queue.is_empty() {
            // Nothing refers to the arena any more. The room a large result (a listing of
            // 100,000 tools) made is given back rather than kept for the host's lifetime.
            self.arena.clear();
            self.arena.shrink_to(ARENA_KEEP);
            // So is the room of the spare one, which a compaction during the large result
            // swapped in.
            self.spare.clear();
            self.spare.shrink_to(ARENA_KEEP);
            self.live = 0;
        } else if dead > COMPACT_MIN && dead > self.live {
            self.compact();
        }
        self.arena.len()
    }

    /// Copies the queued events' text to the front of the spare buffer, in queue order, and
    /// swaps the buffers. O(live bytes), paid at most once per `live + COMPACT_MIN` appended.
    fn compact(&mut self) {
        self.spare.clear();
        for e in self.queue.iter_mut() {
            if let Some(r) = e.range_mut() {
                let start = self.spare.len();
                self.spare.push_str(self.arena.get(r.clone()).unwrap_or_default());
                *r = start..self.spare.len();
            }
        }
        std::mem::swap(&mut self.arena, &mut self.spare);
        self.live = self.arena.len();
    }

    fn push(&mut self, stored: Stored) {
        if stored.is_terminal() {
            self.terminals += 1;
        }
        self.queue.push_back(stored);
    }

    /// Accounts for an event leaving the queue.
    fn left(&mut self, stored: &mut Stored) {
        if stored.is_terminal() {
            self.terminals -= 1;
        }
        if let Some(r) = stored.range_mut() {
            self.live -= r.len();
        }
    }

    /// A state event like the others: past the bound it is dropped (a server that crashes
    /// now and then, or a legacy session made anew, is ready again each time, and a host
    /// that does not drain kept every one).
    pub(crate) fn ready(&mut self, era: Era, version: ProtocolVersion) {
        if self.has_room() {
            self.push(Stored::Ready { era, version });
        }
    }

    pub(crate) fn done(
        &mut self,
        call: CallId,
        json: &str,
        result_type: ResultType,
        is_error: bool,
        record: &CallRecord<'_>,
    ) {
        let tool = record.tool.unwrap_or_default();
        let text = self.keep_pair(tool, json);
        let (tool_len, record) = (tool.len(), record.detached());
        self.push(Stored::Done(StoredDone { call, text, tool_len, result_type, is_error, record }));
    }

    pub(crate) fn breaker(&mut self, tenant: u32, class: OperationClass, state: BreakerState) {
        // Counted even when the event is dropped: `Stats::breaker_trips` reads it.
        if state == BreakerState::Open {
            self.breaker_trips += 1;
        }
        if self.has_room() {
            self.push(Stored::Breaker { tenant, class, state });
        }
    }

    pub(crate) fn transport_lost(&mut self, error: CallError, restart_in: Option<Duration>) {
        if self.has_room() {
            self.push(Stored::TransportLost { error, restart_in });
        }
    }

    /// A listing's items from every page, wrapped as `{"<key>":[...]}`, with the pages'
    /// combined `ttlMs` and `cacheScope` when they gave any.
    pub(crate) fn done_listing(
        &mut self,
        call: CallId,
        key: &str,
        items: &[u8],
        hints: crate::engine::listing::ListHints,
        record: &CallRecord<'_>,
    ) {
        let start = self.arena_end();
        // A listing can be megabytes: room for exactly it, not a doubling past it.
        self.arena.reserve_exact(key.len() + items.len() + 8 + hints.max_len());
        self.arena.push_str("{\"");
        self.arena.push_str(key);
        self.arena.push_str("\":[");
        // Items are slices of validated frames (or serde_json output): always UTF-8.
        self.arena.push_str(std::str::from_utf8(items).unwrap_or_default());
        self.arena.push(']');
        hints.write(&mut self.arena);
        self.arena.push('}');
        let text = start..self.arena.len();
        self.live += text.len();
        let (result_type, is_error, record) = (ResultType::Complete, false, record.detached());
        let tool_len = 0;
        self.push(Stored::Done(StoredDone { call, text, tool_len, result_type, is_error, record }));
    }

    pub(crate) fn failed(&mut self, call: CallId, error: CallError, record: &CallRecord<'_>) {
        let tool = self.keep(record.tool.unwrap_or_default());
        self.push(Stored::Failed { call, error, tool, record: record.detached() });
    }

    pub(crate) fn closed(&mut self, error: CallError) {
        self.push(Stored::Closed { error });
    }

    /// Progress, change, breaker and transport-lost events are dropped, and counted, past the
    /// cap; terminal events never are (see the module docs for their bound).
    fn has_room(&mut self) -> bool {
        self.has_room_for(0)
    }

    /// [`has_room`](Self::has_room) for a droppable event that brings `text` bytes: dropped
    /// too when the queue's text would pass [`DROPPABLE_TEXT_CAP`].
    fn has_room_for(&mut self, text: usize) -> bool {
        if self.queue.len() >= self.max || self.live.saturating_add(text) > DROPPABLE_TEXT_CAP {
            self.dropped += 1;
            return false;
        }
        true
    }

    pub(crate) fn progress(
        &mut self,
        call: CallId,
        progress: f64,
        total: Option<f64>,
        msg: Option<&str>,
    ) {
        if self.has_room_for(msg.map_or(0, str::len)) {
            let message = msg.map(|m| self.keep(m));
            self.push(Stored::Progress { call, progress, total, message });
        }
    }

    pub(crate) fn list_changed(&mut self, kind: ListKind) {
        // Counted even when the event is dropped: the host's cache reads the count.
        let i = match kind {
            ListKind::Tools => 0,
            ListKind::Prompts => 1,
            ListKind::Resources => 2,
        };
        self.list_changes[i] += 1;
        if self.has_room() {
            self.push(Stored::ListChanged(kind));
        }
    }

    /// Dropped past the bound like any notification's event: a server may repeat the
    /// acknowledgement of a live subscription as often as it likes.
    pub(crate) fn subscribed(&mut self, call: CallId, notifications: &str) {
        if self.has_room_for(notifications.len()) {
            let notifications = self.keep(notifications);
            self.push(Stored::Subscribed { call, notifications });
        }
    }

    pub(crate) fn resource_updated(&mut self, uri: &str) {
        if self.has_room_for(uri.len()) {
            let uri = self.keep(uri);
            self.push(Stored::ResourceUpdated { uri });
        }
    }

    /// Dropped, as change events are, when the host does not drain events.
    pub(crate) fn notification(&mut self, method: &str, params: &str) {
        if self.has_room_for(method.len() + params.len()) {
            let text = self.keep_pair(method, params);
            self.push(Stored::Notification { text, method_len: method.len() });
        }
    }

    /// Never dropped: the server-request table bounds them.
    pub(crate) fn server_request(
        &mut self,
        request: ServerRequestId,
        kind: ServerRequestKind,
        call: Option<CallId>,
        params: &str,
    ) {
        let params = self.keep(params);
        self.push(Stored::ServerRequest { request, kind, call, params });
    }

    /// Never dropped (the host needs the id to reattach); one per call, so the pending table
    /// bounds them.
    pub(crate) fn task_created(&mut self, call: CallId, task: &str) {
        let task = self.keep(task);
        self.push(Stored::TaskCreated { call, task });
    }

    /// Dropped, as progress is, when the host does not drain events.
    pub(crate) fn task_status(
        &mut self,
        call: CallId,
        task: &str,
        status: crate::engine::TaskStatus,
        message: Option<&str>,
    ) {
        let message_len = message.map_or(0, str::len);
        if self.has_room_for(task.len() + message_len) {
            let text = self.keep_pair(task, message.unwrap_or(""));
            let has_message = message.is_some();
            self.push(Stored::TaskStatus { call, text, task_len: task.len(), status, has_message });
        }
    }

    pub(crate) fn server_request_expired(&mut self, request: ServerRequestId) {
        self.push(Stored::ServerRequestExpired { request });
    }

    pub(crate) fn pop(&mut self) -> Option<Event<'_>> {
        // As in `pop_tagged`.
        if let Some(Stored::Done(done)) = self.queue.front() {
            self.terminals -= 1;
            self.live -= done.text.len();
            let event = done_view(&self.arena, done);
            self.queue.drain(..1);
            return Some(event);
        }
        let mut stored = self.queue.pop_front()?;
        self.left(&mut stored);
        Some(self.view(stored))
    }

    /// [`pop`](Self::pop), with `tag` beside the event: the pair is built where the caller
    /// keeps it, instead of the event (304 bytes) being moved into a pair afterwards.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the host's poll_event only
    pub(crate) fn pop_tagged<T, C>(&mut self, tag: T) -> Option<(T, Event<'_, C>)> {
        // A completed call, the common event, is read where it lies and then dropped in place
        // (`drain`): moving it out of the queue first (`pop_front`) copied its 256-byte
        // record once more, and once more again to drop it.
        // The pair is made before the drain: made after it, from an event kept in a local,
        // it was built on the stack and copied twice (about 70 instructions per call).
        if let Some(Stored::Done(done)) = self.queue.front() {
            self.terminals -= 1;
            self.live -= done.text.len();
            let out = Some((tag, done_view(&self.arena, done)));
            self.queue.drain(..1);
            return out;
        }
        let mut stored = self.queue.pop_front()?;
        self.left(&mut stored);
        Some((tag, view(&self.arena, stored)))
    }

    /// [`pop`](Self::pop), with the event's text copied into `scratch` (cleared first; it
    /// keeps its capacity, so this allocates nothing once it has grown to the largest event):
    /// the event no longer borrows the queue. Read it with [`DetachedEvent::view`].
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the host's drain only
    pub(crate) fn pop_into(&mut self, scratch: &mut String) -> Option<DetachedEvent> {
        let mut stored = self.queue.pop_front()?;
        self.left(&mut stored);
        scratch.clear();
        if let Some(r) = stored.range_mut() {
            scratch.push_str(self.arena.get(r.clone()).unwrap_or_default());
            *r = 0..scratch.len();
        }
        Some(DetachedEvent(stored))
    }

    /// Removes the `ServerRequest` event of `request`, if still queued; `true` when it was.
    pub(crate) fn remove_server_request(&mut self, request: ServerRequestId) -> bool {
        let at = self
            .queue
            .iter()
            .position(|e| matches!(e, Stored::ServerRequest { request: r, .. } if *r == request));
        let Some(mut stored) = at.and_then(|i| self.queue.remove(i)) else { return false };
        self.left(&mut stored);
        true
    }

    /// A server request that left the table unanswered (withdrawn by the server, past its
    /// deadline, its server gone): a host that took its `ServerRequest` is told it expired;
    /// one that has not yet is told nothing, and the event goes. So the queued requests stay
    /// bounded by the table even for a host that never drains events (a server that asks and
    /// withdraws without end grew the queue without bound).
    pub(crate) fn server_request_withdrawn(&mut self, request: ServerRequestId) {
        if !self.remove_server_request(request) {
            self.server_request_expired(request);
        }
    }

    /// Removes the terminal event of one call, and the call's events queued before it,
    /// leaving every other event queued in order. Whoever takes a call's end out of order (a
    /// blocking helper) wants no more of that call; left queued, its events outlived the
    /// call whose pending slot bounded them (a script of blocking task calls queued a
    /// never-dropped `TaskCreated` per call, for good, and the full queue then dropped every
    /// state event), and a later `poll_event` handed progress of calls long ended.
    pub(crate) fn take_terminal(&mut self, call: CallId) -> Option<Event<'_>> {
        let mut i = self.queue.iter().position(|e| e.is_terminal_for(call))?;
        let mut j = 0;
        while j < i {
            if self.queue.get(j).is_some_and(|e| e.is_on_the_way_of(call)) {
                if let Some(mut gone) = self.queue.remove(j) {
                    self.left(&mut gone);
                }
                i -= 1;
            } else {
                j += 1;
            }
        }
        let mut stored = self.queue.remove(i)?;
        self.left(&mut stored);
        Some(self.view(stored))
    }

    fn view(&self, stored: Stored) -> Event<'_> {
        view(&self.arena, stored)
    }
}

/// An event taken out of the queue whose text lives in the caller's buffer
/// ([`EventQueue::pop_into`]).
#[derive(Debug)]
pub(crate) struct DetachedEvent(Stored);

impl DetachedEvent {
    /// The event, its text read from the buffer `pop_into` filled.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn view<C>(self, scratch: &str) -> Event<'_, C> {
        view(scratch, self.0)
    }
}

/// A `CallDone` event, its text read from `arena`.
#[inline(always)]
fn done_view<'a, C>(arena: &'a str, done: &StoredDone) -> Event<'a, C> {
    let StoredDone { call, text, tool_len, result_type, is_error, record } = done;
    let all = arena.get(text.clone()).unwrap_or_default();
    // The split is where the tool name ended: a char boundary by construction.
    let (tool, json) = (all.get(..*tool_len), all.get(*tool_len..));
    let (tool, json) = (tool.unwrap_or_default(), json.unwrap_or_default());
    let record = CallRecord { tool: (!tool.is_empty()).then_some(tool), ..*record };
    let result = CallResult { json, result_type: *result_type, is_error: *is_error };
    Event::CallDone { call: *call, result, record }
}

/// An event, its text read from `arena`.
fn view<C>(arena: &str, stored: Stored) -> Event<'_, C> {
    let text = |r: Range<usize>| arena.get(r).unwrap_or_default();
    match stored {
        Stored::Ready { era, version } => Event::Ready { era, version },
        Stored::Done(done) => done_view(arena, &done),
        Stored::Failed { call, error, tool, record } => {
            let tool = text(tool);
            let record = CallRecord { tool: (!tool.is_empty()).then_some(tool), ..record };
            Event::CallFailed { call, error, record }
        }
        Stored::Breaker { tenant, class, state } => Event::Breaker { tenant, class, state },
        Stored::TransportLost { error, restart_in } => Event::TransportLost { error, restart_in },
        Stored::Progress { call, progress, total, message } => {
            Event::Progress { call, progress, total, message: message.map(text) }
        }
        Stored::ListChanged(kind) => Event::ListChanged(kind),
        Stored::Subscribed { call, notifications } => {
            Event::Subscribed { call, notifications: text(notifications) }
        }
        Stored::ResourceUpdated { uri } => Event::ResourceUpdated { uri: text(uri) },
        Stored::Notification { text: r, method_len } => {
            let all = text(r);
            // The split is where the method ended: a char boundary by construction.
            let (method, params) = (all.get(..method_len), all.get(method_len..));
            Event::Notification {
                method: method.unwrap_or_default(),
                params: params.unwrap_or_default(),
            }
        }
        Stored::Closed { error } => Event::Closed { error },
        Stored::ServerRequest { request, kind, call, params } => {
            Event::ServerRequest { request, kind, call, params: text(params) }
        }
        Stored::ServerRequestExpired { request } => Event::ServerRequestExpired { request },
        Stored::TaskCreated { call, task } => Event::TaskCreated { call, task: text(task) },
        Stored::TaskStatus { call, text: r, task_len, status, has_message } => {
            let all = text(r);
            // The split is where the task id ended: a char boundary by construction.
            let (task, message) = (all.get(..task_len), all.get(task_len..));
            let message = message.filter(|_| has_message);
            Event::TaskStatus { call, task: task.unwrap_or_default(), status, message }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::tests::{raw, Harness};
    use crate::engine::CallOptions;
    use crate::error::{LocalError, RequestError};

    /// A blocking host takes each call's own end and leaves the rest queued: an unread event at
    /// the head used to keep the arena from ever being reset, so every result stayed in it.
    #[test]
    fn an_unread_event_at_the_head_does_not_pin_the_arena() {
        let mut h = Harness::ready_modern();
        h.peer(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        let text = "x".repeat(200);
        let mut peak = 0;
        for _ in 0..20_000 {
            let c = h.call("echo", "{}");
            let sent = h.sent_one();
            h.reply(&sent, json!({"content": [{"type": "text", "text": text}]}));
            match h.engine.take_call_event(c) {
                Some(Event::CallDone { result, .. }) => assert!(result.json().contains(&text)),
                other => panic!("{other:?}"),
            }
            peak = peak.max(h.engine.events.arena_len());
        }
        // 20,000 results of ~250 bytes are 5 MB; the arena holds one compaction's worth.
        assert!(peak <= 2 * COMPACT_MIN + 1024, "arena grew to {peak} bytes");
        assert_eq!(h.engine.queued_events(), 1);
        assert!(matches!(h.engine.poll_event(), Some(Event::ListChanged(ListKind::Tools))));
    }

    /// The room a large result made is given back from both buffers once the queue is
    /// empty: the spare one, which a compaction swapped out holding the large result's room,
    /// kept it for the host's lifetime.
    #[test]
    fn an_emptied_queue_gives_back_the_room_of_both_buffers() {
        let mut q = EventQueue::new(1 << 30);
        let call = |n: u64| CallId(crate::proto::jsonrpc::WireId::new(n as usize, 1));
        let big = "z".repeat(4 * ARENA_KEEP);
        let record = CallRecord::new(crate::Method::ToolsCall, crate::TransportKind::Stdio);
        q.resource_updated("res://pinned");
        for n in 0..3 {
            q.done(call(n), &big, ResultType::Complete, false, &record);
            assert!(q.take_terminal(call(n)).is_some());
        }
        assert!(q.pop().is_some());
        q.resource_updated("res://next");
        let room = (q.arena.capacity(), q.spare.capacity());
        assert!(room.0 <= ARENA_KEEP && room.1 <= ARENA_KEEP, "{room:?}");
    }

    /// A call's end taken out of order (a blocking helper) takes the call's own events with
    /// it: a `TaskCreated` (never dropped) stayed queued for every blocking task call, for
    /// good, and its progress reached a later `poll_event` long after it ended. Another
    /// call's events stay, in order.
    #[test]
    fn taking_a_calls_end_takes_its_own_events_with_it() {
        let mut q = EventQueue::new(4);
        let record = CallRecord::new(crate::Method::ToolsCall, crate::TransportKind::Stdio);
        let call = |n: usize| CallId(crate::proto::jsonrpc::WireId::new(n, 1));
        for n in 0..100 {
            q.task_created(call(n), "t-1");
            q.task_status(call(n), "t-1", crate::engine::TaskStatus::Working, None);
            q.progress(call(n), 0.5, None, Some("half"));
            q.done(call(n), "{}", ResultType::Complete, false, &record);
            assert!(q.take_terminal(call(n)).is_some());
        }
        assert_eq!((q.queue.len(), q.live, q.dropped), (0, 0, 0));
        q.progress(call(200), 0.1, None, None);
        q.progress(call(201), 0.2, None, None);
        q.done(call(201), "{}", ResultType::Complete, false, &record);
        assert!(q.take_terminal(call(201)).is_some());
        assert!(matches!(q.pop(), Some(Event::Progress { call: c, .. }) if c == call(200)));
        assert!(q.pop().is_none());
        // A subscription's acknowledgement stays: a catalog watch's reaches the host whoever
        // takes the stream's end.
        q.subscribed(call(300), "{}");
        q.done(call(300), "{}", ResultType::Complete, false, &record);
        assert!(q.take_terminal(call(300)).is_some());
        assert!(matches!(q.pop(), Some(Event::Subscribed { call: c, .. }) if c == call(300)));
    }

    /// Droppable events are bounded by the text they bring too: a server's notifications of
    /// megabytes each filled the queue's text up to the count's bound (16 GiB at 1,024 events
    /// of 16 MiB). A call's end is never dropped, whatever the text already queued.
    #[test]
    fn droppable_events_are_bounded_by_their_text() {
        let mut q = EventQueue::new(1024);
        let big = "p".repeat(1 << 20);
        let call = CallId(crate::proto::jsonrpc::WireId::new(1, 1));
        for _ in 0..100 {
            q.notification("x/vendor", &big);
            q.resource_updated(&big);
            // A task's status message is the server's text too (a statusMessage of
            // megabytes on every poll was queued past the cap).
            q.task_status(call, "t-1", crate::engine::TaskStatus::Working, Some(&big));
        }
        assert!(q.live <= DROPPABLE_TEXT_CAP, "{}", q.live);
        assert!(q.dropped > 0);
        let record = CallRecord::new(crate::Method::ToolsCall, crate::TransportKind::Stdio);
        q.done(call, &big, ResultType::Complete, false, &record);
        assert!(q.take_terminal(call).is_some(), "a call's end is kept");
    }

    #[test]
    fn compaction_keeps_every_queued_events_text() {
        let mut q = EventQueue::new(1 << 20);
        let call = |n: u64| CallId(crate::proto::jsonrpc::WireId::new(n as usize, 1));
        let big = "y".repeat(COMPACT_MIN);
        q.resource_updated("res://first");
        // Taken in the middle: dead text piles up behind the first event until compaction.
        for n in 0..4 {
            q.done(
                call(n),
                &big,
                ResultType::Complete,
                false,
                &CallRecord::new(crate::Method::ToolsCall, crate::TransportKind::Stdio),
            );
            assert!(q.take_terminal(call(n)).is_some());
        }
        q.done(
            call(9),
            "{\"k\":9}",
            ResultType::Complete,
            false,
            &CallRecord::new(crate::Method::ToolsCall, crate::TransportKind::Stdio),
        );
        assert!(q.arena_len() < 2 * COMPACT_MIN + 64, "compacted: {}", q.arena_len());
        assert!(matches!(q.pop(), Some(Event::ResourceUpdated { uri: "res://first" })));
        match q.pop() {
            Some(Event::CallDone { call: c, result, .. }) => {
                assert_eq!((c, result.json()), (call(9), "{\"k\":9}"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!((q.len(), q.terminals(), q.live), (0, 0, 0));
    }

    /// The host's path takes a completed call where it lies in the queue: the event reads the
    /// same as through `pop`, and the queue forgets its text and its terminal count.
    #[test]
    fn a_completed_call_taken_with_its_server_tag_leaves_the_queue_accounted() {
        let mut q = EventQueue::new(64);
        let call = |n: u64| CallId(crate::proto::jsonrpc::WireId::new(n as usize, 1));
        let mut record = CallRecord::new(crate::Method::ToolsCall, crate::TransportKind::Stdio);
        record.tool = Some("echo");
        record.attempts = 2;
        q.done(call(1), "{\"k\":1}", ResultType::Complete, true, &record);
        q.resource_updated("res://after");
        assert_eq!(q.terminals(), 1);
        match q.pop_tagged::<_, Infallible>("server") {
            Some(("server", Event::CallDone { call: c, result, record })) => {
                assert_eq!((c, result.json(), result.is_error()), (call(1), "{\"k\":1}", true));
                assert_eq!((record.tool, record.attempts), (Some("echo"), 2));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!((q.len(), q.terminals(), q.live), (1, 0, "res://after".len()));
        assert!(matches!(
            q.pop_tagged::<_, Infallible>(7),
            Some((7, Event::ResourceUpdated { uri: "res://after" }))
        ));
        assert_eq!((q.len(), q.terminals(), q.live), (0, 0, 0));
        assert!(q.pop_tagged::<_, Infallible>(()).is_none());
    }

    /// A record's tool name is kept in the arena beside the result (or alone, for a failure):
    /// compaction must move both with their event.
    #[test]
    fn records_keep_their_tool_names_through_compaction() {
        let mut q = EventQueue::new(1 << 20);
        let call = |n: u64| CallId(crate::proto::jsonrpc::WireId::new(n as usize, 1));
        let mut record = CallRecord::new(crate::Method::ToolsCall, crate::TransportKind::Stdio);
        record.tool = Some("first-tool");
        q.failed(call(1), CallError::Local(LocalError::Cancelled), &record);
        let big = "y".repeat(COMPACT_MIN);
        for n in 2..6 {
            q.done(call(n), &big, ResultType::Complete, false, &record);
            assert!(q.take_terminal(call(n)).is_some());
        }
        record.tool = Some("last-tool");
        q.done(call(9), "{\"k\":9}", ResultType::Complete, true, &record);
        assert!(q.arena_len() < 2 * COMPACT_MIN + 64, "compacted: {}", q.arena_len());
        match q.pop() {
            Some(Event::CallFailed { record, .. }) => assert_eq!(record.tool, Some("first-tool")),
            other => panic!("{other:?}"),
        }
        match q.pop() {
            Some(Event::CallDone { result, record, .. }) => {
                assert_eq!((record.tool, result.json()), (Some("last-tool"), "{\"k\":9}"));
                assert!(result.is_error());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!((q.len(), q.terminals(), q.live), (0, 0, 0));
    }

    /// Terminal events are never dropped; they are bounded by refusing new calls while the
    /// host leaves them undrained.
    #[test]
    fn terminal_events_are_bounded_at_admission_and_never_dropped() {
        let mut h =
            Harness::ready_with(crate::Config { max_queued_events: 3, ..Default::default() });
        let opts = CallOptions::timeout(std::time::Duration::from_secs(1));
        let calls: Vec<CallId> =
            (0..3).map(|_| h.engine.call_tool(h.now, "t", raw("{}"), &opts).unwrap()).collect();
        assert_eq!(
            h.engine.call_tool(h.now, "t", raw("{}"), &opts),
            Err(RequestError::Overloaded),
            "three pending calls will end in three events: the queue holds three"
        );
        let sent = h.take_sent();
        h.reply(&sent[0], json!({"content": []}));
        // Progress and change notifications are what gets dropped.
        for _ in 0..5 {
            h.peer(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        }
        h.advance(std::time::Duration::from_secs(2));
        assert_eq!(
            h.engine.call_tool(h.now, "t", raw("{}"), &opts),
            Err(RequestError::Overloaded),
            "still three ends undrained"
        );
        let mut ended = Vec::new();
        while let Some(e) = h.engine.poll_event() {
            match e {
                Event::CallDone { call, .. } => ended.push((call, "done")),
                Event::CallFailed { call, error, .. } => {
                    assert_eq!(error, crate::CallError::Local(LocalError::DeadlineExceeded));
                    ended.push((call, "failed"));
                }
                Event::ListChanged(_) => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(ended, [(calls[0], "done"), (calls[1], "failed"), (calls[2], "failed")]);
        assert!(h.engine.stats().events_dropped >= 3);
        assert!(h.engine.call_tool(h.now, "t", raw("{}"), &opts).is_ok(), "drained: room again");
    }
}
