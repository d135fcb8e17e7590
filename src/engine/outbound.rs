//! Outgoing frames: the control frames waiting to be written, and the route of each frame a
//! driver needs ([`Transmit`]).

use std::borrow::Cow;

use smallvec::SmallVec;

use super::headers::ParamHeaders;
use super::requests::SlotBufs;
use crate::error::RequestError;
use crate::proto::json::Kind;
use crate::proto::jsonrpc::WireId;
use crate::proto::mcp::Method;
use crate::proto::version::ProtocolVersion;

/// At most this many control frames wait to be written; past it they are dropped (and
/// counted in `Stats::control_dropped`).
pub(super) const MAX_CONTROL: usize = 256;

/// `tasks/cancel`s kept for a restarting server at most; more are dropped.
pub(super) const MAX_DEFERRED_TASK_CANCELS: usize = 64;

/// The host's answer to a server request, as it goes on the wire. An elicitation's content
/// is what a user typed (a password, a token): debug output shows its length only.
pub(super) struct HostAnswer(pub(super) String);

impl std::fmt::Debug for HostAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

/// A frame that is not a request: notifications and replies to server requests.
#[derive(Debug)]
pub(super) enum Control {
    Cancelled {
        id: WireId,
        /// The request is known to have gone (its response stream broke): the HTTP session
        /// does not look for it among its exchanges ([`Transmit::went`]).
        went: bool,
    },
    CloseStream {
        id: WireId,
    },
    Initialized,
    /// `notifications/roots/list_changed` (2025-11-25).
    RootsChanged,
    Reply {
        id: SmallVec<[u8; 24]>,
        ok: bool,
    },
    /// The host's answer to a server request.
    Answer {
        id: SmallVec<[u8; 24]>,
        result: HostAnswer,
    },
    /// An error reply to a server request: refused, rejected by the host, or timed out.
    Refuse {
        id: SmallVec<[u8; 24]>,
        code: i64,
        message: &'static str,
    },
    /// `tasks/cancel` for a task-backed call that ended locally; its reply is late.
    TaskCancel {
        id: WireId,
        task: String,
    },
}

/// One frame [`Engine::poll_transmit`] wrote, or one thing the transport must do, with its
/// full route: what an HTTP transport needs to address it, borrowed from the engine.
///
/// [`Engine::poll_transmit`]: crate::Engine::poll_transmit
#[derive(Debug, Clone, Copy)]
#[must_use]
pub struct Transmit<'a> {
    /// Bytes appended to the caller's buffer (0 for [`TransmitKind::CloseStream`]).
    pub len: usize,
    /// What the frame is.
    pub kind: TransmitKind,
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(super) version: Option<ProtocolVersion>,
    pub(super) name: NameRef<'a>,
    pub(super) method_name: &'a str,
    pub(super) params: ParamHeaders<'a>,
    /// A [`TransmitKind::Cancelled`] for a request known to have gone (its response stream
    /// broke): the HTTP session sends it although no exchange of its own says so.
    pub(super) went: bool,
}

impl<'a> Transmit<'a> {
    /// Whether a [`TransmitKind::Cancelled`] is for a request known to have reached the
    /// server (its response stream broke after it went).
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn went(&self) -> bool {
        self.went
    }

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
    /// Its bytes (UTF-8, as every name is written from a `&str`): the header encoder reads
    /// bytes, and a call's name needs no second UTF-8 check on its way to it.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn name(&self) -> Option<&'a [u8]> {
        let name = match self.name {
            NameRef::Text(text) => text.as_bytes(),
            NameRef::Slot(bufs) => bufs.name_bytes(),
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
    Slot(&'a SlotBufs),
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
    /// A notification (`notifications/roots/list_changed`, ...).
    Notification,
    /// `notifications/initialized`, the handshake's last message: a server may refuse a
    /// request that reaches it first, so a transport that can reorder (HTTP, one POST per
    /// message on several connections) sends no request until it was delivered.
    Initialized,
    /// `notifications/cancelled` for request `id`: a notification, which an HTTP session
    /// leaves unsent when the request itself never went (it waited for a connection), and
    /// sends past its bound on notification and reply POSTs.
    Cancelled {
        /// The wire id of the request it cancels.
        id: WireId,
    },
    /// A reply to a request the server sent.
    Response,
    /// Close the response stream of request `id` (HTTP cancellation); no bytes were written.
    CloseStream {
        /// The wire id of the request whose stream to close.
        id: WireId,
    },
}

/// The members of a `request_raw` params object (its text between the braces) split into
/// the members but `_meta`, and the members of its `_meta` objects but those whose key (read
/// unescaped, as a server reads it) the engine `writes` itself. The text is the host's
/// `RawValue`'s: valid JSON.
pub(super) fn split_meta(
    members: &str,
    writes: impl Fn(&str) -> bool,
) -> Result<(Cow<'_, str>, String), RequestError> {
    if !members.contains("_meta") {
        return Ok((Cow::Borrowed(members), String::new()));
    }
    let object = format!("{{{members}}}");
    let parsed =
        crate::proto::json::parse(object.as_bytes()).map_err(|_| RequestError::ArgumentsNotJson)?;
    let (mut rest, mut meta) = (String::new(), String::new());
    for (key, value) in parsed.members() {
        if key.eq_str("_meta") {
            if value.kind() != Kind::Object {
                return Err(RequestError::ArgumentsNotObject);
            }
            for (key, value) in value.members() {
                if writes(&key.as_str()) {
                    log::debug!("a _meta member the engine writes itself was left out");
                    continue;
                }
                push_member(&mut meta, key.raw(), value.text());
            }
            continue;
        }
        push_member(&mut rest, key.raw(), value.text());
    }
    Ok((Cow::Owned(rest), meta))
}

/// Adds `"key":value` (the key's text with its escapes, the value's JSON) to the members in
/// `out`.
fn push_member(out: &mut String, key: &str, value: &str) {
    if !out.is_empty() {
        out.push(',');
    }
    out.push('"');
    out.push_str(key);
    out.push_str("\":");
    out.push_str(value);
}
