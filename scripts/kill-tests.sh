#!/bin/sh
# Kill tests at full count: SIGKILL at random moments during profiling (CPU
# backend), training and calibration, COUNT times each (default 50), with
# the checks of tests/reliability/test_kill.c after every kill (integrity,
# no committed row lost, the resumed run identical to an uninterrupted one).
# CI runs the same tests with 3 kills each (placer-tests).
#   ./scripts/kill-tests.sh                 50 kills per scenario, seed 1
#   COUNT=200 SEED=7 ./scripts/kill-tests.sh
#   BUILD=build-asan ./scripts/kill-tests.sh   the sanitizer build's binary
set -eu
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
if [ "$BUILD" = build ]; then ./scripts/build.sh; else ninja -C "$BUILD" tests/test-reliability cli/placer >/dev/null; fi
PLACER_KILL_COUNT="${COUNT:-50}" PLACER_KILL_SEED="${SEED:-1}" \
  "$BUILD/tests/test-reliability" --filter 'kill/*' -j1 --short-filename
