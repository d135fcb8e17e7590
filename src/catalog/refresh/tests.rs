//! The refresh walk on simulated time against a scripted paged server.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::super::key::{CacheKey, KeyParts, Transport};
use super::super::listing::{parse_page, CatalogKind};
use super::super::store::{ListLookup, StoreConfig};
use super::*;

const TOOLS: CatalogKind = CatalogKind::Tools;

fn key() -> CacheKey {
    key_of("srv")
}

/// The key of the stdio server `server` of these tests.
fn key_of(server: &str) -> CacheKey {
    CacheKey::new(&KeyParts {
        server,
        transport: Transport::Stdio,
        protocol_version: "2025-11-25",
        principal: None,
        granted_scopes: &[],
        tenant: None,
        client_capabilities: "{}",
        extensions: "{}",
    })
    .expect("key")
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn store_with(max_bytes: usize) -> Store {
    Store::new(StoreConfig {
        default_ttl: ms(1_000),
        max_ttl: ms(10_000),
        max_stale: ms(5_000),
        max_bytes,
        ..StoreConfig::default()
    })
    .expect("config")
}

/// A paged server: the result JSON for each cursor ("" key for the first page).
struct Server {
    pages: HashMap<String, String>,
    /// Cursors asked for, in order ("-" for the first page).
    asked: Vec<String>,
    fail: bool,
}

impl Server {
    /// Pages of `tools` split by `per` per page, cursors "p1", "p2", .., every page `extra`.
    fn new(tools: &[&str], per: usize, extra: &str) -> Self {
        let mut pages = HashMap::new();
        let chunks: Vec<_> = tools.chunks(per).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let items: Vec<String> = chunk.iter().map(|t| tool(t, "")).collect();
            let next = if i + 1 < chunks.len() {
                format!(r#","nextCursor":"p{}""#, i + 1)
            } else {
                "".into()
            };
            let cursor = if i == 0 { String::new() } else { format!("p{i}") };
            pages.insert(cursor, format!(r#"{{"tools":[{}]{next}{extra}}}"#, items.join(",")));
        }
        Server { pages, asked: Vec::new(), fail: false }
    }

    fn page(&mut self, cursor: Option<&str>) -> Result<ParsedPage, &'static str> {
        self.asked.push(cursor.unwrap_or("-").to_owned());
        if self.fail {
            return Err("down");
        }
        let json = self.pages.get(cursor.unwrap_or("")).ok_or("no such cursor")?;
        Ok(parse_page(TOOLS, json).expect("page"))
    }

    fn asked(&mut self) -> Vec<String> {
        std::mem::take(&mut self.asked)
    }
}

fn tool(name: &str, description: &str) -> String {
    format!(r#"{{"name":"{name}","description":"{description}"}}"#)
}

/// Answers every page the refresher asks for until it stops asking; returns the changes.
fn drive(
    r: &mut Refresher<&'static str>,
    s: &mut Store,
    server: &mut Server,
    now: Instant,
) -> Vec<CatalogChange> {
    let mut changes = Vec::new();
    for _ in 0..100 {
        let Some(cursor) = r.poll_fetch() else { return changes };
        let result = server.page(cursor.map(str::to_owned).as_deref());
        changes.extend(r.on_page(now, s, &key(), result, None));
    }
    panic!("the walk does not end");
}

fn names(s: &mut Store, now: Instant) -> String {
    match s.list_pages(now, &key(), TOOLS) {
        Ok(ListLookup::Pages { pages, .. }) => {
            pages.iter().flat_map(|p| p.items()).map(|i| i.id()).collect::<Vec<_>>().join(",")
        }
        other => format!("{other:?}"),
    }
}

#[test]
fn pages_are_fetched_one_by_one_and_each_cached_on_its_own() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a", "b", "c", "d", "e"], 2, "");
    let mut r = Refresher::new(TOOLS);
    assert_eq!(r.need(t0, &mut s, &key()), Ok(Answer::Waiting));
    assert_eq!(drive(&mut r, &mut s, &mut server, t0), []);
    assert_eq!(server.asked(), ["-", "p1", "p2"]);
    assert_eq!(s.entries(), 3, "three pages, three entries");
    assert_eq!(r.need(t0, &mut s, &key()), Ok(Answer::Cached));
    assert_eq!(r.poll_fetch(), None);
    assert_eq!(names(&mut s, t0), "a,b,c,d,e");
}

#[test]
fn a_refresh_fetches_only_the_pages_that_are_not_fresh() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a", "b", "c", "d", "e"], 2, "");
    // The middle page lives shorter.
    let p1 = server.pages.get("p1").cloned().expect("p1").replace("}]", r#"}],"ttlMs":100"#);
    server.pages.insert("p1".into(), p1);
    let mut r = Refresher::new(TOOLS);
    r.need(t0, &mut s, &key()).expect("need");
    drive(&mut r, &mut s, &mut server, t0);
    server.asked();
    let t1 = t0 + ms(200);
    assert_eq!(r.need(t1, &mut s, &key()), Ok(Answer::Waiting));
    drive(&mut r, &mut s, &mut server, t1);
    assert_eq!(server.asked(), ["p1"], "pages one and three are still fresh");
    assert_eq!(r.need(t1, &mut s, &key()), Ok(Answer::Cached));
    // Past the default TTL of the others, all three go again.
    let t2 = t0 + ms(1_500);
    r.need(t2, &mut s, &key()).expect("need");
    drive(&mut r, &mut s, &mut server, t2);
    assert_eq!(server.asked(), ["-", "p1", "p2"]);
}

#[test]
fn a_change_refetches_every_page_and_names_only_what_changed() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a", "b", "c", "d", "e"], 2, "");
    let mut r = Refresher::new(TOOLS);
    let mut index = SearchIndex::new();
    r.need(t0, &mut s, &key()).expect("need");
    while let Some(c) = r.poll_fetch() {
        let page = server.page(c.map(str::to_owned).as_deref());
        assert_eq!(r.on_page(t0, &mut s, &key(), page, Some(&mut index)), None, "baseline");
    }
    assert_eq!(index.len(), 5);
    server.asked();
    let last = server.pages.get("p2").cloned().expect("p2");
    server.pages.insert("p2".into(), last.replace(&tool("e", ""), &tool("e", "new words")));
    let t1 = t0 + ms(10);
    s.mark_stale(t1, &key(), TOOLS);
    assert_eq!(r.need(t1, &mut s, &key()), Ok(Answer::Waiting));
    let changes = drive(&mut r, &mut s, &mut server, t1);
    assert_eq!(server.asked(), ["-", "p1", "p2"]);
    assert_eq!(changes.len(), 1);
    assert_eq!((changes[0].added(), changes[0].removed()), (&[][..], &[][..]));
    assert_eq!(changes[0].changed(), [Box::from("e")]);
}

#[test]
fn concurrent_needs_share_one_walk() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a", "b", "c"], 1, "");
    let mut r = Refresher::new(TOOLS);
    assert_eq!(r.need(t0, &mut s, &key()), Ok(Answer::Waiting));
    let first = r.poll_fetch().map(|c| c.map(str::to_owned));
    assert_eq!(first, Some(None));
    for _ in 0..3 {
        assert_eq!(r.need(t0, &mut s, &key()), Ok(Answer::Waiting));
        assert_eq!(r.poll_fetch(), None, "one page on the wire");
    }
    assert_eq!(s.refreshes_in_flight(), 1);
    let page = server.page(None);
    assert_eq!(r.on_page(t0, &mut s, &key(), page, None), None);
    assert_eq!(r.need(t0, &mut s, &key()), Ok(Answer::Waiting));
    drive(&mut r, &mut s, &mut server, t0);
    assert_eq!(server.asked(), ["-", "p1", "p2"]);
    assert_eq!(s.refreshes_in_flight(), 0);
}

