//! One catalog's refresh: a walk along its pages, one page on the wire at a time, that fetches
//! only the pages that are not fresh, stores each as it arrives, and at the end diffs the whole
//! catalog against the one last announced.
//!
//! No I/O and no clock. The host asks [`Refresher::need`] what a need gets, sends the one-page
//! listing [`Refresher::poll_fetch`] names, and hands its answer to [`Refresher::on_page`]. The
//! store's refresh tokens make it single-flight: one walk per key and kind, one page of it in
//! flight, so concurrent needs share one request on the wire.
//!
//! # Pages
//!
//! Each page is cached on its own, with its own expiry (issue 10: "each page of a paged list
//! is cached with its own expiry"). A walk starts at the first page that is not fresh and
//! skips the fresh pages after it (their cursor chain is followed in the store), so a refresh
//! reuses what is still good. A server that hands out a cursor twice in one walk fails it
//! (`CursorRepeated`); a walk takes at most the store's `max_entries` pages.
//!
//! # Memory
//!
//! A walk holds nothing beyond the store except pages the store may not keep (`ttlMs: 0`, a
//! list over the cache's bounds), which it holds for the one answer they were fetched for and
//! drops when the next walk starts. A list the store refuses as too large is walked again from
//! its first page with every page held that way, since the refusal dropped the pages stored
//! before it: such a list costs its own size once, as the one joined listing did before.

use std::time::{Duration, Instant};

use super::change::CatalogChange;
use super::diff::diff;
use super::hash::ContentHash;
use super::key::CacheKey;
use super::listing::{unique_last_wins, Catalog, CatalogKind, Item, ParsedPage};
use super::search::SearchIndex;
use super::store::{page_bytes, Begin, Finished, ListState, RefreshOutcome, RefreshToken, Store};

/// The refresh state of one catalog kind of one server. `E` is the host's fetch error.
#[derive(Debug)]
pub(crate) struct Refresher<E> {
    kind: CatalogKind,
    flight: Option<Flight>,
    /// Pages of the last walk the store would not keep, by cursor.
    one_use: Vec<(Option<Box<str>>, ParsedPage)>,
    /// The store's byte estimate of `one_use`.
    one_use_bytes: usize,
    /// How the last walk a need waited on ended, kept until a need reads it.
    outcome: Option<Outcome<E>>,
    /// The last walk nobody waited on (behind a stale answer, or eager) failed: the next need
    /// served stale starts no walk at once. Never an answer: a need in any other state lists.
    failed_behind: bool,
    /// The catalog last announced (the diff baseline).
    announced: Option<Catalog>,
    /// The last walk ended (none started since): its stored pages are what it read even once
    /// expired, for its one answer and `one_use_items`. Pages that expire faster than a walk
    /// takes are never fresh together, and such a list is still the server's answer.
    walked: bool,
}

/// The walk in progress: the page on the wire (or about to be).
#[derive(Debug)]
struct Flight {
    token: RefreshToken,
    /// The host has not sent this page's request yet ([`Refresher::poll_fetch`]).
    unsent: bool,
    /// A need waits on this walk (it wants the failure); eager walks have none until one comes.
    by_need: bool,
    /// The store refused the list: hold every page for one use, starting from the first.
    hold_all: bool,
    /// Hashes of the cursors this walk followed.
    cursors: Vec<u64>,
    /// Started over after the server rejected a cursor; a second rejection fails it.
    restarted: bool,
}

#[derive(Debug)]
enum Outcome<E> {
    Failed(WalkError<E>),
    /// The walk ended with pages the store did not keep: serve them once.
    OneUse,
}

/// Why a walk failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WalkError<E> {
    /// A page's fetch failed, or could not start.
    Fetch(E),
    /// A page gave a cursor this walk had already followed.
    CursorRepeated,
    /// The list has more pages than the cache holds.
    TooManyPages { max: usize },
    /// The pages held for one use (a list the store would not keep) passed `max_bytes`
    /// ([`MAX_HELD_FACTOR`] times the store's cap); they were dropped.
    TooLarge { max_bytes: usize },
}

/// How many times the store's byte cap one walk may hold in pages the store would not keep.
pub(crate) const MAX_HELD_FACTOR: usize = 8;

