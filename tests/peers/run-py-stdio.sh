#!/usr/bin/env bash
# Start the Python SDK v2 peer (py_server.py) on stdio:
# newline-delimited JSON-RPC on stdin/stdout, logs on stderr; exits on stdin EOF.
# Runs from the folder setup.sh installed into. exec: this process becomes the server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec .venv/bin/python py_server.py stdio
