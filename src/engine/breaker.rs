//! Circuit breakers per (tenant, operation class): closed, then open after enough consecutive
//! transport failures or timeouts, half-open after a cool-down (one probe call goes through),
//! then closed again on its success or open again on its failure.
//!
//! Only transport failures and timeouts count. A tool's `isError`, a JSON-RPC error, an auth
//! error and a cancel say nothing about the server's health and leave the breaker alone.

use std::time::Instant;

use smallvec::SmallVec;

use crate::config::BreakerPolicy;
use crate::error::{CallError, LocalError, TransportError};

/// Which operations share a breaker: reads can keep flowing while writes are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationClass {
    /// Read-only calls, listings, reads.
    Read,
    /// Everything that may change something.
    Write,
}

/// A breaker's state, as the host sees it in [`Event::Breaker`](crate::Event::Breaker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls flow.
    Closed,
    /// Calls fail fast until the cool-down ends.
    Open,
    /// One probe call is allowed through.
    HalfOpen,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Closed { failures: u32 },
    Open { until: Instant },
    HalfOpen { probe_out: bool },
}

#[derive(Debug, Clone)]
pub(super) struct Breaker {
    tenant: u32,
    class: OperationClass,
    state: State,
}

/// A breaker changed state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) tenant: u32,
    pub(crate) class: OperationClass,
    pub(crate) state: BreakerState,
}

/// A breaker's answer to a call that asks to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    Refused,
    Admitted,
    /// Admitted as the half-open breaker's one probe: the breaker waits for its outcome, or
    /// for [`Breakers::release_probe`] when it ends unsent.
    Probe,
}

impl Admission {
    pub(crate) fn admitted(self) -> bool {
        self != Self::Refused
    }
}

/// Breakers kept per engine; tenants beyond this reuse healthy slots (see `find`).
const MAX_BREAKERS: usize = 64;
/// The tenant id of the shared breaker used when every slot is tripped.
const OVERFLOW_TENANT: u32 = u32::MAX;

/// Whether a finished attempt says anything about the server's health.
pub(crate) fn counts(e: &CallError) -> bool {
    match e {
        // A bare 4xx (a body too large, a media type refused) is the server's answer to the
        // request, as a JSON-RPC error is; a timeout or a "too many requests" is its health.
        CallError::Transport(TransportError::HttpStatus(s)) => {
            !(400..500).contains(s) || matches!(s, 408 | 429)
        }
        CallError::Transport(_) => true,
        CallError::Local(l) => {
            matches!(l, LocalError::DeadlineExceeded | LocalError::DeliveryUnknown(_))
        }
        // An answer, however unwelcome, is a sign of life.
        CallError::Protocol(_) | CallError::Peer(_) => false,
    }
}

/// All the breakers of one engine. A handful of (tenant, class) pairs is the norm, so a small
/// vector beats a map.
#[derive(Debug)]
pub(crate) struct Breakers {
    policy: BreakerPolicy,
    all: SmallVec<[Breaker; 4]>,
    /// Every breaker is closed with no failure counted: a call is admitted, and a success
    /// changes nothing, without looking its breaker up (the steady state of a healthy server,
    /// paid on every call). Recomputed after any other outcome.
    all_fresh: bool,
}

impl Breakers {
    pub(crate) fn new(policy: BreakerPolicy) -> Self {
        Self { policy, all: SmallVec::new(), all_fresh: true }
    }

    pub(super) fn find(&mut self, tenant: u32, class: OperationClass) -> &mut Breaker {
        let fresh = State::Closed { failures: 0 };
        let i = match self.all.iter().position(|b| b.tenant == tenant && b.class == class) {
            Some(i) => i,
            None if self.all.len() < MAX_BREAKERS => {
                self.all.push(Breaker { tenant, class, state: fresh });
                self.all.len() - 1
            }
            // Full: a healthy breaker says nothing a fresh one would not, so it can be reused;
            // when every one is tripped, the newcomers share one overflow breaker per class.
            None => match self.all.iter().position(|b| b.state == fresh) {
                Some(i) => {
                    self.all[i] = Breaker { tenant, class, state: fresh };
                    i
                }
                None => {
                    return self.find_overflow(class);
                }
            },
        };
        &mut self.all[i]
    }

