// cargo run --example echo_server [-- --crash-on TOOL]
//
//! A small MCP server over stdio: newline-delimited JSON-RPC 2.0 on stdin and stdout, logs on
//! stderr. The other examples run it as their server, and it is a starting point for your own.
//!
//! It answers both protocol eras. A 2026-07-28 client calls `server/discover` and puts its
//! protocol version in every request's `_meta`; those requests get the modern result envelope
//! (`resultType`, and cache hints on cacheable results). A 2025-11-25 client sends `initialize`
//! first and gets plain results. Its tools:
//!
//! * `echo(text)` returns the text;
//! * `add(a, b)` returns the sum, also as `structuredContent: {"sum": ..}`;
//! * `slow(ms)` waits, reports progress every 100 ms when asked (`_meta.progressToken`) and
//!   stops at `notifications/cancelled`.
//!
//! `--crash-on TOOL` makes it exit with code 7, without a reply, whenever TOOL is called: the
//! `multi_server` example shows a host riding that out. Each `slow` call runs on a thread of
//! its own; the `expect`s are for example code only.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";
const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const STEP: Duration = Duration::from_millis(100);

pub fn main() {
    let args: Vec<String> = std::env::args().collect();
    let crash_on = args.iter().position(|a| a == "--crash-on").and_then(|i| args.get(i + 1));
    // The ids of the requests the client cancelled, which running `slow` calls look for.
    let cancelled = Arc::new(Mutex::new(HashSet::new()));
    eprintln!("[echo] reading stdin");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            send(&json!({"jsonrpc": "2.0", "id": null,
                         "error": {"code": -32700, "message": "Parse error"}}));
            continue;
        };
        let method = message["method"].as_str().unwrap_or_default();
        let params = &message["params"];
        let Some(id) = message.get("id") else {
            // A notification: only a cancel needs acting on.
            if method == "notifications/cancelled" {
                let id = params["requestId"].to_string();
                cancelled.lock().expect("not poisoned").insert(id);
            }
            continue;
        };
        if method.is_empty() {
            continue; // A response: this server sends no requests.
        }
        let modern =
            method == "server/discover" || params["_meta"][PROTOCOL_VERSION_KEY].is_string();
        let outcome = match method {
            "server/discover" => {
                Ok(json!({"supportedVersions": [MODERN], "capabilities": {"tools": {}}}))
            }
            // The legacy handshake: always 2025-11-25, the client decides whether that suits it.
            "initialize" => Ok(json!({"protocolVersion": LEGACY, "capabilities": {"tools": {}},
                                      "serverInfo": server_info()})),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({"tools": tool_list()})),
            "tools/call" => {
                let name = params["name"].as_str().unwrap_or_default();
                if crash_on.is_some_and(|tool| tool == name) {
                    eprintln!("[echo] --crash-on {name}: exiting with code 7");
                    std::process::exit(7);
                }
                let args = &params["arguments"];
                match name {
                    "echo" => Ok(echo(args)),
                    "add" => Ok(add(args)),
                    "slow" => {
                        start_slow(id.clone(), params, modern, &cancelled);
                        continue; // It replies from its own thread.
                    }
                    _ => Err((-32602, format!("Unknown tool: {name}"))),
                }
            }
            _ => Err((-32601, format!("Method not found: {method}"))),
        };
        match outcome {
            Ok(result) => send(&reply(id, result, method, modern)),
            Err((code, text)) => send(&json!({"jsonrpc": "2.0", "id": id,
                                               "error": {"code": code, "message": text}})),
        }
    }
    eprintln!("[echo] stdin closed; exiting");
}

/// Writes one message as one line; the stdout lock keeps lines from two threads apart.
fn send(message: &Value) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{message}").and_then(|()| out.flush()).is_err() {
        std::process::exit(1); // The client is gone.
    }
}

/// A response, with the 2026-07-28 result envelope when the request was a modern one.
fn reply(id: &Value, mut result: Value, method: &str, modern: bool) -> Value {
    if modern {
        result["resultType"] = json!("complete");
        result["_meta"] = json!({"io.modelcontextprotocol/serverInfo": server_info()});
        if matches!(method, "server/discover" | "tools/list") {
            result["ttlMs"] = json!(0);
            result["cacheScope"] = json!("private");
        }
    }
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn server_info() -> Value {
    json!({"name": "mcpoll-echo", "version": "0.1.0"})
}

fn tool_list() -> Value {
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required});
    json!([
        {"name": "echo", "description": "Echo back `text`.", "annotations": {"readOnlyHint": true},
         "inputSchema": object(json!({"text": {"type": "string"}}), &["text"])},
        {"name": "add", "description": "Add `a` and `b`.",
         "inputSchema": object(json!({"a": {"type": "number"}, "b": {"type": "number"}}), &["a", "b"]),
         "outputSchema": object(json!({"sum": {"type": "number"}}), &["sum"])},
        {"name": "slow", "description": "Wait `ms` milliseconds with progress; cancellable.",
         "inputSchema": object(json!({"ms": {"type": "integer", "maximum": 60000}}), &["ms"])},
    ])
}

fn text(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

fn echo(args: &Value) -> Value {
    match args["text"].as_str() {
        Some(s) => text(s, false),
        None => text("echo needs a string `text`", true),
    }
}

fn add(args: &Value) -> Value {
    // Integers stay integers (2 + 3 = 5, not 5.0).
    let sum = match (args["a"].as_i64(), args["b"].as_i64(), args["a"].as_f64(), args["b"].as_f64())
    {
        (Some(a), Some(b), _, _) => json!(a.saturating_add(b)),
        (_, _, Some(a), Some(b)) => json!(a + b),
        _ => return text("add needs numbers `a` and `b`", true),
    };
    let mut result = text(&sum.to_string(), false);
    result["structuredContent"] = json!({"sum": sum});
    result
}

/// Runs `slow(ms)` on its own thread: a progress notification every 100 ms when the request
/// carried a progress token, then the reply, unless the client cancelled it first.
fn start_slow(id: Value, params: &Value, modern: bool, cancelled: &Arc<Mutex<HashSet<String>>>) {
    let Some(ms) = params["arguments"]["ms"].as_u64().filter(|ms| *ms <= 60_000) else {
        send(&reply(&id, text("slow needs `ms` from 0 to 60000", true), "tools/call", modern));
        return;
    };
    let token = params["_meta"]["progressToken"].clone();
    // A cancel that arrived after an earlier call with this id ended is not for this one.
    cancelled.lock().expect("not poisoned").remove(&id.to_string());
    let cancelled = Arc::clone(cancelled);
    eprintln!("[slow] start id={id} ms={ms}");
    std::thread::spawn(move || {
        let steps = ms.div_ceil(100);
        for step in 1..=steps {
            std::thread::sleep(STEP.min(Duration::from_millis(ms - (step - 1) * 100)));
            if cancelled.lock().expect("not poisoned").remove(&id.to_string()) {
                eprintln!("[slow] cancelled id={id} at step {step}/{steps}");
                return;
            }
            if !token.is_null() {
                send(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                    "progressToken": token, "progress": step, "total": steps,
                    "message": format!("step {step}/{steps}")}}));
            }
        }
        let done = text(&format!("slept {ms} ms"), false);
        send(&reply(&id, done, "tools/call", modern));
    });
}
