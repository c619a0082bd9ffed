#!/usr/bin/env bash
# Replication of the store across real processes (docs/store.md,
# INVARIANTS.md S2): five peers; writes made on different peers reach
# every peer; a peer killed with -9 misses writes, restarts on its data
# directory and catches up (keeping what it wrote itself); a store-only
# partition (store-fault: store traffic dropped, membership untouched) of
# 2 against 3 peers with writes on both sides, one key written on both,
# converges after the heal: every peer reports one state_hash and reads
# every key, the contested key with one value everywhere.
. "$(dirname "$0")/lib.sh"
cluster_init
CLIENT=$BUILD/sl-store-client
[ -x "$CLIENT" ] || fail "no $CLIENT (build the sl-store-client target)"
names=(p0 p1 p2 p3 p4)
start_peer p0 --test-faults
for n in "${names[@]:1}"; do start_peer "$n" --test-faults --join "$(addr_of p0)"; done
wait_until 30 "5 peers converge" converged "${names[@]}"

# has NAME KEY VALUE: NAME reads VALUE under KEY.
has() { [ "$(ctl "$1" get "$2" 2>/dev/null)" = "$3" ]; }
# all_have KEYFILE NAME...: each NAME reads every "KEY VALUE" line of
# KEYFILE (pipelined gets on one connection per peer).
all_have() {
    local file=$1 n
    shift
    for n in "$@"; do "$CLIENT" expect "$(ctl_addr "$n")" "$file" 2>/dev/null || return 1; done
}
# written KEYFILE NAME KEY VALUE: a put on NAME, remembered in KEYFILE.
written() {
    ctl "$2" put "$3" "$4" >/dev/null || fail "put $3 on $2 failed"
    echo "$3 $4" >>"$1"
}
# same_hash NAME...: every NAME reports one store.state_hash.
same_hash() {
    local first= n h
    for n in "$@"; do
        h=$(stat_of "$n" store.state_hash) || return 1
        [ -n "$h" ] && [ "$h" != 0 ] || return 1
        [ -z "$first" ] && first=$h
        [ "$h" = "$first" ] || return 1
    done
}
sides_agree() { same_hash p0 p1 && same_hash p2 p3 p4; }
store_fault() { "$CLIENT" call "$(ctl_addr "$1")" store-fault "${@:2}" >/dev/null; }

# 1. writes on every peer reach every peer
K=$CLUSTER_DIR/keys
: >"$K"
for i in 0 1 2 3 4; do
    for j in 0 1 2; do written "$K" "p$i" "repl/p$i/$j" "from-p$i-$j"; done
done
wait_until 20 "every peer reads the 15 writes made on 5 peers" all_have "$K" "${names[@]}"
wait_until 20 "every peer reports one state_hash" same_hash "${names[@]}"

# 2. kill -9 misses writes, restarts on its data directory, catches up
kill_peer p4
for i in 0 1 2 3; do
    for j in 0 1 2; do written "$K" "p$i" "down/p$i/$j" "while-p4-down-$i-$j"; done
done
wait_until 20 "p0..p3 read every write" all_have "$K" p0 p1 p2 p3
start_peer p4 --test-faults --join "$(addr_of p0)"
wait_until 30 "5 peers converge after the restart" converged "${names[@]}"
[ "$(stat_of p4 incarnation)" -ge 2 ] || fail "p4 did not restart on its data directory"
wait_until 20 "the restarted p4 reads every write, its own and those it missed" all_have "$K" p4
wait_until 20 "every peer reports one state_hash after the restart" same_hash "${names[@]}"

# 3. a store-only partition {p0,p1} | {p2,p3,p4} with writes on both sides
for n in p0 p1; do store_fault "$n" block "$(addr_of p2)" "$(addr_of p3)" "$(addr_of p4)" ||
    fail "store-fault block on $n failed"; done
for n in p2 p3 p4; do store_fault "$n" block "$(addr_of p0)" "$(addr_of p1)" ||
    fail "store-fault block on $n failed"; done
A=$CLUSTER_DIR/side-a
B=$CLUSTER_DIR/side-b
: >"$A"
: >"$B"
for j in 0 1 2 3 4; do
    written "$A" p0 "part/a/$j" "side-a-$j"
    written "$A" p1 "part/a1/$j" "side-a1-$j"
    written "$B" p3 "part/b/$j" "side-b-$j"
    written "$B" p4 "part/b4/$j" "side-b4-$j"
done
ctl p1 put part/both from-a >/dev/null || fail "put part/both on p1 failed"
ctl p2 put part/both from-b >/dev/null || fail "put part/both on p2 failed"
wait_until 20 "side a (p0, p1) reads its writes" all_have "$A" p0 p1
wait_until 20 "side b (p2, p3, p4) reads its writes" all_have "$B" p2 p3 p4
wait_until 20 "each side agrees within itself" sides_agree
# the block holds: membership is whole, the store is not
converged "${names[@]}" || fail "membership split too: store-fault must block the store only"
for n in p2 p3 p4; do ! has "$n" part/a/0 side-a-0 || fail "$n read side a's write through the block"; done
for n in p0 p1; do ! has "$n" part/b/0 side-b-0 || fail "$n read side b's write through the block"; done
[ "$(stat_of p0 store.fault_dropped)" -gt 0 ] || fail "p0 dropped no store traffic while blocked"
for n in "${names[@]}"; do store_fault "$n" heal || fail "store-fault heal on $n failed"; done
cat "$A" "$B" >>"$K"
wait_until 20 "every peer reports one state_hash after the heal" same_hash "${names[@]}"
wait_until 20 "every peer reads every write of both sides and before" all_have "$K" "${names[@]}"
both=$(ctl p0 get part/both)
case $both in from-a | from-b) ;; *) fail "part/both reads '$both' on p0" ;; esac
for n in "${names[@]}"; do
    has "$n" part/both "$both" || fail "$n reads part/both as '$(ctl "$n" get part/both)', p0 as '$both'"
done
log "PASS"
