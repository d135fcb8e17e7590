//! The grants that need no user: client credentials (in the parent), and the two on an
//! assertion from the host: the JWT-bearer grant (RFC 7523 2.1, workload identity) and
//! enterprise-managed authorization (SEP-990: an RFC 8693 token exchange at the identity
//! provider for an ID-JAG, then the JWT-bearer grant with it).

use super::super::assertion::{
    Assertion, AssertionError, AssertionKind, AssertionRequest, RENEW_MARGIN_SECS,
};
use super::super::encode::{base64, form, percent_encode};
use super::super::metadata::{parse_error_body, parse_exchange_response, ID_JAG};
use super::super::store::Secret;
use super::super::url::is_secure;
use super::{AuthError, AuthFailure, AuthStep, Grant, HttpMethod, HttpResponse, OAuthFlow, Step};
use super::{FORM, JSON};

/// RFC 7523 2.1.
const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// RFC 8693 2.1.
const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693 3: the subject token is an OpenID Connect ID token.
const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";

/// The host's assertion the flow holds, and the one retry a refusal buys in a run.
#[derive(Debug, Default)]
pub(super) struct HeldAssertion {
    /// The last assertion the provider gave (the identity token for the exchange).
    held: Option<Assertion>,
    /// A refusal was retried in this run: the next one fails it.
    retried: bool,
    /// The assertion refused in this run, and the error it got: the provider handing back
    /// the same one ends the run with that error rather than sending it again.
    refused: Option<(Secret, AuthError)>,
}

impl HeldAssertion {
    /// A run ended: the next one may retry again.
    pub(super) fn finish(&mut self) {
        self.retried = false;
        self.refused = None;
    }
}

impl OAuthFlow {
    /// Starts the grant of a machine identity once the authorization server is known; false
    /// for the authorization code grant, which needs a client identity and a user.
    pub(super) fn machine_grant(&mut self) -> bool {
        match self.config.grant {
            Grant::AuthorizationCode { .. } => return false,
            Grant::ClientCredentials => self.client_credentials(),
            Grant::JwtBearer => self.jwt_bearer(),
            Grant::IdentityAssertion { .. } => self.token_exchange(),
        }
        true
    }

    /// The host's client at the authorization server, for the assertion grants: these
    /// credentials authenticate the client (a public one sends its `client_id` alone).
    fn assertion_client(&mut self) -> bool {
        let Some(server) = self.server.clone() else { return false };
        let Some(client) = self.pre_registered(&server.meta) else {
            self.fail(AuthStep::Registration, AuthFailure::NoClientIdentity);
            return false;
        };
        self.pre_registered_at = Some(server.meta.issuer.clone());
        self.client = Some(client);
        true
    }

    /// Workload identity: the host's assertion, audience the authorization server.
    fn jwt_bearer(&mut self) {
        if !self.assertion_client() {
            return;
        }
        let Some(issuer) = self.server.as_ref().map(|s| s.meta.issuer.clone()) else { return };
        let step = AuthStep::Token;
        if let Some(assertion) = self.host_assertion(AssertionKind::JwtBearer, &issuer, step) {
            self.bearer_grant(assertion);
        }
    }

    /// RFC 7523 2.1 at the authorization server, with the client's authentication.
    fn bearer_grant(&mut self, assertion: String) {
        let pairs = vec![("grant_type", JWT_BEARER_GRANT.to_owned()), ("assertion", assertion)];
        self.machine_token_request(pairs);
    }

