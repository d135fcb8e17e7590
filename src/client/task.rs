//! Tasks: calls grouped under one deadline, one call budget, one cancel and one audit id.
//!
//! [`Host::task`] opens a task; calls are made under it through [`Host::in_task`], on any
//! server or lane. Every call made under a task carries the task's terms: its timeout is
//! clamped so it ends by the task's deadline (the engine's own timer fails it there, with the
//! usual cancellation of a timed-out call), and its [`CallOptions::run_id`] is the task's audit
//! id, so its call record names the task. A call that would pass the task's budget (a count
//! of calls), or is made after the deadline or after a cancel, gets a [`TaskError`] before
//! anything is sent.
//!
//! [`Host::cancel_task`] ends every call of the task at once, each through the engine's
//! cancel: the local wait ends now (`CallFailed { Cancelled }`), the server is told the way its
//! era and transport expect (stdio: `notifications/cancelled`; 2026-07-28 HTTP: the call's
//! response stream is closed; 2025-11-25 HTTP: `notifications/cancelled` is posted and the
//! stream closed), nothing is retried, and no rollback is promised: what a tool already did
//! stays done.
//!
//! The bookkeeping ([`TaskTable`]) is sans-IO: it reads no clock (time comes in as `now`),
//! does no I/O, and is generic over what it remembers per call, so it is tested with
//! simulated time and plain engines. Tasks live in a slab; each task's call list is allocated
//! once, when the task opens, with room for its whole budget, so making a call under a task
//! allocates nothing.

use std::fmt;
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use slab::Slab;

use super::{Client, ServerId};
use crate::engine::{CallId, CallOptions, Engine};
use crate::error::RequestError;
use crate::proto::mcp::Method;
#[cfg(doc)]
use crate::Host;

/// The largest call budget a task may have: its call list is allocated up front.
pub const MAX_TASK_BUDGET: u32 = 65_536;

/// Handle to a task opened with [`Host::task`]. Stale once the task is ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaskId {
    index: usize,
    generation: u32,
}

/// The terms of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskOptions {
    /// The task ends this long after it opens: no call starts after, and calls in flight end
    /// by then. `None`: only each call's own timeout applies.
    pub deadline: Option<Duration>,
    /// How many calls may be made under the task (at most [`MAX_TASK_BUDGET`]).
    pub budget: u32,
    /// The id carried as [`CallOptions::run_id`] by every call of the task; `None`: the host
    /// numbers tasks 1, 2, 3, ...
    pub audit_id: Option<u64>,
}

impl Default for TaskOptions {
    fn default() -> Self {
        Self { deadline: None, budget: 256, audit_id: None }
    }
}

impl TaskOptions {
    /// The default terms: no deadline, a budget of 256 calls, a host-chosen audit id.
    pub fn new() -> Self {
        Self::default()
    }

    /// The task's deadline, from when it opens.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The most calls the task may make.
    pub fn budget(mut self, budget: u32) -> Self {
        self.budget = budget;
        self
    }

    /// The audit id its calls carry.
    pub fn audit_id(mut self, audit_id: u64) -> Self {
        self.audit_id = Some(audit_id);
        self
    }
}

/// Why a task, or a call under it, was refused. Nothing was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskError {
    /// No such task (it was ended, or never opened).
    UnknownTask,
    /// The task was cancelled.
    Cancelled,
    /// The task's deadline has passed.
    DeadlineExceeded,
    /// The task made as many calls as its budget allows.
    BudgetExhausted {
        /// The budget.
        budget: u32,
    },
    /// A budget of 0 or above [`MAX_TASK_BUDGET`] was asked for.
    InvalidBudget {
        /// What was asked.
        budget: u32,
    },
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownTask => f.write_str("no such task"),
            Self::Cancelled => f.write_str("the task was cancelled"),
            Self::DeadlineExceeded => f.write_str("the task's deadline has passed"),
            Self::BudgetExhausted { budget } => {
                write!(f, "the task has made all {budget} calls of its budget")
            }
            Self::InvalidBudget { budget } => {
                write!(f, "a task budget must be 1..={MAX_TASK_BUDGET}, not {budget}")
            }
        }
    }
}

