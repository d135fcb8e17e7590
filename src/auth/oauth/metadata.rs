//! Parsers for the JSON documents of the flow: Protected Resource Metadata (RFC 9728),
//! authorization server metadata (RFC 8414), dynamic registration responses (RFC 7591),
//! token responses and OAuth error bodies (RFC 6749 5.1, 5.2). Every one returns a typed
//! error on any input: peer data never panics.

use serde_json::{Map, Value};

use super::store::Secret;
pub use crate::error::oauth::ParseError;

/// Protected Resource Metadata: who guards the resource and which scopes it knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceMetadata {
    pub(crate) resource: String,
    pub(crate) authorization_servers: Vec<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
}

/// The members of authorization server metadata the flow reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ServerMetadata {
    pub(crate) issuer: String,
    pub(crate) authorization_endpoint: Option<String>,
    pub(crate) token_endpoint: String,
    pub(crate) registration_endpoint: Option<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
    pub(crate) grant_types_supported: Option<Vec<String>>,
    pub(crate) token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub(crate) code_challenge_methods_supported: Option<Vec<String>>,
    pub(crate) iss_parameter_supported: bool,
    pub(crate) client_id_metadata_document_supported: bool,
    /// `dpop_signing_alg_values_supported` (RFC 9449 5.1): absent when DPoP is not
    /// advertised.
    pub(crate) dpop_signing_alg_values_supported: Option<Vec<String>>,
}

/// A successful token response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TokenResponse {
    pub(crate) access_token: Secret,
    pub(crate) expires_in: Option<u64>,
    pub(crate) refresh_token: Option<Secret>,
    pub(crate) scope: Option<String>,
    /// `token_type` is `DPoP` (RFC 9449 5): the token is bound to the proof's key.
    pub(crate) dpop: bool,
}

/// A dynamic client registration response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Registration {
    pub(crate) client_id: String,
    pub(crate) client_secret: Option<Secret>,
    pub(crate) token_endpoint_auth_method: Option<String>,
}

/// An OAuth error body: `error` and `error_description`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ErrorBody {
    pub(crate) error: Option<String>,
    pub(crate) description: Option<String>,
}

fn object(body: &[u8]) -> Result<Map<String, Value>, ParseError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ParseError::NotJson),
    }
}

fn string(map: &Map<String, Value>, name: &'static str) -> Result<Option<String>, ParseError> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ParseError::Invalid(name)),
    }
}

fn required(map: &Map<String, Value>, name: &'static str) -> Result<String, ParseError> {
    string(map, name)?.filter(|s| !s.is_empty()).ok_or(ParseError::Missing(name))
}

fn strings(
    map: &Map<String, Value>,
    name: &'static str,
) -> Result<Option<Vec<String>>, ParseError> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(String::from).ok_or(ParseError::Invalid(name)))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(ParseError::Invalid(name)),
    }
}

fn flag(map: &Map<String, Value>, name: &'static str) -> Result<bool, ParseError> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ParseError::Invalid(name)),
    }
}

/// RFC 9728 2: `resource` is required; `authorization_servers` is optional in the RFC but
/// MCP requires at least one.
pub(crate) fn parse_resource_metadata(body: &[u8]) -> Result<ResourceMetadata, ParseError> {
    let map = object(body)?;
    let resource = required(&map, "resource")?;
    let authorization_servers = strings(&map, "authorization_servers")?
        .filter(|list| !list.is_empty())
        .ok_or(ParseError::Missing("authorization_servers"))?;
    Ok(ResourceMetadata {
        resource,
        authorization_servers,
        scopes_supported: strings(&map, "scopes_supported")?,
    })
}

/// RFC 8414 2: `issuer` and `token_endpoint` are what every grant needs;
/// `authorization_endpoint` only the authorization code grant.
pub(crate) fn parse_server_metadata(body: &[u8]) -> Result<ServerMetadata, ParseError> {
    let map = object(body)?;
    Ok(ServerMetadata {
        issuer: required(&map, "issuer")?,
        authorization_endpoint: string(&map, "authorization_endpoint")?,
        token_endpoint: required(&map, "token_endpoint")?,
        registration_endpoint: string(&map, "registration_endpoint")?,
        scopes_supported: strings(&map, "scopes_supported")?,
        grant_types_supported: strings(&map, "grant_types_supported")?,
        token_endpoint_auth_methods_supported: strings(
            &map,
            "token_endpoint_auth_methods_supported",
        )?,
        code_challenge_methods_supported: strings(&map, "code_challenge_methods_supported")?,
        iss_parameter_supported: flag(&map, "authorization_response_iss_parameter_supported")?,
        client_id_metadata_document_supported: flag(&map, "client_id_metadata_document_supported")?,
        dpop_signing_alg_values_supported: strings(&map, "dpop_signing_alg_values_supported")?,
    })
}

