// cargo run --example game_loop
//
//! A fixed-step loop (60 frames a second, as a game or a robot controller runs) that never
//! blocks on MCP: each frame it calls `Host::poll(Some(Duration::ZERO))`, drains the events,
//! and goes on with its own work. Tool calls start in one frame and finish frames later.
//! While nothing is pending (`Host::is_idle`) it skips the poll, so an idle frame makes no
//! system call for MCP; twice a second it polls anyway, for what the server sends unasked.
//!
//! The server is `examples/echo_server.rs` (this executable run again with
//! `MCPOLL_GAME_LOOP_SERVE=1`). The `expect`s are for example code only.

#[path = "echo_server.rs"]
mod echo_server;

use std::time::{Duration, Instant};

use mcpoll::{CallOptions, Config, Event, Host, StdioCommand};
use serde_json::value::RawValue;

const SERVE: &str = "MCPOLL_GAME_LOOP_SERVE";
const FRAME: Duration = Duration::from_micros(16_667);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os(SERVE).is_some() {
        echo_server::main();
        return Ok(());
    }
    let mut host = Host::new()?;
    let server = host.add_stdio_server(
        StdioCommand::new(std::env::current_exe()?).env(SERVE, "1"),
        Config::default(),
    )?;
    let slow = RawValue::from_string(r#"{"ms":250}"#.into())?;
    let add = RawValue::from_string(r#"{"a":1,"b":2}"#.into())?;
    let mut in_flight = 0usize;
    let mut done = 0usize;
    let mut worst_poll = Duration::ZERO;
    let start = Instant::now();
    for frame in 0..120u32 {
        let frame_start = Instant::now();
        // Start some work now and then; the calls are queued until the server is ready.
        if frame % 20 == 0 {
            host.call_tool(server, "slow", &slow, &CallOptions::default())?;
            host.call_tool(server, "add", &add, &CallOptions::default())?;
            in_flight += 2;
        }
        // The MCP tick: never waits, and leaves the kernel alone while nothing is pending.
        if !host.is_idle() || frame % 30 == 0 {
            let t = Instant::now();
            host.poll(Some(Duration::ZERO))?;
            worst_poll = worst_poll.max(t.elapsed());
        }
        while let Some((_, event)) = host.poll_event() {
            match event {
                Event::CallDone { result, record, .. } => {
                    in_flight -= 1;
                    done += 1;
                    println!("frame {frame:3}: done after {:?}: {}", record.elapsed, result.json());
                }
                Event::CallFailed { error, .. } => {
                    in_flight -= 1;
                    println!("frame {frame:3}: failed: {error}");
                }
                Event::Ready { era, version } => {
                    println!("frame {frame:3}: server ready ({era}, {version})")
                }
                _ => {}
            }
        }
        // ... the game's own simulation and rendering would run here ...
        if let Some(rest) = FRAME.checked_sub(frame_start.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    println!(
        "{done} calls done, {in_flight} still in flight after {:?}; the slowest poll took {worst_poll:?}",
        start.elapsed()
    );
    host.close_server(server);
    Ok(())
}
