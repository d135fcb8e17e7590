// tests/peers/setup.sh && cargo run --example server_requests -- target/peers/run-py-stdio.sh
//
//! Answering what a server asks: elicitation, roots and sampling. The host declares what it
//! answers (`Config::answers`, which mcpoll turns into the client capabilities), each request
//! arrives as `Event::ServerRequest`, and the host answers whenever it is ready with
//! `Host::answer`: at once here, after a user or a model in a real host. The same code serves a
//! 2025-11-25 server (JSON-RPC requests mid-call) and a 2026-07-28 one (`input_required`
//! rounds, which mcpoll retries with the answers).
//!
//! The server is the command line given (by default the Python SDK test peer, whose `ask`,
//! `roots` and `sample` tools ask the client). The `expect`s are for example code only.

use std::time::Duration;

use mcpoll::{
    elicitation_defaults, CallOptions, Config, Event, Host, ServerRequestKind, ServerRequestKinds,
    StdioCommand,
};
use serde_json::value::RawValue;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let program = args.first().map_or("target/peers/run-py-stdio.sh", String::as_str);
    let mut cmd = StdioCommand::new(program);
    for a in args.iter().skip(1) {
        cmd = cmd.arg(a);
    }
    let config = Config { answers: ServerRequestKinds::all(), ..Config::default() };
    let mut host = Host::new()?;
    let server = host.add_stdio_server(cmd, config)?;
    host.wait_ready(server, Duration::from_secs(20))?;
    println!("connected ({:?})", host.era(server));

    for tool in ["ask", "roots", "sample"] {
        let empty = RawValue::from_string("{}".into())?;
        let call = host.call_tool(server, tool, &empty, &CallOptions::default())?;
        'call: loop {
            host.poll(Some(Duration::from_millis(100)))?;
            let mut asked = Vec::new();
            while let Some((_, event)) = host.poll_event() {
                match event {
                    Event::ServerRequest { request, kind, params, .. } => {
                        asked.push((request, kind, params.to_owned()))
                    }
                    Event::CallDone { call: c, result, record } if c == call => {
                        println!("{tool}: {} ({} rounds)", result.json(), record.rounds);
                        break 'call;
                    }
                    Event::CallFailed { call: c, error, .. } if c == call => {
                        println!("{tool}: failed: {error}");
                        break 'call;
                    }
                    _ => {}
                }
            }
            for (request, kind, params) in asked {
                let answer = match kind {
                    // A real host shows the form; this one accepts every default.
                    ServerRequestKind::ElicitationForm => elicitation_defaults(&params)
                        .unwrap_or_else(|| r#"{"action":"decline"}"#.into()),
                    ServerRequestKind::Roots => r#"{"roots":[{"uri":"file:///tmp"}]}"#.into(),
                    ServerRequestKind::Sampling => r#"{"role":"assistant","model":"none",
                        "content":{"type":"text","text":"hello from the host"}}"#
                        .into(),
                    _ => r#"{"action":"decline"}"#.into(),
                };
                println!("  {} {params}\n  -> {answer}", kind.method());
                host.answer(server, request, &RawValue::from_string(answer)?)?;
            }
        }
    }
    host.close_server(server);
    Ok(())
}
