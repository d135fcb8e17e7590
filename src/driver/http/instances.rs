//! Where an HTTP server is: the instance in use with its addresses, and the alternates a
//! stateless server can be reached at instead. Names are resolved off the loop
//! ([`resolve`](super::resolve)); an IP literal needs no resolution.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use mio::{Registry, Token};

use super::resolve::{literal, Lookup, Resolver};
use super::HttpSetupError;
use crate::codec::http1::{Origin, RequestError};
use crate::driver::url::{proxy_for, HttpUrl, ProxyChoice, Scheme, UrlError};

/// One instance of the server: where it is and how to reach it.
#[derive(Debug, Clone)]
pub(super) struct Instance {
    pub(super) url: HttpUrl,
    /// The URL's target and `Host` value, checked once for every request written to them.
    pub(super) origin: Origin,
    /// The URL without query or fragment: a DPoP proof's `htu` (RFC 9449 4.2).
    pub(super) htu: String,
    pub(super) proxy: Option<HttpUrl>,
    /// Empty until a name is resolved.
    pub(super) addrs: Vec<SocketAddr>,
}

impl Instance {
    /// Parses `url` and picks its proxy. No I/O: an IP literal gives its address at once, a
    /// name is resolved when a connection is first needed.
    pub(super) fn parse(url: &str, proxy: &ProxyChoice) -> Result<Self, HttpSetupError> {
        let url = HttpUrl::parse(url).map_err(HttpSetupError::Url)?;
        let htu = url.htu();
        let proxy = proxy_for(&url, proxy).map_err(HttpSetupError::Url)?;
        let origin = Origin::new(&url.target, &url.host_header()).map_err(|e| {
            // The URL parser refuses what the request writer would; this is its second line.
            HttpSetupError::Url(match e {
                RequestError::Host => UrlError::Host,
                _ => UrlError::Characters,
            })
        })?;
        let mut instance = Self { origin, htu, url, proxy, addrs: Vec::new() };
        let (host, port) = instance.connect_to();
        instance.addrs = literal(host, port).unwrap_or_default();
        Ok(instance)
    }

    /// Takes a redirect's `Location` as the endpoint's new path: a path (`/mcp/`), or a URL
    /// of the same origin (scheme, host and port). Another origin is refused (`false`): the
    /// requests carry the server's credentials. Connections are unchanged (same origin).
    ///
    /// One exception: an `http://` location on port 80 of the same host, answering `https`,
    /// is what a server behind a proxy that ends TLS writes (it sees plain HTTP): its path is
    /// taken, and the requests stay on `https`.
    pub(super) fn move_to(&mut self, location: &str) -> bool {
        let location = location.split_once('#').map_or(location, |(l, _)| l);
        let target = if location.starts_with('/') && !location.starts_with("//") {
            location.to_owned()
        } else {
            let Ok(url) = HttpUrl::parse(location) else { return false };
            let here = &self.url;
            let same = (url.scheme, url.port) == (here.scheme, here.port);
            let behind_tls_proxy =
                (here.scheme, url.scheme, url.port) == (Scheme::Https, Scheme::Http, 80);
            if url.host != here.host || !(same || behind_tls_proxy) {
                return false;
            }
            url.target
        };
        let Ok(origin) = Origin::new(&target, &self.url.host_header()) else { return false };
        self.url.target = target;
        self.origin = origin;
        self.htu = self.url.htu();
        true
    }

    /// The host and port a connection goes to: the proxy's, when there is one.
    pub(super) fn connect_to(&self) -> (&str, u16) {
        match &self.proxy {
            Some(p) => (p.host.as_str(), p.port),
            None => (self.url.host.as_str(), self.url.port),
        }
    }
}

/// Where the next connection goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NextAddr {
    /// Connect here.
    At(SocketAddr),
    /// The name is being resolved; readiness on the resolver token says when it is done.
    Resolving,
}

/// Which of a server's instances a connection was made to. Connections keep their instance
/// when new ones rotate to another: a request is written for the instance its connection
/// reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct InstanceId(usize);

