//! The bounded cache of list pages: expiry, sharing, stale-if-error and single-flight.
//!
//! The store holds no I/O and reads no clock; the engine calls it with `now` and does the
//! fetching. One entry is one page of one list, keyed by ([`Partition`], [`CatalogKind`],
//! cursor), so each page has its own expiry (spec: "each page of a paginated list is cached on
//! its own"). The pages of one list are evicted together, least recently used first, because a
//! list with a hole in the middle has to be walked again anyway.
//!
//! # Rules
//!
//! - **Expiry** = received + min(`ttlMs`, [`StoreConfig::max_ttl`]). `ttlMs: 0` is not cached
//!   (and drops the page it would have replaced); a missing or malformed `ttlMs` gets
//!   [`StoreConfig::default_ttl`], which is itself capped: nothing lives forever.
//! - **Sharing.** `cacheScope: "public"` pages live in the key's public partition, readable by
//!   every principal of that server context and tenant; anything else stays private to one
//!   principal, scope set and tenant ([`CacheKey::partition`]). A lookup reads its private
//!   partition first, then the public one. Storing a page in one partition drops the same
//!   page from the other, so the server's latest word on scope is the one that counts.
//! - **Never cached:** results of requests that carried `inputResponses` or `requestState`.
//! - **Invalid cursor:** every page of that list is dropped, in both partitions.
//! - **Stale-if-error.** A page past its expiry, or marked stale by a change notification,
//!   is not served: the caller refreshes. If that refresh fails, the old page is served,
//!   flagged stale, until `max_stale` after it went stale; after that the lookup is
//!   [`StoreError::StaleTooLong`].
//! - **Single-flight.** [`Store::begin_refresh`] hands out one [`RefreshToken`] per
//!   (key, kind, cursor); others are told to wait. [`Store::mark_stale`] revokes the tokens
//!   of the list, so a fetch that raced the change is not stored as fresh.
//! - **Bounds.** At most `max_entries` pages and `max_bytes` bytes (a deterministic estimate of
//!   heap use). Storing evicts least-recently-used lists of the server (in its tenant) that
//!   holds the most (ties against the others), so one server's long listings push out its own
//!   lists before anyone else's. One list that alone exceeds a bound, or that would make its
//!   server the largest holder with nothing of its own left to evict, is refused with a typed
//!   error, never truncated (the walk still answers from the pages it holds).
//!
//! Lookups borrow: a hit returns references into the store and allocates nothing.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use super::hints::{CacheScope, TtlHint};
use super::key::{CacheKey, Holder, Partition};
use super::listing::{CatalogKind, Item, ParsedPage};

/// The longest TTL or stale allowance accepted, so `now + ttl` can never overflow.
const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Fixed cost counted per page besides its strings, so many tiny pages still fill the cap.
const PAGE_OVERHEAD: usize = 128;

/// Limits and lifetimes of a [`Store`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoreConfig {
    /// Pages held at most, over all lists.
    pub(crate) max_entries: usize,
    /// Bytes held at most, over all lists.
    pub(crate) max_bytes: usize,
    /// TTL for a result whose `ttlMs` is missing or malformed.
    pub(crate) default_ttl: Duration,
    /// Cap on every TTL, whatever the server says.
    pub(crate) max_ttl: Duration,
    /// How long past going stale a page may be served after a failed refresh.
    pub(crate) max_stale: Duration,
    /// Refreshes in flight at most.
    pub(crate) max_refreshes: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            max_entries: 1024,
            max_bytes: 8 << 20,
            default_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(3600),
            max_stale: Duration::from_secs(300),
            max_refreshes: 64,
        }
    }
}

/// A [`StoreConfig`] that cannot work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreConfigError {
    /// A capacity is zero.
    Zero(&'static str),
    /// A duration is over a year.
    TooLong(&'static str),
    /// `default_ttl` is longer than `max_ttl`.
    DefaultOverMax,
}

impl fmt::Display for StoreConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreConfigError::Zero(field) => write!(f, "cache config: `{field}` must be above 0"),
            StoreConfigError::TooLong(field) => {
                write!(f, "cache config: `{field}` must be at most 366 days")
            }
            StoreConfigError::DefaultOverMax => {
                f.write_str("cache config: `default_ttl` must not exceed `max_ttl`")
            }
        }
    }
}

impl std::error::Error for StoreConfigError {}

/// A cache operation that cannot be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreError {
    /// One list alone would exceed the byte cap.
    CatalogTooLarge { bytes: usize, max_bytes: usize },
    /// One list alone would exceed the entry cap.
    TooManyPages { pages: usize, max_entries: usize },
    /// Stored, the list would make its server (in its tenant) the store's largest holder
    /// with no list of its own left to evict: it would push out other servers' lists.
    CrowdsOthersOut { bytes: usize, pages: usize },
    /// The refresh table is full.
    TooManyRefreshes { max: usize },
    /// The page is stale past the allowance and its refresh failed.
    StaleTooLong { stale_for: Duration, max_stale: Duration },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::CatalogTooLarge { bytes, max_bytes } => {
                write!(f, "catalog of {bytes} bytes exceeds the cache cap of {max_bytes}")
            }
            StoreError::TooManyPages { pages, max_entries } => {
                write!(f, "catalog of {pages} pages exceeds the cache cap of {max_entries}")
            }
            StoreError::CrowdsOthersOut { bytes, pages } => write!(
                f,
                "catalog of {bytes} bytes in {pages} pages would push other servers' catalogs \
                 out of the cache"
            ),
            StoreError::TooManyRefreshes { max } => {
                write!(f, "{max} catalog refreshes already in flight")
            }
            StoreError::StaleTooLong { stale_for, max_stale } => write!(
                f,
                "cached catalog stale for {} ms, past the {} ms allowed after a failed refresh",
                stale_for.as_millis(),
                max_stale.as_millis()
            ),
        }
    }
}

