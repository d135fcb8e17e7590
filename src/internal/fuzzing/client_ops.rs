//! The many-server core ([`Client`]) under arbitrary interleavings, on simulated time: the
//! capability-cache glue, watches and change events as the host runs them, not a model.
//!
//! Five contexts share the core's cache, each an engine made ready by a scripted peer: on
//! server `s`, its own (anonymous) context and the lanes of alice, bob, and alice with another
//! scope set; on server `other`, alice's lane. The peers answer the page requests whenever
//! the input says so, with pages whose items are named after who may read them (`p<ctx>_...`,
//! or `pub<server>_...` when the page is public: every context of that server), change their
//! catalogs, fails pages, rejects cursors, breaks listen streams and sends change
//! notifications. Operations also need catalogs, look up one definition, watch catalogs, call
//! tools and jump time. Checked after every step:
//!
//! - no panic;
//! - no context is given an item private to another (views, lookups, change events);
//! - at most one `tools/list` request of a context on the wire (single flight);
//! - after `handle_timeout(now)`, no deadline of the core is in the past;
//! - after every step, the core's deadline is the earliest of every server's, and its
//!   idleness every server's, though its rounds look only at the servers that moved (the
//!   simulator reaches an engine mutably only when it has output to take, so servers stay
//!   filed between rounds as a host's idle ones do).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::client::catalog::ServerCatalog;
use crate::client::ClientEvent;
use crate::client::{Client, ServerId};
use crate::config::{CacheConfig, Config};
use crate::engine::{CallOptions, Engine, Event, TransportEvent, TransportKind};

const CONTEXTS: usize = 5;

/// Each context: its server's identity, and the principal and scopes of its lane (none for the
/// server's own context).
const CONTEXT: [(&str, Option<&str>, &[&str]); CONTEXTS] = [
    ("s", None, &[]),
    ("s", Some("alice"), &["read"]),
    ("s", Some("bob"), &["read"]),
    ("s", Some("alice"), &["read", "write"]),
    ("other", Some("alice"), &["read"]),
];

/// The server of a context, as public items name it.
fn server_of(ctx: usize) -> usize {
    usize::from(CONTEXT[ctx].0 != "s")
}

/// What the scripted peer of one context lists.
#[derive(Debug, Clone, Copy)]
struct Script {
    version: u8,
    pages: u8,
    public: bool,
    /// 0: no ttlMs; 1: ttlMs 0; else ttlMs = ttl * 60.
    ttl: u8,
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let Some((b, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        *b
    }
}

struct Sim {
    client: Client,
    now: Instant,
    ids: [ServerId; CONTEXTS],
    /// Requests each context's engine sent and the peer has not answered, oldest first.
    wire: [VecDeque<Value>; CONTEXTS],
    scripts: [Script; CONTEXTS],
    buf: Vec<u8>,
}

/// May context `ctx` see an item with this name?
fn visible_to(ctx: usize, name: &str) -> bool {
    name.starts_with(&format!("pub{}_", server_of(ctx))) || name.starts_with(&format!("p{ctx}_"))
}

impl Sim {
    fn new(cache: CacheConfig, now: Instant) -> Option<Self> {
        let mut client = Client::new(cache).ok()?;
        let mut ids = Vec::new();
        for (identity, principal, scopes) in CONTEXT {
            let mut engine = Engine::new(Config::default(), now).ok()?;
            engine.handle_transport(now, TransportEvent::opened_as(TransportKind::Stdio));
            // A lane has its server's identity and its principal's name and scopes.
            let catalog = ServerCatalog::new(identity.to_owned(), false, None);
            let catalog = match principal {
                None => catalog,
                Some(p) => catalog
                    .for_principal(p.to_owned(), scopes.iter().map(|s| s.to_string()).collect()),
            };
            ids.push(client.insert(engine, catalog, None));
        }
        let fresh = Script { version: 0, pages: 1, public: false, ttl: 0 };
        let mut sim = Sim {
            client,
            now,
            ids: ids.try_into().ok()?,
            wire: Default::default(),
            scripts: [fresh; CONTEXTS],
            buf: Vec::new(),
        };
        for ctx in 0..CONTEXTS {
            sim.collect(ctx);
            let discover = sim.wire[ctx].pop_front()?;
            let result = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": true}}});
            sim.peer(ctx, json!({"jsonrpc": "2.0", "id": discover["id"], "result": result}));
        }
        Some(sim)
    }

