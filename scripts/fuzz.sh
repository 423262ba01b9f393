#!/bin/sh
# Builds the libFuzzer targets with clang (address + undefined sanitizers)
# and runs each for RUNS executions (default 1,000,000), or for at most
# MAX_TIME seconds when that is set. Crashes land in tests/fuzz/crashes/<target>/;
# add each to tests/fuzz/regressions/<target>/ (replayed here before every
# run) and, where natural, as a Criterion test.
#   ./scripts/fuzz.sh [target ...]        targets: placement schedule store cli serve
#                                         model_config cluster layout plan collectives frameworks
#                                         transfer moe expert_load
#   RUNS=100000 ./scripts/fuzz.sh cli     fewer executions
#   MAX_TIME=600 ./scripts/fuzz.sh cli    stop after ten minutes
#   REPLAY=1 ./scripts/fuzz.sh            build and replay the regressions only
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# the cli target runs placer layout on the shipped cluster files
export PLACER_CLUSTERS="${PLACER_CLUSTERS:-$ROOT/data/clusters}"
RUNS="${RUNS:-1000000}"
MAX_TIME="${MAX_TIME:-0}"
REPLAY="${REPLAY:-0}"
OUT="$ROOT/build-fuzz"
mkdir -p "$OUT/obj"
CFLAGS="-g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=address,undefined -fno-sanitize-recover=all
  -Icore -Iinputs -Iprofile -Isim/placement -Isim/layout -Isim/collective -Ipolicy -Ipolicy/experts -Iplan -Icalib
  -Ihw -Ihw/kernels -Ihw/exec -Ihw/dist -Icli -I$OUT -DPLACER_SOURCE_DIR=\"/nonexistent\"
  -I/usr/include/x86_64-linux-gnu/openblas-pthread"
printf '#define PLACER_HAVE_CUDA 0\n#define PLACER_VERSION "fuzz"\n' > "$OUT/placer_config.h.new"
cmp -s "$OUT/placer_config.h.new" "$OUT/placer_config.h" 2>/dev/null || mv "$OUT/placer_config.h.new" "$OUT/placer_config.h"
CORE="core/status.c core/graph.c core/placement.c core/schedule.c core/util.c core/profile_data.c
  core/precision.c core/layout.c core/model_params.c core/expert_map.c"
