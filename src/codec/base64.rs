//! Base64 (RFC 4648), the one copy in the crate: standard with padding (HTTP Basic, PEM,
//! `Mcp-Param-*` header values) and url-safe without padding (PKCE, JWS, DPoP proofs). The
//! encoders append to the caller's buffer, so a reused buffer costs no allocation.

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn encode_into(out: &mut Vec<u8>, data: &[u8], alphabet: &[u8; 64], pad: bool) {
    out.reserve(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = match *chunk {
            [a, b, c] => (u32::from(a) << 16) | (u32::from(b) << 8) | u32::from(c),
            [a, b] => (u32::from(a) << 16) | (u32::from(b) << 8),
            [a] => u32::from(a) << 16,
            _ => 0,
        };
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(alphabet[(n >> (18 - 6 * i)) as usize & 63]);
            } else if pad {
                out.push(b'=');
            }
        }
    }
}

/// Appends standard base64 with padding (RFC 4648 4).
pub(crate) fn standard_into(out: &mut Vec<u8>, data: &[u8]) {
    encode_into(out, data, STANDARD, true);
}

/// Appends base64url without padding (RFC 4648 5, as RFC 7515 and RFC 7636 use it).
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) fn url_safe_into(out: &mut Vec<u8>, data: &[u8]) {
    encode_into(out, data, URL_SAFE, false);
}

/// Decodes standard or url-safe base64, padded or not, skipping ASCII whitespace (PEM bodies
/// wrap at 64 columns). `None` on any other byte, on data after padding, or on a dangling
/// single character.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) fn decode(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    let mut padding = false;
    for &b in text {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn std(data: &[u8]) -> String {
        let mut out = Vec::new();
        standard_into(&mut out, data);
        String::from_utf8(out).unwrap()
    }

    fn url(data: &[u8]) -> String {
        let mut out = b"prefix.".to_vec();
        url_safe_into(&mut out, data);
        String::from_utf8(out).unwrap().strip_prefix("prefix.").unwrap().to_owned()
    }

    #[test]
    fn rfc4648_vectors() {
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
            assert_eq!(std(plain.as_bytes()), encoded);
            assert_eq!(url(plain.as_bytes()), encoded.trim_end_matches('='));
            assert_eq!(decode(encoded.as_bytes()).unwrap(), plain.as_bytes());
            assert_eq!(decode(encoded.trim_end_matches('=').as_bytes()).unwrap(), plain.as_bytes());
        }
        assert_eq!(url(&[0xfb, 0xff]), "-_8");
        assert_eq!(std(&[0xfb, 0xff]), "+/8=");
        assert_eq!(decode(b"-_8").unwrap(), [0xfb, 0xff]);
        assert_eq!(decode(b"Zm9v\r\nYmFy").unwrap(), b"foobar");
        assert_eq!(decode(b"Z"), None);
        assert_eq!(decode(b"Zm9v*"), None);
        assert_eq!(decode(b"Zg==Zg"), None);
    }
}
