//! The events the many-server core adds to its engines' own: they come from the capability
//! cache and the local authorization policy, which live here and not in an engine.

use crate::catalog::CatalogChange;
use crate::engine::{CallId, Event};
use crate::proto::annotations::ToolAnnotations;
use crate::proto::mcp::Method;

/// What [`Client::poll_event`](crate::Client::poll_event) and
/// [`Host::poll_event`](crate::Host::poll_event) hand out: an engine's event, or the core's own
/// in [`Event::Client`].
pub type HostEvent<'a> = Event<'a, ClientEvent<'a>>;

/// An event of the many-server core rather than of one server's engine, carried by
/// [`Event::Client`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientEvent<'a> {
    /// A refreshed tool catalog differs from the last one the host was told about (the
    /// capability cache; see [`Host::watch_catalogs`](crate::Host::watch_catalogs)).
    ToolsChanged(&'a CatalogChange),
    /// As [`ToolsChanged`](Self::ToolsChanged), for the prompt catalog.
    PromptsChanged(&'a CatalogChange),
    /// As [`ToolsChanged`](Self::ToolsChanged), for the resource catalog.
    ResourcesChanged(&'a CatalogChange),
    /// A call is held unsent because the host's authorization policy answered
    /// [`Decision::Ask`](crate::Decision::Ask): answer with
    /// [`Host::allow_call`](crate::Host::allow_call) or
    /// [`Host::deny_call`](crate::Host::deny_call). Its deadline keeps running; cancelling it
    /// works as for any call.
    AuthorizationAsked {
        /// The held call.
        call: CallId,
        /// `tools/call`, or `resources/read` / `prompts/get` when the policy covers them.
        method: Method,
        /// The tool or prompt name, or the resource URI.
        name: &'a str,
        /// The tool definition's hints, from the capability cache.
        annotations: ToolAnnotations,
    },
}
