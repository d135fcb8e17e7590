//! The OAuth flow wired into the HTTP session: which refusals start it, what waits for it,
//! and what its outcome does to the waiting exchanges. The flow's own HTTP requests are
//! handed to the driver ([`HttpSession::poll_oauth_request`]) and answered back; the session
//! makes no request and reads no clock.

use std::time::Instant;

use super::{Carries, HttpSession, OAuthAnswer, Resend, Stage};
use crate::auth::oauth::{Action, Authorizer, HttpRequest, OAuthFlow, RedirectError, RequestId};
use crate::engine::{Engine, ExchangeFailure};
use crate::proto::challenge::AuthChallenge;

/// The flow and what the session keeps for it.
#[derive(Debug)]
pub(crate) struct OAuthState {
    flow: OAuthFlow,
    authorizer: Option<Box<dyn Authorizer>>,
    /// Exchanges refused for want of a (better) token, in the order they were refused;
    /// resent when the flow is ready, failed when it fails.
    parked: Vec<usize>,
    /// The request the driver must make next (the flow has one outstanding at a time).
    outbound: Option<HttpRequest>,
    /// Counts the tokens obtained; an exchange remembers the one it was sent with, so a
    /// refusal of an older token resends with the new one instead of starting a new flow.
    pub(super) generation: u64,
}

impl OAuthState {
    pub(crate) fn new(flow: OAuthFlow, authorizer: Option<Box<dyn Authorizer>>) -> Self {
        Self { flow, authorizer, parked: Vec::new(), outbound: None, generation: 0 }
    }

    /// Takes a parked exchange off the list (it was cancelled).
    pub(super) fn unpark(&mut self, i: usize) {
        self.parked.retain(|&p| p != i);
    }

    pub(super) fn granted_scope(&self) -> Option<&str> {
        self.flow.granted_scope()
    }

    /// Requests wait while a flow runs: they would only be refused. Not during a step-up:
    /// the token in hand serves what needs no more scope (held, every request to the server
    /// waited for the user's consent, up to the authorization timeout of 300 s), and one that
    /// needs more is refused, parked, and sent again with the new token.
    pub(super) fn holds_requests(&self) -> bool {
        self.flow.is_running() && !self.flow.steps_up_with_a_token()
    }

    /// A DPoP proof for a request to the MCP server, when the token is DPoP-bound.
    pub(super) fn resource_proof(&mut self, now: Instant, htm: &str, htu: &str) -> Option<&[u8]> {
        self.flow.resource_proof(now, htm, htu)
    }

    /// The flow's token, for the `Authorization` header, and whether it is DPoP-bound.
    fn token(&self, now: Instant) -> (Option<String>, bool) {
        (self.flow.bearer(now).map(|t| t.expose().to_owned()), self.flow.is_dpop_bound())
    }
}

/// Whether a response refuses the token in a way a new one can fix (a 401, or a 403 asking
/// for more scope). A DPoP nonce demand is not: the token is fine, the proof lacked the nonce.
fn refusal(status: u16, challenge: Option<&AuthChallenge>) -> bool {
    let error = challenge.and_then(|c| c.error.as_deref());
    (status == 401 && error != Some(USE_DPOP_NONCE))
        || (status == 403 && error == Some("insufficient_scope"))
}

/// The DPoP challenge's error asking for a proof with the server's nonce (RFC 9449 9).
const USE_DPOP_NONCE: &str = "use_dpop_nonce";

impl HttpSession {
    /// Runs the OAuth flow for this server: tokens come from it, and a 401 (or a 403 asking
    /// for more scope) starts it instead of failing the request.
    pub(super) fn with_oauth(&mut self, now: Instant, state: OAuthState) {
        // A token kept by the store is used from the first request.
        let (token, dpop) = state.token(now);
        self.set_token_as(token, dpop);
        self.oauth = Some(state);
    }

