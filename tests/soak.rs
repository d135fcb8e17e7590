//! The soak: many calls at 64 in flight against the demo server, the server killed (SIGKILL)
//! every so many calls. At the end every call ended in exactly one terminal event, no write
//! reached the server twice (its state file logs every delivery across restarts), the pending
//! table is empty, and the client's RSS did not grow in the second half.
//!
//! The HTTP soak does the same over Streamable HTTP and the keep-alive pool, the test killing
//! and restarting the server on its port. RSS is the process's: run the two one at a time
//! (`--test-threads=1`, as CI does), or each series shows the other soak too.
//!
//! Off by default (`#[ignore]`). CI runs the short form:
//! `cargo test --test soak -- --ignored --nocapture` (50,000 calls, a kill every 5,000). The
//! full form: `MCPOLL_SOAK_CALLS=1000000 MCPOLL_SOAK_KILL_EVERY=10000 cargo test --release
//! --test soak -- --ignored --nocapture`.
//!
//! Three calls in four are `charge` writes that are never safe to re-send
//! (`Idempotency::Unknown`), each tagged with its own `idempotency_key` only so that the
//! server's ledger names it (`charge<TAB>KEY`); the fourth is a read (`echo`) that may be
//! re-sent after a crash. Bookkeeping is preallocated and touched before the first sample, so
//! the RSS series shows the library, not the test.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use mcpoll::{
    BreakerPolicy, CallError, CallId, CallOptions, Config, Event, Host, Idempotency, LocalError,
    RestartPolicy,
};

const IN_FLIGHT: usize = 64;

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Resident set size of this process, in KiB.
fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("rss");
    pages * 4
}

/// How a call ended, one byte per call.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum End {
    Open = 1,
    Done = 2,
    /// Failed, and the client says it may have been delivered.
    MaybeDelivered = 3,
    /// Failed in any other way.
    Failed = 4,
}

struct StateFile(PathBuf);

impl Drop for StateFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The engine settings of both soaks.
fn soak_config() -> Config {
    Config {
        max_in_flight: IN_FLIGHT,
        // Each kill fails up to 64 writes at once: a breaker would then refuse calls for its
        // cool-down, and the soak would measure fast failures instead of deliveries.
        breaker: BreakerPolicy { failure_threshold: 0, ..BreakerPolicy::default() },
        // Killed on purpose, often: restart at once, and never call it a crash loop.
        restart: RestartPolicy {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
            crash_loop_exits: u32::MAX,
            ..RestartPolicy::default()
        },
        ..Config::default()
    }
}

#[test]
#[ignore = "long: CI runs it with --ignored (see the module doc)"]
fn soak_calls_end_once_writes_are_delivered_at_most_once_and_rss_is_flat() {
    let calls = knob("MCPOLL_SOAK_CALLS", 50_000);
    let kill_every = knob("MCPOLL_SOAK_KILL_EVERY", 5_000).max(1);
    let state =
        StateFile(std::env::temp_dir().join(format!("mcpoll-soak-{}.log", std::process::id())));
    let mut host = Host::new().unwrap();
    let server = demo_server().arg("--state-file").arg(&state.0);
    let id = host.add_stdio_server(server, soak_config()).unwrap();
    host.wait_ready(id, common::PATIENCE).unwrap();
    soak(&mut host, id, &state.0, calls, kill_every, &mut |host| {
        let pid = host.pid(id).expect("a running server");
        let pid = rustix::process::Pid::from_raw(pid as i32).expect("pid");
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    });
}

