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
//! It prints `stdio p50_us=.. p99_us=.. floor_p50_us=.. ratio=.. allocs_per_call=..` and
//! `http p50_us=.. p99_us=.. floor_p50_us=.. ratio=.. allocs_per_call=..`.

#[path = "../tests/common/cargo_build.rs"]
#[allow(dead_code)]
mod cargo_build;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcpoll::{CallOptions, Config, Event, Host, StdioCommand};
use serde_json::value::RawValue;

/// Counts every allocation in this process (the bench side only; the child is separate).
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY-style note: delegates to the system allocator unchanged; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SERVE_HTTP: &str = "MCPOLL_BENCH_HTTP";
const WARMUP: usize = 500;
const ROUNDS: usize = 5000;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn floor(demo: &std::path::Path) -> Vec<Duration> {
    let mut child = Command::new(demo)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn floor child");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let line = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"#,
        r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
        r#""io.modelcontextprotocol/clientCapabilities":{},"#,
        r#""io.modelcontextprotocol/clientInfo":{"name":"mcpoll","version":"0.1.0"}}}}"#,
        "\n"
    )
    .as_bytes();
    let mut buf = [0u8; 4096];
    let mut samples = Vec::with_capacity(ROUNDS);
    for i in 0..WARMUP + ROUNDS {
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
    let mut host = Host::new().expect("host");
    let server = host.add_stdio_server(StdioCommand::new(demo), Config::default()).expect("spawn");
    host.wait_ready(server, Duration::from_secs(10)).expect("ready");
    measure(&mut host, server)
}

/// Sequential echo calls through a host; samples and allocations per call after warm-up.
fn measure(host: &mut Host, server: mcpoll::ServerId) -> (Vec<Duration>, f64) {
    let args = RawValue::from_string(r#"{"text":"hi"}"#.into()).expect("json");
    let opts = CallOptions::default();
    let mut samples = Vec::with_capacity(ROUNDS);
    let mut allocs = 0u64;
    for i in 0..WARMUP + ROUNDS {
        let before = ALLOCS.load(Ordering::Relaxed);
        let t = Instant::now();
        let call = host.call_tool(server, "echo", &args, &opts).expect("call");
        let mut done = false;
        while !done {
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
        if i >= WARMUP {
            samples.push(elapsed);
            allocs += ALLOCS.load(Ordering::Relaxed) - before;
        }
    }
    host.close_server(server);
    (samples, allocs as f64 / ROUNDS as f64)
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
                    serde_json::json!({"resultType":"complete","content":[{"type":"text","text":"hi"}]})
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

fn http_floor(port: u16) -> Vec<Duration> {
    let body = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"#,
        r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","#,
        r#""io.modelcontextprotocol/clientCapabilities":{}}}}"#
    );
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    sock.set_nodelay(true).expect("nodelay");
    let mut buf = vec![0u8; 8192];
    let mut samples = Vec::with_capacity(ROUNDS);
    for i in 0..WARMUP + ROUNDS {
        let t = Instant::now();
        sock.write_all(request.as_bytes()).expect("write");
        let mut have = 0;
        loop {
            let n = sock.read(&mut buf[have..]).expect("read");
            assert!(n > 0, "server closed");
            have += n;
            let text = &buf[..have];
            if let Some(end) = text.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = std::str::from_utf8(&text[..end]).unwrap_or("");
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().to_owned())
                    })
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                if have >= end + 4 + len {
                    break;
                }
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
        "{kind}: floor p50={:.1}us p99={:.1}us; mcpoll p50={p50:.1}us p99={p99:.1}us max={:.1}us over {ROUNDS} calls",
        floor_p50,
        percentile(&floor_samples, 0.99),
        percentile(&samples, 1.0)
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
    let floor_samples = floor(demo);
    let (samples, allocs_per_call) = mcpoll(demo);
    report("stdio", floor_samples, samples, allocs_per_call);
    let exe = std::env::current_exe().expect("bench path");
    let (mut child, port) = spawn_http_server(&exe);
    let floor_samples = http_floor(port);
    let (samples, allocs_per_call) = http_mcpoll(port);
    report("http", floor_samples, samples, allocs_per_call);
    drop(child.stdin.take());
    let _ = child.wait();
}
