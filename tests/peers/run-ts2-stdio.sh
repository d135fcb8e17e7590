#!/usr/bin/env bash
# Start the TypeScript SDK v2 peer (ts2_server.mjs) on stdio:
# newline-delimited JSON-RPC on stdin/stdout, logs on stderr; exits on stdin EOF.
# Runs from the folder setup.sh installed into. exec: this process becomes the server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec node ts2_server.mjs stdio
