//! The command line: which server, which command, how to print.

use std::time::Duration;

use mcpoll::oauth::DpopMode;
use mcpoll::EraPreference;

pub(crate) const USAGE: &str = "\
usage: mcpoll SERVER [OPTIONS] COMMAND [ARGS]
       mcpoll echo-server     serve the small demo MCP server on stdin and stdout (what
                              examples/mcp.json starts; tools echo, add, slow)

SERVER (one of):
  --config FILE [--server NAME]  a server of an mcpServers JSON file (the name may be left
                                 out when the file has one enabled server)
  --stdio \"CMD ARGS...\"          run CMD (split into words as a shell would, run without one)
  --http URL                     a Streamable HTTP endpoint

OPTIONS:
  --json                 print the result as JSON (errors as one JSON line on stderr)
  --timeout MS           deadline of the command (default 30000; also bounds `watch`)
  --legacy | --modern    speak only 2025-11-25 (initialize) or only 2026-07-28
  --root DIR             offer DIR to the server as a root, repeatable (added to the file's
                         mcpoll.roots); an existing directory, relative to the current one,
                         without `..`
  --inherit-env          (stdio) give the server this shell's whole environment; by default
                         it gets only HOME, LOGNAME, PATH, SHELL, TERM, USER, LANG, LC_* and
                         the entry's env
  --header 'K: V'        (HTTP) send a header, repeatable
  --bearer TOKEN         (HTTP) send Authorization: Bearer TOKEN
  --client-credentials ID:SECRET [--issuer URL]
                         (HTTP) OAuth client credentials grant; with --issuer the secret
                         goes only to that authorization server, whatever the server names
  --oauth [--redirect-uri URI]
                         (HTTP) OAuth authorization code grant: prints the URL to open,
                         reads the redirected URL back on stdin
  --jwt-bearer ID --assertion-file FILE [--issuer URL]
                         (HTTP) OAuth JWT-bearer grant for a workload identity: the JWT is
                         read from FILE (re-read when it nears expiry or is refused)
  --identity-assertion ID:SECRET --idp-token-endpoint URL --idp-client ID[:SECRET]
      --assertion-file FILE [--issuer URL]
                         (HTTP) enterprise-managed authorization: the user's identity token
                         (FILE) is exchanged at the identity provider for an ID-JAG, which
                         client ID presents to the server's authorization server
  --dpop MODE            (HTTP, with OAuth) DPoP-bound tokens (RFC 9449): off, if-supported
                         (when the authorization server offers ES256) or required; overrides
                         the file's mcpoll.oauth.dpop
  --confirm              before calling a tool that may destroy or overwrite (its annotations
                         do not say readOnlyHint or destructiveHint: false), ask y/N on the
                         terminal; without a terminal such a call is refused (exit 3). Tools
                         under the file's alwaysAllow / autoApprove are not asked about
  -h, --help             this text

COMMAND:
  discover               server identity, protocol version, capabilities
  tools                  every tool (pagination followed)
  call NAME [JSON]       call a tool with JSON object arguments (default {})
  resources | templates  every resource, every resource template
  read URI               read a resource
  prompts                every prompt
  get NAME [JSON]        get a prompt with JSON object arguments (also: prompt)
  watch                  print each change of the tool, prompt or resource catalog until
                         interrupted (or --timeout, when given)

While a call runs, its progress is shown on stderr when stderr is a terminal. Ctrl-C cancels
the running call (the server is told) and exits with 130.

EXIT CODES:
  0    success
  1    the command failed: the server, the transport or mcpoll ended it (stderr says why)
  2    bad usage, or a configuration file (or its entry for the server) mcpoll cannot use
  3    refused locally, never sent: the tool is under the file's disabledTools, or --confirm
       was not answered yes
  4    the tool answered with isError: true (its result is printed, as on success)
  130  interrupted by Ctrl-C";

/// Where the server is.
pub(crate) enum Target {
    Config { file: String, server: Option<String> },
    Stdio(String),
    Http(String),
}

