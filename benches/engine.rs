// cargo bench --bench engine
//
//! The engine alone, no I/O: one `tools/call` round trip (`call_tool`, `poll_transmit` into a
//! reused buffer, the reply frame into `handle_message`, `poll_event`) against an in-memory
//! peer, and the decode of one reply frame. It separates the engine's CPU cost from the
//! syscalls the roundtrip bench also pays. Prints `engine roundtrip_ns=.. decode_ns=..`.

use std::hint::black_box;
use std::time::{Duration, Instant};

mod common;

use mcpoll::internal::decode_jsonrpc;
use mcpoll::{CallOptions, Config, Event};
use serde_json::value::RawValue;

const ROUNDS: u32 = 200_000;

fn main() {
    let now = Instant::now();
    let mut engine = common::ready_engine(Config::default(), now);
    let mut buf = Vec::with_capacity(4096);

    let args: &RawValue = serde_json::from_str(r#"{"text":"hi"}"#).expect("json");
    let opts = CallOptions::default();
    // The reply a Python SDK server sends for echo, with the id patched in per call.
    let tail = r#","result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"lab-py","version":"0.1.0"}},"content":[{"type":"text","text":"hi"}],"isError":false,"resultType":"complete","structuredContent":{"result":"hi"}}}"#;
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
        frame.extend_from_slice(tail.as_bytes());
        engine.handle_message(now, &frame);
        match engine.poll_event() {
            Some(Event::CallDone { result, .. }) => {
                black_box(result.json());
            }
            other => panic!("{other:?}"),
        }
    }
    let roundtrip = t.elapsed().as_nanos() as f64 / f64::from(ROUNDS);
    let t = Instant::now();
    for _ in 0..ROUNDS {
        black_box(decode_jsonrpc(black_box(&frame)).is_ok());
    }
    let decode = t.elapsed().as_nanos() as f64 / f64::from(ROUNDS);
    let _ = Duration::ZERO;
    println!(
        "engine roundtrip_ns={roundtrip:.0} decode_ns={decode:.0} frame_bytes={}",
        frame.len()
    );
}
