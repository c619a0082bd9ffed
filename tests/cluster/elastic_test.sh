#!/usr/bin/env bash
# An elastic job on real peers (docs/elastic.md): the built-in MLP on
# Fashion-MNIST, trained data-parallel by 3 peers with min 2. While it
# trains: a member is killed with kill -9 (the survivors go on from their
# own state, no checkpoint), a fresh peer joins and is taken into the next
# world (it receives the state from a member), and the round leader is
# killed. The job must end with every epoch trained, and its test
# accuracy within 0.5 points of the same job run without faults. Bad job
# files are refused with the field named.
. "$(dirname "$0")/lib.sh"
cluster_init
[ -d /usr/share/datasets/fashion-mnist ] ||
    [ -n "${SL_DATASETS:-}" ] || skip "Debian's dataset-fashion-mnist is needed (tools/setup)"

job_file() { # job_file NAME: the job, written to $CLUSTER_DIR/NAME.json
    cat >"$CLUSTER_DIR/$1.json" <<JSON
{
  "kind": "elastic",
  "name": "$1",
  "seed": 3,
  "nodes": {"min": 2, "max": 3},
  "trainer": {"type": "builtin", "model": "mlp:128"},
  "dataset": {"name": "fashion-mnist", "limit": ${SL_ELASTIC_LIMIT:-20000}, "val_split": 0.1},
  "epochs": ${SL_ELASTIC_EPOCHS:-5},
  "global_batch": 32,
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
  "checkpoint_every": 200
}
JSON
    echo "$CLUSTER_DIR/$1.json"
}

is_state() { [ "$(field "$1" "$2" 's["state"]')" = "$3" ]; }
step_past() { holds "$1" "$2" 's["step"] > '"$3"; }
running_with() { # running_with PEER JOB N: running in a world of N
    holds "$1" "$2" 's["state"] == "running" and len(s["world"]) == '"$3"
}

start_peer p0
start_peer p1 --join "$(addr_of p0)"
start_peer p2 --join "$(addr_of p0)"
wait_until 30 "three peers converge" converged p0 p1 p2

# bad job files are refused, naming the field
echo '{"kind": "elastic", "name": "bad", "nodes": {"min": 3, "max": 2}}' >"$CLUSTER_DIR/bad.json"
if out=$(ctl p0 submit "$CLUSTER_DIR/bad.json" 2>&1); then fail "a bad job was accepted: $out"; fi
echo "$out" | grep -q "job refused: nodes" || fail "unclear error for a bad job: $out"

JOB=$(ctl p0 submit "$(job_file faults)") || fail "submit failed"
log "job $JOB"
[ "$(ctl p1 submit "$CLUSTER_DIR/faults.json")" = "$JOB" ] || fail "the same job got two ids"
wait_until 60 "the job trains on three peers" running_with p1 "$JOB" 3
wait_until 60 "it steps" step_past p1 "$JOB" 20
# a cluster without a key: the plain TCP ring (elastic_keyed_test: the other)
grep -q "ELASTIC-RING .*transport=tcp keyed=no" "$CLUSTER_DIR/p1.log" ||
    fail "the open cluster's ring is not the plain TCP one"

# 1. kill -9 of a member that does not lead the round
LEADER=$(field p0 "$JOB" 's["rounds"][-1]["leader"]')
VICTIM=p2
[ "$LEADER" = p2 ] && VICTIM=p1
ROUND=$(field p0 "$JOB" 's["round"]')
STEP=$(field p0 "$JOB" 's["step"]')
log "killing $VICTIM (leader $LEADER) at round $ROUND, step about $STEP"
kill_peer "$VICTIM"
OBS=p0
[ "$VICTIM" = p0 ] && OBS=p1
wait_until 60 "the survivors train in a world of two" running_with "$OBS" "$JOB" 2
NEXT=$(field "$OBS" "$JOB" 's["step"]')
wait_until 60 "and step again" step_past "$OBS" "$JOB" "$NEXT"
src=$(field "$OBS" "$JOB" '[r for r in s["rounds"] if r["round"] == s["round"]][0]["start_step"] >= '"$STEP")
[ "$src" = True ] || fail "the world after the kill did not go on from the survivors' step (>= $STEP)"
grep -q "source=-1" <(grep "ELASTIC-START.*round=$(field "$OBS" "$JOB" 's["round"]') " "$CLUSTER_DIR/$OBS.log") &&
    fail "the survivors restored a checkpoint instead of keeping their state"

