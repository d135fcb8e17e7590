#!/usr/bin/env bash
# bash benches/footprint.sh      (run it while nothing else builds: it times a cold build)
#
# The footprint of a minimal stdio-only client: examples/minimal.rs built as a crate of its own
# that depends on mcpoll with `default-features = false, features = ["stdio"]`, the way a
# user's binary would (an example inside this package would also build the dev-dependencies).
# Prints the crates in its tree, the cold release build time (2 jobs, a fresh target folder,
# sources already downloaded), the stripped binary size, and its peak RSS with one demo server
# and 64 calls in flight.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/src"
cp "$root/examples/minimal.rs" "$scratch/src/main.rs"
cp "$root/Cargo.lock" "$scratch/Cargo.lock"
cat >"$scratch/Cargo.toml" <<EOF
[package]
name = "minimal"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
mcpoll = { path = "$root", default-features = false, features = ["stdio"] }
serde_json = { version = "1", features = ["raw_value"] }

[workspace]
EOF

cd "$scratch"
crates=$(cargo tree -e normal --prefix none | sed 's/ (\*)//' | sort -u)
echo "footprint crates_in_tree=$(echo "$crates" | wc -l) (the binary and mcpoll included):" $(echo "$crates" | cut -d' ' -f1)
start=$(date +%s.%N)
cargo build --release --locked -j 2 --quiet
end=$(date +%s.%N)
bin=target/release/minimal
cp "$bin" minimal.stripped
strip minimal.stripped
echo "footprint cold_release_build_s=$(echo "$end - $start" | bc) jobs=2"
echo "footprint unstripped_bytes=$(stat -c %s "$bin") stripped_bytes=$(stat -c %s minimal.stripped) stripped_kib=$(( $(stat -c %s minimal.stripped) / 1024 ))"

(cd "$root" && cargo build --quiet --release -p mcpoll-demo-server)
demo="$root/target/release/demo_server"
for calls in 1 64; do
  ./minimal.stripped --calls "$calls" --rss "$demo" >/dev/null 2>calls.txt
  echo "footprint calls_in_flight=$calls client $(tail -n 1 calls.txt) ($(tail -n 2 calls.txt | head -n 1))"
done
/usr/bin/time -f '%M' -o rss.txt true
echo "footprint for scale: peak RSS of /bin/true is $(cat rss.txt) kB"

# What a size-tuned profile gives the same program (a user's choice, not the default).
export CARGO_PROFILE_RELEASE_OPT_LEVEL=s CARGO_PROFILE_RELEASE_LTO=true \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 CARGO_PROFILE_RELEASE_PANIC=abort
cargo build --release --locked -j 2 --quiet --target-dir target-small
cp target-small/release/minimal minimal.small
strip minimal.small
echo "footprint size_tuned_stripped_kib=$(( $(stat -c %s minimal.small) / 1024 )) (opt-level=s, lto, codegen-units=1, panic=abort)"
