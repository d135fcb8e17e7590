//! Opening and closing principals' lanes: the part of principals that starts drivers. What a
//! principal and a lane are is in the core ([`crate::client::principal`]).

use std::fmt;
use std::time::Instant;

use super::{AddServerError, Host};
use crate::client::catalog::ServerCatalog;
use crate::client::principal::{Credentials, LaneTarget, Recipe};
use crate::client::{PrincipalId, ServerId};
use crate::config::SavedVerdict;
#[cfg(feature = "http")]
use crate::driver::http::HttpDriver;
use crate::driver::stdio::StdioDriver;
use crate::driver::transport::Transport;
use crate::engine::{Engine, ServerState};

/// Why a lane could not be had.
#[derive(Debug)]
#[non_exhaustive]
pub enum LaneError {
    /// No such server (or it was removed).
    UnknownServer,
    /// No such principal (or it was removed).
    UnknownPrincipal,
    /// The lane's server entry could not be set up.
    Setup(AddServerError),
    /// The server was closed ([`Host::close_server`]): no new lane starts a process or a
    /// session for it.
    Closed,
}

impl fmt::Display for LaneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownServer => f.write_str("no such server"),
            Self::UnknownPrincipal => f.write_str("no such principal"),
            Self::Closed => f.write_str("the server is closed"),
            Self::Setup(e) => write!(f, "cannot open the principal's lane: {e}"),
        }
    }
}

impl std::error::Error for LaneError {}

impl Host {
    /// Forgets a principal and closes and removes its lanes on every server.
    pub fn remove_principal(&mut self, principal: PrincipalId) {
        for lane in self.client.lanes_of(principal) {
            self.remove_server(lane);
        }
        self.client.forget_principal(principal);
    }

