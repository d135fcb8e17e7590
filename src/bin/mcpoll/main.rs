// cargo install --path . --features cli
// cargo run --features cli --bin mcpoll -- --config examples/mcp.json --server echo tools
//
//! `mcpoll`, a command-line MCP client for people and scripts.
//!
//! `mcpoll --help` gives the usage and the exit codes (the text is in `args.rs`). The server is
//! named in an `mcpServers` file (`--config FILE --server NAME`, the format every desktop MCP
//! host reads; see README.md), or directly with `--stdio "CMD ARGS..."` or `--http URL`.
//!
//! Output: readable text on stdout by default; with `--json`, the result object as JSON. On
//! failure stderr gets one line: `mcpoll: MESSAGE (KIND/NAME)`, or with `--json`
//! `{"error":{"kind":"protocol|peer|transport|local","name":"...","message":"..."}}`; when a
//! server process's exit is behind the error, the JSON also carries `"exit_code"` (or
//! `"signal"`) and `"stderr_tail"`. `call` lists the tools first (once per process, through the
//! host's capability cache), so the tool's annotations decide whether a failed attempt may be
//! retried, and `x-mcp-header` arguments travel as headers over HTTP. `watch` prints one line
//! per catalog change; with `--json`,
//! `{"kind":"tools","added":["x"],"removed":[],"changed":[],"hash":"<16 hex>"}`.
//!
//! Ctrl-C: the flag it sets is checked every 100 ms by the loop waiting for the call; the call
//! is then cancelled through `Host::cancel`, which does what the era asks (on stdio,
//! `notifications/cancelled`; on 2026-07-28 HTTP, closing the response stream; on 2025-11-25
//! HTTP, both), the cancellation gets a moment to leave, and the exit code is 130.
//!
//! OAuth: `--client-credentials ID:SECRET` gets tokens with the client credentials grant, for
//! a machine identity. `--oauth` runs the authorization code grant for a user: mcpoll prints
//! the authorization URL on stderr, the user opens it in any browser, and pastes the URL the
//! browser was sent back to (`--redirect-uri`, default `http://127.0.0.1:8976/callback`; the
//! page need not load) on stdin. `--jwt-bearer ID --assertion-file FILE` presents a workload's
//! JWT from FILE (the JWT-bearer grant); `--identity-assertion ID:SECRET` with
//! `--idp-token-endpoint`, `--idp-client` and `--assertion-file` (the user's identity token)
//! runs enterprise-managed authorization.

mod args;
// The demo server the example configuration starts (`mcpoll echo-server`): shipped inside
// the CLI so that the configuration works from any folder without a build step of its own.
#[path = "../../../examples/echo_server.rs"]
mod echo_server;
mod show;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mcpoll::oauth::{AuthorizeError, Authorizer, IdentityProvider, OAuthConfig, PreRegistered};
use mcpoll::{
    AssertionFile, BlockingError, CacheConfig, CallError, CallId, CallOptions, CatalogError,
    ClientEvent, Config, ConfigFile, Event, Host, HttpOptions, LocalError, Method, OwnedResult,
    ProcessExit, ServerId, ServerState, StdioCommand, TransportError,
};
use serde_json::json;
use serde_json::value::RawValue;

use args::{Args, Auth, Target, USAGE};

/// Set by the Ctrl-C handler; the waiting loops look at it between polls.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// How often the waiting loops look at [`INTERRUPTED`].
const TICK: Duration = Duration::from_millis(100);

/// How long a cancellation gets to reach the server before the process ends.
const CANCEL_GRACE: Duration = Duration::from_millis(300);

/// The exit code after Ctrl-C (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

/// The exit code when the reader of the output went away (128 + SIGPIPE, as a program the
/// signal killed would give).
const EXIT_BROKEN_PIPE: u8 = 141;

/// The exit code of a call whose tool answered `isError: true` (the result is printed).
const EXIT_TOOL_ERROR: u8 = 4;
/// The exit code of a call refused locally (disabled tool, `--confirm` not answered yes).
const EXIT_REFUSED: u8 = 3;

