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
//! waits between polls in [`SendState::TaskWait`](super::requests::SendState::TaskWait), holding no in-flight slot, for the server's
//! `pollInterval` clamped to `Config::task_poll_min..=task_poll_max` (stamps saturate: no
//! arithmetic on peer data can overflow). A poll is a read: lost with its connection, it is
//! sent again, so a write whose task id is known never ends as "delivery unknown".

use std::time::Duration;

use super::server_requests;
use crate::proto::json::{self, Kind, RawJson};
use crate::proto::mcp::Method;

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
    pub(super) message: u64,
    /// The wait before the next poll, clamped.
    pub(crate) poll: Duration,
    /// 2025-11-25: the next request is `tasks/result`, not `tasks/get`.
    pub(crate) fetch_result: bool,
    /// The lifetime asked for (2025-11-25).
    pub(super) ttl: Option<Duration>,
    /// 2025-11-25: `params.task` was written into the call.
    pub(super) augmented: bool,
    /// The call still asks for a task (2025-11-25: cleared when the server or tool rules it out).
    pub(crate) requested: bool,
    /// Asked by [`TaskMode::Auto`]: on 2025-11-25 only a tool listed as requiring tasks
    /// gets one.
    pub(super) auto: bool,
    /// 2026-07-28: the next write is `tasks/update` with the host's answers.
    pub(super) updating: bool,
    /// Hashes of the input request keys already put to the host: a key is asked once over
    /// the task's life (the server may show it again until it takes the answer in).
    pub(super) asked: Vec<u64>,
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
pub(super) struct TaskView<'a> {
    pub(super) id: std::borrow::Cow<'a, str>,
    pub(super) status: TaskStatus,
    pub(super) message: Option<std::borrow::Cow<'a, str>>,
    pub(super) poll: Option<u64>,
}

pub(super) fn read_task(task: RawJson<'_>) -> Option<TaskView<'_>> {
    let id = read_task_id(task)?;
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

/// The id of a task object, when it is one we can name back to the server.
pub(super) fn read_task_id(task: RawJson<'_>) -> Option<std::borrow::Cow<'_, str>> {
    if task.kind() != Kind::Object {
        return None;
    }
    let id = task.get("taskId").and_then(RawJson::as_str)?;
    (!id.is_empty() && id.len() <= MAX_TASK_ID_BYTES).then_some(id)
}

pub(super) fn hash(text: &str) -> u64 {
    // FNV-1a: a change detector for status messages, not a map key.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h | 1
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

impl LegacyTaskCaps {
    /// What the 2025-11-25 server declared of tasks: `tasks.requests.tools.call` and
    /// `tasks.cancel` (read from its `initialize` result when needed: not on the hot path).
    pub(super) fn of_server_info(server_info: &str) -> Self {
        let info = json::parse(server_info.as_bytes()).ok();
        let tasks = info.and_then(|i| i.get("capabilities")).and_then(|c| c.get("tasks"));
        let object = |v: Option<RawJson<'_>>| v.is_some_and(|v| v.kind() == Kind::Object);
        let calls = tasks.and_then(|t| t.get("requests")).and_then(|r| r.get("tools"));
        Self {
            tool_calls: object(calls.and_then(|t| t.get("call"))),
            cancel: object(tasks.and_then(|t| t.get("cancel"))),
        }
    }
}
