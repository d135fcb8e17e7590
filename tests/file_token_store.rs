//! The file token store of `examples/file_token_store.rs`: created 0600, read back whole,
//! refused when others can read it, and used by the HTTP driver across a restart.
#![cfg(unix)]

mod common;

#[allow(dead_code)]
#[path = "../examples/file_token_store.rs"]
mod example;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use common::mini::{client_credentials_servers, MiniServer};
use common::raw;
use example::{FileStore, FileStoreError};
use mcpoll::oauth::{
    ClientRegistration, OAuthConfig, PreRegistered, Secret, StoredAuth, TokenStore, Tokens,
};
use mcpoll::{CallOptions, Config, Host, HttpOptions, ServerState};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpoll-filestore-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn mode(path: &std::path::Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn sample() -> StoredAuth {
    StoredAuth {
        issuer: "https://as.example".into(),
        client: Some(ClientRegistration {
            client_id: "dyn-1".into(),
            client_secret: Some(Secret::new("client-SECRET")),
            token_endpoint_auth_method: "client_secret_basic".into(),
        }),
        tokens: Some(Tokens {
            access_token: Secret::new("access-SECRET"),
            refresh_token: Some(Secret::new("refresh-SECRET")),
            expires_at: Some(1_900_000_000),
            scope: Some("read write".into()),
            dpop_jkt: Some("0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I".into()),
        }),
    }
}

#[test]
fn saved_tokens_come_back_from_a_0600_file() {
    let dir = scratch("roundtrip");
    let path = dir.join("tokens.json");
    let mut store = FileStore::open(&path).unwrap();
    assert_eq!(store.load("https://mcp.example/mcp"), None);
    assert!(!path.exists(), "nothing written before the first save");
    store.save("https://mcp.example/mcp", &sample());
    let bare = StoredAuth { issuer: "https://other".into(), client: None, tokens: None };
    store.save("https://two.example/mcp", &bare);
    // A resource URL may carry a key in its query.
    store.save("https://three.example/mcp?key=KEY-SECRET", &bare);
    assert!(store.last_error.is_none());
    assert_eq!(mode(&path), 0o600);
    let shown = format!("{store:?}");
    assert!(!shown.contains("SECRET"), "Debug shows no secret: {shown}");
    store.clear("https://three.example/mcp?key=KEY-SECRET");

    let mut again = FileStore::open(&path).unwrap();
    assert_eq!(again.load("https://mcp.example/mcp"), Some(sample()));
    assert_eq!(again.load("https://two.example/mcp"), Some(bare));
    again.clear("https://two.example/mcp");
    assert_eq!(mode(&path), 0o600);
    let mut third = FileStore::open(&path).unwrap();
    assert_eq!(third.resources().collect::<Vec<_>>(), ["https://mcp.example/mcp"]);
    assert_eq!(third.load("https://two.example/mcp"), None);
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn a_file_others_can_read_is_refused() {
    let dir = scratch("insecure");
    let path = dir.join("tokens.json");
    let mut store = FileStore::open(&path).unwrap();
    store.save("https://mcp.example/mcp", &sample());
    for loose in [0o644, 0o640, 0o602] {
        fs::set_permissions(&path, fs::Permissions::from_mode(loose)).unwrap();
        match FileStore::open(&path) {
            Err(FileStoreError::Insecure { mode }) => assert_eq!(mode, loose),
            other => panic!("{loose:o}: {other:?}"),
        }
    }
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    assert!(FileStore::open(&path).is_ok());

    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert!(matches!(FileStore::open(&link), Err(FileStoreError::NotAFile)));
    fs::write(dir.join("junk.json"), "{}").unwrap();
    fs::set_permissions(dir.join("junk.json"), fs::Permissions::from_mode(0o600)).unwrap();
    assert!(matches!(FileStore::open(dir.join("junk.json")), Err(FileStoreError::Malformed)));
    let _ = fs::remove_dir_all(dir);
}

/// An authorization server granting `t1` for `id:secret`, and an MCP server requiring it.
fn servers() -> (MiniServer, MiniServer) {
    client_credentials_servers("127.0.0.1")
}

fn run_once(mcp: &MiniServer, path: &std::path::Path) {
    let url = mcp.url("http", "127.0.0.1");
    let mut oauth =
        OAuthConfig::client_credentials(url.clone(), PreRegistered::with_secret("id", "secret"));
    oauth.store = Box::new(FileStore::open(path).unwrap());
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(url).oauth(oauth), Config::default()).unwrap();
    let state = host.wait_ready(id, common::PATIENCE).unwrap();
    assert!(matches!(state, ServerState::Ready(..)), "{state}");
    let r = host.call_tool_blocking(id, "echo", &raw(r#"{"text":"x"}"#), &CallOptions::default());
    assert!(r.unwrap().json.contains("\"x\""));
}

#[test]
fn a_restarted_host_sends_the_stored_token_at_once() {
    let dir = scratch("restart");
    let path = dir.join("tokens.json");
    let (auth, mcp) = servers();
    run_once(&mcp, &path);
    assert_eq!(auth.requests().len(), 2, "metadata and token");
    assert_eq!(mode(&path), 0o600);
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"t1\""), "the token is in the file");
    assert!(!text.contains("secret"), "host credentials stay with the host: {text}");

    let before = mcp.requests().len();
    run_once(&mcp, &path);
    assert_eq!(auth.requests().len(), 2, "the second run asks the AS for nothing");
    let second = mcp.requests();
    let refused = second[before..].iter().filter(|r| r.header("authorization").is_none());
    assert_eq!(refused.count(), 0, "every request of the second run carries the token");
    let _ = fs::remove_dir_all(dir);
}