/// How the CLI gets a token from an OAuth authorization server.
pub(crate) enum Auth {
    None,
    /// `issuer`: `--issuer`, the only authorization server the secret may go to.
    ClientCredentials {
        id: String,
        secret: String,
        issuer: Option<String>,
    },
    Code {
        redirect_uri: String,
    },
    /// `--jwt-bearer ID --assertion-file FILE`.
    JwtBearer {
        id: String,
        assertion_file: String,
        issuer: Option<String>,
    },
    /// `--identity-assertion ID:SECRET` with the identity provider's options.
    IdentityAssertion {
        id: String,
        secret: String,
        idp_token_endpoint: String,
        idp_client: String,
        idp_secret: Option<String>,
        assertion_file: String,
        issuer: Option<String>,
    },
}

pub(crate) struct Args {
    pub(crate) target: Target,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) bearer: Option<String>,
    pub(crate) auth: Auth,
    /// `--dpop MODE`, for the OAuth flow (given or from the config file).
    pub(crate) dpop: Option<DpopMode>,
    pub(crate) timeout: Duration,
    /// `--timeout` was given: it bounds `watch` and overrides a config file's `timeoutMs`.
    pub(crate) timeout_given: bool,
    /// `--legacy` or `--modern` was given.
    pub(crate) era: Option<EraPreference>,
    pub(crate) json: bool,
    /// `--root DIR`, in order.
    pub(crate) roots: Vec<String>,
    /// `--confirm`: ask before a destructive tool.
    pub(crate) confirm: bool,
    /// `--inherit-env`: a stdio server gets the whole environment.
    pub(crate) inherit_env: bool,
    pub(crate) command: Vec<String>,
}

/// Moves `--assertion-file` and the identity provider's options into the assertion grant that
/// needs them; any of them without it is an error.
fn assertion_options(
    auth: &mut Auth,
    file: Option<String>,
    idp_token_endpoint: Option<String>,
    idp_client: Option<String>,
) -> Result<(), String> {
    match auth {
        Auth::JwtBearer { assertion_file, .. } => {
            if idp_token_endpoint.is_some() || idp_client.is_some() {
                return Err("--idp-token-endpoint and --idp-client go with --identity-assertion".into());
            }
            *assertion_file = file.ok_or("--jwt-bearer needs --assertion-file")?;
        }
        Auth::IdentityAssertion {
            assertion_file, idp_token_endpoint: endpoint, idp_client: client, idp_secret, ..
        } => {
            *assertion_file = file.ok_or("--identity-assertion needs --assertion-file")?;
            *endpoint = idp_token_endpoint.ok_or("--identity-assertion needs --idp-token-endpoint")?;
            let idp = idp_client.ok_or("--identity-assertion needs --idp-client")?;
            match idp.split_once(':') {
                Some((id, secret)) => {
                    *client = id.to_owned();
                    *idp_secret = Some(secret.to_owned());
                }
                None => *client = idp,
            }
        }
        _ if file.is_some() || idp_token_endpoint.is_some() || idp_client.is_some() => {
            return Err(
                "--assertion-file, --idp-token-endpoint and --idp-client go with --jwt-bearer or --identity-assertion"
                    .into(),
            )
        }
        _ => {}
    }
    Ok(())
}

