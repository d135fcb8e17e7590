//! Where an HTTP server is: the instance in use with its addresses, and the alternates a
//! stateless server can be reached at instead.

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

use super::HttpSetupError;
use crate::driver::url::{proxy_for, HttpUrl, ProxyChoice};

/// One instance of the server: where it is and how to reach it.
#[derive(Debug, Clone)]
pub(super) struct Instance {
    pub(super) url: HttpUrl,
    pub(super) host_header: String,
    pub(super) proxy: Option<HttpUrl>,
    pub(super) addrs: Vec<SocketAddr>,
}

impl Instance {
    /// Parses `url`, picks its proxy, and resolves whichever is connected to (blocking).
    pub(super) fn resolve(url: &str, proxy: &ProxyChoice) -> Result<Self, HttpSetupError> {
        let url = HttpUrl::parse(url).map_err(HttpSetupError::Url)?;
        let proxy = proxy_for(&url, proxy).map_err(HttpSetupError::Url)?;
        let mut instance = Self { host_header: url.host_header(), url, proxy, addrs: Vec::new() };
        instance.lookup().map_err(HttpSetupError::Resolve)?;
        Ok(instance)
    }

    fn lookup(&mut self) -> io::Result<()> {
        let (host, port) = match &self.proxy {
            Some(p) => (p.host.as_str(), p.port),
            None => (self.url.host.as_str(), self.url.port),
        };
        self.addrs = (host, port).to_socket_addrs()?.collect();
        if self.addrs.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no address for host"));
        }
        Ok(())
    }
}

/// The instance in use, the next of its addresses to try, and the standby instances.
#[derive(Debug)]
pub(super) struct Instances {
    current: Instance,
    next_addr: usize,
    standby: VecDeque<Instance>,
}

impl Instances {
    pub(super) fn new(current: Instance, standby: VecDeque<Instance>) -> Self {
        Self { current, next_addr: 0, standby }
    }

    pub(super) fn current(&self) -> &Instance {
        &self.current
    }

    /// The address to connect to. When every known one failed, the resolver is asked again
    /// (this blocks): never per call, only after failures.
    pub(super) fn next_addr(&mut self) -> io::Result<SocketAddr> {
        if self.next_addr >= self.current.addrs.len() {
            self.current.lookup()?;
            self.next_addr = 0;
        }
        self.current
            .addrs
            .get(self.next_addr)
            .copied()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address for host"))
    }

    /// A connection to the current address failed: the next one is tried next time.
    pub(super) fn connect_failed(&mut self) {
        self.next_addr += 1;
    }

    /// Moves new connections to the next instance; `false` when there is none.
    pub(super) fn rotate(&mut self) -> bool {
        let Some(next) = self.standby.pop_front() else { return false };
        log::debug!("switching to instance {}", next.host_header);
        let current = std::mem::replace(&mut self.current, next);
        self.next_addr = 0;
        self.standby.push_back(current);
        true
    }
}
