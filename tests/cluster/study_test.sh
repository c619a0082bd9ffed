#!/usr/bin/env bash
# A study on 3 real peers: a command-template ASHA study (toy_train.py)
# runs while p1 is killed with kill -9 and restarted and p2 gets SIGTERM
# and rejoins. The study must finish with every trial done or failed
# exactly once (one merged result each, no epoch's metrics lost), and bad
# specs / unknown studies give clear errors through peerctl.
. "$(dirname "$0")/lib.sh"
cluster_init
# every peer compares its live view of each study with a fresh read of its
# store on every turn, and stops (exit 1) on a difference (docs/studies.md)
export SL_STUDY_CHECK=1
STUDY_FILE=$CLUSTER_DIR/toy.json
cat >"$STUDY_FILE" <<'JSON'
{
  "name": "cluster-toy",
  "seed": 7,
  "trainer": {"type": "command", "command": "python3 peers/examples/toy_train.py --lr {lr} --layers {layers} --activation {activation} --epochs 9 --seconds 0.6 --state-bytes {state}", "timeout_s": 60},
  "search_space": {
    "lr": {"type": "real", "low": 0.0001, "high": 0.1, "log": true},
    "layers": {"type": "int", "low": 1, "high": 4},
    "activation": {"type": "categorical", "values": ["relu", "tanh", "gelu"]},
    "state": {"type": "categorical", "values": [0, 3000]}
  },
  "searcher": {"type": "random"},
  "scheduler": {"type": "asha", "min_epochs": 1, "max_epochs": 9, "reduction": 3},
  "objectives": [{"metric": "accuracy", "goal": "max"}],
  "budget": {"trials": 20},
  "checkpoint_every": 1,
  "concurrency": 2,
  "retries": 1,
  "lease_ms": 3000
}
JSON
start_peer p0 --allow-commands
start_peer p1 --allow-commands --join "$(addr_of p0)"
start_peer p2 --allow-commands --join "$(addr_of p0)"
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
some_running_on() { # some_running_on PEER OWNER [MIN_EPOCH]: prints the trial
    ctl "$1" status "$SID" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
for t in s["trials"]:
    if t["state"] == "running" and t["owner"] == sys.argv[1] and t["epoch"] >= int(sys.argv[2]) and (sys.argv[2] == "0" or t["target"] > t["epoch"] + 1):
        print(t["trial"]); sys.exit(0)
sys.exit(1)' "$2" "${3:-0}" >/dev/null
}
running_trial() {
    ctl "$1" status "$SID" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(next(t["trial"] for t in s["trials"] if t["state"] == "running" and t["owner"] == sys.argv[1] and t["epoch"] >= 2 and t["target"] > t["epoch"] + 1))' "$2"
}
done_at_least() { [ "$(count_state "$1" done)" -ge "$2" ] 2>/dev/null; }

# kill -9 whichever peer is first mid-way through a promoted trial (past
# its first replicated checkpoint), SIGTERM another, restart both
midway() {
    ctl p0 status "$SID" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
for t in s["trials"]:
    if t["state"] == "running" and t["epoch"] >= 2 and t["target"] > t["epoch"] + 1:
        print(t["owner"], t["trial"], t["rung"], t["claim_epoch"]); sys.exit(0)
sys.exit(1)' >"$CLUSTER_DIR/midway"
}
wait_until 90 "a peer is mid-way through a promoted trial" midway
read -r VICTIM KILLED_TRIAL KILLED_RUNG KILLED_CLAIM <"$CLUSTER_DIR/midway"
case $VICTIM in
p0) OBS=p1 OTHER=p2 ;;
p1) OBS=p0 OTHER=p2 ;;
*) OBS=p0 OTHER=p1 ;;
esac
kill_peer "$VICTIM"
log "$VICTIM killed (kill -9) while training $KILLED_TRIAL"
taken_over() {
    ctl "$OBS" status "$SID" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
t = next(t for t in s["trials"] if t["trial"] == sys.argv[1])
sys.exit(0 if t["owner"] not in ("", sys.argv[2]) else 1)' "$KILLED_TRIAL" "$VICTIM"
}
wait_until 30 "another peer takes $KILLED_TRIAL over" taken_over
# (while $VICTIM is down) kill -9 another peer mid-trial and restart it
# at once, before membership can declare it dead: others see it alive
# under its old name, so only its own release (STUDY-RELEASE, at its
# first turn) frees the trial before its lease lapses
midway_any() {
    ctl "$OBS" status "$SID" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
for t in s["trials"]:
    if t["state"] == "running" and t["owner"] in sys.argv[1:] and t["target"] > t["epoch"] + 1:
        print(t["owner"], t["trial"]); sys.exit(0)
sys.exit(1)' "$OBS" "$OTHER" >"$CLUSTER_DIR/midway2"
}
wait_until 60 "a peer runs a trial far from its rung's end" midway_any
read -r BOUNCED BOUNCED_TRIAL <"$CLUSTER_DIR/midway2"
LINES_BEFORE=$(wc -l <"$CLUSTER_DIR/$BOUNCED.log")
kill_peer "$BOUNCED"
start_peer "$BOUNCED" --allow-commands --join "$(addr_of "$([ "$BOUNCED" = "$OBS" ] && echo "$OTHER" || echo "$OBS")")"
log "$BOUNCED killed (kill -9) while training $BOUNCED_TRIAL and restarted at once"
released() {
    tail -n +"$((LINES_BEFORE + 1))" "$CLUSTER_DIR/$BOUNCED.log" |
        grep -q "STUDY-RELEASE .*trial $BOUNCED_TRIAL: claim epoch"
}
wait_until 20 "$BOUNCED releases the claim on $BOUNCED_TRIAL it held before the kill" released