    /// Moves what the engine of `ctx` wrote onto its wire.
    fn collect(&mut self, ctx: usize) {
        // A look first: reaching an engine mutably marks its server for the next round, and
        // a sim that marked every server every step would never let one be filed.
        let has_output = self.client.engine(self.ids[ctx]).is_some_and(Engine::has_output);
        let mut engine = if has_output { self.client.engine_mut(self.ids[ctx]) } else { None };
        while let Some(engine) = engine.as_deref_mut() {
            self.buf.clear();
            if engine.poll_transmit(self.now, &mut self.buf).is_none() {
                break;
            }
            let Ok(v) = serde_json::from_slice::<Value>(&self.buf) else { continue };
            if v["method"] == "notifications/cancelled" {
                // A request given up on (its deadline passed): the peer forgets it too.
                let id = &v["params"]["requestId"];
                self.wire[ctx].retain(|r| r["id"] != *id);
            } else if v.get("id").is_some() && v.get("method").is_some() {
                self.wire[ctx].push_back(v);
            }
        }
        let lists = self.wire[ctx].iter().filter(|r| r["method"] == "tools/list").count();
        assert!(lists <= 1, "context {ctx} has {lists} tools/list requests on the wire");
    }

    fn collect_all(&mut self) {
        while self.client.take_unflushed().is_some() {}
        for ctx in 0..CONTEXTS {
            self.collect(ctx);
        }
    }

    fn peer(&mut self, ctx: usize, message: Value) {
        let bytes = serde_json::to_vec(&message).expect("JSON");
        self.client.handle_message(self.now, self.ids[ctx], &bytes);
        // Only a server the core names has output to write.
        while let Some(id) = self.client.take_unflushed() {
            let ctx = self.ids.iter().position(|i| *i == id).expect("one of ours");
            self.collect(ctx);
        }
        // Requests may still wait (for the era probe, or a free in-flight slot), but none that
        // could be written now.
        let now = self.now;
        self.buf.clear();
        let engine = self.client.engine_mut(self.ids[ctx]).expect("a server");
        let left = engine.poll_transmit(now, &mut self.buf).is_some();
        assert!(!left, "context {ctx} has output the core did not name");
    }

    /// The page the script lists for `cursor`, or `None` for a cursor it does not know.
    fn page(&self, ctx: usize, cursor: Option<&str>) -> Option<Value> {
        let s = self.scripts[ctx];
        let index = match cursor {
            None => 0,
            Some(c) => c.strip_prefix('c')?.parse::<u8>().ok()?,
        };
        if index >= s.pages {
            return None;
        }
        let owner = if s.public { format!("pub{}", server_of(ctx)) } else { format!("p{ctx}") };
        let tools: Vec<Value> = (0..2)
            .map(|j| {
                let name = format!("{owner}_t{index}{j}_v{}", s.version);
                json!({"name": name, "inputSchema": {"type": "object"}})
            })
            .collect();
        let mut page = json!({"resultType": "complete", "tools": tools});
        if index + 1 < s.pages {
            page["nextCursor"] = json!(format!("c{}", index + 1));
        }
        match s.ttl {
            0 => {}
            1 => page["ttlMs"] = json!(0),
            t => page["ttlMs"] = json!(u64::from(t) * 60),
        }
        if s.public {
            page["cacheScope"] = json!("public");
        }
        Some(page)
    }

    /// Answers the oldest request of `ctx` as `how` says.
    fn answer(&mut self, ctx: usize, how: u8) {
        let Some(request) = self.wire[ctx].pop_front() else { return };
        let id = request["id"].clone();
        let error = |code: i64| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "no"}});
        let reply = match (request["method"].as_str(), how % 4) {
            (_, 0) => error(-32603),
            (Some("tools/list"), _) => {
                let cursor = request["params"]["cursor"].as_str();
                match self.page(ctx, cursor) {
                    Some(page) => json!({"jsonrpc": "2.0", "id": id, "result": page}),
                    None => error(-32602),
                }
            }
            // A listen stream stays open until it breaks (how 0).
            (Some("subscriptions/listen"), _) => {
                self.wire[ctx].push_back(request);
                return;
            }
            _ => json!({"jsonrpc": "2.0", "id": id,
                "result": {"resultType": "complete", "content": []}}),
        };
        self.peer(ctx, reply);
    }

    fn check_view(&mut self, ctx: usize) {
        let now = self.now;
        if let Ok(Some(view)) = self.client.tool_catalog(now, self.ids[ctx]) {
            for name in view.names() {
                assert!(visible_to(ctx, name), "context {ctx} was shown {name}");
            }
        }
        self.collect_all();
    }

    fn drain_events(&mut self) {
        while let Some((server, event)) = self.client.poll_event(self.now) {
            let Some(ctx) = self.ids.iter().position(|id| *id == server) else { continue };
            if let Event::Client(ClientEvent::ToolsChanged(change)) = event {
                for name in change.added().iter().chain(change.changed()) {
                    assert!(visible_to(ctx, name), "context {ctx} was told of {name}");
                }
            }
        }
        self.collect_all();
    }
}

