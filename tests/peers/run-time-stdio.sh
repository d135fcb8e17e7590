#!/usr/bin/env bash
# Start the reference time server (PyPI mcp-server-time) on stdio; pass --local-timezone TZ
# to fix the zone it takes as local.
# Runs from the folder setup.sh installed into. exec: this process becomes the server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec .venv/bin/python -m mcp_server_time "$@"
