//! Principals and tenants: calls made on behalf of someone, kept apart by construction.
//!
//! # Design: one lane per (server, principal)
//!
//! A [`Principal`] is an authenticated identity (name, tenant, granted scopes) with where its
//! credentials come from. A call names its auth context by the server handle it is made on:
//! [`Host::lane`] gives, for a server and a principal, a *lane*, which is a [`ServerId`] like
//! any other, created on first use. Behind it is a server entry of its own: its own
//! [`Engine`](crate::engine::Engine) (pending table, circuit breakers, in-flight limit and queue, session, retry
//! state) and its own driver (connection pool or child process, token provider or OAuth flow
//! with its token store). Every existing verb (`call_tool`, `cancel`, `tool_catalog_blocking`,
//! `stats`, ...) works on a lane unchanged, and events from it carry the lane's id.
//!
//! The alternatives were to pass the principal into one shared engine per server (a principal
//! field on every pending entry, a breaker and limiter keyed by tenant, a token chosen per
//! request in the HTTP driver, and the connection pool split by principal) or to keep one
//! engine and swap credentials. Both put isolation in a dozen places where one missed check
//! leaks a token or a reply; a lane gets it from the structure that already isolates two
//! servers (DESIGN.md principle 5): nothing in one lane can name another lane's calls, tokens or
//! sockets. The costs are one engine (its preallocated tables) and one connection pool per lane,
//! and, for a stdio server, one process per principal, which is also what a server that takes
//! its credentials from the environment needs.
//!
//! What lanes share on purpose is the capability cache, under the key of issue 10: the lane's
//! catalog key carries the server's identity plus the principal, the scope set and the tenant,
//! so a `cacheScope: "private"` (or unmarked) listing is read only by the lane that fetched it,
//! while a `"public"` one is shared by every lane of the server (same transport, version and
//! profiles) as the server allowed.
//!
//! # Credentials
//!
//! A lane never inherits the server's own credentials: its HTTP options are the server's minus
//! the token provider, OAuth flow, authorizer, credential headers (`Authorization`,
//! `X-Api-Key`, ...), the user information and credential parameters of its URLs
//! (`?api_key=`) and the TLS client certificate, plus what the principal's
//! [`CredentialSource`] gives for that server. A stdio lane may get environment variables
//! instead (the server's credential variables are not passed on, nor the user information of
//! URLs in its arguments, nor a `--name=value` argument whose name says credential).
//!
//! Known limit: the key's scope part is the scope set the principal was registered with, not
//! what an OAuth server granted in the end.

use std::fmt;

use slab::Slab;

use super::{Client, ServerId};
#[cfg(feature = "http")]
use crate::auth::oauth::{Authorizer, OAuthConfig};
use crate::config::Config;
#[cfg(feature = "http")]
use crate::driver::http::{HttpOptions, StaticToken, TokenProvider};
use crate::driver::stdio::StdioCommand;
#[cfg(doc)]
use crate::Host;

/// Handle to a principal registered with [`Host::add_principal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrincipalId {
    pub(crate) index: usize,
    pub(crate) generation: u32,
}

/// An authenticated identity calls can be made for: a name, an optional tenant, the granted
/// scopes, and where its credentials come from.
///
/// Two principals with the same name, tenant and scope set are the same auth context, so the
/// host refuses to register the second ([`PrincipalError::Duplicate`]).
#[derive(Debug)]
pub struct Principal {
    pub(crate) name: String,
    pub(crate) tenant: Option<String>,
    pub(crate) scopes: Vec<String>,
    pub(crate) credentials: Option<Box<dyn CredentialSource>>,
}

impl Principal {
    /// A principal named `name` (a user, service account or client id), in no tenant, with no
    /// scopes and no credentials.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), tenant: None, scopes: Vec::new(), credentials: None }
    }

    /// The tenant the principal acts in.
    pub fn tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// The granted scopes (order and duplicates do not matter). They key the principal's
    /// cached catalogs; once its OAuth flow (`Credentials::OAuth`) holds a token, the scope
    /// the authorization server granted with it takes their place.
    pub fn scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self.scopes.sort_unstable();
        self.scopes.dedup();
        self
    }

    /// Sends `Authorization: Bearer <token>` to every HTTP server this principal calls.
    #[cfg(feature = "http")]
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.credentials = Some(Box::new(Bearer(token.into())));
        self
    }

    /// Takes credentials per server from `source` when a lane is created.
    pub fn credentials(mut self, source: Box<dyn CredentialSource>) -> Self {
        self.credentials = Some(source);
        self
    }

    /// The principal's tenant, when it has one.
    pub(crate) fn tenant_name(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// The principal's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn same_context(&self, other: &Principal) -> bool {
        self.name == other.name && self.tenant == other.tenant && self.scopes == other.scopes
    }
}

