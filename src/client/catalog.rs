//! The host's capability cache: tool, prompt and resource catalogs kept per server context,
//! refreshed once however many needs wait (single-flight), invalidated by the server's own
//! change signals, diffed into `ClientEvent::ToolsChanged` events, and searchable.
//!
//! The pure parts live in [`crate::catalog`]; this module only connects them to engines.
//!
//! # Key
//!
//! Every catalog is filed under a [`CacheKey`] of: the server's logical identity
//! (`Config::cache_identity`, else its program, arguments and environment, or its URL,
//! headers and static bearer token), the transport, the
//! negotiated protocol version, the tenant (`Config::cache_tenant`), the client capability
//! profile (the capabilities the engine declares: `Config::client_capabilities` with the
//! answered kinds put in) and the extension profile (empty: mcpoll advertises no
//! extensions yet). The principal and scope parts are those of the principal a lane serves
//! ([`Host::lane`], `super::principal`), or anonymous with no scopes for the server's own
//! context; a lane's tenant is its principal's, else `Config::cache_tenant`.
//!
//! # Pages
//!
//! A catalog is fetched page by page (`Engine::list_page`) and each page is cached on its own,
//! under its cursor, with its own hints (`ttlMs`, `cacheScope`; a page without them stays
//! private, and is stale at once in the 2026-07-28 era or lives `CacheConfig::default_ttl`
//! in the 2025-11-25 one, whose results carry no hints). A refresh fetches only the pages that
//! are not fresh, and no buffer ever holds the whole catalog's text; see
//! [`crate::catalog::refresh`].
//! A cursor the server rejects (-32602) drops every page of the list and the walk starts over
//! from the first page, once.
//!
//! # Invalidation
//!
//! A `list_changed` notification marks the catalog stale as soon as the host next polls or
//! needs a catalog, whether or not the host drains the `Event::ListChanged` (the engine counts
//! them, dropped ones included); the next need refetches (at once with
//! `CacheConfig::eager_refresh`).
//! Modern servers send change notifications only on a `subscriptions/listen` stream:
//! [`Host::watch_catalogs`] opens one.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::io;
use std::time::{Duration, Instant, SystemTime};

use crate::catalog::change::CatalogChange;
use crate::catalog::hints::{CacheHints, CacheScope, TtlHint};
use crate::catalog::key::{self, CacheKey, KeyParts};
use crate::catalog::listing::{parse_page, unique_last_wins, CatalogKind, Item};
use crate::catalog::refresh::{Answer, NeedError, Refresher, WalkError};
use crate::catalog::search::SearchIndex;
use crate::catalog::store::{CachedPage, ItemLookup, ListLookup, Store, StoreConfig, StoreError};
use crate::client::event::{ClientEvent, HostEvent};
use crate::config::{CacheConfig, SavedVerdict};
use crate::engine::{CallId, CallOptions, Engine, Event, VerdictOrigin};
use crate::error::{CallError, LocalError, PeerError, RequestError, RpcError};
use crate::proto::mcp::{Method, SubscriptionFilter};
use crate::proto::version::{Era, ProtocolVersion};
use crate::time::{later, WallAnchor};

use super::capability_store::{CapabilityStore, EntryKind, StoreKey, StoredEntry, StoredPage};
use super::servers::Pass;
use super::{Client, ServerCore, ServerId};
#[cfg(doc)]
use crate::Host;

/// The catalog kinds a host keeps, in slot order.
const KINDS: [CatalogKind; 3] = [CatalogKind::Tools, CatalogKind::Prompts, CatalogKind::Resources];

fn slot(kind: CatalogKind) -> usize {
    match kind {
        CatalogKind::Tools => 0,
        CatalogKind::Prompts => 1,
        CatalogKind::Resources | CatalogKind::ResourceTemplates => 2,
    }
}

fn method(kind: CatalogKind) -> Method {
    match kind {
        CatalogKind::Tools => Method::ToolsList,
        CatalogKind::Prompts => Method::PromptsList,
        CatalogKind::Resources => Method::ResourcesList,
        CatalogKind::ResourceTemplates => Method::ResourceTemplatesList,
    }
}

/// Why a catalog could not be had.
#[derive(Debug)]
#[non_exhaustive]
pub enum CatalogError {
    /// No such server.
    UnknownServer,
    /// The server is not ready (it closed, or never got ready in time).
    NotReady,
    /// The listing could not start.
    Request(RequestError),
    /// The listing failed and no older catalog may be served.
    Listing(CallError),
    /// The cached catalog went stale, its refresh failed, and it is past
    /// `CacheConfig::max_stale`.
    StaleTooLong {
        /// How long it has been stale.
        stale_for: Duration,
        /// The allowance.
        max_stale: Duration,
    },
    /// Too many catalog refreshes are in flight (`CacheConfig::max_refreshes`).
    TooManyRefreshes,
    /// The wait passed its timeout.
    Timeout,
    /// Polling failed.
    Io(io::Error),
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownServer => f.write_str("no such server"),
            Self::NotReady => f.write_str("the server is not ready"),
            Self::Request(e) => write!(f, "cannot list: {e}"),
            Self::Listing(e) => write!(f, "listing failed: {e}"),
            Self::StaleTooLong { stale_for, max_stale } => write!(
                f,
                "cached catalog stale for {} ms, past the {} ms allowed after a failed refresh",
                stale_for.as_millis(),
                max_stale.as_millis()
            ),
            Self::TooManyRefreshes => f.write_str("too many catalog refreshes in flight"),
            Self::Timeout => f.write_str("timed out waiting for the catalog"),
            Self::Io(e) => write!(f, "poll failed: {e}"),
        }
    }
}

impl std::error::Error for CatalogError {}

fn store_error(e: StoreError) -> CatalogError {
    match e {
        StoreError::StaleTooLong { stale_for, max_stale } => {
            CatalogError::StaleTooLong { stale_for, max_stale }
        }
        StoreError::TooManyRefreshes { .. } => CatalogError::TooManyRefreshes,
        // Refused lists are served once, never reported through a lookup.
        StoreError::CatalogTooLarge { .. }
        | StoreError::TooManyPages { .. }
        | StoreError::CrowdsOthersOut { .. } => CatalogError::TooManyRefreshes,
    }
}

fn need_error(e: NeedError<CatalogError>) -> CatalogError {
    match e {
        NeedError::Walk(WalkError::Fetch(e)) => e,
        NeedError::Walk(WalkError::CursorRepeated) => {
            CatalogError::Listing(CallError::Peer(PeerError::CursorRepeated))
        }
        NeedError::Walk(WalkError::TooManyPages { .. }) => {
            CatalogError::Listing(CallError::Local(LocalError::TooManyPages))
        }
        NeedError::Walk(WalkError::TooLarge { .. }) => {
            CatalogError::Listing(CallError::Peer(PeerError::TooLarge))
        }
        NeedError::StaleTooLong { stale_for, max_stale } => {
            CatalogError::StaleTooLong { stale_for, max_stale }
        }
        NeedError::TooManyRefreshes => CatalogError::TooManyRefreshes,
    }
}

/// A catalog as the cache holds it: each item's canonical JSON (keys sorted, no whitespace),
/// ordered by id (tool or prompt name, resource URI).
#[derive(Debug)]
pub struct CatalogView<'a> {
    items: Vec<&'a Item>,
    stale_for: Option<Duration>,
    cached: bool,
}

