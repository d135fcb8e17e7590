//! Local authorization before a call: the host's policies, the tools a configuration
//! disables, and the calls held for the host's answer.
//!
//! Every `tools/call` (and, where the deciding policy [covers](Policy::covers) them,
//! `resources/read` and `prompts/get`) is put to a policy before the engine may send it. The
//! policy is data the host installs, consulted synchronously with what the host knows of the
//! call: the server, principal, tenant and task, the tool's name and its definition's hints
//! from the capability cache. It answers [`Decision::Allow`], [`Decision::Deny`] or
//! [`Decision::Ask`].
//!
//! A refused call still becomes a call: the engine ends it at once with
//! [`LocalError::AuthorizationDenied`](crate::LocalError::AuthorizationDenied), unsent, so it
//! has its `CallFailed` event, its record and its count in [`Stats`](crate::Stats), and it is
//! never retried nor counted against the server's breaker. An asked call is held in the
//! engine ([`CallOptions::hold`]): its deadline runs, [`Host::cancel`] ends it, and it takes no
//! place in the in-flight limit or the queue until [`Host::allow_call`] lets it go. The host
//! learns of it from
//! [`crate::ClientEvent::AuthorizationAsked`]. No callback is
//! stored in the engine: the policy lives here, in the host.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::Instant;

use crate::client::event::{ClientEvent, HostEvent};
use crate::engine::{CallId, CallOptions, Event};
use crate::error::{AuthorizeError, RequestError};
use crate::proto::annotations::ToolAnnotations;
use crate::proto::mcp::Method;

use super::{Client, PrincipalId, ServerId, TaskId};
#[cfg(doc)]
use crate::Host;

/// What a policy decides about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Send it.
    Allow,
    /// Refuse it locally, with this reason (it reaches the host in
    /// [`LocalError::AuthorizationDenied`](crate::LocalError::AuthorizationDenied)).
    Deny(Cow<'static, str>),
    /// Hold it unsent and ask the host ([`ClientEvent::AuthorizationAsked`]); the host answers
    /// with [`Host::allow_call`] or [`Host::deny_call`], in this poll or many frames later. The
    /// blocking helpers ([`Host::call_tool_blocking`], [`Host::wait`]) leave the event queued
    /// and cannot answer it: an asked call they wait for ends at its deadline.
    Ask,
}

impl Decision {
    /// A refusal with this reason.
    pub fn deny(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::Deny(reason.into())
    }
}

/// Everything a policy is told about one call. Strings borrow from the host for the call
/// only.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct AccessRequest<'a> {
    /// The handle the call was made on: a server, or a principal's lane on it.
    pub server: ServerId,
    /// The server's name ([`Host::set_server_name`], or its key in a configuration file),
    /// else its cache identity (`Config::cache_identity`, its program or URL: never a stdio
    /// server's arguments).
    pub server_name: Option<&'a str>,
    /// The principal a lane serves (`None`: the server's own context).
    pub principal: Option<PrincipalId>,
    /// That principal's name.
    pub principal_name: Option<&'a str>,
    /// The tenant: the principal's, else the server's `Config::cache_tenant`.
    pub tenant: Option<&'a str>,
    /// The tenant whose breakers the call answers to ([`CallOptions::tenant`]).
    pub breaker_tenant: u32,
    /// The task the call is made under ([`Host::in_task`]).
    pub task: Option<TaskId>,
    /// `tools/call`, `resources/read` or `prompts/get`.
    pub method: Method,
    /// The tool or prompt name, or the resource URI.
    pub name: &'a str,
    /// The tool definition's hints from the capability cache (`known: false` when the tool
    /// is not cached, or for other methods).
    pub annotations: ToolAnnotations,
    /// The server's configuration lists the tool under `alwaysAllow` or `autoApprove`.
    pub always_allowed: bool,
}

