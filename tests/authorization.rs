//! Local authorization against the Python SDK peer over stdio: a policy that asks before
//! destructive tools (read from the cached definitions' annotations), the host answering
//! allow and deny later, a held call cancelled or past its deadline, and an `mcpServers` file
//! whose `disabledTools` are refused and hidden and whose `alwaysAllow` tools are never asked
//! about.
//!
//! Skipped loudly without the peers (`tests/peers/setup.sh`); `MCPOLL_REQUIRE_PEERS=1` fails.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::*;
use mcpoll::{
    AccessRequest, BlockingError, CallError, CallId, CallOptions, ClientEvent, Config, Confirm,
    Decision, DefaultPolicy, Event, Host, LocalError, ServerId, StdioCommand, ToolAnnotations,
};

const WAIT: Duration = Duration::from_secs(30);

/// A probe timeout long enough for a Python peer starting on a loaded machine (see below).
fn patient() -> Config {
    Config { probe_timeout: Duration::from_secs(20), ..Config::default() }
}

fn py_peer() -> Option<StdioCommand> {
    // The peer caches nothing unless told to (the SDK's default ttlMs is 0); the policy reads
    // the annotations from the cache.
    peers_dir()
        .map(|dir| StdioCommand::new(dir.join("run-py-stdio.sh")).env("LAB_TOOLS_TTL_MS", "600000"))
}

/// What the record sink kept of one tool call.
#[derive(Debug)]
struct Record {
    error: Option<String>,
    held: Duration,
}

/// Polls until the host is asked about a call; other events are returned beside it.
#[track_caller]
fn next_ask(host: &mut Host) -> (ServerId, CallId, String, ToolAnnotations) {
    let deadline = Instant::now() + WAIT;
    loop {
        while let Some((server, e)) = host.poll_event() {
            if let Event::Client(ClientEvent::AuthorizationAsked {
                call,
                name,
                annotations,
                method,
            }) = e
            {
                assert_eq!(method, mcpoll::Method::ToolsCall);
                return (server, call, name.to_owned(), annotations);
            }
        }
        assert!(Instant::now() < deadline, "no AuthorizationAsked event");
        host.poll(Some(Duration::from_millis(20))).unwrap();
    }
}

/// The terminal event of `call`, as `done <json>` or the error (bounded wait).
#[track_caller]
fn end_of(host: &mut Host, call: CallId) -> Result<String, CallError> {
    let deadline = Instant::now() + WAIT;
    loop {
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::CallDone { call: c, result, .. } if c == call => {
                    return Ok(result.json().to_owned())
                }
                Event::CallFailed { call: c, error, .. } if c == call => return Err(error),
                _ => {}
            }
        }
        assert!(Instant::now() < deadline, "call did not end");
        host.poll(Some(Duration::from_millis(20))).unwrap();
    }
}

/// One test, so the two scenarios never start Python peers at the same time: on a loaded
/// machine a Python peer can take longer to start than the era probe waits, and the
/// `initialize` fallback is then refused by a server that took the late probe.
#[test]
fn local_authorization_against_the_py_sdk_peer() {
    ask_then_allow_deny_cancel_and_deadline();
    an_mcp_servers_file_disables_tools_and_always_allows_others();
}

