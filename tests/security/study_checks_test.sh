#!/usr/bin/env bash
# Issue 12, item 12 (studies): what a study reads from the store is checked
# before it names a path or a key, and a refused submit leaves nothing.
#  - `put study/../../../escaped/spec SPEC`: a study id that is not 16 hex
#    digits is refused (counted in bad_input), never run; before the fix
#    the peer claimed its trials and made their directories in
#    $CLUSTER_DIR/escaped, outside its data directory.
#  - a spec over the 64 KiB a stored value may hold (but under the 256 KiB
#    a study file may be) is refused with a clear error and leaves no key;
#    before the fix it left study/ID/start behind.
. "$(dirname "$0")/../cluster/lib.sh"
cluster_init
start_peer p0
wait_until 30 "p0 answers" sees p0 p0 alive

# builtin trainer: no command, nothing an open cluster refuses for that
spec() { # spec NAME [PADDING_BYTES]
    python3 - "$1" "${2:-0}" <<'PY'
import json, sys
s = {"name": sys.argv[1], "seed": 3,
     "dataset": {"name": "fashion-mnist", "val_split": 0.2},
     "trainer": {"type": "builtin", "optimizer": "adam", "batch": 64, "model": "mlp:32"},
     "search_space": {"lr": {"type": "real", "low": 0.0005, "high": 0.01, "log": True}},
     "scheduler": {"type": "fifo", "max_epochs": 1},
     "objectives": [{"metric": "val_acc", "goal": "max"}],
     "budget": {"trials": 2}}
print(json.dumps(s, indent=1) + " " * int(sys.argv[2]))
PY
}

# 1. a study id that climbs out of the data directory
spec escaped >"$CLUSTER_DIR/escaped.json"
before=$(stat_of p0 bad_input)
ctl p0 put study/../../../escaped/spec --file "$CLUSTER_DIR/escaped.json" ||
    fail "the put itself failed (the store takes any key)"
refused() { [ "$(stat_of p0 bad_input)" -gt "$before" ] 2>/dev/null; }
escaped() { [ -e "$CLUSTER_DIR/escaped" ]; }
deadline=$((SECONDS + 20))
until refused || escaped; do
    [ $SECONDS -lt $deadline ] || break
    sleep 0.2
done
escaped && fail "the peer ran a study outside its data directory: $(find "$CLUSTER_DIR/escaped" | head -3)"
refused || fail "the malformed study id was not counted in bad_input"
log "ok: study id ../../../escaped refused and counted, nothing made outside the data directory"
# and a well-formed study still runs next to it (the check refuses only bad ids)
SID=$(ctl p0 submit "$CLUSTER_DIR/escaped.json") || fail "a good study was refused"
has_trials() { ctl p0 status "$SID" --json 2>/dev/null | grep -q '"trial"'; }
wait_until 60 "the good study has trials" has_trials

# 2. a spec of 100 KiB: refused before anything is written
spec big 100000 >"$CLUSTER_DIR/big.json"
if out=$(ctl p0 submit "$CLUSTER_DIR/big.json" 2>&1); then fail "a 100 KiB spec was accepted: $out"; fi
echo "$out" | grep -q "study refused" || fail "unclear refusal of a 100 KiB spec: $out"
left=$(ctl p0 keys study/ | grep -v -e "^study/$SID/" -e "^study/\.\./" || true)
[ -z "$left" ] || fail "the refused spec left keys behind: $left"
log "ok: a 100 KiB spec refused ($out), no key left"
log "PASS"
