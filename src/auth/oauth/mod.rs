//! OAuth 2.1 authorization for HTTP MCP servers, as a sans-IO state machine.
//!
//! [`OAuthFlow`] does not touch the network and never reads a clock. The driver that owns the
//! MCP connection feeds it what the resource server said (a 401 or 403 with its parsed
//! [`AuthChallenge`](crate::AuthChallenge)) and the answers to the HTTP requests it asked
//! for; it emits [`Action`]s: an HTTP request to make, an authorization URL for the host's
//! [`Authorizer`], then `Ready` (a token is available from [`OAuthFlow::bearer`]) or
//! `Failed` with an [`AuthError`] naming the step.
//!
//! What it implements, from the MCP authorization section (2025-11-25 and 2026-07-28):
//! discovery through Protected Resource Metadata (RFC 9728) and authorization server metadata
//! (RFC 8414, OpenID Connect Discovery), with the 2025-03-26 fallbacks; client identity from
//! the host, a Client ID Metadata Document URL, or dynamic registration (RFC 7591); the
//! authorization code grant with PKCE S256 (RFC 7636), resource indicators (RFC 8707) and the
//! `iss` response parameter (RFC 9207); the client credentials grant with a secret or
//! `private_key_jwt` (RFC 7523); the JWT-bearer grant with an assertion from the host
//! (RFC 7523, workload identity) and enterprise-managed authorization (an RFC 8693 token
//! exchange for an ID-JAG at the enterprise identity provider, then the JWT-bearer grant);
//! scope selection and step-up; refresh; re-registration when the resource moves to another
//! authorization server; DPoP-bound tokens (RFC 9449), with a fresh proof on every token
//! request and every MCP request and the servers' nonces ([`OAuthConfig::dpop`]).
//!
//! # Call order
//!
//! After [`OAuthFlow::handle_challenge`], [`OAuthFlow::handle_response`],
//! [`OAuthFlow::handle_redirect`] or [`OAuthFlow::handle_timeout`]: drain
//! [`OAuthFlow::poll_action`], then read [`OAuthFlow::poll_timeout`]. One HTTP request is
//! outstanding at a time; answer it with the [`RequestId`] it carried.
//!
//! # Deferred authorization
//!
//! [`Action::Authorize`] need not be answered at once: a UI host shows the URL, returns to
//! its loop, and hands the redirect to [`OAuthFlow::handle_redirect`] when its loopback
//! listener receives it (through the HTTP driver: an [`Authorizer`] whose
//! [`begin`](Authorizer::begin) returns [`Authorization::Pending`], then
//! `Host::handle_redirect`). Until then the flow waits, up to
//! [`OAuthConfig::authorization_timeout`] ([`poll_timeout`](OAuthFlow::poll_timeout) says
//! when), then fails with [`AuthFailure::Expired`]. A redirect that comes twice, too late,
//! or with another `state` is refused with a [`RedirectError`].

mod assertion;
mod crypto;
pub(crate) mod dpop;
mod encode;
mod flow;
mod metadata;
mod store;
mod url;

pub(crate) use url::is_secure;

#[cfg(fuzzing)]
#[doc(hidden)]
pub(crate) mod fuzzing;
#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

pub use crate::error::oauth::{AuthError, AuthFailure, AuthStep, AuthorizeError, RedirectError};
pub use assertion::{
    Assertion, AssertionError, AssertionKind, AssertionProvider, AssertionRequest, IdentityProvider,
};
pub use crypto::{JwtAlgorithm, KeyError, SigningKey};
pub use dpop::{DpopKey, DpopMode};
pub use flow::OAuthFlow;
pub use metadata::ParseError;
pub use store::{ClientRegistration, MemoryStore, Secret, StoredAuth, TokenStore, Tokens};

/// Which grant obtains tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Grant {
    /// The authorization code grant with PKCE, for a user: the host's [`Authorizer`] takes the
    /// user to the authorization URL and brings back the redirect to `redirect_uri`.
    AuthorizationCode {
        /// Where the authorization server sends the user back (a loopback URL for a native
        /// host).
        redirect_uri: String,
    },
    /// The client credentials grant, for a machine identity: needs [`PreRegistered`]
    /// credentials with a secret or a signing key.
    ClientCredentials,
    /// The JWT-bearer grant (RFC 7523 2.1), for a workload identity: the assertion comes from
    /// the host's [`AssertionProvider`] ([`AssertionKind::JwtBearer`]); the client is the
    /// [`PreRegistered`] one (a public client ID, or one with a secret or key).
    JwtBearer,
    /// Enterprise-managed authorization (SEP-990, the identity assertion authorization
    /// grant): the user's identity token from the [`AssertionProvider`]
    /// ([`AssertionKind::IdToken`]) is exchanged at `idp` for an ID-JAG (RFC 8693), which the
    /// [`PreRegistered`] client then presents with the JWT-bearer grant.
    IdentityAssertion {
        /// The enterprise identity provider.
        idp: IdentityProvider,
    },
}

