//! Answer handlers: the host's own answers to server requests (elicitation, sampling, roots),
//! given by the host's code once and asked wherever the host's loop runs.
//!
//! The engine stays callback-free: it queues each request as an `Event::ServerRequest` and
//! waits. The host holds the handlers and, after each round of I/O and timers (`poll`, the
//! blocking helpers, the embedded `handle_event` / `handle_timeout`), offers each new request
//! once: to the server's handler, then to the host's. An answered request's event is dropped;
//! one no handler answered stays queued for the host's loop, as without handlers. A blocking
//! helper has no loop behind it, so there a request no handler answered ends the call at once
//! with `LocalError::Unanswered`.

use std::fmt;
use std::time::Instant;

use serde_json::value::RawValue;

use super::servers::Pass;
use super::{roots, Client, ServerId};
use crate::engine::CallId;
use crate::error::{CallError, LocalError};
use crate::proto::mcp::ServerRequestKind;
#[cfg(doc)]
use crate::Host;

/// What an [`AnswerHandler`] does with one server request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answer {
    /// The result object as JSON text (an `ElicitResult`, `CreateMessageResult` or
    /// `ListRootsResult`), checked as [`Host::answer`] checks it; one that fails the check is
    /// rejected instead.
    Result(String),
    /// Refuse the request, as [`Host::reject`] does.
    Reject,
    /// Not this handler's to answer: the host's handler is asked next (after a server's), and
    /// when none answers, the request reaches the host's loop as an `Event::ServerRequest`.
    Pass,
}

/// The host's answers to server requests, asked from the host's loop (see
/// [`Host::set_answer_handler`]). A closure
/// `FnMut(ServerId, ServerRequestKind, &str) -> Answer` is one.
pub trait AnswerHandler {
    /// The answer to a request of `kind` from `server`, whose `params` are the request's
    /// params as JSON text.
    fn answer(&mut self, server: ServerId, kind: ServerRequestKind, params: &str) -> Answer;
}

impl<F> AnswerHandler for F
where
    F: FnMut(ServerId, ServerRequestKind, &str) -> Answer,
{
    fn answer(&mut self, server: ServerId, kind: ServerRequestKind, params: &str) -> Answer {
        self(server, kind, params)
    }
}

impl fmt::Debug for dyn AnswerHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AnswerHandler")
    }
}

/// The host's handler and each server's.
#[derive(Debug, Default)]
pub(crate) struct Handlers {
    host: Option<Box<dyn AnswerHandler>>,
    servers: Vec<(ServerId, Box<dyn AnswerHandler>)>,
    /// [`Client::offer_to_handlers`], set by the first handler installed: a program that
    /// installs none does not link it, nor the answer checks it runs.
    offer: Option<fn(&mut Client, Instant, &[usize])>,
}

impl Handlers {
    fn is_empty(&self) -> bool {
        self.host.is_none() && self.servers.is_empty()
    }

    /// Whether a handler was ever installed (the pass after input then offers requests).
    pub(crate) fn installed(&self) -> bool {
        self.offer.is_some()
    }

    /// The handler of `server` (a lane, maybe), then that of the server it is a lane of
    /// (`base`; the same for a server's own handle), then the host's; `Pass` when none
    /// answers. Each is told `server`.
    fn ask(
        &mut self,
        server: ServerId,
        base: ServerId,
        kind: ServerRequestKind,
        params: &str,
    ) -> Answer {
        let own: &[ServerId] = if base == server { &[server] } else { &[server, base] };
        for id in own {
            if let Some((_, h)) = self.servers.iter_mut().find(|(s, _)| s == id) {
                match h.answer(server, kind, params) {
                    Answer::Pass => {}
                    answer => return answer,
                }
            }
        }
        match &mut self.host {
            Some(h) => h.answer(server, kind, params),
            None => Answer::Pass,
        }
    }
}

