//! URLs as `{:?}` shows them: the user information of the authority (`user:password@`) and the
//! values of query parameters whose names look like credentials (`api_key`, `token`, ...)
//! are replaced, so a URL in a log or a panic message carries no secret.

// The HTTP transport uses all of it; without it, the Debug of stdio commands and catalogs.
#![cfg_attr(not(feature = "http"), allow(dead_code))]

use std::borrow::Cow;
use std::fmt;

/// What stands in for a hidden part.
const HIDDEN: &str = "<redacted>";

/// A URL shown redacted by `Debug` (quoted, like a string) and `Display`.
#[derive(Clone, Copy)]
pub(crate) struct RedactedUrl<'a>(pub(crate) &'a str);

impl fmt::Debug for RedactedUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&redact_url(self.0), f)
    }
}

impl fmt::Display for RedactedUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact_url(self.0))
    }
}

/// Several URLs, each redacted, as a list.
pub(crate) struct RedactedUrls<'a>(pub(crate) &'a [String]);

impl fmt::Debug for RedactedUrls<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter().map(|u| RedactedUrl(u))).finish()
    }
}

/// `url` with its user information and secret-looking query values replaced; borrowed when
/// there is nothing to hide.
pub(crate) fn redact_url(url: &str) -> Cow<'_, str> {
    rewrite(url, Secrets::Hide)
}

/// `url` without its user information and without the query parameters whose names look like
/// credentials (name and value gone): the URL another principal's lane of a server uses, which
/// must not carry the server's own `api_key` or password. Borrowed when there is nothing to
/// drop.
#[cfg(any(feature = "http", feature = "stdio"))]
pub(crate) fn url_without_credentials(url: &str) -> Cow<'_, str> {
    rewrite(url, Secrets::Drop)
}

/// What [`rewrite`] does with a credential it finds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Secrets {
    /// Shows that it was there: [`HIDDEN`] in its place, a query parameter's name kept.
    Hide,
    /// Leaves no trace of it.
    Drop,
}

/// [`redact_url`] and [`url_without_credentials`]: one reading of where a URL's user
/// information and query are.
fn rewrite(url: &str, secrets: Secrets) -> Cow<'_, str> {
    // The `://` after a scheme only: one further on (a URL in the query of an origin-form
    // target, `/cb?next=https://x`) starts nothing.
    let start = match url.find("://") {
        Some(i) if is_scheme(&url[..i]) => i + 3,
        _ => 0,
    };
    let mut end = url[start..].find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    let mut userinfo = url[start..end].rfind('@').map(|at| start + at);
    if userinfo.is_none() && start > 0 && !is_host_port(&url[start..end]) {
        // Not a host and port: a password with a `/`, `?` or `#` in it, unencoded, as users
        // paste them (`http://alice:pa/ss@proxy:3128`). The authority runs to the last `@`.
        if let Some(at) = url[start..].rfind('@').map(|at| start + at) {
            userinfo = Some(at);
            end = url[at..].find(['/', '?', '#']).map_or(url.len(), |i| at + i);
        }
    }
    let query = url[end..].find('?').map(|q| end + q).map(|q| {
        let stop = url[q..].find('#').map_or(url.len(), |i| q + i);
        (q + 1, stop)
    });
    let secret_query = query.is_some_and(|(a, b)| url[a..b].split('&').any(is_secret_pair));
    if userinfo.is_none() && !secret_query {
        return Cow::Borrowed(url);
    }
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..start]);
    match userinfo {
        // `at` is the `@`: hidden, the `@` stays; dropped, it goes too.
        Some(at) if secrets == Secrets::Hide => {
            out.push_str(HIDDEN);
            out.push_str(&url[at..end]);
        }
        Some(at) => out.push_str(&url[at + 1..end]),
        None => out.push_str(&url[start..end]),
    }
    let Some((a, b)) = query else {
        out.push_str(&url[end..]);
        return Cow::Owned(out);
    };
    // Up to and without the `?`: it is written with the first pair kept.
    out.push_str(&url[end..a - 1]);
    let mut kept = 0;
    for pair in url[a..b].split('&') {
        let secret = is_secret_pair(pair);
        if secret && secrets == Secrets::Drop {
            continue;
        }
        out.push(if kept == 0 { '?' } else { '&' });
        kept += 1;
        match pair.split_once('=') {
            Some((name, _)) if secret => {
                out.push_str(name);
                out.push('=');
                out.push_str(HIDDEN);
            }
            _ => out.push_str(pair),
        }
    }
    out.push_str(&url[b..]);
    Cow::Owned(out)
}

/// Whether `text` is a URL scheme (RFC 3986 3.1).
fn is_scheme(text: &str) -> bool {
    let mut bytes = text.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// Whether an authority without user information reads as a host with an optional numeric
/// port (a bracketed IPv6 address included).
fn is_host_port(authority: &str) -> bool {
    let port = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => &authority[i + 1..],
        _ => return true,
    };
    // A bare IPv6 address (no brackets) has more colons; its last group is hex.
    port.bytes().all(|b| b.is_ascii_digit())
        || (authority.matches(':').count() > 1 && !authority.starts_with('['))
}

