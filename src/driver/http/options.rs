//! What a host says about one HTTP server, and why it can be refused.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::resolve::Resolver;
use crate::auth::oauth::{AuthError, Authorizer, OAuthConfig};
use crate::codec::http1::{breaks_line, HeaderName};
use crate::driver::tls::{TlsOptions, TlsSetupError};
use crate::driver::url::{ProxyChoice, UrlError};
use crate::redact::{RedactedUrl, RedactedUrls};
use crate::session::http::{StaticToken, TokenProvider};

/// The default [`HttpOptions::idle_timeout`]: under the 5 s after which uvicorn (the Python
/// SDK's server) and Node's http close an idle connection, so a request is never written into
/// their close (the 30 s it was made writes sent after 5 to 30 s of quiet `DeliveryUnknown`
/// whenever the request met the server's close on the wire).
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// How to reach one HTTP server. `Debug` shows the names of the extra headers, not their
/// values (an API key is often one).
#[non_exhaustive]
pub struct HttpOptions {
    /// The MCP endpoint, e.g. `https://host/mcp`.
    pub url: String,
    /// Extra headers sent on every request. A name must be an HTTP token and none of `Host`,
    /// `Content-Length` and `Transfer-Encoding` (the client writes those itself), and a value
    /// must hold no CR, LF or NUL: adding the server fails with [`HttpSetupError::Header`]
    /// otherwise.
    pub headers: Vec<(String, String)>,
    /// Where bearer tokens come from, when no [`oauth`](Self::oauth) flow is configured.
    pub token_provider: Option<Box<dyn TokenProvider>>,
    /// Runs OAuth for this server: a 401 (or a 403 asking for more scope) starts discovery
    /// and the grant, the refused requests wait and are sent again with the token, and the
    /// token is refreshed before it expires. Takes precedence over `token_provider`.
    ///
    /// The flow's own requests (metadata, registration, token) go one at a time on
    /// connections of their own, through the same `proxy` choice and `tls` trust, each bounded
    /// by `connect_timeout` as a whole (name resolution included); MCP requests wait
    /// meanwhile.
    pub oauth: Option<OAuthConfig>,
    /// Takes the user through the authorization code grant (see [`Authorizer`]); without
    /// one, a flow that needs a user fails.
    pub authorizer: Option<Box<dyn Authorizer>>,
    /// Certificate trust and client certificates.
    pub tls: TlsOptions,
    /// Direct, from the environment (default), or an explicit CONNECT proxy.
    pub proxy: ProxyChoice,
    /// Most connections used for calls at once (the legacy GET stream has its own); at most
    /// 124 (the driver's token block), a larger value reads as 124.
    pub max_connections: usize,
    /// An idle keep-alive connection is closed after this long (default 4 s). Keep it below
    /// the server's own keep-alive timeout (5 s for uvicorn, the Python SDK's server, and for
    /// Node's http): a request written as the server closes the connection is lost without an
    /// answer, and a write then ends as `DeliveryUnknown`. A server that announces its own
    /// (`Keep-Alive: timeout=N`) has its connections closed a second before that (at least
    /// half of it) when that is sooner.
    pub idle_timeout: Duration,
    /// A connection attempt (TCP, proxy and TLS) fails after this long.
    pub connect_timeout: Duration,
    /// Largest response head accepted.
    pub max_head_bytes: usize,
    /// More instances of the same stateless (2026-07-28) server, e.g. behind no load balancer:
    /// after a connection to one fails, new connections go to the next, so a retried call lands
    /// elsewhere. Legacy servers keep sessions on one instance and never rotate.
    pub alternates: Vec<String>,
    /// Resolves host names (the server's, its proxy's, the OAuth flow's origins) on a
    /// helper thread, so the poll loop never waits for DNS; the system resolver when `None`.
    /// IP literals are never resolved. A resolution that takes longer than
    /// `connect_timeout` fails the calls waiting for it as a connect timeout.
    pub resolver: Option<Arc<dyn Resolver>>,
}

impl fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpOptions")
            .field("url", &RedactedUrl(&self.url))
            .field("header_names", &header_names)
            .field("token_provider", &self.token_provider)
            .field("oauth", &self.oauth)
            .field("authorizer", &self.authorizer)
            .field("tls", &self.tls)
            .field("proxy", &self.proxy)
            .field("max_connections", &self.max_connections)
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_head_bytes", &self.max_head_bytes)
            .field("alternates", &RedactedUrls(&self.alternates))
            .field("resolver", &self.resolver)
            .finish()
    }
}

