//! The fault suite: the crate's demo server injects one fault at a time (stdio and HTTP), and
//! after each the same invariants are checked: every call ended in exactly one terminal event,
//! the pending table is empty, a non-idempotent call was delivered at most once (the server
//! logs every delivery to a state file that survives its restarts), and nothing panicked.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use mcpoll::HttpOptions;
use mcpoll::{
    CallError, CallId, CallOptions, Config, Event, Host, Idempotency, LocalError, PeerError,
    ServerId, ServerState, StdioCommand, TransportError,
};

/// A state file for the server's delivery log, removed at the end.
struct Deliveries(PathBuf);

impl Deliveries {
    fn new(tag: &str) -> Self {
        Self(std::env::temp_dir().join(format!("mcpoll-faults-{tag}-{}.log", std::process::id())))
    }

    /// How many times the server received a call of `tool`, across every process.
    fn count(&self, tool: &str) -> usize {
        let text = std::fs::read_to_string(&self.0).unwrap_or_default();
        text.lines().filter(|l| l.split('\t').next() == Some(tool)).count()
    }
}

impl Drop for Deliveries {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn server(faults: &[&str], log: &Deliveries) -> StdioCommand {
    let mut cmd = demo_server().arg("--state-file").arg(&log.0);
    for f in faults {
        cmd = cmd.args(["--fault", f]);
    }
    cmd
}

/// Every terminal event seen, per call; everything else counted by kind.
#[derive(Default)]
struct Outcomes {
    ends: HashMap<CallId, Vec<Result<String, CallError>>>,
    lost: usize,
}

impl Outcomes {
    fn pump(&mut self, host: &mut Host) {
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::CallDone { call, result, .. } => {
                    self.ends.entry(call).or_default().push(Ok(result.json().to_owned()))
                }
                Event::CallFailed { call, error, .. } => {
                    self.ends.entry(call).or_default().push(Err(error))
                }
                Event::TransportLost { .. } => self.lost += 1,
                _ => {}
            }
        }
    }

    /// Polls until `call` has ended (bounded), then returns how.
    #[track_caller]
    fn wait(&mut self, host: &mut Host, call: CallId) -> Result<String, CallError> {
        let deadline = Instant::now() + common::PATIENCE;
        loop {
            self.pump(host);
            if let Some(end) = self.ends.get(&call).and_then(|v| v.first()) {
                return end.clone();
            }
            assert!(Instant::now() < deadline, "call {call} did not end");
            host.poll(Some(Duration::from_millis(20))).unwrap();
        }
    }

    /// The invariants: one end per call, nothing left pending.
    #[track_caller]
    fn check(&mut self, host: &mut Host, id: ServerId, calls: &[CallId]) {
        let settle = Instant::now() + Duration::from_millis(300);
        while Instant::now() < settle {
            host.poll(Some(Duration::from_millis(20))).unwrap();
            self.pump(host);
        }
        for c in calls {
            assert_eq!(
                self.ends.get(c).map_or(0, Vec::len),
                1,
                "call {c} must end exactly once: {:?}",
                self.ends.get(c)
            );
        }
        assert_eq!(host.pending(id), Some(0), "the pending table is empty");
    }
}

fn read() -> CallOptions {
    CallOptions { idempotency: Some(Idempotency::Read), ..CallOptions::default() }
}

fn start_stdio(host: &mut Host, cmd: StdioCommand, config: Config) -> ServerId {
    host.add_stdio_server(cmd, config).expect("spawn")
}

/// Starts the server and waits for its era to settle, so timing-sensitive faults act on a
/// call that was really sent.
fn start_ready(host: &mut Host, cmd: StdioCommand) -> ServerId {
    let id = start_stdio(host, cmd, Config::default());
    let state = host.wait_ready(id, common::PATIENCE).expect("ready");
    assert!(matches!(state, ServerState::Ready(..)), "{state:?}");
    id
}

