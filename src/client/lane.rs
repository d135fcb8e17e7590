//! Opening a principal's lane on a server, all but its driver: which lane a call for the
//! principal goes to, and for a new one its configuration, the credentials it carries and its
//! catalog context. The shell starts the driver with the lane's engine, adds the lane as a
//! server, and links it ([`Client::link_lane`]). What a principal and a lane are is in
//! [`principal`](super::principal).

use std::time::{Instant, SystemTime};

use super::catalog::ServerCatalog;
use super::principal::{Credentials, LaneTarget, PrincipalId, Recipe};
use super::{Client, ServerId};
#[cfg(feature = "http")]
use crate::driver::http::HttpOptions;
use crate::driver::stdio::StdioCommand;
use crate::engine::{Engine, ServerState};
use crate::error::ConfigError;

/// Why there is no lane to have (the host's `LaneError` adds what starting a driver can say).
#[derive(Debug)]
pub(crate) enum LaneRefused {
    UnknownServer,
    UnknownPrincipal,
    /// The host closed the server: a lane would start a process or a session for it again.
    Closed,
    /// The lane's configuration does not make an engine.
    Config(ConfigError),
}

/// The lane a principal's calls on a server go to.
#[derive(Debug)]
pub(crate) enum Lane {
    /// Open already: the same lane while it exists.
    Open(ServerId),
    /// None yet: this one is to be started.
    Start(Box<LaneStart>),
}

/// A lane to start: its engine (whose driver the shell makes), how it reaches the server, and
/// its catalog context, for the shell to add as a server and [link](Client::link_lane).
#[derive(Debug)]
pub(crate) struct LaneStart {
    pub(crate) base: ServerId,
    pub(crate) principal: PrincipalId,
    pub(crate) engine: Engine,
    pub(crate) reach: Reach,
    pub(crate) catalog: ServerCatalog,
}

/// How a lane reaches its server: the server's transport without the server's own
/// credentials, with the principal's.
#[derive(Debug)]
pub(crate) enum Reach {
    Stdio(StdioCommand),
    #[cfg(feature = "http")]
    Http(Box<HttpOptions>),
}

impl Client {
    /// The lane of `principal` on `server` (given a lane, on the lane's server): the open one,
    /// or the lane to start. `wall` dates the server's saved era verdict.
    pub(crate) fn lane(
        &mut self,
        now: Instant,
        wall: SystemTime,
        server: ServerId,
        principal: PrincipalId,
    ) -> Result<Lane, LaneRefused> {
        let server = self.lanes.lane(server).map_or(server, |(base, _)| base);
        if self.server(server).is_none() || self.lanes.base(server).is_none() {
            return Err(LaneRefused::UnknownServer);
        }
        if self.lanes.principal(principal).is_none() {
            return Err(LaneRefused::UnknownPrincipal);
        }
        if self.state(server) == Some(ServerState::Closed) {
            return Err(LaneRefused::Closed);
        }
        if let Some(lane) = self.lanes.linked(server, principal) {
            if let Some(s) = self.server(lane) {
                // A lane that closed (its handshake refused, the host closed it) is started
                // anew as a restart would start it: handed back, it failed every call of the
                // principal for good while its server was fine. Not where restarts are off,
                // and no sooner than the longest restart delay after it was made, so a lane
                // that can never work costs a process per `max_delay`, not one per call.
                let restart = s.engine.config().restart;
                let due = crate::time::later(s.engine.created_at(), restart.max_delay);
                let closed = s.engine.state() == ServerState::Closed;
                if !(closed && restart.enabled && now >= due) {
                    return Ok(Lane::Open(lane));
                }
            }
        }
        let start = self.start_lane(now, wall, server, principal)?;
        Ok(Lane::Start(Box::new(start)))
    }

    /// Links `lane`, added as a server from a [`LaneStart`], to its server and principal.
    pub(crate) fn link_lane(&mut self, base: ServerId, principal: PrincipalId, lane: ServerId) {
        self.lanes.link(base, principal, lane);
        // Its records name the server it is a lane of, as its authorization requests do (not
        // the program or host it defaults to, which two servers may share).
        if let Some(name) = self.server_name(base).map(str::to_owned) {
            self.set_server_name(lane, &name);
        }
    }

    fn start_lane(
        &mut self,
        now: Instant,
        wall: SystemTime,
        server: ServerId,
        principal: PrincipalId,
    ) -> Result<LaneStart, LaneRefused> {
        let base = self.server(server).ok_or(LaneRefused::UnknownServer)?;
        let identity = base.catalog.identity().to_owned();
        // The lane serves its server's files: the same roots, within the same boundary.
        let boundary = base.engine.roots_boundary().clone();
        let roots = base.engine.roots().map(str::to_owned);
        // A credential source knows servers by program or URL: not by the fingerprint of
        // their context.
        let shown = crate::catalog::key::without_context(&identity);
        let (recipe, p) =
            self.lanes.recipe_for(server, principal).ok_or(LaneRefused::UnknownServer)?;
        let mut config = recipe.config().clone();
        // The server's saved era verdict answered its own context: a lane starts from it only
        // when the server said it may be shared, and within the server's tenant (a server's
        // word that a result is public is not for the host's other tenants), and while it is
        // fresh. Else the lane probes with its principal's credentials, and is told its own
        // instructions and capabilities.
        let same_tenant = p.tenant.is_none() || p.tenant == config.cache_tenant;
        let shared = config
            .saved_discover
            .as_ref()
            .is_some_and(|v| same_tenant && v.is_public() && v.is_fresh(wall));
        if !shared {
            config.saved_discover = None;
        }
        if p.tenant.is_some() {
            config.cache_tenant = p.tenant.clone();
        }
        let mut engine = Engine::new(config, now).map_err(LaneRefused::Config)?;
        engine.set_roots_boundary(boundary);
        if let Some(list) = roots.and_then(|r| serde_json::value::RawValue::from_string(r).ok()) {
            // Checked when it was set on the server, against this boundary.
            let _ = engine.set_roots(now, &list);
        }
        let mut credentials = |url| {
            let target = LaneTarget { identity: shown, url };
            p.credentials.as_mut().map_or(Credentials::None, |c| c.credentials(&target))
        };
        let (reach, http) = match recipe {
            Recipe::Stdio(command, _) => {
                // The server's own credentials stay with it; the principal's are added.
                let mut command = command.without_credentials();
                match credentials(None) {
                    Credentials::Env(vars) => {
                        for (k, v) in vars {
                            command = command.env(k, v);
                        }
                    }
                    Credentials::None => {}
                    #[cfg(feature = "http")]
                    _ => log::debug!("HTTP credentials ignored for a stdio lane"),
                }
                (Reach::Stdio(command), false)
            }
            #[cfg(feature = "http")]
            Recipe::Http(template, _) => {
                let mut opts = template.without_credentials();
                // The URL the lane connects to: without the server's own `?api_key=`.
                let url = opts.url.clone();
                match credentials(Some(&url)) {
                    Credentials::Token(provider) => opts.token_provider = Some(provider),
                    Credentials::OAuth(flow, authorizer) => {
                        opts.oauth = Some(*flow);
                        opts.authorizer = authorizer;
                    }
                    Credentials::Env(_) => log::debug!("env credentials ignored over HTTP"),
                    Credentials::None => {}
                }
                (Reach::Http(Box::new(opts)), true)
            }
        };
        let tenant = engine.config().cache_tenant.clone();
        let catalog = ServerCatalog::new(identity, http, tenant)
            .for_principal(p.name.clone(), p.scopes.clone());
        Ok(LaneStart { base: server, principal, engine, reach, catalog })
    }
}
