//! A host owning a `mio::Poll` (or living in the program's: `Host::embedded`) and any number
//! of servers, each with its own engine.
//!
//! Servers share nothing but the poll: each has its own pending table, limits, stderr ring and
//! child process, so one server crashing fails only its own calls. The usage contract and an
//! example are on [`Host`], whose docs render (this module is private).

use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use mio::Token;
use serde_json::value::RawValue;
use slab::Slab;

use crate::config::{CacheConfig, Config, SavedVerdict};
#[cfg(feature = "http")]
use crate::driver::http::{HttpDriver, HttpOptions, HttpSetupError};
use crate::driver::reap::Reaper;
use crate::driver::stdio::{StdioCommand, StdioDriver};
use crate::engine::{
    CallId, CallOptions, Engine, Event, ServerRequestId, ServerState, Stats, TaskStatus,
};
use crate::error::{
    AnswerError, CallError, CancelError, ConfigError, LocalError, RequestError, TransportError,
};
use crate::proto::mcp::{Method, ResultType};
use crate::proto::version::Era;

mod answers;
mod authz;
mod capability_store;
mod catalog;
mod closing;
mod config_file;
mod drain;
mod embed;
mod idle;
mod principal;
mod records;
mod roots;
#[cfg(feature = "schema")]
mod schema;
mod task;
mod tokens;
mod verdict_store;

pub use answers::{Answer, AnswerHandler};
pub use authz::{AccessRequest, Confirm, Decision, DefaultPolicy, Policy};
pub use capability_store::{CapabilityStore, EntryKind, StoreKey, StoredEntry, StoredPage};
pub use catalog::{CacheStats, CatalogError, CatalogView};
pub use config_file::{
    ConfigFile, ConfigFileError, ConfigFileErrorKind, ConfiguredServer, FromConfigError,
    ServerNames,
};
pub use drain::Commands;
pub use embed::{EmbedError, ForeignToken};
pub use principal::{
    CredentialSource, Credentials, LaneError, LaneTarget, Principal, PrincipalError, PrincipalId,
};
#[cfg(feature = "schema")]
pub use schema::ToolCallError;
pub use task::{
    TaskCallError, TaskError, TaskId, TaskInfo, TaskOptions, TaskScope, MAX_TASK_BUDGET,
};

/// Handle to a server in a [`Host`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerId {
    index: usize,
    generation: u32,
}

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
    /// check of [`Host::set_root_dirs`]; the server was removed again.
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

/// The transport of one server.
#[derive(Debug)]
enum Transport {
    Stdio(StdioDriver),
    #[cfg(feature = "http")]
    Http(HttpDriver),
}

impl Transport {
    /// `read_closed`: the event said the peer closed its end (or, without an event to ask,
    /// `true`), so a driver reads on to `WouldBlock` instead of stopping at a short read.
    fn handle_readiness(
        &mut self,
        registry: &mio::Registry,
        token: Token,
        read_closed: bool,
        engine: &mut Engine,
        now: Instant,
    ) {
        match self {
            Self::Stdio(d) => {
                if let Err(e) = d.handle_token(registry, token, read_closed, engine, now) {
                    log::debug!("server I/O failed: {e}");
                }
            }
            #[cfg(feature = "http")]
            Self::Http(d) => d.handle_token(registry, token, read_closed, engine, now),
        }
    }

