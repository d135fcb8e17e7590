// cargo bench --bench timers
//
//! What timer handling costs as the pending table fills: `poll_timeout` (the earliest
//! deadline) and a spurious `handle_timeout` (nothing due), at 1, 64, 1,024 and 10,000 pending
//! calls. The engine keeps deadlines inside the pending entries and scans them (smoltcp's
//! `poll_at` approach), so both are linear in the pending count; these figures say when that
//! stops being cheap enough. Each line: `timers pending=N poll_timeout_ns=.. handle_timeout_ns=..`.

use std::hint::black_box;
use std::time::{Duration, Instant};

mod common;

use mcpoll::{CallOptions, Config, Engine};
use serde_json::value::RawValue;

fn ready_engine(pending: usize, now: Instant) -> Engine {
    let config = Config {
        max_pending: pending + 8,
        max_in_flight: pending + 8,
        max_queued: pending + 8,
        ..Config::default()
    };
    let mut engine = common::ready_engine(config, now);
    let mut buf = Vec::new();
    let args: &RawValue = serde_json::from_str("{}").expect("json");
    for i in 0..pending {
        let opts =
            CallOptions::timeout(Duration::from_secs(60) + Duration::from_millis(i as u64 % 997));
        engine.call_tool(now, "t", args, &opts).expect("call");
    }
    loop {
        buf.clear();
        if engine.poll_transmit(now, &mut buf).is_none() {
            break;
        }
    }
    while engine.poll_event().is_some() {}
    engine
}

fn main() {
    let now = Instant::now();
    for pending in [1usize, 64, 1024, 10_000] {
        let mut engine = ready_engine(pending, now);
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
        println!("timers pending={pending} poll_timeout_ns={poll_ns:.0} handle_timeout_ns={handle_ns:.0}");
    }
}
