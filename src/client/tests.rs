//! The core's scenarios on simulated time: engines made ready by a scripted peer, frames moved
//! by the test itself, no process, socket or clock.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;
use crate::catalog::listing::CatalogKind;
use crate::config::Config;
use crate::engine::{RootsBoundary, TransportEvent, TransportKind};
use crate::error::LocalError;
use crate::proto::mcp::ServerRequestKind;

/// A core, the time, and the frames each server's engine wrote (decoded).
struct Sim {
    client: Client,
    now: Instant,
    buf: Vec<u8>,
    /// The servers lanes are opened on, by identity.
    bases: Vec<(String, ServerId)>,
}

impl Sim {
    fn new() -> Self {
        Self::with_cache(CacheConfig::default())
    }

    fn with_cache(cache: CacheConfig) -> Self {
        let client = Client::new(cache).unwrap();
        Sim { client, now: Instant::now(), buf: Vec::new(), bases: Vec::new() }
    }

    /// A stdio server of the 2026-07-28 era, ready, whose tools announce list changes.
    fn ready_server(&mut self, identity: &str) -> ServerId {
        self.ready_server_with(identity, Config::default())
    }

    /// [`ready_server`](Self::ready_server) with its own configuration.
    fn ready_server_with(&mut self, identity: &str, config: Config) -> ServerId {
        let engine = Engine::new(config, self.now).unwrap();
        let id = self.client.add_server(engine, identity, TransportKind::Stdio);
        self.client.handle_transport(self.now, id, TransportEvent::opened());
        self.make_ready(id)
    }

    /// A principal's lane on the server `identity`: an engine of its own under the lane's
    /// catalog context (what `Host::lane` makes, with the driver left to the shell).
    fn ready_lane(&mut self, identity: &str, principal: &str) -> ServerId {
        self.ready_tenant_lane(identity, principal, None)
    }

    /// [`ready_lane`](Self::ready_lane) for a principal of `tenant`.
    fn ready_tenant_lane(
        &mut self,
        identity: &str,
        principal: &str,
        tenant: Option<&str>,
    ) -> ServerId {
        let id = self.opened_lane(identity, principal, tenant);
        self.make_ready(id)
    }

    /// A principal's lane whose transport opened, its probe not answered yet, on the server
    /// `identity` (added and made ready first if it is not here yet).
    fn opened_lane(&mut self, identity: &str, principal: &str, tenant: Option<&str>) -> ServerId {
        let base = match self.bases.iter().find(|(i, _)| i == identity) {
            Some(&(_, base)) => base,
            None => {
                let base = self.base_server(identity, Config::default());
                self.make_ready(base)
            }
        };
        let mut who = Principal::new(principal).scopes(["read"]);
        if let Some(tenant) = tenant {
            who = who.tenant(tenant);
        }
        let principal = match self.client.add_principal(who) {
            Ok(p) | Err(PrincipalError::Duplicate(p)) => p,
        };
        self.open_lane(base, principal)
    }

    /// A stdio server lanes can be opened on, as `Host::add_stdio_server` adds one: its
    /// transport open, its probe not answered yet.
    fn base_server(&mut self, identity: &str, config: Config) -> ServerId {
        let engine = Engine::new(config.clone(), self.now).unwrap();
        let catalog = catalog::ServerCatalog::new(identity.to_owned(), false, None);
        let recipe = principal::Recipe::stdio(&crate::StdioCommand::new(identity), &config);
        let id = self.client.insert(engine, catalog, Some(recipe));
        self.client.handle_transport(self.now, id, TransportEvent::opened());
        self.bases.push((identity.to_owned(), id));
        id
    }

    /// Opens the lane of `principal` on `base` as `Host::lane` does, the driver left out: its
    /// transport opened, its probe not answered yet.
    fn open_lane(&mut self, base: ServerId, principal: PrincipalId) -> ServerId {
        let wall = std::time::SystemTime::now();
        let start = match self.client.lane(self.now, wall, base, principal) {
            Ok(lane::Lane::Start(start)) => *start,
            other => panic!("no lane to start: {other:?}"),
        };
        let lane::LaneStart { base, principal, mut engine, catalog, .. } = start;
        engine.handle_transport(self.now, TransportEvent::opened_as(TransportKind::Stdio));
        let lane = self.client.insert(engine, catalog, None);
        self.client.link_lane(base, principal, lane);
        lane
    }

    fn make_ready(&mut self, id: ServerId) -> ServerId {
        let result = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": true}}});
        self.make_ready_with(id, result)
    }

    /// [`make_ready`](Self::make_ready) with the server's `server/discover` result.
    fn make_ready_with(&mut self, id: ServerId, result: Value) -> ServerId {
        assert_eq!(self.unflushed(), vec![id], "the probe is named for the shell to write");
        let discover = self.sent_one(id);
        assert_eq!(discover["method"], "server/discover");
        self.reply(id, &discover, result);
        while self.client.poll_event(self.now).is_some() {}
        assert!(matches!(self.client.state(id), Some(ServerState::Ready(..))));
        id
    }

    /// Every frame the server's engine has to send.
    fn sent(&mut self, id: ServerId) -> Vec<Value> {
        let mut out = Vec::new();
        let engine = self.client.engine_mut(id).expect("a server");
        loop {
            self.buf.clear();
            if engine.poll_transmit(self.now, &mut self.buf).is_none() {
                break;
            }
            if !self.buf.is_empty() {
                out.push(serde_json::from_slice(&self.buf).expect("a JSON frame"));
            }
        }
        out
    }

    #[track_caller]
    fn sent_one(&mut self, id: ServerId) -> Value {
        let mut frames = self.sent(id);
        assert_eq!(frames.len(), 1, "expected one frame, got {frames:#?}");
        frames.remove(0)
    }

    fn peer(&mut self, id: ServerId, message: Value) {
        let bytes = serde_json::to_vec(&message).unwrap();
        self.client.handle_message(self.now, id, &bytes);
    }

    fn reply(&mut self, id: ServerId, to: &Value, result: Value) {
        self.peer(id, json!({"jsonrpc": "2.0", "id": to["id"], "result": result}));
    }

    fn fail(&mut self, id: ServerId, to: &Value) {
        let error = json!({"code": -32603, "message": "broke"});
        self.peer(id, json!({"jsonrpc": "2.0", "id": to["id"], "error": error}));
    }

    /// The servers the core says have output, in the order it names them.
    fn unflushed(&mut self) -> Vec<ServerId> {
        std::iter::from_fn(|| self.client.take_unflushed()).collect()
    }

    /// A ready server `identity` whose catalogs are watched: its id and the listen request.
    fn watched(&mut self, identity: &str) -> (ServerId, Value) {
        let id = self.ready_server(identity);
        self.client.watch_catalogs(self.now, id).unwrap();
        assert_eq!(self.unflushed(), vec![id], "the listen request waits to be written");
        let listen = self.sent_one(id);
        assert_eq!(listen["method"], "subscriptions/listen");
        (id, listen)
    }

    fn tool_names(&mut self, id: ServerId) -> Option<Vec<String>> {
        let view = self.client.tool_catalog(self.now, id).expect("a catalog");
        view.map(|v| v.names().map(str::to_owned).collect())
    }
}

fn tools_page(names: &[&str]) -> Value {
    let tools: Vec<Value> =
        names.iter().map(|n| json!({"name": n, "inputSchema": {"type": "object"}})).collect();
    json!({"resultType": "complete", "tools": tools, "ttlMs": 60_000})
}

/// A refresh that fails behind a stale answer was waited for by nobody: its failure is not
/// handed, much later, to a need the catalog's next change (or expiry) brings, which would
/// get the old error at once and list nothing.
#[test]
fn a_failed_refresh_behind_a_stale_answer_is_no_later_needs_answer() {
    let mut sim = Sim::new();
    let id = sim.ready_server("tools");
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["add"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["add"]);
    sim.now += Duration::from_secs(61);
    assert_eq!(sim.tool_names(id), None, "expired: listed again");
    let list = sim.sent_one(id);
    sim.fail(id, &list);
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["add"], "served stale after the failure");
    assert_eq!(sim.tool_names(id).unwrap(), ["add"], "stale, a refresh behind it");
    let behind = sim.sent_one(id);
    sim.fail(id, &behind);
    sim.client.handle_timeout(sim.now);
    sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    sim.client.handle_timeout(sim.now);
    sim.now += Duration::from_secs(300);
    let view = sim.client.tool_catalog(sim.now, id).map(|v| v.is_some());
    assert_eq!(view.ok(), Some(false), "a new listing is waited for");
    assert_eq!(sim.sent_one(id)["method"], "tools/list");
}

/// The defect named in the issue, at the core: a watched server whose listen stream broke is
/// due again after the backoff, and that deadline is the core's `poll_timeout`, so a shell
/// that sleeps until it wakes for it.
#[test]
fn a_broken_listen_stream_is_a_deadline_of_the_core() {
    let mut sim = Sim::new();
    let id = sim.ready_server("watched");
    assert_eq!(sim.client.poll_timeout(), None, "a ready, idle server has no deadline");

    sim.client.watch_catalogs(sim.now, id).unwrap();
    assert_eq!(sim.unflushed(), vec![id], "the listen request waits to be written");
    let listen = sim.sent_one(id);
    assert_eq!(listen["method"], "subscriptions/listen");

    sim.fail(id, &listen);
    sim.client.handle_timeout(sim.now);
    let due = sim.client.poll_timeout().expect("the re-listen backoff is a deadline");
    assert_eq!(due, sim.now + Duration::from_millis(200));
    assert!(sim.sent(id).is_empty(), "nothing is sent before the backoff ends");

    sim.now = due;
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.unflushed(), vec![id]);
    let again = sim.sent_one(id);
    assert_eq!(again["method"], "subscriptions/listen");
    // The open stream's own far deadline may stand; the backoff is gone.
    let next = sim.client.poll_timeout().map(|d| d - sim.now);
    assert!(next.is_none_or(|d| d > Duration::from_secs(60)), "still due soon: {next:?}");
}

/// A watched server that is closed (or not ready: restarting, degraded) cannot listen: its
/// re-listen backoff is no deadline then, or the shell would wake for it at once, forever.
#[test]
fn a_watched_server_that_cannot_listen_owns_no_deadline() {
    let mut sim = Sim::new();
    let (id, _) = sim.watched("watched");
    sim.client.engine_mut(id).unwrap().close(sim.now);
    sim.client.handle_timeout(sim.now);
    for _ in 0..4 {
        while sim.client.poll_event(sim.now).is_some() {}
        match sim.client.poll_timeout() {
            Some(due) if due <= sim.now => panic!("a deadline already past: the shell spins"),
            Some(due) => sim.now = due,
            None => break,
        }
        sim.client.handle_timeout(sim.now);
    }
    assert_eq!(sim.client.poll_timeout(), None);
}

/// A change announced before the server is ready (nothing is cached, there is no key yet)
/// leaves the eager cache no work to come back for at once: it kept the server marked every
/// run, `has_events` true with no event, and a loop looking there first spun until the
/// server was ready, or for good when it never was. Once ready, the refresh goes out.
#[test]
fn a_change_announced_before_ready_leaves_no_catalog_work() {
    let cache = CacheConfig { eager_refresh: true, ..CacheConfig::default() };
    let mut sim = Sim::with_cache(cache);
    sim.client.arm_cache();
    let id = sim.base_server("early", Config::default());
    let probe = sim.sent_one(id);
    assert_eq!(probe["method"], "server/discover", "the probe, unanswered");
    // Asked for before the server is ready: the catalog the eager cache keeps current.
    assert!(matches!(sim.client.tool_catalog(sim.now, id), Err(CatalogError::NotReady)));
    sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    for _ in 0..3 {
        sim.client.handle_timeout(sim.now);
        while sim.client.poll_event(sim.now).is_some() {}
    }
    assert!(!sim.client.has_catalog_work());
    let ready = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {"listChanged": true}}});
    sim.reply(id, &probe, ready);
    for _ in 0..3 {
        sim.client.handle_timeout(sim.now);
        while sim.client.poll_event(sim.now).is_some() {}
    }
    // Once ready, the change's eager refresh goes out.
    assert_eq!(sim.sent_one(id)["method"], "tools/list");
}

/// A graceful end of the listen stream (what a server sends when it shuts down: a redeploy, a
/// restart) is followed by a new stream with backoff, as a broken one is. Watching stopped
/// for good, with no event to tell the host.
#[test]
fn a_gracefully_ended_listen_stream_is_opened_again() {
    let mut sim = Sim::new();
    let (id, listen) = sim.watched("watched");
    let end = json!({"resultType": "complete",
        "_meta": {"io.modelcontextprotocol/subscriptionId": listen["id"]}});
    sim.reply(id, &listen, end);
    sim.client.handle_timeout(sim.now);
    while sim.client.poll_event(sim.now).is_some() {}
    let due = sim.client.poll_timeout().expect("a re-listen is due");
    assert_eq!(due, sim.now + Duration::from_millis(200));
    sim.now = due;
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.sent_one(id)["method"], "subscriptions/listen");
}

