//! The core's verbs on the host: each at the current time, and a command's output written at
//! once. The verbs themselves, and their documentation, are the core's ([`Client`]).

use std::time::{Instant, SystemTime};

use serde_json::value::RawValue;

use super::{Host, WALL_CLOCK_READ};
use crate::catalog::listing::CatalogKind;
use crate::client::catalog::Need;
#[cfg(doc)]
use crate::client::{AccessRequest, Client, Decision, DefaultPolicy};
use crate::client::{
    AnswerHandler, CapabilityStore, CatalogError, CatalogView, Commands, HostEvent, Policy,
    Principal, PrincipalError, PrincipalId, ServerId,
};
use crate::config::SavedVerdict;
#[cfg(doc)]
use crate::engine::Engine;
use crate::engine::{CallId, CallOptions, RecordSink, RootsBoundary, ServerRequestId};
use crate::error::{AnswerError, AuthorizeError, CancelError, RequestError};
use crate::proto::mcp::{Method, SubscriptionFilter};
use crate::time::later;

impl Host {
    /// Calls a tool that takes no arguments (sends `"arguments":{}`).
    pub fn call_tool_no_args(
        &mut self,
        server: ServerId,
        name: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.call_tool_json(server, name, "{}", opts)
    }

    /// Lists every tool (following pagination to the end).
    pub fn list_tools(
        &mut self,
        server: ServerId,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.list(server, Method::ToolsList, opts)
    }

    /// The next event from any server. Servers take turns, so a chatty one cannot starve the
    /// rest; see [`Client::poll_event`].
    ///
    /// The capability cache's own listings never show here; its `ToolsChanged` (and prompt and
    /// resource) events do.
    pub fn poll_event(&mut self) -> Option<(ServerId, HostEvent<'_>)> {
        // The clock is read only when the cache has work a tick may have left.
        if self.client.has_catalog_work() {
            let now = Instant::now();
            self.client.pump_catalogs(now);
            self.flush_unflushed(now);
        }
        self.client.next_event()
    }

    /// Whether [`poll_event`](Self::poll_event) may have an event to hand out now: one queued
    /// by a server, an authorization ask, a catalog change, or work of the capability cache
    /// that can make one. A loop that sleeps on the descriptor and
    /// [`poll_timeout`](Self::poll_timeout) (which counts deadlines, not events) looks here
    /// first: a command can end a call at once (a cancel, a call the policy refuses or holds
    /// for an ask) and queue its event with no I/O or deadline to wake the loop.
    #[must_use]
    pub fn has_events(&self) -> bool {
        self.client.has_queued_events()
            || self.client.has_asks()
            || self.client.cache.has_changes()
            || self.client.has_catalog_work()
    }

    /// Hands every queued event to `f` with [`Commands`] to start or cancel calls meanwhile;
    /// see [`Client::drain`]. The calls the closure starts are written as it returns from each event.
    pub fn drain(&mut self, f: impl FnMut(&mut Commands<'_>, ServerId, HostEvent<'_>)) {
        let now = Instant::now();
        let (transports, registry) = (&mut self.transports, self.poll.registry());
        let flush = |client: &mut crate::client::Client| {
            super::flush_unflushed(client, transports, registry, now);
        };
        self.client.drain_with(now, f, flush);
    }

    /// Installs a persistent store under the capability cache; see
    /// [`Client::set_capability_store`]. The system clock dates what it keeps: read now, and
    /// again every second by the host's rounds.
    pub fn set_capability_store(&mut self, store: impl CapabilityStore + 'static) {
        let now = Instant::now();
        self.client.set_capability_store(store, now, SystemTime::now());
        self.wall_due = Some(later(now, WALL_CLOCK_READ));
    }

    /// Gives the core a new reading of the wall clock when one is due (a store is installed
    /// and the last reading is [`WALL_CLOCK_READ`] old).
    #[inline]
    pub(super) fn read_wall_clock(&mut self, now: Instant) {
        if self.wall_due.is_some_and(|due| now >= due) {
            self.give_wall_clock(now);
        }
    }

    /// The reading itself: once a second at most, kept off every round's path.
    #[cold]
    #[inline(never)]
    fn give_wall_clock(&mut self, now: Instant) {
        self.client.handle_wall_clock(now, SystemTime::now());
        self.wall_due = Some(later(now, WALL_CLOCK_READ));
    }

