//! The pending-request table: a preallocated slab, per-slot generations and reusable buffers.
//!
//! A slot's generation counter only ever grows, and every wire id (each attempt, each page) and
//! every host handle takes a fresh value from it. So an id from an earlier occupant of a slot,
//! or an earlier page of the same listing, never matches the current occupant.

use slab::Slab;

use crate::engine::breaker::{Admission, OperationClass};
use crate::engine::retry::Idempotency;
use crate::engine::stamp::{Span, Stamp};
use crate::proto::jsonrpc::WireId;
use crate::proto::mcp::Method;
use crate::proto::trace::TraceId;

/// Handle to a call, stable across the wire ids its pages or attempts use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(pub(crate) WireId);

impl CallId {
    /// The handle as an integer (also used as the call's progress token).
    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "call#{}", self.0.get())
    }
}

/// Who is waiting for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A host call: its end is an event.
    Host,
    /// The era probe (`server/discover`).
    Probe,
    /// The legacy `initialize` handshake.
    Handshake,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendState {
    /// Held unsent until the host authorizes it (`CallOptions::hold`): counted neither as
    /// queued nor in flight, its deadline running.
    Held,
    /// Waiting to be written (before the server is ready, or behind other requests).
    Queued,
    /// Written; the server may be working on it.
    Sent,
    /// A failed attempt waiting to be sent again at this time. Keeps its in-flight slot.
    Backoff(Stamp),
    /// Waiting for a fresh tool listing before it is sent again (after -32020 over HTTP).
    /// Keeps its in-flight slot.
    Parked,
    /// Answered with `input_required`: waiting for the host to answer the input requests
    /// before the call goes again. Keeps its in-flight slot.
    AwaitingInput,
    /// A task-backed call between polls, until this time: counted neither as queued nor in
    /// flight (a task may run for hours without holding an in-flight slot).
    TaskWait(Stamp),
}

#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) call_gen: u32,
    pub(crate) wire_gen: u32,
    /// Times `wire_gen` was renewed since the last write (a retry, a poll or a page takes its
    /// id before it is written): a call that ends then names in its record the id the server
    /// saw ([`Pending::written_gen`]), not one it never did. A byte, so that a slot stays
    /// within its bytes; saturates.
    pub(crate) renewed_unwritten: u8,
    pub(crate) method: Method,
    pub(crate) owner: Owner,
    pub(crate) state: SendState,
    pub(crate) deadline: Stamp,
    pub(crate) progress: bool,
    pub(crate) pages: u32,
    /// Already sent again once after its legacy session expired.
    pub(crate) resent_for_session: bool,
    /// Already sent again once after a fresh tool listing (HTTP -32020).
    pub(crate) relisted: bool,
    /// An engine-internal request (the tool-list refresh): its end is no host event.
    pub(crate) internal: bool,
    /// A listing of one page only (`Engine::list_page`): not followed, not joined.
    pub(crate) one_page: bool,
    /// A task-backed call whose task exists: its requests are `tasks/*` polls (the task
    /// itself is in [`MoreBufs::task`]).
    pub(crate) task: bool,
    /// The call asks for a task (its [`MoreBufs::task`] says how): plain calls test this
    /// flag only, on the fields already loaded.
    pub(crate) task_asked: bool,
    /// How safe it is to send twice.
    pub(crate) class: Idempotency,
    /// Which breaker it answers to.
    pub(crate) tenant: u32,
    pub(crate) op: OperationClass,
    /// Attempts made so far (1 once first sent).
    pub(crate) attempt: u32,
    /// Attempts of the request on the wire now: the next listing page or `input_required`
    /// round starts again from 0, so its retries are counted as its own. One byte, so that a
    /// slot stays within its bytes: it saturates, and the deadline bounds retries past it.
    pub(crate) tries: u8,
    /// When the call was made, and when its current attempt was written (meaningful once
    /// `attempt > 0`).
    pub(crate) created: Stamp,
    pub(crate) sent_at: Stamp,
    /// Time spent waiting behind the in-flight limit before the first write.
    pub(crate) queue_wait: Span,
    /// `input_required` rounds taken so far.
    pub(crate) rounds: u32,
    /// Time between writes and their replies so far, and whether a written request is still
    /// waiting for its reply (since `sent_at`).
    pub(crate) network: Span,
    pub(crate) exchange_open: bool,
    /// Admitted as its half-open breaker's probe (by the last admission it asked for).
    pub(crate) probe: bool,
    /// Its current attempt went out under a saved era verdict not yet confirmed: a bare 4xx
    /// to it is a legacy server's refusal even once the reverify it started has begun.
    pub(crate) sent_assumed: bool,
}

