//! The `mcpoll` binary run as a user would: an `mcpServers` file naming the Python SDK peer
//! over stdio and the TypeScript SDK v2 peer over HTTP on 127.0.0.1, every subcommand, and
//! Ctrl-C (SIGINT to the CLI process) during a slow call, seen arriving in the server's own
//! log. Needs the peers (`tests/peers/setup.sh`); `MCPOLL_SKIP_PEERS=1` skips it.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{cli, peers_dir, HttpPeer};
use serde_json::Value;

/// A config file in a fresh folder, with the py peer's stderr going to `py.log` beside it.
struct Setup {
    dir: PathBuf,
    config: PathBuf,
    ts2: HttpPeer,
}

impl Setup {
    fn new(peers: &Path, name: &str) -> Self {
        let ts2 = HttpPeer::start(peers, "run-ts2-http.sh");
        let dir = std::env::temp_dir().join(format!("mcpoll-cli-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("py.log");
        let _ = std::fs::remove_file(&log);
        // The py entry: the peer's run script, its stderr sent to a file by `sh` so the test
        // can read the server's log (the CLI keeps a child's stderr to itself). The ts2 entry
        // takes its port from the environment, through `${VAR}` expansion.
        let config = serde_json::json!({
            "mcpServers": {
                "py": {
                    "command": "sh",
                    "args": ["-c", "exec \"$0\" 2>>\"$1\"",
                             peers.join("run-py-stdio.sh"), log],
                    "env": {"LAB_NOTE": "${LAB_NOTE:-from the file}"},
                    "autoApprove": [],
                    "mcpoll": {"timeoutMs": 60000, "retry": {"maxAttempts": 1}}
                },
                "ts2": {
                    "type": "http",
                    "url": "http://127.0.0.1:${env:TS2_PORT}/mcp",
                    "headers": {"X-Lab": "${TS2_PORT}"},
                    "mcpoll": {"timeoutMs": 60000, "proxy": "direct", "maxConnections": 2}
                }
            }
        });
        let path = dir.join("mcp.json");
        std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
        Self { dir, config: path, ts2 }
    }

    fn command(&self, server: &str, args: &[&str]) -> Command {
        let mut c = Command::new(cli());
        c.env("TS2_PORT", self.ts2.port.to_string())
            .arg("--config")
            .arg(&self.config)
            .args(["--server", server])
            .args(args)
            .stdin(Stdio::null());
        c
    }

    #[track_caller]
    fn run(&self, server: &str, args: &[&str]) -> Output {
        let out = self.command(server, args).output().expect("run mcpoll");
        assert!(
            out.status.success(),
            "{server} {args:?}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    #[track_caller]
    fn json(&self, server: &str, args: &[&str]) -> Value {
        let out = self.run(server, &[&["--json"], args].concat());
        serde_json::from_slice(&out.stdout).expect("JSON on stdout")
    }

    #[track_caller]
    fn text(&self, server: &str, args: &[&str]) -> String {
        String::from_utf8(self.run(server, args).stdout).expect("UTF-8")
    }

    fn py_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("py.log")).unwrap_or_default()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.ts2.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits (bounded) until `log()` satisfies `pred`.
#[track_caller]
fn wait_log(what: &str, log: impl Fn() -> String, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + common::PATIENCE;
    loop {
        let text = log();
        if pred(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{what} never showed in the log:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGINT to one process (not a group), as a terminal's Ctrl-C would send it to the CLI.
fn interrupt(pid: u32) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("SIGINT");
}

#[test]
fn every_subcommand_against_py_over_stdio_and_ts2_over_http() {
    let Some(peers) = peers_dir() else { return };
    let s = Setup::new(&peers, "all");

    let info = s.json("py", &["discover"]);
    let text = info.to_string();
    assert!(text.contains("lab-py"), "{info}");
    assert!(s.text("py", &["discover"]).starts_with("server:       lab-py"));

    let tools = s.json("py", &["tools"]);
    assert!(tools["tools"].as_array().unwrap().iter().any(|t| t["name"] == "slow"), "{tools}");
    let readable = s.text("ts2", &["tools"]);
    assert!(readable.lines().any(|l| l.starts_with("echo ")), "{readable}");
    assert!(readable.contains("(read-only)"), "{readable}");

    let sum = s.json("py", &["call", "add", r#"{"a":20,"b":22}"#]);
    assert_eq!(sum["structuredContent"]["sum"].as_f64(), Some(42.0), "{sum}");
    assert_eq!(s.text("ts2", &["call", "echo", r#"{"text":"héllo"}"#]), "héllo\n");
    // A tool's isError result is printed, and exits 4 for scripts.
    let fail = s.command("ts2", &["call", "fail"]).output().expect("run mcpoll");
    assert_eq!(fail.status.code(), Some(4), "{}", String::from_utf8_lossy(&fail.stderr));
    assert!(String::from_utf8_lossy(&fail.stdout).starts_with("the tool reported an error:"));

    let resources = s.json("ts2", &["resources"]);
    assert_eq!(resources["resources"][0]["uri"], "lab://readme", "{resources}");
    assert!(s.text("py", &["resources"]).starts_with("lab://readme"));
    for server in ["py", "ts2"] {
        let read = s.json(server, &["read", "lab://readme"]);
        let readme = read["contents"][0]["text"].as_str().expect("text contents").to_owned();
        assert!(!readme.is_empty());
        assert_eq!(s.text(server, &["read", "lab://readme"]).trim_end(), readme.trim_end());
    }

    assert!(s.text("py", &["prompts"]).starts_with("greet(name*)"));
    let prompts = s.json("ts2", &["prompts"]);
    assert_eq!(prompts["prompts"][0]["name"], "greet", "{prompts}");
    let got = s.json("py", &["get", "greet", r#"{"name":"Ada"}"#]);
    assert!(got["messages"][0]["content"]["text"].as_str().unwrap().contains("Ada"), "{got}");
    let got = s.text("ts2", &["get", "greet", r#"{"name":"Ada"}"#]);
    assert!(got.starts_with("user: ") && got.contains("Ada"), "{got}");

    // watch: a second client adds a tool to the shared HTTP server; the watcher prints the
    // change as one JSON line.
    let watcher = s
        .command("ts2", &["--json", "--timeout", "120000", "watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run mcpoll watch");
    let bump = || {
        let said = s.text("ts2", &["call", "bump_tools"]);
        said.strip_prefix("added ").expect("added extra_N").trim_end().to_owned()
    };
    let (line, bumped) = common::first_watch_line(watcher, bump);
    common::check_watch_line(&line, &bumped);

    // A name the file does not have is bad usage (2), said in one JSON line with --json.
    let out = s.command("nope", &["--json", "tools"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let line: Value = serde_json::from_slice(&out.stderr).expect("one JSON line");
    assert_eq!(line["error"]["name"], "usage", "{line}");
}

/// Runs `call slow` through the CLI, waits for the server's first step, sends SIGINT and
/// checks the exit: code 130, one JSON line naming the interruption, no progress drawn on a
/// stderr that is not a terminal, and the CLI gone long before the call would have ended.
#[track_caller]
fn interrupt_slow_call(s: &Setup, server: &str, log: impl Fn() -> String) {
    let child = s
        .command(server, &["--json", "call", "slow", r#"{"ms":150000}"#])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mcpoll");
    wait_log("[slow] step 1/", &log, |l| l.contains("[slow] step 1/"));
    let sent = Instant::now();
    interrupt(child.id());
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{server}: {:?} {stderr}", out.status);
    let line: Value = serde_json::from_str(stderr.trim_end()).expect("one JSON error line");
    assert_eq!(line["error"]["name"], "interrupted", "{server}: {stderr}");
    assert!(!stderr.contains('\r'), "{server}: progress drawn on a pipe: {stderr:?}");
    // The call had most of 150 s (and the file's 60 s timeout) to go: ending within half a
    // minute is the interrupt's doing, however busy the machine.
    assert!(took < Duration::from_secs(30), "{server}: the CLI took {took:?} to end");
}

/// Ctrl-C on a stdio call: `notifications/cancelled` reaches the Python SDK, whose log records
/// the notification (not only the work ending, which the server shutting down would also do).
#[test]
fn ctrl_c_cancels_a_slow_call_over_stdio() {
    let Some(peers) = peers_dir() else { return };
    let s = Setup::new(&peers, "sigint-stdio");
    interrupt_slow_call(&s, "py", || s.py_log());
    let log = wait_log("the cancellation", || s.py_log(), |l| l.contains("[slow] cancelled"));
    assert!(log.contains("[cancel] notifications/cancelled for request"), "{log}");
    assert!(!log.contains("[slow] step 1500/1500"), "{log}");
}

/// Ctrl-C on an HTTP call to a 2026-07-28 server: the response stream is closed, and the
/// TypeScript SDK's request signal fires, which its log shows; the server keeps serving.
#[test]
fn ctrl_c_cancels_a_slow_call_over_http() {
    let Some(peers) = peers_dir() else { return };
    let s = Setup::new(&peers, "sigint-http");
    interrupt_slow_call(&s, "ts2", || s.ts2.stderr());
    let log = wait_log("the cancellation", || s.ts2.stderr(), |l| l.contains("[slow] cancelled"));
    // No step after the cancellation: the work stopped.
    let after = &log[log.find("[slow] cancelled").unwrap()..];
    assert!(!after.contains("[slow] step"), "{log}");
    assert_eq!(s.text("ts2", &["call", "echo", r#"{"text":"still up"}"#]), "still up\n");
}

/// `Host::from_config` starts every enabled server of a file and names them; a disabled one
/// is parsed but not started.
#[test]
fn host_from_config_starts_the_enabled_servers_by_name() {
    let demo = common::demo_server().program().to_string_lossy().into_owned();
    let dir = std::env::temp_dir().join(format!("mcpoll-from-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mcp.json");
    let config = serde_json::json!({"mcpServers": {
        "demo": {"command": demo, "args": ["--legacy-only"], "mcpoll": {"era": "legacy"}},
        "off": {"command": "/nonexistent/server", "disabled": true}
    }});
    std::fs::write(&path, config.to_string()).unwrap();
    let (mut host, names) = mcpoll::Host::from_config(&path).expect("from_config");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(names.iter().map(|(n, _)| n).collect::<Vec<_>>(), ["demo"]);
    assert!(names.get("off").is_none());
    let id = names.get("demo").unwrap();
    // Records name the server by its key in the file, not by its program.
    assert_eq!(host.server_name(id), Some("demo"));
    host.wait_ready(id, common::PATIENCE).expect("ready");
    assert_eq!(host.era(id), Some(mcpoll::Era::Legacy));
    let r = common::call(&mut host, id, "add", r#"{"a":1,"b":2}"#);
    assert_eq!(common::parse(&r)["structuredContent"]["sum"], 3);

    let e = mcpoll::Host::from_config(dir.join("missing.json")).unwrap_err();
    assert!(matches!(e, mcpoll::FromConfigError::File(_)), "{e}");
}

/// A server whose `mcpoll.roots` fail a check (a directory that does not exist) is refused
/// before it starts: no process, and no event for a server the caller was never given. It was
/// started, removed again, and its `Closed` event came from the first poll.
#[test]
fn a_file_servers_bad_roots_are_refused_before_it_starts() {
    let demo = common::demo_server().program().to_string_lossy().into_owned();
    let dir = std::env::temp_dir().join(format!("mcpoll-bad-roots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mcp.json");
    let answers = serde_json::json!({"roots": ["/nonexistent/mcpoll-root"]});
    let config = serde_json::json!({"mcpServers": {"demo": {"command": demo, "mcpoll": answers}}});
    std::fs::write(&path, config.to_string()).unwrap();
    let (mut host, names) = mcpoll::Host::from_config(&path).expect("from_config");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(names.get("demo").is_none());
    let refused = names.failures().iter().any(|f| {
        matches!(f, mcpoll::FromConfigError::Add { error: mcpoll::AddServerError::Roots(_), .. })
    });
    assert!(refused, "{:?}", names.failures());
    for _ in 0..3 {
        host.poll(Some(std::time::Duration::from_millis(10))).unwrap();
        assert!(host.poll_event().is_none(), "an event for a server nobody was given");
    }
}

/// Roots for a file server, from the command line (`--root`, repeatable) and the file
/// (`mcpoll.roots`, relative to the file's folder), reach the Python SDK peer in both eras;
/// a root the library's checks refuse (missing, `..`) is bad usage (exit 2), nothing called.
#[test]
fn roots_from_the_file_and_the_command_line_reach_the_server() {
    let Some(peers) = peers_dir() else { return };
    let dir = std::env::temp_dir().join(format!("mcpoll-cli-roots-{}", std::process::id()));
    let (a, b) = (dir.join("a"), dir.join("b c"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let config = dir.join("mcp.json");
    let entry = serde_json::json!({"mcpServers": {"py": {
        "command": peers.join("run-py-stdio.sh"), "mcpoll": {"roots": ["a"]}}}});
    std::fs::write(&config, entry.to_string()).unwrap();
    let run = |extra: &[&str]| {
        let out = Command::new(cli())
            .arg("--config")
            .arg(&config)
            .args(["--json", "--timeout", "60000"])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .expect("run mcpoll");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.code(), stdout, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let b_flag = b.to_str().unwrap();
    for era in ["--modern", "--legacy"] {
        let (code, out, err) = run(&["--root", b_flag, era, "call", "roots"]);
        assert_eq!(code, Some(0), "{era}: {err}");
        let uris = format!(
            "file://{},file://{}",
            a.display(),
            b.display().to_string().replace(' ', "%20")
        );
        assert!(out.contains(&uris), "{era}: {out}");
    }
    let missing = dir.join("missing");
    for bad in [missing.to_str().unwrap(), "/tmp/../etc"] {
        let (code, _, err) = run(&["--root", bad, "call", "roots"]);
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(err.contains("roots[1].uri"), "{bad}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One entry whose `command` uses an unset variable does not block the file: the CLI runs
/// the other server, and fails (exit 2, naming the file, the server and the key) only when
/// asked for the bad one; `Host::from_config` starts the good entries and reports the bad one
/// by name.
#[test]
fn one_bad_entry_does_not_block_the_others() {
    let demo = common::demo_server().program().to_string_lossy().into_owned();
    let dir = std::env::temp_dir().join(format!("mcpoll-bad-entry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mcp.json");
    let config = serde_json::json!({"mcpServers": {
        "broken": {"command": "${MCPOLL_TEST_UNSET_LAB_DIR}/run.sh"},
        "other": {"command": demo},
        "spawns-not": {"command": "/nonexistent/server"}
    }});
    std::fs::write(&path, config.to_string()).unwrap();
    let cli_run = |server: &str| {
        Command::new(cli())
            .arg("--config")
            .arg(&path)
            .args(["--server", server, "--json", "call", "add", r#"{"a":2,"b":3}"#])
            .env_remove("MCPOLL_TEST_UNSET_LAB_DIR")
            .stdin(Stdio::null())
            .output()
            .expect("run mcpoll")
    };
    let out = cli_run("other");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["structuredContent"]["sum"], 5);
    let out = cli_run("broken");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mcp.json: server \\\"broken\\\": key \\\"command\\\"")
            && err.contains("MCPOLL_TEST_UNSET_LAB_DIR"),
        "{err}"
    );

    let (mut host, names) = mcpoll::Host::from_config(&path).expect("from_config");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(names.iter().map(|(n, _)| n).collect::<Vec<_>>(), ["other"]);
    let failures: Vec<String> = names.failures().iter().map(ToString::to_string).collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    match &names.failures()[0] {
        mcpoll::FromConfigError::File(e) => {
            assert_eq!((e.server.as_deref(), e.key.as_deref()), (Some("broken"), Some("command")));
            assert!(e.file.ends_with("mcp.json"), "{e}");
        }
        other => panic!("{other}"),
    }
    match &names.failures()[1] {
        mcpoll::FromConfigError::Add { server, error: mcpoll::AddServerError::Spawn { .. } } => {
            assert_eq!(server, "spawns-not")
        }
        other => panic!("{other}"),
    }
    let id = names.get("other").unwrap();
    host.wait_ready(id, Duration::from_secs(20)).expect("ready");
    let r = common::call(&mut host, id, "add", r#"{"a":1,"b":2}"#);
    assert_eq!(common::parse(&r)["structuredContent"]["sum"], 3);
}
