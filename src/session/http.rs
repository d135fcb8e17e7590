//! Streamable HTTP as a session, without sockets or a clock (PROTOCOL.md §3 for 2026-07-28,
//! §6.2 for 2025-11-25).
//!
//! The session pumps the engine itself: [`HttpSession::handle_timeout`] takes the engine's
//! transmits and whatever is due. The driver, which calls no engine verb after setup, moves
//! bytes: it takes exchanges ([`HttpSession::poll_exchange`]), has the session write each
//! one's request ([`HttpSession::write_request`]), and hands it the connection's response
//! parser ([`HttpSession::handle_response`]), or says what else happened, the exchange failed
//! for one ([`HttpSession::handle_event`]); this module parses what the bytes say and tells the engine
//! what it means. The verbs follow quinn-proto's
//! `Connection`: `handle_*` for inputs, `poll_*` for outputs, one `handle_timeout`, and
//! `poll_timeout`. Decided here: the headers each era gets, when a session id is adopted
//! and when the session is gone, the one token refresh after a 401 (or, with OAuth configured,
//! when the flow runs and what waits for it: see [`oauth`]), the legacy GET stream's schedule,
//! resuming a legacy POST's event stream, and when to try another instance.
//!
//! Time comes in as `now`; [`HttpSession::poll_timeout`] says when it next needs waking.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use crate::auth::oauth::{HttpResponse, RequestId};
use crate::codec::http1::{
    self, HeaderName, HttpError, Origin, Preset, RequestHead, ResponseEvent, ResponseParser,
    NO_PRESET,
};
use crate::codec::sse::SseParser;
use crate::engine::{
    Engine, ExchangeFailure, ParamHeaderList, ServerState, Transmit, TransmitKind, TransportEvent,
    TransportKind, WireId,
};
use crate::error::TransportError;
use crate::proto::challenge::AuthChallenge;
use crate::proto::jsonrpc::{self, Message};
use crate::proto::mcp::Method;
use crate::proto::version::{Era, ProtocolVersion};
use crate::time::later;

/// Supplies bearer tokens. mcpoll never logs them.
pub trait TokenProvider: fmt::Debug {
    /// The token to send now, if any.
    fn token(&mut self) -> Option<String>;
    /// The server refused the last token (HTTP 401): a fresh one, or `None` to give up.
    fn refresh(&mut self) -> Option<String>;
    /// What tells this provider's tokens apart for the capability cache, when it is fixed:
    /// a static token's value. Two servers at one URL with different tokens may list
    /// different tools, so they are different servers to the cache (only a fingerprint of
    /// this is kept). `None` (the default): the URL and headers alone name the server; a
    /// provider whose tokens stand for different users should set `Config::cache_identity`.
    fn cache_context(&self) -> Option<&str> {
        None
    }
}

/// A fixed token (the `--bearer` case): refreshing yields nothing new.
#[derive(Clone)]
pub struct StaticToken(pub String);

impl fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StaticToken(<redacted>)")
    }
}

impl TokenProvider for StaticToken {
    fn token(&mut self) -> Option<String> {
        Some(self.0.clone())
    }
    fn refresh(&mut self) -> Option<String> {
        None
    }
    fn cache_context(&self) -> Option<&str> {
        Some(&self.0)
    }
}

/// What the driver tells the session besides a response's bytes
/// ([`HttpSession::handle_response`]): one verb for every other input
/// ([`HttpSession::handle_event`]), as quinn-proto's `Connection::handle_event`.
#[derive(Debug)]
pub(crate) enum SessionEvent<'a> {
    /// The exchange ended without a complete response: its connection broke or could not be
    /// made, or its response was unreadable or too large.
    Failed(ExchangeId, ExchangeFailure),
    /// The exchange is forgotten without a word to the engine: its connection was closed on
    /// purpose (a cancellation, the server closed).
    Abandoned(ExchangeId),
    /// The next waiting exchange could get no connection: it fails.
    NoConnection(ExchangeFailure),
    /// No waiting exchange can get a connection (the server's name did not resolve, or not
    /// in time): each fails.
    Unreachable(ExchangeFailure),
    /// A readiness turn stopped with input left for lack of budget (bytes or parsed units):
    /// the engine counts it.
    Yield,
    /// What the wall clock reads now, in seconds since the Unix epoch: the OAuth flow's
    /// token lifetimes count in it.
    WallClock(u64),
    /// What became of the OAuth flow's request ([`HttpSession::poll_oauth_request`]).
    OAuth(RequestId, OAuthAnswer<'a>),
}

/// What became of one of the OAuth flow's requests.
#[derive(Debug)]
pub(crate) enum OAuthAnswer<'a> {
    /// Its response.
    Response(HttpResponse<'a>),
    /// It could not be made or its response not read; the error its connection failed
    /// with, when it did.
    Failed(Option<TransportError>),
}

/// The wait before a stream is reopened when the server named none.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// How long a response stream may go on after it brought its request's reply before its
/// connection is closed (the spec says the server should end it then).
const REPLY_LINGER: Duration = Duration::from_secs(1);
/// Bounds on the server's `retry:`: `retry: 0` on a stream that ends at once must not become
/// a reconnect loop, and a huge value must not park a call for good.
const MIN_RETRY_MS: u64 = 250;
const MAX_RETRY_MS: u64 = 60_000;
/// Resumes of one POST's stream in a row that brought no new event id: after that the reply
/// is taken as lost.
const MAX_IDLE_RESUMES: u32 = 3;
/// How long the answer to a notification or a reply POST (a `202`) may take before its
/// connection is closed: no call's deadline bounds it, and a server that never answers would
/// keep a connection of the pool for good.
const MESSAGE_WAIT: Duration = Duration::from_secs(30);
/// Notification and reply POSTs that may wait or be in flight at once (the engine's own
/// queue of such frames holds as many).
const MAX_MESSAGES: usize = 256;
/// The longest `Location` followed; a longer one fails its request with its status.
const MAX_LOCATION: usize = 2048;

/// One exchange (a request and its response, maybe resumed), as the driver names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExchangeId(usize);

/// What one readiness turn may still do with a connection's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Messages still to hand to the engine (`Config::frames_per_readiness`).
    pub(crate) frames: usize,
    /// Parsed units still allowed, whatever they deliver: HTTP heads and body pieces, SSE
    /// lines (comments, blank lines, `id:` alone). A flood of those delivers no message, so
    /// the frame budget alone would never stop it.
    pub(crate) units: usize,
}

impl Budget {
    /// Nothing more may be taken this turn.
    pub(crate) fn spent(&self) -> bool {
        self.frames == 0 || self.units == 0
    }
}

/// Where a connection stands after [`HttpSession::handle_response`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResponseStep {
    /// The parser needs more bytes.
    More,
    /// The turn's budget is spent with input left (in the parser or parsed in the exchange):
    /// stop reading the connection, and call again on the next budget.
    Backlog,
    /// The response ended. `keep_alive`: the server lets the connection carry another.
    Ended { keep_alive: bool },
    /// The exchange is over before its response ended (the response is broken or too large,
    /// or its reply came on a resumed stream): the connection cannot carry another and closes.
    Close,
}

/// The headers of one request, in the order they are written.
pub(crate) type PlanHeaders<'a> = SmallVec<[(HeaderName<'a>, &'a [u8]); 16]>;

/// How to write one request.
#[derive(Debug)]
pub(crate) struct RequestPlan<'a> {
    pub(crate) method: &'static str,
    /// Constant header lines written before `headers` ([`RequestHead::preset`]).
    ///
    /// [`RequestHead::preset`]: crate::codec::http1::RequestHead::preset
    pub(crate) preset: Preset,
    pub(crate) headers: PlanHeaders<'a>,
    pub(crate) body: &'a [u8],
}

/// What [`HttpSession::plan_into`] decides beside the headers it pushes.
#[derive(Debug, Clone, Copy)]
struct PlanHead<'a> {
    method: &'static str,
    preset: Preset,
    body: &'a [u8],
}

/// The constant header lines of a POST or a GET, and the negotiated version's line
/// ([`ProtocolVersion::header_line`]): a request copies them in two pieces instead of writing
/// four headers. `Accept-Encoding: identity`, since a request without one accepts any content
/// coding (RFC 9110 12.5.3) and the client decodes none.
fn preset(get: bool, version: Option<ProtocolVersion>) -> Preset {
    let lines: &'static str = if get {
        "Accept: text/event-stream\r\nAccept-Encoding: identity\r\n"
    } else {
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Accept-Encoding: identity\r\n"
    };
    [lines.as_bytes(), version.map_or("", ProtocolVersion::header_line).as_bytes()]
}

/// The names of the headers the session writes, checked when the crate is built.
mod names {
    use crate::codec::http1::HeaderName;

    pub(super) const PROTOCOL_VERSION: HeaderName<'static> =
        HeaderName::fixed("MCP-Protocol-Version");
    pub(super) const METHOD: HeaderName<'static> = HeaderName::fixed("Mcp-Method");
    pub(super) const NAME: HeaderName<'static> = HeaderName::fixed("Mcp-Name");
    pub(super) const SESSION_ID: HeaderName<'static> = HeaderName::fixed("Mcp-Session-Id");
    pub(super) const AUTHORIZATION: HeaderName<'static> = HeaderName::fixed("Authorization");
    pub(super) const DPOP: HeaderName<'static> = HeaderName::fixed("DPoP");
    pub(super) const LAST_EVENT_ID: HeaderName<'static> = HeaderName::fixed("Last-Event-ID");
}