impl HttpOptions {
    /// The server's identity in the capability cache when the configuration names none: its
    /// URL, and when it has headers of its own (an API key, a tenant) or a static bearer
    /// token, a fingerprint of them ([`add_context`](crate::catalog::key::add_context)): one
    /// endpoint called with two keys may list two sets of tools. Names are compared without
    /// case, and the order the headers were given in does not matter.
    pub(crate) fn cache_identity(&self) -> String {
        let mut identity = self.url.clone();
        // A static bearer token (`bearer`) is a header too, written by the session; its name
        // here is no header name (a NUL), so no header of the host's can stand for it.
        let token = self.token_provider.as_ref().and_then(|t| t.cache_context());
        if self.headers.is_empty() && token.is_none() {
            return identity;
        }
        let mut headers: Vec<(String, &str)> =
            self.headers.iter().map(|(n, v)| (n.to_ascii_lowercase(), v.as_str())).collect();
        headers.extend(token.map(|t| ("\0bearer".to_owned(), t)));
        headers.sort_unstable();
        let fields = headers.iter().flat_map(|(n, v)| [n.as_str(), v]);
        crate::catalog::key::add_context(&mut identity, fields);
        identity
    }

    /// Options for `url` with every default.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: Vec::new(),
            token_provider: None,
            oauth: None,
            authorizer: None,
            tls: TlsOptions::default(),
            proxy: ProxyChoice::FromEnv,
            max_connections: 4,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connect_timeout: Duration::from_secs(10),
            max_head_bytes: 16 * 1024,
            alternates: Vec::new(),
            resolver: None,
        }
    }

    /// Sends `Authorization: Bearer <token>` on every request. The token is part of the
    /// server's identity in the capability cache (a fingerprint of it, kept in the persistent
    /// store's keys as headers' are): a host given a new short-lived token at each start
    /// starts with a cold cache each time, and should name the server with
    /// `Config::cache_identity` instead.
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.token_provider = Some(Box::new(StaticToken(token.into())));
        self
    }

    /// Runs the OAuth flow `config` for this server (see [`HttpOptions::oauth`]).
    pub fn oauth(mut self, config: OAuthConfig) -> Self {
        self.oauth = Some(config);
        self
    }

    /// The host's side of the authorization code grant.
    pub fn authorizer(mut self, authorizer: Box<dyn Authorizer>) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    /// These options without any credential: no token provider, no OAuth flow, no
    /// authorizer, and no header that carries one (`Authorization`, `Proxy-Authorization`,
    /// `Cookie`, and any whose name says key, token, secret and the like, as `X-Api-Key`), no
    /// user information or credential parameter (`?api_key=`) in its URLs, and no TLS client
    /// certificate. A principal's lane starts from this and adds its own, so the server's own
    /// credentials never reach it. The proxy stays as it is: it is the host's way out, not
    /// the server's identity.
    pub(crate) fn without_credentials(&self) -> Self {
        let headers = self
            .headers
            .iter()
            .filter(|(name, _)| !crate::redact::names_a_credential(name))
            .cloned()
            .collect();
        let url = |u: &String| crate::redact::url_without_credentials(u).into_owned();
        Self {
            url: url(&self.url),
            headers,
            token_provider: None,
            oauth: None,
            authorizer: None,
            // The client certificate is the server's identity too: a lane presents none.
            tls: TlsOptions { client_cert: None, ..self.tls.clone() },
            proxy: self.proxy.clone(),
            max_connections: self.max_connections,
            idle_timeout: self.idle_timeout,
            connect_timeout: self.connect_timeout,
            max_head_bytes: self.max_head_bytes,
            alternates: self.alternates.iter().map(url).collect(),
            resolver: self.resolver.clone(),
        }
    }

    /// Refuses a configured header that is not a valid HTTP header.
    pub(super) fn check_headers(&self) -> Result<(), HttpSetupError> {
        for (name, value) in &self.headers {
            // A reserved name (`Host`, `Content-Length`, `Transfer-Encoding`) is refused here
            // too: the request writer sets those itself.
            let ok = HeaderName::new(name).is_ok() && !breaks_line(value.as_bytes());
            if !ok {
                return Err(HttpSetupError::Header(name.clone()));
            }
        }
        Ok(())
    }

    /// Resolves host names with `resolver` (see [`HttpOptions::resolver`]).
    pub fn resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = Some(resolver);
        self
    }

    /// Adds a header to every request. An `Authorization` header goes only while the server
    /// has no token of mcpoll's own ([`bearer`](Self::bearer), a token provider, an OAuth
    /// flow): a token replaces it rather than going beside it.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Replaces the extra headers (see [`headers`](Self::headers)).
    pub fn headers(mut self, headers: Vec<(String, String)>) -> Self {
        self.headers = headers;
        self
    }

    /// Asks `provider` for bearer tokens (see [`token_provider`](Self::token_provider)).
    pub fn token_provider(mut self, provider: Box<dyn TokenProvider>) -> Self {
        self.token_provider = Some(provider);
        self
    }

    /// Sets certificate trust and client certificates (see [`tls`](Self::tls)).
    pub fn tls(mut self, tls: TlsOptions) -> Self {
        self.tls = tls;
        self
    }

    /// Sets the proxy choice (see [`proxy`](Self::proxy)).
    pub fn proxy(mut self, proxy: ProxyChoice) -> Self {
        self.proxy = proxy;
        self
    }

    /// Sets how many connections carry calls at once (default 4). With
    /// [`Config::max_in_flight`](crate::Config::max_in_flight) (default 32), it bounds a
    /// server's throughput: calls past either limit wait in a queue, and
    /// [`Stats::queued`](crate::Stats::queued) and each call's
    /// [`CallRecord::queue_wait`](crate::CallRecord::queue_wait) show it. Raise both together for
    /// many concurrent calls to one server. At most 124 connections: a larger value reads
    /// as 124.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }

    /// Sets how long an idle keep-alive connection stays open (see
    /// [`idle_timeout`](Self::idle_timeout)).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets the connection attempt timeout (see [`connect_timeout`](Self::connect_timeout)).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the largest response head accepted (see [`max_head_bytes`](Self::max_head_bytes)).
    pub fn max_head_bytes(mut self, bytes: usize) -> Self {
        self.max_head_bytes = bytes;
        self
    }

    /// Adds another instance of the same stateless server (see
    /// [`alternates`](Self::alternates)).
    pub fn alternate(mut self, url: impl Into<String>) -> Self {
        self.alternates.push(url.into());
        self
    }
}

