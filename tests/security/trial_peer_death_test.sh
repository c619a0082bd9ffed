#!/usr/bin/env bash
# Issue 12, item 10: a trial's processes die with their peer. A command
# trainer whose command forks (a background `sleep`, the trainer's own
# grandchild) and waits; the peer is killed with kill -9; every process of
# the trial must be gone within 10 s (before the fix both kept running,
# reparented to PID 1).
. "$(dirname "$0")/../cluster/lib.sh"
cluster_init
PIDS=$CLUSTER_DIR/pids
mkdir -p "$PIDS"
cat >"$CLUSTER_DIR/spec.json" <<JSON
{
  "name": "trial-death",
  "seed": 1,
  "trainer": {"type": "command", "command": "echo \$\$ >$PIDS/shell.{lr}; sleep 600 & echo \$! >$PIDS/sleep.{lr}; wait", "timeout_s": 900},
  "search_space": {"lr": {"type": "real", "low": 0.1, "high": 0.9}},
  "searcher": {"type": "random"},
  "scheduler": {"type": "fifo", "max_epochs": 1},
  "objectives": [{"metric": "loss", "goal": "min"}],
  "budget": {"trials": 2},
  "concurrency": 2
}
JSON
# shellcheck disable=SC2086
start_peer p0 --allow-commands
wait_until 30 "p0 answers" sees p0 p0 alive
SID=$(ctl p0 submit "$CLUSTER_DIR/spec.json") || fail "submit failed"
log "study $SID"
two_pids() { [ "$(cat "$PIDS"/sleep.* 2>/dev/null | wc -l)" -ge 2 ]; }
wait_until 60 "both trials' commands started" two_pids
# alive: the process exists and is not a zombie (PID 1 may not reap here)
alive() { [ -r "/proc/$1/stat" ] && ! awk '{exit $3 == "Z" ? 0 : 1}' "/proc/$1/stat" 2>/dev/null; }
TRIAL_PIDS=$(cat "$PIDS"/shell.* "$PIDS"/sleep.*)
for p in $TRIAL_PIDS; do alive "$p" || fail "trial process $p is not running before the kill"; done
log "trial processes: $(echo $TRIAL_PIDS)"
kill_peer p0
none_alive() {
    local p
    for p in $TRIAL_PIDS; do alive "$p" && return 1; done
    return 0
}
deadline=$((SECONDS + 10))
while ! none_alive; do
    if [ $SECONDS -ge $deadline ]; then
        left=
        for p in $TRIAL_PIDS; do alive "$p" && left="$left $p"; done
        for p in $left; do kill -9 "$p" 2>/dev/null; done # not left behind by the test
        fail "trial processes outlived their peer's kill -9 by 10 s:$left"
    fi
    sleep 0.1
done
log "ok: every trial process ended with its peer"