/// What a need gets now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The store answers (fresh, or stale after a failed refresh): `Store::list_pages`.
    Cached,
    /// The last walk's pages are not all cacheable: [`Refresher::one_use_items`], once.
    OneUse,
    /// A page is on the wire: poll, then ask again.
    Waiting,
}

/// Why a need cannot be answered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NeedError<E> {
    /// The walk this need waited on failed and no older catalog may be served.
    Walk(WalkError<E>),
    /// The catalog is stale past the allowance and its refresh failed.
    StaleTooLong { stale_for: Duration, max_stale: Duration },
    /// The store's refresh table is full.
    TooManyRefreshes,
}

impl<E> Refresher<E> {
    pub(crate) fn new(kind: CatalogKind) -> Self {
        Refresher {
            kind,
            flight: None,
            one_use: Vec::new(),
            one_use_bytes: 0,
            outcome: None,
            failed_behind: false,
            announced: None,
            walked: false,
        }
    }

    pub(crate) fn kind(&self) -> CatalogKind {
        self.kind
    }

    /// Decides what a need gets, starting a walk when one is due (then [`poll_fetch`] names
    /// the page to request). Each need starts at most one walk: a need that finds the failure
    /// of the walk it started is answered from what is left (stale, or the error).
    ///
    /// [`poll_fetch`]: Self::poll_fetch
    pub(crate) fn need(
        &mut self,
        now: Instant,
        store: &mut Store,
        key: &CacheKey,
    ) -> Result<Answer, NeedError<E>> {
        let state = store.list_state(now, key, self.kind);
        if let Some(f) = &mut self.flight {
            return Ok(match state {
                ListState::Fresh | ListState::Stale => Answer::Cached,
                ListState::Refresh | ListState::TooStale(_) => {
                    f.by_need = true;
                    Answer::Waiting
                }
            });
        }
        let failed_behind = std::mem::take(&mut self.failed_behind);
        match (state, self.outcome.take()) {
            (ListState::Fresh, _) => Ok(Answer::Cached),
            // Served stale; a refresh goes behind it unless this need's own just failed, or
            // the last one behind a stale answer did.
            (ListState::Stale, Some(Outcome::Failed(_))) => Ok(Answer::Cached),
            (ListState::Stale, _) if failed_behind => Ok(Answer::Cached),
            (ListState::Stale, _) => {
                // The stale catalog is the answer whether or not the refresh behind it can
                // start now (a full refresh table): the next need tries again. Nobody waits
                // for it: its failure is no later need's answer.
                if self.start(now, store, key, false).is_err() {
                    log::debug!("a catalog refresh behind a stale answer could not start");
                }
                Ok(Answer::Cached)
            }
            (ListState::TooStale(stale_for), Some(Outcome::Failed(_))) => {
                Err(NeedError::StaleTooLong { stale_for, max_stale: store.config().max_stale })
            }
            (ListState::Refresh, Some(Outcome::Failed(e))) => Err(NeedError::Walk(e)),
            (ListState::Refresh, Some(Outcome::OneUse)) => Ok(Answer::OneUse),
            (ListState::Refresh | ListState::TooStale(_), None | Some(Outcome::OneUse)) => {
                // Nothing in flight after this means another walk of the key fetches it.
                self.start(now, store, key, true)?;
                Ok(Answer::Waiting)
            }
        }
    }

    /// Starts a walk nobody waits for (a change arrived and the host wants eager refresh), if
    /// none is on. A failure is only logged by the caller: the next need tries again.
    pub(crate) fn refresh_eagerly(
        &mut self,
        now: Instant,
        store: &mut Store,
        key: &CacheKey,
    ) -> Result<(), NeedError<E>> {
        if self.flight.is_some() {
            return Ok(());
        }
        self.start(now, store, key, false)
    }

    /// Whether [`poll_fetch`](Self::poll_fetch) has a page to name: one look, for callers that
    /// ask every catalog of a server in turn.
    #[inline]
    pub(crate) fn has_fetch(&self) -> bool {
        self.flight.as_ref().is_some_and(|f| f.unsent)
    }

    /// The page whose one-page listing the host must send now (`Some(None)`: the first page).
    /// Each page is named once.
    pub(crate) fn poll_fetch(&mut self) -> Option<Option<&str>> {
        let f = self.flight.as_mut().filter(|f| f.unsent)?;
        f.unsent = false;
        Some(f.token.cursor())
    }