impl Pending {
    /// The `wire_gen` its last written attempt went under (meaningful once `attempt > 0`).
    /// A slot's generations come one after another from its own counter (which skips 0), and
    /// only renewals take them while the slot is held.
    #[inline]
    pub(crate) fn written_gen(&self) -> u32 {
        if self.renewed_unwritten == 0 {
            return self.wire_gen;
        }
        self.earlier_gen()
    }

    #[cold]
    #[inline(never)]
    fn earlier_gen(&self) -> u32 {
        let mut g = self.wire_gen;
        for _ in 0..self.renewed_unwritten {
            g = match g.wrapping_sub(1) {
                0 => u32::MAX,
                earlier => earlier,
            };
        }
        g
    }
}

/// Extra facts about a call, fixed when it starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallTraits {
    pub(crate) progress: bool,
    pub(crate) class: Idempotency,
    pub(crate) tenant: u32,
    pub(crate) trace: Option<TraceId>,
    pub(crate) run_id: Option<u64>,
}

impl CallTraits {
    /// The engine's own requests (handshake, probes): no progress, unknown class, tenant 0,
    /// no trace or run.
    pub(crate) fn control() -> Self {
        CallTraits {
            progress: false,
            class: Idempotency::Unknown,
            tenant: 0,
            trace: None,
            run_id: None,
        }
    }
}

/// Buffers owned by a slot and reused by every call that occupies it, so steady-state calls
/// allocate nothing. Debug output shows their sizes only: they hold the host's arguments and
/// a round's answers (what a user typed), and outlive the call until the slot is reused.
#[derive(Default)]
pub(crate) struct SlotBufs {
    /// The call's text in one buffer (one allocation, one 24-byte header per slot): its
    /// per-call `_meta` members, its `Mcp-Name` value (tool or prompt name, or resource URI),
    /// then the members of `params` other than `_meta`. Members are without braces. The params
    /// come last so pages and `input_required` rounds can cut and extend them in place.
    text: Vec<u8>,
    meta_end: u32,
    name_end: u32,
    /// `Mcp-Param-*` headers (HTTP, tools with `x-mcp-header`).
    pub(crate) param_headers: super::headers::ParamHeaderList,
    /// What only listings, `input_required` rounds and traced or audited calls use: made on
    /// a slot's first such call and kept, so a slot that only ever carries plain calls holds
    /// 8 bytes for it.
    pub(crate) more: Option<Box<MoreBufs>>,
}

impl std::fmt::Debug for SlotBufs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotBufs")
            .field("text_bytes", &self.text.len())
            .field("more", &self.more.is_some())
            .finish_non_exhaustive()
    }
}

/// The buffers of [`SlotBufs`] that plain calls never touch.
#[derive(Debug, Default)]
pub(crate) struct MoreBufs {
    /// Items gathered from earlier pages of a listing, comma-separated.
    pub(crate) items: Vec<u8>,
    /// Hashes of cursors a listing has returned, to catch a server that loops.
    pub(crate) cursors: Vec<u64>,
    /// Length of the original params, once an `input_required` round has appended to them.
    pub(crate) params_base: Option<usize>,
    /// The last round's `requestState`, as its raw JSON text (empty when none was sent).
    pub(crate) request_state: Vec<u8>,
    /// The cache hints of a listing's pages so far.
    pub(crate) list_hints: super::listing::ListHints,
    /// The call's trace id and run, for its record.
    pub(crate) trace: Option<TraceId>,
    pub(crate) run_id: Option<u64>,
    /// How long the call was held for the host's authorization before it was released.
    pub(crate) held: Span,
    /// The task behind a task-backed call, or the task it asks for.
    pub(crate) task: Option<super::tasks::TaskSlot>,
}

impl SlotBufs {
    /// The listing and round buffers, made on first use.
    pub(crate) fn more(&mut self) -> &mut MoreBufs {
        self.more.get_or_insert_with(Box::default)
    }