/// A local authorization policy: consulted before a call is sent, synchronously, with what
/// the host knows of it. A closure `FnMut(&AccessRequest<'_>) -> Decision` is a policy.
///
/// It runs inside the host's call verbs: keep it short, and never block in it (answer
/// [`Decision::Ask`] and decide later instead) unless the program is a script that may.
pub trait Policy {
    /// Decides about one call.
    fn decide(&mut self, request: &AccessRequest<'_>) -> Decision;

    /// Whether the policy is asked about calls of `method`; by default only `tools/call`.
    /// Return `true` for `resources/read` or `prompts/get` to gate those too.
    fn covers(&self, method: Method) -> bool {
        method == Method::ToolsCall
    }
}

impl<F: FnMut(&AccessRequest<'_>) -> Decision> Policy for F {
    fn decide(&mut self, request: &AccessRequest<'_>) -> Decision {
        self(request)
    }
}

/// When the [`DefaultPolicy`] asks the host before a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Confirm {
    /// Never: every call is allowed.
    #[default]
    Never,
    /// Before a tool whose hints say it may destroy or overwrite
    /// ([`ToolAnnotations::is_destructive`]: not read-only and not `destructiveHint: false`,
    /// or not in the cache).
    Destructive,
    /// Before every tool call.
    Always,
}

/// The policy a host starts with when given a [`Confirm`] mode: tools the configuration lists
/// under `alwaysAllow` / `autoApprove` are allowed without asking; the others are asked about
/// as `confirm` says. (Tools under `disabledTools` never reach a policy: they are refused
/// first.)
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultPolicy {
    /// When to ask.
    pub confirm: Confirm,
}

impl DefaultPolicy {
    /// A default policy that asks as `confirm` says.
    pub fn new(confirm: Confirm) -> Self {
        Self { confirm }
    }
}

impl Policy for DefaultPolicy {
    fn decide(&mut self, request: &AccessRequest<'_>) -> Decision {
        if request.always_allowed {
            return Decision::Allow;
        }
        match self.confirm {
            Confirm::Never => Decision::Allow,
            Confirm::Destructive if !request.annotations.is_destructive() => Decision::Allow,
            Confirm::Destructive | Confirm::Always => Decision::Ask,
        }
    }
}

/// What one server's configuration says about its tools.
#[derive(Debug, Default)]
struct ToolRules {
    disabled: Vec<String>,
    always_allow: Vec<String>,
}

/// A held call the host has not been told about yet.
#[derive(Debug)]
struct Asked {
    server: ServerId,
    call: CallId,
    method: Method,
    name: String,
    annotations: ToolAnnotations,
}

/// The host's policies, tool rules and held calls.
#[derive(Default)]
pub(crate) struct Gate {
    host: Option<Box<dyn Policy>>,
    servers: HashMap<ServerId, Box<dyn Policy>>,
    principals: HashMap<PrincipalId, Box<dyn Policy>>,
    /// By the server's own handle (lanes follow their server's rules).
    rules: HashMap<ServerId, ToolRules>,
    asks: VecDeque<Asked>,
    /// The ask last handed out by `poll_event` (its event borrows it).
    current: Option<Asked>,
    /// The decision itself, set by the first policy or tool rule installed. Until then every
    /// call goes unasked, and because only the installers name the function, a program that
    /// installs none does not link it, nor the catalog lookups it reads annotations with.
    decide: Option<Decide>,
}

/// [`Client::decide`]'s signature, for [`Gate::decide`].
type Decide = fn(&mut Client, Instant, ServerId, Option<TaskId>, Method, &str, u32) -> Verdict;

impl Gate {
    /// The ask last taken, as an event.
    pub(crate) fn current_ask(&self) -> Option<(ServerId, HostEvent<'_>)> {
        let a = self.current.as_ref()?;
        let event = Event::Client(ClientEvent::AuthorizationAsked {
            call: a.call,
            method: a.method,
            name: &a.name,
            annotations: a.annotations,
        });
        Some((a.server, event))
    }
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate")
            .field("host_policy", &self.host.is_some())
            .field("server_policies", &self.servers.len())
            .field("principal_policies", &self.principals.len())
            .field("rules", &self.rules)
            .field("asks", &self.asks)
            .finish()
    }
}

impl Gate {
    /// `true` when no call can be refused or held: the fast path, with no lookups.
    fn is_open(&self) -> bool {
        self.host.is_none()
            && self.servers.is_empty()
            && self.principals.is_empty()
            && self.rules.is_empty()
    }

    /// `true` when `server`'s configuration disables tool `name`.
    pub(crate) fn is_disabled(&self, server: ServerId, name: &str) -> bool {
        self.rules.get(&server).is_some_and(|r| r.disabled.iter().any(|t| t == name))
    }