    /// Gives the walk's page in flight back to the store (the server is being removed): a
    /// caller of another context sharing the key fetches it instead of waiting for good.
    pub(crate) fn release(&mut self, store: &mut Store) {
        if let Some(flight) = self.flight.take() {
            store.release_refresh(flight.token);
        }
    }

    /// The request [`poll_fetch`](Self::poll_fetch) named could not be sent.
    /// Every page of the list not fresh is then served stale, within the allowance.
    pub(crate) fn fetch_failed(
        &mut self,
        now: Instant,
        store: &mut Store,
        key: &CacheKey,
        error: E,
    ) {
        let Some(flight) = self.take_flight(store, key) else { return };
        match store.finish_refresh(now, flight.token, RefreshOutcome::Failed) {
            Finished::Failed { .. } => store.walk_failed(now, key, self.kind),
            // A change raced the walk and revoked it: its failure answers nobody (as its page
            // would not have); the next need starts a walk of the changed list.
            Finished::Cancelled { .. } => return,
            _ => {}
        }
        self.fail(flight.by_need, WalkError::Fetch(error));
    }

    /// The server rejected the page's cursor (-32602): every page of the list is dropped, and
    /// the walk starts over from the first page, once. On the first page (no cursor) it is an
    /// ordinary failure.
    pub(crate) fn cursor_rejected(
        &mut self,
        now: Instant,
        store: &mut Store,
        key: &CacheKey,
        error: E,
    ) {
        if self.flight.as_ref().is_some_and(|f| f.token.cursor().is_none() || f.restarted) {
            return self.fetch_failed(now, store, key, error);
        }
        let Some(flight) = self.take_flight(store, key) else { return };
        let _ = store.finish_refresh(now, flight.token, RefreshOutcome::InvalidCursor);
        self.one_use.clear();
        self.one_use_bytes = 0;
        match store.begin_refresh(key, self.kind, None) {
            Ok(Begin::Fetch(token)) => {
                let (cursors, by_need) = (Vec::new(), flight.by_need);
                // A walk that holds its pages (the store refused the list) holds them again:
                // stored, they would be refused again, and that refusal's restart would forget
                // this one.
                let hold_all = flight.hold_all;
                self.flight = Some(Flight {
                    token,
                    unsent: true,
                    by_need,
                    hold_all,
                    cursors,
                    restarted: true,
                });
            }
            Ok(Begin::Wait) | Err(_) => self.fail(flight.by_need, WalkError::Fetch(error)),
        }
    }

