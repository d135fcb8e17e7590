// cargo build --example snippets
//
//! The README's code fragments, each in a function of its own with what it assumes (a `host`,
//! a `server`, a token) as parameters, so that CI compiles every one of them exactly as the
//! README shows it: `tests/readme.rs` checks that each ```rust block of the README appears
//! verbatim in this file or in another example. They need servers that the README only names
//! (`mcp.example.com`), so `main` runs none of them; the Usage program is `examples/usage.rs`,
//! which the test does run.

use std::error::Error;
use std::time::Duration;

use mcpoll::{ClientEvent, Config, Event, Host, ServerId, StdioCommand};

// The store the capability-store fragment opens (its own example's `main` is not used here).
#[allow(dead_code)]
#[path = "file_capability_store.rs"]
mod file_capability_store;

/// The README's "HTTP servers are added the same way".
fn http_server(host: &mut Host, token: &str) -> Result<ServerId, Box<dyn Error>> {
    use mcpoll::HttpOptions;

    let server = host.add_http_server(
        HttpOptions::new("https://mcp.example.com/mcp").bearer(token),
        Config::default(),
    )?;
    Ok(server)
}

/// The README's "Embedding in a foreign loop" (in full: `examples/foreign_loop.rs`). The loop's
/// work with `server` and each event is elided there.
#[allow(unused_variables)]
fn embedding(cmd: StdioCommand) -> Result<(), Box<dyn Error>> {
    use mcpoll::mio::{Events, Poll};
    use std::time::Instant;

    const FRAME: Duration = Duration::from_millis(16); // the program's own period
    let mut poll = Poll::new()?; // the program's, with its own sources on tokens 0..1000
    let mut events = Events::with_capacity(256);
    let mut host = Host::embedded(poll.registry(), 1000..2000)?;
    let server = host.add_stdio_server(cmd, Config::default())?;
    loop {
        let now = Instant::now();
        let due = host.poll_timeout().map_or(FRAME, |t| t.saturating_duration_since(now));
        poll.poll(&mut events, Some(due.min(FRAME)))?;
        let now = Instant::now(); // one clock read per wake-up
        for event in events.iter() {
            if host.owns_token(event.token()) {
                host.handle_event(event, now)?;
            } // else: the program's own sources
        }
        if host.poll_timeout().is_some_and(|t| t <= now) {
            host.handle_timeout(now);
        }
        while let Some((server, event)) = host.poll_event() { /* ... */ }
    }
}