/// The host's own headers (`HttpOptions::headers`), whose names the driver's setup refused
/// unless they were tokens it does not own.
///
/// With a token of the session's (`token`: the `Authorization` it writes itself), a host
/// header of that name is left out: two would be refused by servers and proxies, or one of
/// them picked at random. The token is the one the host asked for last (a `--bearer` beside a
/// configuration file's header).
fn host_headers(
    headers: &[(String, String)],
    token: bool,
) -> impl Iterator<Item = (HeaderName<'_>, &[u8])> + '_ {
    let replaced = move |n: &str| token && n.eq_ignore_ascii_case("authorization");
    headers
        .iter()
        .filter(move |(n, _)| !replaced(n))
        .filter_map(|(n, v)| Some((HeaderName::new(n).ok()?, v.as_bytes())))
}

/// The fields of a response head the session reads.
#[derive(Debug, Clone, Default)]
struct ResponseHead<'a> {
    status: u16,
    content_type: Option<&'a [u8]>,
    session_id: Option<&'a [u8]>,
    /// The `Bearer` and `DPoP` challenges of a 401 or 403, from every `WWW-Authenticate`.
    challenge: Option<crate::proto::challenge::AuthChallenge>,
    /// `DPoP-Nonce` (read only when [`HttpSession::reads_dpop_nonce`]).
    dpop_nonce: Option<&'a [u8]>,
    /// `Location` of a 307 or 308 (read for those only).
    location: Option<&'a [u8]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carries {
    Request {
        id: WireId,
        method: Method,
    },
    /// A notification or a reply to a server request: 202 expected, nothing to report.
    Message,
    /// The legacy server-to-client GET stream.
    Listen,
}

/// The connection an exchange waiting to be sent needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnNeed {
    /// One of the pool (`HttpOptions::max_connections`).
    Pool,
    /// One of the pool, or one connection past its limit: an answer to the server's request,
    /// or a notification, which the calls holding every pooled connection may be waiting for.
    PoolOrSpare,
    /// One of its own, outside the pool: the legacy GET stream and a 2026 listen, which end
    /// only with their subscription.
    Own,
}

/// Where an exchange is in its life, with what only that stage needs. A byte tag (no niche
/// in the `Instant`) keeps each look at the stage one compare on the per-call path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Stage {
    Free,
    /// Queued for a connection: what the next send is.
    Waiting(Attempt),
    /// On a connection: its request written (or being written) and its response read.
    InFlight(Flight),
    /// A GET that resumes the response stream is due at this time.
    Resume(Instant),
    /// Refused for want of a token: waits for the OAuth flow's outcome, then sends this.
    Parked(Attempt),
}

/// What a send of an exchange is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// Its request (a POST), or the legacy GET stream.
    Send,
    /// A GET with `Last-Event-ID` that resumes a legacy request's response stream.
    Resume,
}

/// One send of an exchange on a connection, and what its response has shown so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flight {
    attempt: Attempt,
    /// The session whose `Mcp-Session-Id` the request carried ([`HttpSession::session_gen`]
    /// when it was sent; 0: none), so a 404 says which session is gone.
    session: u32,
    /// The request's event stream brought its reply.
    answered: bool,
    /// This response brought a new event id.
    progressed: bool,
    /// An event of this response was over the size cap, and dropped.
    oversize: bool,
    /// The request was written to its connection ([`HttpSession::write_request`]): one taken
    /// for a connection still opening (TCP, a proxy's tunnel, TLS) has not reached the server.
    written: bool,
}

impl Flight {
    #[inline(always)]
    fn new(attempt: Attempt) -> Self {
        Self {
            attempt,
            session: 0,
            answered: false,
            progressed: false,
            oversize: false,
            written: false,
        }
    }
}

/// Room an exchange's buffers keep between requests; more is given back when it is freed.
const SLOT_BUF_KEEP: usize = 256 * 1024;

/// A resend an exchange gets at most once; [`Exchange::resent`] is a set of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resend {
    /// After a 401, with a fresh token from the provider.
    FreshToken = 1,
    /// After a 401 `use_dpop_nonce`, with the server's DPoP nonce.
    DpopNonce = 2,
    /// After a 401, with the token an OAuth flow run for it got. The flow's own limit on
    /// re-authorizations starts over at any other request's success, so without this one
    /// request the server keeps refusing would run a flow per round until its deadline.
    OAuthFlow = 4,
    /// After a second 401 whose challenge names other resource metadata than the first flow
    /// followed: the resource moved to another authorization server (SEP-2352), which only a
    /// flow that follows the new metadata can find out.
    OAuthMoved = 8,
    /// After a 404 from a session the client has already replaced: the request goes again in
    /// the current one.
    OldSession = 16,
    /// After a 307 or 308 to another path of the same origin: the request goes again to it.
    Redirect = 32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyMode {
    Json,
    Sse,
}

#[derive(Debug)]
struct Exchange {
    carries: Carries,
    stage: Stage,
    body: Vec<u8>,
    /// `Mcp-Name`, already encoded for a header.
    name: Vec<u8>,
    /// `Mcp-Method` of an extension request (printable ASCII, checked by the engine).
    method: Vec<u8>,
    params: ParamHeaderList,
    version: Option<ProtocolVersion>,
    modern: bool,
    /// The [`Resend`]s this exchange has had (each once only), as a bit set.
    resent: u8,
    /// The OAuth token generation this exchange was last sent with, if it carried one.
    token_gen: Option<u64>,
    /// The `resource_metadata` of the 401 challenge whose flow this exchange waited for
    /// ([`Resend::OAuthFlow`]), to tell a moved resource from the same refusal again.
    flowed_for: Option<String>,
    idle_resumes: u32,
    /// The session its broken stream belongs to (the [`Flight::session`] of the send that
    /// broke), while it waits to be resumed: a stream dies with its session.
    stream_session: u32,
    // The response being read.
    status: u16,
    mode: BodyMode,
    reply: Vec<u8>,
    sse: SseParser,
    challenge: Option<AuthChallenge>,
    /// The `Location` of a 307 or 308 answering the request, until its response ends.
    location: Option<Box<str>>,
    /// A legacy request's stream: the last event id seen, and the server's `retry:`.
    stream_id: String,
    retry_ms: Option<u64>,
    /// The response brought the request's reply but goes on, or the exchange carries a
    /// notification or a reply (nobody waits for its answer): its connection is closed at
    /// this time if the response has not ended by then.
    lingers_until: Option<Instant>,
}

impl Exchange {
    /// The call this exchange carries was answered (in flight): the stream should end now,
    /// and if it does not, its connection is closed a grace later. `true` when that grace
    /// starts here (the caller counts it in `lingering`).
    fn answered(&mut self, now: Instant) -> bool {
        let Stage::InFlight(f) = &mut self.stage else { return false };
        let starts = !f.answered && self.lingers_until.is_none();
        f.answered = true;
        if starts {
            self.lingers_until = Some(later(now, REPLY_LINGER));
        }
        starts
    }

    fn new(max_event: usize) -> Self {
        Self {
            carries: Carries::Message,
            stage: Stage::Free,
            body: Vec::new(),
            name: Vec::new(),
            method: Vec::new(),
            params: ParamHeaderList::default(),
            version: None,
            modern: false,
            resent: 0,
            token_gen: None,
            flowed_for: None,
            idle_resumes: 0,
            stream_session: 0,
            status: 0,
            mode: BodyMode::Json,
            reply: Vec::new(),
            sse: SseParser::new(max_event),
            challenge: None,
            location: None,
            stream_id: String::new(),
            retry_ms: None,
            lingers_until: None,
        }
    }

    /// Starts the exchange afresh, all but its body, which the caller fills or clears (the
    /// engine writes a transmit straight into it).
    fn reset(&mut self, carries: Carries, version: Option<ProtocolVersion>, modern: bool) {
        self.carries = carries;
        self.name.clear();
        self.method.clear();
        self.params.clear();
        self.version = version;
        self.modern = modern;
        self.resent = 0;
        self.token_gen = None;
        self.flowed_for = None;
        self.idle_resumes = 0;
        self.stream_id.clear();
        self.retry_ms = None;
        // The last response's status belongs to the exchange this slot carried before: read
        // by a failure before any response (a refused connect), it made the GET stream look
        // served, and it was asked again every second while the server was down.
        self.status = 0;
        self.mode = BodyMode::Json;
        self.location = None;
    }

    /// The send this exchange waits for or is on (a free one: [`Attempt::Send`]).
    #[inline(always)]
    fn attempt(&self) -> Attempt {
        match self.stage {
            Stage::Waiting(a) | Stage::Parked(a) => a,
            Stage::InFlight(f) => f.attempt,
            Stage::Resume(_) => Attempt::Resume,
            Stage::Free => Attempt::Send,
        }
    }

    /// The send is a GET with `Last-Event-ID` that resumes the response stream.
    #[inline(always)]
    fn resuming(&self) -> bool {
        self.attempt() == Attempt::Resume
    }

    /// The current send, when the exchange is on a connection (a fresh one otherwise).
    #[inline(always)]
    fn flight(&self) -> Flight {
        match self.stage {
            Stage::InFlight(f) => f,
            _ => Flight::new(self.attempt()),
        }
    }

    #[inline(always)]
    fn flight_mut(&mut self) -> Option<&mut Flight> {
        match &mut self.stage {
            Stage::InFlight(f) => Some(f),
            _ => None,
        }
    }

    /// Sends again as it was sent: queued, the same kind of send.
    fn requeue(&mut self) {
        self.stage = Stage::Waiting(self.attempt());
    }

    /// Gives back the room a large request or response grew the slot's buffers to: slots
    /// are reused for the session's life, and one reply of many megabytes left each slot it
    /// passed through holding them for good.
    fn shed(&mut self) {
        if self.reply.capacity() > SLOT_BUF_KEEP {
            self.reply = Vec::new();
        }
        if self.body.capacity() > SLOT_BUF_KEEP {
            self.body = Vec::new();
        }
        self.sse.shed(SLOT_BUF_KEEP);
    }

