//! A host owning a `mio::Poll` (or living in the program's: `Host::embedded`) and any number
//! of servers, each with its own engine.
//!
//! Servers share nothing but the poll: each has its own pending table, limits, stderr ring and
//! child process, so one server crashing fails only its own calls. The usage contract and an
//! example are on [`Host`], whose docs render (this module is private).

use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use crate::client::catalog::ServerCatalog;
use crate::client::principal::Recipe;
use crate::client::Client;
use crate::config::{CacheConfig, Config};
#[cfg(feature = "http")]
use crate::driver::http::{HttpDriver, HttpOptions, HttpSetupError};
use crate::driver::reap::Reaper;
use crate::driver::stdio::{StdioCommand, StdioDriver};
use crate::driver::transport::Transport;
use crate::engine::{Engine, Stats};
use crate::error::{AnswerError, CallError, ConfigError, RequestError};
use crate::proto::mcp::ResultType;

mod blocking;
mod closing;
mod embed;
mod from_config;
mod idle;
mod lanes;
mod roots;
#[cfg(feature = "schema")]
mod schema;
mod task_scope;
mod tokens;
mod verbs;

use crate::client::ServerId;
#[cfg(doc)]
use crate::engine::{CallId, Event, ServerState};
pub use embed::{EmbedError, ForeignToken};
pub use from_config::{FromConfigError, ServerNames};
pub use lanes::LaneError;
#[cfg(feature = "schema")]
pub use schema::ToolCallError;
pub use task_scope::TaskScope;

/// Why a server could not be added.
#[derive(Debug)]
#[non_exhaustive]
pub enum AddServerError {
    /// The configuration is invalid.
    Config(ConfigError),
    /// The process could not be started (missing program, no permission, ...).
    Spawn {
        /// The program, as the command named it.
        program: String,
        /// What the operating system said.
        error: io::Error,
    },
    /// The HTTP server's URL, name, TLS or headers are not usable.
    #[cfg(feature = "http")]
    Http(HttpSetupError),
    /// No free block of the host's token range is as long as this server needs
    /// ([`Host::STDIO_SERVER_TOKENS`], [`Host::HTTP_SERVER_TOKENS`]): an embedded host's range
    /// is full. [`Host::remove_server`] gives a server's tokens back.
    TooManyServers,
    /// The roots given with the server (a configuration file's `mcpoll.roots`) failed a
    /// check of [`Host::set_root_dirs`]: checked before the server starts, so nothing was
    /// started (or, failing once it had, it was removed again).
    Roots(AnswerError),
}

impl fmt::Display for AddServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => write!(f, "{e}"),
            Self::Spawn { program, error } => {
                write!(f, "could not start the server {program:?}: {error}")
            }
            #[cfg(feature = "http")]
            Self::Http(e) => write!(f, "{e}"),
            Self::TooManyServers => {
                f.write_str("no room for another server in the host's token range")
            }
            Self::Roots(e) => write!(f, "roots: {e}"),
        }
    }
}

impl std::error::Error for AddServerError {}

/// Why a blocking helper returned without a result.
#[derive(Debug)]
#[non_exhaustive]
pub enum BlockingError {
    /// The call could not start.
    Request(RequestError),
    /// The call ended without a result.
    Call(CallError),
    /// Polling failed.
    Io(io::Error),
    /// No such server.
    UnknownServer,
    /// The call is not pending on the server: it ended and its end was taken already (through
    /// `poll_event`), or it is another server's.
    NotPending,
}

impl fmt::Display for BlockingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Request(e) => write!(f, "{e}"),
            Self::Call(e) => write!(f, "{e}"),
            Self::Io(e) => write!(f, "poll failed: {e}"),
            Self::UnknownServer => f.write_str("no such server"),
            Self::NotPending => f.write_str("the call is not pending on this server"),
        }
    }
}

impl std::error::Error for BlockingError {}

impl From<RequestError> for BlockingError {
    fn from(e: RequestError) -> Self {
        Self::Request(e)
    }
}

/// A completed call's result, owned (from the blocking helpers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedResult {
    /// The result object as JSON text.
    pub json: String,
    /// A tool reported failure (`isError: true`).
    pub is_error: bool,
    /// `Complete`, or `InputRequired` for an interim result.
    pub result_type: ResultType,
}

/// What ends a [`Host::poll_inner`] wait early besides I/O and deadlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// Events queued for the host, too.
    OnQueuedEvents,
    /// Only I/O and deadlines.
    OnIo,
}

