//! Era detection and the legacy handshake, as pure decisions over what the server answered.
//!
//! PROTOCOL.md §5.2: probe with `server/discover`; a `DiscoverResult` or a `-32022` naming a
//! version in common means modern; any other error, a probe timeout or the process dying on
//! the probe means legacy. The fallback never depends on one particular error code.

use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::requests::{CallTraits, Ended, Owner};
use super::{timers, Control};
use crate::error::{CallError, LocalError, RpcError};
use crate::proto::json::RawJson;
use crate::proto::jsonrpc::write_json_str;
use crate::proto::mcp::Method;
use crate::proto::meta::StaticMeta;
use crate::proto::version::EraPreference;
use crate::proto::version::{pick_common, Era, ProtocolVersion, LEGACY_VERSIONS, MODERN_VERSIONS};
use crate::Idempotency;

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

/// The lifecycle applied to the engine: probe, handshake, verdicts, and the end of it all.
impl super::Engine {
    pub(super) fn start_probe(&mut self, now: Instant, version: ProtocolVersion) {
        self.meta = Some(self.static_meta(version));
        self.phase = Phase::Probing { version };
        self.start_lifecycle_request(
            now,
            Method::Discover,
            Owner::Probe,
            self.config.probe_timeout,
        );
    }

    pub(super) fn start_handshake(&mut self, now: Instant) {
        self.meta = None;
        self.phase = Phase::Handshaking;
        self.start_lifecycle_request(
            now,
            Method::Initialize,
            Owner::Handshake,
            self.config.handshake_timeout,
        );
        if let Some(slot) = self.lifecycle_slot {
            let c = &self.config;
            let p = &mut self.requests.bufs_mut(slot).params;
            p.extend_from_slice(b"\"protocolVersion\":");
            write_json_str(p, ProtocolVersion::LEGACY.as_str());
            p.extend_from_slice(b",\"capabilities\":");
            p.extend_from_slice(c.client_capabilities.trim().as_bytes());
            p.extend_from_slice(b",\"clientInfo\":{\"name\":");
            write_json_str(p, &c.client_name);
            p.extend_from_slice(b",\"version\":");
            write_json_str(p, &c.client_version);
            p.push(b'}');
        }
    }

    pub(super) fn static_meta(&self, version: ProtocolVersion) -> StaticMeta {
        let c = &self.config;
        StaticMeta::new(version, &c.client_capabilities, &c.client_name, &c.client_version)
    }

    pub(super) fn start_lifecycle_request(
        &mut self,
        now: Instant,
        method: Method,
        owner: Owner,
        timeout: Duration,
    ) {
        self.drop_lifecycle_request();
        // The lifecycle request must not be refused for a full table: make room by failing
        // the newest host call, which cannot have been sent before the era was settled.
        if self.requests.is_full() {
            if let Some(id) = self.send_queue.pop_back() {
                self.abandon(id.slot(), CallError::Local(LocalError::HandshakeFailed));
            }
        }
        let traits = CallTraits { progress: false, class: Idempotency::Unknown, tenant: 0 };
        let Some(slot) = self.requests.insert(method, owner, now, now + timeout, traits) else {
            self.lifecycle_failed(LocalError::HandshakeFailed);
            return;
        };
        self.schedule(slot, now + timeout, timers::TimerKind::Deadline);
        self.lifecycle_slot = Some(slot);
        self.lifecycle_send = self.requests.wire_id(slot);
    }

    pub(super) fn drop_lifecycle_request(&mut self) {
        if let Some(slot) = self.lifecycle_slot.take() {
            self.requests.remove(slot, Ended::Abandoned);
            self.tidy_timers();
        }
        self.lifecycle_send = None;
    }

    pub(super) fn on_lifecycle_result(&mut self, now: Instant, owner: Owner, result: RawJson<'_>) {
        match (owner, self.phase) {
            (Owner::Probe, Phase::Probing { version }) => {
                let verdict = probe_result(result, version);
                self.apply_verdict(now, verdict, Some(result));
            }
            (Owner::Handshake, Phase::Handshaking) => match handshake_result(result) {
                Some(version) => {
                    self.drop_lifecycle_request();
                    self.server_info.clear();
                    self.server_info.push_str(result.text());
                    self.push_control(Control::Initialized);
                    self.become_ready(version);
                }
                None => {
                    log::debug!("initialize settled on a version mcpoll does not speak");
                    self.lifecycle_failed(LocalError::NoCommonVersion);
                }
            },
            _ => self.drop_lifecycle_request(),
        }
    }

    pub(super) fn on_lifecycle_error(
        &mut self,
        now: Instant,
        owner: Owner,
        error: RpcError,
        data: Option<RawJson<'_>>,
    ) {
        match (owner, self.phase) {
            (Owner::Probe, Phase::Probing { version }) => {
                let verdict = probe_error(error.code, data, version);
                self.apply_verdict(now, verdict, None);
            }
            _ => {
                log::debug!("initialize failed: {error}");
                self.shut(CallError::Protocol(error));
            }
        }
    }

    pub(super) fn apply_verdict(
        &mut self,
        now: Instant,
        verdict: ProbeVerdict,
        result: Option<RawJson<'_>>,
    ) {
        let modern_only = self.config.era == EraPreference::ModernOnly;
        match verdict {
            ProbeVerdict::Modern(version) => {
                self.drop_lifecycle_request();
                if let Some(r) = result {
                    self.server_info.clear();
                    self.server_info.push_str(r.text());
                }
                self.become_ready(version);
            }
            ProbeVerdict::Reprobe(version) => self.start_probe(now, version),
            ProbeVerdict::Legacy if !modern_only => {
                self.drop_lifecycle_request();
                self.start_handshake(now);
            }
            ProbeVerdict::Legacy => self.lifecycle_failed(LocalError::NoCommonVersion),
            ProbeVerdict::NoCommonVersion => self.lifecycle_failed(LocalError::NoCommonVersion),
        }
    }

    pub(super) fn become_ready(&mut self, version: ProtocolVersion) {
        self.phase = Phase::Ready { version };
        self.meta = (version.era() == Era::Modern).then(|| self.static_meta(version));
        self.events.ready(version.era(), version);
    }

    pub(super) fn lifecycle_failed(&mut self, error: LocalError) {
        self.shut(CallError::Local(error));
    }

    /// Ends everything: every pending call fails with `error`, then a `Closed` event.
    pub(super) fn shut(&mut self, error: CallError) {
        if self.phase == Phase::Closed {
            return;
        }
        self.reprobe_at = None;
        self.drop_lifecycle_request();
        self.fail_all(error.clone());
        self.control.clear();
        self.phase = Phase::Closed;
        self.wants_transport = false;
        self.events.closed(error);
    }
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