/// The longest token lifetime taken from a token response (ten years); a longer one is cut to
/// it, so expiry and refresh times stay far inside `Instant`'s range.
pub(crate) const MAX_EXPIRES_IN: u64 = 10 * 365 * 86_400;

/// RFC 6749 5.1. `token_type` must be `Bearer` or `DPoP` (RFC 9449 5; case-insensitive): a
/// MAC or other token would be refused by the resource anyway, so say so at the source.
pub(crate) fn parse_token_response(body: &[u8]) -> Result<TokenResponse, ParseError> {
    let map = object(body)?;
    let access_token = required(&map, "access_token")?;
    let token_type = required(&map, "token_type")?;
    let dpop = token_type.eq_ignore_ascii_case("dpop");
    if !dpop && !token_type.eq_ignore_ascii_case("bearer") {
        return Err(ParseError::Invalid("token_type"));
    }
    let expires_in = match map.get("expires_in") {
        None | Some(Value::Null) => None,
        // Some servers send a float or a numeric string; accept both, whole seconds.
        Some(Value::Number(n)) => Some(
            n.as_u64()
                .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
                .ok_or(ParseError::Invalid("expires_in"))?,
        ),
        Some(Value::String(s)) => {
            Some(s.trim().parse().map_err(|_| ParseError::Invalid("expires_in"))?)
        }
        Some(_) => return Err(ParseError::Invalid("expires_in")),
    };
    Ok(TokenResponse {
        access_token: Secret(access_token),
        // The server's number, however large, becomes a time the host can wait for. Zero
        // says nothing usable (a token dead on arrival would be fetched again and again):
        // read as no lifetime given, as other OAuth clients do.
        expires_in: expires_in.filter(|&s| s > 0).map(|s| s.min(MAX_EXPIRES_IN)),
        refresh_token: string(&map, "refresh_token")?.filter(|s| !s.is_empty()).map(Secret),
        scope: string(&map, "scope")?,
        dpop,
    })
}

/// The refresh token of a token answer refused otherwise (see `OAuthFlow::refuse_token`):
/// a non-empty string under `refresh_token` in a JSON object, whatever else it holds.
pub(crate) fn rotated_refresh_token(body: &[u8]) -> Option<Secret> {
    let map = object(body).ok()?;
    string(&map, "refresh_token").ok()?.filter(|s| !s.is_empty()).map(Secret)
}

/// RFC 7591 3.2.1.
pub(crate) fn parse_registration(body: &[u8]) -> Result<Registration, ParseError> {
    let map = object(body)?;
    Ok(Registration {
        client_id: required(&map, "client_id")?,
        client_secret: string(&map, "client_secret")?.filter(|s| !s.is_empty()).map(Secret),
        token_endpoint_auth_method: string(&map, "token_endpoint_auth_method")?,
    })
}

/// The token type of an Identity Assertion JWT Authorization Grant (SEP-990).
pub(crate) const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// A token exchange response carrying an ID-JAG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExchangeResponse {
    /// The ID-JAG (RFC 8693 names it `access_token` whatever it is).
    pub(crate) assertion: Secret,
}

/// RFC 8693 2.2.1: `access_token` and `issued_token_type` are required, and the issued type
/// must be the ID-JAG asked for. `token_type` (`N_A` here, since an ID-JAG is no access
/// token) is read for its type only: its value says nothing the flow uses.
pub(crate) fn parse_exchange_response(body: &[u8]) -> Result<ExchangeResponse, ParseError> {
    let map = object(body)?;
    let assertion = required(&map, "access_token")?;
    if required(&map, "issued_token_type")? != ID_JAG {
        return Err(ParseError::Invalid("issued_token_type"));
    }
    string(&map, "token_type")?;
    Ok(ExchangeResponse { assertion: Secret(assertion) })
}

