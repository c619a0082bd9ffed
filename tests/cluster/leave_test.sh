#!/usr/bin/env bash
# SIGTERM = graceful leave: the peer exits 0 and everyone lists it as
# `left`, never `dead`.
. "$(dirname "$0")/lib.sh"
cluster_init
names=(p0 p1 p2 p3 p4)
start_peer p0
for n in "${names[@]:1}"; do start_peer "$n" --join "$(addr_of p0)"; done
wait_until 60 "5 peers converge" converged "${names[@]}"
stop_peer p1
[ "$STOP_RC" = 0 ] || fail "peer exited $STOP_RC after SIGTERM, want 0"
wait_until 10 "everyone sees p1 left" all_see left p1 p0 p2 p3 p4
# And it stays left (never turns dead) while the others keep probing.
for _ in 1 2 3 4 5 6 7 8 9 10; do
    for o in p0 p2 p3 p4; do
        s=$(state_of "$o" p1)
        [ "$s" = left ] || [ "$s" = none ] || fail "$o sees p1 as $s after a leave"
    done
done
grep -q "PEER-LEAVE" "$CLUSTER_DIR/p1.log" || fail "p1 did not log its leave"
log "PASS"
