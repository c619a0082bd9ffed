#!/usr/bin/env bash
# A study on 3 real peers: a command-template ASHA study (toy_train.py)
# runs while p1 is killed with kill -9 and restarted and p2 gets SIGTERM
# and rejoins. The study must finish with every trial done or failed
# exactly once (one merged result each, no epoch's metrics lost), and bad
# specs / unknown studies give clear errors through peerctl.
. "$(dirname "$0")/lib.sh"
cluster_init
STUDY_FILE=$CLUSTER_DIR/toy.json
cat >"$STUDY_FILE" <<'JSON'
{
  "name": "cluster-toy",
  "seed": 7,
  "trainer": {"type": "command", "command": "python3 peers/examples/toy_train.py --lr {lr} --layers {layers} --activation {activation} --epochs 9 --seconds 0.25", "timeout_s": 60},
  "search_space": {
    "lr": {"type": "real", "low": 0.0001, "high": 0.1, "log": true},
    "layers": {"type": "int", "low": 1, "high": 4},
    "activation": {"type": "categorical", "values": ["relu", "tanh", "gelu"]}
  },
  "searcher": {"type": "random"},
  "scheduler": {"type": "asha", "min_epochs": 1, "max_epochs": 9, "reduction": 3},
  "objectives": [{"metric": "accuracy", "goal": "max"}],
  "budget": {"trials": 9},
  "checkpoint_every": 1,
  "concurrency": 2,
  "retries": 1,
  "lease_ms": 3000
}
JSON
start_peer p0
start_peer p1 --join "$(addr_of p0)"
start_peer p2 --join "$(addr_of p0)"
wait_until 30 "three peers converge" converged p0 p1 p2

# bad input is refused with the field named
echo '{"name": "bad", "search_space": {}}' >"$CLUSTER_DIR/bad.json"
if out=$(ctl p0 submit "$CLUSTER_DIR/bad.json" 2>&1); then fail "a bad spec was accepted: $out"; fi
echo "$out" | grep -q "study refused" || fail "unclear error for a bad spec: $out"
if out=$(ctl p0 status nosuchstudy 2>&1); then fail "status of an unknown study succeeded"; fi
echo "$out" | grep -q "no study" || fail "unclear error for an unknown study: $out"

SID=$(ctl p0 submit "$STUDY_FILE") || fail "submit failed"
log "study $SID"
[ "$(ctl p1 submit "$STUDY_FILE")" = "$SID" ] || fail "the same study got two ids"

count_state() { # count_state PEER STATE
    ctl "$1" status "$SID" --json 2>/dev/null | python3 -c '
import json, sys
try: s = json.load(sys.stdin)
except Exception: print(-1); sys.exit(0)
print(sum(1 for t in s["trials"] if t["state"] == sys.argv[1]))' "$2"
}
some_running_on() { # some_running_on PEER OWNER
    ctl "$1" status "$SID" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if any(t["state"] == "running" and t["owner"] == sys.argv[1] for t in s["trials"]) else 1)' "$2"
}
done_at_least() { [ "$(count_state "$1" done)" -ge "$2" ] 2>/dev/null; }

wait_until 60 "p1 runs a trial" some_running_on p0 p1
kill_peer p1
log "p1 killed (kill -9)"
wait_until 60 "p2 runs a trial" some_running_on p0 p2
t0=$(date +%s.%N)
stop_peer p2
t1=$(date +%s.%N)
log "p2 left on SIGTERM (exit $STOP_RC) in $(python3 -c "print('%.2f' % ($t1 - $t0))") s"
[ "$STOP_RC" = 0 ] || fail "p2 exited $STOP_RC on SIGTERM"
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 2.5 else 1)" || fail "p2 took over 2.5 s to leave"
start_peer p1 --join "$(addr_of p0)"
start_peer p2 --join "$(addr_of p0)"
wait_until 30 "the peers rejoin" converged p0 p1 p2

finished() {
    ctl p0 status "$SID" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if s["finished"] else 1)'
}
wait_until 240 "the study finishes" finished

# every peer's replica agrees; every trial final once, metrics complete
for p in p0 p1 p2; do
    wait_until 30 "$p sees the study finished" eval "ctl $p status $SID --json 2>/dev/null | grep -q '\"finished\":\"'"
done
ctl p0 status "$SID" --json >"$CLUSTER_DIR/status.json"
python3 - "$CLUSTER_DIR/status.json" <<'PY' || fail "the final status is wrong"
import json, sys
s = json.load(open(sys.argv[1]))
ts = s["trials"]
assert len(ts) == 9, f"{len(ts)} trials, not 9"
ids = [t["trial"] for t in ts]
assert len(set(ids)) == len(ids), "a trial listed twice"
for t in ts:
    assert t["state"] in ("done", "failed"), f"{t['trial']} ended {t['state']}"
    assert t["epoch"] >= 1, f"{t['trial']} has no metrics"
full = [t for t in ts if t["epoch"] == 9]
assert full, "no trial trained to the top rung"
print("final:", {t["trial"]: (t["state"], t["epoch"]) for t in ts})
PY
ctl p1 results "$SID" --out "$CLUSTER_DIR/out" >"$CLUSTER_DIR/leaderboard.txt" || fail "results failed"
[ -s "$CLUSTER_DIR/out/models.json" ] && [ -s "$CLUSTER_DIR/out/pareto.json" ] || fail "no models.json / pareto.json"
python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert m['models']" "$CLUSTER_DIR/out/models.json" || fail "models.json is empty"
ctl p2 plot "$SID" --out "$CLUSTER_DIR/out" || fail "plot failed"
grep -q "<svg" "$CLUSTER_DIR/out/curves.svg" || fail "no curves.svg"
T=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['trials'][0]['trial'])" "$CLUSTER_DIR/status.json")
ctl p0 logs "$SID" "$T" | grep -q "claim epoch" || fail "no log for $T"
log "leaderboard:"
head -5 "$CLUSTER_DIR/leaderboard.txt" >&2
log "PASS"
