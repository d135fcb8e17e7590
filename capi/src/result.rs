//! `mcpoll_result`: one value per error kind of the Rust API, plus the ABI's own.

use std::ffi::{c_char, CStr};

use mcpoll::{
    AddServerError, AnswerError, AuthorizeError, CallError, CancelError, CatalogError, LocalError,
    PeerError, RequestError, TransportError,
};

use crate::Fail;

/// The result of every entry point, and the error of a failed call in an event
/// (`mcpoll_event.error`): `MCPOLL_OK` or one value per error kind. The values are stable;
/// `mcpoll_result_name` and `mcpoll_result_message` describe each one.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mcpoll_result {
    /// Success.
    MCPOLL_OK = 0,
    // The ABI's own: the caller's mistakes and the library's state.
    /// A required pointer argument is null.
    MCPOLL_NULL_POINTER = 1,
    /// A string argument is not valid UTF-8.
    MCPOLL_INVALID_UTF8 = 2,
    /// A JSON argument is not valid JSON.
    MCPOLL_INVALID_JSON = 3,
    /// An argument is out of range.
    MCPOLL_INVALID_ARGUMENT = 4,
    /// No such server (never added, or removed).
    MCPOLL_UNKNOWN_SERVER = 5,
    /// No such call is pending on this server.
    MCPOLL_UNKNOWN_CALL = 6,
    /// No such server request is waiting.
    MCPOLL_UNKNOWN_REQUEST = 7,
    /// Called from inside the log callback.
    MCPOLL_REENTRANT = 8,
    /// Internal error (a panic was caught); the host may be inconsistent.
    MCPOLL_PANIC = 9,
    /// Not available yet: poll, then ask again.
    MCPOLL_PENDING = 10,
    /// An operating system call failed.
    MCPOLL_IO = 11,
    /// Another logger is installed in this process.
    MCPOLL_LOGGER_TAKEN = 12,
    /// Not built into this library (feature compiled out).
    MCPOLL_UNSUPPORTED = 13,
    // Adding a server.
    /// The configuration is invalid.
    MCPOLL_CONFIG_INVALID = 100,
    /// The server process could not be started.
    MCPOLL_SPAWN_FAILED = 101,
    /// No room for another server.
    MCPOLL_TOO_MANY_SERVERS = 102,
    /// The server URL is not usable.
    MCPOLL_HTTP_URL = 103,
    /// The server's host name cannot be resolved.
    MCPOLL_HTTP_RESOLVE = 104,
    /// TLS cannot be set up (CA file, client certificate).
    MCPOLL_HTTP_TLS_SETUP = 105,
    /// An HTTP header is not valid.
    MCPOLL_HTTP_HEADER = 106,
    /// The OAuth configuration is not usable.
    MCPOLL_HTTP_OAUTH_SETUP = 107,
    /// The bearer token holds a line break or NUL.
    MCPOLL_HTTP_BEARER_TOKEN = 108,
    /// The roots given with the server were refused.
    MCPOLL_SERVER_ROOTS = 109,
    // Starting a call (RequestError).
    /// Too many pending calls.
    MCPOLL_OVERLOADED = 200,
    /// The server connection is closed.
    MCPOLL_CLOSED = 201,
    /// Arguments must be a JSON object.
    MCPOLL_ARGUMENTS_NOT_OBJECT = 202,
    /// Method not available in the server's protocol era.
    MCPOLL_NOT_SUPPORTED_BY_ERA = 203,
    /// Circuit breaker open: the call was not started.
    MCPOLL_REQUEST_BREAKER_OPEN = 204,
    /// The server is degraded: the call was not started.
    MCPOLL_REQUEST_DEGRADED = 205,
    /// Bad trace context.
    MCPOLL_TRACE_CONTEXT = 206,
    /// The arguments are not valid JSON.
    MCPOLL_ARGUMENTS_NOT_JSON = 207,
    /// Not an extension method name.
    MCPOLL_INVALID_METHOD = 208,
    /// An empty task id, or one over the length limit.
    MCPOLL_INVALID_TASK_ID = 209,
    // Cancelling (CancelError).
    /// The call is not pending.
    MCPOLL_CANCEL_NOT_PENDING = 300,
    /// Handshake requests cannot be cancelled.
    MCPOLL_CANCEL_HANDSHAKE = 301,
    // Answering a server request, setting roots (AnswerError).
    /// No such server request is waiting.
    MCPOLL_ANSWER_NOT_PENDING = 400,
    /// The answer is not a JSON object.
    MCPOLL_ANSWER_NOT_OBJECT = 401,
    /// The answer does not match what was asked.
    MCPOLL_ANSWER_MISMATCH = 402,
    // The capability cache (CatalogError).
    /// The server is not ready: its catalog key is unknown.
    MCPOLL_CATALOG_NOT_READY = 500,
    /// The catalog is stale for longer than allowed.
    MCPOLL_CATALOG_STALE_TOO_LONG = 501,
    /// Too many catalog refreshes at once.
    MCPOLL_CATALOG_TOO_MANY_REFRESHES = 502,
    /// The catalog wait timed out.
    MCPOLL_CATALOG_TIMEOUT = 503,
    // Answering a call held for authorization (AuthorizeError).
    /// No such call is held for authorization.
    MCPOLL_AUTHORIZE_NOT_HELD = 600,
    /// No room in the queue now; the call stays held.
    MCPOLL_AUTHORIZE_OVERLOADED = 601,
    // A call's end (CallError): the server answered with a JSON-RPC error.
    /// The server answered with a JSON-RPC error.
    MCPOLL_PROTOCOL = 1000,
    // ... the server broke the protocol or refused access (PeerError).
    /// The server requires authorization.
    MCPOLL_PEER_AUTH_REQUIRED = 1100,
    /// The server refused the credentials.
    MCPOLL_PEER_FORBIDDEN = 1101,
    /// OAuth authorization failed.
    MCPOLL_PEER_AUTHORIZATION = 1102,
    /// Message too large.
    MCPOLL_PEER_TOO_LARGE = 1103,
    /// The result is not valid for its method.
    MCPOLL_PEER_INVALID_RESULT = 1104,
    /// The server repeated a pagination cursor.
    MCPOLL_PEER_CURSOR_REPEATED = 1105,
    /// No protocol version in common with the server.
    MCPOLL_PEER_NO_COMMON_VERSION = 1106,
    /// The server refused a version it lists as supported.
    MCPOLL_PEER_VERSION_REFUSED = 1107,
    /// The server asked for input not declared.
    MCPOLL_PEER_UNDECLARED_INPUT_REQUEST = 1108,
    /// The reply is nested too deep.
    MCPOLL_PEER_TOO_DEEP = 1109,
    /// The server cancelled the call's task.
    MCPOLL_PEER_TASK_CANCELLED = 1110,
    // ... the pipe or socket failed (TransportError).
    /// The server process exited.
    MCPOLL_TRANSPORT_PROCESS_EXIT = 1200,
    /// The transport was closed.
    MCPOLL_TRANSPORT_CLOSED = 1201,
    /// HTTP status without a JSON-RPC reply.
    MCPOLL_TRANSPORT_HTTP_STATUS = 1202,
    /// Connection lost before the reply.
    MCPOLL_TRANSPORT_CONNECTION_LOST = 1203,
    /// Could not connect.
    MCPOLL_TRANSPORT_CONNECT_FAILED = 1204,
    /// TLS failed.
    MCPOLL_TRANSPORT_TLS = 1205,
    /// Malformed HTTP response.
    MCPOLL_TRANSPORT_BAD_RESPONSE = 1206,
    /// The session expired and could not be renewed.
    MCPOLL_TRANSPORT_SESSION_EXPIRED = 1207,
    /// The server ended the stream.
    MCPOLL_TRANSPORT_CLOSED_BY_SERVER = 1208,
    /// The HTTP proxy refused to open a tunnel to the server.
    MCPOLL_TRANSPORT_PROXY_REFUSED = 1209,
    // ... mcpoll ended the call (LocalError).
    /// The request may have been delivered; outcome unknown.
    MCPOLL_LOCAL_DELIVERY_UNKNOWN = 1300,
    /// Circuit breaker open.
    MCPOLL_LOCAL_BREAKER_OPEN = 1301,
    /// The server keeps crashing; restarts are suspended.
    MCPOLL_LOCAL_DEGRADED = 1302,
    /// Call cancelled.
    MCPOLL_LOCAL_CANCELLED = 1303,
    /// Deadline exceeded.
    MCPOLL_LOCAL_DEADLINE_EXCEEDED = 1304,
    /// Listing exceeded the page limit.
    MCPOLL_LOCAL_TOO_MANY_PAGES = 1305,
    /// The server failed the protocol handshake.
    MCPOLL_LOCAL_HANDSHAKE_FAILED = 1306,
    /// The server asked for input too many times.
    MCPOLL_LOCAL_TOO_MANY_INPUT_ROUNDS = 1307,
    /// The host rejected the server's input request.
    MCPOLL_LOCAL_INPUT_REJECTED = 1308,
    /// Too many server requests waiting.
    MCPOLL_LOCAL_TOO_MANY_SERVER_REQUESTS = 1309,
    /// A server request found no answer handler.
    MCPOLL_LOCAL_UNANSWERED = 1310,
    /// The OAuth flow cannot run with this configuration.
    MCPOLL_LOCAL_OAUTH_SETUP = 1311,
    /// Refused by the local authorization policy.
    MCPOLL_LOCAL_AUTHORIZATION_DENIED = 1312,
    /// The method does not exist in the server's protocol era; nothing was sent.
    MCPOLL_LOCAL_NOT_SUPPORTED_BY_ERA = 1313,
    // A variant the Rust API grew after this library was written.
    /// An error this version of the C ABI has no value for.
    MCPOLL_UNKNOWN_ERROR = 9999,
}

