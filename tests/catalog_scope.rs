//! Whose catalog a context is served. The capability cache keys on the scope the authorization
//! server granted, not on what the host declared: after a step-up (403 `insufficient_scope`)
//! brings a token with a wider scope, the tool catalog is listed anew instead of served from the
//! narrower grant's entry. And a listing marked public, shared by the principals of a server,
//! is searchable in each of them. Loopback servers from `tests/common/mini.rs`, bound to
//! 127.0.0.1.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::mini::{client_credentials_as, mcp_answer, protected_mcp_server};
use common::mini::{MiniServer, Request, Response};
use common::raw;
use mcpoll::oauth::{OAuthConfig, PreRegistered};
use mcpoll::{CallOptions, Config, Host, HttpOptions, Principal, ServerState};

const WAIT: Duration = common::PATIENCE;

fn tool(name: &str) -> serde_json::Value {
    serde_json::json!({"name": name, "inputSchema": {"type": "object"}})
}

/// A server whose tools depend on the token's scope: `t1` (scope `tools:read`) sees `echo`;
/// `t2` (`tools:read tools:write`) also sees and may call `put`. The authorization server hands
/// out `t1` first and `t2` after. Listings are cacheable for ten minutes.
fn servers(lists: Arc<AtomicUsize>) -> (MiniServer, MiniServer) {
    let (auth, as_url) = client_credentials_as("127.0.0.1", |n| {
        let (token, scope) =
            if n == 0 { ("t1", "tools:read") } else { ("t2", "tools:read tools:write") };
        serde_json::json!({
            "access_token": token, "token_type": "Bearer", "expires_in": 3600, "scope": scope})
    });
    let mcp = protected_mcp_server(as_url, move |req| {
        let wide = match req.header("authorization") {
            Some("Bearer t1") => false,
            Some("Bearer t2") => true,
            _ => return None,
        };
        let msg = req.json();
        let id = msg["id"].clone();
        let result = match (msg["method"].as_str(), msg["params"]["name"].as_str()) {
            (Some("tools/list"), _) => {
                lists.fetch_add(1, Ordering::SeqCst);
                let tools = if wide { vec![tool("echo"), tool("put")] } else { vec![tool("echo")] };
                serde_json::json!({"resultType": "complete", "tools": tools,
                    "ttlMs": 600_000, "cacheScope": "private"})
            }
            (Some("tools/call"), Some("put")) if !wide => {
                let challenge =
                    r#"Bearer error="insufficient_scope", scope="tools:read tools:write""#;
                let headers = vec![("WWW-Authenticate".into(), challenge.into())];
                return Some(Response { status: 403, headers, body: String::new() });
            }
            (Some("tools/call"), Some("put")) => serde_json::json!({
                "resultType": "complete", "content": [{"type": "text", "text": "stored"}]}),
            _ => return Some(mcp_answer(req)),
        };
        Some(Response::json(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result})))
    });
    (auth, mcp)
}

#[test]
fn a_wider_grant_after_step_up_is_listed_anew_not_served_from_the_narrower_one() {
    let lists = Arc::new(AtomicUsize::new(0));
    let (_auth, mcp) = servers(Arc::clone(&lists));
    let url = mcp.url("http", "127.0.0.1");
    let oauth = OAuthConfig::client_credentials(url.clone(), PreRegistered::with_secret("id", "s"));
    let mut host = Host::new().unwrap();
    let id = host.add_http_server(HttpOptions::new(url).oauth(oauth), Config::default()).unwrap();
    assert!(matches!(host.wait_ready(id, WAIT).unwrap(), ServerState::Ready(..)));

    let names = |host: &mut Host| -> Vec<String> {
        let view = host.tool_catalog_blocking(id, WAIT).expect("tools");
        view.names().map(str::to_owned).collect()
    };
    assert_eq!(names(&mut host), ["echo"]);
    assert_eq!(names(&mut host), ["echo"], "the narrow grant's catalog is cached");
    assert_eq!(lists.load(Ordering::SeqCst), 1);

    // The step-up: `put` is refused for want of scope, a wider token comes, the call goes.
    let out = host.call_tool_blocking(id, "put", &raw("{}"), &CallOptions::default());
    assert!(out.expect("put after step-up").json.contains("stored"));

    assert_eq!(names(&mut host), ["echo", "put"], "the wider grant lists anew");
    assert_eq!(lists.load(Ordering::SeqCst), 2);
    assert_eq!(names(&mut host), ["echo", "put"], "and is cached under its own key");
    assert_eq!(lists.load(Ordering::SeqCst), 2);
}

/// A principal served a public tool list that another principal's refresh stored can search
/// it: the lane takes the stored catalog in before serving it.
#[test]
fn a_public_tool_list_listed_by_one_principal_is_searchable_by_another() {
    let lists = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&lists);
    let mcp = MiniServer::start(None, move |req: &Request| {
        let msg = req.json();
        if msg["method"] != "tools/list" {
            return mcp_answer(req);
        }
        counted.fetch_add(1, Ordering::SeqCst);
        let weather = serde_json::json!({"name": "forecast", "description": "weather forecast",
            "inputSchema": {"type": "object"}});
        let result = serde_json::json!({"resultType": "complete",
            "tools": [tool("echo"), weather], "ttlMs": 600_000, "cacheScope": "public"});
        Response::json(serde_json::json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}))
    });
    let mut host = Host::new().unwrap();
    let options = HttpOptions::new(mcp.url("http", "127.0.0.1"));
    let server = host.add_http_server(options, Config::default()).unwrap();
    let alice = host.add_principal(Principal::new("alice").bearer("tok-alice")).unwrap();
    let bob = host.add_principal(Principal::new("bob").bearer("tok-bob")).unwrap();
    let (la, lb) = (host.lane(server, alice).unwrap(), host.lane(server, bob).unwrap());
    for id in [la, lb] {
        assert!(matches!(host.wait_ready(id, WAIT).unwrap(), ServerState::Ready(..)));
    }

    assert_eq!(host.tool_catalog_blocking(la, WAIT).unwrap().len(), 2);
    let shared = host.tool_catalog_blocking(lb, WAIT).unwrap();
    assert!(shared.is_cached());
    assert_eq!(lists.load(Ordering::SeqCst), 1, "the public list was listed once");
    for id in [la, lb] {
        let hits = host.search_tools(id, "weather", 3);
        assert_eq!(hits.first().map(|h| h.0), Some("forecast"), "{hits:?}");
    }
}
