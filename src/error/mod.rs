//! Typed errors, in four kinds that never blur.
//!
//! * [`RpcError`]: the peer answered with a JSON-RPC error object (protocol).
//! * [`PeerError`]: the peer broke the protocol or refused access (a bad result, a message
//!   over the size limit, authorization required, no version in common).
//! * [`TransportError`]: the pipe or socket failed (process exit, reset, ...).
//! * [`LocalError`]: mcpoll itself ended the call (cancelled, deadline, overloaded, ...).
//!
//! A tool's `isError: true` result is not an error at all: it is a completed call.

use std::fmt;
use std::io;
use std::sync::Arc;

use crate::proto::challenge::AuthChallenge;

/// The OAuth flow's errors.
#[cfg(feature = "http")]
pub(crate) mod oauth;

/// Why a call ended without a result.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// The server answered with a JSON-RPC error.
    Protocol(RpcError),
    /// The server broke the protocol or refused access.
    Peer(PeerError),
    /// The transport failed before the answer arrived.
    Transport(TransportError),
    /// mcpoll ended the call (the server may or may not have acted on it).
    Local(LocalError),
}

impl CallError {
    /// The kind as a short word: `protocol`, `peer`, `transport` or `local`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Protocol(_) => "protocol",
            Self::Peer(_) => "peer",
            Self::Transport(_) => "transport",
            Self::Local(_) => "local",
        }
    }

    /// The variant name in snake_case, stable for scripts (`deadline_exceeded`, `process_exit`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Protocol(e) => e.name(),
            Self::Peer(e) => e.name(),
            Self::Transport(e) => e.name(),
            Self::Local(e) => e.name(),
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Protocol(e) => write!(f, "server error: {e}"),
            Self::Peer(e) => write!(f, "server fault: {e}"),
            Self::Transport(e) => write!(f, "transport error: {e}"),
            Self::Local(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CallError {}

impl From<PeerError> for CallError {
    fn from(e: PeerError) -> Self {
        Self::Peer(e)
    }
}

impl From<LocalError> for CallError {
    fn from(e: LocalError) -> Self {
        Self::Local(e)
    }
}

impl From<CallError> for std::io::Error {
    fn from(e: CallError) -> Self {
        let kind = match &e {
            CallError::Local(LocalError::DeadlineExceeded) => std::io::ErrorKind::TimedOut,
            CallError::Transport(_) => std::io::ErrorKind::BrokenPipe,
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, e)
    }
}

/// A JSON-RPC error object sent by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The JSON-RPC error code (for example -32602).
    pub code: i64,
    /// The server's message, as sent.
    pub message: Box<str>,
    /// The raw `error.data` member, when present.
    pub data: Option<Box<str>>,
}

impl RpcError {
    /// -32700: the server could not parse what we sent.
    pub const PARSE_ERROR: i64 = -32700;
    /// -32600: the request was not a valid JSON-RPC request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// -32601: the method does not exist or its capability was not advertised.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// -32602: bad arguments, unknown tool or prompt, bad cursor, resource not found (2026).
    pub const INVALID_PARAMS: i64 = -32602;
    /// -32603: the server failed internally.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// -32002: resource not found (2025-11-25 servers).
    pub const RESOURCE_NOT_FOUND_LEGACY: i64 = -32002;
    /// -32020: HTTP headers do not match the body (2026-07-28).
    pub const HEADER_MISMATCH: i64 = -32020;
    /// -32021: the request lacks a client capability the server needs (2026-07-28).
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// -32022: the protocol version named in `_meta` is not supported (2026-07-28).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

    pub(crate) fn from_raw(
        code: i64,
        message: &str,
        data: Option<crate::proto::json::RawJson<'_>>,
    ) -> Self {
        Self { code, message: message.into(), data: data.map(|d| d.text().into()) }
    }

