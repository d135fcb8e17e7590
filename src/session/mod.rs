//! Transport sessions without I/O: what a transport's requests and responses mean for MCP,
//! decided apart from the sockets that carry them, so it can be tested with simulated time.
//!
//! A driver moves bytes; a session decides which headers a message gets, what a response
//! status means, when a stream is reopened, and what the engine is told.

pub(crate) mod http;
