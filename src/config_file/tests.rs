//! A file with every supported form, then one malformed line per error kind.

use std::path::Path;
use std::time::Duration;

use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("s3cret".into()),
        "HOME" => Some("/home/u".into()),
        "PORT" => Some("8931".into()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

fn parse(text: &str) -> Result<ConfigFile, ConfigFileError> {
    ConfigFile::parse(Path::new("mcp.json"), text, env)
}

/// Parses a file with one server entry `entry` named `s`, expecting an error.
#[track_caller]
fn refused(entry: &str) -> ConfigFileError {
    let file = parse(&format!(r#"{{"mcpServers": {{"s": {entry}}}}}"#)).expect("the file");
    assert!(file.server("s").is_none(), "accepted: {entry}: {:?}", file.servers);
    let e = file.entry("s").expect("the entry").expect_err("refused");
    assert_eq!(file.errors().count(), 1);
    e.clone()
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
        "alternates": ["http://127.0.0.1:8932/mcp"],
        "oauth": {"clientId": "mcpoll-${PORT}", "clientSecret": "${env:TOKEN}",
                  "issuer": "https://auth.example.com/tenant", "dpop": "ifSupported"}
      }
    },
    "streamable": {
      "type": "streamable-http", "url": "https://example.com/mcp", "mcpoll": {"proxy": "direct"}
    },
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
    let command = py.stdio_command().unwrap();
    let cmd = command.to_command();
    assert_eq!(cmd.get_program(), "python3");
    let args: Vec<_> = cmd.get_args().collect();
    assert_eq!(args, ["server.py", "--token=s3cret", "s3cret", "fallback", "$TOKEN"]);
    let set: Vec<_> = cmd.get_envs().filter_map(|(k, v)| Some((k, v?))).collect();
    for pair in [("API_KEY", "s3cret"), ("PLAIN", "x")] {
        assert!(set.contains(&(pair.0.as_ref(), pair.1.as_ref())), "{pair:?} not in {set:?}");
    }
    assert_eq!(cmd.get_current_dir(), Some(std::path::Path::new("/home/u/servers")));
    // What `Debug` shows of it (a config file is printed whole at times): no argument, no value.
    let shown = format!("{f:?}");
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("API_KEY"), "{shown}");
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
    // Relative paths are the file's folder's (the working directory's, for `mcp.json`).
    let here = std::env::current_dir().unwrap().canonicalize().unwrap();
    assert_eq!(o.tls.ca_file, Some(here.join("ca.pem")));
    assert_eq!(o.tls.client_cert, Some((here.join("c.pem"), here.join("k.pem"))));
    assert!(o.tls.dangerous_accept_any_certificate);
    assert_eq!(o.proxy, ProxyChoice::Url("http://proxy:3128".into()));
    assert_eq!(o.max_connections, 2);
    assert_eq!(o.connect_timeout, Duration::from_millis(1500));
    assert_eq!(o.idle_timeout, Duration::from_millis(9000));
    assert_eq!(o.alternates, ["http://127.0.0.1:8932/mcp"]);
    let oauth = o.oauth.as_ref().expect("mcpoll.oauth");
    assert_eq!(oauth.server_url, "http://127.0.0.1:8931/mcp");
    assert_eq!(oauth.grant, crate::oauth::Grant::ClientCredentials);
    let client = oauth.pre_registered.as_ref().unwrap();
    assert_eq!(client.client_id, "mcpoll-8931");
    assert_eq!(client.client_secret.as_ref().map(|s| s.expose()), Some("s3cret"));
    assert_eq!(client.issuer.as_deref(), Some("https://auth.example.com/tenant"));
    assert_eq!(oauth.dpop, crate::oauth::DpopMode::IfSupported);
    // Header values and the client secret are credentials: never in a `{:?}`.
    let shown = format!("{remote:?}");
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("Authorization") && shown.contains("mcpoll-8931"), "{shown}");
    assert!(f.server("streamable").unwrap().http_options().unwrap().oauth.is_none());
    let plain = r#"{"mcpServers": {"s": {"url": "http://h/",
        "mcpoll": {"oauth": {"clientId": "a", "clientSecret": "s"}}}}}"#;
    let plain = parse(plain).unwrap().server("s").unwrap().http_options().unwrap();
    assert_eq!(plain.oauth.unwrap().dpop, crate::oauth::DpopMode::Off, "off unless asked");

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
    use ConfigFileErrorKind as K;
    expect_err!(parse("{\"mcpServers\": {").unwrap_err(), server None, key None, K::Syntax(_));
    expect_err!(parse("[]").unwrap_err(), server None, key None, K::WrongType { .. });
    expect_err!(parse(r#"{"mcpServer": {}}"#).unwrap_err(), server None, key None, K::NoServers);
    expect_err!(
        parse(r#"{"mcpServers": {}, "servers": {}}"#).unwrap_err(),
        server None, key None, K::BothServerKeys
    );
    expect_err!(
        parse(r#"{"mcpServers": []}"#).unwrap_err(),
        server None, key Some("mcpServers"), K::WrongType { .. }
    );
    let e = ConfigFile::load("/nonexistent/mcp.json").unwrap_err();
    assert!(matches!(e.kind, ConfigFileErrorKind::Io(_)), "{e}");
    assert!(e.to_string().starts_with("/nonexistent/mcp.json: cannot read"), "{e}");
}

/// The variant name of a kind, for the table below.
fn kind_name(kind: &ConfigFileErrorKind) -> String {
    let debug = format!("{kind:?}");
    debug.split(['(', ' ']).next().unwrap_or_default().to_owned()
}

#[test]
fn one_malformed_line_per_error_kind() {
    // (entry of server "s", the key the error names, the kind)
    let cases: &[(&str, Option<&str>, &str)] = &[
        ("[]", None, "WrongType"),
        (r#"{"command": "x", "enviroment": {}}"#, Some("enviroment"), "UnknownKey"),
        (r#"{"command": "x", "mcpoll": {"timeout": 5}}"#, Some("mcpoll.timeout"), "UnknownKey"),
        (
            r#"{"command": "x", "mcpoll": {"retry": {"max": 2}}}"#,
            Some("mcpoll.retry.max"),
            "UnknownKey",
        ),
        (
            r#"{"url": "http://h/", "mcpoll": {"tls": {"ca": "x"}}}"#,
            Some("mcpoll.tls.ca"),
            "UnknownKey",
        ),
        (
            r#"{"url": "http://h/", "mcpoll": {"oauth": {"clientId": "a", "scope": "x"}}}"#,
            Some("mcpoll.oauth.scope"),
            "UnknownKey",
        ),
        (r#"{"command": 7}"#, Some("command"), "WrongType"),
        (
            r#"{"url": "http://h/", "mcpoll": {"oauth": "id:secret"}}"#,
            Some("mcpoll.oauth"),
            "WrongType",
        ),
        (
            r#"{"url": "http://h/", "mcpoll": {"oauth": {"clientId": 7, "clientSecret": "s"}}}"#,
            Some("mcpoll.oauth.clientId"),
            "WrongType",
        ),
        (
            r#"{"url": "http://h/", "mcpoll": {"oauth": {"clientId": "a"}}}"#,
            Some("mcpoll.oauth.clientSecret"),
            "Missing",
        ),
        (
            r#"{"command": "x", "mcpoll": {"oauth": {"clientId": "a"}}}"#,
            Some("mcpoll.oauth"),
            "Conflict",
        ),
        (
            r#"{"url": "http://h/", "mcpoll": {"oauth": {"clientId": "", "clientSecret": "s"}}}"#,
            Some("mcpoll.oauth.clientId"),
            "Invalid",
        ),
        // Empty once expanded: a secret from a variable set to nothing, a default of nothing.
        (
            r#"{"url": "http://h/", "mcpoll": {"oauth": {"clientId": "a", "clientSecret": "${EMPTY}"}}}"#,
            Some("mcpoll.oauth.clientSecret"),
            "Invalid",
        ),
        (
            r#"{"url": "http://h/", "mcpoll": {"oauth": {"clientId": "${NONE:-}", "clientSecret": "s"}}}"#,
            Some("mcpoll.oauth.clientId"),
            "Invalid",
        ),
        (r#"{"command": "x", "args": "a b"}"#, Some("args"), "WrongType"),
        (r#"{"command": "x", "args": ["a", 1]}"#, Some("args[1]"), "WrongType"),
        (r#"{"command": "x", "env": {"A": 1}}"#, Some("env.A"), "WrongType"),
        (r#"{"command": "x", "disabled": "yes"}"#, Some("disabled"), "WrongType"),
        (
            r#"{"command": "x", "mcpoll": {"timeoutMs": "5s"}}"#,
            Some("mcpoll.timeoutMs"),
            "WrongType",
        ),
        (r#"{"command": "x", "mcpoll": {"era": "2026"}}"#, Some("mcpoll.era"), "WrongType"),
        (r#"{"url": "http://h/", "headers": ["A: b"]}"#, Some("headers"), "WrongType"),
        (r#"{"args": ["x"]}"#, Some("command"), "Missing"),
        (r#"{"type": "http"}"#, Some("url"), "Missing"),
        (
            r#"{"url": "http://h/", "mcpoll": {"tls": {"clientCert": "c.pem"}}}"#,
            Some("mcpoll.tls.clientKey"),
            "Missing",
        ),
        (r#"{"command": "x", "url": "http://h/"}"#, Some("url"), "Conflict"),
        (r#"{"url": "http://h/", "args": []}"#, Some("args"), "Conflict"),
        (r#"{"command": "x", "headers": {}}"#, Some("headers"), "Conflict"),
        (r#"{"command": "x", "mcpoll": {"proxy": "direct"}}"#, Some("mcpoll.proxy"), "Conflict"),
        (r#"{"type": "sse", "url": "http://h/sse"}"#, Some("type"), "UnsupportedTransport"),
        (
            r#"{"command": "x", "mcpoll": {"maxInFlight": 0}}"#,
            Some("mcpoll.maxInFlight"),
            "Invalid",
        ),
        // Issue 21: URLs are checked when the file is read, not when the server is added.
        (r#"{"url": "file:///etc/passwd"}"#, Some("url"), "Invalid"),
        (r#"{"type": "http", "url": "gopher://h:70/1"}"#, Some("url"), "Invalid"),
        (r#"{"url": "https://user:pass@h/mcp"}"#, Some("url"), "Invalid"),
        (r#"{"url": "http://h:0/"}"#, Some("url"), "Invalid"),
        (r#"{"url": "http:///mcp"}"#, Some("url"), "Invalid"),
        (
            r#"{"url": "http://h/", "mcpoll": {"alternates": ["ftp://h/"]}}"#,
            Some("mcpoll.alternates[0]"),
            "Invalid",
        ),
        (
            r#"{"url": "http://h/", "mcpoll": {"proxy": "socks5://p:1080"}}"#,
            Some("mcpoll.proxy"),
            "Invalid",
        ),
        (
            r#"{"url": "http://h/", "mcpoll": {"oauth": {"clientId": "a", "clientSecret": "s", "issuer": "file:///x"}}}"#,
            Some("mcpoll.oauth.issuer"),
            "Invalid",
        ),
        (
            r#"{"url": "http://h/", "mcpoll": {"oauth": {"clientId": "a", "clientSecret": "s", "dpop": "on"}}}"#,
            Some("mcpoll.oauth.dpop"),
            "Invalid",
        ),
        (
            r#"{"url": "http://h/", "mcpoll": {"oauth": {"clientId": "a", "clientSecret": "s", "dpop": true}}}"#,
            Some("mcpoll.oauth.dpop"),
            "WrongType",
        ),
        (
            r#"{"command": "x", "mcpoll": {"retry": {"jitterPercent": 101}}}"#,
            Some("mcpoll.retry.jitterPercent"),
            "Invalid",
        ),
        (r#"{"command": ""}"#, Some("command"), "Invalid"),
        (r#"{"command": "x", "mcpoll": {"maxMessageBytes": 10}}"#, Some("mcpoll"), "Invalid"),
        (r#"{"command": "x", "env": {"K": "${NOPE}"}}"#, Some("env.K"), "UnsetVariable"),
        (r#"{"command": "x", "args": ["${input:key}"]}"#, Some("args[0]"), "UnsupportedVariable"),
        (r#"{"command": "${workspaceFolder}/run"}"#, Some("command"), "UnsupportedVariable"),
        (r#"{"url": "http://h/${PORT"}"#, Some("url"), "UnsupportedVariable"),
    ];
    for &(entry, key, kind) in cases {
        let e = refused(entry);
        assert_eq!((e.server.as_deref(), e.key.as_deref()), (Some("s"), key), "{entry}: {e}");
        assert_eq!(kind_name(&e.kind), kind, "{entry}: {e}");
        assert!(e.to_string().starts_with("mcp.json: server \"s\""), "{e}");
    }
    let kinds: std::collections::BTreeSet<_> = cases.iter().map(|c| c.2).collect();
    assert_eq!(kinds.len(), 8, "every entry-level kind: {kinds:?}");
    let e = refused(r#"{"command": "x", "env": {"K": "${NOPE}"}}"#);
    assert_eq!(
        e.to_string(),
        "mcp.json: server \"s\": key \"env.K\": environment variable NOPE is not set \
         (give ${NOPE:-default})"
    );
}

/// A refused variable is named without its default, which is often a secret written in
/// place: the whole reference, default included, reached the error and the CLI's stderr.
#[test]
fn a_refused_variable_is_named_without_its_default() {
    for entry in [
        r#"{"command": "x", "env": {"K": "${BAD-NAME:-s3cret}"}}"#,
        r#"{"command": "x", "env": {"K": "${workspaceFolder:-s3cret}"}}"#,
        r#"{"url": "http://h/?k=${TOKEN:-s3cret"}"#,
    ] {
        let e = refused(entry);
        assert_eq!(kind_name(&e.kind), "UnsupportedVariable", "{entry}: {e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
}

/// Nothing of what follows an unclosed `${`, or of a reference that is no variable name,
/// reaches the error: it may be a query string's secret or a password with `${` in it
/// (there is no escape for `$`), and the whole rest of the value was shown on stderr.
#[test]
fn a_reference_that_is_no_variable_shows_none_of_its_text() {
    for entry in [
        r#"{"url": "https://h/mcp?t=${T&api_key=sk-live-123"}"#,
        r#"{"command": "x", "env": {"P": "ab${sk-live-123"}}"#,
        r#"{"command": "x", "env": {"P": "a${sk-live#123}b"}}"#,
    ] {
        let e = refused(entry);
        assert_eq!(kind_name(&e.kind), "UnsupportedVariable", "{entry}: {e}");
        assert!(!e.to_string().contains("live") && !format!("{e:?}").contains("live"), "{e}");
    }
    let e = refused(r#"{"command": "${workspaceFolder}/run"}"#);
    assert!(e.to_string().contains("${workspaceFolder}"), "a name is still named: {e}");
}

/// A relative path in the file is taken from the file's folder, absolute and without `..`:
/// a file named as `../proj/mcp.json` put a `..` in every root (which the roots checks
/// refuse, so the server was refused over a `..` the user never wrote), and TLS and
/// assertion files were looked up from wherever the program ran.
#[test]
fn relative_paths_are_the_files_folders_without_dot_dot() {
    let text = r#"{"mcpServers": {
        "local": {"command": "x", "mcpoll": {"roots": ["data", "/abs"]}},
        "remote": {"url": "https://h/mcp", "mcpoll": {
            "tls": {"caFile": "ca.pem"},
            "oauth": {"grant": "jwtBearer", "clientId": "w", "assertionFile": "jwt"}}}
    }}"#;
    let file = ConfigFile::parse(Path::new("/nowhere-mcpoll/a/../conf/mcp.json"), text, env);
    let file = file.expect("the file");
    let roots = file.server("local").unwrap().roots();
    assert_eq!(roots, [Path::new("/nowhere-mcpoll/conf/data"), Path::new("/abs")]);
    let remote = file.server("remote").unwrap().http_options().unwrap();
    assert_eq!(remote.tls.ca_file.as_deref(), Some(Path::new("/nowhere-mcpoll/conf/ca.pem")));

    // The assertion file is read from the file's folder, not the working directory.
    let dir = std::env::temp_dir().join(format!("mcpoll-cf-folder-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("conf")).unwrap();
    std::fs::write(dir.join("conf").join("jwt"), "folder-jwt").unwrap();
    let named = dir.join("conf").join("..").join("conf").join("mcp.json");
    let file = ConfigFile::parse(&named, text, env).expect("the file");
    let mut oauth = file.server("remote").unwrap().http_options().unwrap().oauth.unwrap();
    let request = crate::oauth::AssertionRequest {
        kind: crate::oauth::AssertionKind::JwtBearer,
        audience: "https://as",
        resource: "https://h/mcp",
        renew: false,
    };
    let got = oauth.assertions.as_mut().unwrap().assertion(&request).expect("read");
    assert_eq!(got.value.expose(), "folder-jwt");
    let _ = std::fs::remove_dir_all(&dir);

    let up = ConfigFile::parse(Path::new("../conf/mcp.json"), text, env).expect("the file");
    let root = &up.server("local").unwrap().roots()[0];
    assert!(root.is_absolute(), "{root:?}");
    assert!(!root.components().any(|c| c == std::path::Component::ParentDir), "{root:?}");
}

/// The file's proxy is checked as the driver uses it: without a scheme it is `http://` (as
/// from `HTTPS_PROXY`), credentials get the proxy's advice (not the server URL's "use a
/// header or a token provider"), and an `https://` proxy, which the driver refuses at every
/// connection, is refused here.
#[test]
fn the_proxy_is_checked_as_the_driver_uses_it() {
    let with = |proxy: &str| format!(r#"{{"url": "http://h/", "mcpoll": {{"proxy": "{proxy}"}}}}"#);
    let file = parse(&format!(r#"{{"mcpServers": {{"s": {}}}}}"#, with("127.0.0.1:3128"))).unwrap();
    let proxy = file.server("s").expect("a proxy without a scheme").http_options().unwrap().proxy;
    assert_eq!(proxy, ProxyChoice::Url("127.0.0.1:3128".into()));
    let e = refused(&with("http://u:p@proxy:3128"));
    assert!(e.to_string().contains("proxy authentication"), "{e}");
    assert!(!e.to_string().contains("p@proxy"), "{e}");
    let e = refused(&with("https://proxy:443"));
    assert!(e.to_string().contains("https:// proxy"), "{e}");
}

#[test]
fn one_bad_entry_leaves_the_others_usable() {
    let text = r#"{"mcpServers": {
        "bad": {"command": "${LAB_DIR}/run"},
        "good": {"command": "python3", "args": ["s.py"]},
        "off": {"command": "x", "disabled": true, "mcpoll": {"era": 1}}
    }}"#;
    let file = parse(text).expect("the file is usable");
    assert_eq!(file.servers().map(ConfiguredServer::name).collect::<Vec<_>>(), ["good"]);
    let bad = file.entry("bad").unwrap().unwrap_err();
    assert_eq!((bad.server.as_deref(), bad.key.as_deref()), (Some("bad"), Some("command")));
    assert!(matches!(&bad.kind, ConfigFileErrorKind::UnsetVariable(v) if v == "LAB_DIR"));
    assert_eq!(
        bad.to_string().split(':').take(3).collect::<Vec<_>>(),
        ["mcp.json", " server \"bad\"", " key \"command\""]
    );
    assert!(file.entry("good").unwrap().is_ok());
    assert!(file.entry("none").is_none());
    assert_eq!(file.errors().count(), 2, "the disabled entry's fault is kept too");
    let enabled: Vec<_> = file
        .enabled_entries()
        .map(|e| e.map_or_else(|e| e.server.clone().unwrap(), |s| s.name().to_owned()))
        .collect();
    assert_eq!(enabled, ["bad", "good"], "a refused entry marked disabled stays out");
}

#[test]
fn tool_lists_are_read_and_checked() {
    let f = parse(
        r#"{"mcpServers": {"s": {"command": "x", "disabledTools": ["rm", "drop"],
            "alwaysAllow": ["ls"], "autoApprove": ["cat"]}}}"#,
    )
    .unwrap();
    let s = f.server("s").unwrap();
    assert_eq!(s.disabled_tools(), ["rm", "drop"]);
    assert_eq!(s.always_allowed_tools(), ["ls", "cat"]);
    let py = parse(EVERY_FORM).unwrap();
    assert_eq!(py.server("py").unwrap().always_allowed_tools(), ["echo"]);
    assert!(py.server("py").unwrap().disabled_tools().is_empty());
    for bad in [r#""rm""#, "[1]", "{}"] {
        let e = refused(&format!(r#"{{"command": "x", "disabledTools": {bad}}}"#));
        assert_eq!(e.key.as_deref(), Some("disabledTools"), "{bad}");
    }
    let e = refused(r#"{"command": "x", "autoApprove": [true]}"#);
    assert_eq!(e.key.as_deref(), Some("autoApprove"));
}

/// Issue 21: a URL's secret-looking query values never show in `{:?}`, neither in the parsed
/// entry nor in the `HttpOptions` made from it; nor does a `user:password@` in options built
/// in code (a config file refuses those outright).
#[test]
fn urls_are_redacted_in_debug_output() {
    let text = r#"{"mcpServers": {"r": {"url": "https://h/mcp?api_key=KEY1&tenant=blue",
        "mcpoll": {"alternates": ["https://h2/mcp?token=KEY2"]}}}}"#;
    let f = parse(text).unwrap();
    let entry = f.server("r").unwrap();
    let opts = entry.http_options().unwrap();
    assert_eq!(opts.url, "https://h/mcp?api_key=KEY1&tenant=blue", "the URL itself is kept");
    for shown in [format!("{f:?}"), format!("{entry:?}"), format!("{opts:?}")] {
        assert!(!shown.contains("KEY1") && !shown.contains("KEY2"), "{shown}");
        assert!(shown.contains("api_key=<redacted>&tenant=blue"), "{shown}");
    }
    let opts = crate::HttpOptions::new("https://user:pw@h/mcp?secret=S3&password=P4");
    let shown = format!("{opts:?}");
    for secret in ["user", "pw@", "S3", "P4"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
}

/// Issue 21: a configuration file's stdio server sees only the safe variables of the host
/// (and its entry's `env`), unless the entry opts in with `inheritEnv`. The test process runs
/// under cargo, which sets `CARGO_MANIFEST_DIR`: a variable no server should get by default.
#[test]
fn a_config_files_stdio_server_gets_only_the_safe_environment() {
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some(), "run under cargo");
    let run = |entry: &str| {
        let f = parse(&format!(r#"{{"mcpServers": {{"s": {entry}}}}}"#)).unwrap();
        let command = f.server("s").unwrap().stdio_command().unwrap().to_command();
        let out = { command }.stdin(std::process::Stdio::null()).output().expect("run env");
        String::from_utf8(out.stdout).unwrap()
    };
    let safe = run(r#"{"command": "env", "env": {"EXTRA": "x"}}"#);
    let names: Vec<&str> = safe.lines().filter_map(|l| l.split_once('=')).map(|(k, _)| k).collect();
    assert!(names.contains(&"PATH") && names.contains(&"EXTRA"), "{names:?}");
    for name in &names {
        let allowed = crate::SAFE_ENV_VARS.contains(name)
            || *name == "LANG"
            || name.starts_with("LC_")
            || *name == "EXTRA";
        assert!(allowed, "{name} reached the server: {names:?}");
    }
    let all = run(r#"{"command": "env", "mcpoll": {"inheritEnv": true}}"#);
    assert!(all.lines().any(|l| l.starts_with("CARGO_MANIFEST_DIR=")), "{all}");
    // An HTTP entry cannot ask for it: that entry is refused (the file's others stay usable).
    let file =
        parse(r#"{"mcpServers": {"s": {"url": "http://h/", "mcpoll": {"inheritEnv": true}}}}"#);
    let file = file.unwrap();
    let err = file.entry("s").unwrap().unwrap_err();
    assert_eq!(err.key.as_deref(), Some("mcpoll.inheritEnv"));
}

#[test]
fn oauth_assertion_grants_are_read_and_checked() {
    use crate::oauth::{AssertionKind, AssertionRequest, Grant};
    let dir = std::env::temp_dir().join(format!("mcpoll-cf-assertion-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, "file-jwt\n").unwrap();
    let text = format!(
        r#"{{"mcpServers": {{
        "wif": {{"url": "https://mcp.example.com/mcp", "mcpoll": {{"oauth": {{
            "grant": "jwtBearer", "clientId": "workload", "assertionFile": "{}"}}}}}},
        "wif-env": {{"url": "https://mcp.example.com/mcp", "mcpoll": {{"oauth": {{
            "grant": "jwtBearer", "clientId": "w", "assertion": "${{TOKEN}}"}}}}}},
        "xaa": {{"url": "https://mcp.example.com/mcp", "mcpoll": {{"oauth": {{
            "grant": "identityAssertion", "clientId": "xaa", "clientSecret": "${{TOKEN}}",
            "issuer": "https://as.example.com", "idpTokenEndpoint": "https://idp.example.com/token",
            "idpClientId": "idp-c", "idpClientSecret": "${{TOKEN}}", "assertion": "${{TOKEN}}"}}}}}}
    }}}}"#,
        token_file.display()
    );
    let f = parse(&text).unwrap();
    assert_eq!(f.errors().count(), 0);
    let request = AssertionRequest {
        kind: AssertionKind::JwtBearer,
        audience: "https://as.example.com",
        resource: "https://mcp.example.com/mcp",
        renew: false,
    };
    let ask = |name: &str| {
        let mut oauth = f.server(name).unwrap().http_options().unwrap().oauth.unwrap();
        let got = oauth.assertions.as_mut().unwrap().assertion(&request).unwrap();
        (oauth, got.value.expose().to_owned())
    };
    let (wif, got) = ask("wif");
    assert_eq!((wif.grant, got.as_str()), (Grant::JwtBearer, "file-jwt"));
    let client = wif.pre_registered.unwrap();
    assert_eq!((client.client_id.as_str(), client.client_secret), ("workload", None));
    let (_, got) = ask("wif-env");
    assert_eq!(got, "s3cret");
    let (xaa, got) = ask("xaa");
    assert_eq!(got, "s3cret");
    let Grant::IdentityAssertion { idp } = &xaa.grant else { panic!("{:?}", xaa.grant) };
    assert_eq!(
        (idp.token_endpoint.as_str(), idp.client_id.as_str()),
        ("https://idp.example.com/token", "idp-c")
    );
    assert_eq!(idp.client_secret.as_ref().map(|s| s.expose()), Some("s3cret"));
    let client = xaa.pre_registered.as_ref().unwrap();
    assert_eq!(client.client_secret.as_ref().map(|s| s.expose()), Some("s3cret"));
    assert_eq!(client.issuer.as_deref(), Some("https://as.example.com"));
    // Assertions and secrets never show in a `{:?}`.
    for name in ["wif-env", "xaa"] {
        let shown = format!("{:?}", f.server(name).unwrap());
        assert!(!shown.contains("s3cret"), "{shown}");
    }
    assert!(!format!("{xaa:?}").contains("s3cret"));
    std::fs::remove_dir_all(&dir).unwrap();

    let oauth = |o: &str| format!(r#"{{"url": "http://h/", "mcpoll": {{"oauth": {o}}}}}"#);
    let idp = r#""idpTokenEndpoint": "https://idp/token", "idpClientId": "i""#;
    let cases = [
        (oauth(r#"{"grant": "password", "clientId": "a"}"#), "mcpoll.oauth.grant", "WrongType"),
        (oauth(r#"{"grant": "jwtBearer", "clientId": "a"}"#), "mcpoll.oauth.assertion", "Missing"),
        (
            oauth(
                r#"{"grant": "jwtBearer", "clientId": "a", "assertion": "x", "assertionFile": "f"}"#,
            ),
            "mcpoll.oauth.assertionFile",
            "Conflict",
        ),
        (
            oauth(
                r#"{"grant": "jwtBearer", "clientId": "a", "assertion": "", "assertionFile": "f"}"#,
            ),
            "mcpoll.oauth.assertion",
            "Invalid",
        ),
        (
            oauth(
                r#"{"grant": "jwtBearer", "clientId": "a", "assertion": "x", "idpClientId": "i"}"#,
            ),
            "mcpoll.oauth.idpClientId",
            "UnknownKey",
        ),
        (
            oauth(r#"{"clientId": "a", "clientSecret": "s", "assertion": "x"}"#),
            "mcpoll.oauth.assertion",
            "UnknownKey",
        ),
        (
            oauth(
                r#"{"grant": "identityAssertion", "clientId": "a", "clientSecret": "s", "assertion": "x"}"#,
            ),
            "mcpoll.oauth.idpTokenEndpoint",
            "Missing",
        ),
        (
            oauth(&format!(
                r#"{{"grant": "identityAssertion", "clientId": "a", "assertion": "x", {idp}}}"#
            )),
            "mcpoll.oauth.clientSecret",
            "Missing",
        ),
        (
            oauth(
                r#"{"grant": "identityAssertion", "clientId": "a", "clientSecret": "s", "assertion": "x", "idpTokenEndpoint": "ftp://idp/token", "idpClientId": "i"}"#,
            ),
            "mcpoll.oauth.idpTokenEndpoint",
            "Invalid",
        ),
        (
            oauth(&format!(
                r#"{{"grant": "identityAssertion", "clientId": "a", "clientSecret": "s", "assertion": "x", {idp}, "idpClientSecret": 1}}"#
            )),
            "mcpoll.oauth.idpClientSecret",
            "WrongType",
        ),
    ];
    for (entry, key, kind) in &cases {
        let e = refused(entry);
        assert_eq!(e.key.as_deref(), Some(*key), "{entry}: {e}");
        assert_eq!(kind_name(&e.kind), *kind, "{entry}: {e}");
    }
}
