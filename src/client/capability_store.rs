//! A store under the capability cache that outlives the process: the host keeps what it
//! learned (tool, prompt and resource catalogs, and each server's era verdict) across restarts
//! instead of probing and listing every server again at start-up.
//!
//! The cache calls the host's [`CapabilityStore`] at three points: `get` when a catalog is
//! needed and memory holds nothing of it (once per catalog and context: past four times
//! `CacheConfig::max_entries` contexts the core forgets which it asked, and asks again),
//! `put` when a listing left the whole catalog fresh, and `mark_stale` when the server said the
//! list changed. Every entry comes back through checks before it is served: it must be filed
//! under the key it was asked for (a private entry is only ever served to its own principal,
//! scope set and tenant), and pages past their expiry, or expiring further off than
//! `CacheConfig::max_ttl` allows, are dropped. The key is the cache key's
//! hashes ([`StoreKey::id`]); entries hold the servers' list results, their `cacheScope` and
//! expiry, and nothing else: no token, no credential, no principal name.
//!
//! The era verdict goes through the same store ([`EntryKind::Discover`]): `get` when a server
//! is added without a [`Config::saved_discover`](crate::Config::saved_discover), `put` when a
//! probe settled it, `mark_stale` when it did not hold (the server answered like a legacy
//! one).
//!
//! `examples/file_capability_store.rs` keeps entries in a folder, one file per key.

use std::time::SystemTime;

/// What an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EntryKind {
    /// The tool catalog (`tools/list` pages).
    Tools,
    /// The prompt catalog (`prompts/list` pages).
    Prompts,
    /// The resource catalog (`resources/list` pages).
    Resources,
    /// A server's era verdict ([`SavedVerdict`](crate::SavedVerdict)): one page, whose JSON
    /// is `{"protocolVersion":"…","result":{…}}` (the version settled on and the raw
    /// `server/discover` result), filed in the public partition of the server context with
    /// the version left out of the key. A host with a store needs no
    /// [`Config::saved_discover`](crate::Config::saved_discover) of its own.
    Discover,
}

impl EntryKind {
    /// A short name (`tools`, `prompts`, `resources`), fit for a file name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Prompts => "prompts",
            Self::Resources => "resources",
            Self::Discover => "discover",
        }
    }
}

/// Where an entry is filed: one server context's catalog of one kind, in the partition its
/// `cacheScope` puts it in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreKey {
    pub(crate) kind: EntryKind,
    pub(crate) public: bool,
    /// The partition's hashes; see [`StoreKey::id`].
    pub(crate) partition: String,
}

impl StoreKey {
    /// The full key as text: the catalog kind, then the hashes of the server's identity,
    /// transport, protocol version, client capabilities and extensions, and for a private
    /// entry of the principal, granted scopes and tenant (a public entry has `public`
    /// instead). Stable across processes and hosts; holds no secret and no name in clear.
    pub fn id(&self) -> String {
        format!("{}-{}", self.kind.as_str(), self.partition)
    }

    /// The kind of catalog.
    pub fn kind(&self) -> EntryKind {
        self.kind
    }

    /// `true` for the shared partition (`cacheScope: "public"`), readable by every principal
    /// of the server context; `false` for one principal's own.
    pub fn is_public(&self) -> bool {
        self.public
    }
}

/// One page of a stored catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPage {
    /// The cursor the page was fetched with (`None`: the first page).
    pub cursor: Option<String>,
    /// The page as a list result: `{"tools":[...],"nextCursor":"..."}` (the items in canonical
    /// JSON, as the cache holds them).
    pub json: String,
    /// When the page stops being fresh (its `ttlMs`, capped by the cache, from when it was
    /// received).
    pub expires: SystemTime,
}

/// What a [`CapabilityStore`] keeps under one [`StoreKey`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    /// The [`StoreKey::id`] it was put under: an entry read back under another key is refused.
    pub key: String,
    /// The pages' `cacheScope` was `"public"`.
    pub public: bool,
    /// The pages.
    pub pages: Vec<StoredPage>,
}

/// A persistent store under the host's capability cache; install one with
/// [`Host::set_capability_store`](crate::Host::set_capability_store).
///
/// Calls come from inside the host's verbs and poll: keep them short (a small file read or
/// write). A failing store only costs a listing: return `None` from `get`, and let `put` and
/// `mark_stale` log and carry on.
pub trait CapabilityStore {
    /// The entry filed under `key`, if any.
    fn get(&mut self, key: &StoreKey) -> Option<StoredEntry>;
    /// Files `entry` under `key`, replacing what was there.
    fn put(&mut self, key: &StoreKey, entry: &StoredEntry);
    /// The server said the catalog changed: the entry under `key` must not be served again
    /// (drop it, or mark it).
    fn mark_stale(&mut self, key: &StoreKey);
}

impl std::fmt::Debug for dyn CapabilityStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<capability store>")
    }
}

/// A store that keeps nothing: for tests of what installing a store does.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct NoStore;

#[cfg(test)]
impl CapabilityStore for NoStore {
    fn get(&mut self, _: &StoreKey) -> Option<StoredEntry> {
        None
    }

    fn put(&mut self, _: &StoreKey, _: &StoredEntry) {}

    fn mark_stale(&mut self, _: &StoreKey) {}
}