wait_until 30 "$OTHER runs a trial" some_running_on "$OBS" "$OTHER"
t0=$(date +%s.%N)
stop_peer "$OTHER"
t1=$(date +%s.%N)
log "$OTHER left on SIGTERM (exit $STOP_RC) in $(python3 -c "print('%.2f' % ($t1 - $t0))") s"
[ "$STOP_RC" = 0 ] || fail "$OTHER exited $STOP_RC on SIGTERM"
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 2.5 else 1)" || fail "$OTHER took over 2.5 s to leave"
start_peer "$VICTIM" --allow-commands --join "$(addr_of "$OBS")"
start_peer "$OTHER" --allow-commands --join "$(addr_of "$OBS")"
wait_until 30 "the peers rejoin" converged p0 p1 p2

finished() {
    ctl "$OBS" status "$SID" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if s["finished"] else 1)' 2>/dev/null
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
assert len(ts) == 20, f"{len(ts)} trials, not 20"
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
# without --out, results prints and writes no file (peerctl results --help)
mkdir -p "$CLUSTER_DIR/cwd"
(cd "$CLUSTER_DIR/cwd" && ctl p1 results "$SID" >/dev/null) || fail "results without --out failed"
[ -z "$(ls -A "$CLUSTER_DIR/cwd")" ] || fail "results without --out wrote files: $(ls -A "$CLUSTER_DIR/cwd")"
ctl p2 plot "$SID" --out "$CLUSTER_DIR/out" || fail "plot failed"
grep -q "<svg" "$CLUSTER_DIR/out/curves.svg" || fail "no curves.svg"
T=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['trials'][0]['trial'])" "$CLUSTER_DIR/status.json")
# the checkpoint of a trial that trained to the top rung, from every peer
# (one of the three holds no copy of its blob and fetches it from a holder)
FULL=$(python3 -c "import json,sys; print([t for t in json.load(open(sys.argv[1]))['trials'] if t['epoch'] == 9][0]['trial'])" "$CLUSTER_DIR/status.json")
for p in p0 p1 p2; do
    ctl "$p" --timeout 10000 fetch "$SID" "$FULL" "$CLUSTER_DIR/fetch-$p" 2>/dev/null || fail "fetch from $p failed"
done
python3 - "$CLUSTER_DIR" "$FULL" <<'PY' || fail "the fetched checkpoints differ or are not the trial's last"
import json, sys
got = [open(f"{sys.argv[1]}/fetch-{p}/{sys.argv[2]}.npz", "rb").read() for p in ("p0", "p1", "p2")]
assert got[0] == got[1] == got[2], got
assert json.loads(got[0])["epoch"] >= 8, got[0]
PY
ctl p0 logs "$SID" "$T" | grep -q "claim epoch" || fail "no log for $T"
# a trial its owner promoted trains on under the same claim, from where
# its rung ended (no release, no restore elsewhere)
for t in $(python3 -c "import json,sys; print(' '.join(t['trial'] for t in json.load(open(sys.argv[1]))['trials'] if t['epoch'] > 1))" "$CLUSTER_DIR/status.json"); do
    ctl p0 logs "$SID" "$t" >>"$CLUSTER_DIR/promoted.log" 2>/dev/null