    /// The breaker that admitted a call of `tenant`. For a `probe`: its own when that waits
    /// for a probe; else the overflow breaker waiting for one (the probe was admitted there
    /// while every slot was tripped: a slot freed since, even one the tenant took for its next
    /// call, must not take its outcome, leaving the overflow breaker waiting for good); else
    /// its own. Otherwise its own, or as [`find`](Self::find) finds one: a tenant admitted
    /// while every breaker was fresh has none of its own either, and its failure belongs to a
    /// breaker of its own, not to the overflow one.
    fn of_admitted(&mut self, tenant: u32, class: OperationClass, probe: bool) -> &mut Breaker {
        let own = self.all.iter().position(|b| b.tenant == tenant && b.class == class);
        let waiting = State::HalfOpen { probe_out: true };
        let i = if probe {
            let overflow =
                |b: &Breaker| b.tenant == OVERFLOW_TENANT && b.class == class && b.state == waiting;
            let own_waiting = own.filter(|&i| self.all[i].state == waiting);
            own_waiting.or_else(|| self.all.iter().position(overflow)).or(own)
        } else {
            own
        };
        match i {
            Some(i) => &mut self.all[i],
            None => self.find(tenant, class),
        }
    }

    pub(super) fn find_overflow(&mut self, class: OperationClass) -> &mut Breaker {
        let i = match self.all.iter().position(|b| b.tenant == OVERFLOW_TENANT && b.class == class)
        {
            Some(i) => i,
            None => {
                self.all.push(Breaker {
                    tenant: OVERFLOW_TENANT,
                    class,
                    state: State::Closed { failures: 0 },
                });
                self.all.len() - 1
            }
        };
        &mut self.all[i]
    }

    /// May a call start now? An open breaker whose cool-down ended turns half-open and lets
    /// this one call through as its probe.
    pub(crate) fn admit(
        &mut self,
        tenant: u32,
        class: OperationClass,
        now: Instant,
    ) -> (Admission, Option<Change>) {
        if self.policy.failure_threshold == 0 || self.all_fresh {
            return (Admission::Admitted, None);
        }
        let b = self.find(tenant, class);
        let verdict = match b.state {
            State::Closed { .. } => (Admission::Admitted, None),
            State::Open { until } if now >= until => {
                b.state = State::HalfOpen { probe_out: true };
                (Admission::Probe, Some(Change { tenant, class, state: BreakerState::HalfOpen }))
            }
            State::Open { .. } | State::HalfOpen { probe_out: true } => (Admission::Refused, None),
            State::HalfOpen { probe_out: false } => {
                b.state = State::HalfOpen { probe_out: true };
                (Admission::Probe, None)
            }
        };
        self.note_states();
        verdict
    }

    /// The probe a half-open breaker let through ended before it was written, so it says
    /// nothing of the server: the next call may probe instead.
    pub(crate) fn release_probe(&mut self, tenant: u32, class: OperationClass) {
        let b = self.of_admitted(tenant, class, true);
        if b.state == (State::HalfOpen { probe_out: true }) {
            b.state = State::HalfOpen { probe_out: false };
        }
    }

    /// Recomputes [`all_fresh`](Self::all_fresh) after a state may have changed.
    fn note_states(&mut self) {
        self.all_fresh = self.all.iter().all(|b| b.state == State::Closed { failures: 0 });
    }

