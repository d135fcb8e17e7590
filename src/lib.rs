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
//! # Call order (engine)
//!
//! After any `handle_*` input or command: drain [`Engine::poll_transmit`], read
//! [`Engine::poll_timeout`], drain [`Engine::poll_event`]. See [`Engine`].
//!
//! # Embedding (host)
//!
//! [`Host::new`] owns a `mio::Poll`; [`Host::poll`] waits on it and does a bounded round of
//! work. [`Host::embedded`] lives in the program's own mio loop instead: it registers on the
//! program's `Registry` within a token range, the program forwards events
//! ([`Host::handle_readiness`]) and ticks it when [`Host::poll_timeout`] is due
//! ([`Host::handle_timeout`]). Both modes run the same code; the contract (clock, work per
//! call, tokens) is on [`Host::embedded`].
//!
//! # Features
//!
//! | feature | default | adds |
//! | --- | --- | --- |
//! | `stdio` | yes | [`StdioDriver`] (child processes over mio pipes) and [`Host`] |
//! | `http` | yes | [`HttpDriver`], [`HttpOptions`], TLS and proxies (httparse, rustls, webpki-roots) |
//! | `cli` | no | the `mcpoll` command-line binary only (adds `ctrlc`); the library is unchanged |
//! | `schema` | no | `Schema` (JSON Schema checks) and checked tool calls on `Host` (no new crate) |
//!
//! The engine, codecs and protocol types build with no features at all.
#![forbid(unsafe_code)]
#![cfg_attr(not(fuzzing), warn(missing_docs))]
#![warn(missing_debug_implementations, unreachable_pub, elided_lifetimes_in_paths)]

mod auth;
// The capability cache; the host wires it in. Some of its parts (per-page lookups, resource
// templates, the canonical text) serve only tests and `benches/catalog` so far.
#[allow(dead_code)]
mod catalog;
mod codec;
mod config;
mod engine;
mod error;
mod proto;
#[cfg(feature = "http")]
mod redact;
#[cfg(feature = "schema")]
mod schema;
#[cfg(feature = "http")]
mod session;

#[cfg(feature = "stdio")]
mod driver;
#[cfg(feature = "stdio")]
mod host;

#[doc(hidden)]
pub mod internal;

#[cfg(feature = "http")]
pub use auth::oauth;
pub use auth::AuthChallenge;
pub use catalog::CatalogChange;
pub use config::{
    BreakerPolicy, CacheConfig, Config, RestartPolicy, RetryPolicy, ServerRequestKinds,
};
pub use engine::{
    BreakerState, CallId, CallOptions, CallRecord, CallResult, Engine, Event, ExchangeFailure,
    FailureCounts, Idempotency, ListKind, OperationClass, ParamHeaders, RecordSink, RootsBoundary,
    RootsBoundaryError, ServerRequestId, ServerRequestKind, ServerState, Stats, Transmit,
    TransmitKind, TransportEvent, TransportKind, WireId,
};
pub use error::{
    AnswerError, CallError, CancelError, CloseReason, ConfigError, LocalError, PeerError,
    ProcessExit, RequestError, RpcError, TlsFailure, TransportError,
};
pub use proto::elicit::elicitation_defaults;
pub use proto::mcp::{Method, ResultType, SubscriptionFilter};
pub use proto::meta::TraceContext;
pub use proto::trace::{TraceContextError, TraceId};
pub use proto::version::{Era, EraPreference, ProtocolVersion};
#[cfg(feature = "schema")]
pub use schema::{Schema, SchemaError, SchemaLimits, SchemaViolation};

#[cfg(feature = "stdio")]
pub use driver::stdio::{CommandLineError, StdioCommand, StdioDriver, SAFE_ENV_VARS};
#[cfg(all(feature = "stdio", feature = "schema"))]
pub use host::ToolCallError;
#[cfg(feature = "stdio")]
pub use host::{
    AddServerError, BlockingError, CacheStats, CatalogError, CatalogView, EmbedError, ForeignToken,
    Host, OwnedResult, ServerId,
};
#[cfg(feature = "stdio")]
pub use host::{
    ConfigFile, ConfigFileError, ConfigFileErrorKind, ConfiguredServer, FromConfigError,
    ServerNames,
};
#[cfg(feature = "stdio")]
pub use host::{
    CredentialSource, Credentials, LaneError, LaneTarget, Principal, PrincipalError, PrincipalId,
};
#[cfg(feature = "stdio")]
pub use host::{
    TaskCallError, TaskError, TaskId, TaskInfo, TaskOptions, TaskScope, MAX_TASK_BUDGET,
};

#[cfg(feature = "http")]
pub use driver::http::{
    HttpDriver, HttpOptions, HttpSetupError, Resolver, StaticToken, SystemResolver, TokenProvider,
};
#[cfg(feature = "http")]
pub use driver::tls::{TlsOptions, TlsSetupError};
#[cfg(feature = "http")]
pub use driver::url::{ProxyChoice, UrlError};
