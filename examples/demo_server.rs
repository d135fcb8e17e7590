// cargo run --example demo_server [-- FLAGS]
//
// FLAGS (all optional, for fault injection in tests):
//   --legacy-only             behave like an SDK v1 server: only `initialize`, no `server/discover`
//   --exit-on-non-initialize  exit with code 3 if the first message is not `initialize`
//   --silent-discover         never answer `server/discover`
//   --junk-stdout             print the non-JSON line `demo server starting` on stdout first
//   --stderr-noise KIB        write KIB KiB of filler text to stderr at startup
//   --crash-on TOOL           exit with code 7, without replying, when TOOL is called
//                             (the same as `--fault crash:TOOL`)
//   --startup-ms MS           sleep MS milliseconds before reading stdin (or listening)
//   --state-file PATH         load the delivery counts from PATH at startup and append one line
//                             per delivery to it (`TOOL`, or `charge<TAB>KEY` for a keyed charge)
//   --resilience-tools        list `stats`, `lookup`, `put` and `charge` in tools/list; they are
//                             callable without it, and --fault, --state-file and --http imply it
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

//! mcpoll's demo MCP server, used by the quickstart example and the integration tests.
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
//! This is example code: it favours clarity over throughput, and it uses a stdin reader thread,
//! which the library itself avoids.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;
use serde_json::{Map, Value};

const MODERN_VERSION: &str = "2026-07-28";
const LEGACY_VERSION: &str = "2025-11-25";
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
const SERVER_NAME: &str = "mcpoll-demo";
const SERVER_VERSION: &str = "0.1.0";

const README_URI: &str = "demo://readme";
const README_TEXT: &str = "mcpoll demo server";
const JUNK_BANNER: &str = "demo server starting";

/// Items per page for every list method; small so that tests exercise pagination.
const PAGE_SIZE: usize = 2;
const PROGRESS_INTERVAL_MS: u64 = 100;
/// Upper bound for `slow(ms)`, so `Instant + ms` can never overflow.
const SLOW_MAX_MS: u64 = 3_600_000;

/// Every tool `tools/call` serves, listed or not; only these are counted as deliveries.
const TOOL_NAMES: [&str; 9] =
    ["echo", "add", "slow", "fail", "write_note", "stats", "lookup", "put", "charge"];

const GARBAGE_LINE: &str = "%%garbage%%";
/// The id of the `unknown-id` stray reply: the largest integer JSON carries exactly, which no
/// client numbering its requests will reach in a test.
const NEVER_SENT_ID: u64 = 9_007_199_254_740_991;
const OVERSIZE_BYTES: usize = 20 << 20;
const DRIP_GAP: Duration = Duration::from_millis(5);

const MCP_PATH: &str = "/mcp";
/// How often a slow HTTP call looks for its cancellation while it waits.
const CANCEL_POLL: Duration = Duration::from_millis(20);
const MAX_HEAD_LINE: u64 = 16 * 1024;
const MAX_HEADERS: usize = 100;
const MAX_BODY: usize = 64 << 20;
const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                        Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
/// The last chunk of a chunked body: the event stream ends, the connection stays open.
const SSE_END: &[u8] = b"0\r\n\r\n";

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// I/O the server cannot do without: the state file, the listening socket, stdout.
const EXIT_IO: i32 = 1;
const EXIT_USAGE: i32 = 2;
const EXIT_NOT_INITIALIZE: i32 = 3;
const EXIT_ON_START: i32 = 5;
const EXIT_CRASH_ON: i32 = 7;
const EXIT_TRUNCATE: i32 = 8;
const EXIT_FAIL_FIRST: i32 = 9;

pub fn main() {
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

// ---------------------------------------------------------------------------------------------
// Command line

/// Fault-injection switches; see the comment at the top of the file.
#[derive(Debug, Default)]
struct Flags {
    legacy_only: bool,
    exit_on_non_initialize: bool,
    silent_discover: bool,
    junk_stdout: bool,
    stderr_noise_kib: u64,
    startup_ms: u64,
    /// Every tool fault, `--crash-on TOOL` included (as `crash:TOOL`).
    faults: Vec<Fault>,
    exit_on_start: bool,
    state_file: Option<PathBuf>,
    http_port: Option<u16>,
    /// Whether tools/list shows the resilience tools. Off by default: the integration tests
    /// pin the default listing to five tools.
    resilience_tools: bool,
}

#[derive(Debug)]
enum FlagError {
    Help,
    Bad(String),
}

impl Flags {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Flags, FlagError> {
        let mut flags = Flags::default();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--legacy-only" => flags.legacy_only = true,
                "--exit-on-non-initialize" => flags.exit_on_non_initialize = true,
                "--silent-discover" => flags.silent_discover = true,
                "--junk-stdout" => flags.junk_stdout = true,
                "--stderr-noise" => flags.stderr_noise_kib = number_arg(&arg, args.next())?,
                "--crash-on" => {
                    let tool = value_arg(&arg, args.next())?;
                    flags.faults.push(Fault { kind: FaultKind::Crash, tool, limit: None });
                }
                "--startup-ms" => flags.startup_ms = number_arg(&arg, args.next())?,
                "--fault" => {
                    let fault = parse_fault(&value_arg(&arg, args.next())?)?;
                    if fault.kind == FaultKind::ExitOnStart {
                        flags.exit_on_start = true;
                    } else {
                        flags.faults.push(fault);
                    }
                    flags.resilience_tools = true;
                }
                "--state-file" => {
                    flags.state_file = Some(PathBuf::from(value_arg(&arg, args.next())?));
                    flags.resilience_tools = true;
                }
                "--http" => {
                    flags.http_port = Some(port_arg(&arg, args.next())?);
                    flags.resilience_tools = true;
                }
                "--resilience-tools" => flags.resilience_tools = true,
                "-h" | "--help" => return Err(FlagError::Help),
                other => return Err(FlagError::Bad(format!("unknown flag `{other}`"))),
            }
        }
        flags.check()?;
        Ok(flags)
    }

    /// Refuses combinations that cannot mean anything, rather than ignoring a flag silently.
    fn check(&self) -> Result<(), FlagError> {
        if self.http_port.is_some() {
            if self.legacy_only || self.exit_on_non_initialize {
                return Err(FlagError::Bad(
                    "--http serves the modern era only: no --legacy-only or \
                     --exit-on-non-initialize"
                        .into(),
                ));
            }
        } else if let Some(fault) = self.faults.iter().find(|f| f.kind.http_only()) {
            return Err(FlagError::Bad(format!("`--fault {}` needs --http", fault.kind.name())));
        }
        Ok(())
    }

    /// The faults that act on this call: those naming `tool` whose count, if any, has not run
    /// out. `calls` is how many calls of `tool` have arrived, this one included.
    fn armed_faults(&self, tool: &str, calls: u64) -> Armed {
        let mut armed = Armed::default();
        for fault in &self.faults {
            if fault.tool == tool && fault.limit.is_none_or(|n| calls <= n) {
                armed.add(fault.kind);
            }
        }
        armed
    }
}

fn value_arg(flag: &str, value: Option<String>) -> Result<String, FlagError> {
    value.ok_or_else(|| FlagError::Bad(format!("`{flag}` needs a value")))
}

fn number_arg(flag: &str, value: Option<String>) -> Result<u64, FlagError> {
    let value = value_arg(flag, value)?;
    value.parse().map_err(|_| {
        FlagError::Bad(format!("`{flag}` needs a non-negative integer, got `{value}`"))
    })
}

fn port_arg(flag: &str, value: Option<String>) -> Result<u16, FlagError> {
    let value = value_arg(flag, value)?;
    value.parse().map_err(|_| FlagError::Bad(format!("`{flag}` needs a port, got `{value}`")))
}

fn usage() -> &'static str {
    "usage: demo_server [--legacy-only] [--exit-on-non-initialize] [--silent-discover] \
     [--junk-stdout] [--stderr-noise KIB] [--crash-on TOOL] [--startup-ms MS] \
     [--state-file PATH] [--resilience-tools] [--http PORT] [--fault SPEC]...\n\
     fault specs: crash|truncate|garbage|unknown-id|duplicate|late-after-cancel|hang|drip|\
     oversize:TOOL[:N], fail-first:TOOL:N, exit-on-start, and with --http also \
     reset-mid-sse|close-before-reply:TOOL[:N], status-then-ok:TOOL:N"
}

