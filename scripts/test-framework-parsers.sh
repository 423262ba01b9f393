#!/bin/sh
# The exports checked by the frameworks' own parsers (issue 37): a venv kept
# outside the clone, ${XDG_CACHE_HOME:-~/.cache}/placer/parsers-HASH (HASH of
# tests/plan/framework-parsers.pins and the Python version), built when missing
# from the Python registry, then pytest on tests/plan/test_framework_parsers.py
# against the placer binary (PLACER_BIN, default build/cli/placer). A failed
# install fails with one line naming its log; it never skips. Environment:
# PYTHON (default python3); PLACER_PARSERS_TABLE=FILE writes the plans x
# frameworks table (docs/exports.md).
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PINS=tests/plan/framework-parsers.pins
PLACER_BIN=${PLACER_BIN:-$PWD/build/cli/placer}
export PLACER_BIN
[ -x "$PLACER_BIN" ] || { echo "test-framework-parsers: no placer binary at $PLACER_BIN (run scripts/build.sh)" >&2; exit 1; }
HASH=$({ cat "$PINS"; "$PY" -c 'import sys; print(sys.version_info[:2])'; } | sha256sum | cut -c1-12)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/placer
VENV=$CACHE/parsers-$HASH
LOG=$CACHE/parsers-$HASH.log
fail() { echo "test-framework-parsers: $1 (log: $LOG)" >&2; exit 1; }
if [ ! -f "$VENV/.complete" ]; then
  mkdir -p "$CACHE" || fail "cannot create $CACHE"
  rm -rf "$VENV"
  echo "test-framework-parsers: building $VENV (once per pins)"
  "$PY" -m venv "$VENV" >"$LOG" 2>&1 || fail "cannot create a venv at $VENV"
  grep -v -e '^#' -e '^ *$' "$PINS" | while IFS= read -r line; do
    # shellcheck disable=SC2086
    DS_BUILD_OPS=0 "$VENV/bin/python" -m pip install -q --disable-pip-version-check $line >>"$LOG" 2>&1 \
      || { echo "pip install $line failed" >>"$LOG"; exit 1; }
  done || fail "pip install of the pinned frameworks failed"
  if ! "$VENV/bin/python" -c 'import torch' >>"$LOG" 2>&1; then
    # no CUDA 13 toolkit on this machine: torch's own CUDA packages
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check torch==2.11.0 >>"$LOG" 2>&1 \
      || fail "pip install of torch's CUDA packages failed"
  fi
  "$VENV/bin/python" -c 'import torch, torchtitan, megatron.core, deepspeed' >>"$LOG" 2>&1 \
    || fail "the pinned frameworks do not import"
  touch "$VENV/.complete"
fi
cd tests/plan
rc=0
DS_ACCELERATOR=cuda "$VENV/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
  test_framework_parsers.py || rc=$?
if [ "$rc" -eq 5 ]; then echo "test-framework-parsers: pytest collected no tests" >&2; exit 1; fi
exit "$rc"
