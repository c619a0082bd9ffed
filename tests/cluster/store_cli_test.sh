#!/usr/bin/env bash
# peerctl put/get with byte values (docs/cli.md): a value with NUL and
# non-UTF-8 bytes round-trips exactly through `put --file` and `get` to a
# pipe; `get --json` gives it as base64 with "encoding": "base64" (and a
# UTF-8 value as a JSON string); a value of exactly 64 KiB is accepted and
# one byte more is refused with an error that names the limit.
. "$(dirname "$0")/lib.sh"
cluster_init
start_peer p0
wait_until 30 "p0 answers" sees p0 p0 alive
d=$CLUSTER_DIR
python3 -c '
import sys
open(sys.argv[1], "wb").write(b"a\x00b\xff\xfe\x00\n\x80 end")
open(sys.argv[2], "wb").write(bytes(i % 251 for i in range(65536)))
open(sys.argv[3], "wb").write(b"x" * 65537)' "$d/bin" "$d/max" "$d/over"
ctl p0 put bin/k --file "$d/bin" || fail "put --file of binary bytes failed"
ctl p0 get bin/k >"$d/bin.out" || fail "get failed"
cmp "$d/bin" "$d/bin.out" || fail "binary value did not round-trip byte for byte"
ctl p0 get bin/k --json >"$d/bin.json" || fail "get --json failed"
python3 -c '
import base64, json, sys
j = json.load(open(sys.argv[1]))
assert j["key"] == "bin/k" and j["encoding"] == "base64", j
assert base64.b64decode(j["value"]) == open(sys.argv[2], "rb").read()' "$d/bin.json" "$d/bin" ||
    fail "get --json did not give the bytes as base64: $(cat "$d/bin.json")"
printf 'caf\xc3\xa9\x00z' | ctl p0 put utf/k --file - || fail "put --file - failed"
ctl p0 get utf/k --json >"$d/utf.json" || fail "get --json failed"
python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["encoding"] == "utf-8" and j["value"] == "caf\u00e9\u0000z", j' "$d/utf.json" ||
    fail "a UTF-8 value with a NUL is not a JSON string: $(cat "$d/utf.json")"
ctl p0 put max/k --file "$d/max" || fail "a value of exactly 65536 bytes was refused"
ctl p0 get max/k >"$d/max.out" && cmp -s "$d/max" "$d/max.out" || fail "the 64 KiB value did not round-trip"
if ctl p0 put over/k --file "$d/over" 2>"$d/over.err"; then fail "a 65537-byte value was accepted"; fi
grep -q "65536" "$d/over.err" && grep -q "blob put" "$d/over.err" ||
    fail "the oversize error does not name the limit and the way out: $(cat "$d/over.err")"
"$PEERCTL_BIN" put --help | grep -q "65536" || fail "put --help does not state the limit"
log "PASS"
