#!/usr/bin/env bash
# With a cluster key: peers holding it form the cluster; a client with a
# wrong key or no key is refused with a clear error; a peer with a wrong
# key cannot join.
. "$(dirname "$0")/lib.sh"
cluster_init
"$PEERCTL_BIN" keygen >"$CLUSTER_DIR/cluster.key"
"$PEERCTL_BIN" keygen >"$CLUSTER_DIR/other.key"
chmod 600 "$CLUSTER_DIR"/*.key
KEY=$CLUSTER_DIR/cluster.key
names=(p0 p1 p2)
start_peer p0 --key "$KEY"
for n in "${names[@]:1}"; do start_peer "$n" --key "$KEY" --join "$(addr_of p0)"; done
wait_until 60 "3 keyed peers converge" converged "${names[@]}"
grep -q "PEER-OPEN" "$CLUSTER_DIR/p0.log" && fail "a keyed peer said the cluster is open"

# Clients without the key, or with another one, are refused.
# (plain peerctl here: ctl would add p0's key)
raw_ctl() { "$PEERCTL_BIN" --peer "$(addr_of p0)" --timeout 1500 "$@"; }
out=$(raw_ctl members 2>&1) && fail "members without a key succeeded: $out"
echo "$out" | grep -q "refused the connection" || fail "no-key error unclear: $out"
echo "$out" | grep -q -- "--key" || fail "no-key error does not say to pass --key: $out"
out=$(raw_ctl --key "$CLUSTER_DIR/other.key" members 2>&1) &&
    fail "members with a wrong key succeeded: $out"
echo "$out" | grep -q "refused the connection" || fail "wrong-key error unclear: $out"
out=$(raw_ctl --key "$CLUSTER_DIR/missing.key" members 2>&1) && fail "missing key file accepted"
echo "$out" | grep -q "does not exist" || fail "missing key file error unclear: $out"
[ "$(stat_of p0 net.handshake_failed)" -ge 2 ] || fail "refused clients not counted"

# A peer with the wrong key cannot join, and nobody lists it.
before=$(stat_of p0 net.handshake_failed)
start_peer intruder --key "$CLUSTER_DIR/other.key" --join "$(addr_of p0)"
wait_until 20 "intruder answers its own (wrong-key) client" sees intruder intruder alive
# It keeps re-dialling its seed; p0 refuses each handshake.
wait_until 20 "p0 refuses the intruder's handshakes" stat_at_least p0 net.handshake_failed $((before + 1))
for o in "${names[@]}"; do
    [ "$(state_of "$o" intruder)" = none ] || fail "$o lists the intruder"
done
n=$(members_json intruder | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$n" = 1 ] || fail "the intruder sees $n members, want only itself"

# A peer without a key cannot join either, and says the cluster is open.
start_peer open --join "$(addr_of p0)"
wait_until 20 "keyless peer answers" sees open open alive
wait_until 10 "keyless peer warns that it is open" grep -q PEER-OPEN "$CLUSTER_DIR/open.log"
wait_until 20 "p0 refuses the keyless peer" stat_at_least p0 net.handshake_failed $(($(stat_of p0 net.handshake_failed) + 1))
for o in "${names[@]}"; do
    [ "$(state_of "$o" open)" = none ] || fail "$o lists the keyless peer"
done
log "PASS"
