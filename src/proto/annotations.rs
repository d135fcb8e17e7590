//! A tool definition's behaviour hints (`annotations`: spec, server/tools "Tool annotations").
//!
//! The hints are the server's word, not a guarantee: a host's authorization policy reads them
//! to decide what to ask about, never to decide what is safe to skip asking about when the
//! server is not trusted.

use crate::proto::json;

/// The behaviour hints of one tool definition. `None`: the definition did not say (or the
/// definition is not known: see [`ToolAnnotations::known`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolAnnotations {
    /// The definition was found (in the capability cache) and read.
    pub known: bool,
    /// `readOnlyHint`: the tool does not change its environment.
    pub read_only: Option<bool>,
    /// `destructiveHint`: an update may destroy or overwrite (meaningful when not read-only).
    pub destructive: Option<bool>,
    /// `idempotentHint`: calling again with the same arguments has no further effect.
    pub idempotent: Option<bool>,
    /// `openWorldHint`: the tool reaches entities outside a closed domain (the web, ...).
    pub open_world: Option<bool>,
}

impl ToolAnnotations {
    /// The hints of a tool definition (a JSON object with an `annotations` member). Anything
    /// malformed reads as "not said"; a definition that is not an object is not known.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // read by the host only
    pub(crate) fn from_definition(definition: &str) -> Self {
        let Ok(tool) = json::parse(definition.as_bytes()) else { return Self::default() };
        if tool.kind() != json::Kind::Object {
            return Self::default();
        }
        let mut out = Self { known: true, ..Self::default() };
        let Some(a) = tool.get("annotations") else { return out };
        for (key, value) in a.members() {
            let slot = if key.eq_str("readOnlyHint") {
                &mut out.read_only
            } else if key.eq_str("destructiveHint") {
                &mut out.destructive
            } else if key.eq_str("idempotentHint") {
                &mut out.idempotent
            } else if key.eq_str("openWorldHint") {
                &mut out.open_world
            } else {
                continue;
            };
            *slot = value.as_bool();
        }
        out
    }

    /// Whether a call may destroy or overwrite, as the spec's defaults read the hints: a tool
    /// is destructive unless it says it is read-only or says `destructiveHint: false`. An
    /// unknown definition is taken as destructive.
    pub fn is_destructive(&self) -> bool {
        if !self.known {
            return true;
        }
        self.read_only != Some(true) && self.destructive.unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_read_and_the_spec_defaults_apply() {
        let t = ToolAnnotations::from_definition(
            r#"{"name":"rm","annotations":{"destructiveHint":true,"openWorldHint":false,"x":1}}"#,
        );
        assert!(t.known);
        assert_eq!((t.read_only, t.destructive, t.idempotent), (None, Some(true), None));
        assert_eq!(t.open_world, Some(false));
        assert!(t.is_destructive());
        let ro = ToolAnnotations::from_definition(r#"{"annotations":{"readOnlyHint":true}}"#);
        assert!(!ro.is_destructive());
        let additive =
            ToolAnnotations::from_definition(r#"{"annotations":{"destructiveHint":false}}"#);
        assert!(!additive.is_destructive());
        let bare = ToolAnnotations::from_definition(r#"{"name":"x"}"#);
        assert!(bare.known && bare.is_destructive(), "no hints: the spec's default is destructive");
        let odd = ToolAnnotations::from_definition(r#"{"annotations":{"readOnlyHint":"yes"}}"#);
        assert_eq!(odd.read_only, None, "a hint that is not a boolean is not said");
        assert!(!ToolAnnotations::from_definition("[1]").known);
        assert!(!ToolAnnotations::from_definition("{").known);
        assert!(ToolAnnotations::default().is_destructive(), "unknown is destructive");
    }
}
