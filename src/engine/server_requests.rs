//! Requests the server makes of the client, and the host's answers to them.
//!
//! Two eras, one table. A legacy server sends real JSON-RPC requests (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`) and waits for a reply with its id. A modern server
//! answers a call with `resultType: "input_required"` and a map of input requests, and the
//! client retries the call with `inputResponses` (PROTOCOL.md §2.8). Either way each request of
//! a kind the host declared (`Config::answers`) becomes an `Event::ServerRequest` and waits in a
//! bounded slab until the host answers or rejects it, or its deadline passes. The engine stores
//! no callbacks: the host answers when it can, through [`Engine::answer`](super::Engine::answer).

use std::time::Instant;

use slab::Slab;
use smallvec::SmallVec;

use super::requests::CallId;
use crate::config::{Config, ServerRequestKinds};
use crate::proto::json;
use crate::proto::mcp::ServerRequestKind;

/// Handle to one server request waiting for the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerRequestId {
    slot: u32,
    generation: u32,
}

impl ServerRequestId {
    /// The handle of the entry in `slot` at `generation` of the table.
    pub(super) fn new(slot: usize, generation: u32) -> Self {
        Self { slot: slot as u32, generation }
    }

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

impl ServerRequestKinds {
    pub(super) fn declares(self, kind: ServerRequestKind) -> bool {
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

/// The client capabilities an engine of `config` declares to its server: the configured ones
/// with the kinds the host answers put in, and the extensions. What the catalog and the era
/// verdict are keyed by, since a server may answer differently for them.
pub(crate) fn declared_capabilities(config: &Config) -> String {
    let declared = with_extensions(
        config.answers.capabilities(&config.client_capabilities),
        &config.extensions,
    );
    // Values are copied as the host wrote them, and a host may write them over several lines:
    // they go into every request's `_meta`, and a stdio frame is one line. A line break in
    // valid JSON is whitespace (inside a string it would be escaped), so a space does as well.
    if declared.contains(['\n', '\r']) {
        return declared.replace(['\n', '\r'], " ");
    }
    declared
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
pub(super) enum Origin {
    /// A legacy JSON-RPC request: the reply carries the server's id, as sent.
    #[cfg_attr(not(feature = "server-requests"), allow(dead_code))]
    // only such a client queues one
    Legacy { id: SmallVec<[u8; 24]> },
    /// One input request of a modern call: the answer joins `inputResponses` under `key` (its
    /// raw JSON text, escapes kept).
    Input { call: CallId, key: String },
}

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) generation: u32,
    pub(super) kind: ServerRequestKind,
    pub(super) origin: Origin,
    /// Legacy requests only: input requests live under their call's deadline.
    pub(super) deadline: Instant,
    /// The request's params (for checking an elicitation answer against its schema).
    pub(super) params: String,
    pub(super) answer: Option<super::outbound::HostAnswer>,
    /// Handed to the host's answer handlers already (`Engine::offer_server_request`).
    pub(super) offered: bool,
}

impl Entry {
    /// Whether this is the legacy request the server sent with the JSON-RPC id `id` (as JSON
    /// values: the same number text, or the same string however escaped; `wanted` is `id`'s
    /// string, when it is one).
    fn is_legacy(&self, id: json::RawJson<'_>, wanted: Option<&str>) -> bool {
        let Origin::Legacy { id: sent } = &self.origin else { return false };
        if sent[..] == *id.text().as_bytes() {
            return true;
        }
        wanted.is_some_and(|w| {
            let sent = std::str::from_utf8(sent).ok().and_then(|t| json::parse(t.as_bytes()).ok());
            sent.and_then(|v| v.as_str()).is_some_and(|s| s == w)
        })
    }

    /// A request waiting for the host, as `insert` builds it once it has a generation.
    pub(super) fn waiting(
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

    /// The first request not yet offered to the host's answer handlers, now marked offered:
    /// its handle, kind, call (`None` for a legacy request) and params.
    pub(super) fn offer(
        &mut self,
    ) -> Option<(ServerRequestId, ServerRequestKind, Option<CallId>, &str)> {
        let (slot, e) = self.slab.iter_mut().find(|(_, e)| !e.offered)?;
        e.offered = true;
        let id = ServerRequestId::new(slot, e.generation);
        let call = match e.origin {
            Origin::Input { call, .. } => Some(call),
            Origin::Legacy { .. } => None,
        };
        Some((id, e.kind, call, e.params.as_str()))
    }

    pub(super) fn has_unoffered(&self) -> bool {
        self.slab.iter().any(|(_, e)| !e.offered)
    }

    /// A request nobody answered that `call` depends on: one of its input requests
    /// (2026-07-28), or any legacy request (2025-11-25 does not link a request to a call).
    pub(super) fn unanswered_for(
        &self,
        call: CallId,
    ) -> Option<(ServerRequestId, ServerRequestKind)> {
        self.slab.iter().find_map(|(slot, e)| {
            let blocks = match e.origin {
                Origin::Input { call: c, .. } => c == call && e.answer.is_none(),
                Origin::Legacy { .. } => true,
            };
            let id = ServerRequestId::new(slot, e.generation);
            blocks.then_some((id, e.kind))
        })
    }

    /// No request waits: the common case at every call's end.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.slab.is_empty()
    }

