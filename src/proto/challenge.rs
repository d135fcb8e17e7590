//! The `WWW-Authenticate` challenge a server sends with a 401 or 403, read into the public
//! [`AuthChallenge`]: wire vocabulary, stateless, which the error types, the engine, the HTTP
//! session and the OAuth flow all name.
// The parser serves the HTTP transport; without it only the type is used.
#![cfg_attr(not(feature = "http"), allow(dead_code))]

/// The auth-params of the `Bearer` or `DPoP` challenge in a `WWW-Authenticate` header
/// (RFC 6750 3, RFC 9449 7.1, RFC 9728 5.1), as an MCP client needs them after a 401 or 403.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthChallenge {
    /// `resource_metadata`: the URL of the Protected Resource Metadata document.
    pub resource_metadata: Option<String>,
    /// `scope`: space-separated scopes the resource wants.
    pub scope: Option<String>,
    /// `error`, for example `invalid_token` or `insufficient_scope`.
    pub error: Option<String>,
    /// `error_description`: human-readable text.
    pub error_description: Option<String>,
    /// The server sent a `DPoP` challenge (RFC 9449 7.1); with `error` `use_dpop_nonce` it
    /// asks for a proof with the nonce in its `DPoP-Nonce` header.
    pub dpop: bool,
}

/// [`parse_all`] of one `WWW-Authenticate` value (the tests' and the fuzz target's entry).
#[cfg(any(test, fuzzing))]
pub(crate) fn parse(value: &[u8]) -> Option<AuthChallenge> {
    parse_all(std::iter::once(value))
}

/// Finds the `Bearer` and `DPoP` challenges in every `WWW-Authenticate` header of a
/// response, in wire order, read as one list of challenges (RFC 9110 11.6.1: several header
/// lines are one comma-separated list; a line starts a new challenge), and reads their
/// parameters: a `Basic` challenge in the first line and `Bearer resource_metadata=...` in the
/// second, or `Bearer` in one and `DPoP error="use_dpop_nonce"` in another, are all read.
///
/// Returns `None` when no value holds either. Scheme and parameter names are
/// case-insensitive; values may be tokens or quoted strings; the first copy of a parameter
/// (in either challenge) wins. Junk is skipped rather than refused: this runs on an error
/// path, where a partial answer beats none.
pub(crate) fn parse_all<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<AuthChallenge> {
    let mut found: Option<AuthChallenge> = None;
    for value in values {
        parse_into(value, &mut found);
    }
    found
}

/// Reads the challenges of one header value into `found`.
fn parse_into(value: &[u8], found: &mut Option<AuthChallenge>) {
    // A header line starts a new challenge: parameters never carry over from the last line.
    let mut in_bearer = false;
    let mut pos = 0;
    loop {
        while pos < value.len() && matches!(value[pos], b' ' | b'\t' | b',') {
            pos += 1;
        }
        if pos >= value.len() {
            return;
        }
        let name_end = pos + value[pos..].iter().take_while(|&&b| is_tchar(b)).count();
        if name_end == pos {
            // Not a token: skip one byte, or a whole quoted string so its commas and spaces
            // are not misread.
            pos = if value[pos] == b'"' { quoted(value, pos).1 } else { pos + 1 };
            continue;
        }
        let name = &value[pos..name_end];
        pos = name_end;
        let after_ws =
            pos + value[pos..].iter().take_while(|&&b| matches!(b, b' ' | b'\t')).count();
        if value.get(after_ws) != Some(&b'=') {
            // A token not followed by `=` starts a new challenge.
            let dpop = name.eq_ignore_ascii_case(b"dpop");
            in_bearer = dpop || name.eq_ignore_ascii_case(b"bearer");
            if in_bearer {
                found.get_or_insert_with(AuthChallenge::default).dpop |= dpop;
            }
            continue;
        }
        pos = after_ws + 1;
        while pos < value.len() && matches!(value[pos], b' ' | b'\t') {
            pos += 1;
        }
        let param = match value.get(pos) {
            Some(b'"') => {
                let (text, end) = quoted(value, pos);
                pos = end;
                text
            }
            // A token68 (`Bearer abc==`) ends in `=` padding: nothing to read.
            None | Some(b'=' | b',') => continue,
            Some(_) => {
                // Be lenient about unquoted values: read to the next separator, so an
                // unquoted URL still comes through whole.
                let end = pos
                    + value[pos..]
                        .iter()
                        .take_while(|&&b| !matches!(b, b',' | b' ' | b'\t' | b'"'))
                        .count();
                let text = String::from_utf8_lossy(&value[pos..end]).into_owned();
                pos = end;
                text
            }
        };
        let Some(challenge) = found.as_mut().filter(|_| in_bearer) else {
            continue;
        };
        let slot = match name.to_ascii_lowercase().as_slice() {
            b"resource_metadata" => &mut challenge.resource_metadata,
            b"scope" => &mut challenge.scope,
            b"error" => &mut challenge.error,
            b"error_description" => &mut challenge.error_description,
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(param);
        }
    }
}

