//! Engine configuration: limits, defaults and the three policies (retry, breaker, restart),
//! checked once by [`Engine::new`](crate::Engine::new).

use std::time::{Duration, SystemTime};

use crate::error::ConfigError;
use crate::proto::version::{EraPreference, ProtocolVersion};

/// Everything one server's engine needs to know up front.
///
/// Every table and buffer the engine keeps is bounded by a field here; breaching a bound is a
/// typed error, never growth. Build it with struct-update syntax over `Config::default()`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Most calls pending at once (the pending table is preallocated to this size).
    pub max_pending: usize,
    /// Largest single message accepted from the server, in bytes.
    pub max_message_bytes: usize,
    /// Deadline for a call when its options name none.
    pub default_timeout: Duration,
    /// How long the `server/discover` probe may take before the server is taken as legacy.
    pub probe_timeout: Duration,
    /// Deadline for the legacy `initialize` handshake (30 s by default). Over stdio it also
    /// covers the server's own start after a probe timed out: an SDK server in Python takes
    /// seconds just to import on a small or busy machine.
    pub handshake_timeout: Duration,
    /// Which protocol era to speak.
    pub era: EraPreference,
    /// Client name sent in `clientInfo`.
    pub client_name: String,
    /// Client version sent in `clientInfo`.
    pub client_version: String,
    /// Client capabilities, as a JSON object (`{}` for none). Its `elicitation`, `sampling` and
    /// `roots` members are replaced by what [`answers`](Self::answers) declares.
    pub client_capabilities: String,
    /// Most pages followed by one listing before it fails with `TooManyPages`.
    pub max_pages: usize,
    /// Most bytes of items one listing gathers over all its pages (`list_tools` and the
    /// like). A server handing out page after page of large items is stopped here with
    /// `PeerError::TooLarge`, and the pages gathered so far are freed.
    pub max_listing_bytes: usize,
    /// Most events held for the host. Past it, progress, change, breaker and transport-lost
    /// events are dropped (and counted in `Stats::events_dropped`). Terminal events
    /// (`CallDone`, `CallFailed`) are never dropped: instead a new call is refused with
    /// `RequestError::Overloaded` while the undrained terminal events plus the pending calls
    /// reach this number.
    pub max_queued_events: usize,
    /// Most frames a driver hands the engine per readiness event. Input left over is taken on
    /// the next `Host::poll` round, which then does not wait (embedded: `Host::poll_timeout`
    /// is due at once, and the next `Host::handle_timeout` takes it); so one chatty server
    /// cannot hold the loop, and every round's work is bounded.
    pub frames_per_readiness: usize,
    /// Most bytes a driver reads from one server per readiness event, and the bound on what it
    /// parses besides messages: 1xx heads, HTTP body pieces, SSE lines (comments, empty and
    /// id-only events) and stdio blank lines count one unit each, and a turn takes at most
    /// `bytes_per_readiness / 64` units. Past either, the driver stops as it does at the frame
    /// budget: a server sending input that delivers nothing still cannot hold the loop, and
    /// the stop is counted in `Stats::input_yields`.
    pub bytes_per_readiness: usize,
    /// Most bytes the stdio driver holds toward a server that has not read them yet. When
    /// this many are waiting, the driver stops taking frames from the engine until the server
    /// reads (calls wait in the engine's queue, under their deadlines); one frame may pass the
    /// mark, as a frame is taken whole. Over HTTP each request is an exchange of its own, and
    /// what waits is bounded by the in-flight limit (`max_in_flight`) instead.
    pub max_write_buffer_bytes: usize,
    /// How many bytes of a child's stderr are kept for diagnostics.
    pub stderr_tail_bytes: usize,
    /// Most calls in flight at once (default 32); more wait in a FIFO queue of `max_queued`.
    ///
    /// One of two throughput knobs: an HTTP server also carries at most
    /// `HttpOptions::max_connections` (default 4) calls at a time, one per connection, and the
    /// rest wait for a connection. For N concurrent calls to one server raise both to N. The
    /// wait shows in [`Stats::queued`](crate::Stats::queued) (calls waiting now),
    /// [`Stats::queue_wait`](crate::Stats::queue_wait) and each call's
    /// [`CallRecord::queue_wait`](crate::CallRecord::queue_wait).
    pub max_in_flight: usize,
    /// Most calls waiting behind the in-flight limit; one more is `Overloaded` at once.
    pub max_queued: usize,
    /// Which failures are re-sent, how often, how far apart.
    pub retry: RetryPolicy,
    /// Circuit breakers per (tenant, operation class).
    pub breaker: BreakerPolicy,
    /// Restarting a crashed stdio server.
    pub restart: RestartPolicy,
    /// The argument name an idempotency key goes under (`CallOptions::idempotency_key`).
    pub idempotency_key_field: String,
    /// Seed for the retry jitter (fixed by default, so runs replay).
    pub jitter_seed: u64,
    /// The server requests the host answers (elicitation, sampling, roots). Exactly these are
    /// declared in the client capabilities, whatever `client_capabilities` says about them;
    /// anything else the server asks is refused the way its era expects.
    pub answers: ServerRequestKinds,
    /// Most `input_required` rounds one call may take before it fails with
    /// `LocalError::TooManyInputRounds` (2026-07-28 multi round-trip requests).
    pub max_input_rounds: u32,
    /// How long a legacy server request (`elicitation/create`, ...) waits for the host's answer
    /// before the server is told it timed out. Input requests of a modern call wait under the
    /// call's own deadline instead.
    pub server_request_timeout: Duration,
    /// Most server requests waiting for the host at once; one more is refused. 1 to 65,536:
    /// the table is made with the engine.
    pub max_server_requests: usize,
    /// The server's logical identity in a [`Host`](crate::Host)'s capability cache (`None`:
    /// the program and arguments of a stdio server, each after a NUL, and a fingerprint of
    /// the environment and working directory it is given; the URL of an HTTP one, and a
    /// fingerprint of its own headers). Two servers given the same identity may share
    /// catalogs, so name them for what they are. The default cannot see who a token
    /// provider's or an OAuth flow's tokens are for: servers that differ only there need one
    /// each (or one server with a lane per principal).
    pub cache_identity: Option<String>,
    /// The tenant part of the capability cache key (`None`: no tenant).
    pub cache_tenant: Option<String>,
    /// A `server/discover` verdict saved by an earlier run ([`Engine::verdict`]): the engine
    /// takes the server as modern in its version and sends the first call at once, without a
    /// probe. It is taken as fresh: the caller drops one whose [`SavedVerdict::expires`] has
    /// passed ([`SavedVerdict::is_fresh`]; [`Host`](crate::Host) does). Should the server
    /// refuse the version (`-32022`), answer like a legacy server or fail the first call, the
    /// engine probes after all. Used for the first transport only; ignored with
    /// [`EraPreference::LegacyOnly`].
    ///
    /// [`Engine::verdict`]: crate::Engine::verdict
    pub saved_discover: Option<SavedVerdict>,
    /// The extensions the client supports, as a JSON object from extension id to its
    /// settings object: `{"io.example/skills":{}}`. Declared as `extensions` in the client
    /// capabilities of both eras (2026-07-28 `_meta` and the 2025-11-25 `initialize`),
    /// replacing an `extensions` member of `client_capabilities`; `{}` (the default) leaves
    /// that member as it is. Every id must carry a prefix (`vendor.example/name`).
    pub extensions: String,
    /// The shortest wait between two polls of a task-backed call (`tasks/get`), whatever
    /// `pollInterval` the server suggests (default 100 ms).
    pub task_poll_min: Duration,
    /// The longest wait between two polls of a task-backed call (default 30 s). Without a
    /// suggestion from the server, mcpoll waits 1 s, within these bounds.
    pub task_poll_max: Duration,
}

