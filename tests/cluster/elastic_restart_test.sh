#!/usr/bin/env bash
# A full-cluster restart of an elastic job (docs/elastic.md): both peers
# of a running job are killed with kill -9 once a checkpoint is stored;
# restarted, they resume from that checkpoint (no state in memory: every
# member restores the blob the store names, none starts again from the
# seed), and the job ends with every epoch trained.
. "$(dirname "$0")/lib.sh"
cluster_init
[ -d /usr/share/datasets/fashion-mnist ] ||
    [ -n "${SL_DATASETS:-}" ] || skip "Debian's dataset-fashion-mnist is needed (tools/setup)"

cat >"$CLUSTER_DIR/job.json" <<JSON
{
  "kind": "elastic",
  "name": "restart",
  "seed": 5,
  "nodes": {"min": 2, "max": 2},
  "trainer": {"type": "builtin", "model": "mlp:64"},
  "dataset": {"name": "fashion-mnist", "limit": 20000, "val_split": 0.1},
  "epochs": 4,
  "global_batch": 32,
  "checkpoint_every": 150
}
JSON


start_peer p0
start_peer p1 --join "$(addr_of p0)"
wait_until 30 "two peers converge" converged p0 p1
JOB=$(ctl p0 submit "$CLUSTER_DIR/job.json") || fail "submit failed"
wait_until 120 "a checkpoint is stored" holds p0 "$JOB" 's.get("checkpoint_step", 0) >= 150'
CKPT=$(field p0 "$JOB" 's["checkpoint_step"]')
log "killing both peers (checkpoint at step $CKPT)"
kill_peer p0
kill_peer p1

start_peer p0
start_peer p1 --join "$(addr_of p0)"
wait_until 30 "the peers converge again" converged p0 p1
# the first world after the restart starts from a checkpoint, not the seed
restored() {
    grep -hE "ELASTIC-START +job=$JOB" "$CLUSTER_DIR/p0.log" | tail -n 1 |
        grep -Eq "start_step=([1-9][0-9]*) source=-1"
}
wait_until 60 "a world starts from the checkpoint" restored
START=$(grep -hE "ELASTIC-START +job=$JOB" "$CLUSTER_DIR/p0.log" | tail -n 1 |
    sed -E 's/.*start_step=([0-9]+).*/\1/')
[ "$START" -ge "$CKPT" ] || fail "resumed from step $START, before the checkpoint of step $CKPT"
wait_until 300 "the job is done" holds p1 "$JOB" 's["state"] == "done"'
EPOCHS=$(field p1 "$JOB" 'len(s["metrics"]["epochs"])')
[ "$EPOCHS" = 4 ] || fail "$EPOCHS epochs reported, not 4"
log "PASS (resumed from step $START, checkpoint $CKPT)"