/// Many MCP servers on one `mio::Poll`: the type most programs use.
///
/// A host runs stdio servers as child processes and talks Streamable HTTP to remote ones, each
/// server with its own [`Engine`], pending table, breakers, limits and (for stdio) process
/// group, so one server's failure never touches another's calls. It does its I/O inside
/// [`poll`](Self::poll) and the blocking helpers, on the calling thread; the only other thread
/// is a short-lived one per host-name resolution. The poll is its own ([`Host::new`]) or the
/// program's ([`Host::embedded`]).
///
/// # Use
///
/// 1. **Add servers.** [`add_stdio_server`](Self::add_stdio_server),
///    [`add_http_server`](Self::add_http_server) or [`from_config`](Self::from_config) return a
///    [`ServerId`] at once and start the era probe; a stdio server that cannot be spawned is an
///    `Err` here, everything later is an event.
/// 2. **Call.** [`call_tool`](Self::call_tool) and the other call verbs return a [`CallId`] at
///    once, even before the server is ready (the call is sent when it is); an `Err` means
///    nothing was sent. Each call ends with one [`Event::CallDone`] or [`Event::CallFailed`];
///    a tool call's deadline (`CallOptions::timeout`, else `Config::default_timeout`, counted
///    from the call) bounds its wait, the time until the server is ready included.
/// 3. **Poll.** [`poll`](Self::poll) waits for I/O or the next deadline, at most its timeout:
///    `None` sleeps until there is work (no CPU while waiting), `Some(Duration::ZERO)` never
///    blocks (once per frame of a game or control loop). Then drain
///    [`poll_event`](Self::poll_event) until `None`: results, failures with their cause,
///    progress, server requests to answer, and what happened to each server
///    ([`Event::TransportLost`] and [`Event::Closed`] say why it went away). An event borrows
///    the host: copy out what you keep before the next command.
/// 4. **Or block.** Scripts and tests use [`call_tool_blocking`](Self::call_tool_blocking),
///    [`wait`](Self::wait) and [`wait_ready`](Self::wait_ready), which leave every other
///    call's events queued (the waited call's progress and task events go with its end).
/// 5. **Close.** [`close_server`](Self::close_server) and
///    [`remove_server`](Self::remove_server) return at once and stop the process from the next
///    polls; dropping the host stops every server.
///
/// # Example
///
/// A fixed-step loop that never blocks on MCP (for a program that has nothing else to do,
/// `poll(None)` is the better wait: see the crate example).
///
/// ```no_run
/// use std::time::Duration;
/// use mcpoll::{CallOptions, Config, Event, Host, StdioCommand};
///
/// let mut host = Host::new()?;
/// let server = host.add_stdio_server(StdioCommand::new("my-mcp-server"), Config::default())?;
/// let call = host.call_tool_json(server, "echo", r#"{"text":"hi"}"#, &CallOptions::default())?;
/// let mut pending = true;
/// while pending {
///     // ... the frame's own work ...
///     host.poll(Some(Duration::ZERO))?;
///     while let Some((_server, event)) = host.poll_event() {
///         match event {
///             Event::CallDone { call: c, result, .. } if c == call => {
///                 println!("{}", result.json());
///                 pending = false;
///             }
///             Event::CallFailed { call: c, error, .. } if c == call => {
///                 eprintln!("echo failed: {error}");
///                 pending = false;
///             }
///             Event::TransportLost { error, .. } => eprintln!("server lost: {error}"),
///             _ => {}
///         }
///     }
///     std::thread::sleep(Duration::from_millis(16)); // the rest of the frame
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Host {
    /// The host's own poll, or the program's registry (embedded), and the token range.
    poll: embed::Reactor,
    /// The sans-IO core: engines, catalogs, lanes, tasks, policies, handlers, records.
    client: Client,
    /// Each server's driver, by the server's slot index in the core.
    transports: Vec<Option<Transport>>,
    /// Children of closed servers, reaped from the tick (closing never waits).
    exiting: Reaper,
    /// Closed HTTP servers' legacy sessions being ended (`DELETE`), from the poll and tick.
    ending: closing::Ending,
    /// The servers the current tick looks at (kept: no allocation per round).
    round: Vec<usize>,
    /// When the core is given its next reading of the wall clock; `None` without a
    /// capability store, the clock's one reader ([`Host::set_capability_store`]).
    wall_due: Option<Instant>,
}

/// How often a host with a capability store reads the wall clock for the core: a clock set
/// by hand, or a machine woken from sleep, dates the store's entries right within a second.
const WALL_CLOCK_READ: Duration = Duration::from_secs(1);

impl Host {
    /// A host with its own `mio::Poll`.
    pub fn new() -> io::Result<Self> {
        Self::with_reactor(embed::Reactor::owned()?, Client::new(CacheConfig::default())?)
    }

