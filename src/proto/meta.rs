//! The per-request `_meta` object of 2026-07-28, and trace context.

use crate::proto::jsonrpc::write_json_str;
pub use crate::proto::trace::TraceContext;
use crate::proto::version::ProtocolVersion;

/// The keys [`StaticMeta`] writes.
const STATIC_META_KEYS: [&str; 3] = [
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
];

/// The members of `_meta` that are the same on every request of one engine, pre-encoded once:
/// protocol version, client capabilities and client info.
#[derive(Debug, Clone)]
pub(crate) struct StaticMeta {
    encoded: Vec<u8>,
}

impl StaticMeta {
    pub(crate) fn new(version: ProtocolVersion, capabilities: &str, name: &str, ver: &str) -> Self {
        let mut encoded = Vec::with_capacity(160 + capabilities.len());
        encoded.extend_from_slice(b"\"io.modelcontextprotocol/protocolVersion\":");
        write_json_str(&mut encoded, version.as_str());
        encoded.extend_from_slice(b",\"io.modelcontextprotocol/clientCapabilities\":");
        encoded.extend_from_slice(capabilities.trim().as_bytes());
        encoded.extend_from_slice(b",\"io.modelcontextprotocol/clientInfo\":{\"name\":");
        write_json_str(&mut encoded, name);
        encoded.extend_from_slice(b",\"version\":");
        write_json_str(&mut encoded, ver);
        encoded.extend_from_slice(b"}");
        Self { encoded }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.encoded
    }
}

/// Whether the engine writes `key` in a request's `_meta` itself: a [`StaticMeta`] key, or
/// one [`write_call_meta`] writes for these options. A host's own `_meta` does not write
/// them again.
pub(crate) fn engine_writes(key: &str, progress: bool, trace: Option<&TraceContext>) -> bool {
    let traced = match (key, trace) {
        ("traceparent", Some(_)) => true,
        ("tracestate", Some(t)) => t.tracestate.is_some(),
        ("baggage", Some(t)) => t.baggage.is_some(),
        _ => false,
    };
    STATIC_META_KEYS.contains(&key) || (progress && key == "progressToken") || traced
}

/// Appends the per-call `_meta` members (no braces): progress token and trace context.
pub(crate) fn write_call_meta(
    out: &mut Vec<u8>,
    progress_token: Option<u64>,
    trace: Option<&TraceContext>,
) {
    let mut first = true;
    let mut sep = |out: &mut Vec<u8>| {
        if !first {
            out.push(b',');
        }
        first = false;
    };
    if let Some(token) = progress_token {
        sep(out);
        out.extend_from_slice(b"\"progressToken\":");
        crate::proto::jsonrpc::write_u64(out, token);
    }
    if let Some(t) = trace {
        sep(out);
        out.extend_from_slice(b"\"traceparent\":");
        write_json_str(out, &t.traceparent);
        if let Some(s) = &t.tracestate {
            out.extend_from_slice(b",\"tracestate\":");
            write_json_str(out, s);
        }
        if let Some(b) = &t.baggage {
            out.extend_from_slice(b",\"baggage\":");
            write_json_str(out, b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_meta_is_valid_json_members() {
        let m = StaticMeta::new(ProtocolVersion::MODERN, "{}", "mc\"poll", "1.0");
        let obj = format!("{{{}}}", String::from_utf8(m.bytes().to_vec()).unwrap());
        let v: serde_json::Value = serde_json::from_str(&obj).unwrap();
        assert_eq!(v["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
        assert_eq!(v["io.modelcontextprotocol/clientCapabilities"], serde_json::json!({}));
        assert_eq!(v["io.modelcontextprotocol/clientInfo"]["name"], "mc\"poll");
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), STATIC_META_KEYS.len());
        assert!(keys.iter().all(|k| STATIC_META_KEYS.contains(k)), "{keys:?}");
    }

    #[test]
    fn call_meta_carries_token_and_trace() {
        let mut out = Vec::new();
        let t = TraceContext {
            traceparent: "00-a-b-01".into(),
            tracestate: None,
            baggage: Some("k=v".into()),
        };
        write_call_meta(&mut out, Some(42), Some(&t));
        assert_eq!(out, br#""progressToken":42,"traceparent":"00-a-b-01","baggage":"k=v""#);
        out.clear();
        write_call_meta(&mut out, None, None);
        assert!(out.is_empty());
    }

    /// `engine_writes` names every key the engine writes for given options, and no other.
    #[test]
    fn engine_writes_names_the_keys_written() {
        let t = TraceContext {
            traceparent: "00-a-b-01".into(),
            tracestate: None,
            baggage: Some("k=v".into()),
        };
        let mut out = StaticMeta::new(ProtocolVersion::MODERN, "{}", "n", "1").bytes().to_vec();
        out.push(b',');
        write_call_meta(&mut out, Some(42), Some(&t));
        let obj = format!("{{{}}}", String::from_utf8(out).unwrap());
        let v: serde_json::Value = serde_json::from_str(&obj).unwrap();
        let written: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(written.len(), STATIC_META_KEYS.len() + 3, "{written:?}");
        assert!(written.iter().all(|k| engine_writes(k, true, Some(&t))), "{written:?}");
        for unwritten in ["tracestate", "vendor/x"] {
            assert!(!engine_writes(unwritten, true, Some(&t)), "{unwritten}");
        }
        assert!(!engine_writes("progressToken", false, None));
        assert!(!engine_writes("traceparent", true, None));
    }
}
