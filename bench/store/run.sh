#!/bin/sh
# Builds the library in release mode and runs the store benchmarks
# (bench/results/store.md). Usage: bench/store/run.sh [N] (default 10^6).
set -e
cd "$(dirname "$0")/../.."
B=${SL_BENCH_BUILD:-build-bench}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$B" starling >/dev/null
cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/store/bench_store.c "$B/src/libstarling.a" \
  "$B/src/libstarling_nn.a" "$B/src/libstarling_base.a" \
  $(pkg-config --libs libsodium msgpack zlib) -lm -o "$B/bench_store"
N=${1:-1000000}
for mode in merge sync memory; do "$B/bench_store" $mode "$N"; done
"$B/bench_store" restart "$N" "${TMPDIR:-/tmp}/sl-bench-store-$$"
