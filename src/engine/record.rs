//! Call records: what happened to one call, for logs, metrics and traces, and the sink that
//! takes them.
//!
//! The engine fills every field it knows when a call ends, and the record travels in the
//! call's terminal event (`CallDone`/`CallFailed`). A [`Host`](crate::Host) adds what only it
//! knows (the server's name, the capability cache's hits) and hands each record to its
//! [`RecordSink`]; a host driving an [`Engine`](crate::Engine) itself reads
//! [`Event::record`](crate::Event::record) and calls its sink the same way.
//!
//! # What a record never holds
//!
//! Arguments, results, tokens, root URIs and resource URIs: a record names the method and the
//! tool, and carries counts, durations, ids and error names. Its strings borrow from the engine
//! or host, so building one and handing it to a sink allocates nothing.

use std::time::Duration;

use crate::engine::requests::CallId;
use crate::engine::transport::TransportKind;
use crate::error::{CallError, LocalError};
use crate::proto::jsonrpc::WireId;
use crate::proto::mcp::Method;
use crate::proto::trace::TraceId;
use crate::proto::version::ProtocolVersion;

/// What happened to one call on its way: where it went, how many attempts it took, where the
/// time went, and how it ended. Strings are borrowed: copy out what you keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallRecord<'a> {
    /// The call's handle (`None` for a listing the capability cache answered itself).
    pub call: Option<CallId>,
    /// The server's name in its [`Host`](crate::Host) (`None` from an engine on its own).
    pub server: Option<&'a str>,
    /// The principal whose lane carried the call ([`Host::lane`](crate::Host::lane)); `None`
    /// for the server's own context (and from an engine on its own).
    pub principal: Option<&'a str>,
    /// The W3C trace id of the call's `traceparent`, when it gave one.
    pub trace_id: Option<TraceId>,
    /// The run or task the call belongs to ([`CallOptions::run_id`](crate::CallOptions)).
    pub run_id: Option<u64>,
    /// How the server is reached.
    pub transport: TransportKind,
    /// The protocol version in use when the call ended (`None` before the era was settled).
    pub version: Option<ProtocolVersion>,
    /// The JSON-RPC id of the last attempt written (`None` when nothing was written).
    pub request_id: Option<WireId>,
    /// The method.
    pub method: Method,
    /// The tool's name, for `tools/call`; the method's name, for an extension request
    /// ([`Method::Extension`]).
    pub tool: Option<&'a str>,
    /// Requests written for the call: each attempt, and each further page of a listing or
    /// `input_required` round (0 when it ended before being sent).
    pub attempts: u32,
    /// Time spent queued: before the first attempt was written (behind
    /// `Config::max_in_flight`, or until the server was ready; without the time held for
    /// authorization), and, over HTTP, between each attempt's write and its connection (all
    /// `HttpOptions::max_connections` busy). Not part of `network`.
    pub queue_wait: Duration,
    /// Time the call was held unsent for the host's authorization answer
    /// ([`CallOptions::hold`](crate::CallOptions::hold)).
    pub authorization_wait: Duration,
    /// Time between writing each attempt (or page, or round) and its reply or failure, summed:
    /// the network and the server's work, without queueing and backoff.
    pub network: Duration,
    /// Time from the call to its end.
    pub elapsed: Duration,
    /// `input_required` rounds answered on the way (each one a retry with `inputResponses`).
    pub rounds: u32,
    /// The capability cache answered (a listing served without a request).
    pub cache_hit: bool,
    /// With `cache_hit`: how long ago the served catalog was fetched.
    pub cache_age: Option<Duration>,
    /// The host cancelled the call.
    pub cancelled: bool,
    /// The failure was transient (an exit, reset, refused connection, HTTP 408/429/5xx): the
    /// same call may succeed later, if it is safe to send again.
    pub retryable: bool,
    /// The failure's kind ([`CallError::kind`]): `protocol`, `peer`, `transport` or `local`.
    pub error_kind: Option<&'static str>,
    /// The failure's snake_case name ([`CallError::name`]), e.g. `deadline_exceeded`.
    pub error_name: Option<&'static str>,
    /// The JSON-RPC error code, when the server answered with an error.
    pub error_code: Option<i64>,
    /// The call completed with a tool's `isError: true` result.
    pub tool_error: bool,
}

