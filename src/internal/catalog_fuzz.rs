//! The `catalog_principals` fuzz target's logic: contexts sharing one capability cache never
//! read another principal's private listing, whatever the order of refreshes, failed
//! refreshes, change notifications, expiry and lookups.
//!
//! Five contexts share the store: three principals of server `s` (alice, bob, and alice with
//! another scope set), the anonymous context of `s`, and alice on another server. Every item a
//! context stores is named after it (`p<ctx>_...`), or after its server when the page is
//! public (`pub<server>_...`). Every lookup checks each item it is given: private items must
//! be the reader's own, public ones from the reader's server.

use std::time::{Duration, Instant};

use crate::catalog::key::{CacheKey, KeyParts, Transport};
use crate::catalog::listing::{parse_page, CatalogKind};
use crate::catalog::store::{
    Begin, ItemLookup, ListLookup, RefreshOutcome, RefreshToken, Store, StoreConfig,
};

const CONTEXTS: usize = 5;
const KINDS: [CatalogKind; 2] = [CatalogKind::Tools, CatalogKind::Prompts];
/// Every name any context could have stored under `_b`: private ones, then each server's public.
const B_NAMES: [&str; CONTEXTS + 2] = ["p0_b", "p1_b", "p2_b", "p3_b", "p4_b", "pub0_b", "pub1_b"];

fn server_of(ctx: usize) -> usize {
    usize::from(ctx == 4)
}

fn key(ctx: usize) -> CacheKey {
    let (server, principal, tenant, scopes): (_, _, _, &[&str]) = match ctx {
        0 => ("s", Some("alice"), Some("acme"), &["read"]),
        1 => ("s", Some("bob"), Some("acme"), &["read"]),
        2 => ("s", Some("alice"), Some("acme"), &["read", "write"]),
        3 => ("s", None, None, &[]),
        _ => ("other", Some("alice"), Some("acme"), &["read"]),
    };
    let parts = KeyParts {
        server,
        transport: Transport::Http,
        protocol_version: "2026-07-28",
        principal,
        granted_scopes: scopes,
        tenant,
        client_capabilities: "{}",
        extensions: "{}",
    };
    // The profiles are the literal `{}`: canonical JSON.
    CacheKey::new(&parts).expect("fixed parts are valid")
}

