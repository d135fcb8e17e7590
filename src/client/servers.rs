//! The core's servers, and which of them a round has to look at.
//!
//! A round used to walk every server a host keeps (each engine's timers, each driver's upkeep
//! and deadline), so every idle server cost every call. Here a server is looked at when
//! something happened to it or its deadline came: every mutable access marks it (the borrow
//! checker sees to it that nothing changes a server without one). The servers a round looked
//! at have their next deadline filed in one heap at the next round, unless something marked
//! them again meanwhile (a busy server's reply or next call): until then the host's next
//! deadline works theirs out with the marked ones', so a busy server's is worked out once a
//! call and never filed only to be replaced.
//!
//! The same accesses say where events can be: an engine queues one only under a mutable
//! access, so every such access also puts the server on a list of those that may hold events,
//! which each round's end prunes. The turn-taking of `poll_event` looks at that list alone.
//!
//! And where the core's own passes have work ([`Pass`]): the capability cache's pump, and the
//! era verdicts' keeping with the answer handlers' offer after input. Each takes the servers
//! changed since it last ran, not every server a host keeps.
//!
//! A server is filed with what the round left it as ([`Settled`]): its deadline, and whether
//! it has work that waits for none (a call pending, output, an event). Marking it takes that
//! back at once, so the filed state is always current, and "is anything to do?" counts the
//! busy filed servers and asks the marked ones, again not a walk over every server.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use slab::Slab;

use super::ServerCore;

/// Every server of a core, by index, and the bookkeeping of the rounds.
#[derive(Debug, Default)]
pub(crate) struct Servers {
    slab: Slab<ServerCore>,
    /// Which servers a round has to look at, and which may hold events.
    marks: Marks,
    /// What the rounds left the servers nothing marked since as (see
    /// [`take_round`](Self::take_round)).
    filing: Filing,
}

/// The filed servers: what a round left each as, and their deadlines in one heap.
#[derive(Debug, Default)]
struct Filing {
    /// Every filed server's next deadline, earliest first, with a stamp. An entry whose stamp
    /// is no longer its server's is stale: it is dropped when it comes to the top, so the top
    /// is always a live one.
    deadlines: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    /// By index: what the last round to file the server left it as.
    filed: Vec<Filed>,
    /// How many filed servers are busy ([`Settled::busy`]): with none, and no deadline of
    /// theirs come, the core's idleness is a question about the unfiled servers alone.
    busy: usize,
    next_stamp: u64,
}

/// What a round left a server as, worked out when its deadline is filed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settled {
    /// The server's next deadline; `None`: nothing is due until something happens to it.
    pub(crate) deadline: Option<Instant>,
    /// Whether it has work that waits for no deadline: a call pending, output, an event.
    pub(crate) busy: bool,
}

/// A server's filed state: the stamp of its current deadline entry, and what it was settled
/// as. Stamp 0: not filed.
#[derive(Debug, Clone, Copy, Default)]
struct Filed {
    stamp: u64,
    deadline: Option<Instant>,
    busy: bool,
}

impl Servers {
    /// Marks a server. One newly marked for the next round is no longer filed: whatever
    /// reached it may change its deadline and its work, so neither `poll_timeout` nor
    /// `is_idle` goes by what it was filed as (they ask it, as a marked server).
    #[inline]
    fn mark(marks: &mut Marks, filing: &mut Filing, index: usize, bits: u8) {
        if marks.mark(index, bits) & TOUCHED != 0 {
            filing.unfile(index);
        }
    }

    pub(crate) fn get(&self, index: usize) -> Option<&ServerCore> {
        self.slab.get(index)
    }

    /// The server, marked for the next round and for every pass.
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut ServerCore> {
        let server = self.slab.get_mut(index)?;
        Self::mark(&mut self.marks, &mut self.filing, index, CHANGED);
        Some(server)
    }

    /// The server, not marked for the next round: for the round itself, which files its
    /// deadline afterwards. It may queue events all the same, and what the round does is the
    /// passes' to look at.
    pub(crate) fn get_mut_in_round(&mut self, index: usize) -> Option<&mut ServerCore> {
        let server = self.slab.get_mut(index)?;
        self.marks.mark(index, CHANGED & !TOUCHED);
        Some(server)
    }