impl<'a> CatalogView<'a> {
    /// Items in the catalog.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// `true` when the catalog is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The ids, in order.
    pub fn names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.items.iter().map(|it| it.id())
    }

    /// Each definition as canonical JSON, in id order.
    pub fn definitions(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.items.iter().map(|it| it.json())
    }

    /// One definition by id.
    pub fn definition(&self, id: &str) -> Option<&'a str> {
        let i = self.items.binary_search_by(|it| it.id().cmp(id)).ok()?;
        self.items.get(i).map(|it| it.json())
    }

    /// Set when the catalog is served stale because its refresh failed: how long it has been.
    pub fn stale_for(&self) -> Option<Duration> {
        self.stale_for
    }

    /// `false` when the server's hints forbade caching (`ttlMs: 0`) or the catalog is over the
    /// cache's bounds: this answer is the only use of that listing.
    pub fn is_cached(&self) -> bool {
        self.cached
    }
}

/// One catalog kind of one server: its refresh walk and the page request on the wire.
#[derive(Debug)]
struct KindState {
    refresher: Refresher<CatalogError>,
    call: Option<CallId>,
    /// A change arrived and the host asked for eager refresh: refetch when no walk is on.
    eager_due: bool,
    /// The host asked for this catalog of this context (a need): only such a catalog is
    /// refreshed eagerly. A server's change notice for a kind nobody reads (or a re-listen,
    /// which marks every kind) listed it, took a refresh slot, and reported its changes.
    needed: bool,
    /// An eager refresh started: the next one starts no sooner than this ([`EAGER_FLOOR`]).
    eager_after: Option<Instant>,
    /// A need waited for a refresh: the answer it gets next is no cache hit (the listing
    /// already has its record).
    fetched_for_need: bool,
    /// When the oldest page of the stored catalog this context last served was received:
    /// one received at another time may come from a refresh of another context (a shared
    /// public listing), and is adopted before it is served.
    adopted: Option<Instant>,
}

impl KindState {
    fn new(kind: CatalogKind) -> Self {
        KindState {
            refresher: Refresher::new(kind),
            call: None,
            eager_due: false,
            needed: false,
            eager_after: None,
            fetched_for_need: false,
            adopted: None,
        }
    }

    /// Sends the page request the walk asks for, if any; `Some(true)` when one was sent,
    /// `Some(false)` when it could not start (the walk then failed).
    fn send_fetch(
        &mut self,
        engine: &mut Engine,
        store: &mut Store,
        key: &CacheKey,
        now: Instant,
    ) -> Option<bool> {
        let kind = self.refresher_kind();
        let cursor = self.refresher.poll_fetch()?;
        match engine.list_page(now, method(kind), cursor, &CallOptions::default()) {
            Ok(call) => {
                self.call = Some(call);
                Some(true)
            }
            Err(e) => {
                log::debug!("catalog page request could not start: {e}");
                self.refresher.fetch_failed(now, store, key, CatalogError::Request(e));
                Some(false)
            }
        }
    }

    fn refresher_kind(&self) -> CatalogKind {
        self.refresher.kind()
    }
}

/// One server's part of the cache.
#[derive(Debug)]
pub(crate) struct ServerCatalog {
    identity: Identity,
    transport: key::Transport,
    /// The principal and granted scopes of a principal's lane (`super::principal`); `None` and
    /// empty for the server's own context.
    principal: Option<String>,
    scopes: Vec<String>,
    /// The scope the authorization server granted with the server's current OAuth token
    /// (space-separated), when there is one: it stands in for `scopes` in the key, since it
    /// is what the server answers for.
    granted: Option<String>,
    tenant: Option<String>,
    /// The key and the version it was made for (the version is fixed once ready, but a
    /// restarted process may negotiate another).
    key: Option<(ProtocolVersion, CacheKey)>,
    /// The granted scope changed since the key was made.
    key_stale: bool,
    /// The keys this context had before its current one (another grant, another version),
    /// newest last, at most [`EARLIER_KEYS`]: a change notice makes their catalogs stale too,
    /// or a grant that comes back was served, fresh, the catalog the server said changed.
    earlier_keys: Vec<CacheKey>,
    kinds: [KindState; 3],
    search: SearchIndex,
    /// The host asked for change notifications (`Host::watch_catalogs`).
    watching: bool,
    listen: Option<CallId>,
    /// When to open the listen stream again after it broke, and the backoff after that.
    relisten_at: Option<Instant>,
    relisten_delay: Duration,
    /// When the current stream was opened: one that lived long resets the backoff.
    listen_opened: Option<Instant>,
    /// The engine's `list_changed` counts when last looked at.
    seen_changes: [u64; 3],
    /// When an eager refresh held back by [`EAGER_FLOOR`] is due: a deadline of the host.
    eager_held: Option<Instant>,
    /// What the capability store holds of the server's era verdict.
    verdict: KeptVerdict,
}

/// What the capability store holds of a server context's era verdict, as far as this host
/// knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeptVerdict {
    /// Nothing this host read or wrote.
    Unknown,
    /// The verdict the server was started with came from the store.
    Loaded,
    /// This host filed the engine's probed verdict.
    Filed,
}

/// A server's identity in the cache key: its program and arguments (NUL-separated), its URL,
/// or the host's `Config::cache_identity`; after the first two, maybe a fingerprint of their
/// context ([`key::add_context`]). Shown by `Debug` without its secrets: no argument, no
/// fingerprint, and the URL redacted.
struct Identity(String);

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_identity(&self.0, f)
    }
}

/// A server identity as `Debug` may show it: a program without its arguments (a token is
/// often one), a URL redacted, no context fingerprint.
pub(crate) fn fmt_identity(identity: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match key::without_context(identity).split_once('\0') {
        Some((program, args)) => {
            let n = args.split('\0').count();
            write!(f, "{program:?} <{n} arguments redacted>")
        }
        None => fmt::Debug::fmt(&crate::redact::RedactedUrl(identity), f),
    }
}

/// The most catalog change events kept for the host ([`ClientCache::push_change`]).
const MAX_QUEUED_CHANGES: usize = 256;

/// The most memory the names of the change events kept for the host may hold (the newest
/// change is kept whatever its size).
const MAX_QUEUED_CHANGE_BYTES: usize = 8 << 20;

/// How far a stored page's expiry may be past `max_ttl` and still be loaded (capped): pages
/// are written at the limit when the server's `ttlMs` is at or above it, and a store shared
/// with a machine whose clock runs a little ahead, or a clock stepped back, would otherwise
/// drop them.
const STORE_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// Backoff before listening again after a stream broke: doubles up to the cap.
const RELISTEN_BASE: Duration = Duration::from_millis(200);
const RELISTEN_MAX: Duration = Duration::from_secs(30);
/// The least time between two eager refreshes of one catalog: a server that announces a
/// change after every listing (or a stream of them) is listed once a second at most, not in
/// a loop.
const EAGER_FLOOR: Duration = Duration::from_secs(1);

impl ServerCatalog {
    pub(crate) fn new(identity: String, http: bool, tenant: Option<String>) -> Self {
        ServerCatalog {
            identity: Identity(identity),
            transport: if http { key::Transport::Http } else { key::Transport::Stdio },
            principal: None,
            scopes: Vec::new(),
            granted: None,
            tenant,
            key: None,
            key_stale: false,
            earlier_keys: Vec::new(),
            kinds: KINDS.map(KindState::new),
            search: SearchIndex::new(),
            watching: false,
            listen: None,
            relisten_at: None,
            relisten_delay: RELISTEN_BASE,
            listen_opened: None,
            seen_changes: [0; 3],
            eager_held: None,
            verdict: KeptVerdict::Unknown,
        }
    }

    /// The server was started with the era verdict the capability store held.
    pub(crate) fn started_from_stored_verdict(&mut self) {
        self.verdict = KeptVerdict::Loaded;
    }

