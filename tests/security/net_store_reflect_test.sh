#!/usr/bin/env bash
# Issue 12, item 8, for the store's answers: a DIGEST of a new replica (an
# empty version vector: "send me everything") or a SUMMARY naming a third
# party as reply address. p0 and p1 listen on 127.0.0.2 and 127.0.0.3, a
# victim (a ZeroMQ sink counting what it receives) on 127.0.0.5, the
# attacker connects from 127.0.0.1. Before the fix p0 sent the victim its
# whole store for each DIGEST; now it answers only at the sender's own
# host: the victim gets nothing, p0 counts the refusals in bad_input
# (bad_input_by_module.store), and replication between p0 and p1 on their
# two addresses still works.
# SL_CLUSTER_LIB and SL_ATTACKER run it against another build's lib.sh and
# attacker (the figures before the fix, bench/results/security/membership.md).
. "${SL_CLUSTER_LIB:-$(dirname "$0")/../cluster/lib.sh}"
cluster_init
ATTACKER=${SL_ATTACKER:-$BUILD/tests/security/security_net_names_test}
[ -x "$ATTACKER" ] || fail "no $ATTACKER (build the security_net_names_test target)"
declare -A IP=([p0]=127.0.0.2 [p1]=127.0.0.3)
addr_of() { echo "${IP[$1]:-127.0.0.1}:${PORT[$1]}"; }

start_peer p0
start_peer p1 --join "$(addr_of p0)"
wait_until 30 "2 peers converge" converged p0 p1
value=$(head -c 6000 /dev/zero | tr '\0' v)
for i in $(seq 1 40); do ctl p0 put "k/$i" "$value" >/dev/null || fail "put k/$i on p0 failed"; done
wait_until 30 "p1 reads p0's 40 writes" eval '[ "$(ctl p1 get k/40 2>/dev/null)" = "$value" ]'
log "p0's 40 writes (240 KB) replicate from 127.0.0.2 to 127.0.0.3"

vport=$(free_port)
"$ATTACKER" sink "tcp://127.0.0.5:$vport" "$CLUSTER_DIR/victim.bytes" &
EXTRA_PIDS+=($!)
wait_until 10 "the sink is up" test -s "$CLUSTER_DIR/victim.bytes"
bad0=$(stat_of p0 bad_input)
"$ATTACKER" digest "tcp://$(addr_of p0)" "tcp://127.0.0.5:$vport" 20 ||
    fail "the DIGESTs could not be sent"
log "sent p0 20 DIGESTs of new replicas naming the victim 127.0.0.5:$vport"
wait_until 30 "p0 refuses the 20 DIGESTs (bad_input)" stat_at_least p0 bad_input $((bad0 + 20))
ctl p0 put after 1 >/dev/null || fail "put after on p0 failed"
wait_until 30 "p1 still reads p0's next write" eval '[ "$(ctl p1 get after 2>/dev/null)" = 1 ]'
got=$(cat "$CLUSTER_DIR/victim.bytes")
log "victim received $got bytes; p0 bad_input $(stat_of p0 bad_input) (was $bad0)"
[ "$got" -lt 4096 ] || fail "the victim received $got bytes"
log "PASS"