    fn has_resent(&self, r: Resend) -> bool {
        self.resent & r as u8 != 0
    }

    /// Whether a 401 with `challenge` may run an OAuth flow for this exchange, noting it
    /// when it may: the first 401 may, and one more whose challenge names other resource
    /// metadata (the resource moved); a 401 to the token a flow got for it is its answer.
    fn may_flow_for(&mut self, challenge: &AuthChallenge) -> bool {
        let names = challenge.resource_metadata.as_deref();
        let step = if !self.has_resent(Resend::OAuthFlow) {
            Resend::OAuthFlow
        } else if !self.has_resent(Resend::OAuthMoved) && names != self.flowed_for.as_deref() {
            Resend::OAuthMoved
        } else {
            return false;
        };
        self.resent |= step as u8;
        self.flowed_for = names.map(str::to_owned);
        true
    }

    /// A legacy request whose event stream named an id can be resumed (§6.2 Resumption;
    /// 2026-07-28 has no resumption).
    fn resumable(&self) -> bool {
        // A resume that broke before its head (written, then the connection or its TLS
        // handshake reset) still stands for the 2xx event stream it resumes: only such a
        // stream is resumed. Its request being written had made it look like no stream.
        matches!(self.carries, Carries::Request { .. })
            && !self.modern
            && !self.flight().answered
            && !self.stream_id.is_empty()
            && ((self.mode == BodyMode::Sse && (200..300).contains(&self.status))
                || (self.resuming() && self.status == 0))
            && (self.flight().progressed || self.idle_resumes + 1 < MAX_IDLE_RESUMES)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listen {
    /// Not wanted (modern era, or not ready yet).
    Off,
    /// Open it at this time.
    At(Instant),
    /// Opened (queued) at this time.
    Open(Instant),
    /// The server has none (405) or refused it: never again for this session.
    Unsupported,
}

/// The MCP side of one Streamable HTTP server: exchanges waiting and in flight, the legacy
/// session, the GET stream, credentials. `Debug` shows none of the credentials (the bearer
/// token, the host's header values, the session id) nor message bodies.
pub(crate) struct HttpSession {
    exchanges: Vec<Exchange>,
    free: Vec<usize>,
    waiting: VecDeque<usize>,
    /// Exchanges in [`Stage::Resume`].
    scheduled: usize,
    /// Exchanges with a time their connection is closed at ([`Exchange::lingers_until`]).
    lingering: usize,
    /// `initialize` exchanges not yet over: while there is one, nothing else is sent.
    initializing: usize,
    /// The exchange carrying the handshake's `notifications/initialized` until it is over
    /// (answered or failed): requests wait for it ([`peek_waiting`](Self::peek_waiting)).
    announcing: Option<usize>,
    /// A session with an id is being made anew: from its `initialize` until the engine takes
    /// a handshake's result (its `notifications/initialized`), even while it waits to send
    /// the `initialize` again (a timeout, a 503), no legacy request goes (it would carry no
    /// session id, or the next one before its handshake ended, and the server would refuse
    /// it). A modern transmit (the era probed anew) ends it too.
    renewing: bool,
    /// Exchanges carrying a notification or a reply, not yet over (at most [`MAX_MESSAGES`]).
    messages: usize,
    session_id: Option<String>,
    /// Counts the session ids adopted (from 1): a flight notes the one it carried.
    session_gen: u32,
    /// The protocol version the legacy session's requests carried (for its `DELETE`).
    session_version: Option<ProtocolVersion>,
    listen: Listen,
    listen_retry: Duration,
    /// Ends of the GET stream in a row that it was not served (refused, or no connection).
    listen_failures: u32,
    /// A GET stream's 404 made the session anew, and no stream was served since: another
    /// 404 means the server has no GET stream, not that this session is gone too.
    listen_renewed: bool,
    listen_event_id: Option<String>,
    tokens: Option<Box<dyn TokenProvider>>,
    /// The OAuth flow, when the host configured one: it supplies the tokens then.
    oauth: Option<oauth::OAuthState>,
    /// `Bearer <token>` or `DPoP <token>`, or empty.
    bearer: Vec<u8>,
    headers: Vec<(String, String)>,
    max_body: usize,
    /// Exchanges in flight whose connection the driver must close (2026-07-28 cancellation
    /// closes the response stream), for [`poll_close`](Self::poll_close).
    closing: Vec<ExchangeId>,
    /// Where a redirect the session followed leads, for the driver
    /// ([`take_moved`](Self::take_moved)).
    moved: Option<String>,
}

impl fmt::Debug for HttpSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: SmallVec<[&str; 8]> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpSession")
            .field("exchanges", &self.exchanges.len())
            .field("waiting", &self.waiting.len())
            .field("scheduled", &self.scheduled)
            .field("session", &self.session_id.as_ref().map(|_| "<redacted>"))
            .field("session_version", &self.session_version)
            .field("listen", &self.listen)
            .field("bearer", &(!self.bearer.is_empty()).then_some("<redacted>"))
            .field("header_names", &headers)
            .field("oauth", &self.oauth.is_some())
            .finish_non_exhaustive()
    }
}

/// What an [`HttpSession`] starts with.
pub(crate) struct SessionSetup {
    /// Sent on every request.
    pub(crate) headers: Vec<(String, String)>,
    /// Bearer tokens, unless `oauth` runs.
    pub(crate) tokens: Option<Box<dyn TokenProvider>>,
    /// Bodies and events larger than this are refused.
    pub(crate) max_body: usize,
    /// The OAuth flow for this server: tokens come from it, and a 401 (or a 403 asking for
    /// more scope) starts it instead of failing the request.
    pub(crate) oauth: Option<OAuthState>,
}

/// The token provider's first token could not go in a header: it holds a CR, LF or NUL,
/// which would break the request head or smuggle a header into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadBearerToken;

impl HttpSession {
    /// The session of `setup`, and the engine told its transport is open (Streamable HTTP
    /// needs no connection before the first request).
    pub(crate) fn open(
        setup: SessionSetup,
        engine: &mut Engine,
        now: Instant,
    ) -> Result<Self, BadBearerToken> {
        let mut session = Self::new(setup.headers, setup.tokens, setup.max_body)?;
        if let Some(state) = setup.oauth {
            session.with_oauth(now, state);
        }
        engine.handle_transport(now, TransportEvent::opened_as(TransportKind::Http));
        Ok(session)
    }

    /// A session that sends `headers` on every request, bearer tokens from `tokens`, and
    /// refuses bodies and events larger than `max_body`.
    fn new(
        headers: Vec<(String, String)>,
        mut tokens: Option<Box<dyn TokenProvider>>,
        max_body: usize,
    ) -> Result<Self, BadBearerToken> {
        let mut session = Self {
            exchanges: Vec::new(),
            free: Vec::new(),
            waiting: VecDeque::with_capacity(64),
            scheduled: 0,
            lingering: 0,
            initializing: 0,
            announcing: None,
            renewing: false,
            messages: 0,
            session_id: None,
            session_gen: 0,
            session_version: None,
            listen: Listen::Off,
            listen_retry: DEFAULT_RETRY,
            listen_failures: 0,
            listen_renewed: false,
            listen_event_id: None,
            bearer: Vec::new(),
            headers,
            max_body,
            tokens: None,
            oauth: None,
            closing: Vec::new(),
            moved: None,
        };
        let token = tokens.as_mut().and_then(|t| t.token());
        if !session.set_token(token) {
            return Err(BadBearerToken);
        }
        session.tokens = tokens;
        Ok(session)
    }

    /// Takes `token` for the `Authorization` header; `false` (and no header) when it holds a
    /// CR, LF or NUL, which would break the request head or smuggle a header into it.
    fn set_token(&mut self, token: Option<String>) -> bool {
        self.set_token_as(token, false)
    }

