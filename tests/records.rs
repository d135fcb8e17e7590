//! Call records and secrets, against real SDK servers (`tests/peers/`) over stdio and loopback
//! HTTP. Needs the peers (`tests/peers/setup.sh`); `MCPOLL_SKIP_PEERS=1` skips it.
//!
//! * Records: what a `RecordSink` installed on the host gets for listings (network and cache
//!   hits), tool calls with trace context and run id, and failures.
//! * Secrets: a full session with distinctive secrets in arguments, results, a bearer token and
//!   a root URI, with every log line at DEBUG captured: none of them may appear in any line or
//!   any record.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use mcpoll::{
    CallError, CallOptions, CallRecord, Config, Engine, EraPreference, Event, Host, HttpOptions,
    Method, ServerId, ServerRequestKind, ServerRequestKinds, StdioCommand, TraceContext,
    TransportEvent, TransportKind,
};

/// Every log line at DEBUG and above, from any thread of this test binary.
static CAPTURED: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Debug
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let line = format!("{} {} {}", r.level(), r.target(), r.args());
            CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    }
    fn flush(&self) {}
}

fn capture_logs() {
    static LOGGER: Capture = Capture;
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(log::LevelFilter::Debug);
}

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A record with its strings copied out.
#[derive(Debug, Clone)]
struct Owned {
    server: Option<String>,
    tool: Option<String>,
    method: Method,
    transport: TransportKind,
    cache_hit: bool,
    cache_age: Option<Duration>,
    trace_id: Option<String>,
    run_id: Option<u64>,
    attempts: u32,
    network: Duration,
    request_id: bool,
    version: bool,
    tool_error: bool,
    error_name: Option<&'static str>,
}

fn owned(r: &CallRecord<'_>) -> Owned {
    Owned {
        server: r.server.map(str::to_owned),
        tool: r.tool.map(str::to_owned),
        method: r.method,
        transport: r.transport,
        cache_hit: r.cache_hit,
        cache_age: r.cache_age,
        trace_id: r.trace_id.map(|t| t.to_string()),
        run_id: r.run_id,
        attempts: r.attempts,
        network: r.network,
        request_id: r.request_id.is_some(),
        version: r.version.is_some(),
        tool_error: r.tool_error,
        error_name: r.error_name,
    }
}