/// A page of two items named after who may read them, with hints chosen by `arg`.
fn page_json(kind: CatalogKind, owner: usize, public: bool, n: u32, arg: u8) -> String {
    let tag = if public { format!("pub{}", server_of(owner)) } else { format!("p{owner}") };
    let ttl = match arg >> 5 {
        0 => String::new(),
        1 => r#""ttlMs": 0,"#.to_owned(),
        2 => r#""ttlMs": "soon","#.to_owned(),
        t => format!(r#""ttlMs": {},"#, u32::from(t) * 700),
    };
    let scope = if public {
        "public"
    } else if arg & 8 != 0 {
        "private"
    } else {
        "unknown"
    };
    let member = kind.items_member();
    let item = |name: &str| match kind {
        CatalogKind::Tools => format!(r#"{{"name":"{name}","inputSchema":{{"type":"object"}}}}"#),
        _ => format!(r#"{{"name":"{name}"}}"#),
    };
    format!(
        r#"{{"{member}":[{},{}],{ttl}"cacheScope":"{scope}"}}"#,
        item(&format!("{tag}_a{n}")),
        item(&format!("{tag}_b"))
    )
}

/// Items checked: (private, public).
type Seen = (u64, u64);

/// Panics when `reader` was given an item it may not see; counts what it checked.
#[track_caller]
fn check(reader: usize, id: &str, seen: &mut Seen) {
    if let Some(rest) = id.strip_prefix("pub") {
        let server = rest.split('_').next().and_then(|s| s.parse::<usize>().ok());
        assert_eq!(server, Some(server_of(reader)), "context {reader} read {id} of another server");
        seen.1 += 1;
    } else if let Some(rest) = id.strip_prefix('p') {
        let owner = rest.split('_').next().and_then(|s| s.parse::<usize>().ok());
        assert_eq!(owner, Some(reader), "context {reader} read another principal's {id}");
        seen.0 += 1;
    } else {
        panic!("an item no context stored: {id}");
    }
}

/// Runs the operations `data` encodes, two bytes each.
pub fn catalog_principals(data: &[u8]) {
    run(data);
}

/// A small store, so the operations reach eviction and the byte bound.
fn store_config() -> StoreConfig {
    StoreConfig {
        max_entries: 8,
        max_bytes: 4096,
        default_ttl: Duration::from_secs(1),
        max_ttl: Duration::from_secs(10),
        max_stale: Duration::from_secs(2),
        max_refreshes: 4,
    }
}

fn run(data: &[u8]) -> Seen {
    let mut seen = (0, 0);
    let config = store_config();
    let mut store = Store::new(config).expect("valid config");
    // Built once: a key costs a canonicalisation and a hash, and every operation needs one.
    let keys: [CacheKey; CONTEXTS] = std::array::from_fn(key);
    let mut tokens: [[Option<RefreshToken>; 2]; CONTEXTS] = Default::default();
    // Simulated time: a fixed origin, moved only by the input.
    let mut now = Instant::now();
    let mut n = 0u32;
    for pair in data.chunks(2) {
        let (op, arg) = (pair[0], pair.get(1).copied().unwrap_or(0));
        let ctx = usize::from(op >> 4) % CONTEXTS;
        let key = &keys[ctx];
        let k = usize::from(arg & 1);
        let kind = KINDS[k];
        match op & 0x0f {
            0 | 1 => {
                if tokens[ctx][k].is_none() {
                    if let Ok(Begin::Fetch(t)) = store.begin_refresh(key, kind, None) {
                        tokens[ctx][k] = Some(t);
                    }
                }
            }
            2 | 3 => {
                if let Some(t) = tokens[ctx][k].take() {
                    n += 1;
                    let json = page_json(kind, ctx, arg & 2 != 0, n, arg);
                    let page = parse_page(kind, &json).expect("the fuzzer's page is valid");
                    let outcome = RefreshOutcome::Page { page, carried_input: arg & 4 != 0 };
                    let _ = store.finish_refresh(now, t, outcome);
                }
            }
            4 => {
                if let Some(t) = tokens[ctx][k].take() {
                    let outcome = if arg & 2 != 0 {
                        RefreshOutcome::Failed
                    } else {
                        RefreshOutcome::InvalidCursor
                    };
                    let _ = store.finish_refresh(now, t, outcome);
                }
            }
            5 => {
                let _ = store.mark_stale(now, key, kind);
            }
            6 => now += Duration::from_millis(u64::from(arg) * 25),
            _ => {
                if let Ok(ListLookup::Pages { pages, .. }) = store.list_pages(now, key, kind) {
                    for item in pages.iter().flat_map(|p| p.items()) {
                        check(ctx, item.id(), &mut seen);
                    }
                }
                for name in B_NAMES {
                    match store.find_item(now, key, kind, name) {
                        Ok(ItemLookup::Fresh(item)) | Ok(ItemLookup::Stale { item, .. }) => {
                            check(ctx, item.id(), &mut seen)
                        }
                        _ => {}
                    }
                }
            }
        }
        assert!(store.entries() <= config.max_entries);
        assert!(store.bytes() <= config.max_bytes);
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The target over many pseudo-random inputs (a fixed xorshift seed), so every `cargo test`
    /// runs it without a fuzzer.
    #[test]
    fn no_context_reads_another_principals_private_listing() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut data = vec![0u8; 256];
        let mut seen = (0, 0);
        for _ in 0..500 {
            for b in data.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            let (private, public) = run(&data);
            seen = (seen.0 + private, seen.1 + public);
        }
        // Not vacuous: lookups were answered with both kinds of item.
        assert!(seen.0 > 100 && seen.1 > 100, "{seen:?}");
    }

    /// The check itself can fail: another principal's item, or another server's public one.
    #[test]
    fn the_check_refuses_what_crosses() {
        let mut seen = (0, 0);
        check(1, "p1_b", &mut seen);
        check(3, "pub0_a7", &mut seen);
        assert_eq!(seen, (1, 1));
        assert!(std::panic::catch_unwind(|| check(1, "p0_b", &mut (0, 0))).is_err());
        assert!(std::panic::catch_unwind(|| check(4, "pub0_b", &mut (0, 0))).is_err());
        assert!(std::panic::catch_unwind(|| check(0, "junk", &mut (0, 0))).is_err());
    }

    /// A page is read by its owner: the sequence the fuzzer needs to find is reachable.
    #[test]
    fn a_stored_page_is_read_back_by_its_owner_and_public_pages_by_the_server() {
        // ctx 0 begins and stores a public tools page with ttl 2100 ms; ctx 1 reads it.
        assert_eq!(run(&[0x00, 0x00, 0x02, 0x62, 0x17, 0x00]), (0, 3));
        let mut store = Store::new(store_config()).unwrap();
        let now = Instant::now();
        let Ok(Begin::Fetch(t)) = store.begin_refresh(&key(0), CatalogKind::Tools, None) else {
            panic!("no fetch");
        };
        let page = parse_page(CatalogKind::Tools, &page_json(CatalogKind::Tools, 0, true, 1, 0x62));
        let page = page.unwrap();
        let _ = store.finish_refresh(now, t, RefreshOutcome::Page { page, carried_input: false });
        let found = store.find_item(now, &key(1), CatalogKind::Tools, "pub0_b");
        assert!(matches!(found, Ok(ItemLookup::Fresh(_))), "{found:?}");
        let other_server = store.find_item(now, &key(4), CatalogKind::Tools, "pub0_b");
        assert!(!matches!(other_server, Ok(ItemLookup::Fresh(_))), "{other_server:?}");
    }
}
