//! The core's compiled tool schemas (cargo feature `schema`): what a checked tool call checks
//! its arguments and its result against.
//!
//! The schemas come from the capability cache's definition of the tool (the catalog the host
//! listed); a check never lists by itself. Each definition is compiled once and kept under
//! its content hash, so a refreshed catalog whose tool did not change reuses the compiled
//! schema, and a changed tool gets a new one. A schema that fails to compile (remote `$ref`,
//! over the bounds) is remembered as failed too: a hostile definition costs one compile.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::catalog::hash::ContentHash;
use crate::schema::{Schema, SchemaError, SchemaLimits, SchemaViolation};

use super::{Client, ServerId};

/// Compiled definitions kept at most; past it the table starts over (the catalog bounds how
/// many tools there are, so this only trims definitions of tools long gone).
const MAX_COMPILED: usize = 1024;

/// Compiled schema nodes kept at most, all definitions together; past it the table starts
/// over too. A node can weigh half a kilobyte, and a definition 10,000 nodes (the default
/// limit): by count alone, a server that changes a large tool at each refresh could make the
/// table gigabytes.
const MAX_COMPILED_NODES: usize = 100_000;

/// The compiled schemas of one tool definition.
#[derive(Debug)]
struct ToolSchemas {
    input: Option<Schema>,
    output: Option<Schema>,
}

/// Compiled tool schemas, by the content hash of the tool's definition.
#[derive(Debug, Default)]
pub(crate) struct SchemaCache {
    limits: SchemaLimits,
    by_hash: HashMap<ContentHash, Result<Arc<ToolSchemas>, SchemaError>>,
    /// The nodes of every schema in `by_hash`.
    nodes: usize,
    compiles: u64,
}

/// Why a tool's arguments or result did not pass its schemas.
#[derive(Debug)]
pub(crate) enum SchemaCheck {
    /// The tool is in neither the cached catalog nor the last listing the host read.
    NotInCatalog,
    /// A schema of the tool could not be compiled.
    Unusable(SchemaError),
    /// The arguments are not a JSON object.
    NotAnObject,
    /// The value does not match the schema.
    Violation(SchemaViolation),
}

impl SchemaCache {
    /// The nodes of every schema kept, counted afresh.
    #[cfg(test)]
    pub(crate) fn kept_nodes(&self) -> usize {
        self.by_hash.values().filter_map(|t| t.as_ref().ok()).map(|t| t.nodes()).sum()
    }
}

impl ToolSchemas {
    fn nodes(&self) -> usize {
        [&self.input, &self.output].into_iter().flatten().map(Schema::node_count).sum()
    }
}

fn compile_tool(definition: &str, limits: SchemaLimits) -> Result<ToolSchemas, SchemaError> {
    let members: HashMap<String, &RawValue> =
        serde_json::from_str(definition).map_err(|_| SchemaError::NotJson)?;
    let schema = |name| members.get(name).map(|s| Schema::compile(s.get(), limits)).transpose();
    Ok(ToolSchemas { input: schema("inputSchema")?, output: schema("outputSchema")? })
}

impl Client {
    /// Sets the bounds for compiling and checking tool schemas (default
    /// [`SchemaLimits::default`]); schemas already compiled are compiled again.
    pub fn set_schema_limits(&mut self, limits: SchemaLimits) {
        self.schemas = SchemaCache { limits, ..SchemaCache::default() };
    }

    /// Tool definitions compiled so far (a cached definition is compiled once).
    pub fn schema_compiles(&self) -> u64 {
        self.schemas.compiles
    }

    /// Checks `arguments` against the `inputSchema` of tool `name` on `server`, as the cache
    /// knows it at `now`. A tool without one passes.
    pub(crate) fn check_tool_arguments(
        &mut self,
        now: Instant,
        server: ServerId,
        name: &str,
        arguments: &RawValue,
    ) -> Result<(), SchemaCheck> {
        let schemas = self.tool_schemas(now, server, name)?;
        let Some(input) = &schemas.input else { return Ok(()) };
        let args: Value =
            serde_json::from_str(arguments.get()).map_err(|_| SchemaCheck::NotAnObject)?;
        input.validate(&args).map_err(SchemaCheck::Violation)
    }

    /// Checks a `tools/call` result of tool `name` against its `outputSchema`:
    /// `structuredContent` must be present and match. Results with `isError: true` and tools
    /// without an `outputSchema` pass.
    pub(crate) fn check_tool_result(
        &mut self,
        now: Instant,
        server: ServerId,
        name: &str,
        result: &str,
    ) -> Result<(), SchemaCheck> {
        let schemas = self.tool_schemas(now, server, name)?;
        let Some(output) = &schemas.output else { return Ok(()) };
        let violation = |reason| SchemaViolation { pointer: String::new(), reason, budget: false };
        let outcome = match serde_json::from_str::<Value>(result) {
            Ok(Value::Object(r)) if r.get("isError") == Some(&Value::Bool(true)) => Ok(()),
            Ok(Value::Object(r)) => match r.get("structuredContent") {
                Some(content) => output.validate(content),
                None => Err(violation(
                    "structuredContent: missing although the tool has an outputSchema",
                )),
            },
            _ => Err(violation("the result is not a JSON object")),
        };
        outcome.map_err(SchemaCheck::Violation)
    }

    /// The tool's compiled schemas: from the table when its definition was seen before (no
    /// copy, no parse), else compiled now and kept.
    fn tool_schemas(
        &mut self,
        now: Instant,
        server: ServerId,
        name: &str,
    ) -> Result<Arc<ToolSchemas>, SchemaCheck> {
        let hash = self.listed_tool(now, server, name).ok_or(SchemaCheck::NotInCatalog)?.hash();
        if let Some(known) = self.schemas.by_hash.get(&hash) {
            return known.clone().map_err(SchemaCheck::Unusable);
        }
        let definition = self.listed_tool(now, server, name).map(|i| i.json().to_owned());
        let definition = definition.ok_or(SchemaCheck::NotInCatalog)?;
        let cache = &mut self.schemas;
        cache.compiles += 1;
        let compiled = compile_tool(&definition, cache.limits).map(Arc::new);
        let nodes = compiled.as_ref().map_or(0, |t| t.nodes());
        if cache.by_hash.len() >= MAX_COMPILED || cache.nodes + nodes > MAX_COMPILED_NODES {
            cache.by_hash.clear();
            cache.nodes = 0;
        }
        cache.nodes += nodes;
        cache.by_hash.insert(hash, compiled.clone());
        compiled.map_err(SchemaCheck::Unusable)
    }
}
