//! HTTP URLs and proxy choice, parsed once when a server is added.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use crate::redact::RedactedUrl;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// Plain TCP.
    Http,
    /// TLS.
    Https,
}

/// A parsed `http://` or `https://` URL. `Debug` hides secret-looking query values.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct HttpUrl {
    /// The scheme.
    pub scheme: Scheme,
    /// The host: a name, or an IP literal without brackets.
    pub host: String,
    /// The port (the scheme's default when the URL names none).
    pub port: u16,
    /// Path and query, origin-form (`/mcp?x=1`); `/` when empty.
    pub target: String,
}

/// Why a URL was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UrlError {
    /// Not `http://` or `https://`.
    Scheme,
    /// No host, or a malformed one (an unclosed `[`, a bad IPv6 literal).
    Host,
    /// The port is not a number from 1 to 65535.
    Port,
    /// Credentials in the URL (`user:pass@`): tokens belong in a header, never in a URL.
    Credentials,
    /// Spaces or control characters.
    Characters,
    /// A proxy given as `https://`: proxies are spoken to in plain HTTP (`CONNECT`), and TLS
    /// to the proxy itself is not supported.
    ProxyScheme,
    /// A proxy URL with credentials (`http://user:pass@proxy:3128`, often from
    /// `HTTPS_PROXY`): proxy authentication is not supported.
    ProxyCredentials,
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl UrlError {
    /// What is wrong, in a few words.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Self::Scheme => "the URL must start with http:// or https://",
            Self::Host => "the URL has no valid host",
            Self::Port => "the URL's port is not valid",
            Self::Credentials => {
                "credentials in the URL are refused; use a header or a token provider"
            }
            Self::Characters => "the URL contains spaces or control characters",
            Self::ProxyScheme => "an https:// proxy is not supported; give it as http://",
            Self::ProxyCredentials => {
                "the proxy URL holds credentials, and proxy authentication is not supported \
                 (remove them, or, for a proxy from HTTPS_PROXY or HTTP_PROXY, name the server \
                 in NO_PROXY)"
            }
        }
    }
}

impl std::error::Error for UrlError {}

impl fmt::Debug for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpUrl")
            .field("scheme", &self.scheme)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("target", &RedactedUrl(&self.target))
            .finish()
    }
}

impl HttpUrl {
    /// Parses `scheme://host[:port][/path][?query][#fragment]`; the fragment is dropped.
    pub(crate) fn parse(url: &str) -> Result<Self, UrlError> {
        if url.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(UrlError::Characters);
        }
        let (scheme, rest) = if let Some(r) = strip_prefix_ci(url, "http://") {
            (Scheme::Http, r)
        } else if let Some(r) = strip_prefix_ci(url, "https://") {
            (Scheme::Https, r)
        } else {
            return Err(UrlError::Scheme);
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, target) = rest.split_at(split);
        if authority.contains('@') {
            return Err(UrlError::Credentials);
        }
        let (host, port) = split_host_port(authority)?;
        let port = match port {
            // Digits only: `u16::from_str` also takes a leading `+`, which no URL parser does.
            Some(p) if !p.bytes().all(|b| b.is_ascii_digit()) => return Err(UrlError::Port),
            Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0).ok_or(UrlError::Port)?,
            None if scheme == Scheme::Https => 443,
            None => 80,
        };
        let target = match target {
            "" => "/".to_owned(),
            t if t.starts_with('?') => format!("/{t}"),
            t => t.to_owned(),
        };
        Ok(Self { scheme, host: host.to_ascii_lowercase(), port, target })
    }

    /// The `Host` header value: the host (IPv6 in brackets) and the port unless it is the
    /// scheme's default.
    pub(crate) fn host_header(&self) -> String {
        let host =
            if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        let default = if self.scheme == Scheme::Https { 443 } else { 80 };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The URI a request to this URL targets, as its `Host` header and request line say it,
    /// without query: a DPoP proof's `htu` (RFC 9449 4.2). Normalized as the request is
    /// (scheme and host in lower case, no default port, `/` for an empty path), so a server
    /// that compares `htu` with the request exactly accepts it whatever the configured
    /// spelling (`HTTPS://MCP.Example.com:443/mcp`).
    pub(crate) fn htu(&self) -> String {
        let scheme = if self.scheme == Scheme::Https { "https" } else { "http" };
        let path = self.target.split_once('?').map_or(self.target.as_str(), |(p, _)| p);
        format!("{scheme}://{}{path}", self.host_header())
    }

    /// `host:port` with the port always present (the CONNECT request target).
    pub(crate) fn authority(&self) -> String {
        let host =
            if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        format!("{host}:{}", self.port)
    }

    fn is_loopback(&self) -> bool {
        self.host == "localhost" || self.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &s[prefix.len()..])
}

fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), UrlError> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or(UrlError::Host)?;
        host.parse::<std::net::Ipv6Addr>().map_err(|_| UrlError::Host)?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(UrlError::Host)?),
        };
        return Ok((host, port));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    if host.is_empty() || !plain_name(host) {
        return Err(UrlError::Host);
    }
    Ok((host, port))
}

/// A host name the driver can connect to as written, and that every URL parser reads the same
/// way: ASCII letters, digits, `-`, `.` and `_` (an international name in its `xn--` form; no
/// percent-encoding). A name whose last label is a number is an IPv4 address to a WHATWG
/// parser (`127.1`, `0x7f.1`, `010.0.0.1` all name some address), so only the dotted-decimal
/// form is taken: the address connected to is then the one a browser or a proxy would see.
fn plain_name(host: &str) -> bool {
    if !host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')) {
        return false;
    }
    let last = host.strip_suffix('.').unwrap_or(host).rsplit('.').next().unwrap_or_default();
    let hex = last.strip_prefix("0x").or_else(|| last.strip_prefix("0X"));
    let numeric = match hex {
        Some(digits) => digits.bytes().all(|b| b.is_ascii_hexdigit()),
        None => !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()),
    };
    !numeric || host.parse::<Ipv4Addr>().is_ok()
}

/// Where the driver's connections go first. `Debug` hides any `user:password@` in a proxy
/// URL (such a URL is refused when the server is added, but may be printed before).
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyChoice {
    /// Read `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY` (upper or lower case) when the server is
    /// added. Loopback hosts never go through an environment proxy.
    #[default]
    FromEnv,
    /// Connect directly.
    Direct,
    /// Tunnel through this proxy with HTTP CONNECT.
    Url(String),
}

impl fmt::Debug for ProxyChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FromEnv => f.write_str("FromEnv"),
            Self::Direct => f.write_str("Direct"),
            Self::Url(url) => f.debug_tuple("Url").field(&RedactedUrl(url)).finish(),
        }
    }
}

/// Resolves the proxy for `target`, if any.
pub(crate) fn proxy_for(
    target: &HttpUrl,
    choice: &ProxyChoice,
) -> Result<Option<HttpUrl>, UrlError> {
    let from_env =
        |names: &[&str]| names.iter().find_map(|n| std::env::var(n).ok()).filter(|v| !v.is_empty());
    let url = match choice {
        ProxyChoice::Direct => return Ok(None),
        ProxyChoice::Url(u) => u.clone(),
        ProxyChoice::FromEnv => {
            if target.is_loopback() {
                return Ok(None);
            }
            let no_proxy = from_env(&["NO_PROXY", "no_proxy"]).unwrap_or_default();
            if bypassed(&target.host, &no_proxy) {
                return Ok(None);
            }
            let names: &[&str] = match target.scheme {
                Scheme::Https => &["HTTPS_PROXY", "https_proxy"],
                Scheme::Http => &["HTTP_PROXY", "http_proxy"],
            };
            match from_env(names) {
                Some(u) => u,
                None => return Ok(None),
            }
        }
    };
    proxy_url(&url).map(Some)
}

