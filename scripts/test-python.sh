#!/bin/sh
# The Python package's tests (issue 19): pip install . into a virtual
# environment under build-python/ (Debian 12's pip refuses system installs,
# PEP 668), then pytest on python/tests against the `placer` command the
# build made (PLACER_BIN, default build/cli/placer). Fails when pip or any
# test fails, and when pytest collects no test (its exit 5).
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=$PWD/build-python/venv
LOG=$PWD/build-python/pip.log
PLACER_BIN=${PLACER_BIN:-$PWD/build/cli/placer}
export PLACER_BIN
[ -x "$PLACER_BIN" ] || { echo "test-python: no placer binary at $PLACER_BIN (run scripts/build.sh)" >&2; exit 1; }
mkdir -p build-python
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV" >"$LOG" 2>&1 || { cat "$LOG" >&2; exit 1; }
fi
# build requirements installed once, then the package built without isolation
# (no second download per run) in a kept build directory (incremental). The
# versions are the ones the tests last passed with, so that a new release
# cannot change CI's result unseen.
"$VENV/bin/python" -m pip install -q --disable-pip-version-check meson-python==0.22.1 meson==1.12.1 \
  ninja==1.13.2 numpy==2.4.6 gymnasium==1.4.0 pytest==9.2.0 >"$LOG" 2>&1 || { tail -30 "$LOG" >&2; exit 1; }
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation \
  --config-settings=build-dir="$PWD/build-python/meson" . >>"$LOG" 2>&1 || { tail -40 "$LOG" >&2; exit 1; }
cd python/tests
rc=0
"$VENV/bin/python" -m pytest -q -p no:cacheprovider || rc=$?
if [ "$rc" -eq 5 ]; then echo "test-python: pytest collected no tests" >&2; exit 1; fi
exit "$rc"