    /// The constructor both modes share.
    fn with_reactor(poll: embed::Reactor, client: Client) -> io::Result<Self> {
        Ok(Self {
            poll,
            client,
            transports: Vec::new(),
            exiting: Reaper::default(),
            ending: closing::Ending::default(),
            round: Vec::new(),
            wall_due: None,
        })
    }

    /// A host whose capability cache has these bounds; [`Host::new`] uses the defaults.
    pub fn with_cache(cache: CacheConfig) -> io::Result<Self> {
        let mut client = Client::new(cache)?;
        client.arm_cache();
        Self::with_reactor(embed::Reactor::owned()?, client)
    }

    /// The sans-IO core under the host: every getter and command of the host without its
    /// I/O, for code that wants to read state without a `&mut Host`.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Starts a server as a child process and begins the era probe. Calls may be made at
    /// once; they are sent when the server is ready.
    pub fn add_stdio_server(
        &mut self,
        command: StdioCommand,
        config: Config,
    ) -> Result<ServerId, AddServerError> {
        let now = Instant::now();
        let identity = config.cache_identity.clone().unwrap_or_else(|| command.cache_identity());
        let (config, stored) = self.with_stored_verdict(config, &identity, false);
        let mut engine = Engine::new(config, now).map_err(AddServerError::Config)?;
        let base = self.poll.reserve(Self::STDIO_SERVER_TOKENS)?;
        let recipe = Recipe::stdio(&command, engine.config());
        let program = command.program().to_string_lossy().into_owned();
        let mut driver = StdioDriver::new(command, engine.config(), base);
        driver
            .spawn(self.poll.registry(), &mut engine, now)
            .map_err(|error| AddServerError::Spawn { program, error })?;
        let mut catalog = ServerCatalog::new(identity, false, engine.config().cache_tenant.clone());
        if stored {
            catalog.started_from_stored_verdict();
        }
        Ok(self.insert(engine, Transport::Stdio(driver), catalog, Some(recipe)))
    }

    /// Adds a Streamable HTTP server. The URL is parsed now; its host name is resolved off the
    /// loop and connections are made on demand. The era probe starts at once.
    #[cfg(feature = "http")]
    pub fn add_http_server(
        &mut self,
        opts: HttpOptions,
        config: Config,
    ) -> Result<ServerId, AddServerError> {
        let now = Instant::now();
        let identity = config.cache_identity.clone().unwrap_or_else(|| opts.cache_identity());
        let (config, stored) = self.with_stored_verdict(config, &identity, true);
        let mut engine = Engine::new(config, now).map_err(AddServerError::Config)?;
        let base = self.poll.reserve(Self::HTTP_SERVER_TOKENS)?;
        let config = engine.config().clone();
        let mut catalog = ServerCatalog::new(identity, true, config.cache_tenant.clone());
        if stored {
            catalog.started_from_stored_verdict();
        }
        let recipe = Recipe::http(&opts, &config);
        let mut driver =
            HttpDriver::new(opts, &config, base, &mut engine, now).map_err(AddServerError::Http)?;
        driver.flush(self.poll.registry(), &mut engine, now);
        Ok(self.insert(engine, Transport::Http(driver), catalog, Some(recipe)))
    }

    /// `config` without a stale saved verdict, and with the one the capability store holds
    /// for this server context when it brings none of its own; `true` when that was used.
    fn with_stored_verdict(
        &mut self,
        config: Config,
        identity: &str,
        http: bool,
    ) -> (Config, bool) {
        let mut config = without_stale_verdict(config);
        if config.saved_discover.is_some() {
            return (config, false);
        }
        let wall = std::time::SystemTime::now();
        config.saved_discover = self.client.cache.stored_verdict(identity, http, &config, wall);
        let stored = config.saved_discover.is_some();
        (config, stored)
    }

    /// Hands a new server's engine and catalog to the core and keeps its driver beside it.
    fn insert(
        &mut self,
        engine: Engine,
        transport: Transport,
        catalog: ServerCatalog,
        recipe: Option<Recipe>,
    ) -> ServerId {
        let tokens = transport.tokens();
        let id = self.client.insert(engine, catalog, recipe);
        if self.transports.len() <= id.index {
            self.transports.resize_with(id.index + 1, || None);
        }
        self.transports[id.index] = Some(transport);
        self.poll.commit(tokens, id.index);
        id
    }