impl std::error::Error for TaskError {}

/// Why a call under a task did not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum TaskCallError {
    /// The task refused it (budget, deadline, cancel).
    Task(TaskError),
    /// The server refused it.
    Request(RequestError),
}

impl fmt::Display for TaskCallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Task(e) => write!(f, "{e}"),
            Self::Request(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TaskCallError {}

impl From<TaskError> for TaskCallError {
    fn from(e: TaskError) -> Self {
        Self::Task(e)
    }
}

impl From<RequestError> for TaskCallError {
    fn from(e: RequestError) -> Self {
        Self::Request(e)
    }
}

/// What a task looks like now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskInfo {
    /// The audit id its calls carry.
    pub audit_id: u64,
    /// Calls made so far.
    pub calls: u32,
    /// The budget.
    pub budget: u32,
    /// When it ends, if it has a deadline.
    pub deadline: Option<Instant>,
    /// It was cancelled.
    pub cancelled: bool,
}

/// The terms one call gets from its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Admission {
    /// The call's timeout, clamped to the task's deadline.
    pub(crate) timeout: Duration,
    /// The task's audit id.
    pub(crate) run_id: u64,
}

#[derive(Debug)]
struct Task<M> {
    generation: u32,
    deadline: Option<Instant>,
    budget: u32,
    audit: u64,
    cancelled: bool,
    /// Calls made (the budget's spend).
    made: u32,
    /// The calls made, in order, until a cancel takes them; allocated with room for the whole
    /// budget.
    calls: Vec<M>,
}

/// The tasks of a host, with the calls made under each (`M`: how the host names a call).
#[derive(Debug)]
pub(crate) struct TaskTable<M> {
    tasks: Slab<Task<M>>,
    next_generation: u32,
    next_audit: u64,
}

impl<M> Default for TaskTable<M> {
    fn default() -> Self {
        Self { tasks: Slab::new(), next_generation: 0, next_audit: 0 }
    }
}

impl<M: Copy> TaskTable<M> {
    /// Opens a task at `now`.
    pub(crate) fn open(&mut self, now: Instant, opts: TaskOptions) -> Result<TaskId, TaskError> {
        if opts.budget == 0 || opts.budget > MAX_TASK_BUDGET {
            return Err(TaskError::InvalidBudget { budget: opts.budget });
        }
        let audit = opts.audit_id.unwrap_or_else(|| {
            self.next_audit += 1;
            self.next_audit
        });
        self.next_generation = self.next_generation.wrapping_add(1);
        let task = Task {
            generation: self.next_generation,
            // A deadline too far to represent is no deadline.
            deadline: opts.deadline.and_then(|d| now.checked_add(d)),
            budget: opts.budget,
            audit,
            cancelled: false,
            made: 0,
            calls: Vec::with_capacity(opts.budget as usize),
        };
        let generation = task.generation;
        let index = self.tasks.insert(task);
        Ok(TaskId { index, generation })
    }

    fn get(&self, id: TaskId) -> Result<&Task<M>, TaskError> {
        self.tasks
            .get(id.index)
            .filter(|t| t.generation == id.generation)
            .ok_or(TaskError::UnknownTask)
    }

    fn get_mut(&mut self, id: TaskId) -> Result<&mut Task<M>, TaskError> {
        let t = self.tasks.get_mut(id.index).filter(|t| t.generation == id.generation);
        t.ok_or(TaskError::UnknownTask)
    }