/// Applies the faults that happen before the first byte of stdin is read.
fn run_startup_faults(flags: &Flags) {
    if flags.junk_stdout {
        let mut stdout = io::stdout().lock();
        // Ignoring errors: if stdout is already gone, the first real reply reports it.
        let _ = writeln!(stdout, "{JUNK_BANNER}").and_then(|()| stdout.flush());
    }
    if flags.stderr_noise_kib > 0 {
        write_stderr_noise(flags.stderr_noise_kib);
    }
    if flags.startup_ms > 0 {
        thread::sleep(Duration::from_millis(flags.startup_ms));
    }
}

/// Writes `kib` KiB of filler lines to stderr. A client that never drains the child's stderr
/// makes this block once the pipe buffer (often 64 KiB) is full, which is what tests look for.
fn write_stderr_noise(kib: u64) {
    let mut stderr = io::stderr().lock();
    for n in 0..kib * 16 {
        // 64 bytes per line, 16 lines per KiB.
        if writeln!(stderr, "[noise] filler line {n:>12} {:.<30}", "").is_err() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Faults

/// What a `--fault` does; see the comment at the top of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FaultKind {
    Crash,
    Truncate,
    Garbage,
    UnknownId,
    Duplicate,
    LateAfterCancel,
    Hang,
    Drip,
    Oversize,
    FailFirst,
    ExitOnStart,
    ResetMidSse,
    StatusThenOk,
    CloseBeforeReply,
}

/// The spelling of each kind on the command line.
const FAULT_NAMES: [(&str, FaultKind); 14] = [
    ("crash", FaultKind::Crash),
    ("truncate", FaultKind::Truncate),
    ("garbage", FaultKind::Garbage),
    ("unknown-id", FaultKind::UnknownId),
    ("duplicate", FaultKind::Duplicate),
    ("late-after-cancel", FaultKind::LateAfterCancel),
    ("hang", FaultKind::Hang),
    ("drip", FaultKind::Drip),
    ("oversize", FaultKind::Oversize),
    ("fail-first", FaultKind::FailFirst),
    ("exit-on-start", FaultKind::ExitOnStart),
    ("reset-mid-sse", FaultKind::ResetMidSse),
    ("status-then-ok", FaultKind::StatusThenOk),
    ("close-before-reply", FaultKind::CloseBeforeReply),
];

impl FaultKind {
    fn from_name(name: &str) -> Option<FaultKind> {
        FAULT_NAMES.iter().find(|(n, _)| *n == name).map(|&(_, kind)| kind)
    }

    fn name(self) -> &'static str {
        FAULT_NAMES.iter().find(|(_, k)| *k == self).map_or("?", |&(name, _)| name)
    }

    /// Faults that only an HTTP exchange can show.
    fn http_only(self) -> bool {
        matches!(
            self,
            FaultKind::ResetMidSse | FaultKind::StatusThenOk | FaultKind::CloseBeforeReply
        )
    }

    /// Faults that mean nothing without "the first N calls".
    fn needs_count(self) -> bool {
        matches!(self, FaultKind::FailFirst | FaultKind::StatusThenOk)
    }

    fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// One `--fault KIND:TOOL[:N]`.
#[derive(Debug)]
struct Fault {
    kind: FaultKind,
    tool: String,
    /// Act only on the first N calls of `tool`; `None` is every call.
    limit: Option<u64>,
}

fn parse_fault(spec: &str) -> Result<Fault, FlagError> {
    let bad = |why: &str| FlagError::Bad(format!("`--fault {spec}`: {why}"));
    let mut parts = spec.split(':');
    let kind = parts.next().and_then(FaultKind::from_name).ok_or_else(|| bad("unknown kind"))?;
    let tool = parts.next().unwrap_or("").to_owned();
    let limit = match parts.next() {
        None => None,
        Some(n) => Some(n.parse::<u64>().map_err(|_| bad("N must be a non-negative integer"))?),
    };
    if parts.next().is_some() {
        return Err(bad("too many `:` parts"));
    }
    match (kind, tool.is_empty()) {
        (FaultKind::ExitOnStart, false) => return Err(bad("exit-on-start takes no tool")),
        (FaultKind::ExitOnStart, true) => {}
        (_, true) => return Err(bad("needs a tool, as KIND:TOOL")),
        (_, false) if kind.needs_count() && limit.is_none() => {
            return Err(bad("needs a count, as KIND:TOOL:N"));
        }
        _ => {}
    }
    Ok(Fault { kind, tool, limit })
}

/// The set of faults armed for one `tools/call`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Armed(u32);

impl Armed {
    fn add(&mut self, kind: FaultKind) {
        self.0 |= kind.bit();
    }

    fn has(self, kind: FaultKind) -> bool {
        self.0 & kind.bit() != 0
    }

    fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The armed kinds by name, for the log.
    fn names(self) -> Vec<&'static str> {
        FAULT_NAMES.iter().filter(|(_, kind)| self.has(*kind)).map(|(name, _)| *name).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Input

/// Reads stdin line by line on its own thread, so the main loop can wait on "next line or next
/// timer" with `recv_timeout`. EOF (or a read error) drops the sender, which the main loop sees
/// as `Disconnected`.
fn spawn_stdin_reader() -> Receiver<Vec<u8>> {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) => {
                    if sender.send(line).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    eprintln!("[demo] stdin read error: {e}");
                    return;
                }
            }
        }
    });
    receiver
}

/// One well-formed JSON-RPC message from the client.
enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// A response; this server never sends requests, so it is only logged.
    Response,
}

/// Sorts a parsed JSON value into a message kind. `Err` carries the id to answer with (null
/// when it could not be read) and the error.
fn classify(message: Value) -> Result<Incoming, (Value, RpcError)> {
    let Value::Object(mut object) = message else {
        return Err((Value::Null, RpcError::invalid_request("a message must be a JSON object")));
    };
    let id = match object.remove("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id),
        Some(_) => {
            return Err((Value::Null, RpcError::invalid_request("id must be a string or number")));
        }
    };
    let reply_id = id.clone().unwrap_or(Value::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((reply_id, RpcError::invalid_request("jsonrpc must be \"2.0\"")));
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) => method,
        None if object.contains_key("result") || object.contains_key("error") => {
            return Ok(Incoming::Response);
        }
        _ => {
            return Err((reply_id, RpcError::invalid_request("method must be a string")));
        }
    };
    let params = match object.remove("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(params @ Value::Object(_)) => params,
        Some(_) => {
            return Err((reply_id, RpcError::invalid_params("params must be an object")));
        }
    };
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

// ---------------------------------------------------------------------------------------------
// Output

/// Writes JSON-RPC messages to stdout, one compact object per line, flushed after each.
struct Output {
    stdout: io::Stdout,
}

impl Output {
    fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let mut stdout = self.stdout.lock();
        if let Err(e) = stdout.write_all(line.as_bytes()).and_then(|()| stdout.flush()) {
            stdout_gone(&e);
        }
    }

    /// Sends a `tools/call` reply bent by the faults armed for it.
    fn send_faulty(&mut self, message: &Value, armed: Armed) {
        let frames = reply_frames(message, armed);
        if frames.is_empty() {
            eprintln!("[fault] hang: never replying to id={}", message["id"]);
            return;
        }
        let lines: Vec<Vec<u8>> = frames
            .into_iter()
            .map(|frame| {
                let mut line = frame.into_bytes();
                line.push(b'\n');
                line
            })
            .collect();
        let lines: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
        if let Err(e) = emit(&mut self.stdout.lock(), b"", &lines, b"", armed) {
            stdout_gone(&e);
        }
    }
}

fn stdout_gone(e: &io::Error) -> ! {
    // The client closed our stdout; nobody can hear us any more.
    eprintln!("[demo] stdout write failed: {e}; exiting");
    process::exit(EXIT_IO);
}

