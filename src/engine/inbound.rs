//! Incoming messages: results and errors matched to their calls, server requests answered,
//! notifications routed.

use std::time::Instant;

use smallvec::SmallVec;

use crate::proto::jsonrpc::ResultHead;

use super::ending::Outcome;
use super::events::ListKind;
use super::lifecycle::Lifecycle;
use super::requests::{CallId, Ended, Lookup, Owner};
use super::Engine;
use crate::error::{CallError, PeerError, RpcError, TransportError};
use crate::proto::json::{self, Kind, RawJson};
use crate::proto::jsonrpc::{self, Message, WireId};
use crate::proto::mcp::{self, notify, Method, ResultType};

impl Engine {
    pub(super) fn dispatch(&mut self, now: Instant, frame: &[u8], reply_to: Option<WireId>) {
        self.stats.frames_in += 1;
        let message = match jsonrpc::decode(frame) {
            Ok(m) => m,
            Err(jsonrpc::DecodeError::TooDeep) => {
                // Perhaps a reply: when its id is at either end, its call fails now instead of
                // waiting out its deadline.
                self.stats.invalid_frames += 1;
                let ends = frame.len().min(64);
                let (head, tail) = (&frame[..ends], &frame[frame.len() - ends..]);
                return self.fail_unreadable(now, sniff_id(head, tail), PeerError::TooDeep);
            }
            Err(e) => {
                // Servers print banners and logs to stdout in the wild: skip, count, go on.
                self.stats.invalid_frames += 1;
                log::debug!("skipping a frame that is not JSON-RPC: {e}");
                return;
            }
        };
        match message {
            Message::Result { id, result, head } => self.on_result(now, id, result, head),
            Message::Error { id: Some(id), error } => {
                let rpc = RpcError::from_raw(error.code, &error.message, error.data);
                self.on_error(now, id, rpc, error.data);
            }
            Message::Error { id: None, error } => match reply_to {
                Some(to) => {
                    let rpc = RpcError::from_raw(error.code, &error.message, error.data);
                    let id_text = itoa_buf(to);
                    if let Ok(id) = json::parse(id_text.as_str().as_bytes()) {
                        self.on_error(now, id, rpc, error.data);
                    }
                }
                None => {
                    self.stats.errors_without_id += 1;
                    // The server's message may quote the request: TRACE only.
                    log::debug!("error reply with a null id: code {}", error.code);
                    log::trace!("error reply with a null id: {}", error.message);
                }
            },
            Message::Request { id, method, params } => {
                self.on_server_request(now, id, &method, params)
            }
            Message::Notification { method, params } => self.on_notification(now, &method, params),
        }
    }

    /// A message that could not be read (`error`): when its id was read from its ends and
    /// names a pending request, that request fails with `error`.
    pub(super) fn fail_unreadable(&mut self, now: Instant, id: Option<WireId>, error: PeerError) {
        let Some(id) = id else {
            log::debug!("dropped an unreadable message ({error}) whose id could not be read");
            return;
        };
        if let Lookup::Pending(slot) = self.requests.lookup(id) {
            match self.requests.get(slot).map(|p| p.owner) {
                Some(Owner::Host) => self.abandon(now, slot, CallError::Peer(error)),
                Some(_) => self.lifecycle_failed(now, error),
                None => {}
            }
        }
    }

    pub(super) fn resolve(&mut self, now: Instant, id: RawJson<'_>) -> Option<(usize, Owner)> {
        let lookup = WireId::parse(id).map_or(Lookup::Unknown, |w| self.requests.lookup(w));
        match lookup {
            Lookup::Pending(slot) => {
                self.requests.end_exchange(slot, self.epoch.stamp(now));
                self.requests.get(slot).map(|p| (slot, p.owner))
            }
            Lookup::Duplicate => {
                self.stats.duplicate_responses += 1;
                None
            }
            Lookup::Late => {
                self.stats.late_responses += 1;
                None
            }
            Lookup::Unknown => {
                self.stats.unknown_ids += 1;
                log::debug!("reply with an id mcpoll never issued: {}", id.text());
                None
            }
        }
    }