#[test]
fn a_looping_cursor_fails_the_walk_typed() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a", "b"], 1, "");
    server.pages.insert("p1".into(), r#"{"tools":[{"name":"b"}],"nextCursor":"p1"}"#.into());
    let mut r = Refresher::new(TOOLS);
    r.need(t0, &mut s, &key()).expect("need");
    drive(&mut r, &mut s, &mut server, t0);
    assert_eq!(server.asked(), ["-", "p1"]);
    assert_eq!(r.need(t0, &mut s, &key()), Err(NeedError::Walk(WalkError::CursorRepeated)));
    assert_eq!(s.entries(), 0, "a looping list is not kept");
}

#[test]
fn a_failed_page_serves_the_old_catalog_stale_or_fails_without_one() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a", "b"], 1, "");
    let mut r = Refresher::new(TOOLS);
    server.fail = true;
    r.need(t0, &mut s, &key()).expect("need");
    drive(&mut r, &mut s, &mut server, t0);
    assert_eq!(r.need(t0, &mut s, &key()), Err(NeedError::Walk(WalkError::Fetch("down"))));
    server.fail = false;
    r.need(t0, &mut s, &key()).expect("need");
    drive(&mut r, &mut s, &mut server, t0);
    server.asked();
    // Expired; the refresh fails on the second page: the first is fresh again, the second is
    // served stale.
    let t1 = t0 + ms(1_500);
    assert_eq!(r.need(t1, &mut s, &key()), Ok(Answer::Waiting));
    let c = r.poll_fetch().map(|c| c.map(str::to_owned));
    let page = server.page(c.expect("a fetch").as_deref());
    r.on_page(t1, &mut s, &key(), page, None);
    server.fail = true;
    drive(&mut r, &mut s, &mut server, t1);
    assert_eq!(server.asked(), ["-", "p1"]);
    assert_eq!(r.need(t1, &mut s, &key()), Ok(Answer::Cached));
    match s.list_pages(t1, &key(), TOOLS) {
        Ok(ListLookup::Pages { stale_for, pages }) => {
            assert_eq!((pages.len(), stale_for), (2, Some(ms(500))));
        }
        other => panic!("{other:?}"),
    }
    // Past the allowance, the need fails typed.
    let t2 = t1 + ms(6_000);
    assert_eq!(r.need(t2, &mut s, &key()), Ok(Answer::Waiting));
    drive(&mut r, &mut s, &mut server, t2);
    assert!(matches!(r.need(t2, &mut s, &key()), Err(NeedError::StaleTooLong { .. })));
}

