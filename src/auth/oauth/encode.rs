//! The few encodings OAuth needs, by hand: base64url (PKCE, JWT), standard base64 (HTTP Basic,
//! PEM), percent-encoding (query strings and `application/x-www-form-urlencoded` bodies).

use crate::codec::base64;

/// Base64url without padding (RFC 4648 5, as RFC 7636 and RFC 7515 use it).
pub(crate) fn base64url(data: &[u8]) -> String {
    let mut out = Vec::new();
    base64::url_safe_into(&mut out, data);
    ascii(out)
}

/// Standard base64 with padding (RFC 4648 4).
pub(crate) fn base64(data: &[u8]) -> String {
    let mut out = Vec::new();
    base64::standard_into(&mut out, data);
    ascii(out)
}

/// Decodes standard or url-safe base64 (see [`base64::decode`]).
pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    base64::decode(text.as_bytes())
}

/// The encoders' output, which is ASCII.
fn ascii(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_default()
}

/// Percent-encodes everything except RFC 3986 unreserved characters, so the result is safe
/// in a query component and in a form body alike (a space becomes `%20`, which form decoders
/// accept as well as `+`).
pub(crate) fn percent_encode(text: &str, out: &mut String) {
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b >> 4)]));
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b & 15)]));
        }
    }
}

/// `name=value&...`, each part percent-encoded: a query string or a form body.
pub(crate) fn form(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        percent_encode(name, &mut out);
        out.push('=');
        percent_encode(value, &mut out);
    }
    out
}

/// Decodes one form or query component: `+` is a space, `%XX` a byte; a malformed escape
/// stays as written. Invalid UTF-8 is replaced, never refused: the caller compares values.
pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The parameters of a query string (`a=1&b=2`), decoded, in order.
pub(crate) fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_wrappers() {
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(base64_decode("Zm9v\r\nYmFy").unwrap(), b"foobar");
    }

    #[test]
    fn percent_round_trip() {
        let mut out = String::new();
        percent_encode("a b/c?d=e&f~g.h-i_j\u{e9}", &mut out);
        assert_eq!(out, "a%20b%2Fc%3Fd%3De%26f~g.h-i_j%C3%A9");
        assert_eq!(percent_decode(&out), "a b/c?d=e&f~g.h-i_j\u{e9}");
        assert_eq!(percent_decode("a+b%2"), "a b%2");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
        assert_eq!(form(&[("scope", "a b"), ("x", "")]), "scope=a%20b&x=");
        assert_eq!(
            parse_query("code=c%2B1&state=s&&flag&iss=http%3A%2F%2Fx"),
            [
                ("code".into(), "c+1".into()),
                ("state".into(), "s".into()),
                ("flag".into(), String::new()),
                ("iss".into(), "http://x".into())
            ]
        );
    }
}