    /// Whether response heads should be searched for `DPoP-Nonce`: only with a DPoP-bound
    /// token, so the bearer path reads no more headers than before.
    pub(super) fn reads_dpop_nonce(&self) -> bool {
        self.oauth.as_ref().is_some_and(|o| o.flow.is_dpop_bound())
    }

    /// A `DPoP-Nonce` from the MCP server: the flow keeps the latest for the next proofs.
    pub(super) fn oauth_resource_nonce(&mut self, value: &[u8]) {
        if let Some(st) = self.oauth.as_mut() {
            st.flow.handle_resource_nonce(value);
        }
    }

    /// Exchange `i` got a 401 `use_dpop_nonce` (RFC 9449 9): it goes again at once with the
    /// nonce the response brought, once. Returns whether it was taken.
    pub(super) fn dpop_nonce_retry(&mut self, i: usize, status: u16) -> bool {
        let Some(st) = self.oauth.as_ref() else { return false };
        let Some(x) = self.exchanges.get_mut(i) else { return false };
        let asks = status == 401
            && x.challenge.as_ref().and_then(|c| c.error.as_deref()) == Some(USE_DPOP_NONCE);
        if !asks || x.has_resent(Resend::DpopNonce) || !st.flow.is_dpop_bound() {
            return false;
        }
        log::debug!("the server asks for a DPoP nonce: sending again with it");
        x.resent |= Resend::DpopNonce as u8;
        self.resend_first(i);
        true
    }

    /// The scope granted with the OAuth flow's current token (`None` without a flow or token).
    pub(crate) fn granted_scope(&self) -> Option<&str> {
        self.oauth.as_ref()?.granted_scope()
    }

    /// The next HTTP request of the flow for the driver to make, answered with
    /// [`SessionEvent::OAuth`](super::SessionEvent::OAuth).
    pub(crate) fn poll_oauth_request(&mut self) -> Option<HttpRequest> {
        self.oauth.as_mut()?.outbound.take()
    }

    /// What became of the flow's request `id`.
    pub(super) fn oauth_answer(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        id: RequestId,
        answer: OAuthAnswer<'_>,
    ) {
        let Some(st) = self.oauth.as_mut() else { return };
        match answer {
            OAuthAnswer::Response(response) => st.flow.handle_response(now, id, response),
            OAuthAnswer::Failed(Some(e)) => st.flow.handle_connection_error(now, id, e),
            OAuthAnswer::Failed(None) => st.flow.handle_transport_error(now, id),
        }
        self.drain_oauth(engine, now);
    }

    /// The redirect of a deferred authorization (see [`Authorizer::begin`]), from the host.
    pub(crate) fn handle_oauth_redirect(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        redirect: &str,
    ) -> Result<(), RedirectError> {
        let Some(st) = self.oauth.as_mut() else { return Err(RedirectError::NoFlow) };
        let taken = st.flow.handle_redirect(now, redirect);
        self.drain_oauth(engine, now);
        taken
    }

    /// Gives up on a deferred authorization whose redirect did not come in time, or
    /// refreshes the token before it expires; early and spurious calls do nothing.
    pub(super) fn oauth_timeout(&mut self, engine: &mut Engine, now: Instant) {
        let Some(st) = self.oauth.as_mut() else { return };
        st.flow.handle_timeout(now);
        self.drain_oauth(engine, now);
    }

    /// What the wall clock reads at `now` (see [`OAuthFlow::handle_wall_clock`]).
    pub(super) fn oauth_wall_clock(&mut self, now: Instant, unix_now: u64) {
        if let Some(st) = self.oauth.as_mut() {
            st.flow.handle_wall_clock(now, unix_now);
        }
    }

    /// When a deferred authorization expires, or the token is due for a refresh.
    pub(super) fn oauth_poll_timeout(&self) -> Option<Instant> {
        self.oauth.as_ref()?.flow.poll_timeout()
    }

    /// A request sent with the current token succeeded: the flow's count of
    /// re-authorizations starts over.
    pub(super) fn oauth_authorized(&mut self, i: usize) {
        let Some(st) = self.oauth.as_mut() else { return };
        if self.exchanges.get(i).and_then(|x| x.token_gen) == Some(st.generation) {
            st.flow.handle_authorized();
        }
    }

