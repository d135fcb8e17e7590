//! Checked tool calls (cargo feature `schema`): arguments against the tool's `inputSchema`
//! before anything is sent, `structuredContent` against its `outputSchema` when the result
//! comes.
//!
//! The schemas come from the capability cache's definition of the tool (the catalog the host
//! listed); the call never lists by itself. Each definition is compiled once and kept under
//! its content hash, so a refreshed catalog whose tool did not change reuses the compiled
//! schema, and a changed tool gets a new one. A schema that fails to compile (remote `$ref`,
//! over the bounds) is remembered as failed too: a hostile definition costs one compile.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::catalog::hash::ContentHash;
use crate::engine::{CallId, CallOptions};
use crate::error::RequestError;
use crate::schema::{Schema, SchemaError, SchemaLimits, SchemaViolation};

use super::{BlockingError, Host, OwnedResult, ServerId};

/// Compiled definitions kept at most; past it the table starts over (the catalog bounds how
/// many tools there are, so this only trims definitions of tools long gone).
const MAX_COMPILED: usize = 1024;

/// The compiled schemas of one tool definition.
#[derive(Debug)]
struct ToolSchemas {
    input: Option<Schema>,
    output: Option<Schema>,
}

/// Compiled tool schemas, by the content hash of the tool's definition.
#[derive(Debug, Default)]
pub(super) struct SchemaCache {
    limits: SchemaLimits,
    by_hash: HashMap<ContentHash, Result<Arc<ToolSchemas>, SchemaError>>,
    compiles: u64,
}

fn compile_tool(definition: &str, limits: SchemaLimits) -> Result<ToolSchemas, SchemaError> {
    let members: HashMap<String, &RawValue> =
        serde_json::from_str(definition).map_err(|_| SchemaError::NotJson)?;
    let schema = |name| members.get(name).map(|s| Schema::compile(s.get(), limits)).transpose();
    Ok(ToolSchemas { input: schema("inputSchema")?, output: schema("outputSchema")? })
}

/// Why a checked tool call did not give a result that fits the tool's schemas.
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolCallError {
    /// The tool is not in the server's cached tool catalog nor in the last listing the host
    /// read (list it first, with [`Host::tool_catalog_blocking`]); nothing was sent.
    NotInCatalog,
    /// The tool's `inputSchema` or `outputSchema` could not be compiled (a remote `$ref`, past
    /// the bounds, malformed); nothing was sent.
    Schema(SchemaError),
    /// The arguments do not match `inputSchema`; nothing was sent.
    Arguments(SchemaViolation),
    /// The call completed, but its `structuredContent` does not match `outputSchema` (or is
    /// missing although the tool declares one). The result is kept.
    Output {
        /// Where and why it does not match.
        violation: SchemaViolation,
        /// The result as received.
        result: OwnedResult,
    },
    /// The call could not start, or failed.
    Call(BlockingError),
}

