//! The `mcpServers` JSON file that desktop MCP hosts use, read into servers a [`Host`] can
//! start.
//!
//! The format is the one Claude Desktop, Claude Code, Cursor and VS Code share: an object of
//! named server entries under `mcpServers` (or `servers`, VS Code's name for it). A stdio entry
//! has `command`, `args`, `env` and `cwd`; an HTTP entry has `url`, `type` (`"http"` or
//! `"streamable-http"`) and `headers`. mcpoll's own per-server settings go in one nested
//! `"mcpoll"` object, so the same file stays readable by the other hosts. README.md lists
//! every key.
//!
//! Strings in `command`, `args`, `env`, `cwd`, `url` and `headers` expand `${VAR}`,
//! `${VAR:-default}` (as Claude Code does), `${env:VAR}` (as VS Code and Cursor do) and
//! `${userHome}`. A bare `$VAR` is left alone. An unset variable without a default is an error,
//! and so is any other `${...}` form (`${input:..}`, `${workspaceFolder}`): mcpoll has no
//! prompt or workspace to take them from.
//!
//! Parsing goes through `serde_json::Value` by hand (no derive), so every error can name the
//! file, the server and the key it is about.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::Config;
#[cfg(feature = "http")]
use crate::driver::http::HttpOptions;
use crate::driver::stdio::StdioCommand;
#[cfg(feature = "http")]
use crate::driver::tls::TlsOptions;
#[cfg(feature = "http")]
use crate::driver::url::ProxyChoice;
#[cfg(feature = "http")]
use crate::oauth::{
    Assertion, AssertionRequest, DpopMode, IdentityProvider, OAuthConfig, PreRegistered, Secret,
};
use crate::proto::version::EraPreference;
#[cfg(doc)]
use crate::{DefaultPolicy, Host};

/// Keys other hosts put in a server entry. `disabled: true` is honoured by
/// [`Host::from_config`] (the server is not started); `disabledTools` refuses those tools
/// locally and hides them ([`Host::disable_tools`]); `alwaysAllow` and `autoApprove` mark tools
/// the [`DefaultPolicy`] never asks about ([`Host::always_allow_tools`]);
/// the rest mean nothing to mcpoll.
const FOREIGN_KEYS: &[&str] =
    &["disabled", "autoApprove", "alwaysAllow", "disabledTools", "description", "icon"];

/// A parsed `mcpServers` file: the entries mcpoll can use, and, apart, each one it cannot with
/// its error. One bad entry never makes the others unusable.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    servers: Vec<ConfiguredServer>,
    refused: Vec<RefusedEntry>,
}

/// An entry that could not be read, with why.
#[derive(Debug, Clone)]
struct RefusedEntry {
    /// `"disabled": true` could still be read from it.
    disabled: bool,
    error: ConfigFileError,
}

/// One server entry of a [`ConfigFile`].
#[derive(Debug, Clone)]
pub struct ConfiguredServer {
    name: String,
    pub(crate) transport: ConfiguredTransport,
    config: Config,
    disabled: bool,
    /// `mcpoll.roots`: the directories offered as roots, absolute.
    roots: Vec<PathBuf>,
    /// `disabledTools`.
    disabled_tools: Vec<String>,
    /// `alwaysAllow` and `autoApprove` together.
    always_allow: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) enum ConfiguredTransport {
    Stdio(StdioCommand),
    #[cfg(feature = "http")]
    Http(HttpEntry),
}

/// The parts of [`HttpOptions`] a file can set (`HttpOptions` itself holds boxed providers and
/// is not `Clone`, so it is built when the server is added). `Debug` shows header names only:
/// their values are often credentials.
#[cfg(feature = "http")]
#[derive(Clone)]
pub(crate) struct HttpEntry {
    url: String,
    headers: Vec<(String, String)>,
    tls: TlsOptions,
    proxy: ProxyChoice,
    max_connections: Option<usize>,
    connect_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    alternates: Vec<String>,
    oauth: Option<Box<OAuthEntry>>,
}

/// A grant without a user, from `mcpoll.oauth` (the authorization code grant needs a host
/// that takes the user to a browser: it is set up in code, with `HttpOptions::oauth`).
#[cfg(feature = "http")]
#[derive(Debug, Clone)]
struct OAuthEntry {
    client_id: String,
    /// Required for client credentials and the identity assertion grant.
    client_secret: Option<Secret>,
    /// `issuer`: the only authorization server the secret may go to.
    issuer: Option<String>,
    /// `dpop`: `off` (the default), `ifSupported` or `required`.
    dpop: DpopMode,
    grant: FileGrant,
}

/// `mcpoll.oauth.grant`, with what each grant needs.
#[cfg(feature = "http")]
#[derive(Debug, Clone)]
enum FileGrant {
    ClientCredentials,
    JwtBearer(AssertionSource),
    IdentityAssertion { idp: IdentityProvider, id_token: AssertionSource },
}

/// `assertion` (a value, `${VAR}` expanded) or `assertionFile` (read when the flow asks).
#[cfg(feature = "http")]
#[derive(Debug, Clone)]
enum AssertionSource {
    Value(Secret),
    File(PathBuf),
}

#[cfg(feature = "http")]
impl AssertionSource {
    fn provider(&self) -> Box<dyn crate::oauth::AssertionProvider> {
        match self {
            Self::Value(v) => {
                let v = v.clone();
                Box::new(move |_: &AssertionRequest<'_>| Ok(Assertion::new(v.expose())))
            }
            Self::File(path) => Box::new(crate::driver::http::AssertionFile::new(path.clone())),
        }
    }
}

#[cfg(feature = "http")]
impl fmt::Debug for HttpEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpEntry")
            .field("url", &crate::redact::RedactedUrl(&self.url))
            .field("header_names", &header_names)
            .field("tls", &self.tls)
            .field("proxy", &self.proxy)
            .field("max_connections", &self.max_connections)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("alternates", &crate::redact::RedactedUrls(&self.alternates))
            .field("oauth", &self.oauth)
            .finish()
    }
}