/// Applies the input as a sequence of operations on the core and checks the invariants.
pub fn client_ops(data: &[u8]) {
    let mut input = Input(data);
    let cache = CacheConfig {
        max_entries: 4 + usize::from(input.byte() % 8),
        max_bytes: 2_000 + usize::from(input.byte()) * 40,
        default_ttl: Duration::from_millis(300),
        max_ttl: Duration::from_millis(2_000),
        max_stale: Duration::from_millis(700),
        max_refreshes: 1 + usize::from(input.byte() % 4),
        eager_refresh: input.byte() & 1 == 1,
    };
    let Some(mut sim) = Sim::new(cache, Instant::now()) else { return };
    for _ in 0..2048 {
        if input.0.is_empty() {
            break;
        }
        let op = input.byte();
        let ctx = usize::from(op >> 4) % CONTEXTS;
        match op & 0x0f {
            0..=2 => sim.check_view(ctx),
            3..=5 => {
                let how = input.byte();
                sim.answer(ctx, how);
            }
            6 => {
                // The server changes and says so.
                let s = &mut sim.scripts[ctx];
                s.version = s.version.wrapping_add(1);
                sim.peer(
                    ctx,
                    json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
                );
            }
            7 => {
                // A change the client is not told about.
                let b = input.byte();
                let s = &mut sim.scripts[ctx];
                s.pages = 1 + b % 3;
                s.public = b & 0x10 != 0;
                s.ttl = (b >> 5) % 8;
                s.version = s.version.wrapping_add(1);
            }
            8 => {
                let _ = sim.client.watch_catalogs(sim.now, sim.ids[ctx]);
                sim.collect_all();
            }
            9 => {
                // A call reads one definition: it must be this context's or public.
                let b = input.byte();
                let owner =
                    if b & 0x80 != 0 { format!("pub{}", b & 1) } else { format!("p{}", b % 8) };
                let name =
                    format!("{owner}_t{}{}_v{}", (b >> 3) % 3, (b >> 5) & 1, input.byte() % 4);
                let now = sim.now;
                if let Some(def) = sim.client.tool(now, sim.ids[ctx], &name) {
                    assert!(visible_to(ctx, &name), "context {ctx} read {name}: {def}");
                }
            }
            10 => {
                let opts = CallOptions::default();
                let _ = sim.client.call_tool_json(sim.now, sim.ids[ctx], "echo", "{}", &opts);
                sim.collect_all();
            }
            11 => sim.drain_events(),
            _ => {
                sim.now += Duration::from_millis(u64::from(input.byte()) * 9);
                sim.client.handle_timeout(sim.now);
                sim.collect_all();
                let due = sim.client.poll_timeout();
                assert!(due.is_none_or(|d| d > sim.now), "a deadline left in the past");
            }
        }
        // The deadline the core keeps (filed for the servers its rounds looked at, worked out
        // for those marked since) is every server's earliest, whatever the step was.
        let every = sim.client.servers.iter().filter_map(|(_, s)| s.next_deadline()).min();
        assert_eq!(sim.client.poll_timeout(), every, "the core's deadline is not the earliest");
        // Nor does its idleness (the filed servers counted, the others looked at) differ from
        // a look at every server.
        let idle = sim.client.is_idle(sim.now);
        let every_idle = !sim.client.cache.has_changes()
            && !sim.client.has_unflushed()
            && sim.client.servers.iter().all(|(_, s)| s.is_idle(sim.now));
        assert_eq!(idle, every_idle, "the core's idleness is not every server's");
    }
}

#[cfg(test)]
mod tests {
    /// Seeds and a deterministic pseudo-random sweep, so plain `cargo test` runs the target.
    #[test]
    fn client_ops_holds_its_invariants() {
        super::client_ops(&[]);
        super::client_ops(&[1, 200, 1, 1, 0, 3, 1, 3, 1, 0, 0x10, 0x13, 1, 0x11, 12, 255, 11]);
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..200 {
            super::client_ops(&super::super::pseudo_random_input(&mut x, 400));
        }
    }
}
