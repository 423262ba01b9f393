#!/bin/sh
# Makes the seed databases of the store fuzz target (tests/fuzz/seeds/store/)
# with a built placer binary: small profiles of the tiny graph with a
# training run, calibration measurements and fitted parameters, a measured
# CPU profile at the current schema and at schema 2, rewritten
# with 512-byte pages and a rollback journal so that they are small and a
# read-only open needs no -wal file.
#   tests/fuzz/make_store_seeds.sh [build/cli/placer]
set -eu
cd "$(dirname "$0")/../.."
P="${1:-build/cli/placer}"
D=tests/fuzz/seeds/store
mkdir -p "$D"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 1: profile only (2 devices, micro-batch sizes 1 and 2)
"$P" profile --from-spec h200x2-nvlink --config tiny,layers=1 --micro-batch-sizes 1,2 --db "$tmp/a.db" >/dev/null
# 2: the same plus a training run (checkpoints) and a calibration (measurements, parameters)
cp "$tmp/a.db" "$tmp/b.db"
"$P" train --db "$tmp/b.db" --updates 2 --samples 2 --threads 1 --hidden 4 >/dev/null
"$P" calibrate --db "$tmp/b.db" --timer synthetic --count 24 --steps 1 --warmup 0 >/dev/null
# 3: four devices, the whole tiny graph, one size
"$P" profile --from-spec t4x4-pcie --config tiny --micro-batch-sizes 4 --db "$tmp/c.db" >/dev/null
# 4: a measured profile of the CPU backend (each node's forward and backward workspace apart)
"$P" profile --cpu 2 --config tiny,layers=1 --micro-batch-sizes 1,2 --reps 3 --db "$tmp/d.db" >/dev/null
# 5: the same as a file of schema 2 writes it (one workspace a node), for the old read path
cp "$tmp/d.db" "$tmp/e.db"
sqlite3 "$tmp/e.db" "ALTER TABLE node_cost DROP COLUMN b_us; ALTER TABLE node_cost DROP COLUMN w_us;
  ALTER TABLE node DROP COLUMN fwd_workspace_bytes; ALTER TABLE node DROP COLUMN bwd_workspace_bytes;
  UPDATE meta SET value = '2' WHERE key = 'schema_version';"
for f in a b c d e; do
  sqlite3 "$tmp/$f.db" "PRAGMA journal_mode=DELETE;" >/dev/null
  sqlite3 "$tmp/$f.db" "PRAGMA page_size=512; VACUUM;"
  cp "$tmp/$f.db" "$D/$f.db"
done
ls -l "$D"
