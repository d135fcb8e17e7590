//! [`OAuthFlow`]: the state machine. Discovery, client identity, grant, tokens; one HTTP
//! request outstanding at a time.

mod grants;

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use serde_json::json;

use super::crypto::{random_token, s256};
use super::dpop::{self, Dpop, DpopMode, Nonce};
use super::encode::{base64, form, parse_query, percent_encode};
use super::metadata::{
    parse_error_body, parse_registration, parse_resource_metadata, parse_server_metadata,
    parse_token_response, rotated_refresh_token, ParseError, ServerMetadata, MAX_EXPIRES_IN,
};
use super::store::{ClientRegistration, Secret, StoredAuth, Tokens};
use super::url::{
    as_metadata_locations, is_secure, origin, parts, prm_locations, resource_covers, with_query,
};
use super::{
    Action, Authorization, Authorizer, Grant, HttpMethod, HttpRequest, HttpResponse, OAuthConfig,
    RequestId,
};
use crate::error::oauth::{AuthError, AuthFailure, AuthStep, AuthorizeError, RedirectError};
use crate::proto::challenge::AuthChallenge;

const FORM: &str = "application/x-www-form-urlencoded";
const JSON: &str = "application/json";
const BASIC: &str = "client_secret_basic";
const POST: &str = "client_secret_post";
const NONE: &str = "none";
const PRIVATE_KEY_JWT: &str = "private_key_jwt";
const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// Where the flow is. Each waiting state holds what its answer needs.
#[derive(Debug)]
enum Step {
    /// No flow running.
    Idle,
    /// Fetching Protected Resource Metadata from `candidates[at]`.
    /// `failed`: the status of an earlier location that answered with neither the document
    /// nor its absence (404, 410), reported when no later one has the document.
    Resource { candidates: Vec<String>, at: usize, from_challenge: bool, failed: Option<u16> },
    /// Fetching authorization server metadata for `issuer` from `candidates[at]`. `legacy`:
    /// no PRM, so the issuer is the server's origin and missing metadata means the
    /// 2025-03-26 default endpoints.
    Server { issuer: String, candidates: Vec<String>, at: usize, legacy: bool, failed: Option<u16> },
    /// Waiting for the registration response.
    Register { method: String },
    /// Waiting for the host's redirect, until `deadline`. The PKCE verifier is a `Secret`: with
    /// an intercepted code it would buy a token, so `{:?}` must not show it.
    Redirect { state: String, verifier: Secret, deadline: Instant },
    /// Waiting for a token response. `proof`: the request carried a DPoP proof; `resend`:
    /// its parameters, to send once more with the server's nonce after `use_dpop_nonce`.
    Token { refresh: bool, proof: bool, resend: Option<Resend> },
    /// Waiting for the identity provider's token exchange response (an ID-JAG).
    Exchange,
}

/// A token request's parameters, kept to send it again; `Debug` shows their names only (the
/// values hold codes, verifiers and refresh tokens).
struct Resend(Vec<(&'static str, String)>);

impl fmt::Debug for Resend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter().map(|(k, _)| k)).finish()
    }
}

/// The authorization server in use and what it said about itself.
#[derive(Debug, Clone)]
struct Server {
    meta: ServerMetadata,
    /// False when the metadata is the 2025-03-26 default endpoints: nothing was published,
    /// so nothing (PKCE, `iss`) can be checked against it.
    published: bool,
}

/// The OAuth flow for one MCP server and one principal. See the [module
/// documentation](super) for the call order.
pub struct OAuthFlow {
    config: OAuthConfig,
    /// `now` and the Unix time at construction: Unix times (JWT claims, stored expiry) are
    /// derived from `now` without reading a clock.
    epoch: (Instant, u64),
    /// The `now` of the current `handle_*` call, for the steps it sets off.
    now: Instant,
    step: Step,
    next_id: u64,
    outstanding: Option<RequestId>,
    actions: VecDeque<Action>,
    /// The PRM `resource`, sent as the `resource` parameter; `None` without PRM (legacy).
    resource: Option<String>,
    prm_scopes: Option<Vec<String>>,
    challenge_scope: Option<String>,
    /// Set for a 403 step-up: the scopes to add to what was asked before.
    step_up: bool,
    server: Option<Server>,
    /// The issuer that `client` and `tokens` belong to.
    issuer: Option<String>,
    client: Option<ClientRegistration>,
    tokens: Option<Tokens>,
    /// The scope of the last authorization request.
    requested_scope: Option<String>,
    reauthorizations: u8,
    /// The issuer where host credentials without an explicit issuer were first used: they
    /// are bound to it from then on (SEP-2352: credentials belong to one server).
    pre_registered_at: Option<String>,
    /// The `state` of the last few authorizations that ended, and how: a redirect carrying
    /// one is refused as late or duplicate without disturbing the authorization waiting now.
    ended: VecDeque<(String, RedirectError)>,
    /// DPoP, unless [`DpopMode::Off`].
    dpop: Option<Dpop>,
    /// The authorization server's latest DPoP nonce (RFC 9449 8); forgotten with the server.
    as_nonce: Nonce,
    /// The host's assertion held for the assertion grants, and their one retry.
    assertion: grants::HeldAssertion,
    /// No refresh before this time, and the wait that set it: a refresh that failed, or that
    /// brought a token already due for its refresh, is not tried again at once.
    refresh_not_before: Option<Instant>,
    /// The refresh in flight was started by the timer, ahead of the expiry, while the token
    /// still works (not by a 401).
    background_refresh: bool,
    /// How long before its expiry the current token is refreshed: `refresh_margin`, or half
    /// the token's lifetime when that is shorter (a 30 s token under a 60 s margin was due on
    /// arrival, again and again). `None` for a token loaded from the store (its lifetime is
    /// not known): the configured margin.
    token_margin: Option<u64>,
    refresh_wait: Duration,
}

/// The first wait after a refresh before the next may start; it doubles with each refresh
/// that leaves one due, up to the largest.
const FIRST_REFRESH_WAIT: Duration = Duration::from_secs(5);
const MAX_REFRESH_WAIT: Duration = Duration::from_secs(600);

/// How many ended authorizations are remembered.
const ENDED_KEPT: usize = 4;

impl fmt::Debug for OAuthFlow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthFlow")
            .field("server_url", &crate::redact::RedactedUrl(&self.config.server_url))
            .field("step", &self.step)
            .field("issuer", &self.issuer)
            .field("client", &self.client)
            .field("tokens", &self.tokens)
            .finish_non_exhaustive()
    }
}

