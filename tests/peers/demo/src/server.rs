//! The server's state and dispatch: the era the first request pins, the method table of each
//! era, `tools/call` with its faults, and the timers of the slow calls running over stdio.

use std::process;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::content::{
    discover_result, get_prompt, initialize_result, list_page, list_page_of, prompt_definitions,
    read_resource, resource_definitions, BULK_PAGE_SIZE,
};
use crate::faults::{Armed, FaultKind};
use crate::flags::Flags;
use crate::jsonrpc::{
    check_modern_envelope, classify, error_message, meta, progress_token, result_message, Incoming,
    RpcError, PARSE_ERROR,
};
use crate::ledger::{is_valid_key, Ledger};
use crate::slow::{SlowCall, SLOW_MAX_MS};
use crate::stdio::Output;
use crate::tasks::{Tasks, EXTENSION};
use crate::tools::{
    add_tool, bad_output_tool, bulk_tool_definitions, echo_tool, lookup_tool,
    schema_tool_definitions, text_result, tool_definitions, tool_error,
};
use crate::{EXIT_CRASH_ON, EXIT_FAIL_FIRST, EXIT_NOT_INITIALIZE, META_PROTOCOL_VERSION};

/// Every tool `tools/call` serves, listed or not; only these are counted as deliveries.
const TOOL_NAMES: [&str; 11] = [
    "echo",
    "add",
    "slow",
    "fail",
    "write_note",
    "stats",
    "lookup",
    "put",
    "charge",
    "bad_output",
    "remote_ref",
];

/// The protocol era this process serves, fixed by the first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// 2025-11-25: `initialize` handshake, no result envelope.
    Legacy,
    /// 2026-07-28: `_meta` envelope on every request and result.
    Modern,
}

/// What a request handler produced.
pub(crate) enum Outcome {
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
pub(crate) struct Server {
    pub(crate) flags: Flags,
    out: Output,
    era: Option<Era>,
    seen_first_message: bool,
    /// Legacy only: whether `notifications/initialized` has arrived. Requests before it are
    /// still served (as most SDK servers do), but logged, since a client should not send them.
    initialized: bool,
    ledger: Ledger,
    slow_calls: Vec<SlowCall>,
    tasks: Tasks,
}

impl Server {
    pub(crate) fn new(flags: Flags) -> Result<Server, String> {
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
            out: Output::new(),
            era,
            seen_first_message: false,
            initialized: false,
            ledger,
            slow_calls: Vec::new(),
            tasks: Tasks::default(),
        })
    }

    /// Serves until stdin closes. Waits for the next line or the next slow-call deadline,
    /// whichever comes first, so slow calls never block other requests.
    pub(crate) fn run(&mut self, lines: &Receiver<Vec<u8>>) {
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
        if self.flags.silent_list && method == "tools/list" {
            eprintln!("[demo] --silent-list: not answering tools/list id={id}");
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

    pub(crate) fn modern_request(
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
            "server/discover" => {
                let mut result = discover_result();
                if self.flags.tasks {
                    result["capabilities"]["extensions"] = json!({EXTENSION: {}});
                }
                Ok(Outcome::Reply(result))
            }
            "tools/call" if self.flags.tasks && params["name"] == "slow_task" => {
                let empty = Map::new();
                let args = params["arguments"].as_object().unwrap_or(&empty);
                Ok(Outcome::Reply(self.tasks.create(params, args)?))
            }
            "tasks/get" if self.flags.tasks => Ok(Outcome::Reply(self.tasks.get(params)?)),
            "tasks/cancel" if self.flags.tasks => Ok(Outcome::Reply(self.tasks.cancel(params)?)),
            "tasks/update" if self.flags.tasks => Ok(Outcome::Reply(self.tasks.update(params)?)),
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
                if self.flags.bulk_tools > 0 {
                    let tools = bulk_tool_definitions(self.flags.bulk_tools);
                    return Ok(Outcome::Reply(list_page_of(
                        "tools",
                        tools,
                        params,
                        BULK_PAGE_SIZE,
                    )?));
                }
                let mut tools = tool_definitions(self.flags.resilience_tools);
                if self.flags.schema_tools {
                    tools.extend(schema_tool_definitions());
                }
                list_page("tools", &tools, params)?
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

    pub(crate) fn handle_notification(&mut self, method: &str, params: &Value) {
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
            "bad_output" => bad_output_tool(),
            "remote_ref" => text_result("remote_ref ran"),
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
