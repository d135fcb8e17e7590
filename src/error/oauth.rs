//! The OAuth flow's errors ([`AuthError`](crate::error::oauth::AuthError): which step
//! failed, why, and what the server said), here on the error floor so that
//! [`CallError`](super::CallError) and the engine can carry them without importing the flow.
//! `mcpoll::oauth` re-exports them.

use std::fmt;
use std::io;

/// Why a document was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// Not a JSON object.
    NotJson,
    /// A required member is absent.
    Missing(&'static str),
    /// A member has the wrong type or an unusable value.
    Invalid(&'static str),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotJson => f.write_str("the body is not a JSON object"),
            Self::Missing(name) => write!(f, "`{name}` is missing"),
            Self::Invalid(name) => write!(f, "`{name}` is not valid"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Why the [`AssertionProvider`](crate::oauth::AssertionProvider) has no assertion. The flow
/// fails with [`AuthFailure::Assertion`] carrying it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AssertionError {
    /// None is available (no identity token yet, the workload has no identity here).
    Unavailable,
    /// Reading it failed (a token file, a metadata endpoint); the I/O error's kind.
    Io(io::ErrorKind),
    /// It is empty.
    Empty,
    /// It has already expired.
    Expired,
}

impl fmt::Display for AssertionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unavailable => f.write_str("no assertion is available"),
            Self::Io(kind) => write!(f, "the assertion could not be read ({kind})"),
            Self::Empty => f.write_str("the assertion is empty"),
            Self::Expired => f.write_str("the assertion has expired"),
        }
    }
}

impl std::error::Error for AssertionError {}

/// The step of the flow that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthStep {
    /// Protected resource or authorization server metadata.
    Discovery,
    /// Client identity: dynamic registration, or none available.
    Registration,
    /// The authorization request and its response (the redirect).
    Authorization,
    /// The token request.
    Token,
    /// A refresh token grant.
    Refresh,
    /// The token exchange at the enterprise identity provider (RFC 8693), for an ID-JAG.
    Exchange,
}

