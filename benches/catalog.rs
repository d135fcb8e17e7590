// cargo bench --bench catalog
//
//! What the capability cache's building blocks cost on a 1,000-tool catalog, with heap
//! allocations counted:
//!
//! * refresh: parse and canonicalise 10 pages of 100 tools, store each page, build the catalog
//!   digest and diff it against the previous one (10 changed, 5 removed, 5 added).
//! * diff: the digest diff alone.
//! * hit: `Store::find_item` of one tool on a fresh list (the call path), which must not
//!   allocate; and `Store::lookup` of one page.
//! * search: `SearchIndex::search` p50/p99 over a set of queries against 1,000 tools.
//! * host: the same cache behind `Host`, against the demo server (`tests/peers/demo`, legacy
//!   era: its listings carry no hints, so they get the default TTL) over real pipes: a fresh
//!   `Host::tool_catalog` and `Host::tool` (the cache hit), against an uncached `tools/list` round trip
//!   (`Host::list_tools` + `Host::wait`, the engine following the 3 pages), and a refresh
//!   (`Host::tool_catalog_blocking` on a host whose cache keeps nothing, `default_ttl` 0: every need
//!   walks the 3 pages one request at a time, parses, digests and compares them). The demo
//!   server is built with the bench profile first, as the roundtrip bench does; pin with
//!   `taskset -c 0` for stable figures.
//!
//! The catalog modules are compiled into this bench from their source files (they name
//! nothing else of the crate but `proto::json`, compiled in beside them), because the library
//! keeps them private until they are wired into the engine. Each line: `catalog <what> ...=..`.

// Cargo builds benches with `cfg(test)` but without the test harness, so the unit tests'
// imports are unused here.
#[path = "../src/catalog/mod.rs"]
#[allow(dead_code, unused_imports)]
mod catalog;

/// The one file of the protocol layer the catalog modules use (`json`, which names nothing
/// else of the crate either), where they find it: `crate::proto::json`.
#[path = "../src/proto/json.rs"]
#[allow(dead_code, unused_imports)]
mod proto_json;
mod proto {
    pub(crate) use super::proto_json as json;
}

use std::hint::black_box;
use std::time::{Duration, Instant};

use catalog::diff::diff;
use catalog::key::{CacheKey, KeyParts, Transport};
use catalog::listing::{parse_page, Catalog, CatalogKind, ParsedPage};
use catalog::search::SearchIndex;
use catalog::store::{Begin, Finished, ItemLookup, Lookup, RefreshOutcome, Store, StoreConfig};

#[path = "../tests/common/counting.rs"]
#[allow(dead_code)]
mod counting;

#[path = "../tests/common/cargo_build.rs"]
#[allow(dead_code)]
mod cargo_build;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const TOOLS: usize = 1000;
const PAGE: usize = 100;
const WORDS: &[&str] = &[
    "weather",
    "forecast",
    "city",
    "file",
    "disk",
    "read",
    "write",
    "email",
    "send",
    "message",
    "calendar",
    "event",
    "invoice",
    "customer",
    "order",
    "search",
    "index",
    "query",
    "image",
    "resize",
    "convert",
    "audio",
    "transcribe",
    "translate",
    "text",
    "summary",
    "database",
    "table",
    "row",
    "column",
    "user",
    "account",
    "password",
    "reset",
    "ticket",
    "issue",
    "repo",
    "commit",
    "branch",
    "deploy",
    "server",
    "metric",
    "alert",
    "log",
    "trace",
    "payment",
    "refund",
    "shipment",
    "track",
    "map",
    "route",
];

/// splitmix64, for a catalog that is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn word(&mut self) -> &'static str {
        WORDS[(self.next() % WORDS.len() as u64) as usize]
    }
}

fn tool_json(rng: &mut Rng, i: usize, version: u32) -> String {
    let (a, b, c) = (rng.word(), rng.word(), rng.word());
    let desc: Vec<&str> = (0..12).map(|_| rng.word()).collect();
    format!(
        r#"{{"name":"{a}_{b}_{i}","title":"{a} {b} {c}","description":"{} (v{version})","inputSchema":{{"type":"object","properties":{{"{c}":{{"type":"string","description":"the {c}"}},"limit":{{"type":"integer","minimum":1,"maximum":100}}}},"required":["{c}"]}},"annotations":{{"readOnlyHint":{},"idempotentHint":true}}}}"#,
        desc.join(" "),
        i % 3 == 0
    )
}

