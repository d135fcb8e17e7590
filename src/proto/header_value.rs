//! Header value encoding for `Mcp-Name` and `Mcp-Param-*` (2026-07-28, PROTOCOL.md §3.2).

/// Encodes a value for `Mcp-Name` / `Mcp-Param-*` (PROTOCOL.md §3.2): as is when it is visible
/// ASCII with inner spaces or tabs only, else `=?base64?<base64 of UTF-8>?=`.
pub(crate) fn encode(out: &mut Vec<u8>, value: &[u8]) {
    let b = value;
    let visible = b.iter().all(|&c| (0x21..=0x7e).contains(&c) || c == b' ' || c == b'\t');
    let padded = matches!(b.first(), Some(b' ' | b'\t')) || matches!(b.last(), Some(b' ' | b'\t'));
    // A plain value that looks encoded must be encoded too, or it would be decoded.
    let looks_encoded = value.starts_with(b"=?base64?") && value.ends_with(b"?=");
    let plain = !b.is_empty() && visible && !padded && !looks_encoded;
    if plain {
        out.extend_from_slice(b);
        return;
    }
    out.extend_from_slice(b"=?base64?");
    crate::codec::base64::standard_into(out, b);
    out.extend_from_slice(b"?=");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_encoded_as_the_spec_shows() {
        let enc = |s: &str| {
            let mut v = Vec::new();
            encode(&mut v, s.as_bytes());
            String::from_utf8(v).unwrap()
        };
        assert_eq!(enc("get_weather"), "get_weather");
        assert_eq!(enc("a b\tc"), "a b\tc");
        assert_eq!(enc("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(enc(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(enc("=?base64?abc?="), "=?base64?PT9iYXNlNjQ/YWJjPz0=?=");
        assert_eq!(enc(""), "=?base64??=");
        assert_eq!(enc("x\ny"), "=?base64?eAp5?=");
    }
}