/// RFC 6749 5.2; anything unreadable is an empty body, since this runs on a failure path
/// that already has the HTTP status to report.
pub(crate) fn parse_error_body(body: &[u8]) -> ErrorBody {
    let Ok(map) = object(body) else { return ErrorBody::default() };
    ErrorBody {
        error: string(&map, "error").ok().flatten(),
        description: string(&map, "error_description").ok().flatten(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_metadata() {
        let prm = parse_resource_metadata(
            br#"{"resource":"https://r/mcp","authorization_servers":["https://as"],"scopes_supported":["a","b"],"x":1}"#,
        )
        .unwrap();
        assert_eq!(prm.resource, "https://r/mcp");
        assert_eq!(prm.authorization_servers, ["https://as"]);
        assert_eq!(prm.scopes_supported.unwrap(), ["a", "b"]);
        let cases: &[(&[u8], ParseError)] = &[
            (b"", ParseError::NotJson),
            (b"[]", ParseError::NotJson),
            (b"{\"resource\":1}", ParseError::Invalid("resource")),
            (b"{\"authorization_servers\":[\"a\"]}", ParseError::Missing("resource")),
            (b"{\"resource\":\"r\"}", ParseError::Missing("authorization_servers")),
            (b"{\"resource\":\"r\",\"authorization_servers\":[]}", ParseError::Missing("authorization_servers")),
            (b"{\"resource\":\"r\",\"authorization_servers\":[1]}", ParseError::Invalid("authorization_servers")),
            (
                b"{\"resource\":\"r\",\"authorization_servers\":[\"a\"],\"scopes_supported\":\"a b\"}",
                ParseError::Invalid("scopes_supported"),
            ),
        ];
        for (body, err) in cases {
            assert_eq!(
                parse_resource_metadata(body),
                Err(*err),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn server_metadata() {
        let m = parse_server_metadata(
            br#"{"issuer":"https://as","authorization_endpoint":"https://as/a","token_endpoint":"https://as/t",
                "authorization_response_iss_parameter_supported":true,"client_id_metadata_document_supported":false,
                "token_endpoint_auth_methods_supported":["none"]}"#,
        )
        .unwrap();
        assert_eq!(m.issuer, "https://as");
        assert!(m.iss_parameter_supported);
        assert!(!m.client_id_metadata_document_supported);
        assert_eq!(m.registration_endpoint, None);
        assert_eq!(
            parse_server_metadata(br#"{"issuer":"i"}"#),
            Err(ParseError::Missing("token_endpoint"))
        );
        assert_eq!(
            parse_server_metadata(
                br#"{"issuer":"i","token_endpoint":"t","authorization_response_iss_parameter_supported":"yes"}"#
            ),
            Err(ParseError::Invalid("authorization_response_iss_parameter_supported"))
        );
    }

    #[test]
    fn token_responses() {
        let t = parse_token_response(
            br#"{"access_token":"at","token_type":"bearer","expires_in":3600,"refresh_token":"rt","scope":"a"}"#,
        )
        .unwrap();
        assert_eq!((t.access_token.0.as_str(), t.expires_in), ("at", Some(3600)));
        assert_eq!(t.refresh_token.unwrap().0, "rt");
        for (body, want) in [
            (&br#"{"access_token":"a","token_type":"Bearer","expires_in":"60"}"#[..], Some(60)),
            (br#"{"access_token":"a","token_type":"Bearer","expires_in":59.9}"#, Some(59)),
            (br#"{"access_token":"a","token_type":"Bearer"}"#, None),
            // Zero: no lifetime given (a token expired on arrival made the flow run again,
            // up to its re-authorization limit, with a browser prompt each time).
            (br#"{"access_token":"a","token_type":"Bearer","expires_in":0}"#, None),
            (br#"{"access_token":"a","token_type":"Bearer","expires_in":0.5}"#, None),
        ] {
            assert_eq!(parse_token_response(body).unwrap().expires_in, want);
        }
        let cases: &[(&[u8], ParseError)] = &[
            (b"{\"token_type\":\"Bearer\"}", ParseError::Missing("access_token")),
            (
                b"{\"access_token\":\"\",\"token_type\":\"Bearer\"}",
                ParseError::Missing("access_token"),
            ),
            (b"{\"access_token\":\"a\"}", ParseError::Missing("token_type")),
            (b"{\"access_token\":\"a\",\"token_type\":\"MAC\"}", ParseError::Invalid("token_type")),
            (
                b"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":-1}",
                ParseError::Invalid("expires_in"),
            ),
            (
                b"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":\"x\"}",
                ParseError::Invalid("expires_in"),
            ),
            (
                b"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":[]}",
                ParseError::Invalid("expires_in"),
            ),
            (b"\xff", ParseError::NotJson),
        ];
        for (body, err) in cases {
            assert_eq!(parse_token_response(body), Err(*err), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn registration_and_errors() {
        let r = parse_registration(br#"{"client_id":"c","client_secret":"s","token_endpoint_auth_method":"client_secret_post"}"#).unwrap();
        assert_eq!(r.client_id, "c");
        assert_eq!(r.client_secret.unwrap().0, "s");
        assert_eq!(parse_registration(b"{}"), Err(ParseError::Missing("client_id")));
        let e = parse_error_body(br#"{"error":"invalid_grant","error_description":"expired"}"#);
        assert_eq!(
            (e.error.as_deref(), e.description.as_deref()),
            (Some("invalid_grant"), Some("expired"))
        );
        assert_eq!(parse_error_body(b"<html>"), ErrorBody::default());
        assert_eq!(parse_error_body(br#"{"error":5}"#), ErrorBody::default());
    }
}
