//! Interop with widely used real MCP servers over stdio, not only the SDK peers: the reference
//! servers `@modelcontextprotocol/server-filesystem` and `server-memory` (npm, TypeScript SDK
//! v1, 2025-11-25) and `mcp-server-git` and `mcp-server-time` (PyPI, Python SDK v2,
//! 2026-07-28), at the exact versions `tests/peers` pins. Each is started as a configuration
//! file's server would be (`StdioCommand::safe_env`, the host's secrets withheld) and driven
//! through real calls whose results are checked: the filesystem server is given its allowed
//! directory as the client's roots, and refuses a path outside them (directly, by `..` and by
//! a symlink); the git server reads the log of a repository the test makes.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use mcpoll::{Config, Host, ServerId, ServerRequestKinds, StdioCommand};

/// The start script `script` of the installed peers, or `None` when the run opted out with
/// `MCPOLL_SKIP_PEERS=1`. An install made before these servers were pinned fails, naming the
/// fix (running the setup script again installs what is missing).
fn real_server(script: &str, installed: &str) -> Option<StdioCommand> {
    let dir = peers_dir()?;
    if !dir.join(script).exists() || !dir.join(installed).exists() {
        if std::env::var("MCPOLL_SKIP_PEERS").is_ok_and(|v| v == "1") {
            return None;
        }
        panic!(
            "{script} or {installed} is missing in {}: run tests/peers/setup.sh again",
            dir.display()
        );
    }
    Some(StdioCommand::new(dir.join(script)).safe_env())
}

