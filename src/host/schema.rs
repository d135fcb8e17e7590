//! Checked tool calls (cargo feature `schema`): arguments against the tool's `inputSchema`
//! before anything is sent, `structuredContent` against its `outputSchema` when the result
//! comes. The compiled schemas are the core's ([`Client`](crate::Client)); what is here sends
//! the call and waits for it.

use std::fmt;
use std::time::Instant;

use serde_json::value::RawValue;

use crate::client::schema::SchemaCheck;
use crate::engine::{CallId, CallOptions};
use crate::error::RequestError;
use crate::schema::{SchemaError, SchemaViolation};

use super::{BlockingError, Host, OwnedResult, ServerId};

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

impl ToolCallError {
    /// A failed check of a call's arguments: nothing was sent.
    fn of_arguments(check: SchemaCheck) -> Self {
        match check {
            SchemaCheck::NotInCatalog => Self::NotInCatalog,
            SchemaCheck::Unusable(e) => Self::Schema(e),
            SchemaCheck::NotAnObject => Self::Call(RequestError::ArgumentsNotObject.into()),
            SchemaCheck::Violation(violation) => Self::Arguments(violation),
        }
    }

    /// A failed check of a call's result, which a mismatch keeps.
    fn of_result(check: SchemaCheck, result: OwnedResult) -> Self {
        match check {
            SchemaCheck::Violation(violation) => Self::Output { violation, result },
            other => Self::of_arguments(other),
        }
    }
}

impl Host {
    /// Sets the bounds for compiling and checking tool schemas; see
    /// [`Client::set_schema_limits`](crate::Client::set_schema_limits).
    pub fn set_schema_limits(&mut self, limits: crate::SchemaLimits) {
        self.client.set_schema_limits(limits);
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
        let checked = self.client.check_tool_arguments(Instant::now(), server, name, arguments);
        checked.map_err(ToolCallError::of_arguments)?;
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
        let checked = self.client.check_tool_result(Instant::now(), server, name, result);
        checked.map_err(|check| {
            let result = OwnedResult {
                json: result.to_owned(),
                is_error: false,
                result_type: crate::proto::mcp::ResultType::Complete,
            };
            ToolCallError::of_result(check, result)
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
        let cannot = |e| ToolCallError::Call(BlockingError::Io(e));
        self.poll.can_wait().map_err(cannot)?;
        let call = self.call_tool_checked(server, name, arguments, opts)?;
        let result = self.wait(server, call).map_err(ToolCallError::Call)?;
        match self.client.check_tool_result(Instant::now(), server, name, &result.json) {
            Ok(()) => Ok(result),
            Err(check) => Err(ToolCallError::of_result(check, result)),
        }
    }
}