/// The names and messages of the values, in order: a value missing here, or one not in the
/// enum, does not compile.
macro_rules! results {
    ($($variant:ident, $message:literal;)*) => {
        impl mcpoll_result {
            /// Every value, in order (the header check walks it).
            pub const ALL: &'static [mcpoll_result] = &[$(Self::$variant,)*];

            /// The constant's name, as the header spells it.
            pub fn name(self) -> &'static CStr {
                match self {
                    $(Self::$variant => {
                        // A literal with one NUL, at its end: never the fallback.
                        match CStr::from_bytes_with_nul(concat!(stringify!($variant), "\0").as_bytes()) {
                            Ok(s) => s,
                            Err(_) => c"MCPOLL_?",
                        }
                    })*
                }
            }

            /// One line saying what it means.
            pub fn message(self) -> &'static CStr {
                match self {
                    $(Self::$variant => $message,)*
                }
            }
        }
    };
}

impl mcpoll_result {
    /// The value of a C integer, if it is one.
    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|&r| r as u32 == v)
    }
}

results! {
    MCPOLL_OK, c"success";
    MCPOLL_NULL_POINTER, c"a required pointer argument is null";
    MCPOLL_INVALID_UTF8, c"a string argument is not valid UTF-8";
    MCPOLL_INVALID_JSON, c"a JSON argument is not valid JSON";
    MCPOLL_INVALID_ARGUMENT, c"an argument is out of range";
    MCPOLL_UNKNOWN_SERVER, c"no such server (never added, or removed)";
    MCPOLL_UNKNOWN_CALL, c"no such call is pending on this server";
    MCPOLL_UNKNOWN_REQUEST, c"no such server request is waiting";
    MCPOLL_REENTRANT, c"called from inside the log callback";
    MCPOLL_PANIC, c"internal error (a panic was caught); the host may be inconsistent";
    MCPOLL_PENDING, c"not available yet: poll, then ask again";
    MCPOLL_IO, c"an operating system call failed";
    MCPOLL_LOGGER_TAKEN, c"another logger is installed in this process";
    MCPOLL_UNSUPPORTED, c"not built into this library (feature compiled out)";
    MCPOLL_CONFIG_INVALID, c"the configuration is invalid";
    MCPOLL_SPAWN_FAILED, c"the server process could not be started";
    MCPOLL_TOO_MANY_SERVERS, c"no room for another server";
    MCPOLL_HTTP_URL, c"the server URL is not usable";
    MCPOLL_HTTP_RESOLVE, c"the server's host name cannot be resolved";
    MCPOLL_HTTP_TLS_SETUP, c"TLS cannot be set up (CA file, client certificate)";
    MCPOLL_HTTP_HEADER, c"an HTTP header is not valid";
    MCPOLL_HTTP_OAUTH_SETUP, c"the OAuth configuration is not usable";
    MCPOLL_HTTP_BEARER_TOKEN, c"the bearer token holds a line break or NUL";
    MCPOLL_SERVER_ROOTS, c"the roots given with the server were refused";
    MCPOLL_OVERLOADED, c"too many pending calls";
    MCPOLL_CLOSED, c"the server connection is closed";
    MCPOLL_ARGUMENTS_NOT_OBJECT, c"arguments must be a JSON object";
    MCPOLL_NOT_SUPPORTED_BY_ERA, c"method not available in the server's protocol era";
    MCPOLL_REQUEST_BREAKER_OPEN, c"circuit breaker open: the call was not started";
    MCPOLL_REQUEST_DEGRADED, c"the server is degraded: the call was not started";
    MCPOLL_TRACE_CONTEXT, c"bad trace context";
    MCPOLL_ARGUMENTS_NOT_JSON, c"the arguments are not valid JSON";
    MCPOLL_INVALID_METHOD, c"not an extension method name";
    MCPOLL_INVALID_TASK_ID, c"an empty task id, or one over the length limit";
    MCPOLL_CANCEL_NOT_PENDING, c"the call is not pending";
    MCPOLL_CANCEL_HANDSHAKE, c"handshake requests cannot be cancelled";
    MCPOLL_ANSWER_NOT_PENDING, c"no such server request is waiting";
    MCPOLL_ANSWER_NOT_OBJECT, c"the answer is not a JSON object";
    MCPOLL_ANSWER_MISMATCH, c"the answer does not match what was asked";
    MCPOLL_CATALOG_NOT_READY, c"the server is not ready: its catalog key is unknown";
    MCPOLL_CATALOG_STALE_TOO_LONG, c"the catalog is stale for longer than allowed";
    MCPOLL_CATALOG_TOO_MANY_REFRESHES, c"too many catalog refreshes at once";
    MCPOLL_CATALOG_TIMEOUT, c"the catalog wait timed out";
    MCPOLL_AUTHORIZE_NOT_HELD, c"no such call is held for authorization";
    MCPOLL_AUTHORIZE_OVERLOADED, c"no room in the queue now; the call stays held";
    MCPOLL_PROTOCOL, c"the server answered with a JSON-RPC error";
    MCPOLL_PEER_AUTH_REQUIRED, c"the server requires authorization";
    MCPOLL_PEER_FORBIDDEN, c"the server refused the credentials";
    MCPOLL_PEER_AUTHORIZATION, c"OAuth authorization failed";
    MCPOLL_PEER_TOO_LARGE, c"message too large";
    MCPOLL_PEER_INVALID_RESULT, c"the result is not valid for its method";
    MCPOLL_PEER_CURSOR_REPEATED, c"the server repeated a pagination cursor";
    MCPOLL_PEER_NO_COMMON_VERSION, c"no protocol version in common with the server";
    MCPOLL_PEER_VERSION_REFUSED, c"the server refused a version it lists as supported";
    MCPOLL_PEER_UNDECLARED_INPUT_REQUEST, c"the server asked for input not declared";
    MCPOLL_PEER_TOO_DEEP, c"the reply is nested too deep";
    MCPOLL_PEER_TASK_CANCELLED, c"the server cancelled the call's task";
    MCPOLL_TRANSPORT_PROCESS_EXIT, c"the server process exited";
    MCPOLL_TRANSPORT_CLOSED, c"the transport was closed";
    MCPOLL_TRANSPORT_HTTP_STATUS, c"HTTP status without a JSON-RPC reply";
    MCPOLL_TRANSPORT_CONNECTION_LOST, c"connection lost before the reply";
    MCPOLL_TRANSPORT_CONNECT_FAILED, c"could not connect";
    MCPOLL_TRANSPORT_TLS, c"TLS failed";
    MCPOLL_TRANSPORT_BAD_RESPONSE, c"malformed HTTP response";
    MCPOLL_TRANSPORT_SESSION_EXPIRED, c"the session expired and could not be renewed";
    MCPOLL_TRANSPORT_CLOSED_BY_SERVER, c"the server ended the stream";
    MCPOLL_TRANSPORT_PROXY_REFUSED, c"the HTTP proxy refused to open a tunnel to the server";
    MCPOLL_LOCAL_DELIVERY_UNKNOWN, c"the request may have been delivered; outcome unknown";
    MCPOLL_LOCAL_BREAKER_OPEN, c"circuit breaker open";
    MCPOLL_LOCAL_DEGRADED, c"the server keeps crashing; restarts are suspended";
    MCPOLL_LOCAL_CANCELLED, c"call cancelled";
    MCPOLL_LOCAL_DEADLINE_EXCEEDED, c"deadline exceeded";
    MCPOLL_LOCAL_TOO_MANY_PAGES, c"listing exceeded the page limit";
    MCPOLL_LOCAL_HANDSHAKE_FAILED, c"the server failed the protocol handshake";
    MCPOLL_LOCAL_TOO_MANY_INPUT_ROUNDS, c"the server asked for input too many times";
    MCPOLL_LOCAL_INPUT_REJECTED, c"the host rejected the server's input request";
    MCPOLL_LOCAL_TOO_MANY_SERVER_REQUESTS, c"too many server requests waiting";
    MCPOLL_LOCAL_UNANSWERED, c"a server request found no answer handler";
    MCPOLL_LOCAL_OAUTH_SETUP, c"the OAuth flow cannot run with this configuration";
    MCPOLL_LOCAL_AUTHORIZATION_DENIED, c"refused by the local authorization policy";
    MCPOLL_LOCAL_NOT_SUPPORTED_BY_ERA, c"method not available in the server's protocol era";
    MCPOLL_UNKNOWN_ERROR, c"an error this version of the C ABI has no value for";
}