/// Whether a `name=value` query pair names a credential (by the name, case-insensitively,
/// percent-encoding undone).
fn is_secret_pair(pair: &str) -> bool {
    let Some((name, value)) = pair.split_once('=') else { return false };
    if value.is_empty() {
        return false;
    }
    // A malformed escape leaves the name as it is: it is only looked at.
    let name = crate::proto::percent::decode(name).unwrap_or(Cow::Borrowed(name));
    let name = name.to_ascii_lowercase();
    names_a_credential(&name) || matches!(name.as_str(), "sig" | "code" | "jwt")
}

/// Whether a header or parameter name says its value is a credential (`Authorization`,
/// `Cookie`, `X-Api-Key`, `access_token`, ...), case-insensitively.
pub(crate) fn names_a_credential(name: &str) -> bool {
    const WORDS: [&str; 12] = [
        "key",
        "token",
        "secret",
        "pass",
        "pwd",
        "auth",
        "credential",
        "signature",
        "verifier",
        "assertion",
        "session",
        "cookie",
    ];
    // Short ones only as a whole part of the name (`GITHUB_PAT`, `CI_JOB_JWT`, `DB_PW`): met
    // anywhere, `pat` would take `PATH` for a credential.
    const PARTS: [&str; 3] = ["pat", "jwt", "pw"];
    let name = name.to_ascii_lowercase();
    WORDS.iter().any(|w| name.contains(w))
        || name.split(['_', '-', '.']).any(|part| PARTS.contains(&part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_secret_query_values_are_hidden() {
        let cases = [
            ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
            ("https://u:p@h:8443/mcp", "https://<redacted>@h:8443/mcp"),
            ("http://u@h/", "http://<redacted>@h/"),
            (
                "https://h/mcp?api_key=abc&x=1&Token=t#frag",
                "https://h/mcp?api_key=<redacted>&x=1&Token=<redacted>#frag",
            ),
            (
                "https://a:b@h/?access_token=z&secret=s&password=p&key=k&tenant=blue",
                "https://<redacted>@h/?access_token=<redacted>&secret=<redacted>\
                 &password=<redacted>&key=<redacted>&tenant=blue",
            ),
            ("https://h/?key=", "https://h/?key="),
            ("https://h/a@b?q=1", "https://h/a@b?q=1"),
            ("no scheme?sig=1", "no scheme?sig=<redacted>"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
            assert_eq!(format!("{:?}", RedactedUrl(url)), format!("{shown:?}"));
        }
        assert!(matches!(redact_url("https://h/x?y=1"), Cow::Borrowed(_)));
    }

    /// Origin-form targets (what an HTTP URL's `Debug` shows) carry a URL in their query at
    /// times: the `://` in it is no scheme's, and slicing as if it were panicked.
    #[test]
    fn a_url_inside_a_query_is_no_scheme() {
        let cases = [
            ("/mcp?token=abc&next=https://x", "/mcp?token=<redacted>&next=https://x"),
            ("/cb?next=https://u:p@x/", "/cb?next=https://u:p@x/"),
            (
                "https://h/cb?next=https://u:p@x/&key=k",
                "https://h/cb?next=https://u:p@x/&key=<redacted>",
            ),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    /// Passwords pasted with a `/`, `?` or `#` in them, and credential names spelled with
    /// percent escapes or as the OAuth parameters that carry secrets.
    #[test]
    fn unusual_credentials_are_hidden_too() {
        let cases = [
            ("http://alice:pa/ss@proxy:3128", "http://<redacted>@proxy:3128"),
            ("https://u:p?w@h/mcp", "https://<redacted>@h/mcp"),
            ("https://u:p#w@h/", "https://<redacted>@h/"),
            ("https://h/?%74oken=t", "https://h/?%74oken=<redacted>"),
            (
                "https://h/?code_verifier=v&client_assertion=a",
                "https://h/?code_verifier=<redacted>&client_assertion=<redacted>",
            ),
            ("https://h/?sessionid=s", "https://h/?sessionid=<redacted>"),
            // Hosts and ports stay as they are.
            ("http://[::1]:8080/a@b", "http://[::1]:8080/a@b"),
            ("http://h:8080/a@b", "http://h:8080/a@b"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    /// What another principal's lane of a server connects to: no user information, no
    /// credential parameter (name and value gone), everything else as it was.
    #[cfg(feature = "http")]
    #[test]
    fn a_lanes_url_has_no_credential_of_the_servers() {
        let cases = [
            ("https://h/mcp", "https://h/mcp"),
            ("https://u:p@h:8443/mcp?x=1", "https://h:8443/mcp?x=1"),
            ("https://h/mcp?api_key=abc&x=1&Token=t#frag", "https://h/mcp?x=1#frag"),
            ("https://h/mcp?x=1&api_key=abc", "https://h/mcp?x=1"),
            ("https://h/mcp?api_key=abc#frag", "https://h/mcp#frag"),
            ("https://h/mcp?%74oken=t&tenant=blue", "https://h/mcp?tenant=blue"),
            ("http://alice:pa/ss@h:3128/mcp", "http://h:3128/mcp"),
            ("https://h/mcp?key=", "https://h/mcp?key="),
        ];
        for (url, lane) in cases {
            assert_eq!(url_without_credentials(url), lane, "{url}");
        }
        assert!(matches!(url_without_credentials("https://h/x?y=1"), Cow::Borrowed(_)));
    }
}
