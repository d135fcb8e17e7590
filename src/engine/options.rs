//! What a host may say about one call: its deadline, tracing, idempotency, tenant and hold.

use std::time::Duration;

use super::retry::Idempotency;
use super::tasks::TaskMode;
use crate::proto::meta::TraceContext;

/// Options for one call.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// The call's deadline, from now (default: `Config::default_timeout`).
    pub timeout: Option<Duration>,
    /// Ask the server for progress notifications (the call's id is the progress token).
    pub progress: bool,
    /// W3C trace context to carry in `_meta`.
    pub trace: Option<TraceContext>,
    /// How safe the call is to send twice, overriding the tool's annotations.
    pub idempotency: Option<Idempotency>,
    /// An idempotency key, placed in the arguments under `Config::idempotency_key_field` (when
    /// not already there); it makes a write safe to retry.
    pub idempotency_key: Option<String>,
    /// The tenant whose circuit breakers the call answers to (0 by default).
    pub tenant: u32,
    /// The run or task the call belongs to, copied into its [`CallRecord`]: a host task sets
    /// its audit id here on every call made under it.
    ///
    /// [`CallRecord`]: super::record::CallRecord
    pub run_id: Option<u64>,
    /// Start the call held: nothing is sent, and it counts against neither the in-flight
    /// limit nor the queue (nor asks its circuit breaker), until
    /// [`Engine::release`] lets it go or [`Engine::refuse`] ends it with
    /// [`LocalError::AuthorizationDenied`]. Its deadline runs meanwhile, and
    /// [`Engine::cancel`] ends it as any other call. It does take a slot of the pending table
    /// (`Config::max_pending`). A [`Host`](crate::Host) sets it for a call its authorization
    /// policy asks about.
    ///
    /// [`Engine::release`]: crate::Engine::release
    /// [`Engine::refuse`]: crate::Engine::refuse
    /// [`Engine::cancel`]: crate::Engine::cancel
    /// [`LocalError::AuthorizationDenied`]: crate::error::LocalError::AuthorizationDenied
    pub hold: bool,
    /// Whether a `tools/call` may run as a task on the server (MCP tasks): it is then polled
    /// to its end within the call's deadline, reported by `TaskCreated` and `TaskStatus`
    /// events, and ends with the usual `CallDone` or `CallFailed`. Other methods ignore it.
    pub task: TaskMode,
}

impl CallOptions {
    /// Options with a deadline.
    pub fn timeout(timeout: Duration) -> Self {
        Self { timeout: Some(timeout), ..Self::default() }
    }
}
