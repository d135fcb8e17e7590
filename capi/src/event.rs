//! `mcpoll_event`: a host event as a plain C struct, its text borrowed from the host.

use std::ffi::c_char;
use std::io::Write;

use mcpoll::{
    CallError, ClientEvent, Event, HostEvent, ListKind, Method, ServerRequestKind, TransportError,
};

use crate::host::Entry;
use crate::mcpoll_result;
use crate::result::call_error;

/// What an event is.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mcpoll_event_kind {
    /// No event was queued (`mcpoll_next_event` filled nothing else).
    MCPOLL_EVENT_NONE = 0,
    /// The server is ready (again, after a restart); `data`: the protocol version.
    MCPOLL_EVENT_READY = 1,
    /// A call completed: `call`; `data`: the result object (JSON); `is_error`: the tool
    /// reported failure.
    MCPOLL_EVENT_CALL_DONE = 2,
    /// A call failed: `call`, `error`, `error_kind`, `error_name`, `error_message`; `data`:
    /// the JSON-RPC error's `data`, if any.
    MCPOLL_EVENT_CALL_FAILED = 3,
    /// A call's progress report: `call`, `progress`, `total`; `data`: the message.
    MCPOLL_EVENT_PROGRESS = 4,
    /// The server asks the host (answer with `mcpoll_answer` or `mcpoll_reject`):
    /// `request`, `request_kind`, `call` (0: none); `data`: the params (JSON).
    MCPOLL_EVENT_SERVER_REQUEST = 5,
    /// A server request is over before it was answered: `request`.
    MCPOLL_EVENT_SERVER_REQUEST_EXPIRED = 6,
    /// The pipe or connection was lost: `error...`; `restart_in_ms`.
    MCPOLL_EVENT_TRANSPORT_LOST = 7,
    /// The server is closed for good: `error...`.
    MCPOLL_EVENT_CLOSED = 8,
    /// The server says a list changed: `list_kind`.
    MCPOLL_EVENT_LIST_CHANGED = 9,
    /// The capability cache's tool catalog changed.
    MCPOLL_EVENT_TOOLS_CHANGED = 10,
    /// The capability cache's prompt catalog changed.
    MCPOLL_EVENT_PROMPTS_CHANGED = 11,
    /// The capability cache's resource catalog changed.
    MCPOLL_EVENT_RESOURCES_CHANGED = 12,
    /// A subscribed resource changed: `data`: its URI.
    MCPOLL_EVENT_RESOURCE_UPDATED = 13,
    /// A subscription was acknowledged: `call`; `data`: the notifications (JSON).
    MCPOLL_EVENT_SUBSCRIBED = 14,
    /// A circuit breaker changed state.
    MCPOLL_EVENT_BREAKER = 15,
    /// A call is held for the host's authorization (`mcpoll_set_policy`): `call`;
    /// `list_kind`: its method; `data`: the tool or prompt name, or the resource URI. Answer
    /// with `mcpoll_allow_call` or `mcpoll_deny_call`.
    MCPOLL_EVENT_AUTHORIZATION_ASKED = 16,
    /// An event this version of the C ABI does not describe further.
    MCPOLL_EVENT_OTHER = 99,
}

/// One host event. Every pointer in it points into the host and stays valid until the next
/// call that takes the host as `mcpoll_host *` (not `const`); copy what must live longer.
/// They are never null: "" when there is nothing to say.
#[repr(C)]
#[derive(Debug)]
pub struct mcpoll_event {
    /// What happened.
    pub kind: mcpoll_event_kind,
    /// The server it happened on.
    pub server: u64,
    /// The call it ends or reports on (0: none).
    pub call: u64,
    /// `SERVER_REQUEST`, `SERVER_REQUEST_EXPIRED`: the request's id, for `mcpoll_answer`.
    pub request: u64,
    /// `SERVER_REQUEST`: 1 form elicitation, 2 URL elicitation, 3 sampling, 4 roots.
    pub request_kind: u32,
    /// `LIST_CHANGED`: 1 tools, 2 prompts, 3 resources. `AUTHORIZATION_ASKED`: the held
    /// call's method, 1 `tools/call`, 2 `prompts/get`, 3 `resources/read`.
    pub list_kind: u32,
    /// `CALL_FAILED`, `TRANSPORT_LOST`, `CLOSED`: why (`MCPOLL_OK` otherwise).
    pub error: mcpoll_result,
    /// The error's kind: "protocol", "peer", "transport", "local" ("" without an error).
    pub error_kind: *const c_char,
    /// The error's name as the Rust API gives it ("cancelled", "process_exit", ...).
    pub error_name: *const c_char,
    /// The error in words.
    pub error_message: *const c_char,
    /// `MCPOLL_PROTOCOL`: the JSON-RPC error code.
    pub rpc_code: i64,
    /// `MCPOLL_TRANSPORT_PROCESS_EXIT`: the exit code, or -1.
    pub exit_code: i32,
    /// `MCPOLL_TRANSPORT_PROCESS_EXIT`: the signal that killed the process, or -1.
    pub exit_signal: i32,
    /// `TRANSPORT_LOST`: milliseconds until the restart, or -1 when none is planned.
    pub restart_in_ms: i64,
    /// `CALL_DONE`: the tool reported failure (`isError: true`); the call still completed.
    pub is_error: bool,
    /// `PROGRESS`: progress so far, and the total (NaN when unknown).
    pub progress: f64,
    /// See `progress`.
    pub total: f64,
    /// The event's text, NUL-terminated, `data_len` bytes before the NUL (a server's text
    /// may hold a NUL of its own, escaped as `\u0000` in its JSON: the JSON texts keep the
    /// escape, but a `PROGRESS` message or a `RESOURCE_UPDATED` URI is decoded, so compare
    /// those by `data_len`, not with `strcmp`): `CALL_DONE` the
    /// result object (JSON); `CALL_FAILED` the JSON-RPC error's `data` (JSON) if any;
    /// `SERVER_REQUEST` the request's params (JSON); `PROGRESS` the message;
    /// `AUTHORIZATION_ASKED` the tool or prompt name, or the resource URI; `READY` the
    /// protocol version; `RESOURCE_UPDATED` the URI; `SUBSCRIBED` the notifications (JSON).
    pub data: *const c_char,
    /// Length of `data` in bytes, without the NUL.
    pub data_len: usize,
}