    /// The same context for one principal with these granted scopes: its private catalogs
    /// are its own; public ones are shared with every context of the server.
    pub(crate) fn for_principal(mut self, principal: String, scopes: Vec<String>) -> Self {
        self.principal = Some(principal);
        self.scopes = scopes;
        self
    }

    /// The server's logical identity (its program and arguments, or its URL, or
    /// `Config::cache_identity`).
    pub(crate) fn identity(&self) -> &str {
        &self.identity.0
    }

    /// The era of the protocol version the last key was made for.
    pub(crate) fn keyed_era(&self) -> Option<Era> {
        self.key.map(|(version, _)| version.era())
    }

    /// The principal a lane serves; `None` for the server's own context.
    pub(crate) fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// The key for the engine's current version; `None` until it was first ready. While the
    /// server is down or restarting, the last version stands, so its catalog can still be
    /// served stale after the refresh fails; but not the last grant: a new one keys the
    /// catalog anew under that version (a narrower grant must not be shown what a wider one
    /// listed because the server happens to be down).
    pub(crate) fn key(&mut self, engine: &Engine) -> Option<CacheKey> {
        let version = match (engine.state(), self.key) {
            (crate::engine::ServerState::Ready(_, v), _) => v,
            (_, Some((_, k))) if !self.key_stale => return Some(k),
            (_, Some((v, _))) => v,
            (_, None) => return None,
        };
        if let Some((v, k)) = self.key {
            if v == version && !self.key_stale {
                return Some(k);
            }
        }
        let scopes: Vec<&str> = match &self.granted {
            Some(granted) => granted.split_ascii_whitespace().collect(),
            None => self.scopes.iter().map(String::as_str).collect(),
        };
        let parts = KeyParts {
            server: &self.identity.0,
            transport: self.transport,
            protocol_version: version.as_str(),
            principal: self.principal.as_deref(),
            granted_scopes: &scopes,
            tenant: self.tenant.as_deref(),
            client_capabilities: engine.declared_capabilities(),
            extensions: &engine.config().extensions,
        };
        // The capabilities were checked to be a JSON object by `Config::check`.
        let k = CacheKey::new(&parts).ok()?;
        if let Some((_, old)) = self.key.filter(|(_, old)| *old != k) {
            self.forget_key_state();
            self.earlier_keys.retain(|e| *e != k && *e != old);
            if self.earlier_keys.len() >= EARLIER_KEYS {
                self.earlier_keys.remove(0);
            }
            self.earlier_keys.push(old);
        }
        self.key = Some((version, k));
        self.key_stale = false;
        Some(k)
    }

    /// What this context knows from listings under its last key and must not carry to a
    /// new one (a narrower grant must not search, or be served once, what a wider one
    /// listed): the search index, the walk's held pages and answer, and the note of the
    /// stored catalog adopted. The last announced catalog stays the baseline of the change
    /// events, so the host hears what the new key lists differently.
    fn forget_key_state(&mut self) {
        self.search = SearchIndex::new();
        for state in &mut self.kinds {
            state.refresher.forget_walk();
            state.adopted = None;
        }
    }

    /// Whether the search index is the current key's: not when a new grant or a new
    /// protocol version will key the catalog anew and the key was not made again yet. (While
    /// the server is down the last version stands, and so does the index of its last key
    /// unless the grant changed.)
    pub(crate) fn search_is_current(&self, engine: &Engine) -> bool {
        let keyed = match engine.state() {
            crate::engine::ServerState::Ready(_, v) => self.key.is_some_and(|(kv, _)| kv == v),
            _ => true,
        };
        keyed && !self.key_stale
    }

    /// Tells the catalog the scope granted with the server's current token (`None`: no
    /// OAuth token). A change makes the next key anew: a narrower or wider grant may change
    /// what the server lists, so its catalogs are cached apart. Allocates only on a change.
    pub(crate) fn note_granted(&mut self, granted: Option<&str>) {
        if self.granted.as_deref() != granted {
            self.granted = granted.map(str::to_owned);
            self.key_stale = true;
        }
    }
}

/// A change as the host may see it: the tools the configuration disables on the server
/// `base` are left out of it, as out of every view of the catalog; `None` when nothing else
/// changed.
fn shown_change(
    change: CatalogChange,
    kind: CatalogKind,
    authz: &super::authz::Gate,
    base: ServerId,
) -> Option<CatalogChange> {
    if kind != CatalogKind::Tools || !authz.has_disabled(base) {
        return Some(change);
    }
    change.retain(|id| !authz.is_disabled(base, id))
}

/// How many earlier keys of one context a change notice reaches ([`ServerCatalog`]): grants
/// that come and go (a step-up and back) and a version renegotiated by a restart are few.
const EARLIER_KEYS: usize = 4;

/// The host-wide part: the store and the change events waiting for the host.
#[derive(Debug)]
pub(crate) struct ClientCache {
    store: Store,
    eager: bool,
    changes: VecDeque<(ServerId, CatalogKind, CatalogChange)>,
    /// The [`CatalogChange::weight`] of every change in `changes`.
    change_bytes: usize,
    /// The change last handed out by `poll_event` (its event borrows it).
    current: Option<CatalogChange>,
    /// The host's persistent store (with the wall clock it was given and the era verdicts),
    /// and the catalogs it was asked for already, at most `asked_limit` of them.
    persist: Option<Box<dyn Persist>>,
    asked: HashSet<(CacheKey, CatalogKind)>,
    asked_limit: usize,
    /// The cache's share of every tick, set by the first use of the cache (a need, a watch,
    /// a configured cache). Until then nothing can have been fetched or watched, so the tick
    /// has nothing to do; and because only the cache's own entry points name the function, a
    /// program that never uses the cache does not link it (about 95 KB of a minimal client).
    pump: Option<fn(&mut Client, Instant)>,
}

/// The host's persistent store with what only a program that installs one needs: the wall
/// clock that dates its entries (they outlive this process's `Instant`s; the shell reads it,
/// [`Client::handle_wall_clock`]) and the keeping of
/// the servers' era verdicts. The core reaches it through `dyn`, and only
/// [`Client::set_capability_store`] makes one, so a program that installs no store does not
/// link the verdict code.
trait Persist {
    /// The host's store.
    fn store(&mut self) -> &mut dyn CapabilityStore;
    /// The wall-clock time at `now`, from the shell's last reading.
    fn wall(&self, now: Instant) -> SystemTime;
    /// Takes a new reading of the wall clock.
    fn set_wall(&mut self, anchor: WallAnchor);
    /// The era verdict the store holds for a server context, checked (see
    /// [`verdict_store`](super::verdict_store)) at wall-clock time `wall`.
    fn stored_verdict(
        &mut self,
        identity: &str,
        http: bool,
        config: &crate::config::Config,
        wall: SystemTime,
    ) -> Option<SavedVerdict>;
    /// Keeps the store's copy of the server's era verdict in step with the engine: files a
    /// verdict the engine probed, and marks stale one the server contradicted. `false` when
    /// a probed verdict could not be filed yet (the next pass tries again).
    fn keep_verdict(&mut self, now: Instant, catalog: &mut ServerCatalog, engine: &Engine) -> bool;
}

impl fmt::Debug for dyn Persist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<persistent store>")
    }
}

/// The one [`Persist`]: a host's store and the shell's last reading of the wall clock.
struct Persistent<S> {
    store: S,
    wall: WallAnchor,
}

impl<S: CapabilityStore> Persist for Persistent<S> {
    fn store(&mut self) -> &mut dyn CapabilityStore {
        &mut self.store
    }

    fn wall(&self, now: Instant) -> SystemTime {
        self.wall.at(now)
    }

