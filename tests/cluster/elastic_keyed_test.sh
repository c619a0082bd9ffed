#!/usr/bin/env bash
# An elastic job in a keyed cluster (docs/elastic.md "The ring's
# transport", docs/security.md): the gradients go over the ZeroMQ ring
# with CurveZMQ (not the plain TCP ring of a cluster without a key), a
# member killed with kill -9 leaves the survivors training in a world of
# two, and the job ends with every epoch trained and a test accuracy a
# trained MLP reaches.
. "$(dirname "$0")/lib.sh"
cluster_init
[ -d /usr/share/datasets/fashion-mnist ] ||
    [ -n "${SL_DATASETS:-}" ] || skip "Debian's dataset-fashion-mnist is needed (tools/setup)"

"$PEERCTL_BIN" keygen >"$CLUSTER_DIR/cluster.key"
chmod 600 "$CLUSTER_DIR/cluster.key"
KEY=$CLUSTER_DIR/cluster.key
cat >"$CLUSTER_DIR/job.json" <<JSON
{
  "kind": "elastic",
  "name": "keyed",
  "seed": 7,
  "nodes": {"min": 2, "max": 3},
  "trainer": {"type": "builtin", "model": "mlp:64"},
  "dataset": {"name": "fashion-mnist", "limit": 12000, "val_split": 0.1},
  "epochs": 3,
  "global_batch": 32,
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
  "checkpoint_every": 200
}
JSON

running_with() { # running_with PEER JOB N: running in a world of N
    holds "$1" "$2" 's["state"] == "running" and len(s["world"]) == '"$3"
}
step_past() { holds "$1" "$2" 's["step"] > '"$3"; }

start_peer p0 --key "$KEY"
start_peer p1 --key "$KEY" --join "$(addr_of p0)"
start_peer p2 --key "$KEY" --join "$(addr_of p0)"
wait_until 30 "three keyed peers converge" converged p0 p1 p2
JOB=$(ctl p0 submit "$CLUSTER_DIR/job.json") || fail "submit failed"
wait_until 60 "the job trains on three peers" running_with p0 "$JOB" 3
wait_until 60 "it steps" step_past p0 "$JOB" 20
for n in p0 p1 p2; do
    grep -q "ELASTIC-RING .*size=3 transport=zmq keyed=yes" "$CLUSTER_DIR/$n.log" ||
        fail "$n's ring in the keyed cluster is not the ZeroMQ/Curve one"
    grep -q "ELASTIC-RING .*transport=tcp" "$CLUSTER_DIR/$n.log" &&
        fail "$n used the plain TCP ring in a keyed cluster"
done

STEP=$(field p0 "$JOB" 's["step"]')
kill_peer p2
wait_until 60 "the survivors train in a world of two" running_with p0 "$JOB" 2
wait_until 60 "and step again" step_past p0 "$JOB" "$STEP"
wait_until 300 "the job is done" holds p1 "$JOB" 's["state"] == "done"'
EPOCHS=$(field p1 "$JOB" 'len(s["metrics"]["epochs"])')
[ "$EPOCHS" = 3 ] || fail "$EPOCHS epochs reported, not 3"
ACC=$(field p1 "$JOB" 's["metrics"]["epochs"][-1]["test_acc"]')
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0.70 else 1)' "$ACC" ||
    fail "test accuracy $ACC: the keyed job did not train"
log "PASS (test accuracy $ACC)"
