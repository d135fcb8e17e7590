//! JSON Schema validation of tool arguments, tool results and elicitation answers (cargo
//! feature `schema`).
//!
//! A small validator of the keywords MCP tool schemas use, written here rather than taken from
//! the `jsonschema` crate: that crate brings regex engines, URL and HTTP resolution machinery
//! and dozens of transitive crates into a library whose whole tree is 16 crates, while tool
//! schemas use a handful of keywords. The one engine it does take is `regex-lite`, for
//! `pattern` and `patternProperties`: a crate with no dependencies of its own whose searches
//! take time linear in the text. A schema is compiled once (see [`Schema::compile`]) into a
//! flat node table and then checked against any number of instances.
//!
//! # Keywords
//!
//! Checked: `type`, `enum`, `const`, `properties`, `required`, `additionalProperties`,
//! `minProperties`, `maxProperties`, `items` (2020-12, and the draft-07 array form as a
//! prefix), `prefixItems`, `minItems`, `maxItems`, `uniqueItems`, `minimum`, `maximum`,
//! `exclusiveMinimum`, `exclusiveMaximum` (number form; the draft-04 boolean form is
//! ignored), `multipleOf`, `minLength`, `maxLength` (counted in Unicode code points),
//! `anyOf`, `oneOf`, `allOf`, `not`, `if`/`then`/`else`, `contains` with `minContains` and
//! `maxContains`, `propertyNames`, `dependentRequired`, `dependentSchemas` (and draft-07's
//! `dependencies`, either form), `pattern` and `patternProperties` (see below),
//! `unevaluatedProperties` and `unevaluatedItems` in a schema with no in-place subschema
//! (`allOf`, `anyOf`, `oneOf`, `if`, `$ref`, `dependentSchemas`, `contains`), where they see
//! what `additionalProperties` and `items` would; `$ref` to a local JSON pointer (`#` or
//! `#/...`, into `$defs`, `definitions` or anywhere else in the same document) or to a plain
//! name (`#name`, the schema whose `$anchor` it is, else whose `$dynamicAnchor`, anywhere in the
//! document: `$id` does not scope it), and boolean schemas.
//!
//! Ignored, so an instance is never refused for them: `format` (an annotation only, 2020-12's
//! default), `unevaluated*` beside an in-place subschema (which members that evaluated is not
//! tracked), `$dynamicRef`, `$id`, annotations and any unknown keyword; and a
//! pattern that regex-lite cannot read (lookaround, backreferences, `\p{..}`), or past the
//! bounds (128 patterns per schema, 32 KiB compiled each), together with
//! `additionalProperties` beside a `patternProperties` pattern so ignored, since which members
//! are additional depends on it.
//!
//! Patterns are ECMA-262's in JSON Schema, and regex-lite reads Rust's regex syntax, which is
//! close to it. The differences a schema could notice: `\d`, `\w`, `\s` and `\b` are ASCII
//! here (ECMA-262's `\s` also takes Unicode spaces), `.` also matches `\r`, and `&&`, `--`
//! and `~~` inside a class are set operations, not characters.
//!
//! Sibling keywords next to `$ref` are checked too (2020-12 behaviour).
//!
//! # Refused schemas
//!
//! A `$ref` to another document (`https://...`, `other.json#/x`) is refused with
//! [`SchemaError::RemoteRef`]: nothing is ever fetched; one to a pointer or a name the document
//! does not have, with [`SchemaError::UnresolvedRef`]. A schema larger than
//! [`SchemaLimits::max_bytes`], nested deeper than `max_depth` or with more than
//! `max_nodes` subschemas is refused at compile time; a validation that evaluates more than
//! `max_steps` keywords or recurses deeper than `max_depth` through `$ref` stops with
//! [`SchemaViolation::budget`] set, so a hostile schema bounds stack and CPU.

mod compile;
mod validate;

use std::fmt;

use serde_json::Value;

