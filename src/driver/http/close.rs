//! Ending a legacy session without waiting for the server: the `DELETE` with `Mcp-Session-Id`
//! (PROTOCOL.md §6.2) goes out on a non-blocking connection of its own ([`OneShot`], the same
//! TCP, CONNECT and TLS path the OAuth flow's requests take), moved on by readiness events
//! and dropped at its deadline (the close's grace), answered or not.
//!
//! A [`SessionEnd`] outlives its driver: a host removes a server right after closing it, so
//! the ends of closed servers wait in the host's [`SessionEnds`], which its poll and tick
//! drive, as the host's reaper holds closed servers' processes. Ending a session is a courtesy
//! to the server (which forgets idle sessions anyway), so none of it is worth stalling a
//! loop for: at most [`MAX_ENDING`] are outstanding, and past that the oldest is dropped.

use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Registry, Token};

use super::fetch::{encode, OneShot, Progress};
use super::instances::{Instance, Instances};
use crate::driver::tls::TlsConfig;
use crate::session::http::HttpSession;

/// Largest response body read: what the server says does not matter, only that it answered.
const MAX_BODY: u64 = 16 * 1024;
/// Session ends a [`SessionEnds`] holds at most. Each costs a socket (and a TLS session)
/// until its answer or deadline, and a host closing every server at once must not run out of
/// descriptors for them.
pub(crate) const MAX_ENDING: usize = 64;
/// What dropping a host gives the session ends still out (at most, and never past their own
/// deadlines): a program that closes its servers and exits at once would otherwise end no
/// session (closing used to send the `DELETE` before it returned).
pub(crate) const FINAL_WAIT: Duration = Duration::from_millis(100);

/// One session's `DELETE`, on its way.
#[derive(Debug)]
pub(crate) struct SessionEnd {
    conn: OneShot,
    token: Token,
    deadline: Instant,
}

impl SessionEnd {
    /// Closes `session`, and starts the `DELETE` that ends its legacy session, when it has
    /// one, to the instance in use, with the headers its requests carry (§6.2, and the bearer
    /// token: §8), through the same proxy and TLS (`tls`). Its connection is registered with
    /// `token`; it is given up on at `deadline`. The session is over locally either way.
    pub(super) fn start(
        session: &mut HttpSession,
        instances: &Instances,
        tls: Option<&TlsConfig>,
        registry: &Registry,
        token: Token,
        now: Instant,
        deadline: Instant,
    ) -> Option<Self> {
        let at = instances.current();
        let request = session.close(now, &at.htu, |plan| {
            encode(plan.method, at, plan.preset, &plan.headers, plan.body)
        });
        let (addr, request) = (instances.addr_in_use()?, request?);
        let sent = request.and_then(|r| Self::send(r, at, addr, registry, token, tls, deadline));
        match sent {
            Ok(end) => Some(end),
            Err(e) => {
                log::debug!("cannot end the legacy session: {e}");
                None
            }
        }
    }

    /// Connects to `addr` (of `at`, with `tls` for an https server) without waiting, with
    /// `token` on `registry`; `request` is sent once the connection is up.
    fn send(
        request: Vec<u8>,
        at: &Instance,
        addr: SocketAddr,
        registry: &Registry,
        token: Token,
        tls: Option<&TlsConfig>,
        deadline: Instant,
    ) -> io::Result<Self> {
        let conn = OneShot::start(request, at, tls, addr, registry, token, MAX_BODY)?;
        Ok(Self { conn, token, deadline })
    }

    /// Moves it on after a readiness event; `true` once it is over (answered or failed).
    fn on_ready(&mut self) -> bool {
        match self.conn.on_ready() {
            Progress::Pending => false,
            Progress::Done(Ok(r)) => {
                // 405: the server does not let clients end sessions (§6.2); nothing to do.
                log::trace!("legacy session ended: HTTP {}", r.status);
                true
            }
            Progress::Done(Err(e)) => {
                log::debug!("ending the legacy session failed: {e}");
                true
            }
        }
    }

    fn close(self, registry: &Registry) {
        self.conn.close(registry);
    }

