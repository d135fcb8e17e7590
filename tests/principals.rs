//! Principals, tenants and tasks against real SDK peers.
//!
//! The TypeScript SDK v2 peer over HTTP answers per bearer token (`tok-<name>` is principal
//! `<name>`, with `whoami`, a private tool `<name>_notes`, a private tool list and a public
//! prompt list); the Python SDK v2 peer runs over stdio. Together they show that a principal's
//! calls, tokens and cached catalogs stay its own, that one tenant's breaker and in-flight
//! limit do not touch another's, and that a task's cancel, budget and deadline hold across
//! servers.
//!
//! Needs the peers (`tests/peers/setup.sh`); `MCPOLL_SKIP_PEERS=1` skips it.

mod common;

use std::time::{Duration, Instant};

use std::sync::{Arc, OnceLock};

use common::counting::{allocs, Counting};
use common::mini::{mcp_answer, MiniServer, Request as MiniRequest, Response as MiniResponse};
use common::*;
use mcpoll::oauth::{OAuthConfig, PreRegistered};
use mcpoll::{
    BlockingError, BreakerPolicy, CallError, CallId, CallOptions, Config, CredentialSource,
    Credentials, Event, Host, HttpOptions, LaneTarget, LocalError, Principal, RequestError,
    ServerId, StdioCommand, TaskCallError, TaskError, TaskOptions,
};

const WAIT: Duration = common::PATIENCE;

#[global_allocator]
static GLOBAL: Counting = Counting;

fn ready(host: &mut Host, id: ServerId) {
    let state = host.wait_ready(id, WAIT).expect("ready");
    assert!(matches!(state, mcpoll::ServerState::Ready(..)), "{state:?}");
}

fn text(r: &mcpoll::OwnedResult) -> String {
    parse(r)["content"][0]["text"].as_str().expect("text content").to_owned()
}

fn tool_names(host: &mut Host, id: ServerId) -> Vec<String> {
    host.tool_catalog_blocking(id, WAIT).expect("tools").names().map(str::to_owned).collect()
}