    /// Empties the slot for a new call, keeping every buffer's room.
    fn reset(&mut self) {
        if self.text.capacity() > super::listing::LISTING_BUF_KEEP {
            // A call with large arguments used this slot last.
            self.text = Vec::new();
        }
        self.text.clear();
        self.meta_end = 0;
        self.name_end = 0;
        self.param_headers.clear();
        if let Some(more) = self.more.as_mut() {
            more.items.clear();
            more.cursors.clear();
            more.params_base = None;
            more.request_state.clear();
            more.list_hints = Default::default();
            more.trace = None;
            more.run_id = None;
            more.held = Span::ZERO;
            more.task = None;
        }
    }

    /// Gives back the room of listing and round buffers a large page or failed walk grew past
    /// `keep` bytes: slots live as long as their engine, and [`reset`](Self::reset) keeps
    /// room, so one 16 MiB page held its slot's memory for good. (The call's own text is
    /// read for its record after the slot is freed: [`reset`](Self::reset) sheds that.)
    #[cold]
    #[inline(never)]
    fn shed(&mut self, keep: usize) {
        if let Some(more) = self.more.as_mut() {
            if more.items.capacity() > keep {
                more.items = Vec::new();
            }
            if more.request_state.capacity() > keep {
                more.request_state = Vec::new();
            }
        }
    }

    /// Writes the call's `_meta` members and its name; the params follow through
    /// [`SlotBufs::params_buf`]. Call once, right after the slot is taken.
    pub(crate) fn start(&mut self, meta: impl FnOnce(&mut Vec<u8>), name: &str) {
        debug_assert!(self.text.is_empty(), "a slot's text is written once per call");
        meta(&mut self.text);
        self.meta_end = offset(self.text.len());
        self.text.extend_from_slice(name.as_bytes());
        self.name_end = offset(self.text.len());
    }

    pub(crate) fn meta(&self) -> &[u8] {
        &self.text[..self.meta_end as usize]
    }

    /// Adds `members` (members of a JSON object, without its braces) to the call's `_meta`.
    /// Raw CR and LF in them, whitespace in valid JSON, become spaces (on stdio they would end
    /// the frame). For the rare request that brings `_meta` of its own: the name and params
    /// move along.
    pub(crate) fn extend_meta(&mut self, members: &[u8]) {
        let at = self.meta_end as usize;
        let comma = at > 0;
        let added = members.iter().map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b });
        let added: Vec<u8> = comma.then_some(b',').into_iter().chain(added).collect();
        let grown = offset(added.len());
        self.text.splice(at..at, added);
        self.meta_end += grown;
        self.name_end += grown;
    }

    /// The `Mcp-Name` value; empty for methods that have none.
    pub(crate) fn name(&self) -> &str {
        // Written from a `&str` in `start`, so always valid; checked rather than assumed.
        std::str::from_utf8(self.name_bytes()).unwrap_or("")
    }

    /// [`name`](Self::name)'s bytes, unchecked: for a reader of bytes.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP session's `Mcp-Name`
    pub(crate) fn name_bytes(&self) -> &[u8] {
        &self.text[self.meta_end as usize..self.name_end as usize]
    }

    pub(crate) fn params(&self) -> &[u8] {
        &self.text[self.name_end as usize..]
    }

    pub(crate) fn params_len(&self) -> usize {
        self.text.len() - self.name_end as usize
    }

    /// Cuts the params to their first `len` bytes.
    pub(crate) fn truncate_params(&mut self, len: usize) {
        self.text.truncate(self.name_end as usize + len);
    }

    /// The buffer to append params to (they are its tail), with the round buffers when the
    /// slot has them.
    pub(crate) fn params_buf(&mut self) -> (&mut Vec<u8>, Option<&MoreBufs>) {
        (&mut self.text, self.more.as_deref())
    }

    /// The params, to rewrite in place (same length).
    pub(crate) fn params_mut(&mut self) -> &mut [u8] {
        &mut self.text[self.name_end as usize..]
    }

    /// How long the call was held for authorization before its release.
    pub(crate) fn held(&self) -> Span {
        self.more.as_ref().map_or(Span::ZERO, |m| m.held)
    }

    /// The trace id and run id the call was made with.
    pub(crate) fn tags(&self) -> (Option<TraceId>, Option<u64>) {
        self.more.as_ref().map_or((None, None), |m| (m.trace, m.run_id))
    }
}

/// A buffer offset as stored: a call's text past 4 GiB is refused long before this, by the
/// transports' frame limits, so saturating only guards the arithmetic.
fn offset(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// How a wire id's life ended, for telling late replies from duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    Answered,
    Abandoned,
}

