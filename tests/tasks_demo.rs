//! The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`) end to end, over real pipes
//! and a real loopback socket, against the project's own demo server (`tests/peers/demo`,
//! `--tasks`: `slow_task(ms)` answered with a spec-exact `CreateTaskResult`, `tasks/get`,
//! `tasks/cancel`, `tasks/update` for its input request, `-32003` without the extension; see its
//! `src/tasks.rs`).
//!
//! This is not an interoperability claim: none of the pinned SDK peers implements the
//! extension on the server side (Python SDK 2.3.0: no tasks; TypeScript SDK v2 server 2.4.0:
//! wire types only; TypeScript SDK v1 1.32.2: the 2025-11-25 form, which
//! `tests/interop_tasks.rs` drives). The wire shapes follow the extension's schema
//! (`ttlMs`, `pollIntervalMs`, `resultType: "task"`), as the engine's scenario tests
//! (`src/engine/tests/tasks.rs`) check frame by frame.

mod common;

use std::time::{Duration, Instant};

use common::{demo_server, start, task_ended, watch_task, HttpDemo, TaskSeen, PATIENCE};
use mcpoll::{
    CallError, CallOptions, Config, Era, Host, HttpOptions, LocalError, TaskMode, TaskStatus,
};

fn task_opts() -> CallOptions {
    CallOptions {
        task: TaskMode::Prefer { ttl: None },
        timeout: Some(PATIENCE),
        ..CallOptions::default()
    }
}

fn slept(seen: &TaskSeen) -> serde_json::Value {
    let done = seen.done.as_deref().unwrap_or_else(|| panic!("no result: {seen:?}"));
    let done: serde_json::Value = serde_json::from_str(done).unwrap();
    done["content"][0]["text"].clone()
}

#[test]
fn a_modern_task_runs_to_its_result_over_stdio() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server().arg("--tasks"), Config::default());
    assert_eq!(host.era(id), Some(Era::Modern));
    let call = host.call_tool_json(id, "slow_task", r#"{"ms":900}"#, &task_opts()).unwrap();
    let seen = watch_task(&mut host, call, task_ended);
    assert_eq!(seen.task.as_ref().map(String::len), Some(32), "{seen:?}");
    assert_eq!(slept(&seen), "slept 900 ms");
    let working = seen.statuses.iter().filter(|(s, _)| *s == TaskStatus::Working).count();
    assert!(working >= 1, "a step message was reported: {seen:?}");
    assert_eq!(seen.statuses.last().map(|s| s.0), Some(TaskStatus::Completed), "{seen:?}");
}

#[test]
fn without_the_extension_the_server_refuses_with_missing_capability() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server().arg("--tasks"), Config::default());
    let off = CallOptions { task: TaskMode::Off, timeout: Some(PATIENCE), ..Default::default() };
    let call = host.call_tool_json(id, "slow_task", r#"{"ms":100}"#, &off).unwrap();
    let seen = watch_task(&mut host, call, task_ended);
    match seen.failed {
        Some(CallError::Protocol(e)) => assert_eq!(e.code, -32003, "{e:?}"),
        other => panic!("expected -32003, got {other:?}"),
    }
}

#[test]
fn cancelling_sends_tasks_cancel_and_the_task_ends_cancelled_on_the_server() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server().arg("--tasks"), Config::default());
    let call = host.call_tool_json(id, "slow_task", r#"{"ms":60000}"#, &task_opts()).unwrap();
    let seen = watch_task(&mut host, call, |s: &TaskSeen| s.task.is_some());
    let task = seen.task.unwrap();
    host.cancel(id, call).unwrap();
    let seen = watch_task(&mut host, call, task_ended);
    assert_eq!(seen.failed, Some(CallError::Local(LocalError::Cancelled)));
    let deadline = Instant::now() + PATIENCE;
    let line = format!("[task] cancelled {task}");
    while !host.stderr_tail(id).unwrap_or_default().contains(&line) {
        assert!(Instant::now() < deadline, "{:?}", host.stderr_tail(id));
        host.poll(Some(Duration::from_millis(50))).unwrap();
    }
    // A resumed call sees the server's verdict: the task was cancelled.
    let resumed = host.resume_task(id, &task, &task_opts()).unwrap();
    let seen = watch_task(&mut host, resumed, task_ended);
    assert_eq!(seen.failed.as_ref().map(CallError::name), Some("task_cancelled"), "{seen:?}");
}

#[test]
fn a_restarted_host_reattaches_to_a_modern_task_over_http() {
    let demo = HttpDemo::start(&["--tasks"]);
    let task = {
        let mut host = Host::new().unwrap();
        let id = host.add_http_server(HttpOptions::new(&demo.url), Config::default()).unwrap();
        let call = host.call_tool_json(id, "slow_task", r#"{"ms":1500}"#, &task_opts()).unwrap();
        let seen = watch_task(&mut host, call, |s: &TaskSeen| s.task.is_some());
        assert_eq!(host.server_tasks(id).len(), 1);
        seen.task.unwrap()
    };
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(&demo.url), Config::default()).unwrap();
    let call = host.resume_task(id, &task, &task_opts()).unwrap();
    let seen = watch_task(&mut host, call, task_ended);
    assert_eq!(slept(&seen), "slept 1500 ms");
}

#[test]
fn a_modern_tasks_input_request_is_answered_through_tasks_update() {
    let answers = mcpoll::ServerRequestKinds { elicitation_form: true, ..Default::default() };
    let mut host = Host::new().unwrap();
    let config = Config { answers, ..Config::default() };
    let id = start(&mut host, demo_server().arg("--tasks"), config);
    let args = r#"{"ms":600,"ask":true}"#;
    let call = host.call_tool_json(id, "slow_task", args, &task_opts()).unwrap();
    let deadline = Instant::now() + PATIENCE;
    let (mut asked, mut input_required, mut done) = (0, false, None);
    while done.is_none() {
        let mut answer = None;
        while let Some((_, e)) = host.poll_event() {
            match e {
                mcpoll::Event::ServerRequest { request, call: Some(c), params, .. }
                    if c == call =>
                {
                    assert!(params.contains("Your name?"), "{params}");
                    asked += 1;
                    answer = Some(request);
                }
                mcpoll::Event::TaskStatus { call: c, status, .. } if c == call => {
                    input_required |= status == TaskStatus::InputRequired;
                }
                mcpoll::Event::CallDone { call: c, result, .. } if c == call => {
                    done = Some(result.json().to_owned());
                }
                mcpoll::Event::CallFailed { call: c, error, .. } if c == call => {
                    panic!("failed: {error:?} {:?}", host.stderr_tail(id))
                }
                _ => {}
            }
        }
        if let Some(request) = answer {
            let reply = common::raw(r#"{"action":"accept","content":{"name":"Ann"}}"#);
            host.answer(id, request, &reply).unwrap();
        }
        assert!(Instant::now() < deadline, "{:?}", host.stderr_tail(id));
        host.poll(Some(Duration::from_millis(50))).unwrap();
    }
    assert!(input_required, "the task reported input_required");
    assert_eq!(asked, 1, "the name was asked once");
    let done: serde_json::Value = serde_json::from_str(&done.unwrap()).unwrap();
    assert_eq!(done["content"][0]["text"], "slept 600 ms for Ann");
}
