// cargo build --examples && cargo run --example usage -- target/debug/examples/echo_server
//
//! The README's Usage program, verbatim (`tests/readme.rs` checks that, and runs it against
//! `examples/echo_server.rs`): starts the server given by its command line, calls its `echo`
//! tool once and exits, sleeping in `Host::poll(None)` between events. A failure is printed
//! with its cause: the call's error, and each time the server went away, why.

use std::process::ExitCode;

use mcpoll::{CallOptions, Config, Event, Host, StdioCommand};

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    // The server's command line, e.g. `cargo run --example usage -- "python3 server.py"`.
    let line = std::env::args().nth(1).ok_or("usage: usage SERVER-COMMAND-LINE")?;
    let mut host = Host::new()?;
    let command = StdioCommand::from_command_line(&line)?;
    let server = host.add_stdio_server(command, Config::default())?;
    let args = r#"{"text":"hi"}"#; // JSON text, checked once without allocating
    let call = host.call_tool_json(server, "echo", args, &CallOptions::default())?; // sent once ready
    loop {
        // Sleeps until there is I/O or a deadline is due (at the latest the call's timeout).
        host.poll(None)?;
        while let Some((_server, event)) = host.poll_event() {
            match event {
                Event::CallDone { call: c, result, .. } if c == call => {
                    println!("{}", result.json());
                    return Ok(ExitCode::SUCCESS);
                }
                Event::CallFailed { call: c, error, .. } if c == call => {
                    eprintln!("echo failed: {error}");
                    return Ok(ExitCode::FAILURE);
                }
                // Why the server went away: its exit status and last stderr line, or the
                // transport's error. A crashed stdio server is restarted with backoff.
                Event::TransportLost { error, restart_in } => {
                    eprintln!("server lost: {error} (restart in {restart_in:?})")
                }
                Event::Closed { error } => eprintln!("server closed: {error}"),
                _ => {}
            }
        }
    }
}