#[test]
fn two_principals_never_see_each_others_calls_tokens_or_catalogs() {
    init_log();
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, "run-ts2-http.sh");
    let mut host = Host::new().unwrap();
    // The server's own context has a token of its own, which no lane may inherit.
    let server =
        host.add_http_server(HttpOptions::new(peer.url()).bearer("tok-host"), Config::default());
    let server = server.unwrap();
    let alice = Principal::new("alice").tenant("acme").scopes(["tools:read"]).bearer("tok-alice");
    let alice = host.add_principal(alice).unwrap();
    let bob = host.add_principal(Principal::new("bob").tenant("globex").bearer("tok-bob")).unwrap();
    assert!(host.add_principal(Principal::new("bob").tenant("globex")).is_err(), "same context");

    let la = host.lane(server, alice).unwrap();
    let lb = host.lane(server, bob).unwrap();
    assert!(la != lb && la != server && lb != server);
    assert_eq!(host.lane(server, alice).unwrap(), la, "created once, then reused");
    assert_eq!(host.lane(la, alice).unwrap(), la, "a lane answers for its server");
    assert_eq!(host.principal_of(la), Some(alice));
    assert_eq!(host.principal_of(server), None);
    for id in [server, la, lb] {
        ready(&mut host, id);
    }

    // Calls interleaved on the wire: each reply comes back on the lane that asked, and the
    // server saw each lane's own token.
    let args = raw("{}");
    for round in 0..5 {
        let calls: Vec<_> = [server, la, lb]
            .into_iter()
            .map(|id| (id, host.call_tool(id, "whoami", &args, &CallOptions::default()).unwrap()))
            .collect();
        let got: Vec<String> =
            calls.into_iter().map(|(id, c)| text(&host.wait(id, c).unwrap())).collect();
        assert_eq!(got, ["host", "alice", "bob"], "round {round}");
    }
    // A principal's own tool is not there for another.
    let err = host.call_tool_blocking(lb, "alice_notes", &args, &CallOptions::default());
    assert!(err.is_err() || host_says_unknown(&err), "bob reached alice's tool: {err:?}");

    // Catalogs: each private listing is its own principal's.
    let before = host.cache_stats();
    let a_tools = tool_names(&mut host, la);
    let b_tools = tool_names(&mut host, lb);
    let own_tools = tool_names(&mut host, server);
    assert!(a_tools.contains(&"alice_notes".into()) && !a_tools.contains(&"bob_notes".into()));
    assert!(b_tools.contains(&"bob_notes".into()) && !b_tools.contains(&"alice_notes".into()));
    assert!(own_tools.contains(&"host_notes".into()));
    assert!(!own_tools.iter().any(|n| n == "alice_notes" || n == "bob_notes"), "{own_tools:?}");
    let listed = host.cache_stats();
    assert_eq!(listed.refreshes - before.refreshes, 3, "one private listing per context");
    // Asked again, alice is answered from the cache, and still with her own catalog.
    assert_eq!(tool_names(&mut host, la), a_tools);
    let again = host.cache_stats();
    assert_eq!(again.refreshes, listed.refreshes, "a cache hit, nothing listed");
    assert_eq!(again.hits, listed.hits + 1);
    assert!(host.tool(la, "alice_notes").is_some());
    assert!(host.tool(lb, "alice_notes").is_none(), "a private definition crossed principals");
    assert!(host.tool(server, "bob_notes").is_none());

    // The prompt list is marked public, but alice and bob are of two tenants: each lists it
    // (within a tenant a public list is shared, as the unit tests of `src/client` show).
    let first = host
        .prompt_catalog_blocking(la, WAIT)
        .unwrap()
        .names()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let after_first = host.cache_stats();
    assert_eq!(after_first.refreshes, again.refreshes + 1);
    let own = host.prompt_catalog_blocking(lb, WAIT).unwrap();
    let own: Vec<String> = own.names().map(str::to_owned).collect();
    assert_eq!(own, first, "the same public list");
    let refreshes = host.cache_stats().refreshes;
    assert_eq!(refreshes, after_first.refreshes + 1, "listed again in the other tenant");

    let log = peer.stderr();
    for who in ["principal host", "principal alice", "principal bob"] {
        assert!(log.contains(who), "the peer never saw {who}: {log}");
    }
    assert!(!log.contains("refused a bearer token"), "{log}");

    // Removing a principal closes its lanes and leaves the others serving.
    host.remove_principal(alice);
    assert!(host.state(la).is_none());
    assert_eq!(
        text(&host.call_tool_blocking(lb, "whoami", &args, &CallOptions::default()).unwrap()),
        "bob"
    );
}

/// `call_tool_blocking` of a tool the server does not have: a JSON-RPC error or an `isError`
/// result, depending on the SDK.
fn host_says_unknown(r: &Result<mcpoll::OwnedResult, BlockingError>) -> bool {
    matches!(r, Ok(res) if res.is_error)
}