/// Installs a sink that keeps an owned copy of every record.
fn collect(host: &mut Host) -> Rc<RefCell<Vec<Owned>>> {
    let records = Rc::new(RefCell::new(Vec::new()));
    let sink = records.clone();
    host.set_record_sink(Box::new(move |r: &CallRecord<'_>| sink.borrow_mut().push(owned(r))));
    records
}

fn config() -> Config {
    Config { answers: ServerRequestKinds::all(), ..Config::default() }
}

/// Lists tools twice (network, then the cache when the server let it cache), calls `echo`
/// traced and `fail`, and checks the records the sink got.
fn records_scenario(
    host: &mut Host,
    id: ServerId,
    name: &str,
    transport: TransportKind,
    cached: bool,
) {
    let records = collect(host);
    assert!(host.tool_catalog_blocking(id, common::PATIENCE).unwrap().len() >= 4);
    std::thread::sleep(Duration::from_millis(20));
    assert!(host.tool_catalog_blocking(id, common::PATIENCE).unwrap().len() >= 4);
    let trace = TraceContext::new(TRACEPARENT).unwrap().with_baggage("k=v").unwrap();
    let opts = CallOptions { trace: Some(trace), run_id: Some(42), ..CallOptions::default() };
    let echo = host.call_tool_blocking(id, "echo", &raw(r#"{"text":"hi"}"#), &opts).unwrap();
    assert!(echo.json.contains("hi"));
    let fail = host.call_tool_blocking(id, "fail", &raw("{}"), &CallOptions::default()).unwrap();
    assert!(fail.is_error);
    let bad = CallOptions {
        trace: Some(TraceContext { traceparent: "00-xyz".into(), ..TraceContext::default() }),
        ..CallOptions::default()
    };
    assert!(host.call_tool(id, "echo", &raw(r#"{"text":"x"}"#), &bad).is_err());

    let r = records.borrow().clone();
    assert_eq!(r.len(), 4, "{name}: {r:#?}");
    for rec in &r {
        assert_eq!(rec.server.as_deref(), Some(name), "{rec:?}");
        assert_eq!(rec.transport, transport);
        assert!(rec.version, "{rec:?}");
    }
    let (listed, hit, echo, fail) = (&r[0], &r[1], &r[2], &r[3]);
    assert_eq!(
        (listed.method, listed.cache_hit, listed.cache_age),
        (Method::ToolsList, false, None)
    );
    assert!(listed.attempts >= 1 && listed.request_id && listed.network > Duration::ZERO);
    if cached {
        assert_eq!(
            (hit.method, hit.cache_hit, hit.attempts, hit.request_id),
            (Method::ToolsList, true, 0, false)
        );
        let age = hit.cache_age.expect("a hit has an age");
        assert!(age >= Duration::from_millis(20) && age < Duration::from_secs(10), "{age:?}");
    } else {
        // `ttlMs: 0`: the listing may not be kept, so the second need lists again.
        assert_eq!((hit.method, hit.cache_hit, hit.cache_age), (Method::ToolsList, false, None));
        assert!(hit.request_id);
    }
    assert_eq!((echo.tool.as_deref(), echo.method), (Some("echo"), Method::ToolsCall));
    assert_eq!(echo.trace_id.as_deref(), Some(&TRACEPARENT[3..35]));
    assert_eq!((echo.run_id, echo.attempts, echo.tool_error), (Some(42), 1, false));
    assert!(echo.network > Duration::ZERO && echo.request_id);
    assert_eq!(
        (fail.tool.as_deref(), fail.tool_error, fail.error_name),
        (Some("fail"), true, None)
    );

    let stats = host.stats(id).unwrap();
    assert!(stats.calls >= 3, "{stats:?}");
    assert_eq!(stats.failures.total(), 0, "{stats:?}");
    host.take_record_sink();
}

#[test]
fn records_over_stdio_name_the_program_and_count_cache_hits() {
    let Some(dir) = peers_dir() else { return };
    let mut host = Host::new().unwrap();
    // The py peer lets its tool listing be cached only when told to.
    let cmd = StdioCommand::new(dir.join("run-py-stdio.sh")).env("LAB_TOOLS_TTL_MS", "600000");
    let id = start(&mut host, cmd, config());
    assert_eq!(host.server_name(id), Some("run-py-stdio.sh"), "the program's file name");
    records_scenario(&mut host, id, "run-py-stdio.sh", TransportKind::Stdio, true);
}

#[test]
fn records_over_http_carry_the_name_the_host_gave() {
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, "run-ts2-http.sh");
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(peer.url()), config()).unwrap();
    host.wait_ready(id, common::PATIENCE).unwrap();
    let port = format!("127.0.0.1:{}", peer.port);
    assert_eq!(host.server_name(id), Some(port.as_str()), "host and port, never the path");
    host.set_server_name(id, "ts2");
    records_scenario(&mut host, id, "ts2", TransportKind::Http, false);
}

// ----- secrets --------------------------------------------------------------------------

const ARG_SECRET: &str = "arg-secret-7f3a91d2";
const BAD_ARG_SECRET: &str = "badarg-secret-41c0e8";
const TOKEN_SECRET: &str = "token-secret-c0ffee5e";
const ROOT_SECRET: &str = "root-secret-5e1d0b";
const ALL_SECRETS: [&str; 4] = [ARG_SECRET, BAD_ARG_SECRET, TOKEN_SECRET, ROOT_SECRET];

/// Calls `tool`, answering roots requests with the secret root, until it ends.
fn call_answering_roots(
    host: &mut Host,
    id: ServerId,
    tool: &str,
    args: &str,
) -> Result<String, CallError> {
    let call = host.call_tool(id, tool, &raw(args), &CallOptions::default()).unwrap();
    let deadline = Instant::now() + common::PATIENCE;
    let root = format!(r#"{{"roots":[{{"uri":"file:///srv/{ROOT_SECRET}","name":"r"}}]}}"#);
    loop {
        assert!(Instant::now() < deadline, "{tool}: no end");
        let mut todo = Vec::new();
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::ServerRequest { request, kind: ServerRequestKind::Roots, .. } => {
                    todo.push(request)
                }
                Event::CallDone { call: c, result, .. } if c == call => {
                    return Ok(result.json().to_owned())
                }
                Event::CallFailed { call: c, error, .. } if c == call => return Err(error),
                _ => {}
            }
        }
        for request in todo {
            host.answer(id, request, &raw(&root)).unwrap();
        }
        host.poll(Some(Duration::from_millis(50))).unwrap();
    }
}

/// A session: listings, a call with a secret argument (echoed into the result), a call whose
/// bad argument the server's error may quote, a call that asks for roots, then close.
fn secret_session(host: &mut Host, id: ServerId) {
    host.tool_catalog_blocking(id, common::PATIENCE).unwrap();
    let echoed = call_answering_roots(host, id, "echo", &format!(r#"{{"text":"{ARG_SECRET}"}}"#));
    assert!(echoed.unwrap().contains(ARG_SECRET), "the secret went to the server and back");
    // Not a string: the server refuses it, and its error may quote the value.
    let args = format!(r#"{{"text":{{"nested":"{BAD_ARG_SECRET}"}}}}"#);
    let _ = call_answering_roots(host, id, "echo", &args);
    let roots = call_answering_roots(host, id, "roots", "{}").unwrap();
    assert!(roots.contains(ROOT_SECRET), "the root went to the server and back: {roots}");
    // A call cancelled in flight, and one past its deadline: the paths that log most.
    let slow = host.call_tool(id, "slow", &raw(r#"{"ms":400}"#), &CallOptions::default()).unwrap();
    host.poll(Some(Duration::from_millis(50))).unwrap();
    host.cancel(id, slow).unwrap();
    let opts = CallOptions::timeout(Duration::from_millis(100));
    let r = host.call_tool_blocking(id, "slow", &raw(r#"{"ms":400}"#), &opts);
    assert!(r.is_err(), "past its deadline");
    host.close_server(id);
    while host.poll_event().is_some() {}
}

/// Kills the server's process group once its stderr holds a request with a secret argument,
/// while a read is in flight (retried on the restarted process).
fn crash_mid_call(host: &mut Host, id: ServerId) {
    let args = format!(r#"{{"text":"{ARG_SECRET}"}}"#);
    let read =
        CallOptions { idempotency: Some(mcpoll::Idempotency::Read), ..CallOptions::default() };
    let slow = host.call_tool(id, "slow", &raw(r#"{"ms":1000}"#), &read).unwrap();
    let echo = host.call_tool(id, "echo", &raw(&args), &read).unwrap();
    poll_until(host, common::PATIENCE, |h| {
        h.poll(Some(Duration::from_millis(10))).unwrap();
        h.stderr_tail(id).is_some_and(|t| t.contains(ARG_SECRET))
    });
    let pid = host.pid(id).expect("running");
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("pid");
    rustix::process::kill_process_group(pid, rustix::process::Signal::KILL).unwrap();
    let echoed = host.wait(id, echo).expect("the read is retried on the new process");
    assert!(echoed.json.contains(ARG_SECRET));
    let _ = host.wait(id, slow);
    let exit = host.last_transport_error(id).expect("the process died").to_string();
    assert!(exit.contains(ARG_SECRET), "the stderr tail holds the secret: {exit}");
}

/// The engine's DEBUG paths for peer faults, fed directly (no real server sends these on
/// demand): an error with a null id whose message quotes the arguments, and junk quoting them.
fn engine_peer_faults() {
    let now = Instant::now();
    let mut engine = Engine::new(Config::default(), now).unwrap();
    engine.handle_transport(now, TransportEvent::opened());
    let mut buf = Vec::new();
    let probe = engine.poll_transmit(now, &mut buf).expect("probe").len;
    let probe: serde_json::Value = serde_json::from_slice(&buf[..probe]).unwrap();
    let discover = serde_json::json!({"jsonrpc": "2.0", "id": probe["id"], "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {}}});
    engine.handle_message(now, discover.to_string().as_bytes());
    let args = format!(r#"{{"text":"{ARG_SECRET}"}}"#);
    engine.call_tool(now, "echo", &raw(&args), &CallOptions::default()).unwrap();
    buf.clear();
    while engine.poll_transmit(now, &mut buf).is_some() {}
    let null_id = serde_json::json!({"jsonrpc": "2.0", "id": null,
        "error": {"code": -32602, "message": format!("bad text {ARG_SECRET}")}});
    engine.handle_message(now, null_id.to_string().as_bytes());
    engine.handle_message(now, format!("INFO got text={ARG_SECRET}").as_bytes());
    assert_eq!((engine.stats().errors_without_id, engine.stats().invalid_frames), (1, 1));
    while engine.poll_event().is_some() {}
}

#[test]
fn no_secret_reaches_a_log_line_or_a_record() {
    capture_logs();
    engine_peer_faults();
    let Some(dir) = peers_dir() else { return };
    let seen = Rc::new(RefCell::new(Vec::new()));
    let sink = seen.clone();
    let record = move |r: &CallRecord<'_>| sink.borrow_mut().push(format!("{r:?}"));

    // stdio, the era probe deciding (modern), behind a wrapper that copies every request to
    // the server's stderr, as servers that log their input do: the stderr tail mcpoll keeps
    // then holds the secrets, and the process is killed mid-call so that tail travels.
    let mut host = Host::new().unwrap();
    host.set_record_sink(Box::new(record.clone()));
    let logging = StdioCommand::new("sh")
        .args(["-c", "tee /dev/stderr | \"$0\" 2>/dev/null"])
        .arg(dir.join("run-py-stdio.sh"));
    let id = start(&mut host, logging, config());
    crash_mid_call(&mut host, id);
    secret_session(&mut host, id);
    drop(host);

    // HTTP with a bearer token, in both eras (legacy: sessions, roots as a JSON-RPC request).
    for era in [EraPreference::ModernOnly, EraPreference::LegacyOnly] {
        let peer = HttpPeer::start(&dir, "run-py-http.sh");
        let mut host = Host::new().unwrap();
        host.set_record_sink(Box::new(record.clone()));
        let opts = HttpOptions::new(peer.url()).bearer(TOKEN_SECRET);
        let id = host.add_http_server(opts, Config { era, ..config() }).unwrap();
        host.wait_ready(id, common::PATIENCE).unwrap();
        secret_session(&mut host, id);
    }

    let lines = CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(
        lines.iter().any(|l| l.starts_with("DEBUG mcpoll")),
        "the capture works and a session logs at DEBUG: {lines:#?}"
    );
    if std::env::var_os("MCPOLL_SHOW_CAPTURE").is_some() {
        eprintln!("{}", lines.join("\n"));
    }
    let records = seen.borrow().clone();
    assert!(records.len() >= 15, "records were made: {records:#?}");
    for line in lines.iter().chain(&records) {
        for secret in ALL_SECRETS {
            assert!(!line.contains(secret), "secret {secret:?} leaked: {line}");
        }
    }
}

/// The OAuth flow's own requests are logged with their URL redacted: a query key on a
/// metadata or token endpoint (an identity provider's `?api_key=`) stays out of the log, as
/// everywhere else the flow shows a URL.
#[test]
fn an_oauth_fetch_is_logged_without_its_query() {
    use common::mini::{MiniServer, Request, Response};
    use mcpoll::oauth::{OAuthConfig, PreRegistered};
    capture_logs();
    let port: std::sync::Arc<std::sync::OnceLock<u16>> = Default::default();
    let port2 = std::sync::Arc::clone(&port);
    let server = MiniServer::start(None, move |req: &Request| {
        let base = format!("http://127.0.0.1:{}", port2.get().copied().unwrap_or_default());
        if req.method == "GET" {
            return Response { status: 404, headers: Vec::new(), body: String::new() };
        }
        let challenge = format!(r#"Bearer resource_metadata="{base}/prm?key=q5ecret-key""#);
        Response {
            status: 401,
            headers: vec![("WWW-Authenticate".into(), challenge)],
            body: String::new(),
        }
    });
    let _ = port.set(server.port);
    let url = server.url("http", "127.0.0.1");
    let client = PreRegistered::with_secret("id", "secret");
    let opts = HttpOptions::new(url.clone()).oauth(OAuthConfig::client_credentials(url, client));
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(opts, Config::default()).unwrap();
    let fetched = |s: &MiniServer| s.requests().iter().any(|r| r.method == "GET");
    common::poll_until(&mut host, common::PATIENCE, |_| fetched(&server));
    let _ = host.poll(Some(Duration::from_millis(10)));
    drop((host, id));
    let lines = CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(lines.iter().any(|l| l.contains("oauth: Get")), "the fetch is logged: {lines:#?}");
    assert!(lines.iter().all(|l| !l.contains("q5ecret-key")), "{lines:#?}");
}
