#!/usr/bin/env bash
# Issue 12, item 1 (--trial-user): a command trial runs as the user
# `peer --trial-user USER` names, not as the peer's (root): the trial's
# `id -u` is nobody's, and it can write its checkpoint directory. A user
# that does not exist is refused at start with a clear error. Skipped (77)
# when not root or without a `nobody` user.
. "$(dirname "$0")/../cluster/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (the peer switches users)"
NOBODY=$(id -u nobody 2>/dev/null) || skip "no user nobody"
cluster_init
OUT=$CLUSTER_DIR/out
mkdir -p "$OUT"
chmod 0777 "$OUT"
mkdir -p "$CLUSTER_DIR/data"
chmod 0755 "$CLUSTER_DIR" "$CLUSTER_DIR/data" # the trial user reaches its checkpoint directory
cat >"$CLUSTER_DIR/spec.json" <<JSON
{
  "name": "trial-user",
  "seed": 1,
  "trainer": {"type": "command", "command": "id -u >$OUT/uid.{lr}; touch \"\$STARLING_CHECKPOINT_DIR/ck\" && echo ok >$OUT/ckpt.{lr}; echo epoch=1 loss=0.5", "timeout_s": 60},
  "search_space": {"lr": {"type": "real", "low": 0.1, "high": 0.9}},
  "searcher": {"type": "random"},
  "scheduler": {"type": "fifo", "max_epochs": 1},
  "objectives": [{"metric": "loss", "goal": "min"}],
  "budget": {"trials": 1}
}
JSON

# a user that does not exist: refused at start, with the reason
MAY_EXIT[bad]=1
start_peer bad --trial-user no-such-user-sl12
rc=0
wait "${PID[bad]}" || rc=$?
unset "PID[bad]"
[ $rc -ne 0 ] || fail "a peer with --trial-user no-such-user-sl12 started"
grep -q "no such user" "$CLUSTER_DIR/bad.log" || fail "unclear refusal: $(tail -3 "$CLUSTER_DIR/bad.log")"
log "ok: an unknown --trial-user is refused at start"

# a peer that is not root cannot switch users: refused at start
if command -v setpriv >/dev/null; then
    mkdir -p "$CLUSTER_DIR/data/nonroot"
    chown nobody "$CLUSTER_DIR/data/nonroot"
    PORT[nonroot]=$(free_port)
    rc=0
    setpriv --reuid "$NOBODY" --regid "$(id -g nobody)" --clear-groups "$PEER_BIN" --name nonroot \
        --listen "127.0.0.1:${PORT[nonroot]}" --data "$CLUSTER_DIR/data/nonroot" \
        --trial-user nobody >"$CLUSTER_DIR/nonroot.log" 2>&1 &
    np=$!
    EXTRA_PIDS+=($np)
    wait $np || rc=$?
    [ $rc -ne 0 ] || fail "a peer not running as root started with --trial-user"
    grep -q "not root" "$CLUSTER_DIR/nonroot.log" ||
        fail "unclear refusal for a peer not running as root: $(tail -3 "$CLUSTER_DIR/nonroot.log")"
    log "ok: a peer not running as root is refused --trial-user at start"
fi

# shellcheck disable=SC2086
start_peer p0 --trial-user nobody --allow-commands
wait_until 30 "p0 answers" sees p0 p0 alive
SID=$(ctl p0 submit "$CLUSTER_DIR/spec.json") || fail "submit failed"
log "study $SID"
ran() { ls "$OUT"/uid.* >/dev/null 2>&1; }
wait_until 60 "the trial ran" ran
got=$(cat "$OUT"/uid.*)
[ "$got" = "$NOBODY" ] || fail "the trial ran as uid $got, not nobody's ($NOBODY)"
log "ok: the trial ran as uid $got (nobody)"
wrote() { ls "$OUT"/ckpt.* >/dev/null 2>&1; }
wait_until 10 "the trial wrote its checkpoint directory" wrote