    /// Records how an attempt of an admitted call ended; `probe`: the call was admitted as
    /// its half-open breaker's probe. While the breaker is half-open only the probe's end
    /// counts: an older call's cancel or error freed the probe's place with the probe still
    /// out (a second probe went), its failure reopened the breaker under the probe (whose
    /// success was then lost), its success closed it before the probe said anything.
    #[inline]
    pub(crate) fn record(
        &mut self,
        tenant: u32,
        class: OperationClass,
        outcome: Option<&CallError>,
        now: Instant,
        probe: bool,
    ) -> Option<Change> {
        if self.policy.failure_threshold == 0 || (outcome.is_none() && self.all_fresh) {
            return None;
        }
        let threshold = self.policy.failure_threshold;
        let cool_down = self.policy.cool_down;
        let b = self.of_admitted(tenant, class, probe);
        if !probe && matches!(b.state, State::HalfOpen { .. }) {
            return None;
        }
        let failed = outcome.is_some_and(counts);
        let neutral = outcome.is_some() && !failed;
        let (next, changed) = match (b.state, failed, neutral) {
            // A cancel or a protocol error frees a half-open probe slot without a verdict.
            (State::HalfOpen { .. }, _, true) => (State::HalfOpen { probe_out: false }, None),
            (_, _, true) => (b.state, None),
            (State::Closed { .. }, false, _) => (State::Closed { failures: 0 }, None),
            (State::Closed { failures }, true, _) if failures + 1 >= threshold => (
                State::Open { until: crate::time::later(now, cool_down) },
                Some(BreakerState::Open),
            ),
            (State::Closed { failures }, true, _) => {
                (State::Closed { failures: failures + 1 }, None)
            }
            (State::HalfOpen { .. }, false, _) => {
                (State::Closed { failures: 0 }, Some(BreakerState::Closed))
            }
            (State::HalfOpen { .. }, true, _) => (
                State::Open { until: crate::time::later(now, cool_down) },
                Some(BreakerState::Open),
            ),
            // A call admitted before the breaker opened ends later: it changes nothing.
            (State::Open { .. }, _, _) => (b.state, None),
        };
        b.state = next;
        self.note_states();
        changed.map(|state| Change { tenant, class, state })
    }

