//! URLs as `{:?}` shows them: the user information of the authority (`user:password@`) and the
//! values of query parameters whose names look like credentials (`api_key`, `token`, ...)
//! are replaced, so a URL in a log or a panic message carries no secret.

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
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..].find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    let userinfo = url[start..end].rfind('@').map(|at| start + at);
    let query = url.find('?').map(|q| {
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
        Some(at) => {
            out.push_str(HIDDEN);
            out.push_str(&url[at..end]);
        }
        None => out.push_str(&url[start..end]),
    }
    match query {
        Some((a, b)) => {
            out.push_str(&url[end..a]);
            for (i, pair) in url[a..b].split('&').enumerate() {
                if i > 0 {
                    out.push('&');
                }
                match pair.split_once('=') {
                    Some((name, _)) if is_secret_pair(pair) => {
                        out.push_str(name);
                        out.push('=');
                        out.push_str(HIDDEN);
                    }
                    _ => out.push_str(pair),
                }
            }
            out.push_str(&url[b..]);
        }
        None => out.push_str(&url[end..]),
    }
    Cow::Owned(out)
}

/// Whether a `name=value` query pair names a credential (by the name, case-insensitively).
fn is_secret_pair(pair: &str) -> bool {
    let Some((name, value)) = pair.split_once('=') else { return false };
    if value.is_empty() {
        return false;
    }
    let name = name.to_ascii_lowercase();
    const WORDS: [&str; 8] =
        ["key", "token", "secret", "pass", "pwd", "auth", "credential", "signature"];
    WORDS.iter().any(|w| name.contains(w)) || matches!(name.as_str(), "sig" | "code" | "jwt")
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
}