    /// [`set_token`](Self::set_token), with the `DPoP` scheme for a DPoP-bound token.
    fn set_token_as(&mut self, token: Option<String>, dpop: bool) -> bool {
        self.bearer.clear();
        let Some(t) = token else { return true };
        if t.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
            log::debug!("refusing a bearer token with a line break or NUL in it");
            return false;
        }
        self.bearer.extend_from_slice(if dpop { b"DPoP " } else { b"Bearer " });
        self.bearer.extend_from_slice(t.as_bytes());
        true
    }

    /// Whether an OAuth flow is set up (until [`close`](Self::close) drops it).
    pub(crate) fn has_oauth(&self) -> bool {
        self.oauth.is_some()
    }

    /// The legacy session id, when the server issued one.
    pub(crate) fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// How to write the `DELETE` that ends the legacy session (§6.2), when there is one. It
    /// carries what every request of the session carries: `Mcp-Session-Id`, the negotiated
    /// `MCP-Protocol-Version`, the bearer token (§8: on every request, with its DPoP proof for
    /// `htu`) and the host's headers.
    fn end_plan(&mut self, now: Instant, htu: &str) -> Option<RequestPlan<'_>> {
        let proof = self.oauth.as_mut().and_then(|o| o.resource_proof(now, "DELETE", htu));
        let session = self.session_id.as_deref()?;
        let mut headers = PlanHeaders::new();
        if let Some(v) = self.session_version {
            headers.push((names::PROTOCOL_VERSION, v.as_str().as_bytes()));
        }
        headers.push((names::SESSION_ID, session.as_bytes()));
        if !self.bearer.is_empty() {
            headers.push((names::AUTHORIZATION, &self.bearer));
        }
        if let Some(proof) = proof {
            headers.push((names::DPOP, proof));
        }
        headers.extend(host_headers(&self.headers, !self.bearer.is_empty()));
        Some(RequestPlan { method: "DELETE", preset: NO_PRESET, headers, body: &[] })
    }

    // ----- outgoing ------------------------------------------------------------------------

    /// Takes what is due: the engine's transmits become exchanges (and cancellations become
    /// connections to close, see [`poll_close`](Self::poll_close)), the OAuth flow's deadline
    /// is checked, the legacy GET stream is queued once the handshake is done, and resumes of
    /// broken POST streams whose `retry:` delay has passed are queued.
    pub(crate) fn handle_timeout(&mut self, engine: &mut Engine, now: Instant) {
        // Most passes find nothing to send: they take no exchange to learn it.
        while engine.has_output() {
            // The engine writes each frame straight into the body of the exchange that will
            // carry it: no copy, no buffer of the session's own.
            let i = self.take();
            let body = &mut self.exchanges[i].body;
            body.clear();
            let Some(t) = engine.poll_transmit(now, body) else {
                self.free.push(i);
                break;
            };
            if let TransmitKind::Cancelled { id } = t.kind {
                if !t.went() && !self.reached_the_server(id) {
                    // The request still waits for a connection (or was refused before the
                    // server took it): it is released unsent by the stream close that follows,
                    // and a notice for an id the server never saw would only confuse it.
                    self.free.push(i);
                    continue;
                }
            }
            if let TransmitKind::CloseStream { id } = t.kind {
                self.free.push(i);
                if let Some(x) = self.close_stream(id) {
                    self.closing.push(x);
                }
                continue;
            }
            let message = !matches!(t.kind, TransmitKind::Request { .. });
            // A cancellation passes the bound: the server's only word that nobody waits (a
            // call has one, or one per attempt whose stream broke, so the pending table bounds
            // them), which a server flooding the client with pings must not crowd out.
            // Nor is the handshake's end, which every request waits for.
            let bounded = message
                && !matches!(t.kind, TransmitKind::Cancelled { .. } | TransmitKind::Initialized);
            if bounded && self.messages >= MAX_MESSAGES {
                // Counted again first: a miscount would drop every answer from now on.
                let live = |x: &&Exchange| x.stage != Stage::Free && x.carries == Carries::Message;
                let counted = self.exchanges.iter().filter(live).count();
                debug_assert_eq!(counted, self.messages, "message exchanges miscounted");
                self.messages = counted;
            }
            if bounded && self.messages >= MAX_MESSAGES {
                // A server that sends requests (pings) faster than their answers' POSTs
                // complete would grow the queue without bound: past the bound, answers and
                // notifications are dropped, as the engine drops its control frames.
                log::debug!("too many notification and reply POSTs waiting: one dropped");
                self.free.push(i);
                continue;
            }
            self.messages += usize::from(message);
            self.on_transmit(i, &t);
        }
        if self.initializing > 0 {
            // Counted again while a handshake holds the queue: a miscount would hold every
            // request for good.
            let handshakes = self.exchanges.iter().filter(|x| {
                x.stage != Stage::Free
                    && matches!(x.carries, Carries::Request { method: Method::Initialize, .. })
            });
            let counted = handshakes.count();
            debug_assert_eq!(counted, self.initializing, "initialize exchanges miscounted");
            self.initializing = counted;
        }
        self.oauth_timeout(engine, now);
        // While a handshake makes a new session, the old one's resumes waiting for a
        // connection are looked at; a stream that breaks later is scheduled first.
        if self.scheduled > 0 || self.initializing > 0 {
            self.end_resumes_of_gone_sessions(engine, now);
        }
        self.schedule(engine, now);
        if self.lingering > 0 {
            self.close_lingering(now);
        }
    }

    /// Responses that went on past [`REPLY_LINGER`] after they brought their reply (the server
    /// should have ended them): their connections are closed, so the pool has them back.
    fn close_lingering(&mut self, now: Instant) {
        let Self { exchanges, closing, lingering, .. } = self;
        for (i, x) in exchanges.iter_mut().enumerate() {
            if x.lingers_until.is_some_and(|t| t <= now) {
                log::debug!("a response went on past its time: closing its connection");
                x.lingers_until = None;
                *lingering -= 1;
                closing.push(ExchangeId(i));
            }
        }
    }

    /// The next exchange in flight whose connection the driver must close without reporting
    /// anything (then [`SessionEvent::Abandoned`]).
    pub(crate) fn poll_close(&mut self) -> Option<ExchangeId> {
        self.closing.pop()
    }

    /// Where the server's endpoint moved (the `Location` of a 307 or 308 a request got, as
    /// the server wrote it): the request goes again, once, and is written to whatever target
    /// the driver makes of this. The driver follows only a path of the same origin (the
    /// request's credentials must not go anywhere else); refused, the request meets the same
    /// redirect again and fails with its status.
    /// One look per response, inlined: the usual answer is `None`, which writes nothing.
    #[inline]
    pub(crate) fn take_moved(&mut self) -> Option<String> {
        match self.moved {
            None => None,
            Some(_) => self.moved.take(),
        }
    }

    /// Takes one transmit of the engine (not a cancellation), whose bytes the engine wrote
    /// into the body of exchange `i`, taken for it.
    fn on_transmit(&mut self, i: usize, t: &Transmit<'_>) {
        let carries = match t.kind {
            TransmitKind::Request { id, method } => {
                if method == Method::Initialize {
                    // A new handshake starts a new session; the old id must not be sent, nor
                    // the old GET stream's event id and retry delay used for the new one's.
                    self.renewing |= self.session_id.is_some();
                    self.session_id = None;
                    self.session_version = None;
                    self.listen = Listen::Off;
                    // The old session's GET stream ends with it: its end must not set the new
                    // session's stream state, nor its events its `Last-Event-ID`.
                    self.close_listen();
                    self.listen_event_id = None;
                    self.listen_retry = DEFAULT_RETRY;
                    self.listen_failures = 0;
                }
                Carries::Request { id, method }
            }
            TransmitKind::Initialized => {
                // The engine took a handshake's result: the session is made (with an id, or
                // none for a server that keeps no sessions), and its requests wait for this
                // notification instead.
                self.renewing = false;
                self.announcing = Some(i);
                Carries::Message
            }
            _ => Carries::Message,
        };
        let version = t.version();
        let modern = version.is_some_and(|v| v.era() == Era::Modern);
        // The engine moved to the modern era (a renewal refused by a server upgraded to it):
        // no legacy session is being made any more.
        self.renewing &= !modern;
        let x = &mut self.exchanges[i];
        x.reset(carries, version, modern);
        if let (Carries::Request { method, .. }, true) = (carries, modern) {
            if method == Method::Extension {
                x.method.extend_from_slice(t.method_name().as_bytes());
            }
            if method == Method::ToolsCall {
                x.params.copy_from(t.param_headers());
            }
            // Required on these three whatever the name: an empty one is written encoded
            // (`=?base64??=`). Left out, the server refused the call as one without the header
            // (-32020), which reads as a stale tool listing: listed again, refused again.
            let required =
                matches!(method, Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead);
            let named = matches!(
                method,
                Method::TasksGet | Method::TasksResult | Method::TasksCancel | Method::TasksUpdate
            );
            if required || named {
                if let Some(name) = t.name().or(required.then_some(&[][..])) {
                    crate::proto::header_value::encode(&mut x.name, name);
                }
            }
        }
        x.stage = Stage::Waiting(Attempt::Send);
        if matches!(carries, Carries::Request { method: Method::Initialize, .. }) {
            // A new session: its handshake goes first, and what waits goes after it, under
            // the new session's id (`peek_waiting`).
            self.initializing += 1;
            self.waiting.push_front(i);
        } else if carries == Carries::Message {
            // An answer to the server's request (or a notification) goes ahead of the calls
            // that wait: the calls holding the pool may be the very ones waiting for it (an
            // elicitation or a ping on a call's stream). FIFO among answers.
            let exchanges = &self.exchanges;
            let is_call = |&w: &usize| {
                exchanges.get(w).is_some_and(|x| {
                    matches!(x.carries, Carries::Request { method, .. } if method != Method::Initialize)
                })
            };
            let at = self.waiting.iter().position(is_call).unwrap_or(self.waiting.len());
            self.waiting.insert(at, i);
        } else {
            self.waiting.push_back(i);
        }
    }

    /// Puts exchange `i`, sent again, at the head of the queue: behind the handshake of a
    /// session being made when that waits there, since nothing else goes before it
    /// (`peek_waiting`). At the very front it held the handshake back for good, and the
    /// server was closed when the handshake's time ran out.
    fn queue_first(&mut self, i: usize) {
        let exchanges = &self.exchanges;
        let is_initialize = |&w: &usize| {
            exchanges.get(w).is_some_and(|x| {
                matches!(x.carries, Carries::Request { method: Method::Initialize, .. })
            })
        };
        let behind = match self.initializing {
            // The handshake itself goes first.
            _ if is_initialize(&i) => None,
            0 => None,
            _ => self.waiting.iter().position(is_initialize).map(|at| at + 1),
        };
        match behind {
            Some(at) => self.waiting.insert(at, i),
            None => self.waiting.push_front(i),
        }
    }

    /// Sends exchange `i` again (a fresh token, a nonce, a redirect, a parked call released),
    /// ahead of what waits but behind a waiting handshake ([`queue_first`](Self::queue_first)).
    pub(super) fn resend_first(&mut self, i: usize) {
        if let Some(x) = self.exchanges.get_mut(i) {
            x.requeue();
        }
        self.queue_first(i);
    }

    /// Closes the GET stream: dropped while it waits, its connection closed while open.
    fn close_listen(&mut self) {
        let listens: SmallVec<[usize; 2]> = (0..self.exchanges.len())
            .filter(|&i| {
                let x = &self.exchanges[i];
                x.stage != Stage::Free && x.carries == Carries::Listen
            })
            .collect();
        for i in listens {
            if matches!(self.exchanges[i].stage, Stage::InFlight(_)) {
                self.closing.push(ExchangeId(i));
            } else {
                self.release(i);
            }
        }
    }

    fn take(&mut self) -> usize {
        if let Some(i) = self.free.pop() {
            return i;
        }
        self.exchanges.push(Exchange::new(self.max_body));
        self.exchanges.len() - 1
    }

    /// The server is closed and its connections with it: nothing of the session is due again.
    /// A legacy GET stream's backoff, a broken stream's resumption or the OAuth flow's token
    /// refresh left scheduled kept a closed server in the host's deadlines, due at once on
    /// every turn (a loop at full CPU), and the refresh went on rotating the user's tokens
    /// for a server nobody used.
    ///
    /// A legacy session's `DELETE` (§6.2), to the URL whose `htu` is given, is planned first
    /// and handed to `end`, which writes it (the plan borrows the session, and its DPoP proof
    /// needs the flow the close drops): one verb, so no caller can drop the flow before the
    /// proof or send a session id already forgotten. Returns what `end` made, `None` when
    /// there was no session to end. The session is over locally either way.
    pub(crate) fn close<R>(
        &mut self,
        now: Instant,
        htu: &str,
        end: impl FnOnce(RequestPlan<'_>) -> R,
    ) -> Option<R> {
        let ended = self.end_plan(now, htu).map(end);
        self.session_version = None;
        self.session_id = None;
        self.renewing = false;
        for i in 0..self.exchanges.len() {
            self.release(i);
        }
        self.listen = Listen::Off;
        self.oauth = None;
        ended
    }

    fn release(&mut self, i: usize) {
        let Some(x) = self.exchanges.get_mut(i) else { return };
        if x.lingers_until.take().is_some() {
            self.lingering -= 1;
        }
        if x.stage != Stage::Free {
            match x.carries {
                Carries::Request { method: Method::Initialize, .. } => self.initializing -= 1,
                Carries::Message => {
                    self.messages -= 1;
                    if self.announcing == Some(i) {
                        self.announcing = None;
                    }
                }
                _ => {}
            }
        }
        match x.stage {
            Stage::Free => return,
            Stage::Resume(_) => self.scheduled -= 1,
            Stage::Waiting(_) => self.waiting.retain(|&w| w != i),
            Stage::Parked(_) => {
                if let Some(o) = self.oauth.as_mut() {
                    o.unpark(i);
                }
            }
            Stage::InFlight(_) => {}
        }
        x.stage = Stage::Free;
        x.shed();
        self.free.push(i);
    }

    /// Cancellation of request `id`: an exchange not yet on a connection is dropped here; one
    /// in flight is returned for the driver to close.
    /// Whether request `id` went to the server: written to its connection, or sent and now
    /// resuming its broken stream. One waiting for its first send or for its connection to
    /// open, or refused (401) and waiting for a token, did not reach it.
    fn reached_the_server(&self, id: WireId) -> bool {
        self.exchanges.iter().any(|x| {
            matches!(x.carries, Carries::Request { id: xid, .. } if xid == id)
                && match x.stage {
                    Stage::InFlight(f) => f.written || f.attempt == Attempt::Resume,
                    Stage::Resume(_) => true,
                    Stage::Waiting(a) => a == Attempt::Resume,
                    Stage::Parked(_) | Stage::Free => false,
                }
        })
    }

    fn close_stream(&mut self, id: WireId) -> Option<ExchangeId> {
        let i = self.exchanges.iter().position(|x| {
            x.stage != Stage::Free
                && matches!(x.carries, Carries::Request { id: xid, .. } if xid == id)
        })?;
        log::trace!("closing the response stream of request {id} (cancellation)");
        if matches!(self.exchanges[i].stage, Stage::InFlight(_)) {
            return Some(ExchangeId(i));
        }
        self.release(i);
        None
    }

    /// Broken streams of a session made anew since (a 404 to another request, a new
    /// handshake) are not resumed in the new one, whose server never saw their event ids (a
    /// 400, a stream that replays nothing, or one held open until the call's deadline): each
    /// ends as a lost connection, so the engine retries a read and a write ends
    /// `DeliveryUnknown`.
    #[cold]
    #[inline(never)]
    fn end_resumes_of_gone_sessions(&mut self, engine: &mut Engine, now: Instant) {
        let current = (self.session_id.is_some(), self.session_gen);
        let gone = |x: &Exchange| {
            let resuming = matches!(x.stage, Stage::Resume(_) | Stage::Waiting(Attempt::Resume));
            resuming && x.stream_session != 0 && current != (true, x.stream_session)
        };
        for i in 0..self.exchanges.len() {
            let x = &self.exchanges[i];
            let Carries::Request { id, .. } = x.carries else { continue };
            if gone(x) {
                log::debug!("a broken stream's session is gone: its request is not resumed");
                let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
                self.fail(engine, now, i, id, lost);
            }
        }
    }

    /// Queues what is due: the legacy GET stream once the handshake is done, and resumes of
    /// broken POST streams whose `retry:` delay has passed.
    fn schedule(&mut self, engine: &Engine, now: Instant) {
        if self.scheduled > 0 {
            for (i, x) in self.exchanges.iter_mut().enumerate() {
                if let Stage::Resume(at) = x.stage {
                    if at <= now {
                        x.stage = Stage::Waiting(Attempt::Resume);
                        self.scheduled -= 1;
                        // A handshake's stream goes first, as the handshake did: nothing goes
                        // before a handshake under way (`peek_waiting`), so behind a request
                        // waiting for a connection it waited until its time ran out.
                        match x.carries {
                            Carries::Request { method: Method::Initialize, .. } => {
                                self.waiting.push_front(i)
                            }
                            _ => self.waiting.push_back(i),
                        }
                    }
                }
            }
        }
        let version = match engine.state() {
            ServerState::Ready(Era::Legacy, v) => v,
            _ => return,
        };
        if self.listen == Listen::Off {
            self.listen = Listen::At(now);
        }
        if let Listen::At(t) = self.listen {
            if now >= t {
                let i = self.take();
                let x = &mut self.exchanges[i];
                x.reset(Carries::Listen, Some(version), false);
                x.body.clear();
                x.stage = Stage::Waiting(Attempt::Send);
                self.listen = Listen::Open(now);
                self.queue_first(i);
            }
        }
    }

    /// The next time [`handle_timeout`](Self::handle_timeout) has something to do.
    #[must_use]
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let mut next = match self.listen {
            Listen::At(t) => Some(t),
            _ => None,
        };
        let mut keep = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        if self.scheduled > 0 {
            for x in &self.exchanges {
                if let Stage::Resume(at) = x.stage {
                    keep(at);
                }
            }
        }
        if self.lingering > 0 {
            self.exchanges.iter().filter_map(|x| x.lingers_until).for_each(&mut keep);
        }
        if let Some(t) = self.oauth_poll_timeout() {
            keep(t);
        }
        next
    }

    /// The next exchange to put on a connection, and the connection it needs.
    pub(crate) fn peek_waiting(&self) -> Option<(ExchangeId, ConnNeed)> {
        if self.oauth.as_ref().is_some_and(|o| o.holds_requests()) {
            return None;
        }
        let &i = self.waiting.front()?;
        let x = self.exchanges.get(i)?;
        // One look on the way of every call: a handshake is rare.
        if self.initializing > 0 || self.renewing || self.announcing.is_some() {
            let initialize =
                matches!(x.carries, Carries::Request { method: Method::Initialize, .. });
            // A session is being made (its `initialize` out, or to go again later): a legacy
            // request sent now would carry no session id, and the server would refuse it; a
            // modern one (the era probed anew) carries none anyway.
            let no_session = self.initializing > 0 || (self.renewing && !x.modern);
            // The handshake's `notifications/initialized` is on its way on a connection of
            // its own: a request on another could overtake it, and a server refuses a request
            // before it ("Received request before initialization was complete").
            let unannounced =
                self.announcing.is_some() && matches!(x.carries, Carries::Request { .. });
            if !initialize && (no_session || unannounced) {
                return None;
            }
        }
        // A stream that lasts as long as its subscription (the legacy GET stream, a 2026
        // `subscriptions/listen`) would keep a pooled connection for good.
        let lasting =
            matches!(x.carries, Carries::Listen | Carries::Request { method: Method::Listen, .. });
        let need = match x.carries {
            _ if lasting => ConnNeed::Own,
            Carries::Message => ConnNeed::PoolOrSpare,
            _ => ConnNeed::Pool,
        };
        Some((ExchangeId(i), need))
    }

    /// Exchanges carrying a request that wait for a connection (`HttpOptions::max_connections`
    /// all busy, or one being opened).
    pub(crate) fn requests_waiting(&self) -> usize {
        let carries = |&i: &usize| {
            self.exchanges.get(i).is_some_and(|x| matches!(x.carries, Carries::Request { .. }))
        };
        self.waiting.iter().filter(|i| carries(i)).count()
    }

    /// Takes the next exchange off the queue: it is now in flight, on a connection, and the
    /// request it carries is on the wire (the wait for a connection was queueing, not network
    /// time).
    pub(crate) fn poll_exchange(
        &mut self,
        engine: &mut Engine,
        now: Instant,
    ) -> Option<ExchangeId> {
        let i = self.waiting.pop_front()?;
        let x = self.exchanges.get_mut(i)?;
        x.stage = Stage::InFlight(Flight::new(x.attempt()));
        if let Carries::Request { id, .. } = x.carries {
            engine.handle_on_wire(now, id);
        }
        Some(ExchangeId(i))
    }

    /// The next waiting exchange could get no connection: it fails with `failure`. Returns
    /// `false` when none waits.
    fn no_connection(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        failure: ExchangeFailure,
    ) -> bool {
        if self.oauth.as_ref().is_some_and(|o| o.holds_requests()) {
            return false;
        }
        let Some(i) = self.waiting.pop_front() else { return false };
        if let Some(x) = self.exchanges.get_mut(i) {
            x.stage = Stage::InFlight(Flight::new(x.attempt()));
        }
        self.fail_exchange(engine, now, ExchangeId(i), failure);
        true
    }

    /// Everything the driver says besides a response's bytes ([`SessionEvent`]).
    pub(crate) fn handle_event(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        event: SessionEvent<'_>,
    ) {
        match event {
            SessionEvent::Failed(x, failure) => self.fail_exchange(engine, now, x, failure),
            SessionEvent::Abandoned(x) => self.release(x.0),
            SessionEvent::NoConnection(failure) => {
                self.no_connection(engine, now, failure);
            }
            SessionEvent::Unreachable(failure) => {
                while self.no_connection(engine, now, failure.clone()) {}
            }
            SessionEvent::Yield => engine.note_input_yield(),
            SessionEvent::WallClock(unix_now) => self.oauth_wall_clock(now, unix_now),
            SessionEvent::OAuth(id, answer) => self.oauth_answer(engine, now, id, answer),
        }
    }

    /// Whether a failed connection should send new connections to the next instance (see
    /// [`should_rotate`]).
    pub(crate) fn rotates(&self, engine: &Engine, error: &TransportError) -> bool {
        should_rotate(engine.era(), error)
    }

    /// How to write exchange `x` now, to the URL whose `htu` (RFC 9449 4.2) is given: its
    /// method and body, and its headers pushed onto `headers` (empty), which the caller owns
    /// so that a request's head is not moved around on its way to the writer (16 headers
    /// are 512 bytes). Its response starts afresh.
    fn plan_into<'a>(
        &'a mut self,
        x: ExchangeId,
        now: Instant,
        htu: &str,
        headers: &mut PlanHeaders<'a>,
    ) -> Option<PlanHead<'a>> {
        let Self {
            exchanges,
            session_id,
            session_gen,
            session_version,
            listen_event_id,
            bearer,
            headers: extra,
            max_body,
            oauth,
            ..
        } = self;
        let x = exchanges.get_mut(x.0)?;
        x.token_gen = match oauth {
            Some(o) if !bearer.is_empty() => Some(o.generation),
            _ => None,
        };
        x.status = 0;
        x.mode = BodyMode::Json;
        x.reply.clear();
        x.challenge = None;
        x.location = None;
        x.sse.reset(*max_body);
        let attempt = x.attempt();
        // A reconnected stream goes on from the id it asks to resume from.
        match x.carries {
            Carries::Listen => x.sse.resume_from(listen_event_id.as_deref().unwrap_or("")),
            _ if attempt == Attempt::Resume => x.sse.resume_from(&x.stream_id),
            _ => {}
        }
        // The initialize itself: its resume (a GET after its stream broke) comes after the
        // session id its response's head brought, and carries it as every later request does.
        let is_initialize = attempt == Attempt::Send
            && matches!(x.carries, Carries::Request { method: Method::Initialize, .. });
        // PROTOCOL.md §3.1: 2026 never sends a session id; legacy sends it after initialize.
        let sent_session = session_id.is_some() && !x.modern && !is_initialize;
        if let Some(f) = x.flight_mut() {
            f.session = if sent_session { *session_gen } else { 0 };
            f.progressed = false;
            f.written = true;
        }
        if sent_session && x.version.is_some() {
            *session_version = x.version;
        }
        let x = &*x;
        let get = x.carries == Carries::Listen || attempt == Attempt::Resume;
        let htm = if get { "GET" } else { "POST" };
        // The proof borrows the flow's buffer: no allocation once warm.
        let proof = match oauth {
            Some(o) if !bearer.is_empty() => o.resource_proof(now, htm, htu),
            _ => None,
        };
        let preset = preset(get, x.version);
        if let (true, Carries::Request { method, .. }) = (x.modern, x.carries) {
            let method = if method == Method::Extension {
                &x.method[..]
            } else {
                method.as_str().as_bytes()
            };
            headers.push((names::METHOD, method));
            if !x.name.is_empty() {
                headers.push((names::NAME, &x.name));
            }
            // Their suffixes come from the server's tool listing: checked as any name the
            // client did not write itself (a call without them pays nothing).
            if !x.params.is_empty() {
                let params =
                    x.params.iter().filter_map(|(n, v)| Some((HeaderName::new(n).ok()?, v)));
                headers.extend(params);
            }
        }
        if let (Some(s), true) = (session_id.as_deref(), sent_session) {
            headers.push((names::SESSION_ID, s.as_bytes()));
        }
        if !bearer.is_empty() {
            headers.push((names::AUTHORIZATION, bearer));
        }
        if let Some(proof) = proof {
            headers.push((names::DPOP, proof));
        }
        let last_event_id = match x.carries {
            Carries::Listen => listen_event_id.as_deref(),
            _ if attempt == Attempt::Resume => Some(x.stream_id.as_str()),
            _ => None,
        };
        if let Some(id) = last_event_id {
            headers.push((names::LAST_EVENT_ID, id.as_bytes()));
        }
        if !extra.is_empty() {
            headers.extend(host_headers(extra, !bearer.is_empty()));
        }
        let body: &[u8] = if get { &[] } else { &x.body };
        Some(PlanHead { method: htm, preset, body })
    }

    /// Writes exchange `x`'s request into `out`, to `origin`, whose URL's `htu` (RFC 9449 4.2)
    /// is given; its response starts afresh. The headers are built on the stack and written
    /// once: no allocation once `out` is warm.
    pub(crate) fn write_request(
        &mut self,
        x: ExchangeId,
        now: Instant,
        origin: &Origin,
        htu: &str,
        out: &mut Vec<u8>,
    ) {
        if let Some(ex) = self.exchanges.get_mut(x.0) {
            if ex.carries == Carries::Message && ex.lingers_until.is_none() {
                ex.lingers_until = Some(later(now, MESSAGE_WAIT));
                self.lingering += 1;
            }
        }
        let mut headers = PlanHeaders::new();
        let Some(plan) = self.plan_into(x, now, htu, &mut headers) else { return };
        let head =
            RequestHead { method: plan.method, origin, preset: plan.preset, headers: &headers };
        if let Err(e) = http1::write_request(out, &head, plan.body) {
            // Only values a host supplied can be refused here, and they were checked at setup.
            log::debug!("request head refused: {e:?}");
        }
    }

    // ----- incoming ------------------------------------------------------------------------

    /// Runs a connection's response `parser` over what it holds for exchange `x`, within
    /// `budget` (each parsed piece takes a unit, each message handed to the engine a frame),
    /// and says what the connection does next. What an earlier turn parsed and left goes
    /// first.
    pub(crate) fn handle_response(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        x: ExchangeId,
        parser: &mut ResponseParser,
        budget: &mut Budget,
    ) -> ResponseStep {
        let step = self.handle_body(engine, now, x, &[], budget);
        if step != ResponseStep::More {
            return step;
        }
        loop {
            if budget.spent() {
                return ResponseStep::Backlog;
            }
            let Some(event) = parser.next() else { return ResponseStep::More };
            budget.units -= 1;
            match event {
                Err(e) => {
                    log::debug!("bad HTTP response: {e:?}");
                    // A response cut off by the connection closing is a lost connection (a
                    // transient failure); one over the size cap fails its call as too large;
                    // anything else is a broken response.
                    let failure = match e {
                        HttpError::Truncated => {
                            ExchangeFailure::Transport(TransportError::ConnectionLost)
                        }
                        HttpError::BodyTooLarge => ExchangeFailure::TooLarge,
                        _ => ExchangeFailure::Transport(TransportError::BadResponse),
                    };
                    self.fail_exchange(engine, now, x, failure);
                    return ResponseStep::Close;
                }
                Ok(ResponseEvent::Head(head)) => {
                    let dpop = self.reads_dpop_nonce();
                    let status = head.status();
                    let refused = matches!(status, 401 | 403);
                    let challenges = || head.values("www-authenticate");
                    let fields = ResponseHead {
                        status,
                        content_type: head.header("content-type"),
                        session_id: head.header("mcp-session-id"),
                        challenge: refused
                            .then(|| crate::proto::challenge::parse_all(challenges()))
                            .flatten(),
                        dpop_nonce: dpop.then(|| head.header("dpop-nonce")).flatten(),
                        location: matches!(status, 307 | 308)
                            .then(|| head.header("location"))
                            .flatten(),
                    };
                    if self.handle_head(x, fields) {
                        // An event stream is endless by design; each event has its own cap.
                        parser.set_max_body_bytes(u64::MAX);
                    }
                }
                Ok(ResponseEvent::Body(chunk)) => {
                    let step = self.handle_body(engine, now, x, chunk, budget);
                    if step != ResponseStep::More {
                        return step;
                    }
                }
                Ok(ResponseEvent::End { keep_alive }) => {
                    self.handle_end(engine, now, x);
                    return ResponseStep::Ended { keep_alive };
                }
            }
        }
    }

    /// A response head for exchange `x`. Returns `true` for an event stream, which has no
    /// overall size (each event has its own cap).
    fn handle_head(&mut self, x: ExchangeId, head: ResponseHead<'_>) -> bool {
        let i = x.0;
        let ok = (200..300).contains(&head.status);
        if ok {
            self.oauth_authorized(i);
        }
        if let Some(nonce) = head.dpop_nonce {
            self.oauth_resource_nonce(nonce);
        }
        let Some(x) = self.exchanges.get_mut(i) else { return false };
        x.status = head.status;
        let sse = head.content_type.is_some_and(|v| starts_with_ci(v, b"text/event-stream"));
        x.mode = if sse && ok { BodyMode::Sse } else { BodyMode::Json };
        if x.mode == BodyMode::Sse && matches!(x.carries, Carries::Listen) {
            // A GET stream served: a later 404 on it means its session is gone.
            self.listen_renewed = false;
        }
        if matches!(head.status, 401 | 403) {
            x.challenge = head.challenge;
        }
        // A redirect keeps the method and the body (307, 308: RFC 9110 15.4.8 and 15.4.9);
        // the others would make a POST a GET, which no MCP endpoint answers.
        let location = head.location.filter(|l| l.len() <= MAX_LOCATION);
        x.location = match (location.map(std::str::from_utf8), x.carries) {
            (Some(Ok(l)), Carries::Request { .. }) => Some(l.into()),
            _ => None,
        };
        // The session id is adopted from a successful `initialize` only (§6.2): any other
        // response naming one cannot move the client to another session.
        let is_initialize =
            matches!(x.carries, Carries::Request { method: Method::Initialize, .. });
        if let (Some(s), true, true) = (head.session_id, is_initialize, ok) {
            // An empty one names no session: adopted, it went out empty on every request,
            // and a server that keeps sessions refused each as a gone session.
            let visible = !s.is_empty() && s.iter().all(u8::is_ascii_graphic);
            // The same id again (the head of a resumed `initialize` stream) is the same
            // session: a new generation made the resume one of a gone session, and the
            // handshake failed instead of resuming.
            let same = self.session_id.as_deref().map(str::as_bytes) == Some(s);
            if let (Ok(s), true, false) = (std::str::from_utf8(s), visible, same) {
                self.session_id = Some(s.to_owned());
                // Never 0, which a flight reads as no session.
                self.session_gen = self.session_gen.checked_add(1).unwrap_or(1);
            }
        }
        x.mode == BodyMode::Sse
    }

    /// A piece of exchange `x`'s body. Hands at most `budget.frames` messages to the engine,
    /// reads at most `budget.units` SSE lines, and lowers both by what it took; call again
    /// with no bytes to drain a [`ResponseStep::Backlog`]. [`ResponseStep::More`]: keep
    /// reading; never `Ended`, which only the parser knows.
    fn handle_body(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        x: ExchangeId,
        chunk: &[u8],
        budget: &mut Budget,
    ) -> ResponseStep {
        let i = x.0;
        let Some(ex) = self.exchanges.get_mut(i) else { return ResponseStep::Close };
        if ex.mode == BodyMode::Json {
            if !matches!(ex.carries, Carries::Request { .. }) {
                // A notification's or an answer's POST, or a GET stream answered with JSON:
                // nobody reads the body, so it is not gathered (a server answering each with
                // megabytes grew every such slot to its cap). But for its first bytes when a
                // GET stream is refused 400: the TypeScript SDK says a session is gone so.
                if matches!(ex.carries, Carries::Listen) && ex.status == 400 {
                    let room = REFUSAL_BYTES.saturating_sub(ex.reply.len());
                    ex.reply.extend_from_slice(chunk.get(..room).unwrap_or(chunk));
                }
                return ResponseStep::More;
            }
            if ex.reply.len() + chunk.len() > self.max_body {
                self.fail_exchange(engine, now, x, ExchangeFailure::TooLarge);
                return ResponseStep::Close;
            }
            ex.reply.extend_from_slice(chunk);
            return ResponseStep::More;
        }
        ex.sse.push(chunk);
        let mut flow = ResponseStep::More;
        // A message ended a call other than this exchange's own (its reply came here, against
        // the spec): that call's own stream is looked for. Progress and other notifications
        // end none, so a stream of them costs no walk.
        let mut other = false;
        loop {
            if budget.spent() {
                if ex.sse.buffered() > 0 {
                    flow = ResponseStep::Backlog;
                }
                break;
            }
            let Some(event) = ex.sse.next_event_within(&mut budget.units) else {
                // Out of input, or out of units with lines still to read.
                if budget.units == 0 && ex.sse.buffered() > 0 {
                    flow = ResponseStep::Backlog;
                }
                break;
            };
            match event {
                Ok(e) if e.event_type == "message" || e.event_type.is_empty() => {
                    budget.frames -= 1;
                    match ex.carries {
                        Carries::Request { id, .. } => {
                            let pending = engine.pending();
                            engine.handle_reply(now, e.data.as_bytes(), id);
                            // Answered when the engine is done with the request: a reply to
                            // another request on this stream answers nothing.
                            if !engine.awaits(id) {
                                self.lingering += usize::from(ex.answered(now));
                                if ex.resuming() {
                                    // A resumed stream is over with its reply: what follows it
                                    // is not read, however the bytes were cut.
                                    break;
                                }
                            } else {
                                other |= engine.pending() < pending;
                            }
                        }
                        _ => {
                            let pending = engine.pending();
                            engine.handle_message(now, e.data.as_bytes());
                            other |= engine.pending() < pending;
                        }
                    }
                }
                Ok(_) => {}
                Err(err) => {
                    log::debug!("SSE event dropped: {err:?}");
                    if let (Carries::Request { .. }, Some(f)) = (ex.carries, ex.flight_mut()) {
                        f.oversize = true;
                    }
                }
            }
        }
        if ex.carries == Carries::Listen && !chunk.is_empty() {
            // The GET stream brought something (an event, a `retry:`, a keep-alive comment):
            // it was served (`listen_again`).
            if let Some(f) = ex.flight_mut() {
                f.progressed = true;
            }
        }
        let retry = ex.sse.retry_ms().map(|ms| Duration::from_millis(clamp_retry(ms)));
        match ex.carries {
            Carries::Listen => {
                self.listen_retry = retry.unwrap_or(self.listen_retry);
                let id = ex.sse.last_event_id();
                if id != self.listen_event_id.as_deref() {
                    self.listen_event_id = id.map(str::to_owned);
                }
            }
            Carries::Request { .. } if !ex.modern => {
                ex.retry_ms = ex.sse.retry_ms().or(ex.retry_ms);
                // The stream's id as of the last event, cleared when the server cleared it:
                // the parser started from the id this stream resumed from, if it did.
                let id = ex.sse.last_event_id().unwrap_or_default();
                if id != ex.stream_id {
                    ex.stream_id.clear();
                    ex.stream_id.push_str(id);
                }
                if let (true, Some(f)) = (ex.sse.id_changed(), ex.flight_mut()) {
                    f.progressed = true;
                }
                if ex.resuming() && ex.flight().answered {
                    // The reply came on the resumed stream; a GET stream need not end.
                    self.release(i);
                    if other {
                        self.linger_answered_elsewhere(engine, now);
                    }
                    return ResponseStep::Close;
                }
            }
            _ => {}
        }
        if other {
            self.linger_answered_elsewhere(engine, now);
        }
        flow
    }

    /// After a message that ended a call on another call's stream or the GET stream (against
    /// the spec: servers send a call's reply on its own stream): that call's own stream is
    /// closed a grace later, as if the reply had come on it. Held open and silent, it kept a
    /// connection of the pool for good. Not on the path of a reply on its own stream, nor of
    /// a notification.
    #[cold]
    #[inline(never)]
    fn linger_answered_elsewhere(&mut self, engine: &Engine, now: Instant) {
        for x in &mut self.exchanges {
            let (Carries::Request { id, .. }, Stage::InFlight(f)) = (x.carries, &x.stage) else {
                continue;
            };
            if !f.answered && !engine.awaits(id) {
                log::debug!("a call was answered on another stream: its own closes after a grace");
                self.lingering += usize::from(x.answered(now));
            }
        }
    }

    /// Exchange `x`'s response ended: decide what its status and body mean.
    fn handle_end(&mut self, engine: &mut Engine, now: Instant, x: ExchangeId) {
        let i = x.0;
        let Some(status) = self.exchanges.get(i).map(|x| x.status) else { return };
        if self.dpop_nonce_retry(i, status) || self.oauth_refused(engine, now, i, status) {
            return;
        }
        let Some(carries) = self.exchanges.get(i).map(|x| x.carries) else { return };
        let ok = (200..300).contains(&status);
        let id = match carries {
            // Sent again with a fresh token, whatever it carries: the server may be waiting
            // for a reply a message carries, and the GET stream brings its requests.
            _ if status == 401 && self.refresh(i) => return,
            Carries::Listen if !self.listen_renewed && legacy_session_gone(&self.exchanges[i]) => {
                // The session is gone (§6.2: 404 on a request that carried its id): a new
                // one is made, and it gets a GET stream of its own once ready. Once only
                // until a stream is served: a server with no GET handler (a web framework's
                // "Cannot GET" is a 404) would otherwise have a session made after each.
                self.listen_renewed = true;
                self.listen = Listen::Off;
                self.release(i);
                engine.handle_transport(now, TransportEvent::session_gone());
                return;
            }
            Carries::Listen => {
                // Only an event stream is one: a 2xx with a page or a JSON body for `GET /mcp`
                // served nothing, and is asked again later each time, as a failure is.
                // An event stream that brought nothing is no stream served either: one the
                // server opens and ends at once was opened again every second for good.
                let x = &self.exchanges[i];
                let stream = x.mode == BodyMode::Sse && x.flight().progressed;
                self.listen = match status {
                    _ if ok => self.listen_again(now, stream),
                    // Busy or briefly unable, or (409, the TypeScript SDK) still holding a
                    // stream of the session it has not seen go: asked again, later each time.
                    408 | 409 | 425 | 429 | 500..=599 => self.listen_again(now, false),
                    // Only 405 is the spec's "no GET stream" (§6.2); other refusals last, so
                    // asking again would be refused again.
                    _ => {
                        log::debug!("the server offers no GET stream ({status})");
                        Listen::Unsupported
                    }
                };
                self.release(i);
                return;
            }
            Carries::Message => {
                if !ok {
                    log::debug!("a notification or reply POST got HTTP {status}");
                }
                self.release(i);
                return;
            }
            Carries::Request { id, .. } => id,
        };
        let Some(ex) = self.exchanges.get_mut(i) else { return };
        let flight = ex.flight();
        let resuming = flight.attempt == Attempt::Resume;
        if resuming && flight.answered {
            self.release(i);
            return;
        }
        if flight.oversize && engine.awaits(id) {
            // The stream ended without the reply, and dropped an event over the cap: that was
            // the reply (what a server sends before it is small), so the request was answered.
            self.fail(engine, now, i, id, ExchangeFailure::TooLarge);
            return;
        }
        if ex.resumable() {
            self.schedule_resume(i, now);
            return;
        }
        if resuming {
            // A refused or fruitless resume: whether the request ran is unknown.
            let lost = ExchangeFailure::Transport(TransportError::ConnectionLost);
            self.fail(engine, now, i, id, lost);
            return;
        }
        let location = ex.location.take().filter(|_| matches!(status, 307 | 308));
        if let (Some(location), false) = (location, ex.has_resent(Resend::Redirect)) {
            // Not processed (a redirect says to ask elsewhere): sent again, once, to where
            // the driver makes of the location. Starlette answers `POST /mcp` with a 307 to
            // `/mcp/`, which the official SDKs' clients follow.
            let shown = crate::redact::redact_url(&location);
            log::debug!("HTTP {status}: the endpoint moved to {shown}");
            ex.resent |= Resend::Redirect as u8;
            self.resend_first(i);
            self.moved = Some(location.into());
            return;
        }
        let body = &ex.reply;
        let unmarked = body.strip_prefix(crate::engine::UTF8_BOM).unwrap_or(body);
        let json = ex.mode == BodyMode::Json
            && unmarked.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        // Either way the request was not processed.
        let session_gone = legacy_session_gone(ex);
        let replaced = flight.session != self.session_gen && self.session_id.is_some();
        if session_gone && replaced && !ex.has_resent(Resend::OldSession) {
            // A 404 of a session already replaced (the request went out just before another
            // request's 404 renewed it): the request was not processed, and goes again in the
            // current session. Taken as the current one's end, it renewed that session too,
            // ending the new session's tasks and server requests.
            let ex = &mut self.exchanges[i];
            ex.resent |= Resend::OldSession as u8;
            self.resend_first(i);
            return;
        }
        if session_gone {
            self.release(i);
            // A session made anew for a request: its GET stream's 404 means it is gone too.
            self.listen_renewed = false;
            engine.handle_transport(now, TransportEvent::session_expired(id));
            return;
        }
        // A 401 or 403 is an authorization answer whatever its body says (a rejected Origin
        // comes with a JSON-RPC error of null id): read as the request's error, it was taken
        // for legacy evidence during the probe, and its challenge was lost.
        if json && !matches!(status, 401 | 403) {
            engine.handle_reply(now, body, id);
            if !engine.awaits(id) {
                // The body answered the request (the common case): nothing is left to fail.
                self.release(i);
                return;
            }
        }
        let failure = match status {
            401 => ExchangeFailure::Unauthorized(ex.challenge.take().unwrap_or_default()),
            403 => ExchangeFailure::Forbidden(ex.challenge.take().unwrap_or_default()),
            _ if ex.mode == BodyMode::Sse && ok => {
                ExchangeFailure::Transport(TransportError::ConnectionLost)
            }
            s => ExchangeFailure::Transport(TransportError::HttpStatus(s)),
        };
        self.fail(engine, now, i, id, failure);
    }

    /// Exchange `x` ended without a complete response: it never got a connection, the
    /// connection broke, or the response was unreadable or too large.
    fn fail_exchange(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        x: ExchangeId,
        failure: ExchangeFailure,
    ) {
        let i = x.0;
        let Some(ex) = self.exchanges.get(i) else { return };
        match ex.carries {
            Carries::Request { id, .. } => {
                let transport =
                    matches!(failure, ExchangeFailure::Transport(_) | ExchangeFailure::Unsent(_));
                let lost = failure == ExchangeFailure::Transport(TransportError::ConnectionLost);
                let resuming = ex.resuming();
                if (lost || (resuming && transport)) && ex.resumable() {
                    // §6.2: a disconnect is not a cancellation; the stream can be resumed.
                    self.schedule_resume(i, now);
                    return;
                }
                // The request of a failed resume was delivered: its fate is unknown, never
                // "not sent", whatever broke the resume.
                let failure = if resuming && transport {
                    ExchangeFailure::Transport(TransportError::ConnectionLost)
                } else {
                    failure
                };
                self.fail(engine, now, i, id, failure);
            }
            Carries::Listen => {
                let served = self.exchanges.get(i).is_some_and(|x| {
                    (200..300).contains(&x.status)
                        && x.mode == BodyMode::Sse
                        && x.flight().progressed
                });
                self.listen = self.listen_again(now, served);
                self.release(i);
            }
            Carries::Message => self.release(i),
        }
    }

    /// When the GET stream opens again after it ended: the server's `retry:` delay (or the
    /// default) after a stream it `served`, doubling with each refusal or failure in a row
    /// (up to the largest delay), so a server that keeps refusing is not asked every second.
    fn listen_again(&mut self, now: Instant, served: bool) -> Listen {
        // A stream held open a minute served too, if it brought nothing (an idle server, a
        // proxy's idle timeout): opened again at most once a minute that way anyway.
        let lasted = Duration::from_millis(MAX_RETRY_MS);
        let served = served
            || matches!(self.listen, Listen::Open(since) if now.saturating_duration_since(since) >= lasted);
        self.listen_failures = if served { 0 } else { self.listen_failures.saturating_add(1) };
        self.listen_renewed &= !served;
        let doublings = self.listen_failures.saturating_sub(1).min(8);
        let delay = self.listen_retry.saturating_mul(1 << doublings);
        Listen::At(later(now, delay.min(Duration::from_millis(MAX_RETRY_MS))))
    }

    fn fail(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        i: usize,
        id: WireId,
        failure: ExchangeFailure,
    ) {
        self.release(i);
        engine.handle_transport(now, TransportEvent::exchange_failed(id, failure));
    }

    /// A POST's event stream broke before the reply: come back with `Last-Event-ID` after the
    /// server's `retry:` delay. Resuming is not re-sending, so it is safe for any call.
    fn schedule_resume(&mut self, i: usize, now: Instant) {
        let Some(x) = self.exchanges.get_mut(i) else { return };
        x.idle_resumes = if x.flight().progressed { 0 } else { x.idle_resumes + 1 };
        x.stream_session = x.flight().session;
        // Until the resumed stream brings a new id, the next break counts as fruitless (the
        // resumed send starts a fresh `Flight`).
        let delay = x.retry_ms.map_or(DEFAULT_RETRY, |ms| Duration::from_millis(clamp_retry(ms)));
        log::debug!("resuming a broken response stream in {delay:?}");
        x.stage = Stage::Resume(later(now, delay));
        self.scheduled += 1;
    }

    /// HTTP 401: ask the token provider once for a fresh token and send the request again.
    fn refresh(&mut self, i: usize) -> bool {
        let Some(x) = self.exchanges.get_mut(i) else { return false };
        if x.has_resent(Resend::FreshToken) {
            return false;
        }
        let Some(fresh) = self.tokens.as_mut().and_then(|t| t.refresh()) else { return false };
        if !self.set_token(Some(fresh)) {
            // As if the provider had none: the call fails with the server's 401.
            return false;
        }
        let Some(x) = self.exchanges.get_mut(i) else { return false };
        x.resent |= Resend::FreshToken as u8;
        self.resend_first(i);
        true
    }
}