/// A walk that a change notice revoked, and whose page then failed, is no answer: the next
/// need walks the changed list (it returned the failure instead, with the server back up).
#[test]
fn a_revoked_walk_that_fails_leaves_the_next_need_to_walk_again() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a"], 1, "");
    let mut r = Refresher::new(TOOLS);
    r.need(t0, &mut s, &key()).expect("need");
    drive(&mut r, &mut s, &mut server, t0);
    s.mark_stale(t0 + ms(10), &key(), TOOLS);
    assert_eq!(r.need(t0 + ms(10), &mut s, &key()), Ok(Answer::Waiting));
    assert!(r.poll_fetch().is_some());
    s.mark_stale(t0 + ms(11), &key(), TOOLS);
    r.on_page(t0 + ms(12), &mut s, &key(), Err("down"), None);
    assert_eq!(r.need(t0 + ms(12), &mut s, &key()), Ok(Answer::Waiting));
    server.asked();
    drive(&mut r, &mut s, &mut server, t0 + ms(13));
    assert_eq!(server.asked(), ["-"], "a new walk");
    assert_eq!(r.need(t0 + ms(13), &mut s, &key()), Ok(Answer::Cached));
}

/// A walk whose server changed its cursors leaves no page of the old chain behind.
#[test]
fn a_walk_over_new_cursors_leaves_no_old_page() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a", "b"], 1, "");
    let mut r = Refresher::new(TOOLS);
    r.need(t0, &mut s, &key()).expect("need");
    drive(&mut r, &mut s, &mut server, t0);
    assert_eq!(s.entries(), 2);
    // The same items behind a new cursor.
    let second = server.pages.remove("p1").expect("page p1");
    let first = server.pages[""].replace("\"p1\"", "\"q1\"");
    server.pages.insert(String::new(), first);
    server.pages.insert("q1".into(), second);
    let t1 = t0 + ms(1_500);
    assert_eq!(r.need(t1, &mut s, &key()), Ok(Answer::Waiting));
    drive(&mut r, &mut s, &mut server, t1);
    assert_eq!(server.asked(), ["-", "p1", "-", "q1"]);
    assert_eq!(s.entries(), 2, "p1's page is gone");
    assert_eq!(names(&mut s, t1), "a,b");
}

