#!/bin/sh
# Builds the libFuzzer targets with clang (address + undefined sanitizers)
# and runs each for RUNS executions (default 1,000,000). Crashes land in
# tests/fuzz/crashes/<target>/; add each as a regression test.
#   ./scripts/fuzz.sh [target ...]
set -eu
cd "$(dirname "$0")/.."
RUNS="${RUNS:-1000000}"
OUT=build-fuzz
mkdir -p "$OUT"
CFLAGS="-g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Icore -Iprofile -Isim -Ipolicy -I$OUT"
echo '#define PLACER_HAVE_CUDA 0' > "$OUT/placer_config.h"
echo '#define PLACER_VERSION "fuzz"' >> "$OUT/placer_config.h"
CORE="core/status.c core/graph.c core/placement.c core/schedule.c core/util.c core/profile_data.c"
targets="${*:-placement schedule}"
for t in $targets; do
  extra=""
  libs="-lm"
  [ -f "tests/fuzz/fuzz_$t.extra" ] && extra=$(cat "tests/fuzz/fuzz_$t.extra")
  case "$t" in store|cli) libs="-lm -lsqlite3 -lpthread";; esac
  clang $CFLAGS -o "$OUT/fuzz_$t" "tests/fuzz/fuzz_$t.c" $CORE $extra $libs
  mkdir -p "$OUT/corpus_$t" "tests/fuzz/crashes/$t"
  [ -d "tests/fuzz/seeds/$t" ] && cp -n tests/fuzz/seeds/$t/* "$OUT/corpus_$t/" 2>/dev/null || true
  if [ -d "tests/fuzz/regressions/$t" ]; then
    echo "== fuzz_$t: replaying $(ls tests/fuzz/regressions/$t | wc -l) regression inputs =="
    "$OUT/fuzz_$t" tests/fuzz/regressions/$t/* >/dev/null 2>&1 || { echo "regression failed for $t" >&2; exit 1; }
  fi
  echo "== fuzz_$t: $RUNS runs =="
  "$OUT/fuzz_$t" -runs="$RUNS" -max_len=512 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="tests/fuzz/crashes/$t/" "$OUT/corpus_$t" 2>&1 | grep -E "^#[0-9]+.*DONE|Done|ERROR|SUMMARY|crash|leak" || true
done