/// The messages that carry one `tools/call` reply once its faults have bent it, in order: the
/// `garbage` line, the `unknown-id` stray copy, the reply itself (with 20 MiB of text for
/// `oversize`), and the `duplicate`. Empty for `hang`. Both transports send these frames.
fn reply_frames(message: &Value, armed: Armed) -> Vec<String> {
    if armed.has(FaultKind::Hang) {
        return Vec::new();
    }
    let mut frames = Vec::new();
    if armed.has(FaultKind::Garbage) {
        frames.push(GARBAGE_LINE.to_owned());
    }
    if armed.has(FaultKind::UnknownId) {
        let mut stray = message.clone();
        stray["id"] = json!(NEVER_SENT_ID);
        frames.push(stray.to_string());
    }
    let reply = if armed.has(FaultKind::Oversize) {
        let mut big = message.clone();
        big["result"]["content"] = json!([{"type": "text", "text": "x".repeat(OVERSIZE_BYTES)}]);
        big.to_string()
    } else {
        message.to_string()
    };
    if armed.has(FaultKind::Duplicate) {
        frames.push(reply.clone());
    }
    frames.push(reply);
    frames
}

/// Writes a reply's bytes (`head`, then each frame, then `tail`) as its faults say: `drip`
/// writes one byte every 5 ms, and `truncate` stops halfway through the last frame, so the
/// client holds a partial message, and exits with code 8.
fn emit(
    w: &mut impl Write,
    head: &[u8],
    frames: &[&[u8]],
    tail: &[u8],
    armed: Armed,
) -> io::Result<()> {
    let drip = armed.has(FaultKind::Drip);
    put(w, head, drip)?;
    for (i, frame) in frames.iter().enumerate() {
        if i + 1 == frames.len() && armed.has(FaultKind::Truncate) {
            put(w, &frame[..frame.len() / 2], drip)?;
            w.flush()?;
            eprintln!("[fault] truncate: reply cut in half; exiting with code {EXIT_TRUNCATE}");
            process::exit(EXIT_TRUNCATE);
        }
        put(w, frame, drip)?;
    }
    put(w, tail, drip)?;
    w.flush()
}

fn put(w: &mut impl Write, bytes: &[u8], drip: bool) -> io::Result<()> {
    if !drip {
        return w.write_all(bytes);
    }
    for byte in bytes {
        w.write_all(std::slice::from_ref(byte))?;
        w.flush()?;
        thread::sleep(DRIP_GAP);
    }
    Ok(())
}

fn error_message(id: &Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()})
}

/// Builds a response, adding the modern result envelope (§2.2 of the wire digest) when the
/// process serves 2026-07-28. Legacy results go out exactly as the handler built them.
fn result_message(id: &Value, era: Era, method: &str, mut body: Value) -> Value {
    if let (Era::Modern, Value::Object(result)) = (era, &mut body) {
        result.insert("resultType".into(), json!("complete"));
        if is_cacheable(method) {
            result.insert("ttlMs".into(), json!(0));
            result.insert("cacheScope".into(), json!("private"));
        }
        result.insert("_meta".into(), json!({ META_SERVER_INFO: server_info() }));
    }
    json!({"jsonrpc": "2.0", "id": id, "result": body})
}

/// Methods whose modern results must carry `ttlMs` and `cacheScope`.
fn is_cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "prompts/list"
    )
}

/// A JSON-RPC error object.
#[derive(Debug)]
struct RpcError {
    code: i64,
    message: String,
    data: Option<Value>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into(), data: None }
    }

    fn invalid_request(message: &str) -> RpcError {
        RpcError::new(INVALID_REQUEST, message)
    }

    fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    fn method_not_found(method: &str) -> RpcError {
        RpcError::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    fn unsupported_version(requested: &str) -> RpcError {
        RpcError {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "Unsupported protocol version".into(),
            data: Some(json!({"supported": [MODERN_VERSION], "requested": requested})),
        }
    }

    fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

// ---------------------------------------------------------------------------------------------
// Server state and dispatch

/// The protocol era this process serves, fixed by the first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    /// 2025-11-25: `initialize` handshake, no result envelope.
    Legacy,
    /// 2026-07-28: `_meta` envelope on every request and result.
    Modern,
}

/// What a request handler produced.
enum Outcome {
    /// A result body, sent at once (with the era's envelope added).
    Reply(Value),
    /// A `tools/call` result, sent at once but bent by the faults armed for the call.
    ToolReply(Value, Armed),
    /// A `slow` call: the transport runs its timer and sends the reply later, unless it is
    /// cancelled.
    Slow(SlowCall),
    /// An HTTP fault answers instead of the tool, which did not run.
    Withheld(Armed),
}

/// All state of the demo server: the pinned era, the tools' memory and the running slow calls.
/// Over HTTP one `Server` behind a mutex serves every connection.
struct Server {
    flags: Flags,
    out: Output,
    era: Option<Era>,
    seen_first_message: bool,
    /// Legacy only: whether `notifications/initialized` has arrived. Requests before it are
    /// still served (as most SDK servers do), but logged, since a client should not send them.
    initialized: bool,
    ledger: Ledger,
    slow_calls: Vec<SlowCall>,
}

impl Server {
    fn new(flags: Flags) -> Result<Server, String> {
        // An SDK v1 server has no modern mode at all, so there is nothing left to pin; HTTP is
        // served in the modern era only.
        let era = if flags.http_port.is_some() {
            Some(Era::Modern)
        } else {
            flags.legacy_only.then_some(Era::Legacy)
        };
        let ledger = Ledger::open(flags.state_file.as_deref())?;
        Ok(Server {
            flags,
            out: Output { stdout: io::stdout() },
            era,
            seen_first_message: false,
            initialized: false,
            ledger,
            slow_calls: Vec::new(),
        })
    }

