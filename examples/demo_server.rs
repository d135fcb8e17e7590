// cargo run --example demo_server [-- FLAGS]
//
// FLAGS (all optional, for fault injection in tests):
//   --legacy-only             behave like an SDK v1 server: only `initialize`, no `server/discover`
//   --exit-on-non-initialize  exit with code 3 if the first message is not `initialize`
//   --silent-discover         never answer `server/discover`
//   --junk-stdout             print the non-JSON line `demo server starting` on stdout first
//   --stderr-noise KIB        write KIB KiB of filler text to stderr at startup
//   --crash-on TOOL           exit with code 7, without replying, when TOOL is called
//   --startup-ms MS           sleep MS milliseconds before reading stdin

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
//! Only JSON-RPC goes to stdout (one compact object per line, flushed each time) unless
//! `--junk-stdout` asks otherwise; diagnostics go to stderr. The process exits with code 0 when
//! stdin reaches EOF, dropping any slow calls still running.
//!
//! This is example code: it favours clarity over throughput, and it uses a stdin reader thread,
//! which the library itself avoids.

use std::io::{self, BufRead, Write};
use std::process;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
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

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

const EXIT_USAGE: i32 = 2;
const EXIT_NOT_INITIALIZE: i32 = 3;
const EXIT_CRASH_ON: i32 = 7;

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
    run_startup_faults(&flags);
    let lines = spawn_stdin_reader();
    eprintln!("[demo] {SERVER_NAME} {SERVER_VERSION} reading stdin");
    Server::new(flags).run(&lines);
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
    crash_on: Option<String>,
    startup_ms: u64,
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
                "--crash-on" => flags.crash_on = Some(value_arg(&arg, args.next())?),
                "--startup-ms" => flags.startup_ms = number_arg(&arg, args.next())?,
                "-h" | "--help" => return Err(FlagError::Help),
                other => return Err(FlagError::Bad(format!("unknown flag `{other}`"))),
            }
        }
        Ok(flags)
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

fn usage() -> &'static str {
    "usage: demo_server [--legacy-only] [--exit-on-non-initialize] [--silent-discover] \
     [--junk-stdout] [--stderr-noise KIB] [--crash-on TOOL] [--startup-ms MS]"
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
            // The client closed our stdout; nobody can hear us any more.
            eprintln!("[demo] stdout write failed: {e}; exiting");
            process::exit(1);
        }
    }
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
    /// A `slow` call was scheduled; its timer sends the reply later, unless it is cancelled.
    Deferred,
}

/// All state of the demo server: the pinned era, the notes and the running slow calls.
struct Server {
    flags: Flags,
    out: Output,
    era: Option<Era>,
    seen_first_message: bool,
    /// Legacy only: whether `notifications/initialized` has arrived. Requests before it are
    /// still served (as most SDK servers do), but logged, since a client should not send them.
    initialized: bool,
    notes: Vec<String>,
    slow_calls: Vec<SlowCall>,
}

impl Server {
    fn new(flags: Flags) -> Server {
        // An SDK v1 server has no modern mode at all, so there is nothing left to pin.
        let era = flags.legacy_only.then_some(Era::Legacy);
        Server {
            flags,
            out: Output { stdout: io::stdout() },
            era,
            seen_first_message: false,
            initialized: false,
            notes: Vec::new(),
            slow_calls: Vec::new(),
        }
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
            Ok(Outcome::Deferred) => {}
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
            "tools/list" => list_page("tools", &tool_definitions(), params)?,
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
        if self.flags.crash_on.as_deref() == Some(name) {
            eprintln!("[demo] --crash-on {name}: exiting with code {EXIT_CRASH_ON}");
            process::exit(EXIT_CRASH_ON);
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
            "slow" => return Ok(self.start_slow_call(id, params, args, era)),
            "fail" => tool_error("this tool always fails"),
            "write_note" => self.write_note_tool(args),
            _ => return Err(RpcError::invalid_params(format!("unknown tool: {name}"))),
        };
        Ok(Outcome::Reply(result))
    }

    fn write_note_tool(&mut self, args: &Map<String, Value>) -> Value {
        let Some(note) = args.get("note").and_then(Value::as_str) else {
            return tool_error("write_note needs a string `note`");
        };
        self.notes.push(note.to_owned());
        text_result(&self.notes.len().to_string())
    }

    /// Schedules a `slow` call. Argument problems are tool errors (`isError`), per the spec.
    fn start_slow_call(
        &mut self,
        id: &Value,
        params: &Value,
        args: &Map<String, Value>,
        era: Era,
    ) -> Outcome {
        let ms = match args.get("ms").and_then(Value::as_u64) {
            Some(ms) if ms <= SLOW_MAX_MS => ms,
            _ => {
                let message = format!("slow needs an integer `ms` from 0 to {SLOW_MAX_MS}");
                return Outcome::Reply(tool_error(&message));
            }
        };
        let progress_token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .cloned();
        eprintln!("[slow] start id={id} ms={ms}");
        self.slow_calls.push(SlowCall::new(id.clone(), era, ms, progress_token, Instant::now()));
        Outcome::Deferred
    }

    // --- slow-call timers ----------------------------------------------------------------------

    fn next_deadline(&self) -> Option<Instant> {
        self.slow_calls.iter().map(SlowCall::next_deadline).min()
    }

    fn fire_due_timers(&mut self, now: Instant) {
        let mut outgoing = Vec::new();
        self.slow_calls.retain_mut(|call| !call.advance(now, &mut outgoing));
        for message in &outgoing {
            self.out.send(message);
        }
    }

    fn cancel_slow_call(&mut self, request_id: &Value) {
        let before = self.slow_calls.len();
        self.slow_calls.retain(|call| call.id != *request_id);
        if self.slow_calls.len() < before {
            eprintln!("[slow] cancelled id={request_id}");
        } else {
            // Finished or unknown: the spec says to ignore it.
            eprintln!("[demo] cancel for no running call id={request_id}");
        }
    }
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
}

impl SlowCall {
    fn new(id: Value, era: Era, ms: u64, progress_token: Option<Value>, now: Instant) -> SlowCall {
        let steps = ms.div_ceil(PROGRESS_INTERVAL_MS);
        SlowCall { id, era, ms, progress_token, started: now, steps, steps_done: 0 }
    }

    /// When step `step` (1-based) is due. The last step is clamped to `ms`.
    fn step_due(&self, step: u64) -> Instant {
        self.started + Duration::from_millis((step * PROGRESS_INTERVAL_MS).min(self.ms))
    }

    fn next_deadline(&self) -> Instant {
        self.step_due(self.steps_done + 1)
    }

    /// Emits every step due by `now` into `outgoing`, plus the response once all steps are
    /// done. Returns true when the call has finished.
    fn advance(&mut self, now: Instant, outgoing: &mut Vec<Value>) -> bool {
        while self.steps_done < self.steps && self.step_due(self.steps_done + 1) <= now {
            self.steps_done += 1;
            if let Some(token) = &self.progress_token {
                outgoing.push(self.progress_notification(token));
            }
        }
        if self.steps_done < self.steps {
            return false;
        }
        eprintln!("[slow] done id={}", self.id);
        let body = text_result(&format!("slept {} ms", self.ms));
        outgoing.push(result_message(&self.id, self.era, "tools/call", body));
        true
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

fn tool_definitions() -> Vec<Value> {
    vec![
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

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

/// A tool execution failure: a normal result with `isError`, not a JSON-RPC error.
fn tool_error(message: &str) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}