    /// A page's answer. Stores it, then either names the next page that is not fresh (see
    /// [`poll_fetch`](Self::poll_fetch)) or ends the walk. A complete walk is diffed against
    /// the last announced catalog; the change, if any, is returned and `search` (the tool
    /// index) follows it. The first complete catalog is the baseline: nothing is announced.
    pub(crate) fn on_page(
        &mut self,
        now: Instant,
        store: &mut Store,
        key: &CacheKey,
        result: Result<ParsedPage, E>,
        search: Option<&mut SearchIndex>,
    ) -> Option<CatalogChange> {
        let page = match result {
            Ok(page) => page,
            Err(e) => {
                self.fetch_failed(now, store, key, e);
                return None;
            }
        };
        let mut flight = self.take_flight(store, key)?;
        let cursor: Option<Box<str>> = flight.token.cursor().map(Box::from);
        let next: Option<Box<str>> = page.next_cursor.clone();
        // `carried_input` asks the store not to keep it: a refused list is held for one use.
        let outcome = RefreshOutcome::Page { page, carried_input: flight.hold_all };
        let token = flight.token;
        match store.finish_refresh(now, token, outcome) {
            Finished::Stored => {}
            Finished::NotStored { page, .. } => {
                if !self.hold(store, key, flight.by_need, cursor, page) {
                    return None;
                }
            }
            // A change raced the walk a need waits on: the page is that need's answer still,
            // held for it alone (the store keeps nothing the change made stale). Revoked for
            // good, a server that announces a change after every listing left the need
            // waiting forever, every walk of it revoked in turn.
            Finished::Cancelled { page: Some(page) } if flight.by_need => {
                if !self.hold(store, key, flight.by_need, cursor, page) {
                    return None;
                }
            }
            Finished::Rejected { .. } => {
                // The refusal dropped the pages stored before this one: start over, holding
                // every page for this one answer.
                self.one_use.clear();
                self.one_use_bytes = 0;
                return self.restart_held(store, key, flight.by_need, flight.restarted);
            }
            // A change raced the walk (or the list was dropped): the next need starts again.
            Finished::Cancelled { .. } | Finished::Failed { .. } | Finished::ListDropped => {
                return None;
            }
        }
        let mut cursor = match next {
            Some(c) => c,
            None => {
                store.prune_unreachable(now, key, self.kind);
                return self.complete(now, store, key, flight.by_need, search);
            }
        };
        let max = store.config().max_entries;
        loop {
            let h = cursor_hash(&cursor);
            let error = if flight.cursors.contains(&h) {
                Some(WalkError::CursorRepeated)
            } else if flight.cursors.len() + 1 >= max {
                Some(WalkError::TooManyPages { max })
            } else {
                None
            };
            if let Some(error) = error {
                // The chain cannot be walked: what is stored of it must not pass for a list.
                store.drop_list(key, self.kind);
                self.fail(flight.by_need, error);
                return None;
            }
            flight.cursors.push(h);
            let fresh = (!flight.hold_all)
                .then(|| store.fresh_page(now, key, self.kind, Some(&cursor)))
                .flatten();
            match fresh.map(|p| p.next_cursor().map(Box::from)) {
                // Fresh: skip it and follow its cursor.
                Some(Some(next)) => cursor = next,
                Some(None) => {
                    store.prune_unreachable(now, key, self.kind);
                    return self.complete(now, store, key, flight.by_need, search);
                }
                None => break,
            }
        }
        match store.begin_refresh(key, self.kind, Some(&cursor)) {
            Ok(Begin::Fetch(token)) => {
                self.flight = Some(Flight { token, unsent: true, ..flight });
            }
            // Another walk of this key is fetching that page, or the table is full: the next
            // need starts again.
            Ok(Begin::Wait) | Err(_) => {}
        }
        None
    }

    /// Takes the stored catalog as this context's own when another context put it there (a
    /// listing marked public is shared by every principal of a server): the search index
    /// follows it, and a difference from what this context last announced is returned as a
    /// change, as after a walk of its own.
    pub(crate) fn adopt(
        &mut self,
        now: Instant,
        store: &Store,
        key: &CacheKey,
        search: Option<&mut SearchIndex>,
    ) -> Option<CatalogChange> {
        self.complete(now, store, key, false, search)
    }

