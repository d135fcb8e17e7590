//! The host's capability cache against the demo server over real pipes: one listing shared by
//! every need (counted on the wire), hits that allocate nothing, search, the key's parts, and
//! the server's `ttlMs: 0` obeyed.
//!
//! The demo server marks its modern listings `ttlMs: 0` (do not cache), so the caching tests
//! run it in the legacy era, whose listings carry no hints and get the client's default TTL.

mod common;

use std::time::Duration;

use common::counting::{allocs, Counting};
use common::*;
use mcpoll::{CacheConfig, CatalogError, Config, Host, ServerId};

#[global_allocator]
static GLOBAL: Counting = Counting;

const WAIT: Duration = common::PATIENCE;

/// Requests one full tools/list of the demo server takes: 5 tools, 2 per page.
const PAGES: u64 = 3;

/// The demo server in the legacy era: its listings carry no cache hints.
fn legacy_demo() -> mcpoll::StdioCommand {
    demo_server().arg("--legacy-only")
}

fn sent(host: &Host, id: ServerId) -> u64 {
    host.stats(id).expect("server").requests_sent
}

fn names(host: &mut Host, id: ServerId) -> Vec<String> {
    host.tool_catalog_blocking(id, WAIT).expect("tools").names().map(str::to_owned).collect()
}

#[test]
fn a_fresh_catalog_is_listed_once_and_then_served_from_the_cache() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, legacy_demo(), Config::default());
    let before = sent(&host, id);
    let first = names(&mut host, id);
    assert_eq!(first, ["add", "echo", "fail", "slow", "write_note"]);
    assert_eq!(sent(&host, id), before + PAGES, "one tools/list (three pages)");
    for _ in 0..3 {
        assert_eq!(names(&mut host, id), first);
    }
    assert_eq!(sent(&host, id), before + PAGES, "fresh: no more listings");
    let stats = host.cache_stats();
    assert_eq!((stats.refreshes, stats.hits), (1, 4), "{stats:?}");
    assert_eq!(stats.page_fetches, PAGES, "each page fetched, and cached, on its own");
    let view = host.tool_catalog_blocking(id, WAIT).unwrap();
    assert!(view.is_cached() && view.stale_for().is_none());
    let echo: serde_json::Value = serde_json::from_str(view.definition("echo").unwrap()).unwrap();
    assert_eq!(echo["name"], "echo");
    assert!(host.tool(id, "echo").is_some_and(|d| d.contains("\"name\":\"echo\"")));
    assert!(host.tool(id, "no_such_tool").is_none());
}

#[test]
fn concurrent_needs_share_one_listing_on_the_wire() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, legacy_demo(), Config::default());
    let before = sent(&host, id);
    // Three needs before any answer: the first starts the listing, the others join it.
    for _ in 0..3 {
        assert!(host.tool_catalog(id).expect("need").is_none(), "nothing cached yet");
    }
    assert_eq!(host.tool_catalog_blocking(id, WAIT).unwrap().len(), 5);
    assert_eq!(sent(&host, id), before + PAGES, "one tools/list for four needs");
    assert_eq!(host.cache_stats().refreshes, 1);
    assert!(host.tool_catalog(id).unwrap().is_some(), "now a hit");
}

#[test]
fn a_cached_definition_is_read_without_allocating() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, legacy_demo(), Config::default());
    host.tool_catalog_blocking(id, WAIT).unwrap();
    assert!(host.tool(id, "add").is_some(), "warm");
    let before = allocs();
    for _ in 0..100 {
        std::hint::black_box(host.tool(id, "add"));
    }
    assert_eq!(allocs() - before, 0, "a fresh hit allocates nothing");
    // The counter does count: one boxed value is one allocation.
    std::hint::black_box(Box::new(7u64));
    assert_eq!(allocs() - before, 1);
}

#[test]
fn search_ranks_the_listed_tools() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, legacy_demo(), Config::default());
    assert!(host.search_tools(id, "add", 3).is_empty(), "nothing indexed before a listing");
    host.tool_catalog_blocking(id, WAIT).unwrap();
    let hits = host.search_tools(id, "add two numbers", 3);
    assert_eq!(hits.first().map(|h| h.0), Some("add"), "{hits:?}");
    assert!(hits.len() <= 3);
}