/// The server a lane is being created for, as a [`CredentialSource`] sees it. `Debug` shows
/// the program without its arguments and URLs redacted (either may hold a key).
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct LaneTarget<'a> {
    /// The server's logical identity (`Config::cache_identity`, else its URL, or its program
    /// and arguments each after a NUL).
    pub identity: &'a str,
    /// The MCP endpoint URL (HTTP servers).
    pub url: Option<&'a str>,
}

impl std::fmt::Debug for LaneTarget<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        struct Shown<'a>(&'a str);
        impl std::fmt::Debug for Shown<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                super::catalog::fmt_identity(self.0, f)
            }
        }
        f.debug_struct("LaneTarget")
            .field("identity", &Shown(self.identity))
            .field("url", &self.url.map(crate::redact::RedactedUrl))
            .finish()
    }
}

/// A principal's credentials for one server.
#[non_exhaustive]
pub enum Credentials {
    /// Nothing: the lane calls unauthenticated.
    None,
    /// Bearer tokens from this provider (HTTP).
    #[cfg(feature = "http")]
    Token(Box<dyn TokenProvider>),
    /// The lane runs this OAuth flow itself (HTTP), with its own token store, so the
    /// principal's tokens are its own.
    #[cfg(feature = "http")]
    OAuth(Box<OAuthConfig>, Option<Box<dyn Authorizer>>),
    /// Environment variables for the lane's own server process (stdio).
    Env(Vec<(String, String)>),
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secrets themselves.
        match self {
            Self::None => f.write_str("None"),
            #[cfg(feature = "http")]
            Self::Token(_) => f.write_str("Token(<redacted>)"),
            #[cfg(feature = "http")]
            Self::OAuth(..) => f.write_str("OAuth(<redacted>)"),
            Self::Env(vars) => {
                f.debug_list().entries(vars.iter().map(|(k, _)| (k, "<redacted>"))).finish()
            }
        }
    }
}

/// Where a principal's credentials come from: asked once per lane, when the lane is created.
pub trait CredentialSource: fmt::Debug {
    /// The credentials to use with `target`.
    fn credentials(&mut self, target: &LaneTarget<'_>) -> Credentials;
}

/// The same bearer token for every server.
#[cfg(feature = "http")]
#[derive(Clone)]
struct Bearer(String);

#[cfg(feature = "http")]
impl fmt::Debug for Bearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Bearer(<redacted>)")
    }
}

#[cfg(feature = "http")]
impl CredentialSource for Bearer {
    fn credentials(&mut self, _: &LaneTarget<'_>) -> Credentials {
        Credentials::Token(Box::new(StaticToken(self.0.clone())))
    }
}

/// Why a principal could not be registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrincipalError {
    /// A principal with the same name, tenant and scopes is registered already.
    Duplicate(PrincipalId),
}

impl fmt::Display for PrincipalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Duplicate(_) => {
                f.write_str("a principal with this name, tenant and scopes is registered already")
            }
        }
    }
}

impl std::error::Error for PrincipalError {}

/// How to make another entry for a server: its transport without credentials, and its config.
#[derive(Debug)]
pub(crate) enum Recipe {
    Stdio(StdioCommand, Config),
    #[cfg(feature = "http")]
    Http(Box<HttpOptions>, Config),
}

impl Recipe {
    pub(crate) fn stdio(command: &StdioCommand, config: &Config) -> Self {
        Self::Stdio(command.clone(), config.clone())
    }

    #[cfg(feature = "http")]
    pub(crate) fn http(opts: &HttpOptions, config: &Config) -> Self {
        Self::Http(Box::new(opts.without_credentials()), config.clone())
    }

    pub(crate) fn config(&self) -> &Config {
        match self {
            Self::Stdio(_, c) => c,
            #[cfg(feature = "http")]
            Self::Http(_, c) => c,
        }
    }
}

