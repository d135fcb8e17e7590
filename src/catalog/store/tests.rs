//! Every expiry, scope, single-flight and bound rule of the store, on simulated time.

use std::time::{Duration, Instant};

use super::super::key::{CacheKey, KeyParts, Transport};
use super::super::listing::{parse_page, CatalogKind, ParsedPage};
use super::*;

const TOOLS: CatalogKind = CatalogKind::Tools;

fn key_for(principal: &str) -> CacheKey {
    server_key("srv", principal)
}

fn page(tools: &str, extra: &str) -> ParsedPage {
    parse_page(TOOLS, &format!(r#"{{"tools":[{tools}]{extra}}}"#)).expect("page")
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn store() -> Store {
    Store::new(StoreConfig {
        default_ttl: ms(1_000),
        max_ttl: ms(10_000),
        max_stale: ms(5_000),
        ..StoreConfig::default()
    })
    .expect("config")
}

/// Begins and finishes one refresh with a page.
fn fetch(
    s: &mut Store,
    now: Instant,
    key: &CacheKey,
    cursor: Option<&str>,
    p: ParsedPage,
) -> Finished {
    match s.begin_refresh(key, TOOLS, cursor).expect("room") {
        Begin::Fetch(token) => {
            s.finish_refresh(now, token, RefreshOutcome::Page { page: p, carried_input: false })
        }
        Begin::Wait => panic!("nobody else is fetching"),
    }
}

fn fail(s: &mut Store, now: Instant, key: &CacheKey, cursor: Option<&str>) -> Finished {
    match s.begin_refresh(key, TOOLS, cursor).expect("room") {
        Begin::Fetch(token) => s.finish_refresh(now, token, RefreshOutcome::Failed),
        Begin::Wait => panic!("nobody else is fetching"),
    }
}

/// The ids on the page a lookup returned, or a label for the other answers.
fn look(s: &mut Store, now: Instant, key: &CacheKey, cursor: Option<&str>) -> String {
    match s.lookup(now, key, TOOLS, cursor) {
        Ok(Lookup::Fresh(p)) => {
            format!("fresh {}", p.items().iter().map(|i| i.id()).collect::<Vec<_>>().join(","))
        }
        Ok(Lookup::Stale { page, stale_for }) => format!(
            "stale {}ms {}",
            stale_for.as_millis(),
            page.items().iter().map(|i| i.id()).collect::<Vec<_>>().join(",")
        ),
        Ok(Lookup::Expired) => "expired".into(),
        Ok(Lookup::Miss) => "miss".into(),
        Err(e) => format!("error {e}"),
    }
}

#[test]
fn fresh_until_received_plus_ttl_exactly() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    assert_eq!(look(&mut s, t0, &k, None), "miss");
    assert!(matches!(
        fetch(&mut s, t0, &k, None, page(r#"{"name":"a"}"#, r#","ttlMs":500"#)),
        Finished::Stored
    ));
    assert_eq!(look(&mut s, t0, &k, None), "fresh a");
    assert_eq!(look(&mut s, t0 + ms(499), &k, None), "fresh a");
    assert_eq!(look(&mut s, t0 + ms(500), &k, None), "expired");
    let st = s.stats();
    assert_eq!((st.hits, st.misses, st.refreshes), (2, 2, 1));
}

/// A change notice after a failed refresh: the page that was served stale (the refresh
/// failed) is known to be out of date now, and is refreshed rather than served; served stale
/// again only once that refresh fails too.
#[test]
fn a_change_notice_after_a_failed_refresh_stops_the_stale_serving() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    fetch(&mut s, t0, &k, None, page(r#"{"name":"a"}"#, r#","ttlMs":1000"#));
    fail(&mut s, t0 + ms(1_200), &k, None);
    assert_eq!(look(&mut s, t0 + ms(1_200), &k, None), "stale 200ms a");
    s.mark_stale(t0 + ms(1_210), &k, TOOLS);
    assert_eq!(look(&mut s, t0 + ms(1_210), &k, None), "expired");
    fail(&mut s, t0 + ms(1_300), &k, None);
    assert_eq!(look(&mut s, t0 + ms(1_300), &k, None), "stale 300ms a");
}

/// Pages the chain from the first page no longer reaches (the server's cursors changed
/// between listings) are dropped once the whole chain is there; they stayed, counted against
/// the bounds at every refresh.
#[test]
fn pages_the_chain_no_longer_reaches_are_dropped() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    fetch(&mut s, t0, &k, None, page(r#"{"name":"a"}"#, r#","nextCursor":"c1""#));
    fetch(&mut s, t0, &k, Some("c1"), page(r#"{"name":"b"}"#, ""));
    assert_eq!(s.entries(), 2);
    let t1 = t0 + ms(2_000);
    fetch(&mut s, t1, &k, None, page(r#"{"name":"a"}"#, r#","nextCursor":"c2""#));
    s.prune_unreachable(t1, &k, TOOLS);
    assert_eq!(s.entries(), 2, "the first page replaced; c1's kept until the chain is whole");
    fetch(&mut s, t1, &k, Some("c2"), page(r#"{"name":"b"}"#, ""));
    assert_eq!(s.entries(), 3, "the old chain's second page is still counted");
    s.prune_unreachable(t1, &k, TOOLS);
    assert_eq!(s.entries(), 2, "c1's page is gone");
    assert_eq!(look(&mut s, t1, &k, Some("c1")), "miss");
    assert_eq!(look(&mut s, t1, &k, Some("c2")), "fresh b");
}

#[test]
fn server_ttl_is_capped_by_max_ttl() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    fetch(&mut s, t0, &k, None, page(r#"{"name":"a"}"#, r#","ttlMs":99999999"#));
    let Ok(Lookup::Fresh(p)) = s.lookup(t0, &k, TOOLS, None) else { panic!("fresh") };
    assert_eq!(p.expires(), t0 + ms(10_000));
    assert_eq!(p.received(), t0);
    assert_eq!(look(&mut s, t0 + ms(9_999), &k, None), "fresh a");
    assert_eq!(look(&mut s, t0 + ms(10_000), &k, None), "expired");
}

#[test]
fn missing_or_malformed_ttl_gets_the_default_never_forever() {
    for extra in ["", r#","ttlMs":-5"#, r#","ttlMs":"60000""#, r#","ttlMs":2.5"#] {
        let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
        fetch(&mut s, t0, &k, None, page(r#"{"name":"a"}"#, extra));
        assert_eq!(look(&mut s, t0 + ms(999), &k, None), "fresh a", "{extra}");
        assert_eq!(look(&mut s, t0 + ms(1_000), &k, None), "expired", "{extra}");
    }
}

#[test]
fn zero_ttl_is_not_cached_and_drops_the_old_page() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    fetch(&mut s, t0, &k, None, page(r#"{"name":"old"}"#, ""));
    let done = fetch(&mut s, t0, &k, None, page(r#"{"name":"new"}"#, r#","ttlMs":0"#));
    let Finished::NotStored { page, why: NotStored::ZeroTtl } = done else { panic!("{done:?}") };
    assert_eq!(page.items[0].id(), "new", "the caller still gets its page");
    assert_eq!(look(&mut s, t0, &k, None), "miss");
    assert_eq!((s.entries(), s.bytes()), (0, 0));
}

#[test]
fn results_of_requests_with_input_responses_are_never_cached() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    let Ok(Begin::Fetch(token)) = s.begin_refresh(&k, TOOLS, None) else { panic!("fetch") };
    let outcome = RefreshOutcome::Page { page: page(r#"{"name":"a"}"#, ""), carried_input: true };
    let done = s.finish_refresh(t0, token, outcome);
    assert!(matches!(done, Finished::NotStored { why: NotStored::CarriedInput, .. }), "{done:?}");
    assert_eq!(look(&mut s, t0, &k, None), "miss");
}

#[test]
fn private_entries_stay_with_their_principal_public_ones_are_shared() {
    let (mut s, t0) = (store(), Instant::now());
    let (alice, bob) = (key_for("alice"), key_for("bob"));
    fetch(&mut s, t0, &alice, None, page(r#"{"name":"alice_only"}"#, r#","cacheScope":"private""#));
    assert_eq!(look(&mut s, t0, &bob, None), "miss");
    assert_eq!(look(&mut s, t0, &alice, None), "fresh alice_only");
    // Unknown or missing scope is private too.
    let (carol, dave) = (key_for("carol"), key_for("dave"));
    fetch(&mut s, t0, &carol, None, page(r#"{"name":"c"}"#, r#","cacheScope":"world""#));
    assert_eq!(look(&mut s, t0, &dave, None), "miss");
    // A public page is read by every principal of the same server context.
    let erin = key_for("erin");
    fetch(&mut s, t0, &erin, None, page(r#"{"name":"shared"}"#, r#","cacheScope":"public""#));
    assert_eq!(look(&mut s, t0, &dave, None), "fresh shared");
    assert_eq!(look(&mut s, t0, &bob, None), "fresh shared");
    // ... and alice's own private page still comes first for her.
    assert_eq!(look(&mut s, t0, &alice, None), "fresh alice_only");
}

#[test]
fn public_entries_do_not_cross_server_contexts() {
    let (mut s, t0) = (store(), Instant::now());
    let a = key_for("alice");
    fetch(&mut s, t0, &a, None, page(r#"{"name":"x"}"#, r#","cacheScope":"public""#));
    let other_version = CacheKey::new(&KeyParts {
        server: "srv",
        transport: Transport::Http,
        protocol_version: "2025-11-25",
        principal: Some("alice"),
        granted_scopes: &["read"],
        tenant: Some("t1"),
        client_capabilities: "{}",
        extensions: "{}",
    })
    .expect("key");
    assert_eq!(look(&mut s, t0, &other_version, None), "miss");
}

#[test]
fn the_latest_scope_wins_for_a_page() {
    let (mut s, t0) = (store(), Instant::now());
    let (alice, bob) = (key_for("alice"), key_for("bob"));
    fetch(&mut s, t0, &alice, None, page(r#"{"name":"p"}"#, r#","cacheScope":"public""#));
    assert_eq!(look(&mut s, t0, &bob, None), "fresh p");
    // The server now says this list is private: the shared copy must go.
    fetch(&mut s, t0, &alice, None, page(r#"{"name":"q"}"#, r#","cacheScope":"private""#));
    assert_eq!(look(&mut s, t0, &bob, None), "miss");
    assert_eq!(look(&mut s, t0, &alice, None), "fresh q");
    assert_eq!(s.entries(), 1);
}

#[test]
fn each_page_has_its_own_expiry_and_empty_cursor_is_a_page() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    fetch(&mut s, t0, &k, None, page(r#"{"name":"a"}"#, r#","nextCursor":"","ttlMs":5000"#));
    fetch(&mut s, t0, &k, Some(""), page(r#"{"name":"b"}"#, r#","nextCursor":"p3","ttlMs":1000"#));
    fetch(&mut s, t0, &k, Some("p3"), page(r#"{"name":"c"}"#, r#","ttlMs":3000"#));
    assert_eq!(look(&mut s, t0, &k, None), "fresh a");
    assert_eq!(look(&mut s, t0, &k, Some("")), "fresh b");
    let later = t0 + ms(2_000);
    assert_eq!(look(&mut s, later, &k, None), "fresh a");
    assert_eq!(look(&mut s, later, &k, Some("")), "expired");
    assert_eq!(look(&mut s, later, &k, Some("p3")), "fresh c");
    // Finding an item walks the chain and asks for exactly the expired page.
    assert!(matches!(s.find_item(t0, &k, TOOLS, "c"), Ok(ItemLookup::Fresh(i)) if i.id() == "c"));
    assert!(matches!(s.find_item(t0, &k, TOOLS, "zz"), Ok(ItemLookup::Absent)));
    assert!(matches!(
        s.find_item(later, &k, TOOLS, "c"),
        Ok(ItemLookup::Refresh { cursor: Some("") })
    ));
    assert!(matches!(
        s.find_item(t0 + ms(6_000), &k, TOOLS, "b"),
        Ok(ItemLookup::Refresh { cursor: None })
    ));
    // The whole list, in cursor order (not insertion or id order).
    assert_eq!(pages_of(&mut s, t0, &k), "a | b | c");
    assert_eq!(pages_of(&mut s, later, &k), "refresh Some(\"\")");
    assert_eq!(pages_of(&mut s, t0 + ms(6_000), &k), "refresh None");
}

/// The whole list as `ids | ids | ...`, or what must be fetched first.
fn pages_of(s: &mut Store, now: Instant, k: &CacheKey) -> String {
    match s.list_pages(now, k, TOOLS) {
        Ok(ListLookup::Pages { pages, stale_for }) => {
            let ids: Vec<String> = pages
                .iter()
                .map(|p| p.items().iter().map(|i| i.id()).collect::<Vec<_>>().join(","))
                .collect();
            match stale_for {
                None => ids.join(" | "),
                Some(d) => format!("stale {}ms {}", d.as_millis(), ids.join(" | ")),
            }
        }
        Ok(ListLookup::Refresh { cursor }) => format!("refresh {cursor:?}"),
        Err(e) => format!("error {e}"),
    }
}

#[test]
fn a_list_is_read_in_cursor_order_whatever_order_its_pages_arrived_in() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    fetch(&mut s, t0, &k, Some("z"), page(r#"{"name":"third"}"#, ""));
    assert_eq!(pages_of(&mut s, t0, &k), "refresh None");
    fetch(&mut s, t0, &k, None, page(r#"{"name":"first"}"#, r#","nextCursor":"m""#));
    assert_eq!(pages_of(&mut s, t0, &k), "refresh Some(\"m\")");
    fetch(&mut s, t0, &k, Some("m"), page(r#"{"name":"second"}"#, r#","nextCursor":"z""#));
    assert_eq!(pages_of(&mut s, t0, &k), "first | second | third");
    // One page served stale after a failed refresh makes the whole answer stale.
    s.mark_stale(t0 + ms(10), &k, TOOLS);
    assert_eq!(pages_of(&mut s, t0 + ms(10), &k), "refresh None");
    for cursor in [None, Some("m"), Some("z")] {
        fail(&mut s, t0 + ms(10), &k, cursor);
    }
    assert_eq!(pages_of(&mut s, t0 + ms(30), &k), "stale 20ms first | second | third");
    let st = s.stats();
    assert_eq!((st.hits, st.stale_serves), (1, 1));
}

#[test]
fn find_item_keeps_the_last_definition_and_survives_a_cursor_loop() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    fetch(&mut s, t0, &k, None, page(r#"{"name":"a","v":1}"#, r#","nextCursor":"c1""#));
    fetch(&mut s, t0, &k, Some("c1"), page(r#"{"name":"a","v":2}"#, r#","nextCursor":"c1""#));
    let Ok(ItemLookup::Fresh(item)) = s.find_item(t0, &k, TOOLS, "a") else { panic!("found") };
    assert_eq!(item.json(), r#"{"name":"a","v":2}"#);
}

#[test]
fn an_invalid_cursor_drops_every_page_of_the_list() {
    let (mut s, t0) = (store(), Instant::now());
    let (alice, bob) = (key_for("alice"), key_for("bob"));
    fetch(&mut s, t0, &alice, None, page(r#"{"name":"a"}"#, r#","nextCursor":"c1""#));
    fetch(
        &mut s,
        t0,
        &alice,
        Some("c1"),
        page(r#"{"name":"b"}"#, r#","nextCursor":"c2","cacheScope":"public""#),
    );
    fetch(&mut s, t0, &bob, None, page(r#"{"name":"bob"}"#, ""));
    let Ok(Begin::Fetch(token)) = s.begin_refresh(&alice, TOOLS, Some("c2")) else {
        panic!("fetch")
    };
    assert!(matches!(
        s.finish_refresh(t0, token, RefreshOutcome::InvalidCursor),
        Finished::ListDropped
    ));
    assert_eq!(look(&mut s, t0, &alice, None), "miss");
    assert_eq!(look(&mut s, t0, &alice, Some("c1")), "miss");
    assert_eq!(look(&mut s, t0, &bob, None), "fresh bob", "another principal's private list stays");
    assert_eq!(s.entries(), 1);
}

#[test]
fn a_failed_refresh_serves_stale_up_to_max_stale_then_errors() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    fetch(&mut s, t0, &k, None, page(r#"{"name":"a"}"#, r#","ttlMs":1000"#));
    let t1 = t0 + ms(1_200);
    assert_eq!(
        look(&mut s, t1, &k, None),
        "expired",
        "expired is not served before a refresh fails"
    );
    let Finished::Failed { servable_until } = fail(&mut s, t1, &k, None) else { panic!("failed") };
    assert_eq!(servable_until, Some(t0 + ms(1_000) + ms(5_000)));
    assert_eq!(look(&mut s, t1, &k, None), "stale 200ms a");
    assert!(
        matches!(s.find_item(t1, &k, TOOLS, "a"), Ok(ItemLookup::Stale { stale_for, .. }) if stale_for == ms(200))
    );
    assert_eq!(look(&mut s, t0 + ms(6_000), &k, None), "stale 5000ms a");
    assert_eq!(
        look(&mut s, t0 + ms(6_001), &k, None),
        "error cached catalog stale for 5001 ms, past the 5000 ms allowed after a failed refresh"
    );
    assert!(matches!(
        s.find_item(t0 + ms(6_001), &k, TOOLS, "a"),
        Err(StoreError::StaleTooLong { .. })
    ));
    // A later successful refresh replaces it.
    fetch(&mut s, t0 + ms(7_000), &k, None, page(r#"{"name":"b"}"#, ""));
    assert_eq!(look(&mut s, t0 + ms(7_000), &k, None), "fresh b");
    assert_eq!(s.stats().stale_serves, 3);
}

#[test]
fn a_failed_refresh_of_a_fresh_page_leaves_it_fresh_and_of_nothing_serves_nothing() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    assert!(matches!(fail(&mut s, t0, &k, None), Finished::Failed { servable_until: None }));
    fetch(&mut s, t0, &k, None, page(r#"{"name":"a"}"#, r#","ttlMs":1000"#));
    fail(&mut s, t0 + ms(10), &k, None);
    assert_eq!(look(&mut s, t0 + ms(999), &k, None), "fresh a");
    assert_eq!(look(&mut s, t0 + ms(1_000), &k, None), "expired", "needs its own failed refresh");
}

#[test]
fn concurrent_needs_share_one_fetch() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("alice"));
    let mut tokens = Vec::new();
    let mut waits = 0;
    for _ in 0..10 {
        assert_eq!(look(&mut s, t0, &k, None), "miss");
        match s.begin_refresh(&k, TOOLS, None).expect("room") {
            Begin::Fetch(t) => tokens.push(t),
            Begin::Wait => waits += 1,
        }
    }
    assert_eq!((tokens.len(), waits), (1, 9), "one request on the wire");
    assert_eq!(s.refreshes_in_flight(), 1);
    let token = tokens.pop().expect("one");
    let outcome = RefreshOutcome::Page { page: page(r#"{"name":"a"}"#, ""), carried_input: false };
    assert!(matches!(s.finish_refresh(t0, token, outcome), Finished::Stored));
    for _ in 0..10 {
        assert_eq!(look(&mut s, t0, &k, None), "fresh a");
    }
    let st = s.stats();
    assert_eq!((st.refreshes, st.hits, st.misses), (1, 10, 10));
    // Different pages and different principals are different flights.
    assert!(matches!(s.begin_refresh(&k, TOOLS, Some("c")), Ok(Begin::Fetch(_))));
    assert!(matches!(s.begin_refresh(&key_for("bob"), TOOLS, None), Ok(Begin::Fetch(_))));
    assert!(matches!(s.begin_refresh(&k, CatalogKind::Prompts, None), Ok(Begin::Fetch(_))));
}

#[test]
fn mark_stale_invalidates_pages_and_revokes_refreshes_in_flight() {
    let (mut s, t0) = (store(), Instant::now());
    let (alice, bob) = (key_for("alice"), key_for("bob"));
    fetch(&mut s, t0, &alice, None, page(r#"{"name":"old"}"#, r#","nextCursor":"c""#));
    fetch(&mut s, t0, &alice, Some("c"), page(r#"{"name":"old2"}"#, r#","cacheScope":"public""#));
    let Ok(Begin::Fetch(racing)) = s.begin_refresh(&alice, TOOLS, None) else { panic!("fetch") };
    let Ok(Begin::Fetch(bobs)) = s.begin_refresh(&bob, TOOLS, None) else { panic!("fetch") };
    let Ok(Begin::Fetch(prompts)) = s.begin_refresh(&alice, CatalogKind::Prompts, None) else {
        panic!("fetch")
    };
    let t1 = t0 + ms(100);
    let inv = s.mark_stale(t1, &alice, TOOLS);
    assert_eq!(inv, Invalidated { pages: 2, cancelled_refreshes: 2 });
    assert_eq!(look(&mut s, t1, &alice, None), "expired");
    assert_eq!(look(&mut s, t1, &alice, Some("c")), "expired");
    // The raced result comes back: it is not stored as fresh.
    let late = RefreshOutcome::Page { page: page(r#"{"name":"racy"}"#, ""), carried_input: false };
    let done = s.finish_refresh(t1, racing, late);
    assert!(matches!(done, Finished::Cancelled { page: Some(_) }), "{done:?}");
    assert_eq!(look(&mut s, t1, &alice, None), "expired");
    let late = RefreshOutcome::Page { page: page(r#"{"name":"b"}"#, ""), carried_input: false };
    assert!(matches!(s.finish_refresh(t1, bobs, late), Finished::Cancelled { .. }));
    // Another list kind was not touched.
    let other = RefreshOutcome::Page { page: page(r#"{"name":"p"}"#, ""), carried_input: false };
    assert!(matches!(s.finish_refresh(t1, prompts, other), Finished::Stored));
    // The next need starts a new fetch, which is stored.
    fetch(&mut s, t1, &alice, None, page(r#"{"name":"new"}"#, ""));
    assert_eq!(look(&mut s, t1, &alice, None), "fresh new");
    // Stale-if-error counts from the invalidation, not from the old expiry.
    let t2 = t1 + ms(10);
    assert_eq!(fail_label(&mut s, t2, &alice, Some("c")), "servable until +5100ms");
    assert_eq!(look(&mut s, t2, &alice, Some("c")), "stale 10ms old2");
    fn fail_label(s: &mut Store, now: Instant, k: &CacheKey, c: Option<&str>) -> String {
        let base = now - ms(110);
        match fail(s, now, k, c) {
            Finished::Failed { servable_until: Some(t) } => {
                format!("servable until +{}ms", (t - base).as_millis())
            }
            other => format!("{other:?}"),
        }
    }
}

#[test]
fn lru_eviction_by_entries_keeps_the_recently_used() {
    let mut s =
        Store::new(StoreConfig { max_entries: 3, ..StoreConfig::default() }).expect("config");
    let t0 = Instant::now();
    let keys: Vec<CacheKey> = ["a", "b", "c", "d"].iter().map(|p| key_for(p)).collect();
    for k in &keys[..3] {
        fetch(&mut s, t0, k, None, page(r#"{"name":"x"}"#, ""));
    }
    assert_eq!(look(&mut s, t0, &keys[0], None), "fresh x"); // "a" is now the most recent
    fetch(&mut s, t0, &keys[3], None, page(r#"{"name":"x"}"#, ""));
    assert_eq!(s.entries(), 3);
    assert_eq!(s.stats().evictions, 1);
    assert_eq!(look(&mut s, t0, &keys[1], None), "miss", "b was least recently used");
    assert_eq!(look(&mut s, t0, &keys[0], None), "fresh x");
    assert_eq!(look(&mut s, t0, &keys[2], None), "fresh x");
    assert_eq!(look(&mut s, t0, &keys[3], None), "fresh x");
}

#[test]
fn lru_eviction_by_bytes_and_a_lone_oversized_catalog_is_an_error() {
    let one = page(r#"{"name":"x","description":"0123456789"}"#, "");
    let size = page_bytes(None, &one);
    let mut s =
        Store::new(StoreConfig { max_bytes: size * 2, ..StoreConfig::default() }).expect("config");
    let t0 = Instant::now();
    let (a, b, c) = (key_for("a"), key_for("b"), key_for("c"));
    fetch(&mut s, t0, &a, None, one.clone());
    fetch(&mut s, t0, &b, None, one.clone());
    assert_eq!(s.bytes(), size * 2);
    fetch(&mut s, t0, &c, None, one.clone());
    assert_eq!((s.bytes(), s.stats().evictions), (size * 2, 1));
    assert_eq!(look(&mut s, t0, &a, None), "miss");
    // A second page for `c` would make its list alone too big: refused, and its list dropped
    // rather than left with a hole.
    let done = fetch(&mut s, t0, &c, Some("p2"), one.clone());
    let Finished::Rejected { page: back, error } = done else { panic!("{done:?}") };
    assert_eq!(back, one, "the page comes back to the caller");
    assert_eq!(error, StoreError::CatalogTooLarge { bytes: size * 2 + 2, max_bytes: size * 2 });
    assert_eq!(look(&mut s, t0, &c, None), "miss");
    assert_eq!(look(&mut s, t0, &b, None), "fresh x", "others are untouched");
}

/// A key of `server` for `principal`, in the one tenant.
fn server_key(server: &str, principal: &str) -> CacheKey {
    CacheKey::new(&KeyParts {
        server,
        transport: Transport::Http,
        protocol_version: "2026-07-28",
        principal: Some(principal),
        granted_scopes: &["read"],
        tenant: Some("t1"),
        client_capabilities: "{}",
        extensions: "{}",
    })
    .expect("key")
}

#[test]
fn a_server_filling_the_cache_evicts_its_own_lists_then_is_refused_not_anothers() {
    let mut s =
        Store::new(StoreConfig { max_entries: 4, ..StoreConfig::default() }).expect("config");
    let t0 = Instant::now();
    let quiet = server_key("quiet", "p");
    fetch(&mut s, t0, &quiet, None, page(r#"{"name":"q"}"#, ""));
    // The noisy server lists for three principals, then a fourth: past the cap. Its own
    // oldest list goes, not the quiet server's (the least recently used of all).
    let noisy: Vec<CacheKey> =
        ["a", "b", "c", "d"].iter().map(|p| server_key("noisy", p)).collect();
    for k in &noisy {
        assert!(matches!(
            fetch(&mut s, t0, k, None, page(r#"{"name":"n"}"#, "")),
            Finished::Stored
        ));
    }
    assert_eq!((s.entries(), s.stats().evictions), (4, 1));
    assert_eq!(look(&mut s, t0, &quiet, None), "fresh q");
    assert_eq!(look(&mut s, t0, &noisy[0], None), "miss");
    // One long walk: its pages push out the noisy server's other lists first...
    let walk = &noisy[3];
    for c in ["2", "3"] {
        let stored = fetch(&mut s, t0, walk, Some(c), page(r#"{"name":"n"}"#, ""));
        assert!(matches!(stored, Finished::Stored), "{stored:?}");
    }
    assert_eq!(look(&mut s, t0, &noisy[1], None), "miss");
    assert_eq!(look(&mut s, t0, &noisy[2], None), "miss");
    // ...and a page that would need the quiet server's list is refused, the walk's list
    // dropped whole (it fits the cap alone, so plain LRU took the quiet list).
    let done = fetch(&mut s, t0, walk, Some("4"), page(r#"{"name":"n"}"#, ""));
    let Finished::Rejected { error, .. } = done else { panic!("{done:?}") };
    assert!(matches!(error, StoreError::CrowdsOthersOut { pages: 4, .. }), "{error:?}");
    assert_eq!(look(&mut s, t0, walk, None), "miss");
    assert_eq!(look(&mut s, t0, &quiet, None), "fresh q");
    assert_eq!(s.entries(), 1);
}

#[test]
fn under_the_byte_cap_the_heavier_server_gives_way_though_more_recently_used() {
    let small = page(r#"{"name":"x"}"#, "");
    let big = page(&format!(r#"{{"name":"x","description":"{}"}}"#, "d".repeat(400)), "");
    let (small_size, big_size) = (page_bytes(None, &small), page_bytes(None, &big));
    assert!(big_size > 2 * small_size);
    let mut s = Store::new(StoreConfig {
        max_bytes: big_size + 2 * small_size - 1,
        ..StoreConfig::default()
    })
    .expect("config");
    let t0 = Instant::now();
    let (a, b1, b2) = (server_key("a", "p"), server_key("b", "p"), server_key("b", "q"));
    fetch(&mut s, t0, &a, None, big);
    fetch(&mut s, t0, &b1, None, small.clone());
    assert_eq!(look(&mut s, t0, &a, None), "fresh x", "a is now the most recently used");
    // b needs room for a second small page: a holds more bytes, so a gives way, not b's
    // least recently used list.
    assert!(matches!(fetch(&mut s, t0, &b2, None, small), Finished::Stored));
    assert_eq!(look(&mut s, t0, &a, None), "miss");
    assert_eq!(look(&mut s, t0, &b1, None), "fresh x");
    assert_eq!(look(&mut s, t0, &b2, None), "fresh x");
    assert_eq!(s.stats().evictions, 1);
}

#[test]
fn when_servers_hold_as_much_the_others_give_way() {
    let mut s =
        Store::new(StoreConfig { max_entries: 3, ..StoreConfig::default() }).expect("config");
    let t0 = Instant::now();
    let (b1, a1, a2) = (server_key("b", "p"), server_key("a", "p"), server_key("a", "q"));
    for k in [&b1, &a1, &a2] {
        fetch(&mut s, t0, k, None, page(r#"{"name":"x"}"#, ""));
    }
    // b's second list makes two and two: a's least recently used list goes, though b's
    // first list is older.
    let b2 = server_key("b", "q");
    assert!(matches!(fetch(&mut s, t0, &b2, None, page(r#"{"name":"x"}"#, "")), Finished::Stored));
    assert_eq!(look(&mut s, t0, &a1, None), "miss");
    assert_eq!(look(&mut s, t0, &b1, None), "fresh x");
    assert_eq!(look(&mut s, t0, &a2, None), "fresh x");
}

#[test]
fn a_list_with_more_pages_than_entries_is_an_error() {
    let mut s =
        Store::new(StoreConfig { max_entries: 2, ..StoreConfig::default() }).expect("config");
    let (t0, k) = (Instant::now(), key_for("a"));
    fetch(&mut s, t0, &k, None, page(r#"{"name":"x"}"#, r#","nextCursor":"1""#));
    fetch(&mut s, t0, &k, Some("1"), page(r#"{"name":"y"}"#, r#","nextCursor":"2""#));
    let done = fetch(&mut s, t0, &k, Some("2"), page(r#"{"name":"z"}"#, ""));
    assert!(matches!(
        done,
        Finished::Rejected { error: StoreError::TooManyPages { pages: 3, max_entries: 2 }, .. }
    ));
    assert_eq!(s.entries(), 0);
}

#[test]
fn the_refresh_table_is_bounded() {
    let mut s =
        Store::new(StoreConfig { max_refreshes: 2, ..StoreConfig::default() }).expect("config");
    let k = key_for("a");
    assert!(matches!(s.begin_refresh(&k, TOOLS, None), Ok(Begin::Fetch(_))));
    assert!(matches!(s.begin_refresh(&k, TOOLS, Some("x")), Ok(Begin::Fetch(_))));
    assert_eq!(
        s.begin_refresh(&k, TOOLS, Some("y")).err(),
        Some(StoreError::TooManyRefreshes { max: 2 })
    );
    assert!(matches!(s.begin_refresh(&k, TOOLS, None), Ok(Begin::Wait)), "waiting needs no room");
}

#[test]
fn purge_frees_what_can_no_longer_be_served() {
    let (mut s, t0, k) = (store(), Instant::now(), key_for("a"));
    fetch(&mut s, t0, &k, None, page(r#"{"name":"x"}"#, r#","ttlMs":1000,"nextCursor":"2""#));
    fetch(&mut s, t0, &k, Some("2"), page(r#"{"name":"y"}"#, r#","ttlMs":9000"#));
    s.purge(t0 + ms(6_000)); // page 1 is stale for exactly max_stale: kept
    assert_eq!(s.entries(), 2);
    s.purge(t0 + ms(6_001));
    assert_eq!(s.entries(), 1);
    assert_eq!(look(&mut s, t0 + ms(6_001), &k, Some("2")), "fresh y");
    assert_eq!(s.bytes(), page_bytes(Some("2"), &page(r#"{"name":"y"}"#, "")));
}

#[test]
fn config_is_checked_once() {
    let bad = |c: StoreConfig| Store::new(c).err();
    let d = StoreConfig::default();
    assert_eq!(
        bad(StoreConfig { max_entries: 0, ..d }),
        Some(StoreConfigError::Zero("max_entries"))
    );
    assert_eq!(bad(StoreConfig { max_bytes: 0, ..d }), Some(StoreConfigError::Zero("max_bytes")));
    assert_eq!(
        bad(StoreConfig { max_stale: Duration::from_secs(400 * 86_400), ..d }),
        Some(StoreConfigError::TooLong("max_stale"))
    );
    assert_eq!(
        bad(StoreConfig { default_ttl: ms(2), max_ttl: ms(1), ..d }),
        Some(StoreConfigError::DefaultOverMax)
    );
    assert_eq!(
        StoreConfigError::DefaultOverMax.to_string(),
        "cache config: `default_ttl` must not exceed `max_ttl`"
    );
}

/// splitmix64: a tiny deterministic generator, so the property test needs no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random interleavings of fetches (public and private, any TTL), failures, change
/// notifications, invalid cursors, time steps and lookups by several principals: a page whose
/// server said "private" is never returned to anyone but the principal that fetched it, and
/// the bounds always hold.
#[test]
fn no_principal_ever_sees_another_principals_private_page() {
    const PRINCIPALS: [&str; 4] = ["alice", "bob", "carol", "dave"];
    const CURSORS: [Option<&str>; 3] = [None, Some(""), Some("p2")];
    let (mut own_private, mut shared, mut own_items) = (0, 0, 0);
    for seed in 0..64u64 {
        let mut rng = Rng(seed);
        let mut s = Store::new(StoreConfig {
            max_entries: 6,
            max_bytes: 4_000,
            default_ttl: ms(50),
            max_ttl: ms(200),
            max_stale: ms(100),
            max_refreshes: 8,
        })
        .expect("config");
        let keys: Vec<CacheKey> = PRINCIPALS.iter().map(|p| key_for(p)).collect();
        let mut tokens: Vec<(usize, RefreshToken)> = Vec::new();
        let mut now = Instant::now();
        for _ in 0..400 {
            let who = rng.below(PRINCIPALS.len() as u64) as usize;
            let k = keys[who];
            let cursor = CURSORS[rng.below(3) as usize];
            match rng.below(8) {
                0 | 1 => {
                    if let Ok(Begin::Fetch(t)) = s.begin_refresh(&k, TOOLS, cursor) {
                        tokens.push((who, t));
                    }
                }
                2 | 3 if !tokens.is_empty() => {
                    let (owner, t) = tokens.swap_remove(rng.below(tokens.len() as u64) as usize);
                    let scope = if rng.below(2) == 0 { "public" } else { "private" };
                    let ttl = rng.below(300);
                    let outcome = match rng.below(6) {
                        0 => RefreshOutcome::Failed,
                        1 => RefreshOutcome::InvalidCursor,
                        _ => RefreshOutcome::Page {
                            // The page says who fetched it and under which scope.
                            page: page(
                                &format!(r#"{{"name":"{}:{scope}"}}"#, PRINCIPALS[owner]),
                                &format!(r#","cacheScope":"{scope}","ttlMs":{ttl}"#),
                            ),
                            carried_input: rng.below(10) == 0,
                        },
                    };
                    let _ = s.finish_refresh(now, t, outcome);
                }
                4 => {
                    s.mark_stale(now, &k, TOOLS);
                }
                5 => now += ms(rng.below(80)),
                _ => {
                    let seen: Option<String> = match s.lookup(now, &k, TOOLS, cursor) {
                        Ok(Lookup::Fresh(p)) | Ok(Lookup::Stale { page: p, .. }) => {
                            Some(p.items()[0].id().to_string())
                        }
                        _ => None,
                    };
                    if let Some(id) = seen {
                        let (owner, scope) = id.split_once(':').expect("tagged");
                        assert!(
                            scope == "public" || owner == PRINCIPALS[who],
                            "seed {seed}: {} saw {id}",
                            PRINCIPALS[who]
                        );
                        if scope == "private" {
                            own_private += 1;
                        } else if owner != PRINCIPALS[who] {
                            shared += 1;
                        }
                    }
                    if let Ok(ItemLookup::Fresh(item) | ItemLookup::Stale { item, .. }) =
                        s.find_item(now, &k, TOOLS, "zzz")
                    {
                        panic!("seed {seed}: found absent item {}", item.id());
                    }
                    // The call path: another principal's private tool is never found.
                    let other = PRINCIPALS[rng.below(PRINCIPALS.len() as u64) as usize];
                    let name = format!("{other}:private");
                    if let Ok(ItemLookup::Fresh(item) | ItemLookup::Stale { item, .. }) =
                        s.find_item(now, &k, TOOLS, &name)
                    {
                        assert_eq!(other, PRINCIPALS[who], "seed {seed}: found {}", item.id());
                        own_items += 1;
                    }
                }
            }
            assert!(s.entries() <= 6 && s.bytes() <= 4_000, "seed {seed}: bounds");
            assert!(s.refreshes_in_flight() <= 8);
        }
    }
    // The run must have exercised both kinds of answer, or it proves nothing.
    assert!(
        own_private > 100 && shared > 100 && own_items > 20,
        "private {own_private}, shared {shared}, own items {own_items}"
    );
}

/// A shared list whose later page alone was fetched again (pages expire by their own
/// `ttlMs`) by another context's walk reads as stored anew: the oldest page's time stood,
/// so the other contexts never took the new page on (no change event, a stale search index)
/// until the first page expired too.
#[test]
fn a_list_whose_later_page_alone_was_fetched_again_reads_as_stored_anew() {
    let (mut s, t0) = (store(), Instant::now());
    let (alice, bob) = (key_for("alice"), key_for("bob"));
    let first = page(r#"{"name":"a"}"#, r#","cacheScope":"public","ttlMs":5000,"nextCursor":"c1""#);
    fetch(&mut s, t0, &alice, None, first);
    let later = |name: &str| {
        page(&format!(r#"{{"name":"{name}"}}"#), r#","cacheScope":"public","ttlMs":100"#)
    };
    fetch(&mut s, t0, &alice, Some("c1"), later("b"));
    let before = s.list_received(t0, &alice, TOOLS);
    assert!(before.is_some());
    let t1 = t0 + ms(200);
    fetch(&mut s, t1, &bob, Some("c1"), later("b2"));
    let after = s.list_received(t1, &alice, TOOLS);
    assert!(after.is_some() && after != before, "{before:?} {after:?}");
}