impl std::error::Error for StoreError {}

/// Counters, readable by the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CacheStats {
    /// Lookups answered fresh.
    pub(crate) hits: u64,
    /// Lookups that found nothing usable (absent, expired, invalidated or too stale).
    pub(crate) misses: u64,
    /// Lookups answered with a stale page after a failed refresh.
    pub(crate) stale_serves: u64,
    /// Page refreshes started (tokens handed out).
    pub(crate) refreshes: u64,
    /// Refresh walks started ([`Store::count_walk`]): one per catalog refresh, however many
    /// pages it fetches.
    pub(crate) walks: u64,
    /// Pages evicted to make room.
    pub(crate) evictions: u64,
}

/// A cached page and its lifetime.
#[derive(Debug)]
pub(crate) struct CachedPage {
    cursor: Option<Box<str>>,
    page: ParsedPage,
    received: Instant,
    expires: Instant,
    /// When a change notification made it stale.
    invalidated: Option<Instant>,
    /// The last refresh failed, so it may be served stale.
    refresh_failed: bool,
    bytes: usize,
}

impl CachedPage {
    /// The cursor this page was fetched with (`None` for the first page).
    pub(crate) fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// Items sorted by id.
    pub(crate) fn items(&self) -> &[Item] {
        &self.page.items
    }

    /// The cursor of the next page; `None` on the last page.
    pub(crate) fn next_cursor(&self) -> Option<&str> {
        self.page.next_cursor.as_deref()
    }

    /// The page as it was parsed (a walk holds a copy when a change notice would take it
    /// from the need that waits on it).
    pub(crate) fn parsed(&self) -> &ParsedPage {
        &self.page
    }

    pub(crate) fn received(&self) -> Instant {
        self.received
    }

    pub(crate) fn expires(&self) -> Instant {
        self.expires
    }

    fn is_fresh(&self, now: Instant) -> bool {
        self.invalidated.is_none() && now < self.expires
    }

    fn stale_since(&self) -> Instant {
        match self.invalidated {
            Some(t) if t < self.expires => t,
            _ => self.expires,
        }
    }
}

/// What a page lookup found.
#[cfg(test)]
#[derive(Debug)]
pub(crate) enum Lookup<'a> {
    Fresh(&'a CachedPage),
    /// The last refresh failed; served stale, `stale_for` past its freshness.
    Stale {
        page: &'a CachedPage,
        stale_for: Duration,
    },
    /// Known but expired or invalidated: refresh it.
    Expired,
    Miss,
}

/// What an item lookup across the pages of a list found.
#[derive(Debug)]
pub(crate) enum ItemLookup<'a> {
    Fresh(&'a Item),
    /// Found on a page served stale after a failed refresh (the oldest such page counts).
    Stale {
        item: &'a Item,
        // The host serves the item either way; the tests and fuzz targets check the age.
        #[cfg_attr(not(any(test, fuzzing)), allow(dead_code))]
        stale_for: Duration,
    },
    /// Every page is usable and none has it.
    Absent,
    /// This page is missing, expired or invalidated: refresh it, then ask again.
    Refresh {
        // The host's walk finds the page itself; the tests check which one.
        #[cfg_attr(not(test), allow(dead_code))]
        cursor: Option<&'a str>,
    },
}

/// What a whole-list lookup found.
#[derive(Debug)]
pub(crate) enum ListLookup<'a> {
    /// Every page, in cursor order; `stale_for` is set when any is served stale after a
    /// failed refresh (the stalest counts).
    Pages { pages: Vec<&'a CachedPage>, stale_for: Option<Duration> },
    /// This page is missing, expired or invalidated: refresh it, then ask again.
    Refresh {
        // As in [`ItemLookup::Refresh`].
        #[cfg_attr(not(test), allow(dead_code))]
        cursor: Option<&'a str>,
    },
}

/// Whether a whole list can be served, as [`Store::list_state`] sees it without counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListState {
    /// Every page fresh.
    Fresh,
    /// Servable, but some page only stale after a failed refresh.
    Stale,
    /// Some page is missing, expired or invalidated: refresh.
    Refresh,
    /// Some page is stale past the allowance.
    TooStale(Duration),
}

/// The answer of [`Store::begin_refresh`].
#[derive(Debug)]
pub(crate) enum Begin {
    /// Fetch the page, then call [`Store::finish_refresh`] with this token.
    Fetch(RefreshToken),
    /// Someone is fetching it; look it up again after their refresh finishes.
    Wait,
}

/// The right to store one fetched page. Not `Clone`: one fetch, one result.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(crate) struct RefreshToken {
    id: u64,
    key: CacheKey,
    kind: CatalogKind,
    cursor: Option<Box<str>>,
}

