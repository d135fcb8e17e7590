//! The many-server core: every server's engine and catalog, the capability cache, principals
//! and their lanes, tasks, local authorization, answer handlers and call records, with no I/O
//! and no clock.
//!
//! The shape is quinn-proto's `Endpoint`: a slab of per-server state routed by handle, `now`
//! on every verb that depends on time, one [`poll_event`](Client::poll_event) and one
//! [`poll_timeout`](Client::poll_timeout) that is the earliest deadline the core owns. What
//! the core produces for the wire stays in each server's engine; the core only says which
//! servers have output ([`take_unflushed`](Client::take_unflushed)), and the shell (the
//! [`Host`](crate::Host), with its drivers and poll) writes it. What the shell learns from a
//! driver comes back in as an input ([`note_granted_scope`](Client::note_granted_scope)).
//!
//! So everything above the engine is testable with the engine harness on simulated time: a
//! test adds engines, moves their frames itself, and calls the same verbs the host does.

use std::time::Instant;

use serde_json::value::RawValue;

use self::retired::RetiredServers;
use self::servers::Settled;
use crate::config::{CacheConfig, SavedVerdict};
use crate::engine::{
    CallId, CallOptions, Engine, Event, ServerRequestId, ServerState, Stats, TaskStatus,
};
use crate::error::{AnswerError, CallError, CancelError, RequestError, TransportError};
use crate::proto::mcp::Method;
use crate::proto::version::Era;

pub(crate) mod answers;
pub(crate) mod authz;
pub(crate) mod capability_store;
pub(crate) mod catalog;
pub(crate) mod drain;
pub(crate) mod event;
pub(crate) mod lane;
pub(crate) mod principal;
pub(crate) mod records;
pub(crate) mod retired;
pub(crate) mod roots;
#[cfg(feature = "schema")]
pub(crate) mod schema;
pub(crate) mod servers;
pub(crate) mod task;
pub(crate) mod verdict_store;

#[cfg(test)]
mod tests;

pub use answers::{Answer, AnswerHandler};
pub use authz::{AccessRequest, Confirm, Decision, DefaultPolicy, Policy};
pub use capability_store::{CapabilityStore, EntryKind, StoreKey, StoredEntry, StoredPage};
pub use catalog::{CacheStats, CatalogError, CatalogView};
pub use drain::Commands;
pub use event::{ClientEvent, HostEvent};
pub use principal::{
    CredentialSource, Credentials, LaneTarget, Principal, PrincipalError, PrincipalId,
};
pub use task::{TaskCallError, TaskError, TaskId, TaskInfo, TaskOptions, MAX_TASK_BUDGET};

/// Handle to a server in a [`Client`] (and so in a [`Host`](crate::Host)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerId {
    pub(crate) index: usize,
    pub(crate) generation: u32,
}

/// One server's part of the core.
#[derive(Debug)]
pub(crate) struct ServerCore {
    pub(crate) generation: u32,
    pub(crate) engine: Engine,
    pub(crate) catalog: catalog::ServerCatalog,
}