    /// `true` when `server` has disabled tools at all.
    pub(crate) fn has_disabled(&self, server: ServerId) -> bool {
        self.disabled_count(server) > 0
    }

    /// How many tools `server` disables.
    pub(crate) fn disabled_count(&self, server: ServerId) -> usize {
        self.rules.get(&server).map_or(0, |r| r.disabled.len())
    }

    /// The most specific policy installed for a call of `method` on `base` for `principal`
    /// among those that cover `method`. One that does not cover it hands the call on to the
    /// next: a principal's closure (which covers tool calls only) left every read and prompt
    /// of the principal ungated, though the host's policy gated them.
    fn chosen(
        &mut self,
        base: ServerId,
        principal: Option<PrincipalId>,
        method: Method,
    ) -> Option<&mut Box<dyn Policy>> {
        let covers = |p: Option<&Box<dyn Policy>>| p.is_some_and(|p| p.covers(method));
        if let Some(p) = principal.filter(|p| covers(self.principals.get(p))) {
            return self.principals.get_mut(&p);
        }
        if covers(self.servers.get(&base)) {
            return self.servers.get_mut(&base);
        }
        self.host.as_mut().filter(|p| p.covers(method))
    }

    /// Forgets what was installed for a removed server.
    pub(crate) fn forget(&mut self, server: ServerId) {
        self.servers.remove(&server);
        self.rules.remove(&server);
    }

    /// A removed principal's policy goes with it.
    pub(crate) fn forget_principal(&mut self, principal: PrincipalId) {
        self.principals.remove(&principal);
    }
}

/// What the gate decided, with what an ask needs.
pub(crate) enum Verdict {
    Allow,
    Deny(Cow<'static, str>),
    Ask(ToolAnnotations),
}

impl Client {
    /// Installs the host-wide authorization policy, asked about calls on every server that
    /// has no policy of its own (nor its principal). Replaces the last one.
    ///
    /// ```no_run
    /// use mcpoll::{AccessRequest, Decision, Host};
    ///
    /// let mut host = Host::new()?;
    /// host.set_policy(|call: &AccessRequest<'_>| {
    ///     if call.annotations.read_only == Some(true) || call.always_allowed {
    ///         Decision::Allow
    ///     } else if call.name == "drop_table" {
    ///         Decision::deny("never on this host")
    ///     } else {
    ///         Decision::Ask // ClientEvent::AuthorizationAsked: allow_call or deny_call
    ///     }
    /// });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_policy(&mut self, policy: impl Policy + 'static) {
        self.authz.host = Some(Box::new(policy));
        self.authz.decide = Some(Client::decide);
    }

    /// Installs the policy of one server, asked instead of the host's about calls on it and on
    /// its principals' lanes (unless the principal has its own), for the methods it
    /// [covers](Policy::covers); the host's is asked about the others. A lane's handle names
    /// its server: the policy is the server's, for every principal (a principal's own is
    /// [`set_principal_policy`](Self::set_principal_policy)). A removed server's handle
    /// installs nothing.
    pub fn set_server_policy(&mut self, server: ServerId, policy: impl Policy + 'static) {
        // Kept, it would shut the gate's fast path for good: nothing forgets it again.
        if self.server(server).is_none() {
            return;
        }
        let (base, _) = self.lanes.caller(server);
        self.authz.servers.insert(base, Box::new(policy));
        self.authz.decide = Some(Client::decide);
    }

    /// Installs the policy of one principal, asked before any other about calls on its lanes
    /// of the methods it [covers](Policy::covers); the server's or the host's is asked about
    /// the others. A removed principal's handle installs nothing.
    pub fn set_principal_policy(&mut self, principal: PrincipalId, policy: impl Policy + 'static) {
        if self.lanes.principal(principal).is_none() {
            return;
        }
        self.authz.principals.insert(principal, Box::new(policy));
        self.authz.decide = Some(Client::decide);
    }

    /// Removes every installed policy (the configuration's `disabledTools` still apply).
    pub fn clear_policies(&mut self) {
        self.authz.host = None;
        self.authz.servers.clear();
        self.authz.principals.clear();
    }

