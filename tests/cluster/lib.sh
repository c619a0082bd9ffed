# Shared helpers for the cluster tests: start real `peer` processes on
# 127.0.0.1 with fast timers on free ports, ask them with `peerctl`, wait
# for conditions by polling `peerctl members --json` with generous
# deadlines, and kill everything on exit. Source it from a test:
#
#     . "$(dirname "$0")/lib.sh"
#     cluster_init
#     start_peer p0
#     start_peer p1 --join "$(addr_of p0)"
#     wait_until 30 "p0 sees p1 alive" sees p0 p1 alive
#
# A condition is a command that succeeds when it holds; wait_until polls
# it (every 0.1 s) and fails the test with the peers' logs if the
# deadline passes, or at once if a peer it started exits on its own.
# Fault durations (a SIGSTOP of 1 s) are the only sleeps.

set -u
BUILD=${SL_BUILD_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build}
PEER_BIN=$BUILD/peer
PEERCTL_BIN=$BUILD/peerctl
# Fast timers for tests (the defaults suit a LAN; see peer --help).
FAST_TIMERS=${FAST_TIMERS:---probe-interval 200 --probe-timeout 100 --suspicion-mult 3 --sync-interval 2000 --leave-wait 300}
declare -A PORT PID KEY_OF
# peers a test expects to exit by themselves (peers_running lets them)
declare -A MAY_EXIT
CLUSTER_DIR=
TEST_NAME=$(basename "$0" .sh)
EXTRA_PIDS=()

log() { echo "[$TEST_NAME $(date +%T.%3N)] $*" >&2; }

cleanup() {
    local rc=$?
    for n in "${!PID[@]}"; do
        kill -CONT "${PID[$n]}" 2>/dev/null
        kill -9 "${PID[$n]}" 2>/dev/null
    done
    for p in "${EXTRA_PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null # stress-ng stops its workers on TERM
    done
    wait 2>/dev/null
    if [ -n "$CLUSTER_DIR" ] && [ -d "$CLUSTER_DIR" ]; then
        if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
            log "FAILED (exit $rc); logs kept in $CLUSTER_DIR"
        elif [ -n "${SL_KEEP_LOGS:-}" ]; then
            log "logs kept in $CLUSTER_DIR (SL_KEEP_LOGS)"
        else
            rm -rf "$CLUSTER_DIR"
        fi
    fi
    exit $rc
}

