//! A host started from an `mcpServers` file ([`ConfigFile`]): every enabled server added, each
//! named by its key in the file.

use std::fmt;
use std::io;
use std::path::Path;

use super::{AddServerError, Host};
use crate::client::ServerId;
use crate::config_file::{ConfigFile, ConfigFileError, ConfiguredServer, ConfiguredTransport};

/// Why [`Host::from_config`] failed, or (in [`ServerNames::failures`]) why one of its
/// servers was not started.
#[derive(Debug)]
#[non_exhaustive]
pub enum FromConfigError {
    /// The file was refused, or (in [`ServerNames::failures`]) one entry of it: the error
    /// names the file, the server and the key.
    File(ConfigFileError),
    /// The host's poll could not be made.
    Io(io::Error),
    /// A server could not be added.
    Add {
        /// The server's name in the file.
        server: String,
        /// Why.
        error: AddServerError,
    },
}

impl fmt::Display for FromConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(e) => write!(f, "{e}"),
            Self::Io(e) => write!(f, "cannot create the host: {e}"),
            Self::Add { server, error } => write!(f, "server {server:?}: {error}"),
        }
    }
}

impl std::error::Error for FromConfigError {}

/// The servers [`Host::from_config`] started, by their names in the file, and the entries it
/// could not start.
#[derive(Debug, Default)]
pub struct ServerNames(Vec<(String, ServerId)>, Vec<FromConfigError>);

impl ServerNames {
    /// Each enabled entry that was not started, in name order: one mcpoll cannot use
    /// ([`FromConfigError::File`], naming the file, the server and the key) or one that could
    /// not be added ([`FromConfigError::Add`], by name). The other servers run regardless.
    pub fn failures(&self) -> &[FromConfigError] {
        &self.1
    }

    /// The server started for `name`.
    pub fn get(&self, name: &str) -> Option<ServerId> {
        self.0.iter().find(|(n, _)| n == name).map(|&(_, id)| id)
    }

    /// Every name and server, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, ServerId)> + '_ {
        self.0.iter().map(|(n, id)| (n.as_str(), *id))
    }
}

impl Host {
    /// A host running every server of an `mcpServers` file (except those marked
    /// `"disabled": true`), and their ids by name. Stdio servers are spawned now; every era
    /// probe starts at once. An entry mcpoll cannot use, or a server that cannot be added,
    /// is left out and reported in [`ServerNames::failures`]; the rest start regardless.
    ///
    /// # Errors
    ///
    /// Only for the file as a whole (unreadable, not JSON, no `mcpServers`) and the host's
    /// poll.
    pub fn from_config(path: impl AsRef<Path>) -> Result<(Self, ServerNames), FromConfigError> {
        let file = ConfigFile::load(path).map_err(FromConfigError::File)?;
        let mut host = Host::new().map_err(FromConfigError::Io)?;
        let (mut names, mut failures) = (Vec::new(), Vec::new());
        for entry in file.enabled_entries() {
            match entry {
                Ok(server) => match host.add_configured(server) {
                    Ok(id) => names.push((server.name().to_owned(), id)),
                    Err(error) => failures
                        .push(FromConfigError::Add { server: server.name().to_owned(), error }),
                },
                Err(e) => failures.push(FromConfigError::File(e.clone())),
            }
        }
        Ok((host, ServerNames(names, failures)))
    }

    /// Adds one server of a [`ConfigFile`], named in its call records by its key in the file.
    pub fn add_configured(
        &mut self,
        server: &ConfiguredServer,
    ) -> Result<ServerId, AddServerError> {
        // Roots that fail a check are refused before the server starts: checked after, a
        // process was started and killed for nothing, and its `Closed` event named a server
        // the caller was never given.
        if !server.roots().is_empty() {
            super::roots::roots_of_dirs(server.roots()).map_err(AddServerError::Roots)?;
        }
        let id = match &server.transport {
            ConfiguredTransport::Stdio(c) => {
                self.add_stdio_server(c.clone(), server.config().clone())
            }
            #[cfg(feature = "http")]
            ConfiguredTransport::Http(h) => {
                self.add_http_server(h.options(), server.config().clone())
            }
        }?;
        self.set_server_name(id, server.name());
        if !server.disabled_tools().is_empty() {
            self.disable_tools(id, server.disabled_tools().iter().cloned());
        }
        if !server.always_allowed_tools().is_empty() {
            self.always_allow_tools(id, server.always_allowed_tools().iter().cloned());
        }
        if !server.roots().is_empty() {
            if let Err(e) = self.set_root_dirs(id, server.roots()) {
                self.remove_server(id);
                return Err(AddServerError::Roots(e));
            }
        }
        Ok(id)
    }
}