    /// Drives it on `poll` (which its socket is registered with) until it is over or its
    /// deadline passes, sleeping in `poll` meanwhile: for callers outside a loop
    /// ([`HttpDriver::shutdown`](super::HttpDriver::shutdown)).
    pub(super) fn wait(mut self, poll: &mut Poll) {
        let mut events = Events::with_capacity(4);
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                log::debug!("the legacy session's DELETE got no answer in time");
                break;
            }
            match poll.poll(&mut events, Some(left)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::debug!("waiting for the legacy session's DELETE failed: {e}");
                    break;
                }
            }
            if !events.is_empty() && self.on_ready() {
                break;
            }
        }
        self.close(poll.registry());
    }
}

/// The session ends of closed servers, moved on by the host's readiness path and dropped by
/// its tick at their deadlines.
#[derive(Debug, Default)]
pub(crate) struct SessionEnds {
    ends: Vec<SessionEnd>,
    /// Tokens of ends that are over, for the host to take back (see [`take_freed`]).
    ///
    /// [`take_freed`]: Self::take_freed
    freed: Vec<Token>,
}

impl SessionEnds {
    /// Takes an end to drive. At most [`MAX_ENDING`] are held: past that the oldest is
    /// dropped (its connection closed) to make room.
    pub(crate) fn push(&mut self, registry: &Registry, end: SessionEnd) {
        // One token, one end: a driver starts one per close, and a closed engine starts no
        // new session; but a second one on a token would take the first one's events.
        if let Some(i) = self.ends.iter().position(|e| e.token == end.token) {
            self.remove(registry, i);
        }
        if self.ends.len() >= MAX_ENDING {
            log::debug!("{MAX_ENDING} legacy sessions still ending: the oldest is dropped");
            self.remove(registry, 0);
        }
        self.ends.push(end);
    }

    fn remove(&mut self, registry: &Registry, i: usize) {
        let end = self.ends.remove(i);
        self.freed.push(end.token);
        end.close(registry);
    }

    /// `true` when none is outstanding.
    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// `true` when an end outstanding has its token in `tokens`.
    pub(crate) fn holds(&self, tokens: Range<usize>) -> bool {
        self.ends.iter().any(|e| tokens.contains(&e.token.0))
    }

    /// A readiness event: `false` when `token` is none of theirs.
    pub(crate) fn handle_readiness(&mut self, registry: &Registry, token: Token) -> bool {
        let Some(i) = self.ends.iter().position(|e| e.token == token) else { return false };
        if self.ends[i].on_ready() {
            self.remove(registry, i);
        }
        true
    }

