//! Bounded work over a real child process: memory of a long blocking-call loop with an unread
//! event (counting allocator), the stdio driver's frame budget per readiness event, and the
//! bound on bytes buffered toward a server that stops reading.
//!
//! The server is this test binary, re-run with `MCPOLL_TINY_SERVER` set (see [`tiny_server`]):
//! no interpreter or example binary needed, and fast enough for 100,000 calls.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

mod common;

use common::counting::{snapshot, Counting};
use mcpoll::StdioDriver;
use mcpoll::{CallOptions, Config, Engine, Event, Host, ListKind, ServerState, StdioCommand};
use serde_json::json;
use serde_json::value::RawValue;

#[global_allocator]
static GLOBAL: Counting = Counting;

// ----- the tiny server -------------------------------------------------------------------------

const SERVER_ENV: &str = "MCPOLL_TINY_SERVER";

/// Not a test: the server's entry point when this binary runs as one. Modes:
/// - `echo`: answers `server/discover`, then sends one `tools/list_changed`; answers every
///   `tools/call` with a short text result;
/// - `burst:N`: answers each `tools/call` with N progress notifications and the result, in one
///   write;
/// - `deaf`: answers `server/discover`, then never reads again;
/// - `blank`: answers each `tools/call` with blank lines, 16 KiB per write, until the pipe
///   breaks.
///
/// Ignored in normal runs (it is no test); the child runs it with `--ignored`. libtest's own
/// "running 1 test" line reaches stdout first; the engine skips it as junk.
#[test]
#[ignore = "the tiny server's entry point, run as a child by the tests in this file"]
fn tiny_server() {
    // Under `--include-ignored` in a normal run: nothing to serve.
    let Ok(mode) = std::env::var(SERVER_ENV) else { return };
    serve(&mode);
    std::process::exit(0);
}

fn serve(mode: &str) {
    let mut input = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        let id = msg["id"].clone();
        let reply = |result| json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        let mut text = String::new();
        match msg["method"].as_str() {
            Some("server/discover") => {
                text = reply(json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private"}));
                text.push('\n');
                if mode == "echo" {
                    text.push_str(
                        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
                    );
                    text.push('\n');
                }
            }
            Some("tools/call") if mode == "blank" => {
                let lines = vec![b'\n'; 16 * 1024];
                while out.write_all(&lines).and_then(|()| out.flush()).is_ok() {}
                return;
            }
            Some("tools/call") => {
                let n: usize = mode.strip_prefix("burst:").map_or(0, |n| n.parse().unwrap());
                for i in 0..n {
                    let p = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": 0, "progress": i}});
                    text.push_str(&p.to_string());
                    text.push('\n');
                }
                let result = json!({"resultType": "complete",
                    "content": [{"type": "text", "text": "ok"}]});
                text.push_str(&reply(result));
                text.push('\n');
            }
            _ => {}
        }
        out.write_all(text.as_bytes()).unwrap();
        out.flush().unwrap();
        if mode == "deaf" && !text.is_empty() {
            // Killed with its process group when the driver goes.
            std::thread::sleep(Duration::from_secs(120));
            return;
        }
    }
}

fn tiny(mode: &str) -> StdioCommand {
    let exe = std::env::current_exe().expect("test binary path");
    StdioCommand::new(exe)
        .args(["tiny_server", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"])
        .env(SERVER_ENV, mode)
}

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).unwrap()
}

fn start(host: &mut Host, mode: &str, config: Config) -> mcpoll::ServerId {
    let id = host.add_stdio_server(tiny(mode), config).expect("spawn");
    let state = host.wait_ready(id, common::PATIENCE).expect("ready");
    assert!(matches!(state, ServerState::Ready(..)), "{state:?}: {:?}", host.stderr_tail(id));
    id
}

// ----- tests -----------------------------------------------------------------------------------

