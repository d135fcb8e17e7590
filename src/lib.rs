//! mcpoll: an MCP (Model Context Protocol) client engine for hosts that run their own loop.
//!
//! The core, [`Engine`], is a deterministic state machine for one server: it never reads a
//! clock, never does I/O and never spawns a thread. Every entry point that depends on time
//! takes `now`, and the engine says when it next needs waking ([`Engine::poll_timeout`]). It
//! speaks both protocol eras: the stateless 2026-07-28 revision by default, and the 2025-11-25
//! `initialize` handshake as a fallback chosen per server by probing with `server/discover`.
//!
//! Thin drivers on `mio` move the bytes: [`StdioDriver`] runs a server as a child process
//! over pipes; [`HttpDriver`] speaks Streamable HTTP/1.1 over a small keep-alive pool, with
//! TLS by rustls ([`TlsOptions`]) and CONNECT proxies. [`Host`] owns a `mio::Poll` and any
//! number of servers, each with its own engine, pending table, breakers and limits, so one
//! server's failure never touches another's calls.
//!
//! The engine is also where resilience lives, as deterministic policy: retries of transient
//! failures of calls that are safe to repeat (read-only, idempotent, keyed), with backoff
//! bounded by the deadline; `DeliveryUnknown` for writes whose reply was lost; circuit
//! breakers; an in-flight limit with a FIFO queue; supervised restart of crashed stdio servers.
//! In steady state a tool call allocates nothing: frames are validated and read in place by
//! a validating JSON scanner of its own, and every buffer is reused.
//!
//! # Example
//!
//! A server over stdio, one tool call, and the events that say how it went. [`Host::poll`]
//! sleeps until there is I/O or a deadline is due (the call's timeout at the latest), then does
//! the work; [`Host::poll_event`] hands out what happened, one event at a time.
//!
//! ```no_run
//! use mcpoll::{CallOptions, Config, Event, Host, StdioCommand};
//! use serde_json::value::RawValue;
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let mut host = Host::new()?;
//!     let command = StdioCommand::from_command_line("python3 server.py")?;
//!     let server = host.add_stdio_server(command, Config::default())?;
//!     let args = RawValue::from_string(r#"{"text":"hi"}"#.into())?;
//!     let call = host.call_tool(server, "echo", &args, &CallOptions::default())?;
//!     loop {
//!         host.poll(None)?; // the call is sent once the server is ready
//!         while let Some((_server, event)) = host.poll_event() {
//!             match event {
//!                 Event::Ready { era, version } => println!("ready: {era}, {version}"),
//!                 Event::CallDone { call: c, result, .. } if c == call => {
//!                     println!("{}", result.json());
//!                     return Ok(());
//!                 }
//!                 Event::CallFailed { call: c, error, .. } if c == call => {
//!                     return Err(error.into());
//!                 }
//!                 // The server went away: its exit status and last stderr line, or why not.
//!                 Event::TransportLost { error, .. } => eprintln!("server lost: {error}"),
//!                 Event::Closed { error } => eprintln!("server closed: {error}"),
//!                 _ => {}
//!             }
//!         }
//!     }
//! }
//! ```
//!
//! A game or control loop passes `Some(Duration::ZERO)` to [`Host::poll`] once per frame
//! instead (see [`Host`]); a script waits for one call with [`Host::call_tool_blocking`]. The
//! repository's `examples/` run against a small echo server of its own (`cargo run --example
//! quickstart`).
//!
//! # Start here
//!
//! The ten items most hosts need:
//!
//! - [`Host`]: owns the servers and the poll; every verb below is one of its methods;
//! - [`StdioCommand`] and [`HttpOptions`]: how to reach a server (a child process, or a URL);
//! - [`Config`]: per server (timeouts, limits, retries, what server requests are answered);
//! - [`ServerId`] and [`CallId`]: the handles `add_*_server` and the call verbs return;
//! - [`CallOptions`]: per call (timeout, progress, idempotency, trace context);
//! - [`Event`]: everything that happens, from [`Host::poll_event`];
//! - [`CallError`]: why a call failed, in four kinds (protocol, peer, transport, local);
//! - [`OwnedResult`]: what the blocking helpers return ([`CallResult`] in events borrows).
//!
//! # By what a host does
//!
//! **Connect.** [`Host::new`], then [`Host::add_stdio_server`] ([`StdioCommand`],
//! [`CommandLineError`]) or [`Host::add_http_server`] ([`HttpOptions`], [`TlsOptions`],
//! [`ProxyChoice`], [`Resolver`], [`UrlError`]); failures are [`AddServerError`]. A whole
//! `mcpServers` file: [`Host::from_config`] ([`ConfigFile`], [`ServerNames`]). The era
//! ([`Era`], [`ProtocolVersion`], [`EraPreference`]) is probed per server; [`ServerState`] and
//! [`Host::wait_ready`] tell where it is. Crashed stdio servers are restarted
//! ([`RestartPolicy`], [`Event::TransportLost`], [`ProcessExit`]); [`Host::close_server`]
//! never waits.
//!
//! **Call.** [`Host::call_tool`], [`Host::list_tools`], [`Host::read_resource`],
//! [`Host::get_prompt`], [`Host::complete`], [`Host::listen`] return a [`CallId`] at once; the
//! result comes as [`Event::CallDone`] ([`CallResult`]) or [`Event::CallFailed`]
//! ([`CallError`]: [`RpcError`], [`PeerError`], [`TransportError`], [`LocalError`]).
//! [`Host::cancel`] ends one; [`CallOptions`] and [`Idempotency`] say what may be retried
//! ([`RetryPolicy`]), and circuit breakers ([`BreakerPolicy`], [`Event::Breaker`]) fail fast
//! while a server keeps failing. Scripts use [`Host::call_tool_blocking`] and
//! [`Host::wait`] ([`BlockingError`]). Calls for a user or tenant go on a lane
//! ([`Host::lane`], [`Principal`]); a task bounds a group of calls ([`Host::task`],
//! [`TaskOptions`]).
//!
//! **Answer.** What the server asks (elicitation, sampling, roots) arrives as
//! [`Event::ServerRequest`] when [`Config::answers`] declares it ([`ServerRequestKinds`], the
//! `server-requests` feature); reply with [`Host::answer`] or [`Host::reject`]
//! ([`AnswerError`]). [`elicitation_defaults`] fills a form from its schema's defaults; roots
//! are [`Host::set_roots`] inside a [`RootsBoundary`].
//!
//! **Cache.** Tool, prompt and resource catalogs are cached per server under the server's
//! hints: [`Host::tool_catalog_blocking`], [`Host::tool`], [`Client::search_tools`] (the
//! core's getters read through a `Host` too), [`Host::watch_catalogs`] ([`CatalogView`],
//! [`CatalogChange`], [`ClientEvent::ToolsChanged`]), bounded by [`CacheConfig`]
//! ([`Host::with_cache`]).
//!
//! **Authorize.** A bearer token ([`HttpOptions::bearer`]), a [`TokenProvider`], or the whole
//! OAuth flow ([`HttpOptions::oauth`], module [`oauth`]); refusals are
//! [`PeerError::AuthRequired`] and [`PeerError::Authorization`]. Per principal:
//! [`CredentialSource`].
//!
//! **Embed.** [`Host::embedded`] lives in the program's own [`mio`] loop:
//! [`Host::handle_event`], [`Host::handle_timeout`], [`Host::poll_timeout`]; the contract is on
//! [`Host::embedded`].
//!
//! **Observe.** Every call ends with a [`CallRecord`] ([`Host::set_record_sink`],
//! [`RecordSink`], [`TraceContext`]); counters in [`Stats`] ([`Host::stats`]) and
//! [`CacheStats`]; a server's stderr in [`Host::stderr_tail`].
//!
//! **Drive the engine yourself.** [`Engine`] is the sans-IO core a [`Host`] runs per server.
//! After any `handle_*` input or command: drain [`Engine::poll_transmit`] ([`Transmit`]), read
//! [`Engine::poll_timeout`], drain [`Engine::poll_event`]. [`StdioDriver`] and [`HttpDriver`]
//! are the drivers the host uses.
//!
//! # Features
//!
//! | feature | default | adds |
//! | --- | --- | --- |
//! | `stdio` | yes | [`StdioDriver`] (child processes over mio pipes), [`Host`], and the [`mio`] re-export |
//! | `http` | yes | [`HttpDriver`], [`HttpOptions`], TLS and proxies (httparse, rustls, webpki-roots), [`oauth`] |
//! | `server-requests` | yes | answering the server's own requests (elicitation, sampling, roots) declared in [`Config::answers`]; without it nothing can be declared and every server request but `ping` is answered "Method not found" |
//! | `cli` | no | the `mcpoll` command-line binary only (adds `ctrlc`); the library is unchanged |
//! | `schema` | no | `Schema` (JSON Schema checks) and checked tool calls on `Host` (adds `regex-lite`, for `pattern`) |
//!
//! The engine, codecs and protocol types build with no features at all.
//!
//! # Module map
//!
//! For readers of the source: the crate is built in floors, each importing from the floors
//! below it and none importing from above. CI checks the floors that are easiest to break:
//! `proto` imports nothing above the first floor, `error` and `config` nothing above the
//! second, and every module below the drivers' floor, and `client` above it, reads no clock
//! and touches no `mio` outside its tests. Types several floors name live on the lowest of
//! them: the `WWW-Authenticate` challenge and the kinds of server request in `proto`, the
//! OAuth flow's errors in `error`. The core's own events (catalog changes, authorization
//! asks) are not the engine's: they ride in [`Event::Client`] as a [`ClientEvent`], a slot the
//! engine leaves empty, and the engine, not `config`, checks a saved era verdict.
//!
//! | floor | module | job |
//! | --- | --- | --- |
//! | 1 | `proto` | the wire vocabulary, stateless: the validating JSON scanner, the JSON-RPC envelope, MCP methods, `_meta`, versions, header values, the `WWW-Authenticate` challenge |
//! | 1 | `time` | deadline arithmetic that cannot overflow (`later`, for durations a peer or host chose) |
//! | 1 | `codec` | bytes in, frames out: newline-delimited JSON, HTTP/1.1 responses, server-sent events; incremental and capped |
//! | 2 | `error`, `config` | the public error types (the OAuth flow's in `error::oauth`) and the per-server [`Config`] |
//! | 3 | `engine` | one server's protocol state machine, sans-IO: pending table, lifecycle and era probe, retries, breaker, limits, deadlines, server requests (and `engine::answer_checks`, the local checks of the host's answers). `engine/mod.rs` holds [`Engine`] and all its methods; the modules under it own the tables and the pure decisions and import nothing from it |
//! | 3 | `schema` | JSON Schema checks (feature `schema`) |
//! | 3 | `catalog` | the capability cache's sans-IO parts: keys, hints, listings, the store, refresh walks, diffs, search |
//! | 3 | `auth` | challenges and the OAuth flow as a sans-IO machine |
//! | 4 | `session` | what Streamable HTTP's requests and responses mean for MCP, sans-IO: it turns the engine's transmits into exchanges, writes their requests' bytes, and reads their responses from a connection's HTTP/1.1 parser back into engine inputs |
//! | 5 | `driver` | the only I/O: child processes over pipes, HTTP/1.1 over TCP and TLS, the URL parser, the reaper, and `driver::transport`, one server's driver whichever its transport |
//! | 6 | `client` | many servers, sans-IO ([`Client`]): every server's engine and catalog context, the cache glue, principals and lanes, tasks, records, authorization, answer handlers; `now` on every verb |
//! | 6 | `config_file` | the `mcpServers` file read into each server's [`Config`] and driver options: a parse whose only I/O is [`ConfigFile::load`]'s read of the file and the canonical path of its folder, which relative paths are taken from |
//! | 7 | `host` | the shell on one `mio::Poll`: tokens, readiness, drivers, closing and reaping, the blocking helpers, servers started from a config file, root directories; [`Host`] wraps the core's verbs at the current time |
//! | - | `internal` | what fuzz targets and benches reach inside (hidden, unstable) |
//! | - | `bin/mcpoll` | the command-line client (feature `cli`) |
//!
//! Tests in `src` take one of two places: a module's unit tests in the `mod tests` that ends
//! its file, and a module's scenario suite in its `tests.rs` (split into `tests/*.rs` when it
//! grows, the shared harness staying in `tests.rs`).
#![forbid(unsafe_code)]
#![cfg_attr(not(fuzzing), warn(missing_docs))]
#![warn(missing_debug_implementations, unreachable_pub, elided_lifetimes_in_paths)]

