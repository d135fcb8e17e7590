//! `mcpoll_result`: one value per error kind of the Rust API, plus the ABI's own.

use std::ffi::{c_char, CStr};

use mcpoll::{
    AddServerError, AnswerError, CallError, CancelError, CatalogError, LocalError, PeerError,
    RequestError, TransportError,
};

use crate::Fail;

macro_rules! results {
    ($($variant:ident = $value:literal, $message:literal;)*) => {
        /// The result of every entry point, and the error of a failed call in an event.
        #[repr(C)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[allow(missing_docs)]
        pub enum mcpoll_result {
            $($variant = $value,)*
        }

        impl mcpoll_result {
            /// Every value, in order (the header check walks it).
            pub const ALL: &'static [mcpoll_result] = &[$(Self::$variant,)*];

            /// The value of a C integer, if it is one.
            pub fn from_u32(v: u32) -> Option<Self> {
                match v {
                    $($value => Some(Self::$variant),)*
                    _ => None,
                }
            }

            /// The constant's name, as the header spells it.
            pub fn name(self) -> &'static CStr {
                match self {
                    $(Self::$variant => {
                        // SAFETY-free: a literal with one NUL, at its end.
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

results! {
    MCPOLL_OK = 0, c"success";
    // The ABI's own: the caller's mistakes and the library's state.
    MCPOLL_NULL_POINTER = 1, c"a required pointer argument is null";
    MCPOLL_INVALID_UTF8 = 2, c"a string argument is not valid UTF-8";
    MCPOLL_INVALID_JSON = 3, c"a JSON argument is not valid JSON";
    MCPOLL_INVALID_ARGUMENT = 4, c"an argument is out of range";
    MCPOLL_UNKNOWN_SERVER = 5, c"no such server (never added, or removed)";
    MCPOLL_UNKNOWN_CALL = 6, c"no such call is pending on this server";
    MCPOLL_UNKNOWN_REQUEST = 7, c"no such server request is waiting";
    MCPOLL_REENTRANT = 8, c"called from inside the log callback";
    MCPOLL_PANIC = 9, c"internal error (a panic was caught); the host may be inconsistent";
    MCPOLL_PENDING = 10, c"not available yet: poll, then ask again";
    MCPOLL_IO = 11, c"an operating system call failed";
    MCPOLL_LOGGER_TAKEN = 12, c"another logger is installed in this process";
    MCPOLL_UNSUPPORTED = 13, c"not built into this library (feature compiled out)";
    // Adding a server.
    MCPOLL_CONFIG_INVALID = 100, c"the configuration is invalid";
    MCPOLL_SPAWN_FAILED = 101, c"the server process could not be started";
    MCPOLL_TOO_MANY_SERVERS = 102, c"no room for another server";
    MCPOLL_HTTP_URL = 103, c"the server URL is not usable";
    MCPOLL_HTTP_RESOLVE = 104, c"the server's host name cannot be resolved";
    MCPOLL_HTTP_TLS_SETUP = 105, c"TLS cannot be set up (CA file, client certificate)";
    MCPOLL_HTTP_HEADER = 106, c"an HTTP header is not valid";
    MCPOLL_HTTP_OAUTH_SETUP = 107, c"the OAuth configuration is not usable";
    // Starting a call (RequestError).
    MCPOLL_OVERLOADED = 200, c"too many pending calls";
    MCPOLL_CLOSED = 201, c"the server connection is closed";
    MCPOLL_ARGUMENTS_NOT_OBJECT = 202, c"arguments must be a JSON object";
    MCPOLL_NOT_SUPPORTED_BY_ERA = 203, c"method not available in the server's protocol era";
    MCPOLL_REQUEST_BREAKER_OPEN = 204, c"circuit breaker open: the call was not started";
    MCPOLL_REQUEST_DEGRADED = 205, c"the server is degraded: the call was not started";
    MCPOLL_TRACE_CONTEXT = 206, c"bad trace context";
    // Cancelling (CancelError).
    MCPOLL_CANCEL_NOT_PENDING = 300, c"the call is not pending";
    MCPOLL_CANCEL_HANDSHAKE = 301, c"handshake requests cannot be cancelled";
    // Answering a server request, setting roots (AnswerError).
    MCPOLL_ANSWER_NOT_PENDING = 400, c"no such server request is waiting";
    MCPOLL_ANSWER_NOT_OBJECT = 401, c"the answer is not a JSON object";
    MCPOLL_ANSWER_MISMATCH = 402, c"the answer does not match what was asked";
    // The capability cache (CatalogError).
    MCPOLL_CATALOG_NOT_READY = 500, c"the server is not ready: its catalog key is unknown";
    MCPOLL_CATALOG_STALE_TOO_LONG = 501, c"the catalog is stale for longer than allowed";
    MCPOLL_CATALOG_TOO_MANY_REFRESHES = 502, c"too many catalog refreshes at once";
    MCPOLL_CATALOG_TIMEOUT = 503, c"the catalog wait timed out";
    // A call's end (CallError): the server answered with a JSON-RPC error.
    MCPOLL_PROTOCOL = 1000, c"the server answered with a JSON-RPC error";
    // ... the server broke the protocol or refused access (PeerError).
    MCPOLL_PEER_AUTH_REQUIRED = 1100, c"the server requires authorization";
    MCPOLL_PEER_FORBIDDEN = 1101, c"the server refused the credentials";
    MCPOLL_PEER_AUTHORIZATION = 1102, c"OAuth authorization failed";
    MCPOLL_PEER_TOO_LARGE = 1103, c"message too large";
    MCPOLL_PEER_INVALID_RESULT = 1104, c"the result is not valid for its method";
    MCPOLL_PEER_CURSOR_REPEATED = 1105, c"the server repeated a pagination cursor";
    MCPOLL_PEER_NO_COMMON_VERSION = 1106, c"no protocol version in common with the server";
    MCPOLL_PEER_VERSION_REFUSED = 1107, c"the server refused a version it lists as supported";
    MCPOLL_PEER_UNDECLARED_INPUT_REQUEST = 1108, c"the server asked for input not declared";
    // ... the pipe or socket failed (TransportError).
    MCPOLL_TRANSPORT_PROCESS_EXIT = 1200, c"the server process exited";
    MCPOLL_TRANSPORT_CLOSED = 1201, c"the transport was closed";
    MCPOLL_TRANSPORT_HTTP_STATUS = 1202, c"HTTP status without a JSON-RPC reply";
    MCPOLL_TRANSPORT_CONNECTION_LOST = 1203, c"connection lost before the reply";
    MCPOLL_TRANSPORT_CONNECT_FAILED = 1204, c"could not connect";
    MCPOLL_TRANSPORT_TLS = 1205, c"TLS failed";
    MCPOLL_TRANSPORT_BAD_RESPONSE = 1206, c"malformed HTTP response";
    MCPOLL_TRANSPORT_SESSION_EXPIRED = 1207, c"the session expired and could not be renewed";
    MCPOLL_TRANSPORT_CLOSED_BY_SERVER = 1208, c"the server ended the stream";
    // ... mcpoll ended the call (LocalError).
    MCPOLL_LOCAL_DELIVERY_UNKNOWN = 1300, c"the request may have been delivered; outcome unknown";
    MCPOLL_LOCAL_BREAKER_OPEN = 1301, c"circuit breaker open";
    MCPOLL_LOCAL_DEGRADED = 1302, c"the server keeps crashing; restarts are suspended";
    MCPOLL_LOCAL_CANCELLED = 1303, c"call cancelled";
    MCPOLL_LOCAL_DEADLINE_EXCEEDED = 1304, c"deadline exceeded";
    MCPOLL_LOCAL_TOO_MANY_PAGES = 1305, c"listing exceeded the page limit";
    MCPOLL_LOCAL_HANDSHAKE_FAILED = 1306, c"the server failed the protocol handshake";
    MCPOLL_LOCAL_TOO_MANY_INPUT_ROUNDS = 1307, c"the server asked for input too many times";
    MCPOLL_LOCAL_INPUT_REJECTED = 1308, c"the host rejected the server's input request";
    MCPOLL_LOCAL_TOO_MANY_SERVER_REQUESTS = 1309, c"too many server requests waiting";
    // A variant the Rust API grew after this library was written.
    MCPOLL_UNKNOWN_ERROR = 9999, c"an error this version of the C ABI has no value for";
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
        CallError::Peer(p) => match p {
            PeerError::AuthRequired(_) => MCPOLL_PEER_AUTH_REQUIRED,
            PeerError::Forbidden(_) => MCPOLL_PEER_FORBIDDEN,
            #[cfg(feature = "http")]
            PeerError::Authorization(_) => MCPOLL_PEER_AUTHORIZATION,
            PeerError::TooLarge => MCPOLL_PEER_TOO_LARGE,
            PeerError::InvalidResult => MCPOLL_PEER_INVALID_RESULT,
            PeerError::CursorRepeated => MCPOLL_PEER_CURSOR_REPEATED,
            PeerError::NoCommonVersion => MCPOLL_PEER_NO_COMMON_VERSION,
            PeerError::VersionRefused(_) => MCPOLL_PEER_VERSION_REFUSED,
            PeerError::UndeclaredInputRequest(_) => MCPOLL_PEER_UNDECLARED_INPUT_REQUEST,
            _ => MCPOLL_UNKNOWN_ERROR,
        },
        CallError::Transport(t) => transport_error(t),
        CallError::Local(l) => match l {
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
            _ => MCPOLL_UNKNOWN_ERROR,
        },
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
        TransportError::Tls(_) => MCPOLL_TRANSPORT_TLS,
        TransportError::BadResponse => MCPOLL_TRANSPORT_BAD_RESPONSE,
        TransportError::SessionExpired => MCPOLL_TRANSPORT_SESSION_EXPIRED,
        TransportError::ClosedByServer => MCPOLL_TRANSPORT_CLOSED_BY_SERVER,
        _ => MCPOLL_UNKNOWN_ERROR,
    }
}

impl From<RequestError> for Fail {
    fn from(e: RequestError) -> Self {
        use mcpoll_result::*;
        let code = match e {
            RequestError::Overloaded => MCPOLL_OVERLOADED,
            RequestError::Closed => MCPOLL_CLOSED,
            RequestError::ArgumentsNotObject => MCPOLL_ARGUMENTS_NOT_OBJECT,
            RequestError::NotSupportedByEra => MCPOLL_NOT_SUPPORTED_BY_ERA,
            RequestError::BreakerOpen => MCPOLL_REQUEST_BREAKER_OPEN,
            RequestError::Degraded => MCPOLL_REQUEST_DEGRADED,
            RequestError::TraceContext(_) => MCPOLL_TRACE_CONTEXT,
            _ => MCPOLL_UNKNOWN_ERROR,
        };
        Fail::new(code, e.to_string())
    }
}

impl From<CancelError> for Fail {
    fn from(e: CancelError) -> Self {
        let code = match e {
            CancelError::NotPending => mcpoll_result::MCPOLL_CANCEL_NOT_PENDING,
            CancelError::Handshake => mcpoll_result::MCPOLL_CANCEL_HANDSHAKE,
            _ => mcpoll_result::MCPOLL_UNKNOWN_ERROR,
        };
        Fail::new(code, e.to_string())
    }
}

impl From<AnswerError> for Fail {
    fn from(e: AnswerError) -> Self {
        let code = match e {
            AnswerError::NotPending => mcpoll_result::MCPOLL_ANSWER_NOT_PENDING,
            AnswerError::NotObject => mcpoll_result::MCPOLL_ANSWER_NOT_OBJECT,
            AnswerError::Mismatch { .. } => mcpoll_result::MCPOLL_ANSWER_MISMATCH,
            _ => mcpoll_result::MCPOLL_UNKNOWN_ERROR,
        };
        Fail::new(code, e.to_string())
    }
}

impl From<AddServerError> for Fail {
    fn from(e: AddServerError) -> Self {
        use mcpoll_result::*;
        let code = match &e {
            AddServerError::Config(_) => MCPOLL_CONFIG_INVALID,
            AddServerError::Spawn { .. } => MCPOLL_SPAWN_FAILED,
            #[cfg(feature = "http")]
            AddServerError::Http(h) => match h {
                mcpoll::HttpSetupError::Url(_) => MCPOLL_HTTP_URL,
                mcpoll::HttpSetupError::Resolve(_) => MCPOLL_HTTP_RESOLVE,
                mcpoll::HttpSetupError::Tls(_) => MCPOLL_HTTP_TLS_SETUP,
                mcpoll::HttpSetupError::Header(_) => MCPOLL_HTTP_HEADER,
                mcpoll::HttpSetupError::OAuth(_) => MCPOLL_HTTP_OAUTH_SETUP,
                _ => MCPOLL_UNKNOWN_ERROR,
            },
            AddServerError::TooManyServers => MCPOLL_TOO_MANY_SERVERS,
            _ => MCPOLL_UNKNOWN_ERROR,
        };
        Fail::new(code, e.to_string())
    }
}

impl From<CatalogError> for Fail {
    fn from(e: CatalogError) -> Self {
        use mcpoll_result::*;
        let code = match &e {
            CatalogError::UnknownServer => MCPOLL_UNKNOWN_SERVER,
            CatalogError::NotReady => MCPOLL_CATALOG_NOT_READY,
            CatalogError::Request(r) => return Fail::from(*r),
            CatalogError::Listing(c) => call_error(c),
            CatalogError::StaleTooLong { .. } => MCPOLL_CATALOG_STALE_TOO_LONG,
            CatalogError::TooManyRefreshes => MCPOLL_CATALOG_TOO_MANY_REFRESHES,
            CatalogError::Timeout => MCPOLL_CATALOG_TIMEOUT,
            CatalogError::Io(_) => MCPOLL_IO,
            _ => MCPOLL_UNKNOWN_ERROR,
        };
        Fail::new(code, e.to_string())
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
}
