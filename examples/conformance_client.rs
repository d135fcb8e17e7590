// cargo build --example conformance_client && tests/conformance/run.sh 2026-07-28
//
//! The client that the official MCP conformance suite (`@modelcontextprotocol/conformance`)
//! drives: one binary for every client scenario, written the way a host would use mcpoll.
//!
//! ```text
//! MCP_CONFORMANCE_SCENARIO=tools_call MCP_CONFORMANCE_PROTOCOL_VERSION=2026-07-28 \
//!     conformance_client http://localhost:PORT/mcp
//! ```
//!
//! The harness starts a mock server per scenario and runs this binary with the server's URL as
//! the last argument. `MCP_CONFORMANCE_SCENARIO` names the scenario,
//! `MCP_CONFORMANCE_PROTOCOL_VERSION` the revision under test (2025-11-25 and earlier: the
//! `initialize` handshake only; 2026-07-28: stateless, probed with `server/discover`), and
//! `MCP_CONFORMANCE_CONTEXT` (JSON) carries a scenario's extra input. Pass or fail comes only
//! from what the mock server saw on the wire.
//!
//! Only mcpoll's public API is used: no JSON-RPC is written here and no protocol header is set
//! by hand. Server requests (legacy elicitation, `input_required` rounds) are answered as a
//! host without a user would (`wait_answering`). Where mcpoll cannot yet do what a scenario
//! asks, the scenario fails; `tests/conformance/expected-failures-*.yaml` lists those. OAuth (`auth/*`)
//! runs `mcpoll::oauth`'s flow, driven here over blocking loopback HTTP until the HTTP driver
//! drives it itself (issue 12): a 401 or 403 ends the call with its challenge, the flow gets a
//! token, and the scenario starts again on a new connection that sends it. Each step is
//! printed to stdout, which the harness keeps beside the scenario's checks. `unwrap`s on the
//! harness's own input are for this test tool only.

use std::cell::RefCell;
use std::fmt;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcpoll::oauth::{
    Action, Authorizer, HttpMethod, HttpResponse, JwtAlgorithm, OAuthConfig, OAuthFlow,
    PreRegistered, SigningKey,
};
use mcpoll::{
    elicitation_defaults, AuthChallenge, BlockingError, CallError, CallId, CallOptions, Config,
    EraPreference, Event, Host, HttpOptions, Method, OwnedResult, PeerError, ServerId,
    ServerRequestKind, ServerRequestKinds, ServerState, TokenProvider,
};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// Per-call deadline: a call that cannot complete (a server request mcpoll does not answer yet)
/// ends well inside the harness's 30 s per scenario.
const CALL_TIMEOUT: Duration = Duration::from_secs(8);

/// Why a scenario stopped: text, and for a 401 or 403 the server's challenge.
#[derive(Debug)]
struct Failure {
    text: String,
    auth: Option<(u16, Box<AuthChallenge>)>,
}

impl From<String> for Failure {
    fn from(text: String) -> Self {
        Self { text, auth: None }
    }
}

