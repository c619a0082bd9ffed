#!/usr/bin/env bash
# Rank 0 of a world of two is killed with kill -9 (docs/elastic.md,
# "Partitions: the rule"): rank 1 alone is half of the world without its
# rank 0, so it cannot continue it; once a fresh peer is there (min 2) a
# graft carries rank 1's state on: the job goes on from rank 1's step (no
# checkpoint restored, no step lost), and when the killed peer comes back
# it joins the graft's lineage. The job ends with every epoch trained, its
# test accuracy within a point of the same job run without faults.
. "$(dirname "$0")/lib.sh"
cluster_init
[ -d /usr/share/datasets/fashion-mnist ] ||
    [ -n "${SL_DATASETS:-}" ] || skip "Debian's dataset-fashion-mnist is needed (tools/setup)"

job_file() { # job_file NAME: the job, written to $CLUSTER_DIR/NAME.json
    cat >"$CLUSTER_DIR/$1.json" <<JSON
{
  "kind": "elastic",
  "name": "$1",
  "seed": 7,
  "nodes": {"min": 2, "max": 3},
  "trainer": {"type": "builtin", "model": "mlp:512,512"},
  "dataset": {"name": "fashion-mnist", "limit": 10000, "val_split": 0.1},
  "epochs": 6,
  "global_batch": 32,
  "optimizer": {"type": "sgd", "lr": 0.01, "momentum": 0.9},
  "checkpoint_every": 100000
}
JSON
    echo "$CLUSTER_DIR/$1.json"
}

step_past() { holds "$1" "$JOB" 's["step"] > '"$2"; }
running_with() { holds "$1" "$JOB" 's["state"] == "running" and len(s["world"]) == '"$2"; }

start_peer p0
start_peer p1 --join "$(addr_of p0)"
wait_until 30 "two peers converge" converged p0 p1
JOB=$(ctl p0 submit "$(job_file graft)") || fail "submit failed"
wait_until 60 "the job trains on two peers" running_with p1 2
RANK0=$(field p1 "$JOB" 's["world"][0]')
RANK1=$(field p1 "$JOB" 's["world"][1]')
# (the kill follows the wait at once: a release build trains an epoch in
# well under a second here)
wait_until 60 "it steps" step_past "$RANK1" 20
kill_peer "$RANK0"
STEP=$(field "$RANK1" "$JOB" 's["step"]')
log "killed rank 0 ($RANK0); $RANK1 is left alone at step $STEP"
start_peer p2 --join "$(addr_of "$RANK1")"
# (the old world [rank 0, rank 1] is "running, two members" too until the
# kill is seen: wait for the world that holds p2)
wait_until 60 "the graft trains: $RANK1 and the fresh p2" holds "$RANK1" "$JOB" \
    's["state"] == "running" and "p2" in s["world"]'
holds "$RANK1" "$JOB" '"p2" in s["world"] and s["world"][0] == "'"$RANK1"'"' ||
    fail "the world after the kill is not $RANK1 then p2: $(field "$RANK1" "$JOB" 's["world"]')"
grep -q "ELASTIC-GRAFT" "$CLUSTER_DIR/$RANK1.log" "$CLUSTER_DIR/p2.log" ||
    fail "no graft was sealed"
ROUND=$(field "$RANK1" "$JOB" 's["round"]')
START=$(field "$RANK1" "$JOB" '[r for r in s["rounds"] if r["round"] == s["round"]][0]["start_step"]')
[ "$START" -ge "$STEP" ] || fail "the graft started at step $START, before $STEP: steps went back"
grep -E "ELASTIC-START .*round=$ROUND " "$CLUSTER_DIR/$RANK1.log" | grep -q "source=-1" &&
    fail "the graft restored a checkpoint instead of carrying $RANK1's state on"

# the killed rank 0 returns: it joins the graft's lineage, from its state
# (not from the step it was killed at, nor from a checkpoint)
start_peer "$RANK0" --join "$(addr_of "$RANK1")"
wait_until 60 "the graft steps" step_past "$RANK1" "$START"
wait_until 60 "$RANK0 is taken into a world of three" running_with "$RANK1" 3
ROUND=$(field "$RANK1" "$JOB" 's["round"]')
BACK=$(field "$RANK1" "$JOB" '[r for r in s["rounds"] if r["round"] == s["round"]][0]["start_step"]')
[ "$BACK" -ge "$START" ] || fail "the world with $RANK0 back started at step $BACK, before $START"
grep -E "ELASTIC-START .*round=$ROUND " "$CLUSTER_DIR/$RANK0.log" | grep -q "source=-1" &&
    fail "$RANK0 restored a checkpoint instead of taking the graft's state"

wait_until 120 "the job is done" holds "$RANK1" "$JOB" 's["state"] == "done"'
EPOCHS=$(field "$RANK1" "$JOB" 'len(s["metrics"]["epochs"])')
[ "$EPOCHS" = 6 ] || fail "$EPOCHS epochs reported, not 6"
ACC=$(field "$RANK1" "$JOB" 's["metrics"]["epochs"][-1]["test_acc"]')

# the same job without faults (three peers from the start) ends at 0.8279;
# with the graft, at 0.8271 and 0.8338 in two runs here. The MLP has
# neither batch-norm nor dropout, so only the sums' order depends on the
# worlds, and the small learning rate keeps that from moving the end by
# more than noise (at lr 0.05 two such runs ended 1.2 points apart);
# SL_GRAFT_REFERENCE=1 runs that reference again instead of the constant
REF_ACC=0.8279
if [ -n "${SL_GRAFT_REFERENCE:-}" ]; then
    JOB=$(ctl p2 submit "$(job_file calm)") || fail "submit of the reference job failed"
    wait_until 120 "the reference job is done" holds p2 "$JOB" 's["state"] == "done"'
    REF_ACC=$(field p2 "$JOB" 's["metrics"]["epochs"][-1]["test_acc"]')
fi
log "test accuracy: $ACC with the graft, $REF_ACC without"
python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= 0.01 else 1)' \
    "$ACC" "$REF_ACC" || fail "test accuracy $ACC with the graft is not within a point of $REF_ACC"
log "PASS (graft at step $STEP)"
