#!/usr/bin/env bash
# Start the reference filesystem server (npm @modelcontextprotocol/server-filesystem) on stdio.
# Arguments: the allowed directories; with none it waits for the client's roots (roots/list).
# Runs from the folder setup.sh installed into. exec: this process becomes the server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec node node_modules/@modelcontextprotocol/server-filesystem/dist/index.js "$@"
