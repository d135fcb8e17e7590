// cargo run --example multi_server
//
//! Two servers in one host, isolated: one crashes under a call, the other's calls are not
//! touched, and the crashed one is restarted by the engine's supervisor. Both are
//! `examples/echo_server.rs` (this executable run again with `MCPOLL_MULTI_SERVE=1`; the
//! second with `--crash-on add`, which kills it whenever `add` is called). The `expect`s are
//! for example code only.

#[path = "echo_server.rs"]
mod echo_server;

use std::time::{Duration, Instant};

use mcpoll::{CallOptions, Config, Event, Host, Idempotency, StdioCommand};
use serde_json::value::RawValue;

const SERVE: &str = "MCPOLL_MULTI_SERVE";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os(SERVE).is_some() {
        echo_server::main();
        return Ok(());
    }
    let me = std::env::current_exe()?;
    let mut host = Host::new()?;
    let steady =
        host.add_stdio_server(StdioCommand::new(&me).env(SERVE, "1"), Config::default())?;
    let flaky = host.add_stdio_server(
        StdioCommand::new(&me).env(SERVE, "1").args(["--crash-on", "add"]),
        Config::default(),
    )?;
    host.wait_ready(steady, Duration::from_secs(10))?;
    host.wait_ready(flaky, Duration::from_secs(10))?;

    let slow = RawValue::from_string(r#"{"ms":500}"#.into())?;
    let add = RawValue::from_string(r#"{"a":1,"b":2}"#.into())?;
    let long_call = host.call_tool(steady, "slow", &slow, &CallOptions::default())?;
    // `add` is declared read-only here, so the engine may retry it on the restarted process;
    // it crashes every time, so after three attempts the exit is the answer.
    let read = CallOptions { idempotency: Some(Idempotency::Read), ..CallOptions::default() };
    let doomed = host.call_tool(flaky, "add", &add, &read)?;

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut ended = 0;
    while ended < 2 && Instant::now() < deadline {
        host.poll(Some(Duration::from_millis(50)))?;
        while let Some((server, event)) = host.poll_event() {
            let who = if server == steady { "steady" } else { "flaky " };
            match event {
                Event::CallDone { call, result, record } if call == long_call || call == doomed => {
                    ended += 1;
                    println!("{who}: done after {} attempt(s): {}", record.attempts, result.json());
                }
                Event::CallFailed { call, error, record }
                    if call == long_call || call == doomed =>
                {
                    ended += 1;
                    println!("{who}: failed after {} attempt(s): {error}", record.attempts);
                }
                Event::TransportLost { error, restart_in } => {
                    println!("{who}: process lost ({error}); restart in {restart_in:?}")
                }
                Event::Ready { era, version } => println!("{who}: ready ({era}, {version})"),
                _ => {}
            }
        }
    }
    let echo = RawValue::from_string(r#"{"text":"back"}"#.into())?;
    let back = host.call_tool_blocking(flaky, "echo", &echo, &CallOptions::default())?;
    println!("flaky : serves again after its restarts: {}", back.json);
    Ok(())
}
