//! Per-request timers (deadlines and retry backoffs) in a min-heap with lazy deletion.
//!
//! Deadlines live in the pending entries; the heap only says which entry to look at next.
//! Entries are never removed when a call ends early: a stale entry is recognised when it
//! reaches the top (its call is gone or its time changed) and dropped then. So `earliest` may
//! name a time earlier than any live timer, which costs one spurious `handle_timeout`, never a
//! missed one. The heap is rebuilt from the live entries when stale ones pile up, which keeps
//! it within a fixed multiple of the pending table: no growth, no allocation after start-up.

use super::{Engine, Owner, Requests, SendState};
use crate::error::{CallError, LocalError};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Which of a request's times an entry stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TimerKind {
    /// The call's deadline.
    Deadline,
    /// The end of a retry backoff.
    Backoff,
}

/// One scheduled time: the slot and the call generation it was set for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Timer {
    pub(crate) at: Instant,
    pub(crate) slot: u32,
    pub(crate) call_gen: u32,
    pub(crate) kind: TimerKind,
}

#[derive(Debug)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<Timer>>,
    /// Past this size the heap is mostly stale: rebuild it.
    limit: usize,
}

impl Timers {
    /// Room for every pending call's deadline and backoff, four times over.
    pub(crate) fn with_capacity(max_pending: usize) -> Self {
        let limit = 4 * max_pending + 16;
        Self { heap: BinaryHeap::with_capacity(limit + 2 * max_pending + 16), limit }
    }

    pub(crate) fn schedule(&mut self, timer: Timer) {
        self.heap.push(Reverse(timer));
    }

    /// The earliest scheduled time; possibly stale (then earlier than any live timer).
    pub(crate) fn earliest(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(t)| t.at)
    }

    /// Takes the next timer due at `now`, live or stale; the caller checks which.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Timer> {
        match self.heap.peek() {
            Some(Reverse(t)) if t.at <= now => self.heap.pop().map(|Reverse(t)| t),
            _ => None,
        }
    }

    /// Drops stale entries from the top, so `earliest` is exact until the next change.
    pub(crate) fn skip_stale(&mut self, is_live: impl Fn(&Timer) -> bool) {
        while let Some(Reverse(t)) = self.heap.peek() {
            if is_live(t) {
                return;
            }
            self.heap.pop();
        }
    }

    /// `true` when stale entries have piled up enough that a rebuild pays.
    pub(crate) fn needs_rebuild(&self) -> bool {
        self.heap.len() > self.limit
    }

    /// Replaces the heap with exactly the live timers.
    pub(crate) fn rebuild(&mut self, live: impl Iterator<Item = Timer>) {
        self.heap.clear();
        for t in live {
            self.heap.push(Reverse(t));
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

impl Engine {
    pub(super) fn deadline_passed(&mut self, now: Instant, slot: usize) {
        let Some(owner) = self.requests.get(slot).map(|p| p.owner) else { return };
        match owner {
            Owner::Host => self.abandon(now, slot, CallError::Local(LocalError::DeadlineExceeded)),
            Owner::Probe => {
                log::debug!("era probe timed out; falling back to initialize");
                self.drop_lifecycle_request();
                self.start_handshake(now);
            }
            Owner::Handshake => self.lifecycle_failed(now, LocalError::DeadlineExceeded),
        }
    }

    pub(super) fn timer_is_live(&self, t: &Timer) -> bool {
        timer_live(&self.requests, t)
    }

    /// Drops timers of calls that ended from the top of the heap, so `poll_timeout` stays
    /// exact in the common case (O(log n) per ended call).
    pub(super) fn tidy_timers(&mut self) {
        let requests = &self.requests;
        self.timers.skip_stale(|t| timer_live(requests, t));
    }

    /// Schedules a pending request's deadline or backoff end.
    pub(super) fn schedule(&mut self, slot: usize, at: Instant, kind: TimerKind) {
        let Some(p) = self.requests.get(slot) else { return };
        self.timers.schedule(Timer { at, slot: slot as u32, call_gen: p.call_gen, kind });
        if self.timers.needs_rebuild() {
            let live = self.requests.iter().flat_map(|(slot, p)| {
                let deadline = Timer {
                    at: p.deadline,
                    slot: slot as u32,
                    call_gen: p.call_gen,
                    kind: TimerKind::Deadline,
                };
                let backoff = match p.state {
                    SendState::Backoff(until) => Some(Timer {
                        at: until,
                        slot: slot as u32,
                        call_gen: p.call_gen,
                        kind: TimerKind::Backoff,
                    }),
                    _ => None,
                };
                std::iter::once(deadline).chain(backoff)
            });
            self.timers.rebuild(live);
        }
    }
}

/// Whether a timer still stands for its call: same call, same time, same state.
pub(super) fn timer_live(requests: &Requests, t: &Timer) -> bool {
    let Some(p) = requests.get(t.slot as usize) else { return false };
    p.call_gen == t.call_gen
        && match t.kind {
            TimerKind::Deadline => p.deadline == t.at,
            TimerKind::Backoff => p.state == SendState::Backoff(t.at),
        }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    pub(super) fn t(at: Instant, slot: u32) -> Timer {
        Timer { at, slot, call_gen: 1, kind: TimerKind::Deadline }
    }

    #[test]
    pub(super) fn earliest_first_and_stale_entries_skipped() {
        let now = Instant::now();
        let mut timers = Timers::with_capacity(4);
        timers.schedule(t(now + Duration::from_secs(3), 0));
        timers.schedule(t(now + Duration::from_secs(1), 1));
        timers.schedule(t(now + Duration::from_secs(2), 2));
        assert_eq!(timers.earliest(), Some(now + Duration::from_secs(1)));
        // Slot 1 ended early: its entry is stale.
        timers.skip_stale(|t| t.slot != 1);
        assert_eq!(timers.earliest(), Some(now + Duration::from_secs(2)));
        assert_eq!(timers.pop_due(now + Duration::from_secs(1)), None);
        assert_eq!(timers.pop_due(now + Duration::from_secs(2)).map(|t| t.slot), Some(2));
        timers.rebuild([t(now, 7)].into_iter());
        assert_eq!(timers.len(), 1);
        assert!(!timers.needs_rebuild());
    }
}
