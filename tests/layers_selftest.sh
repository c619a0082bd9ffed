#!/usr/bin/env bash
# tools/layers' own test: a small source tree with a planted circle, a call
# and an include that run back up, and an OS call outside the platform
# layer, compiled to objects laid out as CMake does; the tool must find
# each (exit 1), and pass the tree once they are gone (exit 0).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cc=${CC:-cc}
t=$(mktemp -d /tmp/sl-layers-test.XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$t/src/base" "$t/src/study" "$t/src/platform" "$t/include/starling"

# base/a.c: the bottom; study/x.c and study/y.c; platform/p.c
cat > "$t/include/starling/study.h" <<'H'
int sl_study_x(int);
int sl_study_y(int);
H
cat > "$t/src/base/a.c" <<'C'
int sl_base_a(int v) { return v + 1; }
C
cat > "$t/src/platform/p.c" <<'C'
#include <stdlib.h>
const char *sl_plat_env(void) { return getenv("HOME"); }
C
cat > "$t/src/study/x.c" <<'C'
#include "starling/study.h"
int sl_base_a(int);
int sl_study_x(int v) { return sl_base_a(v) + 1; }
C
cat > "$t/src/study/y.c" <<'C'
#include "starling/study.h"
int sl_study_y(int v) { return sl_study_x(v) * 2; }
C

build() {
    rm -rf "$t/build"
    for f in "$t"/src/*/*.c; do
        rel=${f#"$t/src/"}
        o="$t/build/src/CMakeFiles/starling.dir/$rel.o"
        mkdir -p "$(dirname "$o")"
        "$cc" -c -I"$t/include" -o "$o" "$f"
    done
}
run() { python3 "$root/tools/layers" "$t/build" --root="$t" --os >"$t/out" 2>&1; }

build
run || fail "a clean tree was refused: $(cat "$t/out")"
grep -q '^circles of files: 0 ' "$t/out" || fail "clean tree: $(cat "$t/out")"
grep -q '^edges running back up: 0 ' "$t/out" || fail "clean tree: $(cat "$t/out")"

# a circle: x.c calls y.c, which calls x.c
cat > "$t/src/study/x.c" <<'C'
#include "starling/study.h"
int sl_base_a(int);
int sl_study_x(int v) { return v > 9 ? sl_base_a(v) : sl_study_y(v + 1); }
C
build
if run; then fail "the circle x.c <-> y.c was not found: $(cat "$t/out")"; fi
grep -q 'circle: src/study/x.c src/study/y.c' "$t/out" || fail "no circle line: $(cat "$t/out")"

# a call and an include back up: base/a.c calls and includes study's
cat > "$t/src/study/x.c" <<'C'
#include "starling/study.h"
int sl_base_a(int);
int sl_study_x(int v) { return sl_base_a(v) + 1; }
C
cat > "$t/src/base/a.c" <<'C'
#include "starling/study.h"
int sl_base_a(int v) { return v > 9 ? v : sl_study_y(v); }
C
build
if run; then fail "the upward call was not found: $(cat "$t/out")"; fi
grep -q 'src/base/a.c -> src/study/y.c: calls sl_study_y' "$t/out" || fail "no upward call: $(cat "$t/out")"
grep -q 'src/base/a.c -> include/starling/study.h: includes' "$t/out" || fail "no upward include: $(cat "$t/out")"

# an OS call outside platform/ fails; platform's own is only listed (--os)
cat > "$t/src/base/a.c" <<'C'
#include <unistd.h>
int sl_base_a(int v) { return v + (int)getpid(); }
C
build
if run; then fail "the OS call outside platform/ was not found: $(cat "$t/out")"; fi
grep -q '^files making OS calls outside the platform layer: 1$' "$t/out" ||
    fail "no count of files with OS calls: $(cat "$t/out")"
grep -q '^  src/base/a.c: getpid ' "$t/out" || fail "the OS call was not named: $(cat "$t/out")"
grep -q '^  src/platform/p.c: getenv$' "$t/out" || fail "platform's own OS call was not listed: $(cat "$t/out")"
echo "ok: a circle, an upward call and include, an OS call outside platform/ found; clean trees pass"