/// 1,000 tools as 10 page results. `changed` bumps the version of tools 0..10, drops 10..15
/// and adds 5 new ones.
fn pages(changed: bool) -> Vec<String> {
    let mut rng = Rng(7);
    let mut tools: Vec<String> =
        (0..TOOLS).map(|i| tool_json(&mut rng, i, if changed && i < 10 { 2 } else { 1 })).collect();
    if changed {
        tools.drain(10..15);
        for i in 0..5 {
            tools.push(tool_json(&mut rng, TOOLS + i, 1));
        }
    }
    let n_pages = tools.len().div_ceil(PAGE);
    tools
        .chunks(PAGE)
        .enumerate()
        .map(|(p, chunk)| {
            let next = if p + 1 < n_pages {
                format!(r#","nextCursor":"p{}""#, p + 1)
            } else {
                String::new()
            };
            format!(
                r#"{{"tools":[{}]{next},"ttlMs":300000,"cacheScope":"private"}}"#,
                chunk.join(",")
            )
        })
        .collect()
}

fn cursor(p: usize) -> Option<String> {
    (p > 0).then(|| format!("p{p}"))
}

fn key() -> CacheKey {
    CacheKey::new(&KeyParts {
        server: "bench",
        transport: Transport::Stdio,
        protocol_version: "2026-07-28",
        principal: Some("alice"),
        granted_scopes: &["tools"],
        tenant: None,
        client_capabilities: "{}",
        extensions: "{}",
    })
    .expect("key")
}

/// One refresh: every page parsed and stored, the new digest built and diffed.
fn refresh(
    store: &mut Store,
    now: Instant,
    key: &CacheKey,
    texts: &[String],
    old: &Catalog,
) -> usize {
    let mut parsed: Vec<ParsedPage> = Vec::with_capacity(texts.len());
    for text in texts {
        parsed.push(parse_page(CatalogKind::Tools, text).expect("page"));
    }
    let digest = Catalog::from_items(CatalogKind::Tools, parsed.iter().flat_map(|p| &p.items));
    let d = diff(old, &digest).expect("same kind");
    for (p, page) in parsed.into_iter().enumerate() {
        let c = cursor(p);
        let Ok(Begin::Fetch(token)) = store.begin_refresh(key, CatalogKind::Tools, c.as_deref())
        else {
            panic!("fetch")
        };
        let outcome = RefreshOutcome::Page { page, carried_input: false };
        assert!(matches!(store.finish_refresh(now, token, outcome), Finished::Stored));
    }
    d.added.len() + d.removed.len() + d.changed.len()
}

fn per_op<F: FnMut()>(rounds: usize, mut f: F) -> (f64, f64) {
    let before = counting::allocs();
    let t = Instant::now();
    for _ in 0..rounds {
        f();
    }
    let ns = t.elapsed().as_nanos() as f64 / rounds as f64;
    let allocs = (counting::allocs() - before) as f64 / rounds as f64;
    (ns, allocs)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn main() {
    let now = Instant::now();
    let key = key();
    let v1 = pages(false);
    let v2 = pages(true);
    let bytes: usize = v2.iter().map(String::len).sum();
    let config = StoreConfig { max_bytes: 64 << 20, ..StoreConfig::default() };

    let old = {
        let parsed: Vec<ParsedPage> =
            v1.iter().map(|t| parse_page(CatalogKind::Tools, t).expect("page")).collect();
        Catalog::from_items(CatalogKind::Tools, parsed.iter().flat_map(|p| &p.items))
    };
    let new = {
        let parsed: Vec<ParsedPage> =
            v2.iter().map(|t| parse_page(CatalogKind::Tools, t).expect("page")).collect();
        Catalog::from_items(CatalogKind::Tools, parsed.iter().flat_map(|p| &p.items))
    };
    let d = diff(&old, &new).expect("same kind");
    assert_eq!((d.added.len(), d.removed.len(), d.changed.len()), (5, 5, 10));

    // Refresh and diff.
    let mut store = Store::new(config).expect("config");
    let rounds = 30;
    let (ns, allocs) = per_op(rounds, || {
        black_box(refresh(&mut store, now, &key, &v2, &old));
    });
    println!(
        "catalog refresh tools={} pages={} bytes={bytes} ns={ns:.0} allocs={allocs:.0}",
        new.len(),
        v2.len()
    );
    let (ns, allocs) = per_op(2_000, || {
        black_box(diff(&old, &new).expect("same kind"));
    });
    println!("catalog diff tools={} ns={ns:.0} allocs={allocs:.1}", new.len());

    // Cache hits on the call path: a fresh store holding v2.
    let mut store = Store::new(config).expect("config");
    refresh(&mut store, now, &key, &v2, &old);
    let last_name = {
        let parsed = parse_page(CatalogKind::Tools, &v2[v2.len() - 1]).expect("page");
        parsed.items[parsed.items.len() - 1].id().to_string()
    };
    let first_name = new.entries()[0].id.to_string();
    for name in [&first_name, &last_name] {
        assert!(matches!(
            store.find_item(now, &key, CatalogKind::Tools, name),
            Ok(ItemLookup::Fresh(_))
        ));
    }
    let (ns, allocs) = per_op(20_000, || {
        let hit = store.find_item(black_box(now), &key, CatalogKind::Tools, black_box(&last_name));
        black_box(matches!(hit, Ok(ItemLookup::Fresh(_))));
    });
    println!("catalog hit find_item (walks {} pages) ns={ns:.0} allocs={allocs:.2}", v2.len());
    assert_eq!(allocs, 0.0, "a cache hit must not allocate");
    let (ns, allocs) = per_op(200_000, || {
        let hit = store.lookup(black_box(now), &key, CatalogKind::Tools, black_box(None));
        black_box(matches!(hit, Ok(Lookup::Fresh(_))));
    });
    println!("catalog hit lookup(page) ns={ns:.0} allocs={allocs:.2}");
    assert_eq!(allocs, 0.0, "a cache hit must not allocate");

    // Search over 1,000 tools.
    let mut index = SearchIndex::new();
    for text in &v1 {
        for item in parse_page(CatalogKind::Tools, text).expect("page").items {
            index.upsert(item.json()).expect("tool");
        }
    }
    let (ns, _) = per_op(1, || {
        let mut ix = SearchIndex::new();
        for text in &v2 {
            for item in parse_page(CatalogKind::Tools, text).expect("page").items {
                ix.upsert(item.json()).expect("tool");
            }
        }
        black_box(ix.len());
    });
    println!("catalog index build tools={} ns={ns:.0} (parse included)", new.len());
    let queries = [
        "weather forecast",
        "send email message",
        "read file",
        "reset user password",
        "deploy server branch",
        "refund payment",
        "transcribe audio to text",
        "track shipment on a map",
        "database row",
        "unknown words only",
    ];
    let mut samples = Vec::new();
    let before = counting::allocs();
    for _ in 0..300 {
        for q in queries {
            let t = Instant::now();
            black_box(index.search(black_box(q), 8));
            samples.push(t.elapsed());
        }
    }
    let allocs = (counting::allocs() - before) as f64 / samples.len() as f64;
    samples.sort();
    println!(
        "catalog search tools={} k=8 p50_us={:.1} p99_us={:.1} allocs={allocs:.1}",
        index.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.99)
    );
    host_figures();
}

/// Times `f` `rounds` times after a warm-up; returns p50 and p99 in µs and allocations per call.
fn sampled<F: FnMut()>(rounds: usize, mut f: F) -> (f64, f64, f64) {
    for _ in 0..rounds / 10 {
        f();
    }
    let mut samples = Vec::with_capacity(rounds);
    let before = counting::allocs();
    for _ in 0..rounds {
        let t = Instant::now();
        f();
        samples.push(t.elapsed());
    }
    let allocs = (counting::allocs() - before) as f64 / rounds as f64;
    samples.sort();
    (percentile(&samples, 0.5), percentile(&samples, 0.99), allocs)
}

fn host_figures() {
    use mcpoll::{CacheConfig, CallOptions, Config, Host, StdioCommand};

    const WAIT: Duration = Duration::from_secs(20);
    let demo = cargo_build::demo_server_bin(&["--profile", "bench"]);
    let start = |cache: CacheConfig| {
        let mut host = Host::with_cache(cache).expect("host");
        let cmd = StdioCommand::new(demo).arg("--legacy-only");
        let id = host.add_stdio_server(cmd, Config::default()).expect("spawn");
        host.wait_ready(id, WAIT).expect("ready");
        (host, id)
    };
    let (mut host, id) = start(CacheConfig::default());
    let tools = host.tool_catalog_blocking(id, WAIT).expect("tools").len();
    let before = host.stats(id).expect("stats").requests_sent;
    let (p50, p99, allocs) = sampled(20_000, || {
        let view = host.tool_catalog(black_box(id)).expect("need").expect("fresh");
        black_box(view.len());
    });
    println!(
        "catalog host hit tools() tools={tools} p50_us={p50:.2} p99_us={p99:.2} allocs={allocs:.1}"
    );
    let (p50, p99, allocs) = sampled(20_000, || {
        black_box(host.tool(black_box(id), black_box("write_note")).expect("cached"));
    });
    println!("catalog host hit tool(name) p50_us={p50:.2} p99_us={p99:.2} allocs={allocs:.2}");
    assert_eq!(host.stats(id).expect("stats").requests_sent, before, "hits send nothing");
    let (p50, p99, allocs) = sampled(2_000, || {
        let call = host.list_tools(id, &CallOptions::default()).expect("list");
        black_box(host.wait(id, call).expect("listed"));
    });
    let pages = (host.stats(id).expect("stats").requests_sent - before) as f64 / 2_200.0;
    println!(
        "catalog host list round trip (uncached) pages={pages:.0} p50_us={p50:.1} p99_us={p99:.1} allocs={allocs:.0}"
    );
    let nothing_kept = CacheConfig { default_ttl: Duration::ZERO, ..CacheConfig::default() };
    let (mut host, id) = start(nothing_kept);
    let (p50, p99, allocs) = sampled(2_000, || {
        let view = host.tool_catalog_blocking(id, WAIT).expect("tools");
        assert!(!view.is_cached());
        black_box(view.len());
    });
    let stats = host.cache_stats();
    println!(
        "catalog host refresh (walk, parse, digest, compare) pages={} p50_us={p50:.1} p99_us={p99:.1} allocs={allocs:.0}",
        stats.page_fetches / stats.refreshes.max(1)
    );
}