/// `--confirm`: asks on the terminal before a tool that may destroy or overwrite. Blocking in
/// a policy is fine here: the CLI makes one call and has nothing else to do meanwhile.
struct AskAtTerminal;

impl mcpoll::Policy for AskAtTerminal {
    fn decide(&mut self, call: &mcpoll::AccessRequest<'_>) -> mcpoll::Decision {
        if call.always_allowed || !call.annotations.is_destructive() {
            return mcpoll::Decision::Allow;
        }
        let why = if call.annotations.known {
            "its annotations do not say it is read-only or non-destructive"
        } else {
            "its definition is not known"
        };
        if !std::io::stdin().is_terminal() {
            return mcpoll::Decision::deny(format!(
                "--confirm: tool {:?} may destroy or overwrite ({why}), and stdin is not a terminal to ask on",
                call.name
            ));
        }
        let server = call.server_name.unwrap_or("the server");
        eprint!(
            "Call tool {:?} on {server}? It may destroy or overwrite ({why}). [y/N] ",
            call.name
        );
        let _ = std::io::stderr().flush();
        let line = match read_line_or_interrupt() {
            Ok(Some(line)) => line,
            Ok(None) => return mcpoll::Decision::deny("interrupted at the terminal (--confirm)"),
            Err(_) => String::new(),
        };
        if matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            mcpoll::Decision::Allow
        } else {
            mcpoll::Decision::deny("not confirmed at the terminal (--confirm)")
        }
    }
}

/// A line from stdin, or `None` once Ctrl-C is pressed. The handler only sets [`INTERRUPTED`],
/// and the signal restarts a read it interrupts (`SA_RESTART`), so a plain `read_line` at a
/// prompt ignored Ctrl-C until Enter (and a `y` typed then went through). The line is waited
/// for in a poll that looks at the flag every [`TICK`]; stdin that cannot be polled (a
/// regular file) is read at once.
fn read_line_or_interrupt() -> std::io::Result<Option<String>> {
    use std::os::fd::AsRawFd;
    let stdin = std::io::stdin();
    let mut poll = mio::Poll::new()?;
    let fd = stdin.as_raw_fd();
    let mut source = mio::unix::SourceFd(&fd);
    if poll.registry().register(&mut source, mio::Token(0), mio::Interest::READABLE).is_ok() {
        let mut events = mio::Events::with_capacity(1);
        while events.is_empty() {
            if INTERRUPTED.load(Ordering::Relaxed) {
                return Ok(None);
            }
            match poll.poll(&mut events, Some(TICK)) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                other => other?,
            }
        }
    }
    let mut line = String::new();
    stdin.read_line(&mut line)?;
    Ok(Some(line))
}

/// The authorization code grant from a terminal: print the URL, read back the redirect.
struct Paste;

impl Authorizer for Paste {
    fn authorize(&mut self, url: &str) -> Result<String, AuthorizeError> {
        let url = show::terminal_safe(url, false);
        eprintln!("Open this URL in a browser and authorize mcpoll:\n\n  {url}\n");
        eprintln!("Then paste here the whole URL the browser was sent back to:");
        let line = read_line_or_interrupt().map_err(|e| AuthorizeError::Io(e.kind()))?;
        let Some(line) = line else { return Err(AuthorizeError::Declined) };
        let line = line.trim();
        if line.is_empty() {
            return Err(AuthorizeError::Declined);
        }
        Ok(line.to_owned())
    }
}

