//! Opening and closing principals' lanes: the part of principals that starts drivers. What a
//! principal and a lane are is in the core ([`crate::client::principal`]).

use std::fmt;
use std::time::{Instant, SystemTime};

use super::{AddServerError, Host};
use crate::client::lane::{Lane, LaneRefused, LaneStart, Reach};
use crate::client::{PrincipalId, ServerId};
#[cfg(feature = "http")]
use crate::driver::http::HttpDriver;
use crate::driver::stdio::StdioDriver;
use crate::driver::transport::Transport;

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

impl From<LaneRefused> for LaneError {
    fn from(refused: LaneRefused) -> Self {
        match refused {
            LaneRefused::UnknownServer => Self::UnknownServer,
            LaneRefused::UnknownPrincipal => Self::UnknownPrincipal,
            LaneRefused::Closed => Self::Closed,
            LaneRefused::Config(e) => Self::Setup(AddServerError::Config(e)),
        }
    }
}

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
        let now = Instant::now();
        let start = match self.client.lane(now, SystemTime::now(), server, principal)? {
            Lane::Open(lane) => return Ok(lane),
            Lane::Start(start) => *start,
        };
        let LaneStart { base, principal, mut engine, reach, catalog } = start;
        // The closed lane this one replaces goes (its events stay to be drained, under its
        // own handle).
        if let Some(closed) = self.client.lanes.linked(base, principal) {
            self.remove_server(closed);
        }
        let setup = LaneError::Setup;
        let registry = self.poll.registry();
        let transport = match reach {
            Reach::Stdio(command) => {
                let token = self.poll.reserve(Self::STDIO_SERVER_TOKENS).map_err(setup)?;
                let program = command.program().to_string_lossy().into_owned();
                let mut driver = StdioDriver::new(command, engine.config(), token);
                driver
                    .spawn(registry, &mut engine, now)
                    .map_err(|error| setup(AddServerError::Spawn { program, error }))?;
                Transport::Stdio(driver)
            }
            #[cfg(feature = "http")]
            Reach::Http(opts) => {
                let config = engine.config().clone();
                let token = self.poll.reserve(Self::HTTP_SERVER_TOKENS).map_err(setup)?;
                let mut driver = HttpDriver::new(*opts, &config, token, &mut engine, now)
                    .map_err(|e| setup(AddServerError::Http(e)))?;
                driver.flush(registry, &mut engine, now);
                Transport::Http(driver)
            }
        };
        let lane = self.insert(engine, transport, catalog, None);
        self.client.link_lane(base, principal, lane);
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
}
