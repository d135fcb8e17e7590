//! Helpers for the integration tests: where the demo server, the examples and the SDK peers
//! live, and bounded real-time waits (the only tests allowed to wait on the wall clock).
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcpoll::OwnedResult;
use mcpoll::{
    CallError, CallId, CallOptions, Config, Event, Host, ServerId, StdioCommand, TaskStatus,
};
use serde_json::value::RawValue;

mod cargo_build;

/// The outer bound of every real-time wait for an event: generous, because CI may run on a
/// machine whose cores are busy with other work. A wait ends as soon as its event comes; this
/// only turns a hang into a failure.
pub const PATIENCE: Duration = Duration::from_secs(60);

use self::cargo_build::{cargo_build, demo_server_bin, profile_dir};

/// The demo server (`tests/peers/demo`), built fresh once per test process.
pub fn demo_server() -> StdioCommand {
    StdioCommand::new(demo_server_bin(release_args()))
}

/// An example binary of this crate. `cargo test` builds the examples before the tests run;
/// `cargo test --test NAME` does not, so a missing one is built here (once per process). After
/// editing an example, run plain `cargo test` (or build the examples) to refresh it.
pub fn example(name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let path = profile_dir().join("examples").join(name);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() && !built.iter().any(|n| n == name) {
        cargo_build(&[&["--example", name], release_args()].concat());
        built.push(name.to_owned());
    }
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// The `mcpoll` command-line client (`src/bin/mcpoll`, behind the `cli` feature, so plain
/// `cargo test` does not build it): built here with `cargo build --bin mcpoll --features cli`
/// once per test process, so the tests never run a stale one.
pub fn cli() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        cargo_build(&[&["--bin", "mcpoll", "--features", "cli"], release_args()].concat());
        let path = profile_dir().join("mcpoll");
        assert!(path.exists(), "{} is missing", path.display());
        path
    })
    .clone()
}

/// Builds into the profile folder of the running test: `--release` when it is `target/release`.
fn release_args() -> &'static [&'static str] {
    if profile_dir().ends_with("release") {
        &["--release"]
    } else {
        &[]
    }
}

/// The folder where `tests/peers/setup.sh` installed the SDK peers. A missing install fails
/// the test (the harness would hide a printed notice behind `ok`), unless the run opts out
/// with `MCPOLL_SKIP_PEERS=1`: then `None`, and the interop test returns early.
pub fn peers_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MCPOLL_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target").join("peers"));
    let ready = dir.join("run-py-stdio.sh").exists()
        && dir.join("node_modules").exists()
        && dir.join(".venv").exists();
    if ready {
        return Some(dir);
    }
    if std::env::var("MCPOLL_SKIP_PEERS").is_ok_and(|v| v == "1") {
        return None;
    }
    panic!(
        "SDK peers are not installed in {}: run tests/peers/setup.sh (the README's test command \
         does), or set MCPOLL_SKIP_PEERS=1 to run without the interop tests",
        dir.display()
    );
}

pub fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).expect("valid JSON")
}

pub fn parse(r: &OwnedResult) -> serde_json::Value {
    serde_json::from_str(&r.json).expect("result is JSON")
}

/// Adds a server and waits until its era is settled. A test that leaves the probe timeout at
/// its default gets a patient one: on a busy machine an SDK server can take longer than 5 s
/// to start, and a dual-era server would then (rightly) be taken as legacy.
#[track_caller]
pub fn start(host: &mut Host, cmd: StdioCommand, mut config: Config) -> ServerId {
    if config.probe_timeout == Config::default().probe_timeout {
        config.probe_timeout = PATIENCE;
    }
    let id = host.add_stdio_server(cmd, config).expect("spawn");
    let state = host.wait_ready(id, PATIENCE).expect("ready");
    assert!(
        matches!(state, mcpoll::ServerState::Ready(..)),
        "server not ready: {state:?}, stderr: {:?}",
        host.stderr_tail(id)
    );
    id
}

#[track_caller]
pub fn call(host: &mut Host, id: ServerId, name: &str, args: &str) -> OwnedResult {
    let args = raw(args);
    host.call_tool_blocking(id, name, &args, &CallOptions::default())
        .unwrap_or_else(|e| panic!("call {name} failed: {e}; stderr: {:?}", host.stderr_tail(id)))
}