/// A proxy's URL, checked as the driver uses it: the scheme may be left out (`http://`).
pub(crate) fn proxy_url(url: &str) -> Result<HttpUrl, UrlError> {
    // Proxies are often given without a scheme.
    let url = if url.contains("://") { url.to_owned() } else { format!("http://{url}") };
    // Looked for before the parse: refused as the server URL's, they would be said to be the
    // server URL's; and a password with a `/`, `?` or `#` in it, unencoded, ends the
    // authority early for the parser (which then reads a bad host or port). Any `@` says
    // credentials, so the parse never meets them.
    if url.contains('@') {
        return Err(UrlError::ProxyCredentials);
    }
    let proxy = HttpUrl::parse(&url)?;
    // Spoken to in plain text, an https:// proxy would fail every connection, and say so badly.
    if proxy.scheme == Scheme::Https {
        return Err(UrlError::ProxyScheme);
    }
    Ok(proxy)
}

/// `NO_PROXY`: comma-separated hosts or domain suffixes (`example.com`, `.example.com`), ports
/// ignored, `*` for everything.
fn bypassed(host: &str, no_proxy: &str) -> bool {
    no_proxy.split(',').map(str::trim).filter(|e| !e.is_empty()).any(|entry| {
        if entry == "*" {
            return true;
        }
        let entry = no_proxy_host(entry).trim_start_matches('.').to_ascii_lowercase();
        !entry.is_empty() && (host == entry || host.ends_with(&format!(".{entry}")))
    })
}

