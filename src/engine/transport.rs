//! What the transport reports ([`TransportEvent`]: opened, closed, an HTTP exchange that
//! failed, a legacy session that vanished), the kind of transport, and which failures are
//! refusals for want of authorization or broken response streams.

#[cfg(doc)]
use crate::config::Config;
#[cfg(feature = "http")]
use crate::error::LocalError;
use crate::error::{CallError, PeerError, TransportError};
use crate::proto::jsonrpc::WireId;

/// A refusal for want of authorization: credentials refused or missing, or an OAuth flow that
/// could not get a token.
pub(super) fn unauthorized(error: &CallError) -> bool {
    match error {
        CallError::Peer(PeerError::AuthRequired(_) | PeerError::Forbidden(_)) => true,
        #[cfg(feature = "http")]
        CallError::Peer(PeerError::Authorization(_)) => true,
        #[cfg(feature = "http")]
        CallError::Local(LocalError::OAuthSetup(_)) => true,
        CallError::Transport(TransportError::HttpStatus(401 | 403)) => true,
        _ => false,
    }
}

/// A response stream that ended without its answer after its request went: the server may
/// still be working on the request.
pub(super) fn stream_broke(error: &CallError) -> bool {
    // A lost connection, or what the retry policy counts as a reply lost with its stream.
    matches!(error, CallError::Transport(TransportError::ConnectionLost))
        || super::retry::reply_lost(error)
}

/// Something the transport reports to the engine. Built by drivers; opaque so the driver to
/// engine protocol can grow without breaking hosts.
#[derive(Debug, Clone)]
pub struct TransportEvent(pub(super) TransportEventInner);

#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
pub(super) enum TransportEventInner {
    Opened(TransportKind),
    Closed(TransportError),
    ExchangeFailed(WireId, ExchangeFailure),
    SessionExpired(WireId),
    SessionGone,
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
#[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
pub(crate) enum ExchangeFailure {
    /// The transport failed, or the server answered with a bare HTTP status.
    Transport(TransportError),
    /// The connection failed before any byte of the request left: a connect, or a TLS
    /// handshake (a certificate refused). Safe to send again, and nothing to cancel.
    Unsent(TransportError),
    /// HTTP 401, after the token provider was asked for a fresh token once.
    Unauthorized(crate::proto::challenge::AuthChallenge),
    /// HTTP 403.
    Forbidden(crate::proto::challenge::AuthChallenge),
    /// HTTP 401 or 403, and the OAuth flow failed to get a token the server accepts.
    #[cfg(feature = "http")]
    Authorization(Box<crate::error::oauth::AuthError>),
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
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn opened_as(kind: TransportKind) -> Self {
        Self(TransportEventInner::Opened(kind))
    }

    /// The transport is gone.
    pub fn closed(error: TransportError) -> Self {
        Self(TransportEventInner::Closed(error))
    }

    /// The exchange that carried request `id` ended without a reply.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn exchange_failed(id: WireId, failure: ExchangeFailure) -> Self {
        Self(TransportEventInner::ExchangeFailed(id, failure))
    }

    /// The legacy session that request `id` was sent on is gone (HTTP 404 on a request with a
    /// session id): the request was not processed.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn session_expired(id: WireId) -> Self {
        Self(TransportEventInner::SessionExpired(id))
    }

    /// The legacy session is gone, seen on none of the engine's requests (the GET stream got
    /// HTTP 404): a new one is made.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn session_gone() -> Self {
        Self(TransportEventInner::SessionGone)
    }
}
