//! The engine's resilience: idempotency classes, retries with backoff within the deadline,
//! circuit breakers, the in-flight limit, and supervised restart of a crashed stdio server.
//! The policies themselves are pure ([`retry`](super::retry), [`breaker`](super::breaker));
//! this file applies them to the pending table.

use std::time::Instant;

use smallvec::SmallVec;

use super::breaker::{self, OperationClass};
use super::events::CallRecord;
use super::lifecycle::{Lifecycle, Opening};
use super::requests::{Ended, Owner, SendState};
use super::retry::{self, Decision, Delivery, Idempotency};
use super::{CallOptions, Engine};

use crate::error::{CallError, LocalError, TransportError};
use crate::proto::jsonrpc::{write_json_str, WireId};
use crate::proto::mcp::{Method, ResultType};
use crate::proto::version::Era;

/// How a host call ended.
pub(super) enum Outcome<'a> {
    Done { json: &'a str, result_type: ResultType, is_error: bool },
    Listing { key: &'a str, items: &'a [u8] },
    Failed(CallError),
}

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
}

impl RestartState {
    pub(crate) fn next_wakeup(&self) -> Option<Instant> {
        self.restart_at.or(self.degraded_until)
    }
}

/// Writes the arguments object, with the idempotency key added under `field` unless the
/// caller already put one there.
pub(super) fn write_arguments(out: &mut Vec<u8>, arguments: &str, field: &str, key: Option<&str>) {
    let Some(key) = key else {
        out.extend_from_slice(arguments.as_bytes());
        return;
    };
    let trimmed = arguments.trim();
    let already = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(trimmed)
        .is_ok_and(|m| m.contains_key(field));
    let inner = trimmed.strip_prefix('{').map(str::trim_start);
    match inner {
        Some(rest) if !already => {
            out.push(b'{');
            write_json_str(out, field);
            out.push(b':');
            write_json_str(out, key);
            if !rest.starts_with('}') {
                out.push(b',');
            }
            out.extend_from_slice(rest.as_bytes());
        }
        _ => out.extend_from_slice(arguments.as_bytes()),
    }
}

impl Engine {
    /// How safe a new call is to send twice: the caller's word first, then an idempotency
    /// key, then the tool's annotations; reads of lists, resources and prompts are reads.
    /// `tool_hint` is what the last listing's annotations say about the tool being called.
    pub(super) fn classify(
        &self,
        method: Method,
        opts: &CallOptions,
        tool_hint: Option<Idempotency>,
    ) -> Idempotency {
        if let Some(c) = opts.idempotency {
            return c;
        }
        match method {
            Method::ToolsCall if opts.idempotency_key.is_some() => Idempotency::Keyed,
            Method::ToolsCall => tool_hint.unwrap_or(Idempotency::Unknown),
            // A subscription is re-opened by the host, never re-sent behind its back.
            Method::Listen | Method::Initialize => Idempotency::Unknown,
            _ => Idempotency::Read,
        }
    }

    pub(super) fn admit(&mut self, tenant: u32, op: OperationClass, now: Instant) -> bool {
        let (ok, change) = self.breakers.admit(tenant, op, now);
        if let Some(c) = change {
            self.events.breaker(c.tenant, c.class, c.state);
        }
        ok
    }

    /// `true` when `id` has never been written: only first attempts wait for the in-flight
    /// limit; a retry already holds its slot.
    pub(super) fn is_fresh(&self, id: WireId) -> bool {
        self.requests.get(id.slot()).is_some_and(|p| p.attempt == 0)
    }

    /// `true` while restarts are suspended because the server kept crashing (until the
    /// cool-down ends or the host calls [`restart`](Self::restart)).
    pub fn is_degraded(&self) -> bool {
        self.restart.degraded_until.is_some()
    }

    /// Why the last server process ended (stdio: its exit status and stderr tail), once one
    /// has; kept across restarts for diagnostics.
    pub fn last_transport_error(&self) -> Option<&TransportError> {
        self.restart.last_loss.as_ref()
    }

    /// `true` when one more host call's terminal event is sure to fit: terminal events are
    /// never dropped, so they are bounded here, at admission. Those the host has not drained
    /// plus those every pending host call will produce stay within `Config::max_queued_events`.
    pub(super) fn room_for_end(&self) -> bool {
        let engine_own =
            usize::from(self.lifecycle.call().is_some()) + usize::from(self.refresh.is_some());
        let host_calls = self.requests.len().saturating_sub(engine_own);
        self.events.terminals() + host_calls < self.config.max_queued_events
    }

    /// A request was written: count the attempt and the time it waited in the queue.
    pub(super) fn mark_sent(&mut self, now: Instant, slot: usize) {
        self.requests.set_state(slot, SendState::Sent);
        if let Some(p) = self.requests.get_mut(slot) {
            if p.attempt == 0 {
                p.queue_wait = now.saturating_duration_since(p.created);
            }
            p.attempt += 1;
            p.sent_at = Some(now);
        }
    }

