//! What a closed HTTP server leaves for the host to finish: the `DELETE` that ends its legacy
//! session ([`SessionEnds`]), moved on by the host's readiness path and dropped by its tick, as
//! the reaper finishes closed stdio servers' processes. Nothing here waits.
//!
//! Its connection uses a token of the server's own block. A server removed while its
//! `DELETE` is still out keeps its block retired (no new server gets those tokens) until the
//! `DELETE` is over.

use std::ops::Range;
use std::time::Instant;

use mio::{Registry, Token};

#[cfg(feature = "http")]
use crate::driver::http::close::SessionEnds;
use crate::driver::transport::SessionEnd;

use super::embed::Reactor;
use super::Host;

/// The session ends of closed servers (nothing without the `http` feature).
#[derive(Debug, Default)]
pub(super) struct Ending {
    #[cfg(feature = "http")]
    ends: SessionEnds,
}

// Without the `http` feature every method is a no-op over nothing.
#[cfg_attr(not(feature = "http"), allow(unused_variables))]
impl Ending {
    /// Takes a closed server's session end to drive. Call [`settle`](Self::settle) after:
    /// an older end may have been dropped to make room.
    pub(super) fn push(&mut self, registry: &Registry, end: SessionEnd) {
        #[cfg(feature = "http")]
        self.ends.push(registry, end);
        #[cfg(not(feature = "http"))]
        match end {}
    }

    /// A readiness event; `false` when `token` is not an end's.
    pub(super) fn handle_readiness(&mut self, registry: &Registry, token: Token) -> bool {
        #[cfg(feature = "http")]
        return self.ends.handle_readiness(registry, token);
        #[cfg(not(feature = "http"))]
        false
    }

    /// Drops the ends whose deadline has come.
    pub(super) fn handle_timeout(&mut self, registry: &Registry, now: Instant) {
        #[cfg(feature = "http")]
        self.ends.handle_timeout(registry, now);
    }

    /// The earliest end's deadline.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        #[cfg(feature = "http")]
        return self.ends.poll_timeout();
        #[cfg(not(feature = "http"))]
        None
    }

    /// `true` when no end is outstanding.
    pub(super) fn is_empty(&self) -> bool {
        #[cfg(feature = "http")]
        return self.ends.is_empty();
        #[cfg(not(feature = "http"))]
        true
    }

    /// `true` when an end outstanding uses one of `tokens`.
    fn holds(&self, tokens: Range<usize>) -> bool {
        #[cfg(feature = "http")]
        return self.ends.holds(tokens);
        #[cfg(not(feature = "http"))]
        false
    }

    /// Gives the host back the tokens of ends that are over (a removed server's retired block).
    pub(super) fn settle(&mut self, reactor: &mut Reactor) {
        #[cfg(feature = "http")]
        for token in self.ends.take_freed() {
            reactor.release_retired(token);
        }
    }

    /// The host is going away: the ends still out get up to 100 ms (never past their
    /// deadlines) to be answered, then are dropped.
    pub(super) fn finish(&mut self, registry: &Registry) {
        #[cfg(feature = "http")]
        self.ends.finish(registry, crate::driver::http::close::FINAL_WAIT);
    }
}

impl Host {
    /// Gives back the tokens of the server just removed from slab `index` (its driver used
    /// `tokens`), or keeps them retired while its session's `DELETE` still uses one.
    pub(super) fn release_tokens(&mut self, index: usize, tokens: Range<usize>) {
        if self.ending.holds(tokens) {
            self.poll.retire(index);
        } else {
            self.poll.release(index);
        }
    }
}