/// The sans-IO core under [`Host`](crate::Host): many servers, each with its own engine, and
/// everything the host keeps across them (the capability cache, principals and lanes, tasks,
/// local authorization, answer handlers, call records). No I/O and no clock: `now` comes in
/// on every verb that depends on time, and the wall clock only as a function the shell gives
/// with a capability store.
///
/// The shape is quinn-proto's `Endpoint`: a slab of per-server state routed by [`ServerId`],
/// one [`poll_event`](Self::poll_event), and one [`poll_timeout`](Self::poll_timeout) that is
/// the earliest deadline the core owns (every engine's, and every watched catalog's re-listen
/// backoff). Output stays in each server's [`Engine`]; the core says which servers have some
/// ([`take_unflushed`](Self::take_unflushed)) and the shell writes it with its drivers. What
/// the shell learns from a driver comes back as an input
/// ([`note_granted_scope`](Self::note_granted_scope)).
///
/// Call order, as for an engine: after a command, write the output of the servers
/// [`take_unflushed`](Self::take_unflushed) names; after input (the driver hands frames to
/// [`engine_mut`](Self::engine_mut)) or at [`poll_timeout`](Self::poll_timeout), call
/// [`handle_timeout`](Self::handle_timeout); then drain [`poll_event`](Self::poll_event).
///
/// Most programs use it through [`Host`](crate::Host), which adds the poll, the drivers and
/// the blocking helpers, and whose verbs are these at the current time.
///
/// What a program does not install, it does not link: the capability cache's share of each
/// round (armed by the first catalog need, watch or configured cache), local authorization's
/// decision (the first policy or tool rule) and the answer handlers' offer (the first
/// handler) are each reached through a function that only its installer names, and the
/// persistent store's era verdicts through the store's own `dyn` object, which only
/// [`set_capability_store`](Self::set_capability_store) makes. A minimal stdio client is
/// 529 KiB stripped that way
/// (`benches/footprint.sh`).
#[derive(Debug)]
pub struct Client {
    pub(crate) servers: servers::Servers,
    next_generation: u32,
    /// Where `poll_event` looks first, so one busy server cannot starve the others' events.
    event_cursor: usize,
    /// The capability cache (catalogs of every server) and its change events.
    pub(crate) cache: catalog::ClientCache,
    /// Principals, and each server's lanes (one engine per server and principal).
    pub(crate) lanes: principal::Lanes,
    /// Tasks and the calls made under each.
    tasks: task::TaskTable<(ServerId, CallId)>,
    /// Server names and the call-record sink.
    pub(crate) records: records::Records,
    /// Answer handlers: the host's and each server's.
    answers: answers::Handlers,
    /// The text of the event `drain` is handing out (reused: no allocation once grown).
    scratch: String,
    /// Authorization policies, disabled tools, and the calls held for the host's answer.
    pub(crate) authz: authz::Gate,
    /// Servers whose engines may have output the shell has not written, each named once.
    pub(crate) unflushed: Vec<usize>,
    /// The servers a pass over the changed ones looks at ([`servers::Pass`]); kept for its
    /// room.
    pass_work: Vec<usize>,
    /// The servers [`handle_timeout`](Self::handle_timeout) looks at; kept for its room. (A
    /// host has its own round: it never calls the core's `handle_timeout`.)
    round: Vec<usize>,
    /// Compiled tool schemas, by definition hash.
    #[cfg(feature = "schema")]
    schemas: schema::SchemaCache,
    /// The events of removed servers the host has not taken yet.
    retired: RetiredServers,
}

impl Client {
    /// A core with no server and a capability cache of these bounds.
    pub fn new(cache: CacheConfig) -> std::io::Result<Self> {
        Ok(Self {
            servers: servers::Servers::default(),
            next_generation: 0,
            event_cursor: 0,
            cache: catalog::ClientCache::new(cache)?,
            lanes: principal::Lanes::default(),
            tasks: task::TaskTable::default(),
            records: records::Records::new(),
            answers: answers::Handlers::default(),
            scratch: String::new(),
            authz: authz::Gate::default(),
            unflushed: Vec::new(),
            pass_work: Vec::new(),
            round: Vec::new(),
            #[cfg(feature = "schema")]
            schemas: schema::SchemaCache::default(),
            retired: RetiredServers::default(),
        })
    }

    /// Adds a server: its engine (made with [`Engine::new`]; its output is the shell's to
    /// write once [`take_unflushed`](Self::take_unflushed) names it) and the transport the
    /// shell carries it over. `identity` names the server in the capability cache's key and in
    /// call records (its program or URL, or `Config::cache_identity`; a record never shows
    /// what follows a NUL in it, as a stdio server's arguments do): servers with the same
    /// identity, transport and profiles share public catalogs.
    pub fn add_server(
        &mut self,
        engine: Engine,
        identity: &str,
        transport: crate::engine::TransportKind,
    ) -> ServerId {
        let http = transport == crate::engine::TransportKind::Http;
        let tenant = engine.config().cache_tenant.clone();
        let catalog = catalog::ServerCatalog::new(identity.to_owned(), http, tenant);
        self.insert(engine, catalog, None)
    }

