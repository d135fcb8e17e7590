// cargo run --release --example mcpoll -- --stdio "CMD ARGS..." discover|tools|call NAME 'JSON'
//
//! `mcpoll`, a small command-line MCP client for people and scripts.
//!
//! ```text
//! mcpoll --stdio "CMD ARGS..." [--timeout MS] [--legacy|--modern] COMMAND
//! mcpoll --http URL [--header 'K: V']... [--bearer TOKEN | --client-credentials ID:SECRET |
//!        --oauth [--redirect-uri URI]] [--timeout MS] COMMAND
//!
//! COMMAND:
//!   discover                 the server/discover (modern) or initialize (legacy) result
//!   tools                    every tool (pagination followed)
//!   call NAME [JSON]         call a tool with JSON object arguments (default {})
//!   watch                    print each change of the tool, prompt or resource catalog as
//!                            one JSON line, until interrupted (or --timeout, when given)
//!   resources | templates | prompts
//!   read URI                 read a resource
//!   prompt NAME [JSON]       get a prompt with JSON object arguments
//! ```
//!
//! The command string is split into words as a shell would (quotes honoured) and run without a
//! shell. `call` lists the tools first (once per process, through the host's capability
//! cache), so the tool's annotations decide whether a failed attempt may be retried, and
//! `x-mcp-header` arguments travel as headers over HTTP. `watch` lines look like
//! `{"kind":"tools","added":["x"],"removed":[],"changed":[],"hash":"<16 hex>"}`. The result goes to stdout as JSON and the exit code is 0; a tool's `isError` result
//! is a success that prints `"isError": true`. On failure one JSON line goes to stderr,
//! `{"error":{"kind":"protocol|transport|local","name":"...","message":"..."}}`, and the exit
//! code is 1 (2 for bad usage). When a server process's exit is behind the error, the object
//! also carries `"exit_code"` (or `"signal"`) and `"stderr_tail"`, the last of its stderr.
//!
//! OAuth: `--client-credentials ID:SECRET` gets tokens with the client credentials grant, for
//! a machine identity. `--oauth` runs the authorization code grant for a user: mcpoll prints
//! the authorization URL on stderr, the user opens it in any browser, and pastes the URL the
//! browser was sent back to (`--redirect-uri`, default `http://127.0.0.1:8976/callback`; the
//! page need not load) on stdin. Either way mcpoll discovers the authorization server from the
//! server's 401 and registers itself where it needs to.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcpoll::oauth::{Authorizer, OAuthConfig, PreRegistered};
use mcpoll::HttpOptions;
use mcpoll::ProcessExit;
use mcpoll::{BlockingError, OwnedResult};
use mcpoll::{
    CacheConfig, CallError, CallOptions, Config, EraPreference, Host, LocalError, Method, ServerId,
    StdioCommand, TransportError,
};
use serde_json::json;
use serde_json::value::RawValue;

enum Target {
    Stdio(String),
    Http { url: String, headers: Vec<(String, String)>, bearer: Option<String>, auth: Auth },
}

/// How the CLI gets a token from an OAuth authorization server.
enum Auth {
    None,
    ClientCredentials { id: String, secret: String },
    Code { redirect_uri: String },
}

/// The authorization code grant from a terminal: print the URL, read back the redirect.
struct Paste;

impl Authorizer for Paste {
    fn authorize(&mut self, url: &str) -> Option<String> {
        eprintln!("Open this URL in a browser and authorize mcpoll:\n\n  {url}\n");
        eprintln!("Then paste here the whole URL the browser was sent back to:");
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).ok()?;
        let line = line.trim();
        (!line.is_empty()).then(|| line.to_owned())
    }
}

struct Args {
    target: Target,
    timeout: Duration,
    /// `--timeout` was given (it bounds `watch`, which otherwise runs until interrupted).
    timeout_given: bool,
    era: EraPreference,
    command: Vec<String>,
}