/// A fresh directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir()
            .canonicalize()
            .unwrap()
            .join(format!("mcpoll-real-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A tool's result: whether it is an error, its first text, and the whole result.
fn tool(host: &mut Host, id: ServerId, name: &str, args: serde_json::Value) -> (bool, String) {
    let r = call(host, id, name, &args.to_string());
    let text = parse(&r)["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    (r.is_error, text)
}

fn structured(
    host: &mut Host,
    id: ServerId,
    name: &str,
    args: serde_json::Value,
) -> serde_json::Value {
    let r = call(host, id, name, &args.to_string());
    assert!(!r.is_error, "{name} failed: {}", r.json);
    parse(&r)["structuredContent"].clone()
}

fn tool_names(host: &mut Host, id: ServerId) -> Vec<String> {
    host.tool_catalog_blocking(id, PATIENCE).unwrap().names().map(str::to_owned).collect()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn filesystem_server_works_inside_the_clients_roots_and_refuses_outside() {
    let Some(cmd) = real_server(
        "run-fs-stdio.sh",
        "node_modules/@modelcontextprotocol/server-filesystem/package.json",
    ) else {
        return;
    };
    let scratch = Scratch::new("fs");
    let (root, outside) = (scratch.0.join("root"), scratch.0.join("outside"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("hello.txt"), "hello from mcpoll\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "not for the server\n").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("link.txt")).unwrap();

    // Started without directory arguments: the server takes its allowed directories from the
    // client's roots, which it asks for once initialized.
    let answers = ServerRequestKinds { roots: true, ..ServerRequestKinds::default() };
    let config = Config { answers, probe_timeout: PATIENCE, ..Config::default() };
    let mut host = Host::new().unwrap();
    let id = host.add_stdio_server(cmd, config).unwrap();
    host.set_root_dirs(id, &[&root]).unwrap();
    let state = host.wait_ready(id, PATIENCE).unwrap();
    assert!(matches!(state, mcpoll::ServerState::Ready(..)), "{state:?}");
    assert_eq!(host.era(id), Some(mcpoll::Era::Legacy));
    // The server applies the roots after answering `initialized`; it says so on stderr.
    poll_until(&mut host, PATIENCE, |h| {
        h.stderr_tail(id).unwrap_or_default().contains("Updated allowed directories from MCP roots")
    });

    let names = tool_names(&mut host, id);
    for want in ["read_text_file", "write_file", "list_directory", "list_allowed_directories"] {
        assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
    }
    let (err, text) = tool(&mut host, id, "list_allowed_directories", serde_json::json!({}));
    assert!(!err, "{text}");
    assert_eq!(text.lines().skip(1).collect::<Vec<_>>(), [path(&root)], "{text}");

    let hello = root.join("hello.txt");
    let (err, text) = tool(&mut host, id, "read_text_file", serde_json::json!({"path": hello}));
    assert_eq!((err, text.as_str()), (false, "hello from mcpoll\n"));

    let written = root.join("new.txt");
    let args = serde_json::json!({"path": written, "content": "written through mcpoll"});
    let (err, text) = tool(&mut host, id, "write_file", args);
    assert!(!err, "{text}");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "written through mcpoll");

    let (err, text) = tool(&mut host, id, "list_directory", serde_json::json!({"path": root}));
    assert!(!err, "{text}");
    let mut listed: Vec<&str> = text.lines().collect();
    listed.sort_unstable();
    assert_eq!(listed, ["[FILE] hello.txt", "[FILE] link.txt", "[FILE] new.txt"], "{text}");

    // Outside the roots: directly, through `..`, and through a symlink inside the root.
    let secret = outside.join("secret.txt");
    let dotdot = root.join("..").join("outside").join("secret.txt");
    for (name, args) in [
        ("read_text_file", serde_json::json!({"path": secret})),
        ("read_text_file", serde_json::json!({"path": dotdot})),
        ("read_text_file", serde_json::json!({"path": root.join("link.txt")})),
        ("write_file", serde_json::json!({"path": outside.join("x.txt"), "content": "x"})),
        ("list_directory", serde_json::json!({"path": outside})),
    ] {
        let (err, text) = tool(&mut host, id, name, args.clone());
        assert!(err, "{name} {args} was not refused: {text}");
        assert!(text.contains("Access denied"), "{name} {args}: {text}");
        assert!(!text.contains("not for the server"), "{text}");
    }
    assert!(!outside.join("x.txt").exists(), "the refused write wrote nothing");
}

#[test]
fn memory_server_keeps_a_knowledge_graph() {
    let Some(cmd) = real_server(
        "run-memory-stdio.sh",
        "node_modules/@modelcontextprotocol/server-memory/package.json",
    ) else {
        return;
    };
    let scratch = Scratch::new("memory");
    let file = scratch.0.join("memory.jsonl");
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd.env("MEMORY_FILE_PATH", &file), Config::default());
    let names = tool_names(&mut host, id);
    for want in ["create_entities", "create_relations", "add_observations", "read_graph"] {
        assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
    }

    let entities = serde_json::json!({"entities": [
        {"name": "mcpoll", "entityType": "crate", "observations": ["a sans-IO MCP client"]},
        {"name": "mio", "entityType": "crate", "observations": ["readiness events"]},
    ]});
    let made = structured(&mut host, id, "create_entities", entities);
    assert_eq!(made["entities"].as_array().map(Vec::len), Some(2), "{made}");
    let relation = serde_json::json!({"relations": [
        {"from": "mcpoll", "to": "mio", "relationType": "depends on"},
    ]});
    structured(&mut host, id, "create_relations", relation);
    let more = serde_json::json!({"observations": [
        {"entityName": "mcpoll", "contents": ["poll-driven"]},
    ]});
    structured(&mut host, id, "add_observations", more);

    let found =
        structured(&mut host, id, "search_nodes", serde_json::json!({"query": "poll-driven"}));
    let found: Vec<&str> =
        found["entities"].as_array().unwrap().iter().filter_map(|e| e["name"].as_str()).collect();
    assert_eq!(found, ["mcpoll"]);

    let graph = structured(&mut host, id, "read_graph", serde_json::json!({}));
    let mcpoll = graph["entities"].as_array().unwrap().iter().find(|e| e["name"] == "mcpoll");
    assert_eq!(
        mcpoll.unwrap()["observations"],
        serde_json::json!(["a sans-IO MCP client", "poll-driven"]),
        "{graph}"
    );
    assert_eq!(
        graph["relations"],
        serde_json::json!([{"from": "mcpoll", "to": "mio", "relationType": "depends on"}])
    );
    // The graph is on disk where the host's environment told the server to keep it.
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.contains(r#""name":"mcpoll""#) && saved.contains("poll-driven"), "{saved}");
}

/// Runs `git` for the test's repository, with a fixed identity and clock and no user or
/// system configuration.
fn git(repo: &Path, args: &[&str], date: &str) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Ada Tester")
        .env("GIT_AUTHOR_EMAIL", "ada@example.invalid")
        .env("GIT_COMMITTER_NAME", "Ada Tester")
        .env("GIT_COMMITTER_EMAIL", "ada@example.invalid")
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn git_server_reads_the_log_of_a_repository_the_test_made() {
    let Some(cmd) = real_server("run-git-stdio.sh", ".venv/bin/mcp-server-git") else {
        return;
    };
    let scratch = Scratch::new("git");
    let repo = scratch.0.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"], "2024-01-01T00:00:00Z");
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&repo, &["add", "a.txt"], "2024-01-01T00:00:00Z");
    git(&repo, &["commit", "-q", "-m", "First commit"], "2024-01-02T10:00:00Z");
    let first = git(&repo, &["rev-parse", "HEAD"], "2024-01-01T00:00:00Z");
    std::fs::write(repo.join("a.txt"), "one\ntwo\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "Second commit"], "2024-01-03T11:30:00Z");
    let second = git(&repo, &["rev-parse", "HEAD"], "2024-01-01T00:00:00Z");

    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd.arg("--repository").arg(&repo), Config::default());
    let names = tool_names(&mut host, id);
    for want in ["git_log", "git_status", "git_diff_unstaged", "git_show"] {
        assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
    }

    let (err, log) = tool(&mut host, id, "git_log", serde_json::json!({"repo_path": repo}));
    assert!(!err, "{log}");
    let commits: Vec<&str> =
        log.lines().filter_map(|l| l.strip_prefix("Commit: ")).map(str::trim).collect();
    assert_eq!(commits, [second.as_str(), first.as_str()], "{log}");
    let messages: Vec<&str> = log.lines().filter_map(|l| l.strip_prefix("Message: ")).collect();
    assert_eq!(messages, ["Second commit", "First commit"], "{log}");
    assert!(log.contains("Author: Ada Tester"), "{log}");
    assert!(log.contains("Date: 2024-01-03 11:30:00+00:00"), "{log}");

    let args = serde_json::json!({"repo_path": repo, "max_count": 1});
    let (_, newest) = tool(&mut host, id, "git_log", args);
    assert_eq!(newest.matches("Commit: ").count(), 1, "{newest}");

    std::fs::write(repo.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    let (err, diff) =
        tool(&mut host, id, "git_diff_unstaged", serde_json::json!({"repo_path": repo}));
    assert!(!err, "{diff}");
    assert!(diff.contains("+three") && !diff.contains("+two"), "{diff}");

    // A repository other than the one the server was started for is refused.
    let (err, text) = tool(&mut host, id, "git_log", serde_json::json!({"repo_path": scratch.0}));
    assert!(err, "{text}");
    assert!(text.contains("outside the allowed repository"), "{text}");
}

#[test]
fn time_server_converts_between_fixed_zones() {
    let Some(cmd) = real_server("run-time-stdio.sh", ".venv/bin/mcp-server-time") else {
        return;
    };
    let mut host = Host::new().unwrap();
    let cmd = cmd.args(["--local-timezone", "Asia/Tokyo"]);
    let id = start(&mut host, cmd, Config::default());
    let view = host.tool_catalog_blocking(id, PATIENCE).unwrap();
    let mut names: Vec<&str> = view.names().collect();
    names.sort_unstable();
    assert_eq!(names, ["convert_time", "get_current_time"]);
    // The local zone given on the command line reaches the tool descriptions.
    let definition = view.definition("get_current_time").unwrap();
    assert!(definition.contains("Use 'Asia/Tokyo' as local timezone"), "{definition}");

    // Zones without daylight saving time, so the answer does not depend on the date.
    let args = serde_json::json!({
        "source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo",
    });
    let converted = structured(&mut host, id, "convert_time", args);
    assert_eq!(converted["time_difference"], "+9.0h", "{converted}");
    let target = converted["target"]["datetime"].as_str().unwrap();
    assert!(target.ends_with("T21:00:00+09:00"), "{converted}");
    assert_eq!(converted["source"]["timezone"], "UTC");
    assert_eq!(converted["target"]["is_dst"], false);

    let args = serde_json::json!({
        "source_timezone": "Asia/Kolkata", "time": "09:15", "target_timezone": "UTC",
    });
    let converted = structured(&mut host, id, "convert_time", args);
    assert_eq!(converted["time_difference"], "-5.5h", "{converted}");
    assert!(converted["target"]["datetime"].as_str().unwrap().ends_with("T03:45:00+00:00"));

    let now = structured(
        &mut host,
        id,
        "get_current_time",
        serde_json::json!({"timezone": "Asia/Kolkata"}),
    );
    assert_eq!(now["timezone"], "Asia/Kolkata");
    assert!(now["datetime"].as_str().unwrap().ends_with("+05:30"), "{now}");

    let (err, text) =
        tool(&mut host, id, "get_current_time", serde_json::json!({"timezone": "Mars/Olympus"}));
    assert!(err, "{text}");
    assert!(text.contains("Invalid timezone"), "{text}");
    // Calls go on after a tool error.
    let again =
        structured(&mut host, id, "get_current_time", serde_json::json!({"timezone": "UTC"}));
    assert!(again["datetime"].as_str().unwrap().ends_with("+00:00"), "{again}");
}

/// The servers above stop cleanly when the host shuts them down (stdin closed, group killed).
#[test]
fn real_servers_stop_with_the_host() {
    let Some(cmd) = real_server("run-time-stdio.sh", ".venv/bin/mcp-server-time") else {
        return;
    };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd.args(["--local-timezone", "UTC"]), Config::default());
    let pid = host.pid(id).expect("a stdio server has a pid");
    assert!(alive(pid));
    drop(host);
    let deadline = std::time::Instant::now() + PATIENCE;
    while alive(pid) {
        assert!(std::time::Instant::now() < deadline, "server {pid} outlived its host");
        std::thread::sleep(Duration::from_millis(20));
    }
}