    /// The server's era verdict to keep for the next run ([`Engine::verdict`]): give it back
    /// in [`Config::saved_discover`] and the first call after the restart goes out without a
    /// probe. `None` unless the server is ready in the modern era with a verdict still fresh.
    ///
    /// [`Engine::verdict`]: crate::Engine::verdict
    /// [`Config::saved_discover`]: crate::Config::saved_discover
    pub fn verdict(&self, server: ServerId) -> Option<SavedVerdict> {
        self.client.verdict(Instant::now(), SystemTime::now(), server)
    }

    /// Answers a server request (`Event::ServerRequest`) of `server`; see [`Engine::answer`]. An
    /// answer to a roots request is checked against the file system
    /// ([`Host::set_roots_boundary`](crate::Host::set_roots_boundary)). See [`Client::answer`]. At
    /// the current time; what it sends is written at once.
    pub fn answer(
        &mut self,
        server: ServerId,
        request: ServerRequestId,
        result: &RawValue,
    ) -> Result<(), AnswerError> {
        self.at_now(|core, now| core.answer(now, server, request, result))
    }

    /// Refuses a server request (`Event::ServerRequest`) of `server`; see [`Engine::reject`]. See
    /// [`Client::reject`]. At the current time; what it sends is written at once.
    pub fn reject(
        &mut self,
        server: ServerId,
        request: ServerRequestId,
    ) -> Result<(), AnswerError> {
        self.at_now(|core, now| core.reject(now, server, request))
    }

    /// Calls a tool. `arguments` must be a JSON object. See [`Client::call_tool`]. At the current
    /// time; what it sends is written at once.
    pub fn call_tool(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &RawValue,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.at_now(|core, now| core.call_tool(now, server, name, arguments, opts))
    }

    /// Calls a tool with its arguments as JSON text (one object); see [`Engine::call_tool_json`].
    /// See [`Client::call_tool_json`]. At the current time; what it sends is written at once.
    pub fn call_tool_json(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.at_now(|core, now| core.call_tool_json(now, server, name, arguments, opts))
    }

    /// Reattaches to a task on `server` by its id; see [`Engine::resume_task`]. See
    /// [`Client::resume_task`]. At the current time; what it sends is written at once.
    pub fn resume_task(
        &mut self,
        server: ServerId,
        task_id: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.at_now(|core, now| core.resume_task(now, server, task_id, opts))
    }

    /// Runs a paginated listing to the end; see [`Engine::list`]. See [`Client::list`]. At the
    /// current time; what it sends is written at once.
    pub fn list(
        &mut self,
        server: ServerId,
        method: Method,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.at_now(|core, now| core.list(now, server, method, opts))
    }

    /// Reads a resource. See [`Client::read_resource`]. At the current time; what it sends is
    /// written at once.
    pub fn read_resource(
        &mut self,
        server: ServerId,
        uri: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.at_now(|core, now| core.read_resource(now, server, uri, opts))
    }

    /// Gets a prompt. See [`Client::get_prompt`]. At the current time; what it sends is written at
    /// once.
    pub fn get_prompt(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: Option<&RawValue>,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.at_now(|core, now| core.get_prompt(now, server, name, arguments, opts))
    }

    /// Sends a request by method name; see [`Engine::request_raw`]. See [`Client::request`]. At the
    /// current time; what it sends is written at once.
    pub fn request(
        &mut self,
        server: ServerId,
        method: &str,
        params: Option<&RawValue>,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.at_now(|core, now| core.request(now, server, method, params, opts))
    }

    /// Asks for completions of a prompt or resource-template argument. See [`Client::complete`]. At
    /// the current time; what it sends is written at once.
    pub fn complete(
        &mut self,
        server: ServerId,
        reference: &RawValue,
        argument: (&str, &str),
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.at_now(|core, now| core.complete(now, server, reference, argument, opts))
    }

    /// Opens a `subscriptions/listen` subscription; see [`Engine::listen`]. See [`Client::listen`].
    /// At the current time; what it sends is written at once.
    pub fn listen(
        &mut self,
        server: ServerId,
        filter: &SubscriptionFilter,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.at_now(|core, now| core.listen(now, server, filter, opts))
    }

    /// Cancels a call: its wait ends at once, and the server is told. See [`Client::cancel`]. At
    /// the current time; what it sends is written at once.
    pub fn cancel(&mut self, server: ServerId, call: CallId) -> Result<(), CancelError> {
        self.at_now(|core, now| core.cancel(now, server, call))
    }

