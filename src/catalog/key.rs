//! The cache key: everything that can make a server answer a list differently.
//!
//! A URL alone is never enough: the same endpoint lists different tools per principal, per
//! granted scope, per tenant, per negotiated version and per advertised client capability or
//! extension. Each part is hashed ([`super::hash`], domain-separated by a tag and framed by
//! length) so the key is a small `Copy` value that holds no secrets and costs nothing to
//! compare. Parts come from the host and its auth layer, not from peers, so a 64-bit
//! fingerprint per part is enough to tell them apart.
//!
//! [`CacheKey::partition`] maps a key to where an entry lives: `cacheScope: "public"` erases
//! the principal and scope so every principal of the same server (and the same transport,
//! version, profiles and tenant) shares the entry; `"private"` keeps them. No entry crosses
//! a tenant: a tenant is the host's isolation boundary, and a server's word that a result
//! is public speaks for its own users, not for the host's other tenants.

use super::canonical::{self, CanonicalError};
use super::hash::StableHasher;
use super::hints::CacheScope;

/// One hashed part of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct KeyPart(u64);

impl KeyPart {
    fn of(tag: &str, fields: &[&str]) -> Self {
        let mut h = StableHasher::new();
        h.write_framed(tag);
        for f in fields {
            h.write_framed(f);
        }
        KeyPart(h.finish().as_u64())
    }
}

/// Where a default server identity's context fingerprint starts ([`add_context`]). Neither
/// an argument nor a URL can hold a NUL, so nothing before it looks like one.
const CONTEXT_MARK: &str = "\0\u{1}";

/// Appends to a default server identity (a stdio program and its arguments, an HTTP URL) a
/// fingerprint of what the host set beside it that can change the server's answers: a
/// child's environment and working directory, an HTTP server's own headers (a key, a
/// tenant). Servers that differ only there are different servers to the cache. Only the
/// fingerprint is kept, so no value set there (often a token) is held or shown.
pub(crate) fn add_context<'a>(identity: &mut String, fields: impl IntoIterator<Item = &'a str>) {
    let mut h = StableHasher::new();
    h.write_framed("context");
    for f in fields {
        h.write_framed(f);
    }
    identity.push_str(CONTEXT_MARK);
    identity.push_str(&h.finish().to_string());
}

/// A server identity without the fingerprint [`add_context`] appended: what may be shown.
pub(crate) fn without_context(identity: &str) -> &str {
    identity.split_once(CONTEXT_MARK).map_or(identity, |(shown, _)| shown)
}

/// How the client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Transport {
    Stdio,
    Http,
}

/// The readable inputs of a key, as the host knows them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyParts<'a> {
    /// The logical server identity the host gave the server (not its URL or command line).
    pub(crate) server: &'a str,
    pub(crate) transport: Transport,
    /// The negotiated protocol version, e.g. `2026-07-28`.
    pub(crate) protocol_version: &'a str,
    /// The authenticated principal; `None` for an unauthenticated connection.
    pub(crate) principal: Option<&'a str>,
    /// The granted scopes, in any order; duplicates do not count.
    pub(crate) granted_scopes: &'a [&'a str],
    pub(crate) tenant: Option<&'a str>,
    /// The client capabilities object sent to the server, as JSON.
    pub(crate) client_capabilities: &'a str,
    /// The extensions object the client advertised, as JSON.
    pub(crate) extensions: &'a str,
}

/// The full key of one client context on one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    server: KeyPart,
    transport: Transport,
    protocol: KeyPart,
    principal: KeyPart,
    scope: KeyPart,
    tenant: KeyPart,
    client_profile: KeyPart,
    extension_profile: KeyPart,
}

/// Where an entry lives: a key with its principal and scope erased when the entry is
/// public.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Partition {
    server: KeyPart,
    transport: Transport,
    protocol: KeyPart,
    client_profile: KeyPart,
    extension_profile: KeyPart,
    tenant: KeyPart,
    audience: Audience,
}

/// Who may read an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Audience {
    /// Every principal of the server in the tenant.
    Public,
    /// One principal with one scope set.
    Private { principal: KeyPart, scope: KeyPart },
}

impl CacheKey {
    /// Hashes the parts. The two profiles are canonicalised first, so their key order and
    /// whitespace do not split the cache; malformed profile JSON is an error.
    pub(crate) fn new(parts: &KeyParts<'_>) -> Result<Self, CanonicalError> {
        let client = canonical::canonicalize(parts.client_capabilities)?;
        let extensions = canonical::canonicalize(parts.extensions)?;
        let mut scopes: Vec<&str> = parts.granted_scopes.to_vec();
        scopes.sort_unstable();
        scopes.dedup();
        Ok(CacheKey {
            server: KeyPart::of("server", &[parts.server]),
            transport: parts.transport,
            protocol: KeyPart::of("protocol", &[parts.protocol_version]),
            // `None` and `Some("")` are different principals: the tag differs.
            principal: match parts.principal {
                Some(p) => KeyPart::of("principal", &[p]),
                None => KeyPart::of("anonymous", &[]),
            },
            scope: KeyPart::of("scopes", &scopes),
            tenant: match parts.tenant {
                Some(t) => KeyPart::of("tenant", &[t]),
                None => KeyPart::of("no-tenant", &[]),
            },
            client_profile: KeyPart::of("client-capabilities", &[&client]),
            extension_profile: KeyPart::of("extensions", &[&extensions]),
        })
    }

