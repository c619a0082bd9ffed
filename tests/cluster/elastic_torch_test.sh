#!/usr/bin/env bash
# An elastic command job on real peers (docs/elastic.md "Command jobs"): a
# PyTorch DDP script written for torchrun (peers/examples/torch_ddp_train.py,
# Debian's python3-torch, gloo on the CPU) runs unchanged on each member
# with torchrun's environment. Once a checkpoint generation is stored, a
# member is killed with kill -9: the survivors' workers are stopped and
# started again in the next world, resume from the newest checkpoint
# (rank 0's directory, replicated as blobs to every peer), and the job
# ends with its test accuracy printed. An open cluster without
# --allow-commands refuses the job.
. "$(dirname "$0")/lib.sh"
cluster_init
/usr/bin/python3 -c 'import torch' 2>/dev/null || skip "Debian's python3-torch is needed"
[ -d /usr/share/datasets/fashion-mnist ] ||
    [ -n "${SL_DATASETS:-}" ] || skip "Debian's dataset-fashion-mnist is needed (tools/setup)"

cat >"$CLUSTER_DIR/job.json" <<JSON
{
  "kind": "elastic",
  "name": "torch-ddp",
  "nodes": {"min": 2, "max": 3},
  "trainer": {"type": "command", "stop_grace_s": 5,
              "command": "/usr/bin/python3 peers/examples/torch_ddp_train.py --epochs 3 --limit 20000 --batch 64 --checkpoint-every 30 --log-every 20 --threads 1"},
  "epochs": 3,
  "global_batch": 64
}
JSON


# an open cluster runs no command without --allow-commands
start_peer q0
wait_until 30 "q0 answers" members_json q0
if out=$(ctl q0 submit "$CLUSTER_DIR/job.json" 2>&1); then fail "an open peer took a command job: $out"; fi
echo "$out" | grep -q "allow-commands" || fail "unclear refusal of a command job: $out"
stop_peer q0

start_peer p0 --allow-commands
start_peer p1 --allow-commands --join "$(addr_of p0)"
start_peer p2 --allow-commands --join "$(addr_of p0)"
wait_until 30 "three peers converge" converged p0 p1 p2
JOB=$(ctl p0 submit "$CLUSTER_DIR/job.json") || fail "submit failed"
wait_until 90 "the script runs on three peers" holds p0 "$JOB" 's["state"] == "running" and len(s["world"]) == 3'
wait_until 120 "a checkpoint generation is stored" holds p0 "$JOB" 's.get("checkpoint_step", 0) >= 1'
ROUND=$(field p0 "$JOB" 's["round"]')
VICTIM=$(field p0 "$JOB" 's["world"][1]')
log "killing $VICTIM (rank 1 of round $ROUND)"
kill_peer "$VICTIM"
OBS=p0
[ "$VICTIM" = p0 ] && OBS=p1
wait_until 90 "the survivors run the script again in a world of two" \
    holds "$OBS" "$JOB" 's["state"] == "running" and len(s["world"]) == 2 and s["round"] > '"$ROUND"
wait_until 300 "the job is done" holds "$OBS" "$JOB" 's["state"] == "done"'
# each peer's log of the job reaches the store once a second
logs_hold() { ctl "$OBS" logs "$JOB" >"$CLUSTER_DIR/job.log" && grep -q "test_acc" "$CLUSTER_DIR/job.log"; }
wait_until 30 "the job's logs hold the script's test accuracy" logs_hold
grep -q "checkpoint generation .* restored" "$CLUSTER_DIR/job.log" ||
    fail "no survivor restored the checkpoint (logs in $CLUSTER_DIR/job.log)"
grep -q "resum" "$CLUSTER_DIR/job.log" || fail "the script did not resume from a checkpoint"
log "PASS"
