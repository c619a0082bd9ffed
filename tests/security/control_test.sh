#!/usr/bin/env bash
# Issue 12, item 1 and parts of item 12: the control plane apart from
# gossip, and command trainers as a privilege (docs/security.md, "The
# control endpoint"). Before the fix, any ZeroMQ client that reached an
# open peer's gossip port could `submit` a study with a command trainer
# and run commands on every peer as the peer's user.
#
#   - a raw client with no key (sl-store-client call, and peerctl pointed
#     at the gossip port) sends submit and a replayed put to the gossip
#     port: refused with where control is served, counted in bad_input;
#     nothing is stored, no command ever runs;
#   - the control socket is DATA/control.sock, mode 0600, in a 0700 data
#     directory;
#   - submit of a command trainer through it, in an open cluster without
#     --allow-commands: refused with the reason and what to do;
#   - a command-trainer spec written straight into the store (a forged
#     write): peers without --allow-commands never run it (refusal logged
#     and counted); a peer with --allow-commands joins and runs every
#     trial, so the spec was runnable, and only that peer ran it;
#   - submit on the peer with --allow-commands: runs;
#   - store-fault is refused without --test-faults;
#   - members --json and the members table print an incarnation past 2^53
#     exactly; stats prints store.state_hash exactly;
#   - a TCP control endpoint off loopback without a key: peer refuses to
#     start; with the key it starts, and only key holders are answered.
. "$(dirname "$0")/../cluster/lib.sh"
cluster_init
CLIENT=$BUILD/sl-store-client
[ -x "$CLIENT" ] || fail "no $CLIENT (build the sl-store-client target)"

# study NAME MARKER: a 2-trial study whose command appends its checkpoint
# directory (DATA/studies/...: says which peer ran it) to MARKER.
study() {
    cat <<JSON
{"name": "$1", "seed": 7,
 "trainer": {"type": "command", "command": "echo \$STARLING_CHECKPOINT_DIR >> $2; echo '{{\"epoch\": 1, \"x\": {x}}}'"},
 "search_space": {"x": {"type": "real", "low": 0, "high": 1}},
 "scheduler": {"type": "fifo", "epochs": 1},
 "objectives": [{"metric": "x", "goal": "max"}],
 "budget": {"trials": 2}, "concurrency": 2, "lease_ms": 1000}
JSON
}
M_GOSSIP=$CLUSTER_DIR/ran-gossip M_RAW=$CLUSTER_DIR/ran-raw M_CTL=$CLUSTER_DIR/ran-ctl
M_FORGED=$CLUSTER_DIR/ran-forged M_ALLOWED=$CLUSTER_DIR/ran-allowed
study gossip "$M_GOSSIP" >"$CLUSTER_DIR/gossip.json"
study ctl "$M_CTL" >"$CLUSTER_DIR/ctl.json"
study forged "$M_FORGED" >"$CLUSTER_DIR/forged.json"
study allowed "$M_ALLOWED" >"$CLUSTER_DIR/allowed.json"

names=(p0 p1 p2)
start_peer p0
for n in p1 p2; do start_peer "$n" --join "$(addr_of p0)"; done
wait_until 60 "3 open peers converge" converged "${names[@]}"

# The control socket: a Unix socket only the peer's user may open.
for n in "${names[@]}"; do
    [ -S "$(dir_of "$n")/control.sock" ] || fail "$n has no control socket in its data directory"
    mode=$(stat -c %a "$(dir_of "$n")/control.sock")
    [ "$mode" = 600 ] || fail "$n's control socket has mode $mode, want 600"
    mode=$(stat -c %a "$(dir_of "$n")")
    [ "$mode" = 700 ] || fail "$n's data directory has mode $mode, want 700"
done
log "ok: control sockets are mode 0600 in 0700 data directories"

# A raw ZeroMQ client with no key, on the gossip port: submit and a put.
bad0=$(stat_of p0 bad_input)
out=$("$CLIENT" call "$(addr_of p0)" submit "$(cat "$CLUSTER_DIR/gossip.json")" 2>&1) &&
    fail "submit on the gossip port succeeded: $out"
echo "$out" | grep -q "not served on the gossip port" || fail "gossip refusal unclear: $out"
echo "$out" | grep -q "control.sock" || fail "gossip refusal does not say where control is: $out"
out=$("$PEERCTL_BIN" --peer "$(addr_of p1)" --timeout 3000 submit "$CLUSTER_DIR/gossip.json" 2>&1) &&
    fail "peerctl submit on the gossip port succeeded: $out"
echo "$out" | grep -q "peerctl --peer" || fail "gossip refusal does not say how peerctl reaches it: $out"
# (a put replayed from a capture: refused the same way, nothing written)
out=$("$CLIENT" call "$(addr_of p0)" put replayed/key value 2>&1) &&
    fail "a put on the gossip port succeeded: $out"
ctl p0 get replayed/key >/dev/null 2>&1 && fail "the put on the gossip port was written"
wait_until 10 "p0 counts the gossip-port requests as bad input" \
    stat_at_least p0 bad_input_by_module.ctl 2
[ "$(stat_of p0 bad_input)" -ge $((bad0 + 2)) ] || fail "bad_input did not count the refusals"
[ "$(stat_of p1 ctl.refused)" -ge 1 ] || fail "p1 did not count the refused request"
log "ok: the gossip port refuses control requests (submit, put) with where control is"

