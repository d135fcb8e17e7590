//! The cache hints a cacheable result carries: `ttlMs` and `cacheScope` (spec: caching).

use super::canonical::Value;

/// What a result said about its lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TtlHint {
    /// `ttlMs` was a non-negative integer. `Millis(0)` means "do not cache".
    Millis(u64),
    /// `ttlMs` was missing, negative, fractional or not a number. A 2026-07-28 page is then
    /// stale at once, as PROTOCOL.md §2.2 says ([`ParsedPage::lifetime_in_era`]); a 2025-11-25
    /// one, which never carries it, gets the client's default TTL, never "forever".
    ///
    /// [`ParsedPage::lifetime_in_era`]: super::listing::ParsedPage::lifetime_in_era
    Unspecified,
}

/// Who may share a cached result (`cacheScope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CacheScope {
    /// `"public"`: shareable across principals of the same server identity.
    Public,
    /// `"private"`, missing, or any value not understood: one principal+scope+tenant only.
    /// Unknown values fall here because sharing is the step that can leak.
    Private,
}

/// Both hints of one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheHints {
    pub(crate) ttl: TtlHint,
    pub(crate) scope: CacheScope,
}

impl CacheHints {
    /// Reads the hints from a parsed result object; anything else gives the defaults.
    pub(crate) fn from_result(result: &Value<'_>) -> Self {
        let ttl = match result.get("ttlMs") {
            Some(Value::Number(n)) => parse_ttl(n),
            _ => TtlHint::Unspecified,
        };
        let scope = match result.get("cacheScope").and_then(Value::as_str) {
            Some("public") => CacheScope::Public,
            _ => CacheScope::Private,
        };
        CacheHints { ttl, scope }
    }
}

/// A non-negative integer in any notation JSON Schema counts as one (`300000`, `300000.0`,
/// `3e5`); anything else (`-1`, `1.5`) is malformed. Values past `u64::MAX` saturate: the
/// store caps every TTL at its own maximum anyway.
fn parse_ttl(n: &str) -> TtlHint {
    crate::proto::json::whole_number(n).map_or(TtlHint::Unspecified, TtlHint::Millis)
}

#[cfg(test)]
mod tests {
    use super::super::canonical::parse;
    use super::*;

    fn hints(json: &str) -> CacheHints {
        CacheHints::from_result(&parse(json).expect("json"))
    }

    #[test]
    fn reads_ttl_and_scope() {
        let h = hints(r#"{"ttlMs":300000,"cacheScope":"public"}"#);
        assert_eq!(h, CacheHints { ttl: TtlHint::Millis(300_000), scope: CacheScope::Public });
        assert_eq!(hints(r#"{"ttlMs":0}"#).ttl, TtlHint::Millis(0));
        assert_eq!(hints(r#"{"ttlMs":99999999999999999999999}"#).ttl, TtlHint::Millis(u64::MAX));
        // Whole numbers in other notations are integers to JSON Schema: not stale at once.
        for (json, ms) in [(r#"{"ttlMs":300000.0}"#, 300_000), (r#"{"ttlMs":3e5}"#, 300_000)] {
            assert_eq!(hints(json).ttl, TtlHint::Millis(ms), "{json}");
        }
        assert_eq!(hints(r#"{"ttlMs":1e300}"#).ttl, TtlHint::Millis(u64::MAX));
    }

    #[test]
    fn malformed_or_missing_ttl_is_unspecified() {
        for json in [
            r#"{}"#,
            r#"{"ttlMs":-1}"#,
            r#"{"ttlMs":1.5}"#,
            r#"{"ttlMs":-1e3}"#,
            r#"{"ttlMs":"100"}"#,
            r#"{"ttlMs":null}"#,
            r#"[]"#,
        ] {
            assert_eq!(hints(json).ttl, TtlHint::Unspecified, "{json}");
        }
    }

    #[test]
    fn unknown_or_missing_scope_is_private() {
        for json in [r#"{}"#, r#"{"cacheScope":"private"}"#, r#"{"cacheScope":"PUBLIC"}"#] {
            assert_eq!(hints(json).scope, CacheScope::Private, "{json}");
        }
        assert_eq!(hints(r#"{"cacheScope":1}"#).scope, CacheScope::Private);
    }
}
