#!/bin/sh
# Regenerates the expert placement results of docs/experts.md: the generator
# settings' statistics and the must-show table (scenarios A, A', B, C, T and
# the small cases D), 5 seeds, into benchmarks/policy/results/experts_table.md.
#   benchmarks/policy/experts_table.sh            the table with the shipped learned model
#   TRAIN=1 benchmarks/policy/experts_table.sh    retrain the learned model first
#                                                 (data/experts/learned-deepseek-v3.json)
# About 15 minutes on 2 cores (the generator routes 58 x 16 x 1,024 tokens a seed and setting).
set -eu
cd "$(dirname "$0")/../.."
./scripts/build.sh
BIN=build/benchmarks/policy/experts_bench
OUT=benchmarks/policy/results/experts_table.md
mkdir -p benchmarks/policy/results
if [ "${TRAIN:-0}" = 1 ]; then
  "$BIN" --train data/experts/learned-deepseek-v3.json --seeds 4
fi
{
  echo "# Expert placement: generator statistics and the must-show table"
  echo
  echo "\`benchmarks/policy/experts_table.sh\` ($(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
  echo
  "$BIN" --stats --seeds 5
  echo
  "$BIN" --table --seeds 5
} > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
