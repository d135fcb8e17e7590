// cargo run --example foreign_loop
//
//! mcpoll inside a loop it does not own: the program has its own `mio::Poll` and serves a UDP
//! echo socket on 127.0.0.1 with it, and the MCP host registers its server's pipes on that
//! same poll, in a token range the program gives it (`Host::embedded`). Each turn the program
//! waits for its own deadline or the host's (`poll_timeout`), forwards the events whose token
//! is in the host's range (`handle_event`), serves its own, and ticks the host when it is
//! due (`handle_timeout`). Meanwhile it calls two tools on the echo server and sends itself
//! datagrams, one per turn, from a second UDP socket.
//!
//! The server is `examples/echo_server.rs` (this executable run again with
//! `MCPOLL_FOREIGN_LOOP_SERVE=1`). The `expect`s and `unwrap`s are for example code only.

#[path = "echo_server.rs"]
mod echo_server;

use std::io;
use std::time::{Duration, Instant};

use mcpoll::{CallOptions, Config, Event, Host, StdioCommand};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use serde_json::value::RawValue;

const SERVE: &str = "MCPOLL_FOREIGN_LOOP_SERVE";
/// The program's own tokens.
const ECHO: Token = Token(0);
const PINGER: Token = Token(1);
/// The host's: room for a few stdio servers, none of the program's tokens.
const MCP_TOKENS: std::ops::Range<usize> = 1_000..1_000 + 4 * Host::STDIO_SERVER_TOKENS;
/// The program's own deadline: it wakes at least this often whatever the host needs.
const FRAME: Duration = Duration::from_millis(50);
const PINGS: usize = 10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os(SERVE).is_some() {
        echo_server::main();
        return Ok(());
    }
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(64);
    let mut echo = UdpSocket::bind("127.0.0.1:0".parse()?)?;
    let mut pinger = UdpSocket::bind("127.0.0.1:0".parse()?)?;
    let echo_addr = echo.local_addr()?;
    poll.registry().register(&mut echo, ECHO, Interest::READABLE)?;
    poll.registry().register(&mut pinger, PINGER, Interest::READABLE)?;
    println!("UDP echo on {echo_addr} (try: nc -u {} {})", echo_addr.ip(), echo_addr.port());

    let mut host = Host::embedded(poll.registry(), MCP_TOKENS)?;
    let server = host.add_stdio_server(
        StdioCommand::new(std::env::current_exe()?).env(SERVE, "1"),
        Config::default(),
    )?;
    println!("MCP server started; the host's tokens are {:?}", host.token_range());
    // Made at once: the calls wait in the engine until the server is ready.
    let args = RawValue::from_string(r#"{"text":"hello from a foreign loop"}"#.into())?;
    let echo_call = host.call_tool(server, "echo", &args, &CallOptions::default())?;
    let args = RawValue::from_string(r#"{"a":20,"b":22}"#.into())?;
    let add_call = host.call_tool(server, "add", &args, &CallOptions::default())?;

    let mut calls_left = 2;
    let (mut sent, mut echoed, mut returned) = (0usize, 0usize, 0usize);
    let mut buf = [0u8; 1500];
    let started = Instant::now();
    while calls_left > 0 || returned < PINGS {
        assert!(started.elapsed() < Duration::from_secs(30), "the demo took too long");
        if sent < PINGS {
            pinger.send_to(format!("ping {sent}").as_bytes(), echo_addr)?;
            sent += 1;
        }
        // Wait for the program's next frame, or sooner when the host is due.
        let now = Instant::now();
        let wait =
            host.poll_timeout().map_or(FRAME, |t| t.saturating_duration_since(now).min(FRAME));
        match poll.poll(&mut events, Some(wait)) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => other?,
        }
        // One clock read per wake-up, for everything the host does in this turn.
        let now = Instant::now();
        for event in events.iter() {
            match event.token() {
                t if host.owns_token(t) => host.handle_event(event, now)?,
                ECHO => loop {
                    match echo.recv_from(&mut buf) {
                        Ok((n, from)) => {
                            echo.send_to(&buf[..n], from)?;
                            echoed += 1;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e.into()),
                    }
                },
                PINGER => loop {
                    match pinger.recv(&mut buf) {
                        Ok(n) => {
                            returned += 1;
                            println!("udp: {}", String::from_utf8_lossy(&buf[..n]));
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e.into()),
                    }
                },
                _ => {} // unknown tokens are ignored, as mio asks
            }
        }
        if host.poll_timeout().is_some_and(|t| t <= now) {
            host.handle_timeout(now);
        }
        while let Some((_, event)) = host.poll_event() {
            match event {
                Event::Ready { era, version } => println!("mcp: ready ({era:?}, {version})"),
                Event::CallDone { call, result, .. } if call == echo_call || call == add_call => {
                    calls_left -= 1;
                    let name = if call == echo_call { "echo" } else { "add" };
                    println!("mcp: {name} -> {}", result.json());
                }
                Event::CallFailed { call, error, .. } if call == echo_call || call == add_call => {
                    return Err(format!("call failed: {error}").into());
                }
                _ => {}
            }
        }
    }
    println!(
        "done in {:?}: 2 tool calls, {echoed} datagrams echoed, {returned} returned",
        started.elapsed()
    );
    host.close_server(server);
    Ok(())
}