    /// Serves until stdin closes. Waits for the next line or the next slow-call deadline,
    /// whichever comes first, so slow calls never block other requests.
    fn run(&mut self, lines: &Receiver<Vec<u8>>) {
        loop {
            let next = match self.next_deadline() {
                Some(deadline) => {
                    lines.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                }
                None => lines.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match next {
                Ok(line) => self.handle_line(&line),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.fire_due_timers(Instant::now());
        }
        if !self.slow_calls.is_empty() {
            eprintln!("[demo] dropping {} unfinished slow call(s)", self.slow_calls.len());
        }
    }

    fn handle_line(&mut self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let parsed = serde_json::from_slice::<Value>(line);
        if !self.seen_first_message {
            self.seen_first_message = true;
            self.check_first_message(parsed.as_ref().ok());
        }
        let message = match parsed {
            Ok(message) => message,
            Err(e) => {
                let error = RpcError::new(PARSE_ERROR, format!("Parse error: {e}"));
                self.out.send(&error_message(&Value::Null, &error));
                return;
            }
        };
        match classify(message) {
            Ok(Incoming::Request { id, method, params }) => {
                self.handle_request(&id, &method, &params);
            }
            Ok(Incoming::Notification { method, params }) => {
                self.handle_notification(&method, &params);
            }
            Ok(Incoming::Response) => eprintln!("[demo] ignoring a response; I send no requests"),
            Err((id, error)) => self.out.send(&error_message(&id, &error)),
        }
    }

    /// `--exit-on-non-initialize`: some old rmcp servers die unless the very first message is
    /// `initialize`, which is what a modern client's `server/discover` probe runs into.
    fn check_first_message(&self, message: Option<&Value>) {
        let is_initialize = message.is_some_and(|m| {
            m.get("method").and_then(Value::as_str) == Some("initialize") && m.get("id").is_some()
        });
        if self.flags.exit_on_non_initialize && !is_initialize {
            eprintln!("[demo] expect initialized request; first message was something else");
            process::exit(EXIT_NOT_INITIALIZE);
        }
    }

    fn handle_request(&mut self, id: &Value, method: &str, params: &Value) {
        if self.flags.silent_discover && method == "server/discover" {
            // Ignored entirely, and it does not pin the era either.
            eprintln!("[demo] --silent-discover: not answering server/discover id={id}");
            return;
        }
        let era = self.pin_era(method, params);
        let outcome = match era {
            Era::Modern => self.modern_request(id, method, params),
            Era::Legacy => self.legacy_request(id, method, params),
        };
        match outcome {
            Ok(Outcome::Reply(body)) => self.out.send(&result_message(id, era, method, body)),
            Ok(Outcome::ToolReply(body, armed)) => {
                self.out.send_faulty(&result_message(id, era, method, body), armed);
            }
            Ok(Outcome::Slow(call)) => self.slow_calls.push(call),
            // Only HTTP-only faults withhold a reply, and `Flags::check` keeps them off stdio.
            Ok(Outcome::Withheld(_)) => {}
            Err(error) => self.out.send(&error_message(id, &error)),
        }
    }

    /// Returns the era, fixing it on the first request.
    fn pin_era(&mut self, method: &str, params: &Value) -> Era {
        if let Some(era) = self.era {
            return era;
        }
        let era = if method == "server/discover" || meta(params, META_PROTOCOL_VERSION).is_some() {
            Era::Modern
        } else {
            Era::Legacy
        };
        eprintln!("[demo] era pinned to {era:?} by `{method}`");
        self.era = Some(era);
        era
    }

    fn modern_request(
        &mut self,
        id: &Value,
        method: &str,
        params: &Value,
    ) -> Result<Outcome, RpcError> {
        if method == "initialize" {
            // The handshake does not exist in 2026-07-28; answer as the spec's version error so
            // the client sees which version this process speaks.
            let requested = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
            return Err(RpcError::unsupported_version(requested));
        }
        check_modern_envelope(params)?;
        match method {
            "server/discover" => Ok(Outcome::Reply(discover_result())),
            _ => self.feature_request(id, method, params, Era::Modern),
        }
    }

    fn legacy_request(
        &mut self,
        id: &Value,
        method: &str,
        params: &Value,
    ) -> Result<Outcome, RpcError> {
        if !self.initialized && !matches!(method, "initialize" | "ping") {
            eprintln!("[demo] `{method}` before notifications/initialized; serving it anyway");
        }
        match method {
            "initialize" => Ok(Outcome::Reply(initialize_result())),
            "ping" => Ok(Outcome::Reply(json!({}))),
            // `server/discover` is not special here: it falls through to "Method not found".
            _ => self.feature_request(id, method, params, Era::Legacy),
        }
    }

    /// Methods that look the same in both eras, apart from the result envelope.
    fn feature_request(
        &mut self,
        id: &Value,
        method: &str,
        params: &Value,
        era: Era,
    ) -> Result<Outcome, RpcError> {
        let reply = match method {
            "tools/list" => {
                list_page("tools", &tool_definitions(self.flags.resilience_tools), params)?
            }
            "tools/call" => return self.call_tool(id, params, era),
            "resources/list" => list_page("resources", &resource_definitions(), params)?,
            "resources/templates/list" => list_page("resourceTemplates", &[], params)?,
            "resources/read" => read_resource(params)?,
            "prompts/list" => list_page("prompts", &prompt_definitions(), params)?,
            "prompts/get" => get_prompt(params)?,
            "completion/complete" => {
                json!({"completion": {"values": ["alpha", "beta"], "total": 2, "hasMore": false}})
            }
            _ => return Err(RpcError::method_not_found(method)),
        };
        Ok(Outcome::Reply(reply))
    }

    fn handle_notification(&mut self, method: &str, params: &Value) {
        match method {
            "notifications/initialized" => self.initialized = true,
            "notifications/cancelled" => match params.get("requestId") {
                Some(request_id) => self.cancel_slow_call(request_id),
                None => eprintln!("[demo] notifications/cancelled without requestId"),
            },
            _ => eprintln!("[demo] ignoring notification {method}"),
        }
    }

    // --- tools ---------------------------------------------------------------------------------

    fn call_tool(&mut self, id: &Value, params: &Value, era: Era) -> Result<Outcome, RpcError> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("tools/call needs a string `name`"))?;
        // Counted before any fault acts, so a test can tell "never delivered" from "delivered,
        // then lost".
        let calls = self.count_delivery(name, params);
        let armed = self.flags.armed_faults(name, calls);
        if !armed.is_empty() {
            eprintln!("[fault] {} on {name} (call {calls}) id={id}", armed.names().join("+"));
        }
        if armed.has(FaultKind::Crash) {
            eprintln!("[fault] crash on {name}: exiting with code {EXIT_CRASH_ON}");
            process::exit(EXIT_CRASH_ON);
        }
        if armed.has(FaultKind::FailFirst) {
            eprintln!("[fault] fail-first on {name}: exiting with code {EXIT_FAIL_FIRST}");
            process::exit(EXIT_FAIL_FIRST);
        }
        if armed.has(FaultKind::StatusThenOk) || armed.has(FaultKind::CloseBeforeReply) {
            return Ok(Outcome::Withheld(armed));
        }
        let empty = Map::new();
        let args = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(args)) => args,
            Some(_) => return Err(RpcError::invalid_params("`arguments` must be an object")),
        };
        let result = match name {
            "echo" => echo_tool(args),
            "add" => add_tool(args),
            "slow" => return Ok(start_slow_call(id, params, args, era, armed)),
            "fail" => tool_error("this tool always fails"),
            "write_note" => self.ledger.write_note(args),
            "stats" => self.ledger.stats(),
            "lookup" => lookup_tool(args),
            "put" => self.ledger.put(args),
            "charge" => self.ledger.charge(args),
            _ => return Err(RpcError::invalid_params(format!("unknown tool: {name}"))),
        };
        Ok(Outcome::ToolReply(result, armed))
    }

    /// Records a call of one of this server's tools, with `charge`'s idempotency key, and
    /// returns how many calls of that tool have arrived (in every run, with `--state-file`).
    /// Calls of unknown tools are not deliveries: they return 0.
    fn count_delivery(&mut self, name: &str, params: &Value) -> u64 {
        if !TOOL_NAMES.contains(&name) {
            return 0;
        }
        let key = params
            .get("arguments")
            .and_then(|args| args.get("idempotency_key"))
            .and_then(Value::as_str)
            .filter(|key| name == "charge" && is_valid_key(key));
        self.ledger.record_delivery(name, key)
    }

    // --- slow-call timers ----------------------------------------------------------------------

    fn next_deadline(&self) -> Option<Instant> {
        self.slow_calls.iter().map(SlowCall::next_deadline).min()
    }

    fn fire_due_timers(&mut self, now: Instant) {
        let mut progress = Vec::new();
        let mut replies = Vec::new();
        self.slow_calls.retain_mut(|call| match call.advance(now, &mut progress) {
            Some(reply) => {
                replies.push((reply, call.armed));
                false
            }
            None => true,
        });
        // Each call's progress still goes out before its own reply.
        for message in &progress {
            self.out.send(message);
        }
        for (reply, armed) in &replies {
            self.out.send_faulty(reply, *armed);
        }
    }

    fn cancel_slow_call(&mut self, request_id: &Value) {
        let before = self.slow_calls.len();
        let late = |call: &SlowCall| call.armed.has(FaultKind::LateAfterCancel);
        self.slow_calls.retain(|call| call.id != *request_id || late(call));
        if self.slow_calls.len() < before {
            eprintln!("[slow] cancelled id={request_id}");
        } else if self.slow_calls.iter().any(|call| call.id == *request_id) {
            eprintln!("[fault] late-after-cancel: ignoring the cancel of id={request_id}");
        } else {
            // Finished or unknown: the spec says to ignore it.
            eprintln!("[demo] cancel for no running call id={request_id}");
        }
    }
}

/// Schedules a `slow` call. Argument problems are tool errors (`isError`), per the spec.
fn start_slow_call(
    id: &Value,
    params: &Value,
    args: &Map<String, Value>,
    era: Era,
    armed: Armed,
) -> Outcome {
    let ms = match args.get("ms").and_then(Value::as_u64) {
        Some(ms) if ms <= SLOW_MAX_MS => ms,
        _ => {
            let message = format!("slow needs an integer `ms` from 0 to {SLOW_MAX_MS}");
            return Outcome::ToolReply(tool_error(&message), armed);
        }
    };
    eprintln!("[slow] start id={id} ms={ms}");
    let token = progress_token(params);
    Outcome::Slow(SlowCall::new(id.clone(), era, ms, token, Instant::now(), armed))
}

/// The request's `_meta.progressToken`, when it is a valid one (a string or a number).
fn progress_token(params: &Value) -> Option<Value> {
    params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_number())
        .cloned()
}