    /// Takes a server out and hands its engine back (close it first for its calls to end
    /// with events); its handle goes stale. `None` for an unknown handle.
    pub fn remove_server(&mut self, server: ServerId) -> Option<Engine> {
        self.lanes.forget(server);
        self.remove(server).map(|s| s.engine)
    }

    /// Adds a server's engine and its catalog context; `recipe` says how to make lanes of it
    /// (`None` for a lane).
    pub(crate) fn insert(
        &mut self,
        engine: Engine,
        catalog: catalog::ServerCatalog,
        recipe: Option<principal::Recipe>,
    ) -> ServerId {
        self.next_generation = self.next_generation.wrapping_add(1);
        let generation = self.next_generation;
        let has_output = engine.has_output();
        let index = self.servers.vacant_key();
        self.records.added(index, catalog.identity(), catalog.principal());
        let index = self.servers.insert(ServerCore { generation, engine, catalog });
        let id = ServerId { index, generation };
        if let Some(recipe) = recipe {
            self.lanes.remember(id, recipe);
        }
        if has_output {
            self.mark(index);
        }
        id
    }

    /// Keeps the events of a server the host removed, if it left any (the ends of the calls
    /// its close failed): they come after the live servers' events ([`retired`]).
    pub(crate) fn retire(&mut self, id: ServerId, engine: Engine) {
        if engine.queued_events() == 0 {
            return;
        }
        let name = self.records.naming(id.index);
        self.retired.keep(id, name, engine.into_events());
    }

    /// The next event of a removed server.
    fn next_retired_event(&mut self) -> Option<(ServerId, HostEvent<'_>)> {
        let r = self.retired.next()?;
        let out = r.events.pop_tagged(r.id);
        if let Some((_, event)) = &out {
            self.records.event_named(&r.name, event);
        }
        out
    }

    /// Takes a server out (after the shell closed it); `None` for an unknown handle.
    pub(crate) fn remove(&mut self, id: ServerId) -> Option<ServerCore> {
        self.server(id)?;
        self.authz.forget(id);
        self.unflushed.retain(|&i| i != id.index);
        let mut s = self.servers.remove(id.index);
        self.cache.release_refreshes(&mut s.catalog);
        // The close ended the cache's own calls too: their ends are no host events (the pump
        // that takes them from a live server will not see this one again).
        for call in s.catalog.own_calls() {
            if let Some(e) = s.engine.take_call_event(call) {
                self.records.event(id.index, &e);
            }
        }
        Some(s)
    }

    pub(crate) fn server(&self, id: ServerId) -> Option<&ServerCore> {
        self.servers.get(id.index).filter(|s| s.generation == id.generation)
    }

    pub(crate) fn server_mut(&mut self, id: ServerId) -> Option<&mut ServerCore> {
        self.servers.get_mut(id.index).filter(|s| s.generation == id.generation)
    }

    /// The handle of the server in slot `index`.
    pub(crate) fn id_at(&self, index: usize) -> Option<ServerId> {
        self.servers.get(index).map(|s| ServerId { index, generation: s.generation })
    }

    /// Notes that the server in slot `index` may have output to write.
    pub(crate) fn mark(&mut self, index: usize) {
        if !self.unflushed.contains(&index) {
            self.unflushed.push(index);
        }
    }

    /// The next server whose engine may have output since the shell last asked (each named
    /// once): the shell drains its `poll_transmit` to the wire.
    pub fn take_unflushed(&mut self) -> Option<ServerId> {
        while let Some(index) = self.unflushed.pop() {
            if let Some(id) = self.id_at(index) {
                return Some(id);
            }
        }
        None
    }

