//! Interoperability over real pipes with real MCP servers on the official SDKs (`tests/peers/`):
//! Python SDK v2 and TypeScript SDK v2 (modern), TypeScript SDK v1 (legacy only).
//!
//! Without the peers installed these tests say loudly that they were skipped; with
//! `MCPOLL_REQUIRE_PEERS=1` (CI) a missing install fails them.

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
