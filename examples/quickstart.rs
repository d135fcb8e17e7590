// cargo run --example quickstart
//
//! The quickstart: starts a small MCP server as a child process over stdio, lets the engine
//! probe its protocol era, lists its tools, calls two of them, then starts a slow call and
//! cancels it after its first progress report, printing what happened at each step.
//!
//! The server is `examples/echo_server.rs`, run as this same executable again with
//! `MCPOLL_QUICKSTART_SERVE=1`, so the quickstart needs nothing but `cargo`. The `expect`s are
//! for example code only.

#[path = "echo_server.rs"]
mod echo_server;

use std::time::{Duration, Instant};

use mcpoll::{CallOptions, Config, Event, Host, StdioCommand};

const SERVE: &str = "MCPOLL_QUICKSTART_SERVE";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os(SERVE).is_some() {
        echo_server::main();
        return Ok(());
    }
    let me = std::env::current_exe()?;
    let server_cmd = StdioCommand::new(me).env(SERVE, "1");

    let mut host = Host::new()?;
    let server = host.add_stdio_server(server_cmd, Config::default())?;
    let state = host.wait_ready(server, Duration::from_secs(10))?;
    println!("1. started the echo server (pid {:?}); state: {state}", host.pid(server));

    let list = host.list_tools(server, &CallOptions::default())?;
    let tools: serde_json::Value = serde_json::from_str(&host.wait(server, list)?.json)?;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    println!("2. tools: {}", names.join(", "));

    let args = r#"{"text":"hello from mcpoll"}"#; // JSON text, checked once, no RawValue needed
    let echo = host.call_tool_json_blocking(server, "echo", args, &CallOptions::default())?;
    println!("3. echo -> {}", echo.json);
    let add =
        host.call_tool_json_blocking(server, "add", r#"{"a":20,"b":22}"#, &CallOptions::default())?;
    println!("4. add(20, 22) -> {}", add.json);

    // A slow call with progress, driven from a poll loop the way a game or control loop would.
    let opts = CallOptions {
        progress: true,
        timeout: Some(Duration::from_secs(10)),
        ..CallOptions::default()
    };
    let started = Instant::now();
    let slow = host.call_tool_json(server, "slow", r#"{"ms":5000}"#, &opts)?;
    println!("5. slow(5000 ms) started");
    let mut cancelled = false;
    'outer: loop {
        host.poll(Some(Duration::from_millis(16)))?;
        while let Some((_, event)) = host.poll_event() {
            match event {
                Event::Progress { call, progress, total, message } if call == slow => {
                    println!(
                        "   progress {progress}/{} {}",
                        total.unwrap_or(0.0),
                        message.unwrap_or("")
                    );
                    if !cancelled {
                        cancelled = true;
                        host.cancel(server, slow)?;
                        println!("   cancel sent after {:?}", started.elapsed());
                        continue 'outer;
                    }
                }
                Event::CallFailed { call, error, .. } if call == slow => {
                    println!(
                        "6. slow ended locally at once: {error} (after {:?})",
                        started.elapsed()
                    );
                    break 'outer;
                }
                Event::CallDone { call, result, .. } if call == slow => {
                    println!("6. slow completed: {}", result.json());
                    break 'outer;
                }
                _ => {}
            }
        }
    }
    // Give the server a moment to log that it stopped the cancelled work.
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        host.poll(Some(Duration::from_millis(20)))?;
    }
    let stderr = host.stderr_tail(server).unwrap_or_default();
    if let Some(line) = stderr.lines().find(|l| l.contains("cancelled")) {
        println!("7. the server says: {line}");
    }
    let stats = host.stats(server).expect("server exists");
    println!(
        "8. requests sent: {}, late replies dropped: {}",
        stats.requests_sent, stats.late_responses
    );
    host.close_server(server);
    println!("done: server closed");
    Ok(())
}