/// Why the command did not succeed.
enum Failure {
    /// Bad usage or an unusable configuration file (exit 2).
    Usage(String),
    /// The call ended without a result (exit 1).
    Call(CallError),
    /// Anything else that stopped the command (exit 1).
    Other(&'static str, String),
    /// The output could not be written (exit 1; a reader that went away, as `| head` does,
    /// exits 141 quietly, as a program killed by SIGPIPE would).
    Output(std::io::Error),
    /// Ctrl-C (exit 130).
    Interrupted,
}

impl From<BlockingError> for Failure {
    fn from(e: BlockingError) -> Self {
        match e {
            BlockingError::Call(e) => Failure::Call(e),
            BlockingError::Request(e) => Failure::Other("request_refused", e.to_string()),
            other => Failure::Other("io", other.to_string()),
        }
    }
}

impl From<mcpoll::RequestError> for Failure {
    fn from(e: mcpoll::RequestError) -> Self {
        Failure::Other("request_refused", e.to_string())
    }
}

/// What a successful command leaves to print.
enum Output {
    /// A result object, as JSON text, and whether a tool answered it with `isError: true`.
    Result(String, bool),
    /// Printed already (`watch`).
    Done,
}

/// The server process exit behind an error, if one is.
fn process_exit(e: &CallError) -> Option<&ProcessExit> {
    match e {
        CallError::Transport(TransportError::ProcessExit(x)) => Some(x),
        CallError::Local(LocalError::DeliveryUnknown(t) | LocalError::Degraded(Some(t))) => {
            match &**t {
                TransportError::ProcessExit(x) => Some(x),
                _ => None,
            }
        }
        _ => None,
    }
}

fn object_arg(s: Option<&String>) -> Result<Box<RawValue>, Failure> {
    let text = s.map_or("{}", String::as_str);
    let raw = RawValue::from_string(text.to_owned())
        .map_err(|e| Failure::Usage(format!("arguments are not JSON: {e}")))?;
    if !raw.get().trim_start().starts_with('{') {
        return Err(Failure::Usage("arguments must be a JSON object".into()));
    }
    Ok(raw)
}

/// A server as the arguments name it, before any flag that overrides its settings.
enum Chosen {
    Stdio(StdioCommand, Config),
    // Boxed: the options are much larger than a command.
    Http(Box<HttpOptions>, Config),
}

/// A config entry's `disabledTools`, and its `alwaysAllow` and `autoApprove` together.
type ToolLists = (Vec<String>, Vec<String>);

/// Finds the server: an entry of the config file, or the `--stdio`/`--http` flags; with the
/// entry's tool lists (empty without a file) and the directories to offer as roots (the
/// entry's `mcpoll.roots`, then each `--root`).
fn choose(args: &Args) -> Result<(Chosen, ToolLists, Vec<PathBuf>), Failure> {
    let (chosen, lists, mut roots) = choose_server(args)?;
    for r in &args.roots {
        let dir = std::path::absolute(r).map_err(|e| Failure::Usage(format!("--root {r}: {e}")))?;
        roots.push(dir);
    }
    Ok((chosen, lists, roots))
}

/// The server of [`choose`], its entry's tool lists and its file's roots.
fn choose_server(args: &Args) -> Result<(Chosen, ToolLists, Vec<PathBuf>), Failure> {
    let defaults = Config { default_timeout: args.timeout, ..Config::default() };
    let file = match &args.target {
        Target::Stdio(line) => {
            let command =
                StdioCommand::from_command_line(line).map_err(|e| Failure::Usage(e.to_string()))?;
            // As for a config file's server: the host's environment only on request.
            return Ok((
                Chosen::Stdio(command.safe_env(), defaults),
                ToolLists::default(),
                Vec::new(),
            ));
        }
        Target::Http(url) => {
            let opts = Box::new(HttpOptions::new(url.clone()));
            return Ok((Chosen::Http(opts, defaults), ToolLists::default(), Vec::new()));
        }
        Target::Config { file, server } => (file, server),
    };
    // Only the entry asked for has to be usable: another's fault is not this command's.
    let config = ConfigFile::load(file.0).map_err(|e| Failure::Usage(e.to_string()))?;
    let entry = match file.1 {
        Some(name) => config.entry(name).ok_or_else(|| {
            Failure::Usage(format!("no server {name:?} in the configuration file"))
        })?,
        None => {
            let mut enabled = config.enabled_entries();
            match (enabled.next(), enabled.next()) {
                (Some(only), None) => only,
                _ => return Err(Failure::Usage("name the server with --server".into())),
            }
        }
    };
    let entry = entry.map_err(|e| Failure::Usage(e.to_string()))?;
    let mut settings = entry.config().clone();
    if args.timeout_given {
        settings.default_timeout = args.timeout;
    }
    let lists = (entry.disabled_tools().to_vec(), entry.always_allowed_tools().to_vec());
    let roots = entry.roots().to_vec();
    match (entry.stdio_command(), entry.http_options()) {
        (Some(command), _) => Ok((Chosen::Stdio(command.clone(), settings), lists, roots)),
        (None, Some(opts)) => Ok((Chosen::Http(Box::new(opts), settings), lists, roots)),
        (None, None) => Err(Failure::Usage("the server has no transport".into())),
    }
}

/// Adds the server the arguments name, with the flags' overrides and its entry's tool lists,
/// and offers it the roots.
fn add_server(host: &mut Host, args: &Args) -> Result<ServerId, Failure> {
    let (chosen, (disabled, always), roots) = choose(args)?;
    let server = add_chosen(host, args, chosen, !roots.is_empty())?;
    host.disable_tools(server, disabled);
    host.always_allow_tools(server, always);
    if !roots.is_empty() {
        // The library's checks: absolute, no `..`, existing, symlinks resolved inside.
        host.set_root_dirs(server, &roots).map_err(|e| Failure::Usage(format!("--root: {e}")))?;
    }
    if args.confirm {
        host.set_policy(AskAtTerminal);
    }
    Ok(server)
}

/// Adds the chosen server; `roots`: it is to be offered roots.
fn add_chosen(
    host: &mut Host,
    args: &Args,
    chosen: Chosen,
    roots: bool,
) -> Result<ServerId, Failure> {
    let http_flags = !args.headers.is_empty()
        || args.bearer.is_some()
        || !matches!(args.auth, Auth::None)
        || args.dpop.is_some();
    let (mut opts, mut config) = match chosen {
        Chosen::Stdio(..) if http_flags => {
            let m = "--header, --bearer and the OAuth options are for HTTP servers";
            return Err(Failure::Usage(m.into()));
        }
        Chosen::Stdio(mut command, mut config) => {
            config.era = args.era.unwrap_or(config.era);
            config.answers.roots |= roots;
            if args.inherit_env {
                command = command.inherit_env();
            }
            return host
                .add_stdio_server(command, config)
                .map_err(|e| Failure::Other("spawn_failed", e.to_string()));
        }
        Chosen::Http(opts, config) => (*opts, config),
    };
    config.answers.roots |= roots;
    config.era = args.era.unwrap_or(config.era);
    let url = opts.url.clone();
    for (n, v) in &args.headers {
        opts = opts.header(n.clone(), v.clone());
    }
    if let Some(t) = &args.bearer {
        opts = opts.bearer(t.clone());
    }
    match &args.auth {
        Auth::None => {}
        Auth::ClientCredentials { id, secret, issuer } => {
            let mut client = PreRegistered::with_secret(id.clone(), secret.clone());
            client.issuer.clone_from(issuer);
            opts = opts.oauth(OAuthConfig::client_credentials(url, client));
        }
        Auth::Code { redirect_uri } => {
            let config = OAuthConfig::authorization_code(url, redirect_uri.clone());
            opts = opts.oauth(config).authorizer(Box::new(Paste));
        }
        Auth::JwtBearer { id, assertion_file, issuer } => {
            let mut client = PreRegistered::public(id.clone());
            client.issuer.clone_from(issuer);
            let file = Box::new(AssertionFile::new(assertion_file));
            opts = opts.oauth(OAuthConfig::jwt_bearer(url, id, file).pre_registered(client));
        }
        Auth::IdentityAssertion {
            id,
            secret,
            idp_token_endpoint,
            idp_client,
            idp_secret,
            assertion_file,
            issuer,
        } => {
            let mut client = PreRegistered::with_secret(id.clone(), secret.clone());
            client.issuer.clone_from(issuer);
            let mut idp = IdentityProvider::new(idp_token_endpoint.clone(), idp_client.clone());
            if let Some(s) = idp_secret {
                idp = idp.client_secret(s.clone());
            }
            let file = Box::new(AssertionFile::new(assertion_file));
            opts = opts.oauth(OAuthConfig::identity_assertion(url, client, idp, file));
        }
    }
    if let Some(mode) = args.dpop {
        let Some(oauth) = opts.oauth.as_mut() else {
            let m = "--dpop needs an OAuth flow: --client-credentials, --oauth or mcpoll.oauth";
            return Err(Failure::Usage(m.into()));
        };
        oauth.dpop = mode;
    }
    host.add_http_server(opts, config).map_err(|e| match e {
        // A URL or a header the command line (or the file) gave that cannot be used is bad
        // usage (2), as the same URL from a configuration file is.
        mcpoll::AddServerError::Http(
            mcpoll::HttpSetupError::Url(_) | mcpoll::HttpSetupError::Header(_),
        ) => Failure::Usage(e.to_string()),
        e => Failure::Other("setup_failed", e.to_string()),
    })
}

/// Waits until the server is ready, giving up at `limit` or on Ctrl-C.
fn wait_ready(host: &mut Host, server: ServerId, deadline: Instant) -> Result<(), Failure> {
    loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            return Err(Failure::Interrupted);
        }
        match host.wait_ready(server, TICK) {
            Ok(ServerState::Ready(..)) => return Ok(()),
            Ok(state) => {
                // The engine closed: the first queued event says why.
                while let Some((_, event)) = host.poll_event() {
                    if let Event::Closed { error } = event {
                        return Err(Failure::Call(error));
                    }
                }
                return Err(Failure::Other("not_ready", format!("server state: {state}")));
            }
            Err(BlockingError::Call(CallError::Local(LocalError::DeadlineExceeded)))
                if Instant::now() < deadline => {}
            // Out of time: the last failure to reach the server says more than the deadline.
            Err(BlockingError::Call(CallError::Local(LocalError::DeadlineExceeded))) => {
                return Err(match host.last_transport_error(server) {
                    Some(cause) => Failure::Call(CallError::Transport(cause.clone())),
                    None => Failure::Call(CallError::Local(LocalError::DeadlineExceeded)),
                });
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Lists the tools through the cache, giving up at `limit` or on Ctrl-C. The listing is
/// waited for one tick at a time: a timed-out wait leaves it in flight, and the next joins it.
fn learn_tools(host: &mut Host, server: ServerId, limit: Duration) -> Result<(), Failure> {
    let deadline = Instant::now() + limit;
    loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            return Err(Failure::Interrupted);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match host.tool_catalog_blocking(server, left.min(TICK)) {
            Ok(_) => return Ok(()),
            Err(CatalogError::Timeout) if !left.is_zero() => {}
            Err(e) => return Err(Failure::Other("catalog", e.to_string())),
        }
    }
}

/// Shows progress on stderr, on one line rewritten in place, when stderr is a terminal.
struct Progress {
    shown: bool,
}

impl Progress {
    fn show(&mut self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let total = total.map(|t| format!("/{t}")).unwrap_or_default();
        let message =
            message.map(|m| format!("  {}", show::terminal_safe(m, false))).unwrap_or_default();
        // \r and "erase line": the next report overwrites this one.
        eprint!("\r\x1b[2K[{progress}{total}]{message}");
        let _ = std::io::stderr().flush();
        self.shown = true;
    }

    fn clear(&mut self) {
        if std::mem::take(&mut self.shown) {
            eprint!("\r\x1b[2K");
        }
    }
}

/// Waits for `call`, showing its progress and cancelling it on Ctrl-C.
fn finish(host: &mut Host, server: ServerId, call: CallId) -> Result<OwnedResult, Failure> {
    let mut progress = Progress { shown: false };
    let outcome = loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            break Err(interrupt(host, server, call));
        }
        if let Err(e) = host.poll(Some(TICK)) {
            break Err(Failure::Other("io", e.to_string()));
        }
        let mut ended = None;
        while let Some((_, event)) = host.poll_event() {
            match event {
                Event::Progress { call: c, progress: p, total, message } if c == call => {
                    progress.show(p, total, message);
                }
                Event::CallDone { call: c, result, .. } if c == call => {
                    ended = Some(Ok(OwnedResult {
                        json: result.json().to_owned(),
                        is_error: result.is_error(),
                        result_type: result.result_type(),
                    }));
                    break;
                }
                Event::CallFailed { call: c, error, .. } if c == call => {
                    ended = Some(Err(Failure::Call(error)));
                    break;
                }
                _ => {}
            }
        }
        if let Some(e) = ended {
            break e;
        }
    };
    progress.clear();
    outcome
}

