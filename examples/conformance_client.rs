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
//! asks, the scenario fails; `tests/conformance/expected-failures-*.yaml` lists those. OAuth
//! (`auth/*`) is configuration only: the HTTP driver runs `mcpoll::oauth`'s flow on a 401 or
//! 403 and sends the refused requests again with the token; the one thing a host supplies is
//! the [`Authorizer`], here a headless one that follows the authorization URL with its own
//! HTTP GET. Each step is printed to stdout, which the harness keeps beside the scenario's
//! checks. `unwrap`s on the harness's own input are for this test tool only.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::time::Duration;

use mcpoll::oauth::{
    Assertion, AssertionRequest, AuthorizeError, Authorizer, DpopMode, IdentityProvider,
    JwtAlgorithm, OAuthConfig, PreRegistered, SigningKey,
};
use mcpoll::{
    elicitation_defaults, BlockingError, CallId, CallOptions, Config, EraPreference, Event, Host,
    HttpOptions, Method, OwnedResult, ServerId, ServerRequestKind, ServerRequestKinds, ServerState,
};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// Per-call deadline: a call that cannot complete (a server request mcpoll does not answer yet)
/// ends well inside the harness's 30 s per scenario.
const CALL_TIMEOUT: Duration = Duration::from_secs(8);

/// Why a scenario stopped.
type Failure = String;

struct Client {
    host: Host,
    server: ServerId,
    opts: CallOptions,
}