/// Why a step failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthFailure {
    /// The server answered with an unexpected HTTP status (see [`AuthError::status`] and
    /// [`AuthError::error`]).
    Status,
    /// A document could not be read.
    Malformed(ParseError),
    /// The MCP server's URL is not an absolute http(s) URL.
    InvalidServerUrl,
    /// No metadata document answered at any of its locations.
    NoMetadata,
    /// The protected resource metadata names another resource (RFC 9728 3.3).
    ResourceMismatch {
        /// The `resource` the document gave.
        resource: String,
    },
    /// The authorization server metadata names another issuer (RFC 8414 3.3).
    IssuerMismatch {
        /// The `issuer` the document gave.
        issuer: String,
    },
    /// The authorization server does not offer PKCE with S256 (MCP authorization, PKCE).
    PkceUnsupported,
    /// No endpoint for this grant in the metadata.
    MissingEndpoint(&'static str),
    /// An authorization server URL (the issuer, whose metadata would be fetched from it, or
    /// the named endpoint) is not `https` and not on a loopback host: nothing is sent to it
    /// (OAuth 2.1 1.5, MCP authorization "Communication Security").
    NotHttps(&'static str),
    /// The MCP server's URL, or the resource metadata URL a challenge of it names, is not
    /// `https` and not on a loopback host: no token goes to it, and no discovery request
    /// (bearer tokens travel over TLS only: OAuth 2.1 1.5, RFC 6750 5.3).
    CleartextResource,
    /// No pre-registered client, no usable client ID metadata document and no registration
    /// endpoint: the host must register a client by hand.
    NoClientIdentity,
    /// The grant needs credentials the host did not give (client credentials without a
    /// secret or key, an assertion grant without an assertion provider).
    MissingCredentials,
    /// The authorization server registered the client for a token endpoint authentication
    /// method mcpoll does not perform (it does `none`, `client_secret_basic` and
    /// `client_secret_post` for a registered client): the registration is not kept.
    UnsupportedAuthMethod {
        /// The `token_endpoint_auth_method` the registration answer gave.
        method: String,
    },
    /// The redirect's `state` is not the one sent (a forged or stale response).
    StateMismatch,
    /// The authorization server advertises `iss` in responses and this one has none
    /// (RFC 9207 2.4).
    IssMissing,
    /// The redirect's `iss` is not the issuer (exact comparison, RFC 9207 2.4).
    IssMismatch {
        /// The `iss` received.
        iss: String,
    },
    /// The redirect has neither `code` nor `error`.
    MissingCode,
    /// The authorization server answered the authorization request with an error (see
    /// [`AuthError::error`]).
    Denied,
    /// The host's authorizer brought back no redirect, for this reason.
    Declined(AuthorizeError),
    /// The redirect did not come within `OAuthConfig::authorization_timeout` of the
    /// authorization URL (a deferred authorization the user never finished).
    Expired,
    /// Re-authorization stopped: too many in a row, or a step-up for scopes already asked
    /// for and not granted.
    StepUpLimit,
    /// The host's [`AssertionProvider`](crate::oauth::AssertionProvider) gave no usable assertion.
    Assertion(AssertionError),
    /// The random source or the signer failed.
    Crypto,
    /// DPoP is [`Required`](crate::oauth::DpopMode::Required) and the authorization server issued
    /// an unbound token (`token_type` `Bearer`).
    DpopUnbound,
    /// DPoP is required and the authorization server's `dpop_signing_alg_values_supported`
    /// does not list `ES256`, the one algorithm mcpoll signs proofs with.
    DpopAlgorithm,
    /// The authorization server issued a DPoP-bound token to a request without a proof.
    DpopUnexpected,
    /// The request could not be made or its response not read (the driver said so).
    Transport,
    /// The connection for the request failed: a certificate refused, a name that does not
    /// resolve, a connection refused or timed out (the driver's error says which).
    Connection(crate::error::TransportError),
}

/// Why an [`Authorizer`](crate::oauth::Authorizer) brought back no redirect. The flow fails with
/// [`AuthFailure::Declined`] carrying it, so the host can tell a user's "no" from a machine
/// that cannot ask one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthorizeError {
    /// The user said no, or closed the browser.
    Declined,
    /// No user can be asked here (no browser, no terminal): the default of
    /// [`Authorizer::authorize`](crate::oauth::Authorizer::authorize).
    NoUser,
    /// The authorizer could not reach the authorization page or bring back the redirect (its
    /// own HTTP request, a browser launch, reading a terminal); the I/O error's kind.
    Io(io::ErrorKind),
    /// The authorization server's page did not end at the redirect URI (an error page, a
    /// redirect elsewhere, an empty answer).
    NoRedirect,
    /// The authorizer stopped waiting for the user.
    TimedOut,
    /// The host gave up on the running flow
    /// ([`OAuthFlow::abandon`](crate::oauth::OAuthFlow::abandon)).
    Abandoned,
}

impl fmt::Display for AuthorizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Declined => f.write_str("the user declined"),
            Self::NoUser => f.write_str("no user to ask"),
            Self::Io(kind) => write!(f, "the authorization page could not be followed ({kind})"),
            Self::NoRedirect => f.write_str("the authorization page did not redirect back"),
            Self::TimedOut => f.write_str("the user did not answer in time"),
            Self::Abandoned => f.write_str("the host abandoned the flow"),
        }
    }
}

impl std::error::Error for AuthorizeError {}

/// A failure of the OAuth flow, naming its step, with the HTTP status and OAuth `error`
/// code when the server gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthError {
    /// The step that failed.
    pub step: AuthStep,
    /// Why.
    pub reason: AuthFailure,
    /// The HTTP status of the response that failed it, if a response did.
    pub status: Option<u16>,
    /// The OAuth `error` code (RFC 6749 4.1.2.1, 5.2), if the server sent one.
    pub error: Option<String>,
}

impl AuthError {
    pub(crate) fn new(step: AuthStep, reason: AuthFailure) -> Self {
        Self { step, reason, status: None, error: None }
    }

    /// The host's configuration is at fault, not a server: no client identity usable with
    /// this authorization server, a grant without its credentials, a server URL that is not
    /// absolute, a flow that needs a user with no one to ask, or an assertion the host's
    /// provider could not give.
    pub fn is_local(&self) -> bool {
        matches!(
            self.reason,
            AuthFailure::NoClientIdentity
                | AuthFailure::MissingCredentials
                | AuthFailure::InvalidServerUrl
                | AuthFailure::Declined(AuthorizeError::NoUser)
                | AuthFailure::Assertion(_)
        )
    }
}

