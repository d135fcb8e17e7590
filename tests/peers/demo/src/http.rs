//! Streamable HTTP (`--http PORT`): one thread per connection, modern era only, the same
//! `Server` behind a mutex for every connection, and the HTTP-only faults.

mod wire;

use std::collections::HashSet;
use std::io::{self, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::process;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use self::wire::{http_head, read_request, sse_chunk, HttpRequest, SSE_END, SSE_HEAD};
use crate::faults::{emit, reply_frames, Armed, FaultKind};
use crate::jsonrpc::{
    classify, error_message, progress_token, result_message, Incoming, RpcError, PARSE_ERROR,
};
use crate::server::{Era, Outcome, Server};
use crate::slow::SlowCall;
use crate::{EXIT_IO, MODERN_VERSION, SERVER_NAME, SERVER_VERSION};

const MCP_PATH: &str = "/mcp";
/// How often a slow HTTP call looks for its cancellation while it waits.
const CANCEL_POLL: Duration = Duration::from_millis(20);

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
pub(crate) fn serve_http(server: Server, port: u16) {
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
        if server.flags.silent_list && method == "tools/list" {
            drop(server);
            eprintln!("[demo] --silent-list: not answering tools/list id={id}");
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
