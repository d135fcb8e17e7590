// taskset -c 0 cargo bench --bench roundtrip
//
//! Sequential `tools/call` round trips to a real child process over pipes, against the raw
//! floor, plus heap allocations per call in steady state.
//!
//! * floor: a child of the same program over the same kind of pipes, a pre-serialized request
//!   line written with one `write` and the reply read with blocking `read`s up to the newline:
//!   no JSON, no poll, no engine. It is what any client must pay.
//! * mcpoll: `Host::call_tool` + `Host::poll` + `Host::poll_event` until `CallDone`.
//!
//! The child is the demo server (`tests/peers/demo`), which this bench builds with the bench
//! profile (`cargo build -p mcpoll-demo-server --profile bench`) before it measures. Pin
//! everything to one core (`taskset -c 0`) for stable figures: on a 2-core machine the
//! scheduler otherwise flips between same-core and cross-core wakeups.
//! The same for Streamable HTTP, against a small keep-alive HTTP/1.1 server in a child process
//! (this binary again, with `MCPOLL_BENCH_HTTP=1`): the floor writes a pre-serialized POST on
//! one kept-alive socket and reads the response up to its Content-Length.
//!
//! `MCPOLL_BENCH_ONLY=stdio` (or `stdio-floor`, `http`, `http-floor`) runs that sequential phase alone
//! (`sequential`: both sequential phases with their floors, no 64-in-flight phase), and
//! `MCPOLL_BENCH_ROUNDS=N` sets its call count: callgrind runs at two counts, subtracted, give
//! instructions per call (benches/README.md). The mcpoll phases print their allocations per
//! call.
//!
//! `MCPOLL_BENCH_RESULT_BYTES=N` makes every result carry `N` bytes of text (the 64 KiB figures
//! of benches/README.md), floors included. `MCPOLL_BENCH_IDLE_SERVERS=K` puts `K` ready, idle
//! demo servers in the stdio phase's host beside the one it calls. `MCPOLL_BENCH_CACHE=1` makes
//! that host with the capability cache configured (`Host::with_cache`). `MCPOLL_BENCH_IS_IDLE=1`
//! asks `Host::is_idle` before every poll and once after each call, as a game loop does each
//! frame (`examples/game_loop.rs`), and counts the calls after which the host was idle.
//!
//! It prints `stdio p50_us=.. p99_us=.. floor_p50_us=.. ratio=.. allocs_per_call=..` and
//! `http p50_us=.. p99_us=.. floor_p50_us=.. ratio=.. allocs_per_call=..`.
//!
//! Then the same with 64 calls in flight (`stdio64`, `http64`): calls per second, p50/p99 of
//! each call's latency, and `ratio` = mcpoll's calls/s over the floor's. The stdio floor keeps
//! 64 pre-serialized lines in flight on one pipe (each newline read sends one more line, all
//! written with one `write`); mcpoll keeps 64 `call_tool`s pending on one server with
//! `max_in_flight` 64. The HTTP floor keeps one request in flight on each of 64 keep-alive
//! sockets under one `mio::Poll`; mcpoll uses a pool of 64 connections (`max_connections`).
//! Both floors are bound by their server, so each line also gives this process's own CPU time
//! per call (`client_cpu_us_per_call`, from `/proc/self/schedstat`) beside the floor's.

#[path = "../tests/common/cargo_build.rs"]
#[allow(dead_code)]
mod cargo_build;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcpoll::{CacheConfig, CallId, CallOptions, Config, Event, Host, StdioCommand};
use serde_json::value::RawValue;