impl mcpoll_result {
    /// [`message`](Self::message) as `&str`.
    pub(crate) fn message_str(self) -> &'static str {
        self.message().to_str().unwrap_or("")
    }
}

/// The constant's name (`"MCPOLL_OK"`, ...) of a result value: a static NUL-terminated string,
/// valid for the life of the program. An unknown value gives `"MCPOLL_?"`.
#[no_mangle]
pub extern "C" fn mcpoll_result_name(result: u32) -> *const c_char {
    match mcpoll_result::from_u32(result) {
        Some(r) => r.name().as_ptr(),
        None => c"MCPOLL_?".as_ptr(),
    }
}

/// One line saying what a result value means: a static NUL-terminated string, valid for the
/// life of the program. The host's `mcpoll_last_error` has the details of its last failure.
#[no_mangle]
pub extern "C" fn mcpoll_result_message(result: u32) -> *const c_char {
    match mcpoll_result::from_u32(result) {
        Some(r) => r.message().as_ptr(),
        None => c"unknown result value".as_ptr(),
    }
}

/// The value of a call's error.
pub(crate) fn call_error(e: &CallError) -> mcpoll_result {
    use mcpoll_result::*;
    match e {
        CallError::Protocol(_) => MCPOLL_PROTOCOL,
        CallError::Peer(p) => peer_error(p),
        CallError::Transport(t) => transport_error(t),
        CallError::Local(l) => local_error(l),
        _ => MCPOLL_UNKNOWN_ERROR,
    }
}

