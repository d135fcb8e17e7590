//! How calls end: the one path every terminal event takes (breaker, latency, record), and the
//! admission check that keeps room for every end.

use std::time::Instant;

use smallvec::SmallVec;

use super::record::CallRecord;
use super::requests::Pending;
use super::requests::{CallId, Ended, Lookup, Owner, SendState};
use super::stamp::Stamp;
use super::Engine;
use crate::error::CallError;
use crate::proto::jsonrpc::WireId;
use crate::proto::mcp::{Method, ResultType};

/// How a host call ended.
pub(super) enum Outcome<'a> {
    Done { json: &'a str, result_type: ResultType, is_error: bool },
    Listing { key: &'a str, items: &'a [u8], hints: super::listing::ListHints },
    Failed(CallError),
}

impl Engine {
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
        let now = self.epoch.stamp(now);
        self.requests.set_state(slot, SendState::Sent);
        let held = self.requests.bufs(slot).held().get();
        if let Some(p) = self.requests.get_mut(slot) {
            if p.attempt == 0 {
                let waited = now.since(p.created).saturating_sub(held);
                p.queue_wait = waited.into();
                if p.owner == Owner::Host {
                    self.stats.queue_wait += waited;
                }
            }
            // A task's polls are not attempts of the call (a resumed call's first is).
            if !p.task || p.attempt == 0 {
                p.attempt += 1;
            }
            p.sent_at = now;
            p.exchange_open = true;
        }
    }

    /// Over HTTP: request `id`, written at `sent_at`, goes on a connection only now (every
    /// `HttpOptions::max_connections` was busy). The wait moves from network time to queue
    /// time, in the call's record and in [`Stats`](super::Stats).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn handle_on_wire(&mut self, now: Instant, id: WireId) {
        let Lookup::Pending(slot) = self.requests.lookup(id) else { return };
        let now = self.epoch.stamp(now);
        let Some(p) = self.requests.get_mut(slot) else { return };
        if p.owner != Owner::Host || !p.exchange_open {
            return;
        }
        let waited = now.since(p.sent_at);
        if waited.is_zero() {
            return;
        }
        p.queue_wait = p.queue_wait.add(waited);
        p.sent_at = now;
        self.stats.queue_wait += waited;
    }

    /// Ends a host call: frees the slot, tells its breaker, and queues the terminal event.
    pub(super) fn finish(&mut self, now: Instant, slot: usize, how: Ended, outcome: Outcome<'_>) {
        let Some(call) = self.requests.call_id(slot) else { return };
        let at = self.epoch.stamp(now);
        self.requests.end_exchange(slot, at);
        let Some(p) = self.requests.remove(slot, how) else { return };
        self.server_requests.drop_call(call);
        if p.internal {
            // The tool-list refresh: its end releases the calls waiting for it.
            self.refresh = None;
            self.unpark(now, matches!(outcome, Outcome::Listing { .. }));
            self.timers.tidy(&self.requests);
            return;
        }
        let failure = match &outcome {
            Outcome::Failed(e) => Some(e),
            _ => None,
        };
        let named = matches!(p.method, Method::ToolsCall | Method::Extension);
        let tool = named.then(|| self.requests.bufs(slot).name());
        let record = self.record_of(at, call, slot, &p, tool, &outcome);
        self.stats.calls += 1;
        if let Some(e) = failure {
            self.stats.failures.count(e);
        }
        let change =
            if p.attempt > 0 { self.breakers.record(p.tenant, p.op, failure, now) } else { None };
        if failure.is_none() && p.attempt > 0 {
            // A moving average of one attempt's duration, for judging whether a retry fits.
            self.latency = self.latency.average_in(at.since(p.sent_at));
        }
        match outcome {
            Outcome::Done { json, result_type, is_error } => {
                self.events.done(call, json, result_type, is_error, &record)
            }
            Outcome::Listing { key, items, hints } => {
                self.events.done_listing(call, key, items, hints, &record)
            }
            Outcome::Failed(e) => self.events.failed(call, e, &record),
        }
        // The call's own end first, then what it did to its breaker.
        if let Some(c) = change {
            self.events.breaker(c.tenant, c.class, c.state);
        }
        self.timers.tidy(&self.requests);
    }

    /// The record of a host call that ends now (all but what only the host knows).
    fn record_of<'t>(
        &self,
        now: Stamp,
        call: CallId,
        slot: usize,
        p: &Pending,
        tool: Option<&'t str>,
        outcome: &Outcome<'_>,
    ) -> CallRecord<'t> {
        let mut r = CallRecord::new(p.method, self.transport);
        r.call = Some(call);
        let bufs = self.requests.bufs(slot);
        (r.trace_id, r.run_id) = bufs.tags();
        r.version = self.lifecycle.version();
        r.request_id = (p.attempt > 0).then(|| WireId::new(slot, p.wire_gen));
        r.tool = tool;
        r.attempts = p.attempt;
        r.queue_wait = p.queue_wait.get();
        // A call that ends while held (refused, cancelled, past its deadline) waited all along.
        r.authorization_wait =
            if p.state == SendState::Held { now.since(p.created) } else { bufs.held().get() };
        r.network = p.network.get();
        r.elapsed = now.since(p.created);
        r.rounds = p.rounds;
        match outcome {
            Outcome::Done { is_error, .. } => r.tool_error = *is_error,
            Outcome::Listing { .. } => {}
            Outcome::Failed(e) => r.failed(e),
        }
        r
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

    /// Ends a host call locally; tells the server if the request was written.
    pub(super) fn abandon(&mut self, now: Instant, slot: usize, error: CallError) {
        let Some(p) = self.requests.get(slot) else { return };
        if p.task {
            // The third way to cancel: the task goes on without a request in flight.
            self.cancel_task(slot);
        } else if p.state == SendState::Sent {
            self.signal_cancel(WireId::new(slot, p.wire_gen));
        }
        self.finish(now, slot, Ended::Abandoned, Outcome::Failed(error));
    }
}