/// A server's era verdict (its `server/discover` result) kept across restarts of the host.
///
/// Read it with [`Engine::verdict`](crate::Engine::verdict) or
/// [`Host::verdict`](crate::Host::verdict), store the three fields, and give it back in
/// [`Config::saved_discover`] while it is fresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedVerdict {
    /// The version settled on (a 2026 revision).
    pub version: ProtocolVersion,
    /// The raw `server/discover` result, as the server sent it (it becomes
    /// [`Engine::server_info`](crate::Engine::server_info) again).
    pub result: String,
    /// When the verdict stops being fresh: its `ttlMs` from when it was received. Wall-clock
    /// time, since it outlives the process.
    pub expires: SystemTime,
}

/// The longest an era verdict is kept fresh, whatever the server's `ttlMs`: a saved verdict
/// outlives the process, and a server's `1e18` made it good for millions of years (and, cast
/// to a store's integer type, already expired).
pub(crate) const MAX_VERDICT_TTL: Duration = Duration::from_secs(24 * 3600);

impl SavedVerdict {
    /// `true` while `now` (wall-clock) is before [`expires`](Self::expires), and that is at
    /// most a day ahead: a verdict dated by a clock that was wrong then (a device's clock at
    /// 2030, corrected later) or is wrong now (booted at 1970 before NTP) is not fresh, or it
    /// would be served, never probed again, for years.
    pub fn is_fresh(&self, now: SystemTime) -> bool {
        let latest = now.checked_add(MAX_VERDICT_TTL).unwrap_or(now);
        now < self.expires && self.expires <= latest
    }