/// What a reply's id turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    Pending(usize),
    /// A second reply for an id already answered.
    Duplicate,
    /// A reply for an id the engine stopped waiting for (cancelled, timed out, superseded).
    Late,
    /// Never issued by this engine.
    Unknown,
}

#[derive(Debug)]
pub(crate) struct Requests {
    slab: Slab<Pending>,
    next_gen: Vec<u32>,
    bufs: Vec<SlotBufs>,
    ended: Vec<(u32, Ended)>,
    /// Host calls written or backing off (they hold an in-flight slot).
    in_flight: usize,
    /// Host calls waiting to be written.
    queued: usize,
}

impl Requests {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            slab: Slab::with_capacity(n),
            next_gen: vec![0; n],
            bufs: (0..n).map(|_| SlotBufs::default()).collect(),
            ended: vec![(0, Ended::Answered); n],
            in_flight: 0,
            queued: 0,
        }
    }

    /// Host calls written or backing off.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Host calls waiting to be written.
    pub(crate) fn queued(&self) -> usize {
        self.queued
    }

    fn count(&mut self, owner: Owner, method: Method, state: SendState, delta: isize) {
        if owner != Owner::Host {
            return;
        }
        let counter = match state {
            SendState::Held | SendState::TaskWait(_) => return,
            // A subscription stream, open for as long as it is watched, is no work of the
            // server's: counted, each one took a call's place for good (with a limit of one,
            // no call went out again).
            SendState::Sent if method == Method::Listen => return,
            SendState::Queued => &mut self.queued,
            SendState::Sent
            | SendState::Backoff(_)
            | SendState::Parked
            | SendState::AwaitingInput => &mut self.in_flight,
        };
        *counter = counter.saturating_add_signed(delta);
    }

    /// Moves a pending request to another state, keeping the counters right.
    pub(crate) fn set_state(&mut self, slot: usize, state: SendState) {
        let Some(p) = self.slab.get_mut(slot) else { return };
        let (owner, method, old) = (p.owner, p.method, p.state);
        p.state = state;
        self.count(owner, method, old, -1);
        self.count(owner, method, state, 1);
    }

    pub(crate) fn len(&self) -> usize {
        self.slab.len()
    }

    /// No host call fits. The last slot is the engine's own: the probe or the handshake (one
    /// at a time) must never find the table full of host calls that wait for it (held, between
    /// task polls, backing off for a restart), or a restart would close the engine.
    pub(crate) fn is_full(&self) -> bool {
        self.slab.len() + 1 >= self.next_gen.len()
    }

    fn fresh_gen(&mut self, slot: usize) -> u32 {
        // Generation 0 is never issued, so a zeroed `ended` record matches nothing.
        // SAFETY-style note: slots come from the slab, whose keys stay below its capacity,
        // which is the length of `next_gen`.
        let g = &mut self.next_gen[slot];
        *g = g.wrapping_add(1).max(1);
        *g
    }

    /// Takes a slot; the caller fills its buffers. `None` when the table is full (for a host
    /// call, [`is_full`](Self::is_full); the probe and the handshake also have the last slot).
    #[inline]
    pub(crate) fn insert(
        &mut self,
        method: Method,
        owner: Owner,
        now: Stamp,
        deadline: Stamp,
        traits: CallTraits,
    ) -> Option<usize> {
        let full = match owner {
            Owner::Host => self.is_full(),
            Owner::Probe | Owner::Handshake => self.slab.len() >= self.next_gen.len(),
        };
        if full {
            return None;
        }
        let slot = self.slab.vacant_key();
        let call_gen = self.fresh_gen(slot);
        let wire_gen = self.fresh_gen(slot);
        self.slab.insert(Pending {
            call_gen,
            wire_gen,
            renewed_unwritten: 0,
            method,
            owner,
            state: SendState::Queued,
            deadline,
            progress: traits.progress,
            pages: 0,
            resent_for_session: false,
            relisted: false,
            internal: false,
            one_page: false,
            task: false,
            task_asked: false,
            class: traits.class,
            tenant: traits.tenant,
            op: if traits.class == Idempotency::Read {
                OperationClass::Read
            } else {
                OperationClass::Write
            },
            attempt: 0,
            tries: 0,
            created: now,
            sent_at: now,
            queue_wait: Span::ZERO,
            rounds: 0,
            network: Span::ZERO,
            exchange_open: false,
            probe: false,
            sent_assumed: false,
        });
        self.count(owner, method, SendState::Queued, 1);
        let bufs = &mut self.bufs[slot];
        bufs.reset();
        if traits.trace.is_some() || traits.run_id.is_some() {
            let more = bufs.more();
            more.trace = traits.trace;
            more.run_id = traits.run_id;
        }
        Some(slot)
    }

    pub(crate) fn call_id(&self, slot: usize) -> Option<CallId> {
        self.slab.get(slot).map(|p| CallId(WireId::new(slot, p.call_gen)))
    }

    pub(crate) fn wire_id(&self, slot: usize) -> Option<WireId> {
        self.slab.get(slot).map(|p| WireId::new(slot, p.wire_gen))
    }

    /// The written request's exchange ended (its reply or failure arrived): its time counts as
    /// network time. Does nothing when no exchange is open.
    pub(crate) fn end_exchange(&mut self, slot: usize, now: Stamp) {
        let Some(p) = self.slab.get_mut(slot) else { return };
        if p.exchange_open {
            p.network = p.network.add(now.since(p.sent_at));
        }
        p.exchange_open = false;
    }

    /// Gives a pending request a new wire id (new attempt); the old id becomes late.
    pub(crate) fn renew_wire_id(&mut self, slot: usize) -> Option<WireId> {
        self.renew(slot, Ended::Abandoned)
    }

    /// [`renew_wire_id`](Self::renew_wire_id) after a reply answered the old id (the next
    /// page, the next poll, an input round's retry): another copy of that reply is a
    /// duplicate, not a late answer to act on.
    pub(crate) fn renew_answered_wire_id(&mut self, slot: usize) -> Option<WireId> {
        self.renew(slot, Ended::Answered)
    }

    fn renew(&mut self, slot: usize, old_ended: Ended) -> Option<WireId> {
        let old = self.slab.get(slot)?.wire_gen;
        self.ended[slot] = (old, old_ended);
        let g = self.fresh_gen(slot);
        let p = self.slab.get_mut(slot)?;
        p.wire_gen = g;
        p.renewed_unwritten = p.renewed_unwritten.saturating_add(1);
        self.set_state(slot, SendState::Queued);
        Some(WireId::new(slot, g))
    }

    pub(crate) fn get(&self, slot: usize) -> Option<&Pending> {
        self.slab.get(slot)
    }

    /// What the call's breaker said when the call last asked to start.
    pub(crate) fn note_admission(&mut self, slot: usize, admission: Admission) {
        if let Some(p) = self.get_mut(slot) {
            p.probe = admission == Admission::Probe;
        }
    }

    pub(crate) fn get_mut(&mut self, slot: usize) -> Option<&mut Pending> {
        self.slab.get_mut(slot)
    }

    pub(crate) fn bufs(&self, slot: usize) -> &SlotBufs {
        &self.bufs[slot]
    }

    /// The most room any slot's listing buffer holds.
    #[cfg(test)]
    pub(crate) fn largest_listing_room(&self) -> usize {
        let room = |b: &SlotBufs| b.more.as_ref().map_or(0, |m| m.items.capacity());
        self.bufs.iter().map(room).max().unwrap_or(0)
    }

    pub(crate) fn bufs_mut(&mut self, slot: usize) -> &mut SlotBufs {
        &mut self.bufs[slot]
    }

    /// The slot a host handle names, if that call is still pending.
    pub(crate) fn slot_of(&self, call: CallId) -> Option<usize> {
        let slot = call.0.slot();
        let p = self.slab.get(slot)?;
        (p.call_gen == call.0.generation()).then_some(slot)
    }

    /// Classifies the id of a reply.
    pub(crate) fn lookup(&self, id: WireId) -> Lookup {
        let slot = id.slot();
        let Some(&issued) = self.next_gen.get(slot) else {
            return Lookup::Unknown;
        };
        let g = id.generation();
        if let Some(p) = self.slab.get(slot) {
            if p.wire_gen == g && p.state == SendState::Sent {
                return Lookup::Pending(slot);
            }
        }
        match self.ended[slot] {
            (eg, Ended::Answered) if eg == g => Lookup::Duplicate,
            _ if g != 0 && g <= issued => Lookup::Late,
            _ => Lookup::Unknown,
        }
    }

    /// Frees a slot, remembering how its last wire id ended. Always inlined: its `Pending`,
    /// returned by value, is copied when it is not (+64 instructions per call, callgrind).
    #[inline(always)]
    pub(crate) fn remove(&mut self, slot: usize, how: Ended) -> Option<Pending> {
        let p = self.slab.try_remove(slot)?;
        let bufs = &mut self.bufs[slot];
        if bufs.more.is_some() {
            // Plain calls never make these buffers: one check on their path.
            bufs.shed(super::listing::LISTING_BUF_KEEP);
        }
        self.ended[slot] = (p.wire_gen, how);
        self.count(p.owner, p.method, p.state, -1);
        Some(p)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &Pending)> {
        self.slab.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_never_match_a_reused_slot() {
        let now = Stamp::from_nanos(0);
        // One host slot, and the lifecycle's.
        let mut t = Requests::with_capacity(2);
        let traits = CallTraits::control();
        let a = t.insert(Method::ToolsCall, Owner::Host, now, now, traits).unwrap();
        t.set_state(a, SendState::Sent);
        assert_eq!((t.in_flight(), t.queued()), (1, 0));
        let a_wire = t.wire_id(a).unwrap();
        let a_call = t.call_id(a).unwrap();
        assert!(t.insert(Method::ToolsCall, Owner::Host, now, now, traits).is_none(), "full");
        assert_eq!(t.lookup(a_wire), Lookup::Pending(a));
        t.remove(a, Ended::Answered);
        assert_eq!(t.lookup(a_wire), Lookup::Duplicate);

        assert_eq!((t.in_flight(), t.queued()), (0, 0));
        let b = t.insert(Method::ToolsCall, Owner::Host, now, now, traits).unwrap();
        assert_eq!(a, b, "slot reused");
        assert_eq!((t.in_flight(), t.queued()), (0, 1));
        t.set_state(b, SendState::Sent);
        assert_eq!(t.lookup(a_wire), Lookup::Duplicate, "old id does not complete the new call");
        assert_eq!(t.slot_of(a_call), None, "old handle does not name the new call");
        assert_eq!(t.slot_of(t.call_id(b).unwrap()), Some(b));
        let b_first = t.wire_id(b).unwrap();
        let renewed = t.renew_wire_id(b).unwrap();
        assert_eq!((t.in_flight(), t.queued()), (0, 1));
        t.set_state(b, SendState::Sent);
        assert_eq!(t.lookup(b_first), Lookup::Late, "a superseded page or attempt id is late");
        assert_eq!(t.lookup(renewed), Lookup::Pending(b));
        assert_eq!(t.lookup(WireId::new(b, 999)), Lookup::Unknown, "never issued");
        assert_eq!(t.lookup(WireId::new(5, 1)), Lookup::Unknown, "slot out of range");
    }

    #[test]
    fn a_slots_text_keeps_meta_name_and_params_apart() {
        let mut b = SlotBufs::default();
        b.start(|m| m.extend_from_slice(b"\"progressToken\":7"), "echo");
        b.params_buf().0.extend_from_slice(b"\"name\":\"echo\"");
        assert_eq!(b.meta(), b"\"progressToken\":7");
        assert_eq!(b.name(), "echo");
        assert_eq!(b.params(), b"\"name\":\"echo\"");
        let base = b.params_len();
        b.params_buf().0.extend_from_slice(b",\"inputResponses\":{}");
        b.truncate_params(base);
        assert_eq!(b.params(), b"\"name\":\"echo\"");
        b.truncate_params(0);
        assert_eq!(
            (b.meta(), b.name(), b.params()),
            (&b"\"progressToken\":7"[..], "echo", &b""[..])
        );

        // A new call in the same slot starts from nothing, keeping the room.
        let room = b.text.capacity();
        b.more().trace = None;
        b.more().run_id = Some(9);
        assert_eq!(b.tags(), (None, Some(9)));
        b.reset();
        assert_eq!(b.tags(), (None, None), "a reused slot forgets the last call's tags");
        b.start(|_| {}, "");
        assert_eq!((b.meta(), b.name(), b.params()), (&b""[..], "", &b""[..]));
        assert_eq!(b.text.capacity(), room);
    }

    #[test]
    fn a_slot_stays_within_its_bytes() {
        // Most of what a pending call costs (`cargo bench --bench timers`, aim <= 256 bytes):
        // a field that needs more belongs in the lazily made `MoreBufs`.
        assert!(std::mem::size_of::<Pending>() <= 96, "{}", std::mem::size_of::<Pending>());
        assert!(std::mem::size_of::<SlotBufs>() <= 48, "{}", std::mem::size_of::<SlotBufs>());
    }
}