fn text(json: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn crash_mid_call_a_write_is_delivered_once_and_ends_as_delivery_unknown() {
    let log = Deliveries::new("crash");
    let mut host = Host::new().unwrap();
    let id = start_stdio(&mut host, server(&["crash:write_note"], &log), Config::default());
    let mut o = Outcomes::default();
    let c =
        host.call_tool(id, "write_note", &raw(r#"{"note":"n"}"#), &CallOptions::default()).unwrap();
    match o.wait(&mut host, c) {
        Err(CallError::Local(LocalError::DeliveryUnknown(cause))) => {
            assert_eq!(cause.name(), "process_exit")
        }
        other => panic!("{other:?}"),
    }
    o.check(&mut host, id, &[c]);
    assert_eq!(log.count("write_note"), 1, "never re-sent");
    assert!(o.lost >= 1, "the host saw the process go");
    // The restarted server serves again.
    let e = host.call_tool(id, "echo", &raw(r#"{"text":"again"}"#), &read()).unwrap();
    assert_eq!(text(&o.wait(&mut host, e).unwrap()), "again");
}

#[test]
fn crash_before_running_a_read_is_retried_on_the_restarted_process() {
    let log = Deliveries::new("failfirst");
    let mut host = Host::new().unwrap();
    let id = start_stdio(&mut host, server(&["fail-first:lookup:1"], &log), Config::default());
    let mut o = Outcomes::default();
    let c = host.call_tool(id, "lookup", &raw(r#"{"key":"k"}"#), &read()).unwrap();
    assert_eq!(text(&o.wait(&mut host, c).unwrap()), "value-of-k");
    o.check(&mut host, id, &[c]);
    assert_eq!(log.count("lookup"), 2, "the first attempt died, the second answered");
}

#[test]
fn a_keyed_write_retried_after_a_crash_is_charged_once() {
    let log = Deliveries::new("keyed");
    let mut host = Host::new().unwrap();
    let id = start_stdio(&mut host, server(&["crash:charge:1"], &log), Config::default());
    let mut o = Outcomes::default();
    let opts = CallOptions { idempotency_key: Some("order-42".into()), ..CallOptions::default() };
    let c = host.call_tool(id, "charge", &raw(r#"{"amount":5}"#), &opts).unwrap();
    o.wait(&mut host, c).expect("the retry with the same key succeeds");
    o.check(&mut host, id, &[c]);
    let s = host.call_tool(id, "stats", &raw("{}"), &read()).unwrap();
    let stats: serde_json::Value = serde_json::from_str(&o.wait(&mut host, s).unwrap()).unwrap();
    assert_eq!(
        stats["structuredContent"]["chargeKeys"]["order-42"], 2,
        "delivered twice, one key: {stats}"
    );
}

#[test]
fn exit_on_start_degrades_the_server_without_a_hot_loop() {
    let log = Deliveries::new("exitstart");
    let restart = mcpoll::RestartPolicy {
        base_delay: Duration::from_millis(20),
        crash_loop_exits: 3,
        ..mcpoll::RestartPolicy::default()
    };
    let mut host = Host::new().unwrap();
    let id = start_stdio(
        &mut host,
        server(&["exit-on-start"], &log),
        Config { restart, ..Config::default() },
    );
    let mut o = Outcomes::default();
    let c = host.call_tool(id, "echo", &raw("{}"), &read()).unwrap();
    // The error says why: the first exit's code and the server's own message, said once
    // (each restart printed the same line again).
    let err = o.wait(&mut host, c).unwrap_err();
    let CallError::Local(LocalError::Degraded(Some(first))) = &err else { panic!("{err:?}") };
    let TransportError::ProcessExit(exit) = &**first else { panic!("{first:?}") };
    assert!(exit.code.is_some(), "{exit:?}");
    let line = "[fault] exit-on-start: exiting with code";
    assert_eq!(exit.stderr_tail.matches(line).count(), 1, "{:?}", exit.stderr_tail);
    let said = err.to_string();
    assert!(said.contains("first exit: server process exited with code"), "{said}");
    assert!(said.contains(line), "{said}");
    let tail = host.stderr_tail(id).unwrap();
    assert_eq!(tail.matches(line).count(), 1, "repeats are folded: {tail:?}");
    assert!(tail.contains("(repeated"), "{tail:?}");
    let args = raw("{}");
    assert_eq!(host.call_tool(id, "echo", &args, &read()), Err(mcpoll::RequestError::Degraded));
    // Degraded means no more starts: the process count stays put for a while.
    let before = o.lost;
    let until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < until {
        host.poll(Some(Duration::from_millis(20))).unwrap();
        o.pump(&mut host);
    }
    assert_eq!(o.lost, before, "no restarts while degraded");
    assert_eq!(host.pending(id), Some(0));
}

#[test]
fn truncated_reply_line_the_read_is_retried_once_the_process_is_back() {
    let log = Deliveries::new("truncate");
    let mut host = Host::new().unwrap();
    let id = start_stdio(&mut host, server(&["truncate:lookup:1"], &log), Config::default());
    let mut o = Outcomes::default();
    let c = host.call_tool(id, "lookup", &raw(r#"{"key":"t"}"#), &read()).unwrap();
    assert_eq!(text(&o.wait(&mut host, c).unwrap()), "value-of-t");
    o.check(&mut host, id, &[c]);
}

#[test]
fn garbage_unknown_ids_and_duplicates_are_counted_and_calls_end_once() {
    let log = Deliveries::new("noise");
    let mut host = Host::new().unwrap();
    let faults = ["garbage:echo", "unknown-id:add", "duplicate:lookup"];
    let id = start_stdio(&mut host, server(&faults, &log), Config::default());
    let mut o = Outcomes::default();
    let a = host.call_tool(id, "echo", &raw(r#"{"text":"g"}"#), &read()).unwrap();
    let b = host.call_tool(id, "add", &raw(r#"{"a":1,"b":2}"#), &read()).unwrap();
    let c = host.call_tool(id, "lookup", &raw(r#"{"key":"d"}"#), &read()).unwrap();
    for call in [a, b, c] {
        o.wait(&mut host, call).expect("completes despite the noise");
    }
    o.check(&mut host, id, &[a, b, c]);
    let stats = host.stats(id).unwrap();
    assert_eq!(stats.invalid_frames, 1);
    assert_eq!(stats.unknown_ids, 1);
    assert_eq!(stats.duplicate_responses, 1);
}

#[test]
fn a_reply_after_cancel_is_late_and_never_delivered() {
    let log = Deliveries::new("late");
    let mut host = Host::new().unwrap();
    let id = start_ready(&mut host, server(&["late-after-cancel:slow"], &log));
    let mut o = Outcomes::default();
    let c = host.call_tool(id, "slow", &raw(r#"{"ms":300}"#), &CallOptions::default()).unwrap();
    let until = Instant::now() + Duration::from_millis(100);
    while Instant::now() < until {
        host.poll(Some(Duration::from_millis(10))).unwrap();
    }
    host.cancel(id, c).unwrap();
    assert!(matches!(o.wait(&mut host, c), Err(CallError::Local(LocalError::Cancelled))));
    poll_until(&mut host, common::PATIENCE, |h| h.stats(id).unwrap().late_responses == 1);
    o.check(&mut host, id, &[c]);
}

#[test]
fn a_hang_past_the_deadline_ends_locally() {
    let log = Deliveries::new("hang");
    let mut host = Host::new().unwrap();
    let id = start_ready(&mut host, server(&["hang:lookup"], &log));
    let mut o = Outcomes::default();
    let opts = CallOptions { timeout: Some(Duration::from_millis(300)), ..read() };
    // The server never answers: only the deadline can end the call, and it names itself.
    let c = host.call_tool(id, "lookup", &raw(r#"{"key":"h"}"#), &opts).unwrap();
    assert!(matches!(o.wait(&mut host, c), Err(CallError::Local(LocalError::DeadlineExceeded))));
    o.check(&mut host, id, &[c]);
    assert_eq!(log.count("lookup"), 1, "a hang is not a transport failure: no retry");
}

#[test]
fn a_slow_drip_still_completes() {
    let log = Deliveries::new("drip");
    let mut host = Host::new().unwrap();
    let id = start_stdio(&mut host, server(&["drip:echo"], &log), Config::default());
    let mut o = Outcomes::default();
    let c = host.call_tool(id, "echo", &raw(r#"{"text":"drip"}"#), &read()).unwrap();
    assert_eq!(text(&o.wait(&mut host, c).unwrap()), "drip");
    o.check(&mut host, id, &[c]);
}

#[test]
fn an_oversize_reply_fails_its_call_and_nothing_else() {
    let log = Deliveries::new("oversize");
    let mut host = Host::new().unwrap();
    let config = Config { max_message_bytes: 1 << 20, ..Config::default() };
    let id = start_stdio(&mut host, server(&["oversize:echo"], &log), config);
    let mut o = Outcomes::default();
    let c = host.call_tool(id, "echo", &raw(r#"{"text":"big"}"#), &read()).unwrap();
    let d = host.call_tool(id, "add", &raw(r#"{"a":1,"b":1}"#), &read()).unwrap();
    assert_eq!(o.wait(&mut host, c), Err(CallError::Peer(PeerError::TooLarge)));
    o.wait(&mut host, d).expect("the next reply is read normally");
    o.check(&mut host, id, &[c, d]);
}

/// The demo server in HTTP mode with `faults`, counting deliveries in `log`.
fn http_demo(faults: &[&str], log: &Deliveries) -> common::HttpDemo {
    let mut args = vec!["--state-file", log.0.to_str().expect("a UTF-8 temp path")];
    for f in faults {
        args.extend(["--fault", f]);
    }
    common::HttpDemo::start(&args)
}

fn start_http(host: &mut Host, url: &str) -> ServerId {
    let id = host.add_http_server(HttpOptions::new(url), Config::default()).unwrap();
    assert!(matches!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Ready(..)));
    id
}

#[test]
fn http_5xx_then_success_a_read_is_retried_until_it_succeeds() {
    let log = Deliveries::new("503");
    let demo = http_demo(&["status-then-ok:lookup:2"], &log);
    let mut host = Host::new().unwrap();
    let id = start_http(&mut host, &demo.url);
    let mut o = Outcomes::default();
    let c = host.call_tool(id, "lookup", &raw(r#"{"key":"x"}"#), &read()).unwrap();
    let mut attempts = 0;
    let deadline = Instant::now() + common::PATIENCE;
    while attempts == 0 {
        host.poll(Some(Duration::from_millis(20))).unwrap();
        while let Some((_, e)) = host.poll_event() {
            if let Event::CallDone { call, result, record } = e {
                assert_eq!(call, c);
                assert_eq!(text(result.json()), "value-of-x");
                attempts = record.attempts;
                o.ends.entry(call).or_default().push(Ok(String::new()));
            }
        }
        assert!(Instant::now() < deadline);
    }
    assert_eq!(attempts, 3, "two 503s, then the answer");
    o.check(&mut host, id, &[c]);
    assert_eq!(host.stats(id).unwrap().retries, 2);
}

#[test]
fn http_5xx_on_a_write_is_delivery_unknown() {
    let log = Deliveries::new("503w");
    let demo = http_demo(&["status-then-ok:write_note:1"], &log);
    let mut host = Host::new().unwrap();
    let id = start_http(&mut host, &demo.url);
    let mut o = Outcomes::default();
    let c =
        host.call_tool(id, "write_note", &raw(r#"{"note":"w"}"#), &CallOptions::default()).unwrap();
    assert!(matches!(o.wait(&mut host, c), Err(CallError::Local(LocalError::DeliveryUnknown(_)))));
    o.check(&mut host, id, &[c]);
    assert!(log.count("write_note") <= 1, "at most once");
}

#[test]
fn http_reset_mid_sse_a_read_is_retried_a_write_is_not() {
    let log = Deliveries::new("reset");
    let demo = http_demo(&["reset-mid-sse:slow:1", "reset-mid-sse:write_note"], &log);
    let mut host = Host::new().unwrap();
    let id = start_http(&mut host, &demo.url);
    let mut o = Outcomes::default();
    // Progress makes the reply an event stream; the server drops it after one event.
    let opts = CallOptions { progress: true, ..read() };
    let c = host.call_tool(id, "slow", &raw(r#"{"ms":200}"#), &opts).unwrap();
    assert!(o.wait(&mut host, c).unwrap().contains("slept"), "the retry completes");
    let w = host
        .call_tool(
            id,
            "write_note",
            &raw(r#"{"note":"x"}"#),
            &CallOptions { progress: true, ..CallOptions::default() },
        )
        .unwrap();
    match o.wait(&mut host, w) {
        Err(CallError::Local(LocalError::DeliveryUnknown(cause))) => {
            assert_eq!(*cause, TransportError::ConnectionLost)
        }
        other => panic!("{other:?}"),
    }
    o.check(&mut host, id, &[c, w]);
    assert_eq!(log.count("write_note"), 1, "the write went once");
}

#[test]
fn http_close_before_reply_on_a_read_retries_on_a_new_connection() {
    let log = Deliveries::new("close");
    let demo = http_demo(&["close-before-reply:lookup:1"], &log);
    let mut host = Host::new().unwrap();
    let id = start_http(&mut host, &demo.url);
    let mut o = Outcomes::default();
    let c = host.call_tool(id, "lookup", &raw(r#"{"key":"c"}"#), &read()).unwrap();
    assert_eq!(text(&o.wait(&mut host, c).unwrap()), "value-of-c");
    o.check(&mut host, id, &[c]);
}

#[test]
fn http_close_before_reply_on_a_write_is_delivered_at_most_once() {
    // The server reads the request, then closes the connection without answering: the write
    // may have run, so it must not be sent again, whatever state the connection was in.
    let log = Deliveries::new("closew");
    let demo = http_demo(&["close-before-reply:write_note"], &log);
    let mut host = Host::new().unwrap();
    let id = start_http(&mut host, &demo.url);
    let mut o = Outcomes::default();
    // A first call leaves a kept-alive connection in the pool, so the write reuses it.
    let e = host.call_tool(id, "echo", &raw(r#"{"text":"warm"}"#), &read()).unwrap();
    o.wait(&mut host, e).unwrap();
    let w =
        host.call_tool(id, "write_note", &raw(r#"{"note":"x"}"#), &CallOptions::default()).unwrap();
    assert!(matches!(o.wait(&mut host, w), Err(CallError::Local(LocalError::DeliveryUnknown(_)))));
    o.check(&mut host, id, &[e, w]);
    assert_eq!(log.count("write_note"), 1, "delivered exactly once, never re-sent");
}

#[test]
fn a_server_that_cannot_be_restarted_is_reported_and_not_retried_in_a_hot_loop() {
    // The program disappears while the server runs (an upgrade gone wrong): every restart
    // fails to spawn. That is reported, backed off, and ends as degraded.
    let log = Deliveries::new("nospawn");
    let dir = std::env::temp_dir().join(format!("mcpoll-nospawn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("demo_server_copy");
    std::fs::copy(demo_server().program(), &copy).unwrap();
    let restart = mcpoll::RestartPolicy {
        base_delay: Duration::from_millis(20),
        crash_loop_exits: 4,
        ..mcpoll::RestartPolicy::default()
    };
    let mut host = Host::new().unwrap();
    let cmd =
        StdioCommand::new(&copy).args(["--fault", "crash:write_note", "--state-file"]).arg(&log.0);
    let id = host.add_stdio_server(cmd, Config { restart, ..Config::default() }).unwrap();
    assert!(matches!(host.wait_ready(id, common::PATIENCE).unwrap(), ServerState::Ready(..)));
    std::fs::remove_file(&copy).unwrap();
    let mut o = Outcomes::default();
    let w =
        host.call_tool(id, "write_note", &raw(r#"{"note":"x"}"#), &CallOptions::default()).unwrap();
    assert!(matches!(o.wait(&mut host, w), Err(CallError::Local(LocalError::DeliveryUnknown(_)))));
    let started = Instant::now();
    while o.lost < 4 {
        assert!(started.elapsed() < common::PATIENCE, "restart attempts stalled at {}", o.lost);
        host.poll(Some(Duration::from_millis(20))).unwrap();
        o.pump(&mut host);
    }
    let args = raw("{}");
    assert_eq!(host.call_tool(id, "echo", &args, &read()), Err(mcpoll::RequestError::Degraded));
    // Degraded: no further attempts for a while.
    let quiet = Instant::now() + Duration::from_millis(300);
    while Instant::now() < quiet {
        host.poll(Some(Duration::from_millis(20))).unwrap();
        o.pump(&mut host);
    }
    assert_eq!(o.lost, 4, "one crash and three failed starts, then no more attempts");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "backed off, but not for long with these settings"
    );
    assert_eq!(host.pending(id), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}
