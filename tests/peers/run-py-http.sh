#!/usr/bin/env bash
# Start the Python SDK v2 peer (py_server.py) on
# Streamable HTTP at http://127.0.0.1:PORT/mcp (bound to 127.0.0.1 only).
# Runs from the folder setup.sh installed into. exec: this process becomes the server.
set -euo pipefail
port=${1:?usage: run-py-http.sh PORT}
cd "$(dirname "${BASH_SOURCE[0]}")"
exec .venv/bin/python py_server.py http "$port"
