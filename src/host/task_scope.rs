//! Tasks on the host: the core's task verbs ([`crate::client::task`]) at the current time,
//! their output written at once.

use std::time::Instant;

use serde_json::value::RawValue;

use super::Host;
use crate::client::{ServerId, TaskCallError, TaskError, TaskId, TaskOptions};
use crate::engine::{CallId, CallOptions};
use crate::proto::mcp::Method;

/// Calls made under one task: the host's call verbs with the task's terms applied. From
/// [`Host::in_task`].
///
/// The options are taken by value so the task's timeout and audit id are written into them
/// without a copy.
#[derive(Debug)]
pub struct TaskScope<'h> {
    host: &'h mut Host,
    task: TaskId,
}

impl TaskScope<'_> {
    /// [`Host::call_tool`] under the task.
    pub fn call_tool(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &RawValue,
        opts: CallOptions,
    ) -> Result<CallId, TaskCallError> {
        let task = self.task;
        self.host
            .at_now(|core, now| core.call_tool_in_task(now, task, server, name, arguments, opts))
    }

    /// [`Host::call_tool_json`] under the task.
    pub fn call_tool_json(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &str,
        opts: CallOptions,
    ) -> Result<CallId, TaskCallError> {
        let task = self.task;
        self.host.at_now(|core, now| {
            core.call_tool_json_in_task(now, task, server, name, arguments, opts)
        })
    }

    /// [`Host::list`] under the task.
    pub fn list(
        &mut self,
        server: ServerId,
        method: Method,
        opts: CallOptions,
    ) -> Result<CallId, TaskCallError> {
        let task = self.task;
        self.host.at_now(|core, now| core.list_in_task(now, task, server, method, opts))
    }

    /// [`Host::read_resource`] under the task.
    pub fn read_resource(
        &mut self,
        server: ServerId,
        uri: &str,
        opts: CallOptions,
    ) -> Result<CallId, TaskCallError> {
        let task = self.task;
        self.host.at_now(|core, now| core.read_resource_in_task(now, task, server, uri, opts))
    }

    /// [`Host::get_prompt`] under the task.
    pub fn get_prompt(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: Option<&RawValue>,
        opts: CallOptions,
    ) -> Result<CallId, TaskCallError> {
        let task = self.task;
        self.host
            .at_now(|core, now| core.get_prompt_in_task(now, task, server, name, arguments, opts))
    }
}

impl Host {
    /// Opens a task: a deadline, a call budget, a cancel for all its calls, and an audit id
    /// that every call made under it carries. See [`Host::in_task`].
    pub fn task(&mut self, options: TaskOptions) -> Result<TaskId, TaskError> {
        self.client.task(Instant::now(), options)
    }

    /// Makes calls under `task`.
    pub fn in_task(&mut self, task: TaskId) -> TaskScope<'_> {
        TaskScope { host: self, task }
    }

    /// Ends every call of the task at once (each the way [`Host::cancel`] does: the wait ends
    /// now, the server is told the right way for its era and transport, nothing is retried),
    /// and refuses any further call under it. Returns how many calls were still running.
    pub fn cancel_task(&mut self, task: TaskId) -> Result<usize, TaskError> {
        self.at_now(|core, now| core.cancel_task(now, task))
    }

    /// Forgets a task. Its calls still running go on to their own end (cancel first to stop
    /// them).
    pub fn end_task(&mut self, task: TaskId) -> Result<(), TaskError> {
        self.client.end_task(task)
    }
}
