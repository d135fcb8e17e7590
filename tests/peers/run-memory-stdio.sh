#!/usr/bin/env bash
# Start the reference knowledge-graph server (npm @modelcontextprotocol/server-memory) on stdio.
# It keeps its graph in MEMORY_FILE_PATH (set it: the default is a file inside node_modules).
# Runs from the folder setup.sh installed into. exec: this process becomes the server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec node node_modules/@modelcontextprotocol/server-memory/dist/index.js "$@"
