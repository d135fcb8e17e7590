//! The assertion grants end to end through the CLI: a workload's JWT from a file (the
//! JWT-bearer grant), and enterprise-managed authorization from a config file (token
//! exchange at an identity provider, then the JWT-bearer grant). The identity provider, the
//! authorization server and the protected MCP endpoint are servers in the test, on loopback.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use common::mini::{mcp_answer, protected_mcp_server, MiniServer, Request, Response};

const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// A form body, decoded.
fn form(body: &str) -> HashMap<String, String> {
    fn decode(s: &str) -> String {
        let b = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < b.len() => {
                    let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 2;
                }
                c => out.push(c),
            }
            i += 1;
        }
        String::from_utf8(out).unwrap()
    }
    body.split('&').filter_map(|p| p.split_once('=')).map(|(k, v)| (decode(k), decode(v))).collect()
}

fn refuse(error: &str) -> Response {
    let mut r = Response::json(serde_json::json!({"error": error}));
    r.status = 400;
    r
}

/// An authorization server offering only the JWT-bearer grant: its metadata on GET, and the
/// token `t1` for a token request `accept` approves (else `invalid_grant`).
fn bearer_as(
    auth_methods: &[&str],
    accept: impl Fn(&Request, &HashMap<String, String>) -> bool + Send + Sync + 'static,
) -> (MiniServer, String) {
    let issuer: Arc<OnceLock<String>> = Arc::default();
    let issuer2 = Arc::clone(&issuer);
    let methods: Vec<String> = auth_methods.iter().map(|m| (*m).to_owned()).collect();
    let auth = MiniServer::start(None, move |req: &Request| {
        let issuer = issuer2.get().cloned().unwrap_or_default();
        if req.method == "GET" {
            return Response::json(serde_json::json!({
                "issuer": issuer, "token_endpoint": format!("{issuer}/token"),
                "grant_types_supported": [JWT_BEARER],
                "token_endpoint_auth_methods_supported": methods}));
        }
        let f = form(&req.body);
        if f.get("grant_type").map(String::as_str) != Some(JWT_BEARER) || !accept(req, &f) {
            return refuse("invalid_grant");
        }
        Response::json(
            serde_json::json!({"access_token": "t1", "token_type": "Bearer", "expires_in": 3600}),
        )
    });
    let url = format!("http://127.0.0.1:{}", auth.port);
    let _ = issuer.set(url.clone());
    (auth, url)
}

fn mcp_for(as_url: String) -> MiniServer {
    protected_mcp_server(as_url, |req| {
        (req.header("authorization") == Some("Bearer t1")).then(|| mcp_answer(req))
    })
}

