#!/usr/bin/env bash
# Issue 12, item 2, on real peers: one forged DELTA (a raw ZeroMQ client,
# no key, an open cluster) claiming p0's dots up to 2^40 is sent to p1.
# Before the fix p1 took it and p0's next 20 acknowledged puts never
# reached p1, no counter moved, and after p0's restart they were gone from
# p0 too. Now p1 refuses it and counts it (bad_input, store.forged), p0's
# 20 later writes reach p1 and p2, the three state hashes agree, and p0
# still reads them after a restart.
# Then a claim only 5 dots past p0's counter (within the bound, p1 takes
# it, and no heal fires): p0's next 20 writes must still all reach p1.
# Then a claim 1,000 dots ahead while p0's pushes to p1 are lost: the 5
# writes it hid reach p1 at the heal.
# The forger is tests/security/store_forged_delta_test's `send` mode
# ($SL_FORGER to use another build of it).
. "$(dirname "$0")/../cluster/lib.sh"
cluster_init
FORGER=${SL_FORGER:-$BUILD/tests/security/security_store_forged_delta_test}
[ -x "$FORGER" ] || fail "no $FORGER (build the security_store_forged_delta_test target)"
CLIENT=${SL_STORE_CLIENT:-$BUILD/sl-store-client}
[ -x "$CLIENT" ] || fail "no $CLIENT (build the sl-store-client target)"
names=(p0 p1 p2)
start_peer p0 --test-faults
for n in p1 p2; do start_peer "$n" --test-faults --join "$(addr_of p0)"; done
wait_until 30 "3 peers converge" converged "${names[@]}"

rid=$(sed -n 's/.*STORE-START.*store replica \([0-9a-f]*\) .*/\1/p' "$CLUSTER_DIR/p0.log" | tail -1)
[ -n "$rid" ] || fail "no replica id in p0's log"
has() { [ "$(ctl "$1" get "$2" 2>/dev/null)" = "$3" ]; }
ctl p0 put before 1 >/dev/null || fail "put on p0 failed"
wait_until 20 "p1 and p2 read p0's first write" eval 'has p1 before 1 && has p2 before 1'

bad0=$(stat_of p1 bad_input)
"$FORGER" send "tcp://$(addr_of p1)" "$rid" || fail "the forged delta could not be sent"
for i in $(seq 1 20); do ctl p0 put "after/$i" "v$i" >/dev/null || fail "put after/$i on p0 failed"; done
# all_read NAME [PREFIX [N]]: NAME reads p0's 20 later writes (PREFIX/1..N).
all_read() {
    local i
    for i in $(seq 1 "${3:-20}"); do has "$1" "${2:-after}/$i" "v$i" || return 1; done
}
wait_until 30 "p1 reads p0's 20 writes made after the forgery" all_read p1
wait_until 30 "p2 reads them" all_read p2
wait_until 10 "p1 counts the forged delta in bad_input" stat_at_least p1 bad_input $((bad0 + 1))
wait_until 10 "p1 counts it in store.forged" stat_at_least p1 store.forged 1
same_hash() {
    local h0 h1 h2
    h0=$(stat_of p0 store.state_hash) && h1=$(stat_of p1 store.state_hash) &&
        h2=$(stat_of p2 store.state_hash) || return 1
    [ -n "$h0" ] && [ "$h0" = "$h1" ] && [ "$h1" = "$h2" ]
}
wait_until 30 "p0, p1 and p2 report one state_hash" same_hash
log "p1: bad_input $(stat_of p1 bad_input), store.rejected $(stat_of p1 store.rejected), store.forged $(stat_of p1 store.forged)"

# A claim only 5 dots past p0's counter: within the bound, so p1 takes it,
# and p0's next writes pass it before any DIGEST could show it (no heal).
# Before, p1 dropped p0's next 5 writes as seen, for good; now it joins
# them from their writer (proto/store.md rule 4, store.rejoined).
wait_until 30 "p0, p1 and p2 agree before the second forgery" same_hash
seq0=$(stat_of p0 store.seq)
[ -n "$seq0" ] && [ "$seq0" -gt 0 ] || fail "no store.seq in p0's stats"
"$FORGER" send "tcp://$(addr_of p1)" "$rid" "$seq0" $((seq0 + 5)) ||
    fail "the forged delta 5 dots ahead could not be sent"
for i in $(seq 1 20); do ctl p0 put "few/$i" "v$i" >/dev/null || fail "put few/$i on p0 failed"; done
wait_until 30 "p1 reads p0's 20 writes made after a claim 5 dots ahead" all_read p1 few
wait_until 30 "p2 reads them" all_read p2 few
wait_until 10 "p1 took 5 of them from p0 although its vv counted them seen" \
    stat_at_least p1 store.rejoined 1
wait_until 30 "the hashes agree" same_hash
log "p1: store.rejoined $(stat_of p1 store.rejoined), store.forged $(stat_of p1 store.forged)"

# A claim 1,000 dots ahead while p0's pushes to p1 are lost (a store-only
# block between them): p0's 5 writes reach p2 only, and p1 counts their
# dots as seen. Once the block lifts, p0's next round with p1 (or with
# p2, if p1's deltas took the claim there) shows the claim: p0 heals and
# sends its peers again its writes past each one's last report
# (store.resent). Before, the 5 never reached p1.
store_fault() { "$CLIENT" call "$(ctl_addr "$1")" store-fault "${@:2}" >/dev/null; }
wait_until 30 "the hashes agree before the third forgery" same_hash
seq0=$(stat_of p0 store.seq)
store_fault p0 block "$(addr_of p1)" || fail "store-fault block on p0 failed"
store_fault p1 block "$(addr_of p0)" || fail "store-fault block on p1 failed"
"$FORGER" send "tcp://$(addr_of p1)" "$rid" "$seq0" $((seq0 + 1000)) ||
    fail "the forged delta 1,000 dots ahead could not be sent"
for i in $(seq 1 5); do ctl p0 put "lost/$i" "v$i" >/dev/null || fail "put lost/$i on p0 failed"; done
wait_until 30 "p2 reads p0's 5 writes" all_read p2 lost 5
all_read p1 lost 5 && fail "p1 read p0's writes through the block"
store_fault p0 heal || fail "store-fault heal on p0 failed"
store_fault p1 heal || fail "store-fault heal on p1 failed"
wait_until 30 "p1 reads p0's 5 writes its forged claim had hidden" all_read p1 lost 5
wait_until 10 "p0 healed" stat_at_least p0 store.healed 1
wait_until 10 "and sent them again" stat_at_least p0 store.resent 5
wait_until 30 "the hashes agree" same_hash
log "p0: store.healed $(stat_of p0 store.healed), store.resent $(stat_of p0 store.resent)"

stop_peer p0
start_peer p0 --join "$(addr_of p1)"
wait_until 30 "p0, restarted, still reads its 20 writes" all_read p0
wait_until 30 "and its 20 writes after the claim 5 dots ahead" all_read p0 few
wait_until 30 "and its 5 writes hidden from p1" all_read p0 lost 5
wait_until 30 "and the hashes agree again" same_hash
log "PASS"