/// The instance in use, the next of its addresses to try, and the standby instances (the
/// others, tried in order after it).
#[derive(Debug)]
pub(super) struct Instances {
    /// The first URL, then the alternates; never empty.
    all: Vec<Instance>,
    current: usize,
    next_addr: usize,
    resolver: Arc<dyn Resolver>,
    /// The resolution of `current`'s name in flight, and when it started.
    lookup: Option<(Lookup, Instant)>,
}

impl Instances {
    pub(super) fn new(
        first: Instance,
        alternates: VecDeque<Instance>,
        resolver: Arc<dyn Resolver>,
    ) -> Self {
        let mut all = Vec::with_capacity(1 + alternates.len());
        all.push(first);
        all.extend(alternates);
        Self { all, current: 0, next_addr: 0, resolver, lookup: None }
    }

    pub(super) fn current(&self) -> &Instance {
        &self.all[self.current]
    }

    /// The instance new connections go to.
    pub(super) fn current_id(&self) -> InstanceId {
        InstanceId(self.current)
    }

    /// The instance a connection was made to.
    pub(super) fn get(&self, id: InstanceId) -> &Instance {
        self.all.get(id.0).unwrap_or_else(|| self.current())
    }

    /// A redirect's `Location` for instance `id`, the one that answered ([`Instance::move_to`]).
    pub(super) fn move_instance(&mut self, id: InstanceId, location: &str) -> bool {
        self.all.get_mut(id.0).is_some_and(|i| i.move_to(location))
    }

    fn current_mut(&mut self) -> &mut Instance {
        &mut self.all[self.current]
    }

    /// The address to connect to. When every known one failed (or none is known yet), a
    /// name is resolved again on a helper thread, never per call and never on the loop.
    pub(super) fn next_addr(
        &mut self,
        registry: &Registry,
        token: Token,
        now: Instant,
    ) -> io::Result<NextAddr> {
        if self.lookup.is_some() {
            return Ok(NextAddr::Resolving);
        }
        if self.next_addr >= self.current().addrs.len() {
            self.next_addr = 0;
            let (host, port) = self.current().connect_to();
            if literal(host, port).is_none() {
                let lookup = Lookup::start(&self.resolver, host, port, registry, token)?;
                log::trace!("resolving {host}");
                self.lookup = Some((lookup, now));
                return Ok(NextAddr::Resolving);
            }
        }
        self.current()
            .addrs
            .get(self.next_addr)
            .copied()
            .map(NextAddr::At)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address for host"))
    }

    /// The address connections go to now (the last one that did not fail), if one is known.
    pub(super) fn addr_in_use(&self) -> Option<SocketAddr> {
        let addrs = &self.current().addrs;
        addrs.get(self.next_addr).or(addrs.first()).copied()
    }

    /// When the resolution in flight started, if one is.
    pub(super) fn resolving_since(&self) -> Option<Instant> {
        self.lookup.as_ref().map(|(_, since)| *since)
    }

    /// Counts a resolution that is taking too long from `now` on again (its waiting
    /// connections were failed; it goes on for the next ones, rather than starting a second
    /// thread on a resolver that hangs).
    pub(super) fn rearm_lookup(&mut self, now: Instant) {
        if let Some((_, since)) = self.lookup.as_mut() {
            *since = now;
        }
    }

    /// Readiness on the resolver token: the resolution's outcome once it is over (the
    /// addresses are in place for [`next_addr`](Self::next_addr)); `None` while it runs.
    pub(super) fn on_resolved(&mut self, registry: &Registry) -> Option<io::Result<()>> {
        let (lookup, _) = self.lookup.as_mut()?;
        let outcome = lookup.poll()?;
        if let Some((lookup, _)) = self.lookup.take() {
            lookup.close(registry);
        }
        self.next_addr = 0;
        Some(outcome.map(|addrs| self.current_mut().addrs = addrs))
    }

    /// A connection to `addr` failed: when that is the current address, the next one is
    /// tried next time. Several connections opened at once all go to the current address;
    /// each of their failures moved on one, past addresses never tried (a dead first
    /// address and a working second: both skipped, and the name resolved again to the
    /// dead one first).
    pub(super) fn connect_failed(&mut self, addr: SocketAddr) {
        if self.current().addrs.get(self.next_addr) == Some(&addr) {
            self.next_addr += 1;
        }
    }