#[path = "../tests/common/counting.rs"]
#[allow(dead_code)]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const SERVE_HTTP: &str = "MCPOLL_BENCH_HTTP";
const WARMUP: usize = 500;
/// Sequential calls measured per phase; `MCPOLL_BENCH_ROUNDS` overrides (for callgrind).
fn rounds() -> usize {
    std::env::var("MCPOLL_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5000)
}
/// Calls kept in flight by the concurrent phase, and how many it measures.
const IN_FLIGHT: usize = 64;
const CONCURRENT_CALLS: usize = 50_000;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// `MCPOLL_BENCH_RESULT_BYTES=N`: each call's result carries `N` bytes of text (the echo of
/// one byte `N` times, so the request stays small); unset, the text is `hi`.
fn result_bytes() -> Option<usize> {
    std::env::var("MCPOLL_BENCH_RESULT_BYTES").ok().and_then(|v| v.parse().ok())
}

/// `MCPOLL_BENCH_IDLE_SERVERS=K`: the stdio phase's host also holds `K` ready demo servers
/// that are never called, to show what each server the host keeps costs the calls to another.
fn idle_servers() -> usize {
    std::env::var("MCPOLL_BENCH_IDLE_SERVERS").ok().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// `MCPOLL_BENCH_CACHE=1`: the stdio phase's host has the capability cache configured, as a
/// host that reads servers' catalogs has.
fn with_cache() -> bool {
    std::env::var("MCPOLL_BENCH_CACHE").is_ok_and(|v| v == "1")
}

/// `MCPOLL_BENCH_IS_IDLE=1`: the loop asks `Host::is_idle` before every poll and once after
/// each call, as a game loop asks it every frame: busy frames and an idle one.
fn asks_is_idle() -> bool {
    std::env::var("MCPOLL_BENCH_IS_IDLE").is_ok_and(|v| v == "1")
}

/// The echo call's arguments.
fn echo_args() -> String {
    match result_bytes() {
        Some(n) => format!(r#"{{"text":"x","repeat":{n}}}"#),
        None => r#"{"text":"hi"}"#.to_owned(),
    }
}

/// The pre-serialized request line the stdio floor writes.
fn floor_line() -> Vec<u8> {
    format!(
        concat!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{},"#,
            r#""_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
            r#""io.modelcontextprotocol/clientCapabilities":{{}},"#,
            r#""io.modelcontextprotocol/clientInfo":{{"name":"mcpoll","version":"0.1.0"}}}}}}}}"#,
            "\n"
        ),
        echo_args()
    )
    .into_bytes()
}

fn floor(demo: &std::path::Path) -> Vec<Duration> {
    let rounds = rounds();
    let mut child = Command::new(demo)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn floor child");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let line = &floor_line()[..];
    let mut buf = [0u8; 4096];
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..WARMUP + rounds {
        let t = Instant::now();
        stdin.write_all(line).expect("write");
        loop {
            let n = stdout.read(&mut buf).expect("read");
            assert!(n > 0, "floor child exited");
            if buf[..n].contains(&b'\n') {
                break;
            }
        }
        if i >= WARMUP {
            samples.push(t.elapsed());
        }
    }
    drop(stdin);
    let _ = child.wait();
    samples
}

fn mcpoll(demo: &std::path::Path) -> (Vec<Duration>, f64) {
    let mut host = match with_cache() {
        true => Host::with_cache(CacheConfig::default()).expect("host"),
        false => Host::new().expect("host"),
    };
    let server = host.add_stdio_server(StdioCommand::new(demo), Config::default()).expect("spawn");
    host.wait_ready(server, Duration::from_secs(10)).expect("ready");
    for _ in 0..idle_servers() {
        let idle =
            host.add_stdio_server(StdioCommand::new(demo), Config::default()).expect("spawn");
        host.wait_ready(idle, Duration::from_secs(30)).expect("ready");
    }
    measure(&mut host, server)
}

/// Sequential echo calls through a host; samples and allocations per call after warm-up.
fn measure(host: &mut Host, server: mcpoll::ServerId) -> (Vec<Duration>, f64) {
    let rounds = rounds();
    let args = RawValue::from_string(echo_args()).expect("json");
    let opts = CallOptions::default();
    let asks_is_idle = asks_is_idle();
    let mut idle_after = 0;
    let mut samples = Vec::with_capacity(rounds);
    let mut allocs = 0u64;
    for i in 0..WARMUP + rounds {
        let before = counting::allocs();
        let t = Instant::now();
        let call = host.call_tool(server, "echo", &args, &opts).expect("call");
        let mut done = false;
        while !done {
            // A call is pending: never idle.
            assert!(!(asks_is_idle && host.is_idle()), "idle with a call pending");
            host.poll(None).expect("poll");
            while let Some((_, e)) = host.poll_event() {
                match e {
                    Event::CallDone { call: c, result, .. } if c == call => {
                        assert!(result.json().len() > 10);
                        done = true;
                    }
                    Event::CallFailed { error, .. } => panic!("call failed: {error}"),
                    _ => {}
                }
            }
        }
        let elapsed = t.elapsed();
        // The frame after the call: with nothing pending, the host is idle.
        idle_after += usize::from(asks_is_idle && host.is_idle());
        if i >= WARMUP {
            samples.push(elapsed);
            allocs += counting::allocs() - before;
        }
    }
    if asks_is_idle {
        println!("is_idle after {idle_after} of {} calls", WARMUP + rounds);
    }
    host.close_server(server);
    (samples, allocs as f64 / rounds as f64)
}

/// The HTTP server child: prints its port, answers every POST with a JSON-RPC result that
/// echoes the request id, keeps connections alive, exits when stdin closes.
fn serve_http() {
    use std::io::BufRead;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    println!("{}", listener.local_addr().expect("addr").port());
    std::thread::spawn(|| {
        let mut sink = String::new();
        let _ = std::io::stdin().read_line(&mut sink);
        std::process::exit(0);
    });
    for stream in listener.incoming().flatten() {
        let _ = stream.set_nodelay(true);
        std::thread::spawn(move || {
            let mut reader = std::io::BufReader::new(stream);
            loop {
                let mut len = 0usize;
                let mut line = String::new();
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let result = if v["method"] == "server/discover" {
                    serde_json::json!({"resultType":"complete","supportedVersions":["2026-07-28"],
                        "capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private"})
                } else {
                    // The echo of `text`, `repeat` times when asked.
                    let args = &v["params"]["arguments"];
                    let text = args["text"].as_str().unwrap_or_default();
                    let text = text.repeat(args["repeat"].as_u64().unwrap_or(1) as usize);
                    serde_json::json!({"resultType":"complete","content":[{"type":"text","text":text}]})
                };
                let out =
                    serde_json::json!({"jsonrpc":"2.0","id":v["id"],"result":result}).to_string();
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{out}",
                    out.len()
                );
                if reader.get_mut().write_all(resp.as_bytes()).is_err() {
                    return;
                }
            }
        });
    }
}

fn spawn_http_server(exe: &std::path::Path) -> (std::process::Child, u16) {
    use std::io::BufRead;
    let mut child = Command::new(exe)
        .env(SERVE_HTTP, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn http child");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("port");
    (child, line.trim().parse().expect("port number"))
}

/// The pre-serialized POST the HTTP floor sends.
fn http_floor_request(port: u16) -> String {
    let body = format!(
        concat!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{},"#,
            r#""_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
            r#""io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        ),
        echo_args()
    );
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Whether `text` holds a whole response (head and Content-Length body).
fn response_complete(text: &[u8]) -> bool {
    let Some(end) = text.windows(4).position(|w| w == b"\r\n\r\n") else { return false };
    let head = std::str::from_utf8(&text[..end]).unwrap_or("");
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned())
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    text.len() >= end + 4 + len
}

fn http_floor(port: u16) -> Vec<Duration> {
    let rounds = rounds();
    let request = http_floor_request(port);
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    sock.set_nodelay(true).expect("nodelay");
    let mut buf = vec![0u8; 8192 + result_bytes().unwrap_or(0) * 2];
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..WARMUP + rounds {
        let t = Instant::now();
        sock.write_all(request.as_bytes()).expect("write");
        let mut have = 0;
        loop {
            let n = sock.read(&mut buf[have..]).expect("read");
            assert!(n > 0, "server closed");
            have += n;
            if response_complete(&buf[..have]) {
                break;
            }
        }
        if i >= WARMUP {
            samples.push(t.elapsed());
        }
    }
    samples
}

fn http_mcpoll(port: u16) -> (Vec<Duration>, f64) {
    let mut host = Host::new().expect("host");
    let opts = mcpoll::HttpOptions::new(format!("http://127.0.0.1:{port}/mcp"));
    let server = host.add_http_server(opts, Config::default()).expect("add");
    host.wait_ready(server, Duration::from_secs(10)).expect("ready");
    measure(&mut host, server)
}

/// What a concurrent phase measured: per-call latencies, the wall time of the measured calls,
/// and allocations per call (mcpoll only).
struct Concurrent {
    samples: Vec<Duration>,
    elapsed: Duration,
    allocs_per_call: f64,
    /// This process's CPU time per measured call: the client's own cost, whoever is slower.
    cpu_us_per_call: f64,
}

/// CPU time of this (single-threaded) process so far, from the scheduler's own count.
fn cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/schedstat").unwrap_or_default();
    stat.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Counts completions: the first `WARMUP` are not measured; the clock starts after them.
struct Tally {
    done: usize,
    start: Instant,
    samples: Vec<Duration>,
    allocs_at_start: u64,
    cpu_at_start: u64,
}

impl Tally {
    fn new() -> Self {
        Self {
            done: 0,
            start: Instant::now(),
            samples: Vec::with_capacity(CONCURRENT_CALLS),
            allocs_at_start: 0,
            cpu_at_start: 0,
        }
    }

    fn complete(&mut self, sent: Instant) {
        self.done += 1;
        if self.done == WARMUP {
            self.start = Instant::now();
            self.cpu_at_start = cpu_ns();
            self.allocs_at_start = counting::allocs();
        } else if self.done > WARMUP {
            self.samples.push(sent.elapsed());
        }
    }

    fn finished(&self) -> bool {
        self.done >= WARMUP + CONCURRENT_CALLS
    }

    fn into_concurrent(self, count_allocs: bool) -> Concurrent {
        let allocs = counting::allocs() - self.allocs_at_start;
        let cpu = cpu_ns() - self.cpu_at_start;
        Concurrent {
            cpu_us_per_call: cpu as f64 / 1e3 / CONCURRENT_CALLS as f64,
            elapsed: self.start.elapsed(),
            allocs_per_call: if count_allocs {
                allocs as f64 / CONCURRENT_CALLS as f64
            } else {
                0.0
            },
            samples: self.samples,
        }
    }
}

/// 64 pre-serialized lines in flight on one pipe; the server answers in order.
fn floor_concurrent(demo: &std::path::Path) -> Concurrent {
    let mut child = Command::new(demo)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn floor child");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let total = WARMUP + CONCURRENT_CALLS;
    let mut sent = std::collections::VecDeque::with_capacity(IN_FLIGHT);
    let line = floor_line();
    let mut out = Vec::with_capacity(IN_FLIGHT * line.len());
    let mut buf = vec![0u8; 64 * 1024];
    let mut tally = Tally::new();
    let mut issued = 0;
    let mut send =
        |k: usize, issued: &mut usize, sent: &mut std::collections::VecDeque<Instant>| {
            out.clear();
            let now = Instant::now();
            for _ in 0..k.min(total - *issued) {
                out.extend_from_slice(&line);
                sent.push_back(now);
                *issued += 1;
            }
            if !out.is_empty() {
                stdin.write_all(&out).expect("write");
            }
        };
    send(IN_FLIGHT, &mut issued, &mut sent);
    while !tally.finished() {
        let n = stdout.read(&mut buf).expect("read");
        assert!(n > 0, "floor child exited");
        let k = buf[..n].iter().filter(|&&b| b == b'\n').count();
        for _ in 0..k {
            tally.complete(sent.pop_front().expect("a line was in flight"));
        }
        send(k, &mut issued, &mut sent);
    }
    drop(stdin);
    let _ = child.wait();
    tally.into_concurrent(false)
}

/// Keeps `IN_FLIGHT` echo calls pending on one server until the measured ones are done.
fn measure_concurrent(host: &mut Host, server: mcpoll::ServerId) -> Concurrent {
    let args = RawValue::from_string(r#"{"text":"hi"}"#.into()).expect("json");
    let opts = CallOptions::default();
    let total = WARMUP + CONCURRENT_CALLS;
    let mut started: std::collections::HashMap<CallId, Instant> =
        std::collections::HashMap::with_capacity(4 * IN_FLIGHT);
    let mut ended: Vec<CallId> = Vec::with_capacity(4 * IN_FLIGHT);
    let mut tally = Tally::new();
    let mut issued = 0;
    while issued < IN_FLIGHT {
        let call = host.call_tool(server, "echo", &args, &opts).expect("call");
        started.insert(call, Instant::now());
        issued += 1;
    }
    while !tally.finished() {
        host.poll(None).expect("poll");
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::CallDone { call, result, .. } => {
                    assert!(result.json().len() > 10);
                    ended.push(call);
                }
                Event::CallFailed { error, .. } => panic!("call failed: {error}"),
                _ => {}
            }
        }
        for call in ended.drain(..) {
            tally.complete(started.remove(&call).expect("a call this bench made"));
            if issued < total {
                let call = host.call_tool(server, "echo", &args, &opts).expect("call");
                started.insert(call, Instant::now());
                issued += 1;
            }
        }
    }
    host.close_server(server);
    tally.into_concurrent(true)
}

fn mcpoll_concurrent(demo: &std::path::Path) -> Concurrent {
    let mut host = Host::new().expect("host");
    let config = Config { max_in_flight: IN_FLIGHT, ..Config::default() };
    let server = host.add_stdio_server(StdioCommand::new(demo), config).expect("spawn");
    host.wait_ready(server, Duration::from_secs(10)).expect("ready");
    measure_concurrent(&mut host, server)
}

/// One request in flight on each of 64 keep-alive sockets, all under one `mio::Poll`.
fn http_floor_concurrent(port: u16) -> Concurrent {
    let request = http_floor_request(port);
    let mut poll = mio::Poll::new().expect("poll");
    let mut events = mio::Events::with_capacity(IN_FLIGHT);
    let mut socks = Vec::with_capacity(IN_FLIGHT);
    let total = WARMUP + CONCURRENT_CALLS;
    let mut issued = 0;
    for i in 0..IN_FLIGHT {
        let sock = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        sock.set_nodelay(true).expect("nodelay");
        sock.set_nonblocking(true).expect("nonblocking");
        let mut sock = mio::net::TcpStream::from_std(sock);
        poll.registry()
            .register(&mut sock, mio::Token(i), mio::Interest::READABLE)
            .expect("register");
        // A small request into an empty socket buffer is written whole.
        assert_eq!(sock.write(request.as_bytes()).expect("write"), request.len());
        issued += 1;
        socks.push((sock, vec![0u8; 8192], 0usize, Instant::now()));
    }
    let mut tally = Tally::new();
    while !tally.finished() {
        poll.poll(&mut events, None).expect("poll");
        for ev in &events {
            let (sock, buf, have, sent) = &mut socks[ev.token().0];
            loop {
                match sock.read(&mut buf[*have..]) {
                    Ok(0) => panic!("server closed"),
                    Ok(n) => *have += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("read: {e}"),
                }
            }
            if response_complete(&buf[..*have]) {
                tally.complete(*sent);
                *have = 0;
                if issued < total {
                    *sent = Instant::now();
                    assert_eq!(sock.write(request.as_bytes()).expect("write"), request.len());
                    issued += 1;
                }
            }
        }
    }
    tally.into_concurrent(false)
}

fn http_mcpoll_concurrent(port: u16) -> Concurrent {
    let mut host = Host::new().expect("host");
    let mut opts = mcpoll::HttpOptions::new(format!("http://127.0.0.1:{port}/mcp"));
    opts.max_connections = IN_FLIGHT;
    let config = Config { max_in_flight: IN_FLIGHT, ..Config::default() };
    let server = host.add_http_server(opts, config).expect("add");
    host.wait_ready(server, Duration::from_secs(10)).expect("ready");
    measure_concurrent(&mut host, server)
}

fn report_concurrent(kind: &str, floor: Concurrent, ours: Concurrent) {
    let rate = |c: &Concurrent| CONCURRENT_CALLS as f64 / c.elapsed.as_secs_f64();
    let (floor_rate, our_rate) = (rate(&floor), rate(&ours));
    let mut f = floor.samples;
    let mut m = ours.samples;
    f.sort();
    m.sort();
    println!(
        "{kind} calls_per_s={:.0} p50_us={:.1} p99_us={:.1} floor_calls_per_s={:.0} floor_p50_us={:.1} floor_p99_us={:.1} ratio={:.2} allocs_per_call={:.2} client_cpu_us_per_call={:.2} floor_cpu_us_per_call={:.2} in_flight={IN_FLIGHT} calls={CONCURRENT_CALLS}",
        our_rate,
        percentile(&m, 0.50),
        percentile(&m, 0.99),
        floor_rate,
        percentile(&f, 0.50),
        percentile(&f, 0.99),
        our_rate / floor_rate,
        ours.allocs_per_call,
        ours.cpu_us_per_call,
        floor.cpu_us_per_call,
    );
}

fn report(
    kind: &str,
    mut floor_samples: Vec<Duration>,
    mut samples: Vec<Duration>,
    allocs_per_call: f64,
) {
    floor_samples.sort();
    samples.sort();
    let (p50, p99) = (percentile(&samples, 0.50), percentile(&samples, 0.99));
    let floor_p50 = percentile(&floor_samples, 0.50);
    println!(
        "{kind}: floor p50={:.1}us p99={:.1}us; mcpoll p50={p50:.1}us p99={p99:.1}us max={:.1}us over {} calls",
        floor_p50,
        percentile(&floor_samples, 0.99),
        percentile(&samples, 1.0),
        samples.len()
    );
    println!(
        "{kind} p50_us={p50:.1} p99_us={p99:.1} floor_p50_us={floor_p50:.1} ratio={:.2} allocs_per_call={allocs_per_call:.2}",
        p50 / floor_p50
    );
}

fn main() {
    if std::env::var_os(SERVE_HTTP).is_some() {
        serve_http();
        return;
    }
    let demo = cargo_build::demo_server_bin(&["--profile", "bench"]);
    // One phase alone, for instruction counts (benches/callgrind.sh): `stdio-floor`, `stdio`,
    // `http-floor` or `http` (the HTTP server is a child process, which callgrind does not
    // follow).
    match std::env::var("MCPOLL_BENCH_ONLY").as_deref() {
        Ok("stdio-floor") => {
            floor(demo);
            return;
        }
        Ok("stdio") => {
            let (_, allocs_per_call) = mcpoll(demo);
            println!("stdio allocs_per_call={allocs_per_call:.2}");
            return;
        }
        Ok(phase @ ("http-floor" | "http")) => {
            let exe = std::env::current_exe().expect("bench path");
            let (mut child, port) = spawn_http_server(&exe);
            if phase == "http" {
                let (_, allocs_per_call) = http_mcpoll(port);
                println!("http allocs_per_call={allocs_per_call:.2}");
            } else {
                http_floor(port);
            }
            drop(child.stdin.take());
            let _ = child.wait();
            return;
        }
        _ => {}
    }
    let floor_samples = floor(demo);
    let (samples, allocs_per_call) = mcpoll(demo);
    report("stdio", floor_samples, samples, allocs_per_call);
    // Large results are measured one call at a time only; `MCPOLL_BENCH_ONLY=sequential` skips
    // the 64-in-flight phases too.
    let sequential = std::env::var("MCPOLL_BENCH_ONLY").is_ok_and(|v| v == "sequential");
    let concurrent = result_bytes().is_none() && !sequential;
    if concurrent {
        report_concurrent("stdio64", floor_concurrent(demo), mcpoll_concurrent(demo));
    }
    let exe = std::env::current_exe().expect("bench path");
    let (mut child, port) = spawn_http_server(&exe);
    let floor_samples = http_floor(port);
    let (samples, allocs_per_call) = http_mcpoll(port);
    report("http", floor_samples, samples, allocs_per_call);
    if concurrent {
        report_concurrent("http64", http_floor_concurrent(port), http_mcpoll_concurrent(port));
    }
    drop(child.stdin.take());
    let _ = child.wait();
}
