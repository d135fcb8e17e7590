//! Sans-IO codecs: bytes in, complete frames out. Each is incremental, capped and indifferent
//! to how its input is chunked.

// Each codec is built with the driver that uses it: the stdio driver's line framer, the
// HTTP session's HTTP/1 and SSE parsers.
pub(crate) mod base64;
#[cfg(feature = "http")]
pub(crate) mod http1;
#[cfg(feature = "stdio")]
pub(crate) mod ndjson;
#[cfg(feature = "http")]
pub(crate) mod sse;

/// One `read` of at most `size` bytes from `source` into `buf` right after its unconsumed
/// bytes `buf[*start..*filled]`, which move to the front first (consumed bytes are never
/// needed again). The room is zeroed once, when `buf` first grows to it, and stays
/// initialized, so a read lands in it directly with no read buffer of its own. Returns what
/// `read` returned: the new bytes are `buf[*filled..*filled + n]`, for the caller to keep
/// (by adding `n` to `filled`) or drop.
#[cfg(any(feature = "stdio", feature = "http"))]
pub(crate) fn read_after(
    buf: &mut Vec<u8>,
    start: &mut usize,
    filled: &mut usize,
    source: &mut (impl std::io::Read + ?Sized),
    size: usize,
) -> std::io::Result<usize> {
    if *start > 0 {
        buf.copy_within(*start..*filled, 0);
        *filled -= *start;
        *start = 0;
    }
    let end = *filled + size;
    if buf.len() < end {
        buf.resize(end, 0);
    }
    source.read(&mut buf[*filled..end])
}

/// The chunking-independence check every codec's table tests share: the same output for the
/// input whole, split at every offset, split at every pair of offsets (inputs up to
/// `pairs_up_to` bytes), and fed byte by byte.
#[cfg(test)]
#[track_caller]
pub(crate) fn check_every_split<T: PartialEq + std::fmt::Debug>(
    input: &[u8],
    expected: &[T],
    pairs_up_to: usize,
    run: impl Fn(&[&[u8]]) -> Vec<T>,
) {
    assert_eq!(run(&[input]), expected, "one chunk");
    for i in 0..=input.len() {
        assert_eq!(run(&[&input[..i], &input[i..]]), expected, "split at {i}");
        if input.len() > pairs_up_to {
            continue;
        }
        for j in i..=input.len() {
            assert_eq!(
                run(&[&input[..i], &input[i..j], &input[j..]]),
                expected,
                "split at {i},{j}"
            );
        }
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(run(&bytes), expected, "byte by byte");
}
