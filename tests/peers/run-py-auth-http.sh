#!/usr/bin/env bash
# Start the Python SDK v2 peer as an OAuth-protected resource (py_auth_server.py) on
# Streamable HTTP at http://127.0.0.1:PORT/mcp (bound to 127.0.0.1 only). Needs
# MCPOLL_AUTH_ISSUER in the environment. exec: this process becomes the server.
set -euo pipefail
port=${1:?usage: run-py-auth-http.sh PORT}
cd "$(dirname "${BASH_SOURCE[0]}")"
exec .venv/bin/python py_auth_server.py "$port"