    /// Whether a call may start under `id` at `now`, and on what terms: `requested` is the
    /// call's own timeout, `default` the server's. Changes nothing: [`record`](Self::record)
    /// counts the call once the server took it, so a call the server refused costs no budget.
    pub(crate) fn admit(
        &self,
        now: Instant,
        id: TaskId,
        requested: Option<Duration>,
        default: Duration,
    ) -> Result<Admission, TaskError> {
        let t = self.get(id)?;
        if t.cancelled {
            return Err(TaskError::Cancelled);
        }
        if t.made >= t.budget {
            return Err(TaskError::BudgetExhausted { budget: t.budget });
        }
        let mut timeout = requested.unwrap_or(default);
        if let Some(deadline) = t.deadline {
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                return Err(TaskError::DeadlineExceeded);
            }
            timeout = timeout.min(left);
        }
        Ok(Admission { timeout, run_id: t.audit })
    }

    /// Counts a started call against the task. Allocates nothing: the list has room for the
    /// whole budget and [`admit`](Self::admit) refused any call past it.
    pub(crate) fn record(&mut self, id: TaskId, call: M) {
        if let Ok(t) = self.get_mut(id) {
            if t.made < t.budget && !t.cancelled {
                t.made += 1;
                t.calls.push(call);
            }
        }
    }

    /// Gives back what `call` took of its task's budget: local authorization refused it, and
    /// nothing was sent (a call refused before it went costs no budget).
    pub(crate) fn refund(&mut self, call: &M)
    where
        M: PartialEq,
    {
        for (_, t) in self.tasks.iter_mut() {
            if let Some(at) = t.calls.iter().position(|c| c == call) {
                t.calls.remove(at);
                t.made -= 1;
                return;
            }
        }
    }

    /// Marks the task cancelled (no call starts under it again) and hands back every call it
    /// made, for the host to cancel; those already ended refuse the cancel harmlessly.
    pub(crate) fn cancel(&mut self, id: TaskId) -> Result<Vec<M>, TaskError> {
        let t = self.get_mut(id)?;
        t.cancelled = true;
        Ok(std::mem::take(&mut t.calls))
    }

    /// Forgets the task; its id goes stale.
    pub(crate) fn end(&mut self, id: TaskId) -> Result<(), TaskError> {
        self.get(id)?;
        self.tasks.remove(id.index);
        Ok(())
    }

    pub(crate) fn info(&self, id: TaskId) -> Result<TaskInfo, TaskError> {
        let t = self.get(id)?;
        Ok(TaskInfo {
            audit_id: t.audit,
            calls: t.made,
            budget: t.budget,
            deadline: t.deadline,
            cancelled: t.cancelled,
        })
    }
}

impl Client {
    /// Opens a task with these terms (its deadline counted from `now`).
    pub fn task(&mut self, now: Instant, options: TaskOptions) -> Result<TaskId, TaskError> {
        self.tasks.open(now, options)
    }

    /// Cancels every call of the task through its engine's cancel, and refuses calls under
    /// it from now on. Returns how many calls were still pending.
    pub fn cancel_task(&mut self, now: Instant, task: TaskId) -> Result<usize, TaskError> {
        let calls = self.tasks.cancel(task)?;
        let mut ended = 0;
        for (server, call) in calls {
            let Some(s) = self.server_mut(server) else { continue };
            if s.engine.cancel(now, call).is_ok() {
                ended += 1;
                self.mark(server.index);
            }
        }
        Ok(ended)
    }

    /// Forgets a task (its calls go on); its handle goes stale.
    pub fn end_task(&mut self, task: TaskId) -> Result<(), TaskError> {
        self.tasks.end(task)
    }

    /// A task's terms and how much of them is used.
    pub fn task_info(&self, task: TaskId) -> Result<TaskInfo, TaskError> {
        self.tasks.info(task)
    }

    /// Makes one call under a task: the task admits it (budget, deadline, cancel), its
    /// timeout is clamped to the task's deadline and its run id is the task's audit id.
    pub(crate) fn task_command(
        &mut self,
        now: Instant,
        task: TaskId,
        server: ServerId,
        mut opts: CallOptions,
        f: impl FnOnce(&mut Engine, Instant, &CallOptions) -> Result<CallId, RequestError>,
    ) -> Result<CallId, TaskCallError> {
        let s = self.server_mut(server).ok_or(RequestError::Closed)?;
        let default = s.engine.config().default_timeout;
        let terms = self.tasks.admit(now, task, opts.timeout, default)?;
        opts.timeout = Some(terms.timeout);
        opts.run_id = Some(terms.run_id);
        let s = self.server_mut(server).ok_or(RequestError::Closed)?;
        let call = match f(&mut s.engine, now, &opts) {
            Ok(call) => call,
            Err(e) => {
                self.mark_refused(server.index);
                return Err(e.into());
            }
        };
        self.mark(server.index);
        self.tasks.record(task, (server, call));
        Ok(call)
    }

