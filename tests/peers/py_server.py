"""mcpoll test peer on the official MCP Python SDK v2 (PyPI `mcp` 2.3.0).

Speaks 2026-07-28 and 2025-11-25 (the SDK picks the era per connection on stdio, per request on HTTP).

    python py_server.py stdio        newline-delimited JSON-RPC on stdin/stdout, logs on stderr
    python py_server.py http PORT    Streamable HTTP at http://127.0.0.1:PORT/mcp (loopback only)

The wire-visible names and texts match the recorded lab transcripts, which the Rust tests compare with.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Annotated

import anyio
from mcp_types import (
    CreateMessageResult,
    CreateMessageResultWithTools,
    ListRootsResult,
    NotificationParams,
    SamplingMessage,
    TextContent,
    Tool,
    ToolChoice,
)
from mcp_types import RequestParams as _RequestParams
from pydantic import BaseModel, ConfigDict, Field

from mcp.server import MCPServer
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, Elicit, ListRoots, Resolve, Sample
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

SERVER_NAME = "lab-py"
SERVER_VERSION = "0.1.0"
HOST = "127.0.0.1"

# LAB_TOOLS_TTL_MS sets the ttlMs of tools/list (unset: the SDK's 0, "do not cache"); the
# capability cache tests use it to get a cacheable catalog.
_tools_ttl_ms = int(os.environ.get("LAB_TOOLS_TTL_MS", "0"))
# LAB_DISCOVER_TTL_MS does the same for server/discover: a client may keep the era verdict that
# long (the restart tests use it).
_discover_ttl_ms = int(os.environ.get("LAB_DISCOVER_TTL_MS", "0"))
_cache_hints = {}
if _tools_ttl_ms:
    _cache_hints["tools/list"] = CacheHint(ttl_ms=_tools_ttl_ms)
if _discover_ttl_ms:
    _cache_hints["server/discover"] = CacheHint(ttl_ms=_discover_ttl_ms)


async def log_cancellations(ctx, call_next):
    # The dispatcher applies notifications/cancelled itself, then passes it down the middleware
    # chain: this line is the server's own record that the client's cancellation arrived.
    if ctx.method == "notifications/cancelled":
        log(f"[cancel] notifications/cancelled for request {(ctx.params or {}).get('requestId')}")
    return await call_next(ctx)


server = MCPServer(
    SERVER_NAME,
    version=SERVER_VERSION,
    cache_hints=_cache_hints or None,
    middleware=[log_cancellations],
)

# Process-wide state: write_note's notes, and how many extra_N tools bump_tools has added.
notes: list[str] = []
bumps = 0


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@server.tool(
    description="Echo back the `text` argument.",
    annotations=ToolAnnotations(readOnlyHint=True),
)
def echo(text: str) -> str:
    return text


class AddResult(BaseModel):
    sum: float


@server.tool(
    description="Add a and b; returns structuredContent {sum}.",
    annotations=ToolAnnotations(readOnlyHint=True),
)
def add(a: float, b: float) -> AddResult:
    return AddResult(sum=a + b)


@server.tool(
    description="Book 1 to 9 seats on a flight named like ABC-123 (pydantic writes the bounds "
    "into the input schema as `pattern`, `minimum` and `maximum`, and checks them itself).",
)
def book(
    flight: Annotated[str, Field(pattern=r"^[A-Z]{3}-[0-9]{3}$")],
    seats: Annotated[int, Field(ge=1, le=9)] = 1,
) -> str:
    return f"booked {seats} on {flight}"


@server.tool(description="Sleep `ms` milliseconds, reporting progress every 100 ms; cancellable.")
async def slow(ms: int, ctx: Context) -> str:
    # Cancellation arrives as an anyio cancellation at one of the awaits below.
    total = max(1, ms // 100)
    pause = ms / total / 1000.0
    try:
        for step in range(1, total + 1):
            await anyio.sleep(pause)
            log(f"[slow] step {step}/{total}")
            # The SDK only sends notifications/progress when the request carried a progressToken.
            await ctx.report_progress(step, total, f"step {step}/{total}")
    except anyio.get_cancelled_exc_class():
        log("[slow] cancelled")
        raise
    return f"slept {ms} ms"


@server.tool(description="Always fails with isError true.")
def fail() -> str:
    # ToolError becomes an isError result ("Error executing tool fail: ..."), not a JSON-RPC error.
    raise ToolError("this tool always fails")


@server.tool(
    description="Append a note to an in-memory list; returns the count (non-idempotent).",
    annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False),
)
def write_note(note: str) -> str:
    notes.append(note)
    return str(len(notes))


def make_extra(n: int):
    # The function name gives the schema titles (extraArguments / extraOutput).
    def extra() -> str:
        return f"extra tool {n}"

    return extra


@server.tool(description="Register a new tool at runtime and emit tools list_changed.")
async def bump_tools(ctx: Context) -> str:
    global bumps
    bumps += 1
    n = bumps
    server.add_tool(make_extra(n), name=f"extra_{n}", description=f"Tool added by bump_tools #{n}")
    # 2026-07-28: this only reaches subscriptions/listen streams.
    await ctx.notify_tools_changed()
    # 2025-11-25: the session notification has to be sent separately (stdio or sessionful HTTP).
    try:
        await ctx.session.send_tool_list_changed()
    except Exception as exc:  # noqa: BLE001 - a peer must not crash on this
        log(f"send_tool_list_changed failed: {exc!r}")
    return f"added extra_{n}"


# Server requests. One definition serves both eras: on 2025-11-25 the SDK sends each question as
# a JSON-RPC request mid-call; on 2026-07-28 it answers `input_required` and resumes on the retry.
class Name(BaseModel):
    name: str = "Ann"


class Confirm(BaseModel):
    ok: bool = True


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


# Depends on the name, so on 2026-07-28 it is a second round (carrying requestState).
def ask_confirm(name: Annotated[Name, Resolve(ask_name)]) -> Elicit[Confirm]:
    return Elicit(f"Greet {name.name}?", Confirm)


def ask_roots() -> ListRoots:
    return ListRoots()


def ask_model() -> Sample:
    hello = SamplingMessage(role="user", content=TextContent(type="text", text="Say hello"))
    return Sample([hello], max_tokens=16)


@server.tool(description="Elicit a name, then a confirmation (form mode); returns what was given.")
def ask(
    name: Annotated[Name, Resolve(ask_name)], confirm: Annotated[Confirm, Resolve(ask_confirm)]
) -> str:
    return f"name={name.name} ok={str(confirm.ok).lower()}"


@server.tool(description="List the client's roots; returns their URIs.")
def roots(listing: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    return ",".join(str(r.uri) for r in listing.roots)


@server.tool(description="Sample the client's model; returns the text it gave.")
def sample(reply: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    return reply.content.text if isinstance(reply.content, TextContent) else "?"


def ask_model_with_tools() -> Sample:
    question = SamplingMessage(role="user", content=TextContent(type="text", text="Weather in Oslo?"))
    weather = Tool(
        name="get_weather",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    return Sample([question], max_tokens=64, tools=[weather], tool_choice=ToolChoice(mode="auto"))


@server.tool(description="Sample with a get_weather tool offered; returns the tool uses the model chose.")
def sample_tools(reply: Annotated[CreateMessageResultWithTools, Resolve(ask_model_with_tools)]) -> str:
    uses = [c for c in reply.content_as_list if c.type == "tool_use"]
    return ";".join(f"{u.name} {json.dumps(u.input, sort_keys=True)}" for u in uses) + f" stop={reply.stop_reason}"


# 2025-11-25 only: the client says its roots changed. Counted so a test can see it arrived.
roots_changes = 0


async def on_roots_changed(_ctx, _params) -> None:
    global roots_changes
    roots_changes += 1
    log(f"notifications/roots/list_changed #{roots_changes}")


server._lowlevel_server.add_notification_handler(
    "notifications/roots/list_changed", NotificationParams, on_roots_changed
)


@server.tool(description="How many notifications/roots/list_changed this process received.")
def roots_changes_seen() -> str:
    return str(roots_changes)


@server.resource("lab://readme", name="readme", description="A static text resource", mime_type="text/plain")
def readme() -> str:
    return "MCP lab resource (python)"


@server.prompt(name="greet", description="Greet someone")
def greet(name: str) -> str:
    return f"Please greet {name} warmly."


# An extension method, the way a server adds one with the SDK (a low-level request handler):
# `lab/skills_list` answers with the extensions the request declared in its client
# capabilities and the params it got, after a notification of its own
# (`notifications/lab/skills_listed`) on the request's stream.
class _LabExtParams(_RequestParams):
    model_config = ConfigDict(extra="allow")


async def _lab_skills_list(ctx, params: _LabExtParams) -> dict:
    caps = ctx.session.client_capabilities
    declared = caps.model_dump(by_alias=True, exclude_none=True).get("extensions", {}) if caps else {}
    await ctx.session._request_outbound.notify("notifications/lab/skills_listed", {"count": 1})
    return {"skills": [{"name": "lab-skill"}], "declared": declared, "params": params.model_extra or {}}


server._lowlevel_server.add_request_handler("lab/skills_list", _LabExtParams, _lab_skills_list)


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
        return 0
    if mode == "http":
        if len(argv) < 3 or not argv[2].isdigit():
            log("usage: py_server.py http PORT")
            return 2
        server.run("streamable-http", host=HOST, port=int(argv[2]))
        return 0
    log(f"unknown mode {mode!r}; expected stdio or http PORT")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
