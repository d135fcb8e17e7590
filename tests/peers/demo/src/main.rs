// cargo run -p mcpoll-demo-server -- [FLAGS]
//
// The tests build and spawn it themselves (`tests/common/mod.rs`); run it by hand to watch it.
//
// FLAGS (all optional, for fault injection in tests):
//   --legacy-only             behave like an SDK v1 server: only `initialize`, no `server/discover`
//   --exit-on-non-initialize  exit with code 3 if the first message is not `initialize`
//   --silent-discover         never answer `server/discover`
//   --silent-list             never answer `tools/list`
//   --junk-stdout             print the non-JSON line `demo server starting` on stdout first
//   --stderr-noise KIB        write KIB KiB of filler text to stderr at startup
//   --crash-on TOOL           exit with code 7, without replying, when TOOL is called
//                             (the same as `--fault crash:TOOL`)
//   --startup-ms MS           sleep MS milliseconds before reading stdin (or listening)
//   --state-file PATH         load the delivery counts from PATH at startup and append one line
//                             per delivery to it (`TOOL`, or `charge<TAB>KEY` for a keyed charge)
//   --resilience-tools        list `stats`, `lookup`, `put` and `charge` in tools/list; they are
//                             callable without it, and --fault, --state-file and --http imply it
//   --schema-tools            list `bad_output` (structuredContent that breaks its outputSchema)
//                             and `remote_ref` (an inputSchema with a network $ref)
//   --bulk-tools N            tools/list serves N generated tools (`bulk_000000`...) instead,
//                             1,000 a page: a large listing for memory tests
//   --tasks                   the 2026-07-28 tasks extension on the tool `slow_task(ms)`
//                             (src/tasks.rs); off by default
//   --http PORT               serve Streamable HTTP at http://127.0.0.1:PORT/mcp instead of
//                             stdio (modern era only; PORT 0 picks a free port); the URL is
//                             printed on stdout
//   --fault SPEC              inject a fault; repeat the flag for several faults
//
// FAULT SPECS. A tool fault acts on `tools/call` of TOOL, after the call has been counted as a
// delivery. KIND:TOOL acts on every call; KIND:TOOL:N only on the first N calls of TOOL, counted
// across restarts when --state-file is given. Several faults on one call combine.
//   crash:TOOL                exit with code 7 mid-call, without replying (as --crash-on)
//   truncate:TOOL             write the first half of the reply, no newline, then exit with code 8
//   garbage:TOOL              write the non-JSON line `%%garbage%%`, then the reply
//   unknown-id:TOOL           write a copy of the reply with an id never sent, then the reply
//   duplicate:TOOL            write the reply twice
//   late-after-cancel:TOOL    ignore cancellation of TOOL (meant for `slow`) and reply when done
//   hang:TOOL                 run the tool but never reply
//   drip:TOOL                 write the reply one byte at a time, 5 ms apart
//   oversize:TOOL             reply with 20 MiB of text content
//   fail-first:TOOL:N         the first N calls exit with code 9 before the tool runs
//   exit-on-start             exit with code 5 at startup, before reading anything
// HTTP only (need --http):
//   reset-mid-sse:TOOL        start an event stream, send one progress event, drop the connection
//   status-then-ok:TOOL:N     the first N calls get 503 with an empty body, without running
//   close-before-reply:TOOL   close the connection without a response, without running the tool