const USAGE: &str = "usage: mcpoll (--stdio \"CMD ARGS...\" | --http URL [--header 'K: V'] \
[--bearer TOKEN | --client-credentials ID:SECRET | --oauth [--redirect-uri URI]]) \
[--timeout MS] [--legacy|--modern] \
discover | tools | call NAME [JSON] | watch | resources | templates | prompts | read URI | prompt NAME [JSON]";

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut stdio, mut timeout, mut era, mut command) =
        (None, Duration::from_secs(30), EraPreference::Auto, Vec::new());
    let (mut http, mut headers, mut bearer) = (None, Vec::new(), None);
    let mut timeout_given = false;
    let (mut auth, mut redirect_uri) = (Auth::None, None);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--stdio" => stdio = Some(it.next().ok_or("--stdio needs a command")?),
            "--http" => http = Some(it.next().ok_or("--http needs a URL")?),
            "--bearer" => bearer = Some(it.next().ok_or("--bearer needs a token")?),
            "--client-credentials" => {
                let c = it.next().ok_or("--client-credentials needs ID:SECRET")?;
                let (id, secret) =
                    c.split_once(':').ok_or("--client-credentials needs ID:SECRET")?;
                auth = Auth::ClientCredentials { id: id.to_owned(), secret: secret.to_owned() };
            }
            "--oauth" => auth = Auth::Code { redirect_uri: String::new() },
            "--redirect-uri" => redirect_uri = Some(it.next().ok_or("--redirect-uri needs a URI")?),
            "--header" => {
                let h = it.next().ok_or("--header needs 'Name: value'")?;
                let (name, value) = h.split_once(':').ok_or("--header needs 'Name: value'")?;
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
            "--timeout" => {
                let ms: u64 =
                    it.next().and_then(|v| v.parse().ok()).ok_or("--timeout needs milliseconds")?;
                timeout = Duration::from_millis(ms.max(1));
                timeout_given = true;
            }
            "--legacy" => era = EraPreference::LegacyOnly,
            "--modern" => era = EraPreference::ModernOnly,
            "-h" | "--help" => return Err(String::new()),
            _ => command.push(a),
        }
    }
    let target = match (stdio, http) {
        (Some(s), None) => Target::Stdio(s),
        (None, Some(url)) => {
            if let Auth::Code { redirect_uri: r } = &mut auth {
                *r = redirect_uri.unwrap_or_else(|| "http://127.0.0.1:8976/callback".into());
            }
            if bearer.is_some() && !matches!(auth, Auth::None) {
                return Err("give --bearer or an OAuth option, not both".into());
            }
            Target::Http { url, headers, bearer, auth }
        }
        _ => return Err("give exactly one of --stdio and --http".into()),
    };
    if command.is_empty() {
        return Err("no command given".into());
    }
    Ok(Args { target, timeout, timeout_given, era, command })
}

