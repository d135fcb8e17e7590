// cargo run --release --example minimal --no-default-features --features stdio -- [--calls N] [--rss] [--idle-ms MS] SERVER [ARGS...]
//
//! The smallest useful client: starts SERVER over stdio, calls its `echo` tool N times at once
//! (1 by default), prints each result and how many calls failed; with `--rss`, also its own
//! peak resident set size while the calls were in flight (`/proc/self/status`, Linux only);
//! with `--idle-ms`, then runs a 60 Hz loop for that long with nothing pending, polling only when
//! `Host::is_idle` says there is something to do (under `strace`: no system call but the loop's
//! own sleeps). Built with only the `stdio`
//! feature, it is what the footprint figures in `benches/README.md` measure
//! (`benches/footprint.sh` builds it as a crate of its own, as a user's binary would be).
//! The `expect`s are for example code only.

use std::time::Duration;

use mcpoll::{CallOptions, Config, Event, Host, StdioCommand};
use serde_json::value::RawValue;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).peekable();
    let mut calls = 1usize;
    if args.peek().map(String::as_str) == Some("--calls") {
        args.next();
        calls = args.next().ok_or("--calls needs a number")?.parse()?;
    }
    let rss = args.next_if(|a| a == "--rss").is_some();
    let mut idle = None;
    if args.next_if(|a| a == "--idle-ms").is_some() {
        idle = Some(Duration::from_millis(args.next().ok_or("--idle-ms needs a number")?.parse()?));
    }
    let usage = "usage: minimal [--calls N] [--rss] [--idle-ms MS] SERVER [ARGS...]";
    let program = args.next().ok_or(usage)?;
    let mut host = Host::new()?;
    let config = Config { max_in_flight: calls.max(1), ..Config::default() };
    let server = host.add_stdio_server(StdioCommand::new(program).args(args), config)?;

    let text = RawValue::from_string(r#"{"text":"hi"}"#.into())?;
    for _ in 0..calls {
        host.call_tool(server, "echo", &text, &CallOptions::default())?;
    }
    let (mut ended, mut failed) = (0, 0);
    while ended < calls {
        host.poll(Some(Duration::from_secs(1)))?;
        while let Some((_, event)) = host.poll_event() {
            match event {
                Event::CallDone { result, .. } => {
                    ended += 1;
                    println!("{}", result.json());
                }
                Event::CallFailed { error, .. } => {
                    ended += 1;
                    failed += 1;
                    eprintln!("failed: {error}");
                }
                _ => {}
            }
        }
    }
    eprintln!("{calls} calls, {failed} failed");
    if rss {
        let status = std::fs::read_to_string("/proc/self/status")?;
        let peak = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap_or("VmHWM: ?");
        eprintln!("{}", peak.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    if let Some(idle) = idle {
        let until = std::time::Instant::now() + idle;
        while std::time::Instant::now() < until {
            if !host.is_idle() {
                host.poll(Some(Duration::ZERO))?;
            }
            std::thread::sleep(Duration::from_millis(16));
        }
    }
    host.close_server(server);
    Ok(())
}
