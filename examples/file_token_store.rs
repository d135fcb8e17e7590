// cargo run --example file_token_store --features http -- ./tokens.json http://127.0.0.1:8080/mcp ID:SECRET
//
//! A [`TokenStore`] that keeps OAuth tokens and client registrations in a file, so a device
//! that restarts does not register again or ask its user again.
//!
//! The file holds bearer and refresh tokens, so it is created with mode 0600 (owner read and
//! write only), written whole to a temporary file that is renamed over the old one (a crash
//! never leaves half a file), and [`FileStore::open`] refuses one that others could read or
//! that is not a plain file, with a typed [`FileStoreError`], rather than use tokens someone
//! else may have seen. Unix only (file modes).
//!
//! The example connects to the server with the client credentials grant and calls `echo`;
//! run it twice and the second run sends the stored token at once. The `unwrap`s in `main`
//! are for example code only.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use mcpoll::oauth::{ClientRegistration, Secret, StoredAuth, TokenStore, Tokens};
use serde_json::{json, Value};

/// Why a token file could not be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum FileStoreError {
    /// The file can be read or written by its group or by others (`mode` is its permission
    /// bits): the tokens in it may have been seen. Fix with `chmod 600`, or delete it.
    Insecure {
        /// The permission bits found.
        mode: u32,
    },
    /// Not a plain file (a symbolic link, a directory, a device).
    NotAFile,
    /// Not a token file this store wrote.
    Malformed,
    /// Reading or writing failed.
    Io(io::Error),
}

impl fmt::Display for FileStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Insecure { mode } => {
                write!(f, "the token file is readable or writable by others (mode {mode:o})")
            }
            Self::NotAFile => f.write_str("the token file is not a plain file"),
            Self::Malformed => f.write_str("the token file is not in the expected format"),
            Self::Io(e) => write!(f, "token file: {e}"),
        }
    }
}

impl std::error::Error for FileStoreError {}

/// Tokens and registrations in a 0600 file, one entry per resource (the MCP server's URL).
/// `Debug` shows no secret: not the entries (their tokens, and resource URLs that may carry
/// a key in their query), only how many there are.
pub struct FileStore {
    path: PathBuf,
    entries: BTreeMap<String, StoredAuth>,
    /// The last write that failed (`TokenStore::save` cannot return it); the entries stay in
    /// memory either way.
    pub last_error: Option<io::Error>,
}

impl fmt::Debug for FileStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileStore")
            .field("path", &self.path)
            .field("entries", &self.entries.len())
            .field("last_error", &self.last_error)
            .finish()
    }
}

impl FileStore {
    /// Opens the store at `path`: reads it when it exists (refusing a file others can read),
    /// or starts empty; the file is created on the first save.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, FileStoreError> {
        let path = path.into();
        let entries = match fs::symlink_metadata(&path) {
            Ok(meta) => {
                if !meta.file_type().is_file() {
                    return Err(FileStoreError::NotAFile);
                }
                let mode = meta.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(FileStoreError::Insecure { mode });
                }
                let text = fs::read_to_string(&path).map_err(FileStoreError::Io)?;
                decode(&text).ok_or(FileStoreError::Malformed)?
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(FileStoreError::Io(e)),
        };
        Ok(Self { path, entries, last_error: None })
    }

    /// The resources with something stored.
    pub fn resources(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Writes every entry: a 0600 temporary file beside the real one, synced, renamed over
    /// it, and the rename synced (the folder's entry): a power cut after a refresh that
    /// rotated the refresh token must not bring the old, spent one back.
    fn write(&self) -> io::Result<()> {
        let tmp = temporary(&self.path);
        let _ = fs::remove_file(&tmp);
        let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        let text = encode(&self.entries).to_string();
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&tmp, &self.path)?;
        let folder = self.path.parent().filter(|p| !p.as_os_str().is_empty());
        fs::File::open(folder.unwrap_or(Path::new(".")))?.sync_all()
    }

    fn persist(&mut self) {
        self.last_error = self.write().err();
        if let Some(e) = &self.last_error {
            eprintln!("could not save the tokens to {}: {e}", self.path.display());
        }
    }
}