/// The same over Streamable HTTP (issue 21): 64 calls in flight over the keep-alive pool, the
/// demo server killed every so many calls and started again on the same port by the test
/// (an HTTP server is not the host's process to restart). CI runs the short form:
/// `cargo test --test soak -- --ignored --nocapture --test-threads=1` (20,000 calls, a kill
/// every 2,000; the knobs are `MCPOLL_HTTP_SOAK_CALLS` and `MCPOLL_HTTP_SOAK_KILL_EVERY`).
#[test]
#[ignore = "long: CI runs it with --ignored (see the module doc)"]
fn http_soak_calls_end_once_writes_are_delivered_at_most_once_and_rss_is_flat() {
    let calls = knob("MCPOLL_HTTP_SOAK_CALLS", 20_000);
    let kill_every = knob("MCPOLL_HTTP_SOAK_KILL_EVERY", 2_000).max(1);
    let dir = std::env::temp_dir();
    let state = StateFile(dir.join(format!("mcpoll-http-soak-{}.log", std::process::id())));
    let script = StateFile(dir.join(format!("mcpoll-http-soak-{}.sh", std::process::id())));
    let demo = demo_server().program().to_string_lossy().into_owned();
    let body =
        format!("#!/bin/sh\nexec '{demo}' --http \"$1\" --state-file '{}'\n", state.0.display());
    std::fs::write(&script.0, body).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let port = free_port();
    let mut peer = Some(HttpPeer::start_on(script.0.clone(), port));
    let mut host = Host::new().unwrap();
    let opts = mcpoll::HttpOptions::new(format!("http://127.0.0.1:{port}/mcp"));
    let id = host.add_http_server(opts, soak_config()).unwrap();
    host.wait_ready(id, Duration::from_secs(20)).unwrap();
    soak(&mut host, id, &state.0, calls, kill_every, &mut |_| {
        // Killed (SIGKILL to its group, reaped), then started again where it was.
        drop(peer.take());
        peer = Some(HttpPeer::start_on(script.0.clone(), port));
    });
    drop(peer);
}

