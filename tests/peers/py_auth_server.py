"""mcpoll test peer: the official MCP Python SDK v2 (PyPI `mcp` 2.3.0) as an OAuth-protected
resource server. The SDK's own auth layer answers a request without a valid bearer token with
401 and `WWW-Authenticate: Bearer ... resource_metadata=...`, and serves the Protected Resource
Metadata naming the authorization server; the test runs that authorization server itself.

    python py_auth_server.py PORT    Streamable HTTP at http://127.0.0.1:PORT/mcp (loopback only)

Environment: MCPOLL_AUTH_ISSUER (the authorization server's issuer URL, required) and
MCPOLL_AUTH_TOKEN (the one access token accepted; default `tok-sdk`).
"""
from __future__ import annotations

import os
import sys

from mcp.server import MCPServer
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings

HOST = "127.0.0.1"


class OneToken:
    """Accepts exactly one token, issued for this server."""

    def __init__(self, token: str, resource: str) -> None:
        self.token = token
        self.resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        if token != self.token:
            return None
        return AccessToken(token=token, client_id="id", scopes=[], resource=self.resource)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[1].isdigit():
        print("usage: py_auth_server.py PORT", file=sys.stderr)
        return 2
    port = int(argv[1])
    issuer = os.environ.get("MCPOLL_AUTH_ISSUER")
    if not issuer:
        print("MCPOLL_AUTH_ISSUER is not set", file=sys.stderr)
        return 2
    resource = f"http://{HOST}:{port}/mcp"
    server = MCPServer(
        "lab-py-auth",
        version="0.1.0",
        token_verifier=OneToken(os.environ.get("MCPOLL_AUTH_TOKEN", "tok-sdk"), resource),
        auth=AuthSettings(
            issuer_url=issuer, resource_server_url=resource, validate_token_resource=True
        ),
    )

    @server.tool(description="Echo back the `text` argument.")
    def echo(text: str) -> str:
        return text

    server.run("streamable-http", host=HOST, port=port)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
