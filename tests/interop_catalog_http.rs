//! The capability cache against real SDK peers over Streamable HTTP on 127.0.0.1: a tool that
//! a second client adds at runtime (`bump_tools`) invalidates and refreshes the first client's
//! cached catalog, through the legacy `notifications/tools/list_changed` on the standalone GET
//! stream (SDK v1, 2025-11-25) and through `subscriptions/listen` (SDK v2 TypeScript and
//! Python, 2026-07-28).
//!
//! The watching host sends nothing between its baseline listing and the change reaching it,
//! so the change cannot have ridden the answer to one of its POSTs: it came on a stream the
//! host kept open.
//!
//! Needs the peers (`tests/peers/setup.sh`); `MCPOLL_SKIP_PEERS=1` skips it.

mod common;

use std::time::{Duration, Instant};

use common::*;
use mcpoll::{CacheConfig, ClientEvent, Config, Era, Event, Host, HttpOptions, ListKind, ServerId};

const WAIT: Duration = common::PATIENCE;

/// What the host was told about the tools, as `added/removed/changed` lists.
type Told = Vec<(Vec<String>, Vec<String>, Vec<String>)>;

/// What the watching host saw while draining.
#[derive(Default)]
struct Seen {
    told: Told,
    list_changed: bool,
    subscribed: bool,
}

fn drain(host: &mut Host, how_long: Duration, seen: &mut Seen) {
    let list = |v: &[Box<str>]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let deadline = Instant::now() + how_long;
    while Instant::now() < deadline {
        host.poll(Some(Duration::from_millis(20))).expect("poll");
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::Client(ClientEvent::ToolsChanged(c)) => {
                    seen.told.push((list(c.added()), list(c.removed()), list(c.changed())));
                }
                Event::ListChanged(ListKind::Tools) => seen.list_changed = true,
                Event::Subscribed { .. } => seen.subscribed = true,
                _ => {}
            }
        }
    }
}

fn connect(host: &mut Host, url: &str) -> ServerId {
    let id = host.add_http_server(HttpOptions::new(url.to_owned()), Config::default()).unwrap();
    let state = host.wait_ready(id, WAIT).expect("ready");
    assert!(matches!(state, mcpoll::ServerState::Ready(..)), "{state:?}");
    id
}

fn sent(host: &Host, id: ServerId) -> u64 {
    host.stats(id).expect("server").requests_sent
}

fn has_extra(host: &mut Host, id: ServerId) -> bool {
    let view = host.tool_catalog_blocking(id, WAIT).expect("tools");
    let found = view.names().any(|n| n.starts_with("extra_"));
    found
}

/// A second client (its own session) adds a tool.
fn bump_from_another_client(url: &str) {
    let mut other = Host::new().unwrap();
    let id = connect(&mut other, url);
    call(&mut other, id, "bump_tools", "{}");
}

/// The watcher: connected, its tool catalog listed once and cached, watching for changes
/// (and, on a modern server, its listen stream acknowledged).
fn watcher(url: &str, eager: bool) -> (Host, ServerId, Seen) {
    let cache = CacheConfig { eager_refresh: eager, ..CacheConfig::default() };
    let mut host = Host::with_cache(cache).unwrap();
    let id = connect(&mut host, url);
    assert!(!has_extra(&mut host, id), "a fresh peer has no extra tool");
    host.watch_catalogs(id).unwrap();
    let mut seen = Seen::default();
    if host.era(id) == Some(Era::Modern) {
        let deadline = Instant::now() + WAIT;
        while !seen.subscribed {
            assert!(Instant::now() < deadline, "listen not acknowledged");
            drain(&mut host, Duration::from_millis(50), &mut seen);
        }
    } else {
        // Time for the standalone GET stream to open.
        drain(&mut host, Duration::from_millis(500), &mut seen);
    }
    assert!(seen.told.is_empty(), "the first listing is the baseline: {:?}", seen.told);
    (host, id, seen)
}

/// SDK v1 over HTTP (2025-11-25): the change notification arrives on the standalone GET
/// stream; it marks the cached catalog stale without listing (not eager), and the next need
/// lists again and announces only the new tool.
#[test]
fn typescript_sdk_v1_http_get_stream_list_changed_invalidates_and_refreshes() {
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, "run-ts1-http.sh");
    let (mut host, id, mut seen) = watcher(&peer.url(), false);
    assert_eq!(host.era(id), Some(Era::Legacy));
    let listed = sent(&host, id);
    let stats = host.cache_stats();
    assert!(!has_extra(&mut host, id));
    assert_eq!(host.cache_stats().refreshes, stats.refreshes, "fresh: served from the cache");
    bump_from_another_client(&peer.url());
    let deadline = Instant::now() + WAIT;
    while !seen.list_changed {
        assert!(Instant::now() < deadline, "no list_changed: {}", peer.stderr());
        drain(&mut host, Duration::from_millis(50), &mut seen);
    }
    assert_eq!(sent(&host, id), listed, "no POST of this host could have carried it");
    assert_eq!(host.cache_stats().refreshes, stats.refreshes, "not eager: nothing listed yet");
    assert!(host.tool(id, "echo").is_none(), "the cached catalog is stale");
    assert!(has_extra(&mut host, id), "the next need lists again");
    assert_eq!(host.cache_stats().refreshes, stats.refreshes + 1);
    drain(&mut host, Duration::from_millis(100), &mut seen);
    assert_eq!(seen.told, [(vec!["extra_1".to_owned()], vec![], vec![])]);
    assert!(host.tool(id, "extra_1").is_some(), "and it is cached");
}

/// SDK v2 over HTTP (2026-07-28): the change reaches the host on its `subscriptions/listen`
/// stream and, with eager refresh, the new catalog and its diff arrive without a need.
fn modern_http_change_refreshes_the_cache(script: &str) {
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, script);
    let (mut host, id, mut seen) = watcher(&peer.url(), true);
    assert_eq!(host.era(id), Some(Era::Modern), "{script}");
    let refreshes = host.cache_stats().refreshes;
    bump_from_another_client(&peer.url());
    let deadline = Instant::now() + WAIT;
    while seen.told.is_empty() {
        assert!(Instant::now() < deadline, "{script}: no ToolsChanged: {}", peer.stderr());
        drain(&mut host, Duration::from_millis(50), &mut seen);
    }
    drain(&mut host, Duration::from_millis(500), &mut seen);
    assert_eq!(seen.told, [(vec!["extra_1".to_owned()], vec![], vec![])], "{script}");
    assert!(host.cache_stats().refreshes > refreshes, "{script}: refreshed eagerly");
    // The SDKs mark modern listings `ttlMs: 0` unless told otherwise: then the refreshed
    // catalog was served once and the next need lists again; else it is a cached hit.
    let cached = host.tool(id, "extra_1").is_some();
    let before = host.cache_stats().refreshes;
    let view = host.tool_catalog_blocking(id, WAIT).expect("tools");
    assert!(view.definition("extra_1").is_some(), "{script}: the new catalog");
    assert_eq!(view.is_cached(), cached, "{script}");
    let relisted = host.cache_stats().refreshes - before;
    assert_eq!(relisted, u64::from(!cached), "{script}: listed again only when not cacheable");
}

#[test]
fn typescript_sdk_v2_http_change_refreshes_the_cache() {
    modern_http_change_refreshes_the_cache("run-ts2-http.sh");
}

#[test]
fn python_sdk_v2_http_change_refreshes_the_cache() {
    modern_http_change_refreshes_the_cache("run-py-http.sh");
}
