//! The capability store of `examples/file_capability_store.rs` under a restarted host, against
//! the Python SDK peer over stdio: a warm store serves the era verdict and the tool catalog, so
//! the restarted host sends no request before its first call; an expired entry, and an entry
//! filed under another key, are not served and the server is asked again (probed, or listed). Requests are counted by the host's engine (`Stats::requests_sent`: every
//! request written to the server) and by the call records.
//!
//! Skipped loudly without the peers (`tests/peers/setup.sh`); `MCPOLL_REQUIRE_PEERS=1` fails.

mod common;

#[allow(dead_code)]
#[path = "../examples/file_capability_store.rs"]
mod example;

use std::cell::RefCell;
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use common::*;
use example::FileCapabilityStore;
use mcpoll::{CallRecord, Config, Host, Method, StdioCommand};

const WAIT: Duration = Duration::from_secs(30);

/// A probe timeout long enough for a Python peer starting on a loaded machine: a probe that
/// times out falls back to `initialize`, which a server that took the late probe refuses.
fn patient() -> Config {
    Config { probe_timeout: Duration::from_secs(20), ..Config::default() }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpoll-capstore-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// What one host start saw: the tool names, requests written before the first tool call
/// (the era probe, and the listing unless the store answered), and whether a `tools/list`
/// record was a cache hit.
struct Run {
    names: Vec<String>,
    requests_before_call: u64,
    listings_sent: usize,
    /// `Host::tool` found `echo` before the catalog was asked for.
    from_store: bool,
}

fn run(peer: &Path, dir: &Path) -> Run {
    let cmd = StdioCommand::new(peer.join("run-py-stdio.sh"))
        .env("LAB_TOOLS_TTL_MS", "600000")
        .env("LAB_DISCOVER_TTL_MS", "600000");
    let mut host = Host::new().unwrap();
    host.set_capability_store(FileCapabilityStore::open(dir).unwrap());
    let sent: Rc<RefCell<usize>> = Rc::default();
    let count = sent.clone();
    host.set_record_sink(Box::new(move |r: &CallRecord<'_>| {
        if r.method == Method::ToolsList && !r.cache_hit {
            *count.borrow_mut() += 1;
        }
    }));
    let id = start(&mut host, cmd, patient());
    // A warm store answers a single definition too, before any catalog was asked for.
    let from_store = host.tool(id, "echo").is_some();
    let names = host.tool_catalog_blocking(id, WAIT).unwrap().names().map(str::to_owned).collect();
    let requests_before_call = host.stats(id).unwrap().requests_sent;
    let out = call(&mut host, id, "echo", r#"{"text":"hi"}"#);
    assert!(out.json.contains("hi"));
    let listings_sent = *sent.borrow();
    Run { names, requests_before_call, listings_sent, from_store }
}

/// The store's one tool catalog file, as JSON.
fn only_file(dir: &Path) -> (PathBuf, serde_json::Value) {
    only_entry(dir, "tools-")
}

/// The store's one file whose name starts with `prefix`, as JSON.
fn only_entry(dir: &Path, prefix: &str) -> (PathBuf, serde_json::Value) {
    let files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let v = serde_json::from_slice(&fs::read(&files[0]).unwrap()).unwrap();
    (files[0].clone(), v)
}

#[test]
fn a_restarted_host_serves_the_catalog_from_the_store_and_asks_again_when_it_may_not() {
    let Some(peer) = peers_dir() else { return };
    let dir = scratch("restart");

    // Cold: the probe and the listing.
    let cold = run(&peer, &dir);
    assert!(cold.names.iter().any(|n| n == "echo"), "{:?}", cold.names);
    assert_eq!(cold.listings_sent, 1);
    let (file, entry) = only_file(&dir);
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("tools-"), "{name}");
    // Nothing secret or named in clear: hashes in the name, list results in the body.
    assert!(!name.contains("run-py-stdio"), "{name}");
    assert_eq!(entry["key"].as_str().map(|k| format!("{k}.json")), Some(name.clone()));
    let body = entry.to_string();
    let result = entry["pages"][0]["result"].as_str().unwrap();
    assert!(result.contains("\"name\":\"echo\"") && !body.contains("run-py-stdio"), "{body}");

    // The probe's verdict went to the store too, under the server context without the
    // version, and holds the version and the raw discover result.
    let (verdict_file, verdict) = only_entry(&dir, "discover-");
    let verdict_page = verdict["pages"][0]["result"].as_str().unwrap();
    assert!(verdict_page.contains("\"protocolVersion\":\"2026-07-28\""), "{verdict_page}");
    assert!(verdict_page.contains("supportedVersions"), "{verdict_page}");
    assert!(!verdict.to_string().contains("run-py-stdio"));

    // Warm: the restarted host asks nothing before its first call (cold: the probe and the
    // listing).
    assert_eq!(cold.requests_before_call, 2);
    let warm = run(&peer, &dir);
    assert_eq!(warm.names, cold.names);
    assert_eq!(warm.listings_sent, 0, "served from the store");
    assert!(!cold.from_store && warm.from_store);
    assert_eq!(warm.requests_before_call, 0);
    eprintln!(
        "requests before the first call: cold store {}, warm store {}",
        cold.requests_before_call, warm.requests_before_call
    );

    // Expired: the entry is not served; the server is listed again (and the entry renewed).
    let mut expired = entry.clone();
    for p in expired["pages"].as_array_mut().unwrap() {
        p["expiresUnixMs"] = serde_json::json!(1000);
    }
    fs::write(&file, expired.to_string()).unwrap();
    let again = run(&peer, &dir);
    assert_eq!(again.listings_sent, 1, "an expired entry is not served");
    assert!(!again.from_store);
    // The verdict still came from the store: only the listing was asked again.
    assert_eq!(again.requests_before_call, 1);
    let (_, renewed) = only_file(&dir);
    assert!(renewed["pages"][0]["expiresUnixMs"].as_u64().unwrap() > 1000);

    // Filed under another key (another principal's private entry copied here): refused.
    let mut foreign = renewed.clone();
    let other = foreign["key"].as_str().unwrap().replacen("tools-", "tools-0", 1);
    foreign["key"] = serde_json::json!(other);
    fs::write(&file, foreign.to_string()).unwrap();
    let refused = run(&peer, &dir);
    assert_eq!(refused.listings_sent, 1, "an entry of another key is not served");
    assert!(!refused.from_store);
    assert_eq!(refused.requests_before_call, 1);

    // An expired verdict, and one filed under another key, are not used: the server is
    // probed again (and the verdict renewed), while the warm catalog still needs no listing.
    let mut stale = verdict.clone();
    stale["pages"][0]["expiresUnixMs"] = serde_json::json!(1000);
    fs::write(&verdict_file, stale.to_string()).unwrap();
    let reprobed = run(&peer, &dir);
    assert_eq!((reprobed.requests_before_call, reprobed.listings_sent), (1, 0));
    let (_, renewed_verdict) = only_entry(&dir, "discover-");
    assert!(renewed_verdict["pages"][0]["expiresUnixMs"].as_u64().unwrap() > 1000);
    let mut foreign = renewed_verdict.clone();
    let other = foreign["key"].as_str().unwrap().replacen("discover-", "discover-0", 1);
    foreign["key"] = serde_json::json!(other);
    fs::write(&verdict_file, foreign.to_string()).unwrap();
    let reprobed = run(&peer, &dir);
    assert_eq!((reprobed.requests_before_call, reprobed.listings_sent), (1, 0));
    assert_eq!(only_entry(&dir, "discover-").1["key"], renewed_verdict["key"]);

    // A public entry read back as private (or the reverse) is refused the same way.
    let (_, good) = only_file(&dir);
    let mut flipped = good.clone();
    flipped["public"] = serde_json::json!(!good["public"].as_bool().unwrap());
    fs::write(&file, flipped.to_string()).unwrap();
    assert_eq!(run(&peer, &dir).listings_sent, 1, "an entry of the other scope is not served");

    // The server says its tools changed: the stored entry goes with the cached catalog.
    let (file, _) = only_file(&dir);
    let cmd = StdioCommand::new(peer.join("run-py-stdio.sh"))
        .env("LAB_TOOLS_TTL_MS", "600000")
        .env("LAB_DISCOVER_TTL_MS", "600000");
    let mut host = Host::new().unwrap();
    host.set_capability_store(FileCapabilityStore::open(&dir).unwrap());
    let id = start(&mut host, cmd, patient());
    assert!(host.tool_catalog_blocking(id, WAIT).unwrap().names().any(|n| n == "echo"));
    host.watch_catalogs(id).unwrap();
    poll_until(&mut host, WAIT, |h| {
        while h.poll_event().is_some() {}
        h.pending(id) == Some(1) // the listen stream is open
    });
    call(&mut host, id, "bump_tools", "{}");
    poll_until(&mut host, WAIT, |h| {
        while h.poll_event().is_some() {}
        !file.exists()
    });
    // The next need lists the new catalog and stores it again.
    let names: Vec<String> =
        host.tool_catalog_blocking(id, WAIT).unwrap().names().map(str::to_owned).collect();
    assert!(names.iter().any(|n| n == "extra_1"), "{names:?}");
    let (_, fresh) = only_file(&dir);
    assert!(fresh["pages"][0]["result"].as_str().unwrap().contains("extra_1"));
    drop(host);
    fs::remove_dir_all(&dir).ok();
}