impl OAuthFlow {
    /// A flow for `config.server_url`, with what the store kept for it. `unix_now` is the
    /// wall-clock time at `now`, in seconds since the Unix epoch.
    pub fn new(mut config: OAuthConfig, now: Instant, unix_now: u64) -> Result<Self, AuthError> {
        if parts(&config.server_url).is_none() {
            return Err(AuthError::new(AuthStep::Discovery, AuthFailure::InvalidServerUrl));
        }
        if !is_secure(&config.server_url) {
            // Its tokens would cross the network in clear, to whoever is on the path.
            return Err(AuthError::new(AuthStep::Discovery, AuthFailure::CleartextResource));
        }
        let stored = config.store.load(&config.server_url);
        let (issuer, client, mut tokens) = match stored {
            Some(s) => (Some(s.issuer), s.client, s.tokens),
            None => (None, None, None),
        };
        let pre_registered_at = issuer.clone();
        let mut dpop = match (config.dpop, config.dpop_key.take()) {
            (DpopMode::Off, _) => None,
            (mode, Some(key)) => Some(Dpop::new(mode, key)),
            (mode, None) => match dpop::DpopKey::generate() {
                Ok(key) => Some(Dpop::new(mode, key)),
                Err(_) => return Err(AuthError::new(AuthStep::Token, AuthFailure::Crypto)),
            },
        };
        // A token bound to another key (or DPoP now off) cannot be presented: drop it.
        if let Some(jkt) = tokens.as_ref().and_then(|t| t.dpop_jkt.as_deref()) {
            if dpop.as_ref().is_none_or(|d| d.thumbprint() != jkt) {
                log::debug!("oauth: the stored token is bound to another DPoP key");
                tokens = None;
            }
        }
        // Nor may an unbound (bearer) token be, when DPoP is required: a run's own token
        // requests refuse one (`DpopUnbound`), and one stored by a run without DPoP was sent
        // as a bearer token until the server refused it.
        let required = dpop.as_ref().is_some_and(|d| d.mode == DpopMode::Required);
        if required && tokens.as_ref().is_some_and(|t| t.dpop_jkt.is_none()) {
            log::debug!("oauth: the stored token is not bound to a DPoP key, which is required");
            tokens = None;
        }
        if let Some(d) = dpop.as_mut() {
            d.set_token(tokens.as_ref().map(|t| t.access_token.expose()));
        }
        Ok(Self {
            config,
            epoch: (now, unix_now),
            now,
            step: Step::Idle,
            next_id: 0,
            outstanding: None,
            actions: VecDeque::new(),
            resource: None,
            prm_scopes: None,
            challenge_scope: None,
            step_up: false,
            server: None,
            issuer,
            client,
            tokens,
            requested_scope: None,
            reauthorizations: 0,
            // The issuer the store remembers for this server is the one the host's
            // credentials were used at before a restart: they stay bound to it (SEP-2352).
            pre_registered_at,
            ended: VecDeque::with_capacity(ENDED_KEPT),
            dpop,
            as_nonce: Nonce::default(),
            assertion: grants::HeldAssertion::default(),
            refresh_not_before: None,
            background_refresh: false,
            token_margin: None,
            refresh_wait: Duration::ZERO,
        })
    }

    /// Whether the token held is DPoP-bound: it is sent as `Authorization: DPoP`, with a
    /// proof from [`resource_proof`](Self::resource_proof).
    #[must_use]
    pub fn is_dpop_bound(&self) -> bool {
        self.dpop.is_some() && self.tokens.as_ref().is_some_and(|t| t.dpop_jkt.is_some())
    }

    /// A fresh DPoP proof for a request to the MCP server (`htm` the method, `htu` its URL
    /// without query or fragment), with `ath` for the token held and the server's latest
    /// nonce; `None` unless the token is DPoP-bound (or if signing failed). Written into a
    /// buffer the flow reuses.
    pub fn resource_proof(&mut self, now: Instant, htm: &str, htu: &str) -> Option<&[u8]> {
        if !self.is_dpop_bound() {
            return None;
        }
        let iat = self.unix(now);
        self.dpop.as_mut()?.resource_proof(htm, htu, iat)
    }

    /// A `DPoP-Nonce` header from the MCP server (RFC 9449 9): kept for the next proofs.
    /// Returns whether it was usable; ignored without DPoP.
    pub fn handle_resource_nonce(&mut self, value: &[u8]) -> bool {
        self.dpop.as_mut().is_some_and(|d| d.resource_nonce.update(value))
    }

    /// The access token to send as `Authorization: Bearer`, unless none is held or it has
    /// expired. Expiry is judged on the server's `expires_in`; a token with none is used
    /// until the server refuses it.
    #[must_use]
    pub fn bearer(&self, now: Instant) -> Option<&Secret> {
        let tokens = self.tokens.as_ref()?;
        match tokens.expires_at {
            Some(at) if self.unix(now) >= at => None,
            _ => Some(&tokens.access_token),
        }
    }

    /// The scope of the token held, as the authorization server granted it (space-separated;
    /// the scope requested when the server did not say), or `None` without a token.
    #[must_use]
    pub fn granted_scope(&self) -> Option<&str> {
        self.tokens.as_ref()?.scope.as_deref()
    }

    /// Whether a flow is running (requests should wait for `Ready` or `Failed`).
    #[must_use]
    pub fn is_running(&self) -> bool {
        !matches!(self.step, Step::Idle)
    }

    /// Whether the flow running is a step-up (a 403 asked for more scope) with a token in
    /// hand: that token still serves every request that needs no more than it has.
    pub(crate) fn steps_up_with_a_token(&self) -> bool {
        self.step_up && self.is_running() && self.tokens.is_some()
    }

    /// The resource server refused a request: `status` 401 (no or bad token) or 403 with
    /// `insufficient_scope` (step-up). Starts discovery and the grant; the outcome comes as
    /// [`Action::Ready`] or [`Action::Failed`]. A challenge while a flow runs is ignored: that
    /// flow's outcome answers it too. Any other 403 fails at once, since a new token would
    /// not change it.
    pub fn handle_challenge(&mut self, now: Instant, status: u16, challenge: &AuthChallenge) {
        self.now = now;
        if self.is_running() {
            if status == 401 && self.background_refresh {
                // The server refused the token a refresh ahead of its expiry is replacing:
                // that refresh answers this challenge now, so if it is refused the user is
                // asked, rather than the refused token kept as one that "still works" (the
                // call parked on this 401 then failed with no flow left to run).
                self.background_refresh = false;
                self.reauthorizations = self.reauthorizations.saturating_add(1);
            }
            return;
        }
        let step_up = status == 403;
        if step_up && challenge.error.as_deref() != Some("insufficient_scope") {
            let mut e = AuthError::new(AuthStep::Authorization, AuthFailure::Status);
            e.status = Some(status);
            e.error = challenge.error.clone();
            self.actions.push_back(Action::Failed(e));
            return;
        }
        // Refused before any flow starts, so not through `finish`: it gives back the count of
        // a flow that ran and forgets the scope asked, which these refusals rest on.
        let refused = || {
            let e = AuthError::new(AuthStep::Authorization, AuthFailure::StepUpLimit);
            Action::Failed(e)
        };
        if step_up && !self.adds_scope(challenge.scope.as_deref()) {
            // The server asks for what was already asked and not granted: asking again
            // would loop.
            self.actions.push_back(refused());
            return;
        }
        if self.reauthorizations >= self.config.max_reauthorizations {
            self.actions.push_back(refused());
            return;
        }
        self.reauthorizations += 1;
        self.step_up = step_up;
        self.challenge_scope = challenge.scope.clone().filter(|s| !s.trim().is_empty());
        // Discovery runs on every challenge, not once: the resource may have moved to
        // another authorization server (SEP-2352), which is only visible in its PRM.
        let (candidates, from_challenge) = match &challenge.resource_metadata {
            // Fetched in clear, it could name any authorization server to an attacker's taste.
            Some(url) if !is_secure(url) => {
                return self.fail(AuthStep::Discovery, AuthFailure::CleartextResource);
            }
            Some(url) => (vec![url.clone()], true),
            None => (prm_locations(&self.config.server_url), false),
        };
        self.step = Step::Resource { candidates, at: 0, from_challenge, failed: None };
        self.fetch_current();
    }