    /// `true` when some server may have output the shell has not written.
    pub fn has_unflushed(&self) -> bool {
        !self.unflushed.is_empty()
    }

    /// One complete JSON-RPC frame from a server (a stdio line, an HTTP response's message):
    /// the server's engine reads it, what that produces for the wire is named by
    /// [`take_unflushed`](Self::take_unflushed), and the answer handlers are offered any
    /// request it made. Unknown handles are ignored.
    pub fn handle_message(&mut self, now: Instant, server: ServerId, frame: &[u8]) {
        let Some(s) = self.server_mut(server) else { return };
        s.engine.handle_message(now, frame);
        let has_output = s.engine.has_output();
        if has_output {
            self.mark(server.index);
        }
        self.after_input(now);
    }

    /// What the shell's transport did (opened, closed) for a server; see
    /// [`Engine::handle_transport`].
    pub fn handle_transport(
        &mut self,
        now: Instant,
        server: ServerId,
        event: crate::engine::TransportEvent,
    ) {
        let Some(s) = self.server_mut(server) else { return };
        s.engine.handle_transport(now, event);
        if s.engine.has_output() {
            self.mark(server.index);
        }
    }

    /// The engine of a server, for the shell's driver (and a test's scripted peer).
    pub fn engine_mut(&mut self, server: ServerId) -> Option<&mut Engine> {
        self.server_mut(server).map(|s| &mut s.engine)
    }

    /// The engine of a server.
    pub fn engine(&self, server: ServerId) -> Option<&Engine> {
        self.server(server).map(|s| &s.engine)
    }

    /// Runs a command on a server's engine and notes its output for the shell.
    pub(crate) fn command<T>(
        &mut self,
        now: Instant,
        id: ServerId,
        f: impl FnOnce(&mut Engine, Instant) -> Result<T, RequestError>,
    ) -> Result<T, RequestError> {
        let s = self.server_mut(id).ok_or(RequestError::Closed)?;
        match f(&mut s.engine, now) {
            Ok(out) => {
                self.mark(id.index);
                Ok(out)
            }
            Err(e) => {
                self.mark_refused(id.index);
                Err(e)
            }
        }
    }

    /// Notes a server's output after a command it refused once the command had started
    /// something (a refused call retries a lapsed authorization first, which queues the
    /// probe): unnamed, that output waited for a tick.
    #[cold]
    #[inline(never)]
    pub(crate) fn mark_refused(&mut self, index: usize) {
        if self.servers.get(index).is_some_and(|s| s.engine.has_output()) {
            self.mark(index);
        }
    }

    /// [`command`](Self::command) for the answer verbs.
    fn respond(
        &mut self,
        now: Instant,
        id: ServerId,
        f: impl FnOnce(&mut Engine, Instant) -> Result<(), AnswerError>,
    ) -> Result<(), AnswerError> {
        let s = self.server_mut(id).ok_or(AnswerError::NotPending)?;
        let out = f(&mut s.engine, now);
        match out {
            Ok(()) => self.mark(id.index),
            Err(_) => self.mark_refused(id.index),
        }
        out
    }

    /// Answers a server request (`Event::ServerRequest`) of `server`; see [`Engine::answer`].
    /// An answer to a roots request is checked against the file system
    /// ([`Host::set_roots_boundary`](crate::Host::set_roots_boundary)).
    pub fn answer(
        &mut self,
        now: Instant,
        server: ServerId,
        request: ServerRequestId,
        result: &RawValue,
    ) -> Result<(), AnswerError> {
        self.respond(now, server, |e, now| {
            roots::check_answer_resolved(e, request, result)?;
            e.answer(now, request, result)
        })
    }

    /// Refuses a server request (`Event::ServerRequest`) of `server`; see [`Engine::reject`].
    pub fn reject(
        &mut self,
        now: Instant,
        server: ServerId,
        request: ServerRequestId,
    ) -> Result<(), AnswerError> {
        self.respond(now, server, |e, now| e.reject(now, request))
    }