/// Why a configuration file (or one entry of it) was refused: which file, which server, which
/// key, and what is wrong with it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConfigFileError {
    /// The file.
    pub file: PathBuf,
    /// The server entry, when the fault is inside one.
    pub server: Option<String>,
    /// The key, as a dotted path inside the entry (`mcpoll.retry.maxAttempts`, `env.TOKEN`).
    pub key: Option<String>,
    /// What is wrong.
    pub kind: ConfigFileErrorKind,
}

/// What is wrong in a configuration file.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigFileErrorKind {
    /// The file could not be read.
    Io(io::Error),
    /// The file is not JSON (serde_json's message, with line and column).
    Syntax(String),
    /// Neither `mcpServers` nor `servers` is there.
    NoServers,
    /// Both `mcpServers` and `servers` are there: which one is meant is unclear.
    BothServerKeys,
    /// A key mcpoll does not know.
    UnknownKey,
    /// A value of the wrong JSON type.
    WrongType {
        /// What the key must hold.
        expected: &'static str,
    },
    /// A required key is absent.
    Missing,
    /// An entry has both `command` and `url`, or a key of the other transport.
    Conflict(&'static str),
    /// `type` names a transport mcpoll does not speak (`sse`, the 2024 HTTP+SSE transport).
    UnsupportedTransport(String),
    /// A value out of range or unusable.
    Invalid(&'static str),
    /// `${VAR}` names a variable that is not set, and gives no default.
    UnsetVariable(String),
    /// A `${...}` form mcpoll cannot expand (`${input:..}`, `${workspaceFolder}`), or an
    /// unclosed `${`.
    UnsupportedVariable(String),
}

impl Clone for ConfigFileErrorKind {
    fn clone(&self) -> Self {
        match self {
            // `io::Error` is not `Clone`: its kind and message are.
            Self::Io(e) => Self::Io(io::Error::new(e.kind(), e.to_string())),
            Self::Syntax(s) => Self::Syntax(s.clone()),
            Self::NoServers => Self::NoServers,
            Self::BothServerKeys => Self::BothServerKeys,
            Self::UnknownKey => Self::UnknownKey,
            Self::WrongType { expected } => Self::WrongType { expected },
            Self::Missing => Self::Missing,
            Self::Conflict(why) => Self::Conflict(why),
            Self::UnsupportedTransport(t) => Self::UnsupportedTransport(t.clone()),
            Self::Invalid(why) => Self::Invalid(why),
            Self::UnsetVariable(v) => Self::UnsetVariable(v.clone()),
            Self::UnsupportedVariable(v) => Self::UnsupportedVariable(v.clone()),
        }
    }
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(s) = &self.server {
            write!(f, ": server {s:?}")?;
        }
        if let Some(k) = &self.key {
            write!(f, ": key {k:?}")?;
        }
        f.write_str(": ")?;
        match &self.kind {
            ConfigFileErrorKind::Io(e) => write!(f, "cannot read: {e}"),
            ConfigFileErrorKind::Syntax(e) => write!(f, "not JSON: {e}"),
            ConfigFileErrorKind::NoServers => f.write_str("no \"mcpServers\" object"),
            ConfigFileErrorKind::BothServerKeys => {
                f.write_str("both \"mcpServers\" and \"servers\" are given")
            }
            ConfigFileErrorKind::UnknownKey => f.write_str("unknown key"),
            ConfigFileErrorKind::WrongType { expected } => write!(f, "must be {expected}"),
            ConfigFileErrorKind::Missing => f.write_str("required, but missing"),
            ConfigFileErrorKind::Conflict(why) => f.write_str(why),
            ConfigFileErrorKind::UnsupportedTransport(t) => {
                write!(f, "transport {t:?} is not supported (use \"http\" or \"stdio\")")
            }
            ConfigFileErrorKind::Invalid(why) => f.write_str(why),
            ConfigFileErrorKind::UnsetVariable(v) => {
                write!(f, "environment variable {v} is not set (give ${{{v}:-default}})")
            }
            ConfigFileErrorKind::UnsupportedVariable(v) => {
                let forms = "${VAR}, ${VAR:-default}, ${env:VAR}, ${userHome}";
                write!(f, "cannot expand {v:?} (only {forms})")
            }
        }
    }
}

impl std::error::Error for ConfigFileError {}

