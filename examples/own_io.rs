// cargo run --example own_io
//
//! The sans-IO core with the program's own I/O: no `mio` and no `Host`. The program starts the
//! echo server with `std::process`, reads its stdout on a thread that hands each line over a
//! channel, and drives a `Client` itself, with the verbs a `Host` wraps: it writes what
//! `take_unflushed` names (each frame a line), gives each line it reads to `handle_message`,
//! waits on the channel no longer than `poll_timeout`, calls `handle_timeout` when that comes,
//! and drains `poll_event`. Time comes in as `now` on every verb.
//!
//! The server is `examples/echo_server.rs` (this executable run again with
//! `MCPOLL_OWN_IO_SERVE=1`). The `expect`s are for example code only.

#[path = "echo_server.rs"]
mod echo_server;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use mcpoll::{
    CacheConfig, CallOptions, Client, Config, Engine, Event, TransportEvent, TransportKind,
};

const SERVE: &str = "MCPOLL_OWN_IO_SERVE";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os(SERVE).is_some() {
        echo_server::main();
        return Ok(());
    }
    let mut child = Command::new(std::env::current_exe()?)
        .env(SERVE, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut to_server = child.stdin.take().expect("piped");
    let from_child = child.stdout.take().expect("piped");
    let (lines, from_server) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(from_child).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });

    let mut client = Client::new(CacheConfig::default())?;
    let now = Instant::now();
    let server = client.add_server(
        Engine::new(Config::default(), now)?,
        "echo_server",
        TransportKind::Stdio,
    );
    client.handle_transport(now, server, TransportEvent::opened());
    // Sent once the era probe has settled, like any call made before the server is ready.
    let text = r#"{"text":"hello from a loop of its own"}"#;
    let call = client.call_tool_json(now, server, "echo", text, &CallOptions::default())?;

    let mut frame = Vec::new();
    loop {
        // Everything the core has for the wire, one line per frame.
        while let Some(id) = client.take_unflushed() {
            let engine = client.engine_mut(id).expect("a server the core named");
            loop {
                frame.clear();
                if engine.poll_transmit(Instant::now(), &mut frame).is_none() {
                    break;
                }
                frame.push(b'\n');
                to_server.write_all(&frame)?;
            }
        }
        // A line from the server, or the core's next deadline, whichever comes first.
        let wait = client
            .poll_timeout()
            .map_or(Duration::from_secs(30), |due| due.saturating_duration_since(Instant::now()));
        match from_server.recv_timeout(wait) {
            Ok(line) => client.handle_message(Instant::now(), server, line.as_bytes()),
            Err(RecvTimeoutError::Timeout) => client.handle_timeout(Instant::now()),
            Err(RecvTimeoutError::Disconnected) => return Err("the server went away".into()),
        }
        while let Some((_, event)) = client.poll_event(Instant::now()) {
            match event {
                Event::CallDone { call: c, result, .. } if c == call => {
                    println!("{}", result.json());
                    drop(to_server);
                    child.wait()?;
                    return Ok(());
                }
                Event::CallFailed { call: c, error, .. } if c == call => {
                    return Err(format!("echo failed: {error}").into());
                }
                _ => {}
            }
        }
    }
}
