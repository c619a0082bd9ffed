#!/usr/bin/env bash
# Issue 12, item 8, on real peers: blob GET reflection. p0 and p1 listen
# on 127.0.0.2 and 127.0.0.3 (all of 127/8 is local), a victim (a ZeroMQ
# sink counting what it receives) on 127.0.0.5, the attacker connects from
# 127.0.0.1. The attacker sends p0 200 GETs of a 1 MiB chunk p0 holds,
# naming the victim as reply address. Before the fix p0 sent the victim
# 200 MiB for 20 KB asked. Now p0 answers a GET only at the sender's own
# host (ZeroMQ's Peer-Address): the victim gets nothing, p0 counts 200
# refusals in bad_input, an honest fetch between the two peers on their
# two addresses still works, and a GET naming the attacker's own address
# is answered.
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

head -c $((1024 * 1024)) /dev/urandom >"$CLUSTER_DIR/blob.bin"
hash=$(ctl p0 blob put "$CLUSTER_DIR/blob.bin" | grep -o '[0-9a-f]\{64\}' | head -1)
[ -n "$hash" ] || fail "blob put on p0 printed no hash"
ctl p1 blob get "$hash" "$CLUSTER_DIR/got.bin" >/dev/null || fail "p1 cannot fetch p0's blob"
cmp -s "$CLUSTER_DIR/blob.bin" "$CLUSTER_DIR/got.bin" || fail "p1 fetched other bytes"
log "an honest fetch from 127.0.0.3 of a blob on 127.0.0.2 works"
chunk_file=$(find "$CLUSTER_DIR/data/p0" -path '*/blobs/*' -type f -size +1000k | head -1)
chunk=$(basename "$chunk_file" | grep -o '^[0-9a-f]\{64\}' || true)
[ -n "$chunk" ] || fail "no 1 MiB chunk file under p0's data directory"

vport=$(free_port)
"$ATTACKER" sink "tcp://127.0.0.5:$vport" "$CLUSTER_DIR/victim.bytes" &
EXTRA_PIDS+=($!)
aport=$(free_port)
"$ATTACKER" sink "tcp://127.0.0.1:$aport" "$CLUSTER_DIR/own.bytes" &
EXTRA_PIDS+=($!)
wait_until 10 "the sinks are up" eval 'test -s "$CLUSTER_DIR/victim.bytes" && test -s "$CLUSTER_DIR/own.bytes"'
bytes() { cat "$CLUSTER_DIR/$1.bytes" 2>/dev/null || echo 0; }

bad0=$(stat_of p0 bad_input)
"$ATTACKER" get "tcp://$(addr_of p0)" "tcp://127.0.0.5:$vport" "$chunk" "$hash" 200 ||
    fail "the GETs could not be sent"
log "sent 200 GETs naming the victim 127.0.0.5:$vport"
wait_until 30 "p0 refuses the 200 GETs (bad_input)" stat_at_least p0 bad_input $((bad0 + 200))
# the refusals are counted as they are read, the answers (if any) sent
# at the same time: a byte sent would be there by now
"$ATTACKER" get "tcp://$(addr_of p0)" "tcp://127.0.0.1:$aport" "$chunk" "$hash" 1 ||
    fail "the GET naming the attacker's own address could not be sent"
wait_until 30 "a GET naming the sender's own address is answered" \
    eval '[ "$(bytes own)" -ge $((1024 * 1024)) ]'
got=$(bytes victim)
log "victim received $got bytes; p0 bad_input $(stat_of p0 bad_input) (was $bad0)"
[ "$got" -lt 65536 ] || fail "the victim received $got bytes"
log "PASS"
