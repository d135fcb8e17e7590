#!/usr/bin/env bash
# Install mcpoll's MCP test peers: real servers built on the official SDKs at exact versions.
#
#   tests/peers/setup.sh [DEST]
#
# DEST defaults to target/peers under the repository root. It receives the three servers, their
# start scripts (run-*.sh), a Python venv in DEST/.venv (requirements.lock.txt: PyPI mcp 2.3.0,
# and the reference servers mcp-server-git and mcp-server-time 2026.10.19) and
# DEST/node_modules (npm ci from package-lock.json: @modelcontextprotocol/server 2.4.0,
# @modelcontextprotocol/node 2.1.2, @modelcontextprotocol/sdk 1.32.2, zod 4.6.7, and the
# reference servers @modelcontextprotocol/server-filesystem and server-memory 2026.8.31).
#
# Then it installs the official MCP conformance suite into target/conformance
# (tests/conformance/setup.sh).
#
# Needs python3 >= 3.10 (or $PYTHON), node >= 20 and npm. Running it again only refreshes the
# copied files: pip and npm are skipped while the installed versions match the lock files.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$src/../.." && pwd)
dest=${1:-$repo/target/peers}
start=$SECONDS

say() { printf 'peers: %s\n' "$*"; }
die() { printf 'peers: error: %s\n' "$*" >&2; exit 1; }

# --- toolchain -------------------------------------------------------------------------------
py=${PYTHON:-python3}
command -v "$py" >/dev/null 2>&1 || die "$py not found (need python >= 3.10; set PYTHON to choose one)"
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || die "$py is $("$py" -V 2>&1); need python >= 3.10"
command -v node >/dev/null 2>&1 || die "node not found (need node >= 20)"
command -v npm >/dev/null 2>&1 || die "npm not found"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
  || die "node is $(node --version); need node >= 20"

# --- files -----------------------------------------------------------------------------------
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
if [ "$dest" != "$src" ]; then
  install -m 0644 "$src/py_server.py" "$src/py_auth_server.py" "$src/ts1_server.mjs" \
    "$src/ts2_server.mjs" \
    "$src/package.json" "$src/package-lock.json" "$src/requirements.lock.txt" "$dest/"
  install -m 0755 "$src"/run-*.sh "$dest/"
fi
cd "$dest"

# --- python: .venv ---------------------------------------------------------------------------
# Exit 0 when every pin of requirements.lock.txt is installed at its exact version.
py_pins_ok() {
  [ -x .venv/bin/python ] || return 1
  .venv/bin/python - requirements.lock.txt <<'PY' >/dev/null 2>&1
import sys
from importlib import metadata
if sys.version_info < (3, 10):
    sys.exit(1)
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, _, want = line.partition("==")
    try:
        if metadata.version(name.strip()) != want.strip():
            sys.exit(1)
    except metadata.PackageNotFoundError:
        sys.exit(1)
PY
}

if py_pins_ok; then
  say "python venv up to date"
else
  if ! .venv/bin/python -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
    rm -rf .venv
    say "creating .venv with $("$py" -V 2>&1)"
    "$py" -m venv .venv
  fi
  say "pip install -r requirements.lock.txt"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
    -r requirements.lock.txt
  py_pins_ok || die "the venv does not match requirements.lock.txt after pip install"
fi

# --- node: node_modules ----------------------------------------------------------------------
stamp=node_modules/.mcpoll-peers-lock.json
# Exit 0 when node_modules came from this package-lock.json and the direct deps are at their pins.
node_ok() {
  [ -f "$stamp" ] && cmp -s package-lock.json "$stamp" || return 1
  node -e '
    const fs = require("fs");
    const deps = JSON.parse(fs.readFileSync("package.json", "utf8")).dependencies;
    for (const [name, want] of Object.entries(deps)) {
      const got = JSON.parse(fs.readFileSync(`node_modules/${name}/package.json`, "utf8")).version;
      if (got !== want) process.exit(1);
    }' >/dev/null 2>&1
}

if node_ok; then
  say "node_modules up to date"
else
  say "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json "$stamp"
  node_ok || die "node_modules does not match package.json after npm ci"
fi

# --- report ----------------------------------------------------------------------------------
for pkg in mcp mcp-server-git mcp-server-time; do
  say "python $pkg $(.venv/bin/python -c "from importlib import metadata as m; print(m.version('$pkg'))")"
done
for pkg in @modelcontextprotocol/server @modelcontextprotocol/node @modelcontextprotocol/sdk zod \
  @modelcontextprotocol/server-filesystem @modelcontextprotocol/server-memory; do
  say "npm $pkg $(node -p "require('./node_modules/$pkg/package.json').version")"
done
say "ready in $dest ($((SECONDS - start))s)"

# --- the official conformance suite (tests/conformance/run.sh) -------------------------------
"$src/../conformance/setup.sh"
