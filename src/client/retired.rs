//! Removed servers whose events the host has not taken yet: the ends of the calls their close
//! failed, and `Closed`, still reach `poll_event` (under the removed handle) and their records
//! the sink.
//!
//! Only each one's event queue is kept, the rest of its engine dropped, so a removed server
//! costs what its events hold. They are bounded by bytes: a host that removes servers and
//! never takes their events does not keep them all. Past the bound, what goes first is what a
//! host needs least: a removed server whose events hold no call's end. The ends of its calls
//! go only when every server kept holds some (with a warning), since a call's one end is what
//! a host waits for; a bound on the number of servers dropped those of a host that removed a
//! server with more than 64 busy lanes at once.

use std::collections::VecDeque;

use super::records::Naming;
use super::ServerId;
use crate::engine::EventQueue;

/// What removed servers' undrained events may hold, in bytes (with each one's bookkeeping):
/// room for the calls of thousands of lanes, and about twice what one engine may keep of
/// events that can be dropped.
const MAX_BYTES: usize = 64 * 1024 * 1024;

/// One removed server's undrained events.
#[derive(Debug)]
pub(crate) struct Retired {
    pub(crate) id: ServerId,
    /// Its names for the records (its slot may be another server's by now).
    pub(crate) name: Naming,
    pub(crate) events: EventQueue,
    /// The bytes it was counted for when kept.
    weight: usize,
}

/// The removed servers whose events wait, oldest first. Only the first is ever drained
/// ([`next`](Self::next)), so every other one holds events.
#[derive(Debug)]
pub(crate) struct RetiredServers {
    list: VecDeque<Retired>,
    /// The weights of those in `list`.
    bytes: usize,
    max_bytes: usize,
}

impl Default for RetiredServers {
    fn default() -> Self {
        Self::with_bound(MAX_BYTES)
    }
}

impl RetiredServers {
    /// Kept events bounded by `max_bytes` (tests use small ones).
    pub(crate) fn with_bound(max_bytes: usize) -> Self {
        Self { list: VecDeque::new(), bytes: 0, max_bytes }
    }

    /// Keeps the events a removed server left, if it left any (see the module's docs for the
    /// bound).
    pub(crate) fn keep(&mut self, id: ServerId, name: Naming, events: EventQueue) {
        if events.len() == 0 {
            return;
        }
        let events = events.retire();
        let weight = std::mem::size_of::<Retired>() + name.heap_bytes() + events.heap_bytes();
        if self.bytes + weight > self.max_bytes && !self.make_room(weight, events.terminals()) {
            log::debug!("a removed server's events dropped: no call's end among them");
            return;
        }
        self.bytes += weight;
        self.list.push_back(Retired { id, name, events, weight });
    }

    /// Frees room for `weight` more bytes whose events hold `ends` calls' ends; `false` when
    /// they are the ones to drop: they hold none, and dropping every server kept that holds
    /// none would not make room (nothing is dropped then). A server holding calls' ends whose
    /// events alone pass the bound is kept all the same: its engine bounded them.
    #[cold]
    fn make_room(&mut self, weight: usize, ends: usize) -> bool {
        let no_ends = |r: &Retired| r.events.terminals() == 0;
        if ends == 0 {
            let spare: usize = self.list.iter().filter(|r| no_ends(r)).map(|r| r.weight).sum();
            if self.bytes - spare + weight > self.max_bytes {
                return false;
            }
        }
        while self.bytes + weight > self.max_bytes {
            let dropped = match self.list.iter().position(no_ends) {
                Some(at) => self.list.remove(at),
                None => self.list.pop_front(),
            };
            let Some(dropped) = dropped else { break };
            self.bytes -= dropped.weight;
            let lost = dropped.events.terminals();
            if lost > 0 {
                log::warn!(
                    "{lost} ends of calls of a removed server dropped: removed servers' events \
                     wait undrained past {} MiB",
                    self.max_bytes >> 20
                );
            }
        }
        true
    }

    /// The removed server whose events come next, dropping those already drained.
    pub(crate) fn next(&mut self) -> Option<&mut Retired> {
        while self.list.front().is_some_and(|r| r.events.len() == 0) {
            if let Some(drained) = self.list.pop_front() {
                self.bytes -= drained.weight;
            }
        }
        self.list.front_mut()
    }

    /// Whether a removed server's events wait: one look, since only the first is drained.
    pub(crate) fn has_events(&self) -> bool {
        self.list.len() > 1 || self.list.front().is_some_and(|r| r.events.len() > 0)
    }

    /// The bytes counted for the events kept (for tests of the bound).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}
