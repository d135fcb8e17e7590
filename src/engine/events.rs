//! Events the engine hands the host, and the queue that holds them.
//!
//! Result bytes are copied once into an arena that is reset when the queue drains, so an event
//! can hand out borrowed JSON without a per-call allocation.

use std::collections::VecDeque;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

use std::time::Duration;

use crate::engine::breaker::{BreakerState, OperationClass};
use crate::engine::requests::CallId;
use crate::error::CallError;
use crate::proto::mcp::ResultType;
use crate::proto::version::{Era, ProtocolVersion};

/// Something the host should know; drained with [`Engine::poll_event`](crate::Engine::poll_event).
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a> {
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
        /// Attempts, queue wait, time taken.
        record: CallRecord,
    },
    /// A call ended without a result.
    CallFailed {
        /// The call.
        call: CallId,
        /// Why.
        error: CallError,
        /// Attempts, queue wait, time taken.
        record: CallRecord,
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
    /// The connection is closed and will not come back by itself; all calls have ended.
    Closed {
        /// What closed it.
        error: CallError,
    },
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

/// What happened to a call on its way: how many attempts it took, how long it waited behind the
/// in-flight limit, and how long it took in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallRecord {
    /// Attempts written (0 when it ended before being sent).
    pub attempts: u32,
    /// Time spent queued before the first attempt was written.
    pub queue_wait: Duration,
    /// Time from the call to its end.
    pub elapsed: Duration,
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

    /// `Complete`, or `InputRequired` for a multi round-trip interim result.
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
#[derive(Debug)]
enum Stored {
    Ready {
        era: Era,
        version: ProtocolVersion,
    },
    Done {
        call: CallId,
        json: Range<usize>,
        result_type: ResultType,
        is_error: bool,
        record: CallRecord,
    },
    Failed {
        call: CallId,
        error: CallError,
        record: CallRecord,
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
    Closed {
        error: CallError,
    },
}

impl Stored {
    fn is_terminal_for(&self, target: CallId) -> bool {
        matches!(self, Self::Done { call, .. } | Self::Failed { call, .. } if *call == target)
    }
}

#[derive(Debug)]
pub(crate) struct EventQueue {
    queue: VecDeque<Stored>,
    /// Text of the queued events' borrowed parts; a `String`, so reading it back needs no
    /// UTF-8 check.
    arena: String,
    max: usize,
    pub(crate) dropped: u64,
}

impl EventQueue {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            queue: VecDeque::with_capacity(max.min(4096)),
            arena: String::new(),
            max,
            dropped: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    fn keep(&mut self, text: &str) -> Range<usize> {
        if self.queue.is_empty() {
            // Nothing refers to the arena any more.
            self.arena.clear();
        }
        let start = self.arena.len();
        self.arena.push_str(text);
        start..self.arena.len()
    }

    pub(crate) fn ready(&mut self, era: Era, version: ProtocolVersion) {
        self.queue.push_back(Stored::Ready { era, version });
    }

    pub(crate) fn done(
        &mut self,
        call: CallId,
        json: &str,
        result_type: ResultType,
        is_error: bool,
        record: CallRecord,
    ) {
        let json = self.keep(json);
        self.queue.push_back(Stored::Done { call, json, result_type, is_error, record });
    }

    pub(crate) fn breaker(&mut self, tenant: u32, class: OperationClass, state: BreakerState) {
        self.queue.push_back(Stored::Breaker { tenant, class, state });
    }

    pub(crate) fn transport_lost(&mut self, error: CallError, restart_in: Option<Duration>) {
        self.queue.push_back(Stored::TransportLost { error, restart_in });
    }

    /// A listing's items from every page, wrapped as `{"<key>":[...]}`.
    pub(crate) fn done_listing(
        &mut self,
        call: CallId,
        key: &str,
        items: &[u8],
        record: CallRecord,
    ) {
        let start = self.keep("{\"");
        self.arena.push_str(key);
        self.arena.push_str("\":[");
        // Items are slices of validated frames (or serde_json output): always UTF-8.
        self.arena.push_str(std::str::from_utf8(items).unwrap_or_default());
        self.arena.push_str("]}");
        let json = start.start..self.arena.len();
        let (result_type, is_error) = (ResultType::Complete, false);
        self.queue.push_back(Stored::Done { call, json, result_type, is_error, record });
    }

    pub(crate) fn failed(&mut self, call: CallId, error: CallError, record: CallRecord) {
        self.queue.push_back(Stored::Failed { call, error, record });
    }

    pub(crate) fn closed(&mut self, error: CallError) {
        self.queue.push_back(Stored::Closed { error });
    }

    /// Progress and change notifications are dropped, and counted, past the cap; terminal
    /// events never are.
    fn has_room(&mut self) -> bool {
        if self.queue.len() >= self.max {
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
        if self.has_room() {
            let message = msg.map(|m| self.keep(m));
            self.queue.push_back(Stored::Progress { call, progress, total, message });
        }
    }

    pub(crate) fn list_changed(&mut self, kind: ListKind) {
        if self.has_room() {
            self.queue.push_back(Stored::ListChanged(kind));
        }
    }

    pub(crate) fn subscribed(&mut self, call: CallId, notifications: &str) {
        let notifications = self.keep(notifications);
        self.queue.push_back(Stored::Subscribed { call, notifications });
    }

    pub(crate) fn resource_updated(&mut self, uri: &str) {
        if self.has_room() {
            let uri = self.keep(uri);
            self.queue.push_back(Stored::ResourceUpdated { uri });
        }
    }

    pub(crate) fn pop(&mut self) -> Option<Event<'_>> {
        let stored = self.queue.pop_front()?;
        Some(self.view(stored))
    }

    /// Removes the terminal event of one call, leaving every other event queued in order.
    pub(crate) fn take_terminal(&mut self, call: CallId) -> Option<Event<'_>> {
        let i = self.queue.iter().position(|e| e.is_terminal_for(call))?;
        let stored = self.queue.remove(i)?;
        Some(self.view(stored))
    }

    fn view(&self, stored: Stored) -> Event<'_> {
        let text = |r: Range<usize>| self.arena.get(r).unwrap_or_default();
        match stored {
            Stored::Ready { era, version } => Event::Ready { era, version },
            Stored::Done { call, json, result_type, is_error, record } => Event::CallDone {
                call,
                result: CallResult { json: text(json), result_type, is_error },
                record,
            },
            Stored::Failed { call, error, record } => Event::CallFailed { call, error, record },
            Stored::Breaker { tenant, class, state } => Event::Breaker { tenant, class, state },
            Stored::TransportLost { error, restart_in } => {
                Event::TransportLost { error, restart_in }
            }
            Stored::Progress { call, progress, total, message } => {
                Event::Progress { call, progress, total, message: message.map(text) }
            }
            Stored::ListChanged(kind) => Event::ListChanged(kind),
            Stored::Subscribed { call, notifications } => {
                Event::Subscribed { call, notifications: text(notifications) }
            }
            Stored::ResourceUpdated { uri } => Event::ResourceUpdated { uri: text(uri) },
            Stored::Closed { error } => Event::Closed { error },
        }
    }
}