    /// The server, marked for the next round and as maybe holding events, but not for the
    /// passes: for an access that leaves them no work. A pass that took the server
    /// ([`take_pass`](Self::take_pass)) and changes it would otherwise take it again at once
    /// although nothing else happened to it (a pass that leaves work for its next run marks
    /// the server again, [`mark_for`](Self::mark_for)); taking an event changes nothing a
    /// pass looks at.
    pub(crate) fn get_mut_without_passes(&mut self, index: usize) -> Option<&mut ServerCore> {
        let server = self.slab.get_mut(index)?;
        Self::mark(&mut self.marks, &mut self.filing, index, TOUCHED | EVENTFUL);
        Some(server)
    }

    /// The server, not marked at all: for a pass that took it and may find nothing to do.
    /// Marking it for the round on every look would bring it back to every pass through the
    /// round's own marks, so the pass marks it ([`mark_changed`](Self::mark_changed)) when it
    /// changed its engine or its deadlines, and only then.
    pub(crate) fn get_mut_unmarked(&mut self, index: usize) -> Option<&mut ServerCore> {
        self.slab.get_mut(index)
    }

    /// Marks a server a pass changed ([`get_mut_unmarked`](Self::get_mut_unmarked)) for the
    /// next round, and as maybe holding events.
    pub(crate) fn mark_changed(&mut self, index: usize) {
        if self.slab.contains(index) {
            Self::mark(&mut self.marks, &mut self.filing, index, TOUCHED | EVENTFUL);
        }
    }

    /// Every server: for the checks that compare the rounds' bookkeeping with a walk.
    #[cfg(any(fuzzing, test))]
    pub(crate) fn iter(&self) -> slab::Iter<'_, ServerCore> {
        self.slab.iter()
    }

    pub(crate) fn insert(&mut self, server: ServerCore) -> usize {
        let index = self.slab.insert(server);
        Self::mark(&mut self.marks, &mut self.filing, index, CHANGED);
        index
    }

    pub(crate) fn remove(&mut self, index: usize) -> ServerCore {
        // Its deadline entry goes stale; a later server in the slot files its own.
        self.filing.unfile(index);
        // Nor is it left unfiled, nor left for a pass (a removal is rare: the walks are cheap
        // enough).
        let bits = self.marks.bits.get(index).copied().unwrap_or(0);
        let [catalogs, after_input] = &mut self.marks.passes;
        for (bit, list) in
            [(UNFILED, &mut self.marks.unfiled), (CATALOGS, catalogs), (AFTER_INPUT, after_input)]
        {
            if bits & bit != 0 {
                list.retain(|&i| i != index);
            }
        }
        if let Some(b) = self.marks.bits.get_mut(index) {
            *b &= !(UNFILED | CATALOGS | AFTER_INPUT);
        }
        self.slab.remove(index)
    }

    pub(crate) fn vacant_key(&self) -> usize {
        self.slab.vacant_key()
    }

    pub(crate) fn len(&self) -> usize {
        self.slab.len()
    }

    /// Marks a server for the next round (a change to what the shell keeps beside it).
    pub(crate) fn touch(&mut self, index: usize) {
        Self::mark(&mut self.marks, &mut self.filing, index, TOUCHED);
    }

    /// The servers `pass` has to look at, into `work` (cleared first), in index order: those
    /// changed since the pass last took them, and those it was asked to come back to. They
    /// are no longer marked for it.
    pub(crate) fn take_pass(&mut self, pass: Pass, work: &mut Vec<usize>) {
        work.clear();
        // A removed server was taken off the list (`remove`).
        self.marks.take(pass, work);
        if work.len() > 1 {
            work.sort_unstable();
        }
    }

    /// Whether `pass` has a server to look at.
    pub(crate) fn has_pass_work(&self, pass: Pass) -> bool {
        !self.marks.passes[pass as usize].is_empty()
    }

    /// Marks a server for `pass` (work the pass left for its next run).
    pub(crate) fn mark_for(&mut self, index: usize, pass: Pass) {
        if self.slab.contains(index) {
            self.marks.mark(index, pass.bit());
        }
    }

    /// Marks every server for `pass`: a part of it installed late (a store, an answer
    /// handler) looks at every server once, as it would have from the start.
    pub(crate) fn mark_all_for(&mut self, pass: Pass) {
        for (index, _) in self.slab.iter() {
            self.marks.mark(index, pass.bit());
        }
    }

    /// The earliest deadline filed.
    pub(crate) fn earliest(&self) -> Option<Instant> {
        self.filing.earliest()
    }

    /// The servers a round at `now` looks at, into `work` (cleared first): those marked since
    /// the last round, and those whose deadline has come. Each once, in index order.
    ///
    /// First, the servers the last round looked at and nothing marked since get their next
    /// deadline filed (`deadline` works one out), as that round left it: nothing changed it
    /// since. A server still busy is marked again before the next round (the call's reply, the
    /// next call), so its deadline is not filed after every round only to be replaced: while
    /// it is unfiled, `poll_timeout` works it out with the marked ones'.
    pub(crate) fn take_round(
        &mut self,
        now: Instant,
        work: &mut Vec<usize>,
        mut settle: impl FnMut(usize, &ServerCore) -> Settled,
    ) {
        work.clear();
        let mut unfiled = std::mem::take(&mut self.marks.unfiled);
        for &index in &unfiled {
            let touched = self.marks.unmark(index, UNFILED) & TOUCHED != 0;
            if let (false, Some(s)) = (touched, self.slab.get(index)) {
                let settled = settle(index, s);
                self.filing.file(index, settled, now, self.slab.len());
            }
        }
        unfiled.clear();
        self.marks.unfiled = unfiled;
        // A marked server's filed deadline went when it was marked (`mark`): it is worked
        // out anew once the round is done with it.
        self.marks.take_touched(work);
        self.filing.take_due(now, work);
        if work.len() > 1 {
            work.sort_unstable();
            work.dedup();
        }
    }

    /// At a round's end, the servers it looked at: their deadlines are filed at the next
    /// round, unless something marks them first.
    pub(crate) fn leave_unfiled(&mut self, round: &[usize]) {
        for &index in round {
            let bits = self.marks.bits.get_mut(index);
            if let (true, Some(bits)) = (self.slab.contains(index), bits) {
                if *bits & UNFILED == 0 {
                    *bits |= UNFILED;
                    self.marks.unfiled.push(index);
                }
            }
        }
    }

    /// The servers whose deadline is not filed: those the last round left unfiled and those
    /// marked since (each once). The earliest deadline of a host is the earliest filed one
    /// and theirs.
    pub(crate) fn unfiled(&self) -> impl Iterator<Item = usize> + '_ {
        let marks = &self.marks;
        let touched_only = marks.touched.iter().filter(|&&i| marks.bits[i] & UNFILED == 0);
        marks.unfiled.iter().chain(touched_only).copied()
    }

    /// Files what a round left the server at `index` as (for tests: a round files them).
    #[cfg(test)]
    fn file(&mut self, index: usize, settled: Settled, now: Instant) {
        self.filing.file(index, settled, now, self.slab.len());
    }

    /// `true` when no server has work at `now`: no filed server is busy or due, and `is_idle`
    /// says so of each server not filed (the last round looked at it, or it was marked
    /// since). Not a walk over every server: a filed server cannot have changed since it was
    /// filed, as any change marks it.
    pub(crate) fn is_idle(
        &self,
        now: Instant,
        mut is_idle: impl FnMut(usize, &ServerCore) -> bool,
    ) -> bool {
        let filed_idle = self.filing.busy == 0 && self.earliest().is_none_or(|at| at > now);
        filed_idle && self.unfiled().all(|i| self.slab.get(i).is_none_or(|s| is_idle(i, s)))
    }
}

