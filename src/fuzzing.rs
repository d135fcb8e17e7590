//! Fuzz entry points, built only under `--cfg fuzzing`; each `fuzz/fuzz_targets/*.rs` is a
//! one-line shim into here.

use crate::codec::ndjson::{Frame, LineFramer};
use crate::proto::jsonrpc::{decode, Message};

#[derive(Debug, PartialEq)]
enum Out {
    Line(Vec<u8>),
    TooLarge(Vec<u8>, Vec<u8>),
}

fn frames(max: usize, chunks: &[&[u8]]) -> Vec<Out> {
    let mut f = LineFramer::new(max);
    let mut out = Vec::new();
    for c in chunks {
        f.push(c);
        while let Some(frame) = f.next_frame() {
            out.push(match frame {
                Frame::Line(l) => Out::Line(l.to_vec()),
                Frame::TooLarge { head, tail } => Out::TooLarge(head.to_vec(), tail.to_vec()),
            });
        }
        assert!(f.buffered() <= max + 1 + c.len());
    }
    out
}

/// The first two bytes choose the line cap and a split pattern; the rest is the stream. The
/// frames must not depend on how the stream is split.
pub fn ndjson_framer(data: &[u8]) {
    let [cap, split, stream @ ..] = data else {
        return;
    };
    let max = 1 + *cap as usize;
    let whole = frames(max, &[stream]);
    let step = 1 + (*split as usize % 17);
    let pieces: Vec<&[u8]> = stream.chunks(step).collect();
    assert_eq!(frames(max, &pieces), whole, "split every {step} bytes");
    let (a, b) = stream.split_at(*split as usize % (stream.len() + 1));
    assert_eq!(frames(max, &[a, b]), whole, "split in two");
}

/// Any bytes: decoding never panics; what decodes re-encodes to a message that decodes the
/// same way.
pub fn jsonrpc_decode(data: &[u8]) {
    let Ok(message) = decode(data) else { return };
    let reencoded = match &message {
        Message::Request { id, method, params } => serde_json::json!({
            "jsonrpc": "2.0", "id": to_value(id), "method": method, "params": params.map(to_value),
        }),
        Message::Notification { method, params } => serde_json::json!({
            "jsonrpc": "2.0", "method": method, "params": params.map(to_value),
        }),
        Message::Result { id, result } => serde_json::json!({
            "jsonrpc": "2.0", "id": to_value(id), "result": to_value(result),
        }),
        Message::Error { id, error } => serde_json::json!({
            "jsonrpc": "2.0", "id": id.map(to_value),
            "error": {"code": error.code, "message": error.message, "data": error.data.map(to_value)},
        }),
    };
    let bytes = serde_json::to_vec(&reencoded).expect("a Value always serializes");
    let again = decode(&bytes).expect("a re-encoded message decodes");
    assert_eq!(kind(&message), kind(&again));
}

fn to_value(raw: &serde_json::value::RawValue) -> serde_json::Value {
    serde_json::from_str(raw.get()).unwrap_or(serde_json::Value::Null)
}

fn kind(m: &Message<'_>) -> (u8, String) {
    match m {
        Message::Request { method, .. } => (0, method.to_string()),
        Message::Notification { method, .. } => (1, method.to_string()),
        Message::Result { .. } => (2, String::new()),
        Message::Error { error, .. } => (3, error.code.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fuzz_entry_points_accept_seeds() {
        super::ndjson_framer(b"\x05\x03{\"a\":1}\n123456789\r\n\n{}\n");
        super::jsonrpc_decode(br#"{"jsonrpc":"2.0","id":1,"result":{"x":[1,2]}}"#);
        super::jsonrpc_decode(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}"#);
        super::jsonrpc_decode(b"garbage");
    }
}