    pub(super) fn on_result(
        &mut self,
        now: Instant,
        id: RawJson<'_>,
        result: RawJson<'_>,
        head: ResultHead<'_>,
    ) {
        let Some((slot, owner)) = self.resolve(now, id) else {
            return;
        };
        if owner != Owner::Host {
            return self.on_lifecycle_result(now, owner, result);
        }
        // Under a saved verdict, the first answer confirms it, unless it has no `resultType`:
        // a legacy server answered (it is delivered as it is, then the era is probed).
        let legacy_answer = self.assumed && result.get("resultType").is_none();
        self.assumed = false;
        if legacy_answer {
            self.on_host_result(now, slot, result, head);
            return self.reverify(now);
        }
        self.on_host_result(now, slot, result, head)
    }

    fn on_host_result(
        &mut self,
        now: Instant,
        slot: usize,
        result: RawJson<'_>,
        head: ResultHead<'_>,
    ) {
        let Some((method, tasked, asked)) =
            self.requests.get(slot).map(|p| (p.method, p.task, p.task_asked))
        else {
            return;
        };
        if let Some(key) = method.list_key() {
            return self.on_page(now, slot, key, result);
        }
        if tasked {
            return self.on_task_reply(now, slot, result, head);
        }
        let head = mcp::result_head(head);
        if asked && method == Method::ToolsCall {
            let rt = head.map_or(ResultType::Complete, |(t, _)| t);
            if self.creates_task(slot, result, rt) {
                return self.on_task_created(now, slot, result);
            }
        }
        // A task nobody asked for is no result (the tasks extension, 2026-07-28).
        let head = head.filter(|(t, _)| *t != ResultType::Task);
        if matches!(head, Some((ResultType::InputRequired, _))) && method.takes_input() {
            return self.on_input_required(now, slot, result);
        }
        let outcome = match head {
            Some((result_type, is_error)) => {
                Outcome::Done { json: result.text(), result_type, is_error }
            }
            None => Outcome::Failed(CallError::Peer(PeerError::InvalidResult)),
        };
        self.finish(now, slot, Ended::Answered, outcome);
    }

    pub(super) fn on_error(
        &mut self,
        now: Instant,
        id: RawJson<'_>,
        error: RpcError,
        data: Option<RawJson<'_>>,
    ) {
        let Some((slot, owner)) = self.resolve(now, id) else {
            return;
        };
        if owner != Owner::Host {
            return self.on_lifecycle_error(now, owner, error, data);
        }
        if self.assumed || matches!(self.lifecycle, Lifecycle::Probing(_)) {
            // Under a saved verdict any error may mean the verdict is wrong; `-32022` says
            // so and that the call was not processed. Such a call, and one safe to repeat,
            // goes out again once the probe has settled the era.
            let refused = error.code == RpcError::UNSUPPORTED_PROTOCOL_VERSION;
            let safe = self.requests.get(slot).is_some_and(|p| p.class.retry_safe());
            if refused || (self.assumed && safe) {
                if let Some(id) = self.requests.renew_wire_id(slot) {
                    self.send_queue.push_front(id);
                }
                return self.reverify(now);
            }
            if self.assumed {
                self.finish(
                    now,
                    slot,
                    Ended::Answered,
                    Outcome::Failed(CallError::Protocol(error)),
                );
                return self.reverify(now);
            }
        }
        if error.code == RpcError::HEADER_MISMATCH && self.park_for_relist(now, slot) {
            return;
        }
        self.finish(now, slot, Ended::Answered, Outcome::Failed(CallError::Protocol(error)));
    }

    pub(super) fn on_notification(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<RawJson<'_>>,
    ) {
        match method {
            notify::PROGRESS => self.on_progress(params),
            notify::TOOLS_CHANGED => self.events.list_changed(ListKind::Tools),
            notify::PROMPTS_CHANGED => self.events.list_changed(ListKind::Prompts),
            notify::RESOURCES_CHANGED => self.events.list_changed(ListKind::Resources),
            notify::RESOURCE_UPDATED => {
                if let Some(uri) = params.and_then(|p| p.get("uri")).and_then(RawJson::as_str) {
                    self.events.resource_updated(&uri);
                }
            }
            notify::ACKNOWLEDGED => self.on_acknowledged(params),
            notify::CANCELLED => self.on_server_cancelled(now, params),
            notify::MESSAGE => log::trace!("server notification {method}"),
            notify::INITIALIZED | notify::ROOTS_LIST_CHANGED => {
                log::debug!("ignoring notification {method}")
            }
            // An extension's or a vendor's: the host's to read.
            _ => self.events.notification(method, params.map_or("{}", |p| p.text())),
        }
    }