    /// Lets a call held by [`Decision::Ask`] go: it joins the server's queue now (its deadline has
    /// kept running). `Err(Overloaded)` when the queue is full: the call stays held. `Err(NotHeld)`
    /// when it already ended (deadline, cancel) or was answered. See [`Client::allow_call`]. At the
    /// current time; what it sends is written at once.
    pub fn allow_call(&mut self, server: ServerId, call: CallId) -> Result<(), AuthorizeError> {
        self.at_now(|core, now| core.allow_call(now, server, call))
    }

    /// Refuses a call held by [`Decision::Ask`]: it ends unsent with
    /// [`LocalError::AuthorizationDenied`](crate::LocalError::AuthorizationDenied) carrying
    /// `reason`. See [`Client::deny_call`]. At the current time; what it sends is written at once.
    pub fn deny_call(
        &mut self,
        server: ServerId,
        call: CallId,
        reason: &str,
    ) -> Result<(), AuthorizeError> {
        self.at_now(|core, now| core.deny_call(now, server, call, reason))
    }

    /// Sets the roots offered to `server` (a `ListRootsResult`); see [`Engine::set_roots`]. With a
    /// boundary set, every root must exist and resolve (symlinks followed) inside it. See
    /// [`Client::set_roots`]. At the current time; what it sends is written at once.
    pub fn set_roots(&mut self, server: ServerId, roots: &RawValue) -> Result<(), AnswerError> {
        self.at_now(|core, now| core.set_roots(now, server, roots))
    }

    /// Keeps the server's catalogs current: on a modern server, opens a `subscriptions/listen`
    /// stream for tool, prompt and resource list changes (once ready), and opens it again with
    /// backoff (200 ms doubling to 30 s) after it ends (a graceful end too: a server sends it
    /// when it shuts down), marking every catalog stale since changes may have been missed. The
    /// host cancelling the stream (the call of its [`Event::Subscribed`](crate::Event::Subscribed)
    /// acknowledgement), or a server without the method, stops it. Legacy servers
    /// send their changes unasked: for them this does nothing more. The re-listen
    /// deadline is part of [`poll_timeout`](Self::poll_timeout). See [`Client::watch_catalogs`]. At
    /// the current time; what it sends is written at once.
    pub fn watch_catalogs(&mut self, server: ServerId) -> Result<(), RequestError> {
        self.at_now(|core, now| core.watch_catalogs(now, server))
    }