    /// Disables tools of a server: calls to them are refused locally (never sent), and they
    /// are left out of its catalog views and tool search. What `disabledTools` in a
    /// configuration file does. A lane's handle names its server: the tools are disabled on
    /// all its lanes.
    pub fn disable_tools<S: Into<String>>(
        &mut self,
        server: ServerId,
        tools: impl IntoIterator<Item = S>,
    ) {
        self.add_rules(server, tools.into_iter().map(Into::into).collect(), |r| &mut r.disabled);
    }

    /// Marks tools of a server as always allowed: [`AccessRequest::always_allowed`] is set for
    /// them, and the [`DefaultPolicy`] never asks about them. What `alwaysAllow` /
    /// `autoApprove` in a configuration file do. A lane's handle names its server: the tools
    /// are always allowed on all its lanes.
    pub fn always_allow_tools<S: Into<String>>(
        &mut self,
        server: ServerId,
        tools: impl IntoIterator<Item = S>,
    ) {
        let tools = tools.into_iter().map(Into::into).collect();
        self.add_rules(server, tools, |r| &mut r.always_allow);
    }

    /// Adds tools to one list of the server's rules; none makes no rules (the gate's fast
    /// path stays open).
    fn add_rules(
        &mut self,
        server: ServerId,
        tools: Vec<String>,
        list: fn(&mut ToolRules) -> &mut Vec<String>,
    ) {
        // A stale handle's rules would stay for good: nothing forgets a server removed.
        if !tools.is_empty() && self.server(server).is_some() {
            let (base, _) = self.lanes.caller(server);
            let rules = list(self.authz.rules.entry(base).or_default());
            // Each tool once: a host that applies its configuration again at each reload
            // grew the list (scanned on every call) by the whole configuration each time.
            for tool in tools {
                if !rules.contains(&tool) {
                    rules.push(tool);
                }
            }
            self.authz.decide = Some(Client::decide);
        }
    }

    /// Lets a call held by [`Decision::Ask`] go: it joins the server's queue now (its
    /// deadline has kept running). `Err(Overloaded)` when the queue is full: the call stays
    /// held. `Err(NotHeld)` when it already ended (deadline, cancel) or was answered. A call
    /// to a tool [disabled](Self::disable_tools) since it was held ends refused instead, as
    /// any call to it would (its `CallFailed` says so).
    pub fn allow_call(
        &mut self,
        now: Instant,
        server: ServerId,
        call: CallId,
    ) -> Result<(), AuthorizeError> {
        let (base, _) = self.lanes.caller(server);
        let disabled = self
            .server(server)
            .and_then(|s| s.engine.held_tool(call))
            .is_some_and(|tool| self.authz.is_disabled(base, tool));
        if disabled {
            return self.deny_call(now, server, call, "the tool is disabled by configuration");
        }
        let s = self.server_mut(server).ok_or(AuthorizeError::NotHeld)?;
        s.engine.release(now, call)?;
        self.mark(server.index);
        Ok(())
    }

    /// Refuses a call held by [`Decision::Ask`]: it ends unsent with
    /// [`LocalError::AuthorizationDenied`](crate::LocalError::AuthorizationDenied) carrying
    /// `reason`.
    pub fn deny_call(
        &mut self,
        now: Instant,
        server: ServerId,
        call: CallId,
        reason: &str,
    ) -> Result<(), AuthorizeError> {
        let s = self.server_mut(server).ok_or(AuthorizeError::NotHeld)?;
        s.engine.refuse(now, call, reason)?;
        self.tasks.refund(&(server, call));
        Ok(())
    }

    /// Puts one call to the gate: allowed at once when nothing is installed, else
    /// [`decide`](Self::decide).
    fn consult(
        &mut self,
        now: Instant,
        server: ServerId,
        task: Option<TaskId>,
        method: Method,
        name: &str,
        breaker_tenant: u32,
    ) -> Verdict {
        match self.authz.decide {
            Some(decide) if !self.authz.is_open() => {
                decide(self, now, server, task, method, name, breaker_tenant)
            }
            _ => Verdict::Allow,
        }
    }

