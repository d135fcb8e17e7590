//! Requests the server makes of the client, and the host's answers to them.
//!
//! Two eras, one table. A legacy server sends real JSON-RPC requests (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`) and waits for a reply with its id. A modern server
//! answers a call with `resultType: "input_required"` and a map of input requests, and the
//! client retries the call with `inputResponses` (PROTOCOL.md §2.8). Either way each request of
//! a kind the host declared (`Config::answers`) becomes an `Event::ServerRequest` and waits in a
//! bounded slab until the host answers or rejects it, or its deadline passes. The engine stores
//! no callbacks: the host answers when it can, through [`Engine::answer`].

use std::time::Instant;

use serde_json::value::RawValue;
use slab::Slab;
use smallvec::SmallVec;

use super::answer_checks::{elicit, sampling};
use super::ending::Outcome;
use super::outbound::Control;
use super::requests::{CallId, Ended, SendState};
use super::Engine;
use crate::config::ServerRequestKinds;
use crate::error::AnswerError;
use crate::error::{CallError, LocalError, PeerError};
use crate::proto::json::{self, Kind, RawJson};

/// Handle to one server request waiting for the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerRequestId {
    slot: u32,
    generation: u32,
}

impl ServerRequestId {
    /// The handle as an integer, for logs.
    pub fn get(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.slot)
    }
}

impl std::fmt::Display for ServerRequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "server-request#{}", self.get())
    }
}

/// What the server asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerRequestKind {
    /// `elicitation/create`, form mode: answer an `ElicitResult` whose `content` fits
    /// `params.requestedSchema` (see [`elicitation_defaults`](crate::elicitation_defaults)).
    ElicitationForm,
    /// `elicitation/create`, URL mode: `accept` means only that the user agreed to open it.
    ElicitationUrl,
    /// `sampling/createMessage`: answer a `CreateMessageResult`.
    Sampling,
    /// `roots/list`: answer `{"roots":[...]}`, each `uri` a `file://` URI (checked).
    Roots,
}

impl ServerRequestKind {
    /// The method the server used.
    pub fn method(self) -> &'static str {
        match self {
            Self::ElicitationForm | Self::ElicitationUrl => "elicitation/create",
            Self::Sampling => "sampling/createMessage",
            Self::Roots => "roots/list",
        }
    }

    fn of(method: &str, params: Option<RawJson<'_>>) -> Option<Self> {
        match method {
            "elicitation/create" => {
                let url = params
                    .and_then(|p| p.get("mode"))
                    .and_then(RawJson::as_str)
                    .is_some_and(|m| m == "url");
                Some(if url { Self::ElicitationUrl } else { Self::ElicitationForm })
            }
            "sampling/createMessage" => Some(Self::Sampling),
            "roots/list" => Some(Self::Roots),
            _ => None,
        }
    }
}

impl ServerRequestKinds {
    fn declares(self, kind: ServerRequestKind) -> bool {
        match kind {
            ServerRequestKind::ElicitationForm => self.elicitation_form,
            ServerRequestKind::ElicitationUrl => self.elicitation_url,
            ServerRequestKind::Sampling => self.sampling,
            ServerRequestKind::Roots => self.roots,
        }
    }

