#!/usr/bin/env bash
# watch_rss.sh BUILD N PUTS: RSS of one peer with N `peerctl watch` clients
# that never read (SIGSTOPped once open) while PUTS puts of 64-byte values
# happen; then the clients are killed. Prints RSS (MB) at each step.
# A measurement run by hand for issue 12, item 9 (bench/results/security/
# studies.md), not a test.
B=$1; N=$2; PUTS=$3
D=$(mktemp -d "${TMPDIR:-/tmp}/sl-watch-rss.XXXX")
. "$(dirname "$0")/../../tests/cluster/lib.sh" # free_port
P=$(free_port)
C=$(free_port)
CTL=127.0.0.1:$P; EXTRA=
if $B/peer --help 2>&1 | grep -q -- '--control '; then CTL=127.0.0.1:$C; EXTRA="--control $CTL"; fi
$B/peer --name w0 --listen 127.0.0.1:$P --data $D/data $EXTRA --log-level notice >$D/peer.log 2>&1 &
PP=$!
sleep 1
rss() { awk '/VmRSS/{printf "%.1f", $2/1024}' /proc/$PP/status; }
stat() { $B/peerctl --peer $CTL stats --json | python3 -c 'import json,sys; v=json.load(sys.stdin); print(v.get("watch",{}).get(sys.argv[1],0))' $1; }
echo "rss_start_mb=$(rss)"
W=()
for i in $(seq $N); do $B/peerctl --peer $CTL watch >/dev/null 2>&1 & W+=($!); done
for t in $(seq 100); do [ "$(stat open)" -ge $N ] && break; sleep 0.1; done
[ $N -gt 0 ] && kill -STOP "${W[@]}"
echo "watches_open=$(stat open)"
MAX=0
( while kill -0 $PP 2>/dev/null; do r=$(rss); echo $r; sleep 0.2; done ) >$D/rss.trace &
TR=$!
$B/sl-store-client burst --count $PUTS --window 64 --no-observe --prefix longer-key-name-for-watch-lines/ $CTL >$D/burst.out 2>$D/burst.err
cat $D/burst.err; python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print(\"acked=%d write_s=%.1f\" % (v[\"acked\"], v[\"write_s\"]))" $D/burst.out
sleep 3
echo "rss_after_puts_mb=$(rss) rss_peak_mb=$(sort -n $D/rss.trace | tail -1) watches_open=$(stat open) watches_ended=$(stat ended)"
[ $N -gt 0 ] && { kill -9 "${W[@]}"; wait "${W[@]}" 2>/dev/null; }
sleep 32 # the peer trims freed memory every 30 s
echo "rss_after_clients_killed_mb=$(rss) watches_open=$(stat open)"
kill $TR 2>/dev/null; kill $PP; wait $PP 2>/dev/null
rm -rf $D
