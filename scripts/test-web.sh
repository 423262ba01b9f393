#!/bin/sh
# The browser tests of placer serve's page (tests/web): Debian's pytest and
# Selenium (/usr/bin/python3, where python3-selenium installs) drive Debian's
# headless chromium through chromium-driver against `placer serve` started
# by the tests on a free port of 127.0.0.1. PLACER_BIN names the binary
# (default build/cli/placer); SCREENSHOTS=DIR keeps the screenshots (the
# docs' come from SCREENSHOTS=docs/serve). Fails when pytest collects none.
set -eu
cd "$(dirname "$0")/.."
PLACER_BIN=${PLACER_BIN:-$PWD/build/cli/placer}
export PLACER_BIN
[ -x "$PLACER_BIN" ] || { echo "test-web: no placer binary at $PLACER_BIN (run scripts/build.sh)" >&2; exit 1; }
rc=0
/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/web || rc=$?
if [ "$rc" -eq 5 ]; then echo "test-web: pytest collected no tests" >&2; exit 1; fi
exit "$rc"