    /// A token request of a grant without a user: `pairs` with the selected scope (never
    /// `offline_access`: there is no user to come back for) and the resource.
    pub(super) fn machine_token_request(&mut self, mut pairs: Vec<(&'static str, String)>) {
        let Some(server) = self.server.clone() else { return };
        let scope = self.select_scope(&server.meta, false);
        if let Some(scope) = &scope {
            pairs.push(("scope", scope.clone()));
        }
        if let Some(resource) = &self.resource {
            pairs.push(("resource", resource.clone()));
        }
        self.requested_scope = scope;
        self.token_request(pairs, false);
    }

    /// Enterprise-managed authorization, first half: the identity token exchanged at the
    /// identity provider for an ID-JAG whose audience is the authorization server and whose
    /// resource is the MCP server (SEP-990, RFC 8693 2.1).
    fn token_exchange(&mut self) {
        let Grant::IdentityAssertion { idp } = &self.config.grant else { return };
        let idp = idp.clone();
        if !self.assertion_client() {
            return;
        }
        let Some(server) = self.server.clone() else { return };
        if !is_secure(&idp.token_endpoint) {
            // The identity token would travel in clear text.
            return self.fail(AuthStep::Exchange, AuthFailure::NotHttps("identity provider"));
        }
        let endpoint = idp.token_endpoint.as_str();
        let Some(subject) =
            self.host_assertion(AssertionKind::IdToken, endpoint, AuthStep::Exchange)
        else {
            return;
        };
        let resource = self.resource.clone().unwrap_or_else(|| self.config.server_url.clone());
        let scope = self.select_scope(&server.meta, false);
        let mut pairs = vec![
            ("grant_type", TOKEN_EXCHANGE_GRANT),
            ("requested_token_type", ID_JAG),
            ("audience", server.meta.issuer.as_str()),
            ("resource", resource.as_str()),
        ];
        if let Some(scope) = &scope {
            pairs.push(("scope", scope));
        }
        pairs.push(("subject_token", subject.as_str()));
        pairs.push(("subject_token_type", ID_TOKEN_TYPE));
        let mut headers = vec![("Content-Type", FORM.into()), ("Accept", JSON.into())];
        match &idp.client_secret {
            // RFC 6749 2.3.1: both parts form-encoded before base64.
            Some(secret) => {
                let mut userpass = String::new();
                percent_encode(&idp.client_id, &mut userpass);
                userpass.push(':');
                percent_encode(secret.expose(), &mut userpass);
                headers.push(("Authorization", format!("Basic {}", base64(userpass.as_bytes()))));
            }
            None => pairs.push(("client_id", idp.client_id.as_str())),
        }
        let body = form(&pairs).into_bytes();
        self.requested_scope = scope;
        self.step = Step::Exchange;
        self.send(HttpMethod::Post, idp.token_endpoint, headers, body);
    }

    /// The identity provider's answer: the ID-JAG goes to the authorization server. A refused
    /// identity token (`invalid_grant`) is asked for once more.
    pub(super) fn on_exchange(&mut self, response: HttpResponse<'_>) {
        if response.status != 200 {
            if self.retry_refused(&response, AuthStep::Exchange) {
                return self.token_exchange();
            }
            return self.fail_response(AuthStep::Exchange, response);
        }
        match parse_exchange_response(response.body) {
            Ok(exchanged) => self.bearer_grant(exchanged.assertion.0),
            Err(e) => self.fail(AuthStep::Exchange, AuthFailure::Malformed(e)),
        }
    }

    /// The authorization server refused an assertion grant: with `invalid_grant`, once per
    /// run, a new assertion is asked for (workload identity) or a new ID-JAG obtained
    /// (enterprise). True when the grant was started again.
    pub(super) fn retry_assertion_grant(&mut self, response: &HttpResponse<'_>) -> bool {
        match self.config.grant {
            Grant::JwtBearer => {
                let retry = self.retry_refused(response, AuthStep::Token);
                if retry {
                    self.jwt_bearer();
                }
                retry
            }
            // The ID-JAG was refused, not the identity token: exchange the held one again.
            Grant::IdentityAssertion { .. } => {
                let retry = self.retry_allowed(response);
                if retry {
                    self.token_exchange();
                }
                retry
            }
            _ => false,
        }
    }

    /// Whether a refusal may be retried: `invalid_grant`, and the first in this run.
    fn retry_allowed(&mut self, response: &HttpResponse<'_>) -> bool {
        if self.assertion.retried || !(400..500).contains(&response.status) {
            return false;
        }
        if parse_error_body(response.body).error.as_deref() != Some("invalid_grant") {
            return false;
        }
        self.assertion.retried = true;
        true
    }

    /// [`retry_allowed`](Self::retry_allowed), dropping the held assertion: the provider is
    /// asked for another, and the refused one is remembered so it is not sent again.
    fn retry_refused(&mut self, response: &HttpResponse<'_>, step: AuthStep) -> bool {
        if !self.retry_allowed(response) {
            return false;
        }
        if let Some(refused) = self.assertion.held.take() {
            let mut e = AuthError::new(step, AuthFailure::Status);
            e.status = Some(response.status);
            e.error = Some("invalid_grant".into());
            self.assertion.refused = Some((refused.value, e));
        }
        true
    }

    /// The assertion to send: the one held while it is good for [`RENEW_MARGIN_SECS`] more,
    /// else a new one from the provider. `None` when the run has failed (no provider, no
    /// assertion, an expired one, the refused one again).
    fn host_assertion(
        &mut self,
        kind: AssertionKind,
        audience: &str,
        step: AuthStep,
    ) -> Option<String> {
        let unix_now = self.unix(self.now);
        if let Some(held) =
            self.assertion.held.as_ref().filter(|a| a.usable(unix_now, RENEW_MARGIN_SECS))
        {
            return Some(held.value.expose().to_owned());
        }
        let renew = self.assertion.held.is_some() || self.assertion.refused.is_some();
        let resource = self.resource.clone().unwrap_or_else(|| self.config.server_url.clone());
        let Some(provider) = self.config.assertions.as_mut() else {
            self.fail(step, AuthFailure::MissingCredentials);
            return None;
        };
        let request = AssertionRequest { kind, audience, resource: &resource, renew };
        let fresh = match provider.assertion(&request) {
            Ok(a) if a.value.expose().is_empty() => Err(AssertionError::Empty),
            // A new one may still be short-lived; only an expired one is not sent.
            Ok(a) if !a.usable(unix_now, 0) => Err(AssertionError::Expired),
            other => other,
        };
        let fresh = match fresh {
            Ok(a) => a,
            Err(why) => {
                self.assertion.held = None;
                self.fail(step, AuthFailure::Assertion(why));
                return None;
            }
        };
        if let Some((refused, e)) = self.assertion.refused.take() {
            if refused == fresh.value {
                // Sending it again would be refused again: the server's answer stands.
                self.finish(Err(e));
                return None;
            }
        }
        let value = fresh.value.expose().to_owned();
        self.assertion.held = Some(fresh);
        Some(value)
    }
}

#[cfg(test)]
mod tests;
