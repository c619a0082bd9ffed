#!/usr/bin/env bash
# kill -9 of one peer: every survivor declares it dead (not left).
. "$(dirname "$0")/lib.sh"
cluster_init
names=(p0 p1 p2 p3 p4 p5)
start_peer p0
for n in "${names[@]:1}"; do start_peer "$n" --join "$(addr_of p0)"; done
wait_until 60 "6 peers converge" converged "${names[@]}"
kill_peer p3
survivors=(p0 p1 p2 p4 p5)
wait_until 30 "every survivor sees p3 dead" all_see dead p3 "${survivors[@]}"
for o in "${survivors[@]}"; do
    sees "$o" p4 alive || fail "$o no longer sees p4 alive"
done
log "PASS"
