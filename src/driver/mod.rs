//! Drivers: the only code that does I/O. Each moves bytes between one transport and one
//! [`Engine`](crate::Engine), through a codec, and obeys mio's readiness rules (drain until
//! `WouldBlock`, treat events as hints, never `write_all` on a non-blocking source).

pub(crate) mod reap;
pub(crate) mod stdio;
pub(crate) mod transport;

#[cfg(feature = "http")]
pub(crate) mod http;
#[cfg(feature = "http")]
pub(crate) mod tls;
#[cfg(feature = "http")]
pub(crate) mod url;