//! mcpoll's demo MCP server: the home-made test peer of the integration tests, the `mcpoll`
//! CLI tests and the roundtrip bench. It is not part of the library and is never published.
//!
//! It speaks newline-delimited JSON-RPC 2.0 on stdin and stdout and serves both protocol eras.
//! The first request pins the era of the whole process, as the official Python SDK does:
//! `server/discover`, or any request whose `params._meta` carries
//! `io.modelcontextprotocol/protocolVersion`, makes it a modern (2026-07-28) server, and
//! anything else, normally `initialize`, makes it a legacy (2025-11-25) server.
//!
//! It serves the tools `echo`, `add`, `slow`, `fail` and `write_note`, the resource
//! `demo://readme`, the prompt `greet` and a fixed completion. `slow` runs on a timer in the main
//! loop, so the server keeps answering other requests while slow calls are in flight, and it
//! honours `notifications/cancelled`.
//!
//! For resilience tests it also serves `stats` (how many calls of each tool arrived), `lookup`
//! (read-only), `put` (idempotent) and `charge` (not idempotent, deduplicated by an optional
//! `idempotency_key`), and bends replies with `--fault` (see the list above). Those four tools
//! stay out of tools/list unless asked for, so the default listing is still the five above.
//!
//! Only JSON-RPC goes to stdout (one compact object per line, flushed each time) unless
//! `--junk-stdout` asks otherwise; diagnostics go to stderr. The process exits with code 0 when
//! stdin reaches EOF, dropping any slow calls still running.
//!
//! With `--http PORT` it serves Streamable HTTP on 127.0.0.1 instead, one thread per
//! connection, modern era only: JSON replies, or an event stream when the request's `_meta`
//! carries a `progressToken`. Dropping the connection (or `notifications/cancelled`) cancels a
//! slow call.
//!
//! This is test code: it favours clarity over throughput, and it uses a stdin reader thread,
//! which the library itself avoids.
//!
//! One module a job: `flags` (the command line), `faults` (the fault DSL and how it bends
//! replies), `jsonrpc` (messages in and out), `stdio` (the stdin reader and stdout writer),
//! `server` (the era, dispatch and the slow-call timers), `ledger` (the tools' memory and the
//! state file), `slow` (one `slow` call), `tools` and `content` (what it serves), and `http`
//! (Streamable HTTP, with `http::wire` for the HTTP/1.1 framing).

mod content;
mod faults;
mod flags;
mod http;
mod jsonrpc;
mod ledger;
mod server;
mod slow;
mod stdio;
mod tasks;
mod tools;

use std::process;

use crate::flags::{run_startup_faults, usage, FlagError, Flags};
use crate::http::serve_http;
use crate::server::Server;
use crate::stdio::spawn_stdin_reader;

pub(crate) const MODERN_VERSION: &str = "2026-07-28";
pub(crate) const LEGACY_VERSION: &str = "2025-11-25";
pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub(crate) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub(crate) const SERVER_NAME: &str = "mcpoll-demo";
pub(crate) const SERVER_VERSION: &str = "0.1.0";

/// I/O the server cannot do without: the state file, the listening socket, stdout.
pub(crate) const EXIT_IO: i32 = 1;
const EXIT_USAGE: i32 = 2;
pub(crate) const EXIT_NOT_INITIALIZE: i32 = 3;
const EXIT_ON_START: i32 = 5;
pub(crate) const EXIT_CRASH_ON: i32 = 7;
pub(crate) const EXIT_TRUNCATE: i32 = 8;
pub(crate) const EXIT_FAIL_FIRST: i32 = 9;

fn main() {
    let flags = match Flags::parse(std::env::args().skip(1)) {
        Ok(flags) => flags,
        Err(FlagError::Help) => {
            eprintln!("{}", usage());
            return;
        }
        Err(FlagError::Bad(message)) => {
            eprintln!("demo_server: {message}\n{}", usage());
            process::exit(EXIT_USAGE);
        }
    };
    if flags.exit_on_start {
        eprintln!("[fault] exit-on-start: exiting with code {EXIT_ON_START}");
        process::exit(EXIT_ON_START);
    }
    run_startup_faults(&flags);
    let http_port = flags.http_port;
    let mut server = match Server::new(flags) {
        Ok(server) => server,
        Err(message) => {
            eprintln!("demo_server: {message}");
            process::exit(EXIT_IO);
        }
    };
    if let Some(port) = http_port {
        serve_http(server, port);
        return;
    }
    let lines = spawn_stdin_reader();
    eprintln!("[demo] {SERVER_NAME} {SERVER_VERSION} reading stdin");
    server.run(&lines);
    eprintln!("[demo] stdin closed; exiting");
}