/// Why an HTTP server could not be added.
#[derive(Debug)]
#[non_exhaustive]
pub enum HttpSetupError {
    /// The URL (or the proxy URL) is not valid.
    Url(UrlError),
    /// The host name did not resolve. Names are now resolved off the loop when a connection
    /// is first needed, and a failure fails the calls waiting for it
    /// (`TransportError::ConnectFailed`); this is no longer returned.
    Resolve(io::Error),
    /// The TLS options are not usable.
    Tls(TlsSetupError),
    /// A configured header (named here) is not a valid HTTP header, or is one the client
    /// writes itself (`Host`, `Content-Length`, `Transfer-Encoding`).
    Header(String),
    /// The bearer token (`HttpOptions::bearer`, or a token provider's first token) holds a
    /// CR, LF or NUL: it cannot go in a header.
    BearerToken,
    /// The OAuth configuration is not usable.
    OAuth(AuthError),
}

impl fmt::Display for HttpSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(e) => write!(f, "{e}"),
            Self::Resolve(e) => write!(f, "cannot resolve the server's host: {e}"),
            Self::Tls(e) => write!(f, "{e}"),
            Self::Header(h) => write!(f, "invalid header {h:?}"),
            Self::BearerToken => f.write_str("the bearer token holds a line break or NUL"),
            Self::OAuth(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for HttpSetupError {}

#[cfg(test)]
mod tests {
    use super::HttpOptions;

    fn with_headers(headers: &[(&str, &str)]) -> HttpOptions {
        let mut opts = HttpOptions::new("https://mcp.example.com/mcp");
        opts.headers = headers.iter().map(|&(n, v)| (n.into(), v.into())).collect();
        opts
    }

    /// The default idle timeout closes a connection before the common servers do (uvicorn's
    /// and Node's 5 s): with 30 s, a write sent after 5 to 30 s of quiet could meet the
    /// server's close on the wire and end `DeliveryUnknown`.
    #[test]
    fn idle_connections_are_closed_before_common_servers_close_them() {
        let opts = HttpOptions::new("https://mcp.example.com/mcp");
        assert!(opts.idle_timeout < std::time::Duration::from_secs(5), "{:?}", opts.idle_timeout);
    }

    /// One endpoint called with two API keys may list two sets of tools: two servers to the
    /// cache. The keys themselves are kept nowhere in the identity.
    #[test]
    fn the_cache_identity_tells_servers_apart_by_their_headers() {
        let plain = with_headers(&[]).cache_identity();
        assert_eq!(plain, "https://mcp.example.com/mcp");
        let a = with_headers(&[("X-Api-Key", "s3cret-a"), ("X-Region", "eu")]).cache_identity();
        let b = with_headers(&[("X-Api-Key", "s3cret-b"), ("X-Region", "eu")]).cache_identity();
        assert_ne!(a, b);
        assert_ne!(a, plain);
        assert!(!a.contains("s3cret") && !a.contains("eu"), "{a:?}");
        // Order and the case of names do not make another server.
        let same = with_headers(&[("x-region", "eu"), ("x-api-key", "s3cret-a")]).cache_identity();
        assert_eq!(a, same);
        assert_eq!(crate::catalog::key::without_context(&a), plain);
    }

    /// A static bearer token is a header the session writes: two tokens at one URL are two
    /// servers to the cache, or one user's private listing was served to the other. The old
    /// identity was the URL alone. A provider whose tokens change says nothing here.
    #[test]
    fn the_cache_identity_tells_static_tokens_apart() {
        let plain = with_headers(&[]).cache_identity();
        let alice = with_headers(&[]).bearer("tok-alice").cache_identity();
        let bob = with_headers(&[]).bearer("tok-bob").cache_identity();
        assert!(alice != bob && alice != plain, "{alice:?} {bob:?}");
        assert!(!alice.contains("tok-alice"), "{alice:?}");
        assert_eq!(crate::catalog::key::without_context(&alice), plain);
    }
}
