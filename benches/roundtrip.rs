// taskset -c 0 cargo bench --bench roundtrip
//
//! Sequential `tools/call` round trips to a real child process over pipes, against the raw
//! floor, plus heap allocations per call in steady state.
//!
//! * floor: a child of the same program over the same kind of pipes, a pre-serialized request
//!   line written with one `write` and the reply read with blocking `read`s up to the newline:
//!   no JSON, no poll, no engine. It is what any client must pay.
//! * mcpoll: `Host::call_tool` + `Host::poll` + `Host::poll_event` until `CallDone`.
//!
//! The child is the demo server (this binary run again with `MCPOLL_BENCH_SERVE=1`), built
//! with the bench profile. Pin everything to one core (`taskset -c 0`) for stable figures:
//! on a 2-core machine the scheduler otherwise flips between same-core and cross-core wakeups.
//! The last line is `stdio p50_us=.. p99_us=.. floor_p50_us=.. ratio=.. allocs_per_call=..`.

#[path = "../examples/demo_server.rs"]
#[allow(dead_code)]
mod demo_server;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcpoll::{CallOptions, Config, Event, Host, StdioCommand};
use serde_json::value::RawValue;

/// Counts every allocation in this process (the bench side only; the child is separate).
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY-style note: delegates to the system allocator unchanged; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SERVE: &str = "MCPOLL_BENCH_SERVE";
const WARMUP: usize = 500;
const ROUNDS: usize = 5000;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn floor(exe: &std::path::Path) -> Vec<Duration> {
    let mut child = Command::new(exe)
        .env(SERVE, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn floor child");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let line = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"#,
        r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
        r#""io.modelcontextprotocol/clientCapabilities":{},"#,
        r#""io.modelcontextprotocol/clientInfo":{"name":"mcpoll","version":"0.1.0"}}}}"#,
        "\n"
    )
    .as_bytes();
    let mut buf = [0u8; 4096];
    let mut samples = Vec::with_capacity(ROUNDS);
    for i in 0..WARMUP + ROUNDS {
        let t = Instant::now();
        stdin.write_all(line).expect("write");
        loop {
            let n = stdout.read(&mut buf).expect("read");
            assert!(n > 0, "floor child exited");
            if buf[..n].contains(&b'\n') {
                break;
            }
        }
        if i >= WARMUP {
            samples.push(t.elapsed());
        }
    }
    drop(stdin);
    let _ = child.wait();
    samples
}

fn mcpoll(exe: &std::path::Path) -> (Vec<Duration>, f64) {
    let mut host = Host::new().expect("host");
    let server = host
        .add_stdio_server(StdioCommand::new(exe).env(SERVE, "1"), Config::default())
        .expect("spawn");
    host.wait_ready(server, Duration::from_secs(10)).expect("ready");
    let args = RawValue::from_string(r#"{"text":"hi"}"#.into()).expect("json");
    let opts = CallOptions::default();
    let mut samples = Vec::with_capacity(ROUNDS);
    let mut allocs = 0u64;
    for i in 0..WARMUP + ROUNDS {
        let before = ALLOCS.load(Ordering::Relaxed);
        let t = Instant::now();
        let call = host.call_tool(server, "echo", &args, &opts).expect("call");
        let mut done = false;
        while !done {
            host.poll(None).expect("poll");
            while let Some((_, e)) = host.poll_event() {
                match e {
                    Event::CallDone { call: c, result } if c == call => {
                        assert!(result.json().len() > 10);
                        done = true;
                    }
                    Event::CallFailed { error, .. } => panic!("call failed: {error}"),
                    _ => {}
                }
            }
        }
        let elapsed = t.elapsed();
        if i >= WARMUP {
            samples.push(elapsed);
            allocs += ALLOCS.load(Ordering::Relaxed) - before;
        }
    }
    host.close_server(server);
    (samples, allocs as f64 / ROUNDS as f64)
}

fn main() {
    if std::env::var_os(SERVE).is_some() {
        demo_server::main();
        return;
    }
    let exe = std::env::current_exe().expect("bench path");
    // `cargo bench` passes `--bench`; nothing else is accepted.
    let mut floor_samples = floor(&exe);
    let (mut samples, allocs_per_call) = mcpoll(&exe);
    floor_samples.sort();
    samples.sort();
    let (p50, p99) = (percentile(&samples, 0.50), percentile(&samples, 0.99));
    let floor_p50 = percentile(&floor_samples, 0.50);
    println!(
        "floor p50={:.1}us p99={:.1}us; mcpoll p50={p50:.1}us p99={p99:.1}us max={:.1}us over {ROUNDS} calls",
        floor_p50,
        percentile(&floor_samples, 0.99),
        percentile(&samples, 1.0)
    );
    println!(
        "stdio p50_us={p50:.1} p99_us={p99:.1} floor_p50_us={floor_p50:.1} ratio={:.2} allocs_per_call={allocs_per_call:.2}",
        p50 / floor_p50
    );
}
