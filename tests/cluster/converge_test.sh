#!/usr/bin/env bash
# 10 peers on loopback, each joining through the first: every peer lists
# all 10 alive.
. "$(dirname "$0")/lib.sh"
cluster_init
N=10
start_peer p0
wait_until 20 "p0 answers" sees p0 p0 alive
# Half join with --join, half through a peers file that also lists an
# address where nobody listens (retried, not fatal).
dead_port=$(free_port)
PORT[nobody]=$dead_port # reserved: nothing listens there
printf '# seeds\n127.0.0.1:%s\n\n%s  # the first peer\n' "$dead_port" "$(addr_of p0)" >"$CLUSTER_DIR/peers.txt"
names=(p0)
for i in $(seq 1 $((N - 1))); do
    if [ $((i % 2)) = 0 ]; then
        start_peer "p$i" --join "$(addr_of p0)"
    else
        start_peer "p$i" --peers-file "$CLUSTER_DIR/peers.txt"
    fi
    names+=("p$i")
done
wait_until 60 "all $N peers list all $N alive" converged "${names[@]}"
# Each member's record carries its metadata (version at least).
members_json p5 | python3 -c '
import json, sys
ms = json.load(sys.stdin)
assert len(ms) == 10, ms
for m in ms:
    for k in ("name", "addr", "state", "incarnation", "meta"):
        assert k in m, (k, m)
    assert "version" in m["meta"], m
' || fail "members --json lacks a field"
ctl p3 members | grep -q "10 members: 10 alive" || fail "members table does not say 10 alive"
# A peer whose only seed never answers keeps running and says why it is alone.
start_peer lonely --join "127.0.0.1:$dead_port" 
wait_until 20 "a peer with an unreachable seed warns and keeps trying" grep -q PEER-ALONE "$CLUSTER_DIR/lonely.log"
kill -0 "${PID[lonely]}" || fail "a peer with an unreachable seed exited"
log "PASS"
