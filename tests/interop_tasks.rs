//! Task-backed tool calls against a real SDK server: the TypeScript SDK v1 peer
//! (`tests/peers/ts1_server.mjs`, `@modelcontextprotocol/sdk` 1.32.2) with `LAB_TASKS=1`, which
//! serves the SDK's experimental tasks (the 2025-11-25 core form: `params.task`, `tasks/get`,
//! `tasks/result`, `tasks/cancel`) on its `slow_task(ms)` tool.
//!
//! Of the pinned peers only this SDK implements tasks on the server side: the Python SDK 2.3.0
//! has none, and the TypeScript SDK v2 server 2.4.0 knows the wire types only. So the
//! 2026-07-28 extension form is covered by the engine's scenario tests
//! (`src/engine/tests/tasks.rs`), not here.

mod common;

use std::time::{Duration, Instant};

use common::{peers_dir, start, task_ended, watch_task, HttpPeer, TaskSeen, PATIENCE};
use mcpoll::{
    CallError, CallId, CallOptions, Config, Era, Host, HttpOptions, LocalError, ServerId,
    StdioCommand, TaskMode, TaskStatus,
};

fn task_opts() -> CallOptions {
    CallOptions {
        task: TaskMode::Prefer { ttl: Some(Duration::from_secs(60)) },
        timeout: Some(PATIENCE),
        ..CallOptions::default()
    }
}

fn ts1_stdio() -> Option<StdioCommand> {
    peers_dir().map(|dir| StdioCommand::new(dir.join("run-ts1-stdio.sh")).env("LAB_TASKS", "1"))
}

fn call_slow_task(host: &mut Host, id: ServerId, ms: u64) -> CallId {
    let args = format!("{{\"ms\":{ms}}}");
    host.call_tool_json(id, "slow_task", &args, &task_opts()).expect("call")
}

#[test]
fn a_task_is_created_polled_and_its_result_delivered_as_the_call_end() {
    let Some(cmd) = ts1_stdio() else { return };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd, Config::default());
    assert_eq!(host.era(id), Some(Era::Legacy));
    let call = call_slow_task(&mut host, id, 1200);
    let seen = watch_task(&mut host, call, task_ended);
    let task = seen.task.clone().expect("TaskCreated before the end");
    assert_eq!(task.len(), 32, "the SDK's task ids are 32 hex digits: {task}");
    let done: serde_json::Value = serde_json::from_str(seen.done.as_deref().unwrap()).unwrap();
    assert_eq!(done["content"][0]["text"], "slept 1200 ms", "{seen:?}");
    assert!(
        seen.statuses.iter().any(|(s, m)| *s == TaskStatus::Working && m.is_some()),
        "a working status with a step message was seen: {seen:?}"
    );
    assert!(seen.statuses.iter().any(|(s, _)| *s == TaskStatus::Completed), "{seen:?}");
    assert!(host.server_tasks(id).is_empty());
}

#[test]
fn cancelling_a_task_backed_call_ends_it_at_once_and_cancels_the_task_on_the_server() {
    let Some(cmd) = ts1_stdio() else { return };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd, Config::default());
    let call = call_slow_task(&mut host, id, 20_000);
    let seen = watch_task(&mut host, call, |s: &TaskSeen| s.task.is_some());
    let task = seen.task.unwrap();
    assert_eq!(host.server_tasks(id), [(call, task.clone(), Some(TaskStatus::Working))]);
    host.cancel(id, call).expect("pending");
    let seen = watch_task(&mut host, call, task_ended);
    assert_eq!(seen.failed, Some(CallError::Local(LocalError::Cancelled)));
    // The server heard `tasks/cancel`: its task stops at its next step.
    let deadline = Instant::now() + PATIENCE;
    while !host.stderr_tail(id).unwrap_or_default().contains("[task] cancelled") {
        assert!(Instant::now() < deadline, "{:?}", host.stderr_tail(id));
        host.poll(Some(Duration::from_millis(50))).expect("poll");
    }
}

#[test]
fn a_restarted_host_reattaches_to_its_task_by_id() {
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start_with_env(
        dir.join("run-ts1-http.sh"),
        common::free_port(),
        &[("LAB_TASKS", "1")],
    );
    let task = {
        let mut host = Host::new().unwrap();
        let id = host.add_http_server(HttpOptions::new(peer.url()), Config::default()).unwrap();
        let call = call_slow_task(&mut host, id, 2500);
        let seen = watch_task(&mut host, call, |s: &TaskSeen| s.task.is_some());
        seen.task.unwrap()
        // The host goes away with the call pending: nothing cancels the task.
    };
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(peer.url()), Config::default()).unwrap();
    let call = host.resume_task(id, &task, &task_opts()).expect("resume");
    let seen = watch_task(&mut host, call, task_ended);
    let done: serde_json::Value =
        serde_json::from_str(seen.done.as_deref().unwrap_or("null")).unwrap();
    assert_eq!(done["content"][0]["text"], "slept 2500 ms", "{seen:?}; {}", peer.stderr());
}