    /// The last walk's items in listing order (pages by cursor, the walk's held pages before
    /// the store's), and the largest staleness of a stored page among them; `None` when the
    /// pages no longer join up. Counts nothing.
    pub(crate) fn one_use_items<'a>(
        &'a self,
        now: Instant,
        store: &'a Store,
        key: &CacheKey,
    ) -> Option<(Vec<&'a Item>, Option<Duration>)> {
        chain_items(now, store, key, self.kind, &self.one_use, self.walked)
    }

    /// The walk in progress, when it is `key`'s. One begun under another key (the server's
    /// granted scope changed while its page was out, and the page came back under the new
    /// grant's token) answers for none: the refresh is given back, nothing is stored under
    /// the old key, and the next need walks under the current one.
    fn take_flight(&mut self, store: &mut Store, key: &CacheKey) -> Option<Flight> {
        let flight = self.flight.take()?;
        if flight.token.key() == key {
            return Some(flight);
        }
        log::debug!("a catalog page came back under another key: dropped");
        store.release_refresh(flight.token);
        None
    }

    /// Holds `page` (fetched with `cursor`) for the walk's one answer; `false` when the held
    /// pages passed their byte bound, which fails the walk.
    fn hold(
        &mut self,
        store: &mut Store,
        key: &CacheKey,
        by_need: bool,
        cursor: Option<Box<str>>,
        page: ParsedPage,
    ) -> bool {
        self.one_use_bytes += page_bytes(cursor.as_deref(), &page);
        let max_bytes = store.config().max_bytes.saturating_mul(MAX_HELD_FACTOR);
        if self.one_use_bytes > max_bytes {
            // Freed, not kept for a later need: the walk cannot end in a list.
            self.one_use = Vec::new();
            self.one_use_bytes = 0;
            store.drop_list(key, self.kind);
            self.fail(by_need, WalkError::TooLarge { max_bytes });
            return false;
        }
        self.one_use.push((cursor, page));
        true
    }

    /// A change notice is about to make the stored list of `key` stale: what the last walk
    /// read is forgotten ([`forget_walk`](Self::forget_walk)), no longer what a checked call
    /// or a policy reads; but a walk a need waits on stays that need's answer. The stored
    /// pages it reads are held for that one use, as the rest of it is as it comes
    /// ([`on_page`](Self::on_page)); the store keeps nothing the change made stale.
    pub(crate) fn before_change(&mut self, now: Instant, store: &Store, key: Option<&CacheKey>) {
        let this_walks = std::mem::take(&mut self.one_use);
        let bytes = self.one_use_bytes;
        self.forget_walk();
        let waited_on =
            |k: &&CacheKey| self.flight.as_ref().is_some_and(|f| f.by_need && f.token.key() == *k);
        let Some(key) = key.filter(waited_on) else { return };
        (self.one_use, self.one_use_bytes) = (this_walks, bytes);
        // The pages the walk read, or skipped as fresh, up to the one on the wire: not that
        // page's old copy nor what follows it (expired, or still to read), which would stand
        // before the server's answer in the need's list.
        let fetching = self.flight.as_ref().map(|f| f.token.cursor().map(Box::<str>::from));
        let mut cursor: Option<Box<str>> = None;
        // A looping chain cannot make this spin: one step per page held.
        for _ in 0..=store.entries() + self.one_use.len() {
            if fetching.as_ref() == Some(&cursor) {
                return;
            }
            let next = match self.one_use.iter().find(|(c, _)| *c == cursor) {
                Some((_, held)) => held.next_cursor.clone(),
                None => {
                    let Some(stored) = store.fresh_page(now, key, self.kind, cursor.as_deref())
                    else {
                        return;
                    };
                    let page = stored.parsed().clone();
                    self.one_use_bytes += page_bytes(cursor.as_deref(), &page);
                    let next = page.next_cursor.clone();
                    self.one_use.push((cursor, page));
                    next
                }
            };
            match next {
                Some(next) => cursor = Some(next),
                None => return,
            }
        }
    }

    /// Forgets what the last walk read and how it ended: the catalog is keyed anew (a new
    /// grant or protocol version), and that walk's pages and answer were the old key's. A
    /// walk still out is given back when its page comes ([`take_flight`](Self::take_flight)).
    pub(crate) fn forget_walk(&mut self) {
        self.one_use.clear();
        self.one_use_bytes = 0;
        self.outcome = None;
        self.failed_behind = false;
        self.walked = false;
    }

    fn fail(&mut self, by_need: bool, error: WalkError<E>) {
        if by_need {
            self.outcome = Some(Outcome::Failed(error));
        } else {
            self.failed_behind = true;
        }
    }

    fn start(
        &mut self,
        now: Instant,
        store: &mut Store,
        key: &CacheKey,
        by_need: bool,
    ) -> Result<(), NeedError<E>> {
        self.one_use.clear();
        self.one_use_bytes = 0;
        self.walked = false;
        let Some(cursor) = first_unfresh(now, store, key, self.kind) else { return Ok(()) };
        let token = match store.begin_refresh(key, self.kind, cursor.as_deref()) {
            Ok(Begin::Fetch(token)) => {
                store.count_walk();
                token
            }
            // Another walk of this key (another server of the same identity) fetches it.
            Ok(Begin::Wait) => return Ok(()),
            Err(_) => return Err(NeedError::TooManyRefreshes),
        };
        let cursors = cursor.iter().map(|c| cursor_hash(c)).collect();
        self.flight = Some(Flight {
            token,
            unsent: true,
            by_need,
            hold_all: false,
            cursors,
            restarted: false,
        });
        Ok(())
    }

    /// Starts the walk over, holding every page: the store refused the list. `restarted`
    /// carries over: a walk that started over for a rejected cursor does not again.
    fn restart_held(
        &mut self,
        store: &mut Store,
        key: &CacheKey,
        by_need: bool,
        restarted: bool,
    ) -> Option<CatalogChange> {
        if let Ok(Begin::Fetch(token)) = store.begin_refresh(key, self.kind, None) {
            let cursors = Vec::new();
            self.flight =
                Some(Flight { token, unsent: true, by_need, hold_all: true, cursors, restarted });
        }
        None
    }

    fn complete(
        &mut self,
        now: Instant,
        store: &Store,
        key: &CacheKey,
        by_need: bool,
        search: Option<&mut SearchIndex>,
    ) -> Option<CatalogChange> {
        // Pages the store did not keep, or pages that expired before the walk ended: the list
        // the walk read is the need's answer, once (the next need walks again).
        let servable =
            || matches!(store.list_state(now, key, self.kind), ListState::Fresh | ListState::Stale);
        if by_need && (!self.one_use.is_empty() || !servable()) {
            self.outcome = Some(Outcome::OneUse);
        }
        self.walked = true;
        let (items, _) = chain_items(now, store, key, self.kind, &self.one_use, true)?;
        let fresh = Catalog::from_items(self.kind, items.iter().copied());
        // An empty index was never filled, or was emptied when the key changed: it takes
        // the whole list (for an index that was empty rightly, the same as the difference).
        let search = match search {
            Some(index) if self.announced.is_none() || index.is_empty() => {
                for it in unique_last_wins(items.iter().copied()).0 {
                    let _ = index.upsert(it.json());
                }
                None
            }
            search => search,
        };
        let change = match &self.announced {
            None => None,
            Some(old) if old.hash() != fresh.hash() => {
                let d = diff(old, &fresh).ok()?;
                if let Some(index) = search {
                    let (unique, _) = unique_last_wins(items.iter().copied());
                    let _ = index.apply(&d, |id| {
                        let i = unique.binary_search_by(|it| it.id().cmp(id)).ok()?;
                        unique.get(i).map(|it| it.json())
                    });
                }
                (!d.is_empty()).then(|| CatalogChange::new(d, fresh.hash()))
            }
            Some(_) => None,
        };
        self.announced = Some(fresh);
        change
    }
}

