//! Per-request timers (deadlines and retry backoffs) in a min-heap with lazy deletion.
//!
//! Deadlines live in the pending entries; the heap only says which entry to look at next.
//! Entries are never removed when a call ends early: a stale entry is recognised when it
//! reaches the top (its call is gone or its time changed) and dropped then. So `earliest` may
//! name a time earlier than any live timer, which costs one spurious `handle_timeout`, never a
//! missed one. The heap is rebuilt from the live entries when stale ones pile up, which keeps
//! it within a fixed multiple of the pending table: no growth, no allocation after start-up.
//!
//! The heap holds each timer packed in 16 bytes: its time (a [`Stamp`]: signed nanoseconds
//! from the engine's epoch), and slot, generation and kind in one word.
//! The heap is preallocated at three entries per pending slot (48 bytes; it was six entries of
//! 32 bytes, `cargo bench --bench timers`).

use super::requests::{Requests, SendState};
use crate::engine::stamp::Stamp;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Which of a request's times an entry stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TimerKind {
    /// The call's deadline.
    Deadline,
    /// The end of a retry backoff, or of a task-backed call's wait before its next poll.
    Backoff,
}

/// One scheduled time: the slot and the call generation it was set for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Timer {
    pub(crate) at: Stamp,
    pub(crate) slot: u32,
    pub(crate) call_gen: u32,
    pub(crate) kind: TimerKind,
}

/// A `Timer` as the heap keeps it. Ordered as `Timer` is: by time, then slot, generation, kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Packed {
    /// The time's nanoseconds from the engine's epoch.
    at: i64,
    /// `slot << 33 | call_gen << 1 | kind`: slots stay below 2^20 (`MAX_PENDING_LIMIT`).
    key: u64,
}

#[derive(Debug)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<Packed>>,
    /// Past this size the heap is mostly stale: rebuild it.
    limit: usize,
}

impl Timers {
    /// Room for every pending call's deadline and backoff, one and a half times over.
    ///
    /// A slot has at most two live timers, and `Engine::schedule` rebuilds the heap from them
    /// as soon as a push takes it past `limit`, so it never holds more than `limit + 1`; and at
    /// least `max_pending + 16` pushes separate two rebuilds, which keeps the rebuild's cost
    /// O(1) per push.
    pub(crate) fn with_capacity(max_pending: usize) -> Self {
        let limit = 3 * max_pending + 16;
        Self { heap: BinaryHeap::with_capacity(limit + 1), limit }
    }

    pub(crate) fn schedule(&mut self, timer: Timer) {
        let packed = self.pack(timer);
        self.heap.push(Reverse(packed));
    }

    /// The earliest scheduled time; possibly stale (then earlier than any live timer).
    pub(crate) fn earliest(&self) -> Option<Stamp> {
        self.heap.peek().map(|Reverse(p)| Stamp::from_nanos(p.at))
    }

    /// Takes the next timer due at `now`, live or stale; the caller checks which.
    pub(crate) fn pop_due(&mut self, now: Stamp) -> Option<Timer> {
        match self.heap.peek() {
            Some(Reverse(p)) if p.at <= now.nanos() => {
                self.heap.pop().map(|Reverse(p)| self.unpack(p))
            }
            _ => None,
        }
    }

