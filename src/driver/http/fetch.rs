//! The OAuth flow's own HTTP requests (metadata, registration, token), each on a short
//! blocking connection of its own: its origin is usually not the MCP server's, so it gets its
//! own `Host`, and TLS with that host's name.
//!
//! Known limitation: the event loop waits while one runs (bounded by the timeout for the
//! connection and for each read and write), and it goes direct, never through a proxy. The
//! flow makes a handful of these only when a token is needed; making them on the driver's
//! non-blocking connections is left for later.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::auth::oauth::{HttpMethod, HttpRequest};
use crate::codec::http1::{self, Limits, RequestHead, ResponseEvent, ResponseParser};
use crate::driver::tls::{TlsConfig, TlsError};
use crate::driver::url::{HttpUrl, Scheme};

/// Largest response head read.
const MAX_HEAD: usize = 16 * 1024;

/// A response read to its end.
pub(super) struct Fetched {
    pub(super) status: u16,
    pub(super) body: Vec<u8>,
}

/// Makes `req` (no redirect followed) and reads its response, refusing a body over
/// `max_body` bytes. `tls` is required for an `https` URL.
pub(super) fn fetch(
    req: &HttpRequest,
    tls: Option<&TlsConfig>,
    timeout: Duration,
    max_body: u64,
) -> io::Result<Fetched> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_owned());
    let url = HttpUrl::parse(&req.url).map_err(|e| invalid(&e.to_string()))?;
    let mut sock = connect(&url, timeout)?;
    sock.set_read_timeout(Some(timeout))?;
    sock.set_write_timeout(Some(timeout))?;
    let _ = sock.set_nodelay(true);

    let mut headers: Vec<(&str, &[u8])> =
        req.headers.iter().map(|(k, v)| (*k, v.as_bytes())).collect();
    headers.push(("Connection", b"close"));
    let method = match req.method {
        HttpMethod::Get => "GET",
        HttpMethod::Post => "POST",
    };
    let host = url.host_header();
    let head = RequestHead { method, target: &url.target, host: &host, headers: &headers };
    let mut out = Vec::new();
    http1::write_request(&mut out, &head, &req.body).map_err(|_| invalid("request head"))?;

    let limits = Limits { max_head_bytes: MAX_HEAD, max_body_bytes: max_body };
    match url.scheme {
        Scheme::Http => exchange(&mut sock, &out, limits),
        Scheme::Https => {
            let tls = tls.ok_or_else(|| invalid("no TLS configuration"))?;
            let session = tls.session(&url.host).map_err(|f| io::Error::other(TlsError(f)))?;
            let mut stream = rustls::StreamOwned::new(session.into_connection(), sock);
            exchange(&mut stream, &out, limits)
        }
    }
}

fn connect(url: &HttpUrl, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::from(io::ErrorKind::NotFound);
    for addr in (url.host.as_str(), url.port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn exchange<S: Read + Write>(s: &mut S, request: &[u8], limits: Limits) -> io::Result<Fetched> {
    s.write_all(request)?;
    s.flush()?;
    let mut parser = ResponseParser::new(limits);
    let mut status = 0;
    let mut body = Vec::new();
    let mut buf = [0u8; 8192];
    let mut eof = false;
    loop {
        while let Some(ev) = parser.next() {
            match ev {
                Ok(ResponseEvent::Head(h)) => status = h.status(),
                Ok(ResponseEvent::Body(chunk)) => body.extend_from_slice(chunk),
                Ok(ResponseEvent::End { .. }) => return Ok(Fetched { status, body }),
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
            }
        }
        if eof {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        match s.read(&mut buf) {
            Ok(0) => {
                eof = true;
                parser.eof();
            }
            Ok(n) => parser.push(&buf[..n]),
            // A TLS close without close_notify: the parser judges whether the body is whole.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                eof = true;
                parser.eof();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