    fn set_wall(&mut self, anchor: WallAnchor) {
        self.wall = anchor;
    }

    fn stored_verdict(
        &mut self,
        identity: &str,
        http: bool,
        config: &crate::config::Config,
        wall: SystemTime,
    ) -> Option<SavedVerdict> {
        let transport = if http { key::Transport::Http } else { key::Transport::Stdio };
        let sk = super::verdict_store::key(identity, transport, config)?;
        let entry = self.store.get(&sk)?;
        super::verdict_store::verdict(&sk, entry, wall)
    }

    fn keep_verdict(&mut self, now: Instant, catalog: &mut ServerCatalog, engine: &Engine) -> bool {
        if catalog.principal.is_some() {
            // A lane's verdict is its principal's: its probe carried the principal's
            // credentials, and the server may answer each principal its own instructions and
            // capabilities. The store's entry is the server's own context's.
            return true;
        }
        let next = match (engine.verdict_origin(), catalog.verdict) {
            (VerdictOrigin::Probed, KeptVerdict::Unknown | KeptVerdict::Loaded) => {
                KeptVerdict::Filed
            }
            (VerdictOrigin::Legacy, KeptVerdict::Loaded | KeptVerdict::Filed) => {
                KeptVerdict::Unknown
            }
            _ => return true,
        };
        let config = engine.config();
        let Some(sk) = super::verdict_store::key(&catalog.identity.0, catalog.transport, config)
        else {
            return true;
        };
        let verdict = match next {
            KeptVerdict::Filed => engine.verdict(now, self.wall(now)),
            _ => None,
        };
        let ready = matches!(engine.state(), crate::engine::ServerState::Ready(..));
        if next == KeptVerdict::Filed && verdict.is_none() && !ready {
            // Not ready again yet (a restart): looked at again once it is.
            return false;
        }
        match verdict {
            Some(v) => self.store.put(&sk, &super::verdict_store::entry(&sk, &v)),
            // Legacy now, or a probe whose verdict is not to be kept (`ttlMs` 0 or missing):
            // the store's goes. (Left to a later pass, the server was taken again after
            // every input for as long as it lived, its store key built each time.)
            None => self.store.mark_stale(&sk),
        }
        catalog.verdict = next;
        true
    }
}

impl ServerCatalog {
    /// The calls the cache itself has in flight on this server (page fetches, the listen
    /// stream): their ends are the cache's, never the host's events.
    pub(crate) fn own_calls(&self) -> impl Iterator<Item = CallId> + '_ {
        self.kinds.iter().filter_map(|k| k.call).chain(self.listen)
    }
}

impl ClientCache {
    /// Gives back the refreshes a removed server's walks hold in the store, so that a server
    /// sharing the key fetches instead of waiting for a listing that never comes.
    pub(crate) fn release_refreshes(&mut self, catalog: &mut ServerCatalog) {
        for state in &mut catalog.kinds {
            state.refresher.release(&mut self.store);
        }
    }

    pub(crate) fn new(config: CacheConfig) -> io::Result<Self> {
        let store = Store::new(StoreConfig {
            max_entries: config.max_entries,
            max_bytes: config.max_bytes,
            default_ttl: config.default_ttl,
            max_ttl: config.max_ttl,
            max_stale: config.max_stale,
            max_refreshes: config.max_refreshes,
        })
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        Ok(ClientCache {
            store,
            eager: config.eager_refresh,
            changes: VecDeque::new(),
            change_bytes: 0,
            current: None,
            persist: None,
            asked: HashSet::new(),
            // Four times the pages memory can hold: more contexts than memory can serve.
            asked_limit: config.max_entries.saturating_mul(4),
            pump: None,
        })
    }

    /// How many catalogs the persistent store was asked for, as the core remembers them.
    #[cfg(test)]
    pub(crate) fn asked_len(&self) -> usize {
        self.asked.len()
    }

    /// Makes every tick pump the cache from now on.
    pub(crate) fn arm(&mut self) {
        self.pump = Some(Client::pump_armed);
    }

    /// Whether the host installed a persistent store.
    pub(crate) fn has_store(&self) -> bool {
        self.persist.is_some()
    }

    /// Queues a change event for the host. At most [`MAX_QUEUED_CHANGES`] wait: a host that
    /// never drains `poll_event` (the blocking helpers only) while a server's list flaps
    /// would otherwise keep every change's names for good. The oldest go first; the catalog
    /// itself is always current.
    pub(crate) fn push_change(
        &mut self,
        server: ServerId,
        kind: CatalogKind,
        change: CatalogChange,
    ) {
        self.change_bytes += change.weight();
        self.changes.push_back((server, kind, change));
        // By count and by bytes: a server that renames a large catalog at each refresh made
        // each change hold two catalogs' names, up to gigabytes at the count's bound.
        while self.changes.len() > MAX_QUEUED_CHANGES
            || (self.change_bytes > MAX_QUEUED_CHANGE_BYTES && self.changes.len() > 1)
        {
            log::debug!("catalog change events not taken: dropping the oldest");
            if let Some((_, _, old)) = self.changes.pop_front() {
                self.change_bytes -= old.weight();
            }
        }
    }

    /// The change events waiting, for `poll_event`.
    pub(crate) fn has_changes(&self) -> bool {
        !self.changes.is_empty()
    }

    /// Takes the next change event (the event borrows the cache).
    pub(crate) fn next_change(&mut self) -> Option<(ServerId, HostEvent<'_>)> {
        let (id, kind, change) = self.changes.pop_front()?;
        self.change_bytes -= change.weight();
        let change = self.current.insert(change);
        Some((
            id,
            Event::Client(match kind {
                CatalogKind::Tools => ClientEvent::ToolsChanged(change),
                CatalogKind::Prompts => ClientEvent::PromptsChanged(change),
                CatalogKind::Resources | CatalogKind::ResourceTemplates => {
                    ClientEvent::ResourcesChanged(change)
                }
            }),
        ))
    }

    /// A change notification for one catalog: stale in memory and in the persistent store.
    fn mark_stale(&mut self, now: Instant, key: &CacheKey, kind: CatalogKind) {
        self.store.mark_stale(now, key, kind);
        if let (Some(persist), Some(entry)) = (self.persist.as_mut(), entry_kind(kind)) {
            for scope in [CacheScope::Private, CacheScope::Public] {
                persist.store().mark_stale(&store_key(key, entry, scope));
            }
        }
    }

    /// Fills memory from the persistent store, once per catalog and context, where memory
    /// holds nothing of the context's own (private) list: entries filed under another key are
    /// refused, expired pages dropped and so are pages expiring further off than `max_ttl`
    /// (and [`STORE_CLOCK_SKEW`]), and the rest stored with the lifetime they have left.
    /// The public entry goes first and the private one after, so that, as in memory, the
    /// principal's own list is what it is served (a page stored in one scope supersedes the
    /// other's copy); a public list already in memory (another principal's) is newer than
    /// the stored one and is kept.
    fn load(&mut self, now: Instant, key: &CacheKey, kind: CatalogKind) {
        let (Some(persist), Some(entry_kind)) = (self.persist.as_mut(), entry_kind(kind)) else {
            return;
        };
        if self.store.has_list(key, kind, CacheScope::Private) || self.asked.contains(&(*key, kind))
        {
            return;
        }
        // Every context a long-running host meets (each principal, tenant and grant of each
        // server) is a key here: past the bound they are forgotten together, and a context
        // asked again costs the store one more read, not a wrong answer (the entry passes
        // the same checks).
        if self.asked.len() >= self.asked_limit {
            self.asked.clear();
        }
        self.asked.insert((*key, kind));
        let wall = persist.wall(now);
        for scope in [CacheScope::Public, CacheScope::Private] {
            if scope == CacheScope::Public && self.store.has_list(key, kind, scope) {
                continue;
            }
            let sk = store_key(key, entry_kind, scope);
            let Some(entry) = persist.store().get(&sk) else { continue };
            if entry.key != sk.id() || entry.public != sk.is_public() {
                log::debug!("capability store: an entry filed under another key was refused");
                continue;
            }
            let longest = self.store.config().max_ttl.saturating_add(STORE_CLOCK_SKEW);
            for page in entry.pages {
                // Expired, or further off than any page can live (written by a clock set
                // ahead, or a file edited by hand): dropped. Capped at `max_ttl` instead, it
                // was served for good by every host that lives less than `max_ttl`, and never
                // listed again to be saved over. (Within the skew allowed, the store caps it.)
                let left = page.expires.duration_since(wall).unwrap_or_default();
                if left.is_zero() || left > longest {
                    continue;
                }
                let Ok(mut parsed) = parse_page(kind, &page.json) else {
                    log::debug!("capability store: an unreadable page was dropped");
                    continue;
                };
                let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
                parsed.hints = CacheHints { ttl: TtlHint::Millis(ms), scope };
                self.store.restore(now, key, kind, page.cursor.as_deref(), parsed);
            }
        }
    }

