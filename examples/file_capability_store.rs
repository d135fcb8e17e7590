// cargo run --example file_capability_store -- ./catalogs "python3 server.py"
//
//! A [`CapabilityStore`] that keeps the capability cache's catalogs in a folder, one JSON file
//! per [`StoreKey`], so a host that restarts serves its servers' tool catalogs at once instead
//! of listing every server again.
//!
//! What is written is what the store is given: each page of a list result (the items'
//! definitions and the next cursor), whether it was `cacheScope: "public"`, and when it
//! expires, under a file name made of the cache key's hashes. No token, credential or
//! principal name is in it. A file is written whole to a temporary file and renamed (a crash
//! never leaves half an entry); a change notification deletes it. The host checks every entry
//! it reads back (its key, its scope, its expiry), so a file copied or renamed into the wrong
//! place is refused, not served.
//!
//! The example lists the tools of the server given on the command line; run it twice and the
//! second run prints the catalog with no `tools/list` sent (when the server's `ttlMs` allows
//! caching). The `unwrap`s in `main` are for example code only.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpoll::{CapabilityStore, StoreKey, StoredEntry, StoredPage};
use serde_json::{json, Value};

/// Catalogs in a folder, one file per key.
#[derive(Debug)]
pub struct FileCapabilityStore {
    dir: PathBuf,
}

impl FileCapabilityStore {
    /// A store in `dir`, created if missing.
    pub fn open(dir: impl Into<PathBuf>) -> io::Result<Self> {
        let dir = dir.into();
        fs::create_dir_all(&dir)?;
        Ok(Self { dir })
    }

    /// The file of `key`. Its id is hex digits, letters and dashes: a safe file name.
    pub fn path_of(&self, key: &StoreKey) -> PathBuf {
        self.dir.join(format!("{}.json", key.id()))
    }

    fn read(path: &Path) -> Option<StoredEntry> {
        let v: Value = serde_json::from_slice(&fs::read(path).ok()?).ok()?;
        let pages = v["pages"].as_array()?;
        let pages = pages
            .iter()
            .map(|p| {
                let ms = p["expiresUnixMs"].as_u64()?;
                Some(StoredPage {
                    cursor: p["cursor"].as_str().map(str::to_owned),
                    json: p["result"].as_str()?.to_owned(),
                    expires: UNIX_EPOCH + Duration::from_millis(ms),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(StoredEntry {
            key: v["key"].as_str()?.to_owned(),
            public: v["public"].as_bool()?,
            pages,
        })
    }

    fn write(path: &Path, entry: &StoredEntry) -> io::Result<()> {
        let pages: Vec<Value> = entry
            .pages
            .iter()
            .map(|p| {
                let ms = p.expires.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
                json!({"cursor": p.cursor, "result": p.json, "expiresUnixMs": ms as u64})
            })
            .collect();
        let text = json!({"key": entry.key, "public": entry.public, "pages": pages}).to_string();
        // A file of its own, never one planted there (a link would be followed and the file
        // it names overwritten), readable by this user only.
        let tmp = path.with_extension("json.tmp");
        let _ = fs::remove_file(&tmp);
        let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    }
}

impl CapabilityStore for FileCapabilityStore {
    fn get(&mut self, key: &StoreKey) -> Option<StoredEntry> {
        Self::read(&self.path_of(key))
    }

    fn put(&mut self, key: &StoreKey, entry: &StoredEntry) {
        if let Err(e) = Self::write(&self.path_of(key), entry) {
            eprintln!("capability store: {}: {e}", self.path_of(key).display());
        }
    }

    fn mark_stale(&mut self, key: &StoreKey) {
        let _ = fs::remove_file(self.path_of(key));
    }
}

fn main() {
    use mcpoll::{Config, Host, StdioCommand};

    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, command] = args.as_slice() else {
        eprintln!("usage: file_capability_store FOLDER \"SERVER COMMAND\"");
        std::process::exit(2);
    };
    let mut host = Host::new().unwrap();
    host.set_capability_store(FileCapabilityStore::open(dir).unwrap());
    let server = host
        .add_stdio_server(StdioCommand::from_command_line(command).unwrap(), Config::default())
        .unwrap();
    host.wait_ready(server, Duration::from_secs(20)).unwrap();
    let started = SystemTime::now();
    let names: Vec<String> = host
        .tool_catalog_blocking(server, Duration::from_secs(20))
        .unwrap()
        .names()
        .map(str::to_owned)
        .collect();
    println!("{} tools in {:?}: {names:?}", names.len(), started.elapsed().unwrap_or_default());
    println!("requests sent: {}", host.stats(server).unwrap().requests_sent);
}
