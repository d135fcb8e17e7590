//! Draining events while starting calls: [`Host::drain`] hands each event to a closure
//! together with [`Commands`], so a program can start the next call (or cancel one) from
//! inside its drain loop instead of counting and starting after it.
//!
//! An event borrows the text it carries. `poll_event` lends it from the server's engine, which
//! is why nothing else can touch the host while it is held. `drain` copies the one event's text
//! into a buffer the host keeps (cleared and reused: no allocation once it has grown to the
//! largest event), so the event borrows only that buffer and the engines are free for
//! commands.

use std::fmt;
use std::time::Instant;

use serde_json::value::RawValue;

use super::{Client, ServerId};
use crate::client::event::HostEvent;
use crate::engine::{CallId, CallOptions};
use crate::error::{CancelError, RequestError};
use crate::proto::mcp::Method;
#[cfg(doc)]
use crate::Host;

/// The host's call commands, usable while [`Host::drain`] hands out an event.
pub struct Commands<'h> {
    servers: &'h mut super::servers::Servers,
    /// Servers with output: the shell writes it once the drain returns.
    unflushed: &'h mut Vec<usize>,
    now: Instant,
    /// No policy and no disabled tool is in effect: calls go as they are.
    authorization_open: bool,
    /// Otherwise calls start held, and the host decides them once the closure returns
    /// (server, call, tool, breaker tenant). Empty, and so never allocated, without a policy.
    held: &'h mut Vec<HeldCall>,
}

impl fmt::Debug for Commands<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Commands").field("servers", &self.servers.len()).finish()
    }
}

/// A call a drain's closure started held, decided once the closure returns.
#[derive(Debug)]
pub(crate) struct HeldCall {
    server: ServerId,
    call: CallId,
    name: String,
    tenant: u32,
    /// The host asked for it held itself (`CallOptions::hold`): allowed, it stays held for
    /// the host to release, as outside a drain.
    by_host: bool,
}

impl Commands<'_> {
    /// [`Host::call_tool`].
    pub fn call_tool(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &RawValue,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.start_call(server, name, opts, |e, now, opts| e.call_tool(now, name, arguments, opts))
    }

    /// [`Host::call_tool_json`].
    pub fn call_tool_json(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.start_call(server, name, opts, |e, now, opts| {
            e.call_tool_json(now, name, arguments, opts)
        })
    }

    /// [`Host::call_tool_no_args`].
    pub fn call_tool_no_args(
        &mut self,
        server: ServerId,
        name: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.call_tool_json(server, name, "{}", opts)
    }

    /// Starts tool call `name` with `start`: as it is, or held for the host's authorization
    /// decision when a policy or a disabled tool is in effect.
    fn start_call(
        &mut self,
        server: ServerId,
        name: &str,
        opts: &CallOptions,
        start: impl FnOnce(
            &mut crate::engine::Engine,
            Instant,
            &CallOptions,
        ) -> Result<CallId, RequestError>,
    ) -> Result<CallId, RequestError> {
        let held = self.held_options(opts);
        if held.is_some() && !self.room_for_held(server) {
            // As a call made outside the drain is refused when the queue is full: a held one
            // skips that check, and was left held when its release found no room, ending
            // only at its deadline, unsent.
            return Err(RequestError::Overloaded);
        }
        let by_host = opts.hold;
        let opts = held.as_ref().unwrap_or(opts);
        let call = self.command(server, |e, now| start(e, now, opts))?;
        self.note_held(server, call, name, opts, by_host);
        Ok(call)
    }

    /// The options of a call that must wait for the host's authorization decision.
    fn held_options(&self, opts: &CallOptions) -> Option<CallOptions> {
        (!self.authorization_open).then(|| CallOptions { hold: true, ..opts.clone() })
    }

    /// Whether the queue of `server` has room for one more call beyond those this drain has
    /// started held (each takes its place when the host's decision releases it).
    fn room_for_held(&self, server: ServerId) -> bool {
        let s = self.servers.get(server.index).filter(|s| s.generation == server.generation);
        let started = self.held.iter().filter(|h| h.server == server).count();
        s.is_none_or(|s| s.engine.queue_room() > started)
    }

    fn note_held(
        &mut self,
        server: ServerId,
        call: CallId,
        name: &str,
        opts: &CallOptions,
        by_host: bool,
    ) {
        if opts.hold && !self.authorization_open {
            let name = name.to_owned();
            self.held.push(HeldCall { server, call, name, tenant: opts.tenant, by_host });
        }
    }

    /// [`Host::cancel`].
    pub fn cancel(&mut self, server: ServerId, call: CallId) -> Result<(), CancelError> {
        let s = self.servers.get_mut(server.index).filter(|s| s.generation == server.generation);
        let s = s.ok_or(CancelError::NotPending)?;
        s.engine.cancel(self.now, call)?;
        self.note_output(server.index);
        Ok(())
    }

    fn command<T>(
        &mut self,
        id: ServerId,
        f: impl FnOnce(&mut crate::engine::Engine, Instant) -> Result<T, RequestError>,
    ) -> Result<T, RequestError> {
        let s = self.servers.get_mut(id.index).filter(|s| s.generation == id.generation);
        let s = s.ok_or(RequestError::Closed)?;
        let out = f(&mut s.engine, self.now)?;
        self.note_output(id.index);
        Ok(out)
    }

    fn note_output(&mut self, index: usize) {
        if !self.unflushed.contains(&index) {
            self.unflushed.push(index);
        }
    }
}

