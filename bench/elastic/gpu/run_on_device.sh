#!/usr/bin/env bash
# Elastic jobs on a GPU machine (device): two peers on its GPU with
# --device cuda (the cuda backend; gradients all-reduced over the ring,
# device -> host -> ring -> device), the built-in MLP and CNN on
# Fashion-MNIST: steps/s at world 2, a kill -9 of one peer (the other
# steps again, alone), steps/s at world 1, the final test accuracy.
#
# Run it from a bundle beside peer, peerctl, libstarling_cuda.so, lib/
# (libcjson, libz) and data/fashion-mnist: bench/elastic/gpu/bundle.sh
# makes one in .gpu-elastic/ (carried to the device; results under $OUT).
set -u
G=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$G/lib SL_DATASETS=$G/data SL_CUDA_BACKEND=$G/libstarling_cuda.so
OUT=${OUT:-/tmp/elastic-gpu-out}
DEV=${DEV:-cuda}                       # (DEV=cpu: the same run on a machine without a GPU)
EPOCHS=${EPOCHS:-8}
KILL_AT=${KILL_AT:-500}      # the step after which p1 is killed
MODELS=${MODELS:-mlp:256,128 cnn:32,64}
mkdir -p "$OUT"
W=$(mktemp -d)
nvidia-smi -L 2>/dev/null || echo "no GPU: device $DEV"
FAST="--probe-interval 200 --probe-timeout 100 --suspicion-mult 3 --sync-interval 2000"
status() { "$G/peerctl" --peer "$W/$1" --timeout 3000 status "$2" --json 2>/dev/null; }
field() { status "$1" "$2" | python3 -c 'import json,sys
try: s=json.load(sys.stdin)
except Exception: print(""); sys.exit(0)
print(eval(sys.argv[1]))' "$3"; }
wait_for() { # wait_for SECS PEER JOB EXPR
    local end=$((SECONDS + $1))
    until [ "$(field "$2" "$3" "$4")" = True ]; do
        [ $SECONDS -ge $end ] && { echo "timed out: $4"; return 1; }
        sleep 0.2
    done
}
# steps/s by world size, from the job's loss curve (a point about 20
# times an epoch: step, loss, world, wall_ms), the first points of each
# world left out (its start)
rates() {
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
pts = r.get("curve", [])
out = {}
for w in (2, 1):
    seg = [p for p in pts if p[2] == w]
    seg = seg[2:] if len(seg) > 4 else seg
    if len(seg) >= 2 and seg[-1][3] > seg[0][3]:
        out[w] = (seg[-1][0] - seg[0][0]) / ((seg[-1][3] - seg[0][3]) / 1000.0)
print("steps/s: world 2 %.1f, world 1 %.1f" % (out.get(2, float("nan")), out.get(1, float("nan"))))' "$1"
}
for model in $MODELS; do
    rm -rf "$W"/p0 "$W"/p1
    "$G/peer" --name p0 --listen 127.0.0.1:21000 --data "$W/p0" --device "$DEV" $FAST >"$OUT/p0-${model%%:*}.log" 2>&1 &
    P0=$!
    "$G/peer" --name p1 --listen 127.0.0.1:21010 --join 127.0.0.1:21000 --data "$W/p1" --device "$DEV" $FAST >"$OUT/p1-${model%%:*}.log" 2>&1 &
    P1=$!
    cat >"$W/job.json" <<JSON
{"kind": "elastic", "name": "gpu-${model%%:*}", "nodes": {"min": 1, "max": 2},
 "trainer": {"type": "builtin", "model": "$model"}, "dataset": "fashion-mnist",
 "epochs": $EPOCHS, "global_batch": 256, "checkpoint_every": 500}
JSON
    sleep 2 # the peers join (a GPU machine's start: no condition to poll yet)
    JOB=$("$G/peerctl" --peer "$W/p0" submit "$W/job.json")
    echo "== $model job $JOB"
    wait_for 120 p0 "$JOB" 's["state"] == "running" and len(s["world"]) == 2 and s["step"] > '"$KILL_AT" || true
    T=$(date +%s%3N); kill -9 $P1; wait $P1 2>/dev/null
    wait_for 60 p0 "$JOB" 's["state"] == "running" and len(s["world"]) == 1' || true
    S=$(grep -E "ELASTIC-STEPPING" "$OUT/p0-${model%%:*}.log" | tail -1 | sed -E 's/.*wall_ms=([0-9]+).*/\1/')
    echo "kill -9 of p1 -> p0 stepping alone after $((S - T)) ms"
    wait_for 400 p0 "$JOB" 's["state"] == "done"' || true
    "$G/peerctl" --peer "$W/p0" results "$JOB" --json > "$OUT/results-${model%%:*}.json" 2>/dev/null
    rates "$OUT/results-${model%%:*}.json"
    echo "test acc: $(field p0 "$JOB" 's["metrics"]["epochs"][-1].get("test_acc")')"
    kill $P0; wait $P0 2>/dev/null
done
rm -rf "$W"
