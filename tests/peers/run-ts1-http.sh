#!/usr/bin/env bash
# Start the TypeScript SDK v1 peer (ts1_server.mjs, 2025-11-25 only) on
# Streamable HTTP at http://127.0.0.1:PORT/mcp (bound to 127.0.0.1 only).
# Runs from the folder setup.sh installed into. exec: this process becomes the server.
set -euo pipefail
port=${1:?usage: run-ts1-http.sh PORT}
cd "$(dirname "${BASH_SOURCE[0]}")"
exec node ts1_server.mjs http "$port"
