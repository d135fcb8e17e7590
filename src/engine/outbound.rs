//! Outgoing frames: requests with their `_meta`, control frames, and the route a driver needs.

use std::time::Instant;

use smallvec::SmallVec;

use super::headers::ParamHeaders;
use super::inbound::itoa_buf;
use super::requests::SendState;
use super::{Engine, NameRef, Transmit, TransmitKind, TransportKind, MAX_CONTROL};
use crate::error::RpcError;
use crate::proto::jsonrpc::{self, write_json_str, MethodName, WireId};
use crate::proto::mcp::{notify, Method};
use crate::proto::meta::StaticMeta;
use crate::proto::version::Era;

/// A frame that is not a request: notifications and replies to server requests.
#[derive(Debug)]
pub(super) enum Control {
    Cancelled {
        id: WireId,
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
        result: String,
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

impl Engine {
    /// `true` while requests or control frames wait for `poll_transmit`.
    // Only the host (feature `stdio`) asks, to tell an idle loop it may skip its poll.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn has_output(&self) -> bool {
        !self.send_queue.is_empty() || !self.control.is_empty()
    }

    /// Writes the request with this wire id, if it is still current and queued.
    pub(super) fn write_request(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        id: WireId,
    ) -> Option<Method> {
        let slot = id.slot();
        let p = self.requests.get(slot)?;
        if p.wire_gen != id.generation() || p.state != SendState::Queued {
            return None; // cancelled or renewed since it was queued
        }
        let (mut method, tasked, asked) = (p.method, p.task, p.task_asked);
        let modern = self.lifecycle.version().is_some_and(|v| v.era() == Era::Modern);
        // Only calls that asked for a task look further (plain calls: one flag).
        let mut task_meta = false;
        if asked && !tasked {
            if modern {
                task_meta = true;
            } else {
                self.augment_legacy_call(slot);
            }
        }
        let bufs = self.requests.bufs(slot);
        let static_meta = if !modern {
            None
        } else if task_meta && self.task_meta.is_some() {
            self.task_meta.as_ref().map(StaticMeta::bytes)
        } else {
            self.meta.as_ref().map(StaticMeta::bytes)
        };
        // A task's polls carry no per-call `_meta` (progress token, trace): the tool call did.
        let call_meta = if tasked { &[][..] } else { bufs.meta() };
        let meta = [static_meta.unwrap_or_default(), call_meta];
        if tasked {
            if let Some(t) = bufs.more.as_ref().and_then(|m| m.task.as_ref()) {
                method = t.method();
            }
        }
        let name = match method {
            Method::Extension => MethodName::Other(bufs.name()),
            core => MethodName::Core(core),
        };
        jsonrpc::write_request(buf, id.get(), name, bufs.params(), meta);
        self.mark_sent(now, slot);
        self.stats.requests_sent += 1;
        Some(method)
    }

    pub(super) fn write_control(&mut self, buf: &mut Vec<u8>, c: Control) -> TransmitKind {
        match c {
            Control::Cancelled { id } => {
                let mut params: SmallVec<[u8; 64]> = SmallVec::new();
                params.extend_from_slice(b"\"requestId\":");
                params.extend_from_slice(itoa_buf(id).as_str().as_bytes());
                jsonrpc::write_notification(buf, notify::CANCELLED, Some(&params));
                TransmitKind::Notification
            }
            Control::CloseStream { id } => TransmitKind::CloseStream { id },
            Control::Initialized => {
                jsonrpc::write_notification(buf, notify::INITIALIZED, None);
                TransmitKind::Notification
            }
            Control::RootsChanged => {
                jsonrpc::write_notification(buf, notify::ROOTS_LIST_CHANGED, None);
                TransmitKind::Notification
            }
            Control::Reply { id, ok } => {
                let id = std::str::from_utf8(&id).unwrap_or("null");
                if ok {
                    jsonrpc::write_result(buf, id, "{}");
                } else {
                    jsonrpc::write_error(buf, id, RpcError::METHOD_NOT_FOUND, "Method not found");
                }
                TransmitKind::Response
            }
            Control::Answer { id, result } => {
                jsonrpc::write_result(buf, std::str::from_utf8(&id).unwrap_or("null"), &result);
                TransmitKind::Response
            }
            Control::Refuse { id, code, message } => {
                let id = std::str::from_utf8(&id).unwrap_or("null");
                jsonrpc::write_error(buf, id, code, message);
                TransmitKind::Response
            }
            Control::TaskCancel { id, task } => {
                let mut params: Vec<u8> = Vec::with_capacity(task.len() + 16);
                params.extend_from_slice(b"\"taskId\":");
                write_json_str(&mut params, &task);
                let modern = self.era() == Some(Era::Modern);
                let meta = if modern { self.meta.as_ref().map(StaticMeta::bytes) } else { None };
                let method = Method::TasksCancel;
                jsonrpc::write_request(
                    buf,
                    id.get(),
                    MethodName::Core(method),
                    &params,
                    [meta.unwrap_or_default(), b""],
                );
                self.stats.requests_sent += 1;
                self.control_name = task;
                TransmitKind::Request { id, method }
            }
        }
    }

    pub(super) fn push_control(&mut self, c: Control) {
        if self.control.len() >= MAX_CONTROL {
            self.stats.control_dropped += 1;
            return;
        }
        self.control.push_back(c);
    }

    /// Addresses a transmit: the era's version, and for a request its name and param headers.
    pub(super) fn route(&self, len: usize, kind: TransmitKind) -> Transmit<'_> {
        let version = self.lifecycle.version();
        let params = ParamHeaders::default();
        let mut t =
            Transmit { len, kind, version, name: NameRef::Text(""), method_name: "", params };
        if let TransmitKind::Request { id, method } = kind {
            let slot = id.slot();
            t.method_name = method.as_str();
            if method == Method::TasksCancel {
                // Written from a control frame: the call is gone, its task id kept here.
                t.name = NameRef::Text(&self.control_name);
            } else if self.requests.get(slot).is_some_and(|p| p.wire_gen == id.generation()) {
                let bufs = self.requests.bufs(slot);
                if method == Method::Extension {
                    t.method_name = bufs.name();
                    t.params = bufs.param_headers.iter();
                } else if matches!(
                    method,
                    Method::TasksGet | Method::TasksResult | Method::TasksUpdate
                ) {
                    // `Mcp-Name` of a task's request is its task id (tasks extension, HTTP).
                    let task = bufs.more.as_ref().and_then(|m| m.task.as_ref());
                    t.name = NameRef::Text(task.map_or("", |t| t.id.as_str()));
                } else {
                    t.name = NameRef::Slot(bufs);
                    t.params = bufs.param_headers.iter();
                }
            }
        }
        t
    }

    /// Tells the server the way its era and transport expect (PROTOCOL.md §7 "Cancellation"):
    /// stdio sends `notifications/cancelled`; modern HTTP closes the response stream; legacy
    /// HTTP does both, since a disconnect alone is not a cancellation there.
    pub(super) fn signal_cancel(&mut self, id: WireId) {
        let legacy = self.era() == Some(Era::Legacy);
        match self.transport {
            TransportKind::Stdio => self.push_control(Control::Cancelled { id }),
            TransportKind::Http => {
                if legacy {
                    self.push_control(Control::Cancelled { id });
                }
                self.push_control(Control::CloseStream { id });
            }
        }
    }
}