    /// Calls a tool. `arguments` must be a JSON object.
    pub fn call_tool(
        &mut self,
        now: Instant,
        server: ServerId,
        name: &str,
        arguments: &RawValue,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.gated(now, server, Method::ToolsCall, name, opts, |c, o| {
            c.command(now, server, |e, now| e.call_tool(now, name, arguments, o))
        })
    }

    /// Calls a tool with its arguments as JSON text (one object); see
    /// [`Engine::call_tool_json`].
    pub fn call_tool_json(
        &mut self,
        now: Instant,
        server: ServerId,
        name: &str,
        arguments: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.gated(now, server, Method::ToolsCall, name, opts, |c, o| {
            c.command(now, server, |e, now| e.call_tool_json(now, name, arguments, o))
        })
    }

    /// Reattaches to a task on `server` by its id; see [`Engine::resume_task`].
    pub fn resume_task(
        &mut self,
        now: Instant,
        server: ServerId,
        task_id: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.command(now, server, |e, now| e.resume_task(now, task_id, opts))
    }

    /// The task-backed calls pending on `server`: each call, its task id and the status last
    /// reported (empty for an unknown server).
    pub fn server_tasks(&self, server: ServerId) -> Vec<(CallId, String, Option<TaskStatus>)> {
        let Some(s) = self.server(server) else { return Vec::new() };
        s.engine.tasks().map(|(call, task, status)| (call, task.to_owned(), status)).collect()
    }

    /// Runs a paginated listing to the end; see [`Engine::list`].
    pub fn list(
        &mut self,
        now: Instant,
        server: ServerId,
        method: Method,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.command(now, server, |e, now| e.list(now, method, opts))
    }

    /// Reads a resource.
    pub fn read_resource(
        &mut self,
        now: Instant,
        server: ServerId,
        uri: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.gated(now, server, Method::ResourcesRead, uri, opts, |c, o| {
            c.command(now, server, |e, now| e.read_resource(now, uri, o))
        })
    }

    /// Gets a prompt.
    pub fn get_prompt(
        &mut self,
        now: Instant,
        server: ServerId,
        name: &str,
        arguments: Option<&RawValue>,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.gated(now, server, Method::PromptsGet, name, opts, |c, o| {
            c.command(now, server, |e, now| e.get_prompt(now, name, arguments, o))
        })
    }

    /// Sends a request by method name; see [`Engine::request_raw`].
    pub fn request(
        &mut self,
        now: Instant,
        server: ServerId,
        method: &str,
        params: Option<&RawValue>,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.gated(now, server, Method::Extension, method, opts, |c, o| {
            c.command(now, server, |e, now| e.request_raw(now, method, params, o))
        })
    }

    /// Asks for completions of a prompt or resource-template argument.
    pub fn complete(
        &mut self,
        now: Instant,
        server: ServerId,
        reference: &RawValue,
        argument: (&str, &str),
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.command(now, server, |e, now| e.complete(now, reference, argument.0, argument.1, opts))
    }

    /// Opens a `subscriptions/listen` subscription; see [`Engine::listen`].
    pub fn listen(
        &mut self,
        now: Instant,
        server: ServerId,
        filter: &crate::proto::mcp::SubscriptionFilter,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.command(now, server, |e, now| e.listen(now, filter, opts))
    }

    /// Cancels a call: its wait ends at once, and the server is told.
    pub fn cancel(
        &mut self,
        now: Instant,
        server: ServerId,
        call: CallId,
    ) -> Result<(), CancelError> {
        let s = self.server_mut(server).ok_or(CancelError::NotPending)?;
        s.engine.cancel(now, call)?;
        self.mark(server.index);
        Ok(())
    }

    /// The server's state: probing, handshaking, ready with its era, closed.
    pub fn state(&self, server: ServerId) -> Option<ServerState> {
        self.server(server).map(|s| s.engine.state())
    }

