//! The blocking helpers: poll until one call, one server or one catalog is done, leaving every
//! other call's events queued. For scripts and tests; a loop uses [`Host::poll`] and
//! `poll_event`.

use std::time::{Duration, Instant};

use serde_json::value::RawValue;

use super::{BlockingError, Host, OwnedResult, Wake};
use crate::catalog::listing::CatalogKind;
use crate::client::catalog::Need;
use crate::client::{CatalogError, CatalogView, ServerId};
use crate::engine::{CallId, CallOptions, Event, ServerState};
use crate::error::{CallError, LocalError};

impl Host {
    /// Polls until `call` ends, leaving every other call's events queued (they do not cut its
    /// waits short: only I/O and deadlines do; the call's own progress and task events go with
    /// its end). For scripts and tests. Server requests go to the answer handlers
    /// ([`set_answer_handler`](Self::set_answer_handler)); one they do not answer ends the
    /// call at once with `LocalError::Unanswered`, since nobody else can
    /// answer while this blocks. An embedded host refuses (`Unsupported`) before it looks.
    pub fn wait(&mut self, server: ServerId, call: CallId) -> Result<OwnedResult, BlockingError> {
        self.poll.can_wait().map_err(BlockingError::Io)?;
        loop {
            if self.client.server(server).is_none() {
                return Err(BlockingError::UnknownServer);
            }
            match self.client.take_call_event(server, call) {
                Some(Event::CallDone { result, .. }) => {
                    return Ok(OwnedResult {
                        json: result.json().to_owned(),
                        is_error: result.is_error(),
                        result_type: result.result_type(),
                    })
                }
                Some(Event::CallFailed { error, .. }) => return Err(BlockingError::Call(error)),
                Some(_) | None => {}
            }
            if !self.client.engine(server).is_some_and(|e| e.is_pending(call)) {
                // Neither pending nor ended here: no poll would ever end it.
                return Err(BlockingError::NotPending);
            }
            // A server request no handler answers: nobody can while this blocks.
            let now = Instant::now();
            if self.client.end_unanswerable(now, server, call) {
                self.flush_unflushed(now);
                continue;
            }
            self.flush_unflushed(now);
            self.poll_inner(Some(Duration::from_millis(100)), Wake::OnIo)
                .map_err(BlockingError::Io)?;
        }
    }

    /// Polls until the server is ready (or closed) and returns its state; when `timeout`
    /// passes first, fails with [`LocalError::DeadlineExceeded`]. A server that became
    /// degraded (its process kept dying) ends the wait at once with the last transport error
    /// (for stdio: the exit status and stderr tail); one refused for want of authorization
    /// ([`ServerState::Unauthorized`]) with its authorization error.
    pub fn wait_ready(
        &mut self,
        server: ServerId,
        timeout: Duration,
    ) -> Result<ServerState, BlockingError> {
        let deadline = crate::time::later(Instant::now(), timeout);
        loop {
            let engine = self.client.engine(server).ok_or(BlockingError::UnknownServer)?;
            let state = engine.state();
            if matches!(state, ServerState::Ready(..) | ServerState::Closed) {
                return Ok(state);
            }
            if let Some(e) = engine.authorization_error() {
                // Refused for want of authorization: nothing changes until the host acts.
                return Err(BlockingError::Call(e.clone()));
            }
            if engine.is_degraded() {
                // Restarts are suspended: no process will come up within any sane wait. The
                // last failure says why (for a process: its exit status and stderr tail).
                let e = engine
                    .last_transport_error()
                    .cloned()
                    .map_or(CallError::Local(LocalError::Degraded(None)), CallError::Transport);
                return Err(BlockingError::Call(e));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(BlockingError::Call(CallError::Local(LocalError::DeadlineExceeded)));
            }
            self.poll_inner(Some(left), Wake::OnIo).map_err(BlockingError::Io)?;
        }
    }

    /// Calls a tool and waits for its result.
    pub fn call_tool_blocking(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &RawValue,
        opts: &CallOptions,
    ) -> Result<OwnedResult, BlockingError> {
        // Before the call: sent and then refused, it ran on for nobody (a write retried by a
        // host that took the error for "nothing happened" ran twice).
        self.poll.can_wait().map_err(BlockingError::Io)?;
        let call = self.call_tool(server, name, arguments, opts)?;
        self.wait(server, call)
    }