/// Checks the per-request `_meta` envelope that 2026-07-28 requires (§2.1 of the wire digest).
fn check_modern_envelope(params: &Value) -> Result<(), RpcError> {
    let version = meta(params, META_PROTOCOL_VERSION).and_then(Value::as_str);
    let capabilities = meta(params, META_CLIENT_CAPABILITIES).filter(|c| c.is_object());
    let (Some(version), Some(_)) = (version, capabilities) else {
        return Err(RpcError::invalid_params(format!(
            "params._meta must carry `{META_PROTOCOL_VERSION}` (a string) and \
             `{META_CLIENT_CAPABILITIES}` (an object)"
        )));
    };
    if version != MODERN_VERSION {
        return Err(RpcError::unsupported_version(version));
    }
    Ok(())
}

/// Looks up `params._meta[key]`.
fn meta<'a>(params: &'a Value, key: &str) -> Option<&'a Value> {
    params.get("_meta").and_then(|m| m.get(key))
}

// ---------------------------------------------------------------------------------------------
// The ledger: what the tools remember, and the delivery counts

/// What the tools remember (`write_note`'s notes, `put`'s map, `charge`'s charges) and what
/// tests read back through `stats`: how many calls of each tool arrived. With `--state-file`
/// every delivery is also appended to a file, one line each (`TOOL`, or `charge<TAB>KEY` for a
/// keyed charge), and the file is replayed at startup, so the totals survive a crash and a
/// restart, and a test can read them without asking the server.
#[derive(Default)]
struct Ledger {
    notes: Vec<String>,
    store: BTreeMap<String, String>,
    deliveries: BTreeMap<String, u64>,
    /// Deliveries of `charge` per idempotency key.
    charge_keys: BTreeMap<String, u64>,
    charged_keys: BTreeSet<String>,
    unkeyed_charges: u64,
    state_file: Option<File>,
}

impl Ledger {
    fn open(path: Option<&Path>) -> Result<Ledger, String> {
        let mut ledger = Ledger::default();
        let Some(path) = path else { return Ok(ledger) };
        let failed = |e: io::Error| format!("state file {}: {e}", path.display());
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(failed(e)),
        };
        text.lines().for_each(|line| ledger.replay(line));
        let mut file = OpenOptions::new().create(true).append(true).open(path).map_err(failed)?;
        if !text.is_empty() && !text.ends_with('\n') {
            // A line cut short must not swallow the next one.
            file.write_all(b"\n").map_err(failed)?;
        }
        ledger.state_file = Some(file);
        let total: u64 = ledger.deliveries.values().sum();
        eprintln!("[demo] state file {}: {total} earlier deliveries", path.display());
        Ok(ledger)
    }

    /// Counts one line of the state file. A restarted process cannot tell a charge that ran
    /// from one a crash cut short, so every delivered charge counts as charged.
    fn replay(&mut self, line: &str) {
        let (tool, key) = match line.split_once('\t') {
            Some((tool, key)) => (tool, Some(key)),
            None => (line, None),
        };
        if tool.is_empty() {
            return;
        }
        self.count(tool, key);
        if tool == "charge" {
            match key {
                Some(key) => {
                    self.charged_keys.insert(key.to_owned());
                }
                None => self.unkeyed_charges += 1,
            }
        }
    }

    /// Counts one call of `tool` in memory; returns the calls of `tool` so far.
    fn count(&mut self, tool: &str, key: Option<&str>) -> u64 {
        if let Some(key) = key {
            *self.charge_keys.entry(key.to_owned()).or_default() += 1;
        }
        let calls = self.deliveries.entry(tool.to_owned()).or_default();
        *calls += 1;
        *calls
    }

    /// Counts one received call, in memory and in the state file; returns the calls of `tool`
    /// so far, this one included.
    fn record_delivery(&mut self, tool: &str, key: Option<&str>) -> u64 {
        let calls = self.count(tool, key);
        if let Some(file) = &mut self.state_file {
            let line = match key {
                Some(key) => format!("{tool}\t{key}\n"),
                None => format!("{tool}\n"),
            };
            // One unbuffered write per line: a crash right after it still leaves the line whole.
            if let Err(e) = file.write_all(line.as_bytes()) {
                eprintln!("[demo] state file write failed: {e}");
            }
        }
        calls
    }

    fn write_note(&mut self, args: &Map<String, Value>) -> Value {
        let Some(note) = args.get("note").and_then(Value::as_str) else {
            return tool_error("write_note needs a string `note`");
        };
        self.notes.push(note.to_owned());
        text_result(&self.notes.len().to_string())
    }

    fn stats(&self) -> Value {
        let stats = json!({"deliveries": self.deliveries, "chargeKeys": self.charge_keys});
        json!({
            "content": [{"type": "text", "text": stats.to_string()}],
            "structuredContent": stats,
            "isError": false,
        })
    }

    /// Idempotent: storing the same value again leaves the same state.
    fn put(&mut self, args: &Map<String, Value>) -> Value {
        let (Some(key), Some(value)) =
            (args.get("key").and_then(Value::as_str), args.get("value").and_then(Value::as_str))
        else {
            return tool_error("put needs strings `key` and `value`");
        };
        self.store.insert(key.to_owned(), value.to_owned());
        json!({
            "content": [{"type": "text", "text": "ok"}],
            "structuredContent": {"keys": self.store.len()},
            "isError": false,
        })
    }

    /// Not idempotent: every call without a key charges again, while a key is charged once.
    fn charge(&mut self, args: &Map<String, Value>) -> Value {
        if !args.get("amount").is_some_and(Value::is_number) {
            return tool_error("charge needs a number `amount`");
        }
        let charged = match args.get("idempotency_key") {
            None | Some(Value::Null) => {
                self.unkeyed_charges += 1;
                true
            }
            Some(Value::String(key)) if is_valid_key(key) => self.charged_keys.insert(key.clone()),
            Some(_) => {
                return tool_error(
                    "`idempotency_key` must be a non-empty string without control characters",
                );
            }
        };
        let keys = self.charged_keys.len() as u64;
        let charges = keys + self.unkeyed_charges;
        json!({
            "content": [{"type": "text", "text": charges.to_string()}],
            "structuredContent": {"charged": charged, "charges": charges, "keys": keys},
            "isError": false,
        })
    }
}

/// A key fits on one line of the state file, after a tab.
fn is_valid_key(key: &str) -> bool {
    !key.is_empty() && !key.chars().any(char::is_control)
}

// ---------------------------------------------------------------------------------------------
// Slow calls

/// A running `slow(ms)` call. It reports progress at 100 ms, 200 ms, ... and a last step at
/// exactly `ms`, then replies. Steps are anchored to `started`, so late wake-ups do not drift.
struct SlowCall {
    id: Value,
    era: Era,
    ms: u64,
    progress_token: Option<Value>,
    started: Instant,
    steps: u64,
    steps_done: u64,
    /// The faults armed for this call: they bend its reply, and `late-after-cancel` keeps it
    /// running when cancelled.
    armed: Armed,
}

impl SlowCall {
    fn new(
        id: Value,
        era: Era,
        ms: u64,
        progress_token: Option<Value>,
        now: Instant,
        armed: Armed,
    ) -> SlowCall {
        let steps = ms.div_ceil(PROGRESS_INTERVAL_MS);
        SlowCall { id, era, ms, progress_token, started: now, steps, steps_done: 0, armed }
    }

    /// When step `step` (1-based) is due. The last step is clamped to `ms`.
    fn step_due(&self, step: u64) -> Instant {
        self.started + Duration::from_millis((step * PROGRESS_INTERVAL_MS).min(self.ms))
    }

    fn next_deadline(&self) -> Instant {
        self.step_due(self.steps_done + 1)
    }

    /// Emits the progress of every step due by `now` into `progress`. Returns the response
    /// once all steps are done, which finishes the call.
    fn advance(&mut self, now: Instant, progress: &mut Vec<Value>) -> Option<Value> {
        while self.steps_done < self.steps && self.step_due(self.steps_done + 1) <= now {
            self.steps_done += 1;
            if let Some(token) = &self.progress_token {
                progress.push(self.progress_notification(token));
            }
        }
        if self.steps_done < self.steps {
            return None;
        }
        eprintln!("[slow] done id={}", self.id);
        let body = text_result(&format!("slept {} ms", self.ms));
        Some(result_message(&self.id, self.era, "tools/call", body))
    }

