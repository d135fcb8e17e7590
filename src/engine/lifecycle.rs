//! Era detection and the legacy handshake, as pure decisions over what the server answered.
//!
//! PROTOCOL.md §5.2: probe with `server/discover`; a `DiscoverResult` or a `-32022` naming a
//! version in common means modern; any other error, a probe timeout or the process dying on
//! the probe means legacy. The fallback never depends on one particular error code.

use std::time::{Duration, Instant};

use smallvec::SmallVec;

use crate::config::{SavedVerdict, MAX_VERDICT_TTL};
use crate::error::{ConfigError, RpcError};
use crate::proto::json::{Kind, RawJson};
use crate::proto::jsonrpc::WireId;
use crate::proto::version::{pick_common, Era, ProtocolVersion, LEGACY_VERSIONS, MODERN_VERSIONS};

/// Where the engine is in its life; each state carries what only it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    /// No transport yet; `next` says what to do when one opens.
    Connecting { next: Opening },
    /// `server/discover` is in flight, or waiting to be sent again.
    Probing(Probe),
    /// `initialize` is in flight, or waiting to be sent again.
    Handshaking(Handshake),
    /// Calls flow.
    Ready { version: ProtocolVersion },
    /// Done; nothing more is sent.
    Closed,
}

/// What to send first on a fresh transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opening {
    Probe,
    Handshake,
}

/// The era probe: the version asked for, the request, and the failures so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Probe {
    pub(crate) version: ProtocolVersion,
    pub(crate) step: ProbeStep,
    /// Failures that said nothing about the era (HTTP 5xx, network): each waits longer.
    pub(crate) inconclusive: u32,
    /// `-32022` answers that listed the version just asked for as supported.
    pub(crate) refusals: u32,
    /// The server has already said it is modern (it refused `initialize` with `-32022` after
    /// a probe that timed out, having answered that probe late): a timeout now is a failure,
    /// not a reason to fall back to `initialize` again.
    pub(crate) known_modern: bool,
    /// A restarted process of a server whose last probe settled the modern era: its exit
    /// during the probe is a crash and its silence a slow start, as for `known_modern`; but
    /// a legacy answer is still believed (the program may have been swapped for another).
    pub(crate) was_modern: bool,
}

/// The legacy handshake: the request, and the passing failures so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handshake {
    pub(crate) step: ProbeStep,
    /// Failures that said nothing of the server's answer (HTTP 5xx, network): each waits
    /// longer, as the probe's do.
    pub(crate) inconclusive: u32,
    /// Sent because the probe went unanswered (stdio): a server that then refuses
    /// `initialize` as a method it does not know was a slow modern one, and is probed again.
    pub(crate) after_silence: bool,
}

/// Where the probe's (or the handshake's) request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeStep {
    InFlight(LifecycleCall),
    /// Waiting after an inconclusive failure; send again at this time.
    RetryAt(Instant),
}

/// The probe or handshake request: its slot, and its wire id until it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LifecycleCall {
    pub(crate) slot: usize,
    pub(crate) unsent: Option<WireId>,
}

/// Probe attempts after a failure that says nothing about the era, and the first delay.
pub(super) const MAX_INCONCLUSIVE_PROBES: u32 = 4;
pub(super) const PROBE_RETRY_BASE: Duration = Duration::from_millis(250);
/// A server that lists the version it just refused gets asked once more with a new id
/// (the conformance suite's `request-metadata` does exactly this); a second refusal ends it.
pub(super) const MAX_SAME_VERSION_REFUSALS: u32 = 1;

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
    /// The probe or handshake was refused for want of authorization (the OAuth flow failed,
    /// or the server wants other credentials); the calls waiting for it failed with the error
    /// (`Engine::authorization_error`, `Host::authorization_error`). Not closed: the next call
    /// or `restart` tries again.
    Unauthorized,
}

impl std::fmt::Display for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connecting => f.write_str("connecting"),
            Self::Probing => f.write_str("probing"),
            Self::Handshaking => f.write_str("handshaking"),
            Self::Ready(era, version) => write!(f, "ready ({era}, {version})"),
            Self::Closed => f.write_str("closed"),
            Self::Unauthorized => f.write_str("unauthorized"),
        }
    }
}