/// The host of a `NO_PROXY` entry, without its port: `[fd00::5]:443` and `fd00::5` (an IPv6
/// address, whose colons are not a port's) give `fd00::5`; `example.com:443` gives
/// `example.com`.
fn no_proxy_host(entry: &str) -> &str {
    if let Some(rest) = entry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    if entry.matches(':').count() > 1 {
        return entry;
    }
    entry.split(':').next().unwrap_or(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DPoP proof's `htu` is the URI the request goes to, spelled as the request spells it:
    /// the configured URL's case and default port were kept, and a verifier comparing
    /// exactly refused the proof.
    #[test]
    fn the_htu_is_normalized_as_the_request_is() {
        let htu = |u: &str| HttpUrl::parse(u).unwrap().htu();
        assert_eq!(htu("HTTPS://MCP.Example.com:443/mcp?x=1#f"), "https://mcp.example.com/mcp");
        assert_eq!(htu("http://h:8080"), "http://h:8080/");
        assert_eq!(htu("https://[::1]:8443/a/b"), "https://[::1]:8443/a/b");
    }

    #[test]
    fn parses_urls() {
        let u = HttpUrl::parse("http://127.0.0.1:18101/mcp").unwrap();
        assert_eq!(
            (u.scheme, u.host.as_str(), u.port, u.target.as_str()),
            (Scheme::Http, "127.0.0.1", 18101, "/mcp")
        );
        assert_eq!(u.host_header(), "127.0.0.1:18101");
        let u = HttpUrl::parse("HTTPS://Example.COM").unwrap();
        assert_eq!(
            (u.port, u.target.as_str(), u.host_header()),
            (443, "/", "example.com".to_owned())
        );
        let u = HttpUrl::parse("https://[::1]:8443/a/b?x=1&y=2#frag").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.target.as_str()), ("::1", 8443, "/a/b?x=1&y=2"));
        assert_eq!(u.host_header(), "[::1]:8443");
        assert_eq!(HttpUrl::parse("http://h?q=1").unwrap().target, "/?q=1");
        assert_eq!(HttpUrl::parse("http://[::1]/").unwrap().port, 80);
        let u = HttpUrl::parse("http://xn--bcher-kva.example_1.test.:0080").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("xn--bcher-kva.example_1.test.", 80));
        assert_eq!(HttpUrl::parse("http://10.0.0.1/").unwrap().host, "10.0.0.1");
        assert_eq!(HttpUrl::parse("http://v1.0x/").unwrap_err(), UrlError::Host);
        assert_eq!(HttpUrl::parse("http://a.0xg/").unwrap().host, "a.0xg");
        for (bad, err) in [
            ("ftp://x", UrlError::Scheme),
            ("http://", UrlError::Host),
            ("http://:80/", UrlError::Host),
            ("http://[::1/", UrlError::Host),
            ("http://[zz]/", UrlError::Host),
            ("http://h:0/", UrlError::Port),
            ("http://h:99999/", UrlError::Port),
            ("http://h:x/", UrlError::Port),
            ("http://u:p@h/", UrlError::Credentials),
            ("http://h/a b", UrlError::Characters),
            // Found by the url_parse fuzz target (differential against the `url` crate).
            ("http://h:+80/", UrlError::Port),
            ("http://0x7f.1:80/", UrlError::Host),
            ("http://127.1/", UrlError::Host),
            ("http://010.0.0.1/", UrlError::Host),
            ("http://1.2.3.4./", UrlError::Host),
            ("http://a<b/", UrlError::Host),
            ("http://a%41/", UrlError::Host),
            ("http://bücher.example/", UrlError::Host),
        ] {
            assert_eq!(HttpUrl::parse(bad), Err(err), "{bad}");
        }
    }

    #[test]
    fn no_proxy_rules() {
        assert!(bypassed("api.example.com", "localhost, .example.com"));
        assert!(bypassed("example.com", "example.com:443"));
        assert!(!bypassed("badexample.com", "example.com"));
        assert!(bypassed("anything", "*"));
        assert!(!bypassed("h", ""));
    }

    /// IPv6 entries, bare or bracketed, with or without a port, match the address; none of
    /// them becomes an empty entry that matches a name ending in a dot.
    #[test]
    fn no_proxy_ipv6_entries() {
        assert!(bypassed("::1", "::1"));
        assert!(bypassed("fd00::5", "fd00::5"));
        assert!(bypassed("fd00::5", "[fd00::5]"));
        assert!(bypassed("fd00::5", "[fd00::5]:8443"));
        assert!(!bypassed("fd00::6", "[fd00::5]"));
        assert!(!bypassed("example.com.", "::1"));
        assert!(!bypassed("example.com.", "[::1]"));
    }

    #[test]
    fn explicit_proxy_and_loopback_bypass() {
        let t = HttpUrl::parse("https://127.0.0.1:9/mcp").unwrap();
        assert_eq!(
            proxy_for(&t, &ProxyChoice::FromEnv).unwrap(),
            None,
            "loopback never uses an env proxy"
        );
        let p = proxy_for(&t, &ProxyChoice::Url("127.0.0.1:3128".into())).unwrap().unwrap();
        assert_eq!((p.host.as_str(), p.port), ("127.0.0.1", 3128));
        assert_eq!(proxy_for(&t, &ProxyChoice::Direct).unwrap(), None);
        let tls_proxy = ProxyChoice::Url("https://proxy.example:443".into());
        assert_eq!(proxy_for(&t, &tls_proxy), Err(UrlError::ProxyScheme));
        // A proxy's credentials are the proxy's, not the server URL's (whose error said to
        // move them to a header, a thing the user had not done).
        for with_user in ["http://alice:pw@proxy.example:3128", "http://alice:pa/ss@proxy:3128"] {
            let with_user = ProxyChoice::Url(with_user.into());
            assert_eq!(proxy_for(&t, &with_user), Err(UrlError::ProxyCredentials));
        }
        assert!(UrlError::ProxyCredentials.to_string().contains("proxy"));
    }

    #[test]
    fn a_proxy_urls_credentials_never_show_in_debug() {
        let cases = [
            ("http://alice:pa55@proxy:3128", "Url(\"http://<redacted>@proxy:3128\")"),
            ("http://a@b:c@proxy:3128/x?u@v", "Url(\"http://<redacted>@proxy:3128/x?u@v\")"),
            ("user:pa55@proxy:3128", "Url(\"<redacted>@proxy:3128\")"),
            ("http://proxy:3128/p@th", "Url(\"http://proxy:3128/p@th\")"),
        ];
        for (url, shown) in cases {
            let debug = format!("{:?}", ProxyChoice::Url(url.into()));
            assert_eq!(debug, shown);
            assert!(!debug.contains("pa55"), "{debug}");
        }
        assert_eq!(format!("{:?}", ProxyChoice::FromEnv), "FromEnv");
    }
}