/// The host's buffers an event's pointers point into.
#[derive(Debug, Default)]
pub(crate) struct EventBuffers {
    data: Vec<u8>,
    kind: Vec<u8>,
    name: Vec<u8>,
    message: Vec<u8>,
}

const EMPTY: *const c_char = c"".as_ptr();

impl mcpoll_event {
    /// An event of kind `NONE`, every pointer "".
    pub(crate) fn none() -> Self {
        Self {
            kind: mcpoll_event_kind::MCPOLL_EVENT_NONE,
            server: 0,
            call: 0,
            request: 0,
            request_kind: 0,
            list_kind: 0,
            error: mcpoll_result::MCPOLL_OK,
            error_kind: EMPTY,
            error_name: EMPTY,
            error_message: EMPTY,
            rpc_code: 0,
            exit_code: -1,
            exit_signal: -1,
            restart_in_ms: -1,
            is_error: false,
            progress: 0.0,
            total: f64::NAN,
            data: EMPTY,
            data_len: 0,
        }
    }
}

/// Room a reused text buffer keeps between uses; what one large result or listing grew it to
/// beyond this is given back at the next smaller use, not held for the host's life (as the
/// core's event arena does).
const KEEP: usize = 1 << 20;

/// Empties `buf` for a text of `next` bytes, giving back room past [`KEEP`] it will not need.
/// A text whose size is known only once written passes 0: the writing grows the buffer again
/// where it must.
pub(crate) fn clear_for(buf: &mut Vec<u8>, next: usize) {
    buf.clear();
    if buf.capacity() > KEEP && next < KEEP {
        buf.shrink_to(KEEP);
    }
}

/// Sets `buf` to `text` plus a NUL (inner NULs stay: `data_len` says where the text ends).
fn put(buf: &mut Vec<u8>, text: &[u8]) -> *const c_char {
    clear_for(buf, text.len());
    buf.extend_from_slice(text);
    buf.push(0);
    buf.as_ptr().cast()
}