/// Client credentials the host registered by hand with an authorization server.
#[derive(Debug)]
#[non_exhaustive]
pub struct PreRegistered {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for `client_secret_basic` or `client_secret_post`.
    pub client_secret: Option<Secret>,
    /// A private key, for `private_key_jwt`.
    pub signing_key: Option<SigningKey>,
    /// The issuer these credentials belong to; when set, they are never shown to another.
    pub issuer: Option<String>,
}

impl PreRegistered {
    /// A client ID with a secret.
    pub fn with_secret(client_id: impl Into<String>, secret: impl Into<String>) -> Self {
        Self {
            client_id: client_id.into(),
            client_secret: Some(Secret::new(secret)),
            signing_key: None,
            issuer: None,
        }
    }

    /// A client ID with a private key (`private_key_jwt`).
    pub fn with_key(client_id: impl Into<String>, key: SigningKey) -> Self {
        Self {
            client_id: client_id.into(),
            client_secret: None,
            signing_key: Some(key),
            issuer: None,
        }
    }

    /// A public client: a client ID and no secret or key (`token_endpoint_auth_method`
    /// `none`), as a native or browser app registers for the authorization code grant.
    pub fn public(client_id: impl Into<String>) -> Self {
        Self { client_id: client_id.into(), client_secret: None, signing_key: None, issuer: None }
    }

    /// Sets the secret (see [`client_secret`](Self::client_secret)).
    pub fn client_secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(Secret::new(secret));
        self
    }

    /// Sets the private key for `private_key_jwt` (see [`signing_key`](Self::signing_key)).
    pub fn signing_key(mut self, key: SigningKey) -> Self {
        self.signing_key = Some(key);
        self
    }

    /// Binds these credentials to one authorization server: they are never shown to another
    /// (see [`issuer`](Self::issuer)).
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }
}

/// How an [`OAuthFlow`] behaves. `Debug` shows its URLs redacted (user information and
/// secret-looking query values hidden).
#[non_exhaustive]
pub struct OAuthConfig {
    /// The MCP server's URL: the resource being protected.
    pub server_url: String,
    /// The grant.
    pub grant: Grant,
    /// Credentials from the host; used in preference to any registration.
    pub pre_registered: Option<PreRegistered>,
    /// The host's Client ID Metadata Document URL, used as `client_id` where the
    /// authorization server advertises `client_id_metadata_document_supported`.
    pub client_metadata_url: Option<String>,
    /// `client_name` in dynamic registration.
    pub client_name: String,
    /// Most re-authorizations (after a 401 with a token, or a 403 step-up) before the next
    /// success; then the flow fails with [`AuthFailure::StepUpLimit`].
    pub max_reauthorizations: u8,
    /// How long before expiry a refresh token is used; for a token that lives less than twice
    /// as long, halfway through its life.
    pub refresh_margin: Duration,
    /// How long the flow waits for the redirect after [`Action::Authorize`] before it fails
    /// with [`AuthFailure::Expired`] (a deferred authorization the user never finished).
    pub authorization_timeout: Duration,
    /// Where tokens and registrations are kept; [`MemoryStore`] by default.
    pub store: Box<dyn TokenStore>,
    /// The host's assertions, for [`Grant::JwtBearer`] and [`Grant::IdentityAssertion`].
    pub assertions: Option<Box<dyn AssertionProvider>>,
    /// Whether tokens are DPoP-bound (RFC 9449); [`DpopMode::Off`] by default.
    pub dpop: DpopMode,
    /// The DPoP key; one is generated when DPoP is on and this is `None`. A token stored
    /// bound to another key is not used.
    pub dpop_key: Option<DpopKey>,
}

impl fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::redact::RedactedUrl;
        f.debug_struct("OAuthConfig")
            .field("server_url", &RedactedUrl(&self.server_url))
            .field("grant", &self.grant)
            .field("pre_registered", &self.pre_registered)
            .field("client_metadata_url", &self.client_metadata_url.as_deref().map(RedactedUrl))
            .field("client_name", &self.client_name)
            .field("max_reauthorizations", &self.max_reauthorizations)
            .field("refresh_margin", &self.refresh_margin)
            .field("authorization_timeout", &self.authorization_timeout)
            .field("store", &self.store)
            .field("assertions", &self.assertions)
            .field("dpop", &self.dpop)
            .field("dpop_key", &self.dpop_key)
            .finish()
    }
}