    fn flush(&mut self, registry: &mio::Registry, engine: &mut Engine, now: Instant) {
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
    fn granted_scope(&self) -> Option<&str> {
        match self {
            Self::Stdio(_) => None,
            #[cfg(feature = "http")]
            Self::Http(d) => d.granted_scope(),
        }
    }

    /// `true` when the driver stopped reading before `WouldBlock` (its per-readiness frame
    /// budget ran out): it must be resumed without waiting for a readiness event.
    fn has_backlog(&self) -> bool {
        match self {
            Self::Stdio(d) => d.has_backlog(),
            // The HTTP driver keeps its backlog in the session and asks for an immediate
            // wake-up through its own `poll_timeout` instead.
            #[cfg(feature = "http")]
            Self::Http(_) => false,
        }
    }

    /// Carries on with input left over by the frame budget.
    fn resume(&mut self, registry: &mio::Registry, engine: &mut Engine, now: Instant) {
        match self {
            Self::Stdio(d) => {
                if d.has_backlog() {
                    if let Err(e) = d.resume(registry, engine, now) {
                        log::debug!("server I/O failed: {e}");
                    }
                }
            }
            #[cfg(feature = "http")]
            Self::Http(_) => {}
        }
    }

    /// Requests written but waiting for a connection (HTTP).
    fn requests_waiting(&self) -> usize {
        match self {
            Self::Stdio(_) => 0,
            #[cfg(feature = "http")]
            Self::Http(d) => d.requests_waiting(),
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Self::Stdio(d) => d.poll_timeout(),
            #[cfg(feature = "http")]
            Self::Http(d) => d.poll_timeout(),
        }
    }

    /// Starts a new process when the engine asks for one (a restart after a crash).
    fn maintain(&mut self, registry: &mio::Registry, engine: &mut Engine, now: Instant) {
        // Irrefutable when the HTTP transport is compiled out.
        #[allow(irrefutable_let_patterns)]
        if let Self::Stdio(d) = self {
            if !d.is_running() && engine.wants_transport() {
                if let Err(e) = d.spawn(registry, engine, now) {
                    log::warn!("restarting the server failed: {e}");
                    let reason = crate::error::CloseReason::SpawnFailed;
                    engine.handle_transport(
                        now,
                        crate::engine::TransportEvent::closed(TransportError::Closed(reason)),
                    );
                }
            }
        }
    }

    fn handle_timeout(&mut self, registry: &mio::Registry, engine: &mut Engine, now: Instant) {
        match self {
            Self::Stdio(d) => {
                if let Err(e) = d.handle_timeout(registry, engine, now) {
                    log::warn!("restarting the server failed: {e}");
                }
            }
            #[cfg(feature = "http")]
            Self::Http(d) => d.handle_timeout(registry, engine, now),
        }
    }

    /// Stops the transport without waiting: a stdio child goes to `reaper`, a legacy HTTP
    /// session's `DELETE` to `ending`.
    fn shutdown(
        &mut self,
        registry: &mio::Registry,
        grace: Duration,
        reaper: &mut Reaper,
        ending: &mut closing::Ending,
    ) {
        let now = Instant::now();
        match self {
            Self::Stdio(d) => reaper.extend(d.detach(registry, grace, now)),
            #[cfg(feature = "http")]
            Self::Http(d) => {
                if let Some(end) = d.detach(registry, grace, now) {
                    ending.push(registry, end);
                }
            }
        }
        let _ = ending;
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
}

impl fmt::Display for BlockingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Request(e) => write!(f, "{e}"),
            Self::Call(e) => write!(f, "{e}"),
            Self::Io(e) => write!(f, "poll failed: {e}"),
            Self::UnknownServer => f.write_str("no such server"),
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

#[derive(Debug)]
struct Server {
    generation: u32,
    engine: Engine,
    transport: Transport,
    catalog: catalog::ServerCatalog,
}

impl Server {
    fn next_deadline(&self) -> Option<Instant> {
        let deadlines = [
            self.engine.poll_timeout(),
            self.transport.poll_timeout(),
            self.catalog.relisten_deadline(),
        ];
        deadlines.into_iter().flatten().min()
    }
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
///    [`wait`](Self::wait) and [`wait_ready`](Self::wait_ready), which leave every other event
///    queued.
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
    servers: Slab<Server>,
    next_generation: u32,
    /// Where `poll_event` looks first, so one busy server cannot starve the others' events.
    event_cursor: usize,
    /// The capability cache (catalogs of every server) and its change events.
    cache: catalog::HostCache,
    /// Children of closed servers, reaped from the tick (closing never waits).
    exiting: Reaper,
    /// Closed HTTP servers' legacy sessions being ended (`DELETE`), from the poll and tick.
    ending: closing::Ending,
    /// Principals, and each server's lanes (one engine per server and principal).
    lanes: principal::Lanes,
    /// Tasks and the calls made under each.
    tasks: task::TaskTable<(ServerId, CallId)>,
    /// Server names and the call-record sink.
    records: records::Records,
    /// Answer handlers: the host's and each server's.
    answers: answers::Handlers,
    /// The text of the event `drain` is handing out (reused: no allocation once grown).
    scratch: String,
    /// Compiled tool schemas, by definition hash.
    #[cfg(feature = "schema")]
    schemas: schema::SchemaCache,
    /// Authorization policies, disabled tools, and the calls held for the host's answer.
    authz: authz::Gate,
}

impl Host {
    /// A host with its own `mio::Poll`.
    pub fn new() -> io::Result<Self> {
        Self::with_reactor(embed::Reactor::owned()?)
    }

    /// The constructor both modes share.
    fn with_reactor(poll: embed::Reactor) -> io::Result<Self> {
        Ok(Self {
            poll,
            servers: Slab::new(),
            next_generation: 0,
            event_cursor: 0,
            cache: catalog::HostCache::new(CacheConfig::default())?,
            exiting: Reaper::default(),
            ending: closing::Ending::default(),
            lanes: principal::Lanes::default(),
            tasks: task::TaskTable::default(),
            records: records::Records::new(),
            answers: answers::Handlers::default(),
            scratch: String::new(),
            #[cfg(feature = "schema")]
            schemas: schema::SchemaCache::default(),
            authz: authz::Gate::default(),
        })
    }

    /// Starts a server as a child process and begins the era probe. Calls may be made at
    /// once; they are sent when the server is ready.
    pub fn add_stdio_server(
        &mut self,
        command: StdioCommand,
        config: Config,
    ) -> Result<ServerId, AddServerError> {
        let now = Instant::now();
        let identity = config.cache_identity.clone();
        let identity = identity.unwrap_or_else(|| command.program().to_string_lossy().into_owned());
        let (config, stored) = self.with_stored_verdict(config, &identity, false);
        let mut engine = Engine::new(config, now).map_err(AddServerError::Config)?;
        let base = self.poll.reserve(Self::STDIO_SERVER_TOKENS)?;
        let recipe = principal::Recipe::stdio(&command, engine.config());
        let program = command.program().to_string_lossy().into_owned();
        let mut driver = StdioDriver::new(command, engine.config(), base);
        driver
            .spawn(self.poll.registry(), &mut engine, now)
            .map_err(|error| AddServerError::Spawn { program, error })?;
        let mut catalog =
            catalog::ServerCatalog::new(identity, false, engine.config().cache_tenant.clone());
        if stored {
            catalog.started_from_stored_verdict();
        }
        let id = self.insert(engine, Transport::Stdio(driver), catalog);
        self.lanes.remember(id, recipe);
        Ok(id)
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
        let identity = config.cache_identity.clone().unwrap_or_else(|| opts.url.clone());
        let (config, stored) = self.with_stored_verdict(config, &identity, true);
        let mut engine = Engine::new(config, now).map_err(AddServerError::Config)?;
        let base = self.poll.reserve(Self::HTTP_SERVER_TOKENS)?;
        let config = engine.config().clone();
        let mut catalog = catalog::ServerCatalog::new(identity, true, config.cache_tenant.clone());
        if stored {
            catalog.started_from_stored_verdict();
        }
        let recipe = principal::Recipe::http(&opts, &config);
        let mut driver =
            HttpDriver::new(opts, &config, base, &mut engine, now).map_err(AddServerError::Http)?;
        driver.flush(self.poll.registry(), &mut engine, now);
        let id = self.insert(engine, Transport::Http(driver), catalog);
        self.lanes.remember(id, recipe);
        Ok(id)
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
        config.saved_discover = self.cache.stored_verdict(identity, http, &config);
        let stored = config.saved_discover.is_some();
        (config, stored)
    }

    fn insert(
        &mut self,
        engine: Engine,
        transport: Transport,
        catalog: catalog::ServerCatalog,
    ) -> ServerId {
        self.next_generation = self.next_generation.wrapping_add(1);
        let generation = self.next_generation;
        let tokens = transport.tokens();
        self.records.added(self.servers.vacant_key(), catalog.identity());
        let index = self.servers.insert(Server { generation, engine, transport, catalog });
        self.poll.commit(tokens, index);
        ServerId { index, generation }
    }

    fn server(&self, id: ServerId) -> Option<&Server> {
        self.servers.get(id.index).filter(|s| s.generation == id.generation)
    }

    fn server_mut(&mut self, id: ServerId) -> Option<&mut Server> {
        self.servers.get_mut(id.index).filter(|s| s.generation == id.generation)
    }

    /// Runs a command on a server's engine and writes what it produced right away.
    fn command<T>(
        &mut self,
        id: ServerId,
        f: impl FnOnce(&mut Engine, Instant) -> Result<T, RequestError>,
    ) -> Result<T, RequestError> {
        command_on(&mut self.servers, self.poll.registry(), id, f)
    }

    /// Answers a server request (`Event::ServerRequest`) of `server`; see
    /// [`Engine::answer`].
    pub fn answer(
        &mut self,
        server: ServerId,
        request: ServerRequestId,
        result: &RawValue,
    ) -> Result<(), AnswerError> {
        self.respond(server, |e, now| {
            roots::check_answer_resolved(e, request, result)?;
            e.answer(now, request, result)
        })
    }

    /// Refuses a server request (`Event::ServerRequest`) of `server`; see [`Engine::reject`].
    pub fn reject(
        &mut self,
        server: ServerId,
        request: ServerRequestId,
    ) -> Result<(), AnswerError> {
        self.respond(server, |e, now| e.reject(now, request))
    }

    /// [`command`](Self::command) for the answer verbs.
    fn respond(
        &mut self,
        id: ServerId,
        f: impl FnOnce(&mut Engine, Instant) -> Result<(), AnswerError>,
    ) -> Result<(), AnswerError> {
        let registry = self.poll.registry();
        let s = self.servers.get_mut(id.index).filter(|s| s.generation == id.generation);
        let s = s.ok_or(AnswerError::NotPending)?;
        let now = Instant::now();
        f(&mut s.engine, now)?;
        s.transport.flush(registry, &mut s.engine, now);
        Ok(())
    }

    /// Calls a tool. `arguments` must be a JSON object.
    pub fn call_tool(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &RawValue,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.gated(server, Method::ToolsCall, name, opts, |h, o| {
            h.command(server, |e, now| e.call_tool(now, name, arguments, o))
        })
    }

    /// Reattaches to a task on `server` by its id (one an [`Event::TaskCreated`] named, kept
    /// across a dropped connection or a restart of the host): the new call polls the task and
    /// ends with its result; see [`Engine::resume_task`]. Cancelling it sends `tasks/cancel`.
    pub fn resume_task(
        &mut self,
        server: ServerId,
        task_id: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.command(server, |e, now| e.resume_task(now, task_id, opts))
    }

    /// The task-backed calls pending on `server`: each call, its task id and the status last
    /// reported (empty for an unknown server). What to persist to resume them after a
    /// restart ([`resume_task`](Self::resume_task)).
    pub fn server_tasks(&self, server: ServerId) -> Vec<(CallId, String, Option<TaskStatus>)> {
        let Some(s) = self.server(server) else { return Vec::new() };
        s.engine.tasks().map(|(call, task, status)| (call, task.to_owned(), status)).collect()
    }

    /// Calls a tool with its arguments as JSON text (one object), checked once without
    /// allocating; see [`Engine::call_tool_json`]. No `RawValue` needed:
    /// `host.call_tool_json(server, "add", r#"{"a":1,"b":2}"#, &opts)`.
    pub fn call_tool_json(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.gated(server, Method::ToolsCall, name, opts, |h, o| {
            h.command(server, |e, now| e.call_tool_json(now, name, arguments, o))
        })
    }

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

    /// Runs a paginated listing (`tools/list`, `resources/list`, `resources/templates/list`,
    /// `prompts/list`) to the end.
    pub fn list(
        &mut self,
        server: ServerId,
        method: Method,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.command(server, |e, now| e.list(now, method, opts))
    }

    /// Reads a resource.
    pub fn read_resource(
        &mut self,
        server: ServerId,
        uri: &str,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.gated(server, Method::ResourcesRead, uri, opts, |h, o| {
            h.command(server, |e, now| e.read_resource(now, uri, o))
        })
    }

    /// Gets a prompt.
    pub fn get_prompt(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: Option<&RawValue>,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.gated(server, Method::PromptsGet, name, opts, |h, o| {
            h.command(server, |e, now| e.get_prompt(now, name, arguments, o))
        })
    }

    /// Sends a request by method name, for methods mcpoll has no verb for (an extension's,
    /// declared in `Config::extensions`, or a vendor's); see [`Engine::request_raw`]. A
    /// [`Policy`] that covers [`Method::Extension`] is asked about it, with the method name
    /// as the request's name.
    pub fn request(
        &mut self,
        server: ServerId,
        method: &str,
        params: Option<&RawValue>,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.gated(server, Method::Extension, method, opts, |h, o| {
            h.command(server, |e, now| e.request_raw(now, method, params, o))
        })
    }

    /// Asks for completions of a prompt or resource-template argument.
    pub fn complete(
        &mut self,
        server: ServerId,
        reference: &RawValue,
        argument: (&str, &str),
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.command(server, |e, now| e.complete(now, reference, argument.0, argument.1, opts))
    }

    /// Opens a `subscriptions/listen` subscription (modern servers); see [`Engine::listen`].
    pub fn listen(
        &mut self,
        server: ServerId,
        filter: &crate::proto::mcp::SubscriptionFilter,
        opts: &CallOptions,
    ) -> Result<CallId, RequestError> {
        self.command(server, |e, now| e.listen(now, filter, opts))
    }

    /// Cancels a call: its wait ends at once, and the server is told.
    pub fn cancel(&mut self, server: ServerId, call: CallId) -> Result<(), CancelError> {
        cancel_on(&mut self.servers, self.poll.registry(), server, call)
    }

    /// Closes a server: its calls fail, its process group is stopped (stdin closed, then
    /// SIGTERM after 250 ms, then SIGKILL after 250 ms more), and its handle becomes invalid
    /// once its events are drained. An HTTP server's connections close, and its legacy
    /// session, if it has one, is ended with a `DELETE` that gets 250 ms to be answered.
    /// Returns without waiting: the poll and tick reap the process and send the `DELETE`.
    /// The principals' lanes on it close with it.
    pub fn close_server(&mut self, server: ServerId) {
        self.close_lanes(server);
        let registry = self.poll.registry();
        if let Some(s) =
            self.servers.get_mut(server.index).filter(|s| s.generation == server.generation)
        {
            s.engine.close(Instant::now());
            let grace = Duration::from_millis(250);
            s.transport.shutdown(registry, grace, &mut self.exiting, &mut self.ending);
        }
        self.ending.settle(&mut self.poll);
    }

    /// Starts a degraded server (one whose process kept crashing) again now, or runs the
    /// probe or handshake (and so the OAuth flow) again on an
    /// [`Unauthorized`](ServerState::Unauthorized) one.
    pub fn restart(&mut self, server: ServerId) {
        let registry = self.poll.registry();
        if let Some(s) =
            self.servers.get_mut(server.index).filter(|s| s.generation == server.generation)
        {
            let now = Instant::now();
            s.engine.restart();
            s.engine.retry_authorization(now);
            s.transport.maintain(registry, &mut s.engine, now);
            s.transport.flush(registry, &mut s.engine, now);
        }
    }

    /// Forgets a closed server (after its events are drained), and its lanes.
    pub fn remove_server(&mut self, server: ServerId) {
        self.remove_lanes(server);
        self.authz.forget(server);
        if self.server(server).is_some() {
            self.close_server(server);
            let removed = self.servers.remove(server.index);
            self.release_tokens(server.index, removed.transport.tokens());
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
        let s = self.servers.get_mut(server.index).filter(|s| s.generation == server.generation);
        match s {
            Some(Server { transport: Transport::Http(d), engine, .. }) => {
                d.handle_redirect(registry, engine, Instant::now(), redirect)
            }
            _ => Err(crate::oauth::RedirectError::NoFlow),
        }
    }

    /// The server's state: probing, handshaking, ready with its era, closed.
    pub fn state(&self, server: ServerId) -> Option<ServerState> {
        self.server(server).map(|s| s.engine.state())
    }

    /// Why the server is [`ServerState::Unauthorized`]: the error its probe or handshake
    /// failed with (an OAuth step, credentials refused, or a local OAuth configuration
    /// problem, `LocalError::OAuthSetup`). [`restart`](Self::restart) or a new call tries again.
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

    /// The server's era verdict to keep for the next run ([`Engine::verdict`]): give it back
    /// in [`Config::saved_discover`] and the first call after the restart goes out without a
    /// probe. `None` unless the server is ready in the modern era with a verdict still fresh.
    pub fn verdict(&self, server: ServerId) -> Option<SavedVerdict> {
        let s = self.server(server)?;
        s.engine.verdict(Instant::now(), std::time::SystemTime::now())
    }

    /// The last of what the server process wrote to stderr (stdio servers).
    pub fn stderr_tail(&self, server: ServerId) -> Option<String> {
        match &self.server(server)?.transport {
            Transport::Stdio(d) => Some(d.stderr_tail()),
            #[cfg(feature = "http")]
            Transport::Http(_) => None,
        }
    }

    /// Why the server's last process ended (stdio: exit status and stderr tail), kept across
    /// restarts: what a call that failed as `Degraded` can be explained with.
    pub fn last_transport_error(&self, server: ServerId) -> Option<&TransportError> {
        self.server(server)?.engine.last_transport_error()
    }

    /// The server's process id, while it runs (stdio servers).
    pub fn pid(&self, server: ServerId) -> Option<u32> {
        match &self.server(server)?.transport {
            Transport::Stdio(d) => d.pid(),
            #[cfg(feature = "http")]
            Transport::Http(_) => None,
        }
    }

    /// The legacy HTTP session id, when the server issued one.
    #[cfg(feature = "http")]
    pub fn session_id(&self, server: ServerId) -> Option<&str> {
        match &self.server(server)?.transport {
            Transport::Http(d) => d.session_id(),
            Transport::Stdio(_) => None,
        }
    }

    /// Calls pending on the server (queued, in flight or backing off), the handshake included.
    pub fn pending(&self, server: ServerId) -> Option<usize> {
        self.server(server).map(|s| s.engine.pending())
    }

    /// The server engine's counters; `queued` includes an HTTP server's calls waiting for a
    /// connection.
    pub fn stats(&self, server: ServerId) -> Option<Stats> {
        self.server(server).map(|s| {
            let mut stats = s.engine.stats();
            stats.queued += s.transport.requests_waiting() as u64;
            stats
        })
    }

    /// Waits at most `timeout` (`None`: until something happens) for I/O or the next engine
    /// deadline, then does the work that is due and returns. A game loop passes
    /// `Some(Duration::ZERO)` once per frame.
    pub fn poll(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let queued = self.cache.has_changes() || self.has_asks();
        let wake = if queued { Some(Duration::ZERO) } else { timeout };
        self.poll_inner(wake, Wake::OnQueuedEvents)?;
        // The time the round just handled its events at: one clock read per poll.
        self.pump_catalogs(self.poll.last_now);
        Ok(())
    }

    /// One round of [`poll`](Self::poll). `wake` says whether events already queued for the
    /// host cut the wait short: they do for `poll` (the host drains them next), and not for the
    /// blocking helpers, which wait for one call and leave every other event queued: for them
    /// a queued event is no reason to return early, and taking it as one made them spin.
    fn poll_inner(&mut self, timeout: Option<Duration>, wake: Wake) -> io::Result<()> {
        let now = Instant::now();
        // The next deadline, or now when a driver has left input unread (its readiness edge
        // is spent: no new one will come for it).
        let until_due = self.poll_timeout().map(|d| d.saturating_duration_since(now));
        let wait = match (timeout, until_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // An event already queued for the host must not wait for I/O either.
        let events_queued = wake == Wake::OnQueuedEvents
            && self.servers.iter().any(|(_, s)| s.engine.queued_events() > 0);
        let wait = if events_queued { Some(Duration::ZERO) } else { wait };
        self.poll.wait(wait)?;
        // The same readiness path and tick an embedded host's program drives (`embed`).
        self.round(Instant::now());
        Ok(())
    }

    /// The next event from any server. Servers take turns, so a chatty one cannot starve the
    /// rest.
    ///
    /// The capability cache's own listings never show here; its `ToolsChanged` (and prompt and
    /// resource) events do.
    pub fn poll_event(&mut self) -> Option<(ServerId, Event<'_>)> {
        if self.catalogs_armed() {
            self.pump_catalogs(Instant::now());
        }
        if self.cache.has_changes() {
            return self.cache.next_change();
        }
        if self.has_asks() && self.take_ask() {
            return self.current_ask();
        }
        let n = self.servers.capacity().max(1);
        let start = self.event_cursor % n;
        let index = (0..n)
            .map(|i| (start + i) % n)
            .find(|&i| self.servers.get(i).is_some_and(|s| s.engine.queued_events() > 0))?;
        self.event_cursor = index + 1;
        let s = self.servers.get_mut(index)?;
        let id = ServerId { index, generation: s.generation };
        // Made in place and returned as it is: an event is 312 bytes, and moving it into a
        // pair and out again were two copies per event.
        let out = s.engine.poll_event_tagged(id);
        if let Some((_, event)) = &out {
            self.records.event(index, event);
        }
        out
    }

    /// Polls until `call` ends, leaving every other event queued (they do not cut its waits
    /// short: only I/O and deadlines do). For scripts and tests. Server requests go to the
    /// answer handlers ([`set_answer_handler`](Self::set_answer_handler)); one they do not
    /// answer ends the call at once with `LocalError::Unanswered`, since nobody else can
    /// answer while this blocks.
    pub fn wait(&mut self, server: ServerId, call: CallId) -> Result<OwnedResult, BlockingError> {
        loop {
            let s =
                self.servers.get_mut(server.index).filter(|s| s.generation == server.generation);
            let s = s.ok_or(BlockingError::UnknownServer)?;
            let event = s.engine.take_call_event(call);
            if let Some(e) = &event {
                self.records.event(server.index, e);
            }
            match event {
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
            // A server request no handler answers: nobody can while this blocks.
            if self.end_unanswerable(server, call) {
                continue;
            }
            self.poll_inner(Some(Duration::from_millis(100)), Wake::OnIo)
                .map_err(BlockingError::Io)?;
        }
    }

    /// Polls until the server is ready (or closed, or `timeout` passes) and returns its state.
    /// A server that became degraded (its process kept dying) ends the wait at once with the
    /// last transport error (for stdio: the exit status and stderr tail); one refused for want
    /// of authorization ([`ServerState::Unauthorized`]) with its authorization error.
    pub fn wait_ready(
        &mut self,
        server: ServerId,
        timeout: Duration,
    ) -> Result<ServerState, BlockingError> {
        let deadline = crate::time::later(Instant::now(), timeout);
        loop {
            let s = self.server(server).ok_or(BlockingError::UnknownServer)?;
            let state = s.engine.state();
            if matches!(state, ServerState::Ready(..) | ServerState::Closed) {
                return Ok(state);
            }
            if let Some(e) = s.engine.authorization_error() {
                // Refused for want of authorization: nothing changes until the host acts.
                return Err(BlockingError::Call(e.clone()));
            }
            if s.engine.is_degraded() {
                // Restarts are suspended: no process will come up within any sane wait. The
                // last failure says why (for a process: its exit status and stderr tail).
                let e = s
                    .engine
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
        let call = self.call_tool_json(server, name, arguments, opts)?;
        self.wait(server, call)
    }
}

/// [`Host::command`] on the parts of a host it needs (so [`Commands`] can run it while an
/// event borrows the rest).
fn command_on<T>(
    servers: &mut Slab<Server>,
    registry: &mio::Registry,
    id: ServerId,
    f: impl FnOnce(&mut Engine, Instant) -> Result<T, RequestError>,
) -> Result<T, RequestError> {
    let s = servers.get_mut(id.index).filter(|s| s.generation == id.generation);
    let s = s.ok_or(RequestError::Closed)?;
    let now = Instant::now();
    let out = f(&mut s.engine, now)?;
    s.transport.flush(registry, &mut s.engine, now);
    Ok(out)
}

/// [`Host::cancel`] on the parts of a host it needs (for [`Commands`] too).
fn cancel_on(
    servers: &mut Slab<Server>,
    registry: &mio::Registry,
    server: ServerId,
    call: CallId,
) -> Result<(), CancelError> {
    let s = servers.get_mut(server.index).filter(|s| s.generation == server.generation);
    let s = s.ok_or(CancelError::NotPending)?;
    let now = Instant::now();
    s.engine.cancel(now, call)?;
    s.transport.flush(registry, &mut s.engine, now);
    Ok(())
}

impl Drop for Host {
    fn drop(&mut self) {
        // Drivers kill their process groups when dropped; dropping the slab does it. The
        // reaper, dropped next, kills and reaps (for a bounded time) closed servers' children.
        self.servers.clear();
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