/// Cancels `call` after Ctrl-C and lets the cancellation leave before the process ends.
fn interrupt(host: &mut Host, server: ServerId, call: CallId) -> Failure {
    if host.cancel(server, call).is_ok() {
        // On stdio the notification is written already; over HTTP a 2025-11-25 server's
        // `notifications/cancelled` may need a connection of its own first.
        let until = Instant::now() + CANCEL_GRACE;
        while Instant::now() < until {
            let _ = host.poll(Some(until.saturating_duration_since(Instant::now())));
            while host.poll_event().is_some() {}
        }
    }
    Failure::Interrupted
}

/// What the command line asks of the server, checked before the server is started: a
/// mistyped command or bad arguments are a usage error at once, not after a download and a
/// handshake (and with the server started for nothing).
enum Verb<'a> {
    Discover,
    List(Method),
    Read(&'a str),
    Call(&'a str, Box<RawValue>),
    Watch,
    Prompt(&'a str, Box<RawValue>),
}

fn verb(args: &Args) -> Result<Verb<'_>, Failure> {
    let cmd: Vec<&str> = args.command.iter().map(String::as_str).collect();
    let listing = |c: &str| match c {
        "tools" => Some(Method::ToolsList),
        "resources" => Some(Method::ResourcesList),
        "templates" => Some(Method::ResourceTemplatesList),
        "prompts" => Some(Method::PromptsList),
        _ => None,
    };
    Ok(match cmd.as_slice() {
        ["discover"] => Verb::Discover,
        [c] if listing(c).is_some() => Verb::List(listing(c).unwrap_or(Method::ToolsList)),
        ["read", uri] => Verb::Read(uri),
        ["call", name, rest @ ..] if rest.len() <= 1 => {
            Verb::Call(name, object_arg(args.command.get(2))?)
        }
        ["watch"] => Verb::Watch,
        ["get" | "prompt", name, rest @ ..] if rest.len() <= 1 => {
            Verb::Prompt(name, object_arg(args.command.get(2))?)
        }
        _ => return Err(Failure::Usage(format!("unknown command: {}", args.command.join(" ")))),
    })
}

fn run(args: &Args) -> Result<Output, Failure> {
    let verb = verb(args)?;
    let watching = matches!(verb, Verb::Watch);
    let cache = CacheConfig { eager_refresh: watching, ..CacheConfig::default() };
    let mut host = Host::with_cache(cache).map_err(|e| Failure::Other("io", e.to_string()))?;
    let server = add_server(&mut host, args)?;
    // A --timeout bounds the whole command, starting or connecting to the server included;
    // without one, the server gets some room to start beyond the calls' own deadline.
    let started = Instant::now();
    let command_deadline = args.timeout_given.then(|| started + args.timeout);
    let ready_by = command_deadline.unwrap_or(started + args.timeout + Duration::from_secs(15));
    wait_ready(&mut host, server, ready_by)?;
    let left = || command_deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let showing_progress = std::io::stderr().is_terminal();
    let o = CallOptions { progress: showing_progress, timeout: left(), ..CallOptions::default() };
    let call = match verb {
        Verb::Discover => {
            let info = host.server_info(server).unwrap_or("{}").to_owned();
            return Ok(Output::Result(info, false));
        }
        Verb::List(method) => host.list(server, method, &o)?,
        Verb::Read(uri) => host.read_resource(server, uri, &o)?,
        Verb::Call(name, arguments) => {
            // The catalog (through the cache) tells whether a retry is safe and which
            // arguments travel as headers; a server that cannot list still gets the call.
            let limit = left().unwrap_or(args.timeout);
            if let Err(Failure::Interrupted) = learn_tools(&mut host, server, limit) {
                return Err(Failure::Interrupted);
            }
            let o = CallOptions { timeout: left(), ..o };
            host.call_tool(server, name, &arguments, &o)?
        }
        Verb::Watch => {
            let bound = args.timeout_given.then_some(args.timeout);
            let outcome = watch(&mut host, server, args, bound);
            host.close_server(server);
            return outcome.map(|()| Output::Done);
        }
        Verb::Prompt(name, arguments) => host.get_prompt(server, name, Some(&arguments), &o)?,
    };
    let result = finish(&mut host, server, call);
    host.close_server(server);
    let result = result?;
    Ok(Output::Result(result.json, result.is_error))
}

/// Prints each catalog change until `bound` passes (`None`: until Ctrl-C).
fn watch(
    host: &mut Host,
    server: ServerId,
    args: &Args,
    bound: Option<Duration>,
) -> Result<(), Failure> {
    let started = Instant::now();
    // The baseline: later refreshes are diffed against it. A server without tools (resources
    // or prompts only) has none to list: asking failed the watch (-32601).
    let caps = host.client().capabilities(server).unwrap_or("{}");
    let has_tools =
        serde_json::from_str::<serde_json::Value>(caps).map_or(true, |c| c.get("tools").is_some());
    if has_tools {
        learn_tools(host, server, args.timeout)?;
    }
    host.watch_catalogs(server)?;
    let names = |v: &[Box<str>]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    while bound.is_none_or(|b| started.elapsed() < b) {
        if INTERRUPTED.load(Ordering::Relaxed) {
            return Err(Failure::Interrupted);
        }
        host.poll(Some(TICK)).map_err(|e| Failure::Other("io", e.to_string()))?;
        while let Some((_, event)) = host.poll_event() {
            let (kind, change) = match event {
                Event::Client(ClientEvent::ToolsChanged(c)) => ("tools", c),
                Event::Client(ClientEvent::PromptsChanged(c)) => ("prompts", c),
                Event::Client(ClientEvent::ResourcesChanged(c)) => ("resources", c),
                Event::Closed { error } => return Err(Failure::Call(error)),
                _ => continue,
            };
            let (added, removed, changed) =
                (names(change.added()), names(change.removed()), names(change.changed()));
            if args.json {
                let hash = change.catalog_hash();
                let line = json!({
                    "kind": kind, "added": added, "removed": removed, "changed": changed,
                    "hash": hash,
                });
                emit(&format!("{line}\n")).map_err(Failure::Output)?;
            } else {
                let parts: Vec<String> = [('+', &added), ('-', &removed), ('~', &changed)]
                    .into_iter()
                    .flat_map(|(sign, v)| {
                        v.iter().map(move |n| format!("{sign}{}", show::terminal_safe(n, false)))
                    })
                    .collect();
                emit(&format!("{kind} changed: {}\n", parts.join(" "))).map_err(Failure::Output)?;
            }
        }
    }
    Ok(())
}

/// Prints the failure on stderr and gives the exit code.
fn report(f: Failure, json: bool) -> ExitCode {
    let mut exit = None;
    let (kind, name, message, code) = match f {
        Failure::Usage(m) if m.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Failure::Usage(m) => ("local", "usage".to_owned(), m, 2),
        Failure::Call(e) => {
            exit = process_exit(&e).cloned();
            let code = if matches!(e, CallError::Local(LocalError::AuthorizationDenied(_))) {
                EXIT_REFUSED
            } else {
                1
            };
            let mut message = e.to_string();
            if code == EXIT_REFUSED {
                message.push_str("; the call was not sent to the server");
            }
            (e.kind(), e.name().to_owned(), message, code)
        }
        Failure::Other(name, m) => ("local", name.to_owned(), m, 1),
        Failure::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            return ExitCode::from(EXIT_BROKEN_PIPE)
        }
        Failure::Output(e) => ("local", "output".to_owned(), format!("cannot write: {e}"), 1),
        Failure::Interrupted => {
            let m = "interrupted: the call was cancelled".to_owned();
            ("local", "interrupted".to_owned(), m, EXIT_INTERRUPTED)
        }
    };
    if json {
        let mut error = json!({"kind": kind, "name": name, "message": message});
        if let Some(x) = exit {
            if let Some(c) = x.code {
                error["exit_code"] = json!(c);
            }
            if let Some(s) = x.signal {
                error["signal"] = json!(s);
            }
            error["stderr_tail"] = json!(&*x.stderr_tail);
        }
        eprintln!("{}", json!({ "error": error }));
    } else {
        // The message may quote the server (an error's text): shown, not obeyed.
        eprintln!("mcpoll: {} ({kind}/{name})", show::terminal_safe(&message, false));
        if name == "usage" {
            eprintln!("Try `mcpoll --help`.");
        }
        if let Some(x) = exit.filter(|x| !x.stderr_tail.is_empty()) {
            let tail = show::terminal_safe(x.stderr_tail.trim_end(), true);
            eprintln!("the server's last stderr:\n{tail}");
        }
    }
    ExitCode::from(code)
}