impl OAuthConfig {
    /// The authorization code grant for `server_url`, redirecting to `redirect_uri`.
    pub fn authorization_code(
        server_url: impl Into<String>,
        redirect_uri: impl Into<String>,
    ) -> Self {
        Self::new(server_url.into(), Grant::AuthorizationCode { redirect_uri: redirect_uri.into() })
    }

    /// The client credentials grant for `server_url` with the host's credentials.
    pub fn client_credentials(server_url: impl Into<String>, client: PreRegistered) -> Self {
        let mut config = Self::new(server_url.into(), Grant::ClientCredentials);
        config.pre_registered = Some(client);
        config
    }

    /// The JWT-bearer grant (workload identity) for `server_url`: `client_id` is a public
    /// client ([`PreRegistered::public`]; replace it with
    /// [`pre_registered`](Self::pre_registered) for one with a secret or key), and the
    /// assertions come from `provider`.
    pub fn jwt_bearer(
        server_url: impl Into<String>,
        client_id: impl Into<String>,
        provider: Box<dyn AssertionProvider>,
    ) -> Self {
        let mut config = Self::new(server_url.into(), Grant::JwtBearer);
        config.pre_registered = Some(PreRegistered::public(client_id));
        config.assertions = Some(provider);
        config
    }

    /// Enterprise-managed authorization for `server_url`: identity tokens from `id_tokens`
    /// are exchanged at `idp` for an ID-JAG, which `client` (registered with the MCP server's
    /// authorization server) presents with the JWT-bearer grant.
    pub fn identity_assertion(
        server_url: impl Into<String>,
        client: PreRegistered,
        idp: IdentityProvider,
        id_tokens: Box<dyn AssertionProvider>,
    ) -> Self {
        let mut config = Self::new(server_url.into(), Grant::IdentityAssertion { idp });
        config.pre_registered = Some(client);
        config.assertions = Some(id_tokens);
        config
    }

    /// Sets the host's assertion source (see [`assertions`](Self::assertions)).
    pub fn assertions(mut self, provider: Box<dyn AssertionProvider>) -> Self {
        self.assertions = Some(provider);
        self
    }

    /// Sets the host's credentials (see [`pre_registered`](Self::pre_registered)).
    pub fn pre_registered(mut self, client: PreRegistered) -> Self {
        self.pre_registered = Some(client);
        self
    }

    /// Sets the Client ID Metadata Document URL (see
    /// [`client_metadata_url`](Self::client_metadata_url)).
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }

    /// Sets `client_name` for dynamic registration (see [`client_name`](Self::client_name)).
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// Sets the re-authorization limit (see
    /// [`max_reauthorizations`](Self::max_reauthorizations)).
    pub fn max_reauthorizations(mut self, limit: u8) -> Self {
        self.max_reauthorizations = limit;
        self
    }

    /// Sets how long before expiry a token is refreshed (see
    /// [`refresh_margin`](Self::refresh_margin)).
    pub fn refresh_margin(mut self, margin: Duration) -> Self {
        self.refresh_margin = margin;
        self
    }

    /// Sets how long a redirect is waited for (see
    /// [`authorization_timeout`](Self::authorization_timeout)).
    pub fn authorization_timeout(mut self, timeout: Duration) -> Self {
        self.authorization_timeout = timeout;
        self
    }

    /// Sets where tokens and registrations are kept (see [`store`](Self::store)).
    pub fn store(mut self, store: Box<dyn TokenStore>) -> Self {
        self.store = store;
        self
    }

    /// Sets when tokens are DPoP-bound (see [`dpop`](Self::dpop)).
    pub fn dpop(mut self, mode: DpopMode) -> Self {
        self.dpop = mode;
        self
    }

    /// Sets the host's DPoP key (see [`dpop_key`](Self::dpop_key)).
    pub fn dpop_key(mut self, key: DpopKey) -> Self {
        self.dpop_key = Some(key);
        self
    }

    fn new(server_url: String, grant: Grant) -> Self {
        Self {
            server_url,
            grant,
            pre_registered: None,
            client_metadata_url: None,
            client_name: "mcpoll".into(),
            max_reauthorizations: 3,
            refresh_margin: Duration::from_secs(60),
            authorization_timeout: Duration::from_secs(300),
            store: Box::<MemoryStore>::default(),
            assertions: None,
            dpop: DpopMode::Off,
            dpop_key: None,
        }
    }
}

/// Identifies one HTTP request of the flow, to match its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId(u64);

/// The HTTP method of a flow request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpMethod {
    /// `GET` (metadata).
    Get,
    /// `POST` (registration, token).
    Post,
}

