//! The capability cache against real SDK peers over stdio: a tool added at runtime
//! (`bump_tools`) reaches the host as one `ToolsChanged` naming only the new tool, through
//! `subscriptions/listen` on modern servers and the legacy `list_changed` notification on SDK v1.
//!
//! Needs the peers (`tests/peers/setup.sh`); `MCPOLL_SKIP_PEERS=1` skips it.

mod common;

use std::time::{Duration, Instant};

use common::*;
use mcpoll::{CacheConfig, ClientEvent, Config, Event, Host, ServerId, StdioCommand};

const WAIT: Duration = common::PATIENCE;

fn peer(script: &str) -> Option<StdioCommand> {
    peers_dir().map(|dir| StdioCommand::new(dir.join(script)))
}

/// What the host was told about the tools, as `added/removed/changed` lists.
type Told = Vec<(Vec<String>, Vec<String>, Vec<String>)>;

/// Drains events for `how_long`, collecting tool changes; also notes the listen
/// acknowledgement.
fn drain(host: &mut Host, how_long: Duration, told: &mut Told, subscribed: &mut bool) {
    let list = |v: &[Box<str>]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let deadline = Instant::now() + how_long;
    while Instant::now() < deadline {
        host.poll(Some(Duration::from_millis(20))).expect("poll");
        while let Some((_, e)) = host.poll_event() {
            match e {
                Event::Client(ClientEvent::ToolsChanged(c)) => {
                    told.push((list(c.added()), list(c.removed()), list(c.changed())));
                }
                Event::Subscribed { .. } => *subscribed = true,
                _ => {}
            }
        }
    }
}

fn start_watching(script: &str, eager: bool) -> Option<(Host, ServerId)> {
    // The py peer caches nothing unless told to (the SDK's default ttlMs is 0).
    let cmd = peer(script)?.env("LAB_TOOLS_TTL_MS", "600000");
    let cache = CacheConfig { eager_refresh: eager, ..CacheConfig::default() };
    let mut host = Host::with_cache(cache).unwrap();
    let id = start(&mut host, cmd, Config::default());
    let baseline: Vec<String> =
        host.tool_catalog_blocking(id, WAIT).unwrap().names().map(str::to_owned).collect();
    assert!(baseline.iter().any(|n| n == "bump_tools"), "{baseline:?}");
    assert!(!baseline.iter().any(|n| n.starts_with("extra_")), "{baseline:?}");
    host.watch_catalogs(id).unwrap();
    if host.era(id) == Some(mcpoll::Era::Modern) {
        let (mut told, mut subscribed) = (Told::new(), false);
        let deadline = Instant::now() + WAIT;
        while !subscribed {
            assert!(Instant::now() < deadline, "{script}: listen not acknowledged");
            drain(&mut host, Duration::from_millis(50), &mut told, &mut subscribed);
        }
        assert!(told.is_empty(), "the first listing is the baseline, not a change: {told:?}");
    }
    Some((host, id))
}

/// Eager refresh: the change notification alone brings the new catalog and its diff.
fn bump_reaches_the_host_as_one_tools_changed(script: &str) {
    let Some((mut host, id)) = start_watching(script, true) else { return };
    call(&mut host, id, "bump_tools", "{}");
    let (mut told, mut subscribed) = (Told::new(), false);
    let deadline = Instant::now() + WAIT;
    while told.is_empty() {
        assert!(Instant::now() < deadline, "{script}: no ToolsChanged");
        drain(&mut host, Duration::from_millis(50), &mut told, &mut subscribed);
    }
    // Servers may say it twice (listen stream and session): still one change.
    drain(&mut host, Duration::from_millis(500), &mut told, &mut subscribed);
    let only_extra = (vec!["extra_1".to_owned()], vec![], vec![]);
    assert_eq!(told, [only_extra], "{script}");
    // The cache holds the new catalog: a need is a hit.
    let view = host.tool_catalog_blocking(id, WAIT).unwrap();
    assert!(view.definition("extra_1").is_some(), "{script}");
    assert_eq!(host.search_tools(id, "extra", 1).first().map(|h| h.0), Some("extra_1"));
}

#[test]
fn python_sdk_v2_stdio_bump_is_one_tools_changed() {
    bump_reaches_the_host_as_one_tools_changed("run-py-stdio.sh");
}

#[test]
fn typescript_sdk_v2_stdio_bump_is_one_tools_changed() {
    bump_reaches_the_host_as_one_tools_changed("run-ts2-stdio.sh");
}