# Through the control socket, an open cluster refuses command trainers.
out=$(ctl p0 submit "$CLUSTER_DIR/ctl.json" 2>&1) && fail "command study accepted without --allow-commands: $out"
echo "$out" | grep -q "command trainers are off in an open cluster" || fail "refusal unclear: $out"
echo "$out" | grep -q -- "--key" || fail "refusal does not say to use --key: $out"
echo "$out" | grep -q -- "--allow-commands" || fail "refusal does not name --allow-commands: $out"
[ "$(stat_of p0 bad_input_by_module.study)" -ge 1 ] || fail "the refused submit was not counted"
log "ok: submit of a command trainer refused without --allow-commands"

# A forged spec written straight into the store is never run here.
FID=00000000deadbeef
ctl p1 put "study/$FID/start" "$(date +%s%3N)" >/dev/null || fail "put of the forged start failed"
ctl p1 put "study/$FID/spec" "$(cat "$CLUSTER_DIR/forged.json")" >/dev/null ||
    fail "put of the forged spec failed"
refused_all() {
    for n in "${names[@]}"; do
        grep -q "STUDY-COMMAND-REFUSED.*$FID" "$CLUSTER_DIR/$n.log" || return 1
        stat_at_least "$n" bad_input_by_module.study 1 || return 1
    done
}
wait_until 30 "every open peer refuses the forged command study (logged, counted)" refused_all
for n in "${names[@]}"; do
    c=$(grep -c "STUDY-COMMAND-REFUSED" "$CLUSTER_DIR/$n.log")
    [ "$c" -le 2 ] || fail "$n logged the refusal $c times (once wanted)"
done

# A peer started with --allow-commands joins: it runs the forged study's
# trials (the spec was runnable) and a study submitted to it; nobody else
# ran anything.
start_peer p3 --allow-commands --join "$(addr_of p0)"
wait_until 60 "4 peers converge" converged p0 p1 p2 p3
ctl p3 submit "$CLUSTER_DIR/allowed.json" >/dev/null || fail "submit on the --allow-commands peer refused"
ran2() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge 2 ]; }
wait_until 90 "p3 runs the forged study's 2 trials" ran2 "$M_FORGED"
wait_until 90 "p3 runs the submitted study's 2 trials" ran2 "$M_ALLOWED"
for m in "$M_FORGED" "$M_ALLOWED"; do
    grep -v "^$(dir_of p3)/" "$m" && fail "a peer without --allow-commands ran a command ($m)"
done
for m in "$M_GOSSIP" "$M_RAW" "$M_CTL"; do
    [ -e "$m" ] && fail "a refused study ran: $m exists"
done
studies=$(ctl p0 keys study/ 2>/dev/null | grep -c '/spec$' || true)
[ "$studies" = 2 ] || fail "the store holds $studies study specs, want 2 (forged and allowed)"
log "ok: only the --allow-commands peer ran commands; the refused studies were never stored"

# store-fault is test-only.
out=$("$CLIENT" call "$(ctl_addr p0)" store-fault heal 2>&1) && fail "store-fault answered without --test-faults: $out"
echo "$out" | grep -q -- "--test-faults" || fail "store-fault refusal unclear: $out"
[ "$(stat_of p0 bad_input_by_module.store)" -ge 1 ] || fail "the store-fault refusal was not counted"
log "ok: store-fault refused without --test-faults"

# Exact integers: an incarnation past 2^53, and store.state_hash.
mkdir -p "$(dir_of big)" && chmod 700 "$(dir_of big)"
echo 9007199254740994 >"$(dir_of big)/incarnation" # the peer starts at 2^53 + 3
start_peer big
wait_until 30 "big answers" sees big big alive
members_json big | grep -q '"incarnation":9007199254740995[,}]' ||
    fail "members --json does not print incarnation 9007199254740995 exactly: $(members_json big)"
ctl big members | grep -q "^big (self) .* 9007199254740995 " ||
    fail "the members table does not print 9007199254740995: $(ctl big members)"
hash_json() { ctl p0 stats --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["store"]["state_hash"])'; }
past53() { python3 -c 'import sys; sys.exit(0 if int(sys.argv[1]) >= 2**53 else 1)' "$1"; }
i=0
while h=$(hash_json) && ! past53 "$h" && [ $i -lt 20 ]; do
    ctl p0 put "exact/$i" x >/dev/null
    i=$((i + 1))
done
past53 "$h" || fail "no state_hash past 2^53 in 20 puts"
hash_table=$(ctl p0 stats | awk '$1 == "store.state_hash" {print $2}')
h=$(hash_json)
[ "$hash_table" = "$h" ] || fail "stats prints state_hash $hash_table, --json says $h"
log "ok: incarnation and state_hash printed exactly ($h)"

# TCP control: off loopback only with a key.
"$PEERCTL_BIN" keygen >"$CLUSTER_DIR/cluster.key"
chmod 600 "$CLUSTER_DIR/cluster.key"
cport=$(free_port)
PORT[tcp]=$(free_port)
out=$("$PEER_BIN" --name tcp --listen "$(addr_of tcp)" --data "$(dir_of tcp)" \
    --control "0.0.0.0:$cport" 2>&1) && fail "peer started with an unkeyed control endpoint off loopback"
echo "$out" | grep -q "off loopback" || fail "the refusal to start is unclear: $out"
start_peer tcp --key "$CLUSTER_DIR/cluster.key" --control "0.0.0.0:$cport"
wait_until 30 "the keyed peer answers on its TCP control endpoint" \
    eval '"$PEERCTL_BIN" --peer 127.0.0.1:$cport --key "$CLUSTER_DIR/cluster.key" --timeout 2000 members >/dev/null 2>&1'
out=$("$PEERCTL_BIN" --peer "127.0.0.1:$cport" --timeout 1500 members 2>&1) &&
    fail "the TCP control endpoint answered a client without the key: $out"
echo "$out" | grep -q "refused the connection" || fail "keyless TCP control error unclear: $out"
log "ok: TCP control off loopback needs the key"
log "PASS"