    /// Why the server is [`ServerState::Unauthorized`]: the error its probe or handshake
    /// failed with (an OAuth step, credentials refused, or a local OAuth configuration
    /// problem, `LocalError::OAuthSetup`). A restart or a new call tries again.
    pub fn authorization_error(&self, server: ServerId) -> Option<&CallError> {
        self.server(server)?.engine.authorization_error()
    }

    /// The era the server speaks, once known.
    pub fn era(&self, server: ServerId) -> Option<Era> {
        self.server(server).and_then(|s| s.engine.era())
    }

    /// The raw `server/discover` or `initialize` result.
    pub fn server_info(&self, server: ServerId) -> Option<&str> {
        self.server(server).and_then(|s| s.engine.server_info())
    }

    /// The server's era verdict to keep for the next run; see [`Engine::verdict`].
    pub fn verdict(
        &self,
        now: Instant,
        wall: std::time::SystemTime,
        server: ServerId,
    ) -> Option<SavedVerdict> {
        self.server(server)?.engine.verdict(now, wall)
    }

    /// Why the server's last connection or process ended, kept across restarts.
    pub fn last_transport_error(&self, server: ServerId) -> Option<&TransportError> {
        self.server(server)?.engine.last_transport_error()
    }

    /// Calls pending on the server (queued, in flight or backing off), the handshake included.
    pub fn pending(&self, server: ServerId) -> Option<usize> {
        self.server(server).map(|s| s.engine.pending())
    }

    /// The server engine's counters.
    pub fn stats(&self, server: ServerId) -> Option<Stats> {
        self.server(server).map(|s| s.engine.stats())
    }

    /// `true` when some server's engine holds an event for the host.
    pub fn has_queued_events(&self) -> bool {
        self.servers.next_with_events(0).is_some() || self.retired.has_events()
    }