    /// Ends a host call: frees the slot, tells its breaker, and queues the terminal event.
    pub(super) fn finish(&mut self, now: Instant, slot: usize, how: Ended, outcome: Outcome<'_>) {
        let Some(call) = self.requests.call_id(slot) else { return };
        let Some(p) = self.requests.remove(slot, how) else { return };
        if p.internal {
            // The tool-list refresh: its end releases the calls waiting for it.
            self.refresh = None;
            self.unpark(now, matches!(outcome, Outcome::Listing { .. }));
            self.tidy_timers();
            return;
        }
        let record = CallRecord {
            attempts: p.attempt,
            queue_wait: p.queue_wait,
            elapsed: now.saturating_duration_since(p.created),
        };
        let failure = match &outcome {
            Outcome::Failed(e) => Some(e),
            _ => None,
        };
        let change =
            if p.attempt > 0 { self.breakers.record(p.tenant, p.op, failure, now) } else { None };
        if let (None, Some(sent)) = (failure, p.sent_at) {
            // A moving average of one attempt's duration, for judging whether a retry fits.
            let took = now.saturating_duration_since(sent);
            self.latency = (self.latency * 7 + took) / 8;
        }
        match outcome {
            Outcome::Done { json, result_type, is_error } => {
                self.events.done(call, json, result_type, is_error, record)
            }
            Outcome::Listing { key, items } => self.events.done_listing(call, key, items, record),
            Outcome::Failed(e) => self.events.failed(call, e, record),
        }
        // The call's own end first, then what it did to its breaker.
        if let Some(c) = change {
            self.events.breaker(c.tenant, c.class, c.state);
        }
        self.tidy_timers();
    }

    /// An attempt failed in transport: send it again after a backoff if the policy allows,
    /// else end the call (as `DeliveryUnknown` when a write may have run).
    pub(super) fn on_attempt_failed(
        &mut self,
        now: Instant,
        slot: usize,
        error: CallError,
        delivery: Delivery,
    ) {
        let Some(p) = self.requests.get(slot) else { return };
        let (class, attempt, deadline, tenant, op) =
            (p.class, p.attempt.max(1), p.deadline, p.tenant, p.op);
        let random = self.jitter.next();
        let decision = retry::decide(
            &self.config.retry,
            class,
            &error,
            delivery,
            attempt,
            now,
            deadline,
            self.latency,
            random,
        );
        match decision {
            Decision::Retry(delay) => {
                // A failed attempt tells its breaker even when the call goes on (a final
                // failure is told by `finish`).
                if let Some(c) = self.breakers.record(tenant, op, Some(&error), now) {
                    self.events.breaker(c.tenant, c.class, c.state);
                }
                log::debug!("attempt {attempt} failed ({error}); retrying in {delay:?}");
                self.stats.retries += 1;
                // The old wire id becomes late: a reply to it is never taken for the new one.
                self.requests.renew_wire_id(slot);
                self.requests.set_state(slot, SendState::Backoff(now + delay));
                self.schedule(slot, now + delay, super::timers::TimerKind::Backoff);
            }
            Decision::Fail => self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error)),
            Decision::DeliveryUnknown => {
                let cause = match error {
                    CallError::Transport(t) => t,
                    _ => TransportError::ConnectionLost,
                };
                let e = CallError::Local(LocalError::DeliveryUnknown(Box::new(cause)));
                self.finish(now, slot, Ended::Abandoned, Outcome::Failed(e));
            }
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

    /// A retry's backoff ended: send it again, unless its breaker says no.
    pub(super) fn backoff_ended(&mut self, now: Instant, slot: usize) {
        let Some(p) = self.requests.get(slot) else { return };
        let (tenant, op) = (p.tenant, p.op);
        if !self.admit(tenant, op, now) {
            let e = CallError::Local(LocalError::BreakerOpen);
            self.finish(now, slot, Ended::Abandoned, Outcome::Failed(e));
            return;
        }
        self.requests.set_state(slot, SendState::Queued);
        if let Some(id) = self.requests.wire_id(slot) {
            self.send_queue.push_front(id);
        }
    }

    /// HTTP -32020: the server says the call's `Mcp-Param-*` headers are missing or wrong, so
    /// the tool list this engine knows is stale or absent. The spec asks to re-fetch
    /// `tools/list` and retry: the call waits (once) for a fresh listing. Returns `false` when
    /// that does not apply and the error should end the call.
    pub(super) fn park_for_relist(&mut self, now: Instant, slot: usize) -> bool {
        let Some(p) = self.requests.get_mut(slot) else { return false };
        if self.transport != super::TransportKind::Http
            || p.method != Method::ToolsCall
            || p.relisted
        {
            return false;
        }
        p.relisted = true;
        self.requests.set_state(slot, SendState::Parked);
        if self.refresh.is_none() {
            match self.request(now, Method::ToolsList, &CallOptions::default(), None, |_, _| {}) {
                Ok(call) => {
                    let refresh = call.0.slot();
                    if let Some(r) = self.requests.get_mut(refresh) {
                        r.internal = true;
                    }
                    self.refresh = Some(refresh);
                }
                Err(e) => {
                    log::debug!("cannot refresh the tool list: {e}");
                    self.unpark(now, false);
                }
            }
        }
        true
    }

