//! MCP method vocabulary and the result members the engine itself must read.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// The client-to-server requests mcpoll sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Method {
    /// `server/discover` (2026-07-28): the era probe and capability listing.
    Discover,
    /// `initialize` (2025-11-25 handshake).
    Initialize,
    /// `tools/list`, paginated.
    ToolsList,
    /// `tools/call`.
    ToolsCall,
    /// `resources/list`, paginated.
    ResourcesList,
    /// `resources/templates/list`, paginated.
    ResourceTemplatesList,
    /// `resources/read`.
    ResourcesRead,
    /// `prompts/list`, paginated.
    PromptsList,
    /// `prompts/get`.
    PromptsGet,
    /// `completion/complete`.
    Complete,
    /// `ping` (legacy only).
    Ping,
    /// `subscriptions/listen` (2026-07-28): a long-lived request carrying change notifications.
    Listen,
}

impl Method {
    /// The method name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Discover => "server/discover",
            Self::Initialize => "initialize",
            Self::ToolsList => "tools/list",
            Self::ToolsCall => "tools/call",
            Self::ResourcesList => "resources/list",
            Self::ResourceTemplatesList => "resources/templates/list",
            Self::ResourcesRead => "resources/read",
            Self::PromptsList => "prompts/list",
            Self::PromptsGet => "prompts/get",
            Self::Complete => "completion/complete",
            Self::Ping => "ping",
            Self::Listen => "subscriptions/listen",
        }
    }

    /// For paginated listings, the result member holding the items.
    pub fn list_key(self) -> Option<&'static str> {
        match self {
            Self::ToolsList => Some("tools"),
            Self::ResourcesList => Some("resources"),
            Self::ResourceTemplatesList => Some("resourceTemplates"),
            Self::PromptsList => Some("prompts"),
            _ => None,
        }
    }
}

/// Notifications a server sends that the engine routes.
pub(crate) mod notify {
    pub(crate) const PROGRESS: &str = "notifications/progress";
    pub(crate) const CANCELLED: &str = "notifications/cancelled";
    pub(crate) const INITIALIZED: &str = "notifications/initialized";
    pub(crate) const TOOLS_CHANGED: &str = "notifications/tools/list_changed";
    pub(crate) const PROMPTS_CHANGED: &str = "notifications/prompts/list_changed";
    pub(crate) const RESOURCES_CHANGED: &str = "notifications/resources/list_changed";
    pub(crate) const RESOURCE_UPDATED: &str = "notifications/resources/updated";
    pub(crate) const MESSAGE: &str = "notifications/message";
    pub(crate) const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
}

/// The `resultType` of a result (2026-07-28 §ResultType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResultType {
    /// The final result (also what a missing `resultType` means).
    Complete,
    /// An interim result asking the client for input (multi round-trip requests).
    InputRequired,
}

/// The few members of any result that the engine reads; all else stays raw.
#[derive(Debug, Deserialize)]
pub(crate) struct ResultHead<'a> {
    #[serde(rename = "resultType", borrow, default)]
    pub(crate) result_type: Option<Cow<'a, str>>,
    #[serde(rename = "isError", default)]
    pub(crate) is_error: Option<bool>,
}

impl ResultHead<'_> {
    /// Missing means complete; an unknown value is invalid and yields `None`.
    pub(crate) fn result_type(&self) -> Option<ResultType> {
        match self.result_type.as_deref() {
            None | Some("complete") => Some(ResultType::Complete),
            Some("input_required") => Some(ResultType::InputRequired),
            Some(_) => None,
        }
    }
}

/// A page of a paginated listing.
#[derive(Debug, Deserialize)]
pub(crate) struct Page<'a> {
    #[serde(rename = "nextCursor", borrow, default)]
    pub(crate) next_cursor: Option<Cow<'a, str>>,
    #[serde(rename = "resultType", borrow, default)]
    pub(crate) result_type: Option<Cow<'a, str>>,
}

/// `server/discover` result members the engine needs.
#[derive(Debug, Deserialize)]
pub(crate) struct DiscoverHead<'a> {
    #[serde(rename = "supportedVersions", borrow, default)]
    pub(crate) supported_versions: Vec<Cow<'a, str>>,
}

