#!/bin/bash
# transfer.sh: the one command that regenerates docs/transfer/ (the
# gain-retained matrix of docs/transfer.md): train on one machine, evaluate
# on another, for every ordered pair of machines, both graphs and the three
# settings, offline against the simulator (no GPU).
#
#   1. profiles: `placer profile --from-spec` of t4x4-pcie, h200x2-nvlink,
#      h200x4-nvlink and h200x2-l40sx2 for the 49M GPT (default) and gpt12
#      (163M), one database per machine in out/transfer/; the measured H200
#      pair (data/h200x2.db, the 49M graph only) copied beside them; the
#      mixed machine is also listed slow devices first (l40sx2-h200x2: the
#      same database with its devices relabelled 2,3,0,1), where the speed
#      map and the rank map part;
#   2. the matrix: build/benchmarks/policy/transfer_matrix, one process per
#      graph (JOBS at a time, --threads 1 each): REINFORCE and EAGLE PPO
#      trained on every machine (SEEDS seeds, UPDATES x SAMPLES), S's
#      shortlist (top 5) mapped to and simulated on every other machine,
#      S's policy fine-tuned FINETUNE updates on every machine of its device
#      count against training from scratch, T's baselines and own best
#      (exhaustive where it needs <= MAX_EXHAUSTIVE simulations, the DP, its
#      own runs);
#   3. docs/transfer/: the merged transfer-matrix.tsv and transfer-cells.tsv,
#      `placer report --transfer` (heatmaps transfer-<graph>.{png,svg} and
#      matrix.md), and the benchmark's own output in raw/;
#   4. a check of the command line against the benchmark on one cell (t4x4
#      -> h200x4, m=4 1F1B, REINFORCE seed 1): `placer train` on S, `placer
#      search --from S --run 1 --json` on T must give the benchmark's best of
#      S's shortlist on T to the microsecond.
#
# Knobs (environment): SEEDS=3 UPDATES=250 SAMPLES=8 FINETUNE=50 JOBS=2
# GRAPHS="default gpt12" SETTINGS=ABC MAX_EXHAUSTIVE=3e6 SKIP_BUILD=0
# OUT_DOCS=docs/transfer SKIP_MATRIX=0 (1: keep out/transfer/'s profiles and
# matrix and redo only stages 3 and 4)
set -eu -o pipefail
cd "$(dirname "$0")/.."
SEEDS="${SEEDS:-3}"
UPDATES="${UPDATES:-250}"
SAMPLES="${SAMPLES:-8}"
FINETUNE="${FINETUNE:-50}"
JOBS="${JOBS:-2}"
GRAPHS="${GRAPHS:-default gpt12}"
SETTINGS="${SETTINGS:-ABC}"
MAX_EXHAUSTIVE="${MAX_EXHAUSTIVE:-3e6}"
SKIP_BUILD="${SKIP_BUILD:-0}"
SKIP_MATRIX="${SKIP_MATRIX:-0}"
OUT_DOCS="${OUT_DOCS:-docs/transfer}"
P=./build/cli/placer
TM=./build/benchmarks/policy/transfer_matrix
W=out/transfer
T0=$(date +%s)
say() { echo "== transfer: $* ($(( $(date +%s) - T0 )) s)"; }
die() { echo "transfer: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1

[ "$SKIP_BUILD" = 1 ] || ./scripts/build.sh >/dev/null
[ -x "$TM" ] || ninja -C build benchmarks/policy/transfer_matrix >/dev/null
mkdir -p "$W"

if [ "$SKIP_MATRIX" != 1 ]; then
say "profiles"
SPECS="t4x4-pcie h200x2-nvlink h200x4-nvlink h200x2-l40sx2"
for s in $SPECS; do
  db="$W/$s.db"
  rm -f "$db" "$db-wal" "$db-shm"
  for g in $GRAPHS; do $P profile --from-spec "$s" --config "$g" --db "$db" --portable >/dev/null; done
done
rm -f "$W/h200x2-measured.db"*
cp data/h200x2.db "$W/h200x2-measured.db"
MACHINES="--machine t4x4-pcie=$W/t4x4-pcie.db --machine h200x2-nvlink=$W/h200x2-nvlink.db
  --machine h200x4-nvlink=$W/h200x4-nvlink.db --machine h200x2-l40sx2=$W/h200x2-l40sx2.db
  --machine l40sx2-h200x2=$W/h200x2-l40sx2.db@2,3,0,1 --machine h200x2-measured=$W/h200x2-measured.db"

say "matrix: graphs $GRAPHS, settings $SETTINGS, $SEEDS seeds, $UPDATES x $SAMPLES, fine-tune $FINETUNE, $JOBS at a time"
for g in $GRAPHS; do
  echo "$g"
done | xargs -P "$JOBS" -I{} sh -c "$TM $(echo $MACHINES) --graphs {} --settings $SETTINGS --seeds $SEEDS \
    --updates $UPDATES --samples $SAMPLES --finetune $FINETUNE --max-exhaustive $MAX_EXHAUSTIVE --threads 1 \
    --out $W/{} > $W/{}.md 2> $W/{}.log || { tail -5 $W/{}.log; exit 1; }"
say "matrix done"
fi

mkdir -p "$OUT_DOCS/raw"
first=1
for g in $GRAPHS; do
  for f in transfer-matrix transfer-cells; do
    if [ $first = 1 ]; then cp "$W/$g/$f.tsv" "$OUT_DOCS/$f.tsv"; else tail -n +2 "$W/$g/$f.tsv" >>"$OUT_DOCS/$f.tsv"; fi
  done
  first=0
  cp "$W/$g.md" "$OUT_DOCS/raw/transfer_matrix-$g.md"
done
rm -f "$OUT_DOCS"/*.dat "$OUT_DOCS"/*.gp "$OUT_DOCS"/*.png "$OUT_DOCS"/*.svg "$OUT_DOCS/gnuplot.log"
$P report --transfer "$OUT_DOCS/transfer-matrix.tsv" --out "$OUT_DOCS" --markdown "$OUT_DOCS/matrix.md"
# the pages embed the PNGs; the SVG copies and gnuplot's inputs stay out of docs/ (issue 32: docs/ <= 8 MB)
rm -f "$OUT_DOCS/gnuplot.log" "$OUT_DOCS"/*.svg "$OUT_DOCS"/*.dat "$OUT_DOCS"/*.gp
python3 scripts/transfer_summary.py "$OUT_DOCS/transfer-matrix.tsv" >"$OUT_DOCS/summary.md"

case " $GRAPHS " in *" default "*) ;; *) say "done (no 49M graph: the command-line check is skipped)"; exit 0 ;; esac
case "$SETTINGS" in *B*) ;; *) say "done (no setting B: the command-line check is skipped)"; exit 0 ;; esac
say "command-line check: t4x4-pcie -> h200x4-nvlink, m=4 1f1b, REINFORCE seed 1"
S="$W/check-s.db"
rm -f "$S"*
cp "$W/t4x4-pcie.db" "$S"
$P train --db "$S" --config default --micro-batches 4 --schedule 1f1b --updates "$UPDATES" --samples "$SAMPLES" \
  --seed 1 --threads 1 >"$W/check-train.log"
got=$($P search --db "$W/h200x4-nvlink.db" --from "$S" --run 1 --threads 1 --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("%.3f" % d["transfer"]["sources"][0]["step_ms"])')
want=$(awk -F'\t' '$1=="default" && $2=="B" && $3=="reinforce" && $4=="t4x4-pcie" && $5=="h200x4-nvlink" && $6==1 {print $10}' \
  "$OUT_DOCS/transfer-cells.tsv")
[ "$got" = "$want" ] || die "placer search --from gives $got ms, the benchmark $want ms"
say "command-line check: placer search --from gives $got ms, as the benchmark does"
say "done: $OUT_DOCS/matrix.md, $OUT_DOCS/transfer-*.png"
