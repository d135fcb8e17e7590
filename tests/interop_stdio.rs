//! Interoperability over real pipes with real MCP servers on the official SDKs (`tests/peers/`):
//! Python SDK v2 and TypeScript SDK v2 (modern), TypeScript SDK v1 (legacy only).
//!
//! Needs the peers (`tests/peers/setup.sh`); `MCPOLL_SKIP_PEERS=1` skips them.

mod common;

use common::*;
use mcpoll::{CallOptions, Config, Era, Host, StdioCommand};

fn peer(script: &str) -> Option<StdioCommand> {
    peers_dir().map(|dir| StdioCommand::new(dir.join(script)))
}

/// The same scenario against every peer: era, listing, echo, add, fail, cancel of slow.
fn scenario(script: &str, expected_era: Era) {
    let Some(cmd) = peer(script) else { return };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd, Config::default());
    assert_eq!(host.era(id), Some(expected_era), "{script}");

    check_lab_tools(&mut host, id, script);

    cancel_slow_and_check(&mut host, id, script, |h| h.stderr_tail(id).unwrap_or_default());
}

#[test]
fn python_sdk_v2_stdio_modern() {
    scenario("run-py-stdio.sh", Era::Modern);
}

#[test]
fn typescript_sdk_v2_stdio_modern() {
    scenario("run-ts2-stdio.sh", Era::Modern);
}

#[test]
fn typescript_sdk_v1_stdio_legacy() {
    scenario("run-ts1-stdio.sh", Era::Legacy);
}