    /// The era verdict the persistent store holds for a server context, checked at
    /// wall-clock time `wall` (see [`verdict_store`](super::verdict_store)); `None` without a
    /// store.
    pub(crate) fn stored_verdict(
        &mut self,
        identity: &str,
        http: bool,
        config: &crate::config::Config,
        wall: SystemTime,
    ) -> Option<SavedVerdict> {
        self.persist.as_mut()?.stored_verdict(identity, http, config, wall)
    }

    /// Hands the catalog to the persistent store when a listing left all of it fresh: one
    /// entry per partition its pages are in.
    fn save(&mut self, now: Instant, key: &CacheKey, kind: CatalogKind) {
        let (Some(persist), Some(entry_kind)) = (self.persist.as_mut(), entry_kind(kind)) else {
            return;
        };
        let wall = persist.wall(now);
        for scope in [CacheScope::Private, CacheScope::Public] {
            let pages = self.store.fresh_pages(now, key, kind, scope);
            if pages.is_empty() {
                continue;
            }
            let sk = store_key(key, entry_kind, scope);
            let pages = pages
                .iter()
                .map(|p| StoredPage {
                    cursor: p.cursor().map(str::to_owned),
                    json: page_json(kind, p),
                    expires: wall + p.expires().saturating_duration_since(now),
                })
                .collect();
            persist.store().put(&sk, &StoredEntry { key: sk.id(), public: sk.is_public(), pages });
        }
    }

    /// Marks stale every catalog whose `list_changed` count moved since the last look.
    fn notice_changes(&mut self, now: Instant, catalog: &mut ServerCatalog, engine: &Engine) {
        let counts = engine.list_changes();
        if counts == catalog.seen_changes {
            return;
        }
        let key = catalog.key(engine);
        for (i, kind) in KINDS.into_iter().enumerate() {
            if counts[i] == catalog.seen_changes[i] {
                continue;
            }
            // The server's list changed for every grant and version this context knew it
            // under, not only the current one.
            for earlier in &catalog.earlier_keys {
                self.mark_stale(now, earlier, kind);
            }
            self.stale_kind(now, catalog, key, kind);
        }
        catalog.seen_changes = counts;
    }

    /// One catalog of the server is stale (a change notice, or a gap between listen streams
    /// that may have hidden one): in memory and in the persistent store, and so is what the
    /// last walk held for one use (a listing the store would not keep: no longer what a
    /// checked call or a policy reads). An eager cache refreshes it.
    fn stale_kind(
        &mut self,
        now: Instant,
        catalog: &mut ServerCatalog,
        key: Option<CacheKey>,
        kind: CatalogKind,
    ) {
        let state = &mut catalog.kinds[slot(kind)];
        state.refresher.before_change(now, &self.store, key.as_ref());
        if let Some(key) = key {
            self.mark_stale(now, &key, kind);
        }
        let state = &mut catalog.kinds[slot(kind)];
        state.eager_due |= self.eager && state.needed;
    }
}

impl ServerCore {
    /// The server's cache key under the scope its OAuth token was last said to be granted
    /// with ([`Client::note_granted_scope`]).
    pub(crate) fn cache_key(&mut self) -> Option<CacheKey> {
        self.catalog.key(&self.engine)
    }
}

/// What a need found, without borrowing.
pub(crate) enum Need {
    /// The store has it (fresh, or stale after a failed refresh).
    Cached,
    /// A listing that may not be cached, kept for this answer.
    OneUse,
    /// A refresh is on the wire.
    Waiting,
}

impl Client {
    /// Installs a persistent store under the capability cache: catalogs it holds are served
    /// without listing (after the checks in [`CapabilityStore`]), and every catalog a listing
    /// leaves fresh is handed to it. Replaces the last one.
    ///
    /// What the store keeps outlives this process's `Instant`s, so it is dated by the wall
    /// clock: `wall` is the wall-clock time at `now`. The core reads no clock; from this
    /// reading it counts on with the `now` of each verb, which a clock set by hand or a
    /// suspended machine leaves behind, so the program gives a new reading from time to time
    /// ([`handle_wall_clock`](Self::handle_wall_clock); [`Host`] does, every
    /// second).
    pub fn set_capability_store(
        &mut self,
        store: impl CapabilityStore + 'static,
        now: Instant,
        wall: SystemTime,
    ) {
        let wall = WallAnchor::new(now, wall);
        self.cache.persist = Some(Box::new(Persistent { store, wall }));
        self.cache.asked.clear();
        self.cache.arm();
        // Verdicts probed before the store came are filed at the next pass.
        self.servers.mark_all_for(Pass::AfterInput);
    }

    /// A new reading of the wall clock, which dates what the capability store keeps: `wall`
    /// is the wall-clock time at `now`. Does nothing without a store
    /// ([`set_capability_store`](Self::set_capability_store)).
    pub fn handle_wall_clock(&mut self, now: Instant, wall: SystemTime) {
        if let Some(persist) = self.cache.persist.as_mut() {
            persist.set_wall(WallAnchor::new(now, wall));
        }
    }

    /// Makes every [`handle_timeout`](Self::handle_timeout) and
    /// [`poll_event`](Self::poll_event) pump the cache from now on (a core made with a
    /// configured cache).
    pub(crate) fn arm_cache(&mut self) {
        self.cache.arm();
    }

    /// The server's protocol capabilities: the `capabilities` object of its `server/discover`
    /// (modern) or `initialize` (legacy) result, as JSON, once ready. Borrowed from the kept
    /// result: nothing is listed, called or allocated.
    pub fn capabilities(&self, server: ServerId) -> Option<&str> {
        let info = self.server(server)?.engine.server_info()?;
        let caps = crate::proto::json::parse(info.as_bytes()).ok()?.get("capabilities")?;
        Some(caps.text())
    }

    /// The scope granted with the server's current OAuth token (`None`: no OAuth token), as
    /// the shell's driver last reported it. A change makes the next cache key anew: a
    /// narrower or wider grant may change what the server lists, so its catalogs are cached
    /// apart. Allocates only on a change.
    pub fn note_granted_scope(&mut self, server: ServerId, granted: Option<&str>) {
        if let Some(s) = self.server_mut(server) {
            s.catalog.note_granted(granted);
        }
    }