/// Reads the quoted string opening at `value[open]` (a `"`), undoing `\` escapes. Returns
/// the text and the position after the closing quote (or the end, if it is missing).
fn quoted(value: &[u8], open: usize) -> (String, usize) {
    let mut text = Vec::new();
    let mut pos = open + 1;
    while let Some(&b) = value.get(pos) {
        pos += 1;
        match b {
            b'"' => break,
            b'\\' => {
                if let Some(&escaped) = value.get(pos) {
                    text.push(escaped);
                    pos += 1;
                }
            }
            _ => text.push(b),
        }
    }
    (String::from_utf8_lossy(&text).into_owned(), pos)
}

/// RFC 9110 `tchar`: the bytes of a token (a scheme or parameter name).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(
        resource_metadata: Option<&str>,
        scope: Option<&str>,
        error: Option<&str>,
        error_description: Option<&str>,
    ) -> Option<AuthChallenge> {
        Some(AuthChallenge {
            resource_metadata: resource_metadata.map(String::from),
            scope: scope.map(String::from),
            error: error.map(String::from),
            error_description: error_description.map(String::from),
            dpop: false,
        })
    }

    fn dpop(error: Option<&str>, resource_metadata: Option<&str>) -> Option<AuthChallenge> {
        Some(AuthChallenge {
            error: error.map(String::from),
            resource_metadata: resource_metadata.map(String::from),
            dpop: true,
            ..AuthChallenge::default()
        })
    }

    #[test]
    fn www_authenticate() {
        let cases: &[(&[u8], Option<AuthChallenge>)] = &[
            (
                br#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read files:write""#,
                bearer(Some("https://mcp.example.com/.well-known/oauth-protected-resource"), Some("files:read files:write"), None, None),
            ),
            (
                br#"Basic realm="a, b", error="not this one", Bearer error="insufficient_scope", scope="a b", error_description="need \"more\"""#,
                bearer(None, Some("a b"), Some("insufficient_scope"), Some("need \"more\"")),
            ),
            (
                b"bearer Resource_Metadata=https://x.example/prm ,SCOPE = read,error=invalid_token",
                bearer(Some("https://x.example/prm"), Some("read"), Some("invalid_token"), None),
            ),
            (b"Bearer", bearer(None, None, None, None)),
            (b"Bearer abc==, error=x", bearer(None, None, Some("x"), None)),
            (br#"Bearer scope="first", scope="second""#, bearer(None, Some("first"), None, None)),
            (br#"Bearer error="x", Basic error="y""#, bearer(None, None, Some("x"), None)),
            (br#"Bearer ,,, =, "unterminated"#, bearer(None, None, None, None)),
            (b"Bearer error=\"caf\xc3\xa9 \xff\"", bearer(None, None, Some("caf\u{e9} \u{fffd}"), None)),
            (br#"Basic realm="x""#, None),
            (
                br#"DPoP error="use_dpop_nonce", resource_metadata="http://h/prm""#,
                dpop(Some("use_dpop_nonce"), Some("http://h/prm")),
            ),
            (br#"dpop algs="ES256 PS256""#, dpop(None, None)),
            (br#"Basic realm="x", DPoP error=use_dpop_nonce"#, dpop(Some("use_dpop_nonce"), None)),
            (
                br#"Bearer resource_metadata="http://h/prm", DPoP algs="ES256", error="x""#,
                dpop(Some("x"), Some("http://h/prm")),
            ),
            (b"", None),
            (b"\"Bearer\" ==== ,, \xff", None),
        ];
        for (value, expected) in cases {
            assert_eq!(&parse(value), expected, "{}", String::from_utf8_lossy(value));
        }
    }

    /// Several header lines are one list of challenges; a line starts a new challenge.
    #[test]
    fn challenges_on_several_header_lines() {
        let lines: [&[u8]; 2] = [br#"Bearer realm="mcp""#, br#"DPoP error="use_dpop_nonce""#];
        assert_eq!(parse_all(lines), dpop(Some("use_dpop_nonce"), None));
        let lines: [&[u8]; 2] = [br#"Basic realm="x""#, br#"Bearer resource_metadata="u""#];
        assert_eq!(parse_all(lines), bearer(Some("u"), None, None, None));
        // A parameter that opens a line continues no challenge of the line before.
        let lines: [&[u8]; 2] = [b"Bearer", br#"scope="s""#];
        assert_eq!(parse_all(lines), bearer(None, None, None, None));
        assert_eq!(parse_all(std::iter::empty()), None);
    }
}