impl Client {
    /// Answers server requests of every server (elicitation, sampling, roots) with `handler`,
    /// from the host's loop: `poll`, the blocking helpers (`call_tool_blocking`, `wait`, ...)
    /// and an embedded host's `handle_event` / `handle_timeout` alike. Each request is offered
    /// once, after the server's own handler ([`set_server_answer_handler`]) passed. A request
    /// no handler answers stays an `Event::ServerRequest`; in a blocking helper, which cannot
    /// wait for the host, it ends the call at once with `LocalError::Unanswered`. The kinds
    /// must still be declared (`Config::answers`).
    ///
    /// [`set_server_answer_handler`]: Self::set_server_answer_handler
    pub fn set_answer_handler(&mut self, handler: Box<dyn AnswerHandler>) {
        self.answers.host = Some(handler);
        self.install_offer();
    }

    /// [`set_answer_handler`](Self::set_answer_handler) for one server (or lane), asked before
    /// the host's. A server's handler is asked for its lanes too, after a lane's own. Returns
    /// `false` (and keeps nothing) when there is no such server.
    pub fn set_server_answer_handler(
        &mut self,
        server: ServerId,
        handler: Box<dyn AnswerHandler>,
    ) -> bool {
        if self.server(server).is_none() {
            return false;
        }
        self.answers.servers.retain(|(id, _)| *id != server);
        self.answers.servers.push((server, handler));
        self.install_offer();
        true
    }

    /// Makes the pass after input offer server requests to the handlers from now on. Requests
    /// that came before the first handler are offered at the next pass, so every server is
    /// looked at once.
    fn install_offer(&mut self) {
        if self.answers.offer.is_none() {
            self.answers.offer = Some(Client::offer_to_handlers);
            self.servers.mark_all_for(Pass::AfterInput);
        }
    }

    /// Offers each server request not yet offered to the handlers, and sends their answers,
    /// on the servers in `work` (those changed since the last pass: a request comes as
    /// input); nothing when no handler was ever installed.
    pub(crate) fn answer_with_handlers(&mut self, now: Instant, work: &[usize]) {
        if let Some(offer) = self.answers.offer {
            offer(self, now, work);
        }
    }

    fn offer_to_handlers(&mut self, now: Instant, work: &[usize]) {
        if self.answers.is_empty() {
            return;
        }
        let Self { servers, answers, unflushed, lanes, .. } = self;
        // Handlers of servers removed since go with them.
        answers
            .servers
            .retain(|(id, _)| servers.get(id.index).is_some_and(|s| s.generation == id.generation));
        for &index in work {
            let Some(s) = servers.get(index) else { continue };
            if !s.engine.has_unoffered_server_requests() {
                continue;
            }
            let Some(s) = servers.get_mut_without_passes(index) else { continue };
            let server = ServerId { index, generation: s.generation };
            let base = lanes.caller(server).0;
            while let Some((request, kind, answer)) =
                s.engine.offer_server_request().map(|(request, kind, _, params)| {
                    (request, kind, answers.ask(server, base, kind, params))
                })
            {
                let outcome = match answer {
                    Answer::Pass => continue,
                    Answer::Reject => s.engine.reject(now, request),
                    Answer::Result(text) => match RawValue::from_string(text) {
                        Ok(result) => roots::check_answer_resolved(&s.engine, request, &result)
                            .and_then(|()| s.engine.answer(now, request, &result)),
                        Err(_) => Err(crate::error::AnswerError::NotObject),
                    },
                };
                if let Err(e) = outcome {
                    log::debug!("an answer handler's {} answer was refused: {e}", kind.method());
                    let _ = s.engine.reject(now, request);
                }
                s.engine.forget_server_request_event(request);
            }
            if !unflushed.contains(&index) {
                unflushed.push(index);
            }
        }
    }

    /// For the blocking helpers: ends `call` of `server` at once when it waits on a server
    /// request no handler answered (nobody else can while the helper blocks). `true` if so.
    pub(crate) fn end_unanswerable(
        &mut self,
        now: Instant,
        server: ServerId,
        call: CallId,
    ) -> bool {
        self.after_input(now);
        let Some(s) = self.server_mut(server) else {
            return false;
        };
        let Some((request, kind)) = s.engine.unanswered_for(call) else { return false };
        let error = CallError::Local(LocalError::Unanswered(kind));
        s.engine.end_unanswered(now, call, request, error);
        self.mark(server.index);
        true
    }
}
