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

/// A test's wait on its own `mio::Poll`: a wait that a signal cut short (Linux ends
/// `epoll_wait` with `EINTR` after a stop and continue, handler or not, as on a busy CI
/// machine) returns with no events, as a wait that timed out.
#[cfg(test)]
pub(crate) fn wait_events(
    poll: &mut mio::Poll,
    events: &mut mio::Events,
    timeout: Option<std::time::Duration>,
) {
    match poll.poll(events, timeout) {
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => events.clear(),
        r => r.expect("epoll_wait"),
    }
}