    /// The tool catalog if the cache can answer now; otherwise starts (or joins) its refresh
    /// and returns `Ok(None)`: move the bytes, then ask again. Before the server was first
    /// ready its key is unknown: `Err(CatalogError::NotReady)`.
    pub fn tool_catalog(
        &mut self,
        now: Instant,
        server: ServerId,
    ) -> Result<Option<CatalogView<'_>>, CatalogError> {
        self.catalog(now, server, CatalogKind::Tools)
    }

    /// As [`tool_catalog`](Self::tool_catalog), for any catalog kind.
    pub(crate) fn catalog(
        &mut self,
        now: Instant,
        server: ServerId,
        kind: CatalogKind,
    ) -> Result<Option<CatalogView<'_>>, CatalogError> {
        self.pump_catalogs(now);
        match self.need(server, kind, now)? {
            Need::Waiting => Ok(None),
            how => self.view(server, kind, now, how).map(Some),
        }
    }

    /// `true` when the server has had a cache key (it was ready once): its catalog may be
    /// served stale while it is down.
    pub(crate) fn has_cache_key(&self, server: ServerId) -> bool {
        self.server(server).is_some_and(|s| s.catalog.key.is_some())
    }

    /// One tool's definition (canonical JSON) from the cache (or the capability store, when
    /// memory holds nothing of the catalog), when cached and servable; it never lists. A fresh
    /// hit allocates nothing.
    pub fn tool(&mut self, now: Instant, server: ServerId, name: &str) -> Option<&str> {
        if self.authz.is_disabled(self.lanes.caller(server).0, name) {
            return None;
        }
        self.cached_tool(now, server, name).map(Item::json)
    }

    /// The cached definition of one tool, as [`tool`](Self::tool) finds it.
    pub(crate) fn cached_tool(
        &mut self,
        now: Instant,
        server: ServerId,
        name: &str,
    ) -> Option<&Item> {
        let s = self.servers.get_mut(server.index).filter(|s| s.generation == server.generation)?;
        // A change the server announced since the last pass of the cache makes the page
        // stale now, not at that pass.
        self.cache.notice_changes(now, &mut s.catalog, &s.engine);
        let key = s.cache_key()?;
        self.cache.load(now, &key, CatalogKind::Tools);
        match self.cache.store.find_item(now, &key, CatalogKind::Tools, name) {
            Ok(ItemLookup::Fresh(item)) | Ok(ItemLookup::Stale { item, .. }) => Some(item),
            _ => None,
        }
    }

    /// [`cached_tool`](Self::cached_tool), else the tool as the last listing handed to the host
    /// had it (a listing the server marked not cacheable, `ttlMs: 0`, is still what the host
    /// saw): what a checked call checks against.
    pub(crate) fn listed_tool(
        &mut self,
        now: Instant,
        server: ServerId,
        name: &str,
    ) -> Option<&Item> {
        if self.cached_tool(now, server, name).is_some() {
            return self.cached_tool(now, server, name);
        }
        let s = self.servers.get_mut(server.index).filter(|s| s.generation == server.generation)?;
        let key = s.cache_key()?;
        let refresher = &s.catalog.kinds[slot(CatalogKind::Tools)].refresher;
        let (items, _) = refresher.one_use_items(now, &self.cache.store, &key)?;
        items.into_iter().find(|item| item.id() == name)
    }

    /// The `k` tools of the server's last listed catalog that best match `query` (BM25 over
    /// name, title, description and annotation words; ties by name), best first, with their
    /// scores. The index follows every refresh; it is empty until the tools were listed.
    pub fn search_tools(&self, server: ServerId, query: &str, k: usize) -> Vec<(&str, f64)> {
        let Some(s) = self.server(server) else { return Vec::new() };
        if !s.catalog.search_is_current(&s.engine) {
            return Vec::new();
        }
        let base = self.lanes.caller(server).0;
        if !self.authz.has_disabled(base) {
            return s
                .catalog
                .search
                .search(query, k)
                .into_iter()
                .map(|h| (h.name, h.score))
                .collect();
        }
        // Disabled tools are not offered: ask for as many more as could be left out.
        let more = k.saturating_add(self.authz.disabled_count(base));
        let hits = s.catalog.search.search(query, more).into_iter();
        let hits = hits.filter(|h| !self.authz.is_disabled(base, h.name));
        hits.take(k).map(|h| (h.name, h.score)).collect()
    }

    /// Keeps the server's catalogs current: on a modern server, opens a `subscriptions/listen`
    /// stream for tool, prompt and resource list changes (once ready), and opens it again with
    /// backoff (200 ms doubling to 30 s) after it ends, abnormally or gracefully (a server
    /// sends its graceful end when it shuts down), marking every catalog stale since changes
    /// may have been missed. The host cancelling the stream, or a server without the method
    /// (`-32601`), stops it; each stream's acknowledgement reaches the host as
    /// [`Event::Subscribed`], whose call is the one to cancel (the
    /// stream's end is the cache's own). Legacy servers send their changes unasked: for them
    /// this does nothing more.
    /// The re-listen deadline is part of [`poll_timeout`](Self::poll_timeout).
    pub fn watch_catalogs(&mut self, now: Instant, server: ServerId) -> Result<(), RequestError> {
        let s = self.server_mut(server).ok_or(RequestError::Closed)?;
        s.catalog.watching = true;
        self.cache.arm();
        self.pump_catalogs(now);
        Ok(())
    }

    /// Counters of the capability cache: hits, misses, stale serves, refreshes, evictions.
    pub fn cache_stats(&self) -> CacheStats {
        let s = self.cache.store.stats();
        CacheStats {
            hits: s.hits,
            misses: s.misses,
            stale_serves: s.stale_serves,
            refreshes: s.walks,
            page_fetches: s.refreshes,
            evictions: s.evictions,
        }
    }

    /// Decides what a need gets, starting a refresh when one is due. Borrows nothing after.
    pub(crate) fn need(
        &mut self,
        server: ServerId,
        kind: CatalogKind,
        now: Instant,
    ) -> Result<Need, CatalogError> {
        self.cache.arm();
        let s = self
            .servers
            .get_mut(server.index)
            .filter(|s| s.generation == server.generation)
            .ok_or(CatalogError::UnknownServer)?;
        // Asked for, even before the server is ready: kept current from now on when eager.
        s.catalog.kinds[slot(kind)].needed = true;
        // A change announced since the last pass of the cache: stale now (see `cached_tool`).
        self.cache.notice_changes(now, &mut s.catalog, &s.engine);
        let key = s.cache_key().ok_or(CatalogError::NotReady)?;
        self.cache.load(now, &key, kind);
        let store = &mut self.cache.store;
        let state = &mut s.catalog.kinds[slot(kind)];
        let mut answer = state.refresher.need(now, store, &key).map_err(need_error)?;
        match state.send_fetch(&mut s.engine, store, &key, now) {
            Some(true) if !self.unflushed.contains(&server.index) => {
                self.unflushed.push(server.index);
            }
            Some(true) => {}
            // Failed at once: the old catalog answers if it still may, else the failure does.
            Some(false) => answer = state.refresher.need(now, store, &key).map_err(need_error)?,
            None => {}
        }
        Ok(match answer {
            Answer::Cached => Need::Cached,
            Answer::OneUse => Need::OneUse,
            Answer::Waiting => {
                state.fetched_for_need = true;
                Need::Waiting
            }
        })
    }

    pub(crate) fn view(
        &mut self,
        server: ServerId,
        kind: CatalogKind,
        now: Instant,
        how: Need,
    ) -> Result<CatalogView<'_>, CatalogError> {
        let s = self
            .servers
            .get_mut(server.index)
            .filter(|s| s.generation == server.generation)
            .ok_or(CatalogError::UnknownServer)?;
        let key = s.cache_key().ok_or(CatalogError::NotReady)?;
        // Tools the configuration disables are left out of every view of the catalog.
        let base = self.lanes.caller(server).0;
        let authz = &self.authz;
        let shown = |it: &&Item| kind != CatalogKind::Tools || !authz.is_disabled(base, it.id());
        if let Need::OneUse = how {
            let refresher = &s.catalog.kinds[slot(kind)].refresher;
            let (items, stale_for) = refresher
                .one_use_items(now, &self.cache.store, &key)
                .ok_or(CatalogError::NotReady)?;
            let (items, _) = unique_last_wins(items.into_iter().filter(shown));
            return Ok(CatalogView { items, stale_for, cached: false });
        }
        // A catalog stored by another context's refresh (a shared public listing) becomes this
        // context's before it is served: its search index and change events follow it.
        let received = self.cache.store.list_received(now, &key, kind);
        let state = &mut s.catalog.kinds[slot(kind)];
        if received.is_some() && state.adopted != received {
            state.adopted = received;
            let search = (kind == CatalogKind::Tools).then_some(&mut s.catalog.search);
            let change = state.refresher.adopt(now, &self.cache.store, &key, search);
            if let Some(change) = change.and_then(|c| shown_change(c, kind, authz, base)) {
                self.cache.push_change(server, kind, change);
            }
        }
        match self.cache.store.list_pages(now, &key, kind).map_err(store_error)? {
            ListLookup::Pages { pages, stale_for } => {
                if !std::mem::take(&mut s.catalog.kinds[slot(kind)].fetched_for_need) {
                    let fetched = pages.iter().map(|p| p.received()).min().unwrap_or(now);
                    let age = now.saturating_duration_since(fetched);
                    self.records.cache_hit(server.index, &s.engine, method(kind), age);
                }
                // Each page is in id order: the view, one sorted list of the pages joined
                // (a tool on two pages once, as the later one defines it).
                let (items, _) =
                    unique_last_wins(pages.iter().flat_map(|p| p.items()).filter(shown));
                Ok(CatalogView { items, stale_for, cached: true })
            }
            ListLookup::Refresh { .. } => Err(CatalogError::NotReady),
        }
    }

    /// Keeps the capability store's copy of the era verdict of each server in `work` in step
    /// (every round, so a host that only uses the blocking helpers files it too); nothing
    /// without a store.
    pub(crate) fn keep_verdicts(&mut self, now: Instant, work: &[usize]) {
        let Some(persist) = self.cache.persist.as_mut() else { return };
        for &index in work {
            // Only the catalog's note of what the store holds changes: nothing a round or an
            // event turn looks at, so the server is not marked for them.
            let Some(s) = self.servers.get_mut_unmarked(index) else { continue };
            if !persist.keep_verdict(now, &mut s.catalog, &s.engine) {
                self.servers.mark_for(index, Pass::AfterInput);
            }
        }
    }

    /// Whether [`pump_catalogs`](Self::pump_catalogs) has anything to do (the cache is in use
    /// and a server changed since its last run): callers on the hot path read the clock for
    /// it only then.
    pub(crate) fn has_catalog_work(&self) -> bool {
        self.cache.pump.is_some() && self.servers.has_pass_work(Pass::Catalogs)
    }

    /// The cache's share of a tick, once the cache was used ([`ClientCache::arm`]).
    pub(crate) fn pump_catalogs(&mut self, now: Instant) {
        if let Some(pump) = self.cache.pump {
            pump(self, now);
        }
    }

    /// Takes the answers to catalog page requests out of the engines (the host never sees them
    /// as events), hands them to the refresh walks, sends the next pages they ask for, and
    /// starts the eager refreshes that are due.
    ///
    /// Only at the servers something happened to since the last run ([`Pass::Catalogs`]): a
    /// page answer, a change notice or a listen stream's end comes as input, a re-listen's
    /// backoff ends as a deadline of the server's, and a need is a command to it. Every one
    /// of those marks it. A host that keeps many servers pays for the ones that moved.
    fn pump_armed(&mut self, now: Instant) {
        let mut work = std::mem::take(&mut self.pass_work);
        self.servers.take_pass(Pass::Catalogs, &mut work);
        let (cache, records, unflushed) = (&mut self.cache, &mut self.records, &mut self.unflushed);
        let (authz, lanes) = (&self.authz, &self.lanes);
        for &index in &work {
            let Some(s) = self.servers.get_mut_unmarked(index) else { continue };
            if s.catalog.is_quiet(&s.engine) {
                // The usual case for a server the host called: nothing of the cache's moved.
                continue;
            }
            let id = ServerId { index, generation: s.generation };
            let mut started = false;
            // Whether the engine or the re-listen deadline changed: then the next round looks
            // at the server (a look that found nothing to do leaves it alone).
            let mut changed = false;
            let relisten_before = s.catalog.relisten_deadline(&s.engine);
            // First, so the key below and the helpers' keys follow the current grant.
            let key = s.cache_key();
            // The era its pages were listed in: the key's, whatever the engine is now (a
            // server lost since its reply knows none, and a 2026 page without `ttlMs` read
            // as of no era was kept for the default lifetime).
            let modern = s.catalog.keyed_era() == Some(Era::Modern);
            cache.notice_changes(now, &mut s.catalog, &s.engine);
            for kind in KINDS {
                let state = &mut s.catalog.kinds[slot(kind)];
                let Some(key) = key else { continue };
                if let Some(call) = state.call {
                    let event = s.engine.take_call_event(call);
                    if let Some(e) = &event {
                        records.event(index, e);
                    }
                    let result = match event {
                        Some(Event::CallDone { result, .. }) => parse_page(kind, result.json())
                            .map(|page| page.lifetime_in_era(modern))
                            .map_err(|_| CatalogError::Listing(PeerError::InvalidResult.into())),
                        Some(Event::CallFailed { error, .. }) => Err(CatalogError::Listing(error)),
                        _ => continue,
                    };
                    changed = true;
                    state.call = None;
                    let store = &mut cache.store;
                    let change = match result {
                        Err(CatalogError::Listing(CallError::Protocol(e)))
                            if e.code == RpcError::INVALID_PARAMS =>
                        {
                            let e = CatalogError::Listing(CallError::Protocol(e));
                            state.refresher.cursor_rejected(now, store, &key, e);
                            None
                        }
                        result => {
                            let search =
                                (kind == CatalogKind::Tools).then_some(&mut s.catalog.search);
                            state.refresher.on_page(now, store, &key, result, search)
                        }
                    };
                    let base = lanes.caller(id).0;
                    if let Some(change) = change.and_then(|c| shown_change(c, kind, authz, base)) {
                        cache.push_change(id, kind, change);
                    }
                    cache.save(now, &key, kind);
                } else if state.eager_due && state.eager_after.is_none_or(|t| t <= now) {
                    state.eager_due = false;
                    state.eager_after = Some(later(now, EAGER_FLOOR));
                    if let Err(e) = state.refresher.refresh_eagerly(now, &mut cache.store, &key) {
                        log::debug!("eager catalog refresh could not start: {e:?}");
                    }
                }
                let state = &mut s.catalog.kinds[slot(kind)];
                if state.refresher.has_fetch() {
                    let sent = state.send_fetch(&mut s.engine, &mut cache.store, &key, now);
                    started |= sent == Some(true);
                    changed |= sent.is_some();
                }
            }
            if let Some(call) = s.catalog.listen {
                if let Some(e) = s.engine.take_call_event(call) {
                    records.event(index, &e);
                    listen_ended(&mut s.catalog, e, now);
                    changed = true;
                }
            }
            started |= relisten(cache, &mut s.catalog, &mut s.engine, now);
            if started && !unflushed.contains(&index) {
                unflushed.push(index);
            }
            changed |= started || s.catalog.relisten_deadline(&s.engine) != relisten_before;
            // A re-listen asks for an eager refresh after the kinds were looked at: the next
            // run starts it, as it would have with every server looked at every run. One that
            // waits for a listing on the wire waits for its answer, which marks the server:
            // marked every run meanwhile, the server kept `has_events` true, and a loop that
            // looks there first spun for as long as the listing took.
            // None before the server has a key (not ready yet): a change it announced that
            // early is refreshed once it is ready, which its input marks it for; marked every
            // run meanwhile, it kept `has_events` true with no event to hand out, and a loop
            // that looks there first spun until then (for good, if it never got ready).
            let eager = |k: &&KindState| k.eager_due && k.call.is_none();
            let eager_left = key.is_some()
                && s.catalog
                    .kinds
                    .iter()
                    .filter(eager)
                    .any(|k| k.eager_after.is_none_or(|t| t <= now));
            // One held back by the floor is a deadline instead: marked every run meanwhile,
            // the server would keep the loop busy for as long as the floor.
            let held = s.catalog.kinds.iter().filter(eager).filter_map(|k| k.eager_after);
            let held = if key.is_some() { held.filter(|&t| t > now).min() } else { None };
            changed |= held != s.catalog.eager_held;
            s.catalog.eager_held = held;
            if changed {
                self.servers.mark_changed(index);
            }
            if eager_left {
                self.servers.mark_for(index, Pass::Catalogs);
            }
        }
        self.pass_work = work;
    }
}