    /// The partition an entry with this `scope` lives in.
    pub(crate) fn partition(self, scope: CacheScope) -> Partition {
        Partition {
            server: self.server,
            transport: self.transport,
            protocol: self.protocol,
            client_profile: self.client_profile,
            extension_profile: self.extension_profile,
            tenant: self.tenant,
            audience: match scope {
                CacheScope::Public => Audience::Public,
                CacheScope::Private => {
                    Audience::Private { principal: self.principal, scope: self.scope }
                }
            },
        }
    }
}

/// Whose share of the store an entry counts against: one server in one tenant, whatever the
/// principal, version or profiles. Under pressure the heaviest holder gives way first, so one
/// server's long listings cannot push out everyone else's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Holder {
    server: KeyPart,
    tenant: KeyPart,
}

impl Partition {
    #[cfg(test)]
    pub(crate) fn audience(self) -> Audience {
        self.audience
    }

    /// Whose share of the store an entry in this partition counts against.
    pub(crate) fn holder(&self) -> Holder {
        Holder { server: self.server, tenant: self.tenant }
    }

    /// A stable text naming the partition: every part's hash in hex, so it holds no secret
    /// (no principal, tenant or scope in clear) and is the same in every process. What a
    /// persistent store files an entry under.
    pub(crate) fn id(self) -> String {
        let t = match self.transport {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        };
        let mut id = format!(
            "{:016x}-{t}-{:016x}-{:016x}-{:016x}",
            self.server.0, self.protocol.0, self.client_profile.0, self.extension_profile.0
        );
        let tenant = self.tenant.0;
        match self.audience {
            Audience::Public => id.push_str(&format!("-public-{tenant:016x}")),
            Audience::Private { principal, scope } => {
                id.push_str(&format!("-{:016x}-{:016x}-{tenant:016x}", principal.0, scope.0))
            }
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> KeyParts<'static> {
        KeyParts {
            server: "weather",
            transport: Transport::Http,
            protocol_version: "2026-07-28",
            principal: Some("alice"),
            granted_scopes: &["tools:read", "tools:call"],
            tenant: Some("acme"),
            client_capabilities: r#"{"sampling":{},"elicitation":{}}"#,
            extensions: "{}",
        }
    }

    fn key(parts: KeyParts<'_>) -> CacheKey {
        CacheKey::new(&parts).expect("valid parts")
    }

    #[test]
    fn each_part_makes_a_different_key() {
        let k = key(base());
        let variants = [
            KeyParts { server: "weather2", ..base() },
            KeyParts { transport: Transport::Stdio, ..base() },
            KeyParts { protocol_version: "2025-11-25", ..base() },
            KeyParts { principal: Some("bob"), ..base() },
            KeyParts { principal: None, ..base() },
            KeyParts { granted_scopes: &["tools:read"], ..base() },
            KeyParts { tenant: Some("globex"), ..base() },
            KeyParts { tenant: None, ..base() },
            KeyParts { client_capabilities: r#"{"sampling":{}}"#, ..base() },
            KeyParts { extensions: r#"{"io.example/x":{}}"#, ..base() },
        ];
        for (i, v) in variants.into_iter().enumerate() {
            assert_ne!(key(v), k, "variant {i} must be its own entry");
        }
    }

    #[test]
    fn order_and_formatting_do_not_split_the_key() {
        let k = key(base());
        let same = KeyParts {
            granted_scopes: &["tools:call", "tools:read", "tools:call"],
            client_capabilities: r#"{ "elicitation" : {}, "sampling": {} }"#,
            ..base()
        };
        assert_eq!(key(same), k);
    }

    #[test]
    fn empty_and_missing_are_different_principals_and_tenants() {
        assert_ne!(
            key(KeyParts { principal: Some(""), ..base() }),
            key(KeyParts { principal: None, ..base() })
        );
        assert_ne!(
            key(KeyParts { tenant: Some(""), ..base() }),
            key(KeyParts { tenant: None, ..base() })
        );
        // Scope lists cannot be re-split: ["a,b"] is not ["a", "b"].
        assert_ne!(
            key(KeyParts { granted_scopes: &["ab", "c"], ..base() }),
            key(KeyParts { granted_scopes: &["a", "bc"], ..base() })
        );
    }

    #[test]
    fn public_partition_erases_principal_and_scope_only() {
        let alice = key(base());
        let bob = key(KeyParts { principal: Some("bob"), granted_scopes: &[], ..base() });
        assert_eq!(alice.partition(CacheScope::Public), bob.partition(CacheScope::Public));
        assert_ne!(alice.partition(CacheScope::Private), bob.partition(CacheScope::Private));
        assert_eq!(alice.partition(CacheScope::Public).audience(), Audience::Public);
        // Public never crosses a tenant: another tenant's principal lists for itself.
        let carol = key(KeyParts { principal: Some("carol"), tenant: Some("globex"), ..base() });
        assert_ne!(alice.partition(CacheScope::Public), carol.partition(CacheScope::Public));
        let (a, c) = (alice.partition(CacheScope::Public), carol.partition(CacheScope::Public));
        assert_ne!(a.id(), c.id(), "nor does a persistent store's entry");
        // Public never crosses a server, transport, version or profile.
        let other = key(KeyParts { protocol_version: "2025-11-25", ..base() });
        assert_ne!(alice.partition(CacheScope::Public), other.partition(CacheScope::Public));
    }

    #[test]
    fn malformed_profile_json_is_an_error() {
        assert!(CacheKey::new(&KeyParts { client_capabilities: "{", ..base() }).is_err());
        assert!(CacheKey::new(&KeyParts { extensions: "", ..base() }).is_err());
    }
}
