"""A stdio MCP server that breaks the protocol on purpose, for capi/tests/c/api_test.c.

    python3 odd_server.py MODE

MODE `old`: `initialize` answers with a protocol version no client speaks.
MODE `odd`: a proper 2025-11-25 handshake, then `tools/call` answers with a result nested 200
levels deep, and `tools/list` returns the same `nextCursor` on every page.
MODE `refuse`: `server/discover` is refused with -32022 although the version asked for is the
one it lists as supported.
MODE `modern`: a proper 2026-07-28 `server/discover`; `tools/list` never ends (a new cursor on
every page), and `tools/call` answers as the tool's name says:
  `bare`        `input_required` with neither input requests nor request state;
  `undeclared`  `input_required` asking for sampling;
  `rounds`      `input_required` with only request state, on every round;
  `ask`         `input_required` asking for one form elicitation;
  `flood`       `input_required` asking for 65 form elicitations at once;
  `task`        a task, already cancelled;
  `hang`        no answer, only a progress notification (when asked for progress).
MODE `once`: a proper 2026-07-28 `server/discover`; the first `tools/list` lists one tool,
fresh for 1 ms; every later one fails.
MODE `mute`: a proper 2026-07-28 `server/discover`, then silence.
Anything else gets a JSON-RPC "method not found" error.
"""
import json
import sys


def deep(levels):
    value = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def elicit(message):
    schema = {"type": "object", "properties": {}}
    return {"method": "elicitation/create",
            "params": {"message": message, "requestedSchema": schema}}


def modern_call(name):
    if name == "bare":
        return {"resultType": "input_required"}
    if name == "undeclared":
        sampling = {"method": "sampling/createMessage",
                    "params": {"messages": [], "maxTokens": 1}}
        return {"resultType": "input_required", "inputRequests": {"s": sampling}}
    if name == "rounds":
        return {"resultType": "input_required", "requestState": "again"}
    if name == "ask":
        return {"resultType": "input_required", "inputRequests": {"e": elicit("?")}}
    if name == "flood":
        asks = {f"e{i}": elicit(str(i)) for i in range(65)}
        return {"resultType": "input_required", "inputRequests": asks}
    if name == "task":
        return {"resultType": "task", "taskId": "t-1", "status": "cancelled"}
    return None


def main():
    mode = sys.argv[1]
    pages = 0
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message or "method" not in message:
            continue
        method = message["method"]
        params = message.get("params") or {}
        result = None
        error = {"code": -32601, "message": "method not found"}
        if mode == "refuse" and method == "server/discover":
            error = {"code": -32022, "message": "unsupported protocol version",
                     "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"}}
        elif mode in ("modern", "once", "mute") and method == "server/discover":
            result = {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                      "capabilities": {"tools": {}},
                      "serverInfo": {"name": "odd-" + mode, "version": "1"}}
        elif mode == "mute":
            continue
        elif mode == "once" and method == "tools/list":
            pages += 1
            if pages == 1:
                tool = {"name": "only", "inputSchema": {"type": "object"}}
                result = {"resultType": "complete", "tools": [tool], "ttlMs": 1}
        elif mode == "modern" and method == "tools/list":
            pages += 1
            result = {"resultType": "complete", "tools": [], "nextCursor": f"p{pages}"}
        elif mode == "modern" and method == "tools/call" and params.get("name") == "hang":
            token = (params.get("_meta") or {}).get("progressToken")
            if token is not None:
                progress = {"progressToken": token, "progress": 1}
                notification = {"jsonrpc": "2.0", "method": "notifications/progress",
                                "params": progress}
                print(json.dumps(notification), flush=True)
            continue
        elif mode == "modern" and method == "tools/call":
            result = modern_call(params.get("name"))
        elif mode in ("old", "odd") and method == "initialize":
            version = "1999-01-01" if mode == "old" else "2025-11-25"
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "odd", "version": "1"},
            }
        elif mode == "odd" and method == "tools/call":
            result = {"content": [], "structuredContent": deep(200)}
        elif mode == "odd" and method == "tools/list":
            result = {"tools": [], "nextCursor": "again"}
        if result is None:
            reply = {"error": error}
        else:
            reply = {"result": result}
        reply.update({"jsonrpc": "2.0", "id": message["id"]})
        print(json.dumps(reply), flush=True)


main()
