//! What a server offers, kept and compared: the sans-IO parts of the capability cache.
//!
//! Each module has one job and no I/O and no clock (time comes in as `now`):
//!
//! - [`hash`]: a content hash fixed for all time (SipHash-2-4, zero key).
//! - [`canonical`]: the canonical text of a JSON value.
//! - [`hints`]: `ttlMs` and `cacheScope`.
//! - [`listing`]: list pages as canonical items; a catalog as a sorted digest.
//! - [`diff`]: added, removed and changed item ids between two catalogs.
//! - [`key`]: the cache key and its sharing partition.
//! - [`store`]: the bounded cache of pages with expiry, stale-if-error and single-flight.
//! - [`refresh`]: one catalog's refresh walk over its pages, page by page, and its diff.
//! - [`search`]: a BM25 index over tools for progressive discovery.
//! - [`change`]: the diff a host is told about ([`CatalogChange`]).
//!
//! Nothing here names a type from the rest of the crate, so `benches/catalog.rs` can compile
//! these files on their own.

pub(crate) mod canonical;
pub(crate) mod change;
pub(crate) mod diff;
pub(crate) mod hash;
pub(crate) mod hints;
pub(crate) mod key;
pub(crate) mod listing;
pub(crate) mod refresh;
pub(crate) mod search;
pub(crate) mod store;

pub use change::CatalogChange;