impl ConfigFile {
    /// Reads and parses a file, expanding variables from the process environment.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigFileError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigFileError {
            file: path.to_owned(),
            server: None,
            key: None,
            kind: ConfigFileErrorKind::Io(e),
        })?;
        Self::parse(path, &text, |name| std::env::var(name).ok())
    }

    /// Parses `text` as the file `file` (named in errors), taking variables from `env`.
    pub fn parse(
        file: &Path,
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigFileError> {
        let mut p = Parser { file, server: None, env: &env };
        let root: Value = serde_json::from_str(text)
            .map_err(|e| p.err(None, ConfigFileErrorKind::Syntax(e.to_string())))?;
        let root = root.as_object().ok_or_else(|| {
            p.err(None, ConfigFileErrorKind::WrongType { expected: "a JSON object" })
        })?;
        // Other top-level keys belong to the host that owns the file (Claude Desktop keeps its
        // preferences there, VS Code its `inputs`): they are not mcpoll's to judge.
        let servers = match (root.get("mcpServers"), root.get("servers")) {
            (Some(_), Some(_)) => return Err(p.err(None, ConfigFileErrorKind::BothServerKeys)),
            (Some(v), None) => ("mcpServers", v),
            (None, Some(v)) => ("servers", v),
            (None, None) => return Err(p.err(None, ConfigFileErrorKind::NoServers)),
        };
        let map = servers.1.as_object().ok_or_else(|| {
            p.err(Some(servers.0), ConfigFileErrorKind::WrongType { expected: "an object" })
        })?;
        let mut out = Vec::with_capacity(map.len());
        let mut refused = Vec::new();
        // Each entry on its own: a fault stays with its entry.
        for (name, entry) in map {
            p.server = Some(name);
            match p.server_entry(name, entry) {
                Ok(server) => out.push(server),
                Err(error) => {
                    let disabled = entry.get("disabled") == Some(&Value::Bool(true));
                    refused.push(RefusedEntry { disabled, error });
                }
            }
        }
        Ok(Self { servers: out, refused })
    }

    /// Every server mcpoll can use, in name order.
    pub fn servers(&self) -> impl Iterator<Item = &ConfiguredServer> + '_ {
        self.servers.iter()
    }

    /// The usable server named `name`.
    pub fn server(&self, name: &str) -> Option<&ConfiguredServer> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// The entry named `name`: the server, or why mcpoll cannot use it (the error names the
    /// file, the server and the key).
    pub fn entry(&self, name: &str) -> Option<Result<&ConfiguredServer, &ConfigFileError>> {
        if let Some(s) = self.server(name) {
            return Some(Ok(s));
        }
        let refused = self.refused.iter().find(|r| r.error.server.as_deref() == Some(name));
        refused.map(|r| Err(&r.error))
    }

    /// The errors of the entries mcpoll cannot use, in name order (one each).
    pub fn errors(&self) -> impl Iterator<Item = &ConfigFileError> + '_ {
        self.refused.iter().map(|r| &r.error)
    }

    /// The entries not marked `"disabled": true`, usable or not, in name order.
    pub fn enabled_entries(
        &self,
    ) -> impl Iterator<Item = Result<&ConfiguredServer, &ConfigFileError>> + '_ {
        let good = self.servers.iter().filter(|s| !s.disabled).map(Ok);
        let bad = self.refused.iter().filter(|r| !r.disabled).map(|r| Err(&r.error));
        let name = |e: &Result<&ConfiguredServer, &ConfigFileError>| match e {
            Ok(s) => s.name.clone(),
            Err(e) => e.server.clone().unwrap_or_default(),
        };
        let mut all: Vec<_> = good.chain(bad).collect();
        all.sort_by_key(name);
        all.into_iter()
    }
}

impl ConfiguredServer {
    /// Its name in the file.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The engine configuration, defaults plus the entry's `mcpoll` settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The engine configuration, to adjust before the server is added.
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// `"disabled": true` in the file: [`Host::from_config`] does not start it.
    pub fn is_disabled(&self) -> bool {
        self.disabled
    }

    /// The directories `mcpoll.roots` offers the server as its roots (absolute: a relative
    /// one is taken from the file's folder); [`Host::add_configured`] sets them with
    /// [`Host::set_root_dirs`], and the entry's config declares roots.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The tools under `disabledTools`: refused locally and hidden from catalogs.
    pub fn disabled_tools(&self) -> &[String] {
        &self.disabled_tools
    }

    /// The tools under `alwaysAllow` and `autoApprove`: never asked about by the
    /// [`crate::DefaultPolicy`].
    pub fn always_allowed_tools(&self) -> &[String] {
        &self.always_allow
    }

    /// The command of a stdio server.
    pub fn stdio_command(&self) -> Option<&StdioCommand> {
        match &self.transport {
            ConfiguredTransport::Stdio(c) => Some(c),
            #[cfg(feature = "http")]
            ConfiguredTransport::Http(_) => None,
        }
    }

    /// The URL of an HTTP server.
    pub fn url(&self) -> Option<&str> {
        match &self.transport {
            ConfiguredTransport::Stdio(_) => None,
            #[cfg(feature = "http")]
            ConfiguredTransport::Http(h) => Some(&h.url),
        }
    }

    /// The options of an HTTP server, built fresh (add headers or a token provider to them).
    #[cfg(feature = "http")]
    pub fn http_options(&self) -> Option<HttpOptions> {
        match &self.transport {
            ConfiguredTransport::Http(h) => Some(h.options()),
            ConfiguredTransport::Stdio(_) => None,
        }
    }
}

#[cfg(feature = "http")]
impl HttpEntry {
    pub(crate) fn options(&self) -> HttpOptions {
        let mut o = HttpOptions::new(self.url.clone());
        o.headers.clone_from(&self.headers);
        o.tls = self.tls.clone();
        o.proxy = self.proxy.clone();
        o.max_connections = self.max_connections.unwrap_or(o.max_connections);
        o.connect_timeout = self.connect_timeout.unwrap_or(o.connect_timeout);
        o.idle_timeout = self.idle_timeout.unwrap_or(o.idle_timeout);
        o.alternates.clone_from(&self.alternates);
        if let Some(a) = &self.oauth {
            let mut client = PreRegistered::public(&a.client_id);
            client.client_secret.clone_from(&a.client_secret);
            client.issuer.clone_from(&a.issuer);
            let url = self.url.clone();
            o = o.oauth(
                match &a.grant {
                    FileGrant::ClientCredentials => OAuthConfig::client_credentials(url, client),
                    FileGrant::JwtBearer(source) => {
                        OAuthConfig::jwt_bearer(url, &a.client_id, source.provider())
                            .pre_registered(client)
                    }
                    FileGrant::IdentityAssertion { idp, id_token } => {
                        OAuthConfig::identity_assertion(
                            url,
                            client,
                            idp.clone(),
                            id_token.provider(),
                        )
                    }
                }
                .dpop(a.dpop),
            );
        }
        o
    }
}

