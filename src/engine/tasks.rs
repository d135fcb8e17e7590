//! Task-backed tool calls (MCP tasks): a `tools/call` the server answers with a task is polled
//! to its end, and the host sees one call from start to terminal event.
//!
//! Two wire forms, one state machine:
//! - 2026-07-28, the `io.modelcontextprotocol/tasks` extension: the call declares the
//!   extension in its `_meta` client capabilities; the server may answer `resultType: "task"`
//!   (a flat `CreateTaskResult`); `tasks/get` returns the task with `result` or `error` inlined
//!   once terminal; input it needs (`input_required` with `inputRequests`) goes to the host as a
//!   call's input requests do, each key once, and the answers go back in `tasks/update`;
//!   `tasks/cancel` asks the server to stop.
//! - 2025-11-25, the experimental core form: the call carries `params.task` (only when the
//!   server declared `tasks.requests.tools.call` and the tool's `taskSupport` allows it); the
//!   server answers `{"task": {...}}`; `tasks/get` polls; once the task is terminal (or needs
//!   input, which its server requests carry) `tasks/result` fetches what `tools/call` would have
//!   returned; `tasks/cancel` (when the server declared `tasks.cancel`).
//!
//! The call keeps its slot, deadline, progress token and record. Once its task exists
//! (`Pending::task`), the slot's params are `"taskId":..` and each of its writes is a poll; it
//! waits between polls in [`SendState::TaskWait`], holding no in-flight slot, for the server's
//! `pollInterval` clamped to `Config::task_poll_min..=task_poll_max` (stamps saturate: no
//! arithmetic on peer data can overflow). A poll is a read: lost with its connection, it is
//! sent again, so a write whose task id is known never ends as "delivery unknown".

use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::ending::Outcome;
use super::outbound::Control;
use super::requests::{CallId, Ended, SendState};
use super::retry::Idempotency;
use super::{headers, server_requests, timers, CallOptions, Engine};
use crate::error::{CallError, PeerError, RequestError, RpcError};
use crate::proto::json::{self, Kind, RawJson};
use crate::proto::jsonrpc::write_json_str;
use crate::proto::mcp::{self, Method, ResultType};
use crate::proto::version::Era;

/// The extension id of 2026-07-28 tasks.
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The longest task id mcpoll keeps (a server's ids are short handles; this bounds memory).
pub const MAX_TASK_ID_BYTES: usize = 1024;

/// Whether a `tools/call` may run as a task (MCP tasks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskMode {
    /// As the tool and the configuration say: on 2026-07-28 a task is accepted when
    /// `Config::extensions` declares `io.modelcontextprotocol/tasks`; on 2025-11-25 a task is
    /// asked for when the last tool listing says the tool's `taskSupport` is `"required"`.
    #[default]
    Auto,
    /// Ask for a task. 2026-07-28: the call declares the tasks extension (the server decides).
    /// 2025-11-25: the call carries `params.task` (with `ttl` in milliseconds when given) if
    /// the server declared `tasks.requests.tools.call` and no listing says the tool forbids
    /// tasks; otherwise it goes as a plain call.
    Prefer {
        /// The lifetime to ask for (2025-11-25 `task.ttl`); the server may choose another.
        ttl: Option<Duration>,
    },
    /// A plain call: no task is asked for or accepted.
    Off,
}

/// A task's status as its server reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskStatus {
    /// The work goes on.
    Working,
    /// The server waits for input: its requests reach the host as server requests (2026-07-28:
    /// answered with `tasks/update`; 2025-11-25: sent by the server on `tasks/result`).
    InputRequired,
    /// Done; the call ends with the result.
    Completed,
    /// The work failed with a JSON-RPC error; the call ends with it.
    Failed,
    /// The server cancelled the task.
    Cancelled,
}

impl TaskStatus {
    /// The status as written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// `completed`, `failed` and `cancelled` never change.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }
}

/// What a slot keeps about its task (in the rarely used buffers: plain calls never touch it).
#[derive(Debug, Default)]
pub(crate) struct TaskSlot {
    /// The task id; empty until the server created the task.
    pub(crate) id: String,
    /// The status last reported.
    pub(crate) status: Option<TaskStatus>,
    /// A hash of the last `statusMessage` (0: none), to report changes only.
    message: u64,
    /// The wait before the next poll, clamped.
    pub(crate) poll: Duration,
    /// 2025-11-25: the next request is `tasks/result`, not `tasks/get`.
    pub(crate) fetch_result: bool,
    /// The lifetime asked for (2025-11-25).
    ttl: Option<Duration>,
    /// 2025-11-25: `params.task` was written into the call.
    augmented: bool,
    /// The call still asks for a task (2025-11-25: cleared when the server or tool rules it out).
    pub(crate) requested: bool,
    /// 2026-07-28: the next write is `tasks/update` with the host's answers.
    updating: bool,
    /// Hashes of the input request keys already put to the host: a key is asked once over
    /// the task's life (the server may show it again until it takes the answer in).
    asked: Vec<u64>,
}