impl ServerCatalog {
    /// Whether the pump has nothing to do here: no page request on the wire, refresh due or
    /// page to ask for in any catalog, no listen stream and no watch, no change notice
    /// unseen. Each is a condition the pump acts on; with none of them its look changes
    /// nothing (the key it would make is made where it is needed).
    /// When an eager refresh the floor held back is due ([`EAGER_FLOOR`]).
    pub(crate) fn eager_deadline(&self) -> Option<Instant> {
        self.eager_held
    }

    fn is_quiet(&self, engine: &Engine) -> bool {
        self.kinds.iter().all(|k| k.call.is_none() && !k.eager_due && !k.refresher.has_fetch())
            && self.listen.is_none()
            && !self.watching
            && engine.list_changes() == self.seen_changes
    }

    /// When a broken listen stream of a watched server is due to be opened again: a deadline
    /// of the host like any other, so a host waiting in `poll(None)` wakes for it. None while
    /// the server cannot listen (closed, restarting, degraded, not modern): the backoff would
    /// stay past and wake the host at once, forever; the server's becoming ready again is
    /// what lets [`relisten`] act.
    pub(crate) fn relisten_deadline(&self, engine: &Engine) -> Option<Instant> {
        let can_listen =
            self.watching && self.listen.is_none() && engine.era() == Some(Era::Modern);
        self.relisten_at.filter(|_| can_listen)
    }
}