# 2. a fresh peer joins and is taken (it gets the state from a member)
start_peer p3 --join "$(addr_of "$OBS")"
wait_until 60 "the fresh peer is taken into a world of three" running_with "$OBS" "$JOB" 3
[ "$(field "$OBS" "$JOB" '"p3" in s["world"]')" = True ] || fail "p3 is not in the world"
NEXT=$(field "$OBS" "$JOB" 's["step"]')
wait_until 60 "the world of three steps" step_past "$OBS" "$JOB" "$NEXT"

# 3. the round leader is killed
LEADER=$(field "$OBS" "$JOB" 's["rounds"][-1]["leader"]')
log "killing the round leader $LEADER"
kill_peer "$LEADER"
for n in p0 p1 p3; do
    [ -n "${PID[$n]:-}" ] && OBS=$n
done
ROUND=$(field "$OBS" "$JOB" 's["round"]')
wait_until 60 "the job goes on without its leader" running_with "$OBS" "$JOB" 2
NEXT=$(field "$OBS" "$JOB" 's["step"]')
wait_until 60 "and steps" step_past "$OBS" "$JOB" "$NEXT"

wait_until 300 "the job is done" is_state "$OBS" "$JOB" done
ACC=$(field "$OBS" "$JOB" 's["metrics"]["epochs"][-1]["test_acc"]')
EPOCHS=$(field "$OBS" "$JOB" 'len(s["metrics"]["epochs"])')
[ "$EPOCHS" = "${SL_ELASTIC_EPOCHS:-5}" ] || fail "$EPOCHS epochs reported, not ${SL_ELASTIC_EPOCHS:-5}"
# every peer's replica shows the same end
for n in p0 p1 p3; do
    [ -n "${PID[$n]:-}" ] || continue
    wait_until 30 "$n sees the job done" is_state "$n" "$JOB" done
done

# the final model and curves
ctl "$OBS" results "$JOB" --out "$CLUSTER_DIR/out" >/dev/null || fail "results --out failed"
for f in model.npz curves.csv results.json; do
    [ -s "$CLUSTER_DIR/out/$f" ] || fail "results --out wrote no $f"
done
python3 -c 'import zipfile, sys; zipfile.ZipFile(sys.argv[1]).testzip()' "$CLUSTER_DIR/out/model.npz" ||
    fail "the model is not an .npz archive"
ctl "$OBS" plot "$JOB" --out "$CLUSTER_DIR/plot" >/dev/null || fail "plot failed"
grep -q "<svg" "$CLUSTER_DIR/plot/world.svg" || fail "no world-size plot"
ctl "$OBS" logs "$JOB" | grep -q "starts: rank" || fail "the job's logs show no world"

# the same job without faults, on the peers left, submitted with another
# job that is cancelled at once: a peer trains in one job's world at a
# time, and a cancelled job ends on every peer
REF=$(ctl "$OBS" submit "$(job_file calm)") || fail "submit of the reference job failed"
OTHER=$(ctl "$OBS" submit "$(job_file other)") || fail "submit of the other job failed"
ctl "$OBS" cancel other >/dev/null || fail "cancel by name failed"
wait_until 60 "the other job is cancelled" is_state "$OBS" "$OTHER" cancelled
wait_until 300 "the reference job is done" is_state "$OBS" "$REF" done
REF_ACC=$(field "$OBS" "$REF" 's["metrics"]["epochs"][-1]["test_acc"]')
log "test accuracy: $ACC with faults, $REF_ACC without"
python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= 0.005 else 1)' \
    "$ACC" "$REF_ACC" || fail "test accuracy $ACC with faults is not within 0.5 points of $REF_ACC"
log "PASS"