/// Failure, as one JSON line on stderr.
enum Failure {
    Usage(String),
    Call(CallError),
    Other(&'static str, String),
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

/// The server process exit behind an error, if one is.
fn process_exit(e: &CallError) -> Option<&ProcessExit> {
    match e {
        CallError::Transport(TransportError::ProcessExit(x)) => Some(x),
        CallError::Local(LocalError::DeliveryUnknown(t)) => match &**t {
            TransportError::ProcessExit(x) => Some(x),
            _ => None,
        },
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

fn run(args: &Args) -> Result<String, Failure> {
    let config = Config { default_timeout: args.timeout, era: args.era, ..Config::default() };
    let watching = args.command.first().is_some_and(|c| c == "watch");
    let cache = CacheConfig { eager_refresh: watching, ..CacheConfig::default() };
    let mut host = Host::with_cache(cache).map_err(|e| Failure::Other("io", e.to_string()))?;
    let server = match &args.target {
        Target::Stdio(line) => {
            let command =
                StdioCommand::from_command_line(line).map_err(|e| Failure::Usage(e.to_string()))?;
            host.add_stdio_server(command, config)
                .map_err(|e| Failure::Other("spawn_failed", e.to_string()))?
        }
        Target::Http { url, headers, bearer, auth } => {
            let mut opts = HttpOptions::new(url.clone());
            for (n, v) in headers {
                opts = opts.header(n.clone(), v.clone());
            }
            if let Some(t) = bearer {
                opts = opts.bearer(t.clone());
            }
            match auth {
                Auth::None => {}
                Auth::ClientCredentials { id, secret } => {
                    let client = PreRegistered::with_secret(id.clone(), secret.clone());
                    opts = opts.oauth(OAuthConfig::client_credentials(url.clone(), client));
                }
                Auth::Code { redirect_uri } => {
                    let config = OAuthConfig::authorization_code(url.clone(), redirect_uri.clone());
                    opts = opts.oauth(config).authorizer(Box::new(Paste));
                }
            }
            host.add_http_server(opts, config)
                .map_err(|e| Failure::Other("setup_failed", e.to_string()))?
        }
    };
    let state = host.wait_ready(server, args.timeout + Duration::from_secs(15))?;
    if !matches!(state, mcpoll::ServerState::Ready(..)) {
        // The engine closed: the first queued event says why.
        while let Some((_, event)) = host.poll_event() {
            if let mcpoll::Event::Closed { error } = event {
                return Err(Failure::Call(error));
            }
        }
        return Err(Failure::Other("not_ready", format!("server state: {state}")));
    }
    let o = CallOptions::default();
    let cmd: Vec<&String> = args.command.iter().collect();
    let listing = |c: &str| match c {
        "tools" => Some(Method::ToolsList),
        "resources" => Some(Method::ResourcesList),
        "templates" => Some(Method::ResourceTemplatesList),
        "prompts" => Some(Method::PromptsList),
        _ => None,
    };
    let call = match cmd.as_slice() {
        [c] if *c == "discover" => return Ok(host.server_info(server).unwrap_or("{}").to_owned()),
        [c] if listing(c).is_some() => {
            host.list(server, listing(c).unwrap_or(Method::ToolsList), &o)?
        }
        [c, uri] if *c == "read" => host.read_resource(server, uri, &o)?,
        [c, name, rest @ ..] if *c == "call" && rest.len() <= 1 => {
            let arguments = object_arg(rest.first().copied())?;
            call_with_cache(&mut host, server, name, &arguments, args.timeout)?
        }
        [c] if *c == "watch" => {
            let bound = args.timeout_given.then_some(args.timeout);
            watch(&mut host, server, args.timeout, bound)?;
            host.close_server(server);
            return Ok(String::new());
        }
        [c, name, rest @ ..] if *c == "prompt" && rest.len() <= 1 => {
            host.get_prompt(server, name, Some(&object_arg(rest.first().copied())?), &o)?
        }
        _ => return Err(Failure::Usage(format!("unknown command: {}", args.command.join(" ")))),
    };
    let result: OwnedResult = host.wait(server, call)?;
    host.close_server(server);
    Ok(result.json)
}

/// Starts a tool call once the tool catalog is known. The catalog comes through the host's
/// capability cache (listed once per process, not at all while fresh): the tools' annotations
/// say whether a retry is safe, and over HTTP their `x-mcp-header` arguments must travel as
/// headers. A server that cannot list still gets the call.
fn call_with_cache(
    host: &mut Host,
    server: ServerId,
    name: &str,
    arguments: &RawValue,
    timeout: Duration,
) -> Result<mcpoll::CallId, Failure> {
    let _ = host.tools_blocking(server, timeout);
    Ok(host.call_tool(server, name, arguments, &CallOptions::default())?)
}

/// Prints each catalog change as one JSON line until `bound` passes (`None`: until killed).
fn watch(
    host: &mut Host,
    server: ServerId,
    timeout: Duration,
    bound: Option<Duration>,
) -> Result<(), Failure> {
    let started = Instant::now();
    // The baseline: later refreshes are diffed against it.
    host.tools_blocking(server, timeout).map_err(|e| Failure::Other("catalog", e.to_string()))?;
    host.watch_catalogs(server)?;
    let names = |v: &[Box<str>]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    while bound.is_none_or(|b| started.elapsed() < b) {
        host.poll(Some(Duration::from_millis(100)))
            .map_err(|e| Failure::Other("io", e.to_string()))?;
        while let Some((_, event)) = host.poll_event() {
            let (kind, change) = match event {
                mcpoll::Event::ToolsChanged(c) => ("tools", c),
                mcpoll::Event::PromptsChanged(c) => ("prompts", c),
                mcpoll::Event::ResourcesChanged(c) => ("resources", c),
                mcpoll::Event::Closed { error } => return Err(Failure::Call(error)),
                _ => continue,
            };
            let line = json!({
                "kind": kind,
                "added": names(change.added()),
                "removed": names(change.removed()),
                "changed": names(change.changed()),
                "hash": change.catalog_hash(),
            });
            println!("{line}");
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let outcome = parse_args().map_err(Failure::Usage).and_then(|a| run(&a));
    match outcome {
        // `watch` printed its lines as they came.
        Ok(json) if json.is_empty() => ExitCode::SUCCESS,
        Ok(json) => {
            // Pretty-print when it parses (it always should); raw text otherwise.
            match serde_json::from_str::<serde_json::Value>(&json) {
                Ok(v) => println!("{}", serde_json::to_string_pretty(&v).unwrap_or(json)),
                Err(_) => println!("{json}"),
            }
            ExitCode::SUCCESS
        }
        Err(f) => {
            let mut exit = None;
            let (kind, name, message, code) = match f {
                Failure::Usage(m) if m.is_empty() => {
                    eprintln!("{USAGE}");
                    return ExitCode::from(2);
                }
                Failure::Usage(m) => ("local", "usage".to_owned(), format!("{m}; {USAGE}"), 2),
                Failure::Call(e) => {
                    exit = process_exit(&e).cloned();
                    (e.kind(), e.name().to_owned(), e.to_string(), 1)
                }
                Failure::Other(name, m) => ("local", name.to_owned(), m, 1),
            };
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
            ExitCode::from(code)
        }
    }
}