/// Notes the end of a watched server's listen stream: the host's cancel or a server that has
/// no such method stops watching; any other end schedules a new stream with backoff. A
/// graceful end too: a server sends it when it shuts down (the TypeScript SDK's only end),
/// and one restarted or redeployed was watched no more, with nothing said to the host.
fn listen_ended(catalog: &mut ServerCatalog, ended: Event<'_>, now: Instant) {
    match ended {
        Event::CallFailed { error: CallError::Local(LocalError::Cancelled), .. } => {
            catalog.listen = None;
            catalog.watching = false;
        }
        // Asked again it says the same, and each new stream marks every catalog stale (what
        // changed while none was open): the server's `ttlMs` cut to the backoff's 30 s.
        Event::CallFailed { error: CallError::Protocol(e), .. }
            if e.code == RpcError::METHOD_NOT_FOUND =>
        {
            log::debug!("the server has no subscriptions/listen: catalogs are not watched");
            catalog.listen = None;
            catalog.watching = false;
        }
        Event::CallFailed { .. } | Event::CallDone { .. } => {
            match &ended {
                Event::CallFailed { error, .. } => {
                    log::debug!("listen stream broke ({}); listening again", error.name());
                }
                _ => log::debug!("listen stream ended by the server; listening again"),
            }
            catalog.listen = None;
            let lived = catalog.listen_opened.map(|t| now.saturating_duration_since(t));
            if lived.is_some_and(|d| d >= RELISTEN_MAX) {
                catalog.relisten_delay = RELISTEN_BASE;
            }
            catalog.relisten_at = now.checked_add(catalog.relisten_delay);
            catalog.relisten_delay = (catalog.relisten_delay * 2).min(RELISTEN_MAX);
        }
        _ => {}
    }
}

/// Opens the listen stream of a watched server when due. Returns `true` when it started a
/// request.
fn relisten(
    cache: &mut ClientCache,
    catalog: &mut ServerCatalog,
    engine: &mut Engine,
    now: Instant,
) -> bool {
    let due = catalog.relisten_at.is_none_or(|t| t <= now);
    if !catalog.watching || catalog.listen.is_some() || !due || engine.era() != Some(Era::Modern) {
        return false;
    }
    let filter = SubscriptionFilter {
        tools_list_changed: true,
        prompts_list_changed: true,
        resources_list_changed: true,
        ..Default::default()
    };
    match engine.listen(now, &filter, &CallOptions::default()) {
        Ok(call) => {
            catalog.listen = Some(call);
            catalog.listen_opened = Some(now);
            if catalog.relisten_at.take().is_some() {
                // Changes made while no stream was open were never told: refetch.
                if let Some(key) = catalog.key(engine) {
                    for kind in KINDS {
                        cache.stale_kind(now, catalog, Some(key), kind);
                    }
                }
            }
            true
        }
        Err(e) => {
            log::debug!("cannot listen for catalog changes: {e}");
            catalog.relisten_at = now.checked_add(catalog.relisten_delay);
            catalog.relisten_delay = (catalog.relisten_delay * 2).min(RELISTEN_MAX);
            false
        }
    }
}

/// The persistent store's name for a catalog kind (templates are not kept).
fn entry_kind(kind: CatalogKind) -> Option<EntryKind> {
    match kind {
        CatalogKind::Tools => Some(EntryKind::Tools),
        CatalogKind::Prompts => Some(EntryKind::Prompts),
        CatalogKind::Resources => Some(EntryKind::Resources),
        CatalogKind::ResourceTemplates => None,
    }
}

fn store_key(key: &CacheKey, kind: EntryKind, scope: CacheScope) -> StoreKey {
    let partition = key.partition(scope).id();
    StoreKey { kind, public: scope == CacheScope::Public, partition }
}

/// A cached page as a list result: its items (canonical JSON) and its next cursor.
fn page_json(kind: CatalogKind, page: &CachedPage) -> String {
    let mut out = format!("{{\"{}\":[", kind.items_member());
    for (i, item) in page.items().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item.json());
    }
    out.push(']');
    if let Some(c) = page.next_cursor() {
        out.push_str(",\"nextCursor\":");
        out.push_str(&serde_json::Value::from(c).to_string());
    }
    out.push('}');
    out
}

/// Counters of a host's capability cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Needs answered fresh from the cache.
    pub hits: u64,
    /// Needs that found nothing usable.
    pub misses: u64,
    /// Needs answered stale after a failed refresh.
    pub stale_serves: u64,
    /// Catalog refreshes started (each walks the pages that are not fresh).
    pub refreshes: u64,
    /// Page requests made by those refreshes.
    pub page_fetches: u64,
    /// Pages evicted to make room.
    pub evictions: u64,
}
