#!/usr/bin/env bash
# The attacks of issue 12, item 1 and parts of item 12, against one build,
# for bench/results/security/control.md (the before and after figures):
#
#   bench/security/control_attack.sh BUILD_DIR
#
# Starts 3 open peers (no --key, default flags) on loopback and, as a
# client with no key on the gossip port (sl-store-client call: a raw
# ZeroMQ DEALER), tries: submit of a command-trainer study (how many
# peers ran the command), a replayed `put`, and the test-only
# store-fault; then a command-trainer spec written straight into the
# store (how many peers ran it), members --json of an incarnation past
# 2^53, and stats' state_hash in the table against --json. One line of
# results per attack. A build with --control (the fix) is asked on its
# control socket for what a local operator would read; the base build
# on its gossip port, where it served control.
set -u
B=$(cd "${1:?usage: control_attack.sh BUILD_DIR}" && pwd)
PEER=$B/peer PEERCTL=$B/peerctl CLIENT=$B/sl-store-client
D=$(mktemp -d /tmp/sl-ctl-attack.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$D"' EXIT
NEW=0
"$PEER" --help | grep -q -- --control && NEW=1
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -A PORT
start() {
    PORT[$1]=$(port)
    "$PEER" --name "$1" --listen "127.0.0.1:${PORT[$1]}" --data "$D/$1" --probe-interval 200 \
        --probe-timeout 100 --suspicion-mult 3 "${@:2}" >>"$D/$1.log" 2>&1 &
    PIDS+=($!)
}
# what the operator runs on the peer's machine
ctl() {
    if [ $NEW = 1 ]; then "$PEERCTL" --peer "$D/$1" --timeout 3000 "${@:2}"
    else "$PEERCTL" --peer "127.0.0.1:${PORT[$1]}" --timeout 3000 "${@:2}"; fi
}
alive() { [ "$(ctl "$1" members --json 2>/dev/null | grep -o '"state":"alive"' | wc -l)" -ge "$2" ]; }
wait_for() { local t=$1; shift; local end=$((SECONDS + t)); until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done; }
ran_on() { [ -f "$1" ] && sed -n 's|^'"$D"'/\([^/]*\)/.*|\1|p' "$1" | sort -u | wc -l || echo 0; }
spec() {
    cat <<JSON
{"name": "$1", "seed": 7,
 "trainer": {"type": "command", "command": "echo \$STARLING_CHECKPOINT_DIR >> $2; id -un >> $2.who; echo '{{\"epoch\": 1, \"x\": {x}}}'"},
 "search_space": {"x": {"type": "real", "low": 0, "high": 1}},
 "scheduler": {"type": "fifo", "epochs": 1},
 "objectives": [{"metric": "x", "goal": "max"}],
 "budget": {"trials": 9}, "concurrency": 3, "lease_ms": 1000}
JSON
}
start p0
start p1 --join "127.0.0.1:${PORT[p0]}"
start p2 --join "127.0.0.1:${PORT[p0]}"
wait_for 30 alive p0 3 || { echo "the 3 peers did not converge"; exit 1; }
echo "build: $B ($([ $NEW = 1 ] && echo 'with --control' || echo 'before: control on the gossip port'))"

# 1. remote commands: submit over the gossip port, no key
out=$("$CLIENT" call "127.0.0.1:${PORT[p0]}" submit "$(spec gossip "$D/ran-gossip")" 2>&1); rc=$?
wait_for 20 eval '[ "$(ran_on "$D/ran-gossip")" -ge 3 ]'
echo "remote submit of a command trainer on the gossip port: exit $rc; command ran on $(ran_on "$D/ran-gossip") of 3 peers as $(sort -u "$D/ran-gossip.who" 2>/dev/null | tr '\n' ' ')| reply: ${out:0:160}"

# 2. a put replayed to the gossip port
out=$("$CLIENT" call "127.0.0.1:${PORT[p1]}" put replayed/key evil 2>&1); rc=$?
got=$(ctl p1 get replayed/key 2>/dev/null || echo "(absent)")
echo "put replayed on the gossip port: exit $rc; replayed/key now reads: $got"

# 3. store-fault on a production peer
out=$("$CLIENT" call "127.0.0.1:${PORT[p2]}" store-fault block "127.0.0.1:${PORT[p0]}" 2>&1); rc=$?
echo "store-fault block on the gossip port: exit $rc: ${out:0:120}"
if [ $NEW = 1 ]; then
    out=$("$CLIENT" call "ipc://$D/p2/control.sock" store-fault block "127.0.0.1:${PORT[p0]}" 2>&1); rc=$?
    echo "store-fault block on the control socket (no --test-faults): exit $rc: ${out:0:120}"
fi

# 4. a command-trainer spec written into the store directly
ctl p1 put study/00000000deadbeef/start "$(date +%s%3N)" >/dev/null
ctl p1 put study/00000000deadbeef/spec "$(spec forged "$D/ran-forged")" >/dev/null
wait_for 20 eval '[ "$(ran_on "$D/ran-forged")" -ge 3 ]'
echo "command-trainer spec put into the store: ran on $(ran_on "$D/ran-forged") of 3 peers"

# 5. exact integers
mkdir -p "$D/big" && chmod 700 "$D/big" && echo 9007199254740994 >"$D/big/incarnation"
start big
wait_for 20 alive big 1
echo "members --json, incarnation 2^53+3 = 9007199254740995: $(ctl big members --json | grep -o '"incarnation":[^,]*')"
hj=$(ctl p0 stats --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["store"]["state_hash"])')
ht=$(ctl p0 stats | awk '$1 == "store.state_hash" {print $2}')
echo "stats state_hash: --json $hj, table $ht ($([ "$hj" = "$ht" ] && echo exact || echo differs))"
echo "bad_input on p0: $(ctl p0 stats --json | python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["bad_input"], v.get("bad_input_by_module", {}))')"
