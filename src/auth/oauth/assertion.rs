//! Grants on an assertion the host supplies: workload identity (the RFC 7523 JWT-bearer grant,
//! SEP-1933) and enterprise-managed authorization (SEP-990: an RFC 8693 token exchange at the
//! enterprise identity provider for an ID-JAG, then the JWT-bearer grant with it).
//!
//! The host hands the flow an [`AssertionProvider`]; the flow asks it when a grant runs and
//! the assertion it holds is missing or about to expire, and once more when the
//! authorization server refuses the assertion with `invalid_grant`.

use std::fmt;

use super::encode::base64_decode;
use super::store::Secret;
pub use crate::error::oauth::AssertionError;

/// How long before its expiry a held assertion is asked for again rather than sent.
pub(crate) const RENEW_MARGIN_SECS: u64 = 30;

/// Assertions longer than this are not looked into for an `exp` claim.
const MAX_INSPECTED_BYTES: usize = 16 * 1024;

/// What the flow asks the [`AssertionProvider`] for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AssertionKind {
    /// A JWT for the RFC 7523 JWT-bearer grant at the MCP server's authorization server
    /// (workload identity: a Kubernetes service account token, a cloud instance identity).
    JwtBearer,
    /// The user's identity token from the enterprise identity provider, the subject token of
    /// the RFC 8693 token exchange (enterprise-managed authorization).
    IdToken,
}

/// One question to the [`AssertionProvider`]. `Debug` shows the URLs redacted.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct AssertionRequest<'a> {
    /// Which assertion.
    pub kind: AssertionKind,
    /// Where it goes: the authorization server's issuer ([`AssertionKind::JwtBearer`], the
    /// audience the JWT must name) or the identity provider's token endpoint
    /// ([`AssertionKind::IdToken`]).
    pub audience: &'a str,
    /// The MCP server (its protected resource identifier) the token is for.
    pub resource: &'a str,
    /// The previous assertion expired or was refused: a cached one will not do.
    pub renew: bool,
}

impl std::fmt::Debug for AssertionRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssertionRequest")
            .field("kind", &self.kind)
            .field("audience", &crate::redact::RedactedUrl(self.audience))
            .field("resource", &crate::redact::RedactedUrl(self.resource))
            .field("renew", &self.renew)
            .finish()
    }
}

/// An assertion from the host. `Debug` never shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Assertion {
    /// The assertion (a compact JWT).
    pub value: Secret,
    /// When it expires, in seconds since the Unix epoch; by default the JWT's `exp` claim,
    /// read without checking the signature (only to know when to ask again).
    pub expires_at: Option<u64>,
}

impl Assertion {
    /// An assertion whose expiry is its `exp` claim, if it is a JWT that has one.
    pub fn new(value: impl Into<String>) -> Self {
        let value = value.into();
        let expires_at = jwt_exp(&value);
        Self { value: Secret::new(value), expires_at }
    }

    /// Sets the expiry (see [`expires_at`](Self::expires_at)).
    pub fn expires_at(mut self, unix: u64) -> Self {
        self.expires_at = Some(unix);
        self
    }

    /// Whether it can still be sent at `unix_now`, keeping `margin` seconds in hand.
    pub(crate) fn usable(&self, unix_now: u64, margin: u64) -> bool {
        self.expires_at.is_none_or(|at| unix_now.saturating_add(margin) < at)
    }
}

/// The host's source of assertions: a token file it re-reads, a metadata endpoint, the
/// identity token of the signed-in user. A closure
/// `FnMut(&AssertionRequest) -> Result<Assertion, AssertionError>` is one.
///
/// Called from inside the flow, on the thread that polls it: answer at once (from a cache or
/// a local file), never block on the network.
pub trait AssertionProvider {
    /// An assertion for `request`.
    fn assertion(&mut self, request: &AssertionRequest<'_>) -> Result<Assertion, AssertionError>;
}

impl<F> AssertionProvider for F
where
    F: FnMut(&AssertionRequest<'_>) -> Result<Assertion, AssertionError>,
{
    fn assertion(&mut self, request: &AssertionRequest<'_>) -> Result<Assertion, AssertionError> {
        self(request)
    }
}

impl fmt::Debug for dyn AssertionProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AssertionProvider")
    }
}

/// The enterprise identity provider of enterprise-managed authorization: where the identity
/// token is exchanged for an ID-JAG (RFC 8693), and the client registered there. `Debug`
/// redacts the URL and the secret.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IdentityProvider {
    /// The identity provider's token endpoint (https, or http on a loopback host).
    pub token_endpoint: String,
    /// The client's `client_id` at the identity provider.
    pub client_id: String,
    /// The client's secret there, sent with HTTP Basic; without one, `client_id` goes in the
    /// form.
    pub client_secret: Option<Secret>,
}

impl IdentityProvider {
    /// The identity provider at `token_endpoint`, where this client is `client_id`.
    pub fn new(token_endpoint: impl Into<String>, client_id: impl Into<String>) -> Self {
        Self {
            token_endpoint: token_endpoint.into(),
            client_id: client_id.into(),
            client_secret: None,
        }
    }

    /// Sets the client secret at the identity provider (see
    /// [`client_secret`](Self::client_secret)).
    pub fn client_secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(Secret::new(secret));
        self
    }
}

impl fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentityProvider")
            .field("token_endpoint", &crate::redact::RedactedUrl(&self.token_endpoint))
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .finish()
    }
}

/// The `exp` claim of a compact JWT, unverified; `None` for anything else.
pub(crate) fn jwt_exp(token: &str) -> Option<u64> {
    if token.len() > MAX_INSPECTED_BYTES {
        return None;
    }
    let mut parts = token.split('.');
    let (_, payload) = (parts.next()?, parts.next()?);
    let claims: serde_json::Value = serde_json::from_slice(&base64_decode(payload)?).ok()?;
    claims.get("exp")?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::oauth::encode::base64url;

    /// The resource of a request falls back to the server's URL, which may carry a key in its
    /// query: `Debug` shows it redacted.
    #[test]
    fn an_assertion_requests_debug_shows_no_key() {
        let request = AssertionRequest {
            kind: AssertionKind::JwtBearer,
            audience: "https://as.example",
            resource: "https://h/mcp?api_key=sekrit",
            renew: false,
        };
        let shown = format!("{request:?}");
        assert!(!shown.contains("sekrit") && shown.contains("as.example"), "{shown}");
    }

    #[test]
    fn exp_is_read_from_a_jwt_and_nothing_else() {
        let jwt = |claims: &str| {
            format!("{}.{}.sig", base64url(br#"{"alg":"ES256"}"#), base64url(claims.as_bytes()))
        };
        assert_eq!(Assertion::new(jwt(r#"{"exp":1700000100}"#)).expires_at, Some(1_700_000_100));
        assert_eq!(jwt_exp(&jwt(r#"{"exp":"soon"}"#)), None);
        assert_eq!(jwt_exp(&jwt(r#"{"sub":"x"}"#)), None);
        assert_eq!(jwt_exp("not a jwt"), None);
        assert_eq!(jwt_exp("a.%%%.c"), None);
        assert_eq!(jwt_exp(""), None);
        let a = Assertion::new("opaque").expires_at(100);
        assert!(a.usable(69, 30) && !a.usable(70, 30));
        assert!(Assertion::new("opaque").usable(u64::MAX, 30));
        assert!(!format!("{a:?}").contains("opaque"));
        let idp = IdentityProvider::new("https://idp.test/token?k=v", "c").client_secret("s3cr3t");
        assert!(!format!("{idp:?}").contains("s3cr3t"));
    }
}
