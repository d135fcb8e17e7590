//! Protocol revisions and the two eras, and how a common version is chosen.

use std::fmt;

/// The stateless revision mcpoll speaks by default.
pub(crate) const MODERN_VERSIONS: &[&str] = &["2026-07-28"];
/// Handshake revisions mcpoll falls back to, newest first.
pub(crate) const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// The protocol era a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// 2026-07-28 and later: `_meta` on every request, no handshake.
    Modern,
    /// 2025-11-25 and earlier: `initialize` handshake.
    Legacy,
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Modern => "modern",
            Self::Legacy => "legacy",
        })
    }
}

/// Which era the engine may speak with a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum EraPreference {
    /// Probe with `server/discover` and fall back to `initialize` (the default).
    #[default]
    Auto,
    /// Speak only 2026-07-28 (no fallback).
    ModernOnly,
    /// Skip the probe and run the `initialize` handshake (a verdict kept from earlier).
    LegacyOnly,
}

/// A protocol revision string mcpoll knows, kept as a static so it costs nothing to copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProtocolVersion(&'static str);

impl ProtocolVersion {
    /// The default modern revision.
    pub const MODERN: Self = Self(MODERN_VERSIONS[0]);
    /// The newest legacy revision.
    pub const LEGACY: Self = Self(LEGACY_VERSIONS[0]);

    /// The revision string, e.g. `2026-07-28`.
    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// The era this revision belongs to.
    pub fn era(self) -> Era {
        if MODERN_VERSIONS.contains(&self.0) {
            Era::Modern
        } else {
            Era::Legacy
        }
    }

    /// Looks a version string up among those mcpoll speaks.
    pub fn known(s: &str) -> Option<Self> {
        MODERN_VERSIONS.iter().chain(LEGACY_VERSIONS).find(|v| **v == s).map(|v| Self(v))
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// The newest version in `offered` that mcpoll speaks, modern revisions first.
pub(crate) fn pick_common<'a>(
    offered: impl IntoIterator<Item = &'a str> + Clone,
) -> Option<ProtocolVersion> {
    MODERN_VERSIONS
        .iter()
        .chain(LEGACY_VERSIONS)
        .find(|ours| offered.clone().into_iter().any(|o| o == **ours))
        .map(|v| ProtocolVersion(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_newest_common_version_preferring_modern() {
        assert_eq!(pick_common(["2026-07-28"]), Some(ProtocolVersion::MODERN));
        assert_eq!(
            pick_common(["2025-06-18", "2025-11-25"]).map(|v| v.as_str()),
            Some("2025-11-25")
        );
        assert_eq!(pick_common(["1999-01-01"]), None);
        assert_eq!(pick_common(Vec::<&str>::new()), None);
        assert_eq!(ProtocolVersion::known("2025-03-26").map(|v| v.era()), Some(Era::Legacy));
    }
}