    /// A snake_case name for the code, for scripts and logs.
    pub fn name(&self) -> &'static str {
        match self.code {
            Self::PARSE_ERROR => "parse_error",
            Self::INVALID_REQUEST => "invalid_request",
            Self::METHOD_NOT_FOUND => "method_not_found",
            Self::INVALID_PARAMS => "invalid_params",
            Self::INTERNAL_ERROR => "internal_error",
            Self::RESOURCE_NOT_FOUND_LEGACY => "resource_not_found",
            Self::HEADER_MISMATCH => "header_mismatch",
            Self::MISSING_REQUIRED_CLIENT_CAPABILITY => "missing_required_client_capability",
            Self::UNSUPPORTED_PROTOCOL_VERSION => "unsupported_protocol_version",
            _ => "server_error",
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// The transport failed; the call's fate on the server is not known.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportError {
    /// The server process exited (or closed its stdout).
    ProcessExit(ProcessExit),
    /// The transport closed for another reason (the host closed it, its process could not be
    /// started again).
    Closed(CloseReason),
    /// The server answered with an HTTP status and no JSON-RPC reply.
    HttpStatus(u16),
    /// The connection broke (reset, EOF, truncated response) before the reply arrived.
    ConnectionLost,
    /// The connection could not be made (refused, unreachable, name not resolved).
    ConnectFailed(std::io::ErrorKind),
    /// The HTTP proxy would not open a tunnel to the server: its status to `CONNECT` (407:
    /// it wants credentials; 403: the server is not allowed; 502 or 503: it could not reach
    /// the server). Nothing reached the server.
    ProxyRefused(u16),
    /// The TLS handshake or certificate check failed.
    Tls(TlsFailure),
    /// The response broke the HTTP or SSE framing (bad head, bad chunk, event too large).
    BadResponse,
    /// The legacy session was gone and re-initializing did not help.
    SessionExpired,
    /// The server ended the stream itself (stdio: a server-sent `notifications/cancelled` for
    /// a subscription).
    ClosedByServer,
}

/// Why TLS failed, without naming the TLS library's types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsFailure {
    /// The certificate is not for this host name.
    WrongHostName,
    /// The certificate chain does not lead to a trusted root.
    UnknownIssuer,
    /// The certificate is expired or not yet valid.
    Expired,
    /// Another certificate problem.
    BadCertificate,
    /// The handshake failed for another reason.
    Handshake,
}

impl TransportError {
    /// A snake_case name for scripts.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ProcessExit(_) => "process_exit",
            Self::Closed(_) => "closed",
            Self::HttpStatus(_) => "http_status",
            Self::ConnectionLost => "connection_lost",
            Self::ConnectFailed(_) => "connect_failed",
            Self::ProxyRefused(_) => "proxy_refused",
            Self::Tls(_) => "tls",
            Self::BadResponse => "bad_response",
            Self::SessionExpired => "session_expired",
            Self::ClosedByServer => "closed_by_server",
        }
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ProcessExit(e) => write!(f, "{e}"),
            Self::Closed(r) => write!(f, "transport closed: {r}"),
            Self::HttpStatus(s) => write!(f, "HTTP status {s} without a JSON-RPC reply"),
            Self::ConnectionLost => f.write_str("connection lost before the reply"),
            // Connecting never fails with `NotFound`: the resolver's failure does.
            Self::ConnectFailed(std::io::ErrorKind::NotFound) => {
                f.write_str("could not connect: the host name did not resolve")
            }
            Self::ConnectFailed(k) => write!(f, "could not connect: {k}"),
            Self::ProxyRefused(s) => write!(f, "the HTTP proxy refused the tunnel with status {s}"),
            Self::Tls(t) => write!(f, "TLS failed: {t:?}"),
            Self::BadResponse => f.write_str("malformed HTTP response"),
            Self::SessionExpired => {
                f.write_str("the server's session expired and could not be renewed")
            }
            Self::ClosedByServer => f.write_str("the server ended the stream"),
        }
    }
}

/// How a server process ended, with the last of what it wrote to stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessExit {
    /// The exit code, when it exited normally.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// The tail of its stderr (bounded by `Config::stderr_tail_bytes`), lossily decoded.
    pub stderr_tail: Arc<str>,
}

impl fmt::Display for ProcessExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "server process exited with code {c}")?,
            (None, Some(s)) => write!(f, "server process killed by signal {s}")?,
            (None, None) => write!(f, "server process closed its output")?,
        }
        let tail = self.stderr_tail.trim_end();
        if !tail.is_empty() {
            let last = tail.lines().last().unwrap_or_default();
            write!(f, "; last stderr line: {last}")?;
        }
        Ok(())
    }
}

