#!/usr/bin/env bash
# A peer restarted with the same name and --data rejoins alive with a
# higher incarnation, after a crash and after a graceful leave.
. "$(dirname "$0")/lib.sh"
cluster_init
names=(p0 p1 p2 p3)
start_peer p0
for n in "${names[@]:1}"; do start_peer "$n" --join "$(addr_of p0)"; done
wait_until 60 "4 peers converge" converged "${names[@]}"
inc0=$(incarnation_of p0 p2)

kill_peer p2
wait_until 30 "p2 seen dead" all_see dead p2 p0 p1 p3
start_peer p2 --join "$(addr_of p0)"
wait_until 30 "restarted p2 seen alive" all_see alive p2 p0 p1 p3
inc1=$(incarnation_of p0 p2)
[ "$inc1" -gt "$inc0" ] || fail "incarnation after restart $inc1 is not above $inc0"
[ "$(cat "$CLUSTER_DIR/data/p2/incarnation")" -ge "$inc1" ] || fail "incarnation not persisted"

stop_peer p2
[ "$STOP_RC" = 0 ] || fail "p2 exited $STOP_RC after SIGTERM"
wait_until 10 "p2 seen left" all_see left p2 p0 p1 p3
start_peer p2 --join "$(addr_of p1)"
wait_until 30 "p2 back alive after its leave" all_see alive p2 p0 p1 p3
inc2=$(incarnation_of p1 p2)
[ "$inc2" -gt "$inc1" ] || fail "incarnation after second restart $inc2 is not above $inc1"
log "incarnations: $inc0 -> $inc1 -> $inc2"
log "PASS"