    /// Writes the output of every server the core says has some: after each command, and
    /// before each wait.
    /// Runs a command of the core at the current time, then writes what it queued: how each
    /// of the host's commands is the core's at once, with its I/O.
    #[inline(always)]
    pub(crate) fn at_now<T>(&mut self, command: impl FnOnce(&mut Client, Instant) -> T) -> T {
        let now = Instant::now();
        let out = command(&mut self.client, now);
        self.flush_unflushed(now);
        out
    }

    pub(crate) fn flush_unflushed(&mut self, now: Instant) {
        flush_unflushed(&mut self.client, &mut self.transports, self.poll.registry(), now);
    }

    /// Closes a server: its calls fail, its process group is stopped (stdin closed, then
    /// SIGTERM after 250 ms, then SIGKILL after 250 ms more). Its handle stays valid (its
    /// state is [`ServerState::Closed`], calls are refused with [`RequestError::Closed`])
    /// until [`remove_server`](Self::remove_server) frees it and its resources. An HTTP
    /// server's connections close, and its legacy session, if it has one, is ended with a
    /// `DELETE` that gets 250 ms to be answered.
    /// Returns without waiting: the poll and tick reap the process and send the `DELETE`.
    /// The principals' lanes on it close with it.
    pub fn close_server(&mut self, server: ServerId) {
        self.close_lanes(server);
        let registry = self.poll.registry();
        if let Some(engine) = self.client.engine_mut(server) {
            let now = Instant::now();
            engine.close(now);
            if let Some(Some(transport)) = self.transports.get_mut(server.index) {
                let grace = Duration::from_millis(250);
                if let Some(end) = transport.shutdown(registry, grace, &mut self.exiting, now) {
                    self.ending.push(registry, end);
                }
            }
        }
        self.ending.settle(&mut self.poll);
    }

    /// Starts a degraded server (one whose process kept crashing) again now, or runs the
    /// probe or handshake (and so the OAuth flow) again on an
    /// [`Unauthorized`](ServerState::Unauthorized) one.
    pub fn restart(&mut self, server: ServerId) {
        let registry = self.poll.registry();
        if let Some(engine) = self.client.engine_mut(server) {
            let now = Instant::now();
            engine.restart();
            engine.retry_authorization(now);
            if let Some(Some(transport)) = self.transports.get_mut(server.index) {
                transport.flush(registry, engine, now);
            }
        }
    }

    /// Closes and forgets a server, and its lanes. What the close ends still reaches
    /// [`poll_event`](Self::poll_event) under the removed handle: a `CallFailed` for each call
    /// that was pending (and any event not yet taken), then `Closed`; their records reach the
    /// sink. Any other use of the handle finds no server.
    pub fn remove_server(&mut self, server: ServerId) {
        self.remove_lanes(server);
        if self.client.server(server).is_some() {
            self.close_server(server);
            if let Some(core) = self.client.remove(server) {
                self.client.retire(server, core.engine);
            }
            if let Some(transport) = self.transports.get_mut(server.index).and_then(Option::take) {
                self.release_tokens(server.index, transport.tokens());
            }
        }
    }

    /// Delivers the redirect of a deferred OAuth authorization of `server` (its
    /// [`Authorizer`](crate::oauth::Authorizer) answered `Pending`); see
    /// [`HttpDriver::handle_redirect`].
    #[cfg(feature = "http")]
    pub fn handle_redirect(
        &mut self,
        server: ServerId,
        redirect: &str,
    ) -> Result<(), crate::oauth::RedirectError> {
        let registry = self.poll.registry();
        let engine = self.client.engine_mut(server);
        match (engine, self.transports.get_mut(server.index)) {
            (Some(engine), Some(Some(Transport::Http(d)))) => {
                let now = Instant::now();
                let out = d.handle_redirect(registry, engine, now, redirect);
                self.note_granted_scope(server);
                out
            }
            _ => Err(crate::oauth::RedirectError::NoFlow),
        }
    }

    /// Tells the core the scope the server's driver now holds a token for.
    fn note_granted_scope(&mut self, server: ServerId) {
        if let Some(Some(transport)) = self.transports.get(server.index) {
            self.client.note_granted_scope(server, transport.granted_scope());
        }
    }

    fn transport(&self, server: ServerId) -> Option<&Transport> {
        self.client.server(server)?;
        self.transports.get(server.index)?.as_ref()
    }

    /// The last of what the server process wrote to stderr (stdio servers).
    pub fn stderr_tail(&self, server: ServerId) -> Option<String> {
        match self.transport(server)? {
            Transport::Stdio(d) => Some(d.stderr_tail()),
            #[cfg(feature = "http")]
            Transport::Http(_) => None,
        }
    }

