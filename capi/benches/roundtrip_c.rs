// taskset -c 0 cargo bench -p mcpoll-capi --bench roundtrip_c
//
//! The C ABI's overhead per call: sequential `tools/call` round trips to the demo server over
//! pipes, once through the Rust API (`Host::call_tool` + `Host::poll` + `Host::poll_event`, as
//! `benches/roundtrip.rs` measures it) and once through the C ABI (`mcpoll_call_tool` +
//! `mcpoll_poll` + `mcpoll_next_event`, the calls a C program makes, here from Rust through
//! the same `extern "C"` functions). The two alternate in rounds, so drift on a busy machine
//! hits both. It prints the p50 and mean of each and `ratio` = C ABI p50 / Rust p50.
//!
//! The demo server is built with the bench profile first. `MCPOLL_BENCH_ROUNDS=N` sets the
//! calls per round (default 5,000, after 500 of warm-up).

#[path = "../../tests/common/cargo_build.rs"]
#[allow(dead_code)]
mod cargo_build;

use std::ffi::CStr;
use std::time::{Duration, Instant};

use mcpoll::{CallOptions, Config, Event, Host, StdioCommand};
use mcpoll_capi::*;
use serde_json::value::RawValue;

const WARMUP: usize = 500;
const ROUNDS: usize = 3;

fn calls() -> usize {
    std::env::var("MCPOLL_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5000)
}

// Not inlined, so that callgrind can count each path's instructions on its own
// (`--toggle-collect`; see benches/README.md).
#[inline(never)]
fn rust_api(demo: &std::path::Path, n: usize) -> Vec<Duration> {
    let mut host = Host::new().expect("host");
    let server = host.add_stdio_server(StdioCommand::new(demo), Config::default()).expect("spawn");
    host.wait_ready(server, Duration::from_secs(10)).expect("ready");
    let args = RawValue::from_string(r#"{"text":"hi"}"#.into()).expect("json");
    let opts = CallOptions::default();
    let mut samples = Vec::with_capacity(n);
    for i in 0..WARMUP + n {
        let t = Instant::now();
        let call = host.call_tool(server, "echo", &args, &opts).expect("call");
        let mut done = false;
        while !done {
            host.poll(None).expect("poll");
            while let Some((_, e)) = host.poll_event() {
                match e {
                    Event::CallDone { call: c, result, .. } if c == call => {
                        assert!(result.json().len() > 10);
                        done = true;
                    }
                    Event::CallFailed { error, .. } => panic!("call failed: {error}"),
                    _ => {}
                }
            }
        }
        if i >= WARMUP {
            samples.push(t.elapsed());
        }
    }
    samples
}

#[inline(never)]
fn c_abi(demo: &std::path::Path, n: usize) -> Vec<Duration> {
    let program = std::ffi::CString::new(demo.as_os_str().as_encoded_bytes()).expect("path");
    let argv = [program.as_ptr()];
    let mut samples = Vec::with_capacity(n);
    // SAFETY: the C ABI used as its header says: live handles, NUL-terminated strings, valid
    // out-pointers, and event pointers read before the next call on the host.
    unsafe {
        let mut host = std::ptr::null_mut();
        assert_eq!(mcpoll_host_new(&mut host), mcpoll_result::MCPOLL_OK);
        let mut server = 0;
        let r = mcpoll_add_stdio_server(
            host,
            argv.as_ptr(),
            1,
            std::ptr::null(),
            0,
            std::ptr::null(),
            std::ptr::null(),
            &mut server,
        );
        assert_eq!(r, mcpoll_result::MCPOLL_OK);
        let mut ev: mcpoll_event = std::mem::zeroed();
        let mut ready = false;
        while !ready {
            assert_eq!(mcpoll_poll(host, -1), mcpoll_result::MCPOLL_OK);
            loop {
                assert_eq!(mcpoll_next_event(host, &mut ev), mcpoll_result::MCPOLL_OK);
                match ev.kind {
                    mcpoll_event_kind::MCPOLL_EVENT_NONE => break,
                    mcpoll_event_kind::MCPOLL_EVENT_READY => ready = true,
                    _ => {}
                }
            }
        }
        let name = c"echo".as_ptr();
        let args = c"{\"text\":\"hi\"}".as_ptr();
        for i in 0..WARMUP + n {
            let t = Instant::now();
            let mut call = 0;
            let r = mcpoll_call_tool(host, server, name, args, std::ptr::null(), &mut call);
            assert_eq!(r, mcpoll_result::MCPOLL_OK);
            let mut done = false;
            while !done {
                assert_eq!(mcpoll_poll(host, -1), mcpoll_result::MCPOLL_OK);
                loop {
                    assert_eq!(mcpoll_next_event(host, &mut ev), mcpoll_result::MCPOLL_OK);
                    match ev.kind {
                        mcpoll_event_kind::MCPOLL_EVENT_NONE => break,
                        mcpoll_event_kind::MCPOLL_EVENT_CALL_DONE if ev.call == call => {
                            assert!(ev.data_len > 10);
                            done = true;
                        }
                        mcpoll_event_kind::MCPOLL_EVENT_CALL_FAILED => {
                            panic!("call failed: {:?}", CStr::from_ptr(ev.error_message))
                        }
                        _ => {}
                    }
                }
            }
            if i >= WARMUP {
                samples.push(t.elapsed());
            }
        }
        mcpoll_host_free(host);
    }
    samples
}

fn stats(mut s: Vec<Duration>) -> (f64, f64) {
    s.sort();
    let p50 = s[s.len() / 2].as_secs_f64() * 1e6;
    let mean = s.iter().map(Duration::as_secs_f64).sum::<f64>() / s.len() as f64 * 1e6;
    (p50, mean)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` asks what there is to run
    }
    let demo = cargo_build::demo_server_bin(&["--profile", "bench"]);
    let n = calls();
    let (mut rust, mut c) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        rust.extend(rust_api(demo, n));
        c.extend(c_abi(demo, n));
    }
    let (rust_p50, rust_mean) = stats(rust);
    let (c_p50, c_mean) = stats(c);
    println!(
        "stdio rust_p50_us={rust_p50:.2} rust_mean_us={rust_mean:.2} capi_p50_us={c_p50:.2} \
         capi_mean_us={c_mean:.2} ratio={:.3} calls={}",
        c_p50 / rust_p50,
        n * ROUNDS
    );
}
