#!/usr/bin/env bash
# peerctl watch (docs/cli.md): a watch on one peer streams, in order, the
# changes made on another peer under its prefix and nothing outside it
# (puts, a binary value as base64, a delete); a watch with no prefix sees
# every key; a study's id still gets the study view (status), an unknown
# name is a key prefix; the peer ends a watch whose client is gone.
. "$(dirname "$0")/lib.sh"
cluster_init
start_peer p0 --allow-commands
start_peer p1 --allow-commands --join "$(addr_of p0)"
wait_until 30 "2 peers converge" converged p0 p1
d=$CLUSTER_DIR

# watch NAME ARGS...: peerctl watch as its own process (so kill reaches it)
watch_bg() {
    local name=$1
    shift
    "$PEERCTL_BIN" --peer "$(dir_of "$name")" watch "$@" &
}
watch_bg p1 runs/ --json >"$d/w-prefix.out" 2>"$d/w-prefix.err"
EXTRA_PIDS+=($!)
wp=$!
watch_bg p1 --json >"$d/w-all.out" 2>"$d/w-all.err"
EXTRA_PIDS+=($!)
wa=$!
wait_until 30 "both watches open on p1" stat_at_least p1 watch.open 2

ctl p0 put runs/a hello || fail "put failed"
ctl p0 put other/x 1 || fail "put failed"
printf '\x00\xff' | ctl p0 put runs/b --file - || fail "put --file failed"
ctl p0 del runs/a || fail "del failed"
lines() { [ "$(wc -l <"$1")" -ge "$2" ]; }
# The study module writes its own keys (peer/NAME/slots) as peers become
# ready to claim, any time now: the full watch's check leaves them out.
ours() { [ "$(grep -vc '"key":"peer/' "$1")" -ge "$2" ]; }
wait_until 30 "the prefix watch shows 3 changes" lines "$d/w-prefix.out" 3
wait_until 30 "the full watch shows 4 changes" ours "$d/w-all.out" 4
python3 - "$d/w-prefix.out" "$d/w-all.out" <<'PY' || fail "wrong changes: $(cat "$d/w-prefix.out" "$d/w-all.out")"
import json, sys
pre = [json.loads(l) for l in open(sys.argv[1])]
full = [c for c in map(json.loads, open(sys.argv[2])) if not c["key"].startswith("peer/")]
assert pre == [
    {"key": "runs/a", "type": "register", "value": "hello", "encoding": "utf-8"},
    {"key": "runs/b", "type": "register", "value": "AP8=", "encoding": "base64"},
    {"key": "runs/a", "deleted": True},
], pre
assert [c["key"] for c in full] == ["runs/a", "other/x", "runs/b", "runs/a"], full
PY

# the human form of the same stream
watch_bg p1 runs/ >"$d/w-human.out" 2>&1
EXTRA_PIDS+=($!)
wait_until 30 "a third watch opens" stat_at_least p1 watch.open 3
ctl p0 put runs/c "two words" || fail "put failed"
has_human() { grep -q 'runs/c = "two words"' "$d/w-human.out"; }
wait_until 30 "the human watch shows the change" has_human

# a client that goes away: its watch ends on the peer
kill "$wp" "$wa"
watches_at_most() { [ "$(stat_of p1 watch.open)" -le "$1" ] 2>/dev/null; }
wait_until 30 "the peer ends the watches of killed clients" watches_at_most 1

# an unknown name is a prefix; a study id gets the study's view
cat >"$d/study.json" <<'J'
{"name": "watch-test", "seed": 1,
 "trainer": {"type": "command", "command": "python3 peers/examples/toy_train.py --lr {lr} --layers 1 --activation relu --epochs 1", "timeout_s": 60},
 "search_space": {"lr": {"type": "real", "low": 0.001, "high": 0.1}},
 "searcher": {"type": "random"}, "scheduler": {"type": "fifo", "max_epochs": 1},
 "objectives": [{"metric": "accuracy", "goal": "max"}], "budget": {"trials": 2}}
J
if SID=$(ctl p0 submit "$d/study.json" 2>"$d/submit.err"); then
    wait_until 30 "p1 knows the study" ctl p1 status "$SID"
    timeout 10 "$PEERCTL_BIN" --peer "$(dir_of p1)" watch "$SID" >"$d/w-study.out" 2>&1
    grep -q "pending\|running\|done" "$d/w-study.out" ||
        fail "watch STUDY did not show the study: $(cat "$d/w-study.out")"
else
    fail "the study for the watch test was refused: $(cat "$d/submit.err")"
fi
log "PASS"