#[test]
fn python_sdk_v2_discover_result_is_kept() {
    let Some(cmd) = peer("run-py-stdio.sh") else {
        return;
    };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd, Config::default());
    let info: serde_json::Value = serde_json::from_str(host.server_info(id).unwrap()).unwrap();
    assert_eq!(info["supportedVersions"], serde_json::json!(["2026-07-28"]));
    assert_eq!(info["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "lab-py");
}

#[test]
fn typescript_sdk_v1_resources_and_prompts() {
    let Some(cmd) = peer("run-ts1-stdio.sh") else {
        return;
    };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd, Config::default());
    let o = CallOptions::default();
    let read = host.read_resource(id, "lab://readme", &o).unwrap();
    assert!(parse(&host.wait(id, read).unwrap())["contents"][0]["text"].is_string());
    let prompt = host.get_prompt(id, "greet", Some(&raw(r#"{"name":"Ann"}"#)), &o).unwrap();
    assert!(host.wait(id, prompt).unwrap().json.contains("Ann"));
}

#[test]
fn legacy_list_changed_reaches_the_host() {
    // SDK v1 pushes notifications/tools/list_changed on the stdio session after a change.
    let Some(cmd) = peer("run-ts1-stdio.sh") else { return };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd, Config::default());
    bump_and_see_tools_changed(&mut host, id);
}

/// `subscriptions/listen` over stdio: the acknowledgement and the tools list_changed that
/// `bump_tools` causes arrive interleaved with replies on stdout, tagged with the subscription.
fn listen_scenario(script: &str) {
    let Some(cmd) = peer(script) else { return };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd, Config::default());
    let filter = mcpoll::SubscriptionFilter { tools_list_changed: true, ..Default::default() };
    let sub = host.listen(id, &filter, &CallOptions::default()).unwrap();
    let mut acknowledged = false;
    poll_until(&mut host, common::PATIENCE, |h| {
        while let Some((_, e)) = h.poll_event() {
            if let mcpoll::Event::Subscribed { call, .. } = e {
                assert_eq!(call, sub);
                acknowledged = true;
            }
        }
        acknowledged
    });
    bump_and_see_tools_changed(&mut host, id);
    // Ending it sends notifications/cancelled naming the listen request; the server stays up.
    host.cancel(id, sub).unwrap();
    assert_eq!(
        parse(&call(&mut host, id, "echo", r#"{"text":"still"}"#))["content"][0]["text"],
        "still"
    );
}

#[test]
fn python_sdk_v2_stdio_listen_tools_changed() {
    listen_scenario("run-py-stdio.sh");
}

#[test]
fn typescript_sdk_v2_stdio_listen_tools_changed() {
    listen_scenario("run-ts2-stdio.sh");
}

#[test]
fn typescript_sdk_v1_stdio_resources_and_prompts_listings() {
    let Some(cmd) = peer("run-ts1-stdio.sh") else { return };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd, Config::default());
    let o = CallOptions::default();
    let resources = host.list(id, mcpoll::Method::ResourcesList, &o).unwrap();
    let r = parse(&host.wait(id, resources).unwrap());
    assert!(r["resources"].as_array().unwrap().iter().any(|x| x["uri"] == "lab://readme"), "{r}");
    let prompts = host.list(id, mcpoll::Method::PromptsList, &o).unwrap();
    let p = parse(&host.wait(id, prompts).unwrap());
    assert!(p["prompts"].as_array().unwrap().iter().any(|x| x["name"] == "greet"), "{p}");
}

/// Restart without a probe, against the Python SDK: the first run probes and keeps the
/// verdict (`Host::verdict`); a restarted host given it back (`Config::saved_discover`) writes
/// the call as its first request. Requests are counted where they are written
/// (`Stats::requests_sent`): two before the first answer without the verdict, one with it.
#[test]
fn python_sdk_v2_restart_with_a_saved_verdict_costs_one_round_trip() {
    let Some(cmd) = peer("run-py-stdio.sh") else { return };
    let cmd = cmd.env("LAB_DISCOVER_TTL_MS", "600000");
    let config = Config { probe_timeout: PATIENCE, ..Config::default() };

    let mut host = Host::new().unwrap();
    let id = host.add_stdio_server(cmd.clone(), config.clone()).unwrap();
    let r = call(&mut host, id, "echo", r#"{"text":"first"}"#);
    assert!(r.json.contains("first"));
    assert_eq!(host.stats(id).unwrap().requests_sent, 2, "the probe, then the call");
    let verdict = host.verdict(id).expect("a fresh modern verdict (ttlMs 600000)");
    assert_eq!(verdict.version, mcpoll::ProtocolVersion::MODERN);
    assert!(verdict.result.contains("lab-py"));
    drop(host);

    let mut host = Host::new().unwrap();
    let config = Config { saved_discover: Some(verdict.clone()), ..config };
    let id = host.add_stdio_server(cmd, config).unwrap();
    let r = call(&mut host, id, "echo", r#"{"text":"again"}"#);
    assert!(r.json.contains("again"));
    assert_eq!(host.stats(id).unwrap().requests_sent, 1, "the call only: no probe");
    assert_eq!(host.era(id), Some(Era::Modern));
    assert_eq!(host.verdict(id), Some(verdict));
}

/// An extension method against the Python SDK (a server-side request handler in
/// `py_server.py`): the host declares the extension, sends `lab/skills_list` by name with
/// params, gets the result, and gets the server's own notification as an event.
#[test]
fn python_sdk_v2_extension_method_and_notification() {
    let Some(cmd) = peer("run-py-stdio.sh") else { return };
    let config =
        Config { extensions: r#"{"io.example/skills":{"v":1}}"#.into(), ..Config::default() };
    let mut host = Host::new().unwrap();
    let id = start(&mut host, cmd, config);
    let params = raw(r#"{"query":"lab"}"#);
    let call = host.request(id, "lab/skills_list", Some(&params), &CallOptions::default()).unwrap();
    let result = parse(&host.wait(id, call).unwrap());
    assert_eq!(result["skills"][0]["name"], "lab-skill");
    assert_eq!(result["declared"], serde_json::json!({"io.example/skills": {"v": 1}}));
    assert_eq!(result["params"], serde_json::json!({"query": "lab"}));
    let mut seen = None;
    while let Some((_, event)) = host.poll_event() {
        if let mcpoll::Event::Notification { method, params } = event {
            seen = Some((method.to_owned(), params.to_owned()));
        }
    }
    let (method, params) = seen.expect("the extension's notification");
    assert_eq!(method, "notifications/lab/skills_listed");
    assert_eq!(parse_str(&params)["count"], 1);
}

fn parse_str(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap()
}
