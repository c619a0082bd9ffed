#!/usr/bin/env bash
# Issue 12, item 9: a watch whose client never reads ends when it falls
# 8 MiB behind, and what it held goes back (docs/cli.md). Two `peerctl
# watch` clients are stopped (SIGSTOP: connected, reading nothing) while
# 300,000 puts go to p0; a third watch reads normally. The stopped ones'
# watches must end, p0's resident memory must stay within 40 MB of p1's
# (which holds the same keys and has no watches; before the fix ZeroMQ
# queued every change for them: about 60 MB each here), and the reading
# watch must stay open and see the last put.
. "$(dirname "$0")/../cluster/lib.sh"
cluster_init
CLIENT=$BUILD/sl-store-client
[ -x "$CLIENT" ] || fail "no sl-store-client at $CLIENT (build it: ninja sl-store-client)"
start_peer p0
start_peer p1 --join "$(addr_of p0)"
wait_until 30 "2 peers converge" converged p0 p1

"$PEERCTL_BIN" --peer "$(ctl_addr p0)" watch slow/ --json >"$CLUSTER_DIR/reader.out" 2>"$CLUSTER_DIR/reader.err" &
READER=$!
EXTRA_PIDS+=($READER)
STOPPED=()
for i in 1 2; do
    "$PEERCTL_BIN" --peer "$(ctl_addr p0)" watch --json >/dev/null 2>&1 &
    STOPPED+=($!)
    EXTRA_PIDS+=($!)
done
wait_until 30 "3 watches open on p0" stat_at_least p0 watch.open 3
kill -STOP "${STOPPED[@]}"
N=300000
"$CLIENT" burst --count $N --window 64 --no-observe --prefix slow/ "$(ctl_addr p0)" \
    >"$CLUSTER_DIR/burst.out" 2>&1 || fail "the puts failed: $(tail -3 "$CLUSTER_DIR/burst.out")"
log "$N puts done"
rss_mb() { awk '/VmRSS/{print int($2 / 1024)}' "/proc/${PID[$1]}/status"; }
ended_two() { [ "$(stat_of p0 watch.ended)" -ge 2 ] 2>/dev/null; }
wait_until 60 "the stopped clients' watches end" ended_two
last=$(printf 'slow/%07d' $((N - 1)))
reader_done() { grep -q "\"key\":\"$last\"" "$CLUSTER_DIR/reader.out"; }
wait_until 60 "the reading watch shows the last put" reader_done
kill -0 "$READER" 2>/dev/null || fail "the reading watch ended: $(cat "$CLUSTER_DIR/reader.err")"
[ "$(stat_of p0 watch.open)" = 1 ] || fail "watch.open is $(stat_of p0 watch.open), not 1 (the reader)"
same_keys() { [ "$(ctl p1 get "$last" 2>/dev/null | wc -c)" -gt 0 ]; }
wait_until 60 "p1 holds the last put" same_keys
r0=$(rss_mb p0)
r1=$(rss_mb p1)
log "resident: p0 $r0 MB (2 stopped watches, 1 reader), p1 $r1 MB (no watches)"
[ $((r0 - r1)) -le 40 ] || fail "p0 holds $((r0 - r1)) MB more than p1 for its watches (over 40)"
kill -CONT "${STOPPED[@]}"
log "PASS"
