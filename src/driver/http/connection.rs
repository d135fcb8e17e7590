//! One HTTP/1.1 connection on a non-blocking socket, for every user of the driver: the pool's
//! keep-alive connections, the OAuth flow's requests and the `DELETE` that ends a legacy
//! session. It goes through its [`Stage`]s on readiness events: TCP connect, then the proxy's
//! CONNECT tunnel when there is a proxy, then TLS for an https origin (the handshake runs
//! inside rustls, which holds what is written until it is done). Once open it sends what is
//! queued and reads into its response parser; what the responses mean is its owner's business.
//!
//! Its buffers hold requests with their credentials and responses: `Debug` shows their
//! lengths only.

use std::fmt;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::time::Duration;

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use super::instances::Instance;
use crate::codec::http1::{Limits, ResponseEvent, ResponseParser};
use crate::driver::tls::{TlsConfig, TlsError, TlsSession};
use crate::driver::url::Scheme;

/// How a connection reaches its origin: through which proxy tunnel, with which TLS.
#[derive(Debug)]
pub(super) struct Route {
    /// The origin's `host:port`, for the proxy's CONNECT; `None` when direct.
    tunnel: Option<String>,
    /// The TLS configuration and the name the certificate must carry, for an https origin.
    tls: Option<(TlsConfig, String)>,
}

impl Route {
    /// The route to `at`: its proxy's tunnel when it has a proxy, and TLS with `tls` when it
    /// is https (an https origin without a TLS configuration is refused).
    pub(super) fn to(at: &Instance, tls: Option<&TlsConfig>) -> io::Result<Self> {
        let tls = match at.url.scheme {
            Scheme::Https => {
                let config = tls.ok_or_else(|| io::Error::other("no TLS configuration"))?;
                Some((config.clone(), at.url.host.clone()))
            }
            Scheme::Http => None,
        };
        Ok(Self { tunnel: at.proxy.is_some().then(|| at.url.authority()), tls })
    }
}

/// Where a connection stands. Only `Plain` and `Tls` carry requests.
// The TLS session stays inline, as it was in the pool's connections: an https connection is
// in that stage for its whole life, and its reads and writes need no pointer chase.
// A tag of its own (no niche in the TLS session to decode): the stage is read on every call.
#[allow(clippy::large_enum_variant)]
#[repr(u8)]
enum Stage {
    /// TCP connect under way.
    Connecting(Route),
    /// CONNECT written (from `sent` on still to go) to the proxy; waiting for its 2xx.
    Tunnelling { connect: Vec<u8>, sent: usize, tls: Option<(TlsConfig, String)> },
    /// Open, without TLS.
    Plain,
    /// Open, with TLS (its handshake may still be under way).
    Tls(TlsSession),
}

/// What [`Connection::read`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Input {
    /// `n` bytes went to the parser. `emptied`: a plain-TCP read shorter than asked for,
    /// which emptied the socket's receive queue.
    Read { n: usize, emptied: bool },
    /// Nothing to read now.
    Blocked,
    /// The peer closed the connection; the parser was told.
    Closed,
}

/// A connection's first plain read, and the most a read grows to: a read that fills its size
/// doubles it, since more was waiting.
const FIRST_READ: usize = 4 * 1024;
pub(super) const MOST_READ: usize = 64 * 1024;
/// The most plaintext one TLS record carries (RFC 8446 5.1): the room each take from rustls
/// gets.
const TLS_RECORD: usize = 16 * 1024;