    fn progress_notification(&self, token: &Value) -> Value {
        json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {
                "progressToken": token,
                "progress": self.steps_done,
                "total": self.steps,
                "message": format!("step {}/{}", self.steps_done, self.steps),
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Static content

fn server_info() -> Value {
    json!({"name": SERVER_NAME, "version": SERVER_VERSION})
}

fn server_capabilities() -> Value {
    json!({"tools": {"listChanged": true}, "resources": {}, "prompts": {}, "completions": {}})
}

/// Body of the `server/discover` result; the envelope adds `resultType`, the cache hints and
/// `serverInfo`.
fn discover_result() -> Value {
    json!({"supportedVersions": [MODERN_VERSION], "capabilities": server_capabilities()})
}

/// The legacy handshake answer. It always offers 2025-11-25, whatever the client asked for;
/// the client decides whether it can live with that.
fn initialize_result() -> Value {
    json!({
        "protocolVersion": LEGACY_VERSION,
        "capabilities": server_capabilities(),
        "serverInfo": server_info(),
    })
}

/// The tools for tools/list: the five everyone sees, then, when `resilience` asks for them,
/// the tools the resilience tests use.
fn tool_definitions(resilience: bool) -> Vec<Value> {
    let mut tools = vec![
        json!({
            "name": "echo",
            "description": "Echo back the `text` argument.",
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
            "annotations": {"readOnlyHint": true},
        }),
        json!({
            "name": "add",
            "description": "Add `a` and `b`; returns structuredContent {sum}.",
            "inputSchema": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
            "outputSchema": {
                "type": "object",
                "properties": {"sum": {"type": "number"}},
                "required": ["sum"],
            },
        }),
        json!({
            "name": "slow",
            "description": "Wait `ms` milliseconds, reporting progress every 100 ms; cancellable.",
            "inputSchema": {
                "type": "object",
                "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": SLOW_MAX_MS}},
                "required": ["ms"],
            },
        }),
        json!({
            "name": "fail",
            "description": "Always fails with isError true.",
            "inputSchema": {"type": "object", "properties": {}},
        }),
        json!({
            "name": "write_note",
            "description": "Append `note` to an in-memory list; returns the number of notes.",
            "inputSchema": {
                "type": "object",
                "properties": {"note": {"type": "string"}},
                "required": ["note"],
            },
            "annotations": {"readOnlyHint": false, "idempotentHint": false},
        }),
    ];
    if resilience {
        tools.extend(resilience_tool_definitions());
    }
    tools
}

fn resilience_tool_definitions() -> Vec<Value> {
    vec![
        json!({
            "name": "stats",
            "description": "How many calls of each tool this server received, counted before \
                            any fault acts; structuredContent {deliveries, chargeKeys}.",
            "inputSchema": {"type": "object", "properties": {}},
            "outputSchema": {
                "type": "object",
                "properties": {
                    "deliveries": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "chargeKeys": {"type": "object", "additionalProperties": {"type": "integer"}},
                },
                "required": ["deliveries", "chargeKeys"],
            },
            "annotations": {"readOnlyHint": true},
        }),
        json!({
            "name": "lookup",
            "description": "Return the text `value-of-<key>`.",
            "inputSchema": {
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
            },
            "annotations": {"readOnlyHint": true},
        }),
        json!({
            "name": "put",
            "description": "Store `value` under `key`; storing it again changes nothing.",
            "inputSchema": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                "required": ["key", "value"],
            },
            "annotations": {"readOnlyHint": false, "idempotentHint": true},
        }),
        json!({
            "name": "charge",
            "description": "Charge `amount`; a repeated `idempotency_key` is charged once. \
                            Returns the number of charges.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number"},
                    "idempotency_key": {"type": "string"},
                },
                "required": ["amount"],
            },
            "annotations": {"readOnlyHint": false, "idempotentHint": false},
        }),
    ]
}

fn resource_definitions() -> Vec<Value> {
    vec![json!({"uri": README_URI, "name": "readme", "mimeType": "text/plain"})]
}

fn prompt_definitions() -> Vec<Value> {
    vec![json!({
        "name": "greet",
        "description": "Ask the model to greet someone.",
        "arguments": [{"name": "name", "description": "Who to greet", "required": true}],
    })]
}

// ---------------------------------------------------------------------------------------------
// Handlers without state

/// Returns one page of `items` under `key`. The cursor is an opaque string naming the list and
/// the offset of the next page; anything this server did not hand out is rejected with -32602
/// (§2.5 of the wire digest).
fn list_page(key: &str, items: &[Value], params: &Value) -> Result<Value, RpcError> {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(cursor) => cursor
            .as_str()
            .and_then(|c| parse_cursor(key, c, items.len()))
            .ok_or_else(|| RpcError::invalid_params(format!("unknown cursor: {cursor}")))?,
    };
    let end = (start + PAGE_SIZE).min(items.len());
    let mut result = json!({ key: items[start..end] });
    if end < items.len() {
        result["nextCursor"] = json!(make_cursor(key, end));
    }
    Ok(result)
}

fn make_cursor(key: &str, offset: usize) -> String {
    format!("{key}.page.{offset}")
}

fn parse_cursor(key: &str, cursor: &str, len: usize) -> Option<usize> {
    let offset = cursor.strip_prefix(key)?.strip_prefix(".page.")?.parse::<usize>().ok()?;
    // Only offsets this server could have produced: a later page start that still has items.
    (offset > 0 && offset < len && offset % PAGE_SIZE == 0).then_some(offset)
}

fn read_resource(params: &Value) -> Result<Value, RpcError> {
    let uri = params
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("resources/read needs a string `uri`"))?;
    if uri != README_URI {
        // 2026-07-28 reports an unknown resource as -32602 (2025-11-25 used -32002).
        return Err(RpcError::invalid_params(format!("unknown resource: {uri}")));
    }
    Ok(json!({"contents": [{"uri": README_URI, "mimeType": "text/plain", "text": README_TEXT}]}))
}

fn get_prompt(params: &Value) -> Result<Value, RpcError> {
    let name = params.get("name").and_then(Value::as_str);
    if name != Some("greet") {
        return Err(RpcError::invalid_params(format!("unknown prompt: {}", name.unwrap_or(""))));
    }
    let who = params
        .get("arguments")
        .and_then(|a| a.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("prompt `greet` needs the argument `name`"))?;
    Ok(json!({
        "description": "Ask the model to greet someone.",
        "messages": [{
            "role": "user",
            "content": {"type": "text", "text": format!("Please greet {who}.")},
        }],
    }))
}

fn echo_tool(args: &Map<String, Value>) -> Value {
    match args.get("text").and_then(Value::as_str) {
        Some(text) => text_result(text),
        None => tool_error("echo needs a string `text`"),
    }
}

fn add_tool(args: &Map<String, Value>) -> Value {
    let (Some(a), Some(b)) = (args.get("a"), args.get("b")) else {
        return tool_error("add needs numbers `a` and `b`");
    };
    // Integers stay integers (2 + 3 = 5, not 5.0); anything else is added as f64.
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) => a.checked_add(b).map(Value::from),
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => serde_json::Number::from_f64(a + b).map(Value::Number),
            _ => return tool_error("add needs numbers `a` and `b`"),
        },
    };
    let Some(sum) = sum else {
        return tool_error("the sum does not fit in a JSON number");
    };
    json!({
        "content": [{"type": "text", "text": sum.to_string()}],
        "structuredContent": {"sum": sum},
        "isError": false,
    })
}

