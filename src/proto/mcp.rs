//! MCP method vocabulary and the result members the engine itself must read.

use crate::proto::json::RawJson;
use crate::proto::jsonrpc::ResultHead;

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
    /// `tasks/get`: a task-backed call's poll (both eras; Mcp-Name is the task id).
    TasksGet,
    /// `tasks/result` (2025-11-25): a finished task's result.
    TasksResult,
    /// `tasks/cancel`: the cancellation of a task-backed call.
    TasksCancel,
    /// `tasks/update` (2026-07-28): the answers to a task's input requests.
    TasksUpdate,
    /// A method mcpoll has no verb for (an extension's or a vendor's), sent by name with
    /// [`Engine::request_raw`](crate::Engine::request_raw); its name is the call's own (the
    /// `Mcp-Method` header and the frame's `method`).
    Extension,
}

/// Each method's wire name, given to `$shape` (one table for every form a name takes).
macro_rules! method_names {
    ($method:expr, $shape:ident) => {
        match $method {
            Method::Discover => $shape!("server/discover"),
            Method::Initialize => $shape!("initialize"),
            Method::ToolsList => $shape!("tools/list"),
            Method::ToolsCall => $shape!("tools/call"),
            Method::ResourcesList => $shape!("resources/list"),
            Method::ResourceTemplatesList => $shape!("resources/templates/list"),
            Method::ResourcesRead => $shape!("resources/read"),
            Method::PromptsList => $shape!("prompts/list"),
            Method::PromptsGet => $shape!("prompts/get"),
            Method::Complete => $shape!("completion/complete"),
            Method::Ping => $shape!("ping"),
            Method::Listen => $shape!("subscriptions/listen"),
            Method::TasksGet => $shape!("tasks/get"),
            Method::TasksResult => $shape!("tasks/result"),
            Method::TasksCancel => $shape!("tasks/cancel"),
            Method::TasksUpdate => $shape!("tasks/update"),
            Method::Extension => $shape!("(extension)"),
        }
    };
}

impl Method {
    /// The methods with a verb of their own, which [`Method::Extension`] never names.
    pub(crate) const CORE: [Self; 16] = [
        Self::Discover,
        Self::Initialize,
        Self::ToolsList,
        Self::ToolsCall,
        Self::ResourcesList,
        Self::ResourceTemplatesList,
        Self::ResourcesRead,
        Self::PromptsList,
        Self::PromptsGet,
        Self::Complete,
        Self::Ping,
        Self::Listen,
        Self::TasksGet,
        Self::TasksResult,
        Self::TasksCancel,
        Self::TasksUpdate,
    ];

    /// The method name on the wire.
    pub fn as_str(self) -> &'static str {
        macro_rules! name {
            ($name:literal) => {
                $name
            };
        }
        method_names!(self, name)
    }

    /// What a request frame has between its id and its params' members:
    /// `,"method":"<name>","params":{`, one piece per method, laid out at build time.
    pub(crate) fn request_middle(self) -> &'static str {
        macro_rules! middle {
            ($name:literal) => {
                concat!(",\"method\":\"", $name, "\",\"params\":{")
            };
        }
        method_names!(self, middle)
    }

    /// Whether the method may answer `input_required` (2026-07-28 §2.8).
    pub(crate) fn takes_input(self) -> bool {
        matches!(self, Self::ToolsCall | Self::ResourcesRead | Self::PromptsGet)
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
    pub(crate) const ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
    pub(crate) const TOOLS_CHANGED: &str = "notifications/tools/list_changed";
    pub(crate) const PROMPTS_CHANGED: &str = "notifications/prompts/list_changed";
    pub(crate) const RESOURCES_CHANGED: &str = "notifications/resources/list_changed";
    pub(crate) const RESOURCE_UPDATED: &str = "notifications/resources/updated";
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
    /// A task was created in place of the result (the `io.modelcontextprotocol/tasks`
    /// extension): the engine polls it and the call ends with the task's result.
    Task,
}

/// A result's `resultType`: missing means complete; an unknown value is invalid (`None`).
pub(crate) fn result_type(result: RawJson<'_>) -> Option<ResultType> {
    parse_result_type(result.get("resultType"))
}

/// `resultType` and `isError` from the head decoding read on its one pass (the hot path of
/// every completed call). `None` when `resultType` is not one this client knows.
pub(crate) fn result_head(head: ResultHead<'_>) -> Option<(ResultType, bool)> {
    let t = parse_result_type(head.result_type)?;
    Some((t, head.is_error.and_then(RawJson::as_bool).unwrap_or(false)))
}

