//! The `mcpoll` binary (feature `cli`), run as a process: results on stdout, one JSON error line
//! on stderr (`--json`), exit codes, progress on a terminal.

mod common;

use std::process::Command;

fn mcpoll() -> Command {
    let mut c = Command::new(common::cli());
    c.arg("--json");
    c
}

fn demo(flags: &str) -> String {
    let path = common::demo_server().program().to_string_lossy().into_owned();
    format!("'{path}' {flags}")
}

fn run(args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = mcpoll().args(args).output().expect("run mcpoll");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), json, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn error_line(stderr: &str) -> serde_json::Value {
    let line = stderr.lines().last().expect("an error line");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

#[test]
fn lists_and_calls_in_both_eras() {
    for flags in ["", "--legacy-only"] {
        let server = demo(flags);
        let (code, tools, err) = run(&["--stdio", &server, "tools"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(tools["tools"].as_array().map(Vec::len), Some(5));
        let (code, result, _) = run(&["--stdio", &server, "call", "add", r#"{"a":1,"b":2}"#]);
        assert_eq!(code, 0);
        assert_eq!(result["structuredContent"]["sum"], 3);
    }
}

#[test]
fn is_error_exits_4_and_failures_are_one_json_line() {
    let server = demo("");
    // A tool's isError result is printed like any result, and the exit code tells a script.
    let (code, result, err) = run(&["--stdio", &server, "call", "fail"]);
    assert_eq!((code, &result["isError"]), (4, &serde_json::json!(true)), "{err}");
    assert!(err.is_empty(), "no error line for a completed call: {err}");
    let text = Command::new(common::cli()).args(["--stdio", &server, "call", "fail"]).output();
    let text = text.expect("run mcpoll");
    assert_eq!(text.status.code(), Some(4), "text mode too");
    assert!(!text.stdout.is_empty(), "the result is printed");
    let (code, _, _) = run(&["--stdio", &server, "call", "echo", r#"{"text":"ok"}"#]);
    assert_eq!(code, 0, "a result without isError");

    let (code, _, err) = run(&["--stdio", &server, "call", "nope", "{}"]);
    assert_eq!(code, 1);
    let e = error_line(&err);
    assert_eq!(
        (e["error"]["kind"].as_str(), e["error"]["name"].as_str()),
        (Some("protocol"), Some("invalid_params"))
    );

    let (code, _, err) =
        run(&["--stdio", &server, "--timeout", "200", "call", "slow", r#"{"ms":3000}"#]);
    assert_eq!(code, 1);
    assert_eq!(error_line(&err)["error"]["name"], "deadline_exceeded");

    // echo is read-only (the CLI lists the tools first): every attempt crashes the server,
    // each is retried on a restarted process, and the last exit is the error.
    let (code, _, err) = run(&["--stdio", &demo("--crash-on echo"), "call", "echo", "{}"]);
    assert_eq!(code, 1);
    let e = error_line(&err);
    assert_eq!(
        (e["error"]["kind"].as_str(), e["error"]["name"].as_str()),
        (Some("transport"), Some("process_exit"))
    );
    assert!(e["error"]["message"].as_str().unwrap().contains("exited with code 7"), "{e}");
    // write_note is not safe to repeat: the crash leaves its outcome unknown.
    let (code, _, err) =
        run(&["--stdio", &demo("--crash-on write_note"), "call", "write_note", r#"{"note":"n"}"#]);
    assert_eq!(code, 1);
    let e = error_line(&err);
    assert_eq!(
        (e["error"]["kind"].as_str(), e["error"]["name"].as_str()),
        (Some("local"), Some("delivery_unknown"))
    );

    let (code, _, err) = run(&["--stdio", "/nonexistent/server", "tools"]);
    assert_eq!(code, 1);
    assert_eq!(error_line(&err)["error"]["name"], "spawn_failed");

    let (code, _, _) = run(&["--stdio", &server, "call", "echo", "[1]"]);
    assert_eq!(code, 2, "bad usage");
    let (code, _, _) = run(&["--stdio", "'unclosed", "tools"]);
    assert_eq!(code, 2, "bad command line");
}

/// Progress is drawn on stderr when it is a terminal (a pty from util-linux `script`), one line
/// rewritten in place and cleared before the result; on a pipe, nothing is drawn.
#[test]
fn progress_is_drawn_on_a_terminal_only() {
    let exe = common::cli();
    let server = demo("");
    let line = format!("'{}' --stdio \"{server}\" call slow '{{\"ms\":500}}'", exe.display());
    let out = match Command::new("script").args(["-qec", &line, "/dev/null"]).output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("\n!!!!!!!! SKIPPED: no `script` to make a terminal with: {e} !!!!!!!!\n");
            return;
        }
    };
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{tty}");
    assert!(tty.contains("\r\x1b[2K[1/5]  step 1/5"), "{tty:?}");
    assert!(tty.contains("\r\x1b[2Kslept 500 ms"), "cleared before the result: {tty:?}");

    let out =
        Command::new(exe).args(["--stdio", &server, "call", "slow", r#"{"ms":300}"#]).output();
    let out = out.expect("run mcpoll");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "slept 300 ms\n");
    assert!(out.stderr.is_empty(), "{:?}", String::from_utf8_lossy(&out.stderr));
}

/// Ctrl-C while the CLI lists the tools before a call ends it at once with 130. The server
/// never answers `tools/list`, so without the check the CLI would wait out `--timeout` (here
/// 20 s) and then make the call.
#[test]
fn ctrl_c_during_the_listing_before_a_call_ends_the_cli_at_once() {
    let log =
        std::env::temp_dir().join(format!("mcpoll-cli-silent-list-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let path = common::demo_server().program().to_string_lossy().into_owned();
    // The server's stderr goes to a file, so the test sees when the listing has arrived.
    let server = format!("sh -c \"exec '{path}' --silent-list 2>>'{}'\"", log.display());
    let child = mcpoll()
        .args(["--timeout", "120000", "--stdio", &server, "call", "echo", r#"{"text":"x"}"#])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run mcpoll");
    let waiting = std::time::Instant::now();
    while !std::fs::read_to_string(&log).unwrap_or_default().contains("not answering tools/list") {
        assert!(waiting.elapsed() < common::PATIENCE, "no tools/list arrived");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    let sent = std::time::Instant::now();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("SIGINT");
    let out = child.wait_with_output().expect("wait");
    let took = sent.elapsed();
    let _ = std::fs::remove_file(&log);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert_eq!(error_line(&stderr)["error"]["name"], "interrupted", "{stderr}");
    assert!(out.stdout.is_empty(), "no call was made: {:?}", String::from_utf8_lossy(&out.stdout));
    // Without the check it would wait out --timeout (120 s) before even making the call.
    assert!(took < std::time::Duration::from_secs(30), "the CLI took {took:?} to end");
}

/// The example configuration starts `mcpoll echo-server`: it works from any folder, with no
/// build step of its own, as soon as the CLI is on the PATH.
#[test]
fn the_example_config_works_from_any_folder() {
    let cli = common::cli();
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mcp.json");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![cli.parent().expect("the CLI's folder").to_owned()];
    dirs.extend(std::env::split_paths(&path));
    let out = Command::new(&cli)
        .arg("--config")
        .arg(&config)
        .args(["call", "echo", r#"{"text":"from anywhere"}"#])
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run mcpoll");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from anywhere\n", "{stderr}");
}

/// A program that cannot be started is named in the error, beside what the system said.
#[test]
fn a_missing_program_is_named() {
    let (code, _, err) = run(&["--stdio", "/nonexistent/mcp-server --flag", "tools"]);
    assert_eq!(code, 1, "{err}");
    let message = error_line(&err)["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("/nonexistent/mcp-server"), "{message}");
    assert!(message.contains("No such file or directory"), "{message}");
}

/// A server that exits at once: the error gives the first exit's code and the server's own
/// message, not only "degraded".
#[test]
fn a_server_that_exits_at_once_is_explained_by_its_first_exit() {
    let (code, _, err) = run(&["--stdio", &demo("--fault exit-on-start"), "tools"]);
    assert_eq!(code, 1, "{err}");
    let e = error_line(&err);
    let message = e["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("exited with code"), "{e}");
    assert!(message.contains("[fault] exit-on-start"), "{e}");
}

/// `--timeout` bounds the whole command, connecting included: a server that accepts the
/// connection and never answers ends the command at the deadline, not after the era probe
/// (5 s) and the handshake (30 s) have each waited out theirs.
#[test]
fn the_timeout_bounds_connecting_too() {
    // Never accepted: the kernel completes the handshake, nothing is ever read or written.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", silent.local_addr().unwrap());
    let started = std::time::Instant::now();
    let (code, _, err) = run(&["--http", &url, "--timeout", "1000", "tools"]);
    let took = started.elapsed();
    assert_eq!(code, 1, "{err}");
    assert_eq!(error_line(&err)["error"]["name"], "deadline_exceeded", "{err}");
    // The old bound was the probe's 5 s and then the handshake's 30 s; 1 s and a busy
    // machine's scheduling stay well under that.
    assert!(took < std::time::Duration::from_secs(25), "took {took:?}");
}

#[test]
fn local_refusals_exit_3_and_say_why() {
    // --confirm without a terminal: a tool that may destroy (`add` has no hints) is refused
    // unsent; a read-only one (`echo`) is called.
    let server = demo("");
    let stdin_not_a_terminal = || {
        let mut c = mcpoll();
        c.stdin(std::process::Stdio::null());
        c
    };
    let out = stdin_not_a_terminal()
        .args(["--stdio", &server, "--confirm", "call", "add", r#"{"a":1,"b":2}"#])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let e = error_line(&err);
    assert_eq!(e["error"]["name"], "authorization_denied", "{err}");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(message.contains("not a terminal") && message.contains("not sent"), "{message}");
    let out = stdin_not_a_terminal()
        .args(["--stdio", &server, "--confirm", "call", "echo", r#"{"text":"hi"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    // An mcpServers file's disabledTools: refused, not listed; alwaysAllow passes --confirm.
    let dir = std::env::temp_dir().join(format!("mcpoll-cli-authz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mcp.json");
    let program = common::demo_server().program().to_string_lossy().into_owned();
    let config = serde_json::json!({"mcpServers": {"demo": {
        "command": program, "disabledTools": ["slow"], "alwaysAllow": ["add"]}}});
    std::fs::write(&file, config.to_string()).unwrap();
    let file = file.to_string_lossy().into_owned();
    let (code, _, err) = run(&["--config", &file, "call", "slow", r#"{"ms":1}"#]);
    assert_eq!(code, 3, "{err}");
    assert!(error_line(&err)["error"]["message"].as_str().unwrap().contains("disabled"), "{err}");
    let (code, tools, err) = run(&["--config", &file, "tools"]);
    assert_eq!(code, 0, "{err}");
    let names: Vec<&str> =
        tools["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"add"), "{names:?}");
    let out = stdin_not_a_terminal()
        .args(["--config", &file, "--confirm", "call", "add", r#"{"a":1,"b":2}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 21: a config file whose URL is not http(s) is a configuration fault (exit 2) named by
/// file, server and key, found when the file is read; before, the CLI tried the server and
/// failed with `local/setup_failed`, naming nothing. `--issuer` only goes with
/// `--client-credentials`.
#[test]
fn a_config_url_that_is_not_http_is_a_config_error_naming_file_server_and_key() {
    let dir = std::env::temp_dir().join(format!("mcpoll-cli-bad-url-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (url, why) in
        [("file:///etc/passwd", "http:// or https://"), ("http://u:p@h/", "credentials")]
    {
        let file = dir.join("mcp.json");
        let body = serde_json::json!({"mcpServers": {"remote": {"url": url}}});
        std::fs::write(&file, body.to_string()).unwrap();
        let (code, _, stderr) = run(&["--config", file.to_str().unwrap(), "tools"]);
        assert_eq!(code, 2, "{url}: {stderr}");
        let line = error_line(&stderr);
        let message = line["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("mcp.json"), "{line}");
        assert!(
            message.contains(r#"server "remote""#) && message.contains(r#"key "url""#),
            "{line}"
        );
        assert!(message.contains(why), "{line}");
        assert!(!message.contains("u:p"), "{line}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let (code, _, stderr) =
        run(&["--http", "http://127.0.0.1:1/mcp", "--issuer", "https://a", "tools"]);
    assert_eq!(code, 2, "{stderr}");
}

/// Issue 21: `--bearer` with a line break fails at once (exit 1, `setup_failed`), not after
/// the probe and handshake timeouts.
#[test]
fn a_bearer_token_with_a_line_break_fails_at_once() {
    let (code, _, stderr) =
        run(&["--http", "http://127.0.0.1:9/mcp", "--bearer", "a\r\nX-Evil: 1", "tools"]);
    assert_eq!(code, 1, "{stderr}");
    let line = error_line(&stderr);
    assert_eq!(line["error"]["name"], "setup_failed", "{line}");
    assert!(line["error"]["message"].as_str().unwrap_or_default().contains("bearer"), "{line}");
}

/// A reader that stops early (`mcpoll ... tools | head -1`) ends the program quietly with
/// 141, as SIGPIPE would a C program: `print!` panicked on the closed pipe (exit 101).
#[test]
fn a_reader_that_goes_away_ends_the_program_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let server = demo("--bulk-tools 20000");
    let mut child = Command::new(common::cli())
        .args(["--stdio", &server, "tools"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mcpoll");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.starts_with("bulk_"), "{first}");
    drop(out);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(141), "{stderr}");
}

/// An argument that is not UTF-8 is a usage error (exit 2), not a panic (exit 101).
#[test]
fn an_argument_that_is_not_utf8_is_a_usage_error() {
    use std::os::unix::ffi::OsStrExt;
    let bad = std::ffi::OsStr::from_bytes(b"\xff");
    let out = mcpoll().args(["--root".as_ref(), bad, "tools".as_ref()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(error_line(&stderr)["error"]["name"], "usage", "{stderr}");
}

/// Ctrl-C at the `--confirm` prompt ends the CLI with 130 and sends nothing. The prompt read
/// stdin with a plain `read_line`, which the signal does not interrupt (the handler restarts
/// it): `^C` showed and nothing happened until Enter. In a terminal made by util-linux
/// `script`; the shell writes its pid (mcpoll's, after `exec`) for the signal.
#[test]
fn ctrl_c_at_the_confirm_prompt_ends_the_cli() {
    use std::io::Read;
    use std::process::Stdio;
    let exe = common::cli();
    let server = demo("");
    let pid_file =
        std::env::temp_dir().join(format!("mcpoll-cli-confirm-{}.pid", std::process::id()));
    let _ = std::fs::remove_file(&pid_file);
    let line = format!(
        "echo $$ > '{}'; exec '{}' --stdio \"{server}\" --confirm call add '{{\"a\":1,\"b\":2}}'",
        pid_file.display(),
        exe.display()
    );
    let child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            eprintln!("\n!!!!!!!! SKIPPED: no `script` to make a terminal with: {e} !!!!!!!!\n");
            return;
        }
    };
    let mut tty = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = tty.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut shown = Vec::new();
    let deadline = std::time::Instant::now() + common::PATIENCE;
    while !String::from_utf8_lossy(&shown).contains("[y/N]") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(bytes) => shown.extend(bytes),
            Err(_) => panic!("no prompt: {:?}", String::from_utf8_lossy(&shown)),
        }
    }
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let _ = std::fs::remove_file(&pid_file);
    let pid = rustix::process::Pid::from_raw(pid).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("SIGINT");
    // Without the fix the prompt waits for a line that never comes: the wait below would end
    // only by the kill after it.
    let ended = std::time::Instant::now() + common::PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > ended {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let status = status.expect("the CLI never ended after Ctrl-C at the prompt");
    assert_eq!(status.code(), Some(130));
}

/// `watch` on a server that offers no tools (resources only) watches what it has: it listed
/// tools first for its baseline, and the server's -32601 ended it (exit 1, `catalog`). The
/// server is a few lines of Python on stdio, of the 2026-07-28 era, that marks a file when
/// the watch's listen stream arrives; then Ctrl-C ends the watch as it ends any (130).
#[test]
fn watch_on_a_server_without_tools_watches_what_it_has() {
    let script = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "server/discover":
        r = {"resultType": "complete", "supportedVersions": ["2026-07-28"],
             "capabilities": {"resources": {"listChanged": True}},
             "serverInfo": {"name": "resources-only", "version": "1"}}
        out = {"jsonrpc": "2.0", "id": m["id"], "result": r}
    elif m["method"] == "subscriptions/listen":
        open(sys.argv[1], "w").close()
        continue
    else:
        out = {"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}}
    print(json.dumps(out), flush=True)
"#;
    let dir = std::env::temp_dir().join(format!("mcpoll-cli-no-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (file, listening) = (dir.join("server.py"), dir.join("listening"));
    std::fs::write(&file, script).unwrap();
    let server = format!("python3 '{}' '{}'", file.display(), listening.display());
    let mut child = mcpoll()
        .args(["--stdio", &server, "watch"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run mcpoll");
    // The event itself: the listen stream reached the server, or the watch ended before it.
    let waiting = std::time::Instant::now();
    while !listening.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            panic!("the watch ended ({status}) before it listened: {err}");
        }
        assert!(waiting.elapsed() < common::PATIENCE, "no listen stream arrived");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("SIGINT");
    let out = child.wait_with_output().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert_eq!(error_line(&err)["error"]["name"], "interrupted", "{err}");
}

/// A URL or a header given on the command line that cannot be used is bad usage (exit 2, as
/// the same URL from a configuration file is), not a setup failure (exit 1).
/// A mistyped command, or arguments that are not a JSON object, are a usage error before any
/// server is started: not "could not start the server" for a missing program, nor after a
/// slow server's download and handshake.
#[test]
fn a_bad_command_is_bad_usage_before_the_server_starts() {
    for args in [
        &["--stdio", "/nonexistent/server", "frobnicate"][..],
        &["--stdio", "/nonexistent/server", "call", "echo", "not json"][..],
        &["--stdio", "/nonexistent/server", "read"][..],
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(error_line(&err)["error"]["name"], "usage", "{err}");
    }
}

#[test]
fn an_unusable_url_or_header_on_the_command_line_is_bad_usage() {
    for args in [
        &["--http", "ftp://127.0.0.1/mcp", "tools"][..],
        &["--http", "http://127.0.0.1:9/mcp", "--header", "Bad Name: v", "tools"][..],
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(error_line(&err)["error"]["name"], "usage", "{err}");
    }
}