    /// The gate's decision: the configuration's disabled tools first, then the most specific
    /// policy installed that covers the method (the principal's, the server's, the host's).
    fn decide(
        &mut self,
        now: Instant,
        server: ServerId,
        task: Option<TaskId>,
        method: Method,
        name: &str,
        breaker_tenant: u32,
    ) -> Verdict {
        if self.server(server).is_none() {
            // A handle of a server removed (its slot maybe another's now): nothing to decide,
            // and the policy (or the user it asks) would be shown the other server's name.
            // The call's start refuses it.
            return Verdict::Allow;
        }
        let (base, principal_id) = {
            let (base, principal) = self.lanes.caller(server);
            (base, principal.map(|(id, _)| id))
        };
        let tools = method == Method::ToolsCall;
        if tools && self.authz.is_disabled(base, name) {
            return Verdict::Deny(Cow::Borrowed("the tool is disabled by configuration"));
        }
        if self.authz.chosen(base, principal_id, method).is_none() {
            return Verdict::Allow;
        }
        let always_allowed = tools
            && self
                .authz
                .rules
                .get(&base)
                .is_some_and(|r| r.always_allow.iter().any(|t| t == name));
        // The cached definition, else the one the last listing showed (a listing the server
        // marked not cacheable is still what the host saw).
        let listed = if tools { self.listed_tool(now, server, name) } else { None };
        let annotations = listed
            .map_or_else(ToolAnnotations::default, |t| ToolAnnotations::from_definition(t.json()));
        let (_, principal) = self.lanes.caller(server);
        let s = self.servers.get(server.index).filter(|s| s.generation == server.generation);
        // The principal's, else the server's (a lane of a principal without one keeps its
        // server's, as its cache key does).
        let server_tenant = || s.and_then(|s| s.engine.config().cache_tenant.as_deref());
        let tenant = principal.and_then(|(_, p)| p.tenant_name()).or_else(server_tenant);
        let request = AccessRequest {
            server,
            server_name: Some(self.records.name(base.index)).filter(|n| !n.is_empty()),
            principal: principal_id,
            principal_name: principal.map(|(_, p)| p.name()),
            tenant,
            breaker_tenant,
            task,
            method,
            name,
            annotations,
            always_allowed,
        };
        let Some(policy) = self.authz.chosen(base, principal_id, method) else {
            return Verdict::Allow;
        };
        match policy.decide(&request) {
            Decision::Allow => Verdict::Allow,
            Decision::Deny(reason) => Verdict::Deny(reason),
            Decision::Ask => Verdict::Ask(annotations),
        }
    }

    /// Runs a call command behind the gate: an allowed call as asked; a refused or asked one
    /// made held, then refused at once or announced to the host.
    pub(crate) fn gated(
        &mut self,
        now: Instant,
        server: ServerId,
        method: Method,
        name: &str,
        opts: &CallOptions,
        start: impl FnOnce(&mut Client, &CallOptions) -> Result<CallId, RequestError>,
    ) -> Result<CallId, RequestError> {
        match self.consult(now, server, None, method, name, opts.tenant) {
            Verdict::Allow => start(self, opts),
            verdict => {
                let held = CallOptions { hold: true, ..opts.clone() };
                let call = start(self, &held)?;
                self.settle(now, server, call, method, name, verdict);
                Ok(call)
            }
        }
    }

    /// [`gated`](Self::gated) for a task's call, whose options are its own.
    #[allow(clippy::too_many_arguments)] // the call's own terms, and the task and time
    pub(crate) fn gated_in_task<E>(
        &mut self,
        now: Instant,
        task: TaskId,
        server: ServerId,
        method: Method,
        name: &str,
        mut opts: CallOptions,
        start: impl FnOnce(&mut Client, CallOptions) -> Result<CallId, E>,
    ) -> Result<CallId, E> {
        let verdict = self.consult(now, server, Some(task), method, name, opts.tenant);
        if let Verdict::Allow = verdict {
            return start(self, opts);
        }
        opts.hold = true;
        let call = start(self, opts)?;
        let denied = matches!(verdict, Verdict::Deny(_));
        self.settle(now, server, call, method, name, verdict);
        if denied {
            self.tasks.refund(&(server, call));
        }
        Ok(call)
    }