#[test]
fn servers_with_another_identity_or_tenant_do_not_share_entries() {
    let mut host = Host::new().unwrap();
    let a = start(&mut host, legacy_demo(), Config::default());
    let b = start(
        &mut host,
        legacy_demo(),
        Config { cache_tenant: Some("globex".into()), ..Config::default() },
    );
    let c = start(
        &mut host,
        legacy_demo(),
        Config { cache_identity: Some("other".into()), ..Config::default() },
    );
    // The same program and context: the same entry, so `d` is a hit without listing.
    let d = start(&mut host, legacy_demo(), Config::default());
    names(&mut host, a);
    for (id, listed) in [(b, PAGES), (c, PAGES), (d, 0)] {
        let before = sent(&host, id);
        names(&mut host, id);
        assert_eq!(sent(&host, id) - before, listed);
    }
    assert_eq!(host.cache_stats().refreshes, 3);
}

/// Two servers run by the same program with other arguments (`npx -y a`, `npx -y b`: the
/// usual shape of a configuration file) are different servers: without `cache_identity`,
/// neither is served the other's catalog. Their records still name the program only.
#[test]
fn servers_of_one_program_with_other_arguments_do_not_share_catalogs() {
    let mut host = Host::new().unwrap();
    let a = start(&mut host, legacy_demo(), Config::default());
    let b = start(&mut host, legacy_demo().args(["--bulk-tools", "2"]), Config::default());
    let listed_a = names(&mut host, a);
    let before = sent(&host, b);
    let listed_b = names(&mut host, b);
    assert!(sent(&host, b) > before, "b lists its own catalog");
    assert_eq!(listed_b, ["bulk_000000", "bulk_000001"]);
    assert_ne!(listed_a, listed_b);
    let name = host.client().server_name(a).map(str::to_owned);
    assert!(name.as_deref().is_some_and(|n| !n.contains("legacy")), "{name:?}");
}

/// Two runs of one program with other environments (each with its own token, say) are
/// different servers: without `cache_identity`, neither is served the other's catalog. The
/// same environment set in another order is the same server. No value shows in `Debug`.
#[test]
fn servers_of_one_program_with_other_environments_do_not_share_catalogs() {
    let mut host = Host::new().unwrap();
    let with = |token: &str| legacy_demo().env("DEMO_TOKEN", token).env("DEMO_REGION", "eu");
    let a = start(&mut host, with("s3cret-a"), Config::default());
    let b = start(&mut host, with("s3cret-b"), Config::default());
    let reordered = legacy_demo().env("DEMO_REGION", "eu").env("DEMO_TOKEN", "s3cret-a");
    let c = start(&mut host, reordered, Config::default());
    names(&mut host, a);
    for (id, listed) in [(b, PAGES), (c, 0)] {
        let before = sent(&host, id);
        names(&mut host, id);
        assert_eq!(sent(&host, id) - before, listed);
    }
    let shown = format!("{:?}", host.client());
    assert!(!shown.contains("s3cret"), "{shown}");
    let name = host.client().server_name(a).map(str::to_owned);
    assert!(name.as_deref().is_some_and(|n| !n.contains('\u{1}')), "{name:?}");
}

#[test]
fn an_expired_catalog_is_listed_again() {
    let cache = CacheConfig {
        default_ttl: Duration::from_millis(50),
        max_ttl: Duration::from_millis(50),
        ..CacheConfig::default()
    };
    let mut host = Host::with_cache(cache).unwrap();
    let id = start(&mut host, legacy_demo(), Config::default());
    let before = sent(&host, id);
    names(&mut host, id);
    std::thread::sleep(Duration::from_millis(80));
    names(&mut host, id);
    assert_eq!(sent(&host, id), before + 2 * PAGES);
}

#[test]
fn a_closed_server_has_no_catalog() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, legacy_demo(), Config::default());
    host.close_server(id);
    match host.tool_catalog_blocking(id, Duration::from_secs(2)) {
        Err(CatalogError::NotReady | CatalogError::Listing(_)) => {}
        other => panic!("{other:?}"),
    }
    assert!(Host::with_cache(CacheConfig { max_entries: 0, ..CacheConfig::default() }).is_err());
}