    /// The earliest deadline the core owns: every engine's, and every watched catalog's
    /// re-listen backoff. `None`: nothing is due until input or a command.
    ///
    /// The deadlines [`handle_timeout`](Self::handle_timeout) filed, and those of the servers
    /// something happened to since: not a walk over every server.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let servers = &self.servers;
        let unfiled = servers.unfiled().map(|index| servers.get(index)?.next_deadline());
        unfiled.fold(servers.earliest(), crate::time::earlier)
    }

    /// Fires what is due at `now`: every engine's timers, then the cache's share (page
    /// answers taken, next pages and re-listens sent), the era verdicts kept, and the answer
    /// handlers asked. Looks at the servers something happened to since the last call and
    /// those whose deadline came, as the host's rounds do, so a core that keeps many servers
    /// pays for the ones that moved; spurious calls do nothing but that look.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut round = std::mem::take(&mut self.round);
        self.servers.take_round(now, &mut round, |_, s| s.settled());
        for &index in &round {
            let Some(s) = self.servers.get_mut_in_round(index) else { continue };
            if s.engine.is_due(now) {
                s.engine.handle_timeout(now);
            }
            // Output of a timer, or of input the shell gave an engine directly.
            if s.engine.has_output() && !self.unflushed.contains(&index) {
                self.unflushed.push(index);
            }
        }
        // Their deadlines are filed at the next call, unless something marks them first.
        self.servers.leave_unfiled(&round);
        self.round = round;
        self.after_input(now);
        self.pump_catalogs(now);
        self.servers.forget_eventless();
    }

    /// What follows input or timers on any server: the era verdicts kept and the answer
    /// handlers asked (the cache's share comes with [`pump_catalogs`](Self::pump_catalogs)).
    ///
    /// Both look only at the servers changed since the last time ([`servers::Pass::AfterInput`]),
    /// and neither takes them before the host installs a store or a handler.
    pub(crate) fn after_input(&mut self, now: Instant) {
        if !self.cache.has_store() && !self.answers.installed() {
            return;
        }
        let mut work = std::mem::take(&mut self.pass_work);
        self.servers.take_pass(servers::Pass::AfterInput, &mut work);
        self.keep_verdicts(now, &work);
        self.answer_with_handlers(now, &work);
        self.pass_work = work;
    }

    /// The next event from any server. Servers take turns, so a chatty one cannot starve the
    /// rest. Catalog changes and authorization asks come first.
    pub fn poll_event(&mut self, now: Instant) -> Option<(ServerId, HostEvent<'_>)> {
        if self.has_catalog_work() {
            self.pump_catalogs(now);
        }
        self.next_event()
    }

    /// [`poll_event`](Self::poll_event) after the cache's share was done (the shell wrote
    /// what it sent).
    pub(crate) fn next_event(&mut self) -> Option<(ServerId, HostEvent<'_>)> {
        if self.cache.has_changes() {
            return self.cache.next_change();
        }
        if self.has_asks() && self.take_ask() {
            return self.current_ask();
        }
        let Some(index) = self.servers.next_with_events(self.event_cursor) else {
            return self.next_retired_event();
        };
        self.event_cursor = index + 1;
        let s = self.servers.get_mut_without_passes(index)?;
        let id = ServerId { index, generation: s.generation };
        // Made in place and returned as it is: an event is 304 bytes, and moving it into a
        // pair and out again were two copies per event. Without a record sink it goes
        // straight to the caller; held to show the sink, it is copied once more.
        if !self.records.has_sink() {
            return s.engine.poll_event_tagged(id);
        }
        let out = s.engine.poll_event_tagged(id);
        if let Some((_, event)) = &out {
            self.records.event(index, event);
        }
        out
    }

    /// The terminal event of `call` on `server`, taken out of order (the blocking helpers'
    /// wait), its record handed to the sink.
    pub(crate) fn take_call_event(&mut self, server: ServerId, call: CallId) -> Option<Event<'_>> {
        let s = self.servers.get_mut(server.index).filter(|s| s.generation == server.generation)?;
        let event = s.engine.take_call_event(call);
        if let Some(e) = &event {
            self.records.event(server.index, e);
        }
        event
    }

    /// `true` when the core has nothing to do at `now` but wait for input: no call pending,
    /// no output unwritten, no event queued, no deadline due. Looks at the servers something
    /// happened to since the last tick, not at every server.
    pub fn is_idle(&self, now: Instant) -> bool {
        self.is_idle_with(now, |_, s| s.is_idle(now))
    }

    /// [`is_idle`](Self::is_idle) with the shell's own question for each server not filed,
    /// asked as its ticks file them (a host's counts its drivers' work beside the core's).
    pub(crate) fn is_idle_with(
        &self,
        now: Instant,
        is_idle: impl FnMut(usize, &ServerCore) -> bool,
    ) -> bool {
        !self.cache.has_changes()
            && self.unflushed.is_empty()
            && !self.retired.has_events()
            && self.servers.is_idle(now, is_idle)
    }
}

impl ServerCore {
    /// What a tick leaves this server as, for the core's own ticks.
    pub(crate) fn settled(&self) -> Settled {
        Settled { deadline: self.next_deadline(), busy: self.is_busy() }
    }

    /// Work that waits for no deadline: a call or handshake pending, output, an event, a
    /// transport to start.
    pub(crate) fn is_busy(&self) -> bool {
        let engine = &self.engine;
        engine.pending() > 0
            || engine.has_output()
            || engine.queued_events() > 0
            || engine.wants_transport()
    }

    /// [`settled`](Self::settled) neither busy nor due at `now`, without working out the
    /// deadline of a busy server.
    pub(crate) fn is_idle(&self, now: Instant) -> bool {
        !self.is_busy() && self.next_deadline().is_none_or(|d| d > now)
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let catalog = &self.catalog;
        let catalog =
            crate::time::earlier(catalog.relisten_deadline(&self.engine), catalog.eager_deadline());
        crate::time::earlier(self.engine.poll_timeout(), catalog)
    }
}