fn lookup_tool(args: &Map<String, Value>) -> Value {
    match args.get("key").and_then(Value::as_str) {
        Some(key) => text_result(&format!("value-of-{key}")),
        None => tool_error("lookup needs a string `key`"),
    }
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

/// A tool execution failure: a normal result with `isError`, not a JSON-RPC error.
fn tool_error(message: &str) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

// ---------------------------------------------------------------------------------------------
// Streamable HTTP (--http PORT)

/// What the connection threads share: the one `Server` (the tools' memory and the delivery
/// counts) and the request ids that `notifications/cancelled` named.
struct HttpShared {
    server: Mutex<Server>,
    cancelled: Mutex<HashSet<String>>,
}

impl HttpShared {
    fn server(&self) -> MutexGuard<'_, Server> {
        // A thread that panicked mid-request leaves counts that are still worth serving.
        self.server.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn cancelled(&self) -> MutexGuard<'_, HashSet<String>> {
        self.cancelled.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn notification(&self, method: &str, params: &Value) {
        match (method, params.get("requestId")) {
            // The slow call's own thread acts on it, at its next look.
            ("notifications/cancelled", Some(id)) => {
                self.cancelled().insert(id.to_string());
            }
            _ => self.server().handle_notification(method, params),
        }
    }

    /// Whether request `id` was cancelled; consumes the cancellation.
    fn take_cancel(&self, id: &Value) -> bool {
        self.cancelled().remove(&id.to_string())
    }
}

/// Serves Streamable HTTP on 127.0.0.1 only (this server has no authentication and crashes
/// on request), one thread per connection, until the process is killed.
fn serve_http(server: Server, port: u16) {
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("demo_server: cannot listen on 127.0.0.1:{port}: {e}");
            process::exit(EXIT_IO);
        }
    };
    let url = match listener.local_addr() {
        Ok(addr) => format!("http://{addr}{MCP_PATH}"),
        Err(_) => format!("http://127.0.0.1:{port}{MCP_PATH}"),
    };
    // The URL goes to stdout, so a test that asked for port 0 learns which port it got.
    let mut stdout = io::stdout().lock();
    let _ = writeln!(stdout, "{url}").and_then(|()| stdout.flush());
    drop(stdout);
    eprintln!("[demo] {SERVER_NAME} {SERVER_VERSION} serving Streamable HTTP at {url}");
    let shared = Arc::new(HttpShared { server: Mutex::new(server), cancelled: Mutex::default() });
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                let shared = Arc::clone(&shared);
                thread::spawn(move || serve_connection(&shared, stream));
            }
            Err(e) => {
                eprintln!("[http] accept failed: {e}");
                thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// One client connection: a buffered reader for requests and a clone of the socket for replies.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// Whether a connection can carry another request after this one.
enum After {
    KeepOpen,
    Close,
}

/// How a wait inside a slow call ended.
enum Waited {
    Due,
    Cancelled,
    Gone,
}

/// Serves the requests of one connection, in turn (HTTP/1.1 keep-alive), until the client
/// closes it or a reply (or a fault) ends it.
fn serve_connection(shared: &HttpShared, stream: TcpStream) {
    // Small writes (progress events, `drip`'s single bytes) go out at once, not batched by
    // Nagle's algorithm.
    let _ = stream.set_nodelay(true);
    let Ok(writer) = stream.try_clone() else { return };
    let mut conn = Conn { reader: BufReader::new(stream), writer };
    loop {
        let request = match read_request(&mut conn.reader) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(why) => {
                eprintln!("[http] bad request: {why}");
                let _ = conn.respond("400 Bad Request", &[("Connection", "close")], b"");
                return;
            }
        };
        match handle_http(shared, &mut conn, &request) {
            Ok(After::KeepOpen) if !request.wants_close() => {}
            Ok(_) => return,
            Err(e) => {
                eprintln!("[http] write failed: {e}");
                return;
            }
        }
    }
}

