// cargo bench --bench engine
//
//! The engine alone, no I/O: one `tools/call` round trip (`call_tool`, `poll_transmit` into a
//! reused buffer, the reply frame into `handle_message`, `poll_event`) against an in-memory
//! peer, and the decode of one reply frame. It separates the engine's CPU cost from the
//! syscalls the roundtrip bench also pays. Prints `engine roundtrip_ns=.. decode_ns=..
//! serde_json_ns=..`: the last is serde_json validating the same frame and keeping nothing
//! (`IgnoredAny`), the reference for what a validating pass over it costs.
//!
//! `MCPOLL_BENCH_DECODE=mcpoll` (or `serde_json`) with `MCPOLL_BENCH_ROUNDS=N` only decodes
//! (or validates) the frame `N` times, for instruction counts: under callgrind, the difference
//! between two values of `N`, divided by theirs, is one decode (benches/README.md has the
//! command).

use std::hint::black_box;
use std::time::Instant;

mod common;

use mcpoll::internal::decode_jsonrpc;
use mcpoll::{CallOptions, Config, Event};
use serde_json::value::RawValue;

const ROUNDS: u32 = 200_000;

/// The reply a Python SDK server sends for echo, after the id.
const TAIL: &str = r#","result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"lab-py","version":"0.1.0"}},"content":[{"type":"text","text":"hi"}],"isError":false,"resultType":"complete","structuredContent":{"result":"hi"}}}"#;

/// One pass over `frame`: mcpoll's decode (the validating scan and the envelope), or
/// serde_json's validation alone.
fn decodes(frame: &[u8], serde_json: bool) -> bool {
    if serde_json {
        serde_json::from_slice::<serde::de::IgnoredAny>(frame).is_ok()
    } else {
        decode_jsonrpc(frame).is_ok()
    }
}

fn main() {
    if let Ok(which) = std::env::var("MCPOLL_BENCH_DECODE") {
        return decode_only(which == "serde_json");
    }
    let now = Instant::now();
    let mut engine = common::ready_engine(Config::default(), now);
    let mut buf = Vec::with_capacity(4096);

    let args: &RawValue = serde_json::from_str(r#"{"text":"hi"}"#).expect("json");
    let opts = CallOptions::default();
    // The reply a Python SDK server sends for echo, with the id patched in per call.
    let mut frame = Vec::with_capacity(512);
    let mut id_text = String::with_capacity(24);
    let t = Instant::now();
    for _ in 0..ROUNDS {
        let _call = engine.call_tool(now, "echo", args, &opts).expect("call");
        buf.clear();
        let _ = engine.poll_transmit(now, &mut buf).expect("request");
        // Read the id back the way a server would echo it.
        let start = buf.windows(5).position(|w| w == b"\"id\":").expect("id") + 5;
        let end = start + buf[start..].iter().position(|b| !b.is_ascii_digit()).expect("digits");
        id_text.clear();
        id_text.push_str(std::str::from_utf8(&buf[start..end]).expect("ascii"));
        frame.clear();
        frame.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        frame.extend_from_slice(id_text.as_bytes());
        frame.extend_from_slice(TAIL.as_bytes());
        engine.handle_message(now, &frame);
        match engine.poll_event() {
            Some(Event::CallDone { result, .. }) => {
                black_box(result.json());
            }
            other => panic!("{other:?}"),
        }
    }
    let roundtrip = t.elapsed().as_nanos() as f64 / f64::from(ROUNDS);
    let per_pass = |serde_json: bool| {
        let t = Instant::now();
        for _ in 0..ROUNDS {
            assert!(black_box(decodes(black_box(&frame), serde_json)));
        }
        t.elapsed().as_nanos() as f64 / f64::from(ROUNDS)
    };
    let (decode, serde_json) = (per_pass(false), per_pass(true));
    println!(
        "engine roundtrip_ns={roundtrip:.0} decode_ns={decode:.0} serde_json_ns={serde_json:.0} \
         frame_bytes={}",
        frame.len()
    );
}

/// `MCPOLL_BENCH_DECODE`: the decode (or serde_json's validation) alone, `MCPOLL_BENCH_ROUNDS`
/// times, of the frame the round trip above answers with (its id a ten-digit one, as the
/// engine's ids are).
fn decode_only(serde_json: bool) {
    let rounds: u32 =
        std::env::var("MCPOLL_BENCH_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(ROUNDS);
    let frame = format!(r#"{{"jsonrpc":"2.0","id":4294967297{TAIL}"#);
    for _ in 0..rounds {
        assert!(black_box(decodes(black_box(frame.as_bytes()), serde_json)));
    }
}