/// Issue 8: a loop of `call_tool_blocking` with one unread `ListChanged` at the head of the
/// queue. Each call's own end is taken out of the middle of the queue, so the queue never
/// empties; the arena must still not grow with the number of calls.
#[test]
fn a_hundred_thousand_blocking_calls_with_an_unread_event_stay_in_bounded_memory() {
    const CALLS: u64 = 100_000;
    let mut host = Host::new().unwrap();
    let id = start(&mut host, "echo", Config::default());
    match host.poll_event() {
        Some((_, Event::Ready { .. })) => {}
        other => panic!("expected Ready first: {other:?}"),
    }
    let args = raw("{}");
    let opts = CallOptions::default();
    // Warm-up: the notification (written before the first call's reply) is queued by the end,
    // and every buffer reaches its working size.
    for _ in 0..5_000 {
        host.call_tool_blocking(id, "echo", &args, &opts).unwrap();
    }
    let (live_before, allocs_before) = snapshot();
    let started = Instant::now();
    for _ in 0..CALLS {
        let r = host.call_tool_blocking(id, "echo", &args, &opts).unwrap();
        assert!(r.json.contains("\"ok\""));
    }
    let took = started.elapsed();
    let (live_after, allocs_after) = snapshot();
    let grew = live_after - live_before;
    let per_call = (allocs_after - allocs_before) as f64 / CALLS as f64;
    eprintln!(
        "{CALLS} blocking calls in {took:?}: live heap {live_before} -> {live_after} bytes \
         ({grew:+}), {per_call:.2} allocations per call"
    );
    // The results alone are ~6.5 MB; without compaction the arena holds all of them.
    assert!(grew < 64 * 1024, "live heap grew by {grew} bytes over {CALLS} calls");
    match host.poll_event() {
        Some((_, Event::ListChanged(ListKind::Tools))) => {}
        other => panic!("the unread event is still first: {other:?}"),
    }
}

/// Drives one driver and engine like a host: waits only when no backlog is left; checks that
/// no readiness event or resume hands the engine more than `budget` frames. Returns the number
/// of resumes it took for `done` to hold.
fn drive(
    poll: &mut mio::Poll,
    driver: &mut StdioDriver,
    engine: &mut Engine,
    budget: u64,
    mut done: impl FnMut(&mut Engine) -> bool,
) -> usize {
    let mut events = mio::Events::with_capacity(16);
    let deadline = Instant::now() + common::PATIENCE;
    let mut resumes = 0;
    while !done(engine) {
        assert!(Instant::now() < deadline, "stalled: {:?}", engine.stats());
        let wait = if driver.has_backlog() { Duration::ZERO } else { Duration::from_millis(50) };
        common::wait_events(poll, &mut events, Some(wait));
        let now = Instant::now();
        if driver.has_backlog() {
            let before = engine.stats().frames_in;
            driver.resume(poll.registry(), engine, now).unwrap();
            let handed = engine.stats().frames_in - before;
            assert!(handed <= budget, "a resume handed {handed} frames");
            resumes += 1;
        }
        for e in events.iter() {
            let before = engine.stats().frames_in;
            driver.handle_readiness(poll.registry(), e.token(), engine, now).unwrap();
            let handed = engine.stats().frames_in - before;
            assert!(handed <= budget, "one readiness event handed {handed} frames");
        }
        engine.handle_timeout(now);
        driver.flush(poll.registry(), engine, now).unwrap();
    }
    resumes
}

#[test]
fn the_stdio_driver_hands_the_engine_at_most_frames_per_readiness_per_event() {
    const BUDGET: u64 = 8;
    let config = Config { frames_per_readiness: BUDGET as usize, ..Config::default() };
    let mut poll = mio::Poll::new().unwrap();
    let now = Instant::now();
    let mut engine = Engine::new(config, now).unwrap();
    let mut driver = StdioDriver::new(tiny("burst:400"), engine.config(), mio::Token(0));
    driver.spawn(poll.registry(), &mut engine, now).unwrap();
    drive(&mut poll, &mut driver, &mut engine, BUDGET, |e| {
        matches!(e.state(), ServerState::Ready(..))
    });
    while engine.poll_event().is_some() {}
    let call = engine.call_tool(Instant::now(), "burst", &raw("{}"), &CallOptions::default());
    let call = call.unwrap();
    driver.flush(poll.registry(), &mut engine, Instant::now()).unwrap();
    let mut ended = false;
    let resumes = drive(&mut poll, &mut driver, &mut engine, BUDGET, |e| {
        while let Some(ev) = e.poll_event() {
            if let Event::CallDone { call: c, .. } = ev {
                ended |= c == call;
            }
        }
        ended
    });
    // 401 frames in one write: the pipe delivers them in a few reads, the budget cuts those
    // into rounds of 8, and the rest is taken without a new readiness event.
    assert!(resumes >= 20, "only {resumes} resumes for 401 frames at 8 per round");
}

/// The host resumes a driver whose budget ran out; without that, the frames left in the
/// framer wait for a readiness edge that never comes, and the call hangs to its deadline.
#[test]
fn a_host_with_a_budget_of_one_frame_still_completes_a_burst() {
    let mut host = Host::new().unwrap();
    let config = Config { frames_per_readiness: 1, ..Config::default() };
    let id = start(&mut host, "burst:200", config);
    let opts = CallOptions::timeout(Duration::from_secs(10));
    for _ in 0..3 {
        let r = host.call_tool_blocking(id, "burst", &raw("{}"), &opts).unwrap();
        assert!(r.json.contains("\"ok\""));
    }
    assert!(host.stats(id).unwrap().frames_in >= 600);
}