fn parse_result_type(v: Option<RawJson<'_>>) -> Option<ResultType> {
    let name = |s: &str| match s {
        "complete" => Some(ResultType::Complete),
        "input_required" => Some(ResultType::InputRequired),
        "task" => Some(ResultType::Task),
        _ => None,
    };
    let v = match v {
        None => return Some(ResultType::Complete),
        Some(v) => v,
    };
    // Every completed call passes here: the plain spelling first, compared as it stands in the
    // frame; unescaping is for the rare peer that escapes it (and for values no name matches).
    let plain = v.text().strip_prefix('"').and_then(|s| s.strip_suffix('"'));
    plain.and_then(name).or_else(|| v.as_str().as_deref().and_then(name))
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

/// What the server asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerRequestKind {
    /// `elicitation/create`, form mode: answer an `ElicitResult` whose `content` fits
    /// `params.requestedSchema` (see [`elicitation_defaults`](crate::elicitation_defaults)).
    ElicitationForm,
    /// `elicitation/create`, URL mode: `accept` means only that the user agreed to open it.
    ElicitationUrl,
    /// `sampling/createMessage`: answer a `CreateMessageResult`.
    Sampling,
    /// `roots/list`: answer `{"roots":[...]}`, each `uri` a `file://` URI (checked).
    Roots,
}

impl ServerRequestKind {
    /// The method the server used.
    pub fn method(self) -> &'static str {
        match self {
            Self::ElicitationForm | Self::ElicitationUrl => "elicitation/create",
            Self::Sampling => "sampling/createMessage",
            Self::Roots => "roots/list",
        }
    }

    /// The kind of a request by its method (and, for elicitation, its `params.mode`).
    pub(crate) fn of(method: &str, params: Option<RawJson<'_>>) -> Option<Self> {
        match method {
            // No mode is form (the 2025-06-18 shape); a mode that is neither form nor url is
            // one no client declares: no kind, which is refused (-32602), not taken for form.
            "elicitation/create" => match params.and_then(|p| p.get("mode")) {
                None => Some(Self::ElicitationForm),
                Some(mode) => match mode.as_str().as_deref() {
                    Some("form") => Some(Self::ElicitationForm),
                    Some("url") => Some(Self::ElicitationUrl),
                    _ => None,
                },
            },
            "sampling/createMessage" => Some(Self::Sampling),
            "roots/list" => Some(Self::Roots),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::json;

    /// An elicitation's kind by its mode: none or `form` is a form, `url` a URL; any other
    /// mode is no kind at all (it was taken for a form), which the engine refuses with -32602.
    #[test]
    fn elicitation_kinds_by_mode() {
        let kind = |params: &str| {
            ServerRequestKind::of(
                "elicitation/create",
                Some(json::parse(params.as_bytes()).unwrap()),
            )
        };
        assert_eq!(kind(r#"{"message":"m"}"#), Some(ServerRequestKind::ElicitationForm));
        assert_eq!(kind(r#"{"mode":"form"}"#), Some(ServerRequestKind::ElicitationForm));
        assert_eq!(kind(r#"{"mode":"url"}"#), Some(ServerRequestKind::ElicitationUrl));
        assert_eq!(kind(r#"{"mode":"bogus"}"#), None);
        assert_eq!(kind(r#"{"mode":7}"#), None);
        assert_eq!(
            ServerRequestKind::of("elicitation/create", None),
            Some(ServerRequestKind::ElicitationForm)
        );
    }

    #[test]
    fn result_type_missing_is_complete_and_unknown_is_invalid() {
        let rt = |s: &'static str| result_type(json::parse(s.as_bytes()).unwrap());
        assert_eq!(rt("{}"), Some(ResultType::Complete));
        assert_eq!(rt(r#"{"resultType":"complete"}"#), Some(ResultType::Complete));
        assert_eq!(rt(r#"{"resultType":"input_required"}"#), Some(ResultType::InputRequired));
        // Known, and taken only by a call that asked for a task (the engine checks).
        assert_eq!(rt(r#"{"resultType":"task"}"#), Some(ResultType::Task));
        assert_eq!(rt(r#"{"resultType":"tasks"}"#), None);
        assert_eq!(rt(r#"{"resultType":7}"#), None);
        // An escaped spelling reads as the name it spells; a quote inside does not match.
        assert_eq!(rt(r#"{"resultType":"comp\u006cete"}"#), Some(ResultType::Complete));
        assert_eq!(rt(r#"{"resultType":"ta\/sk"}"#), None);
        assert_eq!(rt(r#"{"resultType":"\"task\""}"#), None);
        let head =
            |s: &'static str| result_head(ResultHead::of(json::parse(s.as_bytes()).unwrap()));
        assert_eq!(head(r#"{"isError":true,"content":[]}"#), Some((ResultType::Complete, true)));
        assert_eq!(
            head(r#"{"content":[{"isError":true}],"resultType":"complete"}"#),
            Some((ResultType::Complete, false))
        );
        assert_eq!(head(r#"{"resultType":"x","isError":true}"#), None);
    }
}