/// A modern server that has no `subscriptions/listen` (-32601) is not asked again: every new
/// stream marks every catalog stale, so asking every 30 s (the backoff's cap) cut the
/// server's `ttlMs` to that, and an eager cache listed everything again each time.
#[test]
fn a_server_without_listen_is_not_asked_again() {
    let mut sim = Sim::new();
    let (id, listen) = sim.watched("watched");
    let error = json!({"code": -32601, "message": "Method not found"});
    sim.peer(id, json!({"jsonrpc": "2.0", "id": listen["id"], "error": error}));
    sim.client.handle_timeout(sim.now);
    while sim.client.poll_event(sim.now).is_some() {}
    assert_eq!(sim.client.poll_timeout(), None, "no re-listen is due");
    sim.now += Duration::from_secs(120);
    sim.client.handle_timeout(sim.now);
    assert!(sim.sent(id).is_empty(), "nothing asked again");
}

/// A watched server whose process crashed listens again once it is ready again: the backoff
/// that was no deadline meanwhile is acted on when the server can listen.
#[test]
fn a_watched_server_listens_again_once_its_restarted_process_is_ready() {
    let mut sim = Sim::new();
    let (id, _) = sim.watched("watched");
    let exit = crate::error::ProcessExit { code: Some(1), signal: None, stderr_tail: "".into() };
    let lost = TransportEvent::closed(crate::error::TransportError::ProcessExit(exit));
    sim.client.handle_transport(sim.now, id, lost);
    sim.client.handle_timeout(sim.now);
    while sim.client.poll_event(sim.now).is_some() {}
    while !sim.client.engine(id).unwrap().wants_transport() {
        let due = sim.client.poll_timeout().expect("the restart is due");
        assert!(due > sim.now, "a deadline already past: the shell spins");
        sim.now = due;
        sim.client.handle_timeout(sim.now);
        while sim.client.poll_event(sim.now).is_some() {}
    }
    sim.client.handle_transport(sim.now, id, TransportEvent::opened());
    sim.make_ready(id);
    sim.client.handle_timeout(sim.now);
    while sim.client.poll_event(sim.now).is_some() {}
    let again = sim.sent(id);
    assert!(
        again.iter().any(|f| f["method"] == "subscriptions/listen"),
        "the stream is opened again: {again:#?}"
    );
}

/// The core's `Debug` names its servers without their secrets: a stdio server's arguments
/// (its default identity) and the credentials in a URL's query.
#[test]
fn the_core_shows_its_servers_without_their_secrets() {
    let mut sim = Sim::new();
    sim.ready_server("/usr/bin/node\0srv.js\0--token=s3cret");
    sim.ready_server("http://h/mcp?api_key=KEY1");
    // The alternate form shows the servers (a slab shows only its length otherwise).
    let shown = format!("{:#?}", sim.client);
    assert!(!shown.contains("s3cret") && !shown.contains("KEY1"), "{shown}");
    assert!(shown.contains("/usr/bin/node") && shown.contains("<2 arguments redacted>"), "{shown}");
}

/// A removed server's last events (the ends of its calls, `Closed`) come out of `poll_event`
/// and `drain` alike (a drain that left them queued spun a loop on `has_queued_events`), and
/// their records carry the name it had, though its slot is another server's by then.
#[test]
fn a_removed_servers_last_events_reach_drain_and_keep_its_name() {
    for by_drain in [false, true] {
        let mut sim = Sim::new();
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let log = std::rc::Rc::clone(&seen);
        let sink = move |r: &crate::CallRecord<'_>| {
            log.borrow_mut().push(r.server.unwrap_or("").to_owned());
        };
        sim.client.set_record_sink(Box::new(sink));
        let alpha = sim.ready_server("alpha");
        let opts = CallOptions::default();
        let call = sim.client.call_tool_json(sim.now, alpha, "echo", "{}", &opts).unwrap();
        sim.client.engine_mut(alpha).unwrap().close(sim.now);
        let engine = sim.client.remove_server(alpha).unwrap();
        sim.client.retire(alpha, engine);
        // Added, not made ready: the setup would take the events this test looks for.
        let engine = Engine::new(Config::default(), sim.now).unwrap();
        let beta = sim.client.add_server(engine, "beta", TransportKind::Stdio);
        assert_eq!(beta.index, alpha.index, "the slot is reused");
        seen.borrow_mut().clear();
        let mut ended = Vec::new();
        if by_drain {
            sim.client.drain(sim.now, |_, id, e| ended.push((id, format!("{e:?}"))));
        } else {
            while let Some((id, e)) = sim.client.poll_event(sim.now) {
                ended.push((id, format!("{e:?}")));
            }
        }
        assert!(!sim.client.has_queued_events(), "drain {by_drain}");
        let failed = format!("CallFailed {{ call: {call:?}");
        assert!(ended.iter().any(|(id, e)| *id == alpha && e.starts_with(&failed)), "{ended:?}");
        assert!(ended.iter().any(|(id, e)| *id == alpha && e.starts_with("Closed")), "{ended:?}");
        assert_eq!(*seen.borrow(), ["alpha"], "drain {by_drain}");
    }
}

/// A call a principal's lane carried is recorded with the principal beside the server's
/// name, which the lane shares with its server: without it a record could not say whose
/// call failed. The server's own calls name no principal, and a removed lane's last calls
/// keep its principal.
#[test]
fn a_lanes_call_records_name_its_principal() {
    let mut sim = Sim::new();
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let log = std::rc::Rc::clone(&seen);
    let sink = move |r: &crate::CallRecord<'_>| {
        let who = (r.server.unwrap_or("").to_owned(), r.principal.map(str::to_owned));
        log.borrow_mut().push(who);
    };
    let alice = sim.ready_lane("srv", "alice");
    let server = sim.bases.iter().find(|(i, _)| i == "srv").map(|&(_, id)| id).unwrap();
    sim.client.set_record_sink(Box::new(sink));
    let opts = CallOptions::default();
    for id in [server, alice] {
        sim.client.call_tool_json(sim.now, id, "echo", "{}", &opts).unwrap();
        let call = sim.sent_one(id);
        sim.reply(id, &call, json!({"content": []}));
        while sim.client.poll_event(sim.now).is_some() {}
    }
    let named = |principal: Option<&str>| ("srv".to_owned(), principal.map(str::to_owned));
    assert_eq!(*seen.borrow(), [named(None), named(Some("alice"))]);
    seen.borrow_mut().clear();
    sim.client.call_tool_json(sim.now, alice, "echo", "{}", &opts).unwrap();
    sim.client.engine_mut(alice).unwrap().close(sim.now);
    let engine = sim.client.remove_server(alice).unwrap();
    sim.client.retire(alice, engine);
    while sim.client.poll_event(sim.now).is_some() {}
    assert_eq!(*seen.borrow(), [named(Some("alice"))], "the removed lane's last call");
}

/// The cache's own calls on a server the host removes (its listen stream, a page fetch) end
/// with the close like any call, but their ends are the cache's: the host sees only the
/// server's `Closed`, never a `CallFailed` for a call it did not make.
#[test]
fn a_removed_servers_cache_calls_are_no_host_events() {
    let mut sim = Sim::new();
    let id = sim.ready_server("alpha");
    sim.client.watch_catalogs(sim.now, id).unwrap();
    assert_eq!(sim.tool_names(id), None, "a listing starts");
    let sent: Vec<String> = sim.sent(id).iter().map(|f| f["method"].to_string()).collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    sim.client.engine_mut(id).unwrap().close(sim.now);
    let engine = sim.client.remove_server(id).unwrap();
    sim.client.retire(id, engine);
    let mut seen = Vec::new();
    while let Some((_, e)) = sim.client.poll_event(sim.now) {
        seen.push(format!("{e:?}"));
    }
    assert!(seen.iter().all(|e| !e.starts_with("CallFailed")), "{seen:?}");
    assert!(seen.iter().any(|e| e.starts_with("Closed")), "{seen:?}");
}

/// A ready server `name` with one call sent and pending.
fn with_a_call(sim: &mut Sim, name: &str) -> ServerId {
    let id = sim.ready_server(name);
    sim.client.call_tool_json(sim.now, id, "t", "{}", &CallOptions::default()).unwrap();
    sim.sent_one(id);
    sim.unflushed();
    id
}

/// Closes, removes and retires each server, as `Host::remove_server` does.
fn remove_all(sim: &mut Sim, ids: impl IntoIterator<Item = ServerId>) {
    for id in ids {
        let mut core = sim.client.remove(id).unwrap();
        core.engine.close(sim.now);
        sim.client.retire(id, core.engine);
    }
}

/// The servers whose call ended (`CallFailed`) among the events handed out, and how many
/// other events came.
fn ends_and_others(sim: &mut Sim) -> (Vec<ServerId>, usize) {
    let (mut ends, mut others) = (Vec::new(), 0);
    while let Some((id, event)) = sim.client.poll_event(sim.now) {
        match event {
            Event::CallFailed { .. } => ends.push(id),
            Event::Closed { .. } => {}
            _ => others += 1,
        }
    }
    (ends, others)
}

/// A host removes a server with a hundred busy lanes (a gateway's users) before it takes
/// their events: each lane's call still ends. Sixty-four removed engines were kept at most,
/// so the oldest lanes' calls never ended.
#[test]
fn every_call_of_a_removed_servers_many_lanes_ends() {
    let mut sim = Sim::new();
    // Every lane made first: making one drains the events waiting.
    let lanes: Vec<ServerId> = (0..100).map(|i| sim.ready_lane("gw", &format!("p{i}"))).collect();
    for &lane in &lanes {
        sim.client.call_tool_json(sim.now, lane, "t", "{}", &CallOptions::default()).unwrap();
        sim.sent_one(lane);
    }
    sim.unflushed();
    let base = sim.bases[0].1;
    let forgotten = sim.client.lanes.forget(base);
    assert_eq!(forgotten.len(), 100);
    remove_all(&mut sim, forgotten.into_iter().chain([base]));
    let (ends, _) = ends_and_others(&mut sim);
    assert_eq!(ends.len(), 100, "every lane's call ended");
    for lane in lanes {
        assert!(ends.contains(&lane), "{lane:?}'s call ended under its handle");
    }
    assert!(!sim.client.retired.has_events());
    assert_eq!(sim.client.retired.bytes(), 0, "what was drained is no longer counted");
}

/// Past the bound on the bytes removed servers' events hold, a server whose events hold no
/// call's end goes first, and one that comes with none is not kept; only when every server
/// kept holds a call's end does the oldest go, ends and all.
#[test]
fn past_their_bound_removed_servers_holding_calls_ends_are_kept_first() {
    // The weight of a removed server with one call's end (names of one letter each).
    let mut twin = Sim::new();
    let x = with_a_call(&mut twin, "x");
    remove_all(&mut twin, [x]);
    let weight = twin.client.retired.bytes();
    assert!(weight > 0);

    let mut sim = Sim::new();
    let quiet = sim.ready_server("q");
    let [a, b, c] = ["a", "b", "c"].map(|name| with_a_call(&mut sim, name));
    let late = sim.ready_server("l");
    let updated = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
        "params": {"uri": "res://a"}});
    sim.peer(quiet, updated.clone());
    sim.peer(late, updated);
    sim.client.retired = RetiredServers::with_bound(3 * weight);
    // The quiet one goes for `c` at the latest; the late quiet one is not kept.
    remove_all(&mut sim, [quiet, a, b, c, late]);
    assert_eq!(ends_and_others(&mut sim), (vec![a, b, c], 0));

    let mut sim = Sim::new();
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|name| with_a_call(&mut sim, name));
    sim.client.retired = RetiredServers::with_bound(3 * weight);
    remove_all(&mut sim, [a, b, c, d]);
    assert_eq!(ends_and_others(&mut sim).0, vec![b, c, d], "the oldest went, ends and all");
}

/// A server holding no call's end that would not fit even with every such server kept
/// dropped is the one not kept, and nothing is dropped for it: the servers without ends were
/// dropped first, and then it was refused all the same.
#[test]
fn a_removed_server_too_large_to_keep_drops_nothing_for_itself() {
    let updated = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
        "params": {"uri": "res://a"}});
    // Weights of a server with a call's end, and of one with a notice (names of one letter).
    let mut twin = Sim::new();
    let x = with_a_call(&mut twin, "x");
    remove_all(&mut twin, [x]);
    let with_end = twin.client.retired.bytes();
    let y = twin.ready_server("y");
    twin.peer(y, updated.clone());
    let before = twin.client.retired.bytes();
    remove_all(&mut twin, [y]);
    let with_notice = twin.client.retired.bytes() - before;

    let mut sim = Sim::new();
    let [a, b] = ["a", "b"].map(|name| with_a_call(&mut sim, name));
    // Every server made first: making one drains the events waiting.
    let quiet = sim.ready_server("q");
    let loud = sim.ready_server("l");
    sim.peer(quiet, updated.clone());
    for _ in 0..8 {
        sim.peer(loud, updated.clone());
    }
    sim.client.retired = RetiredServers::with_bound(2 * with_end + with_notice);
    remove_all(&mut sim, [a, quiet, b, loud]);
    let (ends, others) = ends_and_others(&mut sim);
    assert_eq!(ends, [a, b]);
    assert_eq!(others, 1, "the quiet server's notice is kept, the loud one's eight are not");
}

/// The first added name of each tool change event the core hands out, in order.
fn first_added_of_each_change(sim: &mut Sim) -> Vec<String> {
    let mut kept = Vec::new();
    while let Some((_, event)) = sim.client.poll_event(sim.now) {
        if let crate::client::HostEvent::Client(crate::client::ClientEvent::ToolsChanged(c)) = event
        {
            kept.push(c.added()[0].to_string());
        }
    }
    kept
}