fn peer_error(e: &PeerError) -> mcpoll_result {
    use mcpoll_result::*;
    match e {
        PeerError::AuthRequired(_) => MCPOLL_PEER_AUTH_REQUIRED,
        PeerError::Forbidden(_) => MCPOLL_PEER_FORBIDDEN,
        #[cfg(feature = "http")]
        PeerError::Authorization(_) => MCPOLL_PEER_AUTHORIZATION,
        PeerError::TooLarge => MCPOLL_PEER_TOO_LARGE,
        PeerError::InvalidResult => MCPOLL_PEER_INVALID_RESULT,
        PeerError::TooDeep => MCPOLL_PEER_TOO_DEEP,
        PeerError::TaskCancelled => MCPOLL_PEER_TASK_CANCELLED,
        PeerError::CursorRepeated => MCPOLL_PEER_CURSOR_REPEATED,
        PeerError::NoCommonVersion => MCPOLL_PEER_NO_COMMON_VERSION,
        PeerError::VersionRefused(_) => MCPOLL_PEER_VERSION_REFUSED,
        PeerError::UndeclaredInputRequest(_) => MCPOLL_PEER_UNDECLARED_INPUT_REQUEST,
        _ => MCPOLL_UNKNOWN_ERROR,
    }
}

fn local_error(e: &LocalError) -> mcpoll_result {
    use mcpoll_result::*;
    match e {
        LocalError::DeliveryUnknown(_) => MCPOLL_LOCAL_DELIVERY_UNKNOWN,
        LocalError::BreakerOpen => MCPOLL_LOCAL_BREAKER_OPEN,
        LocalError::Degraded(_) => MCPOLL_LOCAL_DEGRADED,
        LocalError::Cancelled => MCPOLL_LOCAL_CANCELLED,
        LocalError::DeadlineExceeded => MCPOLL_LOCAL_DEADLINE_EXCEEDED,
        LocalError::TooManyPages => MCPOLL_LOCAL_TOO_MANY_PAGES,
        LocalError::HandshakeFailed => MCPOLL_LOCAL_HANDSHAKE_FAILED,
        LocalError::TooManyInputRounds => MCPOLL_LOCAL_TOO_MANY_INPUT_ROUNDS,
        LocalError::InputRejected => MCPOLL_LOCAL_INPUT_REJECTED,
        LocalError::TooManyServerRequests => MCPOLL_LOCAL_TOO_MANY_SERVER_REQUESTS,
        LocalError::Unanswered(_) => MCPOLL_LOCAL_UNANSWERED,
        #[cfg(feature = "http")]
        LocalError::OAuthSetup(_) => MCPOLL_LOCAL_OAUTH_SETUP,
        LocalError::AuthorizationDenied(_) => MCPOLL_LOCAL_AUTHORIZATION_DENIED,
        LocalError::NotSupportedByEra => MCPOLL_LOCAL_NOT_SUPPORTED_BY_ERA,
        _ => MCPOLL_UNKNOWN_ERROR,
    }
}

