#!/usr/bin/env bash
# Issue 12 item 3: a full disk, for real. p1's data directory is a 4 MiB
# tmpfs. Filled: p1 refuses writes with a clear error and still serves
# reads; 4 s of writes to p0 (p1 receives their deltas) and refused writes
# to p1 do not grow p1's memory or its log. Space back: p1 takes writes
# again without a restart, catches up with p0, and its log does not grow
# by itself. Filled again: p1 restarts after kill -9 (its incarnation is
# rewritten in place, no space needed), and takes writes once space is back.
#
# Before the fix p1's RSS grew with every received delta (874 MB in 4 s in
# the campaign), its log grew by itself once space returned (1 MB -> 268
# MB), it never took writes again, and it could not restart ("cannot write
# incarnation").
#
# Needs root (mount); exits 77 (skipped) otherwise.
. "$(dirname "$0")/../cluster/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to mount a 4 MiB tmpfs as a peer's data directory"
command -v mount >/dev/null || skip "no mount command"
cluster_init
mnt=$CLUSTER_DIR/data/p1
mkdir -p "$mnt"
mount -t tmpfs -o size=4m,mode=0700 tmpfs "$mnt" 2>/dev/null ||
    skip "cannot mount a tmpfs here (no CAP_SYS_ADMIN?)"
trap 'rc_=$?; for n in "${!PID[@]}"; do kill -9 "${PID[$n]}" 2>/dev/null; done; wait 2>/dev/null;
      umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null; (exit $rc_); cleanup' EXIT

fill() { # fills p1's tmpfs to the last byte
    dd if=/dev/zero of="$mnt/filler$1" bs=64k 2>/dev/null
    dd if=/dev/zero of="$mnt/filler$1.tail" bs=512 2>/dev/null
    return 0
}
wal_size() { stat -c %s "$mnt/store/wal"; }
same_state() {
    local a b
    a=$(stat_of p0 store.state_hash) && b=$(stat_of p1 store.state_hash) || return 1
    [ -n "$a" ] && [ "$a" != 0 ] && [ "$a" = "$b" ]
}
put_ok() { ctl "$1" put "$2" "$3" >/dev/null 2>&1; }

start_peer p0
start_peer p1 --join "$(addr_of p0)"
wait_until 30 "p0 and p1 converged" converged p0 p1
put_ok p1 before 1 || fail "p1 refused a write before its disk was full"
wait_until 30 "p0 and p1 agree" same_state

val=$(head -c 4000 /dev/zero | tr '\0' v)
refused() { # refused [TAG]: writes 4000-byte values to p1 until one is refused
    local i
    for i in $(seq 1 50); do
        out=$(ctl p1 put "fill${1:-}/$i" "$val" 2>&1) || return 0
    done
    return 1 # the last page of the log had room for a few: now it has none
}
fill 1
log "p1's disk: $(df -k --output=avail "$mnt" | tail -n 1 | tr -d ' ') KiB free"
refused || fail "p1 accepted 50 writes of 4000 bytes on a full disk"
log "p1 refuses a write: $out"
[ "$(ctl p1 get before)" = 1 ] || fail "p1 does not serve reads on a full disk"

rss0=$(stat_of p1 rss_bytes)
wal0=$(wal_size)
small=$(head -c 1000 /dev/zero | tr '\0' w)
load() { # load N: writes to p0 (p1 gets the deltas) and to p1 (refused) for 4 s
    # at most 150 of 1000 bytes each: what p0 takes must fit on p1's 4 MiB
    # twice (its log, and the RESET snapshot it logs after its restart)
    local end=$((SECONDS + 4)) i=0
    while [ $SECONDS -lt $end ] && [ $i -lt 150 ]; do
        ctl p0 put "load/$1/$i" "$small" >/dev/null 2>&1
        ctl p1 put "refused/$1/$i" "$small" >/dev/null 2>&1
        i=$((i + 1))
    done
    echo "$i" >"$CLUSTER_DIR/load.$1"
}
for j in 1 2 3 4; do load $j & done
wait $(jobs -p | grep -v -w -e "${PID[p0]}" -e "${PID[p1]}") 2>/dev/null
peers_running
total=$(cat "$CLUSTER_DIR"/load.* | paste -sd+ | bc)
rss1=$(stat_of p1 rss_bytes)
wal1=$(wal_size)
grow=$(((rss1 - rss0) / 1048576))
log "full disk, $total writes to p0 and $total to p1 (1000 B): p1 RSS $((rss0 / 1048576)) -> $((rss1 / 1048576)) MiB, log $wal0 -> $wal1 bytes"
[ "$grow" -lt 16 ] || fail "p1's memory grew by $grow MiB on a full disk"
[ "$wal1" = "$wal0" ] || fail "p1's log changed on a full disk ($wal0 -> $wal1 bytes)"
[ "$(ctl p1 get "refused/1/0" 2>/dev/null)" = "" ] || fail "a refused write is readable on p1"

# space returns: p1 takes writes again, no restart
rm -f "$mnt"/filler1*
wait_until 30 "p1 takes writes again" put_ok p1 after 1
wait_until 60 "p1 caught up with p0" same_state
[ "$(ctl p1 get load/1/0)" = "$small" ] || fail "p1 lacks what p0 took while p1's disk was full"
grep -q "DISK-DOWN" "$CLUSTER_DIR/p1.log" || fail "p1 did not log DISK-DOWN"
grep -q "DISK-UP" "$CLUSTER_DIR/p1.log" || fail "p1 did not log DISK-UP"
downs=$(grep -c "DISK-DOWN" "$CLUSTER_DIR/p1.log")
[ "$downs" -le 3 ] || fail "p1 logged DISK-DOWN $downs times (one line per change)"
# the log does not grow by itself (watched for 3 s with no writes)
w0=$(wal_size)
end=$((SECONDS + 3))
while [ $SECONDS -lt $end ]; do
    [ "$(wal_size)" = "$w0" ] || fail "p1's log grows by itself: $w0 -> $(wal_size) bytes"
    sleep 0.2
done
log "log steady at $w0 bytes after recovery"

# full again, and p1 killed: it restarts on the full disk
fill 2
kill_peer p1
start_peer p1 --join "$(addr_of p0)"
reads() { [ "$(ctl p1 get before 2>/dev/null)" = 1 ]; }
wait_until 30 "p1 restarted on a full disk and serves reads" reads
refused 2 || fail "p1 accepted 50 writes of 4000 bytes on a full disk after its restart"
rm -f "$mnt"/filler2*
wait_until 30 "p1 takes writes again after its restart" put_ok p1 after2 1
wait_until 60 "p1 and p0 agree" same_state
log "p1 recovered from a full disk twice without losing a write"
