//! Supervised restart of a crashed stdio server: backoff between processes, crash-loop
//! detection, and ending the calls no process can serve in time.

use std::time::Instant;

use smallvec::SmallVec;

use super::ending::Outcome;
use super::lifecycle::{Lifecycle, Opening};
use super::requests::{Ended, Owner, SendState};
use super::retry::Delivery;
use super::Engine;
use crate::error::{CallError, LocalError, TransportError};
use crate::proto::version::Era;

/// Restart bookkeeping for a stdio server.
#[derive(Debug, Default)]
pub(crate) struct RestartState {
    /// Recent exits, for crash-loop detection.
    exits: SmallVec<[Instant; 8]>,
    /// When to ask the driver for a new process.
    restart_at: Option<Instant>,
    /// Restarts suspended (crash loop) until this time, or until the host asks.
    degraded_until: Option<Instant>,
    /// Processes started after the first.
    pub(crate) restarts: u32,
    /// Why the last process ended (exit status and stderr tail for stdio), for the host.
    last_loss: Option<TransportError>,
    /// Why the first process of the current crash window ended: in a crash loop the first
    /// exit usually says what is wrong, the later ones repeat it or fail to start at all.
    first_loss: Option<TransportError>,
}

impl RestartState {
    pub(super) fn is_degraded(&self) -> bool {
        self.degraded_until.is_some()
    }

    pub(super) fn last_loss(&self) -> Option<&TransportError> {
        self.last_loss.as_ref()
    }

    /// Forgets the crash history: the host asked for a new start.
    pub(super) fn reset(&mut self) {
        self.degraded_until = None;
        self.exits.clear();
        self.restart_at = None;
    }

    pub(crate) fn next_wakeup(&self) -> Option<Instant> {
        self.restart_at.or(self.degraded_until)
    }
}

impl Engine {
    /// The server process died. Calls that never left wait for the next process; calls that
    /// may have reached it are retried or end by the retry policy; a restart is scheduled
    /// with backoff, unless the exits come too fast (a crash loop: the server is degraded).
    pub(super) fn on_process_lost(&mut self, now: Instant, error: TransportError) {
        // No new process until the backoff ends (a failed spawn lands here too: without this
        // the host would try again on every poll).
        self.wants_transport = false;
        self.drop_lifecycle_request();
        self.restart.last_loss = Some(error.clone());
        let cause = CallError::Transport(error);
        let sent: SmallVec<[usize; 16]> = self
            .requests
            .iter()
            .filter(|(_, p)| p.owner == Owner::Host && p.state == SendState::Sent)
            .map(|(slot, _)| slot)
            .collect();
        for slot in sent {
            self.on_attempt_failed(now, slot, cause.clone(), Delivery::MaybeDelivered);
        }
        // Nothing of the old process may be written to the new one.
        self.control.clear();
        let policy = self.config.restart;
        let window_start = now.checked_sub(policy.crash_loop_window).unwrap_or(now);
        self.restart.exits.retain(|t| *t >= window_start);
        if self.restart.exits.is_empty() {
            self.restart.first_loss = self.restart.last_loss.clone();
        }
        if self.restart.exits.len() == self.restart.exits.inline_size() {
            self.restart.exits.remove(0);
        }
        self.restart.exits.push(now);
        // A server that died during `initialize` already had its legacy verdict (the probe
        // failed, or it exited on the probe): the next process gets the handshake straight
        // away rather than another probe that would kill it again.
        let died_handshaking =
            matches!(self.lifecycle, Lifecycle::Connecting { next: Opening::Handshake });
        let next = match self.era() {
            Some(Era::Legacy) => Opening::Handshake,
            _ if self.config.era == crate::EraPreference::LegacyOnly => Opening::Handshake,
            _ if died_handshaking => Opening::Handshake,
            _ => Opening::Probe,
        };
        self.lifecycle = Lifecycle::Connecting { next };
        self.meta = None;
        if self.restart.exits.len() as u32 >= policy.crash_loop_exits {
            log::warn!(
                "server crashed {} times within {:?}: degraded",
                self.restart.exits.len(),
                policy.crash_loop_window
            );
            self.restart.degraded_until =
                Some(crate::time::later(now, policy.degraded_retry_after));
            let first = self.restart.first_loss.clone().map(Box::new);
            self.fail_all(now, CallError::Local(LocalError::Degraded(first)));
            self.events.transport_lost(cause, None);
            return;
        }
        let crashes = self.restart.exits.len() as u32;
        let delay = policy
            .base_delay
            .saturating_mul(1 << crashes.saturating_sub(1).min(16))
            .min(policy.max_delay);
        self.restart.restart_at = Some(crate::time::later(now, delay));
        self.restart.restarts += 1;
        self.fail_unservable(now, crate::time::later(now, delay), &cause);
        self.events.transport_lost(cause, Some(delay));
    }

    /// Calls whose deadline comes before the next process (or the next era probe) does cannot
    /// be answered: they end now with the failure that stopped them (an exit status and stderr
    /// tail, a lost connection) instead of a bare `DeadlineExceeded` when their deadline
    /// passes. Calls in flight were settled by the retry policy already; this takes the ones
    /// waiting to be (re)sent.
    pub(super) fn fail_unservable(&mut self, now: Instant, restart_at: Instant, cause: &CallError) {
        let restart_at = self.epoch.stamp(restart_at);
        let doomed: SmallVec<[usize; 16]> = self
            .requests
            .iter()
            .filter(|(_, p)| {
                p.owner == Owner::Host
                    && p.state != SendState::Sent
                    && !p.internal
                    && p.deadline <= restart_at
            })
            .map(|(slot, _)| slot)
            .collect();
        for slot in doomed {
            self.finish(now, slot, Ended::Abandoned, Outcome::Failed(cause.clone()));
        }
    }

    /// Backoffs that ended, restarts that are due.
    pub(super) fn resilience_timeout(&mut self, now: Instant) {
        if self.restart.restart_at.is_some_and(|t| t <= now) {
            self.restart.restart_at = None;
            self.wants_transport = true;
        }
        if self.restart.degraded_until.is_some_and(|t| t <= now) {
            // A half-open probe of the process: one more start.
            log::debug!("degraded server: trying one restart");
            self.restart.degraded_until = None;
            self.restart.exits.clear();
            self.wants_transport = true;
        }
    }
}
