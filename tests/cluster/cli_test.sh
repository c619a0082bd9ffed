#!/usr/bin/env bash
# The command lines: help, bad flags and unreachable peers give clear
# errors and non-zero exits; STARLING_PEER and --peer pick the peer; the
# members table and stats read as documented (docs/cli.md).
. "$(dirname "$0")/lib.sh"
cluster_init

expect() { # expect WANT_RC PATTERN CMD...: runs CMD, checks exit code and output
    local want=$1 pat=$2
    shift 2
    local out rc=0
    out=$("$@" 2>&1) || rc=$?
    [ "$rc" = "$want" ] || fail "'$*' exited $rc, want $want: $out"
    echo "$out" | grep -q -- "$pat" || fail "'$*' output lacks '$pat': $out"
}

expect 0 "usage: peer" "$PEER_BIN" --help
expect 0 "--advertise" "$PEER_BIN" --help
expect 2 "unknown option '--bogus'" "$PEER_BIN" --bogus
expect 2 "needs a value" "$PEER_BIN" --name
expect 2 "HOST:PORT" "$PEER_BIN" --join nonsense
expect 2 "HOST:PORT" "$PEER_BIN" --listen 127.0.0.1:99999
expect 2 "below --probe-interval" "$PEER_BIN" --probe-interval 100 --probe-timeout 200
expect 2 "KEY=VALUE" "$PEER_BIN" --meta novalue
expect 1 "cannot read peers file" "$PEER_BIN" --peers-file "$CLUSTER_DIR/missing.txt"
expect 1 "does not exist" "$PEER_BIN" --key "$CLUSTER_DIR/missing.key"
echo "not a key" >"$CLUSTER_DIR/bad.key"
expect 1 "peerctl keygen" "$PEER_BIN" --key "$CLUSTER_DIR/bad.key"

expect 0 "usage: peerctl" "$PEERCTL_BIN" --help
expect 0 "without --out" "$PEERCTL_BIN" results --help
expect 2 "unknown command 'frobnicate'" "$PEERCTL_BIN" frobnicate
expect 2 "unknown option" "$PEERCTL_BIN" --bogus members
expect 2 "data directory" "$PEERCTL_BIN" --peer nonsense:port members
expect 1 "no control socket at $CLUSTER_DIR/none/control.sock" "$PEERCTL_BIN" --peer "$CLUSTER_DIR/none" members
expect 2 "unknown argument" "$PEERCTL_BIN" members --bogus
expect 0 "starling-cluster-key 1" "$PEERCTL_BIN" keygen
nobody=$(free_port)
PORT[nobody]=$nobody
expect 1 "cannot reach a control endpoint at tcp://127.0.0.1:$nobody: is \`peer\` running" \
    "$PEERCTL_BIN" --peer "127.0.0.1:$nobody" --timeout 500 members

start_peer a --meta zone=lab --meta gpus=0
start_peer b --join "$(addr_of a)"
wait_until 30 "a and b converge" converged a b
# Two peers cannot share a name's data directory (or a port).
expect 1 "in use" "$PEER_BIN" --name a --listen "127.0.0.1:$(free_port)" --data "$CLUSTER_DIR/data/a"
expect 1 "in use" "$PEER_BIN" --name c --listen "$(addr_of a)" --data "$CLUSTER_DIR/data/c"

table=$(STARLING_PEER=$(dir_of a) "$PEERCTL_BIN" members) || fail "members via STARLING_PEER failed"
echo "$table" | grep -q "^NAME  *ADDRESS  *STATE  *INCARNATION  *META" || fail "no table header: $table"
echo "$table" | grep -q "^a (self) .* alive .*gpus=0 version=.* zone=lab" || fail "a's row wrong: $table"
echo "$table" | grep -q "^2 members: 2 alive, 0 suspect, 0 dead, 0 left" || fail "no summary: $table"
# --advertise is what the others are told, apart from --listen.
PORT[c]=$(free_port)
"$PEER_BIN" --name c --listen "127.0.0.1:${PORT[c]}" --advertise "localhost:${PORT[c]}" \
    --data "$CLUSTER_DIR/data/c" --join "$(addr_of a)" $FAST_TIMERS >>"$CLUSTER_DIR/c.log" 2>&1 &
PID[c]=$!
wait_until 30 "a sees c alive" sees a c alive
members_json b | grep -q "\"addr\":\"tcp://127.0.0.1:${PORT[c]}\"" || fail "c's advertised address (localhost, resolved once at start) not used"
expect 0 "^net.msgs_in" "$PEERCTL_BIN" stats --peer "$(dir_of b)"
expect 0 '"bad_input"' "$PEERCTL_BIN" --peer "ipc://$(dir_of b)/control.sock" stats --json
# The gossip port answers peerctl with where control is served.
expect 1 "not served on the gossip port.*--peer" "$PEERCTL_BIN" --peer "$(addr_of b)" members
log "PASS"