impl Client {
    /// Hands every queued event to `f`, in the order [`poll_event`](Self::poll_event) gives
    /// them (catalog changes first, servers taking turns), with [`Commands`] to start or
    /// cancel calls meanwhile: a loop that keeps N calls in flight starts the next one in the
    /// same closure that sees one end. Returns when no event is left (events the closure's
    /// own commands cause come with later I/O). Allocates nothing per event once the host's
    /// buffer has grown to the largest event.
    pub fn drain(
        &mut self,
        now: Instant,
        f: impl FnMut(&mut Commands<'_>, ServerId, HostEvent<'_>),
    ) {
        self.drain_with(now, f, |_| {});
    }

    /// [`drain`](Self::drain), calling `after_each` once the closure has had each event: the
    /// host writes there what the closure started, call by call as a loop without a drain
    /// would (a batch of every call of a drain grew the driver's write buffer past what the
    /// loop's steady state needs).
    pub(crate) fn drain_with(
        &mut self,
        now: Instant,
        mut f: impl FnMut(&mut Commands<'_>, ServerId, HostEvent<'_>),
        mut after_each: impl FnMut(&mut Client),
    ) {
        let mut held: Vec<HeldCall> = Vec::new();
        loop {
            // Calls the last turn started held get the decision any call gets (local
            // authorization is never skipped by starting a call from here).
            for HeldCall { server, call, name, tenant, by_host } in held.drain(..) {
                self.settle_held(now, server, call, Method::ToolsCall, &name, tenant, by_host);
            }
            self.pump_catalogs(now);
            let authorization_open = self.authorization_open();
            // In `poll_event`'s order: the cache's changes, then the asks, then the engines'.
            let asked = !self.cache.has_changes() && self.has_asks() && self.take_ask();
            let Self {
                servers,
                unflushed,
                cache,
                records,
                scratch,
                event_cursor,
                authz,
                retired,
                ..
            } = self;
            let mut commands =
                Commands { servers, unflushed, now, authorization_open, held: &mut held };
            if cache.has_changes() {
                if let Some((id, event)) = cache.next_change() {
                    f(&mut commands, id, event);
                }
                after_each(self);
                continue;
            }
            if asked {
                if let Some((id, event)) = authz.current_ask() {
                    f(&mut commands, id, event);
                }
                after_each(self);
                continue;
            }
            let Some(index) = commands.servers.next_with_events(*event_cursor) else {
                // Then what removed servers left: their calls' ends, and `Closed`.
                let Some(r) = retired.next() else { break };
                let Some(detached) = r.events.pop_into(scratch) else { break };
                let event = detached.view(scratch);
                records.event_named(&r.name, &event);
                f(&mut commands, r.id, event);
                after_each(self);
                continue;
            };
            *event_cursor = index + 1;
            let Some(s) = commands.servers.get_mut_without_passes(index) else { break };
            let id = ServerId { index, generation: s.generation };
            let Some(detached) = s.engine.poll_event_into(scratch) else { break };
            let event = detached.view(scratch);
            records.event(index, &event);
            f(&mut commands, id, event);
            after_each(self);
        }
        // The last turn settled the calls the last event's closure started held (and ran the
        // cache's pass): what they queued is written now, not at the next poll.
        after_each(self);
    }
}
