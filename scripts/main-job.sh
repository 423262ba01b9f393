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
OUTDIR="${OUTDIR:-out}"
mkdir -p "$OUTDIR"
echo "== profile: $DB =="
$P profile show --db "$DB" | head -20
for setting in "A 1 gpipe" "B 4 1f1b"; do
  set -- $setting
  echo
  echo "== setting $1: m=$2 $3: RL placer trained offline vs baselines =="
  $P train --db "$DB" --micro-batches "$2" --schedule "$3" --updates 250 --samples 8 --seed 1
  $P search --db "$DB" --method all --micro-batches "$2" --schedule "$3" --seed 1
done