fn transport_error(e: &TransportError) -> mcpoll_result {
    use mcpoll_result::*;
    match e {
        TransportError::ProcessExit(_) => MCPOLL_TRANSPORT_PROCESS_EXIT,
        TransportError::Closed(_) => MCPOLL_TRANSPORT_CLOSED,
        TransportError::HttpStatus(_) => MCPOLL_TRANSPORT_HTTP_STATUS,
        TransportError::ConnectionLost => MCPOLL_TRANSPORT_CONNECTION_LOST,
        TransportError::ConnectFailed(_) => MCPOLL_TRANSPORT_CONNECT_FAILED,
        TransportError::ProxyRefused(_) => MCPOLL_TRANSPORT_PROXY_REFUSED,
        TransportError::Tls(_) => MCPOLL_TRANSPORT_TLS,
        TransportError::BadResponse => MCPOLL_TRANSPORT_BAD_RESPONSE,
        TransportError::SessionExpired => MCPOLL_TRANSPORT_SESSION_EXPIRED,
        TransportError::ClosedByServer => MCPOLL_TRANSPORT_CLOSED_BY_SERVER,
        _ => MCPOLL_UNKNOWN_ERROR,
    }
}

/// The value of a refused command (a call not started).
pub(crate) fn request_error(e: &RequestError) -> mcpoll_result {
    use mcpoll_result::*;
    match e {
        RequestError::Overloaded => MCPOLL_OVERLOADED,
        RequestError::Closed => MCPOLL_CLOSED,
        RequestError::ArgumentsNotObject => MCPOLL_ARGUMENTS_NOT_OBJECT,
        RequestError::ArgumentsNotJson => MCPOLL_ARGUMENTS_NOT_JSON,
        RequestError::NotSupportedByEra => MCPOLL_NOT_SUPPORTED_BY_ERA,
        RequestError::BreakerOpen => MCPOLL_REQUEST_BREAKER_OPEN,
        RequestError::Degraded => MCPOLL_REQUEST_DEGRADED,
        RequestError::TraceContext(_) => MCPOLL_TRACE_CONTEXT,
        RequestError::InvalidMethod => MCPOLL_INVALID_METHOD,
        RequestError::InvalidTaskId => MCPOLL_INVALID_TASK_ID,
        _ => MCPOLL_UNKNOWN_ERROR,
    }
}