impl TaskSlot {
    /// The method of the slot's next write once the task exists.
    pub(crate) fn method(&self) -> Method {
        if self.updating {
            Method::TasksUpdate
        } else if self.fetch_result {
            Method::TasksResult
        } else {
            Method::TasksGet
        }
    }
}

/// The task object of a result: flat (2026-07-28 `CreateTaskResult`, every `tasks/get`) or
/// under `task` (2025-11-25 `CreateTaskResult`).
struct TaskView<'a> {
    id: std::borrow::Cow<'a, str>,
    status: TaskStatus,
    message: Option<std::borrow::Cow<'a, str>>,
    poll: Option<u64>,
}

fn read_task(task: RawJson<'_>) -> Option<TaskView<'_>> {
    if task.kind() != Kind::Object {
        return None;
    }
    let id = task.get("taskId").and_then(RawJson::as_str)?;
    if id.is_empty() || id.len() > MAX_TASK_ID_BYTES {
        return None;
    }
    let status = TaskStatus::parse(&task.get("status").and_then(RawJson::as_str)?)?;
    let message = task.get("statusMessage").and_then(RawJson::as_str);
    // 2026-07-28 `pollIntervalMs`; 2025-11-25 `pollInterval`. A negative, fractional or
    // huge value is ignored (the default applies), never trusted into arithmetic.
    let poll = task
        .get("pollIntervalMs")
        .or_else(|| task.get("pollInterval"))
        .and_then(|v| v.text().parse::<u64>().ok());
    Some(TaskView { id, status, message, poll })
}

fn hash(text: &str) -> u64 {
    // FNV-1a: a change detector for status messages, not a map key.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h | 1
}

impl Engine {
    /// The task (asked for or running) of the call in `slot`.
    fn task_of(&self, slot: usize) -> Option<&TaskSlot> {
        self.requests.bufs(slot).more.as_ref()?.task.as_ref()
    }

    fn task_mut(&mut self, slot: usize) -> Option<&mut TaskSlot> {
        self.requests.bufs_mut(slot).more.as_mut()?.task.as_mut()
    }

    /// `true` when `task`'s `inputRequests` has a key not asked before; all its keys are then
    /// remembered as asked.
    fn new_input_keys(&mut self, slot: usize, task: RawJson<'_>) -> bool {
        let inputs = task.get("inputRequests").filter(|r| r.kind() == Kind::Object);
        let keys: SmallVec<[u64; 4]> =
            inputs.into_iter().flat_map(RawJson::members).map(|(k, _)| hash(k.raw())).collect();
        let Some(t) = self.task_mut(slot) else { return false };
        let fresh = keys.iter().any(|k| !t.asked.contains(k));
        if fresh {
            t.asked.extend(
                keys.iter()
                    .filter(|k| !t.asked.contains(k))
                    .copied()
                    .collect::<SmallVec<[u64; 4]>>(),
            );
        }
        fresh
    }

    /// Whether a `tools/call` of `tool` made with `mode` asks for a task, and with what ttl.
    pub(super) fn task_wanted(&self, tool: &str, mode: TaskMode) -> Option<Option<Duration>> {
        match mode {
            TaskMode::Off => None,
            TaskMode::Prefer { ttl } => Some(ttl),
            TaskMode::Auto if self.tasks_declared => Some(None),
            TaskMode::Auto => {
                let required =
                    self.tool_headers.task_support(tool) == Some(headers::TaskSupport::Required);
                required.then_some(None)
            }
        }
    }

    /// Marks a new `tools/call` as asking for a task.
    pub(super) fn ask_for_task(&mut self, slot: usize, ttl: Option<Duration>) {
        let more = self.requests.bufs_mut(slot).more();
        more.task = Some(TaskSlot { ttl, requested: true, ..TaskSlot::default() });
        if let Some(p) = self.requests.get_mut(slot) {
            p.task_asked = true;
        }
    }

    /// Right before a task-asking `tools/call` is written on a 2025-11-25 server: adds
    /// `params.task` once, if the server and the tool allow tasks; otherwise the call goes
    /// plain. Returns whether the call still asks for a task.
    pub(super) fn augment_legacy_call(&mut self, slot: usize) -> bool {
        let caps = self.server_task_caps();
        let tool_ok = {
            let bufs = self.requests.bufs(slot);
            !matches!(
                self.tool_headers.task_support(bufs.name()),
                Some(headers::TaskSupport::Forbidden)
            )
        };
        let bufs = self.requests.bufs_mut(slot);
        let Some(task) = bufs.more.as_mut().and_then(|m| m.task.as_mut()) else { return false };
        if !task.requested {
            return false;
        }
        if task.augmented {
            return true;
        }
        if !(caps.tool_calls && tool_ok) {
            task.requested = false;
            return false;
        }
        task.augmented = true;
        let ttl = task.ttl.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
        let (params, _) = bufs.params_buf();
        params.extend_from_slice(b",\"task\":{");
        if let Some(ms) = ttl {
            params.extend_from_slice(b"\"ttl\":");
            crate::proto::jsonrpc::write_u64(params, ms);
        }
        params.push(b'}');
        true
    }

    /// What the 2025-11-25 server declared of tasks: `tasks.requests.tools.call` and
    /// `tasks.cancel` (read from its `initialize` result when needed: not on the hot path).
    pub(super) fn server_task_caps(&self) -> LegacyTaskCaps {
        let info = json::parse(self.server_info.as_bytes()).ok();
        let tasks = info.and_then(|i| i.get("capabilities")).and_then(|c| c.get("tasks"));
        let object = |v: Option<RawJson<'_>>| v.is_some_and(|v| v.kind() == Kind::Object);
        let calls = tasks.and_then(|t| t.get("requests")).and_then(|r| r.get("tools"));
        LegacyTaskCaps {
            tool_calls: object(calls.and_then(|t| t.get("call"))),
            cancel: object(tasks.and_then(|t| t.get("cancel"))),
        }
    }

    /// `true` when the reply to the `tools/call` in `slot` creates a task the call asked for.
    pub(super) fn creates_task(&self, slot: usize, result: RawJson<'_>, rt: ResultType) -> bool {
        let task = self.task_of(slot);
        if !task.is_some_and(|t| t.requested) {
            return false;
        }
        match self.era() {
            Some(Era::Modern) => rt == ResultType::Task,
            _ => {
                task.is_some_and(|t| t.augmented)
                    && result.get("task").is_some_and(|t| t.kind() == Kind::Object)
            }
        }
    }

    /// The server created the call's task: report it and start polling.
    pub(super) fn on_task_created(&mut self, now: Instant, slot: usize, result: RawJson<'_>) {
        let object = match self.era() {
            Some(Era::Modern) => Some(result),
            _ => result.get("task"),
        };
        let Some(view) = object.and_then(read_task) else {
            let e = CallError::Peer(PeerError::InvalidResult);
            return self.finish(now, slot, Ended::Answered, Outcome::Failed(e));
        };
        let Some(call) = self.requests.call_id(slot) else { return };
        let bufs = self.requests.bufs_mut(slot);
        let more = bufs.more();
        // An earlier `input_required` round's members are no part of the polls.
        more.params_base = None;
        more.request_state.clear();
        let task = more.task.get_or_insert_with(TaskSlot::default);
        task.id.clear();
        task.id.push_str(&view.id);
        bufs.truncate_params(0);
        let (params, _) = bufs.params_buf();
        params.extend_from_slice(b"\"taskId\":");
        write_json_str(params, &view.id);
        if let Some(p) = self.requests.get_mut(slot) {
            p.task = true;
            // The write was delivered: what follows are polls, safe to repeat.
            p.class = Idempotency::Read;
        }
        self.events.task_created(call, &view.id);
        log::trace!("{call} runs as a task");
        self.on_task_state(now, slot, view, result, true);
    }

    /// A reply to a task-backed call's `tasks/get` or `tasks/result`.
    pub(super) fn on_task_reply(
        &mut self,
        now: Instant,
        slot: usize,
        result: RawJson<'_>,
        head: crate::proto::jsonrpc::ResultHead<'_>,
    ) {
        let (fetching, updating) =
            self.task_of(slot).map_or((false, false), |t| (t.fetch_result, t.updating));
        if updating {
            // `tasks/update` acknowledged: the polls go on, without the answers.
            let bufs = self.requests.bufs_mut(slot);
            let base = bufs.more.as_mut().and_then(|m| m.params_base.take());
            if let Some(base) = base {
                bufs.truncate_params(base);
            }
            if let Some(t) = bufs.more.as_mut().and_then(|m| m.task.as_mut()) {
                t.updating = false;
            }
            return self.task_wait(now, slot);
        }
        if fetching {
            // `tasks/result`: exactly what `tools/call` would have returned.
            let outcome = match mcp::result_head(head) {
                Some((ResultType::Complete, is_error)) => Outcome::Done {
                    json: result.text(),
                    result_type: ResultType::Complete,
                    is_error,
                },
                _ => Outcome::Failed(CallError::Peer(PeerError::InvalidResult)),
            };
            return self.finish(now, slot, Ended::Answered, outcome);
        }
        let same =
            |v: &TaskView<'_>, s: &Self| s.task_of(slot).map(|t| t.id.as_str()) == Some(&*v.id);
        let modern_ok = self.era() != Some(Era::Modern)
            || mcp::result_head(head).is_some_and(|(t, _)| t == ResultType::Complete);
        match read_task(result) {
            Some(view) if modern_ok && same(&view, self) => {
                self.on_task_state(now, slot, view, result, false)
            }
            _ => {
                let e = CallError::Peer(PeerError::InvalidResult);
                self.finish(now, slot, Ended::Answered, Outcome::Failed(e))
            }
        }
    }

    /// A task's state as a poll (or its creation) reported it: an event when it changed,
    /// then the next step.
    fn on_task_state(
        &mut self,
        now: Instant,
        slot: usize,
        view: TaskView<'_>,
        json: RawJson<'_>,
        created: bool,
    ) {
        let Some(call) = self.requests.call_id(slot) else { return };
        let (min, max) = (self.config.task_poll_min, self.config.task_poll_max);
        let message = view.message.as_deref().map_or(0, hash);
        let Some(task) = self.requests.bufs_mut(slot).more.as_mut().and_then(|m| m.task.as_mut())
        else {
            return;
        };
        let changed = task.status != Some(view.status) || task.message != message;
        let first = task.status.is_none();
        task.status = Some(view.status);
        task.message = message;
        task.poll = view.poll.map_or(Duration::from_secs(1), Duration::from_millis).clamp(min, max);
        if changed && !first || first && view.status != TaskStatus::Working {
            self.events.task_status(call, &view.id, view.status, view.message.as_deref());
        }
        let modern = self.era() == Some(Era::Modern);
        match view.status {
            TaskStatus::Working => self.task_wait(now, slot),
            TaskStatus::Cancelled => {
                let e = CallError::Peer(PeerError::TaskCancelled);
                self.finish(now, slot, Ended::Answered, Outcome::Failed(e))
            }
            // A `CreateTaskResult` carries no result to use (2026-07-28): polled for it.
            TaskStatus::Completed if modern && !created => {
                let outcome = match json.get("result").filter(|r| r.kind() == Kind::Object) {
                    Some(r) => {
                        let is_error = r.get("isError").and_then(|v| v.as_bool()).unwrap_or(false);
                        Outcome::Done {
                            json: r.text(),
                            result_type: ResultType::Complete,
                            is_error,
                        }
                    }
                    None => Outcome::Failed(CallError::Peer(PeerError::InvalidResult)),
                };
                self.finish(now, slot, Ended::Answered, outcome)
            }
            TaskStatus::Failed if modern && !created => {
                let error = json.get("error").filter(|e| e.kind() == Kind::Object);
                let code = error.and_then(|e| e.get("code")).and_then(|c| c.text().parse().ok());
                let outcome = match (error, code) {
                    (Some(e), Some(code)) => {
                        let message = e.get("message").and_then(RawJson::as_str);
                        let data = e.get("data");
                        let rpc = RpcError::from_raw(code, message.as_deref().unwrap_or(""), data);
                        Outcome::Failed(CallError::Protocol(rpc))
                    }
                    _ => Outcome::Failed(CallError::Peer(PeerError::InvalidResult)),
                };
                self.finish(now, slot, Ended::Answered, outcome)
            }
            // Input the task needs goes to the host as a call's input requests would; the
            // answers go back in `tasks/update`. Keys already asked are not asked again.
            TaskStatus::InputRequired if modern && !created && self.new_input_keys(slot, json) => {
                if let Some(t) = self.task_mut(slot) {
                    t.updating = true;
                }
                self.on_input_required(now, slot, json)
            }
            _ if modern => self.task_wait(now, slot),
            // 2025-11-25: the result (or the requests that need input) come on `tasks/result`.
            TaskStatus::InputRequired | TaskStatus::Completed | TaskStatus::Failed => {
                if let Some(t) =
                    self.requests.bufs_mut(slot).more.as_mut().and_then(|m| m.task.as_mut())
                {
                    t.fetch_result = true;
                }
                self.requests.renew_wire_id(slot);
                if let Some(id) = self.requests.wire_id(slot) {
                    self.send_queue.push_front(id);
                }
            }
        }
    }

    /// Waits the task's poll interval before the next `tasks/get`.
    fn task_wait(&mut self, now: Instant, slot: usize) {
        let poll = self.task_of(slot).map_or(self.config.task_poll_min, |t| t.poll);
        // The reply answered this wire id; the next poll goes under a new one.
        self.requests.renew_wire_id(slot);
        let until = self.epoch.stamp(now).after(poll);
        self.requests.set_state(slot, SendState::TaskWait(until));
        self.timers.schedule_request(&self.requests, slot, until, timers::TimerKind::Backoff);
    }

    /// The wait before a poll ended: the poll joins the queue (a read: no breaker asked).
    pub(super) fn task_poll_due(&mut self, slot: usize) {
        self.requests.set_state(slot, SendState::Queued);
        if let Some(id) = self.requests.wire_id(slot) {
            self.send_queue.push_back(id);
        }
    }

    /// Ending a task-backed call locally: asks the server to cancel the task (`tasks/cancel`,
    /// on 2025-11-25 only when the server declared `tasks.cancel`). Its reply is counted as
    /// late: the call has ended.
    pub(super) fn cancel_task(&mut self, slot: usize) {
        let legacy = self.era() != Some(Era::Modern);
        if legacy && !self.server_task_caps().cancel {
            return;
        }
        let Some(task) = self.task_of(slot) else {
            return;
        };
        let task = task.id.clone();
        // A fresh id of the slot: the poll in flight becomes late, and so will this reply
        // once the slot is freed.
        let Some(id) = self.requests.renew_wire_id(slot) else { return };
        self.push_control(Control::TaskCancel { id, task });
    }

    /// Starts a call that reattaches to a task this client (or an earlier run of it) made:
    /// see [`Engine::resume_task`].
    pub(super) fn resume(
        &mut self,
        now: Instant,
        task_id: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        if task_id.is_empty() || task_id.len() > MAX_TASK_ID_BYTES {
            return Err(RequestError::InvalidTaskId);
        }
        let call =
            self.request(now, Method::ToolsCall, opts, Some(Idempotency::Read), "", |p| {
                p.extend_from_slice(b"\"taskId\":");
                write_json_str(p, task_id);
            })?;
        let slot = call.0.slot();
        let more = self.requests.bufs_mut(slot).more();
        more.task = Some(TaskSlot { id: task_id.into(), requested: true, ..TaskSlot::default() });
        if let Some(p) = self.requests.get_mut(slot) {
            p.task = true;
        }
        Ok(call)
    }

    /// The task-backed calls pending, with their task ids and last known status.
    pub(super) fn task_calls(
        &self,
    ) -> impl Iterator<Item = (CallId, &str, Option<TaskStatus>)> + '_ {
        self.requests.iter().filter(|(_, p)| p.task).filter_map(move |(slot, _)| {
            let call = self.requests.call_id(slot)?;
            let task = self.requests.bufs(slot).more.as_ref()?.task.as_ref()?;
            Some((call, task.id.as_str(), task.status))
        })
    }
}