/// `initialize` result members the engine needs.
#[derive(Debug, Deserialize)]
pub(crate) struct InitializeHead<'a> {
    #[serde(rename = "protocolVersion", borrow, default)]
    pub(crate) protocol_version: Option<Cow<'a, str>>,
}

/// `error.data` of -32022.
#[derive(Debug, Deserialize)]
pub(crate) struct UnsupportedVersionData<'a> {
    #[serde(borrow, default)]
    pub(crate) supported: Vec<Cow<'a, str>>,
}

/// `notifications/progress` params.
#[derive(Debug, Deserialize)]
pub(crate) struct ProgressParams<'a> {
    #[serde(rename = "progressToken", borrow)]
    pub(crate) token: &'a RawValue,
    #[serde(default)]
    pub(crate) progress: f64,
    #[serde(default)]
    pub(crate) total: Option<f64>,
    #[serde(borrow, default)]
    pub(crate) message: Option<Cow<'a, str>>,
}

/// What a `subscriptions/listen` asks for (PROTOCOL.md §2.9).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscriptionFilter {
    /// `notifications/tools/list_changed`.
    pub tools_list_changed: bool,
    /// `notifications/prompts/list_changed`.
    pub prompts_list_changed: bool,
    /// `notifications/resources/list_changed`.
    pub resources_list_changed: bool,
    /// `notifications/resources/updated` for these URIs (and their sub-resources).
    pub resource_subscriptions: Vec<String>,
}

impl SubscriptionFilter {
    /// Appends the filter as a JSON object.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        let mut first = true;
        for (on, key) in [
            (self.tools_list_changed, "toolsListChanged"),
            (self.prompts_list_changed, "promptsListChanged"),
            (self.resources_list_changed, "resourcesListChanged"),
        ] {
            if on {
                if !first {
                    out.push(b',');
                }
                first = false;
                out.push(b'"');
                out.extend_from_slice(key.as_bytes());
                out.extend_from_slice(b"\":true");
            }
        }
        if !self.resource_subscriptions.is_empty() {
            if !first {
                out.push(b',');
            }
            out.extend_from_slice(b"\"resourceSubscriptions\":[");
            for (i, uri) in self.resource_subscriptions.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                crate::proto::jsonrpc::write_json_str(out, uri);
            }
            out.push(b']');
        }
        out.push(b'}');
    }
}

/// `_meta` of a notification on a listen stream, and the `notifications` it acknowledges.
#[derive(Debug, Deserialize)]
pub(crate) struct ListenNotice<'a> {
    #[serde(rename = "_meta", borrow, default)]
    pub(crate) meta: Option<ListenMeta<'a>>,
    #[serde(borrow, default)]
    pub(crate) notifications: Option<&'a RawValue>,
    #[serde(rename = "requestId", borrow, default)]
    pub(crate) request_id: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListenMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/subscriptionId", borrow, default)]
    pub(crate) subscription_id: Option<&'a RawValue>,
}

/// Items of a listing page, kept raw: only the array is located, never its elements parsed.
pub(crate) fn page_items<'a>(result: &'a RawValue, key: &str) -> Option<&'a RawValue> {
    // A map with borrowed raw values skips every other member without building it.
    let map: std::collections::BTreeMap<Cow<'a, str>, &'a RawValue> =
        serde_json::from_str(result.get()).ok()?;
    map.get(key).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_type_missing_is_complete_and_unknown_is_invalid() {
        let head = |s: &'static str| serde_json::from_str::<ResultHead<'_>>(s).unwrap();
        assert_eq!(head("{}").result_type(), Some(ResultType::Complete));
        assert_eq!(head(r#"{"resultType":"complete"}"#).result_type(), Some(ResultType::Complete));
        assert_eq!(
            head(r#"{"resultType":"input_required"}"#).result_type(),
            Some(ResultType::InputRequired)
        );
        assert_eq!(head(r#"{"resultType":"task"}"#).result_type(), None);
        assert_eq!(head(r#"{"isError":true,"content":[]}"#).is_error, Some(true));
    }

    #[test]
    fn finds_page_items_by_key() {
        let r: &RawValue =
            serde_json::from_str(r#"{"tools":[{"name":"a"}],"nextCursor":""}"#).unwrap();
        assert_eq!(page_items(r, "tools").unwrap().get(), r#"[{"name":"a"}]"#);
        assert!(page_items(r, "prompts").is_none());
    }
}
