//! One server's driver, whichever its transport: what the host's shell calls on a server's
//! readiness, timers, output and closing, dispatched to the stdio or the HTTP driver.

use std::ops::Range;
use std::time::{Duration, Instant};

use mio::{Registry, Token};

#[cfg(feature = "http")]
pub(crate) use crate::driver::http::close::SessionEnd;
#[cfg(feature = "http")]
use crate::driver::http::HttpDriver;
use crate::driver::reap::Reaper;
use crate::driver::stdio::StdioDriver;
use crate::engine::Engine;

/// Without the `http` feature there is no session to end.
#[cfg(not(feature = "http"))]
#[derive(Debug)]
pub(crate) enum SessionEnd {}

/// The driver of one server.
#[derive(Debug)]
pub(crate) enum Transport {
    /// A child process over its pipes.
    Stdio(StdioDriver),
    /// Streamable HTTP.
    #[cfg(feature = "http")]
    Http(HttpDriver),
}

impl Transport {
    /// `read_closed`: the event said the peer closed its end (or, without an event to ask,
    /// `true`), so a driver reads on to `WouldBlock` instead of stopping at a short read.
    pub(crate) fn handle_readiness(
        &mut self,
        registry: &Registry,
        token: Token,
        read_closed: bool,
        engine: &mut Engine,
        now: Instant,
    ) {
        match self {
            Self::Stdio(d) => {
                // The driver tells the engine what fails (an exit, a restart that could not
                // start): nothing is left to report here.
                if let Err(e) = d.handle_token(registry, token, read_closed, engine, now) {
                    log::debug!("stdio readiness: {e}");
                }
            }
            #[cfg(feature = "http")]
            Self::Http(d) => d.handle_token(registry, token, read_closed, engine, now),
        }
    }

    pub(crate) fn flush(&mut self, registry: &Registry, engine: &mut Engine, now: Instant) {
        match self {
            Self::Stdio(d) => {
                if let Err(e) = d.flush(registry, engine, now) {
                    log::debug!("flush failed: {e}");
                }
            }
            #[cfg(feature = "http")]
            Self::Http(d) => d.flush(registry, engine, now),
        }
    }

    /// The scope granted with the server's current OAuth token: it, not the scopes the host
    /// declared, is what the server answers for, so the capability cache keys on it.
    pub(crate) fn granted_scope(&self) -> Option<&str> {
        match self {
            Self::Stdio(_) => None,
            #[cfg(feature = "http")]
            Self::Http(d) => d.granted_scope(),
        }
    }

    /// `true` for a transport whose credentials come with a granted scope (HTTP with OAuth),
    /// which the core keys its catalogs on.
    pub(crate) fn grants_scopes(&self) -> bool {
        match self {
            Self::Stdio(_) => false,
            #[cfg(feature = "http")]
            Self::Http(_) => true,
        }
    }

    /// `true` when the driver stopped reading before `WouldBlock` (its per-readiness frame
    /// budget ran out): it must be resumed without waiting for a readiness event.
    pub(crate) fn has_backlog(&self) -> bool {
        match self {
            Self::Stdio(d) => d.has_backlog(),
            // The HTTP driver keeps its backlog in the session and asks for an immediate
            // wake-up through its own `poll_timeout` instead.
            #[cfg(feature = "http")]
            Self::Http(_) => false,
        }
    }

    /// Carries on with input left over by the frame budget.
    pub(crate) fn resume(&mut self, registry: &Registry, engine: &mut Engine, now: Instant) {
        match self {
            Self::Stdio(d) => {
                if d.has_backlog() {
                    if let Err(e) = d.resume(registry, engine, now) {
                        log::debug!("stdio resume: {e}");
                    }
                }
            }
            #[cfg(feature = "http")]
            Self::Http(_) => {}
        }
    }

    /// Requests written but waiting for a connection (HTTP).
    pub(crate) fn requests_waiting(&self) -> usize {
        match self {
            Self::Stdio(_) => 0,
            #[cfg(feature = "http")]
            Self::Http(d) => d.requests_waiting(),
        }
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Self::Stdio(d) => d.poll_timeout(),
            #[cfg(feature = "http")]
            Self::Http(d) => d.poll_timeout(),
        }
    }

    /// What is due. `backlog`: input a frame budget left unread is handed over too (the
    /// tick's turn; a stdio driver's is [`resume`](Self::resume)); a readiness path leaves it
    /// for the next turn, so one readiness call hands the engine one budget.
    pub(crate) fn handle_timeout(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        #[cfg_attr(not(feature = "http"), allow(unused_variables))] backlog: bool,
    ) {
        match self {
            Self::Stdio(d) => {
                if let Err(e) = d.handle_timeout(registry, engine, now) {
                    log::debug!("stdio timeout: {e}");
                }
            }
            #[cfg(feature = "http")]
            Self::Http(d) if backlog => d.handle_timeout(registry, engine, now),
            #[cfg(feature = "http")]
            Self::Http(d) => d.handle_timeout_keeping_backlog(registry, engine, now),
        }
    }

    /// Stops the transport without waiting: a stdio child goes to `reaper`; a legacy HTTP
    /// session's `DELETE` is returned started, for the caller to move on and drop at
    /// `now + grace`.
    pub(crate) fn shutdown(
        &mut self,
        registry: &Registry,
        grace: Duration,
        reaper: &mut Reaper,
        now: Instant,
    ) -> Option<SessionEnd> {
        match self {
            Self::Stdio(d) => {
                reaper.extend(d.detach(registry, grace, now));
                None
            }
            #[cfg(feature = "http")]
            Self::Http(d) => d.detach(registry, grace, now),
        }
    }

    /// Whether there is a process, a connection, a session or an OAuth flow for
    /// [`shutdown`](Self::shutdown) to end.
    pub(crate) fn is_live(&self) -> bool {
        match self {
            Self::Stdio(d) => d.is_running(),
            #[cfg(feature = "http")]
            Self::Http(d) => d.is_live(),
        }
    }

    /// The tokens the driver registers with.
    pub(crate) fn tokens(&self) -> Range<usize> {
        match self {
            Self::Stdio(d) => d.tokens(),
            #[cfg(feature = "http")]
            Self::Http(d) => d.tokens(),
        }
    }

    /// Work that waits for no deadline: bytes unwritten, input left unread (the driver's
    /// share of `Host::is_idle`, beside its deadline).
    pub(crate) fn has_work(&self) -> bool {
        match self {
            Self::Stdio(d) => d.unsent() > 0 || d.has_backlog(),
            // Its writes belong to pending requests or to the engine's output, checked by the
            // core.
            #[cfg(feature = "http")]
            Self::Http(_) => false,
        }
    }
}
