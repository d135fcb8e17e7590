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