    /// The server's process id, while it runs (stdio servers).
    pub fn pid(&self, server: ServerId) -> Option<u32> {
        match self.transport(server)? {
            Transport::Stdio(d) => d.pid(),
            #[cfg(feature = "http")]
            Transport::Http(_) => None,
        }
    }

    /// The legacy HTTP session id, when the server issued one.
    #[cfg(feature = "http")]
    pub fn session_id(&self, server: ServerId) -> Option<&str> {
        match self.transport(server)? {
            Transport::Http(d) => d.session_id(),
            Transport::Stdio(_) => None,
        }
    }

    /// The server engine's counters; `queued` includes an HTTP server's calls waiting for a
    /// connection.
    pub fn stats(&self, server: ServerId) -> Option<Stats> {
        let mut stats = self.client.stats(server)?;
        stats.queued += self.transport(server).map_or(0, Transport::requests_waiting) as u64;
        Some(stats)
    }

    /// Waits at most `timeout` (`None`: until something happens) for I/O or the next engine
    /// deadline, then does the work that is due and returns. A game loop passes
    /// `Some(Duration::ZERO)` once per frame.
    #[inline]
    pub fn poll(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let queued = self.client.cache.has_changes() || self.client.has_asks();
        let wake = if queued { Some(Duration::ZERO) } else { timeout };
        self.poll_inner(wake, Wake::OnQueuedEvents)
    }

    /// One round of [`poll`](Self::poll). `wake` says whether events already queued for the
    /// host cut the wait short: they do for `poll` (the host drains them next), and not for the
    /// blocking helpers, which wait for one call and leave other calls' events queued: for them
    /// a queued event is no reason to return early, and taking it as one made them spin.
    fn poll_inner(&mut self, timeout: Option<Duration>, wake: Wake) -> io::Result<()> {
        let now = Instant::now();
        // Output a command left (one that came through the core without a flush) goes out
        // before the wait, which its answer would otherwise never end.
        if self.client.has_unflushed() {
            self.flush_unflushed(now);
        }
        // The next deadline, or now when a driver has left input unread (its readiness edge
        // is spent: no new one will come for it).
        let until_due = self.poll_timeout().map(|d| d.saturating_duration_since(now));
        let wait = match (timeout, until_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // An event already queued for the host must not wait for I/O either.
        let events_queued = wake == Wake::OnQueuedEvents && self.client.has_queued_events();
        let wait = if events_queued { Some(Duration::ZERO) } else { wait };
        self.poll.wait(wait)?;
        // The same readiness path and tick an embedded host's program drives (`embed`).
        self.round(Instant::now());
        // The cache's share, in the blocking helpers' waits too: a re-listen due is a deadline
        // of the host, and a wait that woke for it and left it undone woke again at once.
        // At the time the round handled its events: one clock read per poll.
        if self.client.has_catalog_work() {
            let now = self.poll.last_now;
            self.client.pump_catalogs(now);
            self.flush_unflushed(now);
        }
        Ok(())
    }
}

/// [`Host::flush_unflushed`] on the parts of a host it needs (so a drain can run it while the
/// core is lent to the drain).
fn flush_unflushed(
    client: &mut Client,
    transports: &mut [Option<Transport>],
    registry: &mio::Registry,
    now: Instant,
) {
    while let Some(index) = client.unflushed.pop() {
        if let (Some(s), Some(Some(transport))) =
            (client.servers.get_mut(index), transports.get_mut(index))
        {
            transport.flush(registry, &mut s.engine, now);
        }
    }
}

/// A host reads as its core: every getter of [`Client`] (`state`, `era`, `pending`,
/// `capabilities`, `search_tools`, `cache_stats`, `task_info`, ...) works on a `Host` as it is,
/// and is written once, on the core. Only reading: the core's commands take `now` and leave
/// output for the shell to write, so a host's commands are its own (they read the clock and
/// write what they queued at once).
impl std::ops::Deref for Host {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // Drivers kill their process groups when dropped. The reaper, dropped next, kills and
        // reaps (for a bounded time) closed servers' children.
        self.transports.clear();
        // Legacy sessions still being ended get a bounded last chance, then their sockets close.
        self.ending.finish(self.poll.registry());
    }
}

/// `config` without a saved era verdict whose time has passed (the engine reads no clock and
/// takes the one it is given as fresh).
pub(crate) fn without_stale_verdict(mut config: Config) -> Config {
    let now = std::time::SystemTime::now();
    if config.saved_discover.as_ref().is_some_and(|v| !v.is_fresh(now)) {
        log::debug!("the saved era verdict has expired; probing");
        config.saved_discover = None;
    }
    config
}