/// A server that never gets ready within the wait (a program that never answers its probe)
/// is `NotReady`, as the error's docs say: it was the listing's failure, with no listing sent.
#[test]
fn a_server_not_ready_in_time_has_no_catalog_yet() {
    let mut host = Host::new().unwrap();
    let silent = mcpoll::StdioCommand::new("sleep").arg("60");
    let id = host.add_stdio_server(silent, Config::default()).unwrap();
    match host.tool_catalog_blocking(id, Duration::from_millis(300)) {
        Err(CatalogError::NotReady) => {}
        other => panic!("{other:?}"),
    }
    host.remove_server(id);
}

#[test]
fn a_listing_marked_ttl_zero_is_served_once_and_never_cached() {
    let mut host = Host::new().unwrap();
    let id = start(&mut host, demo_server(), Config::default());
    assert_eq!(host.era(id), Some(mcpoll::Era::Modern));
    let before = sent(&host, id);
    for round in 1..=2 {
        let view = host.tool_catalog_blocking(id, WAIT).unwrap();
        assert!(!view.is_cached());
        assert_eq!(view.len(), 5);
        assert_eq!(sent(&host, id), before + round * PAGES, "listed again: ttlMs 0");
    }
    assert!(host.tool(id, "echo").is_none(), "nothing cached");
}

/// A refresh that fails keeps the old catalog, flagged stale, for `max_stale`; past that the
/// need fails with a typed error.
#[test]
fn a_failed_refresh_serves_the_old_catalog_stale_then_fails() {
    let cache = CacheConfig {
        default_ttl: Duration::from_millis(50),
        max_ttl: Duration::from_millis(50),
        max_stale: Duration::from_millis(400),
        ..CacheConfig::default()
    };
    let mut host = Host::with_cache(cache).unwrap();
    let mut config = Config::default();
    config.restart.enabled = false;
    let id = start(&mut host, legacy_demo(), config);
    assert_eq!(names(&mut host, id).len(), 5);
    host.close_server(id);
    std::thread::sleep(Duration::from_millis(100));
    let view = host.tool_catalog_blocking(id, Duration::from_secs(2)).expect("served stale");
    assert_eq!(view.len(), 5);
    assert!(view.stale_for().is_some_and(|d| d >= Duration::from_millis(50)), "{view:?}");
    assert!(host.cache_stats().stale_serves >= 1);
    std::thread::sleep(Duration::from_millis(500));
    match host.tool_catalog_blocking(id, Duration::from_secs(2)) {
        Err(CatalogError::StaleTooLong { max_stale, .. }) => {
            assert_eq!(max_stale, Duration::from_millis(400));
        }
        other => panic!("{other:?}"),
    }
}

/// The `find_tools` example: one small tool for the model, the chosen definitions expanded.
#[test]
fn find_tools_example_expands_only_the_best_matches() {
    let demo = demo_server().program().to_string_lossy().into_owned();
    for flags in ["", " --legacy-only"] {
        let out = std::process::Command::new(example("find_tools"))
            .args([&format!("'{demo}'{flags}"), "add numbers", "2"])
            .output()
            .expect("run find_tools");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(v["find_tools"]["name"], "find_tools");
        let tools = v["answer"]["tools"].as_array().expect("tools");
        assert!(!tools.is_empty() && tools.len() <= 2, "{v}");
        assert_eq!(tools[0]["definition"]["name"], "add", "{flags}");
    }
}

/// The three layers are read on their own: capabilities without listing, the catalog, one
/// definition.
#[test]
fn capabilities_are_read_without_listing_in_both_eras() {
    for cmd in [demo_server(), legacy_demo()] {
        let mut host = Host::new().unwrap();
        let id = start(&mut host, cmd, Config::default());
        let before = sent(&host, id);
        let caps: serde_json::Value =
            serde_json::from_str(host.capabilities(id).expect("capabilities")).unwrap();
        assert!(caps["tools"].is_object(), "{caps}");
        assert_eq!(sent(&host, id), before, "nothing sent");
    }
}