/// Runs `calls` calls at [`IN_FLIGHT`] against server `id`, `kill`ing it every `kill_every`,
/// then checks the ends, the server's delivery ledger at `state` and the RSS series.
fn soak(
    host: &mut Host,
    id: mcpoll::ServerId,
    state: &std::path::Path,
    calls: usize,
    kill_every: usize,
    kill: &mut dyn FnMut(&mut Host),
) {
    let sample_every = (calls / 20).max(1);
    // Bookkeeping, all allocated and touched now.
    // Terminal events per call, plus one: a zeroed vector would come from untouched pages
    // that fill in as the run goes, and the RSS series would show the test, 1 byte per call.
    let mut ends = vec![1u8; calls];
    let mut how = vec![End::Open; calls];
    let mut index: HashMap<CallId, usize> = HashMap::with_capacity(16 * IN_FLIGHT);
    let mut ended: Vec<(CallId, End)> = Vec::with_capacity(16 * IN_FLIGHT);
    let mut rss = Vec::with_capacity(calls / sample_every + 2);
    let mut key = String::with_capacity(32);
    let echo = raw(r#"{"text":"soak"}"#);
    let charge = raw(r#"{"amount":1}"#);
    let read = CallOptions { idempotency: Some(Idempotency::Read), ..CallOptions::default() };
    let mut write = CallOptions {
        idempotency: Some(Idempotency::Unknown),
        idempotency_key: Some(String::with_capacity(32)),
        ..CallOptions::default()
    };

    let started = Instant::now();
    let deadline = started + Duration::from_secs(60 + calls as u64 / 200);
    let (mut issued, mut done, mut kills, mut refused) = (0usize, 0usize, 0usize, 0usize);
    let mut next_kill = kill_every;
    while done < calls {
        assert!(Instant::now() < deadline, "soak stalled: {done} of {calls} calls ended");
        while issued < calls && index.len() < IN_FLIGHT {
            let started = if issued % 4 == 3 {
                host.call_tool(id, "echo", &echo, &read)
            } else {
                key.clear();
                use std::fmt::Write;
                write!(key, "s{issued}").unwrap();
                let k = write.idempotency_key.as_mut().unwrap();
                k.clear();
                k.push_str(&key);
                host.call_tool(id, "charge", &charge, &write)
            };
            match started {
                Ok(call) => {
                    index.insert(call, issued);
                    issued += 1;
                }
                // Refused at the door (the server is restarting): poll and try again.
                Err(_) => {
                    refused += 1;
                    break;
                }
            }
        }
        host.poll(Some(Duration::from_millis(50))).unwrap();
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::CallDone { call, .. } => ended.push((call, End::Done)),
                Event::CallFailed { call, error, .. } => {
                    let end = match error {
                        CallError::Local(LocalError::DeliveryUnknown(_)) => End::MaybeDelivered,
                        _ => End::Failed,
                    };
                    ended.push((call, end));
                }
                _ => {}
            }
        }
        for (call, end) in ended.drain(..) {
            let i = *index.get(&call).expect("an end for a call this test made");
            ends[i] += 1;
            if ends[i] == 2 {
                index.remove(&call);
                how[i] = end;
                done += 1;
                if done % sample_every == 0 {
                    rss.push((done, rss_kib()));
                }
                if done == next_kill && done < calls {
                    kill(host);
                    kills += 1;
                    next_kill += kill_every;
                }
            }
        }
    }
    let elapsed = started.elapsed();

    // Late duplicates would arrive now, if any.
    let settle = Instant::now() + Duration::from_millis(300);
    while Instant::now() < settle {
        host.poll(Some(Duration::from_millis(20))).unwrap();
        while let Some((_, e)) = host.poll_event() {
            if let Event::CallDone { call, .. } | Event::CallFailed { call, .. } = e {
                panic!("{call} ended after every call had ended");
            }
        }
    }
    assert_eq!(host.pending(id), Some(0), "the pending table is empty");
    assert!(ends.iter().all(|&n| n == 2), "every call ended exactly once");

    // The ledger: every charge delivered at most once, and every one that succeeded exactly once.
    let text = std::fs::read_to_string(state).expect("state file");
    let mut delivered = vec![0u8; calls];
    for line in text.lines() {
        if let Some(k) = line.strip_prefix("charge\ts") {
            let i: usize = k.parse().expect("a key this test made");
            delivered[i] += 1;
        }
    }
    let count = |e: End| how.iter().filter(|&&h| h == e).count();
    let (ok, maybe, failed) = (count(End::Done), count(End::MaybeDelivered), count(End::Failed));
    for i in (0..calls).filter(|i| i % 4 != 3) {
        assert!(delivered[i] <= 1, "charge s{i} was delivered {} times", delivered[i]);
        if how[i] == End::Done {
            assert_eq!(delivered[i], 1, "charge s{i} succeeded, so it was delivered");
        }
    }
    let delivered_writes = delivered.iter().filter(|&&n| n == 1).count();

    println!(
        "soak calls={calls} kills={kills} elapsed_s={:.1} calls_per_s={:.0} done={ok} delivery_unknown={maybe} failed={failed} refused_at_call={refused} writes_delivered={delivered_writes}",
        elapsed.as_secs_f64(),
        calls as f64 / elapsed.as_secs_f64()
    );
    let series: Vec<String> = rss.iter().map(|(n, kib)| format!("{n}:{kib}")).collect();
    println!("soak rss_kib calls:kib {}", series.join(" "));
    assert_eq!(kills, (calls - 1) / kill_every, "the server was killed on schedule");
    assert!(ok >= calls * 9 / 10, "most calls succeed: {ok} of {calls}");
    // Flat: over the second half RSS grows by at most 256 KiB (allocator noise), whatever the
    // number of calls; a leak of 11 bytes per call fails the CI form, of 1 byte the full form.
    let half = &rss[rss.len() / 2..];
    let (first, last) = (half.first().unwrap().1, half.iter().map(|s| s.1).max().unwrap());
    assert!(last <= first + 256, "RSS grew from {first} KiB to {last} KiB in the second half");
}