/// A catalog servable stale is served when the refresh behind it cannot start (the refresh
/// table is full): the error was returned instead, though the answer was at hand.
#[test]
fn a_stale_answer_does_not_wait_for_room_to_refresh() {
    let t0 = Instant::now();
    let config = StoreConfig {
        default_ttl: ms(1_000),
        max_stale: ms(5_000),
        max_refreshes: 1,
        ..StoreConfig::default()
    };
    let mut s = Store::new(config).expect("config");
    let mut server = Server::new(&["a"], 1, "");
    let mut r = Refresher::new(TOOLS);
    r.need(t0, &mut s, &key()).expect("need");
    drive(&mut r, &mut s, &mut server, t0);
    let t1 = t0 + ms(1_500);
    assert_eq!(r.need(t1, &mut s, &key()), Ok(Answer::Waiting));
    server.fail = true;
    drive(&mut r, &mut s, &mut server, t1);
    assert_eq!(r.need(t1, &mut s, &key()), Ok(Answer::Cached), "served stale after the failure");
    // Another catalog takes the only refresh slot.
    assert!(matches!(s.begin_refresh(&key_of("other"), TOOLS, None), Ok(Begin::Fetch(_))));
    assert_eq!(r.need(t1 + ms(10), &mut s, &key()), Ok(Answer::Cached));
}

#[test]
fn pages_that_may_not_be_cached_are_served_once() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a", "b", "c"], 1, "");
    let p1 = server.pages.get("p1").cloned().expect("p1").replace("}]", r#"}],"ttlMs":0"#);
    server.pages.insert("p1".into(), p1);
    let mut r = Refresher::new(TOOLS);
    r.need(t0, &mut s, &key()).expect("need");
    drive(&mut r, &mut s, &mut server, t0);
    assert_eq!(s.entries(), 2, "the ttl-0 page is not stored");
    assert_eq!(r.need(t0, &mut s, &key()), Ok(Answer::OneUse));
    let (items, stale) = r.one_use_items(t0, &s, &key()).expect("items");
    let ids: Vec<&str> = items.iter().map(|i| i.id()).collect();
    assert_eq!((ids, stale), (vec!["a", "b", "c"], None));
    // The next need lists again, from the page that is missing.
    server.asked();
    assert_eq!(r.need(t0, &mut s, &key()), Ok(Answer::Waiting));
    drive(&mut r, &mut s, &mut server, t0);
    assert_eq!(server.asked(), ["p1"]);
}

/// Pages that expire faster than the walk takes (`ttlMs` 100, a page every 60 ms): when the
/// last arrives the first has expired, and the list was never fresh as a whole. The need that
/// waited is answered with what its walk read, once, and the next need walks again; the old
/// code found the list expired at the end of every walk and walked on until the deadline.
#[test]
fn a_list_whose_pages_expire_during_its_walk_is_served_once_as_walked() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a", "b", "c"], 1, r#","ttlMs":100"#);
    let mut r = Refresher::new(TOOLS);
    assert_eq!(r.need(t0, &mut s, &key()), Ok(Answer::Waiting));
    let mut now = t0;
    while let Some(cursor) = r.poll_fetch() {
        let result = server.page(cursor.map(str::to_owned).as_deref());
        assert_eq!(r.on_page(now, &mut s, &key(), result, None), None);
        now += ms(60);
    }
    assert_eq!(server.asked(), ["-", "p1", "p2"]);
    let done = now - ms(60);
    assert_eq!(r.need(done, &mut s, &key()), Ok(Answer::OneUse));
    let (items, stale) = r.one_use_items(done, &s, &key()).expect("items");
    let ids: Vec<&str> = items.iter().map(|i| i.id()).collect();
    assert_eq!((ids, stale), (vec!["a", "b", "c"], None));
    // A change notice takes the walked pages back: what the host saw is no longer the list.
    let _ = s.mark_stale(done, &key(), TOOLS);
    assert!(r.one_use_items(done, &s, &key()).is_none(), "invalidated pages are not served");
    assert_eq!(r.need(done, &mut s, &key()), Ok(Answer::Waiting), "the next need walks again");
}