/// Why a transport closed, when no process exit explains it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// The host closed the server.
    Host,
    /// Writing to the server failed (broken pipe). This crate's drivers do not report it (a
    /// stdio write or read that fails ends as the process's exit, `ProcessExit`): it is for a
    /// transport of the program's own, told with `Engine::handle_transport`.
    WriteFailed,
    /// Reading from the server failed; as [`WriteFailed`](Self::WriteFailed), for a
    /// transport of the program's own.
    ReadFailed,
    /// The server could not be started (again, after an exit): the kind of the error that
    /// starting its process failed with (`NotFound` for a program or working directory that
    /// is gone, `PermissionDenied`, a full process or descriptor table).
    SpawnFailed(io::ErrorKind),
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Host => "closed by the host",
            Self::WriteFailed => "write to the server failed",
            Self::ReadFailed => "read from the server failed",
            Self::SpawnFailed(kind) => {
                return write!(f, "the server could not be started: {kind}");
            }
        })
    }
}

/// The server broke the protocol or refused access: retrying the same thing will not help.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerError {
    /// The server wants (other) credentials: HTTP 401 even after asking the token provider
    /// for a fresh token. Carries the server's `WWW-Authenticate` Bearer parameters.
    AuthRequired(Box<AuthChallenge>),
    /// The server refused the credentials (HTTP 403).
    Forbidden(Box<AuthChallenge>),
    /// The server refused the request and the OAuth flow configured for it could not get a
    /// token it accepts: the error names the step that failed.
    #[cfg(feature = "http")]
    Authorization(Box<oauth::AuthError>),
    /// A message from the server exceeded `Config::max_message_bytes`, or a listing's pages
    /// together exceeded `Config::max_listing_bytes`.
    TooLarge,
    /// The result is not what the method returns (for example an unknown `resultType`).
    InvalidResult,
    /// The reply is JSON nested deeper than mcpoll reads (127 levels).
    TooDeep,
    /// A paginated listing returned a cursor it had already returned.
    CursorRepeated,
    /// No protocol version is common to the server and mcpoll.
    NoCommonVersion,
    /// The server answered `-32022` to this version twice while listing it as supported.
    VersionRefused(crate::proto::version::ProtocolVersion),
    /// An `input_required` result asked for a kind of input the client did not declare
    /// (`Config::answers`), or for an unknown method.
    UndeclaredInputRequest(String),
    /// The task that carried the call ended `cancelled` on the server (not by this client's
    /// cancel, which ends the call at once).
    TaskCancelled,
}

impl PeerError {
    /// A snake_case name for scripts.
    pub fn name(&self) -> &'static str {
        match self {
            Self::AuthRequired(_) => "auth_required",
            Self::Forbidden(_) => "forbidden",
            #[cfg(feature = "http")]
            Self::Authorization(_) => "authorization",
            Self::TooLarge => "too_large",
            Self::InvalidResult => "invalid_result",
            Self::TooDeep => "too_deep",
            Self::CursorRepeated => "cursor_repeated",
            Self::NoCommonVersion => "no_common_version",
            Self::VersionRefused(_) => "version_refused",
            Self::UndeclaredInputRequest(_) => "undeclared_input_request",
            Self::TaskCancelled => "task_cancelled",
        }
    }
}

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AuthRequired(_) => f.write_str("the server requires authorization"),
            Self::Forbidden(_) => f.write_str("the server refused the credentials"),
            #[cfg(feature = "http")]
            Self::Authorization(e) => write!(f, "{e}"),
            Self::TooLarge => f.write_str("message too large"),
            Self::InvalidResult => f.write_str("the result is not valid for its method"),
            Self::TooDeep => f.write_str("reply nested more than 127 levels deep"),
            Self::CursorRepeated => f.write_str("server repeated a pagination cursor"),
            Self::NoCommonVersion => f.write_str("no protocol version in common with the server"),
            Self::VersionRefused(v) => write!(
                f,
                "the server refused protocol version {v} twice (-32022) while listing it as \
                 supported"
            ),
            Self::UndeclaredInputRequest(m) => {
                write!(f, "the server asked for input the client did not declare ({m})")
            }
            Self::TaskCancelled => f.write_str("the server cancelled the call's task"),
        }
    }
}

