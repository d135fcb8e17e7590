//! Strict percent-decoding, shared by root URIs and JSON pointer fragments.

use std::borrow::Cow;

/// Decodes `%XX` escapes; `None` for a malformed escape or a result that is not UTF-8 (both
/// callers refuse such input rather than guess).
pub(crate) fn decode(s: &str) -> Option<Cow<'_, str>> {
    if !s.contains('%') {
        return Some(Cow::Borrowed(s));
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            // Two hex digits exactly: `from_str_radix` alone would also take a sign (`%+f`).
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn decodes_escapes_and_refuses_malformed_ones() {
        assert_eq!(decode("a%2Fb%20c").as_deref(), Some("a/b c"));
        assert_eq!(decode("plain").as_deref(), Some("plain"));
        assert_eq!(decode("%2"), None);
        assert_eq!(decode("%zz"), None);
        assert_eq!(decode("%ff"), None);
        assert_eq!(decode("%+f"), None, "a sign is no hex digit");
        assert_eq!(decode("%-0"), None);
    }
}
