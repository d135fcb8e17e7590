//! What a host is told when a refreshed catalog differs from the one it was last told about.

use super::diff::CatalogDiff;
use super::hash::ContentHash;

/// The ids added, removed and changed between the last announced catalog and a newer one,
/// each list sorted; carried by `ClientEvent::ToolsChanged` (and the prompt and resource events).
///
/// Only what changed is named, so a host can re-inject just those definitions into its
/// model's context (read them with `Host::tool` or `Host::tool_catalog`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogChange {
    diff: CatalogDiff,
    hash: ContentHash,
}

impl CatalogChange {
    pub(crate) fn new(diff: CatalogDiff, hash: ContentHash) -> Self {
        CatalogChange { diff, hash }
    }

    /// Ids (tool and prompt names, resource URIs) that are new.
    pub fn added(&self) -> &[Box<str>] {
        &self.diff.added
    }

    /// Ids that are gone.
    pub fn removed(&self) -> &[Box<str>] {
        &self.diff.removed
    }

    /// Ids whose definition changed.
    pub fn changed(&self) -> &[Box<str>] {
        &self.diff.changed
    }

    /// Keeps only the ids `keep` says yes to; `None` when none is left.
    pub(crate) fn retain(mut self, keep: impl Fn(&str) -> bool) -> Option<Self> {
        let d = &mut self.diff;
        for ids in [&mut d.added, &mut d.removed, &mut d.changed] {
            ids.retain(|id| keep(id));
        }
        (!d.is_empty()).then_some(self)
    }

    /// Roughly the memory the change's names hold: their bytes and each box.
    pub(crate) fn weight(&self) -> usize {
        let d = &self.diff;
        d.added.iter().chain(&d.removed).chain(&d.changed).map(|n| n.len() + 16).sum()
    }

    /// The content hash of the new catalog, 16 hex digits: stable across processes, machines
    /// and releases, so a host may persist it and compare later.
    pub fn catalog_hash(&self) -> String {
        self.hash.to_string()
    }
}