#[test]
fn typescript_sdk_v1_stdio_legacy_bump_is_one_tools_changed() {
    bump_reaches_the_host_as_one_tools_changed("run-ts1-stdio.sh");
}

/// Without eager refresh the change only marks the catalog stale: the next need lists again,
/// and that refresh is what announces the diff.
#[test]
fn python_sdk_v2_stdio_change_marks_stale_and_the_next_need_refetches() {
    let Some((mut host, id)) = start_watching("run-py-stdio.sh", false) else { return };
    call(&mut host, id, "bump_tools", "{}");
    let (mut told, mut subscribed) = (Told::new(), false);
    // The notification arrives and is drained; nothing is listed yet.
    let refreshes = host.cache_stats().refreshes;
    poll_until(&mut host, WAIT, |h| {
        let mut changed = false;
        while let Some((_, e)) = h.poll_event() {
            changed |= matches!(e, Event::ListChanged(mcpoll::ListKind::Tools));
            assert!(
                !matches!(e, Event::Client(ClientEvent::ToolsChanged(_))),
                "not eager: no diff yet"
            );
        }
        changed
    });
    assert_eq!(host.cache_stats().refreshes, refreshes, "not eager: no listing yet");
    let view = host.tool_catalog_blocking(id, WAIT).unwrap();
    assert!(view.is_cached(), "ttlMs 600000: a cached catalog");
    assert!(view.definition("extra_1").is_some(), "stale entry was refetched");
    assert_eq!(host.cache_stats().refreshes, refreshes + 1);
    drain(&mut host, Duration::from_millis(100), &mut told, &mut subscribed);
    assert_eq!(told, [(vec!["extra_1".to_owned()], vec![], vec![])]);
}

/// `mcpoll watch` over HTTP prints one JSON line for a tool another client added.
#[test]
fn cli_watch_prints_the_new_tool_as_one_json_line() {
    let Some(dir) = peers_dir() else { return };
    let peer = HttpPeer::start(&dir, "run-py-http.sh");
    let child = std::process::Command::new(cli())
        .args(["--json", "--http", &peer.url(), "--timeout", "120000", "watch"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run mcpoll");
    // A second client changes the catalog until the watcher reports it.
    let mut host = Host::new().unwrap();
    let opts = mcpoll::HttpOptions::new(peer.url());
    let id = host.add_http_server(opts, Config::default()).unwrap();
    host.wait_ready(id, WAIT).unwrap();
    let bump = || {
        let said = parse(&call(&mut host, id, "bump_tools", "{}"));
        let text = said["content"][0]["text"].as_str().expect("a text result").to_owned();
        text.strip_prefix("added ").expect("added extra_N").to_owned()
    };
    let (line, bumped) = common::first_watch_line(child, bump);
    common::check_watch_line(&line, &bumped);
}

/// The listen stream dies with the server process; after the supervised restart the host
/// listens again, so a change on the new process still reaches it.
#[test]
fn python_sdk_v2_stdio_listen_survives_a_server_crash() {
    let Some((mut host, id)) = start_watching("run-py-stdio.sh", true) else { return };
    let old = host.pid(id).expect("running");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(old as i32).expect("pid"),
        rustix::process::Signal::KILL,
    )
    .expect("kill");
    let (mut told, mut subscribed) = (Told::new(), false);
    let deadline = Instant::now() + WAIT;
    while !subscribed || host.pid(id).is_none_or(|p| p == old) {
        assert!(Instant::now() < deadline, "no new listen stream after the restart");
        drain(&mut host, Duration::from_millis(50), &mut told, &mut subscribed);
        if host.pid(id).is_some_and(|p| p == old) {
            subscribed = false;
        }
    }
    call(&mut host, id, "bump_tools", "{}");
    while !told.iter().any(|t| t.0 == ["extra_1"]) {
        assert!(Instant::now() < deadline, "no ToolsChanged after the restart: {told:?}");
        drain(&mut host, Duration::from_millis(50), &mut told, &mut subscribed);
    }
}

/// A host that only uses the blocking helpers never drains events: the change still reaches
/// the cache, so a later need lists again.
#[test]
fn python_sdk_v2_stdio_change_is_noticed_without_draining_events() {
    let Some((mut host, id)) = start_watching("run-py-stdio.sh", false) else { return };
    call(&mut host, id, "bump_tools", "{}");
    let deadline = Instant::now() + WAIT;
    loop {
        let view = host.tool_catalog_blocking(id, WAIT).unwrap();
        if view.definition("extra_1").is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "the change never reached the cache");
        // Reads the notification off the pipe; no event is taken.
        host.poll(Some(Duration::from_millis(50))).unwrap();
    }
}