/// Bounds on one schema and on one validation against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaLimits {
    /// Largest schema text, in bytes (default 256 KiB).
    pub max_bytes: usize,
    /// Deepest nesting of subschemas, and deepest chain of `$ref` hops during validation
    /// (default 64).
    pub max_depth: usize,
    /// Most subschemas in one compiled schema (default 10,000).
    pub max_nodes: usize,
    /// Most keywords evaluated by one validation (default 100,000).
    pub max_steps: u64,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        Self { max_bytes: 256 * 1024, max_depth: 64, max_nodes: 10_000, max_steps: 100_000 }
    }
}

/// A compiled JSON Schema: compile once, validate many times.
#[derive(Debug, Clone)]
pub struct Schema(compile::Schema);

impl Schema {
    /// Compiles a schema from its JSON text, within `limits`.
    pub fn compile(text: &str, limits: SchemaLimits) -> Result<Self, SchemaError> {
        if text.len() > limits.max_bytes {
            return Err(SchemaError::TooLarge);
        }
        let value: Value = serde_json::from_str(text).map_err(|_| SchemaError::NotJson)?;
        Self::compile_value(&value, limits)
    }

    /// Compiles a schema already parsed.
    pub fn compile_value(value: &Value, limits: SchemaLimits) -> Result<Self, SchemaError> {
        compile::Schema::compile(value, limits).map(Schema)
    }

    /// The nodes the compiled schema holds, a measure of its memory.
    pub(crate) fn node_count(&self) -> usize {
        self.0.nodes.len()
    }

    /// Checks an instance; the error names the first failing location as a JSON pointer.
    pub fn validate(&self, instance: &Value) -> Result<(), SchemaViolation> {
        self.0.validate(instance)
    }

    /// Checks an instance given as JSON text.
    pub fn validate_str(&self, instance: &str) -> Result<(), SchemaViolation> {
        match serde_json::from_str::<Value>(instance) {
            Ok(v) => self.validate(&v),
            Err(_) => Err(SchemaViolation::new(String::new(), "not valid JSON")),
        }
    }
}

/// Why a schema could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaError {
    /// The schema text is not JSON.
    NotJson,
    /// The schema text is larger than `SchemaLimits::max_bytes`.
    TooLarge,
    /// Subschemas nest deeper than `SchemaLimits::max_depth`.
    TooDeep,
    /// More subschemas than `SchemaLimits::max_nodes`.
    TooManyNodes,
    /// A `$ref` that is not a local JSON pointer; it is never fetched.
    RemoteRef(String),
    /// A local `$ref` whose pointer leads nowhere.
    UnresolvedRef(String),
    /// A schema (or subschema, at this JSON pointer into the schema) is neither an object nor
    /// a boolean, or a keyword has the wrong shape.
    Malformed {
        /// Where, as a JSON pointer into the schema.
        at: String,
        /// What is wrong.
        reason: &'static str,
    },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotJson => f.write_str("the schema is not JSON"),
            Self::TooLarge => f.write_str("the schema is larger than allowed"),
            Self::TooDeep => f.write_str("the schema nests deeper than allowed"),
            Self::TooManyNodes => f.write_str("the schema has more subschemas than allowed"),
            Self::RemoteRef(r) => write!(f, "$ref {r:?} is not a local pointer (never fetched)"),
            Self::UnresolvedRef(r) => write!(f, "$ref {r:?} points nowhere in the schema"),
            Self::Malformed { at, reason } => write!(f, "malformed schema at {at:?}: {reason}"),
        }
    }
}

impl std::error::Error for SchemaError {}

/// An instance that does not match its schema, or a validation stopped by its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// The JSON pointer of the first failing location in the instance (`""` is the whole
    /// instance, `/items/0/name` a member of an element).
    pub pointer: String,
    /// The keyword or reason that failed.
    pub reason: &'static str,
    /// `true` when validation stopped because it hit `max_steps` or `max_depth`, not because
    /// the instance is known to be wrong.
    pub budget: bool,
}

impl SchemaViolation {
    fn new(pointer: String, reason: &'static str) -> Self {
        Self { pointer, reason, budget: false }
    }
}

impl fmt::Display for SchemaViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() { "(root)" } else { self.pointer.as_str() };
        write!(f, "{at}: {}", self.reason)
    }
}

impl std::error::Error for SchemaViolation {}

#[cfg(test)]
mod tests;