    /// The refresh ended: parked calls go again with headers from the fresh listing, or end
    /// with the header mismatch when the listing failed.
    pub(super) fn unpark(&mut self, now: Instant, listed: bool) {
        let parked: SmallVec<[usize; 8]> = self
            .requests
            .iter()
            .filter(|(_, p)| p.state == SendState::Parked)
            .map(|(s, _)| s)
            .collect();
        for slot in parked {
            if !listed {
                let e = crate::error::RpcError {
                    code: crate::error::RpcError::HEADER_MISMATCH,
                    message: "header mismatch, and re-listing the tools failed".into(),
                    data: None,
                };
                self.finish(now, slot, Ended::Abandoned, Outcome::Failed(CallError::Protocol(e)));
                continue;
            }
            let bufs = self.requests.bufs_mut(slot);
            let mut params = Vec::with_capacity(bufs.params.len() + 2);
            params.push(b'{');
            params.extend_from_slice(&bufs.params);
            params.push(b'}');
            let arguments =
                crate::proto::json::parse(&params).ok().and_then(|p| p.get("arguments"));
            let name = std::mem::take(&mut bufs.name);
            let mut headers = std::mem::take(&mut bufs.param_headers);
            headers.clear();
            if let Some(a) = arguments {
                self.tool_headers.write_for_call(&name, a.text(), &mut headers);
            }
            let bufs = self.requests.bufs_mut(slot);
            bufs.name = name;
            bufs.param_headers = headers;
            if let Some(id) = self.requests.renew_wire_id(slot) {
                self.send_queue.push_front(id);
            }
        }
    }

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
            self.restart.degraded_until = Some(now + policy.degraded_retry_after);
            self.fail_all(now, CallError::Local(LocalError::Degraded));
            self.events.transport_lost(cause, None);
            return;
        }
        let crashes = self.restart.exits.len() as u32;
        let delay = policy
            .base_delay
            .saturating_mul(1 << crashes.saturating_sub(1).min(16))
            .min(policy.max_delay);
        self.restart.restart_at = Some(now + delay);
        self.restart.restarts += 1;
        self.fail_unservable(now, now + delay, &cause);
        self.events.transport_lost(cause, Some(delay));
    }

    /// Calls whose deadline comes before the next process (or the next era probe) does cannot
    /// be answered: they end now with the failure that stopped them (an exit status and stderr
    /// tail, a lost connection) instead of a bare `DeadlineExceeded` when their deadline
    /// passes. Calls in flight were settled by the retry policy already; this takes the ones
    /// waiting to be (re)sent.
    pub(super) fn fail_unservable(&mut self, now: Instant, restart_at: Instant, cause: &CallError) {
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

    /// The host asks a degraded (or closed-by-crash) server to start again now.
    pub fn restart(&mut self) {
        if self.lifecycle == Lifecycle::Closed {
            return;
        }
        self.restart.degraded_until = None;
        self.restart.exits.clear();
        self.restart.restart_at = None;
        self.wants_transport = true;
    }

    /// Fails every host call (not the lifecycle request) with `error`.
    pub(super) fn fail_all(&mut self, now: Instant, error: CallError) {
        let slots: SmallVec<[usize; 16]> = self
            .requests
            .iter()
            .filter(|(_, p)| p.owner == Owner::Host)
            .map(|(slot, _)| slot)
            .collect();
        for slot in slots {
            self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error.clone()));
        }
        self.send_queue.clear();
    }

    /// A breaker's state, for diagnostics.
    pub fn breaker_state(&self, tenant: u32, class: OperationClass) -> breaker::BreakerState {
        self.breakers.state(tenant, class)
    }

    /// Calls in flight (written or backing off) and waiting in the queue.
    pub fn load(&self) -> (usize, usize) {
        (self.requests.in_flight(), self.requests.queued())
    }

    /// Processes started after the first (stdio), for diagnostics.
    pub fn restarts(&self) -> u32 {
        self.restart.restarts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &str, key: Option<&str>) -> String {
        let mut out = Vec::new();
        write_arguments(&mut out, a, "idempotency_key", key);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn idempotency_keys_are_placed_in_the_arguments() {
        assert_eq!(args(r#"{"a":1}"#, None), r#"{"a":1}"#);
        assert_eq!(args(r#"{"a":1}"#, Some("k-1")), r#"{"idempotency_key":"k-1","a":1}"#);
        assert_eq!(args(" { } ", Some("k")), r#"{"idempotency_key":"k"}"#);
        assert_eq!(
            args(r#"{"idempotency_key":"mine"}"#, Some("k")),
            r#"{"idempotency_key":"mine"}"#
        );
    }
}