impl Filing {
    /// The earliest deadline filed.
    fn earliest(&self) -> Option<Instant> {
        self.deadlines.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Moves the servers whose deadline has come at `now` into `work`, no longer filed (the
    /// round that takes them files them again).
    fn take_due(&mut self, now: Instant, work: &mut Vec<usize>) {
        while let Some(Reverse((at, index, stamp))) = self.deadlines.peek().copied() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            if self.filed.get(index).is_some_and(|f| f.stamp == stamp) {
                self.unfile(index);
                work.push(index);
            }
        }
    }

    /// Pops stale entries off the top, so that [`earliest`](Self::earliest) is exact.
    fn drop_stale_top(&mut self) {
        while let Some(Reverse((_, index, stamp))) = self.deadlines.peek() {
            if self.filed.get(*index).is_some_and(|f| f.stamp == *stamp) {
                return;
            }
            self.deadlines.pop();
        }
    }

    /// Files what a round left the server at `index` as: its next deadline (none: nothing is
    /// due until something happens to it) replaces the one filed before. `live`: how many
    /// servers there are, which bounds the stale entries kept.
    fn file(&mut self, index: usize, settled: Settled, now: Instant, live: usize) {
        if self.filed.len() <= index {
            self.filed.resize(index + 1, Filed::default());
        }
        let filed = &mut self.filed[index];
        let was_busy = filed.stamp != 0 && filed.busy;
        self.busy = self.busy + usize::from(settled.busy) - usize::from(was_busy);
        filed.busy = settled.busy;
        let at = settled.deadline;
        // Filed with the same deadline, still to come (its entry is in the heap) or none:
        // nothing more to do.
        if filed.stamp != 0 && filed.deadline == at && at.is_none_or(|at| at > now) {
            return;
        }
        self.next_stamp += 1;
        (filed.stamp, filed.deadline) = (self.next_stamp, at);
        if let Some(at) = at {
            self.deadlines.push(Reverse((at, index, self.next_stamp)));
        }
        self.drop_stale_top();
        // Stale entries are dropped when they come up; past twice the live ones (a busy
        // server files one a round), the heap is rebuilt from the live ones instead.
        if self.deadlines.len() > 2 * live + 64 {
            let filed = &self.filed;
            self.deadlines
                .retain(|Reverse((_, i, s))| filed.get(*i).is_some_and(|f| f.stamp == *s));
        }
    }

    /// Takes a server's filed state back (it is marked, due or removed): its deadline entry
    /// goes stale, and it no longer counts as busy until it is filed again.
    fn unfile(&mut self, index: usize) {
        let Some(filed) = self.filed.get_mut(index) else { return };
        if filed.stamp != 0 {
            self.busy -= usize::from(filed.busy);
            *filed = Filed::default();
            self.drop_stale_top();
        }
    }
}

impl Servers {
    /// At a round's end: forgets the servers that may have held events and hold none now
    /// (their events were taken), so that `poll_event` no longer looks at them.
    pub(crate) fn forget_eventless(&mut self) {
        let Self { slab, marks, .. } = self;
        marks
            .retain_eventful(|index| slab.get(index).is_some_and(|s| s.engine.queued_events() > 0));
    }