    pub(super) fn room(&self) -> usize {
        self.generations.len() - self.slab.len()
    }

    pub(super) fn insert(&mut self, entry: impl FnOnce(u32) -> Entry) -> Option<ServerRequestId> {
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

    pub(super) fn get(&self, id: ServerRequestId) -> Option<&Entry> {
        self.slab.get(id.slot as usize).filter(|e| e.generation == id.generation)
    }

    pub(super) fn get_mut(&mut self, id: ServerRequestId) -> Option<&mut Entry> {
        self.slab.get_mut(id.slot as usize).filter(|e| e.generation == id.generation)
    }

    pub(super) fn remove(&mut self, id: ServerRequestId) -> Option<Entry> {
        self.get_mut(id)?;
        self.slab.try_remove(id.slot as usize)
    }

    pub(super) fn of_call(&self, call: CallId) -> impl Iterator<Item = (usize, &Entry)> {
        self.slab
            .iter()
            .filter(move |(_, e)| matches!(&e.origin, Origin::Input { call: c, .. } if *c == call))
    }

    /// Forgets the input requests of a call that ended.
    pub(crate) fn drop_call(&mut self, call: CallId) -> SmallVec<[ServerRequestId; 4]> {
        if self.slab.is_empty() {
            // Every call ends here, and almost none has a server request waiting.
            return SmallVec::new();
        }
        let gone: SmallVec<[ServerRequestId; 4]> = self
            .of_call(call)
            .map(|(slot, e)| ServerRequestId { slot: slot as u32, generation: e.generation })
            .collect();
        for r in &gone {
            self.slab.try_remove(r.slot as usize);
        }
        gone
    }

    /// Forgets every legacy request: the server that sent them is gone.
    pub(super) fn drain_legacy(&mut self) -> SmallVec<[ServerRequestId; 8]> {
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

    /// Whether a legacy request the server sent with the JSON-RPC id `id` still waits.
    pub(super) fn has_legacy(&self, id: json::RawJson<'_>) -> bool {
        let wanted = id.as_str();
        self.slab.iter().any(|(_, e)| e.is_legacy(id, wanted.as_deref()))
    }

    /// Removes the legacy request the server sent with the JSON-RPC id `id`.
    pub(super) fn take_legacy(&mut self, id: json::RawJson<'_>) -> Option<ServerRequestId> {
        let wanted = id.as_str();
        let (slot, e) = self.slab.iter().find(|(_, e)| e.is_legacy(id, wanted.as_deref()))?;
        let request = ServerRequestId::new(slot, e.generation);
        self.remove(request).map(|_| request)
    }

    /// Removes one legacy request whose deadline is `now` or earlier: its handle and the
    /// server's JSON-RPC id, for the timeout error the server is owed.
    pub(super) fn take_expired(
        &mut self,
        now: Instant,
    ) -> Option<(ServerRequestId, SmallVec<[u8; 24]>)> {
        let (slot, e) = self
            .slab
            .iter()
            .find(|(_, e)| matches!(e.origin, Origin::Legacy { .. }) && e.deadline <= now)?;
        let request = ServerRequestId::new(slot, e.generation);
        match self.remove(request)?.origin {
            Origin::Legacy { id } => Some((request, id)),
            Origin::Input { .. } => None,
        }
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.slab
            .iter()
            .filter(|(_, e)| matches!(e.origin, Origin::Legacy { .. }))
            .map(|(_, e)| e.deadline)
            .min()
    }
}

/// A server request whose id is longer than this (its JSON text) is ignored: the reply and
/// the table entry each keep a copy, and the bounds on them count frames, not bytes.
pub(super) const MAX_SERVER_REQUEST_ID_BYTES: usize = 1024;

/// JSON-RPC codes the client replies with.
#[cfg(feature = "server-requests")]
pub(super) const INVALID_PARAMS: i64 = -32602;
pub(super) const INTERNAL: i64 = -32603;
/// The TypeScript and Python SDKs' `RequestTimeout`.
pub(super) const TIMED_OUT: i64 = -32001;
/// "User rejected sampling request" (`client/sampling.mdx`).
pub(super) const USER_REJECTED: i64 = -1;