impl<'a> CallRecord<'a> {
    /// A record of a call of `method` that has not happened yet: every count zero.
    pub(crate) fn new(method: Method, transport: TransportKind) -> Self {
        Self {
            call: None,
            server: None,
            principal: None,
            trace_id: None,
            run_id: None,
            transport,
            version: None,
            request_id: None,
            method,
            tool: None,
            attempts: 0,
            queue_wait: Duration::ZERO,
            authorization_wait: Duration::ZERO,
            network: Duration::ZERO,
            elapsed: Duration::ZERO,
            rounds: 0,
            cache_hit: false,
            cache_age: None,
            cancelled: false,
            retryable: false,
            error_kind: None,
            error_name: None,
            error_code: None,
            tool_error: false,
        }
    }

    /// Fills the failure fields from the error.
    pub(crate) fn failed(&mut self, error: &CallError) {
        self.cancelled = matches!(error, CallError::Local(LocalError::Cancelled));
        self.retryable = crate::engine::retry::is_transient(error);
        self.error_kind = Some(error.kind());
        self.error_name = Some(error.name());
        self.error_code = match error {
            CallError::Protocol(e) => Some(e.code),
            _ => None,
        };
    }

    /// The same record with its borrowed strings dropped (for storage; they are kept apart).
    pub(crate) fn detached(self) -> CallRecord<'static> {
        CallRecord { server: None, principal: None, tool: None, ..self }
    }

    /// The record with the server's name set.
    pub fn with_server<'b>(self, server: &'b str) -> CallRecord<'b>
    where
        'a: 'b,
    {
        CallRecord { server: Some(server), ..self }
    }

    /// The record with the server's name and the lane's principal set.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the host's records only
    pub(crate) fn with_context<'b>(
        self,
        server: &'b str,
        principal: Option<&'b str>,
    ) -> CallRecord<'b>
    where
        'a: 'b,
    {
        CallRecord { server: Some(server), principal, ..self }
    }
}

/// Where call records go. Implementing it needs no allocation: the record borrows its strings
/// and is valid for the call only.
///
/// Install one with [`Host::set_record_sink`](crate::Host::set_record_sink); a closure
/// `FnMut(&CallRecord<'_>)` is a sink too. A sink runs inside the host's calls: keep it short
/// (count, or copy into a buffer you drain elsewhere).
pub trait RecordSink {
    /// Takes one record.
    fn record(&mut self, record: &CallRecord<'_>);
}

impl<F: FnMut(&CallRecord<'_>)> RecordSink for F {
    fn record(&mut self, record: &CallRecord<'_>) {
        self(record)
    }
}

/// Calls that ended without a result, by the kind of their error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FailureCounts {
    /// The server answered with a JSON-RPC error.
    pub protocol: u64,
    /// The server broke the protocol or refused access.
    pub peer: u64,
    /// The transport failed.
    pub transport: u64,
    /// mcpoll ended the call (cancelled, deadline, breaker, delivery unknown, ...).
    pub local: u64,
    /// Of `local`: cancelled by the host.
    pub cancelled: u64,
    /// Of `local`: past the deadline.
    pub deadline_exceeded: u64,
    /// Of `local`: refused by the host's authorization policy, never sent.
    pub authorization_denied: u64,
}

impl FailureCounts {
    pub(crate) fn count(&mut self, error: &CallError) {
        match error {
            CallError::Protocol(_) => self.protocol += 1,
            CallError::Peer(_) => self.peer += 1,
            CallError::Transport(_) => self.transport += 1,
            CallError::Local(l) => {
                self.local += 1;
                match l {
                    LocalError::Cancelled => self.cancelled += 1,
                    LocalError::DeadlineExceeded => self.deadline_exceeded += 1,
                    LocalError::AuthorizationDenied(_) => self.authorization_denied += 1,
                    _ => {}
                }
            }
        }
    }

    /// Failures of every kind.
    pub fn total(&self) -> u64 {
        self.protocol + self.peer + self.transport + self.local
    }
}
