"""A stdio MCP server that breaks the protocol on purpose, for capi/tests/c/api_test.c.

    python3 odd_server.py MODE

MODE `old`: `initialize` answers with a protocol version no client speaks.
MODE `odd`: a proper 2025-11-25 handshake, then `tools/call` answers with a result nested 200
levels deep, and `tools/list` returns the same `nextCursor` on every page. Anything else gets
a JSON-RPC "method not found" error.
"""
import json
import sys


def deep(levels):
    value = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def main():
    mode = sys.argv[1]
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message or "method" not in message:
            continue
        method = message["method"]
        result = None
        if method == "initialize":
            version = "1999-01-01" if mode == "old" else "2025-11-25"
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "odd", "version": "1"},
            }
        elif method == "tools/call":
            result = {"content": [], "structuredContent": deep(200)}
        elif method == "tools/list":
            result = {"tools": [], "nextCursor": "again"}
        if result is None:
            reply = {"error": {"code": -32601, "message": "method not found"}}
        else:
            reply = {"result": result}
        reply.update({"jsonrpc": "2.0", "id": message["id"]})
        print(json.dumps(reply), flush=True)


main()