    /// [`call_tool_json`](Self::call_tool_json), waiting for the result.
    pub fn call_tool_json_blocking(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &str,
        opts: &CallOptions,
    ) -> Result<OwnedResult, BlockingError> {
        self.poll.can_wait().map_err(BlockingError::Io)?;
        let call = self.call_tool_json(server, name, arguments, opts)?;
        self.wait(server, call)
    }

    /// The tool catalog, from the cache when fresh, else listed (`tools/list`, every page)
    /// and cached under the server's hints. Concurrent needs share one listing. After a failed
    /// refresh the old catalog is served, flagged by [`CatalogView::stale_for`], for at most
    /// `CacheConfig::max_stale`. Waits for the server to be ready, at most `timeout` in all.
    pub fn tool_catalog_blocking(
        &mut self,
        server: ServerId,
        timeout: Duration,
    ) -> Result<CatalogView<'_>, CatalogError> {
        self.catalog_blocking(server, CatalogKind::Tools, timeout)
    }

    /// As [`tool_catalog_blocking`](Self::tool_catalog_blocking), for prompts.
    pub fn prompt_catalog_blocking(
        &mut self,
        server: ServerId,
        timeout: Duration,
    ) -> Result<CatalogView<'_>, CatalogError> {
        self.catalog_blocking(server, CatalogKind::Prompts, timeout)
    }

    /// As [`tool_catalog_blocking`](Self::tool_catalog_blocking), for resources.
    pub fn resource_catalog_blocking(
        &mut self,
        server: ServerId,
        timeout: Duration,
    ) -> Result<CatalogView<'_>, CatalogError> {
        self.catalog_blocking(server, CatalogKind::Resources, timeout)
    }

    /// The old name of [`tool_catalog_blocking`](Self::tool_catalog_blocking).
    #[deprecated(note = "renamed tool_catalog_blocking")]
    pub fn tools_blocking(
        &mut self,
        server: ServerId,
        timeout: Duration,
    ) -> Result<CatalogView<'_>, CatalogError> {
        self.tool_catalog_blocking(server, timeout)
    }

    /// The old name of [`prompt_catalog_blocking`](Self::prompt_catalog_blocking).
    #[deprecated(note = "renamed prompt_catalog_blocking")]
    pub fn prompts_blocking(
        &mut self,
        server: ServerId,
        timeout: Duration,
    ) -> Result<CatalogView<'_>, CatalogError> {
        self.prompt_catalog_blocking(server, timeout)
    }

    /// The old name of [`resource_catalog_blocking`](Self::resource_catalog_blocking).
    #[deprecated(note = "renamed resource_catalog_blocking")]
    pub fn resources_blocking(
        &mut self,
        server: ServerId,
        timeout: Duration,
    ) -> Result<CatalogView<'_>, CatalogError> {
        self.resource_catalog_blocking(server, timeout)
    }

    fn catalog_blocking(
        &mut self,
        server: ServerId,
        kind: CatalogKind,
        timeout: Duration,
    ) -> Result<CatalogView<'_>, CatalogError> {
        self.poll.can_wait().map_err(CatalogError::Io)?;
        let deadline = crate::time::later(Instant::now(), timeout);
        let known = self.client.has_cache_key(server);
        match self.wait_ready(server, timeout) {
            Ok(ServerState::Ready(..)) => {}
            Err(BlockingError::UnknownServer) => return Err(CatalogError::UnknownServer),
            Err(BlockingError::Io(e)) => return Err(CatalogError::Io(e)),
            // A server known before may be down: its catalog can still be served stale.
            _ if known => {}
            // `wait_ready` waits for no call; its own deadline is a server not ready in time
            // (no listing was sent: not the listing's failure).
            Ok(_)
            | Err(BlockingError::NotPending)
            | Err(BlockingError::Call(CallError::Local(LocalError::DeadlineExceeded))) => {
                return Err(CatalogError::NotReady)
            }
            Err(BlockingError::Call(e)) => return Err(CatalogError::Listing(e)),
            Err(BlockingError::Request(e)) => return Err(CatalogError::Request(e)),
        }
        let how = loop {
            let now = Instant::now();
            self.note_granted_scope(server);
            self.client.pump_catalogs(now);
            let need = self.client.need(server, kind, now)?;
            self.flush_unflushed(now);
            match need {
                Need::Waiting => {}
                how => break how,
            }
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                return Err(CatalogError::Timeout);
            }
            self.poll_inner(Some(left), Wake::OnIo).map_err(CatalogError::Io)?;
        };
        self.client.view(server, kind, Instant::now(), how)
    }
}