impl Client {
    fn connect(
        url: &str,
        protocol_version: &str,
        oauth: Option<OAuthConfig>,
        extensions: &str,
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
            extensions: extensions.into(),
            ..Config::default()
        };
        let mut host = Host::new().map_err(|e| format!("poll: {e}"))?;
        let mut options = HttpOptions::new(url);
        if let Some(config) = oauth {
            options = options.oauth(config).authorizer(Box::new(Follow));
        }
        let server =
            host.add_http_server(options, config).map_err(|e| format!("add_http_server: {e}"))?;
        let state = host.wait_ready(server, CALL_TIMEOUT * 2).map_err(|e| e.to_string())?;
        println!("connected: {state} (era {:?})", host.era(server));
        if !matches!(state, ServerState::Ready(..)) {
            while let Some((_, event)) = host.poll_event() {
                if let mcpoll::Event::Closed { error } = event {
                    return Err(format!("not ready: {error}"));
                }
            }
            return Err(format!("not ready: {state}"));
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
        outcome.map_err(|e| format!("{what}: {e}"))
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

/// The skills extension (SEP-2640), the host side: `skills/list` by name, and loading a skill
/// with every file checked against its entry (size, digest, and SKILL.md's frontmatter) before
/// it is used.
impl Client {
    fn skills(&mut self) -> Result<Vec<Value>, Failure> {
        let call = self.host.request(self.server, "skills/list", None, &self.opts);
        let r = self.finish("skills/list", call)?;
        let mut v: Value = serde_json::from_str(&r.json).map_err(|e| e.to_string())?;
        Ok(match v.get_mut("skills").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        })
    }

    /// Reads the skill's SKILL.md (the entry's `uri`) and then its other files, each checked
    /// before the next is read; the first mismatch ends the load.
    fn load_skill(&mut self, entry: &Value) -> Result<(), Failure> {
        let main = entry["uri"].as_str().ok_or("a skill entry without uri")?;
        let files = entry["resources"].as_array().cloned().unwrap_or_default();
        let listed = |uri: &str| files.iter().find(|f| f["uri"] == uri).cloned();
        let main_file = listed(main).ok_or("SKILL.md is not among the entry's resources")?;
        let body = self.read_checked(&main_file)?;
        check_frontmatter(&body, &entry["frontmatter"])?;
        for file in files.iter().filter(|f| f["uri"] != main) {
            self.read_checked(file)?;
        }
        Ok(())
    }

    /// One file's text, if its byte length and SHA-256 digest match the entry.
    fn read_checked(&mut self, file: &Value) -> Result<String, Failure> {
        let uri = file["uri"].as_str().ok_or("a skill file without uri")?;
        let call = self.host.read_resource(self.server, uri, &self.opts);
        let r = self.finish(&format!("resources/read {uri}"), call)?;
        let v: Value = serde_json::from_str(&r.json).map_err(|e| e.to_string())?;
        let text = v["contents"][0]["text"].as_str().ok_or("no text content")?.to_owned();
        if file["size"].as_u64() != Some(text.len() as u64) {
            return Err(format!("{uri}: {} bytes, the entry says {}", text.len(), file["size"]));
        }
        let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        if file["digest"].as_str() != Some(&format!("sha256:{hex}")) {
            return Err(format!("{uri}: digest sha256:{hex} differs from the entry's"));
        }
        Ok(text)
    }
}

/// Compares SKILL.md's YAML frontmatter (the `key: value` lines between the `---` fences)
/// field by field with the entry's.
fn check_frontmatter(body: &str, expected: &Value) -> Result<(), Failure> {
    let mut lines = body.lines();
    if lines.next().map(str::trim) != Some("---") {
        return Err("SKILL.md has no frontmatter".into());
    }
    let mut found = serde_json::Map::new();
    for line in lines.by_ref().take_while(|l| l.trim() != "---") {
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
            found.insert(k.trim().to_owned(), Value::String(v.to_owned()));
        }
    }
    for (key, want) in expected.as_object().into_iter().flatten() {
        if found.get(key) != Some(want) {
            return Err(format!("frontmatter {key}: {:?}, the entry says {want}", found.get(key)));
        }
    }
    Ok(())
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
    let oauth = match scenario.starts_with("auth/") {
        true => Some(oauth_config(url, context)?),
        false => None,
    };
    // The skills extension (SEP-2640) is declared for its scenarios only.
    let skills = scenario.starts_with("sep-2640-");
    let extensions = if skills { r#"{"io.modelcontextprotocol/skills":{}}"# } else { "{}" };
    let mut c = Client::connect(url, version, oauth, extensions)?;
    match scenario {
        // Listing skills opens no file: a file is read only when its skill is loaded.
        "sep-2640-client-no-prefetch" => {
            c.skills()?;
        }
        // Load the listed skill as a host does when it needs it: its SKILL.md first, checked
        // against the entry, and its other files only if that holds.
        s if s.starts_with("sep-2640-client-verify-") => {
            for entry in c.skills()? {
                match c.load_skill(&entry) {
                    Ok(()) => println!("skill {} loaded", entry["uri"]),
                    Err(e) => println!("skill {} refused: {e}", entry["uri"]),
                }
            }
        }
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

/// The OAuth configuration for `url`, from the scenario's context: the workload's JWT
/// (JWT-bearer grant), the user's identity token and the identity provider (enterprise-managed
/// authorization), pre-registered credentials or client credentials when the harness gives
/// them, else the authorization code grant with the
/// suite's Client ID Metadata Document URL (used only where the server advertises support).
fn oauth_config(url: &str, context: &Value) -> Result<OAuthConfig, String> {
    let field = |name: &str| context[name].as_str().map(String::from);
    let scenario = field("name").unwrap_or_default();
    let config = if scenario == "auth/wif-jwt-bearer" {
        // Workload identity: the workload's JWT, as a host's token file would give it.
        let id = field("client_id").ok_or("no client_id in the context")?;
        let jwt = field("valid_jwt").ok_or("no valid_jwt in the context")?;
        let provider = move |_: &AssertionRequest<'_>| Ok(Assertion::new(jwt.clone()));
        OAuthConfig::jwt_bearer(url, id, Box::new(provider))
    } else if scenario == "auth/enterprise-managed-authorization" {
        // The identity token the user signed in with at the enterprise identity provider,
        // exchanged there for an ID-JAG.
        let id = field("client_id").ok_or("no client_id in the context")?;
        let secret = field("client_secret").ok_or("no client_secret in the context")?;
        let endpoint = field("idp_token_endpoint").ok_or("no idp_token_endpoint")?;
        let idp =
            IdentityProvider::new(endpoint, field("idp_client_id").ok_or("no idp_client_id")?);
        let id_token = field("idp_id_token").ok_or("no idp_id_token in the context")?;
        let provider = move |_: &AssertionRequest<'_>| Ok(Assertion::new(id_token.clone()));
        let client = PreRegistered::with_secret(id, secret);
        OAuthConfig::identity_assertion(url, client, idp, Box::new(provider))
    } else if scenario.starts_with("auth/client-credentials") {
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
        let config = OAuthConfig::authorization_code(url, "http://127.0.0.1:3333/callback")
            .client_metadata_url("https://conformance-test.local/client-metadata.json");
        match (field("client_id"), field("client_secret")) {
            (Some(id), Some(secret)) => {
                config.pre_registered(PreRegistered::with_secret(id, secret))
            }
            _ => config,
        }
    };
    // DPoP where the authorization server offers it (the auth/dpop* scenarios); every other
    // scenario's server does not, so they run with bearer tokens as before.
    Ok(config.client_name("mcpoll-conformance-client").dpop(DpopMode::IfSupported))
}

/// The headless authorizer: GET the authorization URL and take the redirect it answers with,
/// as a browser would before landing on the loopback redirect URI.
struct Follow;

impl Authorizer for Follow {
    fn authorize(&mut self, url: &str) -> Result<String, AuthorizeError> {
        println!("oauth: authorize {}", url.split('?').next().unwrap_or_default());
        redirect_of(url).map_err(|e| {
            println!("oauth: authorize: {e}");
            AuthorizeError::NoRedirect
        })
    }
}

/// GETs `url` over plain TCP (the harness's servers are on loopback) and returns the
/// `Location` of its 3xx answer.
fn redirect_of(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("not http: {url}"))?;
    let (authority, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let target = if target.is_empty() { "/" } else { target };
    let mut stream = TcpStream::connect(authority).map_err(|e| format!("{authority}: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let head = format!("GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no response head")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("bad status line")?;
    if !(300..400).contains(&status) {
        return Err(format!("HTTP {status}, not a redirect"));
    }
    lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("location"))
        .map(|(_, v)| v.trim().to_owned())
        .ok_or_else(|| "a redirect without Location".into())
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
