//! The engine's counters.

use std::time::Duration;

use super::record::FailureCounts;

/// Counters of what the engine saw; cheap to read, never reset (but for `queued`, a gauge).
///
/// Throughput: at most `Config::max_in_flight` calls (default 32) are written at once, and an
/// HTTP server carries at most `HttpOptions::max_connections` (default 4) of them at a time;
/// past either limit calls wait. `queued` says how many wait now and `queue_wait` how long
/// they have waited in all; each call's [`CallRecord::queue_wait`] says its own share.
///
/// [`CallRecord::queue_wait`]: super::record::CallRecord::queue_wait
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Host calls waiting now: for an in-flight slot (`Config::max_in_flight`) or for the
    /// server to be ready, and, from `Host::stats` over HTTP, written but waiting for a
    /// connection (`HttpOptions::max_connections`).
    pub queued: u64,
    /// Time host calls have spent waiting, summed over every call so far: before their first
    /// write, and over HTTP for a connection (each attempt).
    pub queue_wait: Duration,
    /// Frames handed to `handle_message`.
    pub frames_in: u64,
    /// Frames that were not JSON-RPC messages (junk on stdout, bad shapes); skipped.
    pub invalid_frames: u64,
    /// Messages over the size limit.
    pub too_large: u64,
    /// Replies whose id was never issued.
    pub unknown_ids: u64,
    /// Second replies for an id already answered.
    pub duplicate_responses: u64,
    /// Replies for calls that had been cancelled or had timed out.
    pub late_responses: u64,
    /// Error replies with `"id": null`.
    pub errors_without_id: u64,
    /// Requests from the server (legacy JSON-RPC requests: `ping`, and those handed to the
    /// host or refused).
    pub server_requests: u64,
    /// Control frames dropped because their queue was full.
    pub control_dropped: u64,
    /// Progress and change events dropped because the host did not drain events.
    pub events_dropped: u64,
    /// Requests written.
    pub requests_sent: u64,
    /// Attempts sent again after a transient failure.
    pub retries: u64,
    /// Legacy HTTP sessions renewed after the server forgot them.
    pub sessions_renewed: u64,
    /// Host calls that ended (completed or failed).
    pub calls: u64,
    /// Host calls that failed, by the kind of their error.
    pub failures: FailureCounts,
    /// Times a circuit breaker opened.
    pub breaker_trips: u64,
    /// Readiness turns a driver cut short because the server's input passed
    /// `Config::bytes_per_readiness` (or its unit budget) before the turn ended: a server
    /// sending faster than the host polls, or flooding with input that delivers nothing.
    pub input_yields: u64,
}
