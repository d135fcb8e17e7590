//! The URL arithmetic of discovery: origins, well-known locations (RFC 9728 3.1, RFC 8414 3.1,
//! OpenID Connect Discovery 4), and whether a protected resource identifier covers the
//! server's URL (RFC 9728 3.3, RFC 8707 2).

/// An absolute `http(s)` URL cut into its parts, as written (nothing normalised but the
/// scheme's case, so identifiers compare exactly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parts<'a> {
    /// `http` or `https`, lower case.
    pub(crate) scheme: &'static str,
    /// Host and port as written.
    pub(crate) authority: &'a str,
    /// The path, empty or starting with `/`.
    pub(crate) path: &'a str,
    /// The query without `?`, if any.
    pub(crate) query: Option<&'a str>,
}

/// Cuts an absolute http or https URL; `None` for anything else, a fragment included
/// (identifiers and endpoints must not carry one).
pub(crate) fn parts(url: &str) -> Option<Parts<'_>> {
    if url.bytes().any(|b| b <= b' ' || b == 0x7f || b == b'#') {
        return None;
    }
    let (scheme, rest) = if url.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://")) {
        ("http", &url[7..])
    } else if url.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://")) {
        ("https", &url[8..])
    } else {
        return None;
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, rest) = rest.split_at(end);
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    Some(Parts { scheme, authority, path, query })
}

/// Whether secrets may go to `url`: an `https` URL, or an `http` one whose host is a loopback
/// address (`127.0.0.0/8`, `[::1]`) or `localhost`, where the traffic never leaves the machine
/// (OAuth 2.1 1.5 and 8.4.2). A name that merely resolves to a loopback address does not count.
pub(crate) fn is_secure(url: &str) -> bool {
    let Some(p) = parts(url) else { return false };
    if p.scheme == "https" {
        return true;
    }
    let host = match p.authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => p.authority.rsplit_once(':').map_or(p.authority, |(h, _)| h),
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `scheme://authority`.
pub(crate) fn origin(p: &Parts<'_>) -> String {
    format!("{}://{}", p.scheme, p.authority)
}

/// The Protected Resource Metadata locations for a resource URL, path-aware first and the
/// root second (RFC 9728 3.1; MCP authorization, "Protected Resource Metadata Discovery").
pub(crate) fn prm_locations(resource: &str) -> Vec<String> {
    let Some(p) = parts(resource) else { return Vec::new() };
    let base = origin(&p);
    let path = p.path.trim_end_matches('/');
    let mut out = Vec::with_capacity(2);
    if !path.is_empty() {
        out.push(format!("{base}/.well-known/oauth-protected-resource{path}"));
    }
    out.push(format!("{base}/.well-known/oauth-protected-resource"));
    out
}

/// The authorization server metadata locations for an issuer, in the order the MCP
/// authorization section gives: with a path, OAuth path insertion, OpenID path insertion,
/// OpenID path appending; without one, OAuth then OpenID.
pub(crate) fn as_metadata_locations(issuer: &str) -> Vec<String> {
    let Some(p) = parts(issuer) else { return Vec::new() };
    let base = origin(&p);
    let path = p.path.trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{base}/.well-known/oauth-authorization-server"),
            format!("{base}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{base}/.well-known/oauth-authorization-server{path}"),
            format!("{base}/.well-known/openid-configuration{path}"),
            format!("{base}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// Whether the PRM's `resource` identifies the server at `server_url`: the same origin
/// (scheme and host compared without case), and the resource's path is the server's path or
/// a whole-segment prefix of it (a PRM served at the root names the origin for every path
/// below it).
pub(crate) fn resource_covers(resource: &str, server_url: &str) -> bool {
    let (Some(r), Some(s)) = (parts(resource), parts(server_url)) else { return false };
    if r.scheme != s.scheme || !r.authority.eq_ignore_ascii_case(s.authority) || r.query.is_some() {
        return false;
    }
    let rp = r.path.trim_end_matches('/');
    let sp = s.path;
    rp.is_empty() || sp == rp || sp.strip_prefix(rp).is_some_and(|rest| rest.starts_with('/'))
}

/// `endpoint` with `query` appended (`?` or `&` as the endpoint already has a query).
pub(crate) fn with_query(endpoint: &str, query: &str) -> String {
    let sep = if endpoint.contains('?') { '&' } else { '?' };
    format!("{endpoint}{sep}{query}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_urls() {
        let p = parts("HTTPS://Host:8443/a/b?x=1").unwrap();
        assert_eq!(
            (p.scheme, p.authority, p.path, p.query),
            ("https", "Host:8443", "/a/b", Some("x=1"))
        );
        let p = parts("http://h").unwrap();
        assert_eq!((p.path, p.query), ("", None));
        for bad in ["ftp://h/", "http://", "http://u@h/", "http://h/#f", "http://h /", "h/x"] {
            assert_eq!(parts(bad), None, "{bad}");
        }
    }

    #[test]
    fn well_known_locations() {
        assert_eq!(
            prm_locations("http://localhost:3000/mcp"),
            [
                "http://localhost:3000/.well-known/oauth-protected-resource/mcp",
                "http://localhost:3000/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(prm_locations("https://h/"), ["https://h/.well-known/oauth-protected-resource"]);
        assert_eq!(
            as_metadata_locations("https://as.example/tenant1/"),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            as_metadata_locations("https://as.example"),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration"
            ]
        );
        assert!(as_metadata_locations("not a url").is_empty());
    }

    #[test]
    fn resource_matching() {
        let server = "http://localhost:3000/mcp";
        for ok in [
            "http://localhost:3000/mcp",
            "http://localhost:3000",
            "http://LOCALHOST:3000/",
            "http://localhost:3000/mcp/",
        ] {
            assert!(resource_covers(ok, server), "{ok}");
        }
        assert!(resource_covers("http://localhost:3000/mcp", "http://localhost:3000/mcp/sub"));
        for bad in [
            "https://evil.example.com/mcp",
            "https://localhost:3000/mcp",
            "http://localhost:3001/mcp",
            "http://localhost:3000/mc",
            "http://localhost:3000/mcp/other",
            "http://localhost:3000/mcp?x",
            "garbage",
        ] {
            assert!(!resource_covers(bad, server), "{bad}");
        }
        assert_eq!(with_query("https://a/authorize", "x=1"), "https://a/authorize?x=1");
        assert_eq!(with_query("https://a/authorize?t=2", "x=1"), "https://a/authorize?t=2&x=1");
    }
}