    /// Calls a tool under a task.
    pub fn call_tool_in_task(
        &mut self,
        now: Instant,
        task: TaskId,
        server: ServerId,
        name: &str,
        arguments: &RawValue,
        opts: CallOptions,
    ) -> Result<CallId, TaskCallError> {
        self.gated_in_task(now, task, server, Method::ToolsCall, name, opts, |c, o| {
            c.task_command(now, task, server, o, |e, now, o| e.call_tool(now, name, arguments, o))
        })
    }

    /// Calls a tool under a task, its arguments as JSON text.
    pub fn call_tool_json_in_task(
        &mut self,
        now: Instant,
        task: TaskId,
        server: ServerId,
        name: &str,
        arguments: &str,
        opts: CallOptions,
    ) -> Result<CallId, TaskCallError> {
        self.gated_in_task(now, task, server, Method::ToolsCall, name, opts, |c, o| {
            c.task_command(now, task, server, o, |e, now, o| {
                e.call_tool_json(now, name, arguments, o)
            })
        })
    }

    /// Runs a paginated listing under a task.
    pub fn list_in_task(
        &mut self,
        now: Instant,
        task: TaskId,
        server: ServerId,
        method: Method,
        opts: CallOptions,
    ) -> Result<CallId, TaskCallError> {
        self.task_command(now, task, server, opts, |e, now, o| e.list(now, method, o))
    }

    /// Reads a resource under a task.
    pub fn read_resource_in_task(
        &mut self,
        now: Instant,
        task: TaskId,
        server: ServerId,
        uri: &str,
        opts: CallOptions,
    ) -> Result<CallId, TaskCallError> {
        self.gated_in_task(now, task, server, Method::ResourcesRead, uri, opts, |c, o| {
            c.task_command(now, task, server, o, |e, now, o| e.read_resource(now, uri, o))
        })
    }