    /// The first server at or after `cursor`, going round, with an event queued: servers take
    /// turns, so a chatty one cannot starve the rest. Only the servers that may hold events
    /// are looked at, not every server a host keeps.
    pub(crate) fn next_with_events(&self, cursor: usize) -> Option<usize> {
        // Ordered by (before the cursor, index): the first at or after the cursor, else the
        // first of all.
        let mut best: Option<(bool, usize)> = None;
        for &index in &self.marks.eventful {
            if self.slab.get(index).is_some_and(|s| s.engine.queued_events() > 0) {
                let key = (index < cursor, index);
                if best.is_none_or(|b| key < b) {
                    best = Some(key);
                }
            }
        }
        best.map(|(_, index)| index)
    }
}

/// `Marks` bit: on the list of servers the next round looks at.
const TOUCHED: u8 = 1;
/// `Marks` bit: on the list of servers that may hold events.
const EVENTFUL: u8 = 2;
/// `Marks` bit: on the list of servers the last round looked at, whose deadline is not filed.
const UNFILED: u8 = 4;
/// `Marks` bit: on the list of servers the capability cache's pump looks at ([`Pass::Catalogs`]).
const CATALOGS: u8 = 8;
/// `Marks` bit: on the list of servers the pass after input looks at ([`Pass::AfterInput`]).
const AFTER_INPUT: u8 = 16;
/// What a mutable access marks: the next round, events, and every pass.
const CHANGED: u8 = TOUCHED | EVENTFUL | CATALOGS | AFTER_INPUT;

/// A pass of the core over the servers that something happened to since it last ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// The capability cache's share of a tick: page answers taken, next pages, re-listens.
    Catalogs,
    /// What follows input: the era verdicts kept in the store, the answer handlers asked.
    AfterInput,
}

impl Pass {
    fn bit(self) -> u8 {
        match self {
            Pass::Catalogs => CATALOGS,
            Pass::AfterInput => AFTER_INPUT,
        }
    }
}

/// Five lists of servers, each server on each at most once, and a byte of bits per server
/// saying which lists it is on: one load tells a mark that changes nothing (most of them: a
/// call reaches its server mutably about ten times).
#[derive(Debug, Default)]
struct Marks {
    bits: Vec<u8>,
    /// Servers reached mutably since a round last took them.
    touched: Vec<usize>,
    /// Servers that may hold queued events: every server reached mutably since the last
    /// round's end, and those that round's end found holding some.
    eventful: Vec<usize>,
    /// Servers the last round looked at, their deadline not filed yet.
    unfiled: Vec<usize>,
    /// By [`Pass`]: the servers changed since the pass last took them. A pass's list is never
    /// taken while the pass is unused (no cache, no store or handler): each server stays on
    /// it once, and the pass's first run looks at them all.
    passes: [Vec<usize>; 2],
}

