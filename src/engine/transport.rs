//! What the transport reports: opened, closed, an HTTP exchange that failed, a legacy session
//! that vanished.

use std::time::Instant;

use super::ending::Outcome;
use super::lifecycle::{self, Lifecycle, Opening, ProbeVerdict};
use super::requests::{Ended, Lookup, Owner};
use super::retry;
use super::{Engine, ExchangeFailure, TransportKind};
#[cfg(feature = "http")]
use crate::error::LocalError;
use crate::error::{CallError, PeerError, TransportError};
use crate::proto::jsonrpc::WireId;
use crate::proto::version::EraPreference;

/// A refusal for want of authorization: credentials refused or missing, or an OAuth flow that
/// could not get a token.
fn unauthorized(error: &CallError) -> bool {
    match error {
        CallError::Peer(PeerError::AuthRequired(_) | PeerError::Forbidden(_)) => true,
        #[cfg(feature = "http")]
        CallError::Peer(PeerError::Authorization(_)) => true,
        #[cfg(feature = "http")]
        CallError::Local(LocalError::OAuthSetup(_)) => true,
        CallError::Transport(TransportError::HttpStatus(401 | 403)) => true,
        _ => false,
    }
}

impl Engine {
    pub(super) fn on_exchange_failed(
        &mut self,
        now: Instant,
        id: WireId,
        failure: ExchangeFailure,
    ) {
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return };
        let Some(owner) = self.requests.get(slot).map(|p| p.owner) else { return };
        let error = match failure {
            ExchangeFailure::Transport(e) => CallError::Transport(e),
            ExchangeFailure::Unauthorized(c) => {
                CallError::Peer(PeerError::AuthRequired(Box::new(c)))
            }
            ExchangeFailure::Forbidden(c) => CallError::Peer(PeerError::Forbidden(Box::new(c))),
            // The host's own OAuth configuration cannot work: not the server's fault.
            #[cfg(feature = "http")]
            ExchangeFailure::Authorization(e) if e.is_local() => {
                CallError::Local(LocalError::OAuthSetup(e))
            }
            #[cfg(feature = "http")]
            ExchangeFailure::Authorization(e) => CallError::Peer(PeerError::Authorization(e)),
            ExchangeFailure::TooLarge => {
                self.stats.too_large += 1;
                CallError::Peer(PeerError::TooLarge)
            }
        };
        let bare_4xx = matches!(
            error,
            CallError::Transport(TransportError::HttpStatus(s)) if (400..500).contains(&s) && s != 401 && s != 403
        );
        match owner {
            // Under a saved verdict, a 4xx without a JSON-RPC answer is what a legacy server
            // says to a modern request (PROTOCOL.md §5.3): refused, not processed. Send it again
            // once the probe has settled the era.
            Owner::Host if self.assumed && bare_4xx => {
                self.requests.end_exchange(slot, self.epoch.stamp(now));
                if let Some(id) = self.requests.renew_wire_id(slot) {
                    self.send_queue.push_front(id);
                }
                self.reverify(now);
            }
            Owner::Host => {
                // The stream is already gone: nothing to signal. A request that never left
                // (the connection was never made) is safe to send again whatever it does.
                let delivery = match &error {
                    CallError::Transport(TransportError::ConnectFailed(_)) => {
                        retry::Delivery::NotSent
                    }
                    _ => retry::Delivery::MaybeDelivered,
                };
                self.on_attempt_failed(now, slot, error, delivery);
            }
            Owner::Probe => {
                // PROTOCOL.md §5.3: a 4xx without a recognised modern error is legacy evidence;
                // 401, 403, 5xx, network errors and timeouts are evidence of nothing.
                let legacy_evidence = bare_4xx;
                // Authorization and other peer faults end the probe: asking again changes
                // nothing until the host acts.
                let auth = matches!(
                    error,
                    CallError::Peer(_)
                        | CallError::Local(_)
                        | CallError::Transport(TransportError::HttpStatus(401 | 403))
                );
                if legacy_evidence {
                    self.apply_verdict(now, ProbeVerdict::Legacy, None);
                } else if unauthorized(&error) {
                    self.authorization_failed(now, error);
                } else if !auth && self.retry_probe_later(now) {
                    // A server still starting up, or a passing network fault: probe again soon.
                    log::debug!("era probe failed: {}", error.name());
                    if let Some(at) = self.reprobe_at() {
                        self.fail_unservable(now, at, &error);
                    }
                } else {
                    self.shut(now, error);
                }
            }
            Owner::Handshake if unauthorized(&error) => self.authorization_failed(now, error),
            Owner::Handshake => self.shut(now, error),
        }
    }

    /// A legacy HTTP session vanished under request `id`, which the server therefore did not
    /// process: re-initialize and send it again, once.
    pub(super) fn on_session_expired(&mut self, now: Instant, id: WireId) {
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return };
        self.requests.end_exchange(slot, self.epoch.stamp(now));
        let Some(p) = self.requests.get_mut(slot) else { return };
        match p.owner {
            Owner::Host if !p.resent_for_session => {
                p.resent_for_session = true;
                if let Some(new_id) = self.requests.renew_wire_id(slot) {
                    self.send_queue.push_front(new_id);
                }
                self.stats.sessions_renewed += 1;
                if matches!(self.lifecycle, Lifecycle::Ready { .. }) {
                    log::debug!("legacy session expired; re-initializing");
                    self.start_handshake(now);
                }
            }
            Owner::Host => {
                let e = CallError::Transport(TransportError::SessionExpired);
                self.finish(now, slot, Ended::Abandoned, Outcome::Failed(e));
            }
            _ => self.shut(now, CallError::Transport(TransportError::SessionExpired)),
        }
    }

    pub(super) fn on_opened(&mut self, now: Instant, kind: TransportKind) {
        self.transport = kind;
        self.wants_transport = false;
        let Lifecycle::Connecting { next } = self.lifecycle else {
            return;
        };
        match next {
            Opening::Probe if self.resume_saved_verdict() => {}
            Opening::Probe => self.start_probe(now, lifecycle::first_probe_version()),
            Opening::Handshake => self.start_handshake(now),
        }
    }

    pub(super) fn on_closed(&mut self, now: Instant, error: TransportError) {
        self.forget_legacy_requests();
        if matches!(self.lifecycle, Lifecycle::Probing(_)) && self.config.era == EraPreference::Auto
        {
            // Some legacy servers exit when the first message is not `initialize` (PROTOCOL.md
            // U10): take that as the legacy verdict and respawn once for the handshake.
            log::debug!("server exited during the era probe; respawning for initialize");
            self.drop_lifecycle_request();
            self.lifecycle = Lifecycle::Connecting { next: Opening::Handshake };
            self.wants_transport = true;
            return;
        }
        if self.transport == TransportKind::Stdio
            && self.config.restart.enabled
            && self.lifecycle != Lifecycle::Closed
        {
            return self.on_process_lost(now, error);
        }
        self.shut(now, CallError::Transport(error));
    }
}