/// Parses the arguments. `Err("")` asks for the usage text alone (`--help`).
pub(crate) fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut config, mut server, mut stdio, mut http) = (None, None, None, None);
    let (mut headers, mut bearer, mut command) = (Vec::new(), None, Vec::new());
    let (mut timeout, mut timeout_given, mut era, mut json) =
        (Duration::from_secs(30), false, None, false);
    let (mut auth, mut redirect_uri, mut issuer, mut dpop) = (Auth::None, None, None, None);
    let (mut roots, mut confirm, mut inherit_env) = (Vec::new(), false, false);
    let (mut assertion_file, mut idp_token_endpoint, mut idp_client) = (None, None, None);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" => config = Some(it.next().ok_or("--config needs a file")?),
            "--server" => server = Some(it.next().ok_or("--server needs a name")?),
            "--stdio" => stdio = Some(it.next().ok_or("--stdio needs a command")?),
            "--http" => http = Some(it.next().ok_or("--http needs a URL")?),
            "--root" => roots.push(it.next().ok_or("--root needs a directory")?),
            "--bearer" => bearer = Some(it.next().ok_or("--bearer needs a token")?),
            "--client-credentials" => {
                let c = it.next().ok_or("--client-credentials needs ID:SECRET")?;
                let (id, secret) =
                    c.split_once(':').ok_or("--client-credentials needs ID:SECRET")?;
                auth = Auth::ClientCredentials {
                    id: id.to_owned(),
                    secret: secret.to_owned(),
                    issuer: None,
                };
            }
            "--issuer" => issuer = Some(it.next().ok_or("--issuer needs a URL")?),
            "--dpop" => {
                let mode = it.next().ok_or("--dpop needs off, if-supported or required")?;
                let mode = DpopMode::from_name(&mode);
                dpop = Some(mode.ok_or("--dpop needs off, if-supported or required")?);
            }
            "--oauth" => auth = Auth::Code { redirect_uri: String::new() },
            "--jwt-bearer" => {
                let id = it.next().ok_or("--jwt-bearer needs a client ID")?;
                auth = Auth::JwtBearer { id, assertion_file: String::new(), issuer: None };
            }
            "--identity-assertion" => {
                let c = it.next().ok_or("--identity-assertion needs ID:SECRET")?;
                let (id, secret) =
                    c.split_once(':').ok_or("--identity-assertion needs ID:SECRET")?;
                auth = Auth::IdentityAssertion {
                    id: id.to_owned(),
                    secret: secret.to_owned(),
                    idp_token_endpoint: String::new(),
                    idp_client: String::new(),
                    idp_secret: None,
                    assertion_file: String::new(),
                    issuer: None,
                };
            }
            "--assertion-file" => {
                assertion_file = Some(it.next().ok_or("--assertion-file needs a file")?);
            }
            "--idp-token-endpoint" => {
                idp_token_endpoint = Some(it.next().ok_or("--idp-token-endpoint needs a URL")?);
            }
            "--idp-client" => idp_client = Some(it.next().ok_or("--idp-client needs ID[:SECRET]")?),
            "--redirect-uri" => redirect_uri = Some(it.next().ok_or("--redirect-uri needs a URI")?),
            "--header" => {
                let h = it.next().ok_or("--header needs 'Name: value'")?;
                let (name, value) = h.split_once(':').ok_or("--header needs 'Name: value'")?;
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
            "--timeout" => {
                let ms: u64 =
                    it.next().and_then(|v| v.parse().ok()).ok_or("--timeout needs milliseconds")?;
                // Ten years at most: the deadline is `now + timeout`, which must not overflow.
                timeout = Duration::from_millis(ms.clamp(1, 10 * 365 * 86_400_000));
                timeout_given = true;
            }
            "--legacy" => era = Some(EraPreference::LegacyOnly),
            "--modern" => era = Some(EraPreference::ModernOnly),
            "--json" => json = true,
            "--confirm" => confirm = true,
            "--inherit-env" => inherit_env = true,
            "-h" | "--help" => return Err(String::new()),
            flag if flag.starts_with("--") && command.is_empty() => {
                return Err(format!("unknown option {flag}"))
            }
            _ => command.push(a),
        }
    }
    if server.is_some() && config.is_none() {
        return Err("--server names a server of a --config file".into());
    }
    let target = match (config, stdio, http) {
        (Some(file), None, None) => Target::Config { file, server },
        (None, Some(s), None) => Target::Stdio(s),
        (None, None, Some(url)) => Target::Http(url),
        _ => return Err("give exactly one of --config, --stdio and --http".into()),
    };
    if let Auth::Code { redirect_uri: r } = &mut auth {
        *r = redirect_uri.unwrap_or_else(|| "http://127.0.0.1:8976/callback".into());
    }
    match (&mut auth, issuer) {
        (
            Auth::ClientCredentials { issuer: pinned, .. }
            | Auth::JwtBearer { issuer: pinned, .. }
            | Auth::IdentityAssertion { issuer: pinned, .. },
            Some(url),
        ) => *pinned = Some(url),
        (_, Some(_)) => {
            return Err("--issuer pins the authorization server of a grant without a user".into())
        }
        (_, None) => {}
    }
    assertion_options(&mut auth, assertion_file, idp_token_endpoint, idp_client)?;
    if bearer.is_some() && !matches!(auth, Auth::None) {
        return Err("give --bearer or an OAuth option, not both".into());
    }
    if command.is_empty() {
        return Err("no command given".into());
    }
    Ok(Args {
        target,
        headers,
        bearer,
        auth,
        dpop,
        timeout,
        timeout_given,
        era,
        json,
        confirm,
        roots,
        inherit_env,
        command,
    })
}
