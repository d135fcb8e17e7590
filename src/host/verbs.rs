//! The core's verbs on the host: each at the current time, and a command's output written at
//! once. The verbs themselves, and their documentation, are the core's ([`Client`]).

use std::time::{Instant, SystemTime};

use serde_json::value::RawValue;

use super::Host;
use crate::catalog::listing::CatalogKind;
use crate::client::catalog::Need;
#[cfg(doc)]
use crate::client::Client;
use crate::client::{
    AnswerHandler, CacheStats, CapabilityStore, CatalogError, CatalogView, Commands, Policy,
    Principal, PrincipalError, PrincipalId, ServerId,
};
use crate::config::SavedVerdict;
use crate::engine::{
    CallId, CallOptions, Event, RecordSink, RootsBoundary, ServerRequestId, ServerState, TaskStatus,
};
use crate::error::{
    AnswerError, AuthorizeError, CallError, CancelError, RequestError, TransportError,
};
use crate::proto::mcp::{Method, SubscriptionFilter};
use crate::proto::version::Era;

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
    pub fn poll_event(&mut self) -> Option<(ServerId, Event<'_>)> {
        // The clock is read only when the cache has work a tick may have left.
        if self.client.catalogs_armed() {
            let now = Instant::now();
            self.client.pump_catalogs(now);
            self.flush_unflushed(now);
        }
        self.client.next_event()
    }

    /// Hands every queued event to `f` with [`Commands`] to start or cancel calls meanwhile;
    /// see [`Client::drain`]. The calls the closure starts are written when it is done.
    pub fn drain(&mut self, f: impl FnMut(&mut Commands<'_>, ServerId, Event<'_>)) {
        let now = Instant::now();
        self.client.drain(now, f);
        self.flush_unflushed(now);
    }

    /// Installs a persistent store under the capability cache; see
    /// [`Client::set_capability_store`]. The system clock dates what it keeps.
    pub fn set_capability_store(&mut self, store: impl CapabilityStore + 'static) {
        self.client.set_capability_store(store, SystemTime::now);
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

    /// [`Client::answer`] now, its output written at once.
    pub fn answer(
        &mut self,
        server: ServerId,
        request: ServerRequestId,
        result: &RawValue,
    ) -> Result<(), AnswerError> {
        let now = Instant::now();
        let out = self.client.answer(now, server, request, result);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::reject`] now, its output written at once.
    pub fn reject(
        &mut self,
        server: ServerId,
        request: ServerRequestId,
    ) -> Result<(), AnswerError> {
        let now = Instant::now();
        let out = self.client.reject(now, server, request);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::call_tool`] now, its output written at once.
    pub fn call_tool(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &RawValue,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let now = Instant::now();
        let out = self.client.call_tool(now, server, name, arguments, opts);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::call_tool_json`] now, its output written at once.
    pub fn call_tool_json(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let now = Instant::now();
        let out = self.client.call_tool_json(now, server, name, arguments, opts);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::resume_task`] now, its output written at once.
    pub fn resume_task(
        &mut self,
        server: ServerId,
        task_id: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let now = Instant::now();
        let out = self.client.resume_task(now, server, task_id, opts);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::list`] now, its output written at once.
    pub fn list(
        &mut self,
        server: ServerId,
        method: Method,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let now = Instant::now();
        let out = self.client.list(now, server, method, opts);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::read_resource`] now, its output written at once.
    pub fn read_resource(
        &mut self,
        server: ServerId,
        uri: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let now = Instant::now();
        let out = self.client.read_resource(now, server, uri, opts);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::get_prompt`] now, its output written at once.
    pub fn get_prompt(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: Option<&RawValue>,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let now = Instant::now();
        let out = self.client.get_prompt(now, server, name, arguments, opts);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::request`] now, its output written at once.
    pub fn request(
        &mut self,
        server: ServerId,
        method: &str,
        params: Option<&RawValue>,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let now = Instant::now();
        let out = self.client.request(now, server, method, params, opts);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::complete`] now, its output written at once.
    pub fn complete(
        &mut self,
        server: ServerId,
        reference: &RawValue,
        argument: (&str, &str),
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let now = Instant::now();
        let out = self.client.complete(now, server, reference, argument, opts);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::listen`] now, its output written at once.
    pub fn listen(
        &mut self,
        server: ServerId,
        filter: &SubscriptionFilter,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        let now = Instant::now();
        let out = self.client.listen(now, server, filter, opts);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::cancel`] now, its output written at once.
    pub fn cancel(&mut self, server: ServerId, call: CallId) -> Result<(), CancelError> {
        let now = Instant::now();
        let out = self.client.cancel(now, server, call);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::allow_call`] now, its output written at once.
    pub fn allow_call(&mut self, server: ServerId, call: CallId) -> Result<(), AuthorizeError> {
        let now = Instant::now();
        let out = self.client.allow_call(now, server, call);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::deny_call`] now, its output written at once.
    pub fn deny_call(
        &mut self,
        server: ServerId,
        call: CallId,
        reason: &str,
    ) -> Result<(), AuthorizeError> {
        let now = Instant::now();
        let out = self.client.deny_call(now, server, call, reason);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::set_roots`] now, its output written at once.
    pub fn set_roots(&mut self, server: ServerId, roots: &RawValue) -> Result<(), AnswerError> {
        let now = Instant::now();
        let out = self.client.set_roots(now, server, roots);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::watch_catalogs`] now, its output written at once.
    pub fn watch_catalogs(&mut self, server: ServerId) -> Result<(), RequestError> {
        let now = Instant::now();
        let out = self.client.watch_catalogs(now, server);
        self.flush_unflushed(now);
        out
    }

    /// [`Client::tool_catalog`] now; a refresh it starts is written at once. See
    /// [`tool_catalog_blocking`](Self::tool_catalog_blocking). The cache's view of the
    /// catalog; [`list_tools`](Self::list_tools) is one `tools/list` request, passed through.
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

    /// [`Client::tool`] now.
    pub fn tool(&mut self, server: ServerId, name: &str) -> Option<&str> {
        self.client.tool(Instant::now(), server, name)
    }

    /// [`Client::server_tasks`].
    pub fn server_tasks(&self, server: ServerId) -> Vec<(CallId, String, Option<TaskStatus>)> {
        self.client.server_tasks(server)
    }

    /// [`Client::state`].
    pub fn state(&self, server: ServerId) -> Option<ServerState> {
        self.client.state(server)
    }

    /// [`Client::authorization_error`].
    pub fn authorization_error(&self, server: ServerId) -> Option<&CallError> {
        self.client.authorization_error(server)
    }

    /// [`Client::era`].
    pub fn era(&self, server: ServerId) -> Option<Era> {
        self.client.era(server)
    }

    /// [`Client::server_info`].
    pub fn server_info(&self, server: ServerId) -> Option<&str> {
        self.client.server_info(server)
    }

    /// [`Client::last_transport_error`].
    pub fn last_transport_error(&self, server: ServerId) -> Option<&TransportError> {
        self.client.last_transport_error(server)
    }

    /// [`Client::pending`].
    pub fn pending(&self, server: ServerId) -> Option<usize> {
        self.client.pending(server)
    }

    /// [`Client::capabilities`].
    pub fn capabilities(&self, server: ServerId) -> Option<&str> {
        self.client.capabilities(server)
    }

    /// [`Client::search_tools`].
    pub fn search_tools(&self, server: ServerId, query: &str, k: usize) -> Vec<(&str, f64)> {
        self.client.search_tools(server, query, k)
    }

    /// [`Client::cache_stats`].
    pub fn cache_stats(&self) -> CacheStats {
        self.client.cache_stats()
    }

    /// [`Client::server_name`].
    pub fn server_name(&self, server: ServerId) -> Option<&str> {
        self.client.server_name(server)
    }

    /// [`Client::principal_of`].
    pub fn principal_of(&self, lane: ServerId) -> Option<PrincipalId> {
        self.client.principal_of(lane)
    }

    /// [`Client::set_answer_handler`].
    pub fn set_answer_handler(&mut self, handler: Box<dyn AnswerHandler>) {
        self.client.set_answer_handler(handler)
    }

    /// [`Client::set_server_answer_handler`].
    pub fn set_server_answer_handler(
        &mut self,
        server: ServerId,
        handler: Box<dyn AnswerHandler>,
    ) -> bool {
        self.client.set_server_answer_handler(server, handler)
    }

    /// [`Client::set_policy`].
    pub fn set_policy(&mut self, policy: impl Policy + 'static) {
        self.client.set_policy(policy)
    }

    /// [`Client::set_server_policy`].
    pub fn set_server_policy(&mut self, server: ServerId, policy: impl Policy + 'static) {
        self.client.set_server_policy(server, policy)
    }

    /// [`Client::set_principal_policy`].
    pub fn set_principal_policy(&mut self, principal: PrincipalId, policy: impl Policy + 'static) {
        self.client.set_principal_policy(principal, policy)
    }

    /// [`Client::clear_policies`].
    pub fn clear_policies(&mut self) {
        self.client.clear_policies()
    }

    /// [`Client::disable_tools`].
    pub fn disable_tools<S: Into<String>>(
        &mut self,
        server: ServerId,
        tools: impl IntoIterator<Item = S>,
    ) {
        self.client.disable_tools(server, tools)
    }

    /// [`Client::always_allow_tools`].
    pub fn always_allow_tools<S: Into<String>>(
        &mut self,
        server: ServerId,
        tools: impl IntoIterator<Item = S>,
    ) {
        self.client.always_allow_tools(server, tools)
    }

    /// [`Client::set_record_sink`].
    pub fn set_record_sink(&mut self, sink: Box<dyn RecordSink>) -> Option<Box<dyn RecordSink>> {
        self.client.set_record_sink(sink)
    }

    /// [`Client::take_record_sink`].
    pub fn take_record_sink(&mut self) -> Option<Box<dyn RecordSink>> {
        self.client.take_record_sink()
    }

    /// [`Client::set_server_name`].
    pub fn set_server_name(&mut self, server: ServerId, name: &str) {
        self.client.set_server_name(server, name)
    }

    /// [`Client::set_roots_boundary`].
    pub fn set_roots_boundary(
        &mut self,
        server: ServerId,
        boundary: RootsBoundary,
    ) -> Result<(), AnswerError> {
        self.client.set_roots_boundary(server, boundary)
    }

    /// [`Client::add_principal`].
    pub fn add_principal(&mut self, principal: Principal) -> Result<PrincipalId, PrincipalError> {
        self.client.add_principal(principal)
    }
}