    /// The server marked the result `cacheScope: "public"`: it may be shared beyond the
    /// authorization context that asked (PROTOCOL.md §2.2), with a principal's lane.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the host's lanes only
    pub(crate) fn is_public(&self) -> bool {
        crate::proto::json::parse(self.result.as_bytes())
            .ok()
            .and_then(|r| r.get("cacheScope"))
            .is_some_and(|s| s.as_str().as_deref() == Some("public"))
    }
}

/// `Config::extensions`: an object of objects under prefixed ids (PROTOCOL.md §2.13).
fn check_extensions(extensions: &str) -> Result<(), ConfigError> {
    use crate::proto::json::Kind;
    let err = |reason| Err(ConfigError { field: "extensions", reason });
    let Ok(e) = crate::proto::json::parse(extensions.as_bytes()) else {
        return err("must be a JSON object");
    };
    if e.kind() != Kind::Object {
        return err("must be a JSON object");
    }
    for (id, settings) in e.members() {
        let id = id.as_str();
        let (prefix, name) = id.rsplit_once('/').unwrap_or_default();
        if prefix.is_empty() || name.is_empty() {
            return err("every id must be `prefix/name`");
        }
        if settings.kind() != Kind::Object {
            return err("every extension's settings must be a JSON object");
        }
    }
    Ok(())
}

/// Which kinds of server request the host answers; each one set is declared to the server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerRequestKinds {
    /// `elicitation/create` in form mode.
    pub elicitation_form: bool,
    /// `elicitation/create` in URL mode.
    pub elicitation_url: bool,
    /// `sampling/createMessage` (without tool use).
    pub sampling: bool,
    /// `sampling/createMessage` with `tools`/`toolChoice` too (declares `sampling.tools`; needs
    /// `sampling`): the host's model can call the tools the server offers.
    pub sampling_tools: bool,
    /// `roots/list`.
    pub roots: bool,
    /// Declares `roots.listChanged` to 2025-11-25 servers (needs `roots`): the host promises
    /// to report each change of its roots through `Engine::set_roots` / `Host::set_roots`,
    /// which sends `notifications/roots/list_changed`.
    pub roots_list_changed: bool,
}