    /// Drops stale entries from the top, so `earliest` is exact until the next change.
    pub(crate) fn skip_stale(&mut self, is_live: impl Fn(&Timer) -> bool) {
        while let Some(Reverse(p)) = self.heap.peek() {
            if is_live(&self.unpack(*p)) {
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
            self.schedule(t);
        }
    }

    fn pack(&self, t: Timer) -> Packed {
        let kind = match t.kind {
            TimerKind::Deadline => 0,
            TimerKind::Backoff => 1,
        };
        Packed {
            at: t.at.nanos(),
            key: (u64::from(t.slot) << 33) | (u64::from(t.call_gen) << 1) | kind,
        }
    }

    fn unpack(&self, p: Packed) -> Timer {
        Timer {
            at: Stamp::from_nanos(p.at),
            slot: (p.key >> 33) as u32,
            call_gen: (p.key >> 1) as u32,
            kind: if p.key & 1 == 0 { TimerKind::Deadline } else { TimerKind::Backoff },
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

impl Timers {
    /// Schedules a pending request's deadline or backoff end; rebuilds the heap from the live
    /// entries of `requests` when stale ones have piled up.
    #[inline]
    pub(super) fn schedule_request(
        &mut self,
        requests: &Requests,
        slot: usize,
        at: Stamp,
        kind: TimerKind,
    ) {
        let Some(p) = requests.get(slot) else { return };
        self.schedule(Timer { at, slot: slot as u32, call_gen: p.call_gen, kind });
        if self.needs_rebuild() {
            let live = requests.iter().flat_map(|(slot, p)| {
                let deadline = Timer {
                    at: p.deadline,
                    slot: slot as u32,
                    call_gen: p.call_gen,
                    kind: TimerKind::Deadline,
                };
                let backoff = match p.state {
                    SendState::Backoff(until) | SendState::TaskWait(until) => Some(Timer {
                        at: until,
                        slot: slot as u32,
                        call_gen: p.call_gen,
                        kind: TimerKind::Backoff,
                    }),
                    _ => None,
                };
                std::iter::once(deadline).chain(backoff)
            });
            self.rebuild(live);
        }
    }

    /// Drops timers of calls that ended from the top of the heap, so `poll_timeout` stays
    /// exact in the common case (O(log n) per ended call).
    pub(super) fn tidy(&mut self, requests: &Requests) {
        self.skip_stale(|t| timer_live(requests, t));
    }
}

/// Whether a timer still stands for its call: same call, same time, same state.
pub(super) fn timer_live(requests: &Requests, t: &Timer) -> bool {
    let Some(p) = requests.get(t.slot as usize) else { return false };
    p.call_gen == t.call_gen
        && match t.kind {
            TimerKind::Deadline => p.deadline == t.at,
            // A task's wait between polls rides on the backoff timer.
            TimerKind::Backoff => {
                p.state == SendState::Backoff(t.at) || p.state == SendState::TaskWait(t.at)
            }
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: i64 = 1_000_000_000;

    pub(super) fn t(at: Stamp, slot: u32) -> Timer {
        Timer { at, slot, call_gen: 1, kind: TimerKind::Deadline }
    }

    #[test]
    pub(super) fn earliest_first_and_stale_entries_skipped() {
        let s = Stamp::from_nanos;
        let mut timers = Timers::with_capacity(4);
        timers.schedule(t(s(3 * SEC), 0));
        timers.schedule(t(s(SEC), 1));
        timers.schedule(t(s(2 * SEC), 2));
        assert_eq!(timers.earliest(), Some(s(SEC)));
        // Slot 1 ended early: its entry is stale.
        timers.skip_stale(|t| t.slot != 1);
        assert_eq!(timers.earliest(), Some(s(2 * SEC)));
        assert_eq!(timers.pop_due(s(SEC)), None);
        assert_eq!(timers.pop_due(s(2 * SEC)).map(|t| t.slot), Some(2));
        timers.rebuild([t(s(0), 7)].into_iter());
        assert_eq!(timers.len(), 1);
        assert!(!timers.needs_rebuild());
    }

    #[test]
    fn packed_timers_are_16_bytes_and_come_back_exactly_in_timer_order() {
        assert_eq!(std::mem::size_of::<Packed>(), 16);
        let now = Stamp::from_nanos(0);
        let s = |n: i64| Stamp::from_nanos(n);
        let mut timers = Timers::with_capacity(8);
        let mut all = vec![
            t(s(5 * SEC), 3),
            Timer { at: now, slot: (1 << 20) - 1, call_gen: u32::MAX, kind: TimerKind::Backoff },
            Timer { at: now, slot: (1 << 20) - 1, call_gen: u32::MAX, kind: TimerKind::Deadline },
            // Earlier than the epoch and sub-microsecond apart.
            t(s(-1), 2),
            t(s(1), 0),
            t(s(86_400 * 365 * SEC), 1),
        ];
        for &timer in &all {
            timers.schedule(timer);
        }
        all.sort();
        let far = s(86_400 * 366 * SEC);
        let popped: Vec<Timer> = std::iter::from_fn(|| timers.pop_due(far)).collect();
        assert_eq!(popped, all);
    }
}
