#!/usr/bin/env bash
# bash benches/all.sh 2>&1 | tee figures.txt
#
# Every figure in benches/README.md, in one run, each step headed by its command and the
# machine's load (the machine may be shared). Needs valgrind and strace.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
run() { printf '\n$ %s\n# %s\n' "$*" "$(uptime)"; "$@"; }
run taskset -c 0 cargo bench --bench roundtrip
run taskset -c 0 cargo bench --bench timers
run taskset -c 0 cargo bench --bench engine
run taskset -c 0 cargo bench --bench catalog
run bash benches/callgrind.sh
run bash benches/footprint.sh
run cargo test --test soak -- --ignored --nocapture
run env MCPOLL_SOAK_CALLS=1000000 MCPOLL_SOAK_KILL_EVERY=10000 \
  cargo test --release --test soak -- --ignored --nocapture

cargo build --quiet --example game_loop
cargo build --quiet --release --no-default-features --features stdio --example minimal
cargo build --quiet --release -p mcpoll-demo-server
trace=$(mktemp)
trap 'rm -f "$trace"' EXIT
run strace -f -o "$trace" target/debug/examples/game_loop >/dev/null
main=$(head -n 1 "$trace" | cut -d' ' -f1)
echo "game_loop main thread, 120 frames: system calls by name"
grep "^$main " "$trace" | grep -v resumed | sed -E 's/^[0-9]+ +//; s/\(.*//' | sort | uniq -c | sort -rn
echo "game_loop epoll_wait timeouts (ms): $(grep "^$main .*epoll_wait(" "$trace" | grep -o ', [-0-9]*)' | sort | uniq -c | tr -s ' ')"
run strace -T -o "$trace" target/release/examples/minimal --idle-ms 1000 target/release/demo_server >/dev/null
echo "minimal, idle 1 s with nothing pending (a 60 Hz loop polling only when not Host::is_idle): the system calls between the last call's end and close"
sed -n '/ failed\\n/,/EPOLL_CTL_DEL/p' "$trace" | tail -n +2 | sed -E 's/\(.*//' | sort | uniq -c