/// One HTTP request; header names are lowercased.
struct HttpRequest {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    fn wants_close(&self) -> bool {
        self.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// Reads one request: `Ok(None)` when the client closed the connection between requests,
/// `Err` for anything this server will not parse (chunked request bodies included).
fn read_request(reader: &mut BufReader<TcpStream>) -> Result<Option<HttpRequest>, String> {
    let Some(request_line) = read_head_line(reader)? else { return Ok(None) };
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("malformed request line `{request_line}`"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(format!("unsupported version `{version}`"));
    }
    let mut headers = Vec::new();
    loop {
        let line = read_head_line(reader)?.ok_or("connection closed inside the head")?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').ok_or("malformed header line")?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        if headers.len() > MAX_HEADERS {
            return Err("too many headers".into());
        }
    }
    let mut request =
        HttpRequest { method: method.into(), target: target.into(), headers, body: Vec::new() };
    if request.header("transfer-encoding").is_some() {
        return Err("request bodies need Content-Length".into());
    }
    let length = match request.header("content-length") {
        None => 0,
        Some(length) => length.parse::<usize>().map_err(|_| "bad Content-Length")?,
    };
    if length > MAX_BODY {
        return Err(format!("body of {length} bytes is too large"));
    }
    request.body = vec![0; length];
    reader.read_exact(&mut request.body).map_err(|e| format!("body: {e}"))?;
    Ok(Some(request))
}

/// One line of the request head, without its CRLF; `None` at a clean end of the connection.
fn read_head_line(reader: &mut BufReader<TcpStream>) -> Result<Option<String>, String> {
    let mut line = Vec::new();
    let read = reader.by_ref().take(MAX_HEAD_LINE).read_until(b'\n', &mut line);
    match read {
        Ok(0) => return Ok(None),
        Ok(_) => {}
        Err(e) => return Err(e.to_string()),
    }
    if line.pop() != Some(b'\n') {
        return Err("head line too long or cut off".into());
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line).map(Some).map_err(|_| "head line is not UTF-8".into())
}

/// Routes one request: only POST /mcp carries JSON-RPC.
fn handle_http(shared: &HttpShared, conn: &mut Conn, request: &HttpRequest) -> io::Result<After> {
    if request.path() != MCP_PATH {
        return conn.respond("404 Not Found", &[], b"");
    }
    if request.method != "POST" {
        // No GET stream and no session to DELETE: modern Streamable HTTP needs neither.
        return conn.respond("405 Method Not Allowed", &[("Allow", "POST")], b"");
    }
    let message = match serde_json::from_slice::<Value>(&request.body) {
        Ok(message) => message,
        Err(e) => {
            let error = RpcError::new(PARSE_ERROR, format!("Parse error: {e}"));
            return conn.json("400 Bad Request", &error_message(&Value::Null, &error));
        }
    };
    match classify(message) {
        Ok(Incoming::Request { id, method, params }) => {
            http_request(shared, conn, request, &id, &method, &params)
        }
        Ok(Incoming::Notification { method, params }) => {
            shared.notification(&method, &params);
            conn.respond("202 Accepted", &[], b"")
        }
        Ok(Incoming::Response) => conn.respond("202 Accepted", &[], b""),
        Err((id, error)) => conn.json("400 Bad Request", &error_message(&id, &error)),
    }
}

/// Answers one JSON-RPC request: as JSON, or as an event stream when the client sent a
/// progressToken (or a fault needs several messages).
fn http_request(
    shared: &HttpShared,
    conn: &mut Conn,
    request: &HttpRequest,
    id: &Value,
    method: &str,
    params: &Value,
) -> io::Result<After> {
    if let Err(error) = check_version_header(request, method) {
        return conn.json("400 Bad Request", &error_message(id, &error));
    }
    let token = progress_token(params);
    let sse = token.is_some();
    // A cancel for an id that was never running must not cancel a later request with that id.
    shared.take_cancel(id);
    let outcome = {
        let mut server = shared.server();
        if server.flags.silent_discover && method == "server/discover" {
            drop(server);
            eprintln!("[demo] --silent-discover: not answering server/discover id={id}");
            return Ok(conn.hang());
        }
        server.modern_request(id, method, params)
    };
    let era = Era::Modern;
    match outcome {
        Err(error) => conn.reply(&[error_message(id, &error).to_string()], Armed::default(), sse),
        Ok(Outcome::Reply(body)) => {
            let message = result_message(id, era, method, body).to_string();
            conn.reply(&[message], Armed::default(), sse)
        }
        Ok(Outcome::ToolReply(_, armed)) if armed.has(FaultKind::ResetMidSse) => {
            conn.reset_mid_sse(token.as_ref())
        }
        Ok(Outcome::ToolReply(body, armed)) => {
            let message = result_message(id, era, method, body);
            conn.reply(&reply_frames(&message, armed), armed, sse)
        }
        Ok(Outcome::Slow(call)) if call.armed.has(FaultKind::ResetMidSse) => {
            conn.reset_mid_sse(token.as_ref())
        }
        Ok(Outcome::Slow(call)) => run_slow_http(shared, conn, call, sse),
        Ok(Outcome::Withheld(armed)) if armed.has(FaultKind::StatusThenOk) => {
            eprintln!("[fault] status-then-ok: 503 for id={id}");
            conn.respond("503 Service Unavailable", &[], b"")
        }
        Ok(Outcome::Withheld(_)) => {
            eprintln!("[fault] close-before-reply: closing the connection of id={id}");
            let _ = conn.writer.shutdown(Shutdown::Both);
            Ok(After::Close)
        }
    }
}

/// Modern Streamable HTTP names the protocol version in a header on every request. Only
/// `initialize`, which has none, gets through without it, to meet `modern_request`'s refusal.
fn check_version_header(request: &HttpRequest, method: &str) -> Result<(), RpcError> {
    match request.header("mcp-protocol-version") {
        _ if method == "initialize" => Ok(()),
        None => Err(RpcError::invalid_request("the MCP-Protocol-Version header is missing")),
        Some(MODERN_VERSION) => Ok(()),
        Some(other) => Err(RpcError::unsupported_version(other)),
    }
}

/// Runs a `slow` call on this connection's thread: progress events as they fall due, then the
/// reply. A cancel notification, or the client closing the connection (which is how a modern
/// client cancels over HTTP), stops it, unless `late-after-cancel` is armed.
fn run_slow_http(
    shared: &HttpShared,
    conn: &mut Conn,
    mut call: SlowCall,
    sse: bool,
) -> io::Result<After> {
    let watch = !call.armed.has(FaultKind::LateAfterCancel);
    if sse {
        conn.writer.write_all(SSE_HEAD.as_bytes())?;
        conn.writer.flush()?;
    }
    let mut progress = Vec::new();
    loop {
        match conn.wait_until(call.next_deadline(), watch.then_some((shared, &call.id))) {
            Waited::Due => {}
            Waited::Cancelled => {
                eprintln!("[slow] cancelled id={}", call.id);
                // An event stream can end without the reply; a JSON reply cannot, so the
                // connection goes with it.
                if !sse {
                    return Ok(After::Close);
                }
                conn.writer.write_all(SSE_END)?;
                conn.writer.flush()?;
                return Ok(After::KeepOpen);
            }
            Waited::Gone => {
                eprintln!("[slow] client closed the connection; dropping id={}", call.id);
                return Ok(After::Close);
            }
        }
        let reply = call.advance(Instant::now(), &mut progress);
        // Progress only exists with a progressToken, that is on an event stream.
        for message in progress.drain(..) {
            conn.writer.write_all(&sse_chunk(&message.to_string()))?;
        }
        conn.writer.flush()?;
        let Some(reply) = reply else { continue };
        if !watch && shared.take_cancel(&call.id) {
            eprintln!("[fault] late-after-cancel: replying to cancelled id={}", call.id);
        }
        let frames = reply_frames(&reply, call.armed);
        if !sse {
            return conn.reply(&frames, call.armed, false);
        }
        if frames.is_empty() {
            return Ok(conn.hang());
        }
        let events: Vec<Vec<u8>> = frames.iter().map(|frame| sse_chunk(frame)).collect();
        let events: Vec<&[u8]> = events.iter().map(Vec::as_slice).collect();
        emit(&mut conn.writer, b"", &events, SSE_END, call.armed)?;
        return Ok(After::KeepOpen);
    }
}

impl Conn {
    /// Writes a complete response with a Content-Length body.
    fn respond(
        &mut self,
        status: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<After> {
        self.writer.write_all(&http_head(status, headers, body.len()))?;
        self.writer.write_all(body)?;
        self.writer.flush()?;
        Ok(After::KeepOpen)
    }

    fn json(&mut self, status: &str, message: &Value) -> io::Result<After> {
        let body = message.to_string();
        self.respond(status, &[("Content-Type", "application/json")], body.as_bytes())
    }

    /// Sends the frames of one reply: a JSON body when there is one frame and no event stream
    /// was asked for, else an event stream (only a stream can carry garbage, a stray reply or a
    /// duplicate ahead of or after the reply). No frames means `hang`.
    fn reply(&mut self, frames: &[String], armed: Armed, sse: bool) -> io::Result<After> {
        if frames.is_empty() {
            return Ok(self.hang());
        }
        if sse || frames.len() > 1 {
            let events: Vec<Vec<u8>> = frames.iter().map(|frame| sse_chunk(frame)).collect();
            let events: Vec<&[u8]> = events.iter().map(Vec::as_slice).collect();
            emit(&mut self.writer, SSE_HEAD.as_bytes(), &events, SSE_END, armed)?;
        } else {
            let body = frames[0].as_bytes();
            let head = http_head("200 OK", &[("Content-Type", "application/json")], body.len());
            emit(&mut self.writer, &head, &[body], b"", armed)?;
        }
        Ok(After::KeepOpen)
    }

    /// `hang`: never answer. Waits for the client to give up and close the connection, so the
    /// thread ends with it.
    fn hang(&mut self) -> After {
        eprintln!("[fault] hang: never replying on this connection");
        let mut sink = [0u8; 1024];
        while matches!(self.reader.read(&mut sink), Ok(n) if n > 0) {}
        After::Close
    }

    /// `reset-mid-sse`: begins an event stream, sends one progress event and drops the
    /// connection inside the chunked body. std cannot set SO_LINGER to 0
    /// (`TcpStream::set_linger` is unstable), so the client sees a FIN, not a RST.
    fn reset_mid_sse(&mut self, token: Option<&Value>) -> io::Result<After> {
        eprintln!("[fault] reset-mid-sse: dropping the connection after one event");
        self.writer.write_all(SSE_HEAD.as_bytes())?;
        self.writer.write_all(&sse_chunk(&first_event(token).to_string()))?;
        self.writer.flush()?;
        let _ = self.writer.shutdown(Shutdown::Both);
        Ok(After::Close)
    }

    /// Sleeps until `deadline`. With `watch`, wakes early when the request was cancelled: by
    /// `notifications/cancelled`, or by the client closing the connection.
    fn wait_until(&mut self, deadline: Instant, watch: Option<(&HttpShared, &Value)>) -> Waited {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Waited::Due;
            }
            let Some((shared, id)) = watch else {
                thread::sleep(left);
                return Waited::Due;
            };
            if shared.take_cancel(id) {
                return Waited::Cancelled;
            }
            let nap = left.min(CANCEL_POLL);
            // A read timeout turns peek into a bounded wait for the client's EOF.
            let socket = self.reader.get_ref();
            let _ = socket.set_read_timeout(Some(nap));
            let peeked = socket.peek(&mut [0u8; 1]);
            let _ = socket.set_read_timeout(None);
            match peeked {
                Ok(0) => return Waited::Gone,
                // The client sent more (a pipelined request): not a cancel.
                Ok(_) => thread::sleep(nap),
                Err(e) if is_timeout(&e) => {}
                Err(_) => return Waited::Gone,
            }
        }
    }
}

/// Whether a read with a timeout just ran out of time (Unix says WouldBlock, others TimedOut).
fn is_timeout(e: &io::Error) -> bool {
    use io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
    matches!(e.kind(), WouldBlock | TimedOut | Interrupted)
}

/// A response head with a Content-Length.
fn http_head(status: &str, headers: &[(&str, &str)], length: usize) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {length}\r\n");
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// One server-sent event carrying `data`, framed as one chunk of a chunked body.
fn sse_chunk(data: &str) -> Vec<u8> {
    let event = format!("event: message\ndata: {data}\n\n");
    format!("{:x}\r\n{event}\r\n", event.len()).into_bytes()
}

/// The one event `reset-mid-sse` sends: progress when the client asked for it, else a log
/// message, so that the stream has begun either way.
fn first_event(token: Option<&Value>) -> Value {
    match token {
        Some(token) => json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 0, "message": "started"},
        }),
        None => json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "started"},
        }),
    }
}