pub(crate) fn cancel_error(e: &CancelError) -> mcpoll_result {
    match e {
        CancelError::NotPending => mcpoll_result::MCPOLL_CANCEL_NOT_PENDING,
        CancelError::Handshake => mcpoll_result::MCPOLL_CANCEL_HANDSHAKE,
        _ => mcpoll_result::MCPOLL_UNKNOWN_ERROR,
    }
}

pub(crate) fn answer_error(e: &AnswerError) -> mcpoll_result {
    match e {
        AnswerError::NotPending => mcpoll_result::MCPOLL_ANSWER_NOT_PENDING,
        AnswerError::NotObject => mcpoll_result::MCPOLL_ANSWER_NOT_OBJECT,
        AnswerError::Mismatch { .. } => mcpoll_result::MCPOLL_ANSWER_MISMATCH,
        _ => mcpoll_result::MCPOLL_UNKNOWN_ERROR,
    }
}

pub(crate) fn authorize_error(e: &AuthorizeError) -> mcpoll_result {
    match e {
        AuthorizeError::NotHeld => mcpoll_result::MCPOLL_AUTHORIZE_NOT_HELD,
        AuthorizeError::Overloaded => mcpoll_result::MCPOLL_AUTHORIZE_OVERLOADED,
        _ => mcpoll_result::MCPOLL_UNKNOWN_ERROR,
    }
}

pub(crate) fn add_server_error(e: &AddServerError) -> mcpoll_result {
    use mcpoll_result::*;
    match e {
        AddServerError::Config(_) => MCPOLL_CONFIG_INVALID,
        AddServerError::Spawn { .. } => MCPOLL_SPAWN_FAILED,
        #[cfg(feature = "http")]
        AddServerError::Http(h) => http_setup_error(h),
        AddServerError::TooManyServers => MCPOLL_TOO_MANY_SERVERS,
        AddServerError::Roots(_) => MCPOLL_SERVER_ROOTS,
        _ => MCPOLL_UNKNOWN_ERROR,
    }
}

#[cfg(feature = "http")]
fn http_setup_error(e: &mcpoll::HttpSetupError) -> mcpoll_result {
    use mcpoll::HttpSetupError;
    use mcpoll_result::*;
    match e {
        HttpSetupError::Url(_) => MCPOLL_HTTP_URL,
        HttpSetupError::Resolve(_) => MCPOLL_HTTP_RESOLVE,
        HttpSetupError::Tls(_) => MCPOLL_HTTP_TLS_SETUP,
        HttpSetupError::Header(_) => MCPOLL_HTTP_HEADER,
        HttpSetupError::BearerToken => MCPOLL_HTTP_BEARER_TOKEN,
        HttpSetupError::OAuth(_) => MCPOLL_HTTP_OAUTH_SETUP,
        _ => MCPOLL_UNKNOWN_ERROR,
    }
}

pub(crate) fn catalog_error(e: &CatalogError) -> mcpoll_result {
    use mcpoll_result::*;
    match e {
        CatalogError::UnknownServer => MCPOLL_UNKNOWN_SERVER,
        CatalogError::NotReady => MCPOLL_CATALOG_NOT_READY,
        CatalogError::Request(r) => request_error(r),
        CatalogError::Listing(c) => call_error(c),
        CatalogError::StaleTooLong { .. } => MCPOLL_CATALOG_STALE_TOO_LONG,
        CatalogError::TooManyRefreshes => MCPOLL_CATALOG_TOO_MANY_REFRESHES,
        CatalogError::Timeout => MCPOLL_CATALOG_TIMEOUT,
        CatalogError::Io(_) => MCPOLL_IO,
        _ => MCPOLL_UNKNOWN_ERROR,
    }
}

impl From<RequestError> for Fail {
    fn from(e: RequestError) -> Self {
        Fail::new(request_error(&e), e.to_string())
    }
}

impl From<CancelError> for Fail {
    fn from(e: CancelError) -> Self {
        Fail::new(cancel_error(&e), e.to_string())
    }
}

impl From<AnswerError> for Fail {
    fn from(e: AnswerError) -> Self {
        Fail::new(answer_error(&e), e.to_string())
    }
}

impl From<AuthorizeError> for Fail {
    fn from(e: AuthorizeError) -> Self {
        Fail::new(authorize_error(&e), e.to_string())
    }
}

impl From<AddServerError> for Fail {
    fn from(e: AddServerError) -> Self {
        Fail::new(add_server_error(&e), e.to_string())
    }
}

