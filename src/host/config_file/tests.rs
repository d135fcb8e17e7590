//! A file with every supported form, then one malformed line per error kind.

use std::path::Path;
use std::time::Duration;

use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("s3cret".into()),
        "HOME" => Some("/home/u".into()),
        "PORT" => Some("8931".into()),
        _ => None,
    }
}

fn parse(text: &str) -> Result<ConfigFile, ConfigFileError> {
    ConfigFile::parse(Path::new("mcp.json"), text, env)
}

/// Parses a file with one server entry `entry` named `s`, expecting an error.
#[track_caller]
fn refused(entry: &str) -> ConfigFileError {
    match parse(&format!(r#"{{"mcpServers": {{"s": {entry}}}}}"#)) {
        Err(e) => e,
        Ok(f) => panic!("accepted: {entry}: {:?}", f.servers),
    }
}

const EVERY_FORM: &str = r#"{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "py": {
      "command": "python3",
      "args": ["server.py", "--token=${TOKEN}", "${env:TOKEN}", "${MISSING:-fallback}", "$TOKEN"],
      "env": {"API_KEY": "${TOKEN}", "PLAIN": "x"},
      "cwd": "${userHome}/servers",
      "disabled": false,
      "autoApprove": ["echo"],
      "mcpoll": {
        "timeoutMs": 5000,
        "probeTimeoutMs": 700,
        "handshakeTimeoutMs": 900,
        "era": "legacy",
        "maxInFlight": 4,
        "maxQueued": 0,
        "maxPending": 64,
        "maxMessageBytes": 65536,
        "retry": {"maxAttempts": 5, "baseDelayMs": 50, "maxDelayMs": 800, "jitterPercent": 0},
        "breaker": {"failureThreshold": 0, "coolDownMs": 2000}
      }
    },
    "typed-stdio": {"type": "stdio", "command": "node", "args": []},
    "remote": {
      "type": "http",
      "url": "http://127.0.0.1:${PORT}/mcp",
      "headers": {"Authorization": "Bearer ${TOKEN}"},
      "mcpoll": {
        "era": "modern",
        "tls": {"caFile": "ca.pem", "clientCert": "c.pem", "clientKey": "k.pem", "insecure": true},
        "proxy": "http://proxy:3128",
        "maxConnections": 2,
        "connectTimeoutMs": 1500,
        "idleTimeoutMs": 9000,
        "alternates": ["http://127.0.0.1:8932/mcp"]
      }
    },
    "streamable": {"type": "streamable-http", "url": "https://example.com/mcp", "mcpoll": {"proxy": "direct"}},
    "untyped-url": {"url": "https://example.com/mcp", "disabled": true}
  }
}"#;