impl From<&str> for Failure {
    fn from(text: &str) -> Self {
        text.to_owned().into()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The auth challenge inside a call's error, if it is one.
fn challenge_of(error: &CallError) -> Option<(u16, Box<AuthChallenge>)> {
    match error {
        CallError::Peer(PeerError::AuthRequired(c)) => Some((401, c.clone())),
        CallError::Peer(PeerError::Forbidden(c)) => Some((403, c.clone())),
        _ => None,
    }
}

struct Client {
    host: Host,
    server: ServerId,
    opts: CallOptions,
}

impl Client {
    fn connect(
        url: &str,
        protocol_version: &str,
        tokens: Option<Box<dyn TokenProvider>>,
    ) -> Result<Self, Failure> {
        // Dated revisions up to 2025-11-25 are the initialize era; later ones are stateless.
        let era = if protocol_version <= "2025-11-25" {
            EraPreference::LegacyOnly
        } else {
            EraPreference::ModernOnly
        };
        let config = Config {
            era,
            default_timeout: CALL_TIMEOUT,
            client_name: "mcpoll-conformance-client".into(),
            answers: answered_kinds(),
            ..Config::default()
        };
        let mut host = Host::new().map_err(|e| format!("poll: {e}"))?;
        let mut options = HttpOptions::new(url);
        options.token_provider = tokens;
        let server =
            host.add_http_server(options, config).map_err(|e| format!("add_http_server: {e}"))?;
        let state = host.wait_ready(server, CALL_TIMEOUT * 2).map_err(|e| e.to_string())?;
        println!("connected: {state} (era {:?})", host.era(server));
        if !matches!(state, ServerState::Ready(..)) {
            while let Some((_, event)) = host.poll_event() {
                if let mcpoll::Event::Closed { error } = event {
                    let auth = challenge_of(&error);
                    return Err(Failure { text: format!("not ready: {error}"), auth });
                }
            }
            return Err(format!("not ready: {state}").into());
        }
        Ok(Self { host, server, opts: CallOptions::default() })
    }

    fn finish(
        &mut self,
        what: &str,
        call: Result<mcpoll::CallId, mcpoll::RequestError>,
    ) -> Result<OwnedResult, Failure> {
        let outcome = call.map_err(BlockingError::from).and_then(|call| self.wait_answering(call));
        match &outcome {
            Ok(r) => println!("{what}: {:?} {}", r.result_type, r.json),
            Err(e) => println!("{what}: failed: {e}"),
        }
        outcome.map_err(|e| {
            let auth = match &e {
                BlockingError::Call(error) => challenge_of(error),
                _ => None,
            };
            Failure { text: format!("{what}: {e}"), auth }
        })
    }

    /// A listing's items (`tools`, `resources`, `prompts`), pagination followed by mcpoll.
    fn list(&mut self, method: Method, key: &str) -> Result<Vec<Value>, Failure> {
        let call = self.host.list(self.server, method, &self.opts);
        let r = self.finish(key, call)?;
        let mut v: Value = serde_json::from_str(&r.json).map_err(|e| e.to_string())?;
        Ok(match v.get_mut(key).map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        })
    }

    fn call_tool(&mut self, name: &str, arguments: &RawValue) -> Result<OwnedResult, Failure> {
        let call = self.host.call_tool(self.server, name, arguments, &self.opts);
        self.finish(&format!("tools/call {name}"), call)
    }

    /// What a host does with a server it knows nothing about: list the tools it offers and
    /// call each one with arguments that fit its schema.
    fn call_every_tool(&mut self) -> Result<(), Failure> {
        let mut failed = None;
        for tool in self.list(Method::ToolsList, "tools")? {
            let name = tool["name"].as_str().unwrap_or_default().to_owned();
            let args = RawValue::from_string(arguments_for(&tool["inputSchema"]).to_string());
            if let Err(e) = self.call_tool(&name, &args.map_err(|e| e.to_string())?) {
                failed.get_or_insert(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

/// The server requests this client answers, and so declares: every kind.
fn answered_kinds() -> ServerRequestKinds {
    ServerRequestKinds::all()
}

impl Client {
    /// `Host::wait`, answering the server's requests on the way as a host with no user at the
    /// keyboard would: a form elicitation accepted with its defaults, a URL elicitation
    /// declined, sampling with a fixed message, roots with none.
    fn wait_answering(&mut self, call: CallId) -> Result<OwnedResult, BlockingError> {
        loop {
            let mut asks = Vec::new();
            while let Some((_, event)) = self.host.poll_event() {
                match event {
                    Event::ServerRequest { request, kind, params, .. } => {
                        asks.push((request, kind, params.to_owned()))
                    }
                    Event::CallDone { call: c, result, .. } if c == call => {
                        return Ok(OwnedResult {
                            json: result.json().to_owned(),
                            is_error: result.is_error(),
                            result_type: result.result_type(),
                        });
                    }
                    Event::CallFailed { call: c, error, .. } if c == call => {
                        return Err(BlockingError::Call(error));
                    }
                    _ => {}
                }
            }
            for (request, kind, params) in asks {
                let answer = answer_for(kind, &params);
                println!("{}: {params} -> {answer}", kind.method());
                let answer = RawValue::from_string(answer).map_err(|e| {
                    BlockingError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
                })?;
                if let Err(e) = self.host.answer(self.server, request, &answer) {
                    println!("{}: answer refused: {e}", kind.method());
                }
            }
            self.host.poll(Some(Duration::from_millis(100))).map_err(BlockingError::Io)?;
        }
    }
}

/// What this client answers to one server request.
fn answer_for(kind: ServerRequestKind, params: &str) -> String {
    match kind {
        ServerRequestKind::ElicitationForm => {
            elicitation_defaults(params).unwrap_or_else(|| r#"{"action":"decline"}"#.into())
        }
        ServerRequestKind::Sampling => json!({"role": "assistant", "model": "mcpoll-conformance",
            "content": {"type": "text", "text": "conformance"}, "stopReason": "endTurn"})
        .to_string(),
        ServerRequestKind::Roots => r#"{"roots":[]}"#.into(),
        _ => r#"{"action":"decline"}"#.into(),
    }
}

/// Arguments for a tool's required properties: a plausible value of each declared type.
fn arguments_for(schema: &Value) -> Value {
    let mut args = serde_json::Map::new();
    let required = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str);
    for name in required {
        let value = match schema["properties"][name]["type"].as_str() {
            Some("integer") => json!(1),
            Some("number") => json!(1.5),
            Some("boolean") => json!(true),
            Some("object") => json!({}),
            Some("array") => json!([]),
            Some("null") => Value::Null,
            _ => json!("conformance"),
        };
        args.insert(name.to_owned(), value);
    }
    Value::Object(args)
}

fn run(scenario: &str, url: &str, version: &str, context: &Value) -> Result<(), Failure> {
    if !scenario.starts_with("auth/") {
        return run_once(scenario, url, version, context, None);
    }
    let flow = Rc::new(RefCell::new(oauth_flow(url, context)?));
    // Each round ends at a 401 or 403 (then the flow runs and the scenario starts again with
    // the token) or with the scenario's outcome; the flow's own bound stops a server that
    // never accepts.
    for _ in 0..8 {
        let tokens = Box::new(FlowTokens(flow.clone()));
        match run_once(scenario, url, version, context, Some(tokens)) {
            Err(Failure { auth: Some((status, challenge)), text }) => {
                println!("oauth: {text}; authorizing");
                drive(&mut flow.borrow_mut(), status, &challenge)
                    .map_err(|e| format!("oauth: {e}"))?;
            }
            outcome => return outcome,
        }
    }
    Err("oauth: too many rounds".into())
}

fn run_once(
    scenario: &str,
    url: &str,
    version: &str,
    context: &Value,
    tokens: Option<Box<dyn TokenProvider>>,
) -> Result<(), Failure> {
    let mut c = Client::connect(url, version, tokens)?;
    match scenario {
        // The handshake itself is what is checked.
        "initialize" => {}
        "tools_call" => {
            c.list(Method::ToolsList, "tools")?;
            let args =
                RawValue::from_string(r#"{"a":5,"b":3}"#.into()).map_err(|e| e.to_string())?;
            c.call_tool("add_numbers", &args)?;
        }
        "http-standard-headers" => {
            c.call_every_tool()?;
            for resource in c.list(Method::ResourcesList, "resources")? {
                let uri = resource["uri"].as_str().unwrap_or_default().to_owned();
                let call = c.host.read_resource(c.server, &uri, &c.opts);
                c.finish(&format!("resources/read {uri}"), call)?;
            }
            for prompt in c.list(Method::PromptsList, "prompts")? {
                let name = prompt["name"].as_str().unwrap_or_default().to_owned();
                let call = c.host.get_prompt(c.server, &name, None, &c.opts);
                c.finish(&format!("prompts/get {name}"), call)?;
            }
        }
        // The calls to make come from the harness; listing first teaches mcpoll the tools'
        // x-mcp-header annotations, as a host's first listing would.
        "http-custom-headers" => {
            c.list(Method::ToolsList, "tools")?;
            for call in context["toolCalls"].as_array().into_iter().flatten() {
                let name = call["name"].as_str().unwrap_or_default();
                let args = RawValue::from_string(call["arguments"].to_string());
                c.call_tool(name, &args.map_err(|e| e.to_string())?)?;
            }
        }
        // Round-trip the focal tool's inputSchema, as listed, through the echo tool.
        "json-schema-2020-12-preservation" => {
            let call = c.host.list(c.server, Method::ToolsList, &c.opts);
            let listing = c.finish("tools", call)?;
            #[derive(serde::Deserialize)]
            struct Listing<'a> {
                #[serde(borrow)]
                tools: Vec<Tool<'a>>,
            }
            #[derive(serde::Deserialize)]
            struct Tool<'a> {
                name: String,
                #[serde(borrow, rename = "inputSchema")]
                input_schema: Option<&'a RawValue>,
            }
            let listing: Listing<'_> =
                serde_json::from_str(&listing.json).map_err(|e| e.to_string())?;
            let schema = listing
                .tools
                .iter()
                .find(|t| t.name == "json_schema_2020_12_tool")
                .and_then(|t| t.input_schema)
                .ok_or("json_schema_2020_12_tool not listed")?;
            let args = RawValue::from_string(format!(r#"{{"schema":{}}}"#, schema.get()));
            c.call_tool("json_schema_echo", &args.map_err(|e| e.to_string())?)?;
        }
        // Listing is the whole test: a network $ref in a schema must not be fetched.
        "json-schema-ref-no-deref" => {
            c.list(Method::ToolsList, "tools")?;
        }
        // Everything else (request-metadata, sse-retry, http-invalid-tool-headers, the
        // input_required and elicitation scenarios, auth/*): list and call what is offered.
        _ => c.call_every_tool()?,
    }
    c.host.close_server(c.server);
    Ok(())
}

/// The flow for `url`, set up from the scenario's context: pre-registered credentials or
/// client credentials when the harness gives them, else the authorization code grant with the
/// suite's Client ID Metadata Document URL (used only where the server advertises support).
fn oauth_flow(url: &str, context: &Value) -> Result<OAuthFlow, String> {
    let field = |name: &str| context[name].as_str().map(String::from);
    let scenario = field("name").unwrap_or_default();
    let mut config = if scenario.starts_with("auth/client-credentials") {
        let id = field("client_id").ok_or("no client_id in the context")?;
        let client = match (field("client_secret"), field("private_key_pem")) {
            (Some(secret), _) => PreRegistered::with_secret(id, secret),
            (None, Some(pem)) => {
                let alg = field("signing_algorithm").unwrap_or_else(|| "ES256".into());
                let alg = JwtAlgorithm::from_name(&alg).ok_or("unknown signing_algorithm")?;
                let key = SigningKey::from_pkcs8_pem(&pem, alg).map_err(|e| e.to_string())?;
                PreRegistered::with_key(id, key)
            }
            (None, None) => return Err("no client secret or key in the context".into()),
        };
        OAuthConfig::client_credentials(url, client)
    } else {
        let mut config = OAuthConfig::authorization_code(url, "http://127.0.0.1:3333/callback");
        config.client_metadata_url =
            Some("https://conformance-test.local/client-metadata.json".into());
        if let (Some(id), Some(secret)) = (field("client_id"), field("client_secret")) {
            config.pre_registered = Some(PreRegistered::with_secret(id, secret));
        }
        config
    };
    config.client_name = "mcpoll-conformance-client".into();
    let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    OAuthFlow::new(config, Instant::now(), unix).map_err(|e| e.to_string())
}

/// Tokens from the flow for the HTTP driver. The driver asks for a fresh token after a 401
/// without passing the challenge, so a refresh runs the flow only when a token was held
/// (the server stopped accepting it: rediscovery finds a moved authorization server); a first
/// 401 goes back to `run` with its challenge instead.
#[derive(Debug)]
struct FlowTokens(Rc<RefCell<OAuthFlow>>);

impl TokenProvider for FlowTokens {
    fn token(&mut self) -> Option<String> {
        self.0.borrow().bearer(Instant::now()).map(|t| t.expose().to_owned())
    }

    fn refresh(&mut self) -> Option<String> {
        self.token()?;
        let mut flow = self.0.borrow_mut();
        if let Err(e) = drive(&mut flow, 401, &AuthChallenge::default()) {
            println!("oauth: refresh: {e}");
            return None;
        }
        flow.bearer(Instant::now()).map(|t| t.expose().to_owned())
    }
}

/// Runs the flow to its end over blocking HTTP.
fn drive(flow: &mut OAuthFlow, status: u16, challenge: &AuthChallenge) -> Result<(), String> {
    flow.handle_challenge(Instant::now(), status, challenge);
    loop {
        match flow.poll_action() {
            Some(Action::Send(req)) => {
                let method = if req.method == HttpMethod::Get { "GET" } else { "POST" };
                println!("oauth: {method} {}", req.url);
                match http(method, &req.url, &req.headers, &req.body) {
                    Ok(reply) => {
                        println!("oauth: -> {}", reply.status);
                        let response = HttpResponse { status: reply.status, body: &reply.body };
                        flow.handle_response(Instant::now(), req.id, response);
                    }
                    Err(e) => {
                        println!("oauth: {e}");
                        flow.handle_transport_error(Instant::now(), req.id);
                    }
                }
            }
            Some(Action::Authorize(url)) => flow.authorize_with(Instant::now(), &url, &mut Follow),
            Some(Action::Ready) => return Ok(()),
            Some(Action::Failed(e)) => return Err(e.to_string()),
            Some(_) => {}
            None => return Err("the flow stalled".into()),
        }
    }
}

/// The headless authorizer: GET the authorization URL and take the redirect it answers with,
/// as a browser would before landing on the loopback redirect URI.
struct Follow;

impl Authorizer for Follow {
    fn authorize(&mut self, url: &str) -> Option<String> {
        println!("oauth: authorize {}", url.split('?').next().unwrap_or_default());
        let reply = http("GET", url, &[], &[]).ok()?;
        let location = reply.headers.into_iter().find(|(k, _)| k.eq_ignore_ascii_case("location"));
        location.filter(|_| (300..400).contains(&reply.status)).map(|(_, v)| v)
    }
}

/// What [`http`] read.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// One HTTP/1.1 exchange over plain TCP (the harness's servers are on loopback), read to the
/// end of the connection.
fn http(method: &str, url: &str, headers: &[(&str, String)], body: &[u8]) -> Result<Reply, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("not http: {url}"))?;
    let (authority, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let target = if target.is_empty() { "/" } else { target };
    let mut stream = TcpStream::connect(authority).map_err(|e| format!("{authority}: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body))
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no response head")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("bad status line")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    if chunked {
        body = dechunk(&body);
    }
    Ok(Reply { status, headers, body })
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = data.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&data[..end]).ok();
        let size = size.and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok());
        let Some(size) = size.filter(|&n| n > 0 && data.len() >= end + 2 + n) else { break };
        out.extend_from_slice(&data[end + 2..end + 2 + size]);
        data = data.get(end + 4 + size..).unwrap_or_default();
    }
    out
}

fn main() -> ExitCode {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let version =
        std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").unwrap_or_else(|_| "2025-11-25".into());
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: conformance_client URL (MCP_CONFORMANCE_* in the environment)");
        return ExitCode::from(2);
    };
    println!("scenario {scenario:?} at {version} against {url}");
    match run(&scenario, &url, &version, &context) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance_client: {scenario}: {e}");
            ExitCode::FAILURE
        }
    }
}