/// A page that comes back after the key changed (the server's granted scope changed while it
/// was out, and it was fetched again under the new grant's token) is stored under neither
/// key: the old code stored it under the key the walk began with, where a later token of the
/// old grant was served a listing made for the new one.
#[test]
fn a_page_that_comes_back_under_another_key_is_not_stored() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a", "b"], 2, "");
    let mut r = Refresher::new(TOOLS);
    let (old, new) = (key_of("read"), key_of("read admin"));
    assert_eq!(r.need(t0, &mut s, &old), Ok(Answer::Waiting));
    assert_eq!(r.poll_fetch(), Some(None));
    let page = server.page(None);
    assert_eq!(r.on_page(t0, &mut s, &new, page, None), None);
    assert_eq!(s.entries(), 0, "nothing stored");
    assert_eq!(s.refreshes_for(&old, TOOLS), 0, "the refresh was given back");
    assert_eq!(r.need(t0, &mut s, &new), Ok(Answer::Waiting), "a walk under the new key");
    assert_eq!(r.poll_fetch(), Some(None));
}

#[test]
fn a_list_over_the_byte_cap_is_held_once_and_nothing_of_it_is_cached() {
    let (t0, mut s) = (Instant::now(), store_with(700));
    let mut server = Server::new(&["a", "b", "c", "d", "e", "f"], 2, "");
    let mut r = Refresher::new(TOOLS);
    r.need(t0, &mut s, &key()).expect("need");
    drive(&mut r, &mut s, &mut server, t0);
    let asked = server.asked();
    assert!(asked.len() > 3 && asked[asked.len() - 3..] == ["-", "p1", "p2"], "{asked:?}");
    assert_eq!(s.entries(), 0, "half a catalog is worse than none");
    assert_eq!(r.need(t0, &mut s, &key()), Ok(Answer::OneUse));
    let (items, _) = r.one_use_items(t0, &s, &key()).expect("items");
    assert_eq!(items.len(), 6);
}

#[test]
fn a_rejected_cursor_drops_the_list_and_the_walk_starts_over_once() {
    let (t0, mut s) = (Instant::now(), store_with(1 << 20));
    let mut server = Server::new(&["a", "b", "c"], 1, "");
    let mut r = Refresher::new(TOOLS);
    r.need(t0, &mut s, &key()).expect("need");
    let mut rejections = 0;
    while let Some(c) = r.poll_fetch() {
        let c = c.map(str::to_owned);
        if c.as_deref() == Some("p1") && rejections < 1 {
            rejections += 1;
            server.asked.push("p1 rejected".into());
            assert_eq!(s.entries(), 1, "the first page was stored");
            r.cursor_rejected(t0, &mut s, &key(), "invalid cursor");
            assert_eq!(s.entries(), 0, "every page of the list is dropped");
            continue;
        }
        let page = server.page(c.as_deref());
        r.on_page(t0, &mut s, &key(), page, None);
    }
    assert_eq!(server.asked(), ["-", "p1 rejected", "-", "p1", "p2"]);
    assert_eq!(r.need(t0, &mut s, &key()), Ok(Answer::Cached));
    // A second rejection in the same walk is the server's last word.
    s.mark_stale(t0, &key(), TOOLS);
    r.need(t0, &mut s, &key()).expect("need");
    for _ in 0..2 {
        let c = r.poll_fetch().expect("a page").map(str::to_owned);
        match c {
            None => {
                let page = server.page(None);
                r.on_page(t0, &mut s, &key(), page, None);
            }
            Some(_) => r.cursor_rejected(t0, &mut s, &key(), "invalid cursor"),
        }
    }
    let c = r.poll_fetch().expect("restarted").map(str::to_owned);
    assert_eq!(c, None);
    let page = server.page(None);
    r.on_page(t0, &mut s, &key(), page, None);
    r.cursor_rejected(t0, &mut s, &key(), "invalid cursor");
    assert_eq!(r.poll_fetch(), None);
    assert_eq!(
        r.need(t0, &mut s, &key()),
        Err(NeedError::Walk(WalkError::Fetch("invalid cursor")))
    );
}

