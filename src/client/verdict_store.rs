//! A server's era verdict (its `server/discover` result) kept in the host's
//! [`CapabilityStore`](super::CapabilityStore), so one mechanism serves both what a restarted
//! host must not ask again: the era and the catalogs.
//!
//! The verdict is looked up before the version is known, so its key leaves the version out:
//! it is the server context (identity, transport, tenant, client capabilities, extensions)
//! in the public partition. Only a server's own context files it: a lane's probe carries its
//! principal's credentials, and its answer is that principal's. The entry holds one page
//! whose JSON is `{"protocolVersion":"…","result":{…}}`: the version settled on and the raw
//! result.
//! Coming back, an entry is checked like a catalog's (the key it was filed under, its expiry)
//! and then like [`Config::saved_discover`](crate::Config::saved_discover) (a 2026 version the
//! result lists); one that fails is dropped and the server probed.

use std::time::SystemTime;

use crate::catalog::hints::CacheScope;
use crate::catalog::key::{CacheKey, KeyParts, Transport};
use crate::config::{Config, SavedVerdict};
use crate::proto::json;
use crate::proto::version::ProtocolVersion;

use super::capability_store::{EntryKind, StoreKey, StoredEntry, StoredPage};

/// The store key of the verdict of this server context; `None` when the client's profile
/// is not JSON (then the engine refuses the config anyway).
pub(super) fn key(identity: &str, transport: Transport, config: &Config) -> Option<StoreKey> {
    let capabilities = crate::engine::declared_capabilities(config);
    let parts = KeyParts {
        server: identity,
        transport,
        // The verdict is what settles the version: one entry for every version.
        protocol_version: "",
        principal: None,
        granted_scopes: &[],
        tenant: config.cache_tenant.as_deref(),
        client_capabilities: &capabilities,
        extensions: &config.extensions,
    };
    let partition = CacheKey::new(&parts).ok()?.partition(CacheScope::Public).id();
    Some(StoreKey { kind: EntryKind::Discover, public: true, partition })
}

/// The entry to file `verdict` under `key`.
pub(super) fn entry(key: &StoreKey, verdict: &SavedVerdict) -> StoredEntry {
    // The result was parsed as JSON when it was received, so it is embedded as it is.
    let json = format!(
        "{{\"protocolVersion\":\"{}\",\"result\":{}}}",
        verdict.version.as_str(),
        verdict.result
    );
    StoredEntry {
        key: key.id(),
        public: true,
        pages: vec![StoredPage { cursor: None, json, expires: verdict.expires }],
    }
}

/// The verdict in an entry read back under `key`, if it passes every check while `now`
/// (wall-clock) is the time.
pub(super) fn verdict(key: &StoreKey, entry: StoredEntry, now: SystemTime) -> Option<SavedVerdict> {
    if entry.key != key.id() || !entry.public {
        log::debug!("capability store: a verdict filed under another key was refused");
        return None;
    }
    let [page] = <[StoredPage; 1]>::try_from(entry.pages).ok()?;
    if page.cursor.is_some() {
        return None;
    }
    let parsed = json::parse(page.json.as_bytes()).ok()?;
    let version = ProtocolVersion::known(&parsed.get("protocolVersion")?.as_str()?)?;
    let result = parsed.get("result")?.text().to_owned();
    let verdict = SavedVerdict { version, result, expires: page.expires };
    if !verdict.is_fresh(now) || crate::engine::check_saved_verdict(&verdict).is_err() {
        log::debug!("capability store: an expired or unusable era verdict was dropped");
        return None;
    }
    Some(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const RESULT: &str = r#"{"supportedVersions":["2026-07-28"],"capabilities":{},"serverInfo":{"name":"s","version":"1"}}"#;

    fn saved(expires: SystemTime) -> SavedVerdict {
        SavedVerdict {
            version: ProtocolVersion::known("2026-07-28").expect("known"),
            result: RESULT.to_owned(),
            expires,
        }
    }

    fn key_for(identity: &str) -> StoreKey {
        key(identity, Transport::Stdio, &Config::default()).expect("key")
    }

    #[test]
    fn a_verdict_comes_back_as_it_was_filed() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let v = saved(now + Duration::from_secs(60));
        let k = key_for("srv");
        assert_eq!(verdict(&k, entry(&k, &v), now), Some(v));
    }

    #[test]
    fn an_expired_or_foreign_verdict_is_refused() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let (k, other) = (key_for("srv"), key_for("other"));
        assert_ne!(k.id(), other.id());
        let expired = saved(now - Duration::from_secs(1));
        assert_eq!(verdict(&k, entry(&k, &expired), now), None);
        let fresh = saved(now + Duration::from_secs(60));
        assert_eq!(verdict(&k, entry(&other, &fresh), now), None);
    }

    #[test]
    fn a_verdict_the_engine_would_refuse_is_dropped() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let k = key_for("srv");
        let mut e = entry(&k, &saved(now + Duration::from_secs(60)));
        // The result does not list the version it names.
        e.pages[0].json = e.pages[0].json.replace("\"2026-07-28\"]", "\"2099-01-01\"]");
        assert_eq!(verdict(&k, e, now), None);
        let mut e = entry(&k, &saved(now + Duration::from_secs(60)));
        e.pages[0].json = "not json".into();
        assert_eq!(verdict(&k, e, now), None);
    }

    #[test]
    fn the_key_leaves_the_version_out_but_keeps_the_client_profile() {
        let plain = key_for("srv");
        let config =
            Config { extensions: r#"{"io.example/skills":{}}"#.into(), ..Config::default() };
        let with_ext = key("srv", Transport::Stdio, &config).expect("key");
        assert_ne!(plain.id(), with_ext.id());
        let http = key("srv", Transport::Http, &Config::default()).expect("key");
        assert_ne!(plain.id(), http.id());
        assert!(plain.id().starts_with("discover-"));
    }
}