/// The parse of one file: where errors point, and where variables come from.
struct Parser<'a> {
    file: &'a Path,
    server: Option<&'a str>,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Parser<'a> {
    fn err(&self, key: Option<&str>, kind: ConfigFileErrorKind) -> ConfigFileError {
        ConfigFileError {
            file: self.file.to_owned(),
            server: self.server.map(str::to_owned),
            key: key.map(str::to_owned),
            kind,
        }
    }

    fn wrong(&self, key: &str, expected: &'static str) -> ConfigFileError {
        self.err(Some(key), ConfigFileErrorKind::WrongType { expected })
    }

    fn server_entry(&self, name: &str, entry: &Value) -> Result<ConfiguredServer, ConfigFileError> {
        let entry = entry.as_object().ok_or_else(|| {
            self.err(None, ConfigFileErrorKind::WrongType { expected: "an object" })
        })?;
        let kind = match entry.get("type") {
            None => None,
            Some(Value::String(t)) => Some(t.as_str()),
            Some(_) => return Err(self.wrong("type", "a string")),
        };
        let is_http = match (kind, entry.contains_key("command"), entry.contains_key("url")) {
            (_, true, true) => {
                return Err(self.err(
                    Some("url"),
                    ConfigFileErrorKind::Conflict("an entry has either \"command\" or \"url\""),
                ))
            }
            (Some("stdio"), _, true) => {
                return Err(self.err(
                    Some("url"),
                    ConfigFileErrorKind::Conflict("a stdio server has no \"url\""),
                ))
            }
            (Some("stdio"), _, _) => false,
            (Some("http" | "streamable-http" | "streamableHttp"), true, _) => {
                return Err(self.err(
                    Some("command"),
                    ConfigFileErrorKind::Conflict("an HTTP server has no \"command\""),
                ))
            }
            (Some("http" | "streamable-http" | "streamableHttp"), _, _) => true,
            (Some(other), _, _) => {
                return Err(self.err(
                    Some("type"),
                    ConfigFileErrorKind::UnsupportedTransport(other.to_owned()),
                ))
            }
            (None, _, url) => url,
        };
        let stdio_keys: &[&str] = &["command", "args", "env", "cwd"];
        let http_keys: &[&str] = &["url", "headers"];
        for key in entry.keys() {
            let k = key.as_str();
            let (own, other) =
                if is_http { (http_keys, stdio_keys) } else { (stdio_keys, http_keys) };
            if own.contains(&k) || k == "type" || k == "mcpoll" || FOREIGN_KEYS.contains(&k) {
                continue;
            }
            if other.contains(&k) {
                let why = if is_http {
                    "a stdio key in an HTTP server's entry"
                } else {
                    "an HTTP key in a stdio server's entry"
                };
                return Err(self.err(Some(k), ConfigFileErrorKind::Conflict(why)));
            }
            return Err(self.err(Some(k), ConfigFileErrorKind::UnknownKey));
        }
        let disabled = match entry.get("disabled") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(self.wrong("disabled", "true or false")),
        };
        let own = match entry.get("mcpoll") {
            None => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => return Err(self.wrong("mcpoll", "an object")),
        };
        let mut config = Config::default();
        let mut roots = Vec::new();
        if let Some(own) = own {
            roots = self.roots(own)?;
            config.answers.roots |= !roots.is_empty();
            self.engine_settings(own, &mut config, is_http)?;
        }
        let transport = if is_http {
            self.http_entry(entry, own)?
        } else {
            let mut command = self.stdio_entry(entry)?.safe_env();
            match own.and_then(|o| o.get("inheritEnv")) {
                None | Some(Value::Bool(false)) => {}
                Some(Value::Bool(true)) => command = command.inherit_env(),
                Some(_) => return Err(self.wrong("mcpoll.inheritEnv", "true or false")),
            }
            ConfiguredTransport::Stdio(command)
        };
        let disabled_tools = self.string_list(entry, "disabledTools")?;
        let mut always_allow = self.string_list(entry, "alwaysAllow")?;
        always_allow.extend(self.string_list(entry, "autoApprove")?);
        Ok(ConfiguredServer {
            name: name.to_owned(),
            transport,
            config,
            disabled,
            disabled_tools,
            always_allow,
            roots,
        })
    }

    /// An array of strings (tool names), or nothing.
    fn string_list(
        &self,
        entry: &Map<String, Value>,
        key: &str,
    ) -> Result<Vec<String>, ConfigFileError> {
        let Some(v) = entry.get(key) else { return Ok(Vec::new()) };
        let items = v.as_array().ok_or_else(|| self.wrong(key, "an array of tool names"))?;
        items
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| self.wrong(key, "an array of tool names"))
            })
            .collect()
    }

    /// `mcpoll.roots`: an array of directories, `${VAR}` expanded, a relative one taken from
    /// the file's folder. The roots checks themselves (no `..`, existing) run when the server
    /// is added, through [`Host::set_root_dirs`].
    fn roots(&self, own: &Map<String, Value>) -> Result<Vec<PathBuf>, ConfigFileError> {
        let list = match own.get("roots") {
            None => return Ok(Vec::new()),
            Some(Value::Array(list)) => list,
            Some(_) => return Err(self.wrong("mcpoll.roots", "an array of directories")),
        };
        let mut out = Vec::with_capacity(list.len());
        for (i, v) in list.iter().enumerate() {
            let key = format!("mcpoll.roots[{i}]");
            let v = v.as_str().ok_or_else(|| self.wrong(&key, "a string"))?;
            let dir = self.in_folder(self.expand(&key, v)?.into());
            out.push(std::path::absolute(&dir).unwrap_or(dir));
        }
        Ok(out)
    }

    /// A path the file names, a relative one taken from the file's folder: the file means
    /// the same files from whichever directory the program runs.
    fn in_folder(&self, path: PathBuf) -> PathBuf {
        if path.is_absolute() {
            return path;
        }
        let parent = self.file.parent().filter(|p| !p.as_os_str().is_empty());
        let parent = parent.unwrap_or(Path::new("."));
        // Absolute and without `..`: a file named as `../proj/mcp.json` would otherwise put
        // a `..` the user never wrote in every root, which the roots checks refuse.
        let folder = std::fs::canonicalize(parent).unwrap_or_else(|_| {
            lexically_normal(&std::path::absolute(parent).unwrap_or_else(|_| parent.to_owned()))
        });
        folder.join(path)
    }

    fn stdio_entry(&self, entry: &Map<String, Value>) -> Result<StdioCommand, ConfigFileError> {
        let program = match entry.get("command") {
            Some(Value::String(s)) => self.expand("command", s)?,
            Some(_) => return Err(self.wrong("command", "a string")),
            None => return Err(self.err(Some("command"), ConfigFileErrorKind::Missing)),
        };
        if program.is_empty() {
            return Err(
                self.err(Some("command"), ConfigFileErrorKind::Invalid("must not be empty"))
            );
        }
        let mut command = StdioCommand::new(program);
        match entry.get("args") {
            None => {}
            Some(Value::Array(args)) => {
                for (i, a) in args.iter().enumerate() {
                    let key = format!("args[{i}]");
                    let a = a.as_str().ok_or_else(|| self.wrong(&key, "a string"))?;
                    command = command.arg(self.expand(&key, a)?);
                }
            }
            Some(_) => return Err(self.wrong("args", "an array of strings")),
        }
        for (k, v) in self.string_map(entry, "env")? {
            command = command.env(k, v);
        }
        match entry.get("cwd") {
            None => {}
            Some(Value::String(s)) => command = command.current_dir(self.expand("cwd", s)?),
            Some(_) => return Err(self.wrong("cwd", "a string")),
        }
        Ok(command)
    }

    #[cfg(not(feature = "http"))]
    fn http_entry(
        &self,
        _entry: &Map<String, Value>,
        _own: Option<&Map<String, Value>>,
    ) -> Result<ConfiguredTransport, ConfigFileError> {
        let kind = ConfigFileErrorKind::UnsupportedTransport(
            "http (built without the http feature)".into(),
        );
        Err(self.err(Some("url"), kind))
    }

    #[cfg(feature = "http")]
    fn http_entry(
        &self,
        entry: &Map<String, Value>,
        own: Option<&Map<String, Value>>,
    ) -> Result<ConfiguredTransport, ConfigFileError> {
        let url = match entry.get("url") {
            Some(Value::String(s)) => self.url("url", &self.expand("url", s)?)?,
            Some(_) => return Err(self.wrong("url", "a string")),
            None => return Err(self.err(Some("url"), ConfigFileErrorKind::Missing)),
        };
        let mut h = HttpEntry {
            url,
            headers: self.string_map(entry, "headers")?,
            tls: TlsOptions::default(),
            proxy: ProxyChoice::FromEnv,
            max_connections: None,
            connect_timeout: None,
            idle_timeout: None,
            alternates: Vec::new(),
            oauth: None,
        };
        let Some(own) = own else { return Ok(ConfiguredTransport::Http(h)) };
        if let Some(v) = own.get("maxConnections") {
            h.max_connections = Some(self.count("mcpoll.maxConnections", v)?);
        }
        if let Some(v) = own.get("connectTimeoutMs") {
            h.connect_timeout = Some(self.millis("mcpoll.connectTimeoutMs", v)?);
        }
        if let Some(v) = own.get("idleTimeoutMs") {
            h.idle_timeout = Some(self.millis("mcpoll.idleTimeoutMs", v)?);
        }
        match own.get("proxy") {
            None => {}
            Some(Value::String(s)) => {
                h.proxy = match s.as_str() {
                    "env" => ProxyChoice::FromEnv,
                    "direct" => ProxyChoice::Direct,
                    url => {
                        // Checked as the driver will use it (no scheme is `http://`, and
                        // credentials have their own advice), not as a server's URL.
                        let url = self.expand("mcpoll.proxy", url)?;
                        if let Err(e) = crate::driver::url::proxy_url(&url) {
                            let kind = ConfigFileErrorKind::Invalid(e.reason());
                            return Err(self.err(Some("mcpoll.proxy"), kind));
                        }
                        ProxyChoice::Url(url)
                    }
                }
            }
            Some(_) => return Err(self.wrong("mcpoll.proxy", "\"env\", \"direct\" or a proxy URL")),
        }
        match own.get("alternates") {
            None => {}
            Some(Value::Array(list)) => {
                for (i, v) in list.iter().enumerate() {
                    let key = format!("mcpoll.alternates[{i}]");
                    let v = v.as_str().ok_or_else(|| self.wrong(&key, "a string"))?;
                    h.alternates.push(self.url(&key, &self.expand(&key, v)?)?);
                }
            }
            Some(_) => return Err(self.wrong("mcpoll.alternates", "an array of URLs")),
        }
        if let Some(oauth) = own.get("oauth") {
            h.oauth = Some(Box::new(self.oauth_entry(oauth)?));
        }
        if let Some(tls) = own.get("tls") {
            let tls = tls.as_object().ok_or_else(|| self.wrong("mcpoll.tls", "an object"))?;
            self.only(tls, "mcpoll.tls", &["caFile", "clientCert", "clientKey", "insecure"])?;
            let path = |k: &str| -> Result<Option<PathBuf>, ConfigFileError> {
                let key = format!("mcpoll.tls.{k}");
                match tls.get(k) {
                    None => Ok(None),
                    Some(Value::String(s)) => {
                        Ok(Some(self.in_folder(self.expand(&key, s)?.into())))
                    }
                    Some(_) => Err(self.wrong(&key, "a file path")),
                }
            };
            h.tls.ca_file = path("caFile")?;
            h.tls.client_cert = match (path("clientCert")?, path("clientKey")?) {
                (Some(c), Some(k)) => Some((c, k)),
                (None, None) => None,
                (Some(_), None) => {
                    return Err(self.err(Some("mcpoll.tls.clientKey"), ConfigFileErrorKind::Missing))
                }
                (None, Some(_)) => {
                    return Err(
                        self.err(Some("mcpoll.tls.clientCert"), ConfigFileErrorKind::Missing)
                    )
                }
            };
            h.tls.dangerous_accept_any_certificate = match tls.get("insecure") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(self.wrong("mcpoll.tls.insecure", "true or false")),
            };
        }
        Ok(ConfiguredTransport::Http(h))
    }

    /// `value`, a URL at `key`, checked as the HTTP driver will check it when the server is
    /// added: `http` or `https`, a host, a valid port, no `user:password@`.
    #[cfg(feature = "http")]
    fn url(&self, key: &str, value: &str) -> Result<String, ConfigFileError> {
        match crate::driver::url::HttpUrl::parse(value) {
            Ok(_) => Ok(value.to_owned()),
            Err(e) => Err(self.err(Some(key), ConfigFileErrorKind::Invalid(e.reason()))),
        }
    }

    /// `mcpoll.oauth`: `grant` (`clientCredentials` by default, `jwtBearer`,
    /// `identityAssertion`), `clientId` (required) and `clientSecret` (required but for
    /// `jwtBearer`), `${VAR}` expanded, and `issuer`, which pins the authorization server. The
    /// assertion grants take `assertion` or `assertionFile` (the workload's JWT, or the user's
    /// identity token); `identityAssertion` also `idpTokenEndpoint`, `idpClientId` and
    /// `idpClientSecret` (optional). Any grant takes `dpop` (see [`DpopMode`]).
    #[cfg(feature = "http")]
    fn oauth_entry(&self, v: &Value) -> Result<OAuthEntry, ConfigFileError> {
        const COMMON: &[&str] = &["grant", "clientId", "clientSecret", "issuer", "dpop"];
        const ASSERTION: &[&str] = &["assertion", "assertionFile"];
        const IDP: &[&str] = &["idpTokenEndpoint", "idpClientId", "idpClientSecret"];
        let o = v.as_object().ok_or_else(|| self.wrong("mcpoll.oauth", "an object"))?;
        let grant = match o.get("grant") {
            None => "clientCredentials",
            Some(Value::String(g))
                if ["clientCredentials", "jwtBearer", "identityAssertion"]
                    .contains(&g.as_str()) =>
            {
                g.as_str()
            }
            Some(_) => {
                let expected = "\"clientCredentials\", \"jwtBearer\" or \"identityAssertion\"";
                return Err(self.wrong("mcpoll.oauth.grant", expected));
            }
        };
        let known: Vec<&str> = match grant {
            "jwtBearer" => [COMMON, ASSERTION].concat(),
            "identityAssertion" => [COMMON, ASSERTION, IDP].concat(),
            _ => COMMON.to_vec(),
        };
        self.only(o, "mcpoll.oauth", &known)?;
        let text = |k: &str| -> Result<String, ConfigFileError> {
            let key = format!("mcpoll.oauth.{k}");
            match o.get(k) {
                // Empty after expansion too: `"${SECRET}"` with `SECRET` set to nothing is no
                // secret, and the flow would fail at the server instead of here, unnamed.
                Some(Value::String(s)) => match self.expand(&key, s)? {
                    text if text.is_empty() => {
                        Err(self.err(Some(&key), ConfigFileErrorKind::Invalid("must not be empty")))
                    }
                    text => Ok(text),
                },
                Some(_) => Err(self.wrong(&key, "a string")),
                None => Err(self.err(Some(&key), ConfigFileErrorKind::Missing)),
            }
        };
        let optional = |k: &str| o.get(k).map(|_| text(k)).transpose();
        let issuer = match o.get("issuer") {
            None => None,
            Some(_) => Some(self.url("mcpoll.oauth.issuer", &text("issuer")?)?),
        };
        let client_id = text("clientId")?;
        let client_secret = match grant {
            "jwtBearer" => optional("clientSecret")?,
            _ => Some(text("clientSecret")?),
        }
        .map(Secret::new);
        let assertion = || match (optional("assertion")?, optional("assertionFile")?) {
            (Some(v), None) => Ok(AssertionSource::Value(Secret::new(v))),
            (None, Some(path)) => Ok(AssertionSource::File(self.in_folder(path.into()))),
            (None, None) => {
                Err(self.err(Some("mcpoll.oauth.assertion"), ConfigFileErrorKind::Missing))
            }
            (Some(_), Some(_)) => {
                let why = "give assertion or assertionFile, not both";
                Err(self
                    .err(Some("mcpoll.oauth.assertionFile"), ConfigFileErrorKind::Conflict(why)))
            }
        };
        let grant = match grant {
            "jwtBearer" => FileGrant::JwtBearer(assertion()?),
            "identityAssertion" => {
                let endpoint =
                    self.url("mcpoll.oauth.idpTokenEndpoint", &text("idpTokenEndpoint")?)?;
                let mut idp = IdentityProvider::new(endpoint, text("idpClientId")?);
                idp.client_secret = optional("idpClientSecret")?.map(Secret::new);
                FileGrant::IdentityAssertion { idp, id_token: assertion()? }
            }
            _ => FileGrant::ClientCredentials,
        };
        let dpop = self.dpop_mode(o.get("dpop"))?;
        Ok(OAuthEntry { client_id, client_secret, issuer, dpop, grant })
    }

    /// `mcpoll.oauth.dpop`: `"off"`, `"ifSupported"` or `"required"`; off when absent.
    #[cfg(feature = "http")]
    fn dpop_mode(&self, v: Option<&Value>) -> Result<DpopMode, ConfigFileError> {
        const KEY: &str = "mcpoll.oauth.dpop";
        let invalid = "must be \"off\", \"ifSupported\" or \"required\"";
        match v {
            None => Ok(DpopMode::Off),
            Some(Value::String(s)) => DpopMode::from_name(s)
                .ok_or_else(|| self.err(Some(KEY), ConfigFileErrorKind::Invalid(invalid))),
            Some(_) => Err(self.wrong(KEY, "a string")),
        }
    }

    /// The engine settings of an entry's `mcpoll` object (and a check that every key in it is
    /// known for the transport).
    fn engine_settings(
        &self,
        own: &Map<String, Value>,
        c: &mut Config,
        is_http: bool,
    ) -> Result<(), ConfigFileError> {
        const ENGINE: &[&str] = &[
            "timeoutMs",
            "probeTimeoutMs",
            "handshakeTimeoutMs",
            "era",
            "maxInFlight",
            "maxQueued",
            "maxPending",
            "maxMessageBytes",
            "retry",
            "breaker",
            "roots",
        ];
        // Read by the stdio entry itself.
        const STDIO: &[&str] = &["inheritEnv"];
        const HTTP: &[&str] = &[
            "tls",
            "proxy",
            "maxConnections",
            "connectTimeoutMs",
            "idleTimeoutMs",
            "alternates",
            "oauth",
        ];
        for key in own.keys() {
            if ENGINE.contains(&key.as_str()) {
                continue;
            }
            let key_path = format!("mcpoll.{key}");
            if STDIO.contains(&key.as_str()) {
                if is_http {
                    let why = "a stdio setting in an HTTP server's entry";
                    return Err(self.err(Some(&key_path), ConfigFileErrorKind::Conflict(why)));
                }
                continue;
            }
            if HTTP.contains(&key.as_str()) && !is_http {
                let why = "an HTTP setting in a stdio server's entry";
                return Err(self.err(Some(&key_path), ConfigFileErrorKind::Conflict(why)));
            }
            if !HTTP.contains(&key.as_str()) {
                return Err(self.err(Some(&key_path), ConfigFileErrorKind::UnknownKey));
            }
        }
        for (key, value) in own {
            let k = format!("mcpoll.{key}");
            match key.as_str() {
                "timeoutMs" => c.default_timeout = self.millis(&k, value)?,
                "probeTimeoutMs" => c.probe_timeout = self.millis(&k, value)?,
                "handshakeTimeoutMs" => c.handshake_timeout = self.millis(&k, value)?,
                "maxInFlight" => c.max_in_flight = self.count(&k, value)?,
                "maxQueued" => c.max_queued = self.number(&k, value)?,
                "maxPending" => c.max_pending = self.count(&k, value)?,
                "maxMessageBytes" => c.max_message_bytes = self.count(&k, value)?,
                "era" => {
                    c.era = match value.as_str() {
                        Some("auto") => EraPreference::Auto,
                        Some("modern") => EraPreference::ModernOnly,
                        Some("legacy") => EraPreference::LegacyOnly,
                        _ => return Err(self.wrong(&k, "\"auto\", \"modern\" or \"legacy\"")),
                    }
                }
                "retry" => {
                    let r = value.as_object().ok_or_else(|| self.wrong(&k, "an object"))?;
                    let keys = ["maxAttempts", "baseDelayMs", "maxDelayMs", "jitterPercent"];
                    self.only(r, &k, &keys)?;
                    for (rk, rv) in r {
                        let k = format!("{k}.{rk}");
                        match rk.as_str() {
                            "maxAttempts" => {
                                c.retry.max_attempts =
                                    self.count(&k, rv)?.try_into().map_err(|_| {
                                        self.err(
                                            Some(&k),
                                            ConfigFileErrorKind::Invalid("too large"),
                                        )
                                    })?
                            }
                            "baseDelayMs" => c.retry.base_delay = self.millis(&k, rv)?,
                            "maxDelayMs" => c.retry.max_delay = self.millis(&k, rv)?,
                            // `only` let nothing else through.
                            _ => {
                                let p = self.number(&k, rv)?;
                                c.retry.jitter_percent = u8::try_from(p)
                                    .ok()
                                    .filter(|p| *p <= 100)
                                    .ok_or_else(|| {
                                        self.err(
                                            Some(&k),
                                            ConfigFileErrorKind::Invalid("must be 0 to 100"),
                                        )
                                    })?;
                            }
                        }
                    }
                }
                "breaker" => {
                    let b = value.as_object().ok_or_else(|| self.wrong(&k, "an object"))?;
                    self.only(b, &k, &["failureThreshold", "coolDownMs"])?;
                    for (bk, bv) in b {
                        let k = format!("{k}.{bk}");
                        if bk == "coolDownMs" {
                            c.breaker.cool_down = self.millis(&k, bv)?;
                        } else {
                            let n = self.number(&k, bv)?;
                            c.breaker.failure_threshold = n.try_into().map_err(|_| {
                                self.err(Some(&k), ConfigFileErrorKind::Invalid("too large"))
                            })?;
                        }
                    }
                }
                // HTTP settings, read by `http_entry`, and `roots`, read by `roots`.
                _ => {}
            }
        }
        // The engine checks its config again when the server is added; checking here names the
        // file and the server in the error instead.
        c.check().map_err(|e| self.err(Some("mcpoll"), ConfigFileErrorKind::Invalid(e.reason)))
    }

    /// Refuses a key of `obj` not in `known`.
    fn only(
        &self,
        obj: &Map<String, Value>,
        at: &str,
        known: &[&str],
    ) -> Result<(), ConfigFileError> {
        match obj.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(self.err(Some(&format!("{at}.{k}")), ConfigFileErrorKind::UnknownKey)),
            None => Ok(()),
        }
    }

    fn number(&self, key: &str, v: &Value) -> Result<usize, ConfigFileError> {
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| self.wrong(key, "a whole number, 0 or more"))
    }

    fn count(&self, key: &str, v: &Value) -> Result<usize, ConfigFileError> {
        match self.number(key, v)? {
            0 => Err(self.err(Some(key), ConfigFileErrorKind::Invalid("must be at least 1"))),
            n => Ok(n),
        }
    }

    fn millis(&self, key: &str, v: &Value) -> Result<Duration, ConfigFileError> {
        let n = v.as_u64().ok_or_else(|| self.wrong(key, "milliseconds (a whole number)"))?;
        if n == 0 {
            return Err(self.err(Some(key), ConfigFileErrorKind::Invalid("must be at least 1 ms")));
        }
        Ok(Duration::from_millis(n))
    }

    /// An object of strings (`env`, `headers`), values expanded, in name order.
    fn string_map(
        &self,
        entry: &Map<String, Value>,
        key: &str,
    ) -> Result<Vec<(String, String)>, ConfigFileError> {
        let Some(v) = entry.get(key) else { return Ok(Vec::new()) };
        let map = v.as_object().ok_or_else(|| self.wrong(key, "an object of strings"))?;
        let mut out = Vec::with_capacity(map.len());
        for (k, v) in map {
            let at = format!("{key}.{k}");
            let v = v.as_str().ok_or_else(|| self.wrong(&at, "a string"))?;
            out.push((k.clone(), self.expand(&at, v)?));
        }
        Ok(out)
    }

    /// Expands `${VAR}`, `${VAR:-default}`, `${env:VAR}` and `${userHome}` in `s`.
    fn expand(&self, key: &str, s: &str) -> Result<String, ConfigFileError> {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                // Unclosed: what follows may be anything up to the end of the value (a
                // query string, a password with `${` in it), so none of it is named.
                let kind = ConfigFileErrorKind::UnsupportedVariable("${ (unclosed)".into());
                return Err(self.err(Some(key), kind));
            };
            let inner = &after[..end];
            out.push_str(&self.variable(key, inner)?);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn variable(&self, key: &str, inner: &str) -> Result<String, ConfigFileError> {
        // (A refused variable is named by `shown_variable`, without its default.)
        let valid_name =
            |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        let name = if inner == "userHome" {
            "HOME"
        } else if let Some(n) = name.strip_prefix("env:").filter(|_| default.is_none()) {
            n
        } else {
            name
        };
        // VS Code's own variables name things of an editor (a workspace, an open file), which a
        // command-line host does not have: refused, not read as environment variables.
        const EDITOR: &[&str] = &[
            "workspaceFolder",
            "workspaceFolderBasename",
            "workspaceRoot",
            "file",
            "fileDirname",
            "relativeFile",
            "cwd",
            "pathSeparator",
            "execPath",
        ];
        if !valid_name(name) || EDITOR.contains(&name) {
            let kind = ConfigFileErrorKind::UnsupportedVariable(shown_variable(inner));
            return Err(self.err(Some(key), kind));
        }
        match ((self.env)(name), default) {
            (Some(v), _) => Ok(v),
            (None, Some(d)) => Ok(d.to_owned()),
            (None, None) => {
                Err(self.err(Some(key), ConfigFileErrorKind::UnsetVariable(name.to_owned())))
            }
        }
    }
}

/// `path` with its `.` and `..` components worked out from the names alone (for a folder
/// that does not exist, where the file system cannot say).
fn lexically_normal(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A variable reference as an error names it: `${NAME}`, never its default, which is often a
/// secret written in place (`${TOKEN:-sk-...}`) and would reach the CLI's stderr; and only a
/// name made of the characters a name has (with VS Code's `env:` and `input:` prefixes), at
/// most 64 of them: anything else between the braces (`${Q#9}`) may be a secret with `${` in
/// it, and is shown as `${…}`.
fn shown_variable(inner: &str) -> String {
    let name = inner.split_once(":-").map_or(inner, |(name, _)| name);
    let name_like = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
    if name.is_empty() || name.len() > 64 || !name.bytes().all(name_like) {
        return "${…}".into();
    }
    format!("${{{name}}}")
}

#[cfg(test)]
mod tests;
