//! The few encodings OAuth needs, by hand: base64url (PKCE, JWT), standard base64 (HTTP Basic,
//! PEM), percent-encoding (query strings and `application/x-www-form-urlencoded` bodies).

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn encode(alphabet: &[u8; 64], data: &[u8], pad: bool) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..4 {
            if i < chars {
                out.push(char::from(alphabet[(n >> (18 - 6 * i)) as usize & 63]));
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// Base64url without padding (RFC 4648 5, as RFC 7636 and RFC 7515 use it).
pub(crate) fn base64url(data: &[u8]) -> String {
    encode(URL, data, false)
}

/// Standard base64 with padding (RFC 4648 4).
pub(crate) fn base64(data: &[u8]) -> String {
    encode(STD, data, true)
}

/// Decodes standard or url-safe base64, padded or not, skipping ASCII whitespace (PEM bodies
/// wrap at 64 columns). `None` on any other byte or a dangling single character.
pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    let mut padding = false;
    for b in text.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => {
                padding = true;
                continue;
            }
            b' ' | b'\t' | b'\r' | b'\n' => continue,
            _ => return None,
        };
        if padding {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    // 6 leftover bits means one lone character: not a whole byte.
    (bits < 6).then_some(out)
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
    fn base64_vectors() {
        // RFC 4648 10.
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
            assert_eq!(base64url(plain.as_bytes()), encoded.trim_end_matches('='));
            assert_eq!(base64_decode(encoded).unwrap(), plain.as_bytes());
            assert_eq!(base64_decode(encoded.trim_end_matches('=')).unwrap(), plain.as_bytes());
        }
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
        assert_eq!(base64_decode("-_8").unwrap(), [0xfb, 0xff]);
        assert_eq!(base64_decode("Zm9v\r\nYmFy").unwrap(), b"foobar");
        assert_eq!(base64_decode("Z"), None);
        assert_eq!(base64_decode("Zm9v*"), None);
        assert_eq!(base64_decode("Zg==Zg"), None);
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