    /// `client_capabilities` with `elicitation`, `sampling` and `roots` replaced by exactly
    /// what is declared: a capability the host cannot answer must not invite requests.
    /// The other members keep their text and order.
    pub(crate) fn capabilities(self, configured: &str) -> String {
        let mut out = without_members(configured, &["elicitation", "sampling", "roots"]);
        let elicitation = match (self.elicitation_form, self.elicitation_url) {
            (true, true) => Some(r#"{"form":{},"url":{}}"#),
            (true, false) => Some(r#"{"form":{}}"#),
            (false, true) => Some(r#"{"url":{}}"#),
            (false, false) => None,
        };
        if let Some(value) = elicitation {
            push_member(&mut out, "elicitation", value);
        }
        if self.sampling {
            push_member(
                &mut out,
                "sampling",
                if self.sampling_tools { r#"{"tools":{}}"# } else { "{}" },
            );
        }
        if self.roots {
            push_member(&mut out, "roots", "{}");
        }
        out.push('}');
        out
    }

    /// The 2025-11-25 form of `capabilities` (as built above): `roots.listChanged` when the
    /// host promised change notifications. 2026-07-28 has no such field.
    pub(crate) fn legacy_capabilities(self, capabilities: &str) -> String {
        if !(self.roots && self.roots_list_changed) {
            return capabilities.to_owned();
        }
        let mut out = without_members(capabilities, &["roots"]);
        push_member(&mut out, "roots", r#"{"listChanged":true}"#);
        out.push('}');
        out
    }
}

/// `capabilities` (an object, as built above) with `extensions` as its `extensions` member,
/// unless `extensions` has no member (then what the host configured stays).
pub(crate) fn with_extensions(capabilities: String, extensions: &str) -> String {
    let declared = json::parse(extensions.as_bytes()).is_ok_and(|e| e.members().next().is_some());
    if !declared {
        return capabilities;
    }
    let mut out = without_members(&capabilities, &["extensions"]);
    push_member(&mut out, "extensions", extensions.trim());
    out.push('}');
    out
}

/// The start of a copy of the object `json` without the members named `drop` and without its
/// closing brace, for [`push_member`] to add to. Read with the engine's own scanner rather
/// than a `serde_json::Map`, which linked serde_json's whole tree building into every client
/// (about 40 KB of a minimal one). A key that occurs more than once keeps its last value, as
/// the map did. Not JSON (`Config::check` refuses that): no members.
fn without_members(json: &str, drop: &[&str]) -> String {
    let mut out = String::with_capacity(json.len() + 64);
    out.push('{');
    let Ok(object) = json::parse(json.as_bytes()) else { return out };
    for (i, (key, value)) in object.members().enumerate() {
        let replaced = drop.iter().any(|d| key.eq_str(d));
        let repeated = object.members().skip(i + 1).any(|(later, _)| later.raw() == key.raw());
        if !replaced && !repeated {
            push_member(&mut out, key.raw(), value.text());
        }
    }
    out
}

/// Appends `"key":value` (`key` already escaped) to an object [`without_members`] began.
fn push_member(out: &mut String, key: &str, value: &str) {
    if out.len() > 1 {
        out.push(',');
    }
    out.push('"');
    out.push_str(key);
    out.push_str("\":");
    out.push_str(value);
}

/// Where an answer goes.
#[derive(Debug)]
enum Origin {
    /// A legacy JSON-RPC request: the reply carries the server's id, as sent.
    #[cfg_attr(not(feature = "server-requests"), allow(dead_code))]
    // only such a client queues one
    Legacy { id: SmallVec<[u8; 24]> },
    /// One input request of a modern call: the answer joins `inputResponses` under `key` (its
    /// raw JSON text, escapes kept).
    Input { call: CallId, key: String },
}

#[derive(Debug)]
struct Entry {
    generation: u32,
    kind: ServerRequestKind,
    origin: Origin,
    /// Legacy requests only: input requests live under their call's deadline.
    deadline: Instant,
    /// The request's params (for checking an elicitation answer against its schema).
    params: String,
    answer: Option<String>,
    /// Handed to the host's answer handlers already (`Engine::offer_server_request`).
    offered: bool,
}

impl Entry {
    /// A request waiting for the host, as `insert` builds it once it has a generation.
    fn waiting(
        kind: ServerRequestKind,
        origin: Origin,
        deadline: Instant,
        params: &str,
    ) -> impl FnOnce(u32) -> Self + '_ {
        move |generation| Entry {
            generation,
            kind,
            origin,
            deadline,
            params: params.to_owned(),
            answer: None,
            offered: false,
        }
    }
}

/// The waiting server requests: a slab bounded by `Config::max_server_requests`.
#[derive(Debug)]
pub(crate) struct ServerRequests {
    slab: Slab<Entry>,
    generations: Vec<u32>,
}

impl ServerRequests {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self { slab: Slab::with_capacity(n), generations: vec![0; n] }
    }

    fn room(&self) -> usize {
        self.generations.len() - self.slab.len()
    }

    fn insert(&mut self, entry: impl FnOnce(u32) -> Entry) -> Option<ServerRequestId> {
        if self.room() == 0 {
            return None;
        }
        let slot = self.slab.vacant_key();
        let g = &mut self.generations[slot];
        *g = g.wrapping_add(1).max(1);
        let generation = *g;
        self.slab.insert(entry(generation));
        Some(ServerRequestId { slot: slot as u32, generation })
    }

    fn get(&self, id: ServerRequestId) -> Option<&Entry> {
        self.slab.get(id.slot as usize).filter(|e| e.generation == id.generation)
    }

    fn get_mut(&mut self, id: ServerRequestId) -> Option<&mut Entry> {
        self.slab.get_mut(id.slot as usize).filter(|e| e.generation == id.generation)
    }

    fn remove(&mut self, id: ServerRequestId) -> Option<Entry> {
        self.get_mut(id)?;
        self.slab.try_remove(id.slot as usize)
    }

    fn of_call(&self, call: CallId) -> impl Iterator<Item = (usize, &Entry)> {
        self.slab
            .iter()
            .filter(move |(_, e)| matches!(&e.origin, Origin::Input { call: c, .. } if *c == call))
    }

    /// Forgets the input requests of a call that ended.
    pub(crate) fn drop_call(&mut self, call: CallId) {
        if self.slab.is_empty() {
            // Every call ends here, and almost none has a server request waiting.
            return;
        }
        let slots: SmallVec<[usize; 8]> = self.of_call(call).map(|(s, _)| s).collect();
        for s in slots {
            self.slab.try_remove(s);
        }
    }

    /// Forgets every legacy request: the server that sent them is gone.
    fn drain_legacy(&mut self) -> SmallVec<[ServerRequestId; 8]> {
        let gone: SmallVec<[ServerRequestId; 8]> = self
            .slab
            .iter()
            .filter(|(_, e)| matches!(e.origin, Origin::Legacy { .. }))
            .map(|(slot, e)| ServerRequestId { slot: slot as u32, generation: e.generation })
            .collect();
        for r in &gone {
            self.slab.try_remove(r.slot as usize);
        }
        gone
    }

    /// The earliest deadline of a legacy request.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.slab
            .iter()
            .filter(|(_, e)| matches!(e.origin, Origin::Legacy { .. }))
            .map(|(_, e)| e.deadline)
            .min()
    }
}

/// JSON-RPC codes the client replies with.
#[cfg(feature = "server-requests")]
const INVALID_PARAMS: i64 = -32602;
const INTERNAL: i64 = -32603;
/// The TypeScript and Python SDKs' `RequestTimeout`.
const TIMED_OUT: i64 = -32001;
/// "User rejected sampling request" (`client/sampling.mdx`).
const USER_REJECTED: i64 = -1;

impl Engine {
    /// A legacy server's request: `ping` is answered at once, a declared kind goes to the
    /// host, anything else is refused: -32601 for a kind not declared, -32602 for an
    /// elicitation in a mode not declared (`client/elicitation.mdx`).
    pub(super) fn on_server_request(
        &mut self,
        now: Instant,
        id: RawJson<'_>,
        method: &str,
        params: Option<RawJson<'_>>,
    ) {
        self.stats.server_requests += 1;
        let id = SmallVec::from_slice(id.text().as_bytes());
        if method == "ping" {
            return self.push_control(Control::Reply { id, ok: true });
        }
        // Without the feature `Config::check` lets no kind be declared, so every request but
        // `ping` is one this client does not know, as with nothing declared.
        #[cfg(not(feature = "server-requests"))]
        {
            let _ = (now, params);
            self.push_control(Control::Reply { id, ok: false })
        }
        #[cfg(feature = "server-requests")]
        self.take_server_request(now, id, method, params);
    }

    /// A server request of a kind the host may answer: refused, answered from the roots the
    /// host set, or queued for the host.
    #[cfg(feature = "server-requests")]
    fn take_server_request(
        &mut self,
        now: Instant,
        id: SmallVec<[u8; 24]>,
        method: &str,
        params: Option<RawJson<'_>>,
    ) {
        let answers = self.config.answers;
        let kind = ServerRequestKind::of(method, params).filter(|k| answers.declares(*k));
        let Some(kind) = kind else {
            let elicits = answers.elicitation_form || answers.elicitation_url;
            if method == "elicitation/create" && elicits {
                let message = "elicitation mode not supported";
                return self.push_control(Control::Refuse { id, code: INVALID_PARAMS, message });
            }
            return self.push_control(Control::Reply { id, ok: false });
        };
        if kind == ServerRequestKind::Sampling {
            let params = params.map_or("{}", RawJson::text);
            if let Err(message) = sampling::check_request(params, answers.sampling_tools) {
                return self.push_control(Control::Refuse { id, code: INVALID_PARAMS, message });
            }
        }
        if let (ServerRequestKind::Roots, Some(roots)) = (kind, self.roots.current()) {
            let result = roots.to_owned();
            return self.push_control(Control::Answer { id, result });
        }
        let params = params.map_or("{}", RawJson::text);
        let timeout = self.config.server_request_timeout;
        let deadline = crate::time::later(now, timeout);
        let origin = Origin::Legacy { id: id.clone() };
        match self.server_requests.insert(Entry::waiting(kind, origin, deadline, params)) {
            Some(request) => self.events.server_request(request, kind, None, params),
            None => {
                let message = "too many server requests waiting";
                self.push_control(Control::Refuse { id, code: INTERNAL, message });
            }
        }
    }

    /// A call's `input_required` result: each input request goes to the host, and the call
    /// waits (its deadline running) until every one is answered; with none (only
    /// `requestState`, PROTOCOL.md §2.8 point 4) it is retried at once.
    pub(super) fn on_input_required(&mut self, now: Instant, slot: usize, result: RawJson<'_>) {
        let Some(call) = self.requests.call_id(slot) else { return };
        let rounds = self.requests.get(slot).map_or(0, |p| p.rounds);
        let fail = Outcome::Failed;
        if rounds >= self.config.max_input_rounds {
            let e = CallError::Local(LocalError::TooManyInputRounds);
            return self.finish(now, slot, Ended::Answered, fail(e));
        }
        let inputs = result.get("inputRequests").filter(|r| r.kind() == Kind::Object);
        let state = result.get("requestState").filter(|s| s.kind() == Kind::String);
        if inputs.is_none() && state.is_none() {
            let e = CallError::Peer(PeerError::InvalidResult);
            return self.finish(now, slot, Ended::Answered, fail(e));
        }
        let mut asked: SmallVec<[(&str, ServerRequestKind, &str); 4]> = SmallVec::new();
        for (key, request) in inputs.into_iter().flat_map(RawJson::members) {
            let method = request.get("method").and_then(RawJson::as_str).unwrap_or_default();
            let params = request.get("params");
            let kind = ServerRequestKind::of(&method, params);
            // Without the feature nothing is declared (`Config::check`): every input request
            // fails the call as undeclared.
            #[cfg(not(feature = "server-requests"))]
            let kind: Option<ServerRequestKind> = kind.and(None);
            match kind.filter(|k| self.config.answers.declares(*k)) {
                Some(ServerRequestKind::Sampling) => {
                    let params = params.map_or("{}", RawJson::text);
                    let tools = self.config.answers.sampling_tools;
                    if let Err(reason) = sampling::check_request(params, tools) {
                        log::debug!("refused a sampling input request: {reason}");
                        let e = CallError::Peer(PeerError::InvalidResult);
                        return self.finish(now, slot, Ended::Answered, fail(e));
                    }
                    asked.push((key.raw(), ServerRequestKind::Sampling, params));
                }
                Some(kind) => asked.push((key.raw(), kind, params.map_or("{}", RawJson::text))),
                None => {
                    let e = CallError::Peer(PeerError::UndeclaredInputRequest(method.into_owned()));
                    return self.finish(now, slot, Ended::Answered, fail(e));
                }
            }
        }
        if asked.len() > self.server_requests.room() {
            let e = CallError::Local(LocalError::TooManyServerRequests);
            return self.finish(now, slot, Ended::Answered, fail(e));
        }
        let bufs = self.requests.bufs_mut(slot);
        // The original params, without an earlier round's members, are what every retry sends.
        let len = bufs.params_len();
        let more = bufs.more();
        let base = *more.params_base.get_or_insert(len);
        more.request_state.clear();
        if let Some(s) = state {
            more.request_state.extend_from_slice(s.text().as_bytes());
        }
        bufs.truncate_params(base);
        // The interim result answered this wire id; the retry goes under a new one.
        self.requests.renew_wire_id(slot);
        self.requests.set_state(slot, SendState::AwaitingInput);
        if let Some(p) = self.requests.get_mut(slot) {
            p.rounds += 1;
        }
        let deadline = self.requests.get(slot).map_or(now, |p| self.epoch.instant(p.deadline));
        let mut waiting = false;
        for (key, kind, params) in asked.iter().copied() {
            let origin = Origin::Input { call, key: key.to_owned() };
            // Roots the host set answer at once; the host sees only the other requests.
            let known = self.roots.current().filter(|_| kind == ServerRequestKind::Roots);
            let answer = known.map(str::to_owned);
            let answered = answer.is_some();
            let entry = Entry::waiting(kind, origin, deadline, params);
            let Some(request) = self.server_requests.insert(|g| Entry { answer, ..entry(g) })
            else {
                continue;
            };
            if !answered {
                waiting = true;
                self.events.server_request(request, kind, Some(call), params);
            }
        }
        if !waiting {
            self.send_round(slot, call);
        }
    }

    /// Every input request of the call is answered: the call goes again with
    /// `inputResponses`, and `requestState` exactly as the server sent it (left out when it
    /// sent none), under the wire id taken when the interim result came.
    fn send_round(&mut self, slot: usize, call: CallId) {
        let mut responses: Vec<u8> = Vec::new();
        for (_, e) in self.server_requests.of_call(call) {
            let (Origin::Input { key, .. }, Some(answer)) = (&e.origin, &e.answer) else {
                continue;
            };
            responses.push(if responses.is_empty() { b'{' } else { b',' });
            responses.push(b'"');
            responses.extend_from_slice(key.as_bytes());
            responses.extend_from_slice(b"\":");
            responses.extend_from_slice(answer.as_bytes());
        }
        self.server_requests.drop_call(call);
        let bufs = self.requests.bufs_mut(slot);
        let (params, more) = bufs.params_buf();
        let state = more.map_or(&[][..], |m| m.request_state.as_slice());
        if !responses.is_empty() {
            responses.push(b'}');
            params.extend_from_slice(b",\"inputResponses\":");
            params.extend_from_slice(&responses);
        }
        if !state.is_empty() {
            params.extend_from_slice(b",\"requestState\":");
            params.extend_from_slice(state);
        }
        self.requests.set_state(slot, SendState::Queued);
        if let Some(id) = self.requests.wire_id(slot) {
            self.send_queue.push_back(id);
        }
    }

    /// What a waiting server request asks for; `None` once it is answered or gone.
    pub fn server_request_kind(&self, request: ServerRequestId) -> Option<ServerRequestKind> {
        self.server_requests.get(request).map(|e| e.kind)
    }

    /// The first server request not yet offered to the host's answer handlers, now marked
    /// offered: its handle, kind, call (`None` for a legacy request) and params.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the host's handlers only
    pub(crate) fn offer_server_request(
        &mut self,
    ) -> Option<(ServerRequestId, ServerRequestKind, Option<CallId>, &str)> {
        let (slot, e) = self.server_requests.slab.iter_mut().find(|(_, e)| !e.offered)?;
        e.offered = true;
        let id = ServerRequestId { slot: slot as u32, generation: e.generation };
        let call = match e.origin {
            Origin::Input { call, .. } => Some(call),
            Origin::Legacy { .. } => None,
        };
        Some((id, e.kind, call, e.params.as_str()))
    }

    /// Whether any server request waits to be offered to the host's answer handlers.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn has_unoffered_server_requests(&self) -> bool {
        self.server_requests.slab.iter().any(|(_, e)| !e.offered)
    }

    /// A server request nobody answered that `call` depends on: one of its input requests
    /// (2026-07-28), or any legacy request (2025-11-25 does not link a request to a call).
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn unanswered_for(
        &self,
        call: CallId,
    ) -> Option<(ServerRequestId, ServerRequestKind)> {
        self.server_requests.slab.iter().find_map(|(slot, e)| {
            let blocks = match e.origin {
                Origin::Input { call: c, .. } => c == call && e.answer.is_none(),
                Origin::Legacy { .. } => true,
            };
            let id = ServerRequestId { slot: slot as u32, generation: e.generation };
            blocks.then_some((id, e.kind))
        })
    }

    /// Ends `call` at once with `error` because of server request `request` nobody can
    /// answer (a blocking helper waits for it): a legacy request is refused, so the server is
    /// not left waiting; the call ends as cancelled on the wire. Their events are dropped.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn end_unanswered(
        &mut self,
        now: Instant,
        call: CallId,
        request: ServerRequestId,
        error: CallError,
    ) {
        let legacy = matches!(
            self.server_requests.get(request),
            Some(Entry { origin: Origin::Legacy { .. }, .. })
        );
        if let Some(Entry { origin: Origin::Legacy { id }, .. }) =
            legacy.then(|| self.server_requests.remove(request)).flatten()
        {
            self.events.remove_server_request(request);
            let (code, message) = (INTERNAL, "the client has no answer for this request");
            self.push_control(Control::Refuse { id, code, message });
        }
        let of_call: SmallVec<[ServerRequestId; 4]> = self
            .server_requests
            .of_call(call)
            .map(|(slot, e)| ServerRequestId { slot: slot as u32, generation: e.generation })
            .collect();
        for r in of_call {
            self.events.remove_server_request(r);
        }
        if let Some(slot) = self.requests.slot_of(call) {
            self.abandon(now, slot, error);
        }
    }