/// Runs the CLI; exit code, stdout, stderr.
fn cli(args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(common::cli()).args(args).output().expect("run mcpoll");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpoll-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_cli_presents_a_workload_jwt_from_a_file_and_never_resends_a_refused_one() {
    let (auth, as_url) = bearer_as(&["none"], |_, f| {
        f.get("assertion").map(String::as_str) == Some("good-jwt")
            && f.get("client_id").map(String::as_str) == Some("workload")
    });
    let mcp = mcp_for(as_url);
    let url = mcp.url("http", "127.0.0.1");
    let dir = temp_dir("wif");
    let file = dir.join("token");
    let file = file.to_str().unwrap();
    let run = || {
        let args = ["--json", "--http", &url, "--jwt-bearer", "workload", "--assertion-file", file];
        cli(&[&args[..], &["call", "echo", r#"{"text":"via wif"}"#]].concat())
    };
    std::fs::write(file, "good-jwt\n").unwrap();
    let (code, stdout, stderr) = run();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("via wif"), "{stdout}");

    // A refused assertion: the file is read again, gives the same one, and it is not resent.
    std::fs::write(file, "stale-jwt").unwrap();
    let (code, _, stderr) = run();
    assert_eq!(code, Some(1), "{stderr}");
    let line: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(line["error"]["name"], "authorization", "{stderr}");
    assert!(line["error"]["message"].as_str().unwrap().contains("invalid_grant"), "{stderr}");
    assert!(!stderr.contains("stale-jwt"), "the assertion is never printed: {stderr}");
    let sent = auth.requests().iter().filter(|r| r.body.contains("stale-jwt")).count();
    assert_eq!(sent, 1);

    // A missing file is the host's fault, said as such.
    std::fs::remove_file(file).unwrap();
    let (code, _, stderr) = run();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("could not be read"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_config_file_runs_enterprise_managed_authorization() {
    // The authorization server takes the ID-JAG from its client, authenticated with Basic.
    let (auth, as_url) = bearer_as(&["client_secret_basic"], |req, f| {
        f.get("assertion").map(String::as_str) == Some("the-id-jag")
            && req.header("authorization") == Some("Basic eGFhOnNlYw==")
    });
    let mcp = mcp_for(as_url.clone());
    let mcp_url = mcp.url("http", "127.0.0.1");
    // The identity provider exchanges the identity token for an ID-JAG.
    let seen: Arc<OnceLock<HashMap<String, String>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    let idp = MiniServer::start(None, move |req: &Request| {
        let f = form(&req.body);
        let _ = seen2.set(f.clone());
        if f.get("subject_token").map(String::as_str) != Some("id-token-of-alice") {
            return refuse("invalid_grant");
        }
        Response::json(serde_json::json!({
            "access_token": "the-id-jag", "token_type": "N_A",
            "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"}))
    });
    let dir = temp_dir("xaa");
    let id_token = dir.join("id-token");
    std::fs::write(&id_token, "id-token-of-alice").unwrap();
    let config = dir.join("mcp.json");
    let entry = serde_json::json!({"mcpServers": {"s": {"url": mcp_url, "mcpoll": {"oauth": {
        "grant": "identityAssertion", "clientId": "xaa", "clientSecret": "sec",
        "idpTokenEndpoint": format!("http://127.0.0.1:{}/token", idp.port),
        "idpClientId": "idp-client", "assertionFile": id_token}}}}});
    std::fs::write(&config, entry.to_string()).unwrap();
    let config = config.to_str().unwrap();
    let args = ["--json", "--config", config, "call", "echo", r#"{"text":"via xaa"}"#];
    let (code, stdout, stderr) = cli(&args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("via xaa"), "{stdout}");
    let f = seen.get().expect("the identity provider was asked");
    let want = [
        ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
        ("requested_token_type", "urn:ietf:params:oauth:token-type:id-jag"),
        ("audience", as_url.as_str()),
        ("resource", mcp_url.as_str()),
        ("subject_token", "id-token-of-alice"),
        ("subject_token_type", "urn:ietf:params:oauth:token-type:id_token"),
        ("client_id", "idp-client"),
    ];
    for (k, v) in want {
        assert_eq!(f.get(k).map(String::as_str), Some(v), "{k} in {f:?}");
    }
    assert_eq!(auth.requests().iter().filter(|r| r.method == "POST").count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_cli_refuses_incomplete_assertion_options() {
    let http = ["--http", "http://127.0.0.1:9/mcp"];
    let cases: [(&[&str], &str); 6] = [
        (&["--jwt-bearer", "w"], "--jwt-bearer needs --assertion-file"),
        (
            &["--jwt-bearer", "w", "--assertion-file", "f", "--idp-client", "i"],
            "--idp-token-endpoint and --idp-client go with --identity-assertion",
        ),
        (&["--identity-assertion", "x"], "--identity-assertion needs ID:SECRET"),
        (
            &["--identity-assertion", "x:s", "--assertion-file", "f", "--idp-client", "i"],
            "--identity-assertion needs --idp-token-endpoint",
        ),
        (
            &["--identity-assertion", "x:s", "--assertion-file", "f", "--idp-token-endpoint", "u"],
            "--identity-assertion needs --idp-client",
        ),
        (&["--assertion-file", "f"], "go with --jwt-bearer or --identity-assertion"),
    ];
    for (opts, message) in cases {
        let (code, _, stderr) = cli(&[&http[..], opts, &["tools"]].concat());
        assert_eq!(code, Some(2), "{opts:?}: {stderr}");
        assert!(stderr.contains(message), "{opts:?}: {stderr}");
    }
}