/// mcpoll ended the call itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LocalError {
    /// The request may have reached the server, its reply was lost, and re-sending it is not
    /// safe (not read-only, not idempotent, no idempotency key): check before re-sending.
    DeliveryUnknown(Box<TransportError>),
    /// The circuit breaker for this kind of call is open: failing fast.
    BreakerOpen,
    /// The server's process keeps crashing; restarts are suspended. Holds why the first
    /// process of the crash loop ended (its exit status and stderr tail), when known.
    Degraded(Option<Box<TransportError>>),
    /// The host cancelled the call. The server was told; nothing is promised about side effects.
    Cancelled,
    /// The call's deadline passed before an answer arrived.
    DeadlineExceeded,
    /// A paginated listing went past `Config::max_pages`.
    TooManyPages,
    /// The server failed the era probe and the handshake.
    HandshakeFailed,
    /// The server asked for input more than `Config::max_input_rounds` times.
    TooManyInputRounds,
    /// The host rejected an input request of this call, so it was not retried.
    InputRejected,
    /// `Config::max_server_requests` server requests were already waiting for the host.
    TooManyServerRequests,
    /// The server asked for something of this kind (an elicitation, a sampling call, the
    /// roots) while a blocking helper waited for the call, and no answer handler
    /// (`Host::set_answer_handler`) answered it: nobody could, so the call ended at once.
    Unanswered(crate::proto::mcp::ServerRequestKind),
    /// The OAuth flow cannot run with the host's configuration (no client identity for this
    /// authorization server, a grant without its secret or key, a server URL that is not an
    /// absolute http(s) URL, a flow that needs a user and no `Authorizer`): fix the
    /// configuration; the server is not at fault.
    #[cfg(feature = "http")]
    OAuthSetup(Box<oauth::AuthError>),
    /// The method does not exist in the protocol era the server settled on after the call
    /// was made (`ping` on a 2026-07-28 server; `subscriptions/listen` or `server/discover`
    /// on a 2025-11-25 one): nothing was sent. Made once the era is known, the call is
    /// refused at once ([`RequestError::NotSupportedByEra`]).
    NotSupportedByEra,
    /// The host's local authorization policy refused the call (or the host refused a call
    /// held for its answer), with the reason it gave. Nothing was sent; it is never retried
    /// and does not count against the server.
    AuthorizationDenied(Box<str>),
}

impl LocalError {
    /// A snake_case name for scripts.
    pub fn name(&self) -> &'static str {
        match self {
            Self::DeliveryUnknown(_) => "delivery_unknown",
            Self::BreakerOpen => "breaker_open",
            Self::Degraded(_) => "degraded",
            Self::Cancelled => "cancelled",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::TooManyPages => "too_many_pages",
            Self::HandshakeFailed => "handshake_failed",
            Self::TooManyInputRounds => "too_many_input_rounds",
            Self::InputRejected => "input_rejected",
            Self::TooManyServerRequests => "too_many_server_requests",
            Self::Unanswered(_) => "unanswered",
            #[cfg(feature = "http")]
            Self::OAuthSetup(_) => "oauth_setup",
            Self::NotSupportedByEra => "not_supported_by_era",
            Self::AuthorizationDenied(_) => "authorization_denied",
        }
    }
}

impl fmt::Display for LocalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Self::DeliveryUnknown(cause) = self {
            return write!(
                f,
                "the request may have been delivered; its outcome is unknown ({cause})"
            );
        }
        if let Self::AuthorizationDenied(reason) = self {
            return write!(f, "refused by the local authorization policy: {reason}");
        }
        if let Self::Degraded(Some(first)) = self {
            return write!(
                f,
                "the server keeps crashing; restarts are suspended (first exit: {first})"
            );
        }
        f.write_str(match self {
            Self::DeliveryUnknown(_) => {
                "the request may have been delivered; its outcome is unknown"
            }
            Self::BreakerOpen => "circuit breaker open",
            Self::Degraded(_) => "the server keeps crashing; restarts are suspended",
            Self::Cancelled => "call cancelled",
            Self::DeadlineExceeded => "deadline exceeded",
            Self::TooManyPages => "listing exceeded the page limit",
            Self::HandshakeFailed => "the server failed the protocol handshake",
            Self::TooManyInputRounds => "the server asked for input more times than allowed",
            Self::InputRejected => "the host rejected the server's input request",
            Self::TooManyServerRequests => "too many server requests waiting for the host",
            Self::NotSupportedByEra => "method not available in the server's protocol era",
            #[cfg(feature = "http")]
            Self::OAuthSetup(e) => {
                return write!(f, "the OAuth configuration cannot work here: {e}")
            }
            Self::Unanswered(kind) => {
                return write!(
                    f,
                    "the server asked for {} and no answer handler answered",
                    kind.method()
                )
            }
            Self::AuthorizationDenied(_) => "refused by the local authorization policy",
        })
    }
}