fail() {
    log "FAIL: $*"
    for f in "$CLUSTER_DIR"/*.log; do
        [ -f "$f" ] || continue
        echo "---- $(basename "$f") (last 30 lines)" >&2
        tail -n 30 "$f" >&2
    done
    exit 1
}

skip() {
    log "SKIP: $*"
    exit 77
}

cluster_init() {
    [ -x "$PEER_BIN" ] || fail "no peer binary at $PEER_BIN (build first)"
    [ -x "$PEERCTL_BIN" ] || fail "no peerctl binary at $PEERCTL_BIN (build first)"
    command -v python3 >/dev/null || skip "python3 is needed (tools/setup installs it)"
    CLUSTER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sl-$TEST_NAME.XXXXXX")
    trap cleanup EXIT
    trap 'exit 130' INT TERM
}

# Prints a TCP port that is free now on 127.0.0.1, with the port after it
# (a peer's elastic ring: --ring-port defaults to the gossip port + 1),
# neither used by this test yet, below 32768: the kernel hands out ports from 32768 up for outgoing
# connections, so a port of ours there could be taken between two starts.
free_port() {
    local p
    while :; do
        p=$(python3 -c '
import random, socket
while True:
    p = random.randrange(20000, 32767)
    s, r = socket.socket(), socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        r.bind(("127.0.0.1", p + 1))
    except OSError:
        continue
    print(p)
    break')
        local used=0
        for q in "${PORT[@]}"; do [ "$q" = "$p" ] || [ "$q" = $((p + 1)) ] || [ "$((q + 1))" = "$p" ] && used=1; done
        [ $used = 0 ] && { echo "$p"; return; }
    done
}

# addr_of NAME: NAME's gossip address (--listen, what --join takes).
addr_of() { echo "127.0.0.1:${PORT[$1]}"; }

# dir_of NAME: NAME's data directory, what peerctl --peer takes to reach
# its control socket (DIR/control.sock; the gossip port serves no control).
dir_of() { echo "$CLUSTER_DIR/data/$1"; }

# ctl_addr NAME: NAME's control endpoint as a raw client dials it.
ctl_addr() { echo "ipc://$CLUSTER_DIR/data/$1/control.sock"; }

# start_peer NAME [peer options...]: starts NAME with fast timers, its own
# port (kept across restarts), data dir and log.
start_peer() {
    local name=$1
    shift
    [ -n "${PORT[$name]:-}" ] || PORT[$name]=$(free_port)
    local a prev=
    for a in "$@"; do
        [ "$prev" = --key ] && KEY_OF[$name]=$a
        prev=$a
    done
    # shellcheck disable=SC2086
    "$PEER_BIN" --name "$name" --listen "$(addr_of "$name")" --data "$CLUSTER_DIR/data/$name" \
        --log-level info $FAST_TIMERS "$@" >>"$CLUSTER_DIR/$name.log" 2>&1 &
    PID[$name]=$!
}

# ctl NAME [peerctl args...]: peerctl against NAME's control socket (in
# its data directory), with NAME's key (KEY_OF[NAME], set by start_peer
# from --key; unused on the socket, kept for a TCP --control) unless args
# give another.
ctl() {
    local name=$1
    shift
    local key=${KEY_OF[$name]:-}
    "$PEERCTL_BIN" --peer "$(dir_of "$name")" --timeout 2000 ${key:+--key "$key"} "$@"
}

# members_json NAME: NAME's member list as JSON (fails if NAME does not answer).
members_json() { ctl "$1" members --json 2>/dev/null; }

# state_of OBSERVER WHO: WHO's state in OBSERVER's view ("none" if absent).
state_of() {
    members_json "$1" | python3 -c '
import json, sys
who = sys.argv[1]
try:
    ms = json.load(sys.stdin)
except Exception:
    print("unreachable"); sys.exit(0)
print(next((m["state"] for m in ms if m["name"] == who), "none"))' "$2"
}

# incarnation_of OBSERVER WHO
incarnation_of() {
    members_json "$1" | python3 -c '
import json, sys
ms = json.load(sys.stdin)
print(next((m["incarnation"] for m in ms if m["name"] == sys.argv[1]), -1))' "$2"
}

# sees OBSERVER WHO STATE: succeeds when OBSERVER lists WHO in STATE.
sees() { [ "$(state_of "$1" "$2")" = "$3" ]; }

# all_see STATE WHO OBSERVER...: every observer lists WHO in STATE.
all_see() {
    local state=$1 who=$2
    shift 2
    for o in "$@"; do sees "$o" "$who" "$state" || return 1; done
}

# converged NAME...: each named peer lists exactly these peers, all alive.
converged() {
    local want
    want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
    for o in "$@"; do
        local got
        got=$(members_json "$o" | python3 -c '
import json, sys
try:
    ms = json.load(sys.stdin)
except Exception:
    sys.exit(0)
print(" ".join(sorted(m["name"] for m in ms if m["state"] == "alive")) + " ")') || return 1
        [ "$got" = "$want" ] || return 1
    done
}

# peers_running: fails the test at once, with the peer's last lines, if a
# peer this test started has exited without stop_peer or kill_peer (an
# abort, a crash): the condition waited for may never come, and its
# deadline would hide why (a study's view check once aborted two peers
# and the test waited 240 s for a study they would never finish).
peers_running() {
    local n
    for n in "${!PID[@]}"; do
        [ -z "${MAY_EXIT[$n]:-}" ] || continue
        kill -0 "${PID[$n]}" 2>/dev/null && continue
        local rc=0
        wait "${PID[$n]}" 2>/dev/null || rc=$?
        unset "PID[$n]"
        echo "---- $n.log (last 15 lines)" >&2
        tail -n 15 "$CLUSTER_DIR/$n.log" >&2
        fail "$n exited by itself (status $rc) while the test waited"
    done
}

# wait_until SECONDS DESCRIPTION COMMAND...: polls COMMAND until it
# succeeds; fails if the deadline passes or a peer dies on its own.
wait_until() {
    local secs=$1 desc=$2
    shift 2
    local deadline=$((SECONDS + secs))
    local t0=$(date +%s.%N)
    while ! "$@"; do
        peers_running
        if [ $SECONDS -ge $deadline ]; then
            fail "timed out after ${secs}s waiting for: $desc"
        fi
        sleep 0.1
    done
    log "ok: $desc ($(python3 -c "import sys;print('%.1f'%(float(sys.argv[2])-float(sys.argv[1])))" "$t0" "$(date +%s.%N)")s)"
}

# stop_peer NAME: SIGTERM, then wait for the exit; sets STOP_RC to its
# exit status. (Not in a $(...) subshell: only this shell can wait.)
STOP_RC=
stop_peer() {
    local name=$1 pid=${PID[$1]}
    kill -TERM "$pid"
    STOP_RC=0
    wait "$pid" || STOP_RC=$?
    unset "PID[$name]"
}

# kill_peer NAME: SIGKILL, no goodbye.
kill_peer() {
    kill -9 "${PID[$1]}"
    wait "${PID[$1]}" 2>/dev/null
    unset "PID[$1]"
}

# stat_of NAME DOTTED.KEY: a counter from `peerctl stats --json`.
stat_of() {
    ctl "$1" stats --json 2>/dev/null | python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v.get(k, 0) if isinstance(v, dict) else 0
print(v)' "$2"
}

# stat_at_least NAME DOTTED.KEY MIN: the counter has reached MIN.
stat_at_least() { [ "$(stat_of "$1" "$2")" -ge "$3" ] 2>/dev/null; }

# field PEER ID EXPR: a Python expression over `s`, the status of a study
# or an elastic job (ID) as PEER answers `status ID --json` ("" when it
# does not answer).
field() {
    ctl "$1" status "$2" --json 2>/dev/null | python3 -c '
import json, sys
try: s = json.load(sys.stdin)
except Exception: print(""); sys.exit(0)
print(eval(sys.argv[1]))' "$3"
}

# holds PEER ID EXPR: the expression is true of ID's status on PEER.
holds() { [ "$(field "$1" "$2" "$3")" = True ]; }