/// Fills `out` from one Rust event of the server `entry`, keeping the id tables current.
pub(crate) fn fill(
    out: &mut mcpoll_event,
    bufs: &mut EventBuffers,
    entry: &mut Entry,
    event: HostEvent<'_>,
) {
    use mcpoll_event_kind::*;
    *out = mcpoll_event::none();
    out.server = entry.id;
    let mut data = |out: &mut mcpoll_event, text: &[u8]| {
        out.data = put(&mut bufs.data, text);
        out.data_len = text.len();
    };
    match event {
        Event::Ready { version, .. } => {
            out.kind = MCPOLL_EVENT_READY;
            data(out, version.as_str().as_bytes());
        }
        Event::CallDone { call, result, .. } => {
            out.kind = MCPOLL_EVENT_CALL_DONE;
            out.call = call.get();
            out.is_error = result.is_error();
            entry.call_ended(call.get());
            data(out, result.json().as_bytes());
        }
        Event::CallFailed { call, error, .. } => {
            out.kind = MCPOLL_EVENT_CALL_FAILED;
            out.call = call.get();
            entry.call_ended(call.get());
            if let CallError::Protocol(rpc) = &error {
                if let Some(d) = &rpc.data {
                    data(out, d.as_bytes());
                }
            }
            set_error(out, bufs, &error);
        }
        Event::Progress { call, progress, total, message } => {
            out.kind = MCPOLL_EVENT_PROGRESS;
            out.call = call.get();
            out.progress = progress;
            out.total = total.unwrap_or(f64::NAN);
            data(out, message.unwrap_or("").as_bytes());
        }
        Event::Subscribed { call, notifications } => {
            out.kind = MCPOLL_EVENT_SUBSCRIBED;
            out.call = call.get();
            data(out, notifications.as_bytes());
        }
        Event::ServerRequest { request, kind, call, params } => {
            out.kind = MCPOLL_EVENT_SERVER_REQUEST;
            out.request = request.get();
            out.request_kind = match kind {
                ServerRequestKind::ElicitationForm => 1,
                ServerRequestKind::ElicitationUrl => 2,
                ServerRequestKind::Sampling => 3,
                ServerRequestKind::Roots => 4,
                _ => 0,
            };
            out.call = call.map_or(0, |c| c.get());
            entry.requests.insert(request.get(), (request, out.call));
            data(out, params.as_bytes());
        }
        Event::ServerRequestExpired { request } => {
            out.kind = MCPOLL_EVENT_SERVER_REQUEST_EXPIRED;
            out.request = request.get();
            entry.requests.remove(&request.get());
        }
        Event::TransportLost { error, restart_in } => {
            out.kind = MCPOLL_EVENT_TRANSPORT_LOST;
            out.restart_in_ms =
                restart_in.map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            set_error(out, bufs, &error);
        }
        Event::Closed { error } => {
            out.kind = MCPOLL_EVENT_CLOSED;
            set_error(out, bufs, &error);
        }
        Event::ListChanged(kind) => {
            out.kind = MCPOLL_EVENT_LIST_CHANGED;
            out.list_kind = match kind {
                ListKind::Tools => 1,
                ListKind::Prompts => 2,
                ListKind::Resources => 3,
            };
        }
        Event::Client(ClientEvent::ToolsChanged(_)) => out.kind = MCPOLL_EVENT_TOOLS_CHANGED,
        Event::Client(ClientEvent::PromptsChanged(_)) => out.kind = MCPOLL_EVENT_PROMPTS_CHANGED,
        Event::Client(ClientEvent::ResourcesChanged(_)) => {
            out.kind = MCPOLL_EVENT_RESOURCES_CHANGED
        }
        Event::ResourceUpdated { uri } => {
            out.kind = MCPOLL_EVENT_RESOURCE_UPDATED;
            data(out, uri.as_bytes());
        }
        Event::Breaker { .. } => out.kind = MCPOLL_EVENT_BREAKER,
        Event::Client(ClientEvent::AuthorizationAsked { call, method, name, .. }) => {
            out.kind = MCPOLL_EVENT_AUTHORIZATION_ASKED;
            out.call = call.get();
            out.list_kind = match method {
                Method::ToolsCall => 1,
                Method::PromptsGet => 2,
                Method::ResourcesRead => 3,
                _ => 0,
            };
            data(out, name.as_bytes());
        }
        _ => out.kind = MCPOLL_EVENT_OTHER,
    }
}

fn set_error(out: &mut mcpoll_event, bufs: &mut EventBuffers, error: &CallError) {
    out.error = call_error(error);
    out.error_kind = put(&mut bufs.kind, error.kind().as_bytes());
    out.error_name = put(&mut bufs.name, error.name().as_bytes());
    clear_for(&mut bufs.message, 0);
    let _ = write!(bufs.message, "{error}");
    for b in bufs.message.iter_mut().filter(|b| **b == 0) {
        *b = b' ';
    }
    bufs.message.push(0);
    out.error_message = bufs.message.as_ptr().cast();
    match error {
        CallError::Protocol(rpc) => out.rpc_code = rpc.code,
        CallError::Transport(TransportError::ProcessExit(x)) => {
            out.exit_code = x.code.unwrap_or(-1);
            out.exit_signal = x.signal.unwrap_or(-1);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One large text does not keep its room for the host's life: the next small one gives
    /// it back (an 8 MiB result left 8 MiB held by every later event).
    #[test]
    fn a_buffer_grown_by_one_large_text_gives_the_room_back() {
        let mut buf = Vec::new();
        put(&mut buf, &vec![b'x'; 8 << 20]);
        assert!(buf.capacity() > 8 << 20);
        put(&mut buf, b"{}");
        assert!(buf.capacity() <= KEEP, "{}", buf.capacity());
        assert_eq!(buf, b"{}\0");
        let small = buf.capacity();
        put(&mut buf, &[b'y'; 100]);
        assert_eq!(buf.capacity(), small, "small texts reuse the room they have");
    }

    /// Nor does one large error message (a server's JSON-RPC error may carry up to
    /// `max_message_bytes`, 16 MiB by default): the message buffer was emptied without
    /// giving its room back.
    #[test]
    fn a_large_error_message_gives_its_room_back() {
        let mut bufs = EventBuffers::default();
        let error = |message: String| {
            CallError::Protocol(mcpoll::RpcError { code: 1, message: message.into(), data: None })
        };
        set_error(&mut mcpoll_event::none(), &mut bufs, &error("x".repeat(8 << 20)));
        assert!(bufs.message.capacity() > 8 << 20);
        set_error(&mut mcpoll_event::none(), &mut bufs, &error("short".into()));
        assert!(bufs.message.capacity() <= KEEP, "{}", bufs.message.capacity());
        assert_eq!(bufs.message, b"server error: short (1)\0");
    }
}