impl ServerRequestKinds {
    /// Every kind: both elicitation modes, sampling, roots. Sampling with tools and roots
    /// change notifications stay off: each is a promise about the host's handlers, set it
    /// yourself.
    pub fn all() -> Self {
        Self {
            elicitation_form: true,
            elicitation_url: true,
            sampling: true,
            roots: true,
            ..Self::default()
        }
    }
}

/// Bounds and lifetimes of a [`Host`](crate::Host)'s capability cache (tool, prompt and
/// resource catalogs), given to [`Host::with_cache`](crate::Host::with_cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Catalog pages held at most, over every server.
    pub max_entries: usize,
    /// Bytes held at most (an estimate of heap use), over every server.
    pub max_bytes: usize,
    /// Lifetime of a 2025-11-25 catalog, whose results carry no `ttlMs`. (A 2026-07-28 result
    /// must carry one: without a valid one it is stale at once, as the spec says.)
    pub default_ttl: Duration,
    /// Cap on every lifetime, whatever the server says.
    pub max_ttl: Duration,
    /// How long past its freshness a catalog may be served, flagged stale, when its refresh
    /// failed; past that the need fails with an error.
    pub max_stale: Duration,
    /// Catalog refreshes in flight at most.
    pub max_refreshes: usize,
    /// Refetch a catalog the host has asked for (a need: `tool_catalog` and the like) as soon
    /// as the server says it changed (else on the next need), a second after the last such
    /// refetch of it at the soonest. A kind the host never asked for is not listed.
    pub eager_refresh: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            max_entries: 1024,
            max_bytes: 8 << 20,
            default_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(3600),
            max_stale: Duration::from_secs(300),
            max_refreshes: 64,
            eager_refresh: false,
        }
    }
}

/// Which failed attempts are sent again, and how long to wait between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (1 disables retries).
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubles each time.
    pub base_delay: Duration,
    /// Backoff never exceeds this (before jitter).
    pub max_delay: Duration,
    /// Jitter added on top, in percent of the delay (0 to 100; more reads as 100).
    pub jitter_percent: u8,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            jitter_percent: 20,
        }
    }
}

/// When a circuit breaker opens, and how long it stays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive counted failures that open the breaker (0 disables breakers).
    pub failure_threshold: u32,
    /// How long an open breaker refuses calls before letting one probe through.
    pub cool_down: Duration,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        Self { failure_threshold: 5, cool_down: Duration::from_secs(10) }
    }
}

/// How a crashed stdio server is restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restart at all (otherwise a crash closes the engine).
    pub enabled: bool,
    /// Delay before the first restart; doubles for each crash in the window.
    pub base_delay: Duration,
    /// The delay never exceeds this.
    pub max_delay: Duration,
    /// This many exits within `crash_loop_window` mark the server degraded. At most 64 are
    /// counted: a larger value (`u32::MAX`, say) never marks it degraded.
    pub crash_loop_exits: u32,
    /// The window for counting exits.
    pub crash_loop_window: Duration,
    /// A degraded server tries one restart after this long (or when the host asks).
    pub degraded_retry_after: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(10),
            crash_loop_exits: 5,
            crash_loop_window: Duration::from_secs(60),
            degraded_retry_after: Duration::from_secs(60),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_pending: 256,
            max_message_bytes: 16 * 1024 * 1024,
            default_timeout: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(30),
            era: EraPreference::Auto,
            client_name: "mcpoll".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            client_capabilities: "{}".into(),
            max_pages: 1000,
            max_listing_bytes: 64 * 1024 * 1024,
            max_queued_events: 1024,
            frames_per_readiness: 64,
            bytes_per_readiness: 256 * 1024,
            max_write_buffer_bytes: 256 * 1024,
            stderr_tail_bytes: 8 * 1024,
            max_in_flight: 32,
            max_queued: 128,
            retry: RetryPolicy::default(),
            breaker: BreakerPolicy::default(),
            restart: RestartPolicy::default(),
            idempotency_key_field: "idempotency_key".into(),
            jitter_seed: 0x6d63_706f_6c6c,
            answers: ServerRequestKinds::default(),
            max_input_rounds: 8,
            server_request_timeout: Duration::from_secs(120),
            max_server_requests: 64,
            cache_identity: None,
            cache_tenant: None,
            saved_discover: None,
            extensions: "{}".into(),
            task_poll_min: Duration::from_millis(100),
            task_poll_max: Duration::from_secs(30),
        }
    }
}