# the readers of model configs, clusters, frameworks, collectives and the check sets (core and jansson only)
INPUTS="$(ls inputs/*.c)"
# everything the command line links, but main.c (the harness calls cmd_* itself)
FULL="$CORE $INPUTS $(ls profile/store*.c) profile/spec.c profile/profiler.c profile/probe.c
  $(ls hw/kernels/*.c hw/exec/*.c hw/dist/*.c)
  $(ls sim/*/*.c) $(ls policy/*.c policy/experts/*.c) $(ls plan/*.c) $(ls calib/*.c) $(ls cli/*.c | grep -v cli/main.c)
  $OUT/serve_assets_data.c"
FULL_LIBS="/usr/lib/x86_64-linux-gnu/libgsl.a -lsqlite3 -ljansson -lmicrohttpd -lpthread -ldl -lm"
# placer serve's page, embedded as the build does (cli/meson.build)
python3 scripts/embed-web.py "$OUT/serve_assets_data.c.new" web/*.html web/*.css web/*.js
cmp -s "$OUT/serve_assets_data.c.new" "$OUT/serve_assets_data.c" 2>/dev/null || mv "$OUT/serve_assets_data.c.new" "$OUT/serve_assets_data.c"
rm -f "$OUT/serve_assets_data.c.new"
if pkg-config --exists openblas 2>/dev/null; then FULL_LIBS="$(pkg-config --libs openblas) $FULL_LIBS"; fi
FULL_LIBS="$FULL_LIBS /usr/lib/x86_64-linux-gnu/libgslcblas.a"

# profile/spec.c takes the H200's figures from data/clusters/h200x2.json through
# a header the build writes (profile/meson.build: spec_gpus.h); the same here
if [ ! -f "$OUT/spec_gpus.h" ] || [ data/clusters/h200x2.json -nt "$OUT/spec_gpus.h" ] ||
   [ profile/spec_gpu_figures.c -nt "$OUT/spec_gpus.h" ]; then
  # shellcheck disable=SC2086
  clang -std=c11 -D_GNU_SOURCE -Icore -Iinputs -o "$OUT/spec_gpu_figures" profile/spec_gpu_figures.c $CORE $INPUTS \
    -ljansson -lm
  "$OUT/spec_gpu_figures" data/clusters/h200x2.json SPEC_H200 "$OUT/spec_gpus.h"
fi

# Compile a source once into build-fuzz/obj (rebuilt when it or a header changed).
obj() {
  o="$OUT/obj/$(echo "$1" | tr / _).o"
  newest=$(ls -t "$1" core/*.h inputs/*.h profile/*.h sim/*/*.h policy/*.h policy/experts/*.h plan/*.h calib/*.h hw/*/*.h cli/*.h "$OUT/placer_config.h" | head -1)
  if [ ! -f "$o" ] || [ "$newest" -nt "$o" ]; then
    # shellcheck disable=SC2086
    clang $CFLAGS -fsanitize=fuzzer-no-link -c -o "$o" "$1"
  fi
  echo "$o"
}

targets="${*:-placement schedule store cli model_config cluster layout plan published collectives frameworks serve transfer moe expert_load}"
for t in $targets; do
  case "$t" in
    placement|schedule) srcs="$CORE"; libs="-ljansson -lm"; maxlen=512; extra_flags="" ;;
    model_config) srcs="$CORE $INPUTS"; libs="-ljansson -lm"; maxlen=8192; extra_flags="" ;;
    layout) srcs="$CORE"; libs="-ljansson -lm"; maxlen=1024; extra_flags="" ;;
    cluster) srcs="$CORE $INPUTS"; libs="-ljansson -lm"; maxlen=16384; extra_flags="" ;;
    collectives) srcs="$CORE $INPUTS sim/collective/collective.c sim/collective/coll_measured.c"; libs="-ljansson -lm"
      maxlen=16384; extra_flags="" ;;
    # plan/plan_run.c searches placements (plan_profile.c: policy/, hw/) and
    # loads clusters (inputs/cluster_file.c): the command line's whole set
    plan) srcs="$FULL"; libs="$FULL_LIBS"; maxlen=512; extra_flags="" ;;
    # the rows' FLOP count (calib/published_check.c) needs the layout simulator's parameter split
    published) srcs="$CORE $INPUTS $(ls sim/*/*.c) calib/published_check.c"; libs="-ljansson -lm"
      maxlen=4096; extra_flags="" ;;
    frameworks) srcs="$CORE $INPUTS"; libs="-ljansson -lm"; maxlen=8192; extra_flags="" ;;
    moe) srcs="$CORE $INPUTS"; libs="-ljansson -lm"; maxlen=20000; extra_flags="" ;;
    expert_load) srcs="$CORE $INPUTS"; libs="-ljansson -lm"; maxlen=16384; extra_flags="" ;;
    store) srcs="$FULL"; libs="$FULL_LIBS"; maxlen=100000; extra_flags="" ;;
    cli) srcs="$FULL"; libs="$FULL_LIBS"; maxlen=256; extra_flags="-close_fd_mask=3" ;;
    # placer serve's request handler (cli/serve_api.c), the socket aside
    serve) srcs="$FULL"; libs="$FULL_LIBS"; maxlen=4096; extra_flags="" ;;
    # a run's stored arguments (policy/transfer.c) and the transfer matrix (calib/transfer_report.c)
    transfer) srcs="$FULL"; libs="$FULL_LIBS"; maxlen=4096; extra_flags="" ;;
    *) echo "unknown fuzz target '$t' (placement, schedule, store, cli, model_config, cluster, layout, plan, published, collectives, frameworks, serve, transfer, moe, expert_load)" >&2; exit 2 ;;
  esac
  objs=""
  for s in $srcs; do objs="$objs $(obj "$s")"; done
  # shellcheck disable=SC2086
  clang $CFLAGS -fsanitize=fuzzer -o "$OUT/fuzz_$t" "tests/fuzz/fuzz_$t.c" $objs $libs
  mkdir -p "$OUT/corpus_$t" "tests/fuzz/crashes/$t"
  [ -d "tests/fuzz/seeds/$t" ] && cp -n tests/fuzz/seeds/$t/* "$OUT/corpus_$t/" 2>/dev/null || true
  if [ -d "tests/fuzz/regressions/$t" ] && [ -n "$(ls tests/fuzz/regressions/$t)" ]; then
    echo "== fuzz_$t: replaying $(ls tests/fuzz/regressions/$t | wc -l) regression inputs =="
    # shellcheck disable=SC2086
    "$OUT/fuzz_$t" $extra_flags "$ROOT"/tests/fuzz/regressions/$t/* >"$OUT/replay_$t.log" 2>&1 || {
      echo "regression failed for $t (see $OUT/replay_$t.log)" >&2; tail -30 "$OUT/replay_$t.log" >&2; exit 1; }
  fi
  [ "$REPLAY" = 1 ] && continue
  echo "== fuzz_$t: $RUNS runs (time limit ${MAX_TIME}s, 0 = none) =="
  log="$OUT/fuzz_$t.log"
  # shellcheck disable=SC2086
  "$OUT/fuzz_$t" -runs="$RUNS" -max_total_time="$MAX_TIME" -max_len=$maxlen -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 $extra_flags \
    -artifact_prefix="$ROOT/tests/fuzz/crashes/$t/" "$OUT/corpus_$t" >"$log" 2>&1 || true
  grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs|stat::number_of_executed_units|ERROR|SUMMARY|crash-|leak-|timeout-|oom-" "$log" || true
  if grep -qE "ERROR: |SUMMARY: " "$log"; then echo "fuzz_$t found a problem: see $log" >&2; exit 1; fi
done
