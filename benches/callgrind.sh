#!/usr/bin/env bash
# bash benches/callgrind.sh [--check]      (needs valgrind)
#
# Instructions per sequential call through `Host`, client process only (valgrind follows
# neither the demo server child nor the HTTP server child), over stdio and over Streamable
# HTTP (keep-alive): one roundtrip bench phase alone (MCPOLL_BENCH_ONLY) under callgrind at
# 1,000 and 6,000 calls; the difference over 5,000 cancels start-up. The same for each floor (a
# pre-serialized request, blocking read). Then the top functions per call by exclusive
# instructions, each with the code inlined into it. The bench is built with line tables for
# the annotation.
#
# --check: compare with benches/instruction_budget.txt and fail when a transport's count is
# more than 10% over its budget (a regression guard for CI; callgrind counts instructions,
# not time, so a busy machine does not move them). The budget moves down as work lands.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
check=false
[ "${1:-}" = --check ] && check=true
# Line tables for the annotation only: the check reuses the plain bench build CI has made.
$check || export CARGO_PROFILE_BENCH_DEBUG=line-tables-only
bench=$(cargo bench --no-run --bench roundtrip --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*roundtrip[^"]*\)".*/\1/p' | tail -n 1)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
total() { grep -m1 '^summary:\|^totals:' "$1" | awk '{print $2}'; }
declare -A per_call
for phase in stdio-floor stdio http-floor http; do
  for n in 1000 6000; do
    MCPOLL_BENCH_ONLY=$phase MCPOLL_BENCH_ROUNDS=$n \
      valgrind --tool=callgrind --callgrind-out-file="$out/$phase.$n" "$bench" >/dev/null 2>&1
  done
  per_call[$phase]=$(( ($(total "$out/$phase.6000") - $(total "$out/$phase.1000")) / 5000 ))
  echo "callgrind $phase instructions_per_call=${per_call[$phase]}"
done
if $check; then
  failed=0
  while read -r transport budget; do
    case "$transport" in ''|'#'*) continue ;; esac
    got=${per_call[$transport]:?no such phase: $transport}
    limit=$(( budget * 110 / 100 ))
    if [ "$got" -gt "$limit" ]; then
      echo "instruction budget: $transport $got per call > $limit (budget $budget + 10%)"
      failed=1
    else
      echo "instruction budget: $transport $got per call (budget $budget, limit $limit): ok"
    fi
  done < benches/instruction_budget.txt
  exit $failed
fi
# Exclusive instructions of each function, summed over the source files its inlined code came
# from (callgrind_annotate lists `file:function` pairs, so one function that inlines the scanner
# shows as a dozen rows: its own file, core's `slice/index.rs`, `uint_macros.rs`, ...).
by_function() {
  callgrind_annotate --inclusive=no --threshold=100 --auto=no "$1" 2>/dev/null |
    grep -E '^ *[0-9,]+ \(' | grep -v 'PROGRAM TOTALS' |
    sed -E 's/ \[[^]]*\]$//; s/^ *([0-9,]+) \([^)]*\) +[^:]*:/\1 /'
}
for phase in stdio http; do
  echo "callgrind $phase: top functions by exclusive instructions per call (inlined code counted"
  echo "in the function it was inlined into; the 6,000-call run less the 1,000-call run, / 5,000)"
  awk -v calls=5000 '
    FNR == 1 { run++ }
    { n = $1; gsub(/,/, "", n); $1 = ""; sub(/^ /, "")
      if (run == 1) big[$0] += n; else small[$0] += n }
    END { for (f in big) printf "%8.0f  %s\n", (big[f] - small[f]) / calls, f }
  ' <(by_function "$out/$phase.6000") <(by_function "$out/$phase.1000") |
    sort -rn | awk 'NR <= 30'
done
