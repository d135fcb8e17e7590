//! Era detection and the legacy handshake, as pure decisions over what the server answered.
//!
//! PROTOCOL.md §5.2: probe with `server/discover`; a `DiscoverResult` or a `-32022` naming a
//! version in common means modern; any other error, a probe timeout or the process dying on
//! the probe means legacy. The fallback never depends on one particular error code.

use smallvec::SmallVec;

use crate::error::RpcError;
use crate::proto::json::RawJson;
use crate::proto::version::{pick_common, Era, ProtocolVersion, LEGACY_VERSIONS, MODERN_VERSIONS};

/// Where the engine is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No transport yet; `next` says what to do when one opens.
    Connecting { next: Opening },
    /// `server/discover` is in flight with this version.
    Probing { version: ProtocolVersion },
    /// `initialize` is in flight.
    Handshaking,
    /// Calls flow.
    Ready { version: ProtocolVersion },
    /// Done; nothing more is sent.
    Closed,
}

/// What the engine sends first on a fresh transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opening {
    Probe,
    Handshake,
}

/// The state a server's era is in, as the host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// Waiting for the transport.
    Connecting,
    /// Probing with `server/discover`.
    Probing,
    /// Running the legacy `initialize` handshake.
    Handshaking,
    /// Ready in this era and version.
    Ready(Era, ProtocolVersion),
    /// Closed.
    Closed,
}

impl std::fmt::Display for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connecting => f.write_str("connecting"),
            Self::Probing => f.write_str("probing"),
            Self::Handshaking => f.write_str("handshaking"),
            Self::Ready(era, version) => write!(f, "ready ({era}, {version})"),
            Self::Closed => f.write_str("closed"),
        }
    }
}

impl Phase {
    pub(crate) fn public(self) -> ServerState {
        match self {
            Self::Connecting { .. } => ServerState::Connecting,
            Self::Probing { .. } => ServerState::Probing,
            Self::Handshaking => ServerState::Handshaking,
            Self::Ready { version } => ServerState::Ready(version.era(), version),
            Self::Closed => ServerState::Closed,
        }
    }
}

/// What to do after the probe's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeVerdict {
    /// Modern, in this version.
    Modern(ProtocolVersion),
    /// Modern, but probe again in this version (after -32022), with a new id.
    Reprobe(ProtocolVersion),
    /// Legacy: run `initialize`.
    Legacy,
    /// The server is modern but shares no version with us.
    NoCommonVersion,
}

/// Classifies a `server/discover` result.
pub(crate) fn probe_result(result: RawJson<'_>, asked: ProtocolVersion) -> ProbeVerdict {
    let supported = strings(result.get("supportedVersions"));
    if supported.is_empty() {
        // Not a DiscoverResult: whatever answered is no modern server.
        return ProbeVerdict::Legacy;
    }
    let offered = supported.iter().map(|v| v.as_ref());
    match pick_common(offered) {
        Some(v) if v == asked => ProbeVerdict::Modern(v),
        Some(v) if v.era() == Era::Modern => ProbeVerdict::Reprobe(v),
        Some(_) => ProbeVerdict::Legacy,
        None => ProbeVerdict::NoCommonVersion,
    }
}

/// Classifies a JSON-RPC error answering the probe. Only -32022 with a `supported` list is
/// evidence of a modern server (the TS SDK's conservatism, PROTOCOL.md U4).
pub(crate) fn probe_error(
    code: i64,
    data: Option<RawJson<'_>>,
    asked: ProtocolVersion,
) -> ProbeVerdict {
    if code != RpcError::UNSUPPORTED_PROTOCOL_VERSION {
        return ProbeVerdict::Legacy;
    }
    let supported = strings(data.and_then(|d| d.get("supported")));
    if supported.is_empty() {
        return ProbeVerdict::Legacy;
    }
    let offered = supported.iter().map(|v| v.as_ref());
    match pick_common(offered) {
        Some(v) if v.era() == Era::Modern && v != asked => ProbeVerdict::Reprobe(v),
        // The server refused the version it now offers: re-asking would loop.
        Some(v) if v.era() == Era::Modern => ProbeVerdict::NoCommonVersion,
        // Only handshake revisions in common: the handshake is the way in.
        Some(_) => ProbeVerdict::Legacy,
        None => ProbeVerdict::NoCommonVersion,
    }
}