    /// A request made with the current token succeeded: the re-authorization count starts
    /// over.
    pub fn handle_authorized(&mut self) {
        self.reauthorizations = 0;
    }

    /// The response to the request `id`. A response to anything but the outstanding
    /// request is ignored.
    pub fn handle_response(&mut self, now: Instant, id: RequestId, response: HttpResponse<'_>) {
        if self.outstanding != Some(id) {
            return;
        }
        self.now = now;
        self.outstanding = None;
        match std::mem::replace(&mut self.step, Step::Idle) {
            Step::Idle | Step::Redirect { .. } => {}
            Step::Resource { candidates, at, from_challenge, failed } => {
                self.on_resource(candidates, at, from_challenge, failed, response)
            }
            Step::Server { issuer, candidates, at, legacy, failed } => {
                self.on_server(issuer, candidates, at, legacy, failed, response)
            }
            Step::Register { method } => self.on_registration(method, response),
            Step::Token { refresh, proof, resend } => {
                self.on_token(now, refresh, proof, resend, response)
            }
            Step::Exchange => self.on_exchange(response),
        }
    }

    /// The request `id` could not be made or its response not read. The flow fails, naming
    /// the step; a transport failure is not a missing document, so discovery does not go on
    /// to the next location.
    pub fn handle_transport_error(&mut self, now: Instant, id: RequestId) {
        self.request_failed(now, id, AuthFailure::Transport);
    }

    /// As [`handle_transport_error`](Self::handle_transport_error), for a request whose
    /// connection failed with `error` (a certificate refused, a name that does not resolve,
    /// refused, timed out): the failure says which ([`AuthFailure::Connection`]).
    pub fn handle_connection_error(
        &mut self,
        now: Instant,
        id: RequestId,
        error: crate::error::TransportError,
    ) {
        self.request_failed(now, id, AuthFailure::Connection(error));
    }

    fn request_failed(&mut self, now: Instant, id: RequestId, reason: AuthFailure) {
        if self.outstanding != Some(id) {
            return;
        }
        self.now = now;
        let step = match self.step {
            Step::Resource { .. } | Step::Server { .. } => AuthStep::Discovery,
            Step::Register { .. } => AuthStep::Registration,
            Step::Token { refresh: true, .. } => AuthStep::Refresh,
            Step::Token { refresh: false, .. } => AuthStep::Token,
            Step::Exchange => AuthStep::Exchange,
            Step::Idle | Step::Redirect { .. } => return,
        };
        self.fail(step, reason);
    }

    /// The URL the authorization server redirected the user to, after [`Action::Authorize`]
    /// (at once, or later: see the [module documentation](super)). `Ok` when the flow took
    /// it; its outcome comes as [`Action::Ready`] or [`Action::Failed`] as usual. A redirect
    /// for an authorization that already ended is refused as [`RedirectError::Duplicate`] or
    /// [`RedirectError::Late`] and changes nothing; one with a `state` never sent fails the
    /// waiting authorization ([`RedirectError::StateMismatch`]).
    pub fn handle_redirect(&mut self, now: Instant, redirect: &str) -> Result<(), RedirectError> {
        let query = redirect.split_once('?').map_or("", |(_, q)| q);
        let query = query.split('#').next().unwrap_or_default();
        let params = parse_query(query);
        let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        if let Some(got) = param("state") {
            if let Some((_, why)) = self.ended.iter().find(|(s, _)| s == got) {
                return Err(*why);
            }
        }
        if !matches!(self.step, Step::Redirect { .. }) {
            return Err(RedirectError::NotWaiting);
        }
        self.now = now;
        let Step::Redirect { state, verifier, .. } = std::mem::replace(&mut self.step, Step::Idle)
        else {
            return Err(RedirectError::NotWaiting);
        };
        if param("state") != Some(state.as_str()) {
            self.remember(state, RedirectError::Late);
            self.fail(AuthStep::Authorization, AuthFailure::StateMismatch);
            return Err(RedirectError::StateMismatch);
        }
        self.remember(state, RedirectError::Duplicate);
        self.redirected(&params, verifier);
        Ok(())
    }