impl Lifecycle {
    pub(crate) fn public(self) -> ServerState {
        match self {
            Self::Connecting { .. } => ServerState::Connecting,
            Self::Probing(_) => ServerState::Probing,
            Self::Handshaking(_) => ServerState::Handshaking,
            Self::Ready { version } => ServerState::Ready(version.era(), version),
            Self::Closed => ServerState::Closed,
        }
    }

    /// The version the engine speaks now: the probe's while probing, the settled one once
    /// ready, none during `initialize` (its version travels in the params).
    pub(crate) fn version(self) -> Option<ProtocolVersion> {
        match self {
            Self::Probing(p) => Some(p.version),
            Self::Ready { version } => Some(version),
            _ => None,
        }
    }

    /// Whether the server already proved itself modern while the probe is still open.
    pub(crate) fn known_modern(self) -> bool {
        matches!(self, Self::Probing(Probe { known_modern: true, .. }))
    }

    /// Probing a server whose silence or exit is no era verdict: one known to be modern, or
    /// a restarted process of one that was.
    pub(crate) fn probing_modern(self) -> bool {
        matches!(self, Self::Probing(p) if p.known_modern || p.was_modern)
    }

    /// The probe or handshake request, when one is in flight.
    pub(crate) fn call(self) -> Option<LifecycleCall> {
        match self {
            Self::Probing(Probe { step: ProbeStep::InFlight(call), .. })
            | Self::Handshaking(Handshake { step: ProbeStep::InFlight(call), .. }) => Some(call),
            _ => None,
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
    /// -32022 naming the version just asked for as supported: ask again once, with a new id.
    Refused(ProtocolVersion),
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
        // The server refused the version it says it supports: a bounded re-ask decides.
        Some(v) if v.era() == Era::Modern => ProbeVerdict::Refused(v),
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

/// Whether a saved era verdict ([`Config::saved_discover`](crate::Config::saved_discover)) can
/// stand for a probe: a 2026 version, and a discover result that lists it, read as the
/// engine reads a probe's answer.
pub(crate) fn check_saved_verdict(verdict: &SavedVerdict) -> Result<(), ConfigError> {
    let err = |reason| Err(ConfigError { field: "saved_discover", reason });
    if verdict.version.era() != Era::Modern {
        return err("the version must be a 2026 revision");
    }
    let Ok(result) = crate::proto::json::parse(verdict.result.as_bytes()) else {
        return err("the result must be JSON");
    };
    let asked = verdict.version;
    if !matches!(probe_result(result, asked), ProbeVerdict::Modern(v) if v == asked) {
        return err("the result must be a discover result that lists the version");
    }
    Ok(())
}

/// A discover result's `ttlMs`, at most [`MAX_VERDICT_TTL`]; missing, negative or malformed
/// reads as 0 (PROTOCOL.md §2.2).
pub(super) fn ttl_of(result: RawJson<'_>) -> Duration {
    let Some(n) = result.get("ttlMs").filter(|n| n.kind() == Kind::Number) else {
        return Duration::ZERO;
    };
    let ttl =
        crate::proto::json::whole_number(n.text()).map_or(Duration::ZERO, Duration::from_millis);
    ttl.min(MAX_VERDICT_TTL)
}

/// Where the era verdict the engine works under came from, for [`Engine::verdict`](super::Engine::verdict).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VerdictSource {
    /// No modern verdict (not ready, or legacy).
    None,
    /// This engine's probe, received at `at`, fresh for `ttl`.
    Probed { at: Instant, ttl: Duration },
    /// `Config::saved_discover`.
    Saved,
}

/// Where a server's era came from, as the host's capability store needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the host's alone
pub(crate) enum VerdictOrigin {
    /// Not settled yet (probing, or never ready).
    Unsettled,
    /// This engine's probe: a verdict worth keeping.
    Probed,
    /// A saved verdict, not yet contradicted.
    Saved,
    /// The server speaks the legacy era: a saved modern verdict for it is wrong.
    Legacy,
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
        assert_eq!(
            probe_error(-32022, Some(data), M),
            ProbeVerdict::Refused(M),
            "ask again, bounded"
        );
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
