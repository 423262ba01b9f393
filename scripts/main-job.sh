#!/bin/sh
# The README's main command: installs what is missing, builds, and runs the
# offline job on the shipped profile: trains the RL placer against the
# simulator and prints its placements against the baselines.
#   DB=data/t4x4-pcie.db ./scripts/main-job.sh   to use another profile.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
P=./build/cli/placer
DB="${DB:-}"
if [ -z "$DB" ]; then
  for f in data/h200x2.db data/h200x2-spec.db data/t4x4-pcie.db; do
    [ -f "$f" ] && { DB="$f"; break; }
  done
fi
[ -n "$DB" ] || { echo "main-job: no profile found in data/" >&2; exit 1; }
OUTDIR="${OUTDIR:-out/main-job}"
mkdir -p "$OUTDIR"
# train and search write their runs into the database: work on a copy so the
# shipped profile stays as it is
WORK="$OUTDIR/$(basename "$DB")"
rm -f "$WORK" "$WORK-wal" "$WORK-shm"
cp "$DB" "$WORK"
chmod u+w "$WORK"
echo "== profile: $DB (working copy $WORK) =="
$P profile show --db "$WORK" --summary
DB="$WORK"
for setting in "A 1 gpipe" "B 4 1f1b"; do
  set -- $setting
  echo
  echo "== setting $1: m=$2 $3: RL placer trained offline vs baselines =="
  $P train --db "$DB" --micro-batches "$2" --schedule "$3" --updates 250 --samples 8 --seed 1
  $P search --db "$DB" --method all --micro-batches "$2" --schedule "$3" --seed 1
done
echo
echo "== report: learning curves and placement maps in $OUTDIR/report =="
$P report --db "$DB" --out "$OUTDIR/report" | tail -3
cat <<EOT

Next, on a machine with the GPUs (see docs/engine.md, "Confirm and calibrate on GPUs"):
  placer confirm   --db $DB --run 1 --devices 0,1      # head to head on hardware
  placer calibrate --db $DB --devices 0,1              # fit the simulator, held-out error
EOT
