#!/usr/bin/env bash
# Start the TypeScript SDK v1 peer (ts1_server.mjs, 2025-11-25 only) on stdio:
# newline-delimited JSON-RPC on stdin/stdout, logs on stderr; exits on stdin EOF.
# Runs from the folder setup.sh installed into. exec: this process becomes the server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec node ts1_server.mjs stdio