/// The error a server's engine closed with: waits (bounded) for it to close, then takes the
/// `Closed` event.
#[track_caller]
pub fn closed_with(host: &mut Host, id: ServerId) -> CallError {
    let state = host.wait_ready(id, PATIENCE).unwrap();
    assert_eq!(state, mcpoll::ServerState::Closed);
    loop {
        match host.poll_event() {
            Some((_, Event::Closed { error })) => return error,
            Some(_) => {}
            None => panic!("no Closed event"),
        }
    }
}

/// The error a server's probe (or handshake) was refused with for want of authorization:
/// `wait_ready` ends with it at once, the server is `Unauthorized` (not closed), and
/// `Host::authorization_error` keeps it.
#[track_caller]
pub fn refused_with(host: &mut Host, id: ServerId) -> CallError {
    let e = match host.wait_ready(id, Duration::from_secs(30)) {
        Err(mcpoll::BlockingError::Call(e)) => e,
        other => panic!("expected an authorization error, got {other:?}"),
    };
    assert_eq!(host.state(id), Some(mcpoll::ServerState::Unauthorized));
    assert_eq!(host.authorization_error(id), Some(&e));
    e
}

#[track_caller]
pub fn call_err(host: &mut Host, id: ServerId, name: &str, args: &str) -> CallError {
    let args = raw(args);
    match host.call_tool_blocking(id, name, &args, &CallOptions::default()) {
        Err(mcpoll::BlockingError::Call(e)) => e,
        other => panic!("expected a call error, got {other:?}"),
    }
}

/// Polls until `pred` holds for the host's state, or fails after `limit`.
#[track_caller]
pub fn poll_until(host: &mut Host, limit: Duration, mut pred: impl FnMut(&mut Host) -> bool) {
    let deadline = Instant::now() + limit;
    while !pred(host) {
        assert!(Instant::now() < deadline, "condition not met within {limit:?}");
        host.poll(Some(Duration::from_millis(20))).expect("poll");
    }
}

/// Everything one server emitted, as short strings, until `call` ended (bounded wait).
#[track_caller]
pub fn events_until_done(host: &mut Host, call: CallId, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    loop {
        while let Some((_, e)) = host.poll_event() {
            let (text, done) = match &e {
                Event::CallDone { call: c, result, .. } => {
                    (format!("done {}", result.json()), *c == call)
                }
                Event::CallFailed { call: c, error, .. } => {
                    (format!("failed {}", error.name()), *c == call)
                }
                Event::Progress { progress, total, .. } => {
                    (format!("progress {progress}/{total:?}"), false)
                }
                other => (format!("{other:?}"), false),
            };
            seen.push(text);
            if done {
                return seen;
            }
        }
        assert!(Instant::now() < deadline, "call did not end within {limit:?}: {seen:?}");
        host.poll(Some(Duration::from_millis(50))).expect("poll");
    }
}

/// Whether a process is still alive (signal 0).
pub fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

/// An SDK peer serving Streamable HTTP on a loopback port, stopped (with its process group)
/// when dropped. Its stderr goes to a file the test can read.
pub struct HttpPeer {
    child: std::process::Child,
    pub port: u16,
    pub script: PathBuf,
    pub stderr_path: PathBuf,
}

impl HttpPeer {
    /// Starts `run-*-http.sh` on a free port and waits until the port accepts connections.
    pub fn start(dir: &std::path::Path, script: &str) -> Self {
        let port = free_port();
        Self::start_on(dir.join(script), port)
    }

    pub fn start_on(script: PathBuf, port: u16) -> Self {
        Self::start_with_env(script, port, &[])
    }

    /// [`start_on`](Self::start_on) with extra environment variables for the peer.
    pub fn start_with_env(script: PathBuf, port: u16, env: &[(&str, &str)]) -> Self {
        use std::os::unix::process::CommandExt;
        let stderr_path =
            std::env::temp_dir().join(format!("mcpoll-peer-{}-{port}.log", std::process::id()));
        let log = std::fs::File::create(&stderr_path).expect("peer log");
        let child = std::process::Command::new(&script)
            .arg(port.to_string())
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start peer");
        let peer = Self { child, port, script, stderr_path };
        let deadline = Instant::now() + PATIENCE;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "peer did not listen on {port}: {}", peer.stderr());
            std::thread::sleep(Duration::from_millis(50));
        }
        peer
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Stops the server process group and waits for it.
    pub fn stop(&mut self) {
        self.signal_group(rustix::process::Signal::TERM);
        let _ = self.child.wait();
    }

    /// Signals the peer's own process group, and only it. (Not through `/bin/kill`: the procps
    /// 4.0.2 `kill -SIG -PGID` on these machines signalled far more than the group.)
    fn signal_group(&mut self, signal: rustix::process::Signal) {
        if let Ok(None) = self.child.try_wait() {
            if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
                let _ = rustix::process::kill_process_group(pid, signal);
            }
        }
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        self.signal_group(rustix::process::Signal::KILL);
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.stderr_path);
    }
}