    /// Drops the queued `Event::ServerRequest` of a request the host's handler answered.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn forget_server_request_event(&mut self, request: ServerRequestId) {
        self.events.remove_server_request(request);
    }

    /// The host's answer to a server request (a JSON object: an `ElicitResult`,
    /// `CreateMessageResult` or `ListRootsResult`). A form elicitation's answer is checked
    /// against its requested schema first; nothing is sent when it does not fit.
    pub fn answer(
        &mut self,
        _now: Instant,
        request: ServerRequestId,
        result: &RawValue,
    ) -> Result<(), AnswerError> {
        let entry = self.server_requests.get_mut(request).ok_or(AnswerError::NotPending)?;
        let text = result.get().trim();
        if !text.starts_with('{') {
            return Err(AnswerError::NotObject);
        }
        match entry.kind {
            ServerRequestKind::ElicitationForm => elicit::check_form_answer(&entry.params, text)?,
            ServerRequestKind::Roots => self.roots.check(text)?,
            ServerRequestKind::Sampling => sampling::check_answer(&entry.params, text)?,
            _ => {}
        }
        // A line break can only be whitespace in valid JSON (strings escape them), and on
        // stdio it would end the frame: the answer goes out on one line.
        let text = text.replace(['\n', '\r'], " ");
        let text = text.as_str();
        if let Origin::Input { call, .. } = entry.origin {
            entry.answer = Some(text.to_owned());
            let waiting = self.server_requests.of_call(call).any(|(_, e)| e.answer.is_none());
            if let (false, Some(slot)) = (waiting, self.requests.slot_of(call)) {
                self.send_round(slot, call);
            }
            return Ok(());
        }
        if let Some(Entry { origin: Origin::Legacy { id }, .. }) =
            self.server_requests.remove(request)
        {
            self.push_control(Control::Answer { id, result: text.to_owned() });
        }
        Ok(())
    }

    /// The host refuses a server request. A legacy request gets an error reply (sampling:
    /// -1, "User rejected sampling request"); a modern call is not retried and fails with
    /// `LocalError::InputRejected` (there is no error slot in `inputResponses`). To decline an
    /// elicitation politely, answer `{"action":"decline"}` instead.
    pub fn reject(&mut self, now: Instant, request: ServerRequestId) -> Result<(), AnswerError> {
        let entry = self.server_requests.remove(request).ok_or(AnswerError::NotPending)?;
        match entry.origin {
            Origin::Legacy { id } => {
                let (code, message) = match entry.kind {
                    ServerRequestKind::Sampling => {
                        (USER_REJECTED, "User rejected sampling request")
                    }
                    _ => (INTERNAL, "the client refused the request"),
                };
                self.push_control(Control::Refuse { id, code, message });
            }
            Origin::Input { call, .. } => {
                if let Some(slot) = self.requests.slot_of(call) {
                    let e = CallError::Local(LocalError::InputRejected);
                    self.finish(now, slot, Ended::Abandoned, Outcome::Failed(e));
                }
            }
        }
        Ok(())
    }

    /// The transport closed: the legacy requests' ids mean nothing to a new process or
    /// session, so they end (`ServerRequestExpired`) and nothing is sent for them.
    pub(super) fn forget_legacy_requests(&mut self) {
        for request in self.server_requests.drain_legacy() {
            self.events.server_request_expired(request);
        }
    }

    /// Legacy server requests whose deadline passed: the server is told with a timeout error,
    /// the host with `ServerRequestExpired`.
    pub(super) fn expire_server_requests(&mut self, now: Instant) {
        while self.server_requests.next_deadline().is_some_and(|d| d <= now) {
            let due = self
                .server_requests
                .slab
                .iter()
                .find(|(_, e)| matches!(e.origin, Origin::Legacy { .. }) && e.deadline <= now);
            let Some((slot, e)) = due else { return };
            let request = ServerRequestId { slot: slot as u32, generation: e.generation };
            if let Some(Entry { origin: Origin::Legacy { id }, .. }) =
                self.server_requests.remove(request)
            {
                let message = "the client did not answer in time";
                self.push_control(Control::Refuse { id, code: TIMED_OUT, message });
                self.events.server_request_expired(request);
            }
        }
    }
}
