// cargo bench --bench timers
//
//! What the pending table costs as it fills, at 1, 64, 1,024 and 10,000 pending calls:
//!
//! * `poll_timeout` (the earliest deadline) and a spurious `handle_timeout` (nothing due). The
//!   engine keeps per-request times in a min-heap with lazy deletion (`engine/timers.rs`), so
//!   the first is O(1) and the second O(1) when nothing is due.
//! * one completion: the reply to the oldest pending call into `handle_message`, its
//!   `poll_event`, and one new call sent in its place (so the table stays at N): O(log n).
//! * memory: bytes per pending call, from a counting allocator. `prealloc` is what
//!   `Engine::new` reserves per slot of `max_pending` (the slab, its buffers, the timer heap);
//!   `queued` is what queuing the calls added on top. Their sum is the engine state per call.
//!
//! Each line: `timers pending=N poll_timeout_ns=.. handle_timeout_ns=.. complete_ns=..`, then
//! `memory pending=10000 prealloc_bytes_per_call=.. queued_bytes_per_call=.. total=..`.

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant};

mod common;

use mcpoll::{CallOptions, Config, Engine, Event};
use serde_json::value::RawValue;

#[path = "../tests/common/counting.rs"]
#[allow(dead_code)]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

/// Live heap bytes of this thread (the bench is single-threaded).
fn live() -> i64 {
    counting::snapshot().0 as i64
}

fn config(pending: usize) -> Config {
    Config {
        max_pending: pending + 8,
        max_in_flight: pending + 8,
        max_queued: pending + 8,
        // Pending calls count against the terminal-event bound too.
        max_queued_events: pending + 8,
        ..Config::default()
    }
}

/// Reads the wire id out of a request the engine wrote, as a server would.
fn wire_id(frame: &[u8]) -> u64 {
    let start = frame.windows(5).position(|w| w == b"\"id\":").expect("id") + 5;
    let digits = frame[start..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&frame[start..start + digits]).expect("ascii").parse().expect("number")
}

/// Sends every queued request; returns their wire ids in order.
fn drain(engine: &mut Engine, now: Instant, buf: &mut Vec<u8>, ids: &mut VecDeque<u64>) {
    loop {
        buf.clear();
        if engine.poll_transmit(now, buf).is_none() {
            break;
        }
        ids.push_back(wire_id(buf));
    }
    while engine.poll_event().is_some() {}
}

fn call(engine: &mut Engine, now: Instant, i: usize) {
    let args: &RawValue = serde_json::from_str("{}").expect("json");
    let opts =
        CallOptions::timeout(Duration::from_secs(60) + Duration::from_millis(i as u64 % 997));
    engine.call_tool(now, "t", args, &opts).expect("call");
}

fn main() {
    let now = Instant::now();
    let mut buf = Vec::with_capacity(4096);
    let mut reply = Vec::with_capacity(256);
    for pending in [1usize, 64, 1024, 10_000] {
        let mut engine = common::ready_engine(config(pending), now);
        let mut ids = VecDeque::with_capacity(pending + 8);
        for i in 0..pending {
            call(&mut engine, now, i);
        }
        drain(&mut engine, now, &mut buf, &mut ids);
        assert_eq!(engine.pending(), pending);
        let rounds = (2_000_000 / pending).clamp(200, 200_000);
        let t = Instant::now();
        for _ in 0..rounds {
            black_box(engine.poll_timeout());
        }
        let poll_ns = t.elapsed().as_nanos() as f64 / rounds as f64;
        let t = Instant::now();
        for _ in 0..rounds {
            engine.handle_timeout(black_box(now));
        }
        let handle_ns = t.elapsed().as_nanos() as f64 / rounds as f64;
        assert_eq!(engine.pending(), pending, "a spurious handle_timeout ends nothing");
        let rounds = 20_000u32;
        let t = Instant::now();
        for i in 0..rounds {
            let id = ids.pop_front().expect("a pending call");
            reply.clear();
            reply.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            reply.extend_from_slice(id.to_string().as_bytes());
            reply.extend_from_slice(br#","result":{"resultType":"complete","content":[]}}"#);
            engine.handle_message(now, &reply);
            assert!(matches!(engine.poll_event(), Some(Event::CallDone { .. })));
            call(&mut engine, now, i as usize);
            drain(&mut engine, now, &mut buf, &mut ids);
        }
        let complete_ns = t.elapsed().as_nanos() as f64 / f64::from(rounds);
        assert_eq!(engine.pending(), pending, "each completion was replaced");
        println!(
            "timers pending={pending} poll_timeout_ns={poll_ns:.0} handle_timeout_ns={handle_ns:.0} complete_ns={complete_ns:.0}"
        );
    }
    memory(now);
}

/// Engine state per pending call at 10,000 pending.
fn memory(now: Instant) {
    const N: usize = 10_000;
    let mut buf = Vec::with_capacity(4096);
    let mut ids = VecDeque::with_capacity(N + 8);
    let base = live();
    let small = common::ready_engine(config(0), now);
    let small_bytes = live() - base;
    drop(small);
    let base = live();
    let mut engine = common::ready_engine(config(N), now);
    let big_bytes = live() - base;
    let prealloc = (big_bytes - small_bytes) as f64 / N as f64;
    let before = live();
    for i in 0..N {
        call(&mut engine, now, i);
    }
    drain(&mut engine, now, &mut buf, &mut ids);
    assert_eq!(engine.pending(), N);
    let queued = (live() - before) as f64 / N as f64;
    println!(
        "memory pending={N} prealloc_bytes_per_call={prealloc:.0} queued_bytes_per_call={queued:.0} total_bytes_per_call={:.0} engine_fixed_bytes={small_bytes}",
        prealloc + queued
    );
}