/// The README's "Server requests".
fn server_requests(host: &mut Host) -> Result<Config, Box<dyn Error>> {
    use mcpoll::{elicitation_defaults, ServerRequestKind, ServerRequestKinds};
    use serde_json::value::RawValue;

    let config = Config { answers: ServerRequestKinds::all(), ..Config::default() };
    // ... in the poll loop (events borrow the host, so collect first):
    let mut asked = Vec::new();
    while let Some((server, event)) = host.poll_event() {
        if let Event::ServerRequest { request, kind, params, .. } = event {
            asked.push((server, request, kind, params.to_owned()));
        }
    }
    for (server, request, kind, params) in asked {
        let answer = match kind {
            ServerRequestKind::ElicitationForm => elicitation_defaults(&params), // or ask the user
            ServerRequestKind::Roots => Some(r#"{"roots":[{"uri":"file:///work"}]}"#.to_owned()),
            _ => None,
        };
        let answer = answer.unwrap_or_else(|| r#"{"action":"decline"}"#.to_owned());
        host.answer(server, request, &RawValue::from_string(answer)?)?; // or host.reject(..)
    }
    Ok(config)
}

/// The README's "Server requests", answered by a handler.
fn answer_handlers(host: &mut Host, server: ServerId) -> Result<(), Box<dyn Error>> {
    use mcpoll::{elicitation_defaults, Answer, CallOptions, ServerRequestKind};

    host.set_answer_handler(Box::new(|_: ServerId, kind: ServerRequestKind, params: &str| {
        match (kind, elicitation_defaults(params)) {
            (ServerRequestKind::ElicitationForm, Some(form)) => Answer::Result(form),
            (ServerRequestKind::Roots, _) => {
                Answer::Result(r#"{"roots":[{"uri":"file:///w"}]}"#.into())
            }
            _ => Answer::Pass, // the event reaches the host's loop; or Answer::Reject
        }
    }));
    let result = host.call_tool_json_blocking(server, "ask", "{}", &CallOptions::default())?;
    println!("{}", result.json);
    Ok(())
}

/// The README's "Usage": the next call started from inside the drain.
fn drain(host: &mut Host) -> Result<(), Box<dyn Error>> {
    use mcpoll::CallOptions;

    host.poll(Some(Duration::ZERO))?;
    host.drain(|commands, server, event| {
        if let Event::CallDone { result, .. } = event {
            println!("{}", result.json());
            let next = r#"{"text":"next"}"#;
            commands.call_tool_json(server, "echo", next, &CallOptions::default()).ok();
        }
    });
    Ok(())
}

/// The README's "Throughput: two knobs".
fn throughput(host: &mut Host, url: &str) -> Result<ServerId, Box<dyn Error>> {
    use mcpoll::HttpOptions;

    let config = Config { max_in_flight: 64, ..Config::default() };
    let server = host.add_http_server(HttpOptions::new(url).max_connections(64), config)?;
    Ok(server)
}

/// The README's "Authorization": the builders, and a user's public client.
fn oauth_builders(
    host: &mut Host,
    url: &str,
    browser: Box<dyn mcpoll::oauth::Authorizer>,
) -> Result<ServerId, Box<dyn Error>> {
    use mcpoll::oauth::{OAuthConfig, PreRegistered};
    use mcpoll::HttpOptions;

    let oauth = OAuthConfig::authorization_code(url, "http://127.0.0.1:8765/cb")
        .pre_registered(PreRegistered::public("my-app")) // an id, no secret
        .client_name("My App") // for dynamic registration, when needed
        .authorization_timeout(Duration::from_secs(120));
    let opts = HttpOptions::new(url).oauth(oauth).authorizer(browser).max_connections(16);
    let server = host.add_http_server(opts, Config::default())?;
    Ok(server)
}

/// The README's "Roots".
fn roots(host: &mut Host, server: ServerId) -> Result<(), Box<dyn Error>> {
    use mcpoll::RootsBoundary;
    use serde_json::value::RawValue;

    host.set_roots_boundary(server, RootsBoundary::new(["/srv/work"])?)?;
    let roots = RawValue::from_string(r#"{"roots":[{"uri":"file:///srv/work/a"}]}"#.into())?;
    host.set_roots(server, &roots)?;
    Ok(())
}

/// The README's "Principals, tenants and tasks". The call's handle is elided there.
#[allow(unused_variables)]
fn principals() -> Result<(), Box<dyn Error>> {
    use mcpoll::{CallOptions, Config, Host, HttpOptions, Principal, TaskOptions};
    use std::time::Duration;

    let mut host = Host::new()?;
    let opts = HttpOptions::new("https://mcp.example/mcp");
    let server = host.add_http_server(opts, Config::default())?;
    let alice = host.add_principal(Principal::new("alice").tenant("acme").bearer("alice-token"))?;
    let lane = host.lane(server, alice)?;

    // A task: a deadline, a budget of calls, one cancel for all, an audit id on every call.
    let task = host.task(TaskOptions::new().deadline(Duration::from_secs(30)).budget(8))?;
    let args = r#"{"q":"weather"}"#;
    let call = host.in_task(task).call_tool_json(lane, "search", args, CallOptions::default())?;
    // ... later, the user gave up:
    host.cancel_task(task)?;
    Ok(())
}

/// The README's "Records and trace context".
fn records(host: &mut Host) {
    use mcpoll::CallRecord;

    host.set_record_sink(Box::new(|r: &CallRecord<'_>| {
        let method = r.method.as_str();
        println!("{:?} {method} {:?} {:?} {:?}", r.server, r.tool, r.network, r.error_name);
    }));
}

/// The README's "Authorization".
fn oauth(host: &mut Host, secret: &str) -> Result<ServerId, Box<dyn Error>> {
    use mcpoll::oauth::{OAuthConfig, PreRegistered};
    use mcpoll::HttpOptions;

    let url = "https://mcp.example.com/mcp";
    let client = PreRegistered::with_secret("agent-7", secret); // or ::with_key (private_key_jwt)
    let opts = HttpOptions::new(url).oauth(OAuthConfig::client_credentials(url, client));
    let server = host.add_http_server(opts, Config::default())?;
    Ok(server)
}

/// The README's "Authorization": workload identity and enterprise-managed authorization.
fn oauth_assertions(
    host: &mut Host,
    url: &str,
    id_token: String,
    secret: &str,
) -> Result<(ServerId, ServerId), Box<dyn Error>> {
    use mcpoll::oauth::{
        Assertion, AssertionRequest, IdentityProvider, OAuthConfig, PreRegistered,
    };
    use mcpoll::{AssertionFile, HttpOptions};

    // A workload: its platform's JWT, re-read when it nears expiry or is refused.
    let jwt = AssertionFile::new("/var/run/secrets/tokens/mcp-token");
    let wif = OAuthConfig::jwt_bearer(url, "inventory-agent", Box::new(jwt));
    let a = host.add_http_server(HttpOptions::new(url).oauth(wif), Config::default())?;

    // A user signed in at the company's identity provider: the ID token becomes an ID-JAG.
    let idp = IdentityProvider::new("https://idp.example.com/oauth2/token", "desktop-app");
    let tokens = move |_: &AssertionRequest<'_>| Ok(Assertion::new(id_token.clone()));
    let client = PreRegistered::with_secret("desktop-app-at-mcp", secret);
    let xaa = OAuthConfig::identity_assertion(url, client, idp, Box::new(tokens));
    let b = host.add_http_server(HttpOptions::new(url).oauth(xaa), Config::default())?;
    Ok((a, b))
}

/// The README's "Authorization": DPoP-bound tokens.
fn oauth_dpop(
    url: &str,
    secret: &str,
    key_pem: String,
) -> Result<mcpoll::oauth::OAuthConfig, Box<dyn Error>> {
    use mcpoll::oauth::{DpopKey, DpopMode, OAuthConfig, PreRegistered};

    let client = PreRegistered::with_secret("agent-7", secret);
    let oauth = OAuthConfig::client_credentials(url, client).dpop(DpopMode::Required);
    // Or with the host's own key, so that a stored token stays usable after a restart:
    let oauth = oauth.dpop_key(DpopKey::from_pkcs8_pem(&key_pem)?);
    Ok(oauth)
}

/// The README's "A capability store the host can persist".
fn capability_store(host: &mut Host) -> Result<(), Box<dyn Error>> {
    use file_capability_store::FileCapabilityStore;

    host.set_capability_store(FileCapabilityStore::open("catalogs")?);
    let server = host.add_stdio_server(StdioCommand::new("my-server"), Config::default())?;
    host.wait_ready(server, Duration::from_secs(10))?;
    let tools = host.tool_catalog_blocking(server, Duration::from_secs(10))?; // no probe, no tools/list when warm
    println!("{} tools", tools.len());
    Ok(())
}

/// The README's "Local authorization".
#[allow(unused_variables)]
fn local_authorization(
    host: &mut Host,
    server: ServerId,
    args: &serde_json::value::RawValue,
) -> Result<(), Box<dyn Error>> {
    use mcpoll::{AccessRequest, CallOptions, Decision};

    host.set_policy(|call: &AccessRequest<'_>| {
        if call.always_allowed || call.annotations.read_only == Some(true) {
            Decision::Allow
        } else if call.name == "drop_table" {
            Decision::deny("never on this host")
        } else {
            Decision::Ask
        }
    });
    let call = host.call_tool(server, "write_file", args, &CallOptions::default())?;
    // ... frames later, from the loop:
    while let Some((server, event)) = host.poll_event() {
        if let Event::Client(ClientEvent::AuthorizationAsked { call, name, annotations, .. }) =
            event
        {
            // show the operator `name` and `annotations.is_destructive()`, answer when they do:
            host.allow_call(server, call)?; // or host.deny_call(server, call, "operator said no")?
        }
    }
    let _ = call;
    Ok(())
}

/// The README's "Long-running tool calls (MCP tasks)". `saved` stands for the host's store.
fn tasks(host: &mut Host, server: ServerId) -> Result<(), Box<dyn Error>> {
    use mcpoll::{CallOptions, TaskMode};

    let mut saved: Vec<String> = Vec::new();
    let opts = CallOptions { task: TaskMode::Prefer { ttl: None }, ..CallOptions::default() };
    let call = host.call_tool_json(server, "build", r#"{"target":"all"}"#, &opts)?;
    while let Some((_, event)) = host.poll_event() {
        match event {
            // Keep the id (a file, a database): it outlives this process.
            Event::TaskCreated { task, .. } => saved.push(task.to_owned()),
            Event::TaskStatus { status, message, .. } => println!("{status:?} {message:?}"),
            Event::CallDone { call: c, result, .. } if c == call => println!("{}", result.json()),
            _ => {}
        }
    }
    // After a restart: reattach by id; the call ends with the task's result.
    for task in &saved {
        host.resume_task(server, task, &CallOptions::default())?;
    }
    Ok(())
}

fn main() {
    // Referenced, not run: each needs a server the README only names.
    let _ = (http_server, embedding, server_requests, roots, principals, records, oauth);
    let _ = (answer_handlers, drain, throughput, oauth_builders, oauth_assertions);
    let _ = (capability_store, local_authorization, oauth_dpop, tasks);
    println!("the README's fragments compile; tests/readme.rs runs examples/usage.rs");
}