/// A server writing blank lines without end (issue 21): they deliver no frame, so the frame
/// budget never stopped the driver, and one readiness event read for as long as the pipe
/// stayed full. The byte budget stops it: the first event over a 16 KiB write leaves a
/// backlog, counted in `Stats::input_yields`, and the call still ends at its deadline.
#[test]
fn a_stdio_server_writing_blank_lines_is_read_one_byte_budget_per_event() {
    let config = Config { bytes_per_readiness: 4096, ..Config::default() };
    let mut poll = mio::Poll::new().unwrap();
    let mut engine = Engine::new(config, Instant::now()).unwrap();
    let mut driver = StdioDriver::new(tiny("blank"), engine.config(), mio::Token(0));
    driver.spawn(poll.registry(), &mut engine, Instant::now()).unwrap();
    drive(&mut poll, &mut driver, &mut engine, 64, |e| matches!(e.state(), ServerState::Ready(..)));
    while engine.poll_event().is_some() {}
    let opts = CallOptions::timeout(Duration::from_secs(1));
    let call = engine.call_tool(Instant::now(), "blank", &raw("{}"), &opts).unwrap();
    driver.flush(poll.registry(), &mut engine, Instant::now()).unwrap();
    // The first event on stdout: the child's first write (16 KiB into an empty pipe) is there
    // whole, as a pipe write that fits is not split.
    let mut events = mio::Events::with_capacity(16);
    let limit = Instant::now() + Duration::from_secs(60);
    while !driver.has_backlog() {
        assert!(Instant::now() < limit, "no backlog within 60 s: {:?}", engine.stats());
        common::wait_events(&mut poll, &mut events, Some(Duration::from_millis(100)));
        for e in events.iter() {
            driver
                .handle_readiness(poll.registry(), e.token(), &mut engine, Instant::now())
                .unwrap();
        }
    }
    assert_eq!(engine.stats().input_yields, 1);
    // A host's loop from here: the call ends at its deadline while the blank lines go on.
    let mut failed = None;
    drive(&mut poll, &mut driver, &mut engine, 64, |e| {
        while let Some(ev) = e.poll_event() {
            if let Event::CallFailed { call: c, error, .. } = ev {
                if c == call {
                    failed = Some(error);
                }
            }
        }
        failed.is_some()
    });
    assert_eq!(failed, Some(mcpoll::CallError::Local(mcpoll::LocalError::DeadlineExceeded)));
    assert!(engine.stats().input_yields > 1, "{:?}", engine.stats());
    assert!(driver.is_running(), "the server was still writing");
}

/// A server that stops reading: the driver holds at most `max_write_buffer_bytes` plus one
/// frame, and the engine keeps the rest of the calls queued, not the driver's buffer.
#[test]
fn bytes_buffered_toward_a_server_that_stops_reading_are_bounded() {
    const CAP: usize = 64 * 1024;
    let config = Config {
        max_write_buffer_bytes: CAP,
        max_in_flight: 256,
        max_pending: 256,
        max_queued: 256,
        ..Config::default()
    };
    let mut poll = mio::Poll::new().unwrap();
    let now = Instant::now();
    let mut engine = Engine::new(config, now).unwrap();
    let mut driver = StdioDriver::new(tiny("deaf"), engine.config(), mio::Token(0));
    driver.spawn(poll.registry(), &mut engine, now).unwrap();
    drive(&mut poll, &mut driver, &mut engine, u64::MAX, |e| {
        matches!(e.state(), ServerState::Ready(..))
    });
    let big = raw(&format!(r#"{{"text":"{}"}}"#, "z".repeat(32 * 1024)));
    for _ in 0..100 {
        engine.call_tool(Instant::now(), "echo", &big, &CallOptions::default()).unwrap();
        driver.flush(poll.registry(), &mut engine, Instant::now()).unwrap();
        assert!(driver.unsent() <= CAP + 33 * 1024, "{} bytes buffered", driver.unsent());
    }
    let (in_flight, queued) = engine.load();
    // 3.2 MB asked for; the pipe holds 64 KiB and the driver 64 KiB plus a frame.
    assert!(in_flight <= 8, "{in_flight} calls written");
    assert!(queued >= 90, "only {queued} calls left in the engine");
}