/// The most pending calls a table may hold: ids keep the slot in 20 bits, and the table has
/// one slot more (the handshake's or the probe's, `Engine::new`).
pub(crate) const MAX_PENDING_LIMIT: usize = (1 << 20) - 1;

/// The most server requests an engine keeps waiting for the host at once.
pub(crate) const MAX_SERVER_REQUESTS_LIMIT: usize = 1 << 16;

impl Config {
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        let err = |field, reason| Err(ConfigError { field, reason });
        if self.max_pending == 0 || self.max_pending > MAX_PENDING_LIMIT {
            return err("max_pending", "must be between 1 and 1048575");
        }
        if self.max_message_bytes < 1024 {
            return err("max_message_bytes", "must be at least 1024");
        }
        // A zero handshake timeout made `initialize` due as it was made: never sent, and a
        // legacy server never ready.
        let timeouts = [
            ("default_timeout", self.default_timeout),
            ("probe_timeout", self.probe_timeout),
            ("handshake_timeout", self.handshake_timeout),
        ];
        if let Some((field, _)) = timeouts.iter().find(|(_, t)| t.is_zero()) {
            return err(field, "must be non-zero");
        }
        if self.max_pages == 0 {
            return err("max_pages", "must be at least 1");
        }
        if self.max_listing_bytes < 1024 {
            return err("max_listing_bytes", "must be at least 1024");
        }
        if self.max_in_flight == 0 {
            return err("max_in_flight", "must be at least 1");
        }
        if self.retry.max_attempts == 0 {
            return err("retry.max_attempts", "must be at least 1 (the first attempt)");
        }
        if self.max_queued_events == 0 {
            return err("max_queued_events", "must be at least 1");
        }
        if self.frames_per_readiness == 0 {
            return err("frames_per_readiness", "must be at least 1");
        }
        if self.bytes_per_readiness < 4096 {
            return err("bytes_per_readiness", "must be at least 4096");
        }
        if self.max_write_buffer_bytes == 0 {
            return err("max_write_buffer_bytes", "must be at least 1");
        }
        if self.max_input_rounds == 0 {
            return err("max_input_rounds", "must be at least 1");
        }
        if self.server_request_timeout.is_zero() {
            return err("server_request_timeout", "must be non-zero");
        }
        // The table is made whole with the engine: a "no limit" of usize::MAX would be a
        // capacity panic (or an abort) in add_server, and each lane pays it again.
        if self.max_server_requests == 0 || self.max_server_requests > MAX_SERVER_REQUESTS_LIMIT {
            return err("max_server_requests", "must be between 1 and 65536");
        }
        // The engine's own scanner, which reads these capabilities later (and accepts what
        // serde_json's Value would): serde_json's deserializer stays out of clients that do
        // not otherwise use it.
        let caps = crate::proto::json::parse(self.client_capabilities.as_bytes());
        if !caps.is_ok_and(|c| c.kind() == crate::proto::json::Kind::Object) {
            return err("client_capabilities", "must be a JSON object");
        }
        check_extensions(&self.extensions)?;
        if self.task_poll_min.is_zero() || self.task_poll_min > self.task_poll_max {
            return err("task_poll_min", "must be non-zero and at most task_poll_max");
        }
        #[cfg(not(feature = "server-requests"))]
        if self.answers != ServerRequestKinds::default() {
            return err("answers", "server requests need the `server-requests` feature");
        }
        Ok(())
    }
}