fn ask_then_allow_deny_cancel_and_deadline() {
    let Some(cmd) = py_peer() else { return };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd, patient());
    let names: Vec<String> =
        host.tool_catalog_blocking(id, WAIT).unwrap().names().map(str::to_owned).collect();
    assert!(names.iter().any(|n| n == "slow"), "{names:?}");

    let records: Rc<RefCell<Vec<Record>>> = Rc::default();
    let sink = records.clone();
    host.set_record_sink(Box::new(move |r: &mcpoll::CallRecord<'_>| {
        if r.method == mcpoll::Method::ToolsCall {
            let error = r.error_name.map(str::to_owned);
            sink.borrow_mut().push(Record { error, held: r.authorization_wait });
        }
    }));
    let seen: Rc<RefCell<Vec<(String, bool)>>> = Rc::default();
    let log = seen.clone();
    let mut ask_destructive = DefaultPolicy::new(Confirm::Destructive);
    host.set_policy(move |req: &AccessRequest<'_>| {
        log.borrow_mut().push((req.name.to_owned(), req.annotations.known));
        mcpoll::Policy::decide(&mut ask_destructive, req)
    });

    // Read-only (echo says readOnlyHint): allowed without asking.
    let out = call(&mut host, id, "echo", r#"{"text":"hi"}"#);
    assert!(out.json.contains("hi"), "{}", out.json);

    // `slow` has no hints: destructive by the spec's defaults, so the host is asked.
    let args = raw(r#"{"ms":10}"#);
    let call1 = host.call_tool(id, "slow", &args, &CallOptions::default()).unwrap();
    let (server, asked, name, annotations) = next_ask(&mut host);
    assert_eq!((server, asked, name.as_str()), (id, call1, "slow"));
    assert!(annotations.known && annotations.is_destructive(), "{annotations:?}");
    assert_eq!(host.pending(id), Some(1), "held in the engine");
    host.allow_call(id, call1).unwrap();
    assert!(end_of(&mut host, call1).is_ok());

    // Ask, then deny: a typed local error with the reason; nothing reached the server.
    let sent_before = host.stats(id).unwrap().requests_sent;
    let call2 = host.call_tool(id, "slow", &args, &CallOptions::default()).unwrap();
    assert_eq!(next_ask(&mut host).1, call2);
    host.deny_call(id, call2, "the operator said no").unwrap();
    let denied = CallError::Local(LocalError::AuthorizationDenied("the operator said no".into()));
    assert_eq!(end_of(&mut host, call2), Err(denied));
    assert_eq!(host.stats(id).unwrap().requests_sent, sent_before, "nothing was sent");
    assert_eq!(host.allow_call(id, call2), Err(mcpoll::AuthorizeError::NotHeld));

    // An ask waiting for the host ends a poll's wait at once, as any queued event does.
    let long = CallOptions::timeout(Duration::from_secs(120));
    let call5 = host.call_tool(id, "slow", &args, &long).unwrap();
    let waited = Instant::now();
    host.poll(None).unwrap();
    assert!(waited.elapsed() < Duration::from_secs(60), "poll(None) waited for its deadline");
    assert_eq!(next_ask(&mut host).1, call5);
    host.deny_call(id, call5, "the operator said no").unwrap();
    assert!(end_of(&mut host, call5).is_err());

    // Ask, then cancel.
    let call3 = host.call_tool(id, "slow", &args, &CallOptions::default()).unwrap();
    assert_eq!(next_ask(&mut host).1, call3);
    host.cancel(id, call3).unwrap();
    assert_eq!(end_of(&mut host, call3), Err(CallError::Local(LocalError::Cancelled)));

    // Ask, and let the deadline pass: the call ends on its own, still unsent.
    let short = CallOptions::timeout(Duration::from_millis(200));
    let call4 = host.call_tool(id, "slow", &args, &short).unwrap();
    assert_eq!(end_of(&mut host, call4), Err(CallError::Local(LocalError::DeadlineExceeded)));
    assert_eq!(host.stats(id).unwrap().requests_sent, sent_before, "still nothing sent");
    // Its ask was dropped with it: no event names a call that ended.
    host.poll(Some(Duration::ZERO)).unwrap();
    while let Some((_, e)) = host.poll_event() {
        assert!(
            !matches!(e, Event::Client(ClientEvent::AuthorizationAsked { .. })),
            "stale ask {e:?}"
        );
    }

    let stats = host.stats(id).unwrap();
    assert_eq!(stats.failures.authorization_denied, 2);
    let records = records.borrow();
    let names: Vec<Option<&str>> = records.iter().map(|r| r.error.as_deref()).collect();
    assert_eq!(
        names,
        [
            None,
            None,
            Some("authorization_denied"),
            Some("authorization_denied"),
            Some("cancelled"),
            Some("deadline_exceeded")
        ]
    );
    assert!(records[5].held >= Duration::from_millis(200), "held until its deadline: {records:?}");
    assert!(seen.borrow().iter().all(|(_, known)| *known), "{:?}", seen.borrow());

    // The same gate for arguments given as text, and for a call without arguments (they were
    // sent unasked before).
    drop(records);
    let text = host.call_tool_json(id, "slow", r#"{"ms":10}"#, &CallOptions::default()).unwrap();
    assert_eq!(next_ask(&mut host).1, text, "call_tool_json is asked about");
    host.deny_call(id, text, "text too").unwrap();
    assert!(end_of(&mut host, text).is_err());
    let bare = host.call_tool_no_args(id, "slow", &CallOptions::default()).unwrap();
    assert_eq!(next_ask(&mut host).1, bare, "call_tool_no_args is asked about");
    host.deny_call(id, bare, "none either").unwrap();
    assert!(end_of(&mut host, bare).is_err());
    assert_eq!(host.stats(id).unwrap().requests_sent, sent_before, "still nothing sent");
}

fn an_mcp_servers_file_disables_tools_and_always_allows_others() {
    let Some(dir) = peers_dir() else { return };
    let tmp = std::env::temp_dir().join(format!("mcpoll-authz-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let file = tmp.join("mcp.json");
    let config = serde_json::json!({"mcpServers": {"lab": {
        "command": dir.join("run-py-stdio.sh"),
        "env": {"LAB_TOOLS_TTL_MS": "600000"},
        "disabledTools": ["write_note"],
        "alwaysAllow": ["slow"],
        "autoApprove": ["add"],
        "mcpoll": {"probeTimeoutMs": 20000}
    }}});
    std::fs::write(&file, config.to_string()).unwrap();
    let (mut host, names) = Host::from_config(&file).unwrap();
    std::fs::remove_dir_all(&tmp).ok();
    let id = names.get("lab").unwrap();
    host.wait_ready(id, WAIT).unwrap();

    let view = host.tool_catalog_blocking(id, WAIT).unwrap();
    let tools: Vec<&str> = view.names().collect();
    assert!(tools.contains(&"slow") && !tools.contains(&"write_note"), "{tools:?}");
    assert!(view.definition("write_note").is_none());
    assert!(host.tool(id, "write_note").is_none());
    let found = host.search_tools(id, "write note", 10);
    assert!(found.iter().all(|(n, _)| *n != "write_note"), "{found:?}");

    // Refused locally, with no policy installed at all.
    let args = raw(r#"{"note":"x"}"#);
    match host.call_tool_blocking(id, "write_note", &args, &CallOptions::default()) {
        Err(BlockingError::Call(CallError::Local(LocalError::AuthorizationDenied(why)))) => {
            assert!(why.contains("disabled"), "{why}")
        }
        other => panic!("expected a local refusal, got {other:?}"),
    }

    // The default policy asking before every call still lets `alwaysAllow` and `autoApprove`
    // tools through unasked.
    host.set_policy(DefaultPolicy::new(Confirm::Always));
    call(&mut host, id, "slow", r#"{"ms":1}"#);
    call(&mut host, id, "add", r#"{"a":1,"b":2}"#);
    let echo =
        host.call_tool(id, "echo", &raw(r#"{"text":"x"}"#), &CallOptions::default()).unwrap();
    let (_, asked, name, annotations) = next_ask(&mut host);
    assert_eq!((asked, name.as_str()), (echo, "echo"));
    assert_eq!(annotations.read_only, Some(true));
    host.deny_call(id, echo, "no").unwrap();
    assert_eq!(host.stats(id).unwrap().failures.authorization_denied, 2);

    // A task's call carries its task; a policy that covers resources/read is asked about reads.
    struct Reads(Rc<RefCell<Vec<(String, bool)>>>);
    impl mcpoll::Policy for Reads {
        fn decide(&mut self, req: &AccessRequest<'_>) -> Decision {
            self.0.borrow_mut().push((req.name.to_owned(), req.task.is_some()));
            match req.method {
                mcpoll::Method::ResourcesRead => Decision::deny("no reads"),
                _ => Decision::Allow,
            }
        }
        fn covers(&self, method: mcpoll::Method) -> bool {
            matches!(method, mcpoll::Method::ToolsCall | mcpoll::Method::ResourcesRead)
        }
    }
    let asked: Rc<RefCell<Vec<(String, bool)>>> = Rc::default();
    host.set_policy(Reads(asked.clone()));
    let task = host.task(mcpoll::TaskOptions::new()).unwrap();
    let c =
        host.in_task(task).call_tool(id, "echo", &raw(r#"{"text":"t"}"#), CallOptions::default());
    assert!(end_of(&mut host, c.unwrap()).is_ok());
    let read = host.read_resource(id, "lab://readme", &CallOptions::default()).unwrap();
    let no_reads = CallError::Local(LocalError::AuthorizationDenied("no reads".into()));
    assert_eq!(end_of(&mut host, read), Err(no_reads));
    assert_eq!(*asked.borrow(), [("echo".to_owned(), true), ("lab://readme".to_owned(), false)]);

    // A server policy decides before the host's; a denial needs no ask.
    host.set_server_policy(id, |_: &AccessRequest<'_>| Decision::deny("read-only hours"));
    match host.call_tool_blocking(id, "slow", &raw(r#"{"ms":1}"#), &CallOptions::default()) {
        Err(BlockingError::Call(CallError::Local(LocalError::AuthorizationDenied(why)))) => {
            assert_eq!(&*why, "read-only hours")
        }
        other => panic!("expected a local refusal, got {other:?}"),
    }
    // That server policy is a closure, which covers tool calls only: reads still go to the
    // host's policy, which covers them (the closure's not covering them let every read pass).
    let read = host.read_resource(id, "lab://readme", &CallOptions::default()).unwrap();
    let no_reads = CallError::Local(LocalError::AuthorizationDenied("no reads".into()));
    assert_eq!(end_of(&mut host, read), Err(no_reads));
}

/// The most specific policy decides: a principal's over its server's over the host's; the
/// server's disabled tools hold on its principals' lanes too. Against the demo server (its
/// lanes are processes of their own).
#[test]
fn the_principal_policy_decides_for_its_lanes_and_disabled_tools_hold_there_too() {
    let mut host = Host::new().unwrap();
    let server = start(&mut host, demo_server(), Config::default());
    let alice = host.add_principal(mcpoll::Principal::new("alice").tenant("acme")).unwrap();
    let lane = host.lane(server, alice).unwrap();
    host.wait_ready(lane, WAIT).unwrap();
    let seen: Rc<RefCell<Vec<String>>> = Rc::default();
    let log = seen.clone();
    host.set_policy(|_: &AccessRequest<'_>| Decision::deny("host says no"));
    host.set_server_policy(server, |_: &AccessRequest<'_>| Decision::Allow);
    host.set_principal_policy(alice, move |req: &AccessRequest<'_>| {
        let who = (req.principal_name, req.tenant, req.server_name.is_some());
        log.borrow_mut().push(format!("{who:?} {}", req.name));
        Decision::deny("not for alice")
    });
    host.disable_tools(server, ["slow"]);

    call(&mut host, server, "echo", r#"{"text":"x"}"#);
    let denied = |why: &str| CallError::Local(LocalError::AuthorizationDenied(why.into()));
    assert_eq!(call_err(&mut host, lane, "echo", r#"{"text":"x"}"#), denied("not for alice"));
    let disabled = denied("the tool is disabled by configuration");
    assert_eq!(call_err(&mut host, lane, "slow", r#"{"ms":1}"#), disabled);
    assert_eq!(call_err(&mut host, server, "slow", r#"{"ms":1}"#), disabled);
    assert_eq!(*seen.borrow(), [r#"(Some("alice"), Some("acme"), true) echo"#]);

    // Without the server's and principal's own, the host's decides.
    host.clear_policies();
    host.set_policy(|_: &AccessRequest<'_>| Decision::deny("host says no"));
    assert_eq!(call_err(&mut host, lane, "echo", r#"{"text":"x"}"#), denied("host says no"));
}

/// A principal without a tenant calls in its server's (`Config::cache_tenant`), as its
/// lane's cache key says: a policy asked about its calls is told that tenant, not none.
#[test]
fn a_policy_sees_the_servers_tenant_for_a_principal_without_one() {
    let mut host = Host::new().unwrap();
    let config = Config { cache_tenant: Some("acme".into()), ..Config::default() };
    let server = start(&mut host, demo_server(), config);
    let bob = host.add_principal(mcpoll::Principal::new("bob")).unwrap();
    let lane = host.lane(server, bob).unwrap();
    host.wait_ready(lane, WAIT).unwrap();
    let seen: Rc<RefCell<Vec<Option<String>>>> = Rc::default();
    let log = seen.clone();
    host.set_policy(move |req: &AccessRequest<'_>| {
        log.borrow_mut().push(req.tenant.map(str::to_owned));
        Decision::Allow
    });
    call(&mut host, lane, "echo", r#"{"text":"x"}"#);
    call(&mut host, server, "echo", r#"{"text":"x"}"#);
    assert_eq!(*seen.borrow(), [Some("acme".to_owned()), Some("acme".to_owned())]);
}

/// A task's call with its arguments as JSON text is put to the policy like every other call
/// (`TaskScope::call_tool_json` used to send it without asking). Against the demo server.
#[test]
fn a_task_call_with_json_arguments_is_refused_by_the_policy() {
    let mut host = Host::new().unwrap();
    let server = start(&mut host, demo_server(), Config::default());
    host.set_policy(|_: &AccessRequest<'_>| Decision::deny("no tools in tasks"));
    let task = host.task(mcpoll::TaskOptions::new()).unwrap();
    let call = host
        .in_task(task)
        .call_tool_json(server, "echo", r#"{"text":"t"}"#, CallOptions::default())
        .unwrap();
    let denied = CallError::Local(LocalError::AuthorizationDenied("no tools in tasks".into()));
    assert_eq!(end_of(&mut host, call), Err(denied));
}