/// Catalog change events a host never takes are bounded by the memory their names hold too:
/// a server renaming a large catalog at each refresh made each of 256 kept changes hold two
/// catalogs' names.
#[test]
fn catalog_change_events_not_taken_are_bounded_by_bytes() {
    use crate::catalog::change::CatalogChange;
    use crate::catalog::diff::CatalogDiff;
    use crate::catalog::hash::ContentHash;
    let mut sim = Sim::new();
    let id = sim.ready_server("renaming");
    for round in 0..20 {
        let names =
            |tag: &str| (0..50_000).map(|i| format!("{tag}-{round}-{i:08}").into()).collect();
        let diff =
            CatalogDiff { added: names("new"), removed: names("old"), ..CatalogDiff::default() };
        let change = CatalogChange::new(diff, ContentHash::of(b"x"));
        sim.client.cache.push_change(id, CatalogKind::Tools, change);
    }
    let kept = first_added_of_each_change(&mut sim);
    // Each change is about 3.5 MB of names: two fit in the 8 MiB; the newest are kept.
    assert_eq!(kept, ["new-18-00000000", "new-19-00000000"]);
}

/// Catalog change events a host never takes are bounded: the oldest go (every change's
/// names were kept for good).
#[test]
fn catalog_change_events_not_taken_are_bounded() {
    use crate::catalog::change::CatalogChange;
    use crate::catalog::diff::CatalogDiff;
    use crate::catalog::hash::ContentHash;
    let mut sim = Sim::new();
    let id = sim.ready_server("flapping");
    for i in 0..1_000 {
        let diff = CatalogDiff { added: vec![format!("t{i}").into()], ..CatalogDiff::default() };
        let change = CatalogChange::new(diff, ContentHash::of(b"x"));
        sim.client.cache.push_change(id, CatalogKind::Tools, change);
    }
    let kept = first_added_of_each_change(&mut sim);
    assert_eq!(kept.len(), 256);
    assert_eq!(kept.last().map(String::as_str), Some("t999"), "the newest are kept");
}

/// A removed principal's policy goes with it: the gate opens again when no other policy or
/// rule is left (it stayed shut for good).
#[test]
fn a_removed_principals_policy_goes_with_it() {
    let mut sim = Sim::new();
    let alice = sim.client.add_principal(Principal::new("alice")).unwrap();
    assert!(sim.client.authorization_open());
    sim.client.set_principal_policy(alice, |_: &AccessRequest<'_>| Decision::Allow);
    assert!(!sim.client.authorization_open());
    sim.client.forget_principal(alice);
    assert!(sim.client.authorization_open());
}

/// A policy given for a server or principal already removed is not kept: nothing would
/// forget it again, and it held the gate shut for good (every call asked the policies, and
/// every call a drain started began held).
#[test]
fn a_policy_for_a_removed_server_or_principal_is_not_kept() {
    let mut sim = Sim::new();
    let gone = sim.ready_server("gone");
    sim.client.remove_server(gone).expect("removed");
    sim.client.set_server_policy(gone, |_: &AccessRequest<'_>| Decision::Allow);
    assert!(sim.client.authorization_open(), "a removed server's policy shut the gate");
    let alice = sim.client.add_principal(Principal::new("alice")).unwrap();
    sim.client.forget_principal(alice);
    sim.client.set_principal_policy(alice, |_: &AccessRequest<'_>| Decision::Allow);
    assert!(sim.client.authorization_open(), "so did a removed principal's");
    // A live one's still is.
    let kept = sim.ready_server("kept");
    sim.client.set_server_policy(kept, |_: &AccessRequest<'_>| Decision::Allow);
    assert!(!sim.client.authorization_open());
}

/// Calls a drain starts while a policy or a disabled tool is in effect start held; past the
/// room of the queue they are refused at once, as any call is (they were left held when their
/// release found no room, and ended unsent at their deadline).
#[test]
fn calls_a_drain_starts_held_respect_the_queue() {
    let mut sim = Sim::new();
    let config = Config { max_in_flight: 1, max_queued: 0, ..Config::default() };
    let id = sim.ready_server_with("limited", config);
    sim.client.disable_tools(id, ["x"]);
    let opts = CallOptions::default();
    let first = sim.client.call_tool_json(sim.now, id, "echo", "{}", &opts).unwrap();
    let frame = sim.sent_one(id);
    sim.reply(id, &frame, json!({"content": []}));
    let mut started = Vec::new();
    let no_args = serde_json::value::RawValue::from_string("{}".into()).unwrap();
    sim.client.drain(sim.now, |commands, _, event| {
        if matches!(event, HostEvent::CallDone { call, .. } if call == first) {
            let o = CallOptions::default();
            started.push(commands.call_tool_json(id, "y", "{}", &o));
            started.push(commands.call_tool_json(id, "y", "{}", &o));
            // Arguments as a `RawValue` take the same check.
            started.push(commands.call_tool(id, "y", &no_args, &o));
        }
    });
    assert!(started[0].is_ok(), "{started:?}");
    assert_eq!(started[1..], [Err(RequestError::Overloaded), Err(RequestError::Overloaded)]);
    assert_eq!(sim.sent(id).len(), 1, "the first goes out once released");
}

/// A call the host itself starts held (`CallOptions::hold`) from a drain stays held when the
/// policy allows it, as it does outside a drain: the drain's settling sent it.
#[test]
fn a_call_the_host_holds_from_a_drain_stays_held_when_allowed() {
    let mut sim = Sim::new();
    let id = sim.ready_server("srv");
    sim.client.set_policy(|_: &AccessRequest<'_>| Decision::Allow);
    let opts = CallOptions::default();
    let first = sim.client.call_tool_json(sim.now, id, "echo", "{}", &opts).unwrap();
    let frame = sim.sent_one(id);
    sim.reply(id, &frame, json!({"content": []}));
    let mut held = None;
    sim.client.drain(sim.now, |commands, _, event| {
        if matches!(event, HostEvent::CallDone { call, .. } if call == first) {
            let o = CallOptions { hold: true, ..CallOptions::default() };
            held = Some(commands.call_tool_json(id, "later", "{}", &o).unwrap());
        }
    });
    assert!(held.is_some());
    assert!(sim.sent(id).is_empty(), "held until the host releases it");
    let outside = CallOptions { hold: true, ..CallOptions::default() };
    sim.client.call_tool_json(sim.now, id, "also", "{}", &outside).unwrap();
    assert!(sim.sent(id).is_empty(), "as outside a drain");
    sim.client.allow_call(sim.now, id, held.unwrap()).unwrap();
    assert_eq!(sim.sent(id).len(), 1, "the host's release sends it");
}

/// A call the last event's closure started held (local authorization on) is settled after
/// the closure, and its request is handed to the shell before the drain returns, as each
/// event's are: it was left unwritten until the next poll.
#[test]
fn a_drain_writes_what_its_last_event_started() {
    let mut sim = Sim::new();
    let id = sim.ready_server("srv");
    sim.client.disable_tools(id, ["x"]);
    let opts = CallOptions::default();
    let first = sim.client.call_tool_json(sim.now, id, "echo", "{}", &opts).unwrap();
    let frame = sim.sent_one(id);
    sim.reply(id, &frame, json!({"content": []}));
    let start = |commands: &mut Commands<'_>, _: ServerId, event: HostEvent<'_>| {
        if matches!(event, HostEvent::CallDone { call, .. } if call == first) {
            commands.call_tool_json(id, "y", "{}", &CallOptions::default()).unwrap();
        }
    };
    sim.client.drain_with(sim.now, start, |c| while c.take_unflushed().is_some() {});
    assert!(!sim.client.has_unflushed(), "nothing left for the next poll");
    assert_eq!(sim.sent_one(id)["params"]["name"], "y");
}

/// Two needs of one catalog make one listing; its answer serves both from the cache, and
/// the next need is a hit with no request.
#[test]
fn needs_of_one_catalog_share_one_listing_and_then_hit_the_cache() {
    let mut sim = Sim::new();
    let id = sim.ready_server("tools");
    assert_eq!(sim.tool_names(id), None, "the first need starts a refresh");
    assert_eq!(sim.tool_names(id), None, "the second joins it");
    let list = sim.sent_one(id);
    assert_eq!(list["method"], "tools/list");

    sim.reply(id, &list, tools_page(&["add", "echo"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["add", "echo"]);
    assert!(sim.sent(id).is_empty(), "an answered need sends nothing more");
    assert_eq!(sim.tool_names(id).unwrap(), ["add", "echo"]);
    let stats = sim.client.cache_stats();
    assert_eq!((stats.refreshes, stats.page_fetches), (1, 1));
    assert!(stats.hits >= 1, "the last need was a hit: {stats:?}");
    assert_eq!(sim.client.tool(sim.now, id, "echo").map(|d| d.contains("echo")), Some(true));
}

/// A server that announces a change after every listing: the need that listed is answered by
/// what its walk read (the list as of its answer, as a client without a cache would return
/// it); the next need lists again. The change made the walk's answer stale before the host
/// asked again, so every need started another walk and none was ever answered.
#[test]
fn a_change_after_every_listing_still_answers_the_need_that_listed() {
    let mut sim = Sim::new();
    let id = sim.ready_server("restless");
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["add"]));
    sim.peer(id, changed.clone());
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).expect("the walk's answer"), ["add"]);
    assert!(sim.sent(id).is_empty(), "the answer was the walk's, and took nothing new");
    // The next need lists again: the change made the catalog stale.
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["add", "echo"]));
    sim.peer(id, changed);
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).expect("the second walk's answer"), ["add", "echo"]);
}

/// A change notice while a need's walk refreshes an expired list: the need gets the server's
/// new answer, and no checked call reads the old definitions meanwhile. The pages held for
/// the need were copied from the store whatever their expiry, the page on the wire's old copy
/// among them, and stood before the server's answer (the need got the old list, and a
/// checked call the old definitions again).
#[test]
fn a_change_during_the_refresh_of_an_expired_list_serves_the_new_answer() {
    let mut sim = Sim::new();
    let id = sim.ready_server("expiring");
    let short = |names: &[&str]| {
        let mut page = tools_page(names);
        page["ttlMs"] = json!(1000);
        page
    };
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, short(&["add"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["add"]);
    sim.now += Duration::from_secs(2);
    assert_eq!(sim.tool_names(id), None, "expired: a walk");
    let list = sim.sent_one(id);
    assert!(sim.client.listed_tool(sim.now, id, "add").is_none(), "expired: nothing to check");
    sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    sim.client.handle_timeout(sim.now);
    assert!(sim.client.listed_tool(sim.now, id, "add").is_none(), "the old one is not back");
    sim.reply(id, &list, short(&["add", "echo"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).expect("the walk's answer"), ["add", "echo"]);
}

/// With eager refresh, a change that arrives while a listing is on the wire leaves the server
/// to the listing's answer: it is not marked for the cache's pass at every round meanwhile (a
/// loop that asks `has_events` first spun at full CPU for as long as the listing took). The
/// answer brings the eager refresh.
#[test]
fn a_change_during_a_listing_leaves_no_catalog_work_until_its_answer() {
    let mut sim = Sim::with_cache(CacheConfig { eager_refresh: true, ..CacheConfig::default() });
    let id = sim.ready_server("changing");
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    for _ in 0..3 {
        sim.client.handle_timeout(sim.now);
        while sim.client.poll_event(sim.now).is_some() {}
    }
    assert!(!sim.client.has_catalog_work(), "nothing to do until the listing answers");
    sim.reply(id, &list, tools_page(&["add"]));
    sim.client.handle_timeout(sim.now);
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.sent_one(id)["method"], "tools/list", "the eager refresh");
}

/// A change notification marks the catalog stale, and with eager refresh the core refetches
/// it by itself and hands the host a change event naming what was added.
#[test]
fn a_list_change_refetches_eagerly_and_tells_the_host_what_changed() {
    let mut sim = Sim::with_cache(CacheConfig { eager_refresh: true, ..CacheConfig::default() });
    let id = sim.ready_server("changing");
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["add"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["add"]);
    while sim.client.poll_event(sim.now).is_some() {}

    sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    sim.client.handle_timeout(sim.now);
    let refetch = sim.sent_one(id);
    assert_eq!(refetch["method"], "tools/list", "the eager refresh went out by itself");
    sim.reply(id, &refetch, tools_page(&["add", "mul"]));
    sim.client.handle_timeout(sim.now);

    let mut added = Vec::new();
    while let Some((server, event)) = sim.client.poll_event(sim.now) {
        if let Event::Client(ClientEvent::ToolsChanged(change)) = event {
            assert_eq!(server, id);
            added.extend(change.added().iter().map(|n| n.to_string()));
        }
    }
    assert_eq!(added, ["mul"]);
}

/// A change event leaves out the tools the configuration disables, as every view of the
/// catalog does: it named them, so a host showing what is new showed tools it may not call,
/// and a change of disabled tools alone was an event about nothing the host can see.
#[test]
fn a_change_event_leaves_out_the_disabled_tools() {
    let mut sim = Sim::with_cache(CacheConfig { eager_refresh: true, ..CacheConfig::default() });
    let id = sim.ready_server("changing");
    sim.client.disable_tools(id, ["secret", "hidden"]);
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["add"]));
    sim.client.handle_timeout(sim.now);
    while sim.client.poll_event(sim.now).is_some() {}
    let mut changes = Vec::new();
    for (names, wait) in
        [(&["add", "mul", "secret"][..], 0), (&["add", "mul", "secret", "hidden"][..], 2)]
    {
        sim.now += Duration::from_secs(wait);
        sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        sim.client.handle_timeout(sim.now);
        let refetch = sim.sent_one(id);
        sim.reply(id, &refetch, tools_page(names));
        sim.client.handle_timeout(sim.now);
        while let Some((_, event)) = sim.client.poll_event(sim.now) {
            if let Event::Client(ClientEvent::ToolsChanged(change)) = event {
                changes.push(change.added().iter().map(|n| n.to_string()).collect::<Vec<_>>());
            }
        }
    }
    assert_eq!(changes, [["mul"]], "the second change added a disabled tool only: no event");
}

