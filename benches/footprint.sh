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
# Peak RSS moves by about 100 kB from run to run (which file pages the kernel maps around a
# fault), so each figure is the median of five runs, with the range.
rss() { # binary calls
  for _ in 1 2 3 4 5; do
    "$1" --calls "$2" --rss "$demo" >/dev/null 2>calls.txt
    grep -q "$2 calls, 0 failed" calls.txt || { cat calls.txt >&2; exit 1; }
    tail -n 1 calls.txt | awk '{print $2}'
  done | sort -n | tr '\n' ' ' | awk '{printf "VmHWM median %s kB (%s to %s over 5 runs)", $3, $1, $5}'
}
for calls in 1 64; do
  echo "footprint calls_in_flight=$calls client $(rss ./minimal.stripped "$calls")"
done
/usr/bin/time -f '%M' -o rss.txt true
echo "footprint for scale: peak RSS of /bin/true is $(cat rss.txt) kB"
# And of a Rust hello world that reads its own VmHWM the same way (std alone).
cat >hello.rs <<'EOF'
fn main() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    println!("hi");
    eprintln!("{}", status.lines().find(|l| l.starts_with("VmHWM:")).unwrap_or("VmHWM: ?"));
}
EOF
rustc -O hello.rs -o hello 2>/dev/null
cp hello hello.stripped && strip hello.stripped
hello_rss=$(for _ in 1 2 3 4 5; do ./hello.stripped 2>&1 >/dev/null | awk '{print $2}'; done | sort -n \
  | tr '\n' ' ' | awk '{printf "median %s kB (%s to %s)", $3, $1, $5}')
echo "footprint for scale: a Rust hello world (rustc -O, stripped) is $(( $(stat -c %s hello.stripped) / 1024 )) KiB, VmHWM $hello_rss"

# Builds the program again in its own target folder and measures it like the default build.
# `label`: the prefix of its output lines; the profile and RUSTFLAGS come from the environment.
variant() { # label target-dir
  cargo build --release --locked -j 2 --quiet --target-dir "$2"
  cp "$2/release/minimal" "minimal.$1"
  strip "minimal.$1"
  echo "footprint $1 stripped_kib=$(( $(stat -c %s "minimal.$1") / 1024 ))"
  for calls in 1 64; do
    echo "footprint $1 calls_in_flight=$calls client $(rss "./minimal.$1" "$calls")"
  done
}

# What a size-tuned profile gives the same program (a user's choice, not the default):
# opt-level=s, lto, codegen-units=1, panic=abort.
export CARGO_PROFILE_RELEASE_OPT_LEVEL=s CARGO_PROFILE_RELEASE_LTO=true \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 CARGO_PROFILE_RELEASE_PANIC=abort
variant size_tuned target-small

# Both profiles linked statically (`-C target-feature=+crt-static`, glibc): no dynamic loader,
# and only the parts of libc the program uses are in the file, so far fewer file pages are
# mapped. Fine for a stdio client; glibc warns that a static program's host-name lookups
# (NSS) still need its shared libraries at run time, so an HTTP client resolving names would
# rather stay dynamic.
export RUSTFLAGS="-C target-feature=+crt-static"
variant static_size_tuned target-static-small
unset CARGO_PROFILE_RELEASE_OPT_LEVEL CARGO_PROFILE_RELEASE_LTO CARGO_PROFILE_RELEASE_CODEGEN_UNITS \
  CARGO_PROFILE_RELEASE_PANIC
variant static target-static
