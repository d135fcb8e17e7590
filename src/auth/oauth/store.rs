//! Tokens and client registrations, and the [`TokenStore`] a host implements to keep them
//! across restarts. Nothing here prints a secret: `Debug` redacts.

use std::collections::HashMap;
use std::fmt;

/// A secret string (a token, a client secret). `Debug` prints its length only, so a
/// `{:?}` of any structure that holds one never leaks it into a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub(crate) String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(<redacted, {} bytes>)", self.0.len())
    }
}

/// The tokens granted for one resource by one authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokens {
    /// The access token, sent as `Authorization: Bearer` (or `DPoP` when bound).
    pub access_token: Secret,
    /// The refresh token, when the authorization server issued one.
    pub refresh_token: Option<Secret>,
    /// When the access token expires, in seconds since the Unix epoch, if the server said.
    pub expires_at: Option<u64>,
    /// The scope granted (or, when the server did not say, the scope requested).
    pub scope: Option<String>,
    /// For a DPoP-bound token (`token_type` `DPoP`), the thumbprint of the key it is bound
    /// to ([`DpopKey::thumbprint`](super::DpopKey::thumbprint)); `None` for a bearer token.
    pub dpop_jkt: Option<String>,
}

/// A client identity at one authorization server, from registration or the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRegistration {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for a confidential client.
    pub client_secret: Option<Secret>,
    /// The token endpoint authentication method agreed (`none`, `client_secret_basic`,
    /// `client_secret_post`).
    pub token_endpoint_auth_method: String,
}

/// What a [`TokenStore`] keeps for one resource: bound to the authorization server that
/// issued it, so a change of server never reuses it (SEP-2352).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAuth {
    /// The issuer identifier of the authorization server.
    pub issuer: String,
    /// The client registration at that server, when it was dynamic (pre-registered
    /// credentials stay with the host).
    pub client: Option<ClientRegistration>,
    /// The tokens, once granted.
    pub tokens: Option<Tokens>,
}

/// Persistence for tokens and registrations, keyed by the resource (the MCP server's URL).
///
/// A host with several principals keeps one store per principal. Calls are synchronous and
/// made from inside the flow's `handle_*` methods, so a slow store slows the poll loop: keep
/// it to a small file or memory. An implementation must not log what it stores.
pub trait TokenStore: fmt::Debug {
    /// What was saved for `resource`, if anything.
    fn load(&mut self, resource: &str) -> Option<StoredAuth>;
    /// Replaces what is kept for `resource`.
    fn save(&mut self, resource: &str, auth: &StoredAuth);
    /// Forgets `resource` (its server changed, or its grant was revoked).
    fn clear(&mut self, resource: &str);
}

/// A [`TokenStore`] in memory: tokens live as long as the process.
#[derive(Default)]
pub struct MemoryStore {
    entries: HashMap<String, StoredAuth>,
}

impl fmt::Debug for MemoryStore {
    /// The servers' URLs redacted (a query may carry a key); what is kept for each shows as
    /// [`StoredAuth`]'s own `Debug` does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.entries.iter().map(|(k, v)| (crate::redact::RedactedUrl(k), v));
        f.debug_map().entries(entries).finish()
    }
}

impl TokenStore for MemoryStore {
    fn load(&mut self, resource: &str) -> Option<StoredAuth> {
        self.entries.get(resource).cloned()
    }
    fn save(&mut self, resource: &str, auth: &StoredAuth) {
        self.entries.insert(resource.to_owned(), auth.clone());
    }
    fn clear(&mut self, resource: &str) {
        self.entries.remove(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts() {
        let tokens = Tokens {
            access_token: Secret::new("access-SECRET"),
            refresh_token: Some(Secret::new("refresh-SECRET")),
            expires_at: Some(1),
            scope: None,
            dpop_jkt: None,
        };
        let client = ClientRegistration {
            client_id: "id".into(),
            client_secret: Some(Secret::new("client-SECRET")),
            token_endpoint_auth_method: "client_secret_basic".into(),
        };
        let text = format!(
            "{:?}",
            StoredAuth { issuer: "i".into(), client: Some(client), tokens: Some(tokens) }
        );
        assert!(!text.contains("SECRET"), "{text}");
        assert!(text.contains("redacted, 13 bytes"), "{text}");
    }

    /// A memory store's keys are the servers' URLs, which may carry a key in their query; an
    /// authorizer's redirect carries the authorization code.
    #[test]
    fn store_keys_and_redirects_are_redacted() {
        let mut store = MemoryStore::default();
        let auth = StoredAuth { issuer: "i".into(), client: None, tokens: None };
        store.save("https://h/mcp?api_key=KEY1", &auth);
        let text = format!("{store:?}");
        assert!(!text.contains("KEY1") && text.contains("https://h/mcp"), "{text}");
        let redirect =
            super::super::Authorization::Redirect("http://localhost/cb?code=C0DE&state=s".into());
        let text = format!("{redirect:?}");
        assert!(!text.contains("C0DE") && text.contains("state=s"), "{text}");
    }
}
