#!/usr/bin/env bash
# A profile of real peers while a cluster forms (bench/results/scale.md,
# "Starting 150-200 peers at once, again"): starts N peers through
# peers.py (BATCH at a time, 0: all at once), and 1.5 s after the first
# records the first 30 of them with perf (-F 499 -g) for SECONDS. Build
# BUILD with -DCMAKE_C_FLAGS="-fno-omit-frame-pointer -g" for the call
# graphs. Usage: bench/scale/profile.sh BUILD N BATCH SECONDS OUT
# then: perf report -i OUT.data --children --sort symbol
set -euo pipefail
build=$(cd "$1" && pwd); n=$2; batch=$3; secs=$4; out=$5
here=$(dirname "$0")
python3 "$here/peers.py" --build "$build" --sizes "$n" --settle 0 --rest 20 --writes 0 \
    --batch "$batch" >"$out.peers.log" 2>&1 &
py=$!
sleep 1.5
pids=$(pgrep -f "^$build/peer " | head -30 | paste -sd, -)
echo "pids $pids; load $(cat /proc/loadavg)" >"$out.info"
perf record -F 499 -g -o "$out.data" -p "$pids" -- sleep "$secs" >"$out.perf.log" 2>&1 || true
echo "load $(cat /proc/loadavg)" >>"$out.info"
wait "$py"