mod auth;
// The capability cache; the many-server core wires it in, so it is built with it.
#[cfg(feature = "stdio")]
mod catalog;
mod codec;
mod config;
mod engine;
mod error;
mod proto;
mod redact;
#[cfg(feature = "schema")]
mod schema;
#[cfg(feature = "http")]
mod session;
mod time;

#[cfg(feature = "stdio")]
mod client;
#[cfg(feature = "stdio")]
mod config_file;
#[cfg(feature = "stdio")]
mod driver;
#[cfg(feature = "stdio")]
mod host;

#[doc(hidden)]
pub mod internal;

#[cfg(feature = "http")]
pub use auth::oauth;
#[cfg(feature = "stdio")]
pub use catalog::CatalogChange;
pub use config::{
    BreakerPolicy, CacheConfig, Config, RestartPolicy, RetryPolicy, SavedVerdict,
    ServerRequestKinds,
};
pub use engine::answer_checks::elicit::elicitation_defaults;
pub use engine::{
    BreakerState, CallId, CallOptions, CallRecord, CallResult, Engine, Event, FailureCounts,
    Idempotency, ListKind, OperationClass, RecordSink, RootsBoundary, RootsBoundaryError,
    ServerRequestId, ServerState, Stats, TaskMode, TaskStatus, Transmit, TransmitKind,
    TransportEvent, TransportKind, WireId, MAX_TASK_ID_BYTES,
};
pub use error::{
    AnswerError, AuthorizeError, CallError, CancelError, CloseReason, ConfigError, LocalError,
    PeerError, ProcessExit, RequestError, RpcError, TlsFailure, TransportError,
};
pub use proto::annotations::ToolAnnotations;
pub use proto::challenge::AuthChallenge;
pub use proto::mcp::{Method, ResultType, ServerRequestKind, SubscriptionFilter};
pub use proto::meta::TraceContext;
pub use proto::trace::{TraceContextError, TraceId};
pub use proto::version::{Era, EraPreference, ProtocolVersion};
#[cfg(feature = "schema")]
pub use schema::{Schema, SchemaError, SchemaLimits, SchemaViolation};

