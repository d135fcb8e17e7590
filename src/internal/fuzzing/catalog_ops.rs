//! The capability cache's refresh logic under arbitrary interleavings, on simulated time.
//!
//! Two principals of one server context each have a refresh walk ([`Refresher`]) over one
//! shared [`Store`], as a host with two authenticated users would. A scripted paged server
//! answers their page requests whenever the input says so; its catalogs change, switch between
//! public and private scope, and vary `ttlMs`. Operations: needs, page answers (ok, failed,
//! cursor rejected), change notifications, eager refreshes, calls that read one definition,
//! purges and time jumps. Checked after every step:
//!
//! - no panic;
//! - single-flight: at most one page refresh in flight per key, and one request per walk;
//! - no page served fresh past its expiry, and none served stale past `max_stale`;
//! - no principal ever reads a definition private to the other;
//! - the store within its entry and byte bounds.

use std::time::{Duration, Instant};

use crate::catalog::key::{CacheKey, KeyParts, Transport};
use crate::catalog::listing::{parse_page, CatalogKind, Item, ParsedPage};
use crate::catalog::refresh::{Answer, Refresher};
use crate::catalog::store::{ItemLookup, ListLookup, Store, StoreConfig};

const TOOLS: CatalogKind = CatalogKind::Tools;
const PRINCIPALS: [&str; 2] = ["alice", "bob"];

/// What the scripted server lists for one principal.
#[derive(Debug, Clone, Copy)]
struct Catalog {
    version: u8,
    pages: u8,
    public: bool,
    /// 0: no ttlMs; 1: ttlMs 0; else ttlMs = ttl * 50.
    ttl: u8,
}

