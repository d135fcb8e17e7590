//! Protocol revisions and the two eras, and how a common version is chosen.

use std::fmt;

/// Every revision mcpoll speaks, written once: the lists of each era, and each version's
/// `MCP-Protocol-Version` header line laid out at build time (an HTTP request copies it in
/// one piece).
macro_rules! revisions {
    (modern: [$($modern:literal),+], legacy: [$($legacy:literal),+]) => {
        /// The stateless revision mcpoll speaks by default.
        pub(crate) const MODERN_VERSIONS: &[&str] = &[$($modern),+];
        /// Handshake revisions mcpoll falls back to, newest first.
        pub(crate) const LEGACY_VERSIONS: &[&str] = &[$($legacy),+];
        /// Every version, modern first: a [`ProtocolVersion`] is an index into it.
        const ALL_VERSIONS: &[&str] = &[$($modern,)+ $($legacy),+];
        /// Each version's header line, in the order of `ALL_VERSIONS`.
        #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
        const HEADER_LINES: &[&str] = &[
            $(concat!("MCP-Protocol-Version: ", $modern, "\r\n"),)+
            $(concat!("MCP-Protocol-Version: ", $legacy, "\r\n"),)+
        ];
    };
}

revisions!(modern: ["2026-07-28"], legacy: ["2025-11-25", "2025-06-18", "2025-03-26"]);

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

/// A protocol revision mcpoll knows: its place in the crate's one list of them, so it costs
/// nothing to copy, compare or look up.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProtocolVersion(u8);

impl ProtocolVersion {
    /// The default modern revision.
    pub const MODERN: Self = Self(0);
    /// The newest legacy revision.
    pub const LEGACY: Self = Self(MODERN_VERSIONS.len() as u8);

    /// The revision string, e.g. `2026-07-28`.
    pub fn as_str(self) -> &'static str {
        ALL_VERSIONS.get(usize::from(self.0)).copied().unwrap_or_default()
    }

    /// The era this revision belongs to.
    pub fn era(self) -> Era {
        if usize::from(self.0) < MODERN_VERSIONS.len() {
            Era::Modern
        } else {
            Era::Legacy
        }
    }

    /// Looks a version string up among those mcpoll speaks.
    pub fn known(s: &str) -> Option<Self> {
        Self::at(ALL_VERSIONS.iter().position(|v| *v == s)?)
    }

    /// `MCP-Protocol-Version: <this version>\r\n`.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's alone
    pub(crate) fn header_line(self) -> &'static str {
        HEADER_LINES.get(usize::from(self.0)).copied().unwrap_or_default()
    }

    fn at(index: usize) -> Option<Self> {
        u8::try_from(index).ok().map(Self)
    }
}

impl fmt::Debug for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ProtocolVersion").field(&self.as_str()).finish()
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The newest version in `offered` that mcpoll speaks, modern revisions first.
pub(crate) fn pick_common<'a>(
    offered: impl IntoIterator<Item = &'a str> + Clone,
) -> Option<ProtocolVersion> {
    let common =
        ALL_VERSIONS.iter().position(|ours| offered.clone().into_iter().any(|o| o == *ours));
    ProtocolVersion::at(common?)
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

    #[test]
    fn every_version_keeps_its_name_era_and_header_line() {
        for (era, list) in [(Era::Modern, MODERN_VERSIONS), (Era::Legacy, LEGACY_VERSIONS)] {
            for &v in list {
                let version = ProtocolVersion::known(v).unwrap();
                assert_eq!((version.as_str(), version.era()), (v, era));
                assert_eq!(version.header_line(), format!("MCP-Protocol-Version: {v}\r\n"));
                assert_eq!(format!("{version:?}"), format!("ProtocolVersion({v:?})"));
            }
        }
        assert_eq!(ProtocolVersion::LEGACY.as_str(), LEGACY_VERSIONS[0]);
        assert_eq!(ProtocolVersion::known("2024-11-05"), None);
    }
}
