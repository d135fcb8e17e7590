//! Host name resolution off the poll loop.
//!
//! The system resolver (`getaddrinfo`) has no non-blocking form, and a slow DNS server can
//! hold it for seconds: called on the loop, it would stall every other server's calls on
//! the same host. So a [`Lookup`] runs the [`Resolver`] on a short-lived helper thread and
//! the loop learns of the result through a pipe registered with the driver's token: the
//! thread drops its end when done, which makes the loop's end readable (hang-up). The
//! engine, the session and the drivers stay single-threaded: the thread touches nothing but
//! the resolver, a channel and its end of the pipe, and it ends with the lookup.
//!
//! IP literals need no resolver and no thread: they are taken as they are.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::sync::Arc;

use mio::unix::pipe;
use mio::{Interest, Registry, Token};

/// Turns a host name into addresses. Called on a helper thread, never on the poll loop, so
/// it may block; it is never asked about an IP literal.
///
/// [`SystemResolver`] (the default) asks the system resolver. A host with its own DNS
/// client, a cache, or a fixed table supplies its own with
/// [`HttpOptions::resolver`](super::HttpOptions::resolver).
pub trait Resolver: Send + Sync + fmt::Debug {
    /// The addresses of `host` (a name, lowercase, without brackets) at `port`.
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>>;
}

/// The system resolver (`getaddrinfo`, through `std`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok((host, port).to_socket_addrs().map_err(no_address)?.collect())
    }
}

/// A failed lookup as the kind the transport error names ("the host name did not
/// resolve"): the standard library's is uncategorized, which told a user with a mistyped host
/// name nothing. The system's own words are kept as the error's text; an error of the
/// system's own (an errno: too many open files) keeps its kind.
fn no_address(e: io::Error) -> io::Error {
    if e.raw_os_error().is_some() {
        return e;
    }
    io::Error::new(io::ErrorKind::NotFound, e)
}

/// The addresses of an IP literal, without asking anyone.
pub(super) fn literal(host: &str, port: u16) -> Option<Vec<SocketAddr>> {
    host.parse::<IpAddr>().ok().map(|ip| vec![SocketAddr::new(ip, port)])
}

/// One resolution running on a helper thread.
#[derive(Debug)]
pub(super) struct Lookup {
    result: mpsc::Receiver<io::Result<Vec<SocketAddr>>>,
    /// Readable (hang-up) once the thread is done.
    done: pipe::Receiver,
}

impl Lookup {
    /// Starts resolving `host:port` on a helper thread; readiness on `token` says it ended.
    pub(super) fn start(
        resolver: &Arc<dyn Resolver>,
        host: &str,
        port: u16,
        registry: &Registry,
        token: Token,
    ) -> io::Result<Self> {
        let (sender, mut done) = pipe::new()?;
        registry.register(&mut done, token, Interest::READABLE)?;
        let (tx, result) = mpsc::channel();
        let resolver = Arc::clone(resolver);
        let host = host.to_owned();
        let spawned = std::thread::Builder::new().name("mcpoll-resolve".into()).spawn(move || {
            let r = resolver.resolve(&host, port).and_then(|addrs| {
                if addrs.is_empty() {
                    Err(io::Error::new(io::ErrorKind::NotFound, "no address for host"))
                } else {
                    Ok(addrs)
                }
            });
            // The loop may have given up on this lookup; then nobody reads the result.
            let _ = tx.send(r);
            // Closing the write end wakes the loop; writing to it instead could raise
            // SIGPIPE in a host that did not ignore it, once the loop had dropped its end.
            drop(sender);
        });
        if let Err(e) = spawned {
            let _ = registry.deregister(&mut done);
            return Err(e);
        }
        Ok(Self { result, done })
    }

    /// The result, once the thread has sent it; `None` while it runs. Readiness is a hint,
    /// so a spurious call just finds nothing yet.
    pub(super) fn poll(&mut self) -> Option<io::Result<Vec<SocketAddr>>> {
        match self.result.try_recv() {
            Ok(r) => Some(r),
            Err(mpsc::TryRecvError::Empty) => None,
            // The thread ended without sending: it panicked in the resolver.
            Err(mpsc::TryRecvError::Disconnected) => {
                Some(Err(io::Error::other("the resolver panicked")))
            }
        }
    }

    /// Stops listening for the result (the thread finishes on its own and is not joined).
    pub(super) fn close(mut self, registry: &Registry) {
        let _ = registry.deregister(&mut self.done);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    /// The system's lookup failure is uncategorized: it becomes the kind the transport error
    /// shows as "the host name did not resolve", its text kept.
    #[test]
    fn a_failed_lookup_says_the_name_has_no_address() {
        let system =
            io::Error::other("failed to lookup address information: Name or service not known");
        let e = no_address(system);
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("Name or service not known"), "{e}");
        let shown = crate::TransportError::ConnectFailed(e.kind()).to_string();
        assert_eq!(shown, "could not connect: the host name did not resolve");
        let errno = io::Error::from_raw_os_error(24);
        assert_eq!(no_address(errno).raw_os_error(), Some(24), "an errno keeps its kind");
    }

    /// Answers `addrs` once the test opens the gate.
    #[derive(Debug)]
    struct Gated {
        addrs: Vec<SocketAddr>,
        gate: Mutex<mpsc::Receiver<()>>,
    }

    impl Resolver for Gated {
        fn resolve(&self, _: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
            let _ = self.gate.lock().map(|g| g.recv());
            Ok(self.addrs.clone())
        }
    }

    fn gated(addrs: Vec<SocketAddr>) -> (Arc<dyn Resolver>, mpsc::Sender<()>) {
        let (open, gate) = mpsc::channel();
        (Arc::new(Gated { addrs, gate: Mutex::new(gate) }), open)
    }

    /// Polls until an event comes; its token.
    fn woken(poll: &mut mio::Poll) -> Token {
        let mut events = mio::Events::with_capacity(4);
        loop {
            crate::driver::wait_events(poll, &mut events, Some(Duration::from_secs(5)));
            if let Some(e) = events.iter().next() {
                return e.token();
            }
        }
    }

    #[test]
    fn literals_need_no_resolver() {
        let v4 = literal("127.0.0.1", 8080).unwrap();
        assert_eq!(v4, vec!["127.0.0.1:8080".parse().unwrap()]);
        let v6 = literal("::1", 443).unwrap();
        assert_eq!(v6, vec!["[::1]:443".parse().unwrap()]);
        assert!(literal("example.com", 80).is_none());
    }

    #[test]
    fn the_result_arrives_with_a_readiness_event_on_the_token() {
        let mut poll = mio::Poll::new().unwrap();
        let addr: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let (resolver, open) = gated(vec![addr]);
        let mut lookup = Lookup::start(&resolver, "a.test", 1, poll.registry(), Token(7)).unwrap();
        assert!(lookup.poll().is_none(), "the resolver waits for the gate");
        open.send(()).unwrap();
        assert_eq!(woken(&mut poll), Token(7));
        assert_eq!(lookup.poll().unwrap().unwrap(), vec![addr]);
        lookup.close(poll.registry());
    }

    #[test]
    fn an_empty_answer_is_not_found() {
        let mut poll = mio::Poll::new().unwrap();
        let (resolver, open) = gated(Vec::new());
        let mut lookup = Lookup::start(&resolver, "a.test", 1, poll.registry(), Token(0)).unwrap();
        open.send(()).unwrap();
        assert_eq!(woken(&mut poll), Token(0));
        assert_eq!(lookup.poll().unwrap().unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