done
python3 - "$CLUSTER_DIR/promoted.log" <<'PY' || fail "no trial was trained on by the owner that promoted it"
import re, sys
runs = [re.match(r"\[(\w+)\] claim epoch (\d+): rung (\d+), epochs (\d+)\.\.(\d+)", l)
        for l in open(sys.argv[1]).read().splitlines()]
runs = [m for m in runs if m]
on = [(a.group(0), b.group(0)) for a, b in zip(runs, runs[1:])
      if a.group(1) == b.group(1) and a.group(2) == b.group(2)
      and int(b.group(3)) == int(a.group(3)) + 1 and int(b.group(4)) == int(a.group(5)) + 1]
assert on, "no run continued by its owner"
print("trained on by its owner:", on[0])
PY
# the killed peer's trial was taken over and resumed from its replicated checkpoint
ctl "$OBS" logs "$SID" "$KILLED_TRIAL" >"$CLUSTER_DIR/killed.log"
python3 - "$CLUSTER_DIR/killed.log" "$VICTIM" "$KILLED_RUNG" "$KILLED_CLAIM" <<'PY' || { cat "$CLUSTER_DIR/killed.log" >&2; fail "trial $KILLED_TRIAL was not resumed from a checkpoint by another peer"; }
import re, sys
lines = open(sys.argv[1]).read().splitlines()
claims = [re.match(r"\[(\w+)\] claim epoch (\d+): rung (\d+), epochs (\d+)\.\.(\d+)", l) for l in lines]
claims = [m for m in claims if m]
rung, claim = int(sys.argv[3]), int(sys.argv[4])
after = [m for m in claims if m.group(1) != sys.argv[2] and int(m.group(2)) > claim
         and int(m.group(3)) == rung and int(m.group(4)) >= 2]
assert after, "no later claim by another peer resuming past epoch 1"
print("resumed:", after[0].group(0))
PY
# small checkpoints ride in their manifests, larger ones are blobs: both kinds were used
for t in $(python3 -c "import json,sys; print(' '.join(t['trial'] for t in json.load(open(sys.argv[1]))['trials'] if t['epoch'] >= 1))" "$CLUSTER_DIR/status.json"); do
    ctl "$OBS" get "study/$SID/t/$t/ck" >>"$CLUSTER_DIR/manifests.txt" 2>/dev/null && echo >>"$CLUSTER_DIR/manifests.txt"
done
grep -q '"inline"' "$CLUSTER_DIR/manifests.txt" || fail "no checkpoint was kept inline"
grep -q '"blob"' "$CLUSTER_DIR/manifests.txt" || fail "no checkpoint was kept as a blob"
# one result per trial in the store (a second one would mean a trial finished twice)
ctl "$OBS" keys "study/$SID/t/" >"$CLUSTER_DIR/keys.txt"
python3 - "$CLUSTER_DIR/keys.txt" <<'PY' || fail "a trial has no result or more than one"
import collections, sys
keys = open(sys.argv[1]).read().split()
res = collections.Counter(k.split("/")[3] for k in keys if "/res/" in k)
trials = {k.split("/")[3] for k in keys if k.count("/") == 3}
assert set(res) == trials, f"trials without a result: {trials - set(res)}"
dup = {t: n for t, n in res.items() if n != 1}
assert not dup, f"results written more than once: {dup}"
PY
# a second study, cancelled: it ends without running its budget
sed 's/"seed": 7/"seed": 8/; s/"name": "cluster-toy"/"name": "cancel-me"/' "$STUDY_FILE" >"$CLUSTER_DIR/cancel.json"
SID2=$(ctl p0 submit "$CLUSTER_DIR/cancel.json") || fail "second submit failed"
[ "$SID2" != "$SID" ] || fail "two different studies got one id"
ctl p1 cancel cancel-me >/dev/null || fail "cancel by name failed"
cancelled_finished() {
    ctl p2 status "$SID2" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if s["cancelled"] and s["finished"] and all(t["state"] in ("done", "failed") for t in s["trials"]) else 1)'
}
wait_until 30 "the cancelled study finishes" cancelled_finished
# a full-cluster restart: every peer leaves, all come back from their data
# directories, and every command answers from any peer as before
for p in p0 p1 p2; do stop_peer "$p"; done
start_peer p0 --allow-commands --join "$(addr_of p1)"
start_peer p1 --allow-commands --join "$(addr_of p0)"
start_peer p2 --allow-commands --join "$(addr_of p0)"
wait_until 30 "the cluster restarts" converged p0 p1 p2
ctl p2 status "$SID" --json >"$CLUSTER_DIR/status-after.json" || fail "status after the restart failed"
python3 - "$CLUSTER_DIR/status.json" "$CLUSTER_DIR/status-after.json" <<'PY' || fail "the study's status changed across the restart"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert b["finished"], "not finished after the restart"
key = lambda s: sorted((t["trial"], t["state"], t["epoch"]) for t in s["trials"])
assert key(a) == key(b), (key(a), key(b))
PY
ctl p0 results "$SID" --out "$CLUSTER_DIR/out2" >/dev/null || fail "results after the restart failed"
cmp -s "$CLUSTER_DIR/out/models.json" "$CLUSTER_DIR/out2/models.json" || fail "models.json differs after the restart"
ctl p1 --timeout 10000 fetch "$SID" "$FULL" "$CLUSTER_DIR/fetch-again" || fail "fetch after the restart failed"
cmp -s "$CLUSTER_DIR/fetch-p0/$FULL.npz" "$CLUSTER_DIR/fetch-again/$FULL.npz" || fail "the fetched checkpoint differs after the restart"
ctl p2 logs "$SID" "$T" | grep -q "claim epoch" || fail "no log for $T after the restart"
ctl p0 plot "$SID" --out "$CLUSTER_DIR/out2" >/dev/null && grep -q "<svg" "$CLUSTER_DIR/out2/curves.svg" || fail "plot after the restart failed"
timeout 30 "$PEERCTL_BIN" --peer "$(dir_of p1)" watch "$SID" >"$CLUSTER_DIR/watch.txt" || fail "watch of a finished study did not end"
grep -q "$FULL" "$CLUSTER_DIR/watch.txt" || fail "watch shows no trials"
log "ok: every command answers after a full-cluster restart"