#[test]
fn one_tenants_breaker_and_limit_do_not_touch_another() {
    init_log();
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, "run-ts2-http.sh");
    let mut host = Host::new().unwrap();
    let config = Config {
        max_in_flight: 1,
        max_queued: 0,
        breaker: BreakerPolicy { failure_threshold: 1, cool_down: Duration::from_secs(60) },
        ..Config::default()
    };
    let server = host.add_http_server(HttpOptions::new(peer.url()), config).unwrap();
    let acme = host.add_principal(Principal::new("alice").tenant("acme").bearer("tok-alice"));
    let globex = host.add_principal(Principal::new("bob").tenant("globex").bearer("tok-bob"));
    let la = host.lane(server, acme.unwrap()).unwrap();
    let lb = host.lane(server, globex.unwrap()).unwrap();
    ready(&mut host, la);
    ready(&mut host, lb);

    // Acme fills its one in-flight slot with a call that will time out.
    let opts = CallOptions::timeout(Duration::from_millis(400));
    let slow = host.call_tool(la, "slow", &raw(r#"{"ms":3000}"#), &opts).unwrap();
    let echo = raw(r#"{"text":"hi"}"#);
    let refused = host.call_tool(la, "echo", &echo, &CallOptions::default());
    assert!(matches!(refused, Err(RequestError::Overloaded)), "{refused:?}");
    // Globex is not limited by it.
    let r = host.call_tool_blocking(lb, "echo", &echo, &CallOptions::default()).unwrap();
    assert_eq!(text(&r), "hi");
    assert_eq!(host.pending(la), Some(1), "acme's call is still running");

    // Acme's timeout opens acme's breaker for writes, and only acme's.
    match host.wait(la, slow) {
        Err(BlockingError::Call(CallError::Local(LocalError::DeadlineExceeded))) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    let note = raw(r#"{"note":"n"}"#);
    let refused = host.call_tool(la, "write_note", &note, &CallOptions::default());
    assert!(matches!(refused, Err(RequestError::BreakerOpen)), "{refused:?}");
    let r = host.call_tool_blocking(lb, "write_note", &note, &CallOptions::default()).unwrap();
    assert!(!r.is_error, "{}", r.json);
    let mut tripped = Vec::new();
    while let Some((id, e)) = host.poll_event() {
        if let Event::Breaker { state, .. } = e {
            tripped.push((id, state));
        }
    }
    assert_eq!(tripped, [(la, mcpoll::BreakerState::Open)]);
}

fn py_stdio(dir: &std::path::Path) -> StdioCommand {
    StdioCommand::new(dir.join("run-py-stdio.sh"))
}

#[test]
fn cancelling_a_task_ends_its_calls_on_every_server_at_once() {
    init_log();
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, "run-ts2-http.sh");
    let mut host = Host::new().unwrap();
    let http = host.add_http_server(HttpOptions::new(peer.url()), Config::default()).unwrap();
    let carol = host.add_principal(Principal::new("carol").bearer("tok-carol")).unwrap();
    let lane = host.lane(http, carol).unwrap();
    ready(&mut host, lane);
    let py = start(&mut host, py_stdio(&dir), Config::default());

    let task = host.task(TaskOptions::new().budget(3).audit_id(99)).unwrap();
    // Long enough that neither call can end on its own while the other server starts.
    let slow = raw(r#"{"ms":12000}"#);
    let opts = || CallOptions { progress: true, ..CallOptions::default() };
    let on_lane = host.in_task(task).call_tool(lane, "slow", &slow, opts()).unwrap();
    let on_py = host.in_task(task).call_tool(py, "slow", &slow, opts()).unwrap();
    assert_eq!(host.task_info(task).unwrap().calls, 2);
    assert_eq!(host.task_info(task).unwrap().audit_id, 99);
    // Both servers are at work: one progress report from each.
    let mut progressed = (false, false);
    poll_until(&mut host, WAIT, |h| {
        while let Some((id, e)) = h.poll_event() {
            if let Event::Progress { .. } = e {
                if id == lane {
                    progressed.0 = true;
                } else if id == py {
                    progressed.1 = true;
                }
            }
        }
        progressed == (true, true)
    });

    assert_eq!(host.cancel_task(task), Ok(2));
    // The waits ended in the cancel itself: the events are queued before any more I/O.
    let mut ended = Vec::new();
    while let Some((id, e)) = host.poll_event() {
        if let Event::CallFailed { call, error, .. } = e {
            ended.push((id, call, error));
        }
    }
    let cancelled = CallError::Local(LocalError::Cancelled);
    // Servers take turns in `poll_event`, so the order is the host's, not the cancel's.
    assert_eq!(ended.len(), 2, "{ended:?}");
    assert!(ended.contains(&(lane, on_lane, cancelled.clone())), "{ended:?}");
    assert!(ended.contains(&(py, on_py, cancelled)), "{ended:?}");
    let refused = host.in_task(task).call_tool(py, "echo", &raw(r#"{"text":"x"}"#), opts());
    assert!(matches!(refused, Err(TaskCallError::Task(TaskError::Cancelled))), "{refused:?}");

    // Both servers stopped the work (each was told its own way: their logs say so), took no
    // step after that, and no reply came late.
    let logs = |h: &Host| {
        [("ts2 over HTTP", peer.stderr()), ("py over stdio", h.stderr_tail(py).unwrap())]
    };
    poll_until(&mut host, common::PATIENCE, |h| {
        logs(h).iter().all(|(_, log)| log.contains("[slow] cancelled"))
    });
    for (label, log) in logs(&host) {
        assert!(log.contains("[slow] step 1/"), "{label}: {log}");
        let after = &log[log.find("[slow] cancelled").unwrap()..];
        assert!(!after.contains("[slow] step"), "{label} kept running the cancelled call:\n{log}");
    }
    assert_eq!(host.stats(lane).unwrap().late_responses, 0);
    assert_eq!(host.stats(py).unwrap().late_responses, 0);
    host.end_task(task).unwrap();
    assert!(host.task_info(task).is_err());
}

#[test]
fn a_task_past_its_budget_or_deadline_sends_nothing() {
    init_log();
    let Some(dir) = peers_dir() else { return };
    let mut host = Host::new().unwrap();
    let py = start(&mut host, py_stdio(&dir), Config::default());
    let echo = raw(r#"{"text":"once"}"#);

    let task = host.task(TaskOptions::new().budget(1)).unwrap();
    let call = host.in_task(task).call_tool(py, "echo", &echo, CallOptions::default()).unwrap();
    assert_eq!(text(&host.wait(py, call).unwrap()), "once");
    let sent = host.stats(py).unwrap().requests_sent;
    let refused = host.in_task(task).call_tool(py, "echo", &echo, CallOptions::default());
    assert!(
        matches!(refused, Err(TaskCallError::Task(TaskError::BudgetExhausted { budget: 1 }))),
        "{refused:?}"
    );
    host.poll(Some(Duration::from_millis(50))).unwrap();
    assert_eq!(host.stats(py).unwrap().requests_sent, sent, "nothing was sent");
    assert_eq!(host.pending(py), Some(0));

    // A call with no timeout of its own ends at the task's deadline.
    let task = host.task(TaskOptions::new().deadline(Duration::from_millis(500))).unwrap();
    let started = Instant::now();
    // The call would take 3 s: only the task's deadline can end it with DeadlineExceeded.
    let slow =
        host.in_task(task).call_tool(py, "slow", &raw(r#"{"ms":3000}"#), CallOptions::default());
    match host.wait(py, slow.unwrap()) {
        Err(BlockingError::Call(CallError::Local(LocalError::DeadlineExceeded))) => {}
        other => panic!("expected the task's deadline, got {other:?}"),
    }
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(450), "ended before the task's deadline: {took:?}");
    let sent = host.stats(py).unwrap().requests_sent;
    let late = host.in_task(task).call_tool(py, "echo", &echo, CallOptions::default());
    assert!(matches!(late, Err(TaskCallError::Task(TaskError::DeadlineExceeded))), "{late:?}");
    assert_eq!(host.stats(py).unwrap().requests_sent, sent);
}

/// Polls until `call` is done, reading events without keeping them (nothing is allocated for
/// the caller).
fn poll_done(host: &mut Host, call: CallId) {
    let deadline = Instant::now() + WAIT;
    loop {
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::CallDone { call: c, .. } if c == call => return,
                Event::CallFailed { call: c, error, .. } if c == call => panic!("{error}"),
                _ => {}
            }
        }
        assert!(Instant::now() < deadline, "call did not end");
        host.poll(Some(Duration::from_millis(20))).unwrap();
    }
}

#[test]
fn a_call_under_a_task_allocates_no_more_than_a_plain_call() {
    let mut host = Host::new().unwrap();
    let server = start(&mut host, demo_server(), Config::default());
    let task = host.task(TaskOptions::new().budget(64)).unwrap();
    let args = raw(r#"{"text":"x"}"#);
    // Warm up both paths (buffers reach their working size).
    for _ in 0..3 {
        let c = host.call_tool(server, "echo", &args, &CallOptions::default()).unwrap();
        poll_done(&mut host, c);
        let c = host.in_task(task).call_tool(server, "echo", &args, CallOptions::default());
        poll_done(&mut host, c.unwrap());
    }
    let (mut plain, mut tasked) = (0, 0);
    for _ in 0..20 {
        let opts = CallOptions::default();
        let before = allocs();
        let c = host.call_tool(server, "echo", &args, &opts).unwrap();
        plain += allocs() - before;
        poll_done(&mut host, c);
        let opts = CallOptions::default();
        let before = allocs();
        let c = host.in_task(task).call_tool(server, "echo", &args, opts).unwrap();
        tasked += allocs() - before;
        poll_done(&mut host, c);
    }
    eprintln!("allocations making 20 calls: plain {plain}, under a task {tasked}");
    assert_eq!(tasked, plain, "the task's bookkeeping allocated (plain {plain}, task {tasked})");
    assert_eq!(host.task_info(task).unwrap().calls, 23);
    // The counter does count: one boxed value is one allocation.
    let before = allocs();
    drop(std::hint::black_box(Box::new(1u8)));
    assert_eq!(allocs() - before, 1);
}

/// Environment credentials, one value per principal and server.
#[derive(Debug)]
struct EnvSecret(&'static str);

impl CredentialSource for EnvSecret {
    fn credentials(&mut self, target: &LaneTarget<'_>) -> Credentials {
        let value = format!("{}@{}", self.0, target.identity);
        Credentials::Env(vec![("MCPOLL_LANE_SECRET".into(), value)])
    }
}

fn environ(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

#[test]
fn a_stdio_lane_is_a_process_of_its_own_with_its_principals_environment_and_the_servers_name() {
    let mut host = Host::new().unwrap();
    // No longest restart delay: a closed lane is started anew at the next ask (the core's
    // test waits out the default one on simulated time).
    let restart =
        mcpoll::RestartPolicy { max_delay: Duration::ZERO, ..mcpoll::RestartPolicy::default() };
    let config = Config { cache_identity: Some("demo".into()), restart, ..Config::default() };
    // The server's own credential variable stays with it; its name in the records is the
    // lanes' too.
    let command = demo_server().env("MCPOLL_BASE_SECRET", "server-key");
    let server = start(&mut host, command, config);
    host.set_server_name(server, "demo-server");
    let dave = Principal::new("dave").credentials(Box::new(EnvSecret("dave-key")));
    let dave = host.add_principal(dave).unwrap();
    let erin =
        host.add_principal(Principal::new("erin").credentials(Box::new(EnvSecret("erin-key"))));
    let (ld, le) = (host.lane(server, dave).unwrap(), host.lane(server, erin.unwrap()).unwrap());
    for id in [ld, le] {
        ready(&mut host, id);
    }
    let pids = [server, ld, le].map(|id| host.pid(id).expect("running"));
    assert!(pids[0] != pids[1] && pids[1] != pids[2] && pids[0] != pids[2], "{pids:?}");
    assert!(!environ(pids[0]).contains("MCPOLL_LANE_SECRET"));
    assert!(environ(pids[1]).contains("MCPOLL_LANE_SECRET=dave-key@demo"));
    assert!(environ(pids[2]).contains("MCPOLL_LANE_SECRET=erin-key@demo"));
    assert!(environ(pids[0]).contains("MCPOLL_BASE_SECRET=server-key"));
    assert!(
        !environ(pids[1]).contains("MCPOLL_BASE_SECRET")
            && !environ(pids[2]).contains("MCPOLL_BASE_SECRET")
    );
    for lane in [ld, le] {
        assert_eq!(host.client().server_name(lane), Some("demo-server"));
    }
    assert_eq!(text(&call(&mut host, ld, "echo", r#"{"text":"d"}"#)), "d");
    // A lane that closed is replaced by a new one (a process of its own again), and the
    // closed one goes; it was handed back, failing every call of its principal.
    host.close_server(ld);
    let ld2 = host.lane(server, dave).unwrap();
    assert_ne!(ld2, ld);
    assert!(host.state(ld).is_none(), "the closed lane is removed");
    ready(&mut host, ld2);
    assert_eq!(text(&call(&mut host, ld2, "echo", r#"{"text":"d2"}"#)), "d2");
    assert!(environ(host.pid(ld2).expect("running")).contains("MCPOLL_LANE_SECRET=dave-key@demo"));
    let ld = ld2;
    // A closed server gets no new lane (which would start a process for it again).
    host.close_server(server);
    let fay = host.add_principal(Principal::new("fay")).unwrap();
    assert!(matches!(host.lane(server, fay), Err(mcpoll::LaneError::Closed)));
    // Removing the server takes its lanes (and their processes) with it.
    host.remove_server(server);
    assert!(host.state(ld).is_none() && host.state(le).is_none());
    assert!(matches!(host.lane(server, dave), Err(mcpoll::LaneError::UnknownServer)));
}

/// Client credentials of one principal, run by its lane's own OAuth flow.
#[derive(Debug)]
struct MachineIdentity {
    id: &'static str,
    secret: &'static str,
}

impl CredentialSource for MachineIdentity {
    fn credentials(&mut self, target: &LaneTarget<'_>) -> Credentials {
        let url = target.url.expect("an HTTP server").to_owned();
        let client = PreRegistered::with_secret(self.id, self.secret);
        Credentials::OAuth(Box::new(OAuthConfig::client_credentials(url, client)), None)
    }
}

/// An authorization server issuing `tok-<id>` to client `<id>` (alice and bob, HTTP Basic).
fn per_client_authorization_server() -> MiniServer {
    let issuer: Arc<OnceLock<String>> = Arc::default();
    let issuer2 = Arc::clone(&issuer);
    let server = MiniServer::start(None, move |req: &MiniRequest| {
        let issuer = issuer2.get().cloned().unwrap_or_default();
        if req.method == "GET" {
            return MiniResponse::json(serde_json::json!({
                "issuer": issuer, "token_endpoint": format!("{issuer}/token"),
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"]}));
        }
        let token = match req.header("authorization") {
            Some("Basic YWxpY2U6YS1zZWNyZXQ=") => "tok-alice",
            Some("Basic Ym9iOmItc2VjcmV0") => "tok-bob",
            _ => {
                let mut r = MiniResponse::json(serde_json::json!({"error": "invalid_client"}));
                r.status = 401;
                return r;
            }
        };
        MiniResponse::json(serde_json::json!({
            "access_token": token, "token_type": "Bearer", "expires_in": 3600}))
    });
    let _ = issuer.set(format!("http://127.0.0.1:{}", server.port));
    server
}

/// A protected MCP endpoint whose `echo` answers with the principal its token names.
fn per_token_mcp(as_url: String) -> MiniServer {
    let port: Arc<OnceLock<u16>> = Arc::default();
    let port2 = Arc::clone(&port);
    let server = MiniServer::start(None, move |req: &MiniRequest| {
        let base = format!("http://127.0.0.1:{}", port2.get().copied().unwrap_or_default());
        if req.method == "GET" {
            return MiniResponse::json(serde_json::json!({
                "resource": format!("{base}/mcp"), "authorization_servers": [as_url]}));
        }
        let who = match req.header("authorization") {
            Some("Bearer tok-alice") => "alice",
            Some("Bearer tok-bob") => "bob",
            _ => {
                let challenge = format!(
                    r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
                );
                return MiniResponse {
                    status: 401,
                    headers: vec![("WWW-Authenticate".into(), challenge)],
                    body: String::new(),
                };
            }
        };
        let msg = req.json();
        if msg["method"] == "tools/call" {
            return MiniResponse::json(serde_json::json!({"jsonrpc": "2.0", "id": msg["id"],
                "result": {"resultType": "complete", "content": [{"type": "text", "text": who}]}}));
        }
        mcp_answer(req)
    });
    let _ = port.set(server.port);
    server
}

#[test]
fn each_lane_runs_its_principals_own_oauth_flow() {
    let auth = per_client_authorization_server();
    let mcp = per_token_mcp(format!("http://127.0.0.1:{}", auth.port));
    let mut host = Host::new().unwrap();
    let server =
        host.add_http_server(HttpOptions::new(mcp.url("http", "127.0.0.1")), Config::default());
    let server = server.unwrap();
    let alice = Principal::new("alice")
        .credentials(Box::new(MachineIdentity { id: "alice", secret: "a-secret" }));
    let bob = Principal::new("bob")
        .credentials(Box::new(MachineIdentity { id: "bob", secret: "b-secret" }));
    let (alice, bob) = (host.add_principal(alice).unwrap(), host.add_principal(bob).unwrap());
    let la = host.lane(server, alice).unwrap();
    let lb = host.lane(server, bob).unwrap();
    for id in [la, lb] {
        ready(&mut host, id);
    }
    for _ in 0..3 {
        assert_eq!(text(&call(&mut host, la, "echo", r#"{"text":"x"}"#)), "alice");
        assert_eq!(text(&call(&mut host, lb, "echo", r#"{"text":"x"}"#)), "bob");
    }
    // One token request per principal: each lane keeps its own token.
    let token_posts: Vec<String> = auth
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .filter_map(|r| r.header("authorization").map(str::to_owned))
        .collect();
    assert_eq!(token_posts.len(), 2, "{token_posts:?}");
    assert!(token_posts.contains(&"Basic YWxpY2U6YS1zZWNyZXQ=".to_owned()));
    assert!(token_posts.contains(&"Basic Ym9iOmItc2VjcmV0".to_owned()));
}

/// A server started from a saved era verdict (`Config::saved_discover`, or the capability
/// store's) has it for its own context: its lanes probe for themselves, with their
/// principals' credentials, unless the verdict says it may be shared (`cacheScope` public).
/// They started from the server's, and were told its instructions and capabilities. A lane
/// of another tenant than the server's never does.
#[test]
fn a_lane_starts_from_the_servers_saved_verdict_only_when_it_is_public() {
    for scope in ["private", "public"] {
        let saved = mcpoll::SavedVerdict {
            version: mcpoll::ProtocolVersion::MODERN,
            result: format!(
                r#"{{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{{"tools":{{}}}},"instructions":"saved for the server","ttlMs":60000,"cacheScope":"{scope}"}}"#
            ),
            expires: std::time::SystemTime::now() + Duration::from_secs(60),
        };
        let config = Config { saved_discover: Some(saved), ..Config::default() };
        let mut host = Host::new().unwrap();
        let server = start(&mut host, demo_server(), config);
        let alice = host.add_principal(Principal::new("alice")).unwrap();
        // Of another tenant than the server's (none): a public word is not for it.
        let bob = host.add_principal(Principal::new("bob").tenant("globex")).unwrap();
        for (who, shares) in [(alice, scope == "public"), (bob, false)] {
            let lane = host.lane(server, who).unwrap();
            ready(&mut host, lane);
            let info = host.server_info(lane).unwrap_or_default().to_owned();
            let inherited = info.contains("saved for the server");
            assert_eq!(inherited, shares, "{scope}: {info}");
        }
    }
}

/// A principal's lane serves its server's files: it has the server's roots and boundary when
/// it opens, and follows when the server's change (else a roots request on the lane went to
/// the host, and a host answer for it was checked against no boundary). Against the demo
/// server.
#[test]
fn a_lane_keeps_its_servers_roots_and_boundary() {
    let base = std::env::temp_dir().join(format!("mcpoll-lane-roots-{}", std::process::id()));
    let (a, b) = (base.join("a"), base.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let mut host = Host::new().unwrap();
    let server = start(&mut host, demo_server(), Config::default());
    host.set_root_dirs(server, &[&a]).unwrap();
    let alice = host.add_principal(Principal::new("alice")).unwrap();
    let lane = host.lane(server, alice).unwrap();
    let dirs = |host: &Host, id: ServerId| -> Vec<String> {
        let engine = host.client().engine(id).expect("open");
        engine.roots_boundary().dirs().map(str::to_owned).collect()
    };
    assert_eq!(dirs(&host, lane), [a.to_str().unwrap()]);
    host.set_root_dirs(server, &[&a, &b]).unwrap();
    assert_eq!(dirs(&host, lane), dirs(&host, server));
    assert_eq!(dirs(&host, lane).len(), 2);
    // Offering no directory withdraws the roots, not the boundary: an empty boundary is none,
    // and a later roots list naming /etc passed its check.
    host.set_root_dirs(server, &[] as &[&std::path::Path]).unwrap();
    assert_eq!(dirs(&host, server).len(), 2, "the boundary stays");
    let etc = serde_json::value::RawValue::from_string(
        r#"{"roots":[{"uri":"file:///etc","name":"etc"}]}"#.to_owned(),
    )
    .unwrap();
    assert!(host.set_roots(server, &etc).is_err(), "outside the boundary");
    let _ = std::fs::remove_dir_all(&base);
}