/// A wait on a test's own `mio::Poll`: a wait that a signal cut short (Linux ends
/// `epoll_wait` with `EINTR` after a stop and continue, handler or not, as on a busy CI
/// machine) returns with no events, as a wait that timed out.
pub fn wait_events(poll: &mut mio::Poll, events: &mut mio::Events, timeout: Option<Duration>) {
    match poll.poll(events, timeout) {
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => events.clear(),
        r => r.expect("epoll_wait"),
    }
}

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// With `MCPOLL_TEST_LOG=1`, mcpoll's log lines go to stderr (debug level).
pub fn init_log() {
    struct Stderr;
    impl log::Log for Stderr {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }
        fn log(&self, r: &log::Record<'_>) {
            eprintln!("[{:?}] {} {}", std::time::SystemTime::now(), r.level(), r.args());
        }
        fn flush(&self) {}
    }
    static LOGGER: Stderr = Stderr;
    if std::env::var("MCPOLL_TEST_LOG").is_ok_and(|v| v == "1") {
        let _ = log::set_logger(&LOGGER);
        log::set_max_level(log::LevelFilter::Trace);
    }
}

#[allow(dead_code)]
pub mod counting;
pub mod mini;

/// Cancels `slow` after its first progress report, then checks from the server's own log
/// (read by `server_log`) that the work stopped, that no late reply arrived, and that the
/// server still serves calls. Shared by the stdio and HTTP interop tests.
#[track_caller]
pub fn cancel_slow_and_check(
    host: &mut Host,
    id: ServerId,
    label: &str,
    server_log: impl Fn(&Host) -> String,
) {
    let opts = CallOptions { progress: true, ..CallOptions::default() };
    let slow = host.call_tool(id, "slow", &raw(r#"{"ms":3000}"#), &opts).unwrap();
    poll_until(host, PATIENCE, |h| matches!(h.poll_event(), Some((_, Event::Progress { .. }))));
    host.cancel(id, slow).unwrap();
    let events = events_until_done(host, slow, PATIENCE);
    assert_eq!(events.last().map(String::as_str), Some("failed cancelled"), "{label}");
    // Give the server the time the rest of the call would have taken, then read its log.
    let until = Instant::now() + Duration::from_millis(3500);
    poll_until(host, Duration::from_secs(5), |_| Instant::now() >= until);
    let log = server_log(host);
    assert!(log.contains("[slow] step 1/30"), "{label}: the slow call ran: {log}");
    assert!(
        !log.contains("[slow] step 30/30"),
        "{label}: the server kept running the cancelled call:\n{log}"
    );
    assert_eq!(host.stats(id).unwrap().late_responses, 0, "{label}: no reply for a cancelled call");
    assert_eq!(
        parse(&call(host, id, "echo", r#"{"text":"after"}"#))["content"][0]["text"],
        "after"
    );
}

/// Calls `bump_tools` and waits until both its result and a tools `list_changed` arrived.
#[track_caller]
pub fn bump_and_see_tools_changed(host: &mut Host, id: ServerId) {
    let bump = host.call_tool(id, "bump_tools", &raw("{}"), &CallOptions::default()).unwrap();
    let (mut changed, mut bumped) = (false, false);
    poll_until(host, PATIENCE, |h| {
        while let Some((_, e)) = h.poll_event() {
            match e {
                Event::ListChanged(mcpoll::ListKind::Tools) => changed = true,
                Event::CallDone { call, .. } if call == bump => bumped = true,
                Event::CallFailed { call, error, .. } if call == bump => panic!("{call}: {error}"),
                _ => {}
            }
        }
        changed && bumped
    });
}

/// The lab surface every SDK peer exposes: the full tool list, `echo` (non-ASCII text),
/// `add` (structuredContent) and `fail` (an `isError` result, which is a completed call).
#[track_caller]
pub fn check_lab_tools(host: &mut Host, id: ServerId, label: &str) {
    let list = host.list_tools(id, &CallOptions::default()).unwrap();
    let tools = parse(&host.wait(id, list).unwrap());
    let names: Vec<String> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    for want in ["echo", "add", "slow", "fail", "write_note", "bump_tools"] {
        assert!(names.iter().any(|n| n == want), "{label}: {want} missing from {names:?}");
    }
    let echo = call(host, id, "echo", r#"{"text":"héllo wörld"}"#);
    assert_eq!(parse(&echo)["content"][0]["text"], "héllo wörld", "{label}");
    assert!(!echo.is_error, "{label}");
    let add = call(host, id, "add", r#"{"a":2,"b":3}"#);
    assert_eq!(
        parse(&add)["structuredContent"]["sum"].as_f64(),
        Some(5.0),
        "{label}: {}",
        add.json
    );
    let fail = call(host, id, "fail", "{}");
    assert!(fail.is_error, "{label}: fail must be an isError result: {}", fail.json);
}

/// The demo server serving Streamable HTTP (modern era) on a free loopback port, with `args`
/// after `--http 0`; killed when dropped.
pub struct HttpDemo {
    child: std::process::Child,
    pub url: String,
}

impl HttpDemo {
    pub fn start(args: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(demo_server().program())
            .args(["--http", "0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line.trim().to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Self { child, url }
    }
}

impl Drop for HttpDemo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Drives a running `mcpoll ... watch` (stdout piped): calls `bump` (which adds one tool and
/// returns its name) until the watcher prints its first line, then interrupts the watcher.
/// Returns that line and every name bumped. A watcher that is not listening yet misses a
/// bump (or takes it into its baseline); the next one reaches it, so no wait for the watcher
/// to have had CPU is needed, only the generous outer bound.
#[track_caller]
pub fn first_watch_line(
    mut watcher: std::process::Child,
    mut bump: impl FnMut() -> String,
) -> (serde_json::Value, Vec<String>) {
    use std::io::BufRead;
    let stdout = watcher.stdout.take().expect("the watcher's stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let mut bumped = Vec::new();
    let line = loop {
        assert!(started.elapsed() < PATIENCE, "the watcher printed nothing for {bumped:?}");
        bumped.push(bump());
        // The pace of the bumps, not an assertion: a line that comes later is still taken.
        if let Ok(line) = rx.recv_timeout(Duration::from_secs(2)) {
            break line;
        }
    };
    if let Some(pid) = rustix::process::Pid::from_raw(watcher.id() as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
    }
    let _ = watcher.wait();
    (serde_json::from_str(&line).expect("a JSON line"), bumped)
}

/// Checks a `watch --json` line that reports tools added by [`first_watch_line`]'s bumps.
#[track_caller]
pub fn check_watch_line(line: &serde_json::Value, bumped: &[String]) {
    assert_eq!(line["kind"], "tools", "{line}");
    let added = line["added"].as_array().expect("added names");
    assert!(!added.is_empty(), "{line}");
    assert!(added.iter().all(|n| bumped.iter().any(|b| n == b.as_str())), "{line} {bumped:?}");
    assert_eq!(line["removed"], serde_json::json!([]), "{line}");
    assert_eq!(line["hash"].as_str().map(str::len), Some(16), "{line}");
}

/// What one task-backed call went through (`watch_task`).
#[derive(Debug, Default)]
pub struct TaskSeen {
    pub task: Option<String>,
    pub statuses: Vec<(TaskStatus, Option<String>)>,
    pub done: Option<String>,
    pub failed: Option<CallError>,
}

pub fn watch_task(host: &mut Host, call: CallId, until: impl Fn(&TaskSeen) -> bool) -> TaskSeen {
    let deadline = Instant::now() + PATIENCE;
    let mut seen = TaskSeen::default();
    loop {
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::TaskCreated { call: c, task } if c == call => seen.task = Some(task.into()),
                Event::TaskStatus { call: c, status, message, .. } if c == call => {
                    seen.statuses.push((status, message.map(str::to_owned)))
                }
                Event::CallDone { call: c, result, .. } if c == call => {
                    seen.done = Some(result.json().to_owned())
                }
                Event::CallFailed { call: c, error, .. } if c == call => seen.failed = Some(error),
                _ => {}
            }
            if until(&seen) {
                return seen;
            }
        }
        assert!(Instant::now() < deadline, "not seen within {PATIENCE:?}: {seen:?}");
        host.poll(Some(Duration::from_millis(50))).expect("poll");
    }
}

pub fn task_ended(s: &TaskSeen) -> bool {
    s.done.is_some() || s.failed.is_some()
}
