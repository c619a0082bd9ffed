#!/usr/bin/env bash
# Issue 12, item 5, on real peers: no DNS on the I/O path. The peers run
# with a resolver that never answers (a mount namespace whose
# /etc/resolv.conf names a UDP socket that swallows every query: what a
# dead DNS server looks like). An attacker sends p1 300 PINGs gossiping
# members at host names, and 300 blob GETs and 300 store SUMMARYs whose
# reply address is a host name. Before the fix ZeroMQ's I/O thread sat in
# getaddrinfo for each, p1 stopped answering and p0 and p2 declared it
# dead (still dead 300 s later). Now p1 refuses them (counted in
# bad_input), keeps answering, and nobody is declared dead. A peer told
# to advertise a name that does not resolve refuses to start, within the
# resolver deadline, and says why; one given `localhost` advertises
# 127.0.0.1.
# Needs root (a mount namespace, port 53 on 127.0.0.77): skipped without.
# SL_CLUSTER_LIB and SL_ATTACKER run it against another build's lib.sh and
# attacker (the figures before the fix, bench/results/security/membership.md).
. "${SL_CLUSTER_LIB:-$(dirname "$0")/../cluster/lib.sh}"
[ "$(id -u)" = 0 ] || skip "needs root for a mount namespace and port 53"
unshare -m true 2>/dev/null || skip "unshare -m is not allowed here"
cluster_init
ATTACKER=${SL_ATTACKER:-$BUILD/tests/security/security_net_names_test}
[ -x "$ATTACKER" ] || fail "no $ATTACKER (build the security_net_names_test target)"

printf 'nameserver 127.0.0.77\noptions timeout:5 attempts:2\n' >"$CLUSTER_DIR/resolv.conf"
python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.77", 53))
open(sys.argv[1], "w").close()
while True:
    s.recvfrom(4096)' "$CLUSTER_DIR/resolver-ready" &
EXTRA_PIDS+=($!)
wait_until 10 "the dead resolver's socket is bound" test -e "$CLUSTER_DIR/resolver-ready"
REAL_PEER=$PEER_BIN
PEER_BIN=$CLUSTER_DIR/peer-no-dns
cat >"$PEER_BIN" <<WRAP
#!/bin/sh
exec unshare -m sh -c 'mount --bind "$CLUSTER_DIR/resolv.conf" /etc/resolv.conf && exec "\$0" "\$@"' "$REAL_PEER" "\$@"
WRAP
chmod +x "$PEER_BIN"
# the resolver is dead inside: a name takes 20 s to fail
start=$(date +%s)
unshare -m sh -c "mount --bind '$CLUSTER_DIR/resolv.conf' /etc/resolv.conf && getent hosts x.dns.test" &&
    fail "x.dns.test resolved"
[ $(($(date +%s) - start)) -ge 4 ] || log "note: the dead resolver answered early"

names=(p0 p1 p2)
start_peer p0
for n in p1 p2; do start_peer "$n" --join "$(addr_of p0)"; done
wait_until 30 "3 peers converge" converged "${names[@]}"

bad0=$(stat_of p1 bad_input)
"$ATTACKER" dns "tcp://$(addr_of p1)" 300 || fail "the attack could not be sent"
log "sent p1 300 PINGs gossiping members at host names, 300 GETs and 300 SUMMARYs answered to host names"
# holds_for SECONDS DESC CMD...: CMD succeeds at every check for SECONDS.
holds_for() {
    local secs=$1 desc=$2
    shift 2
    local end=$(($(date +%s) + secs))
    while [ "$(date +%s)" -lt "$end" ]; do
        "$@" || fail "$desc stopped holding"
        peers_running
        sleep 0.2 # the poll period of a condition, not a stand-in for one
    done
    log "held for ${secs}s: $desc"
}
answers_and_alive() {
    ctl p1 stats --json >/dev/null 2>&1 && sees p0 p1 alive && sees p2 p1 alive &&
        sees p1 p0 alive && sees p1 p2 alive
}
holds_for 15 "p1 answers and p0, p2 see it alive (and it them)" answers_and_alive
wait_until 20 "p1 counts the 900 refusals in bad_input" stat_at_least p1 bad_input $((bad0 + 900))
ghosts=$(members_json p1 | grep -c ghost || true)
[ "$ghosts" = 0 ] || fail "p1 lists $ghosts members at host names"
log "p1: bad_input $(stat_of p1 bad_input) (was $bad0)"

# the operator's names: resolved once at start, or the peer does not start
port3=$(free_port)
PORT[p3]=$port3
t0=$(date +%s)
rc=0
timeout 30 "$PEER_BIN" --name p3 --listen "127.0.0.1:$port3" --advertise "p3.dns.test:$port3" \
    --data "$CLUSTER_DIR/data/p3" --join "$(addr_of p0)" $FAST_TIMERS >"$CLUSTER_DIR/p3.log" 2>&1 ||
    rc=$?
[ "$rc" = 2 ] || fail "a peer advertising an unresolvable name exited with $rc, not 2 (log: $(tail -3 "$CLUSTER_DIR/p3.log"))"
grep -q "cannot resolve --advertise 'tcp://p3.dns.test:$port3'" "$CLUSTER_DIR/p3.log" ||
    fail "no clear error for the unresolvable --advertise: $(tail -3 "$CLUSTER_DIR/p3.log")"
[ $(($(date +%s) - t0)) -le 12 ] || fail "the refusal took $(($(date +%s) - t0)) s"
PORT[p4]=$(free_port)
start_peer p4 --advertise "localhost:${PORT[p4]}" --join "$(addr_of p0)"
addr_in_view() {
    members_json "$1" | python3 -c '
import json, sys
print(next((m["addr"] for m in json.load(sys.stdin) if m["name"] == sys.argv[1]), ""))' "$2"
}
wait_until 30 "p4 joins, advertising localhost as 127.0.0.1" \
    eval '[ "$(addr_in_view p0 p4)" = "tcp://127.0.0.1:${PORT[p4]}" ]'
log "PASS"