impl Marks {
    /// Puts a server on the lists of `bits`; the bits it was not marked with before.
    #[inline]
    fn mark(&mut self, index: usize, bits: u8) -> u8 {
        if self.bits.get(index).is_some_and(|&b| b & bits == bits) {
            return 0;
        }
        self.add(index, bits)
    }

    #[cold]
    fn add(&mut self, index: usize, bits: u8) -> u8 {
        if self.bits.len() <= index {
            self.bits.resize(index + 1, 0);
        }
        let new = bits & !self.bits[index];
        self.bits[index] |= bits;
        if new & TOUCHED != 0 {
            self.touched.push(index);
        }
        if new & EVENTFUL != 0 {
            self.eventful.push(index);
        }
        if new & CATALOGS != 0 {
            self.passes[Pass::Catalogs as usize].push(index);
        }
        if new & AFTER_INPUT != 0 {
            self.passes[Pass::AfterInput as usize].push(index);
        }
        new
    }

    /// Moves the servers on a pass's list to `work`, unmarked.
    fn take(&mut self, pass: Pass, work: &mut Vec<usize>) {
        for index in self.passes[pass as usize].drain(..) {
            self.bits[index] &= !pass.bit();
            work.push(index);
        }
    }

    /// Clears `bit` of a server (the caller takes it off that list); its bits before.
    fn unmark(&mut self, index: usize, bit: u8) -> u8 {
        let bits = self.bits[index];
        self.bits[index] = bits & !bit;
        bits
    }

    /// Moves the touched servers to `work`, unmarked.
    fn take_touched(&mut self, work: &mut Vec<usize>) {
        for index in self.touched.drain(..) {
            self.bits[index] &= !TOUCHED;
            work.push(index);
        }
    }

