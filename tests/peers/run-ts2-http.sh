#!/usr/bin/env bash
# Start the TypeScript SDK v2 peer (ts2_server.mjs) on
# Streamable HTTP at http://127.0.0.1:PORT/mcp (bound to 127.0.0.1 only).
# Runs from the folder setup.sh installed into. exec: this process becomes the server.
set -euo pipefail
port=${1:?usage: run-ts2-http.sh PORT}
cd "$(dirname "${BASH_SOURCE[0]}")"
exec node ts2_server.mjs http "$port"