/// An HTTP request the flow needs made. The driver sends it as is (no redirects followed,
/// no cookies) and answers with [`OAuthFlow::handle_response`]. `Debug` redacts the
/// `Authorization` header and the body, which carry secrets.
#[non_exhaustive]
pub struct HttpRequest {
    /// Matches the response.
    pub id: RequestId,
    /// `GET` or `POST`.
    pub method: HttpMethod,
    /// The absolute URL.
    pub url: String,
    /// Headers to send (`Accept`, `Content-Type`, `Authorization` when the client
    /// authenticates with HTTP Basic).
    pub headers: Vec<(&'static str, String)>,
    /// The body: a form or JSON, as `Content-Type` says; empty for `GET`.
    pub body: Vec<u8>,
}

impl fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| {
                (*k, if k.eq_ignore_ascii_case("authorization") { "<redacted>" } else { v })
            })
            .collect();
        f.debug_struct("HttpRequest")
            .field("id", &self.id)
            .field("method", &self.method)
            .field("url", &crate::redact::RedactedUrl(&self.url))
            .field("headers", &headers)
            .field("body", &format_args!("<{} bytes>", self.body.len()))
            .finish()
    }
}

/// An HTTP response to a flow request. `Debug` shows the body's length, not the body: a
/// token response carries the access and refresh tokens, a registration the client secret.
#[derive(Clone, Copy)]
pub struct HttpResponse<'a> {
    /// The status code.
    pub status: u16,
    /// The body (the driver caps its size).
    pub body: &'a [u8],
    /// The `DPoP-Nonce` header's value, if the response had one (RFC 9449 8).
    pub dpop_nonce: Option<&'a [u8]>,
}

impl fmt::Debug for HttpResponse<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpResponse")
            .field("status", &self.status)
            .field("body", &format_args!("<{} bytes>", self.body.len()))
            .field("dpop_nonce", &self.dpop_nonce.map(|n| format!("<{} bytes>", n.len())))
            .finish()
    }
}

impl<'a> HttpResponse<'a> {
    /// A response with this status and body and no `DPoP-Nonce`.
    pub fn new(status: u16, body: &'a [u8]) -> Self {
        Self { status, body, dpop_nonce: None }
    }
}

/// What the flow wants next.
#[derive(Debug)]
#[non_exhaustive]
pub enum Action {
    /// Make this request and give its response to [`OAuthFlow::handle_response`], or its
    /// failure (connect, TLS, timeout, an oversized body) to
    /// [`OAuthFlow::handle_transport_error`].
    Send(HttpRequest),
    /// Take the user to this authorization URL and give the redirect URL it ends at to
    /// [`OAuthFlow::handle_redirect`] (see [`Authorizer`]).
    Authorize(String),
    /// A token is ready: resend the refused request with [`OAuthFlow::bearer`].
    Ready,
    /// The flow failed; the refused request fails with this error.
    Failed(AuthError),
}

/// The host's side of the authorization code grant: show the user the authorization URL
/// and bring back the URL the authorization server redirected to (with `code`, `state` and
/// perhaps `iss` in its query).
///
/// A headless test or device answers at once from [`authorize`](Self::authorize): it
/// follows the URL with its own HTTP GET and reads `Location`. A UI host, which must not
/// block its loop while a user is in a browser, implements [`begin`](Self::begin) instead,
/// returns [`Authorization::Pending`], and delivers the redirect later with
/// `Host::handle_redirect` (or [`OAuthFlow::handle_redirect`]); the refused calls wait
/// meanwhile, up to [`OAuthConfig::authorization_timeout`].
pub trait Authorizer {
    /// Returns the redirect URL, or why there is none (the flow fails with
    /// [`AuthFailure::Declined`] carrying it). The default has no user to ask
    /// ([`AuthorizeError::NoUser`]).
    fn authorize(&mut self, authorization_url: &str) -> Result<String, AuthorizeError> {
        let _ = authorization_url;
        Err(AuthorizeError::NoUser)
    }

    /// Starts the authorization. The default answers at once from
    /// [`authorize`](Self::authorize).
    fn begin(&mut self, authorization_url: &str) -> Authorization {
        match self.authorize(authorization_url) {
            Ok(redirect) => Authorization::Redirect(redirect),
            Err(why) => Authorization::Refused(why),
        }
    }
}

/// What [`Authorizer::begin`] did with the authorization URL.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Authorization {
    /// The redirect URL, at once.
    Redirect(String),
    /// No redirect, for this reason; the flow fails with [`AuthFailure::Declined`].
    Refused(AuthorizeError),
    /// The user is on it: the redirect comes later through `handle_redirect`.
    Pending,
}

impl fmt::Debug for Authorization {
    /// The redirect's authorization code hidden: it is a credential until it is exchanged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Redirect(url) => {
                f.debug_tuple("Redirect").field(&crate::redact::RedactedUrl(url)).finish()
            }
            Self::Refused(why) => f.debug_tuple("Refused").field(why).finish(),
            Self::Pending => f.write_str("Pending"),
        }
    }
}

impl fmt::Debug for dyn Authorizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Authorizer")
    }
}