#[derive(Debug)]
pub(crate) struct PrincipalEntry {
    pub(crate) generation: u32,
    pub(crate) principal: Principal,
}

/// A server added with `add_*_server`, and the lanes opened on it.
#[derive(Debug)]
pub(crate) struct Base {
    pub(crate) generation: u32,
    pub(crate) recipe: Recipe,
    pub(crate) lanes: Vec<(PrincipalId, ServerId)>,
}

/// The host's principals and the lanes of each server.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    pub(crate) principals: Slab<PrincipalEntry>,
    pub(crate) next_generation: u32,
    /// By the server's slot index.
    pub(crate) bases: std::collections::HashMap<usize, Base>,
    /// By the lane's slot index.
    pub(crate) lanes: std::collections::HashMap<usize, LaneLink>,
}

/// What a lane is: whose, on which server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaneLink {
    pub(crate) lane: ServerId,
    pub(crate) base: ServerId,
    pub(crate) principal: PrincipalId,
}

impl Lanes {
    /// Keeps how to make lanes of a newly added server.
    pub(crate) fn remember(&mut self, server: ServerId, recipe: Recipe) {
        let base = Base { generation: server.generation, recipe, lanes: Vec::new() };
        self.bases.insert(server.index, base);
    }

    pub(crate) fn principal(&self, id: PrincipalId) -> Option<&Principal> {
        let e = self.principals.get(id.index).filter(|e| e.generation == id.generation)?;
        Some(&e.principal)
    }

    /// The server a lane belongs to and its principal; `None` for a server's own entry.
    pub(crate) fn lane(&self, id: ServerId) -> Option<(ServerId, PrincipalId)> {
        let link = self.lanes.get(&id.index).filter(|l| l.lane == id)?;
        Some((link.base, link.principal))
    }

    /// Who calls on `id`: the server it belongs to (itself for a server's own handle), and
    /// for a lane its principal with the principal's name and tenant.
    pub(crate) fn caller(&self, id: ServerId) -> (ServerId, Option<(PrincipalId, &Principal)>) {
        match self.lane(id) {
            Some((base, p)) => (base, self.principal(p).map(|e| (p, e))),
            None => (id, None),
        }
    }

    pub(crate) fn base(&self, id: ServerId) -> Option<&Base> {
        self.bases.get(&id.index).filter(|b| b.generation == id.generation)
    }

    /// The lane linked for `principal` on `server`: the one [`link`](Self::link) last made.
    pub(crate) fn linked(&self, server: ServerId, principal: PrincipalId) -> Option<ServerId> {
        let base = self.base(server)?;
        base.lanes.iter().find(|&&(p, _)| p == principal).map(|&(_, lane)| lane)
    }

    /// How to make lanes of `server`, and the principal one is made for (mutable: its
    /// credentials are asked for the lane's). `None` when either is gone.
    pub(crate) fn recipe_for(
        &mut self,
        server: ServerId,
        principal: PrincipalId,
    ) -> Option<(&Recipe, &mut Principal)> {
        let base = self.bases.get(&server.index).filter(|b| b.generation == server.generation)?;
        let entry = self
            .principals
            .get_mut(principal.index)
            .filter(|e| e.generation == principal.generation)?;
        Some((&base.recipe, &mut entry.principal))
    }

    /// The lanes opened on `server` (none for a lane, or a server no longer here).
    pub(crate) fn lanes_on(&self, server: ServerId) -> Vec<ServerId> {
        self.base(server).map(|b| b.lanes.iter().map(|&(_, l)| l).collect()).unwrap_or_default()
    }

    /// Links a newly opened `lane` of `principal` to its server, in place of any earlier lane
    /// of the principal there (one closed and gone). Does nothing when the server is gone.
    pub(crate) fn link(&mut self, server: ServerId, principal: PrincipalId, lane: ServerId) {
        let Some(base) =
            self.bases.get_mut(&server.index).filter(|b| b.generation == server.generation)
        else {
            return;
        };
        if let Some(&(_, old)) = base.lanes.iter().find(|&&(p, _)| p == principal) {
            // Its slot may hold another lane by now: only its own link goes.
            if self.lanes.get(&old.index).is_some_and(|l| l.lane == old) {
                self.lanes.remove(&old.index);
            }
        }
        base.lanes.retain(|&(p, _)| p != principal);
        base.lanes.push((principal, lane));
        self.lanes.insert(lane.index, LaneLink { lane, base: server, principal });
    }

