//! Fuzz entry points for the OAuth parsers, built only under `--cfg fuzzing`; each
//! `fuzz/fuzz_targets/oauth_*.rs` is a one-line shim into here.

use super::metadata::{
    parse_error_body, parse_exchange_response, parse_registration, parse_resource_metadata,
    parse_server_metadata, parse_token_response,
};

/// Any bytes as every metadata document: never a panic, and what parses keeps its required
/// members non-empty.
pub fn oauth_metadata(data: &[u8]) {
    if let Ok(prm) = parse_resource_metadata(data) {
        assert!(!prm.resource.is_empty() && !prm.authorization_servers.is_empty());
    }
    if let Ok(meta) = parse_server_metadata(data) {
        assert!(!meta.issuer.is_empty() && !meta.token_endpoint.is_empty());
    }
    let _ = parse_registration(data);
    let _ = parse_error_body(data);
}

/// Any bytes as a token response and as a token exchange response (the ID-JAG of
/// enterprise-managed authorization): never a panic; a parsed token is non-empty and its
/// `Debug` never shows it.
pub fn oauth_token_response(data: &[u8]) {
    if let Ok(x) = parse_exchange_response(data) {
        assert!(!x.assertion.expose().is_empty());
        let shown = format!("{:?}", x.assertion);
        assert_eq!(shown, format!("Secret(<redacted, {} bytes>)", x.assertion.expose().len()));
    }
    if let Ok(t) = parse_token_response(data) {
        assert!(!t.access_token.expose().is_empty());
        // Issue 21: whatever the server says, the lifetime is one the clock can add.
        assert!(t.expires_in.is_none_or(|s| s <= super::metadata::MAX_EXPIRES_IN));
        let shown = format!("{:?}", t.access_token);
        assert_eq!(shown, format!("Secret(<redacted, {} bytes>)", t.access_token.expose().len()));
    }
}

/// Any bytes as what DPoP reads from a server: a `DPoP-Nonce` value and a
/// `WWW-Authenticate` value (see `dpop::check_server_input`).
pub fn dpop_server_input(data: &[u8]) {
    super::dpop::check_server_input(data);
}