impl RefreshToken {
    /// The cursor to send (`None` for the first page).
    pub(crate) fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// The key the refresh was begun for.
    pub(crate) fn key(&self) -> &CacheKey {
        &self.key
    }
}

/// How a fetch ended.
#[derive(Debug)]
pub(crate) enum RefreshOutcome {
    /// The server answered. `carried_input` is true when the request carried
    /// `inputResponses` or `requestState`: such results are never cached.
    Page { page: ParsedPage, carried_input: bool },
    /// The fetch failed (transport, timeout, server error): keep the old page for
    /// stale-if-error.
    Failed,
    /// The server rejected the cursor (`-32602`): drop every page of the list.
    InvalidCursor,
}

/// What [`Store::finish_refresh`] did.
#[derive(Debug)]
pub(crate) enum Finished {
    /// Stored; look it up.
    Stored,
    /// Not cached, by rule; the page is handed back for this one use.
    NotStored {
        page: ParsedPage,
        // Either reason means the same to the walk (hold the page for this use); the
        // tests check which one applied.
        #[cfg_attr(not(test), allow(dead_code))]
        why: NotStored,
    },
    /// Refused because one list alone would break a bound, or would crowd other servers'
    /// lists out ([`StoreError::CrowdsOthersOut`]); the page is handed back.
    /// (The walk starts over holding every page, so it reads neither; the tests do.)
    Rejected {
        #[cfg_attr(not(test), allow(dead_code))]
        page: ParsedPage,
        #[cfg_attr(not(test), allow(dead_code))]
        error: StoreError,
    },
    /// The fetch failed; the old page, if any, may be served stale until this instant.
    Failed {
        // The lookups apply the allowance themselves; the tests check the instant.
        #[cfg_attr(not(test), allow(dead_code))]
        servable_until: Option<Instant>,
    },
    /// The cursor was invalid; the list is gone.
    ListDropped,
    /// The token was revoked by [`Store::mark_stale`] or [`Store::drop_list`]; the result
    /// raced a change and was not stored.
    Cancelled {
        // The next need walks again; the tests check what came back.
        #[cfg_attr(not(test), allow(dead_code))]
        page: Option<ParsedPage>,
    },
}

/// Why a page was not cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotStored {
    /// `ttlMs` was 0, or the effective TTL is zero.
    ZeroTtl,
    /// The request carried `inputResponses` or `requestState`.
    CarriedInput,
}

/// What [`Store::mark_stale`] touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Invalidated {
    pub(crate) pages: usize,
    pub(crate) cancelled_refreshes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ListKey {
    partition: Partition,
    kind: CatalogKind,
}

#[derive(Debug)]
struct List {
    pages: Vec<CachedPage>,
    last_used: u64,
    bytes: usize,
}

#[derive(Debug)]
struct Flight {
    id: u64,
    key: CacheKey,
    kind: CatalogKind,
    cursor: Option<Box<str>>,
}

/// The cache of list pages for any number of servers and principals.
#[derive(Debug)]
pub(crate) struct Store {
    config: StoreConfig,
    lists: HashMap<ListKey, List>,
    entries: usize,
    bytes: usize,
    /// Use counter for LRU order (not time: eviction must not depend on clock resolution).
    tick: u64,
    flights: Vec<Flight>,
    next_flight: u64,
    stats: CacheStats,
}

/// What one [`Holder`] has in the store.
#[derive(Debug, Default)]
struct Held {
    bytes: usize,
    pages: usize,
}

impl Held {
    fn add(&mut self, bytes: usize, pages: usize) {
        self.bytes += bytes;
        self.pages += pages;
    }
}

/// Where a page was found, without borrowing.
#[derive(Debug, Clone, Copy)]
struct Found {
    list: ListKey,
    index: usize,
}

enum Walk {
    Done,
    /// The page after this one (or the first, for `None`) must be fetched.
    NeedPage(Option<Found>),
    TooStale(Duration),
}

enum State {
    Fresh,
    Stale(Duration),
    Expired,
    TooStale(Duration),
}

impl Store {
    /// Checks the config once.
    pub(crate) fn new(config: StoreConfig) -> Result<Self, StoreConfigError> {
        if config.max_entries == 0 {
            return Err(StoreConfigError::Zero("max_entries"));
        }
        if config.max_bytes == 0 {
            return Err(StoreConfigError::Zero("max_bytes"));
        }
        if config.max_refreshes == 0 {
            return Err(StoreConfigError::Zero("max_refreshes"));
        }
        for (d, field) in [(config.max_ttl, "max_ttl"), (config.max_stale, "max_stale")] {
            if d > MAX_DURATION {
                return Err(StoreConfigError::TooLong(field));
            }
        }
        if config.default_ttl > config.max_ttl {
            return Err(StoreConfigError::DefaultOverMax);
        }
        Ok(Store {
            config,
            lists: HashMap::new(),
            entries: 0,
            bytes: 0,
            tick: 0,
            flights: Vec::new(),
            next_flight: 0,
            stats: CacheStats::default(),
        })
    }

    pub(crate) fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Pages held.
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    /// Bytes held (the estimate the cap applies to).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Refreshes in flight.
    #[cfg(test)]
    pub(crate) fn refreshes_in_flight(&self) -> usize {
        self.flights.len()
    }