impl From<CatalogError> for Fail {
    fn from(e: CatalogError) -> Self {
        Fail::new(catalog_error(&e), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_distinct_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for &r in mcpoll_result::ALL {
            assert!(seen.insert(r as u32), "{r:?} repeats a value");
            assert_eq!(mcpoll_result::from_u32(r as u32), Some(r));
            assert_eq!(r.name().to_str().unwrap(), format!("{r:?}"));
            assert!(!r.message().to_bytes().is_empty());
        }
        assert_eq!(mcpoll_result::from_u32(77), None);
    }

    /// The error enums of the Rust API that the C ABI's verbs and events can meet, with the
    /// core file that defines each.
    const ENUMS: &[(&str, &str)] = &[
        ("CallError", "src/error/mod.rs"),
        ("TransportError", "src/error/mod.rs"),
        ("PeerError", "src/error/mod.rs"),
        ("LocalError", "src/error/mod.rs"),
        ("RequestError", "src/error/mod.rs"),
        ("CancelError", "src/error/mod.rs"),
        ("AuthorizeError", "src/error/mod.rs"),
        ("AnswerError", "src/error/mod.rs"),
        ("AddServerError", "src/host/mod.rs"),
        ("CatalogError", "src/client/catalog.rs"),
        ("HttpSetupError", "src/driver/http/options.rs"),
    ];

    /// The variants of `pub enum name` in the core crate's `file`, read from its source (so
    /// a variant added there without a value here fails this test).
    fn variants(name: &str, file: &str) -> Vec<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let start = text.find(&format!("pub enum {name} {{")).unwrap_or_else(|| panic!("{name}"));
        let body = &text[start..start + text[start..].find("\n}").unwrap()];
        body.lines()
            .skip(1)
            .filter(|l| l.starts_with("    ") && !l.starts_with("     "))
            .map(str::trim)
            .filter(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
            .map(|l| l[..l.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(l.len())].into())
            .collect()
    }

    /// `Enum::Variant` -> what its arm in this file's mapping functions gives: a value
    /// name, or the function it delegates to (a nested error).
    fn arms() -> std::collections::HashMap<String, String> {
        let text = include_str!("result.rs");
        let start = text.find("pub(crate) fn call_error").unwrap();
        let code = &text[start..text.find("#[cfg(test)]\nmod tests").unwrap()];
        let mut out = std::collections::HashMap::new();
        for line in code.lines() {
            let Some((left, right)) = line.split_once(" => ") else { continue };
            let left = left.trim();
            let Some((e, v)) = left.split_once("::") else { continue };
            let v = &v[..v.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(v.len())];
            let right = right.trim().trim_start_matches("mcpoll_result::");
            let right = &right[..right.find([',', '(']).unwrap_or(right.len())];
            let old = out.insert(format!("{e}::{v}"), right.to_owned());
            assert!(old.is_none(), "{e}::{v} has two arms");
        }
        out
    }

    /// Every variant of every error enum the ABI meets has an arm, and every arm that is not
    /// a nested error gives a value of its own: no two variants share one, and none falls
    /// to MCPOLL_UNKNOWN_ERROR (kept for variants added after this library was built).
    #[test]
    fn every_rust_error_variant_has_a_distinct_value() {
        let arms = arms();
        let mut owner: std::collections::HashMap<String, String> = Default::default();
        let mut count = 0;
        for (name, file) in ENUMS {
            let variants = variants(name, file);
            assert!(!variants.is_empty(), "{name}: no variants read");
            for v in variants {
                let key = format!("{name}::{v}");
                let Some(value) = arms.get(&key) else { panic!("{key} has no value in result.rs") };
                count += 1;
                if !value.starts_with("MCPOLL_") {
                    assert!(value.ends_with("_error"), "{key} => {value}");
                    continue;
                }
                assert_ne!(value, "MCPOLL_UNKNOWN_ERROR", "{key}");
                let known = mcpoll_result::ALL.iter().any(|r| r.name().to_str() == Ok(value));
                assert!(known, "{key} => {value}, not a value");
                if let Some(other) = owner.insert(value.clone(), key.clone()) {
                    panic!("{key} and {other} share {value}");
                }
            }
        }
        assert!(count >= 70, "only {count} variants read");
    }

    /// The arms read from the source are the code that runs: variants built here map to the
    /// value their arm names.
    #[test]
    fn the_mapping_functions_give_what_their_arms_say() {
        use mcpoll::{CloseReason, ProcessExit, RpcError, TlsFailure};
        let arms = arms();
        let want = |e: &str, v: &dyn std::fmt::Debug| {
            let d = format!("{v:?}");
            let variant = &d[..d.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(d.len())];
            arms[&format!("{e}::{variant}")].clone()
        };
        let name = |r: mcpoll_result| r.name().to_str().unwrap().to_owned();
        let transport = [
            TransportError::ProcessExit(ProcessExit {
                code: Some(1),
                signal: None,
                stderr_tail: "".into(),
            }),
            TransportError::Closed(CloseReason::Host),
            TransportError::HttpStatus(500),
            TransportError::ConnectionLost,
            TransportError::ConnectFailed(std::io::ErrorKind::ConnectionRefused),
            TransportError::ProxyRefused(407),
            TransportError::Tls(TlsFailure::Handshake),
            TransportError::BadResponse,
            TransportError::SessionExpired,
            TransportError::ClosedByServer,
        ];
        for t in &transport {
            assert_eq!(name(transport_error(t)), want("TransportError", t));
            let c = CallError::Transport(t.clone());
            assert_eq!(call_error(&c), transport_error(t));
        }
        let challenge = Box::<mcpoll::AuthChallenge>::default;
        let peer = [
            PeerError::AuthRequired(challenge()),
            PeerError::Forbidden(challenge()),
            PeerError::TooLarge,
            PeerError::InvalidResult,
            PeerError::TooDeep,
            PeerError::TaskCancelled,
            PeerError::CursorRepeated,
            PeerError::NoCommonVersion,
            PeerError::UndeclaredInputRequest("x".into()),
        ];
        for p in &peer {
            assert_eq!(name(peer_error(p)), want("PeerError", p));
        }
        let local = [
            LocalError::DeliveryUnknown(Box::new(TransportError::ConnectionLost)),
            LocalError::BreakerOpen,
            LocalError::Degraded(None),
            LocalError::Cancelled,
            LocalError::DeadlineExceeded,
            LocalError::TooManyPages,
            LocalError::HandshakeFailed,
            LocalError::TooManyInputRounds,
            LocalError::InputRejected,
            LocalError::TooManyServerRequests,
            LocalError::Unanswered(mcpoll::ServerRequestKind::Sampling),
            LocalError::AuthorizationDenied("no".into()),
            LocalError::NotSupportedByEra,
        ];
        for l in &local {
            assert_eq!(name(local_error(l)), want("LocalError", l));
        }
        let rpc = CallError::Protocol(RpcError { code: -32601, message: "no".into(), data: None });
        assert_eq!(call_error(&rpc), mcpoll_result::MCPOLL_PROTOCOL);
        let requests = [
            RequestError::Overloaded,
            RequestError::Closed,
            RequestError::ArgumentsNotObject,
            RequestError::ArgumentsNotJson,
            RequestError::NotSupportedByEra,
            RequestError::BreakerOpen,
            RequestError::Degraded,
            RequestError::TraceContext(mcpoll::TraceContextError::Format),
            RequestError::InvalidMethod,
            RequestError::InvalidTaskId,
        ];
        for r in &requests {
            assert_eq!(name(request_error(r)), want("RequestError", r));
        }
        for c in [CancelError::NotPending, CancelError::Handshake] {
            assert_eq!(name(cancel_error(&c)), want("CancelError", &c));
        }
        for a in [AuthorizeError::NotHeld, AuthorizeError::Overloaded] {
            assert_eq!(name(authorize_error(&a)), want("AuthorizeError", &a));
        }
        let mismatch = AnswerError::Mismatch { field: "x".into(), reason: "y" };
        for a in [AnswerError::NotPending, AnswerError::NotObject, mismatch] {
            assert_eq!(name(answer_error(&a)), want("AnswerError", &a));
        }
        let catalog = [
            CatalogError::UnknownServer,
            CatalogError::NotReady,
            CatalogError::StaleTooLong {
                stale_for: Default::default(),
                max_stale: Default::default(),
            },
            CatalogError::TooManyRefreshes,
            CatalogError::Timeout,
            CatalogError::Io(std::io::ErrorKind::Other.into()),
        ];
        for c in &catalog {
            assert_eq!(name(catalog_error(c)), want("CatalogError", c));
        }
        let nested = CatalogError::Request(RequestError::Degraded);
        assert_eq!(catalog_error(&nested), mcpoll_result::MCPOLL_REQUEST_DEGRADED);
        let listing = CatalogError::Listing(CallError::Local(LocalError::TooManyPages));
        assert_eq!(catalog_error(&listing), mcpoll_result::MCPOLL_LOCAL_TOO_MANY_PAGES);
        let config = mcpoll::ConfigError { field: "f", reason: "r" };
        let adds = [
            AddServerError::Config(config),
            AddServerError::TooManyServers,
            AddServerError::Roots(AnswerError::NotObject),
        ];
        for a in &adds {
            assert_eq!(name(add_server_error(a)), want("AddServerError", a));
        }
        #[cfg(feature = "http")]
        {
            use mcpoll::HttpSetupError;
            let https = [
                HttpSetupError::Url(mcpoll::UrlError::Scheme),
                HttpSetupError::Resolve(std::io::ErrorKind::NotFound.into()),
                HttpSetupError::Tls(mcpoll::TlsSetupError::Config("x".into())),
                HttpSetupError::Header("x".into()),
                HttpSetupError::BearerToken,
            ];
            for h in https {
                assert_eq!(name(http_setup_error(&h)), want("HttpSetupError", &h));
                let a = AddServerError::Http(h);
                assert_ne!(add_server_error(&a), mcpoll_result::MCPOLL_UNKNOWN_ERROR);
            }
        }
    }
}
