#!/usr/bin/env bash
# Issue 12, item 12 (printing): peerctl shows what it reads from the store
# without letting it drive the terminal. A value holding ESC, BEL and a C1
# control (U+009B, a CSI to some terminals) is shown by `peerctl watch` as
# \xNN text; a key holding ESC is refused by the store or, where an older
# peer took it, listed by `peerctl keys` as \x1b. Before the fix the C1
# control went out raw in watch and the ESC raw in keys.
. "$(dirname "$0")/../cluster/lib.sh"
cluster_init
start_peer p0
wait_until 30 "p0 answers" sees p0 p0 alive
"$PEERCTL_BIN" --peer "$(dir_of p0)" watch esc/ >"$CLUSTER_DIR/watch.out" 2>&1 &
EXTRA_PIDS+=($!)
wait_until 30 "the watch is open" stat_at_least p0 watch.open 1
ctl p0 put esc/v $'title\x1b]0;pwned\x07 csi\xc2\x9b2J end' || fail "put failed"
shown() { grep -q "esc/v = " "$CLUSTER_DIR/watch.out"; }
wait_until 30 "the watch shows the change" shown
raw() { LC_ALL=C grep -c -P "$1" "$2" || true; }
[ "$(raw '\x1b|\x07|\xc2\x9b' "$CLUSTER_DIR/watch.out")" = 0 ] ||
    fail "watch printed control characters raw: $(od -c "$CLUSTER_DIR/watch.out" | head -5)"
grep -qF 'csi\xc2\x9b2J end' "$CLUSTER_DIR/watch.out" ||
    fail "watch did not show the C1 control as \\xc2\\x9b: $(cat -v "$CLUSTER_DIR/watch.out")"
log "ok: watch shows $(grep -o 'esc/v = .*' "$CLUSTER_DIR/watch.out")"

# a key with ESC: refused by this store, or listed escaped
ctl p0 put $'esc/k\x1b[31mred' v >/dev/null 2>&1 || log "the store refused a key with ESC"
ctl p0 keys esc/ >"$CLUSTER_DIR/keys.out" || fail "keys failed"
[ "$(raw '\x1b' "$CLUSTER_DIR/keys.out")" = 0 ] ||
    fail "keys printed ESC raw: $(od -c "$CLUSTER_DIR/keys.out" | head -5)"
log "PASS"