    /// Moves new connections to the next instance; `false` when there is none.
    pub(super) fn rotate(&mut self, registry: &Registry) -> bool {
        if self.all.len() < 2 {
            return false;
        }
        self.current = (self.current + 1) % self.all.len();
        log::debug!("switching to instance {}", self.current().url.host_header());
        // A resolution in flight was for the old instance.
        if let Some((lookup, _)) = self.lookup.take() {
            lookup.close(registry);
        }
        self.next_addr = 0;
        true
    }

    /// Stops listening for a resolution in flight (shutdown).
    pub(super) fn close(&mut self, registry: &Registry) {
        if let Some((lookup, _)) = self.lookup.take() {
            lookup.close(registry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Connections opened together to a dead first address fail together: the second
    /// address is tried next, not skipped by the second failure.
    #[test]
    fn failures_of_connections_to_one_address_move_on_one_address() {
        let mut first = Instance::parse("http://10.0.0.1/mcp", &ProxyChoice::Direct).unwrap();
        let (dead, live): (SocketAddr, SocketAddr) =
            ("10.0.0.1:80".parse().unwrap(), "10.0.0.2:80".parse().unwrap());
        first.addrs = vec![dead, live];
        let resolver = Arc::new(crate::driver::http::resolve::SystemResolver);
        let mut instances = Instances::new(first, VecDeque::new(), resolver);
        let poll = mio::Poll::new().unwrap();
        let next = |instances: &mut Instances| match instances
            .next_addr(poll.registry(), Token(0), Instant::now())
            .unwrap()
        {
            NextAddr::At(addr) => Some(addr),
            NextAddr::Resolving => None,
        };
        let together = (next(&mut instances), next(&mut instances));
        assert_eq!(together, (Some(dead), Some(dead)), "two connections at once");
        instances.connect_failed(dead);
        instances.connect_failed(dead);
        assert_eq!(next(&mut instances), Some(live));
    }

    /// The DPoP `htu` of an instance is its request's URI, not the configured spelling: with
    /// `HTTPS://MCP.Example.com:443/mcp` the proofs said so while the request line and `Host`
    /// said `https://mcp.example.com/mcp`, and a verifier comparing exactly refused them.
    #[test]
    fn an_instances_htu_is_its_requests_uri() {
        let instance = Instance::parse("HTTPS://MCP.Example.com:443/mcp", &ProxyChoice::Direct);
        assert_eq!(instance.unwrap().htu, "https://mcp.example.com/mcp");
    }

    /// A redirect moves the endpoint to a path of the same origin only: the requests carry
    /// the server's credentials.
    #[test]
    fn a_redirect_moves_the_endpoint_within_its_origin_only() {
        let at = |url: &str| Instance::parse(url, &ProxyChoice::Direct).unwrap();
        for location in ["/mcp/", "http://Example.com:8000/mcp/", "/mcp/#frag"] {
            let mut i = at("http://example.com:8000/mcp?k=1");
            assert!(i.move_to(location), "{location}");
            assert_eq!(
                (i.url.target.as_str(), i.htu.as_str()),
                ("/mcp/", "http://example.com:8000/mcp/")
            );
        }
        // A server behind a proxy that ends TLS names plain HTTP: the path only is taken.
        let mut i = at("https://example.com/mcp");
        assert!(i.move_to("http://example.com/mcp/"));
        assert_eq!(i.htu, "https://example.com/mcp/");
        let mut i = at("https://example.com/mcp");
        assert!(!i.move_to("http://other.example/mcp/"));
        for location in [
            "https://example.com:8000/mcp/",
            "http://example.com/mcp/",
            "http://evil.example:8000/mcp/",
            "//evil.example/mcp/",
            "mcp/",
            "/mcp/\r\nX-Injected: 1",
        ] {
            let mut i = at("http://example.com:8000/mcp");
            assert!(!i.move_to(location), "{location}");
            assert_eq!(i.url.target, "/mcp", "{location}");
        }
    }
}