/// A list too large for the store, whose server rejects a cursor the held walk reaches: the
/// walk starts over once, as any. The restart of a refused list forgot that it had, and the
/// two restarts took turns for as long as the host ran, the list never answered.
#[test]
fn a_rejected_cursor_in_a_list_too_large_to_store_starts_the_walk_over_once() {
    let (t0, mut s) = (Instant::now(), store_with(700));
    let mut server = Server::new(&["a", "b", "c", "d", "e", "f", "g", "h"], 2, "");
    let mut r = Refresher::new(TOOLS);
    r.need(t0, &mut s, &key()).expect("need");
    let mut fetches = 0;
    while let Some(c) = r.poll_fetch() {
        fetches += 1;
        assert!(fetches < 50, "the walk does not end: {:?}", server.asked());
        let c = c.map(str::to_owned);
        if c.as_deref() == Some("p3") {
            server.asked.push("p3 rejected".into());
            r.cursor_rejected(t0, &mut s, &key(), "invalid cursor");
            continue;
        }
        let page = server.page(c.as_deref());
        r.on_page(t0, &mut s, &key(), page, None);
    }
    assert_eq!(server.asked().iter().filter(|c| *c == "p3 rejected").count(), 2);
    assert_eq!(
        r.need(t0, &mut s, &key()),
        Err(NeedError::Walk(WalkError::Fetch("invalid cursor")))
    );
}

/// Issue 21: a list the store refuses is held for one use, but not without end: past
/// `MAX_HELD_FACTOR` times the store's cap the held pages are dropped and the need fails
/// with `TooLarge`, long before the page cap.
#[test]
fn pages_held_for_one_use_are_bounded_in_bytes() {
    let (t0, mut s) = (Instant::now(), store_with(700));
    let names: Vec<String> = (0..400).map(|i| format!("tool{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut server = Server::new(&names, 1, "");
    let mut r = Refresher::new(TOOLS);
    r.need(t0, &mut s, &key()).expect("need");
    drive(&mut r, &mut s, &mut server, t0);
    let asked = server.asked().len();
    assert!(asked < 100, "{asked} pages fetched");
    assert_eq!(
        r.need(t0, &mut s, &key()),
        Err(NeedError::Walk(WalkError::TooLarge { max_bytes: 700 * MAX_HELD_FACTOR }))
    );
    assert_eq!((r.one_use.len(), r.one_use_bytes, s.entries()), (0, 0, 0));
}

/// A list whose walk is on is not evicted to make room for another list of its holder (the
/// same server's prompts, another principal's lane): the walk's first page went, the last
/// page came, and the need that waited got no list (the host saw `NotReady`: no first page
/// to join) after a listing that succeeded.
#[test]
fn a_list_whose_walk_is_on_is_not_evicted_for_another() {
    let t0 = Instant::now();
    let config = StoreConfig { max_entries: 2, ..StoreConfig::default() };
    let mut s = Store::new(config).unwrap();
    let mut server = Server::new(&["a", "b"], 1, "");
    let mut r = Refresher::new(TOOLS);
    assert_eq!(r.need(t0, &mut s, &key()), Ok(Answer::Waiting));
    let first = r.poll_fetch().unwrap().map(str::to_owned);
    r.on_page(t0, &mut s, &key(), server.page(first.as_deref()), None);
    // The same holder's prompts, two pages, stored while the tools' second page is out.
    const PROMPTS: CatalogKind = CatalogKind::Prompts;
    let prompts = [
        (None, r#"{"prompts":[{"name":"x"}],"nextCursor":"q"}"#),
        (Some("q"), r#"{"prompts":[{"name":"y"}]}"#),
    ];
    for (cursor, json) in prompts {
        let Ok(Begin::Fetch(token)) = s.begin_refresh(&key(), PROMPTS, cursor) else {
            panic!("a prompts page to fetch")
        };
        let page = parse_page(PROMPTS, json).unwrap();
        let _ = s.finish_refresh(t0, token, RefreshOutcome::Page { page, carried_input: false });
    }
    let second = r.poll_fetch().unwrap().map(str::to_owned);
    r.on_page(t0, &mut s, &key(), server.page(second.as_deref()), None);
    match r.need(t0, &mut s, &key()) {
        Ok(Answer::Cached) => assert_eq!(names(&mut s, t0), "a,b"),
        Ok(Answer::OneUse) => {
            let (items, _) = r.one_use_items(t0, &s, &key()).expect("the walk's answer");
            assert_eq!(items.iter().map(|i| i.id()).collect::<Vec<_>>(), ["a", "b"]);
        }
        other => panic!("{other:?}"),
    }
}