#[test]
fn every_supported_form() {
    let f = parse(EVERY_FORM).unwrap();
    let names: Vec<_> = f.servers().map(ConfiguredServer::name).collect();
    // serde_json keeps objects sorted by key (no `preserve_order`): names come in that order.
    assert_eq!(names, ["py", "remote", "streamable", "typed-stdio", "untyped-url"]);

    let py = f.server("py").unwrap();
    let cmd = format!("{:?}", py.stdio_command().unwrap());
    for part in [
        "\"python3\"",
        "\"server.py\", \"--token=s3cret\", \"s3cret\", \"fallback\", \"$TOKEN\"",
        "(\"API_KEY\", \"s3cret\"), (\"PLAIN\", \"x\")",
        "\"/home/u/servers\"",
    ] {
        assert!(cmd.contains(part), "{part} not in {cmd}");
    }
    assert!(!py.is_disabled());
    let c = py.config();
    assert_eq!(c.default_timeout, Duration::from_millis(5000));
    assert_eq!(c.probe_timeout, Duration::from_millis(700));
    assert_eq!(c.handshake_timeout, Duration::from_millis(900));
    assert_eq!(c.era, EraPreference::LegacyOnly);
    assert_eq!((c.max_in_flight, c.max_queued, c.max_pending), (4, 0, 64));
    assert_eq!(c.max_message_bytes, 65536);
    assert_eq!(
        c.retry,
        crate::config::RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(800),
            jitter_percent: 0,
        }
    );
    assert_eq!(c.breaker.failure_threshold, 0);
    assert_eq!(c.breaker.cool_down, Duration::from_secs(2));
    assert_eq!(py.url(), None);

    let typed = f.server("typed-stdio").unwrap();
    assert!(typed.stdio_command().is_some());
    assert_eq!(typed.config().default_timeout, Config::default().default_timeout);

    let remote = f.server("remote").unwrap();
    assert_eq!(remote.url(), Some("http://127.0.0.1:8931/mcp"));
    assert_eq!(remote.config().era, EraPreference::ModernOnly);
    let o = remote.http_options().unwrap();
    assert_eq!(o.headers, [("Authorization".to_owned(), "Bearer s3cret".to_owned())]);
    assert_eq!(o.tls.ca_file.as_deref(), Some(Path::new("ca.pem")));
    assert_eq!(o.tls.client_cert, Some(("c.pem".into(), "k.pem".into())));
    assert!(o.tls.dangerous_accept_any_certificate);
    assert_eq!(o.proxy, ProxyChoice::Url("http://proxy:3128".into()));
    assert_eq!(o.max_connections, 2);
    assert_eq!(o.connect_timeout, Duration::from_millis(1500));
    assert_eq!(o.idle_timeout, Duration::from_millis(9000));
    assert_eq!(o.alternates, ["http://127.0.0.1:8932/mcp"]);

    let s = f.server("streamable").unwrap();
    assert_eq!(s.http_options().unwrap().proxy, ProxyChoice::Direct);
    assert_eq!(s.http_options().unwrap().max_connections, HttpOptions::new("x").max_connections);
    let u = f.server("untyped-url").unwrap();
    assert!(u.is_disabled() && u.url().is_some());
    assert!(f.server("nope").is_none());
}