    /// Refreshes in flight for this key and kind (single-flight: at most one per cursor).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn refreshes_for(&self, key: &CacheKey, kind: CatalogKind) -> usize {
        self.flights.iter().filter(|f| f.key == *key && f.kind == kind).count()
    }

    pub(crate) fn config(&self) -> StoreConfig {
        self.config
    }

    /// What [`Store::list_pages`] would find, without counting or touching anything: for a
    /// caller that decides first and borrows the answer after.
    pub(crate) fn list_state(&self, now: Instant, key: &CacheKey, kind: CatalogKind) -> ListState {
        match self.walk(now, key, kind, |_, _| {}) {
            (Walk::Done, None) => ListState::Fresh,
            (Walk::Done, Some(_)) => ListState::Stale,
            (Walk::NeedPage(_), _) => ListState::Refresh,
            (Walk::TooStale(d), _) => ListState::TooStale(d),
        }
    }

    /// The page for `cursor` if it is fresh, private partition first; counts nothing.
    pub(crate) fn fresh_page(
        &self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
        cursor: Option<&str>,
    ) -> Option<&CachedPage> {
        let (_, page) = self.candidates(key, kind).locate(cursor)?;
        page.is_fresh(now).then_some(page)
    }

    /// The page for `cursor` if it may be served (fresh, or stale after a failed refresh within
    /// `max_stale`), and its staleness; counts nothing and touches nothing.
    pub(crate) fn servable_page(
        &self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
        cursor: Option<&str>,
    ) -> Option<(&CachedPage, Option<Duration>)> {
        let (_, page) = self.candidates(key, kind).locate(cursor)?;
        match page_state(page, now, self.config.max_stale) {
            State::Fresh => Some((page, None)),
            State::Stale(d) => Some((page, Some(d))),
            State::Expired | State::TooStale(_) => None,
        }
    }

    /// The page for `cursor` whatever its expiry, private partition first, unless a change
    /// notice invalidated it; counts nothing.
    pub(crate) fn stored_page(
        &self,
        key: &CacheKey,
        kind: CatalogKind,
        cursor: Option<&str>,
    ) -> Option<&CachedPage> {
        let (_, page) = self.candidates(key, kind).locate(cursor)?;
        page.invalidated.is_none().then_some(page)
    }

    /// Looks up one page (`cursor` `None` for the first), private partition first.
    #[cfg(test)]
    pub(crate) fn lookup(
        &mut self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
        cursor: Option<&str>,
    ) -> Result<Lookup<'_>, StoreError> {
        let max_stale = self.config.max_stale;
        let Some((found, state)) = self
            .candidates(key, kind)
            .locate(cursor)
            .map(|(found, page)| (found, page_state(page, now, max_stale)))
        else {
            self.stats.misses += 1;
            return Ok(Lookup::Miss);
        };
        match state {
            State::Fresh => {
                self.stats.hits += 1;
                Ok(Lookup::Fresh(self.touch(found)))
            }
            State::Stale(stale_for) => {
                self.stats.stale_serves += 1;
                Ok(Lookup::Stale { page: self.touch(found), stale_for })
            }
            State::Expired => {
                self.stats.misses += 1;
                Ok(Lookup::Expired)
            }
            State::TooStale(stale_for) => {
                self.stats.misses += 1;
                Err(StoreError::StaleTooLong { stale_for, max_stale: self.config.max_stale })
            }
        }
    }

    /// Finds the item `id` by walking the list's pages in cursor order; the last page that
    /// has it wins, as in [`super::listing`]. Counts one hit, stale serve or miss per call.
    pub(crate) fn find_item(
        &mut self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
        id: &str,
    ) -> Result<ItemLookup<'_>, StoreError> {
        // The walk only reads and keeps positions (`Found` is `Copy`), not references, so the
        // counters can be updated before the answer borrows the store again.
        let mut hit: Option<(Found, usize)> = None;
        let (walk, worst_stale) = self.walk(now, key, kind, |found, page| {
            if let Ok(i) = page.page.items.binary_search_by(|it| it.id().cmp(id)) {
                hit = Some((found, i));
            }
        });
        match walk {
            Walk::Done => {}
            Walk::NeedPage(prev) => {
                self.stats.misses += 1;
                let cursor = prev.and_then(|p| self.page(p).next_cursor());
                return Ok(ItemLookup::Refresh { cursor });
            }
            Walk::TooStale(stale_for) => {
                self.stats.misses += 1;
                return Err(StoreError::StaleTooLong {
                    stale_for,
                    max_stale: self.config.max_stale,
                });
            }
        }
        let Some((found, i)) = hit else {
            self.stats.misses += 1;
            return Ok(ItemLookup::Absent);
        };
        let stats = &mut self.stats;
        match worst_stale {
            None => stats.hits += 1,
            Some(_) => stats.stale_serves += 1,
        }
        let page = self.touch(found);
        // `i` came from a search of this very page, so `get` finds it; `Absent` is only the
        // type's fallback.
        let Some(item) = page.page.items.get(i) else { return Ok(ItemLookup::Absent) };
        Ok(match worst_stale {
            None => ItemLookup::Fresh(item),
            Some(stale_for) => ItemLookup::Stale { item, stale_for },
        })
    }

    /// Every page of the list in cursor order, for reading a whole catalog (`Host::tool_catalog`,
    /// the digest for a diff). Counts one hit, stale serve or miss per call.
    pub(crate) fn list_pages(
        &mut self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
    ) -> Result<ListLookup<'_>, StoreError> {
        let mut order: Vec<Found> = Vec::new();
        let (walk, worst_stale) = self.walk(now, key, kind, |found, _| order.push(found));
        match walk {
            Walk::Done => {}
            Walk::NeedPage(prev) => {
                self.stats.misses += 1;
                let cursor = prev.and_then(|p| self.page(p).next_cursor());
                return Ok(ListLookup::Refresh { cursor });
            }
            Walk::TooStale(stale_for) => {
                self.stats.misses += 1;
                return Err(StoreError::StaleTooLong {
                    stale_for,
                    max_stale: self.config.max_stale,
                });
            }
        }
        match worst_stale {
            None => self.stats.hits += 1,
            Some(_) => self.stats.stale_serves += 1,
        }
        for found in &order {
            self.touch(*found);
        }
        let pages = order.iter().map(|f| self.page(*f)).collect();
        Ok(ListLookup::Pages { pages, stale_for: worst_stale })
    }

    /// When the newest page of the list was received, if the whole list can be served;
    /// counts nothing and allocates nothing. A change of it means a page of the list was
    /// stored anew: the newest, since pages live by their own `ttlMs` and another context's
    /// walk may fetch only the one that expired (the oldest stayed, and its refresh went
    /// unseen).
    pub(crate) fn list_received(
        &self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
    ) -> Option<Instant> {
        let mut newest: Option<Instant> = None;
        let (walk, _) = self.walk(now, key, kind, |_, page| {
            let at = page.received();
            newest = Some(newest.map_or(at, |n| n.max(at)));
        });
        matches!(walk, Walk::Done).then_some(newest).flatten()
    }

    /// Follows the list from its first page along `nextCursor`, calling `visit` on each usable
    /// page, until the last page, a page that must be fetched, or one too stale to serve.
    /// Returns how it ended and the largest staleness of the pages visited.
    fn walk(
        &self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
        mut visit: impl FnMut(Found, &CachedPage),
    ) -> (Walk, Option<Duration>) {
        let max_stale = self.config.max_stale;
        let lists = self.candidates(key, kind);
        let mut prev: Option<(Found, &CachedPage)> = None;
        let mut worst_stale: Option<Duration> = None;
        // A server that loops its cursors cannot make this spin: at most one step per page.
        for _ in 0..=self.entries {
            let cursor = prev.and_then(|(_, p)| p.next_cursor());
            let Some((found, page)) = lists.locate(cursor) else {
                return (Walk::NeedPage(prev.map(|(f, _)| f)), worst_stale);
            };
            match page_state(page, now, max_stale) {
                State::Fresh => {}
                State::Stale(d) => worst_stale = Some(worst_stale.map_or(d, |w| w.max(d))),
                State::Expired => return (Walk::NeedPage(prev.map(|(f, _)| f)), worst_stale),
                State::TooStale(d) => return (Walk::TooStale(d), worst_stale),
            }
            visit(found, page);
            if page.next_cursor().is_none() {
                break;
            }
            prev = Some((found, page));
        }
        (Walk::Done, worst_stale)
    }

    /// Asks to refresh a page. Only one caller per (key, kind, cursor) gets to fetch.
    pub(crate) fn begin_refresh(
        &mut self,
        key: &CacheKey,
        kind: CatalogKind,
        cursor: Option<&str>,
    ) -> Result<Begin, StoreError> {
        let busy = self
            .flights
            .iter()
            .any(|f| f.key == *key && f.kind == kind && f.cursor.as_deref() == cursor);
        if busy {
            return Ok(Begin::Wait);
        }
        if self.flights.len() >= self.config.max_refreshes {
            return Err(StoreError::TooManyRefreshes { max: self.config.max_refreshes });
        }
        let id = self.next_flight;
        self.next_flight += 1;
        let cursor: Option<Box<str>> = cursor.map(Box::from);
        self.flights.push(Flight { id, key: *key, kind, cursor: cursor.clone() });
        self.stats.refreshes += 1;
        Ok(Begin::Fetch(RefreshToken { id, key: *key, kind, cursor }))
    }

    /// Gives a refresh back unfinished (its server is gone): nothing is recorded of the list,
    /// and the next caller for the page fetches it.
    pub(crate) fn release_refresh(&mut self, token: RefreshToken) {
        self.flights.retain(|f| f.id != token.id);
    }

    /// Records how a fetch ended.
    pub(crate) fn finish_refresh(
        &mut self,
        now: Instant,
        token: RefreshToken,
        outcome: RefreshOutcome,
    ) -> Finished {
        let Some(pos) = self.flights.iter().position(|f| f.id == token.id) else {
            return Finished::Cancelled {
                page: match outcome {
                    RefreshOutcome::Page { page, .. } => Some(page),
                    _ => None,
                },
            };
        };
        self.flights.swap_remove(pos);
        let RefreshToken { key, kind, cursor, .. } = token;
        match outcome {
            RefreshOutcome::Failed => self.refresh_failed(now, &key, kind, cursor.as_deref()),
            RefreshOutcome::InvalidCursor => {
                self.drop_list(&key, kind);
                Finished::ListDropped
            }
            RefreshOutcome::Page { page, carried_input: true } => {
                Finished::NotStored { page, why: NotStored::CarriedInput }
            }
            RefreshOutcome::Page { page, carried_input: false } => {
                self.store(now, &key, kind, cursor, page)
            }
        }
    }

    /// A change notification for this list: every page of it (both partitions of `key`)
    /// becomes stale now, and refreshes in flight for it in this server context are revoked,
    /// whichever principal started them (their result might be shared).
    pub(crate) fn mark_stale(
        &mut self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
    ) -> Invalidated {
        let mut pages = 0;
        for scope in [CacheScope::Private, CacheScope::Public] {
            let lk = ListKey { partition: key.partition(scope), kind };
            if let Some(list) = self.lists.get_mut(&lk) {
                for p in &mut list.pages {
                    // A failed refresh before the notice let the old page be served stale;
                    // after it, the page is known to be out of date: refreshed, not served
                    // (until a refresh fails again).
                    p.refresh_failed = false;
                    if p.invalidated.is_none() {
                        p.invalidated = Some(now);
                        pages += 1;
                    }
                }
            }
        }
        let cancelled_refreshes = self.revoke(key, kind);
        Invalidated { pages, cancelled_refreshes }
    }

    /// Counts one refresh walk (see [`super::refresh`]).
    pub(crate) fn count_walk(&mut self) {
        self.stats.walks += 1;
    }

    /// A refresh walk of the list failed: every page of it that is not fresh may now be served
    /// stale (within `max_stale`), not only the page whose fetch failed, since the walk never
    /// reached the others.
    pub(crate) fn walk_failed(&mut self, now: Instant, key: &CacheKey, kind: CatalogKind) {
        for scope in [CacheScope::Private, CacheScope::Public] {
            let lk = ListKey { partition: key.partition(scope), kind };
            if let Some(list) = self.lists.get_mut(&lk) {
                for p in list.pages.iter_mut().filter(|p| !p.is_fresh(now)) {
                    p.refresh_failed = true;
                }
            }
        }
    }

    /// Drops every page of the list in both partitions of `key` (an invalid cursor) and
    /// revokes its refreshes.
    pub(crate) fn drop_list(&mut self, key: &CacheKey, kind: CatalogKind) {
        for scope in [CacheScope::Private, CacheScope::Public] {
            self.remove_list(&ListKey { partition: key.partition(scope), kind });
        }
        self.revoke(key, kind);
    }

    /// The fresh pages of the list in one partition of `key` (a persistent store's entry), in
    /// no particular order; empty unless the list's every page is fresh.
    pub(crate) fn fresh_pages(
        &self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
        scope: CacheScope,
    ) -> Vec<&CachedPage> {
        if self.list_state(now, key, kind) != ListState::Fresh {
            return Vec::new();
        }
        let lk = ListKey { partition: key.partition(scope), kind };
        self.lists
            .get(&lk)
            .map_or_else(Vec::new, |l| l.pages.iter().filter(|p| p.is_fresh(now)).collect())
    }

    /// Whether memory holds a list of `key`'s catalog in the partition `scope` gives.
    pub(crate) fn has_list(&self, key: &CacheKey, kind: CatalogKind, scope: CacheScope) -> bool {
        self.lists.contains_key(&ListKey { partition: key.partition(scope), kind })
    }

    /// Stores a page a persistent store kept; its hints carry the lifetime it has left and its
    /// `cacheScope` (the TTL is capped at `max_ttl`, as every TTL). `true` when stored.
    pub(crate) fn restore(
        &mut self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
        cursor: Option<&str>,
        page: ParsedPage,
    ) -> bool {
        matches!(self.store(now, key, kind, cursor.map(Box::from), page), Finished::Stored)
    }

    /// Drops the pages of `key`'s list that its chain from the first page no longer reaches,
    /// once the whole chain is there: a server whose cursors change between listings (signed
    /// or position-derived ones), or a list that shrank, left its old pages behind at every
    /// refresh, counted against the bounds until they evicted every other catalog.
    pub(crate) fn prune_unreachable(&mut self, now: Instant, key: &CacheKey, kind: CatalogKind) {
        let mut reached: Vec<(ListKey, usize)> = Vec::new();
        let (walk, _) =
            self.walk(now, key, kind, |found, _| reached.push((found.list, found.index)));
        if !matches!(walk, Walk::Done) {
            return;
        }
        for scope in [CacheScope::Private, CacheScope::Public] {
            let lk = ListKey { partition: key.partition(scope), kind };
            let Some(list) = self.lists.get_mut(&lk) else { continue };
            let (mut index, mut pages, mut bytes) = (0, 0, 0);
            list.pages.retain(|p| {
                let keep = reached.contains(&(lk, index));
                index += 1;
                if !keep {
                    pages += 1;
                    bytes += p.bytes;
                }
                keep
            });
            list.bytes -= bytes;
            self.entries -= pages;
            self.bytes -= bytes;
            if list.pages.is_empty() {
                self.lists.remove(&lk);
            }
        }
    }

    /// Drops pages that can no longer be served even stale, to give memory back early.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn purge(&mut self, now: Instant) {
        let max_stale = self.config.max_stale;
        let mut freed = (0, 0);
        self.lists.retain(|_, list| {
            list.pages.retain(|p| {
                let keep =
                    p.is_fresh(now) || now.saturating_duration_since(p.stale_since()) <= max_stale;
                if !keep {
                    freed.0 += 1;
                    freed.1 += p.bytes;
                    list.bytes -= p.bytes;
                }
                keep
            });
            !list.pages.is_empty()
        });
        self.entries -= freed.0;
        self.bytes -= freed.1;
    }

    fn revoke(&mut self, key: &CacheKey, kind: CatalogKind) -> usize {
        let context = key.partition(CacheScope::Public);
        let before = self.flights.len();
        self.flights
            .retain(|f| !(f.kind == kind && f.key.partition(CacheScope::Public) == context));
        before - self.flights.len()
    }

    fn refresh_failed(
        &mut self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
        cursor: Option<&str>,
    ) -> Finished {
        let Some(found) = self.locate(key, kind, cursor) else {
            return Finished::Failed { servable_until: None };
        };
        let max_stale = self.config.max_stale;
        let page = self.page_mut(found);
        // A page still fresh stays fresh: an optional early refresh failing makes it no older.
        if !page.is_fresh(now) {
            page.refresh_failed = true;
        }
        Finished::Failed { servable_until: page.stale_since().checked_add(max_stale) }
    }

    fn store(
        &mut self,
        now: Instant,
        key: &CacheKey,
        kind: CatalogKind,
        cursor: Option<Box<str>>,
        page: ParsedPage,
    ) -> Finished {
        let ttl = match page.hints.ttl {
            TtlHint::Millis(ms) => Duration::from_millis(ms),
            TtlHint::Unspecified => self.config.default_ttl,
        }
        .min(self.config.max_ttl);
        let scope = page.hints.scope;
        // Whatever happens next, this page's older copies are superseded.
        let other = match scope {
            CacheScope::Public => CacheScope::Private,
            CacheScope::Private => CacheScope::Public,
        };
        self.remove_page(&ListKey { partition: key.partition(other), kind }, cursor.as_deref());
        let target = ListKey { partition: key.partition(scope), kind };
        let expires = match now.checked_add(ttl) {
            Some(t) if !ttl.is_zero() => t,
            // checked_add cannot fail for ttl <= MAX_DURATION; treat it as "do not cache".
            _ => {
                self.remove_page(&target, cursor.as_deref());
                return Finished::NotStored { page, why: NotStored::ZeroTtl };
            }
        };
        let bytes = page_bytes(cursor.as_deref(), &page);
        let (old_bytes, old_pages, replaced) = match self.lists.get(&target) {
            Some(list) => {
                let same = list.pages.iter().find(|p| p.cursor == cursor).map(|p| p.bytes);
                (list.bytes - same.unwrap_or(0), list.pages.len(), same.is_some())
            }
            None => (0, 0, false),
        };
        let list_bytes = old_bytes + bytes;
        let list_pages = if replaced { old_pages } else { old_pages + 1 };
        let error = if list_bytes > self.config.max_bytes {
            Some(StoreError::CatalogTooLarge {
                bytes: list_bytes,
                max_bytes: self.config.max_bytes,
            })
        } else if list_pages > self.config.max_entries {
            Some(StoreError::TooManyPages {
                pages: list_pages,
                max_entries: self.config.max_entries,
            })
        } else {
            None
        };
        if let Some(error) = error {
            // Half a catalog is worse than none: the whole list goes.
            self.remove_list(&target);
            return Finished::Rejected { page, error };
        }
        self.remove_page(&target, cursor.as_deref());
        if !self.make_room(&target, bytes) {
            // Its holder would hold the most and every other list of its own is gone already
            // (or is being walked): the rest of the store is other servers' (or tenants')
            // share, or a walk's to join, not this list's.
            self.remove_list(&target);
            let error = StoreError::CrowdsOthersOut { bytes: list_bytes, pages: list_pages };
            return Finished::Rejected { page, error };
        }
        self.tick += 1;
        let list = self.lists.entry(target).or_insert_with(|| List {
            pages: Vec::new(),
            last_used: 0,
            bytes: 0,
        });
        list.last_used = self.tick;
        list.bytes += bytes;
        list.pages.push(CachedPage {
            cursor,
            page,
            received: now,
            expires,
            invalidated: None,
            refresh_failed: false,
            bytes,
        });
        self.entries += 1;
        self.bytes += bytes;
        Finished::Stored
    }

    /// Whether a walk of `list` is on: a page of its key and kind is being fetched.
    fn walk_on(&self, list: &ListKey) -> bool {
        self.flights.iter().any(|f| {
            f.kind == list.kind
                && [CacheScope::Private, CacheScope::Public]
                    .into_iter()
                    .any(|scope| f.key.partition(scope) == list.partition)
        })
    }

    /// Evicts lists until one more page of `bytes` for `keep` fits both bounds, the heaviest
    /// [`Holder`] giving way first (by the bound that is broken), least recently used first
    /// within it; a list whose walk is on is never evicted. The storing holder, when heavier
    /// than every other, loses its own lists, never another's; a tie goes against the others,
    /// so a store with one holder is plain LRU. `false` when the holder that must give way
    /// has nothing left to give but `keep` itself and lists whose walk is on.
    fn make_room(&mut self, keep: &ListKey, bytes: usize) -> bool {
        let config = self.config;
        let over_bytes = |s: &Self| s.bytes + bytes > config.max_bytes;
        let over = |s: &Self| s.entries + 1 > config.max_entries || over_bytes(s);
        if !over(self) {
            return true;
        }
        let mine = keep.partition.holder();
        let mut held: HashMap<Holder, Held> = HashMap::new();
        for (k, l) in &self.lists {
            held.entry(k.partition.holder()).or_default().add(l.bytes, l.pages.len());
        }
        held.entry(mine).or_default().add(bytes, 1);
        while over(self) {
            let by_bytes = over_bytes(self);
            let weight = |h: &Held| if by_bytes { h.bytes } else { h.pages };
            let weight_of = |h: &Holder| held.get(h).map_or(0, weight);
            let mine_weight = weight_of(&mine);
            // The heaviest other holder's weight, when it is at least ours: theirs give way.
            let others = held
                .iter()
                .filter(|(h, _)| **h != mine)
                .map(|(_, h)| weight(h))
                .max()
                .filter(|m| *m >= mine_weight);
            let yields = |h: Holder| match others {
                Some(m) => h != mine && weight_of(&h) == m,
                None => h == mine,
            };
            // A list whose walk is on keeps its pages: they are the walk's to join (its first
            // page gone, the walk's answer had nothing to start from).
            let victim = self
                .lists
                .iter()
                .filter(|(k, _)| *k != keep && yields(k.partition.holder()) && !self.walk_on(k))
                .min_by_key(|(_, l)| l.last_used)
                .map(|(k, l)| (*k, l.bytes));
            let Some((victim, victim_bytes)) = victim else { return false };
            let pages = self.remove_list(&victim);
            if let Some(h) = held.get_mut(&victim.partition.holder()) {
                h.bytes -= victim_bytes;
                h.pages -= pages;
            }
            self.stats.evictions += pages as u64;
        }
        true
    }

    fn remove_list(&mut self, lk: &ListKey) -> usize {
        let Some(list) = self.lists.remove(lk) else { return 0 };
        self.entries -= list.pages.len();
        self.bytes -= list.bytes;
        list.pages.len()
    }

    fn remove_page(&mut self, lk: &ListKey, cursor: Option<&str>) {
        let Some(list) = self.lists.get_mut(lk) else { return };
        let Some(i) = list.pages.iter().position(|p| p.cursor.as_deref() == cursor) else {
            return;
        };
        let p = list.pages.swap_remove(i);
        list.bytes -= p.bytes;
        self.entries -= 1;
        self.bytes -= p.bytes;
        if list.pages.is_empty() {
            self.lists.remove(lk);
        }
    }

    /// The two lists `key` may read for `kind`, private first, fetched once per call.
    fn candidates(&self, key: &CacheKey, kind: CatalogKind) -> Candidates<'_> {
        let keys = [CacheScope::Private, CacheScope::Public]
            .map(|scope| ListKey { partition: key.partition(scope), kind });
        Candidates { keys, lists: keys.map(|k| self.lists.get(&k)) }
    }

    fn locate(&self, key: &CacheKey, kind: CatalogKind, cursor: Option<&str>) -> Option<Found> {
        self.candidates(key, kind).locate(cursor).map(|(found, _)| found)
    }

    fn page(&self, found: Found) -> &CachedPage {
        // Invariant: `found` was made by `locate` on this store with no mutation in between.
        &self.lists[&found.list].pages[found.index]
    }

    fn page_mut(&mut self, found: Found) -> &mut CachedPage {
        // Invariant as in `page`.
        let list = self.lists.get_mut(&found.list).expect("located list");
        &mut list.pages[found.index]
    }

    /// Marks the list used and returns the page.
    fn touch(&mut self, found: Found) -> &CachedPage {
        self.tick += 1;
        let tick = self.tick;
        let list = self.lists.get_mut(&found.list).expect("located list");
        list.last_used = tick;
        &list.pages[found.index]
    }
}

