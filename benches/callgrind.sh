#!/usr/bin/env bash
# bash benches/callgrind.sh      (needs valgrind)
#
# Instructions per sequential stdio call, client process only (valgrind does not follow the
# demo server child): the roundtrip bench's stdio phase alone (MCPOLL_BENCH_ONLY) under
# callgrind at 1,000 and 6,000 calls; the difference over 5,000 cancels start-up. The same for
# the floor (a pre-serialized line, blocking read). Then the top functions of the 6,000-call
# run by exclusive instructions. The bench is built with line tables for the annotation.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CARGO_PROFILE_BENCH_DEBUG=line-tables-only
bench=$(cargo bench --no-run --bench roundtrip --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*roundtrip[^"]*\)".*/\1/p' | tail -n 1)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
total() { grep -m1 '^summary:\|^totals:' "$1" | awk '{print $2}'; }
for phase in stdio-floor stdio; do
  for n in 1000 6000; do
    MCPOLL_BENCH_ONLY=$phase MCPOLL_BENCH_ROUNDS=$n \
      valgrind --tool=callgrind --callgrind-out-file="$out/$phase.$n" "$bench" >/dev/null 2>&1
  done
  per_call=$(( ($(total "$out/$phase.6000") - $(total "$out/$phase.1000")) / 5000 ))
  echo "callgrind $phase instructions_per_call=$per_call"
done
echo "callgrind stdio: top functions by exclusive instructions, 6,000 calls (share of the whole run)"
callgrind_annotate --inclusive=no "$out/stdio.6000" | grep -E '^ *[0-9,]+ \(' | grep -v 'PROGRAM TOTALS' |
  awk "NR <= 40" | sed -E 's/ \[[^]]*\]$//; s#/rustc/[0-9a-f]+/library/##; s#'"$root"'/##'