# the check can fail: two peers whose live views lose one change in 50
# (SL_STUDY_PLANT=lost-change) run a quick study; one must log STUDY-VIEW
# and stop through the loop's error path (PEER-LOOP, exit status 1: no
# abort, no signal)
export SL_STUDY_PLANT=lost-change
MAY_EXIT[q0]=1 MAY_EXIT[q1]=1
start_peer q0 --allow-commands
start_peer q1 --allow-commands --join "$(addr_of q0)"
unset SL_STUDY_PLANT
cat >"$CLUSTER_DIR/planted.json" <<'JSON'
{"name": "planted", "seed": 3,
 "trainer": {"type": "command", "command": "echo '{{\"epoch\": 1, \"x\": {x}}}'"},
 "search_space": {"x": {"type": "real", "low": 0, "high": 1}},
 "scheduler": {"type": "fifo", "epochs": 1},
 "objectives": [{"metric": "x", "goal": "max"}],
 "budget": {"trials": 200}, "concurrency": 2, "lease_ms": 1000}
JSON
wait_until 20 "q1 joins q0" eval 'ctl q0 members 2>/dev/null | grep -q q1'
ctl q0 submit "$CLUSTER_DIR/planted.json" >/dev/null || fail "planted submit failed"
caught() { grep -q "STUDY-VIEW" "$CLUSTER_DIR/q0.log" "$CLUSTER_DIR/q1.log"; }
wait_until 30 "the live view check catches the planted lost change" caught
grep -h "STUDY-VIEW" "$CLUSTER_DIR/q0.log" "$CLUSTER_DIR/q1.log" | head -1 >&2
stopped_q() {
    local n
    for n in q0 q1; do
        grep -q "STUDY-VIEW" "$CLUSTER_DIR/$n.log" && ! kill -0 "${PID[$n]}" 2>/dev/null &&
            { echo "$n"; return 0; }
    done
    return 1
}
wait_until 20 "the peer that caught it stops" eval 'stopped_q >/dev/null'
QN=$(stopped_q)
QRC=0
wait "${PID[$QN]}" 2>/dev/null || QRC=$?
unset "PID[$QN]"
[ "$QRC" -eq 1 ] || fail "$QN exited with status $QRC after STUDY-VIEW, not 1 (its loop's error path)"
grep -q "PEER-LOOP" "$CLUSTER_DIR/$QN.log" || fail "$QN stopped with no PEER-LOOP line"
log "ok: $QN logged STUDY-VIEW and exited with status 1"
log "leaderboard:"
head -5 "$CLUSTER_DIR/leaderboard.txt" >&2
log "PASS"