    /// Keeps on the eventful list the servers `keep` says, and unmarks the others.
    fn retain_eventful(&mut self, mut keep: impl FnMut(usize) -> bool) {
        let bits = &mut self.bits;
        self.eventful.retain(|&index| {
            let kept = keep(index);
            if !kept {
                bits[index] &= !EVENTFUL;
            }
            kept
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::catalog::ServerCatalog;
    use crate::config::Config;
    use crate::engine::Engine;

    fn server(now: Instant) -> ServerCore {
        let engine = Engine::new(Config::default(), now).unwrap();
        ServerCore { generation: 1, engine, catalog: ServerCatalog::new("s".into(), false, None) }
    }

    /// A server settled as not busy, with this deadline.
    fn settled_idle(deadline: Option<Instant>) -> Settled {
        Settled { deadline, busy: false }
    }

    fn two_servers(now: Instant) -> (Servers, usize, usize) {
        let mut servers = Servers::default();
        let (a, b) = (servers.insert(server(now)), servers.insert(server(now)));
        (servers, a, b)
    }

    /// A round whose servers' deadlines are filed by the test itself (none left unfiled).
    fn round(servers: &mut Servers, now: Instant) -> Vec<usize> {
        let mut work = vec![99];
        servers.take_round(now, &mut work, |_, _| unreachable!("nothing was left unfiled"));
        work
    }

    /// A round looks at the servers reached mutably since the last one and at those whose
    /// deadline has come, each once: an idle server costs nothing.
    #[test]
    fn a_round_looks_only_at_touched_and_due_servers() {
        let now = Instant::now();
        let mut servers = Servers::default();
        let ids: Vec<usize> = (0..5).map(|_| servers.insert(server(now))).collect();
        assert_eq!(round(&mut servers, now), ids, "new servers are looked at once");
        for &i in &ids {
            servers.file(i, settled_idle(None), now);
        }
        assert_eq!(round(&mut servers, now), [0; 0], "nothing happened: nothing to look at");
        let _ = servers.get(3);
        let _ = servers.iter().count();
        assert_eq!(round(&mut servers, now), [0; 0], "reading marks nothing");
        servers.get_mut(3);
        servers.get_mut(1);
        servers.get_mut(3);
        assert_eq!(round(&mut servers, now), [1, 3], "each once, in order");
        servers.file(2, settled_idle(Some(now + Duration::from_secs(5))), now);
        servers.file(4, settled_idle(Some(now + Duration::from_secs(9))), now);
        assert_eq!(servers.earliest(), Some(now + Duration::from_secs(5)));
        assert_eq!(round(&mut servers, now + Duration::from_secs(4)), [0; 0], "not yet");
        assert_eq!(round(&mut servers, now + Duration::from_secs(5)), [2]);
        assert_eq!(round(&mut servers, now + Duration::from_secs(5)), [0; 0], "taken once");
    }

    /// A deadline filed again replaces the one before: the old entry is dropped when it comes
    /// up, and a removed server's too.
    #[test]
    fn a_refiled_or_removed_servers_old_deadline_is_stale() {
        let now = Instant::now();
        let secs = |n| now + Duration::from_secs(n);
        let (mut servers, a, b) = two_servers(now);
        round(&mut servers, now);
        servers.file(a, settled_idle(Some(secs(1))), now);
        servers.file(a, settled_idle(Some(secs(3))), now);
        servers.file(b, settled_idle(Some(secs(2))), now);
        assert_eq!(servers.earliest(), Some(secs(2)), "the replaced deadline is not the next");
        assert_eq!(round(&mut servers, secs(1)), [0; 0]);
        servers.remove(b);
        assert_eq!(servers.earliest(), Some(secs(3)), "nor is a removed server's");
        assert_eq!(round(&mut servers, secs(2)), [0; 0]);
        assert_eq!(round(&mut servers, secs(3)), [a]);
        // The same deadline filed again while it is still to come adds no entry; once it has
        // come (a round took its entry), it is filed anew.
        servers.file(a, settled_idle(Some(secs(9))), secs(3));
        servers.file(a, settled_idle(Some(secs(9))), secs(3));
        assert_eq!(servers.filing.deadlines.len(), 1);
        assert_eq!(round(&mut servers, secs(9)), [a]);
        servers.file(a, settled_idle(Some(secs(9))), secs(9));
        assert_eq!(round(&mut servers, secs(9)), [a], "still due: looked at again");
    }

    /// `poll_event`'s turn-taking looks at the servers reached mutably since the last round's
    /// end and those that round's end found holding events, not at every server; it still
    /// goes round from the cursor.
    #[test]
    fn events_are_looked_for_only_where_they_can_be() {
        let now = Instant::now();
        let mut servers = Servers::default();
        for _ in 0..5 {
            servers.insert(server(now));
        }
        let end_round = |servers: &mut Servers, now| {
            round(servers, now);
            servers.forget_eventless();
        };
        end_round(&mut servers, now);
        let close = |servers: &mut Servers, i| servers.get_mut(i).unwrap().engine.close(now);
        // Each closing queues the server's state change; the servers are marked.
        close(&mut servers, 3);
        close(&mut servers, 1);
        let queued = |servers: &Servers, i: usize| servers.get(i).unwrap().engine.queued_events();
        assert!(queued(&servers, 1) > 0 && queued(&servers, 3) > 0);
        assert_eq!(servers.next_with_events(0), Some(1));
        assert_eq!(servers.next_with_events(2), Some(3), "from the cursor");
        assert_eq!(servers.next_with_events(4), Some(1), "going round");
        // A round's end forgets the servers that hold no events.
        end_round(&mut servers, now);
        assert_eq!(
            (servers.marks.touched.len(), servers.marks.eventful.as_slice()),
            (0, &[3, 1][..])
        );
        assert_eq!(servers.next_with_events(2), Some(3));
        // Server 1's events taken: the next round's end forgets it; with all taken, nothing is
        // left to look at.
        let drain = |servers: &mut Servers, i| {
            let engine = &mut servers.get_mut(i).unwrap().engine;
            while engine.poll_event().is_some() {}
        };
        drain(&mut servers, 1);
        assert_eq!(servers.next_with_events(0), Some(3));
        end_round(&mut servers, now);
        assert_eq!(servers.marks.eventful, [3]);
        drain(&mut servers, 3);
        assert_eq!(servers.next_with_events(0), None);
        end_round(&mut servers, now);
        assert!(servers.marks.eventful.is_empty() && servers.marks.touched.is_empty());
        // Only the passes' marks are left (no pass ran: they are the cache's and the store's).
        assert!(servers.marks.bits.iter().all(|&b| b & !(CATALOGS | AFTER_INPUT) == 0));
        // A server whose deadline came (a round's own access) may queue events too.
        let (due, later) = (now + Duration::from_secs(1), now + Duration::from_secs(2));
        servers.file(2, settled_idle(Some(due)), now);
        assert_eq!(round(&mut servers, due), [2]);
        servers.get_mut_in_round(2).unwrap().engine.close(due);
        assert_eq!(servers.next_with_events(0), Some(2));
        servers.forget_eventless();
        assert_eq!(servers.marks.eventful, [2]);
        drain(&mut servers, 2);
        end_round(&mut servers, later);
        // A removed server's entry goes with its events.
        close(&mut servers, 4);
        end_round(&mut servers, now);
        assert_eq!(servers.marks.eventful, [4]);
        servers.remove(4);
        assert_eq!(servers.next_with_events(0), None);
        end_round(&mut servers, now);
        assert!(servers.marks.eventful.is_empty());
    }

    /// The servers a round looked at are filed at the next round, with the deadline worked
    /// out then, unless something marked them since; until then `unfiled` names them, so the
    /// host's next deadline counts theirs. A server marked again is not filed (its deadline is
    /// about to change), and a deadline it had filed before goes stale.
    #[test]
    fn a_rounds_servers_are_filed_at_the_next_round_unless_marked_again() {
        let now = Instant::now();
        let secs = |n| now + Duration::from_secs(n);
        let (mut servers, a, b) = two_servers(now);
        let mut work = Vec::new();
        let mut asked = Vec::new();
        let mut take = |servers: &mut Servers, at, deadlines: [Option<Instant>; 2]| {
            servers.take_round(at, &mut work, |i, _| {
                asked.push(i);
                settled_idle(deadlines[i])
            });
            servers.leave_unfiled(&work);
            (std::mem::take(&mut asked), work.clone())
        };
        let unfiled = |servers: &Servers| servers.unfiled().collect::<Vec<_>>();
        assert_eq!(take(&mut servers, now, [None; 2]), (vec![], vec![a, b]), "new: marked");
        assert_eq!(unfiled(&servers), [a, b]);
        assert_eq!(servers.earliest(), None);
        // Nothing marked them since: filed now, with the deadlines as they are, and no longer
        // looked at until those come.
        let due = [Some(secs(5)), Some(secs(9))];
        assert_eq!(take(&mut servers, now, due), (vec![a, b], vec![]));
        assert_eq!((unfiled(&servers), servers.earliest()), (vec![], Some(secs(5))));
        assert_eq!(take(&mut servers, secs(4), due), (vec![], vec![]), "not due yet");
        // A due server is looked at, and left unfiled again.
        assert_eq!(take(&mut servers, secs(5), due), (vec![], vec![a]));
        assert_eq!((unfiled(&servers), servers.earliest()), (vec![a], Some(secs(9))));
        // Marked before the next round (a reply, a call): not filed, looked at again; one
        // marked and unfiled is named once.
        servers.get_mut(a);
        assert_eq!(unfiled(&servers), [a]);
        assert_eq!(take(&mut servers, secs(6), due), (vec![], vec![a]));
        // A marked server's filed deadline is its old one: it goes stale when it is marked.
        servers.get_mut(b);
        assert_eq!(unfiled(&servers), [a, b]);
        // (a, untouched since the last round, is filed now.)
        assert_eq!(take(&mut servers, secs(7), [Some(secs(8)), None]), (vec![a], vec![b]));
        assert_eq!(servers.earliest(), Some(secs(8)), "a's; b's 9 s is stale");
        assert_eq!(unfiled(&servers), [b]);
        // A removed server is neither filed nor named.
        servers.remove(b);
        assert_eq!(unfiled(&servers), [0; 0]);
        assert_eq!(take(&mut servers, secs(7), [None; 2]), (vec![], vec![]));
    }

    /// A pass takes the servers changed since it last ran, in index order, each once; its own
    /// accesses do not bring them back, a server it leaves work on comes back, a late part
    /// of it sees every server once, and a removed server is not taken.
    #[test]
    fn a_pass_takes_the_servers_changed_since_it_last_ran() {
        let now = Instant::now();
        let mut servers = Servers::default();
        let (a, b, c) =
            (servers.insert(server(now)), servers.insert(server(now)), servers.insert(server(now)));
        let take = |servers: &mut Servers, pass| {
            let mut work = vec![99];
            servers.take_pass(pass, &mut work);
            work
        };
        assert_eq!(take(&mut servers, Pass::Catalogs), [a, b, c], "new servers");
        assert!(take(&mut servers, Pass::Catalogs).is_empty());
        assert!(!servers.has_pass_work(Pass::Catalogs));
        // Each pass has its own list: the other one still has them all.
        assert!(servers.has_pass_work(Pass::AfterInput));
        assert_eq!(round(&mut servers, now), [a, b, c], "new servers");
        // Changes (a command, input, a round's upkeep) mark every pass.
        servers.get_mut(c);
        servers.get_mut_in_round(a);
        servers.get_mut(c);
        assert_eq!(take(&mut servers, Pass::Catalogs), [a, c]);
        assert_eq!(round(&mut servers, now), [c], "the round's own access is not the next's");
        // The passes' own accesses, and taking events, do not; the round sees what a pass
        // says it changed, and an event taken.
        servers.get_mut_unmarked(a);
        servers.get_mut_without_passes(b);
        assert!(take(&mut servers, Pass::Catalogs).is_empty());
        assert_eq!(round(&mut servers, now), [b]);
        servers.mark_changed(a);
        assert!(take(&mut servers, Pass::Catalogs).is_empty());
        assert_eq!(round(&mut servers, now), [a]);
        // Work left for the next run; a part installed late; a removed server.
        servers.mark_for(b, Pass::Catalogs);
        assert_eq!(take(&mut servers, Pass::Catalogs), [b]);
        assert_eq!(take(&mut servers, Pass::AfterInput), [a, b, c]);
        servers.mark_all_for(Pass::AfterInput);
        servers.remove(b);
        servers.mark_for(b, Pass::AfterInput);
        assert_eq!(take(&mut servers, Pass::AfterInput), [a, c]);
    }

    /// Idleness is asked of the servers not filed alone: a filed server counts by what it was
    /// filed as (busy, or a deadline come), and a host keeping many servers pays nothing for
    /// the idle ones. A server marked again is asked again, whatever it was filed as; a
    /// removed one no longer counts.
    #[test]
    fn idleness_asks_only_the_servers_not_filed() {
        let now = Instant::now();
        let secs = |n| now + Duration::from_secs(n);
        let mut servers = Servers::default();
        for _ in 0..5 {
            servers.insert(server(now));
        }
        let asked = |servers: &Servers, at, idle: bool| {
            let mut asked = Vec::new();
            let answer = servers.is_idle(at, |i, _| {
                asked.push(i);
                idle
            });
            (answer, asked)
        };
        assert_eq!(asked(&servers, now, true), (true, vec![0, 1, 2, 3, 4]), "new: all asked");
        assert_eq!(asked(&servers, now, false), (false, vec![0]), "the first busy one ends it");
        round(&mut servers, now);
        for i in 0..5 {
            servers.file(i, settled_idle(None), now);
        }
        assert_eq!(asked(&servers, now, false), (true, vec![]), "all filed idle: none asked");
        // A busy one filed counts without being asked, and stops counting when filed idle.
        servers.file(3, Settled { deadline: None, busy: true }, now);
        assert_eq!(asked(&servers, now, true), (false, vec![]));
        servers.file(3, Settled { deadline: None, busy: true }, now);
        servers.file(3, settled_idle(None), now);
        assert_eq!(asked(&servers, now, true), (true, vec![]), "counted once, and uncounted");
        // A deadline filed: idle until it comes.
        servers.file(1, settled_idle(Some(secs(5))), now);
        assert_eq!(asked(&servers, secs(4), true), (true, vec![]));
        assert_eq!(asked(&servers, secs(5), true), (false, vec![]), "due: not idle");
        servers.file(1, settled_idle(None), now);
        // Filed busy, then marked: no longer counted, but asked, until a round files it again.
        servers.file(2, Settled { deadline: Some(secs(1)), busy: true }, now);
        servers.get_mut(2);
        assert_eq!(asked(&servers, secs(1), true), (true, vec![2]), "asked, not counted");
        assert_eq!(servers.earliest(), None, "its deadline went with it");
        round(&mut servers, now);
        servers.leave_unfiled(&[2]);
        assert_eq!(asked(&servers, now, false), (false, vec![2]), "asked until filed");
        // A removed server counts no more.
        servers.file(4, Settled { deadline: Some(secs(1)), busy: true }, now);
        servers.remove(4);
        assert_eq!(asked(&servers, secs(2), true), (true, vec![2]));
    }

    /// A busy server files a deadline every round: the stale entries do not pile up.
    #[test]
    fn stale_deadlines_stay_bounded() {
        let now = Instant::now();
        let mut servers = Servers::default();
        let a = servers.insert(server(now));
        assert_eq!(round(&mut servers, now), [a]);
        for k in 0..10_000u64 {
            servers.file(a, settled_idle(Some(now + Duration::from_secs(1_000 + k))), now);
        }
        assert!(
            servers.filing.deadlines.len() <= 2 * servers.len() + 65,
            "{}",
            servers.filing.deadlines.len()
        );
        assert_eq!(round(&mut servers, now + Duration::from_secs(10_998)), [0; 0], "stale");
        assert_eq!(round(&mut servers, now + Duration::from_secs(10_999)), [a], "the last one");
    }
}