/// The first bytes of a GET stream's 400 that are kept, to read a JSON-RPC error in them.
const REFUSAL_BYTES: usize = 1024;

/// The answer to `ex`, sent with a legacy session's id, says the server forgot that session:
/// 404 per the spec (§6.2); the TypeScript SDK (v1) answers 400 with a JSON-RPC -32000
/// instead (lab FINDINGS §6). For a request and for the GET stream alike. Inlined: every
/// response asks, and a call of its own cost 11 instructions per HTTP call (callgrind.sh).
#[inline(always)]
fn legacy_session_gone(ex: &Exchange) -> bool {
    let forgot = match ex.status {
        404 => true,
        400 => ex.mode == BodyMode::Json && is_error_code(&ex.reply, -32000),
        _ => false,
    };
    forgot && ex.flight().session != 0
}

/// Whether a failed connection should send new connections to the next instance: only for
/// stateless (2026-07-28) servers, whose calls may land anywhere (a legacy session lives on
/// one instance), and not for TLS failures, which another instance would repeat.
pub(crate) fn should_rotate(era: Option<Era>, error: &TransportError) -> bool {
    !matches!(error, TransportError::Tls(_)) && era != Some(Era::Legacy)
}

fn clamp_retry(ms: u64) -> u64 {
    ms.clamp(MIN_RETRY_MS, MAX_RETRY_MS)
}

fn starts_with_ci(v: &[u8], prefix: &[u8]) -> bool {
    v.len() >= prefix.len() && v[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Whether `body` is a JSON-RPC error with `code` (the ts1 session-gone shape). Its id is not
/// looked at: the TypeScript SDK's example server answers a session it forgot with the
/// request's own id (lab FINDINGS §6), as a call's own -32000 would come.
fn is_error_code(body: &[u8], code: i64) -> bool {
    matches!(jsonrpc::decode(body), Ok(Message::Error { error, .. }) if error.code == code)
}

#[cfg(any(test, fuzzing))]
pub(crate) mod fuzzing;
mod oauth;
#[cfg(test)]
mod tests;

pub(crate) use oauth::OAuthState;