    /// The checks and the token request for a redirect whose `state` matched.
    fn redirected(&mut self, params: &[(String, String)], verifier: Secret) {
        let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        // RFC 9207 2.4: compare `iss`, when present, exactly with the recorded issuer; when
        // the server advertises it, it must be present. Checked before the error too, so a
        // forged error response is not believed either.
        if let Some(server) = self.server.as_ref().filter(|s| s.published) {
            match param("iss") {
                Some(iss) if iss != server.meta.issuer => {
                    let iss = iss.to_owned();
                    return self.fail(AuthStep::Authorization, AuthFailure::IssMismatch { iss });
                }
                None if server.meta.iss_parameter_supported => {
                    return self.fail(AuthStep::Authorization, AuthFailure::IssMissing);
                }
                _ => {}
            }
        }
        if let Some(error) = param("error") {
            self.forget_dead_client(Some(error));
            let mut e = AuthError::new(AuthStep::Authorization, AuthFailure::Denied);
            e.error = Some(error.to_owned());
            return self.finish(Err(e));
        }
        let Some(code) = param("code").filter(|c| !c.is_empty()) else {
            return self.fail(AuthStep::Authorization, AuthFailure::MissingCode);
        };
        let Grant::AuthorizationCode { redirect_uri } = &self.config.grant else { return };
        let mut pairs = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code.to_owned()),
            ("redirect_uri", redirect_uri.clone()),
            ("code_verifier", verifier.expose().to_owned()),
        ];
        if let Some(resource) = &self.resource {
            pairs.push(("resource", resource.clone()));
        }
        self.token_request(pairs, false);
    }

    /// Gives up on the running flow (the user closed the browser, the host is shutting
    /// down): it fails with [`AuthFailure::Declined`] ([`AuthorizeError::Abandoned`]); a late
    /// response is ignored and a late redirect refused ([`RedirectError::Late`]). Does nothing
    /// when no flow runs.
    pub fn abandon(&mut self) {
        if self.is_running() {
            let why = AuthFailure::Declined(AuthorizeError::Abandoned);
            self.fail(AuthStep::Authorization, why);
        }
    }

    /// Hands [`Action::Authorize`] to `authorizer`: its redirect is taken at once, or, when
    /// it answers [`Authorization::Pending`], the flow waits for
    /// [`handle_redirect`](Self::handle_redirect).
    pub fn authorize_with(&mut self, now: Instant, url: &str, authorizer: &mut dyn Authorizer) {
        match authorizer.begin(url) {
            Authorization::Redirect(redirect) => {
                if let Err(e) = self.handle_redirect(now, &redirect) {
                    log::debug!("the authorizer's redirect was refused: {e}");
                }
            }
            Authorization::Pending => log::debug!("oauth: waiting for the redirect"),
            Authorization::Refused(why) => {
                if matches!(self.step, Step::Redirect { .. }) {
                    self.fail(AuthStep::Authorization, AuthFailure::Declined(why));
                }
            }
        }
    }

    /// The next thing to do.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When the flow has something to do: give up on a redirect that did not come, or
    /// refresh the access token `refresh_margin` before it expires (when there is a refresh
    /// token and a known token endpoint).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if let Step::Redirect { deadline, .. } = self.step {
            return Some(deadline);
        }
        if self.is_running() || self.server.is_none() {
            return None;
        }
        let tokens = self.tokens.as_ref()?;
        tokens.refresh_token.as_ref()?;
        let at = tokens.expires_at?.saturating_sub(self.margin());
        // A stored expiry is not checked on load, and the epoch is the host's: no addition
        // here may overflow. A time past the range of `Instant` is no timer at all.
        let wait = at.saturating_sub(self.epoch.1).min(MAX_EXPIRES_IN);
        let due = self.epoch.0.checked_add(Duration::from_secs(wait))?;
        Some(self.refresh_not_before.map_or(due, |not_before| due.max(not_before)))
    }

    /// Fails an authorization whose redirect did not come in time, or refreshes the token if
    /// its time has come; early or spurious calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Step::Redirect { deadline, .. } = self.step {
            if deadline <= now {
                self.now = now;
                log::debug!("oauth: no redirect within the authorization timeout");
                self.fail(AuthStep::Authorization, AuthFailure::Expired);
            }
            return;
        }
        if self.poll_timeout().is_some_and(|at| at <= now) {
            self.now = now;
            // However it ends, the next refresh waits (reset by one that brings a token with
            // time left): a token endpoint that keeps failing is not asked in a tight loop.
            self.refresh_wait = (self.refresh_wait * 2).clamp(FIRST_REFRESH_WAIT, MAX_REFRESH_WAIT);
            self.refresh_not_before = Some(crate::time::later(now, self.refresh_wait));
            self.background_refresh = true;
            // No challenge started this flow: should the refresh token be dead and the user
            // be asked again, it is for what was asked last (after a step-up, the union), or
            // after a restart, which asked nothing yet, what the token was granted; not for
            // the scope of whichever challenge came last (the step-up's alone, which lost the
            // base scopes and had the user asked a second time at the next 403).
            let granted = self.tokens.as_ref().and_then(|t| t.scope.clone());
            self.challenge_scope = self.requested_scope.clone().or(granted);
            self.refresh();
        }
    }

    // ---- discovery ----

    fn on_resource(
        &mut self,
        candidates: Vec<String>,
        at: usize,
        from_challenge: bool,
        failed: Option<u16>,
        response: HttpResponse<'_>,
    ) {
        if response.status != 200 {
            let failed = failed.or(failure_status(response.status));
            if at + 1 < candidates.len() {
                self.step = Step::Resource { candidates, at: at + 1, from_challenge, failed };
                return self.fetch_current();
            }
            // Only a PRM that is not there (404, 410), at every location, makes a 2025-03-26
            // server: a server error, a rate limit or a refusal at any of them is a failure
            // to report, not a reason to guess at the origin as authorization server.
            if from_challenge || failure_status(response.status).is_some() {
                return self.fail_response(AuthStep::Discovery, response);
            }
            if let Some(status) = failed {
                return self.fail_status(AuthStep::Discovery, AuthFailure::Status, status);
            }
            // No PRM anywhere: a 2025-03-26 server, whose authorization server is its origin.
            let Some(issuer) = parts(&self.config.server_url).map(|p| origin(&p)) else {
                return self.fail(AuthStep::Discovery, AuthFailure::InvalidServerUrl);
            };
            if self.issuer.as_deref().is_some_and(|known| known != issuer) {
                // The tokens held came from the authorization server a PRM named. A PRM
                // that is gone now (a deployment's passing 404) is no evidence that the
                // server went back to 2025-03-26; the guess would drop every credential as
                // an issuer change. Reported instead, with what the user holds kept.
                return self.fail_response(AuthStep::Discovery, response);
            }
            self.resource = None;
            self.prm_scopes = None;
            return self.discover_server(issuer, true);
        }
        let prm = match parse_resource_metadata(response.body) {
            Ok(prm) => prm,
            Err(e) => return self.fail(AuthStep::Discovery, AuthFailure::Malformed(e)),
        };
        if !resource_covers(&prm.resource, &self.config.server_url) {
            let resource = prm.resource;
            return self.fail(AuthStep::Discovery, AuthFailure::ResourceMismatch { resource });
        }
        self.resource = Some(prm.resource);
        self.prm_scopes = prm.scopes_supported;
        // The parser refuses an empty list; a missing first entry still fails, never panics.
        let Some(issuer) = prm.authorization_servers.into_iter().next() else {
            let missing = ParseError::Missing("authorization_servers");
            return self.fail(AuthStep::Discovery, AuthFailure::Malformed(missing));
        };
        self.discover_server(issuer, false);
    }

    fn discover_server(&mut self, issuer: String, legacy: bool) {
        if !is_secure(&issuer) {
            // Its metadata would come in clear text, and name where the secrets go. Refused
            // before anything of the current server's is dropped: a resource that names such
            // an issuer does not cost the user the tokens it holds.
            return self.fail(AuthStep::Discovery, AuthFailure::NotHttps("issuer"));
        }
        // Another authorization server's is dropped once its metadata passed the checks
        // (`adopt_issuer`): a resource naming one that cannot be used costs nothing.
        let candidates = as_metadata_locations(&issuer);
        if candidates.is_empty() {
            return self.fail(AuthStep::Discovery, AuthFailure::NoMetadata);
        }
        self.step = Step::Server { issuer, candidates, at: 0, legacy, failed: None };
        self.fetch_current();
    }

    fn on_server(
        &mut self,
        issuer: String,
        candidates: Vec<String>,
        at: usize,
        legacy: bool,
        failed: Option<u16>,
        response: HttpResponse<'_>,
    ) {
        if response.status != 200 {
            let failed = failed.or(failure_status(response.status));
            if at + 1 < candidates.len() {
                self.step = Step::Server { issuer, candidates, at: at + 1, legacy, failed };
                return self.fetch_current();
            }
            if !legacy {
                let status = failed.unwrap_or(response.status);
                return self.fail_status(AuthStep::Discovery, AuthFailure::NoMetadata, status);
            }
            // As for the PRM: only metadata absent everywhere means the default endpoints.
            if let Some(status) = failed {
                return self.fail_status(AuthStep::Discovery, AuthFailure::Status, status);
            }
            // 2025-03-26: no metadata at all means the default endpoints at the origin.
            let meta = ServerMetadata {
                authorization_endpoint: Some(format!("{issuer}/authorize")),
                token_endpoint: format!("{issuer}/token"),
                registration_endpoint: Some(format!("{issuer}/register")),
                issuer,
                ..ServerMetadata::default()
            };
            self.adopt_issuer(&meta.issuer);
            self.server = Some(Server { meta, published: false });
            return self.after_discovery();
        }
        let meta = match parse_server_metadata(response.body) {
            Ok(meta) => meta,
            Err(e) => return self.fail(AuthStep::Discovery, AuthFailure::Malformed(e)),
        };
        // RFC 8414 3.3: identical to the issuer the well-known URL was built from.
        if meta.issuer != issuer {
            let issuer = meta.issuer;
            return self.fail(AuthStep::Discovery, AuthFailure::IssuerMismatch { issuer });
        }
        let endpoints = [
            ("token_endpoint", Some(&meta.token_endpoint)),
            ("authorization_endpoint", meta.authorization_endpoint.as_ref()),
            ("registration_endpoint", meta.registration_endpoint.as_ref()),
        ];
        for (name, url) in endpoints {
            if url.is_some_and(|u| !is_secure(u)) {
                return self.fail(AuthStep::Discovery, AuthFailure::NotHttps(name));
            }
        }
        self.adopt_issuer(&meta.issuer);
        self.server = Some(Server { meta, published: true });
        self.after_discovery();
    }

    /// The authorization server `issuer` passed discovery. When it is another than the one
    /// the flow held, what the old one issued is bound to it and is never shown to the new
    /// one (SEP-2352): its client and tokens go, here and in the store. The store keeps the
    /// issuer the host's credentials, named with no issuer, were first used at (`save` leaves
    /// that binding as it is), however many moves later: after a restart they are still not
    /// the new server's.
    fn adopt_issuer(&mut self, issuer: &str) {
        if self.issuer.as_deref().is_none_or(|old| old == issuer) {
            self.issuer = Some(issuer.to_owned());
            return;
        }
        log::debug!("oauth: the resource moved to another authorization server");
        self.client = None;
        self.tokens = None;
        self.server = None;
        self.as_nonce.clear();
        // Whatever server the flow moves from: a second move must not forget the first.
        match self.implicit_binding() {
            Some(bound) => {
                let kept = StoredAuth { issuer: bound.to_owned(), client: None, tokens: None };
                self.config.store.save(&self.config.server_url, &kept);
            }
            None => self.config.store.clear(&self.config.server_url),
        }
        self.issuer = Some(issuer.to_owned());
    }

    /// The issuer the host's credentials are bound to when the host named none for them: the
    /// first they were used at (or the store's at start).
    fn implicit_binding(&self) -> Option<&str> {
        let pre = self.config.pre_registered.as_ref()?;
        if pre.issuer.is_some() {
            return None;
        }
        self.pre_registered_at.as_deref()
    }

    // ---- client identity ----

    fn after_discovery(&mut self) {
        let Some(server) = self.server.clone() else { return };
        if self.machine_grant() {
            return;
        }
        if self.client.is_none() {
            if let Some(client) = self.pre_registered(&server.meta) {
                self.pre_registered_at = Some(server.meta.issuer.clone());
                self.client = Some(client);
            } else if let Some(url) = self
                .config
                .client_metadata_url
                .clone()
                .filter(|_| server.meta.client_id_metadata_document_supported)
            {
                self.client = Some(ClientRegistration {
                    client_id: url,
                    client_secret: None,
                    token_endpoint_auth_method: NONE.into(),
                });
            } else if let Some(endpoint) = server.meta.registration_endpoint.clone() {
                return self.register(&server.meta, endpoint);
            } else {
                return self.fail(AuthStep::Registration, AuthFailure::NoClientIdentity);
            }
        }
        // A 401 with a refresh token in hand: try it before asking the user again.
        let refreshable = self.tokens.as_ref().is_some_and(|t| t.refresh_token.is_some());
        if refreshable && !self.step_up {
            return self.refresh();
        }
        self.authorize(&server);
    }

    /// The host's credentials, unless they belong to another issuer.
    fn pre_registered(&self, meta: &ServerMetadata) -> Option<ClientRegistration> {
        let pre = self.config.pre_registered.as_ref()?;
        let bound = pre.issuer.as_deref().or(self.pre_registered_at.as_deref());
        if bound.is_some_and(|i| i != meta.issuer) {
            return None;
        }
        let supported = meta.token_endpoint_auth_methods_supported.as_deref();
        let offers = |m: &str| supported.is_none_or(|list| list.iter().any(|s| s == m));
        let method = if pre.signing_key.is_some() && offers(PRIVATE_KEY_JWT) {
            PRIVATE_KEY_JWT
        } else if pre.client_secret.is_some() {
            // RFC 8414 2: an absent list means client_secret_basic.
            if offers(BASIC) || !offers(POST) {
                BASIC
            } else {
                POST
            }
        } else {
            NONE
        };
        Some(ClientRegistration {
            client_id: pre.client_id.clone(),
            client_secret: pre.client_secret.clone(),
            token_endpoint_auth_method: method.into(),
        })
    }

    fn register(&mut self, meta: &ServerMetadata, endpoint: String) {
        let Grant::AuthorizationCode { redirect_uri } = &self.config.grant else { return };
        // A native client prefers no secret; otherwise what the server lists, and
        // client_secret_basic when it lists nothing (RFC 8414 2).
        let supported = meta.token_endpoint_auth_methods_supported.as_deref();
        let method = match supported {
            Some(list) if list.iter().any(|m| m == NONE) => NONE,
            Some(list) if !list.iter().any(|m| m == BASIC) && list.iter().any(|m| m == POST) => {
                POST
            }
            _ => BASIC,
        };
        let mut grant_types = vec!["authorization_code"];
        if self.refresh_supported(meta) {
            grant_types.push("refresh_token");
        }
        // SEP-837: application_type says a native client's loopback redirect is expected.
        let body = json!({
            "client_name": self.config.client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": grant_types,
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": "native",
        });
        self.step = Step::Register { method: method.into() };
        self.send(
            HttpMethod::Post,
            endpoint,
            vec![("Content-Type", JSON.into()), ("Accept", JSON.into())],
            body.to_string().into_bytes(),
        );
    }

    fn on_registration(&mut self, method: String, response: HttpResponse<'_>) {
        if !(200..300).contains(&response.status) {
            return self.fail_response(AuthStep::Registration, response);
        }
        let reg = match parse_registration(response.body) {
            Ok(reg) => reg,
            Err(e) => return self.fail(AuthStep::Registration, AuthFailure::Malformed(e)),
        };
        let mut method = reg.token_endpoint_auth_method.unwrap_or(method);
        // RFC 7591 3.2.1: the server may register other values than those asked for, and
        // the client uses what it registered. One this client cannot perform would fail at
        // the token endpoint only after the user authorized, and that refusal would drop the
        // registration for the next flow to register (and send the user) again.
        if ![NONE, BASIC, POST].contains(&method.as_str()) {
            let method = method.chars().take(64).collect();
            return self
                .fail(AuthStep::Registration, AuthFailure::UnsupportedAuthMethod { method });
        }
        if reg.client_secret.is_none() && method != NONE {
            method = NONE.into();
        }
        self.client = Some(ClientRegistration {
            client_id: reg.client_id,
            client_secret: reg.client_secret,
            token_endpoint_auth_method: method,
        });
        self.save();
        match self.server.clone() {
            Some(server) => self.authorize(&server),
            None => self.fail(AuthStep::Registration, AuthFailure::NoMetadata),
        }
    }

    // ---- grants ----

    fn authorize(&mut self, server: &Server) {
        if server.published
            && !server
                .meta
                .code_challenge_methods_supported
                .as_ref()
                .is_some_and(|m| m.iter().any(|m| m == "S256"))
        {
            return self.fail(AuthStep::Authorization, AuthFailure::PkceUnsupported);
        }
        let Some(endpoint) = server.meta.authorization_endpoint.clone() else {
            return self.fail(
                AuthStep::Authorization,
                AuthFailure::MissingEndpoint("authorization_endpoint"),
            );
        };
        let (Some(client), Grant::AuthorizationCode { redirect_uri }) =
            (self.client.as_ref(), &self.config.grant)
        else {
            return self.fail(AuthStep::Registration, AuthFailure::NoClientIdentity);
        };
        let (Some(verifier), Some(state)) = (random_token(32), random_token(16)) else {
            return self.fail(AuthStep::Authorization, AuthFailure::Crypto);
        };
        let scope = self.select_scope(&server.meta, true);
        let challenge = s256(&verifier);
        let mut pairs = vec![
            ("response_type", "code"),
            ("client_id", client.client_id.as_str()),
            ("redirect_uri", redirect_uri.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("state", state.as_str()),
        ];
        if let Some(scope) = &scope {
            pairs.push(("scope", scope));
        }
        if let Some(resource) = &self.resource {
            pairs.push(("resource", resource));
        }
        let url = with_query(&endpoint, &form(&pairs));
        self.requested_scope = scope;
        let deadline = crate::time::later(self.now, self.config.authorization_timeout);
        self.step = Step::Redirect { state, verifier: Secret::new(verifier), deadline };
        self.actions.push_back(Action::Authorize(url));
    }

    /// MCP scope selection: the challenge's `scope`, else every PRM `scopes_supported`, else
    /// none. A step-up asks for the union with what was asked before (SEP-2350).
    /// With `offline`, `offline_access` is added where the authorization server lists it
    /// (SEP-2207).
    fn select_scope(&self, meta: &ServerMetadata, offline: bool) -> Option<String> {
        // Each scope once, in the order first seen. A set, not a look back along the list:
        // a metadata document of 256 KiB can list tens of thousands of scopes, and the
        // quadratic look cost seconds of the poll thread on every flow.
        let mut seen = std::collections::HashSet::new();
        let mut add = |scopes: &mut Vec<String>, list: &str| {
            for s in list.split_ascii_whitespace() {
                if seen.insert(s.to_owned()) {
                    scopes.push(s.to_owned());
                }
            }
        };
        let mut scopes: Vec<String> = Vec::new();
        if self.step_up {
            if let Some(previous) = &self.requested_scope {
                add(&mut scopes, previous);
            }
            if let Some(granted) = self.tokens.as_ref().and_then(|t| t.scope.as_deref()) {
                add(&mut scopes, granted);
            }
        }
        match (&self.challenge_scope, &self.prm_scopes) {
            (Some(challenge), _) => add(&mut scopes, challenge),
            (None, Some(supported)) => add(&mut scopes, &supported.join(" ")),
            (None, None) => {}
        }
        if offline && !scopes.is_empty() && self.offline_access_supported(meta) {
            add(&mut scopes, "offline_access");
        }
        (!scopes.is_empty()).then(|| scopes.join(" "))
    }

    fn offline_access_supported(&self, meta: &ServerMetadata) -> bool {
        meta.scopes_supported.as_ref().is_some_and(|s| s.iter().any(|s| s == "offline_access"))
    }

    /// RFC 8414 2: without `grant_types_supported` the server does only
    /// authorization_code and implicit.
    fn refresh_supported(&self, meta: &ServerMetadata) -> bool {
        meta.grant_types_supported.as_ref().is_some_and(|g| g.iter().any(|g| g == "refresh_token"))
    }

    /// Whether a step-up challenge asks for anything not already asked for or granted. One
    /// that names no scope (or a blank one) would ask for the scopes the server's PRM lists
    /// besides those: only new ones make it worth asking the user (taken as new every time,
    /// a server answering such 403s to every token had the user asked over and over).
    fn adds_scope(&self, challenged: Option<&str>) -> bool {
        let supported;
        let challenged = match challenged.filter(|s| !s.trim().is_empty()) {
            Some(named) => named,
            None => match &self.prm_scopes {
                Some(scopes) => {
                    supported = scopes.join(" ");
                    &supported
                }
                None => return false,
            },
        };
        let have = |s: &str| {
            let in_list = |list: Option<&str>| {
                list.is_some_and(|l| l.split_ascii_whitespace().any(|x| x == s))
            };
            in_list(self.requested_scope.as_deref())
                || in_list(self.tokens.as_ref().and_then(|t| t.scope.as_deref()))
        };
        challenged.split_ascii_whitespace().any(|s| !have(s))
    }

    fn client_credentials(&mut self) {
        let Some(server) = self.server.clone() else { return };
        let Some(client) = self.pre_registered(&server.meta) else {
            return self.fail(AuthStep::Registration, AuthFailure::NoClientIdentity);
        };
        self.pre_registered_at = Some(server.meta.issuer.clone());
        if client.token_endpoint_auth_method == NONE {
            return self.fail(AuthStep::Token, AuthFailure::MissingCredentials);
        }
        self.client = Some(client);
        // No offline_access: this grant has no user to come back for, and RFC 6749 4.4.3
        // says it should not issue a refresh token.
        self.machine_token_request(vec![("grant_type", "client_credentials".to_owned())]);
    }

    fn refresh(&mut self) {
        let Some(refresh_token) =
            self.tokens.as_ref().and_then(|t| t.refresh_token.as_ref()).map(|t| t.0.clone())
        else {
            return;
        };
        let mut pairs =
            vec![("grant_type", "refresh_token".to_owned()), ("refresh_token", refresh_token)];
        if let Some(resource) = &self.resource {
            pairs.push(("resource", resource.clone()));
        }
        self.token_request(pairs, true);
    }

    /// A token endpoint request with the client's authentication (RFC 6749 2.3, RFC 7523),
    /// and a DPoP proof when DPoP is in use.
    fn token_request(&mut self, pairs: Vec<(&'static str, String)>, refresh: bool) {
        self.token_request_with(pairs, refresh, false);
    }

    /// [`token_request`](Self::token_request); `nonce_retry`: this is the one resend after
    /// the server's `use_dpop_nonce`.
    fn token_request_with(
        &mut self,
        mut pairs: Vec<(&'static str, String)>,
        refresh: bool,
        nonce_retry: bool,
    ) {
        let step = if refresh { AuthStep::Refresh } else { AuthStep::Token };
        let proof = match self.server.as_ref().map(|s| self.dpop_wanted(&s.meta)) {
            Some(Ok(proof)) => proof,
            Some(Err(why)) => return self.fail(step, why),
            None => false,
        };
        // Kept for the nonce retry (before client authentication is added: a client
        // assertion is made afresh).
        let resend = (proof && !nonce_retry).then(|| Resend(pairs.clone()));
        let (Some(server), Some(client)) = (self.server.as_ref(), self.client.as_ref()) else {
            return self.fail(step, AuthFailure::NoClientIdentity);
        };
        let endpoint = server.meta.token_endpoint.clone();
        let mut headers = vec![("Content-Type", FORM.into()), ("Accept", JSON.into())];
        match client.token_endpoint_auth_method.as_str() {
            BASIC => {
                // RFC 6749 2.3.1: both parts form-encoded before base64.
                let mut userpass = String::new();
                percent_encode(&client.client_id, &mut userpass);
                userpass.push(':');
                percent_encode(
                    client.client_secret.as_ref().map_or("", |s| s.expose()),
                    &mut userpass,
                );
                headers.push(("Authorization", format!("Basic {}", base64(userpass.as_bytes()))));
            }
            POST => {
                pairs.push(("client_id", client.client_id.clone()));
                let secret = client.client_secret.as_ref().map_or("", |s| s.expose());
                pairs.push(("client_secret", secret.to_owned()));
            }
            PRIVATE_KEY_JWT => {
                let Some(key) =
                    self.config.pre_registered.as_ref().and_then(|p| p.signing_key.as_ref())
                else {
                    return self.fail(step, AuthFailure::MissingCredentials);
                };
                let iat = self.unix(self.now);
                let (Some(jti), aud) = (random_token(16), server.meta.issuer.clone()) else {
                    return self.fail(step, AuthFailure::Crypto);
                };
                // RFC 7523 3: the issuer identifies the authorization server as audience.
                let claims = json!({
                    "iss": client.client_id, "sub": client.client_id, "aud": aud,
                    "iat": iat, "exp": iat + 300, "jti": jti,
                });
                let Some(assertion) = key.sign_jwt(&claims) else {
                    return self.fail(step, AuthFailure::Crypto);
                };
                pairs.push(("client_id", client.client_id.clone()));
                pairs.push(("client_assertion_type", JWT_BEARER.to_owned()));
                pairs.push(("client_assertion", assertion));
            }
            _ => pairs.push(("client_id", client.client_id.clone())),
        }
        if proof {
            let iat = self.unix(self.now);
            let nonce = self.as_nonce.get();
            let built = self
                .dpop
                .as_mut()
                .and_then(|d| d.token_proof(&request_htu(&endpoint)?, iat, nonce));
            match built.map(|p| String::from_utf8_lossy(p).into_owned()) {
                Some(p) => headers.push(("DPoP", p)),
                None => return self.fail(step, AuthFailure::Crypto),
            }
        }
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let body = form(&borrowed).into_bytes();
        self.step = Step::Token { refresh, proof, resend };
        self.send(HttpMethod::Post, endpoint, headers, body);
    }

    /// Whether a token request to this server carries a DPoP proof (see [`DpopMode`]).
    fn dpop_wanted(&self, meta: &ServerMetadata) -> Result<bool, AuthFailure> {
        let Some(d) = &self.dpop else { return Ok(false) };
        let es256 = meta
            .dpop_signing_alg_values_supported
            .as_ref()
            .map(|algs| algs.iter().any(|a| a == "ES256"));
        match (d.mode, es256) {
            (DpopMode::IfSupported, Some(true)) | (DpopMode::Required, None | Some(true)) => {
                Ok(true)
            }
            (DpopMode::Required, Some(false)) => Err(AuthFailure::DpopAlgorithm),
            _ => Ok(false),
        }
    }

    fn on_token(
        &mut self,
        now: Instant,
        refresh: bool,
        proof: bool,
        resend: Option<Resend>,
        response: HttpResponse<'_>,
    ) {
        let step = if refresh { AuthStep::Refresh } else { AuthStep::Token };
        let nonce = match (&self.dpop, response.dpop_nonce) {
            (Some(_), Some(value)) => self.as_nonce.update(value),
            _ => false,
        };
        if let (Some(resend), true, 400) = (resend, nonce, response.status) {
            // RFC 9449 8: the server wants its nonce in the proof; once.
            if parse_error_body(response.body).error.as_deref() == Some("use_dpop_nonce") {
                log::debug!("oauth: the token endpoint asks for a DPoP nonce; sending again");
                return self.token_request_with(resend.0, refresh, true);
            }
        }
        if response.status != 200 {
            let error = parse_error_body(response.body).error;
            // Only these say the refresh token (or the client) is dead (RFC 6749 5.2); any
            // other 400 (a malformed request, a scope or DPoP proof refused, a nonce asked
            // for twice) leaves a refresh token that may well work next time.
            let dead = matches!(
                error.as_deref(),
                Some("invalid_grant" | "invalid_client" | "unauthorized_client")
            );
            // The spec's status is 400 (401 for a client that authenticated); servers also
            // answer a dead refresh token 401 or 403 (Auth0: 403 invalid_grant). Taken only at
            // 400, such a refusal kept the dead token for good (in the store too) and failed
            // every 401 with it, and the user was never asked again.
            let refused = matches!(response.status, 400 | 401 | 403);
            if refresh && refused && dead {
                // A registered client the server no longer knows answers 400 invalid_client
                // too (RFC 6749 5.2, a public client): it goes, or the authorization below
                // would go out under it, and the server cannot even redirect back to it.
                self.forget_dead_client(error.as_deref());
                // An expired or revoked refresh token (invalid_grant): start over with the
                // user rather than fail.
                if let Some(tokens) = self.tokens.as_mut() {
                    tokens.refresh_token = None;
                }
                // Kept, the dead refresh token would be tried again after a restart.
                self.save();
                if self.background_refresh && self.bearer(self.now).is_some() {
                    // Ahead of the expiry, with a token that still works: it serves to its
                    // end, and the 401 after that asks the user. Asking now would hold every
                    // request behind a browser prompt nobody was waiting for.
                    return self.finish(Ok(()));
                }
                if self.server.is_some() {
                    // The user is asked again, under a client registered anew if the old one
                    // was forgotten above.
                    return self.after_discovery();
                }
            }
            if refresh && response.status == 400 && !self.background_refresh {
                // A 401 started this refresh: the server refused the token in hand, and the
                // refresh was refused for a reason that may pass. The refresh token stays for
                // later, and the user is asked now (failed, the same refusal came at every
                // 401 and nobody was ever asked).
                if let Some(server) = self.server.clone() {
                    if !self.machine_grant() {
                        self.authorize(&server);
                    }
                    return;
                }
            }
            if !refresh && self.retry_assertion_grant(&response) {
                return;
            }
            self.forget_dead_client(error.as_deref());
            return self.fail_response(step, response);
        }
        let granted = match parse_token_response(response.body) {
            Ok(t) => t,
            Err(e) => return self.refuse_token(step, response.body, AuthFailure::Malformed(e)),
        };
        let dpop_jkt = match (granted.dpop, proof, self.dpop.as_ref()) {
            (true, true, Some(d)) => Some(d.thumbprint().to_owned()),
            (true, _, _) => {
                return self.refuse_token(step, response.body, AuthFailure::DpopUnexpected)
            }
            (false, _, Some(d)) if d.mode == DpopMode::Required => {
                return self.refuse_token(step, response.body, AuthFailure::DpopUnbound);
            }
            (false, _, _) => None,
        };
        if let Some(d) = self.dpop.as_mut() {
            d.set_token(Some(granted.access_token.expose()));
        }
        let previous_refresh = self.tokens.as_ref().and_then(|t| t.refresh_token.clone());
        // An omitted scope is the one asked for, or for a refresh the one granted before
        // (RFC 6749 3.3, 6): after a restart nothing was asked in this process.
        let previous_scope = self.tokens.as_ref().and_then(|t| t.scope.clone());
        let omitted_scope = match refresh {
            true => previous_scope.or_else(|| self.requested_scope.clone()),
            false => self.requested_scope.clone(),
        };
        self.tokens = Some(Tokens {
            access_token: granted.access_token,
            // A refresh response may omit the refresh token: the old one stays valid
            // (RFC 6749 6).
            refresh_token: granted.refresh_token.or(if refresh { previous_refresh } else { None }),
            expires_at: granted.expires_in.map(|s| self.unix(now).saturating_add(s)),
            scope: granted.scope.or(omitted_scope),
            dpop_jkt,
        });
        let configured = self.config.refresh_margin.as_secs();
        self.token_margin = granted.expires_in.map(|lifetime| configured.min(lifetime / 2));
        let margin = self.margin();
        let expires = self.tokens.as_ref().and_then(|t| t.expires_at);
        if expires.is_none_or(|at| at.saturating_sub(margin) > self.unix(now)) {
            // A token with time left before its refresh: the waits start over.
            self.refresh_wait = Duration::ZERO;
            self.refresh_not_before = None;
        }
        self.save();
        self.finish(Ok(()));
    }

    /// A token answer (200) this client refuses (unreadable, or bound the wrong way). For a
    /// refresh, a server that rotates refresh tokens spent the old one all the same: a new one
    /// the answer carries is kept, here and in the store. Sent again, the spent one got the
    /// whole grant revoked by the server's reuse detection, and the user asked to log in.
    fn refuse_token(&mut self, step: AuthStep, body: &[u8], failure: AuthFailure) {
        if step == AuthStep::Refresh {
            if let (Some(rotated), Some(tokens)) =
                (rotated_refresh_token(body), self.tokens.as_mut())
            {
                tokens.refresh_token = Some(rotated);
                self.save();
            }
        }
        self.fail(step, failure)
    }

    // ---- plumbing ----

    /// How long before its expiry the current token is refreshed (see `token_margin`).
    fn margin(&self) -> u64 {
        self.token_margin.unwrap_or(self.config.refresh_margin.as_secs())
    }

    fn fetch_current(&mut self) {
        let url = match &self.step {
            Step::Resource { candidates, at, .. } | Step::Server { candidates, at, .. } => {
                candidates.get(*at).cloned()
            }
            _ => None,
        };
        if let Some(url) = url {
            self.send(HttpMethod::Get, url, vec![("Accept", JSON.into())], Vec::new());
        }
    }

    fn send(
        &mut self,
        method: HttpMethod,
        url: String,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
    ) {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        self.outstanding = Some(id);
        self.actions.push_back(Action::Send(HttpRequest { id, method, url, headers, body }));
    }

    /// The authorization server no longer knows a client it registered for us
    /// (`invalid_client`, `unauthorized_client`: deleted, expired, or registered for another
    /// redirect URI): the registration is dropped, here and in the store, so the next flow
    /// registers anew instead of failing the same way every time. The host's own credentials
    /// and a client ID metadata document are kept: they are not the server's to forget.
    fn forget_dead_client(&mut self, error: Option<&str>) {
        if !matches!(error, Some("invalid_client" | "unauthorized_client")) {
            return;
        }
        let Some(client) = self.client.as_ref() else { return };
        let host_owned =
            self.config.pre_registered.as_ref().is_some_and(|p| p.client_id == client.client_id)
                || self.config.client_metadata_url.as_deref() == Some(client.client_id.as_str());
        if host_owned {
            return;
        }
        log::debug!("oauth: the authorization server refused its registered client; forgetting it");
        self.client = None;
        self.save();
    }

    fn save(&mut self) {
        let Some(issuer) = self.issuer.clone() else { return };
        if self.implicit_binding().is_some_and(|bound| bound != issuer) {
            // The store names the server the host's credentials are bound to: another's
            // tokens and registration stay in memory only, or after a restart the host's
            // secret would be taken for the new server's (name its issuer in
            // `PreRegistered::issuer` to keep them).
            log::debug!("oauth: not storing another server's tokens over the host's binding");
            return;
        }
        // Pre-registered credentials stay with the host; only registrations are stored.
        let dynamic = self.client.clone().filter(|c| {
            self.config.pre_registered.as_ref().is_none_or(|p| p.client_id != c.client_id)
        });
        let auth = StoredAuth { issuer, client: dynamic, tokens: self.tokens.clone() };
        self.config.store.save(&self.config.server_url, &auth);
    }

    fn fail(&mut self, step: AuthStep, reason: AuthFailure) {
        self.finish(Err(AuthError::new(step, reason)));
    }

    fn fail_status(&mut self, step: AuthStep, reason: AuthFailure, status: u16) {
        let mut e = AuthError::new(step, reason);
        e.status = Some(status);
        self.finish(Err(e));
    }

    fn fail_response(&mut self, step: AuthStep, response: HttpResponse<'_>) {
        let body = parse_error_body(response.body);
        let mut e = AuthError::new(step, AuthFailure::Status);
        e.status = Some(response.status);
        e.error = body.error;
        self.finish(Err(e));
    }

    fn remember(&mut self, state: String, why: RedirectError) {
        if self.ended.len() == ENDED_KEPT {
            self.ended.pop_front();
        }
        self.ended.push_back((state, why));
    }

    fn finish(&mut self, outcome: Result<(), AuthError>) {
        // An authorization that ends waiting (expired, declined, abandoned): its redirect,
        // should it still come, is late.
        if let Step::Redirect { state, .. } = std::mem::replace(&mut self.step, Step::Idle) {
            self.remember(state, RedirectError::Late);
        }
        self.outstanding = None;
        self.step_up = false;
        let by_challenge = !std::mem::take(&mut self.background_refresh);
        self.assertion.finish();
        if outcome.is_err() && by_challenge {
            // A flow that got no token (declined, timed out, its server down) is no
            // re-authorization the server went on refusing: counted, three of them locked the
            // server out for good, a host's restart included.
            self.reauthorizations = self.reauthorizations.saturating_sub(1);
        }
        if outcome.is_err() {
            // What a failed (declined, abandoned, refused) flow asked for was not granted:
            // the scope held is the token's. Kept, it made a later step-up for the same
            // scope look like a loop and fail at once, for good.
            self.requested_scope = self.tokens.as_ref().and_then(|t| t.scope.clone());
        }
        self.actions.push_back(match outcome {
            Ok(()) => Action::Ready,
            Err(e) => Action::Failed(e),
        });
    }

    /// The wall clock reads `unix_now` (seconds since the Unix epoch) at `now`: what the flow
    /// dates claims and expiries from from now on. The flow otherwise derives wall time from
    /// the reading it was made with and the monotonic clock, which a device's clock set late
    /// (booted at 1970, synced by NTP later) or a suspend (the monotonic clock stops) leaves
    /// behind: DPoP proofs and client assertions dated 1970 were refused by every server. A
    /// token's expiry dated from the old reading may look past now; it is refreshed.
    pub fn handle_wall_clock(&mut self, now: Instant, unix_now: u64) {
        self.epoch = (now, unix_now);
    }

    fn unix(&self, now: Instant) -> u64 {
        self.epoch.1.saturating_add(now.saturating_duration_since(self.epoch.0).as_secs())
    }
}

/// The `htu` of a DPoP proof for a request to `url` (RFC 9449 4.2: its target URI without
/// query or fragment) as the driver sends the request, by the driver's own parse (scheme
/// and host in lower case, no default port): a server that compares `htu` with the request
/// exactly refused a proof that kept the endpoint's spelling (`https://AS.test:443/token`).
fn request_htu(url: &str) -> Option<String> {
    crate::driver::url::HttpUrl::parse(url).ok().map(|u| u.htu())
}

/// A metadata location's non-200 status when it is a failure there, `None` when it says the
/// document is not there (404, 410): only an absence everywhere makes a fallback.
fn failure_status(status: u16) -> Option<u16> {
    (!matches!(status, 404 | 410)).then_some(status)
}
