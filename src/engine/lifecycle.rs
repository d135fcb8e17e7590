//! Era detection and the legacy handshake, as pure decisions over what the server answered.
//!
//! PROTOCOL.md §5.2: probe with `server/discover`; a `DiscoverResult` or a `-32022` naming a
//! version in common means modern; any other error, a probe timeout or the process dying on
//! the probe means legacy. The fallback never depends on one particular error code.

use std::time::{Duration, Instant, SystemTime};

use smallvec::SmallVec;

use super::requests::{CallTraits, Ended, Owner};
use super::{timers, Control};
use crate::config::SavedVerdict;
use crate::error::{CallError, LocalError, PeerError, RpcError};
use crate::proto::json::{Kind, RawJson};
use crate::proto::jsonrpc::{write_json_str, WireId};
use crate::proto::mcp::Method;
use crate::proto::meta::StaticMeta;
use crate::proto::version::EraPreference;
use crate::proto::version::{pick_common, Era, ProtocolVersion, LEGACY_VERSIONS, MODERN_VERSIONS};

/// Where the engine is in its life; each state carries what only it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    /// No transport yet; `next` says what to do when one opens.
    Connecting { next: Opening },
    /// `server/discover` is in flight, or waiting to be sent again.
    Probing(Probe),
    /// `initialize` is in flight.
    Handshaking { call: LifecycleCall },
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
}

/// Where the probe request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeStep {
    InFlight(LifecycleCall),
    /// Waiting after an inconclusive failure; probe again at this time.
    RetryAt(Instant),
}

/// The probe or handshake request: its slot, and its wire id until it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LifecycleCall {
    pub(crate) slot: usize,
    pub(crate) unsent: Option<WireId>,
}