    /// The state of one breaker.
    pub(crate) fn state(&self, tenant: u32, class: OperationClass) -> BreakerState {
        match self.all.iter().find(|b| b.tenant == tenant && b.class == class).map(|b| b.state) {
            None | Some(State::Closed { .. }) => BreakerState::Closed,
            Some(State::Open { .. }) => BreakerState::Open,
            Some(State::HalfOpen { .. }) => BreakerState::HalfOpen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{PeerError, RpcError, TransportError};
    use std::time::Duration;

    const T: u32 = 0;
    const R: OperationClass = OperationClass::Read;

    pub(super) fn lost() -> CallError {
        CallError::Transport(TransportError::ConnectionLost)
    }

    #[test]
    pub(super) fn every_transition() {
        let policy = BreakerPolicy { failure_threshold: 3, cool_down: Duration::from_secs(10) };
        let mut b = Breakers::new(policy);
        let t0 = Instant::now();
        // closed: failures below the threshold, and a success resets the count.
        for _ in 0..2 {
            assert_eq!(b.admit(T, R, t0), (Admission::Admitted, None));
            assert_eq!(b.record(T, R, Some(&lost()), t0, false), None);
        }
        assert_eq!(b.record(T, R, None, t0, false), None);
        assert_eq!(b.state(T, R), BreakerState::Closed);
        // closed -> open on the threshold-th consecutive failure.
        for i in 0..3 {
            let change = b.record(T, R, Some(&lost()), t0, false);
            assert_eq!(
                change.map(|c| c.state),
                if i == 2 { Some(BreakerState::Open) } else { None }
            );
        }
        // open: fail fast until the cool-down ends.
        assert_eq!(b.admit(T, R, t0 + Duration::from_secs(9)), (Admission::Refused, None));
        // open -> half-open: one probe through, the next refused.
        let (ok, change) = b.admit(T, R, t0 + Duration::from_secs(10));
        assert_eq!(ok, Admission::Probe);
        assert_eq!(change.map(|c| c.state), Some(BreakerState::HalfOpen));
        assert!(!b.admit(T, R, t0 + Duration::from_secs(10)).0.admitted());
        // half-open -> open when the probe fails.
        let t1 = t0 + Duration::from_secs(11);
        assert_eq!(
            b.record(T, R, Some(&lost()), t1, true).map(|c| c.state),
            Some(BreakerState::Open)
        );
        assert!(!b.admit(T, R, t1 + Duration::from_secs(5)).0.admitted());
        // half-open -> closed when the probe succeeds.
        let t2 = t1 + Duration::from_secs(10);
        assert!(b.admit(T, R, t2).0.admitted());
        assert_eq!(b.record(T, R, None, t2, true).map(|c| c.state), Some(BreakerState::Closed));
        assert_eq!(b.admit(T, R, t2), (Admission::Admitted, None));
    }

    #[test]
    pub(super) fn only_transport_failures_and_timeouts_count() {
        let mut b = Breakers::new(BreakerPolicy {
            failure_threshold: 1,
            cool_down: Duration::from_secs(1),
        });
        let now = Instant::now();
        for neutral in [
            CallError::Protocol(RpcError::from_raw(-32602, "x", None)),
            CallError::Local(LocalError::Cancelled),
            CallError::Peer(PeerError::AuthRequired(Box::default())),
        ] {
            assert_eq!(b.record(T, R, Some(&neutral), now, false), None, "{neutral:?}");
        }
        assert_eq!(b.state(T, R), BreakerState::Closed);
        let timeout = CallError::Local(LocalError::DeadlineExceeded);
        assert_eq!(
            b.record(T, R, Some(&timeout), now, false).map(|c| c.state),
            Some(BreakerState::Open)
        );
    }

    #[test]
    pub(super) fn tenants_and_classes_are_isolated() {
        let mut b = Breakers::new(BreakerPolicy {
            failure_threshold: 1,
            cool_down: Duration::from_secs(60),
        });
        let now = Instant::now();
        b.record(1, OperationClass::Write, Some(&lost()), now, false);
        assert_eq!(b.state(1, OperationClass::Write), BreakerState::Open);
        assert!(
            b.admit(1, OperationClass::Read, now).0.admitted(),
            "reads of the same tenant still flow"
        );
        assert!(
            b.admit(2, OperationClass::Write, now).0.admitted(),
            "another tenant's writes still flow"
        );
        assert!(!b.admit(1, OperationClass::Write, now).0.admitted());
    }

    #[test]
    pub(super) fn the_table_is_bounded_whatever_the_number_of_tenants() {
        let mut b = Breakers::new(BreakerPolicy {
            failure_threshold: 1,
            cool_down: Duration::from_secs(60),
        });
        let now = Instant::now();
        for tenant in 0..10_000 {
            b.admit(tenant, R, now);
        }
        assert!(b.all.len() <= MAX_BREAKERS, "healthy breakers are reused");
        for tenant in 0..200 {
            b.record(tenant, R, Some(&lost()), now, false);
        }
        assert!(
            b.all.len() <= MAX_BREAKERS + 2,
            "tripped ones overflow into one shared breaker per class"
        );
        assert!(!b.admit(5, R, now).0.admitted(), "a tracked tripped tenant stays open");
    }

    /// Every slot tripped (one failure each, a threshold of one), and the overflow breaker
    /// tripped by tenant 900: breakers whose cool-down ends at the instant returned.
    fn every_slot_and_the_overflow_tripped() -> (Breakers, Instant) {
        let cool_down = Duration::from_secs(60);
        let mut b = Breakers::new(BreakerPolicy { failure_threshold: 1, cool_down });
        let t0 = Instant::now();
        for tenant in 0..MAX_BREAKERS as u32 {
            b.record(tenant, R, Some(&lost()), t0, false);
        }
        b.record(900, R, Some(&lost()), t0, false);
        assert!(!b.admit(901, R, t0).0.admitted(), "the overflow breaker is open");
        (b, t0 + cool_down)
    }

    /// A tenant admitted as the overflow breaker's probe (every slot tripped) has its outcome
    /// told there, even when a slot was freed meanwhile: told to a new breaker of its own, it
    /// left the overflow breaker half-open with its probe out, refusing every tenant that
    /// overflows, for as long as no slot was free.
    #[test]
    fn an_overflow_probe_is_judged_by_the_overflow_breaker() {
        let (mut b, t1) = every_slot_and_the_overflow_tripped();
        assert_eq!(b.admit(999, R, t1).0, Admission::Probe, "the overflow breaker's probe");
        // Tenant 0's probe succeeds: its breaker closes, a slot a newcomer may take.
        assert_eq!(b.admit(0, R, t1).0, Admission::Probe);
        b.record(0, R, None, t1, true);
        // The overflow probe's success closes the overflow breaker.
        let change = b.record(999, R, None, t1, true);
        assert_eq!(change.map(|c| c.state), Some(BreakerState::Closed));
        for tenant in [1000, 1001] {
            assert!(b.admit(tenant, R, t1).0.admitted(), "overflowing tenants flow again");
        }
    }

    /// The same when the probe's tenant took a slot of its own for its next call (a slot was
    /// freed meanwhile): its own, closed, took the probe's outcome, and the overflow breaker
    /// waited for its probe for good, refusing every tenant that overflows whenever no slot
    /// was free.
    #[test]
    fn an_overflow_probe_is_judged_there_after_its_tenant_took_a_slot() {
        let (mut b, t1) = every_slot_and_the_overflow_tripped();
        assert_eq!(b.admit(999, R, t1).0, Admission::Probe, "the overflow breaker's probe");
        assert_eq!(b.admit(0, R, t1).0, Admission::Probe);
        b.record(0, R, None, t1, true);
        assert_eq!(b.admit(999, R, t1).0, Admission::Admitted, "999 takes slot 0, fresh");
        let change = b.record(999, R, None, t1, true);
        assert_eq!(change.map(|c| c.state), Some(BreakerState::Closed));
        assert_eq!(b.state(OVERFLOW_TENANT, R), BreakerState::Closed, "no probe left waiting");
        // Slot 0 tripped again: every slot is, and newcomers share the overflow breaker.
        b.record(999, R, Some(&lost()), t1, false);
        assert!(b.admit(1000, R, t1).0.admitted(), "overflowing tenants flow");
    }

    /// A tenant with no breaker of its own that is no overflow probe (admitted while every
    /// breaker was fresh) has its failure counted on a breaker of its own, not lost on the
    /// overflow breaker.
    #[test]
    fn a_failure_outside_the_overflow_is_counted_on_its_own_breaker() {
        let cool_down = Duration::from_secs(60);
        let mut b = Breakers::new(BreakerPolicy { failure_threshold: 1, cool_down });
        let t0 = Instant::now();
        for tenant in 0..=MAX_BREAKERS as u32 {
            b.record(tenant, R, Some(&lost()), t0, false);
        }
        let t1 = t0 + cool_down;
        assert_eq!(b.admit(0, R, t1).0, Admission::Probe);
        b.record(0, R, None, t1, true);
        let change = b.record(5000, R, Some(&lost()), t1, false);
        assert_eq!(change.map(|c| c.state), Some(BreakerState::Open), "its own, opened");
        assert_eq!(b.state(5000, R), BreakerState::Open);
    }

    #[test]
    pub(super) fn a_cancelled_probe_frees_the_half_open_slot() {
        let mut b = Breakers::new(BreakerPolicy {
            failure_threshold: 1,
            cool_down: Duration::from_secs(1),
        });
        let now = Instant::now();
        b.record(T, R, Some(&lost()), now, false);
        let later = now + Duration::from_secs(1);
        assert!(b.admit(T, R, later).0.admitted());
        b.record(T, R, Some(&CallError::Local(LocalError::Cancelled)), later, true);
        assert!(b.admit(T, R, later).0.admitted(), "another probe may go");
    }

    #[test]
    fn the_lookup_is_skipped_only_while_every_breaker_is_fresh() {
        let policy = BreakerPolicy { failure_threshold: 2, cool_down: Duration::from_secs(1) };
        let mut b = Breakers::new(policy);
        let now = Instant::now();
        assert!(b.admit(T, R, now).0.admitted() && b.all_fresh);
        assert_eq!(b.record(T, R, None, now, false), None);
        assert!(b.all.is_empty(), "a healthy table looks nothing up");
        // One failure counted: successes go the long way again, and reset the count.
        b.record(T, R, Some(&lost()), now, false);
        assert!(!b.all_fresh);
        b.record(T, R, None, now, false);
        assert!(b.all_fresh, "the success reset the only breaker");
        // Tripped, then recovered through a probe: fresh again.
        b.record(T, R, Some(&lost()), now, false);
        assert_eq!(
            b.record(T, R, Some(&lost()), now, false).map(|c| c.state),
            Some(BreakerState::Open)
        );
        assert!(!b.admit(T, R, now).0.admitted(), "an open breaker is never skipped");
        let later = now + Duration::from_secs(1);
        assert!(b.admit(T, R, later).0.admitted());
        assert!(!b.admit(T, R, later).0.admitted(), "the half-open probe is out");
        assert_eq!(b.record(T, R, None, later, true).map(|c| c.state), Some(BreakerState::Closed));
        assert!(b.all_fresh);
    }
}