/// The version an `initialize` result settles on, if mcpoll speaks it.
pub(crate) fn handshake_result(result: RawJson<'_>) -> Option<ProtocolVersion> {
    let version = result.get("protocolVersion")?.as_str()?;
    let v = ProtocolVersion::known(&version)?;
    (v.era() == Era::Legacy).then_some(v)
}

/// The strings of a JSON array (non-strings skipped); empty for anything else.
fn strings(v: Option<RawJson<'_>>) -> SmallVec<[std::borrow::Cow<'_, str>; 4]> {
    v.map(|a| a.elements().filter_map(RawJson::as_str).collect()).unwrap_or_default()
}

/// The version string the probe starts with.
pub(crate) fn first_probe_version() -> ProtocolVersion {
    debug_assert!(!MODERN_VERSIONS.is_empty() && !LEGACY_VERSIONS.is_empty());
    ProtocolVersion::MODERN
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> RawJson<'_> {
        crate::proto::json::parse(s.as_bytes()).unwrap()
    }

    const M: ProtocolVersion = ProtocolVersion::MODERN;

    #[test]
    fn discover_results() {
        let ok = raw(
            r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{}}"#,
        );
        assert_eq!(probe_result(ok, M), ProbeVerdict::Modern(M));
        let legacy_only = raw(r#"{"supportedVersions":["2025-11-25"]}"#);
        assert_eq!(probe_result(legacy_only, M), ProbeVerdict::Legacy);
        assert_eq!(
            probe_result(raw(r#"{"supportedVersions":["2099-01-01"]}"#), M),
            ProbeVerdict::NoCommonVersion
        );
        assert_eq!(probe_result(raw("{}"), M), ProbeVerdict::Legacy, "not a DiscoverResult");
        assert_eq!(probe_result(raw(r#"{"supportedVersions":7}"#), M), ProbeVerdict::Legacy);
    }

    #[test]
    fn probe_errors() {
        assert_eq!(probe_error(-32601, None, M), ProbeVerdict::Legacy);
        assert_eq!(probe_error(-32602, None, M), ProbeVerdict::Legacy);
        assert_eq!(probe_error(-32000, None, M), ProbeVerdict::Legacy);
        assert_eq!(probe_error(-32020, None, M), ProbeVerdict::Legacy, "not era evidence");
        assert_eq!(probe_error(-32022, None, M), ProbeVerdict::Legacy, "no supported list");
        let data = raw(r#"{"supported":["2026-07-28"],"requested":"2026-07-28"}"#);
        assert_eq!(probe_error(-32022, Some(data), M), ProbeVerdict::NoCommonVersion, "would loop");
        let data = raw(r#"{"supported":["2099-01-01"],"requested":"2026-07-28"}"#);
        assert_eq!(probe_error(-32022, Some(data), M), ProbeVerdict::NoCommonVersion);
        let data = raw(r#"{"supported":["2025-11-25"],"requested":"2026-07-28"}"#);
        assert_eq!(probe_error(-32022, Some(data), M), ProbeVerdict::Legacy);
    }

    #[test]
    fn handshake_versions() {
        assert_eq!(
            handshake_result(raw(r#"{"protocolVersion":"2025-11-25"}"#)),
            Some(ProtocolVersion::LEGACY)
        );
        assert_eq!(
            handshake_result(raw(r#"{"protocolVersion":"2025-06-18"}"#)).map(|v| v.as_str()),
            Some("2025-06-18")
        );
        assert_eq!(handshake_result(raw(r#"{"protocolVersion":"2024-01-01"}"#)), None);
        assert_eq!(handshake_result(raw(r#"{"protocolVersion":"2026-07-28"}"#)), None);
        assert_eq!(handshake_result(raw("{}")), None);
    }
}
