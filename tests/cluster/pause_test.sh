#!/usr/bin/env bash
# A peer stopped with SIGSTOP for 1 s while the machine is fully loaded
# (stress-ng on every core) is not declared dead by anyone: it may be
# suspected, then it refutes and stays alive.
. "$(dirname "$0")/lib.sh"
command -v stress-ng >/dev/null || skip "stress-ng is not installed (tools/setup installs it)"
cluster_init
# Default timers (a LAN's): the pause is judged against what users run.
FAST_TIMERS="--leave-wait 300"
names=(p0 p1 p2 p3 p4)
start_peer p0
for n in "${names[@]:1}"; do start_peer "$n" --join "$(addr_of p0)"; done
wait_until 60 "5 peers converge" converged "${names[@]}"

stress-ng --cpu "$(nproc)" --timeout 60s >/dev/null 2>&1 &
EXTRA_PIDS+=($!)
STRESS=$!
# Let the load start before the pause: stress-ng has forked its workers.
has_children() { grep -qs "^PPid:[[:space:]]*$1\$" /proc/[0-9]*/status; }
wait_until 10 "stress-ng is running" has_children "$STRESS"

# Watch every other peer's view of p2 from now until well after the pause.
watch_views() {
    local end=$((SECONDS + 12))
    while [ $SECONDS -lt $end ]; do
        for o in p0 p1 p3 p4; do
            local s
            s=$(state_of "$o" p2)
            echo "$o $s"
        done
    done
}
watch_views >"$CLUSTER_DIR/views.txt" &
WATCH=$!
kill -STOP "${PID[p2]}"
sleep 1 # the fault itself: a 1 s pause
kill -CONT "${PID[p2]}"
wait $WATCH
kill "$STRESS" 2>/dev/null
if grep -q " dead" "$CLUSTER_DIR/views.txt"; then
    grep " dead" "$CLUSTER_DIR/views.txt" | head -3 >&2
    fail "p2 was declared dead after a 1 s pause"
fi
# The views are samples; the survivors' logs have every state change.
for o in p0 p1 p3 p4; do
    if grep -q "PEER-MEMBER *p2 is now dead" "$CLUSTER_DIR/$o.log"; then
        fail "$o declared p2 dead after a 1 s pause"
    fi
done
log "views of p2 during and after the pause: $(sort "$CLUSTER_DIR/views.txt" | awk '{print $2}' | sort | uniq -c | tr '\n' ' ')"
wait_until 30 "everyone sees p2 alive again" all_see alive p2 p0 p1 p3 p4

# Control: the check above can fail. A pause as long as it takes to be
# declared dead is seen in the logs; resumed, the member refutes with a
# higher incarnation and is alive again everywhere.
declared_dead() { grep -q "PEER-MEMBER *p3 is now dead" "$CLUSTER_DIR"/p[0124].log; }
inc_before=$(incarnation_of p0 p3)
kill -STOP "${PID[p3]}"
wait_until 60 "a long pause of p3 is declared dead (the check can fail)" declared_dead
kill -CONT "${PID[p3]}"
wait_until 60 "p3 refutes and is alive everywhere again" all_see alive p3 p0 p1 p2 p4
inc_after=$(incarnation_of p0 p3)
[ "$inc_after" -gt "$inc_before" ] || fail "p3 came back without a higher incarnation ($inc_before -> $inc_after)"
log "PASS"