/// One connection: socket, stage, the bytes to send and the parser of what comes back.
pub(super) struct Connection {
    sock: TcpStream,
    stage: Stage,
    /// The request to send (after open), and how much of it went.
    out: Vec<u8>,
    written: usize,
    parser: ResponseParser,
    /// The size of the next plain read into the parser: it starts small and doubles while
    /// reads fill it (up to what the driver allows a read), so a connection of short replies
    /// keeps a small buffer.
    read_size: usize,
    /// What the parser starts with, on open.
    limits: Limits,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = match &self.stage {
            Stage::Connecting(_) => "connecting",
            Stage::Tunnelling { .. } => "tunnelling",
            Stage::Plain => "plain",
            Stage::Tls(tls) if tls.is_handshaking() => "tls handshake",
            Stage::Tls(_) => "tls",
        };
        f.debug_struct("Connection")
            .field("stage", &stage)
            .field("unsent", &(self.out.len() - self.written))
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects to `addr` (of `route`'s proxy, when it has one) without waiting and registers
    /// the socket with `token`; readiness events move it on through [`advance`](Self::advance).
    pub(super) fn connect(
        addr: SocketAddr,
        route: Route,
        registry: &Registry,
        token: Token,
        limits: Limits,
    ) -> io::Result<Self> {
        let mut sock = TcpStream::connect(addr)?;
        let _ = sock.set_nodelay(true);
        keep_alive_probes(&sock);
        registry.register(&mut sock, token, Interest::READABLE | Interest::WRITABLE)?;
        Ok(Self {
            sock,
            stage: Stage::Connecting(route),
            out: Vec::with_capacity(2048),
            written: 0,
            parser: ResponseParser::new(limits),
            read_size: FIRST_READ,
            limits,
        })
    }

    /// Deregisters the socket (dropping the connection closes it).
    pub(super) fn deregister(&mut self, registry: &Registry) {
        let _ = registry.deregister(&mut self.sock);
    }

    /// Moves the socket's registration from `from` to `to`, with `token`.
    pub(super) fn move_to(
        &mut self,
        from: &Registry,
        to: &Registry,
        token: Token,
    ) -> io::Result<()> {
        from.deregister(&mut self.sock)?;
        to.register(&mut self.sock, token, Interest::READABLE | Interest::WRITABLE)
    }

    /// `true` once TCP, the tunnel and the start of TLS are done: requests can go.
    #[inline]
    pub(super) fn is_open(&self) -> bool {
        matches!(self.stage, Stage::Plain | Stage::Tls(_))
    }

    /// `true` while the TCP connect itself is under way (before the tunnel and TLS).
    pub(super) fn is_connecting(&self) -> bool {
        matches!(self.stage, Stage::Connecting(_))
    }

    /// `true` once the TLS handshake is done too: until then the connect timeout runs.
    #[inline]
    pub(super) fn is_established(&self) -> bool {
        match &self.stage {
            Stage::Plain => true,
            Stage::Tls(tls) => !tls.is_handshaking(),
            Stage::Connecting(_) | Stage::Tunnelling { .. } => false,
        }
    }

    /// Moves the connection on after a readiness event (a hint: a spurious call finds
    /// nothing), reading the proxy's answer into the parser; `true` once it is open.
    #[inline]
    pub(super) fn advance(&mut self) -> io::Result<bool> {
        if self.is_open() {
            return Ok(true);
        }
        self.set_up()
    }

    /// [`advance`](Self::advance) before the connection is open.
    #[inline(never)]
    fn set_up(&mut self) -> io::Result<bool> {
        loop {
            match &mut self.stage {
                Stage::Plain | Stage::Tls(_) => return Ok(true),
                Stage::Connecting(_) => {
                    if let Some(e) = self.sock.take_error()? {
                        return Err(e);
                    }
                    match self.sock.peer_addr() {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(false),
                        Err(e) => return Err(e),
                    }
                    let Stage::Connecting(route) = std::mem::replace(&mut self.stage, Stage::Plain)
                    else {
                        return Ok(false);
                    };
                    match route.tunnel {
                        // Authority-form target (RFC 9110 §9.3.6), which the origin-form
                        // request writer refuses.
                        Some(a) => {
                            let connect = format!("CONNECT {a} HTTP/1.1\r\nHost: {a}\r\n\r\n");
                            let (connect, sent, tls) = (connect.into_bytes(), 0, route.tls);
                            self.stage = Stage::Tunnelling { connect, sent, tls };
                        }
                        None => self.open(route.tls)?,
                    }
                }
                Stage::Tunnelling { connect, sent, tls } => {
                    write_plain(&mut self.sock, connect, sent)?;
                    if !read_tunnel(&mut self.sock, &mut self.parser)? {
                        return Ok(false);
                    }
                    let tls = tls.take();
                    self.open(tls)?;
                }
            }
        }
    }

    /// TCP (and the tunnel) is up: TLS for an https origin, its first flight sent.
    fn open(&mut self, tls: Option<(TlsConfig, String)>) -> io::Result<()> {
        self.parser = ResponseParser::new(self.limits);
        self.stage = match tls {
            Some((config, host)) => {
                let mut session =
                    config.session(&host).map_err(|f| io::Error::other(TlsError(f)))?;
                session.flush(&mut self.sock)?;
                Stage::Tls(session)
            }
            None => Stage::Plain,
        };
        Ok(())
    }

    /// The buffer for the next request, emptied: what is put there goes with
    /// [`write`](Self::write) once the connection is open.
    pub(super) fn request_buf(&mut self) -> &mut Vec<u8> {
        self.clear_request();
        &mut self.out
    }

    /// Forgets the request sent, for the connection to carry another.
    pub(super) fn clear_request(&mut self) {
        self.out.clear();
        self.written = 0;
    }

    /// `true` while part of the request has not gone to the socket (nor, over TLS, to rustls
    /// and from it): a response that ends before then leaves the server reading the rest.
    pub(super) fn request_unsent(&self) -> bool {
        self.written < self.out.len() || matches!(&self.stage, Stage::Tls(tls) if tls.wants_write())
    }

    /// `true` when a request was put in [`request_buf`](Self::request_buf) since it was last
    /// emptied.
    pub(super) fn has_request(&self) -> bool {
        !self.out.is_empty()
    }

    /// Sends what is queued (through TLS when there is TLS) until the socket would block.
    /// Nothing goes before the connection is open.
    pub(super) fn write(&mut self) -> io::Result<()> {
        match &mut self.stage {
            Stage::Plain => write_plain(&mut self.sock, &self.out, &mut self.written),
            Stage::Tls(tls) => loop {
                let before = self.written;
                if self.written < self.out.len() {
                    self.written += tls.write_plaintext(&self.out[self.written..])?;
                }
                tls.flush(&mut self.sock)?;
                // Done; or the socket would block (its writable event brings the rest); or
                // rustls took nothing (handshaking: the handshake's end brings the rest).
                if self.written == self.out.len() || tls.wants_write() || self.written == before {
                    return Ok(());
                }
            },
            Stage::Connecting(_) | Stage::Tunnelling { .. } => Ok(()),
        }
    }

    /// Reads up to `most` bytes (of plaintext: a TLS record more at worst) into the
    /// parser, and sends what TLS has to send (handshake bytes, then what it held).
    pub(super) fn read(&mut self, most: usize) -> io::Result<Input> {
        match &mut self.stage {
            Stage::Tls(tls) => {
                // Decrypted straight into the parser's buffer, a record's worth at a time.
                let parser = &mut self.parser;
                let r =
                    tls.read(&mut self.sock, most, |plain| parser.read_from(plain, TLS_RECORD))?;
                tls.flush(&mut self.sock)?;
                let input = match r {
                    None => {
                        self.parser.eof();
                        Input::Closed
                    }
                    Some(0) => Input::Blocked,
                    Some(n) => Input::Read { n, emptied: false },
                };
                // The handshake may have ended in this read. What rustls would not take while
                // it handshook (past 64 KiB) goes now: the flush that sent the rest may not
                // have filled the socket, so no writable edge would ever bring it.
                if self.written < self.out.len() && input != Input::Closed {
                    self.write()?;
                }
                Ok(input)
            }
            Stage::Plain => loop {
                // Straight into the parser's buffer: no stop in a read buffer on the way.
                let size = self.read_size.min(most);
                match self.parser.read_from(&mut self.sock, size) {
                    Ok(0) => {
                        self.parser.eof();
                        return Ok(Input::Closed);
                    }
                    Ok(n) => {
                        if n == self.read_size && n < MOST_READ {
                            self.read_size = (2 * n).min(MOST_READ);
                        }
                        return Ok(Input::Read { n, emptied: n < size });
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Input::Blocked),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            },
            Stage::Connecting(_) | Stage::Tunnelling { .. } => Ok(Input::Blocked),
        }
    }

    /// The parser of the responses (once open) read so far.
    pub(super) fn parser(&mut self) -> &mut ResponseParser {
        &mut self.parser
    }

    /// `true` when an idle connection still looks usable: no end of file and no bytes nobody
    /// asked for wait in its socket (one non-blocking peek).
    pub(super) fn peek_alive(&self) -> bool {
        match self.sock.peek(&mut [0u8; 1]) {
            Err(e) => e.kind() == io::ErrorKind::WouldBlock,
            // EOF, or bytes nobody asked for: either way the connection is unusable.
            Ok(_) => false,
        }
    }
}

/// Writes `buf[*written..]` until the socket would block.
fn write_plain(sock: &mut TcpStream, buf: &[u8], written: &mut usize) -> io::Result<()> {
    while *written < buf.len() {
        match sock.write(&buf[*written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => *written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// TCP keepalive on every connection: a peer gone without a word (a NAT or a firewall that
/// dropped the mapping, a host powered off) sends no FIN or RST, and a GET or listen stream
/// that waits for events, or an idle connection kept for the next call, would wait on it for
/// good. The kernel probes after [`KEEPALIVE_IDLE`] of silence, every [`KEEPALIVE_INTERVAL`],
/// and fails the connection (readable with an error) after [`KEEPALIVE_PROBES`] unanswered.
/// Best effort: a socket that refuses an option keeps the kernel's default.
fn keep_alive_probes(sock: &TcpStream) {
    use rustix::net::sockopt;
    let set = sockopt::set_socket_keepalive(sock, true)
        .and_then(|()| sockopt::set_tcp_keepidle(sock, KEEPALIVE_IDLE))
        .and_then(|()| sockopt::set_tcp_keepintvl(sock, KEEPALIVE_INTERVAL))
        .and_then(|()| sockopt::set_tcp_keepcnt(sock, KEEPALIVE_PROBES));
    if let Err(e) = set {
        log::debug!("TCP keepalive not set: {e}");
    }
}

/// Silence before the first keepalive probe.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(60);
/// Between two keepalive probes.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// Unanswered probes before the connection fails (so about 90 s from the last byte).
const KEEPALIVE_PROBES: u32 = 3;

/// The proxy's status to a CONNECT it refused, carried inside the `io::Error` the connection
/// fails with, so the error a call ends with can name it ([`proxy_refusal`]).
#[derive(Debug)]
struct ProxyRefused(u16);

impl std::fmt::Display for ProxyRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "proxy refused CONNECT with status {}", self.0)
    }
}

impl std::error::Error for ProxyRefused {}

/// The proxy's status, when `e` is a refused CONNECT.
pub(crate) fn proxy_refusal(e: &io::Error) -> Option<u16> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<ProxyRefused>()).map(|r| r.0)
}

/// Reads the proxy's answer to CONNECT; `true` once a 2xx opened the tunnel.
fn read_tunnel(sock: &mut TcpStream, parser: &mut ResponseParser) -> io::Result<bool> {
    loop {
        match parser.read_from(sock, FIRST_READ) {
            Ok(0) => return Err(io::ErrorKind::ConnectionAborted.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        match parser.next() {
            None => {}
            Some(Ok(ResponseEvent::Head(head))) if (200..300).contains(&head.status()) => {
                return Ok(true)
            }
            Some(Ok(ResponseEvent::Head(head))) => {
                log::debug!("proxy refused CONNECT with {}", head.status());
                let refused = ProxyRefused(head.status());
                return Err(io::Error::new(io::ErrorKind::ConnectionRefused, refused));
            }
            // Nothing comes before a head but an error.
            Some(_) => return Err(io::Error::other("bad proxy response")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    use mio::{Events, Poll};

    use super::*;

    const LIMITS: Limits = Limits { max_head_bytes: 16 * 1024, max_body_bytes: 1024 };

    /// A proxy on loopback that reads one CONNECT head and answers `answer`; then after a 2xx
    /// reads one request head and answers `response`, and after anything else reads on until
    /// the client closes. Returns the lines it read.
    fn proxy(
        answer: &'static str,
        response: &'static str,
    ) -> (SocketAddr, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (sock, _) = listener.accept().unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut reader = BufReader::new(sock.try_clone().unwrap());
            let mut head = |lines: &mut Vec<String>| loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    return;
                }
                lines.push(line.trim_end().to_owned());
            };
            let mut lines = Vec::new();
            head(&mut lines);
            (&sock).write_all(answer.as_bytes()).unwrap();
            if answer.starts_with("HTTP/1.1 2") {
                head(&mut lines);
                (&sock).write_all(response.as_bytes()).unwrap();
                return lines;
            }
            // Refused: whatever comes until the client closes.
            let mut rest = String::new();
            while reader.read_line(&mut rest).unwrap_or(0) > 0 {}
            lines.extend(rest.lines().map(str::to_owned));
            lines
        });
        (addr, server)
    }

    /// Drives `conn` on `poll` until `step` gives an answer; no answer in 30 s fails the test.
    fn drive<T>(
        poll: &mut Poll,
        conn: &mut Connection,
        mut step: impl FnMut(&mut Connection) -> Option<T>,
    ) -> T {
        let mut events = Events::with_capacity(4);
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(answer) = step(conn) {
                return answer;
            }
            assert!(Instant::now() < until, "no answer in time");
            crate::driver::wait_events(poll, &mut events, Some(Duration::from_millis(100)));
        }
    }

    fn tunnel_to(origin: &str) -> Route {
        Route { tunnel: Some(origin.to_owned()), tls: None }
    }

    #[test]
    fn a_tunnel_opens_on_a_2xx_then_carries_the_request_and_its_response() {
        let (addr, server) =
            proxy("HTTP/1.1 200 Connection established\r\n\r\n", "HTTP/1.1 204 No Content\r\n\r\n");
        let mut poll = Poll::new().unwrap();
        let route = tunnel_to("origin.test:8080");
        let mut conn = Connection::connect(addr, route, poll.registry(), Token(1), LIMITS).unwrap();
        conn.request_buf().extend_from_slice(b"GET /mcp HTTP/1.1\r\nHost: origin.test\r\n\r\n");
        conn.write().unwrap();
        assert!(!conn.is_open());
        drive(&mut poll, &mut conn, |c| c.advance().unwrap().then_some(()));
        assert!(conn.is_open());
        conn.write().unwrap();
        let status = drive(&mut poll, &mut conn, |c| {
            let _ = c.read(64).unwrap();
            match c.parser().next() {
                Some(Ok(ResponseEvent::Head(h))) => Some(h.status()),
                Some(other) => panic!("{other:?}"),
                None => None,
            }
        });
        assert_eq!(status, 204);
        let seen = server.join().unwrap();
        assert_eq!(
            seen,
            [
                "CONNECT origin.test:8080 HTTP/1.1",
                "Host: origin.test:8080",
                "GET /mcp HTTP/1.1",
                "Host: origin.test"
            ]
        );
    }

    /// Every connection probes a silent peer: without keepalive, a stream waiting for events
    /// from a server that vanished without a FIN (a NAT that dropped its mapping) waited for
    /// good.
    #[test]
    fn connections_probe_a_silent_peer() {
        use rustix::net::sockopt;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let poll = Poll::new().unwrap();
        let route = Route { tunnel: None, tls: None };
        let conn = Connection::connect(addr, route, poll.registry(), Token(1), LIMITS).unwrap();
        assert!(sockopt::socket_keepalive(&conn.sock).unwrap());
        assert_eq!(sockopt::tcp_keepidle(&conn.sock).unwrap(), KEEPALIVE_IDLE);
        assert_eq!(sockopt::tcp_keepintvl(&conn.sock).unwrap(), KEEPALIVE_INTERVAL);
        assert_eq!(sockopt::tcp_keepcnt(&conn.sock).unwrap(), KEEPALIVE_PROBES);
    }

    #[test]
    fn a_refused_connect_fails_the_connection_and_sends_nothing_queued() {
        let (addr, server) = proxy("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", "");
        let mut poll = Poll::new().unwrap();
        let route = tunnel_to("origin.test:443");
        let mut conn = Connection::connect(addr, route, poll.registry(), Token(1), LIMITS).unwrap();
        conn.request_buf().extend_from_slice(b"GET /secret HTTP/1.1\r\n\r\n");
        let err = drive(&mut poll, &mut conn, |c| {
            c.write().unwrap();
            c.advance().err()
        });
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
        assert_eq!(proxy_refusal(&err), Some(403));
        // What a call through it ends with: the proxy's refusal, not a refused connection.
        let error = super::super::conn_failure(&err, false);
        assert_eq!(error, crate::TransportError::ProxyRefused(403));
        assert_eq!(error.to_string(), "the HTTP proxy refused the tunnel with status 403");
        assert!(!conn.is_open());
        drop(conn);
        assert_eq!(
            server.join().unwrap(),
            ["CONNECT origin.test:443 HTTP/1.1", "Host: origin.test:443"]
        );
    }
}