/// Why a command (starting a call) was refused; nothing was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// The in-flight limit and its queue are used up (`Config::max_in_flight` plus
    /// `Config::max_queued`: 160 calls with the defaults, the first to be reached), the
    /// pending table is full (`Config::max_pending`), or the host has left
    /// `Config::max_queued_events` calls' terminal events undrained.
    Overloaded,
    /// The engine is closed; no further calls are accepted. Also what a `Client` or `Host`
    /// verb gives for a handle that names no server (one removed).
    Closed,
    /// The arguments were not a JSON object.
    ArgumentsNotObject,
    /// The arguments given as text (`call_tool_json`) were not one valid JSON value.
    ArgumentsNotJson,
    /// The server speaks an era that has no such method (for example `server/discover` on a
    /// 2025-11-25 server).
    NotSupportedByEra,
    /// The circuit breaker for this kind of call is open.
    BreakerOpen,
    /// The server is degraded (its process keeps crashing) until the host restarts it.
    Degraded,
    /// The call's trace context is malformed (`CallOptions::trace`).
    TraceContext(crate::proto::trace::TraceContextError),
    /// `request_raw` was given an empty method name, one with a verb of its own, or one
    /// with a byte outside printable ASCII.
    InvalidMethod,
    /// `resume_task` was given an empty task id or one longer than `MAX_TASK_ID_BYTES`.
    InvalidTaskId,
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Overloaded => "too many pending calls",
            Self::Closed => "the server connection is closed",
            Self::ArgumentsNotObject => "arguments must be a JSON object",
            Self::ArgumentsNotJson => "arguments are not valid JSON",
            Self::NotSupportedByEra => "method not available in the server's protocol era",
            Self::BreakerOpen => "circuit breaker open",
            Self::Degraded => "the server is degraded",
            Self::TraceContext(e) => return write!(f, "bad trace context: {e}"),
            Self::InvalidMethod => "not an extension method name",
            Self::InvalidTaskId => "not a task id",
        })
    }
}

impl std::error::Error for RequestError {}

/// Why `cancel` did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelError {
    /// No such call is pending (it already ended, or the id is stale).
    NotPending,
    /// The call is part of the protocol handshake, which must not be cancelled.
    Handshake,
}

impl fmt::Display for CancelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotPending => "no such call is pending",
            Self::Handshake => "handshake requests cannot be cancelled",
        })
    }
}

impl std::error::Error for CancelError {}

/// Why a held call's authorization answer was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthorizeError {
    /// No such call is held (it was never held, was already answered, or it ended: its
    /// deadline passed or it was cancelled).
    NotHeld,
    /// The queue has no room for the call now; it stays held.
    Overloaded,
}

impl fmt::Display for AuthorizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotHeld => "no such call is held for authorization",
            Self::Overloaded => "too many queued calls; the call stays held",
        })
    }
}

impl std::error::Error for AuthorizeError {}

/// A configuration value is out of range; reported once by `Engine::new`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigError {
    /// The field that is wrong.
    pub field: &'static str,
    /// What it must be.
    pub reason: &'static str,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid config `{}`: {}", self.field, self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// Why the host's answer to a server request was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnswerError {
    /// No such request is waiting (answered, timed out, or its call ended).
    NotPending,
    /// The answer is not a JSON object.
    NotObject,
    /// An elicitation answer does not match the requested schema; nothing was sent.
    Mismatch {
        /// The field (or `action`/`content`) that does not match.
        field: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl fmt::Display for AnswerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotPending => f.write_str("no such server request is waiting"),
            Self::NotObject => f.write_str("the answer is not a JSON object"),
            Self::Mismatch { field, reason } => {
                write!(f, "the answer does not match the requested schema: {field}: {reason}")
            }
        }
    }
}

impl std::error::Error for AnswerError {}