/// Probe attempts after a failure that says nothing about the era, and the first delay.
const MAX_INCONCLUSIVE_PROBES: u32 = 4;
const PROBE_RETRY_BASE: Duration = Duration::from_millis(250);
/// A server that lists the version it just refused gets asked once more with a new id
/// (the conformance suite's `request-metadata` does exactly this); a second refusal ends it.
const MAX_SAME_VERSION_REFUSALS: u32 = 1;

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
            Self::Handshaking { .. } => ServerState::Handshaking,
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

    /// The probe or handshake request, when one is in flight.
    pub(crate) fn call(self) -> Option<LifecycleCall> {
        match self {
            Self::Probing(Probe { step: ProbeStep::InFlight(call), .. })
            | Self::Handshaking { call } => Some(call),
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

/// The version a `server/discover` result settles on when asked in `asked`, if it is a
/// discover result that lists it: how a saved verdict is checked.
pub(crate) fn discover_verdict(
    result: RawJson<'_>,
    asked: ProtocolVersion,
) -> Option<ProtocolVersion> {
    match probe_result(result, asked) {
        ProbeVerdict::Modern(v) => Some(v),
        _ => None,
    }
}

/// A result's `ttlMs`; missing, negative or malformed reads as 0 (PROTOCOL.md §2.2).
fn ttl_of(result: RawJson<'_>) -> Duration {
    let Some(n) = result.get("ttlMs").filter(|n| n.kind() == Kind::Number) else {
        return Duration::ZERO;
    };
    let text = n.text();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Duration::ZERO;
    }
    let ms =
        text.bytes().fold(0u64, |ms, b| ms.saturating_mul(10).saturating_add(u64::from(b - b'0')));
    Duration::from_millis(ms)
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

/// The lifecycle applied to the engine: probe, handshake, verdicts, and the end of it all.
impl super::Engine {
    /// A request's deadline passed: a host call ends; a timed-out probe or handshake decides
    /// what the lifecycle tries next.
    pub(super) fn deadline_passed(&mut self, now: Instant, slot: usize) {
        let Some(owner) = self.requests.get(slot).map(|p| p.owner) else { return };
        match owner {
            Owner::Host => {
                self.abandon(now, slot, CallError::Local(LocalError::DeadlineExceeded));
                // Under a saved verdict, silence may be a legacy server ignoring a request
                // before `initialize`: the next calls wait for a probe.
                if self.assumed {
                    self.reverify(now);
                }
            }
            // No fallback to `initialize` for a server already known to be modern, nor for a
            // host that speaks only the modern era: a slow server gets the probe again, a
            // bounded number of times.
            Owner::Probe
                if self.lifecycle.known_modern()
                    || self.config.era == EraPreference::ModernOnly =>
            {
                log::debug!("era probe timed out; probing again (no fallback)");
                if !self.retry_probe_later(now) {
                    self.lifecycle_failed(now, LocalError::DeadlineExceeded)
                }
            }
            Owner::Probe => {
                log::debug!("era probe timed out; falling back to initialize");
                self.drop_lifecycle_request();
                self.start_handshake(now);
            }
            Owner::Handshake => self.lifecycle_failed(now, LocalError::DeadlineExceeded),
        }
    }

    /// Probes in `version`, keeping the failure counts of a probe already under way.
    pub(super) fn start_probe(&mut self, now: Instant, version: ProtocolVersion) {
        let (inconclusive, refusals, known_modern) = match self.lifecycle {
            Lifecycle::Probing(p) => (p.inconclusive, p.refusals, p.known_modern),
            _ => (0, 0, false),
        };
        self.assumed = false;
        self.meta = Some(self.static_meta(version));
        self.task_meta = None;
        let timeout = self.config.probe_timeout;
        let Some(call) = self.start_lifecycle_request(now, Method::Discover, Owner::Probe, timeout)
        else {
            return;
        };
        let step = ProbeStep::InFlight(call);
        let probe = Probe { version, step, inconclusive, refusals, known_modern };
        self.lifecycle = Lifecycle::Probing(probe);
    }

    pub(super) fn start_handshake(&mut self, now: Instant) {
        self.meta = None;
        self.assumed = false;
        let timeout = self.config.handshake_timeout;
        let Some(call) =
            self.start_lifecycle_request(now, Method::Initialize, Owner::Handshake, timeout)
        else {
            return;
        };
        self.lifecycle = Lifecycle::Handshaking { call };
        let c = &self.config;
        let p = self.requests.bufs_mut(call.slot).params_buf().0;
        p.extend_from_slice(b"\"protocolVersion\":");
        write_json_str(p, ProtocolVersion::LEGACY.as_str());
        p.extend_from_slice(b",\"capabilities\":");
        let caps = c.answers.legacy_capabilities(&self.capabilities);
        p.extend_from_slice(caps.as_bytes());
        p.extend_from_slice(b",\"clientInfo\":{\"name\":");
        write_json_str(p, &c.client_name);
        p.extend_from_slice(b",\"version\":");
        write_json_str(p, &c.client_version);
        p.push(b'}');
    }

    /// [`static_meta`](Self::static_meta) with the tasks extension declared too.
    fn static_task_meta(&self, version: ProtocolVersion) -> StaticMeta {
        let c = &self.config;
        let caps = super::tasks::with_tasks_extension(&self.capabilities);
        StaticMeta::new(version, &caps, &c.client_name, &c.client_version)
    }

    pub(super) fn static_meta(&self, version: ProtocolVersion) -> StaticMeta {
        let c = &self.config;
        StaticMeta::new(version, &self.capabilities, &c.client_name, &c.client_version)
    }

    /// Puts the probe or handshake request in the table; `None` when the engine had to close.
    fn start_lifecycle_request(
        &mut self,
        now: Instant,
        method: Method,
        owner: Owner,
        timeout: Duration,
    ) -> Option<LifecycleCall> {
        self.drop_lifecycle_request();
        // The lifecycle request must not be refused for a full table: make room by failing
        // the newest host call, which cannot have been sent before the era was settled.
        if self.requests.is_full() {
            if let Some(id) = self.send_queue.pop_back() {
                self.abandon(now, id.slot(), CallError::Local(LocalError::HandshakeFailed));
            }
        }
        let traits = CallTraits::control();
        let at = self.epoch.stamp(now);
        let deadline = at.after(timeout);
        let Some(slot) = self.requests.insert(method, owner, at, deadline, traits) else {
            self.lifecycle_failed(now, LocalError::HandshakeFailed);
            return None;
        };
        self.timers.schedule_request(&self.requests, slot, deadline, timers::TimerKind::Deadline);
        Some(LifecycleCall { slot, unsent: self.requests.wire_id(slot) })
    }

    /// Forgets the probe or handshake request in flight (its reply, if any, becomes late).
    /// With no request left the engine is back to waiting for what to send first; every
    /// caller then moves on to the state it chose.
    pub(super) fn drop_lifecycle_request(&mut self) {
        let Some(call) = self.lifecycle.call() else { return };
        self.requests.remove(call.slot, Ended::Abandoned);
        self.timers.tidy(&self.requests);
        let next = match self.lifecycle {
            Lifecycle::Handshaking { .. } => Opening::Handshake,
            _ => Opening::Probe,
        };
        self.lifecycle = Lifecycle::Connecting { next };
    }

    /// The probe or handshake frame to write next, once.
    pub(super) fn take_lifecycle_send(&mut self) -> Option<WireId> {
        match &mut self.lifecycle {
            Lifecycle::Probing(Probe { step: ProbeStep::InFlight(call), .. })
            | Lifecycle::Handshaking { call } => call.unsent.take(),
            _ => None,
        }
    }

    /// When an inconclusive probe failure asked to probe again.
    pub(super) fn reprobe_at(&self) -> Option<Instant> {
        match self.lifecycle {
            Lifecycle::Probing(Probe { step: ProbeStep::RetryAt(at), .. }) => Some(at),
            _ => None,
        }
    }

    /// Sends the probe again once its retry delay has passed.
    pub(super) fn lifecycle_timeout(&mut self, now: Instant) {
        if let Lifecycle::Probing(p) = self.lifecycle {
            if matches!(p.step, ProbeStep::RetryAt(at) if at <= now) {
                self.start_probe(now, p.version);
            }
        }
    }

    /// The probe failed in a way that says nothing about the era (HTTP 5xx, network): probe
    /// again after a growing delay, a bounded number of times. Returns `false` when spent.
    pub(super) fn retry_probe_later(&mut self, now: Instant) -> bool {
        let Lifecycle::Probing(p) = self.lifecycle else { return false };
        if p.inconclusive >= MAX_INCONCLUSIVE_PROBES {
            return false;
        }
        self.drop_lifecycle_request();
        let delay = PROBE_RETRY_BASE * 2u32.pow(p.inconclusive);
        log::debug!("era probe failed; probing again in {delay:?}");
        let step = ProbeStep::RetryAt(now + delay);
        self.lifecycle = Lifecycle::Probing(Probe { step, inconclusive: p.inconclusive + 1, ..p });
        true
    }

    pub(super) fn on_lifecycle_result(&mut self, now: Instant, owner: Owner, result: RawJson<'_>) {
        match (owner, self.lifecycle) {
            (Owner::Probe, Lifecycle::Probing(p)) => {
                let verdict = probe_result(result, p.version);
                self.apply_verdict(now, verdict, Some(result));
            }
            (Owner::Handshake, Lifecycle::Handshaking { .. }) => match handshake_result(result) {
                Some(version) => {
                    self.drop_lifecycle_request();
                    self.server_info.clear();
                    self.server_info.push_str(result.text());
                    self.push_control(Control::Initialized);
                    self.verdict = VerdictSource::None;
                    self.become_ready(version);
                }
                None => {
                    log::debug!("initialize settled on a version mcpoll does not speak");
                    self.lifecycle_failed(now, PeerError::NoCommonVersion);
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
        match (owner, self.lifecycle) {
            (Owner::Probe, Lifecycle::Probing(p)) => {
                let verdict = probe_error(error.code, data, p.version);
                self.apply_verdict(now, verdict, None);
            }
            // A slow server that answered the timed-out probe late has settled on the modern
            // era for this connection and refuses `initialize` with `-32022` (PROTOCOL.md
            // §5.1: proof of a modern server; never fall back because of it). Probe again in
            // a version it lists, once: a second timeout then fails the start.
            (Owner::Handshake, Lifecycle::Handshaking { .. }) => {
                match probe_error(error.code, data, ProtocolVersion::LEGACY) {
                    ProbeVerdict::Reprobe(version) => {
                        log::debug!("initialize refused by a modern server; probing in {version}");
                        self.drop_lifecycle_request();
                        self.start_probe(now, version);
                        if let Lifecycle::Probing(p) = &mut self.lifecycle {
                            p.known_modern = true;
                        }
                    }
                    _ => {
                        log::debug!("initialize failed: {}", error.name());
                        self.shut(now, CallError::Protocol(error));
                    }
                }
            }
            _ => {
                log::debug!("initialize failed: {}", error.name());
                self.shut(now, CallError::Protocol(error));
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
                    self.verdict = VerdictSource::Probed { at: now, ttl: ttl_of(r) };
                }
                self.become_ready(version);
            }
            ProbeVerdict::Reprobe(version) => self.start_probe(now, version),
            ProbeVerdict::Refused(version) => match self.lifecycle {
                Lifecycle::Probing(p) if p.refusals < MAX_SAME_VERSION_REFUSALS => {
                    log::debug!("server refused {version} yet lists it; asking once more");
                    self.lifecycle = Lifecycle::Probing(Probe { refusals: p.refusals + 1, ..p });
                    self.start_probe(now, version);
                }
                _ => self.lifecycle_failed(now, PeerError::VersionRefused(version)),
            },
            ProbeVerdict::Legacy if !modern_only => {
                self.drop_lifecycle_request();
                self.start_handshake(now);
            }
            ProbeVerdict::Legacy => self.lifecycle_failed(now, PeerError::NoCommonVersion),
            ProbeVerdict::NoCommonVersion => self.lifecycle_failed(now, PeerError::NoCommonVersion),
        }
    }

    /// Takes the era from `Config::saved_discover`, once, on the first transport: ready at
    /// once, no probe. `false` when there is none (or it was used).
    pub(super) fn resume_saved_verdict(&mut self) -> bool {
        if !std::mem::take(&mut self.saved_pending) {
            return false;
        }
        let Some(saved) = &self.config.saved_discover else { return false };
        let version = saved.version;
        self.server_info.clear();
        self.server_info.push_str(&saved.result);
        self.verdict = VerdictSource::Saved;
        self.assumed = true;
        log::trace!("era taken from the saved verdict: {version}");
        self.become_ready(version);
        true
    }

    /// The saved verdict did not hold (the server refused its version, answered like a legacy
    /// server, or failed the first call): forget it and probe, as on a first start. Calls
    /// wait in the queue until the era is settled again.
    pub(super) fn reverify(&mut self, now: Instant) {
        self.assumed = false;
        self.verdict = VerdictSource::None;
        if matches!(self.lifecycle, Lifecycle::Ready { .. }) {
            log::debug!("the saved era verdict did not hold; probing");
            self.start_probe(now, first_probe_version());
        }
    }

    /// The verdict to save for the next run, with its expiry in wall-clock time (`wall` is
    /// the wall-clock reading at `now`): only a modern verdict still fresh has one.
    pub(super) fn saved_verdict(&self, now: Instant, wall: SystemTime) -> Option<SavedVerdict> {
        let Lifecycle::Ready { version } = self.lifecycle else { return None };
        match self.verdict {
            VerdictSource::Probed { at, ttl } => {
                let left = at.checked_add(ttl)?.checked_duration_since(now)?;
                if left.is_zero() {
                    return None;
                }
                let expires = wall.checked_add(left)?;
                Some(SavedVerdict { version, result: self.server_info.clone(), expires })
            }
            VerdictSource::Saved => self.config.saved_discover.clone(),
            VerdictSource::None => None,
        }
    }

    pub(super) fn become_ready(&mut self, version: ProtocolVersion) {
        self.lifecycle = Lifecycle::Ready { version };
        self.meta = (version.era() == Era::Modern).then(|| self.static_meta(version));
        self.task_meta = (version.era() == Era::Modern && !self.tasks_declared)
            .then(|| self.static_task_meta(version));
        self.events.ready(version.era(), version);
    }

    pub(super) fn lifecycle_failed(&mut self, now: Instant, error: impl Into<CallError>) {
        self.shut(now, error.into());
    }

    /// The probe or handshake was refused for want of authorization: the calls waiting for it
    /// fail with `error`, and the server waits for the next call or the host
    /// ([`Engine::retry_authorization`]) instead of closing, so that both eras behave alike
    /// (a legacy server that lets `initialize` through refuses only the calls).
    pub(super) fn authorization_failed(&mut self, now: Instant, error: CallError) {
        if self.lifecycle == Lifecycle::Closed {
            return;
        }
        log::debug!("the era probe or handshake was refused: {}", error.name());
        self.drop_lifecycle_request();
        self.fail_all(now, error.clone());
        self.unauthorized = Some(error);
    }

    /// Ends everything: every pending call fails with `error`, then a `Closed` event.
    pub(super) fn shut(&mut self, now: Instant, error: CallError) {
        if self.lifecycle == Lifecycle::Closed {
            return;
        }
        self.drop_lifecycle_request();
        self.fail_all(now, error.clone());
        self.control.clear();
        self.lifecycle = Lifecycle::Closed;
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