/// The cursor of the first page along the chain that is not fresh (`Some(None)`: the first
/// page); `None` when every page is fresh.
fn first_unfresh(
    now: Instant,
    store: &Store,
    key: &CacheKey,
    kind: CatalogKind,
) -> Option<Option<Box<str>>> {
    let mut cursor: Option<Box<str>> = None;
    // A looping chain of fresh pages cannot make this spin: one step per page held.
    for _ in 0..=store.entries() {
        let Some(page) = store.fresh_page(now, key, kind, cursor.as_deref()) else {
            return Some(cursor);
        };
        cursor = Some(Box::from(page.next_cursor()?));
    }
    None
}

/// The items of the list in listing order: each page from `held` if the walk held it, else
/// from the store if servable. `None` when a page is missing or the chain loops.
fn chain_items<'a>(
    now: Instant,
    store: &'a Store,
    key: &CacheKey,
    kind: CatalogKind,
    held: &'a [(Option<Box<str>>, ParsedPage)],
    as_walked: bool,
) -> Option<(Vec<&'a Item>, Option<Duration>)> {
    let mut items = Vec::new();
    let mut worst: Option<Duration> = None;
    let mut cursor: Option<&'a str> = None;
    for _ in 0..=store.entries() + held.len() {
        let (page_items, next) = match held.iter().find(|(c, _)| c.as_deref() == cursor) {
            Some((_, p)) => (p.items.as_slice(), p.next_cursor.as_deref()),
            None => {
                let (p, stale) = match store.servable_page(now, key, kind, cursor) {
                    Some(found) => found,
                    None if as_walked => (store.stored_page(key, kind, cursor)?, None),
                    None => return None,
                };
                if let Some(d) = stale {
                    worst = Some(worst.map_or(d, |w| w.max(d)));
                }
                (p.items(), p.next_cursor())
            }
        };
        items.extend(page_items);
        match next {
            None => return Some((items, worst)),
            Some(n) => cursor = Some(n),
        }
    }
    None
}

fn cursor_hash(cursor: &str) -> u64 {
    ContentHash::of(cursor.as_bytes()).as_u64()
}

#[cfg(test)]
mod tests;