impl fmt::Display for ToolCallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotInCatalog => f.write_str("the tool is not in the listed tool catalog"),
            Self::Schema(e) => write!(f, "the tool's schema cannot be used: {e}"),
            Self::Arguments(v) => write!(f, "arguments do not match inputSchema at {v}"),
            Self::Output { violation, .. } => {
                write!(f, "structuredContent does not match outputSchema at {violation}")
            }
            Self::Call(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ToolCallError {}

impl From<RequestError> for ToolCallError {
    fn from(e: RequestError) -> Self {
        Self::Call(BlockingError::Request(e))
    }
}

impl Host {
    /// Sets the bounds for compiling and checking tool schemas (default
    /// [`SchemaLimits::default`]); schemas already compiled are compiled again.
    pub fn set_schema_limits(&mut self, limits: SchemaLimits) {
        self.schemas = SchemaCache { limits, ..SchemaCache::default() };
    }

    /// Tool definitions compiled so far (a cached definition is compiled once).
    pub fn schema_compiles(&self) -> u64 {
        self.schemas.compiles
    }

    /// Calls a tool after checking `arguments` against its `inputSchema` from the cached tool
    /// catalog. On a mismatch nothing is sent and the error names the first failing path.
    pub fn call_tool_checked(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &RawValue,
        opts: &CallOptions,
    ) -> Result<CallId, ToolCallError> {
        let schemas = self.tool_schemas(server, name)?;
        if let Some(input) = &schemas.input {
            let args: Value = serde_json::from_str(arguments.get())
                .map_err(|_| ToolCallError::Call(RequestError::ArgumentsNotObject.into()))?;
            input.validate(&args).map_err(ToolCallError::Arguments)?;
        }
        Ok(self.call_tool(server, name, arguments, opts)?)
    }

    /// Checks a `tools/call` result of tool `name` against its `outputSchema` from the cached
    /// catalog: `structuredContent` must be present and match. Results with `isError: true`
    /// and tools without an `outputSchema` pass.
    pub fn check_tool_result(
        &mut self,
        server: ServerId,
        name: &str,
        result: &str,
    ) -> Result<(), ToolCallError> {
        let schemas = self.tool_schemas(server, name)?;
        let Some(output) = &schemas.output else { return Ok(()) };
        let no_result = || SchemaViolation {
            pointer: String::new(),
            reason: "the result is not a JSON object",
            budget: false,
        };
        let outcome = match serde_json::from_str::<Value>(result) {
            Ok(Value::Object(r)) if r.get("isError") == Some(&Value::Bool(true)) => Ok(()),
            Ok(Value::Object(r)) => match r.get("structuredContent") {
                Some(content) => output.validate(content),
                None => Err(SchemaViolation {
                    pointer: String::new(),
                    reason: "structuredContent: missing although the tool has an outputSchema",
                    budget: false,
                }),
            },
            _ => Err(no_result()),
        };
        outcome.map_err(|violation| ToolCallError::Output {
            violation,
            result: OwnedResult {
                json: result.to_owned(),
                is_error: false,
                result_type: crate::proto::mcp::ResultType::Complete,
            },
        })
    }

    /// [`call_tool_checked`](Self::call_tool_checked), then waits for the result and checks
    /// it with [`check_tool_result`](Self::check_tool_result).
    pub fn call_tool_checked_blocking(
        &mut self,
        server: ServerId,
        name: &str,
        arguments: &RawValue,
        opts: &CallOptions,
    ) -> Result<OwnedResult, ToolCallError> {
        let call = self.call_tool_checked(server, name, arguments, opts)?;
        let result = self.wait(server, call).map_err(ToolCallError::Call)?;
        match self.check_tool_result(server, name, &result.json) {
            Ok(()) => Ok(result),
            Err(ToolCallError::Output { violation, .. }) => {
                Err(ToolCallError::Output { violation, result })
            }
            Err(e) => Err(e),
        }
    }

    /// The tool's compiled schemas: from the table when its definition was seen before (no
    /// copy, no parse), else compiled now and kept.
    fn tool_schemas(
        &mut self,
        server: ServerId,
        name: &str,
    ) -> Result<Arc<ToolSchemas>, ToolCallError> {
        let hash = self
            .client
            .listed_tool(std::time::Instant::now(), server, name)
            .ok_or(ToolCallError::NotInCatalog)?
            .hash();
        if let Some(known) = self.schemas.by_hash.get(&hash) {
            return known.clone().map_err(ToolCallError::Schema);
        }
        let definition = self
            .client
            .listed_tool(std::time::Instant::now(), server, name)
            .map(|i| i.json().to_owned());
        let definition = definition.ok_or(ToolCallError::NotInCatalog)?;
        let cache = &mut self.schemas;
        if cache.by_hash.len() >= MAX_COMPILED {
            cache.by_hash.clear();
        }
        cache.compiles += 1;
        let compiled = compile_tool(&definition, cache.limits).map(Arc::new);
        cache.by_hash.insert(hash, compiled.clone());
        compiled.map_err(ToolCallError::Schema)
    }
}