/// One page answer, as the server would send it.
fn page_json(
    principal: &str,
    c: Catalog,
    shared_version: u8,
    cursor: Option<&str>,
) -> Option<String> {
    let index = match cursor {
        None => 0,
        Some(c) => c.strip_prefix('c')?.parse::<u8>().ok()?,
    };
    if index >= c.pages {
        return None;
    }
    // A public catalog is the same for everyone; a private one names its owner in every item.
    let (owner, version) =
        if c.public { ("public", shared_version) } else { (principal, c.version) };
    let items: Vec<String> = (0..2)
        .map(|j| format!(r#"{{"name":"t{index}{j}","owner":"{owner}","v":{version}}}"#))
        .collect();
    let mut json = format!(r#"{{"tools":[{}]"#, items.join(","));
    if index + 1 < c.pages {
        json.push_str(&format!(r#","nextCursor":"c{}""#, index + 1));
    }
    match c.ttl {
        0 => {}
        1 => json.push_str(r#","ttlMs":0"#),
        t => json.push_str(&format!(r#","ttlMs":{}"#, u64::from(t) * 50)),
    }
    if c.public {
        json.push_str(r#","cacheScope":"public""#);
    }
    json.push('}');
    Some(json)
}

fn key(principal: &str) -> CacheKey {
    let parts = KeyParts {
        server: "srv",
        transport: Transport::Http,
        protocol_version: "2026-07-28",
        principal: Some(principal),
        granted_scopes: &["tools"],
        tenant: None,
        client_capabilities: "{}",
        extensions: "{}",
    };
    // SAFETY-style invariant: the profiles are the constant "{}", valid JSON.
    CacheKey::new(&parts).expect("constant key parts")
}

/// The input, read a byte at a time; zero once exhausted.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let Some((b, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        *b
    }
}

struct Sim {
    store: Store,
    max_stale: Duration,
    keys: [CacheKey; 2],
    walks: [Refresher<u8>; 2],
    /// The page request on the wire for each principal (its cursor).
    wire: [Option<Option<Box<str>>>; 2],
    server: [Catalog; 2],
    shared_version: u8,
}

impl Sim {
    /// Takes the page request a walk asks for; a walk never has two on the wire.
    fn pump(&mut self, p: usize) {
        if let Some(cursor) = self.walks[p].poll_fetch() {
            assert!(
                self.wire[p].is_none(),
                "a walk asked for a second page while one is on the wire"
            );
            self.wire[p] = Some(cursor.map(Box::from));
        }
    }

    fn check_items<'a>(items: impl IntoIterator<Item = &'a Item>, principal: &str) {
        for it in items {
            let other = PRINCIPALS.iter().find(|o| **o != principal).copied().unwrap_or_default();
            assert!(
                !it.json().contains(&format!(r#""owner":"{other}""#)),
                "{principal} read {other}'s private definition {}",
                it.json()
            );
        }
    }

    fn check(&self, now: Instant) {
        for k in &self.keys {
            assert!(self.store.refreshes_for(k, TOOLS) <= 1, "two page refreshes for one key");
        }
        let config = self.store.config();
        assert!(self.store.entries() <= config.max_entries);
        assert!(self.store.bytes() <= config.max_bytes);
        let _ = now;
    }

    fn need(&mut self, now: Instant, p: usize) {
        let answer = self.walks[p].need(now, &mut self.store, &self.keys[p]);
        self.pump(p);
        match answer {
            Ok(Answer::Cached) => match self.store.list_pages(now, &self.keys[p], TOOLS) {
                Ok(ListLookup::Pages { pages, stale_for }) => {
                    match stale_for {
                        None => {
                            for page in &pages {
                                assert!(
                                    now < page.expires(),
                                    "a page served fresh past its expiry"
                                );
                            }
                        }
                        Some(d) => assert!(d <= self.max_stale, "served stale past max_stale"),
                    }
                    Self::check_items(pages.iter().flat_map(|pg| pg.items()), PRINCIPALS[p]);
                }
                // A cached answer reads at once: nothing may be missing in between.
                Ok(ListLookup::Refresh { .. }) => panic!("Cached, then a page is missing"),
                Err(_) => panic!("Cached, then too stale"),
            },
            Ok(Answer::OneUse) => {
                if let Some((items, stale)) =
                    self.walks[p].one_use_items(now, &self.store, &self.keys[p])
                {
                    assert!(stale.is_none_or(|d| d <= self.max_stale));
                    Self::check_items(items, PRINCIPALS[p]);
                }
            }
            Ok(Answer::Waiting) | Err(_) => {}
        }
    }

    fn answer(&mut self, now: Instant, p: usize, how: u8) {
        let Some(cursor) = self.wire[p].take() else { return };
        let json = page_json(PRINCIPALS[p], self.server[p], self.shared_version, cursor.as_deref());
        let (walk, store, key) = (&mut self.walks[p], &mut self.store, &self.keys[p]);
        match (how % 4, json) {
            (0, _) => walk.fetch_failed(now, store, key, 0),
            (_, None) => walk.cursor_rejected(now, store, key, 1),
            (_, Some(json)) => {
                let page: ParsedPage = parse_page(TOOLS, &json).expect("the script's pages parse");
                let _ = walk.on_page(now, store, key, Ok(page), None);
            }
        }
        self.pump(p);
    }
}

/// Applies the input as a sequence of cache operations and checks the invariants.
pub fn catalog_ops(data: &[u8]) {
    let mut input = Input(data);
    let config = StoreConfig {
        max_entries: 6 + usize::from(input.byte() % 8),
        max_bytes: 1_500 + usize::from(input.byte()) * 40,
        default_ttl: Duration::from_millis(300),
        max_ttl: Duration::from_millis(2_000),
        max_stale: Duration::from_millis(700),
        max_refreshes: 2 + usize::from(input.byte() % 4),
    };
    let Ok(store) = Store::new(config) else { return };
    let start = Instant::now();
    let mut now = start;
    let fresh = Catalog { version: 0, pages: 2, public: false, ttl: 0 };
    let mut sim = Sim {
        store,
        max_stale: config.max_stale,
        keys: PRINCIPALS.map(key),
        walks: [Refresher::new(TOOLS), Refresher::new(TOOLS)],
        wire: [None, None],
        server: [fresh, fresh],
        shared_version: 0,
    };
    for _ in 0..4096 {
        if input.0.is_empty() {
            break;
        }
        let op = input.byte();
        let p = usize::from(op >> 7);
        match op & 0x0f {
            0..=2 => sim.need(now, p),
            3..=5 => {
                let how = input.byte();
                sim.answer(now, p, how);
            }
            6 => {
                // The server changes and says so: every principal's view of it is stale.
                let c = &mut sim.server[p];
                c.version = c.version.wrapping_add(1);
                if c.public {
                    sim.shared_version = sim.shared_version.wrapping_add(1);
                }
                let _ = sim.store.mark_stale(now, &sim.keys[p], TOOLS);
            }
            7 => {
                // A change the client is not told about (a server without notifications).
                let b = input.byte();
                let c = &mut sim.server[p];
                c.pages = 1 + b % 4;
                c.public = b & 0x10 != 0;
                c.ttl = (b >> 5) % 8;
                c.version = c.version.wrapping_add(1);
                sim.shared_version = sim.shared_version.wrapping_add(1);
            }
            8 => {
                let _ = sim.walks[p].refresh_eagerly(now, &mut sim.store, &sim.keys[p]);
                sim.pump(p);
            }
            9 | 10 => {
                // A call reads one definition; it must be this principal's or public.
                let name = format!("t{}{}", input.byte() % 4, input.byte() % 2);
                match sim.store.find_item(now, &sim.keys[p], TOOLS, &name) {
                    Ok(ItemLookup::Fresh(item)) => Sim::check_items([item], PRINCIPALS[p]),
                    Ok(ItemLookup::Stale { item, stale_for }) => {
                        assert!(stale_for <= sim.max_stale, "a definition served too stale");
                        Sim::check_items([item], PRINCIPALS[p]);
                    }
                    _ => {}
                }
            }
            11 => sim.store.purge(now),
            _ => {
                let ms = u64::from(input.byte()) * 8;
                now += Duration::from_millis(ms);
            }
        }
        sim.check(now);
    }
}

#[cfg(test)]
mod tests {
    /// Seeds and a deterministic pseudo-random sweep, so plain `cargo test` runs the target.
    #[test]
    fn catalog_ops_holds_its_invariants() {
        super::catalog_ops(&[]);
        super::catalog_ops(&[3, 200, 1, 0, 3, 1, 3, 1, 3, 1, 0, 6, 0, 3, 1, 3, 1, 12, 255, 0]);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..300 {
            super::catalog_ops(&super::super::pseudo_random_input(&mut x, 400));
        }
    }
}