/// Writes `text` to standard output, reporting what `print!` would panic on (a closed pipe).
fn emit(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

fn main() -> ExitCode {
    // `std::env::args` panics on an argument that is not UTF-8: a usage error instead.
    let given: Result<Vec<String>, _> =
        std::env::args_os().skip(1).map(|a| a.into_string()).collect();
    let Ok(given) = given else {
        let json = std::env::args_os().any(|a| a == "--json");
        return report(Failure::Usage("an argument is not valid UTF-8".into()), json);
    };
    if given.first().map(String::as_str) == Some("echo-server") {
        echo_server::main();
        return ExitCode::SUCCESS;
    }
    let args = match args::parse(given.iter().cloned()) {
        Ok(a) => a,
        Err(m) => {
            let json = given.iter().any(|a| a == "--json");
            return report(Failure::Usage(m), json);
        }
    };
    // Without a handler, Ctrl-C would kill the process before the server is told anything.
    if let Err(e) = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed)) {
        eprintln!("mcpoll: Ctrl-C will not cancel calls: {e}");
    }
    match run(&args) {
        Ok(Output::Done) => ExitCode::SUCCESS,
        Ok(Output::Result(text, tool_error)) => {
            // A listing is read from its text, without a `Value` of every item.
            let listing =
                if args.json { None } else { show::readable_listing(&args.command[0], &text) };
            let shown = match listing {
                Some(readable) => readable,
                None => match serde_json::from_str::<serde_json::Value>(&text) {
                    Ok(v) if args.json => serde_json::to_string_pretty(&v).unwrap_or(text) + "\n",
                    Ok(v) => show::readable(&args.command[0], &v),
                    // It always parses (the engine checked it); raw text otherwise.
                    Err(_) => show::terminal_safe(&text, true).into_owned() + "\n",
                },
            };
            if let Err(e) = emit(&shown) {
                return report(Failure::Output(e), args.json);
            }
            if tool_error {
                ExitCode::from(EXIT_TOOL_ERROR)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(f) => report(f, args.json),
    }
}
