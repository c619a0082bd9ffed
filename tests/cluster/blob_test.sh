#!/usr/bin/env bash
# Blobs between real peers (INVARIANTS.md S6, docs/store.md "Blobs"):
# four peers; `blob put` of a ~5 MB file on p0; placement settles on
# exactly R=2 holders; `blob get` on another peer is byte-identical; kill
# -9 of one holder: the survivors re-replicate to 2 alive holders and get
# still works; then every chunk file of one holder is corrupted: a get
# elsewhere still succeeds (from the other holder), the bad copy is
# refused, counted in stats (blob.corrupt), logged BLOB-CORRUPT, and
# repaired by re-replication. The non-holder's get leaves a cached copy,
# counted in stats (blob.cache_blobs, blob.cache_bytes; --blob-cache MB).
. "$(dirname "$0")/lib.sh"
cluster_init
names=(p0 p1 p2 p3)
start_peer p0 --blob-cache 64
for n in "${names[@]:1}"; do start_peer "$n" --join "$(addr_of p0)" --blob-cache 64; done
wait_until 60 "4 peers converge" converged "${names[@]}"

src=$CLUSTER_DIR/src.bin
python3 -c '
import os, sys
with open(sys.argv[1], "wb") as f:
    f.write(os.urandom(5 * 1000 * 1000 + 12345))' "$src"
hash=$(ctl p0 blob put "$src") || fail "blob put failed"
[[ $hash =~ ^[0-9a-f]{64}$ ]] || fail "blob put printed '$hash', not a hash"
want=$(python3 -c '
import hashlib, sys
print(hashlib.blake2b(open(sys.argv[1], "rb").read(), digest_size=32).hexdigest())' "$src")
[ "$hash" = "$want" ] || fail "blob put printed $hash, the file's BLAKE2b-256 is $want"
log "put $hash"

# holders NAME ALIVE...: NAME's view of the blob's holders, restricted to
# the ALIVE peers, sorted and comma-separated.
holders() {
    local who=$1
    shift
    ctl "$who" blob ls --json 2>/dev/null | python3 -c '
import json, sys
h, alive = sys.argv[1], set(sys.argv[2:])
try:
    bs = json.load(sys.stdin)
except Exception:
    sys.exit(1)
b = next((b for b in bs if b["hash"] == h), None)
if b is None:
    sys.exit(1)
print(",".join(sorted(n for n in b["holders"] if n in alive)))' "$hash" "$@"
}
# exactly_two WHO ALIVE...: WHO sees exactly two alive holders.
exactly_two() {
    local got
    got=$(holders "$@") || return 1
    [ "$(echo "$got" | tr ',' '\n' | grep -c .)" = 2 ]
}
alive=("${names[@]}")
wait_until 60 "2 holders, placement settled" exactly_two p1 "${alive[@]}"
wait_until 30 "p3 agrees on the holders" exactly_two p3 "${alive[@]}"
IFS=, read -r h1 h2 <<<"$(holders p1 "${alive[@]}")"
log "holders: $h1 $h2"
for n in "${names[@]}"; do
    if [ "$n" != "$h1" ] && [ "$n" != "$h2" ]; then other=$n; fi
done

get_same() { # get_same NAME: NAME's blob get is byte-identical to the source
    local out=$CLUSTER_DIR/got-$1.bin
    rm -f "$out"
    ctl "$1" --timeout 5000 blob get "$hash" "$out" || return 1
    cmp -s "$src" "$out"
}
get_same "$other" || fail "blob get on $other is not byte-identical"
log "ok: get on non-holder $other byte-identical"
ls "$CLUSTER_DIR"/got-*.tmp-* >/dev/null 2>&1 && fail "a temporary file was left behind"
[ "$(stat_of "$other" blob.cache_blobs)" = 1 ] || fail "$other does not count its fetched copy as cached"
[ "$(stat_of "$other" blob.cache_bytes)" = "$(stat -c %s "$src")" ] ||
    fail "$other counts $(stat_of "$other" blob.cache_bytes) cached bytes, not the blob's size"

# A get of an unknown hash fails with a clear message and writes nothing.
nohash=$(printf 'f%.0s' $(seq 64))
if ctl "$other" blob get "$nohash" "$CLUSTER_DIR/none.bin" 2>"$CLUSTER_DIR/none.err"; then
    fail "get of an unknown blob succeeded"
fi
grep -q "no such blob" "$CLUSTER_DIR/none.err" || fail "unclear error: $(cat "$CLUSTER_DIR/none.err")"
[ -e "$CLUSTER_DIR/none.bin" ] && fail "a failed get wrote its output file"

# Kill one holder: the others must restore two alive copies.
kill_peer "$h1"
alive=()
for n in "${names[@]}"; do [ "$n" != "$h1" ] && alive+=("$n"); done
for n in "${alive[@]}"; do wait_until 60 "$n sees $h1 dead" sees "$n" "$h1" dead; done
wait_until 90 "re-replication: 2 alive holders again" exactly_two "$h2" "${alive[@]}"
IFS=, read -r a1 a2 <<<"$(holders "$h2" "${alive[@]}")"
log "holders after the kill: $a1 $a2"
ctl "$h2" blob ls | grep -q "$h1 (down)" || fail "blob ls does not mark the dead holder $h1 down: $(ctl "$h2" blob ls)"
[ "$a1" = "$h2" ] || [ "$a2" = "$h2" ] || fail "the surviving holder $h2 lost its copy"
for n in "${alive[@]}"; do
    if [ "$n" != "$a1" ] && [ "$n" != "$a2" ]; then other=$n; fi
done
get_same "$other" || fail "blob get on $other after the kill is not byte-identical"
log "ok: get on $other after the kill byte-identical"

# Corrupt every chunk file of one holder (same size, one byte flipped).
bad=$a1
corrupted=$(python3 -c '
import os, sys
n = 0
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(root, f)
        with open(p, "r+b") as fh:
            b = fh.read(1)
            fh.seek(0)
            fh.write(bytes([b[0] ^ 0xff]))
        n += 1
print(n)' "$CLUSTER_DIR/data/$bad/blob/blobs")
[ "$corrupted" -ge 5 ] || fail "expected at least 5 chunk files on $bad, found $corrupted"
before=$(stat_of "$bad" blob.corrupt)
# $other kept the chunks of its last get: remove them so it must ask the holders
rm -rf "$CLUSTER_DIR/data/$other/blob/blobs"
get_same "$other" || fail "blob get on $other with a corrupt holder is not byte-identical"
log "ok: get on $other with $bad corrupt byte-identical"
wait_until 30 "$bad counts the corrupt chunks" stat_at_least "$bad" blob.corrupt $((before + 1))
grep -q "BLOB-CORRUPT" "$CLUSTER_DIR/$bad.log" || fail "$bad did not log BLOB-CORRUPT"
has_good_copy() { # every chunk file of NAME matches its name
    python3 -c '
import hashlib, os, sys
n = 0
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        if hashlib.blake2b(open(os.path.join(root, f), "rb").read(), digest_size=32).hexdigest() != f:
            sys.exit(1)
        n += 1
sys.exit(0 if n >= 5 else 1)' "$CLUSTER_DIR/data/$1/blob/blobs"
}
wait_until 90 "$bad repairs its copy" has_good_copy "$bad"
wait_until 90 "2 alive holders after the repair" exactly_two "$h2" "${alive[@]}"
log "PASS"