/// The two lists a key may read, as found by one pair of map lookups.
struct Candidates<'s> {
    keys: [ListKey; 2],
    lists: [Option<&'s List>; 2],
}

impl<'s> Candidates<'s> {
    /// The page for `cursor`, private list first.
    fn locate(&self, cursor: Option<&str>) -> Option<(Found, &'s CachedPage)> {
        self.keys.iter().zip(self.lists).find_map(|(key, list)| {
            let (index, page) =
                list?.pages.iter().enumerate().find(|(_, p)| p.cursor.as_deref() == cursor)?;
            Some((Found { list: *key, index }, page))
        })
    }
}

fn page_state(page: &CachedPage, now: Instant, max_stale: Duration) -> State {
    if page.is_fresh(now) {
        return State::Fresh;
    }
    let stale_for = now.saturating_duration_since(page.stale_since());
    match (page.refresh_failed, stale_for <= max_stale) {
        (true, true) => State::Stale(stale_for),
        (true, false) => State::TooStale(stale_for),
        (false, _) => State::Expired,
    }
}

/// The byte estimate of a page: its strings plus fixed per-page and per-item costs.
pub(crate) fn page_bytes(cursor: Option<&str>, page: &ParsedPage) -> usize {
    PAGE_OVERHEAD
        + cursor.map_or(0, str::len)
        + page.next_cursor.as_deref().map_or(0, str::len)
        + page.items.iter().map(|it| it.heap_bytes() + std::mem::size_of::<Item>()).sum::<usize>()
}

#[cfg(test)]
mod tests;