    /// The lane of `principal` on `server`: a server handle whose calls, tokens, breakers,
    /// in-flight limit, session and private catalogs are the principal's alone. Created on first
    /// use (its era probe starts at once, like a new server's); later uses return the same lane
    /// while it exists. Given a lane, answers for the lane's server.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use mcpoll::{CallOptions, Config, Host, HttpOptions, Principal, TaskOptions};
    ///
    /// let mut host = Host::new()?;
    /// let url = "https://mcp.example/mcp";
    /// let server = host.add_http_server(HttpOptions::new(url), Config::default())?;
    /// let alice = host.add_principal(Principal::new("alice").tenant("acme").bearer("a-token"))?;
    /// let lane = host.lane(server, alice)?;
    ///
    /// let task = host.task(TaskOptions::new().deadline(Duration::from_secs(30)).budget(8))?;
    /// let args = serde_json::value::RawValue::from_string(r#"{"q":"weather"}"#.into())?;
    /// let call = host.in_task(task).call_tool(lane, "search", &args, CallOptions::default())?;
    /// host.cancel_task(task)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn lane(
        &mut self,
        server: ServerId,
        principal: PrincipalId,
    ) -> Result<ServerId, LaneError> {
        let server = self.client.lanes.lane(server).map_or(server, |(base, _)| base);
        if self.client.server(server).is_none() || self.client.lanes.base(server).is_none() {
            return Err(LaneError::UnknownServer);
        }
        if self.client.lanes.principal(principal).is_none() {
            return Err(LaneError::UnknownPrincipal);
        }
        if self.client.state(server) == Some(ServerState::Closed) {
            // The host closed it: a lane would start a process or session for it again.
            return Err(LaneError::Closed);
        }
        if let Some(lane) = self.client.lanes.linked(server, principal) {
            if self.client.server(lane).is_some() {
                return Ok(lane);
            }
        }
        let lane = self.open_lane(server, principal)?;
        self.client.lanes.link(server, principal, lane);
        // Its records name the server it is a lane of, as its authorization requests do (not
        // the program or host it defaults to, which two servers may share).
        if let Some(name) = self.client.server_name(server).map(str::to_owned) {
            self.client.set_server_name(lane, &name);
        }
        Ok(lane)
    }

    /// Closes the lanes of `server` along with it (see [`Host::close_server`]).
    pub(super) fn close_lanes(&mut self, server: ServerId) {
        for lane in self.client.lanes.lanes_on(server) {
            self.close_server(lane);
        }
    }

    /// Removes the lanes of `server` along with it, or unlinks a lane being removed.
    pub(super) fn remove_lanes(&mut self, server: ServerId) {
        for lane in self.client.lanes.forget(server) {
            self.remove_server(lane);
        }
    }

    fn open_lane(
        &mut self,
        server: ServerId,
        principal: PrincipalId,
    ) -> Result<ServerId, LaneError> {
        let now = Instant::now();
        let identity =
            self.client.server(server).ok_or(LaneError::UnknownServer)?.catalog.identity();
        let identity = identity.to_owned();
        // The lane serves its server's files: the same roots, within the same boundary.
        let base = self.client.engine(server).ok_or(LaneError::UnknownServer)?;
        let boundary = base.roots_boundary().clone();
        let roots = base.roots().map(str::to_owned);
        // A credential source knows servers by program or URL: not by the fingerprint of
        // their context.
        let shown = crate::catalog::key::without_context(&identity);
        // `lane` has checked that both are here.
        let (recipe, p) =
            self.client.lanes.recipe_for(server, principal).ok_or(LaneError::UnknownServer)?;
        let mut config = recipe.config().clone();
        // The server's saved era verdict answered its own context: a lane starts from it only
        // when the server said it may be shared, and within the server's tenant (a server's
        // word that a result is public is not for the host's other tenants). Else the lane
        // probes with its principal's credentials, and is told its own instructions and
        // capabilities.
        let same_tenant = p.tenant.is_none() || p.tenant == config.cache_tenant;
        if !(same_tenant && config.saved_discover.as_ref().is_some_and(SavedVerdict::is_public)) {
            config.saved_discover = None;
        }
        if p.tenant.is_some() {
            config.cache_tenant = p.tenant.clone();
        }
        let setup = |e| LaneError::Setup(e);
        let config = super::without_stale_verdict(config);
        let mut engine = Engine::new(config, now).map_err(|e| setup(AddServerError::Config(e)))?;
        engine.set_roots_boundary(boundary);
        if let Some(list) = roots.and_then(|r| serde_json::value::RawValue::from_string(r).ok()) {
            // Checked when it was set on the server, against this boundary.
            let _ = engine.set_roots(now, &list);
        }
        let tenant = engine.config().cache_tenant.clone();
        let registry = self.poll.registry();
        let (transport, http) = match recipe {
            Recipe::Stdio(command, _) => {
                let target = LaneTarget { identity: shown, url: None };
                // The server's own credentials stay with it; the principal's are added.
                let mut command = command.without_credentials();
                match p.credentials.as_mut().map(|c| c.credentials(&target)) {
                    Some(Credentials::Env(vars)) => {
                        for (k, v) in vars {
                            command = command.env(k, v);
                        }
                    }
                    Some(Credentials::None) | None => {}
                    #[cfg(feature = "http")]
                    Some(_) => log::debug!("HTTP credentials ignored for a stdio lane"),
                }
                let token = self.poll.reserve(Self::STDIO_SERVER_TOKENS).map_err(setup)?;
                let program = command.program().to_string_lossy().into_owned();
                let mut driver = StdioDriver::new(command, engine.config(), token);
                driver
                    .spawn(registry, &mut engine, now)
                    .map_err(|error| setup(AddServerError::Spawn { program, error }))?;
                (Transport::Stdio(driver), false)
            }
            #[cfg(feature = "http")]
            Recipe::Http(template, _) => {
                let mut opts = template.without_credentials();
                // The URL the lane connects to: without the server's own `?api_key=`.
                let url = opts.url.clone();
                let target = LaneTarget { identity: shown, url: Some(&url) };
                match p.credentials.as_mut().map(|c| c.credentials(&target)) {
                    Some(Credentials::Token(provider)) => opts.token_provider = Some(provider),
                    Some(Credentials::OAuth(flow, authorizer)) => {
                        opts.oauth = Some(*flow);
                        opts.authorizer = authorizer;
                    }
                    Some(Credentials::Env(_)) => log::debug!("env credentials ignored over HTTP"),
                    Some(Credentials::None) | None => {}
                }
                let config = engine.config().clone();
                let token = self.poll.reserve(Self::HTTP_SERVER_TOKENS).map_err(setup)?;
                let mut driver = HttpDriver::new(opts, &config, token, &mut engine, now)
                    .map_err(|e| setup(AddServerError::Http(e)))?;
                driver.flush(registry, &mut engine, now);
                (Transport::Http(driver), true)
            }
        };
        let catalog = ServerCatalog::new(identity, http, tenant)
            .for_principal(p.name.clone(), p.scopes.clone());
        Ok(self.insert(engine, transport, catalog, None))
    }
}