    /// The pending listen call a subscription id (its wire id) names.
    pub(super) fn listen_slot(&self, id: Option<RawJson<'_>>) -> Option<usize> {
        let id = WireId::parse(id?)?;
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return None };
        (self.requests.get(slot)?.method == Method::Listen).then_some(slot)
    }

    pub(super) fn on_acknowledged(&mut self, params: Option<RawJson<'_>>) {
        let Some(params) = params else { return };
        let id = params.get("_meta").and_then(|m| m.get("io.modelcontextprotocol/subscriptionId"));
        let Some(slot) = self.listen_slot(id) else { return };
        if let Some(call) = self.requests.call_id(slot) {
            let honoured = params.get("notifications").map_or("{}", RawJson::text);
            self.events.subscribed(call, honoured);
        }
    }

    /// On stdio a server ends a subscription with `notifications/cancelled` naming the listen
    /// request (PROTOCOL.md §2.9, U3): the first of that and the graceful result ends it.
    pub(super) fn on_server_cancelled(&mut self, now: Instant, params: Option<RawJson<'_>>) {
        let Some(slot) = self.listen_slot(params.and_then(|p| p.get("requestId"))) else { return };
        let e = CallError::Transport(TransportError::ClosedByServer);
        self.finish(now, slot, Ended::Answered, Outcome::Failed(e));
    }

    pub(super) fn on_progress(&mut self, params: Option<RawJson<'_>>) {
        let Some(p) = params.filter(|p| p.kind() == Kind::Object) else {
            self.stats.invalid_frames += 1;
            return;
        };
        // The progress token is the call handle, so it survives new pages and attempts.
        let Some(token) = p.get("progressToken").and_then(WireId::parse) else {
            return;
        };
        let progress = p.get("progress").and_then(RawJson::as_f64).unwrap_or(0.0);
        let total = p.get("total").and_then(RawJson::as_f64);
        let message = p.get("message").and_then(RawJson::as_str);
        let call = CallId(token);
        let wants = self
            .requests
            .slot_of(call)
            .and_then(|s| self.requests.get(s))
            .is_some_and(|r| r.progress);
        if wants {
            self.events.progress(call, progress, total, message.as_deref());
        }
    }
}

/// An id's decimal text on the stack.
pub(super) fn itoa_buf(id: WireId) -> SmallString {
    let mut s = SmallString::default();
    use std::fmt::Write;
    let _ = write!(s, "{}", id.get());
    s
}

/// A short string without heap allocation (ids have at most 16 digits).
#[derive(Default)]
pub(super) struct SmallString {
    buf: [u8; 24],
    len: usize,
}

impl SmallString {
    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

impl std::fmt::Write for SmallString {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Finds the JSON-RPC id of an oversize message from its ends: `{"jsonrpc":"2.0","id":N,` or
/// `{"id":N,` at the start (Python SDKs, sorted-key writers) or `"id":N}` at the very end
/// (TypeScript SDKs).
pub(super) fn sniff_id(head: &[u8], tail: &[u8]) -> Option<WireId> {
    pub(super) fn digits(s: &[u8]) -> Option<WireId> {
        let end = s.iter().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
        WireId::parse(json::parse(s.get(..end)?).ok()?)
    }
    let compact: SmallVec<[u8; 64]> =
        head.iter().copied().filter(|b| !b.is_ascii_whitespace()).collect();
    let after_brace = compact.strip_prefix(b"{".as_slice())?;
    let after_version =
        after_brace.strip_prefix(b"\"jsonrpc\":\"2.0\",".as_slice()).unwrap_or(after_brace);
    if let Some(rest) = after_version.strip_prefix(b"\"id\":".as_slice()) {
        return digits(rest);
    }
    let tail = tail.trim_ascii_end();
    let body = tail.strip_suffix(b"}")?;
    let start = body.iter().rposition(|b| !b.is_ascii_digit())? + 1;
    let prefix = body[..start].trim_ascii_end();
    let prefix = prefix.strip_suffix(b":")?.trim_ascii_end();
    prefix.ends_with(b"\"id\"").then(|| digits(&body[start..])).flatten()
}