    /// Exchange `i` ended with `status`: when that refuses the token, the exchange waits for
    /// the flow (or goes again at once with a token newer than the one refused). Returns
    /// whether the exchange was taken.
    pub(super) fn oauth_refused(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        i: usize,
        status: u16,
    ) -> bool {
        let Some(st) = self.oauth.as_mut() else { return false };
        let Some(x) = self.exchanges.get_mut(i) else { return false };
        if !refusal(status, x.challenge.as_ref()) {
            return false;
        }
        let challenge = x.challenge.take().unwrap_or_default();
        let has_token = !self.bearer.is_empty();
        if has_token && x.token_gen != Some(st.generation) {
            // Refused a token that has since been replaced (or none): the new one may do.
            log::debug!("HTTP {status} to an older token: resending with the current one");
            self.resend_first(i);
            return true;
        }
        if status == 401 && !x.may_flow_for(&challenge) {
            log::debug!("HTTP 401 to the token a flow got for this request: its answer");
            x.challenge = Some(challenge);
            return false;
        }
        log::debug!("HTTP {status}: running the OAuth flow");
        st.flow.handle_challenge(now, status, &challenge);
        x.stage = Stage::Parked(x.attempt());
        st.parked.push(i);
        if let Carries::Request { id, .. } = x.carries {
            engine.hold_for_authorization(now, id, true);
        }
        self.drain_oauth(engine, now);
        true
    }

    /// Acts on everything the flow asked for.
    fn drain_oauth(&mut self, engine: &mut Engine, now: Instant) {
        loop {
            let Some(st) = self.oauth.as_mut() else { return };
            let Some(action) = st.flow.poll_action() else { break };
            match action {
                Action::Send(req) => {
                    // Redacted, as everywhere the flow shows a URL: a query may hold a key.
                    let url = crate::redact::RedactedUrl(&req.url);
                    log::debug!("oauth: {:?} {url:?}", req.method);
                    st.outbound = Some(req);
                }
                Action::Authorize(url) => match st.authorizer.as_mut() {
                    Some(a) => st.flow.authorize_with(now, &url, a.as_mut()),
                    None => {
                        log::warn!("the OAuth flow needs a user, and no Authorizer is set");
                        // The trait's defaults: no user to ask.
                        struct NoUser;
                        impl Authorizer for NoUser {}
                        st.flow.authorize_with(now, &url, &mut NoUser);
                    }
                },
                Action::Ready => {
                    st.generation += 1;
                    let parked = std::mem::take(&mut st.parked);
                    let (token, dpop) = st.token(now);
                    self.set_token_as(token, dpop);
                    // Back at the front, in the order they were refused.
                    for &i in parked.iter().rev() {
                        let Some(x) = self.exchanges.get(i) else { continue };
                        if matches!(x.stage, Stage::Parked(_)) {
                            if let Carries::Request { id, .. } = x.carries {
                                engine.hold_for_authorization(now, id, false);
                            }
                            self.resend_first(i);
                        }
                    }
                }
                Action::Failed(e) => {
                    log::debug!("oauth: {e}");
                    let parked = std::mem::take(&mut st.parked);
                    let (token, dpop) = st.token(now);
                    self.set_token_as(token, dpop);
                    let error = Box::new(e);
                    for i in parked {
                        let Some(x) = self.exchanges.get(i) else { continue };
                        if !matches!(x.stage, Stage::Parked(_)) {
                            continue;
                        }
                        match x.carries {
                            Carries::Request { id, .. } => {
                                let failure = ExchangeFailure::Authorization(error.clone());
                                self.fail(engine, now, i, id, failure);
                            }
                            Carries::Listen => {
                                // Later each time, as after any refusal: the next opening
                                // runs the flow again.
                                self.listen = self.listen_again(now, false);
                                self.release(i);
                            }
                            Carries::Message => self.release(i),
                        }
                    }
                }
            }
        }
    }
}