    /// Decides a call that a drain's [`Commands`](super::drain::Commands) started held (the
    /// drain lends no access to the policy): releases it when allowed, else refuses or asks,
    /// as [`gated`](Self::gated) does at the start of any other call.
    #[allow(clippy::too_many_arguments)] // the call's own terms, and who held it
    pub(crate) fn settle_held(
        &mut self,
        now: Instant,
        server: ServerId,
        call: CallId,
        method: Method,
        name: &str,
        breaker_tenant: u32,
        by_host: bool,
    ) {
        match self.consult(now, server, None, method, name, breaker_tenant) {
            // Held at the host's own asking: allowed, it waits for the host's release, as a
            // call the host holds outside a drain does.
            Verdict::Allow if by_host => {}
            Verdict::Allow => {
                // A full queue leaves it held: its deadline or a cancel ends it then.
                let _ = self.allow_call(now, server, call);
            }
            verdict => self.settle(now, server, call, method, name, verdict),
        }
    }

    /// Whether no policy and no disabled tool is in effect: every call goes unasked.
    pub(crate) fn authorization_open(&self) -> bool {
        self.authz.is_open()
    }

    fn settle(
        &mut self,
        now: Instant,
        server: ServerId,
        call: CallId,
        method: Method,
        name: &str,
        verdict: Verdict,
    ) {
        let Some(s) = self.server_mut(server) else { return };
        match verdict {
            Verdict::Allow => {}
            Verdict::Deny(reason) => {
                // Held a moment ago, so it is still held: the refusal cannot miss.
                let _ = s.engine.refuse(now, call, &reason);
            }
            Verdict::Ask(annotations) => {
                // Asks for calls that ended meanwhile go, so the queue is bounded by the
                // calls held.
                let servers = &self.servers;
                self.authz.asks.retain(|a| {
                    servers.get(a.server.index).is_some_and(|s| {
                        s.generation == a.server.generation && s.engine.is_held(a.call)
                    })
                });
                let name = name.to_owned();
                self.authz.asks.push_back(Asked { server, call, method, name, annotations });
            }
        }
    }

    /// `true` while asks wait for `poll_event`.
    pub(crate) fn has_asks(&self) -> bool {
        !self.authz.asks.is_empty()
    }

    /// Takes the next ask about a call still held (dropping those about calls that ended);
    /// `true` when there is one for [`current_ask`](Self::current_ask).
    pub(crate) fn take_ask(&mut self) -> bool {
        while let Some(a) = self.authz.asks.pop_front() {
            let held = self
                .servers
                .get(a.server.index)
                .is_some_and(|s| s.generation == a.server.generation && s.engine.is_held(a.call));
            if held {
                self.authz.current = Some(a);
                return true;
            }
        }
        false
    }

    /// The ask [`take_ask`](Self::take_ask) took, as an event (it borrows the host).
    pub(crate) fn current_ask(&self) -> Option<(ServerId, HostEvent<'_>)> {
        self.authz.current_ask()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(annotations: ToolAnnotations, always_allowed: bool) -> AccessRequest<'static> {
        AccessRequest {
            server: ServerId { index: 0, generation: 1 },
            server_name: None,
            principal: None,
            principal_name: None,
            tenant: None,
            breaker_tenant: 0,
            task: None,
            method: Method::ToolsCall,
            name: "t",
            annotations,
            always_allowed,
        }
    }

    #[test]
    fn the_default_policy_asks_as_told_and_never_about_always_allowed_tools() {
        let read_only =
            ToolAnnotations::from_definition(r#"{"annotations":{"readOnlyHint":true}}"#);
        let bare = ToolAnnotations::from_definition(r#"{"name":"t"}"#);
        let unknown = ToolAnnotations::default();
        let cases = [
            (Confirm::Never, bare, false, Decision::Allow),
            (Confirm::Destructive, read_only, false, Decision::Allow),
            (Confirm::Destructive, bare, false, Decision::Ask),
            (Confirm::Destructive, unknown, false, Decision::Ask),
            (Confirm::Destructive, bare, true, Decision::Allow),
            (Confirm::Always, read_only, false, Decision::Ask),
            (Confirm::Always, bare, true, Decision::Allow),
        ];
        for (confirm, annotations, always, want) in cases {
            let got = DefaultPolicy::new(confirm).decide(&request(annotations, always));
            assert_eq!(got, want, "{confirm:?} {annotations:?} always_allowed={always}");
        }
        assert!(DefaultPolicy::default().covers(Method::ToolsCall));
        assert!(!DefaultPolicy::default().covers(Method::ResourcesRead));
    }
}