    /// Gets a prompt under a task.
    #[allow(clippy::too_many_arguments)] // the verb's own five, and the task, time and options
    pub fn get_prompt_in_task(
        &mut self,
        now: Instant,
        task: TaskId,
        server: ServerId,
        name: &str,
        arguments: Option<&RawValue>,
        opts: CallOptions,
    ) -> Result<CallId, TaskCallError> {
        self.gated_in_task(now, task, server, Method::PromptsGet, name, opts, |c, o| {
            c.task_command(now, task, server, o, |e, now, o| e.get_prompt(now, name, arguments, o))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::Config;
    use crate::engine::{Event, TransmitKind, TransportEvent, TransportKind};
    use crate::error::{CallError, LocalError};

    fn table() -> (TaskTable<u32>, Instant) {
        (TaskTable::default(), Instant::now())
    }

    const DEFAULT: Duration = Duration::from_secs(30);

    #[test]
    fn the_budget_refuses_the_call_past_it_and_a_refused_call_costs_nothing() {
        let (mut t, now) = table();
        let task = t.open(now, TaskOptions::new().budget(2)).unwrap();
        for call in 0..2 {
            t.admit(now, task, None, DEFAULT).unwrap();
            t.record(task, call);
        }
        assert_eq!(
            t.admit(now, task, None, DEFAULT),
            Err(TaskError::BudgetExhausted { budget: 2 })
        );
        assert_eq!(t.info(task).unwrap().calls, 2);
        // Admission alone (a call the server then refused) does not spend the budget.
        let other = t.open(now, TaskOptions::new().budget(1)).unwrap();
        t.admit(now, other, None, DEFAULT).unwrap();
        t.admit(now, other, None, DEFAULT).unwrap();
        t.record(other, 9);
        assert!(t.admit(now, other, None, DEFAULT).is_err());
    }

    #[test]
    fn the_call_list_never_grows_past_what_the_task_opened_with() {
        let (mut t, now) = table();
        let task = t.open(now, TaskOptions::new().budget(3)).unwrap();
        let cap = t.get(task).unwrap().calls.capacity();
        for call in 0..10 {
            if t.admit(now, task, None, DEFAULT).is_ok() {
                t.record(task, call);
            }
        }
        // Even a stray record past the budget is not stored.
        t.record(task, 99);
        let calls = &t.get(task).unwrap().calls;
        assert_eq!(calls, &[0, 1, 2]);
        assert_eq!(calls.capacity(), cap, "no reallocation");
    }

    #[test]
    fn the_deadline_clamps_each_call_and_refuses_calls_after_it() {
        let (mut t, start) = table();
        let task = t.open(start, TaskOptions::new().deadline(Duration::from_secs(5))).unwrap();
        let at = |ms| start + Duration::from_millis(ms);
        // The server's default (30 s) is clamped to what is left of the task.
        assert_eq!(t.admit(at(1000), task, None, DEFAULT).unwrap().timeout, Duration::from_secs(4));
        // A shorter timeout of the call's own stands.
        let short = Duration::from_millis(500);
        assert_eq!(t.admit(at(1000), task, Some(short), DEFAULT).unwrap().timeout, short);
        let long = Some(Duration::from_secs(60));
        assert_eq!(
            t.admit(at(4900), task, long, DEFAULT).unwrap().timeout,
            Duration::from_millis(100)
        );
        assert_eq!(t.admit(at(5000), task, None, DEFAULT), Err(TaskError::DeadlineExceeded));
        assert_eq!(t.admit(at(9000), task, None, DEFAULT), Err(TaskError::DeadlineExceeded));
        // A task with no deadline leaves timeouts alone.
        let free = t.open(start, TaskOptions::new()).unwrap();
        assert_eq!(t.admit(at(99_000), free, None, DEFAULT).unwrap().timeout, DEFAULT);
    }

    #[test]
    fn audit_ids_are_given_or_numbered_and_carried_by_every_call() {
        let (mut t, now) = table();
        let a = t.open(now, TaskOptions::new()).unwrap();
        let b = t.open(now, TaskOptions::new().audit_id(4242)).unwrap();
        let c = t.open(now, TaskOptions::new()).unwrap();
        assert_eq!(t.admit(now, a, None, DEFAULT).unwrap().run_id, 1);
        assert_eq!(t.admit(now, b, None, DEFAULT).unwrap().run_id, 4242);
        assert_eq!(t.admit(now, c, None, DEFAULT).unwrap().run_id, 2);
    }

    #[test]
    fn cancel_hands_back_every_call_and_refuses_more() {
        let (mut t, now) = table();
        let task = t.open(now, TaskOptions::new()).unwrap();
        for call in [7, 8, 9] {
            t.record(task, call);
        }
        assert_eq!(t.cancel(task).unwrap(), [7, 8, 9]);
        assert_eq!(t.admit(now, task, None, DEFAULT), Err(TaskError::Cancelled));
        let info = t.info(task).unwrap();
        assert!(info.cancelled);
        assert_eq!(info.calls, 3, "the count outlives the list");
        // A second cancel has nothing left to end.
        assert_eq!(t.cancel(task).unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn ended_tasks_go_stale_even_when_their_slot_is_reused() {
        let (mut t, now) = table();
        let old = t.open(now, TaskOptions::new()).unwrap();
        t.end(old).unwrap();
        let new = t.open(now, TaskOptions::new()).unwrap();
        assert_eq!(old.index, new.index, "the slot is reused");
        assert_eq!(t.admit(now, old, None, DEFAULT), Err(TaskError::UnknownTask));
        assert_eq!(t.cancel(old), Err(TaskError::UnknownTask));
        assert_eq!(t.end(old), Err(TaskError::UnknownTask));
        assert!(t.admit(now, new, None, DEFAULT).is_ok());
    }

    #[test]
    fn budgets_out_of_range_are_refused() {
        let (mut t, now) = table();
        assert_eq!(
            t.open(now, TaskOptions::new().budget(0)),
            Err(TaskError::InvalidBudget { budget: 0 })
        );
        let too_big = MAX_TASK_BUDGET + 1;
        assert_eq!(
            t.open(now, TaskOptions::new().budget(too_big)),
            Err(TaskError::InvalidBudget { budget: too_big })
        );
    }

    /// One engine driven with simulated time, its output decoded.
    struct Sim {
        engine: Engine,
        buf: Vec<u8>,
    }

    impl Sim {
        fn ready(kind: TransportKind, modern: bool, now: Instant) -> Self {
            let era = if modern {
                crate::proto::version::EraPreference::Auto
            } else {
                crate::proto::version::EraPreference::LegacyOnly
            };
            let config = Config { era, ..Config::default() };
            let mut sim = Sim { engine: Engine::new(config, now).unwrap(), buf: Vec::new() };
            sim.engine.handle_transport(now, TransportEvent::opened_as(kind));
            let (_, first) = sim.sent(now).remove(0);
            let first = first.unwrap();
            if modern {
                sim.reply(
                    now,
                    &first,
                    serde_json::json!({"resultType": "complete",
                    "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}),
                );
            } else {
                sim.reply(
                    now,
                    &first,
                    serde_json::json!({"protocolVersion": "2025-11-25",
                    "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}),
                );
                sim.sent(now);
            }
            while sim.engine.poll_event().is_some() {}
            sim
        }

        /// Everything the engine wants to send: its kind and, when bytes were written, the JSON.
        fn sent(&mut self, now: Instant) -> Vec<(TransmitKind, Option<serde_json::Value>)> {
            let mut out = Vec::new();
            loop {
                self.buf.clear();
                let Some(t) = self.engine.poll_transmit(now, &mut self.buf) else { break };
                let json =
                    (!self.buf.is_empty()).then(|| serde_json::from_slice(&self.buf).unwrap());
                out.push((t.kind, json));
            }
            out
        }

        fn reply(&mut self, now: Instant, to: &serde_json::Value, result: serde_json::Value) {
            let msg = serde_json::json!({"jsonrpc": "2.0", "id": to["id"], "result": result});
            self.engine.handle_message(now, &serde_json::to_vec(&msg).unwrap());
        }

        fn failures(&mut self) -> Vec<(CallId, CallError)> {
            let mut out = Vec::new();
            while let Some(e) = self.engine.poll_event() {
                if let Event::CallFailed { call, error, .. } = e {
                    out.push((call, error));
                }
            }
            out
        }
    }

    /// A task spanning three servers (stdio, modern HTTP, legacy HTTP), cancelled: every call
    /// ends at once, each server is told its own way, and a late reply is only counted.
    #[test]
    fn cancelling_a_task_ends_all_its_calls_with_each_layer() {
        let start = Instant::now();
        let mut sims = [
            Sim::ready(TransportKind::Stdio, true, start),
            Sim::ready(TransportKind::Http, true, start),
            Sim::ready(TransportKind::Http, false, start),
        ];
        let mut tasks: TaskTable<(usize, CallId)> = TaskTable::default();
        let task = tasks.open(start, TaskOptions::new().budget(3).audit_id(77)).unwrap();
        let args: &RawValue = serde_json::from_str(r#"{"ms":60000}"#).unwrap();
        let now = start + Duration::from_millis(10);
        let mut requests = Vec::new();
        for (i, sim) in sims.iter_mut().enumerate() {
            let terms = tasks.admit(now, task, None, DEFAULT).unwrap();
            assert_eq!(terms.run_id, 77);
            let opts = CallOptions {
                timeout: Some(terms.timeout),
                run_id: Some(terms.run_id),
                ..CallOptions::default()
            };
            let call = sim.engine.call_tool(now, "slow", args, &opts).unwrap();
            tasks.record(task, (i, call));
            let mut sent = sim.sent(now);
            assert_eq!(sent.len(), 1);
            requests.push(sent.remove(0).1.unwrap());
        }
        // Past its budget, the fourth call is refused before any engine sees it.
        assert_eq!(
            tasks.admit(now, task, None, DEFAULT),
            Err(TaskError::BudgetExhausted { budget: 3 })
        );

        let later = now + Duration::from_millis(250);
        let calls = tasks.cancel(task).unwrap();
        assert_eq!(calls.len(), 3);
        for &(i, call) in &calls {
            sims[i].engine.cancel(later, call).unwrap();
        }
        // Layer 1: every wait ended at the same instant, as cancelled; nothing is pending.
        for (i, sim) in sims.iter_mut().enumerate() {
            let failed = sim.failures();
            assert_eq!(failed.len(), 1, "server {i}");
            assert_eq!(failed[0], (calls[i].1, CallError::Local(LocalError::Cancelled)));
            assert_eq!(sim.engine.pending(), 0, "server {i}");
        }
        // Layer 2: each server is told the right way for its era and transport.
        let told: Vec<_> = sims.iter_mut().map(|s| s.sent(later)).collect();
        let id = |r: &serde_json::Value| r["id"].clone();
        assert_eq!(told[0].len(), 1, "stdio: one notification");
        assert!(matches!(told[0][0].0, TransmitKind::Cancelled { .. }));
        let note = told[0][0].1.as_ref().unwrap();
        assert_eq!(note["method"], "notifications/cancelled");
        assert_eq!(note["params"]["requestId"], id(&requests[0]));
        assert_eq!(told[1].len(), 1, "modern HTTP: the stream is closed, nothing is posted");
        assert!(matches!(told[1][0], (TransmitKind::CloseStream { .. }, None)));
        assert_eq!(told[2].len(), 2, "legacy HTTP: notification posted, then stream closed");
        assert_eq!(told[2][0].1.as_ref().unwrap()["params"]["requestId"], id(&requests[2]));
        assert!(matches!(told[2][1], (TransmitKind::CloseStream { .. }, None)));
        // Layer 3: no retry, no second completion: a reply that comes anyway is only counted.
        let reply = serde_json::json!({"content": [], "isError": false});
        sims[0].reply(later, &requests[0], reply);
        assert!(sims[0].failures().is_empty());
        assert_eq!(sims[0].engine.stats().late_responses, 1);
        let much_later = later + Duration::from_secs(120);
        for sim in &mut sims {
            sim.engine.handle_timeout(much_later);
            assert!(sim.sent(much_later).is_empty(), "nothing is retried");
        }
        assert_eq!(tasks.admit(later, task, None, DEFAULT), Err(TaskError::Cancelled));
    }

    /// The task's deadline is the engine's own call deadline: a call made with no timeout of
    /// its own fails at the task's end, simulated, with no host timer involved.
    #[test]
    fn a_call_under_a_task_ends_at_the_task_deadline() {
        let start = Instant::now();
        let mut sim = Sim::ready(TransportKind::Stdio, true, start);
        let mut tasks: TaskTable<CallId> = TaskTable::default();
        let task = tasks.open(start, TaskOptions::new().deadline(Duration::from_secs(2))).unwrap();
        let now = start + Duration::from_millis(500);
        let terms = tasks.admit(now, task, None, DEFAULT).unwrap();
        let opts = CallOptions { timeout: Some(terms.timeout), ..CallOptions::default() };
        let call =
            sim.engine.call_tool(now, "slow", serde_json::from_str("{}").unwrap(), &opts).unwrap();
        tasks.record(task, call);
        sim.sent(now);
        assert_eq!(sim.engine.poll_timeout(), Some(start + Duration::from_secs(2)));
        sim.engine.handle_timeout(start + Duration::from_millis(1999));
        assert!(sim.failures().is_empty());
        sim.engine.handle_timeout(start + Duration::from_secs(2));
        assert_eq!(sim.failures(), [(call, CallError::Local(LocalError::DeadlineExceeded))]);
        assert_eq!(
            tasks.admit(start + Duration::from_secs(2), task, None, DEFAULT),
            Err(TaskError::DeadlineExceeded)
        );
    }
}