    /// Forgets `server` (a server or a lane) and returns the lanes that go with it.
    pub(crate) fn forget(&mut self, server: ServerId) -> Vec<ServerId> {
        if let Some(base) =
            self.bases.get(&server.index).filter(|b| b.generation == server.generation)
        {
            let lanes: Vec<ServerId> = base.lanes.iter().map(|&(_, l)| l).collect();
            self.bases.remove(&server.index);
            for l in &lanes {
                self.lanes.remove(&l.index);
            }
            return lanes;
        }
        if let Some(link) = self.lanes.get(&server.index).copied().filter(|l| l.lane == server) {
            let base = link.base;
            if let Some(b) =
                self.bases.get_mut(&base.index).filter(|b| b.generation == base.generation)
            {
                b.lanes.retain(|&(_, l)| l != server);
            }
            self.lanes.remove(&server.index);
        }
        Vec::new()
    }
}

impl Client {
    /// Registers a principal; calls are made for it on its lanes ([`Host::lane`]).
    pub fn add_principal(&mut self, principal: Principal) -> Result<PrincipalId, PrincipalError> {
        let lanes = &mut self.lanes;
        if let Some((index, e)) =
            lanes.principals.iter().find(|(_, e)| e.principal.same_context(&principal))
        {
            return Err(PrincipalError::Duplicate(PrincipalId { index, generation: e.generation }));
        }
        lanes.next_generation = lanes.next_generation.wrapping_add(1);
        let generation = lanes.next_generation;
        let index = lanes.principals.insert(PrincipalEntry { generation, principal });
        Ok(PrincipalId { index, generation })
    }

    /// The principal a lane serves; `None` for a server's own handle.
    pub fn principal_of(&self, lane: ServerId) -> Option<PrincipalId> {
        self.lanes.lane(lane).map(|(_, p)| p)
    }

    /// The lanes of `principal`, on every server.
    pub(crate) fn lanes_of(&self, principal: PrincipalId) -> Vec<ServerId> {
        self.lanes.lanes.values().filter(|l| l.principal == principal).map(|l| l.lane).collect()
    }