/// A server that announces a change after every listing (or a stream of changes) is listed
/// eagerly once a second at most: the change that comes within a second of the last eager
/// listing is a deadline of the core, and its listing goes out when that passes. The old core
/// listed again at once, in a loop for as long as the server kept announcing.
#[test]
fn eager_refreshes_of_a_catalog_are_a_second_apart_at_least() {
    let mut sim = Sim::with_cache(CacheConfig { eager_refresh: true, ..CacheConfig::default() });
    let id = sim.ready_server("chatty");
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["add"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["add"]);
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    sim.peer(id, changed.clone());
    sim.client.handle_timeout(sim.now);
    let first = sim.now;
    let refetch = sim.sent_one(id);
    assert_eq!(refetch["method"], "tools/list", "the first goes out at once");
    sim.reply(id, &refetch, tools_page(&["add", "mul"]));
    sim.client.handle_timeout(sim.now);
    sim.now += Duration::from_millis(300);
    sim.peer(id, changed);
    sim.client.handle_timeout(sim.now);
    assert!(sim.sent(id).is_empty(), "held back by the floor");
    let due = sim.client.poll_timeout();
    assert_eq!(due, Some(first + Duration::from_secs(1)), "a deadline of the core");
    sim.now = due.unwrap();
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.sent_one(id)["method"], "tools/list", "then it goes out");
}

/// The core names each server with output once, only the ones that have it, and forgets a
/// removed one.
#[test]
fn the_shell_is_told_each_server_with_output_once() {
    let mut sim = Sim::new();
    let a = sim.ready_server("a");
    let b = sim.ready_server("b");
    assert!(sim.unflushed().is_empty());
    let opts = CallOptions::default();
    sim.client.call_tool_json(sim.now, a, "echo", "{}", &opts).unwrap();
    sim.client.call_tool_json(sim.now, a, "echo", "{}", &opts).unwrap();
    assert_eq!(sim.unflushed(), vec![a]);
    sim.client.call_tool_json(sim.now, b, "echo", "{}", &opts).unwrap();
    assert!(sim.client.remove_server(b).is_some());
    assert!(sim.unflushed().is_empty(), "a removed server has nothing to write");
    assert_eq!(sim.sent(a).len(), 2);
    let unknown = sim.client.call_tool_json(sim.now, b, "echo", "{}", &opts);
    assert!(matches!(unknown, Err(RequestError::Closed)));
}

/// The era's first request is output too: a shell that writes only the servers the core names
/// must learn of the probe an opened transport starts, and of the handshake a legacy answer
/// starts, or a server added to a running core never becomes ready.
#[test]
fn the_probe_and_the_handshake_are_named_for_the_shell_to_write() {
    let mut sim = Sim::new();
    let engine = Engine::new(Config::default(), sim.now).unwrap();
    let id = sim.client.add_server(engine, "a", TransportKind::Stdio);
    assert!(sim.unflushed().is_empty(), "no transport yet, nothing to write");
    sim.client.handle_transport(sim.now, id, TransportEvent::opened());
    assert_eq!(sim.unflushed(), vec![id], "the probe waits to be written");
    let discover = sim.sent_one(id);
    assert_eq!(discover["method"], "server/discover");
    // A legacy server refuses the probe: the handshake comes next, and is named too.
    sim.peer(
        id,
        json!({"jsonrpc": "2.0", "id": discover["id"],
            "error": {"code": -32601, "message": "Method not found"}}),
    );
    assert_eq!(sim.unflushed(), vec![id], "the handshake waits to be written");
    assert_eq!(sim.sent_one(id)["method"], "initialize");
}

/// Servers take turns in `poll_event`: a server with many events does not starve another.
#[test]
fn servers_take_turns_in_poll_event() {
    let mut sim = Sim::new();
    let a = sim.ready_server("a");
    let b = sim.ready_server("b");
    let opts = CallOptions::default();
    for _ in 0..3 {
        sim.client.call_tool_json(sim.now, a, "echo", "{}", &opts).unwrap();
    }
    sim.client.call_tool_json(sim.now, b, "echo", "{}", &opts).unwrap();
    for request in sim.sent(a) {
        sim.reply(a, &request, json!({"resultType": "complete", "content": []}));
    }
    let only = sim.sent_one(b);
    sim.reply(b, &only, json!({"resultType": "complete", "content": []}));
    let order: Vec<ServerId> =
        std::iter::from_fn(|| sim.client.poll_event(sim.now).map(|(s, _)| s)).collect();
    assert_eq!(order.len(), 4);
    assert!(order[..2].contains(&b), "b waited behind all of a: {order:?}");
}

/// A call on the handle of a server removed, whose slot another server took, is refused
/// without asking the policy: the policy (or the user it asks) was shown the other server's
/// name for a call that could never go.
#[test]
fn a_stale_server_handle_is_refused_before_the_policy_is_asked() {
    let mut sim = Sim::new();
    let gone = sim.ready_server("a");
    sim.client.remove_server(gone).expect("removed");
    let bank = sim.ready_server("b");
    assert_eq!(bank.index, gone.index, "the slot is reused");
    sim.client.set_server_name(bank, "bank");
    let asked = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let seen = asked.clone();
    sim.client.set_policy(move |r: &AccessRequest<'_>| {
        seen.borrow_mut().push(r.server_name.map(str::to_owned));
        Decision::Allow
    });
    let opts = CallOptions::default();
    let refused = sim.client.call_tool_json(sim.now, gone, "transfer", "{}", &opts);
    assert_eq!(refused, Err(RequestError::Closed));
    assert!(asked.borrow().is_empty(), "asked about {:?}", asked.borrow());
    assert!(sim.sent(bank).is_empty());
}

/// Tool rules given again (a configuration applied at each reload) are kept once: the list
/// the gate scans on every call grew by the whole configuration each time. A removed
/// server's handle makes none.
#[test]
fn tool_rules_given_again_are_kept_once() {
    let mut sim = Sim::new();
    let id = sim.ready_server("srv");
    for _ in 0..1000 {
        sim.client.disable_tools(id, ["x", "y"]);
    }
    assert_eq!(sim.client.authz.disabled_count(id), 2);
    sim.client.remove_server(id).expect("removed");
    sim.client.disable_tools(id, ["z"]);
    assert_eq!(sim.client.authz.disabled_count(id), 0, "no rules for a stale handle");
}

/// A call refused after it started something on its server (a lapsed authorization retried:
/// the probe queued) still names the server for the shell to write: unnamed, the probe
/// waited for a tick, which might be its own deadline.
#[test]
fn a_refused_call_that_queued_a_probe_names_its_server() {
    let mut sim = Sim::new();
    let engine = Engine::new(Config::default(), sim.now).unwrap();
    let id = sim.client.add_server(engine, "https://x", TransportKind::Http);
    sim.client.handle_transport(sim.now, id, TransportEvent::opened_as(TransportKind::Http));
    sim.unflushed();
    let probe = sim.sent_one(id);
    let text = probe["id"].to_string();
    let wire =
        crate::proto::jsonrpc::WireId::parse(crate::proto::json::parse(text.as_bytes()).unwrap())
            .unwrap();
    let refused =
        crate::engine::ExchangeFailure::Transport(crate::error::TransportError::HttpStatus(401));
    sim.client.handle_transport(sim.now, id, TransportEvent::exchange_failed(wire, refused));
    sim.unflushed();
    while sim.client.poll_event(sim.now).is_some() {}
    let bogus = crate::proto::trace::TraceContext {
        traceparent: "bogus".into(),
        tracestate: None,
        baggage: None,
    };
    let opts = CallOptions { trace: Some(bogus), ..CallOptions::default() };
    assert!(sim.client.call_tool_json(sim.now, id, "t", "{}", &opts).is_err());
    assert_eq!(sim.unflushed(), vec![id]);
    assert_eq!(sim.sent_one(id)["method"], "server/discover");
}