#[test]
fn vs_code_servers_key() {
    let f =
        parse(r#"{"servers": {"a": {"type": "stdio", "command": "x"}}, "inputs": []}"#).unwrap();
    assert!(f.server("a").unwrap().stdio_command().is_some());
}

/// Matches an error's location and kind.
macro_rules! expect_err {
    ($e:expr, server $s:expr, key $k:expr, $kind:pat) => {{
        let e = $e;
        assert_eq!(e.file, Path::new("mcp.json"), "{e}");
        assert_eq!(e.server.as_deref(), $s, "{e}");
        assert_eq!(e.key.as_deref(), $k, "{e}");
        assert!(matches!(e.kind, $kind), "{e}: {:?}", e.kind);
        e
    }};
}

#[test]
fn file_level_errors() {
    expect_err!(parse("{\"mcpServers\": {").unwrap_err(), server None, key None, ConfigFileErrorKind::Syntax(_));
    expect_err!(parse("[]").unwrap_err(), server None, key None, ConfigFileErrorKind::WrongType { .. });
    expect_err!(parse(r#"{"mcpServer": {}}"#).unwrap_err(), server None, key None, ConfigFileErrorKind::NoServers);
    expect_err!(
        parse(r#"{"mcpServers": {}, "servers": {}}"#).unwrap_err(),
        server None, key None, ConfigFileErrorKind::BothServerKeys
    );
    expect_err!(
        parse(r#"{"mcpServers": []}"#).unwrap_err(),
        server None, key Some("mcpServers"), ConfigFileErrorKind::WrongType { .. }
    );
    let e = ConfigFile::load("/nonexistent/mcp.json").unwrap_err();
    assert!(matches!(e.kind, ConfigFileErrorKind::Io(_)), "{e}");
    assert!(e.to_string().starts_with("/nonexistent/mcp.json: cannot read"), "{e}");
}

#[test]
fn one_malformed_line_per_error_kind() {
    use ConfigFileErrorKind as K;
    let s = Some("s");
    expect_err!(refused("[]"), server s, key None, K::WrongType { .. });
    expect_err!(refused(r#"{"command": "x", "enviroment": {}}"#), server s, key Some("enviroment"), K::UnknownKey);
    expect_err!(refused(r#"{"command": "x", "mcpoll": {"timeout": 5}}"#), server s, key Some("mcpoll.timeout"), K::UnknownKey);
    expect_err!(refused(r#"{"command": "x", "mcpoll": {"retry": {"max": 2}}}"#), server s, key Some("mcpoll.retry.max"), K::UnknownKey);
    expect_err!(refused(r#"{"url": "http://h/", "mcpoll": {"tls": {"ca": "x"}}}"#), server s, key Some("mcpoll.tls.ca"), K::UnknownKey);
    expect_err!(refused(r#"{"command": 7}"#), server s, key Some("command"), K::WrongType { .. });
    expect_err!(refused(r#"{"command": "x", "args": "a b"}"#), server s, key Some("args"), K::WrongType { .. });
    expect_err!(refused(r#"{"command": "x", "args": ["a", 1]}"#), server s, key Some("args[1]"), K::WrongType { .. });
    expect_err!(refused(r#"{"command": "x", "env": {"A": 1}}"#), server s, key Some("env.A"), K::WrongType { .. });
    expect_err!(refused(r#"{"command": "x", "disabled": "yes"}"#), server s, key Some("disabled"), K::WrongType { .. });
    expect_err!(refused(r#"{"command": "x", "mcpoll": {"timeoutMs": "5s"}}"#), server s, key Some("mcpoll.timeoutMs"), K::WrongType { .. });
    expect_err!(refused(r#"{"command": "x", "mcpoll": {"era": "2026"}}"#), server s, key Some("mcpoll.era"), K::WrongType { .. });
    expect_err!(refused(r#"{"url": "http://h/", "headers": ["A: b"]}"#), server s, key Some("headers"), K::WrongType { .. });
    expect_err!(refused(r#"{"args": ["x"]}"#), server s, key Some("command"), K::Missing);
    expect_err!(refused(r#"{"type": "http"}"#), server s, key Some("url"), K::Missing);
    expect_err!(refused(r#"{"url": "http://h/", "mcpoll": {"tls": {"clientCert": "c.pem"}}}"#), server s, key Some("mcpoll.tls.clientKey"), K::Missing);
    expect_err!(refused(r#"{"command": "x", "url": "http://h/"}"#), server s, key Some("url"), K::Conflict(_));
    expect_err!(refused(r#"{"url": "http://h/", "args": []}"#), server s, key Some("args"), K::Conflict(_));
    expect_err!(refused(r#"{"command": "x", "headers": {}}"#), server s, key Some("headers"), K::Conflict(_));
    expect_err!(refused(r#"{"command": "x", "mcpoll": {"proxy": "direct"}}"#), server s, key Some("mcpoll.proxy"), K::Conflict(_));
    expect_err!(refused(r#"{"type": "sse", "url": "http://h/sse"}"#), server s, key Some("type"), K::UnsupportedTransport(_));
    expect_err!(refused(r#"{"command": "x", "mcpoll": {"maxInFlight": 0}}"#), server s, key Some("mcpoll.maxInFlight"), K::Invalid(_));
    expect_err!(refused(r#"{"command": "x", "mcpoll": {"retry": {"jitterPercent": 101}}}"#), server s, key Some("mcpoll.retry.jitterPercent"), K::Invalid(_));
    expect_err!(refused(r#"{"command": ""}"#), server s, key Some("command"), K::Invalid(_));
    expect_err!(refused(r#"{"command": "x", "mcpoll": {"maxMessageBytes": 10}}"#), server s, key Some("mcpoll"), K::Invalid(_));
    let e = expect_err!(refused(r#"{"command": "x", "env": {"K": "${NOPE}"}}"#), server s, key Some("env.K"), K::UnsetVariable(_));
    assert_eq!(
        e.to_string(),
        "mcp.json: server \"s\": key \"env.K\": environment variable NOPE is not set (give ${NOPE:-default})"
    );
    expect_err!(refused(r#"{"command": "x", "args": ["${input:key}"]}"#), server s, key Some("args[0]"), K::UnsupportedVariable(_));
    expect_err!(refused(r#"{"command": "${workspaceFolder}/run"}"#), server s, key Some("command"), K::UnsupportedVariable(_));
    expect_err!(refused(r#"{"url": "http://h/${PORT"}"#), server s, key Some("url"), K::UnsupportedVariable(_));
}