    /// [`Client::tool_catalog`] now; a refresh it starts is written at once. See
    /// [`tool_catalog_blocking`](Self::tool_catalog_blocking). The cache's view of the
    /// catalog; [`list_tools`](Self::list_tools) is one uncached `tools/list` listing (every
    /// page), passed through.
    pub fn tool_catalog(
        &mut self,
        server: ServerId,
    ) -> Result<Option<CatalogView<'_>>, CatalogError> {
        let now = Instant::now();
        self.note_granted_scope(server);
        self.client.pump_catalogs(now);
        let need = self.client.need(server, CatalogKind::Tools, now);
        self.flush_unflushed(now);
        match need? {
            Need::Waiting => Ok(None),
            how => self.client.view(server, CatalogKind::Tools, now, how).map(Some),
        }
    }

    /// The old name of [`tool_catalog`](Self::tool_catalog), too close to `list_tools`.
    #[deprecated(note = "renamed tool_catalog")]
    pub fn tools(&mut self, server: ServerId) -> Result<Option<CatalogView<'_>>, CatalogError> {
        self.tool_catalog(server)
    }

    /// One tool's definition (canonical JSON) from the cache (or the capability store, when memory
    /// holds nothing of the catalog), when cached and servable; it never lists. A fresh hit
    /// allocates nothing. See [`Client::tool`]. At the current time.
    pub fn tool(&mut self, server: ServerId, name: &str) -> Option<&str> {
        self.client.tool(Instant::now(), server, name)
    }

    /// Answers server requests of every server (elicitation, sampling, roots) with `handler`, from
    /// the host's loop: `poll`, the blocking helpers (`call_tool_blocking`, `wait`, ...) and an
    /// embedded host's `handle_event` / `handle_timeout` alike. Each request is offered once, after
    /// the server's own handler ([`set_server_answer_handler`](Self::set_server_answer_handler)) passed. A request no handler
    /// answers stays an `Event::ServerRequest`; in a blocking helper, which cannot wait for the
    /// host, it ends the call at once with `LocalError::Unanswered`. The kinds must still be
    /// declared (`Config::answers`). See [`Client::set_answer_handler`].
    pub fn set_answer_handler(&mut self, handler: Box<dyn AnswerHandler>) {
        self.client.set_answer_handler(handler)
    }

    /// [`set_answer_handler`](Self::set_answer_handler) for one server (or lane), asked before the
    /// host's. Returns `false` (and keeps nothing) when there is no such server. See
    /// [`Client::set_server_answer_handler`].
    pub fn set_server_answer_handler(
        &mut self,
        server: ServerId,
        handler: Box<dyn AnswerHandler>,
    ) -> bool {
        self.client.set_server_answer_handler(server, handler)
    }

    /// Installs the host-wide authorization policy, asked about calls on every server that has no
    /// policy of its own (nor its principal). Replaces the last one. See [`Client::set_policy`].
    pub fn set_policy(&mut self, policy: impl Policy + 'static) {
        self.client.set_policy(policy)
    }

    /// Installs the policy of one server, asked instead of the host's about calls on it and on its
    /// principals' lanes (unless the principal has its own). See [`Client::set_server_policy`].
    pub fn set_server_policy(&mut self, server: ServerId, policy: impl Policy + 'static) {
        self.client.set_server_policy(server, policy)
    }

    /// Installs the policy of one principal, asked before any other about calls on its lanes. See
    /// [`Client::set_principal_policy`].
    pub fn set_principal_policy(&mut self, principal: PrincipalId, policy: impl Policy + 'static) {
        self.client.set_principal_policy(principal, policy)
    }

    /// Removes every installed policy (the configuration's `disabledTools` still apply). See
    /// [`Client::clear_policies`].
    pub fn clear_policies(&mut self) {
        self.client.clear_policies()
    }

    /// Disables tools of a server: calls to them are refused locally (never sent), and they are
    /// left out of its catalog views and tool search. What `disabledTools` in a configuration file
    /// does. See [`Client::disable_tools`].
    pub fn disable_tools<S: Into<String>>(
        &mut self,
        server: ServerId,
        tools: impl IntoIterator<Item = S>,
    ) {
        self.client.disable_tools(server, tools)
    }

    /// Marks tools of a server as always allowed: [`AccessRequest::always_allowed`] is set for
    /// them, and the [`DefaultPolicy`] never asks about them. What `alwaysAllow` / `autoApprove` in
    /// a configuration file do. See [`Client::always_allow_tools`].
    pub fn always_allow_tools<S: Into<String>>(
        &mut self,
        server: ServerId,
        tools: impl IntoIterator<Item = S>,
    ) {
        self.client.always_allow_tools(server, tools)
    }

    /// Installs the sink that every call record goes to (replacing any earlier one, which is
    /// returned). Records reach it as calls' terminal events leave the engines: through
    /// [`poll_event`](Self::poll_event), the blocking helpers and the capability cache; and for
    /// each listing the cache answers itself. See [`CallRecord`](crate::CallRecord). See
    /// [`Client::set_record_sink`].
    pub fn set_record_sink(&mut self, sink: Box<dyn RecordSink>) -> Option<Box<dyn RecordSink>> {
        self.client.set_record_sink(sink)
    }

    /// Removes the record sink. See [`Client::take_record_sink`].
    pub fn take_record_sink(&mut self) -> Option<Box<dyn RecordSink>> {
        self.client.take_record_sink()
    }

    /// Names a server in its records (the default is its URL's `host:port`, or its program's file
    /// name). A name from a configuration file goes here. See [`Client::set_server_name`].
    pub fn set_server_name(&mut self, server: ServerId, name: &str) {
        self.client.set_server_name(server, name)
    }

    /// Bounds the roots offered to `server`; see [`Engine::set_roots_boundary`]. Symlinks are
    /// resolved when roots are set or answered. See [`Client::set_roots_boundary`].
    pub fn set_roots_boundary(
        &mut self,
        server: ServerId,
        boundary: RootsBoundary,
    ) -> Result<(), AnswerError> {
        self.client.set_roots_boundary(server, boundary)
    }

    /// Registers a principal; calls are made for it on its lanes ([`Host::lane`]). See
    /// [`Client::add_principal`].
    pub fn add_principal(&mut self, principal: Principal) -> Result<PrincipalId, PrincipalError> {
        self.client.add_principal(principal)
    }
}
