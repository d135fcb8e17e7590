//! mcpoll: an MCP (Model Context Protocol) client engine for hosts that run their own loop.
//!
//! The core, [`Engine`], is a deterministic state machine for one server: it never reads a
//! clock, never does I/O and never spawns a thread. Every entry point that depends on time
//! takes `now`, and the engine says when it next needs waking ([`Engine::poll_timeout`]). It
//! speaks both protocol eras: the stateless 2026-07-28 revision by default, and the 2025-11-25
//! `initialize` handshake as a fallback chosen per server by probing with `server/discover`.
//!
//! Thin drivers on `mio` move the bytes: [`driver::stdio`] runs a server as a child process
//! over pipes; [`driver::http`] speaks Streamable HTTP/1.1 over a small keep-alive pool, with
//! TLS by rustls ([`driver::tls`]) and CONNECT proxies. [`Host`] owns a `mio::Poll` and any
//! number of servers, each with its own engine, pending table, breakers and limits, so one
//! server's failure never touches another's calls.
//!
//! The engine is also where resilience lives, as deterministic policy: retries of transient
//! failures of calls that are safe to repeat (read-only, idempotent, keyed), with backoff
//! bounded by the deadline; `DeliveryUnknown` for writes whose reply was lost; circuit
//! breakers; an in-flight limit with a FIFO queue; supervised restart of crashed stdio servers.
//! In steady state a tool call allocates nothing: frames are validated and read in place by
//! [`proto::json`], and every buffer is reused.
//!
//! # Call order (engine)
//!
//! After any `handle_*` input or command: drain [`Engine::poll_transmit`], read
//! [`Engine::poll_timeout`], drain [`Engine::poll_event`]. See [`Engine`].
//!
//! # Features
//!
//! | feature | default | adds |
//! | --- | --- | --- |
//! | `stdio` | yes | `driver::stdio` (child processes over mio pipes) and [`Host`] |
//! | `http` | yes | `driver::http`, `driver::tls`, `codec::http1` (httparse, rustls, webpki-roots) |
//!
//! The engine, codecs and protocol types build with no features at all.
#![forbid(unsafe_code)]
#![cfg_attr(not(fuzzing), warn(missing_docs))]
#![warn(missing_debug_implementations, unreachable_pub, elided_lifetimes_in_paths)]

mod auth;
pub mod codec;
pub mod config;
pub mod engine;
pub mod error;
pub mod proto;
#[cfg(feature = "http")]
pub(crate) mod session;

#[cfg(any(fuzzing, test))]
#[doc(hidden)]
pub mod fuzzing;

#[cfg(feature = "stdio")]
pub mod driver;
#[cfg(feature = "stdio")]
pub mod host;

#[cfg(feature = "http")]
pub use auth::oauth;
pub use auth::AuthChallenge;
pub use config::Config;
pub use config::RestartPolicy;
pub use engine::{
    BreakerPolicy, BreakerState, CallId, CallOptions, CallRecord, CallResult, Engine, Event,
    Idempotency, ListKind, OperationClass, RetryPolicy, ServerState, Stats, Transmit, TransmitKind,
    TransportEvent,
};
pub use error::{
    CallError, CancelError, ConfigError, LocalError, PeerError, RequestError, RpcError,
    TransportError,
};
pub use proto::mcp::{Method, ResultType, SubscriptionFilter};
pub use proto::meta::TraceContext;
pub use proto::version::{Era, EraPreference, ProtocolVersion};

#[cfg(feature = "stdio")]
pub use driver::stdio::StdioCommand;
#[cfg(feature = "stdio")]
pub use host::{Host, ServerId};
