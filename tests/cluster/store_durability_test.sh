#!/usr/bin/env bash
# The replicated store on real processes (INVARIANTS.md S2, S3): three
# peers; writes acknowledged by `peerctl put` on p0 while p0 is killed -9
# at an arbitrary moment; p0 restarts; every acknowledged write is then on
# every peer.
. "$(dirname "$0")/lib.sh"
cluster_init
names=(p0 p1 p2)
start_peer p0
for n in "${names[@]:1}"; do start_peer "$n" --join "$(addr_of p0)"; done
wait_until 60 "3 peers converge" converged "${names[@]}"
out=$(ctl p0 put probe/key v 2>&1) || fail "put failed: $out"
acked=()
# writes in the background of a kill: only those acknowledged count
( for i in $(seq 1 200); do
      if ctl p0 put "k/$i" "value-$i" >/dev/null 2>&1; then echo "$i"; fi
  done ) >"$CLUSTER_DIR/acked" &
writer=$!
EXTRA_PIDS+=("$writer")
acked_at_least() { [ "$(wc -l <"$CLUSTER_DIR/acked")" -ge "$1" ]; }
wait_until 60 "50 writes acknowledged" acked_at_least 50
kill_peer p0
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
mapfile -t acked <"$CLUSTER_DIR/acked"
log "${#acked[@]} writes acknowledged before the kill"
start_peer p0 --join "$(addr_of p1)"
wait_until 60 "3 peers converge again" converged "${names[@]}"
has_all() {
    local n=$1 i
    for i in "${acked[@]}"; do
        [ "$(ctl "$n" get "k/$i" 2>/dev/null)" = "value-$i" ] || return 1
    done
}
for n in "${names[@]}"; do
    wait_until 60 "$n holds every acknowledged write" has_all "$n"
done
log "PASS"
