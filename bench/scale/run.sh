#!/usr/bin/env bash
# Instructions per tick of one peer at rest with N members (callgrind's
# count of run_ticks in sl-scale-tick, over K ticks of 10 ms), for
# bench/results/scale.md. Usage: bench/scale/run.sh [BUILD_DIR] [K] [N...]
set -euo pipefail
build=${1:-build}
k=${2:-12000}
shift $(( $# > 2 ? 2 : $# )) || true
ns=("$@")
[ ${#ns[@]} -gt 0 ] || ns=(50 150)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for n in "${ns[@]}"; do
    valgrind --tool=callgrind --toggle-collect=run_ticks --callgrind-out-file="$out/cg.$n" \
        "$build/sl-scale-tick" "$n" "$k" >"$out/log.$n" 2>&1
    ir=$(grep -o 'Collected : [0-9]*' "$out/log.$n" | awk '{print $3}')
    echo "N=$n ticks=$k Ir=$ir Ir/tick=$((ir / k)) ($(grep '^members' "$out/log.$n"))"
done
