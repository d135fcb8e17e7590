//! Shared by the in-memory benches: an engine past its era probe, with no I/O.

use std::time::Instant;

use mcpoll::{Config, Engine, TransportEvent};

/// An engine whose `server/discover` probe was answered by a modern server.
pub fn ready_engine(config: Config, now: Instant) -> Engine {
    let mut engine = Engine::new(config, now).expect("config");
    engine.handle_transport(now, TransportEvent::opened());
    let mut buf = Vec::new();
    let _ = engine.poll_transmit(now, &mut buf);
    // The probe's id is whatever the engine chose: read it back, as a server would.
    let probe: serde_json::Value = serde_json::from_slice(&buf).expect("probe");
    let reply = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"supportedVersions":["2026-07-28"]}}}}"#,
        probe["id"]
    );
    engine.handle_message(now, reply.as_bytes());
    while engine.poll_event().is_some() {}
    engine
}
