#!/usr/bin/env bash
# Start the reference git server (PyPI mcp-server-git) on stdio; pass --repository PATH.
# Runs from the folder setup.sh installed into. exec: this process becomes the server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec .venv/bin/python -m mcp_server_git "$@"