impl TokenStore for FileStore {
    fn load(&mut self, resource: &str) -> Option<StoredAuth> {
        self.entries.get(resource).cloned()
    }

    fn save(&mut self, resource: &str, auth: &StoredAuth) {
        self.entries.insert(resource.to_owned(), auth.clone());
        self.persist();
    }

    fn clear(&mut self, resource: &str) {
        if self.entries.remove(resource).is_some() {
            self.persist();
        }
    }
}

fn temporary(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

fn encode(entries: &BTreeMap<String, StoredAuth>) -> Value {
    let secret = |s: &Option<Secret>| s.as_ref().map(|s| s.expose().to_owned());
    let mut out = serde_json::Map::new();
    for (resource, auth) in entries {
        let client = auth.client.as_ref().map(|c| {
            json!({"client_id": c.client_id, "client_secret": secret(&c.client_secret),
                "token_endpoint_auth_method": c.token_endpoint_auth_method})
        });
        let tokens = auth.tokens.as_ref().map(|t| {
            json!({"access_token": t.access_token.expose(), "refresh_token": secret(&t.refresh_token),
                "expires_at": t.expires_at, "scope": t.scope, "dpop_jkt": t.dpop_jkt})
        });
        out.insert(
            resource.clone(),
            json!({"issuer": auth.issuer, "client": client, "tokens": tokens}),
        );
    }
    json!({"version": 1, "resources": out})
}

fn decode(text: &str) -> Option<BTreeMap<String, StoredAuth>> {
    let v: Value = serde_json::from_str(text).ok()?;
    if v["version"] != 1 {
        return None;
    }
    let string = |v: &Value| v.as_str().map(str::to_owned);
    let mut out = BTreeMap::new();
    for (resource, e) in v["resources"].as_object()? {
        let client = match &e["client"] {
            Value::Null => None,
            c => Some(ClientRegistration {
                client_id: string(&c["client_id"])?,
                client_secret: string(&c["client_secret"]).map(Secret::new),
                token_endpoint_auth_method: string(&c["token_endpoint_auth_method"])?,
            }),
        };
        let tokens = match &e["tokens"] {
            Value::Null => None,
            t => Some(Tokens {
                access_token: Secret::new(string(&t["access_token"])?),
                refresh_token: string(&t["refresh_token"]).map(Secret::new),
                expires_at: t["expires_at"].as_u64(),
                scope: string(&t["scope"]),
                dpop_jkt: string(&t["dpop_jkt"]),
            }),
        };
        out.insert(resource.clone(), StoredAuth { issuer: string(&e["issuer"])?, client, tokens });
    }
    Some(out)
}

fn main() {
    use std::time::Duration;

    use mcpoll::oauth::{OAuthConfig, PreRegistered};
    use mcpoll::{CallOptions, Config, Host, HttpOptions};

    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, url, credentials] = args.as_slice() else {
        eprintln!("usage: file_token_store TOKEN_FILE MCP_URL CLIENT_ID:SECRET");
        std::process::exit(2);
    };
    let store = match FileStore::open(path) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    println!("stored for: {:?}", store.resources().collect::<Vec<_>>());
    let (id, secret) = credentials.split_once(':').expect("CLIENT_ID:SECRET");
    let oauth = OAuthConfig::client_credentials(url, PreRegistered::with_secret(id, secret))
        .store(Box::new(store));
    let mut host = Host::new().unwrap();
    let server = host.add_http_server(HttpOptions::new(url).oauth(oauth), Config::default());
    let server = server.unwrap();
    host.wait_ready(server, Duration::from_secs(10)).unwrap();
    let args = serde_json::value::RawValue::from_string(r#"{"text":"hi"}"#.into()).unwrap();
    let out = host.call_tool_blocking(server, "echo", &args, &CallOptions::default()).unwrap();
    println!("{}", out.json);
}