/// A held call allowed after its deadline (its task's), with no tick between (the host asked
/// its user and waited), ends then and is never sent: it went out after the deadline.
#[test]
fn a_held_call_allowed_past_its_deadline_is_not_sent() {
    let mut sim = Sim::new();
    let id = sim.ready_server("asking");
    sim.client.set_policy(|_: &AccessRequest<'_>| Decision::Ask);
    let options = TaskOptions::new().deadline(Duration::from_secs(2));
    let task = sim.client.task(sim.now, options).unwrap();
    let call = sim
        .client
        .call_tool_json_in_task(sim.now, task, id, "delete", "{}", CallOptions::default())
        .unwrap();
    while sim.client.poll_event(sim.now).is_some() {}
    sim.now += Duration::from_secs(3);
    let allowed = sim.client.allow_call(sim.now, id, call);
    assert_eq!(allowed, Err(crate::error::AuthorizeError::NotHeld));
    assert!(sim.sent(id).is_empty(), "sent past its deadline");
    let mut ended = false;
    while let Some((_, event)) = sim.client.poll_event(sim.now) {
        if let Event::CallFailed { call: c, error, .. } = event {
            ended |= c == call && matches!(error, CallError::Local(LocalError::DeadlineExceeded));
        }
    }
    assert!(ended, "it ends with its deadline");
}

/// A task's call whose arguments come as JSON text goes through local authorization like
/// every other call (it went around the policy before the core existed).
#[test]
fn a_task_call_with_json_arguments_is_put_to_the_policy() {
    let mut sim = Sim::new();
    let id = sim.ready_server("guarded");
    sim.client.set_policy(|_: &AccessRequest<'_>| Decision::deny("not under a task"));
    let task = sim.client.task(sim.now, TaskOptions::new().budget(2)).unwrap();
    let call = sim
        .client
        .call_tool_json_in_task(sim.now, task, id, "echo", "{}", CallOptions::default())
        .unwrap();
    assert!(sim.sent(id).is_empty(), "a refused call is never sent");
    let mut refused = false;
    while let Some((_, event)) = sim.client.poll_event(sim.now) {
        if let Event::CallFailed { call: c, error, .. } = event {
            assert_eq!(c, call);
            refused = matches!(error, CallError::Local(LocalError::AuthorizationDenied(_)));
        }
    }
    assert!(refused, "the policy's refusal ends the call");
    // Nothing was sent, so nothing of the budget is spent: a third refused call is refused
    // by the policy again, not for a budget the refusals used up.
    for _ in 0..2 {
        let again = sim.client.call_tool_json_in_task(
            sim.now,
            task,
            id,
            "echo",
            "{}",
            CallOptions::default(),
        );
        assert!(again.is_ok(), "{again:?}");
    }
    assert_eq!(sim.client.task_info(task).unwrap().calls, 0);
    // Nor does a call the host denies after the policy asked.
    sim.client.set_policy(|_: &AccessRequest<'_>| Decision::Ask);
    let asked =
        sim.client.call_tool_json_in_task(sim.now, task, id, "echo", "{}", CallOptions::default());
    assert_eq!(sim.client.task_info(task).unwrap().calls, 1, "held: it may yet go");
    sim.client.deny_call(sim.now, id, asked.unwrap(), "no").unwrap();
    assert_eq!(sim.client.task_info(task).unwrap().calls, 0);
}

/// A task's deadline clamps its calls' timeouts: the engine fails the call at the task's
/// deadline, which is the core's `poll_timeout`.
#[test]
fn a_task_deadline_is_the_deadline_of_its_calls() {
    let mut sim = Sim::new();
    let id = sim.ready_server("slow");
    let terms = TaskOptions::new().deadline(Duration::from_secs(2)).budget(1);
    let task = sim.client.task(sim.now, terms).unwrap();
    let call = sim
        .client
        .call_tool_json_in_task(sim.now, task, id, "sleep", "{}", CallOptions::default())
        .unwrap();
    sim.sent(id);
    assert_eq!(sim.client.poll_timeout(), Some(sim.now + Duration::from_secs(2)));
    sim.now += Duration::from_secs(2);
    sim.client.handle_timeout(sim.now);
    let mut failed = false;
    while let Some((_, event)) = sim.client.poll_event(sim.now) {
        if let Event::CallFailed { call: c, error, .. } = event {
            failed |= c == call && matches!(error, CallError::Local(LocalError::DeadlineExceeded));
        }
    }
    assert!(failed, "the call ended at the task's deadline");
    let over =
        sim.client.call_tool_json_in_task(sim.now, task, id, "sleep", "{}", CallOptions::default());
    assert!(matches!(over, Err(TaskCallError::Task(_))));
}

/// The granted scope the shell reports is part of the catalog key: a new grant does not see
/// the catalog listed under the old one.
#[test]
fn a_new_granted_scope_keys_the_catalog_apart() {
    let mut sim = Sim::new();
    let id = sim.ready_server("scoped");
    sim.client.note_granted_scope(id, Some("read"));
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["read_only"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["read_only"]);

    sim.client.note_granted_scope(id, Some("read write"));
    assert_eq!(sim.tool_names(id), None, "the wider grant lists again");
    assert_eq!(sim.sent_one(id)["method"], "tools/list");
    let _ = CatalogKind::Tools;
}

/// A narrower grant that comes while the server is down (its process restarting) is not
/// served what the wider one listed: the key is made anew under the last version. The last
/// key stood, whatever the grant, until the server was ready again, so the narrower grant was
/// shown the wider one's private tools meanwhile.
#[test]
fn a_narrower_grant_while_the_server_is_down_is_not_served_the_wider_ones_catalog() {
    let mut sim = Sim::new();
    let id = sim.ready_server("scoped");
    sim.client.note_granted_scope(id, Some("read admin"));
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["admin_only", "read_only"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["admin_only", "read_only"]);
    let exit = crate::error::ProcessExit { code: Some(1), signal: None, stderr_tail: "".into() };
    let lost = TransportEvent::closed(crate::error::TransportError::ProcessExit(exit));
    sim.client.handle_transport(sim.now, id, lost);
    while sim.client.poll_event(sim.now).is_some() {}
    assert!(!matches!(sim.client.state(id), Some(ServerState::Ready(..))));
    // Down, the same grant is still served its catalog (stale, as the cache serves one).
    assert_eq!(sim.tool_names(id).unwrap(), ["admin_only", "read_only"]);
    sim.client.note_granted_scope(id, Some("read"));
    assert_eq!(sim.tool_names(id), None, "not the wider grant's listing");
}

/// A narrower grant does not search the tools listed under the wider one: the search index
/// is the current key's, emptied when the key changes and filled by that key's listing (or by
/// its catalog still stored, when the grant comes back).
#[test]
fn the_search_index_follows_the_granted_scope() {
    let mut sim = Sim::new();
    let id = sim.ready_server("scoped");
    let found = |sim: &Sim, query: &str| -> Vec<String> {
        sim.client.search_tools(id, query, 5).into_iter().map(|(n, _)| n.to_owned()).collect()
    };
    sim.client.note_granted_scope(id, Some("read write"));
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["read_notes", "write_notes"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["read_notes", "write_notes"]);
    assert_eq!(found(&sim, "write"), ["write_notes"]);

    sim.client.note_granted_scope(id, Some("read"));
    assert!(found(&sim, "write").is_empty(), "nothing listed under the narrower grant yet");
    assert_eq!(sim.tool_names(id), None, "the narrower grant lists");
    assert!(found(&sim, "write").is_empty(), "the wider grant's tools are gone from the index");
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["read_notes"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["read_notes"]);
    assert!(found(&sim, "write").is_empty());
    assert_eq!(found(&sim, "read"), ["read_notes"]);

    sim.client.note_granted_scope(id, Some("read write"));
    assert_eq!(sim.tool_names(id).unwrap(), ["read_notes", "write_notes"], "still stored");
    assert!(sim.sent(id).is_empty(), "served from the store");
    assert_eq!(found(&sim, "write"), ["write_notes"], "and searched again");
}

/// A listing the store would not keep is served once, to the need that waited for it, and
/// only under the grant that listed it: a grant that changes before that need looks lists
/// again instead of being served the other grant's tools.
#[test]
fn a_one_use_listing_is_not_served_under_a_new_grant() {
    let mut sim = Sim::new();
    let id = sim.ready_server("scoped");
    let uncached = |names: &[&str]| {
        let mut page = tools_page(names);
        page["ttlMs"] = json!(0);
        page
    };
    sim.client.note_granted_scope(id, Some("read write"));
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, uncached(&["read_notes", "write_notes"]));
    sim.client.handle_timeout(sim.now);

    sim.client.note_granted_scope(id, Some("read"));
    assert_eq!(sim.tool_names(id), None, "the narrower grant lists for itself");
    let list = sim.sent_one(id);
    assert_eq!(list["method"], "tools/list");
    sim.reply(id, &list, uncached(&["read_notes"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["read_notes"], "served once, to the need");
}

/// A 2026-07-28 listing page without a valid `ttlMs` is immediately stale (PROTOCOL.md §2.2:
/// treat it as 0): the need that waited for it is served, and the next one lists again. (A
/// 2025-11-25 page never carries one; it gets `CacheConfig::default_ttl`.)
#[test]
fn a_modern_page_without_a_valid_ttl_is_not_served_again() {
    let mut sim = Sim::new();
    let id = sim.ready_server("no-ttl");
    for ttl in [None, Some(json!(-5)), Some(json!("60000")), Some(json!(1.5))] {
        assert_eq!(sim.tool_names(id), None, "ttlMs {ttl:?}: the need lists");
        let list = sim.sent_one(id);
        assert_eq!(list["method"], "tools/list");
        let mut page = tools_page(&["t"]);
        match ttl {
            Some(ttl) => page["ttlMs"] = ttl,
            None => drop(page.as_object_mut().unwrap().remove("ttlMs")),
        }
        sim.reply(id, &list, page);
        sim.client.handle_timeout(sim.now);
        assert_eq!(sim.tool_names(id).unwrap(), ["t"], "the waiting need is served");
    }
    assert_eq!(sim.tool_names(id), None, "and the next one lists again");
}

/// The same when the server's process is lost between its reply and the cache's look at it:
/// the page is read in the era it was listed in (the key's), not in the engine's state of the
/// moment, which no longer knows one. Read as a page of no era, it was cached for the default
/// lifetime (60 s) and served as fresh.
#[test]
fn a_modern_page_without_ttl_is_not_kept_when_its_server_is_lost_before_it_is_read() {
    let mut sim = Sim::new();
    let id = sim.ready_server("no-ttl");
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    let mut page = tools_page(&["t"]);
    page.as_object_mut().unwrap().remove("ttlMs");
    sim.reply(id, &list, page);
    let exit = crate::error::ProcessExit { code: Some(1), signal: None, stderr_tail: "".into() };
    let lost = TransportEvent::closed(crate::error::TransportError::ProcessExit(exit));
    sim.client.handle_transport(sim.now, id, lost);
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["t"], "the waiting need is served");
    assert_eq!(sim.tool_names(id), None, "and the next one lists again");
}

/// A server removed while its listing is in flight gives back its refresh: a server of the
/// same cache key added next lists for itself (it does not wait for a listing that will never
/// come), and removals never use up the cache's room for refreshes.
#[test]
fn a_server_removed_mid_listing_gives_its_refresh_back() {
    let mut sim = Sim::with_cache(CacheConfig { max_refreshes: 1, ..CacheConfig::default() });
    let first = sim.ready_server("tools");
    assert_eq!(sim.tool_names(first), None);
    assert_eq!(sim.sent_one(first)["method"], "tools/list");
    sim.client.remove_server(first).expect("removed");
    let again = sim.ready_server("tools");
    assert_eq!(sim.tool_names(again), None);
    assert_eq!(sim.sent_one(again)["method"], "tools/list", "its own listing");
    sim.client.remove_server(again).expect("removed");
    let other = sim.ready_server("another");
    let view = sim.client.tool_catalog(sim.now, other).map(|v| v.is_some());
    assert!(matches!(view, Ok(false)), "room for its refresh: {view:?}");
    assert_eq!(sim.sent_one(other)["method"], "tools/list");
}

/// A catalog of several pages is one view in id order, each tool once (the later page's
/// definition when a tool is on two): every tool is found by `definition`, whether the pages
/// are cached or served once (`ttlMs: 0`).
#[test]
fn a_paged_catalog_is_one_view_in_id_order() {
    for ttl in [60_000, 0] {
        let mut sim = Sim::new();
        let id = sim.ready_server("paged");
        assert_eq!(sim.tool_names(id), None);
        let list = sim.sent_one(id);
        let mut first = tools_page(&["zeta", "yak", "mid"]);
        first["nextCursor"] = json!("p2");
        first["ttlMs"] = json!(ttl);
        sim.reply(id, &list, first);
        sim.client.handle_timeout(sim.now);
        let list = sim.sent_one(id);
        assert_eq!(list["params"]["cursor"], "p2");
        let mut second = tools_page(&["alpha", "mid"]);
        second["tools"][1]["description"] = json!("the second page's");
        second["ttlMs"] = json!(ttl);
        sim.reply(id, &list, second);
        sim.client.handle_timeout(sim.now);
        let view = sim.client.tool_catalog(sim.now, id).unwrap().expect("the catalog");
        let names: Vec<&str> = view.names().collect();
        assert_eq!(names, ["alpha", "mid", "yak", "zeta"], "ttlMs {ttl}");
        for name in &names {
            assert!(view.definition(name).is_some(), "ttlMs {ttl}: {name} not found");
        }
        assert!(view.definition("mid").unwrap().contains("the second page's"), "ttlMs {ttl}");
    }
}

/// A catalog whose pages expire faster than its listing takes (`ttlMs` 50, each page taken
/// in 60 ms after the one before): the waiting need is served what the listing read, and the
/// next need lists again. The old core found the list expired once the last page
/// came, and listed again for every need without ever serving one.
#[test]
fn a_catalog_that_expires_during_its_listing_is_served_as_listed() {
    let mut sim = Sim::new();
    let id = sim.ready_server("fast");
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    let mut first = tools_page(&["b"]);
    (first["nextCursor"], first["ttlMs"]) = (json!("p2"), json!(50));
    sim.reply(id, &list, first);
    sim.now += Duration::from_millis(60);
    sim.client.handle_timeout(sim.now);
    let list = sim.sent_one(id);
    assert_eq!(list["params"]["cursor"], "p2");
    let mut second = tools_page(&["a"]);
    second["ttlMs"] = json!(50);
    sim.reply(id, &list, second);
    sim.now += Duration::from_millis(60);
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).expect("the listing is served"), ["a", "b"]);
    assert_eq!(sim.tool_names(id), None, "the next need lists again");
    assert_eq!(sim.sent_one(id)["method"], "tools/list");
}

/// The capabilities a client declares can change what a server lists, so they key its
/// catalogs: those actually sent, with the kinds of server request the host answers
/// (`Config::answers`) put in. A server entry that declares sampling is not served the
/// listing one without it fetched from the same server; one that declares the same is.
#[cfg(feature = "server-requests")]
#[test]
fn the_capabilities_sent_key_the_catalog_with_the_answered_kinds() {
    let mut sim = Sim::new();
    let plain = sim.ready_server("srv");
    let same = sim.ready_server("srv");
    let answers = crate::ServerRequestKinds { sampling: true, ..Default::default() };
    let sampling = sim.ready_server_with("srv", Config { answers, ..Config::default() });

    assert_eq!(sim.tool_names(plain), None);
    let list = sim.sent_one(plain);
    sim.reply(plain, &list, tools_page(&["basic"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(plain).unwrap(), ["basic"]);
    assert_eq!(sim.tool_names(same).unwrap(), ["basic"], "the same declaration shares it");
    assert_eq!(sim.tool_names(sampling), None, "a listing of its own");
    assert_eq!(sim.sent_one(sampling)["method"], "tools/list");
}

/// Lanes of one server share its public catalog and keep their private ones apart: the second
/// lane is served the public listing the first one fetched, with no request, while a private
/// listing is fetched by each lane for itself.
#[test]
fn lanes_share_a_public_catalog_and_keep_private_ones_apart() {
    let mut sim = Sim::new();
    let alice = sim.ready_lane("srv", "alice");
    let bob = sim.ready_lane("srv", "bob");

    assert_eq!(sim.tool_names(alice), None);
    let list = sim.sent_one(alice);
    let mut public = tools_page(&["shared"]);
    public["cacheScope"] = json!("public");
    sim.reply(alice, &list, public);
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(alice).unwrap(), ["shared"]);
    assert_eq!(sim.tool_names(bob).unwrap(), ["shared"], "bob is served alice's public listing");
    assert!(sim.sent(bob).is_empty(), "with no request of his own");

    // A private listing (no cacheScope) after a change is each lane's own.
    sim.peer(alice, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(alice), None, "stale: alice lists again");
    let list = sim.sent_one(alice);
    sim.reply(alice, &list, tools_page(&["alice_only"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(alice).unwrap(), ["alice_only"]);
    assert!(sim.client.tool(sim.now, bob, "alice_only").is_none(), "never alice's private tool");
    assert_eq!(sim.tool_names(bob), None, "the shared public listing went stale too");
    let list = sim.sent_one(bob);
    sim.reply(bob, &list, tools_page(&["bob_only"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(bob).unwrap(), ["bob_only"], "bob lists for himself");
}

/// A shared public list whose later page alone another lane fetched again (it expired
/// first: pages live by their own `ttlMs`) is taken on by every lane: a change event for
/// each, and its search index follows. The lane that had not walked heard nothing until the
/// first page expired too, as the list's oldest page had not changed.
#[test]
fn a_shared_list_whose_later_page_alone_was_fetched_again_is_taken_on_by_every_lane() {
    let mut sim = Sim::new();
    let alice = sim.ready_lane("srv", "alice");
    let bob = sim.ready_lane("srv", "bob");
    let page = |name: &str, ttl: u64, next: Option<&str>| {
        let mut p = json!({"resultType": "complete", "tools": [{"name": name,
            "inputSchema": {"type": "object"}}], "cacheScope": "public", "ttlMs": ttl});
        if let Some(c) = next {
            p["nextCursor"] = json!(c);
        }
        p
    };
    assert_eq!(sim.tool_names(alice), None);
    let first = sim.sent_one(alice);
    sim.reply(alice, &first, page("a", 60_000, Some("c1")));
    sim.client.handle_timeout(sim.now);
    let second = sim.sent_one(alice);
    sim.reply(alice, &second, page("b", 100, None));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(alice).unwrap(), ["a", "b"]);
    while sim.client.poll_event(sim.now).is_some() {}

    sim.now += Duration::from_millis(200);
    assert_eq!(sim.tool_names(bob), None, "the later page expired: bob lists it");
    let again = sim.sent_one(bob);
    assert_eq!(again["params"]["cursor"], "c1", "the later page alone");
    sim.reply(bob, &again, page("b2", 100, None));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(alice).unwrap(), ["a", "b2"]);
    let mut heard = Vec::new();
    while let Some((server, event)) = sim.client.poll_event(sim.now) {
        if let Event::Client(ClientEvent::ToolsChanged(change)) = event {
            heard.push((server, change.added().iter().map(|n| n.to_string()).collect::<Vec<_>>()));
        }
    }
    assert!(heard.contains(&(alice, vec!["b2".to_owned()])), "alice took it on: {heard:?}");
}

/// A public listing is shared within a tenant only: the host's tenants are isolated from one
/// another, whatever a server says of its own users.
#[test]
fn a_public_catalog_is_not_shared_across_tenants() {
    let mut sim = Sim::new();
    let alice = sim.ready_tenant_lane("srv", "alice", Some("acme"));
    let bob = sim.ready_tenant_lane("srv", "bob", Some("acme"));
    let carol = sim.ready_tenant_lane("srv", "carol", Some("globex"));

    assert_eq!(sim.tool_names(alice), None);
    let list = sim.sent_one(alice);
    let mut public = tools_page(&["acme_tool"]);
    public["cacheScope"] = json!("public");
    sim.reply(alice, &list, public);
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(bob).unwrap(), ["acme_tool"], "shared within the tenant");
    assert!(sim.sent(bob).is_empty());
    assert_eq!(sim.tool_names(carol), None, "another tenant lists for itself");
    assert_eq!(sim.sent_one(carol)["method"], "tools/list");
}

/// A policy that asks holds the call unsent and hands the host an ask; the host's answer
/// sends it (allow) or ends it (deny), each on the core alone.
#[test]
fn an_asked_call_waits_for_the_hosts_answer() {
    let mut sim = Sim::new();
    let id = sim.ready_server("asking");
    sim.client.set_policy(|_: &AccessRequest<'_>| Decision::Ask);
    let opts = CallOptions::default();
    let first = sim.client.call_tool_json(sim.now, id, "delete", "{}", &opts).unwrap();
    let second = sim.client.call_tool_json(sim.now, id, "drop", "{}", &opts).unwrap();
    assert!(sim.sent(id).is_empty(), "asked calls are held");
    let mut asked = Vec::new();
    while let Some((server, event)) = sim.client.poll_event(sim.now) {
        if let Event::Client(ClientEvent::AuthorizationAsked { call, name, .. }) = event {
            assert_eq!(server, id);
            asked.push((call, name.to_owned()));
        }
    }
    assert_eq!(asked, [(first, "delete".to_owned()), (second, "drop".to_owned())]);

    sim.client.allow_call(sim.now, id, first).unwrap();
    assert_eq!(sim.unflushed(), vec![id]);
    assert_eq!(sim.sent_one(id)["params"]["name"], "delete");
    sim.client.deny_call(sim.now, id, second, "not today").unwrap();
    assert!(sim.sent(id).is_empty(), "a denied call is never sent");
    let mut denied = false;
    while let Some((_, event)) = sim.client.poll_event(sim.now) {
        if let Event::CallFailed { call, error, .. } = event {
            denied |= call == second
                && matches!(error, CallError::Local(LocalError::AuthorizationDenied(_)));
        }
    }
    assert!(denied);
}

/// `drain` hands out authorization asks as `poll_event` does, those of calls started before
/// it and those its closure starts, in order, and leaves none behind (an ask left queued would
/// keep a host's poll waking at once).
/// A call held for the host's answer to a tool disabled meanwhile (a configuration reload)
/// is not sent when the host allows it: `disable_tools` says calls to it are never sent.
#[test]
fn allowing_a_call_to_a_tool_disabled_meanwhile_refuses_it() {
    let mut sim = Sim::new();
    let id = sim.ready_server("asking");
    sim.client.set_policy(|_: &AccessRequest<'_>| Decision::Ask);
    let opts = CallOptions::default();
    let call = sim.client.call_tool_json(sim.now, id, "delete", "{}", &opts).unwrap();
    assert!(sim.sent(id).is_empty(), "held for the ask");
    sim.client.disable_tools(id, ["delete"]);
    sim.client.allow_call(sim.now, id, call).unwrap();
    assert!(sim.sent(id).is_empty(), "never sent");
    let mut ended = None;
    while let Some((_, event)) = sim.client.poll_event(sim.now) {
        if let Event::CallFailed { call: c, error, .. } = event {
            ended = Some((c, error));
        }
    }
    let refused = CallError::Local(LocalError::AuthorizationDenied(
        "the tool is disabled by configuration".into(),
    ));
    assert_eq!(ended, Some((call, refused)));
}

#[test]
fn drain_hands_out_authorization_asks() {
    let mut sim = Sim::new();
    let id = sim.ready_server("asking");
    sim.client.set_policy(|_: &AccessRequest<'_>| Decision::Ask);
    let opts = CallOptions::default();
    let first = sim.client.call_tool_json(sim.now, id, "delete", "{}", &opts).unwrap();
    let mut asked = Vec::new();
    let mut second = None;
    sim.client.drain(sim.now, |commands, server, event| {
        if let Event::Client(ClientEvent::AuthorizationAsked { call, name, .. }) = event {
            assert_eq!(server, id);
            asked.push((call, name.to_owned()));
            if second.is_none() {
                let args = serde_json::value::RawValue::from_string("{}".into()).unwrap();
                let call = commands.call_tool(id, "drop", &args, &CallOptions::default());
                second = Some(call.unwrap());
            }
        }
    });
    let second = second.expect("the first ask was handed out");
    assert_eq!(asked, [(first, "delete".to_owned()), (second, "drop".to_owned())]);
    assert!(!sim.client.has_asks(), "no ask left queued");
}

/// The checked calls' schemas are the core's: compiled once from the cached definition, a
/// refreshed catalog whose tool changed compiles anew, and a check never lists by itself.
#[cfg(feature = "schema")]
#[test]
fn tool_schemas_are_compiled_once_per_definition_from_the_cache() {
    use crate::client::schema::SchemaCheck;
    let raw = |s: &str| serde_json::value::RawValue::from_string(s.to_owned()).unwrap();
    let page = |max: u32| {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer",
            "maximum": max}}, "required": ["n"]});
        json!({"resultType": "complete", "ttlMs": 60_000,
            "tools": [{"name": "count", "inputSchema": schema}]})
    };
    let mut sim = Sim::new();
    let id = sim.ready_server("checked");
    let check = |sim: &mut Sim, args: &str| {
        sim.client.check_tool_arguments(sim.now, id, "count", &raw(args))
    };
    assert!(matches!(check(&mut sim, r#"{"n":1}"#), Err(SchemaCheck::NotInCatalog)));
    assert!(sim.sent(id).is_empty(), "a check does not list");

    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, page(5));
    sim.client.handle_timeout(sim.now);
    assert!(check(&mut sim, r#"{"n":5}"#).is_ok());
    let Err(SchemaCheck::Violation(v)) = check(&mut sim, r#"{"n":6}"#) else {
        panic!("6 is past the maximum")
    };
    assert_eq!(v.pointer, "/n");
    assert!(matches!(check(&mut sim, "[1]"), Err(SchemaCheck::Violation(_))));
    assert_eq!(sim.client.schema_compiles(), 1, "one definition, compiled once");

    // The catalog changes: the new definition is compiled, and checked against.
    sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    assert_eq!(sim.tool_names(id), None, "a stale catalog lists again");
    let list = sim.sent_one(id);
    sim.reply(id, &list, page(10));
    sim.client.handle_timeout(sim.now);
    assert!(check(&mut sim, r#"{"n":6}"#).is_ok());
    assert_eq!(sim.client.schema_compiles(), 2);

    // A tool without an outputSchema passes any result (the output checks are
    // `tests/schema.rs`'s, against the demo server).
    assert!(sim.client.check_tool_result(sim.now, id, "count", r#"{"content":[]}"#).is_ok());
}

/// The compiled schemas kept are bounded by their nodes, not only by their count: a server
/// that changes a large tool at each refresh kept 1,024 compiled copies of it.
#[cfg(feature = "schema")]
#[test]
fn compiled_schemas_are_bounded_by_their_nodes() {
    let raw = |s: &str| serde_json::value::RawValue::from_string(s.to_owned()).unwrap();
    let page = |round: usize| {
        let properties: serde_json::Map<String, Value> =
            (0..5_000).map(|i| (format!("p{i}"), json!({"type": "integer"}))).collect();
        let schema = json!({"type": "object", "properties": properties, "title": round});
        json!({"resultType": "complete", "ttlMs": 60_000,
            "tools": [{"name": "wide", "inputSchema": schema}]})
    };
    let mut sim = Sim::new();
    let id = sim.ready_server("wide");
    assert_eq!(sim.tool_names(id), None);
    for round in 0..40 {
        if round > 0 {
            sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
            assert_eq!(sim.tool_names(id), None);
        }
        let list = sim.sent_one(id);
        sim.reply(id, &list, page(round));
        sim.client.handle_timeout(sim.now);
        assert!(sim.client.check_tool_arguments(sim.now, id, "wide", &raw("{}")).is_ok());
        let kept = sim.client.schemas.kept_nodes();
        assert!(kept <= 100_000, "round {round}: {kept}");
    }
    assert_eq!(sim.client.schema_compiles(), 40);
}

/// The servers the next round of a shell looks at (those marked since the last round), in
/// index order.
fn next_round(sim: &mut Sim) -> Vec<usize> {
    let mut work = Vec::new();
    sim.client.servers.take_round(sim.now, &mut work, |_, s| s.settled());
    work
}

/// A call to `id` made and answered, its end taken by the host.
fn call_answered(sim: &mut Sim, id: ServerId) {
    let opts = CallOptions::default();
    sim.client.call_tool_json(sim.now, id, "t", "{}", &opts).unwrap();
    let call = sim.sent_one(id);
    sim.reply(id, &call, json!({"content": [], "isError": false}));
    while sim.client.poll_event(sim.now).is_some() {}
}

/// Input to one server of a core whose cache is in use makes the next round look at that
/// server alone. The cache's pump walked every server and marked each for the round, so a
/// host that used the cache paid for every server it kept, every call (about 1,150
/// instructions per idle server per call in the roundtrip bench).
#[test]
fn the_cache_looks_only_at_the_servers_that_moved() {
    let mut sim = Sim::new();
    let (a, b, _c) = (sim.ready_server("a"), sim.ready_server("b"), sim.ready_server("c"));
    assert_eq!(sim.tool_names(a), None, "the cache in use: a's tools listed");
    let list = sim.sent_one(a);
    sim.reply(a, &list, tools_page(&["t"]));
    while sim.client.poll_event(sim.now).is_some() {}
    assert_eq!(sim.tool_names(a), Some(vec!["t".to_owned()]));
    next_round(&mut sim);

    call_answered(&mut sim, b);
    assert_eq!(next_round(&mut sim), [b.index]);
    // And the cache still does its part where something moved: a list change on `a` makes
    // its tools stale, so the next need lists them again.
    sim.peer(a, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    while sim.client.poll_event(sim.now).is_some() {}
    assert_eq!(next_round(&mut sim), [a.index]);
    assert_eq!(sim.tool_names(a), None, "stale after the change: listed again");
    let list = sim.sent_one(a);
    sim.reply(a, &list, tools_page(&["t", "u"]));
    while sim.client.poll_event(sim.now).is_some() {}
    assert_eq!(sim.tool_names(a), Some(vec!["t".to_owned(), "u".to_owned()]));
}

/// A store that keeps entries in a map both runs of a test share.
#[derive(Debug, Clone, Default)]
struct MapStore(std::rc::Rc<std::cell::RefCell<std::collections::HashMap<String, StoredEntry>>>);

impl CapabilityStore for MapStore {
    fn get(&mut self, key: &StoreKey) -> Option<StoredEntry> {
        self.0.borrow().get(&key.id()).cloned()
    }

    fn put(&mut self, key: &StoreKey, entry: &StoredEntry) {
        self.0.borrow_mut().insert(key.id(), entry.clone());
    }

    fn mark_stale(&mut self, key: &StoreKey) {
        self.0.borrow_mut().remove(&key.id());
    }
}

/// A wall-clock reading far from the machine's own (the core reads no clock of its own).
fn wall() -> std::time::SystemTime {
    std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000)
}

/// The pages' expiry times in the store, in seconds past [`wall`].
fn stored_expiries(store: &MapStore) -> Vec<u64> {
    let entries = store.0.borrow();
    let pages = entries.values().flat_map(|e| e.pages.iter());
    pages.map(|p| p.expires.duration_since(wall()).unwrap().as_secs()).collect()
}

/// The core dates what the store keeps by the wall clock the program read, counted on with
/// simulated time, and a new reading ([`Client::handle_wall_clock`]) moves it: a page kept
/// for 60 s is served by the next run 30 s later, and listed again by one whose reading is
/// 61 s later, however far the machine's own clock is from both.
#[test]
fn the_store_is_dated_by_the_wall_clock_the_program_reads() {
    let store = MapStore::default();
    let mut sim = Sim::new();
    sim.now += Duration::from_secs(5);
    // Read 5 s before the listing: the page's 60 s count from the reading plus those 5 s.
    sim.client.set_capability_store(store.clone(), sim.now - Duration::from_secs(5), wall());
    let a = sim.ready_server("srv");
    assert_eq!(sim.tool_names(a), None);
    let list = sim.sent_one(a);
    sim.reply(a, &list, tools_page(&["t"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(stored_expiries(&store), [65]);
    let next_run = |reading: Duration, later_reading: Option<Duration>| {
        let mut sim = Sim::new();
        sim.client.set_capability_store(store.clone(), sim.now, wall() + reading);
        if let Some(at) = later_reading {
            sim.client.handle_wall_clock(sim.now, wall() + at);
        }
        let a = sim.ready_server("srv");
        let served = sim.tool_names(a);
        (served, sim.sent(a).len())
    };
    assert_eq!(next_run(Duration::from_secs(30), None), (Some(vec!["t".to_owned()]), 0));
    assert_eq!(next_run(Duration::from_secs(66), None), (None, 1), "expired: listed");
    let moved = next_run(Duration::from_secs(30), Some(Duration::from_secs(66)));
    assert_eq!(moved, (None, 1), "the new reading counts");
}

/// After a restart, a principal is served its own (private) catalog from the persistent
/// store, not the public one another principal's lane filed: in memory the private list is
/// what the principal reads, and so it must be when both come back from the store, in
/// whichever order the lanes ask.
#[test]
fn a_principals_private_catalog_comes_back_from_the_store_as_its_own() {
    let store = MapStore::default();
    let mut sim = Sim::new();
    sim.client.set_capability_store(store.clone(), sim.now, wall());
    let alice = sim.ready_lane("srv", "alice");
    assert_eq!(sim.tool_names(alice), None);
    let list = sim.sent_one(alice);
    sim.reply(alice, &list, tools_page(&["admin", "basic"]));
    sim.client.handle_timeout(sim.now);
    sim.unflushed();
    let bob = sim.ready_lane("srv", "bob");
    assert_eq!(sim.tool_names(bob), None);
    let list = sim.sent_one(bob);
    let mut public = tools_page(&["basic"]);
    public["cacheScope"] = json!("public");
    sim.reply(bob, &list, public);
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(alice).unwrap(), ["admin", "basic"]);
    assert_eq!(sim.tool_names(bob).unwrap(), ["basic"]);
    for bob_first in [false, true] {
        let mut sim = Sim::new();
        sim.client.set_capability_store(store.clone(), sim.now, wall());
        let alice = sim.ready_lane("srv", "alice");
        sim.unflushed();
        let bob = sim.ready_lane("srv", "bob");
        if bob_first {
            assert_eq!(sim.tool_names(bob).unwrap(), ["basic"]);
        }
        assert_eq!(sim.tool_names(alice).unwrap(), ["admin", "basic"], "bob first: {bob_first}");
        assert!(sim.sent(alice).is_empty(), "served from the store");
    }
}

/// A lane's `server/discover` result is its principal's (the probe carries the lane's
/// credentials, and a server may answer each principal its own instructions and
/// capabilities): it is not filed under the server's shared key, where the server's next run
/// (and every lane it opens) would start from it. The server's own verdict is filed.
#[test]
fn a_lanes_era_verdict_is_not_filed_for_the_server() {
    let store = MapStore::default();
    let mut sim = Sim::new();
    sim.client.set_capability_store(store.clone(), sim.now, wall());
    let discover = |who: &str| {
        json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "instructions": format!("for {who}"),
            "ttlMs": 60_000, "cacheScope": "private"})
    };
    let alice = sim.opened_lane("srv", "alice", Some("acme"));
    sim.make_ready_with(alice, discover("alice"));
    sim.client.handle_timeout(sim.now);
    let filed = || store.0.borrow().keys().filter(|k| k.contains("discover")).count();
    assert_eq!(filed(), 0, "nothing filed for the lane: {:?}", store.0.borrow().keys());
    let own = sim.client.add_server(
        Engine::new(Config::default(), sim.now).unwrap(),
        "srv",
        TransportKind::Stdio,
    );
    sim.client.handle_transport(sim.now, own, TransportEvent::opened());
    sim.make_ready_with(own, discover("the host"));
    sim.client.handle_timeout(sim.now);
    assert_eq!(filed(), 1, "the server's own verdict is filed");
}

/// A server's own answer handler speaks for its lanes too (as its policies, disabled tools
/// and roots do): a lane's server request is offered to the lane's handler, then the
/// server's, then the host's. The server's was skipped, so a host-wide handler that accepts
/// answered what the server's handler would have refused.
#[test]
fn a_servers_answer_handler_answers_for_its_lanes() {
    let mut sim = Sim::new();
    let answers = crate::ServerRequestKinds { elicitation_form: true, ..Default::default() };
    let config = Config { answers, ..Config::default() };
    let base = sim.base_server("srv", config);
    sim.make_ready(base);
    let alice = sim.client.add_principal(Principal::new("alice")).unwrap();
    let lane = sim.open_lane(base, alice);
    sim.make_ready(lane);
    let accept = |_: ServerId, _: ServerRequestKind, _: &str| {
        Answer::Result(r#"{"action":"accept","content":{"ok":true}}"#.to_owned())
    };
    sim.client.set_answer_handler(Box::new(accept));
    let refuse = |_: ServerId, _: ServerRequestKind, _: &str| Answer::Reject;
    assert!(sim.client.set_server_answer_handler(base, Box::new(refuse)));

    sim.client.call_tool_json(sim.now, lane, "t", "{}", &CallOptions::default()).unwrap();
    let first = sim.sent_one(lane);
    let elicit = json!({"method": "elicitation/create", "params": {"message": "ok?",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}});
    let ask = json!({"resultType": "input_required", "inputRequests": {"a": elicit}});
    sim.reply(lane, &first, ask);
    sim.client.handle_timeout(sim.now);
    assert!(sim.sent(lane).is_empty(), "no answer goes to the server");
    let mut rejected = false;
    while let Some((_, event)) = sim.client.poll_event(sim.now) {
        if let Event::CallFailed { error, .. } = event {
            rejected |= matches!(error, CallError::Local(LocalError::InputRejected));
        }
    }
    assert!(rejected, "the server's handler refused the lane's request");
}

/// A stored page further off than any page can live (`CacheConfig::max_ttl`, an hour by
/// default) was written by a clock set ahead or edited by hand: it is dropped, and the catalog
/// listed again. Capped at `max_ttl`, it was served by every host that lived less than that,
/// and never listed again to be saved over.
#[test]
fn a_stored_page_further_off_than_max_ttl_is_not_served() {
    let store = MapStore::default();
    let mut sim = Sim::new();
    sim.client.set_capability_store(store.clone(), sim.now, wall());
    let id = sim.ready_server("srv");
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["t"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["t"]);
    let expire_in = |after: std::time::Duration| {
        for entry in store.0.borrow_mut().values_mut() {
            for page in &mut entry.pages {
                page.expires = wall() + after;
            }
        }
    };
    // Within a minute of skew past `max_ttl` (an hour): a page written at the limit by a
    // clock a little ahead is loaded, and capped.
    expire_in(std::time::Duration::from_secs(3600 + 30));
    let mut sim = Sim::new();
    sim.client.set_capability_store(store.clone(), sim.now, wall());
    let id = sim.ready_server("srv");
    assert_eq!(sim.tool_names(id).expect("served from the store"), ["t"]);
    expire_in(std::time::Duration::from_secs(365 * 86_400));
    let mut sim = Sim::new();
    sim.client.set_capability_store(store.clone(), sim.now, wall());
    let id = sim.ready_server("srv");
    assert_eq!(sim.tool_names(id), None, "not served from the store");
    assert_eq!(sim.sent_one(id)["method"], "tools/list");
}

/// The same for the pass after input (era verdicts kept in an installed store, answer
/// handlers asked), which walked every server and marked each for the round after every
/// round once a store or a handler was installed.
#[test]
fn the_pass_after_input_looks_only_at_the_servers_that_moved() {
    let mut sim = Sim::new();
    let (_a, b, _c) = (sim.ready_server("a"), sim.ready_server("b"), sim.ready_server("c"));
    sim.client.set_capability_store(super::capability_store::NoStore, sim.now, wall());
    sim.client
        .set_answer_handler(Box::new(|_: ServerId, _: ServerRequestKind, _: &str| Answer::Pass));
    sim.client.after_input(sim.now);
    next_round(&mut sim);

    call_answered(&mut sim, b);
    sim.client.after_input(sim.now);
    assert_eq!(next_round(&mut sim), [b.index]);
    sim.client.after_input(sim.now);
    assert!(next_round(&mut sim).is_empty(), "a pass that found nothing to do marks nothing");
}

/// A modern server whose era verdict is not to be kept (its `server/discover` result has no
/// `ttlMs`) is looked at once by the pass after input: it was marked for the pass again each
/// time, so every later input anywhere took it again and built its store key anew.
#[test]
fn a_verdict_not_to_be_kept_is_looked_at_once() {
    let mut sim = Sim::new();
    sim.client.set_capability_store(super::capability_store::NoStore, sim.now, wall());
    let a = sim.ready_server("a");
    call_answered(&mut sim, a);
    sim.client.after_input(sim.now);
    assert!(!sim.client.servers.has_pass_work(super::servers::Pass::AfterInput));
}

/// The core's own `handle_timeout` looks at the servers that moved, and its `poll_timeout`
/// still names every deadline: that of a server the last call looked at (left unfiled), and
/// that of one no call has looked at since (filed). The call times out on time.
#[test]
fn the_cores_deadline_is_kept_for_the_servers_its_tick_looked_at() {
    let mut sim = Sim::new();
    let (_a, b) = (sim.ready_server("a"), sim.ready_server("b"));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.client.poll_timeout(), None);
    let opts = CallOptions { timeout: Some(Duration::from_secs(5)), ..CallOptions::default() };
    let call = sim.client.call_tool_json(sim.now, b, "t", "{}", &opts).unwrap();
    sim.sent_one(b);
    let due = sim.now + Duration::from_secs(5);
    assert_eq!(sim.client.poll_timeout(), Some(due), "marked by the call");
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.client.poll_timeout(), Some(due), "looked at, left unfiled");
    assert!(next_round(&mut sim).is_empty(), "nothing moved since: nothing to look at");
    assert_eq!(sim.client.poll_timeout(), Some(due), "filed");
    sim.now = due;
    sim.client.handle_timeout(sim.now);
    let mut ended = 0;
    while let Some((_, event)) = sim.client.poll_event(sim.now) {
        if let Event::CallFailed { call: c, error, .. } = event {
            assert_eq!((c, error), (call, CallError::Local(LocalError::DeadlineExceeded)));
            ended += 1;
        }
    }
    assert_eq!(ended, 1, "the call ended at its deadline");
}

/// What a tick filed for a server stops counting once something reaches the server: a call
/// answered before its deadline no longer names that deadline, nor keeps the core busy, even
/// before the next tick (a loop asks `poll_timeout` and `is_idle` between its input and its
/// tick). The filed state used to stay until the next tick, so the core named a deadline no
/// server had.
#[test]
fn a_servers_filed_deadline_and_work_go_when_it_is_reached() {
    let mut sim = Sim::new();
    let (_a, b) = (sim.ready_server("a"), sim.ready_server("b"));
    sim.client.handle_timeout(sim.now);
    let opts = CallOptions { timeout: Some(Duration::from_secs(5)), ..CallOptions::default() };
    sim.client.call_tool_json(sim.now, b, "t", "{}", &opts).unwrap();
    let request = sim.sent_one(b);
    sim.client.handle_timeout(sim.now);
    assert!(next_round(&mut sim).is_empty(), "nothing moved since: filed");
    let due = sim.now + Duration::from_secs(5);
    assert_eq!(sim.client.poll_timeout(), Some(due), "filed with the call's deadline");
    assert!(!sim.client.is_idle(sim.now), "filed busy");
    sim.reply(b, &request, json!({"resultType": "complete", "content": []}));
    while sim.client.poll_event(sim.now).is_some() {}
    while sim.client.take_unflushed().is_some() {}
    assert_eq!(sim.client.poll_timeout(), None, "the answered call's deadline is no one's");
    assert!(sim.client.is_idle(sim.now), "answered, its event taken: nothing to do");
}

/// A roots list set with no boundary, whose root reads as inside a boundary set later but is a
/// symlink out of it, is dropped when that boundary comes: the engine checks words only, and
/// went on answering roots requests with the list.
#[test]
fn a_boundary_set_later_drops_roots_that_resolve_outside_it() {
    let base = std::env::temp_dir().join(format!("mcpoll-late-boundary-{}", std::process::id()));
    let (allowed, outside) = (base.join("allowed"), base.join("outside"));
    std::fs::create_dir_all(allowed.join("real")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let link = allowed.join("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let roots = |p: &std::path::Path| {
        let list = format!(r#"{{"roots":[{{"uri":"file://{}"}}]}}"#, p.display());
        serde_json::value::RawValue::from_string(list).unwrap()
    };
    let mut sim = Sim::new();
    let (inside, escaping) = (sim.ready_server("inside"), sim.ready_server("escaping"));
    let now = sim.now;
    sim.client.set_roots(now, inside, &roots(&allowed.join("real"))).unwrap();
    sim.client.set_roots(now, escaping, &roots(&link)).unwrap();
    for server in [inside, escaping] {
        let boundary = RootsBoundary::new([allowed.to_str().unwrap()]).unwrap();
        sim.client.set_roots_boundary(server, boundary).unwrap();
    }
    assert!(sim.client.engine(inside).unwrap().roots().is_some(), "a real directory stays");
    assert_eq!(sim.client.engine(escaping).unwrap().roots(), None, "the symlink out goes");
    let _ = std::fs::remove_dir_all(&base);
}

/// Which lane a principal's calls go to, on the core alone: one per principal and server
/// while it exists (also when asked with the lane's own handle), none for a server added
/// without a way to make one, for a principal not registered, or for a server the host closed.
/// A lane's records carry its server's name and its catalog the principal's tenant.
#[test]
fn a_lane_is_one_per_principal_and_server_and_refused_where_none_can_be() {
    let mut sim = Sim::new();
    let base = sim.base_server("srv", Config::default());
    sim.make_ready(base);
    sim.client.set_server_name(base, "weather");
    let alice = sim.client.add_principal(Principal::new("alice").tenant("acme")).unwrap();
    let lane = sim.open_lane(base, alice);
    let wall = std::time::SystemTime::now();
    for asked_on in [base, lane] {
        let again = sim.client.lane(sim.now, wall, asked_on, alice);
        assert!(matches!(again, Ok(lane::Lane::Open(l)) if l == lane), "{again:?}");
    }
    assert_eq!(sim.client.server_name(lane), Some("weather"));
    assert_eq!(sim.client.principal_of(lane), Some(alice));
    let tenant = sim.client.engine(lane).unwrap().config().cache_tenant.clone();
    assert_eq!(tenant.as_deref(), Some("acme"));
    // A lane that closed (its handshake refused, the host closed it) is started anew, as a
    // restart would start it: handed back, it failed every call of the principal for good
    // while the server was fine.
    let mut closed_sim = Sim::new();
    let closed_base = closed_sim.base_server("srv", Config::default());
    closed_sim.make_ready(closed_base);
    let ann = closed_sim.client.add_principal(Principal::new("ann")).unwrap();
    let closed = closed_sim.open_lane(closed_base, ann);
    closed_sim.client.engine_mut(closed).unwrap().close(closed_sim.now);
    // Not at once: a lane that can never work would cost a process per call.
    let soon = closed_sim.client.lane(closed_sim.now, wall, closed_base, ann);
    assert!(matches!(soon, Ok(lane::Lane::Open(l)) if l == closed), "{soon:?}");
    closed_sim.now += Config::default().restart.max_delay;
    let again = closed_sim.client.lane(closed_sim.now, wall, closed_base, ann);
    assert!(matches!(again, Ok(lane::Lane::Start(_))), "{again:?}");

    let bob = sim.client.add_principal(Principal::new("bob")).unwrap();
    sim.client.forget_principal(bob);
    let refused = sim.client.lane(sim.now, wall, base, bob);
    assert!(matches!(refused, Err(lane::LaneRefused::UnknownPrincipal)), "{refused:?}");
    let engine = Engine::new(Config::default(), sim.now).unwrap();
    let plain = sim.client.add_server(engine, "plain", TransportKind::Stdio);
    let refused = sim.client.lane(sim.now, wall, plain, alice);
    assert!(matches!(refused, Err(lane::LaneRefused::UnknownServer)), "{refused:?}");
    sim.client.engine_mut(base).unwrap().close(sim.now);
    let carol = sim.client.add_principal(Principal::new("carol")).unwrap();
    let refused = sim.client.lane(sim.now, wall, base, carol);
    assert!(matches!(refused, Err(lane::LaneRefused::Closed)), "{refused:?}");
}

/// A lane starts from its server's saved era verdict only when the server marked it public,
/// the principal is of the server's tenant, and the verdict is fresh; else it probes with its
/// own credentials (its `server/discover` may be answered for the principal alone).
#[test]
fn a_lane_starts_from_the_servers_saved_verdict_only_when_public_fresh_and_of_its_tenant() {
    let wall = std::time::SystemTime::now();
    let verdict = |scope: &str, expires: std::time::SystemTime| crate::config::SavedVerdict {
        version: crate::ProtocolVersion::MODERN,
        result: json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "ttlMs": 60_000, "cacheScope": scope})
        .to_string(),
        expires,
    };
    let fresh = wall + Duration::from_secs(60);
    let stale = wall - Duration::from_secs(1);
    let cases = [
        ("public", fresh, None, Some("acme"), true),
        ("public", fresh, Some("acme"), Some("acme"), true),
        ("public", fresh, Some("globex"), Some("acme"), false),
        ("public", fresh, Some("acme"), None, false),
        ("private", fresh, None, Some("acme"), false),
        ("public", stale, None, Some("acme"), false),
    ];
    for (scope, expires, tenant, server_tenant, inherited) in cases {
        let mut sim = Sim::new();
        let config = Config {
            saved_discover: Some(verdict(scope, expires)),
            cache_tenant: server_tenant.map(str::to_owned),
            ..Config::default()
        };
        let base = sim.base_server("srv", config);
        let mut who = Principal::new("alice");
        if let Some(t) = tenant {
            who = who.tenant(t);
        }
        let alice = sim.client.add_principal(who).unwrap();
        let start = match sim.client.lane(sim.now, wall, base, alice) {
            Ok(lane::Lane::Start(start)) => start,
            other => panic!("{other:?}"),
        };
        let kept = start.engine.config().saved_discover.is_some();
        let case = format!("{scope}, stale: {}, {tenant:?} on {server_tenant:?}", expires < wall);
        assert_eq!(kept, inherited, "{case}");
    }
}

/// A ready server whose tool `t` was listed with `ttlMs` 0: held for one use, not stored.
fn listed_for_one_use() -> (Sim, ServerId) {
    let mut sim = Sim::new();
    let id = sim.ready_server("srv");
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    let mut page = tools_page(&["t"]);
    page["ttlMs"] = json!(0);
    sim.reply(id, &list, page);
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["t"]);
    (sim, id)
}

/// A tool list the server said not to keep (`ttlMs` 0) is held for the answer it was listed
/// for, and a checked call or a policy reads it from there: a change notice makes it as stale
/// as a cached one. It was kept, and a tool announced as changed (now destructive, say) was
/// still judged by its old annotations until some later listing.
#[test]
fn a_change_notice_drops_a_listing_held_for_one_use() {
    let (mut sim, id) = listed_for_one_use();
    assert!(sim.client.listed_tool(sim.now, id, "t").is_some());
    sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    sim.client.handle_timeout(sim.now);
    assert!(sim.client.listed_tool(sim.now, id, "t").is_none(), "the old definition is gone");
}

/// A gap between listen streams may have hidden a change: the new stream makes a listing held
/// for one use as stale as the stored ones, as a change notice does.
#[test]
fn a_new_listen_stream_drops_a_listing_held_for_one_use() {
    let (mut sim, id) = listed_for_one_use();
    sim.client.watch_catalogs(sim.now, id).unwrap();
    sim.unflushed();
    let listen = sim.sent_one(id);
    sim.fail(id, &listen);
    sim.client.handle_timeout(sim.now);
    while sim.client.poll_event(sim.now).is_some() {}
    assert!(sim.client.listed_tool(sim.now, id, "t").is_some(), "no new stream yet");
    sim.now = sim.client.poll_timeout().expect("the re-listen");
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.sent_one(id)["method"], "subscriptions/listen");
    assert!(sim.client.listed_tool(sim.now, id, "t").is_none(), "stale with the gap");
}

/// A change notice the engine has read makes the cached catalog stale for the next read at
/// once, before any pass of the cache: `tool` and a listing no longer serve the old page.
#[test]
fn a_change_notice_is_seen_by_the_next_read_of_the_cache() {
    let mut sim = Sim::new();
    let id = sim.ready_server("srv");
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["add"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id).unwrap(), ["add"]);
    sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    assert!(sim.client.tool(sim.now, id, "add").is_none(), "stale at once");
    assert_eq!(sim.tool_names(id), None, "listed again");
    assert_eq!(sim.sent_one(id)["method"], "tools/list");
}

/// The roots request of an input round that the host's roots answer at once is not the
/// answer handlers' to see: offered to them, a handler refusing what it does not handle
/// failed the whole call (`InputRejected`), although its roots answer was there, and one
/// answering put its own list in place of the host's.
#[test]
fn roots_answered_from_the_hosts_list_are_not_offered_to_answer_handlers() {
    let mut sim = Sim::new();
    let answers =
        crate::ServerRequestKinds { elicitation_form: true, roots: true, ..Default::default() };
    let id = sim.ready_server_with("srv", Config { answers, ..Config::default() });
    let roots = r#"{"roots":[{"uri":"file:///tmp","name":"tmp"}]}"#;
    let roots = serde_json::value::RawValue::from_string(roots.to_owned()).unwrap();
    sim.client.set_roots(sim.now, id, &roots).unwrap();
    sim.unflushed();
    sim.sent(id);
    let handler = |_: ServerId, kind: ServerRequestKind, _: &str| match kind {
        ServerRequestKind::ElicitationForm => {
            Answer::Result(r#"{"action":"accept","content":{"ok":true}}"#.to_owned())
        }
        _ => Answer::Reject,
    };
    sim.client.set_answer_handler(Box::new(handler));

    sim.client.call_tool_json(sim.now, id, "t", "{}", &CallOptions::default()).unwrap();
    let first = sim.sent_one(id);
    let elicit = json!({"method": "elicitation/create", "params": {"message": "ok?",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}});
    // The roots request first: offered first, it was the one refused.
    let asked = json!({"a": {"method": "roots/list"}, "e": elicit});
    sim.reply(id, &first, json!({"resultType": "input_required", "inputRequests": asked}));
    sim.client.handle_timeout(sim.now);
    while let Some((_, event)) = sim.client.poll_event(sim.now) {
        assert!(!matches!(event, Event::CallFailed { .. }), "{event:?}");
    }
    let retry = sim.sent_one(id);
    let responses = &retry["params"]["inputResponses"];
    assert_eq!(responses["a"]["roots"][0]["uri"], "file:///tmp", "{retry}");
    assert_eq!(responses["e"]["action"], "accept", "{retry}");
}

/// The core remembers which catalogs it asked the persistent store for, so as not to read
/// the store at every need; a long-running host meets ever new contexts (principals,
/// tenants, grants, servers), and that memory stays within four times the cache's
/// `max_entries` however many it met.
#[test]
fn the_catalogs_asked_of_the_store_are_remembered_within_a_bound() {
    let store = MapStore::default();
    let mut sim = Sim::with_cache(CacheConfig { max_entries: 8, ..CacheConfig::default() });
    sim.client.set_capability_store(store.clone(), sim.now, wall());
    for i in 0..40 {
        let id = sim.ready_server(&format!("srv{i}"));
        assert_eq!(sim.tool_names(id), None, "nothing stored: listed");
        sim.client.remove_server(id);
        assert!(sim.client.cache.asked_len() <= 32, "{} after {i}", sim.client.cache.asked_len());
    }
}

/// A change notice reaches the catalogs of the grants the server context had before: a grant
/// that comes back (a narrower token, then the wider one again) was served, fresh, the
/// catalog the server had said changed, until its ttl ran out.
#[test]
fn a_change_notice_reaches_the_catalog_of_an_earlier_grant() {
    let mut sim = Sim::new();
    let id = sim.ready_server("scoped");
    sim.client.note_granted_scope(id, Some("read write"));
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["old"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id), Some(vec!["old".to_owned()]));
    sim.client.note_granted_scope(id, Some("read"));
    sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    sim.client.handle_timeout(sim.now);
    sim.client.note_granted_scope(id, Some("read write"));
    assert_eq!(sim.tool_names(id), None, "the change made this grant's catalog stale too");
    let list = sim.sent_one(id);
    assert_eq!(list["method"], "tools/list");
    sim.reply(id, &list, tools_page(&["new"]));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.tool_names(id), Some(vec!["new".to_owned()]));
}

/// With eager refresh, only the catalogs the host asked for are kept current: a change notice
/// for a kind it never read, or a listen stream opened again (which marks every kind), listed
/// it anyway, took a refresh slot for it, and reported its changes.
#[test]
fn an_eager_cache_lists_only_the_catalogs_the_host_asked_for() {
    let mut sim = Sim::with_cache(CacheConfig { eager_refresh: true, ..CacheConfig::default() });
    let (id, listen) = sim.watched("w");
    for _ in 0..2 {
        sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"}));
        sim.client.handle_timeout(sim.now);
    }
    let end = json!({"resultType": "complete",
        "_meta": {"io.modelcontextprotocol/subscriptionId": listen["id"]}});
    sim.reply(id, &listen, end);
    sim.client.handle_timeout(sim.now);
    sim.now += Duration::from_millis(200);
    sim.client.handle_timeout(sim.now);
    sim.client.handle_timeout(sim.now);
    let methods: Vec<Value> = sim.sent(id).iter().map(|f| f["method"].clone()).collect();
    assert_eq!(methods, [json!("subscriptions/listen")], "no listing nobody asked for");
    // A catalog asked for is refreshed by the next change.
    assert_eq!(sim.tool_names(id), None);
    let list = sim.sent_one(id);
    sim.reply(id, &list, tools_page(&["a"]));
    sim.client.handle_timeout(sim.now);
    sim.now += Duration::from_secs(2);
    sim.peer(id, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    sim.client.handle_timeout(sim.now);
    assert_eq!(sim.sent_one(id)["method"], "tools/list", "the eager refresh");
}
