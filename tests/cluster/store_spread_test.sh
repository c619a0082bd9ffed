#!/usr/bin/env bash
# How writes spread past 32 others (docs/store.md, "How writes spread";
# src/store/store_spread.c), with real processes: 36 peers, so a write
# goes by rumor (its writer sends it to 6 members, each member it brings
# news to relays it to 6 more). Writes made on three peers reach every
# peer; members relayed them (store.relayed); each writer sent at most 6
# DELTAs per write of its own (store.pushed against store.seq: up to 32
# others it would be one to every member, 35); and no relayed write that
# came back to its writer was refused (bad input under `store` stays 0
# everywhere: the writer takes it as a duplicate, proto/store.md rule 3).
# The timing figures are bench/store/spread_peers.py's and the
# simulator's (bench/results/store.md).
. "$(dirname "$0")/lib.sh"
cluster_init
CLIENT=$BUILD/sl-store-client
[ -x "$CLIENT" ] || fail "no $CLIENT (build the sl-store-client target)"
N=36
FANOUT=6
names=()
for i in $(seq 0 $((N - 1))); do names+=("p$i"); done
start_peer p0
for n in "${names[@]:1}"; do start_peer "$n" --join "$(addr_of p0)"; done

# rumor: every peer sees more than 33 alive (itself and 32 others), so
# it relays (a member or two may be suspected now and then on a loaded
# machine: the relays do not need all 36)
rumor_on() {
    local n
    for n in "${names[@]}"; do stat_at_least "$n" members.alive 34 || return 1; done
}
wait_until 120 "each of $N peers sees at least 34 alive" rumor_on

# all_have KEYFILE NAME...: each NAME reads every "KEY VALUE" line of KEYFILE.
all_have() {
    local file=$1 n
    shift
    for n in "$@"; do "$CLIENT" expect "$(ctl_addr "$n")" "$file" 2>/dev/null || return 1; done
}
K=$CLUSTER_DIR/keys
: >"$K"
writers=(p0 p11 p22)
# what each writer pushed before (while it joined, with 32 others or
# fewer alive, a peer's own writes went to all of them)
declare -A PUSHED0 SEQ0
for w in "${writers[@]}"; do
    PUSHED0[$w]=$(stat_of "$w" store.pushed)
    SEQ0[$w]=$(stat_of "$w" store.seq)
done
for w in "${writers[@]}"; do
    for j in 0 1 2 3 4; do
        ctl "$w" put "spread/$w/$j" "v-$w-$j" >/dev/null || fail "put spread/$w/$j on $w failed"
        echo "spread/$w/$j v-$w-$j" >>"$K"
    done
done
wait_until 30 "every one of $N peers reads the 15 writes" all_have "$K" "${names[@]}"

relayed=0
for n in "${names[@]}"; do
    r=$(stat_of "$n" store.relayed)
    relayed=$((relayed + r))
    bad=$(stat_of "$n" bad_input_by_module.store)
    [ "$bad" = 0 ] || fail "$n counted $bad bad store messages (an echo refused?)"
done
# each write reaches about 35 peers that relay it to 6: well over 15 x 6
# (the count also holds the peers' own writes at start)
[ "$relayed" -ge $((15 * FANOUT)) ] || fail "only $relayed DELTAs relayed for 15 writes"
log "ok: $relayed DELTAs relayed, no bad input"
for w in "${writers[@]}"; do
    pushed=$(($(stat_of "$w" store.pushed) - PUSHED0[$w]))
    seq=$(($(stat_of "$w" store.seq) - SEQ0[$w]))
    [ "$pushed" -ge "$FANOUT" ] && [ "$pushed" -le $((FANOUT * seq)) ] ||
        fail "$w pushed $pushed DELTAs for $seq writes of its own (at most $FANOUT each)"
    log "ok: $w pushed $pushed DELTAs for its $seq writes"
done
log "PASS"