    /// Forgets a principal (its lanes removed first).
    pub(crate) fn forget_principal(&mut self, principal: PrincipalId) {
        if self.lanes.principal(principal).is_some() {
            self.lanes.principals.remove(principal.index);
        }
        // Its policy goes with it: kept, it held the authorization gate shut for good (every
        // call made from a drain started held) though no lane of it was left to ask about.
        self.authz.forget_principal(principal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a credential source is shown of a server names no key: the program without its
    /// arguments, the URL redacted (the derived `Debug` showed both whole).
    #[test]
    fn a_lane_targets_debug_shows_no_key() {
        let stdio = LaneTarget { identity: "server\0--token=sekrit", url: None };
        let http = LaneTarget {
            identity: "https://h/mcp?api_key=sekrit",
            url: Some("https://h/mcp?api_key=sekrit"),
        };
        for target in [stdio, http] {
            let shown = format!("{target:?}");
            assert!(!shown.contains("sekrit"), "{shown}");
        }
    }

    fn server(index: usize, generation: u32) -> ServerId {
        ServerId { index, generation }
    }

    /// A base server at slot 0 and the principals `names`, in slots from 0.
    fn lanes_of_one_server(names: &[&str]) -> (Lanes, ServerId, Vec<PrincipalId>) {
        let mut lanes = Lanes::default();
        let base = server(0, 1);
        lanes.remember(base, Recipe::Stdio(StdioCommand::new("true"), Config::default()));
        let ids = names
            .iter()
            .map(|name| {
                let principal = Principal::new(*name);
                let index = lanes.principals.insert(PrincipalEntry { generation: 1, principal });
                PrincipalId { index, generation: 1 }
            })
            .collect();
        (lanes, base, ids)
    }

    #[test]
    fn a_principal_has_one_linked_lane_per_server_and_a_new_one_replaces_the_old() {
        let (mut lanes, base, ids) = lanes_of_one_server(&["alice", "bob"]);
        let (alice, bob) = (ids[0], ids[1]);
        let first = server(1, 1);
        lanes.link(base, alice, first);
        assert_eq!(lanes.linked(base, alice), Some(first));
        assert_eq!(lanes.linked(base, bob), None);
        assert_eq!(lanes.lane(first), Some((base, alice)));
        let second = server(2, 1);
        lanes.link(base, alice, second);
        assert_eq!(lanes.linked(base, alice), Some(second));
        assert_eq!(lanes.lane(first), None, "the replaced lane is no longer one");
        assert_eq!(lanes.lanes_on(base), [second]);
        // Bob's lane takes the first lane's slot, reused: Alice's next link leaves it alone.
        let reused = server(1, 2);
        lanes.link(base, bob, reused);
        lanes.link(base, alice, server(3, 1));
        assert_eq!(lanes.lane(reused), Some((base, bob)));
        assert_eq!(lanes.lanes_on(base), [reused, server(3, 1)]);
        // A stale handle of the base, or a lane, has no lanes and links none.
        assert!(lanes.lanes_on(server(0, 2)).is_empty() && lanes.lanes_on(reused).is_empty());
        lanes.link(server(0, 2), bob, server(4, 1));
        assert_eq!(lanes.lane(server(4, 1)), None);
    }

    #[test]
    fn forgetting_a_server_takes_its_lanes_and_forgetting_a_lane_unlinks_it() {
        let (mut lanes, base, ids) = lanes_of_one_server(&["alice", "bob"]);
        lanes.link(base, ids[0], server(1, 1));
        lanes.link(base, ids[1], server(2, 1));
        assert!(lanes.forget(server(1, 1)).is_empty());
        assert_eq!(lanes.linked(base, ids[0]), None);
        assert_eq!(lanes.lanes_on(base), [server(2, 1)]);
        assert_eq!(lanes.forget(base), [server(2, 1)]);
        assert_eq!(lanes.lane(server(2, 1)), None);
        assert!(lanes.base(base).is_none() && lanes.recipe_for(base, ids[1]).is_none());
    }

    #[test]
    fn scope_sets_ignore_order_and_duplicates() {
        let a = Principal::new("p").scopes(["b", "a", "b"]);
        let b = Principal::new("p").scopes(["a", "b"]);
        assert!(a.same_context(&b));
        assert!(!a.same_context(&Principal::new("p").scopes(["a"])));
        assert!(!a.same_context(&Principal::new("p").scopes(["a", "b"]).tenant("t")));
    }

    #[cfg(feature = "http")]
    #[test]
    fn debug_output_never_shows_credentials() {
        let p = Principal::new("alice").bearer("s3cret-token");
        let shown = format!("{p:?}");
        assert!(shown.contains("alice") && !shown.contains("s3cret"), "{shown}");
        let env = Credentials::Env(vec![("API_KEY".into(), "s3cret-key".into())]);
        let shown = format!("{env:?}");
        assert!(shown.contains("API_KEY") && !shown.contains("s3cret"), "{shown}");
        let token = Credentials::Token(Box::new(StaticToken("s3cret-token".into())));
        assert!(!format!("{token:?}").contains("s3cret"));
    }

    #[cfg(feature = "http")]
    #[test]
    fn a_lane_template_keeps_no_credential_of_the_server() {
        let mut opts = HttpOptions::new("http://127.0.0.1:1/mcp?api_key=s3cret&region=eu")
            .bearer("server-token")
            .header("Authorization", "Bearer other")
            .header("proxy-authorization", "Basic x")
            .header("Cookie", "session=s3cret")
            .header("X-Api-Key", "s3cret")
            .header("X-Auth-Token", "s3cret")
            .header("X-Tenant", "blue");
        opts.alternates = vec!["http://user:pw@127.0.0.2:1/mcp?token=t".to_owned()];
        opts.tls.client_cert = Some(("server.pem".into(), "server.key".into()));
        opts.tls.ca_file = Some("ca.pem".into());
        let lane = opts.without_credentials();
        assert!(lane.token_provider.is_none() && lane.oauth.is_none());
        assert!(lane.authorizer.is_none());
        assert_eq!(lane.headers, [("X-Tenant".to_owned(), "blue".to_owned())]);
        assert_eq!(lane.url, "http://127.0.0.1:1/mcp?region=eu");
        assert_eq!(lane.alternates, ["http://127.0.0.2:1/mcp"]);
        assert!(lane.tls.client_cert.is_none());
        assert_eq!(lane.tls.ca_file, opts.tls.ca_file, "the server's trust is the lane's too");
    }
}