/// The `mio` this crate is built on, for programs that embed a [`Host`] in their own
/// `mio::Poll` ([`Host::embedded`]): a matching version without a dependency of their own.
#[cfg(feature = "stdio")]
pub use mio;

#[cfg(feature = "stdio")]
pub use client::{AccessRequest, Confirm, Decision, DefaultPolicy, Policy};
#[cfg(feature = "stdio")]
pub use client::{
    Answer, AnswerHandler, CacheStats, CatalogError, CatalogView, Client, ClientEvent, Commands,
    HostEvent, ServerId,
};
#[cfg(feature = "stdio")]
pub use client::{CapabilityStore, EntryKind, StoreKey, StoredEntry, StoredPage};
#[cfg(feature = "stdio")]
pub use client::{
    CredentialSource, Credentials, LaneTarget, Principal, PrincipalError, PrincipalId,
};
#[cfg(feature = "stdio")]
pub use client::{TaskCallError, TaskError, TaskId, TaskInfo, TaskOptions, MAX_TASK_BUDGET};
#[cfg(feature = "stdio")]
pub use config_file::{ConfigFile, ConfigFileError, ConfigFileErrorKind, ConfiguredServer};
#[cfg(feature = "stdio")]
pub use driver::stdio::{CommandLineError, StdioCommand, StdioDriver, SAFE_ENV_VARS};
#[cfg(all(feature = "stdio", feature = "schema"))]
pub use host::ToolCallError;
#[cfg(feature = "stdio")]
pub use host::{AddServerError, BlockingError, EmbedError, ForeignToken, Host, OwnedResult};
#[cfg(feature = "stdio")]
pub use host::{FromConfigError, ServerNames};
#[cfg(feature = "stdio")]
pub use host::{LaneError, TaskScope};

#[cfg(feature = "http")]
pub use driver::http::{
    AssertionFile, HttpDriver, HttpOptions, HttpSetupError, Resolver, StaticToken, SystemResolver,
    TokenProvider,
};
#[cfg(feature = "http")]
pub use driver::tls::{TlsOptions, TlsSetupError};
#[cfg(feature = "http")]
pub use driver::url::{ProxyChoice, UrlError};