impl fmt::Display for AuthStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Discovery => "discovery",
            Self::Registration => "registration",
            Self::Authorization => "authorization",
            Self::Token => "token",
            Self::Refresh => "refresh",
            Self::Exchange => "token exchange",
        })
    }
}

impl fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status => f.write_str("unexpected HTTP status"),
            Self::Malformed(e) => write!(f, "malformed document: {e}"),
            Self::InvalidServerUrl => f.write_str("the server URL is not an absolute http(s) URL"),
            Self::NoMetadata => f.write_str("no metadata document found"),
            Self::ResourceMismatch { resource } => {
                write!(f, "the metadata is for another resource ({resource})")
            }
            Self::IssuerMismatch { issuer } => {
                write!(f, "the metadata is for another issuer ({issuer})")
            }
            Self::PkceUnsupported => f.write_str("the authorization server does not offer PKCE S256"),
            Self::MissingEndpoint(name) => write!(f, "the metadata has no {name}"),
            Self::NotHttps(name) => {
                write!(f, "the authorization server's {name} is neither https nor loopback")
            }
            Self::CleartextResource => f.write_str(
                "the MCP server (or its resource metadata) is neither https nor loopback: no token is sent to it",
            ),
            Self::NoClientIdentity => f.write_str(
                "no client identity: no pre-registered client, no client ID metadata document support, no registration endpoint",
            ),
            Self::MissingCredentials => f.write_str("the grant needs a client secret or key"),
            Self::UnsupportedAuthMethod { method } => write!(
                f,
                "the client was registered for token endpoint authentication by {method:?}, which mcpoll does not perform"
            ),
            Self::StateMismatch => f.write_str("the redirect's state does not match"),
            Self::IssMissing => f.write_str("the redirect has no iss although the server advertises it"),
            Self::IssMismatch { iss } => write!(f, "the redirect's iss ({iss}) is not the issuer"),
            Self::MissingCode => f.write_str("the redirect has no code"),
            Self::Denied => f.write_str("the authorization server refused"),
            Self::Declined(why) => write!(f, "the authorizer gave no redirect: {why}"),
            Self::Expired => f.write_str("the redirect did not come in time"),
            Self::StepUpLimit => f.write_str("re-authorization limit reached"),
            Self::Assertion(why) => write!(f, "the host's assertion: {why}"),
            Self::Crypto => f.write_str("randomness or signing failed"),
            Self::DpopUnbound => f.write_str("DPoP is required and the token is not DPoP-bound"),
            Self::DpopAlgorithm => {
                f.write_str("the authorization server does not accept ES256 DPoP proofs")
            }
            Self::DpopUnexpected => {
                f.write_str("the authorization server issued a DPoP token without a proof")
            }
            Self::Transport => f.write_str("the request failed in transport"),
            Self::Connection(e) => write!(f, "the connection failed: {e}"),
        }
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OAuth {} failed: {}", self.step, self.reason)?;
        if let Some(status) = self.status {
            write!(f, " (HTTP {status})")?;
        }
        if let Some(error) = &self.error {
            write!(f, " [{error}]")?;
        }
        Ok(())
    }
}

impl std::error::Error for AuthError {}

/// Why a redirect handed to
/// [`OAuthFlow::handle_redirect`](crate::oauth::OAuthFlow::handle_redirect) (or
/// `Host::handle_redirect`) was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedirectError {
    /// Its `state` is not the one sent. The waiting authorization fails with
    /// [`AuthFailure::StateMismatch`]: a forged or mixed-up response is never retried.
    StateMismatch,
    /// Its authorization was already completed by an earlier redirect with the same `state`
    /// (a reloaded browser tab); nothing changes.
    Duplicate,
    /// Its authorization ended without it (expired, declined or abandoned); nothing changes,
    /// and an authorization waiting now is not disturbed.
    Late,
    /// No authorization is waiting for a redirect.
    NotWaiting,
    /// The server runs no OAuth flow (or there is no such server).
    NoFlow,
}

impl fmt::Display for RedirectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::StateMismatch => "the redirect's state does not match",
            Self::Duplicate => "the redirect's authorization was already completed",
            Self::Late => "the redirect's authorization has ended",
            Self::NotWaiting => "no authorization is waiting for a redirect",
            Self::NoFlow => "the server runs no OAuth flow",
        })
    }
}

impl std::error::Error for RedirectError {}