/// A stored verdict the server contradicts is dropped from the store: the same identity now
/// names a legacy-only server (the TypeScript SDK v1 peer), which answers the first call like a
/// legacy server; the engine probes, settles on 2025-11-25, and the store's verdict goes.
#[test]
fn a_stored_verdict_the_server_contradicts_is_marked_stale() {
    let Some(peer) = peers_dir() else { return };
    let dir = scratch("contradicted");
    let same = |c: Config| Config { cache_identity: Some("one-server".into()), ..c };

    let modern =
        StdioCommand::new(peer.join("run-py-stdio.sh")).env("LAB_DISCOVER_TTL_MS", "600000");
    let mut host = Host::new().unwrap();
    host.set_capability_store(FileCapabilityStore::open(&dir).unwrap());
    let id = start(&mut host, modern, same(patient()));
    call(&mut host, id, "echo", r#"{"text":"hi"}"#);
    drop(host);
    let (verdict_file, _) = only_entry(&dir, "discover-");

    let legacy = StdioCommand::new(peer.join("run-ts1-stdio.sh"));
    let mut host = Host::new().unwrap();
    host.set_capability_store(FileCapabilityStore::open(&dir).unwrap());
    let id = start(&mut host, legacy, same(patient()));
    let out = call(&mut host, id, "echo", r#"{"text":"hi"}"#);
    assert!(out.json.contains("hi"), "{}", out.json);
    // The legacy answer sent the engine back to probing, which settles on the legacy era.
    poll_until(&mut host, WAIT, |h| {
        while h.poll_event().is_some() {}
        h.era(id) == Some(mcpoll::Era::Legacy) && !verdict_file.exists()
    });
    drop(host);
    fs::remove_dir_all(&dir).ok();
}

/// The extensions the client declares are part of the key: a host declaring one does not
/// read the catalog a host without it stored (the server may list other tools for it).
#[test]
fn declared_extensions_key_the_stored_catalog_apart() {
    let Some(peer) = peers_dir() else { return };
    let dir = scratch("extensions");
    let files = |host_config: Config| {
        let cmd = StdioCommand::new(peer.join("run-py-stdio.sh")).env("LAB_TOOLS_TTL_MS", "600000");
        let mut host = Host::new().unwrap();
        host.set_capability_store(FileCapabilityStore::open(&dir).unwrap());
        let id = start(&mut host, cmd, host_config);
        assert!(host.tool_catalog_blocking(id, WAIT).unwrap().names().any(|n| n == "echo"));
        drop(host);
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("tools-"))
            .collect();
        names.sort();
        names
    };
    assert_eq!(files(patient()).len(), 1);
    let declared = Config { extensions: r#"{"io.example/skills":{}}"#.into(), ..patient() };
    assert_eq!(files(declared).len(), 2, "a second entry, under its own key");
    fs::remove_dir_all(&dir).ok();
}
