//! What a host says about one HTTP server, and why it can be refused.

use std::fmt;
use std::io;
use std::time::Duration;

use crate::driver::tls::{TlsOptions, TlsSetupError};
use crate::driver::url::{ProxyChoice, UrlError};
use crate::session::http::{StaticToken, TokenProvider};

/// How to reach one HTTP server.
#[derive(Debug)]
#[non_exhaustive]
pub struct HttpOptions {
    /// The MCP endpoint, e.g. `https://host/mcp`.
    pub url: String,
    /// Extra headers sent on every request.
    pub headers: Vec<(String, String)>,
    /// Where bearer tokens come from.
    pub token_provider: Option<Box<dyn TokenProvider>>,
    /// Certificate trust and client certificates.
    pub tls: TlsOptions,
    /// Direct, from the environment (default), or an explicit CONNECT proxy.
    pub proxy: ProxyChoice,
    /// Most connections used for calls at once (the legacy GET stream has its own).
    pub max_connections: usize,
    /// An idle keep-alive connection is closed after this long.
    pub idle_timeout: Duration,
    /// A connection attempt (TCP, proxy and TLS) fails after this long.
    pub connect_timeout: Duration,
    /// Largest response head accepted.
    pub max_head_bytes: usize,
    /// More instances of the same stateless (2026-07-28) server, e.g. behind no load balancer:
    /// after a connection to one fails, new connections go to the next, so a retried call lands
    /// elsewhere. Legacy servers keep sessions on one instance and never rotate.
    pub alternates: Vec<String>,
}

impl HttpOptions {
    /// Options for `url` with every default.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: Vec::new(),
            token_provider: None,
            tls: TlsOptions::default(),
            proxy: ProxyChoice::FromEnv,
            max_connections: 4,
            idle_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_head_bytes: 16 * 1024,
            alternates: Vec::new(),
        }
    }

    /// Sends `Authorization: Bearer <token>` on every request.
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.token_provider = Some(Box::new(StaticToken(token.into())));
        self
    }

    /// Refuses a configured header that is not a valid HTTP header.
    pub(super) fn check_headers(&self) -> Result<(), HttpSetupError> {
        for (name, value) in &self.headers {
            let ok = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b))
                && !value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0);
            if !ok {
                return Err(HttpSetupError::Header(name.clone()));
            }
        }
        Ok(())
    }

    /// Adds a header to every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// Why an HTTP server could not be added.
#[derive(Debug)]
#[non_exhaustive]
pub enum HttpSetupError {
    /// The URL (or the proxy URL) is not valid.
    Url(UrlError),
    /// The host name did not resolve.
    Resolve(io::Error),
    /// The TLS options are not usable.
    Tls(TlsSetupError),
    /// A configured header is not a valid HTTP header.
    Header(String),
}

impl fmt::Display for HttpSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(e) => write!(f, "{e}"),
            Self::Resolve(e) => write!(f, "cannot resolve the server's host: {e}"),
            Self::Tls(e) => write!(f, "{e}"),
            Self::Header(h) => write!(f, "invalid header {h:?}"),
        }
    }
}

impl std::error::Error for HttpSetupError {}