/// `true` when `extensions` (`Config::extensions`) declares the tasks extension.
pub(super) fn declared(extensions: &str) -> bool {
    json::parse(extensions.as_bytes()).is_ok_and(|e| e.get(EXTENSION).is_some())
}

/// `capabilities` (a JSON object) with the tasks extension added to its `extensions`.
pub(super) fn with_tasks_extension(capabilities: &str) -> String {
    let mut ext = String::from("{");
    let caps = json::parse(capabilities.as_bytes()).ok();
    let declared = caps.and_then(|c| c.get("extensions")).filter(|e| e.kind() == Kind::Object);
    for (key, value) in declared.into_iter().flat_map(RawJson::members) {
        if !key.eq_str(EXTENSION) {
            ext.push('"');
            ext.push_str(key.raw());
            ext.push_str("\":");
            ext.push_str(value.text());
            ext.push(',');
        }
    }
    ext.push('"');
    ext.push_str(EXTENSION);
    ext.push_str("\":{}}");
    server_requests::with_extensions(capabilities.to_owned(), &ext)
}

/// What a 2025-11-25 server declared of tasks.
#[derive(Debug, Clone, Copy)]
pub(super) struct LegacyTaskCaps {
    pub(super) tool_calls: bool,
    pub(super) cancel: bool,
}