    /// The earliest deadline.
    #[must_use]
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.ends.iter().map(|e| e.deadline).min()
    }

    /// Drops the ends whose deadline has come.
    pub(crate) fn handle_timeout(&mut self, registry: &Registry, now: Instant) {
        while let Some(i) = self.ends.iter().position(|e| e.deadline <= now) {
            log::debug!("the legacy session's DELETE got no answer in time");
            self.remove(registry, i);
        }
    }

    /// The tokens of ends that are over since the last call.
    pub(crate) fn take_freed(&mut self) -> std::vec::Drain<'_, Token> {
        self.freed.drain(..)
    }

    /// Drops every end.
    pub(crate) fn close_all(&mut self, registry: &Registry) {
        while !self.ends.is_empty() {
            self.remove(registry, 0);
        }
    }

    /// The host is going away: the ends still out move from `registry` to a poll of their
    /// own and get up to `limit` (never past their deadlines) to be answered, sleeping in that
    /// poll; then the rest are dropped.
    pub(crate) fn finish(&mut self, registry: &Registry, limit: Duration) {
        if self.ends.is_empty() {
            return;
        }
        let mut poll = match Poll::new() {
            Ok(poll) => poll,
            Err(e) => {
                log::debug!("cannot finish the legacy sessions' DELETEs: {e}");
                return self.close_all(registry);
            }
        };
        let mut moved = Vec::with_capacity(self.ends.len());
        for mut end in self.ends.drain(..) {
            match end.conn.move_to(registry, poll.registry(), end.token) {
                Ok(()) => moved.push(end),
                Err(e) => log::debug!("cannot finish a legacy session's DELETE: {e}"),
            }
        }
        self.ends = moved;
        let until = crate::time::later(Instant::now(), limit);
        let mut events = Events::with_capacity(16);
        loop {
            let now = Instant::now();
            self.handle_timeout(poll.registry(), now);
            if self.ends.is_empty() || now >= until {
                break;
            }
            let wake = self.poll_timeout().map_or(until, |d| d.min(until));
            match poll.poll(&mut events, Some(wake.saturating_duration_since(now))) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
            for event in events.iter() {
                self.handle_readiness(poll.registry(), event.token());
            }
        }
        self.close_all(poll.registry());
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::TcpListener;
    use std::time::Duration;

    use super::*;
    use crate::driver::url::ProxyChoice;

    /// An end of a session on `listener`'s server, with `token`.
    fn end(listener: &TcpListener, poll: &Poll, token: usize, deadline: Instant) -> SessionEnd {
        let addr = listener.local_addr().unwrap();
        let at = Instance::parse(&format!("http://{addr}/mcp"), &ProxyChoice::Direct).unwrap();
        let request = b"DELETE /mcp HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n".to_vec();
        SessionEnd::send(request, &at, addr, poll.registry(), Token(token), None, deadline).unwrap()
    }

    #[test]
    fn past_the_cap_the_oldest_end_is_dropped_and_its_token_freed() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let poll = Poll::new().unwrap();
        let later = Instant::now() + Duration::from_secs(60);
        let mut ends = SessionEnds::default();
        for token in 0..MAX_ENDING {
            ends.push(poll.registry(), end(&listener, &poll, token, later));
        }
        assert_eq!(ends.take_freed().count(), 0);
        ends.push(poll.registry(), end(&listener, &poll, MAX_ENDING, later));
        assert_eq!(ends.ends.len(), MAX_ENDING);
        assert_eq!(ends.take_freed().collect::<Vec<_>>(), [Token(0)], "the oldest went");
        assert!(!ends.holds(0..1) && ends.holds(1..2) && ends.holds(MAX_ENDING..MAX_ENDING + 1));
        ends.close_all(poll.registry());
        assert!(ends.is_empty());
        assert_eq!(ends.take_freed().count(), MAX_ENDING);
    }

    #[test]
    fn an_end_is_dropped_at_its_deadline_and_its_connection_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut poll = Poll::new().unwrap();
        let start = Instant::now();
        let deadline = start + Duration::from_millis(100);
        let mut ends = SessionEnds::default();
        ends.push(poll.registry(), end(&listener, &poll, 7, deadline));
        assert_eq!(ends.poll_timeout(), Some(deadline));
        // The connection's readiness sends the request; the server never answers.
        let mut events = Events::with_capacity(4);
        let (mut server, _) = listener.accept().unwrap();
        while ends.poll_timeout().is_some_and(|d| d > Instant::now()) {
            crate::driver::wait_events(&mut poll, &mut events, Some(Duration::from_millis(10)));
            for e in events.iter() {
                assert!(ends.handle_readiness(poll.registry(), e.token()));
            }
        }
        ends.handle_timeout(poll.registry(), start + Duration::from_millis(99));
        assert!(!ends.is_empty(), "not before its deadline");
        ends.handle_timeout(poll.registry(), deadline);
        assert!(ends.is_empty());
        assert_eq!(ends.take_freed().collect::<Vec<_>>(), [Token(7)]);
        let mut seen = Vec::new();
        server.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        server.read_to_end(&mut seen).unwrap();
        assert!(seen.starts_with(b"DELETE /mcp"), "{}", String::from_utf8_lossy(&seen));
    }

    #[test]
    fn a_token_not_held_is_not_handled() {
        let mut ends = SessionEnds::default();
        let poll = Poll::new().unwrap();
        assert!(!ends.handle_readiness(poll.registry(), Token(3)));
    }

    #[test]
    fn debug_output_never_shows_the_request() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let poll = Poll::new().unwrap();
        let e = end(&listener, &poll, 0, Instant::now());
        let shown = format!("{e:?}");
        assert!(!shown.contains("s3cret") && !shown.contains("115, 51, 99"), "{shown}");
    }
}
